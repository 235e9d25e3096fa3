//! Issue 11, "the loop's words": what the run verbs accept and say is what a person would expect
//! (a relative receipt path, a run named by default, the handover of a finished run, the help).

use crate::env::{run, TestEnv};
use crate::loop_e2e::{
    agent_commit, build, host_run, logged_pid, own_checks, pid_gone, run_show, step_until, str_of,
    with_agent, GOOD_REPORT,
};
use serde_json::json;
use std::path::Path;

/// A unit built by the fake agent following `script` under `patch` to `status` (`delivered` exits
/// 0, anything else 4): the env, the unit, the run and `run show` of it.
fn built_to(
    script: &str,
    patch: serde_json::Value,
    status: &str,
) -> (TestEnv, String, String, serde_json::Value) {
    let (env, id) = with_agent(script, patch);
    let (out, last) = build(&env, &id, &[], if status == "delivered" { 0 } else { 4 });
    assert_eq!(last["status"], status, "{out:#?}");
    let run_id = str_of(&last, "run").to_owned();
    let shown = run_show(&env, &run_id);
    (env, id, run_id, shown)
}

/// `implement receipt` takes the report's path relative to where the host stands, from the
/// repository root or from a folder under it.
#[test]
fn a_receipt_path_relative_to_the_callers_folder_is_the_same_receipt() {
    for from_sub in [false, true] {
        let (env, id) = TestEnv::buildable(own_checks(json!([])));
        let (run_id, agent) = host_run(&env, &id);
        let receipt = str_of(&agent, "receipt_path").to_owned();
        agent_commit(
            Path::new(str_of(&agent, "worktree")),
            "src/session.rs",
            "fixed\n",
        );
        std::fs::write(&receipt, GOOD_REPORT).unwrap();
        let relative = format!(".iced/run/{run_id}/{id}/activities/implement-1/out/report.json");
        let handed = if from_sub {
            let sub = env.path("docs");
            std::fs::create_dir_all(&sub).unwrap();
            env.iced_json_in(&sub, &["implement", "receipt", &format!("../{relative}")])
        } else {
            env.iced_json(&["implement", "receipt", &relative])
        };
        let handed = handed.ok().json();
        assert_eq!(handed["action"], "advanced", "from a subfolder: {from_sub}");
        assert_eq!(handed["stage"], "receipt");
    }
}

/// `run show` and `run handover` need no id when the repository has one run: while it lives, and
/// (show) once it has left the state for its record; `run handover <id>` of a finished run hands
/// over how it ended instead of saying it is not found.
#[test]
fn run_show_and_handover_find_the_one_run_and_a_finished_one() {
    let (env, id) = TestEnv::buildable(own_checks(json!([])));
    let (run_id, agent) = host_run(&env, &id);
    let shown = env.iced_json(&["run", "show"]).ok().json();
    assert_eq!(shown["id"], run_id.as_str(), "{shown:#}");
    let handed = env.iced_json(&["run", "handover"]).ok().json();
    assert_eq!(handed["runs"][0]["id"], run_id.as_str(), "{handed:#}");

    let receipt = str_of(&agent, "receipt_path").to_owned();
    agent_commit(
        Path::new(str_of(&agent, "worktree")),
        "src/session.rs",
        "fixed\n",
    );
    std::fs::write(&receipt, GOOD_REPORT).unwrap();
    env.iced_json(&["implement", "receipt", &receipt]).ok();
    step_until(&env, |s| s["action"] == "delivered");

    let shown = env.iced_json(&["run", "show"]).ok().json();
    assert_eq!(shown["id"], run_id.as_str(), "{shown:#}");
    assert_eq!(shown["status"], "delivered");
    let handed = env.iced_json(&["run", "handover", &run_id]).ok();
    let handed = handed.json();
    assert_eq!(handed["runs"][0]["id"], run_id.as_str(), "{handed:#}");
    assert_eq!(handed["runs"][0]["status"], "delivered", "{handed:#}");
    assert!(
        handed["handover"]
            .as_str()
            .unwrap()
            .contains(&format!("It has ended: `iced run show {run_id}`")),
        "{handed:#}"
    );
}

/// With no run at all, `run show` says so and how to start one.
#[test]
fn run_show_without_any_run_says_how_to_start_one() {
    let (env, _id) = TestEnv::buildable(own_checks(json!([])));
    let refused = env.iced_json(&["run", "show"]).refused(3, "run-not-found");
    assert!(
        refused["remedy"]
            .as_str()
            .unwrap()
            .contains("iced build <id>"),
        "{refused:#}"
    );
}

/// `iced run --help` names every run verb.
#[test]
fn run_help_names_every_run_verb() {
    let env = TestEnv::new();
    let help = run(env.command().args(["run", "--help"]));
    // The first line says whose verb it is; the about follows a blank line.
    let about = help.stdout.lines().nth(2).unwrap_or_default().to_owned();
    for verb in [
        "list", "show", "pause", "resume", "abandon", "release", "discard", "arm", "retire",
        "handover",
    ] {
        assert!(about.contains(verb), "`{verb}` missing from: {about}");
    }
}

/// Ctrl-C on `iced build` (SIGINT to its process group, as a terminal sends it) stops the driver
/// only: it says that the agents keep running and what picks the run up, exits 130, and the
/// agent it left goes on; `iced build` again takes the run to delivery with that one agent.
#[test]
fn ctrl_c_on_build_says_the_agents_keep_running_and_build_picks_the_run_up() {
    use std::os::unix::process::CommandExt;
    use std::time::{Duration, Instant};
    // The agent works until the test lets it go, after the Ctrl-C: never a time the driver
    // could take longer than on a busy machine, ending the run before the signal.
    let (env, id) = crate::env::TestEnv::buildable_with(|env| {
        let script = format!(
            "await-file {}\ncommit src/session.rs fixed\nreport-ok E1 E2\n",
            env.outside("go").display()
        );
        let mut config = crate::env::fake_runner(env, &script);
        crate::env::merge_json(&mut config, &own_checks(json!([])));
        config
    });
    let go = env.outside("go");
    let child = env
        .command()
        .args(["build", &id])
        .process_group(0)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let give_up = Instant::now() + Duration::from_secs(30);
    while env.agent_starts().is_empty() {
        assert!(Instant::now() < give_up, "the agent never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let agent = logged_pid(&env.agent_starts()[0]);
    let group = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGINT).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(
        stderr.contains("its running agents keep running")
            && stderr.contains(&format!("`iced build {id}` picks it up again")),
        "{stderr}"
    );
    assert!(!pid_gone(agent), "the agent was stopped with the driver");
    std::fs::write(&go, "").unwrap();
    // The progress lines before it depend on when the signal came; what it says does not.
    let said = stderr.rsplit("\n\n").next().unwrap_or_default();
    crate::snap::assert_read!(
        &env,
        "build_interrupted",
        format!(
            "$ iced build <id>, then Ctrl-C\nexit 130\n----- stderr, its last lines -----\n{said}"
        )
    );

    let (done, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{done:#?}");
    assert_eq!(env.agent_starts().len(), 1, "{:?}", env.agent_starts());
}

/// A person's resume gives a blocked lane a fresh budget of `verify.maxAttempts` attempts, and
/// its reason counts them from the resume: never "attempt 3 of 2".
#[test]
fn a_resumed_lane_gets_a_fresh_budget_of_attempts_counted_from_the_resume() {
    let (env, id, run_id, _) = built_to(
        "commit src/session.rs fixed\nreport-ok E1 E2\n",
        json!({"verify": {"independent": false, "maxAttempts": 2, "commands": ["test -f needed.txt"]}}),
        "blocked",
    );
    assert_eq!(env.agent_starts().len(), 2);
    let reason = |env: &TestEnv| {
        let shown = run_show(env, &run_id);
        str_of(&shown["lanes"][0], "reason").to_owned()
    };
    assert!(
        reason(&env).starts_with("attempt 2 of 2 did not verify"),
        "{}",
        reason(&env)
    );

    // Resumed (by `iced build` again): two more attempts, then blocked again, counted so.
    let (_, last) = build(&env, &id, &[], 4);
    assert_eq!(last["status"], "blocked", "{last}");
    assert_eq!(env.agent_starts().len(), 4, "{:?}", env.agent_starts());
    assert!(
        reason(&env).starts_with("attempt 4 (2 of 2 since the resume) did not verify"),
        "{}",
        reason(&env)
    );
}

/// A lane delivered after a failed attempt does not keep that attempt's gaps as its reason: `run
/// show` of the delivered lane gives none.
#[test]
fn a_delivered_lane_keeps_no_stale_reason() {
    // Attempt 1 misses what the definition of done checks; attempt 2 has it.
    let (_, _, _, shown) = built_to(
        "attempt 1\ncommit src/session.rs fixed\nreport-ok E1 E2\nattempt 2\ncommit src/done.txt done\nreport-ok E1 E2\n",
        json!({"verify": {"independent": false, "maxAttempts": 3, "commands": ["test -f src/done.txt"]}}),
        "delivered",
    );
    assert_eq!(shown["lanes"][0]["attempt"], 2, "{shown:#}");
    assert!(shown["lanes"][0]["reason"].is_null(), "{shown:#}");
}

/// The event log of a host-driven run tells what happened and nothing else (issue 11, item 17):
/// no `owner_gone` when nothing died, and every `agent_end` after its `agent_start`.
#[test]
fn a_host_runs_events_say_only_what_happened() {
    let (env, id) = TestEnv::buildable(own_checks(json!([])));
    let (_, agent) = host_run(&env, &id);
    let receipt = str_of(&agent, "receipt_path").to_owned();
    agent_commit(
        Path::new(str_of(&agent, "worktree")),
        "src/session.rs",
        "fixed\n",
    );
    std::fs::write(&receipt, GOOD_REPORT).unwrap();
    env.iced_json(&["implement", "receipt", &receipt]).ok();
    step_until(&env, |s| s["action"] == "delivered");
    let events: Vec<serde_json::Value> = env
        .read(".iced/run/events.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let named = |e: &serde_json::Value, what: &str| e["event"] == what || e["type"] == what;
    assert!(
        !events.iter().any(|e| named(e, "owner_gone")),
        "{events:#?}"
    );
    let mut started = Vec::new();
    for e in &events {
        let who = (e["lane"].clone(), e["attempt"].clone(), e["role"].clone());
        if named(e, "agent_start") {
            started.push(who);
        } else if named(e, "agent_end") {
            assert!(
                started.contains(&who),
                "agent_end before its agent_start: {e}\n{events:#?}"
            );
        }
    }
}

/// An implementer that ran out of time: the lane's reason says so first, and `run show` says
/// "timed out", never "exit none" (issue 11, item 11).
#[test]
fn a_timed_out_implementer_is_named_as_timed_out() {
    let (env, _, run_id, shown) = built_to(
        "sleep 30\n",
        json!({"runners": {"fake": {"timeoutSec": 1}},
               "verify": {"independent": false, "maxAttempts": 1, "commands": []}}),
        "blocked",
    );
    let reason = str_of(&shown["lanes"][0], "reason");
    assert!(
        reason.starts_with("attempt 1 of 1 did not verify:\n- the implementer timed out after "),
        "{reason}"
    );
    let text = env.iced(&["run", "show", &run_id]).ok().stdout;
    let line = text
        .lines()
        .find(|l| l.contains("agent ") && l.contains(" implement attempt 1"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(line.ends_with(", timed out"), "{line}");
}

/// A definition-of-done program that admit found committed and that the lane's worktree no
/// longer has (its agent removed it): the gap says it could not start, and why. (One missing at
/// admit is refused there: `config_keys`.)
#[test]
fn a_definition_of_done_program_that_does_not_exist_could_not_start() {
    let (env, id) = with_agent(
        "git rm -q removed-check\ncommit src/session.rs fixed\nreport-ok E1 E2\n",
        json!({"verify": {"independent": false, "maxAttempts": 1, "commands": ["./removed-check"]}}),
    );
    env.write("removed-check", "#!/bin/sh\nexit 0\n");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        env.path("removed-check"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    env.commit_all("the check");
    let (out, last) = build(&env, &id, &[], 4);
    assert_eq!(last["status"], "blocked", "{out:#?}");
    let shown = run_show(&env, str_of(&last, "run"));
    let reason = str_of(&shown["lanes"][0], "reason");
    assert!(
        reason.contains("`./removed-check` could not start: "),
        "{reason}"
    );
}

/// Every `iced ...` command a refusal's remedy names is a command this iced has (issue 11, item
/// 14): each is run with `--help`, from every refusal snapshot.
#[test]
fn every_command_a_remedy_names_exists() {
    let env = TestEnv::new();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cli/snapshots");
    let mut named = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if !path.to_string_lossy().contains("__refused_") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for hint in text.lines().filter_map(|l| l.strip_prefix("hint: ")) {
            for (i, part) in hint.split('`').enumerate() {
                let Some(rest) = part.strip_prefix("iced ").filter(|_| i % 2 == 1) else {
                    continue;
                };
                let words: Vec<&str> = rest
                    .split_whitespace()
                    .take_while(|w| !w.starts_with(['<', '[', '-', '"']))
                    .collect();
                named.insert(words.join(" "));
            }
        }
    }
    assert!(named.len() > 5, "the reader finds the remedies: {named:?}");
    for command in &named {
        let mut args: Vec<&str> = command.split(' ').filter(|w| !w.is_empty()).collect();
        args.push("--help");
        let out = run(env.command().args(&args));
        assert_eq!(
            out.code, 0,
            "`iced {command}` is named by a remedy:\n{out:#?}"
        );
    }
}

/// `iced schema <name>` prints each shipped schema (the remedies point at it), as text and JSON.
#[test]
fn iced_schema_prints_every_shipped_schema() {
    let env = TestEnv::new();
    for name in ["config", "report", "validator", "state", "unit"] {
        let out = env.iced_json(&["schema", name]).ok().json();
        assert_eq!(
            out["$schema"], "https://json-schema.org/draft/2020-12/schema",
            "{name}"
        );
        let text = env.iced(&["schema", name]).ok().stdout;
        assert!(text.contains("\"$id\""), "{name}: {text}");
    }
}

/// A state file that does not parse: the remedy's commands work as printed. Reading it works,
/// and moving it aside as the remedy says lets the run verbs work again.
#[test]
fn a_damaged_state_files_remedy_works_as_printed() {
    let (env, _id) = TestEnv::buildable(own_checks(json!([])));
    std::fs::create_dir_all(env.path(".iced/run")).unwrap();
    std::fs::write(
        env.path(".iced/run/state.json"),
        "{\"schema\": 1, \"runs\": ",
    )
    .unwrap();
    let refused = env.iced_json(&["run", "list"]).refused(3, "state-invalid");
    let remedy = str_of(&refused, "remedy").to_owned();
    let commands: Vec<&str> = remedy
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|c| c.starts_with("cat ") || c.starts_with("mv "))
        .collect();
    assert_eq!(commands.len(), 2, "{remedy}");
    for command in commands {
        let argv: Vec<&str> = command.split_whitespace().collect();
        let status = std::process::Command::new(argv[0])
            .args(&argv[1..])
            .current_dir(env.root())
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "`{command}`");
    }
    env.iced_json(&["run", "list"]).ok();
}

/// A receipt that did not verify says what was missing in the step's own object (`missing`, one
/// gap each) and text, not only in the state (issue 11, item 16).
#[test]
fn a_failed_receipts_step_says_what_was_missing() {
    let (env, id) = with_agent(
        "commit src/session.rs fixed\nreport-ok E1 E2\n",
        json!({"verify": {"independent": false, "maxAttempts": 2, "commands": ["test -f needed.txt"]}}),
    );
    let (out, _) = build(&env, &id, &[], 4);
    let lines = crate::loop_e2e::json_lines(&out);
    let failed = lines
        .iter()
        .find(|l| str_of(l, "next").starts_with("the receipt did not verify"))
        .unwrap_or_else(|| panic!("{out:#?}"));
    assert_eq!(
        failed["missing"],
        json!(["`test -f needed.txt` exited 1, expected [0]"]),
        "{failed:#}"
    );
    let blocked = lines.iter().find(|l| l["action"] == "blocked").unwrap();
    assert!(
        blocked["missing"]
            .as_array()
            .unwrap()
            .contains(&json!("`test -f needed.txt` exited 1, expected [0]")),
        "{blocked:#}"
    );
    // Steps that lacked nothing say nothing of it.
    assert!(
        lines.iter().filter(|l| l.get("missing").is_some()).count() == 2,
        "{lines:#?}"
    );
}

/// The handover names a pause a person set with `--until`, and each live lane's attempts left
/// (issue 11, item 16).
#[test]
fn the_handover_names_a_pause_and_the_attempts_left() {
    let (env, id) = TestEnv::buildable(own_checks(json!([])));
    let (run_id, _) = host_run(&env, &id);
    env.iced_json(&["run", "pause", &run_id, "--until", "2099-01-01T00:00:00Z"])
        .ok();
    let text = env.iced(&["run", "handover"]).ok().stdout;
    assert!(
        text.contains("Paced: no agent starts before 2099-01-01T00:00:00Z"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "- {id}: implement (attempt 1, 2 more before it blocks)."
        )),
        "{text}"
    );
    crate::snap::assert_read!(
        &env,
        "run_handover_paced",
        crate::snap::both(&env, &["run", "handover"])
    );
}

/// Regression (item 16): evidence of `kind: "bogus"` was taken at the receipt and reported later
/// as "no evidence for E1". `implement receipt` refuses it at once, naming the entry and the word,
/// so the host has it fixed within the same attempt.
#[test]
fn evidence_of_an_unknown_kind_is_refused_at_the_receipt() {
    let (env, id) = TestEnv::buildable(own_checks(json!([])));
    let (_, agent) = host_run(&env, &id);
    agent_commit(
        Path::new(str_of(&agent, "worktree")),
        "src/session.rs",
        "fixed\n",
    );
    let receipt = str_of(&agent, "receipt_path").to_owned();
    std::fs::write(
        &receipt,
        r#"{"summary": "done", "evidence": [{"expectation": "E1", "kind": "test", "ref": "t"}, {"expectation": "E2", "kind": "bogus", "ref": "t"}]}"#,
    )
    .unwrap();
    let refused = env.iced_json(&["implement", "receipt", &receipt]);
    let refused = refused.json();
    assert_eq!(refused["refused"]["code"], "report-invalid", "{refused:#}");
    assert!(
        refused["refused"]["reason"]
            .as_str()
            .unwrap()
            .ends_with("evidence[1] (E2): kind `bogus` is not one of test, check, metric, manual"),
        "{refused:#}"
    );
    // Fixed within the same attempt, the receipt is taken.
    std::fs::write(&receipt, GOOD_REPORT).unwrap();
    let taken = env
        .iced_json(&["implement", "receipt", &receipt])
        .ok()
        .json();
    assert_eq!(taken["action"], "advanced", "{taken:#}");
}
