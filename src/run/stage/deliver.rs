//! Delivering a lane whose receipt verified: the unit's close is written in the lane's own change
//! (`evidence.md`, `verify.json`, `status: done`, the metric events), committed on the lane branch,
//! never left as an edit in the person's checkout.
//!
//! Only the judged head is delivered (SPEC 24.3): the close is a commit on top of the head the
//! validators judged, made from that commit's trees by the loop itself (never from the worktree's
//! index, where an agent could have staged anything), and the branch moves to it only
//! from the judged head (`update-ref` with the old value). A lane that moved after it was judged is
//! not delivered. The commit is recorded as prepared before the branch moves, so a call killed in
//! between is finished by the next, which adopts exactly that commit and no other.

use crate::refusal::Refusal;
use crate::run::ctx::Ctx;
use crate::run::dispositions::Disposed;
use crate::run::keys::StepKey;
use crate::run::outcome::{
    CommandRan, DeliverOutcome, JudgeOutcome, ReceiptOutcome, ValidatorOutcome,
};
use crate::run::records::{finish, record_after_in_run};
use crate::run::reply::Action;
use crate::run::reply::StepReport;
use crate::run::report::{Evidence, Report};
use crate::run::state::{Lane, Run, Stage, StepStatus};
use crate::run::then::Then;
use crate::run::validate::{Answer, Refutation};
use crate::unit::frontmatter::{apply, Edit};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

/// A unit file, the metrics log and the close documents are read from git up to this size.
const BLOB_LIMIT: u64 = 16 * 1024 * 1024;

fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    crate::git::run(dir, args)
}

/// Why a lane was not delivered.
#[derive(Debug, Clone, PartialEq)]
pub enum Undelivered {
    /// The lane's head is not the judged head: commits were added (or the branch was moved) after
    /// the verdict.
    Moved {
        judged: String,
        head: String,
        commits: Vec<String>,
    },
    Failed(String),
    /// The guard refused the range delivered (SPEC 24.2).
    Denied(String),
}

impl From<String> for Undelivered {
    fn from(e: String) -> Self {
        Undelivered::Failed(e)
    }
}

impl From<&str> for Undelivered {
    fn from(e: &str) -> Self {
        Undelivered::Failed(e.to_owned())
    }
}

/// The head and tree the lane was judged on: the verdict's, or the receipt's when no validator ran
/// (`verify.independent: false`). None for a lane recorded before heads were (it is then taken
/// as it stands).
pub fn judged_head(lane: &Lane) -> Option<(String, String)> {
    let judge = lane
        .outcome_as::<JudgeOutcome>(&StepKey::Judge)
        .and_then(|o| Some((o.head?, o.tree?)));
    let receipt = || {
        lane.outcome_as::<ReceiptOutcome>(&StepKey::Receipt)
            .and_then(|o| Some((o.head?, o.tree?)))
    };
    judge.or_else(receipt)
}

/// The commits on `to` that `from` does not have (`from..to`), as `<sha> <subject>`, oldest first.
fn commits_between(dir: &Path, from: &str, to: &str) -> Vec<String> {
    git(
        dir,
        &[
            "log",
            "--reverse",
            "--format=%h %s",
            &format!("{from}..{to}"),
        ],
    )
    .map(|l| l.lines().map(str::to_owned).collect())
    .unwrap_or_default()
}

/// The deliver step, outside the lock: check the lane still holds the judged head, build and record
/// the close commit, move the branch to it, and record the outcome.
pub fn step(ctx: &Ctx<'_>, snapshot: &Run, lane_id: &str) -> Result<StepReport, Refusal> {
    let lane = snapshot.lane(lane_id).expect("lane");
    crate::run::stage::validators::remove_sandboxes(ctx, lane);
    let result = deliver(ctx, snapshot, lane);
    crate::failpoint::hit("deliver-after-commit");
    let out = record_after_in_run(
        ctx,
        &snapshot.id,
        lane_id,
        &StepKey::Deliver,
        |run, record| {
            use crate::run::decide::{after_deliver, Delivered, LaneMove};
            if result.is_ok() && ctx.settings.land.mode == crate::run::settings::LandMode::None {
                offer_spare(run, lane_id);
            }
            let l = run.lane_mut(lane_id).expect("lane");
            let delivered = match &result {
                Ok(_) => Delivered::Committed,
                Err(Undelivered::Moved { .. }) => Delivered::Moved,
                Err(Undelivered::Failed(e) | Undelivered::Denied(e)) => Delivered::Failed(e),
            };
            let mv = after_deliver(ctx.settings.land.mode, delivered);
            if mv == Some(LaneMove::To(Stage::Land)) {
                l.land_round = 1;
            }
            if let Some(mv) = mv {
                crate::run::records::apply_move(ctx, &snapshot.id, l, mv)?;
            }
            match &result {
                Ok(commit) => {
                    finish(record, StepStatus::Done, json!({"commit": commit}));
                    if ctx.settings.land.mode == crate::run::settings::LandMode::None {
                        Ok((Action::Advanced, Then::DeliveredOnLane))
                    } else {
                        Ok((
                            Action::Advanced,
                            Then::CloseCommitted {
                                mode: ctx.settings.land.mode,
                            },
                        ))
                    }
                }
                Err(Undelivered::Moved {
                    judged,
                    head,
                    commits,
                }) => {
                    // Nothing unjudged is delivered: `decide` starts a new attempt, or blocks.
                    finish(
                        record,
                        StepStatus::Failed,
                        json!({"moved": {"judged": judged, "head": head, "commits": commits}}),
                    );
                    Ok((
                        Action::Advanced,
                        Then::LaneMovedAfterJudged {
                            commits: commits.len(),
                        },
                    ))
                }
                Err(Undelivered::Failed(e) | Undelivered::Denied(e)) => {
                    // A close commit this step prepared is kept with the failure: a person's
                    // resume delivers exactly it again (SPEC 23.3), the branch may hold it.
                    let prepared = record
                        .outcome_as::<crate::run::outcome::DeliverOutcome>()
                        .and_then(|o| o.prepared);
                    let mut outcome = json!({"error": e});
                    if let Some(p) = prepared {
                        outcome["prepared"] = p.into();
                    }
                    if matches!(result, Err(Undelivered::Denied(_))) {
                        outcome["denied"] = true.into();
                    }
                    finish(record, StepStatus::Failed, outcome);
                    Ok((Action::Blocked, Then::DeliverFailed { error: e.clone() }))
                }
            }
        },
    )?;
    crate::failpoint::hit("deliver-after-record");
    Ok(out)
}

/// Under `land.mode: none`, the delivered lane's worktree becomes a spare of the run (SPEC 23.2),
/// in the save that records the delivery: once, and only while another lane of the run has yet
/// to make its worktree (the last lanes', and a run of one lane's, stay where they are).
fn offer_spare(run: &mut Run, lane_id: &str) {
    let Some(worktree) = run.lane(lane_id).and_then(|l| l.worktree.clone()) else {
        return;
    };
    // A lane whose worktree step has begun took a spare or is adding its own worktree: it wants
    // none (with threads stepping the run, its step may be under way right now, SPEC 20.1).
    let begun = |l: &Lane| {
        l.steps
            .iter()
            .any(|r| r.step == StepKey::Worktree && r.status == StepStatus::Started)
    };
    let wanted = run
        .lanes
        .iter()
        .any(|l| l.id != lane_id && l.worktree.is_none() && !l.stage.is_final() && !begun(l));
    if wanted && !run.spares.contains(&worktree) {
        run.spares.push(worktree);
    }
}

/// Record `commit` as the delivery this call is about to make, on the `deliver` record it owns.
fn record_prepared(ctx: &Ctx<'_>, run: &str, lane: &str, commit: &str) -> Result<(), Undelivered> {
    let (mine, _) = crate::run::records::me();
    let recorded = ctx
        .transact_pub(|state| {
            let Some(record) = state
                .runs
                .get_mut(run)
                .and_then(|r| r.lane_mut(lane))
                .and_then(|l| l.record_mut(&StepKey::Deliver))
                .filter(|r| r.status == StepStatus::Started && r.pid == Some(mine))
            else {
                return Ok(false);
            };
            record.outcome = Some(json!({"prepared": commit}));
            Ok(true)
        })
        .map_err(|r| Undelivered::Failed(r.reason))?;
    if !recorded {
        return Err(Undelivered::Failed(
            "the deliver step moved on while this call worked".into(),
        ));
    }
    crate::failpoint::hit("deliver-after-prepare");
    Ok(())
}

/// After the branch moved from `from` to the delivery: the worktree's index and the close files
/// follow it, leaving anything else in the worktree as it was. Only when the worktree is on the
/// lane branch (`on_branch`, read with the branch as the step began); otherwise someone checked
/// out another, and nothing of it is ours to touch.
fn settle_worktree(
    ctx: &Ctx<'_>,
    worktree: &Path,
    (on_branch, from): (bool, &str),
    paths: &[String],
) -> Result<(), String> {
    if !on_branch {
        return Ok(());
    }
    // The index back to the delivery's tree, unless this call saw it hold exactly `from`'s (the
    // receipt found the worktree clean there) and its file is untouched since: then it differs
    // from the delivery only in the close files, which the checkout below sets (issue 16).
    if !ctx.index_holds(worktree, from) {
        git(worktree, &["reset", "-q"])?;
    }
    // One checkout for all; when one is not in the delivery, each on its own, skipping it.
    let mut all = vec!["checkout", "-q", "HEAD", "--"];
    all.extend(paths.iter().map(String::as_str));
    if git(worktree, &all).is_err() {
        for path in paths {
            let _ = git(worktree, &["checkout", "-q", "HEAD", "--", path]);
        }
    }
    Ok(())
}

pub fn deliver(ctx: &Ctx<'_>, run: &Run, lane: &Lane) -> Result<String, Undelivered> {
    let worktree = Path::new(lane.worktree.as_deref().ok_or("the lane has no worktree")?);
    // Nothing of the lane runs in its worktree any more: a git lock a definition-of-done
    // command, or a call of the loop killed in its own git, left is removed (SPEC 24.6).
    super::worktree::clear_git_locks(
        ctx,
        (&run.id, &lane.id),
        ("deliver", lane.branch.as_deref()),
        worktree,
    )?;
    let branch = lane.branch.clone().ok_or("the lane has no branch")?;
    let branch_ref = format!("refs/heads/{branch}");
    let rel = format!("intent/{}", lane.unit);
    // A review's close is its review.md and status (SPEC 20.14).
    let names: &[&str] = if lane.review.is_some() {
        &["iced.md", "review.md"]
    } else {
        &["iced.md", "evidence.md", "verify.json"]
    };
    let mut close_paths: Vec<String> = names
        .iter()
        .map(|f| format!("{rel}/{f}"))
        .chain([".iced/metrics.jsonl".to_owned()])
        .collect();
    if lane.unit_text.is_some() {
        // The person's decisions on its escalations travel in the close too.
        close_paths.push(format!("{rel}/decisions.md"));
    }
    // Read once: the branch moves only if it still points here.
    let (at, on_branch) = crate::git::branch_at(worktree, &branch);
    let on_branch = on_branch.as_deref() == Some(branch.as_str());
    let current = match at {
        Some((commit, _)) => commit,
        // No such branch: git says so.
        None => git(worktree, &["rev-parse", "--verify", &branch_ref])?,
    };
    // A delivery this step prepared (a call that died before recording it): adopted if the
    // branch is there, made again from the judged head if it is not.
    let prepared = lane
        .record(&StepKey::Deliver)
        .and_then(|r| r.outcome_as::<DeliverOutcome>())
        .and_then(|o| o.prepared);
    if prepared.as_deref() == Some(current.as_str()) {
        settle_worktree(ctx, worktree, (on_branch, ""), &close_paths)?;
        return Ok(current);
    }
    // Prepared on the judged head, and the branch still there: the call that prepared it died
    // before (or while) moving the branch, whose `update-ref` may yet land. The same delivery is
    // moved to, never a second one made beside it.
    if let Some(p) = prepared.as_deref() {
        let judged = judged_head(lane).map_or_else(|| current.clone(), |(j, _)| j);
        let parent = git(worktree, &["rev-parse", "--verify", &format!("{p}^")]).ok();
        if current == judged && parent.as_deref() == Some(judged.as_str()) {
            record_prepared(ctx, &run.id, &lane.id, p)?;
            move_branch(worktree, &branch_ref, p, &judged)?;
            settle_worktree(ctx, worktree, (on_branch, &judged), &close_paths)?;
            return Ok(p.to_owned());
        }
    }
    let (judged, judged_tree) = match judged_head(lane) {
        Some(j) => j,
        None => {
            let tree = git(worktree, &["rev-parse", &format!("{current}^{{tree}}")])?;
            (current.clone(), tree)
        }
    };
    if current != judged {
        return Err(Undelivered::Moved {
            commits: commits_between(worktree, &judged, &current),
            judged,
            head: current,
        });
    }
    let head = judged;
    // The guard again, on the range delivered (SPEC 24.2).
    let base = run.base_of(lane);
    let denied =
        crate::run::lane_guard::judge_range(ctx, &lane.unit, worktree, (base, &head), base, &[])?;
    if !denied.is_empty() {
        return Err(Undelivered::Denied(
            denied
                .iter()
                .map(|d| d.gap(base))
                .collect::<Vec<_>>()
                .join("; "),
        ));
    }
    let at = Landing {
        worktree,
        on_branch,
        branch_ref: &branch_ref,
        head: &head,
        close_paths: &close_paths,
    };
    if let Some(target) = &lane.review {
        let (files, message) =
            crate::run::stage::review::close(ctx, run, lane, worktree, target, &head)?;
        return commit_close(ctx, run, lane, &at, &files, &message);
    }
    let receipt = lane
        .record(&StepKey::Receipt)
        .filter(|r| r.status == StepStatus::Done)
        .and_then(|r| r.outcome_as::<ReceiptOutcome>())
        .ok_or("the lane has no verified receipt")?;
    let report: Report = receipt
        .report
        .as_ref()
        .and_then(crate::run::kept::load)
        .ok_or("the implementer's report, as the loop kept it, is missing or was changed")?;
    let keys: Vec<StepKey> = lane
        .steps
        .iter()
        .filter(|r| r.attempt == lane.attempt && matches!(r.step, StepKey::Validate(_)))
        .map(|r| r.step.clone())
        .collect();
    let answers: BTreeMap<StepKey, Answer> = keys
        .iter()
        .filter_map(|k| {
            crate::run::kept::load_from::<Answer>(
                lane.record(k).and_then(|r| r.outcome.as_ref()),
                "answer",
            )
            .map(|a| (k.clone(), a))
        })
        .collect();
    // Every file the close reads, through the call's one git.
    let text_at = |commit: &str, path: &str| -> Result<Option<String>, String> {
        ctx.blob_at(commit, path, BLOB_LIMIT)
            .map(|b| b.map(|b| String::from_utf8_lossy(&b).into_owned()))
    };
    let unit_path = format!("{rel}/iced.md");
    // A contract a person changed during the run (SPEC 20.7) is the one that lands, with its hash.
    let left = crate::run::escalation_verbs::left_for_lane(lane)?.unwrap_or_default();
    let text = match &left.text {
        Some(text) => text.clone(),
        None => text_at(&head, &unit_path)?
            .ok_or_else(|| format!("`{unit_path}` is not in the judged head {head}"))?,
    };
    let parsed = crate::unit::parse_unit(&text);
    // The autonomy that decides an automatic acceptance is the approved unit's, at the run's base,
    // never the lane's copy (SPEC 24.2).
    let at_base = text_at(run.base_of(lane), &unit_path)?
        .map(|t| crate::unit::parse_unit(&t))
        .unwrap_or_else(|| parsed.clone());
    let now = crate::clock::now_iso();
    let log = ctx.commits_between(worktree, run.base_of(lane), &head)?;
    // `<sha> <subject>` per line: verify.json keeps the shas, evidence.md the subjects too.
    let commits: Vec<(&str, &str)> = log
        .lines()
        .map(|l| l.split_once(' ').unwrap_or((l, "")))
        .collect();

    let risk = at_base.frontmatter.str("risk").and_then(|r| r.parse().ok());
    let level = crate::unit::kinds::effective_autonomy(
        at_base
            .frontmatter
            .get("autonomy")
            .and_then(crate::unit::Scalar::as_int),
        risk,
        ctx.config.autonomy,
        ctx.config.max_autonomy,
    );
    let close = documents(&Close {
        unit: &parsed,
        lane,
        run,
        receipt: &receipt,
        report: &report,
        answers: &answers,
        head: &head,
        tree: &judged_tree,
        commits: &commits,
        now: &now,
        effective_autonomy: level,
    });
    let failed_attempts = i64::from(lane.attempt.saturating_sub(1));
    let mut edits = vec![
        Edit::set("status", close.status),
        Edit::set("attempts", failed_attempts),
    ];
    if close.status == "accepted" {
        edits.push(Edit::set("accepted_at", now.as_str()));
        edits.push(Edit::set("accepted_by", "auto"));
    }
    let closed = apply(&text, &edits);
    // The verify metric (and the automatic acceptance) travel in the landing change too: the
    // judged head's log with this delivery's lines after it.
    let mut metrics = text_at(&head, ".iced/metrics.jsonl")?.unwrap_or_default();
    if !metrics.is_empty() && !metrics.ends_with('\n') {
        metrics.push('\n');
    }
    let tags = crate::record::tags_of(&at_base);
    let metric = |metrics: &mut String, event: &str, data: Value| {
        let mut line = serde_json::Map::new();
        line.insert("ts".into(), now.clone().into());
        line.insert("id".into(), lane.unit.clone().into());
        line.insert("event".into(), event.into());
        if let Value::Object(d) = data {
            line.extend(d);
        }
        line.extend(tags.clone());
        metrics.push_str(&serde_json::to_string(&line).expect("serialises"));
        metrics.push('\n');
    };
    let mut files: Vec<(String, String)> = vec![
        (format!("{rel}/iced.md"), closed),
        (format!("{rel}/evidence.md"), close.evidence_md),
        (format!("{rel}/verify.json"), close.verify_json),
    ];
    // A person's decisions on the lane's escalations land with it (SPEC 20.7), after what the
    // judged head's log holds.
    if !left.entries.is_empty() {
        let path = format!("{rel}/decisions.md");
        let mut log =
            text_at(&head, &path)?.unwrap_or_else(|| crate::repo::decisions_header(&lane.unit));
        for entry in &left.entries {
            if !log.contains(entry.as_str()) {
                if !log.ends_with('\n') {
                    log.push('\n');
                }
                log.push_str(entry);
            }
        }
        files.push((path, log));
    }
    // What happened on the way (failed attempts, stops for a person) lands with the work, then
    // the verdict (SPEC 12.1).
    for m in &lane.metrics {
        metrics.push_str(&m.line(&lane.unit, &tags));
        metrics.push('\n');
    }
    // The delivery is the loop's verdict: the definition of done passed, and the independent
    // validators too when there were any (`independent` says which). Two lanes of a project both
    // append here; the file merges by union when they land (SPEC 23.1).
    metric(
        &mut metrics,
        "verify",
        json!({"result": "pass", "attempt": lane.attempt, "independent": close.validated}),
    );
    if close.status == "accepted" {
        metric(&mut metrics, "accept", json!({"auto": true}));
    }
    files.push((".iced/metrics.jsonl".into(), metrics));
    let message = format!(
        "iced: deliver {}\n\nThe loop's close of the unit: status {}, evidence.md and verify.json.\n\nIced-Run: {}\nIced-Lane: {}\nIced-Step: deliver\n",
        lane.unit, close.status, run.id, lane.id
    );
    commit_close(ctx, run, lane, &at, &files, &message)
}

/// Where a close is committed: the lane's worktree (on the lane branch or not), the branch, the
/// judged head it goes on, and the close files the worktree follows it with.
struct Landing<'a> {
    worktree: &'a Path,
    on_branch: bool,
    branch_ref: &'a str,
    head: &'a str,
    close_paths: &'a [String],
}

/// The close's commit on the judged head: its tree the head's with `files`, made by the loop from
/// the head's trees, recorded as prepared before the branch moves to it.
fn commit_close(
    ctx: &Ctx<'_>,
    run: &Run,
    lane: &Lane,
    at: &Landing<'_>,
    files: &[(String, String)],
    message: &str,
) -> Result<String, Undelivered> {
    let (worktree, head) = (at.worktree, at.head.to_owned());
    // The blobs go through scratch files in the step's activity folder.
    let scratch = ctx.activity_dir(&run.id, &lane.id, &StepKey::Deliver, lane.attempt);
    crate::store::create_dir_all(&scratch).map_err(|e| e.to_string())?;
    let bodies: Vec<&[u8]> = files.iter().map(|(_, b)| b.as_bytes()).collect();
    let blobs = crate::git::write_blobs(worktree, &scratch, &bodies)?;
    // The close's tree: the judged head's with these files, made by the loop itself from the
    // head's trees (never from the worktree's index): one git for all its folders.
    let put: Vec<(String, String)> = files
        .iter()
        .map(|(path, _)| path.clone())
        .zip(blobs)
        .collect();
    let tree =
        crate::git::tree::with_files(worktree, &head, &put, &mut |spec| ctx.tree_object(spec))?;
    let mut args: Vec<String> = Vec::new();
    let (identified, signs) = ctx.git_identity(worktree);
    if !identified {
        args.extend([
            "-c".into(),
            "user.name=iced".into(),
            "-c".into(),
            "user.email=iced@localhost".into(),
        ]);
    }
    args.push("commit-tree".into());
    // `git commit` signs when `commit.gpgSign` says so; `commit-tree` only when asked.
    if signs {
        args.push("-S".into());
    }
    args.extend([
        tree,
        "-p".into(),
        head.clone(),
        "-m".into(),
        message.to_owned(),
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let commit = git(worktree, &args)?;
    record_prepared(ctx, &run.id, &lane.id, &commit)?;
    move_branch(worktree, at.branch_ref, &commit, &head)?;
    settle_worktree(ctx, worktree, (at.on_branch, &head), at.close_paths)?;
    Ok(commit)
}

/// Move the lane branch from the judged head to the delivery, only if it is still at the head.
/// A branch some other call moved to this same delivery is fine.
fn move_branch(
    worktree: &Path,
    branch_ref: &str,
    commit: &str,
    head: &str,
) -> Result<(), Undelivered> {
    if let Err(e) = git(
        worktree,
        &[
            "update-ref",
            "-m",
            "iced: deliver",
            branch_ref,
            commit,
            head,
        ],
    ) {
        let now = git(worktree, &["rev-parse", "--verify", branch_ref])?;
        if now != commit {
            return Err(if now != head {
                Undelivered::Moved {
                    commits: commits_between(worktree, head, &now),
                    judged: head.to_owned(),
                    head: now,
                }
            } else {
                Undelivered::Failed(e)
            });
        }
    }
    Ok(())
}

/// What the close of a unit is made from.
pub struct Close<'a> {
    pub unit: &'a crate::unit::ParsedUnit,
    pub lane: &'a Lane,
    pub run: &'a Run,
    pub receipt: &'a ReceiptOutcome,
    /// The implementer's report as the loop kept it (SPEC 24.5).
    pub report: &'a Report,
    /// Each validator's answer of this round as the loop kept it, by step key.
    pub answers: &'a BTreeMap<StepKey, Answer>,
    /// The judged head (SPEC 24.3) and its tree.
    pub head: &'a str,
    pub tree: &'a str,
    /// The commits of the delivered range, oldest first: sha and subject.
    pub commits: &'a [(&'a str, &'a str)],
    pub now: &'a str,
    pub effective_autonomy: i64,
}

/// The documents of a close: `verify.json` (everything), `evidence.md` (for a person), and the
/// status the unit moves to.
pub struct Closed {
    pub verify_json: String,
    pub evidence_md: String,
    pub status: &'static str,
    /// Independent validators judged it (as opposed to the loop's own checks alone).
    pub validated: bool,
}

/// An expectation of the unit as the close records it: `verify.json` writes these fields in this
/// order, and `evidence.md` words them.
#[derive(Serialize)]
struct ClosedExpectation<'a> {
    id: &'a str,
    text: &'a str,
    verify: &'a Option<crate::unit::parse::Verify>,
    result: String,
    /// What the implementer's report claimed for it.
    evidence: Vec<&'a Evidence>,
}

/// A validator of the round as the close records it (`null` for what an unanswered one lacks).
#[derive(Serialize)]
struct ClosedValidator<'a> {
    name: &'a str,
    answered: bool,
    verdict: Option<&'a str>,
    problem: Option<String>,
    notes: Option<&'a str>,
}

/// A number as JSON writes it, `null` when there is none.
fn or_null<T: std::fmt::Display>(n: Option<T>) -> String {
    n.map_or_else(|| "null".to_owned(), |n| n.to_string())
}

/// Render the close. Pure: the same inputs give the same bytes (a test holds `evidence.md` to a
/// snapshot).
pub fn documents(c: &Close<'_>) -> Closed {
    let lane = c.lane;
    let judge = lane.outcome_as::<JudgeOutcome>(&StepKey::Judge);
    let validated = judge.is_some();
    // verify.json carries the merge as it is (`null` without a verdict); evidence.md reads it.
    let merged = judge.as_ref().map(|j| &j.merged);
    let manual: Vec<String> = judge.as_ref().map(|j| j.manual.clone()).unwrap_or_default();
    let needs_human = !validated || judge.as_ref().is_some_and(|j| j.needs_human);
    let status = if validated && !needs_human && c.effective_autonomy >= 2 {
        "accepted"
    } else {
        "done"
    };
    let title = c.unit.title.clone().unwrap_or_default();

    let expectations: Vec<ClosedExpectation<'_>> = c
        .unit
        .expectations
        .iter()
        .map(|e| {
            let claimed: Vec<&Evidence> = c
                .report
                .evidence
                .iter()
                .filter(|x| x.expectation == e.id)
                .collect();
            let result = if !validated {
                "claimed".to_owned()
            } else if manual.contains(&e.id) {
                "unknown (manual: for the person)".to_owned()
            } else {
                merged
                    .and_then(|m| m.expectations.get(&e.id))
                    .map_or("unknown", String::as_str)
                    .to_owned()
            };
            ClosedExpectation {
                id: &e.id,
                text: &e.text,
                verify: &e.verify,
                result,
                evidence: claimed,
            }
        })
        .collect();
    let validators: Vec<ClosedValidator<'_>> = lane
        .steps
        .iter()
        .filter(|r| r.attempt == lane.attempt && matches!(r.step, StepKey::Validate(_)))
        .map(|r| {
            let answer = c.answers.get(&r.step);
            ClosedValidator {
                name: r.step.validator_name().unwrap_or(""),
                answered: answer.is_some(),
                verdict: answer.map(|a| a.verdict.as_str()),
                problem: r.outcome_as::<ValidatorOutcome>().and_then(|o| o.problem),
                notes: answer.map(|a| a.notes.as_str()),
            }
        })
        .collect();
    let verdict = json!({
        "id": lane.unit,
        "title": title,
        "run": c.run.id,
        "lane": lane.id,
        "attempt": lane.attempt,
        "ts": c.now,
        "verdict": "pass",
        "independent": validated,
        "needs_human": needs_human,
        "status": status,
        "base": c.run.base_of(lane),
        "head": c.head,
        "tree": c.tree,
        "commits": c.commits.iter().map(|(sha, _)| *sha).collect::<Vec<_>>(),
        "commands": c.receipt.commands,
        "summary": c.report.summary,
        "expectations": expectations,
        "failures": merged.map(|m| &m.failures),
        "constraints": merged.map(|m| &m.constraints),
        "validators": validators,
        "findings": lane.findings,
    });
    let mut verify_json = serde_json::to_string_pretty(&verdict).expect("serialises");
    verify_json.push('\n');

    let mut md = String::new();
    let _ = writeln!(md, "# Evidence: {}\n\n{title}\n", lane.unit);
    let how = if validated {
        let names: Vec<&str> = validators.iter().map(|v| v.name).collect();
        format!(
            "independent validators ({}) pass it, and no blocking finding is open",
            names.join(", ")
        )
    } else {
        "the loop's own checks; no independent validator ran".to_owned()
    };
    let _ = writeln!(
        md,
        "Verdict: **PASS** (attempt {}, {}, run `{}`): {how}.",
        lane.attempt, c.now, c.run.id
    );
    let unanswered: Vec<&str> = merged
        .into_iter()
        .flat_map(|m| &m.unanswered)
        .map(String::as_str)
        .collect();
    let mut why = Vec::new();
    if !validated {
        why.push("no independent validator judged it".to_owned());
    }
    if !unanswered.is_empty() {
        why.push(format!(
            "no usable answer from {} (verify.json says why)",
            unanswered.join(", ")
        ));
    }
    if !manual.is_empty() {
        why.push(format!("{} is for a person to check", manual.join(", ")));
    }
    let unit = &lane.unit;
    let _ = writeln!(
        md,
        "{}\n",
        match status {
            "accepted" =>
                "Accepted automatically: the unit's autonomy allows it and nothing needs a person."
                    .to_owned(),
            _ if needs_human => format!(
                "A person accepts it, because {}: `iced accept {unit}` (or `iced reject {unit} <reason>`).",
                why.join("; ")
            ),
            _ => format!(
                "A person accepts it (the unit's autonomy asks for that): `iced accept {unit}`."
            ),
        }
    );
    let _ = writeln!(md, "## Builder summary\n\n{}\n", c.report.summary);
    let _ = writeln!(md, "## Definition of done\n");
    if c.receipt.commands.is_empty() {
        let _ = writeln!(md, "No commands are configured (`verify.commands`).");
    }
    for cmd in c.receipt.commands.iter().map(CommandRan::of) {
        let _ = writeln!(
            md,
            "- `{}`: exit {} ({} ms)",
            cmd.command,
            or_null(cmd.exit_code),
            or_null(cmd.duration_ms)
        );
    }
    // The validators of this round that answered, in order.
    let answered: Vec<&crate::run::state::StepRecord> = lane
        .steps
        .iter()
        .filter(|r| r.attempt == lane.attempt && matches!(r.step, StepKey::Validate(_)))
        .filter(|r| c.answers.contains_key(&r.step))
        .collect();
    let _ = writeln!(md, "\n## Expectations\n");
    for e in &expectations {
        let _ = writeln!(md, "### [{}] {}\n", e.id, e.text);
        let _ = writeln!(
            md,
            "- Result: **{}**{}",
            e.result,
            if validated {
                ""
            } else {
                " (not independently verified)"
            }
        );
        if let Some(v) = e.verify {
            let _ = writeln!(md, "- Verify: {} | {}", v.kind, v.reference);
        }
        for x in &e.evidence {
            let _ = writeln!(md, "- Builder evidence: {}: {}", x.kind, x.reference);
        }
        for r in &answered {
            for j in &c.answers[&r.step].expectations {
                if j.id == e.id {
                    let said = j.evidence.as_str();
                    let _ = writeln!(
                        md,
                        "- Judged {} by `{}`{}{said}",
                        j.result,
                        r.step.validator_name().unwrap_or(""),
                        if said.is_empty() { "" } else { ": " }
                    );
                }
            }
        }
        md.push('\n');
    }
    if validated {
        let _ = writeln!(md, "## Failure conditions and constraints\n");
        for (judged, bad, items) in [
            (merged.map(|m| &m.failures), "triggered", &c.unit.failures),
            (
                merged.map(|m| &m.constraints),
                "violated",
                &c.unit.constraints,
            ),
        ] {
            // The unit's items in its order, then any other a validator named (an ancestor's).
            let mut ids: Vec<(String, String)> = items
                .iter()
                .map(|i| (i.id.clone(), i.text.clone()))
                .collect();
            for id in judged.into_iter().flat_map(|m| m.keys()) {
                if !ids.iter().any(|(known, _)| known == id) {
                    ids.push((id.clone(), String::new()));
                }
            }
            for (id, text) in ids {
                let hit = judged.and_then(|m| m.get(&id)) == Some(&true);
                let said = if hit {
                    bad.to_owned()
                } else {
                    format!("not {bad}")
                };
                if text.is_empty() {
                    let _ = writeln!(md, "- [{id}] {said}");
                } else {
                    let _ = writeln!(md, "- [{id}] {said}: {text}");
                }
            }
        }
        md.push('\n');
        let _ = writeln!(md, "## Findings\n");
        if lane.findings.is_empty() {
            let _ = writeln!(md, "None.\n");
        }
        for f in &lane.findings {
            let e = &f.evidence;
            let _ = writeln!(md, "### {}: {}\n", f.id, e.summary);
            let _ = writeln!(
                md,
                "- {}, {}; found in round {} by `{}`",
                e.severity, e.finding_category, f.round, f.by
            );
            if !e.file_path.is_empty() {
                let _ = writeln!(md, "- File: `{}`", e.file_path);
            }
            if !e.criterion_ref.is_empty() {
                let _ = writeln!(md, "- Criterion: {}", e.criterion_ref);
            }
            let _ = writeln!(
                md,
                "- Scenario: given {}, expected {}, actually {}",
                e.failure_scenario.inputs, e.failure_scenario.expected, e.failure_scenario.actual
            );
            let disposed = Disposed::of(f);
            let outcome = match f.status.as_str() {
                "refuted" => format!(
                    "refuted: {}",
                    f.refutation
                        .as_ref()
                        .and_then(|r| Refutation::deserialize(r).ok())
                        .map(|r| r.reason)
                        .unwrap_or_default()
                ),
                "applied" => format!("applied in {}", disposed.commit.as_deref().unwrap_or("?")),
                "rejected" => format!(
                    "rejected in writing: {}",
                    disposed.reason.as_deref().unwrap_or("")
                ),
                "noted" => "noted (does not block)".to_owned(),
                other => other.to_owned(),
            };
            let _ = writeln!(md, "- Outcome: {outcome}\n");
        }
    }
    let _ = writeln!(md, "## Commits\n");
    for (sha, subject) in c.commits {
        let _ = writeln!(md, "- {sha} {subject}");
    }
    Closed {
        verify_json,
        evidence_md: md,
        status,
        validated,
    }
}
