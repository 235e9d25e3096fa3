//! What a person reads about landed and landing runs (SPEC 23.4, 23.5): `run show` and the handover
//! of finished runs, ten lanes in a handover under four hundred words, and the demo. Split from
//! landing.rs, whose helpers it uses.

use crate::env::{git_at, TestEnv, NOW};
use crate::landing::*;
use crate::loop_e2e::{build, run_show, str_of};
use iced::run::state::{
    Base, Driver, Lane, Run, RunStatus, Stage, State, StepRecord, StepStatus, SCHEMA,
};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

// ---- run show and handover ------------------------------------------------------------------------

/// `text` with what differs from run to run replaced: the temporary directory, the run and unit
/// ids, the pinned clock, commit shas (40 hex digits) and nonces (32).
fn normalize(text: &str, env: &TestEnv, run: &str, id: &str) -> String {
    let tmp = env.root().parent().unwrap().display().to_string();
    let text = text
        .replace(&tmp, "<tmp>")
        .replace(run, "<run>")
        .replace(id, "<unit>")
        .replace(NOW, "<now>");
    // Durations differ run to run.
    let text = text
        .split(" ms,")
        .map(|part| match part.rfind(' ') {
            Some(at)
                if part[at + 1..].chars().all(|c| c.is_ascii_digit()) && at + 1 < part.len() =>
            {
                format!("{} <ms>", &part[..at])
            }
            _ => part.to_owned(),
        })
        .collect::<Vec<_>>()
        .join(" ms,");
    let mut out = String::new();
    let mut hex = String::new();
    let flush = |hex: &mut String, out: &mut String| {
        out.push_str(match hex.len() {
            64 => "<sha256>",
            40 => "<sha>",
            32 => "<nonce>",
            _ => hex.as_str(),
        });
        hex.clear();
    };
    for c in text.chars() {
        if c.is_ascii_digit() || ('a'..='f').contains(&c) {
            hex.push(c);
        } else {
            flush(&mut hex, &mut out);
            out.push(c);
        }
    }
    flush(&mut hex, &mut out);
    out
}

fn assert_snapshot(what: &str, actual: &str, expected: &str) {
    if actual != expected {
        panic!("{what} differs from its snapshot; it reads:\n{actual}\n--- the snapshot:\n{expected}\n--- (escaped, as read:)\n{actual:?}");
    }
}

/// `iced run show` (from the record, once the run left the state; from the state before) and
/// `iced run handover`, on finished runs, as a person reads them.
#[test]
fn run_show_and_handover_read_well_on_finished_runs() {
    // A landed and retired run: `run show` reads its record.
    let (env, id) = landing_env(AGENT, 1, json!({"mode": "merge", "strategy": "merge"}));
    let (_, last) = build(&env, &id, &[], 0);
    let run = str_of(&last, "run").to_owned();
    let shown = env.iced(&["run", "show", &run]).ok();
    assert_snapshot(
        "`run show` of a landed run",
        &normalize(&shown.stdout, &env, &run, &id),
        SHOW_LANDED,
    );
    // A unique part of the id finds it too.
    let short = &run[run.len() - 6..];
    assert_eq!(env.iced(&["run", "show", short]).ok().stdout, shown.stdout);
    let record = run_show(&env, &run);
    assert_eq!(record["settings"]["implementer"]["runner"], "fake");
    assert_eq!(record["settings"]["land"]["mode"], "merge");
    assert_eq!(record["settings"]["land"]["strategy"], "merge");
    let landed = step_record(&record["run"]["lanes"][0], "land-1").unwrap();
    assert_eq!(landed["outcome"]["commit"], rev(&env, "main").as_str());
    assert_eq!(landed["outcome"]["target"], "main");
    let brief = step_record(&record["run"]["lanes"][0], "brief").unwrap();
    assert!(Path::new(str_of(&brief["outcome"], "path")).is_file());
    assert_snapshot(
        "`run handover` with no live run",
        &normalize(&env.iced(&["run", "handover"]).ok().stdout, &env, &run, &id),
        HANDOVER_NONE,
    );

    // A run delivered on its branch (land.mode none) stays in the state.
    let (env, id) = landing_env(AGENT, 1, json!({"mode": "none"}));
    let (_, last) = build(&env, &id, &[], 0);
    let run = str_of(&last, "run").to_owned();
    let text = env.iced(&["run", "show", &run]).ok().stdout;
    let json = run_show(&env, &run);
    // Each step line ends with the first 160 characters of its outcome, which hold durations and
    // nonces: checked against the JSON, then replaced.
    let mut lines = Vec::new();
    for line in text.lines() {
        let record = json["lanes"][0]["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| line.starts_with(&format!("  ({id}, {}, 1) Done ", str_of(r, "step"))));
        match record {
            Some(r) => {
                let (head, outcome) = line.split_at(line.find(") Done ").unwrap() + 7);
                let full = r["outcome"].to_string();
                assert_eq!(
                    outcome,
                    full.chars().take(160).collect::<String>(),
                    "{line}"
                );
                lines.push(format!("{head}<outcome>"));
            }
            None => lines.push(line.to_owned()),
        }
    }
    assert_snapshot(
        "`run show` of a run delivered on its branch",
        &normalize(&(lines.join("\n") + "\n"), &env, &run, &id),
        SHOW_DELIVERED,
    );
    assert_snapshot(
        "`run handover <run>` of a run delivered on its branch",
        &normalize(
            &env.iced(&["run", "handover", &run]).ok().stdout,
            &env,
            &run,
            &id,
        ),
        HANDOVER_DELIVERED,
    );

    // A run blocked at landing: the handover names the hazard.
    let (env, id) = landing_env(
        "commit README.md the agent's readme\nreport-ok E1 E2\n",
        1,
        json!({"mode": "merge", "strategy": "squash"}),
    );
    let (_, started) = build(&env, &id, &["--no-wait"], 0);
    let run = str_of(&started, "run").to_owned();
    env.write("README.md", "the person's readme\n");
    env.commit_all("the person's readme");
    build(&env, &id, &[], 4);
    let handover = env.iced(&["run", "handover"]).ok().stdout;
    assert_snapshot(
        "`run handover` of a run blocked at landing",
        &normalize(&handover, &env, &run, &id),
        HANDOVER_BLOCKED,
    );
    let json = env.iced_json(&["run", "handover"]).ok().json();
    assert_eq!(
        json["handover"].as_str().map(str::trim_end),
        Some(handover.trim_end())
    );
    assert_eq!(json["runs"][0]["id"], run.as_str());
    assert_eq!(json["runs"][0]["status"], "blocked");
}

const SHOW_LANDED: &str = "<run> (delivered, from its record: it has left the state)
rules: sha256 <sha256>, the run's from its admission
lane <unit> stage delivered attempt 1
  landed: <sha>
  (brief, 1) done
  (worktree, 1) done
  (implement, 1) done
  (receipt, 1) done
  (dod-0-0, 1) done
  (deliver, 1) done
  (integrate-1, 1) done
  (landcommit-1, 1) done
  (land-1, 1) done
  (retire, 1) done
cost: unknown (1 agent that reported none)
  agent <unit> implement attempt 1: runner fake, model not reported, ? turns, cost unknown, <ms> ms, exit 0
";

const HANDOVER_NONE: &str = r#"# Handover

In force: implementer runner `fake`; no independent validators (the loop's own checks only); up to 3 attempts; landing `merge`; pace: 2 lanes and 2 agents at once.

No live run. Start one with `iced build <id>`.
"#;
const SHOW_DELIVERED: &str = r#"<run> delivered: <unit> (driver process, updated <now>)
rules: sha256 <sha256>, fixed when the run was admitted (`iced run resume <run> --reload` takes the checkout's config)
lane <unit> stage delivered attempt 1 branch iced/<unit>/<unit>
  next: Delivered on `iced/<unit>/<unit>`: merge it, then `iced run retire`.
  (<unit>, brief, 1) Done <outcome>
  (<unit>, worktree, 1) Done <outcome>
  (<unit>, implement, 1) Done <outcome>
  (<unit>, receipt, 1) Done <outcome>
  (<unit>, dod-0-0, 1) Done <outcome>
  (<unit>, deliver, 1) Done <outcome>
cost: unknown (1 agent that reported none)
  agent <unit> implement attempt 1: runner fake, model not reported, ? turns, cost unknown, <ms> ms, exit 0
"#;
const HANDOVER_DELIVERED: &str = r#"# Handover

In force: implementer runner `fake`; no independent validators (the loop's own checks only); up to 3 attempts; landing `none`; pace: 2 lanes and 2 agents at once.

## <run> (delivered, process driver)

- <unit>: delivered (attempt 1). Delivered on `iced/<unit>/<unit>`: merge it, then `iced run retire`.

It has ended: `iced run show <run>` shows what it did.
"#;
const HANDOVER_BLOCKED: &str = r#"# Handover

In force: implementer runner `fake`; no independent validators (the loop's own checks only); up to 3 attempts; landing `merge`; pace: 2 lanes and 2 agents at once.

## <run> (blocked, process driver)

- <unit>: blocked (attempt 1). Needs a person (`iced run resume` after fixing what the reason names).
  Blocked: merging `main` into the lane conflicts in README.md; resolve it on the lane branch `iced/<unit>/<unit>` and resume

Drive it with `iced implement step` (repeat while it says `advanced` or `waiting`).
"#;

/// A step record of attempt 1.
fn rec(step: &str, status: StepStatus, outcome: Option<Value>) -> StepRecord {
    StepRecord {
        step: crate::env::key(step),
        attempt: 1,
        status,
        started_at: NOW.to_owned(),
        ended_at: (status != StepStatus::Started).then(|| NOW.to_owned()),
        inputs: None,
        nonce: (status == StepStatus::Started)
            .then(|| "0123456789abcdef0123456789abcdef".to_owned()),
        pid: None,
        pid_start: None,
        outcome,
    }
}

fn finding(id: &str, severity: &str, status: &str) -> iced::run::validate::Finding {
    use iced::run::validate::{Evidence, Finding, Scenario};
    Finding {
        id: id.to_owned(),
        by: "ruthless".to_owned(),
        round: 1,
        evidence: Evidence {
            file_path: "src/session/refresh.rs".to_owned(),
            criterion_ref: "E2".to_owned(),
            finding_category: "correctness".to_owned(),
            severity: severity.to_owned(),
            summary: "a background poll counts as activity and keeps idle sessions alive"
                .to_owned(),
            failure_scenario: Scenario {
                inputs: "an idle tab polling every minute".to_owned(),
                expected: "signed out after 30 minutes".to_owned(),
                actual: "signed in for hours".to_owned(),
            },
        },
        status: status.to_owned(),
        refutation: None,
        disposition: None,
        head: None,
    }
}

/// One live run of ten lanes, each in another stage, with what a driver must know: an awaited
/// report, running commands and validators, open findings, a blocked lane with a long reason.
fn ten_lane_run(env: &TestEnv) -> Run {
    use StepStatus::{Done, Failed, Started};
    let units = [
        "012-session-refresh-on-activity",
        "013-idle-session-timeout",
        "014-remember-me-cookie",
        "015-password-reset-email",
        "016-audit-log-for-sign-ins",
        "017-rate-limit-sign-in",
        "018-csrf-token-rotation",
        "019-sign-out-everywhere",
        "020-session-list-page",
        "021-two-factor-recovery-codes",
    ];
    let stages = [
        Stage::Brief,
        Stage::Implement,
        Stage::Receipt,
        Stage::Validate,
        Stage::Refute,
        Stage::Deliver,
        Stage::Land,
        Stage::Retire,
        Stage::Blocked,
        Stage::Delivered,
    ];
    let lanes = units
        .iter()
        .zip(stages)
        .map(|(unit, stage)| {
            let mut lane = Lane {
                id: (*unit).to_owned(),
                unit: (*unit).to_owned(),
                stage,
                attempt: 1,
                crashes: 0,
                worktree: Some(
                    env.outside("repo.iced-worktrees")
                        .join(unit)
                        .display()
                        .to_string(),
                ),
                branch: Some(format!("iced/{unit}/{unit}")),
                reason: None,
                steps: vec![rec("brief", Done, Some(json!({"sha256": "x"})))],
                findings: Vec::new(),
                mutations: 0,
                validators: Vec::new(),
                land_round: 0,
                depends: Vec::new(),
                released: false,
                attempts_before: 0,
                arm_requested: false,
                review: None,
                metrics: Vec::new(),
                rejected: None,
                escalation: None,
                unit_text: None,
                ended: None,
            };
            let done = |s: &str| rec(s, Done, Some(json!({})));
            match stage {
                Stage::Implement => lane.steps.push(rec("implement", Started, None)),
                Stage::Receipt => {
                    lane.steps.extend([done("implement"), done("receipt")]);
                    lane.steps.push(rec("dod-0-0", Started, None));
                    lane.steps.push(rec("dod-1-0", Started, None));
                }
                Stage::Validate => {
                    lane.validators = vec!["full".into(), "ruthless".into(), "security".into()];
                    lane.steps.extend([done("implement"), done("receipt")]);
                    for v in &lane.validators {
                        lane.steps.push(rec(&format!("validate-{v}"), Started, None));
                    }
                }
                Stage::Refute => {
                    lane.steps.push(rec("refute", Started, None));
                    lane.findings = vec![
                        finding(&format!("{unit}-F1"), "S2-major", "open"),
                        finding(&format!("{unit}-F2"), "S1-stop-the-line", "open"),
                        finding(&format!("{unit}-F3"), "S3-minor", "noted"),
                    ];
                }
                Stage::Land => {
                    lane.land_round = 1;
                    lane.steps.push(rec("deliver", Done, Some(json!({"commit": "c0ffee"}))));
                    lane.steps.push(rec("integrate-1", Started, None));
                }
                Stage::Retire => {
                    lane.steps.push(rec("pr-open", Done, Some(json!({"url": "https://forge.test/o/r/pull/19", "number": 19}))));
                    lane.steps.push(rec("retire", Failed, Some(json!({"again": true, "new_round": false, "why": "the pull request https://forge.test/o/r/pull/19 has not landed in `main` yet"}))));
                }
                Stage::Blocked => {
                    lane.reason = Some(format!(
                        "merging `main` into the lane conflicts in src/session/refresh.rs, src/session/store.rs, tests/session.rs; resolve it on the lane branch `iced/{unit}/{unit}` and resume\nand a second line that is not shown"
                    ));
                    lane.findings = vec![finding(&format!("{unit}-F1"), "S2-major", "open")];
                }
                _ => {}
            }
            lane
        })
        .collect();
    Run {
        id: "run-20260930T110000-a1b2c3".to_owned(),
        unit: units[0].to_owned(),
        status: RunStatus::Running,
        driver: Driver::Process,
        session: Some("session-1".to_owned()),
        created_at: NOW.to_owned(),
        updated_at: NOW.to_owned(),
        base: Base {
            commit: "0".repeat(40),
            branch: Some("main".to_owned()),
        },
        next_eligible_at: None,
        overrun: None,
        brief_layout: 1,
        picked: None,
        rules: None,
        paced: 0,
        pace: None,
        window_from: None,
        spares: Vec::new(),
        claims: None,
        lanes,
    }
}

/// SPEC 23.5: the handover of a run of ten lanes stays under 400 words, and still names each
/// lane's stage and next move, what is awaited and where, and the hazards.
#[test]
fn the_handover_of_ten_lanes_is_under_four_hundred_words() {
    let env = TestEnv::initialized();
    env.patch_config(&json!({
        "runners": {"claude": {"kind": "command", "argv": ["claude", "-p", "{prompt_file}"], "timeoutSec": 1800},
                    "codex": {"kind": "command", "argv": ["codex", "exec", "{prompt_file}"], "timeoutSec": 1800}},
        "roles": {"implementer": {"runner": "claude", "model": "opus"},
                  "validator": {"runner": "codex", "model": "gpt-5"}},
        "verify": {"lenses": ["full", "failures"], "reviewers": ["ruthless", "security"], "maxAttempts": 3},
        "land": {"mode": "merge", "strategy": "squash"}
    }));
    let run = ten_lane_run(&env);
    let mut state = State {
        schema: SCHEMA,
        ..State::default()
    };
    state.runs.insert(run.id.clone(), run.clone());
    let bytes = serde_json::to_vec_pretty(&state).unwrap();
    assert_eq!(
        State::parse(&bytes).expect("State::parse accepts it"),
        state
    );
    std::fs::create_dir_all(env.path(".iced/run")).unwrap();
    env.write(".iced/run/state.json", &bytes);

    let text = env.iced(&["run", "handover"]).ok().stdout;
    let words = text.split_whitespace().count();
    eprintln!("the handover of ten lanes: {words} words\n{text}");
    assert!(words < 400, "{words} words:\n{text}");
    assert!(text.contains("runner `claude`, model opus"), "{text}");
    assert!(text.contains("runner `codex`, model gpt-5"), "{text}");
    assert!(
        text.contains("(full, failures + ruthless, security)"),
        "{text}"
    );
    assert!(
        text.contains("up to 3 attempts") && text.contains("landing `merge`"),
        "{text}"
    );
    for lane in &run.lanes {
        // A lane that may still start attempts says how many (maxAttempts 3, this is the first).
        let left = if lane.stage.is_final() || matches!(lane.stage.as_str(), "land" | "retire") {
            ""
        } else {
            ", 2 more before it blocks"
        };
        assert!(
            text.contains(&format!(
                "- {}: {} (attempt 1{left})",
                lane.id,
                lane.stage.as_str()
            )),
            "{} at {} is not named:\n{text}",
            lane.id,
            lane.stage.as_str()
        );
    }
    let receipt = env.path(&format!(
        ".iced/run/{}/013-idle-session-timeout/report-1.json",
        run.id
    ));
    assert!(
        text.contains(&receipt.display().to_string()),
        "the awaited report's path:\n{text}"
    );
    assert!(text.contains("dod-0-0, dod-1-0"), "{text}");
    assert!(
        text.contains("validate-full, validate-ruthless, validate-security"),
        "{text}"
    );
    assert!(
        text.contains(
            "Open findings: 016-audit-log-for-sign-ins-F1, 016-audit-log-for-sign-ins-F2.\n"
        ),
        "open findings:\n{text}"
    );
    assert!(
        !text.contains("016-audit-log-for-sign-ins-F3"),
        "a noted finding is no hazard:\n{text}"
    );
    assert!(
        text.contains("Awaiting pull request https://forge.test/o/r/pull/19 to land."),
        "the awaited pull request:\n{text}"
    );
    assert!(
        text.contains("Blocked: merging `main` into the lane conflicts in src/session/refresh.rs"),
        "{text}"
    );
    assert!(!text.contains("a second line"), "{text}");
    assert!(text.contains("integrate-1"), "{text}");

    let json = env.iced_json(&["run", "handover"]).ok().json();
    assert_eq!(
        json["handover"].as_str().map(str::trim_end),
        Some(text.trim_end())
    );
    assert_eq!(json["runs"].as_array().map(Vec::len), Some(1));
    assert_eq!(json["runs"][0]["id"], run.id.as_str());
}

// ---- the demo -------------------------------------------------------------------------------

/// `iced demo --dir <dir> [extra]`, timed; then what it left must be a landed run: the fix and the
/// closed unit on `main` (and in the checkout's files), no run in the state, the run's record, no
/// lane worktree or branch left.
fn demo_lands(extra: &[&str]) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("demo");
    let started = Instant::now();
    let out = crate::env::run(
        Command::new(env!("CARGO_BIN_EXE_iced"))
            .args(["demo", "--dir", &dir.display().to_string(), "--json"])
            .args(extra)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", tmp.path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .stdin(std::process::Stdio::null()),
    );
    let took = started.elapsed();
    eprintln!(
        "`iced demo {}` took {:.2} s",
        extra.join(" "),
        took.as_secs_f64()
    );
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(took < Duration::from_secs(30), "the demo took {took:?}");
    let said = out.json();
    assert_eq!(said["status"], "landed", "{said}");
    let repo = dir.join("greeter");
    let unit = str_of(&said, "unit").to_owned();
    let run = str_of(&said, "run").to_owned();
    let git = |args: &[&str]| git_at(&repo, args);
    assert_eq!(git(&["symbolic-ref", "--short", "HEAD"]).trim(), "main");
    assert_eq!(git(&["status", "--porcelain"]), "", "the checkout is clean");
    assert_eq!(
        std::fs::read_to_string(repo.join("greet.sh")).unwrap(),
        "echo \"Hello, ${1:-world}\"\n",
        "the fix is in the person's files"
    );
    let closed = git(&["show", &format!("main:intent/{unit}/iced.md")]);
    assert!(closed.lines().any(|l| l == "status: done"), "{closed}");
    let parents = git(&["rev-list", "--parents", "-n", "1", "main"]);
    assert_eq!(
        parents.split_whitespace().count(),
        3,
        "main is the landing merge: {parents}"
    );
    let state = State::parse(&std::fs::read(repo.join(".iced/run/state.json")).unwrap()).unwrap();
    assert!(state.runs.is_empty(), "the landed run left the state");
    let record: Value = serde_json::from_slice(
        &std::fs::read(repo.join(format!(".iced/run/{run}/record.json")))
            .expect("the run's record"),
    )
    .unwrap();
    assert_eq!(record["run"]["status"], "delivered");
    assert_eq!(record["run"]["lanes"][0]["stage"], "delivered");
    assert!(
        git(&["branch", "--list", "iced/*"]).trim().is_empty(),
        "no lane branch is left"
    );
    assert_eq!(
        git(&["worktree", "list", "--porcelain"])
            .lines()
            .filter(|l| l.starts_with("worktree "))
            .count(),
        1,
        "no lane worktree is left"
    );
}

#[test]
fn the_demo_lands_in_under_thirty_seconds() {
    demo_lands(&[]);
}

#[test]
fn the_demo_killed_at_its_fourth_step_still_lands() {
    demo_lands(&["--kill-at", "4"]);
}
