//! A project run's ended lanes leave the state (SPEC 21.2, issue 16): each delivered lane is kept
//! in `state.json` in its ended form, its whole self in `.iced/run/<run>/<lane>/lane.json`, so the
//! state's size follows the lanes alive and waiting, not those that ended; and `run show`, the
//! handover and the run record still show every lane whole.

use crate::loop_e2e::str_of;
use crate::project::Project;
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

/// An ended lane's line in the state is shorter than this (its id and branch name the project and
/// the child: about 200 bytes here); a lane whole is over a kilobyte.
const SHORT_LINE: u64 = 320;

/// What a lane's ended form takes beyond its waiting form (its attempt and close): under this.
const ENDED_OVER_WAITING: u64 = 100;

/// Each lane commits its own file and reports at once.
const QUICK: &str = "commit src/{lane}.txt the work of {lane}\nreport-ok E1 E2\n";

fn state(p: &Project) -> (u64, Value) {
    let bytes = std::fs::read(p.env.path(".iced/run/state.json")).expect("a state file");
    (
        bytes.len() as u64,
        serde_json::from_slice(&bytes).expect("the state parses"),
    )
}

/// The lanes of the one run in the state.
fn lanes(state: &Value) -> Vec<Value> {
    let runs = state["runs"].as_object().expect("runs");
    assert_eq!(runs.len(), 1, "{state:#}");
    runs.values().next().unwrap()["lanes"]
        .as_array()
        .expect("lanes")
        .clone()
}

/// Six children built one lane at a time with `land.mode: none`, one `implement step` at a time:
/// the state's size never grows with the lanes that ended (its largest with four or more ended is
/// no larger than with at most one), each ended lane is in its ended form with its close commit,
/// its `lane.json` holds it whole (0600), and `run show`, the handover and the run record show
/// every lane whole.
#[test]
fn a_project_s_ended_lanes_leave_the_state_and_every_view_still_shows_them() {
    let titles = [
        "idle sessions end",
        "active sessions stay",
        "the end is logged",
        "the log is rotated",
        "rotation is dated",
        "old logs are pruned",
    ];
    let p = Project::new(
        &titles,
        &[],
        QUICK,
        json!({"pace": {"lanes": 1}, "land": {"mode": "none"}}),
    );
    let out = p.env.iced_json(&["build", &p.id, "--no-wait"]);
    assert!(out.code == 0 || out.code == 4, "{out:#?}");
    // One lane at work; the others have not started: each in its waiting form on a line of its
    // own, what admit gave it and no more.
    let (_, st) = state(&p);
    let waiting: Vec<Value> = lanes(&st)
        .into_iter()
        .filter(|l| l["waiting"] == true)
        .collect();
    assert_eq!(waiting.len(), titles.len() - 1, "{st:#}");
    for lane in &waiting {
        assert!(
            lane.get("steps").is_none() && lane["stage"] == "brief",
            "{lane}"
        );
    }
    let text = std::fs::read_to_string(p.env.path(".iced/run/state.json")).unwrap();
    let lines = text.lines().filter(|l| l.contains(r#""waiting":true"#));
    assert_eq!(lines.count(), titles.len() - 1, "{text}");
    // (size, lanes ended) after each step.
    let mut seen: Vec<(u64, usize)> = Vec::new();
    let start = Instant::now();
    let last = loop {
        let out = p.env.iced_json(&["implement", "step"]);
        assert!(out.code == 0 || out.code == 4, "{out:#?}");
        let step = out.json();
        let (size, st) = state(&p);
        let ended = lanes(&st)
            .iter()
            .filter(|l| l["stage"] == "delivered")
            .count();
        seen.push((size, ended));
        if step["action"] == "delivered" {
            break step;
        }
        assert!(
            !matches!(
                str_of(&step, "action"),
                "blocked" | "handback" | "nothing" | "paused"
            ),
            "{step}"
        );
        assert!(start.elapsed() < Duration::from_secs(240), "{step}");
        if step["action"] == "waiting" {
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let run = str_of(&last, "run").to_owned();
    let largest = |pick: &dyn Fn(usize) -> bool| {
        seen.iter()
            .filter(|(_, e)| pick(*e))
            .map(|(s, _)| *s)
            .max()
            .expect("steps seen")
    };
    let early = largest(&|e| e <= 1);
    let late = largest(&|e| e >= 4);
    // A lane that ended takes the line of its ended form where its waiting form was (SPEC 21.2):
    // a few dozen bytes more each, never a whole lane (over a kilobyte here).
    assert!(
        late <= early + 5 * ENDED_OVER_WAITING,
        "the state grew with ended lanes: {late} bytes with four or more ended, {early} with at most one: {seen:?}"
    );
    let text = std::fs::read_to_string(p.env.path(".iced/run/state.json")).unwrap();
    let short: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(r#""ended":{"#))
        .collect();
    assert_eq!(short.len(), titles.len(), "one line a lane: {text}");
    assert!(
        short.iter().all(|l| (l.len() as u64) < SHORT_LINE),
        "{short:#?}"
    );

    let (_, st) = state(&p);
    let ended = lanes(&st);
    assert_eq!(ended.len(), titles.len());
    for (lane, child) in ended.iter().zip(&p.children) {
        assert_eq!(lane["id"], child.as_str());
        assert_eq!(lane["stage"], "delivered", "{lane}");
        assert!(lane.get("steps").is_none(), "{lane}");
        let close = str_of(&lane["ended"], "close");
        assert_eq!(
            p.env
                .git_out(&["rev-parse", &format!("iced/{}/{child}", p.id)])
                .trim(),
            close,
            "the close is the tip of the lane's branch"
        );
        let file = p.env.path(&format!(".iced/run/{run}/{child}/lane.json"));
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{}", file.display());
        let whole: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        assert_eq!(whole["id"], child.as_str());
        assert!(
            whole["steps"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["step"] == "deliver" && r["outcome"]["commit"] == close),
            "{whole:#}"
        );
    }

    // What people read shows every lane whole.
    let shown = p.run_show(&run);
    for child in &p.children {
        let lane = Project::lane(&shown, child);
        assert_eq!(lane["stage"], "delivered", "{lane}");
        assert!(
            lane["steps"].as_array().is_some_and(|s| s.len() >= 4),
            "{lane}"
        );
    }
    let implementers = shown["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .filter(|a| a["step"] == "implement")
        .count();
    assert_eq!(implementers, titles.len(), "{shown:#}");
    let text = p.env.iced(&["run", "show", &run]).ok().stdout;
    for child in &p.children {
        assert!(text.contains(child.as_str()), "{text}");
    }
    let handover = p.env.iced_json(&["run", "handover", &run]).ok().json();
    let listed: Vec<&str> = handover["runs"][0]["lanes"]
        .as_array()
        .expect("the handover's lanes")
        .iter()
        .map(|l| str_of(l, "id"))
        .collect();
    assert_eq!(listed, p.children, "{handover:#}");
    let record: Value = serde_json::from_slice(
        &std::fs::read(p.env.path(&format!(".iced/run/{run}/record.json"))).unwrap(),
    )
    .unwrap();
    for lane in record["run"]["lanes"].as_array().unwrap() {
        assert!(lane.get("ended").is_none(), "the record holds it whole");
        assert!(!lane["steps"].as_array().unwrap().is_empty(), "{lane}");
    }
    // `status` reads each child's status from its close, kept in the ended form.
    let status = p.env.iced_json(&["status", &p.children[0]]).ok().json();
    assert_eq!(status["status"], "done", "{status:#}");
    assert_eq!(status["run"]["stage"], "delivered", "{status:#}");
}
