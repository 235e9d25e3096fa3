//! Trust (SPEC 24.10): what a repository's config would run (runners, roles, verify.commands,
//! land.pr, hooks) runs only once the person has trusted it for their checkout.

use crate::env::{fake_agent, fake_runner, git_at, merge_json, TestEnv};
use crate::loop_e2e::{last_line, str_of};
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

fn canonical(path: &Path) -> String {
    path.canonicalize().unwrap().display().to_string()
}

/// The person's trust store in the test's config directory, parsed (`{}` when absent).
fn store(env: &TestEnv) -> Value {
    std::fs::read(env.outside("config").join("iced/trust.json"))
        .map(|b| serde_json::from_slice(&b).expect("the store is JSON"))
        .unwrap_or_else(|_| json!({}))
}

/// `git clone` of the author's repository at `name` (outside it), with a committer set.
fn clone(author: &TestEnv, name: &str) -> PathBuf {
    let dir = author.outside(name);
    author.git(&[
        "clone",
        "-q",
        &author.root().display().to_string(),
        &dir.display().to_string(),
    ]);
    git_at(&dir, &["config", "user.name", "Cloning Person"]);
    git_at(&dir, &["config", "user.email", "cloner@example.test"]);
    git_at(&dir, &["config", "commit.gpgsign", "false"]);
    dir
}

/// Regression: a repository's `.iced/config.json` ran its commands and runners on `iced build`
/// although the person never trusted them: a cloned repository with a hostile config ran its argv.
#[test]
fn a_cloned_config_runs_nothing_until_trusted_and_again_after_it_changes() {
    // Someone else's repository: two approved units, and a committed config whose runner (the
    // fake agent, which logs every start outside the repository) and whose definition of done
    // (`touch <marker>`, outside the repository) would run programs.
    let author = TestEnv::initialized();
    let first = author.approved_unit("session timeout");
    let second = author.approved_unit("idle timeout");
    let marker = author.outside("marker");
    let mut config: Value = serde_json::from_str(&author.read(".iced/config.json")).unwrap();
    merge_json(
        &mut config,
        &fake_runner(&author, "commit src/session.rs fixed\nreport-ok E1 E2\n"),
    );
    merge_json(
        &mut config,
        &json!({"verify": {"independent": false, "commands": [{"argv": ["touch", marker.display().to_string()]}]}}),
    );
    author.write(
        ".iced/config.json",
        serde_json::to_string_pretty(&config).unwrap(),
    );
    author.commit_all("a config that runs things");

    let dir = clone(&author, "clone");
    let refused = author
        .iced_json_in(&dir, &["build", &first])
        .refused(3, "config-untrusted");
    let argv = json!([
        "bash",
        fake_agent().display().to_string(),
        author.agent_script().display().to_string(),
        "{output_file}"
    ]);
    let would_run = author.iced_json_in(&dir, &["build", &first]).json()["would_run"].clone();
    assert_eq!(
        would_run,
        json!([
            {"what": "runner", "name": "fake", "kind": "command", "argv": argv, "env": {}, "roles": ["implementer"]},
            {"what": "command", "argv": ["touch", marker.display().to_string()], "cwd": null}
        ])
    );
    assert!(
        str_of(&refused, "reason").contains(&format!("touch {}", marker.display())),
        "{refused}"
    );
    assert!(!marker.exists(), "the definition of done ran");
    assert!(author.agent_starts().is_empty(), "the runner ran");
    assert!(
        !dir.join(".iced/run").exists(),
        "the refused build wrote run files"
    );

    // The text a person reads, exactly.
    let text = crate::env::run(author.command_in(&dir).args(["build", &first]));
    assert_eq!(text.code, 3);
    assert_eq!(text.stdout, "");
    assert_eq!(
        text.stderr,
        format!(
            "error: `.iced/config.json` would run programs, and it has not been trusted for `{root}`; it would run:\n  runner `fake` (command, for implementer): bash {agent} {script} '{{output_file}}'\n  command: touch {marker}\n  step: build\n  code: config-untrusted\n\nhint: read them in `.iced/config.json`; if you would run them yourself, `iced trust` lets them run in this checkout\n",
            root = canonical(&dir),
            agent = fake_agent().display(),
            script = author.agent_script().display(),
            marker = marker.display(),
        )
    );

    // Trusting the author's checkout trusts nothing in the clone: trust is per checkout.
    author.trust_config();
    author
        .iced_json_in(&dir, &["build", &first])
        .refused(3, "config-untrusted");

    // The person reads it and trusts it: the clone builds, running exactly that.
    let trusted = author.iced_json_in(&dir, &["trust"]).ok().json();
    assert_eq!(trusted["root"], canonical(&dir));
    assert_eq!(trusted["trusted"], would_run);
    let sha = str_of(&trusted, "sha256").to_owned();
    assert_eq!(
        store(&author)["roots"][canonical(&dir)]["sha256"],
        sha.as_str()
    );
    let out = author.iced_json_in(&dir, &["build", &first]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(last_line(&out)["status"], "delivered", "{out:#?}");
    assert!(
        marker.exists(),
        "the trusted definition of done did not run"
    );
    assert_eq!(author.agent_starts().len(), 1);

    // A change to what runs, landed as an agent's change would be: refused again, the new argv
    // shown, nothing of it run.
    let script2 = author.agent_dir().join("agent2.txt");
    std::fs::write(&script2, "commit src/session.rs fixed\nreport-ok E1 E2\n").unwrap();
    let mut changed: Value =
        serde_json::from_slice(&std::fs::read(dir.join(".iced/config.json")).unwrap()).unwrap();
    changed["runners"]["fake"]["argv"][2] = script2.display().to_string().into();
    std::fs::write(
        dir.join(".iced/config.json"),
        serde_json::to_string_pretty(&changed).unwrap(),
    )
    .unwrap();
    git_at(&dir, &["commit", "-q", "-am", "the agent's change"]);
    let refused = author
        .iced_json_in(&dir, &["build", &second])
        .refused(3, "config-untrusted");
    assert!(
        str_of(&refused, "reason").contains("changed since you trusted it on 2026-09-30T11:00:00Z"),
        "{refused}"
    );
    assert!(
        str_of(&refused, "reason").contains(&script2.display().to_string()),
        "{refused}"
    );
    assert!(
        !author.agent_dir().join("agent2.txt.log").exists(),
        "the changed runner ran"
    );
    // Verbs that only look still work.
    author.iced_json_in(&dir, &["run", "list"]).ok();
    author.iced_json_in(&dir, &["trust"]).ok();
    let out = author.iced_json_in(&dir, &["build", &second]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(last_line(&out)["status"], "delivered", "{out:#?}");
    assert!(
        author.agent_dir().join("agent2.txt.log").exists(),
        "the trusted runner did not run"
    );
}

/// With no live run there is nothing to step and nothing to refuse. A config changed under a live
/// run and trusted by nobody does not reach that run (SPEC 24.16): `implement step` steps it on
/// under the rules it was admitted with, trusted then; the change is judged when a run would
/// follow it, and the next `build` refuses it until it is trusted.
#[test]
fn an_untrusted_change_reaches_no_live_run_and_is_refused_at_the_next_build() {
    let (env, id) = TestEnv::buildable_with(|env| {
        let mut config = fake_runner(env, "commit src/session.rs fixed\nreport-ok E1 E2\n");
        merge_json(&mut config, &json!({"verify": {"independent": false}}));
        config
    });
    assert_eq!(
        env.iced_json(&["implement", "step"]).ok().json()["action"],
        "nothing"
    );
    let out = env.iced_json(&["build", &id, "--no-wait"]);
    assert_eq!(out.code, 0, "{out:#?}");
    crate::loop_e2e::wait_for("the agent to start", || !env.agent_starts().is_empty());
    // What runs changes (an environment for the runner), and nobody trusts it.
    let mut config: Value = serde_json::from_str(&env.read(".iced/config.json")).unwrap();
    config["runners"]["fake"]["env"] = json!({"LD_PRELOAD": "/tmp/evil.so"});
    env.write(
        ".iced/config.json",
        serde_json::to_string_pretty(&config).unwrap(),
    );
    let run = str_of(&last_line(&out), "run").to_owned();
    let done = crate::loop_e2e::step_until(&env, |s| s["action"] == "delivered");
    assert_eq!(done["run"], run.as_str());
    let refused = env
        .iced_json(&["build", &id])
        .refused(3, "config-untrusted");
    assert!(
        str_of(&refused, "reason").contains("(env LD_PRELOAD=/tmp/evil.so)"),
        "{refused}"
    );
}

/// `iced trust` prints what it trusted; a config that runs nothing needs no trust and records
/// none; the store is the person's own (0600, outside the repository) and keeps other entries.
#[test]
fn trust_prints_what_it_trusted_and_keeps_the_store_private() {
    let env = TestEnv::initialized();
    let run = env.iced(&["trust"]).ok();
    assert_eq!(
        run.stdout,
        "Nothing to trust: `.iced/config.json` names no runner, command, forge argv or hook.\n"
    );
    assert_eq!(store(&env), json!({}));

    env.patch_config(&json!({
        "verify": {"commands": ["cargo test", {"argv": ["make", "lint"], "cwd": "web"}]},
        "runners": {"cc": {"kind": "claude", "program": "/opt/claude", "args": ["--verbose"], "env": {"FOO": "bar"}}},
        "roles": {"implementer": {"runner": "cc"}, "validator": {"runner": "cc"}},
        "land": {"mode": "pr", "remote": "origin", "pr": {"open": ["gh", "pr", "create", "--fill"], "arm": ["gh", "pr", "merge", "--auto"]}},
        "hooks": {"after": ["notify-send", "done"]}
    }));
    let run = env.iced(&["trust"]).ok();
    let root = canonical(env.root());
    let store_path = env.outside("config").join("iced/trust.json");
    assert_eq!(
        run.stdout,
        format!(
            "Trusted for `{root}` (recorded in `{}`); iced may now run:\n  runner `cc` (claude, for implementer, validator): /opt/claude --verbose (env FOO=bar)\n  command: cargo test\n  command (in `web`): make lint\n  forge `open`: gh pr create --fill\n  forge `arm`: gh pr merge --auto\n  hooks: {{\"after\":[\"notify-send\",\"done\"]}}\n\nA change to these parts of the config needs `iced trust` again.\n",
            store_path.display()
        )
    );
    let meta = std::fs::metadata(&store_path).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let entry = &store(&env)["roots"][&root];
    assert_eq!(entry["at"], "2026-09-30T11:00:00Z");

    // Another repository's entry is kept beside this one.
    let other = TestEnv::initialized();
    let mut cmd = other.command();
    cmd.env("XDG_CONFIG_HOME", env.outside("config"));
    std::fs::write(
        other.path(".iced/config.json"),
        serde_json::to_string(&json!({"verify": {"commands": ["true"]}})).unwrap(),
    )
    .unwrap();
    let out = crate::env::run(cmd.args(["trust", "--json"]));
    assert_eq!(out.code, 0, "{out:#?}");
    let both = store(&env);
    assert_eq!(both["roots"].as_object().unwrap().len(), 2, "{both:#}");
    assert_eq!(both["roots"][&root], *entry);
}

/// The store is refused, never followed or guessed at, when it is a symlink or does not parse.
#[test]
fn a_symlinked_or_damaged_trust_store_is_refused() {
    let (env, id) =
        TestEnv::buildable(json!({"verify": {"independent": false, "commands": ["true"]}}));
    let store_path = env.outside("config").join("iced/trust.json");
    let elsewhere = env.outside("elsewhere.json");
    std::fs::rename(&store_path, &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &store_path).unwrap();
    env.iced_json(&["trust"]).refused(3, "path-symlink");
    env.iced_json(&["build", &id]).refused(3, "path-symlink");
    assert!(!env.path(".iced/run").exists());

    std::fs::remove_file(&store_path).unwrap();
    std::fs::write(&store_path, "{not json").unwrap();
    let r = env.iced_json(&["build", &id]).refused(3, "trust-invalid");
    assert!(
        str_of(&r, "reason").contains(&store_path.display().to_string()),
        "{r}"
    );
    env.iced_json(&["trust"]).refused(3, "trust-invalid");
    assert_eq!(
        std::fs::read_to_string(&store_path).unwrap(),
        "{not json",
        "the damaged store was replaced"
    );
}

/// `iced init` trusts the config it writes (a detected test command), and not one that was
/// already there.
#[test]
fn init_trusts_the_config_it_writes_and_no_other() {
    let env = TestEnv::new();
    env.write("Cargo.toml", "[package]\nname = \"x\"\n");
    env.commit_all("a crate");
    let out = env.iced_json(&["init"]).ok().json();
    assert_eq!(
        out["trusted"],
        json!([{"what": "command", "argv": ["cargo", "test"], "cwd": null}])
    );
    let root = canonical(env.root());
    assert!(
        store(&env)["roots"][&root]["sha256"].is_string(),
        "{}",
        store(&env)
    );
    env.commit_all("iced");

    // A clone has the same config, written by someone else: init leaves it, and trusts nothing.
    let dir = clone(&env, "clone");
    let out = env.iced_json_in(&dir, &["init"]).ok().json();
    assert!(out.get("trusted").is_none(), "{out}");
    assert!(
        store(&env)["roots"].get(canonical(&dir)).is_none(),
        "{}",
        store(&env)
    );
}
