use super::repo;
use crate::cli::render::issue_line;
use crate::cli::Output;
use crate::refusal::{Exit, Refusal};
use crate::repo::Numbers;
use crate::unit::Stage;

fn parse_stage(s: &str) -> Result<Stage, String> {
    s.parse()
        .map_err(|()| format!("unknown stage `{s}`; use one of {}", Stage::choices()))
}

#[derive(clap::Args)]
pub struct Args {
    /// The unit (id, number or unique part of an id).
    pub id: String,
    /// Which rules: draft, signoff, accept or validate.
    #[arg(long, default_value = "validate", value_parser = parse_stage)]
    pub stage: Stage,
}

pub fn run(args: Args) -> Result<Output, Refusal> {
    let step = "lint";
    let repo = repo(step)?;
    let id = repo.resolve(&args.id, step)?;
    let unit = repo.read_unit(&id, step)?;
    let numbers = Numbers::new(&repo.unit_ids(step)?);
    let report = repo.lint_unit(&unit, args.stage, &numbers);
    let mut text = String::new();
    for issue in report.errors.iter().chain(&report.warnings) {
        let severity = if report.errors.contains(issue) {
            "error"
        } else {
            "warning"
        };
        let value = serde_json::to_value(issue).expect("serialises");
        text.push_str(&format!("{severity}: {}\n", issue_line(&value)));
    }
    text.push_str(&format!(
        "{id} at stage {}: {} error{}, {} warning{}",
        args.stage,
        report.errors.len(),
        if report.errors.len() == 1 { "" } else { "s" },
        report.warnings.len(),
        if report.warnings.len() == 1 { "" } else { "s" },
    ));
    let mut out = Output::new(serde_json::to_value(&report).expect("serialises"), text);
    if !report.is_clean() {
        out.exit = Exit::Refused;
    }
    Ok(out)
}
