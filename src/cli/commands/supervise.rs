//! The hidden supervisor, `iced __supervise <dir>`: one activity, launched by the loop itself. It
//! prints nothing; its exit code is all it says.

use crate::cli::Output;
use crate::refusal::Refusal;
use std::path::PathBuf;

pub fn run(dir: PathBuf, ready_fd: Option<i32>) -> Result<Output, Refusal> {
    // Taken first, before anything this process does could start a child that inherits it.
    let ready = ready_fd.and_then(crate::activity::ready_pipe);
    Ok(Output::exit_only(crate::activity::supervise(
        &dir,
        ready,
        &crate::run::launch::RunGate,
    )))
}
