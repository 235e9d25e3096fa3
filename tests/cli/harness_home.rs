//! A harness's home (SPEC 20.8, 24.12) with the real Claude Code CLI against the mock model API: a
//! confined agent logs in with a copy of the person's login, made in the home of its own, and
//! leaves the person's files as they were; an unconfined one uses the person's home, as before.
//! The CLI is found and required as in `harness.rs`.

use crate::harness::{
    assert_session_in_agent_home, claude, implementer, record, validator, walk_files, Harness, PASS,
};
use crate::loop_e2e::{last_line, str_of};
use serde_json::json;

/// A key the person stored with `/login` (Claude Code keeps it in `~/.claude.json`); not in the
/// environment.
const STORED: &str = "sk-ant-stored-PLANTED-24680";

/// SPEC 20.8: a person logged in with a stored key, and no key in the environment: each confined
/// claude logs in with the copy of it in its own home's `.claude.json`, which holds nothing else
/// of the person's file; the person's file is as it was, and no session went into their HOME.
#[test]
fn a_confined_claude_logs_in_with_a_copy_of_the_persons_stored_key() {
    let Some(program) = claude() else { return };
    let h = Harness::new(&program, vec![implementer(), validator(PASS)], json!({}));
    let home = h.env.outside("home");
    std::fs::create_dir_all(&home).unwrap();
    let theirs = json!({
        "primaryApiKey": STORED,
        "userID": "the-person",
        "projects": {"/their/secret/project": {"allowedTools": ["Bash"]}}
    })
    .to_string();
    std::fs::write(home.join(".claude.json"), &theirs).unwrap();
    let out = crate::env::run(
        h.env
            .command()
            .env("HOME", &home)
            .env("ICED_TEST_API", &h.api.url)
            .args(["build", &h.id, "--json"]),
    );
    let last = last_line(&out);
    assert_eq!(last["status"], "delivered", "{out:#?}");

    let seen = h.api.seen();
    assert!(
        seen.iter()
            .any(|s| s.rule.as_deref() == Some("# Validate:")),
        "{seen:#?}"
    );
    assert!(
        seen.iter().all(|s| s.credential.as_deref() == Some(STORED)),
        "every request carried the stored key: {seen:#?}"
    );
    let run = str_of(&last, "run");
    let show = h.show(run);
    for (key, activity) in [
        ("implement", "implement-1"),
        ("validate-full", "validate-full-1"),
    ] {
        assert_session_in_agent_home(&h.env, (run, &h.id), &show, key, &[&home]);
        let copy = h.env.path(&format!(
            ".iced/run/{run}/{}/activities/{activity}/home/.claude.json",
            h.id
        ));
        // The requests carried the key, so the copy was there while the agent ran; it is gone
        // once the agent ended (the copy's shape is the unit tests' of the seeding).
        assert!(
            !copy.exists(),
            "the login's copy stayed: {}",
            copy.display()
        );
    }
    assert_eq!(
        std::fs::read_to_string(home.join(".claude.json")).unwrap(),
        theirs,
        "the person's file is as it was"
    );
    let stray: Vec<_> = walk_files(&home)
        .into_iter()
        .filter(|p| !p.ends_with(".claude.json"))
        .collect();
    assert!(
        stray.is_empty(),
        "nothing written in the person's HOME: {stray:#?}"
    );
}

/// SPEC 20.8, 24.12: a person whose user config runs agents unconfined gets today's harness: no
/// home of its own is made, Claude Code keeps its session in the person's `~/.claude`, and its
/// transcript is copied from there.
#[test]
fn an_unconfined_claude_keeps_its_session_in_the_persons_home() {
    let Some(program) = claude() else { return };
    let h = Harness::new(&program, vec![implementer(), validator(PASS)], json!({}));
    h.env
        .write_user_config(&json!({"agents": {"unconfined": true}}));
    let (out, last) = h.build();
    assert_eq!(last["status"], "delivered", "{out:#?}");
    let run = str_of(&last, "run");
    let show = h.show(run);
    let implement = record(&show, "implement");
    let harness = &implement["outcome"]["harness"];
    let session = str_of(harness, "session_id");
    let activity = h
        .env
        .path(&format!(".iced/run/{run}/{}/activities/implement-1", h.id));
    assert!(activity.is_dir(), "{}", activity.display());
    assert!(
        !activity.join("home").exists(),
        "no home of its own: {:#?}",
        walk_files(&activity)
    );
    let theirs: Vec<_> = walk_files(&h.env.outside("home/.claude/projects"))
        .into_iter()
        .filter(|p| p.ends_with(format!("{session}.jsonl")))
        .collect();
    assert_eq!(theirs.len(), 1, "the session in the person's ~/.claude");
    let copy = std::fs::read_to_string(str_of(harness, "transcript")).unwrap();
    assert!(copy.contains(session), "copied from there");
}
