//! The implement step under the process driver (SPEC 20.4, 20.8): the implementer of an attempt,
//! started through the implementer runner in the lane's worktree with the attempt's brief, as an
//! activity; logged alive before it starts. (Under the host driver the agent is handed to the host:
//! `run::host`.)

use crate::refusal::Refusal;
use crate::run::backoff::Backoff;
use crate::run::ctx::Ctx;
use crate::run::events::{emit, Event};
use crate::run::keys::StepKey;
use crate::run::launch::{agent_spec, gate_value, launch as start, AgentStart};
use crate::run::records::{finish, record_after_in_run};
use crate::run::reply::Action;
use crate::run::reply::StepReport;
use crate::run::stage::remote::Unpublished;
use crate::run::state::Run;
use crate::run::state::StepStatus;
use crate::run::then::Then;
use serde_json::json;
use std::path::PathBuf;

/// Start the implementer of `lane`'s attempt, whose `implement` record holds `nonce`.
pub(crate) fn launch(
    ctx: &Ctx<'_>,
    snapshot: &Run,
    lane: String,
    nonce: String,
) -> Result<StepReport, Refusal> {
    let l = snapshot.lane(&lane).expect("lane");
    let runner = ctx
        .settings
        .implementer
        .as_ref()
        .expect("the process driver has a runner");
    let worktree = PathBuf::from(l.worktree.clone().unwrap_or_default());
    let receipt = ctx.receipt_path(snapshot, &lane, l.attempt);
    let brief = ctx.brief_path(&snapshot.id, &lane, l.attempt);
    let model = ctx.settings.implementer_model.clone().unwrap_or_default();
    let mut values: Vec<(&str, String)> = vec![
        ("prompt_file", brief.display().to_string()),
        ("output_file", receipt.display().to_string()),
        ("worktree", worktree.display().to_string()),
        ("role", "implementer".into()),
        ("model", model.clone()),
        ("run", snapshot.id.clone()),
        ("lane", lane.clone()),
        ("attempt", l.attempt.to_string()),
    ];
    if runner.remote {
        // The lane's head on the remote first (SPEC 20.19); a branch the run may not overwrite
        // blocks the lane, a remote that cannot be reached is tried again after a backoff.
        let branch = l.branch.clone().unwrap_or_default();
        let published = crate::git::run(&worktree, &["rev-parse", "--verify", "HEAD^{commit}"])
            .map_err(Unpublished::refused)
            .and_then(|head| {
                crate::run::stage::remote::publish(ctx, &snapshot.id, &lane, &branch, &head)
                    .map(|()| head)
            });
        match published {
            Ok(head) => values.extend(crate::run::stage::remote::values(ctx, snapshot, l, &head)),
            Err(Unpublished { why, unreachable }) => {
                return record_after_in_run(
                    ctx,
                    &snapshot.id,
                    &lane,
                    &StepKey::Implement,
                    |run, r| {
                        let (outcome, then) = if unreachable {
                            crate::run::backoff::pace_after(ctx, run, Backoff::Unreachable(&why));
                            (
                            json!({ "remote": why, "unreachable": true }),
                            format!("the lane branch was not published: {why}; the run backs off: call again"),
                        )
                        } else {
                            (json!({ "remote": why }), format!("remote: {why}"))
                        };
                        finish(r, StepStatus::Failed, outcome);
                        // Nothing was launched: no agent to count or to cost.
                        r.nonce = None;
                        Ok((Action::Advanced, Then::Reason(then)))
                    },
                );
            }
        }
    }
    crate::run::stage::worktree::clear_git_locks_for_agent(
        ctx,
        &snapshot.id,
        l,
        "implement",
        &worktree,
    );
    let dir = ctx.activity_dir(&snapshot.id, &lane, &StepKey::Implement, l.attempt);
    let spec = agent_spec(
        ctx,
        runner,
        &values,
        AgentStart {
            read_only: false,
            nonce: &nonce,
            model: ctx.settings.implementer_model.as_deref(),
            effort: None,
            prompt: &brief,
            cwd: worktree,
            gate: gate_value(ctx, &snapshot.id, &lane, &StepKey::Implement, l.attempt),
            dir: &dir,
        },
    )?;
    crate::failpoint::hit("launch-after-record");
    // Before the launch: an agent may be counted alive that never started (its end is
    // logged when the loop finds it crashed), never one that runs uncounted.
    emit(
        &ctx.paths,
        &snapshot.id,
        Event::AgentStart,
        crate::run::launch::start_fields(
            &spec,
            runner,
            json!({"lane": lane, "attempt": l.attempt, "role": "implementer", "runner": runner.name}),
        ),
    );
    start(ctx, &dir, &spec)?;
    crate::failpoint::hit("launch-after-spawn");
    Ok(StepReport::for_lane(
        snapshot,
        l,
        Action::Waiting,
        Then::ImplementerRunning,
    ))
}
