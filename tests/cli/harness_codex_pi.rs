//! The real Codex and pi CLIs end to end against the mock model API (SPEC 20.8). Split from
//! harness.rs, whose helpers (the claude-shaped unit, the implementer and validator scripts) it uses.

use crate::env::TestEnv;
use crate::harness::*;
use crate::loop_e2e::{last_line, str_of};
use crate::mock_api::MockApi;
use serde_json::json;
use std::path::PathBuf;

/// The Codex CLI, or why it is not here (`ICED_CODEX`, else `codex` on PATH; required by
/// `ICED_REQUIRE_CODEX=1`).
pub(crate) fn codex() -> Option<PathBuf> {
    let found = std::env::var_os("ICED_CODEX")
        .map(PathBuf::from)
        .filter(|p| p.is_file())
        .or_else(|| {
            std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
                .map(|d| d.join("codex"))
                .find(|p| p.is_file())
        });
    if found.is_none() {
        crate::skip::skipped(
            &crate::harness::test_name(),
            "ICED_REQUIRE_CODEX",
            "no Codex CLI at ICED_CODEX or on PATH (install @openai/codex)",
        );
    }
    found
}

/// A buildable unit whose implementer and validator are the real `codex`, on `api`'s Responses
/// API: its provider is in the person's own `config.toml` (their `CODEX_HOME`), which reaches a
/// confined agent only as the copy the loop seeds its home with (SPEC 20.8).
pub(crate) fn codex_harness(program: &std::path::Path, api: MockApi) -> Harness {
    let config = format!(
        "model_provider = \"mock\"\n\n[model_providers.mock]\nname = \"Mock\"\nbase_url = {}\nenv_key = \"OPENAI_API_KEY\"\nwire_api = \"responses\"\nrequest_max_retries = 0\nstream_max_retries = 0\n",
        serde_json::to_string(&format!("{}/v1", api.url)).unwrap()
    );
    let (env, id) = TestEnv::buildable_with(|_| {
        json!({
            "runners": {"cx": {"kind": "codex", "program": program.display().to_string(),
                "timeoutSec": 120}},
            "roles": {
                "implementer": {"runner": "cx", "model": "gpt-5.5"},
                "validator": {"runner": "cx", "model": "gpt-5.5-mini"}
            },
            "verify": {
                "independent": true,
                "lenses": ["full"],
                "commands": [{"argv": ["test", "-f", "src/session.txt"], "timeoutSec": 30}]
            },
            "run": {"maxCrashRetries": 0}
        })
    });
    let h = Harness { env, id, api };
    std::fs::write(h.codex_home().join("config.toml"), config).unwrap();
    h
}

/// SPEC 20.8, with Codex: the real `codex exec` implements (its own shell tool commits, its
/// sandbox allowed to write the repository's git directory) and validates (read-only), against the
/// mock's Responses API; the run is delivered and the record names the thread and the tokens, with
/// the cost unknown (Codex reports none).
#[test]
fn codex_implements_and_validates_a_unit_through_the_mock_api() {
    let Some(program) = codex() else { return };
    let h = codex_harness(
        &program,
        MockApi::start(vec![implementer(), validator(PASS)]),
    );
    let (out, last) = h.build();
    let tail = std::fs::read_to_string(h.env.path(&format!(
        ".iced/run/{}/{}/activities/implement-1/stdout.txt",
        str_of(&last, "run"),
        h.id
    )))
    .unwrap_or_default();
    assert_eq!(
        last["status"], "delivered",
        "{out:#?}\nthe implementer printed:\n{tail}"
    );
    let show = h.show(str_of(&last, "run"));
    let implement = record(&show, "implement");
    let harness = &implement["outcome"]["harness"];
    assert!(harness["session_id"].is_string(), "the thread: {harness:#}");
    assert_eq!(harness["turns"], 1, "{harness:#}");
    assert!(
        harness["input_tokens"].as_u64().is_some_and(|n| n > 0),
        "{harness:#}"
    );
    assert_eq!(harness["cost_usd"], "unknown", "{harness:#}");
    // Codex's rollout of the thread, copied into the run.
    let copy = str_of(harness, "transcript");
    assert!(
        copy.ends_with(&format!("{}-implementer-1.jsonl", h.id)),
        "{copy}"
    );
    let text = std::fs::read_to_string(copy).unwrap();
    assert!(text.contains(str_of(harness, "session_id")), "{text}");
    assert!(!text.contains(API_KEY));
    let branch = format!("iced/{0}/{0}", h.id);
    assert_eq!(
        h.env
            .git_out(&["show", &format!("{branch}:src/session.txt")]),
        "sessions end when idle\n",
        "committed by codex's own shell tool"
    );
    let validate = record(&show, "validate-full");
    assert_eq!(
        crate::env::kept(&validate["outcome"]["answer"])["verdict"],
        "pass",
        "{validate:#}"
    );
    let seen = h.api.seen();
    assert!(seen.iter().all(|s| s.authorization), "{seen:#?}");
    assert!(
        seen.iter()
            .any(|s| s.rule.as_deref() == Some("# Validate:") && s.model == "gpt-5.5-mini"),
        "{seen:#?}"
    );

    // Each agent kept its rollout in its own CODEX_HOME, not the person's, and found the
    // person's provider in a copy of their config.toml there.
    let run = str_of(&last, "run");
    let theirs = h.codex_home();
    for (key, activity) in [
        ("implement", "implement-1"),
        ("validate-full", "validate-full-1"),
    ] {
        assert_session_in_agent_home(
            &h.env,
            (run, &h.id),
            &show,
            key,
            &[&theirs, &h.env.outside("home")],
        );
        let copy = h.env.path(&format!(
            ".iced/run/{run}/{}/activities/{activity}/home/config.toml",
            h.id
        ));
        // The lane reached the mock only through the copy's provider; the copy is gone once the
        // agent ended, and the person's file is theirs still.
        assert!(!copy.exists(), "the copy stayed: {}", copy.display());
        assert!(theirs.join("config.toml").is_file());
    }
}

/// The pi CLI and the folder of the Node it needs, or why they are not here (`ICED_PI`, and
/// `ICED_PI_NODE_DIR` when the Node on PATH is too old; required by `ICED_REQUIRE_PI=1`).
fn pi() -> Option<(PathBuf, Option<PathBuf>)> {
    let found = std::env::var_os("ICED_PI")
        .map(PathBuf::from)
        .filter(|p| p.is_file());
    if found.is_none() {
        crate::skip::skipped(
            &crate::harness::test_name(),
            "ICED_REQUIRE_PI",
            "no pi CLI at ICED_PI (and ICED_PI_NODE_DIR for a Node 22 bin folder)",
        );
    }
    found.map(|p| (p, std::env::var_os("ICED_PI_NODE_DIR").map(PathBuf::from)))
}

/// SPEC 20.8, with pi: the real `pi -p --mode json` implements (its bash tool commits) and
/// validates (read tool only) through the mock's Messages API, its endpoint set in its own
/// models.json; the record names its session (the one the loop chose), model, turns and cost.
#[test]
fn pi_implements_and_validates_a_unit_through_the_mock_api() {
    let Some((program, node_dir)) = pi() else {
        return;
    };
    let api = MockApi::start(vec![implementer(), validator(PASS)]);
    let (env, id) = TestEnv::buildable_with(|_| {
        json!({
            "runners": {"pi": {"kind": "pi", "program": program.display().to_string(), "timeoutSec": 120}},
            "roles": {
                "implementer": {"runner": "pi", "model": "anthropic/claude-sonnet-4-5"},
                "validator": {"runner": "pi", "model": "anthropic/claude-opus-4-1"}
            },
            "verify": {
                "independent": true,
                "lenses": ["full"],
                "commands": [{"argv": ["test", "-f", "src/session.txt"], "timeoutSec": 30}]
            },
            "run": {"maxCrashRetries": 0}
        })
    });
    // The person's pi folder: the mock as the Anthropic provider's endpoint, the key as a login
    // saved in auth.json (none in the environment), and settings, which are not theirs to give
    // an agent (SPEC 20.8).
    let agent_dir = env.outside("pi-agent");
    std::fs::create_dir_all(&agent_dir).unwrap();
    std::fs::write(
        agent_dir.join("models.json"),
        json!({"providers": {"anthropic": {"baseUrl": api.url}}}).to_string(),
    )
    .unwrap();
    std::fs::write(
        agent_dir.join("auth.json"),
        json!({"anthropic": {"type": "api_key", "key": API_KEY}}).to_string(),
    )
    .unwrap();
    std::fs::write(
        agent_dir.join("settings.json"),
        r#"{"retry": {"maxRetries": 0}}"#,
    )
    .unwrap();
    let home = env.outside("home");
    std::fs::create_dir_all(&home).unwrap();
    let mut path = node_dir.map(|d| d.into_os_string()).unwrap_or_default();
    if !path.is_empty() {
        path.push(":");
    }
    path.push(std::env::var_os("PATH").unwrap_or_default());
    let out = crate::env::run(
        env.command()
            .env("PATH", &path)
            .env("HOME", &home)
            .env("PI_CODING_AGENT_DIR", &agent_dir)
            .env("PI_OFFLINE", "1")
            .env("PI_TELEMETRY", "0")
            .env("PI_SKIP_VERSION_CHECK", "1")
            .args(["build", &id, "--json"]),
    );
    let last = last_line(&out);
    let run = str_of(&last, "run").to_owned();
    let tail = std::fs::read_to_string(env.path(&format!(
        ".iced/run/{run}/{id}/activities/implement-1/stdout.txt"
    )))
    .unwrap_or_default();
    assert_eq!(
        last["status"],
        "delivered",
        "{out:#?}\nthe implementer printed (tail):\n{}",
        &tail[tail.len().saturating_sub(3000)..]
    );
    let show = crate::env::run(
        env.command()
            .env("PATH", &path)
            .args(["run", "show", &run, "--json"]),
    )
    .json();
    let implement = record(&show, "implement");
    let harness = &implement["outcome"]["harness"];
    assert_eq!(
        harness["session_id"],
        iced::runner::session_id(str_of(implement, "nonce")),
        "{harness:#}"
    );
    assert_eq!(harness["model"], "claude-sonnet-4-5", "{harness:#}");
    assert_eq!(harness["turns"], 2, "{harness:#}");
    assert!(
        harness["cost_usd"].as_f64().is_some_and(|c| c > 0.0),
        "{harness:#}"
    );
    let copy = str_of(harness, "transcript");
    assert!(!std::fs::read_to_string(copy).unwrap().contains(API_KEY));
    let branch = format!("iced/{id}/{id}");
    assert_eq!(
        env.git_out(&["show", &format!("{branch}:src/session.txt")]),
        "sessions end when idle\n"
    );
    let validate = record(&show, "validate-full");
    assert_eq!(
        crate::env::kept(&validate["outcome"]["answer"])["verdict"],
        "pass",
        "{validate:#}"
    );

    // Each agent logged in with the copy of the person's auth.json in its own home, reached the
    // mock through the copy of their models.json, got none of their settings, and kept its
    // session there, not in the person's folder.
    let seen = api.seen();
    assert!(
        seen.iter()
            .all(|s| s.credential.as_deref() == Some(API_KEY)),
        "{seen:#?}"
    );
    for (key, activity) in [
        ("implement", "implement-1"),
        ("validate-full", "validate-full-1"),
    ] {
        assert_session_in_agent_home(&env, (&run, &id), &show, key, &[&agent_dir, &home]);
        let own = env.path(&format!(".iced/run/{run}/{id}/activities/{activity}/home"));
        // It logged in with the copies (the requests say so); they are gone once it ended.
        for name in ["auth.json", "models.json"] {
            assert!(!own.join(name).exists(), "{name}: the copy stayed");
        }
        assert!(
            !own.join("settings.json").exists(),
            "the person's settings are not seeded"
        );
    }
}
