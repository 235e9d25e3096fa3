//! What `/proc` says about a process: whether it still lives, when it started (which, with the
//! pid, names it across pid reuse), which process group it is in, and which processes are below
//! it. Linux only, read-only.

use std::fs;
use std::path::{Path, PathBuf};

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

/// A live process still working in a folder: its pid and its command line (arguments joined by
/// spaces, at most 200 characters, terminal escapes stripped).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Working {
    pub pid: u32,
    pub command: String,
}

/// The live processes (other than this one) still working in `dir`: a git (named `git` or
/// `git-*`) whose working folder is `dir` or a folder in it, or any process holding one of
/// `files` open. A git daemon (an argument ending in `--daemon`: `fsmonitor--daemon`,
/// `credential-cache--daemon`) lives on after the command that started it and writes no index or
/// ref, so it is not one. Processes of other users are not seen. `dir` and `files` are compared
/// as written and as resolved, since `/proc` gives resolved paths.
pub fn working_in(dir: &Path, files: &[PathBuf]) -> Vec<Working> {
    let me = std::process::id();
    let dirs: Vec<PathBuf> = [Some(dir.to_path_buf()), dir.canonicalize().ok()]
        .into_iter()
        .flatten()
        .collect();
    let held = |pid: u32| {
        let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
            return false;
        };
        fds.filter_map(|fd| fs::read_link(fd.ok()?.path()).ok())
            .any(|open| files.iter().any(|f| same_file_path(f, &open)))
    };
    let mut found: Vec<Working> = all()
        .into_iter()
        .filter(|(pid, s)| *pid != me && is_live(s.state))
        .filter(|(pid, _)| {
            let name = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            let name = name.trim_end_matches('\n');
            let is_git = name == "git" || name.starts_with("git-");
            let in_dir = || {
                fs::read_link(format!("/proc/{pid}/cwd"))
                    .is_ok_and(|cwd| dirs.iter().any(|d| cwd.starts_with(d)))
            };
            (is_git && in_dir() && !is_daemon(*pid)) || held(*pid)
        })
        .map(|(pid, _)| Working {
            pid,
            command: command_line(pid),
        })
        .collect();
    found.sort_by_key(|w| w.pid);
    found
}

/// Whether `pid` is a git daemon: one of its arguments ends in `--daemon`.
fn is_daemon(pid: u32) -> bool {
    fs::read(format!("/proc/{pid}/cmdline"))
        .unwrap_or_default()
        .split(|b| *b == 0)
        .any(|arg| arg.ends_with(b"--daemon"))
}

/// `/proc` names an open file by its resolved path; `file` may be written through a link in a
/// parent folder, and the file itself may be gone (`... (deleted)`, never equal).
fn same_file_path(file: &Path, open: &Path) -> bool {
    open == file
        || file
            .parent()
            .and_then(|p| p.canonicalize().ok())
            .zip(file.file_name())
            .is_some_and(|(parent, name)| open == parent.join(name))
}

/// The command line of `pid`, for a person to read: arguments joined by spaces, at most 200
/// characters, terminal escapes stripped; its name when the line cannot be read.
fn command_line(pid: u32) -> String {
    let raw = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let text = String::from_utf8_lossy(&raw)
        .split('\0')
        .filter(|a| !a.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let text = if text.is_empty() {
        fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default()
    } else {
        text
    };
    crate::text::for_terminal(text.trim())
        .chars()
        .map(|c| if c.is_whitespace() { ' ' } else { c })
        .take(200)
        .collect()
}

/// A `sleep` started under the name `git` (a link named so: the kernel names a process by
/// the file it ran), working in `cwd`.
#[cfg(test)]
pub(crate) fn git_sleeping(bin: &Path, cwd: &Path, secs: &str) -> std::process::Child {
    let git = bin.join("git");
    if !git.exists() {
        let sleep = ["/bin/sleep", "/usr/bin/sleep"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .expect("sleep");
        std::os::unix::fs::symlink(sleep, &git).unwrap();
    }
    std::process::Command::new(&git)
        .arg(secs)
        .current_dir(cwd)
        .spawn()
        .unwrap()
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

    #[test]
    fn a_git_working_in_a_folder_or_holding_a_file_is_found_and_nothing_else() {
        let tmp = tempfile::tempdir().unwrap();
        let (bin, work, other) = (
            tmp.path().join("bin"),
            tmp.path().join("work"),
            tmp.path().join("other"),
        );
        for d in [&bin, &work.join("sub"), &other] {
            fs::create_dir_all(d).unwrap();
        }
        let lock = other.join("index.lock");
        let mut in_sub = git_sleeping(&bin, &work.join("sub"), "30");
        // A git daemon in the folder (a shell started as `git`, its last argument the daemon's).
        std::os::unix::fs::symlink("/bin/sh", bin.join("git-sh")).unwrap();
        let mut daemon = std::process::Command::new(bin.join("git-sh"))
            .args(["-c", "sleep 30; true", "fsmonitor--daemon"])
            .current_dir(&work)
            .spawn()
            .unwrap();
        // Not a git: a sleep in the folder is not found; a shell holding the lock open is.
        let mut not_git = std::process::Command::new("sleep")
            .arg("30")
            .current_dir(&work)
            .spawn()
            .unwrap();
        let mut holder = std::process::Command::new("sh")
            .args(["-c", "exec 3>\"$1\"; echo held; exec sleep 30", "sh"])
            .arg(&lock)
            .current_dir(tmp.path())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(holder.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let found = working_in(&work, std::slice::from_ref(&lock));
        let pids: Vec<u32> = found.iter().map(|w| w.pid).collect();
        let mut want = vec![in_sub.id(), holder.id()];
        want.sort_unstable();
        assert_eq!(pids, want, "{found:?}");
        let git = found.iter().find(|w| w.pid == in_sub.id()).unwrap();
        assert!(git.command.ends_with("/bin/git 30"), "{git:?}");
        assert!(working_in(&other, &[]).is_empty());
        for child in [&mut in_sub, &mut daemon, &mut not_git, &mut holder] {
            child.kill().unwrap();
            child.wait().unwrap();
        }
        assert!(working_in(&work, &[lock]).is_empty());
    }
}
