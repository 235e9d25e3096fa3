//! A supervisor SIGKILLed while its agent works (issue 15, #6): the agent goes with it (the
//! supervisor's child dies with its parent), the loop finds the supervisor gone and redoes the
//! attempt once, and the unit is delivered once. Real processes and real signals: the test kills
//! the supervisor the state names.

use crate::landing::state;
use crate::loop_e2e::{build, str_of, wait_for, with_agent};
use iced::run::keys::StepKey;
use iced::run::state::{RunStatus, StepStatus};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::json;

/// The pid the fake agent logged for `attempt` (`start ... attempt=N pid=P ...`).
fn agent_pid(starts: &[String], attempt: u32) -> Option<i32> {
    starts.iter().find_map(|s| {
        let field = |k: &str| {
            s.split(' ')
                .find_map(|f| f.strip_prefix(&format!("{k}=")).map(str::to_owned))
        };
        (field("attempt")? == attempt.to_string()).then_some(())?;
        field("pid")?.parse().ok()
    })
}

fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !(rest.starts_with('Z') || rest.starts_with('X'))),
    }
}

#[test]
fn a_killed_supervisor_takes_its_agent_along_and_the_attempt_is_redone_once() {
    // Attempt 1 works slowly (the kill lands in its sleep); attempt 2 works at once.
    let (env, id) = with_agent(
        "attempt 1\nsleep 30\nattempt *\ncommit src/session.rs fixed\nreport-ok E1 E2\n",
        json!({"verify": {"independent": false, "commands": [{"argv": ["true"], "timeoutSec": 30}]}}),
    );
    let (_, first) = build(&env, &id, &["--no-wait"], 0);
    let run = str_of(&first, "run").to_owned();
    wait_for("attempt 1's agent to start", || {
        agent_pid(&env.agent_starts(), 1).is_some()
    });
    let agent = agent_pid(&env.agent_starts(), 1).unwrap();
    let supervisor = state(&env).runs[&run].lanes[0]
        .steps
        .iter()
        .find(|r| r.step == StepKey::Implement && r.attempt == 1)
        .and_then(|r| r.pid)
        .expect("the implementer's supervisor is recorded");
    assert!(alive(supervisor as i32) && alive(agent));
    kill(Pid::from_raw(supervisor as i32), Signal::SIGKILL).unwrap();
    wait_for("the agent to die with its supervisor", || !alive(agent));

    let (_, last) = build(&env, &id, &[], 0);
    assert_eq!(str_of(&last, "run"), run, "the one run goes on");
    let s = state(&env);
    let r = &s.runs[&run];
    assert_eq!(r.status, RunStatus::Delivered, "{last}");
    let implement = r.lanes[0]
        .record(&StepKey::Implement)
        .expect("an implement record");
    assert_eq!((implement.attempt, implement.status), (2, StepStatus::Done));
    // Attempt 1's records left the state for the run's history when attempt 2 began.
    let history = env.read(&format!(".iced/run/{run}/history.jsonl"));
    let crashed: Vec<serde_json::Value> = history
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e.to_string().contains("\"implement\""))
        .collect();
    assert!(
        crashed
            .iter()
            .any(|e| e.to_string().contains("\"crashed\":true")),
        "attempt 1 is recorded crashed: {history}"
    );
    let starts = env.agent_starts();
    assert_eq!(starts.len(), 2, "one agent per attempt: {starts:?}");
    let branch = format!("iced/{id}/{id}");
    let delivers = env.git_out(&["log", "--format=%s", &branch]);
    assert_eq!(
        delivers
            .lines()
            .filter(|l| l.starts_with("iced: deliver"))
            .count(),
        1,
        "{delivers}"
    );
}
