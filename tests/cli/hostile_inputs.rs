//! Hostile inputs to the person's escalation verbs and to memory drafts (SPEC 20.7, 20.15, 24.6,
//! 24.7, 16): a contract-lines file that is a FIFO, a link, 5 MB, a directory or not UTF-8; a memory
//! agent that commits a link to a secret, a 5 MB memory, leaves a FIFO, or processes behind; and
//! terminal escapes in what an agent wrote, printed by `escalation show`, `status` and `run show`.

use crate::env::{Run, TestEnv};
use crate::escalation::{escalating, PROPOSAL};
use crate::hostile_files::{bounded, mkfifo};
use crate::loop_e2e::{build, own_checks, str_of, with_agent};
use crate::memory::{memory_branches, memory_env};
use crate::snap::{assert_read, refusal_blocks};
use crate::survivors::Escapees;
use std::path::Path;

/// `iced <args>`, as text and with `--json`, each under [`bounded`].
fn both_bounded(env: &TestEnv, args: &[&str]) -> (Run, Run) {
    let text = bounded(env.command().args(args));
    let json = bounded(env.command().args(args).arg("--json"));
    (text, json)
}

/// A lane blocked on the proposal escalation of [`escalating`]: the env, the unit.
fn blocked_on_a_proposal() -> (TestEnv, String) {
    let (env, id) = escalating(PROPOSAL);
    let (_, last) = build(&env, &id, &[], 4);
    assert_eq!(last["status"], "blocked", "{last}");
    (env, id)
}

/// `escalation edit <id> --file <file>` is refused with `code` (exit `exit`), as text and JSON, and
/// the repository (the unit, decisions, the run's state) and the escalation are as they were.
fn edit_refused(env: &TestEnv, id: &str, file: &Path, exit: i32, code: &str, snap: &str) {
    let before = env.snapshot();
    let shown = env.iced_json(&["escalation", "show", id]).ok().json();
    let path = file.display().to_string();
    let args = ["escalation", "edit", id, "--file", &path];
    let (text, json) = both_bounded(env, &args);
    let blocks = refusal_blocks(&args, &text, &json, exit, code);
    assert_eq!(env.snapshot(), before, "a refusal wrote nothing");
    let after = env.iced_json(&["escalation", "show", id]).ok().json();
    assert_eq!(after, shown, "the escalation is unchanged");
    assert_eq!(after["status"], "open");
    assert_read!(env, snap, blocks);
}

#[test]
fn contract_lines_from_a_fifo_are_refused_at_once() {
    let (env, id) = blocked_on_a_proposal();
    let fifo = env.outside("lines.fifo");
    mkfifo(&fifo);
    edit_refused(&env, &id, &fifo, 3, "not-a-regular-file", "edit_file_fifo");
}

#[test]
fn contract_lines_through_a_link_are_refused_unread() {
    let (env, id) = blocked_on_a_proposal();
    // A link to good contract lines: the lines would apply, but iced reads the file named only.
    let lines = env.outside("lines.md");
    std::fs::write(
        &lines,
        "- [E2] An idle session ends after 45 minutes. {verify: test | tests/session.rs}\n",
    )
    .unwrap();
    let link = env.outside("lines-link.md");
    std::os::unix::fs::symlink(&lines, &link).unwrap();
    edit_refused(&env, &id, &link, 3, "path-symlink", "edit_file_link");
    // A link to a FIFO is not opened either.
    let fifo = env.outside("lines.fifo");
    mkfifo(&fifo);
    let to_fifo = env.outside("fifo-link.md");
    std::os::unix::fs::symlink(&fifo, &to_fifo).unwrap();
    let out = bounded(
        env.command()
            .args(["escalation", "edit", &id, "--file"])
            .arg(&to_fifo)
            .arg("--json"),
    );
    out.refused(3, "path-symlink");
    // The file itself is taken.
    let applied = env
        .iced_json(&["escalation", "edit", &id, "--file", lines.to_str().unwrap()])
        .ok()
        .json();
    assert_eq!(applied["status"], "applied");
}

/// Regression: a 5 MB file was an `io-error` (exit 1) whose remedy spoke of disks and
/// permissions; it is the proposal that is too large.
#[test]
fn contract_lines_of_5_mb_are_refused_unread() {
    let (env, id) = blocked_on_a_proposal();
    let big = env.outside("big.md");
    std::fs::write(&big, vec![b'x'; 5 * 1024 * 1024]).unwrap();
    edit_refused(&env, &id, &big, 3, "proposal-invalid", "edit_file_5mb");
}

#[test]
fn contract_lines_from_a_directory_or_not_utf8_or_missing_are_refused() {
    let (env, id) = blocked_on_a_proposal();
    let dir = env.outside("lines-dir");
    std::fs::create_dir(&dir).unwrap();
    edit_refused(&env, &id, &dir, 3, "not-a-regular-file", "edit_file_dir");
    let latin1 = env.outside("latin1.md");
    std::fs::write(
        &latin1,
        b"- [E2] An idle session ends after 45 minutes \xe9t\xe9.\n",
    )
    .unwrap();
    edit_refused(
        &env,
        &id,
        &latin1,
        3,
        "proposal-invalid",
        "edit_file_not_utf8",
    );
    let missing = env.outside("missing.md");
    edit_refused(&env, &id, &missing, 2, "usage", "edit_file_missing");
}

/// What an agent wrote holds terminal escapes (SPEC 16, 20.7): the escalation's message and its
/// proposal are printed without them by `escalation show`, `status` and `run show`; the JSON
/// carries them as written.
#[test]
fn an_escalations_escapes_are_stripped_when_printed() {
    let dir = tempfile::tempdir().unwrap();
    let proposal = dir.path().join("proposal.md");
    std::fs::write(
        &proposal,
        "- [E2] An idle session ends \u{1b}[8mhidden\u{1b}[0m after 45 minutes. {verify: test | tests/session.rs}\n",
    )
    .unwrap();
    let (env, id) = with_agent(
        &format!(
            "attempt 1\nescalate change-expectation {} E2 \u{1b}[2J\u{1b}]0;pwned\u{1b}\\contradicts \u{9b}31mC1\n",
            proposal.display()
        ),
        own_checks(serde_json::json!(["true"])),
    );
    let (_, last) = build(&env, &id, &[], 4);
    let run = str_of(&last, "run").to_owned();
    let shown = env.iced_json(&["escalation", "show", &id]).ok().json();
    assert!(
        shown["message"].as_str().unwrap().contains('\u{1b}'),
        "the JSON keeps the agent's words as written: {shown:#}"
    );
    for args in [
        vec!["escalation", "show", id.as_str()],
        vec!["status", id.as_str()],
        vec!["run", "show", run.as_str()],
    ] {
        let out = env.iced(&args).ok();
        for c in (out.stdout.clone() + &out.stderr).chars() {
            assert!(
                c == '\n' || c == '\t' || !c.is_control(),
                "`iced {}` printed {c:?}:\n{}",
                args.join(" "),
                out.stdout
            );
        }
    }
    assert_read!(
        &env,
        "escalation_escapes_show",
        crate::snap::text_block(
            &["escalation", "show", &id],
            &env.iced(&["escalation", "show", &id])
        )
    );
}

/// The memory agent's refusal as text and JSON (two repositories: each call drafts once).
fn memory_refused(agent: &str, code: &str, snap: &str) -> (TestEnv, TestEnv) {
    let args = ["memory", "draft"];
    let (text_env, json_env) = (memory_env(agent), memory_env(agent));
    for env in [&text_env, &json_env] {
        // The loop's own check, behind the confinement (SPEC 24.12) that would refuse the write.
        env.unconfined();
        std::fs::write(env.outside("secret.txt"), "TOP-SECRET-7f3a\n").unwrap();
        let script = std::fs::read_to_string(env.agent_script())
            .unwrap()
            .replace("{secret}", &env.outside("secret.txt").display().to_string());
        std::fs::write(env.agent_script(), script).unwrap();
    }
    let text = bounded(text_env.command().args(args));
    let json = bounded(json_env.command().args(args).arg("--json"));
    assert_read!(
        &text_env,
        snap,
        refusal_blocks(&args, &text, &json, 3, code)
    );
    for env in [&text_env, &json_env] {
        // The branch is kept for a look, never merged: the checkout holds no link.
        assert_eq!(memory_branches(env).len(), 1);
        let product = std::fs::symlink_metadata(env.path(".iced/memory/product.md"));
        assert!(!product.is_ok_and(|m| m.file_type().is_symlink()));
    }
    (text_env, json_env)
}

/// Regression: a memory agent that committed `.iced/memory/product.md` as a link to a file
/// outside the repository passed the check (the path is under `.iced/memory/`); merged, every
/// brief would copy the secret it points at to the agents.
#[test]
fn a_memory_draft_that_links_to_a_secret_is_refused() {
    memory_refused(
        "role memory\ncommit-link .iced/memory/product.md {secret}\n",
        "path-symlink",
        "memory_draft_link",
    );
}

/// Regression: a 5 MB memory file passed; a brief never carries more than 64 KiB of one.
#[test]
fn a_memory_draft_of_5_mb_is_refused() {
    memory_refused(
        "role memory\ncommit-bytes .iced/memory/product.md 5242880\n",
        "memory-too-large",
        "refused_memory-too-large",
    );
}

/// A FIFO the memory agent leaves where a memory file goes cannot be committed: the draft is what
/// it committed, and nothing waits on the FIFO.
#[test]
fn a_memory_agent_that_leaves_a_fifo_drafts_only_what_it_committed() {
    let env = memory_env(
        "role memory\ncommit .iced/memory/product.md the product\nfifo .iced/memory/knowledge.md\n",
    );
    let out = bounded(env.command().args(["memory", "draft", "--json"]));
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(
        out.json()["files"],
        serde_json::json!([".iced/memory/product.md"])
    );
    let agent_only_fifo = memory_env("role memory\nfifo .iced/memory/product.md\n");
    let out = bounded(
        agent_only_fifo
            .command()
            .args(["memory", "draft", "--json"]),
    );
    out.refused(3, "memory-empty");
}

/// No survivors (SPEC 24.7): the memory agent goes through the same supervisor as an implementer.
#[test]
fn a_memory_agent_leaves_no_process_behind() {
    let escapees = Escapees::new();
    let env = memory_env(&format!(
        "role memory\n{}{}commit .iced/memory/product.md the product\n",
        escapees.directive(),
        escapees.detach_directive()
    ));
    let out = bounded(env.command().args(["memory", "draft", "--json"]));
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(escapees.pids().len(), 3, "all three started");
    assert_eq!(escapees.survivors(), Vec::<u32>::new());
}

/// A planner's draft with terminal escapes in its title and a question: `status` prints neither.
#[test]
fn a_planners_escapes_are_stripped_when_printed() {
    let env = crate::auto_plan::planning(
        "role planner\ndraft-body {escaped}\nrole plan-reviewer\nreport {\"verdict\": \"pass\", \"expectations\": [{\"id\": \"E1\", \"result\": \"pass\", \"evidence\": \"checkable\"}]}\n",
        3,
    );
    let body = crate::auto_plan::PLANNED_BODY
        .replace(
            "# Session timeout for idle users",
            "# Session \u{1b}]0;pwned\u{7}timeout\u{1b}[2J for idle users",
        )
        .replace(
            "## Context",
            "## Open questions\n- [Q1] Is \u{1b}[31m30\u{1b}[0m minutes final?\n\n## Context",
        );
    std::fs::write(env.outside("escaped.md"), body).unwrap();
    let script = std::fs::read_to_string(env.agent_script())
        .unwrap()
        .replace(
            "{escaped}",
            &env.outside("escaped.md").display().to_string(),
        );
    std::fs::write(env.agent_script(), script).unwrap();
    let out = bounded(
        env.command()
            .args(["build", "--auto-plan", "session timeout"]),
    );
    assert_eq!(out.code, 4, "an open question hands it back: {out:#?}");
    let id = crate::auto_plan::planned_id(&env);
    let status = env.iced(&["status", &id]).ok();
    assert!(
        !status.stdout.contains('\u{1b}') && !status.stdout.contains('\u{7}'),
        "{status:#?}"
    );
    assert_read!(
        &env,
        "planner_escapes_status",
        crate::snap::text_block(&["status", &id], &status)
    );
}

/// Regression: a memory agent that wrote around its worktree, into the person's checkout, had its
/// draft offered to merge as if nothing happened. The checkout is fingerprinted as a planner's is.
#[test]
fn a_memory_agent_that_writes_into_the_checkout_is_refused() {
    // The worktree is `<tmp>/repo.iced-worktrees/memory-<stamp>`: the checkout is `<tmp>/repo`.
    let agent = "role memory\ncommit .iced/memory/product.md the product\nwrite ../../repo/src/planted.txt the memory agent was here\n";
    let (text_env, _) = memory_refused(agent, "memory-outside", "memory_draft_checkout");
    assert!(
        text_env.path("src/planted.txt").exists(),
        "the test wrote where it meant to"
    );
}
