//! Step keys: which step of a lane a record is (`implement`, `receipt`, `dod-<i>-<j>`,
//! `validate-<name>`, `refute`, the landing steps), and what kind of agent or activity it names.

/// The role of an agent step's agent.
pub(crate) fn role_of_step(step: &str) -> &'static str {
    match step {
        "implement" => "implementer",
        "refute" => "refuter",
        _ => "validator",
    }
}

/// A definition-of-done command's step: `dod-<i>-<j>`, or `retest-<round>-<i>-<j>` after landing
/// brought the target in.
pub(crate) fn is_dod_key(step: &str) -> bool {
    step.starts_with("dod-") || step.starts_with("retest-")
}

pub(crate) fn is_validator_step(step: &str) -> bool {
    step.starts_with("validate-") || step == "refute"
}
