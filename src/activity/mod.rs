//! Activities (SPEC 21.4): an agent run or a definition-of-done command, run by a detached
//! supervisor (`iced __supervise <dir>`) so that it outlives the invocation that launched it.
//!
//! An activity lives in one directory, which is its whole interface: `spec.json` (what to run,
//! written by [`launch`]), `launched.json` (the supervisor [`launch`] started), `supervisor.json`
//! (who runs it, written by the supervisor once it has started), `stdout.txt`, `stderr.txt` and
//! `outcome.json` (how it ended, written last), and `supervisor.log`. Any later invocation can
//! [`observe`] or [`stop`] it from the directory alone.
//!
//! This module runs a command and reports how it ended; it never decides whether a launch is
//! current (the [`Gate`] does, under the run's lock) and never reads the run state.

mod procinfo;
mod spec;
mod stop;
mod supervise;
mod tail;
#[cfg(test)]
mod tests;

#[cfg(test)]
pub(crate) use procinfo::git_sleeping;
pub use procinfo::{pid_start_time, working_in, Working};
pub use spec::{
    expand_vars, ActivitySpec, LaunchedRecord, Outcome, StreamSummary, SupervisorRecord,
};
pub use supervise::supervise;
pub use tail::{MAX_BYTES, MAX_LINES};

use crate::store::{self, StoreError};
use nix::fcntl::OFlag;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use serde::{de::DeserializeOwned, Serialize};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The hidden subcommand that runs [`supervise`]: `iced __supervise <dir>`.
pub const SUPERVISE_SUBCOMMAND: &str = "__supervise";

/// The names of the files in an activity directory.
pub mod files {
    pub const SPEC: &str = "spec.json";
    pub const SUPERVISOR: &str = "supervisor.json";
    pub const LAUNCHED: &str = "launched.json";
    pub const OUTCOME: &str = "outcome.json";
    pub const CHILD: &str = "child.json";
    pub const STDOUT: &str = "stdout.txt";
    pub const STDERR: &str = "stderr.txt";
    pub const LOG: &str = "supervisor.log";
}

/// Upper bounds on what is read back; every file here is written by iced and far smaller.
const SPEC_LIMIT: u64 = 4 * 1024 * 1024;
const RECORD_LIMIT: u64 = 64 * 1024;

/// Asked by the supervisor before it starts the child: is this launch still current? The
/// implementation takes the state lock, checks the step record still holds `nonce`, records `pid`
/// and `pid_start` there, and answers. `Ok(false)` or `Err` => the supervisor exits without
/// starting the child.
pub trait Gate {
    fn register(
        &self,
        gate: &serde_json::Value,
        nonce: &str,
        pid: u32,
        pid_start: u64,
    ) -> Result<bool, String>;
}

#[derive(Debug, thiserror::Error)]
pub enum ActivityError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("create directory `{path}`: {source}")]
    CreateDir { path: PathBuf, source: io::Error },
    #[error("encode `{path}`: {source}")]
    Encode {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("`{path}` is not valid: {source}")]
    Decode {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("start the supervisor `{exe}` for `{dir}`: {source}")]
    Launch {
        exe: PathBuf,
        dir: PathBuf,
        source: io::Error,
    },
    #[error("signal the supervisor (pid {pid}) of `{dir}`: {source}")]
    Signal {
        dir: PathBuf,
        pid: u32,
        source: nix::errno::Errno,
    },
}

/// What the directory says about an activity right now.
#[derive(Clone, Debug, PartialEq)]
pub enum Observation {
    /// No `supervisor.json`, and no supervisor of this launch is known to run: the one `launch`
    /// started is gone without registering (it crashed), or none was recorded (nothing launched
    /// yet, a launcher killed between the spec and its record, or a launch of an older iced).
    NotRegistered,
    /// No `supervisor.json` yet, and the supervisor `launch` started still runs: it is starting,
    /// however long a loaded machine makes that take.
    Starting { pid: u32, pid_start: u64 },
    /// The supervisor named in `supervisor.json` still runs (same pid, same start time).
    Running { pid: u32, pid_start: u64 },
    /// `outcome.json` is present and parses.
    Finished(Outcome),
    /// `supervisor.json` names a process that no longer runs, and there is no outcome: the
    /// supervisor crashed, was killed, or was told by the gate that its launch had moved on.
    Gone,
}

/// A supervisor just started by [`launch`]: its pid, and the read end of the pipe whose write end
/// it alone holds until it has registered (SPEC 21.4).
#[derive(Debug)]
pub struct Launched {
    pub pid: u32,
    registered: OwnedFd,
}

impl Launched {
    /// Wait, at most `most`, until the supervisor has written `supervisor.json`: it closes the
    /// pipe's write end then, and a supervisor that dies before closes it too (then `observe` says
    /// `NotRegistered`). No polling: one `poll` on the read end, woken by its end.
    pub fn await_registration(self, most: Duration) {
        readable_by(self.registered.as_fd(), Instant::now() + most);
    }
}

/// Wait until `fd` is readable or hung up, or `until` passes: whether it is. A signal, or a
/// timeout a virtual machine's clock ended early, is waited out again; an error no waiting would
/// cure counts as ready, so that the caller looks for itself.
pub fn readable_by(fd: BorrowedFd<'_>, until: Instant) -> bool {
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        // At least a millisecond: a zero timeout would return at once, over and over.
        let millis = left.as_millis().clamp(1, i32::MAX as u128) as i32;
        let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
        match poll(
            &mut fds,
            PollTimeout::try_from(millis).unwrap_or(PollTimeout::MAX),
        ) {
            Ok(n) if n > 0 => return true,
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(_) => return true,
        }
    }
}

/// The option of `__supervise` naming the descriptor of the registration pipe it inherits.
pub const READY_FD_OPTION: &str = "--ready-fd";

/// The registration pipe's write end a supervisor was given as `--ready-fd <fd>`, taken over: it
/// is made close-on-exec at once (so no child of the supervisor can inherit it) and closed once
/// the supervisor has registered. `None` when `fd` is not an open pipe (a supervisor started by
/// hand), so that nothing of the process's own is ever taken and closed.
pub fn ready_pipe(fd: RawFd) -> Option<OwnedFd> {
    if fd <= 2 {
        return None;
    }
    // SAFETY: `fd` is only borrowed to be looked at; a closed descriptor fails fstat.
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    let stat = nix::sys::stat::fstat(borrowed).ok()?;
    if stat.st_mode & nix::libc::S_IFMT != nix::libc::S_IFIFO {
        return None;
    }
    nix::fcntl::fcntl(
        borrowed,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
    )
    .ok()?;
    // SAFETY: an open pipe the launcher passed this process for it alone; nothing else owns it.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Write `spec.json` (atomic, 0600; `dir` is created 0700 if missing) and start
/// `exe __supervise <dir> --ready-fd <fd>` detached: a new session, stdin, stdout and stderr on
/// `/dev/null`, and the write end of the registration pipe its only other descriptor. Returns at
/// once; [`Launched::await_registration`] waits for it. Files a previous launch left in `dir`
/// (supervisor record, tails, outcome) are removed first, so what `observe` finds there belongs to
/// this launch.
pub fn launch(exe: &Path, dir: &Path, spec: &ActivitySpec) -> Result<Launched, ActivityError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| ActivityError::CreateDir {
            path: dir.to_owned(),
            source,
        })?;
    // The outcome first: from here on, no stale result can be taken for this launch's.
    for stale in [
        files::OUTCOME,
        files::SUPERVISOR,
        files::LAUNCHED,
        files::STDOUT,
        files::STDERR,
        files::CHILD,
    ] {
        store::remove_if_present(&dir.join(stale))?;
    }
    write_json(&dir.join(files::SPEC), spec)?;

    let launch_error = |source| ActivityError::Launch {
        exe: exe.to_owned(),
        dir: dir.to_owned(),
        source,
    };
    // Both ends close-on-exec: no process another thread starts meanwhile keeps either.
    let (registered, ready) =
        nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(|e| launch_error(io::Error::from(e)))?;
    let ready = above_stdio(ready).map_err(launch_error)?;
    let spawned = spawn_supervisor(exe, dir, ready.as_raw_fd());
    // The supervisor holds the only write end now: its close (or its death) ends the pipe.
    drop(ready);
    let pid = spawned.map_err(launch_error)?;
    crate::failpoint::hit("activity-after-spawn");
    // Who is starting, while it is not reaped (so `/proc` still has it, a zombie at worst): from
    // here on no caller takes this launch for a crash while that process runs (SPEC 21.4). A
    // failed write leaves what a launch of an older iced left, which callers still handle.
    if let Some(pid_start) = pid_start_time(pid.as_raw() as u32) {
        let record = LaunchedRecord {
            pid: pid.as_raw() as u32,
            pid_start,
            nonce: spec.nonce.clone(),
        };
        if let Ok(bytes) = serde_json::to_vec(&record) {
            let _ = store::write_atomic_unsynced(&dir.join(files::LAUNCHED), &bytes, 0o600);
        }
    }
    // A long-lived caller must not collect zombies; a short-lived one exits and the supervisor is
    // reparented. If no thread can be started, the zombie is the lesser harm.
    let _ = std::thread::Builder::new()
        .name("activity-reap".into())
        .spawn(move || nix::sys::wait::waitpid(pid, None));
    let pid = pid.as_raw() as u32;
    Ok(Launched { pid, registered })
}

/// Start `exe __supervise <dir> --ready-fd <fd>` in a session of its own (no terminal's hangup or
/// Ctrl-C reaches it, and it outlives the caller's process group), stdin, stdout and stderr on
/// `/dev/null`, the registration pipe's write end `ready` its only other descriptor, SIGPIPE at
/// its default and no signal blocked. By `posix_spawn`, which starts the program without copying
/// the caller: a build forks no copy of itself a lane (issue 16).
fn spawn_supervisor(exe: &Path, dir: &Path, ready: RawFd) -> io::Result<nix::unistd::Pid> {
    use nix::spawn::{PosixSpawnAttr, PosixSpawnFileActions, PosixSpawnFlags};
    use nix::sys::signal::{SigSet, Signal};
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let c = |bytes: &[u8]| {
        CString::new(bytes).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte"))
    };
    // The descriptor it is told of: a copy of `ready` made by `dup2`, which clears close-on-exec
    // (a `dup2` onto itself would leave it set).
    let fd = if ready == 3 { 4 } else { 3 };
    let args = [
        c(exe.as_os_str().as_bytes())?,
        c(SUPERVISE_SUBCOMMAND.as_bytes())?,
        c(dir.as_os_str().as_bytes())?,
        c(READY_FD_OPTION.as_bytes())?,
        c(fd.to_string().as_bytes())?,
    ];
    let env = std::env::vars_os()
        .map(|(k, v)| c(&[k.as_bytes(), b"=", v.as_bytes()].concat()))
        .collect::<io::Result<Vec<_>>>()?;
    // Opened here, close-on-exec and above the standard descriptors (so that every `dup2` below
    // makes a copy), and closed when this returns.
    let null = above_stdio(OwnedFd::from(
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/null")?,
    ))?;
    let mut actions = PosixSpawnFileActions::init()?;
    for stdio in 0..=2 {
        actions.add_dup2(null.as_raw_fd(), stdio)?;
    }
    actions.add_dup2(ready, fd)?;
    let mut attr = PosixSpawnAttr::init()?;
    let setsid =
        PosixSpawnFlags::from_bits_retain(nix::libc::c_int::from(nix::libc::POSIX_SPAWN_SETSID));
    attr.set_flags(
        setsid | PosixSpawnFlags::POSIX_SPAWN_SETSIGMASK | PosixSpawnFlags::POSIX_SPAWN_SETSIGDEF,
    )?;
    attr.set_sigmask(&SigSet::empty())?;
    let mut default = SigSet::empty();
    default.add(Signal::SIGPIPE);
    attr.set_sigdefault(&default)?;
    Ok(nix::spawn::posix_spawn(exe, &actions, &attr, &args, &env)?)
}

/// `fd`, or (a caller started with a standard descriptor closed got it as one) a copy of it above
/// them, close-on-exec: the child's stdin, stdout and stderr are set over 0 to 2.
fn above_stdio(fd: OwnedFd) -> io::Result<OwnedFd> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    let copy = nix::fcntl::fcntl(&fd, nix::fcntl::FcntlArg::F_DUPFD_CLOEXEC(3))?;
    // SAFETY: a descriptor fcntl just made, owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(copy) })
}

/// What the activity in `dir` is doing. See [`Observation`].
pub fn observe(dir: &Path) -> Observation {
    observe_launch(dir, None)
}

/// [`observe`], of the launch whose nonce is `nonce` (any, when `None`): a supervisor's or a
/// launcher's record that another launch of the folder left (an earlier launch of the same step,
/// which this one has not cleared yet) is not this launch's and counts as absent, so an earlier
/// supervisor that has gone is never taken for this launch's crash. An outcome is returned
/// whichever launch wrote it; the caller compares its nonce.
pub fn observe_launch(dir: &Path, nonce: Option<&str>) -> Observation {
    if let Some(outcome) = read_outcome(dir) {
        return Observation::Finished(outcome);
    }
    let ours = |n: &str| nonce.is_none_or(|want| want == n);
    let read_supervisor = |dir: &Path| read_supervisor(dir).filter(|r| ours(&r.nonce));
    if let Some(record) = read_supervisor(dir) {
        return registered(dir, &record);
    }
    // Unregistered. The supervisor `launch` recorded, while it runs, is starting; once gone it
    // may have registered (and even ended) between the look above and this one, so the folder is
    // looked at again before it counts as having died unregistered.
    match read_launched(dir).filter(|r| ours(&r.nonce)) {
        Some(LaunchedRecord { pid, pid_start, .. }) if procinfo::is_running(pid, pid_start) => {
            Observation::Starting { pid, pid_start }
        }
        Some(_) => match read_supervisor(dir) {
            Some(record) => registered(dir, &record),
            None => Observation::NotRegistered,
        },
        None => Observation::NotRegistered,
    }
}

/// `launched.json`, when it reads.
pub fn read_launched(dir: &Path) -> Option<LaunchedRecord> {
    read_json(&dir.join(files::LAUNCHED), RECORD_LIMIT).ok()
}

/// Whether the supervisor of the launch `nonce` wrote its record in `dir`.
pub fn registered_as(dir: &Path, nonce: &str) -> bool {
    read_supervisor(dir).is_some_and(|r| r.nonce == nonce)
}

/// What a registered supervisor's activity is doing: its supervisor runs, or it ended (with an
/// outcome or without).
fn registered(dir: &Path, record: &SupervisorRecord) -> Observation {
    if procinfo::is_running(record.pid, record.pid_start) {
        return Observation::Running {
            pid: record.pid,
            pid_start: record.pid_start,
        };
    }
    // It may have written its outcome and exited between the first look and now.
    match read_outcome(dir) {
        Some(outcome) => Observation::Finished(outcome),
        None => Observation::Gone,
    }
}

fn read_supervisor(dir: &Path) -> Option<SupervisorRecord> {
    read_json(&dir.join(files::SUPERVISOR), RECORD_LIMIT).ok()
}

/// Ask a running supervisor to stop its child: SIGTERM to the supervisor, which then runs the same
/// SIGINT, SIGTERM, SIGKILL sequence as on a timeout and still writes its outcome (`stopped`).
/// Nothing to do when it is not running.
pub fn stop(dir: &Path) -> Result<(), ActivityError> {
    let Observation::Running { pid, .. } = observe(dir) else {
        return Ok(());
    };
    match nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    ) {
        Ok(()) | Err(nix::errno::Errno::ESRCH) => Ok(()),
        Err(source) => Err(ActivityError::Signal {
            dir: dir.to_owned(),
            pid,
            source,
        }),
    }
}

/// After a supervisor was killed outright (no outcome), kill what is left of its child's process
/// group: the parent-death signal reaches only the child itself, not the child's own children.
/// Nothing to do when the group is empty.
pub fn kill_orphans(dir: &Path) {
    let Ok(child) = read_json::<spec::ChildRecord>(&dir.join(files::CHILD), RECORD_LIMIT) else {
        return;
    };
    // A pid is never given to a new process while a process group of that id has members, so a
    // live process of that pid started at another time means the child's group is gone and the
    // id is someone else's now (an unrelated session leader, a supervisor just started): its
    // group is never killed for the child's.
    if pid_start_time(child.pid).is_some_and(|start| start != child.pid_start) {
        return;
    }
    if procinfo::group_has_live_member(child.pid) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(-(child.pid as i32)),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// `outcome.json`, if it is there and parses.
pub fn read_outcome(dir: &Path) -> Option<Outcome> {
    read_json(&dir.join(files::OUTCOME), RECORD_LIMIT).ok()
}

fn read_spec(dir: &Path) -> Result<ActivitySpec, ActivityError> {
    read_json(&dir.join(files::SPEC), SPEC_LIMIT)
}

fn read_json<T: DeserializeOwned>(path: &Path, limit: u64) -> Result<T, ActivityError> {
    let bytes = store::read_no_follow(path, limit)?;
    serde_json::from_slice(&bytes).map_err(|source| ActivityError::Decode {
        path: path.to_owned(),
        source,
    })
}

/// Pretty JSON with a final newline, atomically, 0600: these files can name commands and hold
/// environment values.
fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), ActivityError> {
    let mut bytes = serde_json::to_vec_pretty(value).map_err(|source| ActivityError::Encode {
        path: path.to_owned(),
        source,
    })?;
    bytes.push(b'\n');
    Ok(store::write_atomic(path, &bytes, 0o600)?)
}
