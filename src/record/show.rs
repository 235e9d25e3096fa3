//! `list` and `status`: the unit object, built from the frontmatter and what lies around the unit.

use crate::config::Config;
use crate::refusal::Refusal;
use crate::repo::{Repo, UnitFile};
use crate::unit::kinds::effective_autonomy;
use crate::unit::{LintReport, Risk, Scalar, Stage};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::str::FromStr;

/// One unit as `list` and `status` show it: every frontmatter field plus what iced derives.
#[derive(Debug, Clone)]
pub struct UnitView {
    pub unit: UnitFile,
    pub effective_autonomy: i64,
    pub active: bool,
    pub children: Vec<String>,
    pub lint: LintReport,
}

impl UnitView {
    pub fn title(&self) -> Option<&str> {
        self.unit.parsed.title.as_deref()
    }

    pub fn to_json(&self) -> Value {
        let mut out: Map<String, Value> = self.unit.parsed.frontmatter.to_json();
        let fm = &self.unit.parsed.frontmatter;
        out.insert("id".into(), self.unit.id.clone().into());
        out.insert("title".into(), self.title().map_or(Value::Null, Into::into));
        for key in ["type", "status"] {
            out.insert(key.into(), fm.get(key).map_or(Value::Null, Scalar::to_json));
        }
        out.insert(
            "path".into(),
            format!("intent/{}/iced.md", self.unit.id).into(),
        );
        out.insert("effective_autonomy".into(), self.effective_autonomy.into());
        out.insert("active".into(), self.active.into());
        out.insert("children".into(), self.children.clone().into());
        out.insert(
            "lint".into(),
            serde_json::json!({"errors": self.lint.errors.len(), "warnings": self.lint.warnings.len()}),
        );
        Value::Object(out)
    }
}

/// One row of `list`: a unit, or the refusal its file earned.
#[derive(Debug, Clone)]
pub enum ListEntry {
    Unit(Box<UnitView>),
    Unreadable { id: String, refusal: Refusal },
}

impl ListEntry {
    pub fn to_json(&self) -> Value {
        match self {
            ListEntry::Unit(view) => view.to_json(),
            ListEntry::Unreadable { id, refusal } => serde_json::json!({
                "id": id,
                "path": format!("intent/{id}/iced.md"),
                "error": {"code": refusal.code, "reason": refusal.reason},
            }),
        }
    }
}

/// Children of every unit, from the `parent` fields.
pub fn children_of(units: &[&UnitFile]) -> BTreeMap<String, Vec<String>> {
    let mut map: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for u in units {
        if let Some(parent) = u.parsed.frontmatter.get("parent").filter(|p| !p.is_blank()) {
            map.entry(parent.to_string())
                .or_default()
                .push(u.id.clone());
        }
    }
    map
}

fn view(
    repo: &Repo,
    unit: UnitFile,
    config: &Config,
    active: Option<&str>,
    children: &BTreeMap<String, Vec<String>>,
    all: &[String],
) -> UnitView {
    let fm = &unit.parsed.frontmatter;
    let effective = effective_autonomy(
        fm.get("autonomy").and_then(Scalar::as_int),
        fm.str("risk").and_then(|r| Risk::from_str(r).ok()),
        config.autonomy,
        config.max_autonomy,
    );
    let lint = repo.lint_unit(&unit, Stage::Validate, all);
    UnitView {
        effective_autonomy: effective,
        active: active == Some(unit.id.as_str()),
        children: children.get(&unit.id).cloned().unwrap_or_default(),
        lint,
        unit,
    }
}

/// Every unit, by id; an unreadable file is listed with its refusal instead of failing the list.
pub fn list_units(repo: &Repo, step: &str) -> Result<Vec<ListEntry>, Refusal> {
    let config = repo.config(step)?;
    let ids = repo.unit_ids(step)?;
    let active = repo.active();
    let read: Vec<(String, Result<UnitFile, Refusal>)> = ids
        .iter()
        .map(|id| (id.clone(), repo.read_unit(id, step)))
        .collect();
    let units: Vec<&UnitFile> = read.iter().filter_map(|(_, r)| r.as_ref().ok()).collect();
    let children = children_of(&units);
    Ok(read
        .into_iter()
        .map(|(id, entry)| match entry {
            Ok(unit) => ListEntry::Unit(Box::new(view(
                repo,
                unit,
                &config,
                active.as_deref(),
                &children,
                &ids,
            ))),
            Err(refusal) => ListEntry::Unreadable { id, refusal },
        })
        .collect())
}

/// One unit; without a reference, the active one.
pub fn unit_status(repo: &Repo, reference: Option<&str>, step: &str) -> Result<UnitView, Refusal> {
    let config = repo.config(step)?;
    let active = repo.active();
    let id = match reference {
        Some(r) => repo.resolve(r, step)?,
        None => active.clone().ok_or_else(|| {
            Refusal::new(
                step,
                "no-active-unit",
                "no unit named and no active unit",
                "name one (`iced status <id>`), or make one active with `iced use <id>`",
            )
        })?,
    };
    let ids = repo.unit_ids(step)?;
    let unit = repo.read_unit(&id, step)?;
    let units: Vec<UnitFile> = ids
        .iter()
        .filter(|other| **other != id)
        .filter_map(|other| repo.read_unit(other, step).ok())
        .collect();
    let refs: Vec<&UnitFile> = units.iter().collect();
    let children = children_of(&refs);
    Ok(view(
        repo,
        unit,
        &config,
        active.as_deref(),
        &children,
        &ids,
    ))
}
