//! Wall time of the read-only verbs over a repository of 1,000 units.
//!
//! Builds a temporary git repository with `iced init`, writes the units directly as files (full
//! frontmatter, every section, a mix of statuses; approved and later units carry their correct
//! `contract_hash`; some units have parents), then runs each command a few times to warm up and N
//! more times to measure. For each command it prints the median, minimum and 90th percentile in
//! milliseconds and the bytes the command wrote to stdout.
//!
//! Goal: `iced list --json` over 1,000 units in under 50 ms (median).
//!
//! Environment:
//! - `ICED_BENCH_RUNS`: measured runs per command (default 31);
//! - `ICED_BENCH_UNITS`: units to generate (default 1000);
//! - `ICED_BENCH_KEEP=1`: keep the repository and print its path (to profile by hand);
//! - `ICED_BENCH_BIN`: time this `iced` binary instead of the one cargo built (to compare builds).
//!
//! Arguments other than cargo's `--bench` are filters: only commands whose label contains one of
//! them run (`scripts/bench.sh -- 'list --json'`). Without `--bench` (`cargo test --benches`,
//! `cargo test --all-targets`) it is a smoke run: 20 units, one run per command, no verdict.

use iced::unit::contract_hash;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

#[path = "common/stats.rs"]
mod stats;
use stats::Stats;

const WARMUPS: usize = 3;
const DEFAULT_RUNS: usize = 31;
const DEFAULT_UNITS: usize = 1000;
const GOAL_MS: f64 = 50.0;

fn env_number(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name} must be a whole number, got {v:?}")),
        Err(_) => default,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // `cargo bench` passes `--bench`; `cargo test --benches` does not, and gets a quick smoke run
    // (a few units, one run) that checks the benchmark still works.
    let smoke = !args.iter().any(|a| a == "--bench");
    let (runs, count, warmups) = if smoke {
        (1, env_number("ICED_BENCH_UNITS", 20), 0)
    } else {
        (
            env_number("ICED_BENCH_RUNS", DEFAULT_RUNS).max(1),
            env_number("ICED_BENCH_UNITS", DEFAULT_UNITS),
            WARMUPS,
        )
    };
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let bin_override = std::env::var_os("ICED_BENCH_BIN").filter(|v| !v.is_empty());
    let bin = bin_override
        .as_deref()
        .map_or(Path::new(env!("CARGO_BIN_EXE_iced")), Path::new);

    let dir = tempfile::Builder::new()
        .prefix("iced-bench-")
        .tempdir()
        .expect("a temporary directory");
    let root = dir.path();
    let setup = Instant::now();
    git(root, &["init", "-q"]);
    git(root, &["config", "user.name", "Bench"]);
    git(root, &["config", "user.email", "bench@example.com"]);
    let init = iced(bin, root, &["init", "--json"]);
    assert!(init.status.success(), "iced init failed: {init:?}");
    let units = generate(root, count);
    let ids: Vec<&str> = units.iter().map(|(id, _)| id.as_str()).collect();
    println!(
        "{} units in {} (set up in {:.0} ms), {runs} runs per command after {warmups} warmups{}",
        ids.len(),
        root.display(),
        setup.elapsed().as_secs_f64() * 1000.0,
        if smoke {
            " (smoke run: not under `cargo bench`)"
        } else {
            ""
        }
    );

    // The unit `status` and `lint` look at: the last one, approved with its contract hash, named
    // by its full id.
    let target = units
        .iter()
        .rev()
        .find(|(_, status)| *status == "approved")
        .map(|(id, _)| id.clone())
        .expect("an approved unit");
    let commands: Vec<(String, Vec<&str>)> = vec![
        ("list --json".into(), vec!["list", "--json"]),
        ("list".into(), vec!["list"]),
        (
            format!("status {target} --json"),
            vec!["status", &target, "--json"],
        ),
        (format!("lint {target}"), vec!["lint", &target]),
        (
            format!("lint {target} --stage signoff"),
            vec!["lint", &target, "--stage", "signoff"],
        ),
    ];

    // Sanity: the listing holds every unit, and each of them lints clean at validate.
    let listed = iced(bin, root, &["list", "--json"]);
    let units: serde_json::Value =
        serde_json::from_slice(&listed.stdout).expect("list --json prints JSON");
    let units = units.as_array().expect("an array");
    assert_eq!(units.len(), ids.len(), "list --json lists every unit");
    let dirty: Vec<&serde_json::Value> =
        units.iter().filter(|u| u["lint"]["errors"] != 0).collect();
    assert!(
        dirty.is_empty(),
        "generated units should lint clean: {:?}",
        &dirty[..dirty.len().min(3)]
    );

    println!(
        "{:<62} {:>9} {:>9} {:>9} {:>12}",
        "command", "median ms", "min ms", "p90 ms", "stdout bytes"
    );
    let mut list_json_median = None;
    for (label, args) in &commands {
        if !filters.is_empty() && !filters.iter().any(|f| label.contains(f.as_str())) {
            continue;
        }
        let mut times = Vec::with_capacity(runs);
        let mut bytes = 0;
        for i in 0..warmups + runs {
            let start = Instant::now();
            let out = iced(bin, root, args);
            let elapsed = start.elapsed();
            assert!(
                out.status.success(),
                "`iced {label}` failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
            bytes = out.stdout.len();
            if i >= warmups {
                times.push(elapsed);
            }
        }
        let stats = Stats::of(&mut times);
        println!(
            "iced {:<57} {:>9.2} {:>9.2} {:>9.2} {:>12}",
            label, stats.median, stats.min, stats.p90, bytes
        );
        if label == "list --json" {
            list_json_median = Some(stats.median);
        }
    }
    if let Some(median) = list_json_median.filter(|_| !smoke) {
        let verdict = if median < GOAL_MS { "meets" } else { "MISSES" };
        println!(
            "`iced list --json` over {} units: median {median:.2} ms {verdict} the {GOAL_MS:.0} ms goal",
            ids.len()
        );
    }
    if std::env::var_os("ICED_BENCH_KEEP").is_some_and(|v| v == "1") {
        let kept = dir.keep();
        println!("kept {}", kept.display());
    }
}

fn git(root: &Path, args: &[&str]) {
    let status = Command::new("git")
        .args(args)
        .current_dir(root)
        .stdout(Stdio::null())
        .status()
        .expect("git runs");
    assert!(status.success(), "git {args:?} failed");
}

fn iced(bin: &Path, root: &Path, args: &[&str]) -> std::process::Output {
    Command::new(bin)
        .args(args)
        .current_dir(root)
        .env_remove("ICED_NOW")
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .expect("iced runs")
}

/// A small deterministic generator (xorshift), so every run builds the same repository.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

const SUBJECTS: &[&str] = &[
    "password reset links",
    "order export",
    "team workspaces",
    "invoice emails",
    "search results",
    "the billing page",
    "dark mode",
    "audit log",
    "file uploads",
    "the onboarding checklist",
    "two-factor sign-in",
    "webhook retries",
    "the mobile menu",
    "CSV imports",
    "notification settings",
];

const VERBS: &[&str] = &[
    "Fix", "Add", "Speed up", "Clarify", "Harden", "Simplify", "Localise", "Paginate",
];

const OUTCOMES: &[&str] = &[
    "A person can finish the task without contacting support, and the result is the same on every device they use.",
    "The page answers within a second for an account with ten thousand records, and shows what is still loading.",
    "Nothing a user already saved is lost or changed, and every change they make is visible to their teammates at once.",
    "A manager can see who did what and when, for the last ninety days, without asking an engineer.",
];

/// Statuses, weighted roughly as a living repository holds them.
const STATUSES: &[&str] = &[
    "draft",
    "draft",
    "draft",
    "approved",
    "approved",
    "building",
    "verifying",
    "done",
    "accepted",
    "accepted",
    "accepted",
    "blocked",
    "rejected",
];

fn slug(title: &str) -> String {
    let mut s = String::new();
    for word in title.split(|c: char| !c.is_ascii_alphanumeric()) {
        if word.is_empty() {
            continue;
        }
        if !s.is_empty() {
            s.push('-');
        }
        s.push_str(&word.to_ascii_lowercase());
    }
    s.truncate(40);
    s.trim_end_matches('-').to_owned()
}

fn body(title: &str, rng: &mut Rng, kind: &str) -> String {
    let subject = rng.pick(SUBJECTS);
    let mut b = format!(
        "# {title}\n\n<!-- Request: {title} -->\n\n## Intent\n\n### Goal\n{}\n\n### Constraints\n",
        rng.pick(OUTCOMES)
    );
    for i in 1..=2 + rng.below(3) {
        b.push_str(&format!(
            "- [C{i}] Existing behaviour of {subject} outside this change stays as it is, including\n  its texts, its permissions and its URLs.\n"
        ));
    }
    b.push_str("\n### Failure conditions\n");
    if kind != "review" {
        for i in 1..=1 + rng.below(3) {
            b.push_str(&format!(
                "- [F{i}] A user of {subject} sees an error, a blank page or data that is not theirs.\n"
            ));
        }
    }
    b.push_str(&format!(
        "\n### Scope\n- In: {subject}, its tests, its help text\n- Out: the public API, billing, {}\n\n",
        rng.pick(SUBJECTS)
    ));
    b.push_str(&format!(
        "## Context\n- [code] The code for {subject} lives under src/{}/ and its tests under test/.\n- [product] About {} people use {subject} every week.\n- [knowledge] Follow the error-message guide in docs/errors.md.\n\n",
        slug(subject),
        100 + rng.below(5000)
    ));
    b.push_str("## Expectations\n");
    let kinds = [
        "test | test/unit/{s}.test.ts",
        "check | npm test",
        "metric | p95 of {s} < 800 ms",
        "manual | open {s} on a phone and complete the flow",
    ];
    for i in 1..=2 + rng.below(4) {
        let verify = kinds[rng.below(kinds.len())].replace("{s}", &slug(subject));
        b.push_str(&format!(
            "- [E{i}] After the change, {subject} behaves as the goal says for case {i}, and the old\n  behaviour is gone. {{verify: {verify}}}\n"
        ));
    }
    b.push_str("\n## Open questions\n");
    for i in 1..=rng.below(3) {
        b.push_str(&format!(
            "- [Q{i}] Should this also cover {}? -> A: No, that is a separate unit.\n",
            rng.pick(SUBJECTS)
        ));
    }
    b
}

/// Write `count` units under `intent/` and return their ids and statuses, in order.
fn generate(root: &Path, count: usize) -> Vec<(String, &'static str)> {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut units = Vec::with_capacity(count);
    let mut projects: Vec<String> = Vec::new();
    for n in 1..=count {
        let kind = if n % 25 == 1 {
            "project"
        } else {
            ["feature", "feature", "bug", "chore", "review"][rng.below(5)]
        };
        let status = if n == count {
            "approved"
        } else {
            rng.pick(STATUSES)
        };
        let title = format!("{} {} ({n})", rng.pick(VERBS), rng.pick(SUBJECTS));
        let id = format!("{n:03}-{}", slug(&title));
        let tier = match kind {
            "project" => "L",
            "feature" => ["M", "S", "L"][rng.below(3)],
            _ => "S",
        };
        let parent = match projects.last() {
            Some(p) if kind != "project" && rng.below(3) > 0 => p.clone(),
            _ => "null".to_owned(),
        };
        let risk = ["low", "medium", "medium", "high"][rng.below(4)];
        let autonomy = rng.below(4);
        let day = 1 + n % 28;
        let past_approval = matches!(
            status,
            "approved" | "building" | "verifying" | "done" | "accepted"
        );
        let body = body(&title, &mut rng, kind);
        let hash = if past_approval || status == "blocked" || status == "rejected" {
            contract_hash(&body)
        } else {
            "null".to_owned()
        };
        let approved = |v: &str| {
            if hash == "null" {
                "null".to_owned()
            } else {
                v.to_owned()
            }
        };
        let accepted = status == "accepted";
        let text = format!(
            "---
iced: 0.1
id: {id}
title: \"{title}\"
type: {kind}
tier: {tier}
parent: {parent}
status: {status}
autonomy: {autonomy}
risk: {risk}
attempts: {attempts}
created: 2026-09-{day:02}T08:00:00Z
approved_at: {approved_at}
approved_by: {approved_by}
contract_hash: {hash}
base_ref: {base_ref}
accepted_at: {accepted_at}
accepted_by: {accepted_by}
blocked_from: {blocked_from}
---

{body}",
            attempts = if past_approval { rng.below(3) } else { 0 },
            approved_at = approved(&format!("2026-09-{day:02}T09:30:00Z")),
            approved_by = approved("Dana Reyes"),
            base_ref = approved("4b825dc642cb6eb9a060e54bf8d69288fbee4904"),
            accepted_at = if accepted {
                format!("2026-09-{day:02}T17:00:00Z")
            } else {
                "null".into()
            },
            accepted_by = if accepted { "Dana Reyes" } else { "null" },
            blocked_from = if status == "blocked" {
                "building"
            } else {
                "null"
            },
        );
        let dir = root.join("intent").join(&id);
        std::fs::create_dir_all(&dir).expect("unit folder");
        std::fs::write(dir.join("iced.md"), text).expect("iced.md");
        std::fs::write(
            dir.join("decisions.md"),
            format!("# Decisions: {id}\n\nAppend-only log of significant choices made while building this unit. Audited, not approved.\n"),
        )
        .expect("decisions.md");
        if matches!(status, "done" | "accepted") {
            std::fs::write(
                dir.join("evidence.md"),
                "# Evidence\n\nAll expectations verified.\n",
            )
            .expect("evidence.md");
        }
        if kind == "project" {
            projects.push(id.clone());
        }
        units.push((id, status));
    }
    std::fs::write(
        root.join(".iced").join("active"),
        format!("{}\n", units[units.len() / 2].0),
    )
    .expect(".iced/active");
    units
}
