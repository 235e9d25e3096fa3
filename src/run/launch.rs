//! Starting an activity (SPEC 20.1, 20.8, 21.4): a runner's argv (a template expanded element by
//! element, or a harness's own), the child's environment, the supervisor launched and awaited for
//! its registration; what a harness's output says when its agent ended; and the gate a supervisor
//! asks before it starts its child.

use super::lock::StateLock;
use super::state::{ensure_dir, RunPaths, State, StepStatus};
use crate::activity::{self, ActivitySpec};
use crate::refusal::{io_error, Refusal};
use crate::run::ctx::*;
use crate::run::keys::StepKey;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A runner's argv with its placeholders filled, element by element (never through a shell).
pub(crate) fn expand(argv: &[String], values: &[(&str, String)]) -> Vec<String> {
    argv.iter()
        .map(|a| {
            let mut s = a.clone();
            for (k, v) in values {
                s = s.replace(&format!("{{{k}}}"), v);
            }
            s
        })
        .collect()
}

/// What one agent start is for, beside its runner and placeholder values.
pub(crate) struct AgentStart<'a> {
    pub read_only: bool,
    pub nonce: &'a str,
    pub model: Option<&'a str>,
    /// A validator's effort (SPEC 11); `None` leaves the harness's own.
    pub effort: Option<&'a str>,
    /// The brief or the validator's prompt.
    pub prompt: &'a Path,
    pub cwd: PathBuf,
    pub gate: Value,
    /// The activity's folder (a claude agent's settings go there).
    pub dir: &'a Path,
}

/// How an agent is started (SPEC 20.1, 20.8): a `command` runner's argv template expanded, or a
/// harness's own argv with the prompt on standard input; the `ICED_*` variables; for a harness,
/// its credential variables passed on by name and the runner's `env` by template, so that no
/// secret is written into the activity's spec.
pub(crate) fn agent_spec(
    ctx: &Ctx<'_>,
    runner: &super::settings::Runner,
    values: &[(&str, String)],
    start: AgentStart<'_>,
) -> Result<ActivitySpec, Refusal> {
    let mut env = base_env();
    // A remote agent is given no path of this machine but its answer's (SPEC 20.19).
    let values: Vec<(&str, String)> = values
        .iter()
        .filter(|(k, _)| !runner.remote || !matches!(*k, "prompt_file" | "worktree"))
        .cloned()
        .collect();
    for (k, v) in &values {
        env.insert(format!("ICED_{}", k.to_uppercase()), v.clone());
    }
    env.insert("ICED_RECEIPT_KEY".into(), start.nonce.to_owned());
    // The folder its answer goes to: made by the loop, 0700, never a link (SPEC 21.1), and, from
    // brief layout 5, a folder of the answer's own, which is all of the activity it may write.
    if let Some(folder) = Path::new(value_of(&values, "output_file"))
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
    {
        super::state::ensure_dir(folder, ctx.verb)?;
    }
    // SPEC 24.12: a local agent is confined to its workspace; a remote runner's launcher is not
    // (its agent runs where the launcher puts it).
    let confine = if runner.remote {
        None
    } else {
        super::confinement::rules(
            &super::confinement::Start {
                role: value_of(&values, "role"),
                cwd: &start.cwd,
                dir: start.dir,
                output: Path::new(value_of(&values, "output_file")),
                common: ctx.claims().common_dir(),
                admin: super::stage::worktree::own_worktree(ctx, &start.cwd).ok(),
            },
            ctx.verb,
        )?
    };
    // SPEC 24.12: a confined writer commits into a git of its own, which its git finds by these
    // (the worktree's own `.git` names the repository's, which it cannot write).
    let own_git = (confine.is_some() && super::confinement::commits(value_of(&values, "role")))
        .then(|| super::lane_git::dir(start.dir));
    if let Some(git) = &own_git {
        env.insert("GIT_DIR".into(), git.display().to_string());
        env.insert("GIT_WORK_TREE".into(), start.cwd.display().to_string());
    }
    let (argv, stdin) = if runner.kind.is_harness() {
        let session = crate::runner::session_id(start.nonce);
        // The repository's git directory, and the worktree's own (`.git` in a worktree is a file
        // naming it).
        let mut git_dirs = vec![ctx.repo.root.join(".git").display().to_string()];
        if let Some(own) = crate::repo::read_text(&start.cwd.join(".git"))
            .ok()
            .and_then(|t| t.strip_prefix("gitdir:").map(|d| d.trim().to_owned()))
        {
            git_dirs.push(own);
        }
        git_dirs.extend(own_git.iter().map(|g| g.display().to_string()));
        // SPEC 24.11: a claude agent gets the guard's hook.
        let settings = (runner.kind == crate::runner::Kind::Claude)
            .then(|| crate::hook::claude::write_agent_settings(start.dir, &ctx.exe))
            .transpose()
            .map_err(|e| crate::repo::store_refusal(ctx.verb, e))?
            .map(|p| p.display().to_string());
        let mcp = mcp_server(ctx, runner.kind, &values);
        let argv = crate::runner::argv(
            runner.kind,
            &crate::runner::Invocation {
                program: &runner.argv[0],
                read_only: start.read_only,
                model: start.model.filter(|m| !m.is_empty()),
                effort: start.effort,
                session_id: &session,
                max_turns: runner.max_turns,
                transcripts: runner.transcripts,
                extra_args: &runner.args,
                git_dirs: &git_dirs,
                settings: settings.as_deref(),
                mcp: mcp.as_ref(),
                confined: confine.is_some(),
            },
        );
        (argv, Some(start.prompt.to_owned()))
    } else if runner.remote {
        // The brief on standard input; the child in the activity's own folder.
        (expand(&runner.argv, &values), Some(start.prompt.to_owned()))
    } else {
        (expand(&runner.argv, &values), None)
    };
    let mut env_templates = runner.env.clone();
    let mut discard = Vec::new();
    if confine.is_some() {
        let tmp = super::confinement::temp_dir(start.dir)
            .display()
            .to_string();
        for var in ["TMPDIR", "TMP", "TEMP"] {
            env.insert(var.into(), tmp.clone());
        }
        // SPEC 20.8: a confined harness keeps its state in a home of its own, seeded from the
        // person's (the runner's `env` first, then iced's environment, then the default). The
        // loop's value wins: it is in `env`, which an inherited variable does not replace, and
        // the runner's template for it is the person's home, not the child's.
        if let Some(var) = crate::runner::home::variable(runner.kind) {
            let vars: Vec<(String, String)> = std::env::vars().collect();
            let person = |k: &str| {
                runner
                    .env
                    .get(k)
                    .map(|t| crate::activity::expand_vars(t, &vars))
                    .filter(|v| !v.is_empty())
                    .or_else(|| std::env::var(k).ok())
            };
            let home = super::confinement::home_dir(start.dir);
            let seeded = crate::runner::home::seed(runner.kind, &person, &home)
                .map_err(|e| crate::repo::store_refusal(ctx.verb, e))?;
            discard.extend(seeded.iter().map(|name| home.join(name)));
            env.insert(var.into(), home.display().to_string());
            env_templates.remove(var);
        }
    }
    Ok(ActivitySpec {
        argv,
        cwd: if runner.remote {
            start.dir.to_owned()
        } else {
            start.cwd
        },
        env,
        timeout_ms: runner.timeout.as_millis() as u64,
        grace_ms: ctx.settings.kill_grace.as_millis() as u64,
        nonce: start.nonce.to_owned(),
        gate: start.gate,
        stdin,
        inherit_prefixes: runner
            .kind
            .credential_prefixes()
            .iter()
            .map(|p| (*p).to_owned())
            .collect(),
        env_templates,
        confine,
        discard,
    })
}

/// An `agent_start` event's `fields`, with `"confined": false` when the agent starts unconfined
/// because the person's user config says so (SPEC 24.12; a remote runner's agent is confined where
/// it runs, not here).
pub(crate) fn start_fields(
    spec: &ActivitySpec,
    runner: &super::settings::Runner,
    mut fields: Value,
) -> Value {
    if spec.confine.is_none() && !runner.remote {
        fields["confined"] = false.into();
    }
    fields
}

/// iced's MCP server for an agent of a lane (SPEC 20.8): the implementer's tools for the
/// implementer, the read tools for a validator or the refuter, started as the running iced on the
/// checkout (the harness starts it in the lane's worktree or a sandbox). Only claude and codex
/// take one, and no other role is given one.
fn mcp_server(
    ctx: &Ctx<'_>,
    kind: crate::runner::Kind,
    values: &[(&str, String)],
) -> Option<crate::runner::McpServer> {
    use crate::runner::Kind;
    if !matches!(kind, Kind::Claude | Kind::Codex) {
        return None;
    }
    let value = |key: &str| values.iter().find(|(k, _)| *k == key).map(|(_, v)| v);
    let role = match value("role")?.as_str() {
        "implementer" => "implementer",
        "validator" | "refuter" => "validator",
        _ => return None,
    };
    let mut args: Vec<String> = vec!["mcp".into(), "--repo".into()];
    args.push(ctx.repo.root.display().to_string());
    args.extend(["--role".into(), role.into()]);
    args.extend(["--run".into(), value("run")?.clone()]);
    args.extend(["--lane".into(), value("lane")?.clone()]);
    Some(crate::runner::McpServer {
        program: ctx.exe.display().to_string(),
        args,
    })
}

/// The environment a child of the loop gets: a few of iced's own variables, nothing that points
/// git or a tool somewhere else.
pub(crate) fn base_env() -> BTreeMap<String, String> {
    ["PATH", "HOME", "USER", "LANG", "TERM", "TMPDIR"]
        .into_iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_owned(), v)))
        .collect()
}

/// What a launch asks the gate about: the step record in the repository's state that must still
/// hold the launch's nonce. Written into the activity's spec, read back by its supervisor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Gate {
    pub root: PathBuf,
    pub run: String,
    pub lane: String,
    pub step: StepKey,
    pub attempt: u32,
}

/// The gate of the launch of `step` of `lane`, as its spec carries it.
pub(crate) fn gate_value(
    ctx: &Ctx<'_>,
    run: &str,
    lane: &str,
    step: &StepKey,
    attempt: u32,
) -> Value {
    let gate = Gate {
        root: ctx.repo.root.clone(),
        run: run.to_owned(),
        lane: lane.to_owned(),
        step: step.clone(),
        attempt,
    };
    serde_json::to_value(gate).expect("a gate serialises")
}

pub(crate) fn launch(ctx: &Ctx<'_>, dir: &Path, spec: &ActivitySpec) -> Result<(), Refusal> {
    // An activity runs in the checkout or in a worktree git made (or a folder of either): never
    // in what an agent left at a worktree's path (a link to the person's checkout, say). The
    // worktree is the nearest folder up from where it runs that holds a `.git`.
    let worktree = spec
        .cwd
        .ancestors()
        .find(|a| std::fs::symlink_metadata(a.join(".git")).is_ok());
    if let Some(worktree) = worktree.filter(|w| *w != ctx.repo.root) {
        super::stage::worktree::own_worktree(ctx, worktree).map(drop).map_err(|why| {
            let run = spec.gate.get("run").and_then(Value::as_str).unwrap_or("<run>");
            ctx.refuse(
                "worktree-replaced",
                format!(
                    "`{}` is not the worktree git made: {why}; nothing was started in it",
                    worktree.display()
                ),
                format!("look at what is there now (an agent may have replaced it); `iced run abandon {run}` ends the run and keeps its branch"),
            )
        })?;
    }
    ensure_dir(dir, ctx.verb)?;
    let launched = activity::launch(&ctx.exe, dir, spec).map_err(|e| io_error(ctx.verb, e))?;
    // Its supervisor is waited for until it has registered (at most 5 s), without the lock, so
    // that what this call reports is an agent under way. No caller's judgement hangs on this wait:
    // a supervisor still starting is told by its process, which `launch` recorded (SPEC 21.4; when
    // it was told by this wait and the age of the spec, a loaded machine beat both and the step
    // was started twice). The supervisor wakes the wait: its registration pipe ends.
    launched.await_registration(std::time::Duration::from_secs(5));
    Ok(())
}

/// What a harness's output says of a finished agent (SPEC 20.8): the `harness` record of the
/// step's outcome, and why the run failed if it did. When it did not, and the agent left no answer
/// at `output`, the one fenced `json` block of its final message is written there (0600): once,
/// so a call killed after writing it finds it there and reads it as the agent's.
pub(crate) fn read_harness(
    dir: &Path,
    runner: &super::settings::Runner,
    (exit_code, timed_out): (Option<i32>, bool),
    read_only: bool,
    output: &Path,
    transcript: Option<&Path>,
) -> (Value, Option<String>) {
    let kind = runner.kind;
    let stdout = crate::store::read_no_follow(&dir.join(activity::files::STDOUT), 1 << 20)
        .unwrap_or_default();
    let Some(mut result) = crate::runner::parse(kind, &String::from_utf8_lossy(&stdout)) else {
        let why = if timed_out {
            "it timed out before reporting a result".to_owned()
        } else {
            "its output holds no result".to_owned()
        };
        return (json!({"error": why}), Some(why));
    };
    let mut failed = result.failed(read_only).then(|| {
        result
            .error
            .clone()
            .unwrap_or_else(|| "the harness reported an error".into())
    });
    if failed.is_none() && exit_code != Some(0) {
        failed = Some(format!(
            "it exited with {}",
            exit_code.map_or_else(|| "a signal".to_owned(), |c| format!("code {c}"))
        ));
    }
    if failed.is_none() && !output.exists() {
        if let Some(answer) = result
            .final_text
            .as_deref()
            .and_then(crate::runner::fenced_json)
        {
            let _ = crate::store::write_atomic(output, answer.as_bytes(), 0o600);
            crate::failpoint::hit("answer-after-write");
        }
    }
    let copied = result
        .session_id
        .as_deref()
        .zip(transcript)
        .zip(harness_home(dir, kind))
        .and_then(|((session, to), home)| copy_transcript(runner, session, &home, to));
    if copied.is_some() {
        // Copied, not yet recorded: a replay copies it again over the same file.
        crate::failpoint::hit("transcript-after-copy");
    }
    // pi's session file holds every message once: its usage is whole, where the output's kept
    // tail may not be. (pi's own result always has turns and tokens: the keys keep their order.)
    if let (Some(copied), crate::runner::Kind::Pi) = (&copied, kind) {
        let text = crate::store::read_no_follow(Path::new(copied), 64 << 20)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        if let Some((turns, input, output, cost)) = crate::runner::pi_session_usage(&text) {
            result.turns = Some(turns);
            result.input_tokens = Some(input);
            result.output_tokens = Some(output);
            if let (Some(c), false) = (cost, result.is_error && input + output == 0) {
                result.cost_usd = crate::runner::cost(c);
            }
        }
    }
    let mut value = result.to_value();
    if let Some(copied) = copied {
        value["transcript"] = copied.into();
    }
    (value, failed)
}

/// The home the harness of the agent of activity `dir` kept its session in (SPEC 20.8): its own,
/// when it ran confined (the loop made it, a folder; an agent may have put a link in its place,
/// which is not followed), else the person's, as iced's environment names it.
fn harness_home(dir: &Path, kind: crate::runner::Kind) -> Option<PathBuf> {
    let own = super::confinement::home_dir(dir);
    match std::fs::symlink_metadata(&own) {
        Ok(m) if m.is_dir() => Some(own),
        Ok(_) => None,
        Err(_) => crate::runner::home::home_of(kind, &|k| std::env::var(k).ok()),
    }
}

/// Copy the transcript of session `session`, kept in the harness home `home`, to `to` (0600),
/// secrets redacted (SPEC 20.8): the values of the variables iced passes the harness for its
/// credentials, and keys by their shape. Done again whole by a call that died before recording
/// it. Returns the path written.
pub(crate) fn copy_transcript(
    runner: &super::settings::Runner,
    session: &str,
    home: &Path,
    to: &Path,
) -> Option<String> {
    let from = crate::runner::transcript_of(runner.kind, session, home)?;
    let text = crate::store::read_no_follow(&from, 64 * 1024 * 1024).ok()?;
    // Secrets: every variable of iced's environment named like one, and the values the runner's
    // `env` gives to variables named like one (whatever its template reads them from).
    let secret_name = |k: &str| {
        ["KEY", "TOKEN", "SECRET", "PASSWORD"]
            .iter()
            .any(|w| k.to_ascii_uppercase().contains(w))
    };
    let vars: Vec<(String, String)> = std::env::vars().collect();
    let mut secrets: Vec<String> = vars
        .iter()
        .filter(|(k, _)| secret_name(k))
        .map(|(_, v)| v.clone())
        .collect();
    secrets.extend(
        runner
            .env
            .iter()
            .filter(|(k, _)| secret_name(k))
            .map(|(_, t)| crate::activity::expand_vars(t, &vars)),
    );
    let clean = crate::runner::redact(&String::from_utf8_lossy(&text), &secrets);
    if let Some(parent) = to.parent() {
        crate::store::create_dir_all(parent).ok()?;
    }
    crate::store::write_atomic(to, clean.as_bytes(), 0o600).ok()?;
    Some(to.display().to_string())
}

/// Whether a launch `observe` calls [`activity::Observation::NotRegistered`] will never register:
/// its recorded supervisor is gone (the record is there, and observe found its process gone), or
/// none was recorded 10 seconds after its spec was written (a launcher killed or failed between the
/// two, whose window is one process start; wall clock of the file system, not `ICED_NOW`: a pinned
/// clock must not hide a crash). Declaring it crashed is safe even if it is only slow: the gate
/// then refuses it (SPEC 21.4).
pub(crate) fn launch_stale(dir: &Path, nonce: &str) -> bool {
    if activity::read_launched(dir).is_some_and(|r| r.nonce == nonce) {
        return true;
    }
    // The spec of this launch: one an earlier launch of the folder left says nothing of it.
    #[derive(serde::Deserialize)]
    struct Launch {
        nonce: String,
    }
    let spec = dir.join(activity::files::SPEC);
    let ours = crate::store::read_no_follow(&spec, 4 << 20)
        .ok()
        .and_then(|b| serde_json::from_slice::<Launch>(&b).ok())
        .is_some_and(|l| l.nonce == nonce);
    ours && std::fs::metadata(spec)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age > std::time::Duration::from_secs(10))
}

/// The gate a supervisor asks before it starts its child: is this launch still current?
pub struct RunGate;

impl activity::Gate for RunGate {
    fn register(
        &self,
        gate: &Value,
        nonce: &str,
        pid: u32,
        pid_start: u64,
    ) -> Result<bool, String> {
        // A memory draft's agent (SPEC 20.15): the first supervisor to claim the launch's folder
        // starts it; any other never does.
        if let Some(dir) = gate.get("memory").and_then(Value::as_str) {
            return memory_register(Path::new(dir));
        }
        let Gate {
            root,
            run: run_id,
            lane: lane_id,
            step,
            attempt,
        } = Gate::deserialize(gate).map_err(|e| format!("the gate does not read: {e}"))?;
        let paths = RunPaths::new(&root);
        let _lock = StateLock::acquire(&paths, "supervise", std::time::Duration::from_secs(60))
            .map_err(|r| r.reason)?;
        let mut state = State::load(&paths, "supervise").map_err(|r| r.reason)?;
        let Some(run) = state.runs.get_mut(&run_id) else {
            return Ok(false);
        };
        if run.status.is_ended() {
            return Ok(false);
        }
        let Some(lane) = run.lane_mut(&lane_id) else {
            return Ok(false);
        };
        if lane.attempt != attempt || lane.stage.is_final() {
            return Ok(false);
        }
        let Some(record) = lane.record_mut(&step) else {
            return Ok(false);
        };
        if record.status != StepStatus::Started || record.nonce.as_deref() != Some(nonce) {
            return Ok(false);
        }
        record.pid = Some(pid);
        record.pid_start = Some(pid_start);
        state.save(&paths, "supervise").map_err(|r| r.reason)?;
        Ok(true)
    }
}

/// A memory draft's launch (SPEC 20.15) registers by creating its folder's `registered` file:
/// only the first supervisor to do so starts the agent.
fn memory_register(dir: &Path) -> Result<bool, String> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(dir.join("registered"))
    {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(format!("`{}`: {e}", dir.display())),
    }
}

/// The value of placeholder `key` among `values`, empty when there is none.
fn value_of<'a>(values: &'a [(&str, String)], key: &str) -> &'a str {
    values
        .iter()
        .find(|(k, _)| *k == key)
        .map_or("", |(_, v)| v.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The supervisor reads the gate the loop wrote into the spec: the same keys, in the same
    /// order, as it always was.
    #[test]
    fn a_gate_is_written_as_it_always_was_and_reads_back() {
        let written = r#"{"root":"/r","run":"run-1","lane":"a","step":"dod-0-1","attempt":2}"#;
        let gate = Gate {
            root: "/r".into(),
            run: "run-1".into(),
            lane: "a".into(),
            step: StepKey::Dod { seq: 0, cmd: 1 },
            attempt: 2,
        };
        assert_eq!(serde_json::to_value(&gate).unwrap().to_string(), written);
        let read: Value = serde_json::from_str(written).unwrap();
        assert_eq!(Gate::deserialize(&read).unwrap(), gate);
        assert!(Gate::deserialize(&serde_json::json!({"root": "/r"})).is_err());
    }

    #[test]
    fn a_launch_is_stale_ten_seconds_after_its_spec_was_written() {
        let dir = tempfile::tempdir().unwrap();
        assert!(
            !launch_stale(dir.path(), "n1"),
            "no spec: nothing launched yet"
        );
        let spec = dir.path().join(activity::files::SPEC);
        std::fs::write(&spec, r#"{"nonce":"n1"}"#).unwrap();
        assert!(!launch_stale(dir.path(), "n1"));
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(11);
        std::fs::File::options()
            .write(true)
            .open(&spec)
            .unwrap()
            .set_modified(old)
            .unwrap();
        assert!(launch_stale(dir.path(), "n1"));
        // An earlier launch's spec says nothing of this launch, which has not written its own.
        assert!(!launch_stale(dir.path(), "n2"));
    }

    #[test]
    fn a_launch_whose_recorded_supervisor_is_gone_unregistered_is_stale_at_once() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(activity::files::SPEC), r#"{"nonce":"n1"}"#).unwrap();
        assert!(
            !launch_stale(dir.path(), "n1"),
            "a fresh spec, nothing recorded"
        );
        // Asked only of a launch `observe` found unregistered and not starting: the supervisor
        // the launcher recorded has gone.
        std::fs::write(
            dir.path().join(activity::files::LAUNCHED),
            r#"{"pid":1,"pid_start":1,"nonce":"n1"}"#,
        )
        .unwrap();
        assert!(launch_stale(dir.path(), "n1"));
        assert!(!launch_stale(dir.path(), "n2"), "another launch's record");
    }
}
