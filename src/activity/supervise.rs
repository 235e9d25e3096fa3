//! The supervisor: the body of `iced __supervise <dir>`. It names itself in `supervisor.json`,
//! asks the gate whether its launch is still current, runs the child in a process group of its
//! own, keeps the tails of its output, stops it on timeout or when asked, and writes the outcome.
//! It is a child subreaper (SPEC 24.7): a process the child starts in a session of its own, or
//! orphans by a double fork, is still below it, and is killed with the rest.
//!
//! It must never start a child the gate did not allow, never leave a process below it running
//! once it has written the outcome, and never hold more than a bounded amount of output.

use super::procinfo::{group_has_live_member, live_descendants, pid_start_time};
use super::spec::{ActivitySpec, Outcome, SupervisorRecord};
use super::tail::{self, Tail};
use super::{files, Gate};
use crate::store;
use nix::errno::Errno;
use nix::sys::signal::{self, SaFlags, SigAction, SigHandler, SigSet, Signal};
use nix::sys::wait::{waitid, waitpid, Id, WaitPidFlag, WaitStatus};
use nix::unistd::{getppid, Pid};
use std::io;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

/// The outcome was written, or the gate said the launch is no longer current.
const EXIT_OK: i32 = 0;
/// The spec could not be read, or a record could not be written.
const EXIT_FAILED: i32 = 1;

/// How often the main loop looks at the stop flag while it waits for the child.
const POLL: Duration = Duration::from_millis(20);
/// After the group is killed: how long its members may take to die, and then how long the pipes
/// may stay open (a process that left the group can hold them forever; its output is lost).
const GROUP_DEATH_BOUND: Duration = Duration::from_secs(1);
/// How long the processes below the supervisor may take to die, forking or not, before it gives
/// up on them and writes the outcome all the same.
const DESCENDANTS_DEATH_BOUND: Duration = Duration::from_secs(5);
const PIPE_CLOSE_BOUND: Duration = Duration::from_secs(2);

const MAX_GRACE_MS: u64 = 24 * 60 * 60 * 1000;

/// Set by SIGTERM, SIGINT or SIGHUP. A supervisor process runs one activity, so one flag serves.
static STOP_REQUESTED: AtomicBool = AtomicBool::new(false);

extern "C" fn request_stop(_signal: std::ffi::c_int) {
    // An atomic store is all a signal handler may safely do here.
    STOP_REQUESTED.store(true, Ordering::SeqCst);
}

fn install_stop_handlers() -> nix::Result<()> {
    let action = SigAction::new(
        SigHandler::Handler(request_stop),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for sig in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe { signal::sigaction(sig, &action) }?;
    }
    Ok(())
}

/// Which processes the clean-up after the child reaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Reach {
    /// The supervisor's process runs this one activity (`iced __supervise`): it is a child
    /// subreaper, and every process below it belongs to the activity and is killed.
    Descendants,
    /// A supervisor sharing its process with other children (the unit tests, which run several
    /// at once): only the child's process group is killed.
    #[cfg_attr(not(test), allow(dead_code))]
    Group,
}

/// The body of the hidden `__supervise <dir>` subcommand; returns the process exit code.
pub fn supervise(dir: &Path, gate: &dyn Gate) -> i32 {
    supervise_reaching(dir, gate, Reach::Descendants)
}

/// [`supervise`] with the clean-up reaching as far as `reach` says.
pub(super) fn supervise_reaching(dir: &Path, gate: &dyn Gate, reach: Reach) -> i32 {
    // Before `supervisor.json` exists, so that `stop()`, which needs it, always finds the
    // handlers in place rather than the default action (which would look like a crash).
    if let Err(e) = install_stop_handlers() {
        log(dir, &format!("cannot install signal handlers: {e}"));
        return EXIT_FAILED;
    }
    supervise_with(dir, gate, &STOP_REQUESTED, reach)
}

/// `supervise` with the stop request read from `stop`, so tests can run several at once.
pub(super) fn supervise_with(dir: &Path, gate: &dyn Gate, stop: &AtomicBool, reach: Reach) -> i32 {
    let spec = match super::read_spec(dir) {
        Ok(spec) => spec,
        Err(e) => {
            log(dir, &format!("cannot read the spec: {e}"));
            return EXIT_FAILED;
        }
    };
    let pid = std::process::id();
    let Some(pid_start) = pid_start_time(pid) else {
        log(dir, "cannot read this process's start time from /proc");
        return EXIT_FAILED;
    };
    let record = SupervisorRecord {
        pid,
        pid_start,
        nonce: spec.nonce.clone(),
    };
    if let Err(e) = super::write_json(&dir.join(files::SUPERVISOR), &record) {
        log(dir, &format!("cannot write the supervisor record: {e}"));
        return EXIT_FAILED;
    }
    // The gate is the only thing that makes a launch run at most once: a supervisor whose step
    // record has moved on (superseded, or already run by an earlier supervisor) starts nothing.
    match gate.register(&spec.gate, &spec.nonce, pid, pid_start) {
        Ok(true) => {}
        Ok(false) => {
            log(dir, "the launch is no longer current; nothing started");
            return EXIT_OK;
        }
        Err(e) => {
            log(dir, &format!("registration failed; nothing started: {e}"));
            return EXIT_OK;
        }
    }
    let finished = run(dir, &spec, stop, reach);
    match write_results(dir, &finished) {
        Ok(()) => EXIT_OK,
        Err(e) => {
            log(dir, &format!("cannot write the outcome: {e}"));
            EXIT_FAILED
        }
    }
}

/// What a run leaves: the outcome and the two tails it summarises.
struct Finished {
    outcome: Outcome,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

/// `stdout.txt` and `stderr.txt` before `outcome.json`: a reader that finds the outcome can rely on
/// the tails being there.
fn write_results(dir: &Path, finished: &Finished) -> Result<(), super::ActivityError> {
    store::write_atomic(&dir.join(files::STDOUT), &finished.stdout, 0o600)?;
    store::write_atomic(&dir.join(files::STDERR), &finished.stderr, 0o600)?;
    let mut outcome = finished.outcome.clone();
    outcome.supervisor_max_rss_kb =
        nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF)
            .ok()
            .and_then(|u| u64::try_from(u.max_rss()).ok());
    super::write_json(&dir.join(files::OUTCOME), &outcome)
}

fn not_started(spec: &ActivitySpec, stopped: bool, spawn_error: Option<String>) -> Finished {
    Finished {
        outcome: Outcome {
            nonce: spec.nonce.clone(),
            exit_code: None,
            signal: None,
            timed_out: false,
            stopped,
            duration_ms: 0,
            stdout: Default::default(),
            stderr: Default::default(),
            spawn_error,
            supervisor_max_rss_kb: None,
        },
        stdout: Vec::new(),
        stderr: Vec::new(),
    }
}

fn spawn(spec: &ActivitySpec) -> io::Result<Child> {
    let (program, args) = spec
        .argv
        .split_first()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the command is empty"))?;
    let supervisor = Pid::this();
    let stdin = match &spec.stdin {
        // The loop's own file: never a link, never a FIFO that would block the open.
        Some(path) => {
            Stdio::from(store::open_regular(path, store::Links::Refuse).map_err(io::Error::other)?)
        }
        None => Stdio::null(),
    };
    let mut command = Command::new(program);
    command
        .args(args)
        .current_dir(&spec.cwd)
        .env_clear()
        .envs(
            spec.child_env(
                &std::env::vars_os()
                    .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                    .collect::<Vec<_>>(),
            ),
        )
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // setpgid(0, 0) in the child before exec: the group is what timeouts and the final
        // clean-up signal.
        .process_group(0);
    // SAFETY: between fork and exec only async-signal-safe calls are made (prctl, getppid), and
    // nothing allocates: errors are built from raw errno values.
    unsafe {
        command.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
            // The supervisor may have died before the line above took effect; then no signal
            // will ever come, so the child must not start at all.
            if getppid() != supervisor {
                return Err(io::Error::from_raw_os_error(Errno::ESRCH as i32));
            }
            Ok(())
        });
    }
    command.spawn()
}

/// What set off the stop sequence.
#[derive(Clone, Copy, PartialEq)]
enum Cause {
    Timeout,
    Stop,
}

/// Where the stop sequence is: each stage has a deadline after which the next begins.
#[derive(Clone, Copy)]
enum Stage {
    Running { deadline: Option<Instant> },
    Interrupted { until: Instant },
    Terminated { until: Instant },
    Killed,
}

fn run(dir: &Path, spec: &ActivitySpec, stop: &AtomicBool, reach: Reach) -> Finished {
    if stop.load(Ordering::SeqCst) {
        log(
            dir,
            "asked to stop before the child started; nothing started",
        );
        return not_started(spec, true, None);
    }
    // Before the child exists, so that nothing it starts can be orphaned past us to init.
    if reach == Reach::Descendants {
        if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
            log(
                dir,
                &format!("cannot become a child subreaper ({e}); orphans of the child may escape"),
            );
        }
    }
    let mut child = match spawn(spec) {
        Ok(child) => child,
        Err(e) => {
            let program = spec.argv.first().map_or("", String::as_str);
            let message = format!("cannot start `{program}`: {e}");
            log(dir, &message);
            return not_started(spec, false, Some(message));
        }
    };
    let started = Instant::now();
    let pid = child.id();
    let group = Pid::from_raw(pid as i32);
    if let Some(pid_start) = super::pid_start_time(pid) {
        let record = super::spec::ChildRecord { pid, pid_start };
        if let Err(e) = super::write_json(&dir.join(files::CHILD), &record) {
            log(dir, &format!("could not write child.json: {e}"));
        }
    }

    let stdout_tail = Arc::new(Mutex::new(Tail::default()));
    let stderr_tail = Arc::new(Mutex::new(Tail::default()));
    let (drained_tx, drained_rx) = mpsc::channel();
    if let Some(out) = child.stdout.take() {
        spawn_reader(out, &stdout_tail, drained_tx.clone());
    }
    if let Some(err) = child.stderr.take() {
        spawn_reader(err, &stderr_tail, drained_tx);
    }

    // The child is only waited for here, not reaped: while it is an unreaped zombie its pid, and
    // so its group id, cannot be reused, which makes signalling the group safe until we reap it.
    let (exited_tx, exited_rx) = mpsc::channel();
    let waiter = thread::Builder::new()
        .name("activity-wait".into())
        .spawn(move || {
            while waitid(Id::Pid(group), WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT)
                == Err(Errno::EINTR)
            {}
            let _ = exited_tx.send(());
        });
    if waiter.is_err() {
        // Without a waiter the loop below would not see the exit; kill at once rather than hang.
        log(
            dir,
            "cannot start a thread to wait for the child; killing it",
        );
        let _ = signal::killpg(group, Signal::SIGKILL);
    }

    // Clamped so that `now + grace` cannot overflow; a day is longer than any sane grace.
    let grace = Duration::from_millis(spec.grace_ms.min(MAX_GRACE_MS));
    let mut stage = Stage::Running {
        deadline: started.checked_add(Duration::from_millis(spec.timeout_ms)),
    };
    let mut cause = None;
    loop {
        let now = Instant::now();
        let next = match stage {
            Stage::Running { deadline } => {
                let stop_asked = stop.load(Ordering::SeqCst);
                if stop_asked || deadline.is_some_and(|d| now >= d) {
                    let why = if stop_asked {
                        Cause::Stop
                    } else {
                        Cause::Timeout
                    };
                    cause = Some(why);
                    signal_group(dir, group, Signal::SIGINT);
                    Stage::Interrupted { until: now + grace }
                } else {
                    stage
                }
            }
            Stage::Interrupted { until } if now >= until => {
                signal_group(dir, group, Signal::SIGTERM);
                Stage::Terminated { until: now + grace }
            }
            Stage::Terminated { until } if now >= until => {
                signal_group(dir, group, Signal::SIGKILL);
                Stage::Killed
            }
            other => other,
        };
        stage = next;
        let wait = match stage {
            Stage::Running { deadline } => {
                deadline.map_or(POLL, |d| d.saturating_duration_since(now))
            }
            Stage::Interrupted { until } | Stage::Terminated { until } => {
                until.saturating_duration_since(now)
            }
            Stage::Killed => POLL,
        };
        match exited_rx.recv_timeout(wait.min(POLL)) {
            Ok(()) | Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => {}
        }
        if reach == Reach::Descendants {
            // Orphans reparented here that have exited: zombies hold their pids until reaped.
            reap_orphans(pid);
        }
    }

    // The child has ended; whatever it left in its group (a background job, a process that
    // ignores SIGINT, one holding the pipes) goes with it, before the child is reaped. Then
    // everything else below us, wherever it moved (SPEC 24.7).
    kill_group(group);
    if reach == Reach::Descendants {
        kill_descendants(dir, pid);
    }
    let status = child.wait();
    if reach == Reach::Descendants {
        reap_orphans(pid);
    }
    let duration = started.elapsed();
    wait_for_readers(dir, &drained_rx);

    let (exit_code, signal) = match status {
        Ok(status) => (status.code(), status.signal()),
        Err(e) => {
            log(dir, &format!("cannot reap the child {pid}: {e}"));
            (None, None)
        }
    };
    let take = |tail: &Arc<Mutex<Tail>>| {
        let tail = tail.lock().unwrap_or_else(PoisonError::into_inner);
        (tail.text().to_vec(), tail.summary())
    };
    let (stdout, stdout_summary) = take(&stdout_tail);
    let (stderr, stderr_summary) = take(&stderr_tail);
    Finished {
        outcome: Outcome {
            nonce: spec.nonce.clone(),
            exit_code,
            signal,
            timed_out: cause == Some(Cause::Timeout),
            stopped: cause == Some(Cause::Stop),
            duration_ms: u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
            stdout: stdout_summary,
            stderr: stderr_summary,
            spawn_error: None,
            supervisor_max_rss_kb: None,
        },
        stdout,
        stderr,
    }
}

fn spawn_reader(
    source: impl io::Read + Send + 'static,
    tail: &Arc<Mutex<Tail>>,
    drained: mpsc::Sender<()>,
) {
    let tail = Arc::clone(tail);
    // If no thread can be started the pipe is never read: a child that fills it blocks until the
    // timeout, which still ends the activity.
    let _ = thread::Builder::new()
        .name("activity-read".into())
        .spawn(move || {
            tail::drain(source, &tail);
            let _ = drained.send(());
        });
}

fn signal_group(dir: &Path, group: Pid, sig: Signal) {
    log(dir, &format!("sending {sig} to process group {group}"));
    // ESRCH: the group emptied on its own since we last looked, which is what we wanted.
    let _ = signal::killpg(group, sig);
}

/// SIGKILL every member of the group, and wait (bounded) until none is left alive. The leader is
/// an unreaped zombie throughout, so the group id still names this group.
fn kill_group(group: Pid) {
    let pgid = group.as_raw() as u32;
    let give_up = Instant::now() + GROUP_DEATH_BOUND;
    loop {
        let _ = signal::killpg(group, Signal::SIGKILL);
        if !group_has_live_member(pgid) || Instant::now() >= give_up {
            return;
        }
        thread::sleep(Duration::from_millis(5));
    }
}

/// SIGKILL every live process below the supervisor, again and again while any is left (one may
/// fork between a look and the kill; its child is then below us too, as we are a subreaper), and
/// reap those reparented here, within a bound. The child itself is an unreaped zombie by now and
/// is left for `wait`.
fn kill_descendants(dir: &Path, child: u32) {
    let me = std::process::id();
    let give_up = Instant::now() + DESCENDANTS_DEATH_BOUND;
    loop {
        let live = live_descendants(me);
        if live.is_empty() {
            return;
        }
        if Instant::now() >= give_up {
            log(
                dir,
                &format!("processes below the supervisor survived SIGKILL: {live:?}"),
            );
            return;
        }
        for pid in live {
            let _ = signal::kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
        }
        reap_orphans(child);
        thread::sleep(Duration::from_millis(5));
    }
}

/// Reap every child of the supervisor that has exited, except `child` (reaped by `wait`, and kept
/// unreaped until then so that its group id is not reused). Never blocks.
fn reap_orphans(child: u32) {
    loop {
        // Look without reaping first: reaping `child` here would take its status from `wait`.
        let exited = match waitid(
            Id::All,
            WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT,
        ) {
            Ok(WaitStatus::Exited(pid, _) | WaitStatus::Signaled(pid, _, _)) => pid,
            _ => return,
        };
        if exited.as_raw() as u32 == child {
            // The kernel names the child first while it waits; the others are reaped after
            // `wait` has taken it.
            return;
        }
        let _ = waitpid(exited, Some(WaitPidFlag::WNOHANG));
    }
}

/// Both pipes closed, or the bound passed; what arrived so far is what is kept either way.
fn wait_for_readers(dir: &Path, drained: &Receiver<()>) {
    let give_up = Instant::now() + PIPE_CLOSE_BOUND;
    for _ in 0..2 {
        let left = give_up.saturating_duration_since(Instant::now());
        match drained.recv_timeout(left) {
            Ok(()) => {}
            // Every reader has finished (or one never started) and dropped its sender.
            Err(RecvTimeoutError::Disconnected) => return,
            Err(RecvTimeoutError::Timeout) => {
                log(
                    dir,
                    "an output pipe is still open after the group was killed; not waiting",
                );
                return;
            }
        }
    }
}

/// A line in `supervisor.log`. The supervisor has no terminal; this file is where it speaks.
fn log(dir: &Path, message: &str) {
    let line = format!(
        "{} [{}] {message}\n",
        crate::clock::now_iso(),
        std::process::id()
    );
    let _ = store::append(&dir.join(files::LOG), line.as_bytes(), 0o600);
}
