//! Which agents are alive (SPEC 20.9): launches recorded and not yet ended, of the implementer
//! under the process driver and of validators run by a runner, and the agents handed to a host.

use super::ctx::Ctx;
use super::state::{Driver, Run, StepStatus};
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
