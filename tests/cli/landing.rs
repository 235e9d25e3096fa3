//! Landing end to end (SPEC section 23): a delivered lane reaches its target under the
//! repository's rule, carrying its own close, and the lane goes. Real temporary git repositories,
//! a local bare repository as the remote where one is needed, `fixtures/fake-agent` as the
//! implementer (and validator), and `fixtures/fake-forge` standing in for a forge's command line.
//!
//! Every definition-of-done command here appends a line to `dod.log` outside the repository, so a
//! test counts how often the definition of done really ran (once for the receipt, once more for
//! each landing round that brought the target in).

use crate::env::{fake_runner, git_at, merge_json, TestEnv};
use crate::loop_e2e::{
    build, json_lines, lane_branch, run_show, step, step_until, str_of, worktree_of,
};
use iced::run::state::{RunStatus, Stage, State, StepStatus};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The implementer: one new file, committed, and evidence for both expectations.
pub(crate) const AGENT: &str =
    "commit src/session.rs sessions refresh on activity\nreport-ok E1 E2\n";
pub(crate) const AGENT_FILE: &str = "src/session.rs";
pub(crate) const AGENT_TEXT: &str = "sessions refresh on activity\n";

/// The independent validator's answer when it passes the lane.
pub(crate) const PASS: &str = r#"{"verdict": "pass", "expectations": [{"id": "E1", "result": "pass", "evidence": "tests/session.rs::refresh passes"}, {"id": "E2", "result": "pass", "evidence": "tests/session.rs::idle passes"}], "failures": [{"id": "F1", "triggered": false, "evidence": "an active session stayed"}], "constraints": [{"id": "C1", "violated": false, "evidence": "passwords untouched"}]}"#;

pub(crate) const FAKE_FORGE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/fake-forge");
pub(crate) const PR_URL: &str = "https://forge.test/o/r/pull/7";

// ---- helpers ----------------------------------------------------------------------------------

/// A buildable unit (E1, E2) whose implementer is the fake agent following `script`, without
/// independent validators, with `dod` definition-of-done commands (each appending to `dod.log`
/// outside the repository) and `land` as the config's `land`; everything committed.
pub(crate) fn landing_env(script: &str, dod: usize, land: Value) -> (TestEnv, String) {
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
pub(crate) fn dod_commands(env: &TestEnv, n: usize) -> Value {
    let log = env.outside("dod.log");
    let script = "if [ -f docs/person.md ]; then echo \"ran $1 on the merge\"; else echo \"ran $1\"; fi >> \"$0\"";
    (0..n)
        .map(|k| json!({"argv": ["sh", "-c", script, log, k.to_string()], "timeoutSec": 30}))
        .collect()
}

/// Every line of `dod.log`.
pub(crate) fn dod_log(env: &TestEnv) -> Vec<String> {
    std::fs::read_to_string(env.outside("dod.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// How often definition-of-done command `k` ran.
pub(crate) fn dod_runs(env: &TestEnv, k: usize) -> usize {
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
pub(crate) fn parents(env: &TestEnv, commit: &str) -> Vec<String> {
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
pub(crate) fn reports(out: &crate::env::Run) -> Vec<Value> {
    let mut lines = json_lines(out);
    lines.pop();
    lines
}

/// The lane's step record `key` in a record or a `run show` of a run in the state.
pub(crate) fn step_record<'a>(lane: &'a Value, key: &str) -> Option<&'a Value> {
    lane["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .find(|r| r["step"] == key)
}

pub(crate) fn steps_of(lane: &Value) -> Vec<String> {
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
pub(crate) fn assert_landed_and_retired(
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
pub(crate) fn assert_checkout_follows(env: &TestEnv, id: &str) {
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
pub(crate) fn merge_lands(strategy: &str, remote: bool) {
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
pub(crate) fn merge_with_ff_lands_the_lane_head() {
    merge_lands("ff", false);
}

#[test]
pub(crate) fn merge_with_merge_lands_one_merge_commit() {
    merge_lands("merge", false);
}

#[test]
pub(crate) fn merge_with_squash_lands_the_lane_tree_as_one_commit() {
    merge_lands("squash", false);
}

#[test]
pub(crate) fn merge_with_ff_lands_in_the_remote_too() {
    merge_lands("ff", true);
}

#[test]
pub(crate) fn merge_with_merge_lands_in_the_remote_too() {
    merge_lands("merge", true);
}

#[test]
pub(crate) fn merge_with_squash_lands_in_the_remote_too() {
    merge_lands("squash", true);
}

// ---- the person's checkout ----------------------------------------------------------------------

/// The target is checked out in the person's checkout, where they have an uncommitted change to a
/// file the landing changes: git refuses the fast-forward, the lane blocks, and their change, the
/// target and the lane are all as they were.
#[test]
pub(crate) fn an_uncommitted_change_the_landing_would_overwrite_blocks_the_lane() {
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
pub(crate) fn a_target_that_moved_is_merged_in_and_tested_again_before_landing() {
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
pub(crate) fn a_conflict_with_the_target_blocks_the_lane_naming_the_file() {
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
pub(crate) fn a_remote_target_that_moved_under_the_push_lands_in_a_second_round() {
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

// ---- none -----------------------------------------------------------------------------------

/// `land.mode: none`: the run is delivered on its branch, which is reported and stays, with its
/// worktree, and the run stays in the state. `iced run retire` retires it once a person merged it.
#[test]
pub(crate) fn with_mode_none_the_branch_is_reported_and_run_retire_retires_it_once_merged() {
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

// ---- retire -------------------------------------------------------------------------------------

/// SPEC 23.3: a lane worktree with untracked or uncommitted changes is never removed: the landing
/// stands, the kept worktree is reported, and the run stays in the state (delivered) until
/// `iced run retire` finds the worktree clean.
#[test]
pub(crate) fn a_dirty_lane_worktree_is_kept_and_retired_later_by_run_retire() {
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

pub(crate) fn same_path(a: &str, b: &Path) -> bool {
    Path::new(a) == b || Path::new(a).canonicalize().ok() == b.canonicalize().ok()
}

/// `land.target` names a branch no worktree has checked out: it moves by a compare-and-swap of
/// the ref, and the person's checkout (on `main`) is left alone.
#[test]
pub(crate) fn a_target_not_checked_out_moves_by_its_ref_alone() {
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
pub(crate) fn with_a_remote_a_checkout_that_cannot_follow_is_left_as_it_was() {
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
pub(crate) fn resuming_a_landing_conflict_lands_the_resolution_without_a_new_attempt() {
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
    let merged = Command::new("git")
        .args(["merge", "--no-edit", "main"])
        .current_dir(&worktree)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(
        !merged.status.success() && String::from_utf8_lossy(&merged.stdout).contains("CONFLICT"),
        "the person's merge conflicts in README.md: {merged:?}"
    );
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

/// Regression: a call killed right after merging the target into the lane (before recording it)
/// left the loop's own merge on the lane branch, and the next call took it for a commit nobody
/// judged and blocked the lane. Its own merge is recognised (a merge of the target into the
/// delivery whose tree is git's) and the landing goes on.
#[test]
pub(crate) fn a_landing_killed_after_its_merge_of_the_target_lands_on_resume() {
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
