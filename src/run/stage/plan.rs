//! Planning (SPEC 20.16), the first stage of an `--auto-plan` run: the planner of each round and
//! its two reviewers started as activities, what they wrote checked by the loop (a draft against
//! the keys the loop keeps, lint and an untouched checkout; an answer strictly, its findings
//! minted here), and the loop's decision: the unit file, `plan-decision.md`, the approval when the
//! grounds hold, and the commit. `decide::plan` chooses each move; this module does it.

use super::plan_text::{self, Review};
use crate::refusal::Refusal;
use crate::repo::store_refusal;
use crate::run::ctx::Ctx;
use crate::run::decide::plan::{self as choose, PlanNext};
use crate::run::decide::LaneMove;
use crate::run::events::{emit, Event};
use crate::run::kept::{self, Kept};
use crate::run::keys::StepKey;
use crate::run::launch::{agent_spec, gate_value, launch as start, AgentStart};
use crate::run::records::{apply_move, finish, new_nonce, record_after, started};
use crate::run::reply::{Action, StepReport};
use crate::run::state::{Lane, Run, StepStatus};
use crate::run::then::Then;
use crate::run::validate::{self, Answer, Finding};
use serde_json::{json, Value};
use std::path::PathBuf;

/// What the part under the lock left for the part outside it.
pub(crate) enum PlanPending {
    Launch {
        lane: String,
        keys: Vec<(StepKey, String)>,
    },
    Check {
        lane: String,
        key: StepKey,
    },
    Decide {
        lane: String,
    },
}

/// Under the lock: record the steps `next` starts, or apply the move it chose. `Err` is a report
/// with nothing left to do outside the lock.
pub(crate) fn under_lock(
    ctx: &Ctx<'_>,
    run: &mut Run,
    lane_id: &str,
    next: &PlanNext,
) -> Result<Result<PlanPending, StepReport>, Refusal> {
    let run_id = run.id.clone();
    let lane = run.lane_mut(lane_id).expect("lane");
    Ok(Ok(match next {
        PlanNext::Launch(keys) => {
            let mut launches = Vec::new();
            for key in keys {
                choose::revise_for(lane, key);
                let nonce = new_nonce();
                lane.steps.retain(|r| r.step != *key);
                lane.steps.push(started(
                    key.clone(),
                    lane.attempt,
                    None,
                    Some(nonce.clone()),
                ));
                launches.push((key.clone(), nonce));
            }
            PlanPending::Launch {
                lane: lane_id.to_owned(),
                keys: launches,
            }
        }
        PlanNext::Check(key) => PlanPending::Check {
            lane: lane_id.to_owned(),
            key: key.clone(),
        },
        PlanNext::Decide => {
            lane.steps.retain(|r| r.step != StepKey::PlanDecide);
            lane.steps
                .push(started(StepKey::PlanDecide, lane.attempt, None, None));
            PlanPending::Decide {
                lane: lane_id.to_owned(),
            }
        }
        PlanNext::Move(mv) => {
            let commit = lane
                .record(&StepKey::PlanDecide)
                .and_then(|r| r.outcome.as_ref())
                .and_then(|o| o["commit"].as_str())
                .map(str::to_owned);
            apply_move(ctx, &run_id, lane, mv.clone())?;
            let approved = matches!(mv, LaneMove::To(_));
            if let (true, Some(commit)) = (approved, commit) {
                // The build starts from the commit that holds the approved unit.
                run.base.commit = commit;
            }
            let lane = run.lane(lane_id).expect("lane");
            let next = if approved {
                Then::PlanDecided {
                    approved,
                    unit: lane.unit.clone(),
                }
            } else {
                Then::Reason(lane.reason.clone().unwrap_or_default())
            };
            return Ok(Err(StepReport::for_lane(run, lane, Action::Advanced, next)));
        }
        PlanNext::Wait { .. } => unreachable!("decide reports a wait itself"),
    }))
}

/// The file the agent of `key` writes: the planner's draft, a reviewer's answer.
fn output_path(ctx: &Ctx<'_>, run: &Run, lane: &str, key: &StepKey) -> PathBuf {
    ctx.answer_folder((&run.id, run.brief_layout), lane, key, 1)
        .join("output.md")
}

/// The copy of round `round`'s accepted draft the loop keeps.
fn draft_path(ctx: &Ctx<'_>, run: &str, lane: &str, round: u32) -> PathBuf {
    ctx.lane_dir(run, lane).join(format!("draft-{round}.md"))
}

/// The text round `round` works on: the unit file before round 2, the draft of the round before
/// after it.
fn text_before(
    ctx: &Ctx<'_>,
    run: &str,
    lane: &Lane,
    round: u32,
) -> Result<(PathBuf, String), Refusal> {
    if round <= 1 {
        let path = ctx.repo.unit_paths(&lane.unit).iced;
        let text = crate::repo::read_text(&path).map_err(|e| e.refusal(ctx.verb))?;
        return Ok((path, text));
    }
    let path = draft_path(ctx, run, &lane.id, round - 1);
    kept_draft(ctx, run, lane, round - 1).map(|text| (path, text))
}

/// The loop's copy of round `round`'s accepted draft, only as the check recorded it (SPEC 24.5):
/// never through a link and only if its sha256 is the one recorded, else `plan-draft-changed`. A
/// reviewer runs beside that copy; what it put there must never reach a prompt or the unit.
fn kept_draft(ctx: &Ctx<'_>, run: &str, lane: &Lane, round: u32) -> Result<String, Refusal> {
    let refuse = |why: String| {
        ctx.refuse(
            "plan-draft-changed",
            format!("the accepted draft of round {round}: {why}; the loop goes on only from a draft it checked"),
            format!(
                "abandon the run (`iced run abandon {run}`), then `iced build --auto-plan {}` plans anew",
                lane.unit
            ),
        )
    };
    let kept: Kept = lane
        .record(&StepKey::Plan(round))
        .and_then(|r| r.outcome.as_ref())
        .and_then(|o| serde_json::from_value(o.get("draft")?.clone()).ok())
        .ok_or_else(|| refuse("no copy of it is recorded".into()))?;
    let bytes = kept::load_bytes(&kept, plan_text::DRAFT_LIMIT).map_err(refuse)?;
    String::from_utf8(bytes).map_err(|_| refuse("it is not UTF-8".into()))
}

/// The accepted draft of `round` (the round's planner's, or the unit file's before any).
fn draft_of(ctx: &Ctx<'_>, run: &str, lane: &Lane, round: u32) -> Result<String, Refusal> {
    text_before(ctx, run, lane, round + 1).map(|(_, t)| t)
}

/// Outside the lock: write each agent's prompt and start it.
pub(crate) fn launch(
    ctx: &Ctx<'_>,
    snapshot: &Run,
    lane_id: &str,
    keys: Vec<(StepKey, String)>,
) -> Result<StepReport, Refusal> {
    let lane = snapshot.lane(lane_id).expect("lane");
    let root = ctx.repo.root.clone();
    let mut round = 0;
    for (key, nonce) in &keys {
        let dir = ctx.activity_dir(&snapshot.id, lane_id, key, 1);
        crate::store::create_dir_all(&dir).map_err(|e| store_refusal(ctx.verb, e))?;
        let (runner, model, lens, prompt_text, unit_file) = match key {
            StepKey::Plan(r) => {
                round = *r;
                let (path, text) = text_before(ctx, &snapshot.id, lane, *r)?;
                let open: Vec<&Finding> = lane
                    .findings
                    .iter()
                    .filter(|f| f.round + 1 == *r && f.status != "noted")
                    .collect();
                (
                    ctx.settings.planner.as_ref(),
                    ctx.settings.planner_model.clone(),
                    String::new(),
                    plan_text::planner_prompt(&lane.unit, &text, *r, &open),
                    path,
                )
            }
            StepKey::PlanReview { lens, round: r } => {
                round = *r;
                let draft = draft_of(ctx, &snapshot.id, lane, *r)?;
                (
                    ctx.settings.plan_reviewer.as_ref(),
                    ctx.settings.plan_reviewer_model.clone(),
                    lens.clone(),
                    plan_text::reviewer_prompt(&lane.unit, &draft, lens, *r),
                    draft_path(ctx, &snapshot.id, lane_id, *r),
                )
            }
            _ => unreachable!("only planning agents launch here"),
        };
        let runner = runner.expect("admit checked the planning runners");
        let prompt = dir.join("prompt.md");
        crate::store::write_atomic(&prompt, prompt_text.as_bytes(), 0o600)
            .map_err(|e| store_refusal(ctx.verb, e))?;
        // What the checkout is before the agent: it must be the same after (SPEC 20.16).
        let before = plan_text::checkout_fingerprint(&root).unwrap_or_default();
        crate::store::write_atomic(&dir.join("before.txt"), before.as_bytes(), 0o600)
            .map_err(|e| store_refusal(ctx.verb, e))?;
        let output = output_path(ctx, snapshot, lane_id, key);
        let role = key.role();
        let mut values: Vec<(&str, String)> = vec![
            ("prompt_file", prompt.display().to_string()),
            ("output_file", output.display().to_string()),
            ("worktree", root.display().to_string()),
            ("role", role.into()),
            ("model", model.clone().unwrap_or_default()),
            ("run", snapshot.id.clone()),
            ("lane", lane_id.to_owned()),
            ("attempt", "1".into()),
            ("unit", lane.unit.clone()),
            ("unit_file", unit_file.display().to_string()),
        ];
        if !lens.is_empty() {
            values.push(("lens", lens.clone()));
        }
        let spec = agent_spec(
            ctx,
            runner,
            &values,
            AgentStart {
                read_only: !lens.is_empty(),
                nonce,
                model: model.as_deref(),
                effort: None,
                prompt: &prompt,
                cwd: root.clone(),
                gate: gate_value(ctx, &snapshot.id, lane_id, key, 1),
                dir: &dir,
            },
        )?;
        crate::failpoint::hit("plan-launch-after-record");
        emit(
            &ctx.paths,
            &snapshot.id,
            Event::AgentStart,
            crate::run::launch::start_fields(
                &spec,
                runner,
                json!({"lane": lane_id, "attempt": 1, "role": role, "lens": lens, "step": key, "runner": runner.name}),
            ),
        );
        start(ctx, &dir, &spec)?;
        crate::failpoint::hit("plan-launch-after-spawn");
    }
    Ok(StepReport::for_lane(
        snapshot,
        lane,
        Action::Waiting,
        Then::Wait {
            why: crate::run::decide::Waiting::Planning { round },
        },
    ))
}

/// Outside the lock: check what the agent of `key` wrote, then record it (and, for a reviewer,
/// mint its findings) under the lock if nobody did first.
pub(crate) fn check(
    ctx: &Ctx<'_>,
    snapshot: &Run,
    lane_id: &str,
    key: StepKey,
) -> Result<StepReport, Refusal> {
    let lane = snapshot.lane(lane_id).expect("lane");
    let dir = ctx.activity_dir(&snapshot.id, lane_id, &key, 1);
    let output = output_path(ctx, snapshot, lane_id, &key);
    let exit = lane
        .record(&key)
        .and_then(|r| r.outcome.as_ref())
        .map(|o| (o["exit_code"].as_i64(), o["timed_out"] == true));
    let read = || -> Result<String, String> {
        match exit {
            Some((Some(0), false)) => {}
            Some((code, timed_out)) => {
                return Err(if timed_out {
                    "the agent timed out".into()
                } else {
                    format!("the agent exited with {code:?}")
                })
            }
            None => return Err("the agent left no outcome".into()),
        }
        let bytes = crate::store::read_no_follow(&output, plan_text::DRAFT_LIMIT)
            .map_err(|e| format!("its output cannot be read: {e}"))?;
        String::from_utf8(bytes).map_err(|_| "its output is not UTF-8".to_owned())
    };
    let mut result = json!({"checked": true});
    let mut answer: Option<Answer> = None;
    match &key {
        StepKey::Plan(r) => {
            let before = before_fingerprint(&dir);
            let untouched = read().and_then(|draft| {
                let after = plan_text::checkout_fingerprint(&ctx.repo.root)?;
                if after != before {
                    return Err(
                        "the planner changed the checkout; its only output is the draft".into(),
                    );
                }
                Ok(draft)
            });
            // The text it revised is read only once the checkout is known untouched: a planner
            // that swapped the unit file for a FIFO or a link has its draft refused, and the loop
            // never reads what it left there.
            let checked = match untouched {
                Ok(draft) => {
                    let (_, current) = text_before(ctx, &snapshot.id, lane, *r)?;
                    plan_text::check_draft(ctx.repo, &lane.unit, &current, &draft).map(|()| draft)
                }
                Err(why) => Err(why),
            };
            match checked {
                Ok(draft) => {
                    let path = draft_path(ctx, &snapshot.id, lane_id, *r);
                    crate::store::write_atomic(&path, draft.as_bytes(), 0o600)
                        .map_err(|e| store_refusal(ctx.verb, e))?;
                    result["draft"] = json!({"path": path, "sha256": sha256(draft.as_bytes())});
                }
                Err(why) => result["refused"] = why.into(),
            }
        }
        StepKey::PlanReview { round, .. } => {
            let draft = draft_of(ctx, &snapshot.id, lane, *round)?;
            let before = before_fingerprint(&dir);
            let parsed = read().and_then(|text| {
                // A reviewer only reads: one that changed the checkout has no answer.
                if plan_text::checkout_fingerprint(&ctx.repo.root)? != before {
                    return Err("the reviewer changed the checkout; a reviewer only reads".into());
                }
                validate::parse_answer(&text, &crate::run::answer::known_ids(ctx, &draft))
                    .map_err(|p| format!("{}: {}", p.code, p.message))
            });
            match parsed {
                Ok(a) => {
                    let kept: Kept = kept::keep(&dir.join("answer.json"), &a)
                        .map_err(|e| store_refusal(ctx.verb, e))?;
                    result["answer"] = serde_json::to_value(kept).expect("serialises");
                    answer = Some(a);
                }
                Err(why) => result["problem"] = why.into(),
            }
        }
        _ => unreachable!("only planning agents are checked"),
    }
    crate::failpoint::hit("plan-check-before-record");
    ctx.transact(|state| {
        let run = state.runs.get_mut(&snapshot.id).expect("the run");
        let lane = run.lane_mut(lane_id).expect("lane");
        let Some(index) = lane
            .steps
            .iter()
            .position(|r| r.step == key && r.status == StepStatus::Done && !choose::checked(r))
        else {
            // Another call checked it first.
            let lane = run.lane(lane_id).expect("lane");
            return Ok(StepReport::for_lane(
                run,
                lane,
                Action::Advanced,
                Then::MovedOn { step: key.clone() },
            ));
        };
        if let (Some(a), StepKey::PlanReview { lens, round }) = (&answer, &key) {
            mint(lane, lens, *round, a);
        }
        let record = &mut lane.steps[index];
        let mut outcome = record.outcome.clone().unwrap_or_else(|| json!({}));
        merge(&mut outcome, &result);
        record.outcome = Some(outcome);
        emit(
            &ctx.paths,
            &snapshot.id,
            Event::StepDone,
            json!({"lane": lane_id, "step": key, "attempt": 1, "outcome": result}),
        );
        let lane = run.lane(lane_id).expect("lane");
        Ok(StepReport::for_lane(
            run,
            lane,
            Action::Advanced,
            Then::PlanChecked {
                step: key.clone(),
                refused: result["refused"]
                    .as_str()
                    .or(result["problem"].as_str())
                    .map(str::to_owned),
            },
        ))
    })
}

/// The fingerprint of the checkout taken before the agent started: the loop's own file, read as
/// one (never through a link, never a FIFO, bounded); unreadable, it matches nothing.
fn before_fingerprint(dir: &std::path::Path) -> String {
    crate::store::read_no_follow(&dir.join("before.txt"), 1024)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .unwrap_or_else(|| "unreadable".into())
}

fn merge(into: &mut Value, from: &Value) {
    if let (Some(a), Some(b)) = (into.as_object_mut(), from.as_object()) {
        for (k, v) in b {
            a.insert(k.clone(), v.clone());
        }
    }
}

fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Every finding of a reviewer's answer, minted by the loop as `<lane>-P<n>` (numbered across
/// rounds): S1 and S2 open, S3 and S4 noted.
fn mint(lane: &mut Lane, lens: &str, round: u32, answer: &Answer) {
    for evidence in &answer.findings {
        let n = lane.findings.len() + 1;
        let mut f = Finding {
            id: format!("{}-P{n}", lane.id),
            by: lens.to_owned(),
            round,
            evidence: evidence.clone(),
            status: String::new(),
            refutation: None,
            disposition: None,
            head: None,
        };
        f.status = if f.is_blocking() { "open" } else { "noted" }.into();
        lane.findings.push(f);
    }
}

/// Outside the lock: the loop's decision (SPEC 20.16). Every write is idempotent, so a call
/// killed anywhere in it is redone whole by the next.
pub(crate) fn decide(ctx: &Ctx<'_>, snapshot: &Run, lane_id: &str) -> Result<StepReport, Refusal> {
    let lane = snapshot.lane(lane_id).expect("lane");
    let id = lane.unit.clone();
    let step = ctx.verb;
    let last = choose::round_of(lane);
    let draft = draft_of(ctx, &snapshot.id, lane, last)?;
    let current = ctx.repo.read_unit(&id, step)?;
    let approved_already = current.parsed.frontmatter.str("status") == Some("approved")
        && current.parsed.frontmatter.str("contract_hash")
            == Some(crate::unit::contract_hash(&draft).as_str());
    if !approved_already && current.text != draft {
        ctx.repo.write_unit(&id, &draft, step)?;
    }
    let unit = ctx.repo.read_unit(&id, step)?;
    let mut reviews = Vec::new();
    let mut answered = Vec::new();
    for r in 1..=last {
        for key in choose::reviewers(r) {
            let StepKey::PlanReview { lens, .. } = &key else {
                continue;
            };
            let record = lane.record(&key);
            let answer =
                kept::load_from::<Answer>(record.and_then(|r| r.outcome.as_ref()), "answer")
                    .ok_or_else(|| {
                        record
                            .and_then(|r| r.outcome.as_ref())
                            .and_then(|o| o["problem"].as_str())
                            .unwrap_or("it ended without an outcome")
                            .to_owned()
                    });
            if r == last {
                answered.push((lens.clone(), answer.is_ok()));
            }
            reviews.push(Review {
                round: r,
                lens: lens.clone(),
                answer,
            });
        }
    }
    let open = lane
        .findings
        .iter()
        .filter(|f| f.round == last && f.status == "open")
        .count();
    let grounds = plan_text::grounds(ctx.repo, &unit, &ctx.config, &answered, open);
    let approve = approved_already || grounds.iter().all(|g| g.holds);
    let record = plan_text::decision_record(
        &unit,
        &snapshot.id,
        last,
        &reviews,
        &lane.findings,
        &grounds,
        approve,
    );
    let record_path = ctx.repo.unit_paths(&id).dir.join("plan-decision.md");
    crate::store::write_atomic(&record_path, record.as_bytes(), 0o644)
        .map_err(|e| store_refusal(step, e))?;
    crate::failpoint::hit("plan-decide-after-write");
    if approve && !approved_already {
        let decisions =
            crate::repo::read_text(&ctx.repo.unit_paths(&id).decisions).unwrap_or_default();
        if !decisions.contains(&snapshot.id) {
            ctx.repo.append_decision(
                &id,
                "loop",
                &[
                    ("Decision", &format!("approved by the loop in run {} (`iced build --auto-plan`)", snapshot.id)),
                    ("Why", "every ground of intent/<id>/plan-decision.md holds: both reviews in, no open S1 or S2 finding, signoff lint clean, no open question, effective autonomy 3"),
                ],
                step,
            )?;
        }
        let approval = crate::record::prepare_approval(ctx.repo, &id, step)?;
        crate::record::approve(
            ctx.repo,
            crate::record::Approval {
                auto: true,
                ..approval
            },
            step,
        )?;
        crate::failpoint::hit("plan-decide-after-approve");
    }
    let commit = commit_unit(ctx, &id, &snapshot.id)?;
    crate::failpoint::hit("plan-decide-after-commit");
    let failed: Vec<String> = grounds
        .iter()
        .filter(|g| !g.holds)
        .map(|g| g.what.clone())
        .collect();
    let reason = format!(
        "awaits approval: {}; read intent/{id}/plan-decision.md, then `iced approve {id}`, commit it, and `iced build {id}`",
        failed.join("; ")
    );
    record_after(
        ctx,
        &snapshot.id,
        lane_id,
        &StepKey::PlanDecide,
        |_, record| {
            finish(
                record,
                StepStatus::Done,
                json!({"approved": approve, "commit": commit, "reason": if approve { Value::Null } else { reason.clone().into() }, "failed": failed}),
            );
            Ok((
                Action::Advanced,
                Then::PlanDecided {
                    approved: approve,
                    unit: id.clone(),
                },
            ))
        },
    )
}

/// Commit `intent/<id>/` alone (`iced: plan <id>`); a folder with nothing to commit adopts `HEAD`.
fn commit_unit(ctx: &Ctx<'_>, id: &str, run: &str) -> Result<String, Refusal> {
    let root = &ctx.repo.root;
    let dir = format!("intent/{id}");
    let git = |args: &[&str]| {
        crate::git::run(root, args).map_err(|e| {
            ctx.refuse(
                "io-error",
                format!("git {} failed: {e}", args.join(" ")),
                "fix the repository, then `iced build` again",
            )
        })
    };
    git(&["add", "--", &dir])?;
    if !crate::git::is_clean(root, &[&dir]).unwrap_or(false) || staged(ctx, &dir) {
        let message = format!("iced: plan {id}\n\nIced-Run: {run}\n");
        git(&["commit", "-q", "-m", &message, "--", &dir])?;
    }
    Ok(crate::git::head(root).unwrap_or_default())
}

/// Whether `dir` has changes staged against `HEAD`.
fn staged(ctx: &Ctx<'_>, dir: &str) -> bool {
    crate::git::run(&ctx.repo.root, &["diff", "--cached", "--quiet", "--", dir]).is_err()
}
