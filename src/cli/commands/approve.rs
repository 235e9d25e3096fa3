use super::repo;
use crate::cli::Output;
use crate::record::{approve, declined, prepare_approval, unit_status};
use crate::refusal::{Exit, Refusal};
use std::io::{BufRead, IsTerminal, Write};

#[derive(clap::Args)]
pub struct Args {
    /// The unit (id, number or unique part of an id).
    pub id: String,
    /// Approve without asking (for scripts; off a terminal this is required).
    #[arg(long, short = 'y')]
    pub yes: bool,
}

pub fn run(args: Args, json: bool) -> Result<Output, Refusal> {
    let step = "approve";
    let repo = repo(step)?;
    let id = repo.resolve(&args.id, step)?;
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
        if !ask(&super::status::summary(&view), &id) {
            declined(&repo, &approval, step)?;
            let json = serde_json::json!({"id": id, "status": "draft", "approved": false});
            let mut out = Output::new(json, format!("Not approved: `{id}` is unchanged. Edit it, then run `iced approve {id}` again."));
            out.exit = Exit::Ok;
            return Ok(out);
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

/// Show the contract on stderr and ask; anything but y/yes is a no.
fn ask(summary: &str, id: &str) -> bool {
    let mut stderr = std::io::stderr().lock();
    let _ = write!(
        stderr,
        "{}\n\nApprove {id}? Intent and Expectations are frozen from here. [y/N] ",
        crate::text::for_terminal(summary)
    );
    let _ = stderr.flush();
    let mut answer = String::new();
    if std::io::stdin().lock().read_line(&mut answer).is_err() {
        return false;
    }
    matches!(answer.trim().to_lowercase().as_str(), "y" | "yes")
}
