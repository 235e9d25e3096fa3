//! What a lane changed, judged by the guard (SPEC 24.2): every path that differs between two
//! commits of the lane is a write by the implementer of the lane's unit, the text before taken
//! from the first commit and the units as they stood there, never from the lane. This module only
//! reads git and asks the guard; it never decides what happens to a lane with a denied path.

use super::ctx::Ctx;
use crate::guard::{self, After, Context, Gate, Proposal, Verdict, Who};
use serde::Serialize;
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::Path;

/// Unit files, the config and the host settings are read up to this size; a larger one cannot be
/// predicted, which the guard denies where the text matters.
const TEXT_LIMIT: u64 = 1024 * 1024;

/// A path of the lane the guard denies.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Denied {
    pub path: String,
    pub rule: &'static str,
    pub reason: String,
}

impl Denied {
    /// The receipt's gap for it: the code, the path, why, and what to undo.
    pub fn gap(&self, base: &str) -> String {
        format!(
            "lane-touches-protected: `{}` ({}): {} Undo it on the lane branch: restore `{}` as it is at the base {} in a new commit.",
            self.path,
            self.rule,
            self.reason,
            self.path,
            &base[..base.len().min(12)]
        )
    }
}

/// Whether the guard needs a path's text to judge it: anything iced or a host reads as rules.
fn text_matters(path: &str) -> bool {
    path.starts_with("intent/")
        || path.starts_with(".iced/")
        || path.starts_with(".claude/")
        || path.rsplit('/').next() == Some(".gitattributes")
}

/// The paths that differ between `from` and `to` (no rename detection: a rename is a deletion and
/// a new file), each with whether it is gone in `to`.
fn changed(ctx: &Ctx<'_>, dir: &Path, from: &str, to: &str) -> Result<Vec<(String, bool)>, String> {
    let out = ctx.git_between(
        dir,
        &[
            "diff",
            "--name-status",
            "--no-renames",
            "-z",
            from,
            to,
            "--",
        ],
        (from, to),
    )?;
    let mut fields = out.split('\0').filter(|f| !f.is_empty());
    let mut paths = Vec::new();
    while let (Some(status), Some(path)) = (fields.next(), fields.next()) {
        paths.push((path.to_owned(), status.starts_with('D')));
    }
    Ok(paths)
}

/// Judge every path that differs between `from` and `to` as the implementer's write, except the
/// paths in `except` (the loop's own close). The units, their statuses and contracts are read at
/// `units_at`.
pub fn judge_range(
    ctx: &Ctx<'_>,
    unit: &str,
    dir: &Path,
    range: (&str, &str),
    units_at: &str,
    except: &[String],
) -> Result<Vec<Denied>, String> {
    let who = Who::Implementer {
        unit: unit.to_owned(),
    };
    judge_range_as(ctx, who, dir, range, units_at, except)
}

/// [`judge_range`] for `who`: the implementer, or the test writer fenced to its test paths
/// (SPEC 20.17).
pub fn judge_range_as(
    ctx: &Ctx<'_>,
    who: Who,
    dir: &Path,
    (from, to): (&str, &str),
    units_at: &str,
    except: &[String],
) -> Result<Vec<Denied>, String> {
    // Every text this judgement reads, through the call's one git (issue 16): the commits are
    // the repository's, whichever worktree judges them.
    let text_at = |commit: &str, path: &str| -> Result<Option<String>, String> {
        Ok(ctx
            .blob_at(commit, path, TEXT_LIMIT)?
            .map(|b| String::from_utf8_lossy(&b).into_owned()))
    };
    let cache: RefCell<HashMap<String, Option<String>>> = RefCell::new(HashMap::new());
    let unit_text = |id: &str| -> Option<String> {
        cache
            .borrow_mut()
            .entry(id.to_owned())
            .or_insert_with(|| {
                text_at(units_at, &format!("intent/{id}/iced.md"))
                    .ok()
                    .flatten()
            })
            .clone()
    };
    let context = Context {
        root: dir,
        cwd: dir,
        who,
        gate: Gate::parse(&ctx.config.gate),
        config: &ctx.config,
        active: None,
        unit_text: &unit_text,
    };
    let mut denied = Vec::new();
    for (path, gone) in changed(ctx, dir, from, to)? {
        if except.contains(&path) {
            continue;
        }
        let (before, after) = if text_matters(&path) {
            let before = text_at(from, &path)?;
            let after = if gone {
                After::Deleted
            } else {
                match text_at(to, &path) {
                    Ok(Some(t)) => After::Text(t),
                    // Too large to read, or not a file (a submodule): not predictable.
                    _ => After::Unpredictable,
                }
            };
            (before, after)
        } else if gone {
            (None, After::Deleted)
        } else {
            // Code: the guard judges it by where it is, not by what it says.
            (None, After::Text(String::new()))
        };
        let decision = guard::judge(
            &context,
            &Proposal::Write {
                path: path.clone(),
                before,
                after,
            },
        );
        // `ask` (autonomy 0) cannot be asked after the fact: the person chose to build it
        // unattended; `notify` is allowed. Only a denial is a gap.
        if decision.verdict == Verdict::Deny {
            denied.push(Denied {
                path,
                rule: decision.rule,
                reason: decision.reason,
            });
        }
    }
    Ok(denied)
}
