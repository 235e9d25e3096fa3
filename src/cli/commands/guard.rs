//! `iced guard` and `iced hook claude` (SPEC 24.11): one proposed tool call on standard input,
//! judged by the guard against the repository around it.

use super::current_dir;
use crate::cli::Output;
use crate::guard::{Decision, Verdict};
use crate::hook::{self, claude, Problem};
use crate::refusal::{Exit, Refusal};
use std::path::{Path, PathBuf};

#[derive(clap::Subcommand)]
pub enum HookCommand {
    /// Claude Code's PreToolUse hook: reads its input on standard input and prints its decision (allow, ask or deny) as Claude Code's hook output, exit 0; input it cannot read is denied.
    #[command(verbatim_doc_comment)]
    Claude,
}

fn refusal(p: Problem) -> Refusal {
    let exit = if p.code == "guard-input" {
        Exit::Usage
    } else {
        Exit::Refused
    };
    Refusal::new("guard", p.code, p.reason, p.remedy).exit(exit)
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The directory a call was made in: the one it names (relative to ours), else ours.
fn call_dir(named: Option<&str>, step: &str) -> Result<PathBuf, Refusal> {
    let here = current_dir(step)?;
    Ok(match named.filter(|c| !c.is_empty()) {
        Some(dir) => here.join(Path::new(dir)),
        None => here,
    })
}

fn judge(cwd: &Path, call: &hook::Call) -> Result<Decision, Problem> {
    let who = hook::who_from(env("ICED_ROLE").as_deref(), env("ICED_LANE").as_deref())?;
    hook::judge_call(cwd, who, call)
}

/// `iced guard`: exit 0 for allow and notify, 4 for ask, 3 for deny.
pub fn guard() -> Result<Output, Refusal> {
    let step = "guard";
    let bytes = hook::read_input(std::io::stdin().lock()).map_err(refusal)?;
    let input = hook::GuardInput::parse(&bytes).map_err(refusal)?;
    let cwd = call_dir(input.cwd.as_deref(), step)?;
    let call = input.call().map_err(refusal)?;
    let decision = judge(&cwd, &call).map_err(refusal)?;
    let hard = if decision.hard { ", hard" } else { "" };
    let text = format!(
        "{}: {}{hard}\n{}\n",
        serde_json::to_value(decision.verdict)
            .expect("serialises")
            .as_str()
            .unwrap_or(""),
        decision.rule,
        decision.reason
    );
    let mut out = Output::new(
        serde_json::to_value(&decision).expect("a decision serialises"),
        text,
    );
    out.exit = match decision.verdict {
        Verdict::Allow | Verdict::Notify => Exit::Ok,
        Verdict::Ask => Exit::NeedsPerson,
        Verdict::Deny => Exit::Refused,
    };
    Ok(out)
}

/// `iced hook claude`: always Claude Code's hook output and exit 0; what cannot be judged is
/// denied.
pub fn hook(command: HookCommand) -> Result<Output, Refusal> {
    let HookCommand::Claude = command;
    let answer = match claude_decision() {
        Ok(d) => claude::decision_output(&d),
        Err(p) => claude::problem_output(&p),
    };
    let mut out = Output::new(serde_json::Value::Null, answer.clone());
    out.json_text = Some(answer);
    Ok(out)
}

fn claude_decision() -> Result<Decision, Problem> {
    let bytes = hook::read_input(std::io::stdin().lock())?;
    let input = claude::HookInput::parse(&bytes)?;
    let call = input.call()?;
    let cwd = call_dir(input.cwd.as_deref(), "hook").map_err(|r| Problem {
        code: r.code,
        reason: r.reason,
        remedy: r.remedy,
    })?;
    judge(&cwd, &call)
}
