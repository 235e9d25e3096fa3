//! The crash suite (SPEC 20-21): `iced` killed with SIGKILL at every failpoint, at random
//! moments, and while a git it started is still running, must resume the same run to delivery
//! without doing a side effect twice: one agent per (role, lens, attempt) (a further attempt only
//! when the kill fell between recording a launch and its supervisor registering), each
//! definition-of-done command once per verified attempt, one delivery commit, a clean worktree,
//! no validator sandbox left, a released claim, a state file that parses strictly with no step
//! left `started`, and a history with each archived record once. Plus sixteen `implement step`
//! callers at once on one run.
//!
//! The landing's failpoints (SPEC 23) are walked on cases that land (`Setup::landing`): `merge`
//! into the local `main` checked out in the person's checkout, the same pushed to a bare `origin`,
//! or a pull request through `origin` and fixtures/fake-forge (with `land.pr.find`). A landed case
//! must end out of the state with its record, its lane retired, and the target holding the lane's
//! work exactly once: one landing merge on `main` whose parents are the old `main` and the delivery
//! (and `origin`'s `main` the same), or one pull request opened, armed, and never pushed to again.
//!
//! Every case works in a fresh repository holding one approved, committed unit (E1, E2), either
//! with `verify.independent: false`, or validated (`Setup::validated`): one lens, `full`, whose
//! validator finds an S2 on attempt 1 that the refuter confirms, so the run crosses the validate,
//! refute and fix stages and delivers after attempt 2. The fake agent (fixtures/fake-agent) plays
//! every role; it and the definition-of-done commands append a line to logs outside the
//! repository, so the test can count what really ran: no agent may start twice for one (role,
//! lens, attempt).
//!
//! `ICED_CRASH_ITERATIONS` (default 24) and `ICED_CRASH_MAX_DELAY_MS` tune the random kills; a
//! failed case copies what it left to `$TMPDIR/iced-crash-kept/`.

use crate::env::TestEnv;
use iced::run::state::{State, StepStatus};
use serde_json::{json, Value};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

mod case;
mod checks;
mod claims_remote;
mod drain;
mod ended;
mod escalation;
mod land_stash;
mod memory;
mod relaunch;
mod remote;
mod reuse;
mod review;
mod tester;
mod walks;

pub(crate) use walks::Rng;

const FAKE_AGENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/fake-agent");
const FAKE_FORGE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/fake-forge");
const FAKE_GH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/fake-gh-pr");
/// A fast agent: one commit, a report with evidence for both expectations.
const QUICK_AGENT: &str = "commit src/session.txt refreshed on activity\nreport-ok E1 E2\n";
/// The agent of the concurrency test: slow enough that many callers find it running.
const SLOW_AGENT: &str =
    "sleep 0.3\ncommit src/session.txt refreshed on activity\nreport-ok E1 E2\n";
/// The validated setup's agent, every role (`{lane}` is the lane's id): the implementer commits and
/// disposes of every finding its brief lists; the validator finds an S2 on attempt 1 and passes
/// later; the refuter confirms it. Attempt 3 is reached only when an implementer launch crashed.
const VALIDATED_AGENT: &str = r#"role implementer
attempt 1
commit src/session.txt refreshed on activity
attempt 2
commit src/idle.txt idle sessions end
attempt 3
commit src/late.txt idle sessions end, late
attempt *
report-fix * E1 E2
role validator
attempt 1
report {"verdict": "fail", "expectations": [{"id": "E1", "result": "pass"}, {"id": "E2", "result": "pass"}], "findings": [{"file_path": "src/session.txt", "criterion_ref": "E2", "finding_category": "correctness", "severity": "S2-major", "summary": "idle sessions never end", "failure_scenario": {"inputs": "an idle session", "expected": "it ends after 30 minutes", "actual": "it never ends"}}]}
attempt 2
report {"verdict": "pass", "expectations": [{"id": "E1", "result": "pass"}, {"id": "E2", "result": "pass"}]}
attempt 3
report {"verdict": "pass", "expectations": [{"id": "E1", "result": "pass"}, {"id": "E2", "result": "pass"}]}
attempt *
role refuter
report {"findings": [{"finding_id": "{lane}-F1", "decision": "confirmed", "reason": "reproduced", "failure_scenario": {"inputs": "an idle session", "expected": "it ends after 30 minutes", "actual": "it never ends"}}]}
"#;
const SIGKILL: i32 = 9;
/// No single `iced` call of this suite should take anywhere near this long.
const CALL_LIMIT: Duration = Duration::from_secs(60);

#[derive(Clone, Copy, PartialEq, Debug)]
enum Driver {
    Process,
    Host,
}

/// How a delivered lane lands (SPEC 23.2).
#[derive(Clone, Copy, PartialEq, Debug)]
enum Land {
    /// `land.mode: none`: delivered on the lane branch, which stays.
    None,
    /// `merge` with strategy `merge` into the local `main`, checked out in the person's checkout.
    Merge,
    /// ... and pushed to `origin` (a bare repository beside the checkout).
    MergeRemote,
    /// `pr` through `origin` and `fixtures/fake-forge` (with `land.pr.find`), armed; the test
    /// plays the forge merging it once armed.
    Pr,
    /// `pr` as shipped: no `land.pr` in the config, so iced runs `gh` (SPEC 23.2), here
    /// `fixtures/fake-gh-pr` on PATH, which refuses a second `pr create` for a branch as gh does.
    PrGh,
}

/// How a case's repository is configured.
#[derive(Clone, Copy)]
struct Setup {
    driver: Driver,
    /// How many definition-of-done entries (each one command appending to its own log).
    dod: usize,
    agent: &'static str,
    /// Independent validation (one lens, `full`; [`VALIDATED_AGENT`]), not the loop's own checks
    /// alone.
    validated: bool,
    land: Land,
}

impl Setup {
    fn process(dod: usize) -> Setup {
        Setup {
            driver: Driver::Process,
            dod,
            agent: QUICK_AGENT,
            validated: false,
            land: Land::None,
        }
    }

    fn landing(self, land: Land) -> Setup {
        Setup { land, ..self }
    }

    fn validated(self) -> Setup {
        Setup {
            agent: VALIDATED_AGENT,
            validated: true,
            ..self
        }
    }
}

/// Without the agent's script, which is long and tells nothing a failure needs.
impl std::fmt::Debug for Setup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Setup")
            .field("driver", &self.driver)
            .field("dod", &self.dod)
            .field("validated", &self.validated)
            .field("land", &self.land)
            .finish()
    }
}

/// One logged start of the fake agent.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Start {
    role: String,
    lens: String,
    attempt: u32,
}

/// One finished call of `iced`.
struct Call {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl Call {
    fn killed(&self) -> bool {
        self.status.signal() == Some(SIGKILL)
    }

    fn last_json(&self) -> Value {
        let line = self.stdout.lines().last().unwrap_or("");
        serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: not JSON: {}", self.describe()))
    }

    fn describe(&self) -> String {
        format!(
            "status {:?} (signal {:?})\nstdout:\n{}\nstderr:\n{}",
            self.status.code(),
            self.status.signal(),
            self.stdout,
            self.stderr
        )
    }
}

/// A repository ready to build, and the logs outside it.
struct Case {
    env: TestEnv,
    id: String,
    setup: Setup,
    /// `<tmp>/crash`: the agent's script and log, the definition-of-done logs, captured output.
    out: PathBuf,
    calls: AtomicUsize,
    /// `PATH` for every `iced` call (and so for what it starts), when not the test's own.
    path: Option<std::ffi::OsString>,
    /// `main` once the case is set up: what landing starts from.
    base: String,
}

fn wait_for(child: &mut Child, limit: Duration, what: &str) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn collect(status: ExitStatus, stdout: &Path, stderr: &Path) -> Call {
    Call {
        status,
        stdout: std::fs::read_to_string(stdout).unwrap_or_default(),
        stderr: std::fs::read_to_string(stderr).unwrap_or_default(),
    }
}

/// Run `f` on every item, `workers` at a time, and fail once with every item's failure.
fn each_in_parallel<T: Sync + std::fmt::Debug>(
    what: &str,
    items: &[T],
    workers: usize,
    f: impl Fn(&T) + Sync,
) {
    let next = AtomicUsize::new(0);
    let failures = std::sync::Mutex::new(Vec::new());
    let started = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(item) = items.get(i) else { break };
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(item)));
                if let Err(payload) = result {
                    let message = payload
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                        .unwrap_or_else(|| "a panic without a message".into());
                    failures
                        .lock()
                        .unwrap()
                        .push(format!("{item:?}: {message}"));
                }
            });
        }
    });
    eprintln!(
        "{what}: {} cases in {:.1} s",
        items.len(),
        started.elapsed().as_secs_f64()
    );
    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "{what}: {} of {} cases failed:\n\n{}",
        failures.len(),
        items.len(),
        failures.join("\n\n")
    );
}
