//! Lint, rule by rule and stage by stage (SPEC sections 4, 6, 7 and 10).
//!
//! [`rules`] is the table: for every code of SPEC 10.1, units that raise it (and near misses that
//! must not), with the stages of 10.2 at which the code is reported, its severity and the lines it
//! points at. Every case is linted at all four stages, and a case fails when its code is missing,
//! present where it should not be, reported with the other severity, on other lines, or when any
//! code the case does not expect shows up. The tests after the table cover the body-parsing rules
//! of section 6 through `lint` and `parse_unit`.

use super::frontmatter::{self, Edit};
use super::hash::contract_hash;
use super::kinds::{Stage, Status};
use super::lint::{lint, solution_word, LintContext, LintReport, REQUIRED};
use super::parse::parse_unit;

const STAGES: [Stage; 4] = [Stage::Draft, Stage::Signoff, Stage::Accept, Stage::Validate];

/// Reported at `[draft, signoff, accept, validate]`.
type At = [bool; 4];
/// An "all" rule.
const ALL: At = [true, true, true, true];
/// A signoff rule on a unit past `draft` (so `validate` runs the signoff rules too).
const SIGNOFF: At = [false, true, true, true];
/// `contract-changed` on a unit past approval.
const ACCEPT_VALIDATE: At = [false, false, true, true];
/// `evidence-missing`.
const ACCEPT: At = [false, false, true, false];
const NEVER: At = [false, false, false, false];

/// The folder the fixture lives in, as `LintContext::folder`.
const FOLDER: &str = "042-dark-mode";

/// A unit that lints clean at every stage once `{status}` and `{hash}` are filled in ([`unit`]).
/// Line numbers, for reading the cases: frontmatter 1-13, `### Goal` 19, `[C1]` 23,
/// `### Failure conditions` 25, `[F1]` 26, `## Context` 32, `## Expectations` 36, `[E1]` 37,
/// `[E2]` 38, `## Open questions` 40, `[Q1]` 41.
const CLEAN: &str = "\
---
iced: 0.1
id: 042-dark-mode
title: Dark mode
type: feature
tier: M
parent: null
status: {status}
autonomy: 1
risk: medium
attempts: 0
contract_hash: {hash}
---

# Dark mode

## Intent

### Goal
Users can read the app at night without glare.

### Constraints
- [C1] The light theme does not change.

### Failure conditions
- [F1] The theme resets after a reload.

### Scope
- In: settings toggle, persistence
- Out: marketing site

## Context
- [code] Theme tokens live in src/styles/tokens.css.
- [product] Most sessions start after 8 pm.

## Expectations
- [E1] The toggle switches the theme. {verify: test | tests/theme.spec.ts}
- [E2] The choice survives a reload. {verify: manual}

## Open questions
- [Q1] Follow the OS preference? -> A: Yes, until the user picks a theme.
";

const GOAL: &str = "Users can read the app at night without glare.\n";
const F1: &str = "- [F1] The theme resets after a reload.\n";
const E1: &str = "- [E1] The toggle switches the theme. {verify: test | tests/theme.spec.ts}\n";
const E2: &str = "- [E2] The choice survives a reload. {verify: manual}\n";
const Q1: &str = "- [Q1] Follow the OS preference? -> A: Yes, until the user picks a theme.\n";
const CONTEXT2: &str = "- [product] Most sessions start after 8 pm.\n";

/// What the frontmatter's `contract_hash` holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hash {
    /// The hash of the final text.
    Right,
    /// The hash of the clean text, before the edits: approved, then edited.
    Stale,
    /// 64 hex digits that are nobody's hash.
    Wrong,
    /// `contract_hash: null`.
    Null,
    /// No `contract_hash` line at all.
    Absent,
}

/// [`CLEAN`] with `status`, each `(from, to)` edit applied once (`from` must be there), and the
/// contract hash as `hash` says.
fn unit(status: &str, hash: Hash, edits: &[(&str, &str)]) -> String {
    let mut text = CLEAN.replace("{status}", status);
    let before = contract_hash(&text);
    for (from, to) in edits {
        assert!(
            text.contains(from),
            "fixture edit: `{from}` is not in the unit"
        );
        text = text.replacen(from, to, 1);
    }
    let value = match hash {
        Hash::Right => contract_hash(&text),
        Hash::Stale => before,
        Hash::Wrong => "0".repeat(64),
        Hash::Null => "null".to_owned(),
        Hash::Absent => return text.replacen("contract_hash: {hash}\n", "", 1),
    };
    text.replacen("{hash}", &value, 1)
}

/// An approved unit with the right hash, edited.
fn approved(edits: &[(&str, &str)]) -> String {
    unit("approved", Hash::Right, edits)
}

/// The 1-based line of the only line of `text` containing `needle`.
fn line(text: &str, needle: &str) -> usize {
    let hits: Vec<usize> = text
        .split('\n')
        .enumerate()
        .filter(|(_, l)| l.contains(needle))
        .map(|(i, _)| i + 1)
        .collect();
    assert_eq!(hits.len(), 1, "`{needle}` must be on exactly one line");
    hits[0]
}

#[derive(Debug, Clone)]
struct Ctx {
    evidence: Option<bool>,
    folder: Option<&'static str>,
    same_number: Vec<String>,
}

impl Default for Ctx {
    /// A unit in its own folder, with evidence, alone with its number.
    fn default() -> Self {
        Ctx {
            evidence: Some(true),
            folder: Some(FOLDER),
            same_number: Vec::new(),
        }
    }
}

fn run(text: &str, stage: Stage, ctx: &Ctx) -> LintReport {
    let parsed = parse_unit(text);
    lint(
        &parsed,
        stage,
        &LintContext {
            text: Some(text),
            evidence_exists: ctx.evidence,
            folder: ctx.folder,
            same_number: &ctx.same_number,
        },
    )
}

/// Lint with the default context.
fn at(text: &str, stage: Stage) -> LintReport {
    run(text, stage, &Ctx::default())
}

/// `(code, line)` of every error and every warning.
type Found = Vec<(&'static str, Option<usize>)>;

fn found(report: &LintReport) -> (Found, Found) {
    let f = |v: &[super::Issue]| v.iter().map(|i| (i.code, i.line)).collect();
    (f(&report.errors), f(&report.warnings))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sev {
    Error,
    Warning,
}

#[derive(Debug, Clone)]
struct Case {
    name: String,
    text: String,
    ctx: Ctx,
    code: &'static str,
    sev: Sev,
    at: At,
    /// The `line` of each issue with `code`, in order, wherever it is reported; `None`: not checked.
    lines: Option<Vec<Option<usize>>>,
    /// Other codes this text may raise too; any code not here and not `code` fails the case.
    also: &'static [&'static str],
}

fn case(name: impl Into<String>, code: &'static str, sev: Sev, at: At, text: String) -> Case {
    Case {
        name: name.into(),
        text,
        ctx: Ctx::default(),
        code,
        sev,
        at,
        lines: None,
        also: &[],
    }
}

impl Case {
    /// The issues are on these lines (one issue per line given).
    fn lines(mut self, lines: &[usize]) -> Case {
        self.lines = Some(lines.iter().map(|&l| Some(l)).collect());
        self
    }

    /// One issue, without a line.
    fn no_line(mut self) -> Case {
        self.lines = Some(vec![None]);
        self
    }

    fn ctx(mut self, ctx: Ctx) -> Case {
        self.ctx = ctx;
        self
    }

    fn also(mut self, also: &'static [&'static str]) -> Case {
        self.also = also;
        self
    }
}

/// Every problem with one case, at every stage.
fn check(case: &Case) -> Vec<String> {
    let mut problems = Vec::new();
    for (i, &stage) in STAGES.iter().enumerate() {
        let report = run(&case.text, stage, &case.ctx);
        let (errors, warnings) = found(&report);
        let (right, wrong) = match case.sev {
            Sev::Error => (&errors, &warnings),
            Sev::Warning => (&warnings, &errors),
        };
        let mut say = |what: String| {
            problems.push(format!(
                "[{}] at stage {stage}: {what}\n    errors: {errors:?}\n    warnings: {warnings:?}",
                case.name
            ))
        };
        if wrong.iter().any(|(c, _)| *c == case.code) {
            say(format!("`{}` has the wrong severity", case.code));
        }
        let lines: Vec<Option<usize>> = right
            .iter()
            .filter(|(c, _)| *c == case.code)
            .map(|(_, l)| *l)
            .collect();
        match (case.at[i], lines.is_empty()) {
            (true, true) => say(format!("`{}` expected, not reported", case.code)),
            (false, false) => say(format!("`{}` reported, not expected", case.code)),
            (true, false) => {
                if let Some(want) = &case.lines {
                    if &lines != want {
                        say(format!("`{}` on lines {lines:?}, want {want:?}", case.code));
                    }
                }
            }
            (false, true) => {}
        }
        let mut unexpected: Vec<&str> = Vec::new();
        for (code, _) in errors.iter().chain(warnings.iter()) {
            if *code != case.code && !case.also.contains(code) && !unexpected.contains(code) {
                unexpected.push(code);
            }
        }
        if !unexpected.is_empty() {
            say(format!("unexpected {unexpected:?}"));
        }
    }
    problems
}

/// The table of SPEC 10.1 x 10.2.
fn rules() -> Vec<Case> {
    use Sev::{Error, Warning};
    let mut cases = Vec::new();

    // frontmatter-missing: all stages, error. Without a readable block, field-invalid is not
    // reported (10.1), so these cases allow no other code.
    let clean = approved(&[]);
    let body = clean.splitn(3, "---\n").nth(2).unwrap().to_owned();
    assert!(body.starts_with("\n# Dark mode"));
    cases.push(case(
        "no frontmatter",
        "frontmatter-missing",
        Error,
        ALL,
        body,
    ));
    cases.push(case(
        "no closing ---",
        "frontmatter-missing",
        Error,
        ALL,
        approved(&[("---\n\n# Dark mode", "\n# Dark mode")]),
    ));
    cases.push(case(
        "leading BOM",
        "frontmatter-missing",
        Error,
        ALL,
        format!("\u{FEFF}{}", approved(&[])),
    ));
    let bad = approved(&[("risk: medium\n", "risk: medium\nthis is not a pair\n")]);
    let n = line(&bad, "this is not a pair");
    cases.push(
        case(
            "a line that is not key: value",
            "frontmatter-missing",
            Error,
            ALL,
            bad,
        )
        .lines(&[n]),
    );
    cases.push(case(
        "a key with U+2028 in its value",
        "frontmatter-missing",
        Error,
        ALL,
        approved(&[("parent: null\n", "parent: a\u{2028}b\n")]),
    ));
    // Near misses: comments, blank lines, `key:value`, a closing line with spaces around it.
    cases.push(case(
        "comments, blank lines, no space after the colon, `---  ` closing",
        "frontmatter-missing",
        Error,
        NEVER,
        approved(&[
            (
                "iced: 0.1\n",
                "# comment\n\n  # indented comment\niced:0.1\n",
            ),
            ("---\n\n# Dark mode", "---  \n\n# Dark mode"),
        ]),
    ));

    // field-invalid: all stages, error, on the field's line when it has one.
    let lines_of = [
        ("iced", "iced: 0.1\n"),
        ("id", "id: 042-dark-mode\n"),
        ("title", "title: Dark mode\n"),
        ("type", "type: feature\n"),
        ("tier", "tier: M\n"),
        ("status", "status: approved\n"),
        ("autonomy", "autonomy: 1\n"),
        ("risk", "risk: medium\n"),
    ];
    assert_eq!(lines_of.map(|(k, _)| k), REQUIRED);
    for (key, fm_line) in lines_of {
        cases.push(
            case(
                format!("`{key}` missing"),
                "field-invalid",
                Error,
                ALL,
                approved(&[(fm_line, "")]),
            )
            .no_line(),
        );
    }
    for (from, to) in [
        ("title: Dark mode", "title: \"\""),
        ("title: Dark mode", "title:"),
        ("risk: medium", "risk: ~"),
        ("type: feature", "type: null"),
        ("type: feature", "type: story"),
        ("type: feature", "type: Feature"),
        ("tier: M", "tier: XXL"),
        ("tier: M", "tier: m"),
        ("status: approved", "status: finished"),
        ("status: approved", "status: Approved"),
        ("risk: medium", "risk: extreme"),
        ("autonomy: 1", "autonomy: 4"),
        ("autonomy: 1", "autonomy: -1"),
        ("autonomy: 1", "autonomy: one"),
        ("autonomy: 1", "autonomy: \"1\""),
        ("autonomy: 1", "autonomy: true"),
    ] {
        let text = approved(&[(from, to)]);
        let n = line(&text, to);
        cases.push(case(format!("`{to}`"), "field-invalid", Error, ALL, text).lines(&[n]));
    }
    // The id pattern, checked in a folder of the same name so only the pattern can fail.
    for bad_id in ["42-dark-mode", "042-Dark-Mode", "042_dark", "042-"] {
        let text = approved(&[("id: 042-dark-mode", &format!("id: {bad_id}"))]);
        let ctx = Ctx {
            folder: Some(bad_id),
            ..Ctx::default()
        };
        cases.push(
            case(format!("id `{bad_id}`"), "field-invalid", Error, ALL, text)
                .ctx(ctx)
                .lines(&[3]),
        );
    }
    cases.push(
        case(
            "id differs from its folder",
            "field-invalid",
            Error,
            ALL,
            approved(&[]),
        )
        .ctx(Ctx {
            folder: Some("042-light-mode"),
            ..Ctx::default()
        })
        .lines(&[3]),
    );
    cases.push(
        case(
            "valid values: tier XL, autonomy 3",
            "field-invalid",
            Error,
            NEVER,
            approved(&[("tier: M", "tier: XL"), ("autonomy: 1", "autonomy: 3")]),
        )
        .ctx(Ctx::default()),
    );

    // section-duplicate: all stages, error, on the second heading. Each canonical section, as
    // headings are matched trimmed and case-insensitively.
    for dup in [
        "## INTENT",
        "##\tContext",
        "## expectations  ",
        "##   OPEN QUESTIONS",
    ] {
        let text = approved(&[(Q1, &format!("{Q1}\n{dup}\n"))]);
        let n = line(&text, dup);
        cases.push(
            case(
                format!("duplicate `{dup}`"),
                "section-duplicate",
                Error,
                ALL,
                text,
            )
            .lines(&[n]),
        );
    }
    cases.push(case(
        "an unknown section twice",
        "section-duplicate",
        Error,
        NEVER,
        approved(&[(Q1, &format!("{Q1}\n## Notes\na\n## Notes\nb\n"))]),
    ));

    // ids-duplicate: all stages, error: an item id used twice (read upper-cased, across sections),
    // and another folder with the unit's number (on the `id` line).
    let text = approved(&[(F1, &format!("{F1}- [f1] The toggle disappears.\n"))]);
    let n = line(&text, "[f1]");
    cases.push(case("[F1] and [f1]", "ids-duplicate", Error, ALL, text).lines(&[n]));
    let text = approved(&[(
        E2,
        &format!("{E2}- [C1] Contrast holds. {{verify: check | npm run a11y}}\n"),
    )]);
    let n = line(&text, "Contrast holds");
    cases.push(
        case(
            "[C1] constraint and expectation",
            "ids-duplicate",
            Error,
            ALL,
            text,
        )
        .lines(&[n]),
    );
    cases.push(
        case(
            "two other folders use number 042",
            "ids-duplicate",
            Error,
            ALL,
            approved(&[]),
        )
        .ctx(Ctx {
            same_number: vec!["042-light-mode".into(), "042-x".into()],
            ..Ctx::default()
        })
        .lines(&[3, 3]),
    );

    cases.push(case(
        "[Q1] again in an unknown section and in a comment",
        "ids-duplicate",
        Error,
        NEVER,
        approved(&[(
            Q1,
            &format!("{Q1}<!-- - [Q1] again -->\n\n## Notes\n- [Q1] again\n"),
        )]),
    ));

    // context-tag: all stages, warning.
    let text = approved(&[("[product]", "[producct]")]);
    let n = line(&text, "[producct]");
    cases.push(case("[producct]", "context-tag", Warning, ALL, text).lines(&[n]));
    cases.push(case(
        "known tags in any case",
        "context-tag",
        Warning,
        NEVER,
        approved(&[
            ("[code]", "[CODE]"),
            (
                CONTEXT2,
                "- [Product] a\n- [KNOWLEDGE] b\n- [Parent] c\n- [pArEnT] d\n",
            ),
        ]),
    ));

    // goal-missing: signoff, error, on the `### Goal` heading when there is one.
    cases.push(
        case(
            "empty goal",
            "goal-missing",
            Error,
            SIGNOFF,
            approved(&[(GOAL, "")]),
        )
        .lines(&[19]),
    );
    cases.push(
        case(
            "goal holding only a comment",
            "goal-missing",
            Error,
            SIGNOFF,
            approved(&[(GOAL, "<!-- The outcome,\n not the design. -->\n")]),
        )
        .lines(&[19]),
    );
    cases.push(
        case(
            "no Goal heading",
            "goal-missing",
            Error,
            SIGNOFF,
            approved(&[(&format!("### Goal\n{GOAL}"), "")]),
        )
        .no_line(),
    );
    // The Goal is read only under `## Intent`.
    let text = approved(&[
        (&format!("### Goal\n{GOAL}"), ""),
        (Q1, &format!("{Q1}\n## Notes\n### Goal\n{GOAL}")),
    ]);
    cases.push(
        case(
            "a Goal outside Intent",
            "goal-missing",
            Error,
            SIGNOFF,
            text,
        )
        .no_line(),
    );

    // goal-has-solution: signoff, warning, on the Goal heading.
    cases.push(
        case(
            "goal names Rust",
            "goal-has-solution",
            Warning,
            SIGNOFF,
            approved(&[("without glare.", "without glare, built in Rust.")]),
        )
        .lines(&[19]),
    );
    cases.push(case(
        "goal says trustworthy",
        "goal-has-solution",
        Warning,
        NEVER,
        approved(&[("without glare.", "with a trustworthy theme.")]),
    ));

    // failures-missing: signoff, error, on the heading; not for a review.
    cases.push(
        case(
            "no F item",
            "failures-missing",
            Error,
            SIGNOFF,
            approved(&[(F1, "")]),
        )
        .lines(&[25]),
    );
    for ty in ["bug", "chore", "project"] {
        cases.push(
            case(
                format!("no F item in a {ty}"),
                "failures-missing",
                Error,
                SIGNOFF,
                approved(&[(F1, ""), ("type: feature", &format!("type: {ty}"))]),
            )
            .lines(&[25]),
        );
    }
    cases.push(
        case(
            "no Failure conditions heading",
            "failures-missing",
            Error,
            SIGNOFF,
            approved(&[(&format!("### Failure conditions\n{F1}"), "")]),
        )
        .no_line(),
    );
    cases.push(case(
        "a review needs no F item",
        "failures-missing",
        Error,
        NEVER,
        approved(&[(F1, ""), ("type: feature", "type: review")]),
    ));

    // expectations-missing: signoff, error, on the heading.
    cases.push(
        case(
            "no E item",
            "expectations-missing",
            Error,
            SIGNOFF,
            approved(&[(&format!("{E1}{E2}"), "")]),
        )
        .lines(&[36]),
    );
    cases.push(
        case(
            "no Expectations section",
            "expectations-missing",
            Error,
            SIGNOFF,
            approved(&[(&format!("## Expectations\n{E1}{E2}\n"), "")]),
        )
        .no_line(),
    );
    // The letter need not match the section: [X1] in Expectations is an expectation.
    cases.push(case(
        "[X1] in Expectations",
        "expectations-missing",
        Error,
        NEVER,
        approved(&[(
            &format!("{E1}{E2}"),
            "- [X1] It works. {verify: check | make}\n",
        )]),
    ));

    // expectation-unverifiable: signoff, error, on the item.
    cases.push(
        case(
            "E1 without a suffix",
            "expectation-unverifiable",
            Error,
            SIGNOFF,
            approved(&[(" {verify: test | tests/theme.spec.ts}", "")]),
        )
        .lines(&[37]),
    );
    cases.push(
        case(
            "unknown kind",
            "expectation-unverifiable",
            Error,
            SIGNOFF,
            approved(&[("{verify: manual}", "{verify: bogus | x}")]),
        )
        .lines(&[38]),
    );
    cases.push(
        case(
            "both",
            "expectation-unverifiable",
            Error,
            SIGNOFF,
            approved(&[
                (" {verify: test | tests/theme.spec.ts}", ""),
                ("{verify: manual}", "{verify: automatic}"),
            ]),
        )
        .lines(&[37, 38]),
    );

    // open-questions: signoff, error, on the question.
    cases.push(
        case(
            "Q1 unanswered",
            "open-questions",
            Error,
            SIGNOFF,
            approved(&[(" -> A: Yes, until the user picks a theme.", "")]),
        )
        .lines(&[41]),
    );
    cases.push(
        case(
            "`-> A:` with nothing after it leaves the question open",
            "open-questions",
            Error,
            SIGNOFF,
            approved(&[(" Yes, until the user picks a theme.", "")]),
        )
        .lines(&[41]),
    );
    cases.push(
        case(
            "`-> A:` with only spaces after it leaves the question open",
            "open-questions",
            Error,
            SIGNOFF,
            approved(&[(" Yes, until the user picks a theme.", "   ")]),
        )
        .lines(&[41]),
    );

    // assumptions-present: signoff, warning, one per [assumed] line.
    let text = approved(&[(
        CONTEXT2,
        &format!(
            "{CONTEXT2}- [assumed] Users want it on by default.\n- [Assumed] Nobody prints.\n"
        ),
    )]);
    let lines = [line(&text, "on by default"), line(&text, "Nobody prints")];
    cases.push(
        case(
            "two assumptions",
            "assumptions-present",
            Warning,
            SIGNOFF,
            text,
        )
        .lines(&lines),
    );

    // contract-changed: accept and validate, error, for approved..accepted, on the
    // `contract_hash` line (or `status` when there is none).
    for status in ["approved", "building", "verifying", "done", "accepted"] {
        cases.push(
            case(
                format!("{status}, wrong hash"),
                "contract-changed",
                Error,
                ACCEPT_VALIDATE,
                unit(status, Hash::Wrong, &[]),
            )
            .lines(&[12]),
        );
    }
    for status in ["draft", "blocked", "rejected"] {
        cases.push(case(
            format!("{status}, wrong hash"),
            "contract-changed",
            Error,
            NEVER,
            unit(status, Hash::Wrong, &[]),
        ));
        cases.push(case(
            format!("{status}, no hash"),
            "contract-changed",
            Error,
            NEVER,
            unit(status, Hash::Absent, &[]),
        ));
    }
    cases.push(
        case(
            "approved, contract_hash: null",
            "contract-changed",
            Error,
            ACCEPT_VALIDATE,
            unit("approved", Hash::Null, &[]),
        )
        .lines(&[12]),
    );
    cases.push(
        case(
            "approved, no contract_hash line",
            "contract-changed",
            Error,
            ACCEPT_VALIDATE,
            unit("approved", Hash::Absent, &[]),
        )
        .lines(&[8]),
    );
    for (what, from, to) in [
        ("an expectation", "The toggle switches", "A toggle switches"),
        ("the goal", "without glare", "without any glare"),
        ("the scope", "- Out: marketing site", "- Out: nothing"),
        ("a constraint", "- [C1] The light", "- [C1] The dark"),
    ] {
        cases.push(
            case(
                format!("{what} edited after approval"),
                "contract-changed",
                Error,
                ACCEPT_VALIDATE,
                unit("building", Hash::Stale, &[(from, to)]),
            )
            .lines(&[12]),
        );
    }
    for (what, from, to) in [
        ("context", "[code] Theme tokens", "[code] Colour tokens"),
        ("a question", "Follow the OS", "Follow the system"),
        ("the title", "# Dark mode\n", "# Night mode\n"),
        ("the frontmatter", "risk: medium", "risk: low"),
        (
            "blank lines and trailing spaces",
            GOAL,
            "\n\nUsers can read the app at night without glare.   \n\n",
        ),
        (
            "a comment in Expectations",
            E2,
            &format!("{E2}<!-- note\n - [E3] x -->\n"),
        ),
        ("CRLF line endings", "\n## Intent\n", "\r\n## Intent\r\n"),
        (
            "an unknown section",
            Q1,
            &format!("{Q1}\n## Notes\nAnything.\n"),
        ),
    ] {
        cases.push(case(
            format!("{what} edited after approval"),
            "contract-changed",
            Error,
            NEVER,
            unit("done", Hash::Stale, &[(from, to)]),
        ));
    }

    // evidence-missing: accept only, error, for done and accepted units without evidence.md.
    let no_evidence = Ctx {
        evidence: Some(false),
        ..Ctx::default()
    };
    for status in ["done", "accepted"] {
        cases.push(
            case(
                format!("{status} without evidence"),
                "evidence-missing",
                Error,
                ACCEPT,
                unit(status, Hash::Right, &[]),
            )
            .ctx(no_evidence.clone())
            .lines(&[8]),
        );
    }
    for status in [
        "draft",
        "approved",
        "building",
        "verifying",
        "blocked",
        "rejected",
    ] {
        cases.push(
            case(
                format!("{status} without evidence"),
                "evidence-missing",
                Error,
                NEVER,
                unit(status, Hash::Right, &[]),
            )
            .ctx(no_evidence.clone()),
        );
    }
    cases.push(
        case(
            "done, evidence not looked for",
            "evidence-missing",
            Error,
            NEVER,
            unit("done", Hash::Right, &[]),
        )
        .ctx(Ctx {
            evidence: None,
            ..Ctx::default()
        }),
    );

    // Stage validate runs the signoff rules unless the status is draft, rejected or blocked.
    for status in Status::ALL {
        let off = matches!(status, Status::Draft | Status::Rejected | Status::Blocked);
        cases.push(
            case(
                format!("empty goal, {status}"),
                "goal-missing",
                Error,
                [false, true, true, !off],
                unit(status.as_str(), Hash::Right, &[(GOAL, "")]),
            )
            .lines(&[19]),
        );
        cases.push(
            case(
                format!("Q1 unanswered, {status}"),
                "open-questions",
                Error,
                [false, true, true, !off],
                unit(
                    status.as_str(),
                    Hash::Right,
                    &[(" -> A: Yes, until the user picks a theme.", "")],
                ),
            )
            .lines(&[41]),
        );
    }
    cases.push(
        case(
            "empty goal, unknown status",
            "goal-missing",
            Error,
            SIGNOFF,
            unit("finished", Hash::Right, &[(GOAL, "")]),
        )
        .also(&["field-invalid"]),
    );

    cases
}

#[test]
fn every_rule_at_every_stage() {
    let problems: Vec<String> = rules().iter().flat_map(check).collect();
    assert!(
        problems.is_empty(),
        "{} problem(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

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
