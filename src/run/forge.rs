//! The forge commands iced ships for `land.pr` (SPEC 23.2): GitHub's CLI, `gh`, for each command a
//! config does not name, so that a landing by pull request is crash-safe as shipped: `find` asks
//! gh for the open pull request of the lane branch before a second `gh pr create` (which gh
//! refuses) could run, and `armed` asks whether the pull request is armed before arming it again.
//!
//! A recovery command comes with the command it recovers: `find` is gh's only when `open` is,
//! `armed` only when `arm` is, so a config that opens pull requests on another forge never has gh
//! asked about them. Pure: it names argv and runs nothing.

use serde_json::{Map, Value};

fn argv(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| (*w).to_owned()).collect()
}

/// `gh pr create`: prints the new pull request's URL.
pub fn open() -> Vec<String> {
    argv(&[
        "gh",
        "pr",
        "create",
        "--head",
        "{branch}",
        "--base",
        "{target}",
        "--title",
        "{title}",
        "--body-file",
        "{body_file}",
    ])
}

/// `gh pr merge --auto`, merging as `land.strategy` says (`squash`, or `merge`: GitHub cannot
/// fast-forward).
pub fn arm(strategy: &str) -> Vec<String> {
    let how = if strategy == "squash" {
        "--squash"
    } else {
        "--merge"
    };
    argv(&["gh", "pr", "merge", "{pr_url}", "--auto", how])
}

/// The URL of the open pull request of the lane branch, or nothing.
pub fn find() -> Vec<String> {
    argv(&[
        "gh",
        "pr",
        "list",
        "--head",
        "{branch}",
        "--state",
        "open",
        "--json",
        "url",
        "--jq",
        ".[0].url // empty",
    ])
}

/// `true` when the pull request is armed (auto-merge requested) already.
pub fn armed() -> Vec<String> {
    argv(&[
        "gh",
        "pr",
        "view",
        "{pr_url}",
        "--json",
        "autoMergeRequest",
        "--jq",
        ".autoMergeRequest != null",
    ])
}

/// The shipped command for `key` of `land.pr` when the config's `pr` object lacks it, by the rule
/// above; None when the config has it (`null` included) or a command it goes with.
pub fn shipped(pr: &Value, key: &str, strategy: &str) -> Option<Vec<String>> {
    let has = |k: &str| pr.get(k).is_some();
    if has(key) {
        return None;
    }
    match key {
        "open" => Some(open()),
        "arm" => Some(arm(strategy)),
        "find" => (!has("open")).then(find),
        "armed" => (!has("arm")).then(armed),
        _ => None,
    }
}

/// `land.pr` as it is in force under `land.mode: pr`: the config's keys, and the shipped
/// commands for those it does not have (what trust covers, SPEC 24.10). None under another mode.
pub fn in_force(land: &Value) -> Option<Value> {
    if land.get("mode").and_then(Value::as_str) != Some("pr") {
        return None;
    }
    let pr = land.get("pr").cloned().unwrap_or(Value::Null);
    let strategy = land
        .get("strategy")
        .and_then(Value::as_str)
        .unwrap_or("merge");
    let mut out = pr.as_object().cloned().unwrap_or_else(Map::new);
    for key in ["open", "arm", "find", "armed"] {
        if let Some(argv) = shipped(&pr, key, strategy) {
            out.insert(key.to_owned(), Value::from(argv));
        }
    }
    Some(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_recovery_command_is_shipped_only_with_the_command_it_recovers() {
        let none = json!(null);
        for key in ["open", "arm", "find", "armed"] {
            assert!(shipped(&none, key, "merge").is_some(), "{key}");
        }
        let other_forge = json!({"open": ["glab", "mr", "create"], "arm": ["glab", "mr", "merge"]});
        for key in ["open", "arm", "find", "armed"] {
            assert_eq!(shipped(&other_forge, key, "merge"), None, "{key}");
        }
        // Only the arm set: gh opens and finds; nothing asks gh whether it armed.
        let own_arm = json!({"arm": ["my-arm"]});
        assert_eq!(shipped(&own_arm, "find", "merge"), Some(find()));
        assert_eq!(shipped(&own_arm, "armed", "merge"), None);
        // `null` asks nothing.
        let no_find = json!({"find": null});
        assert_eq!(shipped(&no_find, "find", "merge"), None);
        assert_eq!(shipped(&no_find, "open", "merge"), Some(open()));
        assert_eq!(arm("squash").last().unwrap(), "--squash");
        assert_eq!(arm("ff").last().unwrap(), "--merge");
    }

    #[test]
    fn in_force_is_the_config_over_the_shipped_under_pr_only() {
        assert_eq!(
            in_force(&json!({"mode": "merge", "pr": {"open": ["x"]}})),
            None
        );
        assert_eq!(in_force(&json!(null)), None);
        let shipped_all = in_force(&json!({"mode": "pr", "strategy": "squash"})).unwrap();
        assert_eq!(shipped_all["open"], json!(open()));
        assert_eq!(shipped_all["arm"], json!(arm("squash")));
        assert_eq!(shipped_all["find"], json!(find()));
        assert_eq!(shipped_all["armed"], json!(armed()));
        let own = json!({"open": ["o"], "arm": ["a"], "find": ["f"]});
        assert_eq!(
            in_force(&json!({"mode": "pr", "pr": own.clone()})),
            Some(own)
        );
    }
}
