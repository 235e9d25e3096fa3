//! The receipt (SPEC 20.4, 20.5, 24.2): what the loop checks itself when an implementer is done
//! (commits ahead of the base, a clean worktree, the report, what the lane changed, judged by the
//! guard), then, with the definition of done in, whether it verifies; and a host's hand-in of its
//! agent's report.

use crate::refusal::Refusal;
use crate::run::ctx::*;
use crate::run::escalation::{Asked, Escalation, EscalationStatus};
use crate::run::events::{emit, Event};
use crate::run::keys::StepKey;
use crate::run::outcome::{ActivityOutcome, ReceiptOutcome};
use crate::run::records::open_run;
use crate::run::records::*;
use crate::run::reply::Action;
use crate::run::reply::*;
use crate::run::report;
use crate::run::state::{Lane, Run, Stage, StepStatus};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// The receipt's own checks (no command run but git's): commits ahead of the base on the lane
/// branch, a clean worktree, and the report. Recorded as the receipt record's partial outcome.
pub(crate) fn receipt_checks(ctx: &Ctx<'_>, run: &Run, lane: &Lane) -> Value {
    let worktree = PathBuf::from(lane.worktree.clone().unwrap_or_default());
    let branch = lane.branch.clone().unwrap_or_default();
    // A remote lane's work comes into the loop's worktree first, then is checked as a local
    // lane's (SPEC 20.19).
    let remote = ctx.settings.implementer.as_ref().is_some_and(|r| r.remote);
    let mut missing: Vec<String> =
        if remote && crate::run::stage::remote::is_remote_lane(ctx, &run.id, &lane.id) {
            match crate::run::stage::remote::take_pushed(ctx, run, lane) {
                Ok(gaps) => gaps,
                // Nothing is checked without the agent's work: the checks run again later.
                Err(why) => return json!({ "unreachable": why }),
            }
        } else {
            Vec::new()
        };
    // No git runs in what an agent left at the worktree's path (a link to the person's checkout,
    // say): a replaced worktree is a gap, and the branch is read in the checkout (SPEC 24.6).
    // Git's folder for the worktree when it is the one git made; none for the checkout itself.
    let checked = if worktree == ctx.repo.root {
        Ok(None)
    } else {
        super::worktree::own_worktree(ctx, &worktree).map(Some)
    };
    let (admin, replaced_why) = match checked {
        Ok(admin) => (admin, None),
        Err(why) => (None, Some(why)),
    };
    if let Some(why) = &replaced_why {
        missing.push(format!("the worktree is not the worktree git made: {why}"));
    }
    let replaced = replaced_why.is_some();
    // A confined implementer committed into a git of its own: its branch comes into the
    // repository and its index into the worktree first (SPEC 24.12).
    if let Some(admin) = admin.as_deref().filter(|_| !remote) {
        let activity = ctx.activity_dir(&run.id, &lane.id, &StepKey::Implement, lane.attempt);
        missing.extend(crate::run::lane_git::gaps_taking_back(
            ctx, &branch, admin, &activity,
        ));
    }
    let (worktree, status) = if replaced {
        (ctx.repo.root.clone(), Err("not read".to_owned()))
    } else {
        // The agent has ended: a git lock its git left is not its work (SPEC 24.6).
        if let Some(admin) = &admin {
            let lane_of = (run.id.as_str(), lane.id.as_str());
            let removed = super::worktree::remove_git_locks(
                ctx,
                lane_of,
                ("receipt", Some(&branch)),
                (&worktree, admin),
            );
            missing.extend(removed.err());
        }
        // The worktree's status, with the branch it is on and its head (one git).
        let status = crate::git::status(&worktree);
        (worktree, status)
    };
    // The head this receipt judges, and its tree: the definition of done, the validators and
    // the delivery all refer to exactly this commit (SPEC 24.3). On the lane branch, its head is
    // the status's (the tree read from the commit through the call's `cat-file`); otherwise the
    // branch's, read with the branch the worktree is on (one git). A branch that is not there
    // leaves both empty.
    let from_status = status.as_ref().ok().and_then(|s| {
        let head = s
            .head
            .clone()
            .filter(|_| s.branch.as_deref() == Some(&branch))?;
        let tree = ctx.tree_of(&head)?;
        Some((Some((head, tree)), s.branch.clone()))
    });
    let (at, on_branch) = from_status.unwrap_or_else(|| crate::git::branch_at(&worktree, &branch));
    let on_lane_branch = on_branch.as_deref() == Some(branch.as_str());
    if !on_lane_branch && !replaced {
        missing.push(format!(
            "the worktree is on `{}`, not on the lane branch `{branch}`",
            on_branch.unwrap_or_else(|| "a detached HEAD".into())
        ));
    }
    let (head, tree) = at.unwrap_or_default();
    // The commits ahead, as the delivery lists them (one git for both in a call).
    let ahead = ctx
        .commits_between(&worktree, run.base_of(lane), &head)
        .map_or(0, |log| log.lines().count());
    if ahead == 0 {
        missing.push(format!(
            "no commit on `{branch}` ahead of the base {}",
            &run.base_of(lane)[..run.base_of(lane).len().min(12)]
        ));
    }
    // What the lane changed, not only what it reports: each path judged by the guard as the
    // implementer's write, the units as they stood at the base (SPEC 24.2).
    let base = run.base_of(lane);
    let judged =
        crate::run::lane_guard::judge_range(ctx, &lane.unit, &worktree, (base, &head), base, &[]);
    let guard = match judged {
        Ok(denied) => {
            missing.extend(denied.iter().map(|d| d.gap(base)));
            serde_json::to_value(&denied).expect("serialises")
        }
        Err(e) => {
            missing.push(format!("what the lane changed could not be judged: {e}"));
            Value::Null
        }
    };
    match status.map(|s| s.clean) {
        // The index holds exactly the head's tree, as long as its file stays as it is now.
        Ok(true) if on_lane_branch && !head.is_empty() => ctx.saw_clean_index(&worktree, &head),
        Ok(true) => {}
        Ok(false) => missing.push("the worktree has uncommitted or untracked changes".into()),
        Err(_) if replaced => {}
        Err(e) => missing.push(format!("the worktree's status could not be read: {e}")),
    }
    let receipt = ctx.receipt_path(run, &lane.id, lane.attempt);
    let mut handback = None;
    let mut escalation = None;
    let mut kept = Value::Null;
    match report::read(&receipt) {
        Ok(r) => {
            if let Some(h) = &r.handback {
                handback = Some(h.reason.clone());
            }
            let unit_text = crate::repo::read_text(&ctx.repo.unit_paths(&lane.unit).iced).ok();
            match escalation_of(ctx, lane, &r, unit_text.as_deref()) {
                Ok(e) => escalation = e,
                Err(gap) => missing.push(gap),
            }
            let stops = r.handback.is_some() || escalation.is_some();
            // Every expectation needs the implementer's evidence; each must name a real one.
            if let Some(text) = &unit_text {
                let parsed = crate::unit::parse_unit(text);
                for e in &parsed.expectations {
                    if !r.evidence.iter().any(|x| x.expectation == e.id) && !stops {
                        missing.push(format!("the report gives no evidence for {}", e.id));
                    }
                }
                for x in &r.evidence {
                    if !parsed.expectations.iter().any(|e| e.id == x.expectation) {
                        missing.push(format!(
                            "the report's evidence names {}, which the unit does not have",
                            x.expectation
                        ));
                    }
                }
            }
            if !stops {
                missing.extend(crate::run::dispositions::disposition_gaps(
                    ctx, run, lane, &r, &head,
                ));
            }
            // The report as the loop took it, in a file of its own (SPEC 24.5).
            let copy = ctx
                .lane_dir(&run.id, &lane.id)
                .join(format!("receipt-{}.json", lane.attempt));
            match crate::run::kept::keep(&copy, &r) {
                Ok(k) => kept = serde_json::to_value(k).expect("serialises"),
                Err(e) => missing.push(format!("the report could not be kept: {e}")),
            }
        }
        Err(p) => missing.push(format!("{}: {}", p.code, p.message)),
    }
    // What is missing may be so because the implementer did not end well: say how it ended first.
    if !missing.is_empty() {
        if let Some(how) = lane
            .outcome_as::<crate::run::outcome::ActivityOutcome>(&StepKey::Implement)
            .and_then(|o| ended_badly(&o))
        {
            missing.insert(0, format!("the implementer {how}"));
        }
    }
    let mut checks = json!({"missing": missing, "ahead": ahead, "head": head, "tree": tree, "guard": guard, "handback": handback, "escalation": escalation, "report": kept});
    if let Some(why) = replaced_why {
        checks["replaced"] = why.into();
    }
    checks
}

/// The report's escalation or questions as the lane will record them (SPEC 20.7): questions are
/// numbered after the highest Q item of the unit, and more than `questions.max` of them is a gap of
/// the attempt, not a stop.
fn escalation_of(
    ctx: &Ctx<'_>,
    lane: &Lane,
    r: &report::Report,
    unit_text: Option<&str>,
) -> Result<Option<Escalation>, String> {
    if let Some(e) = &r.escalate {
        return Ok(Some(Escalation {
            attempt: lane.attempt,
            kind: e.kind.clone(),
            message: e.message.clone(),
            proposal: e.proposal.clone(),
            questions: Vec::new(),
            status: EscalationStatus::Open,
            guidance: None,
            contract_hash: None,
        }));
    }
    let Some(questions) = &r.questions else {
        return Ok(None);
    };
    let max = usize::try_from(ctx.settings.questions_max).unwrap_or(usize::MAX);
    if questions.len() > max {
        return Err(format!(
            "report-invalid: the report asks {} questions; questions.max is {max}",
            questions.len()
        ));
    }
    let highest = unit_text
        .map(crate::unit::parse_unit)
        .map(|p| {
            p.questions
                .iter()
                .filter_map(|q| q.id.strip_prefix('Q').and_then(|n| n.parse::<u32>().ok()))
                .max()
                .unwrap_or(0)
        })
        .unwrap_or(0);
    let asked = questions
        .iter()
        .zip(highest + 1..)
        .map(|(q, n)| Asked {
            id: format!("Q{n}"),
            // It is written into the unit once answered: one line, no terminal escapes.
            text: crate::text::for_terminal(&q.text)
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" "),
            options: q.options.clone(),
            answer: None,
        })
        .collect();
    Ok(Some(Escalation {
        attempt: lane.attempt,
        kind: "questions".into(),
        message: format!("{} question(s) for a person", questions.len()),
        proposal: None,
        questions: asked,
        status: EscalationStatus::Open,
        guidance: None,
        contract_hash: None,
    }))
}

/// How an activity ended, when not with exit 0: `timed out after 30 s`, `exited 3`, `was killed by
/// signal 9`, `could not start: ...`. None for a clean exit, or an outcome that says nothing (a
/// host's agent).
fn ended_badly(o: &crate::run::outcome::ActivityOutcome) -> Option<String> {
    if o.timed_out {
        return Some(match o.duration_ms {
            Some(ms) => format!("timed out after {} s", ms / 1000),
            None => "timed out".to_owned(),
        });
    }
    if let Some(e) = &o.spawn_error {
        return Some(format!("could not start: {e}"));
    }
    match (o.signal, o.exit_code) {
        (Some(s), _) => Some(format!("was killed by signal {s}")),
        (None, Some(0)) | (None, None) => None,
        (None, Some(c)) => Some(format!("exited {c}")),
    }
}

/// All commands and checks are in: the receipt verifies or names every gap at once.
pub(crate) fn finish_receipt(
    ctx: &Ctx<'_>,
    run: &mut Run,
    lane_id: &str,
    view: &crate::run::decide::DecideView,
) -> Result<(), Refusal> {
    let run_id = run.id.clone();
    let lane = run.lane_mut(lane_id).expect("lane");
    let attempt = lane.attempt;
    // The receipt's own checks, as `receipt_checks` recorded them.
    let checks = lane
        .record(&StepKey::Receipt)
        .and_then(|r| r.outcome_as::<ReceiptOutcome>())
        .unwrap_or_default();
    let mut missing = checks.missing.clone();
    let mut commands = Vec::new();
    for (i, sequence) in ctx.settings.dod.iter().enumerate() {
        for (j, command) in sequence.iter().enumerate() {
            let key = StepKey::Dod { seq: i, cmd: j };
            match lane.record(&key) {
                Some(r) if r.status == StepStatus::Done => {
                    let o = r.outcome_as::<ActivityOutcome>().unwrap_or_default();
                    let code = o.exit_code.and_then(|c| i32::try_from(c).ok());
                    let passed = code.is_some_and(|c| command.expected_exit_codes.contains(&c));
                    if !passed {
                        missing.push(format!(
                            "`{}` {}",
                            command.display(),
                            match (code, ended_badly(&o)) {
                                (Some(c), _) if !o.timed_out => format!(
                                    "exited {c}, expected {:?}",
                                    command.expected_exit_codes
                                ),
                                (_, Some(how)) => how,
                                (_, None) => "ended without an exit code".to_owned(),
                            }
                        ));
                    }
                    commands.push(json!({"command": command.display(), "argv": command.argv, "expected_exit_codes": command.expected_exit_codes, "exit_code": code, "passed": passed, "timed_out": o.timed_out, "duration_ms": o.duration_ms, "stdout": o.stdout, "stderr": o.stderr, "spawn_error": o.spawn_error}));
                }
                _ => {
                    commands.push(json!({"command": command.display(), "argv": command.argv, "passed": false, "skipped": true}));
                }
            }
        }
    }
    let handback = checks.handback.clone();
    // The test writer's work, when one ran (SPEC 20.17): its head is the head this receipt
    // judges, its request the lane's escalation, and its refusal the lane's handback.
    let tests = lane
        .record(&StepKey::TestCheck)
        .filter(|r| r.status == StepStatus::Done)
        .and_then(|r| r.outcome_as::<crate::run::outcome::TestCheckOutcome>());
    let tests_refused = tests.as_ref().and_then(crate::run::decide::tester::refused);
    let escalation = checks
        .escalation
        .clone()
        .or_else(|| tests.as_ref().and_then(|t| t.escalation.clone()));
    let (head, tree) = match &tests {
        Some(t) if tests_refused.is_none() => (t.head.clone(), t.tree.clone()),
        _ => (checks.head.clone(), checks.tree.clone()),
    };
    let verified =
        missing.is_empty() && handback.is_none() && escalation.is_none() && tests_refused.is_none();
    let record = lane
        .record_mut(&StepKey::Receipt)
        .expect("the receipt record exists");
    finish(
        record,
        if verified {
            StepStatus::Done
        } else {
            StepStatus::Failed
        },
        {
            let mut outcome = json!({"verified": verified, "missing": missing, "commands": commands, "ahead": checks.ahead, "head": head, "tree": tree, "guard": checks.guard, "report": checks.report, "handback": handback, "escalation": escalation});
            if let Some(why) = &checks.replaced {
                outcome["replaced"] = why.as_str().into();
            }
            outcome
        },
    );
    emit(
        &ctx.paths,
        &run_id,
        if verified {
            Event::StepDone
        } else {
            Event::StepFailed
        },
        json!({"lane": lane_id, "step": "receipt", "attempt": attempt, "outcome": {"verified": verified, "missing": missing.len()}}),
    );
    let mv = crate::run::decide::after_receipt(
        lane,
        view,
        &crate::run::decide::ReceiptFound {
            verified,
            handback: handback.as_deref(),
            missing: &missing,
            escalation: escalation.as_ref(),
            tests_refused: tests_refused.as_deref(),
            replaced: checks.replaced.as_deref(),
        },
    );
    if escalation.is_some() {
        lane.escalation = escalation;
    }
    if verified {
        // The dispositions of a fix round are now facts of the branch: record them on the findings.
        let dispositions = crate::run::kept::load_from::<report::Report>(
            lane.record(&StepKey::Receipt)
                .and_then(|r| r.outcome.as_ref()),
            "report",
        )
        .map(|r| serde_json::to_value(r.dispositions).expect("serialises"))
        .unwrap_or(Value::Null);
        crate::run::dispositions::apply_dispositions(lane, &dispositions);
        if mv == crate::run::decide::LaneMove::To(Stage::Validate) && lane.validators.is_empty() {
            lane.validators = crate::run::stage::validators::validators_for(ctx, lane);
        }
    }
    // Without validators, `reason` is kept: an attempt's brief renders the previous attempt's
    // gaps from it, and the deliver step re-checks that the brief still renders to its inputs.
    apply_move(ctx, &run_id, lane, mv)
}

pub(crate) fn submit_receipt_once(
    ctx: &Ctx<'_>,
    run_id: &str,
    path: &Path,
    said: &crate::run::host::HostAgent,
) -> Result<StepReport, Refusal> {
    let given = path.canonicalize().unwrap_or_else(|_| path.to_owned());
    ctx.transact(|state| {
        let run = open_run(ctx, state, run_id, "hand in")?;
        let run_snapshot = run.clone();
        if let Some(report) = crate::run::stage::validators::host_answer(ctx, run, &given, said)? {
            return Ok(report);
        }
        // The lane this path belongs to: the one whose receipt goes there now, else one in
        // Implement (whose path it then is not; refused below).
        let at = |l: &Lane, a: u32| {
            let p = ctx.receipt_path(&run_snapshot, &l.id, a);
            p.canonicalize().unwrap_or(p) == given
        };
        let index = run
            .lanes
            .iter()
            .position(|l| l.stage == Stage::Implement && at(l, l.attempt))
            .or_else(|| run.lanes.iter().position(|l| (1..=l.attempt).any(|a| at(l, a))))
            .or_else(|| run.lanes.iter().position(|l| l.stage == Stage::Implement))
            .ok_or_else(|| {
                ctx.refuse("receipt-superseded", format!("run `{run_id}` is not waiting for a receipt"), "`iced implement step` says what the run needs now")
            })?;
        let lane = &mut run.lanes[index];
        if lane.stage != Stage::Implement {
            return Err(ctx.refuse("receipt-superseded", format!("lane `{}` is not waiting for a receipt (it is at {})", lane.id, lane.stage.as_str()), "`iced implement step` says what the run needs now"));
        }
        let expected = ctx.receipt_path(&run_snapshot, &lane.id, lane.attempt);
        let expected_c = expected.canonicalize().unwrap_or_else(|_| expected.clone());
        if given != expected_c {
            // A report for an earlier attempt of this lane is superseded, anything else is a wrong path.
            let earlier = (1..lane.attempt).any(|a| {
                let p = ctx.receipt_path(&run_snapshot, &lane.id, a);
                p.canonicalize().unwrap_or(p) == given
            });
            return Err(if earlier {
                ctx.refuse("receipt-superseded", format!("`{}` is the report of an earlier attempt; attempt {} is current", path.display(), lane.attempt), format!("have the agent write to `{}`", expected.display()))
            } else {
                ctx.refuse("receipt-path", format!("`{}` is not where this attempt's report goes", path.display()), format!("the report goes to `{}` (`iced implement step` names it)", expected.display()))
            });
        }
        let record = lane.record(&StepKey::Implement).cloned();
        match record {
            Some(r) if r.status == StepStatus::Started => {}
            _ => return Err(ctx.refuse("receipt-superseded", "this attempt is not waiting for a receipt", "`iced implement step` says what the run needs now")),
        }
        // A malformed or forged report is refused now, so the host can have it fixed; nothing is
        // recorded and the attempt keeps waiting.
        if let Err(p) = report::read(&expected) {
            let remedy = p.remedy();
            return Err(ctx.refuse(p.code, p.message, remedy));
        }
        let record = lane.record_mut(&StepKey::Implement).expect("checked above");
        finish(record, StepStatus::Done, json!({"receipt_path": expected, crate::run::host::SAID: said}));
        apply_move(ctx, run_id, lane, crate::run::decide::after_implementer())?;
        emit(&ctx.paths, run_id, Event::AgentEnd, json!({"lane": lane.id, "attempt": lane.attempt, "role": "implementer", "step": "implement", "driver": "host"}));
        emit(&ctx.paths, run_id, Event::StepDone, json!({"lane": lane.id, "step": "implement", "attempt": lane.attempt, "outcome": {"receipt_path": expected}}));
        let lane_id = lane.id.clone();
        let run = state.runs.get(run_id).expect("run");
        let lane = run.lane(&lane_id).expect("lane");
        Ok(StepReport::for_lane(run, lane, Action::Advanced, crate::run::then::Then::ReceiptIn))
    })
}
