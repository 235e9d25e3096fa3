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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::reply::{small_start, Action, HostAnswer, StepReport};
    use crate::run::then::Then;
    use std::path::Path;

    /// A `start_agent` of a run folder as deep as a repository may be still fits in 512 bytes once
    /// made small: nothing of the root is left in it (issue 12, item 3).
    #[test]
    fn a_small_start_agent_fits_whatever_the_root() {
        let root = format!("/{}", "very-long-folder-name/".repeat(200));
        let run = "run-20260930T110000-a79901";
        let lane = format!("002-{}", "x".repeat(40));
        let dir = format!("{root}.iced/run/{run}/{lane}/activities/validate-expectations-1");
        let report = StepReport {
            run: Some(run.into()),
            lane: Some(lane.clone()),
            stage: Some("validate".into()),
            attempt: Some(1),
            action: Action::StartAgent,
            role: Some("validator"),
            read_only: Some(true),
            lens: Some("expectations".into()),
            brief: Some(format!("{dir}/prompt.md")),
            worktree: Some(format!("{root}../sandbox")),
            receipt_path: Some(format!("{dir}/output.json")),
            receipt_key: Some("k".repeat(32)),
            missing: Vec::new(),
            next: Then::Nothing,
        };
        let HostAnswer::Start(small) = small_start(report, Path::new(&root)) else {
            panic!("not made small");
        };
        let json = small_output(&small).json.to_string();
        assert!(json.len() < 512, "{} bytes: {json}", json.len());
        assert!(!json.contains("very-long-folder-name"), "{json}");
        assert!(json.contains(&format!(
            "iced implement receipt .iced/run/{run}/{lane}/activities/validate-expectations-1/output.json --until-host"
        )), "{json}");
    }
}
