//! SPEC 24.1's rule table, row by row: every way each rule denies, and the allows, notices and
//! asks around them. Each row checks the decision, the rule, `hard` where it matters, and that
//! the reason ends with a `Next step:` sentence naming what to do instead.

use super::*;
use crate::config::Config;
use std::collections::HashMap;

const BODY: &str = "
# Session timeout

## Intent

### Goal
Signed-in people stay signed in while they are active.

### Constraints
- [C1] No change to how passwords are checked.

### Failure conditions
- [F1] An active person is signed out.

## Context
- [code] Sessions expire after 5 minutes.

## Expectations
- [E1] Activity extends the session. {verify: test | tests/session.rs}

## Open questions
";

/// A unit file; `signed` adds approval fields and the contract hash of the body.
fn unit(id: &str, status: &str, kind: &str, autonomy: i64, risk: &str, signed: bool) -> String {
    let hash = contract_hash(BODY);
    let approval = if signed {
        format!("approved_at: 2026-09-30T10:00:00Z\napproved_by: P\ncontract_hash: {hash}\nbase_ref: null\n")
    } else {
        String::new()
    };
    format!(
        "---\niced: 0.1\nid: {id}\ntitle: {id}\ntype: {kind}\ntier: S\nparent: null\nstatus: {status}\nautonomy: {autonomy}\nrisk: {risk}\nattempts: 0\n{approval}---\n{BODY}"
    )
}

fn units() -> HashMap<String, String> {
    let mut m = HashMap::new();
    let mut add = |id: &str, text: String| {
        m.insert(id.to_owned(), text);
    };
    add(
        "001-draft",
        unit("001-draft", "draft", "feature", 1, "medium", false),
    );
    add(
        "002-approved",
        unit("002-approved", "approved", "feature", 1, "medium", true),
    );
    add(
        "003-building",
        unit("003-building", "building", "feature", 1, "medium", true),
    );
    add(
        "004-accepted",
        unit("004-accepted", "accepted", "feature", 1, "medium", true),
    );
    add(
        "005-rejected",
        unit("005-rejected", "rejected", "feature", 1, "medium", false),
    );
    add(
        "006-review",
        unit("006-review", "building", "review", 1, "low", true),
    );
    add(
        "007-zero",
        unit("007-zero", "building", "bug", 0, "low", true),
    );
    add(
        "008-early",
        unit("008-early", "blocked", "bug", 1, "low", false),
    );
    add(
        "009-trusted",
        unit("009-trusted", "draft", "chore", 3, "low", false),
    );
    add(
        "010-nohash",
        unit("010-nohash", "approved", "bug", 1, "low", false),
    );
    add(
        "011-blocked",
        unit("011-blocked", "blocked", "bug", 1, "low", true),
    );
    add(
        "012-verifying",
        unit("012-verifying", "verifying", "bug", 1, "low", true),
    );
    add("013-done", unit("013-done", "done", "bug", 1, "low", true));
    add(
        "014-risky",
        unit("014-risky", "draft", "bug", 3, "high", false),
    );
    m
}

struct Case {
    who: Who,
    gate: Gate,
    active: Option<&'static str>,
}

fn agent(active: Option<&'static str>) -> Case {
    Case {
        who: Who::Agent,
        gate: Gate::Strict,
        active,
    }
}

fn lane(unit: &str) -> Case {
    Case {
        who: Who::Implementer { unit: unit.into() },
        gate: Gate::Strict,
        active: None,
    }
}

fn role(who: Who) -> Case {
    Case {
        who,
        gate: Gate::Strict,
        active: None,
    }
}

impl Case {
    fn gate(mut self, gate: Gate) -> Case {
        self.gate = gate;
        self
    }

    fn judge(&self, proposal: Proposal) -> Decision {
        let units = units();
        let lookup = move |id: &str| units.get(id).cloned();
        let config = Config::default();
        let ctx = Context {
            root: Path::new("/r"),
            cwd: Path::new("/r"),
            who: self.who.clone(),
            gate: self.gate,
            config: &config,
            active: self.active,
            unit_text: &lookup,
        };
        judge(&ctx, &proposal)
    }
}

fn write(path: &str, before: Option<&str>, after: &str) -> Proposal {
    Proposal::Write {
        path: path.into(),
        before: before.map(str::to_owned),
        after: After::Text(after.into()),
    }
}

fn write_new(path: &str) -> Proposal {
    write(path, None, "text\n")
}

fn unpredictable(path: &str) -> Proposal {
    Proposal::Write {
        path: path.into(),
        before: None,
        after: After::Unpredictable,
    }
}

fn shell(command: &str) -> Proposal {
    Proposal::Shell {
        command: command.into(),
    }
}

/// A unit's text with one replacement.
fn edited(id: &str, from: &str, to: &str) -> Proposal {
    let before = units()[id].clone();
    assert!(before.contains(from), "{from}");
    write(
        &format!("intent/{id}/iced.md"),
        Some(&before),
        &before.replacen(from, to, 1),
    )
}

#[track_caller]
fn check(d: &Decision, verdict: Verdict, rule: &str) {
    assert_eq!((d.verdict, d.rule), (verdict, rule), "{d:#?}");
    let (_, next) = d
        .reason
        .rsplit_once(" Next step: ")
        .unwrap_or_else(|| panic!("no Next step in {:?}", d.reason));
    assert_eq!(next, d.next, "{d:#?}");
    assert!(next.ends_with('.') && next.len() > 5, "{d:#?}");
    assert!(!d.reason.contains("\n"), "one paragraph: {d:#?}");
}

#[track_caller]
fn denies(d: Decision, rule: &str, hard: bool) -> Decision {
    check(&d, Verdict::Deny, rule);
    assert_eq!(d.hard, hard, "{d:#?}");
    d
}

#[track_caller]
fn allows(d: Decision) {
    check(&d, Verdict::Allow, "allowed");
}

#[test]
fn read_only_roles_write_nothing_and_run_no_inline_code() {
    for who in [Who::Validator, Who::Refuter] {
        let d = denies(
            role(who.clone()).judge(write_new("src/a.rs")),
            "read-only-role",
            true,
        );
        assert!(d.next.contains("answer"), "{d:#?}");
        denies(
            role(who.clone()).judge(write_new("/elsewhere/x")),
            "read-only-role",
            true,
        );
        denies(
            role(who.clone()).judge(shell("rm -f src/a.rs")),
            "read-only-role",
            true,
        );
        denies(
            role(who.clone()).judge(shell("npm install")),
            "read-only-role",
            true,
        );
        denies(
            role(who.clone()).judge(shell("python3 -c 'print(1)'")),
            "read-only-role",
            true,
        );
        denies(
            role(who.clone()).judge(shell("bash -c 'ls'")),
            "read-only-role",
            true,
        );
        denies(
            role(who.clone()).judge(shell("eval ls")),
            "read-only-role",
            true,
        );
        allows(role(who.clone()).judge(shell("cargo test && git diff HEAD~1 2>/dev/null")));
        allows(role(who.clone()).judge(Proposal::Other {
            tool: "Read".into(),
        }));
        // `gate: off` loosens nothing for a role.
        denies(
            role(who).gate(Gate::Off).judge(write_new("src/a.rs")),
            "read-only-role",
            true,
        );
    }
}

#[test]
fn owned_files_are_denied_to_everyone() {
    for case in [
        agent(Some("003-building")),
        lane("003-building"),
        agent(None).gate(Gate::Warn),
    ] {
        for path in [
            ".iced/active",
            ".iced/metrics.jsonl",
            ".iced/run/r1/state.json",
            "/r/intent/003-building/evidence.md",
            "intent/002-approved/verify.json",
        ] {
            denies(case.judge(write_new(path)), "owned-file", true);
        }
        for command in [
            "echo x > intent/002-approved/verify.json",
            "cd .iced && echo 003-building > active",
            "rm -rf intent/001-draft",
            "rm -rf .iced",
            "mv .iced/metrics.jsonl /tmp/m",
            "python3 -c \"open('.iced/run/x','w')\"",
            "rm intent/*/evidence.md",
        ] {
            let d = denies(case.judge(shell(command)), "shell-owned", true);
            assert!(!d.next.is_empty(), "{command}");
        }
        // Reading one is not writing it.
        allows(case.judge(shell(
            "cat .iced/active; git diff -- intent/002-approved/verify.json",
        )));
    }
    let d = denies(
        agent(Some("002-approved")).judge(write_new(".iced/active")),
        "owned-file",
        true,
    );
    assert!(d.next.contains("iced use"), "{d:#?}");
    let d = denies(
        agent(Some("002-approved")).judge(write_new("intent/002-approved/evidence.md")),
        "owned-file",
        true,
    );
    assert!(d.next.contains("iced build 002-approved"), "{d:#?}");
    let d = denies(
        agent(None).judge(write_new(".iced/run/x")),
        "owned-file",
        true,
    );
    assert!(d.next.contains("iced run"), "{d:#?}");
    let d = denies(
        lane("003-building").judge(write_new("intent/003-building/verify.json")),
        "owned-file",
        true,
    );
    assert!(d.next.contains("report"), "{d:#?}");
}

#[test]
fn host_settings_are_the_lanes_to_leave_alone() {
    for path in [".claude/settings.json", ".claude/settings.local.json"] {
        let d = denies(
            lane("003-building").judge(write_new(path)),
            "host-settings",
            true,
        );
        assert!(d.next.contains("handback"), "{d:#?}");
        denies(
            lane("003-building").judge(shell(&format!("echo '{{}}' > {path}"))),
            "host-settings",
            true,
        );
        allows(agent(Some("003-building")).judge(write_new(path)));
    }
}

#[test]
fn config_integrity_keys_only_a_person_changes() {
    let before = r#"{"gate": "strict", "verify": {"commands": ["make test"], "timeoutSec": 900}}"#;
    for case in [
        agent(None),
        lane("003-building"),
        agent(None).gate(Gate::Warn),
    ] {
        let tuned =
            r#"{"verify": {"timeoutSec": 60, "commands": ["make test"]}, "gate": "strict"}"#;
        allows(case.judge(write(".iced/config.json", Some(before), tuned)));
        let loosened = r#"{"gate": "off", "verify": {"commands": [], "timeoutSec": 900}}"#;
        let d = denies(
            case.judge(write(".iced/config.json", Some(before), loosened)),
            "config-integrity",
            true,
        );
        assert!(d.reason.contains("`gate`, `verify.commands`"), "{d:#?}");
        assert!(d.next.contains("`gate`, `verify.commands`"), "{d:#?}");
        denies(
            case.judge(write(".iced/config.json", Some(before), "{\"gate\": ")),
            "config-integrity",
            true,
        );
        denies(
            case.judge(unpredictable(".iced/config.json")),
            "config-integrity",
            true,
        );
        denies(
            case.judge(Proposal::Write {
                path: ".iced/config.json".into(),
                before: Some(before.into()),
                after: After::Deleted,
            }),
            "config-integrity",
            true,
        );
        denies(
            case.judge(shell("echo '{}' > .iced/config.json")),
            "config-integrity",
            true,
        );
        denies(
            case.judge(shell("sed -i 's/strict/off/' .iced/config.json")),
            "config-integrity",
            true,
        );
    }
}

#[test]
fn units_are_created_by_iced_and_closed_units_do_not_change() {
    let d = denies(
        agent(None).judge(write_new("intent/099-new/iced.md")),
        "unit-create",
        false,
    );
    assert!(d.next.contains("iced new"), "{d:#?}");
    denies(
        lane("003-building").judge(write_new("intent/099-new/iced.md")),
        "unit-create",
        false,
    );
    // `gate: warn` loosens a soft rule into a notice.
    let d = agent(None)
        .gate(Gate::Warn)
        .judge(write_new("intent/099-new/iced.md"));
    check(&d, Verdict::Notify, "unit-create");
    for path in [
        "intent/004-accepted/iced.md",
        "intent/004-accepted/decisions.md",
        "intent/005-rejected/notes.md",
    ] {
        for case in [
            agent(None),
            lane("003-building"),
            agent(None).gate(Gate::Warn),
        ] {
            denies(case.judge(write_new(path)), "unit-closed", true);
        }
    }
    denies(
        agent(None).judge(shell("echo x >> intent/004-accepted/decisions.md")),
        "unit-closed",
        true,
    );
}

#[test]
fn protected_keys_never_change() {
    for id in ["001-draft", "002-approved", "008-early"] {
        let d = denies(
            agent(None).judge(edited(id, "autonomy: 1", "autonomy: 3")),
            "protected-key",
            true,
        );
        assert!(d.reason.contains("`autonomy`"), "{d:#?}");
        denies(
            agent(None).judge(edited(id, "attempts: 0\n", "attempts: 0\nheld: no\n")),
            "protected-key",
            true,
        );
        denies(
            agent(None).judge(unpredictable(&format!("intent/{id}/iced.md"))),
            "protected-key",
            true,
        );
        denies(
            agent(None).judge(Proposal::Write {
                path: format!("intent/{id}/iced.md"),
                before: None,
                after: After::Deleted,
            }),
            "protected-key",
            true,
        );
        denies(
            agent(None).judge(shell(&format!("sed -i 's/x/y/' intent/{id}/iced.md"))),
            "protected-key",
            true,
        );
    }
    let d = denies(
        lane("003-building").judge(edited("003-building", "status: building", "status: done")),
        "protected-key",
        true,
    );
    assert!(d.next.contains("loop records"), "{d:#?}");
    // A draft's body and unprotected fields are free.
    allows(agent(None).judge(edited("001-draft", "Signed-in people", "People")));
    allows(agent(None).judge(edited("001-draft", "risk: medium", "risk: high")));
    // Blocked before sign-off: only the protected keys are frozen.
    allows(agent(None).judge(edited("008-early", "risk: low", "risk: medium")));
    allows(agent(None).judge(edited("008-early", "Signed-in people", "People")));
}

#[test]
fn signed_off_units_keep_their_shape_and_contract() {
    for key in [
        ("type: feature", "type: bug"),
        ("tier: S", "tier: L"),
        ("risk: medium", "risk: low"),
        ("parent: null", "parent: 001-draft"),
    ] {
        let d = denies(
            agent(None).judge(edited("002-approved", key.0, key.1)),
            "frozen-key",
            true,
        );
        assert!(d.next.contains("decisions.md"), "{d:#?}");
        denies(
            lane("002-approved").judge(edited("002-approved", key.0, key.1)),
            "frozen-key",
            true,
        );
    }
    denies(
        agent(None).judge(edited(
            "002-approved",
            "attempts: 0\n",
            "attempts: 0\ndepends: 001-draft\n",
        )),
        "frozen-key",
        true,
    );
    let d = denies(
        agent(None).judge(edited(
            "002-approved",
            "Activity extends",
            "Anything extends",
        )),
        "contract-frozen",
        true,
    );
    assert!(d.reason.contains("its Expectations,"), "{d:#?}");
    let d = denies(
        agent(None).judge(edited("011-blocked", "Signed-in people", "People")),
        "contract-frozen",
        true,
    );
    assert!(d.reason.contains("its Intent,"), "{d:#?}");
    let d = denies(
        lane("002-approved").judge(edited("002-approved", "Signed-in people", "People")),
        "contract-frozen",
        true,
    );
    assert!(d.next.contains("handback"), "{d:#?}");
    // The implementer's own unit is taken as building whatever its file says: a draft has no
    // hash to keep, so nothing in its contract can change.
    denies(
        lane("001-draft").judge(edited("001-draft", "Signed-in people", "People")),
        "contract-frozen",
        true,
    );
    let d = denies(
        agent(None).judge(edited(
            "002-approved",
            "## Open questions\n",
            "## Open questions\n- [Q1] Which timeout?\n",
        )),
        "contract-frozen",
        true,
    );
    assert!(d.reason.contains("open-questions"), "{d:#?}");
    denies(
        agent(None).judge(edited("010-nohash", "Sessions expire", "Sessions end")),
        "contract-frozen",
        true,
    );
    // Context may change after sign-off, by the agent and by the lane.
    allows(agent(None).judge(edited("002-approved", "Sessions expire", "Sessions end")));
    allows(lane("003-building").judge(edited("003-building", "Sessions expire", "Sessions end")));
}

#[test]
fn a_lane_appends_to_its_own_decisions_and_touches_no_other_unit() {
    let own = "intent/003-building/decisions.md";
    allows(lane("003-building").judge(write(own, Some("# D\n\n- a\n"), "# D\n\n- a\n- b\n")));
    allows(lane("003-building").judge(write(own, None, "# D\n")));
    let d = denies(
        lane("003-building").judge(write(own, Some("# D\n\n- a\n"), "# D\n\n- b\n")),
        "decisions-append-only",
        true,
    );
    assert!(d.next.contains("append"), "{d:#?}");
    denies(
        lane("003-building").judge(unpredictable(own)),
        "decisions-append-only",
        true,
    );
    allows(lane("003-building").judge(write_new("intent/003-building/notes.md")));
    for path in [
        "intent/001-draft/decisions.md",
        "intent/001-draft/review.md",
        "intent/001-draft/iced.md",
    ] {
        let d = denies(
            lane("003-building").judge(if path.ends_with("iced.md") {
                edited("001-draft", "Sessions expire", "Sessions end")
            } else {
                write_new(path)
            }),
            "decisions-other-unit",
            true,
        );
        assert!(
            d.next.contains("intent/003-building/decisions.md"),
            "{d:#?}"
        );
    }
    denies(
        lane("003-building").judge(shell("echo x >> intent/001-draft/notes.md")),
        "decisions-other-unit",
        true,
    );
    // The agent keeps a decision log for any open unit.
    allows(agent(None).judge(write("intent/001-draft/decisions.md", Some("a"), "b")));
}

#[test]
fn memory_is_for_a_person_to_change() {
    let d = denies(
        lane("003-building").judge(write_new(".iced/memory/product.md")),
        "memory-person",
        true,
    );
    assert!(d.next.contains("decisions.md"), "{d:#?}");
    denies(
        lane("003-building").judge(shell("echo rule >> .iced/memory/knowledge.md")),
        "memory-person",
        true,
    );
    allows(agent(Some("003-building")).judge(write_new(".iced/memory/product.md")));
    allows(agent(None).judge(write_new(".iced/templates/bug.md")));
    allows(lane("003-building").judge(write_new("intent/README.md")));
}

#[test]
fn review_units_change_no_code() {
    let d = denies(
        agent(Some("006-review")).judge(write_new("src/a.rs")),
        "review-read-only",
        false,
    );
    assert!(d.next.contains("intent/006-review/review.md"), "{d:#?}");
    denies(
        agent(Some("006-review")).judge(shell("rm src/a.rs")),
        "review-read-only",
        false,
    );
    denies(
        lane("006-review").judge(write_new("src/a.rs")),
        "review-read-only",
        false,
    );
    denies(
        lane("006-review").judge(shell("npm install")),
        "review-read-only",
        false,
    );
    allows(lane("006-review").judge(write_new("intent/006-review/review.md")));
    allows(lane("006-review").judge(shell("cargo test")));
    let d = agent(Some("006-review"))
        .gate(Gate::Warn)
        .judge(write_new("src/a.rs"));
    check(&d, Verdict::Notify, "review-read-only");
}

#[test]
fn an_agents_code_waits_for_building() {
    for (active, next) in [
        ("001-draft", "iced approve 001-draft"),
        ("002-approved", "iced build 002-approved"),
        ("012-verifying", "iced accept 012-verifying"),
        ("013-done", "iced reject 013-done"),
        ("011-blocked", "iced abandon 011-blocked"),
        ("014-risky", "iced approve 014-risky"),
    ] {
        let d = denies(
            agent(Some(active)).judge(write_new("src/a.rs")),
            "code-frozen",
            false,
        );
        assert!(d.next.contains(next), "{d:#?}");
        denies(
            agent(Some(active)).judge(shell("npm install")),
            "code-frozen",
            false,
        );
        denies(
            agent(Some(active)).judge(shell("git reset --hard")),
            "code-frozen",
            false,
        );
        // Mutations outside the root and commands that only record work go ahead.
        allows(agent(Some(active)).judge(shell("cd /elsewhere && npm install")));
        allows(agent(Some(active)).judge(shell("git add -A && git commit -m 'rm x > y'")));
        allows(agent(Some(active)).judge(write_new("/elsewhere/a.rs")));
        check(
            &agent(Some(active))
                .gate(Gate::Warn)
                .judge(write_new("src/a.rs")),
            Verdict::Notify,
            "code-frozen",
        );
    }
    // At effective autonomy 2 and 3 the change goes ahead with a notice.
    let d = agent(Some("009-trusted")).judge(write_new("src/a.rs"));
    check(&d, Verdict::Notify, "code-frozen");
    assert!(d.next.contains("decisions.md"), "{d:#?}");
    check(
        &agent(Some("009-trusted")).judge(shell("rm x")),
        Verdict::Notify,
        "code-frozen",
    );
    // No active unit: free, except under `gate: always`.
    allows(agent(None).judge(write_new("src/a.rs")));
    allows(agent(Some("004-accepted")).judge(write_new("src/a.rs")));
    allows(agent(Some("099-missing")).judge(write_new("src/a.rs")));
    let d = denies(
        agent(None).gate(Gate::Always).judge(write_new("src/a.rs")),
        "code-frozen",
        false,
    );
    assert!(d.next.contains("iced new"), "{d:#?}");
    denies(
        agent(Some("005-rejected"))
            .gate(Gate::Always)
            .judge(shell("touch x")),
        "code-frozen",
        false,
    );
    allows(agent(None).gate(Gate::Always).judge(shell("ls -la")));
    // Building: code is free.
    allows(agent(Some("003-building")).judge(write_new("src/a.rs")));
    allows(agent(Some("003-building")).judge(shell("npm install && rm -rf build")));
    allows(lane("003-building").judge(write_new("src/a.rs")));
    allows(lane("001-draft").judge(write_new("src/a.rs")));
}

#[test]
fn autonomy_zero_asks_a_person() {
    let d = agent(Some("007-zero")).judge(write_new("src/a.rs"));
    check(&d, Verdict::Ask, "autonomy-zero");
    assert!(d.next.contains("decisions.md"), "{d:#?}");
    check(
        &agent(Some("007-zero")).judge(shell("rm src/a.rs")),
        Verdict::Ask,
        "autonomy-zero",
    );
    check(
        &lane("007-zero").judge(write_new("src/a.rs")),
        Verdict::Ask,
        "autonomy-zero",
    );
    check(
        &agent(Some("007-zero"))
            .gate(Gate::Warn)
            .judge(write_new("src/a.rs")),
        Verdict::Ask,
        "autonomy-zero",
    );
    allows(agent(Some("007-zero")).judge(shell("cargo test")));
}

#[test]
fn the_gate_is_the_agents_only() {
    let d = agent(Some("001-draft"))
        .gate(Gate::Off)
        .judge(write_new(".iced/active"));
    check(&d, Verdict::Allow, "gate-off");
    denies(
        lane("003-building")
            .gate(Gate::Off)
            .judge(write_new(".iced/active")),
        "owned-file",
        true,
    );
    denies(
        lane("003-building")
            .gate(Gate::Warn)
            .judge(write_new(".iced/memory/x.md")),
        "memory-person",
        true,
    );
    denies(
        lane("006-review")
            .gate(Gate::Warn)
            .judge(write_new("src/a.rs")),
        "review-read-only",
        false,
    );
    // Hard rules hold under `warn`.
    denies(
        agent(None)
            .gate(Gate::Warn)
            .judge(write_new(".iced/active")),
        "owned-file",
        true,
    );
    denies(
        agent(None)
            .gate(Gate::Warn)
            .judge(edited("002-approved", "Activity extends", "X extends")),
        "contract-frozen",
        true,
    );
}

#[test]
fn reads_and_paths_outside_are_allowed() {
    allows(agent(Some("001-draft")).judge(Proposal::Other {
        tool: "Grep".into(),
    }));
    allows(lane("003-building").judge(write_new("/elsewhere/notes.txt")));
    allows(lane("003-building").judge(write_new("../sibling/.iced/active")));
    allows(agent(None).judge(write_new("intent/README.md")));
    let d = agent(None).judge(write_new("src/../.iced/active"));
    check(&d, Verdict::Deny, "owned-file");
    let json = serde_json::to_value(&d).unwrap();
    assert_eq!(json["decision"], "deny");
    assert_eq!(json["rule"], "owned-file");
    assert_eq!(json["hard"], true);
    assert_eq!(
        json.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["decision", "rule", "hard", "reason", "next"]
    );
}

#[test]
fn predicted_edits_apply_only_when_each_old_text_occurs_once() {
    let e = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    };
    assert_eq!(
        predict("a b c", &e(&[("b", "B"), ("c", "C")])),
        Some("a B C".into())
    );
    assert_eq!(
        predict("a b c", &e(&[("c", "C"), ("a", "A")])),
        Some("A b C".into())
    );
    assert_eq!(predict("a b b", &e(&[("b", "B")])), None);
    assert_eq!(predict("aaa", &e(&[("aa", "x")])), None);
    assert_eq!(predict("a b c", &e(&[("x", "y")])), None);
    assert_eq!(predict("a b c", &e(&[("", "y")])), None);
    assert_eq!(predict("abcd", &e(&[("abc", "x"), ("cd", "y")])), None);
    assert_eq!(predict("abcd", &e(&[])), Some("abcd".into()));
    assert_eq!(
        predict("héllo wörld", &e(&[("wö", "wo")])),
        Some("héllo world".into())
    );
}

/// SPEC 20.17: a test writer writes test paths only; there it is judged as its unit's
/// implementer (so the loop's own files stay denied to it too).
#[test]
fn a_test_writer_writes_only_test_paths() {
    let tester = || {
        role(Who::TestWriter {
            unit: "003-building".into(),
            test_paths: vec!["tests/**".into(), "**/*_test.*".into()],
        })
    };
    allows(tester().judge(write_new("tests/session.rs")));
    allows(tester().judge(write_new("src/session_test.go")));
    let d = denies(
        tester().judge(write_new("src/session.rs")),
        "test-path-only",
        true,
    );
    assert!(
        d.reason.contains("`src/session.rs` is not a test path"),
        "{}",
        d.reason
    );
    denies(
        tester().judge(write_new("intent/003-building/iced.md")),
        "test-path-only",
        true,
    );
    denies(
        tester().judge(write_new("/elsewhere/x_test.go")),
        "test-path-only",
        true,
    );
    // The gate does not loosen it.
    denies(
        tester().gate(Gate::Off).judge(write_new("src/session.rs")),
        "test-path-only",
        true,
    );
    // A shell's writes are fenced the same way (the check after it is what holds).
    denies(
        tester().judge(shell("echo x > src/session.rs")),
        "test-path-only",
        true,
    );
    allows(tester().judge(shell("echo x > tests/session.rs")));
    // The same paths written by the implementer are allowed.
    allows(lane("003-building").judge(write_new("src/session.rs")));
}
