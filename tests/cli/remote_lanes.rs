//! Remote lanes (SPEC 20.19): a runner with `"workspace": "remote"` starts its agent where nothing
//! of the loop's filesystem is reachable, and the lane comes back through the git remote.
//!
//! The remote is a bare repository served by `git daemon` on 127.0.0.1 (a `git://` URL), and the
//! runner is `remote-runner.sh` below: it copies the fake agent and its script into a fresh folder
//! of its own under /tmp and, as root, gives that folder to uid 65534 and runs the agent as that
//! user (`setpriv`) with a cleared environment. The test's own temporary folder is 0700 (root's),
//! so the agent can reach the repository only through the remote. Not as root, the test says so on
//! stderr and runs the same path as the same user, in a separate folder.

use crate::env::{fake_agent, git_at, TestEnv};
use crate::landing::{parents, remote_rev, rev, PASS};
use crate::loop_e2e::{build, lane_branch, run_show, str_of};
use crate::snap::{assert_read, refused};
use crate::validation::{build_to_end, events, section};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The runner: `remote-runner.sh <fake-agent> <script> <output file> <log> <repository>`. It logs
/// what the loop gave it and whether the agent could see the repository, then runs the agent away
/// from it. A validator's answer (the agent's report file) is copied to `{output_file}`: the
/// runner shares the machine; an implementer's report travels in its report commit.
const RUNNER: &str = r#"#!/bin/bash
set -u
agent="$1"; script="$2"; out="$3"; log="$4"; repo="$5"
work=$(mktemp -d /tmp/iced-remote-agent.XXXXXX) || exit 70
cp -- "$agent" "$work/fake-agent" && cp -- "$script" "$work/agent.txt" || exit 70
cat >"$work/brief.md"
as=()
if [ "$(id -u)" = 0 ]; then
  chown -R 65534:65534 "$work" && chmod 0700 "$work" || exit 70
  as=(setpriv --reuid=65534 --regid=65534 --clear-groups)
fi
reachable=no
"${as[@]}" test -r "$repo/.iced/config.json" && reachable=yes
printf 'start role=%s attempt=%s cwd=%s prompt_file=%s worktree=%s reachable=%s brief_names_unit=%s brief_names_repo=%s branch=%s head=%s\n' \
  "$ICED_ROLE" "$ICED_ATTEMPT" "$PWD" "${ICED_PROMPT_FILE-unset}" "${ICED_WORKTREE-unset}" "$reachable" \
  "$(grep -c -- "$ICED_LANE" "$work/brief.md")" "$(grep -c -F -- "$(dirname "$repo")" "$work/brief.md")" \
  "$ICED_BRANCH" "$ICED_HEAD" >>"$log"
cd "$work" || exit 70
"${as[@]}" env -i PATH="$PATH" HOME="$work" GIT_CONFIG_NOSYSTEM=1 ICED_REMOTE_URL="$ICED_REMOTE_URL" \
  ICED_BRANCH="$ICED_BRANCH" ICED_BASE="$ICED_BASE" ICED_HEAD="$ICED_HEAD" ICED_ROLE="$ICED_ROLE" \
  ICED_LENS="${ICED_LENS:-}" ICED_RUN="$ICED_RUN" ICED_LANE="$ICED_LANE" ICED_ATTEMPT="$ICED_ATTEMPT" \
  bash "$work/fake-agent" "$work/agent.txt" "$work/report.json"
rc=$?
if [ "$ICED_ROLE" != implementer ] && [ -f "$work/report.json" ]; then
  cp -- "$work/report.json" "$out"
fi
printf 'end role=%s rc=%s\n' "$ICED_ROLE" "$rc" >>"$log"
rm -rf -- "$work"
exit "$rc"
"#;

/// An implementer that clones, commits, reports and pushes.
pub(crate) const AGENT: &str = "role implementer\nclone\ncommit src/session.txt refreshed on activity\nreport-ok E1 E2\ncommit-report\npush\n";

/// `git daemon` serving a folder on 127.0.0.1, stopped when dropped.
pub(crate) struct Daemon {
    child: Child,
    pub url: String,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Serve every repository under `base` (`git://127.0.0.1:<port>/<name>`), pushes allowed.
pub(crate) fn serve(base: &Path) -> Daemon {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let child = Command::new("git")
        .args([
            "daemon",
            "--export-all",
            "--enable=receive-pack",
            "--reuseaddr",
            "--listen=127.0.0.1",
            &format!("--port={port}"),
            &format!("--base-path={}", base.display()),
            &base.display().to_string(),
        ])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("git daemon starts");
    let daemon = Daemon {
        child,
        url: format!("git://127.0.0.1:{port}"),
    };
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < until,
            "git daemon never listened"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    daemon
}

/// A buildable unit whose lane is remote.
pub(crate) struct Remote {
    pub env: TestEnv,
    pub id: String,
    pub origin: PathBuf,
    _daemon: Daemon,
}

impl Remote {
    /// The runner's log: one `start ...` and one `end ...` line per agent.
    pub fn log(&self) -> Vec<String> {
        std::fs::read_to_string(self.env.outside("remote.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

fn as_root() -> bool {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if !root {
        eprintln!(
            "remote_lanes: NOT ROOT: the agent runs as the same user, in a folder of its own; \
             that it cannot reach the loop's files is not tested"
        );
    }
    root
}

/// A unit (E1, E2) built by a remote implementer following `script` (validators too when
/// `validators`), the definition of done a check that the pushed file is in the loop's worktree,
/// landing by merge through `origin`, the served bare repository.
pub(crate) fn remote_env(script: &str, validators: bool) -> Remote {
    remote_env_with(script, validators, |env| {
        let runner = env.outside("remote-runner.sh");
        std::fs::write(&runner, RUNNER).unwrap();
        json!({
            "kind": "command",
            "workspace": "remote",
            "argv": ["bash", runner, fake_agent(), env.agent_script(), "{output_file}",
                     env.outside("remote.log"), env.root()],
            "timeoutSec": 60
        })
    })
}

/// [`remote_env`] with the remote runner `runner` makes.
pub(crate) fn remote_env_with(
    script: &str,
    validators: bool,
    runner: impl FnOnce(&TestEnv) -> Value,
) -> Remote {
    let env = TestEnv::initialized();
    let id = env.approved_unit("session timeout");
    let top = env.root().parent().unwrap().to_owned();
    // The test's own folder: nobody but its owner gets in.
    std::fs::set_permissions(&top, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let served = env.outside("served");
    std::fs::create_dir_all(&served).unwrap();
    let origin = served.join("origin.git");
    git_at(
        &served,
        &["init", "-q", "--bare", "-b", "main", "origin.git"],
    );
    let daemon = serve(&served);
    env.git(&[
        "remote",
        "add",
        "origin",
        &format!("{}/origin.git", daemon.url),
    ]);
    std::fs::write(env.agent_script(), script).unwrap();
    let mut config = json!({
        "runners": {"remote": runner(&env)},
        "roles": {"implementer": {"runner": "remote"}},
        "verify": {
            "independent": validators,
            "commands": [{"argv": ["test", "-f", "src/session.txt"], "timeoutSec": 30}]
        },
        "land": {"mode": "merge", "strategy": "merge", "remote": "origin"}
    });
    if validators {
        config["roles"]["validator"] = json!({"runner": "remote"});
        config["verify"]["lenses"] = json!(["full"]);
    }
    env.patch_config(&config);
    env.commit_all(&format!("approve {id}"));
    env.git(&["push", "-q", "origin", "main"]);
    Remote {
        env,
        id,
        origin,
        _daemon: daemon,
    }
}

/// What the runner log's `start` lines say, as key=value maps.
pub(crate) fn starts(r: &Remote) -> Vec<std::collections::BTreeMap<String, String>> {
    r.log()
        .iter()
        .filter_map(|l| l.strip_prefix("start "))
        .map(|l| {
            l.split(' ')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect()
        })
        .collect()
}

#[test]
fn a_remote_lane_whose_agent_cannot_reach_the_loop_delivers_and_lands() {
    let root = as_root();
    let r = remote_env(AGENT, false);
    let env = &r.env;
    let base = rev(env, "main");
    let (out, last) = build(env, &r.id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    let run = str_of(&last, "run").to_owned();

    // The agent ran once, away from the loop: no path of this machine, the brief on stdin, and
    // (as root) the repository out of its reach.
    let started = starts(&r);
    assert_eq!(started.len(), 1, "{:#?}", r.log());
    let s = &started[0];
    assert_eq!(s["prompt_file"], "unset");
    assert_eq!(s["worktree"], "unset");
    assert_ne!(s["brief_names_unit"], "0", "the brief came on stdin");
    assert_eq!(
        s["brief_names_repo"], "0",
        "the brief names no path of the loop's machine"
    );
    assert_eq!(s["branch"], lane_branch(&r.id));
    assert!(
        s["cwd"].contains("/.iced/run/") && s["cwd"].contains("/activities/"),
        "the runner starts in its activity's folder: {}",
        s["cwd"]
    );
    if root {
        assert_eq!(s["reachable"], "no", "the agent could read the repository");
    }
    assert!(r.log().contains(&"end role=implementer rc=0".to_owned()));

    // Landed: origin's main and the local main hold the agent's work, never its report.
    let main = rev(env, "main");
    assert_eq!(
        remote_rev(&r.origin, "refs/heads/main").as_deref(),
        Some(main.as_str())
    );
    assert_eq!(
        env.git_out(&["show", "main:src/session.txt"]),
        "refreshed on activity\n"
    );
    assert_eq!(
        env.git_out(&["ls-tree", "-r", "--name-only", "main", ".iced/run"]),
        "",
        "the report commit never lands"
    );
    // The judged head is the agent's commit (the report commit's parent), on the base; the
    // delivery is on top of it. Retired, the lane's branch is gone from the remote too, with the
    // loop's record of it (SPEC 20.19): a later run of the unit finds none in its way.
    // The run has landed and left the state: `run show` reads its record.
    let show = run_show(env, &run);
    let lane = &show["run"]["lanes"][0];
    let receipt = lane["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step"] == "receipt")
        .cloned()
        .unwrap_or(Value::Null);
    let judged = str_of(&receipt["outcome"], "head").to_owned();
    assert_eq!(parents(env, &judged), vec![base]);
    assert_eq!(
        env.git_out(&["log", "-1", "--format=%s", &judged]).trim(),
        "fake agent: src/session.txt"
    );
    assert_eq!(
        remote_rev(&r.origin, &format!("refs/heads/{}", lane_branch(&r.id))),
        None
    );
    assert_eq!(
        env.git_out(&["for-each-ref", "refs/iced/remote/"]),
        "",
        "the loop's record of the remote branch goes with it"
    );
    assert_eq!(receipt["outcome"]["verified"], true, "{receipt:#}");
}

/// Killed right after deleting the remote lane branch at retire (`retire-after-unpublish`): the
/// next call finds it gone, drops the loop's record of it and ends the run delivered.
#[test]
fn a_retire_killed_after_deleting_the_remote_branch_finishes_on_the_next_call() {
    use std::os::unix::process::ExitStatusExt;
    let r = remote_env(AGENT, false);
    let env = &r.env;
    let killed = env
        .command()
        .env("ICED_FAILPOINT", "retire-after-unpublish")
        .args(["build", &r.id, "--json"])
        .output()
        .expect("iced runs");
    assert_eq!(killed.status.signal(), Some(9), "{killed:?}");
    assert_eq!(
        remote_rev(&r.origin, &format!("refs/heads/{}", lane_branch(&r.id))),
        None
    );
    assert_ne!(env.git_out(&["for-each-ref", "refs/iced/remote/"]), "");
    let (out, last) = build(env, &r.id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    assert_eq!(env.git_out(&["for-each-ref", "refs/iced/remote/"]), "");
    assert_eq!(starts(&r).len(), 1, "the agent ran once: {:#?}", r.log());
}

#[test]
fn a_remote_validator_that_pushes_to_the_lane_branch_is_caught() {
    let script = format!(
        "{AGENT}{}",
        section(
            "*",
            "validator",
            "full",
            &format!("clone\ncommit src/evil.txt a validator's change\npush\nreport {PASS}")
        )
    );
    let root = as_root();
    let r = remote_env(&script, true);
    let env = &r.env;
    let main = rev(env, "main");
    let (_, run) = build_to_end(env, &r.id, 4, "blocked");
    let show = run_show(env, &run);
    let reason = str_of(&show["lanes"][0], "reason");
    assert!(
        reason.contains("the lane branch moved on the remote"),
        "{reason}"
    );
    let mutation: Vec<Value> = events(env)
        .into_iter()
        .filter(|e| e["event"] == "validator_mutation")
        .collect();
    assert_eq!(mutation.len(), 1, "{mutation:#?}");
    assert!(
        mutation[0]["moved"]
            .to_string()
            .contains("moved on the remote"),
        "{mutation:#?}"
    );
    // Nothing of the push is delivered or landed.
    assert_eq!(rev(env, "main"), main);
    assert_eq!(remote_rev(&r.origin, "refs/heads/main"), Some(main));
    assert!(env
        .git_out(&["log", "--format=%s", &lane_branch(&r.id)])
        .lines()
        .all(|s| !s.contains("evil") && !s.starts_with("iced: deliver")));
    assert!(env
        .git_out(&["ls-tree", "-r", "--name-only", "main"])
        .lines()
        .all(|p| p != "src/evil.txt"));
    let validators: Vec<_> = starts(&r)
        .into_iter()
        .filter(|s| s["role"] == "validator")
        .collect();
    assert_eq!(validators.len(), 1, "not run again: {:#?}", r.log());
    if root {
        assert_eq!(validators[0]["reachable"], "no");
    }
}

#[test]
fn a_remote_validator_judges_the_pushed_head_and_the_lane_lands() {
    // The validator clones the lane branch: the judged head, with the agent's file and no report.
    let script = format!(
        "{AGENT}{}",
        section(
            "*",
            "validator",
            "full",
            &format!("clone\ngit cat-file -e HEAD:src/session.txt\nreport {PASS}")
        )
    );
    let root = as_root();
    let r = remote_env(&script, true);
    let env = &r.env;
    let (out, last) = build(env, &r.id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    let validators: Vec<_> = starts(&r)
        .into_iter()
        .filter(|s| s["role"] == "validator")
        .collect();
    assert_eq!(validators.len(), 1, "{:#?}", r.log());
    assert!(r.log().contains(&"end role=validator rc=0".to_owned()));
    // It was given the judged head: the agent's commit, which landed under the delivery.
    assert_eq!(validators[0]["head"], rev(env, "main^2^"));
    if root {
        assert_eq!(validators[0]["reachable"], "no");
    }
    assert!(events(env)
        .iter()
        .all(|e| e["event"] != "validator_mutation"));
}

/// A local implementer with remote validators (and the refuter): a finding confirmed in attempt
/// 1 is fixed in attempt 2 on the loop's own worktree, judged again by a remote validator, and
/// lands.
#[test]
fn remote_validators_of_a_local_lane_judge_a_fix_round() {
    let finding = r#"{"verdict": "fail", "expectations": [{"id": "E1", "result": "pass"}, {"id": "E2", "result": "pass"}], "findings": [{"file_path": "src/session.txt", "criterion_ref": "E2", "finding_category": "correctness", "severity": "S2-major", "summary": "idle sessions never end", "failure_scenario": {"inputs": "an idle session", "expected": "it ends after 30 minutes", "actual": "it never ends"}}]}"#;
    let confirmed = r#"{"findings": [{"finding_id": "{lane}-F1", "decision": "confirmed", "reason": "reproduced", "failure_scenario": {"inputs": "an idle session", "expected": "it ends after 30 minutes", "actual": "it never ends"}}]}"#;
    let script = format!(
        "role implementer\nattempt 1\ncommit src/session.txt refreshed on activity\nattempt 2\ncommit src/idle.txt idle sessions end\nattempt *\nreport-fix * E1 E2\n\
         role validator\nattempt 1\nclone\nreport {finding}\nattempt 2\nclone\ngit cat-file -e HEAD:src/idle.txt\nreport {PASS}\n\
         attempt *\nrole refuter\nclone\nreport {confirmed}\n"
    );
    let r = remote_env(&script, true);
    let env = &r.env;
    env.patch_config(&crate::env::fake_runner(env, &script));
    env.patch_config(&json!({"verify": {"refute": true}}));
    let (out, last) = build(env, &r.id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    let roles: Vec<(String, String)> = starts(&r)
        .into_iter()
        .map(|s| (s["role"].clone(), s["attempt"].clone()))
        .collect();
    let want = [("validator", "1"), ("refuter", "1"), ("validator", "2")]
        .map(|(a, b)| (a.to_owned(), b.to_owned()));
    assert_eq!(roles, want, "{:#?}", r.log());
    assert_eq!(
        env.git_out(&["show", "main:src/idle.txt"]),
        "idle sessions end\n"
    );
}

/// A lying agent: what it pushed and what its report says are checked as a local lane's.
#[test]
fn a_pushed_branch_not_built_on_the_base_is_refused() {
    // Attempt after attempt: a root commit of its own, force-pushed over the lane branch.
    let script = "role implementer\nclone\ngit checkout -q --orphan rogue\ncommit src/session.txt refreshed on activity\nreport-ok E1 E2\ncommit-report\npush-force\n";
    let r = remote_env(script, false);
    let env = &r.env;
    let (_, run) = build_to_end(env, &r.id, 4, "blocked");
    let show = run_show(env, &run);
    let reason = str_of(&show["lanes"][0], "reason");
    assert!(
        reason.contains("does not descend from the lane's head"),
        "{reason}"
    );
    assert!(reason.contains("no commit on"), "{reason}");
    assert_eq!(
        env.git_out(&["ls-tree", "-r", "--name-only", "main", "src"]),
        "",
        "nothing landed"
    );
}

#[test]
fn a_report_claiming_work_that_was_not_pushed_is_refused() {
    // A report of evidence for both expectations, in a report commit, with no work under it.
    let script = "role implementer\nclone\nreport-ok E1 E2\ncommit-report\npush\n";
    let r = remote_env(script, false);
    let env = &r.env;
    let (_, run) = build_to_end(env, &r.id, 4, "blocked");
    let show = run_show(env, &run);
    let reason = str_of(&show["lanes"][0], "reason");
    assert!(reason.contains("no commit on"), "{reason}");
    assert!(
        reason.contains("`test -f src/session.txt` exited 1"),
        "the definition of done ran at the judged head: {reason}"
    );
}

#[test]
fn a_report_commit_that_carries_work_too_is_refused() {
    // The report and the work in one commit: the report's path would be in the judged range.
    let script = "role implementer\nclone\nreport-ok E1 E2\nwrite src/session.txt refreshed on activity\ngit add src/session.txt\ncommit-report\npush\n";
    let r = remote_env(script, false);
    let env = &r.env;
    // One attempt: a second agent would clone that commit and commit a good report on top.
    env.patch_config(&json!({"verify": {"maxAttempts": 1}}));
    let (_, run) = build_to_end(env, &r.id, 4, "blocked");
    let show = run_show(env, &run);
    let reason = str_of(&show["lanes"][0], "reason");
    assert!(
        reason.contains("changes more than .iced/run/lane-report.json"),
        "{reason}"
    );
    assert!(
        reason.contains("lane-touches-protected: `.iced/run/lane-report.json`"),
        "the guard refuses the report's path in the range: {reason}"
    );
}

#[test]
fn a_remote_lane_branch_someone_else_left_is_never_overwritten() {
    let r = remote_env(AGENT, false);
    let env = &r.env;
    // A person's branch of the same name on the remote, one commit past main.
    env.git(&["checkout", "-q", "-b", "theirs"]);
    env.write("notes.txt", "a person's work\n");
    env.commit_all("a person's work");
    let theirs = rev(env, "HEAD");
    env.git(&[
        "push",
        "-q",
        "origin",
        &format!("HEAD:refs/heads/{}", lane_branch(&r.id)),
    ]);
    env.git(&["checkout", "-q", "main"]);
    let (_, run) = build_to_end(env, &r.id, 4, "blocked");
    let show = run_show(env, &run);
    let reason = str_of(&show["lanes"][0], "reason");
    assert!(
        reason.contains("which this run did not put there; it is not overwritten"),
        "{reason}"
    );
    assert_eq!(
        remote_rev(&r.origin, &format!("refs/heads/{}", lane_branch(&r.id))).as_deref(),
        Some(theirs.as_str())
    );
    assert!(starts(&r).is_empty(), "no agent started: {:#?}", r.log());
    // As a person reads it: the lane blocked, why, and what to do.
    // (The step lines, which name the brief's hash, left out.)
    let args = ["run", "show", run.as_str()];
    let mut shown = env.iced(&args);
    shown.stdout = shown
        .stdout
        .lines()
        .filter(|l| !l.starts_with("  ("))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_read!(
        env,
        "remote_branch_not_ours",
        crate::snap::text_block(&args, &shown)
    );
    // The remedy: the person renames their branch on the remote, and the run goes on.
    env.git(&[
        "push",
        "-q",
        "origin",
        &format!("{theirs}:refs/heads/theirs"),
    ]);
    env.git(&[
        "push",
        "-q",
        "origin",
        &format!(":refs/heads/{}", lane_branch(&r.id)),
    ]);
    let (out, last) = build(env, &r.id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    assert_eq!(last["run"], run.as_str());
    assert_eq!(
        remote_rev(&r.origin, "refs/heads/theirs").as_deref(),
        Some(theirs.as_str())
    );
}

/// Where a remote runner cannot work, the config is refused naming the key (SPEC 20.19); the
/// refusal a person meets first, without `land.remote`, as a person and a host read it.
#[test]
fn a_remote_runner_is_refused_where_it_cannot_work() {
    let env = TestEnv::initialized();
    let config = env.read(".iced/config.json");
    let with = |patch: Value| {
        let mut c: Value = serde_json::from_str(&config).unwrap();
        crate::env::merge_json(&mut c, &patch);
        env.write(".iced/config.json", c.to_string());
    };
    let remote = |argv: Value| json!({"kind": "command", "workspace": "remote", "argv": argv});
    let runner = remote(json!(["run-remote", "{remote_url}", "{branch}"]));
    with(json!({"runners": {"far": runner}, "roles": {"implementer": {"runner": "far"}}}));
    assert_read!(
        &env,
        "config_invalid_remote_without_land_remote",
        refused(&env, &["list"], 3, "config-invalid")
    );
    let land = json!({"mode": "merge", "remote": "origin"});
    for (patch, key, says) in [
        (
            json!({"runners": {"far": remote(json!(["run-remote", "{prompt_file}"]))}}),
            "runners.far.argv",
            "names `{prompt_file}`, a path of this machine",
        ),
        (
            json!({"runners": {"far": remote(json!(["run-remote", "--in={worktree}"]))}}),
            "runners.far.argv",
            "names `{worktree}`",
        ),
        (
            json!({"runners": {"far": {"kind": "command", "workspace": "elsewhere", "argv": ["x"]}}}),
            "runners.far.workspace",
            "must be `local` or `remote`",
        ),
        (
            json!({"runners": {"far": {"kind": "claude", "workspace": "remote"}}}),
            "runners.far.workspace",
            "a field of a `claude` runner",
        ),
        (
            json!({"runners": {"far": runner}, "roles": {"planner": {"runner": "far"}}}),
            "roles.planner.runner",
            "names a remote runner",
        ),
        (
            json!({"runners": {"far": runner}, "roles": {"implementer": {"runner": "far"}}, "build": {"testWriter": true}}),
            "build.testWriter",
            "the implementer's runner is remote",
        ),
    ] {
        let mut patch = patch;
        patch["land"] = land.clone();
        with(patch.clone());
        let refusal = env.iced_json(&["list"]).refused(3, "config-invalid");
        let reason = refusal["reason"].as_str().unwrap_or_default().to_owned();
        assert!(
            reason.contains(&format!("`{key}`")) && reason.contains(says),
            "{patch}: {reason}"
        );
    }
    // With `land.remote`, a remote implementer and validators are a valid config; the memory
    // agent and the plan reviewers do not fall back to a remote runner.
    with(
        json!({"runners": {"far": runner}, "roles": {"implementer": {"runner": "far"}, "validator": {"runner": "far"}}, "land": land}),
    );
    env.iced_json(&["list"]).ok();
}
