//! A run's rules (SPEC 24.16): the repository's config as it was when the run was admitted,
//! recorded in the run's folder, and what every later step of that run reads instead of the
//! checkout's. A change to the checkout's config reaches a live run only through
//! `iced run resume <run> --reload`, which asks for trust again.

use crate::config::Config;
use crate::refusal::Refusal;
use crate::run::ctx::Ctx;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::PathBuf;

/// Far more than any config; what is read back is bounded by it.
const LIMIT: u64 = 4 * 1024 * 1024;

/// `rules.json`.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Recorded {
    schema: u32,
    sha256: String,
    /// The config in force: the repository's file merged over the defaults.
    config: Value,
}

/// The sha256 of `config`'s canonical JSON (keys sorted at every depth): the rules' name.
pub(crate) fn sha256(config: &Config) -> String {
    Sha256::digest(crate::trust::canonical(&config.raw).to_string().as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `rules-<sha256>.json` in the run's folder: rules recorded again (`--reload`) are a file of
/// their own, in force once the state names them, so a call killed in between leaves the old ones
/// in force and whole.
pub(crate) fn path(ctx: &Ctx<'_>, run: &str, sha256: &str) -> PathBuf {
    ctx.paths.run_dir(run).join(format!("rules-{sha256}.json"))
}

/// Record `config` as the rules of `run` (0600, whole or not at all, synced): its sha256.
pub(crate) fn record(ctx: &Ctx<'_>, run: &str, config: &Config) -> Result<String, Refusal> {
    let sha256 = sha256(config);
    let recorded = Recorded {
        schema: 1,
        sha256: sha256.clone(),
        config: config.raw.clone(),
    };
    let path = path(ctx, run, &sha256);
    if let Some(dir) = path.parent() {
        crate::store::create_dir_all(dir).map_err(|e| crate::repo::store_refusal(ctx.verb, e))?;
    }
    let mut bytes = serde_json::to_vec_pretty(&recorded).expect("a config serialises");
    bytes.push(b'\n');
    crate::store::write_atomic(&path, &bytes, 0o600)
        .map_err(|e| crate::repo::store_refusal(ctx.verb, e))?;
    crate::failpoint::hit("rules-after-write");
    Ok(sha256)
}

/// The rules `run` recorded as `sha256`: read from its folder (a regular file, no link), and
/// refused (`rules-changed`) when what is there is not them.
pub(crate) fn load(ctx: &Ctx<'_>, run: &str, sha256: &str) -> Result<Config, Refusal> {
    let path = path(ctx, run, sha256);
    let changed = |why: String| {
        ctx.refuse(
            "rules-changed",
            format!(
                "the rules run {run} was admitted with (`{}`) {why}",
                path.display()
            ),
            format!("nothing of the run's was changed by iced: `iced run resume {run} --reload` records the checkout's config as its rules (after trust), or `iced run abandon {run}` ends it"),
        )
    };
    let bytes = crate::store::read_no_follow(&path, LIMIT)
        .map_err(|e| changed(format!("cannot be read: {e}")))?;
    let recorded: Recorded =
        serde_json::from_slice(&bytes).map_err(|e| changed(format!("do not parse: {e}")))?;
    let config = Config::from_value(recorded.config, &path)
        .map_err(|e| changed(format!("are not a valid config: {e}")))?;
    let now = self::sha256(&config);
    if recorded.schema != 1 || recorded.sha256 != sha256 || now != sha256 {
        return Err(changed(format!(
            "are not the ones it recorded (sha256 {sha256}, found {now})"
        )));
    }
    Ok(config)
}

/// The rules `run` was admitted with, `rules` their sha256, in force for the rest of this call
/// in place of the checkout's config. Nothing changes for a run an older iced admitted (no rules)
/// or when the checkout's config is the run's.
pub(crate) fn adopt(ctx: &mut Ctx<'_>, run: &str, rules: Option<&str>) -> Result<(), Refusal> {
    let Some(sha256) = rules else {
        return Ok(());
    };
    if self::sha256(&ctx.config) == sha256 {
        return Ok(());
    }
    let config = load(ctx, run, sha256)?;
    ctx.follow(config)
}

/// The top-level keys whose values differ between `was` and `now`, sorted.
pub(crate) fn changed_keys(was: &Config, now: &Config) -> Vec<String> {
    let (Some(a), Some(b)) = (was.raw.as_object(), now.raw.as_object()) else {
        return vec!["(top level)".into()];
    };
    let mut keys: Vec<String> = a
        .keys()
        .chain(b.keys())
        .filter(|k| a.get(*k) != b.get(*k))
        .cloned()
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

/// What `iced run resume <run> --reload` did to the run's rules.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Reloaded {
    /// The rules in force now.
    pub sha256: String,
    /// The rules before; none for a run an older iced admitted.
    pub was: Option<String>,
    /// The top-level config keys that differ; every key when there were no rules before.
    pub changed: Vec<String>,
}

/// Record the checkout's config, once trusted, as the rules of the live run `run` (SPEC 24.16):
/// the file first, then the state that names it, then `rules_reloaded`.
pub(crate) fn reload(ctx: &Ctx<'_>, run: &str) -> Result<Reloaded, Refusal> {
    crate::trust::require(&ctx.repo.root, &ctx.config, &ctx.settings, ctx.verb)?;
    let state = crate::run::state::State::load(&ctx.paths, ctx.verb)?;
    if state.runs.get(run).is_none_or(|r| r.status.is_ended()) {
        return Err(ended(ctx, run));
    }
    let was = state.runs.get(run).and_then(|r| r.rules.clone());
    let now = sha256(&ctx.config);
    // Rules changed under the run (`rules-changed`) count as none: every key is new.
    let before = match &was {
        Some(was) if *was != now => load(ctx, run, was).ok(),
        _ => None,
    };
    let changed = match (&was, before) {
        (Some(was), _) if *was == now => Vec::new(),
        (_, Some(before)) => changed_keys(&before, &ctx.config),
        (_, None) => ctx
            .config
            .raw
            .as_object()
            .map(|m| {
                let mut keys: Vec<String> = m.keys().cloned().collect();
                keys.sort();
                keys
            })
            .unwrap_or_default(),
    };
    let reloaded = Reloaded {
        sha256: now.clone(),
        was: was.clone(),
        changed,
    };
    if was.as_deref() == Some(now.as_str()) {
        return Ok(reloaded);
    }
    record(ctx, run, &ctx.config)?;
    ctx.transact_pub(|state| {
        let Some(r) = state.runs.get_mut(run).filter(|r| !r.status.is_ended()) else {
            return Err(ended(ctx, run));
        };
        r.rules = Some(now.clone());
        crate::run::events::emit(
            &ctx.paths,
            run,
            crate::run::events::Event::RulesReloaded,
            serde_json::json!({"sha256": now, "was": was, "changed": reloaded.changed}),
        );
        Ok(())
    })?;
    Ok(reloaded)
}

fn ended(ctx: &Ctx<'_>, run: &str) -> Refusal {
    ctx.refuse_pub(
        "run-ended",
        format!("run {run} is not live: its rules stay as they were"),
        "build the unit again: a new run follows the checkout's config",
    )
}
