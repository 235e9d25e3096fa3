//! The queue and the budget (SPEC 20.12, 20.13): `iced build next` chooses by dependencies and
//! priority and says why; `iced drain` works through the queue until its budget, its count or the
//! queue is spent; a run with `pace.budgetUsd` starts no agent once its charge reaches it, an
//! agent of unknown cost counting as `pace.unknownCostUsd` (the fake agent as a `command` runner
//! never knows its cost; as a `claude` runner it reports the one a test gives it). Real
//! repositories, the real binary, fixtures/fake-agent.

use crate::env::{fake_runner, merge_json, Run, TestEnv};
use crate::loop_e2e::build;
use crate::snap::{assert_read, assert_refused, json_block, text_block};
use serde_json::{json, Value};

/// Every lane's implementer commits a file of its own and reports both expectations.
const AGENT: &str = "commit src/{lane}.txt done\nreport-ok E1 E2\n";

/// An initialized repository whose implementer is the fake agent following `script`, the loop's
/// own checks only, and `patch` merged into the config; nothing committed yet.
fn repo_with(script: &str, patch: Value) -> TestEnv {
    let env = TestEnv::initialized();
    let mut config = fake_runner(&env, script);
    merge_json(
        &mut config,
        &json!({"verify": {"independent": false, "commands": []}}),
    );
    merge_json(&mut config, &patch);
    env.patch_config(&config);
    env
}

/// How many times the fake agent started in `lane`.
fn starts_in(env: &TestEnv, lane: &str) -> usize {
    env.agent_starts()
        .iter()
        .filter(|l| l.contains(&format!(" lane={lane} ")))
        .count()
}

/// Only the lines of `build next` that say why: what it chose and what it passed over.
fn why_lines(run: &Run) -> String {
    run.stderr
        .lines()
        .filter(|l| l.starts_with("next: ") || l.starts_with("skipped "))
        .map(|l| format!("{l}\n"))
        .collect()
}

fn state(env: &TestEnv) -> Value {
    serde_json::from_str(&env.read(".iced/run/state.json")).expect("the state is JSON")
}

/// `build next` takes the unit with a priority over the older one without, passes over a unit
/// whose dependency is not delivered and a held one, says so before it starts, and records why
/// in the run and its `run_start`; then the next call takes what is left; then the queue is empty.
#[test]
fn build_next_chooses_by_dependencies_and_priority_and_says_why() {
    let env = repo_with(AGENT, json!({}));
    let alpha = env.approved_unit("alpha without priority");
    let beta = env.approved_unit("beta second priority");
    let gamma = env.approved_unit("gamma first priority waits");
    let delta = env.good_unit("delta still a draft");
    let held = env.approved_unit("epsilon held");
    env.set_field(&beta, "priority", "2");
    env.set_field(&gamma, "priority", "1");
    env.set_field(&gamma, "depends", &delta);
    env.set_field(&held, "priority", "1");
    env.iced_json(&["hold", &held, "waiting for legal"]).ok();
    env.commit_all("the queue");

    let args = ["build", "next"];
    let first = env.iced(&args);
    assert_eq!(first.code, 0, "{first:#?}");
    assert_read!(&env, "build_next_why", why_lines(&first));
    assert_eq!(starts_in(&env, &beta), 1);
    assert_eq!(starts_in(&env, &alpha), 0, "only the chosen unit is built");
    let runs = state(&env)["runs"].clone();
    let run = runs
        .as_object()
        .unwrap()
        .values()
        .find(|r| r["unit"] == beta.as_str())
        .expect("beta's run");
    let picked = &run["picked"];
    assert_eq!(picked["by"], "next");
    assert_eq!(picked["priority"], 2);
    assert_eq!(picked["eligible"], json!([beta, alpha]));
    assert_eq!(
        picked["skipped"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| (s["unit"].as_str().unwrap(), s["code"].as_str().unwrap()))
            .collect::<Vec<_>>(),
        [
            (gamma.as_str(), "dependency-open"),
            (held.as_str(), "unit-held")
        ]
    );
    let events = env.read(".iced/run/events.jsonl");
    let start: Value = events
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["event"] == "run_start")
        .expect("a run_start");
    assert_eq!(&start["picked"], picked, "run_start carries the same");

    // The delivered unit is not eligible again: the next is the one without a priority.
    let (_, second) = build(&env, "next", &[], 0);
    assert_eq!(second["status"], "delivered");
    assert_eq!(second["picked"]["eligible"], json!([alpha]));
    assert_eq!(second["picked"]["why"], "the only eligible unit");
    assert_eq!(starts_in(&env, &alpha), 1);

    // Nothing left: refused, naming every unit passed over and its check.
    assert_refused!(&env, "queue-empty", 3, &args);
    assert_eq!(env.agent_starts().len(), 2, "no agent ran for a refusal");
}

/// `next` names no unit, and no unit may be given the slug `next`.
#[test]
fn next_is_reserved() {
    let env = TestEnv::initialized();
    env.approved_unit("next steps for the login");
    for args in [&["status", "next"][..], &["approve", "next", "--yes"]] {
        let out = env.iced_json(args);
        out.refused(3, "name-reserved");
    }
    assert_refused!(&env, "name-reserved", 3, &["new", "Next"]);
    let list = env.iced_json(&["list"]).json();
    assert_eq!(
        list.as_array().unwrap().len(),
        1,
        "nothing was created: {list}"
    );
}

/// A run whose budget is charged for its first agent (its cost unknown, counted at
/// `pace.unknownCostUsd`) starts no second one: the lane is handed back, saying why and what to do,
/// and the record and the handover say what is left.
#[test]
fn a_run_with_a_budget_starts_no_agent_once_it_is_charged() {
    // No attempt commits: no receipt verifies, and each new attempt would start an agent.
    let script = "report-ok E1 E2\n";
    let env = repo_with(
        script,
        json!({"pace": {"budgetUsd": 1.5, "unknownCostUsd": 0.75}}),
    );
    let id = env.approved_unit("budgeted unit");
    env.commit_all("approve");
    let (_, last) = build(&env, &id, &[], 4);
    assert_eq!(last["status"], "handback", "{last}");
    // Two agents at 0.75: the third is not started.
    assert_eq!(starts_in(&env, &id), 2, "{:?}", env.agent_starts());
    let run = last["run"].as_str().unwrap();
    let record: Value =
        serde_json::from_str(&env.read(&format!(".iced/run/{run}/record.json"))).unwrap();
    assert_eq!(
        record["budget"],
        json!({"usd": 1.5, "charged_usd": 1.5, "left_usd": 0.0, "unknown": 2, "unknown_cost_usd": 0.75})
    );
    let reason = record["run"]["lanes"][0]["reason"].as_str().unwrap();
    assert!(reason.starts_with("the run's budget is spent: $1.5 charged of $1.5, 2 agents of unknown cost counted at $0.75 each"), "{reason}");
    let events = env.read(".iced/run/events.jsonl");
    assert!(events.contains("\"event\":\"budget_spent\""), "{events}");
    let args = ["run", "handover", run];
    let handover = env.iced(&args);
    assert_read!(&env, "budget_handover", text_block(&args, &handover));
}

/// `drain --budget-usd 2` with agents of unknown cost counted at 1: two units, then it stops for
/// its budget, naming the unit it did not reach; the third unit's agent never started.
#[test]
fn drain_stops_at_its_budget_with_unknown_costs_counted() {
    let env = repo_with(AGENT, json!({"pace": {"unknownCostUsd": 1}}));
    let units: Vec<String> = ["one", "two", "three"]
        .iter()
        .map(|t| env.approved_unit(&format!("drained {t}")))
        .collect();
    env.commit_all("approve");
    let args = ["drain", "--budget-usd", "2"];
    let out = env.iced(&args);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_read!(&env, "drain_budget_summary", out.stdout.clone());
    assert_eq!(starts_in(&env, &units[0]), 1);
    assert_eq!(starts_in(&env, &units[1]), 1);
    assert_eq!(starts_in(&env, &units[2]), 0, "no agent past the budget");
    // The same again, as JSON: nothing more is built, the budget is spent at once for the rest.
    let again = env.iced_json(&["drain", "--budget-usd", "1"]);
    let summary = again.json();
    assert_eq!(summary["stopped"], "budget", "{summary}");
    assert_eq!(summary["units"], 1);
    assert_eq!(summary["delivered"][0]["unit"], units[2].as_str());
    assert_eq!(summary["delivered"][0]["charged_usd"], 1.0);
    assert_eq!(starts_in(&env, &units[2]), 1);
}

/// `drain --max-units 1` builds one unit and names the rest as not reached; a drain with nothing
/// left stops `empty`, naming what it passed over.
#[test]
fn drain_with_max_units() {
    let env = repo_with(AGENT, json!({}));
    let a = env.approved_unit("first of two");
    let b = env.approved_unit("second of two");
    env.commit_all("approve");
    let args = ["drain", "--max-units", "1"];
    let out = env.iced_json(&args);
    let summary = out.json();
    assert_eq!(out.code, 0, "{out:#?}");
    assert_read!(&env, "drain_max_units_json", json_block(&args, &out));
    assert_eq!(summary["stopped"], "max-units");
    assert_eq!(summary["units"], 1);
    assert_eq!(summary["delivered"][0]["unit"], a.as_str());
    assert_eq!(summary["queued"], json!([b]));
    assert_eq!(starts_in(&env, &b), 0);
    let rest = env.iced_json(&["drain"]).json();
    assert_eq!(rest["stopped"], "empty");
    assert_eq!(rest["delivered"][0]["unit"], b.as_str());
    let skipped: Vec<&str> = rest["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["code"].as_str().unwrap())
        .collect();
    assert_eq!(skipped, ["unit-delivered"], "{rest}");
    assert_eq!(env.agent_starts().len(), 2);
}

/// A unit handed back by its agent is reported with the reason, and the drain does not build it
/// again; nor does a later drain.
#[test]
fn drain_reports_a_handback_and_leaves_the_unit_to_a_person() {
    let script = "handback the contract contradicts itself\n";
    let env = repo_with(script, json!({}));
    let id = env.approved_unit("contradictory unit");
    env.commit_all("approve");
    let summary = env.iced_json(&["drain"]).json();
    assert_eq!(summary["stopped"], "empty", "{summary}");
    assert_eq!(summary["handed_back"][0]["unit"], id.as_str());
    assert_eq!(
        summary["handed_back"][0]["reason"],
        "the contract contradicts itself"
    );
    let again = env.iced_json(&["drain"]).json();
    assert_eq!(again["units"], 0);
    assert_eq!(again["skipped"][0]["code"], "unit-handed-back", "{again}");
    assert_eq!(starts_in(&env, &id), 1);
}

/// `drain --until` a time that has come builds nothing; a time that is not one is refused.
#[test]
fn drain_until_a_time_that_has_come_builds_nothing() {
    let env = repo_with(AGENT, json!({}));
    let id = env.approved_unit("not tonight");
    env.commit_all("approve");
    let summary = env
        .iced_json(&["drain", "--until", "2000-01-01T00:00:00Z"])
        .json();
    assert_eq!(summary["stopped"], "time", "{summary}");
    assert_eq!(summary["units"], 0);
    assert_eq!(summary["queued"], json!([id]));
    env.iced_json(&["drain", "--until", "tonight"])
        .refused(3, "time-invalid");
    assert!(env.agent_starts().is_empty());
}

/// `build --budget-usd` gives the run its budget over the config's (none here): the first agent,
/// of unknown cost, is charged the default estimate of $1, and no second one starts.
#[test]
fn build_budget_flag_gives_the_run_its_budget() {
    let env = repo_with("report-ok E1 E2\n", json!({}));
    let id = env.approved_unit("flagged budget");
    env.commit_all("approve");
    let (_, last) = build(&env, &id, &["--budget-usd", "0.5"], 4);
    assert_eq!(last["status"], "handback", "{last}");
    assert_eq!(starts_in(&env, &id), 1);
    let run = last["run"].as_str().unwrap();
    let state = state(&env);
    let pace = &state["runs"][run]["pace"];
    assert_eq!(
        (pace["budgetUsd"].as_f64(), pace["unknownCostUsd"].as_f64()),
        (Some(0.5), Some(1.0))
    );
    let record: Value =
        serde_json::from_str(&env.read(&format!(".iced/run/{run}/record.json"))).unwrap();
    assert_eq!(record["budget"]["charged_usd"], 1.0);
    assert_eq!(record["budget"]["left_usd"], 0.0);
    // What run show says of the money (the rest of it, a brief's hash among it, is others' to pin).
    let show = env.iced(&["run", "show", run]).ok();
    let money: String = show
        .stdout
        .lines()
        .filter(|l| l.starts_with("cost: ") || l.starts_with("budget: "))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_read!(&env, "run_show_budget", money);
    let bad = env.iced_json(&["build", &id, "--budget-usd", "0"]);
    bad.refused(3, "config-invalid");
}

/// A drain without an implementer runner would start every unit as a run waiting for its host.
#[test]
fn drain_needs_a_runner() {
    let env = TestEnv::initialized();
    env.approved_unit("for a host");
    env.commit_all("approve");
    assert_refused!(&env, "drain-needs-runner", 3, &["drain"]);
    let state = env.path(".iced/run/state.json");
    assert!(!state.exists(), "nothing was admitted");
}

/// Two approved units; the second one's agent, an adversary, overwrites the checkout's state
/// file with text that is no state.
fn drain_broken_by_an_agent() -> (TestEnv, String, String) {
    let env = TestEnv::initialized();
    // Confined, the agent could not write the state at all (SPEC 24.12); this is the drain's
    // answer to a state that went bad under it.
    env.unconfined();
    let first = env.approved_unit("delivered before the refusal");
    let second = env.approved_unit("its agent breaks the state");
    let state_file = env.path(".iced/run/state.json");
    // Replaced whole, never torn: this test is about a state that is no state, not about one
    // read half-written (a reader that came between a truncating write and its text saw an
    // empty file, a refusal of its own; on a busy machine it did).
    let script = format!(
        "lane {second}\nreplace {} not a state\nlane *\n{AGENT}",
        state_file.display()
    );
    let mut config = fake_runner(&env, &script);
    merge_json(
        &mut config,
        &json!({"verify": {"independent": false, "commands": []}}),
    );
    env.patch_config(&config);
    env.commit_all("approve");
    (env, first, second)
}

/// A refusal after the first run ends the drain with what it did so far: the first unit
/// delivered, the refusal and the unit it stopped at, in text and JSON, exiting with the
/// refusal's code; a drain refused before its first run is the refusal alone.
#[test]
fn a_refusal_mid_drain_ends_it_with_the_work_so_far() {
    let (env, first, second) = drain_broken_by_an_agent();
    let out = env.iced(&["drain"]);
    assert_eq!(out.code, 3, "{out:#?}");
    assert_read!(&env, "drain_refused_summary", out.stdout.clone());
    assert_eq!(starts_in(&env, &first), 1);
    assert_eq!(starts_in(&env, &second), 1);
    let state = env.read(".iced/run/state.json");
    assert_eq!(state, "not a state\n", "the agent's write is what refused");
    let again = env.iced_json(&["drain"]);
    assert_eq!(again.code, 3, "{again:#?}");
    assert_eq!(again.json()["refused"]["code"], "state-invalid");
    assert!(
        again.json().get("stopped").is_none(),
        "no summary: {again:#?}"
    );

    let (env, _, _) = drain_broken_by_an_agent();
    let args = ["drain"];
    let out = env.iced_json(&args);
    assert_eq!(out.code, 3, "{out:#?}");
    assert_read!(&env, "drain_refused_json", json_block(&args, &out));
}

/// A `claude` runner whose program is the fake agent (fixtures/fake-agent, `-p`): it commits and
/// reports as `AGENT` does, then prints Claude Code's result object with `cost` as
/// `total_cost_usd`.
fn claude_reporting(cost: &str) -> (TestEnv, Vec<String>) {
    let env = TestEnv::initialized();
    let script = env.agent_script();
    std::fs::write(
        &script,
        format!(
            "{AGENT}print {{\"type\": \"result\", \"subtype\": \"success\", \"is_error\": false, \"num_turns\": 1, \"total_cost_usd\": {cost}, \"usage\": {{\"input_tokens\": 10, \"output_tokens\": 10}}, \"result\": \"done\"}}\n"
        ),
    )
    .unwrap();
    env.patch_config(&json!({
        "runners": {"cc": {
            "kind": "claude",
            "program": crate::env::fake_agent().display().to_string(),
            "timeoutSec": 30,
            "env": {"FAKE_AGENT_SCRIPT": script.display().to_string()}
        }},
        "roles": {"implementer": {"runner": "cc"}},
        "verify": {"independent": false, "commands": []},
    }));
    let units: Vec<String> = ["one", "two", "three"]
        .iter()
        .map(|t| env.approved_unit(&format!("drained {t}")))
        .collect();
    env.commit_all("approve");
    (env, units)
}

/// Issue 35, why-case 8: a harness reporting a cost of -1000 stretched `drain --budget-usd 1.5`
/// from 2 units to 3 (its agent paid the budget back). A cost that is negative is unknown, and is
/// charged as one (`pace.unknownCostUsd`, 1 by default): the drain builds two units and stops
/// for its budget; the third unit's agent never starts.
#[test]
fn a_negative_cost_is_unknown_and_does_not_stretch_a_budget() {
    let (env, units) = claude_reporting("-1000");
    let out = env.iced_json(&["drain", "--budget-usd", "1.5"]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(
        starts_in(&env, &units[2]),
        0,
        "an agent past the budget: {out:#?}"
    );
    let summary = out.json();
    assert_eq!(summary["stopped"], "budget", "{summary:#}");
    assert_eq!(starts_in(&env, &units[0]), 1);
    assert_eq!(starts_in(&env, &units[1]), 1);
    // Each run's record says its agent's cost is unknown, never -1000.
    let records: Vec<Value> = std::fs::read_dir(env.path(".iced/run"))
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.unwrap().path().join("record.json")).ok())
        .map(|r| serde_json::from_str(&r).unwrap())
        .collect();
    assert_eq!(records.len(), 2, "{records:#?}");
    for record in records {
        assert_eq!(record["agents"][0]["cost_usd"], "unknown", "{record:#}");
    }
}

/// A cost that is a real number is charged as reported: two agents at $0.75 reach a budget of
/// $1.5, so the third unit is not started. The same
/// harness, so the test above fails for the cost and nothing else.
#[test]
fn a_reported_cost_is_charged_as_reported() {
    let (env, units) = claude_reporting("0.75");
    let out = env.iced_json(&["drain", "--budget-usd", "1.5"]);
    assert_eq!(out.code, 0, "{out:#?}");
    let summary = out.json();
    assert_eq!(summary["stopped"], "budget", "{summary:#}");
    assert_eq!(starts_in(&env, &units[1]), 1, "{summary:#}");
    assert_eq!(starts_in(&env, &units[2]), 0);
}
