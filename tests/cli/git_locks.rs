//! A git lock left in a lane worktree's git folder (SPEC 24.6): a git that did not finish (an
//! agent killed at its timeout in the middle of `git commit`, a definition-of-done command killed,
//! an agent that made the file on purpose) leaves `index.lock` there, and every later git that
//! writes the index fails. Once nothing of the lane runs there, the loop removes it and logs it,
//! and the lane delivers; without that, the delivery's `git reset` blocked the lane with git's
//! last line, which names no file. An agent that writes the worktree's git folder itself runs
//! with the person's `agents.unconfined`: a confined one commits into a git of its own and cannot
//! write that folder (SPEC 24.12).

use crate::loop_e2e::{build, own_checks, with_agent};
use crate::validation::events;
use serde_json::{json, Value};

/// The lane's worktree's git folder, from the worktree (`<tmp>/repo.iced-worktrees/<lane>`).
const LOCK: &str = "../../repo/.git/worktrees/001-session-timeout/index.lock";

/// The lane's branch.
const BRANCH: &str = "iced/001-session-timeout/001-session-timeout";

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
    env.unconfined();
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
    env.unconfined();
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
    env.unconfined();
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
    env.unconfined();
    env.killed_at(&["build", &id, "--json"], "git-lock-after-remove");
    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    assert_eq!(env.agent_starts().len(), 1);
    assert!(
        removed(&env).is_empty(),
        "the killed call logged nothing; the replay found no lock"
    );
}

/// `iced build <id>` with a `git` shim whose first `checkout -q HEAD -- ...` (the delivery setting
/// the worktree to its close, after moving the branch) takes the worktree's index lock, kills the
/// build that started it, and goes on as `rest` (sh, `$lock` the lock's path): the git that
/// outlived the call. Checked to be killed.
fn killed_in_the_delivery_s_checkout(env: &crate::env::TestEnv, id: &str, rest: &str) {
    let armed = env.outside("armed");
    let path = crate::env::git_shim(
        &env.outside("bin"),
        &format!(
            "case \" $* \" in *' checkout -q HEAD -- '*) if [ ! -e '{armed}' ]; then : > '{armed}'\n\
             lock=\"$(\"$REAL_GIT\" rev-parse --git-path index.lock)\"; echo running > \"$lock\"\n\
             kill -9 $PPID; {rest}; fi;; esac\n",
            armed = armed.display(),
        ),
    );
    let out = env
        .command()
        .args(["build", id, "--json"])
        .env("PATH", &path)
        .output()
        .expect("iced runs");
    crate::env::assert_killed(&out, "the delivery's checkout");
}

/// A call of the loop killed while its own git runs leaves that git running: it is not the
/// call's process. Here the delivery's `git checkout` takes the worktree's index lock, kills the
/// build that started it and works on until the test lets it end. The next build finds the lock
/// while that git still works in the worktree: it waits for it to end (logged) instead of
/// removing its lock under it, and delivers. Removing the lock at once (the loop's word that
/// nothing of the lane runs) let two gits write one index: the running git found its lock gone.
#[test]
fn a_lock_whose_git_outlived_a_killed_call_is_waited_for_not_removed() {
    let (env, id) = with_agent(
        "commit src/session.rs fixed\nreport-ok E1 E2\n",
        own_checks(json!([])),
    );
    let (release, clobbered, ended) = (
        env.outside("release"),
        env.outside("clobbered"),
        env.outside("ended"),
    );
    killed_in_the_delivery_s_checkout(
        &env,
        &id,
        &format!(
            "n=0; while [ ! -e '{release}' ] && [ $n -lt 1200 ]; do sleep 0.1; n=$((n+1)); done\n\
             [ \"$(cat \"$lock\" 2>/dev/null)\" = running ] || : > '{clobbered}'\n\
             rm -f \"$lock\"; : > '{ended}'; exit 0",
            release = release.display(),
            clobbered = clobbered.display(),
            ended = ended.display()
        ),
    );
    assert!(!ended.exists(), "the git outlived the call");
    // The next build, while that git still runs; it is let end once the build has taken the
    // delivery up again.
    let replay = {
        let mut cmd = env.command();
        cmd.args(["build", &id, "--json"]);
        std::thread::spawn(move || crate::env::run(&mut cmd))
    };
    // Let end once the replay has found the lock and says it waits for that git.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !events(&env)
        .iter()
        .any(|e| e["event"] == "git_lock_waiting" && e["step"] == "deliver")
    {
        assert!(
            std::time::Instant::now() < until,
            "the delivery was not taken up again, or did not wait for the git: {:#?}",
            events(&env)
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::fs::write(&release, "").unwrap();
    let out = replay.join().unwrap();
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(
        crate::loop_e2e::last_line(&out)["status"],
        "delivered",
        "{out:#?}"
    );
    assert!(ended.exists(), "the build went on only once that git ended");
    assert!(
        !clobbered.exists(),
        "the lock of a git still running was removed under it"
    );
    let waited: Vec<Value> = events(&env)
        .into_iter()
        .filter(|e| e["event"] == "git_lock_waited")
        .collect();
    assert_eq!(waited.len(), 1, "{waited:#?}");
    assert_eq!(waited[0]["step"], "deliver");
    let waiting: Vec<Value> = events(&env)
        .into_iter()
        .filter(|e| e["event"] == "git_lock_waiting")
        .collect();
    assert_eq!(waiting.len(), 1, "{waiting:#?}");
    assert_eq!(waiting[0]["pids"], waited[0]["pids"], "{waiting:#?}");
    assert_eq!(waited[0]["lane"], id.as_str());
    assert_eq!(
        waited[0]["pids"].as_array().map(Vec::len),
        Some(1),
        "{waited:#?}"
    );
    assert!(
        removed(&env).is_empty(),
        "the git that ended removed its own"
    );
    assert_eq!(env.agent_starts().len(), 1);
}

/// A git that outlived a killed call and does not end (or a person's that holds the lock for
/// longer than the loop waits, 30 s) is never raced: the delivery leaves its lock as it is and
/// blocks the lane naming the process. Once it is stopped (killed: its lock stays behind), a
/// resume removes the lock and delivers.
#[test]
fn a_lock_whose_git_runs_on_blocks_the_delivery_naming_it_until_it_is_stopped() {
    let (env, id) = with_agent(
        "commit src/session.rs fixed\nreport-ok E1 E2\n",
        own_checks(json!([])),
    );
    let pid = env.outside("pid");
    killed_in_the_delivery_s_checkout(
        &env,
        &id,
        &format!(
            "sleep 120 & echo \"$$ $!\" > '{pid}'; wait",
            pid = pid.display()
        ),
    );
    // Killed in the checkout that sets the worktree to the close: the branch is there already.
    let prepared = env.git_out(&["rev-parse", BRANCH]);
    assert_eq!(
        env.git_out(&["log", "-1", "--format=%s", BRANCH]),
        "iced: deliver 001-session-timeout\n"
    );
    let args = ["build", id.as_str()];
    let blocked = env.iced(&args);
    assert_eq!(blocked.code, 4, "{blocked:#?}");
    crate::snap::assert_read!(
        &env,
        "a_lock_whose_git_runs_on",
        crate::snap::text_block(&args, &blocked)
    );
    let lock = env
        .root()
        .join(".git/worktrees/001-session-timeout/index.lock");
    assert_eq!(
        std::fs::read_to_string(&lock).unwrap(),
        "running\n",
        "left as it was"
    );
    assert!(removed(&env).is_empty());
    // The person stops it; its lock stays behind, and the resumed run removes it.
    for orphan in std::fs::read_to_string(&pid).unwrap().split_whitespace() {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(orphan.parse().unwrap()),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
    }
    let listed = env.iced_json(&["run", "list"]).ok().json();
    let run = listed[0]["id"].as_str().unwrap().to_owned();
    env.iced_json(&["run", "resume", &run]).ok();
    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    let removed = removed(&env);
    assert_eq!(removed.len(), 1, "{removed:#?}");
    // The resume delivers the close the killed call prepared (its work was verified): no new
    // attempt, no agent started again, the same close commit on the branch.
    assert_eq!(removed[0]["step"], "deliver");
    assert!(!lock.exists());
    assert_eq!(
        env.git_out(&["rev-parse", BRANCH]),
        prepared,
        "the same close"
    );
    assert_eq!(env.agent_starts().len(), 1, "{out:#?}");
}

/// A definition-of-done command that fails after leaving every lock a `git commit` takes (killed
/// in the middle of its git): the next attempt's agent would meet them and fail its own commit,
/// spending the attempt. They are removed before its launch, and attempt 2 delivers.
#[test]
fn locks_a_failed_definition_of_done_left_are_removed_before_the_next_agent() {
    let (env, id) = with_agent(
        "attempt 1\ncommit src/session.rs fixed\nreport-ok E1 E2\nattempt 2\ncommit src/session.rs fixed again\nreport-ok E1 E2\n",
        json!({"verify": {"independent": false, "maxAttempts": 2, "commands": [{"argv": ["sh", "-c", format!("if grep -q again src/session.rs; then exit 0; fi; {LEAVES_LOCKS}; exit 1")], "timeoutSec": 30}]}}),
    );
    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    assert_eq!(env.agent_starts().len(), 2);
    let steps: Vec<String> = removed(&env)
        .iter()
        .map(|e| e["step"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(steps, ["implement", "implement", "implement"]);
}

/// A build killed right after removing, before an agent's launch, the locks a failed definition
/// of done left: the launch it never made counts as crashed (SPEC 21.4), so the next build starts
/// attempt 3, whose launch removes the two locks the killed call had not reached yet, and which
/// delivers. Attempt 2's agent never started.
#[test]
fn a_build_killed_after_removing_a_lock_before_the_next_agent_delivers() {
    let (env, id) = with_agent(
        "attempt 1\ncommit src/session.rs fixed\nreport-ok E1 E2\nattempt 3\ncommit src/session.rs fixed again\nreport-ok E1 E2\n",
        json!({"verify": {"independent": false, "maxAttempts": 3, "commands": [{"argv": ["sh", "-c", format!("if grep -q again src/session.rs; then exit 0; fi; {LEAVES_LOCKS}; exit 1")], "timeoutSec": 30}]}}),
    );
    env.killed_at(&["build", &id, "--json"], "git-lock-after-remove");
    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    let starts = env.agent_starts();
    assert_eq!(starts.len(), 2, "{starts:#?}");
    assert!(starts[1].contains("attempt=3"), "{starts:#?}");
    let removed: Vec<String> = removed(&env)
        .iter()
        .map(|e| {
            assert_eq!(e["step"], "implement");
            let path = e["path"].as_str().unwrap();
            path.rsplit('/').next().unwrap().to_owned()
        })
        .collect();
    assert_eq!(removed, ["HEAD.lock", format!("{id}.lock").as_str()]);
}
