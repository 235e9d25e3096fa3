//! The brief: the one file an implementer is handed. Rendered from the unit, its ancestors' rules,
//! the team's knowledge files, the definition of done and where the report goes. Deterministic: the
//! same state renders the same bytes, so its sha256 names exactly what an agent was told.

use crate::refusal::Refusal;
use crate::repo::{read_text, Repo};
use crate::run::ctx::Ctx;
use crate::run::settings::Settings;
use crate::run::state::{Lane, Run};
use crate::unit::parse_unit;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::fmt::Write;
use std::path::Path;

/// Knowledge files larger than this are cited by path, not copied in.
pub(crate) const KNOWLEDGE_LIMIT: u64 = 64 * 1024;
/// Of the decision log, the brief copies this much of its end.
const DECISIONS_TAIL: usize = 32 * 1024;
/// A decision log larger than this is cited by path, not read.
const DECISIONS_LIMIT: u64 = 4 * 1024 * 1024;

pub struct BriefInput<'a> {
    pub repo: &'a Repo,
    pub settings: &'a Settings,
    pub unit: &'a str,
    pub unit_text: &'a str,
    pub run: &'a str,
    pub lane: &'a str,
    pub attempt: u32,
    pub base_commit: &'a str,
    pub branch: &'a str,
    pub worktree: &'a Path,
    pub receipt_path: &'a Path,
    /// What the previous attempt's receipt lacked, for a retry.
    pub previous_gaps: Option<&'a str>,
    /// Findings this attempt must dispose of (a fix round).
    pub findings: &'a [crate::run::validate::Finding],
    /// The run's brief layout (SPEC 20.4): 1 renders as iced did before the decision log, the
    /// product memory and the rejection were in the brief.
    pub layout: u32,
    /// Why the unit is built again: the person's reason for rejecting its last delivery.
    pub rejected: Option<&'a str>,
    /// The unit's decision log as the lane's base holds it (layout 2).
    pub decisions: Option<String>,
}

/// Constraints and failure conditions of every ancestor, nearest first (cycle-safe).
pub fn ancestor_rules(repo: &Repo, unit_text: &str) -> String {
    let mut out = String::new();
    for (id, items) in ancestors(repo, unit_text) {
        match items {
            None => {
                let _ = writeln!(out, "- `{id}`: (not readable in this repository)");
            }
            Some(items) => {
                for (item, text) in items {
                    let _ = writeln!(out, "- {id}:{item} {text}");
                }
            }
        }
    }
    out
}

/// The ids of the ancestors' constraints and failure conditions, written `<ancestor>:<id>` as the
/// validators' prompt names them.
pub fn ancestor_ids(repo: &Repo, unit_text: &str) -> Vec<String> {
    ancestors(repo, unit_text)
        .into_iter()
        .flat_map(|(id, items)| {
            items
                .unwrap_or_default()
                .into_iter()
                .map(move |(item, _)| format!("{id}:{item}"))
        })
        .collect()
}

/// Each ancestor, nearest first, with its constraints and failure conditions (id, text), or None
/// when its file cannot be read (the walk stops there).
#[allow(clippy::type_complexity)]
fn ancestors(repo: &Repo, unit_text: &str) -> Vec<(String, Option<Vec<(String, String)>>)> {
    let mut out = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    let mut parent = parse_unit(unit_text)
        .frontmatter
        .get("parent")
        .filter(|p| !p.is_blank())
        .map(|p| p.to_string());
    while let Some(id) = parent.take() {
        if seen.contains(&id) {
            break;
        }
        seen.push(id.clone());
        let Ok(text) = read_text(&repo.unit_paths(&id).iced) else {
            out.push((id, None));
            break;
        };
        let p = parse_unit(&text);
        let items = p
            .constraints
            .iter()
            .chain(&p.failures)
            .map(|i| (i.id.clone(), i.text.clone()))
            .collect();
        out.push((id, Some(items)));
        parent = p
            .frontmatter
            .get("parent")
            .filter(|v| !v.is_blank())
            .map(|v| v.to_string());
    }
    out
}

/// The unit's decision log at the lane's base commit, its last [`DECISIONS_TAIL`] bytes (cut at a
/// line), or a line saying why it is not here. None when the base has no log. Read through the
/// run's folder (`Ctx::blob_at_kept`): a run renders it at every step.
pub fn decisions_at(ctx: &Ctx<'_>, run: &str, unit: &str, base: &str) -> Option<String> {
    let path = format!("intent/{unit}/decisions.md");
    match ctx.blob_at_kept(run, base, &path, DECISIONS_LIMIT) {
        Ok(None) => None,
        Err(e) => Some(format!("(not read: {e}; read `{path}` yourself)")),
        Ok(Some(bytes)) => {
            let text = String::from_utf8_lossy(&bytes).into_owned();
            if text.len() <= DECISIONS_TAIL {
                return Some(text.trim_end().to_owned());
            }
            let mut from = text.len() - DECISIONS_TAIL;
            while !text.is_char_boundary(from) {
                from += 1;
            }
            let tail = &text[from..];
            let tail = tail.split_once('\n').map_or(tail, |(_, rest)| rest);
            Some(format!(
                "(the last {} KiB of {} KiB; read `{path}` for the rest)\n\n{}",
                DECISIONS_TAIL / 1024,
                text.len() / 1024,
                tail.trim_end()
            ))
        }
    }
}

fn memory_path(repo: &Repo, entry: &str) -> std::path::PathBuf {
    if Path::new(entry).is_absolute() {
        Path::new(entry).to_owned()
    } else {
        repo.root.join(entry)
    }
}

/// One memory or knowledge file as the brief holds it: its text, or a line saying why not.
fn copied(repo: &Repo, entry: &str) -> String {
    // Checked again as it is read: a link swapped in since the admit is not followed out (SPEC
    // 24.15).
    if let Some(why) = crate::run::memory_paths::not_inside(&repo.root, entry) {
        return format!("(not read: `{entry}` is not a file inside the repository: {why})");
    }
    let path = memory_path(repo, entry);
    match crate::store::read_limited(&path, KNOWLEDGE_LIMIT) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).trim_end().to_owned(),
        Err(e @ crate::store::StoreError::NotRegular { .. }) => format!("(not read: {e})"),
        Err(_) => "(not readable here, or over 64 KiB: read it yourself if you can)".to_owned(),
    }
}

fn knowledge(repo: &Repo, settings: &Settings) -> String {
    let mut out = String::new();
    for entry in &settings.knowledge {
        let _ = writeln!(out, "### {entry}\n\n{}\n", copied(repo, entry));
    }
    out
}

pub fn render(input: &BriefInput<'_>) -> String {
    let mut b = String::new();
    // A remote agent (SPEC 20.19) is told the remote's way: no path of this machine.
    let remote = input
        .settings
        .implementer
        .as_ref()
        .is_some_and(|r| r.remote);
    let report_path = input.receipt_path.display().to_string();
    let report_at = if remote {
        crate::run::stage::remote::REPORT_PATH
    } else {
        report_path.as_str()
    };
    let _ = writeln!(
        b,
        "# Brief: implement {} (attempt {})\n",
        input.unit, input.attempt
    );
    let _ = writeln!(
        b,
        "You are the implementer of one ICED unit, in a fresh session. Work only in the {} \
below, on its branch; commit your work there. Nobody will answer questions: when the contract \
cannot be met as written, hand the lane back (see the report) instead of guessing.\n",
        if remote {
            "clone of the branch"
        } else {
            "worktree"
        }
    );
    let _ = writeln!(
        b,
        "- Run: `{}`, lane `{}`, attempt {}",
        input.run, input.lane, input.attempt
    );
    if remote {
        let _ = writeln!(b, "- Repository: clone it from the remote whoever started you names (`ICED_REMOTE_URL`), at the branch below; push that branch when you are done");
    } else {
        let _ = writeln!(b, "- Worktree: `{}`", input.worktree.display());
    }
    let _ = writeln!(
        b,
        "- Branch: `{}` (based on `{}`)",
        input.branch, input.base_commit
    );
    if remote {
        let _ = writeln!(b, "- Report: write it to `{report_at}` and commit it alone, as the branch's last commit (see Finishing)\n");
    } else {
        let _ = writeln!(b, "- Report: write it to `{report_at}`\n");
    }

    if let (2.., Some(reason)) = (input.layout, input.rejected) {
        let _ = writeln!(b, "## Why this unit is built again\n\nA person rejected its last delivery at acceptance, saying:\n\n> {}\n\nThat work is in the base you start from: change it so that this no longer holds.\n", reason.split_whitespace().collect::<Vec<_>>().join(" "));
    }
    if let Some(gaps) = input.previous_gaps {
        let _ = writeln!(b, "## Why this attempt\n\n{gaps}\n");
    }
    if !input.findings.is_empty() {
        let _ = writeln!(b, "## Findings to dispose of\n\nIndependent validators found these in the previous attempt. Your report must carry one disposition per finding: `applied` with the commit that applies it, or `rejected` with a written reason (the next round's validators read it).\n");
        for f in input.findings {
            let e = &f.evidence;
            let _ = writeln!(
                b,
                "### {} ({}, {})\n\n- file: `{}`\n- criterion: {}\n- summary: {}\n- inputs: {}\n- expected: {}\n- actual: {}\n",
                f.id, e.severity, e.finding_category, e.file_path, e.criterion_ref, e.summary,
                e.failure_scenario.inputs, e.failure_scenario.expected, e.failure_scenario.actual
            );
        }
    }

    let _ = writeln!(b, "## The unit (intent/{}/iced.md)\n", input.unit);
    let _ = writeln!(b, "Intent and Expectations are a signed-off contract: do not edit them, nor the frontmatter.\n");
    let _ = writeln!(b, "````markdown\n{}\n````\n", input.unit_text.trim_end());

    if input.layout >= 2 {
        if let Some(log) = input.decisions.as_deref().filter(|l| !l.trim().is_empty()) {
            let _ = writeln!(b, "## Decisions so far (intent/{}/decisions.md)\n\nWhat people and agents have decided about this unit so far. Append your own decisions there (`- Decision:`, `- Why:`); never rewrite an entry.\n\n````markdown\n{log}\n````\n", input.unit);
        }
    }
    let rules = ancestor_rules(input.repo, input.unit_text);
    if !rules.is_empty() {
        let _ = writeln!(b, "## Rules inherited from ancestor units\n\nEvery one of these applies to this unit too.\n\n{rules}");
    }
    if input.layout >= 2 {
        // A product memory nobody wrote is left out; one that cannot be read says so.
        let product = input
            .settings
            .product
            .as_deref()
            .filter(|p| std::fs::symlink_metadata(memory_path(input.repo, p)).is_ok());
        if let Some(product) = product {
            let _ = writeln!(
                b,
                "## The product ({product})\n\nWhat the product is and must do.\n\n{}\n",
                copied(input.repo, product)
            );
        }
    }
    let know = knowledge(input.repo, input.settings);
    if !know.is_empty() {
        let _ = writeln!(b, "## Conventions and standards\n\n{know}");
    }

    let _ = writeln!(b, "## Definition of done\n");
    if input.settings.dod.is_empty() {
        let _ = writeln!(b, "No commands are configured. The loop still checks that your commits are on the branch, the worktree is clean, and the report is valid.\n");
    } else {
        let _ = writeln!(b, "The loop runs these itself, in the worktree, after you finish; each must exit as expected:\n");
        for sequence in &input.settings.dod {
            let shown: Vec<String> = sequence
                .iter()
                .map(|c| format!("`{}`", c.display()))
                .collect();
            let _ = writeln!(b, "- {}", shown.join(", then "));
        }
        b.push('\n');
    }
    if remote {
        let _ = writeln!(
            b,
            "## Finishing (a remote lane)\n\n\
Commit your work on `{branch}`. Then write the report below to `{report_at}` and commit that file \
alone (`git add -f {report_at}`), as the last commit, and push: `git push origin \
HEAD:refs/heads/{branch}`. The loop fetches the branch, takes the report from that commit (it \
never lands) and judges the commit under it.\n",
            branch = input.branch
        );
    }
    let _ = writeln!(
        b,
        "## Finishing\n\n\
1. Commit everything on `{branch}`; leave no uncommitted or untracked file in the worktree.\n\
2. Write the report, one JSON object, to `{report}`:\n\n\
```json\n\
{{\"summary\": \"what you did, in a few sentences\",\n \
\"evidence\": [{{\"expectation\": \"E1\", \"kind\": \"test\", \"ref\": \"the test or command that shows it\", \"note\": \"optional\"}}]}}\n\
```\n\n\
If you cannot write that file, end your final message with the report as its only ```json \
block instead.\n\n\
Give evidence for every expectation; in a fix round add `\"dispositions\": [{{\"finding_id\": \"...\", \"action\": \"applied\", \"commit\": \"<sha>\"}}, {{\"finding_id\": \"...\", \"action\": \"rejected\", \"reason\": \"...\"}}]`. Only {allowed} are \
allowed; a report with a verdict, finding ids, token counts or any other key is refused.\n\
To hand the lane back instead (the contract cannot be met as written), write \
`{{\"summary\": \"...\", \"evidence\": [], \"handback\": {{\"reason\": \"why\"}}}}`.\n",
        branch = input.branch,
        report = report_at,
        allowed = if input.layout >= 4 {
            "`summary`, `evidence`, `handback`, `dispositions`, `escalate` and `questions`"
        } else {
            "`summary`, `evidence`, `handback` and `dispositions`"
        }
    );
    if input.layout >= 4 {
        let _ = writeln!(
            b,
            "To stop for a person instead (SPEC 20.7), write `\"escalate\": {{\"kind\": \"ambiguity|conflict|change-expectation|irreversible|stuck\", \"message\": \"...\", \"proposal\": \"- [E4] new text {{verify: test | ...}}\"}}` \
(a proposal, with change-expectation or conflict only, holds contract lines: the same C, F or E id replaces an item, a new id adds one, `(remove)` drops it), \
or ask with `\"questions\": [{{\"text\": \"...\", \"options\": [\"...\"]}}]` (at most {max}); with `\"evidence\": []`. The person answers, and a fresh attempt goes on.\n",
            max = input.settings.questions_max
        );
    }
    if input.layout >= 3 && !remote {
        b.push_str(&hand_in_line(input.receipt_path, input.run, "report"));
    }
    b
}

/// The last words of a brief or a validator's prompt (layout 3 on): the exact command that hands
/// its report in, for the agent to end with and the host to run (SPEC 20.2).
pub(crate) fn hand_in_line(report: &Path, run: &str, what: &str) -> String {
    format!(
        "## Handing back\n\nWhen the {what} is written, end your final message with this line; \
whoever started you runs it, from the repository, to hand your {what} in:\n\n    \
iced implement receipt {} --run {} --until-host\n",
        quoted(&report.display().to_string()),
        quoted(run)
    )
}

/// `word` as one shell word: as it is when it holds only plain characters, else single-quoted.
fn quoted(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+=:@,".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

pub(crate) fn render_brief(
    ctx: &Ctx<'_>,
    run: &Run,
    lane: &Lane,
    worktree: &Path,
) -> Result<String, Refusal> {
    let unit_text = crate::repo::read_text(&ctx.repo.unit_paths(&lane.unit).iced)
        .map_err(|e| e.refusal(ctx.verb))?;
    let receipt = ctx.receipt_path(run, &lane.id, lane.attempt);
    let branch = lane.branch.clone().unwrap_or_default();
    // The findings this attempt was asked to dispose of: found before it, and still open or
    // disposed of by it. Fixed per attempt, so the brief renders the same bytes all attempt long.
    let open: Vec<crate::run::validate::Finding> = lane
        .findings
        .iter()
        .filter(|f| {
            f.round < lane.attempt
                && (f.status == "open"
                    || f.disposition
                        .as_ref()
                        .and_then(|d| d.get("attempt"))
                        .and_then(Value::as_u64)
                        == Some(u64::from(lane.attempt)))
        })
        .cloned()
        .collect();
    let gaps = if lane.attempt > 1 {
        lane.reason.clone()
    } else {
        None
    };
    Ok(render(&BriefInput {
        repo: ctx.repo,
        settings: &ctx.settings,
        unit: &lane.unit,
        unit_text: &unit_text,
        run: &run.id,
        lane: &lane.id,
        attempt: lane.attempt,
        base_commit: run.base_of(lane),
        branch: &branch,
        worktree,
        receipt_path: &receipt,
        previous_gaps: gaps.as_deref(),
        findings: &open,
        layout: run.brief_layout,
        rejected: lane.rejected.as_deref(),
        decisions: if run.brief_layout >= 2 {
            decisions_at(ctx, &run.id, &lane.unit, run.base_of(lane))
        } else {
            None
        },
    }))
}
