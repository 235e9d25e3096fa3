//! A host spends a call only when an agent must start (issue 12, items 1 to 3; SPEC 20.2):
//! `implement step --until-host` and `implement receipt <path> --until-host` step on, each step its
//! own, until the answer needs the host; `--wait <seconds>` waits on the loop's own activities
//! first; a layout-3 run's `start_agent` names the brief and the report from the repository root
//! and fits in 512 bytes, and the brief ends with the exact command that hands its report in.

use crate::env::TestEnv;
use crate::loop_e2e::{agent_commit, build, str_of, worktree_of, GOOD_REPORT};
use crate::snap::{assert_read, both, json};
use crate::validation::PASS;
use serde_json::{json, Value};

/// The most bytes a `start_agent` answer may take, whatever the paths (issue 12, item 3).
const SMALL: usize = 512;

/// Host-driven, one independent validator (of the longest built-in lens name), one
/// definition-of-done command that takes a second (an activity of the loop's own, for `--wait` to
/// wait on).
fn host_env() -> (TestEnv, String) {
    TestEnv::buildable(json!({
        "verify": {"independent": true, "lenses": ["expectations"], "commands": ["sleep 1"]},
    }))
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

fn events(env: &TestEnv, kind: &str) -> Vec<Value> {
    env.read(".iced/run/events.jsonl")
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["event"] == kind)
        .collect()
}

/// `iced <args> --json`, which must succeed: its object, and the bytes it printed.
fn call(env: &TestEnv, args: &[&str]) -> (Value, usize) {
    let out = env.iced_json(args);
    assert_eq!(out.code, 0, "{args:?}:\n{out:#?}");
    (out.json(), out.stdout.len() + out.stderr.len())
}

#[test]
fn until_host_goes_from_one_agent_to_the_next_in_one_call_each() {
    let (env, _) = host_env();
    // A unit whose id is as long as ids get (SPEC 3: a 40-character slug after its number), so
    // the 512 bytes hold for the longest paths the run folder names.
    let id =
        env.approved_unit("sessions that were idle for too long end and are refreshed on activity");
    assert!(id.len() >= 44, "{id}");
    env.commit_all("a unit with a long id");
    let (_, last) = build(&env, &id, &["--no-wait"], 0);
    let run = str_of(&last, "run").to_owned();

    // The first call steps on to the implementer's start_agent: small, from the root.
    assert_read!(
        &env,
        "until_host_start_implementer",
        both(&env, &["implement", "step", "--until-host"])
    );
    let (agent, bytes) = call(&env, &["implement", "step", "--until-host"]);
    assert_eq!(agent["action"], "start_agent", "{agent}");
    assert!(bytes <= SMALL, "{bytes} bytes: {agent}");
    let receipt = receipt_of(&agent);
    assert!(receipt.starts_with(".iced/run/"), "{receipt}");
    for key in [
        "worktree",
        "receipt_key",
        "receipt_path",
        "lane",
        "stage",
        "attempt",
    ] {
        assert!(agent.get(key).is_none(), "{key}: {agent}");
    }

    // The brief says the rest: where to work, and the exact command that hands the report in.
    let brief = env.read(str_of(&agent, "brief"));
    let worktree = worktree_of(&env, &id);
    assert!(brief.contains(&worktree.display().to_string()), "{brief}");
    let command = format!(
        "iced implement receipt {} --run {run} --until-host",
        env.root().join(&receipt).display()
    );
    assert!(brief.ends_with(&format!("    {command}\n")), "{brief}");

    // The receipt, without --wait: it stops where the definition of done runs.
    agent_commit(&worktree, "src/session.rs", "fixed\n");
    std::fs::write(env.root().join(&receipt), GOOD_REPORT).unwrap();
    let (waiting, _) = call(&env, &["implement", "receipt", &receipt, "--until-host"]);
    assert_eq!(waiting["action"], "waiting", "{waiting}");
    // With --wait, the next call waits for it and answers the validator to start.
    let (validator, bytes) = call(&env, &["implement", "step", "--until-host", "--wait", "60"]);
    assert_eq!(validator["action"], "start_agent", "{validator}");
    assert_eq!(validator["role"], "validator", "{validator}");
    assert!(bytes <= SMALL, "{bytes} bytes: {validator}");
    let prompt = env.read(str_of(&validator, "brief"));
    assert!(
        prompt.contains("iced implement receipt ") && prompt.ends_with("--until-host\n"),
        "{prompt}"
    );

    // Its answer, handed in with --until-host, runs the run to its end.
    let answer = receipt_of(&validator);
    std::fs::write(env.root().join(&answer), PASS).unwrap();
    assert_read!(
        &env,
        "until_host_receipt_delivers",
        json(
            &env,
            &[
                "implement",
                "receipt",
                &answer,
                "--until-host",
                "--wait",
                "60"
            ]
        )
    );
    // Each agent started once; each step started once per attempt.
    assert_eq!(events(&env, "agent_start").len(), 2);
    let starts: Vec<String> = events(&env, "step_start")
        .iter()
        .map(|e| format!("{} {}", e["step"], e["attempt"]))
        .collect();
    let mut unique = starts.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(
        starts.len(),
        unique.len(),
        "a step started twice: {starts:?}"
    );
}

#[test]
fn without_until_host_a_call_is_one_step_and_answers_as_before() {
    let (env, id) = host_env();
    build(&env, &id, &["--no-wait"], 0);
    let (first, _) = call(&env, &["implement", "step"]);
    // The run was built up to its start_agent by `build`: asked again, the full answer.
    assert_eq!(first["action"], "start_agent", "{first}");
    assert!(str_of(&first, "worktree").starts_with('/'), "{first}");
    assert!(str_of(&first, "receipt_path").starts_with('/'), "{first}");
    // --wait needs --until-host.
    let out = env.iced_json(&["implement", "step", "--wait", "5"]);
    assert_eq!(out.code, 2, "{out:#?}");
}

#[test]
fn until_host_with_no_live_run_says_nothing() {
    let (env, _) = host_env();
    let (nothing, _) = call(&env, &["implement", "step", "--until-host", "--wait", "5"]);
    assert_eq!(nothing["action"], "nothing", "{nothing}");
}

/// `--wait` is a bound: a definition of done that runs longer than it is left running, and the
/// call answers `waiting` once its time is up.
#[test]
fn a_wait_ends_at_its_time_with_the_run_still_waiting() {
    // The definition of done runs until the test lets it go: the answer `waiting` is what shows
    // the call ended at its bound, not at the command's end, however long a busy machine takes.
    let (env, id) = TestEnv::buildable_with(|env| {
        let go = env.outside("go").display().to_string();
        json!({"verify": {"independent": false, "commands": [
            {"argv": ["sh", "-c", "while [ ! -e \"$0\" ]; do sleep 0.1; done", go], "timeoutSec": 600}
        ]}})
    });
    build(&env, &id, &["--no-wait"], 0);
    let (agent, _) = call(&env, &["implement", "step", "--until-host"]);
    agent_commit(&worktree_of(&env, &id), "src/session.rs", "fixed\n");
    let receipt = receipt_of(&agent);
    std::fs::write(env.root().join(&receipt), GOOD_REPORT).unwrap();
    let began = std::time::Instant::now();
    let (answer, _) = call(
        &env,
        &[
            "implement",
            "receipt",
            &receipt,
            "--until-host",
            "--wait",
            "2",
        ],
    );
    let took = began.elapsed();
    assert_eq!(answer["action"], "waiting", "{answer}");
    assert!(took >= std::time::Duration::from_secs(2), "{took:?}");
    std::fs::write(env.outside("go"), "").unwrap();
}
