//! The pace a run keeps (SPEC 20.11): how many lanes and agents at once, the backoff after a rate
//! limit, the work window. Resolved from, lowest first: the built-in defaults, the person's user
//! config, the repository's config, the latest dated ruling in force, the command line's flags.
//! Pure: every source is handed in.

use super::outcome::or_default;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The pace in force. A run records it as it serialises (`pace` on the run, keys as the config
/// spells them) and reads it back the same way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pace {
    pub lanes: u64,
    pub agents: u64,
    pub backoff_sec: f64,
    pub backoff_max_sec: f64,
    /// A work window: this long working, then `pause_minutes` launching nothing. Read back, a
    /// value that is not a number is none, as it always was.
    #[serde(default, deserialize_with = "or_default")]
    pub work_minutes: Option<f64>,
    #[serde(default, deserialize_with = "or_default")]
    pub pause_minutes: Option<f64>,
    /// The ruling in force, if one is.
    #[serde(default, deserialize_with = "or_default")]
    pub ruling: Option<Ruling>,
    /// What one run may spend on agents, in dollars (SPEC 20.12). Written only when set, so a
    /// run without one records the bytes it always did.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "or_default"
    )]
    pub budget_usd: Option<f64>,
    /// What an agent whose cost is unknown is charged (SPEC 20.12): set once a budget is, to the
    /// config's value or [`UNKNOWN_COST_USD`].
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "or_default"
    )]
    pub unknown_cost_usd: Option<f64>,
}

/// What an agent of unknown cost is charged when `pace.unknownCostUsd` is not given: never zero,
/// so an agent that reported nothing is never read as free.
pub const UNKNOWN_COST_USD: f64 = 1.0;

/// The dated ruling a pace comes from (SPEC 20.11), as a run records it and its `paced` and
/// `repaced` events cite it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ruling {
    /// When it took effect: RFC 3339, UTC, to the second.
    pub from: String,
    /// Why, as the ruling gave it: SPEC 20.11 has a sentence, but whatever the config held is
    /// carried as it was (null when it gave none), so a run records what it always recorded.
    #[serde(default)]
    pub why: Value,
}

impl Ruling {
    /// The reason, when the ruling gave it in words.
    pub fn reason(&self) -> Option<&str> {
        self.why.as_str()
    }
}

/// An entry of `pace.rulings` as the config gives it: `from`, `why`, and any of the pace's keys
/// (checked only for the entry that wins).
#[derive(Deserialize)]
struct Entry {
    from: String,
    #[serde(default)]
    why: Value,
    #[serde(flatten)]
    values: Map<String, Value>,
}

impl Default for Pace {
    fn default() -> Pace {
        Pace {
            lanes: 2,
            agents: 2,
            backoff_sec: 60.0,
            backoff_max_sec: 900.0,
            work_minutes: None,
            pause_minutes: None,
            ruling: None,
            budget_usd: None,
            unknown_cost_usd: None,
        }
    }
}

/// Values given on the command line (`--pace-lanes`, `--pace-agents`): they win.
#[derive(Debug, Clone, Default)]
pub struct Flags {
    pub lanes: Option<u64>,
    pub agents: Option<u64>,
    /// `--budget-usd`: the run's budget (SPEC 20.12).
    pub budget_usd: Option<f64>,
}

impl Flags {
    /// No flag was given.
    pub fn is_empty(&self) -> bool {
        self.lanes.is_none() && self.agents.is_none() && self.budget_usd.is_none()
    }
}

/// A key of a pace source that is not valid: (`pace.<key>` or where it came from, what it must be).
pub type Invalid = (String, String);

const KEYS: &[&str] = &[
    "lanes",
    "agents",
    "backoffSec",
    "backoffMaxSec",
    "workMinutes",
    "pauseMinutes",
    // The same two as the seed spells them.
    "work_minutes",
    "pause_minutes",
    "budgetUsd",
    "unknownCostUsd",
];

impl Pace {
    /// Resolve the pace from its sources (each a `pace` object, or null) at `now`.
    pub fn resolve(
        user: &Value,
        repo: &Value,
        flags: &Flags,
        now: DateTime<Utc>,
    ) -> Result<Pace, Invalid> {
        let mut pace = Pace::default();
        pace.apply(user, "user config pace")?;
        pace.apply(repo, "pace")?;
        // Rulings: the latest whose `from` has come wins, over the values it names.
        let mut latest: Option<(DateTime<Utc>, Entry)> = None;
        for (i, r) in repo["rulings"].as_array().into_iter().flatten().enumerate() {
            let (from, entry) = dated(i, r)?;
            if from <= now && latest.as_ref().is_none_or(|(t, _)| from >= *t) {
                latest = Some((from, entry));
            }
        }
        if let Some((from, entry)) = latest {
            let values: Map<String, Value> = entry
                .values
                .into_iter()
                .filter(|(k, _)| KEYS.contains(&k.as_str()))
                .collect();
            pace.apply(&Value::Object(values), "pace.rulings")?;
            pace.ruling = Some(Ruling {
                from: from.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                why: entry.why,
            });
        }
        if let Some(n) = flags.lanes {
            pace.lanes = checked(n, 1, 64, "--pace-lanes")?;
        }
        if let Some(n) = flags.agents {
            pace.agents = checked(n, 1, 64, "--pace-agents")?;
        }
        if let Some(x) = flags.budget_usd {
            if !(x.is_finite() && x > 0.0) {
                return Err((
                    "--budget-usd".to_owned(),
                    "must be a positive number".to_owned(),
                ));
            }
            pace.budget_usd = Some(x);
        }
        // A budget charges unknown costs at a stated estimate, recorded with it (SPEC 20.12).
        if pace.budget_usd.is_some() && pace.unknown_cost_usd.is_none() {
            pace.unknown_cost_usd = Some(UNKNOWN_COST_USD);
        }
        Ok(pace)
    }

    fn apply(&mut self, source: &Value, name: &str) -> Result<(), Invalid> {
        let Some(map) = source.as_object() else {
            return Ok(());
        };
        let key = |k: &str| format!("{name}.{k}");
        let count = |k: &str| -> Result<Option<u64>, Invalid> {
            match map.get(k) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => v
                    .as_u64()
                    .map(Some)
                    .ok_or((key(k), "must be an integer from 1 to 64".to_owned())),
            }
        };
        let positive = |k: &str| -> Result<Option<f64>, Invalid> {
            match map.get(k) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => v
                    .as_f64()
                    .filter(|x| *x > 0.0)
                    .map(Some)
                    .ok_or((key(k), "must be a positive number".to_owned())),
            }
        };
        if let Some(n) = count("lanes")? {
            self.lanes = checked(n, 1, 64, &key("lanes"))?;
        }
        if let Some(n) = count("agents")? {
            self.agents = checked(n, 1, 64, &key("agents"))?;
        }
        if let Some(x) = positive("backoffSec")? {
            self.backoff_sec = x;
        }
        if let Some(x) = positive("backoffMaxSec")? {
            self.backoff_max_sec = x;
        }
        if let Some(x) = positive("workMinutes")?.or(positive("work_minutes")?) {
            self.work_minutes = Some(x);
        }
        if let Some(x) = positive("pauseMinutes")?.or(positive("pause_minutes")?) {
            self.pause_minutes = Some(x);
        }
        if let Some(x) = positive("budgetUsd")? {
            self.budget_usd = Some(x);
        }
        if let Some(x) = positive("unknownCostUsd")? {
            self.unknown_cost_usd = Some(x);
        }
        Ok(())
    }

    /// What a run records of its pace, and what a resume is compared with.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).expect("a pace serialises")
    }

    /// A pace a run recorded; `None` when it is not one.
    pub fn from_value(v: &Value) -> Option<Pace> {
        Pace::deserialize(v).ok()
    }

    /// How `other` differs from this pace, key by key (`lanes 2 -> 3`), for a refusal.
    pub fn differences(&self, other: &Pace) -> Vec<String> {
        let (a, b) = (self.to_value(), other.to_value());
        KEYS.iter()
            .filter(|k| a[**k] != b[**k])
            .map(|k| format!("{k} {} -> {}", a[*k], b[*k]))
            .collect()
    }
}

/// `pace.rulings[i]`, read: when it takes effect, and the entry. Refused, naming where, when it is
/// not an object or its `from` is not an RFC 3339 time.
fn dated(i: usize, r: &Value) -> Result<(DateTime<Utc>, Entry), Invalid> {
    let where_ = format!("pace.rulings[{i}]");
    if !r.is_object() {
        return Err((where_, "must be an object".to_owned()));
    }
    Entry::deserialize(r)
        .ok()
        .and_then(|entry| {
            let from = DateTime::parse_from_rfc3339(&entry.from).ok()?;
            Some((from.with_timezone(&Utc), entry))
        })
        .ok_or((
            format!("{where_}.from"),
            "must be an RFC 3339 time".to_owned(),
        ))
}

fn checked(n: u64, min: u64, max: u64, key: &str) -> Result<u64, Invalid> {
    if (min..=max).contains(&n) {
        Ok(n)
    } else {
        Err((
            key.to_owned(),
            format!("must be an integer from {min} to {max}"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn flags_beat_rulings_beat_the_repo_beats_the_user_beats_the_defaults() {
        let now = at("2026-11-30T12:00:00Z");
        let none = Flags::default();
        assert_eq!(
            Pace::resolve(&Value::Null, &Value::Null, &none, now).unwrap(),
            Pace::default()
        );
        let user = json!({"lanes": 4, "agents": 8, "backoffSec": 5});
        let p = Pace::resolve(&user, &Value::Null, &none, now).unwrap();
        assert_eq!((p.lanes, p.agents, p.backoff_sec), (4, 8, 5.0));
        let repo = json!({"agents": 3, "rulings": [
            {"from": "2026-11-01T00:00:00Z", "agents": 5, "why": "old"},
            {"from": "2026-11-29T00:00:00Z", "agents": 1, "why": "quota halved"},
            {"from": "2026-12-24T00:00:00Z", "agents": 9, "why": "not yet"}
        ]});
        let p = Pace::resolve(&user, &repo, &none, now).unwrap();
        assert_eq!((p.lanes, p.agents), (4, 1), "the latest ruling in force");
        assert_eq!(p.ruling.as_ref().unwrap().why, "quota halved");
        let flags = Flags {
            lanes: Some(1),
            agents: Some(6),
            budget_usd: None,
        };
        let p = Pace::resolve(&user, &repo, &flags, now).unwrap();
        assert_eq!((p.lanes, p.agents), (1, 6));
        // Before any ruling: the repo's own value.
        let p = Pace::resolve(&user, &repo, &none, at("2026-10-01T00:00:00Z")).unwrap();
        assert_eq!((p.agents, p.ruling.is_none()), (3, true));
    }

    /// A budget brings its estimate for unknown costs with it (never zero); the flag wins.
    #[test]
    fn a_budget_states_what_an_unknown_cost_counts() {
        let now = at("2026-11-30T12:00:00Z");
        let none = Flags::default();
        let p = Pace::resolve(&Value::Null, &Value::Null, &none, now).unwrap();
        assert_eq!((p.budget_usd, p.unknown_cost_usd), (None, None));
        let p = Pace::resolve(&Value::Null, &json!({"budgetUsd": 5}), &none, now).unwrap();
        assert_eq!((p.budget_usd, p.unknown_cost_usd), (Some(5.0), Some(1.0)));
        let repo = json!({"budgetUsd": 5, "unknownCostUsd": 0.5});
        let flags = Flags {
            budget_usd: Some(2.0),
            ..Flags::default()
        };
        let p = Pace::resolve(&Value::Null, &repo, &flags, now).unwrap();
        assert_eq!((p.budget_usd, p.unknown_cost_usd), (Some(2.0), Some(0.5)));
        let err = Pace::resolve(&Value::Null, &json!({"unknownCostUsd": 0}), &none, now);
        assert_eq!(err.unwrap_err().0, "pace.unknownCostUsd");
        let flags = Flags {
            budget_usd: Some(0.0),
            ..Flags::default()
        };
        let err = Pace::resolve(&Value::Null, &Value::Null, &flags, now).unwrap_err();
        assert_eq!(err.0, "--budget-usd");
    }

    #[test]
    fn the_work_window_may_be_spelled_as_the_seed_does() {
        let now = at("2026-11-30T12:00:00Z");
        let p = Pace::resolve(
            &Value::Null,
            &json!({"work_minutes": 50, "pause_minutes": 10}),
            &Flags::default(),
            now,
        )
        .unwrap();
        assert_eq!((p.work_minutes, p.pause_minutes), (Some(50.0), Some(10.0)));
    }

    #[test]
    fn bad_values_name_their_key() {
        let now = at("2026-11-30T12:00:00Z");
        let none = Flags::default();
        let err = Pace::resolve(&Value::Null, &json!({"agents": 65}), &none, now).unwrap_err();
        assert_eq!(err.0, "pace.agents");
        let err = Pace::resolve(&json!({"lanes": "x"}), &Value::Null, &none, now).unwrap_err();
        assert_eq!(err.0, "user config pace.lanes");
        let err = Pace::resolve(
            &Value::Null,
            &json!({"rulings": [{"from": "soon"}]}),
            &none,
            now,
        )
        .unwrap_err();
        assert_eq!(err.0, "pace.rulings[0].from");
        let refused = |rulings: Value| {
            Pace::resolve(&Value::Null, &json!({"rulings": rulings}), &none, now).unwrap_err()
        };
        assert_eq!(
            refused(json!([{"from": "2026-01-01T00:00:00Z"}, 5])),
            ("pace.rulings[1]".into(), "must be an object".into())
        );
        assert_eq!(
            refused(json!([{"from": 2026, "why": "x"}])),
            (
                "pace.rulings[0].from".into(),
                "must be an RFC 3339 time".into()
            )
        );
        assert_eq!(
            refused(json!([{"from": "2026-01-01T00:00:00Z", "agents": 0}])),
            (
                "pace.rulings.agents".into(),
                "must be an integer from 1 to 64".into()
            )
        );
    }

    #[test]
    fn a_recorded_pace_reads_back_and_differences_are_named() {
        let p = Pace {
            work_minutes: Some(50.0),
            pause_minutes: Some(10.0),
            ..Pace::default()
        };
        assert_eq!(Pace::from_value(&p.to_value()), Some(p.clone()));
        let q = Pace {
            agents: 4,
            ..p.clone()
        };
        assert_eq!(p.differences(&q), vec!["agents 2 -> 4".to_owned()]);
    }

    /// A run's `pace` is written in the order and shape it always was (the ruling's `why` as the
    /// config gave it, whatever it is), and a state an older iced wrote reads back.
    #[test]
    fn a_recorded_pace_keeps_its_bytes() {
        let repo = json!({"rulings": [{"from": "2026-11-29T01:00:00+01:00", "agents": 1, "why": {"by": "ops"}}]});
        let p = Pace::resolve(
            &Value::Null,
            &repo,
            &Flags::default(),
            at("2026-11-30T12:00:00Z"),
        )
        .unwrap();
        let written = r#"{"lanes":2,"agents":1,"backoffSec":60.0,"backoffMaxSec":900.0,"workMinutes":null,"pauseMinutes":null,"ruling":{"from":"2026-11-29T00:00:00Z","why":{"by":"ops"}}}"#;
        assert_eq!(p.to_value().to_string(), written);
        let read = Pace::from_value(&serde_json::from_str(written).unwrap()).unwrap();
        assert_eq!(read, p);
        assert_eq!(read.ruling.unwrap().reason(), None);
        let bare = json!({"lanes": 3, "agents": 2, "backoffSec": 5, "backoffMaxSec": 60, "workMinutes": "x"});
        let p = Pace::from_value(&bare).unwrap();
        assert_eq!(
            (p.lanes, p.backoff_sec, p.work_minutes, p.ruling),
            (3, 5.0, None, None)
        );
        assert_eq!(Pace::from_value(&json!({"lanes": 2})), None);
    }
}
