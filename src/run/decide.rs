//! What comes next for a run: a pure function of the state. No file, clock or process is read
//! here; everything non-deterministic was recorded into the state before `decide` is asked. That is
//! what makes replay safe: the same state always gives the same decision.

use super::keys::{DodRun, StepKey};
use super::outcome::{
    ActivityOutcome, DeliverOutcome, LandOutcome, ReceiptOutcome, ValidatorOutcome,
};
use super::state::{Driver, Lane, Run, RunStatus, Stage, StepStatus};

/// The settings `decide` needs, as plain data.
#[derive(Debug, Clone)]
pub struct DecideView {
    pub driver: Driver,
    /// How many commands each definition-of-done entry (a sequence) has.
    pub dod_shape: Vec<usize>,
    pub dod_parallel: bool,
    pub max_attempts: u32,
    pub max_crash_retries: u32,
    pub independent: bool,
    pub paused: bool,
    /// The validators of each live lane (lens and reviewer names), in order, by lane id.
    pub validators: std::collections::BTreeMap<String, Vec<String>>,
    /// `pace.lanes`: how many lanes may be active (started, not yet past validation) at once.
    pub pace_lanes: usize,
    /// `pace.agents`, and how many agents are alive in the repository now (SPEC 20.9).
    pub pace_agents: usize,
    pub agents_alive: usize,
    /// When the run may launch its next agent, if not now (SPEC 20.10).
    pub paced_until: Option<String>,
    pub validator_driver: Driver,
    pub max_mutations: u32,
    pub land_mode: super::settings::LandMode,
    /// `land.arm` is auto: a pull request is armed once open.
    pub arm_auto: bool,
    /// `verify.refute`: blocking findings go to a refuter before a fix round.
    pub refute: bool,
    /// The run's budget and what its agents have been charged so far (SPEC 20.12); `None`
    /// without a budget.
    pub budget: Option<Spend>,
    /// `plan.rounds`: planning rounds at most (SPEC 20.16).
    pub plan_rounds: u32,
    /// `build.testWriter`: a test writer after each receipt's own checks (SPEC 20.17).
    pub test_writer: bool,
    /// Validators run remote: preparing them publishes the lane branch, so it waits out a
    /// backoff (SPEC 20.19).
    pub remote_validators: bool,
    /// The run's claims on `land.remote` are due to be renewed (SPEC 24.9.1).
    pub renew_claims: bool,
}

/// A run's budget and its charge, as `decide` needs them (SPEC 20.12).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spend {
    pub budget_usd: f64,
    pub charged_usd: f64,
    /// Agents of unknown cost, each charged `unknown_cost_usd`.
    pub unknown: usize,
    pub unknown_cost_usd: f64,
}

/// Why a lane waits; the command line words it.
#[derive(Debug, Clone, PartialEq)]
pub enum Waiting {
    MakingWorktree,
    /// A person's or a rate limit's pace: no agent starts before `until`.
    Paced {
        until: String,
    },
    /// The remote could not be reached (SPEC 20.19): `step` runs again from `until`.
    Unreachable {
        step: StepKey,
        until: String,
    },
    /// The run's claims on the remote could not be renewed (SPEC 24.9.1): nothing moves before
    /// they are, from `until`.
    Renewing {
        until: String,
    },
    /// `alive` agents are alive, the ceiling `pace.agents` allows.
    Ceiling {
        alive: usize,
    },
    ImplementerRunning,
    TestWriterRunning,
    Delivering,
    Landed,
    ValidatorsWorking,
    RefuterWorking,
    DoingStep {
        step: StepKey,
    },
    PullRequestOpen,
    DodRunning,
    CheckingReceipt,
    /// The planner or the reviewers of planning round `round` are working.
    Planning {
        round: u32,
    },
}

impl Waiting {
    /// Another call of the loop is doing the lane's step: it ends soon, and the step is then done.
    pub fn on_another_call(&self) -> bool {
        matches!(
            self,
            Waiting::MakingWorktree
                | Waiting::Delivering
                | Waiting::DoingStep { .. }
                | Waiting::CheckingReceipt
        )
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// The run has ended (delivered, handed back, abandoned) or is blocked: report it.
    Ended,
    Paused,
    Wait {
        lane: String,
        why: Waiting,
    },
    RenderBrief {
        lane: String,
    },
    AddWorktree {
        lane: String,
    },
    LaunchImplementer {
        lane: String,
    },
    HandToHost {
        lane: String,
    },
    CheckReceipt {
        lane: String,
    },
    LaunchDod {
        lane: String,
        /// The receipt's run, or a landing round's after the target came into the lane.
        run: DodRun,
        slots: Vec<(usize, usize)>,
    },
    /// An agent step rate limited: archive its record (no crash, no attempt) so it runs again
    /// once the run is eligible.
    Requeue {
        lane: String,
        key: StepKey,
    },
    RelaunchDod {
        lane: String,
        key: StepKey,
    },
    FinishReceipt {
        lane: String,
    },
    Retry {
        lane: String,
        reason: String,
        crashed: bool,
    },
    Block {
        lane: String,
        reason: String,
    },
    /// No agent may start: the run's budget is spent (SPEC 20.12). The lane is handed back.
    OverBudget {
        lane: String,
        reason: String,
    },
    Deliver {
        lane: String,
    },
    /// Every lane is final: end the run (delivered when every lane is delivered or discarded).
    Finish,
    /// Renew the run's claims on `land.remote` before any lane moves (SPEC 24.9.1).
    RenewClaims,
    /// No lane can move until a person acts: a lane blocked or handed back holds the others
    /// (a project run, SPEC 23.6). The run is blocked, naming `lane`.
    Stall {
        lane: String,
        reason: String,
    },
    /// Make the sandbox worktree and the prompt of these validator steps (`validate-<name>`, `refute`).
    PrepareValidators {
        lane: String,
        keys: Vec<StepKey>,
    },
    LaunchValidators {
        lane: String,
        keys: Vec<StepKey>,
    },
    HandValidator {
        lane: String,
        key: StepKey,
    },
    CheckValidator {
        lane: String,
        key: StepKey,
    },
    RedoValidator {
        lane: String,
        key: StepKey,
    },
    /// A landing step done outside the lock with git or the forge (`integrate-<r>`,
    /// `landcommit-<r>`, `land-<r>`, `push-branch`, `pr-open`, `pr-arm`, `retire`).
    Sync {
        lane: String,
        step: StepKey,
    },
    /// The target moved under the landing: a new round integrates it again.
    LandAgain {
        lane: String,
    },
    /// Every validator answered (or could not): merge, mint findings, decide the round.
    Judge {
        lane: String,
    },
    FinishRefute {
        lane: String,
    },
    /// A planning move of a lane at stage `plan` (SPEC 20.16).
    Plan {
        lane: String,
        next: plan::PlanNext,
    },
    /// Start the test writer, or check what it changed (SPEC 20.17).
    Tester {
        lane: String,
        next: tester::TesterNext,
    },
}

/// The status a run's lanes give it (SPEC 23.6), for a run that is running or blocked: when every
/// lane is final, delivered (every lane delivered or discarded, one at least), handed back,
/// abandoned (every lane discarded) or blocked; otherwise blocked while no lane can move without
/// a person, running as soon as one can.
pub fn run_status(
    run: &Run,
    view: &DecideView,
    expected: &dyn Fn(usize, usize) -> Vec<i32>,
) -> RunStatus {
    if run.lanes.iter().all(|l| l.stage.is_final()) {
        let landed = |l: &&Lane| matches!(l.stage, Stage::Delivered | Stage::Discarded);
        return if run.lanes.iter().all(|l| landed(&l))
            && run.lanes.iter().any(|l| l.stage == Stage::Delivered)
        {
            RunStatus::Delivered
        } else if run.lanes.iter().any(|l| can_start_again(run, l)) {
            // A person can resume a blocked lane: the run waits for them, whatever else ended.
            RunStatus::Blocked
        } else if run.lanes.iter().any(|l| l.stage == Stage::Handback) {
            RunStatus::Handback
        } else if run.lanes.iter().all(|l| l.stage == Stage::Discarded) {
            RunStatus::Abandoned
        } else {
            RunStatus::Blocked
        };
    }
    match lanes_next(run, view, expected) {
        Next::Stall { .. } | Next::Finish => RunStatus::Blocked,
        _ => RunStatus::Running,
    }
}

/// A blocked lane that a person's resume could take further: none of its dependencies, however
/// far back, was handed back or discarded (such a lane blocks again as soon as it is resumed).
pub fn can_start_again(run: &Run, lane: &Lane) -> bool {
    fn never(run: &Run, lane: &Lane, depth: usize) -> bool {
        depth > run.lanes.len()
            || lane.depends.iter().any(|d| {
                run.lane(d).is_some_and(|dep| {
                    matches!(dep.stage, Stage::Handback | Stage::Discarded)
                        || never(run, dep, depth + 1)
                })
            })
    }
    lane.stage == Stage::Blocked && !never(run, lane, 0)
}

/// Whether a finished definition-of-done record passed, as its outcome says. `passed` is decided
/// by the loop when it records the outcome; here only its exit code is compared.
fn dod_passed(lane: &Lane, key: &StepKey, expected: &[i32]) -> Option<bool> {
    let record = lane.record(key)?;
    match record.status {
        StepStatus::Done => Some(record.outcome_as::<ActivityOutcome>()?.passed(expected)),
        _ => None,
    }
}

pub fn decide(run: &Run, view: &DecideView) -> Next {
    decide_with(run, view, &|_, _| vec![0])
}

/// `decide`, with the expected exit codes of definition-of-done command `(i, j)`.
pub fn decide_with(
    run: &Run,
    view: &DecideView,
    expected: &dyn Fn(usize, usize) -> Vec<i32>,
) -> Next {
    if run.status.is_ended() || run.status == RunStatus::Blocked {
        return Next::Ended;
    }
    if view.paused {
        return Next::Paused;
    }
    if let Some(next) = claims::next(run, view) {
        return next;
    }
    lanes_next(run, view, expected)
}

/// A lane has begun: it has a step on record, or has left its first stage.
pub fn started(lane: &Lane) -> bool {
    !lane.steps.is_empty() || lane.stage != Stage::Brief
}

/// Counts against `pace.lanes`: started and not yet past validation.
pub fn active(lane: &Lane) -> bool {
    started(lane)
        && matches!(
            lane.stage,
            Stage::Brief
                | Stage::Worktree
                | Stage::Implement
                | Stage::Receipt
                | Stage::Validate
                | Stage::Refute
        )
}

/// A lane that holds its siblings before landing: blocked or handed back, not released.
pub fn holder(run: &Run) -> Option<&Lane> {
    run.lanes
        .iter()
        .find(|l| matches!(l.stage, Stage::Blocked | Stage::Handback) && !l.released)
}

/// Whether a lane's landing has begun (a step of it is on record): a hold no longer stops it.
pub fn landing_begun(lane: &Lane) -> bool {
    lane.steps.iter().any(|r| r.step.is_landing())
}

/// The next move of the run's lanes, whatever the run's status says: the first lane, in order,
/// with something to do; else a lane that waits on an activity or the host; else, when lanes
/// remain that only a person can free, `Stall`.
pub fn lanes_next(
    run: &Run,
    view: &DecideView,
    expected: &dyn Fn(usize, usize) -> Vec<i32>,
) -> Next {
    let hold = holder(run);
    let active_count = run.lanes.iter().filter(|l| active(l)).count();
    let mut passive: Option<Next> = None;
    let mut stuck: Option<(String, String)> = None;
    for lane in &run.lanes {
        if lane.stage.is_final() {
            continue;
        }
        if !started(lane) {
            let failed_dep = lane.depends.iter().find_map(|d| {
                let dep = run.lane(d)?;
                let never = dep.stage == Stage::Discarded
                    || dep.stage == Stage::Handback
                    || (dep.stage == Stage::Blocked && dep.released);
                never.then(|| (d.clone(), dep.stage.as_str()))
            });
            if let Some((dep, stage)) = failed_dep {
                return Next::Block {
                    lane: lane.id.clone(),
                    reason: format!("it depends on `{dep}`, which is {stage} and will not deliver"),
                };
            }
            let ready = lane
                .depends
                .iter()
                .all(|d| run.lane(d).is_some_and(|l| l.stage == Stage::Delivered));
            if !ready {
                stuck.get_or_insert((lane.id.clone(), "waits for its dependencies".into()));
                continue;
            }
            if let Some(h) = hold {
                stuck.get_or_insert((
                    lane.id.clone(),
                    format!("does not start while `{}` holds the run", h.id),
                ));
                continue;
            }
            if active_count >= view.pace_lanes.max(1) {
                stuck.get_or_insert((lane.id.clone(), "waits for a free lane".into()));
                continue;
            }
            if !lane.depends.is_empty() && lane.taken_base().is_none() {
                // It starts from the target as its dependencies left it.
                if let Some(next) = sync_step(lane, view, StepKey::Base) {
                    return next;
                }
            }
            return lane_next(lane, view, expected);
        }
        if let Some(h) = hold {
            if lane.stage == Stage::Land && !landing_begun(lane) {
                stuck.get_or_insert((
                    lane.id.clone(),
                    format!("waits to land while `{}` holds the run", h.id),
                ));
                continue;
            }
        }
        if lane.stage == Stage::Brief && !lane.depends.is_empty() && lane.taken_base().is_none() {
            // A lane whose base step is in hand, was left by a call that died, or failed: the
            // base first, never past it. Once taken, a later attempt keeps it.
            if let Some(next) = sync_step(lane, view, StepKey::Base) {
                return next;
            }
        }
        let next = across::one_landing_at_a_time(run, lane, lane_next(lane, view, expected));
        let waits = match &next {
            Next::Wait { .. } => true,
            // Handed to the host already: asked again only when nothing else can act.
            Next::HandToHost { .. } => lane.record(&StepKey::Implement).is_some(),
            Next::HandValidator { key, .. } => lane
                .record(key)
                .and_then(|r| r.outcome_as::<ValidatorOutcome>())
                .is_some_and(|o| o.handed),
            _ => false,
        };
        if waits {
            passive.get_or_insert(next);
            continue;
        }
        return next;
    }
    if let Some(next) = passive {
        return next;
    }
    if run.lanes.iter().all(|l| l.stage.is_final()) {
        return Next::Finish;
    }
    match (hold, stuck) {
        (Some(h), _) => Next::Stall {
            lane: h.id.clone(),
            reason: format!(
                "lane `{}` is {}{}; the other lanes wait before landing",
                h.id,
                h.stage.as_str(),
                h.reason
                    .as_deref()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default()
            ),
        },
        (None, Some((lane, why))) => Next::Stall {
            lane: lane.clone(),
            reason: format!("lane `{lane}` {why}, and no lane can move"),
        },
        (None, None) => Next::Finish,
    }
}

/// The next move of one lane that has started (or may start now).
fn lane_next(lane: &Lane, view: &DecideView, expected: &dyn Fn(usize, usize) -> Vec<i32>) -> Next {
    let id = lane.id.clone();
    let crash_budget_left = lane.crashes < view.max_crash_retries;
    match lane.stage {
        Stage::Plan => plan::lane_next(lane, view),
        Stage::Brief => Next::RenderBrief { lane: id },
        Stage::Worktree => match lane.steps.iter().find(|r| r.step == StepKey::Worktree) {
            Some(r) if in_hand(r) => Next::Wait {
                lane: id,
                why: Waiting::MakingWorktree,
            },
            Some(r) if r.status == StepStatus::Failed => Next::Block {
                lane: id,
                reason: "the worktree could not be made".into(),
            },
            _ => Next::AddWorktree { lane: id },
        },
        Stage::Implement => match (view.driver, lane.record(&StepKey::Implement)) {
            // Handed to the host already: asked again, the same answer (SPEC 20.2), whatever the
            // pace says now.
            (Driver::Host, Some(_)) if !lane.is_done(&StepKey::Implement) => {
                Next::HandToHost { lane: id }
            }
            // No new implementer once the budget is spent (SPEC 20.12), by either driver.
            (_, None) if over_budget(lane, view).is_some() => {
                over_budget(lane, view).expect("checked by the guard")
            }
            // A new implementer, by either driver, keeps the pace (SPEC 20.9, 20.10, 24.8).
            (_, None) if launch_waits(view).is_some() => Next::Wait {
                lane: id,
                why: launch_waits(view).expect("checked by the guard"),
            },
            (Driver::Host, None) => Next::HandToHost { lane: id },
            (_, Some(r)) if r.status == StepStatus::Failed && backs_off(r) => Next::Requeue {
                lane: id,
                key: StepKey::Implement,
            },
            (Driver::Process, None) => Next::LaunchImplementer { lane: id },
            (_, Some(r)) if r.status == StepStatus::Started => Next::Wait {
                lane: id,
                why: Waiting::ImplementerRunning,
            },
            (_, Some(r)) if r.status == StepStatus::Failed => {
                // A remote lane branch not published (SPEC 20.19) is a person's, not a crash.
                if let Some(reason) = remote_failed(r) {
                    Next::Block { lane: id, reason }
                } else if crash_budget_left {
                    Next::Retry {
                        lane: id,
                        reason: format!("attempt {} crashed", lane.attempt),
                        crashed: true,
                    }
                } else {
                    Next::Block {
                        lane: id,
                        reason: format!(
                            "the implementer crashed and the crash budget ({}) is spent",
                            view.max_crash_retries
                        ),
                    }
                }
            }
            _ => Next::CheckReceipt { lane: id },
        },
        Stage::Receipt => receipt(lane, view, expected, crash_budget_left),
        Stage::Validate => {
            let keys: Vec<StepKey> = view
                .validators
                .get(&lane.id)
                .into_iter()
                .flatten()
                .map(|v| StepKey::Validate(v.clone()))
                .collect();
            validators(lane, view, &keys, crash_budget_left).unwrap_or(Next::Judge { lane: id })
        }
        Stage::Refute => validators(lane, view, &[StepKey::Refute], crash_budget_left)
            .unwrap_or(Next::FinishRefute { lane: id }),
        Stage::Deliver => match lane.record(&StepKey::Deliver) {
            Some(r) if in_hand(r) => Next::Wait {
                lane: id,
                why: Waiting::Delivering,
            },
            Some(r)
                if r.status == StepStatus::Failed
                    && r.outcome_as::<DeliverOutcome>()
                        .is_some_and(|o| o.moved.is_some()) =>
            {
                moved(lane, view, r)
            }
            Some(r) if r.status == StepStatus::Failed => Next::Block {
                lane: id,
                reason: "delivering failed".into(),
            },
            _ => Next::Deliver { lane: id },
        },
        Stage::Land => land(lane, view, expected, crash_budget_left),
        // A person asked for the open pull request to be armed: that first (SPEC 23.2).
        Stage::Retire if lane.arm_requested && !view.arm_auto && lane.is_done(&StepKey::PrOpen) => {
            sync_step(lane, view, StepKey::PrArm)
                .or_else(|| sync_step(lane, view, StepKey::Retire))
                .unwrap_or(Next::Wait {
                    lane: id,
                    why: Waiting::Landed,
                })
        }
        Stage::Retire => sync_step(lane, view, StepKey::Retire).unwrap_or(Next::Wait {
            lane: id,
            why: Waiting::Landed,
        }),
        Stage::Delivered | Stage::Blocked | Stage::Handback | Stage::Discarded => Next::Ended,
    }
}

/// What the validator steps `keys` of a lane need next, or None when every one has answered.
fn validators(
    lane: &Lane,
    view: &DecideView,
    keys: &[StepKey],
    crash_budget_left: bool,
) -> Option<Next> {
    let id = lane.id.clone();
    let mut prepare = Vec::new();
    let mut launch = Vec::new();
    let mut hand = None;
    // A validator handed to the host and not yet answered: asked again, the same answer.
    let mut handed = None;
    let mut waiting = false;
    for key in keys {
        let Some(record) = lane.record(key) else {
            prepare.push(key.clone());
            continue;
        };
        let said = record.outcome_as::<ValidatorOutcome>().unwrap_or_default();
        match record.status {
            StepStatus::Done => {}
            StepStatus::Failed if said.moved.is_some() => return Some(moved(lane, view, record)),
            StepStatus::Failed => {
                let mutated = said.mutation.is_some();
                return Some(if mutated && lane.mutations >= view.max_mutations {
                    Next::Block {
                        lane: id,
                        // `mutations` counts the answers already thrown away and run again;
                        // this one is thrown away too.
                        reason: format!("`{key}` changed its tree; this lane's validators have changed theirs {} times, more than max_mutations ({}) allows, and each such answer was thrown away", lane.mutations + 1, view.max_mutations),
                    }
                } else if !mutated && !crash_budget_left && !backs_off(record) {
                    Next::Block {
                        lane: id,
                        reason: format!("`{key}` crashed and the crash budget is spent"),
                    }
                } else {
                    Next::RedoValidator {
                        lane: id,
                        key: key.clone(),
                    }
                });
            }
            StepStatus::Started if said.finished.as_ref().is_some_and(|f| !f.is_null()) => {
                if in_hand(record) {
                    waiting = true;
                } else {
                    return Some(Next::CheckValidator {
                        lane: id,
                        key: key.clone(),
                    });
                }
            }
            StepStatus::Started if !said.prepared => {
                if in_hand(record) {
                    waiting = true;
                } else {
                    prepare.push(key.clone());
                }
            }
            StepStatus::Started => match view.validator_driver {
                Driver::Process if record.nonce.is_none() => launch.push(key.clone()),
                Driver::Host if !said.handed => {
                    hand.get_or_insert_with(|| key.clone());
                }
                Driver::Host => {
                    handed.get_or_insert_with(|| key.clone());
                }
                _ => waiting = true,
            },
        }
    }
    // A new agent (launched, or handed to the host) keeps the budget (SPEC 20.12): none is
    // prepared, launched or handed out once it is spent.
    // Those of the lane still working are waited for first: the handback leaves none running.
    if !(prepare.is_empty() && launch.is_empty() && hand.is_none()) {
        if let Some(over) = over_budget(lane, view) {
            if !waiting && handed.is_none() {
                return Some(over);
            }
            prepare.clear();
            launch.clear();
            hand = None;
        }
    }
    // A new agent (launched, or handed to the host) keeps the pace; one handed already does not.
    let wait = launch_waits(view);
    if !prepare.is_empty() {
        Some(
            match view.paced_until.clone().filter(|_| view.remote_validators) {
                Some(until) => Next::Wait {
                    lane: id,
                    why: Waiting::Paced { until },
                },
                None => Next::PrepareValidators {
                    lane: id,
                    keys: prepare,
                },
            },
        )
    } else if !launch.is_empty() {
        if let Some(why) = wait {
            return Some(Next::Wait { lane: id, why });
        }
        // As many as fit under the ceiling; the rest wait their turn.
        launch.truncate(view.pace_agents.saturating_sub(view.agents_alive));
        Some(Next::LaunchValidators {
            lane: id,
            keys: launch,
        })
    } else if let Some(key) = hand.clone().filter(|_| wait.is_none()) {
        Some(Next::HandValidator { lane: id, key })
    } else if let Some(key) = handed.filter(|_| !waiting) {
        Some(Next::HandValidator { lane: id, key })
    } else if let Some(why) = hand.and(wait) {
        Some(Next::Wait { lane: id, why })
    } else if waiting {
        Some(Next::Wait {
            lane: id,
            why: if keys == [StepKey::Refute] {
                Waiting::RefuterWorking
            } else {
                Waiting::ValidatorsWorking
            },
        })
    } else {
        None
    }
}

/// The lane moved after it was judged (SPEC 24.3): nothing of it is validated or delivered; a new
/// attempt judges everything again, or, with the attempts spent, the lane blocks naming the
/// commits.
fn moved(lane: &Lane, view: &DecideView, record: &super::state::StepRecord) -> Next {
    // A deliver step and a validator step both record `moved` the same way.
    let moved = record
        .outcome_as::<DeliverOutcome>()
        .and_then(|o| o.moved)
        .unwrap_or_default();
    let commits = moved.commits;
    let short = |s: &str| {
        let s = if s.is_empty() { "?" } else { s };
        s[..s.len().min(12)].to_owned()
    };
    let reason = format!(
        "the lane moved after it was judged: the verdict is about {}, the branch is at {}{}; nothing unjudged lands",
        short(&moved.judged),
        short(&moved.head),
        if commits.is_empty() {
            String::new()
        } else {
            format!(" (added: {})", commits.join("; "))
        }
    );
    if lane.attempts_spent() >= view.max_attempts {
        Next::Block {
            lane: lane.id.clone(),
            reason,
        }
    } else {
        Next::Retry {
            lane: lane.id.clone(),
            reason: format!("{reason}; this attempt judges the branch as it is now"),
            crashed: false,
        }
    }
}

/// The lane is handed back when the run's charge has reached its budget (SPEC 20.12): no new
/// agent starts. The reason says the charge, what unknown costs counted, and the remedy.
fn over_budget(lane: &Lane, view: &DecideView) -> Option<Next> {
    let spend = view.budget?;
    if spend.charged_usd < spend.budget_usd {
        return None;
    }
    let unknown = match spend.unknown {
        0 => String::new(),
        1 => format!(
            ", 1 agent of unknown cost counted at ${} (pace.unknownCostUsd)",
            spend.unknown_cost_usd
        ),
        n => format!(
            ", {n} agents of unknown cost counted at ${} each (pace.unknownCostUsd)",
            spend.unknown_cost_usd
        ),
    };
    Some(Next::OverBudget {
        lane: lane.id.clone(),
        reason: format!(
            "the run's budget is spent: ${} charged of ${}{unknown}, so no agent starts; raise `pace.budgetUsd` or give `--budget-usd`, then `iced build {}` again",
            spend.charged_usd, spend.budget_usd, lane.unit
        ),
    })
}

/// Landing a delivered lane, by `land.mode`.
fn land(
    lane: &Lane,
    view: &DecideView,
    expected: &dyn Fn(usize, usize) -> Vec<i32>,
    crash_budget_left: bool,
) -> Next {
    let id = lane.id.clone();
    if view.land_mode == super::settings::LandMode::Pr {
        let mut steps = vec![StepKey::PushBranch, StepKey::PrOpen];
        if view.arm_auto {
            steps.push(StepKey::PrArm);
        }
        for step in steps {
            if let Some(next) = sync_step(lane, view, step) {
                return next;
            }
        }
        // Every pull-request step done, the lane still here (a person resumed it after its
        // retire failed): retiring is what is left, and it waits until the request has merged.
        return sync_step(lane, view, StepKey::Retire).unwrap_or(Next::Wait {
            lane: id,
            why: Waiting::PullRequestOpen,
        });
    }
    let round = lane.land_round.max(1);
    let integrate = StepKey::Integrate(round);
    if let Some(next) = sync_step(lane, view, integrate.clone()) {
        return next;
    }
    let merged = lane
        .record(&integrate)
        .and_then(|r| r.outcome_as::<LandOutcome>())
        .is_some_and(|o| o.merged);
    if merged {
        // The target's changes came into the lane: untested code never lands.
        let retest = DodRun::Retest(round);
        if let Some(next) = dod(lane, view, expected, crash_budget_left, retest) {
            return next;
        }
        if !dod_all_passed(lane, view, expected, retest) {
            return Next::Block {
                lane: id,
                reason: "with the target's changes merged in, the definition of done fails; the lane's branch holds the merge".into(),
            };
        }
    }
    for step in [StepKey::LandCommit(round), StepKey::Land(round)] {
        if let Some(next) = sync_step(lane, view, step) {
            return next;
        }
    }
    Next::Wait {
        lane: id,
        why: Waiting::Landed,
    }
}

/// A synchronous step some call has started and is still doing. The stepper (observing) clears the owner of a
/// record whose process died (while observing, before `decide`), so such a record is redone.
fn in_hand(record: &super::state::StepRecord) -> bool {
    record.status == StepStatus::Started && record.pid.is_some()
}

/// The definition-of-done commands of a lane in run `which` (its keys, `which.key(i, j)`): what to launch,
/// wait for, or relaunch; None when every one that should run has finished.
fn dod(
    lane: &Lane,
    view: &DecideView,
    expected: &dyn Fn(usize, usize) -> Vec<i32>,
    crash_budget_left: bool,
    which: DodRun,
) -> Option<Next> {
    let id = lane.id.clone();
    let mut launch = Vec::new();
    let mut running = false;
    for (i, &len) in view.dod_shape.iter().enumerate() {
        // Sequential definition of done: an entry starts only when every earlier one finished.
        if !view.dod_parallel && (!launch.is_empty() || running) {
            break;
        }
        for j in 0..len {
            let key = which.key(i, j);
            match lane.record(&key) {
                None => {
                    launch.push((i, j));
                    break;
                }
                Some(r) if r.status == StepStatus::Started => {
                    running = true;
                    break;
                }
                Some(r) if r.status == StepStatus::Failed => {
                    return Some(if crash_budget_left {
                        Next::RelaunchDod { lane: id, key }
                    } else {
                        Next::Block {
                            lane: id,
                            reason: format!("`{key}` crashed and the crash budget is spent"),
                        }
                    });
                }
                Some(_) => {
                    if dod_passed(lane, &key, &expected(i, j)) != Some(true) {
                        // A sequence stops at its first failure.
                        break;
                    }
                }
            }
        }
    }
    if !launch.is_empty() {
        Some(Next::LaunchDod {
            lane: id,
            run: which,
            slots: launch,
        })
    } else if running {
        Some(Next::Wait {
            lane: id,
            why: Waiting::DodRunning,
        })
    } else {
        None
    }
}

/// Did every definition-of-done command of run `which` pass (a sequence that stopped early fails)?
pub fn dod_all_passed(
    lane: &Lane,
    view: &DecideView,
    expected: &dyn Fn(usize, usize) -> Vec<i32>,
    which: DodRun,
) -> bool {
    view.dod_shape.iter().enumerate().all(|(i, &len)| {
        (0..len).all(|j| dod_passed(lane, &which.key(i, j), &expected(i, j)) == Some(true))
    })
}

fn receipt(
    lane: &Lane,
    view: &DecideView,
    expected: &dyn Fn(usize, usize) -> Vec<i32>,
    crash_budget_left: bool,
) -> Next {
    let id = lane.id.clone();
    let Some(record) = lane.record(&StepKey::Receipt) else {
        return Next::CheckReceipt { lane: id };
    };
    let Some(checks) = record.outcome_as::<ReceiptOutcome>() else {
        return if in_hand(record) {
            Next::Wait {
                lane: id,
                why: Waiting::CheckingReceipt,
            }
        } else {
            Next::CheckReceipt { lane: id }
        };
    };
    // The remote could not be reached (SPEC 20.19): checked again once the backoff has passed.
    if checks.unreachable.is_some() {
        return match view.paced_until.clone() {
            Some(until) => Next::Wait {
                lane: id,
                why: Waiting::Unreachable {
                    step: StepKey::Receipt,
                    until,
                },
            },
            None => Next::CheckReceipt { lane: id },
        };
    }
    if checks.ends_at_checks() {
        return Next::FinishReceipt { lane: id };
    }
    // The test writer once the receipt's own checks passed, before the definition of done.
    if view.test_writer && checks.missing.is_empty() && lane.review.is_none() {
        if let Some(next) = tester::lane_next(lane, view) {
            return next;
        }
    }
    dod(lane, view, expected, crash_budget_left, DodRun::Receipt)
        .unwrap_or(Next::FinishReceipt { lane: id })
}

mod across;
/// The run's claims on `land.remote`: lost ones block, due ones are renewed (SPEC 24.9.1).
mod claims;
/// Where a lane goes once a step's result is in, and what a resume does to it.
pub mod moves;
pub mod plan;
pub mod tester;
pub use moves::*;

#[cfg(test)]
mod props;
#[cfg(test)]
mod tester_tests;
#[cfg(test)]
mod tests;
