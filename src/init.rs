//! `iced init`: create or refresh iced's own files in a repository. Idempotent and never deletes:
//! files a person may have edited are written only when absent; templates are refreshed only when
//! they differ from the built-in ones; ignore and attribute lines are appended only when missing.

use crate::config;
use crate::store::{self, StoreError};
use crate::templates;
use crate::unit::UnitType;
use serde::Serialize;
use std::path::Path;

mod mcp;

#[derive(Debug, Default, Serialize, PartialEq, Eq)]
pub struct InitReport {
    pub created: Vec<String>,
    pub updated: Vec<String>,
    pub skipped: Vec<String>,
}

/// `.gitattributes` lines besides [`UNION_ATTRIBUTES`], which `iced init` writes after them.
pub const GITATTRIBUTES_LINES: &[&str] = &["intent/**/*.md text eol=lf"];
/// iced's append-only files merge by keeping both sides' lines (SPEC 23.1); the loop's own merges
/// use these lines whether or not the repository's `.gitattributes` has them.
pub const UNION_ATTRIBUTES: &[&str] = &[
    ".iced/metrics.jsonl merge=union",
    "intent/*/decisions.md merge=union",
];
pub const GITIGNORE_LINES: &[&str] = &[".iced/active", ".iced/tmp/"];

const INTENT_README: &str = "# intent/

One folder per ICED unit of work. `<id>/iced.md` is the contract a person signs off (Intent and
Expectations are frozen by hash at approval); `decisions.md` is the build's decision log;
`evidence.md` and `verify.json` are written by the verification, never by hand.

Create, approve, build and accept units with `iced` (`iced --help`).
";

const PRODUCT_MEMORY: &str = "# Product memory

<!-- What this product is, who relies on it, and the behaviour it must keep. Units cite this as
     [product] context. Short, factual, updated when a unit changes what the product does. -->

## Purpose

## Users

## Behaviour that must hold

## Non-functional expectations
";

const KNOWLEDGE_MEMORY: &str = "# Knowledge

<!-- Team and organisation standards units cite as [knowledge] context: conventions, patterns,
     security and compliance rules. Shared files elsewhere can be listed in `.iced/config.json`
     under memory.knowledge. -->

## Engineering conventions

## Security and compliance

## Patterns to prefer or avoid
";

/// Test commands worth putting in `verify.commands` of a new config, when one is obvious.
pub fn detect_verify_commands(root: &Path) -> Vec<String> {
    let has = |p: &str| root.join(p).exists();
    if let Ok(bytes) = store::read_limited(&root.join("package.json"), EXISTING_LIMIT) {
        let test = serde_json::from_slice::<serde_json::Value>(&bytes)
            .ok()
            .and_then(|v| {
                v.pointer("/scripts/test")
                    .and_then(|t| t.as_str())
                    .map(str::to_owned)
            });
        if let Some(test) = test {
            if !test.trim().is_empty() && !test.contains("no test specified") {
                return vec!["npm test".into()];
            }
        }
    }
    if has("Cargo.toml") {
        return vec!["cargo test".into()];
    }
    if has("go.mod") {
        return vec!["go test ./...".into()];
    }
    if has("pyproject.toml") || has("pytest.ini") {
        return vec!["python -m pytest -q".into()];
    }
    Vec::new()
}

fn rel(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned()
}

/// Files init looks at (its own, `.gitignore`, `package.json`) are compared or scanned whole; one
/// larger than this is not something init should rewrite.
const EXISTING_LIMIT: u64 = 16 * 1024 * 1024;

/// Write `content` to `path` when it is absent, or when `overwrite` and it differs.
fn write_file(
    root: &Path,
    path: &Path,
    content: &str,
    overwrite: bool,
    report: &mut InitReport,
) -> Result<(), StoreError> {
    let name = rel(root, path);
    let existing = match store::read_limited(path, EXISTING_LIMIT) {
        Ok(bytes) => Some(bytes),
        Err(e) if e.is_not_found() => None,
        Err(e) => return Err(e),
    };
    match existing {
        Some(_) if !overwrite => report.skipped.push(name),
        Some(bytes) if bytes == content.as_bytes() => report.skipped.push(name),
        Some(_) => {
            store::write_atomic(path, content.as_bytes(), 0o644)?;
            report.updated.push(name);
        }
        None => {
            if let Some(dir) = path.parent() {
                store::create_dir_all(dir)?;
            }
            store::write_atomic(path, content.as_bytes(), 0o644)?;
            report.created.push(name);
        }
    }
    Ok(())
}

/// Append the lines `path` lacks (compared trimmed), keeping everything it has byte for byte: the
/// new lines use the file's own line ending.
fn ensure_lines(
    root: &Path,
    path: &Path,
    lines: &[&str],
    report: &mut InitReport,
) -> Result<(), StoreError> {
    let current = match store::read_limited(path, EXISTING_LIMIT) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) if e.is_not_found() => String::new(),
        Err(e) => return Err(e),
    };
    let have: Vec<&str> = current.lines().map(str::trim).collect();
    let missing: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| !have.contains(l))
        .collect();
    if missing.is_empty() {
        report.skipped.push(rel(root, path));
        return Ok(());
    }
    let eol = if current.contains("\r\n") {
        "\r\n"
    } else {
        "\n"
    };
    let mut text = current;
    if !text.is_empty() && !text.ends_with('\n') {
        text.push_str(eol);
    }
    for line in missing {
        text.push_str(line);
        text.push_str(eol);
    }
    write_file(root, path, &text, true, report)
}

/// Create or refresh iced's files under `root`. `force` rewrites the config with the defaults.
pub fn init_repo(root: &Path, force: bool) -> Result<InitReport, StoreError> {
    let mut report = InitReport::default();
    let iced = root.join(".iced");
    let mut config = config::defaults();
    config["verify"]["commands"] = detect_verify_commands(root).into();
    let mut config_text = serde_json::to_string_pretty(&config).expect("JSON serialises");
    config_text.push('\n');
    write_file(
        root,
        &iced.join("config.json"),
        &config_text,
        force,
        &mut report,
    )?;
    write_file(
        root,
        &iced.join("memory").join("product.md"),
        PRODUCT_MEMORY,
        false,
        &mut report,
    )?;
    write_file(
        root,
        &iced.join("memory").join("knowledge.md"),
        KNOWLEDGE_MEMORY,
        false,
        &mut report,
    )?;
    for &kind in UnitType::ALL {
        let path = iced.join("templates").join(format!("{kind}.md"));
        write_file(root, &path, templates::builtin(kind), true, &mut report)?;
    }
    write_file(
        root,
        &root.join("intent").join("README.md"),
        INTENT_README,
        false,
        &mut report,
    )?;
    let attributes: Vec<&str> = GITATTRIBUTES_LINES
        .iter()
        .chain(UNION_ATTRIBUTES)
        .copied()
        .collect();
    ensure_lines(root, &root.join(".gitattributes"), &attributes, &mut report)?;
    ensure_lines(root, &root.join(".gitignore"), GITIGNORE_LINES, &mut report)?;
    Ok(report)
}

/// The hosts `iced init --host` sets up (SPEC 13): Claude Code gets the guard's hook (SPEC 24.11)
/// and iced's MCP server; Codex the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Host {
    Claude,
    Codex,
}

impl Host {
    pub fn as_str(self) -> &'static str {
        match self {
            Host::Claude => "claude",
            Host::Codex => "codex",
        }
    }
}

/// The command a repository's hook runs: `iced` found on PATH, since the file is shared.
pub const CLAUDE_HOOK_COMMAND: &str = "iced hook claude";

/// What `init --host` writes to one of the host's files, decided before anything is written.
#[derive(Debug)]
pub struct HostPlan {
    path: std::path::PathBuf,
    /// The new text; none when the file already has what iced puts there.
    text: Option<String>,
    existed: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("`{path}` cannot take {what}: {why}")]
    Invalid {
        path: String,
        what: &'static str,
        why: String,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Every file of the host's, read and merged in memory: the guard's hook into Claude Code's
/// settings and iced's MCP server into `.mcp.json`, or the server into Codex's project config. A
/// file that cannot take its entry, a symbolic link, or anything that is not a regular file is
/// refused before `init` writes anything.
pub fn plan_host(root: &Path, host: Host) -> Result<Vec<HostPlan>, HostError> {
    match host {
        Host::Claude => Ok(vec![
            plan_file(root, &[".claude", "settings.json"], "the hook", |text| {
                crate::hook::claude::merge_hook(text, CLAUDE_HOOK_COMMAND).map_err(|e| e.0)
            })?,
            plan_file(root, &[".mcp.json"], "the MCP entry", mcp::merge_claude)?,
        ]),
        Host::Codex => Ok(vec![plan_file(
            root,
            &[".codex", "config.toml"],
            "the MCP entry",
            mcp::merge_codex,
        )?]),
    }
}

/// What Codex needs of the person before it reads the project's config (SPEC 13).
pub fn host_note(root: &Path, host: Host) -> Option<String> {
    (host == Host::Codex).then(|| {
        format!(
            "Codex reads .codex/config.toml only in a project it trusts: start `codex` here once and trust it, or add `[projects.\"{}\"]` with `trust_level = \"trusted\"` to your ~/.codex/config.toml",
            root.display()
        )
    })
}

/// One host file (`parts` under `root`) and its merged text.
fn plan_file(
    root: &Path,
    parts: &[&str],
    what: &'static str,
    merge: impl FnOnce(Option<&str>) -> Result<Option<String>, String>,
) -> Result<HostPlan, HostError> {
    let path = parts
        .iter()
        .fold(root.to_path_buf(), |p, part| p.join(part));
    let name = rel(root, &path);
    let invalid = |why: String| HostError::Invalid {
        path: name.clone(),
        what,
        why,
    };
    let existing = match std::fs::symlink_metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(StoreError::io("inspect", &path, e).into()),
        Ok(meta) if meta.file_type().is_symlink() => return Err(StoreError::Symlink(path).into()),
        Ok(meta) if !meta.is_file() => return Err(invalid("it is not a regular file".into())),
        Ok(_) => {
            let bytes = store::read_limited(&path, config::CONFIG_LIMIT)?;
            Some(String::from_utf8(bytes).map_err(|_| invalid("it is not UTF-8 text".into()))?)
        }
    };
    let text = merge(existing.as_deref()).map_err(invalid)?;
    Ok(HostPlan {
        path,
        text,
        existed: existing.is_some(),
    })
}

/// Write what [`plan_host`] decided.
pub fn apply_host(
    root: &Path,
    plans: &[HostPlan],
    report: &mut InitReport,
) -> Result<(), StoreError> {
    for plan in plans {
        let name = rel(root, &plan.path);
        let Some(text) = &plan.text else {
            report.skipped.push(name);
            continue;
        };
        if let Some(dir) = plan.path.parent() {
            store::create_dir_all(dir)?;
        }
        store::write_atomic(&plan.path, text.as_bytes(), 0o644)?;
        if plan.existed {
            report.updated.push(name);
        } else {
            report.created.push(name);
        }
    }
    Ok(())
}
