//! The ICED record: one unit's text and what it says. Knows nothing about the command line or the
//! repository around it: parse, hash, lint and the status machine are pure functions of text.

pub mod coverage;
pub mod frontmatter;
pub mod hash;
pub mod id;
pub mod kinds;
pub mod lint;
pub mod parse;
pub mod proposal;

#[cfg(test)]
mod lint_body_tests;
#[cfg(test)]
mod lint_coverage_tests;
#[cfg(test)]
mod lint_tests;
#[cfg(test)]
mod prop_tests;

pub use coverage::{coverage, Coverage};
pub use frontmatter::{Edit, Frontmatter, Scalar};
pub use hash::contract_hash;
pub use kinds::{Actor, Risk, Stage, Status, Tier, UnitType};
pub use lint::{lint, Issue, LintContext, LintReport};
pub use parse::{parse_unit, ParsedUnit};

/// Keys only tooling or a person may change; an agent must never edit them.
pub const PROTECTED_KEYS: &[&str] = &[
    "iced",
    "id",
    "status",
    "autonomy",
    "attempts",
    "approved_at",
    "approved_by",
    "contract_hash",
    "base_ref",
    "accepted_at",
    "accepted_by",
    "blocked_from",
    "held",
];

/// The version of the ICED record this implementation reads and writes.
pub const SPEC_VERSION: &str = "0.1";
