//! Lint, the body-parsing rules of SPEC section 6 (and the frontmatter's), through `lint` and
//! `parse_unit`: line numbers, line endings, items, continuation lines, context and scope lines.
//! The fixture and helpers are [`super::lint_tests`]'s.

use super::frontmatter::{self, Edit};
use super::hash::contract_hash;
use super::kinds::{Stage, Status};
use super::lint::{solution_word, LintReport};
use super::lint_tests::*;
use super::parse::parse_unit;

#[test]
fn the_table_covers_every_code_of_spec_10_1() {
    const CODES: &[&str] = &[
        "frontmatter-missing",
        "field-invalid",
        "section-duplicate",
        "ids-duplicate",
        "context-tag",
        "goal-missing",
        "goal-has-solution",
        "failures-missing",
        "expectations-missing",
        "expectation-unverifiable",
        "open-questions",
        "assumptions-present",
        "goal-uncovered",
        "goal-clause-unknown",
        "contract-changed",
        "evidence-missing",
    ];
    let table = rules();
    for code in CODES {
        let cases: Vec<&Case> = table.iter().filter(|c| c.code == *code).collect();
        assert!(
            cases.iter().any(|c| c.at.contains(&true)),
            "no case raises `{code}`"
        );
        assert!(
            cases.iter().any(|c| c.at.contains(&false)),
            "no case shows a stage (or a near miss) where `{code}` is not reported"
        );
    }
    assert!(table.iter().all(|c| CODES.contains(&c.code)));
}

#[test]
fn a_clean_unit_has_no_findings_at_any_stage_in_any_status() {
    for status in Status::ALL {
        let text = unit(status.as_str(), Hash::Right, &[]);
        for stage in STAGES {
            let report = at(&text, stage);
            assert_eq!(report, LintReport::default(), "{status} at {stage}");
            assert!(report.is_clean());
        }
    }
}

#[test]
fn line_numbers_count_the_frontmatter() {
    // Every line numbered by hand: 1-based, in the whole file.
    let text = "---
iced: 0.1
id: 007-lines
title: Lines
type: bug
tier: S
status: building
autonomy: 1
risk: 4
contract_hash: 0000
---
<!-- a comment
over three lines -->
## Intent
### Goal
### Failure conditions
## Context
- [guessed] The tag is unknown.
- [assumed] Wrapped
  over two lines.
## Expectations
## Open questions
- [Q1] Open?
- [q1] Again?
## expectations
";
    let own = Ctx {
        folder: Some("007-lines"),
        ..Ctx::default()
    };
    let (errors, warnings) = found(&run(text, Stage::Accept, &own));
    assert_eq!(
        errors,
        [
            ("field-invalid", Some(9)),
            ("section-duplicate", Some(25)),
            ("ids-duplicate", Some(24)),
            ("goal-missing", Some(15)),
            ("failures-missing", Some(16)),
            ("expectations-missing", Some(21)),
            ("open-questions", Some(23)),
            ("open-questions", Some(24)),
            ("contract-changed", Some(10)),
        ]
    );
    assert_eq!(
        warnings,
        [("context-tag", Some(18)), ("assumptions-present", Some(19))]
    );
    // Another folder with the number points at the `id` line; a wrong folder too.
    let report = run(
        text,
        Stage::Draft,
        &Ctx {
            folder: Some("007-other"),
            same_number: vec!["007-x".into()],
            evidence: None,
        },
    );
    let (errors, _) = found(&report);
    assert!(errors.contains(&("field-invalid", Some(3))), "{errors:?}");
    assert!(errors.contains(&("ids-duplicate", Some(3))), "{errors:?}");
}

#[test]
fn crlf_and_lone_cr_read_as_lf() {
    for eol in ["\r\n", "\r"] {
        let clean = unit("done", Hash::Right, &[]).replace('\n', eol);
        for stage in STAGES {
            assert_eq!(at(&clean, stage), LintReport::default(), "{eol:?} {stage}");
        }
        // Lines are counted the same way.
        let text = approved(&[(" {verify: test | tests/theme.spec.ts}", "")]).replace('\n', eol);
        let (errors, _) = found(&at(&text, Stage::Signoff));
        assert_eq!(errors, [("expectation-unverifiable", Some(37))], "{eol:?}");
    }
}

#[test]
fn frontmatter_messages_say_what_to_fix() {
    let message = |text: &str| {
        let report = at(text, Stage::Draft);
        assert_eq!(report.errors.len(), 1, "{report:?}");
        assert_eq!(report.errors[0].code, "frontmatter-missing");
        report.errors[0].message.clone()
    };
    let bom = message(&format!("\u{FEFF}{}", approved(&[])));
    assert!(bom.contains("byte-order mark"), "{bom}");
    assert!(bom.contains("without a BOM"), "{bom}");
    let bad = message(&approved(&[("risk: medium\n", "risk: medium\n- a list\n")]));
    assert!(bad.contains("line 11"), "{bad}");
    let open = message(&approved(&[("---\n\n# Dark mode", "\n# Dark mode")]));
    assert!(open.contains("not closed"), "{open}");
}

#[test]
fn the_last_of_a_repeated_frontmatter_key_wins() {
    let text = approved(&[("risk: medium\n", "risk: medium\nrisk: extreme\n")]);
    let (errors, _) = found(&at(&text, Stage::Draft));
    assert_eq!(errors, [("field-invalid", Some(11))]);
    let text = approved(&[("risk: medium\n", "risk: extreme\nrisk: medium\n")]);
    assert!(at(&text, Stage::Draft).errors.is_empty());
}

/// An approved unit whose Expectations and Open questions sections are replaced.
fn with_items(expectations: &str, questions: &str) -> String {
    approved(&[(&format!("{E1}{E2}"), expectations), (Q1, questions)])
}

/// Codes and lines found at stage signoff.
fn signoff(text: &str) -> (Found, Found) {
    found(&at(text, Stage::Signoff))
}

#[test]
fn a_suffix_or_answer_on_a_continuation_line_counts() {
    let text = with_items(
        "- [E1] The toggle switches
   the theme.
  {verify: test | tests/theme.spec.ts}
- [E2] The choice survives a reload. {verify:
  manual}
",
        "- [Q1] Follow the OS
  preference?
  -> A: Yes.
",
    );
    assert_eq!(signoff(&text), (vec![], vec![]));
    let p = parse_unit(&text);
    assert_eq!(p.expectations[0].text, "The toggle switches the theme.");
    assert_eq!(p.expectations[0].line, 37);
    assert_eq!(p.expectations[1].verify.as_ref().unwrap().kind, "manual");
    assert_eq!(p.expectations[1].line, 40);
    assert_eq!(p.questions[0].text, "Follow the OS preference?");
    assert_eq!(p.questions[0].answer.as_deref(), Some("Yes."));
    assert_eq!(p.questions[0].line, 44);
}

#[test]
fn a_blank_line_a_heading_or_a_list_item_ends_an_item() {
    // Each breaker, between an item and its would-be suffix or answer.
    for breaker in [
        "",
        "   ",
        "### How",
        "#### Deeper",
        "# Top",
        "- x",
        "* x",
        "+ x",
        "1. x",
        "22) x",
        "  - indented x",
    ] {
        let text = with_items(
            &format!(
                "- [E1] The toggle switches the theme.\n{breaker}\n{{verify: test | t}}\n{E2}"
            ),
            &format!("- [Q1] Follow the OS preference?\n{breaker}\n-> A: Yes.\n"),
        );
        let (errors, _) = signoff(&text);
        assert_eq!(
            errors,
            [
                ("expectation-unverifiable", Some(37)),
                ("open-questions", Some(43))
            ],
            "breaker {breaker:?}"
        );
    }
    // Lines that look close but do not break: no space after the marker.
    for joiner in ["#tag", "-x", "1.5", "+1", "*bold*"] {
        let text = with_items(
            &format!("- [E1] The toggle switches the theme.\n{joiner}\n{{verify: test | t}}\n{E2}"),
            &format!("- [Q1] Follow the OS preference?\n{joiner}\n-> A: Yes.\n"),
        );
        assert_eq!(signoff(&text), (vec![], vec![]), "joiner {joiner:?}");
        let p = parse_unit(&text);
        assert_eq!(
            p.expectations[0].text,
            format!("The toggle switches the theme. {joiner}")
        );
    }
    // The next item starts fresh: its suffix is its own.
    let text = with_items(
        &format!("- [E1] The toggle switches the theme.\n{E2}"),
        "- [Q1] Follow the OS preference?\n- [Q2] Other? -> A: Yes.\n",
    );
    let (errors, _) = signoff(&text);
    assert_eq!(
        errors,
        [
            ("expectation-unverifiable", Some(37)),
            ("open-questions", Some(41))
        ]
    );
}

#[test]
fn context_lines_wrap_like_items() {
    let text = approved(&[(
        CONTEXT2,
        "- [assumed] People
  use it at night.

  Not part of it.
",
    )]);
    let p = parse_unit(&text);
    assert_eq!(p.context[1].text, "People use it at night.");
    let (_, warnings) = signoff(&text);
    assert_eq!(warnings, [("assumptions-present", Some(34))]);
}

#[test]
fn scope_lines() {
    let text = approved(&[(
        "- In: settings toggle, persistence\n- Out: marketing site\n",
        "- In: a, b,, \n- OUT: c ,  ,\n* in : d\n- Out:\n  - iN:e\n- Inside: not scope\nIn: not a list item\n",
    )]);
    let p = parse_unit(&text);
    assert_eq!(p.scope.inside, ["a", "b", "d", "e"]);
    assert_eq!(p.scope.outside, ["c"]);
    // Scope lines elsewhere are not scope.
    let text = approved(&[(GOAL, &format!("{GOAL}- In: goal text\n"))]);
    let p = parse_unit(&text);
    assert_eq!(p.scope.inside, ["settings toggle", "persistence"]);
    assert!(p.goal.ends_with("- In: goal text"));
}

#[test]
fn context_tags_are_case_insensitive() {
    let text = approved(&[(
        CONTEXT2,
        "- [PRODUCT] a\n- [Knowledge] b\n- [PARENT] c\n- [Assumed] d\n* [ASSUMED] e\n- [todo] f\n- [Code1] not a tag line\n",
    )]);
    let p = parse_unit(&text);
    let tags: Vec<&str> = p.context.iter().map(|c| c.tag.as_str()).collect();
    assert_eq!(
        tags,
        [
            "code",
            "product",
            "knowledge",
            "parent",
            "assumed",
            "assumed",
            "todo"
        ]
    );
    let (errors, warnings) = signoff(&text);
    assert_eq!(errors, []);
    assert_eq!(
        warnings,
        [
            ("context-tag", Some(39)),
            ("assumptions-present", Some(37)),
            ("assumptions-present", Some(38))
        ]
    );
    // At draft the assumptions are not reported; the unknown tag is.
    let (_, warnings) = found(&at(&text, Stage::Draft));
    assert_eq!(warnings, [("context-tag", Some(39))]);
}

#[test]
fn html_comments_are_ignored_and_keep_line_numbers() {
    let text = with_items(
        &format!(
            "<!-- - [E3] Hidden, no suffix.
- [E4] Hidden too. -->
{E1}<!-- one line --> <!-- two
 on one line -->
- [E5] After the comments.
"
        ),
        "<!--\n- [Q2] Hidden question?\n## Expectations\n-->\n- [Q1] Open?\n",
    );
    let p = parse_unit(&text);
    let ids: Vec<&str> = p.items().map(|i| i.id.as_str()).collect();
    assert_eq!(ids, ["C1", "F1", "E1", "E5", "Q1"]);
    let (errors, _) = signoff(&text);
    // Neither the hidden items nor the hidden heading count; later lines keep their numbers.
    assert_eq!(
        errors,
        [
            ("expectation-unverifiable", Some(line(&text, "[E5]"))),
            ("open-questions", Some(line(&text, "[Q1] Open?")))
        ]
    );
    assert_eq!(line(&text, "[E5]"), 42);
    assert_eq!(line(&text, "[Q1] Open?"), 49);
    // A `<!--` with no `-->` after it is ordinary text.
    let text = with_items(
        &format!("{E1}{E2}"),
        &format!("{Q1}- [Q2] Still open? <!-- never closed\n- [Q3] Also open?\n"),
    );
    let (errors, _) = signoff(&text);
    assert_eq!(
        errors,
        [("open-questions", Some(42)), ("open-questions", Some(43))]
    );
    // A comment is not part of the contract: adding one changes no hash.
    let commented = approved(&[(GOAL, &format!("<!-- why -->{GOAL}<!--\n more\n-->\n"))]);
    assert_eq!(contract_hash(&commented), contract_hash(&approved(&[])));
}

#[test]
fn unknown_sections_are_kept_and_ignored() {
    let notes = "\n## Notes\n- [E9] Not an expectation.\n- [Q9] Not a question?\n- [wat] Not context.\n### Goal\n";
    let text = approved(&[(Q1, &format!("{Q1}{notes}"))]);
    for stage in STAGES {
        assert_eq!(at(&text, stage), LintReport::default(), "{stage}");
    }
    let p = parse_unit(&text);
    assert!(p.items().all(|i| !i.id.ends_with('9')));
    assert_eq!(p.goal, GOAL.trim());
    let names: Vec<&str> = p.sections.iter().map(|h| h.text.as_str()).collect();
    assert_eq!(
        names,
        [
            "Intent",
            "Context",
            "Expectations",
            "Open questions",
            "Notes"
        ]
    );
    // Writing the frontmatter keeps the section byte for byte.
    let written = frontmatter::apply(&text, &[Edit::set("status", "building")]);
    assert!(written.ends_with(notes), "{written}");
    assert_eq!(parse_unit(&written).sections.len(), 5);
    // An item id used in Notes is no duplicate.
    let text = approved(&[(Q1, &format!("{Q1}\n## Notes\n- [Q1] again\n"))]);
    assert!(at(&text, Stage::Accept).errors.is_empty());
}

#[test]
fn verify_kinds() {
    for (suffix, ok) in [
        ("{verify: test | t}", true),
        ("{verify: TEST | t}", true),
        ("{verify: Manual}", true),
        ("{verify: manual}", true),
        ("{verify: manual |}", true),
        ("{ verify :check|make lint }", true),
        ("{verify: metric | p95 < 200ms}  ", true),
        ("{verify: bogus | x}", false),
        ("{verify: tests | x}", false),
        ("{verify: te5t | x}", false),
        ("{verify: | x}", false),
        ("{Verify: test | x}", false),
        ("{verify: test | x} trailing", false),
        ("{verify: test | x", false),
        ("(verify: test | x)", false),
    ] {
        let text = with_items(&format!("- [E1] It works. {suffix}\n"), Q1);
        let (errors, _) = signoff(&text);
        let want: Found = if ok {
            vec![]
        } else {
            vec![("expectation-unverifiable", Some(37))]
        };
        assert_eq!(errors, want, "{suffix}");
    }
    let text = with_items("- [E1] It works. {verify: Manual}\n", Q1);
    let v = parse_unit(&text).expectations[0].verify.clone().unwrap();
    assert_eq!((v.kind.as_str(), v.reference.as_str()), ("manual", ""));
    let text = with_items("- [E1] It works. {verify: bogus | x}\n", Q1);
    let report = at(&text, Stage::Signoff);
    assert!(report.errors[0].message.contains("bogus"), "{report:?}");
}

#[test]
fn goal_has_solution_matches_whole_words() {
    for (goal, word) in [
        ("Rewrite it in rust", Some("rust")),
        ("Rust.", Some("rust")),
        ("(rust)", Some("rust")),
        ("_rust", Some("rust")),
        ("a trustworthy theme", None),
        ("rusty", None),
        ("rust2", None),
        ("a.rust", None),
        ("ship on next.js", Some("next.js")),
        ("Next.JS!", Some("next.js")),
        ("next.jsx", None),
        ("nextajs", None),
        ("on k8s", Some("k8s")),
        ("a nosql store", None),
        ("MySQL", Some("mysql")),
        ("postgresql", Some("postgresql")),
        ("microservices", Some("microservices")),
        ("a cron-job", Some("cron")),
        ("python and react", Some("react")),
        ("café rust", Some("rust")),
        ("Users can read at night.", None),
    ] {
        assert_eq!(solution_word(goal), word, "{goal}");
        let text = approved(&[(GOAL, &format!("{goal}\n"))]);
        for stage in STAGES {
            let report = at(&text, stage);
            let warned: Vec<&str> = report
                .warnings
                .iter()
                .filter(|w| w.code == "goal-has-solution")
                .map(|w| w.message.as_str())
                .collect();
            match word {
                Some(w) if stage != Stage::Draft => {
                    assert_eq!(warned.len(), 1, "{goal} at {stage}");
                    assert!(warned[0].contains(&format!("\"{w}\"")), "{}", warned[0]);
                }
                _ => assert!(warned.is_empty(), "{goal} at {stage}"),
            }
        }
    }
}

#[test]
fn a_goal_wrapped_over_lines_is_one_text() {
    let text = approved(&[(GOAL, "Users can read\n  the app at night\nwithout glare.\n")]);
    assert_eq!(parse_unit(&text).goal, GOAL.trim());
    // A technology named on a later line of the goal is still found.
    let text = approved(&[(GOAL, "Users can read at night\nwith Docker.\n")]);
    let (_, warnings) = signoff(&text);
    assert_eq!(warnings, [("goal-has-solution", Some(19))]);
}

#[test]
fn frontmatter_edits_keep_a_unit_clean() {
    // What `approve` does: set the status and hash; the unit stays clean and the hash holds.
    let draft = unit("draft", Hash::Null, &[]);
    let hash = contract_hash(&draft);
    let text = frontmatter::apply(
        &draft,
        &[
            Edit::set("status", "approved"),
            Edit::set("contract_hash", hash.as_str()),
            Edit::set("approved_by", "Dana Reyes"),
        ],
    );
    for stage in STAGES {
        assert_eq!(at(&text, stage), LintReport::default(), "{stage}");
    }
}
