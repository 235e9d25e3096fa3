//! The build loop: a re-entrant orchestrator over `.iced/run/state.json`. Every call does one
//! idempotency-keyed step and exits; `decide` is pure, side effects are keyed and recorded, and long
//! work runs as detached activities (`crate::activity`).

pub mod alive;
pub mod answer;
pub(crate) mod at_commit;
pub mod backoff;
pub mod budget;
pub mod claims;
pub mod claims_remote;
pub mod config_keys;
pub mod confinement;
pub mod control;
pub mod ctx;
pub mod decide;
pub mod dispositions;
pub mod drain;
pub mod drive;
pub mod ended;
pub mod escalation;
pub mod escalation_verbs;
pub mod events;
pub mod forge;
pub mod host;
pub mod kept;
pub mod land_remote;
pub mod keys;
pub mod lane_git;
pub mod lane_guard;
pub mod launch;
pub mod live;
pub mod lock;
pub mod memory;
pub mod observe;
pub mod outcome;
pub mod outside_lock;
pub mod pace;
pub mod picked;
pub mod queue;
pub mod record;
pub mod records;
pub mod reply;
pub mod report;
pub mod settings;
pub mod stage;
pub mod state;
pub mod step_record;
pub mod stepper;
pub mod submit;
pub mod then;
pub mod under_lock;
pub mod validate;
pub mod view;

pub use ctx::Ctx;
pub use reply::StepReport;
