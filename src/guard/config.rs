//! The config's integrity keys (SPEC 24.1): the settings that decide how far an agent is trusted,
//! what iced runs, what passes and what agents are told. An agent may tune the rest of
//! `.iced/config.json`; these only a person changes. Compared by value, never by text.

use serde_json::Value;

/// Dotted paths into `.iced/config.json`. Seed 000's list first, then what iced adds.
pub const INTEGRITY_KEYS: &[&str] = &[
    "gate",
    "autonomy",
    "maxAutonomy",
    "autonomyByRisk",
    "verify.model",
    "verify.independent",
    "verify.lenses",
    "verify.maxAttempts",
    "build.testWriterModel",
    "runners",
    "roles",
    "land",
    "pace",
    "hooks",
    "run",
    "memory",
    "verify.commands",
    "verify.refute",
    "verify.reviewers",
    "build.worktreeDir",
];

/// What a config write does to the integrity keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigChange {
    /// The result is a JSON object and every integrity key keeps its value.
    Keeps,
    /// These keys change (in [`INTEGRITY_KEYS`] order).
    Changes(Vec<&'static str>),
    /// The result is not a JSON object.
    NotAnObject,
}

/// The value at a dotted path; `None` when any step is missing or not an object.
fn at<'a>(value: &'a Value, dotted: &str) -> Option<&'a Value> {
    dotted
        .split('.')
        .try_fold(value, |v, key| v.as_object()?.get(key))
}

/// Compare the integrity keys of the config before (its text, or none for a new file) and after.
/// A before that does not parse counts as an empty object, so every key the after sets is a
/// change. Objects compare key by key whatever their order (`serde_json`'s map equality), and a
/// key absent on both sides is equal.
pub fn compare(before: Option<&str>, after: &str) -> ConfigChange {
    let Ok(after) = serde_json::from_str::<Value>(after) else {
        return ConfigChange::NotAnObject;
    };
    if !after.is_object() {
        return ConfigChange::NotAnObject;
    }
    let before = before
        .and_then(|t| serde_json::from_str::<Value>(t).ok())
        .filter(Value::is_object)
        .unwrap_or_else(|| Value::Object(Default::default()));
    let changed: Vec<&'static str> = INTEGRITY_KEYS
        .iter()
        .copied()
        .filter(|k| at(&before, k) != at(&after, k))
        .collect();
    if changed.is_empty() {
        ConfigChange::Keeps
    } else {
        ConfigChange::Changes(changed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operational_keys_are_free_and_integrity_keys_compare_by_value() {
        let before = r#"{"gate": "strict", "verify": {"timeoutSec": 900, "lenses": "auto"}, "runners": {"a": {"kind": "claude", "program": "x"}}}"#;
        let tuned = r#"{"runners": {"a": {"program": "x", "kind": "claude"}}, "verify": {"lenses": "auto", "timeoutSec": 60}, "gate": "strict", "questions": {"max": 2}}"#;
        assert_eq!(compare(Some(before), tuned), ConfigChange::Keeps);
        let loosened = r#"{"gate": "off", "verify": {"timeoutSec": 900, "lenses": "auto", "independent": false}, "runners": {"a": {"kind": "claude", "program": "y"}}}"#;
        assert_eq!(
            compare(Some(before), loosened),
            ConfigChange::Changes(vec!["gate", "verify.independent", "runners"])
        );
    }

    #[test]
    fn removing_adding_and_breaking_are_changes() {
        let before = r#"{"autonomy": 1, "verify": {"commands": ["make test"]}}"#;
        assert_eq!(
            compare(Some(before), r#"{"verify": {}}"#),
            ConfigChange::Changes(vec!["autonomy", "verify.commands"])
        );
        assert_eq!(
            compare(None, r#"{"maxAutonomy": 3}"#),
            ConfigChange::Changes(vec!["maxAutonomy"])
        );
        assert_eq!(
            compare(Some("not json"), r#"{"pace": {}}"#),
            ConfigChange::Changes(vec!["pace"])
        );
        assert_eq!(compare(Some(before), "[1]"), ConfigChange::NotAnObject);
        assert_eq!(compare(Some(before), "{"), ConfigChange::NotAnObject);
        // A number is a number: 1 and 1.0 are different values to JSON readers that type them.
        assert_eq!(
            compare(Some(r#"{"autonomy": 1}"#), r#"{"autonomy": 1.0}"#),
            ConfigChange::Changes(vec!["autonomy"])
        );
        // `verify` that is not an object holds no `verify.*` keys.
        assert_eq!(
            compare(Some(r#"{"verify": 3}"#), r#"{"verify": "x"}"#),
            ConfigChange::Keeps
        );
    }
}
