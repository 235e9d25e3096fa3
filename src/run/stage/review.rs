//! Review units (SPEC 20.14): what a `review` unit reviews, resolved once at admit, and the
//! `review.md` its delivery writes from the findings the loop minted.

use crate::refusal::Refusal;
use crate::run::ctx::Ctx;
use crate::run::keys::StepKey;
use crate::run::outcome::JudgeOutcome;
use crate::run::state::{Lane, ReviewTarget, Run};
use crate::unit::ParsedUnit;

/// The target of a `review` unit (`None` for any other type): its `range:` resolved to commits
/// (an empty range at `base` without one), and the files under review (the Scope's `In:` lines,
/// else what the range changed). Refuses `review-range-invalid` and `review-no-target`.
pub fn target(
    ctx: &Ctx<'_>,
    unit: &ParsedUnit,
    base: &str,
) -> Result<Option<ReviewTarget>, Refusal> {
    if unit.frontmatter.str("type") != Some("review") {
        return Ok(None);
    }
    let root = &ctx.repo.root;
    let written = unit.frontmatter.str("range").map(str::to_owned);
    let (from, to) = match &written {
        Some(range) => {
            let commit = |rev: &str| -> Option<String> {
                if rev.is_empty() || rev.starts_with('-') {
                    return None;
                }
                crate::git::run(
                    root,
                    &[
                        "rev-parse",
                        "--verify",
                        "--quiet",
                        &format!("{rev}^{{commit}}"),
                    ],
                )
                .ok()
            };
            let ends = range
                .split_once("..")
                .filter(|(_, to)| !to.starts_with('.'))
                .and_then(|(from, to)| Some((commit(from.trim())?, commit(to.trim())?)));
            ends.ok_or_else(|| {
                ctx.refuse(
                    "review-range-invalid",
                    format!("the review's `range: {range}` is not `<rev>..<rev>` with both ends commits of this repository"),
                    "write the range as two commits, such as `range: main~5..main`, then `iced build` again",
                )
            })?
        }
        None => (base.to_owned(), base.to_owned()),
    };
    let paths: Vec<String> = if unit.scope.inside.is_empty() {
        crate::git::run(root, &["diff", "--name-only", &format!("{from}..{to}")])
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    } else {
        unit.scope.inside.clone()
    };
    if written.is_none() && unit.scope.inside.is_empty() {
        return Err(ctx.refuse(
            "review-no-target",
            "the review unit names nothing to review: no `range:` and no Scope `In:` line",
            "add `range: <from>..<to>` to its frontmatter, or the paths to review as Scope `In:` lines, then `iced build` again",
        ));
    }
    Ok(Some(ReviewTarget {
        from,
        to,
        range: written,
        paths,
    }))
}

fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}

/// One line of text, whatever an agent put in it.
fn line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `intent/<id>/review.md` (SPEC 20.14): the target, who reviewed, every finding the loop minted,
/// and each expectation's merged result.
pub fn review_md(unit: &ParsedUnit, run: &Run, lane: &Lane, target: &ReviewTarget) -> String {
    let title = unit.title.clone().unwrap_or_else(|| lane.unit.clone());
    let mut out = format!("# Review: {}\n\n", line(&title));
    out.push_str(&format!("- Unit: {}\n- Run: {}\n", lane.unit, run.id));
    out.push_str(&format!(
        "- Range: {}..{}{}\n",
        short(&target.from),
        short(&target.to),
        target
            .range
            .as_deref()
            .map(|r| format!(" (`{}`)", line(r)))
            .unwrap_or_default()
    ));
    out.push_str("\n## Files under review\n\n");
    if target.paths.is_empty() {
        out.push_str("None.\n");
    }
    for p in &target.paths {
        out.push_str(&format!("- `{}`\n", line(p)));
    }
    out.push_str("\n## Reviewers\n\n");
    let answers = crate::run::answer::answers(
        lane,
        &lane
            .validators
            .iter()
            .map(|v| StepKey::Validate(v.clone()))
            .collect::<Vec<_>>(),
    );
    for (name, answer) in &answers {
        let said = if answer.is_some() {
            "answered"
        } else {
            "no answer"
        };
        out.push_str(&format!("- {name}: {said}\n"));
    }
    out.push_str("\n## Findings\n\n");
    if lane.findings.is_empty() {
        out.push_str("No findings.\n");
    }
    for f in &lane.findings {
        let e = &f.evidence;
        out.push_str(&format!(
            "### {} ({}, {})\n\n- Found by: {}\n- File: `{}`\n- Criterion: {}\n- Summary: {}\n- Inputs: {}\n- Expected: {}\n- Actual: {}\n\n",
            f.id,
            e.severity,
            e.finding_category,
            f.by,
            line(&e.file_path),
            line(&e.criterion_ref),
            line(&e.summary),
            line(&e.failure_scenario.inputs),
            line(&e.failure_scenario.expected),
            line(&e.failure_scenario.actual),
        ));
    }
    out.push_str("## Expectations\n\n");
    let merged = lane
        .outcome_as::<JudgeOutcome>(&StepKey::Judge)
        .map(|j| j.merged)
        .unwrap_or_default();
    if unit.expectations.is_empty() {
        out.push_str("None.\n");
    }
    for item in &unit.expectations {
        let result = merged
            .expectations
            .get(&item.id)
            .map_or("unknown", String::as_str);
        out.push_str(&format!("- {}: {result}\n", item.id));
    }
    out
}

/// The review's close (SPEC 20.14): `review.md` and the unit's status, as files on the judged
/// head, and the commit's message.
pub fn close(
    ctx: &Ctx<'_>,
    run: &Run,
    lane: &Lane,
    worktree: &std::path::Path,
    target: &ReviewTarget,
    head: &str,
) -> Result<(Vec<(String, String)>, String), String> {
    let rel = format!("intent/{}", lane.unit);
    let unit_path = format!("{rel}/iced.md");
    let mut blobs = crate::git::Blobs::open(worktree)?;
    let mut text_at = |commit: &str| -> Result<Option<String>, String> {
        Ok(blobs
            .get(commit, &unit_path, 1024 * 1024)?
            .map(|b| String::from_utf8_lossy(&b).into_owned()))
    };
    let text = text_at(head)?.ok_or_else(|| format!("`{unit_path}` is not in the head {head}"))?;
    let parsed = crate::unit::parse_unit(&text);
    // The autonomy is the approved unit's, at the run's base (SPEC 24.2).
    let at_base = text_at(run.base_of(lane))?
        .map(|t| crate::unit::parse_unit(&t))
        .unwrap_or_else(|| parsed.clone());
    let level = crate::unit::kinds::effective_autonomy(
        at_base
            .frontmatter
            .get("autonomy")
            .and_then(crate::unit::Scalar::as_int),
        at_base.frontmatter.str("risk").and_then(|r| r.parse().ok()),
        ctx.config.autonomy,
        ctx.config.max_autonomy,
    );
    let needs_human = lane
        .outcome_as::<JudgeOutcome>(&StepKey::Judge)
        .is_none_or(|j| j.needs_human);
    let now = crate::clock::now_iso();
    let mut edits = vec![crate::unit::frontmatter::Edit::set("status", "done")];
    if level >= 2 && !needs_human {
        edits = vec![
            crate::unit::frontmatter::Edit::set("status", "accepted"),
            crate::unit::frontmatter::Edit::set("accepted_at", now.as_str()),
            crate::unit::frontmatter::Edit::set("accepted_by", "auto"),
        ];
    }
    let closed = crate::unit::frontmatter::apply(&text, &edits);
    let files = vec![
        (unit_path.clone(), closed),
        (
            format!("{rel}/review.md"),
            review_md(&parsed, run, lane, target),
        ),
    ];
    let message = format!(
        "iced: review {}\n\nThe loop's close of the review: review.md with {} finding(s).\n\nIced-Run: {}\nIced-Lane: {}\nIced-Step: deliver\n",
        lane.unit,
        lane.findings.len(),
        run.id,
        lane.id
    );
    Ok((files, message))
}
