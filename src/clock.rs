//! The clock, read once per use and pinnable. `ICED_NOW` (RFC 3339) fixes "now" so tests and demos
//! produce the same bytes on every run; everything that stamps a time goes through here.

use chrono::{DateTime, SecondsFormat, Utc};

pub fn now() -> DateTime<Utc> {
    std::env::var("ICED_NOW")
        .ok()
        .and_then(|s| DateTime::parse_from_rfc3339(&s).ok())
        .map_or_else(Utc::now, |t| t.with_timezone(&Utc))
}

/// The real time, whatever `ICED_NOW` says: for how long to wait, never for what is recorded.
pub fn real_now() -> DateTime<Utc> {
    Utc::now()
}

/// `2026-09-30T11:00:00Z`: seconds, UTC, as units and metrics store times.
pub fn now_iso() -> String {
    now().to_rfc3339_opts(SecondsFormat::Secs, true)
}
