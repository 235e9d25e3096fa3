//! Failpoints: named places between a side effect and its record where the crash suite kills the
//! process. Compiled only with the `failpoints` feature (tests turn it on; release builds never
//! have it). `ICED_FAILPOINT=<name>` kills the process with SIGKILL the first time it reaches
//! `<name>`; `<name>:<n>` on the n-th time. `ICED_FAILPOINT_HANG=<name>` stops the thread that
//! reaches `<name>` for good instead.

#[cfg(feature = "failpoints")]
pub fn hit(name: &str) {
    use std::sync::atomic::{AtomicU32, Ordering};
    static HITS: AtomicU32 = AtomicU32::new(0);
    let wanted = std::env::var("ICED_FAILPOINT").unwrap_or_default();
    let (wanted, nth) = match wanted.split_once(':') {
        Some((n, k)) => (n.to_owned(), k.parse().unwrap_or(1)),
        None => (wanted, 1),
    };
    if std::env::var("ICED_FAILPOINT_HANG").is_ok_and(|h| h == name) {
        // The step stops here for good, its record held by a live process: what a call stuck
        // in its git looks like to every other call. Said on stderr first, for the test.
        eprintln!("failpoint `{name}`: hanging");
        loop {
            std::thread::park();
        }
    }
    if wanted != name {
        return;
    }
    if HITS.fetch_add(1, Ordering::SeqCst) + 1 == nth {
        let _ = nix::sys::signal::kill(nix::unistd::getpid(), nix::sys::signal::Signal::SIGKILL);
        // SIGKILL cannot be caught; this line is never reached.
        std::process::abort();
    }
}

#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub fn hit(_name: &str) {}

/// `ICED_FAILPOINT_REFUSE=<name>`: the first time a helper thread of `build` (SPEC 20.1; its
/// threads are named `iced-helper`) reaches `<name>`, why its step is refused; nothing on any
/// other thread. A test's way to make a helper's step refuse, as a full disk would.
#[cfg(feature = "failpoints")]
pub fn refused_on_helper(name: &str) -> Option<String> {
    use std::sync::atomic::{AtomicBool, Ordering};
    static HIT: AtomicBool = AtomicBool::new(false);
    let wanted = std::env::var("ICED_FAILPOINT_REFUSE").ok()?;
    let helper = std::thread::current().name() == Some("iced-helper");
    (wanted == name && helper && !HIT.swap(true, Ordering::SeqCst))
        .then(|| format!("failpoint `{name}` refused this step on a helper thread"))
}

#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub fn refused_on_helper(_name: &str) -> Option<String> {
    None
}

/// Every failpoint, for the crash suite to walk.
pub const ALL: &[&str] = &[
    "admit-after-gitignore",
    "remote-claim-after-push",
    "remote-claim-after-takeover",
    "rules-after-write",
    "admit-after-claim",
    "admit-after-state",
    "brief-after-write",
    "worktree-after-move-worktree",
    "worktree-after-move-aside",
    "worktree-reuse-after-switch",
    "worktree-reuse-after-move",
    "worktree-after-add",
    "launch-after-record",
    "launch-after-spawn",
    "activity-after-spawn",
    "observe-before-record",
    "take-back-after-copy",
    "take-back-after-ref",
    "git-lock-after-remove",
    "receipt-after-record",
    "remote-after-push",
    "receipt-after-fetch",
    "dod-after-launch",
    "validator-after-prepare",
    "validator-after-record",
    "validator-after-launch",
    "validator-after-check",
    "validator-after-remove",
    "archive-after-append",
    "ended-after-write",
    "deliver-after-prepare",
    "deliver-after-commit",
    "deliver-after-record",
    "end-after-metrics",
    "end-before-release",
    "remote-claim-before-release",
    "claims-after-renew",
    "land-after-fetch",
    "land-after-attributes",
    "land-after-stash",
    "land-after-integrate",
    "land-after-commit",
    "land-after-restore",
    "land-after-move",
    "push-after-push",
    "pr-after-open",
    "pr-after-arm",
    "retire-after-remove",
    "retire-after-restore",
    "retire-after-unpublish",
    "discard-before-release",
    "abandon-before-stop",
    "answer-after-write",
    "transcript-after-copy",
    "supervisor-before-record",
    "supervisor-before-ready",
    "supervisor-after-gate",
    "supervisor-after-spawn",
    "supervisor-before-outcome",
    "escalation-after-decision",
    "escalation-after-unit",
    "drain-between-units",
    "memory-after-gitignore",
    "memory-after-record",
    "memory-after-worktree",
    "memory-after-launch",
    "memory-after-remove",
    "plan-launch-after-record",
    "plan-launch-after-spawn",
    "plan-check-before-record",
    "plan-decide-after-write",
    "plan-decide-after-approve",
    "plan-decide-after-commit",
    "tester-after-record",
    "tester-after-spawn",
    "tester-check-after-record",
];
