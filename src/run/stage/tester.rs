//! The test writer (SPEC 20.17): its prompt and launch in the lane's worktree, and the loop's own
//! check of what it changed (every path of its commits judged by the guard as the test writer's
//! write, a clean worktree) and of its report, whose requests become an escalation (SPEC 20.7).

use crate::refusal::Refusal;
use crate::run::ctx::Ctx;
use crate::run::escalation::{Escalation, EscalationStatus};
use crate::run::events::{emit, Event};
use crate::run::keys::StepKey;
use crate::run::launch::{agent_spec, gate_value, launch as start, AgentStart};
use crate::run::outcome::{ReceiptOutcome, TestCheckOutcome, TestDenied};
use crate::run::reply::{Action, StepReport};
use crate::run::state::{Lane, Run, StepStatus};
use crate::run::then::Then;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::path::{Path, PathBuf};

/// A test writer's report (SPEC 20.17): optional, strict.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TesterReport {
    #[serde(default)]
    pub summary: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub research_request: Option<ResearchRequest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_change_request: Option<SpecChangeRequest>,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ResearchRequest {
    pub question: String,
    pub blocking: bool,
    #[serde(default)]
    pub tried: Vec<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SpecChangeRequest {
    pub criterion_ref: String,
    pub assumption: String,
    pub evidence: String,
    #[serde(default)]
    pub changes: String,
    #[serde(default)]
    pub sites: Vec<String>,
    pub blocking: bool,
}

const REPORT_LIMIT: u64 = 256 * 1024;
const TEXT_LIMIT: usize = 2000;

/// The report at `path`: none when there is none; a problem when it is not a regular file of at
/// most 256 KiB holding the schema.
pub fn read_report(path: &Path) -> Result<Option<TesterReport>, String> {
    let bytes = match crate::store::read_no_follow(path, REPORT_LIMIT) {
        Ok(b) => b,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let report: TesterReport = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
    if report.research_request.is_some() && report.spec_change_request.is_some() {
        return Err("it carries both `research_request` and `spec_change_request`".into());
    }
    let bounded = |what: &str, text: &str| -> Result<(), String> {
        match text.trim().chars().count() {
            0 => Err(format!("`{what}` is empty")),
            n if n > TEXT_LIMIT => Err(format!("`{what}` is over {TEXT_LIMIT} characters")),
            _ => Ok(()),
        }
    };
    if let Some(r) = &report.research_request {
        bounded("research_request.question", &r.question)?;
    }
    if let Some(r) = &report.spec_change_request {
        bounded("spec_change_request.assumption", &r.assumption)?;
        bounded("spec_change_request.evidence", &r.evidence)?;
        let id = r.criterion_ref.trim();
        if !(id.len() >= 2
            && id.starts_with(|c: char| c.is_ascii_uppercase())
            && id[1..].chars().all(|c| c.is_ascii_digit()))
        {
            return Err(format!(
                "`spec_change_request.criterion_ref` `{id}` is not an item id (`E2`, `C1`)"
            ));
        }
        if r.changes.len() > 16 * 1024 {
            return Err("`spec_change_request.changes` is over 16 KiB".into());
        }
    }
    Ok(Some(report))
}

/// The escalation a report's request makes (SPEC 20.17), for attempt `attempt`: `research` or
/// `spec-change`, whose `changes` are its proposal when they apply to the unit's `text`.
pub fn escalation_of(attempt: u32, report: &TesterReport, text: &str) -> Option<Escalation> {
    let one_line = |s: &str| {
        crate::text::for_terminal(s)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    let (kind, message, proposal) = if let Some(r) = &report.research_request {
        let mut message = format!("research request: {}", one_line(&r.question));
        if !r.tried.is_empty() {
            let tried: Vec<String> = r.tried.iter().map(|t| one_line(t)).collect();
            message.push_str(&format!("; tried: {}", tried.join("; ")));
        }
        if !r.blocking {
            message.push_str(" (not blocking)");
        }
        ("research", message, None)
    } else {
        let r = report.spec_change_request.as_ref()?;
        let mut message = format!(
            "spec change request for {}: {}; evidence: {}",
            r.criterion_ref.trim(),
            one_line(&r.assumption),
            one_line(&r.evidence)
        );
        if !r.sites.is_empty() {
            let sites: Vec<String> = r.sites.iter().map(|t| one_line(t)).collect();
            message.push_str(&format!("; sites: {}", sites.join(", ")));
        }
        if !r.blocking {
            message.push_str(" (not blocking)");
        }
        let applies = !r.changes.trim().is_empty()
            && crate::unit::proposal::apply(text, &r.changes).is_ok_and(|a| !a.changes.is_empty());
        let proposal = if applies {
            Some(r.changes.clone())
        } else {
            if !r.changes.trim().is_empty() {
                message.push_str(&format!(
                    "; proposed changes, not contract lines: {}",
                    one_line(&r.changes)
                ));
            }
            None
        };
        ("spec-change", message, proposal)
    };
    Some(Escalation {
        attempt,
        kind: kind.into(),
        message: message.chars().take(4 * TEXT_LIMIT).collect(),
        proposal,
        questions: Vec::new(),
        status: EscalationStatus::Open,
        guidance: None,
        contract_hash: None,
    })
}

/// Where attempt `attempt`'s test writer writes its report.
pub(crate) fn report_path(ctx: &Ctx<'_>, run: (&str, u32), lane: &str, attempt: u32) -> PathBuf {
    paths(ctx, run, lane, attempt).1
}

/// Where attempt `attempt`'s test writer finds its prompt and writes its report.
/// `run` is the run's id and brief layout: from layout 5 the report goes to `out/report.json` of
/// the test writer's activity (SPEC 21.1).
fn paths(ctx: &Ctx<'_>, run: (&str, u32), lane: &str, attempt: u32) -> (PathBuf, PathBuf) {
    let dir = ctx.lane_dir(run.0, lane);
    let report = if run.1 >= crate::run::state::ANSWER_LAYOUT {
        ctx.answer_dir(run.0, lane, &StepKey::TestWrite, attempt)
            .join("report.json")
    } else {
        dir.join(format!("tester-{attempt}.json"))
    };
    (dir.join(format!("tester-{attempt}.md")), report)
}

/// The test writer's prompt: the same bytes for the same inputs.
pub fn prompt(unit: &str, text: &str, globs: &[String], branch: &str, report: &Path) -> String {
    let globs: Vec<String> = globs.iter().map(|g| format!("`{g}`")).collect();
    format!(
        "# Test writer: {unit}\n\n\
You write tests for the expectations of the unit below, in this worktree, on the branch `{branch}`. \
The implementer has built it; you test it.\n\n\
## Rules\n\n\
- Write tests, never the code under test. You may write only test paths: {globs}. The loop checks \
every path your commits touch; a write anywhere else is refused and the lane is handed back.\n\
- Commit your tests on `{branch}` (`git add`, `git commit`) and leave nothing uncommitted.\n\
- Never weaken, skip or delete an existing test to make it pass.\n\
- A test that fails because the code is wrong stays red: the definition of done sends the work back \
to the implementer. A flaky test you introduce is a defect of your work.\n\
- When you cannot go on for want of knowledge, ask with `research_request`; when an expectation \
cannot be tested honestly because it is wrong, propose a change with `spec_change_request` (its \
`changes` in contract lines, `- [E2] new text`). Never write a weaker test instead.\n\n\
## Report\n\n\
Write one JSON object to `{report}` (optional when you only commit tests):\n\n\
```json\n\
{{\"summary\": \"...\",\n \"research_request\": {{\"question\": \"...\", \"blocking\": true, \"tried\": [\"...\"]}},\n \
\"spec_change_request\": {{\"criterion_ref\": \"E1\", \"assumption\": \"...\", \"evidence\": \"...\", \
\"changes\": \"- [E1] ...\", \"sites\": [\"...\"], \"blocking\": true}}}}\n\
```\n\n\
At most one of the two requests; no other key.\n\n\
## The unit\n\n{text}\n",
        globs = globs.join(", "),
        report = report.display(),
    )
}

/// Start the test writer of `lane`'s attempt, whose `test-write` record holds `nonce`.
pub(crate) fn launch(
    ctx: &Ctx<'_>,
    snapshot: &Run,
    lane: &str,
    nonce: &str,
) -> Result<StepReport, Refusal> {
    let l = snapshot.lane(lane).expect("lane");
    let writer = ctx
        .settings
        .test_writer
        .as_ref()
        .expect("the test writer is on");
    let runner = ctx
        .settings
        .implementer
        .as_ref()
        .expect("the test writer needs the implementer's runner");
    let worktree = PathBuf::from(l.worktree.clone().unwrap_or_default());
    let (prompt_path, report) = paths(ctx, (&snapshot.id, snapshot.brief_layout), lane, l.attempt);
    let text = crate::repo::read_text(&ctx.repo.unit_paths(&l.unit).iced)
        .map_err(|e| e.refusal(ctx.verb))?;
    let body = prompt(
        &l.unit,
        &text,
        &writer.paths,
        l.branch.as_deref().unwrap_or(""),
        &report,
    );
    crate::store::create_dir_all(&ctx.lane_dir(&snapshot.id, lane))
        .map_err(|e| crate::repo::store_refusal(ctx.verb, e))?;
    crate::store::write_atomic(&prompt_path, body.as_bytes(), 0o600)
        .map_err(|e| crate::repo::store_refusal(ctx.verb, e))?;
    let (model, effort) = writer.model_for(l.attempt);
    let values: Vec<(&str, String)> = vec![
        ("prompt_file", prompt_path.display().to_string()),
        ("output_file", report.display().to_string()),
        ("worktree", worktree.display().to_string()),
        ("role", StepKey::TestWrite.role().into()),
        ("model", model.clone().unwrap_or_default()),
        ("effort", effort.clone().unwrap_or_default()),
        ("run", snapshot.id.clone()),
        ("lane", lane.to_owned()),
        ("attempt", l.attempt.to_string()),
    ];
    super::worktree::clear_git_locks_for_agent(ctx, &snapshot.id, l, "test-write", &worktree);
    let dir = ctx.activity_dir(&snapshot.id, lane, &StepKey::TestWrite, l.attempt);
    let spec = agent_spec(
        ctx,
        runner,
        &values,
        AgentStart {
            read_only: false,
            nonce,
            model: model.as_deref(),
            effort: effort.as_deref(),
            prompt: &prompt_path,
            cwd: worktree,
            gate: gate_value(ctx, &snapshot.id, lane, &StepKey::TestWrite, l.attempt),
            dir: &dir,
        },
    )?;
    crate::failpoint::hit("tester-after-record");
    emit(
        &ctx.paths,
        &snapshot.id,
        Event::AgentStart,
        crate::run::launch::start_fields(
            &spec,
            runner,
            json!({"lane": lane, "attempt": l.attempt, "role": StepKey::TestWrite.role(), "step": StepKey::TestWrite, "runner": runner.name}),
        ),
    );
    start(ctx, &dir, &spec)?;
    crate::failpoint::hit("tester-after-spawn");
    Ok(StepReport::for_lane(
        snapshot,
        l,
        Action::Waiting,
        Then::Wait {
            why: crate::run::decide::Waiting::TestWriterRunning,
        },
    ))
}

/// What the test writer changed, as the loop sees it: the commits from the head the receipt
/// checked to the branch's head, each path judged by the guard as the test writer's write, the
/// worktree's state, and its report.
fn checked(ctx: &Ctx<'_>, run: &Run, lane: &Lane) -> TestCheckOutcome {
    let worktree = PathBuf::from(lane.worktree.clone().unwrap_or_default());
    let branch = lane.branch.clone().unwrap_or_default();
    // A confined test writer committed into a git of its own: its branch comes in first (SPEC
    // 24.12).
    let taken = super::worktree::own_worktree(ctx, &worktree).map_or_else(
        |_| Vec::new(),
        |admin| {
            let activity = ctx.activity_dir(&run.id, &lane.id, &StepKey::TestWrite, lane.attempt);
            crate::run::lane_git::gaps_taking_back(ctx, &branch, &admin, &activity)
        },
    );
    let git = |args: &[&str]| crate::git::run(&worktree, args).map(|s| s.trim().to_owned());
    // The receipt is still open (its definition of done comes after): its own checks recorded
    // the head they checked.
    let from = lane
        .record(&StepKey::Receipt)
        .and_then(|r| r.outcome_as::<ReceiptOutcome>())
        .and_then(|o| o.head)
        .unwrap_or_default();
    let head = git(&[
        "rev-parse",
        "--verify",
        &format!("refs/heads/{branch}^{{commit}}"),
    ])
    .unwrap_or_default();
    let tree = git(&["rev-parse", &format!("{head}^{{tree}}")]).unwrap_or_default();
    let mut o = TestCheckOutcome {
        from: Some(from.clone()),
        head: Some(head.clone()),
        tree: Some(tree),
        ..TestCheckOutcome::default()
    };
    o.problem = taken.into_iter().next();
    o.commits = git(&[
        "log",
        "--reverse",
        "--format=%h %s",
        &format!("{from}..{head}"),
    ])
    .map(|l| l.lines().map(str::to_owned).collect())
    .unwrap_or_default();
    let who = crate::guard::Who::TestWriter {
        unit: lane.unit.clone(),
        test_paths: ctx
            .settings
            .test_writer
            .as_ref()
            .map(|t| t.paths.clone())
            .unwrap_or_default(),
    };
    let base = run.base_of(lane);
    match crate::run::lane_guard::judge_range_as(ctx, who, &worktree, (&from, &head), base, &[]) {
        Ok(denied) => {
            o.denied = denied
                .into_iter()
                .map(|d| TestDenied {
                    path: d.path,
                    rule: d.rule.to_owned(),
                    reason: d.reason,
                })
                .collect();
        }
        Err(e) => {
            o.problem = Some(format!(
                "what the test writer changed could not be judged: {e}"
            ))
        }
    }
    // The test writer has ended: a git lock its git left is not its work (SPEC 24.6).
    if let Err(gap) = super::worktree::clear_git_locks(
        ctx,
        (&run.id, &lane.id),
        ("test-check", Some(&branch)),
        &worktree,
    ) {
        o.problem.get_or_insert(gap);
    }
    o.dirty = !matches!(crate::git::is_clean(&worktree, &[]), Ok(true));
    let (_, report) = paths(ctx, (&run.id, run.brief_layout), &lane.id, lane.attempt);
    match read_report(&report) {
        Ok(None) => {}
        Ok(Some(r)) => {
            let text =
                crate::repo::read_text(&ctx.repo.unit_paths(&lane.unit).iced).unwrap_or_default();
            o.escalation = escalation_of(lane.attempt, &r, &text);
            let copy = ctx
                .lane_dir(&run.id, &lane.id)
                .join(format!("tester-report-{}.json", lane.attempt));
            match crate::run::kept::keep(&copy, &r) {
                Ok(k) => o.report = Some(k),
                Err(e) => o.problem = Some(format!("its report could not be kept: {e}")),
            }
        }
        Err(p) => {
            o.problem
                .get_or_insert(format!("its report `{}`: {p}", report.display()));
        }
    }
    o
}

/// Outside the lock: check what the test writer changed, then record it if still current.
pub(crate) fn check(ctx: &Ctx<'_>, snapshot: &Run, lane: &str) -> Result<StepReport, Refusal> {
    let l = snapshot.lane(lane).expect("lane");
    let outcome = serde_json::to_value(checked(ctx, snapshot, l)).expect("serialises");
    crate::run::records::record_after(ctx, &snapshot.id, lane, &StepKey::TestCheck, |_, record| {
        crate::run::step_record::finish(record, StepStatus::Done, outcome.clone());
        crate::failpoint::hit("tester-check-after-record");
        Ok((Action::Advanced, Then::TestsChecked))
    })
}
