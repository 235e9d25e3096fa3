//! A step report (`implement step`, `implement receipt`, the end of `build`) as text and JSON.

use super::then::words;
use crate::cli::Output;
use crate::run::reply::{exit_for, SmallStart};
use crate::run::StepReport;

/// `<run> <lane>: <action> (stage <stage>, attempt <n>)`, the paths a host needs, then `next:`.
pub fn text(r: &StepReport) -> String {
    let mut out = match (&r.run, &r.lane) {
        (Some(run), Some(lane)) => format!(
            "{run} {lane}: {} (stage {}, attempt {})",
            r.action,
            r.stage.as_deref().unwrap_or("?"),
            r.attempt.unwrap_or(0)
        ),
        _ => r.action.to_string(),
    };
    for (label, value) in [
        ("brief", &r.brief),
        ("worktree", &r.worktree),
        ("receipt_path", &r.receipt_path),
        ("receipt_key", &r.receipt_key),
    ] {
        if let Some(v) = value {
            out.push_str(&format!("\n  {label}: {v}"));
        }
    }
    for gap in &r.missing {
        out.push_str(&format!("\n  missing: {gap}"));
    }
    out.push_str(&format!("\nnext: {}", words(&r.next)));
    out
}

/// The report in JSON (SPEC 20.2): its fields, then `next` in words.
pub fn json(report: &StepReport) -> serde_json::Value {
    let mut v = serde_json::to_value(report).expect("serialises");
    if let Some(o) = v.as_object_mut() {
        o.insert("next".into(), words(&report.next).into());
    }
    v
}

/// The report as the verb's output: the report itself in JSON, its exit code.
pub fn output(report: &StepReport) -> Output {
    let mut out = Output::new(json(report), text(report));
    out.exit = exit_for(report);
    out
}

/// A small `start_agent` (SPEC 20.2): `<run>: start_agent <role> [(<lens>)]`, the brief, then
/// `next:` with the exact receipt command; in JSON its fields and `next`.
pub fn small_output(s: &SmallStart) -> Output {
    let mut v = serde_json::to_value(s).expect("serialises");
    if let Some(o) = v.as_object_mut() {
        o.insert("next".into(), words(&s.next).into());
    }
    let text = format!(
        "{}: {} {}{}\n  brief: {}\nnext: {}",
        s.run,
        s.action,
        s.role,
        s.lens
            .as_ref()
            .map(|l| format!(" ({l})"))
            .unwrap_or_default(),
        s.brief,
        words(&s.next)
    );
    Output::new(v, text)
}

/// One line of `build`'s progress on stderr: `  <lane> <stage> attempt <n>: <action>`.
pub fn progress_line(report: &StepReport) -> String {
    format!(
        "  {} {:<9} attempt {}: {}",
        report.lane.as_deref().unwrap_or(""),
        report.stage.as_deref().unwrap_or(""),
        report.attempt.unwrap_or(0),
        report.action
    )
}
