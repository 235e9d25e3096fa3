//! `iced_submit` (SPEC 20.18): an implementer's lane report handed over as a value, checked by the
//! rules `implement receipt` applies at once (`report::check_bytes`, the attempt waiting for it)
//! and written where that attempt's report goes. It records nothing: the receipt (a host's, or the
//! process driver's when its agent ends) reads the file as it reads one the agent wrote itself.

use super::keys::StepKey;
use super::report;
use super::state::{Lane, Stage, State, StepStatus};
use super::Ctx;
use crate::refusal::Refusal;
use crate::repo::store_refusal;
use std::path::PathBuf;

/// Where a submitted report went.
pub struct Submitted {
    pub run: String,
    pub lane: String,
    pub attempt: u32,
    pub path: PathBuf,
}

/// The lane `lane` of `run` while its current attempt's implementer is at work (the only time
/// the receipt takes a report, SPEC 20.2): `mcp-lane-unknown` when the state holds no such lane,
/// `receipt-superseded` when it is not waiting for a report. With it, the run's brief layout,
/// which says where the report goes (SPEC 21.1).
pub fn implementing(ctx: &Ctx<'_>, run: &str, lane: &str) -> Result<(Lane, u32), Refusal> {
    let state = State::load(&ctx.paths, ctx.verb)?;
    let layout = state.runs.get(run).map_or(1, |r| r.brief_layout);
    let found = state
        .runs
        .get(run)
        .and_then(|r| r.lane(lane))
        .ok_or_else(|| {
            ctx.refuse(
                "mcp-lane-unknown",
                format!("the state holds no lane `{lane}` of run `{run}`"),
                "start the server with the lane's `--run` and `--lane` (or ICED_RUN and ICED_LANE), as `iced run show` names them",
            )
        })?;
    let waiting = found.stage == Stage::Implement
        && found
            .record(&StepKey::Implement)
            .is_some_and(|r| r.status == StepStatus::Started);
    if !waiting {
        return Err(ctx.refuse(
            "receipt-superseded",
            format!(
                "lane `{lane}` is not waiting for a report (it is at {}, attempt {})",
                found.stage.as_str(),
                found.attempt
            ),
            "stop: this attempt is over; the loop starts a fresh agent when one is needed",
        ));
    }
    Ok((found.clone(), layout))
}

/// Check `bytes` as the report of `lane` of `run` and write it to the current attempt's report
/// path. Every check comes before the write; a refusal leaves the file as it was.
pub fn submit(ctx: &Ctx<'_>, run: &str, lane: &str, bytes: &[u8]) -> Result<Submitted, Refusal> {
    let (found, layout) = implementing(ctx, run, lane)?;
    if let Err(p) = report::check_bytes(bytes) {
        let remedy = p.remedy();
        return Err(ctx.refuse(p.code, p.message, remedy));
    }
    let path = ctx.receipt_path_of(run, layout, lane, found.attempt);
    crate::run::state::ensure_dir(path.parent().expect("a report's folder"), ctx.verb)?;
    crate::store::write_atomic(&path, bytes, 0o600).map_err(|e| store_refusal(ctx.verb, e))?;
    Ok(Submitted {
        run: run.to_owned(),
        lane: lane.to_owned(),
        attempt: found.attempt,
        path,
    })
}
