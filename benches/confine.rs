//! What confining an agent costs at its start (SPEC 24.12): the wall time from launching an
//! activity to its outcome, for a child that does nothing (`true`), confined to eight folders (as
//! an implementer is: its worktree, its git folder, the objects, two ref folders, its report's
//! folder, its temp and its home) and unconfined, the two launched in turn so that both meet the
//! same machine. Prints the median of each, the difference of the medians and the median of the
//! paired differences, in milliseconds. A confined writer (implementer, test writer, memory agent)
//! also has its git of its own made before it starts (`lane_git::prepare`, in a real repository's
//! linked worktree): its median is printed and added.
//!
//! Goal: confined costs at most 5 ms more than unconfined (median of the paired differences, plus
//! a writer's git of its own).
//!
//! Environment: `ICED_BENCH_RUNS`, pairs measured (default 41). Without `--bench` (`cargo test
//! --benches`) it is a smoke run: one pair, no verdict.

use iced::activity::{self, ActivitySpec};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

const WARMUPS: usize = 3;
const DEFAULT_RUNS: usize = 41;
const GOAL_MS: f64 = 5.0;

fn main() {
    let smoke = !std::env::args().any(|a| a == "--bench");
    if let Err(missing) = iced::confine::available() {
        println!("confine: this machine cannot confine ({missing}); nothing to measure");
        return;
    }
    let runs = if smoke {
        1
    } else {
        std::env::var("ICED_BENCH_RUNS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(DEFAULT_RUNS)
    };
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let writable: Vec<_> = (0..8)
        .map(|i| {
            let dir = tmp.path().join(format!("w{i}"));
            std::fs::create_dir(&dir).unwrap();
            dir
        })
        .collect();
    let rules = iced::confine::Rules { writable };
    let mut n = 0;
    let mut launch = |confined: bool| {
        n += 1;
        start_to_outcome(tmp.path(), n, confined.then(|| rules.clone()))
    };
    for _ in 0..if smoke { 0 } else { WARMUPS } {
        launch(true);
        launch(false);
    }
    let (mut confined, mut unconfined, mut paired) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        let c = launch(true);
        let u = launch(false);
        confined.push(c);
        unconfined.push(u);
        paired.push(c - u);
    }
    let (c, u, d) = (
        median(&mut confined),
        median(&mut unconfined),
        median(&mut paired),
    );
    println!(
        "confine: start to outcome, {runs} pairs: confined {c:.2} ms, unconfined {u:.2} ms (medians); difference of medians {:.2} ms, median paired difference {d:.2} ms",
        c - u
    );
    let mut made: Vec<f64> = (0..runs).map(|n| own_git(tmp.path(), n)).collect();
    let g = median(&mut made);
    println!(
        "confine: a writer's git of its own, {runs} made: {g:.2} ms (median); a confined writer's start costs {:.2} ms more",
        d + g
    );
    if !smoke {
        let verdict = if d + g <= GOAL_MS { "met" } else { "MISSED" };
        println!("confine: goal at most {GOAL_MS} ms more: {verdict}");
    }
}

/// The milliseconds `lane_git::prepare` takes for a fresh activity `n` of a lane worktree in a
/// repository of a hundred files (made at the first call).
fn own_git(base: &Path, n: usize) -> f64 {
    let root = base.join("repo");
    let worktree = base.join("wt");
    let git = |dir: &Path, args: &[&str]| {
        let ok = std::process::Command::new("git")
            .current_dir(dir)
            .args(args)
            .output()
            .expect("git runs")
            .status
            .success();
        assert!(ok, "git {args:?}");
    };
    if !worktree.exists() {
        std::fs::create_dir_all(root.join("src")).unwrap();
        git(&root, &["init", "-q", "-b", "main"]);
        for i in 0..100 {
            std::fs::write(root.join(format!("src/f{i}.rs")), format!("// {i}\n")).unwrap();
        }
        git(&root, &["add", "-A"]);
        git(
            &root,
            &[
                "-c",
                "user.name=b",
                "-c",
                "user.email=b@example.test",
                "commit",
                "-q",
                "-m",
                "one",
            ],
        );
        let shown = worktree.display().to_string();
        git(&root, &["worktree", "add", "-q", "-b", "iced/u/l", &shown]);
    }
    let activity = base.join(format!("writer-{n}"));
    std::fs::create_dir_all(&activity).unwrap();
    let admin = root.join(".git/worktrees/wt");
    let started = Instant::now();
    iced::run::lane_git::prepare(&root.join(".git"), &admin, &worktree, &activity)
        .expect("a git of its own");
    started.elapsed().as_secs_f64() * 1000.0
}

/// Launch `true` through the supervisor in a fresh activity folder and wait for its outcome; the
/// milliseconds it took.
fn start_to_outcome(base: &Path, n: usize, confine: Option<iced::confine::Rules>) -> f64 {
    let dir = base.join(format!("activity-{n}"));
    let spec = ActivitySpec {
        argv: vec!["true".into()],
        cwd: base.to_owned(),
        env: BTreeMap::from([("PATH".to_owned(), std::env::var("PATH").unwrap_or_default())]),
        timeout_ms: 10_000,
        grace_ms: 100,
        nonce: format!("n-{n}"),
        // A memory draft's gate: the first supervisor to register in the folder starts the child.
        gate: serde_json::json!({"memory": dir}),
        stdin: None,
        inherit_prefixes: Vec::new(),
        env_templates: BTreeMap::new(),
        confine,
        discard: Vec::new(),
    };
    let started = Instant::now();
    activity::launch(Path::new(env!("CARGO_BIN_EXE_iced")), &dir, &spec).expect("launched");
    let give_up = started + Duration::from_secs(10);
    let outcome = loop {
        if let Some(outcome) = activity::read_outcome(&dir) {
            break outcome;
        }
        assert!(Instant::now() < give_up, "no outcome in {}", dir.display());
        std::thread::sleep(Duration::from_micros(200));
    };
    let took = started.elapsed().as_secs_f64() * 1000.0;
    assert_eq!(outcome.exit_code, Some(0), "{outcome:?}");
    took
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}
