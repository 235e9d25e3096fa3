//! Claims on the remote (SPEC 24.9.1, issue 14 items 1 and 4): a local bare repository is the
//! remote, two separate `git clone`s of it are two machines, each with its own `.iced`. Real
//! `iced` processes started together; the fake agent (fixtures/fake-agent) builds.

use crate::env::{fake_runner, git_at, merge_json, run, Run, TestEnv};
use crate::landing::add_remote;
use crate::loop_e2e::{last_line, str_of, wait_for};
use crate::snap::{assert_read, refusal_blocks};
use serde_json::{json, Value};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Two machines: the test's repository (`A`, with `origin` the bare `remote.git` beside it) and a
/// separate clone of that remote (`B`), each trusting the committed config. `units` approved units
/// (E1, E2), the fake agent following `script` as the implementer, the loop's own checks only, and
/// landing by merge through `origin`.
pub(crate) struct Machines {
    pub(crate) env: TestEnv,
    pub(crate) b: PathBuf,
    remote: PathBuf,
    pub(crate) units: Vec<String>,
}

impl Machines {
    pub(crate) fn new(units: usize, script: &str, extra: Value) -> Machines {
        let env = TestEnv::initialized();
        let titles = [
            "session timeout",
            "idle logout",
            "remember me",
            "password reset",
            "audit log",
            "rate limit",
        ];
        let units: Vec<String> = titles[..units]
            .iter()
            .map(|t| env.approved_unit(t))
            .collect();
        let mut config = fake_runner(&env, script);
        merge_json(
            &mut config,
            &json!({
                "verify": {"independent": false, "commands": []},
                "run": {"killGraceSec": 0.3},
                "land": {"mode": "merge", "strategy": "merge", "remote": "origin"},
            }),
        );
        merge_json(&mut config, &extra);
        env.patch_config(&config);
        env.commit_all("approve the units");
        let remote = add_remote(&env);
        // The remote keeps a log of its refs, so a test can count how often a claim moved.
        git_at(&remote, &["config", "core.logAllRefUpdates", "always"]);
        let b = other_machine(&env, &remote);
        Machines {
            env,
            b,
            remote,
            units,
        }
    }

    pub(crate) fn a(&self) -> &Path {
        self.env.root()
    }

    /// `git args` in the bare remote; its stdout.
    pub(crate) fn remote_git(&self, args: &[&str]) -> String {
        git_at(&self.remote, args)
    }

    /// The claim `refs/iced/claims/<unit>` on the remote, as its commit's message holds it.
    pub(crate) fn remote_claim(&self, unit: &str) -> Option<Value> {
        claim_on(&self.remote, unit)
    }

    /// Push this checkout's HEAD, a commit that holds no claim, as `unit`'s claim ref: the ref
    /// and the commit.
    pub(crate) fn push_unreadable_claim(&self, unit: &str) -> (String, String) {
        let reference = format!("refs/iced/claims/{unit}");
        let head = self.env.git_out(&["rev-parse", "HEAD"]);
        self.env.git(&[
            "push",
            "-q",
            "origin",
            &format!("{}:{reference}", head.trim()),
        ]);
        (reference, head)
    }

    /// The runs `dir`'s state holds.
    pub(crate) fn runs(&self, dir: &Path) -> Vec<String> {
        let Ok(bytes) = std::fs::read(dir.join(".iced/run/state.json")) else {
            return Vec::new();
        };
        let state: Value = serde_json::from_slice(&bytes).unwrap();
        state["runs"]
            .as_object()
            .map(|r| r.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// `iced <args> --json` in `dir` at `now`, optionally killed at `failpoint`.
    pub(crate) fn iced(
        &self,
        dir: &Path,
        now: &str,
        failpoint: Option<&str>,
        args: &[&str],
    ) -> Command {
        let mut cmd = self.env.command_in(dir);
        cmd.env("ICED_NOW", now).args(args).arg("--json");
        if let Some(point) = failpoint {
            cmd.env("ICED_FAILPOINT", point);
        }
        cmd
    }

    /// `iced build <unit>` in `dir` at `now`, killed at `failpoint`: what a build that died there
    /// left.
    pub(crate) fn build_killed_at(&self, dir: &Path, now: &str, unit: &str, failpoint: &str) {
        let out = self
            .iced(dir, now, Some(failpoint), &["build", unit, "--no-wait"])
            .output()
            .unwrap();
        assert_eq!(
            out.status.signal(),
            Some(9),
            "not killed at {failpoint}: {out:?}"
        );
    }
}

/// Another machine: a clone of `remote` beside `env`'s repository (`b`), with its own person,
/// trusting the committed config.
pub(crate) fn other_machine(env: &TestEnv, remote: &Path) -> PathBuf {
    let b = env.outside("b");
    git_at(
        remote.parent().unwrap(),
        &[
            "clone",
            "-q",
            &remote.display().to_string(),
            &b.display().to_string(),
        ],
    );
    git_at(&b, &["config", "user.name", "Other Person"]);
    git_at(&b, &["config", "user.email", "other@example.test"]);
    git_at(&b, &["config", "commit.gpgsign", "false"]);
    env.iced_json_in(&b, &["trust"]).ok();
    b
}

/// The claim `refs/iced/claims/<unit>` on the bare repository `remote`, as its commit's message
/// holds it.
pub(crate) fn claim_on(remote: &Path, unit: &str) -> Option<Value> {
    let out = Command::new("git")
        .args(["cat-file", "commit", &format!("refs/iced/claims/{unit}")])
        .current_dir(remote)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).unwrap();
    let message = text.split_once("\n\n").unwrap().1;
    let (title, body) = message.split_once("\n\n").expect("a claim message");
    assert_eq!(title, format!("iced claim {unit}"));
    Some(serde_json::from_str(body).expect("the claim is JSON"))
}

/// Start every command at once (all spawned before any is waited for); their outputs.
fn all_at_once(commands: Vec<Command>) -> Vec<Run> {
    let children: Vec<_> = commands
        .into_iter()
        .map(|mut c| {
            c.stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("iced starts")
        })
        .collect();
    children
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            Run {
                code: out.status.code().unwrap_or(-1),
                stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            }
        })
        .collect()
}

/// What concurrent builds came to: the run each one that was not refused built or resumed, and
/// the refusals (every one `unit-claimed`).
fn outcomes(outs: &[Run]) -> (Vec<String>, Vec<Value>) {
    let mut runs = Vec::new();
    let mut refusals = Vec::new();
    for out in outs {
        match out.code {
            0 => runs.push(str_of(&last_line(out), "run").to_owned()),
            3 => refusals.push(out.refused(3, "unit-claimed")),
            _ => panic!("neither a run nor `unit-claimed`:\n{out:#?}"),
        }
    }
    (runs, refusals)
}

pub(crate) const NOW: &str = crate::env::NOW;
/// Eight hours before [`NOW`]: older than the default lease of six hours.
pub(crate) const LONG_AGO: &str = "2026-09-30T03:00:00Z";
/// Two hours after [`LONG_AGO`]: its claim is still within the lease.
const SOON_AFTER: &str = "2026-09-30T05:00:00Z";

fn abandon(m: &Machines, dir: &Path, run: &str) {
    m.env.iced_json_in(dir, &["run", "abandon", run]).ok();
}

/// Sixteen `iced build <unit>`, eight from each clone, started together, admit exactly one run:
/// the clone whose admit claimed the unit on the remote first holds it (its other builds resume
/// that run or are refused), every build of the other clone is refused `unit-claimed`, naming the
/// claim on the remote; one agent starts.
#[test]
fn sixteen_builds_on_two_machines_admit_one_run() {
    let m = Machines::new(1, "hang\n", json!({}));
    let unit = m.units[0].clone();
    let commands = (0..16)
        .map(|i| {
            let dir = if i % 2 == 0 { m.a() } else { m.b.as_path() };
            m.iced(dir, NOW, None, &["build", &unit, "--no-wait"])
        })
        .collect();
    let outs = all_at_once(commands);
    let in_a = m.runs(m.a());
    let in_b = m.runs(&m.b);
    assert_eq!(
        in_a.len() + in_b.len(),
        1,
        "one run across both machines: {in_a:?} {in_b:?}\n{outs:#?}"
    );
    // Builds 0, 2, 4... ran in A; 1, 3, 5... in B.
    let a_wins = in_a.len() == 1;
    let (winner, run) = if a_wins {
        (m.a().to_owned(), in_a[0].clone())
    } else {
        (m.b.clone(), in_b[0].clone())
    };
    let (runs, refused) = outcomes(&outs);
    assert!(
        runs.iter().all(|r| *r == run),
        "every build that went on drives the one run: {runs:?}"
    );
    let (_, loser_refused) = outcomes(
        &outs
            .iter()
            .enumerate()
            .filter(|(i, _)| (i % 2 == 0) != a_wins)
            .map(|(_, o)| clone_run(o))
            .collect::<Vec<_>>(),
    );
    assert_eq!(
        loser_refused.len(),
        8,
        "every build of the other machine is refused: {outs:#?}"
    );
    for refused in &loser_refused {
        let reason = str_of(refused, "reason");
        assert!(reason.contains("on the remote `origin`"), "{refused}");
        assert!(reason.contains(&run), "{refused}");
    }
    assert_eq!(runs.len() + refused.len(), 16);
    let claim = m.remote_claim(&unit).expect("the claim on the remote");
    assert_eq!(claim["run"], run.as_str());
    assert_eq!(
        claim["root"],
        winner.canonicalize().unwrap().display().to_string()
    );
    wait_for("the agent to start", || !m.env.agent_starts().is_empty());
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(m.env.agent_starts().len(), 1, "one agent started");

    // The run's end deletes its claim on the remote.
    abandon(&m, &winner, &run);
    assert!(
        m.remote_claim(&unit).is_none(),
        "the claim outlived its run"
    );
}

fn clone_run(r: &Run) -> Run {
    Run {
        code: r.code,
        stdout: r.stdout.clone(),
        stderr: r.stderr.clone(),
    }
}

/// A claim another machine left (its build killed after pushing it, so no run of it ever lived)
/// refuses while it is younger than the lease, saying so; once older, eight builds of the other
/// clone at once take it over exactly once: one swap wins, one run is admitted.
#[test]
fn a_stale_claim_of_another_machine_is_taken_over_once() {
    let m = Machines::new(1, "hang\n", json!({}));
    let unit = m.units[0].clone();
    m.build_killed_at(m.a(), LONG_AGO, &unit, "remote-claim-after-push");
    let stale = m.remote_claim(&unit).expect("the killed build's claim");
    let stale_sha = m.remote_git(&["rev-parse", &format!("refs/iced/claims/{unit}")]);

    // Within the lease: refused, naming the run, its machine and when the lease runs out.
    let args = ["build", &unit, "--no-wait"];
    let text = run(m
        .env
        .command_in(&m.b)
        .env("ICED_NOW", SOON_AFTER)
        .args(args));
    let json = run(m
        .env
        .command_in(&m.b)
        .env("ICED_NOW", SOON_AFTER)
        .args(args)
        .arg("--json"));
    let refused = json.refused(3, "unit-claimed");
    let reason = str_of(&refused, "reason");
    assert!(reason.contains(stale["run"].as_str().unwrap()), "{reason}");
    assert!(
        reason.contains("runs out at 2026-09-30T09:00:00Z"),
        "{reason}"
    );
    assert_read!(
        &m.env,
        "unit_claimed_on_the_remote",
        refusal_blocks(&args, &text, &json, 3, "unit-claimed")
    );
    assert!(m.runs(&m.b).is_empty());

    // Past the lease: eight at once, one takeover.
    let commands = (0..8)
        .map(|_| m.iced(&m.b, NOW, None, &["build", &unit, "--no-wait"]))
        .collect();
    let outs = all_at_once(commands);
    let (runs, _refused) = outcomes(&outs);
    let admitted = m.runs(&m.b);
    assert_eq!(admitted.len(), 1, "one run: {admitted:?}\n{outs:#?}");
    assert!(runs.iter().all(|r| *r == admitted[0]), "{runs:?}");
    assert!(
        m.runs(m.a()).is_empty(),
        "the killed build recorded nothing"
    );
    let claim = m.remote_claim(&unit).unwrap();
    assert_eq!(claim["run"], admitted[0].as_str());
    // The ref moved once: from the stale claim straight to the winner's (its reflog, which the
    // bare remote keeps for this test, holds the creation and one swap).
    let log = m.remote_git(&[
        "reflog",
        "show",
        "--format=%H",
        &format!("refs/iced/claims/{unit}"),
    ]);
    let log: Vec<&str> = log.lines().collect();
    assert_eq!(log.len(), 2, "created once, taken over once: {log:?}");
    assert_eq!(log[1], stale_sha.trim());
    wait_for("the agent to start", || !m.env.agent_starts().is_empty());
    abandon(&m, &m.b, &admitted[0]);
}

/// Two `iced drain`s, one in each clone, at once, over six approved units: every unit is built by
/// one machine only (one agent start each) and lands on the remote's `main` exactly once; each
/// drain passes over what the other has (`unit-claimed` on the remote, or `unit-done-on-remote`),
/// and no claim is left on the remote.
#[test]
fn two_drains_on_two_machines_land_each_unit_once() {
    let m = Machines::new(
        6,
        "commit src/{lane}.txt the work of {lane}\nreport-ok E1 E2\n",
        json!({}),
    );
    let outs = all_at_once(vec![
        m.iced(m.a(), NOW, None, &["drain"]),
        m.iced(&m.b, NOW, None, &["drain"]),
    ]);
    let mut delivered: Vec<String> = Vec::new();
    for out in &outs {
        assert_eq!(out.code, 0, "{out:#?}");
        let summary = last_line(out);
        assert_eq!(summary["stopped"], "empty", "{summary:#}");
        assert!(
            summary["handed_back"].as_array().unwrap().is_empty(),
            "{summary:#}"
        );
        for d in summary["delivered"].as_array().unwrap() {
            delivered.push(str_of(d, "unit").to_owned());
        }
        for s in summary["skipped"].as_array().unwrap() {
            assert!(
                ["unit-claimed", "unit-done-on-remote"].contains(&str_of(s, "code")),
                "{summary:#}"
            );
        }
    }
    delivered.sort();
    let mut all = m.units.clone();
    all.sort();
    assert_eq!(
        delivered, all,
        "each unit delivered by one drain: {outs:#?}"
    );
    let starts = m.env.agent_starts();
    for unit in &m.units {
        let built = starts
            .iter()
            .filter(|s| s.contains(&format!("lane={unit} ")))
            .count();
        assert_eq!(built, 1, "{unit} built {built} times: {starts:#?}");
        let added = m.remote_git(&[
            "log",
            "--format=%H",
            "--diff-filter=A",
            "main",
            "--",
            &format!("src/{unit}.txt"),
        ]);
        assert_eq!(added.lines().count(), 1, "{unit} landed {added:?}");
        let closed = m.remote_git(&["show", &format!("main:intent/{unit}/iced.md")]);
        assert!(closed.contains("\nstatus: done\n"), "{unit}: {closed}");
    }
    let left = m.remote_git(&["for-each-ref", "refs/iced/claims/"]);
    assert!(left.trim().is_empty(), "claims left on the remote: {left}");
}

/// Another machine built and landed the unit; this clone has not pulled: its build takes the
/// claim (the other released it after landing), reads the unit at `origin/main`, and refuses.
#[test]
fn a_unit_another_machine_landed_is_not_built_again() {
    let m = Machines::new(
        1,
        "commit src/{lane}.txt the work\nreport-ok E1 E2\n",
        json!({}),
    );
    let unit = m.units[0].clone();
    let out = m
        .iced(m.a(), NOW, None, &["build", &unit])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(m.remote_claim(&unit).is_none());
    let args = ["build", &unit];
    let text = run(m.env.command_in(&m.b).args(args));
    let json = run(m.env.command_in(&m.b).args(args).arg("--json"));
    assert_read!(
        &m.env,
        "refused_unit-done-on-remote",
        refusal_blocks(&args, &text, &json, 3, "unit-done-on-remote")
    );
    assert!(m.runs(&m.b).is_empty());
    assert!(
        m.remote_claim(&unit).is_none(),
        "the refused build left its claim"
    );
    assert_eq!(m.env.agent_starts().len(), 1);
}

/// A remote that cannot be reached refuses the build before anything is written: never a claim
/// on this machine alone.
#[test]
fn an_unreachable_remote_refuses_and_claims_nothing() {
    let m = Machines::new(1, "hang\n", json!({}));
    let unit = m.units[0].clone();
    let gone = m.env.outside("gone.git");
    m.env
        .git(&["remote", "set-url", "origin", &gone.display().to_string()]);
    let args = ["build", &unit];
    let text = m.env.iced(&args);
    let json = m.env.iced_json(&args);
    assert_read!(
        &m.env,
        "refused_claim-remote-unreachable",
        refusal_blocks(&args, &text, &json, 3, "claim-remote-unreachable")
    );
    assert!(m.runs(m.a()).is_empty());
    assert!(!m.env.claim_path(&unit).exists(), "a local claim alone");
    assert!(m.env.agent_starts().is_empty());
}

/// A drain on a machine that has not pulled what another machine landed passes that unit over
/// (`unit-done-on-remote`, read at `origin/main` after taking its claim) and builds the rest.
#[test]
fn a_drain_passes_over_a_unit_another_machine_landed() {
    let m = Machines::new(
        2,
        "commit src/{lane}.txt the work of {lane}\nreport-ok E1 E2\n",
        json!({}),
    );
    let (first, second) = (m.units[0].clone(), m.units[1].clone());
    let out = m
        .iced(m.a(), NOW, None, &["build", &first])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let out = run(&mut m.iced(&m.b, NOW, None, &["drain"]));
    assert_eq!(out.code, 0, "{out:#?}");
    let summary = last_line(&out);
    assert_eq!(summary["stopped"], "empty", "{summary:#}");
    let delivered: Vec<&str> = summary["delivered"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| str_of(d, "unit"))
        .collect();
    assert_eq!(delivered, [second.as_str()], "{summary:#}");
    let skipped = summary["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 1, "{summary:#}");
    assert_eq!(skipped[0]["unit"], first.as_str());
    assert_eq!(skipped[0]["code"], "unit-done-on-remote");
    let starts = m.env.agent_starts();
    assert_eq!(
        starts
            .iter()
            .filter(|s| s.contains(&format!("lane={first} ")))
            .count(),
        1,
        "{starts:#?}"
    );
}

/// A claim ref whose commit does not hold a claim is refused, naming the ref and how to delete
/// it; iced never replaces what it cannot read.
#[test]
fn a_claim_ref_iced_cannot_read_is_refused_and_left_alone() {
    let m = Machines::new(1, "hang\n", json!({}));
    let unit = m.units[0].clone();
    let (reference, head) = m.push_unreadable_claim(&unit);
    let refused = m
        .env
        .iced_json(&["build", &unit])
        .refused(3, "unit-claimed");
    assert!(
        str_of(&refused, "reason").contains("is not a claim iced can read"),
        "{refused}"
    );
    assert!(
        str_of(&refused, "remedy").contains(&format!("git push origin :{reference}")),
        "{refused}"
    );
    assert_eq!(m.remote_git(&["rev-parse", &reference]).trim(), head.trim());
    assert!(m.runs(m.a()).is_empty());
}

/// `build next` on one machine while another builds the first unit of the queue: the unit claimed
/// on the remote is passed over (skipped, `unit-claimed`, naming the machine's claim) and the next
/// one is built, as a drain does; never a refusal while another unit is ready.
#[test]
fn build_next_passes_over_a_unit_another_machine_is_building() {
    let m = Machines::new(2, "hang\n", json!({}));
    let (first, second) = (m.units[0].clone(), m.units[1].clone());
    let other = run(&mut m.iced(&m.b, NOW, None, &["build", &first, "--no-wait"]));
    assert_eq!(other.code, 0, "{other:#?}");
    assert!(m.remote_claim(&first).is_some());
    let out = build_next_skipping(&m, (&first, "on the remote `origin`"), &second);
    let runs = m.runs(m.a());
    assert_eq!(runs.len(), 1, "{out:#?}");
    let state: Value =
        serde_json::from_slice(&std::fs::read(m.a().join(".iced/run/state.json")).unwrap())
            .unwrap();
    assert_eq!(state["runs"][&runs[0]]["unit"], second.as_str());
    for (dir, run) in [(m.a(), runs[0].clone())]
        .into_iter()
        .chain(m.runs(&m.b).into_iter().map(|r| (m.b.as_path(), r)))
    {
        abandon(&m, dir, &run);
    }
}

/// A claim ref on the readiest unit that iced cannot read: `build next` leaves it alone, names it
/// in the skipped, and builds the next unit.
#[test]
fn build_next_passes_over_a_claim_ref_it_cannot_read() {
    let m = Machines::new(2, "hang\n", json!({}));
    let (first, second) = (m.units[0].clone(), m.units[1].clone());
    let (reference, head) = m.push_unreadable_claim(&first);
    build_next_skipping(&m, (&first, "is not a claim iced can read"), &second);
    assert_eq!(m.remote_git(&["rev-parse", &reference]).trim(), head.trim());
    for run in m.runs(m.a()) {
        abandon(&m, m.a(), &run);
    }
}

/// `iced build next --no-wait` on machine A: it succeeds, says it skipped `first` as
/// `unit-claimed` for a reason holding `why`, and builds `second`.
fn build_next_skipping(m: &Machines, (first, why): (&str, &str), second: &str) -> Run {
    let out =
        run(m
            .env
            .command_in(m.a())
            .env("ICED_NOW", NOW)
            .args(["build", "next", "--no-wait"]));
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(
        out.stderr
            .lines()
            .any(|l| l.starts_with(&format!("skipped {first}: unit-claimed: ")) && l.contains(why)),
        "{out:#?}"
    );
    assert!(out.stderr.contains(&format!("next: {second}")), "{out:#?}");
    out
}

/// The readiest unit is a project one of whose children another machine is building: its run
/// would claim that child too, so `build next` passes the project over, naming the child, and
/// builds the next free unit (without the children's claims read, the project was picked and its
/// admit refused `unit-claimed`, with other units ready).
#[test]
fn build_next_passes_over_a_project_whose_child_another_machine_is_building() {
    let p = crate::project::Project::new(&["alpha", "beta"], &[], "hang\n", json!({}));
    let env = &p.env;
    let (alpha, beta) = (p.children[0].clone(), p.children[1].clone());
    let b = other_machine(env, &env.outside("remote.git"));
    let other = run(env
        .command_in(&b)
        .args(["build", &beta, "--no-wait", "--json"]));
    assert_eq!(other.code, 0, "{other:#?}");
    let run_b = crate::loop_e2e::str_of(&last_line(&other), "run").to_owned();

    let out = run(env.command().args(["build", "next", "--no-wait"]));
    assert_eq!(out.code, 0, "{out:#?}");
    let skipped = out
        .stderr
        .lines()
        .find(|l| l.starts_with(&format!("skipped {}: unit-claimed: ", p.id)))
        .unwrap_or_else(|| panic!("the project is not skipped: {out:#?}"));
    assert!(
        skipped.contains(&format!(
            "`{beta}` is claimed on the remote `origin` by run `{run_b}`"
        )),
        "{skipped}"
    );
    assert!(out.stderr.contains(&format!("next: {alpha}")), "{out:#?}");
    let state: Value =
        serde_json::from_slice(&std::fs::read(env.path(".iced/run/state.json")).unwrap()).unwrap();
    let runs: Vec<&Value> = state["runs"].as_object().unwrap().values().collect();
    assert_eq!(runs.len(), 1, "{state:#}");
    assert_eq!(runs[0]["unit"], alpha.as_str());
    env.iced_json(&["run", "abandon", runs[0]["id"].as_str().unwrap()])
        .ok();
    env.iced_json_in(&b, &["run", "abandon", &run_b]).ok();
}
