//! `decide` row by row: the pace of agents, by driver (SPEC 20.9, 20.10, 24.8), for a lane that
//! would start an agent and for one whose agent the host already has; where a lane goes after its
//! receipt, its verdict and its refutation (SPEC 20.4, 22.4); the run's status from its lanes
//! (SPEC 23.6); a step some call has in hand is waited for, never done twice. The helpers that
//! build states are shared with the property tests (`decide/props.rs`).

use super::*;
use crate::run::state::{Base, StepRecord};
use serde_json::{json, Value};

pub(super) fn view(driver: Driver) -> DecideView {
    DecideView {
        driver,
        dod_shape: Vec::new(),
        dod_parallel: true,
        max_attempts: 3,
        max_crash_retries: 2,
        independent: true,
        paused: false,
        validators: Default::default(),
        pace_lanes: 2,
        pace_agents: 1,
        agents_alive: 0,
        paced_until: None,
        validator_driver: driver,
        max_mutations: 2,
        land_mode: crate::run::settings::LandMode::None,
        arm_auto: false,
        refute: true,
        budget: None,
        plan_rounds: 2,
        test_writer: false,
        remote_validators: false,
        renew_claims: false,
    }
}

pub(super) fn record(step: &str, outcome: Value) -> StepRecord {
    StepRecord {
        step: step.parse().expect("a step key"),
        attempt: 1,
        status: StepStatus::Started,
        started_at: "2026-09-30T11:00:00Z".into(),
        ended_at: None,
        inputs: None,
        nonce: Some(format!("nonce-{step}")),
        pid: None,
        pid_start: None,
        outcome: Some(outcome),
    }
}

pub(super) fn lane(id: &str, stage: Stage, steps: Vec<StepRecord>) -> Lane {
    Lane {
        id: id.into(),
        unit: id.into(),
        stage,
        attempt: 1,
        crashes: 0,
        worktree: Some(format!("/w/{id}")),
        branch: Some(format!("iced/{id}/{id}")),
        reason: None,
        steps,
        findings: Vec::new(),
        mutations: 0,
        validators: Vec::new(),
        land_round: 0,
        depends: Vec::new(),
        released: false,
        attempts_before: 0,
        arm_requested: false,
        review: None,
        metrics: Vec::new(),
        rejected: None,
        escalation: None,
        unit_text: None,
        ended: None,
    }
}

pub(super) fn run(driver: Driver, lanes: Vec<Lane>) -> Run {
    Run {
        id: "run-1".into(),
        unit: "u".into(),
        status: RunStatus::Running,
        driver,
        session: None,
        created_at: "2026-09-30T11:00:00Z".into(),
        updated_at: "2026-09-30T11:00:00Z".into(),
        base: Base {
            commit: "0".repeat(40),
            branch: Some("main".into()),
        },
        next_eligible_at: None,
        overrun: None,
        brief_layout: 1,
        picked: None,
        rules: None,
        paced: 0,
        pace: None,
        window_from: None,
        spares: Vec::new(),
        claims: None,
        lanes: lanes.into(),
    }
}

/// The lane waits for the pace a person or a rate limit set, until [`PACED`].
fn paced(next: &Next) -> bool {
    matches!(next, Next::Wait { why: Waiting::Paced { until }, .. } if until == PACED)
}

/// The lane waits for the agent ceiling (`pace.agents`).
fn at_ceiling(next: &Next) -> bool {
    matches!(
        next,
        Next::Wait {
            why: Waiting::Ceiling { .. },
            ..
        }
    )
}

const PACED: &str = "2026-10-01T09:00:00Z";

#[test]
fn the_host_gets_a_new_implementer_only_when_the_pace_allows() {
    let r = run(Driver::Host, vec![lane("a", Stage::Implement, vec![])]);
    let mut v = view(Driver::Host);
    assert_eq!(decide(&r, &v), Next::HandToHost { lane: "a".into() });
    v.paced_until = Some(PACED.into());
    let next = decide(&r, &v);
    assert!(paced(&next), "{next:?}");
    v.paced_until = None;
    v.agents_alive = 1;
    let next = decide(&r, &v);
    assert!(at_ceiling(&next), "{next:?}");
    v.paused = true;
    assert_eq!(decide(&r, &v), Next::Paused);
}

#[test]
fn an_implementer_the_host_has_is_answered_again_whatever_the_pace() {
    let handed = record("implement", json!({"handed": true}));
    let r = run(
        Driver::Host,
        vec![lane("a", Stage::Implement, vec![handed])],
    );
    let mut v = view(Driver::Host);
    v.paced_until = Some(PACED.into());
    v.agents_alive = 5;
    assert_eq!(decide(&r, &v), Next::HandToHost { lane: "a".into() });
}

#[test]
fn the_process_driver_keeps_the_same_pace() {
    let r = run(Driver::Process, vec![lane("a", Stage::Implement, vec![])]);
    let mut v = view(Driver::Process);
    assert_eq!(decide(&r, &v), Next::LaunchImplementer { lane: "a".into() });
    v.agents_alive = 1;
    assert!(at_ceiling(&decide(&r, &v)));
}

/// Two lanes of a host-driven project at `pace.agents: 1`: the second, which would need a new
/// agent, waits; the first's agent, already handed, is what the host is told again.
#[test]
fn a_lane_waiting_on_the_ceiling_lets_the_handed_one_be_asked_again() {
    let handed = record("implement", json!({"handed": true}));
    let r = run(
        Driver::Host,
        vec![
            lane("a", Stage::Implement, vec![handed]),
            lane("b", Stage::Implement, vec![]),
        ],
    );
    let mut v = view(Driver::Host);
    v.agents_alive = 1;
    assert_eq!(decide(&r, &v), Next::HandToHost { lane: "a".into() });
    // The second lane alone (the first delivered): it waits, naming the ceiling.
    let mut r = r;
    r.lanes[0].stage = Stage::Delivered;
    assert!(at_ceiling(&decide(&r, &v)));
}

#[test]
fn host_validators_are_handed_out_within_the_pace() {
    let prepared = json!({"prepared": true});
    let handed = json!({"prepared": true, "handed": true});
    let validating = |outcomes: [&Value; 2]| {
        let steps = vec![
            record("validate-expectations", outcomes[0].clone()),
            record("validate-failures", outcomes[1].clone()),
        ];
        run(Driver::Host, vec![lane("a", Stage::Validate, steps)])
    };
    let mut v = view(Driver::Host);
    v.pace_agents = 2;
    v.validators
        .insert("a".into(), vec!["expectations".into(), "failures".into()]);
    let hand = |key: &str| Next::HandValidator {
        lane: "a".into(),
        key: key.parse().expect("a step key"),
    };

    // Room: the first not yet handed out.
    let r = validating([&handed, &prepared]);
    v.agents_alive = 1;
    assert_eq!(decide(&r, &v), hand("validate-failures"));
    // At the ceiling: the one handed already is answered again, no new one.
    v.agents_alive = 2;
    assert_eq!(decide(&r, &v), hand("validate-expectations"));
    // Paced, none handed yet: wait, naming the time.
    v.agents_alive = 0;
    v.paced_until = Some(PACED.into());
    let next = decide(&validating([&prepared, &prepared]), &v);
    assert!(paced(&next), "{next:?}");
    // At the ceiling with none handed (the agents are another run's): wait, naming it.
    v.paced_until = None;
    v.agents_alive = 2;
    let next = decide(&validating([&prepared, &prepared]), &v);
    assert!(at_ceiling(&next), "{next:?}");
}

// ---- Where a lane goes after its receipt (SPEC 20.4) ----

pub(super) fn finding(lane: &str, n: usize, round: u32, severity: &str, status: &str) -> Finding {
    Finding {
        id: format!("{lane}-F{n}"),
        by: "full".into(),
        round,
        evidence: crate::run::validate::Evidence {
            file_path: "src/lib.rs".into(),
            criterion_ref: "E1".into(),
            finding_category: "correctness".into(),
            severity: severity.into(),
            summary: format!("finding {n}"),
            failure_scenario: crate::run::validate::Scenario {
                inputs: "x".into(),
                expected: "y".into(),
                actual: "z".into(),
            },
        },
        status: status.into(),
        refutation: None,
        disposition: None,
        head: None,
    }
}

use crate::run::validate::Finding;

/// A row of a table below: what the row says first, the move last.
type ReceiptRow<'a> = (
    &'a str,
    u32,
    bool,
    bool,
    Option<&'a str>,
    &'a [String],
    LaneMove,
);
type VerdictRow<'a> = (&'a str, u32, bool, Vec<Finding>, &'a [String], LaneMove);
type RefuteRow<'a> = (&'a str, u32, Vec<Finding>, &'a [String], LaneMove);
type LandingRow<'a> = (&'a str, &'a str, Stage, u32, Vec<StepRecord>, Next);

fn at_attempt(attempt: u32) -> Lane {
    let mut l = lane("a", Stage::Receipt, vec![]);
    l.attempt = attempt;
    l
}

#[test]
fn after_the_receipt_each_row_of_spec_20_4() {
    let gaps = vec![
        "no commit on `iced/a/a` ahead of the base".to_owned(),
        "`make test` exited 2, expected [0]".to_owned(),
    ];
    let listed =
        "- no commit on `iced/a/a` ahead of the base\n- `make test` exited 2, expected [0]";
    let none: &[String] = &[];
    let handback = |r: &str| LaneMove::Handback { reason: r.into() };
    // (what the row says, attempt, independent, verified, handback, missing, the move)
    #[rustfmt::skip]
    let rows: Vec<ReceiptRow> = vec![
        ("handed back", 1, true, false, Some("the unit contradicts itself"), none, handback("the unit contradicts itself")),
        ("handed back with gaps, attempts spent: a handback all the same", 3, true, false, Some("no"), &gaps, handback("no")),
        ("verified, independent validators: they judge it", 1, true, true, None, none, LaneMove::To(Stage::Validate)),
        ("verified on the last attempt: validated all the same", 3, true, true, None, none, LaneMove::To(Stage::Validate)),
        ("verified, no independent validators: delivered", 1, false, true, None, none, LaneMove::To(Stage::Deliver)),
        ("gaps, attempts left: a new attempt whose brief lists them", 2, true, false, None, &gaps, LaneMove::Retry { reason: listed.into() }),
        ("gaps, attempts left, no validators: the same", 1, false, false, None, &gaps, LaneMove::Retry { reason: listed.into() }),
        ("gaps, attempts spent: blocked, naming them", 3, true, false, None, &gaps, LaneMove::Spent { reason: format!("attempt 3 of 3 did not verify:\n{listed}") }),
        ("gaps past a max lowered under the run: blocked, never `4 of 3`", 4, true, false, None, &gaps, LaneMove::Spent { reason: format!("attempt 4 (verify.maxAttempts is 3) did not verify:\n{listed}") }),
    ];
    for (why, attempt, independent, verified, handback, missing, expected) in rows {
        let mut v = view(Driver::Process);
        v.independent = independent;
        let found = ReceiptFound {
            tests_refused: None,
            replaced: None,
            escalation: None,
            verified,
            handback,
            missing,
        };
        assert_eq!(
            after_receipt(&at_attempt(attempt), &v, &found),
            expected,
            "{why}"
        );
    }
}

/// A resume gives a blocked lane a fresh budget: `verify.maxAttempts` more attempts, counted from
/// the one the resume starts, and the reason counts them so.
#[test]
fn after_a_resume_the_attempts_count_from_the_resumed_one() {
    let gaps = vec!["`make test` exited 2, expected [0]".to_owned()];
    let listed = "- `make test` exited 2, expected [0]";
    let found = ReceiptFound {
        tests_refused: None,
        replaced: None,
        escalation: None,
        verified: false,
        handback: None,
        missing: &gaps,
    };
    let v = view(Driver::Process);
    let resumed = |attempt: u32| {
        let mut l = at_attempt(attempt);
        l.attempts_before = 3;
        l
    };
    // (what the row says, attempt, the move)
    #[rustfmt::skip]
    let rows = [
        ("the first after the resume: another", 4, LaneMove::Retry { reason: listed.into() }),
        ("the second: another", 5, LaneMove::Retry { reason: listed.into() }),
        ("the third: blocked, counted from the resume", 6, LaneMove::Spent { reason: format!("attempt 6 (3 of 3 since the resume) did not verify:\n{listed}") }),
        ("past the budget: blocked, never `4 of 3`", 7, LaneMove::Spent { reason: format!("attempt 7 (4 since the resume; verify.maxAttempts is 3) did not verify:\n{listed}") }),
    ];
    for (why, attempt, expected) in rows {
        assert_eq!(
            after_receipt(&resumed(attempt), &v, &found),
            expected,
            "{why}"
        );
    }
}

// ---- Where a lane goes after its verdict and its refutation (SPEC 22.4) ----

fn judged(attempt: u32, findings: Vec<Finding>) -> Lane {
    let mut l = lane("a", Stage::Validate, vec![]);
    l.attempt = attempt;
    l.findings = findings;
    l
}

const FIX: &str =
    "fix round: dispose of every finding below (apply it with a commit, or reject it in writing)";

#[test]
fn after_the_verdict_each_row_of_spec_22_4() {
    let fresh_open = |attempt| finding("a", 1, attempt, "S2-major", "open");
    let f1 = "- a-F1 (S2-major): finding 1";
    let undecided = vec!["E2".to_owned(), "E3".to_owned()];
    let none: &[String] = &[];
    let retry = |listed: &str| LaneMove::Retry {
        reason: format!("{FIX}\n{listed}"),
    };
    // (what the row says, attempt, refute, findings, undecided, the move)
    #[rustfmt::skip]
    let rows: Vec<VerdictRow> = vec![
        ("fresh open finding, refute on: the refuter first", 2, true, vec![fresh_open(2)], none, LaneMove::To(Stage::Refute)),
        ("fresh open finding, refute on, attempts spent: the refuter first all the same", 3, true, vec![fresh_open(3)], none, LaneMove::To(Stage::Refute)),
        ("fresh open finding, refute on, undecided too: the refuter first", 1, true, vec![fresh_open(1)], &undecided, LaneMove::To(Stage::Refute)),
        ("fresh open finding, refute off, attempts left: a fix round", 2, false, vec![fresh_open(2)], none, retry(f1)),
        ("fresh open finding, refute off, attempts spent: blocked", 3, false, vec![fresh_open(3)], none, LaneMove::Spent { reason: format!("open findings after 3 attempts:\n{f1}") }),
        ("open finding and an undecided expectation: the finding first", 1, false, vec![fresh_open(1)], &undecided, retry(f1)),
        ("an earlier round's open finding goes to no refuter: a fix round", 2, true, vec![finding("a", 1, 1, "S1-stop-the-line", "open")], none, retry("- a-F1 (S1-stop-the-line): finding 1")),
        ("a fresh noted finding (S3) blocks nothing: delivered", 1, true, vec![finding("a", 1, 1, "S3-minor", "noted")], none, LaneMove::To(Stage::Deliver)),
        ("refuted, applied and rejected findings block nothing: delivered", 2, true, vec![finding("a", 1, 2, "S1-stop-the-line", "refuted"), finding("a", 2, 1, "S2-major", "applied"), finding("a", 3, 1, "S2-major", "rejected")], none, LaneMove::To(Stage::Deliver)),
        ("an expectation no validator could decide: a person", 1, true, vec![], &undecided, LaneMove::Block { reason: "needs a person: no validator could judge E2, E3".into() }),
        ("nothing open, everything decided: delivered", 1, false, vec![], none, LaneMove::To(Stage::Deliver)),
    ];
    for (why, attempt, refute, findings, undecided, expected) in rows {
        let mut v = view(Driver::Process);
        v.refute = refute;
        assert_eq!(
            after_judge(&judged(attempt, findings), &v, undecided),
            expected,
            "{why}"
        );
    }
}

#[test]
fn after_the_refuter_each_row_of_spec_22_4() {
    let undecided = vec!["E1".to_owned()];
    let none: &[String] = &[];
    // Several open findings are listed in order; a noted one is not.
    let open_two = vec![
        finding("a", 1, 2, "S1-stop-the-line", "open"),
        finding("a", 2, 2, "S3-minor", "noted"),
        finding("a", 3, 2, "S2-major", "open"),
    ];
    let listed = "- a-F1 (S1-stop-the-line): finding 1\n- a-F3 (S2-major): finding 3";
    // (what the row says, attempt, findings, undecided, the move)
    #[rustfmt::skip]
    let rows: Vec<RefuteRow> = vec![
        ("confirmed findings, attempts left: a fix round listing each (never the refuter again)", 2, open_two.clone(), none, LaneMove::Retry { reason: format!("{FIX}\n{listed}") }),
        ("confirmed findings, attempts spent: blocked, naming them", 3, open_two, none, LaneMove::Spent { reason: format!("open findings after 3 attempts:\n{listed}") }),
        ("every finding refuted: delivered", 2, vec![finding("a", 1, 2, "S1-stop-the-line", "refuted")], none, LaneMove::To(Stage::Deliver)),
        ("every finding refuted, an expectation undecided: a person", 2, vec![finding("a", 1, 2, "S2-major", "refuted")], &undecided, LaneMove::Block { reason: "needs a person: no validator could judge E1".into() }),
    ];
    for (why, attempt, findings, undecided, expected) in rows {
        let mut v = view(Driver::Process);
        v.refute = true;
        assert_eq!(
            resolve(&judged(attempt, findings), &v, undecided),
            expected,
            "{why}"
        );
    }
}

// ---- The run's status from its lanes (SPEC 23.6) ----

fn status_of(lanes: Vec<Lane>, v: &DecideView) -> RunStatus {
    run_status(&run(Driver::Process, lanes), v, &|_, _| vec![0])
}

fn finals(stages: &[Stage]) -> Vec<Lane> {
    stages
        .iter()
        .enumerate()
        .map(|(i, s)| lane(&format!("l{i}"), *s, vec![]))
        .collect()
}

#[test]
fn a_run_whose_every_lane_is_final_ends_by_spec_23_6() {
    use Stage::{Blocked as B, Delivered as D, Discarded as X, Handback as H};
    let rows: &[(&[Stage], RunStatus)] = &[
        (&[D], RunStatus::Delivered),
        (&[B], RunStatus::Blocked),
        (&[H], RunStatus::Handback),
        (&[X], RunStatus::Abandoned),
        (&[D, D], RunStatus::Delivered),
        (&[D, X], RunStatus::Delivered),
        (&[D, B], RunStatus::Blocked),
        (&[D, H], RunStatus::Handback),
        (&[B, B], RunStatus::Blocked),
        (&[B, H], RunStatus::Blocked),
        (&[B, X], RunStatus::Blocked),
        (&[H, H], RunStatus::Handback),
        (&[H, X], RunStatus::Handback),
        (&[X, X], RunStatus::Abandoned),
        (&[D, D, X], RunStatus::Delivered),
        (&[D, B, H], RunStatus::Blocked),
        (&[D, X, B], RunStatus::Blocked),
        (&[X, X, X], RunStatus::Abandoned),
    ];
    let v = view(Driver::Process);
    for (stages, expected) in rows {
        assert_eq!(status_of(finals(stages), &v), *expected, "{stages:?}");
        // The order of the lanes says nothing.
        let reversed: Vec<Stage> = stages.iter().rev().copied().collect();
        assert_eq!(status_of(finals(&reversed), &v), *expected, "{reversed:?}");
        // Nor does a person's release of a lane.
        let mut released = finals(stages);
        released.iter_mut().for_each(|l| l.released = true);
        assert_eq!(status_of(released, &v), *expected, "{stages:?} released");
    }
}

/// A blocked lane a person can resume keeps the run blocked; one that waits, however far back,
/// on a handed-back or discarded lane can never deliver, and the run ends as the others say.
#[test]
fn a_blocked_lane_ends_the_run_only_when_it_can_never_deliver() {
    use Stage::{Blocked as B, Delivered as D, Discarded as X, Handback as H};
    let v = view(Driver::Process);
    #[rustfmt::skip]
    let rows: &[(&str, Vec<Lane>, RunStatus)] = &[
        ("blocked on its own, beside a handback: a person resumes it", vec![lane("a", H, vec![]), lane("b", B, vec![])], RunStatus::Blocked),
        ("blocked on a handed-back dependency", vec![lane("a", H, vec![]), depends(lane("b", B, vec![]), &["a"])], RunStatus::Handback),
        ("blocked on a handed-back dependency two back", vec![lane("a", H, vec![]), depends(lane("b", B, vec![]), &["a"]), depends(lane("c", B, vec![]), &["b"])], RunStatus::Handback),
        ("blocked on a discarded dependency, one delivered", vec![lane("a", X, vec![]), lane("d", D, vec![]), depends(lane("b", B, vec![]), &["a"])], RunStatus::Blocked),
        ("blocked on a dependency that is itself blocked on its own", vec![lane("a", B, vec![]), depends(lane("b", B, vec![]), &["a"]), lane("h", H, vec![])], RunStatus::Blocked),
    ];
    for (why, lanes, expected) in rows {
        assert_eq!(status_of(lanes.clone(), &v), *expected, "{why}");
    }
}

fn delivered_to_land(id: &str) -> Lane {
    let mut l = lane(id, Stage::Land, vec![]);
    l.land_round = 1;
    l
}

fn depends(mut l: Lane, on: &[&str]) -> Lane {
    l.depends = on.iter().map(|d| (*d).to_owned()).collect();
    l
}

#[test]
fn a_run_with_lanes_still_going_is_running_while_one_can_move() {
    let blocked = |id: &str| {
        let mut l = lane(id, Stage::Blocked, vec![]);
        l.reason = Some("attempt 3 of 3 did not verify".into());
        l
    };
    let released = |mut l: Lane| {
        l.released = true;
        l
    };
    let integrated = {
        let mut r = record("integrate-1", json!({"merged": false}));
        r.status = StepStatus::Done;
        r
    };
    let started_implementer = record("implement", json!({}));
    let mut one_lane = view(Driver::Process);
    one_lane.pace_lanes = 1;
    // (what the row says, lanes, pace.lanes 1, the status)
    #[rustfmt::skip]
    let rows: Vec<(&str, Vec<Lane>, bool, RunStatus)> = vec![
        ("a holder: its sibling waits before landing, nothing moves", vec![blocked("a"), delivered_to_land("b")], false, RunStatus::Blocked),
        ("a handed-back holder: the same", vec![{ let mut l = lane("a", Stage::Handback, vec![]); l.reason = Some("no".into()); l }, delivered_to_land("b")], false, RunStatus::Blocked),
        ("a holder: a sibling whose landing began goes on", vec![blocked("a"), { let mut l = delivered_to_land("b"); l.steps.push(integrated.clone()); l }], false, RunStatus::Running),
        ("a holder: an active sibling goes on through validation", vec![blocked("a"), lane("b", Stage::Implement, vec![])], false, RunStatus::Running),
        ("a holder: a lane not started does not start", vec![blocked("a"), lane("b", Stage::Brief, vec![])], false, RunStatus::Blocked),
        ("a released holder holds nothing: its sibling lands", vec![released(blocked("a")), delivered_to_land("b")], false, RunStatus::Running),
        ("a released holder: a lane not started starts", vec![released(blocked("a")), lane("b", Stage::Brief, vec![])], false, RunStatus::Running),
        ("a lane waiting on its dependency while it builds", vec![lane("a", Stage::Implement, vec![]), depends(lane("b", Stage::Brief, vec![]), &["a"])], false, RunStatus::Running),
        ("a lane whose dependency is delivered starts", vec![lane("a", Stage::Delivered, vec![]), depends(lane("b", Stage::Brief, vec![]), &["a"])], false, RunStatus::Running),
        ("a lane whose dependency blocked, unreleased: held, nothing moves", vec![blocked("a"), depends(lane("b", Stage::Brief, vec![]), &["a"])], false, RunStatus::Blocked),
        ("a lane whose dependency was released blocked: blocking it is still a move", vec![released(blocked("a")), depends(lane("b", Stage::Brief, vec![]), &["a"])], false, RunStatus::Running),
        ("a lane whose dependency was discarded: blocking it is still a move", vec![lane("a", Stage::Discarded, vec![]), depends(lane("b", Stage::Brief, vec![]), &["a"])], false, RunStatus::Running),
        ("a lane waiting on a dependency the run does not have, alone", vec![depends(lane("b", Stage::Brief, vec![]), &["x"])], false, RunStatus::Blocked),
        ("a lane waiting for a free lane while the active one works", vec![lane("a", Stage::Implement, vec![started_implementer]), lane("b", Stage::Brief, vec![])], true, RunStatus::Running),
    ];
    for (why, lanes, pace_one, expected) in rows {
        let v = if pace_one {
            one_lane.clone()
        } else {
            view(Driver::Process)
        };
        assert_eq!(status_of(lanes, &v), expected, "{why}");
    }
}

/// The moves behind two of the rows above, named: the stall names the holder, and a lane that
/// can never start is blocked naming its dependency.
#[test]
fn a_stall_names_the_holder_and_a_dead_dependency_blocks_its_dependant() {
    let v = view(Driver::Process);
    let mut a = lane("a", Stage::Blocked, vec![]);
    a.reason = Some("the worktree could not be made".into());
    let r = run(Driver::Process, vec![a, delivered_to_land("b")]);
    assert_eq!(
        lanes_next(&r, &v, &|_, _| vec![0]),
        Next::Stall {
            lane: "a".into(),
            reason: "lane `a` is blocked: the worktree could not be made; the other lanes wait before landing".into()
        }
    );
    let r = run(
        Driver::Process,
        vec![
            lane("a", Stage::Discarded, vec![]),
            depends(lane("b", Stage::Brief, vec![]), &["a"]),
        ],
    );
    assert_eq!(
        lanes_next(&r, &v, &|_, _| vec![0]),
        Next::Block {
            lane: "b".into(),
            reason: "it depends on `a`, which is discarded and will not deliver".into()
        }
    );
    let r = run(
        Driver::Process,
        vec![depends(lane("b", Stage::Brief, vec![]), &["x"])],
    );
    assert_eq!(
        lanes_next(&r, &v, &|_, _| vec![0]),
        Next::Stall {
            lane: "b".into(),
            reason: "lane `b` waits for its dependencies, and no lane can move".into()
        }
    );
}

// ---- A step some call has in hand is waited for (SPEC 21.2) ----

/// A record `started` by a call that is still at it (it names its owner's pid).
pub(super) fn in_hand(step: &str) -> StepRecord {
    let mut r = record(step, Value::Null);
    r.outcome = None;
    r.nonce = None;
    r.pid = Some(4242);
    r
}

#[test]
fn a_synchronous_step_in_hand_is_waited_for_and_redone_once_its_owner_is_gone() {
    let merged_in = |round: u32| {
        let mut r = record(&format!("integrate-{round}"), json!({"merged": false}));
        r.status = StepStatus::Done;
        r
    };
    let done = |step: &str| {
        let mut r = record(step, json!({}));
        r.status = StepStatus::Done;
        r
    };
    // (stage, land mode, records already done, the step in hand, the move that would do it)
    #[rustfmt::skip]
    let rows: Vec<(Stage, &str, Vec<StepRecord>, &str, Next)> = vec![
        (Stage::Worktree, "none", vec![], "worktree", Next::AddWorktree { lane: "a".into() }),
        (Stage::Receipt, "none", vec![], "receipt", Next::CheckReceipt { lane: "a".into() }),
        (Stage::Deliver, "none", vec![], "deliver", Next::Deliver { lane: "a".into() }),
        (Stage::Land, "merge", vec![], "integrate-1", Next::Sync { lane: "a".into(), step: StepKey::Integrate(1) }),
        (Stage::Land, "merge", vec![merged_in(1)], "landcommit-1", Next::Sync { lane: "a".into(), step: StepKey::LandCommit(1) }),
        (Stage::Land, "merge", vec![merged_in(1), done("landcommit-1")], "land-1", Next::Sync { lane: "a".into(), step: StepKey::Land(1) }),
        (Stage::Land, "pr", vec![], "push-branch", Next::Sync { lane: "a".into(), step: StepKey::PushBranch }),
        (Stage::Land, "pr", vec![done("push-branch")], "pr-open", Next::Sync { lane: "a".into(), step: StepKey::PrOpen }),
        (Stage::Land, "pr", vec![done("push-branch"), done("pr-open")], "pr-arm", Next::Sync { lane: "a".into(), step: StepKey::PrArm }),
        (Stage::Retire, "merge", vec![], "retire", Next::Sync { lane: "a".into(), step: StepKey::Retire }),
    ];
    for (stage, mode, mut steps, step, redo) in rows {
        let mut v = view(Driver::Process);
        v.land_mode = mode.into();
        v.arm_auto = true;
        steps.push(in_hand(step));
        let mut l = lane("a", stage, steps);
        l.land_round = 1;
        let mut r = run(Driver::Process, vec![l]);
        let next = decide(&r, &v);
        assert!(
            matches!(&next, Next::Wait { lane, .. } if lane == "a"),
            "{step} in hand: {next:?}"
        );
        // Its owner gone (observing clears the pid): the step is done again.
        let key: StepKey = step.parse().expect("a step key");
        r.lanes[0]
            .steps
            .iter_mut()
            .filter(|s| s.step == key)
            .for_each(|s| s.pid = None);
        assert_eq!(decide(&r, &v), redo, "{step} whose owner is gone");
    }
}

/// A lane with dependencies starts from the target as they left it (step `base`, SPEC 23.6). Its
/// `base` in hand is waited for; left `started` by a call that died, it is taken again; failed, the
/// lane blocks. Never its brief before its base is done: a concurrent call would render the brief
/// while the base is read, and after a crash the worktree would be made off the run's base
/// (`Run::base_of` falls back to it). The simulator holds every walk to it too.
#[test]
fn a_lane_goes_past_its_base_step_only_once_it_is_done() {
    let v = view(Driver::Process);
    let with_base = |base: StepRecord| {
        run(
            Driver::Process,
            vec![
                lane("a", Stage::Delivered, vec![]),
                depends(lane("b", Stage::Brief, vec![base]), &["a"]),
            ],
        )
    };
    let next = decide(&with_base(in_hand("base")), &v);
    assert!(
        matches!(&next, Next::Wait { lane, .. } if lane == "b"),
        "{next:?}"
    );
    let mut orphaned = in_hand("base");
    orphaned.pid = None;
    assert_eq!(
        decide(&with_base(orphaned), &v),
        Next::Sync {
            lane: "b".into(),
            step: StepKey::Base
        }
    );
    let mut failed = record(
        "base",
        json!({"error": "the target `main` could not be read"}),
    );
    failed.status = StepStatus::Failed;
    assert_eq!(
        decide(&with_base(failed), &v),
        Next::Block {
            lane: "b".into(),
            reason: "the target `main` could not be read".into()
        }
    );
}

#[test]
fn a_paused_run_moves_nothing_and_an_ended_or_blocked_one_reports_its_end() {
    let r = run(Driver::Process, vec![lane("a", Stage::Implement, vec![])]);
    let mut v = view(Driver::Process);
    v.paused = true;
    for (status, expected) in [
        (RunStatus::Running, Next::Paused),
        (RunStatus::Paused, Next::Paused),
        (RunStatus::Blocked, Next::Ended),
        (RunStatus::Delivered, Next::Ended),
        (RunStatus::Handback, Next::Ended),
        (RunStatus::Abandoned, Next::Ended),
    ] {
        let mut r = r.clone();
        r.status = status;
        assert_eq!(decide(&r, &v), expected, "{status:?}");
    }
}

/// A lane landing by pull request (`land.arm` not auto) whose `retire` step failed blocks; `iced
/// run resume` puts it back at `land` in a new round (`control::set_paused`), with its branch
/// pushed and its pull request open. It must not wait "the pull request is open" for ever: the
/// lane went to `retire` only as `pr-open`'s own outcome (`stage/land`), which is not run again.
/// Found by the simulator, whose person now resumes such runs too.
#[test]
fn a_resumed_pull_request_lane_does_not_wait_forever() {
    let done = |step: &str, outcome: Value| {
        let mut r = record(step, outcome);
        r.status = StepStatus::Done;
        r
    };
    let mut l = lane(
        "a",
        Stage::Land,
        vec![
            done("deliver", json!({"commit": "c1"})),
            done("push-branch", json!({"commit": "c1"})),
            done("pr-open", json!({"url": "https://forge/pr/1"})),
            done("resume-2", json!({"by": "person"})),
        ],
    );
    l.land_round = 2;
    let mut v = view(Driver::Process);
    v.land_mode = "pr".into();
    v.arm_auto = false;
    let next = decide(&run(Driver::Process, vec![l]), &v);
    assert!(!matches!(next, Next::Wait { .. }), "{next:?}");
}

// ---- Landing, step by step (SPEC 23.2, 23.3) ----

#[test]
fn landing_by_merge_and_by_pull_request_step_by_step() {
    let done = |step: &str, outcome: Value| {
        let mut r = record(step, outcome);
        r.status = StepStatus::Done;
        r
    };
    let failed = |step: &str, outcome: Value| {
        let mut r = record(step, outcome);
        r.status = StepStatus::Failed;
        r
    };
    let merged = |yes: bool| done("integrate-1", json!({"merged": yes}));
    let sync = |step: StepKey| Next::Sync {
        lane: "a".into(),
        step,
    };
    let red = "with the target's changes merged in, the definition of done fails; the lane's branch holds the merge";
    // (what the row says, mode, stage, land round, records, the move)
    #[rustfmt::skip]
    let rows: Vec<LandingRow> = vec![
        ("merge: the target comes in first", "merge", Stage::Land, 1, vec![], sync(StepKey::Integrate(1))),
        ("merge: the target was in already: the landed commit", "merge", Stage::Land, 1, vec![merged(false)], sync(StepKey::LandCommit(1))),
        ("merge: the target merged in: the definition of done again", "merge", Stage::Land, 1, vec![merged(true)], Next::LaunchDod { lane: "a".into(), run: DodRun::Retest(1), slots: vec![(0, 0)] }),
        ("merge: it runs: wait", "merge", Stage::Land, 1, vec![merged(true), record("retest-1-0-0", json!({}))], Next::Wait { lane: "a".into(), why: Waiting::DodRunning }),
        ("merge: it fails with the target in: blocked", "merge", Stage::Land, 1, vec![merged(true), done("retest-1-0-0", json!({"exit_code": 1}))], Next::Block { lane: "a".into(), reason: red.into() }),
        ("merge: it passes: the landed commit", "merge", Stage::Land, 1, vec![merged(true), done("retest-1-0-0", json!({"exit_code": 0}))], sync(StepKey::LandCommit(1))),
        ("merge: the target moves", "merge", Stage::Land, 1, vec![merged(false), done("landcommit-1", json!({})), failed("land-1", json!({"again": true, "new_round": true}))], Next::LandAgain { lane: "a".into() }),
        ("merge: a new round integrates again", "merge", Stage::Land, 2, vec![merged(false), done("landcommit-1", json!({}))], sync(StepKey::Integrate(2))),
        ("merge: not there yet: the same step again", "merge", Stage::Land, 1, vec![failed("integrate-1", json!({"again": true, "new_round": false}))], sync(StepKey::Integrate(1))),
        ("merge: a conflict blocks, naming it", "merge", Stage::Land, 1, vec![failed("integrate-1", json!({"error": "merging `main` conflicts in a.rs"}))], Next::Block { lane: "a".into(), reason: "merging `main` conflicts in a.rs".into() }),
        ("pr: the branch is pushed first", "pr", Stage::Land, 1, vec![], sync(StepKey::PushBranch)),
        ("pr: then the pull request opened", "pr", Stage::Land, 1, vec![done("push-branch", json!({}))], sync(StepKey::PrOpen)),
        ("pr: then armed", "pr", Stage::Land, 1, vec![done("push-branch", json!({})), done("pr-open", json!({}))], sync(StepKey::PrArm)),
        ("retire: once landed", "merge", Stage::Retire, 1, vec![], sync(StepKey::Retire)),
        ("retire: the pull request has not landed yet: again", "pr", Stage::Retire, 1, vec![failed("retire", json!({"again": true, "new_round": false}))], sync(StepKey::Retire)),
    ];
    for (why, mode, stage, round, steps, expected) in rows {
        let mut v = view(Driver::Process);
        v.land_mode = mode.into();
        v.arm_auto = true;
        v.dod_shape = vec![1];
        let mut l = lane("a", stage, steps);
        l.land_round = round;
        assert_eq!(
            decide(&run(Driver::Process, vec![l]), &v),
            expected,
            "{why}"
        );
    }
}

/// An implementer that escalates or asks (SPEC 20.7) stops for a person: blocked with the
/// escalation's kind, whatever the receipt lacked and however many attempts are spent; its gaps are
/// not a failed attempt.
#[test]
fn an_escalation_blocks_the_lane_for_a_person() {
    use crate::run::escalation::{Asked, Escalation, EscalationStatus};
    use crate::run::state::EscalationKind;
    let gaps = vec!["no commit on `iced/a/a` ahead of the base".to_owned()];
    let escalation = |kind: &str, questions: Vec<Asked>| Escalation {
        attempt: 1,
        kind: kind.into(),
        message: "E2 contradicts C1".into(),
        proposal: None,
        questions,
        status: EscalationStatus::Open,
        guidance: None,
        contract_hash: None,
    };
    let asked = |id: &str| Asked {
        id: id.into(),
        text: "which?".into(),
        options: Vec::new(),
        answer: None,
    };
    let v = view(Driver::Process);
    let rows = [
        (
            escalation("conflict", Vec::new()),
            1,
            LaneMove::Escalate {
                kind: EscalationKind::Conflict,
                reason: "escalation (conflict): E2 contradicts C1".into(),
                questions: 0,
            },
        ),
        (
            escalation("questions", vec![asked("Q2"), asked("Q3")]),
            3,
            LaneMove::Escalate {
                kind: EscalationKind::Questions,
                reason: "questions: Q2, Q3".into(),
                questions: 2,
            },
        ),
    ];
    for (e, attempt, expected) in rows {
        let found = ReceiptFound {
            tests_refused: None,
            replaced: None,
            escalation: Some(&e),
            verified: false,
            handback: None,
            missing: &gaps,
        };
        assert_eq!(after_receipt(&at_attempt(attempt), &v, &found), expected);
    }
}

/// A budget whose charge stands at `charged` of `budget`, two agents of unknown cost in it.
fn spend(budget: f64, charged: f64) -> Option<Spend> {
    Some(Spend {
        budget_usd: budget,
        charged_usd: charged,
        unknown: 2,
        unknown_cost_usd: 1.0,
    })
}

/// SPEC 20.12: no new implementer, by either driver, once the charge reaches the budget; the lane
/// is handed back saying the charge, what unknown costs counted and the remedy. An implementer the
/// host has already is answered again.
#[test]
fn no_implementer_starts_once_the_budget_is_charged() {
    for driver in [Driver::Process, Driver::Host] {
        let r = run(driver, vec![lane("a", Stage::Implement, vec![])]);
        let mut v = view(driver);
        v.budget = spend(2.0, 1.5);
        let next = decide(&r, &v);
        assert!(
            matches!(
                next,
                Next::LaunchImplementer { .. } | Next::HandToHost { .. }
            ),
            "{driver:?}: {next:?}"
        );
        v.budget = spend(2.0, 2.0);
        // The budget comes before the pace: waiting would not make it any larger.
        v.paced_until = Some(PACED.into());
        match decide(&r, &v) {
            Next::OverBudget { lane, reason } => {
                assert_eq!(lane, "a");
                assert!(
                    reason.starts_with("the run's budget is spent: $2 charged of $2, 2 agents of unknown cost counted at $1 each"),
                    "{reason}"
                );
                assert!(reason.ends_with("then `iced build a` again"), "{reason}");
            }
            other => panic!("{driver:?}: {other:?}"),
        }
    }
    let handed = record("implement", json!({"handed": true}));
    let r = run(
        Driver::Host,
        vec![lane("a", Stage::Implement, vec![handed])],
    );
    let mut v = view(Driver::Host);
    v.budget = spend(1.0, 3.0);
    assert_eq!(decide(&r, &v), Next::HandToHost { lane: "a".into() });
}

/// SPEC 20.12: no validator is prepared or launched once the charge reaches the budget; one still
/// running is waited for first, so the handback leaves none behind.
#[test]
fn no_validator_starts_once_the_budget_is_charged() {
    let mut v = view(Driver::Process);
    v.validators
        .insert("a".into(), vec!["full".into(), "ruthless".into()]);
    v.budget = spend(1.0, 1.0);
    let r = run(Driver::Process, vec![lane("a", Stage::Validate, vec![])]);
    assert!(
        matches!(decide(&r, &v), Next::OverBudget { .. }),
        "{:?}",
        decide(&r, &v)
    );
    let running = record("validate-full", json!({"prepared": true}));
    let r = run(
        Driver::Process,
        vec![lane("a", Stage::Validate, vec![running])],
    );
    assert!(
        matches!(
            decide(&r, &v),
            Next::Wait {
                why: Waiting::ValidatorsWorking,
                ..
            }
        ),
        "{:?}",
        decide(&r, &v)
    );
    v.budget = spend(1.0, 0.5);
    assert!(
        matches!(decide(&r, &v), Next::PrepareValidators { .. }),
        "{:?}",
        decide(&r, &v)
    );
}

/// A review lane (SPEC 20.14): from its worktree straight to its reviewers, and from their
/// verdict to its delivery whatever they found: no implementer, no refuter, no fix round.
#[test]
fn a_review_lane_skips_the_implementer_and_delivers_its_findings() {
    let target = crate::run::state::ReviewTarget {
        from: "a".into(),
        to: "b".into(),
        range: None,
        paths: vec!["src/x.rs".into()],
    };
    let mut review = lane("a", Stage::Worktree, vec![]);
    review.review = Some(target.clone());
    assert_eq!(
        after_worktree_of(&review, Ok(())),
        LaneMove::To(Stage::Validate)
    );
    assert_eq!(
        after_worktree_of(&lane("a", Stage::Worktree, vec![]), Ok(())),
        LaneMove::To(Stage::Implement)
    );
    assert!(matches!(
        after_worktree_of(&review, Err("no room")),
        LaneMove::Block { .. }
    ));
    let undecided = ["E1".to_owned()];
    for refute in [true, false] {
        let mut v = view(Driver::Process);
        v.refute = refute;
        let mut judged = judged(3, vec![finding("a", 1, 3, "S1-stop-the-line", "open")]);
        judged.review = Some(target.clone());
        assert_eq!(
            after_judge(&judged, &v, &undecided),
            LaneMove::To(Stage::Deliver),
            "refute {refute}"
        );
    }
}

mod claims;
mod remote;
mod replaced;
