//! `list` and `status`: the unit object, built from the frontmatter and what lies around the unit.

use crate::config::Config;
use crate::refusal::Refusal;
use crate::repo::{read_text, Numbers, Repo, UnitFile};
use crate::unit::kinds::effective_autonomy;
use crate::unit::{frontmatter, Coverage, Frontmatter, LintReport, Risk, Scalar, Stage};
use serde::ser::{Serialize, SerializeMap};
use serde_json::Value;
use std::collections::BTreeMap;
use std::str::FromStr;

/// The unit object of `list` and `status`: every frontmatter field plus what iced derives. Small
/// on purpose: `list` keeps one per unit, not the units' whole text.
#[derive(Debug, Clone)]
pub struct UnitSummary {
    pub id: String,
    /// The run building this unit, when the run state has one: its status overrides the file's.
    pub run: Option<RunOverlay>,
    pub frontmatter: Frontmatter,
    pub title: Option<String>,
    pub effective_autonomy: i64,
    pub active: bool,
    pub children: Vec<String>,
    pub lint_errors: usize,
    pub lint_warnings: usize,
}

/// One unit as `status` shows it: the summary, the whole unit, its lint report and its goal
/// coverage (SPEC 10.3).
#[derive(Debug, Clone)]
pub struct UnitView {
    pub summary: UnitSummary,
    pub unit: UnitFile,
    pub lint: LintReport,
    pub coverage: Coverage,
}

impl UnitView {
    /// The unit object, with `coverage` after the keys `list` shows too.
    pub fn to_json(&self) -> Value {
        let mut json = self.summary.to_json();
        if let Value::Object(map) = &mut json {
            map.insert(
                "coverage".to_owned(),
                serde_json::to_value(&self.coverage).expect("coverage serialises"),
            );
        }
        json
    }
}

impl UnitSummary {
    fn new(unit: &UnitFile, lint: &LintReport, config: &Config, active: Option<&str>) -> Self {
        let fm = &unit.parsed.frontmatter;
        UnitSummary {
            id: unit.id.clone(),
            frontmatter: fm.clone(),
            title: unit.parsed.title.clone(),
            effective_autonomy: effective_autonomy(
                fm.get("autonomy").and_then(Scalar::as_int),
                fm.str("risk").and_then(|r| Risk::from_str(r).ok()),
                config.autonomy,
                config.max_autonomy,
            ),
            active: active == Some(unit.id.as_str()),
            run: None,
            children: Vec::new(),
            lint_errors: lint.errors.len(),
            lint_warnings: lint.warnings.len(),
        }
    }

    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).expect("a unit summary serialises")
    }

    /// The status to show: the run's, while a run holds the unit; else the file's.
    pub fn status(&self) -> Value {
        match &self.run {
            Some(run) => run.unit_status.into(),
            None => self
                .frontmatter
                .get("status")
                .map_or(Value::Null, Scalar::to_json),
        }
    }

    /// The keys iced derives, in the order they follow the frontmatter, with their values.
    fn derived(&self) -> [(&'static str, Value); 10] {
        let field = |key: &str| {
            self.frontmatter
                .get(key)
                .map_or(Value::Null, Scalar::to_json)
        };
        [
            ("id", self.id.clone().into()),
            ("title", self.title.clone().map_or(Value::Null, Into::into)),
            ("type", field("type")),
            ("status", self.status()),
            ("path", format!("intent/{}/iced.md", self.id).into()),
            ("effective_autonomy", self.effective_autonomy.into()),
            ("active", self.active.into()),
            ("children", self.children.clone().into()),
            (
                "lint",
                serde_json::json!({"errors": self.lint_errors, "warnings": self.lint_warnings}),
            ),
            (
                "run",
                self.run.as_ref().map_or(Value::Null, |r| {
                    serde_json::json!({"id": r.id, "status": r.status, "stage": r.stage, "attempt": r.attempt, "file_status": field("status")})
                }),
            ),
        ]
    }
}

/// Every frontmatter field in file order (a derived key that is also a field takes the field's
/// place), then the derived keys. Written straight to the serializer: `list` prints a thousand.
impl Serialize for UnitSummary {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let derived = self.derived();
        let mut map = serializer.serialize_map(None)?;
        let mut done = [false; 10];
        for (key, value) in self.frontmatter.iter() {
            match derived.iter().position(|(k, _)| *k == key) {
                Some(at) => {
                    map.serialize_entry(key, &derived[at].1)?;
                    done[at] = true;
                }
                None => map.serialize_entry(key, value)?,
            }
        }
        for ((key, value), done) in derived.iter().zip(done) {
            if !done {
                map.serialize_entry(key, value)?;
            }
        }
        map.end()
    }
}

/// What the run state says of a unit while a run holds it.
#[derive(Debug, Clone)]
pub struct RunOverlay {
    pub id: String,
    pub status: &'static str,
    pub stage: &'static str,
    pub attempt: u32,
    /// The unit status the run implies: building, verifying, done, accepted or blocked.
    pub unit_status: &'static str,
}

/// Runs that hold units, by unit. A state file that cannot be read gives no overlay here: `list`
/// and `status` still show the files (the loop's own verbs refuse such a state and say why).
pub fn run_overlays(repo: &Repo) -> BTreeMap<String, RunOverlay> {
    use crate::run::state::{RunPaths, RunStatus, Stage as LaneStage, State};
    let Ok(state) = State::load(&RunPaths::new(&repo.root), "status") else {
        return BTreeMap::new();
    };
    // Delivered lanes' closes are read through one git, opened for the first of them.
    let blobs: std::cell::RefCell<Option<crate::git::Blobs>> = std::cell::RefCell::new(None);
    state
        .runs
        .values()
        .filter(|r| r.status != RunStatus::Abandoned)
        .flat_map(|r| {
            let overlay = |lane: &crate::run::state::Lane| {
                let unit_status = match lane.stage {
                    // Planning: the unit is still the draft its file says it is.
                    LaneStage::Plan => "draft",
                    LaneStage::Brief
                    | LaneStage::Worktree
                    | LaneStage::Implement
                    | LaneStage::Receipt => "building",
                    LaneStage::Validate | LaneStage::Refute | LaneStage::Deliver => "verifying",
                    // Delivered: what the close on the lane branch says (`accepted` when the
                    // loop accepted it automatically, else `done`).
                    LaneStage::Land | LaneStage::Retire | LaneStage::Delivered => {
                        delivered_status(repo, &blobs, lane)
                    }
                    LaneStage::Blocked | LaneStage::Handback => "blocked",
                    LaneStage::Discarded => return None,
                };
                Some((
                    lane.unit.clone(),
                    RunOverlay {
                        id: r.id.clone(),
                        status: r.status.as_str(),
                        stage: lane.stage.as_str(),
                        attempt: lane.attempt,
                        unit_status,
                    },
                ))
            };
            let mut out: Vec<(String, RunOverlay)> = Vec::new();
            if r.lanes.len() == 1 && r.lanes[0].unit == r.unit {
                out.extend(overlay(&r.lanes[0]));
            } else {
                // A project run (SPEC 23.6): each lane that has begun speaks for its unit; the
                // project itself is building while the run is live.
                out.extend(
                    r.lanes
                        .iter()
                        .filter(|l| crate::run::decide::started(l))
                        .filter_map(overlay),
                );
                if !r.status.is_ended() {
                    let lane = crate::run::reply::focus_lane(r);
                    out.push((
                        r.unit.clone(),
                        RunOverlay {
                            id: r.id.clone(),
                            status: r.status.as_str(),
                            stage: lane.stage.as_str(),
                            attempt: lane.attempt,
                            unit_status: "building",
                        },
                    ));
                }
            }
            out
        })
        .collect()
}

/// The status a delivered lane's close commit gives its unit: `accepted` or `done`. A close that
/// cannot be read (its commit gone) reads as `done`, what every delivery is at least.
fn delivered_status(
    repo: &Repo,
    blobs: &std::cell::RefCell<Option<crate::git::Blobs>>,
    lane: &crate::run::state::Lane,
) -> &'static str {
    // A lane that left the state (SPEC 21.2) keeps its close commit in its ended form.
    let Some(commit) = lane.close_commit() else {
        return "done";
    };
    let path = format!("intent/{}/iced.md", lane.unit);
    let mut blobs = blobs.borrow_mut();
    if blobs.is_none() {
        *blobs = crate::git::Blobs::open(&repo.root).ok();
    }
    let Some(blobs) = blobs.as_mut() else {
        return "done";
    };
    let accepted = blobs
        .get(&commit, &path, 1 << 20)
        .ok()
        .flatten()
        .map(|bytes| crate::unit::frontmatter::parse(&String::from_utf8_lossy(&bytes)))
        .is_some_and(|p| p.data.str("status") == Some("accepted"));
    if accepted {
        "accepted"
    } else {
        "done"
    }
}

/// One row of `list`: a unit, or the refusal its file earned.
#[derive(Debug, Clone)]
pub enum ListEntry {
    Unit(Box<UnitSummary>),
    Unreadable { id: String, refusal: Refusal },
}

impl ListEntry {
    /// The entry as one line of JSON.
    pub fn to_json_string(&self) -> String {
        match self {
            ListEntry::Unit(unit) => serde_json::to_string(unit).expect("a unit serialises"),
            unreadable => unreadable.to_json().to_string(),
        }
    }

    pub fn to_json(&self) -> Value {
        match self {
            ListEntry::Unit(unit) => unit.to_json(),
            ListEntry::Unreadable { id, refusal } => serde_json::json!({
                "id": id,
                "path": format!("intent/{id}/iced.md"),
                "error": {"code": refusal.code, "reason": refusal.reason},
            }),
        }
    }
}

/// Children of every unit, from the `parent` fields of (id, frontmatter) pairs.
pub fn children_of<'a>(
    units: impl Iterator<Item = (&'a str, &'a Frontmatter)>,
) -> BTreeMap<String, Vec<String>> {
    let mut map: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (id, fm) in units {
        if let Some(parent) = fm.get("parent").filter(|p| !p.is_blank()) {
            map.entry(parent.to_string())
                .or_default()
                .push(id.to_owned());
        }
    }
    map
}

/// Every unit, by id; an unreadable file is listed with its refusal instead of failing the list.
pub fn list_units(repo: &Repo, step: &str) -> Result<Vec<ListEntry>, Refusal> {
    let config = crate::run::settings::load_config(repo, step)?;
    let ids = repo.unit_ids(step)?;
    let active = repo.active();
    let numbers = Numbers::new(&ids);
    // Reading, parsing and linting a unit needs nothing from the others: spread it over the
    // cores, and keep only the summary (the unit's text is freed on the worker that read it).
    let mut entries: Vec<ListEntry> = crate::par::map(&ids, |id| match repo.read_unit(id, step) {
        Ok(unit) => {
            let lint = repo.lint_unit(&unit, Stage::Validate, &numbers);
            let summary = UnitSummary::new(&unit, &lint, &config, active.as_deref());
            ListEntry::Unit(Box::new(summary))
        }
        Err(refusal) => ListEntry::Unreadable {
            id: id.clone(),
            refusal,
        },
    });
    let mut overlays = run_overlays(repo);
    let mut children = children_of(entries.iter().filter_map(|e| match e {
        ListEntry::Unit(u) => Some((u.id.as_str(), &u.frontmatter)),
        ListEntry::Unreadable { .. } => None,
    }));
    for entry in &mut entries {
        if let ListEntry::Unit(u) = entry {
            u.children = children.remove(&u.id).unwrap_or_default();
            u.run = overlays.remove(&u.id);
        }
    }
    Ok(entries)
}

/// One unit; without a reference, the active one.
pub fn unit_status(repo: &Repo, reference: Option<&str>, step: &str) -> Result<UnitView, Refusal> {
    let config = crate::run::settings::load_config(repo, step)?;
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
    // Children need only each unit's `parent`: read frontmatter, not whole units.
    let parents: Vec<(String, Frontmatter)> = ids
        .iter()
        .filter(|other| **other != id)
        .filter_map(|other| {
            let text = read_text(&repo.unit_paths(other).iced).ok()?;
            Some((other.clone(), frontmatter::parse(&text).data))
        })
        .collect();
    let mut children = children_of(parents.iter().map(|(id, fm)| (id.as_str(), fm)));
    let lint = repo.lint_unit(&unit, Stage::Validate, &Numbers::new(&ids));
    let mut summary = UnitSummary::new(&unit, &lint, &config, active.as_deref());
    summary.children = children.remove(&id).unwrap_or_default();
    summary.run = run_overlays(repo).remove(&id);
    let coverage = crate::unit::coverage(&unit.parsed);
    Ok(UnitView {
        summary,
        unit,
        lint,
        coverage,
    })
}
