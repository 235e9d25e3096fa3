//! Only regular files (SPEC 24.6): a FIFO, a directory or a symbolic link where iced expects a
//! file is refused at once, naming it, and never holds the state lock; the logs a step appends to
//! are checked before the step writes anything, so no event is dropped silently.
//!
//! Every call that could hang on a FIFO runs under [`bounded`]: a regression fails the test after
//! 20 seconds instead of hanging the suite.

use crate::env::{Run, TestEnv};
use crate::loop_e2e::{
    agent_commit, hand_in, host_run, state_fingerprint, step, step_until, str_of, worktree_of,
    GOOD_REPORT,
};
use serde_json::json;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// How long a call that must return at once may take before it counts as hung.
const HUNG: Duration = Duration::from_secs(20);

/// Run `cmd` to its end, or kill it and fail the test when it is still running after [`HUNG`].
pub(crate) fn bounded(cmd: &mut Command) -> Run {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("iced starts");
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(HUNG) {
        Ok(out) => {
            let out = out.expect("iced ran");
            Run {
                code: out.status.code().unwrap_or(-1),
                stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            }
        }
        Err(_) => {
            // Our own child, by its pid: it is hung, which is the failure this test is about.
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            panic!("`{cmd:?}` did not return within {HUNG:?}: it blocked on a file");
        }
    }
}

/// `iced <args> --json` in the repository, under [`bounded`].
fn iced_bounded(env: &TestEnv, args: &[&str]) -> Run {
    bounded(env.command().args(args).arg("--json"))
}

pub(crate) fn mkfifo(path: &Path) {
    if path.exists() || path.symlink_metadata().is_ok() {
        std::fs::remove_file(path).unwrap();
    }
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o600))
        .unwrap_or_else(|e| panic!("mkfifo {}: {e}", path.display()));
}

pub(crate) fn is_fifo(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_fifo())
}

/// The refusal's reason names `path` and says what it is.
fn names(refusal: &serde_json::Value, path: &Path, kind: &str) {
    let reason = str_of(refusal, "reason");
    let shown = path.display().to_string();
    assert!(
        reason.contains(&shown) && reason.contains(kind),
        "the reason does not name `{shown}` as {kind}: {refusal}"
    );
}

/// The regression: a FIFO at the receipt path hung `implement receipt` forever, holding the state
/// lock, so every other call of the run waited on it too.
#[test]
fn a_fifo_at_the_receipt_path_is_refused_at_once() {
    let (env, id) = TestEnv::buildable(json!({"verify": {"independent": false, "commands": []}}));
    let (_run, agent) = host_run(&env, &id);
    let receipt = str_of(&agent, "receipt_path").to_owned();
    let receipt_path = Path::new(&receipt);
    mkfifo(receipt_path);
    let before = state_fingerprint(&env);

    let out = iced_bounded(&env, &["implement", "receipt", &receipt]);
    let r = out.refused(3, "not-a-regular-file");
    names(&r, receipt_path, "a FIFO");
    assert_eq!(r["step"], "implement receipt", "{r}");
    assert!(
        state_fingerprint(&env) == before,
        "the refusal changed the state"
    );
    assert!(is_fifo(receipt_path), "the FIFO was replaced");
    // The lock is free: the run answers at once, and still waits for the same agent.
    let again = iced_bounded(&env, &["implement", "step"]).json();
    assert_eq!(again["action"], "start_agent", "{again}");
    assert_eq!(again["receipt_path"], agent["receipt_path"], "{again}");

    // A link there is the agent pointing the loop elsewhere: refused too, the target unread.
    let elsewhere = env.outside("report.json");
    std::fs::write(&elsewhere, GOOD_REPORT).unwrap();
    std::fs::remove_file(receipt_path).unwrap();
    std::os::unix::fs::symlink(&elsewhere, receipt_path).unwrap();
    let r = hand_in(&env, &receipt).refused(3, "path-symlink");
    assert!(str_of(&r, "reason").contains(&receipt), "{r}");
    assert!(
        state_fingerprint(&env) == before,
        "the refusal changed the state"
    );

    // The same report as a regular file is taken.
    std::fs::remove_file(receipt_path).unwrap();
    agent_commit(&worktree_of(&env, &id), "src/session.rs", "fixed\n");
    std::fs::write(receipt_path, GOOD_REPORT).unwrap();
    let taken = hand_in(&env, &receipt).ok().json();
    assert_eq!(taken["action"], "advanced", "{taken}");
}

#[test]
fn a_fifo_at_the_config_is_refused_by_build_and_implement_step() {
    let (env, id) = TestEnv::buildable(json!({"verify": {"independent": false, "commands": []}}));
    let config = env.path(".iced/config.json");
    mkfifo(&config);

    let r = iced_bounded(&env, &["build", &id, "--no-wait"]).refused(3, "not-a-regular-file");
    names(&r, &config, "a FIFO");
    let r = iced_bounded(&env, &["implement", "step"]).refused(3, "not-a-regular-file");
    names(&r, &config, "a FIFO");
    assert!(
        !env.path(".iced/run/state.json").exists(),
        "a run was admitted without a config"
    );
    assert!(is_fifo(&config));

    // A directory is no config either.
    std::fs::remove_file(&config).unwrap();
    std::fs::create_dir(&config).unwrap();
    let r = iced_bounded(&env, &["build", &id]).refused(3, "not-a-regular-file");
    names(&r, &config, "a directory");
}

#[test]
fn a_fifo_at_a_validator_answer_path_is_refused_at_once() {
    let (env, id) = TestEnv::buildable(json!({
        "verify": {"independent": true, "lenses": ["full"], "commands": []}
    }));
    let (_run, agent) = host_run(&env, &id);
    agent_commit(&worktree_of(&env, &id), "src/session.rs", "fixed\n");
    std::fs::write(str_of(&agent, "receipt_path"), GOOD_REPORT).unwrap();
    hand_in(&env, str_of(&agent, "receipt_path")).ok();
    let validator = step_until(&env, |s| s["action"] == "start_agent");
    assert_eq!(validator["role"], "validator", "{validator}");
    let answer = str_of(&validator, "receipt_path").to_owned();
    mkfifo(Path::new(&answer));
    let before = state_fingerprint(&env);

    let r = iced_bounded(&env, &["implement", "receipt", &answer]).refused(3, "not-a-regular-file");
    names(&r, Path::new(&answer), "a FIFO");
    assert!(
        state_fingerprint(&env) == before,
        "the refusal changed the state"
    );
    // Asked again, the loop hands out the same validator: nothing was taken.
    let again = step(&env);
    assert_eq!(again["receipt_key"], validator["receipt_key"], "{again}");

    // A link to a good answer is refused as a link.
    std::fs::remove_file(&answer).unwrap();
    let elsewhere = env.outside("answer.json");
    std::fs::write(&elsewhere, "{}").unwrap();
    std::os::unix::fs::symlink(&elsewhere, &answer).unwrap();
    hand_in(&env, &answer).refused(3, "path-symlink");
    assert!(
        state_fingerprint(&env) == before,
        "the refusal changed the state"
    );
}

/// The regression: with `events.jsonl` replaced by a symbolic link, every event was dropped
/// silently (the append refused the link and nobody heard) and the verb exited 0.
#[test]
fn a_symlinked_event_log_stops_the_loop_before_it_writes_anything() {
    let (env, id) = TestEnv::buildable(json!({"verify": {"independent": false, "commands": []}}));
    let (run_id, _agent) = host_run(&env, &id);
    let events = env.path(".iced/run/events.jsonl");
    let target = env.outside("somewhere-else.jsonl");
    std::fs::write(&target, "kept\n").unwrap();
    std::fs::remove_file(&events).unwrap();
    std::os::unix::fs::symlink(&target, &events).unwrap();
    let before = state_fingerprint(&env);

    let r = iced_bounded(&env, &["implement", "step"]).refused(3, "path-symlink");
    names(&r, &events, "symbolic link");
    iced_bounded(&env, &["run", "pause", &run_id]).refused(3, "path-symlink");
    assert!(state_fingerprint(&env) == before, "a step was recorded");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "kept\n");
    assert!(events.symlink_metadata().unwrap().file_type().is_symlink());

    // Replaced with a regular file, the run goes on where it was.
    std::fs::remove_file(&events).unwrap();
    std::fs::write(&events, "").unwrap();
    let again = step(&env);
    assert_eq!(again["action"], "start_agent", "{again}");
}

#[test]
fn a_symlinked_event_log_admits_no_run() {
    let (env, id) = TestEnv::buildable(json!({"verify": {"independent": false, "commands": []}}));
    std::fs::create_dir_all(env.path(".iced/run")).unwrap();
    let target = env.outside("somewhere-else.jsonl");
    std::fs::write(&target, "kept\n").unwrap();
    std::os::unix::fs::symlink(&target, env.path(".iced/run/events.jsonl")).unwrap();

    iced_bounded(&env, &["build", &id, "--no-wait"]).refused(3, "path-symlink");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "kept\n");
    assert!(
        !env.path(".iced/run/state.json").exists(),
        "a run was admitted"
    );
    assert!(
        !env.path(&format!(".iced/run/claims/{id}.json")).exists(),
        "the unit was claimed"
    );
}

#[test]
fn a_fifo_at_the_metrics_file_is_refused_by_the_loop_and_by_stats() {
    let (env, id) = TestEnv::buildable(json!({"verify": {"independent": false, "commands": []}}));
    let metrics = env.path(".iced/metrics.jsonl");
    mkfifo(&metrics);

    let r = iced_bounded(&env, &["build", &id, "--no-wait"]).refused(3, "not-a-regular-file");
    names(&r, &metrics, "a FIFO");
    assert!(
        !env.path(".iced/run/state.json").exists(),
        "a run was admitted"
    );
    let r = iced_bounded(&env, &["stats"]).refused(3, "not-a-regular-file");
    names(&r, &metrics, "a FIFO");

    // An authoring verb's metric comes after its change: a warning, never a hang (SPEC 15).
    let created = iced_bounded(&env, &["new", "dark mode"]).ok().json();
    let warning = created["warnings"][0].as_str().unwrap_or_default();
    assert!(warning.contains("metrics.jsonl"), "{created}");
    assert!(is_fifo(&metrics), "the FIFO was replaced");

    // So does a symlinked one, and its target is untouched.
    std::fs::remove_file(&metrics).unwrap();
    let target = env.outside("metrics-elsewhere.jsonl");
    std::fs::write(&target, "kept\n").unwrap();
    std::os::unix::fs::symlink(&target, &metrics).unwrap();
    let abandoned = iced_bounded(&env, &["abandon", str_of(&created, "id")])
        .ok()
        .json();
    assert!(
        abandoned["warnings"][0]
            .as_str()
            .is_some_and(|w| w.contains("metrics.jsonl")),
        "{abandoned}"
    );
    iced_bounded(&env, &["build", &id, "--no-wait"]).refused(3, "path-symlink");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "kept\n");
}

/// The process driver: a FIFO an agent leaves at its report path is a gap of the receipt, read
/// without blocking (it used to hang the loop), and the attempt after it can deliver.
#[test]
fn a_fifo_left_at_the_report_path_is_a_gap_of_the_receipt() {
    let (env, id) = crate::loop_e2e::with_agent(
        "attempt 1\ncommit src/session.rs fixed\nfifo-report\nattempt 2\nreport-ok E1 E2\n",
        json!({"verify": {"independent": false, "commands": []}}),
    );
    let out = iced_bounded(&env, &["build", &id]);
    assert_eq!(out.code, 0, "{out:#?}");
    let last = crate::loop_e2e::last_line(&out);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    let run_id = str_of(&last, "run");
    assert_eq!(env.agent_starts().len(), 2);
    let history = env.read(&format!(".iced/run/{run_id}/history.jsonl"));
    let receipt = history
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|r| r["step"] == "receipt")
        .unwrap_or_else(|| panic!("no receipt of attempt 1 in the history:\n{history}"));
    assert_eq!(receipt["outcome"]["verified"], false, "{receipt}");
    let gaps = receipt["outcome"]["missing"].to_string();
    assert!(
        gaps.contains("not-a-regular-file") && gaps.contains("implement-1/out/report.json"),
        "{receipt}"
    );
}

#[test]
fn a_fifo_at_a_unit_file_is_refused_and_listed_as_such() {
    let env = TestEnv::initialized();
    let good = env.new_unit("good");
    let bad = env.new_unit("bad");
    let path = env.path(&crate::env::unit_file(&bad));
    mkfifo(&path);

    let r = iced_bounded(&env, &["status", &bad]).refused(3, "not-a-regular-file");
    names(&r, &path, "a FIFO");
    let rows = iced_bounded(&env, &["list"]).ok().json();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[0]["id"], good.as_str());
    assert_eq!(rows[1]["error"]["code"], "not-a-regular-file", "{rows:?}");
}

/// A knowledge file the brief would quote is not read when it is a FIFO; the brief says so in its
/// place, as it does for a missing one, and the agent is handed out at once.
#[test]
fn a_fifo_at_a_knowledge_file_is_cited_not_read() {
    let (env, id) = TestEnv::buildable(json!({"verify": {"independent": false, "commands": []}}));
    let knowledge = env.path(".iced/memory/knowledge.md");
    mkfifo(&knowledge);
    let out = iced_bounded(&env, &["build", &id, "--no-wait"]);
    assert_eq!(out.code, 0, "{out:#?}");
    let agent = iced_bounded(&env, &["implement", "step"]).json();
    assert_eq!(agent["action"], "start_agent", "{agent}");
    let brief = std::fs::read_to_string(str_of(&agent, "brief")).unwrap();
    assert!(
        brief.contains("### .iced/memory/knowledge.md\n\n(not read: `")
            && brief.contains("knowledge.md` is a FIFO, not a regular file"),
        "{brief}"
    );
}
