//! The hidden supervisor, `iced __supervise <dir>`: one activity, launched by the loop itself. It
//! prints nothing; its exit code is all it says.

use crate::cli::Output;
use crate::refusal::Refusal;
use std::path::PathBuf;

pub fn run(dir: PathBuf) -> Result<Output, Refusal> {
    Ok(Output::exit_only(crate::activity::supervise(
        &dir,
        &crate::run::launch::RunGate,
    )))
}
