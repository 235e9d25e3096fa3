//! `approve`: the sign-off. Checks first (closed, held, status, signoff lint), then either the
//! autonomy rule approves, or a person confirms (the command line asks), then one atomic write
//! records who approved, when, the contract hash and the base commit.

use super::{
    editable, metric_tags, move_status, record_metric, refuse_if_closed, refuse_if_held, status_of,
};
use crate::config::Config;
use crate::git;
use crate::metrics;
use crate::refusal::Refusal;
use crate::repo::{store_refusal, Numbers, Repo, UnitFile};
use crate::unit::kinds::effective_autonomy;
use crate::unit::{contract_hash, Actor, Edit, Risk, Scalar, Stage, Status};
use serde::Serialize;
use std::str::FromStr;

/// A unit that passed every check and may be approved.
pub struct Approval {
    pub unit: UnitFile,
    /// The autonomy rule approves it: nobody needs to be asked.
    pub auto: bool,
    pub warnings: Vec<crate::unit::Issue>,
}

#[derive(Debug, Serialize)]
pub struct Approved {
    pub id: String,
    pub status: Status,
    pub approved_at: String,
    pub approved_by: String,
    pub contract_hash: String,
    pub base_ref: Option<String>,
    pub auto: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// Run every check of the sign-off without writing anything.
pub fn prepare_approval(repo: &Repo, id: &str, step: &str) -> Result<Approval, Refusal> {
    let config = crate::run::settings::load_config(repo, step)?;
    let unit = repo.read_unit(id, step)?;
    let status = status_of(&unit, step)?;
    refuse_if_closed(&unit, status, step)?;
    refuse_if_held(&unit, step)?;
    if !matches!(status, Status::Draft | Status::Blocked) {
        return Err(Refusal::new(
            step,
            "transition-illegal",
            format!("`{id}` is {status}; only a draft or blocked unit is signed off"),
            if status == Status::Approved {
                "it is already approved: nothing to do".to_owned()
            } else {
                format!("run `iced status {id}` to see where it stands")
            },
        ));
    }
    editable(&unit, step)?;
    let numbers = Numbers::new(&repo.unit_ids(step)?);
    let report = repo.lint_unit(&unit, Stage::Signoff, &numbers);
    if !report.is_clean() {
        let n = report.errors.len();
        return Err(Refusal::new(
            step,
            "lint-errors",
            format!(
                "`{id}` has {n} lint error{} at stage signoff",
                if n == 1 { "" } else { "s" }
            ),
            format!("fix them in `intent/{id}/iced.md` (`iced lint {id} --stage signoff` lists them), then approve again"),
        )
        .detail("lint", serde_json::to_value(&report).expect("a report serialises")));
    }
    let auto = autonomy_rule_applies(&unit, &config);
    Ok(Approval {
        unit,
        auto,
        warnings: report.warnings,
    })
}

/// Effective autonomy 3, low risk, and no questions at all: the unit approves itself.
fn autonomy_rule_applies(unit: &UnitFile, config: &Config) -> bool {
    let fm = &unit.parsed.frontmatter;
    let risk = fm.str("risk").and_then(|r| Risk::from_str(r).ok());
    let level = effective_autonomy(
        fm.get("autonomy").and_then(Scalar::as_int),
        risk,
        config.autonomy,
        config.max_autonomy,
    );
    level == 3 && risk == Some(Risk::Low) && unit.parsed.questions.is_empty()
}

/// Record the approval prepared by [`prepare_approval`].
pub fn approve(repo: &Repo, approval: Approval, step: &str) -> Result<Approved, Refusal> {
    let unit = &approval.unit;
    let approved_at = crate::clock::now_iso();
    let approved_by = if approval.auto {
        "auto".to_owned()
    } else {
        git::person(&repo.root)
    };
    let hash = contract_hash(&unit.text);
    let base_ref = git::head(&repo.root);
    let actor = if approval.auto {
        Actor::AutonomyRule
    } else {
        Actor::Person
    };
    move_status(
        repo,
        unit,
        Status::Approved,
        actor,
        vec![
            Edit::set("approved_at", approved_at.as_str()),
            Edit::set("approved_by", approved_by.as_str()),
            Edit::set("contract_hash", hash.as_str()),
            Edit::set("base_ref", Scalar::from(base_ref.clone())),
        ],
        step,
        "",
    )?;
    let mut warnings = Vec::new();
    let asked = uncounted_questions(repo, unit);
    if asked > 0 {
        let mut data = metric_tags(unit);
        data.insert("count".into(), asked.into());
        record_metric(repo, &unit.id, "questions", data, &mut warnings);
    }
    let mut data = metric_tags(unit);
    data.insert("result".into(), "approved".into());
    data.insert("auto".into(), approval.auto.into());
    record_metric(repo, &unit.id, "signoff", data, &mut warnings);
    // The approved unit is the one being worked on now (seed 000's sign-off).
    if let Err(r) = repo.set_active(Some(&unit.id), step) {
        warnings.push(format!(
            "approved, but `.iced/active` could not name it ({}): `iced use {}`",
            r.reason, unit.id
        ));
    }
    Ok(Approved {
        id: unit.id.clone(),
        status: Status::Approved,
        approved_at,
        approved_by,
        contract_hash: hash,
        base_ref,
        auto: approval.auto,
        warnings,
    })
}

/// The unit's Q items that no earlier `questions` event of it counted (SPEC 12.1): each question
/// is counted once, at the first sign-off that sees it.
fn uncounted_questions(repo: &Repo, unit: &UnitFile) -> u64 {
    let counted: u64 = metrics::read(&repo.root)
        .unwrap_or_default()
        .iter()
        .filter(|e| {
            e.get("id").and_then(|v| v.as_str()) == Some(unit.id.as_str())
                && e.get("event").and_then(|v| v.as_str()) == Some("questions")
        })
        .filter_map(|e| e.get("count").and_then(|v| v.as_u64()))
        .sum();
    (unit.parsed.questions.len() as u64).saturating_sub(counted)
}

/// The person declined at the prompt: nothing changes but the metric.
pub fn declined(repo: &Repo, approval: &Approval, step: &str) -> Result<(), Refusal> {
    let mut data = metric_tags(&approval.unit);
    data.insert("result".into(), "changes".into());
    data.insert("auto".into(), false.into());
    metrics::append(&repo.root, &approval.unit.id, "signoff", data.into())
        .map_err(|e| store_refusal(step, e))
}

/// What a person said at the sign-off instead of approving (SPEC 14.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotApproved {
    /// Changes asked for: the unit stays as it is.
    Changes,
    /// Rejected: the unit is closed.
    Rejected,
}

#[derive(Debug, Serialize)]
pub struct SignoffDeclined {
    pub id: String,
    pub status: Status,
    pub approved: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changes: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rejected: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// A person's answer at the sign-off other than yes, with their words: the words go to the unit's
/// decision log and the `signoff` event; a rejection closes the unit. Only a draft or blocked unit
/// is signed off, so only one is answered; lint errors do not stop a person from saying no.
pub fn decline(
    repo: &Repo,
    id: &str,
    answer: NotApproved,
    text: &str,
    step: &str,
) -> Result<SignoffDeclined, Refusal> {
    let unit = repo.read_unit(id, step)?;
    let status = status_of(&unit, step)?;
    refuse_if_closed(&unit, status, step)?;
    if !matches!(status, Status::Draft | Status::Blocked) {
        return Err(Refusal::new(
            step,
            "transition-illegal",
            format!("`{id}` is {status}; only a draft or blocked unit is signed off, or answered at its sign-off"),
            format!("run `iced status {id}` to see where it stands"),
        ));
    }
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let (result, decision, status) = match answer {
        NotApproved::Changes => ("changes", "changes requested at sign-off", status),
        NotApproved::Rejected => ("rejected", "rejected at sign-off", Status::Rejected),
    };
    if answer == NotApproved::Rejected {
        move_status(
            repo,
            &unit,
            Status::Rejected,
            Actor::Person,
            vec![],
            step,
            "",
        )?;
    }
    let mut warnings = Vec::new();
    super::log_person(repo, id, decision, &text, "recorded", step, &mut warnings);
    let mut data = metric_tags(&unit);
    data.insert("result".into(), result.into());
    data.insert("auto".into(), false.into());
    data.insert("text".into(), text.clone().into());
    record_metric(repo, id, "signoff", data, &mut warnings);
    Ok(SignoffDeclined {
        id: id.to_owned(),
        status,
        approved: false,
        changes: (answer == NotApproved::Changes).then(|| text.clone()),
        rejected: (answer == NotApproved::Rejected).then_some(text),
        warnings,
    })
}
