//! `.iced/config.json`: defaults for every missing key, unknown keys ignored (and kept in the file),
//! legacy forms read. Unlike iced-core, a config that cannot be read or holds a known key of the
//! wrong type is refused, naming the key: silently falling back to defaults would quietly change
//! the gate, the autonomy ceiling or the verification rules a team chose.

use crate::store::{self, StoreError};
use crate::unit::kinds::Risk;
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};

pub const CONFIG_LIMIT: u64 = 1024 * 1024;

/// Reasoning effort levels a model reference may end with (`model:high`).
pub const EFFORTS: &[&str] = &["off", "minimal", "low", "medium", "high", "xhigh", "max"];

/// `build.testPaths` by default (SPEC 20.17): where tests live in most languages' layouts.
pub const TEST_PATHS: &[&str] = &[
    "tests/**",
    "test/**",
    "**/__tests__/**",
    "**/*_test.*",
    "**/*.test.*",
    "**/*_spec.*",
    "**/*.spec.*",
    "**/test_*.*",
];

pub const GATES: &[&str] = &["strict", "always", "warn", "off"];

/// The defaults of seed 000, exactly.
pub fn defaults() -> Value {
    json!({
        "iced": "0.1",
        "gate": "strict",
        "autonomy": 1,
        "maxAutonomy": 3,
        "autonomyByRisk": { "low": null, "medium": null, "high": null },
        "questions": { "max": 5 },
        "verify": {
            "commands": [], "parallel": true, "maxAttempts": 3, "independent": true,
            "lenses": "auto", "model": null, "effort": null, "timeoutSec": 900
        },
        "build": {
            "testWriter": false, "testWriterModel": null, "testWriterEffort": null,
            "drivers": null, "testPaths": TEST_PATHS
        },
        "memory": { "product": ".iced/memory/product.md", "knowledge": [".iced/memory/knowledge.md"] },
        "promotion": { "mode": "suggest", "window": 10 }
    })
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("`{path}` is not valid JSON: {detail}")]
    Syntax { path: PathBuf, detail: String },
    #[error("`{path}`: `{key}` {expected}")]
    Invalid {
        path: PathBuf,
        key: String,
        expected: String,
    },
}

/// The merged configuration, with typed accessors for the keys iced reads. `raw` keeps the whole
/// merged object for keys later parts of the loop read.
#[derive(Debug, Clone)]
pub struct Config {
    pub raw: Value,
    pub gate: String,
    pub autonomy: i64,
    pub max_autonomy: i64,
    pub autonomy_by_risk: [Option<i64>; 3],
    pub questions_max: i64,
    pub max_attempts: i64,
    pub promotion_mode: String,
    pub promotion_window: usize,
}

fn deep_merge(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Object(base), Value::Object(over)) => {
            for (key, value) in over {
                match base.get_mut(&key) {
                    Some(slot @ Value::Object(_)) if value.is_object() => deep_merge(slot, value),
                    _ => {
                        base.insert(key, value);
                    }
                }
            }
        }
        (base, over) => *base = over,
    }
}

impl Default for Config {
    fn default() -> Self {
        Config::from_value(Value::Object(Map::new()), Path::new(".iced/config.json"))
            .expect("the defaults are valid")
    }
}

impl Config {
    /// `build.testPaths`: the globs of a test writer's fence (SPEC 20.17).
    pub fn test_paths(&self) -> Vec<String> {
        self.raw
            .pointer("/build/testPaths")
            .and_then(Value::as_array)
            .map(|l| {
                l.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// `build.testWriter` (SPEC 20.17).
    pub fn test_writer(&self) -> bool {
        self.raw
            .pointer("/build/testWriter")
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    pub fn path(root: &Path) -> PathBuf {
        root.join(".iced").join("config.json")
    }

    /// Load the config of the repository at `root`; a missing file means all defaults.
    pub fn load(root: &Path) -> Result<Config, ConfigError> {
        let path = Config::path(root);
        let raw = match read_raw(&path) {
            Ok(raw) => raw,
            Err(ConfigError::Store(e)) if e.is_not_found() => Value::Object(Map::new()),
            Err(e) => return Err(e),
        };
        Config::from_value(raw, &path)
    }

    /// Merge a parsed config file over the defaults and check the keys iced reads.
    pub fn from_value(file: Value, path: &Path) -> Result<Config, ConfigError> {
        let invalid = |key: &str, expected: &str| ConfigError::Invalid {
            path: path.to_owned(),
            key: key.to_owned(),
            expected: expected.to_owned(),
        };
        if !file.is_object() {
            return Err(invalid("(top level)", "must be a JSON object"));
        }
        let mut raw = defaults();
        deep_merge(&mut raw, file);
        let at = |pointer: &str| raw.pointer(pointer).unwrap_or(&Value::Null);
        let level = |pointer: &str, key: &str| -> Result<i64, ConfigError> {
            at(pointer)
                .as_i64()
                .filter(|n| (0..=3).contains(n))
                .ok_or_else(|| invalid(key, "must be an integer 0-3"))
        };
        let gate = at("/gate")
            .as_str()
            .filter(|g| GATES.contains(g))
            .ok_or_else(|| invalid("gate", "must be one of strict, always, warn, off"))?
            .to_owned();
        let autonomy = level("/autonomy", "autonomy")?;
        let max_autonomy = level("/maxAutonomy", "maxAutonomy")?;
        let mut autonomy_by_risk = [None; 3];
        for (slot, risk) in autonomy_by_risk.iter_mut().zip(Risk::ALL) {
            let key = format!("autonomyByRisk.{risk}");
            let value = at(&format!("/autonomyByRisk/{risk}"));
            *slot = match value {
                Value::Null => None,
                _ => Some(level(&format!("/autonomyByRisk/{risk}"), &key)?),
            };
        }
        if !at("/autonomyByRisk").is_object() {
            return Err(invalid("autonomyByRisk", "must be an object"));
        }
        let positive = |pointer: &str, key: &str| -> Result<i64, ConfigError> {
            at(pointer)
                .as_i64()
                .filter(|n| *n >= 1)
                .ok_or_else(|| invalid(key, "must be a positive integer"))
        };
        let questions_max = positive("/questions/max", "questions.max")?;
        let max_attempts = positive("/verify/maxAttempts", "verify.maxAttempts")?;
        positive("/verify/timeoutSec", "verify.timeoutSec")?;
        let promotion_window = positive("/promotion/window", "promotion.window")? as usize;
        let promotion_mode = at("/promotion/mode")
            .as_str()
            .ok_or_else(|| invalid("promotion.mode", "must be a string"))?
            .to_owned();
        for key in ["parallel", "independent"] {
            if !at(&format!("/verify/{key}")).is_boolean() {
                return Err(invalid(&format!("verify.{key}"), "must be true or false"));
            }
        }
        if !at("/verify/commands").is_array() {
            return Err(invalid("verify.commands", "must be a list"));
        }
        let model = at("/verify/model");
        if !(model.is_null() || model.is_string() || model.is_array() || model.is_object()) {
            return Err(invalid(
                "verify.model",
                "must be null, a model, a list of models, or a per-host object",
            ));
        }
        let effort = at("/verify/effort");
        let level_ok = |v: &Value| v.is_null() || v.as_str().is_some_and(|e| EFFORTS.contains(&e));
        if !(level_ok(effort) || effort.as_object().is_some_and(|m| m.values().all(level_ok))) {
            return Err(invalid(
                "verify.effort",
                &format!(
                    "must be null or one of {} (or a per-host object of those)",
                    EFFORTS.join(", ")
                ),
            ));
        }
        if !at("/build").is_object() {
            return Err(invalid("build", "must be an object"));
        }
        if !at("/build/testWriter").is_boolean() {
            return Err(invalid("build.testWriter", "must be true or false"));
        }
        let globs = at("/build/testPaths").as_array();
        if !globs.is_some_and(|l| {
            !l.is_empty() && l.iter().all(|g| g.as_str().is_some_and(|g| !g.is_empty()))
        }) {
            return Err(invalid(
                "build.testPaths",
                "must be a non-empty list of globs (`tests/**`, `**/*_test.*`)",
            ));
        }
        let model = at("/build/testWriterModel");
        if !(model.is_null()
            || model.is_string()
            || model
                .as_array()
                .is_some_and(|l| l.iter().all(Value::is_string)))
        {
            return Err(invalid(
                "build.testWriterModel",
                "must be null, a model or a list of models",
            ));
        }
        if !level_ok(at("/build/testWriterEffort")) {
            return Err(invalid(
                "build.testWriterEffort",
                &format!("must be null or one of {}", EFFORTS.join(", ")),
            ));
        }
        let drivers = at("/build/drivers");
        if !(drivers.is_null() || drivers.as_u64().is_some_and(|n| (1..=8).contains(&n))) {
            return Err(invalid(
                "build.drivers",
                "must be null or a whole number from 1 to 8",
            ));
        }
        if !at("/memory").is_object() {
            return Err(invalid("memory", "must be an object"));
        }
        if !at("/memory/product").is_string() {
            return Err(invalid("memory.product", "must be a path"));
        }
        let memory = at("/memory/knowledge");
        if !(memory.is_array()
            && memory
                .as_array()
                .is_some_and(|l| l.iter().all(Value::is_string)))
        {
            return Err(invalid("memory.knowledge", "must be a list of paths"));
        }
        Ok(Config {
            gate,
            autonomy,
            max_autonomy,
            autonomy_by_risk,
            questions_max,
            max_attempts,
            promotion_mode,
            promotion_window,
            raw,
        })
    }

    /// The autonomy a new unit of this risk starts with.
    pub fn default_autonomy_for(&self, risk: Risk) -> i64 {
        let index = Risk::ALL.iter().position(|r| *r == risk).unwrap_or(0);
        self.autonomy_by_risk[index].unwrap_or(self.autonomy)
    }

    /// Verifier models: `verify.model` as a list. A string may hold several models separated by
    /// commas (commas inside `[...]` are kept). A legacy per-host object gives the host's entry,
    /// then its `default`.
    pub fn verify_models(&self, host: Option<&str>) -> Vec<String> {
        let value = for_host(self.raw.pointer("/verify/model"), host);
        let items: Vec<&str> = match value {
            Value::String(s) => vec![s.as_str()],
            Value::Array(list) => list.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        items
            .into_iter()
            .flat_map(split_models)
            .map(|m| m.trim().to_owned())
            .filter(|m| !m.is_empty())
            .collect()
    }

    /// `build.testWriterModel` as a list (comma-separated strings split as `verify.model`'s).
    pub fn test_writer_models(&self) -> Vec<String> {
        let items: Vec<&str> = match self.raw.pointer("/build/testWriterModel") {
            Some(Value::String(s)) => vec![s.as_str()],
            Some(Value::Array(list)) => list.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        items
            .into_iter()
            .flat_map(split_models)
            .map(|m| m.trim().to_owned())
            .filter(|m| !m.is_empty())
            .collect()
    }

    /// `verify.effort` (per host in legacy configs), when it is a known level.
    pub fn verify_effort(&self, host: Option<&str>) -> Option<&str> {
        for_host(self.raw.pointer("/verify/effort"), host)
            .as_str()
            .filter(|e| EFFORTS.contains(e))
    }
}

/// A setting that is one value, or a legacy object keyed by host: the host's entry, then `default`.
fn for_host<'a>(value: Option<&'a Value>, host: Option<&str>) -> &'a Value {
    static NULL: Value = Value::Null;
    match value {
        Some(Value::Object(map)) => host
            .and_then(|h| map.get(h))
            .filter(|v| !v.is_null())
            .or_else(|| map.get("default"))
            .unwrap_or(&NULL),
        Some(v) => v,
        None => &NULL,
    }
}

/// Split on commas that are not inside `[...]`.
fn split_models(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

/// `provider/model:high` -> (`provider/model`, Some(`high`)); `qwen3:32b` is left whole.
pub fn split_effort(reference: &str) -> (&str, Option<&str>) {
    let s = reference.trim();
    if let Some((model, level)) = s.rsplit_once(':') {
        if !model.is_empty() && EFFORTS.contains(&level) {
            return (model, Some(level));
        }
    }
    (s, None)
}

/// The config file as written, without defaults, for editing in place.
pub fn read_raw(path: &Path) -> Result<Value, ConfigError> {
    let bytes = store::read_limited(path, CONFIG_LIMIT)?;
    serde_json::from_slice(&bytes).map_err(|e| ConfigError::Syntax {
        path: path.to_owned(),
        detail: e.to_string(),
    })
}

/// Set one top-level key in the config file, keeping every other key as written; the file is
/// written only when `check` passes the config it would hold.
pub fn set_key<E>(
    root: &Path,
    key: &str,
    value: Value,
    refuse: impl Fn(ConfigError) -> E,
    check: impl FnOnce(&Config) -> Result<(), E>,
) -> Result<Config, E> {
    let path = Config::path(root);
    let mut raw = match read_raw(&path) {
        Ok(raw) => raw,
        Err(ConfigError::Store(e)) if e.is_not_found() => Value::Object(Map::new()),
        Err(e) => return Err(refuse(e)),
    };
    let Some(object) = raw.as_object_mut() else {
        return Err(refuse(ConfigError::Invalid {
            path,
            key: "(top level)".into(),
            expected: "must be a JSON object".into(),
        }));
    };
    object.insert(key.to_owned(), value);
    let config = Config::from_value(raw.clone(), &path).map_err(&refuse)?;
    check(&config)?;
    let mut text = serde_json::to_string_pretty(&raw).expect("a JSON value serialises");
    text.push('\n');
    store::write_atomic(&path, text.as_bytes(), 0o644).map_err(|e| refuse(e.into()))?;
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(v: Value) -> Result<Config, ConfigError> {
        Config::from_value(v, Path::new("config.json"))
    }

    #[test]
    fn missing_keys_take_defaults_and_unknown_keys_are_ignored() {
        let c = load(json!({"autonomy": 2, "verify": {"maxAttempts": 5}, "targets": ["claude"], "x": {"y": 1}})).unwrap();
        assert_eq!(c.autonomy, 2);
        assert_eq!(c.max_attempts, 5);
        assert_eq!(c.max_autonomy, 3);
        assert_eq!(c.gate, "strict");
        assert_eq!(c.raw["verify"]["timeoutSec"], 900);
        assert_eq!(c.promotion_window, 10);
    }

    #[test]
    fn wrong_types_are_refused_naming_the_key() {
        for (v, key) in [
            (json!({"autonomy": "high"}), "autonomy"),
            (json!({"gate": "loose"}), "gate"),
            (json!({"maxAutonomy": 4}), "maxAutonomy"),
            (json!({"autonomyByRisk": {"low": 9}}), "autonomyByRisk.low"),
            (
                json!({"verify": {"commands": "npm test"}}),
                "verify.commands",
            ),
            (json!([1]), "(top level)"),
            (json!({"verify": {"effort": "turbo"}}), "verify.effort"),
            (
                json!({"verify": {"effort": {"pi": "turbo"}}}),
                "verify.effort",
            ),
            (json!({"build": {"testWriter": "yes"}}), "build.testWriter"),
            (json!({"build": {"testPaths": []}}), "build.testPaths"),
            (json!({"build": {"testPaths": [""]}}), "build.testPaths"),
            (
                json!({"build": {"testWriterEffort": 3}}),
                "build.testWriterEffort",
            ),
            (
                json!({"build": {"testWriterModel": 3}}),
                "build.testWriterModel",
            ),
            (json!({"memory": {"product": 5}}), "memory.product"),
            (json!({"build": {"drivers": 0}}), "build.drivers"),
            (json!({"build": {"drivers": 9}}), "build.drivers"),
            (json!({"build": {"drivers": "2"}}), "build.drivers"),
        ] {
            match load(v) {
                Err(ConfigError::Invalid { key: k, .. }) => assert_eq!(k, key),
                other => panic!("{key}: {other:?}"),
            }
        }
    }

    #[test]
    fn legacy_per_host_model_maps_are_read() {
        let c = load(json!({"verify": {"model": {"pi": ["a/b", "c/d:high"], "default": "e"}, "effort": {"pi": "low"}, "runner": "auto"}})).unwrap();
        assert_eq!(c.verify_models(Some("pi")), ["a/b", "c/d:high"]);
        assert_eq!(c.verify_models(Some("claude")), ["e"]);
        assert_eq!(c.verify_models(None), ["e"]);
        assert_eq!(c.verify_effort(Some("pi")), Some("low"));
        assert_eq!(c.verify_effort(None), None);
        let c = load(json!({"verify": {"model": {"pi": null}}})).unwrap();
        assert!(c.verify_models(Some("pi")).is_empty());
    }

    #[test]
    fn model_strings_split_on_commas_outside_brackets() {
        let c = load(json!({"verify": {"model": "a, b[x,y] ,c"}})).unwrap();
        assert_eq!(c.verify_models(None), ["a", "b[x,y]", "c"]);
        let c = load(json!({"verify": {"model": []}})).unwrap();
        assert!(c.verify_models(None).is_empty());
    }

    #[test]
    fn effort_suffix_is_split_only_for_known_levels() {
        assert_eq!(split_effort("a/b:high"), ("a/b", Some("high")));
        assert_eq!(split_effort("qwen3:32b"), ("qwen3:32b", None));
        assert_eq!(split_effort("plain"), ("plain", None));
    }

    #[test]
    fn autonomy_by_risk_sets_new_unit_defaults() {
        let c = load(json!({"autonomy": 1, "autonomyByRisk": {"low": 3}})).unwrap();
        assert_eq!(c.default_autonomy_for(Risk::Low), 3);
        assert_eq!(c.default_autonomy_for(Risk::Medium), 1);
    }
}
