//! One `iced build` stepping a project run with helper threads (SPEC 20.1, `build.drivers`):
//! agents that answer at once, so lanes' steps are ready together and the threads contend for
//! them, and a local landing into the person's checkout, one lane at a time (SPEC 23.2). Nothing
//! is done twice and every child lands once.

use crate::loop_e2e::{build, str_of};
use crate::project::Project;
use serde_json::json;
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
