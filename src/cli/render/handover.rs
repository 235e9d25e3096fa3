//! The handover (`iced run handover`) in words: a short block a fresh driver reads once.

use super::run::{driver, next_move};
use crate::run::view::{Handover, InForce, Role};
use std::fmt::Write;

/// `runner `<name>`, model <m>`, or `the host starts it`.
fn role(r: &Role) -> String {
    match r {
        Role::Runner { name, model } => format!(
            "runner `{name}`{}",
            model
                .as_ref()
                .map(|m| format!(", model {m}"))
                .unwrap_or_default()
        ),
        Role::Host => "the host starts it".to_owned(),
    }
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// `In force: implementer ...; validators ...; up to N attempts; landing `mode`; pace: ...`.
fn in_force(s: &InForce) -> String {
    format!(
        "In force: implementer {}; {}; up to {} attempts; landing `{}`; pace: {} lane{} and {} agent{} at once{}.",
        role(&s.implementer),
        match &s.validators {
            Some(v) => format!(
                "validators {} ({}{})",
                role(&v.role),
                v.lenses
                    .as_ref()
                    .map_or("auto lenses".to_owned(), |l| l.join(", ")),
                if v.reviewers.is_empty() {
                    String::new()
                } else {
                    format!(" + {}", v.reviewers.join(", "))
                }
            ),
            None => "no independent validators (the loop's own checks only)".to_owned(),
        },
        s.max_attempts,
        s.land_mode,
        s.pace_lanes,
        plural(s.pace_lanes),
        s.pace_agents,
        plural(s.pace_agents),
        s.ruling.as_ref().map_or(String::new(), |r| format!(
            " (ruling of {}: {})",
            r.from,
            r.why.as_deref().unwrap_or("no reason given")
        ))
    )
}

/// `Budget: $x of $y charged, $z left (n agents of unknown cost counted at $u each).` (SPEC 20.12)
pub fn budget_line(b: &crate::run::record::Budget) -> String {
    let unknown = match b.unknown {
        0 => String::new(),
        1 => format!(
            " (1 agent of unknown cost counted at ${})",
            b.unknown_cost_usd
        ),
        n => format!(
            " ({n} agents of unknown cost counted at ${} each)",
            b.unknown_cost_usd
        ),
    };
    format!(
        "Budget: ${} of ${} charged, ${} left{unknown}.",
        b.charged_usd, b.usd, b.left_usd
    )
}

/// The whole block: settings in force, each lane's next move and hazards, how to drive on.
pub fn text(h: &Handover) -> String {
    let mut b = String::new();
    let _ = writeln!(b, "# Handover\n");
    let _ = writeln!(b, "{}\n", in_force(&h.in_force));
    if h.runs.is_empty() {
        let _ = writeln!(b, "No live run. Start one with `iced build <id>`.");
        return b;
    }
    for run in &h.runs {
        let s = &run.summary;
        let _ = writeln!(
            b,
            "## {} ({}, {} driver)\n",
            s.id,
            s.status.as_str(),
            driver(s.driver)
        );
        if let Some(until) = &run.paced_until {
            let _ = writeln!(
                b,
                "Paced: no agent starts before {until} (`iced run resume {}` lifts a pause a person set).\n",
                s.id
            );
        }
        if let Some(budget) = &run.budget {
            let _ = writeln!(b, "{}\n", budget_line(budget));
        }
        for lane in &run.lanes {
            let _ = writeln!(
                b,
                "- {}: {} (attempt {}{}). {}",
                lane.id,
                lane.stage.as_str(),
                lane.attempt,
                if lane.stage.is_final() || matches!(lane.stage.as_str(), "land" | "retire") {
                    String::new()
                } else {
                    format!(", {} more before it blocks", lane.attempts_left)
                },
                next_move(&lane.next)
            );
            if !lane.open_findings.is_empty() {
                let _ = writeln!(b, "  Open findings: {}.", lane.open_findings.join(", "));
            }
            if let Some(reason) = &lane.blocked {
                let _ = writeln!(b, "  Blocked: {reason}");
            }
            if let Some(reason) = &lane.handed_back {
                let _ = writeln!(b, "  Why: {reason}");
            }
        }
        b.push('\n');
    }
    if h.runs.iter().all(|r| r.summary.status.is_ended()) {
        // Nothing to drive: the record says the rest.
        let _ = writeln!(
            b,
            "It has ended: `iced run show {}` shows what it did.",
            h.runs[0].summary.id
        );
    } else {
        let _ = writeln!(
            b,
            "Drive it with `iced implement step` (repeat while it says `advanced` or `waiting`)."
        );
    }
    b
}
