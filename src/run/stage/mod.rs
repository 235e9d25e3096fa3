//! The stages of a lane, one module each. A stage takes what it needs (the context, the run as
//! the stepper read it) and returns what happened; it never calls back into the stepper.

pub mod admit;
pub mod brief;
pub mod claims;
pub mod deliver;
pub mod implement;
pub mod judge;
pub mod land;
pub mod plan;
pub mod plan_text;
pub mod receipt;
pub mod refute;
pub mod remote;
pub mod review;
pub mod tester;
pub mod validators;
pub mod worktree;
