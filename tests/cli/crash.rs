//! The crash suite (SPEC 20-21): `iced` killed with SIGKILL at every failpoint, at random
//! moments, and while a git it started is still running, must resume the same run to delivery
//! without doing a side effect twice: one agent per (role, lens, attempt) (a further attempt only
//! when the kill fell between recording a launch and its supervisor registering), each
//! definition-of-done command once per verified attempt, one delivery commit, a clean worktree,
//! no validator sandbox left, a released claim, a state file that parses strictly with no step
//! left `started`, and a history with each archived record once. Plus sixteen `implement step`
//! callers at once on one run.
//!
//! The landing's failpoints (SPEC 23) are walked on cases that land (`Setup::landing`): `merge`
//! into the local `main` checked out in the person's checkout, the same pushed to a bare `origin`,
//! or a pull request through `origin` and fixtures/fake-forge (with `land.pr.find`). A landed case
//! must end out of the state with its record, its lane retired, and the target holding the lane's
//! work exactly once: one landing merge on `main` whose parents are the old `main` and the delivery
//! (and `origin`'s `main` the same), or one pull request opened, armed, and never pushed to again.
//!
//! Every case works in a fresh repository holding one approved, committed unit (E1, E2), either
//! with `verify.independent: false`, or validated (`Setup::validated`): one lens, `full`, whose
//! validator finds an S2 on attempt 1 that the refuter confirms, so the run crosses the validate,
//! refute and fix stages and delivers after attempt 2. The fake agent (fixtures/fake-agent) plays
//! every role; it and the definition-of-done commands append a line to logs outside the
//! repository, so the test can count what really ran: no agent may start twice for one (role,
//! lens, attempt).
//!
//! `ICED_CRASH_ITERATIONS` (default 24) and `ICED_CRASH_MAX_DELAY_MS` tune the random kills; a
//! failed case copies what it left to `$TMPDIR/iced-crash-kept/`.

use crate::env::TestEnv;
use iced::run::state::{State, StepStatus};
use serde_json::{json, Value};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const FAKE_AGENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/fake-agent");
const FAKE_FORGE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/fake-forge");
/// A fast agent: one commit, a report with evidence for both expectations.
const QUICK_AGENT: &str = "commit src/session.txt refreshed on activity\nreport-ok E1 E2\n";
/// The agent of the concurrency test: slow enough that many callers find it running.
const SLOW_AGENT: &str =
    "sleep 0.3\ncommit src/session.txt refreshed on activity\nreport-ok E1 E2\n";
/// The validated setup's agent, every role (`{lane}` is the lane's id): the implementer commits and
/// disposes of every finding its brief lists; the validator finds an S2 on attempt 1 and passes
/// later; the refuter confirms it. Attempt 3 is reached only when an implementer launch crashed.
const VALIDATED_AGENT: &str = r#"role implementer
attempt 1
commit src/session.txt refreshed on activity
attempt 2
commit src/idle.txt idle sessions end
attempt 3
commit src/late.txt idle sessions end, late
attempt *
report-fix * E1 E2
role validator
attempt 1
report {"verdict": "fail", "expectations": [{"id": "E1", "result": "pass"}, {"id": "E2", "result": "pass"}], "findings": [{"file_path": "src/session.txt", "criterion_ref": "E2", "finding_category": "correctness", "severity": "S2-major", "summary": "idle sessions never end", "failure_scenario": {"inputs": "an idle session", "expected": "it ends after 30 minutes", "actual": "it never ends"}}]}
attempt 2
report {"verdict": "pass", "expectations": [{"id": "E1", "result": "pass"}, {"id": "E2", "result": "pass"}]}
attempt 3
report {"verdict": "pass", "expectations": [{"id": "E1", "result": "pass"}, {"id": "E2", "result": "pass"}]}
attempt *
role refuter
report {"findings": [{"finding_id": "{lane}-F1", "decision": "confirmed", "reason": "reproduced", "failure_scenario": {"inputs": "an idle session", "expected": "it ends after 30 minutes", "actual": "it never ends"}}]}
"#;
const SIGKILL: i32 = 9;
/// No single `iced` call of this suite should take anywhere near this long.
const CALL_LIMIT: Duration = Duration::from_secs(60);

#[derive(Clone, Copy, PartialEq, Debug)]
enum Driver {
    Process,
    Host,
}

/// How a delivered lane lands (SPEC 23.2).
#[derive(Clone, Copy, PartialEq, Debug)]
enum Land {
    /// `land.mode: none`: delivered on the lane branch, which stays.
    None,
    /// `merge` with strategy `merge` into the local `main`, checked out in the person's checkout.
    Merge,
    /// ... and pushed to `origin` (a bare repository beside the checkout).
    MergeRemote,
    /// `pr` through `origin` and `fixtures/fake-forge` (with `land.pr.find`), armed; the test
    /// plays the forge merging it once armed.
    Pr,
}

/// How a case's repository is configured.
#[derive(Clone, Copy)]
struct Setup {
    driver: Driver,
    /// How many definition-of-done entries (each one command appending to its own log).
    dod: usize,
    agent: &'static str,
    /// Independent validation (one lens, `full`; [`VALIDATED_AGENT`]), not the loop's own checks
    /// alone.
    validated: bool,
    land: Land,
}

impl Setup {
    fn process(dod: usize) -> Setup {
        Setup {
            driver: Driver::Process,
            dod,
            agent: QUICK_AGENT,
            validated: false,
            land: Land::None,
        }
    }

    fn landing(self, land: Land) -> Setup {
        Setup { land, ..self }
    }

    fn validated(self) -> Setup {
        Setup {
            agent: VALIDATED_AGENT,
            validated: true,
            ..self
        }
    }
}

/// Without the agent's script, which is long and tells nothing a failure needs.
impl std::fmt::Debug for Setup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Setup")
            .field("driver", &self.driver)
            .field("dod", &self.dod)
            .field("validated", &self.validated)
            .field("land", &self.land)
            .finish()
    }
}

/// One logged start of the fake agent.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Start {
    role: String,
    lens: String,
    attempt: u32,
}

/// One finished call of `iced`.
struct Call {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl Call {
    fn killed(&self) -> bool {
        self.status.signal() == Some(SIGKILL)
    }

    fn last_json(&self) -> Value {
        let line = self.stdout.lines().last().unwrap_or("");
        serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: not JSON: {}", self.describe()))
    }

    fn describe(&self) -> String {
        format!(
            "status {:?} (signal {:?})\nstdout:\n{}\nstderr:\n{}",
            self.status.code(),
            self.status.signal(),
            self.stdout,
            self.stderr
        )
    }
}

/// A repository ready to build, and the logs outside it.
struct Case {
    env: TestEnv,
    id: String,
    setup: Setup,
    /// `<tmp>/crash`: the agent's script and log, the definition-of-done logs, captured output.
    out: PathBuf,
    calls: AtomicUsize,
    /// `PATH` for every `iced` call (and so for what it starts), when not the test's own.
    path: Option<std::ffi::OsString>,
    /// `main` once the case is set up: what landing starts from.
    base: String,
}

impl Case {
    fn new(setup: Setup) -> Case {
        let env = TestEnv::initialized();
        let id = env.approved_unit("Session timeout");
        let out = env
            .root()
            .parent()
            .expect("the repo has a parent")
            .join("crash");
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(out.join("agent.script"), setup.agent.replace("{lane}", &id)).unwrap();
        let mut config: Value = serde_json::from_str(&env.read(".iced/config.json")).unwrap();
        let commands: Vec<Value> = (0..setup.dod)
            .map(|k| {
                let log = out.join(format!("dod-{k}.log"));
                json!({"argv": ["sh", "-c", "echo ran >> \"$0\"", log], "timeoutSec": 30})
            })
            .collect();
        config["verify"]["independent"] = json!(setup.validated);
        if setup.validated {
            config["verify"]["lenses"] = json!(["full"]);
        }
        config["verify"]["commands"] = json!(commands);
        config["verify"]["timeoutSec"] = json!(30);
        config["run"] = json!({"killGraceSec": 1});
        if setup.driver == Driver::Process {
            config["runners"] = json!({"fake": {"kind": "command", "argv": [FAKE_AGENT, out.join("agent.script")], "timeoutSec": 30}});
            config["roles"] = json!({"implementer": {"runner": "fake", "model": null}});
            if setup.validated {
                config["roles"]["validator"] = json!({"runner": "fake", "model": null});
            }
        }
        env.write(
            ".iced/config.json",
            serde_json::to_string_pretty(&config).unwrap(),
        );
        let forge = out.join("forge");
        let forge_argv = |verb: &str, rest: &[&str]| {
            let mut argv = vec![
                "bash".to_owned(),
                FAKE_FORGE.to_owned(),
                forge.display().to_string(),
                verb.to_owned(),
            ];
            argv.extend(rest.iter().map(|s| (*s).to_owned()));
            argv
        };
        config["land"] = match setup.land {
            Land::None => json!({"mode": "none"}),
            Land::Merge => json!({"mode": "merge", "strategy": "merge"}),
            Land::MergeRemote => json!({"mode": "merge", "strategy": "merge", "remote": "origin"}),
            Land::Pr => json!({"mode": "pr", "remote": "origin", "arm": "auto", "pr": {
                "open": forge_argv("open", &["--head", "{branch}", "--base", "{target}", "--title", "{title}", "--body-file", "{body_file}"]),
                "arm": forge_argv("arm", &["{pr_number}", "{pr_url}"]),
                "find": forge_argv("find", &["{branch}"]),
                "armed": forge_argv("armed", &["{pr_number}"]),
            }}),
        };
        env.write(
            ".iced/config.json",
            serde_json::to_string_pretty(&config).unwrap(),
        );
        // The person wrote what it runs, and trusts it.
        env.trust_config();
        env.git(&["add", "-A"]);
        env.git(&["commit", "-q", "-m", "approve the unit"]);
        let mut path = None;
        if matches!(setup.land, Land::MergeRemote | Land::Pr) {
            let remote = out.join("remote.git");
            crate::env::git_at(
                &out,
                &[
                    "init",
                    "-q",
                    "--bare",
                    "-b",
                    "main",
                    &remote.display().to_string(),
                ],
            );
            env.git(&["remote", "add", "origin", &remote.display().to_string()]);
            env.git(&["push", "-q", "origin", "main"]);
        }
        if setup.land == Land::Pr {
            std::fs::create_dir_all(&forge).unwrap();
            // A `git` first on PATH that logs every push to the forge's log, so the order of the
            // pushes and the forge's calls is on one page.
            path = Some(crate::env::git_shim(
                &out.join("bin"),
                &format!(
                    "case \" $* \" in *' push '*) printf 'git push\\t%s\\n' \"$*\" >> '{}';; esac\n",
                    forge.join("calls.log").display()
                ),
            ));
        }
        let base = env.git_out(&["rev-parse", "main"]).trim().to_owned();
        Case {
            env,
            id,
            setup,
            out,
            calls: AtomicUsize::new(0),
            path,
            base,
        }
    }

    /// `iced <args>`, with `ICED_FAILPOINT` set when `failpoint` is given, started but not waited
    /// for. Its output goes to files (the returned paths), never to pipes a child could hold open.
    fn spawn(&self, args: &[&str], failpoint: Option<&str>) -> (Child, PathBuf, PathBuf) {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        let stdout = self.out.join(format!("call-{n}.stdout"));
        let stderr = self.out.join(format!("call-{n}.stderr"));
        let mut cmd = self.env.command();
        cmd.args(args)
            .stdout(std::fs::File::create(&stdout).unwrap())
            .stderr(std::fs::File::create(&stderr).unwrap());
        if let Some(fp) = failpoint {
            cmd.env("ICED_FAILPOINT", fp);
        }
        if let Some(path) = &self.path {
            cmd.env("PATH", path);
        }
        (cmd.spawn().expect("iced starts"), stdout, stderr)
    }

    fn iced(&self, args: &[&str], failpoint: Option<&str>) -> Call {
        let (mut child, stdout, stderr) = self.spawn(args, failpoint);
        let status = wait_for(&mut child, CALL_LIMIT, &format!("iced {args:?}"));
        collect(status, &stdout, &stderr)
    }

    fn build(&self, failpoint: Option<&str>) -> Call {
        self.iced(&["build", &self.id, "--json"], failpoint)
    }

    /// Run `iced build` without a failpoint until the run is delivered (landed and retired, when
    /// it lands; a pull request the test merges as the forge once it waits for that) at most
    /// three times.
    fn build_to_delivery(&self, context: &str) {
        for _ in 0..3 {
            // Building a delivered unit again would start a second run: the first may have
            // finished before it was killed.
            if self.finished() {
                return;
            }
            let call = self.build(None);
            assert!(
                call.status.success(),
                "{context}: the resuming `iced build` failed: {}",
                call.describe()
            );
            assert_eq!(
                call.last_json()["run"].as_str().map(str::to_owned),
                Some(self.the_run()),
                "{context}: `iced build` resumed the one run"
            );
            self.forge_merges();
        }
        if !self.finished() {
            panic!(
                "{context}: three resuming `iced build` calls did not deliver the run; state:\n{}",
                self.env.read(".iced/run/state.json")
            );
        }
    }

    /// Delivered (`land.mode: none`), or landed, retired and out of the state.
    fn finished(&self) -> bool {
        match self.setup.land {
            Land::None => self.run_status().as_deref() == Some("delivered"),
            _ => {
                std::fs::read(self.env.path(".iced/run/state.json"))
                    .ok()
                    .and_then(|b| State::parse(&b).ok())
                    .is_some_and(|s| s.runs.is_empty())
                    && self.recorded_run().is_some()
            }
        }
    }

    /// The one run: in the state, or, once it left it, in its record.
    fn the_run(&self) -> String {
        match self.state().runs.keys().next() {
            Some(run) => run.clone(),
            None => {
                self.recorded_run()
                    .expect("a run in the state or a record")
                    .0
            }
        }
    }

    /// The one run with a record (`.iced/run/<run>/record.json`): its id and its `run`.
    fn recorded_run(&self) -> Option<(String, Value)> {
        let mut found = Vec::new();
        for entry in std::fs::read_dir(self.env.path(".iced/run"))
            .ok()?
            .flatten()
        {
            let record = entry.path().join("record.json");
            if let Ok(bytes) = std::fs::read(&record) {
                let value: Value = serde_json::from_slice(&bytes)
                    .unwrap_or_else(|e| panic!("{}: {e}", record.display()));
                found.push((entry.file_name().to_string_lossy().into_owned(), value));
            }
        }
        assert!(found.len() <= 1, "more than one run has a record");
        found.pop().map(|(id, record)| (id, record["run"].clone()))
    }

    /// The forge merges the pull request once it is armed and the loop waits for it: the lane's
    /// head becomes `origin`'s `main` (a fast-forward).
    fn forge_merges(&self) {
        if self.setup.land != Land::Pr {
            return;
        }
        let Ok(bytes) = std::fs::read(self.env.path(".iced/run/state.json")) else {
            return;
        };
        let state = State::parse(&bytes).unwrap();
        let Some(run) = state.runs.values().next() else {
            return;
        };
        let lane = &run.lanes[0];
        if lane.stage.as_str() == "retire" && lane.outcome(&crate::env::key("pr-arm")).is_some() {
            let branch = format!("iced/{}/{}", self.id, self.id);
            self.env.git(&[
                "push",
                "-q",
                &self.out.join("remote.git").display().to_string(),
                &format!("{branch}:refs/heads/main"),
            ]);
        }
    }

    fn state(&self) -> State {
        State::parse(&self.env.read_bytes(".iced/run/state.json"))
            .unwrap_or_else(|e| panic!("state.json does not parse strictly: {e:?}"))
    }

    fn run_id(&self) -> String {
        let state = self.state();
        let runs: Vec<&String> = state.runs.keys().collect();
        assert_eq!(runs.len(), 1, "one run in the state: {runs:?}");
        runs[0].clone()
    }

    fn run_status(&self) -> Option<String> {
        let bytes = std::fs::read(self.env.path(".iced/run/state.json")).ok()?;
        let state = State::parse(&bytes).ok()?;
        let run = state.runs.values().next()?;
        Some(run.status.as_str().to_owned())
    }

    fn stage(&self) -> Option<String> {
        let bytes = std::fs::read(self.env.path(".iced/run/state.json")).ok()?;
        let state = State::parse(&bytes).ok()?;
        let run = state.runs.values().next()?;
        Some(run.lanes[0].stage.as_str().to_owned())
    }

    /// Every start of the fake agent, in order.
    fn agent_starts(&self) -> Vec<Start> {
        let log = std::fs::read_to_string(self.out.join("agent.script.log")).unwrap_or_default();
        log.lines()
            .map(|l| {
                let field = |name: &str| {
                    l.split_whitespace()
                        .find_map(|w| w.strip_prefix(name))
                        .unwrap_or_else(|| panic!("an agent log line without {name}: {l}"))
                        .to_owned()
                };
                Start {
                    role: field("role="),
                    lens: field("lens="),
                    attempt: field("attempt=")
                        .parse()
                        .unwrap_or_else(|_| panic!("a bad attempt: {l}")),
                }
            })
            .collect()
    }

    /// The attempts in which `role` started, in order.
    fn attempts_of(&self, role: &str) -> Vec<u32> {
        self.agent_starts()
            .into_iter()
            .filter(|s| s.role == role)
            .map(|s| s.attempt)
            .collect()
    }

    fn dod_runs(&self, k: usize) -> usize {
        std::fs::read_to_string(self.out.join(format!("dod-{k}.log")))
            .unwrap_or_default()
            .lines()
            .count()
    }

    /// Every step record of a lane (as the state or the record has it): its current attempt's,
    /// and older ones (history).
    fn records_of(&self, run: &str, lane: &Value) -> Vec<Value> {
        let mut records: Vec<Value> = lane["steps"].as_array().expect("steps").clone();
        let history =
            std::fs::read_to_string(self.env.path(&format!(".iced/run/{run}/history.jsonl")))
                .unwrap_or_default();
        for line in history.lines() {
            records.push(
                serde_json::from_str(line).unwrap_or_else(|e| panic!("history.jsonl: {e}: {line}")),
            );
        }
        records
    }

    fn deliver_commits(&self) -> usize {
        let branch = format!("iced/{}/{}", self.id, self.id);
        let out = Command::new("git")
            .args(["log", "--format=%s", &branch])
            .current_dir(self.env.root())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .expect("git runs");
        assert!(out.status.success(), "git log {branch}: {out:?}");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.starts_with("iced: deliver"))
            .count()
    }

    /// What every finished run must show, delivered or landed: no agent started twice for one
    /// (role, lens, attempt), the implementer (and validators) once per attempt, one verified
    /// receipt per implementer start, every definition-of-done command once per verified attempt,
    /// no record archived twice, no validator sandbox left. `lane` is the run's lane as the state
    /// or the record has it.
    /// The run's story told once (issue 15, #6): one `run_start` (an admit killed after saving
    /// the run lost it), and one `step_start` per step and attempt (a step a killed call began is
    /// taken up again as `step_replay`, never started a second time).
    fn assert_events_once(&self, context: &str, run: &str) {
        let events = std::fs::read_to_string(self.env.path(".iced/run/events.jsonl")).unwrap();
        let events: Vec<Value> = events
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|e| e["run"] == run)
            .collect();
        let run_starts = events.iter().filter(|e| e["event"] == "run_start").count();
        assert_eq!(run_starts, 1, "{context}: run_start events of the run");
        let mut per_step = std::collections::BTreeMap::<String, usize>::new();
        for e in events.iter().filter(|e| e["event"] == "step_start") {
            let key = format!(
                "{} {} {} {}",
                e["lane"], e["step"], e["attempt"], e["command"]
            );
            *per_step.entry(key).or_default() += 1;
        }
        let twice: Vec<_> = per_step.iter().filter(|(_, n)| **n > 1).collect();
        assert!(
            twice.is_empty(),
            "{context}: steps started more than once: {twice:?}"
        );
    }

    fn assert_work_once(&self, context: &str, retry_allowed: bool, run: &str, lane: &Value) {
        // No agent started twice for one (role, lens, attempt): a completed step never reran.
        let starts = self.agent_starts();
        let mut per_key = std::collections::BTreeMap::<&Start, usize>::new();
        for s in &starts {
            *per_key.entry(s).or_default() += 1;
        }
        assert!(
            per_key.values().all(|n| *n == 1),
            "{context}: an agent started twice for one (role, lens, attempt): {per_key:?}"
        );
        // The implementer: once, or (validated) twice, for the fix round; a crashed launch
        // (retry_allowed, process driver) moves the work one attempt on.
        let implementer = self.attempts_of("implementer");
        let expected: &[u32] = if self.setup.validated { &[1, 2] } else { &[1] };
        if retry_allowed && self.setup.driver == Driver::Process {
            // As many starts as the work needs, never fewer: a validated unit's validators find
            // something in attempt 1 only (the fake agent's script), so a fix round follows
            // when attempt 1 ran, and none when its launch crashed and the work began at 2.
            let needed = if self.setup.validated && implementer.first() == Some(&1) {
                2
            } else {
                1
            };
            assert_eq!(
                implementer.len(),
                needed,
                "{context}: the implementer started in attempts {implementer:?}"
            );
        } else {
            assert_eq!(
                implementer, expected,
                "{context}: the implementer's starts (by attempt); every start: {starts:?}"
            );
        }
        if self.setup.validated {
            // Each verified attempt was validated once; the refuter saw attempt 1's finding.
            assert_eq!(
                self.attempts_of("validator"),
                implementer,
                "{context}: a validator per implementer attempt; every start: {starts:?}"
            );
            let refuted: &[u32] = if implementer.first() == Some(&1) {
                &[1]
            } else {
                &[]
            };
            assert_eq!(
                self.attempts_of("refuter"),
                refuted,
                "{context}: the refuter's starts; every start: {starts:?}"
            );
            for f in lane["findings"].as_array().expect("findings") {
                assert_eq!(
                    f["status"], "applied",
                    "{context}: finding {} ended {}",
                    f["id"], f["status"]
                );
            }
        } else {
            assert!(
                starts.iter().all(|s| s.role == "implementer"),
                "{context}: {starts:?}"
            );
        }

        self.assert_events_once(context, run);

        {
            // The metrics the delivery carries (issue 15, item 3): one `verify` per implementer
            // attempt that ran, each once, the failed ones before the pass; every delivery writes
            // its pass, with validators or without (issue 11, item 7).
            let delivery = lane["steps"]
                .as_array()
                .expect("steps")
                .iter()
                .find(|r| r["step"] == "deliver")
                .and_then(|r| r["outcome"]["commit"].as_str())
                .unwrap_or_else(|| panic!("{context}: no delivery commit: {lane:#}"))
                .to_owned();
            let metrics = self
                .env
                .git_out(&["show", &format!("{delivery}:.iced/metrics.jsonl")]);
            let verdicts: Vec<(String, u64)> = metrics
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .filter(|e| e["event"] == "verify")
                .map(|e| {
                    (
                        e["result"].as_str().unwrap_or("").to_owned(),
                        e["attempt"].as_u64().unwrap_or(0),
                    )
                })
                .collect();
            let mut expected: Vec<(String, u64)> = implementer
                .iter()
                .map(|a| ("fail".to_owned(), u64::from(*a)))
                .collect();
            if let Some(last) = expected.last_mut() {
                last.0 = "pass".to_owned();
            }
            assert_eq!(
                verdicts, expected,
                "{context}: the delivery's verify events, by attempt:\n{metrics}"
            );
        }

        let history =
            std::fs::read_to_string(self.env.path(&format!(".iced/run/{run}/history.jsonl")))
                .unwrap_or_default();
        let mut lines: Vec<&str> = history.lines().collect();
        lines.sort_unstable();
        let archived = lines.len();
        lines.dedup();
        assert_eq!(
            lines.len(),
            archived,
            "{context}: a record was archived twice in history.jsonl"
        );
        let records = self.records_of(run, lane);
        // The agents always do their job, so no receipt may fail: an attempt is superseded
        // because its implementer launch crashed (recorded, never started), or (validated) by
        // the fix round its validators asked for.
        let receipts: Vec<&Value> = records.iter().filter(|r| r["step"] == "receipt").collect();
        assert!(
            receipts.len() == implementer.len() && receipts.iter().all(|r| r["status"] == "done"),
            "{context}: one verified receipt per implementer start ({implementer:?}); got {receipts:#?}"
        );
        let final_attempt = lane["attempt"].as_u64().expect("an attempt");
        for r in records.iter().filter(|r| r["step"] == "implement") {
            if r["attempt"] == final_attempt {
                continue;
            }
            let ran = implementer
                .iter()
                .any(|a| Some(u64::from(*a)) == r["attempt"].as_u64());
            if self.setup.validated && r["status"] == "done" {
                assert!(
                    ran,
                    "{context}: a done implement record without its agent: {r}"
                );
                continue;
            }
            assert!(
                r["status"] == "failed" && r["outcome"]["crashed"] == true,
                "{context}: attempt {} was superseded without crashing: {r}",
                r["attempt"]
            );
            // Only `iced` invocations are killed here, never a supervisor: a launch taken
            // for crashed must not have started its agent (else two agents could overlap in
            // one worktree, one per attempt).
            assert!(
                !ran,
                "{context}: the agent of crashed attempt {} ran (starts {starts:?})",
                r["attempt"]
            );
        }
        for k in 0..self.setup.dod {
            let recorded = records
                .iter()
                .filter(|r| r["step"] == format!("dod-{k}-0") && r["status"] == "done")
                .count();
            assert_eq!(
                (self.dod_runs(k), recorded),
                (receipts.len(), receipts.len()),
                "{context}: definition-of-done command {k} ran (and was recorded) once per verified attempt"
            );
        }
        if self.setup.validated {
            let sandboxes = PathBuf::from(format!(
                "{}.validators",
                lane["worktree"].as_str().unwrap_or("")
            ));
            assert!(
                !sandboxes.exists(),
                "{context}: validator sandboxes are left in {}",
                sandboxes.display()
            );
        }
    }

    /// Everything a delivered run must show after any crash. `retry_allowed`: the kill may have
    /// fallen between recording a launch and its supervisor registering, which the SPEC turns
    /// into a crashed attempt and a retry.
    fn assert_delivered(&self, context: &str, retry_allowed: bool) {
        let run = self.run_id();
        let state = self.state();
        assert_eq!(
            state.runs[&run].status.as_str(),
            "delivered",
            "{context}: the run is delivered"
        );

        self.assert_work_once(
            context,
            retry_allowed,
            &run,
            &serde_json::to_value(&state.runs[&run].lanes[0]).unwrap(),
        );

        let show = self.iced(&["run", "show", &run, "--json"], None);
        assert!(
            show.status.success(),
            "{context}: run show: {}",
            show.describe()
        );
        let show: Value = serde_json::from_str(&show.stdout).expect("run show --json is JSON");
        for lane in show["lanes"].as_array().expect("lanes") {
            for r in lane["steps"].as_array().expect("steps") {
                assert_ne!(
                    r["status"], "started",
                    "{context}: a step record is left started: {r}"
                );
            }
        }
        for lane in &state.runs[&run].lanes {
            assert!(lane.steps.iter().all(|r| r.status != StepStatus::Started));
        }

        assert_eq!(
            self.deliver_commits(),
            1,
            "{context}: exactly one `iced: deliver` commit on the lane branch"
        );
        let worktree = state.runs[&run].lanes[0]
            .worktree
            .clone()
            .expect("a delivered lane has a worktree");
        let status = Command::new("git")
            .args(["status", "--porcelain", "--untracked-files=all"])
            .current_dir(&worktree)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .expect("git runs");
        assert!(
            status.status.success() && status.stdout.is_empty(),
            "{context}: the delivered worktree is clean: {}",
            String::from_utf8_lossy(&status.stdout)
        );
        self.assert_claim_released(context);
        let events = std::fs::read_to_string(self.env.path(".iced/run/events.jsonl")).unwrap();
        for line in events.lines() {
            serde_json::from_str::<Value>(line)
                .unwrap_or_else(|e| panic!("{context}: events.jsonl: {e}: {line:?}"));
        }
    }

    /// The ended run's claim is released, except after a kill between saving the run's end and
    /// releasing its claims (`end-before-release`): then it names this run, which has ended, and
    /// so blocks nobody (SPEC 20.3) until an admit replaces it.
    fn assert_claim_released(&self, context: &str) {
        let path = self.env.claim_path(&self.id);
        if !path.exists() {
            return;
        }
        assert!(
            context.contains("ICED_FAILPOINT=end-before-release"),
            "{context}: the ended run's claim is released"
        );
        let claim: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
            .expect("a claim is JSON");
        assert_eq!(claim["run"], self.the_run().as_str(), "{context}: {claim}");
        let ended = match self.state().runs.get(&self.the_run()) {
            Some(run) => run.status.is_ended(),
            None => self.recorded_run().is_some(),
        };
        assert!(
            ended,
            "{context}: a claim is left of a run that has not ended"
        );
    }

    /// What a finished case must show: delivered ([`Case::assert_delivered`]) or landed
    /// ([`Case::assert_landed`]), by how it lands.
    fn assert_finished(&self, context: &str, retry_allowed: bool) {
        if self.setup.land == Land::None {
            self.assert_delivered(context, retry_allowed);
        } else {
            self.assert_landed(context, retry_allowed);
        }
    }

    /// Everything a landed run must show after any crash: the work done once
    /// ([`Case::assert_work_once`]); the run out of the state (which parses strictly), its record
    /// delivered with every step done; the target got the lane's work exactly once (`merge`: one
    /// landing merge commit on `main` whose parents are the old `main` and the delivery, `origin`'s
    /// `main` the same; `pr`: one push of the lane branch, one pull request opened and armed,
    /// nothing pushed after arming); the lane's worktree and branch gone; the person's checkout
    /// clean and following; the claim released.
    fn assert_landed(&self, context: &str, retry_allowed: bool) {
        let state = self.state();
        assert!(
            state.runs.is_empty(),
            "{context}: the landed run left the state: {:?}",
            state.runs.keys().collect::<Vec<_>>()
        );
        let (run, recorded) = self
            .recorded_run()
            .unwrap_or_else(|| panic!("{context}: the landed run has no record"));
        assert_eq!(recorded["status"], "delivered", "{context}: {recorded:#}");
        let lane = &recorded["lanes"][0];
        assert_eq!(lane["stage"], "delivered", "{context}");
        self.assert_work_once(context, retry_allowed, &run, lane);
        for r in lane["steps"].as_array().expect("steps") {
            assert_eq!(r["status"], "done", "{context}: a step not done: {r}");
        }
        let outcome = |key: &str| {
            lane["steps"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["step"] == key)
                .map(|r| r["outcome"].clone())
                .unwrap_or_else(|| panic!("{context}: no `{key}` record: {lane:#}"))
        };
        assert_eq!(outcome("retire")["retired"], true, "{context}");
        let delivery = outcome("deliver")["commit"]
            .as_str()
            .expect("a delivery commit")
            .to_owned();
        let git = |args: &[&str]| self.env.git_out(args).trim().to_owned();
        let main = git(&["rev-parse", "main"]);
        let remote = self.out.join("remote.git");
        let remote_main = || {
            crate::env::git_at(&remote, &["rev-parse", "main"])
                .trim()
                .to_owned()
        };
        let work = if self.setup.validated {
            vec![
                "fake agent: src/idle.txt".to_owned(),
                "fake agent: src/session.txt".to_owned(),
            ]
        } else {
            vec!["fake agent: src/session.txt".to_owned()]
        };
        let lane_subjects = |tip: &str| {
            let subjects: Vec<String> =
                git(&["log", "--format=%s", &format!("{}..{tip}", self.base)])
                    .lines()
                    .map(str::to_owned)
                    .collect();
            subjects
        };
        match self.setup.land {
            Land::Merge | Land::MergeRemote => {
                assert_eq!(
                    git(&[
                        "rev-list",
                        "--first-parent",
                        &format!("{}..main", self.base)
                    ]),
                    main,
                    "{context}: exactly one commit landed on main's first-parent line"
                );
                assert_eq!(
                    git(&["rev-list", "--parents", "-n", "1", &main]),
                    format!("{main} {} {delivery}", self.base),
                    "{context}: the landing merge's parents are the old main and the delivery"
                );
                let mut expected = vec![
                    format!("{} (merge)", self.id),
                    format!("iced: deliver {}", self.id),
                ];
                expected.extend(work);
                assert_eq!(
                    lane_subjects(&main),
                    expected,
                    "{context}: main got the lane's work once"
                );
                assert_eq!(
                    outcome(&format!("land-{}", lane["land_round"]))["commit"],
                    main.as_str()
                );
                if self.setup.land == Land::MergeRemote {
                    assert_eq!(
                        remote_main(),
                        main,
                        "{context}: origin's main is the landing"
                    );
                }
                assert_eq!(
                    self.env.read("src/session.txt"),
                    "refreshed on activity\n",
                    "{context}: the person's checkout follows main"
                );
                assert_eq!(git(&["symbolic-ref", "--short", "HEAD"]), "main");
            }
            Land::Pr => {
                assert_eq!(
                    main, self.base,
                    "{context}: a pull request does not move the local main"
                );
                assert_eq!(
                    remote_main(),
                    delivery,
                    "{context}: the forge merged the lane head"
                );
                assert_eq!(
                    crate::env::git_at(
                        &remote,
                        &["rev-parse", &format!("iced/{}/{}", self.id, self.id)]
                    )
                    .trim(),
                    delivery,
                    "{context}: the pull request's branch is the delivery"
                );
                let mut expected = vec![format!("iced: deliver {}", self.id)];
                expected.extend(work);
                assert_eq!(lane_subjects(&remote_main()), expected, "{context}");
                let log = std::fs::read_to_string(self.out.join("forge/calls.log")).unwrap();
                let kinds: Vec<&str> = log.lines().map(|l| l.split('\t').next().unwrap()).collect();
                assert_eq!(
                    kinds.iter().filter(|k| **k == "forge open").count(),
                    1,
                    "{context}: one pull request opened:\n{log}"
                );
                assert_eq!(
                    kinds.iter().filter(|k| **k == "forge arm").count(),
                    1,
                    "{context}: armed once:\n{log}"
                );
                assert_eq!(
                    kinds.iter().filter(|k| **k == "git push").count(),
                    1,
                    "{context}: the lane branch pushed once:\n{log}"
                );
                let armed = kinds.iter().position(|k| *k == "forge arm").unwrap();
                assert!(
                    kinds[armed..].iter().all(|k| *k != "git push"),
                    "{context}: a push after arming:\n{log}"
                );
                let opened = outcome("pr-open");
                assert_eq!(opened["url"], "https://forge.test/o/r/pull/7", "{context}");
                assert_eq!(opened["number"], 7, "{context}");
            }
            Land::None => unreachable!(),
        }
        assert!(
            git(&["branch", "--list", "iced/*"]).is_empty(),
            "{context}: the lane's branch is deleted"
        );
        assert!(
            !Path::new(lane["worktree"].as_str().expect("a worktree")).exists(),
            "{context}: the lane's worktree is removed"
        );
        assert_eq!(
            git(&["worktree", "list", "--porcelain"])
                .lines()
                .filter(|l| l.starts_with("worktree "))
                .count(),
            1,
            "{context}: only the person's checkout is left"
        );
        assert_eq!(
            git(&["status", "--porcelain", "--untracked-files=all"]),
            "",
            "{context}: the person's checkout is clean"
        );
        self.assert_claim_released(context);
        let show = self.iced(&["run", "show", &run, "--json"], None);
        assert!(
            show.status.success(),
            "{context}: run show: {}",
            show.describe()
        );
        let events = std::fs::read_to_string(self.env.path(".iced/run/events.jsonl")).unwrap();
        for line in events.lines() {
            serde_json::from_str::<Value>(line)
                .unwrap_or_else(|e| panic!("{context}: events.jsonl: {e}: {line:?}"));
        }
    }

    /// Drive the run with `iced implement step` (and, host-driven, act as the host: run the fake
    /// agent once per receipt key and hand in its receipt) until it is delivered. With `arm`,
    /// the failpoint is set on each call made while the lane is at stage `arm.1` (any stage when
    /// None), until one call dies by it. Returns whether a call was killed.
    fn drive_steps(&self, context: &str, arm: Option<(&str, Option<&str>)>) -> bool {
        let mut killed = false;
        let mut handed: Vec<String> = Vec::new();
        let give_up = Instant::now() + Duration::from_secs(30);
        loop {
            assert!(
                Instant::now() < give_up,
                "{context}: not delivered after 30 s of `implement step`; state:\n{}",
                self.env.read(".iced/run/state.json")
            );
            let failpoint = match arm {
                Some((fp, stage)) if !killed => match stage {
                    None => Some(fp),
                    Some(s) => (self.stage().as_deref() == Some(s)).then_some(fp),
                },
                _ => None,
            };
            // A host whose call was killed names its run (every answer carried it): the run
            // may have ended in the call that died, and a step with no run names no ended run.
            let run = killed.then(|| self.the_run());
            let mut args = vec!["implement", "step", "--json"];
            if let Some(run) = &run {
                args.extend(["--run", run.as_str()]);
            }
            let call = self.iced(&args, failpoint);
            if call.killed() {
                assert!(
                    failpoint.is_some(),
                    "{context}: `implement step` was killed without a failpoint: {}",
                    call.describe()
                );
                killed = true;
                continue;
            }
            assert!(
                call.status.success(),
                "{context}: `implement step` failed: {}",
                call.describe()
            );
            assert!(
                call.stdout.len() < 1024,
                "{context}: `implement step --json` printed {} bytes",
                call.stdout.len()
            );
            let report = call.last_json();
            match report["action"].as_str().unwrap_or("") {
                "delivered" => return killed,
                "advanced" => {}
                "waiting" => {
                    self.forge_merges();
                    std::thread::sleep(Duration::from_millis(30))
                }
                "start_agent" if self.setup.driver == Driver::Host => {
                    let key = report["receipt_key"]
                        .as_str()
                        .expect("a receipt key")
                        .to_owned();
                    if !handed.contains(&key) {
                        self.host_runs_agent(&report);
                        handed.push(key);
                    }
                    let receipt = report["receipt_path"].as_str().expect("a receipt path");
                    let call = self.iced(&["implement", "receipt", receipt, "--json"], None);
                    assert!(
                        call.status.success(),
                        "{context}: `implement receipt` failed: {}",
                        call.describe()
                    );
                }
                other => panic!("{context}: unexpected action {other}: {}", call.describe()),
            }
        }
    }

    /// What a driving host does on `start_agent`: start a fresh agent in the worktree, in the
    /// role it names (a validator's lens is the name of its prompt's folder,
    /// `activities/validate-<lens>-<attempt>/prompt.md`; the refuter's is `refute`).
    fn host_runs_agent(&self, report: &Value) {
        let brief = report["brief"].as_str().expect("a brief");
        let role = report["role"].as_str().expect("a role");
        let lens = if role == "implementer" {
            String::new()
        } else {
            let folder = Path::new(brief)
                .parent()
                .and_then(|d| d.file_name())
                .expect("the prompt's folder")
                .to_string_lossy()
                .into_owned();
            let name = folder.rsplit_once('-').expect("<step>-<attempt>").0;
            name.strip_prefix("validate-").unwrap_or(name).to_owned()
        };
        let status = Command::new(FAKE_AGENT)
            .arg(self.out.join("agent.script"))
            .current_dir(report["worktree"].as_str().expect("a worktree"))
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.env.root())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("ICED_OUTPUT_FILE", report["receipt_path"].as_str().unwrap())
            .env("ICED_RUN", report["run"].as_str().unwrap())
            .env("ICED_LANE", report["lane"].as_str().unwrap())
            .env("ICED_ATTEMPT", report["attempt"].to_string())
            .env("ICED_ROLE", role)
            .env("ICED_LENS", lens)
            .env("ICED_PROMPT_FILE", brief)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .status()
            .expect("the fake agent runs");
        assert!(status.success(), "the host's fake agent failed: {status:?}");
    }
}

impl Drop for Case {
    /// A failed case keeps what it left (the run directory, the logs, the worktree's history) in
    /// `$TMPDIR/iced-crash-kept/`, for whoever reads the failure.
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let kept = std::env::temp_dir()
            .join("iced-crash-kept")
            .join(format!(
                "{}-{}",
                std::process::id(),
                self.calls.load(Ordering::SeqCst)
            ))
            .join(self.out.parent().unwrap().file_name().unwrap());
        let _ = std::fs::create_dir_all(&kept);
        let _ = Command::new("cp")
            .arg("-a")
            .arg(self.env.path(".iced/run"))
            .arg(&self.out)
            .arg(&kept)
            .status();
        let log = Command::new("git")
            .args(["log", "--all", "--format=%h %s", "--graph"])
            .current_dir(self.env.root())
            .output();
        if let Ok(log) = log {
            let _ = std::fs::write(kept.join("git-log.txt"), log.stdout);
        }
        eprintln!("kept the failed case's files in {}", kept.display());
    }
}

fn wait_for(child: &mut Child, limit: Duration, what: &str) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn collect(status: ExitStatus, stdout: &Path, stderr: &Path) -> Call {
    Call {
        status,
        stdout: std::fs::read_to_string(stdout).unwrap_or_default(),
        stderr: std::fs::read_to_string(stderr).unwrap_or_default(),
    }
}

/// Run `f` on every item, `workers` at a time, and fail once with every item's failure.
fn each_in_parallel<T: Sync + std::fmt::Debug>(
    what: &str,
    items: &[T],
    workers: usize,
    f: impl Fn(&T) + Sync,
) {
    let next = AtomicUsize::new(0);
    let failures = std::sync::Mutex::new(Vec::new());
    let started = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(item) = items.get(i) else { break };
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(item)));
                if let Err(payload) = result {
                    let message = payload
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                        .unwrap_or_else(|| "a panic without a message".into());
                    failures
                        .lock()
                        .unwrap()
                        .push(format!("{item:?}: {message}"));
                }
            });
        }
    });
    eprintln!(
        "{what}: {} cases in {:.1} s",
        items.len(),
        started.elapsed().as_secs_f64()
    );
    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "{what}: {} of {} cases failed:\n\n{}",
        failures.len(),
        items.len(),
        failures.join("\n\n")
    );
}

/// One way of reaching a failpoint: `ICED_FAILPOINT=<spec>` under `setup`, armed (in the
/// `implement step` cases) only while the lane is at `stage`.
#[derive(Debug, Clone)]
struct Variant {
    name: &'static str,
    spec: String,
    setup: Setup,
    stage: Option<&'static str>,
}

impl Variant {
    fn new(name: &'static str, spec: &str, setup: Setup) -> Variant {
        Variant {
            name,
            spec: spec.to_owned(),
            setup,
            stage: None,
        }
    }

    /// Killed between recording an implementer launch and its supervisor registering: the SPEC
    /// makes that a crashed attempt, retried as the next one.
    fn retry_allowed(&self) -> bool {
        self.name == "launch-after-record"
    }
}

/// Every failpoint, each with the ways of reaching it that differ in what must be recovered.
fn variants(driver: Driver) -> Vec<Variant> {
    let setup = |dod| Setup {
        driver,
        dod,
        agent: QUICK_AGENT,
        validated: false,
        land: Land::None,
    };
    let mut out = Vec::new();
    for &name in iced::failpoint::ALL {
        // The landing's: reached only when the lane lands (`merge`, locally and through a remote;
        // or by pull request, found again with `land.pr.find` after the kill).
        let lands: &[Land] = match name {
            "land-after-integrate"
            | "land-after-commit"
            | "land-after-move"
            | "retire-after-remove" => &[Land::Merge, Land::MergeRemote],
            "land-after-fetch" => &[Land::MergeRemote],
            "push-after-push" | "pr-after-open" | "pr-after-arm" => &[Land::Pr],
            _ => &[],
        };
        if !lands.is_empty() {
            for &land in lands {
                out.push(Variant::new(name, name, setup(1).landing(land)));
            }
            continue;
        }
        if name.starts_with("validator-") {
            // Reached only with validators: the first is attempt 1's validator, the second the
            // refuter (in one `build`), the third attempt 2's validator, after the fix round.
            let validated = setup(1).validated();
            out.push(Variant::new(name, name, validated));
            out.push(Variant::new(name, &format!("{name}:2"), validated));
            out.push(Variant::new(name, &format!("{name}:3"), validated));
            out.push(Variant {
                stage: Some("refute"),
                ..Variant::new(name, name, validated)
            });
            continue;
        }
        if ELSEWHERE.iter().any(|(n, _)| *n == name) {
            continue;
        }
        if name == "archive-after-append" {
            // Reached first when a confirmed finding starts the fix round.
            out.push(Variant::new(name, name, setup(1).validated()));
            continue;
        }
        out.push(Variant::new(name, name, setup(1)));
        // Every other failpoint again, on a run that crosses the validate and fix stages.
        out.push(Variant::new(name, name, setup(1).validated()));
        match name {
            // The second outcome observed is a definition-of-done command's (the first is the
            // implementer's under the process driver).
            "observe-before-record" if driver == Driver::Process => {
                out.push(Variant::new(name, &format!("{name}:2"), setup(1)));
                out.push(Variant {
                    stage: Some("receipt"),
                    ..Variant::new(name, name, setup(1))
                });
            }
            // Two commands: killed after launching the first, so the second was recorded as
            // started but never launched; and killed after launching both.
            "dod-after-launch" => {
                out.push(Variant::new(name, name, setup(2)));
                out.push(Variant::new(name, &format!("{name}:2"), setup(2)));
            }
            _ => {}
        }
    }
    out
}

/// Failpoints no `iced build` or `implement step` of this suite reaches, and the test file that
/// kills there (with `ICED_FAILPOINT`) and checks what the replay did.
const ELSEWHERE: &[(&str, &str)] = &[
    // `iced run discard`.
    ("discard-before-release", "project.rs"),
    // A harness runner's answer, kept before it is recorded.
    ("answer-after-write", "harness.rs"),
    // A harness session's transcript, copied before it is recorded.
    ("transcript-after-copy", "harness.rs"),
    // A run that ends without delivering what it measured.
    ("end-after-metrics", "metrics.rs"),
    // `iced run abandon`.
    ("abandon-before-stop", "survivors.rs"),
    // An implementer's supervisor (it inherits `ICED_FAILPOINT` from the call that launched it).
    ("supervisor-after-gate", "supervisor_kill.rs"),
    ("supervisor-after-spawn", "supervisor_kill.rs"),
    ("supervisor-before-outcome", "supervisor_kill.rs"),
];

/// Every failpoint is reached by a test (issue 15): walked here, or killed at by the test file
/// [`ELSEWHERE`] names, which sets `ICED_FAILPOINT` to it. Prints reached / defined.
#[test]
fn every_failpoint_is_reached_by_a_test() {
    let walked: std::collections::BTreeSet<&str> = variants(Driver::Process)
        .into_iter()
        .chain(variants(Driver::Host))
        .map(|v| v.name)
        .collect();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cli");
    let mut unreached = Vec::new();
    for &name in iced::failpoint::ALL {
        if walked.contains(name) {
            continue;
        }
        let kills_there = ELSEWHERE.iter().any(|(n, file)| {
            *n == name
                && std::fs::read_to_string(dir.join(file))
                    .unwrap_or_default()
                    .contains(&format!("\"ICED_FAILPOINT\", \"{name}\""))
        });
        if !kills_there {
            unreached.push(name);
        }
    }
    let defined = iced::failpoint::ALL.len();
    eprintln!(
        "failpoints reached: {} of {defined}",
        defined - unreached.len()
    );
    assert!(unreached.is_empty(), "no test kills at {unreached:?}");
}

#[test]
fn the_failpoint_list_is_the_one_this_suite_was_written_for() {
    // A new failpoint is walked by the tests below automatically; this list only makes a
    // rename visible in review.
    assert_eq!(
        iced::failpoint::ALL,
        [
            "admit-after-gitignore",
            "admit-after-claim",
            "admit-after-state",
            "brief-after-write",
            "worktree-after-add",
            "launch-after-record",
            "launch-after-spawn",
            "observe-before-record",
            "receipt-after-record",
            "dod-after-launch",
            "validator-after-prepare",
            "validator-after-launch",
            "validator-after-check",
            "validator-after-remove",
            "archive-after-append",
            "deliver-after-prepare",
            "deliver-after-commit",
            "deliver-after-record",
            "end-after-metrics",
            "end-before-release",
            "land-after-fetch",
            "land-after-integrate",
            "land-after-commit",
            "land-after-move",
            "push-after-push",
            "pr-after-open",
            "pr-after-arm",
            "retire-after-remove",
            "discard-before-release",
            "abandon-before-stop",
            "answer-after-write",
            "transcript-after-copy",
            "supervisor-after-gate",
            "supervisor-after-spawn",
            "supervisor-before-outcome",
        ]
    );
}

/// `iced build` killed at each failpoint, then `iced build` again to delivery.
#[test]
fn build_killed_at_every_failpoint_resumes_to_one_delivery() {
    let cases: Vec<Variant> = variants(Driver::Process)
        .into_iter()
        .filter(|v| v.stage.is_none())
        .collect();
    each_in_parallel("build at each failpoint", &cases, 3, |v| {
        let case = Case::new(v.setup);
        let context = format!(
            "`iced build` with ICED_FAILPOINT={} ({} dod)",
            v.spec, v.setup.dod
        );
        let call = case.build(Some(&v.spec));
        assert!(
            call.killed(),
            "{context}: failpoint not reached: `iced build` was not killed by SIGKILL: {}",
            call.describe()
        );
        case.build_to_delivery(&context);
        case.assert_finished(&context, v.retry_allowed());
    });
}

/// `iced implement step` killed at each failpoint it can reach (all but admit's), on a run
/// created without any step (its `build` killed right after the run was recorded).
fn implement_step_killed_at_every_failpoint(driver: Driver) {
    let unreachable: &[&str] = match driver {
        // `implement step` never admits.
        Driver::Process => &[
            "admit-after-gitignore",
            "admit-after-claim",
            "admit-after-state",
        ],
        // ... and under the host driver never launches an implementer or a validator.
        Driver::Host => &[
            "admit-after-gitignore",
            "admit-after-claim",
            "admit-after-state",
            "launch-after-record",
            "launch-after-spawn",
            "validator-after-launch",
        ],
    };
    // One `implement step` observes each finished activity once, and prepares, launches or
    // checks the validators of one stage: the n-th hit of observe-before-record or of a
    // validator failpoint is not reached within one call (their stage-armed variants are).
    let cases: Vec<Variant> = variants(driver)
        .into_iter()
        .filter(|v| !unreachable.contains(&v.name))
        .filter(|v| {
            !(v.spec.starts_with("observe-before-record:") || v.spec.starts_with("validator-"))
                || !v.spec.contains(':')
        })
        .collect();
    each_in_parallel(
        &format!("implement step ({driver:?} driver) at each failpoint"),
        &cases,
        3,
        |v| {
            let case = Case::new(v.setup);
            let created = case.build(Some("admit-after-state"));
            assert!(
                created.killed(),
                "admit-after-state not reached: {}",
                created.describe()
            );
            let context = format!(
                "`iced implement step` ({driver:?} driver) with ICED_FAILPOINT={} armed at stage {:?} ({} dod)",
                v.spec, v.stage, v.setup.dod
            );
            let killed = case.drive_steps(&context, Some((&v.spec, v.stage)));
            assert!(
                killed,
                "{context}: failpoint not reached: no `implement step` call was killed"
            );
            case.assert_finished(&context, v.retry_allowed());
        },
    );
}

#[test]
fn implement_step_killed_at_every_failpoint_process_driver() {
    implement_step_killed_at_every_failpoint(Driver::Process);
}

#[test]
fn implement_step_killed_at_every_failpoint_host_driver() {
    implement_step_killed_at_every_failpoint(Driver::Host);
}

/// xorshift64*: a small deterministic generator, seeded per iteration.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// `iced build` killed after a random delay, then run again to delivery: 24 times (or
/// `ICED_CRASH_ITERATIONS`), each in a fresh repository. The delays spread over how long an
/// uninterrupted build takes here (measured first), so the kills land in every stage; a build
/// that finished before its kill is fine (it is then simply checked). `ICED_CRASH_MAX_DELAY_MS`
/// narrows the window, to hunt a failure in one stage.
#[test]
fn build_killed_at_random_moments_resumes_to_one_delivery() {
    let iterations: u64 = std::env::var("ICED_CRASH_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24);
    // A seed builds a plain unit, a validated one (validate, refute and fix stages included), or
    // one landed by pull request through the fake forge (push, open, arm, retire), in turn.
    let setups = [
        Setup::process(1),
        Setup::process(1).validated(),
        Setup::process(1).landing(Land::Pr),
    ];
    let max_delays: Vec<u64> = setups
        .iter()
        .map(|&setup| {
            let calibration = Case::new(setup);
            let started = Instant::now();
            let call = calibration.build(None);
            let full = started.elapsed();
            assert!(
                call.status.success(),
                "an uninterrupted build: {}",
                call.describe()
            );
            calibration.build_to_delivery("an uninterrupted build");
            calibration.assert_finished("an uninterrupted build", false);
            let max_delay = std::env::var("ICED_CRASH_MAX_DELAY_MS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(full.as_millis() as u64);
            eprintln!(
                "an uninterrupted build (validated: {}) takes {} ms; kills fall in 0..={max_delay} ms",
                setup.validated,
                full.as_millis()
            );
            max_delay
        })
        .collect();
    let seeds: Vec<u64> = (1..=iterations).map(|i| 0xC0FFEE + i).collect();
    // Where each kill landed (the last step the killed build reported), counted after the walk.
    let landed: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    each_in_parallel("random kills", &seeds, 3, |&seed| {
        let which = (seed % setups.len() as u64) as usize;
        let delay = Rng::new(seed).next() % (max_delays[which] + 1);
        let case = Case::new(setups[which]);
        let (mut child, stdout, stderr) = case.spawn(&["build", &case.id, "--json"], None);
        std::thread::sleep(Duration::from_millis(delay));
        let _ = child.kill();
        let status = wait_for(&mut child, CALL_LIMIT, "the killed build");
        let first = collect(status, &stdout, &stderr);
        let at = first
            .stdout
            .lines()
            .last()
            .and_then(|l| serde_json::from_str::<Value>(l).ok())
            .map_or("before any step".to_owned(), |v| {
                format!("{} {}", v["stage"], v["action"]).replace('"', "")
            });
        eprintln!(
            "seed {seed:#x} (validated: {}, land: {:?}): {} after {delay} ms, last report: {at}",
            setups[which].validated,
            setups[which].land,
            if first.killed() {
                "killed"
            } else {
                "had already exited"
            }
        );
        if first.killed() {
            landed.lock().unwrap().push(at.clone());
        }
        let context = format!(
            "seed {seed:#x} (validated: {}, land: {:?}), killed after {delay} ms, last report {at}",
            setups[which].validated, setups[which].land
        );
        case.build_to_delivery(&context);
        case.assert_finished(&context, true);
    });
    // A walk that killed nothing proves nothing. How many builds a kill reaches depends on how
    // the calibration's load compares with the walk's (9 to 23 of 24 seen), so only a walk
    // with no kill at all fails; the count and the places are printed.
    let landed = landed.into_inner().unwrap();
    let places: std::collections::BTreeSet<&String> = landed.iter().collect();
    eprintln!(
        "random kills: {} of {iterations} builds killed, at {} places: {places:?}",
        landed.len(),
        places.len()
    );
    assert!(!landed.is_empty(), "none of {iterations} builds was killed");
}

/// `iced build` killed while a git it started runs: that git outlives it and finishes later,
/// while the next `iced build` does the same step. A `git` first on PATH logs each start and end
/// of a command holding `verb` and waits 0.4 s before running it; the build is killed once the
/// lane is at `stage` and such a git has started and not ended, so the kill lands inside that git
/// (checked, never timed), and the check waits until every such git has ended.
/// Then the run must still deliver once, with a clean worktree.
fn killed_while_its_git_runs(setup: Setup, stage: &str, verb: &str) {
    let mut case = Case::new(setup);
    let real_git = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join("git"))
        .find(|p| p.is_file())
        .expect("git on PATH");
    let bin = case.out.join("slow-git");
    std::fs::create_dir_all(&bin).unwrap();
    let (started, ended) = (case.out.join("git-started"), case.out.join("git-ended"));
    let wrapper = bin.join("git");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\ncase \" $* \" in *' {verb} '*)\n  echo $$ >> '{started}'\n  sleep 0.4\n  '{git}' \"$@\"\n  rc=$?\n  echo $$ >> '{ended}'\n  exit $rc;;\nesac\nexec '{git}' \"$@\"\n",
            started = started.display(),
            ended = ended.display(),
            git = real_git.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut path = std::ffi::OsString::from(&bin);
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());
    case.path = Some(path);
    let count = |file: &Path| {
        std::fs::read_to_string(file)
            .unwrap_or_default()
            .lines()
            .count()
    };
    let running = || count(&started) > count(&ended);

    let context = format!("killed during the {stage} step's git {verb}");
    let (mut child, stdout, stderr) = case.spawn(&["build", &case.id, "--json"], None);
    let give_up = Instant::now() + Duration::from_secs(30);
    while !(case.stage().as_deref() == Some(stage) && running()) {
        assert!(
            Instant::now() < give_up,
            "{context}: the build never ran it"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "{context}: the build ended before it"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().unwrap();
    assert!(running(), "{context}: the git ended before the kill");
    let first = collect(
        wait_for(&mut child, CALL_LIMIT, "the killed build"),
        &stdout,
        &stderr,
    );
    assert!(first.killed(), "{context}: {}", first.describe());
    case.build_to_delivery(&context);
    // The orphaned git (and any other) has ended before anything is counted.
    let give_up = Instant::now() + Duration::from_secs(30);
    while running() {
        assert!(Instant::now() < give_up, "{context}: a git never ended");
        std::thread::sleep(Duration::from_millis(10));
    }
    case.assert_delivered(&context, false);
}

#[test]
fn build_killed_during_the_worktree_add_delivers_once() {
    killed_while_its_git_runs(Setup::process(1), "worktree", "worktree add");
}

/// The delivery's commit is made with `commit-tree` and the branch moved with `update-ref`: a
/// kill inside each.
#[test]
fn build_killed_during_the_delivery_commit_delivers_once() {
    killed_while_its_git_runs(Setup::process(1), "deliver", "commit-tree");
}

#[test]
fn build_killed_during_the_delivery_ref_update_delivers_once() {
    killed_while_its_git_runs(Setup::process(1), "deliver", "update-ref");
}

/// The `git worktree add` of a validator's sandbox outlives the call that made it, and takes the
/// sandbox's path under the next call's feet.
#[test]
fn build_killed_during_a_sandbox_add_delivers_once() {
    killed_while_its_git_runs(Setup::process(1).validated(), "validate", "worktree add");
}

/// A process-driven run stepped by sixteen `implement step` callers at once, round after round.
#[test]
fn sixteen_concurrent_implement_steps_deliver_once() {
    sixteen_concurrent_implement_steps(Setup {
        driver: Driver::Process,
        dod: 2,
        agent: SLOW_AGENT,
        validated: false,
        land: Land::None,
    });
}

/// ... and one that lands (merge, pushed to a remote): landed and retired once.
#[test]
fn sixteen_concurrent_implement_steps_land_once() {
    sixteen_concurrent_implement_steps(Setup {
        driver: Driver::Process,
        dod: 2,
        agent: SLOW_AGENT,
        validated: false,
        land: Land::MergeRemote,
    });
}

/// ... and a validated one, through its validate, refute and fix stages.
#[test]
fn sixteen_concurrent_implement_steps_deliver_a_validated_run_once() {
    sixteen_concurrent_implement_steps(Setup::process(2).validated());
}

fn sixteen_concurrent_implement_steps(setup: Setup) {
    const CALLERS: usize = 16;
    const MAX_ROUNDS: usize = 40;
    let case = Case::new(setup);
    let created = case.iced(&["build", &case.id, "--no-wait", "--json"], None);
    assert!(
        created.status.success(),
        "build --no-wait: {}",
        created.describe()
    );
    assert_eq!(
        created.last_json()["status"],
        "running",
        "{}",
        created.describe()
    );
    let mut rounds = 0;
    let mut calls = 0;
    let mut failures = Vec::new();
    let mut slowest = Duration::ZERO;
    let started = Instant::now();
    while !case.finished() {
        assert!(
            rounds < MAX_ROUNDS,
            "not delivered after {MAX_ROUNDS} rounds of {CALLERS} callers; state:\n{}",
            case.env.read(".iced/run/state.json")
        );
        rounds += 1;
        let round_started = Instant::now();
        let children: Vec<_> = (0..CALLERS)
            .map(|_| case.spawn(&["implement", "step", "--json"], None))
            .collect();
        for (mut child, stdout, stderr) in children {
            let status = wait_for(&mut child, CALL_LIMIT, "implement step");
            slowest = slowest.max(round_started.elapsed());
            let call = collect(status, &stdout, &stderr);
            calls += 1;
            if !call.status.success() {
                // `state-locked` (exit 3) would mean a caller waited the whole default 10 s for
                // the lock: a failure too.
                failures.push(call.describe());
            } else if call.stdout.len() >= 1024 {
                failures.push(format!("{} bytes: {}", call.stdout.len(), call.stdout));
            }
        }
    }
    eprintln!(
        "{CALLERS} concurrent callers ({setup:?}): delivered after {rounds} rounds ({calls} calls) in {:.1} s; the slowest call ended {} ms after its round started",
        started.elapsed().as_secs_f64(),
        slowest.as_millis()
    );
    assert!(
        failures.is_empty(),
        "{} of {calls} `implement step` calls failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    case.assert_finished(&format!("16 concurrent callers ({setup:?})"), false);
}
