//! A repository's config whose `land.remote` is made to run something (SPEC 24.10, issue 35 item
//! 2): the value reaches git's command line at the admit (`git ls-remote`, the claim's `git
//! push`), so it is checked before any git is given it, and a refusal never hands the person the
//! hostile line to run. A config with no runner needs no `iced trust`: these checks are all that
//! stand between a cloned repository and the person's machine.

use crate::env::{git_at, write_executable, TestEnv};
use crate::snap::{assert_read, refusal_blocks};
use serde_json::json;
use std::path::Path;

/// `iced build <id>` (text and `--json`) refused `remote-refused`, with no program having made
/// `marker`; the JSON refusal.
fn build_refused(env: &TestEnv, id: &str, marker: &Path) -> serde_json::Value {
    let text = env.iced(&["build", id]);
    assert!(
        !marker.exists(),
        "a program ran ({}): {text:#?}",
        std::fs::read_to_string(marker).unwrap_or_default()
    );
    assert_eq!(text.code, 3, "{text:#?}");
    assert!(
        text.stderr.contains("\n  code: remote-refused\n"),
        "{text:#?}"
    );
    let json = env.iced_json(&["build", id]);
    json.refused(3, "remote-refused")
}

/// `land.remote` set to `remote` in `.iced/config.json`, as a cloned repository would have it: a
/// config with no runner needs no trust.
fn set_remote(env: &TestEnv, remote: &str) {
    let mut config: serde_json::Value =
        serde_json::from_str(&env.read(".iced/config.json")).unwrap();
    config["land"]["remote"] = json!(remote);
    env.write(
        ".iced/config.json",
        serde_json::to_string_pretty(&config).unwrap(),
    );
}

/// Nothing of a run was written: no state, no claim.
fn nothing_recorded(env: &TestEnv, id: &str) {
    assert!(!env.path(".iced/run/state.json").exists(), "a run recorded");
    assert!(!env.claim_path(id).exists(), "a claim taken");
}

/// Issue 35, why-case 1: `land.remote: "--upload-pack=<cmd>"` ran `<cmd>` at `iced build` (the
/// admit's `git ls-remote` took the value for an option), and the refusal's remedy told the
/// person to run `git ls-remote <the same value>` themselves. Now the value is refused before any
/// git sees it: the command never runs (its marker file is not made), and neither the reason nor
/// the remedy offers a line to run with it.
#[test]
fn a_remote_that_is_an_option_runs_nothing_and_is_not_handed_back() {
    let (env, id) = TestEnv::buildable(json!({"land": {"mode": "merge"}}));
    let marker = env.outside("upload-pack-ran");
    set_remote(&env, &format!("--upload-pack=touch {}", marker.display()));
    let args = ["build", id.as_str()];
    let text = env.iced(&args);
    let json = env.iced_json(&args);
    assert!(!marker.exists(), "the remote's upload-pack ran: {text:#?}");
    assert_read!(
        &env,
        "refused_remote-refused",
        refusal_blocks(&args, &text, &json, 3, "remote-refused")
    );
    let refused = json.refused(3, "remote-refused");
    let remedy = refused["remedy"].as_str().unwrap();
    assert!(!remedy.contains("upload-pack"), "{remedy}");
    nothing_recorded(&env, &id);
    // Every verb that reads the config says the same (SPEC 11, "One check").
    env.iced_json(&["list"]).refused(3, "remote-refused");
    assert!(!marker.exists());
}

/// Values git would read as an option, a command or a transport of its own are refused the same
/// way, before any git runs: `-` in front, `ext::`, a helper's `<transport>::`, a scheme iced
/// does not allow, a space or a character a shell reads.
#[test]
fn remotes_that_are_not_names_or_allowed_urls_are_refused() {
    let (env, id) = TestEnv::buildable(json!({"land": {"mode": "merge"}}));
    let marker = env.outside("ran");
    let m = marker.display();
    for remote in [
        format!("-utouch {m}"),
        format!("ext::sh -c touch% {m}"),
        format!("fd::3,4 {m}"),
        "gopher://example.com/repo.git".to_owned(),
        format!("origin;touch {m}"),
        format!("https://example.com/$(touch {m})"),
        String::new(),
    ] {
        set_remote(&env, &remote);
        let refused = build_refused(&env, &id, &marker);
        assert!(
            refused["reason"].as_str().unwrap().contains("land.remote"),
            "{remote}: {refused:#}"
        );
        assert!(!marker.exists(), "{remote}: a program ran");
        nothing_recorded(&env, &id);
    }
}

/// A bare repository at `dir` whose `pre-receive` and `post-receive` hooks record that they ran in
/// `marker`.
fn bare_with_hooks(dir: &Path, marker: &Path) {
    std::fs::create_dir_all(dir.parent().unwrap()).unwrap();
    git_at(
        dir.parent().unwrap(),
        &[
            "init",
            "-q",
            "--bare",
            "-b",
            "main",
            &dir.display().to_string(),
        ],
    );
    for hook in ["pre-receive", "post-receive", "update"] {
        write_executable(
            &dir.join("hooks").join(hook),
            &format!("#!/bin/sh\necho {hook} >> '{}'\n", marker.display()),
        );
    }
}

/// Issue 35, why-case 1: a clone whose `land.remote` names a bare repository committed inside it
/// ran that repository's `pre-receive` hook at the claim's push (a remote that is a path runs its
/// own hooks, as a server does, SPEC 24.13). A remote that is a path inside the checkout is
/// refused, as a relative path, as a `file://` URL and as a remote of the git config whose URL is
/// one; no hook runs, nothing is pushed there.
#[test]
fn a_remote_committed_inside_the_checkout_runs_none_of_its_hooks() {
    let (env, id) = TestEnv::buildable(json!({"land": {"mode": "merge"}}));
    let marker = env.outside("hook-ran");
    bare_with_hooks(&env.path("vendor/mirror.git"), &marker);
    env.commit_all("a mirror, hooks and all");
    let inside = env.path("vendor/mirror.git").display().to_string();
    env.git(&["remote", "add", "mirror", &inside]);
    for remote in [
        "vendor/mirror.git".to_owned(),
        "./vendor/mirror.git".to_owned(),
        inside.clone(),
        format!("file://{inside}"),
        "mirror".to_owned(),
    ] {
        set_remote(&env, &remote);
        let refused = build_refused(&env, &id, &marker);
        assert!(
            refused["reason"].as_str().unwrap().contains("land.remote"),
            "{remote}: {refused:#}"
        );
        assert!(
            !marker.exists(),
            "{remote}: the mirror's hooks ran: {}",
            std::fs::read_to_string(&marker).unwrap_or_default()
        );
        assert_eq!(
            git_at(&env.path("vendor/mirror.git"), &["for-each-ref"]),
            "",
            "{remote}: something was pushed to the mirror"
        );
        nothing_recorded(&env, &id);
    }
}

/// What stays allowed: a remote the repository's git config names (outside the checkout), and a
/// `file://` URL outside it, are used as before; the claim is pushed there with `--` ahead of the
/// remote, so a name git would read as an option never gets that far either.
#[test]
fn a_named_remote_and_an_outside_url_still_claim() {
    for by_url in [false, true] {
        let (env, id) = TestEnv::buildable(json!({"land": {"mode": "merge"}}));
        let remote = crate::landing::add_remote(&env);
        let value = if by_url {
            format!("file://{}", remote.display())
        } else {
            "origin".to_owned()
        };
        set_remote(&env, &value);
        // No runner: the run waits on its host once admitted (and claimed).
        let out = env.iced_json(&["build", &id, "--no-wait"]);
        assert_eq!(out.code, 0, "{value}: the build was refused: {out:#?}");
        assert_ne!(
            git_at(
                &remote,
                &["for-each-ref", &format!("refs/iced/claims/{id}")]
            ),
            "",
            "{value}: no claim on the remote"
        );
    }
}

/// `land.target` reaches git's command line too (`git merge-base <head> <target>`): one git would
/// take for an option or a range is refused as the config is read, by every verb.
#[test]
fn a_target_that_is_not_a_branch_name_is_refused() {
    let (env, id) = TestEnv::buildable(json!({"land": {"mode": "merge"}}));
    for target in ["--output=x", "main..evil", "main~1", "a b"] {
        let mut config: serde_json::Value =
            serde_json::from_str(&env.read(".iced/config.json")).unwrap();
        config["land"]["target"] = json!(target);
        env.write(
            ".iced/config.json",
            serde_json::to_string_pretty(&config).unwrap(),
        );
        for args in [vec!["list"], vec!["build", id.as_str()]] {
            let refused = env.iced_json(&args).refused(3, "config-invalid");
            assert!(
                refused["reason"].as_str().unwrap().contains("land.target"),
                "{target}: {refused:#}"
            );
        }
        nothing_recorded(&env, &id);
    }
}
