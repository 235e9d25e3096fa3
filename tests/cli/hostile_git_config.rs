//! An agent writing git's configuration (SPEC 24.13): what it names never runs from the loop's own
//! git, which checks out sandboxes, commits and moves the person's checkout after the agent ended.

use crate::env::{git_at, write_executable};
use crate::validation::{build_to_end, section, set_script, validated, PASS};
use serde_json::json;

/// Issue 34, item 3: "The loop never runs what an agent wrote into git's configuration." An
/// implementer ran `git config core.hooksPath <dir>` with hooks in it, and after its activity had
/// ended iced's own git ran them: `post-checkout` in a validator's sandbox, `post-merge` in the
/// person's checkout. Now a lane whose implementer does that is validated, delivered and landed
/// by merge, and no hook runs; the configuration is still there, as a plain git in the checkout
/// shows by running one.
/// Hooks named `names` in `dir` (made), each appending its name and where it ran to `marker`.
pub(crate) fn plant_hooks(dir: &std::path::Path, names: &[&str], marker: &std::path::Path) {
    std::fs::create_dir_all(dir).unwrap();
    for hook in names {
        write_executable(
            &dir.join(hook),
            &format!(
                "#!/bin/sh\necho \"${{0##*/}} in $(pwd)\" >> '{}'\n",
                marker.display()
            ),
        );
    }
}

#[test]
fn hooks_an_implementer_configured_never_run_from_the_loops_git() {
    let implementer = |hooks: &std::path::Path| {
        section(
            "*",
            "implementer",
            "*",
            &format!(
                "commit src/session.rs sessions refresh on activity\ngit config core.hooksPath {}\nreport-ok E1 E2",
                hooks.display()
            ),
        )
    };
    let (env, id) = validated(
        "",
        &["full"],
        json!({"land": {"mode": "merge", "strategy": "merge"}}),
    );
    // Confined, the agent cannot write the configuration at all (SPEC 24.12); this is the
    // loop's own git, which must hold for a person who runs agents unconfined too.
    env.unconfined();
    let hooks = env.outside("hooks");
    let marker = env.outside("hook-ran");
    plant_hooks(
        &hooks,
        &[
            "post-checkout",
            "post-merge",
            "pre-commit",
            "post-commit",
            "reference-transaction",
            "post-index-change",
        ],
        &marker,
    );
    // The implementer commits first and configures after, so that its own git runs none.
    let script = implementer(&hooks) + &section("*", "validator", "*", &format!("report {PASS}"));
    set_script(&env, &id, &script);
    let main_before = git_at(env.root(), &["rev-parse", "main"]);

    build_to_end(&env, &id, 0, "delivered");
    let main = git_at(env.root(), &["rev-parse", "main"]);
    assert_ne!(main, main_before, "the lane landed");
    assert_eq!(
        git_at(env.root(), &["rev-parse", "HEAD"]),
        main,
        "the person's checkout moved with `main`"
    );
    assert!(
        env.path("src/session.rs").is_file(),
        "the landing merged into the person's checkout"
    );
    let ran = std::fs::read_to_string(&marker).unwrap_or_default();
    assert!(ran.is_empty(), "the loop's git ran hooks:\n{ran}");

    // The agent's configuration is in force: a plain git in the checkout runs its hooks.
    assert_eq!(
        git_at(env.root(), &["config", "--get", "core.hooksPath"]).trim(),
        hooks.display().to_string()
    );
    git_at(
        env.root(),
        &["commit", "-q", "--allow-empty", "-m", "a person's commit"],
    );
    let ran = std::fs::read_to_string(&marker).unwrap_or_default();
    assert!(ran.contains("post-commit"), "a plain git runs them:\n{ran}");
}
