//! Renewing a run's claims on `land.remote` (SPEC 24.9.1): a claim another machine may take over
//! once its lease has run out is renewed by its run at half the lease, so a run that lasts longer
//! than the lease keeps its units. The stepper asks [`due`] for the view; `decide` chooses the
//! renewal before any lane moves; [`renew`] does it outside the state lock and records what it
//! found. Another machine's claim found in the run's place is recorded lost: what its lanes run is
//! stopped, and `decide` blocks them.

use crate::refusal::Refusal;
use crate::run::backoff::{pace_after, Backoff};
use crate::run::claims::{host_name, Claim};
use crate::run::ctx::Ctx;
use crate::run::events::{emit, Event};
use crate::run::reply::{focus_lane, Action, StepReport};
use crate::run::state::{Renewal, Run, Stage};
use crate::run::then::Then;
use chrono::DateTime;
use serde_json::json;
use std::collections::BTreeSet;

/// Whether `run`'s claims on the remote are due to be renewed: half the lease has passed since
/// they were taken or last renewed (iced's clock), or a person resumed it after one was lost.
pub(crate) fn due(ctx: &Ctx<'_>, run: &Run) -> bool {
    if ctx.settings.land.remote.is_none() || run.status.is_ended() {
        return false;
    }
    let kept = run.claims.as_ref();
    if kept.is_some_and(|k| k.now) {
        return true;
    }
    let since = kept
        .and_then(|k| k.at.as_deref())
        .unwrap_or(&run.created_at);
    let half = chrono::Duration::from_std(ctx.settings.land.claim_lease / 2)
        .unwrap_or(chrono::Duration::MAX);
    // A time that does not read is renewed: the renewal records one that does.
    DateTime::parse_from_rfc3339(since)
        .ok()
        .and_then(|since| since.checked_add_signed(half))
        .is_none_or(|at| crate::clock::now() >= at)
}

/// The units `run` claims: its own, and each lane's but a discarded lane's (whose claim its
/// discard released).
pub(crate) fn claimed_units(run: &Run) -> Vec<String> {
    let mut seen = BTreeSet::new();
    std::iter::once(&run.unit)
        .chain(
            run.lanes
                .iter()
                .filter(|l| l.stage != Stage::Discarded)
                .map(|l| &l.unit),
        )
        .filter(|u| seen.insert(*u))
        .cloned()
        .collect()
}

/// Renew the claims of `snapshot` (the run as decided), outside the lock, and record what was
/// found: when they were renewed and what was lost, or a backoff when the remote could not be
/// reached.
pub(crate) fn renew(ctx: &Ctx<'_>, snapshot: &Run) -> Result<StepReport, Refusal> {
    let units = claimed_units(snapshot);
    let at = crate::clock::now_iso();
    let claim = Claim {
        run: snapshot.id.clone(),
        session: snapshot.session.clone(),
        host: host_name(),
        pid: std::process::id(),
        at: at.clone(),
        root: Some(ctx.claims().root().to_owned()),
    };
    let found = match ctx.remote_claims() {
        Some(remote) => remote.renew(&units, &claim, ctx.land_target().as_deref(), ctx.verb),
        // `land.remote` was unset since the view was made: nothing is claimed there.
        None => Default::default(),
    };
    let report = ctx.transact(|state| {
        let Some(run) = state.runs.get_mut(&snapshot.id) else {
            // Ended and retired meanwhile: its end released the claims, which the renewal may
            // have taken again.
            for unit in &units {
                ctx.release_after_save(&snapshot.id, unit);
            }
            return Ok(None);
        };
        // A claim the run gave up meanwhile (it ended, or a lane was discarded) that the
        // renewal took again is given up again once this is saved.
        let now_claimed = claimed_units(run);
        for unit in &units {
            if run.status.is_ended() || !now_claimed.contains(unit) {
                ctx.release_after_save(&run.id, unit);
            }
        }
        if run.status.is_ended() {
            return Ok(None);
        }
        let kept = run.claims.get_or_insert_with(Renewal::default);
        // What was lost stays lost until a person resumes the run.
        kept.lost.extend(found.lost.clone());
        run.updated_at = at.clone();
        let then = match &found.unreachable {
            Some(why) => {
                pace_after(ctx, run, Backoff::Unreachable(why));
                Then::ClaimsNotRenewed {
                    why: why.clone(),
                    until: run.next_eligible_at.clone().unwrap_or_default(),
                }
            }
            None => {
                let kept = run.claims.get_or_insert_with(Renewal::default);
                kept.at = Some(at.clone());
                kept.now = false;
                emit(
                    &ctx.paths,
                    &run.id,
                    Event::ClaimsRenewed,
                    json!({"units": units, "lost": found.lost}),
                );
                Then::ClaimsRenewed {
                    units: units.len(),
                    lost: found.lost.len(),
                }
            }
        };
        Ok(Some(StepReport::for_lane(
            run,
            focus_lane(run),
            Action::Advanced,
            then,
        )))
    })?;
    // What the lanes of a lost unit still run is work another machine may be doing: stopped now
    // (outside the lock); `decide` blocks those lanes at the next step.
    if !found.lost.is_empty() {
        let whole = found.lost.contains_key(&snapshot.unit);
        for lane in snapshot
            .lanes
            .iter()
            .filter(|l| !l.stage.is_final() && (whole || found.lost.contains_key(&l.unit)))
        {
            crate::run::alive::stop_activities(ctx, &snapshot.id, lane);
        }
    }
    Ok(report.unwrap_or_else(|| crate::run::reply::ended_report(snapshot)))
}
