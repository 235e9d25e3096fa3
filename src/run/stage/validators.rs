//! The validate stage (SPEC 22.1, 22.2, 24.3): which validators judge a lane, each one's sandbox
//! (a checkout of the head the receipt recorded) and prompt, launched through the validator
//! runner or handed to the host, then its tree and its answer checked. The refuter is started and
//! checked the same way (`refute` is a validator step of its own).

use crate::refusal::Refusal;
use crate::run::ctx::Ctx;
use crate::run::events::{emit, Event};
use crate::run::keys::StepKey;
use crate::run::launch::{gate_value, launch};
use crate::run::outcome::{ActivityOutcome, ReceiptOutcome, ValidatorOutcome};
use crate::run::records::{archive, finish, me, new_nonce, record_after, started};
use crate::run::reply::Action;
use crate::run::reply::StepReport;
use crate::run::state::{Driver, Lane, Run, Stage, StepRecord, StepStatus};
use crate::run::then::{Redo, Then};
use crate::run::validate::{self, Finding, Fingerprint};
use serde::Deserialize;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

pub(crate) fn name_of(key: &StepKey) -> &str {
    key.validator_name().unwrap_or("")
}

pub(crate) fn role_of(key: &StepKey) -> &'static str {
    key.role()
}

/// The sandbox a validator reads in: a detached checkout of the lane's head, beside the lane's
/// worktree, named by run, lane, attempt and validator (SPEC 22.1). git names its entry for a
/// worktree by the folder's name: a name no other sandbox has is never an entry another lane's
/// git is adding or removing (issue 36: every lane's was `full-1`).
pub(crate) fn sandbox(run: &str, lane: &Lane, key: &StepKey, attempt: u32) -> PathBuf {
    let worktree = lane.worktree.clone().unwrap_or_default();
    PathBuf::from(format!("{worktree}.validators")).join(format!(
        "{run}-{}-{attempt}-{}",
        lane.id,
        name_of(key)
    ))
}

/// The sandbox a prepared validator was given, as its record says (a run an earlier iced
/// prepared names `<name>-<attempt>`), else [`sandbox`].
pub(crate) fn sandbox_of(run: &str, lane: &Lane, key: &StepKey, attempt: u32) -> PathBuf {
    lane.steps
        .iter()
        .find(|r| r.step == *key && r.attempt == attempt)
        .and_then(|r| r.outcome_as::<ValidatorOutcome>())
        .and_then(|o| o.worktree)
        .map_or_else(|| sandbox(run, lane, key, attempt), PathBuf::from)
}

pub(crate) fn output_path(
    ctx: &Ctx<'_>,
    run: (&str, u32),
    lane: &str,
    key: &StepKey,
    attempt: u32,
) -> PathBuf {
    ctx.answer_folder(run, lane, key, attempt)
        .join("output.json")
}

pub(crate) fn prompt_path(
    ctx: &Ctx<'_>,
    run: &str,
    lane: &str,
    key: &StepKey,
    attempt: u32,
) -> PathBuf {
    ctx.activity_dir(run, lane, key, attempt).join("prompt.md")
}

/// Remove the sandbox at `path`, once (SPEC 21.3): under the repository's worktree lock, a
/// sandbox still there is removed with git's entry for it; one already gone (its check removed
/// it, or the delivery did) is left alone. git's entry for a folder gone another way (a person's
/// `rm`) is removed by its path, never by `git worktree prune`, which would drop the entries of
/// every folder missing at that moment, another lane's among them.
pub(crate) fn remove_sandbox(ctx: &Ctx<'_>, path: &Path) {
    let shown = path.display().to_string();
    // Looked at under the lock: a remove of the same sandbox at once (its check's and the
    // delivery's) finds it gone and does nothing.
    if let Ok(held) = ctx.worktree_lock() {
        if path.exists() {
            let removed = held.git(&["worktree", "remove", "--force", &shown]);
            if removed.is_err() && path.exists() {
                let _ = std::fs::remove_dir_all(path);
            }
            drop(held);
            crate::failpoint::hit("validator-after-remove");
        }
    }
    // The `<lane>.validators` folder goes when its last sandbox does.
    if let Some(parent) = path.parent() {
        let _ = std::fs::remove_dir(parent);
    }
}

/// A fresh sandbox at `path`, a detached checkout of `head`, whatever was there: one hold of the
/// worktree lock (SPEC 21.3). A `git worktree add` of a call killed here holds the lock as long
/// as it runs, so what it made is found and removed first. An entry git kept for a folder gone
/// another way is removed by its path, and the sandbox added again.
fn add_sandbox(ctx: &Ctx<'_>, path: &Path, head: &str) -> Result<(), String> {
    let held = ctx.worktree_lock()?;
    let shown = path.display().to_string();
    if path.exists() {
        let removed = held.git(&["worktree", "remove", "--force", &shown]);
        if removed.is_err() && path.exists() {
            std::fs::remove_dir_all(path).map_err(|e| format!("remove `{shown}`: {e}"))?;
        }
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("create `{}`: {e}", parent.display()))?;
    }
    let add = ["worktree", "add", "--quiet", "--detach", &shown, head];
    held.git(&add).map(|_| ()).or_else(|first| {
        if held
            .git(&["worktree", "remove", "--force", &shown])
            .is_err()
        {
            return Err(first);
        }
        held.git(&add).map(|_| ())
    })
}

/// The validators of a unit: its lenses (`verify.lenses`, `auto` picked by tier and risk) and the
/// configured reviewers.
pub fn validators_for(ctx: &Ctx<'_>, lane: &Lane) -> Vec<String> {
    // A review is its reviewers, whatever `verify.independent` says (SPEC 20.14).
    if !ctx.settings.independent && lane.review.is_none() {
        return Vec::new();
    }
    let mut names = match &ctx.settings.lenses {
        Some(list) => list.clone(),
        // A review's `auto` is one `full` reviewer (SPEC 20.14).
        None if lane.review.is_some() => vec!["full".into()],
        None => match crate::repo::read_text(&ctx.repo.unit_paths(&lane.unit).iced) {
            Ok(text) => validate::auto_lenses(&crate::unit::parse_unit(&text)),
            Err(_) => vec!["full".into()],
        },
    };
    for r in &ctx.settings.reviewers {
        if !names.contains(r) {
            names.push(r.clone());
        }
    }
    names
}

/// The lane's validators as fixed when it first validated (computed for older states).
pub fn pinned_validators(ctx: &Ctx<'_>, lane: &Lane) -> Vec<String> {
    if lane.validators.is_empty() {
        validators_for(ctx, lane)
    } else {
        lane.validators.clone()
    }
}

/// The validators' runner works remotely (SPEC 20.19).
pub(crate) fn remote_validators(ctx: &Ctx<'_>) -> bool {
    ctx.settings.validator.as_ref().is_some_and(|r| r.remote)
}

/// The head the receipt judged, which the validators judge.
fn judged_head(lane: &Lane) -> String {
    lane.outcome_as::<ReceiptOutcome>(&StepKey::Receipt)
        .and_then(|r| r.head)
        .unwrap_or_default()
}

pub fn validator_driver(ctx: &Ctx<'_>) -> Driver {
    if ctx.settings.validator.is_some() {
        Driver::Process
    } else {
        Driver::Host
    }
}

/// Record `started` for each validator step to prepare (this call owns them).
pub fn mark_prepare(lane: &mut Lane, keys: &[StepKey]) {
    let attempt = lane.attempt;
    for key in keys {
        lane.steps
            .retain(|r| !(r.step == *key && r.attempt == attempt));
        lane.steps.push(started(key.clone(), attempt, None, None));
    }
}

/// Give each process-driven validator step its launch nonce, owned by this call until the
/// supervisor registers.
pub fn mark_launch(lane: &mut Lane, keys: &[StepKey]) -> Vec<(StepKey, String)> {
    let (pid, pid_start) = me();
    let mut out = Vec::new();
    for key in keys {
        if let Some(r) = lane.record_mut(key) {
            let nonce = new_nonce();
            r.nonce = Some(nonce.clone());
            r.pid = Some(pid);
            r.pid_start = pid_start;
            out.push((key.clone(), nonce));
        }
    }
    out
}

/// Hand one validator to the host: mark it handed and say what to start.
pub fn hand(ctx: &Ctx<'_>, run: &mut Run, lane_id: &str, key: &StepKey) -> StepReport {
    let run_id = run.id.clone();
    let lane = run.lane_mut(lane_id).expect("lane");
    let attempt = lane.attempt;
    let sandbox = sandbox_of(&run_id, lane, key, attempt);
    let record = lane.record_mut(key).expect("a prepared record");
    let first = !record
        .outcome_as::<ValidatorOutcome>()
        .is_some_and(|o| o.handed);
    if let Some(Value::Object(o)) = record.outcome.as_mut() {
        o.insert("handed".into(), true.into());
    }
    let nonce = record.nonce.clone();
    if first {
        emit(
            &ctx.paths,
            &run_id,
            Event::AgentStart,
            json!({"lane": lane_id, "attempt": attempt, "role": role_of(key), "lens": name_of(key), "driver": "host"}),
        );
    }
    let lane = run.lane(lane_id).expect("lane");
    let mut report = StepReport::for_lane(
        run,
        lane,
        Action::StartAgent,
        Then::StartValidator {
            role: role_of(key),
            lens: name_of(key).to_owned(),
        },
    );
    report.role = Some(role_of(key));
    report.lens = Some(name_of(key).to_owned());
    report.read_only = Some(true);
    report.brief = Some(
        prompt_path(ctx, &run_id, lane_id, key, attempt)
            .display()
            .to_string(),
    );
    report.worktree = Some(sandbox.display().to_string());
    report.receipt_path = Some(
        output_path(ctx, (&run_id, run.brief_layout), lane_id, key, attempt)
            .display()
            .to_string(),
    );
    report.receipt_key = nonce;
    report
}

/// Throw away a validator step that crashed or changed its tree; it is prepared again from scratch.
pub fn redo(ctx: &Ctx<'_>, run_id: &str, lane: &mut Lane, key: &StepKey) -> Result<Then, Refusal> {
    let old = lane.take_current(key);
    let mutated = old.iter().any(|r| {
        r.outcome_as::<ValidatorOutcome>()
            .is_some_and(|o| o.mutation.is_some())
    });
    let limited = old.iter().any(crate::run::decide::rate_limited);
    let unreachable = old.iter().any(crate::run::decide::remote_unreachable);
    if mutated {
        lane.mutations += 1;
    } else if !limited && !unreachable {
        lane.crashes += 1;
    }
    archive(ctx, run_id, &lane.id, &old)?;
    Ok(Then::ValidatorRedone {
        key: key.clone(),
        why: if mutated {
            Redo::ChangedTree
        } else if limited {
            Redo::RateLimited
        } else if unreachable {
            Redo::RemoteUnreachable
        } else {
            Redo::Crashed
        },
    })
}

/// Make each validator's sandbox, fingerprint it, write its prompt; then record each prepared.
pub fn prepare(
    ctx: &Ctx<'_>,
    snapshot: &Run,
    lane_id: &str,
    keys: &[StepKey],
) -> Result<StepReport, Refusal> {
    let lane = snapshot.lane(lane_id).expect("lane");
    let attempt = lane.attempt;
    let root = &ctx.repo.root;
    let branch = lane.branch.clone().unwrap_or_default();
    let worktree = PathBuf::from(lane.worktree.clone().unwrap_or_default());
    let unit_text = crate::repo::read_text(&ctx.repo.unit_paths(&lane.unit).iced)
        .map_err(|e| e.refusal(ctx.verb))?;
    let receipt = lane
        .outcome(&StepKey::Receipt)
        .cloned()
        .unwrap_or(Value::Null);
    let current = crate::git::run(
        &worktree,
        &["rev-parse", "--verify", &format!("refs/heads/{branch}")],
    )
    .unwrap_or_default();
    // The validators judge the head the receipt checked, never a later one (SPEC 24.3): a lane
    // that moved since fails this round, and `decide` starts a new attempt.
    let head = ReceiptOutcome::deserialize(&receipt)
        .ok()
        .and_then(|r| r.head)
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| current.clone());
    if current != head {
        let commits: Vec<String> = crate::git::run(
            &worktree,
            &[
                "log",
                "--reverse",
                "--format=%h %s",
                &format!("{head}..{current}"),
            ],
        )
        .map(|l| l.lines().map(str::to_owned).collect())
        .unwrap_or_default();
        let moved = json!({"judged": head, "head": current, "commits": commits});
        return record_moved(ctx, snapshot, lane_id, keys, moved);
    }
    // Remote validators clone the remote lane branch: it is put at the judged head (SPEC 20.19).
    if remote_validators(ctx) {
        match super::remote::publish(ctx, &snapshot.id, lane_id, &branch, &head) {
            Ok(()) => {}
            Err(u) if u.unreachable => {
                return record_unreachable(ctx, snapshot, lane_id, keys, &u.why)
            }
            Err(u) => {
                let moved = json!({"judged": head, "head": "", "commits": [], "remote": u.why});
                return record_moved(ctx, snapshot, lane_id, keys, moved);
            }
        }
    }
    let mut base = snapshot.base_of(lane).to_owned();
    let changed: Vec<String> = crate::git::run(
        &worktree,
        &["diff", "--name-only", &format!("{base}..{head}")],
    )
    .unwrap_or_default()
    .lines()
    .map(str::to_owned)
    .collect();
    // A review's reviewers read its target: the range and the files it names (SPEC 20.14).
    let (head, changed) = match &lane.review {
        Some(t) => {
            base.clone_from(&t.from);
            (t.to.clone(), t.paths.clone())
        }
        None => (head, changed),
    };
    let kept_report: Value =
        crate::run::kept::load_from(Some(&receipt), "report").unwrap_or(Value::Null);
    let report = json!({"summary": kept_report["summary"], "evidence": kept_report["evidence"]});
    let rules = crate::run::stage::brief::ancestor_rules(ctx.repo, &unit_text);
    let rejected: Vec<Finding> = lane
        .findings
        .iter()
        .filter(|f| f.status == "rejected")
        .cloned()
        .collect();
    let to_refute: Vec<Finding> = lane
        .findings
        .iter()
        .filter(|f| f.round == attempt && f.status == "open")
        .cloned()
        .collect();
    let mut prepared: Vec<(StepKey, Value)> = Vec::new();
    for key in keys {
        let dir = ctx.activity_dir(&snapshot.id, lane_id, key, attempt);
        crate::run::state::ensure_dir(&dir, ctx.verb)?;
        let path = sandbox(&snapshot.id, lane, key, attempt);
        if let Err(e) = add_sandbox(ctx, &path, &head) {
            return Err(crate::refusal::io_error(
                ctx.verb,
                format!("the sandbox of `{key}`: {e}"),
            ));
        }
        let shown = path.display().to_string();
        let lane_worktree = lane.worktree.as_ref().map(PathBuf::from);
        let print = validate::fingerprint(&path, root, &branch, lane_worktree.as_deref())
            .map_err(|e| crate::refusal::io_error(ctx.verb, e))?;
        write_json(
            &dir.join("fingerprint.json"),
            &serde_json::to_value(&print).expect("serialises"),
            ctx.verb,
        )?;
        let output = output_path(
            ctx,
            (&snapshot.id, snapshot.brief_layout),
            lane_id,
            key,
            attempt,
        );
        // Its answer's own folder, for a host's agent as for the loop's (SPEC 21.1).
        crate::run::state::ensure_dir(output.parent().expect("an answer's folder"), ctx.verb)?;
        let _ = std::fs::remove_file(&output);
        let mut prompt = validate::render_prompt(&validate::PromptInput {
            name: name_of(key),
            role: role_of(key),
            unit: &lane.unit,
            unit_text: &unit_text,
            ancestor_rules: &rules,
            report: &report,
            commands: &receipt["commands"],
            changed_files: &changed,
            base: &base,
            head: &head,
            worktree: &path,
            output: &output,
            rejected: &rejected,
            to_refute: &to_refute,
        });
        // From brief layout 3 on, the prompt ends with the command that hands its answer in.
        if snapshot.brief_layout >= 3 {
            prompt.push_str("\n\n");
            prompt.push_str(&crate::run::stage::brief::hand_in_line(
                &output,
                &snapshot.id,
                "answer",
            ));
        }
        crate::store::write_atomic(
            &prompt_path(ctx, &snapshot.id, lane_id, key, attempt),
            prompt.as_bytes(),
            0o600,
        )
        .map_err(|e| crate::repo::store_refusal(ctx.verb, e))?;
        prepared.push((
            key.clone(),
            json!({"prepared": true, "worktree": shown, "output": output}),
        ));
    }
    crate::failpoint::hit("validator-after-prepare");
    let (mine, _) = me();
    let host = validator_driver(ctx) == Driver::Host;
    ctx.transact_pub(|state| {
        let run = state.runs.get_mut(&snapshot.id).expect("run");
        let lane = run.lane_mut(lane_id).expect("lane");
        for (key, outcome) in &prepared {
            if let Some(r) = lane
                .record_mut(key)
                .filter(|r| r.status == StepStatus::Started && r.pid == Some(mine))
            {
                r.outcome = Some(outcome.clone());
                r.pid = None;
                r.pid_start = None;
                if host {
                    // The host's receipt key for this validator.
                    r.nonce = Some(new_nonce());
                }
            }
        }
        let lane = run.lane(lane_id).expect("lane");
        Ok(StepReport::for_lane(
            run,
            lane,
            Action::Advanced,
            Then::ValidatorsPrepared {
                refuter: keys.iter().all(|k| *k == StepKey::Refute),
            },
        ))
    })
}

/// Fail the validator steps this call prepares with `outcome`; `then` does the rest to the run
/// and says what comes next.
fn fail_prepared(
    ctx: &Ctx<'_>,
    (snapshot, lane_id, keys): (&Run, &str, &[StepKey]),
    outcome: Value,
    then: impl FnOnce(&mut Run) -> Then,
) -> Result<StepReport, Refusal> {
    let (mine, _) = me();
    ctx.transact_pub(|state| {
        let run = state.runs.get_mut(&snapshot.id).expect("run");
        let lane = run.lane_mut(lane_id).expect("lane");
        for key in keys {
            if let Some(r) = lane
                .record_mut(key)
                .filter(|r| r.status == StepStatus::Started && r.pid == Some(mine))
            {
                finish(r, StepStatus::Failed, outcome.clone());
            }
        }
        let then = then(run);
        let lane = run.lane(lane_id).expect("lane");
        Ok(StepReport::for_lane(run, lane, Action::Advanced, then))
    })
}

/// The lane moved after its receipt: fail the validator steps this call prepares, naming how.
pub(crate) fn record_moved(
    ctx: &Ctx<'_>,
    snapshot: &Run,
    lane_id: &str,
    keys: &[StepKey],
    moved: Value,
) -> Result<StepReport, Refusal> {
    let outcome = json!({ "moved": moved });
    fail_prepared(ctx, (snapshot, lane_id, keys), outcome, |_| {
        let moved = json!({"lane": lane_id, "moved": moved});
        emit(&ctx.paths, &snapshot.id, Event::LaneMoved, moved);
        Then::LaneMovedAfterReceipt
    })
}

/// The remote could not be reached to publish the lane branch before remote validators (SPEC
/// 20.19): the validator steps this call prepares fail, through no fault of the lane, and run
/// again once the run's backoff has passed (SPEC 20.10).
fn record_unreachable(
    ctx: &Ctx<'_>,
    snapshot: &Run,
    lane_id: &str,
    keys: &[StepKey],
    why: &str,
) -> Result<StepReport, Refusal> {
    let outcome = json!({"remote": why, "unreachable": true});
    fail_prepared(ctx, (snapshot, lane_id, keys), outcome, |run| {
        crate::run::backoff::pace_after(ctx, run, crate::run::backoff::Backoff::Unreachable(why));
        Then::Reason(format!(
            "the lane branch was not published: {why}; the run backs off: call again"
        ))
    })
}

/// Launch prepared validators through the validator role's runner.
pub fn launch_all(
    ctx: &Ctx<'_>,
    snapshot: &Run,
    lane_id: &str,
    keys: &[(StepKey, String)],
) -> Result<StepReport, Refusal> {
    let lane = snapshot.lane(lane_id).expect("lane");
    let runner = ctx.settings.validator.as_ref().expect("a validator runner");
    for (key, nonce) in keys {
        let dir = ctx.activity_dir(&snapshot.id, lane_id, key, lane.attempt);
        let sandbox = sandbox_of(&snapshot.id, lane, key, lane.attempt);
        let prompt = prompt_path(ctx, &snapshot.id, lane_id, key, lane.attempt);
        let output = output_path(
            ctx,
            (&snapshot.id, snapshot.brief_layout),
            lane_id,
            key,
            lane.attempt,
        );
        let (model, effort) = ctx.settings.validator_model_for(name_of(key));
        let mut values: Vec<(&str, String)> = vec![
            ("prompt_file", prompt.display().to_string()),
            ("output_file", output.display().to_string()),
            ("worktree", sandbox.display().to_string()),
            ("role", role_of(key).into()),
            ("model", model.clone().unwrap_or_default()),
            ("effort", effort.clone().unwrap_or_default()),
            ("run", snapshot.id.clone()),
            ("lane", lane_id.to_owned()),
            ("attempt", lane.attempt.to_string()),
        ];
        if runner.remote {
            values.extend(super::remote::values(
                ctx,
                snapshot,
                lane,
                &judged_head(lane),
            ));
        }
        let mut spec = crate::run::launch::agent_spec(
            ctx,
            runner,
            &values,
            crate::run::launch::AgentStart {
                read_only: true,
                nonce,
                model: model.as_deref(),
                effort: effort.as_deref(),
                prompt: &prompt,
                cwd: sandbox,
                gate: gate_value(ctx, &snapshot.id, lane_id, key, lane.attempt),
                dir: &dir,
            },
        )?;
        spec.env.insert("ICED_LENS".into(), name_of(key).into());
        // Its launch recorded (a nonce in the state), no supervisor yet: a call killed here left
        // a validator that never ran, launched again by the next call (SPEC 21.4).
        crate::failpoint::hit("validator-after-record");
        // Logged before the launch, as the implementer's is.
        emit(
            &ctx.paths,
            &snapshot.id,
            Event::AgentStart,
            crate::run::launch::start_fields(
                &spec,
                runner,
                json!({"lane": lane_id, "attempt": lane.attempt, "role": role_of(key), "lens": name_of(key), "step": key, "runner": runner.name}),
            ),
        );
        launch(ctx, &dir, &spec)?;
        crate::failpoint::hit("validator-after-launch");
    }
    Ok(StepReport::for_lane(
        snapshot,
        lane,
        Action::Waiting,
        Then::ValidatorsRunning {
            refuter: keys.iter().all(|(k, _)| *k == StepKey::Refute),
        },
    ))
}

/// A validator is done: did its tree move, and what did it answer?
pub fn check(
    ctx: &Ctx<'_>,
    snapshot: &Run,
    lane_id: &str,
    key: &StepKey,
) -> Result<StepReport, Refusal> {
    let lane = snapshot.lane(lane_id).expect("lane");
    let attempt = lane.attempt;
    let dir = ctx.activity_dir(&snapshot.id, lane_id, key, attempt);
    let path = sandbox_of(&snapshot.id, lane, key, attempt);
    let branch = lane.branch.clone().unwrap_or_default();
    let before: Option<Fingerprint> =
        crate::store::read_no_follow(&dir.join("fingerprint.json"), 1 << 20)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
    let lane_worktree = lane.worktree.as_ref().map(PathBuf::from);
    let after = validate::fingerprint(&path, &ctx.repo.root, &branch, lane_worktree.as_deref());
    let mut moved = match (&before, &after) {
        (Some(b), Ok(a)) => validate::moved(b, a),
        (_, Err(e)) => vec![format!("the sandbox could not be read: {e}")],
        (None, _) => vec!["the fingerprint taken before it started is missing".into()],
    };
    // A remote validator's pushes: the remote lane branch must still be the judged head.
    if remote_validators(ctx) {
        let judged = judged_head(lane);
        match super::remote::remote_tip(ctx, &branch) {
            Ok(now) if now.as_deref() == Some(judged.as_str()) => {}
            Ok(now) => moved.push(format!(
                "the lane branch moved on the remote: {judged} -> {}",
                now.unwrap_or_else(|| "deleted".into())
            )),
            Err(e) => moved.push(format!(
                "the lane branch moved on the remote: it could not be read: {e}"
            )),
        }
    }
    // The lane itself was changed, not only the validator's own checkout.
    let lane_branch_moved = moved.iter().any(|m| {
        m.starts_with("the lane branch moved") || m.starts_with("the lane's worktree changed")
    });
    let output = output_path(
        ctx,
        (&snapshot.id, snapshot.brief_layout),
        lane_id,
        key,
        attempt,
    );
    // A harness's own result first: a failed run is a crash, and its answer may be in its final
    // message rather than in the output file (SPEC 20.8).
    let harness = ctx
        .settings
        .validator
        .as_ref()
        .filter(|r| r.kind.is_harness())
        .map(|r| {
            // What the validator's activity ended with.
            let finished: ActivityOutcome = lane
                .record(key)
                .and_then(|rec| rec.outcome_as::<ValidatorOutcome>())
                .and_then(|o| o.finished)
                .and_then(|f| ActivityOutcome::deserialize(&f).ok())
                .unwrap_or_default();
            let exit_code = finished.exit_code.and_then(|c| i32::try_from(c).ok());
            let timed_out = finished.timed_out;
            // `validator-<lens>` (or `refuter`): a stage has several.
            let role = if *key == StepKey::Refute {
                "refuter".to_owned()
            } else {
                format!("validator-{}", name_of(key))
            };
            let transcript = ctx.transcript_path(&snapshot.id, lane_id, &role, attempt);
            crate::run::launch::read_harness(
                &dir,
                r,
                (exit_code, timed_out),
                true,
                &output,
                r.transcripts.then_some(transcript.as_path()),
            )
        });
    // The answer is checked strictly and a copy kept in a file of the loop's own; the state names
    // the copy, never the answer (SPEC 24.5).
    let parsed: Result<crate::run::kept::Kept, String> =
        crate::run::answer::read_answer(ctx, lane, key, &output)
            .map_err(|p| format!("{}: {}", p.code, p.message))
            .and_then(|answer| {
                crate::run::kept::keep(&dir.join("answer.json"), &answer).map_err(|e| e.to_string())
            });
    // The sandbox goes only once its check is recorded: a call that dies before would leave the
    // next one a missing sandbox, which it could not tell from a validator that removed it.
    crate::failpoint::hit("validator-after-check");
    let report = record_after(ctx, &snapshot.id, lane_id, key, |l, record| {
        let finished = record
            .outcome
            .as_ref()
            .and_then(|o| o.get("finished"))
            .cloned()
            .unwrap_or(Value::Null);
        if let Some((result, Some(why))) = &harness {
            // Rate limited: nobody's fault, and the run is paced below; else a crash.
            let cause = if result["rate_limited"] == true {
                "rate_limited"
            } else {
                "crashed"
            };
            finish(
                record,
                StepStatus::Failed,
                json!({cause: true, "harness_failed": why, "harness": result, "finished": finished}),
            );
            return Ok((
                Action::Advanced,
                Then::ValidatorFailed {
                    key: key.clone(),
                    why: why.to_string(),
                },
            ));
        }
        if !moved.is_empty() {
            finish(
                record,
                StepStatus::Failed,
                json!({"mutation": moved, "finished": finished}),
            );
            emit(
                &ctx.paths,
                &snapshot.id,
                Event::ValidatorMutation,
                json!({"lane": lane_id, "step": key, "attempt": attempt, "moved": moved}),
            );
            if lane_branch_moved {
                // The lane itself was changed: re-running on a clean tree is no longer possible
                // without restoring by force, which the loop never does.
                let mv = crate::run::decide::after_validator_moved_lane(key, &moved);
                crate::run::records::apply_move(ctx, &snapshot.id, l, mv)?;
                emit(
                    &ctx.paths,
                    &snapshot.id,
                    Event::RunBlocked,
                    json!({"lane": lane_id, "reason": l.reason}),
                );
                return Ok((
                    Action::Blocked,
                    Then::Reason(l.reason.clone().unwrap_or_default()),
                ));
            }
            return Ok((
                Action::Advanced,
                Then::ValidatorChangedTree {
                    key: key.clone(),
                    moved: moved.clone(),
                },
            ));
        }
        // No usable answer: this lens needs a person (it never blocks by itself).
        let mut outcome = match &parsed {
            Ok(kept) => json!({"answer": kept, "finished": finished}),
            Err(problem) => json!({"answer": null, "problem": problem, "finished": finished}),
        };
        if let Some((result, _)) = &harness {
            outcome["harness"] = result.clone();
        }
        finish(record, StepStatus::Done, outcome);
        Ok((
            Action::Advanced,
            Then::ValidatorAnswered { key: key.clone() },
        ))
    });
    if report.is_ok() {
        remove_sandbox(ctx, &path);
    }
    report
}

/// Remove every sandbox a lane's validators left, and their folder; before delivering, when no
/// validator of the lane runs. A call that died between recording a check and removing its
/// sandbox leaves one; a call that died after removing the last sandbox leaves the folder empty.
pub fn remove_sandboxes(ctx: &Ctx<'_>, lane: &Lane) {
    let Some(worktree) = &lane.worktree else {
        return;
    };
    let dir = PathBuf::from(format!("{worktree}.validators"));
    for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        remove_sandbox(ctx, &entry.path());
    }
    let _ = std::fs::remove_dir(&dir);
}

pub(crate) fn write_json(path: &Path, value: &Value, step: &str) -> Result<(), Refusal> {
    let mut text = serde_json::to_vec_pretty(value).expect("serialises");
    text.push(b'\n');
    crate::store::write_atomic(path, &text, 0o600).map_err(|e| crate::repo::store_refusal(step, e))
}

/// `implement receipt <path>` for a host-driven validator or refuter: the answer is checked now
/// (a malformed one is refused, so the host can have it fixed; an unparsable one is taken, and
/// that lens needs a person), then the loop checks the tree on the next step.
pub fn host_answer(
    ctx: &Ctx<'_>,
    run: &mut Run,
    given: &Path,
    said: &crate::run::host::HostAgent,
) -> Result<Option<StepReport>, Refusal> {
    let run_id = run.id.clone();
    // The lane whose validator writes to `given` (a project run has several in validation).
    let mut hit = None;
    for (i, lane) in run.lanes.iter().enumerate() {
        if !matches!(lane.stage, Stage::Validate | Stage::Refute) {
            continue;
        }
        let attempt = lane.attempt;
        for r in lane
            .steps
            .iter()
            .filter(|r| r.attempt == attempt && r.status == StepStatus::Started)
        {
            if !r.step.is_validator() {
                continue;
            }
            let expected =
                output_path(ctx, (&run_id, run.brief_layout), &lane.id, &r.step, attempt);
            if expected.canonicalize().unwrap_or(expected.clone()) == given {
                hit = Some((i, r.step.clone(), expected));
            }
        }
    }
    let Some((index, key, path)) = hit else {
        return Ok(None);
    };
    let lane = &mut run.lanes[index];
    let attempt = lane.attempt;
    if let Err(p) = crate::run::answer::read_answer(ctx, lane, &key, &path) {
        if p.code != "answer-unparsable" {
            let remedy = match p.code {
                "answer-too-large" => "shorten the answer (at most 256 KiB) and hand it in again",
                "path-symlink" | "not-a-regular-file" => "have the agent write the answer as a regular file at that path (not a link, not a FIFO), then hand it in again",
                "answer-missing" => "write the answer, then hand it in again",
                _ => "fix the answer (`iced schema validator` prints its shape) and hand it in again; ids and verdicts of findings are the loop's",
            };
            return Err(ctx.refuse_pub(
                p.code,
                format!("`{}`: {}", path.display(), p.message),
                remedy,
            ));
        }
    }
    let record = lane.record_mut(&key).expect("found above");
    if let Some(Value::Object(o)) = record.outcome.as_mut() {
        // Under `finished`, which the check keeps: what the host said its agent used.
        o.insert(
            "finished".into(),
            json!({"host": true, crate::run::host::SAID: said}),
        );
    }
    record.pid = None;
    let lane_id = lane.id.clone();
    emit(
        &ctx.paths,
        &run_id,
        Event::AgentEnd,
        json!({"lane": lane_id, "attempt": attempt, "role": role_of(&key), "lens": name_of(&key), "driver": "host"}),
    );
    let lane = run.lane(&lane_id).expect("lane");
    Ok(Some(StepReport::for_lane(
        run,
        lane,
        Action::Advanced,
        Then::AnswerIn { key: key.clone() },
    )))
}

/// Mark a process validator finished (its activity wrote an outcome): checked on the next step.
pub fn observed_finished(record: &mut StepRecord, outcome: Value) {
    let mut o = record.outcome.take().unwrap_or_else(|| json!({}));
    o["finished"] = outcome;
    record.outcome = Some(o);
    record.pid = None;
    record.pid_start = None;
}
