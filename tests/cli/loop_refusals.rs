//! What the loop refuses before and around a run (SPEC 20.3, 21.2): admit refusals write nothing,
//! and a state file that cannot be trusted is refused. Split from loop_e2e.rs, whose helpers it uses.

use crate::env::{unit_file, TestEnv};
use crate::loop_e2e::*;
use serde_json::{json, Value};

// ---- 6. admit refusals write nothing ----------------------------------------------------------

/// `build args --json` is refused with `code`, and no run state was written: no state file (or the
/// one there unchanged), no claim, and no `.iced/run` where there was none.
fn admit_refused(env: &TestEnv, args: &[&str], code: &str) -> Value {
    let had_run_dir = env.path(".iced/run").exists();
    let state_before = std::fs::read(state_path(env)).ok();
    let claims_before = claims(env);
    let mut all = vec!["build"];
    all.extend_from_slice(args);
    let refusal = env.iced_json(&all).refused(3, code);
    assert!(
        std::fs::read(state_path(env)).ok() == state_before,
        "{code}: state.json was written"
    );
    assert_eq!(claims(env), claims_before, "{code}: the claims changed");
    if !had_run_dir {
        assert!(
            !env.path(".iced/run").exists(),
            "{code}: .iced/run was made"
        );
    }
    refusal
}

/// Every claim file and its bytes.
fn claims(env: &TestEnv) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(env.root().join(".git/iced/claims"))
        .into_iter()
        .flatten()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn admit_refuses_a_missing_unit_and_a_repository_without_commits() {
    let (env, _id) = TestEnv::buildable(own_checks(json!([])));
    admit_refused(&env, &["999-nowhere"], "unit-not-found");

    let env = TestEnv::without_git();
    env.git(&["init", "-q", "-b", "main"]);
    env.iced(&["init"]).ok();
    let id = env.good_unit("session timeout");
    admit_refused(&env, &[&id], "not-a-git-repo");
}

#[test]
fn admit_refuses_units_that_are_not_ready() {
    // A draft.
    let env = TestEnv::initialized();
    let id = env.good_unit("session timeout");
    env.commit_all("draft");
    admit_refused(&env, &[&id], "unit-not-approved");

    // Held (hold edits the file: committed afterwards).
    let (env, id) = TestEnv::buildable(own_checks(json!([])));
    env.iced(&["hold", &id, "legal", "review"]).ok();
    env.commit_all("hold");
    admit_refused(&env, &[&id], "unit-held");

    // An unanswered question added by hand after approval (the contract hash does not cover it).
    let (env, id) = TestEnv::buildable(own_checks(json!([])));
    let text = env.read(&unit_file(&id));
    env.write(
        &unit_file(&id),
        format!("{}\n- [Q9] Do refresh tokens rotate?\n", text.trim_end()),
    );
    assert_eq!(env.iced_json(&["lint", &id]).code, 3, "Q9 must be open");
    env.commit_all("a new question");
    let r = admit_refused(&env, &[&id], "open-questions");
    assert!(str_of(&r, "reason").contains("Q9"), "{r}");

    // A lint error outside the contract: a risk that is not in the list.
    let (env, id) = TestEnv::buildable(own_checks(json!([])));
    env.set_field(&id, "risk", "extreme");
    env.commit_all("bad risk");
    admit_refused(&env, &[&id], "lint-errors");

    // The contract edited after approval.
    let (env, id) = TestEnv::buildable(own_checks(json!([])));
    let text = env.read(&unit_file(&id));
    let edited = text.replace(
        "[E1] Activity extends the session.",
        "[E1] Activity extends the session by an hour.",
    );
    assert_ne!(edited, text);
    env.write(&unit_file(&id), edited);
    env.commit_all("edit E1");
    admit_refused(&env, &[&id], "contract-changed");

    // Approved, but not committed: the worktree would not see it.
    let env = TestEnv::initialized();
    let id = env.approved_unit("session timeout");
    admit_refused(&env, &[&id], "unit-uncommitted");
}

#[test]
fn a_claim_stops_a_second_run_but_not_a_resume() {
    // A live run of session A: a build by session B resumes it rather than starting another.
    let (env, id) = TestEnv::buildable(own_checks(json!([])));
    let (_, first) = build(&env, &id, &["--no-wait", "--session", "A"], 0);
    let run_a = str_of(&first, "run").to_owned();
    let claim: Value = serde_json::from_slice(&std::fs::read(claim_path(&env, &id)).unwrap())
        .expect("the claim is JSON");
    assert_eq!(claim["run"], run_a.as_str());
    assert_eq!(claim["session"], "A");
    assert_eq!(mode(&claim_path(&env, &id)), 0o600);
    let (_, again) = build(&env, &id, &["--no-wait", "--session", "B"], 0);
    assert_eq!(
        again["run"],
        run_a.as_str(),
        "session B started another run"
    );
    let runs = env.iced_json(&["run", "list"]).ok().json();
    assert_eq!(runs.as_array().unwrap().len(), 1, "{runs:#}");

    // A claim left behind by a run that has ended (an abandon killed after saving the end and
    // before releasing it) blocks nobody (SPEC 20.3): any session takes the unit over.
    let (env, id) = TestEnv::buildable(own_checks(json!([])));
    let (_, old) = build(&env, &id, &["--no-wait", "--session", "X"], 0);
    let old_run = str_of(&old, "run").to_owned();
    let claim = std::fs::read(claim_path(&env, &id)).unwrap();
    env.iced_json(&["run", "abandon", &old_run]).ok();
    assert!(!claim_path(&env, &id).exists(), "abandon kept the claim");
    std::fs::write(claim_path(&env, &id), &claim).unwrap();
    let (_, new) = build(&env, &id, &["--no-wait", "--session", "B"], 0);
    let new_run = str_of(&new, "run");
    assert_ne!(new_run, old_run);
    let claim: Value =
        serde_json::from_slice(&std::fs::read(claim_path(&env, &id)).unwrap()).unwrap();
    assert_eq!(claim["run"], new_run);
}

#[test]
fn admit_refuses_a_missing_runner_and_an_invalid_config() {
    let (env, id) = TestEnv::buildable(json!({
        "verify": {"independent": false},
        "runners": {"ghost": {"kind": "command", "argv": ["/nonexistent/agent"]}},
        "roles": {"implementer": {"runner": "ghost"}}
    }));
    let r = admit_refused(&env, &[&id], "runner-missing");
    assert!(str_of(&r, "reason").contains("/nonexistent/agent"), "{r}");

    let (env, id) = TestEnv::buildable(json!({
        "verify": {"independent": false},
        "roles": {"implementer": {"runner": "undefined"}}
    }));
    let r = admit_refused(&env, &[&id], "config-invalid");
    assert!(
        str_of(&r, "reason").contains("roles.implementer.runner"),
        "{r}"
    );
}

// ---- 7. state file refusals ----------------------------------------------------------------------

/// `implement step` and `run list` both refuse with `code`, and the file at `path` is unchanged.
fn state_refused(env: &TestEnv, code: &str) -> Value {
    let path = state_path(env);
    let target = std::fs::canonicalize(&path).unwrap_or(path.clone());
    let before = std::fs::read(&target).unwrap();
    let r = env.iced_json(&["implement", "step"]).refused(3, code);
    env.iced_json(&["run", "list"]).refused(3, code);
    assert!(
        std::fs::read(&target).unwrap() == before,
        "{code}: rewritten"
    );
    r
}

#[test]
fn a_newer_state_file_is_refused_and_left_alone() {
    let (env, id) = TestEnv::buildable(own_checks(json!([])));
    std::fs::create_dir_all(env.path(".iced/run")).unwrap();
    env.write(".iced/run/state.json", r#"{"schema": 2, "runs": {}}"#);
    let r = state_refused(&env, "state-newer");
    assert!(str_of(&r, "remedy").contains("upgrade iced"), "{r}");
    env.iced_json(&["build", &id]).refused(3, "state-newer");
    assert_eq!(
        env.read(".iced/run/state.json"),
        r#"{"schema": 2, "runs": {}}"#
    );
}

#[test]
fn a_damaged_state_file_is_refused() {
    let (env, id) = TestEnv::buildable(own_checks(json!([])));
    let (run_id, _) = host_run(&env, &id);
    let good = env.read(".iced/run/state.json");
    let path = state_path(&env);

    // Cut in half.
    env.write(".iced/run/state.json", &good[..good.len() / 2]);
    state_refused(&env, "state-invalid");

    // An unknown field, at the top and inside a run.
    let mut value: Value = serde_json::from_str(&good).unwrap();
    value["x"] = json!(1);
    env.write(".iced/run/state.json", value.to_string());
    state_refused(&env, "state-invalid");
    let mut value: Value = serde_json::from_str(&good).unwrap();
    value["runs"][&run_id]["priority"] = json!("high");
    env.write(".iced/run/state.json", value.to_string());
    state_refused(&env, "state-invalid");

    // Over 4 MiB (valid JSON, padded).
    let mut big = good.clone().into_bytes();
    big.resize(5 * 1024 * 1024, b' ');
    env.write(".iced/run/state.json", &big);
    let r = state_refused(&env, "state-invalid");
    assert!(str_of(&r, "reason").contains("4 MiB"), "{r}");

    // A symlink to a copy: refused, the copy untouched, the link still a link.
    let copy = env.outside("state-copy.json");
    std::fs::write(&copy, &good).unwrap();
    std::fs::remove_file(&path).unwrap();
    std::os::unix::fs::symlink(&copy, &path).unwrap();
    let r = state_refused(&env, "state-invalid");
    assert!(str_of(&r, "reason").contains("symbolic link"), "{r}");
    env.iced_json(&["implement", "receipt", "/nowhere/report.json"])
        .refused(3, "state-invalid");
    assert_eq!(std::fs::read_to_string(&copy).unwrap(), good);
    assert!(std::fs::symlink_metadata(&path)
        .unwrap()
        .file_type()
        .is_symlink());
}
