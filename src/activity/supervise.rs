//! The supervisor: the body of `iced __supervise <dir>`. It names itself in `supervisor.json`,
//! asks the gate whether its launch is still current, runs the child in a process group of its
//! own, keeps the tails of its output, stops it on timeout or when asked, and writes the outcome.
//! It is a child subreaper (SPEC 24.7): a process the child starts in a session of its own, or
//! orphans by a double fork, is still below it, and is killed with the rest.
//!
//! It is one task on a current-thread tokio runtime that awaits together the child's exit
//! (SIGCHLD, then a look that leaves it unreaped), both pipes, the timeout and a stop request, and
//! sleeps in between: no other thread, no polling loop (SPEC 21.4). Orphans that exit on the way
//! raise SIGCHLD too and are reaped then. The launcher is not watched: the supervisor is meant to
//! outlive it.
//!
//! It must never start a child the gate did not allow, never leave a process below it running
//! once it has written the outcome, and never hold more than a bounded amount of output.

use super::procinfo::{group_has_live_member, live_descendants, pid_start_time};
use super::spec::{ActivitySpec, Outcome, SupervisorRecord};
use super::stop::{StopRequest, StopSignals};
use super::tail::{self, Tail};
use super::{files, Gate};
use crate::store;
use nix::errno::Errno;
use nix::sys::signal::{self, Signal};
use nix::sys::wait::{waitid, waitpid, Id, WaitPidFlag, WaitStatus};
use nix::unistd::{getppid, Pid};
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::pin::pin;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tokio::signal::unix::{signal as listen, Signal as Listener, SignalKind};

/// The outcome was written, or the gate said the launch is no longer current.
const EXIT_OK: i32 = 0;
/// The spec could not be read, or a record could not be written.
const EXIT_FAILED: i32 = 1;

/// After the group is killed: how long its members may take to die, and then how long the pipes
/// may stay open (a process that left the group can hold them forever; its output is lost).
const GROUP_DEATH_BOUND: Duration = Duration::from_secs(1);
/// How long the processes below the supervisor may take to die, forking or not, before it gives
/// up on them and writes the outcome all the same.
const DESCENDANTS_DEATH_BOUND: Duration = Duration::from_secs(5);
const PIPE_CLOSE_BOUND: Duration = Duration::from_secs(2);
/// While what it killed is dying: how long before it looks again.
const KILL_RECHECK: Duration = Duration::from_millis(5);
/// How often it looks for the child's exit when SIGCHLD cannot be listened for (not expected;
/// this keeps the supervisor working rather than stuck).
const EXIT_POLL_WITHOUT_SIGCHLD: Duration = Duration::from_millis(100);

const MAX_GRACE_MS: u64 = 24 * 60 * 60 * 1000;

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

/// The body of the hidden `__supervise <dir>` subcommand; returns the process exit code. `ready`
/// is the registration pipe's write end the launcher gave it ([`super::ready_pipe`]): closed once
/// `supervisor.json` is written, which is what the launcher waits for.
pub fn supervise(dir: &Path, ready: Option<OwnedFd>, gate: &dyn Gate) -> i32 {
    supervise_reaching(dir, ready, gate, Reach::Descendants)
}

/// [`supervise`] with the clean-up reaching as far as `reach` says. SIGTERM, SIGINT or SIGHUP to
/// this process asks it to stop.
pub(super) fn supervise_reaching(
    dir: &Path,
    ready: Option<OwnedFd>,
    gate: &dyn Gate,
    reach: Reach,
) -> i32 {
    let Some(runtime) = runtime(dir) else {
        return EXIT_FAILED;
    };
    runtime.block_on(async {
        // Before `supervisor.json` exists, so that `stop()`, which needs it, always finds the
        // listeners in place rather than the default action (which would look like a crash).
        let signals = match StopSignals::listen() {
            Ok(signals) => signals,
            Err(e) => {
                log(dir, &format!("cannot listen for stop signals: {e}"));
                return EXIT_FAILED;
            }
        };
        let stop = StopRequest::default();
        tokio::select! {
            // The signals first: a stop that has arrived is passed on before the run looks.
            biased;
            never = signals.forward(&stop) => match never {},
            code = supervise_on(dir, ready, gate, &stop, reach) => code,
        }
    })
}

/// [`supervise`] with the stop request made by the caller, so tests can run several at once.
#[cfg(test)]
pub(super) fn supervise_with(dir: &Path, gate: &dyn Gate, stop: &StopRequest, reach: Reach) -> i32 {
    let Some(runtime) = runtime(dir) else {
        return EXIT_FAILED;
    };
    runtime.block_on(supervise_on(dir, None, gate, stop, reach))
}

/// One thread, with I/O (the pipes, the signals) and timers.
fn runtime(dir: &Path) -> Option<tokio::runtime::Runtime> {
    match tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
    {
        Ok(runtime) => Some(runtime),
        Err(e) => {
            log(dir, &format!("cannot start the runtime: {e}"));
            None
        }
    }
}

async fn supervise_on(
    dir: &Path,
    ready: Option<OwnedFd>,
    gate: &dyn Gate,
    stop: &StopRequest,
    reach: Reach,
) -> i32 {
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
    // Not registered yet: to every other call a supervisor still starting (SPEC 21.4).
    crate::failpoint::hit("supervisor-before-record");
    if let Err(e) = super::write_json(&dir.join(files::SUPERVISOR), &record) {
        log(dir, &format!("cannot write the supervisor record: {e}"));
        return EXIT_FAILED;
    }
    // Registered: the launcher waiting on the pipe goes on now, before the gate is even asked
    // (SPEC 21.4), and the child can never inherit the pipe.
    crate::failpoint::hit("supervisor-before-ready");
    drop(ready);
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
    crate::failpoint::hit("supervisor-after-gate");
    // Held from before the child starts: what it does to the folders' paths meanwhile (a link in
    // their place) cannot send the removal anywhere else.
    let discard = Discard::open(dir, &spec.discard);
    let finished = run(dir, &spec, stop, reach).await;
    // The child and everything below it have ended: what it was given for its run alone goes.
    discard.remove(dir);
    crate::failpoint::hit("supervisor-before-outcome");
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
    // Built here, before the fork: the child only enters it (SPEC 24.12).
    let confinement = spec
        .confine
        .as_ref()
        .map(crate::confine::prepare)
        .transpose()
        .map_err(|why| io::Error::other(format!("cannot confine the agent: {why}")))?;
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
    // SAFETY: between fork and exec only async-signal-safe calls are made (prctl, sigaction,
    // getppid, the two system calls of `enter`), and nothing allocates: errors are built from raw
    // errno values.
    unsafe {
        let entry = confinement.as_ref().map(crate::confine::Prepared::entry);
        command.pre_exec(move || {
            // The stop sequence's signals mean stop, whatever this process had them do: an ignored
            // signal stays ignored across exec, and one a process started in the background
            // (`cmd &` in a script) ignores SIGINT, which made the sequence's SIGINT a no-op
            // that only SIGTERM, a grace later, undid (SPEC 21.4).
            for sig in [Signal::SIGINT, Signal::SIGTERM] {
                signal::signal(sig, signal::SigHandler::SigDfl)?;
            }
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
            // The supervisor may have died before the line above took effect; then no signal
            // will ever come, so the child must not start at all.
            if getppid() != supervisor {
                return Err(io::Error::from_raw_os_error(Errno::ESRCH as i32));
            }
            // `confinement` holds the rules open until `spawn` below has forked.
            if let Some(entry) = entry {
                entry.enter().map_err(io::Error::from_raw_os_error)?;
            }
            Ok(())
        });
    }
    let child = command.spawn();
    drop(confinement);
    child
}

/// What set off the stop sequence.
#[derive(Clone, Copy, PartialEq)]
enum Cause {
    Timeout,
    Stop,
}

/// The child's exit, awaited without reaping it: while it is an unreaped zombie its pid, and so
/// its group id, cannot be reused, which makes signalling the group safe until it is reaped.
struct Exit {
    child: Pid,
    /// Raised when the child, or an orphan reparented here, ends; `None` if it could not be
    /// listened for, and then the exit is looked for now and then.
    sigchld: Option<Listener>,
    reach: Reach,
}

impl Exit {
    /// Ready once the child has exited. Orphans that exit meanwhile are reaped: zombies hold
    /// their pids until then.
    async fn done(&mut self) {
        loop {
            if self.reach == Reach::Descendants {
                reap_orphans(self.child.as_raw() as u32);
            }
            if has_exited(self.child) {
                return;
            }
            // Listening began before the child was spawned, so a SIGCHLD that came since the
            // look above is not lost: `recv` returns at once for it.
            match &mut self.sigchld {
                Some(sigchld) => {
                    if sigchld.recv().await.is_none() {
                        self.sigchld = None;
                    }
                }
                None => tokio::time::sleep(EXIT_POLL_WITHOUT_SIGCHLD).await,
            }
        }
    }

    /// Wait for the child to end. On the deadline or a stop request, run the stop sequence
    /// (SIGINT, grace, SIGTERM, grace, SIGKILL to the group) until it has. Returns what set the
    /// sequence off, if anything did.
    async fn end(
        &mut self,
        dir: &Path,
        deadline: Option<tokio::time::Instant>,
        grace: Duration,
        stop: &StopRequest,
    ) -> Option<Cause> {
        let timeout = async {
            match deadline {
                Some(deadline) => tokio::time::sleep_until(deadline).await,
                None => std::future::pending().await,
            }
        };
        let cause = tokio::select! {
            // An exit that has come wins over a deadline or a request that comes with it.
            biased;
            () = self.done() => return None,
            () = timeout => Cause::Timeout,
            () = stop.requested() => Cause::Stop,
        };
        let group = self.child;
        for sig in [Signal::SIGINT, Signal::SIGTERM] {
            signal_group(dir, group, sig);
            if tokio::time::timeout(grace, self.done()).await.is_ok() {
                return Some(cause);
            }
        }
        signal_group(dir, group, Signal::SIGKILL);
        self.done().await;
        Some(cause)
    }
}

/// Whether the child has exited, leaving it unreaped. An error (it is not our child, or was
/// reaped elsewhere) counts as exited: there is nothing left to wait for.
fn has_exited(child: Pid) -> bool {
    loop {
        match waitid(
            Id::Pid(child),
            WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT,
        ) {
            Ok(WaitStatus::StillAlive) => return false,
            Err(Errno::EINTR) => continue,
            Ok(_) | Err(_) => return true,
        }
    }
}

/// How the child ended, as the run reports it.
struct Ended {
    cause: Option<Cause>,
    status: io::Result<std::process::ExitStatus>,
    duration: Duration,
}

async fn run(dir: &Path, spec: &ActivitySpec, stop: &StopRequest, reach: Reach) -> Finished {
    // A stop signal that came while the gate was asked reaches `stop` once the runtime has looked
    // at its signals, which yielding to it makes it do.
    tokio::task::yield_now().await;
    if stop.is_requested() {
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
    // Before the child exists too, so that its exit cannot come before anyone listens.
    let sigchld = match listen(SignalKind::child()) {
        Ok(sigchld) => Some(sigchld),
        Err(e) => {
            log(
                dir,
                &format!("cannot listen for SIGCHLD ({e}); looking for the child's exit instead"),
            );
            None
        }
    };
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
    let deadline = tokio::time::Instant::now().checked_add(Duration::from_millis(spec.timeout_ms));
    let pid = child.id();
    if let Some(pid_start) = super::pid_start_time(pid) {
        let record = super::spec::ChildRecord { pid, pid_start };
        if let Err(e) = super::write_json(&dir.join(files::CHILD), &record) {
            log(dir, &format!("could not write child.json: {e}"));
        }
    }
    crate::failpoint::hit("supervisor-after-spawn");
    let stdout = child
        .stdout
        .take()
        .and_then(|out| readable(dir, tokio::process::ChildStdout::from_std(out)));
    let stderr = child
        .stderr
        .take()
        .and_then(|err| readable(dir, tokio::process::ChildStderr::from_std(err)));

    let mut exit = Exit {
        child: Pid::from_raw(pid as i32),
        sigchld,
        reach,
    };
    // Clamped so that `now + grace` cannot overflow; a day is longer than any sane grace.
    let grace = Duration::from_millis(spec.grace_ms.min(MAX_GRACE_MS));
    let (mut stdout_tail, mut stderr_tail) = (Tail::default(), Tail::default());
    let ended = {
        let mut drained = false;
        let mut drains = pin!(async {
            tokio::join!(
                tail::drain(stdout, &mut stdout_tail),
                tail::drain(stderr, &mut stderr_tail)
            )
        });
        let mut ending = pin!(async {
            let cause = exit.end(dir, deadline, grace, stop).await;
            let group = exit.child;
            // The child has ended; whatever it left in its group (a background job, a process
            // that ignores SIGINT, one holding the pipes) goes with it, before the child is
            // reaped. Then everything else below us, wherever it moved (SPEC 24.7).
            kill_group(group).await;
            if reach == Reach::Descendants {
                kill_descendants(dir, pid).await;
            }
            // A zombie by now: this does not block.
            let status = child.wait();
            if reach == Reach::Descendants {
                reap_orphans(pid);
            }
            Ended {
                cause,
                status,
                duration: started.elapsed(),
            }
        });
        let ended = loop {
            tokio::select! {
                ended = &mut ending => break ended,
                _ = &mut drains, if !drained => drained = true,
            }
        };
        // What is still in the pipes arrives now; a process that escaped the kills and holds
        // them open is not waited for past the bound, and what arrived so far is kept.
        if !drained
            && tokio::time::timeout(PIPE_CLOSE_BOUND, &mut drains)
                .await
                .is_err()
        {
            log(
                dir,
                "an output pipe is still open after the group was killed; not waiting",
            );
        }
        ended
    };

    let (exit_code, signal) = match ended.status {
        Ok(status) => (status.code(), status.signal()),
        Err(e) => {
            log(dir, &format!("cannot reap the child {pid}: {e}"));
            (None, None)
        }
    };
    Finished {
        outcome: Outcome {
            nonce: spec.nonce.clone(),
            exit_code,
            signal,
            timed_out: ended.cause == Some(Cause::Timeout),
            stopped: ended.cause == Some(Cause::Stop),
            duration_ms: u64::try_from(ended.duration.as_millis()).unwrap_or(u64::MAX),
            stdout: stdout_tail.summary(),
            stderr: stderr_tail.summary(),
            spawn_error: None,
            supervisor_max_rss_kb: None,
        },
        stdout: stdout_tail.text().to_vec(),
        stderr: stderr_tail.text().to_vec(),
    }
}

/// A pipe of the child's, ready to be awaited. If the runtime cannot take it (not expected), its
/// output is lost and the child's writes to it fail; the activity still ends and is reported.
fn readable<T>(dir: &Path, pipe: io::Result<T>) -> Option<T> {
    pipe.map_err(|e| log(dir, &format!("cannot read an output pipe: {e}")))
        .ok()
}

fn signal_group(dir: &Path, group: Pid, sig: Signal) {
    log(dir, &format!("sending {sig} to process group {group}"));
    // ESRCH: the group emptied on its own since we last looked, which is what we wanted.
    let _ = signal::killpg(group, sig);
}

/// SIGKILL every member of the group, and wait (bounded) until none is left alive. The leader is
/// an unreaped zombie throughout, so the group id still names this group.
async fn kill_group(group: Pid) {
    let pgid = group.as_raw() as u32;
    let give_up = Instant::now() + GROUP_DEATH_BOUND;
    loop {
        let _ = signal::killpg(group, Signal::SIGKILL);
        if !group_has_live_member(pgid) || Instant::now() >= give_up {
            return;
        }
        tokio::time::sleep(KILL_RECHECK).await;
    }
}

/// SIGKILL every live process below the supervisor, again and again while any is left (one may
/// fork between a look and the kill; its child is then below us too, as we are a subreaper), and
/// reap those reparented here, within a bound. The child itself is an unreaped zombie by now and
/// is left for `wait`.
async fn kill_descendants(dir: &Path, child: u32) {
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
        tokio::time::sleep(KILL_RECHECK).await;
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

/// The files of [`ActivitySpec::discard`], each as its folder (opened without following a link)
/// and its name in it.
struct Discard(Vec<(OwnedFd, std::ffi::OsString)>);

impl Discard {
    fn open(dir: &Path, paths: &[std::path::PathBuf]) -> Discard {
        use nix::fcntl::{open, OFlag};
        let mut held = Vec::new();
        for path in paths {
            let (Some(folder), Some(name)) = (path.parent(), path.file_name()) else {
                continue;
            };
            let flags = OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
            match open(folder, flags, nix::sys::stat::Mode::empty()) {
                Ok(fd) => held.push((fd, name.to_owned())),
                Err(e) => log(dir, &format!("cannot open `{}`: {e}", folder.display())),
            }
        }
        Discard(held)
    }

    /// Unlink each file by its name in its folder (a link there is removed, not followed).
    fn remove(self, dir: &Path) {
        for (folder, name) in &self.0 {
            match nix::unistd::unlinkat(
                folder,
                name.as_os_str(),
                nix::unistd::UnlinkatFlags::NoRemoveDir,
            ) {
                Ok(()) | Err(Errno::ENOENT) => {}
                Err(e) => log(
                    dir,
                    &format!("cannot remove `{}`: {e}", name.to_string_lossy()),
                ),
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
