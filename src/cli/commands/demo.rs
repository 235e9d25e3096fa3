//! `iced demo`: a whole run of a real unit through the loop, in a throwaway repository, with the
//! built-in scripted agent (the same fake agent the tests use) standing in for a real harness.
//! Every step is the real `iced` binary run as a person or a host would run it.

use super::current_dir;
use crate::cli::Output;
use crate::refusal::{io_error, Refusal};
use std::path::{Path, PathBuf};
use std::process::Command;

const AGENT: &str = include_str!("../../../fixtures/fake-agent");

#[derive(clap::Args)]
pub struct Args {
    /// Where to make the demo repository (default: a new directory under the system temp dir).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Kill the build's own driver (SIGKILL) after its Nth step, then resume it: a crash costs
    /// nothing.
    #[arg(long)]
    pub kill_at: Option<usize>,
}

const UNIT_BODY: &str = "
# Greet people by name

## Intent

### Goal
A person who gives their name is greeted by it; anyone else still gets the general greeting.

### Constraints
- [C1] The script keeps working with no argument.

### Failure conditions
- [F1] A named person is greeted as \"world\".

### Scope
- In: greet.sh
- Out: translations

## Context
- [code] greet.sh always prints `Hello, world`.

## Expectations
- [E1] `sh greet.sh Ada` prints `Hello, Ada`. {goal: G1} {verify: check | sh test.sh}
- [E2] `sh greet.sh` still prints `Hello, world`. {goal: G2} {verify: check | sh test.sh}

## Open questions
";

fn step(log: &mut String, dir: &Path, exe: &Path, args: &[&str]) -> Result<String, Refusal> {
    log.push_str(&format!("\n$ iced {}\n", args.join(" ")));
    let out = Command::new(exe)
        .args(args)
        .current_dir(dir)
        .output()
        .map_err(|e| io_error("demo", format!("cannot run iced: {e}")))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    log.push_str(&text);
    if !out.status.success() {
        return Err(Refusal::new(
            "demo",
            "demo-failed",
            format!("`iced {}` failed in the demo repository `{}`:\n{text}", args.join(" "), dir.display()),
            "this is a bug in iced or a problem with this machine (git, bash); the demo repository is kept for a look",
        ));
    }
    Ok(text)
}

fn git(dir: &Path, args: &[&str]) -> Result<(), Refusal> {
    crate::git::run(dir, args)
        .map(|_| ())
        .map_err(|e| io_error("demo", e))
}

pub fn run(args: Args) -> Result<Output, Refusal> {
    let exe = std::env::current_exe().map_err(|e| io_error("demo", e))?;
    let base = match args.dir {
        Some(d) => d,
        None => std::env::temp_dir().join(format!("iced-demo-{}", uuid::Uuid::new_v4().simple())),
    };
    let base = if base.is_absolute() {
        base
    } else {
        current_dir("demo")?.join(base)
    };
    let repo = base.join("greeter");
    std::fs::create_dir_all(&repo)
        .map_err(|e| io_error("demo", format!("create `{}`: {e}", repo.display())))?;
    let write = |name: &str, text: &str| {
        std::fs::write(repo.join(name), text)
            .map_err(|e| io_error("demo", format!("write {name}: {e}")))
    };
    write("greet.sh", "echo \"Hello, world\"\n")?;
    write("test.sh", "[ \"$(sh greet.sh Ada)\" = \"Hello, Ada\" ] && [ \"$(sh greet.sh)\" = \"Hello, world\" ]\n")?;
    let agent = base.join("scripted-agent");
    std::fs::write(&agent, AGENT).map_err(|e| io_error("demo", e))?;
    let script = base.join("agent-script.txt");
    // The scripted agent plays the implementer (fix, commit, report) and then, as a separate
    // read-only validator, answers with a pass and one minor finding.
    let answer = serde_json::json!({
        "verdict": "pass",
        "expectations": [
            {"id": "E1", "result": "pass", "evidence": "`sh greet.sh Ada` prints `Hello, Ada`"},
            {"id": "E2", "result": "pass", "evidence": "`sh greet.sh` prints `Hello, world`"}
        ],
        "failures": [{"id": "F1", "triggered": false, "evidence": "a given name is used"}],
        "constraints": [{"id": "C1", "violated": false, "evidence": "no argument still works"}],
        "findings": [{
            "file_path": "test.sh", "criterion_ref": "E1", "finding_category": "test-coverage",
            "severity": "S3-minor", "summary": "test.sh does not try a name with a space",
            "failure_scenario": {"inputs": "sh greet.sh 'Ada Lovelace'", "expected": "Hello, Ada Lovelace", "actual": "not tested"}
        }]
    });
    std::fs::write(
        &script,
        format!("role implementer\ncommit greet.sh echo \"Hello, ${{1:-world}}\"\nreport-ok E1 E2\nrole validator\nreport {answer}\n"),
    )
    .map_err(|e| io_error("demo", e))?;

    git(&repo, &["init", "-q", "-b", "main"])?;
    git(&repo, &["config", "user.name", "Demo Person"])?;
    git(&repo, &["config", "user.email", "demo@iced.invalid"])?;
    git(&repo, &["add", "."])?;
    git(
        &repo,
        &[
            "commit",
            "-q",
            "-m",
            "greeter: always says hello to the world",
        ],
    )?;

    let mut log = format!(
        "A demo repository at `{}` with a script that greets the world.\n",
        repo.display()
    );
    step(&mut log, &repo, &exe, &["init"])?;
    let created = step(
        &mut log,
        &repo,
        &exe,
        &["new", "bug: greet ignores the name it is given", "--json"],
    )?;
    let id = serde_json::from_str::<serde_json::Value>(created.trim())
        .ok()
        .and_then(|v| v["id"].as_str().map(str::to_owned))
        .ok_or_else(|| io_error("demo", "`iced new` printed no id"))?;
    // The person writes the contract (here: the demo writes it for them).
    let unit = repo.join("intent").join(&id).join("iced.md");
    let text = crate::repo::read_text(&unit).map_err(|e| io_error("demo", e))?;
    let end = text[3..]
        .find("\n---\n")
        .map(|i| i + 8)
        .ok_or_else(|| io_error("demo", "the new unit has no frontmatter"))?;
    std::fs::write(&unit, format!("{}{UNIT_BODY}", &text[..end]))
        .map_err(|e| io_error("demo", e))?;
    log.push_str(&format!(
        "\n(the person writes the contract into intent/{id}/iced.md)\n"
    ));
    step(&mut log, &repo, &exe, &["lint", &id, "--stage", "signoff"])?;
    step(&mut log, &repo, &exe, &["approve", &id, "--yes"])?;
    // The loop's settings: the scripted agent as the implementer, the test as the definition of done.
    let config_path = repo.join(".iced").join("config.json");
    let mut config: serde_json::Value = serde_json::from_slice(
        &crate::store::read_limited(&config_path, 1 << 20).map_err(|e| io_error("demo", e))?,
    )
    .map_err(|e| io_error("demo", e))?;
    config["verify"]["commands"] = serde_json::json!(["sh test.sh"]);
    config["runners"] = serde_json::json!({"scripted": {"kind": "command", "argv": ["bash", agent, script, "{output_file}"], "timeoutSec": 60}});
    config["roles"] = serde_json::json!({"implementer": {"runner": "scripted"}, "validator": {"runner": "scripted"}});
    config["land"] = serde_json::json!({"mode": "merge", "strategy": "merge"});
    std::fs::write(
        &config_path,
        format!(
            "{}\n",
            serde_json::to_string_pretty(&config).expect("serialises")
        ),
    )
    .map_err(|e| io_error("demo", e))?;
    log.push_str("\n(.iced/config.json: the built-in scripted agent implements and, separately and read-only, validates; `sh test.sh` is the definition of done)\n");
    // The person wrote this config: they trust what it runs, in this checkout (SPEC 24.10).
    step(&mut log, &repo, &exe, &["trust"])?;
    git(&repo, &["add", "-A"])?;
    git(&repo, &["commit", "-q", "-m", &format!("approve {id}")])?;
    log.push_str(&format!("\n$ git commit -m \"approve {id}\"\n"));
    if let Some(n) = args.kill_at {
        kill_build_at(&mut log, &repo, &exe, &id, n)?;
    }
    step(&mut log, &repo, &exe, &["build", &id])?;
    step(&mut log, &repo, &exe, &["status", &id])?;
    let history =
        crate::git::run(&repo, &["log", "--oneline", "--graph", "-8"]).unwrap_or_default();
    log.push_str(&format!("\n$ git log --oneline --graph\n{history}\n"));
    // The run the build delivered, as `run show` finds it: it has left the state for its record.
    let run = crate::repo::Repo::discover(&repo, "demo")
        .and_then(|r| {
            let ctx = crate::run::Ctx::new(&r, "demo")?;
            crate::run::view::show(&ctx, "run-")
        })
        .map(|shown| match shown {
            crate::run::view::Shown::Live(live) => live.run.id,
            crate::run::view::Shown::Recorded(recorded) => recorded.run.id,
        })
        .unwrap_or_default();
    log.push_str(&format!(
        "\nLanded: `main` now has the fix and the unit's close (status done, evidence.md, verify.json); the lane's worktree and branch are gone, and the run's record stays. The validator's minor finding is noted in evidence.md.\n\nLook around:\n  cd {}\n  iced run show {run}\n  iced status {id}\n  git log --stat -3\n\nThe demo repository is kept at `{}`; remove it when done.",
        repo.display(),
        base.display()
    ));
    Ok(Output::new(
        serde_json::json!({"dir": base, "repo": repo, "unit": id, "run": run, "status": "landed"}),
        log,
    ))
}

/// Start `iced build`, kill it with SIGKILL after its `n`th step report, and say so: the next
/// build resumes the same run from its recorded steps.
fn kill_build_at(
    log: &mut String,
    dir: &Path,
    exe: &Path,
    id: &str,
    n: usize,
) -> Result<(), Refusal> {
    use std::io::BufRead;
    log.push_str(&format!(
        "\n$ iced build {id}   (killed with SIGKILL after step {n})\n"
    ));
    let mut child = Command::new(exe)
        .args(["build", id, "--json"])
        .current_dir(dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| io_error("demo", format!("cannot run iced: {e}")))?;
    let stdout = child.stdout.take().expect("piped");
    let mut seen = 0;
    for line in std::io::BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
    {
        seen += 1;
        let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
        log.push_str(&format!(
            "  step {seen}: {} {} {}\n",
            v["stage"].as_str().unwrap_or(""),
            v["action"].as_str().unwrap_or(""),
            v["status"].as_str().unwrap_or("")
        ));
        if seen >= n {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    log.push_str("  killed. Whatever it launched runs on; what it recorded stays.\n");
    Ok(())
}
