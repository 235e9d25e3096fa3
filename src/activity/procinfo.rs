//! What `/proc` says about a process: whether it still lives, when it started (which, with the
//! pid, names it across pid reuse), which process group it is in, and which processes are below
//! it. Linux only, read-only.

use std::fs;

/// The fields of `/proc/<pid>/stat` this module uses.
struct Stat {
    state: char,
    ppid: u32,
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
        ppid: fields.get(4 - 3)?.parse().ok()?,
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

/// Every process `/proc` lists now, with its stat.
fn all() -> Vec<(u32, Stat)> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| Some((pid, stat(pid)?)))
        .collect()
}

/// Whether any live (not zombie) process is in process group `pgid`. Zombies are left out because
/// a grandchild orphaned by the group kill is reaped by init, and some inits never reap.
pub fn group_has_live_member(pgid: u32) -> bool {
    all()
        .iter()
        .any(|(_, s)| s.pgrp == i64::from(pgid) && is_live(s.state))
}

/// The live processes whose chain of parents leads to `root` (not `root` itself), whatever group
/// or session they moved to. A zombie is left out: it runs nothing, and only its parent's
/// `wait` removes it.
pub fn live_descendants(root: u32) -> Vec<u32> {
    let procs = all();
    let mut below = vec![root];
    let mut live = Vec::new();
    // Breadth first over the parent links; a pid is visited once, since each has one parent.
    let mut i = 0;
    while i < below.len() {
        let parent = below[i];
        for (pid, s) in &procs {
            if s.ppid == parent && *pid != root {
                below.push(*pid);
                if is_live(s.state) {
                    live.push(*pid);
                }
            }
        }
        i += 1;
    }
    live
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
    fn descendants_are_found_across_sessions_and_generations() {
        // sh starts a sleep in a session of its own and a subshell that starts another, then
        // waits, so each one's parent stays below sh.
        let mut sh = std::process::Command::new("sh")
            .args([
                "-c",
                "setsid sleep 300 & echo $!; (sleep 300 & echo $!; wait) & wait",
            ])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let root = sh.id();
        let mut out = std::io::BufReader::new(sh.stdout.take().unwrap());
        let mut pids = Vec::new();
        for _ in 0..2 {
            let mut line = String::new();
            std::io::BufRead::read_line(&mut out, &mut line).unwrap();
            pids.push(line.trim().parse::<u32>().unwrap());
        }
        let found = live_descendants(root);
        for pid in &pids {
            assert!(found.contains(pid), "{pid} not in {found:?}");
        }
        // The subshell between sh and the second sleep is found too.
        assert_eq!(found.len(), 3, "{found:?}");
        assert!(!found.contains(&root));
        for pid in found {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        sh.wait().unwrap();
        assert!(live_descendants(root).is_empty());
    }

    #[test]
    fn own_group_has_a_live_member() {
        let pgid = nix::unistd::getpgrp().as_raw() as u32;
        assert!(group_has_live_member(pgid));
        assert!(!group_has_live_member(4_194_305));
    }
}
