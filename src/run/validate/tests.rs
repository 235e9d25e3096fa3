//! Tests of `validate.rs` (kept beside it so the module itself stays readable).

use super::*;

fn good() -> String {
    r#"{"verdict": "fail", "expectations": [{"id": "E1", "result": "fail", "evidence": "no"}],
        "findings": [{"file_path": "a.rs", "criterion_ref": "E1", "finding_category": "correctness", "severity": "S2-major",
          "summary": "s", "failure_scenario": {"inputs": "i", "expected": "e", "actual": "a"}}]}"#.into()
}

/// The ids of a unit with E1, E2, F1 and C1, and a parent's constraint `010-parent:C1`.
fn known() -> KnownIds {
    KnownIds::of(
        &crate::unit::parse_unit(
            "## Intent\n### Constraints\n- [C1] c\n### Failure conditions\n- [F1] f\n## Expectations\n- [E1] e {verify: test | t}\n- [E2] m {verify: test | t}\n",
        ),
        &["010-parent:C1".to_owned(), "010-parent:F2".to_owned()],
    )
}

#[test]
fn a_strict_answer_parses_and_a_fenced_one_too() {
    assert_eq!(parse_answer(&good(), &known()).unwrap().findings.len(), 1);
    let fenced = format!("I looked.\n```json\n{}\n```\nDone.", good());
    assert_eq!(parse_answer(&fenced, &known()).unwrap().verdict, "fail");
    let ancestors = r#"{"verdict": "pass", "constraints": [{"id": "010-parent:C1", "violated": false}], "failures": [{"id": "010-parent:F2", "triggered": false}]}"#;
    assert!(parse_answer(ancestors, &known()).is_ok());
}

/// An answer about E9, when the unit has E1 and E2, decided nothing about this unit: refused,
/// naming the id (the issue's failure 4).
#[test]
fn an_answer_about_an_id_the_unit_does_not_have_is_refused_naming_it() {
    for (answer, id) in [
        (
            r#"{"verdict": "fail", "expectations": [{"id": "E9", "result": "fail"}]}"#,
            "E9",
        ),
        (
            r#"{"verdict": "fail", "failures": [{"id": "F7", "triggered": true}]}"#,
            "F7",
        ),
        (
            r#"{"verdict": "fail", "constraints": [{"id": "C4", "violated": true}]}"#,
            "C4",
        ),
        (
            r#"{"verdict": "fail", "constraints": [{"id": "010-parent:F2", "violated": true}]}"#,
            "010-parent:F2",
        ),
    ] {
        let e = parse_answer(answer, &known()).unwrap_err();
        assert_eq!(e.code, "answer-invalid", "{answer}");
        assert!(e.message.contains(&format!("`{id}`")), "{e:?}");
    }
}

#[test]
fn long_fields_and_too_many_findings_are_refused_naming_the_field() {
    let long = "x".repeat(MAX_TEXT + 1);
    let e = parse_answer(
        &good().replace("\"summary\": \"s\"", &format!("\"summary\": \"{long}\"")),
        &known(),
    )
    .unwrap_err();
    assert_eq!(e.code, "answer-invalid");
    assert!(e.message.contains("findings[0].summary"), "{e:?}");
    assert!(parse_answer(
        &good().replace(
            "\"summary\": \"s\"",
            &format!("\"summary\": \"{}\"", "x".repeat(MAX_TEXT))
        ),
        &known()
    )
    .is_ok());
    let finding = r#"{"file_path": "a.rs", "criterion_ref": "E1", "finding_category": "correctness", "severity": "S4-nit", "summary": "s", "failure_scenario": {"inputs": "i", "expected": "e", "actual": "a"}}"#;
    let many = format!(
        r#"{{"verdict": "fail", "findings": [{}]}}"#,
        vec![finding; MAX_FINDINGS + 1].join(",")
    );
    assert!(parse_answer(&many, &known())
        .unwrap_err()
        .message
        .contains("findings"));
    let e = parse_answer(&format!(r#"{{"verdict": "fail", "expectations": [{{"id": "E1", "result": "fail", "evidence": "{long}"}}]}}"#), &known()).unwrap_err();
    assert!(e.message.contains("`E1`.evidence"), "{e:?}");
}

/// A refuter's `confirmed` keeps a finding open; without a failure scenario it says nothing
/// anyone can check (the issue's failure 4).
#[test]
fn a_confirmation_needs_a_complete_scenario_and_an_asked_finding() {
    let asked = vec!["L-F1".to_owned()];
    let ok = r#"{"findings": [{"finding_id": "L-F1", "decision": "confirmed", "reason": "r", "failure_scenario": {"inputs": "i", "expected": "e", "actual": "a"}}]}"#;
    assert!(parse_refutation(ok, &asked).is_ok());
    let refuted = r#"{"findings": [{"finding_id": "L-F1", "decision": "refuted", "reason": "the finder missed the guard"}]}"#;
    assert!(parse_refutation(refuted, &asked).is_ok());
    for bad in [
        r#"{"findings": [{"finding_id": "L-F1", "decision": "confirmed", "reason": "r"}]}"#,
        r#"{"findings": [{"finding_id": "L-F1", "decision": "confirmed", "reason": "r", "failure_scenario": {"inputs": "i", "expected": " ", "actual": "a"}}]}"#,
    ] {
        let e = parse_refutation(bad, &asked).unwrap_err();
        assert_eq!(e.code, "answer-invalid");
        assert!(e.message.contains("failure_scenario"), "{e:?}");
    }
    let e = parse_refutation(&ok.replace("L-F1", "L-F9"), &asked).unwrap_err();
    assert!(e.message.contains("`L-F9`"), "{e:?}");
}

#[test]
fn bad_answers_are_refused_naming_the_field() {
    let code = |s: String| parse_answer(&s, &known()).unwrap_err();
    let e = code(good().replace("\"S2-major\"", "\"S2\""));
    assert!(
        e.message.contains("severity") && e.message.contains("S2"),
        "{e:?}"
    );
    assert_eq!(
        code(good().replace(
            "\"summary\": \"s\"",
            "\"summary\": \"s\", \"finding_id\": \"X\""
        ))
        .code,
        "answer-forged"
    );
    assert_eq!(
        code(good().replace(
            "\"verdict\": \"fail\"",
            "\"verdict\": \"fail\", \"extra\": 1"
        ))
        .code,
        "answer-invalid"
    );
    assert_eq!(
        code(good().replace(
            ", \"failure_scenario\": {\"inputs\": \"i\", \"expected\": \"e\", \"actual\": \"a\"}",
            ""
        ))
        .code,
        "answer-invalid"
    );
    assert_eq!(
        code(good().replace("correctness", "style")).code,
        "answer-invalid"
    );
    assert_eq!(code("not json at all".into()).code, "answer-unparsable");
}

#[test]
fn merging_lets_any_failure_win_and_mints_what_no_finding_names() {
    let unit = crate::unit::parse_unit(
        "## Intent\n### Constraints\n- [C1] c\n### Failure conditions\n- [F1] f\n## Expectations\n- [E1] e {verify: test | t}\n- [E2] m {verify: manual | look}\n",
    );
    let a: Answer = serde_json::from_str(r#"{"verdict": "pass", "expectations": [{"id": "E1", "result": "pass"}], "out_of_scope": ["src/other.rs", "intent/x/iced.md"]}"#).unwrap();
    let b: Answer = serde_json::from_str(r#"{"verdict": "fail", "expectations": [{"id": "E1", "result": "fail", "evidence": "it breaks"}], "failures": [{"id": "F1", "triggered": true, "evidence": "seen"}]}"#).unwrap();
    let answers = vec![
        ("full".to_owned(), Some(a)),
        ("ruthless".to_owned(), Some(b)),
        ("rules".to_owned(), None),
    ];
    let m = merge(&unit, &answers);
    assert_eq!(m.expectations["E1"], "fail");
    assert_eq!(m.expectations["E2"], "unknown");
    assert!(m.failures["F1"]);
    assert!(!m.constraints["C1"]);
    assert_eq!(
        m.out_of_scope,
        ["src/other.rs"],
        "ICED's own records never count"
    );
    assert!(m.needs_human && m.unanswered == ["rules"]);
    let minted = contract_findings(&unit, &m, &answers);
    let refs: Vec<(&str, &str)> = minted
        .iter()
        .map(|(_, e)| (e.criterion_ref.as_str(), e.severity.as_str()))
        .collect();
    assert_eq!(
        refs,
        [
            ("E1", "S2-major"),
            ("F1", "S1-stop-the-line"),
            ("Scope", "S2-major")
        ]
    );
    assert_eq!(minted[0].0, "ruthless");
    assert_eq!(minted[2].1.file_path, "src/other.rs");
    assert_eq!(manual_expectations(&unit), ["E2"]);
}

#[test]
fn fingerprints_name_what_moved() {
    let a = Fingerprint {
        head: "a".into(),
        branch: None,
        lane_branch_head: "l".into(),
        dirty: BTreeMap::new(),
        lane_dirty: BTreeMap::new(),
    };
    let mut b = a.clone();
    assert!(moved(&a, &b).is_empty());
    b.head = "b".into();
    b.dirty.insert("x.txt".into(), "h".into());
    let m = moved(&a, &b);
    assert_eq!(m.len(), 2, "{m:?}");
    assert!(m[1].contains("x.txt"));
    let mut c = a.clone();
    c.lane_dirty.insert("stray.txt".into(), "h".into());
    assert_eq!(moved(&a, &c), ["the lane's worktree changed: stray.txt"]);
}

/// A validator that leaves a FIFO (or a link to one) in its sandbox must not hang the check:
/// the fingerprint names what is there without opening it for long (SPEC 24.6).
#[test]
fn content_hash_never_blocks_and_never_follows_a_link() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("file"), "abc").unwrap();
    nix::unistd::mkfifo(
        &d.join("fifo"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    std::os::unix::fs::symlink(d.join("fifo"), d.join("link")).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let p = d.to_owned();
    std::thread::spawn(move || {
        let hashes: Vec<String> = ["file", "fifo", "link", "gone"]
            .iter()
            .map(|n| content_hash(&p.join(n)))
            .collect();
        let _ = tx.send(hashes);
    });
    let hashes = rx
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("content_hash blocked");
    assert_eq!(
        hashes,
        [
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad".to_owned(),
            "special:a FIFO".to_owned(),
            format!("link:{}", d.join("fifo").display()),
            "missing".to_owned(),
        ]
    );
}

/// A validator cannot stop the lane for a person (SPEC 20.7): only the implementer's report of the
/// current attempt may escalate; a validator's answer carrying `escalate` or `questions` is
/// refused as malformed, never read as an escalation.
#[test]
fn a_validators_escalation_or_questions_are_refused_not_taken() {
    for extra in [
        r#""escalate": {"kind": "change-expectation", "message": "m", "proposal": "- [E1] (remove)"}"#,
        r#""questions": [{"text": "may I?"}]"#,
    ] {
        let answer = good().replacen(
            "\"verdict\": \"fail\"",
            &format!("\"verdict\": \"fail\", {extra}"),
            1,
        );
        let e = parse_answer(&answer, &known()).unwrap_err();
        assert_eq!(e.code, "answer-invalid", "{extra}: {e:?}");
    }
}
