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
