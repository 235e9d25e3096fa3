//! `iced memory draft` killed (SIGKILL) at each of its side effects (SPEC 20.15): the next
//! `iced memory draft` takes the same draft up, the memory agent runs once, and the branch left for
//! the person changes only `.iced/memory/`.

use super::each_in_parallel;
use crate::memory::{memory_branches, memory_env, GOOD};
use std::os::unix::process::ExitStatusExt;

/// The variable and the failpoint each case kills at.
const KILLS: &[(&str, &str)] = &[
    ("ICED_FAILPOINT", "memory-after-gitignore"),
    ("ICED_FAILPOINT", "memory-after-record"),
    ("ICED_FAILPOINT", "memory-after-worktree"),
    ("ICED_FAILPOINT", "memory-after-launch"),
    ("ICED_FAILPOINT", "memory-after-remove"),
];

#[test]
fn a_memory_draft_killed_at_each_side_effect_runs_its_agent_once() {
    each_in_parallel("memory kills", KILLS, 2, |(var, point)| {
        let env = memory_env(GOOD);
        let head = env.git_out(&["rev-parse", "HEAD"]);
        let out = env
            .command()
            .env(var, point)
            .args(["memory", "draft", "--json"])
            .output()
            .expect("iced runs");
        assert_eq!(
            out.status.signal(),
            Some(9),
            "{point}: not killed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Killed after the check, the draft is over: the branch is there already.
        if *point != "memory-after-remove" {
            let again = env.iced_json(&["memory", "draft"]);
            assert_eq!(again.code, 0, "{point}: {again:#?}");
            assert_eq!(
                again.json()["files"],
                serde_json::json!([".iced/memory/product.md"])
            );
        }
        let starts = env.agent_starts();
        assert_eq!(starts.len(), 1, "{point}: the memory agent ran {starts:?}");
        let branches = memory_branches(&env);
        assert_eq!(branches.len(), 1, "{point}: {branches:?}");
        let changed = env.git_out(&[
            "diff",
            "--name-only",
            &format!("{}..{}", head.trim(), branches[0]),
        ]);
        assert_eq!(changed.trim(), ".iced/memory/product.md", "{point}");
        assert_eq!(
            env.git_out(&["rev-parse", "HEAD"]),
            head,
            "{point}: nothing merged"
        );
    });
}
