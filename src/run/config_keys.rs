//! The keys of `roles` and `runners` and the efforts each harness takes (SPEC 11, 20.8): a
//! misspelt key is refused with the nearest valid name, never read as absent, and an effort a
//! runner cannot pass on is refused, never dropped.

use crate::refusal::Refusal;
use crate::runner::Kind;
use serde_json::Value;

/// The roles a config may name, and the fields of each.
pub const ROLES: &[&str] = &[
    "implementer",
    "validator",
    "memory",
    "planner",
    "planReviewer",
];
pub const IMPLEMENTER_FIELDS: &[&str] = &["runner", "model"];
pub const VALIDATOR_FIELDS: &[&str] = &["runner", "model", "distinct_model"];

/// The nearest of `known` to `word`, when it is close enough to be a slip of the keyboard: at most
/// two edits, and fewer than half the word's letters.
pub fn nearest<'a>(word: &str, known: &[&'a str]) -> Option<&'a str> {
    known
        .iter()
        .map(|k| (distance(word, k), *k))
        .filter(|(d, _)| *d <= 2 && *d * 2 < word.chars().count().max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// Levenshtein distance, by characters.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (diagonal + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(above + 1);
            diagonal = above;
        }
    }
    row[b.len()]
}

/// `<key>` is not one of `known`: the refusal names the nearest, or lists them all.
pub fn unknown(step: &str, key: &str, word: &str, what: &str, known: &[&str]) -> Refusal {
    let hint = match nearest(word, known) {
        Some(near) => format!("did you mean `{near}`?"),
        None => format!("the known ones are {}", known.join(", ")),
    };
    super::settings::invalid(step, key, &format!("is not {what}; {hint}"))
}

/// Every role named, and every field of each, is one iced reads.
pub fn check_roles(roles: &Value, step: &str) -> Result<(), Refusal> {
    for (name, role) in roles.as_object().into_iter().flatten() {
        let fields = match name.as_str() {
            "implementer" | "memory" | "planner" | "planReviewer" => IMPLEMENTER_FIELDS,
            "validator" => VALIDATOR_FIELDS,
            _ => {
                return Err(unknown(
                    step,
                    &format!("roles.{name}"),
                    name,
                    "a role",
                    ROLES,
                ))
            }
        };
        match role {
            Value::Null => {}
            Value::Object(map) => {
                if let Some(k) = map.keys().find(|k| !fields.contains(&k.as_str())) {
                    return Err(unknown(
                        step,
                        &format!("roles.{name}.{k}"),
                        k,
                        &format!("a field of the {name} role"),
                        fields,
                    ));
                }
            }
            _ => {
                return Err(super::settings::invalid(
                    step,
                    &format!("roles.{name}"),
                    "must be an object",
                ))
            }
        }
    }
    Ok(())
}

/// The efforts a runner of this kind can be given (SPEC 20.8), from the pinned harnesses' own
/// options: claude `--effort` (low to max), codex `model_reasoning_effort` (minimal to xhigh), pi
/// `--thinking` (every level). A `command` runner gets it as `{effort}` and `ICED_EFFORT`.
pub fn efforts_of(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::Claude => &["low", "medium", "high", "xhigh", "max"],
        Kind::Codex => &["minimal", "low", "medium", "high", "xhigh"],
        Kind::Pi | Kind::Command => crate::config::EFFORTS,
    }
}

/// `verify.model` (a list rotated over the validators) and `verify.effort`, checked against the
/// validator's runner (SPEC 11): iced passes both to the validators it starts, so a setting no
/// validator can take is refused rather than dropped.
pub fn verify_models(
    config: &crate::config::Config,
    validator: Option<&super::settings::Runner>,
    role_model: &Option<String>,
    step: &str,
) -> Result<(Vec<String>, Option<String>), Refusal> {
    let invalid = super::settings::invalid;
    let host = validator.map(|r| r.kind.as_str());
    let models = config.verify_models(host);
    let effort = config.verify_effort(host).map(str::to_owned);
    if models.is_empty() && effort.is_none() {
        return Ok((models, effort));
    }
    let key = if models.is_empty() {
        "verify.effort"
    } else {
        "verify.model"
    };
    let Some(runner) = validator else {
        return Err(invalid(
            step,
            key,
            "is set, but no validator runner is (`roles.validator.runner`): validators a host runs use the host's own model and effort, which iced cannot choose",
        ));
    };
    if !models.is_empty() && role_model.is_some() {
        return Err(invalid(
            step,
            "verify.model",
            "and `roles.validator.model` both name the validators' model; keep one",
        ));
    }
    efforts_taken(
        runner,
        &models,
        effort.as_deref(),
        ("verify.model", "verify.effort"),
        step,
    )?;
    Ok((models, effort))
}

/// Every effort level the models (a `:level` suffix) and the effort key ask for is one `runner`'s
/// harness can take; else `config-invalid` naming the key (`keys`: the model key, the effort key).
fn efforts_taken(
    runner: &super::settings::Runner,
    models: &[String],
    effort: Option<&str>,
    keys: (&str, &str),
    step: &str,
) -> Result<(), Refusal> {
    let takes = efforts_of(runner.kind);
    let mut levels: Vec<(String, &str)> = models
        .iter()
        .filter_map(|m| {
            crate::config::split_effort(m)
                .1
                .map(|l| (format!("{} (`{m}`)", keys.0), l))
        })
        .collect();
    if let Some(e) = effort {
        levels.push((keys.1.to_owned(), e));
    }
    for (key, level) in levels {
        if !takes.contains(&level) {
            return Err(super::settings::invalid(
                step,
                &key,
                &format!(
                    "asks for effort `{level}`, which a `{}` runner cannot take (it takes {})",
                    runner.kind.as_str(),
                    takes.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// The test writer of `build.testWriter` (SPEC 20.17): its models (rotated over attempts), its
/// effort, and the globs of its fence.
#[derive(Debug, Clone)]
pub struct TestWriter {
    pub models: Vec<String>,
    pub effort: Option<String>,
    pub paths: Vec<String>,
}

impl TestWriter {
    /// The model and effort of attempt `attempt`'s test writer: model `(attempt - 1) mod n`, its
    /// `:level`, else `build.testWriterEffort`.
    pub fn model_for(&self, attempt: u32) -> (Option<String>, Option<String>) {
        let Some(reference) = (!self.models.is_empty())
            .then(|| &self.models[(attempt.max(1) as usize - 1) % self.models.len()])
        else {
            return (None, self.effort.clone());
        };
        let (model, level) = crate::config::split_effort(reference);
        (
            Some(model.to_owned()),
            level.map(str::to_owned).or_else(|| self.effort.clone()),
        )
    }
}

/// `build.testWriter` and its model and effort, checked against the implementer's runner, which
/// starts it: none without that runner (the test writer is process-driven only), and a level the
/// runner's harness cannot take is refused, as for `verify.effort`.
pub fn test_writer(
    config: &crate::config::Config,
    implementer: Option<&super::settings::Runner>,
    step: &str,
) -> Result<Option<TestWriter>, Refusal> {
    let invalid = super::settings::invalid;
    if !config.test_writer() {
        return Ok(None);
    }
    let Some(runner) = implementer else {
        return Err(invalid(
            step,
            "build.testWriter",
            "is true, but no implementer runner is (`roles.implementer.runner`): the loop starts the test writer with it",
        ));
    };
    let models = config.test_writer_models();
    let effort = config
        .raw
        .pointer("/build/testWriterEffort")
        .and_then(serde_json::Value::as_str)
        .map(str::to_owned);
    efforts_taken(
        runner,
        &models,
        effort.as_deref(),
        ("build.testWriterModel", "build.testWriterEffort"),
        step,
    )?;
    Ok(Some(TestWriter {
        models,
        effort,
        paths: config.test_paths(),
    }))
}

/// The place of a validator in the fixed order of validators (lenses, reviewers, the refuter):
/// `verify.model`'s rotation gives validator `i` the model `i mod n`.
pub fn rotation_index(name: &str) -> usize {
    super::validate::LENSES
        .iter()
        .chain(super::validate::REVIEWERS)
        .chain(&["refute"])
        .position(|n| *n == name)
        .unwrap_or(0)
}

/// A `command` runner's `workspace` (SPEC 20.19): `local` (the default) or `remote`; a remote one
/// is given no path of this machine but `{output_file}`.
pub fn workspace(def: &Value, key: &str, argv: &[String], step: &str) -> Result<bool, Refusal> {
    let invalid = super::settings::invalid;
    let remote = match def.get("workspace") {
        None | Some(Value::Null) => false,
        Some(Value::String(w)) if w == "local" => false,
        Some(Value::String(w)) if w == "remote" => true,
        Some(_) => {
            return Err(invalid(
                step,
                &format!("{key}.workspace"),
                "must be `local` or `remote`",
            ))
        }
    };
    if let Some(p) = ["{prompt_file}", "{worktree}"]
        .into_iter()
        .find(|p| remote && argv.iter().any(|a| a.contains(p)))
    {
        return Err(invalid(
            step,
            &format!("{key}.argv"),
            &format!("names `{p}`, a path of this machine, which a remote runner is not given: it gets the brief on its standard input and the lane through `{{remote_url}}` and `{{branch}}`"),
        ));
    }
    Ok(remote)
}

/// Where a remote runner may serve (SPEC 20.19): only with `land.remote`, and only as the
/// implementer (without the test writer) or the validators.
pub fn remote_roles(
    runners: &Value,
    others: &[(&str, &Option<super::settings::Runner>)],
    (implementer, test_writer): (Option<&super::settings::Runner>, bool),
    has_remote: bool,
    step: &str,
) -> Result<(), Refusal> {
    let invalid = super::settings::invalid;
    let remote_named = runners
        .as_object()
        .into_iter()
        .flatten()
        .find(|(_, def)| def.get("workspace").and_then(Value::as_str) == Some("remote"));
    if let (Some((name, _)), false) = (remote_named, has_remote) {
        return Err(invalid(
            step,
            &format!("runners.{name}.workspace"),
            "is `remote`, which needs `land.remote`: the git remote a remote lane's branch goes through (section 20.19)",
        ));
    }
    if let Some((role, _)) = others
        .iter()
        .find(|(_, r)| r.as_ref().is_some_and(|r| r.remote))
    {
        return Err(invalid(
            step,
            &format!("roles.{role}.runner"),
            "names a remote runner; only the implementer and the validators may work remotely: this role works in the checkout or the lane's worktree",
        ));
    }
    if test_writer && implementer.is_some_and(|r| r.remote) {
        return Err(invalid(
            step,
            "build.testWriter",
            "is true, but the implementer's runner is remote: the test writer runs with it in the lane's worktree",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::run::settings::Settings;
    use serde_json::json;
    use std::path::Path;

    fn settings(v: Value) -> Result<Settings, Refusal> {
        let config = Config::from_value(v, Path::new("c.json")).unwrap();
        Settings::from_config(&config, "test")
    }

    /// Issue 11 #8: every key the loop reads is checked whole, and a misspelt key of `roles` or
    /// `runners` is refused with the nearest name.
    #[test]
    fn bad_values_and_misspelt_keys_are_refused_with_the_nearest_name() {
        let runner = json!({"kind": "command", "argv": ["a", "{output_file}"]});
        for (v, reason) in [
            (json!({"verify": {"lenses": 5}}), "`verify.lenses` must be auto or a list"),
            (json!({"verify": {"commands": [1, 2]}}), "`verify.commands[0]` must be a command"),
            (
                json!({"roles": {"implementer": {"modle": "m"}}}),
                "`roles.implementer.modle` is not a field of the implementer role; did you mean `model`?",
            ),
            (
                json!({"roles": {"validater": {"runner": "r"}}}),
                "`roles.validater` is not a role; did you mean `validator`?",
            ),
            (
                json!({"roles": {"tester": {}}}),
                "`roles.tester` is not a role; the known ones are implementer, validator, memory, planner, planReviewer",
            ),
            (
                json!({"runners": {"r": {"kind": "claude", "progam": "claude"}}}),
                "`runners.r.progam` is not a field of a `claude` runner; did you mean `program`?",
            ),
            (
                json!({"runners": {"fake": runner.clone()}, "roles": {"implementer": {"runner": "fakes"}}}),
                "names `fakes`, which `runners` does not define; did you mean `fake`?",
            ),
            (
                json!({"runners": {"unused": {"kind": "command"}}}),
                "`runners.unused.argv` must be a non-empty list",
            ),
        ] {
            let e = settings(v.clone()).unwrap_err();
            assert_eq!(e.code, "config-invalid");
            assert!(e.reason.contains(reason), "{v}: {}", e.reason);
        }
    }

    /// Issue 11 #9: `verify.model` rotates over the validators and `verify.effort` reaches them,
    /// or the config is refused; never read and dropped.
    #[test]
    fn verify_model_rotates_and_effort_is_passed_or_refused() {
        let with = |verify: Value, kind: &str| {
            settings(json!({
                "verify": verify,
                "runners": {"v": {"kind": kind}},
                "roles": {"validator": {"runner": "v"}}
            }))
        };
        let s = with(json!({"model": ["a", "b:low"], "effort": "high"}), "pi").unwrap();
        let m = |n: &str| s.validator_model_for(n);
        assert_eq!(m("expectations"), (Some("a".into()), Some("high".into())));
        assert_eq!(m("failures"), (Some("b".into()), Some("low".into())));
        assert_eq!(m("rules"), (Some("a".into()), Some("high".into())));
        let e = with(json!({"effort": "off"}), "claude").unwrap_err();
        assert!(
            e.reason.contains(
                "`verify.effort` asks for effort `off`, which a `claude` runner cannot take"
            ),
            "{}",
            e.reason
        );
        let e = with(json!({"model": "m:max"}), "codex").unwrap_err();
        assert!(
            e.reason
                .contains("`verify.model (`m:max`)` asks for effort `max`"),
            "{}",
            e.reason
        );
        assert!(with(json!({"effort": "max"}), "claude").is_ok());
        let e = settings(json!({"verify": {"model": "m"}})).unwrap_err();
        assert!(e.reason.contains("no validator runner is"), "{}", e.reason);
        let e = settings(json!({
            "verify": {"model": "m"},
            "runners": {"v": {"kind": "pi"}},
            "roles": {"validator": {"runner": "v", "model": "n"}}
        }))
        .unwrap_err();
        assert!(e.reason.contains("both name"), "{}", e.reason);
        let s = settings(json!({})).unwrap();
        assert_eq!(s.validator_model_for("full"), (None, None));
    }

    #[test]
    fn the_nearest_name_is_a_slip_not_a_guess() {
        assert_eq!(nearest("modle", IMPLEMENTER_FIELDS), Some("model"));
        assert_eq!(nearest("validater", ROLES), Some("validator"));
        assert_eq!(nearest("runer", VALIDATOR_FIELDS), Some("runner"));
        assert_eq!(nearest("timeout", &["timeoutSec", "kind"]), None);
        assert_eq!(nearest("xy", &["kind"]), None);
    }
}
