//! The guard where agents work (SPEC 24.11): `iced guard --json` and `iced hook claude`, driven
//! with a proposed tool call on standard input in a real repository. Neither ever writes a file.

use crate::env::{Run, TestEnv};
use crate::mock_api::{MockApi, Reply, Rule};
use serde_json::{json, Value};
use std::io::Write;
use std::process::Stdio;

/// `iced <args>` with `input` on standard input and `vars` in the environment.
pub(crate) fn piped(env: &TestEnv, args: &[&str], input: &[u8], vars: &[(&str, &str)]) -> Run {
    let mut cmd = env.command();
    cmd.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("iced starts");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input).unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `iced guard --json` on `call`; asserts that nothing in the repository changed.
fn guard(env: &TestEnv, call: Value, vars: &[(&str, &str)]) -> Run {
    let before = env.snapshot();
    let out = piped(env, &["guard", "--json"], call.to_string().as_bytes(), vars);
    assert_eq!(
        env.snapshot(),
        before,
        "iced guard wrote something: {out:#?}"
    );
    out
}

/// The decision, after checking the exit code that goes with it.
fn decided(out: &Run, decision: &str, rule: &str) -> Value {
    let exit = match decision {
        "allow" | "notify" => 0,
        "ask" => 4,
        _ => 3,
    };
    assert_eq!(out.code, exit, "{out:#?}");
    let json = out.json();
    assert_eq!(
        (json["decision"].as_str(), json["rule"].as_str()),
        (Some(decision), Some(rule)),
        "{out:#?}"
    );
    let reason = json["reason"].as_str().unwrap();
    let next = json["next"].as_str().unwrap();
    assert!(reason.ends_with(&format!("Next step: {next}")), "{json:#}");
    json
}

/// An initialized repository with an approved (and active) unit.
fn approved() -> (TestEnv, String) {
    let env = TestEnv::initialized();
    let id = env.approved_unit("session timeout");
    (env, id)
}

const E1: &str = "- [E1] Activity extends the session.";

#[test]
fn an_expectation_of_an_approved_unit_cannot_change() {
    let (env, id) = approved();
    let path = format!("intent/{id}/iced.md");
    let out = guard(
        &env,
        json!({"tool": "edit", "path": path, "edits": [{"old": E1, "new": "- [E1] Activity may extend the session."}]}),
        &[],
    );
    let d = decided(&out, "deny", "contract-frozen");
    assert_eq!(d["hard"], true);
    assert!(
        d["reason"].as_str().unwrap().contains("its Expectations"),
        "{d:#}"
    );
    // The same edit of the Context is the agent's to make.
    let out = guard(
        &env,
        json!({"tool": "edit", "path": path, "edits": [{"old": "- [code] Sessions expire", "new": "- [code] Sessions end"}]}),
        &[],
    );
    decided(&out, "allow", "allowed");
    // An edit whose old text is not in the file cannot be predicted: it could change anything.
    let out = guard(
        &env,
        json!({"tool": "edit", "path": path, "edits": [{"old": "not in the file", "new": "x"}]}),
        &[],
    );
    decided(&out, "deny", "protected-key");
}

#[test]
fn protected_keys_and_config_integrity_keys_cannot_change() {
    let (env, id) = approved();
    let out = guard(
        &env,
        json!({"tool": "edit", "path": format!("intent/{id}/iced.md"), "edits": [{"old": "status: approved", "new": "status: done"}]}),
        &[],
    );
    let d = decided(&out, "deny", "protected-key");
    assert!(d["reason"].as_str().unwrap().contains("`status`"), "{d:#}");

    let mut config: Value = serde_json::from_str(&env.read(".iced/config.json")).unwrap();
    config["verify"]["timeoutSec"] = 60.into();
    let out = guard(
        &env,
        json!({"tool": "write", "path": ".iced/config.json", "content": config.to_string()}),
        &[],
    );
    decided(&out, "allow", "allowed");
    config["gate"] = "off".into();
    config["verify"]["independent"] = false.into();
    let out = guard(
        &env,
        json!({"tool": "write", "path": ".iced/config.json", "content": config.to_string()}),
        &[],
    );
    let d = decided(&out, "deny", "config-integrity");
    assert!(
        d["reason"]
            .as_str()
            .unwrap()
            .contains("`gate`, `verify.independent`"),
        "{d:#}"
    );
    let out = guard(
        &env,
        json!({"tool": "shell", "command": "sed -i 's/strict/off/' .iced/config.json"}),
        &[],
    );
    decided(&out, "deny", "config-integrity");
}

/// `merge-attribute`: an implementer may change a `.gitattributes` but not add a merge rule to
/// it, whatever the folder; the rules already there and iced's own union lines stay writable.
#[test]
fn an_implementer_cannot_add_a_merge_rule() {
    let (env, id) = approved();
    env.write(".gitattributes", "*.lock merge=binary\n");
    let lane = [("ICED_ROLE", "implementer"), ("ICED_LANE", id.as_str())];
    for (path, content) in [
        (".gitattributes", "*.lock merge=binary\n* merge=union\n"),
        ("src/.gitattributes", "*.rs -merge\n"),
    ] {
        let out = guard(
            &env,
            json!({"tool": "write", "path": path, "content": content}),
            &lane,
        );
        let d = decided(&out, "deny", "merge-attribute");
        assert!(d["reason"].as_str().unwrap().contains(path), "{d:#}");
    }
    // A shell write's text cannot be read before it happens: denied, told to use the editor.
    let out = guard(
        &env,
        json!({"tool": "shell", "command": "echo '* merge=union' >> .gitattributes"}),
        &lane,
    );
    let d = decided(&out, "deny", "merge-attribute");
    assert!(
        d["next"].as_str().unwrap().contains("write or edit tool"),
        "{d:#}"
    );
    let out = guard(
        &env,
        json!({"tool": "write", "path": ".gitattributes", "content": "*.lock   merge=binary\n*.sh text eol=lf\n.iced/metrics.jsonl merge=union\n"}),
        &lane,
    );
    decided(&out, "allow", "allowed");
}

#[test]
fn an_implementer_writes_code_while_building_and_a_validator_writes_nothing() {
    let (env, id) = approved();
    let lane = [("ICED_ROLE", "implementer"), ("ICED_LANE", id.as_str())];
    let out = guard(
        &env,
        json!({"tool": "write", "path": "src/session.rs", "content": "fn main() {}\n"}),
        &lane,
    );
    decided(&out, "allow", "allowed");
    let out = guard(
        &env,
        json!({"tool": "write", "path": ".iced/memory/product.md", "content": "x"}),
        &lane,
    );
    decided(&out, "deny", "memory-person");
    let out = guard(
        &env,
        json!({"tool": "write", "path": ".claude/settings.json", "content": "{}"}),
        &lane,
    );
    decided(&out, "deny", "host-settings");

    // The agent in the same repository: its active unit is approved, not building.
    let out = guard(
        &env,
        json!({"tool": "write", "path": "src/session.rs", "content": "fn main() {}\n"}),
        &[],
    );
    let d = decided(&out, "deny", "code-frozen");
    assert!(
        d["next"]
            .as_str()
            .unwrap()
            .contains(&format!("iced build {id}")),
        "{d:#}"
    );

    for role in ["validator", "refuter"] {
        let out = guard(
            &env,
            json!({"tool": "write", "path": "src/session.rs", "content": "x"}),
            &[("ICED_ROLE", role)],
        );
        decided(&out, "deny", "read-only-role");
        let out = guard(
            &env,
            json!({"tool": "shell", "command": "cargo test 2>/dev/null"}),
            &[("ICED_ROLE", role)],
        );
        decided(&out, "allow", "allowed");
        let out = guard(
            &env,
            json!({"tool": "read", "path": "src/session.rs"}),
            &[("ICED_ROLE", role)],
        );
        decided(&out, "allow", "allowed");
    }

    // At autonomy 0 a person confirms each change: exit 4.
    env.set_field(&id, "autonomy", "0");
    let out = guard(
        &env,
        json!({"tool": "write", "path": "src/session.rs", "content": "x"}),
        &lane,
    );
    decided(&out, "ask", "autonomy-zero");
}

#[test]
fn shell_writes_to_owned_files_are_denied_and_reads_are_not() {
    let (env, id) = approved();
    let out = guard(
        &env,
        json!({"tool": "shell", "command": format!("echo x > intent/{id}/verify.json")}),
        &[],
    );
    decided(&out, "deny", "shell-owned");
    let out = guard(
        &env,
        json!({"tool": "shell", "command": format!("cat intent/{id}/iced.md | grep status; git diff -- .iced/active")}),
        &[],
    );
    decided(&out, "allow", "allowed");
    // From a subdirectory, by a relative path, and through a symbolic link to `.iced`.
    std::fs::create_dir_all(env.path("src")).unwrap();
    let out = guard(
        &env,
        json!({"tool": "write", "path": "../.iced/active", "content": "x", "cwd": "src"}),
        &[],
    );
    decided(&out, "deny", "owned-file");
    std::os::unix::fs::symlink(env.path(".iced"), env.path("state")).unwrap();
    let out = guard(
        &env,
        json!({"tool": "write", "path": "state/metrics.jsonl", "content": "x"}),
        &[],
    );
    decided(&out, "deny", "owned-file");
    let out = guard(
        &env,
        json!({"tool": "shell", "command": "cd src && rm -rf ../intent"}),
        &[],
    );
    decided(&out, "deny", "shell-owned");
}

#[test]
fn text_output_names_the_decision_and_the_reason() {
    let (env, _) = approved();
    let before = env.snapshot();
    let out = piped(
        &env,
        &["guard"],
        br#"{"tool": "write", "path": ".iced/active", "content": "x"}"#,
        &[],
    );
    assert_eq!(env.snapshot(), before);
    assert_eq!(out.code, 3, "{out:#?}");
    assert_eq!(
        out.stdout,
        "deny: owned-file, hard\n`.iced/active` names the active unit; only `iced use` writes it. Next step: ask the person to run `iced use <id>` (or `iced use none`).\n"
    );
}

#[test]
fn bad_input_is_refused_with_a_reason() {
    let env = TestEnv::initialized();
    for (input, why) in [
        (&b"{"[..], "not valid"),
        (b"[1, 2]", "not valid"),
        (b"", "not valid"),
        (br#"{"tool": "write", "content": "x"}"#, "needs `path`"),
        (br#"{"tool": "edit", "path": "a"}"#, "needs `edits`"),
        (br#"{"tool": "shell"}"#, "needs `command`"),
        (
            br#"{"tool": "edit", "path": "a", "edits": [{"old": 1}]}"#,
            "not valid",
        ),
    ] {
        let out = piped(&env, &["guard", "--json"], input, &[]);
        let refused = out.refused(2, "guard-input");
        assert!(
            refused["reason"].as_str().unwrap().contains(why),
            "{out:#?}"
        );
    }
    let out = piped(
        &env,
        &["guard", "--json"],
        br#"{"tool": "read"}"#,
        &[("ICED_ROLE", "implementer")],
    );
    out.refused(2, "guard-input");
    env.write(".iced/config.json", "{\"gate\": 3}");
    let out = piped(&env, &["guard", "--json"], br#"{"tool": "read"}"#, &[]);
    out.refused(3, "config-invalid");
    // The whole config, as every verb checks it (SPEC 11): a misspelt role too.
    env.write(".iced/config.json", r#"{"roles": {"validater": {}}}"#);
    let out = piped(&env, &["guard", "--json"], br#"{"tool": "read"}"#, &[]);
    let refused = out.refused(3, "config-invalid");
    assert!(
        refused["reason"]
            .as_str()
            .unwrap()
            .contains("did you mean `validator`?"),
        "{out:#?}"
    );
}

/// Claude Code's PreToolUse hook input for one tool call.
fn hook_input(env: &TestEnv, tool: &str, input: Value) -> Vec<u8> {
    json!({
        "session_id": "6b1f0c1e-0000-4000-8000-000000000000",
        "transcript_path": "/dev/null",
        "cwd": env.root().display().to_string(),
        "permission_mode": "dontAsk",
        "hook_event_name": "PreToolUse",
        "tool_name": tool,
        "tool_input": input,
        "tool_use_id": "toolu_01"
    })
    .to_string()
    .into_bytes()
}

/// `iced hook claude`'s answer: always exit 0 and Claude Code's shape; (decision, reason).
fn hook(env: &TestEnv, input: &[u8], vars: &[(&str, &str)]) -> (String, String) {
    let before = env.snapshot();
    let out = piped(env, &["hook", "claude"], input, vars);
    assert_eq!(env.snapshot(), before, "the hook wrote something: {out:#?}");
    assert_eq!(out.code, 0, "{out:#?}");
    let json = out.json();
    let specific = json["hookSpecificOutput"]
        .as_object()
        .expect("hookSpecificOutput");
    assert_eq!(specific.len(), 3, "{json:#}");
    assert_eq!(specific["hookEventName"], "PreToolUse");
    (
        specific["permissionDecision"].as_str().unwrap().to_owned(),
        specific["permissionDecisionReason"]
            .as_str()
            .unwrap()
            .to_owned(),
    )
}

#[test]
fn the_claude_hook_predicts_edits_from_the_file_and_answers_in_claude_codes_shape() {
    let (env, id) = approved();
    let unit = env
        .path(&format!("intent/{id}/iced.md"))
        .display()
        .to_string();
    let (decision, reason) = hook(
        &env,
        &hook_input(
            &env,
            "Edit",
            json!({"file_path": unit, "old_string": E1, "new_string": "- [E1] Nothing."}),
        ),
        &[],
    );
    assert_eq!(decision, "deny");
    assert!(
        reason.starts_with("iced guard (contract-frozen): "),
        "{reason}"
    );
    assert!(reason.contains("Next step: "), "{reason}");
    let (decision, _) = hook(
        &env,
        &hook_input(
            &env,
            "MultiEdit",
            json!({"file_path": unit, "edits": [
                {"old_string": "- [code] Sessions expire", "new_string": "- [code] Sessions end"},
                {"old_string": "Sessions end after", "new_string": "Sessions stop after"}
            ]}),
        ),
        &[],
    );
    assert_eq!(decision, "allow");
    let notes = env.path("notes.txt").display().to_string();
    let (decision, _) = hook(
        &env,
        &hook_input(&env, "Write", json!({"file_path": notes, "content": "x\n"})),
        &[],
    );
    // The active unit is approved and the agent is at autonomy 1: code waits for the build.
    assert_eq!(decision, "deny");
    let (decision, _) = hook(
        &env,
        &hook_input(&env, "Write", json!({"file_path": notes, "content": "x\n"})),
        &[("ICED_ROLE", "implementer"), ("ICED_LANE", id.as_str())],
    );
    assert_eq!(decision, "allow");
    let (decision, _) = hook(
        &env,
        &hook_input(
            &env,
            "Bash",
            json!({"command": "rm -f .iced/metrics.jsonl", "description": "x"}),
        ),
        &[],
    );
    assert_eq!(decision, "deny");
    let (decision, _) = hook(
        &env,
        &hook_input(&env, "Read", json!({"file_path": unit})),
        &[],
    );
    assert_eq!(decision, "allow");
    // At autonomy 0 the person is asked.
    env.set_field(&id, "autonomy", "0");
    let (decision, _) = hook(
        &env,
        &hook_input(&env, "Write", json!({"file_path": notes, "content": "x\n"})),
        &[("ICED_ROLE", "implementer"), ("ICED_LANE", id.as_str())],
    );
    assert_eq!(decision, "ask");
}

#[test]
fn the_claude_hook_denies_what_it_cannot_read() {
    let env = TestEnv::initialized();
    for input in [
        &b"not json"[..],
        b"{}",
        br#"{"tool_name": "Write", "tool_input": {"content": "x"}}"#,
        br#"{"tool_name": "Bash", "tool_input": {"cmd": "ls"}}"#,
    ] {
        let (decision, reason) = hook(&env, input, &[]);
        assert_eq!(decision, "deny", "{reason}");
        assert!(reason.contains("could not judge"), "{reason}");
    }
    let (decision, reason) = hook(
        &env,
        &hook_input(&env, "Read", json!({"file_path": "x"})),
        &[("ICED_ROLE", "implementer")],
    );
    assert_eq!(decision, "deny", "{reason}");
    env.write(".iced/config.json", "[]");
    let (decision, reason) = hook(&env, &hook_input(&env, "Read", json!({})), &[]);
    assert_eq!(decision, "deny", "{reason}");
    assert!(reason.contains("config-invalid"), "{reason}");
}

// ---- iced init --host claude (SPEC 13) ------------------------------------------------------

fn pre_tool_use(env: &TestEnv) -> Vec<Value> {
    let settings: Value = serde_json::from_str(&env.read(".claude/settings.json")).unwrap();
    settings["hooks"]["PreToolUse"].as_array().unwrap().clone()
}

#[test]
fn init_host_claude_installs_the_hook_once() {
    let env = TestEnv::new();
    let out = env.iced_json(&["init", "--host", "claude"]).ok();
    let report = out.json();
    assert!(
        report["created"]
            .as_array()
            .unwrap()
            .contains(&json!(".claude/settings.json")),
        "{report:#}"
    );
    assert_eq!(
        pre_tool_use(&env),
        vec![
            json!({"matcher": "Write|Edit|MultiEdit|NotebookEdit|Bash", "hooks": [{"type": "command", "command": "iced hook claude"}]})
        ]
    );
    let before = env.snapshot();
    let again = env.iced_json(&["init", "--host", "claude"]).ok().json();
    assert!(
        again["skipped"]
            .as_array()
            .unwrap()
            .contains(&json!(".claude/settings.json")),
        "{again:#}"
    );
    assert_eq!(env.snapshot(), before, "a second run changes nothing");
}

#[test]
fn init_host_claude_keeps_everything_else_in_the_settings() {
    let env = TestEnv::new();
    let existing = json!({
        "model": "claude-opus-4-1",
        "permissions": {"allow": ["Bash(npm test)"]},
        "hooks": {
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./lint.sh"}]}],
            "Stop": [{"hooks": [{"type": "command", "command": "say done"}]}]
        }
    });
    env.write(
        ".claude/settings.json",
        serde_json::to_string_pretty(&existing).unwrap(),
    );
    let report = env.iced_json(&["init", "--host", "claude"]).ok().json();
    assert!(
        report["updated"]
            .as_array()
            .unwrap()
            .contains(&json!(".claude/settings.json")),
        "{report:#}"
    );
    let settings: Value = serde_json::from_str(&env.read(".claude/settings.json")).unwrap();
    let mut expected = existing.clone();
    expected["hooks"]["PreToolUse"]
        .as_array_mut()
        .unwrap()
        .push(json!({"matcher": "Write|Edit|MultiEdit|NotebookEdit|Bash", "hooks": [{"type": "command", "command": "iced hook claude"}]}));
    assert_eq!(settings, expected);
}

#[test]
fn init_host_claude_refuses_settings_that_are_not_an_object_and_writes_nothing() {
    for bad in [
        "[1, 2]",
        "{\"hooks\": ",
        "{\"hooks\": []}",
        "{\"hooks\": {\"PreToolUse\": {}}}",
    ] {
        let env = TestEnv::new();
        env.write(".claude/settings.json", bad);
        let before = env.snapshot();
        let out = env.iced_json(&["init", "--host", "claude"]);
        let refused = out.refused(3, "host-settings-invalid");
        assert!(
            refused["reason"]
                .as_str()
                .unwrap()
                .starts_with("`.claude/settings.json` cannot take the hook: "),
            "{refused:#}"
        );
        assert_eq!(env.snapshot(), before, "{bad}: nothing is written");
        assert!(!env.path(".iced").exists());
    }
    let env = TestEnv::new();
    std::fs::create_dir_all(env.path(".claude")).unwrap();
    std::fs::write(env.outside("elsewhere.json"), "{}").unwrap();
    std::os::unix::fs::symlink(
        env.outside("elsewhere.json"),
        env.path(".claude/settings.json"),
    )
    .unwrap();
    env.iced_json(&["init", "--host", "claude"])
        .refused(3, "path-symlink");
    let out = env.iced_json(&["init", "--host", "pi"]);
    out.refused(2, "usage");
}

// ---- the real Claude Code CLI with the hook installed ----------------------------------------

/// Claude Code (`claude -p`) in `env`'s repository, on the mock API, with `prompt` on standard
/// input and `iced` first on PATH (the hook `init --host claude` installs runs `iced hook claude`).
/// Its result JSON.
fn claude_p(
    env: &TestEnv,
    program: &std::path::Path,
    api: &MockApi,
    prompt: &str,
    extra: &[&str],
) -> Value {
    let home = env.outside("claude-home");
    std::fs::create_dir_all(&home).unwrap();
    let iced_dir = std::path::Path::new(env!("CARGO_BIN_EXE_iced"))
        .parent()
        .unwrap();
    let mut path = std::ffi::OsString::from(iced_dir);
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());
    let mut child = std::process::Command::new(program)
        .args([
            "-p",
            "--output-format",
            "json",
            "--permission-mode",
            "dontAsk",
            "--allowedTools",
            "Edit,Write,Read",
            "--no-session-persistence",
        ])
        .args(extra)
        .current_dir(env.root())
        .env_clear()
        .env("PATH", path)
        .env("HOME", &home)
        .env("ICED_NOW", crate::env::NOW)
        .env("ANTHROPIC_BASE_URL", &api.url)
        .env("ANTHROPIC_API_KEY", crate::harness::API_KEY)
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("CLAUDE_CODE_MAX_RETRIES", "0")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("claude starts");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(prompt.as_bytes())
        .unwrap();
    // A stuck CLI fails the test instead of hanging it.
    let pid = child.id();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watch = done.clone();
    std::thread::spawn(move || {
        for _ in 0..1200 {
            std::thread::sleep(std::time::Duration::from_millis(100));
            if watch.load(std::sync::atomic::Ordering::SeqCst) {
                return;
            }
        }
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    });
    let out = child.wait_with_output().unwrap();
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "claude printed no result JSON ({e}): exit {:?}\n{stdout}\n{}\nthe API saw: {:#?}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr),
            api.seen()
        )
    })
}

/// SPEC 24.11 with the real Claude Code CLI: `iced init --host claude` installs the hook; the
/// scripted model first edits an Expectation of the approved unit (denied by the hook: the file
/// is unchanged, and Claude Code lists the call in `permission_denials`), then writes an ordinary
/// file (written).
#[test]
fn claude_code_with_the_hook_cannot_edit_a_signed_off_expectation() {
    let Some(program) = crate::harness::claude() else {
        return;
    };
    let (env, id) = approved();
    env.iced_json(&["init", "--host", "claude"]).ok();
    // No active unit: the agent may write code, and the signed-off contract is still frozen.
    env.iced_json(&["use", "none"]).ok();
    let unit_rel = format!("intent/{id}/iced.md");
    let unit_before = env.read(&unit_rel);
    let unit = env.path(&unit_rel).display().to_string();
    let notes = env.path("notes.txt").display().to_string();
    let api = MockApi::start(vec![Rule::new(
        "# Guard check",
        vec![
            Reply::Tool {
                name: "Edit".into(),
                input: json!({"file_path": unit, "old_string": E1, "new_string": "- [E1] Activity may extend the session."}),
            },
            Reply::Tool {
                name: "Write".into(),
                input: json!({"file_path": notes, "content": "the guard let this through\n"}),
            },
            Reply::Text("Done.".into()),
        ],
    )]);
    let result = claude_p(
        &env,
        &program,
        &api,
        "# Guard check\n\nEdit the unit, then write notes.\n",
        &[],
    );
    assert_eq!(
        env.read(&unit_rel),
        unit_before,
        "the hook kept the contract: {result:#}"
    );
    assert_eq!(
        env.read("notes.txt"),
        "the guard let this through\n",
        "{result:#}"
    );
    let denials = result["permission_denials"]
        .as_array()
        .expect("permission_denials");
    assert_eq!(denials.len(), 1, "{result:#}");
    assert_eq!(denials[0]["tool_name"], "Edit", "{result:#}");
    assert_eq!(denials[0]["tool_input"]["file_path"], unit, "{result:#}");
    // The model was told why, and what to do instead: the guard's reason came back as the
    // Edit's result.
    let last = api
        .seen()
        .into_iter()
        .rev()
        .find(|s| s.rule.is_some())
        .expect("the scripted conversation");
    assert_eq!(last.turn, 2, "{last:#?}");
    assert_eq!(last.tool_results.len(), 2, "{last:#?}");
    assert!(
        last.tool_results[0].contains("iced guard (contract-frozen): ")
            && last.tool_results[0].contains("Next step: "),
        "{last:#?}"
    );
    assert!(!last.tool_results[1].contains("iced guard"), "{last:#?}");
}

/// SPEC 20.17, 24.11: `ICED_ROLE=test-writer` is fenced to the config's `build.testPaths`.
#[test]
fn a_test_writer_may_write_only_the_configs_test_paths() {
    let (env, id) = approved();
    env.patch_config(&json!({"build": {"testPaths": ["spec/**"]}}));
    let tester = [("ICED_ROLE", "test-writer"), ("ICED_LANE", id.as_str())];
    let write = |path: &str| json!({"tool": "write", "path": path, "content": "x\n"});
    decided(
        &guard(&env, write("spec/session_spec.rb"), &tester),
        "allow",
        "allowed",
    );
    let d = decided(
        &guard(&env, write("tests/session.rs"), &tester),
        "deny",
        "test-path-only",
    );
    assert!(d["reason"].as_str().unwrap().contains("`spec/**`"), "{d:#}");
    decided(
        &guard(&env, write("src/session.rs"), &tester),
        "deny",
        "test-path-only",
    );
}
