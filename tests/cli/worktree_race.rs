//! Git's worktree bookkeeping under one rule (SPEC 21.3, issue 36): a project run whose every lane
//! is judged by validators in sandboxes, stepped by two driver threads of one `build` and by
//! other iced processes (`implement step`, again and again, as cron and a host would) at once. Before the rule every
//! lane's sandbox was named `full-1` (git's entries passed from lane to lane), every sandbox made
//! ran `git worktree prune`, a sandbox was removed by its check and again by the delivery, and
//! nothing kept one repository's worktree gits apart: a git in a sandbox whose entry another
//! thread's prune or remove had taken failed ("index file smaller than expected", "not a git
//! repository"), the step refused with `io-error`, and the build ended or hung.

use crate::env::Run;
use crate::project::Project;
use serde_json::{json, Value};
use std::process::Stdio;

#[test]
fn two_driver_threads_and_a_second_call_add_and_remove_sandboxes_and_every_child_is_delivered() {
    let titles: Vec<String> = (1..=16).map(|i| format!("part {i} of the work")).collect();
    let titles: Vec<&str> = titles.iter().map(String::as_str).collect();
    let pass = crate::harness::PASS;
    let script = format!(
        "role implementer\ncommit src/{{lane}}.txt the work of {{lane}}\nreport-ok E1 E2\nrole validator\nreport {pass}\n"
    );
    let p = Project::new(
        &titles,
        &[],
        &script,
        json!({
            "pace": {"lanes": 8, "agents": 32},
            "build": {"drivers": 2},
            "land": {"mode": "none"},
            "verify": {"independent": true, "lenses": ["expectations", "failures", "rules"], "commands": []},
            "roles": {"validator": {"runner": "fake"}},
        }),
    );
    // Its lines go to files, read once it has ended: a pipe nobody reads meanwhile would fill.
    let (stdout, stderr) = (p.env.outside("build.out"), p.env.outside("build.err"));
    let file = |path: &std::path::Path| Stdio::from(std::fs::File::create(path).unwrap());
    let mut build = p
        .env
        .command()
        .args(["build", &p.id, "--json"])
        .stdout(file(&stdout))
        .stderr(file(&stderr))
        .spawn()
        .expect("iced build starts");
    // Beside it, other calls of iced: a step at a time, again and again while the build runs
    // (two at once, as cron and a host would), each step keyed and recorded as the build's own;
    // a step another call is doing is waited out (exit 4 or 0).
    let ended = std::sync::atomic::AtomicBool::new(false);
    let steps: Vec<Run> = std::thread::scope(|scope| {
        let stepper = || {
            let mut steps: Vec<Run> = Vec::new();
            while !ended.load(std::sync::atomic::Ordering::SeqCst) {
                let step = p.env.iced_json(&["implement", "step"]);
                let done = step.code != 0 && step.code != 4;
                steps.push(step);
                if done {
                    break;
                }
            }
            steps
        };
        let others = [scope.spawn(stepper), scope.spawn(stepper)];
        let _ = build.wait();
        ended.store(true, std::sync::atomic::Ordering::SeqCst);
        others
            .into_iter()
            .flat_map(|t| t.join().expect("a stepper"))
            .collect()
    });
    let status = build.wait().expect("the build ends");
    let out = Run {
        code: status.code().unwrap_or(-1),
        stdout: std::fs::read_to_string(&stdout).unwrap(),
        stderr: std::fs::read_to_string(&stderr).unwrap(),
    };
    let refused: Vec<&Run> = steps
        .iter()
        .filter(|s| s.code != 0 && s.code != 4)
        .collect();
    assert!(refused.is_empty(), "the second call refused: {refused:#?}");
    assert_eq!(out.code, 0, "the build:\n{out:#?}");
    let last: Value = serde_json::from_str(out.stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {out:#?}"));
    assert_eq!(last["status"], "delivered", "{out:#?}");
    let refusals: Vec<Value> = p
        .events()
        .into_iter()
        .filter(|e| e["event"] == "refusal")
        .collect();
    assert!(refusals.is_empty(), "{refusals:#?}");
    // Every sandbox went, with git's entry for it: nothing is left to prune.
    let listed = p.env.git_out(&["worktree", "list", "--porcelain"]);
    assert!(!listed.contains(".validators"), "{listed}");
    assert!(!listed.contains("prunable"), "{listed}");
}
