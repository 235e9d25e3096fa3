//! A hostile planner (SPEC 20.16, 24.6, 24.7): its draft a FIFO, a link to a secret or 5 MB; the
//! checkout left with a FIFO or a link where the loop fingerprints it; the unit file itself
//! swapped; processes left behind. Each is refused at once, naming why, and nothing it pointed at
//! is read. Every build runs under [`bounded`]: a regression that blocks on a FIFO fails the test
//! instead of hanging the suite.

use crate::auto_plan::{planning, refused_remedy, starts};
use crate::env::{unit_file, Run, TestEnv};
use crate::hostile_files::{bounded, mkfifo};
use crate::snap::{assert_read, text_block};
use crate::survivors::Escapees;

const LINE: &str = "session timeout for idle users";

/// What a secret outside the repository holds: no file of the loop may ever hold it.
const SECRET: &str = "TOP-SECRET-7f3a";

const PASS: &str = r#"report {"verdict": "pass", "expectations": [{"id": "E1", "result": "pass", "evidence": "checkable"}]}"#;

/// `iced build --auto-plan <what>` under [`bounded`], with `--json` when `json`.
fn plan_bounded(env: &TestEnv, what: &str, json: bool) -> Run {
    let mut cmd = env.command();
    cmd.args(["build", "--auto-plan", what]);
    if json {
        cmd.arg("--json");
    }
    bounded(&mut cmd)
}

/// Why the planning lane was handed back: its reason, checked to end with the remedy, without it.
fn lane_reason(env: &TestEnv) -> String {
    let show = env.iced_json(&["run", "show"]).json();
    let id = show["lanes"][0]["unit"].as_str().unwrap_or_default();
    let reason = show["lanes"][0]["reason"].as_str().unwrap_or_default();
    reason
        .strip_suffix(&refused_remedy(id))
        .unwrap_or_else(|| panic!("the reason does not end with the remedy: {reason}"))
        .to_owned()
}

/// No file under `dir` holds [`SECRET`]: the loop kept no copy of what a link pointed at.
fn holds_no_secret(dir: &std::path::Path) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        if meta.is_dir() {
            holds_no_secret(&path);
        } else if meta.is_file() {
            let bytes = std::fs::read(&path).unwrap_or_default();
            assert!(
                !String::from_utf8_lossy(&bytes).contains(SECRET),
                "`{}` holds the secret",
                path.display()
            );
        }
    }
}

/// A secret outside the repository, as a planner would point the loop at it.
fn secret(env: &TestEnv) -> String {
    let path = env.outside("secret.txt");
    std::fs::write(&path, format!("{SECRET}\n")).unwrap();
    path.display().to_string()
}

/// Plan `LINE` with a planner following `planner` (reviewers pass); the handback's text output and
/// the lane's reason. The unit file is left as `iced new` made it.
fn refused_plan(planner: &str) -> (TestEnv, Run, String) {
    let env = planning(
        &format!("role planner\n{planner}\nrole plan-reviewer\n{PASS}\n"),
        3,
    );
    // The loop's own check, behind the confinement (SPEC 24.12) that would refuse the write itself.
    env.unconfined();
    // What the planner may point at: a secret and a FIFO outside the repository, a tracked file.
    let secret = secret(&env);
    let pipe = env.outside("pipe");
    mkfifo(&pipe);
    env.write("src/app.txt", "the app\n");
    env.commit_all("the app");
    let script = std::fs::read_to_string(env.agent_script())
        .unwrap()
        .replace("{secret}", &secret)
        .replace("{pipe}", &pipe.display().to_string());
    std::fs::write(env.agent_script(), script).unwrap();
    let out = plan_bounded(&env, LINE, false);
    assert_eq!(out.code, 4, "a refused draft hands the lane back: {out:#?}");
    let reason = lane_reason(&env);
    assert_eq!(starts(&env, "plan-reviewer", "design"), 0, "no review");
    assert_eq!(starts(&env, "planner", ""), 1, "the planner ran once");
    holds_no_secret(&env.path(".iced"));
    holds_no_secret(&env.path("intent"));
    (env, out, reason)
}

#[test]
fn a_draft_that_is_a_fifo_is_refused_at_once() {
    let (env, out, reason) = refused_plan("fifo-report");
    assert!(
        reason.starts_with("plan-draft-refused: its output cannot be read: `")
            && reason.ends_with("output.md` is a FIFO, not a regular file; iced reads and writes only regular files"),
        "{reason}"
    );
    assert_read!(
        &env,
        "hostile_plan_draft_fifo",
        text_block(&["build", "--auto-plan", LINE], &out)
    );
}

#[test]
fn a_draft_that_links_to_a_secret_is_refused_unread() {
    let (env, _, reason) = refused_plan("link-report {secret}");
    assert!(
        reason.starts_with("plan-draft-refused: its output cannot be read: `")
            && reason.ends_with(
                "output.md` is a symbolic link; iced does not read or write through links here"
            ),
        "{reason}"
    );
    let id = env.iced_json(&["run", "show"]).json()["lanes"][0]["unit"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(env.read(&unit_file(&id)).contains("status: draft"));
}

#[test]
fn a_draft_of_5_mb_is_refused_unread() {
    let (_, _, reason) = refused_plan("big-report 5242880");
    assert!(
        reason.starts_with("plan-draft-refused: its output cannot be read: `")
            && reason.ends_with("output.md` is larger than 1048576 bytes"),
        "{reason}"
    );
}

/// Regression: the loop's fingerprint of the checkout read every changed path with a plain read,
/// so a tracked file the planner replaced by a FIFO hung the check forever.
#[test]
fn a_planner_that_leaves_a_fifo_in_the_checkout_is_refused_without_hanging() {
    let (_, _, reason) = refused_plan("fifo src/app.txt\ndraft-body {planned}");
    assert_eq!(
        reason,
        "plan-draft-refused: the planner changed the checkout; its only output is the draft"
    );
}

/// Regression: the same read followed an untracked link, so one to a FIFO outside the repository
/// hung the check (and one to `/dev/zero` would have read forever).
#[test]
fn a_planner_that_leaves_a_link_to_a_fifo_is_refused_without_following_it() {
    let (_, _, reason) = refused_plan("link notes.txt {pipe}\ndraft-body {planned}");
    assert_eq!(
        reason,
        "plan-draft-refused: the planner changed the checkout; its only output is the draft"
    );
}

#[test]
fn a_planner_that_swaps_its_unit_file_for_a_fifo_is_refused_without_hanging() {
    let (env, _, reason) = refused_plan("draft-body {planned}\nfifo {unit_file}");
    assert_eq!(
        reason,
        "plan-draft-refused: the planner changed the checkout; its only output is the draft"
    );
    // What the planner left is the person's to look at: the loop wrote nothing over it.
    let id = env.iced_json(&["run", "show"]).json()["lanes"][0]["unit"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(crate::hostile_files::is_fifo(&env.path(&unit_file(&id))));
}

#[test]
fn a_planner_that_swaps_its_unit_file_for_a_link_to_a_secret_is_refused_unread() {
    let (_, _, reason) = refused_plan("draft-body {planned}\nlink {unit_file} {secret}");
    assert_eq!(
        reason,
        "plan-draft-refused: the planner changed the checkout; its only output is the draft"
    );
}

/// The remedy a refused draft names works: planning the unit again starts a new run.
#[test]
fn after_a_refused_draft_planning_again_plans_anew() {
    let (env, _, _) = refused_plan("big-report 5242880");
    let id = env.iced_json(&["run", "show"]).json()["lanes"][0]["unit"]
        .as_str()
        .unwrap()
        .to_owned();
    std::fs::write(
        env.agent_script(),
        format!(
            "role planner\ndraft-body {}\nrole plan-reviewer\n{PASS}\nrole implementer\ncommit src/session.txt idle sessions end\nreport-ok E1 E2\n",
            env.outside("planned.md").display()
        ),
    )
    .unwrap();
    let out = plan_bounded(&env, &id, true);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(starts(&env, "planner", ""), 2);
}

/// No survivors (SPEC 24.7): a planner goes through the same supervisor as an implementer, so
/// what it leaves running in a session of its own (`setsid`, `nohup`, a double fork) is gone
/// before its outcome is read.
#[test]
fn a_planner_leaves_no_process_behind() {
    let escapees = Escapees::new();
    let env = planning(
        &format!(
            "role planner\n{}{}draft-body {{planned}}\nrole plan-reviewer\n{PASS}\n",
            escapees.directive(),
            escapees.detach_directive()
        ),
        1,
    );
    let out = plan_bounded(&env, LINE, true);
    assert_eq!(
        out.code, 4,
        "handed back for a person at autonomy 1: {out:#?}"
    );
    assert_eq!(escapees.pids().len(), 3, "all three started");
    assert_eq!(escapees.survivors(), Vec::<u32>::new());
}

/// A reviewer that swaps the loop's kept copy of the draft (its `ICED_UNIT_FILE`), for a link to a
/// secret or for text of its own, after the loop checked it: `build --auto-plan` refuses to go on
/// from a draft it did not check, and nothing of it reaches the unit or a commit.
fn reviewer_swaps_the_kept_draft(reviewer: &str) {
    let env = planning(
        &format!("role planner\ndraft-body {{planned}}\nrole plan-reviewer\nlens design\n{reviewer}\nlens *\n{PASS}\n"),
        3,
    );
    // The loop's own check, behind the confinement (SPEC 24.12) that would refuse the write itself.
    env.unconfined();
    let secret = secret(&env);
    let script = std::fs::read_to_string(env.agent_script())
        .unwrap()
        .replace("{secret}", &secret);
    std::fs::write(env.agent_script(), script).unwrap();
    let head = env.git_out(&["rev-parse", "HEAD"]);
    let out = plan_bounded(&env, LINE, true);
    assert_eq!(out.code, 3, "{out:#?}");
    let refusal = crate::loop_e2e::last_line(&out)["refused"].clone();
    assert_eq!(refusal["code"], "plan-draft-changed", "{out:#?}");
    assert!(
        crate::loop_e2e::str_of(&refusal, "reason").contains("draft-1.md"),
        "{refusal:#}"
    );
    let id = crate::auto_plan::planned_id(&env);
    let unit = env.read(&unit_file(&id));
    assert!(unit.contains("status: draft"), "{unit}");
    assert!(
        !unit.contains("No change to how passwords are checked"),
        "the draft was not written: {unit}"
    );
    assert_eq!(
        env.git_out(&["rev-parse", "HEAD"]),
        head,
        "nothing committed"
    );
    holds_no_secret(&env.path("intent"));
    // Asked again, the run refuses the same, in words: it cannot go on from that copy.
    let again = plan_bounded(&env, &id, false);
    assert_read!(
        &env,
        match reviewer.split(' ').next().unwrap() {
            "write" => "refused_plan-draft-changed".to_owned(),
            how => format!("hostile_plan_kept_draft_{how}"),
        },
        text_block(&["build", "--auto-plan", &id], &again)
    );
    // The remedy it names works.
    let run = crate::loop_e2e::json_lines(&out)[0]["run"].clone();
    env.iced_json(&["run", "abandon", run.as_str().unwrap()])
        .ok();
}

/// Regression: the loop's copy of an accepted draft was read back without its recorded sha256,
/// through a link: a reviewer could put any text, or a secret, into the unit the loop approves.
#[test]
fn a_reviewer_that_links_the_kept_draft_to_a_secret_is_refused() {
    reviewer_swaps_the_kept_draft("link {unit_file} {secret}");
}

#[test]
fn a_reviewer_that_rewrites_the_kept_draft_is_refused() {
    reviewer_swaps_the_kept_draft("write {unit_file} status: approved");
}
