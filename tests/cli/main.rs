//! The integration suite: the real `iced` binary driven in real temporary git repositories.

mod env;

mod authoring;
mod bad_input;
mod claims;
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
mod loop_e2e;
mod mock_api;
mod output;
mod project;
mod refusals;
mod survivors;
mod trust;
mod validation;
mod waiting;
