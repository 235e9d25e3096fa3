//! A project run's ended lanes (SPEC 21.2): each delivered or discarded lane of a run of several
//! is written whole to `.iced/run/<run>/<lane>/lane.json` before the state keeps only its ended
//! form, so the state's size follows the lanes alive and waiting; and read back whole for what
//! needs more than that form (what a person reads, the run record, retiring, a run's end).

use super::state::{ensure_dir, Lane, Run, RunPaths, State};
use crate::refusal::Refusal;

/// A lane's file is the lane as the state held it: far below this.
const LANE_LIMIT: u64 = 16 * 1024 * 1024;

/// Before the state is written: each ended lane it still holds whole, in a run of several, to its
/// `lane.json` (atomic, 0600, refusing symbolic links), and only then to its ended form. A call
/// killed in between leaves the lane whole in the state; the next write replaces the same file and
/// drops the lane then.
pub(crate) fn move_out(paths: &RunPaths, state: &mut State, step: &str) -> Result<(), Refusal> {
    for run in state.runs.values_mut().filter(|r| r.lanes.len() > 1) {
        for lane in run
            .lanes
            .iter_mut_where(|l| l.ended.is_none() && l.has_ended())
        {
            ensure_dir(&paths.lane_dir(&run.id, &lane.id), step)?;
            let mut text = serde_json::to_vec_pretty(&*lane).expect("a lane serialises");
            text.push(b'\n');
            crate::store::write_atomic(&paths.ended_lane(&run.id, &lane.id), &text, 0o600)
                .map_err(|e| crate::repo::store_refusal(step, e))?;
            crate::failpoint::hit("ended-after-write");
            *lane = lane.ended_form();
        }
    }
    Ok(())
}

/// The lane whole: itself when the state holds it whole, else as its `lane.json` holds it. A file
/// that is missing, not a regular file, or not this lane leaves it as the state holds it.
pub fn whole_lane(paths: &RunPaths, run: &str, lane: &Lane) -> Lane {
    if lane.ended.is_none() {
        return lane.clone();
    }
    crate::store::read_no_follow(&paths.ended_lane(run, &lane.id), LANE_LIMIT)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Lane>(&bytes).ok())
        .filter(|whole| whole.id == lane.id && whole.stage == lane.stage)
        .unwrap_or_else(|| lane.clone())
}

/// The run with every lane whole.
pub fn whole(paths: &RunPaths, run: &Run) -> Run {
    let mut whole = run.clone();
    for lane in whole.lanes.iter_mut_where(|l| l.ended.is_some()) {
        *lane = whole_lane(paths, &run.id, lane);
    }
    whole
}
