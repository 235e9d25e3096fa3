//! Agents in a box (SPEC 24.12): the operating system's confinement of an agent the loop starts.
//!
//! One interface, whatever the system: [`Rules`] say what an agent may write; [`available`] says
//! whether this machine can enforce them; [`prepare`] builds them in the supervisor, before it
//! forks; [`Prepared::enter`] applies them in the child, between fork and exec. On Linux the
//! mechanism is Landlock ([`landlock`]); another system (Seatbelt on macOS, say) goes beside it
//! behind the same four names. This module decides nothing about roles: the run says which paths
//! an agent gets (its `confinement` module).

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

#[cfg(target_os = "linux")]
mod landlock;

/// What a confined agent may write, carried in the activity's `spec.json`. Everything else it
/// may read and execute; it can signal only processes of its own confinement.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(deny_unknown_fields)]
pub struct Rules {
    /// Folders (or files) beneath which it may create, write, truncate, remove and rename. A path
    /// missing when the rules are built is left out: nothing can be written there.
    pub writable: Vec<PathBuf>,
}

/// The devices every confined agent writes (SPEC 24.12): what a shell, a test runner or a harness
/// opens for writing in its ordinary work.
pub const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
];

/// The rules, built and ready to be entered by a child: an open Landlock ruleset on Linux.
#[derive(Debug)]
pub struct Prepared {
    #[cfg(target_os = "linux")]
    inner: landlock::Prepared,
}

/// Whether this machine can confine an agent as SPEC 24.12 says: `Err` names what is missing.
pub fn available() -> Result<(), String> {
    #[cfg(target_os = "linux")]
    {
        landlock::available()
    }
    #[cfg(not(target_os = "linux"))]
    {
        Err(format!(
            "iced confines agents with Landlock, which is Linux's; {} has no confinement iced can use yet",
            std::env::consts::OS
        ))
    }
}

/// Build `rules`, and [`DEVICES`], for a child to enter. In the supervisor, before the fork: this allocates and
/// opens files, which the child must not.
pub fn prepare(rules: &Rules) -> Result<Prepared, String> {
    #[cfg(target_os = "linux")]
    {
        landlock::prepare(rules).map(|inner| Prepared { inner })
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = rules;
        available().map(|()| Prepared {})
    }
}

impl Prepared {
    /// What a child needs to enter the rules: a copy that can move into a `pre_exec` closure.
    /// It names the rules this value holds open, so it must not outlive it.
    pub fn entry(&self) -> Entry {
        Entry {
            #[cfg(target_os = "linux")]
            inner: self.inner.entry(),
        }
    }
}

/// The rules of a [`Prepared`], as a child enters them.
#[derive(Clone, Copy, Debug)]
pub struct Entry {
    #[cfg(target_os = "linux")]
    inner: landlock::Entry,
}

impl Entry {
    /// Confine the calling thread, for good, and everything it executes. Only async-signal-safe
    /// calls: this runs in a forked child before exec. The error is a raw errno.
    pub fn enter(self) -> Result<(), i32> {
        #[cfg(target_os = "linux")]
        {
            self.inner.enter()
        }
        #[cfg(not(target_os = "linux"))]
        {
            Err(nix::libc::ENOSYS)
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests;
