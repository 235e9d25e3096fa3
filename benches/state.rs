//! What reading and writing `.iced/run/state.json` costs a step (issue 16): every transaction
//! loads the whole file and, when it changed anything, saves it whole, so this is paid several
//! times a lane. Timed, on a state of a project run: `State::parse` (the bytes to a state),
//! `State::load` (the same with the file's checks and read) and `State::save` (the file's text,
//! then the atomic write: temp file, fsync, rename, fsync of the directory).
//!
//! The state is a project of 1,000 lanes as the scale benchmark leaves it mid-run: most ended
//! (their short form), some waiting (theirs), 8 at work (whole, with the step records a lane has
//! when it delivers). `ICED_BENCH_STATE=<path>` times a state file of your own instead (a copy of
//! one taken while `scripts/bench-scale.sh` runs, say). The files go to `/dev/shm` when it is
//! there, so the fsyncs cost what a tmpfs makes them cost and the figures show the loop's own
//! work; `ICED_BENCH_DIR` picks another directory (a disk, to see the fsyncs).
//!
//! It asserts only that what is saved reads back as the same state. Environment:
//! `ICED_BENCH_RUNS` (measured calls per figure, default 200). Without `--bench` (`cargo test
//! --benches`) it is a smoke run: a few calls each.

use iced::run::state::{RunPaths, State};
use std::path::PathBuf;
use std::time::{Duration, Instant};

const ENDED: usize = 900;
const WAITING: usize = 92;
const AT_WORK: usize = 8;

fn step(name: &str, status: &str, outcome: &str) -> String {
    format!(
        r#"{{"step": "{name}", "attempt": 1, "status": "{status}", "started_at": "2026-12-02T13:03:43Z",
        "ended_at": "2026-12-02T13:03:44Z", "inputs": "4526428ea3ffc802631779ec9581b4e83d430416cb4b8ef7d7a1b0d3eabc2697",
        "nonce": "974a7a0084a34d48b16c54b9185a44fc", "pid": 9420, "pid_start": 3695511, "outcome": {outcome}}}"#
    )
}

/// A lane that has implemented and passed its receipt, its close being prepared.
fn at_work(id: &str) -> String {
    let root = "/work/bench/repo/.iced/run/run-20261202T130144-8a02bf";
    let steps = [
        step(
            "brief",
            "done",
            &format!(
                r#"{{"path": "{root}/{id}/brief-1.md", "sha256": "4526428ea3ffc802631779ec9581b4e83d430416cb4b8ef7d7a1b0d3eabc2697"}}"#
            ),
        ),
        step(
            "worktree",
            "done",
            &format!(
                r#"{{"path": "/work/bench/repo.iced-worktrees/{id}", "branch": "iced/001-p/{id}"}}"#
            ),
        ),
        step(
            "implement",
            "done",
            r#"{"nonce": "974a7a0084a34d48b16c54b9185a44fc", "exit_code": 0, "signal": null, "timed_out": false,
            "stopped": false, "duration_ms": 233, "stdout": {"bytes": 0, "lines": 0, "truncated": false},
            "stderr": {"bytes": 0, "lines": 0, "truncated": false}, "spawn_error": null, "supervisor_max_rss_kb": 8616}"#,
        ),
        step(
            "receipt",
            "done",
            &format!(
                r#"{{"verified": true, "missing": [], "commands": [], "ahead": 1,
            "head": "657521dc64fbbbeccc0d8d735edde503eb52dc6c", "tree": "af8e609a98e0952184cbeac9e7e705639776d302",
            "guard": [], "report": {{"path": "{root}/{id}/receipt-1.json",
            "sha256": "6a334c5b7a166f7aa3a5cb274585c5e8143ec355c7b6cf1f3880f4ef995c030e"}},
            "handback": null, "escalation": null}}"#
            ),
        ),
        step(
            "deliver",
            "started",
            r#"{"prepared": "ab76de467274aaf1ef58b6d2fd84bdb53cb06033"}"#,
        ),
    ];
    format!(
        r#"{{"id": "{id}", "unit": "{id}", "stage": "deliver", "attempt": 1, "crashes": 0,
        "worktree": "/work/bench/repo.iced-worktrees/{id}", "branch": "iced/001-p/{id}", "reason": null,
        "steps": [{}], "findings": [], "mutations": 0, "validators": [], "land_round": 0,
        "depends": [], "released": false}}"#,
        steps.join(", ")
    )
}

/// A state of a project of `ENDED + WAITING + AT_WORK` lanes, as an earlier release wrote it or
/// as this one does (both read; the file written is this release's).
fn project_state() -> Vec<u8> {
    let mut lanes = Vec::new();
    for i in 0..ENDED + WAITING + AT_WORK {
        let id = format!("{:04}-child-{i}", i + 2);
        lanes.push(if i < ENDED {
            format!(
                r#"{{"id": "{id}", "stage": "delivered", "attempt": 1, "branch": "iced/001-p/{id}",
                "ended": {{"close": "d43209ce1cee21738c09051d44c9e6ad7c4d64da"}}}}"#
            )
        } else if i < ENDED + AT_WORK {
            at_work(&id)
        } else {
            format!(r#"{{"id": "{id}", "stage": "brief", "branch": "iced/001-p/{id}", "waiting": true}}"#)
        });
    }
    format!(
        r#"{{"schema": 1, "runs": {{"run-20261202T130144-8a02bf": {{
        "id": "run-20261202T130144-8a02bf", "unit": "0001-p", "status": "running", "driver": "process",
        "session": null, "created_at": "2026-12-02T13:01:44Z", "updated_at": "2026-12-02T13:03:44Z",
        "base": {{"commit": "15c55d4a0bca5870250d25a63753eaa4ce435238", "branch": "main"}},
        "next_eligible_at": null,
        "pace": {{"lanes": 8, "agents": 2, "backoffSec": 60.0, "backoffMaxSec": 900.0,
            "workMinutes": null, "pauseMinutes": null, "ruling": null}},
        "brief_layout": 4, "lanes": [{}]}}}}}}"#,
        lanes.join(",\n")
    )
    .into_bytes()
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn time(runs: usize, mut f: impl FnMut()) -> Duration {
    for _ in 0..3 {
        f();
    }
    median(
        (0..runs)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed()
            })
            .collect(),
    )
}

fn main() {
    let measuring = std::env::args().any(|a| a == "--bench");
    let runs = match std::env::var("ICED_BENCH_RUNS") {
        Ok(v) => v.trim().parse().expect("ICED_BENCH_RUNS is a whole number"),
        Err(_) if measuring => 200,
        Err(_) => 2,
    };
    let bytes = match std::env::var("ICED_BENCH_STATE") {
        Ok(path) => std::fs::read(&path).unwrap_or_else(|e| panic!("read {path}: {e}")),
        Err(_) => project_state(),
    };
    let base = match std::env::var("ICED_BENCH_DIR") {
        Ok(dir) => PathBuf::from(dir),
        Err(_) if std::path::Path::new("/dev/shm").is_dir() => PathBuf::from("/dev/shm"),
        Err(_) => std::env::temp_dir(),
    };
    let dir = tempfile::tempdir_in(&base).expect("a temporary directory");
    let paths = RunPaths::new(dir.path());
    iced::run::state::ensure_dir(&paths.dir, "bench").expect("the run directory");

    let state = State::parse(&bytes).expect("the state parses");
    state.save(&paths, "bench").expect("the state saves");
    let written = std::fs::read(paths.state()).expect("the file");
    let again = State::load(&paths, "bench").expect("the file loads");
    assert!(again == state, "what is saved reads back as the same state");

    let parse = time(runs, || {
        std::hint::black_box(State::parse(&written).expect("parses"));
    });
    let load = time(runs, || {
        std::hint::black_box(State::load(&paths, "bench").expect("loads"));
    });
    let save = time(runs, || state.save(&paths, "bench").expect("saves"));
    // What a transaction does beside: a copy of the state to tell whether it changed, and the
    // comparison that tells it.
    let clone = time(runs, || {
        std::hint::black_box(state.clone());
    });
    let compare = time(runs, || {
        std::hint::black_box(std::hint::black_box(&again) == &state);
    });
    let lanes: usize = state.runs.values().map(|r| r.lanes.len()).sum();
    println!(
        "state of {lanes} lanes, {} bytes as written, in {}: parse {parse:.2?}, load {load:.2?}, save {save:.2?}, clone {clone:.2?}, compare {compare:.2?} (medians of {runs})",
        written.len(),
        base.display()
    );
}
