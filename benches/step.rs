//! Wall time and output size of `iced implement step --json` against a run's recorded history.
//!
//! SPEC 20.2 promises one object under 1 KiB "whatever the history", and 21.2 keeps only the
//! current attempt's step records in `state.json` (older attempts' records move to the run's
//! `history.jsonl`, events go to `events.jsonl`), so that a step's cost does not grow with the
//! history. This measures that, for histories of 10, 1,000 and 10,000 step records, in two
//! situations:
//!
//! - (a) nothing to do: a host-driven run waits for its agent; every call answers `start_agent`
//!   again and writes nothing;
//! - (b) one step recorded: the run is restored (state and run files) before every measured call to
//!   the moment its lane renders a new attempt's brief, so each call renders it and records it.
//!
//! and with the history in two places:
//!
//! - `history`: where SPEC 21.2 puts it (`history.jsonl` and `events.jsonl`);
//! - `state`: in `state.json` itself, as old-attempt records on the live lane, the way a design
//!   without the history file would keep them. It shows where the cost would be: every call
//!   parses (and a recording call rewrites) the whole file, and a long history no longer fits the
//!   4 MiB a state file may have.
//!
//! It asserts nothing; it prints a table and two verdicts: is the 10,000-step median under 3 times
//! the 10-step one (with the history where the SPEC puts it), and is every `--json` output under
//! 1 KiB.
//!
//! Environment: `ICED_BENCH_RUNS` (measured calls per cell, default 31), `ICED_BENCH_KEEP=1` (keep
//! the repository and print its path), `ICED_BENCH_BIN` (time another `iced` binary). Without
//! `--bench` (`cargo test --benches`) it is a smoke run: histories of 10 and 100, one call each.

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[path = "common/stats.rs"]
mod stats;
use stats::Stats;

const WARMUPS: usize = 3;
const DEFAULT_RUNS: usize = 31;
const STATE_LIMIT: u64 = 4 * 1024 * 1024;

fn env_number(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name} must be a whole number, got {v:?}")),
        Err(_) => default,
    }
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Layout {
    /// Older attempts' records in `history.jsonl` (SPEC 21.2).
    History,
    /// Older attempts' records on the live lane in `state.json`.
    State,
}

impl Layout {
    fn label(self) -> &'static str {
        match self {
            Layout::History => "history.jsonl",
            Layout::State => "state.json",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Situation {
    /// (a) A host-driven run waiting for its agent: `start_agent` again, nothing written.
    Waiting,
    /// (b) One step recorded: the lane renders and records a new attempt's brief.
    Records,
}

impl Situation {
    fn label(self) -> &'static str {
        match self {
            Situation::Waiting => "(a) start_agent again",
            Situation::Records => "(b) records a brief",
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let smoke = !args.iter().any(|a| a == "--bench");
    let (runs, warmups, sizes): (usize, usize, Vec<usize>) = if smoke {
        (1, 0, vec![10, 100])
    } else {
        (
            env_number("ICED_BENCH_RUNS", DEFAULT_RUNS).max(1),
            WARMUPS,
            vec![10, 1_000, 10_000],
        )
    };
    let bin_override = std::env::var_os("ICED_BENCH_BIN").filter(|v| !v.is_empty());
    let bin = bin_override
        .as_deref()
        .map_or(PathBuf::from(env!("CARGO_BIN_EXE_iced")), PathBuf::from);

    let dir = tempfile::Builder::new()
        .prefix("iced-bench-step-")
        .tempdir()
        .expect("a temporary directory");
    let root = dir.path().join("repo");
    std::fs::create_dir(&root).unwrap();
    let setup = Instant::now();
    let bench = Bench::new(&bin, &root);
    println!(
        "`iced implement step --json` in {} (set up in {:.0} ms), {runs} runs per cell after {warmups} warmups{}",
        root.display(),
        setup.elapsed().as_secs_f64() * 1000.0,
        if smoke {
            " (smoke run: not under `cargo bench`)"
        } else {
            ""
        }
    );
    println!("binary: {}", bin.display());
    println!(
        "failpoints compiled into that binary: {}",
        if contains(&bin, b"ICED_FAILPOINT") {
            "yes (the bench profile unifies the self dev-dependency's feature; a failpoint is one unset environment lookup)"
        } else {
            "no"
        }
    );
    println!();
    println!(
        "{:<24} {:>7} {:<14} {:>9} {:>9} {:>9} {:>8} {:>11}  note",
        "situation",
        "steps",
        "history in",
        "median ms",
        "min ms",
        "p90 ms",
        "stdout B",
        "state.json B"
    );

    let mut results: Vec<(Situation, usize, Layout, Option<Stats>, usize)> = Vec::new();
    for &layout in &[Layout::History, Layout::State] {
        for &n in &sizes {
            let prepared = bench.prepare(n, layout);
            for situation in [Situation::Waiting, Situation::Records] {
                let cell = bench.measure(&prepared, situation, runs, warmups);
                let stats = cell.times.map(|mut t| Stats::of(&mut t));
                match &stats {
                    Some(s) => println!(
                        "{:<24} {:>7} {:<14} {:>9.2} {:>9.2} {:>9.2} {:>8} {:>11}  {}",
                        situation.label(),
                        n,
                        layout.label(),
                        s.median,
                        s.min,
                        s.p90,
                        cell.bytes,
                        prepared.state_bytes(situation),
                        cell.note
                    ),
                    None => println!(
                        "{:<24} {:>7} {:<14} {:>9} {:>9} {:>9} {:>8} {:>11}  {}",
                        situation.label(),
                        n,
                        layout.label(),
                        "-",
                        "-",
                        "-",
                        cell.bytes,
                        prepared.state_bytes(situation),
                        cell.note
                    ),
                }
                results.push((situation, n, layout, stats, cell.bytes));
            }
        }
    }

    println!();
    let (small, large) = (sizes[0], *sizes.last().unwrap());
    for situation in [Situation::Waiting, Situation::Records] {
        let median = |n: usize| {
            results
                .iter()
                .find(|r| r.0 == situation && r.1 == n && r.2 == Layout::History)
                .and_then(|r| r.3.as_ref())
                .map(|s| s.median)
        };
        if let (Some(a), Some(b)) = (median(small), median(large)) {
            let ratio = b / a;
            println!(
                "{}: {large} steps {b:.2} ms vs {small} steps {a:.2} ms: {ratio:.2}x, {} 3x{}",
                situation.label(),
                if ratio < 3.0 { "under" } else { "NOT under" },
                if smoke {
                    " (smoke run: no verdict)"
                } else {
                    ""
                }
            );
        }
    }
    let biggest = results.iter().map(|r| r.4).max().unwrap_or(0);
    println!(
        "every `--json` output under 1 KiB: {} (largest {biggest} bytes)",
        if biggest < 1024 { "yes" } else { "NO" }
    );
    if std::env::var_os("ICED_BENCH_KEEP").is_some_and(|v| v == "1") {
        let kept = dir.keep();
        println!("kept {}", kept.display());
    }
}

/// Does the file hold these bytes?
fn contains(path: &Path, needle: &[u8]) -> bool {
    std::fs::read(path).is_ok_and(|bytes| bytes.windows(needle.len()).any(|w| w == needle))
}

/// A repository with one host-driven run, whose `.iced/run` is rewritten per cell.
struct Bench<'a> {
    bin: &'a Path,
    root: &'a Path,
    unit: String,
    run: String,
    /// The run's state right after `build`: the lane waits for its agent at attempt 1.
    template: Value,
}

/// One prepared history: snapshots of `.iced/run` for each situation.
struct Prepared {
    /// `.iced/run` at the moment the lane renders its brief (situation b).
    records: PathBuf,
    /// `.iced/run` with the lane waiting for its agent (situation a).
    waiting: PathBuf,
    /// Why the cells cannot run, when they cannot (a state file over the limit).
    refused: Option<String>,
}

impl Prepared {
    fn state_bytes(&self, situation: Situation) -> u64 {
        let dir = match situation {
            Situation::Waiting => &self.waiting,
            Situation::Records => &self.records,
        };
        std::fs::metadata(dir.join("state.json")).map_or(0, |m| m.len())
    }
}

struct Cell {
    times: Option<Vec<Duration>>,
    bytes: usize,
    note: String,
}

impl<'a> Bench<'a> {
    fn new(bin: &'a Path, root: &'a Path) -> Bench<'a> {
        git(root, &["init", "-q", "-b", "main"]);
        git(root, &["config", "user.name", "Bench"]);
        git(root, &["config", "user.email", "bench@example.com"]);
        git(root, &["config", "commit.gpgsign", "false"]);
        std::fs::write(root.join("README.md"), "bench repo\n").unwrap();
        git(root, &["add", "."]);
        git(root, &["commit", "-q", "-m", "init"]);
        let mut b = Bench {
            bin,
            root,
            unit: String::new(),
            run: String::new(),
            template: Value::Null,
        };
        b.ok(&["init", "--json"]);
        let created: Value =
            serde_json::from_slice(&b.ok(&["new", "Session timeout", "--json"]).stdout).unwrap();
        b.unit = created["id"].as_str().expect("an id").to_owned();
        let rel = format!("intent/{}/iced.md", b.unit);
        let text = std::fs::read_to_string(root.join(&rel)).unwrap();
        let end = text[3..].find("\n---\n").expect("frontmatter") + 3 + 5;
        std::fs::write(root.join(&rel), format!("{}{BODY}", &text[..end])).unwrap();
        let config_path = root.join(".iced/config.json");
        let mut config: Value =
            serde_json::from_str(&std::fs::read_to_string(&config_path).unwrap()).unwrap();
        config["verify"]["independent"] = json!(false);
        config["verify"]["commands"] = json!(["cargo test --quiet", ["make lint", "make check"]]);
        std::fs::write(&config_path, serde_json::to_string_pretty(&config).unwrap()).unwrap();
        // The commands are ours: trust them (SPEC 24.10). An iced from before trust (a baseline
        // through ICED_BENCH_BIN) has no such verb and needs none; a current one that fails here
        // refuses the build below, which says why.
        let _ = b.command(&["trust", "--json"]).output();
        let unit = b.unit.clone();
        b.ok(&["approve", &unit, "--yes", "--json"]);
        git(root, &["add", "-A"]);
        git(root, &["commit", "-q", "-m", "approve"]);
        // Host-driven: `build` renders the brief, adds the worktree and hands the agent to us.
        let built: Value = serde_json::from_slice(
            b.ok(&["build", &unit, "--json"])
                .stdout
                .split(|c| *c == b'\n')
                .rfind(|l| !l.is_empty())
                .unwrap(),
        )
        .unwrap();
        assert_eq!(built["action"], "start_agent", "{built}");
        b.run = built["run"].as_str().unwrap().to_owned();
        b.template =
            serde_json::from_slice(&std::fs::read(b.run_dir().join("state.json")).unwrap())
                .unwrap();
        b
    }

    fn run_dir(&self) -> PathBuf {
        self.root.join(".iced/run")
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(self.bin);
        cmd.args(args)
            .current_dir(self.root)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.root)
            // Where `iced trust` records: outside the repository.
            .env(
                "XDG_CONFIG_HOME",
                self.root
                    .parent()
                    .expect("the repo has a parent")
                    .join("config"),
            )
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .stdin(Stdio::null())
            .stderr(Stdio::piped());
        cmd
    }

    fn ok(&self, args: &[&str]) -> std::process::Output {
        let out = self.command(args).output().expect("iced runs");
        assert!(
            out.status.success(),
            "`iced {}` failed ({}):\n{}\n{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// Write a history of `n` step records (and as many events) in `layout`, with the lane about
    /// to start attempt `n / 6 + 1`, and snapshot `.iced/run` for both situations.
    fn prepare(&self, n: usize, layout: Layout) -> Prepared {
        let snapshots = self
            .root
            .parent()
            .unwrap()
            .join(format!("snap-{n}-{layout:?}"));
        let records_snap = snapshots.join("records");
        let waiting_snap = snapshots.join("waiting");
        let run_dir = self.run_dir();
        let lane = self.unit.clone();
        let per_attempt = 6;
        let attempts = n.div_ceil(per_attempt) as u32;
        let current = attempts + 1;

        // Start from the template, without this run's later files.
        let _ = std::fs::remove_file(run_dir.join(&self.run).join("history.jsonl"));
        let _ = std::fs::remove_file(run_dir.join("events.jsonl"));
        for entry in std::fs::read_dir(run_dir.join(&self.run).join(&lane)).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.starts_with("brief-") && name != "brief-1.md" {
                std::fs::remove_file(path).unwrap();
            }
        }

        let old: Vec<Value> = (0..n)
            .map(|i| old_record(i, per_attempt, &self.run, &lane, self.root))
            .collect();
        let mut events = String::new();
        for (i, r) in old.iter().enumerate() {
            events.push_str(&event_line(i, r, &self.run, &lane).to_string());
            events.push('\n');
        }
        std::fs::write(run_dir.join("events.jsonl"), events).unwrap();

        let mut state = self.template.clone();
        let lane_state = &mut state["runs"][&self.run]["lanes"][0];
        let worktree_record = lane_state["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["step"] == "worktree")
            .cloned()
            .expect("a worktree record");
        let mut steps = Vec::new();
        match layout {
            Layout::History => {
                let mut text = String::new();
                for r in &old {
                    let mut line = r.clone();
                    line["lane"] = json!(lane);
                    text.push_str(&line.to_string());
                    text.push('\n');
                }
                std::fs::write(run_dir.join(&self.run).join("history.jsonl"), text).unwrap();
            }
            Layout::State => steps.extend(old.iter().cloned()),
        }
        steps.push(worktree_record);
        lane_state["steps"] = json!(steps);
        lane_state["attempt"] = json!(current);
        lane_state["stage"] = json!("brief");
        lane_state["reason"] = json!(format!(
            "- `cargo test --quiet` exited 101, expected [0]\n- the report gives no evidence for E2 (attempt {attempts})"
        ));
        let mut bytes = serde_json::to_vec_pretty(&state).unwrap();
        bytes.push(b'\n');
        std::fs::write(run_dir.join("state.json"), &bytes).unwrap();
        copy_dir(&run_dir, &records_snap);

        if bytes.len() as u64 > STATE_LIMIT {
            copy_dir(&run_dir, &waiting_snap);
            let refused = self
                .command(&["implement", "step", "--json"])
                .output()
                .unwrap();
            let reason = serde_json::from_slice::<Value>(&refused.stdout)
                .ok()
                .and_then(|v| v["refused"]["code"].as_str().map(str::to_owned))
                .unwrap_or_else(|| format!("exit {}", refused.status));
            return Prepared {
                records: records_snap,
                waiting: waiting_snap,
                refused: Some(format!(
                    "refused ({reason}): state.json is {:.1} MiB, over its 4 MiB",
                    bytes.len() as f64 / 1048576.0
                )),
            };
        }
        // Render the brief (b's step), then hand the agent to the host: (a) from then on.
        for expected in ["advanced", "start_agent"] {
            let out = self.ok(&["implement", "step", "--json"]);
            let report: Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(report["action"], expected, "{report}");
            assert_eq!(report["attempt"], current, "{report}");
        }
        copy_dir(&run_dir, &waiting_snap);
        Prepared {
            records: records_snap,
            waiting: waiting_snap,
            refused: None,
        }
    }

    fn measure(
        &self,
        prepared: &Prepared,
        situation: Situation,
        runs: usize,
        warmups: usize,
    ) -> Cell {
        let run_dir = self.run_dir();
        if let Some(refused) = &prepared.refused {
            return Cell {
                times: None,
                bytes: 0,
                note: refused.clone(),
            };
        }
        let snapshot = match situation {
            Situation::Waiting => &prepared.waiting,
            Situation::Records => &prepared.records,
        };
        copy_dir(snapshot, &run_dir);
        sync();
        let expected = match situation {
            Situation::Waiting => "start_agent",
            Situation::Records => "advanced",
        };
        let mut times = Vec::with_capacity(runs);
        let mut bytes = 0;
        for i in 0..warmups + runs {
            if situation == Situation::Records {
                copy_dir(snapshot, &run_dir);
                // The copy's dirty pages out first: otherwise the measured call's fsync of the
                // state file pays for writing back the restored history too.
                sync();
            }
            let start = Instant::now();
            let out = self
                .command(&["implement", "step", "--json"])
                .output()
                .unwrap();
            let elapsed = start.elapsed();
            assert!(
                out.status.success(),
                "`implement step` failed: {}",
                String::from_utf8_lossy(&out.stdout)
            );
            let report: Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(report["action"], expected, "{report}");
            bytes = out.stdout.len();
            if i >= warmups {
                times.push(elapsed);
            }
        }
        let note = match situation {
            // SPEC 20.2: asking again writes nothing.
            Situation::Waiting => {
                let same = ["state.json", "events.jsonl"].iter().all(|f| {
                    std::fs::read(run_dir.join(f)).ok() == std::fs::read(snapshot.join(f)).ok()
                });
                if same {
                    "wrote nothing".to_owned()
                } else {
                    "WROTE state.json or events.jsonl".to_owned()
                }
            }
            Situation::Records => String::new(),
        };
        Cell {
            times: Some(times),
            bytes,
            note,
        }
    }
}

/// Step record `i` of a history, `per_attempt` records per attempt, the way the loop writes
/// them: a brief, the host's implementer, the receipt that did not verify, three commands.
fn old_record(i: usize, per_attempt: usize, run: &str, lane: &str, root: &Path) -> Value {
    let attempt = (i / per_attempt) as u32 + 1;
    let hex = |seed: usize, len: usize| -> String {
        let mut x = (seed as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                char::from_digit((x % 16) as u32, 16).unwrap()
            })
            .collect()
    };
    let ts = |s: usize| {
        format!(
            "2026-09-{:02}T{:02}:{:02}:{:02}Z",
            1 + (i / 3600) % 28,
            (i / 60) % 24,
            s % 60,
            i % 60
        )
    };
    let lane_dir = root.join(".iced/run").join(run).join(lane);
    let (step, outcome, status) = match i % per_attempt {
        0 => (
            "brief".to_owned(),
            json!({"path": lane_dir.join(format!("brief-{attempt}.md")), "sha256": hex(i, 64)}),
            "done",
        ),
        1 => (
            "implement".to_owned(),
            json!({"receipt_path": lane_dir.join(format!("report-{attempt}.json"))}),
            "done",
        ),
        2 => (
            "receipt".to_owned(),
            json!({"verified": false,
                   "missing": ["`cargo test --quiet` exited 101, expected [0]", "the report gives no evidence for E2"],
                   "ahead": 2, "summary": "Refresh the session on activity; idle sessions end after 30 minutes.",
                   "evidence": [{"expectation": "E1", "kind": "test", "ref": "tests/session.rs::activity_extends"}],
                   "handback": null}),
            "failed",
        ),
        k => (
            format!("dod-{}-0", k - 3),
            json!({"nonce": hex(i + 7, 32), "exit_code": if k == 3 { 101 } else { 0 }, "signal": null,
                   "timed_out": false, "stopped": false, "duration_ms": 1200 + i % 5000,
                   "stdout": {"bytes": 18234, "lines": 412, "truncated": false},
                   "stderr": {"bytes": 912, "lines": 14, "truncated": false},
                   "spawn_error": null, "supervisor_max_rss_kb": 9120}),
            "done",
        ),
    };
    json!({
        "step": step,
        "attempt": attempt,
        "status": status,
        "started_at": ts(i),
        "ended_at": ts(i + 1),
        "inputs": if step == "brief" || step == "implement" { json!(hex(i + 3, 64)) } else { Value::Null },
        "nonce": if step == "implement" || step.starts_with("dod-") { json!(hex(i + 5, 32)) } else { Value::Null },
        "pid": 20_000 + i % 30_000,
        "pid_start": 1_000_000 + i as u64 * 37,
        "outcome": outcome,
    })
}

/// The event the loop logged for a history record.
fn event_line(i: usize, record: &Value, run: &str, lane: &str) -> Value {
    let step = record["step"].as_str().unwrap();
    let event = match step {
        "implement" => "agent_end",
        _ if record["status"] == "failed" => "step_failed",
        _ => "step_done",
    };
    json!({"ts": record["ended_at"], "run": run, "event": event, "pid": 20_000 + i % 30_000,
           "lane": lane, "step": step, "attempt": record["attempt"],
           "outcome": if record["status"] == "failed" { "did not verify" } else { "ok" }})
}

/// Replace `to` with a copy of `from` (files and directories; modes kept).
fn copy_dir(from: &Path, to: &Path) {
    if to.exists() {
        std::fs::remove_dir_all(to).unwrap();
    }
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    let status = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .expect("cp runs");
    assert!(
        status.success(),
        "cp -a {} {}",
        from.display(),
        to.display()
    );
}

fn sync() {
    let _ = Command::new("sync").status();
}

fn git(root: &Path, args: &[&str]) {
    let status = Command::new("git")
        .args(args)
        .current_dir(root)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdout(Stdio::null())
        .status()
        .expect("git runs");
    assert!(status.success(), "git {args:?} failed");
}

/// A unit body that lints clean at signoff.
const BODY: &str = "
# Session timeout

## Intent

### Goal
Signed-in people stay signed in while they are active.

### Constraints
- [C1] No change to how passwords are checked.

### Failure conditions
- [F1] An active person is signed out.

### Scope
- In: session refresh
- Out: password policy

## Context
- [code] Sessions expire after 5 minutes in src/session.rs.

## Expectations
- [E1] Activity extends the session. {verify: test | tests/session.rs}
- [E2] An idle session still ends after 30 minutes. {verify: test | tests/session.rs}

## Open questions
- [Q1] How long is idle? -> A: 30 minutes.
";
