//! A landing's merge of the target into the lane that a killed call left half done (the target's
//! files written in the lane's worktree, no commit; SPEC 23.2 "An interrupted merge"): the loop
//! stashes what it left and merges again. Killed after the stash, or after the merge that follows
//! it, the next `iced build` lands the lane once, and the stash is kept, once.

use crate::landing::{assert_landed_and_retired, landing_env, rev, AGENT};
use crate::loop_e2e::{build, str_of, worktree_of};
use serde_json::json;

/// The person commits to `main` while the lane works; a call killed right after delivering leaves
/// the lane to land. In the lane's worktree is what a merge of `main` killed half way would have
/// written: the person's file, uncommitted. Then `iced build` is killed after the stash (or after
/// the merge that follows it), and built again to the end.
fn killed_after_stashing_a_half_done_merge(after_the_merge: bool) {
    let (env, id) = landing_env(AGENT, 1, json!({"mode": "merge", "strategy": "merge"}));
    let (_, started) = build(&env, &id, &["--no-wait"], 0);
    let run = str_of(&started, "run").to_owned();
    env.write("docs/person.md", "the person's own work\n");
    env.commit_all("the person's own work");
    let person = rev(&env, "main");
    let delivered = env
        .command()
        .args(["build", &id, "--json"])
        .env("ICED_FAILPOINT", "deliver-after-record")
        .output()
        .expect("iced runs");
    assert_eq!(
        delivered.status.code(),
        None,
        "killed after delivering: {delivered:?}"
    );
    let worktree = worktree_of(&env, &id);
    std::fs::create_dir_all(worktree.join("docs")).unwrap();
    std::fs::write(worktree.join("docs/person.md"), "the person's own work\n").unwrap();

    let mut killed = env.command();
    killed.args(["build", &id, "--json"]);
    if after_the_merge {
        // The merge made after the stash, killed before it was recorded.
        killed.env("ICED_FAILPOINT", "land-after-integrate");
    } else {
        killed.env("ICED_FAILPOINT", "land-after-stash");
    }
    let killed = killed.output().expect("iced runs");
    let failpoint = if after_the_merge {
        "land-after-integrate"
    } else {
        "land-after-stash"
    };
    assert_eq!(
        killed.status.code(),
        None,
        "{failpoint}: killed at the failpoint: {killed:?}"
    );
    let stashes = || {
        env.git_out(&["stash", "list"])
            .lines()
            .filter(|l| l.contains("interrupted merge"))
            .count()
    };
    assert_eq!(stashes(), 1, "{failpoint}: the killed call stashed once");
    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{failpoint}: {out:#?}");
    assert_eq!(last["run"], run.as_str());
    let (record, _) = assert_landed_and_retired(&env, &id, &run, "main");
    // Landed once: one landing merge on main, over the person's commit.
    let main = rev(&env, "main");
    assert_eq!(
        env.git_out(&["rev-list", "--first-parent", &format!("{person}..main")])
            .trim(),
        main,
        "{failpoint}: one commit landed on main"
    );
    let lane = &record["run"]["lanes"][0];
    let integrated: Vec<&serde_json::Value> = lane["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .filter(|r| r["step"] == "integrate-1")
        .collect();
    assert_eq!(integrated.len(), 1, "{failpoint}: {integrated:?}");
    assert_eq!(integrated[0]["outcome"]["merged"], true);
    assert_eq!(
        env.git_out(&["show", "main:docs/person.md"]),
        "the person's own work\n"
    );
    // What the interrupted merge left is never thrown away, and stashed once.
    assert_eq!(stashes(), 1, "{failpoint}: the stash is kept, once");
    let kept = env.git_out(&["stash", "show", "--include-untracked", "--name-only"]);
    assert!(
        kept.lines().any(|l| l == "docs/person.md"),
        "{failpoint}: the stash holds what was left: {kept}"
    );
}

#[test]
fn a_landing_killed_after_stashing_a_half_done_merge_lands_once() {
    killed_after_stashing_a_half_done_merge(false);
}

#[test]
fn a_landing_killed_after_the_merge_that_follows_the_stash_lands_once() {
    killed_after_stashing_a_half_done_merge(true);
}
