//! How every snapshot of what a person or a program reads is made (issue 10, item 5): the real
//! binary's exit code, stdout and stderr, written out the same way each time, with the same
//! filters for what differs from run to run. The snapshot files are in `tests/cli/snapshots/`.
//!
//! Why snapshots: every word iced prints becomes a file a reviewer reads, and a change to one shows
//! up as a diff of that file. The refactor of the engine (issue 10, items 1 to 4) must keep them
//! byte for byte. Under CI (`CI=true`) a missing or changed snapshot fails instead of being written;
//! locally insta writes `<name>.snap.new` beside the snapshot for review (`cargo insta review`, or
//! rename it after reading it).
//!
//! What this must never do: hide a difference a person would see. A filter replaces only what is
//! different on every run (a temporary directory, a random id, a duration), each with a marker that
//! says what it was.

use crate::env::{Run, TestEnv};
use serde_json::Value;

/// `insta::assert_snapshot!` under [`settings`]: the snapshot is named after the calling module
/// and `$name`, and stored beside the calling file in `snapshots/`.
macro_rules! assert_read {
    ($env:expr, $name:expr, $content:expr) => {{
        let content: String = $content;
        $crate::snap::settings($env).bind(|| insta::assert_snapshot!($name, content));
    }};
}
pub(crate) use assert_read;

/// The filters, in the order they apply, and the marker each leaves. Each says why it is there.
pub fn filters(env: &TestEnv) -> Vec<(String, &'static str)> {
    let tmp = env.root().parent().expect("the repository has a parent");
    let mut out: Vec<(String, &'static str)> = Vec::new();
    // The test's temporary directory (the repository is `[TMP]/repo`, its lane worktrees
    // `[TMP]/repo.iced-worktrees/<lane>`, the person's config directory `[TMP]/config`), as given
    // and as the kernel resolves it.
    let canonical = tmp.canonicalize().unwrap_or_else(|_| tmp.to_path_buf());
    for path in [canonical.as_path(), tmp] {
        out.push((escape(&path.display().to_string()), "[TMP]"));
    }
    // The machine's name, where iced records who holds a claim.
    if let Ok(host) = std::fs::read_to_string("/proc/sys/kernel/hostname") {
        let host = escape(host.trim());
        out.push((format!(r"(\bhost ){host}\b"), "${1}[HOST]"));
        out.push((format!(r#"("host": ?"){host}""#), "${1}[HOST]\""));
    }
    // Where this checkout of iced is: the fake agent and the fake forge are run from it.
    out.push((escape(env!("CARGO_MANIFEST_DIR")), "[CRATE]"));
    // A run id: the pinned time and six random hex digits.
    out.push((r"run-\d{8}T\d{6}-[0-9a-f]{6}\b".into(), "[RUN]"));
    // Hex ids below start where no hex digit stands before them; not at a word boundary, which
    // an id right after the `\n` escape of a JSON string lacks (`\nrun-...`, `\n0a1b...`).
    // A harness session (a UUID).
    out.push((
        r"(^|[^0-9a-f])[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b".into(),
        "${1}[UUID]",
    ));
    // sha256 of a file whose text names the temporary directory (a brief, a kept report), and the
    // contract hash with them: 64 hex digits.
    out.push((r"(^|[^0-9a-f])[0-9a-f]{64}\b".into(), "${1}[SHA256]"));
    // Commit and tree ids: git stamps commits with the real clock.
    out.push((r"(^|[^0-9a-f])[0-9a-f]{40}\b".into(), "${1}[SHA]"));
    // Nonces and receipt keys: a random UUID's 32 hex digits.
    out.push((r"(^|[^0-9a-f])[0-9a-f]{32}\b".into(), "${1}[NONCE]"));
    // A commit named in a sentence: its first 12 hex digits.
    out.push((r"(^|[^0-9a-f])[0-9a-f]{12}\b".into(), "${1}[SHORT_SHA]"));
    // Durations: how long a command or an agent took.
    out.push((r#"("duration_ms": ?)\d+"#.into(), "${1}[MS]"));
    out.push((r"\b\d+ ms\b".into(), "[MS] ms"));
    // How much memory a supervisor used at most.
    out.push((r#"("supervisor_max_rss_kb": ?)\d+"#.into(), "${1}[KB]"));
    // Process ids and their start times.
    out.push((r#"("pid": ?)\d+"#.into(), "${1}[PID]"));
    out.push((r#"("pid_start": ?)\d+"#.into(), "${1}[PID_START]"));
    out.push((r"\bpid[= ]\d+".into(), "pid [PID]"));
    out
}

/// insta's settings for one snapshot of `env`'s output: [`filters`], and no expression in the
/// header (it is always the same variable).
pub fn settings(env: &TestEnv) -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    settings.set_omit_expression(true);
    for (pattern, marker) in filters(env) {
        settings.add_filter(&pattern, marker);
    }
    settings
}

/// `text` as a regular expression that matches it literally.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// One stream as the snapshot shows it: as printed, except that a control character other than a
/// newline or a tab is written `<U+XXXX>` (so a review sees it, and `grep '<U+'` finds it), and a
/// missing final newline is said.
fn stream(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_control() && c != '\n' && c != '\t' {
            out.push_str(&format!("<U+{:04X}>", c as u32));
        } else {
            out.push(c);
        }
    }
    if !out.is_empty() && !out.ends_with('\n') {
        out.push_str("\n[no newline at the end]\n");
    }
    out
}

fn command_line(args: &[&str]) -> String {
    let mut line = String::from("$ iced");
    for arg in args {
        if arg.is_empty() || arg.contains(|c: char| c.is_whitespace() || "'\"$`\\".contains(c)) {
            line.push_str(&format!(" '{}'", arg.replace('\'', r"'\''")));
        } else {
            line.push(' ');
            line.push_str(arg);
        }
    }
    line
}

/// What `iced <args>` printed, in text: the command, its exit code, stdout, stderr.
pub fn text_block(args: &[&str], run: &Run) -> String {
    format!(
        "{}\nexit {}\n----- stdout -----\n{}----- stderr -----\n{}",
        command_line(args),
        run.code,
        stream(&run.stdout),
        stream(&run.stderr)
    )
}

/// What `iced <args> --json` printed: stdout is one JSON value per line, each written compactly
/// (checked: the snapshot shows it indented, which then loses nothing), then stderr.
pub fn json_block(args: &[&str], run: &Run) -> String {
    let mut shown = String::new();
    if !run.stdout.is_empty() {
        assert!(
            run.stdout.ends_with('\n'),
            "`{}` printed JSON without a final newline:\n{run:#?}",
            command_line(args)
        );
    }
    for line in run.stdout.lines() {
        let value: Value = serde_json::from_str(line).unwrap_or_else(|e| {
            panic!(
                "`{} --json` printed a line that is not JSON ({e}):\n{line}\n{run:#?}",
                command_line(args)
            )
        });
        assert_eq!(
            serde_json::to_string(&value).unwrap(),
            line,
            "`{} --json` printed JSON that is not written compactly",
            command_line(args)
        );
        shown.push_str(&serde_json::to_string_pretty(&value).unwrap());
        shown.push('\n');
    }
    format!(
        "{} --json\nexit {}\n----- stdout (JSON, indented here) -----\n{}----- stderr -----\n{}",
        command_line(args),
        run.code,
        stream(&shown),
        stream(&run.stderr)
    )
}

/// `iced <args>` run twice, as text and with `--json`, one block each: for a verb that changes
/// nothing (or answers the same when asked again).
pub fn both(env: &TestEnv, args: &[&str]) -> String {
    let text = env.iced(args);
    let json = env.iced_json(args);
    format!("{}\n{}", text_block(args, &text), json_block(args, &json))
}

/// `iced <args> --json` only: the answer of a verb that changes something, once.
pub fn json(env: &TestEnv, args: &[&str]) -> String {
    json_block(args, &env.iced_json(args))
}

/// A file iced wrote (evidence, verify.json, a pull request body), as the snapshot shows it.
pub fn file(what: &str, bytes: &str) -> String {
    format!("----- {what} -----\n{}", stream(bytes))
}

/// A refusal by `iced <args>`, as text and as `--json`, after checking both carry `code` and exit
/// with `exit`: a refusal changes nothing, so asking twice is asking the same. For a refusal that
/// needs more than arguments (standard input, an environment variable), see [`refusal_blocks`].
pub fn refused(env: &TestEnv, args: &[&str], exit: i32, code: &str) -> String {
    let text = env.iced(args);
    let json = env.iced_json(args);
    refusal_blocks(args, &text, &json, exit, code)
}

/// [`refused`] for two runs the caller made: checks them and writes their blocks.
pub fn refusal_blocks(args: &[&str], text: &Run, json: &Run, exit: i32, code: &str) -> String {
    assert_eq!(
        text.code, exit,
        "{code}: the text run's exit code:\n{text:#?}"
    );
    assert!(
        text.stderr.contains(&format!("\n  code: {code}\n")),
        "{code}: the text run did not refuse with it:\n{text:#?}"
    );
    json.refused(exit, code);
    format!("{}\n{}", text_block(args, text), json_block(args, json))
}

/// `assert_read!` of [`refused`]: the snapshot is named `refused_<code>`, so the snapshot folder
/// lists every refusal code a test produces.
macro_rules! assert_refused {
    ($env:expr, $code:expr, $exit:expr, $args:expr) => {{
        let code: &str = $code;
        $crate::snap::assert_read!(
            $env,
            format!("refused_{code}"),
            $crate::snap::refused($env, $args, $exit, code)
        );
    }};
}
pub(crate) use assert_refused;
