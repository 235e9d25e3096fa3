//! Snapshots of `iced implement step` in every action it answers (SPEC 20.2), of what
//! `implement receipt` answers, and of `iced run show` and `iced run handover` of a delivered and
//! a blocked run; with the refusals a host meets on the way (SPEC 20.x). One repository under the
//! host driver carries four units through the loop; a second one, under the process driver, shows
//! an agent at work.

use crate::env::{fake_runner, merge_json, TestEnv};
use crate::loop_e2e::{agent_commit, build, str_of, worktree_of, GOOD_REPORT, WAIT};
use crate::snap::{assert_read, assert_refused, both, json, json_block, text_block};
use crate::validation::PASS;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// `iced implement step --run <run> --json`; its object, after checking it exits `exit`.
fn step_json(env: &TestEnv, run: &str) -> Value {
    let out = env.iced_json(&["implement", "step", "--run", run]);
    assert!(matches!(out.code, 0 | 4), "implement step:\n{out:#?}");
    out.json()
}

/// Step `run` until its action is `action`, passing only `advanced` and `waiting` on the way.
fn step_until(env: &TestEnv, run: &str, action: &str) -> Value {
    let start = Instant::now();
    loop {
        let s = step_json(env, run);
        if s["action"] == action {
            return s;
        }
        assert!(
            matches!(s["action"].as_str(), Some("advanced" | "waiting")),
            "waiting for {action}, the run stopped somewhere else: {s}"
        );
        assert!(start.elapsed() < WAIT, "no {action} within {WAIT:?}: {s}");
        if s["action"] == "waiting" {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// A run of `id` created by `build --no-wait`; its id.
fn build_no_wait(env: &TestEnv, id: &str) -> String {
    let (_, last) = build(env, id, &["--no-wait"], 0);
    str_of(&last, "run").to_owned()
}

/// The `implement step --run <run>` arguments.
fn step_args(run: &str) -> [&str; 4] {
    ["implement", "step", "--run", run]
}

/// The host driver end to end: every action `implement step` answers, what `implement receipt`
/// answers, the refusals of receipts and answers, and the delivered and blocked runs' `run show`
/// and `run handover`.
#[test]
fn the_host_driver_reads_well_in_every_action() {
    // One agent at a time, so a second run waits on the ceiling; one independent validator; two
    // attempts, so the second unit blocks after its second empty receipt; no definition-of-done
    // commands, so no step waits on an activity and every answer is the same on every machine.
    let (env, a) = TestEnv::buildable(json!({
        "pace": {"agents": 1},
        "verify": {"independent": true, "lenses": ["full"], "commands": [], "maxAttempts": 2},
        "run": {"lockWaitSec": 0.2},
    }));
    let b = env.approved_unit("idle sessions end");
    let c = env.approved_unit("remember me");
    env.commit_all("two more units");

    // start_agent: the implementer. Asked again it answers the same, so text and JSON are of one
    // answer.
    let run_a = build_no_wait(&env, &a);
    assert_read!(
        &env,
        "step_start_agent_implementer",
        both(&env, &["implement", "step"])
    );
    let agent = step_json(&env, &run_a);
    let receipt = str_of(&agent, "receipt_path").to_owned();

    // What `implement receipt` refuses at once, recording nothing.
    let elsewhere = env.outside("report.json");
    std::fs::write(&elsewhere, GOOD_REPORT).unwrap();
    assert_refused!(
        &env,
        "receipt-path",
        3,
        &["implement", "receipt", elsewhere.to_str().unwrap()]
    );
    let report = |text: &str| std::fs::write(&receipt, text).unwrap();
    report(r#"{"summary": "done", "evidence": [], "confidence": 0.9}"#);
    assert_refused!(
        &env,
        "report-invalid",
        3,
        &["implement", "receipt", &receipt]
    );
    report(r#"{"summary": "done", "evidence": [], "verdict": "pass"}"#);
    assert_refused!(
        &env,
        "report-forged",
        3,
        &["implement", "receipt", &receipt]
    );
    report(&format!(
        r#"{{"summary": "{}", "evidence": []}}"#,
        "x".repeat(256 * 1024)
    ));
    assert_refused!(
        &env,
        "report-too-large",
        3,
        &["implement", "receipt", &receipt]
    );

    // waiting: a second run, on the ceiling; several live runs and none named is ambiguous.
    let run_b = build_no_wait(&env, &b);
    assert_read!(&env, "step_waiting_ceiling", both(&env, &step_args(&run_b)));
    assert_refused!(&env, "run-ambiguous", 3, &["implement", "step"]);

    // paused, and what pausing and resuming refuse.
    assert_refused!(
        &env,
        "time-invalid",
        3,
        &["run", "pause", &run_b, "--until", "tomorrow"]
    );
    env.iced_json(&["run", "pause", &run_b]).ok();
    assert_read!(&env, "step_paused", both(&env, &step_args(&run_b)));
    assert_refused!(
        &env,
        "pace-changed",
        3,
        &["run", "resume", &run_b, "--pace-agents", "2"]
    );
    env.iced_json(&["run", "resume", &run_b]).ok();

    // A unit edited under its live run: its brief no longer renders as it did.
    let unit_b = crate::env::unit_file(&b);
    let text_b = env.read(&unit_b);
    env.write(
        &unit_b,
        format!("{text_b}\n- [code] Sessions live in src/session.rs.\n"),
    );
    assert_refused!(&env, "inputs-changed", 3, &step_args(&run_b));
    env.write(&unit_b, text_b);

    // The state lock held by another process: refused once `run.lockWaitSec` is over.
    let mut holder = hold_the_lock(&env);
    assert_refused!(&env, "state-locked", 3, &step_args(&run_a));
    holder.kill().unwrap();
    holder.wait().unwrap();

    // advanced: the implementer's receipt, then the steps to the validator, one in text and one
    // in JSON (each answer comes once).
    agent_commit(&worktree_of(&env, &a), "src/session.rs", "fixed\n");
    report(GOOD_REPORT);
    // Two runs are live now: a receipt names its run.
    let receipt_args = ["implement", "receipt", &receipt, "--run", &run_a];
    let handed_in = env.iced(&receipt_args);
    assert_eq!(handed_in.code, 0, "{handed_in:#?}");
    assert_read!(
        &env,
        "receipt_advanced",
        text_block(&receipt_args, &handed_in)
    );
    let first = env.iced(&step_args(&run_a));
    assert!(first.stdout.contains(": advanced ("), "{first:#?}");
    let second = env.iced_json(&step_args(&run_a));
    assert_eq!(second.json()["action"], "advanced", "{second:#?}");
    assert_read!(
        &env,
        "step_advanced",
        format!(
            "{}\n{}",
            text_block(&step_args(&run_a), &first),
            json_block(&step_args(&run_a), &second)
        )
    );

    // start_agent: the validator, and what its answer may not be.
    let validator = step_until(&env, &run_a, "start_agent");
    assert_eq!(validator["role"], "validator", "{validator}");
    assert_read!(
        &env,
        "step_start_agent_validator",
        both(&env, &step_args(&run_a))
    );
    let answer = str_of(&validator, "receipt_path").to_owned();
    assert_refused!(
        &env,
        "answer-missing",
        3,
        &["implement", "receipt", &answer, "--run", &run_a]
    );
    std::fs::write(&answer, "x".repeat(256 * 1024 + 1)).unwrap();
    assert_refused!(
        &env,
        "answer-too-large",
        3,
        &["implement", "receipt", &answer, "--run", &run_a]
    );
    std::fs::write(&answer, PASS.replacen('{', r#"{"confidence": 0.9, "#, 1)).unwrap();
    assert_refused!(
        &env,
        "answer-invalid",
        3,
        &["implement", "receipt", &answer, "--run", &run_a]
    );
    std::fs::write(&answer, PASS.replacen('{', r#"{"finding_id": "X-F1", "#, 1)).unwrap();
    assert_refused!(
        &env,
        "answer-forged",
        3,
        &["implement", "receipt", &answer, "--run", &run_a]
    );
    std::fs::write(&answer, PASS).unwrap();
    assert_read!(
        &env,
        "receipt_answer",
        json(
            &env,
            &[
                "implement",
                "receipt",
                &answer,
                "--run",
                &run_a,
                "--model",
                "m-1",
                "--session",
                "s-1"
            ]
        )
    );

    // delivered (asked again of the ended run, it answers the same), and what a delivered run
    // refuses.
    step_until(&env, &run_a, "delivered");
    assert_read!(&env, "step_delivered", both(&env, &step_args(&run_a)));
    assert_refused!(&env, "unit-delivered", 3, &["build", &a]);
    assert_refused!(&env, "run-ended", 3, &["run", "pause", &run_a]);
    assert_read!(&env, "run_show_delivered", run_show(&env, &run_a));
    assert_read!(
        &env,
        "run_handover_delivered",
        both(&env, &["run", "handover", &run_a])
    );

    // The second run's implementer: a report with nothing committed does not verify; attempt 2
    // starts, and attempt 1's report is superseded.
    let agent_b = step_until(&env, &run_b, "start_agent");
    let receipt_1 = str_of(&agent_b, "receipt_path").to_owned();
    std::fs::write(&receipt_1, GOOD_REPORT).unwrap();
    env.iced_json(&["implement", "receipt", &receipt_1, "--run", &run_b])
        .ok();
    let second = step_until(&env, &run_b, "start_agent");
    assert_eq!(second["attempt"], 2, "{second}");
    assert_refused!(
        &env,
        "receipt-superseded",
        3,
        &["implement", "receipt", &receipt_1, "--run", &run_b]
    );
    // blocked: attempt 2 commits nothing either.
    let receipt_2 = str_of(&second, "receipt_path").to_owned();
    std::fs::write(&receipt_2, GOOD_REPORT).unwrap();
    env.iced_json(&["implement", "receipt", &receipt_2, "--run", &run_b])
        .ok();
    step_until(&env, &run_b, "blocked");
    assert_read!(&env, "step_blocked", both(&env, &step_args(&run_b)));
    assert_read!(&env, "run_show_blocked", run_show(&env, &run_b));
    assert_read!(
        &env,
        "run_handover_blocked",
        both(&env, &["run", "handover", &run_b])
    );

    // handback: the third unit's implementer hands the lane back.
    let run_c = build_no_wait(&env, &c);
    let agent_c = step_until(&env, &run_c, "start_agent");
    std::fs::write(
        str_of(&agent_c, "receipt_path"),
        r#"{"summary": "stopped", "evidence": [], "handback": {"reason": "E2 contradicts C1: an idle session cannot end while the password check is untouched"}}"#,
    )
    .unwrap();
    env.iced_json(&[
        "implement",
        "receipt",
        str_of(&agent_c, "receipt_path"),
        "--run",
        &run_c,
    ])
    .ok();
    step_until(&env, &run_c, "handback");
    assert_read!(&env, "step_handback", both(&env, &step_args(&run_c)));

    // The handover with no run named: every run in the state.
    assert_read!(&env, "run_handover_all", both(&env, &["run", "handover"]));
}

/// `nothing`: no live run; and the refusals of verbs that need one.
#[test]
fn with_no_run_the_step_says_nothing() {
    let env = TestEnv::initialized();
    assert_read!(&env, "step_nothing", both(&env, &["implement", "step"]));
    let path = env.outside("report.json");
    std::fs::write(&path, GOOD_REPORT).unwrap();
    assert_refused!(
        &env,
        "no-live-run",
        3,
        &["implement", "receipt", path.to_str().unwrap()]
    );
    assert_refused!(&env, "run-not-found", 3, &["run", "show", "run-of-nothing"]);
}

/// `waiting` on an agent at work, under the process driver: the fake agent waits for a file the
/// test makes once it has looked. With one agent allowed, admitting a second process-driven run
/// is refused meanwhile.
#[test]
fn a_process_agent_at_work_is_waited_for() {
    let (env, id) = TestEnv::buildable_with(|env| {
        let gate = env.outside("go");
        let mut config = fake_runner(
            env,
            &format!(
                "await-file {}\ncommit src/session.rs fixed\nreport-ok E1 E2\n",
                gate.display()
            ),
        );
        merge_json(
            &mut config,
            &json!({"pace": {"agents": 1}, "verify": {"independent": false, "commands": []}}),
        );
        config
    });
    let other = env.approved_unit("idle sessions end");
    env.commit_all("a second unit");
    let run = build_no_wait(&env, &id);
    assert_read!(&env, "step_waiting_agent", both(&env, &step_args(&run)));
    assert_refused!(&env, "ceiling-full", 3, &["build", &other]);
    std::fs::write(env.outside("go"), "").unwrap();
    step_until(&env, &run, "delivered");
    // Asked with no run once it has ended, the step names the latest run and how it stands: a
    // host whose call died after its run ended learns how (issue 15).
    assert_read!(
        &env,
        "step_nothing_after_a_run",
        both(&env, &["implement", "step"])
    );
}

/// `run show` of `run`: text, then JSON. Each step line of the text ends with the step's outcome
/// as JSON, cut at 160 characters: it is checked against the JSON's and replaced by a marker,
/// because where it is cut moves with the length of what the filters hide (a duration, a pid, the
/// temporary directory); the JSON half shows every outcome whole.
pub(crate) fn run_show(env: &TestEnv, run: &str) -> String {
    let args = ["run", "show", run];
    format!(
        "{}\n{}",
        run_show_text(env, run),
        json_block(&args, &env.iced_json(&args))
    )
}

/// The text half of [`run_show`].
pub(crate) fn run_show_text(env: &TestEnv, run: &str) -> String {
    let args = ["run", "show", run];
    let mut text_run = env.iced(&args);
    assert_eq!(text_run.code, 0, "{text_run:#?}");
    let shown = env.iced_json(&args).json();
    let lanes = shown["lanes"]
        .as_array()
        .or_else(|| shown["run"]["lanes"].as_array())
        .expect("lanes");
    let mut lines = Vec::new();
    for line in text_run.stdout.lines() {
        let kept = lanes.iter().find_map(|lane| {
            lane["steps"].as_array()?.iter().find_map(|r| {
                let head = format!(
                    "  ({}, {}, {}) ",
                    str_of(lane, "id"),
                    str_of(r, "step"),
                    r["attempt"]
                );
                let outcome = line.strip_prefix(&head)?.split_once(' ')?.1;
                let full = r["outcome"].to_string();
                assert_eq!(
                    outcome,
                    full.chars().take(160).collect::<String>(),
                    "{line}"
                );
                Some(line[..line.len() - outcome.len()].to_owned())
            })
        });
        match kept {
            Some(head) => lines.push(format!(
                "{head}[its outcome as JSON, cut at 160 characters]"
            )),
            None => lines.push(line.to_owned()),
        }
    }
    text_run.stdout = lines.join("\n") + "\n";
    text_block(&args, &text_run)
}

/// Another process holds the state lock, as an `iced` in the middle of a step does, having written
/// who it is into the lock file: a shell that takes the lock with `flock` on a descriptor of its
/// own and then becomes a `sleep`. Kill it to let the lock go.
fn hold_the_lock(env: &TestEnv) -> std::process::Child {
    let lock = env.path(".iced/run/lock");
    let ready = env.outside("locked");
    let child = std::process::Command::new("sh")
        .arg("-c")
        .arg(r#"exec 9>>"$0" && flock 9 && printf 'pid 4242 (iced implement step) since 2026-09-30T11:00:00Z\n' > "$0" && touch "$1" && exec sleep 60"#)
        .arg(&lock)
        .arg(&ready)
        .spawn()
        .expect("sh runs");
    let start = Instant::now();
    while !ready.exists() {
        assert!(start.elapsed() < WAIT, "the lock was never taken");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}
