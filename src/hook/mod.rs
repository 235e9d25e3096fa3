//! The guard where agents work (SPEC 24.11): a proposed tool call, read from the repository around
//! it into the guard's context (root, config, active unit, unit texts, the text before a write,
//! who is asking), and judged. `claude` speaks Claude Code's hook format and writes the settings
//! that install the hook. This module reads files, never writes one (except `claude`'s settings,
//! through `store`), and never runs a process: a hook runs on every tool call and must be quick.

pub mod claude;

use crate::config::Config;
use crate::guard::{self, After, Context, Decision, Gate, Proposal, Who};
use serde::Deserialize;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

/// Standard input larger than this is refused: a tool call is a file's text at most.
pub const INPUT_LIMIT: u64 = 16 * 1024 * 1024;
/// A file read to predict a write: larger ones count as unreadable.
const FILE_LIMIT: u64 = 16 * 1024 * 1024;
const SMALL_LIMIT: u64 = 64 * 1024;

/// Why a call could not be judged: its input, the role it came with, or the repository's config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub code: &'static str,
    pub reason: String,
    pub remedy: String,
}

impl Problem {
    fn input(reason: impl Into<String>) -> Problem {
        Problem {
            code: "guard-input",
            reason: reason.into(),
            remedy: "send one tool call as a JSON object: {\"tool\": \"write\"|\"edit\"|\"shell\"|\"read\", \"path\", \"content\", \"edits\": [{\"old\", \"new\"}], \"command\", \"cwd\"}".into(),
        }
    }
}

/// What a write leaves, as the tool says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// The whole new text.
    Content(String),
    /// Exact replacements applied together to the current text (each old text once).
    Edits(Vec<(String, String)>),
    /// Replacements applied one after the other (Claude Code's MultiEdit); `all` replaces every
    /// occurrence, else the old text must occur once.
    Sequential(Vec<Replace>),
    /// The tool's result cannot be computed (a notebook cell edit).
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replace {
    pub old: String,
    pub new: String,
    pub all: bool,
}

/// One proposed tool call, whatever host it comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    Write { path: String, change: Change },
    Shell { command: String },
    Read { tool: String },
}

/// `iced guard`'s input (SPEC 24.11).
#[derive(Debug, Deserialize)]
pub struct GuardInput {
    pub tool: String,
    pub path: Option<String>,
    pub content: Option<String>,
    pub edits: Option<Vec<EditInput>>,
    pub command: Option<String>,
    pub cwd: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct EditInput {
    pub old: String,
    pub new: String,
}

impl GuardInput {
    pub fn parse(bytes: &[u8]) -> Result<GuardInput, Problem> {
        serde_json::from_slice(bytes)
            .map_err(|e| Problem::input(format!("the tool call is not valid: {e}")))
    }

    pub fn call(self) -> Result<Call, Problem> {
        let path = |p: Option<String>, tool: &str| {
            p.filter(|p| !p.is_empty())
                .ok_or_else(|| Problem::input(format!("a `{tool}` call needs `path`")))
        };
        Ok(match self.tool.as_str() {
            "write" => Call::Write {
                path: path(self.path, "write")?,
                change: Change::Content(
                    self.content
                        .ok_or_else(|| Problem::input("a `write` call needs `content`"))?,
                ),
            },
            "edit" => Call::Write {
                path: path(self.path, "edit")?,
                change: Change::Edits(
                    self.edits
                        .ok_or_else(|| Problem::input("an `edit` call needs `edits`"))?
                        .into_iter()
                        .map(|e| (e.old, e.new))
                        .collect(),
                ),
            },
            "shell" => Call::Shell {
                command: self
                    .command
                    .ok_or_else(|| Problem::input("a `shell` call needs `command`"))?,
            },
            other => Call::Read {
                tool: other.to_owned(),
            },
        })
    }
}

/// Who asks, from `ICED_ROLE` and `ICED_LANE` (a lane is named after its unit).
pub fn who_from(role: Option<&str>, lane: Option<&str>) -> Result<Who, Problem> {
    match role.unwrap_or("") {
        role @ ("implementer" | "test-writer") => match lane.filter(|l| is_component(l)) {
            Some(lane) if role == "test-writer" => Ok(Who::TestWriter {
                unit: lane.to_owned(),
                // The config's globs, read with the repository (`judge_call`).
                test_paths: Vec::new(),
            }),
            Some(lane) => Ok(Who::Implementer {
                unit: lane.to_owned(),
            }),
            None => Err(Problem {
                code: "guard-input",
                reason: format!(
                    "ICED_ROLE is `{role}` but ICED_LANE does not name the lane's unit"
                ),
                remedy: "start the implementer with ICED_LANE set to its lane, as the loop does"
                    .into(),
            }),
        },
        "validator" => Ok(Who::Validator),
        "refuter" => Ok(Who::Refuter),
        _ => Ok(Who::Agent),
    }
}

/// A single normal path component: a unit id read from a file or the environment must not
/// point anywhere else.
fn is_component(s: &str) -> bool {
    let mut parts = Path::new(s).components();
    matches!(parts.next(), Some(Component::Normal(_))) && parts.next().is_none()
}

/// Read standard input, at most [`INPUT_LIMIT`] bytes.
pub fn read_input(mut input: impl Read) -> Result<Vec<u8>, Problem> {
    let mut bytes = Vec::new();
    input
        .by_ref()
        .take(INPUT_LIMIT + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Problem::input(format!("standard input cannot be read: {e}")))?;
    if bytes.len() as u64 > INPUT_LIMIT {
        return Err(Problem::input(format!(
            "the tool call is larger than {} MiB",
            INPUT_LIMIT / 1024 / 1024
        )));
    }
    Ok(bytes)
}

/// A regular file's bytes (through `store`: never blocking on a FIFO); `None` when it is missing,
/// not a regular file, or larger than `limit`.
fn read_regular(path: &Path, limit: u64) -> Option<Vec<u8>> {
    crate::store::read_limited(path, limit).ok()
}

fn read_text(path: &Path, limit: u64) -> Option<String> {
    String::from_utf8(read_regular(path, limit)?).ok()
}

/// `path` with every symbolic link followed: the longest existing ancestor canonicalised, the
/// rest appended (a dangling link's target taken as the path it names).
pub fn resolve(path: &Path) -> PathBuf {
    resolve_depth(path, 0)
}

fn resolve_depth(path: &Path, depth: u8) -> PathBuf {
    let path = guard::paths::normalise(Path::new("/"), path);
    if let Ok(real) = std::fs::canonicalize(&path) {
        return real;
    }
    if depth < 8 {
        if let Ok(target) = std::fs::read_link(&path) {
            let base = path.parent().unwrap_or(Path::new("/"));
            return resolve_depth(&base.join(target), depth + 1);
        }
    }
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => resolve_depth(parent, depth).join(name),
        _ => path,
    }
}

/// The nearest ancestor holding `.iced/`, else `.git`, else `cwd` itself.
fn find_root(cwd: &Path) -> PathBuf {
    for marker in [".iced", ".git"] {
        if let Some(dir) = cwd.ancestors().find(|d| d.join(marker).exists()) {
            return dir.to_owned();
        }
    }
    cwd.to_owned()
}

fn load_config(root: &Path) -> Result<Config, Problem> {
    let path = Config::path(root);
    let problem = |reason: String| Problem {
        code: "config-invalid",
        reason,
        remedy: "fix `.iced/config.json` (`iced schema config` lists every key and its type)"
            .into(),
    };
    if std::fs::symlink_metadata(&path).is_err() {
        return Ok(Config::default());
    }
    let bytes = read_regular(&path, crate::config::CONFIG_LIMIT).ok_or_else(|| {
        problem(format!(
            "`{}` is not a regular file iced can read, or is over 1 MiB",
            path.display()
        ))
    })?;
    let value = serde_json::from_slice(&bytes)
        .map_err(|e| problem(format!("`{}` is not valid JSON: {e}", path.display())))?;
    let config = Config::from_value(value, &path).map_err(|e| problem(e.to_string()))?;
    // The same whole check every verb makes (SPEC 11).
    crate::run::settings::check(&config, "guard").map_err(|r| problem(r.reason))?;
    Ok(config)
}

/// The text a write leaves, from the file's current text.
fn after_of(before: Option<&str>, change: &Change) -> After {
    match (change, before) {
        (Change::Content(text), _) => After::Text(text.clone()),
        (Change::Edits(edits), Some(before)) => {
            guard::predict(before, edits).map_or(After::Unpredictable, After::Text)
        }
        (Change::Sequential(steps), Some(before)) => {
            let mut text = before.to_owned();
            for step in steps {
                let next = if step.all {
                    (!step.old.is_empty() && text.contains(&step.old))
                        .then(|| text.replace(&step.old, &step.new))
                } else {
                    guard::predict(&text, &[(step.old.clone(), step.new.clone())])
                };
                match next {
                    Some(next) => text = next,
                    None => return After::Unpredictable,
                }
            }
            After::Text(text)
        }
        _ => After::Unpredictable,
    }
}

/// Judge one call made in `cwd` by `who`, against the repository around `cwd` as it is now.
pub fn judge_call(cwd: &Path, mut who: Who, call: &Call) -> Result<Decision, Problem> {
    let cwd = resolve(cwd);
    let root = find_root(&cwd);
    let config = load_config(&root)?;
    if let Who::TestWriter { test_paths, .. } = &mut who {
        *test_paths = config.test_paths();
    }
    let active = read_text(&root.join(".iced").join("active"), SMALL_LIMIT)
        .map(|t| t.trim().to_owned())
        .filter(|id| is_component(id));
    let intent = root.join("intent");
    let unit_text = |id: &str| -> Option<String> {
        is_component(id)
            .then(|| read_text(&intent.join(id).join("iced.md"), crate::repo::UNIT_LIMIT))
            .flatten()
    };
    let proposal = match call {
        Call::Write { path, change } => {
            let abs = resolve(&cwd.join(path));
            let before =
                read_regular(&abs, FILE_LIMIT).map(|b| String::from_utf8_lossy(&b).into_owned());
            let after = after_of(before.as_deref(), change);
            Proposal::Write {
                path: abs.display().to_string(),
                before,
                after,
            }
        }
        Call::Shell { command } => Proposal::Shell {
            command: command.clone(),
        },
        Call::Read { tool } => Proposal::Other { tool: tool.clone() },
    };
    let ctx = Context {
        root: &root,
        cwd: &cwd,
        who,
        gate: Gate::parse(&config.gate),
        config: &config,
        active: active.as_deref(),
        unit_text: &unit_text,
    };
    Ok(guard::judge(&ctx, &proposal))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_edits_follow_each_other_and_need_their_text() {
        let r = |old: &str, new: &str, all: bool| Replace {
            old: old.into(),
            new: new.into(),
            all,
        };
        let all = Change::Sequential(vec![r("a", "b", true)]);
        assert_eq!(after_of(Some("a a"), &all), After::Text("b b".into()));
        // The second step sees the first one's result.
        let steps = Change::Sequential(vec![r("a", "b", true), r("b b", "c", false)]);
        assert_eq!(after_of(Some("a a"), &steps), After::Text("c".into()));
        assert_eq!(after_of(Some("a a a"), &steps), After::Unpredictable);
        assert_eq!(after_of(Some("x"), &steps), After::Unpredictable);
        assert_eq!(after_of(None, &steps), After::Unpredictable);
        assert_eq!(
            after_of(None, &Change::Content("t".into())),
            After::Text("t".into())
        );
        assert_eq!(after_of(Some("t"), &Change::Unknown), After::Unpredictable);
    }

    #[test]
    fn roles_come_from_the_environment() {
        assert_eq!(who_from(None, None), Ok(Who::Agent));
        assert_eq!(who_from(Some("person"), Some("x")), Ok(Who::Agent));
        assert_eq!(who_from(Some("validator"), None), Ok(Who::Validator));
        assert_eq!(who_from(Some("refuter"), None), Ok(Who::Refuter));
        assert_eq!(
            who_from(Some("implementer"), Some("003-x")),
            Ok(Who::Implementer {
                unit: "003-x".into()
            })
        );
        assert_eq!(
            who_from(Some("test-writer"), Some("003-x")),
            Ok(Who::TestWriter {
                unit: "003-x".into(),
                test_paths: Vec::new()
            })
        );
        for lane in [None, Some(""), Some("../x"), Some("a/b"), Some("..")] {
            for role in ["implementer", "test-writer"] {
                assert_eq!(who_from(Some(role), lane).unwrap_err().code, "guard-input");
            }
        }
    }

    #[test]
    fn symbolic_links_are_followed_before_judging() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join(".iced")).unwrap();
        std::os::unix::fs::symlink(root.join(".iced"), root.join("state")).unwrap();
        std::os::unix::fs::symlink(root.join(".iced/active"), root.join("notes.txt")).unwrap();
        assert_eq!(
            resolve(&root.join("state/active")),
            root.join(".iced/active")
        );
        assert_eq!(resolve(&root.join("notes.txt")), root.join(".iced/active"));
        assert_eq!(resolve(&root.join("new/../x/y")), root.join("x/y"));
    }
}
