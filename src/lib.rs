//! iced: a re-entrant orchestrator that takes an ICED unit from approved to delivered.
//!
//! `unit` is the record (format, hash, lint, status machine) and knows nothing of files or the
//! command line; `repo`, `record`, `init` and `metrics` apply it to a repository; `store` owns how
//! bytes reach the disk; `cli` alone prints.

pub mod activity;
pub mod cli;
pub mod clock;
pub mod config;
pub mod confine;
pub mod failpoint;
pub mod git;
pub mod guard;
pub mod hook;
pub mod init;
pub mod metrics;
pub mod par;
pub mod record;
pub mod refusal;
pub mod repo;
pub mod run;
pub mod runner;
pub mod store;
pub mod templates;
pub mod text;
pub mod trust;
pub mod unit;
