//! Which agents are alive (SPEC 20.9): launches recorded and not yet ended, of the implementer
//! under the process driver and of validators run by a runner, and the agents handed to a host;
//! and stopping what a lane still runs.

use super::ctx::Ctx;
use super::state::{Driver, Lane, Run, StepStatus};
use crate::activity::{self, Observation};
use crate::run::keys::StepKey;

/// The agents of `run` alive now (SPEC 20.9): its launches recorded and not yet ended, of the
/// implementer under the process driver and of validators run by a runner, and the agents handed
/// to the host and not yet answered (SPEC 24.8). With `check`, a launch whose supervisor is gone
/// or finished (not yet observed by a step of that run) does not count.
pub(crate) fn agents_alive(ctx: &Ctx<'_>, run: &Run, check: bool) -> usize {
    let mut alive = super::host::alive(run);
    for lane in &run.lanes {
        for r in lane.steps.iter().filter(|r| {
            r.status == StepStatus::Started && r.nonce.is_some() && r.attempt == lane.attempt
        }) {
            let agent = (r.step == StepKey::Implement && run.driver == Driver::Process)
                || r.step.runs_once()
                || (r.step.is_validator()
                    && ctx.settings.validator.is_some()
                    && r.outcome
                        .as_ref()
                        .is_none_or(|o| o.get("finished").is_none()));
            if !agent {
                continue;
            }
            if check {
                let dir = ctx.activity_dir(&run.id, &lane.id, &r.step, r.attempt);
                if matches!(
                    activity::observe(&dir),
                    Observation::Finished(_) | Observation::Gone
                ) {
                    continue;
                }
            }
            alive += 1;
        }
    }
    alive
}

/// Stop every activity of a lane that is still running, and what its dead supervisors left.
pub(crate) fn stop_activities(ctx: &Ctx<'_>, run_id: &str, lane: &Lane) {
    for record in lane
        .steps
        .iter()
        .filter(|r| r.status == StepStatus::Started && r.nonce.is_some())
    {
        let dir = ctx.activity_dir(run_id, &lane.id, &record.step, record.attempt);
        // A running supervisor stops its child itself, with the grace of its stop sequence (a
        // remote runner cancels its job in it, SPEC 20.19) and no survivor after (SPEC 24.7);
        // only what a supervisor that is gone left is killed here.
        if matches!(
            activity::observe(&dir),
            activity::Observation::Running { .. }
        ) {
            let _ = activity::stop(&dir);
        } else {
            activity::kill_orphans(&dir);
        }
    }
}
