//! A crash case: its repository, the `iced` calls it makes, and driving a run as a host would.

use super::*;

impl Case {
    pub(super) fn new(setup: Setup) -> Case {
        let env = TestEnv::initialized();
        let id = env.approved_unit("Session timeout");
        let out = env
            .root()
            .parent()
            .expect("the repo has a parent")
            .join("crash");
        std::fs::create_dir_all(&out).unwrap();
        // The fake agent logs its starts beside its script here: the person lets agents write it.
        env.write_user_config(&json!({"agents": {"writable": [env.agent_dir(), out.clone()]}}));
        std::fs::write(out.join("agent.script"), setup.agent.replace("{lane}", &id)).unwrap();
        let mut config: Value = serde_json::from_str(&env.read(".iced/config.json")).unwrap();
        let commands: Vec<Value> = (0..setup.dod)
            .map(|k| {
                let log = out.join(format!("dod-{k}.log"));
                json!({"argv": ["sh", "-c", "echo ran >> \"$0\"", log], "timeoutSec": 30})
            })
            .collect();
        config["verify"]["independent"] = json!(setup.validated);
        if setup.validated {
            config["verify"]["lenses"] = json!(["full"]);
        }
        config["verify"]["commands"] = json!(commands);
        config["verify"]["timeoutSec"] = json!(30);
        config["run"] = json!({"killGraceSec": 1});
        if setup.driver == Driver::Process {
            config["runners"] = json!({"fake": {"kind": "command", "argv": [FAKE_AGENT, out.join("agent.script")], "timeoutSec": 30}});
            config["roles"] = json!({"implementer": {"runner": "fake", "model": null}});
            if setup.validated {
                config["roles"]["validator"] = json!({"runner": "fake", "model": null});
            }
        }
        env.write(
            ".iced/config.json",
            serde_json::to_string_pretty(&config).unwrap(),
        );
        let forge = out.join("forge");
        let forge_argv = |verb: &str, rest: &[&str]| {
            let mut argv = vec![
                "bash".to_owned(),
                FAKE_FORGE.to_owned(),
                forge.display().to_string(),
                verb.to_owned(),
            ];
            argv.extend(rest.iter().map(|s| (*s).to_owned()));
            argv
        };
        config["land"] = match setup.land {
            Land::None => json!({"mode": "none"}),
            Land::Merge => json!({"mode": "merge", "strategy": "merge"}),
            Land::MergeRemote => json!({"mode": "merge", "strategy": "merge", "remote": "origin"}),
            Land::Pr => json!({"mode": "pr", "remote": "origin", "arm": "auto", "pr": {
                "open": forge_argv("open", &["--head", "{branch}", "--base", "{target}", "--title", "{title}", "--body-file", "{body_file}"]),
                "arm": forge_argv("arm", &["{pr_number}", "{pr_url}"]),
                "find": forge_argv("find", &["{branch}"]),
                "armed": forge_argv("armed", &["{pr_number}"]),
            }}),
            // What iced ships: no `land.pr` at all.
            Land::PrGh => json!({"mode": "pr", "remote": "origin", "arm": "auto"}),
        };
        env.write(
            ".iced/config.json",
            serde_json::to_string_pretty(&config).unwrap(),
        );
        // The person wrote what it runs, and trusts it.
        env.trust_config();
        env.git(&["add", "-A"]);
        env.git(&["commit", "-q", "-m", "approve the unit"]);
        let mut path = None;
        if matches!(setup.land, Land::MergeRemote | Land::Pr | Land::PrGh) {
            let remote = out.join("remote.git");
            crate::env::git_at(
                &out,
                &[
                    "init",
                    "-q",
                    "--bare",
                    "-b",
                    "main",
                    &remote.display().to_string(),
                ],
            );
            env.git(&["remote", "add", "origin", &remote.display().to_string()]);
            env.git(&["push", "-q", "origin", "main"]);
        }
        if matches!(setup.land, Land::Pr | Land::PrGh) {
            std::fs::create_dir_all(&forge).unwrap();
            // A `git` first on PATH that logs every push to the forge's log, so the order of the
            // pushes and the forge's calls is on one page; a claim's ref on the remote (SPEC
            // 24.9.1) is not the pull request's, and is left out.
            path = Some(crate::env::git_shim(
                &out.join("bin"),
                &format!(
                    "case \" $* \" in *refs/iced/claims/*) ;; *' push '*) printf 'git push\\t%s\\n' \"$*\" >> '{}';; esac\n",
                    forge.join("calls.log").display()
                ),
            ));
            // `gh` beside that `git`: the stand-in, its state in the forge's folder.
            crate::env::write_executable(
                &out.join("bin").join("gh"),
                &format!(
                    "#!/bin/sh\nexec bash '{FAKE_GH}' '{}' \"$@\"\n",
                    forge.display()
                ),
            );
        }
        let base = env.git_out(&["rev-parse", "main"]).trim().to_owned();
        Case {
            env,
            id,
            setup,
            out,
            calls: AtomicUsize::new(0),
            path,
            base,
        }
    }

    /// `iced <args>`, with `ICED_FAILPOINT` set when `failpoint` is given, started but not waited
    /// for. Its output goes to files (the returned paths), never to pipes a child could hold open.
    pub(super) fn spawn(
        &self,
        args: &[&str],
        failpoint: Option<&str>,
    ) -> (Child, PathBuf, PathBuf) {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        let stdout = self.out.join(format!("call-{n}.stdout"));
        let stderr = self.out.join(format!("call-{n}.stderr"));
        let mut cmd = self.env.command();
        cmd.args(args)
            .stdout(std::fs::File::create(&stdout).unwrap())
            .stderr(std::fs::File::create(&stderr).unwrap());
        if let Some(fp) = failpoint {
            cmd.env("ICED_FAILPOINT", fp);
        }
        if let Some(path) = &self.path {
            cmd.env("PATH", path);
        }
        (cmd.spawn().expect("iced starts"), stdout, stderr)
    }

    pub(super) fn iced(&self, args: &[&str], failpoint: Option<&str>) -> Call {
        let (mut child, stdout, stderr) = self.spawn(args, failpoint);
        let status = wait_for(&mut child, CALL_LIMIT, &format!("iced {args:?}"));
        collect(status, &stdout, &stderr)
    }

    pub(super) fn build(&self, failpoint: Option<&str>) -> Call {
        self.iced(&["build", &self.id, "--json"], failpoint)
    }

    /// Run `iced build` without a failpoint until the run is delivered (landed and retired, when
    /// it lands; a pull request the test merges as the forge once it waits for that) at most
    /// three times.
    pub(super) fn build_to_delivery(&self, context: &str) {
        for _ in 0..3 {
            // Building a delivered unit again would start a second run: the first may have
            // finished before it was killed.
            if self.finished() {
                return;
            }
            let call = self.build(None);
            assert!(
                call.status.success(),
                "{context}: the resuming `iced build` failed: {}",
                call.describe()
            );
            assert_eq!(
                call.last_json()["run"].as_str().map(str::to_owned),
                Some(self.the_run()),
                "{context}: `iced build` resumed the one run"
            );
            self.forge_merges();
        }
        if !self.finished() {
            panic!(
                "{context}: three resuming `iced build` calls did not deliver the run; state:\n{}",
                self.env.read(".iced/run/state.json")
            );
        }
    }

    /// Delivered (`land.mode: none`), or landed, retired and out of the state.
    pub(super) fn finished(&self) -> bool {
        match self.setup.land {
            Land::None => self.run_status().as_deref() == Some("delivered"),
            _ => {
                std::fs::read(self.env.path(".iced/run/state.json"))
                    .ok()
                    .and_then(|b| State::parse(&b).ok())
                    .is_some_and(|s| s.runs.is_empty())
                    && self.recorded_run().is_some()
            }
        }
    }

    /// The one run: in the state, or, once it left it, in its record.
    pub(super) fn the_run(&self) -> String {
        match self.state().runs.keys().next() {
            Some(run) => run.clone(),
            None => {
                self.recorded_run()
                    .expect("a run in the state or a record")
                    .0
            }
        }
    }

    /// The one run with a record (`.iced/run/<run>/record.json`): its id and its `run`.
    pub(super) fn recorded_run(&self) -> Option<(String, Value)> {
        let mut found = Vec::new();
        for entry in std::fs::read_dir(self.env.path(".iced/run"))
            .ok()?
            .flatten()
        {
            let record = entry.path().join("record.json");
            if let Ok(bytes) = std::fs::read(&record) {
                let value: Value = serde_json::from_slice(&bytes)
                    .unwrap_or_else(|e| panic!("{}: {e}", record.display()));
                found.push((entry.file_name().to_string_lossy().into_owned(), value));
            }
        }
        assert!(found.len() <= 1, "more than one run has a record");
        found.pop().map(|(id, record)| (id, record["run"].clone()))
    }

    /// The forge merges the pull request once it is armed and the loop waits for it: the lane's
    /// head becomes `origin`'s `main` (a fast-forward).
    pub(super) fn forge_merges(&self) {
        if !matches!(self.setup.land, Land::Pr | Land::PrGh) {
            return;
        }
        let Ok(bytes) = std::fs::read(self.env.path(".iced/run/state.json")) else {
            return;
        };
        let state = State::parse(&bytes).unwrap();
        let Some(run) = state.runs.values().next() else {
            return;
        };
        let lane = &run.lanes[0];
        if lane.stage.as_str() == "retire" && lane.outcome(&crate::env::key("pr-arm")).is_some() {
            let branch = format!("iced/{}/{}", self.id, self.id);
            self.env.git(&[
                "push",
                "-q",
                &self.out.join("remote.git").display().to_string(),
                &format!("{branch}:refs/heads/main"),
            ]);
        }
    }

    pub(super) fn state(&self) -> State {
        State::parse(&self.env.read_bytes(".iced/run/state.json"))
            .unwrap_or_else(|e| panic!("state.json does not parse strictly: {e:?}"))
    }

    pub(super) fn run_id(&self) -> String {
        let state = self.state();
        let runs: Vec<&String> = state.runs.keys().collect();
        assert_eq!(runs.len(), 1, "one run in the state: {runs:?}");
        runs[0].clone()
    }

    pub(super) fn run_status(&self) -> Option<String> {
        let bytes = std::fs::read(self.env.path(".iced/run/state.json")).ok()?;
        let state = State::parse(&bytes).ok()?;
        let run = state.runs.values().next()?;
        Some(run.status.as_str().to_owned())
    }

    pub(super) fn stage(&self) -> Option<String> {
        let bytes = std::fs::read(self.env.path(".iced/run/state.json")).ok()?;
        let state = State::parse(&bytes).ok()?;
        let run = state.runs.values().next()?;
        Some(run.lanes[0].stage.as_str().to_owned())
    }

    /// Every start of the fake agent, in order.
    pub(super) fn agent_starts(&self) -> Vec<Start> {
        let log = std::fs::read_to_string(self.out.join("agent.script.log")).unwrap_or_default();
        log.lines()
            .map(|l| {
                let field = |name: &str| {
                    l.split_whitespace()
                        .find_map(|w| w.strip_prefix(name))
                        .unwrap_or_else(|| panic!("an agent log line without {name}: {l}"))
                        .to_owned()
                };
                Start {
                    role: field("role="),
                    lens: field("lens="),
                    attempt: field("attempt=")
                        .parse()
                        .unwrap_or_else(|_| panic!("a bad attempt: {l}")),
                }
            })
            .collect()
    }

    /// The attempts in which `role` started, in order.
    pub(super) fn attempts_of(&self, role: &str) -> Vec<u32> {
        self.agent_starts()
            .into_iter()
            .filter(|s| s.role == role)
            .map(|s| s.attempt)
            .collect()
    }

    pub(super) fn dod_runs(&self, k: usize) -> usize {
        std::fs::read_to_string(self.out.join(format!("dod-{k}.log")))
            .unwrap_or_default()
            .lines()
            .count()
    }

    /// Every step record of a lane (as the state or the record has it): its current attempt's,
    /// and older ones (history).
    pub(super) fn records_of(&self, run: &str, lane: &Value) -> Vec<Value> {
        let mut records: Vec<Value> = lane["steps"].as_array().expect("steps").clone();
        let history =
            std::fs::read_to_string(self.env.path(&format!(".iced/run/{run}/history.jsonl")))
                .unwrap_or_default();
        for line in history.lines() {
            records.push(
                serde_json::from_str(line).unwrap_or_else(|e| panic!("history.jsonl: {e}: {line}")),
            );
        }
        records
    }

    pub(super) fn deliver_commits(&self) -> usize {
        let branch = format!("iced/{}/{}", self.id, self.id);
        let out = Command::new("git")
            .args(["log", "--format=%s", &branch])
            .current_dir(self.env.root())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .expect("git runs");
        assert!(out.status.success(), "git log {branch}: {out:?}");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.starts_with("iced: deliver"))
            .count()
    }

    /// Drive the run with `iced implement step` (and, host-driven, act as the host: run the fake
    /// agent once per receipt key and hand in its receipt) until it is delivered. With `arm`,
    /// the failpoint is set on each call made while the lane is at stage `arm.1` (any stage when
    /// None), until one call dies by it. Returns whether a call was killed.
    pub(super) fn drive_steps(&self, context: &str, arm: Option<(&str, Option<&str>)>) -> bool {
        let mut killed = false;
        let mut handed: Vec<String> = Vec::new();
        let give_up = Instant::now() + Duration::from_secs(30);
        loop {
            assert!(
                Instant::now() < give_up,
                "{context}: not delivered after 30 s of `implement step`; state:\n{}",
                self.env.read(".iced/run/state.json")
            );
            let failpoint = match arm {
                Some((fp, stage)) if !killed => match stage {
                    None => Some(fp),
                    Some(s) => (self.stage().as_deref() == Some(s)).then_some(fp),
                },
                _ => None,
            };
            // A host whose call was killed names its run (every answer carried it): the run
            // may have ended in the call that died, and a step with no run names no ended run.
            let run = killed.then(|| self.the_run());
            let mut args = vec!["implement", "step", "--json"];
            if let Some(run) = &run {
                args.extend(["--run", run.as_str()]);
            }
            let call = self.iced(&args, failpoint);
            if call.killed() {
                assert!(
                    failpoint.is_some(),
                    "{context}: `implement step` was killed without a failpoint: {}",
                    call.describe()
                );
                killed = true;
                continue;
            }
            assert!(
                call.status.success(),
                "{context}: `implement step` failed: {}",
                call.describe()
            );
            assert!(
                call.stdout.len() < 1024,
                "{context}: `implement step --json` printed {} bytes",
                call.stdout.len()
            );
            let report = call.last_json();
            match report["action"].as_str().unwrap_or("") {
                "delivered" => return killed,
                "advanced" => {}
                "waiting" => {
                    self.forge_merges();
                    std::thread::sleep(Duration::from_millis(30))
                }
                "start_agent" if self.setup.driver == Driver::Host => {
                    let key = report["receipt_key"]
                        .as_str()
                        .expect("a receipt key")
                        .to_owned();
                    if !handed.contains(&key) {
                        self.host_runs_agent(&report);
                        handed.push(key);
                    }
                    let receipt = report["receipt_path"].as_str().expect("a receipt path");
                    let call = self.iced(&["implement", "receipt", receipt, "--json"], None);
                    assert!(
                        call.status.success(),
                        "{context}: `implement receipt` failed: {}",
                        call.describe()
                    );
                }
                other => panic!("{context}: unexpected action {other}: {}", call.describe()),
            }
        }
    }

    /// What a driving host does on `start_agent`: start a fresh agent in the worktree, in the
    /// role it names (a validator's lens is the name of its prompt's folder,
    /// `activities/validate-<lens>-<attempt>/prompt.md`; the refuter's is `refute`).
    pub(super) fn host_runs_agent(&self, report: &Value) {
        let brief = report["brief"].as_str().expect("a brief");
        let role = report["role"].as_str().expect("a role");
        let lens = if role == "implementer" {
            String::new()
        } else {
            let folder = Path::new(brief)
                .parent()
                .and_then(|d| d.file_name())
                .expect("the prompt's folder")
                .to_string_lossy()
                .into_owned();
            let name = folder.rsplit_once('-').expect("<step>-<attempt>").0;
            name.strip_prefix("validate-").unwrap_or(name).to_owned()
        };
        let status = Command::new(FAKE_AGENT)
            .arg(self.out.join("agent.script"))
            .current_dir(report["worktree"].as_str().expect("a worktree"))
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.env.root())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("ICED_OUTPUT_FILE", report["receipt_path"].as_str().unwrap())
            .env("ICED_RUN", report["run"].as_str().unwrap())
            .env("ICED_LANE", report["lane"].as_str().unwrap())
            .env("ICED_ATTEMPT", report["attempt"].to_string())
            .env("ICED_ROLE", role)
            .env("ICED_LENS", lens)
            .env("ICED_PROMPT_FILE", brief)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .status()
            .expect("the fake agent runs");
        assert!(status.success(), "the host's fake agent failed: {status:?}");
    }
}

impl Drop for Case {
    /// A failed case keeps what it left (the run directory, the logs, the worktree's history) in
    /// `$TMPDIR/iced-crash-kept/`, for whoever reads the failure.
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let kept = std::env::temp_dir()
            .join("iced-crash-kept")
            .join(format!(
                "{}-{}",
                std::process::id(),
                self.calls.load(Ordering::SeqCst)
            ))
            .join(self.out.parent().unwrap().file_name().unwrap());
        let _ = std::fs::create_dir_all(&kept);
        let _ = Command::new("cp")
            .arg("-a")
            .arg(self.env.path(".iced/run"))
            .arg(&self.out)
            .arg(&kept)
            .status();
        let log = Command::new("git")
            .args(["log", "--all", "--format=%h %s", "--graph"])
            .current_dir(self.env.root())
            .output();
        if let Ok(log) = log {
            let _ = std::fs::write(kept.join("git-log.txt"), log.stdout);
        }
        eprintln!("kept the failed case's files in {}", kept.display());
    }
}
