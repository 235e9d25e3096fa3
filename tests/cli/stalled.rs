//! The build's watchdog (SPEC 20.1, issue 36): a step another call is doing, which a `build`
//! waits on, is said once it has made no progress for longer than its bound (an event and a
//! line), never waited on silently. The call holding the step here is stopped for good inside it
//! (a failpoint that hangs): to every other call it is a live call doing that step.

use crate::env::{fake_runner, merge_json, TestEnv};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};

/// Read `child`'s stream line by line until one satisfies `found`; every line read.
fn lines_until(stream: impl std::io::Read, found: impl Fn(&str) -> bool) -> Vec<String> {
    let mut seen = Vec::new();
    for line in BufReader::new(stream).lines() {
        let line = line.expect("a line");
        let done = found(&line);
        seen.push(line);
        if done {
            return seen;
        }
    }
    panic!("the stream ended first: {seen:#?}");
}

fn stop(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn a_build_says_when_the_step_it_waits_on_has_made_no_progress_past_its_bound() {
    let (env, id) = TestEnv::buildable_with(|env| {
        let mut config = fake_runner(env, "commit src/a.txt a\nreport-ok E1 E2\n");
        merge_json(
            &mut config,
            &json!({"verify": {"independent": false, "commands": []}}),
        );
        config
    });
    // The first build stops for good inside its worktree step, after git made the worktree.
    let mut stuck = env
        .command()
        .args(["build", &id, "--json"])
        .env("ICED_FAILPOINT_HANG", "worktree-after-add")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("iced build starts");
    let err = stuck.stderr.take().expect("its stderr");
    lines_until(err, |l| {
        l.contains("failpoint `worktree-after-add`: hanging")
    });
    // A second build of the run waits on that step; with a bound of 0 s it says so at once.
    let mut waiting = env
        .command()
        .args(["build", &id, "--json"])
        .env("ICED_STALL_SEC", "0")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("iced build starts");
    let out = waiting.stdout.take().expect("its stdout");
    let lines = lines_until(out, |l| l.contains("made no progress"));
    stop(waiting);
    stop(stuck);
    let said: Value = serde_json::from_str(lines.last().unwrap()).unwrap();
    crate::snap::assert_read!(
        &env,
        "build_step_stalled",
        format!(
            "iced build <id> (its worktree step held by a stuck call; ICED_STALL_SEC=0)\n----- the line it printed -----\n{}\n",
            serde_json::to_string_pretty(&said).unwrap()
        )
    );
    let events: Vec<Value> = env
        .read(".iced/run/events.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|e: &Value| e["event"] == "step_stalled")
        .collect();
    assert_eq!(events.len(), 1, "{events:#?}");
    assert_eq!(events[0]["step"], "worktree");
    assert_eq!(events[0]["lane"], id.as_str());
}
