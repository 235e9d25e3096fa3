//! Issue 11, items 8, 9, 10 and 12: every verb checks the whole config the same way (a misspelt
//! key of `roles` or `runners` named with the nearest valid one), a setting iced cannot honour is
//! refused rather than dropped, and admit refuses what would only fail later: a dependency not
//! delivered, a definition-of-done program that is not there.

use crate::env::TestEnv;
use crate::snap::{assert_read, assert_refused, refused};
use serde_json::json;

/// Each config a verb must refuse, with the key its reason names; every verb that reads the
/// config refuses it alike (`list` as `build`).
#[test]
fn every_verb_refuses_a_bad_value_the_loop_reads() {
    for (patch, key) in [
        (json!({"verify": {"effort": "turbo"}}), "verify.effort"),
        (json!({"build": {"testWriter": "yes"}}), "build.testWriter"),
        (json!({"build": {"testPaths": []}}), "build.testPaths"),
        (
            json!({"build": {"testWriter": true, "testWriterEffort": "bogus"}}),
            "build.testWriterEffort",
        ),
        (json!({"memory": {"product": 5}}), "memory.product"),
        (json!({"verify": {"lenses": 5}}), "verify.lenses"),
        (
            json!({"verify": {"commands": [1, 2]}}),
            "verify.commands[0]",
        ),
        (
            json!({"roles": {"implementer": {"modle": "m"}}}),
            "roles.implementer.modle",
        ),
        (json!({"roles": {"validater": {}}}), "roles.validater"),
        (json!({"land": {"claimLeaseSec": 0}}), "land.claimLeaseSec"),
    ] {
        let (env, id) = TestEnv::buildable(json!({}));
        let mut config: serde_json::Value =
            serde_json::from_str(&env.read(".iced/config.json")).unwrap();
        crate::env::merge_json(&mut config, &patch);
        env.write(".iced/config.json", config.to_string());
        for args in [
            &["list"][..],
            &["status", &id],
            &["new", "another"],
            &["stats"],
            &["trust"],
            &["autonomy", "2"],
            &["build", &id],
        ] {
            let refused = env.iced_json(args).refused(3, "config-invalid");
            let reason = refused["reason"].as_str().unwrap();
            assert!(
                reason.contains(&format!("`{key}`")),
                "{patch} {args:?}: {reason}"
            );
        }
        // `autonomy <n>` refused: the file is as the person wrote it.
        assert_eq!(env.read(".iced/config.json"), config.to_string());
    }
}

/// With `roles.validator.distinct_model`, every model of `verify.model`'s rotation must differ
/// from the implementer's.
#[test]
fn a_rotation_holding_the_implementers_model_is_not_distinct() {
    let (env, id) = TestEnv::buildable_with(|env| {
        let mut config = crate::env::fake_runner(env, "");
        crate::env::merge_json(
            &mut config,
            &json!({
                "roles": {"implementer": {"model": "m-a"}, "validator": {"runner": "fake", "distinct_model": true}},
                "verify": {"independent": true, "model": ["m-b", "m-a:high"]}
            }),
        );
        config
    });
    let refusal = env
        .iced_json(&["build", &id])
        .refused(3, "validator-not-distinct");
    assert!(
        refusal["reason"]
            .as_str()
            .unwrap()
            .contains("`m-a`, the implementer's too"),
        "{refusal}"
    );
    env.patch_config(&json!({"verify": {"model": ["m-b", "m-c:high"]}}));
    env.commit_all("distinct models");
    let run = env.iced_json(&["build", &id, "--no-wait"]);
    assert_ne!(run.code, 3, "{run:#?}");
}

/// The refusals of a misspelt key, as a person and a host read them.
#[test]
fn a_misspelt_key_is_refused_with_the_nearest_name() {
    let env = TestEnv::initialized();
    let config = env.read(".iced/config.json");
    let with = |patch: serde_json::Value| {
        let mut c: serde_json::Value = serde_json::from_str(&config).unwrap();
        crate::env::merge_json(&mut c, &patch);
        env.write(".iced/config.json", c.to_string());
    };
    with(json!({"roles": {"implementer": {"modle": "m"}}}));
    assert_read!(
        &env,
        "config_invalid_role_field",
        refused(&env, &["list"], 3, "config-invalid")
    );
    with(json!({"roles": {"validater": {"runner": "r"}}}));
    assert_read!(
        &env,
        "config_invalid_role",
        refused(&env, &["list"], 3, "config-invalid")
    );
    with(json!({"runners": {"cc": {"kind": "claude", "timeoutSecs": 60}}}));
    assert_read!(
        &env,
        "config_invalid_runner_field",
        refused(&env, &["list"], 3, "config-invalid")
    );
    with(json!({"build": {"testWriter": true}}));
    assert_read!(
        &env,
        "config_invalid_test_writer",
        refused(&env, &["list"], 3, "config-invalid")
    );
    with(json!({"verify": {"effort": "high"}}));
    assert_read!(
        &env,
        "config_invalid_effort_without_runner",
        refused(&env, &["list"], 3, "config-invalid")
    );
}

/// A unit built alone waits for nothing: a dependency not delivered, or one that names no unit,
/// is refused at admit as it is for a project's children.
#[test]
fn a_unit_alone_is_refused_while_its_dependency_is_open() {
    let (env, _) = TestEnv::buildable(json!({"verify": {"independent": false, "commands": []}}));
    let draft = env.new_unit("the log format");
    let waiting = env.good_unit("after the log format");
    env.set_field(&waiting, "depends", &draft);
    env.iced_json(&["approve", &waiting, "--yes"]).ok();
    let unknown = env.good_unit("after nothing");
    env.set_field(&unknown, "depends", "999");
    env.iced_json(&["approve", &unknown, "--yes"]).ok();
    env.commit_all("units");
    assert_read!(
        &env,
        "refused_dependency-open_alone",
        refused(&env, &["build", &waiting], 3, "dependency-open")
    );
    assert_read!(
        &env,
        "refused_dependency-unknown_alone",
        refused(&env, &["build", &unknown], 3, "dependency-unknown")
    );
    // Delivered, it no longer stands in the way (the unit is refused for what comes next, here
    // nothing: it is admitted).
    env.set_field(&draft, "status", "done");
    env.commit_all("the log format is done");
    let run = env.iced_json(&["build", &waiting, "--no-wait"]);
    assert_ne!(run.code, 3, "{run:#?}");
}

/// A definition-of-done program that is not there is refused at admit, naming the command,
/// instead of costing an attempt.
#[test]
fn a_definition_of_done_program_that_is_not_there_is_refused_at_admit() {
    let (env, id) = TestEnv::buildable(json!({"verify": {"independent": false,
        "commands": ["true", ["test -f x", "no-such-program-iced-test --all"]]}}));
    assert_refused!(&env, "dod-program-missing", 3, &["build", &id]);
    // A path is looked for in the repository, from the command's folder.
    env.patch_config(&json!({"verify": {"commands": [{"argv": ["./check.sh"], "cwd": "tools"}]}}));
    env.commit_all("a check");
    let refusal = env
        .iced_json(&["build", &id])
        .refused(3, "dod-program-missing");
    assert!(
        refusal["reason"]
            .as_str()
            .unwrap()
            .contains("`tools/check.sh`"),
        "{refusal}"
    );
    // The lane's worktree is a checkout of the commit: a script only in the working tree, or
    // made executable there without committing the mode, would not start in it.
    use std::os::unix::fs::PermissionsExt;
    let mode = |m: u32| {
        std::fs::set_permissions(
            env.path("tools/check.sh"),
            std::fs::Permissions::from_mode(m),
        )
        .unwrap()
    };
    env.write("tools/check.sh", "#!/bin/sh\nexit 0\n");
    mode(0o755);
    let reason = |env: &TestEnv| {
        let refusal = env
            .iced_json(&["build", &id])
            .refused(3, "dod-program-missing");
        refusal["reason"].as_str().unwrap().to_owned()
    };
    assert!(
        reason(&env).contains("which is not committed"),
        "{}",
        reason(&env)
    );
    mode(0o644);
    env.commit_all("the check, not executable");
    mode(0o755);
    assert_read!(
        &env,
        "refused_dod-program-missing_mode",
        refused(&env, &["build", &id], 3, "dod-program-missing")
    );
    env.commit_all("the check");
    let run = env.iced_json(&["build", &id, "--no-wait"]);
    assert_ne!(run.code, 3, "{run:#?}");
}

/// `verify.model` rotates over the validators in their fixed order, and each gets its effort
/// (its model's `:level`, else `verify.effort`); `record.json` says which model each one had.
#[test]
fn verify_model_rotates_over_the_validators_with_their_effort() {
    use crate::validation::{implementer, section, validated, PASS};
    let script = implementer("") + &section("*", "validator", "*", &format!("report {PASS}"));
    let (env, id) = validated(
        &script,
        &["expectations", "failures", "rules"],
        json!({"verify": {"model": ["model-a", "model-b:low"], "effort": "high"}}),
    );
    let (out, last) = crate::loop_e2e::build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    let mut seen: Vec<String> = env
        .agent_starts()
        .iter()
        .filter(|l| l.contains("role=validator"))
        .map(|l| {
            let field = |name: &str| {
                l.split_whitespace()
                    .find_map(|w| w.strip_prefix(&format!("{name}=")))
                    .unwrap_or("")
                    .to_owned()
            };
            format!("{} {} {}", field("lens"), field("model"), field("effort"))
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            "expectations model-a high",
            "failures model-b low",
            "rules model-a high"
        ]
    );
    let run = last["run"].as_str().unwrap();
    let record: serde_json::Value =
        serde_json::from_str(&env.read(&format!(".iced/run/{run}/record.json"))).unwrap();
    let validator = &record["settings"]["validator"];
    assert_eq!(validator["models"], json!(["model-a", "model-b:low"]));
    assert_eq!(validator["effort"], "high");
    let mut models: Vec<String> = record["agents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["step"].as_str().unwrap_or("").starts_with("validate"))
        .map(|a| {
            format!(
                "{} {}",
                a["step"].as_str().unwrap(),
                a["model"].as_str().unwrap_or("")
            )
        })
        .collect();
    models.sort();
    assert_eq!(
        models,
        [
            "validate-expectations model-a",
            "validate-failures model-b",
            "validate-rules model-a"
        ]
    );
}
