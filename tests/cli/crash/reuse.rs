//! The crash suite, for a spare worktree a later lane takes (SPEC 20.4, 23.2): a project run of
//! three children under `land.mode: none`, one lane at a time, so lanes 2 and 3 each take the
//! worktree the lane before delivered. `iced build` (or `iced implement step`) killed after the
//! spare was switched to the lane branch, after it was moved, before the worktree step's record,
//! and around the delivery that offers the spare, resumes to delivery: each lane takes the spare
//! it was given once (the same spare after the kill, never another, never two lanes one), each
//! lane's branch holds exactly its own work, one implementer a lane, no record left started, and
//! git lists the checkout and one clean worktree at the end.

use super::each_in_parallel;
use crate::loop_e2e::str_of;
use crate::project::Project;
use crate::spares::{
    assert_clean, assert_own_work, events, files_under, project_with, taken, worktrees, WORK,
};
use serde_json::Value;
use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

/// `iced <args> --json` with the environment variable `failpoint` (`ICED_FAILPOINT` and its
/// value): killed by SIGKILL or not.
fn killed(p: &Project, args: &[&str], failpoint: (&str, &str)) -> bool {
    let out = p
        .env
        .command()
        .args(args)
        .arg("--json")
        .env(failpoint.0, failpoint.1)
        .output()
        .expect("iced runs");
    out.status.signal() == Some(9)
}

fn the_run(p: &Project) -> String {
    let state: Value = serde_json::from_str(&p.env.read(".iced/run/state.json")).unwrap();
    let runs = state["runs"].as_object().unwrap();
    assert_eq!(runs.len(), 1, "{state:#}");
    runs.keys().next().unwrap().clone()
}

/// `iced build` to delivery, at most three calls.
fn build_to_delivery(p: &Project, context: &str) {
    for _ in 0..3 {
        let out = p.env.iced_json(&["build", &p.id]);
        assert_eq!(out.code, 0, "{context}: {out:#?}");
        if crate::loop_e2e::last_line(&out)["status"] == "delivered" {
            return;
        }
    }
    panic!("{context}: three `iced build` calls did not deliver the run");
}

/// What every kill must leave once the run is delivered.
fn assert_reused_once(p: &Project, context: &str) {
    let run = the_run(p);
    let state: Value = serde_json::from_str(&p.env.read(".iced/run/state.json")).unwrap();
    let the = &state["runs"][&run];
    assert_eq!(the["status"], "delivered", "{context}: {the:#}");
    assert!(
        the.get("spares").is_none(),
        "{context}: a spare is left: {the:#}"
    );
    assert_own_work(p);
    // One implementer a lane.
    let starts = p.env.agent_starts();
    for child in &p.children {
        let n = starts
            .iter()
            .filter(|s| s.contains(&format!(" lane={child} ")))
            .count();
        assert_eq!(
            n, 1,
            "{context}: {child} started {n} implementers: {starts:#?}"
        );
    }
    // No record left started, in the state or in an ended lane's file.
    let shown = p.run_show(&run);
    for child in &p.children {
        for r in Project::lane(&shown, child)["steps"].as_array().unwrap() {
            assert_ne!(r["status"], "started", "{context}: {child}: {r}");
        }
    }
    // Each worktree step done once; lanes 2 and 3 took the worktree of the lane before, the same
    // spare they were given before the kill.
    let paths: Vec<String> = p
        .children
        .iter()
        .map(|c| {
            crate::loop_e2e::worktree_of(&p.env, c)
                .display()
                .to_string()
        })
        .collect();
    let expected: Vec<(String, Option<String>)> = p
        .children
        .iter()
        .enumerate()
        .map(|(k, c)| (c.clone(), (k > 0).then(|| paths[k - 1].clone())))
        .collect();
    assert_eq!(
        taken(p),
        expected,
        "{context}: what each worktree step took"
    );
    let kept: Vec<Value> = events(p)
        .into_iter()
        .filter(|e| e["event"] == "worktree_kept")
        .collect();
    assert!(kept.is_empty(), "{context}: {kept:#?}");
    // The checkout and the last lane's worktree, clean, with only its own ignored file.
    let listed = worktrees(p);
    assert_eq!(listed.len(), 2, "{context}: {listed:?}");
    let last = p.children.last().unwrap();
    assert!(
        crate::loop_e2e::same_file(&listed[1].0.display().to_string(), paths[2].as_ref()),
        "{context}: {listed:?}"
    );
    assert_clean(&listed[1].0);
    assert_eq!(
        files_under(&listed[1].0.join("cache")),
        [format!("{last}.o")],
        "{context}"
    );
}

/// `iced build` killed with `failpoint`, then built again to delivery.
fn build_killed(failpoint: (&str, &str)) {
    let p = project_with(3, 1, WORK);
    let context = format!("`iced build` with {}={}", failpoint.0, failpoint.1);
    assert!(
        killed(&p, &["build", &p.id], failpoint),
        "{context}: not killed there"
    );
    build_to_delivery(&p, &context);
    assert_reused_once(&p, &context);
}

/// `iced implement step` killed with `failpoint` (armed on every call until one dies), then
/// stepped to delivery. The implementer sleeps a little, so `build --no-wait` leaves the run at
/// the first lane's agent.
fn step_killed(failpoint: (&str, &str)) {
    let p = project_with(3, 1, &format!("sleep 0.2\n{WORK}"));
    let context = format!("`iced implement step` with {}={}", failpoint.0, failpoint.1);
    let created = p.env.iced_json(&["build", &p.id, "--no-wait"]);
    assert_eq!(created.code, 0, "{context}: {created:#?}");
    let mut was_killed = false;
    let give_up = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(Instant::now() < give_up, "{context}: not delivered in 60 s");
        let mut call = p.env.command();
        call.args(["implement", "step", "--json"]);
        if !was_killed {
            call.env(failpoint.0, failpoint.1);
        }
        let out = call.output().expect("iced runs");
        if out.status.signal() == Some(9) {
            assert!(!was_killed, "{context}: killed without a failpoint");
            was_killed = true;
            continue;
        }
        assert!(out.status.success(), "{context}: {out:?}");
        let report: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
        match str_of(&report, "action") {
            "delivered" => break,
            "waiting" => std::thread::sleep(Duration::from_millis(50)),
            "advanced" => {}
            other => panic!("{context}: {other}: {report}"),
        }
    }
    assert!(was_killed, "{context}: no call was killed there");
    assert_reused_once(&p, &context);
}

#[test]
fn build_killed_at_each_place_of_a_spare_s_reuse_resumes_to_one_delivery_a_lane() {
    // Each a literal pair, so the walk's list of failpoints killed elsewhere finds it here.
    let cases: &[(&str, &str)] = &[
        ("ICED_FAILPOINT", "worktree-reuse-after-switch"),
        ("ICED_FAILPOINT", "worktree-reuse-after-switch:2"),
        ("ICED_FAILPOINT", "worktree-reuse-after-move"),
        ("ICED_FAILPOINT", "worktree-reuse-after-move:2"),
        // The worktree step's record not saved after a reuse.
        ("ICED_FAILPOINT", "worktree-after-add:2"),
        // The delivery that offers a spare: before its save, and after it.
        ("ICED_FAILPOINT", "deliver-after-commit"),
        ("ICED_FAILPOINT", "deliver-after-record"),
        ("ICED_FAILPOINT", "deliver-after-record:2"),
    ];
    each_in_parallel("build killed around a reuse", cases, 3, |&fp| {
        build_killed(fp)
    });
}

#[test]
fn implement_step_killed_at_each_place_of_a_spare_s_reuse_resumes_to_one_delivery_a_lane() {
    let cases: &[(&str, &str)] = &[
        ("ICED_FAILPOINT", "worktree-reuse-after-switch"),
        ("ICED_FAILPOINT", "worktree-reuse-after-move"),
    ];
    each_in_parallel("implement step killed around a reuse", cases, 2, |&fp| {
        step_killed(fp)
    });
}
