//! Memory and knowledge files that are not files of the repository (SPEC 24.15, issue 35 item 3):
//! what `memory.product` and `memory.knowledge` name goes into every brief, so a path that leaves
//! the root (by itself or by a link committed in the repository) is refused before anything runs,
//! and nothing of what it names reaches a brief.

use crate::env::{run, TestEnv};
use crate::snap::{assert_read, refusal_blocks};
use serde_json::json;
use std::path::Path;

/// Every file under `dir` that holds `needle`.
fn holding(dir: &Path, needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for path in crate::harness::walk_files(dir) {
        if std::fs::read(&path).is_ok_and(|b| String::from_utf8_lossy(&b).contains(needle)) {
            found.push(path.display().to_string());
        }
    }
    found
}

/// `iced build <id>` with `SECRET` in iced's environment, as an API key would be.
fn build(env: &TestEnv, id: &str, json: bool) -> crate::env::Run {
    let mut cmd = env.command();
    cmd.env("ICED_TEST_API_KEY", "sk-PLANTED-in-the-environment");
    cmd.args(["build", id, "--no-wait"]);
    if json {
        cmd.arg("--json");
    }
    run(&mut cmd)
}

/// Issue 35, why-case 2: `memory.product: "/proc/self/environ"` put iced's environment (an API
/// key in it) into the brief. Now the build is refused `memory-path-refused`, naming the key and
/// the path, and no file of the run holds the key.
#[test]
fn a_memory_path_under_proc_never_reaches_a_brief() {
    let (env, id) = TestEnv::buildable(json!({"memory": {"product": "/proc/self/environ"}}));
    let text = build(&env, &id, false);
    let json = build(&env, &id, true);
    let leaked = holding(&env.path(".iced/run"), "sk-PLANTED");
    assert!(
        leaked.is_empty(),
        "the environment reached {leaked:?}: {text:#?}"
    );
    let args = ["build", id.as_str(), "--no-wait"];
    assert_read!(
        &env,
        "refused_memory-path-refused",
        refusal_blocks(&args, &text, &json, 3, "memory-path-refused")
    );
    let refused = json.refused(3, "memory-path-refused");
    let reason = refused["reason"].as_str().unwrap();
    assert!(
        reason.contains("memory.product") && reason.contains("/proc/self/environ"),
        "{reason}"
    );
    assert!(!env.path(".iced/run/state.json").exists(), "a run recorded");
}

/// Issue 35, why-case 2: a committed `.iced/memory/knowledge.md` linking outside the checkout put
/// the outside file into the brief. A link leaving the root, a `..` and an absolute path are
/// refused alike, naming the entry; the outside file's text is in no file of the run.
#[test]
fn knowledge_that_leaves_the_root_never_reaches_a_brief() {
    let (env, id) = TestEnv::buildable(json!({}));
    let outside = env.outside("private.md");
    std::fs::write(&outside, "OUTSIDE-ONLY text of another file\n").unwrap();
    std::fs::remove_file(env.path(".iced/memory/knowledge.md")).unwrap();
    std::os::unix::fs::symlink(&outside, env.path(".iced/memory/knowledge.md")).unwrap();
    env.commit_all("knowledge, by a link");
    let out = build(&env, &id, true);
    let leaked = holding(&env.path(".iced/run"), "OUTSIDE-ONLY");
    assert!(leaked.is_empty(), "the outside file reached {leaked:?}");
    let refused = out.refused(3, "memory-path-refused");
    assert!(
        refused["reason"]
            .as_str()
            .unwrap()
            .contains(".iced/memory/knowledge.md"),
        "{refused:#}"
    );
    // A folder on the way that is a link, a `..` and an absolute path.
    std::fs::create_dir(env.outside("docs")).unwrap();
    std::fs::copy(&outside, env.outside("docs/private.md")).unwrap();
    std::os::unix::fs::symlink(env.outside("docs"), env.path("docs")).unwrap();
    for entry in [
        "docs/private.md".to_owned(),
        "../private.md".to_owned(),
        outside.display().to_string(),
    ] {
        env.patch_config(&json!({"memory": {"knowledge": [entry]}}));
        let refused = build(&env, &id, true).refused(3, "memory-path-refused");
        assert!(
            refused["reason"].as_str().unwrap().contains(&entry),
            "{entry}: {refused:#}"
        );
    }
    let leaked = holding(&env.path(".iced/run"), "OUTSIDE-ONLY");
    assert!(leaked.is_empty(), "the outside file reached {leaked:?}");
    assert!(!env.path(".iced/run/state.json").exists(), "a run recorded");
}

/// A knowledge file that is a link to another file inside the repository is still read, and goes
/// into the brief (SPEC 24.6: a person's file is read through a link to a regular file).
#[test]
fn knowledge_linked_inside_the_root_is_still_read() {
    let (env, id) = TestEnv::buildable(json!({}));
    env.write(
        "docs/conventions.md",
        "INSIDE conventions: tabs, never spaces\n",
    );
    std::fs::remove_file(env.path(".iced/memory/knowledge.md")).unwrap();
    std::os::unix::fs::symlink(
        "../../docs/conventions.md",
        env.path(".iced/memory/knowledge.md"),
    )
    .unwrap();
    env.commit_all("knowledge, by a link inside");
    let out = build(&env, &id, true);
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(
        !holding(&env.path(".iced/run"), "INSIDE conventions").is_empty(),
        "the knowledge file is not in the brief"
    );
}
