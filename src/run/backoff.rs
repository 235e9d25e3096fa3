//! The run's backoff (SPEC 20.10): after a rate-limited agent, or a remote that could not be
//! reached (SPEC 20.19), the run launches nothing before a time that doubles with each such result
//! in a row.

use super::events::{emit, Event};
use super::pace::Pace;
use super::state::Run;
use crate::run::ctx::{run_pace, Ctx};
use serde_json::json;

/// What made a run back off (SPEC 20.10).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Backoff<'a> {
    /// An agent's harness said it was rate limited.
    RateLimited,
    /// The remote a remote lane's branch goes to could not be reached (SPEC 20.19): git's error.
    Unreachable(&'a str),
}

/// A rate-limited agent result, or a remote that could not be reached: the run launches nothing
/// before a backoff has passed, doubled for each such result in a row, capped, with up to 20%
/// jitter either way (SPEC 20.10).
pub(crate) fn pace_after(ctx: &Ctx<'_>, run: &mut Run, cause: Backoff<'_>) {
    let pace = run_pace(ctx, run);
    // Jitter from the clock's nanoseconds: enough to spread runs that were limited together.
    let nanos = f64::from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos()),
    );
    let jitter = 0.8 + 0.4 * (nanos / 1e9);
    let wait_ms = (delay_ms(&pace, run.paced) * jitter).max(1.0) as i64;
    let until = crate::clock::real_now() + chrono::Duration::milliseconds(wait_ms);
    // Whole seconds, rounded up: never earlier than the wait.
    let until = until
        .checked_add_signed(chrono::Duration::milliseconds(999))
        .map_or(until, |t| t)
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    run.paced += 1;
    run.next_eligible_at = Some(until.clone());
    let mut event = json!({"until": until, "why": "rate_limited", "backoff_ms": wait_ms, "in_a_row": run.paced, "ruling": pace.ruling});
    if let Backoff::Unreachable(error) = cause {
        event["why"] = "remote_unreachable".into();
        event["error"] = error.into();
    }
    emit(&ctx.paths, &run.id, Event::Paced, event);
}

/// The wait after `in_a_row` such results before this one, in milliseconds, before jitter:
/// `backoffSec` doubled for each, capped at `backoffMaxSec`.
pub(crate) fn delay_ms(pace: &Pace, in_a_row: u32) -> f64 {
    (pace.backoff_sec * 1000.0 * 2f64.powi(in_a_row.min(20) as i32))
        .min(pace.backoff_max_sec * 1000.0)
}
