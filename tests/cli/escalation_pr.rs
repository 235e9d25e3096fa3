//! An escalation applied by a person in a run that lands by pull request (SPEC 23.3): the verb
//! leaves the unit and its decision log uncommitted in the person's checkout, the lane carries
//! them to the forge, and once the pull request has landed the loop puts the checkout's copies
//! back, so `git pull` brings the landed text and refuses nothing.

use crate::env::TestEnv;
use crate::escalation::{escalating_with, file_at, PROPOSAL};
use crate::landing::{add_remote, FAKE_FORGE};
use crate::loop_e2e::{build, own_checks};
use serde_json::{json, Value};

/// The config of a run that lands by pull request through `origin` and the fake forge, left
/// open for a person (`land.arm: human`).
fn landing_by_pr(forge: &std::path::Path) -> Value {
    let argv = |verb: &str, rest: &[&str]| -> Value {
        let mut argv = vec![
            "bash".to_owned(),
            FAKE_FORGE.to_owned(),
            forge.display().to_string(),
            verb.to_owned(),
        ];
        argv.extend(rest.iter().map(|s| (*s).to_owned()));
        json!(argv)
    };
    let mut patch = own_checks(json!(["true"]));
    patch["land"] = json!({
        "mode": "pr", "remote": "origin", "arm": "human",
        "pr": {
            "open": argv("open", &["--head", "{branch}", "--base", "{target}", "--title", "{title}", "--body-file", "{body_file}"]),
            "find": argv("find", &["{branch}"]),
        }
    });
    patch
}

/// Build to an open pull request after `escalation apply`, then the forge merges it (the lane's
/// delivery pushed to the remote's `main`). Returns the env, the unit and the delivery commit.
fn applied_and_merged_by_the_forge() -> (TestEnv, String, String) {
    let forge = tempfile::tempdir().expect("a temporary directory").keep();
    let (env, id) = escalating_with(PROPOSAL, landing_by_pr(&forge));
    let remote = add_remote(&env);
    let (_, last) = build(&env, &id, &[], 4);
    assert_eq!(last["status"], "blocked", "{last}");
    env.iced_json(&["escalation", "apply", &id]).ok();
    let unit = format!("intent/{id}/iced.md");
    assert!(env
        .git_out(&["status", "--porcelain", "--", &unit])
        .starts_with(" M"));
    let (out, _) = build(&env, &id, &[], 0);
    let branch = format!("iced/{id}/{id}");
    let delivery = env.git_out(&["rev-parse", &branch]).trim().to_owned();
    assert!(
        std::fs::read_to_string(forge.join("calls.log"))
            .unwrap_or_default()
            .contains("forge open"),
        "the pull request is open: {out:#?}"
    );
    env.git(&[
        "push",
        "-q",
        &remote.display().to_string(),
        &format!("{delivery}:refs/heads/main"),
    ]);
    (env, id, delivery)
}

#[test]
fn after_the_pull_request_lands_the_checkout_is_left_for_git_pull() {
    let (env, id, delivery) = applied_and_merged_by_the_forge();
    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    assert_eq!(
        env.git_out(&["status", "--porcelain"]),
        "",
        "the verbs' files were put back once the pull request landed"
    );
    env.git(&["pull", "-q", "--ff-only", "origin", "main"]);
    let unit = format!("intent/{id}/iced.md");
    assert_eq!(env.read(&unit), file_at(&env, &delivery, &unit));
    let log = format!("intent/{id}/decisions.md");
    let logged = env.read(&log);
    let decision = "- Decision: applied the change-expectation escalation of run";
    assert_eq!(logged.matches(decision).count(), 1, "{logged}");
}

/// A person's own edit after the verb is theirs: it stays, and `git pull` is theirs to sort out.
#[test]
fn a_persons_own_edit_is_left_in_the_checkout_after_the_pull_request_lands() {
    let (env, id, _) = applied_and_merged_by_the_forge();
    let unit = format!("intent/{id}/iced.md");
    let edited = format!("{}\nA note of the person's.\n", env.read(&unit));
    env.write(&unit, &edited);
    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    assert_eq!(env.read(&unit), edited, "the person's edit is kept");
}

/// Killed right after putting a file back (`retire-after-restore`): the next call finds it as
/// `HEAD` has it and retires the lane once.
#[test]
fn a_retire_killed_after_putting_a_file_back_finishes_on_the_next_call() {
    use std::os::unix::process::ExitStatusExt;
    let (env, id, _) = applied_and_merged_by_the_forge();
    let killed = env
        .command()
        .env("ICED_FAILPOINT", "retire-after-restore")
        .args(["build", &id, "--json"])
        .output()
        .expect("iced runs");
    assert_eq!(killed.status.signal(), Some(9), "{killed:?}");
    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    assert_eq!(env.git_out(&["status", "--porcelain"]), "");
}
