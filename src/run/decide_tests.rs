//! The pace of agents, by driver (SPEC 20.9, 20.10, 24.8): what `decide` answers for a lane
//! that would start an agent, and for one whose agent the host already has.

use super::*;
use crate::run::state::{Base, StepRecord};
use serde_json::{json, Value};

fn view(driver: Driver) -> DecideView {
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
    }
}

fn record(step: &str, outcome: Value) -> StepRecord {
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

fn lane(id: &str, stage: Stage, steps: Vec<StepRecord>) -> Lane {
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
    }
}

fn run(driver: Driver, lanes: Vec<Lane>) -> Run {
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
        paced: 0,
        pace: None,
        window_from: None,
        lanes,
    }
}

fn waits_naming(next: &Next, words: &str) -> bool {
    matches!(next, Next::Wait { why, .. } if why.contains(words))
}

const PACED: &str = "2026-10-01T09:00:00Z";
const CEILING: &str = "ceiling (pace.agents)";

#[test]
fn the_host_gets_a_new_implementer_only_when_the_pace_allows() {
    let r = run(Driver::Host, vec![lane("a", Stage::Implement, vec![])]);
    let mut v = view(Driver::Host);
    assert_eq!(decide(&r, &v), Next::HandToHost { lane: "a".into() });
    v.paced_until = Some(PACED.into());
    let next = decide(&r, &v);
    assert!(waits_naming(&next, PACED), "{next:?}");
    v.paced_until = None;
    v.agents_alive = 1;
    let next = decide(&r, &v);
    assert!(waits_naming(&next, CEILING), "{next:?}");
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
    assert!(waits_naming(&decide(&r, &v), CEILING));
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
    assert!(waits_naming(&decide(&r, &v), CEILING));
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
    assert!(waits_naming(&next, PACED), "{next:?}");
    // At the ceiling with none handed (the agents are another run's): wait, naming it.
    v.paced_until = None;
    v.agents_alive = 2;
    let next = decide(&validating([&prepared, &prepared]), &v);
    assert!(waits_naming(&next, CEILING), "{next:?}");
}
