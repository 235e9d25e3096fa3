//! A model of the stepper that walks whole runs through `decide` (issue 10, item 3). Each call of
//! the model does what `stepper::step_once` does: what the host handed in, what finished
//! activities say (`observe`), `decide`, the work under the lock (`under_lock::apply`), the side
//! effect outside it with a random outcome (agents and commands that pass, fail, crash or are rate
//! limited; planning rounds whose drafts and reviews are taken or refused and whose plans are
//! approved or not; receipts verified or not; test writers whose work is taken or refused; validators'
//! answers and the refuter's decisions; landings that succeed, fail or find the target moved; a
//! remote that cannot be reached; claims renewed or lost; a call that dies before recording), then
//! `settle` and the ending of stranded host agents. A person acts now and then (pause, discard,
//! release, resume). Every move of a lane is `decide`'s (`decide::moves`), applied as the real
//! code applies it.
//!
//! Checked on every walk: a paused run moves nothing; a lane starts only while fewer than
//! `pace.lanes` are active; the agents alive (and any still at work whose attempt ended) never
//! exceed `pace.agents`; a concurrent call never chooses a step another call has just started,
//! and gives a lane whose synchronous step is in hand nothing but a wait; a lane whose claim was
//! lost, or any lane while the claims are due, only blocks or waits; a test writer's refused work
//! is never run, validated or delivered; a refused draft is never reviewed or decided on, and no
//! lane leaves planning unapproved; the run ends
//! (delivered, handed back, abandoned, or blocked with no lane able to move) within a bound, as
//! its lanes say; a delivered lane was delivered, judged when it had validators, landed and
//! retired when it lands, and re-tested when the target came into it. Across a fixed set of walks,
//! every stage, every kind of move and every way a run stops is seen.
//!
//! It never touches a file, a clock or a process: the world (activities, the host, the forge) is
//! the model's, driven by a seeded generator.

use super::does;
use crate::run::decide::tests::{lane, run, view};
use crate::run::decide::*;
use crate::run::state::{Driver, Lane, Lanes, Run, RunStatus, Stage, StepRecord, StepStatus};
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};

/// Far more steps than any generated run needs (the fixed set's longest takes under a hundred);
/// a run still going after this many does not end.
const BOUND: usize = 4000;

/// The pid the model's calls record as their own.
const OWNER: u32 = 4242;

/// A generated configuration of a run.
#[derive(Debug, Clone)]
pub(super) struct Case {
    driver: Driver,
    validator_driver: Driver,
    /// For each lane, the earlier lanes it depends on.
    depends: Vec<Vec<usize>>,
    dod_shape: Vec<usize>,
    dod_parallel: bool,
    independent: bool,
    refute: bool,
    validators: Vec<String>,
    max_attempts: u32,
    max_crash_retries: u32,
    max_mutations: u32,
    land_mode: &'static str,
    arm_auto: bool,
    pace_agents: usize,
    pace_lanes: usize,
    /// `build.testWriter` set: a test writer after each receipt's own checks (SPEC 20.17).
    test_writer: bool,
    /// `build --auto-plan`: a run of one lane starts at stage `plan` (SPEC 20.16).
    planning: bool,
    seed: u64,
}

pub(super) fn arb_case() -> impl Strategy<Value = Case> {
    let drivers = prop::array::uniform2(select(vec![Driver::Process, Driver::Host]));
    let depends = (1usize..=3).prop_flat_map(|n| {
        (0..n)
            .map(|i| prop::sample::subsequence((0..i).collect::<Vec<_>>(), 0..=i))
            .collect::<Vec<_>>()
    });
    (
        drivers,
        depends,
        (prop::collection::vec(1usize..=2, 0..=2), any::<bool>()),
        (any::<bool>(), any::<bool>(), 1usize..=2),
        (1u32..=3, 0u32..=2, 0u32..=2),
        (select(vec!["none", "merge", "pr"]), any::<bool>()),
        (1usize..=3, 1usize..=3, any::<bool>(), any::<bool>()),
        any::<u64>(),
    )
        .prop_map(
            |(drivers, depends, dod, verify, limits, land, pace, seed)| Case {
                driver: drivers[0],
                validator_driver: drivers[1],
                depends,
                dod_shape: dod.0,
                dod_parallel: dod.1,
                independent: verify.0,
                refute: verify.1,
                validators: ["full", "ruthless"][..verify.2]
                    .iter()
                    .map(|s| s.to_string())
                    .collect(),
                max_attempts: limits.0,
                max_crash_retries: limits.1,
                max_mutations: limits.2,
                land_mode: land.0,
                arm_auto: land.1,
                pace_agents: pace.0,
                pace_lanes: pace.1,
                test_writer: pace.2,
                planning: pace.3,
                seed,
            },
        )
}

/// splitmix64: the world's dice, from the case's seed.
struct Dice(u64);

impl Dice {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// True `pct` times in a hundred.
    fn chance(&mut self, pct: u64) -> bool {
        self.next() % 100 < pct
    }
    fn upto(&mut self, n: u64) -> u64 {
        1 + self.next() % n
    }
}

/// How often the world may get in the way, per run: enough to see each case, few enough that
/// every run ends within `BOUND`.
struct Budget {
    rate_limits: u32,
    /// Times the remote cannot be reached (a publish, a receipt's fetch, a landing step).
    outages: u32,
    /// Renewals of the run's claims that find one lost to another machine (SPEC 24.9.1).
    losses: u32,
    target_moves: u32,
    pr_waits: u32,
    deaths: u32,
    mishaps: u32,
    person: u32,
}

/// An activity the model launched: it finishes at `done_at` with `result`.
struct Activity {
    nonce: String,
    done_at: u64,
    /// An exit code, or None: the supervisor is gone (a crash).
    exit: Option<i64>,
    rate_limited: bool,
    agent: bool,
}

/// What one walk saw.
pub(super) struct Walk {
    pub steps: usize,
    pub status: RunStatus,
    pub stages: BTreeSet<Stage>,
    pub moves: BTreeSet<&'static str>,
}

struct Sim {
    case: Case,
    dice: Dice,
    run: Run,
    t: u64,
    eligible_at: u64,
    world: Vec<Activity>,
    /// When the host hands in the agent it was given, by the record's nonce.
    host_due: BTreeMap<String, u64>,
    paused_for: u32,
    /// When the run's claims on the remote are next due to be renewed (SPEC 24.9.1).
    renew_at: u64,
    budget: Budget,
    stages: BTreeSet<Stage>,
    moves: BTreeSet<&'static str>,
}

fn nonce() -> String {
    static N: AtomicU64 = AtomicU64::new(1);
    format!("n{}", N.fetch_add(1, Ordering::Relaxed))
}

fn started_record(step: StepKey, attempt: u32, nonce: Option<String>) -> StepRecord {
    StepRecord {
        step,
        attempt,
        status: StepStatus::Started,
        started_at: "2026-09-30T11:00:00Z".into(),
        ended_at: None,
        inputs: None,
        nonce,
        pid: Some(OWNER),
        pid_start: None,
        outcome: None,
    }
}

fn finish(record: &mut StepRecord, status: StepStatus, outcome: Value) {
    record.status = status;
    record.ended_at = Some("2026-09-30T11:00:01Z".into());
    record.outcome = Some(outcome);
}

/// Put `record` in place of the lane's record of the same step and attempt.
fn replace(l: &mut Lane, record: StepRecord) {
    l.steps
        .retain(|r| !(r.step == record.step && r.attempt == record.attempt));
    l.steps.push(record);
}

fn flag(record: &StepRecord, name: &str) -> bool {
    record
        .outcome
        .as_ref()
        .and_then(|o| o.get(name))
        .is_some_and(|v| !v.is_null() && v != &Value::Bool(false))
}

/// The stepper's work under the lock for a move that starts a step (`under_lock::apply`): the
/// records `started` (owned by the calling process). Returns how many agents it launched.
pub(super) fn mark_started(r: &mut Run, next: &Next, validator_driver: Driver) -> usize {
    match next {
        Next::AddWorktree { lane } => {
            let l = r.lane_mut(lane).expect("a move names a lane of the run");
            l.steps.retain(|s| s.step != StepKey::Worktree);
            l.steps
                .push(started_record(StepKey::Worktree, l.attempt, None));
            0
        }
        Next::LaunchImplementer { lane } => {
            let l = r.lane_mut(lane).expect("a move names a lane of the run");
            replace(
                l,
                started_record(StepKey::Implement, l.attempt, Some(nonce())),
            );
            1
        }
        // `stage::plan::under_lock`: the round's agents launched (what the planner was given is
        // no longer open in its round), or the loop's decision begun.
        Next::Plan { lane, next } => {
            let l = r.lane_mut(lane).expect("a move names a lane of the run");
            match next {
                plan::PlanNext::Launch(keys) => {
                    for key in keys {
                        plan::revise_for(l, key);
                        replace(l, started_record(key.clone(), l.attempt, Some(nonce())));
                    }
                    keys.len()
                }
                plan::PlanNext::Decide => {
                    replace(l, started_record(StepKey::PlanDecide, l.attempt, None));
                    0
                }
                _ => 0,
            }
        }
        // `under_lock`: the test writer's record made or replaced (a nonce: it launches), or its
        // check's.
        Next::Tester { lane, next } => {
            let l = r.lane_mut(lane).expect("a move names a lane of the run");
            match next {
                tester::TesterNext::Launch => {
                    replace(
                        l,
                        started_record(StepKey::TestWrite, l.attempt, Some(nonce())),
                    );
                    1
                }
                tester::TesterNext::Check => {
                    replace(l, started_record(StepKey::TestCheck, l.attempt, None));
                    0
                }
            }
        }
        Next::CheckReceipt { lane } => {
            let l = r.lane_mut(lane).expect("a move names a lane of the run");
            apply_move(l, after_implementer());
            replace(l, started_record(StepKey::Receipt, l.attempt, None));
            0
        }
        Next::LaunchDod { lane, run, slots } => {
            let l = r.lane_mut(lane).expect("a move names a lane of the run");
            for &(i, j) in slots {
                replace(l, started_record(run.key(i, j), l.attempt, Some(nonce())));
            }
            0
        }
        Next::Deliver { lane } => {
            let l = r.lane_mut(lane).expect("a move names a lane of the run");
            let mut record = started_record(StepKey::Deliver, l.attempt, None);
            record.outcome = l
                .record(&StepKey::Deliver)
                .and_then(|d| d.outcome.clone())
                .filter(|o| o.get("prepared").is_some());
            replace(l, record);
            0
        }
        Next::PrepareValidators { lane, keys } => {
            let l = r.lane_mut(lane).expect("a move names a lane of the run");
            for key in keys {
                replace(l, started_record(key.clone(), l.attempt, None));
            }
            0
        }
        Next::LaunchValidators { lane, keys } => {
            let l = r.lane_mut(lane).expect("a move names a lane of the run");
            let mut launched = 0;
            for key in keys {
                if let Some(record) = l.record_mut(key) {
                    record.nonce = Some(nonce());
                    record.pid = Some(OWNER);
                    launched += 1;
                }
            }
            if validator_driver == Driver::Process {
                launched
            } else {
                0
            }
        }
        Next::CheckValidator { lane, key } => {
            let l = r.lane_mut(lane).expect("a move names a lane of the run");
            if let Some(record) = l.record_mut(key) {
                record.pid = Some(OWNER);
            }
            0
        }
        Next::Sync { lane, step } => {
            let l = r.lane_mut(lane).expect("a move names a lane of the run");
            replace(l, started_record(step.clone(), l.attempt, None));
            0
        }
        _ => 0,
    }
}

/// The kind of a move, to count which kinds a set of walks saw.
pub(super) fn kind(next: &Next) -> &'static str {
    match next {
        Next::Ended => "Ended",
        Next::Paused => "Paused",
        Next::Wait { .. } => "Wait",
        Next::RenderBrief { .. } => "RenderBrief",
        Next::AddWorktree { .. } => "AddWorktree",
        Next::LaunchImplementer { .. } => "LaunchImplementer",
        Next::HandToHost { .. } => "HandToHost",
        Next::CheckReceipt { .. } => "CheckReceipt",
        Next::LaunchDod { .. } => "LaunchDod",
        Next::Requeue { .. } => "Requeue",
        Next::RelaunchDod { .. } => "RelaunchDod",
        Next::FinishReceipt { .. } => "FinishReceipt",
        Next::Retry { .. } => "Retry",
        Next::Block { .. } => "Block",
        Next::OverBudget { .. } => "OverBudget",
        Next::Deliver { .. } => "Deliver",
        Next::Finish => "Finish",
        Next::RenewClaims => "RenewClaims",
        Next::Stall { .. } => "Stall",
        Next::PrepareValidators { .. } => "PrepareValidators",
        Next::LaunchValidators { .. } => "LaunchValidators",
        Next::HandValidator { .. } => "HandValidator",
        Next::CheckValidator { .. } => "CheckValidator",
        Next::RedoValidator { .. } => "RedoValidator",
        Next::Sync { .. } => "Sync",
        Next::LandAgain { .. } => "LandAgain",
        Next::Judge { .. } => "Judge",
        Next::FinishRefute { .. } => "FinishRefute",
        Next::Plan { .. } => "Plan",
        Next::Tester { .. } => "Tester",
    }
}

pub(super) const KINDS: usize = 29;

/// How a run whose every lane is final ends (SPEC 23.6), written out again rather than asked of
/// `run_status`.
fn end_of(lanes: &Lanes) -> RunStatus {
    let all = |f: &dyn Fn(Stage) -> bool| lanes.iter().all(|l| f(l.stage));
    let any = |s: Stage| lanes.iter().any(|l| l.stage == s);
    if all(&|s| matches!(s, Stage::Delivered | Stage::Discarded)) && any(Stage::Delivered) {
        RunStatus::Delivered
    } else if lanes
        .iter()
        .any(|l| l.stage == Stage::Blocked && !waits_on_an_end(lanes, l))
    {
        RunStatus::Blocked
    } else if any(Stage::Handback) {
        RunStatus::Handback
    } else if all(&|s| s == Stage::Discarded) {
        RunStatus::Abandoned
    } else {
        RunStatus::Blocked
    }
}

/// Whether a lane depends, however far back, on one handed back or discarded.
fn waits_on_an_end(lanes: &Lanes, lane: &Lane) -> bool {
    let mut seen: Vec<&str> = Vec::new();
    let mut todo: Vec<&str> = lane.depends.iter().map(String::as_str).collect();
    while let Some(id) = todo.pop() {
        if seen.contains(&id) {
            continue;
        }
        seen.push(id);
        let Some(dep) = lanes.iter().find(|l| l.id == id) else {
            continue;
        };
        if matches!(dep.stage, Stage::Handback | Stage::Discarded) {
            return true;
        }
        todo.extend(dep.depends.iter().map(String::as_str));
    }
    false
}

fn expected(_: usize, _: usize) -> Vec<i32> {
    vec![0]
}

pub(super) fn walk(case: &Case) -> Walk {
    let ids = ["a", "b", "c"];
    let lanes = case
        .depends
        .iter()
        .enumerate()
        .map(|(i, deps)| {
            // A planning run has one lane, at stage `plan`, with no worktree yet.
            let planning = case.planning && case.depends.len() == 1;
            let mut l = lane(
                ids[i],
                if planning { Stage::Plan } else { Stage::Brief },
                vec![],
            );
            l.worktree = None;
            l.depends = deps.iter().map(|d| ids[*d].to_owned()).collect();
            l
        })
        .collect();
    let mut sim = Sim {
        case: case.clone(),
        dice: Dice(case.seed),
        run: run(case.driver, lanes),
        t: 0,
        eligible_at: 0,
        world: Vec::new(),
        host_due: BTreeMap::new(),
        paused_for: 0,
        renew_at: 1 + case.seed % 40,
        budget: Budget {
            rate_limits: 3,
            outages: 3,
            losses: 1,
            target_moves: 2,
            pr_waits: 3,
            deaths: 3,
            mishaps: 2,
            person: 2,
        },
        stages: BTreeSet::new(),
        moves: BTreeSet::new(),
    };
    for steps in 0..BOUND {
        sim.t += 1;
        sim.host_hands_in();
        sim.person_during();
        sim.observe();
        let v = sim.view();
        let next = decide_with(&sim.run, &v, &expected);
        sim.moves.insert(kind(&next));
        if sim.run.status == RunStatus::Paused {
            assert_eq!(next, Next::Paused, "a paused run moved");
        }
        if next == Next::Ended {
            if sim.person_after() {
                continue;
            }
            sim.check_end(&v);
            return Walk {
                steps,
                status: sim.run.status,
                stages: sim.stages,
                moves: sim.moves,
            };
        }
        sim.check_lanes_pace(&next);
        sim.check_claims(&next, &v);
        sim.check_tests(&next);
        sim.check_plan(&next);
        let outside = sim.under_lock(&next, &v);
        sim.check_ceiling(&next);
        sim.settle();
        sim.end_stranded();
        if outside {
            sim.concurrent_call(&next);
            if sim.outside(&next) {
                // The step blocked its lane: the run is blocked, unless its other lanes can move.
                if sim.run.lanes.iter().any(|l| l.stage == Stage::Blocked) {
                    sim.lane_blocked_the_run();
                    sim.settle();
                }
            }
        }
        sim.end_stranded();
        sim.stages.extend(sim.run.lanes.iter().map(|l| l.stage));
    }
    panic!(
        "the run did not end within {BOUND} steps: {:#?}\n{case:?}",
        sim.run
    );
}

impl Sim {
    fn view(&self) -> DecideView {
        let c = &self.case;
        let mut v = view(c.driver);
        v.validator_driver = c.validator_driver;
        v.dod_shape = c.dod_shape.clone();
        v.dod_parallel = c.dod_parallel;
        v.max_attempts = c.max_attempts;
        v.max_crash_retries = c.max_crash_retries;
        v.max_mutations = c.max_mutations;
        v.independent = c.independent;
        v.refute = c.refute;
        v.paused = self.run.status == RunStatus::Paused;
        v.validators = self
            .run
            .lanes
            .iter()
            .filter(|l| matches!(l.stage, Stage::Validate | Stage::Refute))
            .map(|l| (l.id.clone(), self.pinned(l)))
            .collect();
        v.pace_lanes = c.pace_lanes;
        v.pace_agents = c.pace_agents;
        v.agents_alive = self.alive();
        v.paced_until = (self.eligible_at > self.t).then(|| format!("t{}", self.eligible_at));
        v.land_mode = c.land_mode.into();
        v.arm_auto = c.arm_auto;
        v.test_writer = c.test_writer;
        v.renew_claims = self.run.claims.as_ref().is_some_and(|k| k.now) || self.t >= self.renew_at;
        v
    }

    /// The lane's validators as fixed when it first validated (`validators::pinned_validators`).
    fn pinned(&self, l: &Lane) -> Vec<String> {
        if !l.validators.is_empty() {
            l.validators.clone()
        } else if self.case.independent {
            self.case.validators.clone()
        } else {
            Vec::new()
        }
    }

    /// The agents alive as the loop counts them (`alive::agents_alive`, `host::alive`).
    fn alive(&self) -> usize {
        let r = &self.run;
        let mut n = 0;
        for l in &r.lanes {
            for s in l
                .steps
                .iter()
                .filter(|s| s.attempt == l.attempt && s.status == StepStatus::Started)
            {
                let host_live = flag(s, "handed") && !flag(s, "finished");
                if host_live && !r.status.is_ended() && !l.stage.is_final() {
                    n += 1;
                }
                let process = s.nonce.is_some()
                    && ((s.step == StepKey::Implement && r.driver == Driver::Process)
                        || s.step.runs_once()
                        || (s.step.is_validator()
                            && self.case.validator_driver == Driver::Process
                            && !flag(s, "finished")));
                if process {
                    n += 1;
                }
            }
        }
        n
    }

    /// The agents really at work: those the loop counts, and any launched agent still running
    /// whose record left the state (its attempt ended under it).
    fn at_work(&self) -> usize {
        let current: BTreeSet<&str> = self
            .run
            .lanes
            .iter()
            .flat_map(|l| {
                l.steps
                    .iter()
                    .filter(move |s| s.attempt == l.attempt && s.status == StepStatus::Started)
            })
            .filter_map(|s| s.nonce.as_deref())
            .collect();
        let orphans = self
            .world
            .iter()
            .filter(|a| a.agent && a.done_at > self.t && !current.contains(a.nonce.as_str()))
            .count();
        self.alive() + orphans
    }

    fn check_ceiling(&self, next: &Next) {
        assert!(
            self.alive() <= self.case.pace_agents,
            "{} agents alive over pace.agents {} after {next:?}: {:#?}",
            self.alive(),
            self.case.pace_agents,
            self.run
        );
        assert!(
            self.at_work() <= self.case.pace_agents,
            "{} agents at work (some orphaned by an ended attempt) over pace.agents {} after {next:?}",
            self.at_work(),
            self.case.pace_agents
        );
    }

    /// A lane whose unit's claim was lost, and every lane while the claims are due, only blocks or
    /// waits (SPEC 24.9.1): nothing of it moves on work another machine may be doing.
    fn check_claims(&self, next: &Next, v: &DecideView) {
        let Some(l) = lane_of_move(next)
            .and_then(|id| self.run.lane(id))
            .filter(|l| !l.stage.is_final())
        else {
            return;
        };
        let lost =
            self.run.claims.as_ref().is_some_and(|k| {
                k.lost.contains_key(&l.unit) || k.lost.contains_key(&self.run.unit)
            });
        if lost || v.renew_claims {
            assert!(
                matches!(next, Next::Block { .. } | Next::Wait { .. }),
                "lane `{}` moved ({next:?}) with its claim lost or due: {:?}",
                l.id,
                self.run.claims
            );
        }
    }

    /// A test writer's refused work (SPEC 20.17) is never run, validated or delivered: the
    /// attempt ends at its receipt.
    fn check_tests(&self, next: &Next) {
        let Some(l) = lane_of_move(next).and_then(|id| self.run.lane(id)) else {
            return;
        };
        let refused = l
            .record(&StepKey::TestCheck)
            .filter(|r| r.attempt == l.attempt)
            .and_then(|r| r.outcome_as::<crate::run::outcome::TestCheckOutcome>())
            .is_some_and(|o| tester::refused(&o).is_some());
        let goes_on = matches!(
            next,
            Next::LaunchDod { .. } | Next::Deliver { .. } | Next::PrepareValidators { .. }
        );
        assert!(
            !(refused && goes_on),
            "lane `{}` went on ({next:?}) past its test writer's refused work",
            l.id
        );
    }

    /// A lane starts only while fewer than `pace.lanes` lanes are active (SPEC 23.6).
    fn check_lanes_pace(&self, next: &Next) {
        let Some(l) = lane_of_move(next).and_then(|id| self.run.lane(id)) else {
            return;
        };
        // A block, a stall or a wait starts nothing (a wait for the claims' renewal names the
        // lane that would move next, whether or not the pace lets it start).
        if started(l)
            || matches!(
                next,
                Next::Block { .. } | Next::Stall { .. } | Next::Wait { .. }
            )
        {
            return;
        }
        let active = self.run.lanes.iter().filter(|l| active(l)).count();
        assert!(
            active < self.case.pace_lanes,
            "{next:?} starts `{}` with {active} lanes active, pace.lanes {}",
            l.id,
            self.case.pace_lanes
        );
    }

    /// A second call, under the lock while this one works outside it: it never chooses a step
    /// this one has just started; a synchronous step in hand holds its lane.
    fn concurrent_call(&self, next: &Next) {
        let again = decide_with(&self.run, &self.view(), &expected);
        let mine = does(next);
        for step in does(&again) {
            assert!(
                !mine.contains(&step),
                "a concurrent call chose `{}` again: {next:?} then {again:?}",
                step.1
            );
        }
        let held = match next {
            Next::AddWorktree { lane } | Next::CheckReceipt { lane } | Next::Deliver { lane } => {
                Some(lane)
            }
            Next::Sync { lane, .. } => Some(lane),
            _ => None,
        };
        if let Some(lane) = held {
            let moves_it = match &again {
                Next::Wait { .. } => false,
                other => {
                    does(other).iter().any(|(l, _)| l == lane)
                        || lane_of_move(other) == Some(lane.as_str())
                }
            };
            assert!(
                !moves_it,
                "lane `{lane}` is in hand ({next:?}), yet a concurrent call chose {again:?}"
            );
        }
    }

    fn lane_mut(&mut self, id: &str) -> &mut Lane {
        self.run.lane_mut(id).expect("a lane of the run")
    }

    /// A run whose lanes can move again after one blocked is running again (`stepper::settle`).
    fn settle(&mut self) {
        let r = &self.run;
        if r.lanes.len() < 2
            || r.status != RunStatus::Blocked
            || r.lanes.iter().all(|l| l.stage.is_final())
        {
            return;
        }
        let status = run_status(r, &self.view(), &expected);
        self.run.status = status;
    }

    /// The host's agents of final lanes, or of an ended run, end (`host::end_stranded`).
    fn end_stranded(&mut self) {
        let ended = self.run.status.is_ended();
        for l in &mut self.run.lanes {
            if !(ended || l.stage.is_final()) {
                continue;
            }
            let attempt = l.attempt;
            for s in l.steps.iter_mut().filter(|s| {
                s.attempt == attempt
                    && s.status == StepStatus::Started
                    && flag(s, "handed")
                    && !flag(s, "finished")
            }) {
                let mut o = s.outcome.take().unwrap_or_else(|| json!({}));
                o["ended"] = "stranded".into();
                finish(s, StepStatus::Failed, o);
            }
        }
    }

    fn end_run(&mut self, status: RunStatus) {
        self.run.status = status;
        self.end_stranded();
    }

    /// The run has stopped: it ended as its lanes say, or it is blocked and no lane can move.
    fn check_end(&self, v: &DecideView) {
        let r = &self.run;
        let status = r.status;
        assert!(
            matches!(
                status,
                RunStatus::Delivered
                    | RunStatus::Handback
                    | RunStatus::Abandoned
                    | RunStatus::Blocked
            ),
            "the run stopped {status:?}"
        );
        if r.lanes.iter().all(|l| l.stage.is_final()) {
            assert_eq!(status, end_of(&r.lanes), "{:#?}", r.lanes);
        } else {
            assert_eq!(status, RunStatus::Blocked, "{:#?}", r.lanes);
            let next = lanes_next(r, v, &expected);
            assert!(
                matches!(next, Next::Stall { .. }),
                "the run is blocked, yet its lanes can move: {next:?}\n{:#?}",
                r.lanes
            );
        }
        for l in r.lanes.iter().filter(|l| l.stage == Stage::Delivered) {
            assert!(
                l.is_done(&StepKey::Deliver),
                "`{}` delivered undelivered",
                l.id
            );
            if self.case.land_mode != "none" {
                assert!(l.is_done(&StepKey::Retire), "`{}` delivered unlanded", l.id);
            }
            if !self.pinned(l).is_empty() {
                assert!(l.is_done(&StepKey::Judge), "`{}` delivered unjudged", l.id);
            }
            // Nothing untested lands: a round that merged the target in ran the definition of
            // done again, and it passed.
            let round = l.land_round.max(1);
            let merged = l
                .outcome(&StepKey::Integrate(round))
                .is_some_and(|o| o["merged"] == true);
            if merged {
                for (i, len) in self.case.dod_shape.iter().enumerate() {
                    for j in 0..*len {
                        let retest = StepKey::Retest {
                            round,
                            seq: i,
                            cmd: j,
                        };
                        let code = l.outcome(&retest).and_then(|o| o["exit_code"].as_i64());
                        assert_eq!(code, Some(0), "`{}` landed with `{retest}` {code:?}", l.id);
                    }
                }
            }
        }
    }
}

/// The lane a move is about, if it names one.
fn lane_of_move(next: &Next) -> Option<&str> {
    match next {
        Next::Ended | Next::Paused | Next::Finish | Next::RenewClaims => None,
        Next::Wait { lane, .. }
        | Next::RenderBrief { lane }
        | Next::AddWorktree { lane }
        | Next::LaunchImplementer { lane }
        | Next::HandToHost { lane }
        | Next::CheckReceipt { lane }
        | Next::LaunchDod { lane, .. }
        | Next::Requeue { lane, .. }
        | Next::RelaunchDod { lane, .. }
        | Next::FinishReceipt { lane }
        | Next::Retry { lane, .. }
        | Next::Block { lane, .. }
        | Next::OverBudget { lane, .. }
        | Next::Deliver { lane }
        | Next::Stall { lane, .. }
        | Next::PrepareValidators { lane, .. }
        | Next::LaunchValidators { lane, .. }
        | Next::HandValidator { lane, .. }
        | Next::CheckValidator { lane, .. }
        | Next::RedoValidator { lane, .. }
        | Next::Sync { lane, .. }
        | Next::LandAgain { lane }
        | Next::Judge { lane }
        | Next::FinishRefute { lane }
        | Next::Plan { lane, .. }
        | Next::Tester { lane, .. } => Some(lane),
    }
}

/// A new attempt (`records::new_attempt`): the current attempt's records leave the lane (the
/// worktree's and the base's stay), and the lane starts again from its brief.
fn new_attempt(l: &mut Lane, reason: String, crashed: bool) {
    let attempt = l.attempt;
    l.steps.retain(|s| {
        !(s.attempt == attempt && s.step != StepKey::Worktree && s.step != StepKey::Base)
    });
    l.attempt += 1;
    if crashed {
        l.crashes += 1;
    }
    l.reason = Some(reason);
    l.stage = Stage::Brief;
}

/// `records::apply_move`, without the history file.
fn apply_move(l: &mut Lane, mv: LaneMove) {
    match mv {
        LaneMove::To(stage) => {
            if matches!(stage, Stage::Land | Stage::Delivered) {
                l.reason = None;
            }
            l.stage = stage;
        }
        LaneMove::Retry { reason } => new_attempt(l, reason, false),
        LaneMove::Block { reason }
        | LaneMove::Spent { reason }
        | LaneMove::Escalate { reason, .. } => {
            l.stage = Stage::Blocked;
            l.reason = Some(reason);
        }
        LaneMove::Handback { reason } => {
            l.stage = Stage::Handback;
            l.reason = Some(reason);
        }
    }
}

mod planning;
mod steps;

proptest! {
    #![proptest_config(super::config())]

    /// Every generated run ends within the bound, keeping the ceiling all the way (`walk` checks
    /// each step and the end).
    #[test]
    fn every_run_ends_and_keeps_the_ceiling(case in arb_case()) {
        walk(&case);
    }
}

/// A fixed set of walks (proptest's deterministic generator) sees every stage, every kind of
/// move and every way a run stops.
#[test]
fn every_stage_and_every_move_is_reached() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let (mut stages, mut moves, mut ends) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    let mut longest = 0;
    for _ in 0..300 {
        let case = arb_case().new_tree(&mut runner).expect("a case").current();
        let w = walk(&case);
        stages.extend(w.stages);
        moves.extend(w.moves);
        ends.insert(w.status.as_str());
        longest = longest.max(w.steps);
    }
    let all: BTreeSet<Stage> = super::STAGES.into_iter().collect();
    assert_eq!(
        all.difference(&stages).collect::<Vec<_>>(),
        Vec::<&Stage>::new(),
        "stages never reached"
    );
    assert!(stages.contains(&Stage::Plan), "no walk planned");
    assert_eq!(moves.len(), KINDS, "moves reached: {moves:?}");
    assert_eq!(
        ends,
        ["abandoned", "blocked", "delivered", "handback"].into(),
        "how runs stopped"
    );
    assert!(longest < BOUND / 4, "the longest walk took {longest} steps");
}
