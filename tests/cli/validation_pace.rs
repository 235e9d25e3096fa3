//! Validators and the pace (SPEC 20.9 to 20.11): the agent ceiling, a run paced until later, a
//! run's own pace, work windows. Split from validation.rs, whose helpers it uses.

use crate::env::TestEnv;
use crate::loop_e2e::{build, run_show, step_until, str_of};
use crate::validation::*;
use serde_json::{json, Value};

/// The agents alive at once at their most, from events.jsonl: each agent from its `agent_start`
/// to its `agent_end` (by lane, attempt and step), positions taken from the log's order; an end
/// with no start counts for nothing (SPEC 21.5).
fn most_agents_alive(env: &TestEnv) -> usize {
    let text = std::fs::read_to_string(env.path(".iced/run/events.jsonl")).unwrap_or_default();
    let key = |e: &Value| {
        format!(
            "{} {} {}",
            e["lane"],
            e["attempt"],
            e["step"].as_str().unwrap_or("implement")
        )
    };
    let (mut alive, mut most) = (std::collections::BTreeSet::new(), 0);
    for line in text.lines() {
        let e: Value = serde_json::from_str(line).unwrap();
        match e["event"].as_str() {
            Some("agent_start") => {
                alive.insert(key(&e));
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

/// SPEC 20.9: with `pace.agents: 2`, six validators never have more than two agents alive at
/// once (the implementer included), and all six still answer: the run is delivered.
#[test]
fn six_validators_under_a_ceiling_of_two_never_run_more_than_two_at_once() {
    let script =
        implementer("") + &section("*", "validator", "*", &format!("sleep 0.3\nreport {PASS}"));
    let (env, id) = validated(
        &script,
        &["expectations", "failures", "rules"],
        json!({"verify": {"reviewers": ["ruthless", "security", "fidelity"]}, "pace": {"agents": 2}}),
    );
    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    let validators = starts(&env)
        .iter()
        .filter(|s| s.role == "validator")
        .count();
    assert_eq!(validators, 6, "{:?}", starts(&env));
    assert_eq!(
        most_agents_alive(&env),
        2,
        "{}",
        env.read(".iced/run/events.jsonl")
    );
    assert!(
        out.stdout.contains("ceiling (pace.agents)"),
        "a validator waited its turn, and the report said so: {out:#?}"
    );
}

/// SPEC 20.10: `iced run pause <run> --until T` launches no agent before T (the run is not paused:
/// what needs no agent goes on), and `iced run resume` lifts it.
#[test]
fn a_run_paced_until_later_launches_no_validator_until_resumed() {
    let script = implementer("") + &section("*", "validator", "*", &format!("report {PASS}"));
    let (env, id) = validated(&script, &["full"], json!({}));
    let (_, last) = build(&env, &id, &["--no-wait"], 0);
    let run = str_of(&last, "run").to_owned();
    let later = (chrono::Utc::now() + chrono::Duration::hours(1))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let paced = env
        .iced_json(&["run", "pause", &run, "--until", &later])
        .ok()
        .json();
    assert_eq!(paced["status"], "running", "{paced}");
    let waiting = step_until(&env, |s| {
        s["action"] == "waiting" && str_of(s, "next").contains("paced")
    });
    assert!(str_of(&waiting, "next").contains(&later), "{waiting}");
    assert!(
        !starts(&env).iter().any(|s| s.role == "validator"),
        "a validator started while paced"
    );
    env.iced_json(&["run", "pause", &run, "--until", "tomorrow"])
        .refused(3, "time-invalid");
    env.iced_json(&["run", "resume", &run]).ok();
    step_until(&env, |s| s["action"] == "delivered");
    assert_eq!(
        starts(&env)
            .iter()
            .filter(|s| s.role == "validator")
            .count(),
        1
    );
}

/// SPEC 20.11: a run records the pace in force when admitted (a dated ruling over the config's
/// own value, a flag over both); resuming it on another pace is refused until `--repace`.
#[test]
fn a_run_keeps_its_pace_and_a_resume_on_another_is_refused_until_repaced() {
    let script = implementer("") + &section("*", "validator", "*", &format!("report {PASS}"));
    let (env, id) = validated(
        &script,
        &["full"],
        json!({"pace": {"agents": 3, "rulings": [
            {"from": "2020-01-01T00:00:00Z", "agents": 1, "why": "quota halved"},
            {"from": "2999-01-01T00:00:00Z", "agents": 9, "why": "later"}
        ]}}),
    );
    env.commit_all("pace");
    let (_, last) = build(&env, &id, &["--no-wait"], 0);
    let run = str_of(&last, "run").to_owned();
    let shown = run_show(&env, &run);
    assert_eq!(shown["pace"]["agents"], 1, "the ruling in force: {shown:#}");
    assert_eq!(shown["pace"]["ruling"]["why"], "quota halved");
    let handover = env.iced(&["run", "handover"]).ok().stdout;
    assert!(
        handover.contains("1 agent at once (ruling of 2020-01-01T00:00:00Z: quota halved)"),
        "{handover}"
    );

    // The config changes under the live run: a person resuming it is told so.
    env.patch_config(&json!({"pace": {"rulings": []}}));
    env.commit_all("no more rulings");
    let refused = env.iced_json(&["build", &id]).refused(3, "pace-changed");
    assert!(
        str_of(&refused, "reason").contains("agents 1 -> 3"),
        "{refused}"
    );
    env.iced_json(&["run", "resume", &run])
        .refused(3, "pace-changed");
    // A flag wins over the config; --repace records it.
    let (_, last) = build(&env, &id, &["--pace-agents", "2", "--repace"], 0);
    assert_eq!(last["status"], "delivered");
    let shown = run_show(&env, &run);
    assert_eq!(shown["pace"]["agents"], 2, "{shown:#}");
    let events = env.read(".iced/run/events.jsonl");
    assert!(
        events.contains(r#""event":"repaced""#) && events.contains("agents 1 -> 2"),
        "{events}"
    );
}

/// SPEC 20.11: with a work window, a run that has worked `workMinutes` launches nothing for
/// `pauseMinutes`, then goes on to delivery.
#[test]
fn a_work_window_pauses_launches_then_the_run_goes_on() {
    let script =
        implementer("") + &section("*", "validator", "*", &format!("sleep 0.5\nreport {PASS}"));
    let (env, id) = validated(
        &script,
        &["full"],
        // 0.3 s of work, then 0.6 s launching nothing.
        json!({"pace": {"workMinutes": 0.005, "pauseMinutes": 0.01}}),
    );
    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    let events = env.read(".iced/run/events.jsonl");
    assert!(events.contains(r#""why":"work_window""#), "{events}");
}

/// SPEC 20.9: a new run is not admitted while the agents alive fill the ceiling; once they end,
/// it is.
#[test]
fn a_new_run_is_refused_while_the_ceiling_is_full() {
    let script = section(
        "*",
        "implementer",
        "*",
        "sleep 1\ncommit src/session.rs sessions refresh on activity\nreport-ok E1 E2",
    );
    let (env, first) = validated(
        &script,
        &["full"],
        json!({"pace": {"agents": 1}, "verify": {"independent": false}}),
    );
    let second = env.approved_unit("idle sessions end");
    env.commit_all("a second unit");
    let (_, last) = build(&env, &first, &["--no-wait"], 0);
    assert_eq!(last["action"], "waiting", "{last}");
    let refused = env
        .iced_json(&["build", &second])
        .refused(3, "ceiling-full");
    assert!(
        str_of(&refused, "reason").contains("pace.agents is 1"),
        "{refused}"
    );
    // The first run's agent ends: the second is admitted.
    build(&env, &first, &[], 0);
    let (_, last) = build(&env, &second, &[], 0);
    assert_eq!(last["status"], "delivered", "{last}");
}
