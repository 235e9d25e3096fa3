//! The build loop: a re-entrant orchestrator over `.iced/run/state.json`. Every call does one
//! idempotency-keyed step and exits; `decide` is pure, side effects are keyed and recorded, and long
//! work runs as detached activities (`crate::activity`).

pub mod answer;
pub mod brief;
pub mod claims;
pub mod decide;
pub mod deliver;
pub mod dispositions;
pub mod engine;
pub mod events;
pub mod host;
pub mod judging;
pub mod kept;
pub mod land;
pub mod landing;
pub mod lane_guard;
pub mod live;
pub mod lock;
pub mod pace;
pub mod record;
pub mod report;
pub mod settings;
pub mod state;
pub mod validate;

pub use engine::{Ctx, StepReport};
