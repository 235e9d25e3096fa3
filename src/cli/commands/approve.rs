use super::repo;
use crate::cli::Output;
use crate::record::{
    approve, decline, declined, prepare_approval, unit_status, NotApproved, SignoffDeclined,
};
use crate::refusal::{Exit, Refusal};
use std::io::{BufRead, IsTerminal, Write};

#[derive(clap::Args)]
pub struct Args {
    /// The unit (id, number or unique part of an id).
    pub id: String,
    /// Approve without asking (for scripts; off a terminal this is required).
    #[arg(long, short = 'y', conflicts_with_all = ["changes", "reject"])]
    pub yes: bool,
    /// Do not approve: ask for changes, in these words (logged in decisions.md; the unit stays as it is).
    #[arg(long, value_name = "TEXT", num_args = 1.., conflicts_with = "reject")]
    pub changes: Option<Vec<String>>,
    /// Do not approve: reject the unit, closing it, for this reason (logged in decisions.md).
    #[arg(long, value_name = "TEXT", num_args = 1..)]
    pub reject: Option<Vec<String>>,
}

pub fn run(args: Args, json: bool) -> Result<Output, Refusal> {
    let step = "approve";
    let repo = repo(step)?;
    let id = repo.resolve(&args.id, step)?;
    let answered = match (&args.changes, &args.reject) {
        (Some(words), _) => Some((NotApproved::Changes, words)),
        (_, Some(words)) => Some((NotApproved::Rejected, words)),
        _ => None,
    };
    if let Some((answer, words)) = answered {
        let text = super::lifecycle::reason_text(words, step)?;
        return Ok(said(decline(&repo, &id, answer, &text, step)?));
    }
    let approval = prepare_approval(&repo, &id, step)?;
    if !approval.auto && !args.yes {
        let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
        if !interactive {
            return Err(Refusal::new(
                step,
                "confirmation-needed",
                format!(
                    "signing off `{id}` needs a person's yes, and there is no terminal to ask on"
                ),
                format!(
                    "read the contract (`iced status {id}`), then run `iced approve {id} --yes`"
                ),
            )
            .exit(Exit::NeedsPerson));
        }
        let view = unit_status(&repo, Some(&id), step)?;
        match ask(&super::status::summary(&view), &id) {
            Answer::Yes => {}
            Answer::No => {
                declined(&repo, &approval, step)?;
                let status = view
                    .unit
                    .parsed
                    .frontmatter
                    .str("status")
                    .unwrap_or("draft");
                let json = serde_json::json!({"id": id, "status": status, "approved": false});
                let mut out = Output::new(json, format!("Not approved: `{id}` is unchanged. Edit it, then run `iced approve {id}` again."));
                out.exit = Exit::Ok;
                return Ok(out);
            }
            Answer::Said(answer, text) => {
                return Ok(said(decline(&repo, &id, answer, &text, step)?));
            }
        }
    }
    let _ = json;
    let warnings = approval.warnings.len();
    let done = approve(&repo, approval, step)?;
    let mut text = format!(
        "Approved {} ({}by {}) at {}.\ncontract_hash {}\nbase_ref {}",
        done.id,
        if done.auto {
            "automatically, under the autonomy rule, "
        } else {
            ""
        },
        done.approved_by,
        done.approved_at,
        done.contract_hash,
        done.base_ref.as_deref().unwrap_or("null (no git commit)")
    );
    if warnings > 0 {
        text.push_str(&format!(
            "\n{warnings} lint warning(s): `iced lint {} --stage signoff` shows them.",
            done.id
        ));
    }
    Ok(Output::new(
        serde_json::to_value(&done).expect("serialises"),
        text,
    ))
}

/// What a person said at the sign-off other than yes.
fn said(done: SignoffDeclined) -> Output {
    let id = &done.id;
    let mut text = match (&done.changes, &done.rejected) {
        (Some(changes), _) => format!("Not approved: changes asked for `{id}`: {changes}\nThe words are in intent/{id}/decisions.md; edit the unit, then `iced approve {id}` again."),
        (_, Some(reason)) => format!("Rejected `{id}` at its sign-off: {reason}\nIt is closed; the reason is in intent/{id}/decisions.md."),
        _ => format!("Not approved: `{id}` is unchanged."),
    };
    for w in &done.warnings {
        text.push_str(&format!("\nwarning: {w}"));
    }
    Output::new(serde_json::to_value(&done).expect("serialises"), text)
}

enum Answer {
    Yes,
    No,
    Said(NotApproved, String),
}

/// Show the contract on stderr and ask: `y` approves, `c` asks for changes and `r` rejects (each
/// then reads the person's words), anything else is a no.
fn ask(summary: &str, id: &str) -> Answer {
    let mut stderr = std::io::stderr().lock();
    let _ = write!(
        stderr,
        "{}\n\nApprove {id}? Intent and Expectations are frozen from here.\n[y] approve  [c] ask for changes  [r] reject  [N] not now: ",
        crate::text::for_terminal(summary)
    );
    let _ = stderr.flush();
    let line = |stderr: &mut std::io::StderrLock<'_>, prompt: &str| -> Option<String> {
        let _ = write!(stderr, "{prompt}");
        let _ = stderr.flush();
        let mut text = String::new();
        std::io::stdin().lock().read_line(&mut text).ok()?;
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        (!text.is_empty()).then_some(text)
    };
    let Some(answer) = line(&mut stderr, "") else {
        return Answer::No;
    };
    match answer.to_lowercase().as_str() {
        "y" | "yes" => Answer::Yes,
        "c" | "changes" => match line(&mut stderr, "What should change? ") {
            Some(text) => Answer::Said(NotApproved::Changes, text),
            None => Answer::No,
        },
        "r" | "reject" => match line(&mut stderr, "Why reject it? ") {
            Some(text) => Answer::Said(NotApproved::Rejected, text),
            None => Answer::No,
        },
        _ => Answer::No,
    }
}
