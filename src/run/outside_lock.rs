//! The work a step does outside the state lock (git, files, launching an agent or a command), then
//! its outcome recorded if the step is still current (`records::record_after`).

use super::events::{emit, Event};
use super::state::{Run, StepStatus};
use crate::activity::ActivitySpec;
use crate::refusal::Refusal;
use crate::run::ctx::*;
use crate::run::keys::StepKey;
use crate::run::launch::*;
use crate::run::records::*;
use crate::run::reply::Action;
use crate::run::reply::*;
use crate::run::settings::Arm;
use crate::run::stage::receipt::*;
use crate::run::stage::worktree::*;
use crate::run::then::Then;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// What phase 1 left for phase 2.
pub(crate) enum Pending {
    /// Nothing left to do; report this.
    Report(Box<StepReport>),
    AddWorktree {
        lane: String,
        /// The spare worktree the step took under the lock (SPEC 23.2), when it took one.
        spare: Option<PathBuf>,
    },
    LaunchImplementer {
        lane: String,
        nonce: String,
    },
    CheckReceipt {
        lane: String,
    },
    LaunchDod {
        lane: String,
        keys: Vec<(StepKey, usize, usize, String)>,
    },
    Deliver {
        lane: String,
    },
    Sync {
        lane: String,
        step: StepKey,
    },
    PrepareValidators {
        lane: String,
        keys: Vec<StepKey>,
    },
    LaunchValidators {
        lane: String,
        keys: Vec<(StepKey, String)>,
    },
    CheckValidator {
        lane: String,
        key: StepKey,
    },
    /// Renew the run's claims on `land.remote` (SPEC 24.9.1).
    RenewClaims,
    /// A planning step (SPEC 20.16).
    Plan(crate::run::stage::plan::PlanPending),
    /// The test writer's launch, and the check of what it changed (SPEC 20.17).
    TesterLaunch {
        lane: String,
        nonce: String,
    },
    TesterCheck {
        lane: String,
    },
}

/// Phase 2: the side effect, outside the lock; then record its outcome if still current.
pub(crate) fn act(ctx: &Ctx<'_>, snapshot: &Run, pending: Pending) -> Result<StepReport, Refusal> {
    if !matches!(pending, Pending::Report(_)) {
        if let Some(why) = crate::failpoint::refused_on_helper("act") {
            return Err(crate::refusal::io_error(ctx.verb, why));
        }
    }
    match pending {
        Pending::Report(report) => Ok(*report),
        Pending::RenewClaims => super::stage::claims::renew(ctx, snapshot),
        Pending::AddWorktree { lane, spare } => {
            let branch = snapshot
                .lane(&lane)
                .and_then(|l| l.branch.clone())
                .expect("a lane has a branch");
            let path = ctx.worktree_path(&lane);
            let base = snapshot
                .base_of(snapshot.lane(&lane).expect("lane"))
                .to_owned();
            let result = make_or_reuse(
                ctx,
                (&snapshot.id, &lane),
                spare.as_deref(),
                &path,
                &branch,
                &base,
            );
            crate::failpoint::hit("worktree-after-add");
            record_after(ctx, &snapshot.id, &lane, &StepKey::Worktree, |l, record| {
                let mv = super::decide::after_worktree_of(
                    l,
                    result.as_ref().map(|_| ()).map_err(String::as_str),
                );
                // A review lane's reviewers are fixed as it goes to them (SPEC 20.14, 22.1).
                if mv == super::decide::LaneMove::To(crate::run::state::Stage::Validate)
                    && l.validators.is_empty()
                {
                    l.validators = crate::run::stage::validators::validators_for(ctx, l);
                }
                let said = match &result {
                    Ok(made) => {
                        let mut outcome = json!({"path": path, "branch": branch});
                        let aside = match made {
                            Made::FromSpare { moved_aside } => {
                                outcome["spare"] = json!(spare);
                                moved_aside
                            }
                            Made::Added { moved_aside } => moved_aside,
                        };
                        if let Some(aside) = aside {
                            outcome["moved_aside"] = aside.as_str().into();
                        }
                        finish(record, StepStatus::Done, outcome);
                        l.worktree = Some(path.display().to_string());
                        (Action::Advanced, Then::WorktreeReady)
                    }
                    Err(e) => {
                        finish(record, StepStatus::Failed, json!({"error": e}));
                        (Action::Blocked, Then::WorktreeFailed { error: e.clone() })
                    }
                };
                apply_move(ctx, &snapshot.id, l, mv)?;
                Ok(said)
            })
        }
        Pending::LaunchImplementer { lane, nonce } => {
            crate::run::stage::implement::launch(ctx, snapshot, lane, nonce)
        }
        Pending::LaunchDod { lane, keys } => {
            let l = snapshot.lane(&lane).expect("lane");
            let worktree = PathBuf::from(l.worktree.clone().unwrap_or_default());
            for (key, i, j, nonce) in keys {
                let command = &ctx.settings.dod[i][j];
                let cwd = match &command.cwd {
                    Some(c) => worktree.join(c),
                    None => worktree.clone(),
                };
                let dir = ctx.activity_dir(&snapshot.id, &lane, &key, l.attempt);
                let spec = ActivitySpec {
                    argv: command.argv.clone(),
                    cwd,
                    env: base_env(),
                    timeout_ms: command.timeout.as_millis() as u64,
                    grace_ms: ctx.settings.kill_grace.as_millis() as u64,
                    nonce,
                    gate: gate_value(ctx, &snapshot.id, &lane, &key, l.attempt),
                    stdin: None,
                    inherit_prefixes: Vec::new(),
                    env_templates: BTreeMap::new(),
                    confine: None,
                    discard: Vec::new(),
                };
                launch(ctx, &dir, &spec)?;
                crate::failpoint::hit("dod-after-launch");
                emit(
                    &ctx.paths,
                    &snapshot.id,
                    Event::StepStart,
                    json!({"lane": lane, "step": key, "attempt": l.attempt, "command": command.display()}),
                );
            }
            Ok(StepReport::for_lane(
                snapshot,
                l,
                Action::Waiting,
                Then::DodRunning,
            ))
        }
        Pending::CheckReceipt { lane } => {
            let l = snapshot.lane(&lane).expect("lane");
            let checks = receipt_checks(ctx, snapshot, l);
            let unreachable = checks
                .get("unreachable")
                .and_then(serde_json::Value::as_str);
            record_after_in_run(
                ctx,
                &snapshot.id,
                &lane,
                &StepKey::Receipt,
                |run, record| {
                    record.outcome = Some(checks.clone());
                    crate::failpoint::hit("receipt-after-record");
                    let Some(why) = unreachable else {
                        return Ok((Action::Advanced, Then::ReceiptChecksRecorded));
                    };
                    super::backoff::pace_after(ctx, run, super::backoff::Backoff::Unreachable(why));
                    Ok((
                    Action::Advanced,
                    Then::Reason(format!("what the agent pushed was not fetched: {why}; the run backs off, then checks it again: call again")),
                ))
                },
            )
        }
        Pending::Sync { lane, step } => {
            let l = snapshot.lane(&lane).expect("lane");
            let done = super::stage::land::perform(ctx, snapshot, l, &step);
            let unreachable = done.outcome["unreachable"].as_str();
            record_after_in_run(ctx, &snapshot.id, &lane, &step, |run, record| {
                if let Some(why) = unreachable {
                    super::backoff::pace_after(ctx, run, super::backoff::Backoff::Unreachable(why));
                }
                let l = run.lane_mut(&lane).expect("lane");
                finish(record, done.status, done.outcome.clone());
                if done.status == StepStatus::Done {
                    if let Some(mv) =
                        super::decide::after_land_step(&step, ctx.settings.land.arm == Arm::Auto)
                    {
                        apply_move(ctx, &snapshot.id, l, mv)?;
                    }
                }
                if let Some(reason) = &done.reason {
                    l.reason = Some(reason.clone());
                }
                Ok((done.action, Then::Landing(done.next.clone())))
            })
        }
        Pending::PrepareValidators { lane, keys } => {
            super::stage::validators::prepare(ctx, snapshot, &lane, &keys)
        }
        Pending::LaunchValidators { lane, keys } => {
            super::stage::validators::launch_all(ctx, snapshot, &lane, &keys)
        }
        Pending::CheckValidator { lane, key } => {
            super::stage::validators::check(ctx, snapshot, &lane, &key)
        }
        Pending::Deliver { lane } => super::stage::deliver::step(ctx, snapshot, &lane),
        Pending::TesterLaunch { lane, nonce } => {
            super::stage::tester::launch(ctx, snapshot, &lane, &nonce)
        }
        Pending::TesterCheck { lane } => super::stage::tester::check(ctx, snapshot, &lane),
        Pending::Plan(plan) => {
            use crate::run::stage::plan::{self, PlanPending};
            match plan {
                PlanPending::Launch { lane, keys } => plan::launch(ctx, snapshot, &lane, keys),
                PlanPending::Check { lane, key } => plan::check(ctx, snapshot, &lane, key),
                PlanPending::Decide { lane } => plan::decide(ctx, snapshot, &lane),
            }
        }
    }
}
