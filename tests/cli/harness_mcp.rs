//! iced's MCP server in the real Claude Code and Codex CLIs (SPEC 20.8, 20.18), against the mock
//! model API: the scripted model of a process-driven lane calls `iced_status`, `iced_decision` and
//! `iced_submit` through the server the runner gave its harness; a malformed report comes back as
//! a tool error naming the field and writes nothing; the good one is the lane's report, and the
//! lane is delivered. The CLIs are found and required as in `harness.rs`.

use crate::harness::{assert_session_in_agent_home, claude, record, Harness, PASS, REPORT};
use crate::loop_e2e::str_of;
use crate::mock_api::{Reply, Rule, Seen};
use serde_json::{json, Value};

/// A malformed report: an evidence kind the contract does not have.
const BAD_REPORT: &str = r#"{"summary": "s", "evidence": [{"expectation": "E1", "kind": "vibes", "ref": "src/session.txt"}]}"#;

/// The decision the implementer logs through the server.
const DECISION: &str = "keep the session in a text file";

/// A call of iced's tool `tool` (SPEC 20.18) as the model names it: Claude Code's
/// `mcp__iced__<tool>`, which the mock maps to what Codex offers.
fn call(tool: &str, input: Value) -> Reply {
    Reply::Tool {
        name: format!("mcp__iced__{tool}"),
        input,
    }
}

/// The implementer, through the server: the unit's status, a decision, the work committed with
/// the decision (after checking that no report is there yet), a malformed report, a look that it
/// wrote nothing, the good report, and a last message with no json block.
fn implementer() -> Rule {
    Rule::new(
        "# Brief: implement",
        vec![
            call("iced_status", json!({})),
            call(
                "iced_decision",
                json!({"decision": DECISION, "why": "the expectations read it"}),
            ),
            Reply::bash(
                "mkdir -p src && printf 'sessions end when idle\\n' > src/session.txt && git add -A && git commit -q -m 'sessions end when idle'",
            ),
            call(
                "iced_submit",
                serde_json::from_str(BAD_REPORT).expect("a JSON object"),
            ),
            Reply::bash(r#"test -e "$ICED_OUTPUT_FILE" && echo REPORT-THERE || echo NO-REPORT"#),
            call(
                "iced_submit",
                serde_json::from_str(REPORT).expect("a JSON object"),
            ),
            Reply::Text("Submitted through iced_submit.".into()),
        ],
    )
}

/// A validator that reads through the server before it answers: the run, then the handover.
/// Its server runs confined, as its harness does (SPEC 24.12), and reads only.
fn validator() -> Rule {
    Rule::new(
        "# Validate:",
        vec![
            call("iced_run_show", json!({})),
            call("iced_handover", json!({})),
            Reply::Text(format!("I read the change.\n\n```json\n{PASS}\n```\n")),
        ],
    )
}

/// What the implementer's conversation was told, its last request's view (every tool result so
/// far, in order), and the tools it was offered.
fn implementer_seen(seen: &[Seen]) -> (Vec<String>, Vec<String>) {
    let last = seen
        .iter()
        .filter(|s| s.rule.as_deref() == Some("# Brief: implement"))
        .max_by_key(|s| s.turn)
        .unwrap_or_else(|| panic!("the implementer never asked the API: {seen:#?}"));
    (last.tool_results.clone(), last.tools.clone())
}

/// Everything the scripted run must show, whichever harness ran it: the lane delivered, each tool
/// call's answer, the decision and the work on the lane branch, the good report kept.
fn assert_delivered_through_the_server(h: &Harness, last: &Value, out: &crate::env::Run) {
    let run = str_of(last, "run").to_owned();
    let (results, _) = implementer_seen(&h.api.seen());
    let tail = std::fs::read_to_string(h.env.path(&format!(
        ".iced/run/{run}/{}/activities/implement-1/stdout.txt",
        h.id
    )))
    .unwrap_or_default();
    assert_eq!(
        last["status"], "delivered",
        "{out:#?}\nthe implementer was told: {results:#?}\nit printed:\n{tail}"
    );
    assert_eq!(results.len(), 6, "{results:#?}");
    // iced_status: the unit, as `iced status --json` gives it.
    assert!(results[0].contains(&h.id), "{}", results[0]);
    assert!(results[0].contains("\"status\""), "{}", results[0]);
    // iced_decision: the entry's unit and file.
    assert!(results[1].contains("decisions.md"), "{}", results[1]);
    // iced_submit, malformed: a tool error naming the field, and no report written.
    assert!(
        results[3].contains("report-invalid") && results[3].contains("vibes"),
        "{}",
        results[3]
    );
    assert!(results[4].contains("NO-REPORT"), "{}", results[4]);
    // iced_submit: written where the receipt reads it.
    assert!(
        results[5].contains("implement-1/out/report.json"),
        "{}",
        results[5]
    );
    // The report the loop kept is the good one.
    let show = h.show(&run);
    let receipt = record(&show, "receipt");
    let kept = crate::env::kept(&receipt["outcome"]["report"]);
    assert_eq!(
        kept,
        serde_json::from_str::<Value>(REPORT).unwrap(),
        "{receipt:#}"
    );
    // The decision and the work, committed together on the lane branch.
    let branch = format!("iced/{0}/{0}", h.id);
    let decisions = h
        .env
        .git_out(&["show", &format!("{branch}:intent/{}/decisions.md", h.id)]);
    assert!(
        decisions.contains(&format!("- Decision: {DECISION}")),
        "{decisions}"
    );
    assert_eq!(
        h.env
            .git_out(&["show", &format!("{branch}:src/session.txt")]),
        "sessions end when idle\n"
    );
    // The validator's reads through its confined server answered.
    let told = h
        .api
        .seen()
        .into_iter()
        .filter(|s| s.rule.as_deref() == Some("# Validate:"))
        .max_by_key(|s| s.turn)
        .expect("the validator asked the API");
    assert_eq!(told.tool_results.len(), 2, "{:#?}", told.tool_results);
    assert!(
        told.tool_results[0].contains(&run) && told.tool_results[0].contains("validate-full"),
        "iced_run_show: {}",
        told.tool_results[0]
    );
    assert!(
        told.tool_results[1].contains("handover") && told.tool_results[1].contains(&run),
        "iced_handover: {}",
        told.tool_results[1]
    );
    // Each agent kept its session in its own home, not in the person's.
    let theirs = [h.env.outside("home"), h.codex_home()];
    for key in ["implement", "validate-full"] {
        assert_session_in_agent_home(&h.env, (&run, &h.id), &show, key, &[&theirs[0], &theirs[1]]);
    }
}

/// SPEC 20.8, 20.18 with the real Claude Code CLI: the implementer is offered the implementer's
/// tools by Claude Code's names (and not the host's), calls them through the server, and the lane
/// is delivered on the report it submitted; the validator is offered the read tools only.
#[test]
fn claude_builds_a_lane_through_the_mcp_server() {
    let Some(program) = claude() else { return };
    let h = Harness::new(&program, vec![implementer(), validator()], json!({}));
    let (out, last) = h.build();
    assert_delivered_through_the_server(&h, &last, &out);
    let seen = h.api.seen();
    let offered = |rule: &str| iced_tools(first_request(&seen, rule));
    let mut implementer_tools = iced::runner::MCP_IMPLEMENTER_TOOLS.to_vec();
    implementer_tools.sort_unstable();
    assert_eq!(
        offered("# Brief: implement"),
        implementer_tools
            .iter()
            .map(|t| format!("mcp__iced__{t}"))
            .collect::<Vec<_>>(),
        "only iced's server, with the implementer's tools"
    );
    assert_eq!(
        offered("# Validate:"),
        [
            "mcp__iced__iced_handover",
            "mcp__iced__iced_run_show",
            "mcp__iced__iced_status"
        ],
        "a validator's are the read tools"
    );
}

/// The first request the mock answered by `rule`.
fn first_request<'a>(seen: &'a [Seen], rule: &str) -> &'a Seen {
    seen.iter()
        .find(|s| s.rule.as_deref() == Some(rule))
        .unwrap_or_else(|| panic!("no request of {rule}: {seen:#?}"))
}

/// The names of iced's tools a request offered, sorted: Claude Code lists an MCP server's tools
/// as deferred (their names in a reminder of the conversation, their schemas loaded on demand),
/// or among its tools.
fn iced_tools(seen: &Seen) -> Vec<String> {
    let text = format!(
        "{:?} {} {}",
        seen.tools, seen.body["system"], seen.body["messages"]
    );
    let mut names: Vec<String> = text
        .match_indices("mcp__")
        .map(|(at, _)| {
            text[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect()
        })
        .collect();
    names.sort_unstable();
    names.dedup();
    names
}

/// SPEC 20.8, 20.18 with the real Codex CLI: the same lane, through the server Codex was given by
/// `-c mcp_servers.iced...` overrides. Codex 0.171 defers an MCP server's tools: the request
/// offers `tool_search` and names the namespace `mcp__iced` with the server's instructions (which
/// say the role), and the model calls a tool as `{"type": "function_call", "namespace":
/// "mcp__iced", "name": "iced_submit"}` (the mock's mapping of `mcp__iced__iced_submit`). Without
/// `default_tools_approval_mode = "approve"` every call comes back "MCP tool call requires
/// approval, but approval policy is never".
#[test]
fn codex_builds_a_lane_through_the_mcp_server() {
    let Some(program) = crate::harness_codex_pi::codex() else {
        return;
    };
    let api = crate::mock_api::MockApi::start(vec![implementer(), validator()]);
    let h = crate::harness_codex_pi::codex_harness(&program, api);
    let (out, last) = h.build();
    assert_delivered_through_the_server(&h, &last, &out);
    let seen = h.api.seen();
    let namespace = |rule: &str| {
        let text = first_request(&seen, rule).body["input"].to_string();
        let at = text
            .find("- mcp__iced: ")
            .unwrap_or_else(|| panic!("no mcp__iced namespace offered to {rule}"));
        text[at..].lines().next().unwrap_or("").to_owned()
    };
    assert!(
        namespace("# Brief: implement").contains("iced, for a lane's implementer."),
        "{}",
        namespace("# Brief: implement")
    );
    assert!(
        namespace("# Validate:").contains("iced, for a validator or refuter."),
        "{}",
        namespace("# Validate:")
    );
}

/// SPEC 13: the entries `init --host` writes are the ones the real hosts read. Claude Code lists
/// `.mcp.json`'s `iced` as a project server (waiting for the person's approval, as every project
/// server does); Codex lists `.codex/config.toml`'s once its own config trusts the project, and
/// not before (what init's note says).
#[test]
fn the_hosts_read_the_entries_init_writes() {
    let env = crate::env::TestEnv::new();
    let home = env.outside("home");
    std::fs::create_dir_all(&home).unwrap();
    if let Some(claude) = claude() {
        env.iced_json(&["init", "--host", "claude"]).ok();
        let out = crate::env::run(
            std::process::Command::new(&claude)
                .args(["mcp", "get", "iced"])
                .current_dir(env.root())
                .env("HOME", &home),
        );
        assert_eq!(out.code, 0, "{out:#?}");
        for line in ["Scope: Project config", "Command: iced", "Args: mcp"] {
            assert!(out.stdout.contains(line), "{line}: {out:#?}");
        }
    }
    if let Some(codex) = crate::harness_codex_pi::codex() {
        env.iced_json(&["init", "--host", "codex"]).ok();
        let codex_home = env.outside("codex-home");
        std::fs::create_dir_all(&codex_home).unwrap();
        let servers = || {
            let out = crate::env::run(
                std::process::Command::new(&codex)
                    .args(["mcp", "list", "--json"])
                    .current_dir(env.root())
                    .env("HOME", &home)
                    .env("CODEX_HOME", &codex_home),
            );
            assert_eq!(out.code, 0, "{out:#?}");
            serde_json::from_str::<Value>(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:#?}"))
        };
        assert_eq!(
            servers(),
            json!([]),
            "an untrusted project's config is not read"
        );
        std::fs::write(
            codex_home.join("config.toml"),
            format!(
                "[projects.{}]\ntrust_level = \"trusted\"\n",
                serde_json::to_string(&env.root().display().to_string()).unwrap()
            ),
        )
        .unwrap();
        let listed = servers();
        assert_eq!(listed[0]["name"], "iced", "{listed:#}");
        assert_eq!(listed[0]["transport"]["command"], "iced", "{listed:#}");
        assert_eq!(listed[0]["transport"]["args"], json!(["mcp"]), "{listed:#}");
    }
}
