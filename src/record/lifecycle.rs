//! The person's verbs after sign-off, and the small ones around it: accept, reject, abandon, hold,
//! unhold, autonomy, decision, use.

use super::{editable, metric_tags, move_status, record_metric, refuse_if_closed, status_of};
use crate::config;
use crate::git;
use crate::refusal::Refusal;
use crate::repo::{Numbers, Repo, UnitFile};
use crate::unit::frontmatter::apply;
use crate::unit::kinds::effective_autonomy;
use crate::unit::{Actor, Edit, Risk, Stage, Status};
use serde::Serialize;
use std::str::FromStr;

#[derive(Debug, Serialize)]
pub struct Moved {
    pub id: String,
    #[serde(skip)]
    pub from: Status,
    pub status: Status,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accepted_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accepted_by: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct HoldChanged {
    pub id: String,
    pub held: Option<String>,
    #[serde(skip)]
    pub changed: bool,
}

#[derive(Debug, Serialize)]
pub struct AutonomySet {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub autonomy: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effective_autonomy: Option<i64>,
}

#[derive(Debug, Serialize)]
pub struct DecisionLogged {
    pub id: String,
    pub path: String,
}

fn read_open_unit(repo: &Repo, id: &str, step: &str) -> Result<(UnitFile, Status), Refusal> {
    let unit = repo.read_unit(id, step)?;
    let status = status_of(&unit, step)?;
    refuse_if_closed(&unit, status, step)?;
    Ok((unit, status))
}

/// `done -> accepted`, by a person, when lint at stage accept is clean.
pub fn accept(repo: &Repo, id: &str, step: &str) -> Result<Moved, Refusal> {
    let (unit, _) = read_open_unit(repo, id, step)?;
    let numbers = Numbers::new(&repo.unit_ids(step)?);
    let report = repo.lint_unit(&unit, Stage::Accept, &numbers);
    let at = crate::clock::now_iso();
    let by = git::person(&repo.root);
    let remedy = format!("only a done unit is accepted; `iced status {id}` shows where it stands");
    // The status check comes first: lint at accept is meaningless for a unit not yet done.
    if status_of(&unit, step)? == Status::Done && !report.is_clean() {
        let n = report.errors.len();
        return Err(Refusal::new(
            step,
            "lint-errors",
            format!("`{id}` has {n} lint error{} at stage accept", if n == 1 { "" } else { "s" }),
            format!("`iced lint {id} --stage accept` lists them; a changed contract or missing evidence means the work must be verified again"),
        )
        .detail("lint", serde_json::to_value(&report).expect("a report serialises")));
    }
    let from = move_status(
        repo,
        &unit,
        Status::Accepted,
        Actor::Person,
        vec![
            Edit::set("accepted_at", at.as_str()),
            Edit::set("accepted_by", by.as_str()),
        ],
        step,
        &remedy,
    )?;
    let mut data = metric_tags(&unit);
    data.insert("auto".into(), false.into());
    if let Some(t) = unit.parsed.frontmatter.str("type") {
        data.insert("type".into(), t.into());
    }
    let mut warnings = Vec::new();
    record_metric(repo, id, "accept", data, &mut warnings);
    Ok(Moved {
        id: id.to_owned(),
        from,
        status: Status::Accepted,
        accepted_at: Some(at),
        accepted_by: Some(by),
        reason: None,
        warnings,
    })
}

/// `done -> building` with the person's reason, logged in decisions.md and the metrics.
pub fn reject(repo: &Repo, id: &str, reason: &str, step: &str) -> Result<Moved, Refusal> {
    let (unit, _) = read_open_unit(repo, id, step)?;
    let remedy = format!(
        "only a done unit is rejected back to building; to drop a unit use `iced abandon {id}`"
    );
    let from = move_status(
        repo,
        &unit,
        Status::Building,
        Actor::Person,
        vec![],
        step,
        &remedy,
    )?;
    let mut warnings = Vec::new();
    super::log_person(
        repo,
        id,
        "rejected at acceptance",
        reason,
        "the unit is back to building",
        step,
        &mut warnings,
    );
    let mut data = metric_tags(&unit);
    data.insert("reason".into(), reason.into());
    record_metric(repo, id, "reject", data, &mut warnings);
    Ok(Moved {
        id: id.to_owned(),
        from,
        status: Status::Building,
        accepted_at: None,
        accepted_by: None,
        reason: Some(reason.to_owned()),
        warnings,
    })
}

/// `draft | approved | blocked -> rejected`.
pub fn abandon(repo: &Repo, id: &str, step: &str) -> Result<Moved, Refusal> {
    let (unit, _) = read_open_unit(repo, id, step)?;
    let remedy =
        "a unit being built or verified is stopped through its run, not abandoned directly";
    let from = move_status(
        repo,
        &unit,
        Status::Rejected,
        Actor::Person,
        vec![],
        step,
        remedy,
    )?;
    let mut warnings = Vec::new();
    record_metric(repo, id, "abandon", metric_tags(&unit), &mut warnings);
    Ok(Moved {
        id: id.to_owned(),
        from,
        status: Status::Rejected,
        accepted_at: None,
        accepted_by: None,
        reason: None,
        warnings,
    })
}

/// Write `held: <reason>`; a held unit is never approved, built or planned.
pub fn hold(repo: &Repo, id: &str, reason: &str, step: &str) -> Result<HoldChanged, Refusal> {
    let (unit, _) = read_open_unit(repo, id, step)?;
    editable(&unit, step)?;
    let text = apply(&unit.text, &[Edit::set("held", reason)]);
    let changed = text != unit.text;
    if changed {
        repo.write_unit(id, &text, step)?;
    }
    Ok(HoldChanged {
        id: id.to_owned(),
        held: Some(reason.to_owned()),
        changed,
    })
}

/// Remove `held:`. A unit that is not held is left as it is.
pub fn unhold(repo: &Repo, id: &str, step: &str) -> Result<HoldChanged, Refusal> {
    let unit = repo.read_unit(id, step)?;
    if unit.parsed.frontmatter.get("held").is_none() {
        return Ok(HoldChanged {
            id: id.to_owned(),
            held: None,
            changed: false,
        });
    }
    let (unit, _) = read_open_unit(repo, id, step)?;
    editable(&unit, step)?;
    let text = apply(&unit.text, &[Edit::Remove("held".into())]);
    repo.write_unit(id, &text, step)?;
    Ok(HoldChanged {
        id: id.to_owned(),
        held: None,
        changed: true,
    })
}

/// Set a unit's autonomy, or without a unit the config default.
pub fn set_autonomy(
    repo: &Repo,
    level: i64,
    id: Option<&str>,
    step: &str,
) -> Result<AutonomySet, Refusal> {
    let Some(id) = id else {
        config::set_key(
            &repo.root,
            "autonomy",
            level.into(),
            |e| crate::repo::config_refusal(step, e),
            |c| crate::run::settings::check(c, step),
        )?;
        return Ok(AutonomySet {
            id: None,
            autonomy: level,
            effective_autonomy: None,
        });
    };
    let config = crate::run::settings::load_config(repo, step)?;
    let (unit, _) = read_open_unit(repo, id, step)?;
    editable(&unit, step)?;
    let text = apply(&unit.text, &[Edit::set("autonomy", level)]);
    if text != unit.text {
        repo.write_unit(id, &text, step)?;
    }
    let risk = unit
        .parsed
        .frontmatter
        .str("risk")
        .and_then(|r| Risk::from_str(r).ok());
    Ok(AutonomySet {
        id: Some(id.to_owned()),
        autonomy: level,
        effective_autonomy: Some(effective_autonomy(
            Some(level),
            risk,
            config.autonomy,
            config.max_autonomy,
        )),
    })
}

/// Append an agent's decision to the unit's log.
pub fn decision(
    repo: &Repo,
    id: &str,
    decision: &str,
    why: &str,
    alternatives: Option<&str>,
    step: &str,
) -> Result<DecisionLogged, Refusal> {
    read_open_unit(repo, id, step)?;
    let mut lines = vec![("Decision", decision), ("Why", why)];
    if let Some(alt) = alternatives {
        lines.push(("Alternatives", alt));
    }
    repo.append_decision(id, "agent", &lines, step)?;
    Ok(DecisionLogged {
        id: id.to_owned(),
        path: format!("intent/{id}/decisions.md"),
    })
}

/// Set or clear the active unit.
pub fn use_unit(repo: &Repo, id: Option<&str>, step: &str) -> Result<Option<String>, Refusal> {
    repo.set_active(id, step)?;
    Ok(id.map(str::to_owned))
}
