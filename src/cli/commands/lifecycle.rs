use super::repo;
use crate::cli::Output;
use crate::record;
use crate::refusal::{Exit, Refusal};

#[derive(clap::Args)]
pub struct IdArgs {
    /// The unit (id, number or unique part of an id).
    pub id: String,
}

#[derive(clap::Args)]
pub struct ReasonArgs {
    /// The unit (id, number or unique part of an id).
    pub id: String,
    /// Why, in words (several words need no quotes).
    #[arg(required = true, num_args = 1..)]
    pub reason: Vec<String>,
}

#[derive(clap::Args)]
pub struct UseArgs {
    /// The unit to make active, or `none` to clear it.
    pub id: String,
}

#[derive(clap::Args)]
pub struct DecisionArgs {
    /// The unit (id, number or unique part of an id).
    pub id: String,
    /// What was decided.
    #[arg(long)]
    pub decision: String,
    /// Why.
    #[arg(long)]
    pub why: String,
    /// What else was considered.
    #[arg(long)]
    pub alternatives: Option<String>,
}

#[derive(clap::Args)]
pub struct AutonomyArgs {
    /// 0 Assist, 1 Gated, 2 Trusted, 3 Autonomous.
    #[arg(value_parser = clap::value_parser!(i64).range(0..=3))]
    pub level: i64,
    /// The unit; without one, the config default for new units is set.
    pub id: Option<String>,
}

pub(super) fn reason_text(words: &[String], step: &str) -> Result<String, Refusal> {
    let reason = words
        .join(" ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    if reason.is_empty() {
        return Err(Refusal::new(
            step,
            "usage",
            "the reason is empty",
            "say why in a few words",
        )
        .exit(Exit::Usage));
    }
    Ok(reason)
}

fn json<T: serde::Serialize>(value: &T) -> serde_json::Value {
    serde_json::to_value(value).expect("serialises")
}

pub fn accept(args: IdArgs) -> Result<Output, Refusal> {
    let step = "accept";
    let repo = repo(step)?;
    let id = repo.resolve(&args.id, step)?;
    let moved = record::accept(&repo, &id, step)?;
    let text = format!(
        "Accepted {id} (by {}).",
        moved.accepted_by.as_deref().unwrap_or("?")
    );
    Ok(Output::new(json(&moved), text))
}

pub fn reject(args: ReasonArgs) -> Result<Output, Refusal> {
    let step = "reject";
    let repo = repo(step)?;
    let id = repo.resolve(&args.id, step)?;
    let reason = reason_text(&args.reason, step)?;
    let moved = record::reject(&repo, &id, &reason, step)?;
    Ok(Output::new(
        json(&moved),
        format!("Rejected {id}: back to building. The reason is in intent/{id}/decisions.md.\nCommit the unit, then `iced build {id}` builds it again; its brief starts with the reason."),
    ))
}

pub fn abandon(args: IdArgs) -> Result<Output, Refusal> {
    let step = "abandon";
    let repo = repo(step)?;
    let id = repo.resolve(&args.id, step)?;
    let moved = record::abandon(&repo, &id, step)?;
    Ok(Output::new(
        json(&moved),
        format!(
            "Abandoned {id} (was {}); it is now rejected and closed.",
            moved.from
        ),
    ))
}

pub fn use_unit(args: UseArgs) -> Result<Output, Refusal> {
    let step = "use";
    let repo = repo(step)?;
    let id = if args.id == "none" {
        None
    } else {
        Some(repo.resolve(&args.id, step)?)
    };
    let active = record::use_unit(&repo, id.as_deref(), step)?;
    let text = match &active {
        Some(id) => format!("Active unit: {id}."),
        None => "No active unit.".to_owned(),
    };
    Ok(Output::new(serde_json::json!({ "active": active }), text))
}

pub fn hold(args: ReasonArgs) -> Result<Output, Refusal> {
    let step = "hold";
    let repo = repo(step)?;
    let id = repo.resolve(&args.id, step)?;
    let reason = reason_text(&args.reason, step)?;
    let held = record::hold(&repo, &id, &reason, step)?;
    Ok(Output::new(
        json(&held),
        format!("Held {id}: {reason}\nIt will not be approved or built until `iced unhold {id}`."),
    ))
}

pub fn unhold(args: IdArgs) -> Result<Output, Refusal> {
    let step = "unhold";
    let repo = repo(step)?;
    let id = repo.resolve(&args.id, step)?;
    let held = record::unhold(&repo, &id, step)?;
    let text = if held.changed {
        format!("Released {id}.")
    } else {
        format!("{id} is not held; nothing changed.")
    };
    Ok(Output::new(json(&held), text))
}

pub fn decision(args: DecisionArgs) -> Result<Output, Refusal> {
    decision_in(&repo("decision")?, args)
}

/// `decision` in `repo`: the command line's repository, or a lane's worktree (`iced_decision`).
pub fn decision_in(repo: &crate::repo::Repo, args: DecisionArgs) -> Result<Output, Refusal> {
    let step = "decision";
    let id = repo.resolve(&args.id, step)?;
    for (flag, value) in [("--decision", &args.decision), ("--why", &args.why)] {
        if value.trim().is_empty() {
            return Err(Refusal::new(
                step,
                "usage",
                format!("{flag} is empty"),
                "say it in a few words",
            )
            .exit(Exit::Usage));
        }
    }
    let logged = record::decision(
        repo,
        &id,
        &args.decision,
        &args.why,
        args.alternatives.as_deref(),
        step,
    )?;
    Ok(Output::new(
        json(&logged),
        format!("Logged in {}.", logged.path),
    ))
}

pub fn autonomy(args: AutonomyArgs) -> Result<Output, Refusal> {
    let step = "autonomy";
    let repo = repo(step)?;
    let id = match &args.id {
        Some(r) => Some(repo.resolve(r, step)?),
        None => None,
    };
    let set = record::set_autonomy(&repo, args.level, id.as_deref(), step)?;
    let text = match (&set.id, set.effective_autonomy) {
        (Some(id), Some(effective)) => {
            format!("{id}: autonomy {} (effective {effective}).", set.autonomy)
        }
        _ => format!("Default autonomy for new units: {}.", set.autonomy),
    };
    Ok(Output::new(json(&set), text))
}
