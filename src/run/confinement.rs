//! Which paths each agent may write, and whether agents run confined at all (SPEC 24.12). The
//! mechanism is `crate::confine`'s; this module only says what the rules are for one start of an
//! agent of the loop, from its role, its workspace, its activity folder and its answer's path.

use crate::confine::Rules;
use crate::refusal::Refusal;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// What a role may change beside what every agent may.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reach {
    /// Implementer, test writer, memory agent: its worktree and the git it commits with.
    Commits,
    /// Validator, refuter: its throwaway sandbox, never the lane's worktree.
    Sandbox,
    /// Planner, plan reviewer: only where its draft or answer goes.
    Answer,
}

impl Reach {
    fn of(role: &str) -> Reach {
        match role {
            "implementer" | "test-writer" | "memory" => Reach::Commits,
            "validator" | "refuter" => Reach::Sandbox,
            _ => Reach::Answer,
        }
    }
}

/// The person's `agents` settings, from their user config only (never a repository's).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct UserAgents {
    /// `agents.unconfined`: the person runs agents with no confinement, knowing what that means.
    pub unconfined: bool,
    /// `agents.writable`: folders every confined agent may write too (a tool's cache).
    pub writable: Vec<PathBuf>,
}

/// The person's user config (`$XDG_CONFIG_HOME/iced/config.json`, else
/// `~/.config/iced/config.json`): its path, and its JSON or null when there is none or it does not
/// parse. One that is not a regular file is refused (SPEC 24.6).
pub(crate) fn user_config() -> Result<(Option<PathBuf>, Value), crate::store::StoreError> {
    let Some(path) = crate::trust::person_dir().map(|dir| dir.join("config.json")) else {
        return Ok((None, Value::Null));
    };
    let value = match crate::store::read_limited(&path, 1 << 20) {
        Ok(bytes) => serde_json::from_slice::<Value>(&bytes).unwrap_or(Value::Null),
        Err(e @ crate::store::StoreError::NotRegular { .. }) => return Err(e),
        Err(_) => Value::Null,
    };
    Ok((Some(path), value))
}

/// `agents` of the user config, or a `config-invalid` refusal naming the key and the file.
pub(crate) fn user_agents(step: &str) -> Result<UserAgents, Refusal> {
    let (path, config) = user_config().map_err(|e| crate::repo::store_refusal(step, e))?;
    let file = path.map_or_else(|| "the user config".to_owned(), |p| p.display().to_string());
    let invalid = |key: &str, expected: &str| {
        Refusal::new(
            step,
            "config-invalid",
            format!("`{file}`: `agents.{key}` {expected}"),
            format!("fix `agents.{key}` in `{file}` (SPEC 24.12)"),
        )
    };
    let agents = &config["agents"];
    let unconfined = match &agents["unconfined"] {
        Value::Null => false,
        Value::Bool(b) => *b,
        _ => return Err(invalid("unconfined", "must be true or false")),
    };
    let writable = match &agents["writable"] {
        Value::Null => Vec::new(),
        Value::Array(items) => items
            .iter()
            .map(|item| {
                item.as_str()
                    .map(PathBuf::from)
                    .filter(|p| p.is_absolute())
                    .ok_or_else(|| invalid("writable", "must be a list of absolute paths"))
            })
            .collect::<Result<_, _>>()?,
        _ => return Err(invalid("writable", "must be a list of absolute paths")),
    };
    Ok(UserAgents {
        unconfined,
        writable,
    })
}

/// The line `run show` and the handover add while the person's user config runs agents
/// unconfined (SPEC 24.12), or `None`.
pub(crate) fn unconfined_line(step: &str) -> Option<&'static str> {
    user_agents(step)
        .is_ok_and(|u| u.unconfined)
        .then_some("agents run unconfined: your user config says agents.unconfined (SPEC 24.12)")
}

/// Refuse `confinement-unavailable` when the loop would start an agent itself (a local runner
/// names a role) and this machine cannot confine it, unless the person's user config runs agents
/// unconfined. Called where the trust is checked, before anything changes.
pub(crate) fn require(settings: &super::settings::Settings, step: &str) -> Result<(), Refusal> {
    let local = [
        &settings.implementer,
        &settings.validator,
        &settings.memory,
        &settings.planner,
        &settings.plan_reviewer,
    ]
    .into_iter()
    .flatten()
    .any(|runner| !runner.remote);
    // The kernel first: where it confines, the user config need not be read on every step.
    let Err(missing) = crate::confine::available() else {
        return Ok(());
    };
    if !local || user_agents(step)?.unconfined {
        return Ok(());
    }
    Err(Refusal::new(
        step,
        "confinement-unavailable",
        format!("the config starts agents, and iced starts an agent only confined to its own workspace (SPEC 24.12), which this machine cannot do: {missing}; nothing was started"),
        "run iced on a kernel with Landlock ABI 6 or newer (Linux 6.12); or, accepting that agents can then write anything you can, set `\"agents\": {\"unconfined\": true}` in your user config (`~/.config/iced/config.json`)",
    ))
}

/// Whether an agent of `role` commits (and so, confined, gets a git of its own, `lane_git`).
pub(crate) fn commits(role: &str) -> bool {
    Reach::of(role) == Reach::Commits
}

/// One start of an agent, as its rules need it.
pub(crate) struct Start<'a> {
    pub role: &'a str,
    /// Where it works: a lane's worktree, a validator's sandbox, the checkout for a planner.
    pub cwd: &'a Path,
    /// Its activity folder.
    pub dir: &'a Path,
    /// Where its report, answer or draft goes.
    pub output: &'a Path,
    /// The repository's common git folder, as the loop knows it (never as a worktree's files,
    /// which an agent can write, say it).
    pub common: Option<&'a Path>,
    /// The git folder of the worktree it works in, when `cwd` is a linked worktree of the
    /// repository as git made it (`stage::worktree::own_worktree`).
    pub admin: Option<PathBuf>,
}

/// The rules for `start`, or `None` when the person's user config runs agents unconfined. Makes
/// the folders the rules name that must exist first: the private temp folder, the harness home,
/// and the ref folders a commit writes.
pub(crate) fn rules(start: &Start<'_>, step: &str) -> Result<Option<Rules>, Refusal> {
    let user = user_agents(step)?;
    if user.unconfined {
        return Ok(None);
    }
    // Private: 0700, as the activity folder they are in. A folder, not a link to one: the rules,
    // and the harness home's seeds, would go where it points.
    let made = |p: PathBuf| -> Result<PathBuf, Refusal> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&p)
            .map_err(|e| {
                crate::refusal::io_error(step, format!("create `{}`: {e}", p.display()))
            })?;
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.is_dir() => Ok(p),
            _ => Err(crate::repo::store_refusal(
                step,
                crate::store::StoreError::Symlink(p),
            )),
        }
    };
    let mut writable = vec![made(temp_dir(start.dir))?, made(home_dir(start.dir))?];
    writable.extend(start.output.parent().map(Path::to_owned));
    match Reach::of(start.role) {
        Reach::Commits => {
            writable.push(start.cwd.to_owned());
            writable.push(own_git(start).map_err(|why| {
                Refusal::new(
                    step,
                    "worktree-replaced",
                    format!("`{}` is not a worktree the agent can commit in: {why}; nothing was started", start.cwd.display()),
                    "look at what is there now (an agent may have replaced it); `iced run abandon <run>` ends the run and keeps its branch",
                )
            })?);
        }
        Reach::Sandbox => {
            writable.push(start.cwd.to_owned());
            writable.extend(start.admin.clone());
        }
        Reach::Answer => {}
    }
    writable.extend(user.writable);
    Ok(Some(Rules { writable }))
}

/// An agent's private temp folder: `TMPDIR`, `TMP` and `TEMP`.
pub(crate) fn temp_dir(activity: &Path) -> PathBuf {
    activity.join("tmp")
}

/// An agent's harness home: where its harness keeps its session (SPEC 20.8).
pub(crate) fn home_dir(activity: &Path) -> PathBuf {
    activity.join("home")
}

/// What a commit in the linked worktree whose git folder is `admin` writes besides the worktree:
/// that folder, the repository's objects, and the folders of its branch's ref and of that ref's log
/// (made when missing). Only a branch of the loop's (`iced/...`) gets its folder, read from the
/// worktree's `HEAD` and taken only when every part of it is a plain name: an agent that points
/// its `HEAD` at `refs/heads/./main` or `main` gets no ref folder, so it cannot move `main`.
/// The git of its own a writer commits into (`lane_git`), made for `start` when it is not there:
/// its worktree must be one git made, of the repository the loop knows.
fn own_git(start: &Start<'_>) -> Result<PathBuf, String> {
    let common = start
        .common
        .and_then(|c| c.canonicalize().ok())
        .ok_or("the repository's git folder is not known")?;
    let admin = start
        .admin
        .as_deref()
        .ok_or("its `.git` names no worktree folder of this repository")?;
    super::lane_git::prepare(&common, admin, start.cwd, start.dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_reach_what_the_spec_says() {
        assert_eq!(Reach::of("implementer"), Reach::Commits);
        assert_eq!(Reach::of("test-writer"), Reach::Commits);
        assert_eq!(Reach::of("memory"), Reach::Commits);
        assert_eq!(Reach::of("validator"), Reach::Sandbox);
        assert_eq!(Reach::of("refuter"), Reach::Sandbox);
        assert_eq!(Reach::of("planner"), Reach::Answer);
        assert_eq!(Reach::of("plan-reviewer"), Reach::Answer);
        assert_eq!(Reach::of("anything else"), Reach::Answer);
    }
}
