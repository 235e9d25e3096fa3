//! The integration suite: the real `iced` binary driven in real temporary git repositories.

mod env;
mod snap;

mod authoring;
mod bad_input;
mod claims;
mod compat;
mod crash;
mod examples;
mod guard;
mod harness;
mod host_pace;
mod hostile_files;
mod hostile_lane;
mod init;
mod interop;
mod landing;
mod landing_pr;
mod landing_show;
mod layout;
mod loop_e2e;
mod metrics;
mod mock_api;
mod output;
mod project;
mod refusals;
mod snap_land;
mod snap_project;
mod snap_refusals;
mod snap_step;
mod snap_units;
mod survivors;
mod trust;
mod validation;
mod waiting;
mod words;
