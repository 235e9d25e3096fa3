//! What `/proc` says about a process: whether it still lives, when it started (which, with the
//! pid, names it across pid reuse), and which process group it is in. Linux only, read-only.

use std::fs;

/// The fields of `/proc/<pid>/stat` this module uses.
struct Stat {
    state: char,
    pgrp: i64,
    start_time: u64,
}

fn stat(pid: u32) -> Option<Stat> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may itself hold spaces and parentheses;
    // the last `)` ends it. Fields from 3 on follow.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(Stat {
        state: fields.first()?.chars().next()?,
        pgrp: fields.get(5 - 3)?.parse().ok()?,
        start_time: fields.get(22 - 3)?.parse().ok()?,
    })
}

/// A process that has exited but not been reaped is a zombie (`Z`) or dying (`X`): it runs no
/// code and holds no pipes.
fn is_live(state: char) -> bool {
    !matches!(state, 'Z' | 'X' | 'x')
}

/// The start time of `pid` in clock ticks since boot (`/proc/<pid>/stat` field 22); `None` if there
/// is no such process or it has already exited (a zombie).
pub fn pid_start_time(pid: u32) -> Option<u64> {
    stat(pid).filter(|s| is_live(s.state)).map(|s| s.start_time)
}

/// Whether `pid` still runs and is the process that started at `start`.
pub fn is_running(pid: u32, start: u64) -> bool {
    pid_start_time(pid) == Some(start)
}

/// Whether any live (not zombie) process is in process group `pgid`. Zombies are left out because
/// a grandchild orphaned by the group kill is reaped by init, and some inits never reap.
pub fn group_has_live_member(pgid: u32) -> bool {
    let Ok(entries) = fs::read_dir("/proc") else {
        return false;
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(stat)
        .any(|s| s.pgrp == i64::from(pgid) && is_live(s.state))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_a_start_time_and_a_missing_one_does_not() {
        let me = std::process::id();
        let start = pid_start_time(me).expect("own stat");
        assert!(is_running(me, start));
        assert!(!is_running(me, start + 1));
        // Above the kernel's maximum pid (4194304), so never in use.
        assert_eq!(pid_start_time(4_194_305), None);
    }

    #[test]
    fn own_group_has_a_live_member() {
        let pgid = nix::unistd::getpgrp().as_raw() as u32;
        assert!(group_has_live_member(pgid));
        assert!(!group_has_live_member(4_194_305));
    }
}
