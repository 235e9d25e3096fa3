//! Reading a unit's body: title, Goal, Constraints, Failure conditions, Scope, Context,
//! Expectations and Open questions, each item with its 1-based line in the file.
//!
//! The rules are iced-core's (seed 000): sections by heading text, case-insensitively; HTML comments
//! ignored; an item may wrap onto following lines until a blank line, a heading or another list
//! item; `{verify: kind | ref}` and `-> A:` are read after the wrap. Unknown sections are kept in
//! the text and ignored here.

use super::frontmatter::{self, Frontmatter, FrontmatterProblem, Scalar};
use crate::text::{
    blank_comments, is_js_space, js_dot_matches_all, js_lower_eq, js_trim, js_trim_end,
};
use serde::Serialize;

/// One `- [ID] text` item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Item {
    pub id: String,
    pub text: String,
    pub line: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verify: Option<Verify>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
}

/// An expectation's `{verify: kind | ref}` suffix. The kind is kept as written (lower-cased) so
/// lint can name an unknown one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verify {
    pub kind: String,
    #[serde(rename = "ref")]
    pub reference: String,
}

/// One `- [tag] text` context line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContextLine {
    pub tag: String,
    pub text: String,
    pub line: usize,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Scope {
    #[serde(rename = "in")]
    pub inside: Vec<String>,
    #[serde(rename = "out")]
    pub outside: Vec<String>,
}

/// A `##` heading as it appeared, with its line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Heading {
    pub text: String,
    pub line: usize,
}

/// Everything lint and the loop need from one unit file.
#[derive(Debug, Clone)]
pub struct ParsedUnit {
    pub frontmatter: Frontmatter,
    pub frontmatter_problem: Option<FrontmatterProblem>,
    pub title: Option<String>,
    pub goal: String,
    /// The Goal's lines as read (comments removed, trimmed, blank ones skipped), each with its
    /// 1-based line in the file: what goal coverage splits into clauses (SPEC 10.3).
    pub goal_lines: Vec<(usize, String)>,
    /// Lines of the `### Goal`, `### Failure conditions` and `## Expectations` headings, so a
    /// finding about an empty section points at it.
    pub goal_line: Option<usize>,
    pub failures_line: Option<usize>,
    pub expectations_line: Option<usize>,
    pub constraints: Vec<Item>,
    pub failures: Vec<Item>,
    pub scope: Scope,
    pub context: Vec<ContextLine>,
    pub expectations: Vec<Item>,
    pub questions: Vec<Item>,
    /// Every `##` heading, in order.
    pub sections: Vec<Heading>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum H2 {
    Intent,
    Context,
    Expectations,
    Questions,
    Other,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum H3 {
    Goal,
    Constraints,
    Failures,
    Scope,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Constraints,
    Failures,
    Expectations,
    Questions,
    Context,
}

/// The canonical `##` section a heading names, if any (`intent`, `context`, `expectations`,
/// `open questions`).
pub fn canonical_h2(heading: &str) -> Option<&'static str> {
    let heading = js_trim(heading);
    ["intent", "context", "expectations", "open questions"]
        .into_iter()
        .find(|name| js_lower_eq(heading, name))
}

/// `^#{level}\s+(.+)$` on a line whose trailing whitespace is already gone: the heading text.
pub(crate) fn heading(line: &str, level: usize) -> Option<&str> {
    let hashes = line.as_bytes().get(..level)?;
    if !hashes.iter().all(|&b| b == b'#') {
        return None;
    }
    let rest = &line[level..];
    let text = rest.trim_start_matches(is_js_space);
    if text.len() == rest.len() || text.is_empty() || !js_dot_matches_all(text) {
        return None;
    }
    Some(text)
}

/// `^#{1,6}\s`: any Markdown heading line.
fn is_heading(line: &str) -> bool {
    let hashes = line.bytes().take_while(|&b| b == b'#').count();
    (1..=6).contains(&hashes) && line[hashes..].starts_with(is_js_space)
}

/// `^\s*([-*+]|\d+[.)])\s`: a bullet or numbered list item.
pub(crate) fn is_list_item(line: &str) -> bool {
    let s = line.trim_start_matches(is_js_space);
    let rest = if let Some(r) = s.strip_prefix(['-', '*', '+']) {
        r
    } else {
        let digits = s.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return false;
        }
        match s[digits..].strip_prefix(['.', ')']) {
            Some(r) => r,
            None => return false,
        }
    };
    rest.starts_with(is_js_space)
}

/// `^\s*[-*]\s+\[(label)\]\s*(.*)$` where `label` must satisfy `is_label`.
fn bracket_item(line: &str, is_label: impl Fn(&str) -> bool) -> Option<(&str, &str)> {
    let s = line.trim_start_matches(is_js_space);
    let s = s.strip_prefix(['-', '*'])?;
    let after = s.trim_start_matches(is_js_space);
    if after.len() == s.len() {
        return None;
    }
    let inner = after.strip_prefix('[')?;
    let close = inner.find(']')?;
    let label = &inner[..close];
    if !is_label(label) {
        return None;
    }
    let text = inner[close + 1..].trim_start_matches(is_js_space);
    js_dot_matches_all(text).then_some((label, text))
}

/// `[A-Za-z]+\d+`: an item id such as `E1`.
fn is_item_id(label: &str) -> bool {
    let letters = label.bytes().take_while(u8::is_ascii_alphabetic).count();
    letters > 0 && letters < label.len() && label[letters..].bytes().all(|b| b.is_ascii_digit())
}

fn is_tag(label: &str) -> bool {
    !label.is_empty() && label.bytes().all(|b| b.is_ascii_alphabetic())
}

/// `^\s*[-*]\s+(In|Out)\s*:\s*(.*)$`, case-insensitive.
fn scope_line(line: &str) -> Option<(bool, &str)> {
    let s = line
        .trim_start_matches(is_js_space)
        .strip_prefix(['-', '*'])?;
    let after = s.trim_start_matches(is_js_space);
    if after.len() == s.len() {
        return None;
    }
    let (inside, rest) = if after.len() >= 2 && after[..2].eq_ignore_ascii_case("in") {
        (true, &after[2..])
    } else if after.len() >= 3 && after[..3].eq_ignore_ascii_case("out") {
        (false, &after[3..])
    } else {
        return None;
    };
    let rest = rest.trim_start_matches(is_js_space).strip_prefix(':')?;
    let rest = rest.trim_start_matches(is_js_space);
    js_dot_matches_all(rest).then_some((inside, rest))
}

/// Find `{verify: kind | ref}` ending the text, as iced-core's expression does: the leftmost `{`
/// from which `\{\s*verify\s*:\s*([A-Za-z]+)\s*(?:\|\s*([^}]*?))?\s*\}\s*$` matches.
/// Returns the byte offset of the `{`, the kind and the ref.
fn verify_suffix(text: &str) -> Option<(usize, &str, &str)> {
    let ws = |s: &str| -> usize { s.len() - s.trim_start_matches(is_js_space).len() };
    'candidates: for (start, _) in text.match_indices('{') {
        let mut i = start + 1;
        i += ws(&text[i..]);
        if !text[i..].starts_with("verify") {
            continue;
        }
        i += "verify".len();
        i += ws(&text[i..]);
        if !text[i..].starts_with(':') {
            continue;
        }
        i += 1;
        i += ws(&text[i..]);
        let kind_len = text[i..]
            .bytes()
            .take_while(u8::is_ascii_alphabetic)
            .count();
        if kind_len == 0 {
            continue;
        }
        let kind = &text[i..i + kind_len];
        i += kind_len;
        i += ws(&text[i..]);
        let mut reference = "";
        if text[i..].starts_with('|') {
            i += 1;
            i += ws(&text[i..]);
            let Some(close) = text[i..].find('}') else {
                continue 'candidates;
            };
            reference = js_trim_end(&text[i..i + close]);
            i += close;
        }
        if !text[i..].starts_with('}') {
            continue;
        }
        if !text[i + 1..].chars().all(is_js_space) {
            continue;
        }
        return Some((start, kind, reference));
    }
    None
}

/// Parse a unit's whole text (frontmatter and body).
pub fn parse_unit(text: &str) -> ParsedUnit {
    let fm = frontmatter::parse(text);
    let body = blank_comments(&fm.body);
    let title_from_fm = fm
        .data
        .get("title")
        .filter(|v| !v.is_null())
        .map(|v| v.to_string());
    // iced-core shows the first `# ` heading in place of a title it reads as false ('', 0, false).
    let title_falsy = fm.data.get("title").is_none_or(Scalar::is_falsy);
    let mut parsed = ParsedUnit {
        frontmatter: fm.data,
        frontmatter_problem: fm.problem,
        title: title_from_fm,
        goal: String::new(),
        goal_lines: Vec::new(),
        goal_line: None,
        failures_line: None,
        expectations_line: None,
        constraints: Vec::new(),
        failures: Vec::new(),
        scope: Scope::default(),
        context: Vec::new(),
        expectations: Vec::new(),
        questions: Vec::new(),
        sections: Vec::new(),
    };
    let mut h2: Option<H2> = None;
    let mut h3: Option<H3> = None;
    // The item that following lines may continue: which list, and its index there.
    let mut last: Option<(Target, usize)> = None;
    let mut heading_seen = false;

    for (i, raw) in body.split('\n').enumerate() {
        let line = js_trim_end(raw);
        let line_no = fm.body_line + i;
        let blank = js_trim(line).is_empty();
        if let Some((target, index)) = last {
            if !blank && !is_heading(line) && !is_list_item(line) {
                let text = match target {
                    Target::Context => &mut parsed.context[index].text,
                    _ => &mut parsed.list_mut(target)[index].text,
                };
                text.push(' ');
                text.push_str(js_trim(line));
                continue;
            }
        }
        last = None;
        if let Some(text) = heading(line, 1) {
            if title_falsy && !heading_seen {
                heading_seen = true;
                parsed.title = Some(js_trim(text).to_owned());
            }
            continue;
        }
        if let Some(text) = heading(line, 2) {
            let name = js_trim(text);
            h2 = Some(match canonical_h2(name) {
                Some("intent") => H2::Intent,
                Some("context") => H2::Context,
                Some("expectations") => H2::Expectations,
                Some(_) => H2::Questions,
                None => H2::Other,
            });
            h3 = None;
            if h2 == Some(H2::Expectations) && parsed.expectations_line.is_none() {
                parsed.expectations_line = Some(line_no);
            }
            parsed.sections.push(Heading {
                text: name.to_owned(),
                line: line_no,
            });
            continue;
        }
        if let Some(text) = heading(line, 3) {
            h3 = if h2 == Some(H2::Intent) {
                let text = js_trim(text);
                [
                    ("goal", H3::Goal),
                    ("constraints", H3::Constraints),
                    ("failure conditions", H3::Failures),
                    ("scope", H3::Scope),
                ]
                .into_iter()
                .find(|(name, _)| js_lower_eq(text, name))
                .map(|(_, h3)| h3)
            } else {
                None
            };
            if h3 == Some(H3::Goal) && parsed.goal_line.is_none() {
                parsed.goal_line = Some(line_no);
            }
            if h3 == Some(H3::Failures) && parsed.failures_line.is_none() {
                parsed.failures_line = Some(line_no);
            }
            continue;
        }
        if blank {
            continue;
        }
        match (h2, h3) {
            (Some(H2::Intent), Some(H3::Goal)) => {
                parsed.goal_lines.push((line_no, js_trim(line).to_owned()));
                continue;
            }
            (Some(H2::Intent), Some(H3::Scope)) => {
                if let Some((inside, list)) = scope_line(line) {
                    let values = list
                        .split(',')
                        .map(js_trim)
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned);
                    if inside {
                        parsed.scope.inside.extend(values);
                    } else {
                        parsed.scope.outside.extend(values);
                    }
                }
                continue;
            }
            (Some(H2::Context), _) => {
                if let Some((tag, text)) = bracket_item(line, is_tag) {
                    parsed.context.push(ContextLine {
                        tag: tag.to_lowercase(),
                        text: js_trim(text).to_owned(),
                        line: line_no,
                    });
                    last = Some((Target::Context, parsed.context.len() - 1));
                }
                continue;
            }
            _ => {}
        }
        let target = match (h2, h3) {
            (Some(H2::Intent), Some(H3::Constraints)) => Target::Constraints,
            (Some(H2::Intent), Some(H3::Failures)) => Target::Failures,
            (Some(H2::Expectations), _) => Target::Expectations,
            (Some(H2::Questions), _) => Target::Questions,
            _ => continue,
        };
        let Some((id, text)) = bracket_item(line, is_item_id) else {
            continue;
        };
        let list = parsed.list_mut(target);
        list.push(Item {
            id: id.to_uppercase(),
            text: js_trim(text).to_owned(),
            line: line_no,
            verify: None,
            answer: None,
        });
        last = Some((target, list.len() - 1));
    }

    for item in &mut parsed.expectations {
        if let Some((at, kind, reference)) = verify_suffix(&item.text) {
            item.verify = Some(Verify {
                kind: kind.to_lowercase(),
                reference: js_trim(reference).to_owned(),
            });
            item.text = js_trim(&item.text[..at]).to_owned();
        }
    }
    for item in &mut parsed.questions {
        if let Some(at) = item.text.find("-> A:") {
            // An empty answer leaves the question open, as in iced-core (`!q.answer`).
            let answer = js_trim(&item.text[at + 5..]);
            item.answer = (!answer.is_empty()).then(|| answer.to_owned());
            item.text = js_trim(&item.text[..at]).to_owned();
        }
    }
    let goal: Vec<&str> = parsed.goal_lines.iter().map(|(_, l)| l.as_str()).collect();
    parsed.goal = js_trim(&goal.join(" ")).to_owned();
    parsed
}

impl ParsedUnit {
    fn list_mut(&mut self, target: Target) -> &mut Vec<Item> {
        match target {
            Target::Constraints => &mut self.constraints,
            Target::Failures => &mut self.failures,
            Target::Expectations => &mut self.expectations,
            Target::Questions => &mut self.questions,
            Target::Context => unreachable!("context lines are not items"),
        }
    }

    /// Every contract item (C, F, E, Q), in file order within each list.
    pub fn items(&self) -> impl Iterator<Item = &Item> {
        self.constraints
            .iter()
            .chain(&self.failures)
            .chain(&self.expectations)
            .chain(&self.questions)
    }

    pub fn open_questions(&self) -> impl Iterator<Item = &Item> {
        self.questions.iter().filter(|q| q.answer.is_none())
    }
}

/// The `depends:` entries of a unit: ids or numbers, by commas or spaces, `[a, b]` read the same.
pub fn depends(unit: &ParsedUnit) -> Vec<String> {
    // `depends: 3` is read as a number by the frontmatter; it names unit 3 all the same.
    let text = match unit.frontmatter.get("depends") {
        Some(Scalar::Str(s)) => s.clone(),
        Some(Scalar::Int(n)) => n.to_string(),
        _ => String::new(),
    };
    text.trim()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const UNIT: &str = "---
iced: 0.1
id: 042-dark-mode
title: Dark mode in settings
---

# Dark mode in settings

<!-- Human owns Intent.
     Two lines of comment. -->

## Intent

### Goal
Users can switch the app to a dark theme
from Settings and it persists.

### Constraints
- [C1] No new runtime dependencies.
- [c2] Existing light theme
  unchanged.

### Failure conditions
- [F1] Theme resets after reload.

### Scope
- In: settings page toggle, theme persistence
- out: per-component theming,  marketing site ,

## Context
- [code] Theme tokens live in src/styles/tokens.css.
- [Assumed] Persist in
  localStorage.
- [weird] Unknown tag.

## Expectations
- [E1] Toggle switches theme without reload. {verify: test | tests/theme.spec.ts}
- [E2] Choice persists
  across reloads.
  {verify: Test | tests/theme.spec.ts }
- [E3] No suffix here.
- [E4] Empty ref. {verify: manual}
- [E5] Suffix not at the end {verify: test | x} trailing

## Open questions
- [Q1] Follow the OS preference? -> A: yes,
  until the user chooses.
- [Q2] Still open?

## Notes
- [E9] Not an expectation: unknown sections are ignored.
";

    #[test]
    fn sections_items_and_lines() {
        let p = parse_unit(UNIT);
        assert_eq!(p.frontmatter_problem, None);
        assert_eq!(p.title.as_deref(), Some("Dark mode in settings"));
        assert_eq!(
            p.goal,
            "Users can switch the app to a dark theme from Settings and it persists."
        );
        assert_eq!(p.goal_line, Some(14));
        let ids: Vec<_> = p.constraints.iter().map(|i| i.id.as_str()).collect();
        assert_eq!(ids, ["C1", "C2"]);
        assert_eq!(p.constraints[1].text, "Existing light theme unchanged.");
        assert_eq!(p.constraints[1].line, 20);
        assert_eq!(p.failures[0].line, 24);
        assert_eq!(
            p.scope.inside,
            ["settings page toggle", "theme persistence"]
        );
        assert_eq!(p.scope.outside, ["per-component theming", "marketing site"]);
        let tags: Vec<_> = p.context.iter().map(|c| c.tag.as_str()).collect();
        assert_eq!(tags, ["code", "assumed", "weird"]);
        assert_eq!(p.context[1].line, 32);
        assert_eq!(p.context[1].text, "Persist in localStorage.");
    }

    #[test]
    fn verify_suffix_is_read_after_wrapping() {
        let p = parse_unit(UNIT);
        let e = &p.expectations;
        assert_eq!(e.len(), 5);
        assert_eq!(e[0].text, "Toggle switches theme without reload.");
        assert_eq!(
            e[0].verify,
            Some(Verify {
                kind: "test".into(),
                reference: "tests/theme.spec.ts".into()
            })
        );
        assert_eq!(e[1].text, "Choice persists across reloads.");
        assert_eq!(e[1].verify.as_ref().unwrap().kind, "test");
        assert_eq!(
            e[1].verify.as_ref().unwrap().reference,
            "tests/theme.spec.ts"
        );
        assert_eq!(e[2].verify, None);
        assert_eq!(e[3].verify.as_ref().unwrap().reference, "");
        assert_eq!(e[4].verify, None, "the suffix must end the item");
    }

    #[test]
    fn answers_are_read_after_wrapping() {
        let p = parse_unit(UNIT);
        assert_eq!(p.questions[0].text, "Follow the OS preference?");
        assert_eq!(
            p.questions[0].answer.as_deref(),
            Some("yes, until the user chooses.")
        );
        assert_eq!(p.questions[1].answer, None);
        assert_eq!(p.open_questions().count(), 1);
    }

    #[test]
    fn unknown_sections_are_ignored_but_listed() {
        let p = parse_unit(UNIT);
        assert!(p.items().all(|i| i.id != "E9"));
        let names: Vec<_> = p.sections.iter().map(|h| h.text.as_str()).collect();
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
    }

    #[test]
    fn headings_are_matched_case_insensitively() {
        let p = parse_unit("---\na: 1\n---\n## INTENT\n### goal\nDo it.\n### FAILURE CONDITIONS\n- [F1] x\n## expectations\n* [e1] y {verify: check | make}\n");
        assert_eq!(p.goal, "Do it.");
        assert_eq!(p.failures.len(), 1);
        assert_eq!(p.expectations[0].id, "E1");
    }

    #[test]
    fn a_blank_line_or_list_item_or_heading_ends_a_wrapped_item() {
        let p = parse_unit("## Expectations\n- [E1] a\n\n  not joined\n- [E2] b\n1. numbered\n- [E3] c\n## Other\n");
        assert_eq!(p.expectations[0].text, "a");
        assert_eq!(p.expectations[1].text, "b");
        assert_eq!(p.expectations[2].text, "c");
    }

    #[test]
    fn verify_suffix_takes_the_leftmost_match() {
        assert_eq!(
            verify_suffix("x {verify: test | a {verify: check | b}"),
            Some((2, "test", "a {verify: check | b"))
        );
        assert_eq!(verify_suffix("x {verify:test}"), Some((2, "test", "")));
        assert_eq!(verify_suffix("x {Verify: test}"), None);
        assert_eq!(verify_suffix("x {verify: test | a} b"), None);
    }
}
