//! Agents in a box (SPEC 24.12): an agent that ignores every instruction and goes for the checkout,
//! the trust store, `main`, git's hooks and its supervisor gets a permission error for each, and
//! nothing it tried lands or runs. Each attempt is the fake agent's `try`: the command, its exit
//! code and what it said, logged where the test reads them.

use crate::env::TestEnv;
use crate::survivors::alive;
use crate::validation::{build_to_end, section, validated, FAIL_S2, PASS};
use serde_json::json;
use std::path::Path;

/// What each `try` of the agent did: (exit code, command, what it printed on stderr).
fn attempts(log: &Path) -> Vec<(i32, String, String)> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut out: Vec<(i32, String, String)> = Vec::new();
    for line in text.lines() {
        if let Some(said) = line.strip_prefix("  ") {
            let last = out.last_mut().expect("a try line first");
            last.2.push_str(said);
            last.2.push('\n');
        } else {
            let (code, command) = line.split_once(' ').expect("<code> <command>");
            out.push((
                code.parse().expect("an exit code"),
                command.to_owned(),
                String::new(),
            ));
        }
    }
    out
}

/// Every attempt failed, for want of permission (Landlock's EACCES or EPERM; git names its lock).
fn assert_all_refused(log: &Path, expected: usize) {
    let tries = attempts(log);
    assert_eq!(tries.len(), expected, "{tries:#?}");
    for (code, command, said) in &tries {
        assert_ne!(*code, 0, "`{command}` went through: {said}");
        assert!(
            [
                "ermission denied",
                "not permitted",
                "cannot lock",
                "could not lock"
            ]
            .iter()
            .any(|denied| said.contains(denied)),
            "`{command}` failed for another reason: {said}"
        );
    }
}

/// The hostile implementer's attempts on everything outside its worktree, `{log}` the file the
/// attempts go to.
fn hostile_implementer(env: &TestEnv, id: &str, marker: &Path) -> String {
    let root = env.root().display();
    let hooks = env.agent_dir().join("hooks");
    crate::hostile_git_config::plant_hooks(
        &hooks,
        &[
            "post-checkout",
            "post-merge",
            "post-commit",
            "reference-transaction",
        ],
        marker,
    );
    let store = env.outside("config").join("iced/trust.json");
    let iced = env!("CARGO_BIN_EXE_iced");
    let config_home = env.outside("config").display().to_string();
    let lane = format!("{root}/.iced/run/$ICED_RUN/$ICED_LANE");
    let checkouts = "env -u GIT_DIR -u GIT_WORK_TREE git";
    let main = env.git_out(&["rev-parse", "main"]);
    let main = main.trim();
    let object = format!("{root}/.git/objects/{}/{}", &main[..2], &main[2..]);
    [
        format!("printf x >> {root}/.iced/config.json"),
        format!("printf x >> {root}/intent/{id}/iced.md"),
        format!("printf x >> {root}/.iced/run/state.json"),
        format!("printf x >> {}", store.display()),
        format!("cd {root} && XDG_CONFIG_HOME={config_home} {iced} trust"),
        // Its own git is where `GIT_DIR` points (SPEC 24.12); the repository's, without it.
        format!("{checkouts} update-ref refs/heads/main HEAD"),
        format!("{checkouts} config core.hooksPath {}", hooks.display()),
        // An object the checkout holds: changing its mode is not a write, changing it is.
        format!("chmod u+w {object} && printf x >> {object}"),
        format!("rm -f {object}"),
        format!(
            "cp {}/post-merge {root}/.git/hooks/post-merge",
            hooks.display()
        ),
        "kill -9 $SUPERVISOR".to_owned(),
        // The loop's records beside its answer's folder (SPEC 21.1): its own activity's, the
        // validator's after it, its brief.
        format!("printf '{{}}' > {lane}/activities/implement-1/child.json"),
        format!("mkdir {lane}/activities/validate-full-1"),
        format!("printf x >> {lane}/brief-1.md"),
    ]
    .iter()
    .map(|command| format!("try {{log}} {command}\n"))
    .collect()
}

/// Issue 34's first five failures, from one implementer: its writes to the checkout's config, its
/// unit, the state and the trust store, its `iced trust`, its move of `main`, its hooks and its
/// kill of its supervisor all fail, as do its writes of the loop's records beside its answer's
/// folder; its escapees die with its activity; the run blocks on the validator's finding with
/// `main` where it was, and no hook ever ran.
#[test]
fn a_hostile_implementer_is_refused_everything_outside_its_worktree() {
    let marker_dir = tempfile::tempdir().unwrap();
    let marker = marker_dir.path().join("hook-ran.txt");
    let (env, id) = validated("", &["full"], json!({"verify": {"maxAttempts": 1}}));
    let log = env.agent_dir().join("tries.txt");
    let escapees = env.agent_dir().join("escapees.txt");
    let attempts_script =
        hostile_implementer(&env, &id, &marker).replace("{log}", &log.display().to_string());
    let script = section(
        "*",
        "implementer",
        "*",
        &format!(
            "commit src/session.rs sessions refresh on activity\n{attempts_script}escape-setsid {}\nreport-ok E1 E2",
            escapees.display()
        ),
    ) + &section("*", "validator", "*", &format!("report {FAIL_S2}"));
    crate::validation::set_script(&env, &id, &script);
    let main = env.git_out(&["rev-parse", "main"]);
    let config = env.read(".iced/config.json");
    let unit = env.read(&format!("intent/{id}/iced.md"));
    let store = std::fs::read(env.outside("config").join("iced/trust.json")).unwrap();

    let (_, run) = build_to_end(&env, &id, 4, "blocked");

    assert_all_refused(&log, 14);
    assert_eq!(env.git_out(&["rev-parse", "main"]), main, "main moved");
    assert_eq!(env.read(".iced/config.json"), config);
    assert_eq!(env.read(&format!("intent/{id}/iced.md")), unit);
    assert_eq!(
        std::fs::read(env.outside("config").join("iced/trust.json")).unwrap(),
        store
    );
    let hooks_path = std::process::Command::new("git")
        .args(["config", "--get", "core.hooksPath"])
        .current_dir(env.root())
        .output()
        .unwrap();
    assert!(hooks_path.stdout.is_empty(), "a hooks path was set");
    assert!(!env.path(".git/hooks/post-merge").exists());
    assert!(!marker.exists(), "a hook the agent planted ran");
    // Its supervisor lived to write the outcome, and killed what the agent left running.
    let outcome =
        crate::validation::lane_dir(&env, &run, &id).join("activities/implement-1/outcome.json");
    assert!(
        outcome.exists(),
        "no outcome: the supervisor did not finish"
    );
    let pids: Vec<u32> = std::fs::read_to_string(&escapees)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 2);
    assert!(pids.iter().all(|p| !alive(*p)), "an escapee survived");
}

/// The same attempts with the person's `agents.unconfined`: the file writes and the move of
/// `main` go through, which is what the test above sees refused (it can fail).
#[test]
fn without_confinement_the_same_attempts_go_through() {
    let marker_dir = tempfile::tempdir().unwrap();
    let (env, id) = validated("", &["full"], json!({"verify": {"maxAttempts": 1}}));
    env.write_user_config(&json!({"agents": {"unconfined": true}}));
    let log = env.agent_dir().join("tries.txt");
    let tries: String = hostile_implementer(&env, &id, &marker_dir.path().join("m"))
        .lines()
        // Its kill and its `iced trust` would end or refuse the run, and its write to the state
        // would damage it: only what leaves the run going.
        .filter(|l| {
            !["SUPERVISOR", " trust", "state.json", "ICED_RUN", "objects/"]
                .iter()
                .any(|w| l.contains(w))
        })
        .map(|l| l.replace("{log}", &log.display().to_string()) + "\n")
        .collect();
    let script = section(
        "*",
        "implementer",
        "*",
        &format!("commit src/a.rs a\n{tries}report-ok E1 E2"),
    ) + &section("*", "validator", "*", &format!("report {FAIL_S2}"));
    crate::validation::set_script(&env, &id, &script);
    let main = env.git_out(&["rev-parse", "main"]);
    // The unit changed under the run: the loop refuses to go on (`inputs-changed`), too late
    // for `main`.
    let out = env.iced_json(&["build", &id]);
    assert_eq!(out.code, 3, "{out:#?}");
    // The refusal may come while the agent still works: its outcome says it has ended.
    let runs = env.path(".iced/run");
    crate::loop_e2e::wait_for("the implementer's outcome", || {
        std::fs::read_dir(&runs).unwrap().flatten().any(|run| {
            run.path()
                .join(&id)
                .join("activities/implement-1/outcome.json")
                .exists()
        })
    });
    let tries = attempts(&log);
    assert_eq!(tries.len(), 6, "{tries:#?}");
    assert!(tries.iter().all(|(code, _, _)| *code == 0), "{tries:#?}");
    assert_ne!(
        env.git_out(&["rev-parse", "main"]),
        main,
        "main did not move"
    );
}

/// A validator is read-only by construction: its writes to the checkout, to the lane's worktree
/// and to the checkout's config fail, as do its writes of its activity's records beside its
/// answer's folder (its fingerprint, its outcome), and its pass still counts (it did its job: it
/// read).
#[test]
fn a_validator_writes_only_its_sandbox() {
    let (env, id) = validated("", &["full"], json!({}));
    let log = env.agent_dir().join("tries.txt");
    let root = env.root().display().to_string();
    let worktree = crate::loop_e2e::worktree_of(&env, &id);
    let tries = [
        format!("printf x > {root}/validator-was-here.txt"),
        format!("printf x >> {root}/.iced/config.json"),
        format!("printf x > {}/ignored.txt", worktree.display()),
        format!("printf x > {root}/.iced/run/$ICED_RUN/$ICED_LANE/activities/validate-full-1/fingerprint.json"),
        format!("printf '{{}}' > {root}/.iced/run/$ICED_RUN/$ICED_LANE/activities/validate-full-1/outcome.json"),
    ]
    .iter()
    .map(|c| format!("try {} {c}\n", log.display()))
    .collect::<String>();
    let script = crate::validation::implementer("")
        + &section("*", "validator", "*", &format!("{tries}report {PASS}"));
    crate::validation::set_script(&env, &id, &script);
    build_to_end(&env, &id, 0, "delivered");
    assert_all_refused(&log, 5);
    assert!(!env.path("validator-was-here.txt").exists());
    assert!(!worktree.join("ignored.txt").exists());
}

/// SPEC 24.12 "Where it is not available": with no Landlock (simulated: the kernel's ABI read as
/// 0, then as 4, which has no signal scoping) `build` refuses before anything changes, naming what
/// is missing and what the person can do; no agent starts. The person's `agents.unconfined` lets
/// the same build deliver.
#[test]
fn with_confinement_unavailable_no_agent_starts() {
    let (env, id) = validated(
        &crate::validation::implementer(""),
        &[],
        json!({"verify": {"independent": false}}),
    );
    let args = ["build", id.as_str()];
    let run = |abi: &str, json: bool| {
        let mut command = env.command();
        command.env("ICED_TEST_LANDLOCK_ABI", abi).args(args);
        if json {
            command.arg("--json");
        }
        crate::env::run(&mut command)
    };
    let blocks = ["0", "4"]
        .iter()
        .map(|abi| {
            crate::snap::refusal_blocks(
                &args,
                &run(abi, false),
                &run(abi, true),
                3,
                "confinement-unavailable",
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    crate::snap::assert_read!(&env, "refused_confinement-unavailable", blocks);
    assert!(env.agent_starts().is_empty(), "an agent started");
    assert!(
        !env.path(".iced/run/state.json").exists(),
        "the refused build wrote a state"
    );

    env.write_user_config(&json!({"agents": {"unconfined": true, "writable": [env.agent_dir()]}}));
    let out = run("0", true);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(env.agent_starts().len(), 1);
    // It says so: the agent's start, `run show` and the handover.
    let events = env.read(".iced/run/events.jsonl");
    let start = events
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|e| e["event"] == "agent_start")
        .expect("an agent_start event");
    assert_eq!(start["confined"], false, "{start}");
    let said = "agents run unconfined: your user config says agents.unconfined";
    for verb in [["run", "show"], ["run", "handover"]] {
        let text = env.iced(&verb).ok();
        assert!(text.stdout.contains(said), "{verb:?}: {}", text.stdout);
        assert_eq!(env.iced_json(&verb).ok().json()["agents_unconfined"], true);
    }
    // Confined, none of it.
    env.write_user_config(&json!({"agents": {"writable": [env.agent_dir()]}}));
    assert!(!env.iced(&["run", "show"]).ok().stdout.contains(said));
}

/// A planner is confined to where its draft goes: its writes to the checkout (a file, the config)
/// fail, nothing of them is there, and its draft is taken as any other (the loop's own check of
/// what a planner changed never has anything to refuse).
#[test]
fn a_planner_writes_only_its_draft() {
    let env = crate::auto_plan::planning("", 3);
    let log = env.agent_dir().join("tries.txt");
    let root = env.root().display().to_string();
    let tries: String = [
        format!("printf x > {root}/src-sneaky.txt"),
        format!("printf x >> {root}/.iced/config.json"),
    ]
    .iter()
    .map(|c| format!("try {} {c}\n", log.display()))
    .collect();
    let planned = env.outside("planned.md").display().to_string();
    std::fs::write(
        env.agent_script(),
        format!(
            "role planner\n{tries}draft-body {planned}\nrole plan-reviewer\n{}\n",
            crate::auto_plan::PASS
        ),
    )
    .unwrap();
    let config = env.read(".iced/config.json");
    crate::auto_plan::auto_plan(&env, "session timeout for idle users", 4);
    assert_all_refused(&log, 2);
    assert!(!env.path("src-sneaky.txt").exists());
    assert_eq!(env.read(".iced/config.json"), config);
    let show = env.iced_json(&["run", "show"]).json();
    let reason = show["lanes"][0]["reason"].as_str().unwrap_or_default();
    assert!(!reason.contains("plan-draft-refused"), "{show:#}");
    assert_eq!(crate::auto_plan::starts(&env, "planner", ""), 1);
}
