//! Properties of `decide` over generated states (issue 10, item 3): lanes in any stage with any
//! step records, under any settings `decide` is given.
//!
//! - a paused run launches nothing and hands nothing out: `Paused` (or `Ended`, once it ended or
//!   blocked);
//! - never more live agents than `pace.agents`: at the ceiling (or paced) no implementer or
//!   validator is launched and no agent the host does not already have is handed out; below it, a
//!   stage launches at most as many validators as there is room for;
//! - a step started and not done is never decided again: a synchronous step some call has in hand
//!   (its record names the call's pid) is waited for; an activity started is never launched twice;
//!   and, as a concurrent call sees it, a move whose records the stepper has just marked started is
//!   not chosen again.
//!
//! The simulator (`decide/props/sim.rs`) walks whole runs. Failures are not kept in a file: one found
//! here becomes a plain #[test] in `decide/tests.rs`.

use super::tests::{lane, run, view};
use super::*;
use crate::run::state::StepRecord;
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{json, Value};

mod sim;

/// proptest's defaults (256 cases; `PROPTEST_CASES` overrides), without a regressions file.
fn config() -> ProptestConfig {
    ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// The step records a generated lane may hold (at most one of each).
fn keys() -> Vec<StepKey> {
    let mut keys = vec![
        StepKey::Brief,
        StepKey::Worktree,
        StepKey::Implement,
        StepKey::Receipt,
        StepKey::Dod { seq: 0, cmd: 0 },
        StepKey::Dod { seq: 0, cmd: 1 },
        StepKey::Dod { seq: 1, cmd: 0 },
        StepKey::Retest {
            round: 1,
            seq: 0,
            cmd: 0,
        },
        StepKey::Retest {
            round: 2,
            seq: 1,
            cmd: 0,
        },
        StepKey::Validate("full".into()),
        StepKey::Validate("ruthless".into()),
        StepKey::Refute,
        StepKey::Judge,
        StepKey::Deliver,
        StepKey::Base,
        StepKey::PushBranch,
        StepKey::PrOpen,
        StepKey::PrArm,
        StepKey::Retire,
    ];
    for round in 1..=2 {
        keys.extend([
            StepKey::Integrate(round),
            StepKey::LandCommit(round),
            StepKey::Land(round),
        ]);
    }
    keys
}

/// Outcomes that mean something to `decide` (the flags it reads), and some that mean nothing.
fn outcomes() -> Vec<Option<Value>> {
    vec![
        None,
        Some(json!({})),
        Some(json!({"handed": true})),
        Some(json!({"prepared": true})),
        Some(json!({"prepared": true, "handed": true})),
        Some(json!({"prepared": true, "finished": {"exit_code": 0}})),
        Some(json!({"prepared": true, "handed": true, "finished": {"host": true}})),
        Some(json!({"moved": {"judged": "a1b2c3", "head": "d4e5f6", "commits": ["d4e5f6 more"]}})),
        Some(json!({"mutation": ["the sandbox's tree changed"]})),
        Some(json!({"rate_limited": true})),
        Some(json!({"crashed": true})),
        Some(json!({"exit_code": 0})),
        Some(json!({"exit_code": 1})),
        Some(json!({"again": true, "new_round": false})),
        Some(json!({"again": true, "new_round": true})),
        Some(json!({"merged": true})),
        Some(json!({"merged": false})),
        Some(json!({"error": "it failed"})),
        Some(json!({"missing": [], "handback": null})),
        Some(json!({"missing": ["a gap"], "handback": "the unit is wrong"})),
        Some(json!({"retired": true})),
        Some(json!({"prepared": "c0ffee"})),
    ]
}

fn arb_record(key: StepKey, attempt: u32) -> impl Strategy<Value = StepRecord> {
    let statuses = [StepStatus::Started, StepStatus::Done, StepStatus::Failed];
    (
        select(statuses.to_vec()),
        any::<bool>(),
        any::<bool>(),
        select(outcomes()),
        // Mostly the current attempt; the worktree and the base survive a new attempt.
        prop_oneof![4 => Just(0u32), 1 => 1u32..3],
    )
        .prop_map(move |(status, pid, nonce, outcome, older)| StepRecord {
            step: key.clone(),
            attempt: attempt.saturating_sub(older).max(1),
            status,
            started_at: "2026-09-30T11:00:00Z".into(),
            ended_at: None,
            inputs: None,
            nonce: nonce.then(|| format!("nonce-{key}")),
            pid: pid.then_some(4242),
            pid_start: None,
            outcome,
        })
}

/// The first stage at which a lane can hold a record of `key`: the stepper makes a step's
/// record only once the lane is at its stage (the worktree's and the base's outlive attempts).
fn first_stage(key: &StepKey) -> Stage {
    match key {
        StepKey::Base | StepKey::Worktree => Stage::Brief,
        StepKey::Brief => Stage::Worktree,
        StepKey::Implement => Stage::Implement,
        StepKey::Receipt | StepKey::Dod { .. } => Stage::Receipt,
        StepKey::Validate(_) | StepKey::Judge => Stage::Validate,
        StepKey::Refute => Stage::Refute,
        StepKey::Deliver => Stage::Deliver,
        StepKey::Retire => Stage::Retire,
        _ => Stage::Land,
    }
}

pub(super) const STAGES: [Stage; 13] = [
    Stage::Brief,
    Stage::Worktree,
    Stage::Implement,
    Stage::Receipt,
    Stage::Validate,
    Stage::Refute,
    Stage::Deliver,
    Stage::Land,
    Stage::Retire,
    Stage::Delivered,
    Stage::Blocked,
    Stage::Handback,
    Stage::Discarded,
];

/// A lane `index` of a run (`a`, `b`, `c`), which may depend on the lanes before it.
fn arb_lane(index: usize) -> impl Strategy<Value = Lane> {
    let id = ["a", "b", "c"][index].to_owned();
    let findings = prop::collection::vec(
        (
            0u32..2,
            select(vec!["S1-stop-the-line", "S2-major", "S3-minor"]),
            select(vec!["open", "refuted", "noted", "applied"]),
        ),
        0..3,
    );
    (
        select(STAGES.to_vec()),
        1u32..4,
        (0u32..4, 0u32..4, 0u32..3),
        prop::collection::vec(any::<bool>(), index),
        (any::<bool>(), any::<bool>()),
        findings,
    )
        .prop_flat_map(move |(stage, attempt, counts, deps, flags, findings)| {
            let records: Vec<_> = keys()
                .into_iter()
                .filter(|k| first_stage(k) <= stage)
                .map(|k| prop::option::weighted(0.35, arb_record(k, attempt)))
                .collect();
            let id = id.clone();
            records.prop_map(move |records| {
                let (crashes, mutations, land_round) = counts;
                let mut l = lane(&id, stage, records.into_iter().flatten().collect());
                l.attempt = attempt;
                l.crashes = crashes;
                l.mutations = mutations;
                l.land_round = land_round;
                l.released = flags.0;
                if flags.1 {
                    l.worktree = None;
                }
                l.depends = deps
                    .iter()
                    .enumerate()
                    .filter(|(_, on)| **on)
                    .map(|(i, _)| ["a", "b", "c"][i].to_owned())
                    .collect();
                l.findings = findings
                    .iter()
                    .enumerate()
                    .map(|(n, (earlier, severity, status))| {
                        super::tests::finding(
                            &id,
                            n + 1,
                            attempt.saturating_sub(*earlier).max(1),
                            severity,
                            status,
                        )
                    })
                    .collect();
                l
            })
        })
}

fn arb_driver() -> impl Strategy<Value = Driver> {
    select(vec![Driver::Process, Driver::Host])
}

/// Any settings `decide` may be given for a run of lanes `a`, `b`, `c`.
fn arb_view() -> impl Strategy<Value = DecideView> {
    let names = prop::collection::vec(
        prop::sample::subsequence(vec!["full", "ruthless"], 0..=2),
        3,
    );
    (
        (arb_driver(), arb_driver()),
        (prop::collection::vec(1usize..3, 0..3), any::<bool>()),
        (1u32..4, 0u32..3, 0u32..3),
        (any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>()),
        names,
        (1usize..4, 1usize..4, 0usize..5),
        select(vec!["none", "merge", "pr"]),
    )
        .prop_map(|(drivers, dod, limits, flags, names, pace, mode)| {
            let mut v = view(drivers.0);
            v.validator_driver = drivers.1;
            (v.dod_shape, v.dod_parallel) = dod;
            (v.max_attempts, v.max_crash_retries, v.max_mutations) = limits;
            let paced;
            (v.independent, v.refute, v.arm_auto, paced) = flags;
            v.paced_until = paced.then(|| "2026-10-01T09:00:00Z".into());
            v.validators = ["a", "b", "c"]
                .iter()
                .zip(names)
                .map(|(id, n)| (id.to_string(), n.iter().map(|s| s.to_string()).collect()))
                .collect();
            (v.pace_lanes, v.pace_agents, v.agents_alive) = pace;
            v.land_mode = mode.into();
            v
        })
}

/// A run of one to three generated lanes, and the settings `decide` is given.
fn arb_state() -> impl Strategy<Value = (Run, DecideView)> {
    let lanes = prop_oneof![
        arb_lane(0).prop_map(|a| vec![a]),
        (arb_lane(0), arb_lane(1)).prop_map(|(a, b)| vec![a, b]),
        (arb_lane(0), arb_lane(1), arb_lane(2)).prop_map(|(a, b, c)| vec![a, b, c]),
    ];
    (lanes, arb_driver(), arb_view()).prop_map(|(lanes, driver, mut v)| {
        let mut r = run(driver, lanes);
        r.driver = driver;
        v.driver = driver;
        (r, v)
    })
}

/// A lane validating with three process-run validators, each not begun, prepared, launched,
/// finished or answered: the states where several wait to be launched at once.
fn arb_validating() -> impl Strategy<Value = (Run, DecideView)> {
    let names = ["full", "ruthless", "security"];
    let states = prop::collection::vec(0usize..5, 3);
    (states, arb_view()).prop_map(move |(states, mut v)| {
        let mut steps = Vec::new();
        for (name, state) in names.iter().zip(states) {
            let mut r =
                super::tests::record(&format!("validate-{name}"), json!({"prepared": true}));
            r.nonce = None;
            match state {
                0 => continue,
                1 => {}
                2 => r.nonce = Some(format!("nonce-{name}")),
                3 => r.outcome = Some(json!({"prepared": true, "finished": {"exit_code": 0}})),
                _ => r.status = StepStatus::Done,
            }
            steps.push(r);
        }
        v.driver = Driver::Process;
        v.validator_driver = Driver::Process;
        v.validators
            .insert("a".into(), names.iter().map(|n| n.to_string()).collect());
        (
            run(Driver::Process, vec![lane("a", Stage::Validate, steps)]),
            v,
        )
    })
}

fn expected(_: usize, _: usize) -> Vec<i32> {
    vec![0]
}

/// The steps a move starts (or does), by lane: what the stepper records `started` for it.
pub(super) fn does(next: &Next) -> Vec<(String, StepKey)> {
    let one = |lane: &String, key: StepKey| vec![(lane.clone(), key)];
    match next {
        Next::AddWorktree { lane } => one(lane, StepKey::Worktree),
        Next::LaunchImplementer { lane } => one(lane, StepKey::Implement),
        Next::CheckReceipt { lane } => one(lane, StepKey::Receipt),
        Next::Deliver { lane } => one(lane, StepKey::Deliver),
        Next::Sync { lane, step } => one(lane, step.clone()),
        Next::CheckValidator { lane, key } => one(lane, key.clone()),
        Next::LaunchDod { lane, run, slots } => slots
            .iter()
            .map(|&(i, j)| (lane.clone(), run.key(i, j)))
            .collect(),
        Next::PrepareValidators { lane, keys } | Next::LaunchValidators { lane, keys } => {
            keys.iter().map(|k| (lane.clone(), k.clone())).collect()
        }
        Next::Tester { lane, next } => one(
            lane,
            match next {
                super::tester::TesterNext::Launch => StepKey::TestWrite,
                super::tester::TesterNext::Check => StepKey::TestCheck,
            },
        ),
        Next::Plan {
            lane,
            next: super::plan::PlanNext::Launch(keys),
        } => keys.iter().map(|k| (lane.clone(), k.clone())).collect(),
        Next::Plan {
            lane,
            next: super::plan::PlanNext::Decide,
        } => one(lane, StepKey::PlanDecide),
        _ => Vec::new(),
    }
}

/// Whether `next` starts an agent the host or a runner does not already have.
fn starts_an_agent(r: &Run, next: &Next) -> bool {
    match next {
        Next::LaunchImplementer { .. } | Next::LaunchValidators { .. } => true,
        Next::HandToHost { lane } => r
            .lane(lane)
            .is_none_or(|l| l.record(&StepKey::Implement).is_none()),
        Next::HandValidator { lane, key } => r.lane(lane).is_none_or(|l| {
            l.record(key)
                .and_then(|rec| rec.outcome.as_ref())
                .is_none_or(|o| o.get("handed") != Some(&Value::Bool(true)))
        }),
        _ => false,
    }
}

/// A synchronous step (done by one call, outside the lock) that some call has in hand.
fn synchronous_in_hand(l: &Lane, key: &StepKey) -> bool {
    let record = if *key == StepKey::Worktree {
        // The worktree record outlives attempts (there is one), and is looked up so.
        l.steps.iter().find(|r| r.step == *key)
    } else {
        l.record(key)
    };
    let Some(r) = record.filter(|r| r.status == StepStatus::Started && r.pid.is_some()) else {
        return false;
    };
    let flag = |name: &str| r.outcome.as_ref().is_some_and(|o| o.get(name).is_some());
    match key {
        StepKey::Worktree
        | StepKey::Receipt
        | StepKey::Deliver
        | StepKey::Base
        | StepKey::Integrate(_)
        | StepKey::LandCommit(_)
        | StepKey::Land(_)
        | StepKey::PushBranch
        | StepKey::PrOpen
        | StepKey::PrArm
        | StepKey::Retire => true,
        // A validator being prepared, or being checked once it finished (not yet launched: a
        // launched one's pid is its launcher's, and its activity is what is waited for).
        StepKey::Validate(_) | StepKey::Refute => {
            (!flag("prepared") && r.nonce.is_none()) || flag("finished")
        }
        _ => false,
    }
}

/// An activity whose record is started: launched already, whatever its pid says (a validator
/// is launched once prepared and given its nonce).
fn launched(l: &Lane, key: &StepKey, validator_driver: Driver) -> bool {
    let Some(r) = l.record(key).filter(|r| r.status == StepStatus::Started) else {
        return false;
    };
    let prepared = r
        .outcome
        .as_ref()
        .is_some_and(|o| o.get("prepared").is_some());
    match key {
        StepKey::Implement | StepKey::Dod { .. } | StepKey::Retest { .. } => true,
        StepKey::Validate(_) | StepKey::Refute => {
            validator_driver == Driver::Process && r.nonce.is_some() && prepared
        }
        _ => false,
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn a_paused_run_launches_nothing((mut r, mut v) in arb_state(), status in select(vec![
        RunStatus::Running, RunStatus::Paused, RunStatus::Blocked,
        RunStatus::Delivered, RunStatus::Handback, RunStatus::Abandoned,
    ])) {
        v.paused = true;
        r.status = status;
        let next = decide_with(&r, &v, &expected);
        let ended = status.is_ended() || status == RunStatus::Blocked;
        prop_assert_eq!(next, if ended { Next::Ended } else { Next::Paused });
    }

    #[test]
    fn at_the_ceiling_or_paced_no_new_agent_starts((r, mut v) in arb_state(), over in 0usize..3, paced in any::<bool>()) {
        if paced {
            v.paced_until = Some("2026-10-01T09:00:00Z".into());
        } else {
            v.paced_until = None;
            v.agents_alive = v.pace_agents + over;
        }
        let next = decide_with(&r, &v, &expected);
        prop_assert!(!starts_an_agent(&r, &next), "{:?} with {} alive of {}, paced {:?}", next, v.agents_alive, v.pace_agents, v.paced_until);
    }

    /// SPEC 20.12: once the charge reaches the budget no agent starts, by any driver, in any
    /// stage; nor is a validator prepared for one.
    #[test]
    fn with_the_budget_spent_no_new_agent_starts((r, mut v) in prop_oneof![arb_state(), arb_validating()], over in 0u32..3) {
        v.budget = Some(Spend {
            budget_usd: 1.0,
            charged_usd: 1.0 + f64::from(over),
            unknown: 1,
            unknown_cost_usd: 1.0,
        });
        let next = decide_with(&r, &v, &expected);
        prop_assert!(!starts_an_agent(&r, &next), "{:?}", next);
        prop_assert!(!matches!(next, Next::PrepareValidators { .. }), "{:?}", next);
    }

    #[test]
    fn below_the_ceiling_validators_launch_as_many_as_fit((r, mut v) in prop_oneof![arb_state(), arb_validating()]) {
        v.paced_until = None;
        v.agents_alive = v.agents_alive.min(v.pace_agents - 1);
        let room = v.pace_agents - v.agents_alive;
        if let Next::LaunchValidators { keys, .. } = decide_with(&r, &v, &expected) {
            prop_assert!(!keys.is_empty() && keys.len() <= room, "{} keys with room for {}", keys.len(), room);
        }
    }

    #[test]
    fn a_step_started_is_never_decided_again((r, v) in arb_state()) {
        let next = decide_with(&r, &v, &expected);
        for (lane, key) in does(&next) {
            let l = r.lane(&lane).expect("a move names a lane of the run");
            prop_assert!(!synchronous_in_hand(l, &key), "{:?} redoes `{}`, which a call has in hand", next, key);
            let launch = matches!(next, Next::LaunchImplementer { .. } | Next::LaunchDod { .. } | Next::LaunchValidators { .. });
            prop_assert!(!(launch && launched(l, &key, v.validator_driver)), "{:?} launches `{}` again", next, key);
        }
    }

    /// As a concurrent call sees it: the stepper marks the move's records started (under the
    /// lock, before its side effect), and the next call never chooses the same step again.
    #[test]
    fn a_move_just_marked_started_is_not_chosen_again((mut r, mut v) in arb_state()) {
        let next = decide_with(&r, &v, &expected);
        let started = does(&next);
        let launched = sim::mark_started(&mut r, &next, v.validator_driver);
        v.agents_alive += launched;
        let again = decide_with(&r, &v, &expected);
        for step in does(&again) {
            prop_assert!(!started.contains(&step), "{:?} then {:?}: `{}` twice", next, again, step.1);
        }
    }
}
