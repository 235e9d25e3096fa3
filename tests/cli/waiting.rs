//! How `iced build` waits on a running activity (SPEC 20.1): it wakes when the run's state or an
//! activity's outcome changes, not on a timer, and prints a `--json` line per change.

use crate::loop_e2e::{build, json_lines, with_agent};
use serde_json::json;
use std::time::{Duration, Instant};

/// Regression: `build --json` polled every 200 ms and printed a line per poll, so an agent that
/// ran 3 seconds gave some fifteen identical `waiting` lines (311 for a minute).
#[test]
fn build_json_prints_a_line_per_change_while_an_agent_runs() {
    let (env, id) = with_agent(
        "sleep 3\ncommit src/session.rs fixed\nreport-ok E1 E2\n",
        json!({"verify": {"independent": false, "commands": []}}),
    );
    let started = Instant::now();
    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    // The agent did run its 3 seconds: the build waited on it.
    assert!(started.elapsed() >= Duration::from_secs(3), "{out:#?}");

    let lines = json_lines(&out);
    let waiting = lines.iter().filter(|l| l["action"] == "waiting").count();
    // One line for the wait (two, should its reason change on the way), not one per look.
    assert!(
        (1..=2).contains(&waiting),
        "{waiting} waiting lines:\n{}",
        out.stdout
    );
    assert!(
        lines.len() <= 10,
        "{} lines for one lane:\n{}",
        lines.len(),
        out.stdout
    );
    for pair in lines.windows(2) {
        assert_ne!(pair[0], pair[1], "a line repeated:\n{}", out.stdout);
    }
}

/// A waiting `implement step` starts no process (issue 36): every step renders each live lane's
/// brief again to check its inputs, and its decision log at the lane's base commit, read through a
/// `git cat-file` at every call, is kept in the run's folder once read. A kept file that is not
/// whole (torn by a crash) is never trusted: the step reads git again, keeps it anew, and still
/// waits, its brief unchanged.
#[test]
fn a_waiting_step_starts_no_git_and_a_torn_kept_answer_is_read_again() {
    let (env, id) = crate::env::TestEnv::buildable_with(|env| {
        let script = format!(
            "await-file {}\ncommit src/session.rs fixed\nreport-ok E1 E2\n",
            env.outside("go").display()
        );
        let mut config = crate::env::fake_runner(env, &script);
        crate::env::merge_json(
            &mut config,
            &json!({"verify": {"independent": false, "commands": []}}),
        );
        config
    });
    let (_, last) = build(&env, &id, &["--no-wait"], 0);
    assert_eq!(last["action"], "waiting", "{last}");
    let run = last["run"].as_str().unwrap().to_owned();
    let log = env.outside("git.log");
    let path = crate::env::git_shim(
        &env.outside("bin"),
        &format!("printf '%s\\n' \"$*\" >> '{}'\n", log.display()),
    );
    let step = || {
        let out =
            crate::env::run(
                env.command()
                    .env("PATH", &path)
                    .args(["implement", "step", "--json"]),
            );
        assert_eq!(out.json()["action"], "waiting", "{out:#?}");
    };
    let gits = || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    step();
    assert_eq!(gits(), Vec::<String>::new(), "a waiting step ran git");

    // The kept answer, cut short as a crash could leave it.
    let kept: Vec<std::path::PathBuf> =
        std::fs::read_dir(env.path(&format!(".iced/run/{run}/at-commit")))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    let whole = std::fs::read(&kept[0]).unwrap();
    std::fs::write(&kept[0], &whole[..whole.len() - 1]).unwrap();
    step();
    assert_eq!(gits(), ["cat-file --batch"], "read again from git, once");
    assert_eq!(std::fs::read(&kept[0]).unwrap(), whole, "kept anew, whole");
    step();
    assert_eq!(gits().len(), 1, "and not read again");
    std::fs::write(env.outside("go"), "").unwrap();
}
