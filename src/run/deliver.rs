//! Delivering a lane whose receipt verified: the unit's close is written in the lane's own change
//! (`evidence.md`, `verify.json`, `status: done`), committed on the lane branch, never left as an
//! edit in the person's checkout. Idempotent: a commit this run already made is adopted.
//!
//! A call killed while its `git` runs leaves that `git` running (it outlives the call), so the
//! next call's delivery can overlap it: HEAD is read once, everything is derived from that
//! commit, and the branch moves only from it (`update-ref` with the old value). If it moved, the
//! other call's commit is adopted when it is this run's delivery; there is never a second one.

use super::engine::Ctx;
use super::state::{Lane, Run, StepStatus};
use crate::unit::frontmatter::{apply, Edit};
use serde_json::{json, Value};
use std::fmt::Write;
use std::path::Path;

const TRAILER_STEP: &str = "Iced-Step: deliver";

fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    crate::git::run(dir, args)
}

/// Is `commit` the delivery commit of this run?
fn is_delivery(worktree: &Path, commit: &str, run: &str) -> bool {
    let Ok(message) = git(worktree, &["log", "-1", "--format=%B", commit]) else {
        return false;
    };
    message
        .lines()
        .any(|l| l.trim() == format!("Iced-Run: {run}"))
        && message.lines().any(|l| l.trim() == TRAILER_STEP)
}

/// `git add`, again for up to 2 s while it fails: a `git` left running by a call that died here
/// may hold the worktree's index lock for a moment.
fn add_waiting(worktree: &Path, rel: &str) -> Result<String, String> {
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        match git(worktree, &["add", "--", rel]) {
            Err(_) if std::time::Instant::now() < give_up => {
                std::thread::sleep(std::time::Duration::from_millis(50))
            }
            result => return result,
        }
    }
}

pub fn deliver(ctx: &Ctx<'_>, run: &Run, lane: &Lane) -> Result<String, String> {
    let worktree = Path::new(lane.worktree.as_deref().ok_or("the lane has no worktree")?);
    // Read once: the evidence names this commit, the delivery's parent is this commit, and the
    // branch moves only if it still points here.
    let head = git(worktree, &["rev-parse", "HEAD"])?;
    if is_delivery(worktree, &head, &run.id) {
        return Ok(head);
    }
    let receipt = lane
        .record("receipt")
        .filter(|r| r.status == StepStatus::Done)
        .and_then(|r| r.outcome.clone())
        .ok_or("the lane has no verified receipt")?;
    let rel = format!("intent/{}", lane.unit);
    let unit_path = worktree.join(&rel).join("iced.md");
    let text = std::fs::read_to_string(&unit_path)
        .map_err(|e| format!("read `{}`: {e}", unit_path.display()))?;
    let parsed = crate::unit::parse_unit(&text);
    let title = parsed.title.clone().unwrap_or_default();
    let now = crate::clock::now_iso();
    let commits = git(
        worktree,
        &[
            "rev-list",
            "--reverse",
            &format!("{}..{head}", run.base.commit),
        ],
    )?;
    let commits: Vec<&str> = commits.lines().collect();

    let expectations: Vec<Value> = parsed
        .expectations
        .iter()
        .map(|e| {
            let claimed: Vec<&Value> = receipt["evidence"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|x| x["expectation"] == e.id.as_str())
                .collect();
            json!({"id": e.id, "text": e.text, "verify": e.verify, "result": "claimed", "evidence": claimed})
        })
        .collect();
    let verdict = json!({
        "id": lane.unit,
        "title": title,
        "run": run.id,
        "lane": lane.id,
        "attempt": lane.attempt,
        "ts": now,
        "verdict": "pass",
        "independent": false,
        "needs_human": true,
        "base": run.base.commit,
        "head": head,
        "commits": commits,
        "commands": receipt["commands"],
        "summary": receipt["summary"],
        "expectations": expectations,
    });
    let mut verify_json = serde_json::to_string_pretty(&verdict).expect("serialises");
    verify_json.push('\n');

    let mut md = String::new();
    let _ = writeln!(md, "# Evidence: {}\n\n{title}\n", lane.unit);
    let _ = writeln!(
        md,
        "Verdict: **PASS** on the loop's own checks (attempt {}, {now}, run `{}`); no independent validator ran, so a person accepts it.\n",
        lane.attempt, run.id
    );
    let _ = writeln!(
        md,
        "## Builder summary\n\n{}\n",
        receipt["summary"].as_str().unwrap_or("")
    );
    let _ = writeln!(md, "## Definition of done\n");
    let commands = receipt["commands"].as_array().cloned().unwrap_or_default();
    if commands.is_empty() {
        let _ = writeln!(md, "No commands are configured (`verify.commands`).\n");
    }
    for c in &commands {
        let _ = writeln!(
            md,
            "- `{}`: exit {} ({} ms)",
            c["command"].as_str().unwrap_or(""),
            c["exit_code"],
            c["duration_ms"]
        );
    }
    let _ = writeln!(md, "\n## Expectations\n");
    for e in &expectations {
        let _ = writeln!(
            md,
            "### [{}] {}\n\n- Result: **claimed** (not independently verified)",
            e["id"].as_str().unwrap_or(""),
            e["text"].as_str().unwrap_or("")
        );
        for x in e["evidence"].as_array().into_iter().flatten() {
            let _ = writeln!(
                md,
                "- Builder evidence: {}: {}",
                x["kind"].as_str().unwrap_or(""),
                x["ref"].as_str().unwrap_or("")
            );
        }
        md.push('\n');
    }
    let _ = writeln!(md, "## Commits\n");
    for c in &commits {
        let _ = writeln!(md, "- {c}");
    }

    let failed_attempts = i64::from(lane.attempt.saturating_sub(1));
    let closed = apply(
        &text,
        &[
            Edit::set("status", "done"),
            Edit::set("attempts", failed_attempts),
        ],
    );
    let dir = worktree.join(&rel);
    for (name, body) in [
        ("iced.md", closed.as_str()),
        ("evidence.md", md.as_str()),
        ("verify.json", verify_json.as_str()),
    ] {
        crate::store::write_atomic(&dir.join(name), body.as_bytes(), 0o644)
            .map_err(|e| e.to_string())?;
    }
    add_waiting(worktree, &rel)?;
    let message = format!(
        "iced: deliver {}\n\nThe loop's close of the unit: status done, evidence.md and verify.json.\n\nIced-Run: {}\nIced-Lane: {}\n{TRAILER_STEP}\n",
        lane.unit, run.id, lane.id
    );
    let mut args: Vec<String> = Vec::new();
    if crate::git::run(worktree, &["config", "user.email"]).is_err() {
        args.extend([
            "-c".into(),
            "user.name=iced".into(),
            "-c".into(),
            "user.email=iced@localhost".into(),
        ]);
    }
    // The commit of the index (this call's files on top of `head`), then the branch moved to it
    // only from `head`: what `git commit` does, minus hooks, with a compare-and-swap.
    let tree = git(worktree, &["write-tree"])?;
    args.push("commit-tree".into());
    // `git commit` signs when `commit.gpgSign` says so; `commit-tree` only when asked.
    if git(worktree, &["config", "--bool", "commit.gpgSign"]).is_ok_and(|v| v == "true") {
        args.push("-S".into());
    }
    args.extend([tree, "-p".into(), head.clone(), "-m".into(), message]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let commit = git(worktree, &args)?;
    let _ = ctx;
    match git(
        worktree,
        &["update-ref", "-m", "iced: deliver", "HEAD", &commit, &head],
    ) {
        Ok(_) => Ok(commit),
        Err(e) => {
            // The branch moved under this call: another call's delivery is adopted, nothing else.
            let now = git(worktree, &["rev-parse", "HEAD"])?;
            if is_delivery(worktree, &now, &run.id) {
                Ok(now)
            } else {
                Err(e)
            }
        }
    }
}
