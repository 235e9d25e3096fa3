//! Malformed units (SPEC section 16): every one gets a lint error or a refusal that names what to
//! fix, from every verb that reads it. None may crash: a panic exits 101 and says "panicked".

use crate::env::{unit_file, unit_text, Run, TestEnv, GOOD_BODY};
use serde_json::Value;

const ID: &str = "001-session-timeout";

/// What one verb must do with a malformed unit.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// Exit 0.
    Ok,
    /// Refused with this code, exit 3.
    Refused(&'static str),
}

struct Case {
    name: &'static str,
    bytes: Vec<u8>,
    /// When the file cannot be read at all: the refusal every unit verb gives.
    unreadable: Option<&'static [&'static str]>,
    /// The lint error expected at every stage (and the words its message must hold).
    lint: Option<(&'static str, &'static [&'static str])>,
    approve: Expect,
    hold: Expect,
}

fn good() -> String {
    unit_text(ID)
}

fn with_field(key: &str, value: &str) -> Vec<u8> {
    good()
        .replacen(
            &format!(
                "\n{key}: {}\n",
                good()
                    .lines()
                    .find_map(|l| l.strip_prefix(&format!("{key}: ")))
                    .unwrap()
            ),
            &format!("\n{key}: {value}\n"),
            1,
        )
        .into_bytes()
}

/// Deterministic junk: a small linear congruential generator, so a failure reproduces.
fn junk(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed;
    (0..len)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) as u8
        })
        .collect()
}

fn cases() -> Vec<Case> {
    use Expect::{Ok, Refused};
    let lint_errors = Refused("lint-errors");
    let body_only = GOOD_BODY.trim_start().to_owned();
    let header_end = good().find("\n---\n").unwrap() + 1;
    let unterminated = format!(
        "{}{}",
        &good()[..header_end],
        GOOD_BODY.replace("---", "--")
    );
    let mut huge = good();
    let pad = "- [code] padding padding padding padding\n";
    huge.push_str(&pad.repeat(10 * 1024 * 1024 / pad.len() + 1));
    let mut not_utf8 = good().into_bytes();
    not_utf8.extend_from_slice(b"- [code] caf\xe9 \xff\xfe\n");
    let printable_junk: String = junk(4096, 7)
        .into_iter()
        .map(|b| char::from(b % 0x60 + 0x20))
        .collect();
    let mut binary = junk(4096, 42);
    binary[100] = 0;
    vec![
        Case {
            name: "no frontmatter",
            bytes: body_only.into_bytes(),
            unreadable: None,
            lint: Some(("frontmatter-missing", &["---"])),
            approve: lint_errors,
            hold: lint_errors,
        },
        Case {
            name: "unterminated frontmatter",
            bytes: unterminated.into_bytes(),
            unreadable: None,
            lint: Some(("frontmatter-missing", &["---"])),
            approve: lint_errors,
            hold: lint_errors,
        },
        Case {
            name: "a frontmatter line that is not key: value",
            bytes: good()
                .replacen("tier: M\n", "tier: M\nthis is not a key value line\n", 1)
                .into_bytes(),
            unreadable: None,
            lint: Some(("frontmatter-missing", &["line 7"])),
            approve: lint_errors,
            hold: lint_errors,
        },
        Case {
            name: "a byte-order mark",
            bytes: format!("\u{feff}{}", good()).into_bytes(),
            unreadable: None,
            lint: Some(("frontmatter-missing", &["BOM"])),
            approve: lint_errors,
            hold: lint_errors,
        },
        Case {
            name: "CRLF line endings",
            bytes: good().replace('\n', "\r\n").into_bytes(),
            unreadable: None,
            lint: None,
            approve: Ok,
            hold: Ok,
        },
        Case {
            name: "lone CR line endings",
            bytes: good().replace('\n', "\r").into_bytes(),
            unreadable: None,
            lint: None,
            approve: Ok,
            hold: Ok,
        },
        Case {
            name: "invalid UTF-8",
            bytes: not_utf8,
            unreadable: Some(&["unit-not-utf8"]),
            lint: None,
            approve: Refused("unit-not-utf8"),
            hold: Refused("unit-not-utf8"),
        },
        Case {
            name: "binary junk",
            bytes: binary,
            unreadable: Some(&["unit-unreadable", "unit-not-utf8"]),
            lint: None,
            approve: Refused("-"),
            hold: Refused("-"),
        },
        Case {
            name: "printable junk",
            bytes: printable_junk.into_bytes(),
            unreadable: None,
            lint: Some(("frontmatter-missing", &[])),
            approve: lint_errors,
            hold: lint_errors,
        },
        Case {
            name: "duplicate item ids",
            bytes: good().replace("- [E2]", "- [E1]").into_bytes(),
            unreadable: None,
            lint: Some(("ids-duplicate", &["[E1]"])),
            approve: lint_errors,
            hold: Ok,
        },
        Case {
            name: "a duplicate Expectations section",
            bytes: format!(
                "{}\n## Expectations\n- [E9] Twice. {{verify: manual}}\n",
                good()
            )
            .into_bytes(),
            unreadable: None,
            lint: Some(("section-duplicate", &["Expectations"])),
            approve: lint_errors,
            hold: Ok,
        },
        Case {
            name: "an unknown type",
            bytes: with_field("type", "epic"),
            unreadable: None,
            lint: Some(("field-invalid", &["type", "epic"])),
            approve: lint_errors,
            hold: Ok,
        },
        Case {
            name: "an unknown tier",
            bytes: with_field("tier", "XXL"),
            unreadable: None,
            lint: Some(("field-invalid", &["tier", "XXL"])),
            approve: lint_errors,
            hold: Ok,
        },
        Case {
            name: "an unknown status",
            bytes: with_field("status", "wip"),
            unreadable: None,
            lint: Some(("field-invalid", &["status", "wip"])),
            approve: lint_errors,
            hold: lint_errors,
        },
        Case {
            name: "an unknown risk",
            bytes: with_field("risk", "extreme"),
            unreadable: None,
            lint: Some(("field-invalid", &["risk", "extreme"])),
            approve: lint_errors,
            hold: Ok,
        },
        Case {
            name: "autonomy 7",
            bytes: with_field("autonomy", "7"),
            unreadable: None,
            lint: Some(("field-invalid", &["autonomy"])),
            approve: lint_errors,
            hold: Ok,
        },
        Case {
            name: "an id that is not the folder name",
            bytes: with_field("id", "002-other"),
            unreadable: None,
            lint: Some(("field-invalid", &["002-other", ID])),
            approve: lint_errors,
            hold: Ok,
        },
        Case {
            name: "a 10 MB file",
            bytes: huge.into_bytes(),
            unreadable: Some(&["unit-too-large"]),
            lint: None,
            approve: Refused("unit-too-large"),
            hold: Refused("unit-too-large"),
        },
    ]
}

fn assert_no_crash(run: &Run, what: &str) {
    assert!(
        (0..=4).contains(&run.code),
        "{what}: exit {} (101 is a panic):\n{run:#?}",
        run.code
    );
    assert!(!run.stderr.contains("panicked"), "{what}: {run:#?}");
}

fn error_codes(report: &Value) -> Vec<&str> {
    report["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["code"].as_str().unwrap())
        .collect()
}

fn check_expect(run: &Run, expect: Expect, unreadable: Option<&[&str]>, what: &str) {
    match (expect, unreadable) {
        (Expect::Ok, _) => assert_eq!(run.code, 0, "{what}: {run:#?}"),
        (Expect::Refused(_), Some(codes)) => {
            let code = run.json()["refused"]["code"].clone();
            assert!(
                codes.iter().any(|c| code == *c),
                "{what}: {code} not in {codes:?}"
            );
            run.refused(3, code.as_str().unwrap());
        }
        (Expect::Refused(code), None) => {
            run.refused(3, code);
        }
    }
}

#[test]
fn malformed_units_are_reported_never_crashed_on() {
    for case in cases() {
        let env = TestEnv::initialized();
        let rel = unit_file(ID);
        let name = case.name;
        let fresh = || env.write(&rel, &case.bytes);
        fresh();

        // list: always exit 0, the unit listed (with its error when unreadable).
        for json in [true, false] {
            let run = if json {
                env.iced_json(&["list"])
            } else {
                env.iced(&["list"])
            };
            assert_no_crash(&run, &format!("{name}: list"));
            assert_eq!(run.code, 0, "{name}: list {run:#?}");
            if json {
                let rows = run.json();
                assert_eq!(rows.as_array().unwrap().len(), 1, "{name}: {rows}");
                assert_eq!(rows[0]["id"], ID);
                match case.unreadable {
                    Some(codes) => assert!(
                        codes.iter().any(|c| rows[0]["error"]["code"] == *c),
                        "{name}: {rows}"
                    ),
                    None => assert!(rows[0].get("error").is_none(), "{name}: {rows}"),
                }
            }
        }

        // status and lint at every stage, in JSON and in text.
        for args in [
            &["status", ID][..],
            &["lint", ID, "--stage", "draft"],
            &["lint", ID, "--stage", "signoff"],
            &["lint", ID, "--stage", "accept"],
            &["lint", ID, "--stage", "validate"],
        ] {
            let what = format!("{name}: {args:?}");
            let text = env.iced(args);
            assert_no_crash(&text, &what);
            let run = env.iced_json(args);
            assert_no_crash(&run, &what);
            assert_eq!(text.code, run.code, "{what}: text and JSON disagree");
            if let Some(codes) = case.unreadable {
                let code = run.json()["refused"]["code"].clone();
                assert!(codes.iter().any(|c| code == *c), "{what}: {run:#?}");
                run.refused(3, code.as_str().unwrap());
                continue;
            }
            if args[0] == "status" {
                assert_eq!(run.code, 0, "{what}: {run:#?}");
                assert_eq!(run.json()["id"], ID);
                continue;
            }
            let report = run.json();
            let codes = error_codes(&report);
            match case.lint {
                Some((code, words)) => {
                    assert_eq!(run.code, 3, "{what}: {report}");
                    let issue = report["errors"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .find(|e| e["code"] == code)
                        .unwrap_or_else(|| panic!("{what}: no {code} in {report}"));
                    let message = issue["message"].as_str().unwrap();
                    for word in words {
                        assert!(message.contains(word), "{what}: {message}");
                    }
                }
                None => {
                    assert_eq!(codes, Vec::<&str>::new(), "{what}: {report}");
                    assert_eq!(run.code, 0);
                }
            }
        }
        assert_eq!(
            env.read_bytes(&rel),
            case.bytes,
            "{name}: a read changed the file"
        );

        // approve --yes and hold, each from the original bytes.
        for (args, expect) in [
            (&["approve", ID, "--yes"][..], case.approve),
            (&["hold", ID, "a", "reason"], case.hold),
        ] {
            let what = format!("{name}: {args:?}");
            fresh();
            let text = env.iced(args);
            assert_no_crash(&text, &what);
            fresh();
            let run = env.iced_json(args);
            assert_no_crash(&run, &what);
            check_expect(&run, expect, case.unreadable, &what);
            if run.code != 0 {
                assert_eq!(env.read_bytes(&rel), case.bytes, "{what} changed the file");
            }
        }
    }
}

#[test]
fn a_unit_without_frontmatter_reports_no_field_errors() {
    // SPEC 10.1: with the frontmatter absent or unterminated, field-invalid is not reported.
    let env = TestEnv::initialized();
    for text in [
        GOOD_BODY.trim_start().to_owned(),
        format!("---\niced: 0.1\n{GOOD_BODY}"),
    ] {
        env.write(&unit_file(ID), &text);
        let report = env.iced_json(&["lint", ID, "--stage", "draft"]).json();
        assert_eq!(error_codes(&report), ["frontmatter-missing"], "{report}");
    }
    // The title falls back to the first `#` heading.
    env.write(&unit_file(ID), GOOD_BODY.trim_start());
    let status = env.iced_json(&["status", ID]).ok().json();
    assert_eq!(status["title"], "Session timeout");
}

#[test]
fn a_crlf_unit_lints_clean_approves_and_is_written_with_lf() {
    let env = TestEnv::initialized();
    let id = env.good_unit("Session timeout");
    let rel = unit_file(&id);
    env.write(&rel, env.read(&rel).replace('\n', "\r\n"));
    for stage in ["draft", "signoff", "validate"] {
        let run = env.iced_json(&["lint", &id, "--stage", stage]);
        assert_eq!(run.code, 0, "{stage}: {run:?}");
        assert_eq!(run.json()["errors"], serde_json::json!([]));
    }
    let approved = env.iced_json(&["approve", &id, "--yes"]).ok().json();
    let text = env.read(&rel);
    assert!(!text.contains('\r'), "approve kept CR: {text:?}");
    assert!(text.contains("\nstatus: approved\n"));
    let status = env.iced_json(&["status", &id]).ok().json();
    assert_eq!(status["contract_hash"], approved["contract_hash"]);
    assert_eq!(status["lint"]["errors"], 0);
}

#[test]
fn a_value_with_a_line_separator_is_an_unparsable_frontmatter_line() {
    let env = TestEnv::initialized();
    env.write(
        &unit_file(ID),
        good().replacen("title: ", "title: a\u{2028}b ", 1),
    );
    let report = env.iced_json(&["lint", ID]).json();
    assert!(
        error_codes(&report).contains(&"frontmatter-missing"),
        "{report}"
    );
    env.iced_json(&["status", ID]).ok();
}

#[test]
fn a_missing_intent_folder_is_reported_not_crashed_on() {
    let env = TestEnv::initialized();
    env.good_unit("Session timeout");
    std::fs::remove_dir_all(env.path("intent")).unwrap();
    for args in [
        &["list"][..],
        &["status"],
        &["status", ID],
        &["lint", ID],
        &["approve", ID, "--yes"],
        &["hold", ID, "x"],
    ] {
        let run = env.iced_json(args);
        assert_no_crash(&run, &format!("{args:?}"));
        run.refused(3, "not-initialized");
        let text = env.iced(args);
        assert_no_crash(&text, &format!("{args:?}"));
        assert!(text.stderr.contains("intent"), "{text:?}");
    }
}

#[test]
fn stray_entries_in_intent_are_not_crashed_on_and_count_for_numbering() {
    // Whether a numbered folder without `iced.md` is a unit (SPEC 1) or an unreadable one (SPEC 15,
    // "iced.md is missing") is left open here; a stray file is certainly not a unit.
    let env = TestEnv::initialized();
    env.write("intent/002-stray.md", "not a unit\n");
    std::fs::create_dir_all(env.path("intent/003-empty")).unwrap();
    std::fs::create_dir_all(env.path("intent/notes")).unwrap();
    let rows = env.iced_json(&["list"]).ok().json();
    assert!(
        rows.as_array()
            .unwrap()
            .iter()
            .all(|r| r["id"] != "002-stray.md" && r["id"] != "notes"),
        "{rows}"
    );
    for args in [
        &["status", "3"][..],
        &["lint", "3"],
        &["approve", "3", "--yes"],
    ] {
        let run = env.iced_json(args);
        assert_no_crash(&run, &format!("{args:?}"));
        assert_eq!(run.code, 3, "{args:?}: {run:?}");
    }
    // They still count for the next number. (The title is not `next`: that slug is reserved for
    // `iced build next`, SPEC 3.)
    assert_eq!(env.new_unit("after the strays"), "004-after-the-strays");
}
