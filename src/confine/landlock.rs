//! Landlock (SPEC 24.12 "On Linux"): ABI 6 or newer; the write rights of ABI 3 handled and granted
//! beneath the writable paths; signals and abstract UNIX sockets scoped; `no_new_privs`.

use super::Rules;
use landlock::{
    AccessFs, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope, ABI,
};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

/// The oldest ABI that has everything the rules need: signal and socket scoping came with 6.
const NEEDED_ABI: i32 = 6;

/// An open ruleset, entered by a child with [`Prepared::enter`].
#[derive(Debug)]
pub(super) struct Prepared {
    ruleset: OwnedFd,
}

/// The writes confined: every write right ABI 3 knows. Device ioctls (ABI 5) and connecting to
/// pathname sockets (ABI 9) stay open, as the SPEC says.
fn writes() -> BitFlags<AccessFs> {
    AccessFs::from_write(ABI::V3)
}

/// The kernel's Landlock ABI: 0 or less when it has none, or it is disabled.
fn kernel_abi() -> i32 {
    #[cfg(feature = "failpoints")]
    if let Some(abi) = std::env::var("ICED_TEST_LANDLOCK_ABI")
        .ok()
        .and_then(|v| v.parse::<i32>().ok())
    {
        return abi;
    }
    // SAFETY: the version query takes no attribute and writes nothing.
    let abi = unsafe {
        nix::libc::syscall(
            nix::libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32, // LANDLOCK_CREATE_RULESET_VERSION
        )
    };
    i32::try_from(abi).unwrap_or(0)
}

pub(super) fn available() -> Result<(), String> {
    match kernel_abi() {
        abi if abi <= 0 => Err(
            "Landlock is not enabled in this kernel (it needs Linux 6.12 or newer with `landlock` among its security modules)".to_owned(),
        ),
        abi if abi < NEEDED_ABI => Err(format!(
            "this kernel's Landlock ABI {abi} has no signal scoping; ABI {NEEDED_ABI} (Linux 6.12) is needed"
        )),
        _ => Ok(()),
    }
}

pub(super) fn prepare(rules: &Rules) -> Result<Prepared, String> {
    available()?;
    let fail = |e: landlock::RulesetError| format!("Landlock refused the rules: {e}");
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(writes())
        .map_err(fail)?
        .scope(Scope::Signal | Scope::AbstractUnixSocket)
        .map_err(fail)?
        .create()
        .map_err(fail)?;
    let devices = super::DEVICES.iter().map(std::path::Path::new);
    for path in rules.writable.iter().map(|p| p.as_path()).chain(devices) {
        // A path that is not there cannot be granted, and nothing can be written there.
        let Ok(fd) = PathFd::new(path) else {
            continue;
        };
        let folder = std::fs::metadata(path).is_ok_and(|m| m.is_dir());
        let access = if folder {
            writes()
        } else {
            writes() & AccessFs::from_file(ABI::V3)
        };
        ruleset = ruleset
            .add_rule(PathBeneath::new(fd, access))
            .map_err(fail)?;
    }
    let ruleset: Option<OwnedFd> = ruleset.into();
    ruleset
        .map(|ruleset| Prepared { ruleset })
        .ok_or_else(|| "Landlock made no ruleset".to_owned())
}

impl Prepared {
    pub(super) fn entry(&self) -> Entry {
        Entry {
            ruleset: self.ruleset.as_raw_fd(),
        }
    }
}

/// The descriptor of a [`Prepared`] ruleset, inherited by the forked child.
#[derive(Clone, Copy, Debug)]
pub(super) struct Entry {
    ruleset: RawFd,
}

impl Entry {
    pub(super) fn enter(self) -> Result<(), i32> {
        let errno = nix::errno::Errno::last_raw;
        // SAFETY: two system calls on integers and a descriptor the child inherited open.
        unsafe {
            if nix::libc::prctl(nix::libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(errno());
            }
            if nix::libc::syscall(nix::libc::SYS_landlock_restrict_self, self.ruleset, 0u32) != 0 {
                return Err(errno());
            }
        }
        Ok(())
    }
}
