//! Ctrl-C on a verb that drives a run (`iced build`): the driver goes, the run does not. The
//! agents run under supervisors in sessions of their own, which a terminal's interrupt does not
//! reach; the handler says so, and what picks the run up again, then exits 130 (128 + SIGINT). A
//! step the interrupt cuts short is one a crash could cut short: the next call replays it.

use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
use std::os::fd::BorrowedFd;
use std::sync::OnceLock;

/// What the handler writes: made before it is installed, so the handler only writes bytes.
static SAID: OnceLock<Vec<u8>> = OnceLock::new();

extern "C" fn interrupted(_: nix::libc::c_int) {
    if let Some(said) = SAID.get() {
        // SAFETY: fd 2 is open for the life of the process; write(2) is async-signal-safe.
        let stderr = unsafe { BorrowedFd::borrow_raw(2) };
        let _ = nix::unistd::write(stderr, said);
    }
    // SAFETY: _exit is async-signal-safe; nothing is left to flush that matters (the state is
    // written atomically, and an unfinished step is replayed by the next call).
    unsafe { nix::libc::_exit(130) }
}

/// On Ctrl-C, print `said` on stderr (after a line break, to leave any live line) and exit 130.
pub fn on_interrupt(said: &str) {
    if SAID.set(format!("\n{said}\n").into_bytes()).is_err() {
        return;
    }
    let action = SigAction::new(
        SigHandler::Handler(interrupted),
        SaFlags::empty(),
        SigSet::empty(),
    );
    // SAFETY: the handler only reads a value set before it is installed, writes and exits.
    let _ = unsafe { sigaction(Signal::SIGINT, &action) };
}
