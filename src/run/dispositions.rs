//! A fix round's dispositions (SPEC 22.4, 24.4): what an implementer says it did with each open
//! finding, checked against the branch (an `applied` names a commit of this attempt that changes a
//! file; a `rejected` gives a reason), and, once the receipt verifies, written on the findings.
//! Nothing here takes the implementer's word for a commit.

use super::ctx::Ctx;
use super::state::{Lane, Run};
use super::validate::Finding;
use serde::Deserialize;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Open findings a fix-round report must dispose of, and the gaps of its dispositions. An
/// `applied` must name a commit of this attempt's range (SPEC 24.4): reachable from the receipt's
/// `head`, not from the head the finding was found on, and changing at least one file.
pub fn disposition_gaps(
    ctx: &Ctx<'_>,
    run: &Run,
    lane: &Lane,
    report: &super::report::Report,
    head: &str,
) -> Vec<String> {
    let worktree = PathBuf::from(lane.worktree.clone().unwrap_or_default());
    let open: Vec<&Finding> = lane
        .findings
        .iter()
        .filter(|f| f.status == "open" && f.round < lane.attempt)
        .collect();
    let mut gaps = Vec::new();
    for d in &report.dispositions {
        if !open.iter().any(|f| f.id == d.finding_id) {
            gaps.push(format!(
                "the report disposes of `{}`, which is not an open finding",
                d.finding_id
            ));
        }
    }
    for f in &open {
        match report.dispositions.iter().find(|d| d.finding_id == f.id) {
            None => gaps.push(format!(
                "no disposition for finding {} ({})",
                f.id, f.evidence.summary
            )),
            Some(d) if d.action == "applied" => match d.commit.as_deref() {
                None => gaps.push(format!(
                    "{} is `applied` without the commit that applies it",
                    f.id
                )),
                Some(c) => {
                    // The head the finding was judged on; a finding from before heads were
                    // recorded counts from the lane's base.
                    let found_on = f.head.as_deref().unwrap_or(run.base_of(lane));
                    if let Err(why) = applied_in_range(&worktree, c, head, found_on) {
                        gaps.push(format!("{} is `applied` with commit `{c}`, {why}", f.id));
                    }
                }
            },
            Some(d) if d.reason.as_deref().is_none_or(|r| r.trim().is_empty()) => {
                gaps.push(format!("{} is `rejected` without a written reason", f.id));
            }
            Some(_) => {}
        }
    }
    let _ = ctx;
    gaps
}

/// Is `commit` a commit of this attempt, reachable from `head` and not from `found_on`, that
/// changes a file? The reason when not.
fn applied_in_range(
    worktree: &Path,
    commit: &str,
    head: &str,
    found_on: &str,
) -> Result<(), String> {
    let git = |args: &[&str]| crate::git::run(worktree, args);
    let Ok(full) = git(&[
        "rev-parse",
        "--verify",
        "--quiet",
        &format!("{commit}^{{commit}}"),
    ]) else {
        return Err("which is not a commit of this repository".into());
    };
    if git(&["merge-base", "--is-ancestor", &full, head]).is_err() {
        return Err("which is not on the lane branch".into());
    }
    if git(&["merge-base", "--is-ancestor", &full, found_on]).is_ok() {
        return Err(format!(
            "which was already there when the finding was made (at {}): an applied fix is a commit of this attempt",
            &found_on[..found_on.len().min(12)]
        ));
    }
    let changed = git(&["diff", "--name-only", &format!("{full}^1"), &full]).unwrap_or_default();
    if changed.trim().is_empty() {
        return Err("which changes no file".into());
    }
    Ok(())
}

/// A disposition as the loop wrote it on a finding: the implementer's, with the attempt that
/// brought it. Read leniently: what a finding does not hold is none.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct Disposed {
    pub action: String,
    pub commit: Option<String>,
    pub reason: Option<String>,
    pub attempt: Option<u64>,
}

impl Disposed {
    /// What `finding`'s disposition says (defaults when it has none).
    pub fn of(finding: &Finding) -> Disposed {
        finding
            .disposition
            .as_ref()
            .and_then(|d| Disposed::deserialize(d).ok())
            .unwrap_or_default()
    }
}

/// Record a verified fix-round receipt's dispositions on the findings.
pub fn apply_dispositions(lane: &mut Lane, dispositions: &Value) {
    let attempt = lane.attempt;
    for d in dispositions.as_array().into_iter().flatten() {
        let Some(id) = d["finding_id"].as_str() else {
            continue;
        };
        if let Some(f) = lane
            .findings
            .iter_mut()
            .find(|f| f.id == id && f.status == "open")
        {
            f.status = if d["action"] == "applied" {
                "applied".into()
            } else {
                "rejected".into()
            };
            let mut d = d.clone();
            d["attempt"] = attempt.into();
            f.disposition = Some(d);
        }
    }
}
