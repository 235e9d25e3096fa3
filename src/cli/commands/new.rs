use super::repo;
use crate::cli::Output;
use crate::record::{new_unit, NewUnit};
use crate::refusal::Refusal;
use crate::unit::UnitType;

fn parse_type(s: &str) -> Result<UnitType, String> {
    s.parse()
        .map_err(|()| format!("unknown type `{s}`; use one of {}", UnitType::choices()))
}

#[derive(clap::Args)]
pub struct NewArgs {
    /// What you want, in one line. A leading bug/fix/feature/project/review/chore sets the type.
    pub line: String,
    /// The unit type, overriding what the first word says.
    #[arg(long = "type", value_parser = parse_type)]
    pub kind: Option<UnitType>,
    /// The parent unit (id, number or unique part of an id).
    #[arg(long)]
    pub parent: Option<String>,
}

#[derive(clap::Args)]
pub struct ChildArgs {
    /// The parent unit (id, number or unique part of an id).
    pub parent: String,
    /// What you want, in one line.
    pub line: String,
    /// The unit type, overriding what the first word says.
    #[arg(long = "type", value_parser = parse_type)]
    pub kind: Option<UnitType>,
}

fn create(
    step: &str,
    line: &str,
    kind: Option<UnitType>,
    parent: Option<&str>,
) -> Result<Output, Refusal> {
    let repo = repo(step)?;
    let created = new_unit(&repo, NewUnit { line, kind, parent }, step)?;
    let parent_note = created
        .parent
        .as_ref()
        .map(|p| format!(" under {p}"))
        .unwrap_or_default();
    let text = format!(
        "{}\n\nCreated {} {}{parent_note} at `{}` (now the active unit).\nNext: write its Intent and Expectations, check it with `iced lint {} --stage signoff`, then `iced approve {}`.",
        created.id, created.kind, created.id, created.path, created.id, created.id
    );
    Ok(Output::new(
        serde_json::to_value(&created).expect("serialises"),
        text,
    ))
}

pub fn run_new(args: NewArgs) -> Result<Output, Refusal> {
    create("new", &args.line, args.kind, args.parent.as_deref())
}

pub fn run_child(args: ChildArgs) -> Result<Output, Refusal> {
    create("child", &args.line, args.kind, Some(&args.parent))
}
