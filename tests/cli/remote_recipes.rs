//! The runner recipes of docs/remote-lanes.md (issue 14, item 3), run as shipped: a lane whose
//! agents run as Kubernetes Jobs through docs/recipes/kubernetes/run-job.sh, against
//! fixtures/fake-kubectl, a stand-in that records its calls and runs each Job's container as a
//! process: the fake agent as uid 65534 (as root) in a folder of its own, reaching the repository
//! only through the served remote, as tests/cli/remote_lanes.rs does.

use crate::env::{fake_agent, TestEnv};
use crate::landing::{rev, PASS};
use crate::loop_e2e::build;
use crate::remote_lanes::{remote_env_with, Remote, AGENT};
use crate::validation::{build_to_end, section};
use serde_json::{json, Value};
use std::path::Path;

const MANIFEST_DIR: &str = env!("CARGO_MANIFEST_DIR");

/// The Job's container for the stand-in: the fake agent away from the loop's files. A
/// validator's answer is printed as a fenced json block, which the recipe copies from the logs.
const CONTAINER: &str = r#"#!/bin/bash
set -u
work=$(mktemp -d /tmp/iced-job.XXXXXX) || exit 70
trap 'rm -rf -- "$work"; exit 143' TERM
cp -- "$FAKE_AGENT" "$work/fake-agent" && cp -- "$FAKE_SCRIPT" "$work/agent.txt" || exit 70
cp -- "$ICED_BRIEF_FILE" "$work/brief.md" || exit 70
as=()
if [ "$(id -u)" = 0 ]; then
  chown -R 65534:65534 "$work" && chmod 0700 "$work" || exit 70
  as=(setpriv --reuid=65534 --regid=65534 --clear-groups)
fi
printf 'start role=%s attempt=%s brief_names_unit=%s\n' "$ICED_ROLE" "$ICED_ATTEMPT" \
  "$(grep -c -- "$ICED_LANE" "$work/brief.md")" >>"$FAKE_LOG"
cd "$work" || exit 70
"${as[@]}" env -i PATH="$PATH" HOME="$work" GIT_CONFIG_NOSYSTEM=1 ICED_REMOTE_URL="$ICED_REMOTE_URL" \
  ICED_BRANCH="$ICED_BRANCH" ICED_BASE="$ICED_BASE" ICED_HEAD="$ICED_HEAD" ICED_ROLE="$ICED_ROLE" \
  ICED_LENS="$ICED_LENS" ICED_RUN="$ICED_RUN" ICED_LANE="$ICED_LANE" ICED_ATTEMPT="$ICED_ATTEMPT" \
  bash "$work/fake-agent" "$work/agent.txt" "$work/report.json" &
wait $!
rc=$?
if [ "$ICED_ROLE" != implementer ] && [ -f "$work/report.json" ]; then
  printf 'the agent is done\n```json\n%s\n```\n' "$(cat "$work/report.json")"
fi
printf 'end role=%s rc=%s\n' "$ICED_ROLE" "$rc" >>"$FAKE_LOG"
rm -rf -- "$work"
exit "$rc"
"#;

/// A remote unit whose runner is the Kubernetes recipe, with `kubectl` the stand-in.
fn kubernetes_env(script: &str, validators: bool, timeout_sec: u64) -> Remote {
    recipe_env(script, validators, timeout_sec, |env, bin| {
        std::os::unix::fs::symlink(
            Path::new(MANIFEST_DIR).join("fixtures/fake-kubectl"),
            bin.join("kubectl"),
        )
        .unwrap();
        json!({
            "argv": ["bash", Path::new(MANIFEST_DIR).join("docs/recipes/kubernetes/run-job.sh"), "{output_file}"],
            "env": {
                "ICED_K8S_IMAGE": "registry.test/iced-agent:1",
                "ICED_K8S_NAMESPACE": "agents",
                "FAKE_KUBECTL_DIR": env.outside("jobs"),
                "FAKE_KUBECTL_CONTAINER": env.outside("container.sh"),
            }
        })
    })
}

/// A remote unit whose runner is the GitHub Actions recipe, with `gh` the stand-in.
fn github_env(script: &str, validators: bool, timeout_sec: u64) -> Remote {
    recipe_env(script, validators, timeout_sec, |env, bin| {
        std::os::unix::fs::symlink(
            Path::new(MANIFEST_DIR).join("fixtures/fake-gh"),
            bin.join("gh"),
        )
        .unwrap();
        json!({
            "argv": ["bash", Path::new(MANIFEST_DIR).join("docs/recipes/github-actions/run-workflow.sh"), "{output_file}"],
            "env": {
                "ICED_GH_REPO": "acme/app",
                "ICED_GH_WORKFLOW": "iced-lane.yml",
                "ICED_GH_REF": "main",
                "FAKE_GH_DIR": env.outside("jobs"),
                "FAKE_GH_CONTAINER": env.outside("container.sh"),
            }
        })
    })
}

/// A remote unit whose runner is a recipe: `recipe` links its stand-in into the bin folder put
/// first on the runner's PATH and gives the runner's argv and env; the container, the fake agent
/// and its log are passed on to the stand-in by the runner's env.
fn recipe_env(
    script: &str,
    validators: bool,
    timeout_sec: u64,
    recipe: impl FnOnce(&TestEnv, &Path) -> Value,
) -> Remote {
    remote_env_with(script, validators, |env| {
        let bin = env.outside("fakebin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(env.outside("jobs")).unwrap();
        std::fs::write(env.outside("container.sh"), CONTAINER).unwrap();
        let mut runner = recipe(env, &bin);
        runner["kind"] = json!("command");
        runner["workspace"] = json!("remote");
        runner["timeoutSec"] = json!(timeout_sec);
        crate::env::merge_json(
            &mut runner,
            &json!({"env": {
                "PATH": format!("{}:${{PATH}}", bin.display()),
                "FAKE_AGENT": fake_agent(),
                "FAKE_SCRIPT": env.agent_script(),
                "FAKE_LOG": env.outside("remote.log"),
            }}),
        );
        runner
    })
}

/// The stand-in's calls, one line each, `--namespace agents` first.
fn kubectl_calls(env: &TestEnv) -> Vec<String> {
    std::fs::read_to_string(env.outside("jobs/calls.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The Jobs the recipe created: the manifests it applied.
fn manifests(env: &TestEnv) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(env.outside("jobs"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".yaml"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect();
    out.sort();
    out
}

#[test]
fn a_lane_through_the_kubernetes_recipe_lands() {
    let r = kubernetes_env(&validated_script(), true, 60);
    let env = &r.env;
    let (out, last) = build(env, &r.id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    assert_eq!(
        env.git_out(&["show", "main:src/session.txt"]),
        "refreshed on activity\n"
    );
    // Two Jobs, the implementer's and the validator's, each made, waited for, read and deleted
    // in the namespace the config names, from the image it names.
    let calls = kubectl_calls(env);
    let jobs = manifests(env);
    assert_eq!(jobs.len(), 2, "{calls:#?}");
    for manifest in &jobs {
        assert!(
            manifest.contains("image: \"registry.test/iced-agent:1\""),
            "{manifest}"
        );
        let name = manifest
            .lines()
            .find_map(|l| l.strip_prefix("  name: \""))
            .and_then(|l| l.strip_suffix('"'))
            .expect("a Job name");
        for call in [
            format!("--namespace agents create configmap {name} --from-file=brief.md=/dev/stdin"),
            "--namespace agents apply -f -".to_owned(),
            format!("--namespace agents wait --for=condition=complete --timeout=-1s job/{name}"),
            format!("--namespace agents logs job/{name}"),
            format!("--namespace agents delete job {name} --ignore-not-found --wait=false"),
            format!("--namespace agents delete configmap {name} --ignore-not-found"),
        ] {
            assert!(calls.contains(&call), "no `{call}` in {calls:#?}");
        }
    }
    let log = r.log();
    for line in ["end role=implementer rc=0", "end role=validator rc=0"] {
        assert!(log.contains(&line.to_owned()), "{log:#?}");
    }
    assert!(
        log.iter()
            .filter(|l| l.starts_with("start "))
            .all(|l| !l.ends_with("brief_names_unit=0")),
        "each Job got its brief through the ConfigMap: {log:#?}"
    );
}

/// iced's timeout stops the recipe's runner, which deletes the Job while it runs: the agent stops
/// where it runs too.
#[test]
fn the_timeout_reaches_the_kubernetes_job() {
    let r = kubernetes_env("role implementer\nclone\nhang\n", false, 3);
    let env = &r.env;
    env.patch_config(&json!({"verify": {"maxAttempts": 1}}));
    let main = rev(env, "main");
    let (_, _run) = build_to_end(env, &r.id, 4, "blocked");
    let jobs = manifests(env);
    assert_eq!(jobs.len(), 1);
    let name = jobs[0]
        .lines()
        .find_map(|l| l.strip_prefix("  name: \""))
        .and_then(|l| l.strip_suffix('"'))
        .expect("a Job name")
        .to_owned();
    let calls = kubectl_calls(env);
    assert!(
        calls.contains(&format!(
            "--namespace agents delete job {name} --ignore-not-found --wait=false"
        )),
        "{calls:#?}"
    );
    let deleted = env.outside(&format!("jobs/{name}.deleted"));
    assert_eq!(
        std::fs::read_to_string(&deleted).unwrap_or_default(),
        "deleted while running\n",
        "the Job was deleted while its agent ran"
    );
    gone(env, &format!("jobs/{name}.pid"));
    assert_eq!(rev(env, "main"), main, "nothing landed");
}

/// The agent script of the recipes' lanes: the implementer of [`AGENT`], and a validator that
/// clones the judged head and passes it.
fn validated_script() -> String {
    format!(
        "{AGENT}{}",
        section(
            "*",
            "validator",
            "full",
            &format!("clone\ngit cat-file -e HEAD:src/session.txt\nreport {PASS}")
        )
    )
}

#[test]
fn a_lane_through_the_github_actions_recipe_lands() {
    let r = github_env(&validated_script(), true, 60);
    let env = &r.env;
    let (out, last) = build(env, &r.id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    assert_eq!(
        env.git_out(&["show", "main:src/session.txt"]),
        "refreshed on activity\n"
    );
    // Two workflow runs, the implementer's and the validator's: each started with its inputs,
    // found by its token, watched; the validator's log read for its answer.
    let calls: Vec<String> = std::fs::read_to_string(env.outside("jobs/calls.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect();
    let started: Vec<&String> = calls
        .iter()
        .filter(|c| {
            c.starts_with("workflow run iced-lane.yml --repo acme/app --ref main -f token=")
        })
        .collect();
    assert_eq!(started.len(), 2, "{calls:#?}");
    assert!(
        started[0].contains("-f role=implementer "),
        "{}",
        started[0]
    );
    assert!(
        started[1].contains("-f role=validator:full "),
        "{}",
        started[1]
    );
    for id in ["1", "2"] {
        assert!(
            calls.contains(&format!("run watch {id} --exit-status --repo acme/app")),
            "{calls:#?}"
        );
    }
    assert!(
        calls.contains(&"run view 2 --log --repo acme/app".to_owned()),
        "{calls:#?}"
    );
    assert!(
        !calls.iter().any(|c| c.starts_with("run cancel")),
        "{calls:#?}"
    );
    let log = r.log();
    for line in ["end role=implementer rc=0", "end role=validator rc=0"] {
        assert!(log.contains(&line.to_owned()), "{log:#?}");
    }
    assert!(
        log.iter()
            .filter(|l| l.starts_with("start "))
            .all(|l| !l.ends_with("brief_names_unit=0")),
        "each run got its brief as an input: {log:#?}"
    );
}

/// iced's timeout stops the recipe's runner, which cancels the workflow run while it runs.
#[test]
fn the_timeout_reaches_the_github_actions_run() {
    let r = github_env("role implementer\nclone\nhang\n", false, 3);
    let env = &r.env;
    env.patch_config(&json!({"verify": {"maxAttempts": 1}}));
    let main = rev(env, "main");
    build_to_end(env, &r.id, 4, "blocked");
    let calls = std::fs::read_to_string(env.outside("jobs/calls.log")).unwrap_or_default();
    assert!(
        calls.lines().any(|c| c == "run cancel 1 --repo acme/app"),
        "{calls}"
    );
    assert_eq!(
        std::fs::read_to_string(env.outside("jobs/1.cancelled")).unwrap_or_default(),
        "cancelled while running\n",
        "the run was cancelled while its agent ran"
    );
    gone(env, "jobs/1.pid");
    assert_eq!(rev(env, "main"), main, "nothing landed");
}

/// The process whose pid the file `rel` (outside the repository) holds ends within 60 s.
fn gone(env: &TestEnv, rel: &str) {
    let pid: i32 = std::fs::read_to_string(env.outside(rel))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok() {
        assert!(std::time::Instant::now() < until, "{rel}: still running");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// A stop (`iced run abandon`) reaches the Kubernetes Job the way the timeout does.
#[test]
fn abandoning_the_run_deletes_its_kubernetes_job() {
    let r = kubernetes_env("role implementer\nclone\nhang\n", false, 60);
    let env = &r.env;
    let (_, last) = build(env, &r.id, &["--no-wait"], 0);
    let run = last["run"].as_str().expect("a run").to_owned();
    // The Job's container has started: the stand-in wrote its pid.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let pid_file = loop {
        let found = std::fs::read_dir(env.outside("jobs"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|x| x == "pid"));
        if let Some(p) = found.filter(|p| std::fs::metadata(p).is_ok_and(|m| m.len() > 0)) {
            break p;
        }
        assert!(std::time::Instant::now() < until, "the Job never started");
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    env.iced_json(&["run", "abandon", &run]).ok();
    let name = pid_file.file_stem().unwrap().to_string_lossy().into_owned();
    let deleted = env.outside(&format!("jobs/{name}.deleted"));
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !deleted.exists() {
        assert!(
            std::time::Instant::now() < until,
            "the Job was not deleted: {:#?}",
            kubectl_calls(env)
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(
        std::fs::read_to_string(&deleted).unwrap(),
        "deleted while running\n"
    );
    gone(env, &format!("jobs/{name}.pid"));
}

/// The Kubernetes recipe puts each value in the Job's manifest as the YAML double-quoted string
/// that reads back as the value: a `&`, a `|`, a quote, a backslash or a line break in an image
/// or a remote URL is neither a sed replacement nor a break out of the string.
#[test]
fn the_kubernetes_recipe_quotes_each_value_it_puts_in_the_manifest() {
    let env = TestEnv::new();
    let (bin, jobs) = (env.outside("fakebin"), env.outside("jobs"));
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&jobs).unwrap();
    std::os::unix::fs::symlink(
        Path::new(MANIFEST_DIR).join("fixtures/fake-kubectl"),
        bin.join("kubectl"),
    )
    .unwrap();
    std::fs::write(env.outside("container.sh"), "exit 0\n").unwrap();
    let (image, url) = (
        r#"registry.test/a&b|c"d\e:1"#,
        "https://forge.test/r.git?x=1&y=2\nnext: line",
    );
    let out = std::process::Command::new("bash")
        .arg(Path::new(MANIFEST_DIR).join("docs/recipes/kubernetes/run-job.sh"))
        .arg(env.outside("out.txt"))
        .env(
            "PATH",
            format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
        )
        .env("FAKE_KUBECTL_DIR", &jobs)
        .env("FAKE_KUBECTL_CONTAINER", env.outside("container.sh"))
        .env("ICED_K8S_IMAGE", image)
        .env("ICED_REMOTE_URL", url)
        .envs([
            ("ICED_BRANCH", "iced/u/u"),
            ("ICED_BASE", "b"),
            ("ICED_HEAD", "h"),
        ])
        .envs([
            ("ICED_ROLE", "implementer"),
            ("ICED_RUN", "run-1"),
            ("ICED_LANE", "u"),
        ])
        .env("ICED_ATTEMPT", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let manifest = std::fs::read_dir(&jobs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "yaml"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .expect("the manifest applied");
    // A YAML double-quoted scalar of these characters is a JSON string.
    let value_of = |line: &str, key: &str| -> String {
        let text = line.trim_start().strip_prefix(key);
        serde_json::from_str(text.unwrap_or_else(|| panic!("{key} in {manifest}")).trim()).unwrap()
    };
    let image_line = manifest
        .lines()
        .find(|l| l.trim_start().starts_with("image:"));
    assert_eq!(value_of(image_line.expect("an image"), "image:"), image);
    let url_line = manifest
        .lines()
        .skip_while(|l| !l.contains("name: ICED_REMOTE_URL"))
        .nth(1);
    assert_eq!(value_of(url_line.expect("its value"), "value:"), url);
}
