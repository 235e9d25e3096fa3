//! A repository managed by iced: where its root is, which units it holds, and reading and writing
//! them. Every file write goes through `store` (atomic, no symlinked leaves).

use crate::config::{Config, ConfigError};
use crate::refusal::{io_error, Exit, Refusal};
use crate::store::{self, StoreError};
use crate::unit::id::leading_number;
use crate::unit::{lint, parse_unit, LintContext, LintReport, ParsedUnit, Stage};
use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

/// A unit file larger than this is refused: a contract is a few kilobytes of text.
pub const UNIT_LIMIT: u64 = 1024 * 1024;

#[derive(Debug, Clone)]
pub struct Repo {
    pub root: PathBuf,
}

/// One unit as read from disk.
#[derive(Debug, Clone)]
pub struct UnitFile {
    pub id: String,
    pub path: PathBuf,
    pub text: String,
    pub parsed: ParsedUnit,
}

#[derive(Debug, Clone)]
pub struct UnitPaths {
    pub dir: PathBuf,
    pub iced: PathBuf,
    pub decisions: PathBuf,
    pub evidence: PathBuf,
    pub verify: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("`{path}` is larger than {limit} bytes")]
    TooLarge { path: PathBuf, limit: u64 },
    #[error("`{path}` is not valid UTF-8 (line {line})")]
    NotUtf8 { path: PathBuf, line: usize },
    #[error(transparent)]
    Store(StoreError),
}

impl ReadError {
    pub fn refusal(self, step: &str) -> Refusal {
        match self {
            ReadError::TooLarge { ref path, limit } => Refusal::new(
                step,
                "unit-too-large",
                format!("`{}` is over {} KiB; iced does not read unit files that large", path.display(), limit / 1024),
                "a unit is a contract of a few kilobytes: move long material into files the Context section points to",
            ),
            ReadError::NotUtf8 { ref path, line } => Refusal::new(
                step,
                "unit-not-utf8",
                format!("`{}` is not valid UTF-8 (first bad byte on line {line})", path.display()),
                "save the file as UTF-8; if it is not a unit, move it out of `intent/`",
            ),
            ReadError::Store(e @ StoreError::NotRegular { .. }) => store_refusal(step, e),
            ReadError::Store(e) if e.is_not_found() => Refusal::new(
                step,
                "unit-not-found",
                e.to_string(),
                "run `iced list` to see the units this repository has",
            ),
            ReadError::Store(e) => Refusal::new(
                step,
                "unit-unreadable",
                e.to_string(),
                "check the file's permissions, then run the command again",
            ),
        }
    }
}

/// Read a unit file's text: size-limited, UTF-8 or refused with the line of the first bad byte.
pub fn read_text(path: &Path) -> Result<String, ReadError> {
    let bytes = store::read_limited(path, UNIT_LIMIT).map_err(|e| match e {
        StoreError::TooLarge { path, limit } => ReadError::TooLarge { path, limit },
        e => ReadError::Store(e),
    })?;
    String::from_utf8(bytes).map_err(|e| {
        let valid = e.utf8_error().valid_up_to();
        let line = e.as_bytes()[..valid]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1;
        ReadError::NotUtf8 {
            path: path.to_owned(),
            line,
        }
    })
}

pub fn config_refusal(step: &str, e: ConfigError) -> Refusal {
    match e {
        ConfigError::Store(e) => store_refusal(step, e),
        e => Refusal::new(
            step,
            "config-invalid",
            e.to_string(),
            "fix `.iced/config.json` (`iced schema config` lists every key and its type)",
        ),
    }
}

pub fn store_refusal(step: &str, e: StoreError) -> Refusal {
    match e {
        StoreError::Symlink(path) => Refusal::new(
            step,
            "path-symlink",
            format!(
                "`{}` is a symbolic link; iced does not read or write through links here",
                path.display()
            ),
            "replace the link with a regular file, then run the command again",
        ),
        e @ StoreError::NotRegular { .. } => Refusal::new(
            step,
            "not-a-regular-file",
            e.to_string(),
            "replace it with a regular file (or remove it), then run the command again",
        ),
        e => io_error(step, e),
    }
}

impl Repo {
    /// The nearest ancestor of `cwd` (or `cwd` itself) that holds a `.iced/` directory; it must
    /// also hold `intent/`.
    pub fn discover(cwd: &Path, step: &str) -> Result<Repo, Refusal> {
        let mut dir = Some(cwd);
        while let Some(d) = dir {
            if d.join(".iced").is_dir() {
                if !d.join("intent").is_dir() {
                    return Err(Refusal::new(
                        step,
                        "not-initialized",
                        format!("`{}` has `.iced/` but no `intent/` directory", d.display()),
                        "run `iced init` there: it recreates what is missing and changes nothing else",
                    ));
                }
                return Ok(Repo { root: d.to_owned() });
            }
            dir = d.parent();
        }
        Err(Refusal::new(
            step,
            "not-initialized",
            format!("no `.iced/` directory in `{}` or any parent", cwd.display()),
            "run `iced init` at the top of the repository first",
        ))
    }

    pub fn intent_dir(&self) -> PathBuf {
        self.root.join("intent")
    }

    pub fn unit_paths(&self, id: &str) -> UnitPaths {
        let dir = self.intent_dir().join(id);
        UnitPaths {
            iced: dir.join("iced.md"),
            decisions: dir.join("decisions.md"),
            evidence: dir.join("evidence.md"),
            verify: dir.join("verify.json"),
            dir,
        }
    }

    /// The config file parsed and its base keys checked: verbs load it through
    /// `run::settings::load_config`, which checks the whole of it.
    pub fn config_file(&self, step: &str) -> Result<Config, Refusal> {
        Config::load(&self.root).map_err(|e| config_refusal(step, e))
    }

    /// Names of every entry in `intent/` (units or not), sorted; empty when `intent/` is missing.
    fn intent_entries(&self) -> Result<Vec<String>, StoreError> {
        let dir = self.intent_dir();
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(StoreError::io("read directory", &dir, e)),
        };
        let mut names: Vec<String> = entries
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| !n.starts_with('.'))
            .collect();
        names.sort();
        Ok(names)
    }

    /// Every unit: a folder in `intent/` holding an `iced.md`, sorted by id. An `iced.md` that is
    /// not a regular file (a FIFO) still makes a unit, so that reading it is refused naming it
    /// (SPEC 24.6) rather than the unit going missing.
    pub fn unit_ids(&self, step: &str) -> Result<Vec<String>, Refusal> {
        let names = self.intent_entries().map_err(|e| store_refusal(step, e))?;
        Ok(names
            .into_iter()
            .filter(|n| fs::metadata(self.unit_paths(n).iced).is_ok_and(|m| !m.is_dir()))
            .collect())
    }

    /// The number the next unit gets: one above the highest `NNN-` entry in `intent/`.
    pub fn next_number(&self) -> Result<u64, StoreError> {
        Ok(self
            .intent_entries()?
            .iter()
            .filter_map(|n| leading_number(n))
            .max()
            .unwrap_or(0)
            .saturating_add(1))
    }

    /// Find a unit by its full id, its number (`42`, `042`) or a substring naming exactly one unit.
    pub fn resolve(&self, reference: &str, step: &str) -> Result<String, Refusal> {
        // `next` is the queue's word (SPEC 3, 20.13): never a substring of some id.
        if reference == crate::unit::id::RESERVED {
            return Err(Refusal::new(
                step,
                "name-reserved",
                "`next` names no unit: it is reserved for `iced build next`, which builds the readiest unit of the queue",
                "name the unit by its number or its full id (`iced list` shows them)",
            ));
        }
        let ids = self.unit_ids(step)?;
        if ids.iter().any(|id| id == reference) {
            return Ok(reference.to_owned());
        }
        if !reference.is_empty() && reference.bytes().all(|b| b.is_ascii_digit()) {
            let wanted: Option<u64> = reference.parse().ok();
            let hits: Vec<&String> = ids
                .iter()
                .filter(|id| wanted.is_some() && leading_number(id) == wanted)
                .collect();
            return match hits.as_slice() {
                [one] => Ok((*one).clone()),
                [] => Err(not_found(step, reference, ids.is_empty())),
                many => Err(ambiguous(step, reference, many)),
            };
        }
        let hits: Vec<&String> = ids
            .iter()
            .filter(|id| !reference.is_empty() && id.contains(reference))
            .collect();
        match hits.as_slice() {
            [one] => Ok((*one).clone()),
            [] => Err(not_found(step, reference, ids.is_empty())),
            many => Err(ambiguous(step, reference, many)),
        }
    }

    pub fn read_unit(&self, id: &str, step: &str) -> Result<UnitFile, Refusal> {
        let path = self.unit_paths(id).iced;
        let text = read_text(&path).map_err(|e| e.refusal(step))?;
        if text.contains('\0') {
            return Err(Refusal::new(
                step,
                "unit-unreadable",
                format!("`{}` holds NUL bytes: it is binary, not a unit", path.display()),
                "restore the unit's text from git (`git checkout -- <path>`), or move the file out of `intent/`",
            ));
        }
        let parsed = parse_unit(&text);
        Ok(UnitFile {
            id: id.to_owned(),
            path,
            text,
            parsed,
        })
    }

    /// Replace a unit's text atomically (LF line endings, as every reader sees it).
    pub fn write_unit(&self, id: &str, text: &str, step: &str) -> Result<(), Refusal> {
        store::write_atomic(&self.unit_paths(id).iced, text.as_bytes(), 0o644)
            .map_err(|e| store_refusal(step, e))
    }

    /// Lint a unit as it lives in this repository (folder name, units sharing its number,
    /// evidence file).
    pub fn lint_unit(&self, unit: &UnitFile, stage: Stage, numbers: &Numbers) -> LintReport {
        let same_number = numbers.others(&unit.id);
        let ctx = LintContext {
            text: Some(&unit.text),
            // Only the accept stage asks; a stat per unit is a cost `list` need not pay.
            evidence_exists: (stage == Stage::Accept)
                .then(|| self.unit_paths(&unit.id).evidence.is_file()),
            folder: Some(&unit.id),
            same_number: &same_number,
        };
        lint(&unit.parsed, stage, &ctx)
    }

    fn active_path(&self) -> PathBuf {
        self.root.join(".iced").join("active")
    }

    /// The active unit, when `.iced/active` names one that exists.
    pub fn active(&self) -> Option<String> {
        let bytes = store::read_limited(&self.active_path(), 4096).ok()?;
        let text = String::from_utf8(bytes).ok()?;
        let id = text.trim();
        (!id.is_empty() && self.unit_paths(id).iced.is_file()).then(|| id.to_owned())
    }

    pub fn set_active(&self, id: Option<&str>, step: &str) -> Result<(), Refusal> {
        let path = self.active_path();
        match id {
            Some(id) => store::write_atomic(&path, format!("{id}\n").as_bytes(), 0o644),
            None => store::remove_if_present(&path).map(|_| ()),
        }
        .map_err(|e| store_refusal(step, e))
    }

    /// Append one entry to a unit's `decisions.md` (created with its header when missing).
    pub fn append_decision(
        &self,
        id: &str,
        author: &str,
        lines: &[(&str, &str)],
        step: &str,
    ) -> Result<PathBuf, Refusal> {
        let path = self.unit_paths(id).decisions;
        let mut entry = String::new();
        if !path.exists() && fs::symlink_metadata(&path).is_err() {
            entry.push_str(&decisions_header(id));
        }
        entry.push_str(&format!("\n## {} ({author})\n", crate::clock::now_iso()));
        for (label, text) in lines {
            // One entry per line: a newline in the text must not start a new heading or item.
            let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
            entry.push_str(&format!("- {label}: {text}\n"));
        }
        store::append(&path, entry.as_bytes(), 0o644).map_err(|e| store_refusal(step, e))?;
        Ok(path)
    }
}

/// Unit ids by their number, built once so that finding a unit's namesakes is not a scan of every
/// id per unit.
#[derive(Debug, Default)]
pub struct Numbers(HashMap<u64, Vec<String>>);

impl Numbers {
    pub fn new(ids: &[String]) -> Numbers {
        let mut map: HashMap<u64, Vec<String>> = HashMap::new();
        for id in ids {
            if let Some(n) = leading_number(id) {
                map.entry(n).or_default().push(id.clone());
            }
        }
        Numbers(map)
    }

    /// The other units that use `id`'s number.
    pub fn others(&self, id: &str) -> Vec<String> {
        leading_number(id)
            .and_then(|n| self.0.get(&n))
            .map(|ids| ids.iter().filter(|o| *o != id).cloned().collect())
            .unwrap_or_default()
    }
}

pub fn decisions_header(id: &str) -> String {
    format!("# Decisions: {id}\n\nAppend-only log of significant choices made while building this unit. Audited, not approved.\n")
}

fn not_found(step: &str, reference: &str, no_units: bool) -> Refusal {
    if no_units {
        Refusal::new(
            step,
            "unit-not-found",
            format!("no unit `{reference}`: `intent/` holds no units yet"),
            "create one with `iced new \"<what you want>\"`",
        )
    } else {
        Refusal::new(
            step,
            "unit-not-found",
            format!("no unit matches `{reference}`"),
            "run `iced list` to see the units this repository has",
        )
    }
}

fn ambiguous(step: &str, reference: &str, matches: &[&String]) -> Refusal {
    let list: Vec<String> = matches.iter().map(|m| format!("`{m}`")).collect();
    Refusal::new(
        step,
        "unit-ambiguous",
        format!(
            "`{reference}` matches {} units: {}",
            matches.len(),
            list.join(", ")
        ),
        "name the unit by its full id",
    )
    .detail(
        "matches",
        serde_json::Value::from(matches.iter().map(|m| m.as_str()).collect::<Vec<_>>()),
    )
    .exit(Exit::Refused)
}
