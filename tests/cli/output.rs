//! What a person and a program read (SPEC sections 14, 15 and 16): text never carries a terminal
//! escape from a unit file, JSON carries the text as read, help says what each verb writes and
//! refuses, and the exit codes follow the table.

use crate::env::{unit_file, Run, TestEnv};
use serde_json::json;

const VERBS: &[&str] = &[
    "init", "new", "child", "list", "status", "lint", "approve", "accept", "reject", "abandon",
    "use", "hold", "unhold", "decision", "autonomy", "stats", "trust",
];

const RED: &str = "\u{1b}[31m";
const OSC_TITLE: &str = "\u{1b}]0;pwned\u{7}";
const OSC_LINK: &str = "\u{1b}]8;;http://evil.test\u{1b}\\";
const C1_CSI: &str = "\u{9b}2J";

fn assert_printable(run: &Run, what: &str) {
    for (stream, text) in [("stdout", &run.stdout), ("stderr", &run.stderr)] {
        for bad in ['\u{1b}', '\u{7}', '\u{9b}', '\r'] {
            assert!(
                !text.contains(bad),
                "{what}: {stream} holds {:?}:\n{text:?}",
                bad
            );
        }
    }
}

/// A unit whose title, goal, an assumption, a frontmatter value and a hold reason all carry escape
/// sequences. Returns its id and the title as written.
fn hostile_unit(env: &TestEnv) -> (String, String) {
    let id = env.new_unit("Session timeout");
    let title = format!("{RED}Red title{OSC_TITLE} end");
    env.set_field(&id, "title", &serde_json::to_string(&title).unwrap());
    env.set_field(
        &id,
        "tier",
        &serde_json::to_string(&format!("{RED}S")).unwrap(),
    );
    env.set_field(
        &id,
        "team",
        &serde_json::to_string(&format!("{C1_CSI}ops")).unwrap(),
    );
    env.set_body(
        &id,
        &format!(
            "
# {RED}Heading

## Intent

### Goal
People {RED}stay{RED} signed in {OSC_LINK}here{OSC_LINK} while {C1_CSI}active.

### Failure conditions
- [F1] An active person is signed out.{OSC_TITLE}

## Context
- [assumed] {OSC_TITLE}Idle means no request for 30 minutes.
- [{RED}bogus] tag with an escape

## Expectations
- [E1] Activity extends the session. {{verify: test | tests/{RED}session.rs}}

## Open questions
- [Q1] Is it {RED}30 minutes?
"
        ),
    );
    (id, title)
}

#[test]
fn text_output_never_carries_an_escape_sequence_from_a_unit() {
    let env = TestEnv::initialized();
    let (id, _) = hostile_unit(&env);
    for args in [
        &["list"][..],
        &["status", &id],
        &["status"],
        &["lint", &id],
        &["lint", &id, "--stage", "signoff"],
        &["lint", &id, "--stage", "accept"],
        &["approve", &id, "--yes"],
    ] {
        let run = env.iced(args);
        assert_printable(&run, &format!("{args:?}"));
        assert!(
            !run.stdout.is_empty() || !run.stderr.is_empty(),
            "{args:?} printed nothing"
        );
    }
    // The words stay; only the escapes go.
    let status = env.iced(&["status", &id]).ok();
    assert!(status.stdout.contains("Red title end"), "{}", status.stdout);
    assert!(
        status.stdout.contains("Idle means no request"),
        "{}",
        status.stdout
    );
    let lint = env.iced(&["lint", &id, "--stage", "signoff"]);
    assert!(
        lint.stdout.contains("assumptions-present"),
        "{}",
        lint.stdout
    );
    assert!(lint.stdout.contains("open-questions"), "{}", lint.stdout);

    // A refusal quoting the file (a hold reason) is cleaned too.
    env.set_body(&id, crate::env::GOOD_BODY);
    env.set_field(&id, "tier", "S");
    env.iced_json(&["hold", &id, &format!("{RED}legal{OSC_TITLE}")])
        .ok();
    let run = env.iced(&["approve", &id, "--yes"]);
    assert_eq!(run.code, 3);
    assert!(run.stderr.contains("code: unit-held"), "{}", run.stderr);
    assert!(run.stderr.contains("legal"), "{}", run.stderr);
    assert_printable(&run, "approve of a held unit");
    let run = env.iced(&["list"]);
    assert_printable(&run, "list with a held unit");
}

#[test]
fn json_output_keeps_the_text_as_read() {
    let env = TestEnv::initialized();
    let (id, title) = hostile_unit(&env);
    let run = env.iced_json(&["status", &id]);
    assert!(!run.stdout.contains('\u{1b}'), "JSON must escape ESC");
    assert!(run.stdout.contains("\\u001b[31m"), "{}", run.stdout);
    let status = run.json();
    assert_eq!(status["title"], title);
    assert_eq!(status["team"], format!("{C1_CSI}ops"));
    let rows = env.iced_json(&["list"]).ok().json();
    assert_eq!(rows[0]["title"], title);
    assert_eq!(rows[0]["tier"], format!("{RED}S"));
    let run = env.iced_json(&["lint", &id, "--stage", "signoff"]);
    assert!(!run.stdout.contains('\u{1b}'));
    let report = run.json();
    let messages: Vec<&str> = report["errors"]
        .as_array()
        .unwrap()
        .iter()
        .chain(report["warnings"].as_array().unwrap())
        .map(|i| i["message"].as_str().unwrap())
        .collect();
    assert!(
        messages.iter().any(|m| m.contains(&format!("\"{RED}S\""))),
        "{messages:?}"
    );
    assert!(
        messages.iter().any(|m| m.contains(OSC_TITLE)),
        "{messages:?}"
    );
}

/// A person's verbs, and the machinery a host or an agent uses (issue 12, item 4).
const PERSON_VERBS: &[&str] = &[
    "init", "new", "child", "list", "status", "lint", "approve", "accept", "reject", "abandon",
    "use", "hold", "unhold", "autonomy", "build", "demo", "trust", "run", "stats",
];
const MACHINERY_VERBS: &[&str] = &["implement", "mcp", "guard", "hook", "decision", "schema"];

fn lists(text: &str, verb: &str) -> bool {
    text.lines()
        .any(|l| l.trim_start().starts_with(&format!("{verb} ")))
}

/// `iced --help` lists a person's verbs and not the machinery; `iced help agent` (or
/// `--help --agent`) names every machinery verb as a command line; each verb's own help opens by
/// saying whose it is.
#[test]
fn help_is_by_audience() {
    let env = TestEnv::new();
    let run = env.iced(&["--help"]).ok();
    for verb in PERSON_VERBS {
        assert!(
            lists(&run.stdout, verb),
            "`iced --help` lacks {verb}:\n{}",
            run.stdout
        );
    }
    for verb in MACHINERY_VERBS {
        assert!(
            !lists(&run.stdout, verb),
            "`iced --help` lists {verb}:\n{}",
            run.stdout
        );
    }
    assert!(run.stdout.contains("Exit codes"), "{}", run.stdout);
    assert!(run.stdout.contains("`iced help agent`"), "{}", run.stdout);

    let agent = env.iced(&["help", "agent"]).ok().stdout;
    assert_eq!(env.iced(&["--help", "--agent"]).ok().stdout, agent);
    for verb in MACHINERY_VERBS {
        assert!(agent.contains(&format!("iced {verb} ")), "{verb}:\n{agent}");
    }
    crate::snap::assert_read!(&env, "help_person", run.stdout.clone());
    crate::snap::assert_read!(&env, "help_agent", agent.clone());
    // Every `iced ...` command line the agent help names is one this iced takes.
    for line in agent
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("iced "))
    {
        // The command ends where the description column begins (two spaces).
        let command = line.split("  ").next().unwrap_or_default();
        let words: Vec<&str> = command
            .split_whitespace()
            .take_while(|w| w.chars().all(|c| c.is_ascii_lowercase()))
            .collect();
        let mut args = words.clone();
        args.push("--help");
        let out = env.iced(&args);
        assert_eq!(out.code, 0, "`iced {}`: {out:#?}", args.join(" "));
    }

    for (verbs, audience) in [
        (PERSON_VERBS, "For a person."),
        (MACHINERY_VERBS, "Machinery: "),
    ] {
        for verb in verbs {
            let help = env.iced(&[verb, "--help"]).ok().stdout;
            assert!(help.starts_with(audience), "{verb}: {help}");
        }
    }
}

#[test]
fn every_verb_help_opens_with_one_sentence_on_what_it_writes_or_refuses() {
    let env = TestEnv::new();
    for verb in VERBS {
        let run = env.iced(&[verb, "--help"]).ok();
        // The first line says whose verb it is; the about follows a blank line.
        let about = run.stdout.lines().nth(2).unwrap_or_default();
        assert!(
            about.ends_with('.'),
            "{verb}: {about:?} does not end with `.`"
        );
        let inner = &about[..about.len() - 1];
        assert!(
            !inner.contains(". ") && !inner.ends_with('.'),
            "{verb}: more than one sentence: {about:?}"
        );
        assert!(
            ["writes", "refuses", "appends", "records", "removes"]
                .iter()
                .any(|w| about.contains(w)),
            "{verb}: {about:?} says neither what it writes nor what it refuses"
        );
        assert!(run.stdout.contains("--json"), "{verb}: no --json in help");
    }
}

/// The text refusal of SPEC 15 on stderr, nothing on stdout.
fn assert_text_refusal(run: &Run, exit: i32, code: &str) {
    assert_eq!(run.code, exit, "{run:#?}");
    assert_eq!(run.stdout, "", "a refusal printed to stdout: {run:#?}");
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert!(lines[0].starts_with("error: "), "{}", run.stderr);
    assert!(lines[1].starts_with("  step: "), "{}", run.stderr);
    assert_eq!(lines[2], format!("  code: {code}"), "{}", run.stderr);
    let hint = lines.iter().position(|l| l.starts_with("hint: "));
    assert!(
        hint.is_some_and(|h| lines[h - 1].is_empty()),
        "no blank line then hint: {}",
        run.stderr
    );
}

#[test]
fn exit_codes_follow_the_table_row_by_row() {
    let env = TestEnv::initialized();
    let id = env.good_unit("Session timeout");

    // 0: done.
    let run = env.iced(&["list"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains(&id));
    let run = env.iced_json(&["lint", &id, "--stage", "signoff"]);
    assert_eq!(run.code, 0);
    assert_eq!(run.json(), json!({"errors": [], "warnings": []}));

    // 3: refused, a check failed.
    let run = env.iced(&["status", "nope"]);
    assert_text_refusal(&run, 3, "unit-not-found");
    let run = env.iced_json(&["status", "nope"]);
    run.refused(3, "unit-not-found");
    assert_eq!(run.stderr, "");

    // Lint with errors is a refusal too: exit 3, the report on stdout.
    let other = env.new_unit("empty one");
    let run = env.iced_json(&["lint", &other, "--stage", "signoff"]);
    assert_eq!(run.code, 3);
    assert!(!run.json()["errors"].as_array().unwrap().is_empty());
    assert!(env.read(&unit_file(&other)).contains("status: draft"));

    // 4: needs a person.
    let run = env.iced(&["approve", &id]);
    assert_text_refusal(&run, 4, "confirmation-needed");
    env.iced_json(&["approve", &id])
        .refused(4, "confirmation-needed");

    // 2: usage, in the refusal shape with --json.
    let run = env.iced(&["approve"]);
    assert_eq!(run.code, 2);
    assert_eq!(run.stdout, "");
    assert!(!run.stderr.is_empty());
    let run = env.iced_json(&["approve"]);
    let refused = run.refused(2, "usage");
    assert_eq!(refused["step"], "usage");
    let run = crate::env::run(env.command().env("ICED_NOW", "soon").args(["list"]));
    assert_text_refusal(&run, 2, "usage");

    // 1: an internal error (I/O): a metrics file over what iced reads (sparse, so it takes no room).
    std::fs::File::create(env.path(".iced/metrics.jsonl"))
        .unwrap()
        .set_len(256 * 1024 * 1024 + 1)
        .unwrap();
    let run = env.iced(&["stats"]);
    assert_text_refusal(&run, 1, "io-error");
    let run = env.iced_json(&["stats"]);
    run.refused(1, "io-error");
}

#[test]
fn a_lint_refusal_in_text_lists_the_issues() {
    let env = TestEnv::initialized();
    let id = env.new_unit("dark mode");
    let run = env.iced(&["approve", &id, "--yes"]);
    assert_text_refusal(&run, 3, "lint-errors");
    assert!(run.stderr.contains("goal-missing"), "{}", run.stderr);
    assert!(
        run.stderr.contains("expectations-missing"),
        "{}",
        run.stderr
    );
}

/// Regression: `lint`'s warnings (findings, printed on stdout) were also printed on stderr, one
/// empty `warning: ` line each, taken for the bookkeeping warnings of SPEC 15.
#[test]
fn lint_warnings_are_not_printed_again_as_empty_warning_lines() {
    let env = TestEnv::initialized();
    let id = env.good_unit("dark mode");
    let text = env.read(&unit_file(&id));
    env.write(
        &unit_file(&id),
        text.replace("- [code] Sessions", "- [rumour] Sessions"),
    );
    let run = env.iced(&["lint", &id]).ok();
    assert!(
        run.stdout.starts_with("warning: line ") && run.stdout.contains("context-tag"),
        "{run:#?}"
    );
    assert_eq!(run.stderr, "", "{run:#?}");
}
