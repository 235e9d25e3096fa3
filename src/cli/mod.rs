//! The command line: arguments in, one rendered result out. Verbs call the core (`record`, `init`,
//! `unit`; for runs `run::view`, `run::drive` and `run::control`) and get back a value or a refusal;
//! this module alone decides how either looks, as text for a person or as JSON for a program. It
//! never reads the loop's files or decides a loop question itself.

mod commands;
mod help;
mod interrupt;
mod render;
mod wait;

use crate::refusal::{Exit, Refusal};
use clap::{Parser, Subcommand};
use serde_json::Value;

/// What a verb produced: the JSON form, the text form, and the exit code.
pub struct Output {
    pub json: Value,
    /// The JSON form already serialised, when building a `Value` would cost more than it is worth
    /// (`list` over many units). Printed instead of `json` when present.
    pub json_text: Option<String>,
    pub text: String,
    pub exit: Exit,
}

impl Output {
    /// An output that only sets the exit code (the hidden supervisor prints nothing).
    pub fn exit_only(code: i32) -> Output {
        let mut out = Output::new(Value::Null, "");
        out.exit = match code {
            0 => Exit::Ok,
            2 => Exit::Usage,
            3 => Exit::Refused,
            4 => Exit::NeedsPerson,
            _ => Exit::Internal,
        };
        out
    }

    pub fn new(json: Value, text: impl Into<String>) -> Output {
        Output {
            json,
            json_text: None,
            text: text.into(),
            exit: Exit::Ok,
        }
    }
}

#[derive(Parser)]
#[command(
    name = "iced",
    version,
    about = "Take an ICED unit from approved to delivered with AI coding agents, and refuse to start while a decision is still open.",
    after_help = help::AFTER_HELP
)]
pub struct Cli {
    /// Print the result as JSON on stdout (refusals too).
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: Command,
}

// Each verb's doc comment is the one sentence its help opens with, kept verbatim: without
// `verbatim_doc_comment` clap drops the final period.
#[derive(Subcommand)]
pub enum Command {
    /// Set up iced in this repository: writes .iced/ (config, memory, templates), intent/README.md and the .gitattributes/.gitignore lines it needs (with --host claude, the guard's hook in .claude/settings.json), only what is missing; never deletes, and refuses an invalid existing config unless --force, or a settings file that is not a JSON object.
    #[command(verbatim_doc_comment, before_help = help::PERSON)]
    Init(commands::init::Args),
    /// Create a draft unit from one line: writes intent/<id>/iced.md and decisions.md and makes it active; refuses an empty line or a --parent that names no unit.
    #[command(verbatim_doc_comment, before_help = help::PERSON)]
    New(commands::new::NewArgs),
    /// Create a draft unit under a parent: as `new` with `parent` set; refuses a parent that names no unit.
    #[command(verbatim_doc_comment, before_help = help::PERSON)]
    Child(commands::new::ChildArgs),
    /// List every unit with its status, type, tier, risk and autonomy: writes nothing, lists an unreadable unit with its error instead of failing, and refuses only a repository without iced or with an invalid config.
    #[command(verbatim_doc_comment, before_help = help::PERSON)]
    List,
    /// Show one unit (default: the active one) with its contract, children and lint; writes nothing, and refuses when no unit is named or active.
    #[command(verbatim_doc_comment, before_help = help::PERSON)]
    Status(commands::status::Args),
    /// Check a unit against the rules of a stage (default validate): writes nothing, and refuses with exit 3 while the unit has errors.
    #[command(verbatim_doc_comment, before_help = help::PERSON)]
    Lint(commands::lint::Args),
    /// Sign off a draft (or blocked) unit: records approved_at/by, contract_hash and base_ref and makes it active, or with --changes/--reject records your words instead; refuses a held unit, signoff lint errors, or (off a terminal) a missing --yes.
    #[command(verbatim_doc_comment, before_help = help::PERSON)]
    Approve(commands::approve::Args),
    /// Accept a done unit: records accepted_at/by; refuses any other status or lint errors at stage accept.
    #[command(verbatim_doc_comment, before_help = help::PERSON)]
    Accept(commands::lifecycle::IdArgs),
    /// Send a done unit back to building with your reason: logs it in decisions.md; refuses any other status.
    #[command(verbatim_doc_comment, before_help = help::PERSON)]
    Reject(commands::lifecycle::ReasonArgs),
    /// Drop a draft, approved or blocked unit: moves it to rejected; refuses a unit being built, verified or closed.
    #[command(verbatim_doc_comment, before_help = help::PERSON)]
    Abandon(commands::lifecycle::IdArgs),
    /// Make a unit the active one, or clear it with `none`: writes .iced/active; refuses a unit that does not exist.
    #[command(verbatim_doc_comment, before_help = help::PERSON)]
    Use(commands::lifecycle::UseArgs),
    /// Keep a unit out of every build with a reason: writes `held:` in its frontmatter; refuses a closed unit.
    #[command(verbatim_doc_comment, before_help = help::PERSON)]
    Hold(commands::lifecycle::ReasonArgs),
    /// Release a held unit: removes `held:` from its frontmatter, leaves a unit that is not held as it is, and refuses a closed unit.
    #[command(verbatim_doc_comment, before_help = help::PERSON)]
    Unhold(commands::lifecycle::IdArgs),
    /// Log a significant choice made while building: appends to intent/<id>/decisions.md; refuses a closed unit.
    #[command(verbatim_doc_comment, before_help = help::MACHINERY, hide = true)]
    Decision(commands::lifecycle::DecisionArgs),
    /// Set a unit's autonomy (0 Assist, 1 Gated, 2 Trusted, 3 Autonomous), or without an id the config default; refuses a closed unit.
    #[command(verbatim_doc_comment, before_help = help::PERSON)]
    Autonomy(commands::lifecycle::AutonomyArgs),
    /// Build an approved unit (or `next`: the readiest of the queue, saying why): admits it, creates the run and drives it step by step to delivered, blocked, handed back or waiting on the host; refuses a unit that is not approved, is held, has an open question, lint errors, a changed contract or another run's claim.
    #[command(before_help = help::PERSON)]
    Build(commands::build::BuildArgs),
    /// Build the queue's approved units one after another (`iced build next` each time) until none is eligible, the budget is spent, --max-units were built or --until has come; prints what was delivered, handed back and skipped; refuses what `build` refuses of the repository.
    #[command(before_help = help::PERSON)]
    Drain(commands::drain::DrainArgs),
    /// Have an agent draft the repository's memory (`.iced/memory/*`) as a branch you merge.
    #[command(before_help = help::PERSON)]
    Memory {
        #[command(subcommand)]
        command: commands::memory::MemoryCommand,
    },
    /// Run a whole build of a real unit in a throwaway repository with the built-in scripted agent: writes only under the system temp dir (or --dir); refuses nothing but a broken machine.
    #[command(before_help = help::PERSON)]
    Demo(commands::demo::Args),
    /// The loop's step interface for a driving host, cron or a supervisor (machinery).
    #[command(before_help = help::MACHINERY, hide = true)]
    Implement {
        #[command(subcommand)]
        command: commands::implement::ImplementCommand,
    },
    /// Serve the loop as Model Context Protocol tools on stdin/stdout: a host's step and receipt, a lane implementer's decision, questions, escalation and report, everyone's status, run show and handover; each tool is the verb it names and a refusal comes back as a tool error.
    #[command(verbatim_doc_comment, before_help = help::MACHINERY, hide = true)]
    Mcp(commands::mcp::Args),
    /// Trust what this checkout's config would run (runners, roles, verify.commands, land.pr, hooks): records their sha256 for this root in your own config directory and prints each program and argv; refuses an invalid config.
    #[command(verbatim_doc_comment, before_help = help::PERSON)]
    Trust,
    /// Inspect and steer runs: list, show, pause, resume, abandon, release, discard, arm, retire, handover.
    #[command(before_help = help::PERSON)]
    Run {
        #[command(subcommand)]
        command: commands::run::RunCommand,
    },
    /// Resolve an implementer's escalation: show it (was/becomes), apply or edit its contract proposal (re-hashes the contract, logs your decision), or reject it with guidance; refuses a unit with no open escalation.
    #[command(before_help = help::PERSON)]
    Escalation {
        #[command(subcommand)]
        command: commands::escalation::EscalationCommand,
    },
    /// Answer an implementer's question: writes it as a Q item with `-> A:` in the unit (the contract is untouched); refuses a question the open escalation does not hold.
    #[command(verbatim_doc_comment, before_help = help::PERSON)]
    Answer(commands::escalation::AnswerArgs),
    /// Judge one proposed tool call, read as JSON on standard input, with the guard (SPEC 24.1): prints the decision, rule and reason; exits 0 for allow or notify, 4 for ask, 3 for deny; writes nothing.
    #[command(verbatim_doc_comment, before_help = help::MACHINERY, hide = true)]
    Guard,
    /// The guard as a coding agent's hook: `iced hook claude` answers Claude Code's PreToolUse hook.
    #[command(before_help = help::MACHINERY, hide = true)]
    Hook {
        #[command(subcommand)]
        command: commands::guard::HookCommand,
    },
    /// Supervise one activity (internal: launched by the loop itself).
    #[command(name = "__supervise", hide = true)]
    Supervise {
        dir: std::path::PathBuf,
        /// The registration pipe's write end it inherits, closed once it has registered.
        #[arg(long = "ready-fd")]
        ready_fd: Option<i32>,
    },
    /// Show sign-off, verification, rejection and escalation rates and promotion suggestions from .iced/metrics.jsonl: writes nothing, and refuses a metrics file it cannot read.
    #[command(verbatim_doc_comment, before_help = help::PERSON)]
    Stats,
    /// Print the JSON Schema of a file iced reads or writes (config, report, validator, state, unit): writes nothing, refuses nothing.
    #[command(verbatim_doc_comment, before_help = help::MACHINERY, hide = true)]
    Schema(commands::schema::Args),
}

/// Run the command line and return the process exit code.
pub fn main() -> i32 {
    let args: Vec<String> = std::env::args().collect();
    let wants_json = args.iter().skip(1).any(|a| a == "--json");
    if help::wants_agent_help(&args) {
        print!("{}", help::AGENT);
        return Exit::Ok.code();
    }
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) => return usage_error(e, wants_json),
    };
    if let Err(refusal) = check_environment() {
        return render::refusal(&refusal, cli.json);
    }
    match commands::run(cli.command, cli.json) {
        Ok(output) => render::output(&output, cli.json),
        Err(refusal) => render::refusal(&refusal, cli.json),
    }
}

fn usage_error(e: clap::Error, json: bool) -> i32 {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion)
        || e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand && !json
    {
        let _ = e.print();
        return e.exit_code();
    }
    if !json {
        let _ = e.print();
        return Exit::Usage.code();
    }
    // clap's message: the reason, possibly over several lines, then a blank line and usage.
    let text = e.render().to_string();
    let reason = text
        .lines()
        .take_while(|l| !l.starts_with("Usage:"))
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let reason = reason.trim_start_matches("error: ").to_owned();
    let reason = if reason.is_empty() {
        "bad arguments".to_owned()
    } else {
        reason
    };
    let refusal = Refusal::new(
        "usage",
        "usage",
        reason,
        "see `iced --help`, or `iced <verb> --help` for one verb",
    )
    .exit(Exit::Usage);
    render::refusal(&refusal, true)
}

/// `ICED_NOW` must parse when set: a silently ignored pin would make "reproducible" output lie.
fn check_environment() -> Result<(), Refusal> {
    if let Ok(value) = std::env::var("ICED_NOW") {
        if chrono::DateTime::parse_from_rfc3339(&value).is_err() {
            return Err(Refusal::new(
                "usage",
                "usage",
                format!("ICED_NOW is `{value}`, not an RFC 3339 time"),
                "set it like `2026-09-30T11:00:00Z`, or unset it",
            )
            .exit(Exit::Usage));
        }
    }
    Ok(())
}
