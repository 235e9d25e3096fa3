//! Trust (SPEC 24.10): a repository's `.iced/config.json` can make iced run programs (`runners`,
//! `roles`, `verify.commands`, `land.pr`, `hooks`). A config comes with the repository, from
//! whoever wrote it, so those parts run only once the person has trusted them for this checkout:
//! `iced trust` records their sha256 in the person's own config directory, and the verbs that act
//! (`build`, `implement step`) refuse `config-untrusted` until the hash of the parts in force is
//! the one recorded for this root.
//!
//! This module owns what counts as executable, its hash, the trust store and that refusal. It
//! never writes into a repository and never runs what it describes.

use crate::config::Config;
use crate::refusal::{io_error, Refusal};
use crate::run::settings::Settings;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The parts of the config that make iced run programs: their names and where they are.
const PARTS: &[(&str, &str)] = &[
    ("hooks", "/hooks"),
    ("land.pr", "/land/pr"),
    ("roles", "/roles"),
    ("runners", "/runners"),
    ("verify.commands", "/verify/commands"),
];

/// The trust store is small: one line per checkout the person trusted.
const STORE_LIMIT: u64 = 4 * 1024 * 1024;

/// The executable parts of one config, as canonical JSON: an object of the parts that are not
/// empty, keys sorted at every depth, no whitespace. Its sha256 is what trust records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parts {
    canonical: String,
}

impl Parts {
    pub fn of(config: &Config) -> Parts {
        let mut parts = Map::new();
        // Under `land.mode: pr`, the forge commands in force, the shipped ones included (SPEC
        // 23.2): what runs is what is trusted.
        let land_pr = config.raw.get("land").and_then(crate::run::forge::in_force);
        for (name, pointer) in PARTS {
            let part = match (*name, &land_pr) {
                ("land.pr", Some(in_force)) => Some(in_force),
                _ => config.raw.pointer(pointer),
            };
            // An empty part runs nothing: `"hooks": {}` added later changes no hash.
            match part {
                None | Some(Value::Null) => {}
                Some(Value::Object(m)) if m.is_empty() => {}
                Some(Value::Array(a)) if a.is_empty() => {}
                Some(Value::String(s)) if s.is_empty() => {}
                Some(v) => {
                    parts.insert((*name).to_owned(), canonical(v));
                }
            }
        }
        Parts {
            canonical: Value::Object(parts).to_string(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.canonical == "{}"
    }

    pub fn sha256(&self) -> String {
        Sha256::digest(self.canonical.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

/// `value` with every object's keys sorted (the crate keeps JSON objects in insertion order).
pub(crate) fn canonical(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), canonical(&map[k])))
                    .collect(),
            )
        }
        Value::Array(list) => Value::Array(list.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

/// One thing the executable parts would run, for a person to read before trusting it.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(tag = "what", rename_all = "kebab-case")]
pub enum WouldRun {
    /// A runner: what starts an agent. A harness runner's argv is its program and extra args.
    Runner {
        name: String,
        kind: String,
        argv: Vec<String>,
        env: BTreeMap<String, String>,
        /// The roles that use it (`implementer`, `validator`).
        roles: Vec<String>,
    },
    /// A definition-of-done command (`verify.commands`).
    Command {
        argv: Vec<String>,
        cwd: Option<String>,
    },
    /// A forge command of `land.pr` (`open`, `arm`, `find`, `armed`).
    Forge { name: String, argv: Vec<String> },
    /// Anything else those parts hold, as written: `hooks`, a role naming no runner, a runner iced
    /// cannot read.
    Other { key: String, value: Value },
}

impl WouldRun {
    /// One line for a person (argv shell-quoted for reading; never executed).
    pub fn line(&self) -> String {
        let words = |argv: &[String]| {
            shlex::try_join(argv.iter().map(String::as_str)).unwrap_or_else(|_| argv.join(" "))
        };
        match self {
            WouldRun::Runner {
                name,
                kind,
                argv,
                env,
                roles,
            } => {
                let mut line = format!("runner `{name}` ({kind}");
                if !roles.is_empty() {
                    line.push_str(&format!(", for {}", roles.join(", ")));
                }
                line.push_str(&format!("): {}", words(argv)));
                if !env.is_empty() {
                    let vars: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    line.push_str(&format!(" (env {})", vars.join(" ")));
                }
                line
            }
            WouldRun::Command { argv, cwd } => match cwd {
                Some(cwd) => format!("command (in `{cwd}`): {}", words(argv)),
                None => format!("command: {}", words(argv)),
            },
            WouldRun::Forge { name, argv } => format!("forge `{name}`: {}", words(argv)),
            WouldRun::Other { key, value } => format!("{key}: {value}"),
        }
    }
}

/// A runner as the config writes it, read only to show it (the loop reads it in `settings`).
#[derive(Deserialize)]
struct RunnerDef {
    kind: Option<String>,
    program: Option<String>,
    argv: Option<Vec<String>>,
    args: Option<Vec<String>>,
    env: Option<BTreeMap<String, String>>,
}

/// Everything the executable parts of `config` would run (`settings` is the same config, read).
pub fn would_run(config: &Config, settings: &Settings) -> Vec<WouldRun> {
    let mut out = Vec::new();
    let roles: BTreeMap<String, String> = config
        .raw
        .pointer("/roles")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(role, r)| Some((role.clone(), r.get("runner")?.as_str()?.to_owned())))
        .collect();
    for (name, def) in config
        .raw
        .pointer("/runners")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let Ok(d) = serde_json::from_value::<RunnerDef>(def.clone()) else {
            out.push(WouldRun::Other {
                key: format!("runners.{name}"),
                value: def.clone(),
            });
            continue;
        };
        let kind = d.kind.unwrap_or_else(|| "command".to_owned());
        let argv = if kind == "command" {
            d.argv.unwrap_or_default()
        } else {
            std::iter::once(d.program.unwrap_or_else(|| kind.clone()))
                .chain(d.args.unwrap_or_default())
                .collect()
        };
        out.push(WouldRun::Runner {
            name: name.clone(),
            kind,
            argv,
            env: d.env.unwrap_or_default(),
            roles: roles
                .iter()
                .filter(|(_, runner)| *runner == name)
                .map(|(role, _)| role.clone())
                .collect(),
        });
    }
    // A role that names no runner runs nothing itself, but what it says (a model) is trusted too.
    for (role, r) in config
        .raw
        .pointer("/roles")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(role, _)| !roles.contains_key(*role))
    {
        out.push(WouldRun::Other {
            key: format!("roles.{role}"),
            value: r.clone(),
        });
    }
    for command in settings.dod.iter().flatten() {
        out.push(WouldRun::Command {
            argv: command.argv.clone(),
            cwd: command.cwd.clone(),
        });
    }
    let land = &settings.land;
    for (name, argv) in [
        ("open", Some(&land.pr_open)),
        ("arm", Some(&land.pr_arm)),
        ("find", land.pr_find.as_ref()),
        ("armed", land.pr_armed.as_ref()),
    ] {
        if let Some(argv) = argv.filter(|a| !a.is_empty()) {
            out.push(WouldRun::Forge {
                name: name.to_owned(),
                argv: argv.clone(),
            });
        }
    }
    if let Some(hooks) = config.raw.pointer("/hooks").filter(|h| {
        !(h.is_null()
            || h.as_object().is_some_and(Map::is_empty)
            || h.as_array().is_some_and(Vec::is_empty))
    }) {
        out.push(WouldRun::Other {
            key: "hooks".to_owned(),
            value: hooks.clone(),
        });
    }
    out
}

/// The trust store: for each checkout root, the hash the person trusted and when.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Store {
    schema: u32,
    roots: BTreeMap<String, Entry>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Entry {
    sha256: String,
    at: String,
}

/// `$XDG_CONFIG_HOME/iced`, else `~/.config/iced`: the person's own folder of iced's, outside every
/// repository, where the trust store and the user config are. `None` when neither variable says
/// where that is (an absolute path).
pub fn person_dir() -> Option<PathBuf> {
    let var = |name: &str| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    var("XDG_CONFIG_HOME")
        .or_else(|| var("HOME").map(|h| h.join(".config")))
        .map(|dir| dir.join("iced"))
}

/// `<person_dir>/trust.json`.
pub fn store_path() -> Option<PathBuf> {
    person_dir().map(|dir| dir.join("trust.json"))
}

/// The key of a checkout in the store: its root, canonical.
fn root_key(root: &Path) -> String {
    root.canonicalize()
        .unwrap_or_else(|_| root.to_owned())
        .to_string_lossy()
        .into_owned()
}

fn read_store(path: &Path, step: &str) -> Result<Store, Refusal> {
    use crate::store::StoreError;
    let bytes = match crate::store::read_no_follow(path, STORE_LIMIT) {
        Ok(bytes) => bytes,
        Err(e) if e.is_not_found() => return Ok(Store::default()),
        Err(StoreError::TooLarge { .. }) => {
            return Err(Refusal::new(
                step,
                "trust-invalid",
                format!(
                    "`{}` is not a trust file iced can read: it is over {STORE_LIMIT} bytes",
                    path.display()
                ),
                "fix it, or remove it and run `iced trust` again in each repository you trust",
            ))
        }
        Err(e @ StoreError::NotRegular { .. }) => {
            return Err(Refusal::new(
                step,
                "not-a-regular-file",
                e.to_string(),
                "replace it with the trust file iced writes: remove it, then `iced trust` again in each repository you trust",
            ))
        }
        Err(e) => return Err(crate::repo::store_refusal(step, e)),
    };
    serde_json::from_slice::<Store>(&bytes).map_err(|why| {
        Refusal::new(
            step,
            "trust-invalid",
            format!(
                "`{}` is not a trust file iced can read: {why}",
                path.display()
            ),
            "fix it, or remove it and run `iced trust` again in each repository you trust",
        )
    })
}

/// What `iced trust` did.
#[derive(Debug, Serialize)]
pub struct Trusted {
    pub root: String,
    /// `None` when the config runs nothing: there was nothing to trust, and nothing was written.
    pub sha256: Option<String>,
    pub store: Option<PathBuf>,
    pub trusted: Vec<WouldRun>,
}

/// Trust the executable parts of `config` for the checkout at `root`: record their hash in the
/// person's trust store (atomically, 0600, under the store's lock, keeping every other entry).
pub fn trust(
    root: &Path,
    config: &Config,
    settings: &Settings,
    step: &str,
) -> Result<Trusted, Refusal> {
    let parts = Parts::of(config);
    let key = root_key(root);
    let trusted = would_run(config, settings);
    if parts.is_empty() {
        return Ok(Trusted {
            root: key,
            sha256: None,
            store: None,
            trusted,
        });
    }
    let path = store_path().ok_or_else(|| {
        io_error(
            step,
            "neither XDG_CONFIG_HOME nor HOME names a directory (an absolute path) for the trust store",
        )
    })?;
    let dir = path.parent().expect("the store is in a directory");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| io_error(step, format!("create `{}`: {e}", dir.display())))?;
    let _lock = lock_store(dir, step)?;
    let mut store = read_store(&path, step)?;
    store.schema = 1;
    store.roots.insert(
        key.clone(),
        Entry {
            sha256: parts.sha256(),
            at: crate::clock::now_iso(),
        },
    );
    let mut text = serde_json::to_vec_pretty(&store).expect("the store serialises");
    text.push(b'\n');
    crate::store::write_atomic(&path, &text, 0o600)
        .map_err(|e| crate::repo::store_refusal(step, e))?;
    Ok(Trusted {
        root: key,
        sha256: Some(parts.sha256()),
        store: Some(path),
        trusted,
    })
}

/// The store's lock (`trust.lock` beside it), so two `iced trust` at once both keep their entry.
fn lock_store(dir: &Path, step: &str) -> Result<std::fs::File, Refusal> {
    let path = dir.join("trust.lock");
    let file = crate::store::open_lock_file(&path, 0o600)
        .map_err(|e| crate::repo::store_refusal(step, e))?;
    if !crate::store::flock_within(&file, Duration::from_secs(10)) {
        return Err(io_error(
            step,
            format!("`{}` stayed locked for 10 s", path.display()),
        ));
    }
    Ok(file)
}

/// Refuse `config-untrusted` unless the executable parts of `config` are empty or trusted for the
/// checkout at `root`. Called by the verbs that act before they change or start anything.
pub fn require(
    root: &Path,
    config: &Config,
    settings: &Settings,
    step: &str,
) -> Result<(), Refusal> {
    let parts = Parts::of(config);
    if parts.is_empty() {
        return Ok(());
    }
    let key = root_key(root);
    let recorded = match store_path() {
        Some(path) => read_store(&path, step)?.roots.remove(&key),
        None => None,
    };
    if recorded
        .as_ref()
        .is_some_and(|e| e.sha256 == parts.sha256())
    {
        return Ok(());
    }
    let would = would_run(config, settings);
    let since = match &recorded {
        Some(entry) => format!("changed since you trusted it on {} for `{key}`", entry.at),
        None => format!("has not been trusted for `{key}`"),
    };
    let mut reason =
        format!("`.iced/config.json` would run programs, and it {since}; it would run:");
    for w in &would {
        reason.push_str(&format!("\n  {}", w.line()));
    }
    Err(Refusal::new(
        step,
        "config-untrusted",
        reason,
        "read them in `.iced/config.json`; if you would run them yourself, `iced trust` lets them run in this checkout",
    )
    .detail(
        "would_run",
        serde_json::to_value(&would).expect("serialises"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config(v: Value) -> Config {
        Config::from_value(v, Path::new("c.json")).unwrap()
    }

    fn merge(base: &mut Value, patch: Value) {
        match (base, patch) {
            (Value::Object(b), Value::Object(p)) => {
                for (k, v) in p {
                    merge(b.entry(k).or_insert(Value::Null), v);
                }
            }
            (b, p) => *b = p,
        }
    }

    #[test]
    fn the_hash_covers_what_runs_and_nothing_else() {
        let base = json!({"runners": {"r": {"kind": "command", "argv": ["a", "{output_file}"]}},
                          "roles": {"implementer": {"runner": "r"}}});
        let a = Parts::of(&config(base.clone()));
        // Key order, other keys and empty parts do not change it.
        let reordered = json!({"roles": {"implementer": {"runner": "r"}}, "gate": "warn",
                               "runners": {"r": {"argv": ["a", "{output_file}"], "kind": "command"}},
                               "hooks": {}, "verify": {"commands": [], "parallel": false}});
        assert_eq!(Parts::of(&config(reordered)), a);
        // A changed argv, a new command, a forge argv or a hook does.
        for patch in [
            json!({"runners": {"r": {"kind": "command", "argv": ["b", "{output_file}"]}}}),
            json!({"verify": {"commands": ["make test"]}}),
            json!({"land": {"pr": {"open": ["gh", "pr", "create"]}}}),
            json!({"hooks": {"x": ["y"]}}),
            json!({"roles": {"implementer": {"runner": "r", "model": "m"}}}),
        ] {
            let mut changed = base.clone();
            merge(&mut changed, patch.clone());
            assert_ne!(Parts::of(&config(changed)).sha256(), a.sha256(), "{patch}");
        }
        assert!(Parts::of(&config(json!({}))).is_empty());
        assert!(!a.is_empty());
    }

    /// Under `land.mode: pr` what runs is the forge commands in force: with no `land.pr` at all,
    /// the ones iced ships (SPEC 23.2), which then need trust and are listed; a config that names
    /// all of them hashes as it always did.
    #[test]
    fn the_shipped_forge_commands_are_what_a_pr_landing_trusts() {
        let shipped = config(json!({"land": {"mode": "pr", "remote": "origin"}}));
        assert!(!Parts::of(&shipped).is_empty(), "gh runs: it needs trust");
        let settings = Settings::from_config(&shipped, "test").unwrap();
        let listed: Vec<String> = would_run(&shipped, &settings)
            .into_iter()
            .filter_map(|w| match w {
                WouldRun::Forge { name, argv } => Some(format!("{name}: {}", argv.join(" "))),
                _ => None,
            })
            .collect();
        assert_eq!(
            listed,
            [
                "open: gh pr create --head {branch} --base {target} --title {title} --body-file {body_file}",
                "arm: gh pr merge {pr_url} --auto --merge",
                "find: gh pr list --head {branch} --state open --json url --jq .[0].url // empty",
                "armed: gh pr view {pr_url} --json autoMergeRequest --jq .autoMergeRequest != null",
            ]
        );
        // The same commands written out are the same parts.
        let written = config(json!({"land": {"mode": "pr", "remote": "origin", "pr": {
            "open": crate::run::forge::open(), "arm": crate::run::forge::arm("merge"),
            "find": crate::run::forge::find(), "armed": crate::run::forge::armed()}}}));
        assert_eq!(Parts::of(&written), Parts::of(&shipped));
        // Another forge's commands are its own: gh is not asked, and the hash is of what it wrote.
        let own = json!({"open": ["glab", "mr", "create"], "arm": ["glab", "mr", "merge"]});
        let glab = config(json!({"land": {"mode": "pr", "remote": "origin", "pr": own}}));
        let not_pr = config(json!({"land": {"mode": "merge", "pr": own}}));
        assert_eq!(Parts::of(&glab), Parts::of(&not_pr));
    }

    #[test]
    fn a_role_without_a_runner_is_shown_as_written() {
        let c = config(json!({"roles": {"implementer": {"model": "m1"}}}));
        let settings = Settings::from_config(&c, "test").unwrap();
        assert!(!Parts::of(&c).is_empty());
        assert_eq!(
            would_run(&c, &settings),
            vec![WouldRun::Other {
                key: "roles.implementer".into(),
                value: json!({"model": "m1"})
            }]
        );
    }
}
