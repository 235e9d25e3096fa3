//! The three records an activity directory holds, as they are serialised: what to run
//! (`spec.json`, written by the launcher), who runs it (`supervisor.json`, written by the
//! supervisor before it asks the gate), and how it ended (`outcome.json`, written last).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// What to run. Serialised as `spec.json` in the activity directory.
#[derive(Serialize, Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields)]
pub struct ActivitySpec {
    /// `argv[0]` is the program, looked up on the `PATH` of `env` as `std::process::Command` does.
    pub argv: Vec<String>,
    pub cwd: PathBuf,
    /// The child's complete environment: nothing of the supervisor's own is passed on.
    pub env: BTreeMap<String, String>,
    /// Measured from the moment the child is spawned.
    pub timeout_ms: u64,
    /// The wait between SIGINT and SIGTERM, and again between SIGTERM and SIGKILL.
    pub grace_ms: u64,
    pub nonce: String,
    /// Opaque to this module: handed back to the [`Gate`](super::Gate) unread.
    pub gate: serde_json::Value,
    /// A file given to the child as its standard input (else it reads nothing).
    #[serde(default)]
    pub stdin: Option<PathBuf>,
    /// Variables of the supervisor's own environment whose names start with one of these, passed
    /// on as they are (credentials: never written here, only named), unless `env` sets one: what
    /// the loop pins (a confined harness's home, SPEC 20.8) is not undone by the person's own.
    #[serde(default)]
    pub inherit_prefixes: Vec<String>,
    /// Variables set last, each value with `${VAR}` replaced by the supervisor's own `VAR` (unset
    /// is empty), so that what they name is never written here either.
    #[serde(default)]
    pub env_templates: BTreeMap<String, String>,
    /// What the child may write (SPEC 24.12): entered in the child before it executes `argv`.
    /// `None` runs it unconfined: a definition-of-done command, or an agent of a person whose
    /// user config says `agents.unconfined`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confine: Option<crate::confine::Rules>,
    /// Files given to the child for its run alone (a confined harness's copies of the person's
    /// login, SPEC 20.8), removed once it and everything it started have ended.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub discard: Vec<PathBuf>,
}

impl ActivitySpec {
    /// The child's whole environment, given the supervisor's own (`vars`).
    pub fn child_env(&self, vars: &[(String, String)]) -> BTreeMap<String, String> {
        let mut env = self.env.clone();
        for (k, v) in vars {
            if !self.env.contains_key(k)
                && self
                    .inherit_prefixes
                    .iter()
                    .any(|p| k.starts_with(p.as_str()))
            {
                env.insert(k.clone(), v.clone());
            }
        }
        for (k, template) in &self.env_templates {
            env.insert(k.clone(), expand_vars(template, vars));
        }
        no_housekeeping(&mut env);
        env
    }
}

/// git's automatic housekeeping off for everything an activity runs (SPEC 24.7): a detached
/// `git maintenance run --auto` the sweep of survivors kills while it holds
/// `.git/packed-refs.lock` leaves every later branch creation waiting out git's lock timeout.
/// Appended to any `GIT_CONFIG_COUNT` pairs `env` holds, so those still apply.
fn no_housekeeping(env: &mut BTreeMap<String, String>) {
    let pairs = [("gc.auto", "0"), ("maintenance.auto", "false")];
    let vars = crate::git::config_env(env.get("GIT_CONFIG_COUNT").map(String::as_str), &pairs);
    env.extend(vars);
}

/// `template` with every `${NAME}` replaced by `NAME`'s value in `vars` (unset is empty); a `$`
/// not followed by `{NAME}` stays as it is.
pub fn expand_vars(template: &str, vars: &[(String, String)]) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        match after.find('}') {
            Some(end)
                if !after[..end].is_empty()
                    && after[..end]
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_') =>
            {
                let name = &after[..end];
                if let Some((_, v)) = vars.iter().find(|(k, _)| k == name) {
                    out.push_str(v);
                }
                rest = &after[end + 1..];
            }
            _ => {
                out.push_str("${");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An activity's `git commit` packs nothing, though the repository asks for housekeeping at
    /// once (`gc.auto=1`, in the foreground so that it is seen): without the configuration the
    /// same commit packs the loose objects. Pairs the environment held are kept.
    #[test]
    fn an_activitys_git_does_no_housekeeping() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let git = |env: &BTreeMap<String, String>, args: &[&str]| {
            let out = std::process::Command::new("git")
                .args(args)
                .current_dir(root)
                .env_clear()
                .envs(env)
                .output()
                .unwrap();
            assert!(out.status.success(), "{args:?}: {out:?}");
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        let path = std::env::var("PATH").unwrap_or_default();
        let mut plain = BTreeMap::from([
            ("PATH".to_owned(), path),
            ("GIT_CONFIG_COUNT".to_owned(), "1".to_owned()),
            ("GIT_CONFIG_KEY_0".to_owned(), "user.name".to_owned()),
            ("GIT_CONFIG_VALUE_0".to_owned(), "t".to_owned()),
            ("GIT_AUTHOR_EMAIL".to_owned(), "t@t.invalid".to_owned()),
            ("GIT_COMMITTER_EMAIL".to_owned(), "t@t.invalid".to_owned()),
        ]);
        git(&plain, &["init", "-q", "-b", "main"]);
        for (k, v) in [
            ("gc.auto", "1"),
            ("gc.autoDetach", "false"),
            ("maintenance.autoDetach", "false"),
        ] {
            git(&plain, &["config", k, v]);
        }
        let mut guarded = plain.clone();
        no_housekeeping(&mut guarded);
        assert_eq!(guarded["GIT_CONFIG_COUNT"], "3");
        assert_eq!(guarded["GIT_CONFIG_KEY_0"], "user.name");
        // git guesses how many objects are loose from `.git/objects/17/` alone, and with
        // `gc.auto=1` packs once it holds two: the blobs of "263\n" (175b6c5d...) and "410\n"
        // (17e344e7...) go there, so from the second commit on it would pack.
        let commit = |env: &BTreeMap<String, String>, n: usize| {
            let text = match n {
                1 => "263\n".to_owned(),
                2 => "410\n".to_owned(),
                _ => format!("{n}\n"),
            };
            std::fs::write(root.join(format!("f{n}.txt")), text).unwrap();
            git(env, &["add", "."]);
            git(env, &["commit", "-q", "-m", &format!("c{n}")]);
            git(env, &["count-objects", "-v"])
        };
        let packs = |counted: &str| {
            counted
                .lines()
                .any(|l| l.starts_with("packs:") && l != "packs: 0")
        };
        assert!(!packs(&commit(&guarded, 1)), "the activity's commit packed");
        assert!(!packs(&commit(&guarded, 2)), "the activity's commit packed");
        plain.insert("GIT_CONFIG_COUNT".to_owned(), "1".to_owned());
        assert!(
            packs(&commit(&plain, 3)),
            "without it git packs: the test sees nothing"
        );
    }

    #[test]
    fn templates_name_variables_and_prefixes_pass_them_on() {
        let vars = vec![
            ("ANTHROPIC_API_KEY".to_owned(), "sk-secret".to_owned()),
            ("PROXY".to_owned(), "http://127.0.0.1:9".to_owned()),
            ("GIT_DIR".to_owned(), "/elsewhere".to_owned()),
        ];
        assert_eq!(expand_vars("${PROXY}/v1", &vars), "http://127.0.0.1:9/v1");
        assert_eq!(expand_vars("a${UNSET}b", &vars), "ab");
        assert_eq!(expand_vars("$HOME ${ bad} ${", &vars), "$HOME ${ bad} ${");
        let spec = ActivitySpec {
            argv: vec!["x".into()],
            cwd: PathBuf::from("/"),
            env: BTreeMap::from([("PATH".into(), "/bin".into())]),
            timeout_ms: 1,
            grace_ms: 1,
            nonce: "n".into(),
            gate: serde_json::Value::Null,
            stdin: None,
            inherit_prefixes: vec!["ANTHROPIC_".into()],
            env_templates: BTreeMap::from([("ANTHROPIC_BASE_URL".into(), "${PROXY}".into())]),
            confine: None,
            discard: Vec::new(),
        };
        let env = spec.child_env(&vars);
        assert_eq!(env["ANTHROPIC_API_KEY"], "sk-secret");
        assert_eq!(env["ANTHROPIC_BASE_URL"], "http://127.0.0.1:9");
        assert!(!env.contains_key("GIT_DIR"));
        // What the spec pins (a confined harness's home) is not replaced by an inherited value.
        let mut pinned = spec.clone();
        pinned
            .env
            .insert("ANTHROPIC_API_KEY".into(), "from the loop".into());
        assert_eq!(
            pinned.child_env(&vars)["ANTHROPIC_API_KEY"],
            "from the loop"
        );
        // Nothing secret is in what is written.
        let written = serde_json::to_string(&spec).unwrap();
        assert!(!written.contains("sk-secret") && !written.contains("127.0.0.1"));
    }
}

/// `supervisor.json`: the supervisor's identity. A pid alone is not one (pids are reused), so the
/// start time from `/proc/<pid>/stat` comes with it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SupervisorRecord {
    pub pid: u32,
    pub pid_start: u64,
    pub nonce: String,
}

/// `launched.json`: the supervisor process [`super::launch`] started, written right after it
/// started it, so that a supervisor still starting is told from one that died before it
/// registered (SPEC 21.4).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LaunchedRecord {
    pub pid: u32,
    pub pid_start: u64,
    /// The launch's nonce: a record an earlier launch of the folder left is not this one's.
    pub nonce: String,
}

/// `outcome.json`: how the activity ended.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Outcome {
    pub nonce: String,
    /// `None` when the child was killed by a signal or never started.
    pub exit_code: Option<i32>,
    /// The signal that ended the child, if one did.
    pub signal: Option<i32>,
    pub timed_out: bool,
    /// The supervisor was asked to stop (SIGTERM, SIGINT or SIGHUP) before the child ended.
    pub stopped: bool,
    pub duration_ms: u64,
    pub stdout: StreamSummary,
    pub stderr: StreamSummary,
    /// Why the child could not be started (program not found, no such `cwd`, ...).
    pub spawn_error: Option<String>,
    /// The supervisor's own peak resident memory, in KiB (getrusage), so a test can show it stays
    /// bounded whatever the child printed.
    #[serde(default)]
    pub supervisor_max_rss_kb: Option<u64>,
}

/// `child.json`: the child's pid (also its process group) and start time, written once it runs, so
/// a later caller can clear what is left of the group after a supervisor was killed outright.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ChildRecord {
    pub pid: u32,
    pub pid_start: u64,
}

/// The whole of one output stream, counted; its tail is in `stdout.txt` or `stderr.txt`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct StreamSummary {
    pub bytes: u64,
    /// Newlines, plus one for a final line without one.
    pub lines: u64,
    /// Something was dropped: the tail file holds less than the child printed.
    pub truncated: bool,
}
