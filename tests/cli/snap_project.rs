//! Snapshots of a project run (SPEC 23.6): `iced run show`, `iced run handover` and `implement
//! step` while a handed-back lane holds its siblings, and after a landing conflict; with the
//! refusals of `run release` and `run discard`. One repository, a bare remote, three children
//! built by the fake agent under the process driver.

use crate::env::{fake_runner, merge_json, TestEnv, GOOD_BODY};
use crate::landing::add_remote;
use crate::loop_e2e::{build, str_of};
use crate::snap::{assert_read, assert_refused, both};
use crate::snap_step::{run_show, run_show_text};
use serde_json::json;

#[test]
fn a_project_run_reads_well() {
    let env = TestEnv::initialized();
    add_remote(&env);
    let project = env.approved_unit("project sessions that end");
    let children: Vec<String> = [
        "idle sessions end",
        "active sessions stay",
        "the end is logged",
    ]
    .iter()
    .map(|title| {
        let id = env.iced_json(&["child", &project, title]).ok().json()["id"]
            .as_str()
            .unwrap()
            .to_owned();
        env.set_body(&id, GOOD_BODY);
        env.iced_json(&["approve", &id, "--yes"]).ok();
        id
    })
    .collect();
    let (held, first, second) = (&children[0], &children[1], &children[2]);
    // The first child hands its lane back once the third has started (all three are active),
    // then lets the other two go on: they wait for it, so neither lands before the handback is
    // recorded (the loop steps lanes in order, the first lane first). The two each rewrite
    // README.md their own way, so the second to land conflicts.
    let handed_back = env.agent_dir().join("handed-back");
    let script = format!(
        "lane {held}\nawait-start {second}\nhandback E2 cannot hold without a change to C1\nwrite {marker} yes\nexit 0\nlane *\nawait-file {marker}\ncommit README.md the readme as {{lane}} wrote it\nreport-ok E1 E2\n",
        marker = handed_back.display()
    );
    let mut config = fake_runner(&env, &script);
    merge_json(
        &mut config,
        &json!({
            "pace": {"lanes": 3, "agents": 3},
            "verify": {"independent": false, "commands": [{"argv": ["true"], "timeoutSec": 30}]},
            "land": {"mode": "merge", "strategy": "merge", "remote": "origin"},
        }),
    );
    env.patch_config(&config);
    env.commit_all("a project of three children");
    env.git(&["push", "-q", "origin", "main"]);

    // Held: the handed-back lane holds the two others before their landing.
    let (out, last) = build(&env, &project, &[], 4);
    assert_eq!(last["status"], "blocked", "{out:#?}");
    let run = str_of(&last, "run").to_owned();
    assert_read!(
        &env,
        "step_project_held",
        both(&env, &["implement", "step", "--run", &run])
    );
    assert_read!(&env, "run_show_project_held", run_show(&env, &run));
    assert_read!(
        &env,
        "run_handover_project_held",
        both(&env, &["run", "handover", &run])
    );
    assert_refused!(&env, "lane-not-held", 3, &["run", "release", &run, first]);
    assert_refused!(
        &env,
        "lane-not-found",
        3,
        &["run", "release", &run, "nowhere"]
    );
    assert_refused!(
        &env,
        "lane-ambiguous",
        3,
        &["run", "release", &run, "sessions"]
    );

    // Released: the first sibling lands, the second conflicts with it and blocks in its landing.
    env.iced_json(&["run", "release", &run, held]).ok();
    let (out, last) = build(&env, &project, &[], 4);
    assert_eq!(last["status"], "blocked", "{out:#?}");
    assert_read!(&env, "run_show_project_conflict", run_show_text(&env, &run));
    assert_read!(
        &env,
        "run_handover_project_conflict",
        both(&env, &["run", "handover", &run])
    );
    assert_refused!(&env, "lane-landing", 3, &["run", "discard", &run, second]);
    assert_refused!(&env, "lane-final", 3, &["run", "discard", &run, first]);
}
