//! The host driver keeps the pace (SPEC 24.8): with no runner configured, `implement step` hands
//! out no new agent while the run is paced or the repository's agents are at `pace.agents`; an
//! agent handed out counts from that answer until its receipt (or until its run ends), in
//! `agent_start`/`agent_end` too; and `implement receipt --model --session` puts what the host
//! says into the run record's `agents`.
//!
//! Regression for: "The host driver (the default, no runner configured) ignores `run pause
//! --until` and `next_eligible_at`, never counts the agents it hands out against `pace.agents`,
//! and records none of them in the run record."

use crate::env::TestEnv;
use crate::loop_e2e::{
    agent_commit, build, hand_in, host_run, state_fingerprint, str_of, worktree_of, GOOD_REPORT,
    WAIT,
};
use crate::validation::PASS;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const LATER: &str = "2099-01-01T00:00:00Z";
const CEILING: &str = "ceiling (pace.agents)";

/// Host-driven (no runner), the loop's own checks only, with `patch` merged into the config.
fn host_env(patch: Value) -> (TestEnv, String) {
    let mut config = json!({"verify": {"independent": false, "commands": []}});
    crate::env::merge_json(&mut config, &patch);
    TestEnv::buildable(config)
}

/// `iced implement step --run <run> --json`, which must succeed; its object.
fn step_run(env: &TestEnv, run: &str) -> Value {
    let out = env.iced_json(&["implement", "step", "--run", run]);
    assert_eq!(out.code, 0, "implement step --run {run}:\n{out:#?}");
    out.json()
}

/// Step `run` until `done` says so, failing on a start_agent or an end it did not want.
fn step_run_until(env: &TestEnv, run: &str, done: impl Fn(&Value) -> bool) -> Value {
    let start = Instant::now();
    loop {
        let s = step_run(env, run);
        if done(&s) {
            return s;
        }
        let action = str_of(&s, "action");
        assert!(
            matches!(action, "advanced" | "waiting"),
            "the run stopped somewhere else: {s}"
        );
        assert!(start.elapsed() < WAIT, "not within {WAIT:?}: {s}");
        if action == "waiting" {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn events(env: &TestEnv) -> Vec<Value> {
    env.read(".iced/run/events.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// The `agent_start` (or `agent_end`) events of `run`.
fn agent_events(env: &TestEnv, kind: &str, run: &str) -> Vec<Value> {
    events(env)
        .into_iter()
        .filter(|e| e["event"] == kind && e["run"] == run)
        .collect()
}

/// The most agents alive at once in the repository, counted from the events as SPEC 21.5 says:
/// an agent is alive from its `agent_start` to its `agent_end` (keyed by run, lane, step and
/// attempt); an end with no start counts for nothing.
fn most_alive(env: &TestEnv) -> usize {
    let key = |e: &Value| format!("{} {} {} {}", e["run"], e["lane"], e["step"], e["attempt"]);
    let mut alive = std::collections::BTreeSet::new();
    let mut most = 0;
    for e in events(env) {
        match e["event"].as_str() {
            Some("agent_start") => {
                assert!(alive.insert(key(&e)), "started twice: {e}");
            }
            Some("agent_end") => {
                alive.remove(&key(&e));
            }
            _ => {}
        }
        most = most.max(alive.len());
    }
    most
}

/// The host's implementer does its work: a commit in the lane's worktree and a good report.
fn implementer_works(env: &TestEnv, id: &str, agent: &Value) -> String {
    agent_commit(&worktree_of(env, id), "src/session.rs", "fixed\n");
    let receipt = str_of(agent, "receipt_path").to_owned();
    std::fs::write(&receipt, GOOD_REPORT).unwrap();
    receipt
}

/// A second approved unit in the same repository, committed.
fn second_unit(env: &TestEnv) -> String {
    let id = env.approved_unit("idle sessions end");
    env.commit_all("a second unit");
    id
}

/// A second host-driven run, created with `build --no-wait`: it stops waiting on the ceiling.
fn waiting_run(env: &TestEnv, id: &str) -> String {
    let (out, last) = build(env, id, &["--no-wait"], 0);
    assert_eq!(last["action"], "waiting", "{out:#?}");
    str_of(&last, "run").to_owned()
}

fn assert_waits_on_the_ceiling(env: &TestEnv, run: &str) {
    let s = step_run(env, run);
    assert_eq!(s["action"], "waiting", "{s}");
    assert_eq!(s["stage"], "implement", "{s}");
    assert!(str_of(&s, "next").contains(CEILING), "{s}");
    assert!(s.get("receipt_key").is_none(), "{s}");
    assert!(
        agent_events(env, "agent_start", run).is_empty(),
        "an agent was handed out over the ceiling"
    );
}

#[test]
fn a_run_paced_until_later_hands_the_host_no_new_implementer() {
    let (env, id) = host_env(json!({"verify": {"commands": ["test -f src/session.rs"]}}));
    let (run, agent) = host_run(&env, &id);
    assert_eq!(agent_events(&env, "agent_start", &run).len(), 1);

    env.iced_json(&["run", "pause", &run, "--until", LATER])
        .ok();
    // The agent already handed out is the host's: asked again, the same answer.
    assert_eq!(step_run(&env, &run), agent);

    // Its report does not verify (no commit): attempt 2 would need a new agent, and waits.
    std::fs::write(str_of(&agent, "receipt_path"), GOOD_REPORT).unwrap();
    hand_in(&env, str_of(&agent, "receipt_path")).ok();
    let waiting = step_run_until(&env, &run, |s| {
        s["action"] == "waiting" && s["stage"] == "implement"
    });
    assert_eq!(waiting["attempt"], 2, "{waiting}");
    assert!(str_of(&waiting, "next").contains(LATER), "{waiting}");
    assert!(waiting.get("receipt_key").is_none(), "{waiting}");
    // Asked again: the same wait, and nothing written.
    let before = state_fingerprint(&env);
    let events_before = env.read_bytes(".iced/run/events.jsonl");
    assert_eq!(step_run(&env, &run), waiting);
    assert!(
        state_fingerprint(&env) == before,
        "waiting rewrote the state"
    );
    assert!(
        env.read_bytes(".iced/run/events.jsonl") == events_before,
        "waiting logged an event"
    );
    let starts = agent_events(&env, "agent_start", &run);
    assert_eq!(starts.len(), 1, "{starts:#?}");

    // A resume lifts the pace: attempt 2's implementer is handed out, and logged once.
    env.iced_json(&["run", "resume", &run]).ok();
    let second = step_run(&env, &run);
    assert_eq!(second["action"], "start_agent", "{second}");
    assert_eq!(second["attempt"], 2, "{second}");
    assert_eq!(step_run(&env, &run), second);
    let starts = agent_events(&env, "agent_start", &run);
    assert_eq!(starts.len(), 2, "{starts:#?}");
    assert_eq!(starts[1]["attempt"], 2);
    assert_eq!(starts[1]["role"], "implementer");
    assert_eq!(starts[1]["driver"], "host");
}

#[test]
fn a_second_run_waits_while_the_first_runs_host_implementer_holds_the_ceiling() {
    let (env, a) = host_env(json!({"pace": {"agents": 1}}));
    let b = second_unit(&env);
    let (run_a, agent_a) = host_run(&env, &a);
    let run_b = waiting_run(&env, &b);
    assert_waits_on_the_ceiling(&env, &run_b);
    // The first run's agent is still its own, whatever the ceiling.
    assert_eq!(step_run(&env, &run_a), agent_a);

    // Its receipt ends it: the second run's implementer is handed out.
    let receipt = implementer_works(&env, &a, &agent_a);
    let handed = env.iced_json(&[
        "implement",
        "receipt",
        &receipt,
        "--run",
        &run_a,
        "--model",
        "m",
        "--session",
        "s",
    ]);
    assert_eq!(handed.code, 0, "{handed:#?}");
    let ends = agent_events(&env, "agent_end", &run_a);
    assert_eq!(ends.len(), 1, "{ends:#?}");
    assert_eq!(ends[0]["role"], "implementer");
    let agent_b = step_run(&env, &run_b);
    assert_eq!(agent_b["action"], "start_agent", "{agent_b}");
    assert_eq!(agent_b["lane"], b.as_str());
    assert_eq!(
        most_alive(&env),
        1,
        "the events show more agents than pace.agents"
    );

    // The first run delivers (it needs no more agents); its record lists the host's agent.
    step_run_until(&env, &run_a, |s| s["action"] == "delivered");
    let shown = env.iced_json(&["run", "show", &run_a]).ok().json();
    let agents = shown["agents"].as_array().expect("agents");
    assert_eq!(
        agents,
        &vec![json!({
            "lane": a, "step": "implement", "attempt": 1, "runner": "host", "model": "m",
            "session": "s", "turns": null, "cost_usd": "unknown", "duration_ms": null,
            "exit_code": null, "status": "done", "ended": null,
        })],
        "{shown:#}"
    );
    assert_eq!(
        shown["cost"],
        json!({"usd": 0.0, "agents": 1, "unknown": 1})
    );
    let text = env.iced(&["run", "show", &run_a]).ok().stdout;
    let tail = format!(
        "cost: unknown (1 agent that reported none)\n  agent {a} implement attempt 1: runner host, model m, session s, cost unknown, answered\n"
    );
    assert!(text.ends_with(&tail), "{text}");
    // The written record says the same.
    let record: Value =
        serde_json::from_str(&env.read(&format!(".iced/run/{run_a}/record.json"))).unwrap();
    assert_eq!(record["agents"], shown["agents"]);
}

#[test]
fn a_host_validator_counts_against_the_ceiling() {
    let (env, a) = host_env(json!({
        "pace": {"agents": 1},
        "verify": {"independent": true, "lenses": ["full"]},
    }));
    let b = second_unit(&env);
    let (run_a, agent_a) = host_run(&env, &a);
    let receipt = implementer_works(&env, &a, &agent_a);
    hand_in(&env, &receipt).ok();
    let validator = step_run_until(&env, &run_a, |s| s["action"] == "start_agent");
    assert_eq!(validator["role"], "validator", "{validator}");

    let run_b = waiting_run(&env, &b);
    assert_waits_on_the_ceiling(&env, &run_b);
    assert_eq!(step_run(&env, &run_a), validator);

    // Its answer ends it: the second run's implementer is handed out.
    let answer = str_of(&validator, "receipt_path").to_owned();
    std::fs::write(&answer, PASS).unwrap();
    let out = env.iced_json(&[
        "implement",
        "receipt",
        &answer,
        "--run",
        &run_a,
        "--model",
        "v",
    ]);
    assert_eq!(out.code, 0, "{out:#?}");
    let agent_b = step_run(&env, &run_b);
    assert_eq!(agent_b["action"], "start_agent", "{agent_b}");
    assert_eq!(most_alive(&env), 1);

    step_run_until(&env, &run_a, |s| s["action"] == "delivered");
    let shown = env.iced_json(&["run", "show", &run_a]).ok().json();
    let said: Vec<(String, String, String, String)> = shown["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .map(|x| {
            let s = |k: &str| x[k].as_str().unwrap_or("?").to_owned();
            (s("step"), s("runner"), s("model"), s("session"))
        })
        .collect();
    let host =
        |step: &str, model: &str| (step.into(), "host".into(), model.into(), "unknown".into());
    assert_eq!(
        said,
        vec![host("implement", "unknown"), host("validate-full", "v")],
        "{shown:#}"
    );
    assert_eq!(shown["cost"]["unknown"], 2);
}

#[test]
fn abandoning_a_run_ends_the_agent_it_handed_to_the_host() {
    let (env, a) = host_env(json!({"pace": {"agents": 1}}));
    let b = second_unit(&env);
    let (run_a, agent_a) = host_run(&env, &a);
    let run_b = waiting_run(&env, &b);
    assert_waits_on_the_ceiling(&env, &run_b);

    env.iced_json(&["run", "abandon", &run_a]).ok();
    let ends = agent_events(&env, "agent_end", &run_a);
    assert_eq!(ends.len(), 1, "{ends:#?}");
    assert_eq!(ends[0]["outcome"], "the run ended (abandoned)");
    assert_eq!(step_run(&env, &run_b)["action"], "start_agent");
    // Its report comes too late, and the record lists the agent as ended unanswered.
    let receipt = implementer_works(&env, &a, &agent_a);
    env.iced_json(&["implement", "receipt", &receipt, "--run", &run_a])
        .refused(3, "run-ended");
    let record: Value =
        serde_json::from_str(&env.read(&format!(".iced/run/{run_a}/record.json"))).unwrap();
    assert_eq!(record["agents"][0]["runner"], "host", "{record:#}");
    assert_eq!(record["agents"][0]["status"], "failed", "{record:#}");
    assert_eq!(
        record["agents"][0]["ended"], "the run ended (abandoned)",
        "{record:#}"
    );
    let text = env.iced(&["run", "show", &run_a]).ok().stdout;
    assert!(
        text.ends_with(&format!("  agent {a} implement attempt 1: runner host, model unknown, session unknown, cost unknown, ended unanswered: the run ended (abandoned)\n")),
        "{text}"
    );
    assert_eq!(most_alive(&env), 1);
}

#[test]
fn a_model_or_session_that_is_not_one_short_line_is_a_usage_error() {
    let (env, id) = host_env(json!({}));
    let (run, agent) = host_run(&env, &id);
    let receipt = implementer_works(&env, &id, &agent);
    let before = state_fingerprint(&env);
    for bad in [
        vec!["--model", ""],
        vec!["--session", "a\nb"],
        vec!["--model", &"x".repeat(201)],
    ] {
        let mut args = vec!["implement", "receipt", receipt.as_str(), "--run", &run];
        args.extend(bad.iter().copied());
        env.iced_json(&args).refused(2, "usage");
    }
    assert!(
        state_fingerprint(&env) == before,
        "a usage error changed the state"
    );
    // One short line each is taken, and kept on the step's outcome.
    let args = ["implement", "receipt", receipt.as_str(), "--run", &run];
    let out = env.iced_json(
        &[
            &args[..],
            &["--model", "gpt-5 (high)", "--session", "abc-1"],
        ]
        .concat(),
    );
    assert_eq!(out.code, 0, "{out:#?}");
    let shown = env.iced_json(&["run", "show", &run]).ok().json();
    assert_eq!(
        crate::loop_e2e::record(&shown, "implement")["outcome"]["host_agent"],
        json!({"model": "gpt-5 (high)", "session": "abc-1"}),
        "{shown:#}"
    );
}

/// A count found over the ceiling is logged once as `ceiling_overrun`, not on every call while it
/// lasts (issue 11, item 17); again only if more agents come alive.
#[test]
fn an_overrun_of_the_ceiling_is_logged_once() {
    let (env, a) = host_env(json!({"pace": {"agents": 2}}));
    let b = second_unit(&env);
    let c = env.approved_unit("sessions survive restarts");
    env.commit_all("a third unit");
    host_run(&env, &a);
    let (out, last) = build(&env, &b, &["--no-wait"], 0);
    assert_eq!(last["action"], "start_agent", "{out:#?}");
    // A run kept to one agent, built while two are alive: over its ceiling.
    let (out, last) = build(&env, &c, &["--no-wait", "--pace-agents", "1"], 0);
    assert_eq!(last["action"], "waiting", "{out:#?}");
    let run_c = str_of(&last, "run").to_owned();
    for _ in 0..3 {
        assert_eq!(step_run(&env, &run_c)["action"], "waiting");
    }
    let overruns: Vec<Value> = events(&env)
        .into_iter()
        .filter(|e| e["event"] == "ceiling_overrun")
        .collect();
    assert_eq!(overruns.len(), 1, "{overruns:#?}");
    assert_eq!(overruns[0]["alive"], 2);
    assert_eq!(overruns[0]["ceiling"], 1);
}
