//! A lane's agents as adversaries (SPEC 24.2 to 24.5): what an agent *changes* after it was judged,
//! what it claims in a fix round, what a validator or the refuter answers, and how much of it
//! reaches the state file. Each test names the failure of the issue it pins.

use crate::env::{kept, TestEnv};
use crate::loop_e2e::{
    agent_commit, build, hand_in, host_run, run_show, state_fingerprint, step, step_until, str_of,
    worktree_of, GOOD_REPORT,
};
use crate::validation::{
    build_to_end, confirm, finding, implementer, lane_dir, section, validated, FAIL_S2, PASS,
};
use serde_json::{json, Value};
use std::path::PathBuf;

fn branch(id: &str) -> String {
    format!("iced/{id}/{id}")
}

/// Every commit subject on `rev`, newest first.
fn subjects(env: &TestEnv, rev: &str) -> Vec<String> {
    env.git_out(&["log", "--format=%s", rev])
        .lines()
        .map(str::to_owned)
        .collect()
}

/// No delivery commit on the lane branch: nothing was delivered.
fn assert_nothing_delivered(env: &TestEnv, id: &str) {
    let log = subjects(env, &branch(id));
    assert!(
        !log.iter().any(|s| s.starts_with("iced: deliver")),
        "nothing was delivered: {log:?}"
    );
}

fn lane_of(show: &Value) -> &Value {
    &show["lanes"][0]
}

/// A host-driven run whose implementer has committed its change and not yet reported: the run,
/// the handed-out implementer and its worktree.
fn host_run_committed(env: &TestEnv, id: &str) -> (String, Value, PathBuf) {
    let (run, agent) = host_run(env, id);
    let worktree = worktree_of(env, id);
    agent_commit(
        &worktree,
        "src/session.rs",
        "sessions refresh on activity\n",
    );
    (run, agent, worktree)
}

/// A host-driven unit with one `full` validator and no refuter, the host having handed in the
/// implementer's report and a passing answer: the next `implement step` delivers. Returns the run
/// and the judged head.
fn judged_by_host(patch: Value) -> (TestEnv, String, String, String) {
    let mut config = json!({"verify": {"independent": true, "lenses": ["full"], "commands": [], "refute": false}});
    crate::env::merge_json(&mut config, &patch);
    let (env, id) = TestEnv::buildable(config);
    let (run, agent, _) = host_run_committed(&env, &id);
    let receipt = str_of(&agent, "receipt_path").to_owned();
    std::fs::write(&receipt, GOOD_REPORT).unwrap();
    hand_in(&env, &receipt).ok();
    let v = step_until(&env, |s| s["action"] == "start_agent");
    assert_eq!(v["role"], "validator", "{v:#}");
    std::fs::write(str_of(&v, "receipt_path"), PASS).unwrap();
    hand_in(&env, str_of(&v, "receipt_path")).ok();
    // The loop checks the validator's tree and judges: the verdict is in.
    step_until(&env, |s| {
        s["next"]
            .as_str()
            .is_some_and(|n| n.contains("call again to deliver"))
    });
    let judged = env.git_out(&["rev-parse", &branch(&id)]).trim().to_owned();
    (env, id, run, judged)
}

/// Failure 2: "A commit added to the lane branch after the validators judged it landed, and
/// `verify.json` named it as the validated head." Now nothing unjudged is delivered: the attempt
/// ends, the next brief names the commit, and what is finally delivered was judged.
#[test]
fn a_commit_added_after_the_verdict_is_not_delivered_but_judged_again() {
    let (env, id, run, judged) = judged_by_host(json!({}));
    let worktree = worktree_of(&env, &id);
    // The implementer, still running after its report, adds a commit.
    agent_commit(&worktree, "src/backdoor.rs", "let anyone in\n");
    let after = env.git_out(&["rev-parse", &branch(&id)]).trim().to_owned();

    // The next host agent to start is a fresh implementer of attempt 2, not a delivery.
    let agent = step_until(&env, |s| s["action"] == "start_agent");
    assert_eq!(agent["role"], "implementer", "{agent:#}");
    assert_eq!(agent["attempt"], 2, "{agent:#}");
    assert_nothing_delivered(&env, &id);
    assert_eq!(
        env.git_out(&["rev-parse", &branch(&id)]).trim(),
        after,
        "the branch is as the agent left it"
    );
    let brief = std::fs::read_to_string(lane_dir(&env, &run, &id).join("brief-2.md")).unwrap();
    assert!(
        brief.contains("the lane moved after it was judged")
            && brief.contains(&judged[..12])
            && brief.contains("agent: src/backdoor.rs"),
        "the brief names what moved:\n{brief}"
    );

    // Attempt 2 is judged on the branch as it is now, and that is what is delivered.
    let receipt = str_of(&agent, "receipt_path").to_owned();
    std::fs::write(&receipt, GOOD_REPORT).unwrap();
    hand_in(&env, &receipt).ok();
    let v = step_until(&env, |s| s["action"] == "start_agent");
    assert_eq!(
        (v["role"].as_str(), v["attempt"].as_u64()),
        (Some("validator"), Some(2))
    );
    let prompt = std::fs::read_to_string(str_of(&v, "brief")).unwrap();
    assert!(
        prompt.contains(&after),
        "the validator judges {after}:\n{prompt}"
    );
    std::fs::write(str_of(&v, "receipt_path"), PASS).unwrap();
    hand_in(&env, str_of(&v, "receipt_path")).ok();
    let end = step_until(&env, |s| s["action"] == "delivered");
    assert_eq!(end["run"], run.as_str());
    let verify: Value = serde_json::from_str(
        &env.git_out(&["show", &format!("{}:intent/{id}/verify.json", branch(&id))]),
    )
    .unwrap();
    assert_eq!(verify["head"], after.as_str(), "{verify:#}");
    let tree = env.git_out(&["rev-parse", &format!("{after}^{{tree}}")]);
    assert_eq!(verify["tree"], tree.trim(), "{verify:#}");
    assert_eq!(
        env.git_out(&["rev-parse", &format!("{}~1", branch(&id))])
            .trim(),
        after,
        "the delivery is on top of the judged head"
    );
}

/// The implementer, still running, adds a commit; stepped on, the lane blocks naming it.
fn commit_backdoor_and_block(env: &TestEnv, id: &str) {
    agent_commit(&worktree_of(env, id), "src/backdoor.rs", "let anyone in\n");
    let end = step_until(env, |s| s["action"] == "blocked");
    let next = str_of(&end, "next");
    assert!(
        next.contains("moved after it was judged") && next.contains("agent: src/backdoor.rs"),
        "{end:#}"
    );
}

/// The same with the attempts spent: the lane blocks, naming the commit, and nothing is delivered.
#[test]
fn a_commit_added_after_the_last_verdict_blocks_the_lane_naming_it() {
    let (env, id, _run, _judged) = judged_by_host(json!({"verify": {"maxAttempts": 1}}));
    commit_backdoor_and_block(&env, &id);
    assert_nothing_delivered(&env, &id);
}

/// After the close is committed, a commit on the lane branch never lands: the landing blocks
/// naming it, and the target does not move.
#[test]
fn a_commit_added_after_the_delivery_does_not_land() {
    let (env, id, _run, _judged) =
        judged_by_host(json!({"land": {"mode": "merge", "strategy": "ff"}}));
    let main_before = env.git_out(&["rev-parse", "main"]).trim().to_owned();
    // Step until the close is committed, then the agent commits again.
    step_until(&env, |s| {
        s["next"]
            .as_str()
            .is_some_and(|n| n.contains("the close is committed"))
    });
    commit_backdoor_and_block(&env, &id);
    assert_eq!(
        env.git_out(&["rev-parse", "main"]).trim(),
        main_before,
        "the target did not move"
    );
    assert!(!env.path("src/backdoor.rs").exists());
}

/// Failure 3: "A fix-round disposition `applied` citing a commit of an earlier attempt was
/// accepted." Now it is a gap of the receipt, and so is an applied commit that changes nothing.
#[test]
fn an_applied_disposition_must_cite_a_commit_of_this_attempt_that_changes_a_file() {
    for (fix, why) in [
        // No new commit: the disposition cites attempt 1's head.
        (
            "report-fix {lane}-F1 E1 E2",
            "already there when the finding was made",
        ),
        (
            "git commit -q --allow-empty -m nothing\nreport-fix {lane}-F1 E1 E2",
            "changes no file",
        ),
    ] {
        let script = implementer(&section("2", "implementer", "*", fix))
            + &section("1", "validator", "full", &format!("report {FAIL_S2}"))
            + &section("*", "refuter", "*", &format!("report {}", confirm(&[1])));
        let (env, id) = validated(&script, &["full"], json!({"verify": {"maxAttempts": 2}}));
        let (_, run) = build_to_end(&env, &id, 4, "blocked");
        let show = run_show(&env, &run);
        let reason = lane_of(&show)["reason"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            reason.contains(&format!("{id}-F1 is `applied` with commit")) && reason.contains(why),
            "{why}: {reason}"
        );
        assert_eq!(finding(&show, &format!("{id}-F1"))["status"], "open");
    }
}

/// Failure 4: "A refuter's `confirmed` with no failure scenario was accepted; a validator answer
/// about an expectation id the unit does not have (`E9`) was accepted." A host's answer is refused
/// at once, recording nothing.
#[test]
fn a_host_answer_about_an_unknown_id_or_a_bare_confirmation_is_refused() {
    let (env, id) = TestEnv::buildable(
        json!({"verify": {"independent": true, "lenses": ["full"], "commands": []}}),
    );
    let (_, agent) = host_run(&env, &id);
    agent_commit(&worktree_of(&env, &id), "src/session.rs", "fixed\n");
    let receipt = str_of(&agent, "receipt_path").to_owned();
    std::fs::write(&receipt, GOOD_REPORT).unwrap();
    hand_in(&env, &receipt).ok();
    let v = step_until(&env, |s| s["action"] == "start_agent");
    let answer = str_of(&v, "receipt_path").to_owned();
    std::fs::write(
        &answer,
        PASS.replacen(r#"{"id": "E2""#, r#"{"id": "E9""#, 1),
    )
    .unwrap();
    let before = state_fingerprint(&env);
    let r = hand_in(&env, &answer).refused(3, "answer-invalid");
    assert!(str_of(&r, "reason").contains("`E9`"), "{r}");
    assert!(state_fingerprint(&env) == before, "nothing is recorded");

    // A failing answer; the refuter confirms without saying how it fails.
    std::fs::write(&answer, FAIL_S2).unwrap();
    hand_in(&env, &answer).ok();
    let r = step_until(&env, |s| s["action"] == "start_agent");
    assert_eq!(r["role"], "refuter", "{r:#}");
    let bare = format!(
        r#"{{"findings": [{{"finding_id": "{id}-F1", "decision": "confirmed", "reason": "I agree"}}]}}"#
    );
    std::fs::write(str_of(&r, "receipt_path"), &bare).unwrap();
    let before = state_fingerprint(&env);
    let refused = hand_in(&env, str_of(&r, "receipt_path")).refused(3, "answer-invalid");
    assert!(
        str_of(&refused, "reason").contains("failure_scenario"),
        "{refused}"
    );
    assert!(state_fingerprint(&env) == before, "nothing is recorded");
    // One that refutes a finding it was not asked about is refused too.
    std::fs::write(
        str_of(&r, "receipt_path"),
        bare.replace("-F1", "-F7").replace("confirmed", "refuted"),
    )
    .unwrap();
    let refused = hand_in(&env, str_of(&r, "receipt_path")).refused(3, "answer-invalid");
    assert!(
        str_of(&refused, "reason").contains(&format!("`{id}-F7`")),
        "{refused}"
    );
}

/// Failure 4 under the process driver: such answers are no answer, with the problem on record.
#[test]
fn a_process_refuter_that_confirms_without_a_scenario_gives_no_answer() {
    let bare = r#"{"findings": [{"finding_id": "{lane}-F1", "decision": "confirmed", "reason": "I agree"}]}"#;
    let script = implementer("")
        + &section("1", "validator", "full", &format!("report {FAIL_S2}"))
        + &section("*", "refuter", "*", &format!("report {bare}"));
    let (env, id) = validated(&script, &["full"], json!({"verify": {"maxAttempts": 1}}));
    let (_, run) = build_to_end(&env, &id, 4, "blocked");
    let show = run_show(&env, &run);
    let refute = crate::loop_e2e::record(&show, "refute");
    assert!(refute["outcome"]["answer"].is_null(), "{refute:#}");
    assert!(
        refute["outcome"]["problem"]
            .as_str()
            .is_some_and(|p| p.contains("answer-invalid") && p.contains("failure_scenario")),
        "{refute:#}"
    );
    let f1 = finding(&show, &format!("{id}-F1"));
    assert!(
        f1["refutation"].is_null(),
        "the bare word was not taken: {f1:#}"
    );
}

/// Failure 5: "Validator answers adding up to more than the state file's 4 MiB read limit were
/// written into `state.json`; every later call refused `state-invalid` and the run was lost."
/// Answers now live in files of their own, an answer over 256 KiB is refused, and the state stays
/// small and readable.
#[test]
fn large_answers_live_in_their_own_files_and_the_state_stays_readable() {
    let notes = "n".repeat(200 * 1024);
    let big = format!(
        r#"{{"verdict": "pass", "expectations": [{{"id": "E1", "result": "pass"}}, {{"id": "E2", "result": "pass"}}], "notes": "{notes}"}}"#
    );
    let too_big = big.replace(&notes, &"n".repeat(300 * 1024));
    let lenses = [
        "expectations",
        "failures",
        "rules",
        "full",
        "ruthless",
        "security",
    ];
    let mut script = implementer("");
    for lens in &lenses[..5] {
        script += &section("*", "validator", lens, &format!("report {big}"));
    }
    script += &section("*", "validator", "security", &format!("report {too_big}"));
    let (env, id) = validated(
        &script,
        &lenses[..4],
        json!({"verify": {"reviewers": ["ruthless", "security"]}}),
    );
    // Five answers decide every expectation; the sixth is no answer, which a person accepts.
    let (out, last) = build(&env, &id, &[], 0);
    let run = str_of(&last, "run").to_owned();
    assert_eq!(last["status"], "delivered", "{out:#?}");
    let state = std::fs::metadata(env.path(".iced/run/state.json"))
        .unwrap()
        .len();
    assert!(state < 64 * 1024, "state.json is {state} bytes");
    let show = run_show(&env, &run);
    for lens in &lenses[..5] {
        let r = crate::loop_e2e::record(&show, &format!("validate-{lens}"));
        assert_eq!(
            kept(&r["outcome"]["answer"])["notes"]
                .as_str()
                .map(str::len),
            Some(notes.len())
        );
    }
    let r = crate::loop_e2e::record(&show, "validate-security");
    assert!(r["outcome"]["answer"].is_null(), "{r:#}");
    assert!(
        r["outcome"]["problem"]
            .as_str()
            .is_some_and(|p| p.starts_with("answer-too-large")),
        "{r:#}"
    );
    // Every later call still reads the state.
    step(&env);
    env.iced_json(&["run", "list"]).ok();
}

/// Failure 1: "An implementer edited its own unit in its commits (`autonomy: 1` to `2`; an
/// Expectation weakened; an Expectation deleted) and `.iced/config.json` (`verify.independent:
/// false`, a runner's `argv`). The lane was delivered and merged; the unit was auto-accepted on
/// the autonomy the agent gave it, and the next `iced build` ran the argv the agent wrote." Now
/// each such change fails the receipt, naming the path and what it touched, and nothing lands;
/// so does a merge rule added to a `.gitattributes` (a lane setting `merge=union` on code would
/// have its landing merge keep both sides of a conflict without anyone seeing it).
/// Fake-agent lines (after `!`) that commit a `.gitattributes` holding `* merge=union` below a
/// comment line of 5 MB: one line, then five edits that each make it 16 times as long.
static BIG_ATTRIBUTES: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let mut lines =
        "!commit .gitattributes # pad\ncommit-sed .gitattributes $a * merge=union".to_owned();
    for _ in 0..5 {
        lines.push_str("\ncommit-sed .gitattributes s/^#.*/&&&&&&&&&&&&&&&&/");
    }
    lines
});

#[test]
fn an_implementer_that_changes_its_unit_or_the_config_never_lands() {
    let unit = "intent/{lane}/iced.md";
    let cases = [
        (
            unit,
            r"s/^autonomy: 1$/autonomy: 2/",
            "protected-key",
            "`autonomy`",
        ),
        (
            unit,
            r"s/An idle session still ends after 30 minutes/An idle session ends eventually/",
            "contract-frozen",
            "contract",
        ),
        (unit, r"/\[E2\]/d", "contract-frozen", "contract"),
        (unit, r"s/^risk: medium$/risk: low/", "frozen-key", "`risk`"),
        (
            ".iced/config.json",
            r#"s/"independent": true/"independent": false/"#,
            "config-integrity",
            "`verify.independent`",
        ),
        (
            ".iced/config.json",
            r"s/fake-agent/evil-agent/",
            "config-integrity",
            "`runners`",
        ),
        ("intent/{lane}/verify.json", "", "owned-file", "verify.json"),
        // A merge rule would let the landing's merge keep both sides of a conflict unseen.
        (
            ".gitattributes",
            "=* merge=union",
            "merge-attribute",
            "`* merge=union`",
        ),
        (
            "src/.gitattributes",
            "=*.rs merge",
            "merge-attribute",
            "`*.rs merge`",
        ),
        // ... or hidden in a file too large to read (a 5 MB comment line above it).
        (
            ".gitattributes",
            &BIG_ATTRIBUTES,
            "merge-attribute",
            "cannot tell what this leaves",
        ),
    ];
    for (path, expr, rule, names) in cases {
        let change = if let Some(lines) = expr.strip_prefix('!') {
            lines.to_owned()
        } else if expr.is_empty() {
            format!("commit {path} {{\"verdict\": \"pass\"}}")
        } else if let Some(text) = expr.strip_prefix('=') {
            format!("commit {path} {text}")
        } else {
            format!("commit-sed {path} {expr}")
        };
        // Attempt 2 only reports: the change is still on the branch, and still judged. The
        // validator would pass anything; it is never asked.
        let script = section(
            "1",
            "implementer",
            "*",
            &format!("commit src/session.rs refreshed on activity\n{change}"),
        ) + &section("*", "implementer", "*", "report-ok E1 E2")
            + &section("*", "validator", "*", &format!("report {PASS}"));
        let (env, id) = validated(
            &script,
            &["full"],
            json!({"land": {"mode": "merge", "strategy": "ff"}, "verify": {"maxAttempts": 2}}),
        );
        let config_before = env.read(".iced/config.json");
        let unit_before = env.read(&format!("intent/{id}/iced.md"));
        let main_before = env.git_out(&["rev-parse", "main"]);
        let (out, last) = build(&env, &id, &[], 4);
        assert_eq!(last["status"], "blocked", "{rule}: {out:#?}");
        let run = str_of(&last, "run").to_owned();
        let show = run_show(&env, &run);
        let reason = lane_of(&show)["reason"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let shown_path = path.replace("{lane}", &id);
        assert!(
            reason.contains(&format!("lane-touches-protected: `{shown_path}` ({rule})"))
                && reason.contains(names),
            "{rule} {names}: {reason}"
        );
        // Attempt 2 was told what to undo.
        let brief = std::fs::read_to_string(lane_dir(&env, &run, &id).join("brief-2.md")).unwrap();
        assert!(
            brief.contains("lane-touches-protected") && brief.contains(&shown_path),
            "{rule}: {brief}"
        );
        // Nothing landed, nothing was accepted, the person's files are as they were.
        assert_eq!(env.git_out(&["rev-parse", "main"]), main_before, "{rule}");
        assert_eq!(env.read(".iced/config.json"), config_before, "{rule}");
        assert_eq!(
            env.read(&format!("intent/{id}/iced.md")),
            unit_before,
            "{rule}"
        );
        assert_nothing_delivered(&env, &id);
    }
}

/// The implementer may append to its own unit's `decisions.md` (SPEC 24.2): such a lane lands.
#[test]
fn an_implementer_may_append_to_its_own_decision_log() {
    let script = "commit src/session.rs refreshed on activity\ncommit-sed intent/001-session-timeout/decisions.md $a - Decision: sessions refresh on any request\nreport-ok E1 E2\n";
    let (env, id) = crate::loop_e2e::with_agent(
        script,
        json!({"land": {"mode": "merge", "strategy": "ff"}, "verify": {"independent": false}}),
    );
    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    assert!(env
        .read(&format!("intent/{id}/decisions.md"))
        .contains("- Decision: sessions refresh on any request"));
}

/// The implementer replaced its worktree with a link to the person's checkout before it reported:
/// the receipt finds it so, runs no git and no definition of done in it, and the lane blocks at
/// once, naming the worktree (SPEC 24.6). The checkout keeps its branch, head and status.
#[test]
fn a_worktree_replaced_by_a_link_to_the_checkout_is_not_worked_in() {
    let (env, id, (run, agent, worktree), checkout) = committed_with_a_marking_dod();
    std::fs::rename(&worktree, worktree.with_extension("moved")).unwrap();
    std::os::unix::fs::symlink(env.root(), &worktree).unwrap();
    let receipt = str_of(&agent, "receipt_path").to_owned();
    std::fs::write(&receipt, GOOD_REPORT).unwrap();
    hand_in(&env, &receipt);
    let step = ["implement", "step"];
    assert_eq!(env.iced_json(&step).json()["action"], "advanced");
    let out = env.iced_json(&step);
    assert_eq!(out.json()["action"], "blocked", "{out:#?}");
    let why = "a link, a file or nothing is at its path, not a folder";
    let state: Value = serde_json::from_str(&env.read(".iced/run/state.json")).unwrap();
    assert_eq!(
        state["runs"][&run]["lanes"][0]["reason"],
        format!(
            "the worktree `{}` is not the worktree git made: {why}; nothing more is started in it",
            worktree.display()
        )
    );
    // The receipt names the gap and why, and ran no git in the link (it would have found `main`).
    let shown = run_show(&env, &run).to_string();
    assert!(
        shown.contains(&format!("the worktree is not the worktree git made: {why}")),
        "{shown}"
    );
    assert!(!shown.contains("the worktree is on `main`"), "{shown}");
    assert_eq!(env.iced_json(&step).json()["action"], "blocked");
    assert_replaced_link_did_nothing(&env, &id, &checkout);
}

/// The worktree replaced after the receipt's checks passed, before the definition of done starts:
/// the launch refuses (`worktree-replaced`), starts nothing, and every later launch does the same
/// until the crash budget is spent and the lane blocks.
#[test]
fn a_launch_in_a_worktree_replaced_after_the_receipts_checks_is_refused() {
    let (env, id, (_, agent, worktree), checkout) = committed_with_a_marking_dod();
    let receipt = str_of(&agent, "receipt_path").to_owned();
    std::fs::write(&receipt, GOOD_REPORT).unwrap();
    hand_in(&env, &receipt);
    let step = ["implement", "step"];
    assert_eq!(env.iced_json(&step).json()["action"], "advanced");
    std::fs::rename(&worktree, worktree.with_extension("moved")).unwrap();
    std::os::unix::fs::symlink(env.root(), &worktree).unwrap();
    // A refused launch counts as crashed: the call after a refusal relaunches (and is refused
    // again), so the text and `--json` refusals are two calls.
    let text = env.iced(&step);
    assert_eq!(env.iced_json(&step).json()["action"], "advanced");
    let json = env.iced_json(&step);
    let refusal = json.refused(3, "worktree-replaced");
    assert_eq!(
        str_of(&refusal, "reason"),
        format!(
            "`{}` is not the worktree git made: a link, a file or nothing is at its path, not a folder; nothing was started in it",
            worktree.display()
        )
    );
    assert!(
        str_of(&refusal, "remedy").contains("iced run abandon run-"),
        "{refusal:#}"
    );
    crate::snap::assert_read!(
        &env,
        "refused_worktree-replaced",
        crate::snap::refusal_blocks(&step, &text, &json, 3, "worktree-replaced")
    );
    let outs: Vec<_> = (0..10).map(|_| env.iced_json(&step)).collect();
    let last = outs.last().expect("steps").json();
    assert_eq!(last["action"], "blocked", "{outs:#?}");
    assert_replaced_link_did_nothing(&env, &id, &checkout);
}

/// A host-driven unit whose definition of done marks the folder it runs in, its implementer
/// committed and not yet reported: the env, the unit, the run, the implementer and its worktree,
/// and the checkout's head and status.
fn committed_with_a_marking_dod() -> (TestEnv, String, (String, Value, PathBuf), (String, String)) {
    let (env, id) = TestEnv::buildable(json!({"verify": {"independent": false,
        "commands": [{"argv": ["touch", "the-definition-of-done-ran-here"], "timeoutSec": 30}]}}));
    let lane = host_run_committed(&env, &id);
    let checkout = (
        env.git_out(&["rev-parse", "HEAD"]),
        env.git_out(&["status", "--porcelain"]),
    );
    (env, id, lane, checkout)
}

/// Nothing was delivered, the definition of done did not run in the checkout, and the checkout
/// keeps its branch, its head and its status.
fn assert_replaced_link_did_nothing(env: &TestEnv, id: &str, (head, status): &(String, String)) {
    assert_nothing_delivered(env, id);
    assert!(!env.root().join("the-definition-of-done-ran-here").exists());
    let on = env.git_out(&["branch", "--show-current"]);
    assert_eq!(on.trim(), "main");
    assert_eq!(&env.git_out(&["rev-parse", "HEAD"]), head);
    assert_eq!(&env.git_out(&["status", "--porcelain"]), status);
}
