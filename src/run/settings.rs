//! The loop's part of `.iced/config.json`: runners, roles, the definition of done, and the knobs of
//! the loop itself. Read from the merged config and checked once, so the loop never meets a
//! half-valid setting halfway through a run.

use crate::config::Config;
use crate::refusal::Refusal;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// One definition-of-done command: argv, never a shell string.
#[derive(Debug, Clone, PartialEq)]
pub struct DodCommand {
    pub argv: Vec<String>,
    pub cwd: Option<String>,
    pub timeout: Duration,
    pub expected_exit_codes: Vec<i32>,
}

impl DodCommand {
    /// How a person reads it (shell-quoted; for reports only, never executed).
    pub fn display(&self) -> String {
        shlex::try_join(self.argv.iter().map(String::as_str))
            .unwrap_or_else(|_| self.argv.join(" "))
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Runner {
    pub name: String,
    pub kind: crate::runner::Kind,
    /// A `command` runner's template; a harness runner's program alone (SPEC 20.8).
    pub argv: Vec<String>,
    pub timeout: Duration,
    /// Extra variables for this runner's child, `${VAR}` not yet replaced.
    pub env: std::collections::BTreeMap<String, String>,
    /// A harness runner's extra arguments.
    pub args: Vec<String>,
    pub max_turns: Option<u32>,
    /// Whether the harness keeps (and the loop copies) the session's transcript.
    pub transcripts: bool,
    /// `workspace: remote`: its agent works elsewhere, through the remote (SPEC 20.19).
    pub remote: bool,
}

/// `land`: how a delivered lane reaches its target (SPEC 23.2).
#[derive(Debug, Clone, PartialEq)]
pub struct Landing {
    pub mode: LandMode,
    /// The branch landed into; `None` is the branch the run started from.
    pub target: Option<String>,
    pub strategy: Strategy,
    pub remote: Option<String>,
    /// `land.claimLeaseSec`: how old another machine's claim on the remote must be before it may
    /// be taken over (SPEC 24.9.1).
    pub claim_lease: Duration,
    pub pr_open: Vec<String>,
    pub pr_arm: Vec<String>,
    pub pr_find: Option<Vec<String>>,
    /// `land.pr.armed`: argv printing `true` when the pull request is armed already (SPEC 23.2).
    pub pr_armed: Option<Vec<String>>,
    pub arm: Arm,
}

/// `land.mode` (SPEC 23.2): where a delivered lane's work goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LandMode {
    /// It waits on its lane branch for a person.
    None,
    /// Merged into the target by the loop (pushed, with a remote).
    Merge,
    /// A pull request through the forge's CLI.
    Pr,
}

/// Tests name a mode by its word.
#[cfg(test)]
impl From<&str> for LandMode {
    fn from(word: &str) -> LandMode {
        match word {
            "none" => LandMode::None,
            "merge" => LandMode::Merge,
            "pr" => LandMode::Pr,
            _ => panic!("no land.mode `{word}`"),
        }
    }
}

impl std::fmt::Display for LandMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LandMode::None => "none",
            LandMode::Merge => "merge",
            LandMode::Pr => "pr",
        })
    }
}

/// `land.strategy` (SPEC 23.2): the commit a merge landing moves its target to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    /// The lane's head itself (it contains the target).
    Ff,
    /// A merge commit of the target and the lane's head.
    Merge,
    /// One commit on the target with the lane's tree.
    Squash,
}

impl std::fmt::Display for Strategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Strategy::Ff => "ff",
            Strategy::Merge => "merge",
            Strategy::Squash => "squash",
        })
    }
}

/// `land.arm` (SPEC 23.2): who arms a pull request once it is open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Arm {
    /// The loop, through `land.pr.arm`.
    Auto,
    /// A person; the loop leaves the pull request open.
    Human,
}

impl std::fmt::Display for Arm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Arm::Auto => "auto",
            Arm::Human => "human",
        })
    }
}

#[derive(Debug, Clone)]
pub struct Settings {
    /// Each entry is a sequence: its commands run in order and stop at the first failure.
    pub dod: Vec<Vec<DodCommand>>,
    pub dod_parallel: bool,
    pub max_attempts: u32,
    /// `questions.max`: how many questions an implementer may ask at once (SPEC 20.7).
    pub questions_max: i64,
    pub independent: bool,
    pub implementer: Option<Runner>,
    pub implementer_model: Option<String>,
    /// The `memory` role (SPEC 20.15): its runner, else the implementer's, and its model.
    pub memory: Option<Runner>,
    pub memory_model: Option<String>,
    /// `None` is `auto` (picked per unit); otherwise the lenses named.
    pub lenses: Option<Vec<String>>,
    pub reviewers: Vec<String>,
    pub refute: bool,
    pub validator: Option<Runner>,
    pub validator_model: Option<String>,
    /// `verify.model` as a list, rotated over the validators (SPEC 11); empty when not set.
    pub verify_models: Vec<String>,
    /// `verify.effort`: the level of a validator whose model has no `:level`.
    pub verify_effort: Option<String>,
    pub distinct_model: bool,
    /// The planner and the plan reviewers of `build --auto-plan` (SPEC 20.16), and how many
    /// planning rounds a run may take (`plan.rounds`).
    pub planner: Option<Runner>,
    pub planner_model: Option<String>,
    pub plan_reviewer: Option<Runner>,
    pub plan_reviewer_model: Option<String>,
    pub plan_rounds: u32,
    /// `build.testWriter` (SPEC 20.17): the test writer each attempt gets, when on.
    pub test_writer: Option<super::config_keys::TestWriter>,
    /// Times a lane's validators may change their tree before the lane is blocked.
    pub max_mutations: u32,
    pub land: Landing,
    /// The pace a new run records (SPEC 20.11): lanes and agents at once, backoff, work window.
    pub pace: super::pace::Pace,
    pub worktree_dir: Option<PathBuf>,
    /// `build.drivers` (SPEC 20.1), checked when the config was read: null, or 1 to 8.
    pub drivers: Option<usize>,
    pub lock_wait: Duration,
    pub kill_grace: Duration,
    pub max_crash_retries: u32,
    pub knowledge: Vec<String>,
    /// `memory.product`: what the product is and must do, for every brief (SPEC 20.4).
    pub product: Option<String>,
}

pub(super) fn invalid(step: &str, key: &str, expected: &str) -> Refusal {
    Refusal::new(
        step,
        "config-invalid",
        format!("`.iced/config.json`: `{key}` {expected}"),
        "fix `.iced/config.json` (`iced schema config` shows the runner and role settings)",
    )
}

fn strings(value: &Value) -> Option<Vec<String>> {
    value
        .as_array()?
        .iter()
        .map(|v| v.as_str().map(str::to_owned))
        .collect()
}

/// `land.claimLeaseSec`'s default: six hours (SPEC 24.9.1).
pub const CLAIM_LEASE_SEC: u64 = 6 * 60 * 60;

fn seconds(value: Option<&Value>, default: u64) -> Option<Duration> {
    match value {
        None | Some(Value::Null) => Some(Duration::from_secs(default)),
        Some(v) => v.as_f64().filter(|s| *s > 0.0).map(Duration::from_secs_f64),
    }
}

fn dod_command(
    value: &Value,
    timeout: Duration,
    step: &str,
    key: &str,
) -> Result<DodCommand, Refusal> {
    match value {
        Value::String(s) => {
            let argv = shlex::split(s).filter(|a| !a.is_empty()).ok_or_else(|| {
                invalid(
                    step,
                    key,
                    "is not a command line iced can split into words (check its quotes)",
                )
            })?;
            Ok(DodCommand {
                argv,
                cwd: None,
                timeout,
                expected_exit_codes: vec![0],
            })
        }
        Value::Object(map) => {
            for k in map.keys() {
                if !matches!(
                    k.as_str(),
                    "argv" | "cwd" | "timeoutSec" | "expected_exit_codes"
                ) {
                    return Err(invalid(
                        step,
                        &format!("{key}.{k}"),
                        "is not a command field (argv, cwd, timeoutSec, expected_exit_codes)",
                    ));
                }
            }
            let argv = map
                .get("argv")
                .and_then(strings)
                .filter(|a| !a.is_empty())
                .ok_or_else(|| {
                    invalid(
                        step,
                        &format!("{key}.argv"),
                        "must be a non-empty list of strings",
                    )
                })?;
            let cwd = match map.get("cwd") {
                None | Some(Value::Null) => None,
                Some(Value::String(c))
                    if !Path::new(c).is_absolute() && !c.split('/').any(|p| p == "..") =>
                {
                    Some(c.clone())
                }
                Some(_) => {
                    return Err(invalid(
                        step,
                        &format!("{key}.cwd"),
                        "must be a path inside the worktree, relative, without `..`",
                    ))
                }
            };
            let timeout = seconds(map.get("timeoutSec"), timeout.as_secs()).ok_or_else(|| {
                invalid(
                    step,
                    &format!("{key}.timeoutSec"),
                    "must be a positive number",
                )
            })?;
            let expected_exit_codes = match map.get("expected_exit_codes") {
                None | Some(Value::Null) => vec![0],
                Some(v) => v
                    .as_array()
                    .and_then(|l| {
                        l.iter()
                            .map(|c| c.as_i64().and_then(|c| i32::try_from(c).ok()))
                            .collect::<Option<Vec<_>>>()
                    })
                    .filter(|l| !l.is_empty())
                    .ok_or_else(|| {
                        invalid(
                            step,
                            &format!("{key}.expected_exit_codes"),
                            "must be a non-empty list of integers",
                        )
                    })?,
            };
            Ok(DodCommand {
                argv,
                cwd,
                timeout,
                expected_exit_codes,
            })
        }
        _ => Err(invalid(
            step,
            key,
            "must be a command string, a list (a sequence) or an object with argv",
        )),
    }
}

impl Settings {
    pub fn from_config(config: &Config, step: &str) -> Result<Settings, Refusal> {
        let raw = &config.raw;
        let at = |p: &str| raw.pointer(p);
        let timeout = seconds(at("/verify/timeoutSec"), 900).unwrap_or(Duration::from_secs(900));
        let mut dod = Vec::new();
        for (i, entry) in at("/verify/commands")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let key = format!("verify.commands[{i}]");
            let sequence = match entry {
                Value::Array(list) if !list.is_empty() => list
                    .iter()
                    .enumerate()
                    .map(|(j, c)| dod_command(c, timeout, step, &format!("{key}[{j}]")))
                    .collect::<Result<Vec<_>, _>>()?,
                Value::Array(_) => return Err(invalid(step, &key, "is an empty sequence")),
                single => vec![dod_command(single, timeout, step, &key)?],
            };
            dod.push(sequence);
        }
        let runners = at("/runners").cloned().unwrap_or(Value::Null);
        if !(runners.is_null() || runners.is_object()) {
            return Err(invalid(
                step,
                "runners",
                "must be an object of named runners",
            ));
        }
        let roles = at("/roles").cloned().unwrap_or(Value::Null);
        if !(roles.is_null() || roles.is_object()) {
            return Err(invalid(step, "roles", "must be an object"));
        }
        super::config_keys::check_roles(&roles, step)?;
        // Every runner is checked, whether a role names it or not.
        for (name, def) in runners.as_object().into_iter().flatten() {
            runner(name, def, timeout, step)?;
        }
        let (implementer, implementer_model) =
            role(&runners, &roles, "implementer", timeout, step)?;
        let (validator, validator_model) = role(&runners, &roles, "validator", timeout, step)?;
        let (memory, memory_model) = role(&runners, &roles, "memory", timeout, step)?;
        let (planner, planner_model) = role(&runners, &roles, "planner", timeout, step)?;
        let (plan_reviewer, plan_reviewer_model) =
            role(&runners, &roles, "planReviewer", timeout, step)?;
        // The reviewers default to the validators' runner, then to the planner's (SPEC 20.16).
        let (plan_reviewer, plan_reviewer_model) = match plan_reviewer {
            Some(r) => (Some(r), plan_reviewer_model),
            None if validator.as_ref().is_some_and(|v| !v.remote) => {
                (validator.clone(), validator_model.clone())
            }
            None => (planner.clone(), planner_model.clone()),
        };
        let plan_rounds = match at("/plan/rounds") {
            None | Some(Value::Null) => 2,
            Some(v) => match v.as_u64().filter(|n| (1..=5).contains(n)) {
                Some(n) => n as u32,
                None => return Err(invalid(step, "plan.rounds", "must be an integer 1 to 5")),
            },
        };
        let distinct_model = match roles.pointer("/validator/distinct_model") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                return Err(invalid(
                    step,
                    "roles.validator.distinct_model",
                    "must be true or false",
                ))
            }
        };
        let (verify_models, verify_effort) =
            super::config_keys::verify_models(config, validator.as_ref(), &validator_model, step)?;
        let test_writer = super::config_keys::test_writer(config, implementer.as_ref(), step)?;
        let lenses = match at("/verify/lenses") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if s == "auto" => None,
            Some(v) => {
                let list = match v {
                    Value::String(s) => vec![s.clone()],
                    v => strings(v).ok_or_else(|| {
                        invalid(
                            step,
                            "verify.lenses",
                            "must be auto or a list of lens names",
                        )
                    })?,
                };
                Some(known(list, super::validate::LENSES, "verify.lenses", step)?)
            }
        };
        let reviewers = match at("/verify/reviewers") {
            None | Some(Value::Null) => Vec::new(),
            Some(v) => {
                let list = strings(v).ok_or_else(|| {
                    invalid(step, "verify.reviewers", "must be a list of reviewer names")
                })?;
                known(list, super::validate::REVIEWERS, "verify.reviewers", step)?
            }
        };
        let refute = match at("/verify/refute") {
            None | Some(Value::Null) => true,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(invalid(step, "verify.refute", "must be true or false")),
        };
        let land = landing(at("/land").unwrap_or(&Value::Null), step)?;
        super::config_keys::remote_roles(
            &runners,
            &[
                ("memory", &memory),
                ("planner", &planner),
                ("planReviewer", &plan_reviewer),
            ],
            (implementer.as_ref(), test_writer.is_some()),
            land.remote.is_some(),
            step,
        )?;
        let worktree_dir = match at("/build/worktreeDir") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(PathBuf::from(s)),
            Some(_) => return Err(invalid(step, "build.worktreeDir", "must be a path")),
        };
        let lock_wait = seconds(at("/run/lockWaitSec"), 10)
            .ok_or_else(|| invalid(step, "run.lockWaitSec", "must be a positive number"))?;
        let kill_grace = seconds(at("/run/killGraceSec"), 5)
            .ok_or_else(|| invalid(step, "run.killGraceSec", "must be a positive number"))?;
        let max_crash_retries = match at("/run/maxCrashRetries") {
            None | Some(Value::Null) => 2,
            Some(v) => v
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| {
                    invalid(
                        step,
                        "run.maxCrashRetries",
                        "must be a non-negative integer",
                    )
                })?,
        };
        Ok(Settings {
            dod,
            dod_parallel: at("/verify/parallel")
                .and_then(Value::as_bool)
                .unwrap_or(true),
            max_attempts: u32::try_from(config.max_attempts).unwrap_or(3),
            questions_max: config.questions_max,
            independent: at("/verify/independent")
                .and_then(Value::as_bool)
                .unwrap_or(true),
            memory: memory.or_else(|| implementer.clone().filter(|r| !r.remote)),
            memory_model,
            implementer,
            implementer_model,
            lenses,
            reviewers,
            refute,
            validator,
            validator_model,
            verify_models,
            verify_effort,
            distinct_model,
            planner,
            planner_model,
            plan_reviewer,
            plan_reviewer_model,
            plan_rounds,
            test_writer,
            max_mutations: 2,
            land,
            pace: pace_with(config, &super::pace::Flags::default(), step)?,
            worktree_dir,
            drivers: at("/build/drivers")
                .and_then(Value::as_u64)
                .map(|n| n as usize),
            lock_wait,
            kill_grace,
            max_crash_retries,
            knowledge: at("/memory/knowledge")
                .and_then(strings)
                .unwrap_or_default(),
            product: at("/memory/product")
                .and_then(Value::as_str)
                .filter(|p| !p.trim().is_empty())
                .map(str::to_owned),
        })
    }
}

/// The one check of `.iced/config.json` (SPEC 11): every verb that reads the config loads it here,
/// so a key the loop reads is refused by `iced list` as it is by `iced build`.
pub fn load_config(repo: &crate::repo::Repo, step: &str) -> Result<Config, Refusal> {
    let config = repo.config_file(step)?;
    check(&config, step)?;
    Ok(config)
}

/// [`load_config`]'s check of a config already read (the file `autonomy <n>` is about to write).
pub fn check(config: &Config, step: &str) -> Result<(), Refusal> {
    Settings::from_config(config, step).map(drop)
}

impl Settings {
    /// Whether an implementer or a validator runs remote (SPEC 20.19): only then may a lane have
    /// a remote branch of the loop's to look after.
    pub fn has_remote_runner(&self) -> bool {
        [&self.implementer, &self.validator]
            .into_iter()
            .any(|r| r.as_ref().is_some_and(|r| r.remote))
    }

    /// The model and effort validator `name` starts with (SPEC 11): `verify.model` rotated over
    /// the validators in their fixed order, else `roles.validator.model`; the effort is the
    /// model's `:level`, else `verify.effort`.
    pub fn validator_model_for(&self, name: &str) -> (Option<String>, Option<String>) {
        let picked = match self.verify_models.len() {
            0 => self.validator_model.clone(),
            n => Some(self.verify_models[super::config_keys::rotation_index(name) % n].clone()),
        };
        let Some(reference) = picked else {
            return (None, self.verify_effort.clone());
        };
        let (model, level) = crate::config::split_effort(&reference);
        (
            Some(model.to_owned()),
            level
                .map(str::to_owned)
                .or_else(|| self.verify_effort.clone()),
        )
    }
}

fn landing(value: &Value, step: &str) -> Result<Landing, Refusal> {
    if !(value.is_null() || value.is_object()) {
        return Err(invalid(step, "land", "must be an object"));
    }
    let text =
        |key: &str, default: Option<&str>, allowed: &[&str]| -> Result<Option<String>, Refusal> {
            match value.get(key) {
                None | Some(Value::Null) => Ok(default.map(str::to_owned)),
                Some(Value::String(s)) if allowed.is_empty() || allowed.contains(&s.as_str()) => {
                    Ok(Some(s.clone()))
                }
                Some(_) if allowed.is_empty() => {
                    Err(invalid(step, &format!("land.{key}"), "must be a string"))
                }
                Some(_) => Err(invalid(
                    step,
                    &format!("land.{key}"),
                    &format!("must be one of {}", allowed.join(", ")),
                )),
            }
        };
    let pr = value.get("pr").cloned().unwrap_or(Value::Null);
    let strategy = value.get("strategy").and_then(Value::as_str).unwrap_or("");
    let argv = |key: &str| -> Result<Option<Vec<String>>, Refusal> {
        match value.pointer(&format!("/pr/{key}")) {
            // Under `pr`, a command the config does not have is the one iced ships (SPEC 23.2).
            None if value.get("mode").and_then(Value::as_str) == Some("pr") => {
                Ok(super::forge::shipped(&pr, key, strategy))
            }
            None | Some(Value::Null) => Ok(None),
            Some(v) => strings(v)
                .filter(|l| !l.is_empty())
                .map(Some)
                .ok_or_else(|| {
                    invalid(
                        step,
                        &format!("land.pr.{key}"),
                        "must be a non-empty list of strings (argv, never a shell)",
                    )
                }),
        }
    };
    let mode = match text("mode", Some("none"), &["none", "merge", "pr"])?.as_deref() {
        Some("merge") => LandMode::Merge,
        Some("pr") => LandMode::Pr,
        _ => LandMode::None,
    };
    // In the order the keys have always been checked: the first bad one is the one refused.
    let land = Landing {
        target: text("target", None, &[])?,
        strategy: match text("strategy", Some("merge"), &["ff", "merge", "squash"])?.as_deref() {
            Some("ff") => Strategy::Ff,
            Some("squash") => Strategy::Squash,
            _ => Strategy::Merge,
        },
        remote: text("remote", None, &[])?,
        claim_lease: seconds(value.get("claimLeaseSec"), CLAIM_LEASE_SEC)
            .ok_or_else(|| invalid(step, "land.claimLeaseSec", "must be a positive number"))?,
        pr_open: argv("open")?.unwrap_or_default(),
        pr_arm: argv("arm")?.unwrap_or_default(),
        pr_find: argv("find")?,
        pr_armed: argv("armed")?,
        arm: match text("arm", Some("auto"), &["auto", "human"])?.as_deref() {
            Some("human") => Arm::Human,
            _ => Arm::Auto,
        },
        mode,
    };
    super::land_remote::check_landing(&land, step)?;
    if land.mode == LandMode::Pr {
        if land.remote.is_none() {
            return Err(invalid(
                step,
                "land.remote",
                "must name the remote a pull request's branch is pushed to",
            ));
        }
        if land.pr_open.is_empty() {
            return Err(invalid(
                step,
                "land.pr.open",
                "must be the argv that opens a pull request",
            ));
        }
        if land.arm == Arm::Auto && land.pr_arm.is_empty() {
            return Err(invalid(
                step,
                "land.pr.arm",
                "must be the argv that arms a pull request (or set land.arm to human)",
            ));
        }
    }
    Ok(land)
}

fn known(
    list: Vec<String>,
    allowed: &[&str],
    key: &str,
    step: &str,
) -> Result<Vec<String>, Refusal> {
    for n in &list {
        if !allowed.contains(&n.as_str()) {
            return Err(invalid(
                step,
                key,
                &format!("names `{n}`; the known ones are {}", allowed.join(", ")),
            ));
        }
    }
    Ok(list)
}

/// A role's runner and model (`roles.<name>`), the runner checked against `runners`.
fn role(
    runners: &Value,
    roles: &Value,
    name: &str,
    timeout: Duration,
    step: &str,
) -> Result<(Option<Runner>, Option<String>), Refusal> {
    let Some(r) = roles.get(name).filter(|v| !v.is_null()) else {
        return Ok((None, None));
    };
    let runner_name = match r.get("runner") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => {
            return Err(invalid(
                step,
                &format!("roles.{name}.runner"),
                "must be a runner name",
            ))
        }
    };
    let model = match r.get("model") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => {
            return Err(invalid(
                step,
                &format!("roles.{name}.model"),
                "must be a string or null",
            ))
        }
    };
    let Some(runner_name) = runner_name else {
        return Ok((None, model));
    };
    let def = runners.get(&runner_name).ok_or_else(|| {
        let known: Vec<&str> = runners
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, _)| k.as_str())
            .collect();
        let near = super::config_keys::nearest(&runner_name, &known)
            .map(|n| format!("; did you mean `{n}`?"))
            .unwrap_or_default();
        invalid(
            step,
            &format!("roles.{name}.runner"),
            &format!("names `{runner_name}`, which `runners` does not define{near}"),
        )
    })?;
    Ok((Some(runner(&runner_name, def, timeout, step)?), model))
}

/// One entry of `runners`, checked whole.
fn runner(name: &str, def: &Value, timeout: Duration, step: &str) -> Result<Runner, Refusal> {
    let runner = name.to_owned();
    if !def.is_object() {
        return Err(invalid(
            step,
            &format!("runners.{name}"),
            "must be an object (kind, argv or program, ...)",
        ));
    }
    let key = format!("runners.{runner}");
    let kind_text = match def.get("kind") {
        None | Some(Value::Null) => "command",
        Some(v) => v.as_str().unwrap_or("?"),
    };
    let kind = crate::runner::Kind::parse(kind_text).ok_or_else(|| {
        invalid(
            step,
            &format!("{key}.kind"),
            &format!("is `{kind_text}`; it must be `command`, `claude`, `codex` or `pi`"),
        )
    })?;
    let allowed: &[&str] = if kind.is_harness() {
        &[
            "kind",
            "program",
            "args",
            "env",
            "timeoutSec",
            "maxTurns",
            "transcripts",
        ]
    } else {
        &["kind", "argv", "env", "timeoutSec", "workspace"]
    };
    if let Some(k) = def
        .as_object()
        .and_then(|m| m.keys().find(|k| !allowed.contains(&k.as_str())))
    {
        return Err(super::config_keys::unknown(
            step,
            &format!("{key}.{k}"),
            k,
            &format!("a field of a `{}` runner", kind.as_str()),
            allowed,
        ));
    }
    let argv = if kind.is_harness() {
        let program = match def.get("program") {
            None | Some(Value::Null) => kind.as_str().to_owned(),
            Some(Value::String(p)) if !p.is_empty() => p.clone(),
            Some(_) => {
                return Err(invalid(
                    step,
                    &format!("{key}.program"),
                    "must be a program name or path",
                ))
            }
        };
        vec![program]
    } else {
        def.get("argv")
            .and_then(strings)
            .filter(|a| !a.is_empty())
            .ok_or_else(|| {
                invalid(
                    step,
                    &format!("{key}.argv"),
                    "must be a non-empty list of strings",
                )
            })?
    };
    let args = match def.get("args") {
        None | Some(Value::Null) => Vec::new(),
        Some(v) => strings(v)
            .ok_or_else(|| invalid(step, &format!("{key}.args"), "must be a list of strings"))?,
    };
    let env = match def.get("env") {
        None | Some(Value::Null) => std::collections::BTreeMap::new(),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| match v.as_str() {
                Some(v) if is_env_name(k) => Ok((k.clone(), v.to_owned())),
                _ => Err(invalid(
                    step,
                    &format!("{key}.env.{k}"),
                    "must be a variable name with a string value",
                )),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => {
            return Err(invalid(
                step,
                &format!("{key}.env"),
                "must be an object of strings",
            ))
        }
    };
    let max_turns = match def.get("maxTurns") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_u64()
                .filter(|n| *n >= 1)
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| {
                    invalid(
                        step,
                        &format!("{key}.maxTurns"),
                        "must be a positive integer",
                    )
                })?,
        ),
    };
    let t = seconds(def.get("timeoutSec"), timeout.as_secs()).ok_or_else(|| {
        invalid(
            step,
            &format!("{key}.timeoutSec"),
            "must be a positive number",
        )
    })?;
    Ok(Runner {
        transcripts: match def.get("transcripts") {
            None | Some(Value::Null) => true,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                return Err(invalid(
                    step,
                    &format!("{key}.transcripts"),
                    "must be true or false",
                ))
            }
        },
        remote: super::config_keys::workspace(def, &key, &argv, step)?,
        name: runner,
        kind,
        argv,
        timeout: t,
        env,
        args,
        max_turns,
    })
}

/// The pace with `flags` over everything else, at the real time now (SPEC 20.11).
pub fn pace_with(
    config: &Config,
    flags: &super::pace::Flags,
    step: &str,
) -> Result<super::pace::Pace, Refusal> {
    super::pace::Pace::resolve(
        &user_pace().map_err(|e| crate::repo::store_refusal(step, e))?,
        config.raw.pointer("/pace").unwrap_or(&Value::Null),
        flags,
        crate::clock::real_now(),
    )
    .map_err(|(key, expected)| invalid(step, &key, &expected))
}

/// The `pace` of the person's user config (`$XDG_CONFIG_HOME/iced/config.json`, else
/// `~/.config/iced/config.json`), or null: below the repository's, above the defaults. A file
/// there that cannot be read or parsed counts as none, except one that is not a regular file,
/// which is refused (SPEC 24.6).
fn user_pace() -> Result<Value, crate::store::StoreError> {
    super::confinement::user_config().map(|(_, config)| config["pace"].clone())
}

/// A name a process environment can hold: letters, digits and `_`, not starting with a digit.
fn is_env_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Find a program as exec would: a path containing `/` must be an executable file; a bare name is
/// looked up on `PATH`.
pub fn find_program(program: &str, path_var: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        let p = PathBuf::from(program);
        return executable(&p).then_some(p);
    }
    std::env::split_paths(path_var?)
        .map(|dir| dir.join(program))
        .find(|p| executable(p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn settings(v: Value) -> Result<Settings, Refusal> {
        let config = Config::from_value(v, Path::new("c.json")).unwrap();
        Settings::from_config(&config, "test")
    }

    #[test]
    fn commands_are_argv_never_shell_strings() {
        let s = settings(json!({"verify": {"commands": [
            "cargo test -- --nocapture 'a b'",
            ["make build", "make check"],
            {"argv": ["sh", "-c", "exit 3"], "expected_exit_codes": [3], "timeoutSec": 5}
        ]}}))
        .unwrap();
        assert_eq!(
            s.dod[0][0].argv,
            ["cargo", "test", "--", "--nocapture", "a b"]
        );
        assert_eq!(s.dod[1].len(), 2);
        assert_eq!(s.dod[2][0].expected_exit_codes, [3]);
        assert_eq!(s.dod[2][0].timeout, Duration::from_secs(5));
        assert!(settings(json!({"verify": {"commands": ["echo 'unclosed"]}})).is_err());
        assert!(settings(json!({"verify": {"commands": [{"argv": []}]}})).is_err());
        assert!(
            settings(json!({"verify": {"commands": [{"argv": ["x"], "cwd": "../out"}]}})).is_err()
        );
    }

    #[test]
    fn the_implementer_runner_is_resolved() {
        let s = settings(json!({
            "runners": {"fake": {"kind": "command", "argv": ["bash", "agent", "{output_file}"], "timeoutSec": 60}},
            "roles": {"implementer": {"runner": "fake", "model": "m1"}}
        })).unwrap();
        let r = s.implementer.unwrap();
        assert_eq!(
            (r.name.as_str(), r.timeout),
            ("fake", Duration::from_secs(60))
        );
        assert_eq!(s.implementer_model.as_deref(), Some("m1"));
        let e = settings(json!({"roles": {"implementer": {"runner": "nope"}}})).unwrap_err();
        assert_eq!(e.code, "config-invalid");
        assert!(settings(json!({})).unwrap().implementer.is_none());
    }

    /// `record.json`, the landed commit's message and the land outcome write these as the words
    /// the config spells; a word outside the set is refused as it always was.
    #[test]
    fn land_words_read_and_write_as_the_config_spells_them() {
        let default = settings(json!({})).unwrap().land;
        assert_eq!(
            (default.strategy, default.arm),
            (Strategy::Merge, Arm::Auto)
        );
        for (word, strategy) in [
            ("ff", Strategy::Ff),
            ("merge", Strategy::Merge),
            ("squash", Strategy::Squash),
        ] {
            let land = settings(json!({"land": {"strategy": word}})).unwrap().land;
            assert_eq!(land.strategy, strategy);
            assert_eq!(strategy.to_string(), word);
            assert_eq!(serde_json::to_value(strategy).unwrap(), word);
        }
        for (word, arm) in [("auto", Arm::Auto), ("human", Arm::Human)] {
            let land = settings(json!({"land": {"arm": word}})).unwrap().land;
            assert_eq!(land.arm, arm);
            assert_eq!(arm.to_string(), word);
            assert_eq!(serde_json::to_value(arm).unwrap(), word);
        }
        let e = settings(json!({"land": {"strategy": "rebase"}})).unwrap_err();
        assert_eq!(
            (e.code, e.reason.as_str()),
            (
                "config-invalid",
                "`.iced/config.json`: `land.strategy` must be one of ff, merge, squash"
            )
        );
        let e = settings(json!({"land": {"arm": "robot"}})).unwrap_err();
        assert_eq!(
            e.reason,
            "`.iced/config.json`: `land.arm` must be one of auto, human"
        );
    }
}
