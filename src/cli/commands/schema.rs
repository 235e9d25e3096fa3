//! `iced schema <name>`: the JSON Schema of a file iced reads or writes, shipped in the binary,
//! so that a remedy naming it ("`iced schema report` prints its shape") works in any repository.

use crate::cli::Output;
use crate::refusal::Refusal;

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Name {
    /// `.iced/config.json`.
    Config,
    /// The implementer's lane report (its receipt).
    Report,
    /// A validator's or the refuter's answer.
    Validator,
    /// `.iced/run/state.json`.
    State,
    /// A unit's frontmatter.
    Unit,
}

#[derive(clap::Args)]
pub struct Args {
    pub name: Name,
}

pub fn run(args: Args) -> Result<Output, Refusal> {
    let text = match args.name {
        Name::Config => include_str!("../../../spec/schema/config.schema.json"),
        Name::Report => include_str!("../../../spec/schema/report.schema.json"),
        Name::Validator => include_str!("../../../spec/schema/validator.schema.json"),
        Name::State => include_str!("../../../spec/schema/state.schema.json"),
        Name::Unit => include_str!("../../../spec/schema/unit.schema.json"),
    };
    let json = serde_json::from_str(text).expect("a shipped schema parses");
    Ok(Output::new(json, text.trim_end().to_owned()))
}
