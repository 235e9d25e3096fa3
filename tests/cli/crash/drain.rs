//! `iced drain` killed (SIGKILL) between two units and inside one (SPEC 20.13): a drain run again
//! takes up the run the killed one left, builds every unit once, and no agent runs twice.

use super::each_in_parallel;
use crate::env::{fake_runner, merge_json, TestEnv};
use serde_json::{json, Value};
use std::os::unix::process::ExitStatusExt;

/// Every lane's implementer commits a file of its own and reports both expectations.
const AGENT: &str = "commit src/{lane}.txt done\nreport-ok E1 E2\n";

/// Three approved, committed units and the fake agent as their implementer.
fn three_units() -> (TestEnv, Vec<String>) {
    let env = TestEnv::initialized();
    let mut config = fake_runner(&env, AGENT);
    merge_json(
        &mut config,
        &json!({"verify": {"independent": false, "commands": []}}),
    );
    env.patch_config(&config);
    let units = ["one", "two", "three"]
        .iter()
        .map(|t| env.approved_unit(&format!("drained {t}")))
        .collect();
    env.commit_all("approve");
    (env, units)
}

/// `iced drain --json`, killed at `failpoint`.
fn drain_killed_at(env: &TestEnv, failpoint: &str) {
    let out = env
        .command()
        .env("ICED_FAILPOINT", failpoint)
        .args(["drain", "--json"])
        .output()
        .expect("iced runs");
    assert_eq!(
        out.status.signal(),
        Some(9),
        "not killed at {failpoint}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// After the kill, a drain run again ends with every unit delivered by one run, each implementer
/// started once, and nothing left running.
fn drained_once(env: &TestEnv, units: &[String], what: &str) -> Value {
    let out = env.iced_json(&["drain"]);
    assert_eq!(out.code, 0, "{what}: {out:#?}");
    let summary = out.json();
    assert_eq!(summary["stopped"], "empty", "{what}: {summary}");
    let state: Value = serde_json::from_str(&env.read(".iced/run/state.json")).unwrap();
    for unit in units {
        let runs: Vec<&Value> = state["runs"]
            .as_object()
            .unwrap()
            .values()
            .filter(|r| r["unit"] == unit.as_str())
            .collect();
        assert_eq!(runs.len(), 1, "{what}: one run of {unit}: {runs:?}");
        assert_eq!(runs[0]["status"], "delivered", "{what}: {unit}");
        let starts = env
            .agent_starts()
            .iter()
            .filter(|l| l.contains(&format!(" lane={unit} ")))
            .count();
        assert_eq!(starts, 1, "{what}: the agent of {unit} ran {starts} times");
    }
    summary
}

/// Killed between the first and the second unit, and between the second and the third: the run
/// again builds only what is left, naming the delivered units as skipped.
#[test]
fn a_drain_killed_between_units_builds_each_unit_once() {
    for nth in [1, 2] {
        let (env, units) = three_units();
        if nth == 1 {
            let out = env
                .command()
                .env("ICED_FAILPOINT", "drain-between-units")
                .args(["drain", "--json"])
                .output()
                .expect("iced runs");
            assert_eq!(out.status.signal(), Some(9), "not killed: {out:?}");
        } else {
            drain_killed_at(&env, &format!("drain-between-units:{nth}"));
        }
        assert_eq!(env.agent_starts().len(), nth, "{nth} units before the kill");
        let summary = drained_once(&env, &units, &format!("after unit {nth}"));
        assert_eq!(summary["units"], 3 - nth);
        let skipped: Vec<&str> = summary["skipped"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["code"].as_str().unwrap())
            .collect();
        assert_eq!(skipped, vec!["unit-delivered"; nth], "{summary}");
    }
}

/// Killed inside a unit's run, at each of its side effects: the drain run again takes up that run
/// (`resumed`) and goes on; no agent runs twice.
#[test]
fn a_drain_killed_inside_a_unit_takes_its_run_up_again() {
    let points = [
        "admit-after-claim",
        "admit-after-state",
        "brief-after-write",
        "worktree-after-add",
        "launch-after-spawn",
        "observe-before-record",
        "receipt-after-record",
        "deliver-after-commit",
        "deliver-after-record",
        "end-before-release",
    ];
    each_in_parallel("drain kills", &points, 2, |point| {
        let (env, units) = three_units();
        drain_killed_at(&env, point);
        let summary = drained_once(&env, &units, point);
        let resumed = summary["delivered"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["resumed"] == true)
            .count();
        // A kill before the run was saved leaves nothing to take up; after it, the run is.
        let left_a_run = !matches!(*point, "admit-after-claim" | "end-before-release");
        assert_eq!(resumed, usize::from(left_a_run), "{point}: {summary}");
    });
}
