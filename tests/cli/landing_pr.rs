//! Landing by pull request (SPEC 23.2): the lane branch pushed, the pull request opened and armed
//! through `fixtures/fake-forge`, never pushed to again, and the lane retired once the forge merged
//! it. Split from landing.rs, whose helpers it uses.

use crate::env::{fake_runner, merge_json, TestEnv};
use crate::landing::*;
use crate::loop_e2e::{json_lines, lane_branch, run_show, step_until, str_of, WAIT};
use iced::run::state::{Lane, RunStatus, Stage};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

// ---- pull requests ------------------------------------------------------------------------------

/// A buildable unit landing by pull request through `origin` (a bare repository) and the fake
/// forge (its calls logged to `forge/calls.log`, with `land.pr.find` set), `arm` as `land.arm`;
/// `validated`: an independent validator (the fake agent) judges each expectation. Returns the
/// env, the unit, the forge's directory, the remote, and the PATH for `iced`: a `git` shim that
/// logs every push to the forge's log, so the order of pushes and forge calls is on one page.
fn pr_env(arm: &str, validated: bool) -> (TestEnv, String, PathBuf, PathBuf, std::ffi::OsString) {
    let forge_argv = |env: &TestEnv, verb: &str, rest: &[&str]| -> Value {
        let mut argv = vec![
            "bash".to_owned(),
            FAKE_FORGE.to_owned(),
            env.outside("forge").display().to_string(),
            verb.to_owned(),
        ];
        argv.extend(rest.iter().map(|s| (*s).to_owned()));
        json!(argv)
    };
    let script = if validated {
        format!("role implementer\n{AGENT}role validator\nreport {PASS}\n")
    } else {
        AGENT.to_owned()
    };
    let (env, id) = TestEnv::buildable_with(|env| {
        let mut config = fake_runner(env, &script);
        merge_json(
            &mut config,
            &json!({
                "verify": {"independent": validated, "lenses": ["full"], "commands": dod_commands(env, 1)},
                "land": {
                    "mode": "pr", "remote": "origin", "arm": arm,
                    "pr": {
                        "open": forge_argv(env, "open", &["--head", "{branch}", "--base", "{target}", "--title", "{title}", "--body-file", "{body_file}"]),
                        "arm": forge_argv(env, "arm", &["{pr_number}", "{pr_url}"]),
                        "find": forge_argv(env, "find", &["{branch}"]),
                    }
                }
            }),
        );
        if validated {
            merge_json(
                &mut config,
                &json!({"roles": {"validator": {"runner": "fake"}}}),
            );
        }
        config
    });
    let forge = env.outside("forge");
    std::fs::create_dir_all(&forge).unwrap();
    let remote = add_remote(&env);
    // Pushes of the lane's branch; a claim's ref on the remote (SPEC 24.9.1) is not the pull
    // request's and is left out.
    let path = crate::env::git_shim(
        &env.outside("bin"),
        &format!(
            "case \" $* \" in *refs/iced/claims/*) ;; *' push '*) printf 'git push\\t%s\\n' \"$*\" >> '{}';; esac\n",
            forge.join("calls.log").display()
        ),
    );
    (env, id, forge, remote, path)
}

/// Every logged call, each as its tab-separated fields (`forge <verb>` or `git push`, then the
/// arguments).
fn calls(forge: &Path) -> Vec<Vec<String>> {
    std::fs::read_to_string(forge.join("calls.log"))
        .unwrap_or_default()
        .lines()
        .map(|l| l.split('\t').map(str::to_owned).collect())
        .collect()
}

fn iced_with_path(env: &TestEnv, path: &std::ffi::OsStr, args: &[&str]) -> crate::env::Run {
    crate::env::run(env.command().env("PATH", path).args(args))
}

/// The forge merges the lane's delivery (pushed to the remote's `main`); the next `iced build`
/// retires the lane and the run ends delivered.
fn forge_merges_and_build_delivers(
    env: &TestEnv,
    id: &str,
    path: &std::ffi::OsStr,
    remote: &std::path::Path,
    lane: &Lane,
) {
    let delivery = lane.outcome(&crate::env::key("deliver")).unwrap()["commit"]
        .as_str()
        .unwrap()
        .to_owned();
    env.git(&[
        "push",
        "-q",
        &remote.display().to_string(),
        &format!("{delivery}:refs/heads/main"),
    ]);
    let out = iced_with_path(env, path, &["build", id, "--json"]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(
        json_lines(&out).pop().unwrap()["status"],
        "delivered",
        "{out:#?}"
    );
}

/// No `git push` after the pull request was armed (nor, without arming, after it was opened).
fn assert_no_push_after(log: &[Vec<String>], verb: &str) {
    let at = log
        .iter()
        .position(|c| c[0] == format!("forge {verb}"))
        .unwrap_or_else(|| panic!("no `{verb}` call in {log:#?}"));
    let later: Vec<&Vec<String>> = log[at..].iter().filter(|c| c[0] == "git push").collect();
    assert!(
        later.is_empty(),
        "the loop pushed after `{verb}`: {later:?}\nevery call: {log:#?}"
    );
}

/// `land.mode: pr` with `arm: auto`: the lane branch is pushed, the pull request opened (every
/// placeholder filled, the body rendered from the run) and armed, and never pushed to again. The
/// run then waits for the forge; once the forge has merged it, the lane retires and the run leaves
/// the state.
#[test]
fn a_pull_request_is_pushed_opened_armed_and_never_pushed_again() {
    let (env, id, forge, remote, path) = pr_env("auto", true);
    let branch = lane_branch(&id);
    let base = rev(&env, "main");

    let out = iced_with_path(&env, &path, &["build", &id, "--json"]);
    assert_eq!(out.code, 0, "{out:#?}");
    let last = json_lines(&out).pop().unwrap();
    let run = str_of(&last, "run").to_owned();
    assert_eq!(
        last["status"], "running",
        "the run waits for the forge: {out:#?}"
    );
    assert_eq!(last["action"], "waiting");
    let waiting = reports(&out).pop().unwrap();
    assert_eq!(waiting["stage"], "retire");
    assert_eq!(
        str_of(&waiting, "next"),
        format!("the pull request {PR_URL} has not landed in `main` yet")
    );
    // A retire that waits on the pull request is logged as waiting, never as a failure.
    let retire_events: Vec<String> = env
        .read(".iced/run/events.jsonl")
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["step"] == "retire")
        .map(|e| str_of(&e, "event").to_owned())
        .collect();
    assert!(
        retire_events.contains(&"step_waits".to_owned())
            && !retire_events.contains(&"step_failed".to_owned()),
        "{retire_events:?}"
    );

    // Pushed, then found nothing, opened, armed: in that order, each once.
    let log = calls(&forge);
    let kinds: Vec<&str> = log.iter().map(|c| c[0].as_str()).collect();
    assert_eq!(
        kinds,
        ["git push", "forge find", "forge open", "forge arm"],
        "{log:#?}"
    );
    let s = state(&env);
    let lane = &s.runs[&run].lanes[0];
    let delivery = lane.outcome(&crate::env::key("deliver")).unwrap()["commit"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        log[0][1].ends_with(&format!("origin {delivery}:refs/heads/{branch}")),
        "the lane branch is pushed to origin: {:?}",
        log[0]
    );
    assert_eq!(
        remote_rev(&remote, &format!("refs/heads/{branch}")),
        Some(delivery.clone())
    );
    assert_eq!(
        remote_rev(&remote, "refs/heads/main"),
        Some(base.clone()),
        "nothing landed yet"
    );
    assert_eq!(log[1][1..], vec![branch.clone()]);
    let title = format!("{id}: session timeout");
    // The body is rendered into the pr-open step's own activity folder.
    let body_file = env.path(&format!(
        ".iced/run/{run}/{id}/activities/pr-open-1/body.md"
    ));
    assert_eq!(
        log[2][1..],
        [
            "--head".to_owned(),
            branch.clone(),
            "--base".to_owned(),
            "main".to_owned(),
            "--title".to_owned(),
            title,
            "--body-file".to_owned(),
            body_file.display().to_string(),
        ],
        "open is called with every placeholder filled"
    );
    assert_eq!(
        log[3][1..],
        ["7".to_owned(), PR_URL.to_owned()],
        "arm gets {{pr_number}} and {{pr_url}}"
    );
    let body = std::fs::read_to_string(forge.join("body.md")).expect("the forge read the body");
    assert_eq!(body, std::fs::read_to_string(&body_file).unwrap());
    for needle in [
        format!("Delivers ICED unit `{id}` (run `{run}`"),
        "- E1: pass".to_owned(),
        "- E2: pass".to_owned(),
        "## Findings\n\nNone.".to_owned(),
        "exit 0".to_owned(),
    ] {
        assert!(body.contains(&needle), "the body lacks `{needle}`:\n{body}");
    }
    let opened = lane
        .outcome(&crate::env::key("pr-open"))
        .expect("pr-open is recorded");
    assert_eq!(opened["url"], PR_URL);
    assert_eq!(opened["number"], 7);
    assert_eq!(
        lane.outcome(&crate::env::key("pr-arm"))
            .expect("pr-arm is recorded")["armed"],
        true
    );
    assert_eq!(lane.stage, Stage::Retire);

    // Asked again, it still waits, and still pushes nothing.
    let again = iced_with_path(&env, &path, &["implement", "step", "--json"]);
    assert_eq!(again.json()["action"], "waiting", "{again:#?}");
    assert_no_push_after(&calls(&forge), "arm");

    // The forge merges the pull request (here: the lane head becomes origin's main).
    env.git(&[
        "push",
        "-q",
        &remote.display().to_string(),
        &format!("{delivery}:refs/heads/main"),
    ]);
    let mut last = Value::Null;
    let started = Instant::now();
    while last["action"] != "delivered" {
        assert!(started.elapsed() < WAIT, "not retired: {last}");
        let s = iced_with_path(&env, &path, &["implement", "step", "--json"]);
        assert_eq!(s.code, 0, "{s:#?}");
        last = s.json();
        assert!(
            matches!(last["action"].as_str(), Some("advanced" | "delivered")),
            "{last}"
        );
    }
    assert!(
        str_of(&last, "next").contains(&format!("landed through pull request {PR_URL}")),
        "{last}"
    );
    let (record, _) = assert_landed_and_retired(&env, &id, &run, "origin/main");
    let lane = &record["run"]["lanes"][0];
    let opened = &step_record(lane, "pr-open").unwrap()["outcome"];
    assert_eq!(opened["url"], PR_URL, "the record keeps the pull request");
    assert_eq!(opened["number"], 7);
    let log = calls(&forge);
    assert_no_push_after(&log, "arm");
    assert_eq!(
        log.iter().filter(|c| c[0] == "git push").count(),
        1,
        "one push in all: {log:#?}"
    );
    assert_eq!(log.iter().filter(|c| c[0] == "forge open").count(), 1);
    assert_eq!(
        remote_rev(&remote, &format!("refs/heads/{branch}")),
        Some(delivery),
        "the pull request's branch is as it was opened"
    );
}

/// `land.arm: human`: the pull request is opened and left for a person; arm is never called. The
/// body still gives each expectation (judged here by the loop's own checks only).
#[test]
fn with_arm_human_the_pull_request_is_opened_and_never_armed() {
    let (env, id, forge, remote, path) = pr_env("human", false);
    let out = iced_with_path(&env, &path, &["build", &id, "--json"]);
    assert_eq!(out.code, 0, "{out:#?}");
    let last = json_lines(&out).pop().unwrap();
    let run = str_of(&last, "run").to_owned();
    assert_eq!(last["action"], "waiting", "{out:#?}");
    let log = calls(&forge);
    let kinds: Vec<&str> = log.iter().map(|c| c[0].as_str()).collect();
    assert_eq!(kinds, ["git push", "forge find", "forge open"], "{log:#?}");
    assert_no_push_after(&log, "open");
    let s = state(&env);
    let lane = &s.runs[&run].lanes[0];
    assert_eq!(lane.stage, Stage::Retire);
    assert!(
        lane.record(&crate::env::key("pr-arm")).is_none(),
        "no pr-arm step"
    );
    assert_eq!(
        lane.outcome(&crate::env::key("pr-open")).unwrap()["url"],
        PR_URL
    );
    let body = std::fs::read_to_string(forge.join("body.md")).unwrap();
    for needle in [format!("`{id}`"), "- E1: ".to_owned(), "- E2: ".to_owned()] {
        assert!(body.contains(&needle), "the body lacks `{needle}`:\n{body}");
    }

    // A person merges it on the forge; the next step retires the lane.
    forge_merges_and_build_delivers(&env, &id, &path, &remote, lane);
    assert_landed_and_retired(&env, &id, &run, "origin/main");
    let log = calls(&forge);
    assert!(
        log.iter().all(|c| c[0] != "forge arm"),
        "arm was called: {log:#?}"
    );
    assert_no_push_after(&log, "open");
}

/// A pull request the forge squash-merges never makes the lane head an ancestor of the target;
/// its content is there all the same, and the lane retires.
#[test]
fn a_squash_merged_pull_request_retires_its_lane() {
    let (env, id, _forge, remote, path) = pr_env("human", false);
    let out = iced_with_path(&env, &path, &["build", &id, "--json"]);
    let last = json_lines(&out).pop().unwrap();
    let run = str_of(&last, "run").to_owned();
    let branch = lane_branch(&id);

    // The forge squash-merges: one commit on the remote's main with the lane's tree.
    let clone = env.root().parent().unwrap().join("squasher");
    let git = |dir: &Path, args: &[&str]| {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    git(
        env.root().parent().unwrap(),
        &["clone", "-q", remote.to_str().unwrap(), "squasher"],
    );
    git(&clone, &["config", "user.name", "Forge"]);
    git(&clone, &["config", "user.email", "forge@example.test"]);
    git(&clone, &["fetch", "-q", "origin", &branch]);
    git(&clone, &["merge", "-q", "--squash", "FETCH_HEAD"]);
    git(
        &clone,
        &["commit", "-q", "-m", "squash-merged by the forge"],
    );
    git(&clone, &["push", "-q", "origin", "main"]);

    let done = step_until(&env, |s| s["action"] == "delivered");
    assert_eq!(done["action"], "delivered", "{done}");
    assert!(!branch_exists(&env, &branch), "the lane branch is deleted");
    assert!(state(&env).runs.is_empty(), "the run left the state");
    // Its record says how it ended.
    let shown = run_show(&env, &run);
    assert_eq!(shown["run"]["status"], "delivered", "{shown:#}");
}

/// After a pull request is armed the loop never pushes to it: resuming a lane blocked after
/// arming is refused, naming the pull request.
#[test]
fn resuming_after_arming_is_refused() {
    let (env, id, _remote, _forge, path) = pr_env("auto", false);
    let out = iced_with_path(&env, &path, &["build", &id, "--json"]);
    let run = str_of(&json_lines(&out).pop().unwrap(), "run").to_owned();
    // Block the lane after arming (as a failure at retire would), by hand.
    let mut s = state(&env);
    {
        let r = s.runs.get_mut(&run).unwrap();
        assert!(r.lanes[0].is_done(&crate::env::key("pr-arm")), "armed");
        r.lanes[0].stage = Stage::Blocked;
        r.lanes[0].reason = Some("a failure after arming".into());
        r.status = RunStatus::Blocked;
    }
    let mut text = serde_json::to_vec_pretty(&s).unwrap();
    text.push(b'\n');
    std::fs::write(env.path(".iced/run/state.json"), &text).unwrap();
    let before = env.read(".iced/run/state.json");
    let refused = env
        .iced_json(&["run", "resume", &run])
        .refused(3, "pr-armed");
    assert!(
        str_of(&refused, "reason").contains("https://forge.test/"),
        "{refused}"
    );
    assert_eq!(env.read(".iced/run/state.json"), before, "nothing changed");
}

/// `land.arm: human`: a person arms the open pull request with `iced run arm`; the loop arms it
/// once, records it, never pushes after, and retires the lane once the forge merged it.
#[test]
fn with_arm_human_a_person_arms_the_pull_request_with_run_arm() {
    let (env, id, forge, remote, path) = pr_env("human", false);
    let out = iced_with_path(&env, &path, &["build", &id, "--json"]);
    assert_eq!(out.code, 0, "{out:#?}");
    let run = str_of(&json_lines(&out).pop().unwrap(), "run").to_owned();

    let armed = iced_with_path(&env, &path, &["run", "arm", &run, "--json"]);
    assert_eq!(armed.code, 0, "{armed:#?}");
    // Asked again: nothing more is done.
    let again = iced_with_path(&env, &path, &["run", "arm", &run, "--json"]);
    assert_eq!(again.code, 0, "{again:#?}");
    let log = calls(&forge);
    let kinds: Vec<&str> = log.iter().map(|c| c[0].as_str()).collect();
    assert_eq!(
        kinds,
        ["git push", "forge find", "forge open", "forge arm"],
        "{log:#?}"
    );
    assert_no_push_after(&log, "arm");
    let s = state(&env);
    let lane = &s.runs[&run].lanes[0];
    assert!(lane.is_done(&crate::env::key("pr-arm")), "{lane:#?}");
    assert_eq!(lane.stage, Stage::Retire);

    // The forge merges it; the next build retires the lane.
    forge_merges_and_build_delivers(&env, &id, &path, &remote, lane);
}

/// A push that fails while another push of the same commit reaches the remote first (a killed
/// call's `git push` outlives it and races the replay's, as the random-kill walk saw): the remote
/// holds the lane's head, so the branch is pushed, not a lane blocked as refused.
#[test]
fn a_push_that_lost_a_race_to_the_same_commit_is_taken_as_pushed() {
    let (env, id, _forge, remote, _) = pr_env("human", false);
    // Every push reaches the remote, then fails as one that lost such a race.
    let path = crate::env::git_shim(
        &env.outside("racing-bin"),
        "case \" $* \" in *' push '*) \"$REAL_GIT\" \"$@\"; echo ' ! [rejected]  (fetch first)' >&2; exit 1;; esac\n",
    );
    let out = iced_with_path(&env, &path, &["build", &id, "--json"]);
    assert_eq!(out.code, 0, "{out:#?}");
    let last = json_lines(&out).pop().unwrap();
    assert_eq!(last["action"], "waiting", "{out:#?}");
    let s = state(&env);
    let lane = &s.runs[str_of(&last, "run")].lanes[0];
    let pushed = lane
        .outcome(&crate::env::key("push-branch"))
        .unwrap_or_else(|| panic!("push-branch not done: {out:#?}"));
    assert_eq!(pushed["found"], true, "{pushed}");
    assert_eq!(
        remote_rev(&remote, &lane_branch(&id)).as_deref(),
        pushed["commit"].as_str()
    );
}
