//! The person's authoring verbs over the ICED record: create a unit, sign it off, accept, reject,
//! abandon, hold, set autonomy, log a decision. Each returns a value describing what it did, or a
//! refusal that changed nothing. Nothing here prints.

mod create;
mod lifecycle;
mod show;
mod signoff;

pub use create::{infer_type_and_title, new_unit, Created, NewUnit};
pub use lifecycle::{
    abandon, accept, decision, hold, reject, set_autonomy, unhold, use_unit, AutonomySet,
    DecisionLogged, HoldChanged, Moved,
};
pub use show::{children_of, list_units, unit_status, ListEntry, UnitSummary, UnitView};
pub use signoff::{
    approve, decline, declined, prepare_approval, Approval, Approved, NotApproved, SignoffDeclined,
};

use crate::refusal::Refusal;
use crate::repo::{Repo, UnitFile};
use crate::unit::kinds::{check_transition, Actor};
use crate::unit::{Edit, Scalar, Status};
use std::str::FromStr;

/// The unit's status, or a refusal saying the frontmatter does not name a known one. A missing or
/// unknown status is a `field-invalid` lint error, so the refusal is `lint-errors` (SPEC 15).
pub(crate) fn status_of(unit: &UnitFile, step: &str) -> Result<Status, Refusal> {
    let value = unit.parsed.frontmatter.get("status");
    value
        .and_then(Scalar::as_str)
        .and_then(|s| Status::from_str(s).ok())
        .ok_or_else(|| {
            let shown = value.map_or_else(|| "missing".to_owned(), |v| format!("`{v}`"));
            Refusal::new(
                step,
                "lint-errors",
                format!("`{}` has no valid status (it is {shown})", unit.id),
                format!(
                    "fix the frontmatter of `intent/{}/iced.md` (`iced lint {}` lists what is wrong)",
                    unit.id, unit.id
                ),
            )
        })
}

/// The reason a unit is held, if it is.
pub fn held_reason(unit: &UnitFile) -> Option<String> {
    unit.parsed
        .frontmatter
        .get("held")
        .filter(|v| !v.is_null() && *v != &Scalar::Bool(false))
        .map(|v| v.to_string())
}

pub(crate) fn refuse_if_held(unit: &UnitFile, step: &str) -> Result<(), Refusal> {
    match held_reason(unit) {
        Some(reason) => Err(Refusal::new(
            step,
            "unit-held",
            format!("`{}` is held: {reason}", unit.id),
            format!(
                "release it with `iced unhold {}` when the hold no longer applies",
                unit.id
            ),
        )),
        None => Ok(()),
    }
}

/// A verb that rewrites the frontmatter needs one it can find: without its `---` lines a write
/// would add a second block instead of changing the first.
pub(crate) fn editable(unit: &UnitFile, step: &str) -> Result<(), Refusal> {
    match &unit.parsed.frontmatter_problem {
        Some(problem) => Err(Refusal::new(
            step,
            "lint-errors",
            format!("`{}`: {problem}", unit.id),
            format!("fix the frontmatter of `intent/{}/iced.md` (`iced lint {}`), then run the command again", unit.id, unit.id),
        )),
        None => Ok(()),
    }
}

pub(crate) fn refuse_if_closed(unit: &UnitFile, status: Status, step: &str) -> Result<(), Refusal> {
    if status.is_terminal() {
        return Err(Refusal::new(
            step,
            "unit-closed",
            format!("`{}` is {status}: closed units are not edited", unit.id),
            "start a new unit for further work: `iced new \"<what you want>\"`",
        ));
    }
    Ok(())
}

/// Move a unit to `to` as `actor`, writing the status with `extra` edits in one atomic write.
/// Moving into `blocked` records where from; leaving it clears that.
pub(crate) fn move_status(
    repo: &Repo,
    unit: &UnitFile,
    to: Status,
    actor: Actor,
    extra: Vec<Edit>,
    step: &str,
    remedy: &str,
) -> Result<Status, Refusal> {
    let from = status_of(unit, step)?;
    editable(unit, step)?;
    check_transition(from, to, actor).map_err(|e| {
        Refusal::new(
            step,
            "transition-illegal",
            format!("`{}`: {e}", unit.id),
            remedy.to_owned(),
        )
    })?;
    let mut edits = vec![Edit::set("status", to.as_str())];
    if to == Status::Blocked {
        edits.push(Edit::set("blocked_from", from.as_str()));
    } else if from == Status::Blocked {
        edits.push(Edit::set("blocked_from", Scalar::Null));
    }
    edits.extend(extra);
    let text = crate::unit::frontmatter::apply(&unit.text, &edits);
    repo.write_unit(&unit.id, &text, step)?;
    Ok(from)
}

/// Append a metric event after the change it describes was made. A failure here must not turn the
/// change into a refusal (a retry would then do it twice): it becomes a warning saying what was not
/// recorded.
pub(crate) fn record_metric(
    repo: &Repo,
    id: &str,
    event: &str,
    data: serde_json::Map<String, serde_json::Value>,
    warnings: &mut Vec<String>,
) {
    if let Err(e) = crate::metrics::append(&repo.root, id, event, data.into()) {
        warnings.push(format!(
            "the change is made, but the `{event}` event could not be added to .iced/metrics.jsonl: {e}"
        ));
    }
}

/// Log a person's decision in the unit's `decisions.md` after the change it explains was made
/// (`done` says what was made). As with [`record_metric`], a failure is a warning, not a refusal.
pub(crate) fn log_person(
    repo: &Repo,
    id: &str,
    decision: &str,
    why: &str,
    done: &str,
    step: &str,
    warnings: &mut Vec<String>,
) {
    if let Err(r) =
        repo.append_decision(id, "person", &[("Decision", decision), ("Why", why)], step)
    {
        warnings.push(format!(
            "{done}, but the words could not be added to decisions.md ({}); add them by hand: {why}",
            r.reason
        ));
    }
}

/// Metric data every event about a unit carries: its risk and autonomy where known.
pub(crate) fn metric_tags(unit: &UnitFile) -> serde_json::Map<String, serde_json::Value> {
    tags_of(&unit.parsed)
}

/// [`metric_tags`] of a unit as parsed.
pub(crate) fn tags_of(
    unit: &crate::unit::ParsedUnit,
) -> serde_json::Map<String, serde_json::Value> {
    let fm = &unit.frontmatter;
    let mut data = serde_json::Map::new();
    if let Some(risk) = fm.str("risk") {
        data.insert("risk".into(), risk.into());
    }
    if let Some(a) = fm.get("autonomy").and_then(Scalar::as_int) {
        data.insert("autonomy".into(), a.into());
    }
    data
}
