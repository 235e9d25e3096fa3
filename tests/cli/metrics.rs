//! Issue 11, items 3, 5 and 6: the metrics say what happened (a failed attempt, a hand-back, a
//! block, the questions, a sign-off answered with changes or a rejection), written once whatever
//! kills the writer; a unit a person rejected at acceptance is built again, its brief starting
//! with the reason; the brief carries the unit's decision log and the product memory.

use crate::env::{unit_file, TestEnv};
use crate::loop_e2e::{build, own_checks, str_of, with_agent};
use crate::snap::assert_read;
use serde_json::{json, Value};

/// The loop's events of `id`, as `(event, result or kind, attempt)`.
fn loop_events(env: &TestEnv, id: &str) -> Vec<(String, String, Option<u64>)> {
    env.metrics()
        .into_iter()
        .filter(|e| e["id"] == id && matches!(e["event"].as_str(), Some("verify" | "escalation")))
        .map(|e| {
            let what = e["result"].as_str().or(e["kind"].as_str()).unwrap_or("");
            (
                e["event"].as_str().unwrap().to_owned(),
                what.to_owned(),
                e["attempt"].as_u64(),
            )
        })
        .collect()
}

/// The loop's own checks only, and the delivery merged into the person's checkout.
fn landed() -> Value {
    json!({"verify": {"independent": false, "commands": []}, "land": {"mode": "merge"}})
}

fn ev(event: &str, what: &str, attempt: Option<u64>) -> (String, String, Option<u64>) {
    (event.to_owned(), what.to_owned(), attempt)
}

/// Regression: only `verify {pass}` was written, so a unit that failed its first attempt showed a
/// first-pass rate of 100%. The failed attempt lands with the work, before the pass.
#[test]
fn a_failed_attempt_lands_with_the_work_and_the_first_pass_rate_counts_it() {
    // Attempt 1 commits but writes no report; attempt 2 does the work.
    let (env, id) = with_agent(
        "attempt 1\ncommit src/session.rs one\nattempt 2\ncommit src/session.rs two\nreport-ok E1 E2\n",
        landed(),
    );
    let (_, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{last}");
    // The failed attempt lands with the work, then the delivery's pass (without independent
    // validators too: SPEC 12.1).
    assert_eq!(
        loop_events(&env, &id),
        [ev("verify", "fail", Some(1)), ev("verify", "pass", Some(2))]
    );
    let pass = env
        .metrics()
        .into_iter()
        .find(|e| e["result"] == "pass")
        .unwrap();
    assert_eq!(pass["independent"], false, "{pass}");
    let fail = env
        .metrics()
        .into_iter()
        .find(|e| e["event"] == "verify")
        .unwrap();
    assert_eq!(fail["risk"], "medium", "{fail}");
    let stats = env.iced_json(&["stats"]).ok().json();
    assert_eq!(stats["overall"]["verifyFirstPassRate"], 0.0, "{stats:#}");
    // The unit's Q1 was counted at its sign-off.
    assert_eq!(stats["overall"]["questionsPerUnit"], 1.0, "{stats:#}");
}

/// A hand-back is an escalation; it is written to the checkout when the run ends, since nothing
/// lands. A call killed right after writing it writes it once, when the run is ended again.
#[test]
fn a_handback_is_an_escalation_written_once_when_the_run_ends() {
    let (env, id) = with_agent("handback E2 cannot hold with C1\n", own_checks(json!([])));
    env.killed_at(&["build", &id, "--json"], "end-after-metrics");
    assert_eq!(loop_events(&env, &id), [ev("escalation", "handback", None)]);
    // The state still holds the run as live: the next call ends it, and writes nothing twice.
    let (_, last) = build(&env, &id, &[], 4);
    assert_eq!(last["status"], "handback", "{last}");
    assert_eq!(loop_events(&env, &id), [ev("escalation", "handback", None)]);
    let line = env
        .metrics()
        .into_iter()
        .find(|e| e["event"] == "escalation")
        .unwrap();
    assert_eq!(line["reason"], "E2 cannot hold with C1", "{line}");
}

/// Attempts spent: each failed attempt and the block are measured; abandoning the blocked run
/// writes them to the checkout.
#[test]
fn a_blocked_run_that_is_abandoned_leaves_its_failed_attempts_and_the_block() {
    let (env, id) = with_agent(
        "attempt 1\ncommit src/session.rs one\nattempt 2\ncommit src/session.rs two\n",
        json!({"verify": {"independent": false, "commands": [], "maxAttempts": 2}}),
    );
    let (_, last) = build(&env, &id, &[], 4);
    assert_eq!(last["status"], "blocked", "{last}");
    let run_id = str_of(&last, "run").to_owned();
    // Blocked is not ended: a resume could still deliver, and the delivery would carry them.
    assert_eq!(loop_events(&env, &id), []);
    env.iced_json(&["run", "abandon", &run_id]).ok();
    assert_eq!(
        loop_events(&env, &id),
        [
            ev("verify", "fail", Some(1)),
            ev("verify", "fail", Some(2)),
            ev("escalation", "blocked", None)
        ]
    );
    let stats = env.iced_json(&["stats"]).ok().json();
    assert_eq!(stats["overall"]["escalationsPerUnit"], 1.0, "{stats:#}");
}

/// Regression: a unit the person rejected at acceptance could never be built again
/// (`unit-not-approved`). It builds, its brief starts with the reason, and it is delivered again.
#[test]
fn a_unit_rejected_at_acceptance_is_built_again_with_the_reason_in_its_brief() {
    let (env, id) = with_agent("commit src/session.rs first\nreport-ok E1 E2\n", landed());
    let (_, first) = build(&env, &id, &[], 0);
    assert_eq!(first["status"], "delivered", "{first}");
    assert!(env.read(&unit_file(&id)).contains("status: done"));

    let rejected = env
        .iced_json(&["reject", &id, "the timeout must come from the config"])
        .ok()
        .json();
    assert_eq!(rejected["status"], "building", "{rejected}");
    // Not yet committed: the lane would not see the unit as the person left it.
    let refused = env.iced_json(&["build", &id]);
    assert_eq!(
        refused.json()["refused"]["code"],
        "unit-uncommitted",
        "{refused:#?}"
    );
    env.commit_all("reject: the timeout must come from the config");

    std::fs::write(
        env.agent_script(),
        "commit src/session.rs second\nreport-ok E1 E2\n",
    )
    .unwrap();
    let (_, again) = build(&env, &id, &[], 0);
    assert_eq!(again["status"], "delivered", "{again}");
    let run = str_of(&again, "run");
    let brief = env.read(&format!(".iced/run/{run}/{id}/brief-1.md"));
    let why = brief
        .find("## Why this unit is built again")
        .unwrap_or_else(|| panic!("no rejection in the brief:\n{brief}"));
    assert!(
        brief[why..].contains("> the timeout must come from the config"),
        "{brief}"
    );
    assert!(why < brief.find("## The unit").unwrap(), "{brief}");
    // The person's entry is in the log the brief carries too.
    assert!(
        brief.contains("- Decision: rejected at acceptance"),
        "{brief}"
    );
    assert!(env.read(&unit_file(&id)).contains("status: done"));
    assert_eq!(env.read("src/session.rs"), "second\n");
}

/// The brief names the unit's decision log (as the base holds it) and the product memory; a
/// snapshot of the whole brief, since it is what an agent reads.
#[test]
fn the_brief_carries_the_decision_log_and_the_product_memory() {
    let (env, id) = TestEnv::buildable(own_checks(json!(["true"])));
    env.write(
        ".iced/memory/product.md",
        "# Product\n\nA session service: people stay signed in while they work.\n",
    );
    env.iced_json(&[
        "decision",
        &id,
        "--decision",
        "refresh on every request",
        "--why",
        "the cheapest way to see activity",
    ])
    .ok();
    env.commit_all("product memory and a decision");
    let (_, agent) = crate::loop_e2e::host_run(&env, &id);
    let brief = std::fs::read_to_string(str_of(&agent, "brief")).unwrap();
    assert_read!(&env, "brief_with_decisions_and_product", brief);
}

/// Seed 000's sign-off dialog: a request for changes (the unit stays a draft) and a rejection
/// (closed), each with the person's words in the log and the metrics; approving makes the unit
/// the active one.
#[test]
fn the_signoff_takes_changes_and_a_rejection_and_approval_makes_the_unit_active() {
    let env = TestEnv::initialized();
    let a = env.good_unit("session timeout");
    let b = env.good_unit("idle logout");
    let c = env.good_unit("remember me");

    let changes = env
        .iced_json(&["approve", &a, "--changes", "split", "E2", "in", "two"])
        .ok();
    assert_read!(&env, "approve_changes", changes.stdout.clone());
    assert!(env.read(&unit_file(&a)).contains("status: draft"));
    let log = env.read(&format!("intent/{a}/decisions.md"));
    assert!(
        log.contains("- Decision: changes requested at sign-off\n- Why: split E2 in two\n"),
        "{log}"
    );

    let rejected = env.iced(&["approve", &b, "--reject", "not", "needed"]).ok();
    assert_read!(&env, "approve_reject", rejected.stdout.clone());
    assert!(env.read(&unit_file(&b)).contains("status: rejected"));

    let signoffs: Vec<Value> = env
        .metrics()
        .into_iter()
        .filter(|e| e["event"] == "signoff")
        .collect();
    assert_eq!(signoffs.len(), 2, "{signoffs:#?}");
    assert_eq!(
        (&signoffs[0]["result"], &signoffs[0]["text"]),
        (&json!("changes"), &json!("split E2 in two"))
    );
    assert_eq!(
        (&signoffs[1]["result"], &signoffs[1]["text"]),
        (&json!("rejected"), &json!("not needed"))
    );

    // `c` is the active unit (the newest); approving `a` makes it the active one.
    assert_eq!(env.read(".iced/active").trim(), c);
    env.iced_json(&["approve", &a, "--yes"]).ok();
    assert_eq!(env.read(".iced/active").trim(), a);

    // The flags exclude each other, and words are needed.
    for args in [
        vec!["approve", c.as_str(), "--yes", "--reject", "x"],
        vec!["approve", c.as_str(), "--changes", "x", "--reject", "y"],
        vec!["approve", c.as_str(), "--changes", " "],
    ] {
        let out = env.iced_json(&args);
        assert_eq!(out.code, 2, "{args:?}: {out:#?}");
    }
    // A closed unit is answered no more.
    let closed = env.iced_json(&["approve", &b, "--changes", "x"]);
    assert_eq!(
        closed.json()["refused"]["code"],
        "unit-closed",
        "{closed:#?}"
    );
}

/// Regression (issue 11 item 4): `iced status` showed an auto-accepted unit as `done` while the
/// close on the lane branch (and, once landed, the checkout) says `accepted`.
#[test]
fn status_shows_an_auto_accepted_unit_as_accepted() {
    use crate::validation::{implementer, section, validated, PASS};
    let script = implementer("") + &section("*", "validator", "*", &format!("report {PASS}"));
    for mode in ["none", "merge"] {
        let (env, id) = validated(&script, &["full"], json!({"land": {"mode": mode}}));
        env.set_field(&id, "autonomy", "2");
        env.commit_all("autonomy 2: accepted without a person");
        let (_, last) = build(&env, &id, &[], 0);
        assert_eq!(last["status"], "delivered", "{mode}: {last}");
        let branch = env.git_out(&[
            "for-each-ref",
            "--format=%(refname:short)",
            "refs/heads/iced/",
        ]);
        let closed = env.git_out(&["show", &format!("{}:{}", branch.trim(), unit_file(&id))]);
        assert!(closed.contains("status: accepted"), "{mode}: {closed}");
        let status = env.iced_json(&["status", &id]).ok().json();
        assert_eq!(status["status"], "accepted", "{mode}: {status:#}");
        let list = env.iced_json(&["list"]).ok().json();
        assert_eq!(list[0]["status"], "accepted", "{mode}: {list:#}");
        let text = env.iced(&["status", &id]).ok().stdout;
        assert!(text.contains("status accepted"), "{mode}: {text}");
    }
}

/// Regression (issue 11 item 7): `.iced/metrics.jsonl` and the unit's `decisions.md` conflicted
/// when the lane landed after a person's `iced new` and `iced decision` on `main` during the run:
/// the lane blocked. iced's append-only files merge by union, even in a repository whose
/// `.gitattributes` predates the rule.
#[test]
fn a_lane_lands_after_a_person_appends_to_the_metrics_and_the_decision_log_on_main() {
    let (env, id) = TestEnv::buildable(json!({
        "verify": {"independent": false, "commands": []},
        "land": {"mode": "merge", "strategy": "merge"}
    }));
    // A repository set up before the rule: no union lines in its `.gitattributes`.
    let attributes = env.read(".gitattributes");
    env.write(
        ".gitattributes",
        attributes
            .lines()
            .filter(|l| !l.contains("merge=union"))
            .map(|l| format!("{l}\n"))
            .collect::<String>(),
    );
    env.commit_all("attributes as an older iced wrote them");
    let (_, agent) = crate::loop_e2e::host_run(&env, &id);
    let worktree = std::path::PathBuf::from(str_of(&agent, "worktree"));

    // The person, on main, while the agent works: a new unit and a decision on this one.
    let other = env
        .iced_json(&["new", "remember the last page"])
        .ok()
        .json();
    let other = str_of(&other, "id").to_owned();
    env.iced_json(&[
        "decision",
        &id,
        "--decision",
        "keep the timeout in one place",
        "--why",
        "the person said so",
    ])
    .ok();
    env.commit_all("a new unit and a decision, during the run");

    // The agent appends to the same decision log on the lane.
    let log = format!("intent/{id}/decisions.md");
    let lane_log = std::fs::read_to_string(worktree.join(&log)).unwrap();
    crate::loop_e2e::agent_commit(
        &worktree,
        &log,
        &format!("{lane_log}\n- Decision: refresh on every request (the agent)\n"),
    );
    crate::loop_e2e::agent_commit(&worktree, "src/session.rs", "refreshed\n");
    std::fs::write(str_of(&agent, "receipt_path"), crate::loop_e2e::GOOD_REPORT).unwrap();
    crate::loop_e2e::hand_in(&env, str_of(&agent, "receipt_path")).ok();
    let done = crate::loop_e2e::step_until(&env, |s| {
        matches!(s["action"].as_str(), Some("delivered" | "blocked"))
    });
    assert_eq!(done["action"], "delivered", "{done:#}");

    let metrics = env.git_out(&["show", "main:.iced/metrics.jsonl"]);
    assert!(!metrics.contains("<<<<<<<"), "{metrics}");
    let events: Vec<Value> = metrics
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(
        events
            .iter()
            .any(|e| e["id"] == other.as_str() && e["event"] == "created"),
        "{metrics}"
    );
    assert!(
        events
            .iter()
            .any(|e| e["id"] == id.as_str() && e["event"] == "verify" && e["result"] == "pass"),
        "{metrics}"
    );
    let decisions = env.git_out(&["show", &format!("main:{log}")]);
    assert!(
        decisions.contains("keep the timeout in one place"),
        "{decisions}"
    );
    assert!(
        decisions.contains("refresh on every request (the agent)"),
        "{decisions}"
    );
    assert!(!decisions.contains("<<<<<<<"), "{decisions}");
    assert_eq!(env.read("src/session.rs"), "refreshed\n");
}
