//! Snapshots of what a delivered lane leaves for people (SPEC 22.5, 23.1, 23.2): `evidence.md` and
//! `verify.json` in the unit's close on the lane branch, and the pull request's body as the forge
//! got it (`fixtures/fake-forge` keeps it); then the run waiting for the forge, and resuming a lane
//! whose pull request is armed. The process driver, the fake agent as implementer and validator.

use crate::env::{fake_runner, merge_json, TestEnv};
use crate::landing::{add_remote, state};
use crate::loop_e2e::{lane_branch, str_of};
use crate::snap::{assert_read, assert_refused, both, file};
use crate::validation::PASS;
use iced::run::state::{RunStatus, Stage};
use serde_json::{json, Value};

const FAKE_FORGE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/fake-forge");

#[test]
fn a_delivered_lane_and_its_pull_request_read_well() {
    let (env, id) = TestEnv::buildable_with(|env| {
        let forge = |verb: &str, rest: &[&str]| -> Value {
            let mut argv = vec![
                "bash".to_owned(),
                FAKE_FORGE.to_owned(),
                env.outside("forge").display().to_string(),
                verb.to_owned(),
            ];
            argv.extend(rest.iter().map(|s| (*s).to_owned()));
            json!(argv)
        };
        let mut config = fake_runner(
            env,
            &format!(
                "role implementer\ncommit src/session.rs sessions refresh on activity\nreport-ok E1 E2\nrole validator\nreport {PASS}\n"
            ),
        );
        merge_json(
            &mut config,
            &json!({
                "roles": {"validator": {"runner": "fake"}},
                "verify": {
                    "independent": true,
                    "lenses": ["full"],
                    "commands": ["test -f src/session.rs", ["true", "sh -c 'exit 0'"]],
                },
                "land": {
                    "mode": "pr", "remote": "origin", "arm": "auto",
                    "pr": {
                        "open": forge("open", &["--head", "{branch}", "--base", "{target}", "--title", "{title}", "--body-file", "{body_file}"]),
                        "arm": forge("arm", &["{pr_number}"]),
                        "find": forge("find", &["{branch}"]),
                    }
                }
            }),
        );
        config
    });
    std::fs::create_dir_all(env.outside("forge")).unwrap();
    add_remote(&env);

    let out = env.iced_json(&["build", &id]);
    assert_eq!(out.code, 0, "{out:#?}");
    let last: Value = serde_json::from_str(out.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(
        last["action"], "waiting",
        "the run waits for the forge: {out:#?}"
    );
    let run = str_of(&last, "run").to_owned();

    // The close on the lane branch, and the body the forge was handed.
    let show = |rel: &str| env.git_out(&["show", &format!("{}:{rel}", lane_branch(&id))]);
    assert_read!(
        &env,
        "evidence_md",
        file(
            &format!("intent/{id}/evidence.md"),
            &show(&format!("intent/{id}/evidence.md"))
        )
    );
    assert_read!(
        &env,
        "verify_json",
        file(
            &format!("intent/{id}/verify.json"),
            &show(&format!("intent/{id}/verify.json"))
        )
    );
    assert_read!(
        &env,
        "pr_body",
        file(
            "the pull request's body",
            &std::fs::read_to_string(env.outside("forge").join("body.md")).unwrap()
        )
    );

    // Waiting for the forge to merge it.
    assert_read!(
        &env,
        "step_waiting_forge",
        both(&env, &["implement", "step", "--run", &run])
    );

    // A lane blocked after its pull request was armed (as a failure at retire would leave it: set
    // by hand here) is not resumed: the loop never pushes to an armed pull request.
    let mut s = state(&env);
    {
        let r = s.runs.get_mut(&run).unwrap();
        assert!(r.lanes[0].is_done(&crate::env::key("pr-arm")), "armed");
        r.lanes[0].stage = Stage::Blocked;
        r.lanes[0].reason = Some("a failure after arming".into());
        r.status = RunStatus::Blocked;
    }
    let mut text = serde_json::to_vec_pretty(&s).unwrap();
    text.push(b'\n');
    std::fs::write(env.path(".iced/run/state.json"), &text).unwrap();
    assert_refused!(&env, "pr-armed", 3, &["run", "resume", &run]);
    // Nor can a person arm a pull request the lane is not waiting on.
    assert_refused!(&env, "pr-not-open", 3, &["run", "arm", &run]);
}
