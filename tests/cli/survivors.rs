//! No survivors (SPEC 24.7): a process an agent starts in a session of its own (`setsid`), or
//! orphans by a double fork, is gone once its activity ends, whether the agent finished, timed out
//! or was stopped by `run abandon`. The fake agent's `escape-setsid` starts two such processes
//! and writes their pids to a file; these tests look them up in `/proc`.

use crate::loop_e2e::{build, str_of, wait_for, with_agent};
use serde_json::json;
use std::path::PathBuf;

/// The escapees' pids, and their clean-up: a test that fails must not leave `sleep 300`s behind.
pub(crate) struct Escapees {
    _dir: tempfile::TempDir,
    file: PathBuf,
}

impl Escapees {
    pub(crate) fn new() -> Escapees {
        // Where the confined agent may write its escapees' pids (SPEC 24.12).
        let dir =
            tempfile::tempdir_in(crate::env::shared_agent_dir()).expect("a temporary directory");
        let file = dir.path().join("escapees.txt");
        Escapees { _dir: dir, file }
    }

    /// The line the agent's script needs.
    pub(crate) fn directive(&self) -> String {
        format!("escape-setsid {}\n", self.file.display())
    }

    /// The line that adds a third escapee: a `setsid nohup` sleep.
    pub(crate) fn detach_directive(&self) -> String {
        format!("detach {}\n", self.file.display())
    }

    pub(crate) fn pids(&self) -> Vec<u32> {
        std::fs::read_to_string(&self.file)
            .unwrap_or_default()
            .lines()
            .map(|l| l.trim().parse().unwrap_or_else(|_| panic!("a pid: {l:?}")))
            .collect()
    }

    /// Both started (the agent wrote both pids).
    pub(crate) fn started(&self) -> bool {
        self.pids().len() == 2
    }

    pub(crate) fn survivors(&self) -> Vec<u32> {
        self.pids().into_iter().filter(|p| alive(*p)).collect()
    }
}

impl Drop for Escapees {
    fn drop(&mut self) {
        // Only the processes this test's agent started and named, and only if they are the
        // sleeps it started (a pid may have been reused since).
        for pid in self.survivors() {
            let cmd = std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            if cmd.starts_with("sleep\x00300") {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid as i32),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
}

/// A process runs with this pid: it is in /proc and is not a zombie (one that ended and waits
/// for its parent to reap it runs nothing).
pub(crate) fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !(rest.starts_with('Z') || rest.starts_with('X'))),
    }
}

#[test]
fn an_agent_that_ends_leaves_no_process_behind() {
    let escapees = Escapees::new();
    let (env, id) = with_agent(
        &format!(
            "{}commit src/session.rs fixed\nreport-ok E1 E2\n",
            escapees.directive()
        ),
        json!({"verify": {"independent": false, "commands": []}}),
    );
    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    assert!(escapees.started(), "not started: {:?}", escapees.pids());
    // The outcome is written after the clean-up: by the time the loop has read it, nothing is left.
    assert_eq!(escapees.survivors(), Vec::<u32>::new());
}

#[test]
fn an_agent_past_its_timeout_leaves_no_process_behind() {
    let escapees = Escapees::new();
    let (env, id) = with_agent(
        &format!("{}hang\n", escapees.directive()),
        json!({
            "runners": {"fake": {"timeoutSec": 1}},
            "run": {"killGraceSec": 0.3},
            "verify": {"independent": false, "maxAttempts": 1, "commands": []}
        }),
    );
    let (out, last) = build(&env, &id, &[], 4);
    assert_eq!(last["status"], "blocked", "{out:#?}");
    let show = crate::loop_e2e::run_show(&env, str_of(&last, "run"));
    let outcome = &crate::loop_e2e::record(&show, "implement")["outcome"];
    assert_eq!(outcome["timed_out"], true, "{outcome:#}");
    assert!(escapees.started(), "not started: {:?}", escapees.pids());
    assert_eq!(escapees.survivors(), Vec::<u32>::new());
}

#[test]
fn an_abandoned_run_leaves_no_process_behind() {
    let escapees = Escapees::new();
    let (env, id) = with_agent(
        &format!("{}hang\n", escapees.directive()),
        json!({"run": {"killGraceSec": 0.3}, "verify": {"independent": false, "commands": []}}),
    );
    let (_, last) = build(&env, &id, &["--no-wait"], 0);
    let run_id = str_of(&last, "run").to_owned();
    wait_for("the agent to start its escapees", || escapees.started());
    let running = escapees.survivors();
    assert_eq!(running.len(), 2, "they run before the abandon: {running:?}");

    env.iced_json(&["run", "abandon", &run_id]).ok();
    // The supervisor writes its outcome only once everything below it is gone.
    let outcome = env.path(&format!(
        ".iced/run/{run_id}/{id}/activities/implement-1/outcome.json"
    ));
    wait_for("the stopped agent's outcome", || outcome.exists());
    assert_eq!(escapees.survivors(), Vec::<u32>::new());
}

/// The agent of a hanging lane's run, started and running; the run's id.
fn hanging_run(escapees: &Escapees) -> (crate::env::TestEnv, String, String) {
    let (env, id) = with_agent(
        &format!("{}hang\n", escapees.directive()),
        json!({"run": {"killGraceSec": 0.3}, "verify": {"independent": false, "commands": []}}),
    );
    let (_, last) = build(&env, &id, &["--no-wait"], 0);
    let run_id = str_of(&last, "run").to_owned();
    wait_for("the agent to start its escapees", || escapees.started());
    (env, id, run_id)
}

/// A hanging lane's run, and `run abandon` of it killed after it ended the run and before it
/// stopped the agent (issue 15, item 1): the escapees still run.
fn abandon_killed_before_stopping(escapees: &Escapees) -> (crate::env::TestEnv, String, String) {
    let (env, id, run_id) = hanging_run(escapees);
    let killed = env
        .command()
        .env("ICED_FAILPOINT", "abandon-before-stop")
        .args(["run", "abandon", &run_id, "--json"])
        .output()
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(killed.status.signal(), Some(9), "{killed:?}");
    assert_eq!(
        escapees.survivors().len(),
        2,
        "the kill came before the stop"
    );
    (env, id, run_id)
}

/// Regression: an abandon killed before it stopped the agent left it running, and `run abandon`
/// again was refused `run-ended`. It now finishes the abandon.
#[test]
fn an_abandon_killed_before_stopping_is_finished_by_the_next_one() {
    let escapees = Escapees::new();
    let (env, _, run_id) = abandon_killed_before_stopping(&escapees);
    let again = env.iced_json(&["run", "abandon", &run_id]).ok().json();
    assert_eq!(again["status"], "abandoned", "{again:#}");
    wait_for("the escapees to be gone", || {
        escapees.survivors().is_empty()
    });
}

/// Regression: after such a kill, building the unit again started a second implementer in the
/// same worktree while the first was alive. The new run stops the old agent first.
#[test]
fn a_new_run_stops_what_a_killed_abandon_left_running_before_its_agent_starts() {
    let escapees = Escapees::new();
    let (env, id, run_id) = abandon_killed_before_stopping(&escapees);
    // The new run's agent finishes at once; by the time `build` admitted it, the old is gone.
    std::fs::write(
        env.agent_script(),
        "commit src/session.rs fixed\nreport-ok E1 E2\n",
    )
    .unwrap();
    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    assert_eq!(escapees.survivors(), Vec::<u32>::new());
    let old = env.path(&format!(
        ".iced/run/{run_id}/{id}/activities/implement-1/outcome.json"
    ));
    assert!(old.exists(), "the old supervisor wrote its outcome");
}
