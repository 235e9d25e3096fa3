//! The words for a run: its summary line, a lane's next move, what its agents cost.

use crate::run::record::{Budget, Cost};
use crate::run::state::{Driver, StepStatus};
use crate::run::view::{Agent, HostEnd, NextMove, Release, RunSummary, RunnerEnd, Who};
use serde_json::Value;

/// A run's summary as JSON: what every verb that changed a run prints with `--json`.
pub fn summary_json(run: &RunSummary) -> Value {
    serde_json::to_value(run).expect("serialises")
}

/// `run list`'s line: `<id>  <status> <stage> attempt <n>  <unit>`.
pub fn summary_line(r: &RunSummary) -> String {
    format!(
        "{}  {:<10} {:<9} attempt {}  {}",
        r.id,
        r.status.as_str(),
        r.stage.as_str(),
        r.attempt,
        r.unit
    )
}

/// One sentence: what a lane needs next and where it is awaited.
pub fn next_move(next: &NextMove) -> String {
    let release = |r: &Option<Release>| {
        match r {
        Some(Release { run, lane }) => format!(
            " It holds the other lanes: `iced run release {run} {lane}` or `iced run discard {run} {lane}`."
        ),
        None => String::new(),
    }
    };
    match next {
        NextMove::QueuedBehind { holder } => {
            format!("Queued; nothing starts while `{holder}` holds the run.")
        }
        NextMove::QueuedForLane => "Queued for a free lane.".into(),
        NextMove::QueuedAfter { depends } => format!("Queued after {}.", depends.join(", ")),
        NextMove::WaitsToLand { holder } => {
            format!("Validated; waits to land while `{holder}` holds the run.")
        }
        NextMove::Blocked { release: r } => format!(
            "Needs a person (`iced run resume` after fixing what the reason names).{}",
            release(r)
        ),
        NextMove::HandedBack { release: r } => {
            format!(
                "Handed back: a person decides what comes next.{}",
                release(r)
            )
        }
        NextMove::Escalated {
            unit,
            questions,
            by,
        } => format!(
            "Its {by} waits for a person: `iced escalation show {unit}`, then {}.",
            if *questions {
                "`iced answer` each question"
            } else {
                "apply, edit or reject it"
            }
        ),
        NextMove::Discarded => "Discarded; its branch is kept.".into(),
        NextMove::AwaitingReport { receipt } => format!(
            "Awaiting the implementer's report at `{}`.",
            receipt.display()
        ),
        NextMove::StartImplementer => "Its implementer starts next.".into(),
        NextMove::Awaiting { steps } => format!("Awaiting {}.", steps.join(", ")),
        NextMove::DeliveredOnBranch { branch } => {
            format!("Delivered on `{branch}`: merge it, then `iced run retire`.")
        }
        NextMove::Done => "Done.".into(),
        NextMove::AwaitingPullRequest { url } => format!("Awaiting pull request {url} to land."),
        NextMove::InProgress { steps } => format!("In progress: {}.", steps.join(", ")),
        NextMove::Next { stage } => format!("Goes on to {}.", stage.as_str()),
    }
}

/// `$0.0032 over 2 agents, and 1 agent more that reported none`; `unknown (...)` when none
/// reported; `no agent ran`.
pub fn cost_line(cost: &Cost) -> String {
    let Cost {
        usd,
        agents,
        unknown,
    } = *cost;
    if agents == 0 {
        return "no agent ran".into();
    }
    let n = |k: usize| format!("{k} agent{}", if k == 1 { "" } else { "s" });
    if unknown == agents {
        return format!("unknown ({} that reported none)", n(agents));
    }
    if unknown == 0 {
        format!("${usd} over {}", n(agents))
    } else {
        format!(
            "${usd} over {}, and {} more that reported none",
            n(agents - unknown),
            n(unknown)
        )
    }
}

/// `$1.5 charged of $2 ($0.5 left), 1 agent of unknown cost at $1`: a run's budget (SPEC 20.12).
pub fn budget_line(b: &Budget) -> String {
    let mut line = format!(
        "${} charged of ${} (${} left)",
        b.charged_usd, b.usd, b.left_usd
    );
    if b.unknown > 0 {
        let agents = if b.unknown == 1 { "agent" } else { "agents" };
        line.push_str(&format!(
            ", {} {agents} of unknown cost at ${}",
            b.unknown, b.unknown_cost_usd
        ));
    }
    if b.spent() {
        line.push_str("; spent: no agent starts");
    }
    line
}

/// One line per agent, for a person: where, who, what it cost.
pub fn agent_lines(agents: &[Agent]) -> String {
    let mut b = String::new();
    for a in agents {
        let head = format!("  agent {} {} attempt {}", a.lane, a.step, a.attempt);
        let line = match &a.who {
            Who::Host {
                model,
                session,
                end,
            } => format!(
                "{head}: runner host, model {}, session {}, cost unknown, {}",
                model.as_deref().unwrap_or("unknown"),
                session.as_deref().unwrap_or("unknown"),
                match end {
                    HostEnd::Answered => "answered".to_owned(),
                    HostEnd::Unanswered(why) => format!("ended unanswered: {why}"),
                    HostEnd::Failed => "failed".to_owned(),
                },
            ),
            Who::Runner {
                runner,
                model,
                turns,
                cost_usd,
                duration_ms,
                end,
                model_configured,
            } => format!(
                "{head}: runner {}, model {}{}, {} turns, {}, {} ms, {}",
                runner.as_deref().unwrap_or("?"),
                model.as_deref().unwrap_or("not reported"),
                if *model_configured {
                    " (configured; the harness reported none)"
                } else {
                    ""
                },
                turns.map_or("?".to_owned(), |t| t.to_string()),
                cost_usd.map_or_else(|| "cost unknown".to_owned(), |c| format!("${c}")),
                duration_ms.map_or("?".to_owned(), |d| d.to_string()),
                match end {
                    RunnerEnd::Exited(c) => format!("exit {c}"),
                    RunnerEnd::Signalled(s) => format!("killed by signal {s}"),
                    RunnerEnd::TimedOut => "timed out".to_owned(),
                    RunnerEnd::Unknown => "exit not recorded".to_owned(),
                },
            ),
        };
        b.push_str(&line);
        b.push('\n');
    }
    b
}

/// `host` or `process`.
pub fn driver(d: Driver) -> &'static str {
    match d {
        Driver::Host => "host",
        Driver::Process => "process",
    }
}

/// `started`, `done` or `failed`, as the state spells it.
pub fn step_status(s: StepStatus) -> &'static str {
    match s {
        StepStatus::Started => "started",
        StepStatus::Done => "done",
        StepStatus::Failed => "failed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::state::Stage;
    use serde_json::json;

    fn cost(usd: f64, agents: usize, unknown: usize) -> String {
        cost_line(&Cost {
            usd,
            agents,
            unknown,
        })
    }

    /// An unknown cost is never read as free: each mix of known and unknown says so.
    #[test]
    fn a_cost_line_counts_the_agents_that_reported_none() {
        assert_eq!(cost(0.0, 0, 0), "no agent ran");
        assert_eq!(cost(0.0, 1, 1), "unknown (1 agent that reported none)");
        assert_eq!(cost(0.0, 2, 2), "unknown (2 agents that reported none)");
        assert_eq!(cost(0.0032, 2, 0), "$0.0032 over 2 agents");
        assert_eq!(cost(1.0, 1, 0), "$1 over 1 agent");
        assert_eq!(
            cost(0.5, 3, 1),
            "$0.5 over 2 agents, and 1 agent more that reported none"
        );
    }

    /// The agents as `record::agents` writes them, read back and worded.
    #[test]
    fn agent_lines_word_host_and_runner_agents() {
        let agents = [
            json!({"lane": "u1", "step": "implement", "attempt": 1, "runner": "host", "model": "m",
                   "session": "s", "turns": null, "cost_usd": "unknown", "duration_ms": null,
                   "exit_code": null, "status": "done", "ended": null}),
            json!({"lane": "u1", "step": "implement", "attempt": 2, "runner": "host",
                   "model": "unknown", "session": "unknown", "turns": null, "cost_usd": "unknown",
                   "duration_ms": null, "exit_code": null, "status": "failed",
                   "ended": "the run ended (abandoned)"}),
            json!({"lane": "u1", "step": "implement", "attempt": 3, "runner": "host",
                   "model": "unknown", "session": "unknown", "turns": null, "cost_usd": "unknown",
                   "duration_ms": null, "exit_code": null, "status": "failed", "ended": null}),
            json!({"lane": "u1", "step": "implement", "attempt": 1, "runner": "claude",
                   "model": "opus", "turns": 7, "cost_usd": 0.25, "duration_ms": 1200,
                   "exit_code": 0, "status": "done"}),
            json!({"lane": "u1", "step": "validate-tests", "attempt": 1, "runner": null,
                   "model": null, "turns": null, "cost_usd": "unknown", "duration_ms": null,
                   "exit_code": null, "status": "failed"}),
            json!({"lane": "u1", "step": "implement", "attempt": 2, "runner": "fake",
                   "model": "m1", "model_configured": true, "turns": null, "cost_usd": "unknown",
                   "duration_ms": 900, "exit_code": null, "timed_out": true, "status": "done"}),
            json!({"lane": "u1", "step": "implement", "attempt": 3, "runner": "fake",
                   "model": null, "turns": null, "cost_usd": "unknown", "duration_ms": 10,
                   "exit_code": null, "signal": 9, "status": "done"}),
        ];
        let agents: Vec<Agent> = agents.iter().map(Agent::read).collect();
        assert_eq!(
            agent_lines(&agents),
            "  agent u1 implement attempt 1: runner host, model m, session s, cost unknown, answered
  agent u1 implement attempt 2: runner host, model unknown, session unknown, cost unknown, ended unanswered: the run ended (abandoned)
  agent u1 implement attempt 3: runner host, model unknown, session unknown, cost unknown, failed
  agent u1 implement attempt 1: runner claude, model opus, 7 turns, $0.25, 1200 ms, exit 0
  agent u1 validate-tests attempt 1: runner ?, model not reported, ? turns, cost unknown, ? ms, exit not recorded
  agent u1 implement attempt 2: runner fake, model m1 (configured; the harness reported none), ? turns, cost unknown, 900 ms, timed out
  agent u1 implement attempt 3: runner fake, model not reported, ? turns, cost unknown, 10 ms, killed by signal 9
"
        );
    }

    #[test]
    fn each_next_move_is_one_sentence() {
        let release = Some(Release {
            run: "r".into(),
            lane: "l".into(),
        });
        let cases = [
            (NextMove::QueuedBehind { holder: "a".into() }, "Queued; nothing starts while `a` holds the run."),
            (NextMove::QueuedForLane, "Queued for a free lane."),
            (NextMove::QueuedAfter { depends: vec!["a".into(), "b".into()] }, "Queued after a, b."),
            (NextMove::WaitsToLand { holder: "a".into() }, "Validated; waits to land while `a` holds the run."),
            (NextMove::Blocked { release: None }, "Needs a person (`iced run resume` after fixing what the reason names)."),
            (NextMove::Blocked { release: release.clone() }, "Needs a person (`iced run resume` after fixing what the reason names). It holds the other lanes: `iced run release r l` or `iced run discard r l`."),
            (NextMove::HandedBack { release }, "Handed back: a person decides what comes next. It holds the other lanes: `iced run release r l` or `iced run discard r l`."),
            (NextMove::Escalated { unit: "u".into(), questions: false, by: "implementer" }, "Its implementer waits for a person: `iced escalation show u`, then apply, edit or reject it."),
            (NextMove::Escalated { unit: "u".into(), questions: true, by: "implementer" }, "Its implementer waits for a person: `iced escalation show u`, then `iced answer` each question."),
            (NextMove::Discarded, "Discarded; its branch is kept."),
            (NextMove::AwaitingReport { receipt: "/w/report.json".into() }, "Awaiting the implementer's report at `/w/report.json`."),
            (NextMove::StartImplementer, "Its implementer starts next."),
            (NextMove::Awaiting { steps: vec!["validate-tests".into()] }, "Awaiting validate-tests."),
            (NextMove::DeliveredOnBranch { branch: "iced/u/u".into() }, "Delivered on `iced/u/u`: merge it, then `iced run retire`."),
            (NextMove::Done, "Done."),
            (NextMove::AwaitingPullRequest { url: "https://x/pr/1".into() }, "Awaiting pull request https://x/pr/1 to land."),
            (NextMove::InProgress { steps: vec!["deliver".into()] }, "In progress: deliver."),
            (NextMove::Next { stage: Stage::Land }, "Goes on to land."),
        ];
        for (next, words) in cases {
            assert_eq!(next_move(&next), words, "{next:?}");
            // `run show` prints it after `next: `: never "next: Next: ..." (issue 11).
            assert!(!words.to_lowercase().starts_with("next"), "{words}");
        }
    }
}
