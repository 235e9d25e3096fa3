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
    // The lane's worktree is the agent's: its copy of the unit is read as an agent's file.
    let text = crate::store::read_no_follow(&unit_path, crate::repo::UNIT_LIMIT)
        .map_err(|e| e.to_string())
        .and_then(|b| {
            String::from_utf8(b).map_err(|_| format!("`{}` is not UTF-8", unit_path.display()))
        })?;
    let parsed = crate::unit::parse_unit(&text);
    let now = crate::clock::now_iso();
    let log = git(
        worktree,
        &[
            "log",
            "--reverse",
            "--format=%H %s",
            &format!("{}..{head}", run.base_of(lane)),
        ],
    )?;
    // `<sha> <subject>` per line: verify.json keeps the shas, evidence.md the subjects too.
    let commits: Vec<(&str, &str)> = log
        .lines()
        .map(|l| l.split_once(' ').unwrap_or((l, "")))
        .collect();

    let risk = parsed.frontmatter.str("risk").and_then(|r| r.parse().ok());
    let level = crate::unit::kinds::effective_autonomy(
        parsed
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
        head: &head,
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
    let md = close.evidence_md;
    let verify_json = close.verify_json;
    // The verify metric (and the automatic acceptance) travel in the landing change too.
    let metric = |event: &str, data: Value| -> Result<(), String> {
        let mut line = serde_json::Map::new();
        line.insert("ts".into(), now.clone().into());
        line.insert("id".into(), lane.unit.clone().into());
        line.insert("event".into(), event.into());
        if let Value::Object(d) = data {
            line.extend(d);
        }
        if let Some(r) = parsed.frontmatter.str("risk") {
            line.insert("risk".into(), r.into());
        }
        if let Some(a) = parsed
            .frontmatter
            .get("autonomy")
            .and_then(crate::unit::Scalar::as_int)
        {
            line.insert("autonomy".into(), a.into());
        }
        let mut text = serde_json::to_string(&line).expect("serialises");
        text.push('\n');
        let path = worktree.join(".iced").join("metrics.jsonl");
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        }
        crate::store::append(&path, text.as_bytes(), 0o644).map_err(|e| e.to_string())
    };
    if close.validated {
        metric("verify", json!({"result": "pass", "attempt": lane.attempt}))?;
        if close.status == "accepted" {
            metric("accept", json!({"auto": true}))?;
        }
    }

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
    if close.validated {
        add_waiting(worktree, ".iced/metrics.jsonl")?;
    }
    let message = format!(
        "iced: deliver {}\n\nThe loop's close of the unit: status {}, evidence.md and verify.json.\n\nIced-Run: {}\nIced-Lane: {}\n{TRAILER_STEP}\n",
        lane.unit, close.status, run.id, lane.id
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

/// What the close of a unit is made from.
pub struct Close<'a> {
    pub unit: &'a crate::unit::ParsedUnit,
    pub lane: &'a Lane,
    pub run: &'a Run,
    pub receipt: &'a Value,
    pub head: &'a str,
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

/// Render the close. Pure: the same inputs give the same bytes (a test holds `evidence.md` to a
/// snapshot).
pub fn documents(c: &Close<'_>) -> Closed {
    let lane = c.lane;
    let judge = lane.outcome("judge").cloned();
    let validated = judge.is_some();
    let merged = judge
        .as_ref()
        .map(|j| j["merged"].clone())
        .unwrap_or(Value::Null);
    let manual: Vec<String> = judge
        .as_ref()
        .and_then(|j| j["manual"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect();
    let needs_human = !validated || judge.as_ref().is_some_and(|j| j["needs_human"] == true);
    let status = if validated && !needs_human && c.effective_autonomy >= 2 {
        "accepted"
    } else {
        "done"
    };
    let title = c.unit.title.clone().unwrap_or_default();

    let expectations: Vec<Value> = c
        .unit
        .expectations
        .iter()
        .map(|e| {
            let claimed: Vec<&Value> = c.receipt["evidence"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|x| x["expectation"] == e.id.as_str())
                .collect();
            let result = if !validated {
                "claimed".to_owned()
            } else if manual.contains(&e.id) {
                "unknown (manual: for the person)".to_owned()
            } else {
                merged["expectations"][&e.id].as_str().unwrap_or("unknown").to_owned()
            };
            json!({"id": e.id, "text": e.text, "verify": e.verify, "result": result, "evidence": claimed})
        })
        .collect();
    let validators: Vec<Value> = lane
        .steps
        .iter()
        .filter(|r| r.attempt == lane.attempt && r.step.starts_with("validate-"))
        .map(|r| {
            let o = r.outcome.clone().unwrap_or(Value::Null);
            json!({"name": r.step.trim_start_matches("validate-"), "answered": !o["answer"].is_null(), "verdict": o["answer"]["verdict"], "problem": o["problem"], "notes": o["answer"]["notes"]})
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
        "commits": c.commits.iter().map(|(sha, _)| *sha).collect::<Vec<_>>(),
        "commands": c.receipt["commands"],
        "summary": c.receipt["summary"],
        "expectations": expectations,
        "failures": merged["failures"],
        "constraints": merged["constraints"],
        "validators": validators,
        "findings": lane.findings,
    });
    let mut verify_json = serde_json::to_string_pretty(&verdict).expect("serialises");
    verify_json.push('\n');

    let mut md = String::new();
    let _ = writeln!(md, "# Evidence: {}\n\n{title}\n", lane.unit);
    let how = if validated {
        let names: Vec<String> = validators
            .iter()
            .filter_map(|v| v["name"].as_str().map(str::to_owned))
            .collect();
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
    let unanswered: Vec<&str> = merged["unanswered"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
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
    let _ = writeln!(
        md,
        "## Builder summary\n\n{}\n",
        c.receipt["summary"].as_str().unwrap_or("")
    );
    let _ = writeln!(md, "## Definition of done\n");
    let commands = c.receipt["commands"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if commands.is_empty() {
        let _ = writeln!(md, "No commands are configured (`verify.commands`).");
    }
    for cmd in &commands {
        let _ = writeln!(
            md,
            "- `{}`: exit {} ({} ms)",
            cmd["command"].as_str().unwrap_or(""),
            cmd["exit_code"],
            cmd["duration_ms"]
        );
    }
    // The validators of this round that answered, in order.
    let answered: Vec<&super::state::StepRecord> = lane
        .steps
        .iter()
        .filter(|r| r.attempt == lane.attempt && r.step.starts_with("validate-"))
        .filter(|r| r.outcome.as_ref().is_some_and(|o| o["answer"].is_object()))
        .collect();
    let _ = writeln!(md, "\n## Expectations\n");
    for e in &expectations {
        let result = e["result"].as_str().unwrap_or("");
        let _ = writeln!(
            md,
            "### [{}] {}\n",
            e["id"].as_str().unwrap_or(""),
            e["text"].as_str().unwrap_or("")
        );
        let _ = writeln!(
            md,
            "- Result: **{}**{}",
            result,
            if validated {
                ""
            } else {
                " (not independently verified)"
            }
        );
        if let Some(v) = e["verify"].as_object() {
            let _ = writeln!(
                md,
                "- Verify: {} | {}",
                v.get("kind").and_then(Value::as_str).unwrap_or(""),
                v.get("ref").and_then(Value::as_str).unwrap_or("")
            );
        }
        for x in e["evidence"].as_array().into_iter().flatten() {
            let _ = writeln!(
                md,
                "- Builder evidence: {}: {}",
                x["kind"].as_str().unwrap_or(""),
                x["ref"].as_str().unwrap_or("")
            );
        }
        for r in &answered {
            let answer = &r.outcome.as_ref().expect("answered")["answer"];
            for j in answer["expectations"].as_array().into_iter().flatten() {
                if j["id"] == e["id"] {
                    let said = j["evidence"].as_str().unwrap_or("");
                    let _ = writeln!(
                        md,
                        "- Judged {} by `{}`{}{said}",
                        j["result"].as_str().unwrap_or(""),
                        r.step.trim_start_matches("validate-"),
                        if said.is_empty() { "" } else { ": " }
                    );
                }
            }
        }
        md.push('\n');
    }
    if validated {
        let _ = writeln!(md, "## Failure conditions and constraints\n");
        for (key, bad, items) in [
            ("failures", "triggered", &c.unit.failures),
            ("constraints", "violated", &c.unit.constraints),
        ] {
            // The unit's items in its order, then any other a validator named (an ancestor's).
            let judged = merged[key].as_object();
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
                let hit = judged.and_then(|m| m.get(&id)) == Some(&Value::Bool(true));
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
            let outcome = match f.status.as_str() {
                "refuted" => format!(
                    "refuted: {}",
                    f.refutation
                        .as_ref()
                        .and_then(|r| r["reason"].as_str())
                        .unwrap_or("")
                ),
                "applied" => format!(
                    "applied in {}",
                    f.disposition
                        .as_ref()
                        .and_then(|d| d["commit"].as_str())
                        .unwrap_or("?")
                ),
                "rejected" => format!(
                    "rejected in writing: {}",
                    f.disposition
                        .as_ref()
                        .and_then(|d| d["reason"].as_str())
                        .unwrap_or("")
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
