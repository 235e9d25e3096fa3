//! `iced escalation show|apply|edit|reject <id>` and `iced answer <id> Q<n> <text>`: a person's
//! answer to an implementer that stopped (SPEC 20.7). The core is `run::escalation_verbs`; this
//! file has the arguments and the words.

use super::lifecycle::reason_text;
use super::repo;
use crate::cli::Output;
use crate::refusal::{io_error, Exit, Refusal};
use crate::run::escalation_verbs::{self, Resolve, Shown};
use crate::run::Ctx;
use crate::unit::proposal::Change;
use std::fmt::Write as _;

const STEP: &str = "escalation";

#[derive(clap::Subcommand)]
pub enum EscalationCommand {
    /// Show the open escalation of a unit's run: the kind, the message, the proposal as was/becomes, or the questions; writes nothing.
    Show(IdArgs),
    /// Apply the agent's proposal to the unit: re-hashes the contract, logs your decision; refuses a proposal that does not apply.
    Apply(IdArgs),
    /// Apply your own contract lines instead (from --file, or your editor on a terminal); refuses lines that do not apply.
    Edit(EditArgs),
    /// Say no, with guidance the next attempt's brief gives: logs your decision, leaves the unit as it is.
    Reject(GuidanceArgs),
}

#[derive(clap::Args)]
pub struct IdArgs {
    /// The unit (id, number or unique part of an id).
    pub id: String,
}

#[derive(clap::Args)]
pub struct EditArgs {
    /// The unit (id, number or unique part of an id).
    pub id: String,
    /// A file of contract lines (`- [E4] text {verify: ...}`, `- [C2] (remove)`).
    #[arg(long)]
    pub file: Option<std::path::PathBuf>,
}

#[derive(clap::Args)]
pub struct GuidanceArgs {
    /// The unit (id, number or unique part of an id).
    pub id: String,
    /// What the next attempt should do instead (several words need no quotes).
    #[arg(required = true, num_args = 1..)]
    pub guidance: Vec<String>,
}

#[derive(clap::Args)]
pub struct AnswerArgs {
    /// The unit (id, number or unique part of an id).
    pub id: String,
    /// The question's id, as `iced escalation show` lists it (Q4).
    pub question: String,
    /// The answer (several words need no quotes).
    #[arg(required = true, num_args = 1..)]
    pub answer: Vec<String>,
}

fn json<T: serde::Serialize>(value: &T) -> serde_json::Value {
    serde_json::to_value(value).expect("serialises")
}

pub fn run(command: EscalationCommand) -> Result<Output, Refusal> {
    let repo = repo(STEP)?;
    let ctx = Ctx::new(&repo, STEP)?;
    let (reference, how) = match command {
        EscalationCommand::Show(args) => {
            let shown = escalation_verbs::show(&ctx, &args.id)?;
            return Ok(Output::new(json(&shown), shown_text(&shown)));
        }
        EscalationCommand::Apply(args) => (args.id, Resolve::Apply),
        EscalationCommand::Edit(args) => {
            let lines = edited_lines(&ctx, &args)?;
            (args.id, Resolve::Edit(lines))
        }
        EscalationCommand::Reject(args) => {
            let guidance = reason_text(&args.guidance, STEP)?;
            (args.id, Resolve::Reject(guidance))
        }
    };
    let done = escalation_verbs::resolve(&ctx, &reference, how)?;
    let p = &done.place;
    let mut text = match done.status {
        "rejected" => format!(
            "Rejected the escalation of {} (run {}, lane {}).",
            p.unit, p.run, p.lane
        ),
        _ => format!(
            "Applied to {}: the contract hash is now {}.",
            p.unit,
            done.contract_hash.as_deref().unwrap_or("?")
        ),
    };
    for c in &done.changes {
        text.push('\n');
        text.push_str(&change_text(c));
    }
    let _ = write!(
        text,
        "\nLogged in intent/{}/decisions.md. `iced build {}` resumes the lane with a fresh attempt.",
        p.unit, p.unit
    );
    Ok(Output::new(json(&done), text))
}

pub fn answer(args: AnswerArgs) -> Result<Output, Refusal> {
    let step = "answer";
    let repo = repo(step)?;
    let ctx = Ctx::new(&repo, step)?;
    let text = reason_text(&args.answer, step)?;
    let done = escalation_verbs::answer(&ctx, &args.id, &args.question, &text)?;
    let p = &done.place;
    let next = if done.status == "answered" {
        format!(
            "Every question is answered: `iced build {}` resumes the lane with a fresh attempt.",
            p.unit
        )
    } else {
        format!(
            "Other questions are open: `iced escalation show {}` lists them.",
            p.unit
        )
    };
    Ok(Output::new(
        json(&done),
        format!(
            "Answered {} of {} in intent/{}/iced.md.\n{next}",
            done.question, p.unit, p.unit
        ),
    ))
}

/// The person's contract lines: `--file`, or their editor on a terminal with the agent's proposal
/// to start from. Never a shell: the editor's command is split on whitespace.
fn edited_lines(ctx: &Ctx<'_>, args: &EditArgs) -> Result<String, Refusal> {
    let read = |path: &std::path::Path| -> Result<String, Refusal> {
        let bytes = read_lines_file(path)?;
        String::from_utf8(bytes).map_err(|_| {
            Refusal::new(
                STEP,
                "proposal-invalid",
                format!("`{}` is not UTF-8 text", path.display()),
                "write the contract lines as plain text",
            )
        })
    };
    if let Some(file) = &args.file {
        return read(file);
    }
    let editor = std::env::var("VISUAL")
        .ok()
        .or_else(|| std::env::var("EDITOR").ok())
        .filter(|e| !e.trim().is_empty());
    use std::io::IsTerminal;
    let (Some(editor), true) = (editor, std::io::stdin().is_terminal()) else {
        return Err(Refusal::new(
            STEP,
            "usage",
            "`escalation edit` needs `--file <path>`, or a terminal and $VISUAL or $EDITOR",
            "write the contract lines to a file and pass `--file <path>`",
        )
        .exit(Exit::Usage));
    };
    let shown = escalation_verbs::show(ctx, &args.id)?;
    // The loop's own file (0600, never through a link), beside the lane's other files.
    let path = ctx
        .lane_dir(&shown.place.run, &shown.place.lane)
        .join("proposal-edit.md");
    let start = shown.escalation.proposal.unwrap_or_default();
    crate::store::write_atomic(&path, start.as_bytes(), 0o600)
        .map_err(|e| crate::repo::store_refusal(STEP, e))?;
    let mut argv = editor.split_whitespace();
    let program = argv.next().unwrap_or("vi");
    let status = std::process::Command::new(program)
        .args(argv)
        .arg(&path)
        .status()
        .map_err(|e| io_error(STEP, format!("cannot start `{program}`: {e}")))?;
    if !status.success() {
        return Err(Refusal::new(
            STEP,
            "usage",
            format!("the editor `{program}` ended with {status}; nothing was applied"),
            "edit again, or pass `--file <path>`",
        )
        .exit(Exit::Usage));
    }
    read(&path)
}

/// The bytes of the person's contract lines (SPEC 20.7): what goes into the unit is read from the
/// file named, never through a link (an agent may have left one where the person looks), never a
/// FIFO or a directory, and at most the proposal's own limit, refused before it is read whole.
fn read_lines_file(path: &std::path::Path) -> Result<Vec<u8>, Refusal> {
    use crate::store::StoreError;
    let limit = crate::run::report::PROPOSAL_LIMIT as u64;
    crate::store::read_no_follow(path, limit).map_err(|e| match e {
        StoreError::TooLarge { path, limit } => Refusal::new(
            STEP,
            "proposal-invalid",
            format!(
                "`{}` is larger than {limit} bytes; contract lines are at most 16 KiB",
                path.display()
            ),
            "write only the contract lines that change (`- [E4] text`, `- [C2] (remove)`)",
        ),
        e if e.is_not_found() => Refusal::new(
            STEP,
            "usage",
            format!("`{}` does not exist", path.display()),
            "write the contract lines to a file and pass `--file <path>`",
        )
        .exit(Exit::Usage),
        e => crate::repo::store_refusal(STEP, e),
    })
}

fn change_text(c: &Change) -> String {
    match (&c.was, &c.becomes) {
        (Some(was), Some(becomes)) => {
            format!("  {}\n    was:     {was}\n    becomes: {becomes}", c.id)
        }
        (None, Some(becomes)) => format!("  {} (new)\n    becomes: {becomes}", c.id),
        (Some(was), None) => format!("  {} (removed)\n    was:     {was}", c.id),
        (None, None) => format!("  {}", c.id),
    }
}

fn shown_text(s: &Shown) -> String {
    let e = &s.escalation;
    let p = &s.place;
    let mut t = format!(
        "Escalation of {} (run {}, lane {}, attempt {}): {}, {}\n",
        p.unit,
        p.run,
        p.lane,
        p.attempt,
        e.kind,
        e.status.as_str()
    );
    if e.kind != "questions" {
        let _ = writeln!(t, "\n{}", e.message);
    }
    if e.proposal.is_some() {
        t.push_str("\nProposal:\n");
        for c in &s.changes {
            let _ = writeln!(t, "{}", change_text(c));
        }
        if let Some(problem) = &s.problem {
            let _ = writeln!(t, "  does not apply: {problem}");
        } else if s.changes.is_empty() && e.status == crate::run::escalation::EscalationStatus::Open
        {
            t.push_str("  (no change to the unit as it is)\n");
        }
    }
    for q in &e.questions {
        let _ = write!(t, "\n{} {}", q.id, q.text);
        if !q.options.is_empty() {
            let _ = write!(t, " (options: {})", q.options.join(" | "));
        }
        let _ = write!(
            t,
            "\n  -> A: {}",
            q.answer.as_deref().unwrap_or("(not answered)")
        );
    }
    if !e.questions.is_empty() {
        t.push('\n');
    }
    if let Some(g) = &e.guidance {
        let _ = writeln!(t, "\nGuidance: {g}");
    }
    if e.status == crate::run::escalation::EscalationStatus::Open {
        let next = if e.kind == "questions" {
            format!("iced answer {} <Q id> <text>", p.unit)
        } else if e.proposal.is_some() && s.problem.is_none() {
            format!(
                "iced escalation apply {0} | edit {0} --file <path> | reject {0} <guidance>",
                p.unit
            )
        } else {
            format!(
                "iced escalation edit {0} --file <path> | reject {0} <guidance>",
                p.unit
            )
        };
        let _ = write!(t, "\nNext: {next}");
    } else {
        let _ = write!(t, "\nResolved: `iced build {}` resumes the lane.", p.unit);
    }
    t
}
