//! One `iced build` stepping a project run with helper threads (SPEC 20.1, `build.drivers`):
//! agents that answer at once, so lanes' steps are ready together and the threads contend for
//! them, and a local landing into the person's checkout, one lane at a time (SPEC 23.2). Nothing
//! is done twice and every child lands once.

use crate::loop_e2e::{build, str_of};
use crate::project::Project;
use serde_json::{json, Value};
use std::collections::BTreeMap;

#[test]
fn threads_stepping_one_project_run_do_every_step_once_and_land_each_child_once() {
    let titles = [
        "idle sessions end",
        "active sessions stay",
        "the end is logged",
        "sessions are counted",
        "the count is shown",
        "old sessions are purged",
    ];
    let p = Project::new(
        &titles,
        &[],
        "commit src/{lane}.txt the work of {lane}\nreport-ok E1 E2\n",
        json!({
            "pace": {"lanes": 4},
            "build": {"drivers": 4},
            // The person's checkout holds the target: each landing merges into it.
            "land": {"mode": "merge", "strategy": "merge", "remote": null},
        }),
    );
    let (out, last) = build(&p.env, &p.id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    for c in &p.children {
        assert!(p.landed(c), "{c} did not land");
        let commits = p
            .env
            .git_out(&["log", "--format=%H", "main", "--", &format!("src/{c}.txt")]);
        assert_eq!(commits.lines().count(), 1, "{c} landed more than once");
    }
    assert!(
        p.env.git_out(&["status", "--porcelain"]).is_empty(),
        "the person's checkout is left clean"
    );
    // One implementer a lane, and each step of a lane recorded done once.
    let mut implementers: BTreeMap<String, usize> = BTreeMap::new();
    for start in p.env.agent_starts() {
        if start.contains("role=implementer") {
            let lane = start.split(' ').nth(2).unwrap_or_default().to_owned();
            *implementers.entry(lane).or_default() += 1;
        }
    }
    assert_eq!(implementers.len(), titles.len(), "{implementers:?}");
    assert!(implementers.values().all(|&n| n == 1), "{implementers:?}");
    let mut done: BTreeMap<(String, String, u64), usize> = BTreeMap::new();
    for e in p.events().iter().filter(|e| e["event"] == "step_done") {
        let key = (
            str_of(e, "lane").to_owned(),
            str_of(e, "step").to_owned(),
            e["attempt"].as_u64().unwrap_or_default(),
        );
        *done.entry(key).or_default() += 1;
    }
    let twice: Vec<_> = done.iter().filter(|(_, &n)| n > 1).collect();
    assert!(twice.is_empty(), "steps done twice: {twice:?}");
    assert!(
        done.keys().any(|(_, step, _)| step.starts_with("land-")),
        "{done:?}"
    );
}

/// Issue 36: a step a helper thread refused was dropped. Its record stayed `started` by the live
/// `build` (the helper shares its pid), so every later step found "another call is doing" it and
/// the build waited forever. Now the refusal ends the build, with its reason, as the driver's own
/// would; the step, whose owner has ended, is taken up by the next call, and the run delivers.
#[test]
fn a_refusal_on_a_helper_thread_ends_the_build_with_its_reason() {
    let titles = [
        "idle sessions end",
        "active sessions stay",
        "the end is logged",
        "sessions are counted",
        "the count is shown",
        "old sessions are purged",
    ];
    let p = Project::new(
        &titles,
        &[],
        "commit src/{lane}.txt the work of {lane}\nreport-ok E1 E2\n",
        json!({"pace": {"lanes": 4}, "build": {"drivers": 4}, "land": {"mode": "none"}}),
    );
    // The first step a helper thread acts on is refused; the driver's own are not.
    let out = crate::env::run(
        p.env
            .command()
            .args(["build", &p.id])
            .env("ICED_FAILPOINT_REFUSE", "act"),
    );
    // The steps done before it are printed as they come, in an order the threads choose: the
    // snapshot is the refusal, from its first line.
    let refusal = out
        .stderr
        .find("error: ")
        .map(|at| &out.stderr[at..])
        .unwrap_or_else(|| panic!("no refusal:\n{out:#?}"));
    crate::snap::assert_read!(
        &p.env,
        "build_helper_refused",
        format!(
            "iced build <project> (a helper thread's step refused)\nexit {}\n----- stderr, from the refusal -----\n{refusal}",
            out.code
        )
    );
    let refusals: Vec<Value> = p
        .events()
        .into_iter()
        .filter(|e| e["event"] == "refusal")
        .collect();
    assert_eq!(refusals.len(), 1, "{refusals:#?}");
    assert_eq!(refusals[0]["code"], "io-error");
    // The step it left is taken up by the next call: every child is delivered.
    let (out, last) = build(&p.env, &p.id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    assert!(
        p.events().iter().any(|e| e["event"] == "owner_gone"),
        "the refused step was taken up as one whose owner ended"
    );
}
