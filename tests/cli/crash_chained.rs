//! The crash suite on chained steps (issue 12): `implement receipt --until-host --wait` killed with
//! SIGKILL at a failpoint inside the steps it chains after the receipt. The next call replays the
//! step the kill interrupted and never repeats one: each agent is handed out once, everything
//! stays in attempt 1, and the lane is delivered by one commit. Agent starts and events are
//! checked, never timing.

use crate::env::TestEnv;
use crate::loop_e2e::{agent_commit, build, str_of, worktree_of, GOOD_REPORT};
use crate::validation::PASS;
use serde_json::{json, Value};

/// Failpoints the implementer's receipt chain passes on its way to the validator's start_agent.
const AFTER_IMPLEMENTER: &[&str] = &[
    "receipt-after-record",
    "dod-after-launch",
    "validator-after-prepare",
];
/// Failpoints the validator's receipt chain passes on its way to delivered.
const AFTER_VALIDATOR: &[&str] = &[
    "validator-after-check",
    "deliver-after-prepare",
    "deliver-after-commit",
    "deliver-after-record",
];

const WAIT: &str = "60";

fn host_env() -> (TestEnv, String) {
    TestEnv::buildable(json!({
        "verify": {"independent": true, "lenses": ["full"], "commands": ["true"]},
    }))
}

/// `iced <args> --json` with `ICED_FAILPOINT=<failpoint>`: it must be killed there.
fn killed_at(env: &TestEnv, args: &[&str], failpoint: &str) {
    env.killed_at(&[args, &["--json"]].concat(), failpoint);
}

/// `iced <args> --json`, which must succeed: its object.
fn call(env: &TestEnv, args: &[&str]) -> Value {
    let out = env.iced_json(args);
    assert_eq!(out.code, 0, "{args:?}:\n{out:#?}");
    out.json()
}

fn events(env: &TestEnv) -> Vec<Value> {
    env.read(".iced/run/events.jsonl")
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .collect()
}

/// The report's path a small `start_agent` names, from the receipt command in its `next`.
fn receipt_of(agent: &Value) -> String {
    let next = str_of(agent, "next");
    let from = next
        .find("iced implement receipt ")
        .expect("a receipt command")
        + 23;
    let to = next.find(" --until-host").expect("--until-host");
    next[from..to].to_owned()
}

/// A host-driven run to its end, with the call that hands in the implementer's report killed at
/// `first` (when given) and the one that hands in the validator's answer killed at `second`; each
/// killed call is followed by `implement step --until-host --wait`, as a host asks again.
fn drive(first: Option<&str>, second: Option<&str>) {
    let context = format!("{first:?} {second:?}");
    let (env, id) = host_env();
    build(&env, &id, &["--no-wait"], 0);
    let agent = call(&env, &["implement", "step", "--until-host"]);
    assert_eq!(agent["action"], "start_agent", "{context}: {agent}");
    agent_commit(&worktree_of(&env, &id), "src/session.rs", "fixed\n");
    let receipt = receipt_of(&agent);
    std::fs::write(env.root().join(&receipt), GOOD_REPORT).unwrap();
    let hand_in = [
        "implement",
        "receipt",
        &receipt,
        "--until-host",
        "--wait",
        WAIT,
    ];
    let again = ["implement", "step", "--until-host", "--wait", WAIT];
    let validator = match first {
        Some(fp) => {
            killed_at(&env, &hand_in, fp);
            call(&env, &again)
        }
        None => call(&env, &hand_in),
    };
    assert_eq!(validator["action"], "start_agent", "{context}: {validator}");
    assert_eq!(validator["role"], "validator", "{context}: {validator}");
    let answer = receipt_of(&validator);
    std::fs::write(env.root().join(&answer), PASS).unwrap();
    let hand_in = [
        "implement",
        "receipt",
        &answer,
        "--until-host",
        "--wait",
        WAIT,
    ];
    let end = match second {
        Some(fp) => {
            killed_at(&env, &hand_in, fp);
            call(&env, &again)
        }
        None => call(&env, &hand_in),
    };
    assert_eq!(end["action"], "delivered", "{context}: {end}");

    // Never repeated: each agent handed out once, nothing outside attempt 1, one delivery.
    let log = events(&env);
    let starts: Vec<&Value> = log.iter().filter(|e| e["event"] == "agent_start").collect();
    let roles: Vec<&str> = starts.iter().map(|e| str_of(e, "role")).collect();
    assert_eq!(roles, ["implementer", "validator"], "{context}: {starts:?}");
    for e in &log {
        if let Some(attempt) = e.get("attempt") {
            assert_eq!(attempt, 1, "{context}: {e}");
        }
    }
    let branch = format!("iced/{id}/{id}");
    let delivered = env.git_out(&["log", "--format=%s", &branch]);
    assert_eq!(
        delivered
            .lines()
            .filter(|l| l.starts_with("iced: deliver"))
            .count(),
        1,
        "{context}: {delivered}"
    );
}

#[test]
fn a_kill_inside_a_chained_receipt_replays_and_never_repeats() {
    for fp in AFTER_IMPLEMENTER {
        drive(Some(fp), None);
    }
    for fp in AFTER_VALIDATOR {
        drive(None, Some(fp));
    }
}
