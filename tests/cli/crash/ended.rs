//! The crash suite, for a project run's ended lanes (SPEC 21.2): `iced build` killed after an
//! ended lane's `lane.json` is written and before the state drops the lane (failpoint
//! `ended-after-write`) resumes to delivery with nothing lost and nothing written twice.

use crate::loop_e2e::str_of;
use crate::project::Project;
use serde_json::{json, Value};
use std::os::unix::process::ExitStatusExt;

const QUICK: &str = "commit src/{lane}.txt the work of {lane}\nreport-ok E1 E2\n";

fn state(p: &Project) -> Value {
    serde_json::from_slice(&std::fs::read(p.env.path(".iced/run/state.json")).unwrap()).unwrap()
}

fn the_run(state: &Value) -> &Value {
    state["runs"].as_object().unwrap().values().next().unwrap()
}

#[test]
fn a_build_killed_between_an_ended_lane_s_file_and_the_state_resumes_to_one_delivery() {
    let p = Project::new(
        &["idle sessions end", "active sessions stay"],
        &[],
        QUICK,
        json!({"pace": {"lanes": 1}, "land": {"mode": "none"}}),
    );
    let (a, b) = (&p.children[0], &p.children[1]);
    let killed = p
        .env
        .command()
        .env("ICED_FAILPOINT", "ended-after-write")
        .args(["build", &p.id, "--json"])
        .output()
        .expect("iced runs");
    assert_eq!(
        killed.status.signal(),
        Some(9),
        "killed by its failpoint: {killed:?}"
    );
    let before = state(&p);
    let run = str_of(the_run(&before), "id").to_owned();
    let lane = &the_run(&before)["lanes"][0];
    assert!(
        lane.get("ended").is_none() && lane["steps"].is_array(),
        "the state still holds the lane whole: {lane:#}"
    );
    let file = p.env.path(&format!(".iced/run/{run}/{a}/lane.json"));
    let written: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(written["stage"], "delivered", "{written:#}");

    let out = p.env.iced_json(&["build", &p.id]);
    let last = crate::loop_e2e::last_line(&out);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    let after = state(&p);
    for (lane, child) in the_run(&after)["lanes"]
        .as_array()
        .unwrap()
        .iter()
        .zip([a, b])
    {
        assert_eq!(lane["id"], child.as_str());
        assert!(lane["ended"]["close"].is_string(), "{lane:#}");
        assert!(lane.get("steps").is_none(), "{lane:#}");
    }
    // The file holds the lane whole, each step of its attempt once.
    let whole: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let keys: Vec<(String, u64)> = whole["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (str_of(r, "step").to_owned(), r["attempt"].as_u64().unwrap()))
        .collect();
    let mut once = keys.clone();
    once.sort();
    once.dedup();
    assert_eq!(keys.len(), once.len(), "a step twice: {keys:?}");
    assert!(keys.iter().any(|(k, _)| k == "deliver"), "{keys:?}");
    // One implementer a lane, and `run show` lists each once.
    let starts = p.env.agent_starts();
    for child in [a, b] {
        let n = starts.iter().filter(|s| s.contains(child.as_str())).count();
        assert_eq!(n, 1, "{child}: {starts:#?}");
    }
    let shown = p.run_show(&run);
    let implementers: Vec<&str> = shown["agents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["step"] == "implement")
        .map(|e| str_of(e, "lane"))
        .collect();
    assert_eq!(implementers, [a.as_str(), b.as_str()], "{shown:#}");
    for child in [a, b] {
        let lane = Project::lane(&shown, child);
        assert!(
            lane["steps"].as_array().is_some_and(|s| !s.is_empty()),
            "{lane:#}"
        );
    }
}
