//! Landing end to end (SPEC section 23): a delivered lane reaches its target under the
//! repository's rule, carrying its own close, and the lane goes. Real temporary git repositories,
//! a local bare repository as the remote where one is needed, `fixtures/fake-agent` as the
//! implementer (and validator), and `fixtures/fake-forge` standing in for a forge's command line.
//!
//! Every definition-of-done command here appends a line to `dod.log` outside the repository, so a
//! test counts how often the definition of done really ran (once for the receipt, once more for
//! each landing round that brought the target in).

use crate::env::{fake_runner, git_at, merge_json, TestEnv, NOW};
use crate::loop_e2e::{
    build, json_lines, lane_branch, run_show, step, step_until, str_of, worktree_of, WAIT,
};
use iced::run::state::{
    Base, Driver, Lane, Run, RunStatus, Stage, State, StepRecord, StepStatus, SCHEMA,
};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The implementer: one new file, committed, and evidence for both expectations.
const AGENT: &str = "commit src/session.rs sessions refresh on activity\nreport-ok E1 E2\n";
const AGENT_FILE: &str = "src/session.rs";
const AGENT_TEXT: &str = "sessions refresh on activity\n";

/// The independent validator's answer when it passes the lane.
const PASS: &str = r#"{"verdict": "pass", "expectations": [{"id": "E1", "result": "pass", "evidence": "tests/session.rs::refresh passes"}, {"id": "E2", "result": "pass", "evidence": "tests/session.rs::idle passes"}], "failures": [{"id": "F1", "triggered": false, "evidence": "an active session stayed"}], "constraints": [{"id": "C1", "violated": false, "evidence": "passwords untouched"}]}"#;

const FAKE_FORGE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/fake-forge");
const PR_URL: &str = "https://forge.test/o/r/pull/7";

// ---- helpers ----------------------------------------------------------------------------------

/// A buildable unit (E1, E2) whose implementer is the fake agent following `script`, without
/// independent validators, with `dod` definition-of-done commands (each appending to `dod.log`
/// outside the repository) and `land` as the config's `land`; everything committed.
fn landing_env(script: &str, dod: usize, land: Value) -> (TestEnv, String) {
    TestEnv::buildable_with(|env| {
        let mut config = fake_runner(env, script);
        merge_json(
            &mut config,
            &json!({
                "verify": {"independent": false, "commands": dod_commands(env, dod)},
                "land": land,
            }),
        );
        config
    })
}

/// `n` definition-of-done commands, each appending `ran <k>` to `dod.log` outside the repository
/// (`ran <k> on the merge` where the person's `docs/person.md` is in its tree: after the target
/// that gained it was merged into the lane).
fn dod_commands(env: &TestEnv, n: usize) -> Value {
    let log = env.outside("dod.log");
    let script = "if [ -f docs/person.md ]; then echo \"ran $1 on the merge\"; else echo \"ran $1\"; fi >> \"$0\"";
    (0..n)
        .map(|k| json!({"argv": ["sh", "-c", script, log, k.to_string()], "timeoutSec": 30}))
        .collect()
}

/// Every line of `dod.log`.
fn dod_log(env: &TestEnv) -> Vec<String> {
    std::fs::read_to_string(env.outside("dod.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// How often definition-of-done command `k` ran.
fn dod_runs(env: &TestEnv, k: usize) -> usize {
    dod_log(env)
        .iter()
        .filter(|l| **l == format!("ran {k}") || **l == format!("ran {k} on the merge"))
        .count()
}

/// A bare repository beside the checkout, added as `origin`, with `main` pushed to it.
pub(crate) fn add_remote(env: &TestEnv) -> PathBuf {
    let remote = env.outside("remote.git");
    git_at(
        remote.parent().unwrap(),
        &[
            "init",
            "-q",
            "--bare",
            "-b",
            "main",
            &remote.display().to_string(),
        ],
    );
    env.git(&["remote", "add", "origin", &remote.display().to_string()]);
    env.git(&["push", "-q", "origin", "main"]);
    remote
}

/// The commit `reference` names in the bare `remote`, if any.
pub(crate) fn remote_rev(remote: &Path, reference: &str) -> Option<String> {
    let out = Command::new("git")
        .args(["rev-parse", "--verify", "--quiet", reference])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_DIR", remote)
        .output()
        .expect("git runs");
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

pub(crate) fn rev(env: &TestEnv, reference: &str) -> String {
    env.git_out(&["rev-parse", "--verify", reference])
        .trim()
        .to_owned()
}

/// The parents of `commit`, in order.
fn parents(env: &TestEnv, commit: &str) -> Vec<String> {
    env.git_out(&["rev-list", "--parents", "-n", "1", commit])
        .split_whitespace()
        .skip(1)
        .map(str::to_owned)
        .collect()
}

pub(crate) fn is_ancestor(env: &TestEnv, a: &str, b: &str) -> bool {
    Command::new("git")
        .args(["merge-base", "--is-ancestor", a, b])
        .current_dir(env.root())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .status()
        .expect("git runs")
        .success()
}

pub(crate) fn branch_exists(env: &TestEnv, branch: &str) -> bool {
    !env.git_out(&["branch", "--list", branch]).trim().is_empty()
}

/// The state file, parsed strictly.
pub(crate) fn state(env: &TestEnv) -> State {
    State::parse(&env.read_bytes(".iced/run/state.json"))
        .unwrap_or_else(|e| panic!("state.json does not parse strictly: {e:?}"))
}

/// The `--json` step reports `iced build --json` printed before its final `{run, status}` line.
fn reports(out: &crate::env::Run) -> Vec<Value> {
    let mut lines = json_lines(out);
    lines.pop();
    lines
}

/// The lane's step record `key` in a record or a `run show` of a run in the state.
fn step_record<'a>(lane: &'a Value, key: &str) -> Option<&'a Value> {
    lane["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .find(|r| r["step"] == key)
}

fn steps_of(lane: &Value) -> Vec<String> {
    lane["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|r| str_of(r, "step").to_owned())
        .collect()
}

/// What a landed and retired run leaves: no run in the state, its record (read by `run show`), the
/// lane's worktree and branch gone, and the closed unit at `target_ref`. Returns the record and
/// the delivery commit.
fn assert_landed_and_retired(
    env: &TestEnv,
    id: &str,
    run: &str,
    target_ref: &str,
) -> (Value, String) {
    let left = state(env);
    assert!(
        left.runs.is_empty(),
        "a landed and retired run leaves state.json: {:?}",
        left.runs.keys().collect::<Vec<_>>()
    );
    assert!(
        env.path(&format!(".iced/run/{run}/record.json")).is_file(),
        "the run's record stays"
    );
    let record = run_show(env, run);
    assert_eq!(record["run"]["id"], run, "{record:#}");
    assert_eq!(record["run"]["status"], "delivered", "{record:#}");
    let lane = &record["run"]["lanes"][0];
    assert_eq!(lane["stage"], "delivered", "{lane:#}");
    // Every step is done, but a landing round the target's moving superseded (its push refused).
    let round = lane["land_round"].as_u64().expect("land_round");
    for r in lane["steps"].as_array().expect("steps") {
        let superseded = r["outcome"]["again"] == true
            && r["outcome"]["new_round"] == true
            && str_of(r, "step")
                .rsplit_once('-')
                .and_then(|(_, n)| n.parse::<u64>().ok())
                .is_some_and(|n| n < round);
        assert!(
            r["status"] == "done" || superseded,
            "every step of a landed lane is done: {r:#}"
        );
    }
    assert_eq!(
        step_record(lane, "retire").expect("a retire record")["outcome"]["retired"],
        true
    );
    let delivery = str_of(
        &step_record(lane, "deliver").expect("a deliver record")["outcome"],
        "commit",
    )
    .to_owned();

    assert!(
        !worktree_of(env, id).exists(),
        "the lane's worktree is removed: {}",
        worktree_of(env, id).display()
    );
    assert!(
        !branch_exists(env, &lane_branch(id)),
        "the lane's branch is deleted"
    );
    assert!(
        !env.outside("repo.iced-worktrees").exists(),
        "the loop's worktrees folder goes with its last worktree"
    );
    let worktrees = env.git_out(&["worktree", "list", "--porcelain"]);
    assert_eq!(
        worktrees
            .lines()
            .filter(|l| l.starts_with("worktree "))
            .count(),
        1,
        "only the person's checkout is left: {worktrees}"
    );
    assert!(!env.claim_path(id).exists(), "the claim is released");

    let closed = env.git_out(&["show", &format!("{target_ref}:intent/{id}/iced.md")]);
    assert!(
        closed.lines().any(|l| l == "status: done"),
        "the unit is closed at {target_ref}:\n{closed}"
    );
    for file in ["evidence.md", "verify.json"] {
        env.git_out(&[
            "cat-file",
            "-e",
            &format!("{target_ref}:intent/{id}/{file}"),
        ]);
    }
    (record, delivery)
}

/// The person's checkout follows the target: on `main`, at `main`, clean, with the agent's file
/// and the closed unit in its files.
fn assert_checkout_follows(env: &TestEnv, id: &str) {
    assert_eq!(
        env.git_out(&["symbolic-ref", "--short", "HEAD"]).trim(),
        "main"
    );
    assert_eq!(
        env.git_out(&["status", "--porcelain", "--untracked-files=all"]),
        "",
        "the person's checkout is clean after landing"
    );
    assert_eq!(
        env.read(AGENT_FILE),
        AGENT_TEXT,
        "the agent's file is in the checkout"
    );
    assert!(
        env.read(&format!("intent/{id}/iced.md"))
            .lines()
            .any(|l| l == "status: done"),
        "the checkout's unit file is closed"
    );
}

// ---- merge, by strategy -----------------------------------------------------------------------

/// `land.mode: merge` with `strategy`, into local `main` (checked out in the person's checkout),
/// and with `remote`, into `origin/main` as well.
fn merge_lands(strategy: &str, remote: bool) {
    let mut land = json!({"mode": "merge", "strategy": strategy});
    let (env, id) = landing_env(AGENT, 1, land.clone());
    let origin = remote.then(|| add_remote(&env));
    if remote {
        land["remote"] = json!("origin");
        env.patch_config(&json!({"land": land}));
        env.commit_all("land through origin");
        env.git(&["push", "-q", "origin", "main"]);
    }
    let base = rev(&env, "main");

    let (out, last) = build(&env, &id, &[], 0);
    let run = str_of(&last, "run").to_owned();
    assert_eq!(last["action"], "delivered", "{out:#?}");
    assert_eq!(
        last["status"], "delivered",
        "`build` ends saying the run was delivered: {out:#?}"
    );
    let final_report = reports(&out).pop().expect("a final step report");
    assert!(
        str_of(&final_report, "next").contains("landed in `main`"),
        "{final_report}"
    );

    let (record, delivery) = assert_landed_and_retired(&env, &id, &run, "main");
    let main = rev(&env, "main");
    let lane = &record["run"]["lanes"][0];
    let keys = steps_of(lane);
    for key in ["integrate-1", "landcommit-1", "land-1", "retire"] {
        assert!(keys.contains(&key.to_owned()), "no {key}: {keys:?}");
    }
    assert!(
        !keys.iter().any(|k| k.starts_with("retest-")),
        "the target did not move: nothing is tested again: {keys:?}"
    );
    assert_eq!(
        step_record(lane, "integrate-1").unwrap()["outcome"]["merged"],
        false
    );
    assert_eq!(
        step_record(lane, "land-1").unwrap()["outcome"]["commit"],
        main.as_str(),
        "the recorded landing is main's commit"
    );
    assert_eq!(dod_runs(&env, 0), 1, "the definition of done ran once");

    // The agent's commit and the delivery are the lane's two commits.
    let agent_commit = parents(&env, &delivery);
    assert_eq!(agent_commit.len(), 1);
    assert_eq!(parents(&env, &agent_commit[0]), vec![base.clone()]);
    match strategy {
        "ff" => assert_eq!(main, delivery, "ff: main is the lane's head"),
        "merge" => {
            assert_eq!(
                parents(&env, &main),
                [base.clone(), delivery.clone()],
                "merge: one merge commit of main and the lane"
            );
            let message = env.git_out(&["log", "-1", "--format=%B", &main]);
            assert!(message.contains(&format!("Iced-Run: {run}")), "{message}");
        }
        "squash" => {
            assert_eq!(
                parents(&env, &main),
                vec![base.clone()],
                "squash: one commit on top of main"
            );
            assert_eq!(
                rev(&env, &format!("{main}^{{tree}}")),
                rev(&env, &format!("{delivery}^{{tree}}")),
                "squash: the lane's tree"
            );
            assert!(!is_ancestor(&env, &delivery, &main));
        }
        other => unreachable!("{other}"),
    }
    if strategy != "squash" {
        assert!(is_ancestor(&env, &agent_commit[0], &main));
        assert!(is_ancestor(&env, &delivery, &main));
    }
    assert_eq!(
        env.git_out(&["show", &format!("main:{AGENT_FILE}")]),
        AGENT_TEXT
    );
    assert_checkout_follows(&env, &id);
    if let Some(origin) = origin {
        assert_eq!(
            remote_rev(&origin, "refs/heads/main").as_deref(),
            Some(main.as_str()),
            "origin's main is the landed commit"
        );
        assert_eq!(
            step_record(lane, "land-1").unwrap()["outcome"]["remote"],
            "origin"
        );
    }
}

#[test]
fn merge_with_ff_lands_the_lane_head() {
    merge_lands("ff", false);
}

#[test]
fn merge_with_merge_lands_one_merge_commit() {
    merge_lands("merge", false);
}

#[test]
fn merge_with_squash_lands_the_lane_tree_as_one_commit() {
    merge_lands("squash", false);
}

#[test]
fn merge_with_ff_lands_in_the_remote_too() {
    merge_lands("ff", true);
}

#[test]
fn merge_with_merge_lands_in_the_remote_too() {
    merge_lands("merge", true);
}

#[test]
fn merge_with_squash_lands_in_the_remote_too() {
    merge_lands("squash", true);
}

// ---- the person's checkout ----------------------------------------------------------------------

/// The target is checked out in the person's checkout, where they have an uncommitted change to a
/// file the landing changes: git refuses the fast-forward, the lane blocks, and their change, the
/// target and the lane are all as they were.
#[test]
fn an_uncommitted_change_the_landing_would_overwrite_blocks_the_lane() {
    let (env, id) = landing_env(
        "commit README.md the agent's readme\nreport-ok E1 E2\n",
        1,
        json!({"mode": "merge", "strategy": "merge"}),
    );
    let base = rev(&env, "main");
    env.write("README.md", "the person's unsaved work\n");

    let (out, last) = build(&env, &id, &[], 4);
    assert_eq!(last["status"], "blocked", "{out:#?}");
    let run = str_of(&last, "run").to_owned();
    assert_eq!(
        env.read("README.md"),
        "the person's unsaved work\n",
        "the person's change is intact"
    );
    assert_eq!(rev(&env, "main"), base, "main did not move");
    assert_eq!(env.git_out(&["status", "--porcelain"]), " M README.md\n");

    let s = state(&env);
    let lane = &s.runs[&run].lanes[0];
    assert_eq!(s.runs[&run].status, RunStatus::Blocked);
    assert_eq!(lane.stage, Stage::Blocked);
    let reason = lane.reason.clone().unwrap_or_default();
    assert!(
        reason.contains("checked out at") && reason.contains("could not be fast-forwarded"),
        "the reason says the checkout refused: {reason}"
    );
    assert!(
        reason.contains("README.md"),
        "the reason names the file that would be overwritten: {reason}"
    );
    assert!(
        str_of(&reports(&out).pop().unwrap(), "next").contains("could not be fast-forwarded"),
        "{out:#?}"
    );
    // Nothing of the lane is lost: its branch, its worktree, its delivery.
    let delivery = lane.outcome(&crate::env::key("deliver")).unwrap()["commit"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(rev(&env, &lane_branch(&id)), delivery);
    assert!(worktree_of(&env, &id).is_dir());
    assert_eq!(
        lane.record(&crate::env::key("land-1")).map(|r| r.status),
        Some(StepStatus::Failed)
    );
    assert!(lane.outcome(&crate::env::key("retire")).is_none());
}

// ---- a target that moved ------------------------------------------------------------------------

/// The person commits to `main` while the lane works: landing merges `main` into the lane, runs
/// the definition of done again on the merge, and only then lands both.
#[test]
fn a_target_that_moved_is_merged_in_and_tested_again_before_landing() {
    let (env, id) = landing_env(AGENT, 2, json!({"mode": "merge", "strategy": "merge"}));
    let base = rev(&env, "main");
    let (_, started) = build(&env, &id, &["--no-wait"], 0);
    assert_eq!(started["status"], "running");
    let run = str_of(&started, "run").to_owned();
    env.write("docs/person.md", "the person's own work\n");
    env.commit_all("the person's own work");
    let person = rev(&env, "main");
    assert_ne!(person, base);

    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    assert_eq!(last["run"], run.as_str());
    let (record, delivery) = assert_landed_and_retired(&env, &id, &run, "main");
    let lane = &record["run"]["lanes"][0];
    let integrated = &step_record(lane, "integrate-1").unwrap()["outcome"];
    assert_eq!(integrated["merged"], true, "{integrated}");
    assert_eq!(integrated["target_commit"], person.as_str());
    // Every definition-of-done command ran twice: for the receipt, and on the merge.
    for k in 0..2 {
        let retest = step_record(lane, &format!("retest-1-{k}-0"))
            .unwrap_or_else(|| panic!("no retest-1-{k}-0 in {:?}", steps_of(lane)));
        assert_eq!(retest["status"], "done");
        assert_eq!(retest["outcome"]["exit_code"], 0);
        assert_eq!(
            dod_runs(&env, k),
            2,
            "command {k} ran for the receipt and on the merge"
        );
    }
    // The receipt's run saw the lane alone; the retest ran on the merge, with the person's work.
    let mut log = dod_log(&env);
    log.sort();
    assert_eq!(
        log,
        ["ran 0", "ran 0 on the merge", "ran 1", "ran 1 on the merge"]
    );
    let at = |key: &str| steps_of(lane).iter().position(|k| k == key).unwrap();
    assert!(at("retest-1-0-0") < at("landcommit-1") && at("retest-1-1-0") < at("landcommit-1"));

    let main = rev(&env, "main");
    let lane_head = str_of(integrated, "head").to_owned();
    assert_eq!(
        parents(&env, &lane_head),
        [delivery.clone(), person.clone()]
    );
    assert_eq!(
        parents(&env, &main),
        [person.clone(), lane_head],
        "one landing merge of the person's main and the lane (which holds main already)"
    );
    assert!(is_ancestor(&env, &delivery, &main));
    assert_eq!(
        env.git_out(&["show", "main:docs/person.md"]),
        "the person's own work\n"
    );
    assert_checkout_follows(&env, &id);
    assert_eq!(env.read("docs/person.md"), "the person's own work\n");
}

/// `main` and the lane change the same line: bringing `main` into the lane conflicts, the lane
/// blocks naming the file, and the merge is aborted (the lane's worktree is clean, at its
/// delivery).
#[test]
fn a_conflict_with_the_target_blocks_the_lane_naming_the_file() {
    let (env, id) = landing_env(
        "commit README.md the agent's readme\nreport-ok E1 E2\n",
        1,
        json!({"mode": "merge", "strategy": "merge"}),
    );
    let (_, started) = build(&env, &id, &["--no-wait"], 0);
    let run = str_of(&started, "run").to_owned();
    env.write("README.md", "the person's readme\n");
    env.commit_all("the person's readme");
    let person = rev(&env, "main");

    let (out, last) = build(&env, &id, &[], 4);
    assert_eq!(last["status"], "blocked", "{out:#?}");
    let s = state(&env);
    let lane = &s.runs[&run].lanes[0];
    assert_eq!(lane.stage, Stage::Blocked);
    let reason = lane.reason.clone().unwrap_or_default();
    assert!(
        reason.contains("conflicts in README.md"),
        "the reason names the file: {reason}"
    );
    assert!(reason.contains(&lane_branch(&id)), "{reason}");
    assert!(str_of(&reports(&out).pop().unwrap(), "next").contains("README.md"));

    let worktree = worktree_of(&env, &id);
    assert_eq!(
        git_at(
            &worktree,
            &["status", "--porcelain", "--untracked-files=all"]
        ),
        "",
        "the lane's worktree is clean: the merge was aborted"
    );
    let merge_head = Command::new("git")
        .args(["rev-parse", "--verify", "--quiet", "MERGE_HEAD"])
        .current_dir(&worktree)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(!merge_head.status.success(), "no merge is in progress");
    let delivery = lane.outcome(&crate::env::key("deliver")).unwrap()["commit"]
        .as_str()
        .unwrap();
    assert_eq!(git_at(&worktree, &["rev-parse", "HEAD"]).trim(), delivery);
    assert_eq!(rev(&env, "main"), person, "main did not move");
    assert_eq!(env.read("README.md"), "the person's readme\n");
    assert_eq!(dod_runs(&env, 0), 1, "nothing was tested again");
    assert!(lane.record(&crate::env::key("landcommit-1")).is_none());
}

/// The remote's `main` moves between bringing it into the lane and pushing the landing: the push
/// is refused (never forced), and a second round brings it in, tests again and lands.
#[test]
fn a_remote_target_that_moved_under_the_push_lands_in_a_second_round() {
    let (env, id) = landing_env(
        AGENT,
        1,
        json!({"mode": "merge", "strategy": "merge", "remote": "origin"}),
    );
    let origin = add_remote(&env);
    let base = rev(&env, "main");
    // Someone else's clone, one commit ahead; a `git` shim pushes it to origin just before the
    // landing's first push of `main`.
    let other = env.outside("other");
    git_at(
        env.outside("").as_path(),
        &[
            "clone",
            "-q",
            &origin.display().to_string(),
            &other.display().to_string(),
        ],
    );
    std::fs::write(other.join("other.md"), "someone else's work\n").unwrap();
    git_at(&other, &["add", "other.md"]);
    git_at(
        &other,
        &[
            "-c",
            "user.name=Other",
            "-c",
            "user.email=other@example.test",
            "commit",
            "-q",
            "-m",
            "someone else's work",
        ],
    );
    let theirs = git_at(&other, &["rev-parse", "HEAD"]).trim().to_owned();
    let marker = env.outside("raced");
    let path = crate::env::git_shim(
        &env.outside("bin"),
        &format!(
            "case \" $* \" in *' push '*refs/heads/main*) if [ ! -e '{marker}' ]; then : > '{marker}'; \"$REAL_GIT\" -C '{other}' push -q origin HEAD:main || exit 97; fi;; esac\n",
            marker = marker.display(),
            other = other.display()
        ),
    );

    let out = crate::env::run(
        env.command()
            .env("PATH", &path)
            .args(["build", &id, "--json"]),
    );
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(marker.exists(), "the race was staged");
    let last = json_lines(&out).pop().unwrap();
    assert_eq!(last["status"], "delivered", "{out:#?}");
    let run = str_of(&last, "run").to_owned();
    let (record, delivery) = assert_landed_and_retired(&env, &id, &run, "main");
    let lane = &record["run"]["lanes"][0];
    assert_eq!(lane["land_round"], 2, "{lane:#}");
    let history: Vec<Value> =
        std::fs::read_to_string(env.path(&format!(".iced/run/{run}/history.jsonl")))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
    let land_1 = step_record(lane, "land-1")
        .or_else(|| history.iter().find(|r| r["step"] == "land-1"))
        .expect("a land-1 record");
    assert_eq!(land_1["status"], "failed");
    assert_eq!(land_1["outcome"]["again"], true, "{land_1}");
    assert_eq!(land_1["outcome"]["new_round"], true, "{land_1}");
    let integrated = &step_record(lane, "integrate-2").unwrap()["outcome"];
    assert_eq!(integrated["merged"], true);
    assert_eq!(integrated["target_commit"], theirs.as_str());
    assert_eq!(step_record(lane, "retest-2-0-0").unwrap()["status"], "done");
    assert_eq!(
        dod_runs(&env, 0),
        2,
        "tested for the receipt and again in round 2"
    );

    let main = rev(&env, "main");
    assert_eq!(
        remote_rev(&origin, "refs/heads/main").as_deref(),
        Some(main.as_str())
    );
    assert_eq!(
        parents(&env, &main)[0],
        theirs,
        "landed on top of the other push"
    );
    assert!(is_ancestor(&env, &delivery, &main));
    assert!(is_ancestor(&env, &base, &main));
    assert_checkout_follows(&env, &id);
    assert_eq!(env.read("other.md"), "someone else's work\n");
}

// ---- pull requests ------------------------------------------------------------------------------

/// A buildable unit landing by pull request through `origin` (a bare repository) and the fake
/// forge (its calls logged to `forge/calls.log`, with `land.pr.find` set), `arm` as `land.arm`;
/// `validated`: an independent validator (the fake agent) judges each expectation. Returns the
/// env, the unit, the forge's directory, the remote, and the PATH for `iced`: a `git` shim that
/// logs every push to the forge's log, so the order of pushes and forge calls is on one page.
fn pr_env(arm: &str, validated: bool) -> (TestEnv, String, PathBuf, PathBuf, std::ffi::OsString) {
    let forge_argv = |env: &TestEnv, verb: &str, rest: &[&str]| -> Value {
        let mut argv = vec![
            "bash".to_owned(),
            FAKE_FORGE.to_owned(),
            env.outside("forge").display().to_string(),
            verb.to_owned(),
        ];
        argv.extend(rest.iter().map(|s| (*s).to_owned()));
        json!(argv)
    };
    let script = if validated {
        format!("role implementer\n{AGENT}role validator\nreport {PASS}\n")
    } else {
        AGENT.to_owned()
    };
    let (env, id) = TestEnv::buildable_with(|env| {
        let mut config = fake_runner(env, &script);
        merge_json(
            &mut config,
            &json!({
                "verify": {"independent": validated, "lenses": ["full"], "commands": dod_commands(env, 1)},
                "land": {
                    "mode": "pr", "remote": "origin", "arm": arm,
                    "pr": {
                        "open": forge_argv(env, "open", &["--head", "{branch}", "--base", "{target}", "--title", "{title}", "--body-file", "{body_file}"]),
                        "arm": forge_argv(env, "arm", &["{pr_number}", "{pr_url}"]),
                        "find": forge_argv(env, "find", &["{branch}"]),
                    }
                }
            }),
        );
        if validated {
            merge_json(
                &mut config,
                &json!({"roles": {"validator": {"runner": "fake"}}}),
            );
        }
        config
    });
    let forge = env.outside("forge");
    std::fs::create_dir_all(&forge).unwrap();
    let remote = add_remote(&env);
    let path = crate::env::git_shim(
        &env.outside("bin"),
        &format!(
            "case \" $* \" in *' push '*) printf 'git push\\t%s\\n' \"$*\" >> '{}';; esac\n",
            forge.join("calls.log").display()
        ),
    );
    (env, id, forge, remote, path)
}

/// Every logged call, each as its tab-separated fields (`forge <verb>` or `git push`, then the
/// arguments).
fn calls(forge: &Path) -> Vec<Vec<String>> {
    std::fs::read_to_string(forge.join("calls.log"))
        .unwrap_or_default()
        .lines()
        .map(|l| l.split('\t').map(str::to_owned).collect())
        .collect()
}

fn iced_with_path(env: &TestEnv, path: &std::ffi::OsStr, args: &[&str]) -> crate::env::Run {
    crate::env::run(env.command().env("PATH", path).args(args))
}

/// The forge merges the lane's delivery (pushed to the remote's `main`); the next `iced build`
/// retires the lane and the run ends delivered.
fn forge_merges_and_build_delivers(
    env: &TestEnv,
    id: &str,
    path: &std::ffi::OsStr,
    remote: &std::path::Path,
    lane: &Lane,
) {
    let delivery = lane.outcome(&crate::env::key("deliver")).unwrap()["commit"]
        .as_str()
        .unwrap()
        .to_owned();
    env.git(&[
        "push",
        "-q",
        &remote.display().to_string(),
        &format!("{delivery}:refs/heads/main"),
    ]);
    let out = iced_with_path(env, path, &["build", id, "--json"]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(
        json_lines(&out).pop().unwrap()["status"],
        "delivered",
        "{out:#?}"
    );
}

/// No `git push` after the pull request was armed (nor, without arming, after it was opened).
fn assert_no_push_after(log: &[Vec<String>], verb: &str) {
    let at = log
        .iter()
        .position(|c| c[0] == format!("forge {verb}"))
        .unwrap_or_else(|| panic!("no `{verb}` call in {log:#?}"));
    let later: Vec<&Vec<String>> = log[at..].iter().filter(|c| c[0] == "git push").collect();
    assert!(
        later.is_empty(),
        "the loop pushed after `{verb}`: {later:?}\nevery call: {log:#?}"
    );
}

/// `land.mode: pr` with `arm: auto`: the lane branch is pushed, the pull request opened (every
/// placeholder filled, the body rendered from the run) and armed, and never pushed to again. The
/// run then waits for the forge; once the forge has merged it, the lane retires and the run leaves
/// the state.
#[test]
fn a_pull_request_is_pushed_opened_armed_and_never_pushed_again() {
    let (env, id, forge, remote, path) = pr_env("auto", true);
    let branch = lane_branch(&id);
    let base = rev(&env, "main");

    let out = iced_with_path(&env, &path, &["build", &id, "--json"]);
    assert_eq!(out.code, 0, "{out:#?}");
    let last = json_lines(&out).pop().unwrap();
    let run = str_of(&last, "run").to_owned();
    assert_eq!(
        last["status"], "running",
        "the run waits for the forge: {out:#?}"
    );
    assert_eq!(last["action"], "waiting");
    let waiting = reports(&out).pop().unwrap();
    assert_eq!(waiting["stage"], "retire");
    assert_eq!(
        str_of(&waiting, "next"),
        format!("the pull request {PR_URL} has not landed in `main` yet")
    );
    // A retire that waits on the pull request is logged as waiting, never as a failure.
    let retire_events: Vec<String> = env
        .read(".iced/run/events.jsonl")
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["step"] == "retire")
        .map(|e| str_of(&e, "event").to_owned())
        .collect();
    assert!(
        retire_events.contains(&"step_waits".to_owned())
            && !retire_events.contains(&"step_failed".to_owned()),
        "{retire_events:?}"
    );

    // Pushed, then found nothing, opened, armed: in that order, each once.
    let log = calls(&forge);
    let kinds: Vec<&str> = log.iter().map(|c| c[0].as_str()).collect();
    assert_eq!(
        kinds,
        ["git push", "forge find", "forge open", "forge arm"],
        "{log:#?}"
    );
    let s = state(&env);
    let lane = &s.runs[&run].lanes[0];
    let delivery = lane.outcome(&crate::env::key("deliver")).unwrap()["commit"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        log[0][1].ends_with(&format!("origin {delivery}:refs/heads/{branch}")),
        "the lane branch is pushed to origin: {:?}",
        log[0]
    );
    assert_eq!(
        remote_rev(&remote, &format!("refs/heads/{branch}")),
        Some(delivery.clone())
    );
    assert_eq!(
        remote_rev(&remote, "refs/heads/main"),
        Some(base.clone()),
        "nothing landed yet"
    );
    assert_eq!(log[1][1..], vec![branch.clone()]);
    let title = format!("{id}: session timeout");
    // The body is rendered into the pr-open step's own activity folder.
    let body_file = env.path(&format!(
        ".iced/run/{run}/{id}/activities/pr-open-1/body.md"
    ));
    assert_eq!(
        log[2][1..],
        [
            "--head".to_owned(),
            branch.clone(),
            "--base".to_owned(),
            "main".to_owned(),
            "--title".to_owned(),
            title,
            "--body-file".to_owned(),
            body_file.display().to_string(),
        ],
        "open is called with every placeholder filled"
    );
    assert_eq!(
        log[3][1..],
        ["7".to_owned(), PR_URL.to_owned()],
        "arm gets {{pr_number}} and {{pr_url}}"
    );
    let body = std::fs::read_to_string(forge.join("body.md")).expect("the forge read the body");
    assert_eq!(body, std::fs::read_to_string(&body_file).unwrap());
    for needle in [
        format!("Delivers ICED unit `{id}` (run `{run}`"),
        "- E1: pass".to_owned(),
        "- E2: pass".to_owned(),
        "## Findings\n\nNone.".to_owned(),
        "exit 0".to_owned(),
    ] {
        assert!(body.contains(&needle), "the body lacks `{needle}`:\n{body}");
    }
    let opened = lane
        .outcome(&crate::env::key("pr-open"))
        .expect("pr-open is recorded");
    assert_eq!(opened["url"], PR_URL);
    assert_eq!(opened["number"], 7);
    assert_eq!(
        lane.outcome(&crate::env::key("pr-arm"))
            .expect("pr-arm is recorded")["armed"],
        true
    );
    assert_eq!(lane.stage, Stage::Retire);

    // Asked again, it still waits, and still pushes nothing.
    let again = iced_with_path(&env, &path, &["implement", "step", "--json"]);
    assert_eq!(again.json()["action"], "waiting", "{again:#?}");
    assert_no_push_after(&calls(&forge), "arm");

    // The forge merges the pull request (here: the lane head becomes origin's main).
    env.git(&[
        "push",
        "-q",
        &remote.display().to_string(),
        &format!("{delivery}:refs/heads/main"),
    ]);
    let mut last = Value::Null;
    let started = Instant::now();
    while last["action"] != "delivered" {
        assert!(started.elapsed() < WAIT, "not retired: {last}");
        let s = iced_with_path(&env, &path, &["implement", "step", "--json"]);
        assert_eq!(s.code, 0, "{s:#?}");
        last = s.json();
        assert!(
            matches!(last["action"].as_str(), Some("advanced" | "delivered")),
            "{last}"
        );
    }
    assert!(
        str_of(&last, "next").contains(&format!("landed through pull request {PR_URL}")),
        "{last}"
    );
    let (record, _) = assert_landed_and_retired(&env, &id, &run, "origin/main");
    let lane = &record["run"]["lanes"][0];
    let opened = &step_record(lane, "pr-open").unwrap()["outcome"];
    assert_eq!(opened["url"], PR_URL, "the record keeps the pull request");
    assert_eq!(opened["number"], 7);
    let log = calls(&forge);
    assert_no_push_after(&log, "arm");
    assert_eq!(
        log.iter().filter(|c| c[0] == "git push").count(),
        1,
        "one push in all: {log:#?}"
    );
    assert_eq!(log.iter().filter(|c| c[0] == "forge open").count(), 1);
    assert_eq!(
        remote_rev(&remote, &format!("refs/heads/{branch}")),
        Some(delivery),
        "the pull request's branch is as it was opened"
    );
}

/// `land.arm: human`: the pull request is opened and left for a person; arm is never called. The
/// body still gives each expectation (judged here by the loop's own checks only).
#[test]
fn with_arm_human_the_pull_request_is_opened_and_never_armed() {
    let (env, id, forge, remote, path) = pr_env("human", false);
    let out = iced_with_path(&env, &path, &["build", &id, "--json"]);
    assert_eq!(out.code, 0, "{out:#?}");
    let last = json_lines(&out).pop().unwrap();
    let run = str_of(&last, "run").to_owned();
    assert_eq!(last["action"], "waiting", "{out:#?}");
    let log = calls(&forge);
    let kinds: Vec<&str> = log.iter().map(|c| c[0].as_str()).collect();
    assert_eq!(kinds, ["git push", "forge find", "forge open"], "{log:#?}");
    assert_no_push_after(&log, "open");
    let s = state(&env);
    let lane = &s.runs[&run].lanes[0];
    assert_eq!(lane.stage, Stage::Retire);
    assert!(
        lane.record(&crate::env::key("pr-arm")).is_none(),
        "no pr-arm step"
    );
    assert_eq!(
        lane.outcome(&crate::env::key("pr-open")).unwrap()["url"],
        PR_URL
    );
    let body = std::fs::read_to_string(forge.join("body.md")).unwrap();
    for needle in [format!("`{id}`"), "- E1: ".to_owned(), "- E2: ".to_owned()] {
        assert!(body.contains(&needle), "the body lacks `{needle}`:\n{body}");
    }

    // A person merges it on the forge; the next step retires the lane.
    forge_merges_and_build_delivers(&env, &id, &path, &remote, lane);
    assert_landed_and_retired(&env, &id, &run, "origin/main");
    let log = calls(&forge);
    assert!(
        log.iter().all(|c| c[0] != "forge arm"),
        "arm was called: {log:#?}"
    );
    assert_no_push_after(&log, "open");
}

// ---- none -----------------------------------------------------------------------------------

/// `land.mode: none`: the run is delivered on its branch, which is reported and stays, with its
/// worktree, and the run stays in the state. `iced run retire` retires it once a person merged it.
#[test]
fn with_mode_none_the_branch_is_reported_and_run_retire_retires_it_once_merged() {
    let (env, id) = landing_env(AGENT, 1, json!({"mode": "none"}));
    let branch = lane_branch(&id);
    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    let run = str_of(&last, "run").to_owned();
    let final_report = reports(&out).pop().unwrap();
    assert_eq!(final_report["action"], "delivered");
    assert!(
        str_of(&final_report, "next").contains(&format!("`{branch}`")),
        "the final report names the lane branch: {final_report}"
    );
    assert!(branch_exists(&env, &branch));
    assert!(worktree_of(&env, &id).is_dir());
    let s = state(&env);
    assert_eq!(
        s.runs[&run].status,
        RunStatus::Delivered,
        "the run stays in the state"
    );
    assert!(s.runs[&run].lanes[0]
        .steps
        .iter()
        .all(|r| !r.step.to_string().starts_with("land")));

    // Not merged yet: nothing is retired.
    let kept = env.iced_json(&["run", "retire"]).ok().json();
    assert_eq!(kept[0]["run"], run.as_str());
    assert_eq!(kept[0]["retired"], false, "{kept}");
    assert_eq!(kept[0]["lanes"][0]["result"], "not landed in `main` yet");
    assert!(branch_exists(&env, &branch) && worktree_of(&env, &id).is_dir());
    assert_eq!(state(&env).runs.len(), 1);

    // A person merges the branch; `run retire` retires the lane and the run leaves the state.
    env.git(&[
        "merge",
        "-q",
        "--no-ff",
        "-m",
        "merge the delivery",
        &branch,
    ]);
    let retired = env.iced_json(&["run", "retire", &run]).ok().json();
    assert_eq!(retired[0]["retired"], true, "{retired}");
    assert_eq!(retired[0]["lanes"][0]["result"], "retired");
    assert!(!branch_exists(&env, &branch), "the branch is deleted");
    assert!(!worktree_of(&env, &id).exists(), "the worktree is removed");
    assert!(state(&env).runs.is_empty(), "the run left the state");
    let record = run_show(&env, &run);
    assert_eq!(record["run"]["status"], "delivered");
    assert_checkout_follows(&env, &id);
    // Nothing left to retire.
    assert_eq!(env.iced_json(&["run", "retire"]).ok().json(), json!([]));
}

// ---- run show and handover ------------------------------------------------------------------------

/// `text` with what differs from run to run replaced: the temporary directory, the run and unit
/// ids, the pinned clock, commit shas (40 hex digits) and nonces (32).
fn normalize(text: &str, env: &TestEnv, run: &str, id: &str) -> String {
    let tmp = env.root().parent().unwrap().display().to_string();
    let text = text
        .replace(&tmp, "<tmp>")
        .replace(run, "<run>")
        .replace(id, "<unit>")
        .replace(NOW, "<now>");
    // Durations differ run to run.
    let text = text
        .split(" ms,")
        .map(|part| match part.rfind(' ') {
            Some(at)
                if part[at + 1..].chars().all(|c| c.is_ascii_digit()) && at + 1 < part.len() =>
            {
                format!("{} <ms>", &part[..at])
            }
            _ => part.to_owned(),
        })
        .collect::<Vec<_>>()
        .join(" ms,");
    let mut out = String::new();
    let mut hex = String::new();
    let flush = |hex: &mut String, out: &mut String| {
        out.push_str(match hex.len() {
            40 => "<sha>",
            32 => "<nonce>",
            _ => hex.as_str(),
        });
        hex.clear();
    };
    for c in text.chars() {
        if c.is_ascii_digit() || ('a'..='f').contains(&c) {
            hex.push(c);
        } else {
            flush(&mut hex, &mut out);
            out.push(c);
        }
    }
    flush(&mut hex, &mut out);
    out
}

fn assert_snapshot(what: &str, actual: &str, expected: &str) {
    if actual != expected {
        panic!("{what} differs from its snapshot; it reads:\n{actual}\n--- the snapshot:\n{expected}\n--- (escaped, as read:)\n{actual:?}");
    }
}

/// `iced run show` (from the record, once the run left the state; from the state before) and
/// `iced run handover`, on finished runs, as a person reads them.
#[test]
fn run_show_and_handover_read_well_on_finished_runs() {
    // A landed and retired run: `run show` reads its record.
    let (env, id) = landing_env(AGENT, 1, json!({"mode": "merge", "strategy": "merge"}));
    let (_, last) = build(&env, &id, &[], 0);
    let run = str_of(&last, "run").to_owned();
    let shown = env.iced(&["run", "show", &run]).ok();
    assert_snapshot(
        "`run show` of a landed run",
        &normalize(&shown.stdout, &env, &run, &id),
        SHOW_LANDED,
    );
    // A unique part of the id finds it too.
    let short = &run[run.len() - 6..];
    assert_eq!(env.iced(&["run", "show", short]).ok().stdout, shown.stdout);
    let record = run_show(&env, &run);
    assert_eq!(record["settings"]["implementer"]["runner"], "fake");
    assert_eq!(record["settings"]["land"]["mode"], "merge");
    assert_eq!(record["settings"]["land"]["strategy"], "merge");
    let landed = step_record(&record["run"]["lanes"][0], "land-1").unwrap();
    assert_eq!(landed["outcome"]["commit"], rev(&env, "main").as_str());
    assert_eq!(landed["outcome"]["target"], "main");
    let brief = step_record(&record["run"]["lanes"][0], "brief").unwrap();
    assert!(Path::new(str_of(&brief["outcome"], "path")).is_file());
    assert_snapshot(
        "`run handover` with no live run",
        &normalize(&env.iced(&["run", "handover"]).ok().stdout, &env, &run, &id),
        HANDOVER_NONE,
    );

    // A run delivered on its branch (land.mode none) stays in the state.
    let (env, id) = landing_env(AGENT, 1, json!({"mode": "none"}));
    let (_, last) = build(&env, &id, &[], 0);
    let run = str_of(&last, "run").to_owned();
    let text = env.iced(&["run", "show", &run]).ok().stdout;
    let json = run_show(&env, &run);
    // Each step line ends with the first 160 characters of its outcome, which hold durations and
    // nonces: checked against the JSON, then replaced.
    let mut lines = Vec::new();
    for line in text.lines() {
        let record = json["lanes"][0]["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| line.starts_with(&format!("  ({id}, {}, 1) Done ", str_of(r, "step"))));
        match record {
            Some(r) => {
                let (head, outcome) = line.split_at(line.find(") Done ").unwrap() + 7);
                let full = r["outcome"].to_string();
                assert_eq!(
                    outcome,
                    full.chars().take(160).collect::<String>(),
                    "{line}"
                );
                lines.push(format!("{head}<outcome>"));
            }
            None => lines.push(line.to_owned()),
        }
    }
    assert_snapshot(
        "`run show` of a run delivered on its branch",
        &normalize(&(lines.join("\n") + "\n"), &env, &run, &id),
        SHOW_DELIVERED,
    );
    assert_snapshot(
        "`run handover <run>` of a run delivered on its branch",
        &normalize(
            &env.iced(&["run", "handover", &run]).ok().stdout,
            &env,
            &run,
            &id,
        ),
        HANDOVER_DELIVERED,
    );

    // A run blocked at landing: the handover names the hazard.
    let (env, id) = landing_env(
        "commit README.md the agent's readme\nreport-ok E1 E2\n",
        1,
        json!({"mode": "merge", "strategy": "squash"}),
    );
    let (_, started) = build(&env, &id, &["--no-wait"], 0);
    let run = str_of(&started, "run").to_owned();
    env.write("README.md", "the person's readme\n");
    env.commit_all("the person's readme");
    build(&env, &id, &[], 4);
    let handover = env.iced(&["run", "handover"]).ok().stdout;
    assert_snapshot(
        "`run handover` of a run blocked at landing",
        &normalize(&handover, &env, &run, &id),
        HANDOVER_BLOCKED,
    );
    let json = env.iced_json(&["run", "handover"]).ok().json();
    assert_eq!(
        json["handover"].as_str().map(str::trim_end),
        Some(handover.trim_end())
    );
    assert_eq!(json["runs"][0]["id"], run.as_str());
    assert_eq!(json["runs"][0]["status"], "blocked");
}

const SHOW_LANDED: &str = "<run> (delivered, from its record: it has left the state)
lane <unit> stage delivered attempt 1
  landed: <sha>
  (brief, 1) done
  (worktree, 1) done
  (implement, 1) done
  (receipt, 1) done
  (dod-0-0, 1) done
  (deliver, 1) done
  (integrate-1, 1) done
  (landcommit-1, 1) done
  (land-1, 1) done
  (retire, 1) done
cost: unknown (1 agent that reported none)
  agent <unit> implement attempt 1: runner fake, model not reported, ? turns, cost unknown, <ms> ms, exit 0
";

const HANDOVER_NONE: &str = r#"# Handover

In force: implementer runner `fake`; no independent validators (the loop's own checks only); up to 3 attempts; landing `merge`; pace: 2 lanes and 2 agents at once.

No live run. Start one with `iced build <id>`.
"#;
const SHOW_DELIVERED: &str = r#"<run> delivered: <unit> (driver process, updated <now>)
lane <unit> stage delivered attempt 1 branch iced/<unit>/<unit>
  next: Delivered on `iced/<unit>/<unit>`: merge it, then `iced run retire`.
  (<unit>, brief, 1) Done <outcome>
  (<unit>, worktree, 1) Done <outcome>
  (<unit>, implement, 1) Done <outcome>
  (<unit>, receipt, 1) Done <outcome>
  (<unit>, dod-0-0, 1) Done <outcome>
  (<unit>, deliver, 1) Done <outcome>
cost: unknown (1 agent that reported none)
  agent <unit> implement attempt 1: runner fake, model not reported, ? turns, cost unknown, <ms> ms, exit 0
"#;
const HANDOVER_DELIVERED: &str = r#"# Handover

In force: implementer runner `fake`; no independent validators (the loop's own checks only); up to 3 attempts; landing `none`; pace: 2 lanes and 2 agents at once.

## <run> (delivered, process driver)

- <unit>: delivered (attempt 1). Delivered on `iced/<unit>/<unit>`: merge it, then `iced run retire`.

It has ended: `iced run show <run>` shows what it did.
"#;
const HANDOVER_BLOCKED: &str = r#"# Handover

In force: implementer runner `fake`; no independent validators (the loop's own checks only); up to 3 attempts; landing `merge`; pace: 2 lanes and 2 agents at once.

## <run> (blocked, process driver)

- <unit>: blocked (attempt 1). Needs a person (`iced run resume` after fixing what the reason names).
  Blocked: merging `main` into the lane conflicts in README.md; resolve it on the lane branch `iced/<unit>/<unit>` and resume

Drive it with `iced implement step` (repeat while it says `advanced` or `waiting`).
"#;

/// A step record of attempt 1.
fn rec(step: &str, status: StepStatus, outcome: Option<Value>) -> StepRecord {
    StepRecord {
        step: crate::env::key(step),
        attempt: 1,
        status,
        started_at: NOW.to_owned(),
        ended_at: (status != StepStatus::Started).then(|| NOW.to_owned()),
        inputs: None,
        nonce: (status == StepStatus::Started)
            .then(|| "0123456789abcdef0123456789abcdef".to_owned()),
        pid: None,
        pid_start: None,
        outcome,
    }
}

fn finding(id: &str, severity: &str, status: &str) -> iced::run::validate::Finding {
    use iced::run::validate::{Evidence, Finding, Scenario};
    Finding {
        id: id.to_owned(),
        by: "ruthless".to_owned(),
        round: 1,
        evidence: Evidence {
            file_path: "src/session/refresh.rs".to_owned(),
            criterion_ref: "E2".to_owned(),
            finding_category: "correctness".to_owned(),
            severity: severity.to_owned(),
            summary: "a background poll counts as activity and keeps idle sessions alive"
                .to_owned(),
            failure_scenario: Scenario {
                inputs: "an idle tab polling every minute".to_owned(),
                expected: "signed out after 30 minutes".to_owned(),
                actual: "signed in for hours".to_owned(),
            },
        },
        status: status.to_owned(),
        refutation: None,
        disposition: None,
        head: None,
    }
}

/// One live run of ten lanes, each in another stage, with what a driver must know: an awaited
/// report, running commands and validators, open findings, a blocked lane with a long reason.
fn ten_lane_run(env: &TestEnv) -> Run {
    use StepStatus::{Done, Failed, Started};
    let units = [
        "012-session-refresh-on-activity",
        "013-idle-session-timeout",
        "014-remember-me-cookie",
        "015-password-reset-email",
        "016-audit-log-for-sign-ins",
        "017-rate-limit-sign-in",
        "018-csrf-token-rotation",
        "019-sign-out-everywhere",
        "020-session-list-page",
        "021-two-factor-recovery-codes",
    ];
    let stages = [
        Stage::Brief,
        Stage::Implement,
        Stage::Receipt,
        Stage::Validate,
        Stage::Refute,
        Stage::Deliver,
        Stage::Land,
        Stage::Retire,
        Stage::Blocked,
        Stage::Delivered,
    ];
    let lanes = units
        .iter()
        .zip(stages)
        .map(|(unit, stage)| {
            let mut lane = Lane {
                id: (*unit).to_owned(),
                unit: (*unit).to_owned(),
                stage,
                attempt: 1,
                crashes: 0,
                worktree: Some(
                    env.outside("repo.iced-worktrees")
                        .join(unit)
                        .display()
                        .to_string(),
                ),
                branch: Some(format!("iced/{unit}/{unit}")),
                reason: None,
                steps: vec![rec("brief", Done, Some(json!({"sha256": "x"})))],
                findings: Vec::new(),
                mutations: 0,
                validators: Vec::new(),
                land_round: 0,
                depends: Vec::new(),
                released: false,
                attempts_before: 0,
                arm_requested: false,
                metrics: Vec::new(),
                rejected: None,
            };
            let done = |s: &str| rec(s, Done, Some(json!({})));
            match stage {
                Stage::Implement => lane.steps.push(rec("implement", Started, None)),
                Stage::Receipt => {
                    lane.steps.extend([done("implement"), done("receipt")]);
                    lane.steps.push(rec("dod-0-0", Started, None));
                    lane.steps.push(rec("dod-1-0", Started, None));
                }
                Stage::Validate => {
                    lane.validators = vec!["full".into(), "ruthless".into(), "security".into()];
                    lane.steps.extend([done("implement"), done("receipt")]);
                    for v in &lane.validators {
                        lane.steps.push(rec(&format!("validate-{v}"), Started, None));
                    }
                }
                Stage::Refute => {
                    lane.steps.push(rec("refute", Started, None));
                    lane.findings = vec![
                        finding(&format!("{unit}-F1"), "S2-major", "open"),
                        finding(&format!("{unit}-F2"), "S1-stop-the-line", "open"),
                        finding(&format!("{unit}-F3"), "S3-minor", "noted"),
                    ];
                }
                Stage::Land => {
                    lane.land_round = 1;
                    lane.steps.push(rec("deliver", Done, Some(json!({"commit": "c0ffee"}))));
                    lane.steps.push(rec("integrate-1", Started, None));
                }
                Stage::Retire => {
                    lane.steps.push(rec("pr-open", Done, Some(json!({"url": "https://forge.test/o/r/pull/19", "number": 19}))));
                    lane.steps.push(rec("retire", Failed, Some(json!({"again": true, "new_round": false, "why": "the pull request https://forge.test/o/r/pull/19 has not landed in `main` yet"}))));
                }
                Stage::Blocked => {
                    lane.reason = Some(format!(
                        "merging `main` into the lane conflicts in src/session/refresh.rs, src/session/store.rs, tests/session.rs; resolve it on the lane branch `iced/{unit}/{unit}` and resume\nand a second line that is not shown"
                    ));
                    lane.findings = vec![finding(&format!("{unit}-F1"), "S2-major", "open")];
                }
                _ => {}
            }
            lane
        })
        .collect();
    Run {
        id: "run-20260930T110000-a1b2c3".to_owned(),
        unit: units[0].to_owned(),
        status: RunStatus::Running,
        driver: Driver::Process,
        session: Some("session-1".to_owned()),
        created_at: NOW.to_owned(),
        updated_at: NOW.to_owned(),
        base: Base {
            commit: "0".repeat(40),
            branch: Some("main".to_owned()),
        },
        next_eligible_at: None,
        overrun: None,
        brief_layout: 1,
        paced: 0,
        pace: None,
        window_from: None,
        lanes,
    }
}

/// SPEC 23.5: the handover of a run of ten lanes stays under 400 words, and still names each
/// lane's stage and next move, what is awaited and where, and the hazards.
#[test]
fn the_handover_of_ten_lanes_is_under_four_hundred_words() {
    let env = TestEnv::initialized();
    env.patch_config(&json!({
        "runners": {"claude": {"kind": "command", "argv": ["claude", "-p", "{prompt_file}"], "timeoutSec": 1800},
                    "codex": {"kind": "command", "argv": ["codex", "exec", "{prompt_file}"], "timeoutSec": 1800}},
        "roles": {"implementer": {"runner": "claude", "model": "opus"},
                  "validator": {"runner": "codex", "model": "gpt-5"}},
        "verify": {"lenses": ["full", "failures"], "reviewers": ["ruthless", "security"], "maxAttempts": 3},
        "land": {"mode": "merge", "strategy": "squash"}
    }));
    let run = ten_lane_run(&env);
    let mut state = State {
        schema: SCHEMA,
        ..State::default()
    };
    state.runs.insert(run.id.clone(), run.clone());
    let bytes = serde_json::to_vec_pretty(&state).unwrap();
    assert_eq!(
        State::parse(&bytes).expect("State::parse accepts it"),
        state
    );
    std::fs::create_dir_all(env.path(".iced/run")).unwrap();
    env.write(".iced/run/state.json", &bytes);

    let text = env.iced(&["run", "handover"]).ok().stdout;
    let words = text.split_whitespace().count();
    eprintln!("the handover of ten lanes: {words} words\n{text}");
    assert!(words < 400, "{words} words:\n{text}");
    assert!(text.contains("runner `claude`, model opus"), "{text}");
    assert!(text.contains("runner `codex`, model gpt-5"), "{text}");
    assert!(
        text.contains("(full, failures + ruthless, security)"),
        "{text}"
    );
    assert!(
        text.contains("up to 3 attempts") && text.contains("landing `merge`"),
        "{text}"
    );
    for lane in &run.lanes {
        // A lane that may still start attempts says how many (maxAttempts 3, this is the first).
        let left = if lane.stage.is_final() || matches!(lane.stage.as_str(), "land" | "retire") {
            ""
        } else {
            ", 2 more before it blocks"
        };
        assert!(
            text.contains(&format!(
                "- {}: {} (attempt 1{left})",
                lane.id,
                lane.stage.as_str()
            )),
            "{} at {} is not named:\n{text}",
            lane.id,
            lane.stage.as_str()
        );
    }
    let receipt = env.path(&format!(
        ".iced/run/{}/013-idle-session-timeout/report-1.json",
        run.id
    ));
    assert!(
        text.contains(&receipt.display().to_string()),
        "the awaited report's path:\n{text}"
    );
    assert!(text.contains("dod-0-0, dod-1-0"), "{text}");
    assert!(
        text.contains("validate-full, validate-ruthless, validate-security"),
        "{text}"
    );
    assert!(
        text.contains(
            "Open findings: 016-audit-log-for-sign-ins-F1, 016-audit-log-for-sign-ins-F2.\n"
        ),
        "open findings:\n{text}"
    );
    assert!(
        !text.contains("016-audit-log-for-sign-ins-F3"),
        "a noted finding is no hazard:\n{text}"
    );
    assert!(
        text.contains("Awaiting pull request https://forge.test/o/r/pull/19 to land."),
        "the awaited pull request:\n{text}"
    );
    assert!(
        text.contains("Blocked: merging `main` into the lane conflicts in src/session/refresh.rs"),
        "{text}"
    );
    assert!(!text.contains("a second line"), "{text}");
    assert!(text.contains("integrate-1"), "{text}");

    let json = env.iced_json(&["run", "handover"]).ok().json();
    assert_eq!(
        json["handover"].as_str().map(str::trim_end),
        Some(text.trim_end())
    );
    assert_eq!(json["runs"].as_array().map(Vec::len), Some(1));
    assert_eq!(json["runs"][0]["id"], run.id.as_str());
}

// ---- the demo -------------------------------------------------------------------------------

/// `iced demo --dir <dir> [extra]`, timed; then what it left must be a landed run: the fix and the
/// closed unit on `main` (and in the checkout's files), no run in the state, the run's record, no
/// lane worktree or branch left.
fn demo_lands(extra: &[&str]) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("demo");
    let started = Instant::now();
    let out = crate::env::run(
        Command::new(env!("CARGO_BIN_EXE_iced"))
            .args(["demo", "--dir", &dir.display().to_string(), "--json"])
            .args(extra)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", tmp.path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .stdin(std::process::Stdio::null()),
    );
    let took = started.elapsed();
    eprintln!(
        "`iced demo {}` took {:.2} s",
        extra.join(" "),
        took.as_secs_f64()
    );
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(took < Duration::from_secs(30), "the demo took {took:?}");
    let said = out.json();
    assert_eq!(said["status"], "landed", "{said}");
    let repo = dir.join("greeter");
    let unit = str_of(&said, "unit").to_owned();
    let run = str_of(&said, "run").to_owned();
    let git = |args: &[&str]| git_at(&repo, args);
    assert_eq!(git(&["symbolic-ref", "--short", "HEAD"]).trim(), "main");
    assert_eq!(git(&["status", "--porcelain"]), "", "the checkout is clean");
    assert_eq!(
        std::fs::read_to_string(repo.join("greet.sh")).unwrap(),
        "echo \"Hello, ${1:-world}\"\n",
        "the fix is in the person's files"
    );
    let closed = git(&["show", &format!("main:intent/{unit}/iced.md")]);
    assert!(closed.lines().any(|l| l == "status: done"), "{closed}");
    let parents = git(&["rev-list", "--parents", "-n", "1", "main"]);
    assert_eq!(
        parents.split_whitespace().count(),
        3,
        "main is the landing merge: {parents}"
    );
    let state = State::parse(&std::fs::read(repo.join(".iced/run/state.json")).unwrap()).unwrap();
    assert!(state.runs.is_empty(), "the landed run left the state");
    let record: Value = serde_json::from_slice(
        &std::fs::read(repo.join(format!(".iced/run/{run}/record.json")))
            .expect("the run's record"),
    )
    .unwrap();
    assert_eq!(record["run"]["status"], "delivered");
    assert_eq!(record["run"]["lanes"][0]["stage"], "delivered");
    assert!(
        git(&["branch", "--list", "iced/*"]).trim().is_empty(),
        "no lane branch is left"
    );
    assert_eq!(
        git(&["worktree", "list", "--porcelain"])
            .lines()
            .filter(|l| l.starts_with("worktree "))
            .count(),
        1,
        "no lane worktree is left"
    );
}

#[test]
fn the_demo_lands_in_under_thirty_seconds() {
    demo_lands(&[]);
}

#[test]
fn the_demo_killed_at_its_fourth_step_still_lands() {
    demo_lands(&["--kill-at", "4"]);
}

// ---- retire -------------------------------------------------------------------------------------

/// SPEC 23.3: a lane worktree with untracked or uncommitted changes is never removed: the landing
/// stands, the kept worktree is reported, and the run stays in the state (delivered) until
/// `iced run retire` finds the worktree clean.
#[test]
fn a_dirty_lane_worktree_is_kept_and_retired_later_by_run_retire() {
    let (env, id) = landing_env(AGENT, 1, json!({"mode": "merge", "strategy": "merge"}));
    let (_, started) = build(&env, &id, &["--no-wait"], 0);
    let run = str_of(&started, "run").to_owned();
    step_until(&env, |s| s["stage"] == "retire");
    let worktree = worktree_of(&env, &id);
    std::fs::write(worktree.join("notes.txt"), "the person's notes\n").unwrap();

    let kept = step(&env);
    assert_eq!(kept["stage"], "delivered", "{kept}");
    assert!(
        str_of(&kept, "next").contains("has uncommitted changes and is kept"),
        "{kept}"
    );
    let finished = step(&env);
    assert_eq!(finished["action"], "delivered", "{finished}");
    let next = str_of(&finished, "next");
    assert!(
        next.contains("landed in `main`")
            && next.contains("is kept")
            && !next.contains("the lane is retired"),
        "{finished}"
    );
    assert_eq!(
        std::fs::read_to_string(worktree.join("notes.txt")).unwrap(),
        "the person's notes\n"
    );
    assert!(branch_exists(&env, &lane_branch(&id)));
    let s = state(&env);
    assert_eq!(
        s.runs[&run].status,
        RunStatus::Delivered,
        "the run stays until it is retired"
    );
    assert!(is_ancestor(&env, &lane_branch(&id), "main"), "it landed");

    // Still dirty: `run retire` keeps it, and says so.
    let said = env.iced_json(&["run", "retire"]).ok().json();
    assert_eq!(said[0]["retired"], false, "{said}");
    assert!(
        str_of(&said[0]["lanes"][0], "result").starts_with("kept"),
        "{said}"
    );
    assert!(worktree.join("notes.txt").is_file());

    // The person takes their notes away; `run retire` retires the lane and the run.
    std::fs::remove_file(worktree.join("notes.txt")).unwrap();
    let said = env.iced_json(&["run", "retire"]).ok().json();
    assert_eq!(said[0]["retired"], true, "{said}");
    assert!(!worktree.exists(), "the worktree is removed");
    assert!(
        !branch_exists(&env, &lane_branch(&id)),
        "the branch is deleted"
    );
    assert!(state(&env).runs.is_empty(), "the run left the state");
    let record = run_show(&env, &run);
    assert_eq!(record["run"]["status"], "delivered");
    // The record tells what the loop's own retire step found.
    let retire = step_record(&record["run"]["lanes"][0], "retire").unwrap();
    assert_eq!(retire["outcome"]["retired"], false, "{retire}");
    assert!(
        same_path(str_of(&retire["outcome"], "kept"), &worktree),
        "{retire}"
    );
}

fn same_path(a: &str, b: &Path) -> bool {
    Path::new(a) == b || Path::new(a).canonicalize().ok() == b.canonicalize().ok()
}

/// `land.target` names a branch no worktree has checked out: it moves by a compare-and-swap of
/// the ref, and the person's checkout (on `main`) is left alone.
#[test]
fn a_target_not_checked_out_moves_by_its_ref_alone() {
    let (env, id) = landing_env(
        AGENT,
        1,
        json!({"mode": "merge", "strategy": "ff", "target": "release"}),
    );
    env.git(&["branch", "release"]);
    let main = rev(&env, "main");
    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    let run = str_of(&last, "run").to_owned();
    let (_, delivery) = assert_landed_and_retired(&env, &id, &run, "release");
    assert_eq!(
        rev(&env, "release"),
        delivery,
        "ff: release is the lane's head"
    );
    assert_eq!(rev(&env, "main"), main, "main did not move");
    assert!(
        !env.path(AGENT_FILE).exists(),
        "the person's files are untouched"
    );
    assert_eq!(env.git_out(&["status", "--porcelain"]), "");
}

/// With a remote, the landing is the push to `origin`; the local `main` (and the person's checkout
/// of it) then follows by a fast-forward. A person's uncommitted change that fast-forward would
/// overwrite keeps their checkout where it was, with their change intact, and is said in the
/// landing's outcome; the lane has landed (in `origin`) and retires.
#[test]
fn with_a_remote_a_checkout_that_cannot_follow_is_left_as_it_was() {
    let (env, id) = landing_env(
        "commit README.md the agent's readme\nreport-ok E1 E2\n",
        1,
        json!({"mode": "merge", "strategy": "merge", "remote": "origin"}),
    );
    let origin = add_remote(&env);
    let base = rev(&env, "main");
    env.write("README.md", "the person's unsaved work\n");
    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    let run = str_of(&last, "run").to_owned();
    let (record, delivery) = assert_landed_and_retired(&env, &id, &run, "origin/main");
    let landed = remote_rev(&origin, "refs/heads/main").unwrap();
    assert_eq!(parents(&env, &landed), [base.clone(), delivery]);
    assert_eq!(
        rev(&env, "main"),
        base,
        "the local main is left where it was"
    );
    assert_eq!(env.read("README.md"), "the person's unsaved work\n");
    let outcome = &step_record(&record["run"]["lanes"][0], "land-1").unwrap()["outcome"];
    assert_eq!(outcome["commit"], landed.as_str());
    assert!(
        str_of(outcome, "local").contains("could not be fast-forwarded"),
        "the outcome says the checkout did not follow: {outcome}"
    );
}

// ---- resuming a lane blocked while landing --------------------------------------------------------

/// A lane blocked by a conflict while landing: the person resolves it on the lane branch and
/// resumes. The landing goes on in a new round with their resolution; no implementer runs again,
/// and the close is not committed twice.
#[test]
fn resuming_a_landing_conflict_lands_the_resolution_without_a_new_attempt() {
    let (env, id) = landing_env(
        "commit README.md the agent's readme\nreport-ok E1 E2\n",
        1,
        json!({"mode": "merge", "strategy": "merge"}),
    );
    let (_, started) = build(&env, &id, &["--no-wait"], 0);
    let run = str_of(&started, "run").to_owned();
    env.write("README.md", "the person's readme\n");
    env.commit_all("the person's readme");
    let (_, last) = build(&env, &id, &[], 4);
    assert_eq!(last["status"], "blocked");
    let starts_before = env.agent_starts().len();

    // The person resolves the conflict on the lane branch, in the lane's worktree.
    let worktree = worktree_of(&env, &id);
    let _ = Command::new("git")
        .args(["merge", "--no-edit", "main"])
        .current_dir(&worktree)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    std::fs::write(worktree.join("README.md"), "both readmes, resolved\n").unwrap();
    git_at(&worktree, &["add", "README.md"]);
    git_at(&worktree, &["commit", "-q", "--no-edit"]);

    env.iced_json(&["run", "resume", &run]).ok();
    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    assert_eq!(
        env.agent_starts().len(),
        starts_before,
        "no implementer ran again"
    );
    assert_eq!(
        env.read("README.md"),
        "both readmes, resolved\n",
        "the resolution landed"
    );
    let closes = env.git_out(&["log", "--format=%s", "main"]);
    assert_eq!(
        closes
            .lines()
            .filter(|l| l.starts_with("iced: deliver"))
            .count(),
        1,
        "one close: {closes}"
    );
    let record = run_show(&env, &run);
    let steps = steps_of(&record["run"]["lanes"][0]);
    assert!(
        steps.iter().any(|s| s.starts_with("integrate-2")),
        "{steps:?}"
    );
}

/// A pull request the forge squash-merges never makes the lane head an ancestor of the target;
/// its content is there all the same, and the lane retires.
#[test]
fn a_squash_merged_pull_request_retires_its_lane() {
    let (env, id, _forge, remote, path) = pr_env("human", false);
    let out = iced_with_path(&env, &path, &["build", &id, "--json"]);
    let last = json_lines(&out).pop().unwrap();
    let run = str_of(&last, "run").to_owned();
    let branch = lane_branch(&id);

    // The forge squash-merges: one commit on the remote's main with the lane's tree.
    let clone = env.root().parent().unwrap().join("squasher");
    let git = |dir: &Path, args: &[&str]| {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    git(
        env.root().parent().unwrap(),
        &["clone", "-q", remote.to_str().unwrap(), "squasher"],
    );
    git(&clone, &["config", "user.name", "Forge"]);
    git(&clone, &["config", "user.email", "forge@example.test"]);
    git(&clone, &["fetch", "-q", "origin", &branch]);
    git(&clone, &["merge", "-q", "--squash", "FETCH_HEAD"]);
    git(
        &clone,
        &["commit", "-q", "-m", "squash-merged by the forge"],
    );
    git(&clone, &["push", "-q", "origin", "main"]);

    let done = step_until(&env, |s| s["action"] == "delivered");
    assert_eq!(done["action"], "delivered", "{done}");
    assert!(!branch_exists(&env, &branch), "the lane branch is deleted");
    assert!(state(&env).runs.is_empty(), "the run left the state");
    let _ = run;
}

/// After a pull request is armed the loop never pushes to it: resuming a lane blocked after
/// arming is refused, naming the pull request.
#[test]
fn resuming_after_arming_is_refused() {
    let (env, id, _remote, _forge, path) = pr_env("auto", false);
    let out = iced_with_path(&env, &path, &["build", &id, "--json"]);
    let run = str_of(&json_lines(&out).pop().unwrap(), "run").to_owned();
    // Block the lane after arming (as a failure at retire would), by hand.
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
    let before = env.read(".iced/run/state.json");
    let refused = env
        .iced_json(&["run", "resume", &run])
        .refused(3, "pr-armed");
    assert!(
        str_of(&refused, "reason").contains("https://forge.test/"),
        "{refused}"
    );
    assert_eq!(env.read(".iced/run/state.json"), before, "nothing changed");
}

/// Regression: a call killed right after merging the target into the lane (before recording it)
/// left the loop's own merge on the lane branch, and the next call took it for a commit nobody
/// judged and blocked the lane. Its own merge is recognised (a merge of the target into the
/// delivery whose tree is git's) and the landing goes on.
#[test]
fn a_landing_killed_after_its_merge_of_the_target_lands_on_resume() {
    let (env, id) = landing_env(
        "commit src/session.txt refreshed on activity\nreport-ok E1 E2\n",
        1,
        json!({"mode": "merge", "strategy": "merge"}),
    );
    let (_, started) = build(&env, &id, &["--no-wait"], 0);
    let run = str_of(&started, "run").to_owned();
    env.write("docs/person.md", "the person's own work\n");
    env.commit_all("the person's own work");
    let killed = env
        .command()
        .args(["build", &id, "--json"])
        .env("ICED_FAILPOINT", "land-after-integrate")
        .output()
        .expect("iced runs");
    assert_eq!(killed.status.code(), None, "killed at the failpoint");
    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    assert_eq!(last["run"], run.as_str());
    assert_landed_and_retired(&env, &id, &run, "main");
    assert_eq!(
        env.git_out(&["show", "main:docs/person.md"]),
        "the person's own work\n"
    );
}

/// `land.arm: human`: a person arms the open pull request with `iced run arm`; the loop arms it
/// once, records it, never pushes after, and retires the lane once the forge merged it.
#[test]
fn with_arm_human_a_person_arms_the_pull_request_with_run_arm() {
    let (env, id, forge, remote, path) = pr_env("human", false);
    let out = iced_with_path(&env, &path, &["build", &id, "--json"]);
    assert_eq!(out.code, 0, "{out:#?}");
    let run = str_of(&json_lines(&out).pop().unwrap(), "run").to_owned();

    let armed = iced_with_path(&env, &path, &["run", "arm", &run, "--json"]);
    assert_eq!(armed.code, 0, "{armed:#?}");
    // Asked again: nothing more is done.
    let again = iced_with_path(&env, &path, &["run", "arm", &run, "--json"]);
    assert_eq!(again.code, 0, "{again:#?}");
    let log = calls(&forge);
    let kinds: Vec<&str> = log.iter().map(|c| c[0].as_str()).collect();
    assert_eq!(
        kinds,
        ["git push", "forge find", "forge open", "forge arm"],
        "{log:#?}"
    );
    assert_no_push_after(&log, "arm");
    let s = state(&env);
    let lane = &s.runs[&run].lanes[0];
    assert!(lane.is_done(&crate::env::key("pr-arm")), "{lane:#?}");
    assert_eq!(lane.stage, Stage::Retire);

    // The forge merges it; the next build retires the lane.
    forge_merges_and_build_delivers(&env, &id, &path, &remote, lane);
}
