//! A run's rules are fixed when it is admitted (SPEC 24.16, issue 35): whatever changes the
//! checkout's config while a run is live (an agent, the person for their next unit) does not
//! reach that run; `iced run resume <run> --reload` records the checkout's config as its rules,
//! and only once it is trusted.

use crate::env::TestEnv;
use crate::loop_e2e::{last_line, wait_for};
use crate::validation::{attempts_of, section, set_script, validated, PASS};
use serde_json::{json, Value};

/// A unit validated by one lens, its run started by `build --no-wait` and its implementer
/// holding on a file, so that the config changes while the run is live: the env, the unit, the
/// run, and the file that lets the implementer go on.
fn live_run() -> (TestEnv, String, String, std::path::PathBuf) {
    let (env, id) = validated("", &["full"], json!({}));
    let go = env.outside("go");
    let script = section(
        "1",
        "implementer",
        "*",
        &format!(
            "await-file {}\ncommit src/session.rs fixed\nreport-ok E1 E2",
            go.display()
        ),
    ) + &section("*", "validator", "*", &format!("report {PASS}"));
    set_script(&env, &id, &script);
    let started = env.iced_json(&["build", &id, "--no-wait"]);
    assert_eq!(started.code, 0, "{started:#?}");
    let run = last_line(&started)["run"]
        .as_str()
        .expect("a run")
        .to_owned();
    (env, id, run, go)
}

/// The checkout's config with `patch` merged in, written over it (not committed).
fn change_config(env: &TestEnv, patch: Value) {
    let mut config: Value = serde_json::from_str(&env.read(".iced/config.json")).unwrap();
    crate::env::merge_json(&mut config, &patch);
    env.write(
        ".iced/config.json",
        serde_json::to_string_pretty(&config).unwrap() + "\n",
    );
}

fn status(env: &TestEnv, run: &str) -> String {
    let show = env.iced_json(&["run", "show", run]).ok().json();
    show["status"].as_str().unwrap_or_default().to_owned()
}

/// Step the run as cron would, one `implement step` a call, until it has ended.
fn step_to_the_end(env: &TestEnv, run: &str) {
    wait_for("the run to end", || {
        let out = env.iced_json(&["implement", "step", "--run", run]);
        assert!(out.code == 0 || out.code == 4, "{out:#?}");
        !matches!(status(env, run).as_str(), "running" | "")
    });
}

/// Why-case 5 of the issue: `verify.independent` set to false in the checkout while the run was
/// live. Before, the run's next steps read it and delivered the lane with no validator.
#[test]
fn a_live_run_stepped_by_implement_step_keeps_the_rules_it_was_admitted_with() {
    let (env, _id, run, go) = live_run();
    change_config(&env, json!({"verify": {"independent": false}}));
    std::fs::write(&go, "").unwrap();
    step_to_the_end(&env, &run);
    assert_eq!(status(&env, &run), "delivered");
    assert_eq!(
        attempts_of(&env, "validator", "full"),
        [1],
        "the validator the run was admitted with ran"
    );
}

/// The same change, and a runner's timeout (a part trust covers) changed and trusted, as the
/// person does for their next unit: a `build` that takes the run up again goes on under the
/// run's rules too.
#[test]
fn a_build_that_takes_a_live_run_up_keeps_its_rules() {
    let (env, id, run, go) = live_run();
    change_config(
        &env,
        json!({"verify": {"independent": false}, "runners": {"fake": {"timeoutSec": 31}}}),
    );
    env.trust_config();
    std::fs::write(&go, "").unwrap();
    let out = env.iced_json(&["build", &id]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(last_line(&out)["run"], run.as_str(), "{out:#?}");
    assert_eq!(last_line(&out)["status"], "delivered", "{out:#?}");
    assert_eq!(attempts_of(&env, "validator", "full"), [1]);
}

/// `--reload` applies the checkout's config to the live run only once it is trusted, says what
/// changed, and the run follows it from the next step on.
#[test]
fn reload_applies_the_checkout_s_config_only_after_trust() {
    let (env, _id, run, go) = live_run();
    change_config(
        &env,
        json!({"verify": {"independent": false}, "runners": {"fake": {"timeoutSec": 31}}}),
    );
    let refused = env.iced_json(&["run", "resume", &run, "--reload"]);
    refused.refused(3, "config-untrusted");
    env.trust_config();
    // The text form reloads; the JSON form, asked right after, finds nothing more to reload.
    crate::snap::assert_read!(
        &env,
        "run_resume_reload",
        crate::snap::both(&env, &["run", "resume", &run, "--reload"])
    );
    let reload_events: Vec<Value> = crate::validation::events(&env)
        .into_iter()
        .filter(|e| e["event"] == "rules_reloaded")
        .collect();
    assert_eq!(reload_events.len(), 1, "{reload_events:#?}");
    assert_eq!(
        reload_events[0]["changed"],
        json!(["runners", "verify"]),
        "{reload_events:#?}"
    );
    std::fs::write(&go, "").unwrap();
    step_to_the_end(&env, &run);
    assert_eq!(status(&env, &run), "delivered");
    assert_eq!(
        attempts_of(&env, "validator", "*"),
        Vec::<u32>::new(),
        "the reloaded rules run no validator"
    );
}

/// The rules' file changed under the run (a host-driven agent can reach the run's folder) is not
/// taken: the step refuses, naming it, and nothing of the run moves.
#[test]
fn rules_changed_under_the_run_are_refused() {
    let (env, _id, run, _go) = live_run();
    change_config(&env, json!({"verify": {"independent": false}}));
    let dir = env.path(&format!(".iced/run/{run}"));
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("rules-"))
        })
        .expect("the run's rules");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        text.replace("\"independent\": true", "\"independent\": false"),
    )
    .unwrap();
    crate::snap::assert_refused!(
        &env,
        "rules-changed",
        3,
        &["implement", "step", "--run", &run]
    );
    assert_eq!(status(&env, &run), "running");
    assert!(crate::validation::attempts_of(&env, "implementer", "*") == [1]);
    // The remedy it names works: the checkout's config becomes the run's rules.
    let reloaded = env
        .iced_json(&["run", "resume", &run, "--reload"])
        .ok()
        .json();
    let changed = reloaded["rules_reloaded"]["changed"].as_array().unwrap();
    assert!(changed.contains(&json!("verify")), "{reloaded:#}");
    let out = env.iced_json(&["implement", "step", "--run", &run]);
    assert!(out.code == 0 || out.code == 4, "{out:#?}");
}

/// `--reload` killed after it wrote the new rules and before the state names them: the run goes
/// on under its old rules, whole, and the next `--reload` records the new ones.
#[test]
fn a_reload_killed_before_the_state_names_the_new_rules_leaves_the_old_in_force() {
    let (env, _id, run, go) = live_run();
    change_config(&env, json!({"verify": {"independent": false}}));
    let killed = env
        .command()
        .env("ICED_FAILPOINT", "rules-after-write")
        .args(["run", "resume", &run, "--reload", "--json"])
        .output()
        .expect("iced runs");
    crate::env::assert_killed(&killed, "the reload after writing the rules");
    let out = env.iced_json(&["implement", "step", "--run", &run]);
    assert!(out.code == 0 || out.code == 4, "{out:#?}");
    let reloaded = env
        .iced_json(&["run", "resume", &run, "--reload"])
        .ok()
        .json();
    assert_eq!(reloaded["rules_reloaded"]["changed"], json!(["verify"]));
    std::fs::write(&go, "").unwrap();
    step_to_the_end(&env, &run);
    assert_eq!(status(&env, &run), "delivered");
    assert_eq!(attempts_of(&env, "validator", "*"), Vec::<u32>::new());
}
