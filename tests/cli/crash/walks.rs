//! The walks: every failpoint under each driver, random kills, kills inside a running git.

use super::*;

/// One way of reaching a failpoint: `ICED_FAILPOINT=<spec>` under `setup`, armed (in the
/// `implement step` cases) only while the lane is at `stage`.
#[derive(Debug, Clone)]
struct Variant {
    name: &'static str,
    spec: String,
    setup: Setup,
    stage: Option<&'static str>,
}

impl Variant {
    fn new(name: &'static str, spec: &str, setup: Setup) -> Variant {
        Variant {
            name,
            spec: spec.to_owned(),
            setup,
            stage: None,
        }
    }

    /// Killed between recording an implementer launch and its supervisor registering (before
    /// the launch, or after the spawn and before the launcher recorded the supervisor): the SPEC
    /// makes that a crashed attempt, retried as the next one.
    fn retry_allowed(&self) -> bool {
        matches!(self.name, "launch-after-record" | "activity-after-spawn")
    }
}

/// Every failpoint, each with the ways of reaching it that differ in what must be recovered.
fn variants(driver: Driver) -> Vec<Variant> {
    let setup = |dod| Setup {
        driver,
        dod,
        agent: QUICK_AGENT,
        validated: false,
        land: Land::None,
    };
    let mut out = Vec::new();
    for &name in iced::failpoint::ALL {
        // The landing's: reached only when the lane lands (`merge`, locally and through a remote;
        // or by pull request, found again with `land.pr.find` after the kill).
        let lands: &[Land] = match name {
            "land-after-attributes"
            | "land-after-integrate"
            | "land-after-commit"
            | "land-after-move"
            | "retire-after-remove" => &[Land::Merge, Land::MergeRemote],
            "land-after-fetch" => &[Land::MergeRemote],
            "push-after-push" | "pr-after-open" | "pr-after-arm" => &[Land::Pr, Land::PrGh],
            _ => &[],
        };
        if !lands.is_empty() {
            for &land in lands {
                out.push(Variant::new(name, name, setup(1).landing(land)));
            }
            continue;
        }
        if name.starts_with("validator-") {
            // Reached only with validators: the first is attempt 1's validator, the second the
            // refuter (in one `build`), the third attempt 2's validator, after the fix round.
            let validated = setup(1).validated();
            out.push(Variant::new(name, name, validated));
            out.push(Variant::new(name, &format!("{name}:2"), validated));
            out.push(Variant::new(name, &format!("{name}:3"), validated));
            out.push(Variant {
                stage: Some("refute"),
                ..Variant::new(name, name, validated)
            });
            continue;
        }
        if ELSEWHERE.iter().any(|(n, _)| *n == name) {
            continue;
        }
        if name == "archive-after-append" {
            // Reached first when a confirmed finding starts the fix round.
            out.push(Variant::new(name, name, setup(1).validated()));
            continue;
        }
        out.push(Variant::new(name, name, setup(1)));
        // Every other failpoint again, on a run that crosses the validate and fix stages.
        out.push(Variant::new(name, name, setup(1).validated()));
        match name {
            // The second outcome observed is a definition-of-done command's (the first is the
            // implementer's under the process driver).
            "observe-before-record" if driver == Driver::Process => {
                out.push(Variant::new(name, &format!("{name}:2"), setup(1)));
                out.push(Variant {
                    stage: Some("receipt"),
                    ..Variant::new(name, name, setup(1))
                });
            }
            // Two commands: killed after launching the first, so the second was recorded as
            // started but never launched; and killed after launching both.
            "dod-after-launch" => {
                out.push(Variant::new(name, name, setup(2)));
                out.push(Variant::new(name, &format!("{name}:2"), setup(2)));
            }
            // The end of a landed run too: the run has left the state for its record when the
            // next call finds its claim.
            "end-before-release" => {
                out.push(Variant::new(name, name, setup(1).landing(Land::Merge)))
            }
            _ => {}
        }
    }
    out
}

/// Failpoints no `iced build` or `implement step` of this suite reaches, and the test file that
/// kills there (with `ICED_FAILPOINT`) and checks what the replay did.
const ELSEWHERE: &[(&str, &str)] = &[
    // `iced run discard`.
    ("discard-before-release", "project.rs"),
    // A project run's lane that ended, written to its `lane.json` (a case of one lane keeps it).
    ("ended-after-write", "crash/ended.rs"),
    // A harness runner's answer, kept before it is recorded.
    ("answer-after-write", "harness.rs"),
    // A harness session's transcript, copied before it is recorded.
    ("transcript-after-copy", "harness.rs"),
    // A run that ends without delivering what it measured.
    ("end-after-metrics", "metrics.rs"),
    // `iced run abandon`.
    ("abandon-before-stop", "survivors.rs"),
    // An implementer's supervisor (it inherits `ICED_FAILPOINT` from the call that launched it).
    ("supervisor-before-record", "supervisor_kill.rs"),
    ("supervisor-before-ready", "supervisor_kill.rs"),
    ("supervisor-after-gate", "supervisor_kill.rs"),
    ("supervisor-after-spawn", "supervisor_kill.rs"),
    ("supervisor-before-outcome", "supervisor_kill.rs"),
    // `iced escalation apply|reject` and `iced answer`.
    ("escalation-after-decision", "crash/escalation.rs"),
    ("escalation-after-unit", "crash/escalation.rs"),
    // A landing that restores the unit an escalation verb left uncommitted (SPEC 23.2).
    ("land-after-restore", "crash/escalation.rs"),
    // A retire that puts back what an escalation verb left, once its pull request landed (SPEC 23.3).
    ("retire-after-restore", "escalation_pr.rs"),
    // A remote lane's branch deleted on the remote at retire (SPEC 20.19).
    ("retire-after-unpublish", "remote_lanes.rs"),
    // A landing's merge into the lane that a killed call left half done, stashed (SPEC 23.2).
    ("land-after-stash", "crash/land_stash.rs"),
    // Claims on the remote (SPEC 24.9.1): a claim pushed or taken over and its run not recorded,
    // a run's end saved and its claim on the remote not deleted.
    ("remote-claim-after-push", "crash/claims_remote.rs"),
    ("remote-claim-after-takeover", "crash/claims_remote.rs"),
    ("remote-claim-before-release", "crash/claims_remote.rs"),
    // A run's claims renewed on the remote, the renewal not recorded.
    ("claims-after-renew", "crash/claims_remote.rs"),
    // A git lock a lane's unfinished git left, removed and not yet logged (SPEC 24.6).
    ("git-lock-after-remove", "git_locks.rs"),
    // `iced drain`, between two units.
    ("drain-between-units", "crash/drain.rs"),
    // `iced memory draft`.
    ("memory-after-gitignore", "crash/memory.rs"),
    ("memory-after-record", "crash/memory.rs"),
    ("memory-after-worktree", "crash/memory.rs"),
    ("memory-after-launch", "crash/memory.rs"),
    ("memory-after-remove", "crash/memory.rs"),
    // `iced build --auto-plan`'s planning steps (SPEC 20.16).
    ("plan-launch-after-record", "crash_plan.rs"),
    ("plan-launch-after-spawn", "crash_plan.rs"),
    ("plan-check-before-record", "crash_plan.rs"),
    ("plan-decide-after-write", "crash_plan.rs"),
    ("plan-decide-after-approve", "crash_plan.rs"),
    ("plan-decide-after-commit", "crash_plan.rs"),
    // A lane's test writer and the check of what it changed (SPEC 20.17).
    ("tester-after-record", "crash/tester.rs"),
    ("tester-after-spawn", "crash/tester.rs"),
    ("tester-check-after-record", "crash/tester.rs"),
    // Moving aside a lane branch an earlier run left (SPEC 20.4).
    ("worktree-after-move-worktree", "stale_branch.rs"),
    ("worktree-after-move-aside", "stale_branch.rs"),
    // A spare worktree a later lane of a project run takes (SPEC 23.2).
    ("worktree-reuse-after-switch", "crash/reuse.rs"),
    ("worktree-reuse-after-move", "crash/reuse.rs"),
    // A remote lane's branch published, and what its agent pushed fetched (SPEC 20.19).
    ("remote-after-push", "crash/remote.rs"),
    ("receipt-after-fetch", "crash/remote.rs"),
];

/// Every failpoint is reached by a test (issue 15): walked here, or killed at by the test file
/// [`ELSEWHERE`] names, which sets `ICED_FAILPOINT` to it (by hand or through
/// `TestEnv::killed_at`). Prints reached / defined.
#[test]
fn every_failpoint_is_reached_by_a_test() {
    let walked: std::collections::BTreeSet<&str> = variants(Driver::Process)
        .into_iter()
        .chain(variants(Driver::Host))
        .map(|v| v.name)
        .collect();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cli");
    let mut unreached = Vec::new();
    for &name in iced::failpoint::ALL {
        if walked.contains(name) {
            continue;
        }
        // Set by hand, or through `TestEnv::killed_at(args, failpoint)`.
        let kills_there = ELSEWHERE.iter().any(|(n, file)| {
            let text = std::fs::read_to_string(dir.join(file)).unwrap_or_default();
            *n == name
                && (text.contains(&format!("\"ICED_FAILPOINT\", \"{name}\""))
                    || text.lines().any(|l| {
                        l.contains(".killed_at(") && l.contains(&format!("], \"{name}\")"))
                    }))
        });
        if !kills_there {
            unreached.push(name);
        }
    }
    let defined = iced::failpoint::ALL.len();
    eprintln!(
        "failpoints reached: {} of {defined}",
        defined - unreached.len()
    );
    assert!(unreached.is_empty(), "no test kills at {unreached:?}");
}

#[test]
fn the_failpoint_list_is_the_one_this_suite_was_written_for() {
    // A new failpoint is walked by the tests below automatically; this list only makes a
    // rename visible in review.
    assert_eq!(
        iced::failpoint::ALL,
        [
            "admit-after-gitignore",
            "remote-claim-after-push",
            "remote-claim-after-takeover",
            "rules-after-write",
            "admit-after-claim",
            "admit-after-state",
            "brief-after-write",
            "worktree-after-move-worktree",
            "worktree-after-move-aside",
            "worktree-reuse-after-switch",
            "worktree-reuse-after-move",
            "worktree-after-add",
            "launch-after-record",
            "launch-after-spawn",
            "activity-after-spawn",
            "observe-before-record",
            "take-back-after-copy",
            "take-back-after-ref",
            "git-lock-after-remove",
            "receipt-after-record",
            "remote-after-push",
            "receipt-after-fetch",
            "dod-after-launch",
            "validator-after-prepare",
            "validator-after-record",
            "validator-after-launch",
            "validator-after-check",
            "validator-after-remove",
            "archive-after-append",
            "ended-after-write",
            "deliver-after-prepare",
            "deliver-after-commit",
            "deliver-after-record",
            "end-after-metrics",
            "end-before-release",
            "remote-claim-before-release",
            "claims-after-renew",
            "land-after-fetch",
            "land-after-attributes",
            "land-after-stash",
            "land-after-integrate",
            "land-after-commit",
            "land-after-restore",
            "land-after-move",
            "push-after-push",
            "pr-after-open",
            "pr-after-arm",
            "retire-after-remove",
            "retire-after-restore",
            "retire-after-unpublish",
            "discard-before-release",
            "abandon-before-stop",
            "answer-after-write",
            "transcript-after-copy",
            "supervisor-before-record",
            "supervisor-before-ready",
            "supervisor-after-gate",
            "supervisor-after-spawn",
            "supervisor-before-outcome",
            "escalation-after-decision",
            "escalation-after-unit",
            "drain-between-units",
            "memory-after-gitignore",
            "memory-after-record",
            "memory-after-worktree",
            "memory-after-launch",
            "memory-after-remove",
            "plan-launch-after-record",
            "plan-launch-after-spawn",
            "plan-check-before-record",
            "plan-decide-after-write",
            "plan-decide-after-approve",
            "plan-decide-after-commit",
            "tester-after-record",
            "tester-after-spawn",
            "tester-check-after-record",
        ]
    );
}

/// `iced build` killed at each failpoint, then `iced build` again to delivery.
#[test]
fn build_killed_at_every_failpoint_resumes_to_one_delivery() {
    let cases: Vec<Variant> = variants(Driver::Process)
        .into_iter()
        .filter(|v| v.stage.is_none())
        .collect();
    each_in_parallel("build at each failpoint", &cases, 3, |v| {
        let case = Case::new(v.setup);
        let context = format!(
            "`iced build` with ICED_FAILPOINT={} ({} dod)",
            v.spec, v.setup.dod
        );
        let call = case.build(Some(&v.spec));
        assert!(
            call.killed(),
            "{context}: failpoint not reached: `iced build` was not killed by SIGKILL: {}",
            call.describe()
        );
        case.build_to_delivery(&context);
        case.assert_finished(&context, v.retry_allowed());
    });
}

/// The `land.pr` iced ships (SPEC 23.2), with a `gh` on PATH that refuses a second `pr create`
/// for a branch as gh does: `iced build` killed right after each side effect of a pull request's
/// landing (the push, the open, the arm) resumes to one pull request, opened once and armed once,
/// never blocked (issue 36: with no shipped `find`, the resumed build ran `gh pr create` again,
/// which gh refuses, and the lane blocked). A subset of the walk above, to run on its own.
#[test]
fn the_shipped_pull_request_commands_recover_a_kill_at_each_landing_step() {
    let cases: Vec<Variant> = ["push-after-push", "pr-after-open", "pr-after-arm"]
        .into_iter()
        .map(|name| Variant::new(name, name, Setup::process(1).landing(Land::PrGh)))
        .collect();
    each_in_parallel(
        "the shipped land.pr at each landing failpoint",
        &cases,
        3,
        |v| {
            let case = Case::new(v.setup);
            let context = format!(
                "`iced build` with ICED_FAILPOINT={} and gh as shipped",
                v.spec
            );
            let call = case.build(Some(&v.spec));
            assert!(call.killed(), "{context}: not killed: {}", call.describe());
            case.build_to_delivery(&context);
            case.assert_finished(&context, v.retry_allowed());
        },
    );
}

/// `iced implement step` killed at each failpoint it can reach (all but admit's), on a run
/// created without any step (its `build` killed right after the run was recorded).
fn implement_step_killed_at_every_failpoint(driver: Driver) {
    let unreachable: &[&str] = match driver {
        // `implement step` never admits.
        Driver::Process => &[
            "admit-after-gitignore",
            "rules-after-write",
            "admit-after-claim",
            "admit-after-state",
        ],
        // ... and under the host driver never launches an implementer or a validator.
        Driver::Host => &[
            "admit-after-gitignore",
            "rules-after-write",
            "admit-after-claim",
            "admit-after-state",
            "launch-after-record",
            "launch-after-spawn",
            "validator-after-record",
            "validator-after-launch",
            // A host's agent is not confined and has no git of its own to take back.
            "take-back-after-copy",
            "take-back-after-ref",
        ],
    };
    // One `implement step` observes each finished activity once, and prepares, launches or
    // checks the validators of one stage: the n-th hit of observe-before-record or of a
    // validator failpoint is not reached within one call (their stage-armed variants are).
    let cases: Vec<Variant> = variants(driver)
        .into_iter()
        .filter(|v| !unreachable.contains(&v.name))
        .filter(|v| {
            !(v.spec.starts_with("observe-before-record:") || v.spec.starts_with("validator-"))
                || !v.spec.contains(':')
        })
        .collect();
    each_in_parallel(
        &format!("implement step ({driver:?} driver) at each failpoint"),
        &cases,
        3,
        |v| {
            let case = Case::new(v.setup);
            let created = case.build(Some("admit-after-state"));
            assert!(
                created.killed(),
                "admit-after-state not reached: {}",
                created.describe()
            );
            let context = format!(
                "`iced implement step` ({driver:?} driver) with ICED_FAILPOINT={} armed at stage {:?} ({} dod)",
                v.spec, v.stage, v.setup.dod
            );
            let killed = case.drive_steps(&context, Some((&v.spec, v.stage)));
            assert!(
                killed,
                "{context}: failpoint not reached: no `implement step` call was killed"
            );
            case.assert_finished(&context, v.retry_allowed());
        },
    );
}

#[test]
fn implement_step_killed_at_every_failpoint_process_driver() {
    implement_step_killed_at_every_failpoint(Driver::Process);
}

#[test]
fn implement_step_killed_at_every_failpoint_host_driver() {
    implement_step_killed_at_every_failpoint(Driver::Host);
}

/// xorshift64*: a small deterministic generator, seeded per iteration.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// `iced build` killed after a random delay, then run again to delivery: 24 times (or
/// `ICED_CRASH_ITERATIONS`), each in a fresh repository. The delays spread over how long an
/// uninterrupted build takes here (measured first), so the kills land in every stage; a build
/// that finished before its kill is fine (it is then simply checked). `ICED_CRASH_MAX_DELAY_MS`
/// narrows the window, to hunt a failure in one stage.
#[test]
fn build_killed_at_random_moments_resumes_to_one_delivery() {
    let iterations: u64 = std::env::var("ICED_CRASH_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24);
    // A seed builds a plain unit, a validated one (validate, refute and fix stages included), one
    // landed by pull request through the fake forge (push, open, arm, retire), or one landed by
    // pull request with the `land.pr` iced ships, through the `gh` stand-in, in turn.
    let setups = [
        Setup::process(1),
        Setup::process(1).validated(),
        Setup::process(1).landing(Land::Pr),
        Setup::process(1).landing(Land::PrGh),
    ];
    let max_delays: Vec<u64> = setups
        .iter()
        .map(|&setup| {
            let calibration = Case::new(setup);
            let started = Instant::now();
            let call = calibration.build(None);
            let full = started.elapsed();
            assert!(
                call.status.success(),
                "an uninterrupted build: {}",
                call.describe()
            );
            calibration.build_to_delivery("an uninterrupted build");
            calibration.assert_finished("an uninterrupted build", false);
            let max_delay = std::env::var("ICED_CRASH_MAX_DELAY_MS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(full.as_millis() as u64);
            eprintln!(
                "an uninterrupted build (validated: {}) takes {} ms; kills fall in 0..={max_delay} ms",
                setup.validated,
                full.as_millis()
            );
            max_delay
        })
        .collect();
    let seeds: Vec<u64> = (1..=iterations).map(|i| 0xC0FFEE + i).collect();
    // Where each kill landed (the last step the killed build reported), counted after the walk.
    let landed: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    each_in_parallel("random kills", &seeds, 3, |&seed| {
        let which = (seed % setups.len() as u64) as usize;
        let delay = Rng::new(seed).next() % (max_delays[which] + 1);
        let case = Case::new(setups[which]);
        let (mut child, stdout, stderr) = case.spawn(&["build", &case.id, "--json"], None);
        std::thread::sleep(Duration::from_millis(delay));
        let _ = child.kill();
        let status = wait_for(&mut child, CALL_LIMIT, "the killed build");
        let first = collect(status, &stdout, &stderr);
        let at = first
            .stdout
            .lines()
            .last()
            .and_then(|l| serde_json::from_str::<Value>(l).ok())
            .map_or("before any step".to_owned(), |v| {
                format!("{} {}", v["stage"], v["action"]).replace('"', "")
            });
        eprintln!(
            "seed {seed:#x} (validated: {}, land: {:?}): {} after {delay} ms, last report: {at}",
            setups[which].validated,
            setups[which].land,
            if first.killed() {
                "killed"
            } else {
                "had already exited"
            }
        );
        if first.killed() {
            landed.lock().unwrap().push(at.clone());
        }
        let context = format!(
            "seed {seed:#x} (validated: {}, land: {:?}), killed after {delay} ms, last report {at}",
            setups[which].validated, setups[which].land
        );
        case.build_to_delivery(&context);
        case.assert_finished(&context, true);
    });
    // A walk that killed nothing proves nothing. How many builds a kill reaches depends on how
    // the calibration's load compares with the walk's (9 to 23 of 24 seen), so only a walk
    // with no kill at all fails; the count and the places are printed.
    let landed = landed.into_inner().unwrap();
    let places: std::collections::BTreeSet<&String> = landed.iter().collect();
    eprintln!(
        "random kills: {} of {iterations} builds killed, at {} places: {places:?}",
        landed.len(),
        places.len()
    );
    assert!(!landed.is_empty(), "none of {iterations} builds was killed");
}

/// `iced build` killed while a git it started runs: that git outlives it and finishes later,
/// while the next `iced build` does the same step. A `git` first on PATH logs each start and end
/// of a command holding `verb` and waits 0.4 s before running it; the build is killed once the
/// lane is at `stage` and such a git has started and not ended, so the kill lands inside that git
/// (checked, never timed), and the check waits until every such git has ended.
/// Then the run must still deliver once, with a clean worktree.
fn killed_while_its_git_runs(setup: Setup, stage: &str, verb: &str) {
    let mut case = Case::new(setup);
    let real_git = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join("git"))
        .find(|p| p.is_file())
        .expect("git on PATH");
    let bin = case.out.join("slow-git");
    std::fs::create_dir_all(&bin).unwrap();
    let (started, ended) = (case.out.join("git-started"), case.out.join("git-ended"));
    let wrapper = bin.join("git");
    crate::env::write_executable(
        &wrapper,
        &format!(
            "#!/bin/sh\ncase \" $* \" in *' {verb} '*)\n  echo $$ >> '{started}'\n  sleep 0.4\n  '{git}' \"$@\"\n  rc=$?\n  echo $$ >> '{ended}'\n  exit $rc;;\nesac\nexec '{git}' \"$@\"\n",
            started = started.display(),
            ended = ended.display(),
            git = real_git.display()
        ),
    );
    let mut path = std::ffi::OsString::from(&bin);
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());
    case.path = Some(path);
    let count = |file: &Path| {
        std::fs::read_to_string(file)
            .unwrap_or_default()
            .lines()
            .count()
    };
    let running = || count(&started) > count(&ended);

    let context = format!("killed during the {stage} step's git {verb}");
    let (mut child, stdout, stderr) = case.spawn(&["build", &case.id, "--json"], None);
    let give_up = Instant::now() + Duration::from_secs(30);
    while !(case.stage().as_deref() == Some(stage) && running()) {
        assert!(
            Instant::now() < give_up,
            "{context}: the build never ran it"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "{context}: the build ended before it"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().unwrap();
    assert!(running(), "{context}: the git ended before the kill");
    let first = collect(
        wait_for(&mut child, CALL_LIMIT, "the killed build"),
        &stdout,
        &stderr,
    );
    assert!(first.killed(), "{context}: {}", first.describe());
    case.build_to_delivery(&context);
    // The orphaned git (and any other) has ended before anything is counted.
    let give_up = Instant::now() + Duration::from_secs(30);
    while running() {
        assert!(Instant::now() < give_up, "{context}: a git never ended");
        std::thread::sleep(Duration::from_millis(10));
    }
    case.assert_delivered(&context, false);
}

#[test]
fn build_killed_during_the_worktree_add_delivers_once() {
    killed_while_its_git_runs(Setup::process(1), "worktree", "worktree add");
}

/// The delivery's commit is made with `commit-tree` and the branch moved with `update-ref`: a
/// kill inside each.
#[test]
fn build_killed_during_the_delivery_commit_delivers_once() {
    killed_while_its_git_runs(Setup::process(1), "deliver", "commit-tree");
}

#[test]
fn build_killed_during_the_delivery_ref_update_delivers_once() {
    killed_while_its_git_runs(Setup::process(1), "deliver", "update-ref");
}

/// The `git worktree add` of a validator's sandbox outlives the call that made it, and takes the
/// sandbox's path under the next call's feet.
#[test]
fn build_killed_during_a_sandbox_add_delivers_once() {
    killed_while_its_git_runs(Setup::process(1).validated(), "validate", "worktree add");
}

/// A process-driven run stepped by sixteen `implement step` callers at once, round after round.
#[test]
fn sixteen_concurrent_implement_steps_deliver_once() {
    sixteen_concurrent_implement_steps(Setup {
        driver: Driver::Process,
        dod: 2,
        agent: SLOW_AGENT,
        validated: false,
        land: Land::None,
    });
}

/// ... and one that lands (merge, pushed to a remote): landed and retired once.
#[test]
fn sixteen_concurrent_implement_steps_land_once() {
    sixteen_concurrent_implement_steps(Setup {
        driver: Driver::Process,
        dod: 2,
        agent: SLOW_AGENT,
        validated: false,
        land: Land::MergeRemote,
    });
}

/// ... and a validated one, through its validate, refute and fix stages.
#[test]
fn sixteen_concurrent_implement_steps_deliver_a_validated_run_once() {
    sixteen_concurrent_implement_steps(Setup::process(2).validated());
}

fn sixteen_concurrent_implement_steps(setup: Setup) {
    const CALLERS: usize = 16;
    const MAX_ROUNDS: usize = 40;
    let case = Case::new(setup);
    let created = case.iced(&["build", &case.id, "--no-wait", "--json"], None);
    assert!(
        created.status.success(),
        "build --no-wait: {}",
        created.describe()
    );
    assert_eq!(
        created.last_json()["status"],
        "running",
        "{}",
        created.describe()
    );
    let mut rounds = 0;
    let mut calls = 0;
    let mut failures = Vec::new();
    let mut slowest = Duration::ZERO;
    let started = Instant::now();
    while !case.finished() {
        assert!(
            rounds < MAX_ROUNDS,
            "not delivered after {MAX_ROUNDS} rounds of {CALLERS} callers; state:\n{}",
            case.env.read(".iced/run/state.json")
        );
        rounds += 1;
        let round_started = Instant::now();
        let children: Vec<_> = (0..CALLERS)
            .map(|_| case.spawn(&["implement", "step", "--json"], None))
            .collect();
        for (mut child, stdout, stderr) in children {
            let status = wait_for(&mut child, CALL_LIMIT, "implement step");
            slowest = slowest.max(round_started.elapsed());
            let call = collect(status, &stdout, &stderr);
            calls += 1;
            if !call.status.success() {
                // `state-locked` (exit 3) would mean a caller waited the whole default 10 s for
                // the lock: a failure too.
                failures.push(call.describe());
            } else if call.stdout.len() >= 1024 {
                failures.push(format!("{} bytes: {}", call.stdout.len(), call.stdout));
            }
        }
    }
    eprintln!(
        "{CALLERS} concurrent callers ({setup:?}): delivered after {rounds} rounds ({calls} calls) in {:.1} s; the slowest call ended {} ms after its round started",
        started.elapsed().as_secs_f64(),
        slowest.as_millis()
    );
    assert!(
        failures.is_empty(),
        "{} of {calls} `implement step` calls failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    case.assert_finished(&format!("16 concurrent callers ({setup:?})"), false);
}
