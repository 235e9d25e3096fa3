//! `TestEnv`: a temporary git repository, a cleared environment with a pinned clock, and a way to
//! run `iced` in it and look at what it printed.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub const NOW: &str = "2026-09-30T11:00:00Z";

pub struct TestEnv {
    /// Holds everything the test makes; the repository is `repo/` inside it, so what iced puts
    /// beside the repository (lane worktrees) is removed with it too.
    _dir: tempfile::TempDir,
    root: PathBuf,
}

/// What one run of `iced` printed and how it exited.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// stdout parsed as JSON; panics (failing the test) with the output when it is not.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }

    pub fn ok(self) -> Run {
        assert_eq!(self.code, 0, "expected success:\n{self:#?}");
        self
    }

    /// The refusal object of a `--json` refusal, after checking the exit code and its shape.
    pub fn refused(&self, exit: i32, code: &str) -> Value {
        assert_eq!(self.code, exit, "exit code:\n{self:#?}");
        let json = self.json();
        let refused = json["refused"].clone();
        assert_eq!(refused["code"], code, "refusal code:\n{self:#?}");
        for key in ["step", "reason", "remedy"] {
            assert!(
                refused[key].as_str().is_some_and(|s| !s.is_empty()),
                "refusal lacks {key}:\n{self:#?}"
            );
        }
        refused
    }
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl TestEnv {
    /// An empty git repository with one commit and a configured user.
    pub fn new() -> TestEnv {
        let env = TestEnv::without_git();
        let root = env.root();
        git(root, &["init", "-q", "-b", "main"]);
        git(root, &["config", "user.name", "Test Person"]);
        git(root, &["config", "user.email", "person@example.test"]);
        git(root, &["config", "commit.gpgsign", "false"]);
        std::fs::write(root.join("README.md"), "test repo\n").unwrap();
        git(root, &["add", "."]);
        git(root, &["commit", "-q", "-m", "init"]);
        env
    }

    /// A plain temporary directory: no git repository, nothing initialized.
    pub fn without_git() -> TestEnv {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let root = dir.path().join("repo");
        std::fs::create_dir(&root).unwrap();
        let env = TestEnv { _dir: dir, root };
        // The fake agent's script and its log of starts live in `agent/`, outside the repository:
        // the person's user config lets every confined agent write there, and nowhere else
        // outside its workspace (SPEC 24.12).
        std::fs::create_dir(env.agent_dir()).unwrap();
        env.write_user_config(&serde_json::json!({
            "agents": {"writable": [env.agent_dir(), shared_agent_dir()]}
        }));
        env
    }

    /// A repository where `iced init` has run.
    pub fn initialized() -> TestEnv {
        let env = TestEnv::new();
        env.iced(&["init"]).ok();
        env
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root().join(rel)
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
    }

    pub fn read_bytes(&self, rel: &str) -> Vec<u8> {
        std::fs::read(self.path(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
    }

    pub fn write(&self, rel: &str, text: impl AsRef<[u8]>) {
        let path = self.path(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    pub fn git(&self, args: &[&str]) {
        git(self.root(), args);
    }

    /// The `iced` command, in the repository root, with only PATH, HOME, the person's config
    /// directory and a pinned clock set.
    pub fn command(&self) -> Command {
        self.command_in(self.root())
    }

    /// `iced <args>` with `ICED_FAILPOINT=<failpoint>`: it must be killed there (SIGKILL).
    pub fn killed_at(&self, args: &[&str], failpoint: &str) -> Output {
        let out = self
            .command()
            .args(args)
            .env("ICED_FAILPOINT", failpoint)
            .output()
            .expect("iced runs");
        assert_killed(&out, failpoint);
        out
    }

    /// [`TestEnv::command`] run in `dir`: another checkout of the repository, a clone.
    pub fn command_in(&self, dir: &Path) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_iced"));
        cmd.current_dir(dir)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.root())
            // The person's own config directory (where `iced trust` records), outside every
            // repository the test makes, so nothing iced keeps for the person lands in one.
            .env("XDG_CONFIG_HOME", self.outside("config"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("ICED_NOW", NOW)
            .stdin(Stdio::null());
        cmd
    }

    /// `iced ... --json` in `dir`.
    pub fn iced_json_in(&self, dir: &Path, args: &[&str]) -> Run {
        run(self.command_in(dir).args(args).arg("--json"))
    }

    pub fn iced(&self, args: &[&str]) -> Run {
        run(self.command().args(args))
    }

    /// `iced ... --json`.
    pub fn iced_json(&self, args: &[&str]) -> Run {
        run(self.command().args(args).arg("--json"))
    }

    /// Create a unit and return its id.
    pub fn new_unit(&self, line: &str) -> String {
        let run = self.iced_json(&["new", line]).ok();
        run.json()["id"]
            .as_str()
            .expect("new prints an id")
            .to_owned()
    }

    /// Replace a unit's body (everything after the frontmatter) with `body`.
    pub fn set_body(&self, id: &str, body: &str) {
        let rel = format!("intent/{id}/iced.md");
        let text = self.read(&rel);
        let end = text[3..].find("\n---\n").expect("frontmatter") + 3 + 5;
        self.write(&rel, format!("{}{body}", &text[..end]));
    }
}

impl TestEnv {
    /// A unit holding [`GOOD_BODY`]: it lints clean at signoff.
    pub fn good_unit(&self, line: &str) -> String {
        let id = self.new_unit(line);
        self.set_body(&id, GOOD_BODY);
        id
    }

    /// A good unit, approved with `--yes`.
    pub fn approved_unit(&self, line: &str) -> String {
        let id = self.good_unit(line);
        self.iced_json(&["approve", &id, "--yes"]).ok();
        id
    }

    /// Set `key: value` (written as given) in a unit's frontmatter, in place, or append it as the
    /// block's last line. A person editing the file by hand, not iced.
    pub fn set_field(&self, id: &str, key: &str, value: &str) {
        let rel = unit_file(id);
        let text = self.read(&rel);
        let mut lines: Vec<String> = text.split('\n').map(str::to_owned).collect();
        assert_eq!(lines[0], "---", "{rel} starts with a frontmatter");
        let close = 1 + lines[1..]
            .iter()
            .position(|l| l == "---")
            .expect("a closing ---");
        let prefix = format!("{key}:");
        let line = format!("{key}: {value}");
        match lines[1..close].iter().position(|l| l.starts_with(&prefix)) {
            Some(i) => lines[i + 1] = line,
            None => lines.insert(close, line),
        }
        self.write(&rel, lines.join("\n"));
    }

    /// Every event of `.iced/metrics.jsonl`, parsed.
    pub fn metrics(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.path(".iced/metrics.jsonl")).unwrap_or_default();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }

    /// Every file under the root except `.git/`, root-relative path to bytes.
    pub fn snapshot(&self) -> BTreeMap<String, Vec<u8>> {
        fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let entry = entry.unwrap();
                let path = entry.path();
                let rel = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                if rel == ".git" {
                    continue;
                }
                let kind = entry.file_type().unwrap();
                if kind.is_dir() {
                    walk(root, &path, out);
                } else {
                    out.insert(rel, std::fs::read(&path).unwrap_or_default());
                }
            }
        }
        let mut out = BTreeMap::new();
        walk(self.root(), self.root(), &mut out);
        out
    }
}

/// A complete unit file for `id`, written by hand rather than by `iced new`: a draft holding
/// [`GOOD_BODY`].
pub fn unit_text(id: &str) -> String {
    format!(
        "---\niced: 0.1\nid: {id}\ntitle: {id}\ntype: feature\ntier: M\nparent: null\nstatus: draft\nautonomy: 1\nrisk: medium\nattempts: 0\n---\n{GOOD_BODY}"
    )
}

/// The root-relative path of a unit's `iced.md`.
pub fn unit_file(id: &str) -> String {
    format!("intent/{id}/iced.md")
}

pub fn run(cmd: &mut Command) -> Run {
    let out: Output = cmd.output().expect("iced runs");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A complete body that lints clean at signoff.
pub const GOOD_BODY: &str = "
# Session timeout

## Intent

### Goal
Signed-in people stay signed in while they are active.

### Constraints
- [C1] No change to how passwords are checked.

### Failure conditions
- [F1] An active person is signed out.

### Scope
- In: session refresh
- Out: password policy

## Context
- [code] Sessions expire after 5 minutes in src/session.rs.

## Expectations
- [E1] Activity extends the session. {verify: test | tests/session.rs}
- [E2] An idle session still ends after 30 minutes. {verify: test | tests/session.rs}

## Open questions
- [Q1] How long is idle? -> A: 30 minutes.
";

// ---- the build loop ------------------------------------------------------------------------

/// Deep-merge `patch` into `base`: objects merge key by key, any other value replaces.
pub fn merge_json(base: &mut Value, patch: &Value) {
    match (base, patch) {
        (Value::Object(base), Value::Object(patch)) => {
            for (key, value) in patch {
                merge_json(base.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
        (base, patch) => *base = patch.clone(),
    }
}

/// `git args` in `dir` (any directory: a lane's worktree too), with the same cleared environment
/// as [`TestEnv::git`]; its stdout. Panics (failing the test) when git fails.
pub fn git_at(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A folder every test's agents may write (the tests' user config lists it), for what a test
/// makes before its repository: one for this test process, in the temporary directory.
pub fn shared_agent_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("iced-cli-agents-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("the shared agent folder");
    dir
}

/// `fixtures/fake-agent`, the scripted stand-in for a coding agent.
pub fn fake_agent() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/fake-agent")
}

impl TestEnv {
    /// The temporary directory that holds the repository: a place outside it.
    pub fn outside(&self, name: &str) -> PathBuf {
        self.root()
            .parent()
            .expect("the repo has a parent")
            .join(name)
    }

    /// Where the claim on `unit` lives: in the repository's common git directory (SPEC 24.9), which
    /// every checkout of it shares.
    pub fn claim_path(&self, unit: &str) -> PathBuf {
        self.root()
            .join(".git/iced/claims")
            .join(format!("{unit}.json"))
    }

    /// `git args` in the repository; its stdout.
    pub fn git_out(&self, args: &[&str]) -> String {
        git_at(self.root(), args)
    }

    /// `git add -A && git commit`: everything in the checkout, committed.
    pub fn commit_all(&self, message: &str) {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "--allow-empty", "-m", message]);
    }

    /// Deep-merge `patch` into `.iced/config.json` (not committed), as the person does by hand,
    /// and trust what it runs (`iced trust`): the config is theirs.
    pub fn patch_config(&self, patch: &Value) {
        let mut config: Value = serde_json::from_str(&self.read(".iced/config.json"))
            .expect(".iced/config.json is JSON");
        merge_json(&mut config, patch);
        self.write(
            ".iced/config.json",
            serde_json::to_string_pretty(&config).unwrap() + "\n",
        );
        self.trust_config();
    }

    /// `iced trust` in the repository: the person trusts what the config they wrote runs. A
    /// config iced cannot read is not trusted (refused `config-invalid`); the verb that reads it
    /// next refuses it the same way.
    pub fn trust_config(&self) {
        let run = self.iced_json(&["trust"]);
        if run.code != 0 {
            run.refused(3, "config-invalid");
        }
    }

    /// A unit `iced build` admits: `iced init`, a unit holding [`GOOD_BODY`] (E1 and E2) approved
    /// with `--yes`, `config_patch` merged into `.iced/config.json`, and everything committed.
    pub fn buildable(config_patch: Value) -> (TestEnv, String) {
        TestEnv::buildable_with(|_| config_patch)
    }

    /// [`TestEnv::buildable`] with a patch that depends on the environment (a path in it).
    pub fn buildable_with(config_patch: impl FnOnce(&TestEnv) -> Value) -> (TestEnv, String) {
        let env = TestEnv::initialized();
        let id = env.approved_unit("session timeout");
        let patch = config_patch(&env);
        env.patch_config(&patch);
        env.commit_all(&format!("approve {id}"));
        (env, id)
    }

    /// The folder outside the repository that the person's user config lets agents write: the
    /// fake agent's script and log are there, and what a test has an agent leave for it.
    pub fn agent_dir(&self) -> PathBuf {
        self.outside("agent")
    }

    /// The person's user config says `agents.unconfined`: a test of the loop's own checks of what
    /// an agent changed (SPEC 24.2 to 24.5), which stand behind the confinement for a person who
    /// runs agents unconfined; with the confinement the agent's write would simply fail.
    pub fn unconfined(&self) {
        self.write_user_config(&serde_json::json!({
            "agents": {"unconfined": true, "writable": [self.agent_dir(), shared_agent_dir()]}
        }));
    }

    /// The person's user config (`$XDG_CONFIG_HOME/iced/config.json`), replaced whole.
    pub fn write_user_config(&self, config: &Value) {
        let path = self.outside("config").join("iced/config.json");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, serde_json::to_string_pretty(config).unwrap()).unwrap();
    }

    /// The script the fake agent of [`fake_runner`] follows, outside the repository.
    pub fn agent_script(&self) -> PathBuf {
        self.agent_dir().join("agent.txt")
    }

    /// Every start of the fake agent, as it logged them (`start run=.. lane=.. attempt=.. pid=..`).
    pub fn agent_starts(&self) -> Vec<String> {
        let mut log = self.agent_script().into_os_string();
        log.push(".log");
        std::fs::read_to_string(log)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

/// Write `script` for the fake agent outside the repository and return the config patch that makes
/// it the implementer: a `command` runner `fake` (timeout 30 s) and `roles.implementer.runner`.
pub fn fake_runner(env: &TestEnv, script: &str) -> Value {
    let path = env.agent_script();
    std::fs::write(&path, script).expect("write the agent script");
    serde_json::json!({
        "runners": {"fake": {
            "kind": "command",
            "argv": ["bash", fake_agent().display().to_string(), path.display().to_string(), "{output_file}"],
            "timeoutSec": 30
        }},
        "roles": {"implementer": {"runner": "fake"}}
    })
}

/// Write a script to `path`, mode 0755, that a process this test starts may run at once. Written
/// by a child (`install`), never opened for writing here: a file this process held open for
/// writing is inherited by every child another test thread forks at that moment, and until that
/// child calls exec, running the script fails with "Text file busy" (ETXTBSY), as a `git` shim's
/// first run did under load.
pub fn write_executable(path: &Path, text: &str) {
    let source = path.with_extension("source");
    std::fs::write(&source, text).unwrap();
    let status = Command::new("install")
        .args(["-m", "0755"])
        .arg(&source)
        .arg(path)
        .status()
        .expect("install runs");
    assert!(status.success(), "install {}: {status}", path.display());
}

/// A `git` first on PATH: a script in `bin` that runs `body` (sh, with `$REAL_GIT` set to the
/// real git) and then the real git with its arguments. Returns the PATH to give `iced`, so that
/// it and what it starts find the shim first.
pub fn git_shim(bin: &Path, body: &str) -> std::ffi::OsString {
    let real = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join("git"))
        .find(|p| p.is_file())
        .expect("git on PATH");
    std::fs::create_dir_all(bin).unwrap();
    write_executable(
        &bin.join("git"),
        &format!(
            "#!/bin/sh\nREAL_GIT='{}'\nexport REAL_GIT\n{body}exec \"$REAL_GIT\" \"$@\"\n",
            real.display()
        ),
    );
    let mut path = std::ffi::OsString::from(bin);
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());
    path
}

/// What a kept copy (`{"path", "sha256"}`, SPEC 24.5) that a step's outcome names holds: the file
/// read back and checked against its hash. Panics (failing the test) when it is missing or changed.
pub fn kept(reference: &Value) -> Value {
    use sha2::{Digest, Sha256};
    let path = reference["path"]
        .as_str()
        .unwrap_or_else(|| panic!("not a kept copy: {reference:#}"));
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("read {path}: {e}"));
    let sha: String = Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(
        reference["sha256"],
        sha.as_str(),
        "the kept copy {path} changed"
    );
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The step key a state file writes as `text` (`deliver`, `land-1`).
pub fn key(text: &str) -> iced::run::state::StepKey {
    text.parse()
        .unwrap_or_else(|e| panic!("not a step key: {e}"))
}

/// The call ended killed (SIGKILL) where `what` says, as a failpoint kills it.
pub fn assert_killed(out: &Output, what: &str) {
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        out.status.signal(),
        Some(9),
        "{what}: the call was not killed there: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
