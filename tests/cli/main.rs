//! The integration suite: the real `iced` binary driven in real temporary git repositories.

mod env;

mod examples;
mod interop;
