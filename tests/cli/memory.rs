//! `iced memory draft` (SPEC 20.15): a memory agent proposes `.iced/memory/*` on a branch of its
//! own; the loop checks the branch's change itself and never merges it.

use crate::env::{fake_runner, merge_json, TestEnv};
use crate::snap::{assert_read, assert_refused, json_block, refusal_blocks, text_block};
use serde_json::json;

/// A memory agent that writes the product memory and commits it.
pub(crate) const GOOD: &str = "role memory\ncommit .iced/memory/product.md A session service: people stay signed in while active.\n";

/// An initialized, committed repository whose memory role is the fake agent following `script`.
pub(crate) fn memory_env(script: &str) -> TestEnv {
    let env = TestEnv::initialized();
    let mut config = fake_runner(&env, script);
    merge_json(
        &mut config,
        &json!({"roles": {"memory": {"runner": "fake"}, "implementer": null}}),
    );
    env.patch_config(&config);
    env.commit_all("init");
    env
}

/// The branches `iced/memory/*`.
pub(crate) fn memory_branches(env: &TestEnv) -> Vec<String> {
    env.git_out(&[
        "branch",
        "--list",
        "--format=%(refname:short)",
        "iced/memory/*",
    ])
    .lines()
    .map(str::to_owned)
    .collect()
}

#[test]
fn a_memory_draft_leaves_a_branch_changing_only_the_memory_for_the_person() {
    let env = memory_env(GOOD);
    let head = env.git_out(&["rev-parse", "HEAD"]);
    let out = env.iced_json(&["memory", "draft"]);
    assert_eq!(out.code, 0, "{out:#?}");
    let drafted = out.json();
    let branch = drafted["branch"].as_str().unwrap().to_owned();
    assert_eq!(drafted["files"], json!([".iced/memory/product.md"]));
    assert_eq!(drafted["land"], "branch");
    assert_eq!(drafted["merge"], format!("git merge {branch}"));
    // The loop merged nothing: the person's branch is where it was.
    assert_eq!(env.git_out(&["rev-parse", "HEAD"]), head);
    assert_eq!(memory_branches(&env), vec![branch.clone()]);
    let changed = env.git_out(&["diff", "--name-only", &format!("{}..{branch}", head.trim())]);
    assert_eq!(changed.trim(), ".iced/memory/product.md");
    // One agent, in the memory role; its worktree is gone, the branch stays.
    let starts = env.agent_starts();
    assert_eq!(starts.len(), 1, "{starts:?}");
    assert!(starts[0].contains("role=memory"), "{starts:?}");
    assert!(!env
        .root()
        .parent()
        .unwrap()
        .join("repo.iced-worktrees")
        .join(branch.replace("iced/memory/", "memory-"))
        .exists());
    assert_read!(
        &env,
        "memory_draft_json",
        json_block(&["memory", "draft"], &out)
    );
}

#[test]
fn a_memory_draft_says_in_words_how_to_merge_it() {
    let env = memory_env(GOOD);
    let out = env.iced(&["memory", "draft"]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_read!(
        &env,
        "memory_draft_text",
        text_block(&["memory", "draft"], &out)
    );
}

#[test]
fn a_memory_agent_that_writes_outside_the_memory_is_refused() {
    let agent =
        "role memory\ncommit .iced/memory/product.md the product\ncommit src/app.rs fn main() {}\n";
    let args = ["memory", "draft"];
    let (text_env, json_env) = (memory_env(agent), memory_env(agent));
    let text = text_env.iced(&args);
    let json = json_env.iced_json(&args);
    assert_read!(
        &text_env,
        "refused_memory-outside",
        refusal_blocks(&args, &text, &json, 3, "memory-outside")
    );
    // The branch is kept for a look, never merged.
    for env in [&text_env, &json_env] {
        assert_eq!(memory_branches(env).len(), 1);
        assert!(!env.path("src/app.rs").exists());
    }
}

#[test]
fn a_memory_agent_that_commits_nothing_is_refused() {
    let args = ["memory", "draft"];
    let (text_env, json_env) = (
        memory_env("role memory\nsleep 0\n"),
        memory_env("role memory\nsleep 0\n"),
    );
    let text = text_env.iced(&args);
    let json = json_env.iced_json(&args);
    assert_read!(
        &text_env,
        "refused_memory-empty",
        refusal_blocks(&args, &text, &json, 3, "memory-empty")
    );
}

#[test]
fn a_memory_draft_without_a_runner_is_refused() {
    let env = TestEnv::initialized();
    env.commit_all("init");
    assert_refused!(&env, "memory-needs-runner", 3, &["memory", "draft"]);
    assert!(memory_branches(&env).is_empty());
}

/// Two drafts in one second (the clock is pinned here, so every draft has the same time): the
/// second gets a branch of its own, and the first's branch keeps what its agent committed.
#[test]
fn a_second_memory_draft_in_the_same_second_gets_a_branch_of_its_own() {
    let env = memory_env(GOOD);
    let first = env.iced_json(&["memory", "draft"]);
    assert_eq!(first.code, 0, "{first:#?}");
    let first_branch = first.json()["branch"].as_str().unwrap().to_owned();
    let first_tip = env.git_out(&["rev-parse", &first_branch]);
    let second = env.iced_json(&["memory", "draft"]);
    assert_eq!(second.code, 0, "{second:#?}");
    let second_branch = second.json()["branch"].as_str().unwrap().to_owned();
    assert_ne!(second_branch, first_branch);
    assert_eq!(second_branch, format!("{first_branch}-2"));
    assert_eq!(
        env.git_out(&["rev-parse", &first_branch]),
        first_tip,
        "the first draft's branch is untouched"
    );
    // The second draft is its own agent's work on the base, not on top of the first's.
    let head = env.git_out(&["rev-parse", "HEAD"]);
    assert_eq!(
        env.git_out(&[
            "rev-list",
            "--count",
            &format!("{}..{second_branch}", head.trim())
        ])
        .trim(),
        "1"
    );
    assert_eq!(env.agent_starts().len(), 2);
    let mut branches = memory_branches(&env);
    branches.sort();
    assert_eq!(branches, vec![first_branch.clone(), second_branch]);
}
