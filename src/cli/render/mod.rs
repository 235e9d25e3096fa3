//! How results and refusals look. Text goes through `for_terminal`: anything a unit file or a
//! report said is printed without its escape sequences. The words of the loop's values live in the
//! submodules: a step report (`step`), a run and its agents (`run`), the handover (`handover`), a run's timeline page (`timeline`).

pub mod handover;
pub mod queue;
pub mod run;
pub mod step;
pub mod then;
pub mod timeline;

use super::Output;
use crate::refusal::Refusal;
use crate::text::for_terminal;
use std::io::Write;

pub fn output(out: &Output, json: bool) -> i32 {
    let mut stdout = std::io::stdout().lock();
    let written = if json {
        // One buffered write: a list of a thousand units is one line of some hundred kilobytes.
        let mut buf = std::io::BufWriter::with_capacity(1 << 16, &mut stdout);
        match &out.json_text {
            Some(text) => buf.write_all(text.as_bytes()),
            None => serde_json::to_writer(&mut buf, &out.json).map_err(std::io::Error::from),
        }
        .and_then(|()| buf.write_all(b"\n"))
        .and_then(|()| buf.flush())
    } else if out.text.is_empty() {
        Ok(())
    } else {
        let text = for_terminal(&out.text);
        writeln!(stdout, "{}", text.trim_end_matches('\n'))
    };
    // A closed pipe (`iced list | head`) is not an error worth a panic.
    let _ = written.and_then(|()| stdout.flush());
    if !json {
        // Bookkeeping that failed after the change was made (JSON carries these as `warnings`,
        // each a sentence). `lint`'s `warnings` are findings (objects), already printed on stdout:
        // they are not bookkeeping, and printed here they came out as empty `warning: ` lines.
        let mut stderr = std::io::stderr().lock();
        for text in out.json["warnings"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(serde_json::Value::as_str)
        {
            let _ = writeln!(stderr, "warning: {}", for_terminal(text));
        }
    }
    out.exit.code()
}

/// A progress line on stderr, stripped of terminal escapes; nothing under `--json`, whose stdout
/// is the one answer (`build`, `drain`).
pub fn say(json: bool, line: &str) {
    if json {
        return;
    }
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{}", for_terminal(line));
}

pub fn refusal(r: &Refusal, json: bool) -> i32 {
    if json {
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "{}", r.to_json());
    } else {
        let mut text = format!(
            "error: {}\n  step: {}\n  code: {}\n",
            r.reason, r.step, r.code
        );
        if let Some(("lint", report)) = r.detail.as_deref() {
            for severity in ["errors", "warnings"] {
                for issue in report[severity].as_array().into_iter().flatten() {
                    text.push_str(&format!("  {}\n", issue_line(issue)));
                }
            }
        }
        if !r.remedy.is_empty() {
            text.push_str(&format!("\nhint: {}\n", r.remedy));
        }
        let mut stderr = std::io::stderr().lock();
        let _ = stderr.write_all(for_terminal(&text).as_bytes());
    }
    r.exit.code()
}

/// `line 12: open-questions: [Q1] is unanswered.`
pub fn issue_line(issue: &serde_json::Value) -> String {
    let line = issue["line"]
        .as_u64()
        .map(|l| format!("line {l}: "))
        .unwrap_or_default();
    format!(
        "{line}{}: {}",
        issue["code"].as_str().unwrap_or(""),
        issue["message"].as_str().unwrap_or("")
    )
}
