//! A git lock left in a lane worktree's git folder (SPEC 24.6): a git that did not finish (an
//! agent killed at its timeout in the middle of `git commit`, a definition-of-done command killed,
//! an agent that made the file on purpose) leaves `index.lock` there, and every later git that
//! writes the index fails. Once nothing of the lane runs there, the loop removes it and logs it,
//! and the lane delivers; without that, the delivery's `git reset` blocked the lane with git's
//! last line, which names no file.

use crate::loop_e2e::{build, own_checks, with_agent};
use crate::validation::events;
use serde_json::{json, Value};

/// The lane's worktree's git folder, from the worktree (`<tmp>/repo.iced-worktrees/<lane>`).
const LOCK: &str = "../../repo/.git/worktrees/001-session-timeout/index.lock";

/// The `git_lock_removed` events of the test's run.
fn removed(env: &crate::env::TestEnv) -> Vec<Value> {
    events(env)
        .into_iter()
        .filter(|e| e["event"] == "git_lock_removed")
        .collect()
}

#[test]
fn a_lock_the_agent_s_git_left_is_removed_at_the_receipt_and_the_lane_delivers() {
    let (env, id) = with_agent(
        &format!("commit src/session.rs fixed\nreport-ok E1 E2\nwrite {LOCK} \n"),
        own_checks(json!([])),
    );
    assert_eq!(id, "001-session-timeout");
    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    let removed = removed(&env);
    assert_eq!(removed.len(), 1, "{removed:#?}");
    assert_eq!(removed[0]["step"], "receipt");
    assert_eq!(removed[0]["lane"], id.as_str());
    let path = removed[0]["path"].as_str().unwrap();
    assert!(
        path.ends_with("/.git/worktrees/001-session-timeout/index.lock"),
        "{path}"
    );
    assert!(!std::path::Path::new(path).exists());
}

/// The `sh -c` script of a definition-of-done command that leaves every lock a `git commit`
/// takes: the index's, HEAD's and the lane branch's ref's.
const LEAVES_LOCKS: &str = "touch \"$(git rev-parse --git-path index.lock)\" \"$(git rev-parse --git-path HEAD.lock)\" \"$(git rev-parse --git-common-dir)/refs/heads/$(git symbolic-ref --short HEAD).lock\"";

/// A definition-of-done command killed in the middle of its own git (here: it leaves every lock
/// a `git commit` takes: the index's, HEAD's and the lane branch's ref's) does not block the
/// delivery: each is removed before the delivery moves the branch.
#[test]
fn locks_a_definition_of_done_command_left_are_removed_at_the_delivery() {
    let (env, id) = with_agent(
        "commit src/session.rs fixed\nreport-ok E1 E2\n",
        own_checks(json!([{"argv": ["sh", "-c", LEAVES_LOCKS], "timeoutSec": 30}])),
    );
    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    let removed = removed(&env);
    let ends: Vec<String> = removed
        .iter()
        .map(|e| {
            assert_eq!(e["step"], "deliver");
            let path = e["path"].as_str().unwrap();
            assert!(!std::path::Path::new(path).exists(), "{path}");
            path.rsplit('/').next().unwrap().to_owned()
        })
        .collect();
    assert_eq!(
        ends,
        ["index.lock", "HEAD.lock", format!("{id}.lock").as_str()],
        "{removed:#?}"
    );
}

/// A lock iced cannot remove (a folder in its place) is a gap of the receipt, named, never a
/// blocked delivery that names no file.
#[test]
fn a_lock_that_cannot_be_removed_is_a_gap_of_the_receipt() {
    let (env, id) = with_agent(
        &format!("commit src/session.rs fixed\nreport-ok E1 E2\nwrite {LOCK}/x x\n"),
        own_checks(json!([]))
            .as_object()
            .cloned()
            .map_or(json!({}), |mut c| {
                c.insert(
                    "verify".into(),
                    json!({"independent": false, "commands": [], "maxAttempts": 1}),
                );
                Value::Object(c)
            }),
    );
    let (out, last) = build(&env, &id, &[], 4);
    let text = format!("{out:?}");
    assert!(
        text.contains("index.lock` (a git command that did not finish left it) could not be removed: it is a folder"),
        "{last:#}\n{out:#?}"
    );
}

/// The target moved while the lane worked: the landing merges it in and runs the definition of
/// done again on the merge, which leaves its locks again; the landed commit's step removes them,
/// and the lane lands.
#[test]
fn locks_a_landing_s_definition_of_done_left_are_removed_before_the_landed_commit() {
    let (env, id) = crate::env::TestEnv::buildable_with(|env| {
        let mut config = crate::env::fake_runner(env, crate::landing::AGENT);
        crate::env::merge_json(
            &mut config,
            &json!({
                "verify": {"independent": false, "commands": [{"argv": ["sh", "-c", LEAVES_LOCKS], "timeoutSec": 30}]},
                "land": {"mode": "merge", "strategy": "merge"},
            }),
        );
        config
    });
    let (_, started) = build(&env, &id, &["--no-wait"], 0);
    assert_eq!(started["status"], "running");
    env.write("docs/person.md", "the person's own work\n");
    env.commit_all("the person's own work");
    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    let steps: Vec<String> = removed(&env)
        .iter()
        .map(|e| e["step"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        steps,
        [
            "deliver",
            "deliver",
            "deliver",
            "landcommit-1",
            "landcommit-1",
            "landcommit-1"
        ]
    );
}

/// Locks an agent made hostile: `index.lock` a symbolic link to the person's config, `HEAD.lock`
/// a FIFO. Each is removed as the name it is (the link, never what it points at; the FIFO never
/// opened), and the lane delivers; the person's file is as it was.
#[test]
fn a_lock_that_is_a_link_or_a_fifo_is_removed_as_itself() {
    let admin = "../../repo/.git/worktrees/001-session-timeout";
    let (env, id) = with_agent(
        &format!(
            "commit src/session.rs fixed\nreport-ok E1 E2\nlink {admin}/index.lock ../../../.iced/config.json\nfifo {admin}/HEAD.lock\n"
        ),
        own_checks(json!([])),
    );
    let config = env.read(".iced/config.json");
    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    let ends: Vec<String> = removed(&env)
        .iter()
        .map(|e| {
            e["path"]
                .as_str()
                .unwrap()
                .rsplit('/')
                .next()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(ends, ["index.lock", "HEAD.lock"]);
    assert_eq!(
        env.read(".iced/config.json"),
        config,
        "the link's target is untouched"
    );
}

/// A build killed right after removing a lock, before logging it: the next build replays the
/// receipt, finds no lock, and delivers; the agent ran once.
#[test]
fn a_build_killed_after_removing_a_lock_delivers_once() {
    let (env, id) = with_agent(
        &format!("commit src/session.rs fixed\nreport-ok E1 E2\nwrite {LOCK} \n"),
        own_checks(json!([])),
    );
    env.killed_at(&["build", &id, "--json"], "git-lock-after-remove");
    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    assert_eq!(env.agent_starts().len(), 1);
    assert!(
        removed(&env).is_empty(),
        "the killed call logged nothing; the replay found no lock"
    );
}
