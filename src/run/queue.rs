//! The queue (SPEC 20.13): every approved unit, each asked what `build` would ask of it before
//! writing (`admit::plan`), the eligible ones ranked by `priority:`, then age, then number. What
//! `iced build next` builds and `iced drain` works through, and why, as data the run keeps.
//! Only reads: nothing is written here.

use super::ctx::Ctx;
use super::stage::admit;
use super::state::{RunStatus, State};
use crate::refusal::Refusal;
use crate::unit::frontmatter::Scalar;
use crate::unit::Status;
use serde::Serialize;

pub use super::picked::{Picked, Skipped};
use serde_json::json;
use std::cmp::Ordering;
use std::str::FromStr;

/// An eligible unit, with what ranks it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ranked {
    pub unit: String,
    pub priority: Option<i64>,
    pub created: Option<String>,
    #[serde(skip)]
    pub number: Option<u64>,
    /// The other units its run would claim (a project's children), as the survey planned it.
    #[serde(skip)]
    pub lanes: Vec<String>,
}

/// The queue as it stands: the eligible units in their order, and those passed over.
#[derive(Debug, Clone, Default)]
pub struct Survey {
    pub eligible: Vec<Ranked>,
    pub skipped: Vec<Skipped>,
}

/// At most this many skipped units are recorded on a run (SPEC 20.13).
const SKIPPED_KEPT: usize = 32;

/// Ask every unit of the queue what `build` would ask of it, and rank those that pass.
pub fn survey(ctx: &Ctx<'_>) -> Result<Survey, Refusal> {
    survey_in(ctx, &State::load(&ctx.paths, ctx.verb)?)
}

/// [`survey`] against `state`, read by the caller.
pub fn survey_in(ctx: &Ctx<'_>, state: &State) -> Result<Survey, Refusal> {
    let (step, repo) = (ctx.verb, ctx.repo);
    let ids = repo.unit_ids(step)?;
    let numbers = crate::repo::Numbers::new(&ids);
    let mut survey = Survey::default();
    for id in ids {
        // A unit that cannot be read, or is not approved, is not in the queue (lint names it).
        let Ok(file) = repo.read_unit(&id, step) else {
            continue;
        };
        let fm = &file.parsed.frontmatter;
        let status = fm.str("status").and_then(|s| Status::from_str(s).ok());
        if !matches!(status, Some(Status::Approved | Status::Building)) {
            continue;
        }
        let mut skip = |code: &str, reason: String| {
            survey.skipped.push(Skipped {
                unit: id.clone(),
                code: code.to_owned(),
                reason,
            })
        };
        if let Some(run) = state.live_run_of(&id) {
            skip(
                "unit-claimed",
                format!(
                    "run `{}` is building `{id}` ({}); `iced build {id}` drives it",
                    run.id,
                    run.status.as_str()
                ),
            );
            continue;
        }
        // Handed back (or abandoned) since its approval: a person decides what comes next.
        if let Some(run) = state
            .runs
            .values()
            .filter(|r| r.unit == id && r.status.is_ended())
            .max_by(|a, b| a.created_at.cmp(&b.created_at))
            .filter(|r| matches!(r.status, RunStatus::Handback | RunStatus::Abandoned))
            .filter(|r| {
                fm.str("approved_at")
                    .is_none_or(|at| at <= r.created_at.as_str())
            })
        {
            skip(
                "unit-handed-back",
                format!(
                    "run `{}` ended {} since `{id}` was approved; a person decides what comes next",
                    run.id,
                    run.status.as_str()
                ),
            );
            continue;
        }
        let priority = match fm.get("priority") {
            None | Some(Scalar::Null) => None,
            Some(Scalar::Int(n)) => Some(*n),
            Some(other) => {
                skip(
                    "priority-invalid",
                    format!(
                        "`{id}` has `priority: {}`, which is not an integer",
                        scalar_text(other)
                    ),
                );
                continue;
            }
        };
        match admit::plan(ctx, state, &id, &numbers) {
            Ok(plan) => survey.eligible.push(Ranked {
                unit: id.clone(),
                priority,
                created: fm.str("created").map(str::to_owned),
                number: crate::unit::id::leading_number(&id),
                lanes: plan
                    .lane_units()
                    .filter(|u| *u != id)
                    .map(str::to_owned)
                    .collect(),
            }),
            Err(refusal) => skip(refusal.code, refusal.reason),
        }
    }
    survey.eligible.sort_by(rank);
    Ok(survey)
}

/// [`survey`], to pick from: with the readiest units another machine holds on the remote passed
/// over (`passed_over_on_remote`).
pub fn survey_to_pick(ctx: &Ctx<'_>) -> Result<Survey, Refusal> {
    let state = State::load(&ctx.paths, ctx.verb)?;
    let mut survey = survey_in(ctx, &state)?;
    passed_over_on_remote(ctx, &state, &mut survey)?;
    Ok(survey)
}

/// With `land.remote` set (SPEC 24.9.1): the readiest units that a claim on the remote holds (a
/// run of another machine, within its lease) leave the eligible for the skipped, until one is
/// free, so that `build next` builds what it can instead of being refused what another machine
/// builds. A project is held when one of the children its run would claim is. One `ls-remote`
/// lists every claim; only the units it names are read. The units after the first free one are
/// not asked: the admit that claims one still judges its claim.
pub fn passed_over_on_remote(
    ctx: &Ctx<'_>,
    state: &State,
    survey: &mut Survey,
) -> Result<(), Refusal> {
    let (Some(remote), Some(first)) = (ctx.remote_claims(), survey.eligible.first()) else {
        return Ok(());
    };
    let listed = remote.listed(&first.unit, ctx.verb)?;
    while let Some(next) = survey.eligible.first() {
        // The unit, and a project's children its run would claim too: the first one held.
        let mut held = None;
        for unit in std::iter::once(&next.unit).chain(&next.lanes) {
            if !listed.contains(unit) {
                continue;
            }
            match remote.held_against(unit, state, ctx.verb) {
                Ok(None) => {}
                Ok(Some(refusal)) => held = Some(refusal),
                // A claim ref iced cannot read is this unit's refusal; an unreachable remote is
                // the survey's.
                Err(refusal) if refusal.code == "unit-claimed" => held = Some(refusal),
                Err(refusal) => return Err(refusal),
            }
            if held.is_some() {
                break;
            }
        }
        let Some(refusal) = held else {
            break;
        };
        let unit = survey.eligible.remove(0).unit;
        survey.skipped.push(Skipped {
            unit,
            code: refusal.code.to_owned(),
            reason: refusal.reason,
        });
    }
    Ok(())
}

fn scalar_text(s: &Scalar) -> String {
    match s {
        Scalar::Null => "null".to_owned(),
        Scalar::Bool(b) => b.to_string(),
        Scalar::Int(n) => n.to_string(),
        Scalar::Str(s) => s.clone(),
    }
}

/// The queue's order (SPEC 20.13): the smallest `priority:` first, those without one after; then
/// the oldest `created`, those without one after; then the smallest number; then the id.
pub fn rank(a: &Ranked, b: &Ranked) -> Ordering {
    fn some_first<T: Ord>(a: &Option<T>, b: &Option<T>) -> Ordering {
        match (a, b) {
            (Some(x), Some(y)) => x.cmp(y),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        }
    }
    some_first(&a.priority, &b.priority)
        .then_with(|| some_first(&a.created, &b.created))
        .then_with(|| some_first(&a.number, &b.number))
        .then_with(|| a.unit.cmp(&b.unit))
}

/// Why the first of the ranking comes first, in one sentence; `None` when nothing is eligible.
pub fn why(eligible: &[Ranked]) -> Option<String> {
    let first = eligible.first()?;
    let n = eligible.len();
    if n == 1 {
        return Some("the only eligible unit".to_owned());
    }
    let of = format!("of {n} eligible units");
    let second = &eligible[1];
    Some(match (first.priority, second.priority) {
        (Some(p), Some(q)) if p < q => format!("priority {p}, the smallest {of}"),
        (Some(p), None) => format!("priority {p}; the others {of} give none"),
        _ => {
            let tie = match first.priority {
                Some(p) => format!("priority {p} like the next; "),
                None => "no priority given; ".to_owned(),
            };
            match (&first.created, &second.created) {
                (Some(c), Some(d)) if c < d => format!("{tie}the oldest {of} (created {c})"),
                (Some(c), None) => format!("{tie}the oldest {of} (created {c})"),
                _ => format!("{tie}the smallest number {of}"),
            }
        }
    })
}

/// Why the first of the survey's ranking is chosen; `None` when nothing is eligible.
pub fn picked(by: &str, survey: &Survey) -> Option<Picked> {
    let first = survey.eligible.first()?;
    Some(Picked {
        by: by.to_owned(),
        why: why(&survey.eligible)?,
        priority: first.priority,
        created: first.created.clone(),
        eligible: survey.eligible.iter().map(|r| r.unit.clone()).collect(),
        skipped: survey.skipped.iter().take(SKIPPED_KEPT).cloned().collect(),
    })
}

/// `build next` with nothing eligible (SPEC 20.13): every unit passed over, with its check.
pub fn empty(ctx: &Ctx<'_>, survey: &Survey) -> Refusal {
    let reason = if survey.skipped.is_empty() {
        "no unit is approved and waiting to be built".to_owned()
    } else {
        format!(
            "no approved unit passes every check: {}",
            survey
                .skipped
                .iter()
                .map(|s| format!("`{}` {} ({})", s.unit, s.code, s.reason))
                .collect::<Vec<_>>()
                .join("; ")
        )
    };
    let refusal = Refusal::new(
        ctx.verb,
        "queue-empty",
        reason,
        "`iced list` shows every unit and its status; approve one (`iced approve <id>`), or clear the check that holds it back",
    );
    refusal.detail("skipped", json!(survey.skipped))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(unit: &str, priority: Option<i64>, created: Option<&str>) -> Ranked {
        Ranked {
            unit: unit.to_owned(),
            priority,
            created: created.map(str::to_owned),
            number: crate::unit::id::leading_number(unit),
            lanes: Vec::new(),
        }
    }

    fn order(mut v: Vec<Ranked>) -> Vec<String> {
        v.sort_by(rank);
        v.into_iter().map(|r| r.unit).collect()
    }

    #[test]
    fn priority_first_then_age_then_number() {
        let t1 = Some("2026-11-01T00:00:00Z");
        let t2 = Some("2026-11-02T00:00:00Z");
        assert_eq!(
            order(vec![
                r("001-a", None, t1),
                r("002-b", Some(2), t2),
                r("003-c", Some(1), t2),
                r("004-d", None, None),
                r("005-e", Some(2), t1),
                r("006-f", None, t1),
            ]),
            ["003-c", "005-e", "002-b", "001-a", "006-f", "004-d"]
        );
    }

    #[test]
    fn the_reason_names_what_decided() {
        let t1 = Some("2026-11-01T00:00:00Z");
        let t2 = Some("2026-11-02T00:00:00Z");
        assert_eq!(why(&[]), None);
        assert_eq!(
            why(&[r("001-a", None, None)]).unwrap(),
            "the only eligible unit"
        );
        assert_eq!(
            why(&[r("002-b", Some(1), t2), r("001-a", Some(2), t1)]).unwrap(),
            "priority 1, the smallest of 2 eligible units"
        );
        assert_eq!(
            why(&[r("002-b", Some(3), t2), r("001-a", None, t1)]).unwrap(),
            "priority 3; the others of 2 eligible units give none"
        );
        assert_eq!(
            why(&[r("001-a", None, t1), r("002-b", None, t2)]).unwrap(),
            "no priority given; the oldest of 2 eligible units (created 2026-11-01T00:00:00Z)"
        );
        assert_eq!(
            why(&[r("001-a", Some(1), t1), r("002-b", Some(1), t1)]).unwrap(),
            "priority 1 like the next; the smallest number of 2 eligible units"
        );
    }
}
