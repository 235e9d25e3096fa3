//! `.iced/metrics.jsonl`: one event per line, appended, never rewritten. Stats and promotion
//! suggestions are computed from the events alone.

use crate::config::Config;
use crate::store::{self, StoreError};
use crate::unit::kinds::Risk;
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub fn path(root: &Path) -> PathBuf {
    root.join(".iced").join("metrics.jsonl")
}

/// Append `{ts, id, event, ...data}`.
pub fn append(root: &Path, id: &str, event: &str, data: Value) -> Result<(), StoreError> {
    let mut line = Map::new();
    line.insert("ts".into(), crate::clock::now_iso().into());
    line.insert("id".into(), id.into());
    line.insert("event".into(), event.into());
    if let Value::Object(data) = data {
        line.extend(data);
    }
    let mut text = serde_json::to_string(&line).expect("a JSON map serialises");
    text.push('\n');
    store::append(&path(root), text.as_bytes(), 0o644)
}

/// A metrics file over this is refused rather than read: at a few hundred bytes an event, it holds
/// hundreds of thousands of them.
pub const READ_LIMIT: u64 = 256 * 1024 * 1024;

/// Every event that parses as a JSON object; other lines are skipped. The file is iced's own, so a
/// link or anything but a regular file is refused (SPEC 24.6).
pub fn read(root: &Path) -> Result<Vec<Map<String, Value>>, StoreError> {
    let text = match store::read_no_follow(&path(root), READ_LIMIT) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) if e.is_not_found() => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    Ok(text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| match v {
            Value::Object(map) => Some(map),
            _ => None,
        })
        .collect())
}

#[derive(Debug, Default, Clone)]
struct UnitHistory {
    questions: f64,
    signoffs: Vec<String>,
    verifies: Vec<String>,
    escalations: u32,
    accepts: u32,
    rejects: u32,
    risk: Option<String>,
    autonomy: Option<i64>,
}

/// Rates are percentages with one decimal; `None` when there is nothing to rate.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub units: usize,
    pub questions_per_unit: f64,
    pub signoff_first_approval_rate: Option<f64>,
    pub verify_first_pass_rate: Option<f64>,
    pub human_rejection_rate: Option<f64>,
    pub escalations_per_unit: f64,
    pub accepted: usize,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Stats {
    pub overall: Summary,
    pub by_risk: BTreeMap<String, Summary>,
    pub by_autonomy: BTreeMap<String, Summary>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Suggestion {
    pub risk: Risk,
    pub from: i64,
    pub to: i64,
    pub reason: String,
}

fn text(event: &Map<String, Value>, key: &str) -> Option<String> {
    event.get(key).and_then(Value::as_str).map(str::to_owned)
}

fn rate(num: usize, den: usize) -> Option<f64> {
    (den > 0).then(|| (num as f64 / den as f64 * 1000.0).round() / 10.0)
}

fn per_unit(total: f64, units: usize) -> f64 {
    if units == 0 {
        0.0
    } else {
        (total / units as f64 * 100.0).round() / 100.0
    }
}

fn summarize(list: &[&UnitHistory]) -> Summary {
    let signed: Vec<_> = list.iter().filter(|u| !u.signoffs.is_empty()).collect();
    let verified: Vec<_> = list.iter().filter(|u| !u.verifies.is_empty()).collect();
    let decided: Vec<_> = list.iter().filter(|u| u.accepts + u.rejects > 0).collect();
    Summary {
        units: list.len(),
        questions_per_unit: per_unit(list.iter().map(|u| u.questions).sum(), list.len()),
        signoff_first_approval_rate: rate(
            signed
                .iter()
                .filter(|u| u.signoffs[0] == "approved")
                .count(),
            signed.len(),
        ),
        verify_first_pass_rate: rate(
            verified.iter().filter(|u| u.verifies[0] == "pass").count(),
            verified.len(),
        ),
        human_rejection_rate: rate(
            decided.iter().filter(|u| u.rejects > 0).count(),
            decided.len(),
        ),
        escalations_per_unit: per_unit(
            list.iter().map(|u| f64::from(u.escalations)).sum(),
            list.len(),
        ),
        accepted: list.iter().filter(|u| u.accepts > 0).count(),
    }
}

/// Stats over all events: overall, by risk and by autonomy.
pub fn stats(events: &[Map<String, Value>]) -> Stats {
    let mut sorted: Vec<&Map<String, Value>> = events.iter().collect();
    sorted.sort_by_key(|e| text(e, "ts").unwrap_or_default());
    let mut units: BTreeMap<String, UnitHistory> = BTreeMap::new();
    for e in sorted {
        let Some(id) = text(e, "id").filter(|id| !id.is_empty()) else {
            continue;
        };
        let u = units.entry(id).or_default();
        if let Some(risk) = text(e, "risk").filter(|r| !r.is_empty()) {
            u.risk = Some(risk);
        }
        if let Some(a) = e.get("autonomy").and_then(Value::as_i64) {
            u.autonomy = Some(a);
        }
        match text(e, "event").as_deref() {
            Some("questions") => {
                u.questions += e.get("count").and_then(Value::as_f64).unwrap_or(0.0);
            }
            Some("signoff") => u.signoffs.push(text(e, "result").unwrap_or_default()),
            Some("verify") => u.verifies.push(text(e, "result").unwrap_or_default()),
            Some("escalation") => u.escalations += 1,
            Some("accept") => u.accepts += 1,
            Some("reject") => u.rejects += 1,
            _ => {}
        }
    }
    let all: Vec<&UnitHistory> = units.values().collect();
    let group = |key: fn(&UnitHistory) -> String| {
        let mut groups: BTreeMap<String, Vec<&UnitHistory>> = BTreeMap::new();
        for u in &all {
            groups.entry(key(u)).or_default().push(u);
        }
        groups
            .into_iter()
            .map(|(k, list)| (k, summarize(&list)))
            .collect()
    };
    Stats {
        overall: summarize(&all),
        by_risk: group(|u| u.risk.clone().unwrap_or_else(|| "unknown".into())),
        by_autonomy: group(|u| {
            u.autonomy
                .map_or_else(|| "unknown".into(), |a| a.to_string())
        }),
    }
}

/// Suggest raising a risk level's default autonomy by one when its `promotion.window` most recently
/// accepted units at the current default had no rejection and no escalation. Never above the cap
/// (1 for high risk, else `maxAutonomy`), never applied here.
pub fn promotion_suggestions(events: &[Map<String, Value>], config: &Config) -> Vec<Suggestion> {
    struct Seen {
        risk: Option<String>,
        autonomy: Option<i64>,
        accepted_at: Option<String>,
        clean: bool,
    }
    let mut units: BTreeMap<String, Seen> = BTreeMap::new();
    for e in events {
        let Some(id) = text(e, "id").filter(|id| !id.is_empty()) else {
            continue;
        };
        let u = units.entry(id).or_insert(Seen {
            risk: None,
            autonomy: None,
            accepted_at: None,
            clean: true,
        });
        if let Some(risk) = text(e, "risk").filter(|r| !r.is_empty()) {
            u.risk = Some(risk);
        }
        if let Some(a) = e.get("autonomy").and_then(Value::as_i64) {
            u.autonomy = Some(a);
        }
        match text(e, "event").as_deref() {
            Some("reject" | "escalation") => u.clean = false,
            Some("accept") => u.accepted_at = Some(text(e, "ts").unwrap_or_default()),
            _ => {}
        }
    }
    let window = config.promotion_window;
    let mut suggestions = Vec::new();
    for &risk in Risk::ALL {
        let current = config.default_autonomy_for(risk);
        let cap = if risk == Risk::High {
            1
        } else {
            config.max_autonomy
        };
        if current >= cap {
            continue;
        }
        let mut recent: Vec<&Seen> = units
            .values()
            .filter(|u| {
                u.risk.as_deref() == Some(risk.as_str())
                    && u.accepted_at.is_some()
                    && u.autonomy == Some(current)
            })
            .collect();
        recent.sort_by(|a, b| b.accepted_at.cmp(&a.accepted_at));
        recent.truncate(window);
        if recent.len() >= window && recent.iter().all(|u| u.clean) {
            suggestions.push(Suggestion {
                risk,
                from: current,
                to: current + 1,
                reason: format!(
                    "Last {window} {risk}-risk units at autonomy {current} were accepted with no rejections or escalations."
                ),
            });
        }
    }
    suggestions
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn stats_count_first_attempts_and_rates() {
        let events = vec![
            ev(json!({"ts": "1", "id": "001-a", "event": "created", "risk": "low", "autonomy": 1})),
            ev(json!({"ts": "2", "id": "001-a", "event": "questions", "count": 2})),
            ev(json!({"ts": "3", "id": "001-a", "event": "signoff", "result": "changes"})),
            ev(json!({"ts": "4", "id": "001-a", "event": "signoff", "result": "approved"})),
            ev(json!({"ts": "5", "id": "001-a", "event": "verify", "result": "pass"})),
            ev(json!({"ts": "6", "id": "001-a", "event": "accept"})),
            ev(
                json!({"ts": "1", "id": "002-b", "event": "created", "risk": "high", "autonomy": 1}),
            ),
            ev(json!({"ts": "2", "id": "002-b", "event": "signoff", "result": "approved"})),
            ev(json!({"ts": "3", "id": "002-b", "event": "verify", "result": "fail"})),
            ev(json!({"ts": "4", "id": "002-b", "event": "escalation", "kind": "stuck"})),
            ev(json!({"ts": "5", "id": "002-b", "event": "reject", "reason": "no"})),
        ];
        let s = stats(&events);
        assert_eq!(s.overall.units, 2);
        assert_eq!(s.overall.questions_per_unit, 1.0);
        assert_eq!(s.overall.signoff_first_approval_rate, Some(50.0));
        assert_eq!(s.overall.verify_first_pass_rate, Some(50.0));
        assert_eq!(s.overall.human_rejection_rate, Some(50.0));
        assert_eq!(s.overall.escalations_per_unit, 0.5);
        assert_eq!(s.overall.accepted, 1);
        assert_eq!(s.by_risk["low"].units, 1);
        assert_eq!(s.by_autonomy["1"].units, 2);
        assert_eq!(stats(&[]).overall.signoff_first_approval_rate, None);
    }

    fn accepted(
        n: usize,
        risk: &str,
        autonomy: i64,
        dirty: Option<usize>,
    ) -> Vec<Map<String, Value>> {
        let mut events = Vec::new();
        for i in 0..n {
            let id = format!("{i:03}-u");
            events.push(ev(json!({"ts": format!("2026-01-01T00:00:{i:02}Z"), "id": id, "event": "created", "risk": risk, "autonomy": autonomy})));
            if dirty == Some(i) {
                events.push(ev(
                    json!({"ts": "x", "id": id, "event": "escalation", "kind": "stuck"}),
                ));
            }
            events.push(ev(json!({"ts": format!("2026-01-02T00:00:{i:02}Z"), "id": id, "event": "accept", "auto": false})));
        }
        events
    }

    #[test]
    fn promotion_needs_a_full_clean_window_at_the_current_default() {
        let config = Config::default();
        let s = promotion_suggestions(&accepted(10, "low", 1, None), &config);
        assert_eq!(s.len(), 1);
        assert_eq!((s[0].risk, s[0].from, s[0].to), (Risk::Low, 1, 2));
        assert!(promotion_suggestions(&accepted(9, "low", 1, None), &config).is_empty());
        assert!(promotion_suggestions(&accepted(10, "low", 1, Some(3)), &config).is_empty());
        // An escalation older than the window's ten most recent acceptances does not count.
        assert_eq!(
            promotion_suggestions(&accepted(11, "low", 1, Some(0)), &config).len(),
            1
        );
        // High risk is capped at 1: never suggested above it.
        assert!(promotion_suggestions(&accepted(10, "high", 1, None), &config).is_empty());
    }
}
