//! Snapshots of every refusal code the command line produces (SPEC 15, 20.x, 23), each as text and
//! as `--json`, named `refused_<code>`. This module holds the codes of the authoring verbs, of
//! admitting a unit and of the state file; the codes a live run gives are snapshot where the run
//! is (`snap_step`, `snap_land`, `snap_project`). [`EVERY_CODE`] is the list, and a test checks
//! that each one has its snapshot.

use crate::env::{run, unit_file, unit_text, TestEnv, GOOD_BODY};
use crate::snap::{assert_read, assert_refused, json_block, refusal_blocks, text_block};
use serde_json::json;

/// Where a refusal code's snapshot is made: in a test module, or nowhere, and why.
pub enum Made {
    In(&'static str),
    Not(&'static str),
}
use Made::{In, Not};

/// Every refusal code iced documents or passes to a refusal, and where its snapshot is made;
/// from SPEC sections 15, 20.3, 20.x, 23.2 and 23.6 and from `grep -rn '"[a-z]*-[a-z-]*"' src/`
/// at the refusals it builds.
pub const EVERY_CODE: &[(&str, Made)] = &[
    // SPEC 15
    ("not-initialized", In("snap_refusals")),
    ("unit-not-found", In("snap_refusals")),
    ("unit-ambiguous", In("snap_refusals")),
    ("unit-unreadable", In("snap_refusals")),
    ("unit-not-utf8", In("snap_refusals")),
    ("unit-too-large", In("snap_refusals")),
    ("path-symlink", In("snap_refusals")),
    ("not-a-regular-file", In("snap_refusals")),
    ("worktree-replaced", In("hostile_lane")),
    ("config-invalid", In("snap_refusals")),
    ("lint-errors", In("snap_refusals")),
    ("transition-illegal", In("snap_refusals")),
    ("unit-held", In("snap_refusals")),
    ("unit-closed", In("snap_refusals")),
    ("parent-not-found", In("snap_refusals")),
    ("no-active-unit", In("snap_refusals")),
    ("confirmation-needed", In("snap_refusals")),
    ("config-untrusted", In("snap_refusals")),
    ("confinement-unavailable", In("confined")),
    ("rules-changed", In("rules")),
    ("trust-invalid", In("snap_refusals")),
    ("remote-refused", In("hostile_remote")),
    ("memory-path-refused", In("hostile_memory")),
    ("usage", In("snap_refusals")),
    ("io-error", In("snap_refusals")),
    ("host-settings-invalid", In("snap_refusals")),
    ("guard-input", In("snap_refusals")),
    // SPEC 20.3: admit
    ("not-a-git-repo", In("snap_refusals")),
    ("unit-delivered", In("snap_step")),
    ("unit-not-approved", In("snap_refusals")),
    ("open-questions", In("snap_refusals")),
    ("contract-changed", In("snap_refusals")),
    ("unit-uncommitted", In("snap_refusals")),
    ("unit-claimed", In("snap_refusals")),
    ("claim-remote-unreachable", In("claims_remote")),
    ("unit-done-on-remote", In("claims_remote")),
    ("runner-missing", In("snap_refusals")),
    ("planner-missing", In("auto_plan")),
    ("plan-not-draft", In("auto_plan")),
    ("plan-draft-changed", In("hostile_plan")),
    ("dod-program-missing", In("config_keys")),
    ("ceiling-full", In("snap_step")),
    // SPEC 20.x: run verbs, receipts, the state
    ("no-live-run", In("snap_step")),
    ("run-ambiguous", In("snap_step")),
    ("run-not-found", In("snap_step")),
    ("state-locked", In("snap_step")),
    ("state-invalid", In("snap_refusals")),
    ("state-newer", In("snap_refusals")),
    ("inputs-changed", In("snap_step")),
    ("receipt-path", In("snap_step")),
    ("receipt-superseded", In("snap_step")),
    ("report-invalid", In("snap_step")),
    ("report-forged", In("snap_step")),
    ("report-too-large", In("snap_step")),
    ("answer-invalid", In("snap_step")),
    ("answer-forged", In("snap_step")),
    ("answer-too-large", In("snap_step")),
    ("answer-missing", In("snap_step")),
    ("run-ended", In("snap_step")),
    ("time-invalid", In("snap_step")),
    ("pace-changed", In("snap_step")),
    (
        "run-paused",
        Not("SPEC 20.x names it, but nothing in src/ refuses with it: a step of a paused run answers `paused` (exit 0)"),
    ),
    ("state-full", In("snap_refusals")),
    // SPEC 20.7: escalations and questions
    ("escalation-open", In("escalation")),
    ("escalation-none", In("escalation")),
    ("escalation-kind", In("escalation")),
    ("proposal-none", In("escalation")),
    ("proposal-invalid", In("escalation")),
    ("question-unknown", In("escalation")),
    // SPEC 23: landing and project runs
    ("pr-armed", In("snap_land")),
    ("pr-not-open", In("snap_land")),
    ("project-empty", In("snap_refusals")),
    ("dependency-unknown", In("snap_refusals")),
    ("dependency-cycle", In("snap_refusals")),
    ("dependency-open", In("snap_refusals")),
    ("project-needs-landing", In("snap_refusals")),
    ("lane-landing", In("snap_project")),
    ("lane-final", In("snap_project")),
    ("lane-not-held", In("snap_project")),
    ("lane-not-found", In("snap_project")),
    ("lane-ambiguous", In("snap_project")),
    (
        "lane-touches-protected",
        Not("not a refusal of a verb (SPEC 24.2): the code of a receipt's gap, one per denied path, seen in the receipt's `missing`"),
    ),
    // In src/ only
    (
        "answer-unparsable",
        Not("not a refusal: an answer with no JSON in it is taken, as no answer (that lens needs a person)"),
    ),
    ("validator-not-distinct", In("snap_refusals")),
    ("demo-failed", In("snap_refusals")),
    ("timeline-unwritable", In("timeline")),
    // SPEC 3, 20.13: the queue
    ("name-reserved", In("queue")),
    ("queue-empty", In("queue")),
    ("drain-needs-runner", In("queue")),
    ("review-no-target", In("review")),
    ("review-range-invalid", In("review")),
    ("memory-needs-runner", In("memory")),
    ("memory-outside", In("memory")),
    ("memory-empty", In("memory")),
    ("memory-too-large", In("hostile_inputs")),
    // SPEC 20.18: tool errors of `iced mcp`
    ("tool-not-offered", In("mcp")),
    ("mcp-lane-unknown", In("mcp")),
];

/// Every code in [`EVERY_CODE`] that a test produces has its snapshot, from the module named; a
/// code said not to be produced has none, and says why; every code of SPEC 15's table is listed.
#[test]
fn every_refusal_code_has_its_snapshot() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cli/snapshots");
    let snapshots: Vec<String> = std::fs::read_dir(&dir)
        .expect("tests/cli/snapshots")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let mut wrong = Vec::new();
    for (i, (code, made)) in EVERY_CODE.iter().enumerate() {
        if EVERY_CODE[..i].iter().any(|(c, _)| c == code) {
            wrong.push(format!("{code}: listed twice"));
        }
        let suffix = format!("__refused_{code}.snap");
        match made {
            In(module) if !snapshots.contains(&format!("cli__{module}{suffix}")) => {
                wrong.push(format!("{code}: no snapshot from {module}"));
            }
            Not(why) if why.is_empty() || snapshots.iter().any(|s| s.ends_with(&suffix)) => {
                wrong.push(format!(
                    "{code}: said not to be produced, yet has a snapshot"
                ));
            }
            _ => {}
        }
    }
    // SPEC 15's table: rows "| `code` | exit | when |".
    let spec = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("spec/SPEC.md"),
    )
    .unwrap();
    for row in spec.lines().filter_map(|l| l.strip_prefix("| `")) {
        let Some((code, rest)) = row.split_once("` | ") else {
            continue;
        };
        let exit_column = rest.split(' ').next().unwrap_or("");
        if exit_column.len() == 1
            && exit_column.chars().all(|c| c.is_ascii_digit())
            && !EVERY_CODE.iter().any(|(c, _)| *c == code)
        {
            wrong.push(format!("{code}: in SPEC 15's table, not in EVERY_CODE"));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// The authoring verbs' refusals, in one initialized repository (and one without iced).
#[test]
fn authoring_refusals_read_well() {
    // A git repository where iced was never set up; `init --host claude` that cannot merge its
    // hook into the settings there is refused, writing nothing.
    let bare = TestEnv::new();
    assert_refused!(&bare, "not-initialized", 3, &["list"]);
    bare.write(".claude/settings.json", "[1, 2]");
    assert_refused!(
        &bare,
        "host-settings-invalid",
        3,
        &["init", "--host", "claude"]
    );

    let env = TestEnv::initialized();
    assert_refused!(&env, "no-active-unit", 3, &["status"]);
    assert_refused!(&env, "unit-not-found", 3, &["status", "999"]);
    for id in ["007-login-page", "008-login-api"] {
        env.write(&unit_file(id), unit_text(id));
    }
    assert_refused!(&env, "unit-ambiguous", 3, &["status", "login"]);

    let draft = env.good_unit("session timeout");
    assert_refused!(&env, "confirmation-needed", 4, &["approve", &draft]);
    assert_refused!(&env, "transition-illegal", 3, &["accept", &draft]);
    assert_refused!(
        &env,
        "parent-not-found",
        3,
        &["new", "dark mode", "--parent", "999"]
    );
    let flawed = env.new_unit("dark mode");
    env.set_body(
        &flawed,
        &GOOD_BODY.replace(
            "- [Q1] How long is idle? -> A: 30 minutes.",
            "- [Q1] How long is idle?",
        ),
    );
    assert_refused!(&env, "lint-errors", 3, &["approve", &flawed, "--yes"]);
    let held = env.good_unit("remember me");
    env.iced_json(&["hold", &held, "legal has not read it"])
        .ok();
    assert_refused!(&env, "unit-held", 3, &["approve", &held, "--yes"]);
    let dropped = env.good_unit("export as csv");
    env.iced_json(&["abandon", &dropped]).ok();
    assert_refused!(&env, "unit-closed", 3, &["approve", &dropped, "--yes"]);

    // Unit files iced cannot read.
    let unreadable = env.good_unit("binary unit");
    let mut bytes = env.read_bytes(&unit_file(&unreadable));
    bytes.splice(20..20, *b"\0");
    env.write(&unit_file(&unreadable), &bytes);
    assert_refused!(&env, "unit-unreadable", 3, &["status", &unreadable]);
    let latin1 = env.good_unit("latin one");
    let mut bytes = env.read_bytes(&unit_file(&latin1));
    bytes.extend_from_slice(b"- [code] caf\xe9 latin-1\n");
    env.write(&unit_file(&latin1), &bytes);
    assert_refused!(&env, "unit-not-utf8", 3, &["status", &latin1]);
    let large = env.good_unit("very large");
    let mut text = env.read(&unit_file(&large));
    let line = "- [code] padding padding padding padding padding\n";
    text.push_str(&line.repeat(1024 * 1024 / line.len() + 1));
    env.write(&unit_file(&large), &text);
    assert_refused!(&env, "unit-too-large", 3, &["status", &large]);

    // Files iced writes or reads that are not what they should be.
    let log = env.path(&format!("intent/{draft}/decisions.md"));
    let elsewhere = env.outside("someone-elses.md");
    std::fs::write(&elsewhere, "someone else's file\n").unwrap();
    std::fs::remove_file(&log).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &log).unwrap();
    assert_refused!(
        &env,
        "path-symlink",
        3,
        &[
            "decision",
            &draft,
            "--decision",
            "keep 30 minutes",
            "--why",
            "the policy says so"
        ]
    );
    let metrics = env.path(".iced/metrics.jsonl");
    let _ = std::fs::remove_file(&metrics);
    std::fs::create_dir(&metrics).unwrap();
    assert_refused!(&env, "not-a-regular-file", 3, &["stats"]);
    std::fs::remove_dir(&metrics).unwrap();
    // `.iced/active` is a directory: `use` cannot replace it.
    let active = env.path(".iced/active");
    let _ = std::fs::remove_file(&active);
    std::fs::create_dir(&active).unwrap();
    assert_refused!(&env, "io-error", 1, &["use", &draft]);
    std::fs::remove_dir(&active).unwrap();

    // The config, and the person's trust store.
    let config = env.read(".iced/config.json");
    env.write(".iced/config.json", r#"{"autonomy": "high"}"#);
    assert_refused!(&env, "config-invalid", 3, &["list"]);
    env.write(".iced/config.json", config);
    // (A config that runs nothing has nothing to trust, and the store is not read.)
    env.patch_config(&json!({"verify": {"commands": ["true"]}}));
    let store = env.outside("config").join("iced/trust.json");
    std::fs::write(&store, "{not json").unwrap();
    assert_refused!(&env, "trust-invalid", 3, &["trust"]);

    // Usage: arguments clap refuses (in text clap's own message), and a bad `ICED_NOW`.
    // In text a usage error is clap's message (SPEC 15: only `--json` gives it the refusal's shape).
    let args = ["approve"];
    let text = env.iced(&args);
    assert_eq!(text.code, 2, "{text:#?}");
    let json = env.iced_json(&args);
    json.refused(2, "usage");
    assert_read!(
        &env,
        "refused_usage",
        format!("{}\n{}", text_block(&args, &text), json_block(&args, &json))
    );
    let args = ["list"];
    let with_bad_now = |json: bool| {
        let mut cmd = env.command();
        cmd.env("ICED_NOW", "yesterday").args(args);
        if json {
            cmd.arg("--json");
        }
        run(&mut cmd)
    };
    assert_read!(
        &env,
        "refused_usage_iced_now",
        format!(
            "ICED_NOW=yesterday\n{}",
            refusal_blocks(&args, &with_bad_now(false), &with_bad_now(true), 2, "usage")
        )
    );

    // `iced guard` reads one tool call on standard input.
    let args = ["guard"];
    let guard = |json: bool| {
        let mut all = args.to_vec();
        if json {
            all.push("--json");
        }
        crate::guard::piped(&env, &all, br#"{"tool": "write", "content": "x"}"#, &[])
    };
    assert_read!(
        &env,
        "refused_guard-input",
        format!(
            "standard input: {{\"tool\": \"write\", \"content\": \"x\"}}\n{}",
            refusal_blocks(&args, &guard(false), &guard(true), 2, "guard-input")
        )
    );
}

/// What `iced build` refuses before it writes anything (SPEC 20.3), in one repository; the
/// repository without a commit is another.
#[test]
fn admit_refusals_read_well() {
    let unborn = TestEnv::without_git();
    unborn.git(&["init", "-q", "-b", "main"]);
    unborn.iced(&["init"]).ok();
    let id = unborn.good_unit("session timeout");
    assert_refused!(&unborn, "not-a-git-repo", 3, &["build", &id]);

    let (env, ready) =
        TestEnv::buildable(json!({"verify": {"independent": false, "commands": []}}));
    let draft = env.good_unit("a draft");
    let questioned = env.approved_unit("a question added");
    let text = env.read(&unit_file(&questioned));
    env.write(
        &unit_file(&questioned),
        format!("{}\n- [Q9] Do refresh tokens rotate?\n", text.trim_end()),
    );
    let edited = env.approved_unit("an edited contract");
    let text = env.read(&unit_file(&edited));
    env.write(
        &unit_file(&edited),
        text.replace(
            "[E1] Activity extends the session.",
            "[E1] Activity extends the session by an hour.",
        ),
    );
    let other = env.approved_unit("another ready unit");
    env.commit_all("units that are not ready");
    let uncommitted = env.approved_unit("approved, not committed");

    assert_refused!(&env, "unit-not-approved", 3, &["build", &draft]);
    assert_refused!(&env, "open-questions", 3, &["build", &questioned]);
    assert_refused!(&env, "contract-changed", 3, &["build", &edited]);
    assert_refused!(&env, "unit-uncommitted", 3, &["build", &uncommitted]);

    // A claim of a live run (another unit's run, its claim copied to this unit): obeyed. One of
    // an ended run blocks nobody (loop_refusals.rs).
    let (_, live) = crate::loop_e2e::build(&env, &other, &["--no-wait", "--session", "X"], 0);
    let live_run = live["run"].as_str().unwrap().to_owned();
    let claim = std::fs::read(env.claim_path(&other)).unwrap();
    std::fs::write(env.claim_path(&ready), &claim).unwrap();
    assert_refused!(
        &env,
        "unit-claimed",
        3,
        &["build", &ready, "--session", "Y"]
    );
    std::fs::remove_file(env.claim_path(&ready)).unwrap();
    env.iced_json(&["run", "abandon", &live_run]).ok();

    // A validator that must run another model than the implementer, and names none.
    let config = env.read(".iced/config.json");
    env.patch_config(&json!({
        "verify": {"independent": true},
        "roles": {"validator": {"distinct_model": true}}
    }));
    assert_refused!(&env, "validator-not-distinct", 3, &["build", &ready]);
    env.write(".iced/config.json", &config);
    env.trust_config();

    // What the config would run is not trusted; then a runner whose program is nowhere.
    let config = env.read(".iced/config.json");
    let mut changed: serde_json::Value = serde_json::from_str(&config).unwrap();
    changed["verify"]["commands"] = json!(["cargo test"]);
    env.write(".iced/config.json", changed.to_string());
    assert_refused!(&env, "config-untrusted", 3, &["build", &ready]);
    env.write(".iced/config.json", config);
    env.patch_config(&json!({
        "runners": {"ghost": {"kind": "command", "argv": ["/nonexistent/agent", "{prompt_file}"]}},
        "roles": {"implementer": {"runner": "ghost"}}
    }));
    assert_refused!(&env, "runner-missing", 3, &["build", &ready]);
}

/// A state file iced cannot read (damaged, or from a newer iced), and one it would not write: a
/// step that would take it over the 4 MiB a read accepts.
#[test]
fn state_file_refusals_read_well() {
    use iced::run::state::{State, STATE_LIMIT};
    let (env, id) = TestEnv::buildable(json!({"verify": {"independent": false, "commands": []}}));
    let (_, last) = crate::loop_e2e::build(&env, &id, &["--no-wait"], 0);
    let run_id = last["run"].as_str().unwrap().to_owned();
    // The run's session grown (by hand) until the state is a few bytes under the limit; setting a
    // pause time adds more than that.
    let mut state = State::parse(&env.read_bytes(".iced/run/state.json")).unwrap();
    let size = |s: &State| serde_json::to_vec_pretty(s).unwrap().len() as u64 + 1;
    state.runs.get_mut(&run_id).unwrap().session = Some(String::new());
    let pad = STATE_LIMIT - 8 - size(&state);
    state.runs.get_mut(&run_id).unwrap().session = Some("s".repeat(pad as usize));
    assert_eq!(size(&state), STATE_LIMIT - 8);
    let mut text = serde_json::to_vec_pretty(&state).unwrap();
    text.push(b'\n');
    env.write(".iced/run/state.json", &text);
    assert_refused!(
        &env,
        "state-full",
        3,
        &["run", "pause", &run_id, "--until", "2099-01-01T00:00:00Z"]
    );
    assert!(
        env.read_bytes(".iced/run/state.json") == text,
        "the state was written"
    );

    env.write(".iced/run/state.json", "{\"schema\": 1, \"runs\": {");
    assert_refused!(&env, "state-invalid", 3, &["run", "list"]);
    env.write(".iced/run/state.json", "{\"schema\": 99, \"runs\": {}}\n");
    assert_refused!(&env, "state-newer", 3, &["run", "list"]);
}

/// `iced demo` when the machine fails it: here a `git` that makes no worktree.
#[test]
fn a_failed_demo_reads_well() {
    let env = TestEnv::new();
    let path = crate::env::git_shim(
        &env.outside("bin"),
        "case \" $* \" in *' worktree add '*) echo 'fatal: no worktrees today' >&2; exit 128;; esac\n",
    );
    let dir = env.outside("demo");
    let demo = |json: bool| {
        let mut cmd = env.command();
        cmd.env("PATH", &path)
            .args(["demo", "--dir", dir.to_str().unwrap()]);
        if json {
            cmd.arg("--json");
        }
        let out = run(&mut cmd);
        // The demo keeps its repository for a look; the next one starts afresh.
        std::fs::remove_dir_all(&dir).unwrap();
        out
    };
    let args = ["demo", "--dir", dir.to_str().unwrap()];
    assert_read!(
        &env,
        "refused_demo-failed",
        format!(
            "(a `git` on PATH that fails `git worktree add`)\n{}",
            refusal_blocks(&args, &demo(false), &demo(true), 3, "demo-failed")
        )
    );
}

/// What admit refuses of a project (SPEC 23.6): one repository, each project built in turn.
#[test]
fn project_admit_refusals_read_well() {
    let env = TestEnv::initialized();
    let child = |project: &str, title: &str| -> String {
        let id = env.iced_json(&["child", project, title]).ok().json()["id"]
            .as_str()
            .unwrap()
            .to_owned();
        env.set_body(&id, GOOD_BODY);
        id
    };
    let empty = env.approved_unit("project nothing approved");
    child(&empty, "a draft child");

    let unknown = env.approved_unit("project with an unknown dependency");
    let u = child(&unknown, "depends on nothing there");
    env.set_field(&u, "depends", "999");
    env.iced_json(&["approve", &u, "--yes"]).ok();

    let cycle = env.approved_unit("project of a cycle");
    let c1 = child(&cycle, "first of two");
    let c2 = child(&cycle, "second of two");
    env.set_field(&c1, "depends", &c2);
    env.set_field(&c2, "depends", &c1);
    for c in [&c1, &c2] {
        env.iced_json(&["approve", c, "--yes"]).ok();
    }

    let open = env.approved_unit("project waiting outside");
    let outside = env.approved_unit("the end is logged");
    let o = child(&open, "after the log");
    env.set_field(&o, "depends", &outside);
    env.iced_json(&["approve", &o, "--yes"]).ok();

    let unlanded = env.approved_unit("project without landing");
    let l1 = child(&unlanded, "lands first");
    let l2 = child(&unlanded, "builds on it");
    env.set_field(&l2, "depends", &l1);
    for c in [&l1, &l2] {
        env.iced_json(&["approve", c, "--yes"]).ok();
    }
    env.patch_config(&json!({"verify": {"independent": false, "commands": []}}));
    env.commit_all("projects");

    assert_refused!(&env, "project-empty", 3, &["build", &empty]);
    assert_refused!(&env, "dependency-unknown", 3, &["build", &unknown]);
    assert_refused!(&env, "dependency-cycle", 3, &["build", &cycle]);
    assert_refused!(&env, "dependency-open", 3, &["build", &open]);
    assert_refused!(&env, "project-needs-landing", 3, &["build", &unlanded]);
}
