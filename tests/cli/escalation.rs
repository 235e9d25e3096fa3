//! An implementer that stops for a person (SPEC 20.7): an escalation with a contract proposal
//! applied and the lane resumed to delivery with the new hash; questions answered and the lane
//! resumed; an escalation rejected with guidance; the refusals of each verb. The kills are in the
//! crash suite (`crash/escalation.rs`).

use crate::env::TestEnv;
use crate::loop_e2e::{build, lane_branch, own_checks, run_show, str_of, with_agent};
use crate::snap::{assert_read, assert_refused};
use serde_json::Value;

/// The fake agent's proposal file (outside the repository) and the script that escalates in
/// attempt 1 with it, then does the work of the new contract in attempt 2.
pub(crate) fn escalating(proposal: &str) -> (TestEnv, String) {
    escalating_with(proposal, own_checks(serde_json::json!(["true"])))
}

/// As [`escalating`], with `patch` as the config's patch (it must keep the loop's own checks).
pub(crate) fn escalating_with(proposal: &str, patch: Value) -> (TestEnv, String) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.keep().join("proposal.md");
    std::fs::write(&path, proposal).unwrap();
    with_agent(
        &format!(
            "attempt 1\nescalate change-expectation {} E2 contradicts C1: an idle session cannot end at 30 minutes without a password check\nattempt 2\ncommit src/session.rs fixed\nreport-ok E1 E2 E3\n",
            path.display()
        ),
        patch,
    )
}

pub(crate) const PROPOSAL: &str = "<!-- the agent's reasoning -->\n- [E2] An idle session ends after 45 minutes. {verify: test | tests/session.rs}\n- [E3] The idle timeout is read from the config. {verify: test | tests/config.rs}\n";

pub(crate) fn starts_of(env: &TestEnv, attempt: u32) -> usize {
    env.agent_starts()
        .iter()
        .filter(|l| l.contains(&format!(" attempt={attempt} ")) && l.contains("role=implementer"))
        .count()
}

pub(crate) fn file_at(env: &TestEnv, rev: &str, path: &str) -> String {
    env.git_out(&["show", &format!("{rev}:{path}")])
}

/// `decisions.md` entries that start with this decision.
pub(crate) fn decisions(env: &TestEnv, id: &str, decision: &str) -> usize {
    env.read(&format!("intent/{id}/decisions.md"))
        .matches(&format!("- Decision: {decision}"))
        .count()
}

#[test]
fn an_applied_proposal_resumes_the_lane_to_delivery_with_the_new_hash() {
    let (env, id) = escalating(PROPOSAL);
    let old_hash = env.iced_json(&["status", &id]).json()["contract_hash"].clone();
    let (out, last) = build(&env, &id, &[], 4);
    assert_eq!(last["status"], "blocked", "{last}");
    // What the build says next names the person's verbs, not a resume.
    assert!(
        out.stdout.contains(&format!("`iced escalation show {id}`")),
        "{out:#?}"
    );
    let run = str_of(&last, "run").to_owned();
    let shown = run_show(&env, &run);
    let lane = &shown["lanes"][0];
    assert_eq!(lane["stage"], "blocked");
    assert!(
        lane["reason"]
            .as_str()
            .unwrap()
            .starts_with("escalation (change-expectation): E2 contradicts C1"),
        "{lane:#}"
    );
    let text = env.iced(&["run", "show", &run]).ok();
    assert!(
        text.stdout.contains(&format!(
            "next: Its implementer waits for a person: `iced escalation show {id}`"
        )),
        "{text:#?}"
    );
    // The unit reads as blocked while its run waits for the person.
    assert_eq!(env.iced_json(&["status", &id]).json()["status"], "blocked");

    assert_read!(
        &env,
        "show_proposal",
        crate::snap::both(&env, &["escalation", "show", &id])
    );
    assert_refused!(&env, "escalation-open", 3, &["build", &id]);
    assert_refused!(&env, "escalation-kind", 3, &["answer", &id, "Q2", "yes"]);
    // A person's edit that names a question is refused, writing nothing.
    let bad = env.outside("bad-lines.md");
    std::fs::write(&bad, "- [Q1] How long is idle? -> A: forever\n").unwrap();
    let before = env.snapshot();
    assert_refused!(
        &env,
        "proposal-invalid",
        3,
        &["escalation", "edit", &id, "--file", bad.to_str().unwrap()]
    );
    assert_eq!(env.snapshot(), before, "a refusal wrote nothing");

    // Off a terminal, `edit` takes the lines from a file only (SPEC 20.7): no editor is started.
    env.iced_json(&["escalation", "edit", &id])
        .refused(2, "usage");
    let applied = env.iced_json(&["escalation", "apply", &id]).ok().json();
    let new_hash = applied["contract_hash"].as_str().unwrap().to_owned();
    assert_ne!(Value::from(new_hash.clone()), old_hash);
    let unit = env.iced_json(&["status", &id]).json();
    assert_eq!(unit["contract_hash"], new_hash.as_str());
    let unit_text = env.read(&format!("intent/{id}/iced.md"));
    assert!(
        unit_text.contains("- [E3] The idle timeout is read from the config."),
        "{unit_text}"
    );
    assert!(
        !unit_text.contains("the agent's reasoning"),
        "proposal comments are dropped"
    );
    assert_eq!(
        decisions(&env, &id, "applied the change-expectation escalation"),
        1
    );
    assert_refused!(&env, "escalation-none", 3, &["escalation", "apply", &id]);

    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    assert_eq!((starts_of(&env, 1), starts_of(&env, 2)), (1, 1));
    // Attempt 2's brief has the new contract and says what the person decided.
    let brief =
        std::fs::read_to_string(env.path(&format!(".iced/run/{run}/{id}/brief-2.md"))).unwrap();
    assert!(brief.contains(&new_hash), "the brief names the new hash");
    assert!(
        brief.contains("the person applied your change-expectation escalation"),
        "{brief}"
    );
    // The close that lands carries the applied contract and its hash, and the escalation metric.
    let closed = file_at(&env, &lane_branch(&id), &format!("intent/{id}/iced.md"));
    assert!(
        closed.contains(&format!("contract_hash: {new_hash}")),
        "{closed}"
    );
    assert!(closed.contains("- [E3] The idle timeout is read from the config."));
    assert!(closed.contains("status: "));
    let metrics = file_at(&env, &lane_branch(&id), ".iced/metrics.jsonl");
    assert!(
        metrics
            .lines()
            .any(|l| l.contains(r#""event":"escalation""#)
                && l.contains(r#""kind":"change-expectation""#)),
        "{metrics}"
    );
    let evidence = file_at(&env, &lane_branch(&id), &format!("intent/{id}/evidence.md"));
    assert!(evidence.contains("E3"), "{evidence}");
}

#[test]
fn answered_questions_resume_the_lane() {
    let (env, id) = with_agent(
        "attempt 1\nask Which store keeps the sessions? | Is 30 minutes \u{1b}[31mfinal\u{1b}[0m?\nattempt 2\ncommit src/session.rs fixed\nreport-ok E1 E2\n",
        own_checks(serde_json::json!(["true"])),
    );
    let approved_hash = env.iced_json(&["status", &id]).json()["contract_hash"].clone();
    let (_, last) = build(&env, &id, &[], 4);
    assert_eq!(last["status"], "blocked", "{last}");
    let run = str_of(&last, "run").to_owned();
    // The unit holds Q1: the agent's questions are Q2 and Q3. Their escape sequences are data.
    assert_read!(
        &env,
        "show_questions",
        crate::snap::both(&env, &["escalation", "show", &id])
    );
    assert_refused!(&env, "question-unknown", 3, &["answer", &id, "Q9", "no"]);
    assert_read!(
        &env,
        "refused_escalation-kind_apply",
        crate::snap::refused(&env, &["escalation", "apply", &id], 3, "escalation-kind")
    );

    let first = env
        .iced_json(&["answer", &id, "q2", "the", "sqlite", "store"])
        .ok()
        .json();
    assert_eq!(first["status"], "open");
    assert_read!(
        &env,
        "refused_escalation-open_resume",
        crate::snap::refused(&env, &["run", "resume", &run], 3, "escalation-open")
    );
    let last_answer = env.iced_json(&["answer", &id, "Q3", "yes"]).ok().json();
    assert_eq!(last_answer["status"], "answered");
    let unit = env.iced_json(&["status", &id]).json();
    assert_eq!(
        unit["contract_hash"], approved_hash,
        "answers are outside the contract"
    );
    let text = env.read(&format!("intent/{id}/iced.md"));
    assert!(
        text.contains("- [Q2] Which store keeps the sessions? -> A: the sqlite store"),
        "{text}"
    );

    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    assert_eq!((starts_of(&env, 1), starts_of(&env, 2)), (1, 1));
    let brief =
        std::fs::read_to_string(env.path(&format!(".iced/run/{run}/{id}/brief-2.md"))).unwrap();
    assert!(
        brief.contains("Q2 Which store keeps the sessions? -> A: the sqlite store"),
        "{brief}"
    );
    let metrics = file_at(&env, &lane_branch(&id), ".iced/metrics.jsonl");
    assert!(
        metrics
            .lines()
            .any(|l| l.contains(r#""event":"questions""#) && l.contains(r#""count":2"#)),
        "{metrics}"
    );
}

#[test]
fn a_rejected_escalation_resumes_the_lane_with_the_guidance() {
    let (env, id) = with_agent(
        "attempt 1\nescalate stuck - cannot find where sessions \u{1b}[2Jexpire\nattempt 2\ncommit src/session.rs fixed\nreport-ok E1 E2\n",
        own_checks(serde_json::json!(["true"])),
    );
    let before = env.read(&format!("intent/{id}/iced.md"));
    let (_, last) = build(&env, &id, &[], 4);
    let run = str_of(&last, "run").to_owned();
    assert_refused!(&env, "proposal-none", 3, &["escalation", "apply", &id]);
    let rejected = env
        .iced_json(&["escalation", "reject", &id, "look", "in", "src/session.rs"])
        .ok()
        .json();
    assert_eq!(rejected["status"], "rejected");
    assert_read!(
        &env,
        "show_rejected",
        crate::snap::both(&env, &["escalation", "show", &id])
    );
    assert_eq!(
        env.read(&format!("intent/{id}/iced.md")),
        before,
        "the unit is as it was"
    );
    assert_eq!(decisions(&env, &id, "rejected the stuck escalation"), 1);
    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    let brief =
        std::fs::read_to_string(env.path(&format!(".iced/run/{run}/{id}/brief-2.md"))).unwrap();
    assert!(
        brief.contains("the person rejected your stuck escalation: look in src/session.rs"),
        "{brief}"
    );
}

/// Under the host driver the escalation comes with `implement receipt`, and `implement step` names
/// the person's verbs. Once the person answered and the lane resumed, the report of the attempt
/// that escalated is stale: handed in again it is refused (`receipt-superseded`), and no escalation
/// opens again (an agent cannot stop the lane twice with one report).
#[test]
fn a_host_agents_escalation_blocks_and_its_stale_report_is_refused() {
    use crate::loop_e2e::{hand_in, host_run, step, step_until};
    let (env, id) = TestEnv::buildable(own_checks(serde_json::json!(["true"])));
    let (run, agent) = host_run(&env, &id);
    let report = str_of(&agent, "receipt_path").to_owned();
    std::fs::write(
        &report,
        r#"{"summary": "asking", "evidence": [], "questions": [{"text": "Which store?", "options": ["sqlite", "postgres"]}]}"#,
    )
    .unwrap();
    hand_in(&env, &report).ok();
    let blocked = step_until(&env, |s| s["action"] == "blocked");
    assert!(
        str_of(&blocked, "next").contains(&format!("`iced answer {id} <Q id> <text>`")),
        "{blocked:#}"
    );
    env.iced_json(&["answer", &id, "Q2", "sqlite"]).ok();
    env.iced_json(&["run", "resume", &run]).ok();
    let again = step(&env);
    assert_eq!(again["attempt"], 2, "{again:#}");
    let refused = hand_in(&env, &report);
    refused.refused(3, "receipt-superseded");
    let shown = env.iced_json(&["escalation", "show", &id]).ok().json();
    assert_eq!(shown["status"], "answered", "{shown:#}");
    assert_eq!(shown["attempt"], 1);
    env.iced_json(&["escalation", "apply", &id])
        .refused(3, "escalation-none");
}

/// The config of a run that lands by merging into `main`, the person's checkout.
pub(crate) fn landing_by_merge() -> Value {
    let mut patch = own_checks(serde_json::json!(["true"]));
    patch["land"] = serde_json::json!({"mode": "merge", "strategy": "ff"});
    patch
}

/// SPEC 23.2: `apply` leaves the new contract uncommitted in the person's checkout; with
/// `land.mode: merge` the landing takes that file as the loop's own (restored, then fast-forwarded
/// with the same text closed), so the run lands without a commit by hand and `main`'s unit carries
/// the applied hash.
#[test]
fn an_applied_contract_lands_by_merge_without_a_commit_by_hand() {
    let (env, id) = escalating_with(PROPOSAL, landing_by_merge());
    let unit = format!("intent/{id}/iced.md");
    let (_, last) = build(&env, &id, &[], 4);
    assert_eq!(last["status"], "blocked", "{last}");
    let applied = env.iced_json(&["escalation", "apply", &id]).ok().json();
    let new_hash = str_of(&applied, "contract_hash").to_owned();
    assert!(
        env.git_out(&["status", "--porcelain", "--", &unit])
            .starts_with(" M"),
        "the verb leaves the unit uncommitted"
    );

    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    let landed = file_at(&env, "main", &unit);
    assert!(
        landed.contains(&format!("contract_hash: {new_hash}")),
        "{landed}"
    );
    assert!(landed.contains("- [E3] The idle timeout is read from the config."));
    assert_eq!(env.read(&unit), landed, "the checkout has the landed unit");
    // The person's decision lands with it, once, and the checkout is left clean.
    let log = format!("intent/{id}/decisions.md");
    let logged = file_at(&env, "main", &log);
    let decision = "- Decision: applied the change-expectation escalation of run";
    assert_eq!(logged.matches(decision).count(), 1, "{logged}");
    assert_eq!(env.read(&log), logged);
    assert_eq!(env.git_out(&["status", "--porcelain"]), "");
}

/// The implementer's own line in the decision log and the person's entry both land: the close
/// appends the person's entry to the lane's log, and the checkout's copy (the verb's, uncommitted)
/// is taken as the loop's own, so the landing does not stop at it.
#[test]
fn a_persons_decision_and_the_implementers_both_land() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.keep().join("proposal.md");
    std::fs::write(&path, PROPOSAL).unwrap();
    let (env, id) = crate::loop_e2e::with_agent(
        &format!(
            "attempt 1\nescalate change-expectation {} E2 contradicts C1\nexit 0\nattempt 2\nappend intent/{{lane}}/decisions.md - Decision: the timeout is read once at start\ncommit src/session.rs fixed\nreport-ok E1 E2\n",
            path.display()
        ),
        landing_by_merge(),
    );
    let (_, last) = build(&env, &id, &[], 4);
    assert_eq!(last["status"], "blocked", "{last}");
    env.iced_json(&["escalation", "reject", &id, "keep", "E2", "as", "it", "is"])
        .ok();
    let log = format!("intent/{id}/decisions.md");
    assert!(env
        .git_out(&["status", "--porcelain", "--", &log])
        .starts_with(" M"));
    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    let logged = file_at(&env, "main", &log);
    assert!(
        logged.contains("- Decision: rejected the change-expectation escalation of run"),
        "{logged}"
    );
    assert!(logged.contains("- Why: keep E2 as it is"), "{logged}");
    assert!(
        logged.contains("the timeout is read once at start"),
        "{logged}"
    );
    assert_eq!(env.git_out(&["status", "--porcelain"]), "");
}

/// SPEC 23.2: an edit of the person's own to that unit file after `apply` is not the loop's: the
/// landing refuses as for any uncommitted change, naming the file, and the edit is kept.
#[test]
fn a_persons_own_edit_to_the_applied_unit_still_blocks_the_landing() {
    let (env, id) = escalating_with(PROPOSAL, landing_by_merge());
    let unit = format!("intent/{id}/iced.md");
    build(&env, &id, &[], 4);
    env.iced_json(&["escalation", "apply", &id]).ok();
    let edited = format!("{}\nA note of the person's.\n", env.read(&unit));
    env.write(&unit, &edited);
    let base = env.git_out(&["rev-parse", "main"]);

    let (out, last) = build(&env, &id, &[], 4);
    assert_eq!(last["status"], "blocked", "{out:#?}");
    let shown = run_show(&env, str_of(&last, "run"));
    let reason = str_of(&shown["lanes"][0], "reason");
    assert!(
        reason.contains("could not be fast-forwarded") && reason.contains(&unit),
        "{reason}"
    );
    assert_eq!(env.read(&unit), edited, "the person's edit is kept");
    assert_eq!(
        env.git_out(&["rev-parse", "main"]),
        base,
        "main did not move"
    );
}

/// In a project run one child's open escalation holds only its own lane (SPEC 20.7): a resume
/// gives the other blocked child its fresh attempt and leaves the escalated one blocked, its
/// agent not started again; once the person has answered, the next resume takes it up too and
/// the project lands both. A resume with only the escalation left to resume is refused.
#[test]
fn a_childs_open_escalation_holds_only_its_own_lane() {
    use crate::project::Project;
    // Both lanes start before either stops: a lane that blocks first holds back any sibling not yet
    // started (SPEC 23.6).
    let script = "lane 002-idle-sessions-end\nattempt 1\nawait-start 003-active-sessions-stay\nescalate conflict - the contract contradicts itself\nexit 0\nattempt *\nlane 003-active-sessions-stay\nattempt 1\nexit 3\nattempt *\nlane *\ncommit src/{lane}.txt the work of {lane}\nreport-ok E1 E2\n";
    let p = Project::new(
        &["idle sessions end", "active sessions stay"],
        &[],
        script,
        serde_json::json!({"pace": {"lanes": 2}, "verify": {"maxAttempts": 1}}),
    );
    let (a, b) = (&p.children[0], &p.children[1]);
    let (out, last) = build(&p.env, &p.id, &[], 4);
    assert_eq!(last["status"], "blocked", "{out:#?}");
    let run = str_of(&last, "run").to_owned();
    let starts = |lane: &str| {
        p.env
            .agent_starts()
            .iter()
            .filter(|l| l.contains(&format!(" lane={lane} ")))
            .count()
    };
    assert_eq!((starts(a), starts(b)), (1, 1));

    let resumed = p.env.iced_json(&["run", "resume", &run]).ok().json();
    let stage = |id: &str| {
        resumed["lanes"]
            .as_array()
            .and_then(|l| l.iter().find(|l| l["id"] == *id))
            .map(|l| l["stage"].clone())
    };
    assert_eq!(stage(a), Some("blocked".into()), "{resumed:#}");
    assert_ne!(stage(b), Some("blocked".into()), "{resumed:#}");
    let (out, last) = build(&p.env, &p.id, &[], 4);
    assert_eq!(last["status"], "blocked", "{out:#?}");
    assert_eq!((starts(a), starts(b)), (1, 2), "only {b} started again");
    assert!(!p.landed(b), "{b} waits to land while {a} holds the run");
    p.env
        .iced_json(&["run", "resume", &run])
        .refused(3, "escalation-open");

    p.env
        .iced_json(&[
            "escalation",
            "reject",
            a,
            "it does not: build it as written",
        ])
        .ok();
    p.env.iced_json(&["run", "resume", &run]).ok();
    let (out, last) = build(&p.env, &p.id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    assert_eq!((starts(a), starts(b)), (2, 2));
    assert!(p.landed(a) && p.landed(b));
}
