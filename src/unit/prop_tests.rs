//! Properties of the unit format (SPEC sections 4, 6, 7 and 10):
//!
//! - reading never panics: any text, from raw bytes or built from the format's own pieces, goes
//!   through `parse_unit`, `contract_hash`, `frontmatter::parse` / `apply` and `lint` at every stage;
//! - writing frontmatter round-trips: after `apply`, `parse` gives back the last edit of each key,
//!   every other key's value and the body byte for byte, and applying the same edits again changes
//!   nothing;
//! - writing keeps what it does not change: comment lines, blank lines and other keys stay, in
//!   order, and key order holds (SPEC 4.2).

use super::frontmatter::{self, apply, format_scalar, parse, Edit, Scalar};
use super::hash::contract_hash;
use super::kinds::Stage;
use super::lint::{lint, solution_word, LintContext};
use super::parse::parse_unit;
use crate::text::to_lf;
use proptest::prelude::*;
use proptest::sample::select;

const STAGES: [Stage; 4] = [Stage::Draft, Stage::Signoff, Stage::Accept, Stage::Validate];

/// proptest's defaults (256 cases; `PROPTEST_CASES` overrides), without a regressions file: a
/// failure found here becomes a plain #[test] at the end of this file.
fn config() -> ProptestConfig {
    ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Pieces of unit text, the odd characters the readers treat specially among them.
const FRAGMENTS: &[&str] = &[
    "---",
    "--- ",
    "----",
    " ---",
    "## Intent",
    "## intent ",
    "##  ",
    "## ",
    "##Intent",
    "### Goal",
    "### Constraints",
    "### Failure conditions",
    "### Scope",
    "## Context",
    "## Expectations",
    "## Open questions",
    "## Notes",
    "#",
    "# x",
    "#### deep",
    "- [E1] x {verify: test | y}",
    "- [e2] wrapped",
    "{verify: manual}",
    "{goal: G1}",
    "{ goal : g2, G03 }",
    "{goal: G9",
    "A; b. C! d? é. É",
    "{verify: bogus | z}",
    "{verify:",
    "| y}",
    "- [Q1] a -> A: b",
    "- [Q2] open?",
    "-> A:",
    "- [C1] c",
    "- [F1] f",
    "* [X9] x",
    "- [code] c",
    "- [assumed] a",
    "- [Assumed]",
    "- [] empty",
    "- [1] digits",
    "- In: a, b",
    "- out: ,, c",
    "- In:",
    "1. numbered",
    "2) numbered",
    "+ plus",
    "<!--",
    "-->",
    "<!-- c -->",
    "<!-->",
    "\r\n",
    "\r",
    "\u{2028}",
    "\u{2029}",
    "\u{FEFF}",
    "\u{85}",
    "\u{A0}",
    "\u{0}",
    "\u{1b}[31m",
    "key: value",
    "iced: 0.1",
    "id: 042-x",
    "id: 042-X",
    "title: \"a\\u2028b\"",
    "title: 'it''s'",
    "type: review",
    "tier: XL",
    "status: approved",
    "status: done",
    "status: draft",
    "autonomy: 3",
    "autonomy: 99999999999999999999",
    "risk: high",
    "contract_hash: 0",
    "contract_hash: null",
    "k:",
    ": v",
    "rust next.js a.rust",
    "é",
    "日本語",
    "  ",
    "\t",
];

const SEPARATORS: &[&str] = &["\n", "\n", "\n", "\n", "\r\n", "\r", "", " "];

fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => select(FRAGMENTS).prop_map(str::to_owned),
        2 => "\\PC{0,16}",
        1 => any::<String>(),
    ]
}

/// Text shaped like a unit: format pieces, random text and odd characters, with odd line breaks.
fn unitish() -> impl Strategy<Value = String> {
    let body = || {
        proptest::collection::vec((fragment(), select(SEPARATORS)), 0..80)
            .prop_map(|parts| parts.into_iter().map(|(f, s)| f + s).collect::<String>())
    };
    prop_oneof![
        body(),
        // A well-formed head, so the body rules and the stage rules past sign-off run.
        (
            select(&["draft", "approved", "done", "accepted", "blocked", "bogus"][..]),
            body()
        )
            .prop_map(|(status, body)| format!(
                "---\niced: 0.1\nid: 042-x\ntitle: T\ntype: feature\ntier: M\nstatus: {status}\nautonomy: 1\nrisk: low\ncontract_hash: 0\n---\n{body}"
            )),
    ]
}

/// Arbitrary bytes, read the way a lossy reader would.
fn bytes_text() -> impl Strategy<Value = String> {
    proptest::collection::vec(any::<u8>(), 0..4096)
        .prop_map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// Everything that reads a unit, on one text. Panics are the failure.
fn read_everything(text: &str) {
    let parsed = parse_unit(text);
    let _ = contract_hash(text);
    let fm = parse(text);
    let _ = solution_word(&parsed.goal);
    let same = ["042-y".to_owned()];
    for stage in STAGES {
        for ctx in [
            LintContext::default(),
            LintContext {
                text: Some(text),
                evidence_exists: Some(false),
                folder: Some("042-x"),
                same_number: &same,
            },
        ] {
            let report = lint(&parsed, stage, &ctx);
            for issue in report.errors.iter().chain(&report.warnings) {
                // A line, when given, is inside the file.
                if let Some(line) = issue.line {
                    let lines = to_lf(text).split('\n').count();
                    assert!(
                        line >= 1 && line <= lines,
                        "{} at line {line} of {lines}",
                        issue.code
                    );
                }
            }
        }
    }
    let edits = [
        Edit::set("status", "approved"),
        Edit::set("title", text.get(..text.len().min(40)).unwrap_or("")),
        Edit::Remove("id".into()),
    ];
    let out = apply(text, &edits);
    let back = parse(&out);
    assert_eq!(back.data.str("status"), Some("approved"));
    assert_eq!(back.data.get("id"), None);
    // The text after the block iced wrote is the old body, or the whole old text.
    let lf = to_lf(text);
    assert!(
        back.body == fm.body || back.body == lf,
        "{text:?} -> {out:?}"
    );
}

/// `[A-Za-z_][A-Za-z0-9_-]{0,12}`, half the time from a small pool so keys collide.
fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        select(&["iced", "id", "title", "status", "a", "b", "a-b", "_x", "B2"][..])
            .prop_map(str::to_owned),
        "[A-Za-z_][A-Za-z0-9_-]{0,12}",
    ]
}

/// Strings that stress the quoting rules.
fn tricky_string() -> impl Strategy<Value = String> {
    const PIECES: &[&str] = &[
        " ",
        ": ",
        ":",
        " #",
        "# ",
        "#",
        "\"",
        "'",
        "''",
        "\\",
        "\\u2028",
        "\n",
        "\r",
        "\r\n",
        "\t",
        "\u{0}",
        "\u{1b}",
        "\u{7f}",
        "\u{85}",
        "\u{9f}",
        "\u{A0}",
        "\u{2028}",
        "\u{2029}",
        "\u{FEFF}",
        "\u{3000}",
        "null",
        "~",
        "true",
        "false",
        "-",
        "- ",
        "-12",
        "0",
        "007",
        "[",
        "]",
        "{",
        "}",
        ">",
        "|",
        "*",
        "&",
        "!",
        "%",
        "@",
        "`",
        ",",
        "?",
        "---",
        "é",
        "日本",
        "a",
        "text",
        "{verify: test | x}",
        "-> A:",
    ];
    proptest::collection::vec(select(PIECES), 0..6).prop_map(|p| p.concat())
}

fn scalar() -> impl Strategy<Value = Scalar> {
    prop_oneof![
        1 => Just(Scalar::Null),
        1 => any::<bool>().prop_map(Scalar::Bool),
        2 => any::<i64>().prop_map(Scalar::Int),
        2 => any::<String>().prop_map(Scalar::Str),
        4 => tricky_string().prop_map(Scalar::Str),
    ]
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        6 => (key(), scalar()).prop_map(|(k, v)| Edit::Set(k, v)),
        1 => key().prop_map(Edit::Remove),
    ]
}

fn edit_key(e: &Edit) -> &str {
    match e {
        Edit::Set(k, _) | Edit::Remove(k) => k,
    }
}

/// One line of a frontmatter block as a person might write it.
fn head_line() -> impl Strategy<Value = String> {
    prop_oneof![
        // Comments and blank lines.
        2 => (select(&["#", "# ", "  #", "\t# ", "#---"][..]), "[^\n\r]{0,20}")
            .prop_map(|(mark, text)| format!("{mark}{text}")),
        1 => select(&["", " ", "\t", "  \t "][..]).prop_map(str::to_owned),
        // Keys written by iced, and by hand.
        4 => (key(), scalar()).prop_map(|(k, v)| format!("{k}: {}", format_scalar(&v))),
        2 => (key(), select(&[":", " :", ":  ", "\t:\t"][..]), "[a-z0-9 ]{0,10}")
            .prop_map(|(k, sep, v)| format!("{k}{sep}{v}")),
    ]
}

/// A unit: a well-formed block of `lines`, then `body`, with `eol` line endings in the block.
fn text_of(lines: &[String], eol: &str, body: &str) -> String {
    let mut text = format!("---{eol}");
    for line in lines {
        text.push_str(line);
        text.push_str(eol);
    }
    text.push_str(&format!("---{eol}"));
    text.push_str(body);
    text
}

/// The key of a head line as [`head_line`] writes them, or `None` for a comment or blank line.
fn line_key(line: &str) -> Option<&str> {
    let first = line.chars().next()?;
    if !(first.is_ascii_alphabetic() || first == '_') {
        return None;
    }
    let end = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
        .unwrap_or(line.len());
    line[end..]
        .trim_start_matches([' ', '\t'])
        .starts_with(':')
        .then(|| &line[..end])
}

/// The lines of the frontmatter block of LF text that has one.
fn head_lines(text: &str) -> Vec<&str> {
    let mut lines = text.split('\n');
    assert_eq!(lines.next(), Some("---"));
    lines.take_while(|l| *l != "---").collect()
}

/// The outcome of a list of edits: for each key, its last edit.
fn last_edits(edits: &[Edit]) -> Vec<(&str, Option<&Scalar>)> {
    let mut out: Vec<(&str, Option<&Scalar>)> = Vec::new();
    for e in edits {
        let value = match e {
            Edit::Set(_, v) => Some(v),
            Edit::Remove(_) => None,
        };
        match out.iter_mut().find(|(k, _)| *k == edit_key(e)) {
            Some(slot) => slot.1 = value,
            None => out.push((edit_key(e), value)),
        }
    }
    out
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_bytes_never_panic(text in bytes_text()) {
        read_everything(&text);
    }

    #[test]
    fn unit_shaped_text_never_panics(text in unitish()) {
        read_everything(&text);
    }

    #[test]
    fn arbitrary_edits_on_arbitrary_text_read_back(
        text in prop_oneof![unitish(), bytes_text()],
        edits in proptest::collection::vec(edit(), 0..6),
    ) {
        let out = apply(&text, &edits);
        let back = parse(&out);
        for (k, v) in last_edits(&edits) {
            prop_assert_eq!(back.data.get(k), v, "key {}", k);
        }
        prop_assert_eq!(apply(&out, &edits), out);
    }

    #[test]
    fn frontmatter_round_trips(
        lines in proptest::collection::vec(head_line(), 0..12),
        eol in select(&["\n", "\r\n"][..]),
        body in prop_oneof![unitish(), any::<String>()],
        edits in proptest::collection::vec(edit(), 0..8),
    ) {
        let text = text_of(&lines, eol, &body);
        let before = parse(&text);
        prop_assert_eq!(&before.problem, &None);
        let out = apply(&text, &edits);
        prop_assert!(!out.contains('\r'), "written with LF only: {:?}", out);
        let after = parse(&out);
        prop_assert_eq!(&after.problem, &None, "{:?}", out);

        // The last edit of each key wins; a removed key is gone.
        let last = last_edits(&edits);
        for &(k, v) in &last {
            prop_assert_eq!(after.data.get(k), v, "key {} in {:?}", k, out);
        }
        // Every other key keeps its value, and no key appears from nowhere.
        for (k, v) in before.data.iter() {
            if !last.iter().any(|(e, _)| *e == k) {
                prop_assert_eq!(after.data.get(k), Some(v), "key {} in {:?}", k, out);
            }
        }
        for (k, _) in after.data.iter() {
            prop_assert!(
                before.data.get(k).is_some() || last.iter().any(|(e, v)| *e == k && v.is_some()),
                "key {} came from nowhere", k
            );
        }
        // The body is kept byte for byte (after CRLF -> LF).
        prop_assert_eq!(&after.body, &to_lf(&body).into_owned());
        prop_assert_eq!(&after.body, &before.body);
        prop_assert!(out.ends_with(&*to_lf(&body)));
        // Applying the same edits again changes nothing.
        prop_assert_eq!(apply(&out, &edits), out.clone());
    }

    #[test]
    fn comments_unknown_keys_and_order_are_kept(
        lines in proptest::collection::vec(head_line(), 0..14),
        eol in select(&["\n", "\r\n"][..]),
        edits in proptest::collection::vec(edit(), 0..6),
    ) {
        let text = text_of(&lines, eol, "\n# Body\n");
        let out = apply(&text, &edits);
        let edited = |line: &str| line_key(line).is_some_and(|k| edits.iter().any(|e| edit_key(e) == k));
        // Every line whose key is not edited (comments and blank lines included) is still there,
        // unchanged and in the same order, and nothing else is.
        let kept_before: Vec<&str> = lines.iter().map(String::as_str).filter(|l| !edited(l)).collect();
        let out_lines = head_lines(&out);
        let kept_after: Vec<&str> = out_lines.iter().copied().filter(|l| !edited(l)).collect();
        prop_assert_eq!(kept_before, kept_after, "{:?}", out);
        // Key order: the keys in first-seen order, less the removed ones, then new keys in the
        // order of their edits.
        let first_seen = |ls: &[&str]| {
            let mut keys: Vec<String> = Vec::new();
            for k in ls.iter().filter_map(|l| line_key(l)) {
                if !keys.iter().any(|x| x == k) {
                    keys.push(k.to_owned());
                }
            }
            keys
        };
        let before_lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let last = last_edits(&edits);
        let removed = |k: &str| last.iter().any(|(e, v)| *e == k && v.is_none());
        let mut want: Vec<String> = first_seen(&before_lines).into_iter().filter(|k| !removed(k)).collect();
        for (k, v) in &last {
            if v.is_some() && !want.iter().any(|x| x == k) {
                want.push((*k).to_owned());
            }
        }
        prop_assert_eq!(first_seen(&out_lines), want, "{:?}", out);
        // An edited key has one line left.
        for (k, v) in &last {
            let n = out_lines.iter().filter(|l| line_key(l) == Some(*k)).count();
            prop_assert_eq!(n, usize::from(v.is_some()), "key {} in {:?}", k, out);
        }
    }
}

#[test]
fn the_strategies_reach_the_interesting_cases() {
    // Guard against a strategy that silently stops producing what the properties need.
    assert_eq!(line_key("a-b : x"), Some("a-b"));
    assert_eq!(line_key("# a: b"), None);
    assert_eq!(line_key("  a: b"), None);
    assert_eq!(
        last_edits(&[
            Edit::set("a", 1),
            Edit::Remove("a".into()),
            Edit::set("b", 2)
        ]),
        [("a", None), ("b", Some(&Scalar::Int(2)))]
    );
    let text = text_of(&["# c".into(), "a: 1".into()], "\r\n", "x\r\n");
    assert_eq!(head_lines(&to_lf(&text)), ["# c", "a: 1"]);
    assert_eq!(frontmatter::parse(&text).body, "x\n");
}

/// Found by `frontmatter_round_trips`: a key that is not in the block yet and is edited twice
/// took its first edit, not its last (`Set` then `Set`, `Set` then `Remove`).
#[test]
fn a_new_key_takes_its_last_edit() {
    let out = apply(
        "---\n---\n",
        &[Edit::Set("a-b".into(), Scalar::Null), Edit::set("a-b", "x")],
    );
    assert_eq!(out, "---\na-b: x\n---\n");
    let out = apply(
        "---\n---\nbody\n",
        &[Edit::set("id", "042-x"), Edit::Remove("id".into())],
    );
    assert_eq!(out, "---\n---\nbody\n");
    // New keys keep the order of their first edit.
    let out = apply(
        "---\nk: 1\n---\n",
        &[Edit::set("b", 1), Edit::set("a", 2), Edit::set("b", 3)],
    );
    assert_eq!(out, "---\nk: 1\nb: 3\na: 2\n---\n");
}
