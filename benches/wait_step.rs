//! What a waiting `iced implement step --json` costs, against what git's own plumbing costs
//! (issue 36): cron and hosts call this step more than any other, and while the lane's agent works
//! every call only says `waiting`. Its goal is at most 1.2 times `git rev-parse HEAD` in the same
//! repository, both started as a process and waited for, medians over many calls.
//!
//! A throwaway repository holds one approved unit whose implementer is `fixtures/fake-agent`
//! waiting on a file; `iced build --no-wait` starts it, and then each measured round times one
//! `git rev-parse HEAD` and one `iced implement step --json` (in turn first, so that neither
//! always runs on a cache the other warmed). Printed: median, minimum and 90th percentile of
//! each, the ratio of the medians and the verdict. It asserts nothing but that each step said
//! `waiting`. A second series times the step with nothing kept (the run's `at-commit` folder made
//! a file), as every step was before issue 36: a `git cat-file` a call.
//!
//! Environment: `ICED_BENCH_RUNS` (measured rounds, default 201), `ICED_BENCH_BIN` (time another
//! `iced` binary), `ICED_BENCH_KEEP=1` (keep the repository and print its path). Without `--bench`
//! (`cargo test --benches`) it is a smoke run: a few rounds, no verdict.

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[path = "common/stats.rs"]
mod stats;
use stats::Stats;

const WARMUPS: usize = 5;
const DEFAULT_RUNS: usize = 201;
const GOAL: f64 = 1.2;
const FAKE_AGENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/fake-agent");
const BODY: &str = include_str!("../scripts/unit-body.md");

struct Bench {
    bin: PathBuf,
    root: PathBuf,
    config: PathBuf,
}

impl Bench {
    /// A command with the environment a cron job would give it: PATH, HOME, the person's config
    /// folder (where trust is recorded) outside the repository, no system git config.
    fn command(&self, program: &Path, args: &[&str]) -> Command {
        let mut cmd = Command::new(program);
        cmd.args(args)
            .current_dir(&self.root)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.root)
            .env("XDG_CONFIG_HOME", &self.config)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .stdin(Stdio::null())
            .stderr(Stdio::piped());
        cmd
    }

    fn iced(&self, args: &[&str]) -> std::process::Output {
        let out = self.command(&self.bin, args).output().expect("iced starts");
        assert!(
            out.status.success() || out.status.code() == Some(4),
            "iced {args:?}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    fn git(&self, args: &[&str]) -> String {
        let out = self
            .command(Path::new("git"), args)
            .output()
            .expect("git starts");
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The repository, its unit approved and trusted, its run started and waiting for its agent.
    fn new(bin: PathBuf, dir: &Path) -> (Bench, String, PathBuf) {
        let root = dir.join("repo");
        let config = dir.join("config");
        let agent = dir.join("agent");
        for d in [&root, &config.join("iced"), &agent] {
            std::fs::create_dir_all(d).unwrap();
        }
        let b = Bench { bin, root, config };
        b.git(&["init", "-q", "-b", "main"]);
        b.git(&["config", "user.name", "Bench"]);
        b.git(&["config", "user.email", "bench@example.com"]);
        b.git(&["config", "commit.gpgsign", "false"]);
        std::fs::write(b.root.join("README.md"), "bench repo\n").unwrap();
        b.git(&["add", "."]);
        b.git(&["commit", "-q", "-m", "init"]);
        b.iced(&["init", "--json"]);
        let created: Value =
            serde_json::from_slice(&b.iced(&["new", "Session timeout", "--json"]).stdout).unwrap();
        let unit = created["id"].as_str().expect("an id").to_owned();
        let rel = format!("intent/{unit}/iced.md");
        let text = std::fs::read_to_string(b.root.join(&rel)).unwrap();
        let end = text[3..].find("\n---\n").expect("frontmatter") + 3 + 5;
        std::fs::write(
            b.root.join(&rel),
            format!("{}\n# Session timeout\n\n{BODY}", &text[..end]),
        )
        .unwrap();
        // The agent waits until the bench is over; it logs its start beside its script, which
        // the person lets agents write.
        let go = dir.join("go");
        let script = agent.join("agent.txt");
        std::fs::write(
            &script,
            format!(
                "await-file {}\ncommit src/session.rs fixed\nreport-ok E1 E2\n",
                go.display()
            ),
        )
        .unwrap();
        std::fs::write(
            b.config.join("iced/config.json"),
            json!({"agents": {"writable": [agent]}}).to_string(),
        )
        .unwrap();
        let config_path = b.root.join(".iced/config.json");
        let mut config: Value =
            serde_json::from_str(&std::fs::read_to_string(&config_path).unwrap()).unwrap();
        config["verify"]["independent"] = json!(false);
        config["verify"]["commands"] = json!([]);
        config["runners"] = json!({"fake": {"kind": "command", "argv": ["bash", FAKE_AGENT, script, "{output_file}"], "timeoutSec": 3600}});
        config["roles"] = json!({"implementer": {"runner": "fake"}});
        std::fs::write(&config_path, serde_json::to_string_pretty(&config).unwrap()).unwrap();
        b.iced(&["approve", &unit, "--yes", "--json"]);
        b.iced(&["trust", "--json"]);
        b.git(&["add", "-A"]);
        b.git(&["commit", "-q", "-m", "approve"]);
        let built = b.iced(&["build", &unit, "--no-wait", "--json"]);
        let last: Value = serde_json::from_slice(
            built
                .stdout
                .split(|c| *c == b'\n')
                .rfind(|l| !l.is_empty())
                .expect("build prints a line"),
        )
        .unwrap();
        let run = last["run"].as_str().expect("a run").to_owned();
        (b, run, go)
    }
}

fn timed(mut cmd: Command) -> (Duration, std::process::Output) {
    let start = Instant::now();
    let out = cmd.output().expect("it starts");
    (start.elapsed(), out)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let smoke = !args.iter().any(|a| a == "--bench");
    let runs = if smoke {
        3
    } else {
        std::env::var("ICED_BENCH_RUNS")
            .ok()
            .map(|v| v.trim().parse().expect("ICED_BENCH_RUNS: a whole number"))
            .unwrap_or(DEFAULT_RUNS)
            .max(1)
    };
    let bin = std::env::var_os("ICED_BENCH_BIN")
        .filter(|v| !v.is_empty())
        .map_or(PathBuf::from(env!("CARGO_BIN_EXE_iced")), PathBuf::from);
    let dir = tempfile::Builder::new()
        .prefix("iced-bench-wait-step-")
        .tempdir()
        .expect("a temporary directory");
    let (bench, run, go) = Bench::new(bin, dir.path());
    let step = || bench.command(&bench.bin, &["implement", "step", "--json"]);
    let rev_parse = || bench.command(Path::new("git"), &["rev-parse", "HEAD"]);
    let waiting = |out: &std::process::Output| {
        let answer: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        assert_eq!(
            answer["action"],
            "waiting",
            "a step that is not waiting: {answer} {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    for _ in 0..WARMUPS {
        waiting(&step().output().unwrap());
        rev_parse().output().unwrap();
    }
    let measure = || {
        let (mut steps, mut revs) = (Vec::new(), Vec::new());
        for round in 0..runs {
            let mut one = |step_first: bool| {
                if step_first {
                    let (t, out) = timed(step());
                    waiting(&out);
                    steps.push(t);
                } else {
                    revs.push(timed(rev_parse()).0);
                }
            };
            one(round % 2 == 0);
            one(round % 2 == 1);
        }
        (Stats::of(&mut steps), Stats::of(&mut revs))
    };
    let (s, r) = measure();
    // For comparison, the step as it was before its answers were kept (issue 36): the run's
    // `at-commit` folder replaced by a file, so nothing can be kept and every step asks git.
    let kept = bench.root.join(".iced/run").join(&run).join("at-commit");
    let _ = std::fs::remove_dir_all(&kept);
    std::fs::write(&kept, "").unwrap();
    let (unkept, unkept_rev) = measure();
    println!(
        "a waiting `iced implement step --json` against `git rev-parse HEAD`, {runs} rounds after {WARMUPS} warmups{}",
        if smoke { " (smoke run: not under `cargo bench`)" } else { "" }
    );
    println!("binary: {}", bench.bin.display());
    println!(
        "{:<44} {:>9} {:>9} {:>9}",
        "", "median ms", "min ms", "p90 ms"
    );
    for (name, st) in [
        ("git rev-parse HEAD", &r),
        ("iced implement step (waiting)", &s),
        ("git rev-parse HEAD (second series)", &unkept_rev),
        ("iced implement step, nothing kept (before)", &unkept),
    ] {
        println!(
            "{name:<44} {:>9.2} {:>9.2} {:>9.2}",
            st.median, st.min, st.p90
        );
    }
    println!(
        "nothing kept, as before: {:.2}x git rev-parse HEAD",
        unkept.median / unkept_rev.median
    );
    let ratio = s.median / r.median;
    println!(
        "ratio of the medians: {ratio:.2}x, {} {GOAL}x{}",
        if ratio <= GOAL {
            "within"
        } else {
            "NOT within"
        },
        if smoke {
            " (smoke run: no verdict)"
        } else {
            ""
        }
    );
    // The agent goes on and the run is abandoned, so nothing it started outlives the bench.
    let _ = std::fs::write(&go, "");
    let _ = bench
        .command(&bench.bin, &["run", "abandon", &run, "--json"])
        .output();
    if std::env::var_os("ICED_BENCH_KEEP").is_some_and(|v| v == "1") {
        println!("kept {}", dir.keep().display());
    }
}
