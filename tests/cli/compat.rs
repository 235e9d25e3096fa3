//! Compatibility (issue 10, item 2): a `state.json` and a run folder that an earlier iced wrote in
//! the middle of real runs still read, and resume to delivery, with this one.
//!
//! Each fixture of `fixtures/compat/` (its README says what each holds, and
//! `scripts/make-compat-fixture.sh` how they were made) is put back in a temporary directory: the
//! repository from its git bundle, the lane worktrees and validator sandboxes where they were, the
//! saved `.iced/run/` and claims with their placeholders (`@DIR@`, `@SHA256:<path>@`) replaced.
//! Then the current binary reads it (`run show`, `run list`) and drives it to delivery. The
//! fixtures are never remade to suit a change of the code: a change that fails here is a change
//! that breaks the runs people have in flight when they upgrade.

use crate::env::{fake_agent, run, Run, TestEnv};
use crate::loop_e2e::{agent_commit, str_of, GOOD_REPORT, WAIT};
use crate::validation::PASS;
use serde::Deserialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// `fixture.json`: what the script recorded beside the saved files.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Fixture {
    name: String,
    covers: String,
    made_by: MadeBy,
    run: String,
    unit: String,
    driver: String,
    worktrees: Vec<Worktree>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MadeBy {
    commit: String,
    version: String,
}

/// A checkout of the repository besides the person's: a lane worktree on its branch, or a
/// validator's sandbox detached at a commit.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Worktree {
    path: String,
    #[serde(default)]
    branch: Option<String>,
    #[serde(default)]
    commit: Option<String>,
}

/// A fixture put back: the repository (`env.root()`), the saved files in place, and the PATH that
/// finds the fake agent's wrapper.
struct Restored {
    env: TestEnv,
    fixture: Fixture,
    /// The directory `@DIR@` stood for: the one holding `repo/` (canonical, as iced names it).
    dir: PathBuf,
    path: OsString,
    /// The saved `state.json`, placeholders replaced: what the earlier iced left.
    old_state: Value,
    /// The saved `events.jsonl` and the run's `history.jsonl` (when it has one), as put back.
    old_events: String,
    old_history: Option<String>,
}

fn fixture_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/compat")
        .join(name)
}

/// Every file under `dir`, relative path to bytes.
fn files_under(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let rel = path.strip_prefix(root).unwrap().to_path_buf();
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Write `bytes` at `path` as the loop writes its files: directories 0700, the file 0600.
fn write_private(path: &Path, bytes: &[u8]) {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path.parent().unwrap())
        .unwrap();
    std::fs::write(path, bytes).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// Put fixture `name` back in a fresh temporary directory.
fn restore(name: &str) -> Restored {
    let source = fixture_dir(name);
    let fixture: Fixture =
        serde_json::from_slice(&std::fs::read(source.join("fixture.json")).expect("fixture.json"))
            .expect("fixture.json parses");
    assert_eq!(fixture.name, name);
    let env = TestEnv::without_git();
    let dir = env
        .root()
        .parent()
        .unwrap()
        .canonicalize()
        .expect("the temporary directory");
    let root = dir.join("repo");
    let at = |p: &str| PathBuf::from(p.replace("@DIR@", dir.to_str().unwrap()));

    // The repository: its branches from the bundle, the person's checkout on main.
    let bundle = source.join("repo.bundle");
    env.git(&["init", "-q", "-b", "main"]);
    env.git(&[
        "fetch",
        "-q",
        "--update-head-ok",
        bundle.to_str().unwrap(),
        "refs/heads/*:refs/heads/*",
    ]);
    env.git(&["reset", "-q", "--hard", "main"]);
    env.git(&["config", "user.name", "Compat Person"]);
    env.git(&["config", "user.email", "person@example.test"]);
    env.git(&["config", "commit.gpgsign", "false"]);
    for w in &fixture.worktrees {
        let path = at(&w.path);
        let path = path.to_str().unwrap();
        match (&w.branch, &w.commit) {
            (Some(branch), None) => env.git(&["worktree", "add", "-q", path, branch]),
            (None, Some(commit)) => env.git(&["worktree", "add", "-q", "--detach", path, commit]),
            _ => panic!("{name}: a worktree names a branch or a commit: {w:?}"),
        }
    }

    // The saved files, `@DIR@` replaced; then each `@SHA256:<path>@` by the hash of that file as
    // it now is (it names the directory, so its bytes are this directory's).
    let mut placed: BTreeMap<PathBuf, String> = BTreeMap::new();
    for (sub, to) in [
        ("run", root.join(".iced/run")),
        ("claims", root.join(".git/iced/claims")),
    ] {
        for (rel, bytes) in files_under(&source.join(sub)) {
            let text = String::from_utf8(bytes)
                .unwrap_or_else(|_| panic!("{name}: {sub}/{} is not UTF-8", rel.display()));
            placed.insert(to.join(rel), text.replace("@DIR@", dir.to_str().unwrap()));
        }
    }
    let hashed: BTreeMap<PathBuf, String> = placed
        .values()
        .flat_map(|text| text.split("@SHA256:").skip(1))
        .map(|rest| dir.join(rest.split('@').next().unwrap()))
        .map(|file| {
            let text = placed.get(&file).unwrap_or_else(|| {
                panic!("{name}: a hash names {}, not a saved file", file.display())
            });
            assert!(
                !text.contains("@SHA256:"),
                "{name}: {} names another hash",
                file.display()
            );
            let sha = sha256_hex(text.as_bytes());
            (file, sha)
        })
        .collect();
    for (path, mut text) in placed {
        for (file, sha) in &hashed {
            let rel = file.strip_prefix(&dir).unwrap().display();
            text = text.replace(&format!("@SHA256:{rel}@"), sha);
        }
        assert!(
            !text.contains("@DIR@") && !text.contains("@SHA256:"),
            "{name}: a placeholder is left in {}",
            path.display()
        );
        write_private(&path, text.as_bytes());
    }
    // The loop writes this when it creates `.iced/run/`; git would not keep it in the fixture.
    write_private(&root.join(".iced/run/.gitignore"), b"*\n");

    // The fake agent, for a process-driven fixture: its script beside the repository, and a
    // wrapper first on PATH under the name the committed config's runner gives.
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    if let Ok(script) = std::fs::read(source.join("agent.txt")) {
        std::fs::write(env.agent_script(), script).unwrap();
        let wrapper = bin.join("iced-compat-agent");
        crate::env::write_executable(
            &wrapper,
            &format!(
                "#!/bin/sh\nexec bash '{}' '{}' \"$@\"\n",
                fake_agent().display(),
                env.agent_script().display()
            ),
        );
    }
    let mut path = OsString::from(&bin);
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());

    // The person trusts their config again: trust is kept per checkout path, outside the state.
    env.trust_config();
    let run_dir = root.join(".iced/run");
    let old_state: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("state.json")).unwrap())
            .expect("the saved state is JSON");
    let old_events = std::fs::read_to_string(run_dir.join("events.jsonl")).unwrap();
    let old_history =
        std::fs::read_to_string(run_dir.join(&fixture.run).join("history.jsonl")).ok();
    Restored {
        env,
        fixture,
        dir,
        path,
        old_state,
        old_events,
        old_history,
    }
}

impl Restored {
    /// `iced <args> --json` with the fake agent's wrapper on PATH.
    fn iced(&self, args: &[&str]) -> Run {
        run(self
            .env
            .command()
            .env("PATH", &self.path)
            .args(args)
            .arg("--json"))
    }

    fn step(&self) -> Value {
        let out = self.iced(&["implement", "step"]);
        assert!(
            out.code == 0 || out.code == 4,
            "{}: implement step failed:\n{out:#?}",
            self.fixture.name
        );
        out.json()
    }

    /// Step until a step's action is `want`, letting `host` answer each `start_agent` on the way
    /// (a process-driven run has none); any other end fails the test.
    fn step_until(&self, want: &str, mut host: impl FnMut(&Value)) -> Value {
        let start = Instant::now();
        loop {
            let s = self.step();
            let action = str_of(&s, "action");
            if action == want {
                return s;
            }
            match action {
                "start_agent" => host(&s),
                "advanced" => {}
                "waiting" => std::thread::sleep(Duration::from_millis(100)),
                _ => panic!("{}: the run stopped at {s}", self.fixture.name),
            }
            assert!(
                start.elapsed() < WAIT,
                "{}: not {want} within {WAIT:?}: {s}",
                self.fixture.name
            );
        }
    }

    fn old_run(&self) -> &Value {
        &self.old_state["runs"][&self.fixture.run]
    }

    /// The saved record of `step` (current attempt) in the old state.
    fn old_record(&self, step: &str) -> &Value {
        self.old_run()["lanes"][0]["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["step"] == step)
            .unwrap_or_else(|| panic!("{}: no saved `{step}` record", self.fixture.name))
    }

    fn lane_worktree(&self) -> PathBuf {
        self.dir
            .join("repo.iced-worktrees")
            .join(&self.fixture.unit)
    }

    fn lane_branch(&self) -> String {
        format!("iced/{0}/{0}", self.fixture.unit)
    }

    fn run_dir(&self) -> PathBuf {
        self.dir.join("repo/.iced/run").join(&self.fixture.run)
    }

    fn read(&self, path: &Path) -> String {
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// `run show` and `run list` read what the earlier iced wrote: every lane as it was saved,
    /// field for field, every step record with its outcome; the run listed with its stage.
    fn reads_the_old_state(&self, stage: &str, attempt: u64) {
        let name = &self.fixture.name;
        let old = self.old_run();
        assert_eq!(old["driver"], self.fixture.driver.as_str());
        let show = self.iced(&["run", "show", &self.fixture.run]).ok().json();
        for key in [
            "id",
            "unit",
            "status",
            "driver",
            "base",
            "created_at",
            "lanes",
        ] {
            assert_eq!(
                show[key], old[key],
                "{name}: `run show` reads `{key}` otherwise"
            );
        }
        assert_eq!(show["status"], "running", "{name}");
        assert_eq!(show["lanes"][0]["stage"], stage, "{name}");
        assert_eq!(show["lanes"][0]["attempt"], attempt, "{name}");

        let list = self.iced(&["run", "list"]).ok().json();
        let runs = list.as_array().expect("run list is a list");
        assert_eq!(runs.len(), 1, "{name}: {list:#}");
        assert_eq!(runs[0]["id"], self.fixture.run.as_str(), "{name}");
        assert_eq!(runs[0]["unit"], self.fixture.unit.as_str(), "{name}");
        assert_eq!(runs[0]["status"], "running", "{name}");
        assert_eq!(runs[0]["stage"], stage, "{name}");
        assert_eq!(runs[0]["attempt"], attempt, "{name}");
        assert_eq!(runs[0]["driver"], old["driver"], "{name}");
        let text = run(self.env.command().args(["run", "list"])).ok();
        assert!(
            text.stdout.contains(&self.fixture.run) && text.stdout.contains(stage),
            "{name}: {}",
            text.stdout
        );
    }

    /// The run delivered once, with `attempt`: `run show` says so, the events end it once, a
    /// further step finds nothing to do, and what the earlier iced logged is still the start of
    /// the events and the history, byte for byte.
    fn delivered_once(&self, attempt: u64) {
        let name = &self.fixture.name;
        let show = self.iced(&["run", "show", &self.fixture.run]).ok().json();
        assert_eq!(show["status"], "delivered", "{name}: {show:#}");
        assert_eq!(show["lanes"][0]["stage"], "delivered", "{name}");
        assert_eq!(show["lanes"][0]["attempt"], attempt, "{name}");
        let deliveries: Vec<&Value> = show["lanes"][0]["steps"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["step"] == "deliver")
            .collect();
        assert_eq!(deliveries.len(), 1, "{name}: {deliveries:#?}");
        assert_eq!(deliveries[0]["status"], "done", "{name}");
        assert_eq!(deliveries[0]["attempt"], attempt, "{name}");

        let events = self.events_kept();
        let ends: Vec<Value> = events
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|e| e["event"] == "run_end" && e["run"] == self.fixture.run.as_str())
            .collect();
        assert_eq!(ends.len(), 1, "{name}: {ends:#?}");
        assert_eq!(ends[0]["status"], "delivered", "{name}");

        if let Some(old) = &self.old_history {
            let history = self.read(&self.run_dir().join("history.jsonl"));
            assert!(
                history.starts_with(old),
                "{name}: the history the earlier iced kept changed"
            );
        }
        assert_eq!(self.step()["action"], "nothing", "{name}");
    }

    /// `events.jsonl` now: what the earlier iced logged is still its start, byte for byte, and
    /// nothing logged since starts or ends a step the earlier iced had done. The whole text.
    fn events_kept(&self) -> String {
        let name = &self.fixture.name;
        let events = self.read(&self.dir.join("repo/.iced/run/events.jsonl"));
        assert!(
            events.starts_with(&self.old_events),
            "{name}: the events the earlier iced logged changed"
        );
        let done: Vec<(&Value, &Value)> = self.old_run()["lanes"][0]["steps"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["status"] == "done")
            .map(|r| (&r["step"], &r["attempt"]))
            .collect();
        for line in events[self.old_events.len()..].lines() {
            let e: Value = serde_json::from_str(line).unwrap();
            if e["event"] == "step_start" || e["event"] == "step_done" {
                assert!(
                    !done.contains(&(&e["step"], &e["attempt"])),
                    "{name}: a step the earlier iced had done is done again: {line}"
                );
            }
        }
        events
    }

    /// Every record the earlier iced had finished is still there, as it was: a done step is never
    /// done again, and reading and writing it back loses nothing.
    fn old_done_records_kept(&self) {
        let now: Value =
            serde_json::from_str(&self.read(&self.dir.join("repo/.iced/run/state.json"))).unwrap();
        let steps = now["runs"][&self.fixture.run]["lanes"][0]["steps"]
            .as_array()
            .unwrap();
        for old in self.old_run()["lanes"][0]["steps"].as_array().unwrap() {
            if old["status"] != "done" {
                continue;
            }
            let kept = steps
                .iter()
                .find(|r| r["step"] == old["step"] && r["attempt"] == old["attempt"])
                .unwrap_or_else(|| panic!("{}: `{}` is gone", self.fixture.name, old["step"]));
            assert_eq!(
                kept, old,
                "{}: `{}` changed",
                self.fixture.name, old["step"]
            );
        }
    }

    /// Every start of the fake agent since the fixture was put back, as `attempt=<n> role=<r>
    /// lens=<l>`, each checked to be of this run's lane.
    fn agents_started(&self) -> Vec<String> {
        let lane = format!("lane={}", self.fixture.unit);
        let run = format!("run={}", self.fixture.run);
        self.env
            .agent_starts()
            .iter()
            .map(|line| {
                let words: Vec<&str> = line.split_whitespace().collect();
                assert!(
                    words.contains(&run.as_str()) && words.contains(&lane.as_str()),
                    "{line}"
                );
                words
                    .iter()
                    .filter(|w| {
                        ["attempt=", "role=", "lens="]
                            .iter()
                            .any(|k| w.starts_with(k))
                    })
                    .copied()
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect()
    }

    /// Subjects of `git log <rev>` in the person's repository.
    fn subjects(&self, rev: &str) -> Vec<String> {
        self.env
            .git_out(&["log", "--format=%s", rev])
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn deliver_commits(&self, rev: &str) -> usize {
        let subject = format!("iced: deliver {}", self.fixture.unit);
        self.subjects(rev).iter().filter(|s| **s == subject).count()
    }
}

/// The host hands a validator's answer in: `PASS`, written where `implement step` said.
fn answer_pass(r: &Restored, s: &Value) {
    assert_eq!(s["role"], "validator", "{s:#}");
    let path = str_of(s, "receipt_path");
    std::fs::write(path, PASS).unwrap();
    r.iced(&["implement", "receipt", path]).ok();
}

// ---- (a) host driver: the implementer handed out, not answered ------------------------------------

#[test]
fn a_host_run_whose_implementer_was_handed_out_resumes_to_delivery() {
    let r = restore("host-implement-handed");
    r.reads_the_old_state("implement", 1);

    // Asked again, the loop hands out the same attempt: same nonce, same brief, same worktree.
    let handed = r.old_record("implement");
    assert_eq!(handed["status"], "started");
    let s = r.step();
    assert_eq!(s["action"], "start_agent", "{s:#}");
    assert_eq!(s["role"], "implementer", "{s:#}");
    assert_eq!(s["attempt"], 1, "{s:#}");
    assert_eq!(s["receipt_key"], handed["nonce"], "{s:#}");
    assert_eq!(
        s["brief"],
        r.old_record("brief")["outcome"]["path"],
        "{s:#}"
    );
    assert_eq!(s["worktree"], r.lane_worktree().to_str().unwrap(), "{s:#}");

    // The host's agent works and reports; the validators pass; the run delivers.
    agent_commit(
        &r.lane_worktree(),
        "src/session.rs",
        "sessions refresh on activity\n",
    );
    let receipt = str_of(&s, "receipt_path");
    std::fs::write(receipt, GOOD_REPORT).unwrap();
    r.iced(&["implement", "receipt", receipt]).ok();
    let mut lenses = Vec::new();
    r.step_until("delivered", |s| {
        lenses.push(str_of(s, "lens").to_owned());
        answer_pass(&r, s);
    });
    assert_eq!(lenses, ["expectations", "failures"]);

    r.delivered_once(1);
    r.old_done_records_kept();
    assert_eq!(r.deliver_commits(&r.lane_branch()), 1);
    assert_eq!(
        r.env
            .git_out(&["show", &format!("{}~1:src/session.rs", r.lane_branch())]),
        "sessions refresh on activity\n"
    );
}

// ---- (b) host driver: one validator answered, the other handed out ------------------------------

#[test]
fn a_host_run_with_one_validator_answered_resumes_to_delivery() {
    let r = restore("host-validate-one-answered");
    r.reads_the_old_state("validate", 1);
    assert_eq!(r.old_record("validate-expectations")["status"], "done");
    let handed = r.old_record("validate-failures");
    assert_eq!(handed["status"], "started");
    let sandbox = PathBuf::from(format!(
        "{}.validators/failures-1",
        r.lane_worktree().display()
    ));

    // Only the unanswered validator is handed out again, the same one, in its sandbox.
    let mut handed_out = Vec::new();
    let last = r.step_until("delivered", |s| {
        handed_out.push((
            str_of(s, "lens").to_owned(),
            s["receipt_key"].clone(),
            s["worktree"].clone(),
        ));
        answer_pass(&r, s);
    });
    assert_eq!(last["attempt"], 1);
    assert_eq!(
        handed_out,
        [(
            "failures".to_owned(),
            handed["nonce"].clone(),
            Value::from(sandbox.to_str().unwrap())
        )]
    );
    assert!(!sandbox.exists(), "the sandbox is left");

    r.delivered_once(1);
    r.old_done_records_kept();
    assert_eq!(r.deliver_commits(&r.lane_branch()), 1);
    // The answer the earlier iced kept counts in the verdict beside the new one.
    let verify: Value = serde_json::from_str(&r.env.git_out(&[
        "show",
        &format!("{}:intent/{}/verify.json", r.lane_branch(), r.fixture.unit),
    ]))
    .unwrap();
    assert_eq!(verify["verdict"], "pass", "{verify:#}");
    let validators: Vec<(&str, &Value, &Value)> = verify["validators"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (str_of(v, "name"), &v["answered"], &v["verdict"]))
        .collect();
    assert_eq!(
        validators,
        [
            ("expectations", &Value::from(true), &Value::from("pass")),
            ("failures", &Value::from(true), &Value::from("pass"))
        ]
    );
}

// ---- (c) process driver: a fix round, its implementer finished, not yet observed ----------------

#[test]
fn a_process_run_in_its_fix_round_resumes_to_delivery_without_running_the_fix_again() {
    let r = restore("process-fix-round");
    r.reads_the_old_state("implement", 2);
    let fix = r.old_record("implement");
    assert_eq!(fix["status"], "started");
    assert_eq!(fix["attempt"], 2);
    let finding = format!("{}-F1", r.fixture.unit);
    assert_eq!(
        r.old_run()["lanes"][0]["findings"][0]["id"],
        finding.as_str()
    );
    assert_eq!(r.old_run()["lanes"][0]["findings"][0]["status"], "open");

    let last = r.step_until("delivered", |s| panic!("a process run handed out {s}"));
    assert_eq!(last["attempt"], 2);

    // The fix the earlier iced launched is taken from its activity's files, not run again: the
    // only agent started is attempt 2's validator.
    assert_eq!(r.agents_started(), ["attempt=2 role=validator lens=full"]);
    r.delivered_once(2);
    r.old_done_records_kept();
    assert_eq!(r.deliver_commits(&r.lane_branch()), 1);

    // The finding ends applied, by the fix commit the earlier iced's agent made.
    let fix_commit = r
        .env
        .git_out(&["rev-parse", &format!("{}~1", r.lane_branch())])
        .trim()
        .to_owned();
    assert_eq!(
        r.env
            .git_out(&["log", "-1", "--format=%s", &fix_commit])
            .trim(),
        "fake agent: src/session.rs"
    );
    let show = r.iced(&["run", "show", &r.fixture.run]).ok().json();
    let f1 = &show["lanes"][0]["findings"][0];
    assert_eq!(f1["id"], finding.as_str(), "{f1:#}");
    assert_eq!(f1["status"], "applied", "{f1:#}");
    assert_eq!(f1["disposition"]["commit"], fix_commit.as_str(), "{f1:#}");
    assert_eq!(f1["disposition"]["attempt"], 2, "{f1:#}");
    assert_eq!(f1["refutation"]["decision"], "confirmed", "{f1:#}");
}

// ---- (d) process driver, land.mode merge: delivered, not landed ----------------------------------

#[test]
fn a_delivered_run_not_yet_landed_lands_and_retires() {
    let r = restore("process-merge-delivered");
    r.reads_the_old_state("land", 1);
    let delivered = r.old_record("deliver")["outcome"]["commit"].clone();
    assert_eq!(
        r.env.git_out(&["rev-parse", &r.lane_branch()]).trim(),
        delivered.as_str().unwrap()
    );
    // The person went on working on main: the landing must bring it in and test again.
    r.env.write("NOTES.md", "meanwhile on main\n");
    r.env.commit_all("notes");

    r.step_until("delivered", |s| panic!("a process run handed out {s}"));
    assert_eq!(
        r.agents_started(),
        Vec::<String>::new(),
        "an agent ran again"
    );

    // Landed on main with the close, through the person's checkout; the lane retired.
    let unit = r.env.read(&format!("intent/{}/iced.md", r.fixture.unit));
    assert!(unit.lines().any(|l| l == "status: done"), "{unit}");
    assert_eq!(
        r.env.read("src/session.rs"),
        "sessions refresh on activity\n"
    );
    assert_eq!(r.env.read("NOTES.md"), "meanwhile on main\n");
    assert_eq!(r.deliver_commits("main"), 1);
    let merged = r.env.git_out(&[
        "merge-base",
        "--is-ancestor",
        delivered.as_str().unwrap(),
        "main",
    ]);
    assert_eq!(merged, "");
    assert_eq!(r.env.git_out(&["status", "--porcelain"]), "");
    assert!(!r.lane_worktree().exists(), "the lane's worktree is left");
    assert_eq!(
        r.env.git_out(&["branch", "--list", &r.lane_branch()]),
        "",
        "the lane branch is left"
    );
    // Retired: the run has left the state file; `run show` reads its record.
    let list = r.iced(&["run", "list"]).ok().json();
    assert_eq!(list, Value::Array(vec![]), "{list:#}");
    let record = r.iced(&["run", "show", &r.fixture.run]).ok().json();
    assert_eq!(record["run"]["status"], "delivered", "{record:#}");
    assert_eq!(record["run"]["lanes"][0]["attempt"], 1, "{record:#}");
    let events = r.events_kept();
    // The landing took the person's main in and ran the definition of done again.
    let new_steps: Vec<String> = events[r.old_events.len()..]
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["event"] == "step_done")
        .map(|e| str_of(&e, "step").to_owned())
        .collect();
    for step in ["integrate-1", "retest-1-0-0", "land-1", "retire"] {
        assert!(
            new_steps.iter().any(|s| s == step),
            "no {step}: {new_steps:?}"
        );
    }
    let ends = events
        .lines()
        .filter(|l| l.contains("\"event\":\"run_end\""))
        .count();
    assert_eq!(ends, 1, "{events}");
    assert_eq!(r.step()["action"], "nothing");
}

/// Every fixture says what it covers and which iced made it, and holds what the test puts back.
#[test]
fn every_fixture_names_its_maker_and_holds_a_state() {
    let all = files_under(&Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/compat"));
    let mut names: Vec<String> = all
        .keys()
        .filter(|p| p.ends_with("fixture.json"))
        .map(|p| p.parent().unwrap().display().to_string())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "host-implement-handed",
            "host-validate-one-answered",
            "process-fix-round",
            "process-merge-delivered"
        ]
    );
    for name in &names {
        let fixture: Fixture =
            serde_json::from_slice(&all[&PathBuf::from(format!("{name}/fixture.json"))]).unwrap();
        assert!(!fixture.covers.is_empty(), "{name}");
        assert_eq!(fixture.made_by.commit.len(), 40, "{name}");
        assert!(fixture.made_by.version.starts_with("iced "), "{name}");
        for file in ["repo.bundle", "run/state.json", "run/events.jsonl"] {
            assert!(
                all.contains_key(&PathBuf::from(format!("{name}/{file}"))),
                "{name} has no {file}"
            );
        }
    }
}
