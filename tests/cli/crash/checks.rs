//! What a crash case must show once its run has finished: the work done once, delivered or
//! landed, the story told once, the claim released.

use super::*;

impl Case {
    /// The run's story told once (issue 15, #6): one `run_start` (an admit killed after saving
    /// the run lost it), and one `step_start` per step and attempt (a step a killed call began is
    /// taken up again as `step_replay`, never started a second time).
    pub(super) fn assert_events_once(&self, context: &str, run: &str) {
        let events = std::fs::read_to_string(self.env.path(".iced/run/events.jsonl")).unwrap();
        let events: Vec<Value> = events
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|e| e["run"] == run)
            .collect();
        let run_starts = events.iter().filter(|e| e["event"] == "run_start").count();
        assert_eq!(run_starts, 1, "{context}: run_start events of the run");
        let mut per_step = std::collections::BTreeMap::<String, usize>::new();
        for e in events.iter().filter(|e| e["event"] == "step_start") {
            let key = format!(
                "{} {} {} {}",
                e["lane"], e["step"], e["attempt"], e["command"]
            );
            *per_step.entry(key).or_default() += 1;
        }
        let twice: Vec<_> = per_step.iter().filter(|(_, n)| **n > 1).collect();
        assert!(
            twice.is_empty(),
            "{context}: steps started more than once: {twice:?}"
        );
    }

    /// What every finished run must show, delivered or landed: no agent started twice for one
    /// (role, lens, attempt), the implementer (and validators) once per attempt, one verified
    /// receipt per implementer start, every definition-of-done command once per verified attempt,
    /// no record archived twice, no validator sandbox left. `lane` is the run's lane as the state
    /// or the record has it.
    pub(super) fn assert_work_once(
        &self,
        context: &str,
        retry_allowed: bool,
        run: &str,
        lane: &Value,
    ) {
        // No agent started twice for one (role, lens, attempt): a completed step never reran.
        let starts = self.agent_starts();
        let mut per_key = std::collections::BTreeMap::<&Start, usize>::new();
        for s in &starts {
            *per_key.entry(s).or_default() += 1;
        }
        assert!(
            per_key.values().all(|n| *n == 1),
            "{context}: an agent started twice for one (role, lens, attempt): {per_key:?}"
        );
        // The implementer: once, or (validated) twice, for the fix round; a crashed launch
        // (retry_allowed, process driver) moves the work one attempt on.
        let implementer = self.attempts_of("implementer");
        let expected: &[u32] = if self.setup.validated { &[1, 2] } else { &[1] };
        if retry_allowed && self.setup.driver == Driver::Process {
            // As many starts as the work needs, never fewer: a validated unit's validators find
            // something in attempt 1 only (the fake agent's script), so a fix round follows
            // when attempt 1 ran, and none when its launch crashed and the work began at 2.
            let needed = if self.setup.validated && implementer.first() == Some(&1) {
                2
            } else {
                1
            };
            assert_eq!(
                implementer.len(),
                needed,
                "{context}: the implementer started in attempts {implementer:?}"
            );
        } else {
            assert_eq!(
                implementer, expected,
                "{context}: the implementer's starts (by attempt); every start: {starts:?}"
            );
        }
        if self.setup.validated {
            // Each verified attempt was validated once; the refuter saw attempt 1's finding.
            assert_eq!(
                self.attempts_of("validator"),
                implementer,
                "{context}: a validator per implementer attempt; every start: {starts:?}"
            );
            let refuted: &[u32] = if implementer.first() == Some(&1) {
                &[1]
            } else {
                &[]
            };
            assert_eq!(
                self.attempts_of("refuter"),
                refuted,
                "{context}: the refuter's starts; every start: {starts:?}"
            );
            for f in lane["findings"].as_array().expect("findings") {
                assert_eq!(
                    f["status"], "applied",
                    "{context}: finding {} ended {}",
                    f["id"], f["status"]
                );
            }
        } else {
            assert!(
                starts.iter().all(|s| s.role == "implementer"),
                "{context}: {starts:?}"
            );
        }

        self.assert_events_once(context, run);

        {
            // The metrics the delivery carries (issue 15, item 3): one `verify` per implementer
            // attempt that ran, each once, the failed ones before the pass; every delivery writes
            // its pass, with validators or without (issue 11, item 7).
            let delivery = lane["steps"]
                .as_array()
                .expect("steps")
                .iter()
                .find(|r| r["step"] == "deliver")
                .and_then(|r| r["outcome"]["commit"].as_str())
                .unwrap_or_else(|| panic!("{context}: no delivery commit: {lane:#}"))
                .to_owned();
            let metrics = self
                .env
                .git_out(&["show", &format!("{delivery}:.iced/metrics.jsonl")]);
            let verdicts: Vec<(String, u64)> = metrics
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .filter(|e| e["event"] == "verify")
                .map(|e| {
                    (
                        e["result"].as_str().unwrap_or("").to_owned(),
                        e["attempt"].as_u64().unwrap_or(0),
                    )
                })
                .collect();
            let mut expected: Vec<(String, u64)> = implementer
                .iter()
                .map(|a| ("fail".to_owned(), u64::from(*a)))
                .collect();
            if let Some(last) = expected.last_mut() {
                last.0 = "pass".to_owned();
            }
            assert_eq!(
                verdicts, expected,
                "{context}: the delivery's verify events, by attempt:\n{metrics}"
            );
        }

        let history =
            std::fs::read_to_string(self.env.path(&format!(".iced/run/{run}/history.jsonl")))
                .unwrap_or_default();
        let mut lines: Vec<&str> = history.lines().collect();
        lines.sort_unstable();
        let archived = lines.len();
        lines.dedup();
        assert_eq!(
            lines.len(),
            archived,
            "{context}: a record was archived twice in history.jsonl"
        );
        let records = self.records_of(run, lane);
        // The agents always do their job, so no receipt may fail: an attempt is superseded
        // because its implementer launch crashed (recorded, never started), or (validated) by
        // the fix round its validators asked for.
        let receipts: Vec<&Value> = records.iter().filter(|r| r["step"] == "receipt").collect();
        assert!(
            receipts.len() == implementer.len() && receipts.iter().all(|r| r["status"] == "done"),
            "{context}: one verified receipt per implementer start ({implementer:?}); got {receipts:#?}"
        );
        let final_attempt = lane["attempt"].as_u64().expect("an attempt");
        for r in records.iter().filter(|r| r["step"] == "implement") {
            if r["attempt"] == final_attempt {
                continue;
            }
            let ran = implementer
                .iter()
                .any(|a| Some(u64::from(*a)) == r["attempt"].as_u64());
            if self.setup.validated && r["status"] == "done" {
                assert!(
                    ran,
                    "{context}: a done implement record without its agent: {r}"
                );
                continue;
            }
            assert!(
                r["status"] == "failed" && r["outcome"]["crashed"] == true,
                "{context}: attempt {} was superseded without crashing: {r}",
                r["attempt"]
            );
            // Only `iced` invocations are killed here, never a supervisor: a launch taken
            // for crashed must not have started its agent (else two agents could overlap in
            // one worktree, one per attempt).
            assert!(
                !ran,
                "{context}: the agent of crashed attempt {} ran (starts {starts:?})",
                r["attempt"]
            );
        }
        for k in 0..self.setup.dod {
            let recorded = records
                .iter()
                .filter(|r| r["step"] == format!("dod-{k}-0") && r["status"] == "done")
                .count();
            assert_eq!(
                (self.dod_runs(k), recorded),
                (receipts.len(), receipts.len()),
                "{context}: definition-of-done command {k} ran (and was recorded) once per verified attempt"
            );
        }
        if self.setup.validated {
            let sandboxes = PathBuf::from(format!(
                "{}.validators",
                lane["worktree"].as_str().unwrap_or("")
            ));
            assert!(
                !sandboxes.exists(),
                "{context}: validator sandboxes are left in {}",
                sandboxes.display()
            );
        }
    }

    /// Everything a delivered run must show after any crash. `retry_allowed`: the kill may have
    /// fallen between recording a launch and its supervisor registering, which the SPEC turns
    /// into a crashed attempt and a retry.
    pub(super) fn assert_delivered(&self, context: &str, retry_allowed: bool) {
        let run = self.run_id();
        let state = self.state();
        assert_eq!(
            state.runs[&run].status.as_str(),
            "delivered",
            "{context}: the run is delivered"
        );

        self.assert_work_once(
            context,
            retry_allowed,
            &run,
            &serde_json::to_value(&state.runs[&run].lanes[0]).unwrap(),
        );

        let show = self.iced(&["run", "show", &run, "--json"], None);
        assert!(
            show.status.success(),
            "{context}: run show: {}",
            show.describe()
        );
        let show: Value = serde_json::from_str(&show.stdout).expect("run show --json is JSON");
        for lane in show["lanes"].as_array().expect("lanes") {
            for r in lane["steps"].as_array().expect("steps") {
                assert_ne!(
                    r["status"], "started",
                    "{context}: a step record is left started: {r}"
                );
            }
        }
        for lane in &state.runs[&run].lanes {
            assert!(lane.steps.iter().all(|r| r.status != StepStatus::Started));
        }

        assert_eq!(
            self.deliver_commits(),
            1,
            "{context}: exactly one `iced: deliver` commit on the lane branch"
        );
        // A delivered lane's worktree stays at its path unless a later lane of its run took it
        // as a spare (SPEC 23.2); a case builds one unit, so nobody takes it, and it must be
        // there, on the lane branch. (crash/reuse.rs checks the worktrees a project run reuses.)
        let worktree = state.runs[&run].lanes[0]
            .worktree
            .clone()
            .expect("a delivered lane has a worktree");
        assert!(
            state.runs[&run].spares.is_empty(),
            "{context}: a run of one lane offers no spare"
        );
        let status = Command::new("git")
            .args(["status", "--porcelain", "--untracked-files=all"])
            .current_dir(&worktree)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .expect("git runs");
        assert!(
            status.status.success() && status.stdout.is_empty(),
            "{context}: the delivered worktree is clean: {}",
            String::from_utf8_lossy(&status.stdout)
        );
        self.assert_claim_released(context);
        let events = std::fs::read_to_string(self.env.path(".iced/run/events.jsonl")).unwrap();
        for line in events.lines() {
            serde_json::from_str::<Value>(line)
                .unwrap_or_else(|e| panic!("{context}: events.jsonl: {e}: {line:?}"));
        }
    }

    /// The ended run's claim is released. A kill between saving the run's end and releasing its
    /// claims (`end-before-release`, or a random kill in that window) leaves it: then it names this
    /// run, which has ended, so it blocks nobody (SPEC 20.3), and the next call of the run
    /// releases it.
    pub(super) fn assert_claim_released(&self, context: &str) {
        let path = self.env.claim_path(&self.id);
        if !path.exists() {
            return;
        }
        let claim: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
            .expect("a claim is JSON");
        assert_eq!(claim["run"], self.the_run().as_str(), "{context}: {claim}");
        let ended = match self.state().runs.get(&self.the_run()) {
            Some(run) => run.status.is_ended(),
            None => self.recorded_run().is_some(),
        };
        assert!(
            ended,
            "{context}: a claim is left of a run that has not ended"
        );
        let run = self.the_run();
        let call = self.iced(&["implement", "step", "--run", &run, "--json"], None);
        assert!(
            call.status.success(),
            "{context}: a step of the ended run: {}",
            call.describe()
        );
        assert!(
            !path.exists(),
            "{context}: a step of the ended run releases the claim its end left"
        );
    }

    /// What a finished case must show: delivered ([`Case::assert_delivered`]) or landed
    /// ([`Case::assert_landed`]), by how it lands.
    pub(super) fn assert_finished(&self, context: &str, retry_allowed: bool) {
        if self.setup.land == Land::None {
            self.assert_delivered(context, retry_allowed);
        } else {
            self.assert_landed(context, retry_allowed);
        }
    }

    /// Everything a landed run must show after any crash: the work done once
    /// ([`Case::assert_work_once`]); the run out of the state (which parses strictly), its record
    /// delivered with every step done; the target got the lane's work exactly once (`merge`: one
    /// landing merge commit on `main` whose parents are the old `main` and the delivery, `origin`'s
    /// `main` the same; `pr`: one push of the lane branch, one pull request opened and armed,
    /// nothing pushed after arming); the lane's worktree and branch gone; the person's checkout
    /// clean and following; the claim released.
    pub(super) fn assert_landed(&self, context: &str, retry_allowed: bool) {
        let state = self.state();
        assert!(
            state.runs.is_empty(),
            "{context}: the landed run left the state: {:?}",
            state.runs.keys().collect::<Vec<_>>()
        );
        let (run, recorded) = self
            .recorded_run()
            .unwrap_or_else(|| panic!("{context}: the landed run has no record"));
        assert_eq!(recorded["status"], "delivered", "{context}: {recorded:#}");
        let lane = &recorded["lanes"][0];
        assert_eq!(lane["stage"], "delivered", "{context}");
        self.assert_work_once(context, retry_allowed, &run, lane);
        for r in lane["steps"].as_array().expect("steps") {
            assert_eq!(r["status"], "done", "{context}: a step not done: {r}");
        }
        let outcome = |key: &str| {
            lane["steps"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["step"] == key)
                .map(|r| r["outcome"].clone())
                .unwrap_or_else(|| panic!("{context}: no `{key}` record: {lane:#}"))
        };
        assert_eq!(outcome("retire")["retired"], true, "{context}");
        let delivery = outcome("deliver")["commit"]
            .as_str()
            .expect("a delivery commit")
            .to_owned();
        let git = |args: &[&str]| self.env.git_out(args).trim().to_owned();
        let main = git(&["rev-parse", "main"]);
        let remote = self.out.join("remote.git");
        let remote_main = || {
            crate::env::git_at(&remote, &["rev-parse", "main"])
                .trim()
                .to_owned()
        };
        let work = if self.setup.validated {
            vec![
                "fake agent: src/idle.txt".to_owned(),
                "fake agent: src/session.txt".to_owned(),
            ]
        } else {
            vec!["fake agent: src/session.txt".to_owned()]
        };
        let lane_subjects = |tip: &str| {
            let subjects: Vec<String> =
                git(&["log", "--format=%s", &format!("{}..{tip}", self.base)])
                    .lines()
                    .map(str::to_owned)
                    .collect();
            subjects
        };
        match self.setup.land {
            Land::Merge | Land::MergeRemote => {
                assert_eq!(
                    git(&[
                        "rev-list",
                        "--first-parent",
                        &format!("{}..main", self.base)
                    ]),
                    main,
                    "{context}: exactly one commit landed on main's first-parent line"
                );
                assert_eq!(
                    git(&["rev-list", "--parents", "-n", "1", &main]),
                    format!("{main} {} {delivery}", self.base),
                    "{context}: the landing merge's parents are the old main and the delivery"
                );
                let mut expected = vec![
                    format!("{} (merge)", self.id),
                    format!("iced: deliver {}", self.id),
                ];
                expected.extend(work);
                assert_eq!(
                    lane_subjects(&main),
                    expected,
                    "{context}: main got the lane's work once"
                );
                assert_eq!(
                    outcome(&format!("land-{}", lane["land_round"]))["commit"],
                    main.as_str()
                );
                if self.setup.land == Land::MergeRemote {
                    assert_eq!(
                        remote_main(),
                        main,
                        "{context}: origin's main is the landing"
                    );
                }
                assert_eq!(
                    self.env.read("src/session.txt"),
                    "refreshed on activity\n",
                    "{context}: the person's checkout follows main"
                );
                assert_eq!(git(&["symbolic-ref", "--short", "HEAD"]), "main");
            }
            Land::Pr | Land::PrGh => {
                assert_eq!(
                    main, self.base,
                    "{context}: a pull request does not move the local main"
                );
                assert_eq!(
                    remote_main(),
                    delivery,
                    "{context}: the forge merged the lane head"
                );
                assert_eq!(
                    crate::env::git_at(
                        &remote,
                        &["rev-parse", &format!("iced/{}/{}", self.id, self.id)]
                    )
                    .trim(),
                    delivery,
                    "{context}: the pull request's branch is the delivery"
                );
                let mut expected = vec![format!("iced: deliver {}", self.id)];
                expected.extend(work);
                assert_eq!(lane_subjects(&remote_main()), expected, "{context}");
                let log = std::fs::read_to_string(self.out.join("forge/calls.log")).unwrap();
                let kinds: Vec<&str> = log.lines().map(|l| l.split('\t').next().unwrap()).collect();
                assert_eq!(
                    kinds.iter().filter(|k| **k == "forge open").count(),
                    1,
                    "{context}: one pull request opened:\n{log}"
                );
                assert_eq!(
                    kinds.iter().filter(|k| **k == "forge arm").count(),
                    1,
                    "{context}: armed once:\n{log}"
                );
                // Every push is of the delivery. A push whose call was killed while it ran is
                // not known to have reached the remote, so the replay looks (it pushes only when
                // the remote lacks the head) and the killed call's `git push`, which a SIGKILL of
                // the loop does not stop, may still finish late: then two pushes of the same
                // commit, in any order. Without such a kill: exactly one, before arming.
                for line in log.lines().filter(|l| l.starts_with("git push")) {
                    assert!(
                        line.contains(&format!("{delivery}:refs/heads/")),
                        "{context}: a push of something other than the delivery:\n{log}"
                    );
                }
                let events =
                    std::fs::read_to_string(self.env.path(".iced/run/events.jsonl")).unwrap();
                let push_killed = events.lines().any(|l| {
                    let e: Value = serde_json::from_str(l).unwrap();
                    e["event"] == "step_replay" && e["step"] == "push-branch"
                });
                let pushes = kinds.iter().filter(|k| **k == "git push").count();
                let armed = kinds.iter().position(|k| *k == "forge arm").unwrap();
                if push_killed {
                    assert!(
                        (1..=2).contains(&pushes),
                        "{context}: the lane branch pushed once, or again after a kill mid-push:\n{log}"
                    );
                } else {
                    assert_eq!(pushes, 1, "{context}: the lane branch pushed once:\n{log}");
                    assert!(
                        kinds[armed..].iter().all(|k| *k != "git push"),
                        "{context}: a push after arming:\n{log}"
                    );
                }
                let opened = outcome("pr-open");
                assert_eq!(opened["url"], "https://forge.test/o/r/pull/7", "{context}");
                assert_eq!(opened["number"], 7, "{context}");
            }
            Land::None => unreachable!(),
        }
        assert!(
            git(&["branch", "--list", "iced/*"]).is_empty(),
            "{context}: the lane's branch is deleted"
        );
        assert!(
            !Path::new(lane["worktree"].as_str().expect("a worktree")).exists(),
            "{context}: the lane's worktree is removed"
        );
        assert_eq!(
            git(&["worktree", "list", "--porcelain"])
                .lines()
                .filter(|l| l.starts_with("worktree "))
                .count(),
            1,
            "{context}: only the person's checkout is left"
        );
        assert_eq!(
            git(&["status", "--porcelain", "--untracked-files=all"]),
            "",
            "{context}: the person's checkout is clean"
        );
        self.assert_claim_released(context);
        let show = self.iced(&["run", "show", &run, "--json"], None);
        assert!(
            show.status.success(),
            "{context}: run show: {}",
            show.describe()
        );
        let events = std::fs::read_to_string(self.env.path(".iced/run/events.jsonl")).unwrap();
        for line in events.lines() {
            serde_json::from_str::<Value>(line)
                .unwrap_or_else(|e| panic!("{context}: events.jsonl: {e}: {line:?}"));
        }
    }
}
