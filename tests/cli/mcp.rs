//! `iced mcp` (SPEC 20.18, issue 17): the real binary started as a Model Context Protocol server,
//! spoken to over its standard input and output as a client does (JSON-RPC, one message a line):
//! the tools each role is given, a host-driven run delivered through `iced_step` and `iced_receipt`
//! alone, with `fixtures/fake-agent` as the agent the host starts, and the implementer's tools
//! writing where the loop reads (`decisions.md`, the attempt's report) or refusing by name.

use crate::env::{fake_agent, TestEnv};
use crate::loop_e2e::{build, own_checks, str_of, worktree_of, WAIT};
use crate::snap::assert_read;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::Receiver;

/// A client of one `iced mcp` process.
struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    next_id: u64,
}

impl Client {
    /// `iced mcp <args>` in the repository, initialized as a client initializes it.
    fn start(env: &TestEnv, args: &[&str]) -> Client {
        Client::start_with(env, args, &[], None)
    }

    /// With `vars` in its environment, and in `cwd` instead of the repository when given.
    fn start_with(
        env: &TestEnv,
        args: &[&str],
        vars: &[(&str, &str)],
        cwd: Option<&std::path::Path>,
    ) -> Client {
        let mut cmd = env.command();
        cmd.arg("mcp").args(args);
        if let Some(dir) = cwd {
            cmd.current_dir(dir);
        }
        for (k, v) in vars {
            cmd.env(k, v);
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("iced mcp starts");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        let mut client = Client {
            child,
            stdin,
            lines,
            next_id: 0,
        };
        let init = client.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "iced-tests", "version": "1"}}),
        );
        assert_eq!(init["result"]["serverInfo"]["name"], "iced", "{init}");
        client.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        client
    }

    fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    /// One request and its response (messages without its id, notifications, are skipped).
    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let line = self
                .lines
                .recv_timeout(WAIT)
                .unwrap_or_else(|e| panic!("no answer to {method} within {WAIT:?}: {e}"));
            let message: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("not JSON on stdout ({e}): {line}"));
            if message["id"] == id {
                return message;
            }
        }
    }

    /// `tools/call`: the result (a tool error included).
    fn call(&mut self, tool: &str, arguments: Value) -> Value {
        let answer = self.request("tools/call", json!({"name": tool, "arguments": arguments}));
        answer
            .get("result")
            .cloned()
            .unwrap_or_else(|| panic!("{tool}: not a result: {answer}"))
    }

    /// A call that must succeed: its structured content (the verb's JSON).
    fn ok(&mut self, tool: &str, arguments: Value) -> Value {
        let result = self.call(tool, arguments);
        assert_ne!(result["isError"], true, "{tool}: {result:#}");
        let structured = result["structuredContent"].clone();
        let text = result["content"][0]["text"].as_str().expect("a text block");
        assert_eq!(
            serde_json::from_str::<Value>(text).unwrap(),
            structured,
            "the text block is the object"
        );
        structured
    }

    /// A call that must come back as a tool error with refusal `code`: the refusal.
    fn refused(&mut self, tool: &str, arguments: Value, code: &str) -> Value {
        let result = self.call(tool, arguments);
        assert_eq!(result["isError"], true, "{tool}: {result:#}");
        let refused = result["structuredContent"]["refused"].clone();
        assert_eq!(refused["code"], code, "{tool}: {result:#}");
        let text = result["content"][0]["text"].as_str().expect("a text block");
        for key in ["step", "reason", "remedy"] {
            let said = refused[key].as_str().expect(key);
            assert!(!said.is_empty() && text.contains(said), "{key}: {text}");
        }
        refused
    }

    fn tool_names(&mut self) -> Vec<String> {
        let list = self.request("tools/list", json!({}));
        list["result"]["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    }
}

impl Drop for Client {
    /// Closing its input ends the server; it must exit by itself, and cleanly.
    fn drop(&mut self) {
        drop(self.stdin.take());
        let start = std::time::Instant::now();
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => {
                    if !std::thread::panicking() {
                        assert!(status.success(), "iced mcp exited {status}");
                    }
                    return;
                }
                _ if start.elapsed() > WAIT => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    assert!(
                        std::thread::panicking(),
                        "iced mcp did not end when its input closed"
                    );
                    return;
                }
                _ => std::thread::sleep(std::time::Duration::from_millis(20)),
            }
        }
    }
}

/// A host-driven run of the buildable unit (own checks, no validators) and the `start_agent` of
/// its implementer, asked through `iced_step`.
fn host_started(env: &TestEnv, id: &str) -> (Client, Value) {
    build(env, id, &["--no-wait"], 0);
    let mut host = Client::start(env, &["--role", "host"]);
    let agent = host.ok("iced_step", json!({"until_host": true, "wait": 30}));
    assert_eq!(agent["action"], "start_agent", "{agent}");
    (host, agent)
}

/// The report's path from the root, as a small `start_agent` names it in `next`.
fn report_of(agent: &Value) -> String {
    let next = str_of(agent, "next");
    let from = next
        .find("iced implement receipt ")
        .expect("a receipt command")
        + 23;
    let to = next.find(" --until-host").expect("--until-host");
    next[from..to].to_owned()
}

/// Each role's tools, with their descriptions and input schemas, as a client lists them.
#[test]
fn each_role_lists_its_own_tools() {
    let env = TestEnv::initialized();
    let mut listed = String::new();
    for role in ["host", "implementer", "validator"] {
        let mut client = Client::start(&env, &["--role", role]);
        let list = client.request("tools/list", json!({}));
        listed.push_str(&format!(
            "--- {role}\n{}\n",
            serde_json::to_string_pretty(&list["result"]).unwrap()
        ));
    }
    assert_read!(&env, "tools_by_role", listed);
    // The refuter is a reader; a lane named in the environment makes an implementer.
    let mut refuter = Client::start(&env, &["--role", "refuter"]);
    assert_eq!(
        refuter.tool_names(),
        ["iced_status", "iced_run_show", "iced_handover"]
    );
    let mut lane = Client::start_with(&env, &[], &[("ICED_RUN", "r"), ("ICED_LANE", "l")], None);
    assert!(lane.tool_names().contains(&"iced_submit".to_owned()));
    let mut host = Client::start(&env, &[]);
    assert!(host.tool_names().contains(&"iced_step".to_owned()));
}

/// A host drives a unit to delivered with `iced_step` and `iced_receipt` alone, starting the
/// fake agent where `start_agent` says; a reader is refused the host's tools.
#[test]
fn a_host_delivers_a_unit_through_step_and_receipt_alone() {
    let (env, id) = TestEnv::buildable(own_checks(json!(["true"])));
    let (mut host, agent) = host_started(&env, &id);
    let report = report_of(&agent);
    let run = str_of(&agent, "run").to_owned();

    // The host starts its agent in the lane's worktree, as the brief says.
    let script = env.agent_script();
    std::fs::write(&script, "commit src/session.rs fixed\nreport-ok E1 E2\n").unwrap();
    let status = std::process::Command::new("bash")
        .arg(fake_agent())
        .arg(&script)
        .arg(env.path(&report))
        .current_dir(worktree_of(&env, &id))
        .env("ICED_RUN", &run)
        .env("ICED_LANE", &id)
        .status()
        .unwrap();
    assert!(status.success());

    let mut reader = Client::start(&env, &["--role", "validator"]);
    reader.refused("iced_receipt", json!({"path": report}), "tool-not-offered");

    let end = host.ok(
        "iced_receipt",
        json!({"path": report, "until_host": true, "wait": 60, "model": "fake"}),
    );
    assert_eq!(end["action"], "delivered", "{end:#}");
    let show = reader.ok("iced_run_show", json!({"run": run}));
    assert_eq!(show["lanes"][0]["stage"], "delivered", "{show:#}");
    let status = reader.ok("iced_status", json!({"id": id}));
    assert_eq!(status["status"], "done", "{status:#}");
}

/// The implementer's tools: a decision lands in the worktree's `decisions.md`; a malformed report
/// is a tool error naming the field and writes nothing; a good one is written where the receipt
/// reads it, and the host's receipt takes it.
#[test]
fn an_implementers_tools_write_where_the_loop_reads() {
    let (env, id) = TestEnv::buildable(own_checks(json!(["true"])));
    let (mut host, agent) = host_started(&env, &id);
    let report = env.path(&report_of(&agent));
    let run = str_of(&agent, "run").to_owned();
    let worktree = worktree_of(&env, &id);
    let state = || env.read_bytes(".iced/run/state.json");
    let before = state();

    let mut lane = Client::start(&env, &["--run", &run, "--lane", &id]);
    let logged = lane.ok(
        "iced_decision",
        json!({"decision": "refresh on every request", "why": "the expectations say so"}),
    );
    assert_eq!(logged["id"], id.as_str());
    let decisions =
        std::fs::read_to_string(worktree.join(format!("intent/{id}/decisions.md"))).unwrap();
    assert!(
        decisions
            .ends_with("- Decision: refresh on every request\n- Why: the expectations say so\n"),
        "{decisions}"
    );
    lane.refused(
        "iced_decision",
        json!({"decision": " ", "why": "x"}),
        "usage",
    );

    // Malformed: an unknown field, a forged one, a wrong kind; each names it and writes nothing.
    for (bad, code, named) in [
        (
            json!({"summary": "s", "evidence": [], "extra": 1}),
            "report-invalid",
            "extra",
        ),
        (
            json!({"summary": "s", "evidence": [], "verdict": "pass"}),
            "report-forged",
            "verdict",
        ),
        (json!({"evidence": []}), "report-invalid", "summary"),
        (
            json!({"summary": "s", "evidence": [{"expectation": "E1", "kind": "vibes", "ref": "r"}]}),
            "report-invalid",
            "vibes",
        ),
    ] {
        let refused = lane.refused("iced_submit", bad, code);
        assert!(str_of(&refused, "reason").contains(named), "{refused}");
        assert!(!report.exists(), "a refused report was written");
    }
    lane.refused(
        "iced_escalate",
        json!({"kind": "stuck", "message": "m", "proposal": "- [E3] x"}),
        "report-invalid",
    );
    assert!(!report.exists());
    assert_eq!(state(), before, "a tool call changed the state");

    // A host's tool is not an implementer's.
    lane.refused("iced_step", json!({}), "tool-not-offered");

    // The work, committed with the decision; then the report, where the receipt reads it.
    crate::env::git_at(&worktree, &["add", "-A"]);
    crate::loop_e2e::agent_commit(&worktree, "src/session.rs", "fixed\n");
    let good = json!({"summary": "sessions refresh on activity", "evidence": [
        {"expectation": "E1", "kind": "test", "ref": "tests/session.rs::refresh"},
        {"expectation": "E2", "kind": "test", "ref": "tests/session.rs::idle"}]});
    let submitted = lane.ok("iced_submit", good.clone());
    assert_eq!(submitted["attempt"], 1);
    assert!(crate::loop_e2e::same_file(
        str_of(&submitted, "report"),
        &report
    ));
    assert_eq!(
        serde_json::from_str::<Value>(&std::fs::read_to_string(&report).unwrap()).unwrap(),
        good
    );
    assert_eq!(crate::loop_e2e::mode(&report), 0o600);
    assert_eq!(state(), before, "submitting records nothing");

    let end = host.ok(
        "iced_receipt",
        json!({"path": report.display().to_string(), "until_host": true, "wait": 60}),
    );
    assert_eq!(end["action"], "delivered", "{end:#}");
    // The attempt is over: the lane's tools say so.
    lane.refused("iced_submit", good, "receipt-superseded");
}

/// Without a run and a lane, the implementer's tools cannot know where to write; a tool the role
/// is not given is refused. Both as the caller's model reads them (the refusal snapshots).
#[test]
fn an_implementer_without_a_lane_is_refused() {
    let env = TestEnv::initialized();
    let mut client = Client::start(&env, &["--role", "implementer"]);
    let args = json!({"summary": "s", "evidence": []});
    client.refused("iced_submit", args.clone(), "mcp-lane-unknown");
    assert_read!(
        &env,
        "refused_mcp-lane-unknown",
        serde_json::to_string_pretty(&client.call("iced_submit", args)).unwrap()
    );
    let mut reader = Client::start(&env, &["--role", "validator"]);
    reader.refused("iced_step", json!({}), "tool-not-offered");
    assert_read!(
        &env,
        "refused_tool-not-offered",
        serde_json::to_string_pretty(&reader.call("iced_step", json!({}))).unwrap()
    );
    let mut host = Client::start(&env, &["--role", "host"]);
    host.refused("iced_step", json!({"wait": 5}), "usage");
    let unknown = host.request(
        "tools/call",
        json!({"name": "iced_nothing", "arguments": {}}),
    );
    assert!(unknown["error"].is_object(), "{unknown}");
}

/// `iced_questions` is the report that asks: the host's receipt blocks the lane on the questions,
/// numbered by the loop, as a report written by hand would.
#[test]
fn an_implementers_questions_block_the_lane_for_a_person() {
    let (env, id) = TestEnv::buildable(own_checks(json!(["true"])));
    let (mut host, agent) = host_started(&env, &id);
    let report = env.path(&report_of(&agent));
    let run = str_of(&agent, "run").to_owned();
    let mut lane = Client::start_with(&env, &[], &[("ICED_RUN", &run), ("ICED_LANE", &id)], None);
    lane.refused(
        "iced_questions",
        json!({"questions": [], "extra": 1}),
        "usage",
    );
    lane.refused("iced_questions", json!({"questions": []}), "report-invalid");
    assert!(!report.exists());
    lane.ok(
        "iced_questions",
        json!({"questions": [{"text": "refresh on reads too?", "options": ["yes", "no"]}]}),
    );
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(written["summary"], "Questions for a person", "{written}");
    assert_eq!(written["evidence"], json!([]));

    let end = host.ok(
        "iced_receipt",
        json!({"path": report.display().to_string(), "until_host": true}),
    );
    assert_eq!(end["action"], "blocked", "{end:#}");
    let escalation = env.iced_json(&["escalation", "show", &id]).ok().json();
    assert_eq!(
        escalation["questions"][0]["text"], "refresh on reads too?",
        "{escalation:#}"
    );
}

/// SPEC 20.18: `--repo` names the repository a server serves wherever it was started (a harness
/// starts a lane's server in the lane's worktree); one that is not a folder is refused `usage`
/// before the server starts.
#[test]
fn a_server_serves_the_repository_repo_names() {
    let (env, id) = TestEnv::buildable(own_checks(json!(["true"])));
    let elsewhere = env.outside("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let root = env.root().display().to_string();
    let mut reader = Client::start_with(
        &env,
        &["--role", "validator", "--repo", &root],
        &[],
        Some(&elsewhere),
    );
    let status = reader.ok("iced_status", json!({"id": id}));
    assert_eq!(status["id"], id.as_str(), "{status:#}");
    let mut lost = Client::start_with(&env, &["--role", "validator"], &[], Some(&elsewhere));
    lost.refused("iced_status", json!({"id": id}), "not-initialized");
    let missing = env.outside("missing").display().to_string();
    let out = crate::env::run(
        env.command()
            .args(["mcp", "--repo", &missing, "--json"])
            .stdin(Stdio::null()),
    );
    let refused = out.refused(2, "usage");
    assert!(str_of(&refused, "reason").contains("--repo"), "{refused:#}");
}
