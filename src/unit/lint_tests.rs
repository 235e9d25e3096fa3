//! Lint, rule by rule and stage by stage (SPEC sections 4, 6, 7 and 10).
//!
//! [`rules`] is the table: for every code of SPEC 10.1, units that raise it (and near misses that
//! must not), with the stages of 10.2 at which the code is reported, its severity and the lines it
//! points at. Every case is linted at all four stages, and a case fails when its code is missing,
//! present where it should not be, reported with the other severity, on other lines, or when any
//! code the case does not expect shows up. The tests after the table cover the body-parsing rules
//! of section 6 through `lint` and `parse_unit`.

use super::hash::contract_hash;
use super::kinds::{Stage, Status};
use super::lint::{lint, LintContext, LintReport, REQUIRED};
use super::parse::parse_unit;

pub(super) const STAGES: [Stage; 4] =
    [Stage::Draft, Stage::Signoff, Stage::Accept, Stage::Validate];

/// Reported at `[draft, signoff, accept, validate]`.
pub(super) type At = [bool; 4];
/// An "all" rule.
pub(super) const ALL: At = [true, true, true, true];
/// A signoff rule on a unit past `draft` (so `validate` runs the signoff rules too).
pub(super) const SIGNOFF: At = [false, true, true, true];
/// `contract-changed` on a unit past approval.
pub(super) const ACCEPT_VALIDATE: At = [false, false, true, true];
/// `evidence-missing`.
pub(super) const ACCEPT: At = [false, false, true, false];
pub(super) const NEVER: At = [false, false, false, false];

/// The folder the fixture lives in, as `LintContext::folder`.
pub(super) const FOLDER: &str = "042-dark-mode";

/// A unit that lints clean at every stage once `{status}` and `{hash}` are filled in ([`unit`]).
/// Line numbers, for reading the cases: frontmatter 1-13, `### Goal` 19, `[C1]` 23,
/// `### Failure conditions` 25, `[F1]` 26, `## Context` 32, `## Expectations` 36, `[E1]` 37,
/// `[E2]` 38, `## Open questions` 40, `[Q1]` 41.
pub(super) const CLEAN: &str = "\
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

pub(super) const GOAL: &str = "Users can read the app at night without glare.\n";
pub(super) const F1: &str = "- [F1] The theme resets after a reload.\n";
pub(super) const E1: &str =
    "- [E1] The toggle switches the theme. {verify: test | tests/theme.spec.ts}\n";
pub(super) const E2: &str = "- [E2] The choice survives a reload. {verify: manual}\n";
pub(super) const Q1: &str =
    "- [Q1] Follow the OS preference? -> A: Yes, until the user picks a theme.\n";
pub(super) const CONTEXT2: &str = "- [product] Most sessions start after 8 pm.\n";

/// What the frontmatter's `contract_hash` holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Hash {
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
pub(super) fn unit(status: &str, hash: Hash, edits: &[(&str, &str)]) -> String {
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
pub(super) fn approved(edits: &[(&str, &str)]) -> String {
    unit("approved", Hash::Right, edits)
}

/// The 1-based line of the only line of `text` containing `needle`.
pub(super) fn line(text: &str, needle: &str) -> usize {
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
pub(super) struct Ctx {
    pub(super) evidence: Option<bool>,
    pub(super) folder: Option<&'static str>,
    pub(super) same_number: Vec<String>,
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

pub(super) fn run(text: &str, stage: Stage, ctx: &Ctx) -> LintReport {
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
pub(super) fn at(text: &str, stage: Stage) -> LintReport {
    run(text, stage, &Ctx::default())
}

/// `(code, line)` of every error and every warning.
pub(super) type Found = Vec<(&'static str, Option<usize>)>;

pub(super) fn found(report: &LintReport) -> (Found, Found) {
    let f = |v: &[super::Issue]| v.iter().map(|i| (i.code, i.line)).collect();
    (f(&report.errors), f(&report.warnings))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Sev {
    Error,
    Warning,
}

#[derive(Debug, Clone)]
pub(super) struct Case {
    name: String,
    text: String,
    ctx: Ctx,
    pub(super) code: &'static str,
    sev: Sev,
    pub(super) at: At,
    /// The `line` of each issue with `code`, in order, wherever it is reported; `None`: not checked.
    lines: Option<Vec<Option<usize>>>,
    /// Other codes this text may raise too; any code not here and not `code` fails the case.
    also: &'static [&'static str],
}

pub(super) fn case(
    name: impl Into<String>,
    code: &'static str,
    sev: Sev,
    at: At,
    text: String,
) -> Case {
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
    pub(super) fn lines(mut self, lines: &[usize]) -> Case {
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

    pub(super) fn also(mut self, also: &'static [&'static str]) -> Case {
        self.also = also;
        self
    }
}

/// Every problem with one case, at every stage.
pub(super) fn check(case: &Case) -> Vec<String> {
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
pub(super) fn rules() -> Vec<Case> {
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
    cases.extend(super::lint_coverage_tests::cases());
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
