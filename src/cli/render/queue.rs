//! The queue in words (SPEC 20.13): why `build next` chose its unit and what it passed over, what a
//! drain takes up as it goes, and its summary.

use crate::run::drain::{Built, Stopped, Summary, Told};
use crate::run::queue::{self, Survey};
use crate::run::state::RunStatus;
use std::fmt::Write;

/// `next: <id>: <why>`, then `skipped <id>: <code>: <reason>` for each unit passed over.
pub fn survey_lines(survey: &Survey) -> Vec<String> {
    let mut lines = Vec::new();
    if let (Some(first), Some(why)) = (survey.eligible.first(), queue::why(&survey.eligible)) {
        lines.push(format!("next: {}: {why}", first.unit));
    }
    for s in &survey.skipped {
        lines.push(format!("skipped {}: {}: {}", s.unit, s.code, s.reason));
    }
    lines
}

/// Dollars as a person reads them: `$1.5`, `$0.0032`.
fn usd(x: f64) -> String {
    format!("${}", (x * 1e6).round() / 1e6)
}

/// A line of a drain as it goes.
pub fn told(t: &Told<'_>) -> String {
    match t {
        Told::Picked {
            unit,
            run,
            why,
            resumed,
        } => match (resumed, why) {
            (true, _) => {
                format!("drain: taking up {unit} again (run {run}, left running by a drain)")
            }
            (false, Some(why)) => format!("drain: next {unit} (run {run}): {why}"),
            (false, None) => format!("drain: next {unit} (run {run})"),
        },
        Told::Ended(b) => format!(
            "drain: {} {} ({} charged)",
            b.unit,
            ending(b),
            usd(b.charged_usd)
        ),
        Told::Waiting { unit, why, until } => {
            format!("drain: {unit} waits for the remote ({why}); tried again at {until}")
        }
    }
}

/// `delivered`, `handed back: <reason>`, `blocked: <reason>`, ...
fn ending(b: &Built) -> String {
    let reason = b.reason.as_deref().unwrap_or_default();
    let first = reason.lines().next().unwrap_or_default();
    match b.status {
        RunStatus::Delivered => "delivered".to_owned(),
        RunStatus::Handback => format!("handed back: {first}"),
        RunStatus::Blocked => format!("blocked: {first}"),
        RunStatus::Abandoned => "abandoned".to_owned(),
        RunStatus::Running | RunStatus::Paused => format!("waits: {first}"),
    }
}

/// Why a drain stopped.
fn stopped(s: &Summary) -> String {
    match s.stopped {
        Stopped::Empty => "nothing in the queue is eligible".to_owned(),
        Stopped::Budget => format!(
            "the budget is spent ({} charged of {})",
            usd(s.charged_usd),
            usd(s.budget_usd.unwrap_or_default())
        ),
        Stopped::MaxUnits => format!("--max-units {} were built", s.units),
        Stopped::Time => "--until has come".to_owned(),
        Stopped::Refused => match &s.refused {
            Some(r) => format!("{} was refused ({})", r.unit, r.refusal.code),
            None => "a refusal".to_owned(),
        },
    }
}

/// The summary at the end of a drain.
pub fn summary_text(s: &Summary) -> String {
    let mut b = String::new();
    let _ = writeln!(
        b,
        "Drain stopped: {}. {} unit{} built, {} charged{}.",
        stopped(s),
        s.units,
        if s.units == 1 { "" } else { "s" },
        usd(s.charged_usd),
        s.budget_usd
            .map(|budget| format!(
                " of {} ({} left)",
                usd(budget),
                usd((budget - s.charged_usd).max(0.0))
            ))
            .unwrap_or_default()
    );
    let mut section = |title: &str, entries: &[Built]| {
        if entries.is_empty() {
            return;
        }
        let _ = writeln!(b, "\n{title} ({}):", entries.len());
        for e in entries {
            let _ = writeln!(
                b,
                "- {} (run {}, {} charged): {}",
                e.unit,
                e.run,
                usd(e.charged_usd),
                ending(e)
            );
        }
    };
    section("Delivered", &s.delivered);
    section("Handed back", &s.handed_back);
    section("Waiting", &s.waiting);
    if !s.queued.is_empty() {
        let _ = writeln!(
            b,
            "\nNot reached ({}): {}.",
            s.queued.len(),
            s.queued.join(", ")
        );
    }
    if !s.skipped.is_empty() {
        let _ = writeln!(b, "\nSkipped ({}):", s.skipped.len());
        for k in &s.skipped {
            let _ = writeln!(b, "- {}: {}: {}", k.unit, k.code, k.reason);
        }
    }
    if let Some(r) = &s.refused {
        let r = &r.refusal;
        let _ = writeln!(
            b,
            "\nerror: {}\n  step: {}\n  code: {}\n\nhint: {}",
            r.reason, r.step, r.code, r.remedy
        );
    }
    b
}
