//! Harness runners end to end (SPEC 20.8): the real Claude Code CLI as implementer and validator,
//! pointed at the mock model API on 127.0.0.1 (`mock_api.rs`). The CLI is found at `ICED_CLAUDE`,
//! else as `claude` on PATH; without it these tests say why and pass, unless
//! `ICED_REQUIRE_CLAUDE=1` (set by `.ci/run`, which installs it), where a missing CLI fails them.

use crate::env::{merge_json, TestEnv};
use crate::loop_e2e::{last_line, str_of};
use crate::mock_api::{MockApi, Reply, Rule};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// A dummy key: the mock only checks that one was sent. It must never be written anywhere.
pub(crate) const API_KEY: &str = "sk-ant-test-PLANTED-0123456789";
/// A credential in a variable whose name says nothing (`PROVIDER_CRED`), handed to the harness by
/// a runner `env` entry that does (`MY_PROVIDER_AUTH_TOKEN`).
pub(crate) const CRED: &str = "cred-PLANTED-987654321";

/// The validator's answer when it passes the lane.
pub(crate) const PASS: &str = r#"{"verdict": "pass", "expectations": [{"id": "E1", "result": "pass", "evidence": "src/session.txt says so"}, {"id": "E2", "result": "pass", "evidence": "src/session.txt says so"}], "failures": [{"id": "F1", "triggered": false, "evidence": "nobody is signed out"}], "constraints": [{"id": "C1", "violated": false, "evidence": "passwords untouched"}]}"#;

pub(crate) const REPORT: &str = r#"{"summary": "sessions end when idle", "evidence": [{"expectation": "E1", "kind": "test", "ref": "src/session.txt"}, {"expectation": "E2", "kind": "test", "ref": "src/session.txt"}]}"#;

/// The Claude Code CLI, or why it is not here.
pub(crate) fn claude() -> Option<PathBuf> {
    let found = std::env::var_os("ICED_CLAUDE")
        .map(PathBuf::from)
        .filter(|p| p.is_file())
        .or_else(|| {
            std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
                .map(|d| d.join("claude"))
                .find(|p| p.is_file())
        });
    if found.is_none() {
        crate::skip::skipped(
            &test_name(),
            "ICED_REQUIRE_CLAUDE",
            "no Claude Code CLI at ICED_CLAUDE or on PATH (install @anthropic-ai/claude-code)",
        );
    }
    found
}

/// The running test's name (libtest names its thread after it).
pub(crate) fn test_name() -> String {
    std::thread::current().name().unwrap_or("a test").to_owned()
}

/// The implementer: one Bash call that writes and commits a file, then its report as the final
/// message's one json block.
pub(crate) fn implementer() -> Rule {
    Rule::new(
        "# Brief: implement",
        vec![
            Reply::bash(
                "mkdir -p src && printf 'sessions end when idle\\n' > src/session.txt && git add src/session.txt && git commit -q -m 'sessions end when idle'",
            ),
            Reply::Text(format!("Done.\n\n```json\n{REPORT}\n```\n")),
        ],
    )
}

pub(crate) fn validator(answer: &str) -> Rule {
    Rule::new(
        "# Validate:",
        vec![Reply::Text(format!(
            "I read the change.\n\n```json\n{answer}\n```\n"
        ))],
    )
}

/// A buildable unit whose implementer and validator are the real `claude`, on the mock API.
pub(crate) struct Harness {
    pub(crate) env: TestEnv,
    pub(crate) id: String,
    pub(crate) api: MockApi,
}

impl Harness {
    /// [`assert_session_in_agent_home`] for this harness's lane, the run `last` names, and the
    /// test's home as the person's.
    fn assert_session_in_its_home(&self, last: &Value, show: &Value, key: &str) -> PathBuf {
        assert_session_in_agent_home(
            &self.env,
            (str_of(last, "run"), &self.id),
            show,
            key,
            &[&self.env.outside("home")],
        )
    }

    pub(crate) fn new(program: &std::path::Path, rules: Vec<Rule>, patch: Value) -> Harness {
        let api = MockApi::start(rules);
        let (env, id) = TestEnv::buildable_with(|_| {
            let mut config = json!({
                "runners": {"cc": {
                    "kind": "claude",
                    "program": program.display().to_string(),
                    "timeoutSec": 120,
                    "maxTurns": 10,
                    "env": {
                        "ANTHROPIC_BASE_URL": "${ICED_TEST_API}",
                        "DISABLE_TELEMETRY": "1",
                        "DISABLE_AUTOUPDATER": "1",
                        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                        "CLAUDE_CODE_MAX_RETRIES": "0"
                    }
                }},
                "roles": {
                    "implementer": {"runner": "cc", "model": "claude-sonnet-4-5"},
                    "validator": {"runner": "cc", "model": "claude-opus-4-1"}
                },
                "verify": {
                    "independent": true,
                    "lenses": ["full"],
                    "commands": [{"argv": ["test", "-f", "src/session.txt"], "timeoutSec": 30}]
                },
                "run": {"maxCrashRetries": 1}
            });
            merge_json(&mut config, &patch);
            config
        });
        Harness { env, id, api }
    }

    /// `iced args --json` with the API's address and the dummy key in its environment, and a
    /// HOME of its own outside the repository (the CLI writes its state there).
    pub(crate) fn iced(&self, args: &[&str]) -> crate::env::Run {
        let home = self.env.outside("home");
        std::fs::create_dir_all(&home).unwrap();
        crate::env::run(
            self.env
                .command()
                .env("HOME", &home)
                .env("ICED_TEST_API", &self.api.url)
                .env("ANTHROPIC_API_KEY", API_KEY)
                .env("OPENAI_API_KEY", API_KEY)
                .env("PROVIDER_CRED", CRED)
                .env("CODEX_HOME", self.codex_home())
                .args(args)
                .arg("--json"),
        )
    }

    /// Codex's own state, outside the repository (and not under /tmp's root, which it dislikes).
    pub(crate) fn codex_home(&self) -> PathBuf {
        let dir = self.env.outside("codex-home");
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    pub(crate) fn build(&self) -> (crate::env::Run, Value) {
        let out = self.iced(&["build", &self.id]);
        let last = last_line(&out);
        (out, last)
    }

    pub(crate) fn show(&self, run: &str) -> Value {
        let out = self.iced(&["run", "show", run]);
        assert_eq!(out.code, 0, "{out:#?}");
        out.json()
    }

    /// Every file iced wrote under `.iced/run` and the CLI's HOME, as text.
    pub(crate) fn written(&self) -> Vec<(PathBuf, String)> {
        fn walk(dir: &std::path::Path, out: &mut Vec<(PathBuf, String)>) {
            for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let p = e.path();
                if p.is_dir() {
                    walk(&p, out);
                } else if let Ok(b) = std::fs::read(&p) {
                    out.push((p, String::from_utf8_lossy(&b).into_owned()));
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.env.path(".iced/run"), &mut out);
        out
    }
}

/// The step record `key` of the first lane of a `run show --json`, current attempt last.
pub(crate) fn record<'a>(show: &'a Value, key: &str) -> &'a Value {
    let lanes = show["lanes"]
        .as_array()
        .or_else(|| show["run"]["lanes"].as_array())
        .expect("lanes");
    lanes[0]["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .rev()
        .find(|r| r["step"] == key)
        .unwrap_or_else(|| panic!("no {key} record in {show:#}"))
}

/// SPEC 20.8, 24.12: the session of the agent of step `key` (its current record in `show`) is a
/// file of its own harness home, `<activity>/home/`, which the loop gave it, and in none of the
/// person's folders `theirs` (their HOME, the home their variable names), which a confined agent
/// cannot write. Returns the session file.
pub(crate) fn assert_session_in_agent_home(
    env: &TestEnv,
    (run, lane): (&str, &str),
    show: &Value,
    key: &str,
    theirs: &[&Path],
) -> PathBuf {
    let rec = record(show, key);
    let session = str_of(&rec["outcome"]["harness"], "session_id");
    let attempt = rec["attempt"].as_u64().expect("an attempt");
    let home = env.path(&format!(
        ".iced/run/{run}/{lane}/activities/{key}-{attempt}/home"
    ));
    // Claude's and pi's file is named after the session, Codex's after its thread: each ends so.
    let named = format!("{session}.jsonl");
    let sessions = |dir: &Path| -> Vec<PathBuf> {
        walk_files(dir)
            .into_iter()
            .filter(|p| p.to_string_lossy().ends_with(&named))
            .collect()
    };
    let mine = sessions(&home);
    assert_eq!(
        mine.len(),
        1,
        "{key}'s session {session} in its own home {}: {:#?}",
        home.display(),
        walk_files(&home)
    );
    assert!(
        std::fs::symlink_metadata(&mine[0]).unwrap().is_file(),
        "{}",
        mine[0].display()
    );
    for dir in theirs {
        assert_eq!(
            sessions(dir),
            Vec::<PathBuf>::new(),
            "{key}'s session in the person's {}",
            dir.display()
        );
    }
    mine[0].clone()
}

/// SPEC 20.8: the real Claude Code CLI implements (a tool call that commits, then its report in
/// its final message) and validates (its answer in its final message, read-only tools); the run
/// is delivered, and the record names each agent's session, model, turns and cost. The API key
/// reached the API and was written nowhere.
#[test]
pub(crate) fn claude_implements_and_validates_a_unit_through_the_mock_api() {
    let Some(program) = claude() else { return };
    let h = Harness::new(&program, vec![implementer(), validator(PASS)], json!({}));
    let (out, last) = h.build();
    assert_eq!(last["status"], "delivered", "{out:#?}");
    let run = str_of(&last, "run").to_owned();
    let show = h.show(&run);

    let implement = record(&show, "implement");
    let harness = &implement["outcome"]["harness"];
    let nonce = str_of(implement, "nonce");
    assert_eq!(
        harness["session_id"],
        iced::runner::session_id(nonce),
        "the session is the one the loop chose: {implement:#}"
    );
    assert_eq!(harness["model"], "claude-sonnet-4-5", "{harness:#}");
    assert_eq!(harness["turns"], 2, "{harness:#}");
    assert!(
        harness["cost_usd"].as_f64().is_some_and(|c| c > 0.0),
        "{harness:#}"
    );
    assert_eq!(harness["is_error"], false);

    let validate = record(&show, "validate-full");
    let vh = &validate["outcome"]["harness"];
    assert_eq!(vh["turns"], 1, "{vh:#}");
    assert_eq!(
        crate::env::kept(&validate["outcome"]["answer"])["verdict"],
        "pass",
        "{validate:#}"
    );

    // The run's agents and what they cost, for a machine and for a person.
    let agents = show["agents"].as_array().expect("agents");
    assert_eq!(agents.len(), 2, "{agents:#?}");
    assert_eq!(agents[0]["runner"], "cc");
    assert_eq!(agents[0]["model"], "claude-sonnet-4-5");
    assert_eq!(agents[0]["turns"], 2);
    assert_eq!(show["cost"]["agents"], 2);
    assert_eq!(show["cost"]["unknown"], 0);
    let total = show["cost"]["usd"].as_f64().expect("a total");
    let sum: f64 = agents.iter().filter_map(|a| a["cost_usd"].as_f64()).sum();
    assert!(
        total > 0.0 && (total - sum).abs() < 1e-6,
        "{total} vs {sum}"
    );

    let text = crate::env::run(
        h.env
            .command()
            .env("HOME", h.env.outside("home"))
            .args(["run", "show", &run]),
    );
    assert!(
        text.stdout
            .contains(&format!("cost: ${total} over 2 agents")),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout
            .contains("runner cc, model claude-sonnet-4-5, 2 turns"),
        "{}",
        text.stdout
    );

    // The work is on the lane branch, committed by the agent's own tool call.
    let branch = format!("iced/{0}/{0}", h.id);
    let file = h
        .env
        .git_out(&["show", &format!("{branch}:src/session.txt")]);
    assert_eq!(file, "sessions end when idle\n");

    // The mock saw the implementer (two turns) and the validator, with the key, on each model.
    let seen = h.api.seen();
    assert!(seen.iter().all(|s| s.authorization), "{seen:#?}");
    let turns = |rule: &str, model: &str| {
        seen.iter()
            .filter(|s| s.rule.as_deref() == Some(rule) && s.model == model)
            .map(|s| s.turn)
            .collect::<Vec<_>>()
    };
    assert_eq!(turns("# Brief: implement", "claude-sonnet-4-5"), vec![0, 1]);
    // The model recorded is the one the harness reports it used, which is the one it asked the
    // API for (Claude Code may map a model name it was given to another).
    let validator_model = seen
        .iter()
        .find(|s| s.rule.as_deref() == Some("# Validate:"))
        .map(|s| s.model.clone())
        .expect("the validator asked the API");
    assert_eq!(vh["model"], validator_model.as_str(), "{validate:#}");
    assert_ne!(
        validator_model, "claude-sonnet-4-5",
        "the validator's own model"
    );
    assert_eq!(turns("# Validate:", &validator_model), vec![0]);

    for (path, text) in h.written() {
        assert!(
            !text.contains(API_KEY),
            "the API key was written to {}",
            path.display()
        );
    }

    // Each agent kept its session in the home the loop gave it, not in the person's HOME.
    let home = h.env.outside("home");
    for key in ["implement", "validate-full"] {
        assert_session_in_agent_home(&h.env, (&run, &h.id), &show, key, &[&home]);
    }
}

/// SPEC 20.8: an API error makes the harness say `is_error` (while exiting 0 and saying
/// `success`): the attempt is a crash, retried within `run.maxCrashRetries`, and then the lane
/// blocks; its cost is `unknown`, not 0.
#[test]
pub(crate) fn an_api_error_is_a_crash_and_blocks_the_lane_once_retries_are_spent() {
    let Some(program) = claude() else { return };
    let failing = Rule::new("# Brief: implement", vec![Reply::Status(500)]);
    let h = Harness::new(&program, vec![failing], json!({}));
    let (out, last) = h.build();
    assert_eq!(last["status"], "blocked", "{out:#?}");
    let run = str_of(&last, "run").to_owned();
    let show = h.show(&run);
    let lane = &show["lanes"][0];
    assert_eq!(lane["attempt"], 2, "one retry, then blocked: {lane:#}");
    assert!(str_of(lane, "reason").contains("crash budget"), "{lane:#}");
    let implement = record(&show, "implement");
    assert_eq!(implement["status"], "failed", "{implement:#}");
    let harness = &implement["outcome"]["harness"];
    assert_eq!(harness["is_error"], true, "{harness:#}");
    assert!(
        str_of(&implement["outcome"], "harness_failed").contains("500"),
        "{implement:#}"
    );
    assert_eq!(harness["cost_usd"], "unknown", "{harness:#}");
    // Two agents ran and failed; neither reported a cost: the total is unknown, not 0.
    assert_eq!(show["cost"]["agents"], 2, "{:#}", show["agents"]);
    assert_eq!(show["cost"]["unknown"], 2);
    assert_session_in_agent_home(
        &h.env,
        (&run, &h.id),
        &show,
        "implement",
        &[&h.env.outside("home")],
    );
}

/// SPEC 20.8: a tool the implementer was not allowed is denied; the CLI still exits 0 and says
/// `success`, but a lane whose tools were denied did not do its work: a crash, never a receipt.
#[test]
pub(crate) fn a_denied_tool_fails_the_implementer() {
    let Some(program) = claude() else { return };
    let denied = Rule::new(
        "# Brief: implement",
        vec![
            Reply::Tool {
                name: "WebFetch".into(),
                input: json!({"url": "https://example.invalid/", "prompt": "read it"}),
            },
            Reply::Text(format!("Done.\n\n```json\n{REPORT}\n```\n")),
        ],
    );
    let h = Harness::new(
        &program,
        vec![denied],
        json!({"run": {"maxCrashRetries": 0}}),
    );
    let (out, last) = h.build();
    assert_eq!(last["status"], "blocked", "{out:#?}");
    let show = h.show(str_of(&last, "run"));
    h.assert_session_in_its_home(&last, &show, "implement");
    let implement = record(&show, "implement");
    assert_eq!(implement["status"], "failed", "{implement:#}");
    assert!(
        implement["outcome"]["harness"]["permission_denials"]
            .as_u64()
            .is_some_and(|n| n >= 1),
        "{implement:#}"
    );
    assert!(
        record(&show, "implement")["outcome"]["harness_failed"]
            .as_str()
            .is_some_and(|w| w.contains("denied")),
        "{implement:#}"
    );
}

/// SPEC 24.11: the loop gives a claude implementer the guard's hook through `--settings`. The
/// scripted model first edits an Expectation of its own unit in the lane's worktree: the hook
/// (told by the agent's environment that it judges this lane's implementer) denies it with the
/// implementer's next step, and the file stays as signed off; the agent then does the work and
/// the run is delivered: a call the guard refused is not a failed harness run.
#[test]
pub(crate) fn the_guard_hook_keeps_a_claude_implementer_off_its_contract() {
    let Some(program) = claude() else { return };
    let h = Harness::new(&program, vec![validator(PASS)], json!({}));
    let worktree = h.env.outside(&format!("repo.iced-worktrees/{}", h.id));
    let unit = worktree.join(format!("intent/{}/iced.md", h.id));
    h.api.push_rule(Rule::new(
        "# Brief: implement",
        vec![
            // Claude Code edits only a file it has read.
            Reply::Tool {
                name: "Read".into(),
                input: json!({"file_path": unit.display().to_string()}),
            },
            Reply::Tool {
                name: "Edit".into(),
                input: json!({"file_path": unit.display().to_string(), "old_string": "- [E1] Activity extends the session.", "new_string": "- [E1] Anything goes."}),
            },
            Reply::bash(
                "mkdir -p src && printf 'sessions end when idle\\n' > src/session.txt && git add src/session.txt && git commit -q -m 'sessions end when idle'",
            ),
            Reply::Text(format!("Done.\n\n```json\n{REPORT}\n```\n")),
        ],
    ));
    let (out, last) = h.build();
    assert_eq!(last["status"], "delivered", "{out:#?}");
    let show = h.show(str_of(&last, "run"));
    for key in ["implement", "validate-full"] {
        h.assert_session_in_its_home(&last, &show, key);
    }
    let implement = record(&show, "implement");
    assert_eq!(implement["status"], "done", "{implement:#}");
    let harness = &implement["outcome"]["harness"];
    assert_eq!(harness["permission_denials"], 1, "{harness:#}");
    assert_eq!(harness["guard_denials"], 1, "{harness:#}");

    let told = h
        .api
        .seen()
        .into_iter()
        .rev()
        .find(|s| s.rule.as_deref() == Some("# Brief: implement"))
        .expect("the implementer's conversation");
    let denial = &told.tool_results[1];
    assert!(
        denial.contains("iced guard (contract-frozen): ") && denial.contains("handback"),
        "the hook judged the lane's implementer: {told:#?}"
    );
    let branch = format!("iced/{0}/{0}", h.id);
    let signed = h
        .env
        .git_out(&["show", &format!("{branch}:intent/{}/iced.md", h.id)]);
    assert!(
        signed.contains("- [E1] Activity extends the session."),
        "{signed}"
    );

    // Every claude start got its own settings file, 0600, running this iced by its absolute path.
    use std::os::unix::fs::PermissionsExt;
    let settings: Vec<_> = h
        .written()
        .into_iter()
        .filter(|(p, _)| p.ends_with("claude-settings.json"))
        .collect();
    assert_eq!(
        settings.len(),
        2,
        "implementer and validator: {settings:#?}"
    );
    for (path, text) in settings {
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", path.display());
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            v["hooks"]["PreToolUse"][0]["hooks"][0]["command"],
            format!("{} hook claude", env!("CARGO_BIN_EXE_iced")),
            "{text}"
        );
    }
}

/// Records what the real Claude Code CLI prints in each shape of run the adapter must read
/// (SPEC 20.8), into `fixtures/harness/claude/`, for the tests of `src/runner/` to parse. Run by hand
/// when the pinned CLI changes: `ICED_CLAUDE=... cargo test --test cli record_claude_outputs --
/// --ignored`.
#[test]
#[ignore = "writes fixtures; run by hand with the CLI installed"]
pub(crate) fn record_claude_outputs() {
    let program = claude().expect("the Claude Code CLI");
    let out_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/harness/claude");
    std::fs::create_dir_all(&out_dir).unwrap();
    let work = tempfile::tempdir().unwrap();
    let repo = work.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    crate::env::git_at(&repo, &["init", "-q", "-b", "main"]);
    crate::env::git_at(&repo, &["config", "user.name", "Test Person"]);
    crate::env::git_at(&repo, &["config", "user.email", "person@example.test"]);
    crate::env::git_at(&repo, &["commit", "-q", "--allow-empty", "-m", "init"]);
    let home = work.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let prompt = work.path().join("prompt.md");
    std::fs::write(&prompt, "# Brief: implement 001-x (attempt 1)\n\nDo it.\n").unwrap();

    // (name, replies, extra args, output format, kill after ms)
    type Shape<'a> = (&'a str, Vec<Reply>, Vec<&'a str>, &'a str, Option<u64>);
    let work_turns = vec![
        Reply::bash("printf 'x\\n' > x.txt && git add x.txt && git commit -q -m x"),
        Reply::Text(format!("Done.\n\n```json\n{REPORT}\n```\n")),
    ];
    let shapes: Vec<Shape> = vec![
        ("success", work_turns.clone(), vec![], "json", None),
        (
            "api-error-500",
            vec![Reply::Status(500)],
            vec![],
            "json",
            None,
        ),
        (
            "rate-limited-429",
            vec![Reply::Status(429)],
            vec![],
            "json",
            None,
        ),
        (
            "overloaded-529",
            vec![Reply::Status(529)],
            vec![],
            "json",
            None,
        ),
        (
            "max-turns",
            work_turns.clone(),
            vec!["--max-turns", "1"],
            "json",
            None,
        ),
        (
            "budget-exceeded",
            work_turns.clone(),
            vec!["--max-budget-usd", "0.0000001"],
            "json",
            None,
        ),
        (
            "tool-denied",
            vec![
                Reply::Tool {
                    name: "WebFetch".into(),
                    input: json!({"url": "https://example.invalid/", "prompt": "read it"}),
                },
                Reply::Text("Done.".into()),
            ],
            vec![],
            "json",
            None,
        ),
        (
            "connection-dropped",
            vec![Reply::Drop],
            vec![],
            "json",
            None,
        ),
        (
            "killed-mid-stream",
            vec![Reply::Hang],
            vec!["--verbose"],
            "stream-json",
            Some(3000),
        ),
    ];
    for (n, (name, replies, extra, format, kill_after)) in shapes.into_iter().enumerate() {
        let api = MockApi::start(vec![Rule::new("# Brief: implement", replies)]);
        let mut argv = iced::runner::argv(
            iced::runner::Kind::Claude,
            &iced::runner::Invocation {
                program: &program.display().to_string(),
                read_only: false,
                model: Some("claude-sonnet-4-5"),
                effort: None,
                // A session id is used once.
                session_id: &iced::runner::session_id(&format!(
                    "0badc0de0000400080000000000000{n:02x}"
                )),
                max_turns: None,
                transcripts: true,
                extra_args: &[],
                git_dirs: &[],
                settings: None,
                mcp: None,
                confined: false,
            },
        );
        if let Some(i) = argv.iter().position(|a| a == "json") {
            argv[i] = format.to_owned();
        }
        argv.extend(extra.iter().map(|s| (*s).to_owned()));
        let mut child = std::process::Command::new(&argv[0])
            .args(&argv[1..])
            .current_dir(&repo)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &home)
            .env("ANTHROPIC_BASE_URL", &api.url)
            .env("ANTHROPIC_API_KEY", API_KEY)
            .env("DISABLE_TELEMETRY", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("CLAUDE_CODE_MAX_RETRIES", "0")
            .stdin(std::fs::File::open(&prompt).unwrap())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("claude starts");
        if let Some(ms) = kill_after {
            std::thread::sleep(std::time::Duration::from_millis(ms));
            let _ = child.kill();
        }
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).replace(API_KEY, "<redacted>");
        let ext = if format == "json" { "json" } else { "jsonl" };
        std::fs::write(out_dir.join(format!("{name}.{ext}")), &text).unwrap();
        eprintln!("{name}: exit {:?}, {} bytes", out.status.code(), text.len());
    }
}

/// A Claude Code implementer and validator; `iced build` killed at `failpoint`, then built again
/// to delivery with the implementer having run once. The harness and the last line.
fn killed_at_then_delivered(program: &Path, failpoint: (&str, &str)) -> (Harness, Value) {
    let h = Harness::new(program, vec![implementer(), validator(PASS)], json!({}));
    let home = h.env.outside("home");
    std::fs::create_dir_all(&home).unwrap();
    let killed = h
        .env
        .command()
        .env("HOME", &home)
        .env("ICED_TEST_API", &h.api.url)
        .env("ANTHROPIC_API_KEY", API_KEY)
        .env(failpoint.0, failpoint.1)
        .args(["build", &h.id, "--json"])
        .output()
        .expect("iced runs");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(killed.status.signal(), Some(9), "{killed:?}");
    let (out, last) = h.build();
    assert_eq!(last["status"], "delivered", "{out:#?}");
    let implementer_calls = h
        .api
        .seen()
        .iter()
        .filter(|s| s.rule.as_deref() == Some("# Brief: implement") && s.turn == 0)
        .count();
    assert_eq!(implementer_calls, 1, "the implementer ran once");
    let show = h.show(str_of(&last, "run"));
    assert_session_in_agent_home(
        &h.env,
        (str_of(&last, "run"), &h.id),
        &show,
        "implement",
        &[&home],
    );
    (h, last)
}

/// Crash safety of taking an answer from the final message (SPEC 20.8): `iced build` killed
/// right after writing the report the implementer left in its final message, then built again,
/// reads that report as the agent's and delivers, the implementer having run once.
#[test]
pub(crate) fn a_build_killed_after_writing_the_answer_reads_it_once_resumed() {
    let Some(program) = claude() else { return };
    let (h, last) = killed_at_then_delivered(&program, ("ICED_FAILPOINT", "answer-after-write"));
    let show = h.show(str_of(&last, "run"));
    assert_eq!(record(&show, "receipt")["status"], "done", "{show:#}");
}

/// Crash safety of the transcript copy (issue 15, item 1): `iced build` killed right after copying
/// the implementer's transcript, then built again: the implementer ran once, and its record
/// names the one copy, whole.
#[test]
pub(crate) fn a_build_killed_after_copying_the_transcript_copies_it_once_resumed() {
    let Some(program) = claude() else { return };
    let (h, last) = killed_at_then_delivered(&program, ("ICED_FAILPOINT", "transcript-after-copy"));
    let show = h.show(str_of(&last, "run"));
    let implement = record(&show, "implement");
    let copy = PathBuf::from(str_of(&implement["outcome"]["harness"], "transcript"));
    let text = std::fs::read_to_string(&copy).unwrap();
    let session = str_of(&implement["outcome"]["harness"], "session_id");
    assert!(text.contains(session), "the session's own transcript");
    let dir = copy.parent().unwrap();
    let copies: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("-implementer-"))
        .collect();
    assert_eq!(
        copies,
        [format!("{}-implementer-1.jsonl", h.id)],
        "one implementer transcript in {}",
        dir.display()
    );
}

/// SPEC 20.10: a 429 from the API paces the run: the implementer's step is neither a crash nor an
/// attempt; nothing is launched before `next_eligible_at`; then the implementer runs again and
/// the run is delivered.
#[test]
pub(crate) fn a_rate_limited_implementer_paces_the_run_then_it_resumes_and_delivers() {
    let Some(program) = claude() else { return };
    let limited = Rule::new("# Brief: implement", vec![Reply::Status(429)]).times(1);
    let h = Harness::new(
        &program,
        vec![limited, implementer(), validator(PASS)],
        json!({"pace": {"backoffSec": 1, "backoffMaxSec": 2}}),
    );
    let (out, last) = h.build();
    assert_eq!(last["status"], "delivered", "{out:#?}");
    let show = h.show(str_of(&last, "run"));
    h.assert_session_in_its_home(&last, &show, "implement");
    let lane = &show["lanes"][0];
    assert_eq!(
        lane["attempt"], 1,
        "a rate limit is not an attempt: {lane:#}"
    );
    assert_eq!(lane["crashes"], 0, "nor a crash: {lane:#}");

    let events = h.env.read(".iced/run/events.jsonl");
    let paced: Vec<Value> = events
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["event"] == "paced")
        .collect();
    assert_eq!(paced.len(), 1, "{events}");
    assert_eq!(paced[0]["why"], "rate_limited");
    assert_eq!(paced[0]["in_a_row"], 1);
    let backoff = paced[0]["backoff_ms"].as_u64().expect("backoff_ms");
    assert!(
        (800..=1200).contains(&backoff),
        "1 s with 20% jitter: {backoff}"
    );

    // The implementer asked again only once the backoff had passed.
    let firsts: Vec<std::time::Instant> = h
        .api
        .seen()
        .iter()
        .filter(|s| s.turn == 0 && s.rule.as_deref() == Some("# Brief: implement"))
        .map(|s| s.at)
        .collect();
    assert_eq!(firsts.len(), 2, "{:?}", h.api.seen());
    let waited = firsts[1] - firsts[0];
    assert!(
        waited.as_millis() as u64 >= backoff,
        "asked again after {waited:?}, before the {backoff} ms backoff"
    );
}

/// SPEC 20.8: the session's transcript is copied into the run, named in the step's record, with
/// the API key the agent happened to print (and any key by its shape) redacted.
#[test]
pub(crate) fn a_transcript_is_captured_with_a_planted_key_redacted() {
    let Some(program) = claude() else { return };
    const SHAPED: &str = "sk-proj-abcdefghijklmnopqrstuvwx";
    let planting = Rule::new(
        "# Brief: implement",
        vec![
            Reply::bash(&format!(
                "echo {API_KEY} {SHAPED} {CRED} >/dev/null && mkdir -p src && printf 'sessions end when idle\\n' > src/session.txt && git add src/session.txt && git commit -q -m 'sessions end when idle'"
            )),
            Reply::Text(format!("Done.\n\n```json\n{REPORT}\n```\n")),
        ],
    );
    let h = Harness::new(
        &program,
        vec![planting, validator(PASS)],
        json!({"runners": {"cc": {"env": {"MY_PROVIDER_AUTH_TOKEN": "${PROVIDER_CRED}"}}}}),
    );
    let (out, last) = h.build();
    assert_eq!(last["status"], "delivered", "{out:#?}");
    let show = h.show(str_of(&last, "run"));
    let implement = record(&show, "implement");
    let copy = PathBuf::from(str_of(&implement["outcome"]["harness"], "transcript"));
    assert!(
        copy.ends_with(format!("transcripts/{}-implementer-1.jsonl", h.id)),
        "{}",
        copy.display()
    );
    let text = std::fs::read_to_string(&copy).unwrap();
    let session = str_of(&implement["outcome"]["harness"], "session_id");
    assert!(text.contains(session), "the session's own transcript");
    assert!(
        text.contains("sessions end when idle"),
        "the tool call is in it"
    );
    assert!(
        !text.contains(API_KEY) && !text.contains(SHAPED) && !text.contains(CRED),
        "{text}"
    );
    assert!(text.contains("<redacted>"));
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&copy).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // The original, in the agent's own home, held them: the redaction did something.
    let original = h.assert_session_in_its_home(&last, &show, "implement");
    let original = std::fs::read_to_string(original).unwrap();
    assert!(original.contains(API_KEY) && original.contains(CRED));
    // The validator's is there too.
    let validate = record(&show, "validate-full");
    assert!(
        str_of(&validate["outcome"]["harness"], "transcript")
            .ends_with(&format!("{}-validator-full-1.jsonl", h.id)),
        "{validate:#}"
    );
}

pub(crate) fn walk_files(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk_files(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// SPEC 20.10, for a validator: a 429 is neither a crash nor an answer; the run is paced, the
/// validator runs again once it may, and the run is delivered.
#[test]
pub(crate) fn a_rate_limited_validator_paces_the_run_then_answers() {
    let Some(program) = claude() else { return };
    let limited = Rule::new("# Validate:", vec![Reply::Status(429)]).times(1);
    let h = Harness::new(
        &program,
        vec![implementer(), limited, validator(PASS)],
        json!({"pace": {"backoffSec": 1, "backoffMaxSec": 2}, "run": {"maxCrashRetries": 0}}),
    );
    let (out, last) = h.build();
    assert_eq!(last["status"], "delivered", "{out:#?}");
    let show = h.show(str_of(&last, "run"));
    h.assert_session_in_its_home(&last, &show, "validate-full");
    assert_eq!(show["lanes"][0]["crashes"], 0, "{show:#}");
    let events = h.env.read(".iced/run/events.jsonl");
    let paced = events
        .lines()
        .filter(|l| l.contains(r#""event":"paced""#) && l.contains("rate_limited"))
        .count();
    assert_eq!(paced, 1, "{events}");
    let validators = h
        .api
        .seen()
        .iter()
        .filter(|s| s.rule.as_deref() == Some("# Validate:"))
        .count();
    assert_eq!(validators, 2, "asked, limited, asked again");
}
