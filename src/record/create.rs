//! `new` and `child`: allocate the next id under a lock, render the template, write the unit.

use super::record_metric;
use crate::refusal::{io_error, Exit, Refusal};
use crate::repo::{decisions_header, read_text, store_refusal, Repo};
use crate::store;
use crate::templates;
use crate::unit::frontmatter::{apply, Edit};
use crate::unit::id::format_id;
use crate::unit::{Scalar, UnitType, SPEC_VERSION};
use serde::Serialize;
use std::fs;

pub const TITLE_MAX: usize = 120;

pub struct NewUnit<'a> {
    pub line: &'a str,
    pub kind: Option<UnitType>,
    pub parent: Option<&'a str>,
}

#[derive(Debug, Serialize)]
pub struct Created {
    pub id: String,
    pub path: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    #[serde(skip)]
    pub kind: UnitType,
    #[serde(skip)]
    pub parent: Option<String>,
}

/// The type a one-line request names with its first word, and the title: the line with a leading
/// `<typeword>:` dropped, whitespace collapsed, cut to 120 characters.
pub fn infer_type_and_title(line: &str) -> (Option<UnitType>, String) {
    let collapsed = line.split_whitespace().collect::<Vec<_>>().join(" ");
    let first = collapsed.split(' ').next().unwrap_or("");
    let word = first.trim_end_matches(|c: char| !c.is_alphanumeric());
    let kind = UnitType::from_leading_word(word);
    let mut title = collapsed.as_str();
    if kind.is_some() && first.ends_with(':') {
        title = collapsed[first.len()..].trim_start();
    }
    let title: String = title.chars().take(TITLE_MAX).collect();
    (kind, title.trim_end().to_owned())
}

/// Create a unit from a one-line request.
pub fn new_unit(repo: &Repo, request: NewUnit<'_>, step: &str) -> Result<Created, Refusal> {
    let config = crate::run::settings::load_config(repo, step)?;
    let (inferred, title) = infer_type_and_title(request.line);
    if title.is_empty() {
        return Err(Refusal::new(
            step,
            "usage",
            "the one-line request is empty",
            "say what you want in a few words: `iced new \"fix the login timeout\"`",
        )
        .exit(Exit::Usage));
    }
    // `iced build next` is the queue: a unit whose slug is `next` could never be named so (SPEC 3).
    if crate::unit::id::slugify(&title) == crate::unit::id::RESERVED {
        return Err(Refusal::new(
            step,
            "name-reserved",
            format!("the title `{title}` gives the slug `next`, a word iced reserves for `iced build next` (the queue)"),
            "give the unit a title that says what it does: `iced new \"next release notes\"`",
        ));
    }
    let kind = request.kind.or(inferred).unwrap_or(UnitType::Feature);
    let parent = match request.parent {
        Some(reference) => Some(repo.resolve(reference, step).map_err(|r| {
            if r.code == "unit-not-found" {
                Refusal::new(step, "parent-not-found", r.reason, r.remedy)
            } else {
                r
            }
        })?),
        None => None,
    };
    let risk = crate::unit::Risk::Medium;
    let tier = kind.default_tier();
    let autonomy = config.default_autonomy_for(risk);
    let created = crate::clock::now_iso();

    let id = allocate(repo, &title, step)?;
    let paths = repo.unit_paths(&id);
    let template = repo
        .root
        .join(".iced")
        .join("templates")
        .join(format!("{kind}.md"));
    let template = read_text(&template).unwrap_or_else(|_| templates::builtin(kind).to_owned());
    let request_text = request.line.trim().replace("-->", "-- >");
    let autonomy_text = autonomy.to_string();
    let text = templates::render(
        &template,
        &[
            ("id", &id),
            ("title", &title),
            ("type", kind.as_str()),
            ("tier", tier.as_str()),
            ("autonomy", &autonomy_text),
            ("risk", risk.as_str()),
            ("created", &created),
            ("request", &request_text),
            ("parent", parent.as_deref().unwrap_or("null")),
        ],
    );
    let text = apply(
        &text,
        &[
            Edit::set("iced", SPEC_VERSION),
            Edit::set("id", id.as_str()),
            Edit::set("title", title.as_str()),
            Edit::set("type", kind.as_str()),
            Edit::set("tier", tier.as_str()),
            Edit::set("parent", Scalar::from(parent.clone())),
            Edit::set("status", "draft"),
            Edit::set("autonomy", autonomy),
            Edit::set("risk", risk.as_str()),
            Edit::set("attempts", 0),
            Edit::set("created", created.as_str()),
        ],
    );
    if let Err(e) = store::write_atomic(&paths.iced, text.as_bytes(), 0o644) {
        // Give the number back: an empty folder would only push the next unit's number up.
        let _ = fs::remove_dir(&paths.dir);
        return Err(store_refusal(step, e));
    }
    // The unit exists from here on; what follows is bookkeeping, and a failure in it is reported
    // as a warning so that nobody runs `new` again and gets a second unit.
    let mut warnings = Vec::new();
    if fs::symlink_metadata(&paths.decisions).is_err() {
        if let Err(e) =
            store::write_atomic(&paths.decisions, decisions_header(&id).as_bytes(), 0o644)
        {
            warnings.push(format!(
                "the unit is created, but its decisions.md is not: {e}"
            ));
        }
    }
    if let Err(r) = repo.set_active(Some(&id), step) {
        warnings.push(format!(
            "the unit is created, but it is not the active unit: {}",
            r.reason
        ));
    }
    let mut data = serde_json::Map::new();
    data.insert("risk".into(), risk.as_str().into());
    data.insert("autonomy".into(), autonomy.into());
    data.insert("type".into(), kind.as_str().into());
    data.insert("tier".into(), tier.as_str().into());
    record_metric(repo, &id, "created", data, &mut warnings);
    Ok(Created {
        path: format!("intent/{id}/iced.md"),
        id,
        kind,
        parent,
        warnings,
    })
}

/// Reserve the next id by creating its folder, holding `.iced/tmp/new.lock` so two concurrent
/// `new` commands never read the same highest number.
fn allocate(repo: &Repo, title: &str, step: &str) -> Result<String, Refusal> {
    use fs2::FileExt;
    let tmp = repo.root.join(".iced").join("tmp");
    store::create_dir_all(&tmp).map_err(|e| store_refusal(step, e))?;
    let lock_path = tmp.join("new.lock");
    let lock = store::open_lock_file(&lock_path, 0o644).map_err(|e| store_refusal(step, e))?;
    lock.lock_exclusive()
        .map_err(|e| io_error(step, format!("lock `{}`: {e}", lock_path.display())))?;
    store::create_dir_all(&repo.intent_dir()).map_err(|e| store_refusal(step, e))?;
    let mut number = repo.next_number().map_err(|e| store_refusal(step, e))?;
    // Another tool may create folders without our lock; step past any it took meanwhile.
    for _ in 0..1000 {
        let id = format_id(number, title);
        let dir = repo.intent_dir().join(&id);
        match fs::create_dir(&dir) {
            Ok(()) => {
                let _ = store::sync_dir(&repo.intent_dir());
                return Ok(id);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => number += 1,
            Err(e) => return Err(io_error(step, format!("create `{}`: {e}", dir.display()))),
        }
    }
    Err(io_error(
        step,
        "could not find a free unit number after 1000 tries",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_and_title_from_the_line() {
        let t = |s: &str| infer_type_and_title(s);
        assert_eq!(
            t("bug: login   times out"),
            (Some(UnitType::Bug), "login times out".into())
        );
        assert_eq!(
            t("Fix the login timeout"),
            (Some(UnitType::Bug), "Fix the login timeout".into())
        );
        assert_eq!(
            t("chore: bump deps"),
            (Some(UnitType::Chore), "bump deps".into())
        );
        assert_eq!(
            t("Project, the big one"),
            (Some(UnitType::Project), "Project, the big one".into())
        );
        assert_eq!(t("dark mode"), (None, "dark mode".into()));
        assert_eq!(t("debug: something"), (None, "debug: something".into()));
        assert_eq!(t("  \n "), (None, String::new()));
        assert_eq!(t(&"é".repeat(200)).1.chars().count(), TITLE_MAX);
    }
}
