//! One module per verb (or per family of small verbs, each verb its own function): its arguments
//! and the function that runs it. `run/` holds one file per `run` verb.

pub mod approve;
pub mod build;
pub mod demo;
pub mod drain;
pub mod escalation;
pub mod guard;
pub mod implement;
pub mod init;
pub mod lifecycle;
pub mod lint;
pub mod list;
pub mod mcp;
pub mod mcp_tools;
pub mod memory;
pub mod new;
pub mod run;
pub mod schema;
pub mod stats;
pub mod status;
pub mod supervise;
pub mod trust;

use super::{Command, Output};
use crate::refusal::{io_error, Refusal};
use crate::repo::Repo;

pub fn run(command: Command, json: bool) -> Result<Output, Refusal> {
    match command {
        Command::Init(args) => init::run(args),
        Command::New(args) => new::run_new(args),
        Command::Child(args) => new::run_child(args),
        Command::List => list::run(json),
        Command::Status(args) => status::run(args),
        Command::Lint(args) => lint::run(args),
        Command::Approve(args) => approve::run(args, json),
        Command::Accept(args) => lifecycle::accept(args),
        Command::Reject(args) => lifecycle::reject(args),
        Command::Abandon(args) => lifecycle::abandon(args),
        Command::Use(args) => lifecycle::use_unit(args),
        Command::Hold(args) => lifecycle::hold(args),
        Command::Unhold(args) => lifecycle::unhold(args),
        Command::Decision(args) => lifecycle::decision(args),
        Command::Autonomy(args) => lifecycle::autonomy(args),
        Command::Stats => stats::run(),
        Command::Escalation { command } => escalation::run(command),
        Command::Answer(args) => escalation::answer(args),
        Command::Schema(args) => schema::run(args),
        Command::Trust => trust::run(),
        Command::Guard => guard::guard(),
        Command::Hook { command } => guard::hook(command),
        Command::Build(args) => build::run(args, json),
        Command::Drain(args) => drain::run(args, json),
        Command::Memory { command } => memory::run(command),
        Command::Demo(args) => demo::run(args),
        Command::Implement { command } => implement::run(command),
        Command::Mcp(args) => mcp::run(args),
        Command::Run { command } => run::run(command),
        Command::Supervise { dir, ready_fd } => supervise::run(dir, ready_fd),
    }
}

pub fn current_dir(step: &str) -> Result<std::path::PathBuf, Refusal> {
    std::env::current_dir()
        .map_err(|e| io_error(step, format!("cannot read the current directory: {e}")))
}

/// The repository around the current directory.
pub fn repo(step: &str) -> Result<Repo, Refusal> {
    Repo::discover(&current_dir(step)?, step)
}
