//! Goal coverage (SPEC 10.3): the Goal cut into clauses by a fixed rule, and each clause with the
//! expectations that cover it. Pure: a function of the parsed unit, the same every time.
//!
//! An expectation names what it covers with `{goal: G1, G3}` in its text; when the Goal has one
//! clause, an expectation without that annotation covers it, so a one-sentence goal needs none.

use super::parse::{is_list_item, ParsedUnit};
use crate::text::{is_js_space, js_trim};
use serde::Serialize;

/// One clause of the Goal and the expectations that cover it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Clause {
    /// `G1`, `G2`, ... in the order the clauses are written.
    pub id: String,
    pub text: String,
    /// The 1-based line in the file where the clause starts.
    pub line: usize,
    /// Ids of the expectations covering it, in file order.
    pub covered_by: Vec<String>,
}

/// An expectation's annotation naming a clause the Goal does not have.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnknownClause {
    pub expectation: String,
    pub clause: String,
    pub line: usize,
}

/// The coverage map: every clause with what covers it, the uncovered ones, and annotations that
/// name no clause.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Coverage {
    pub clauses: Vec<Clause>,
    pub uncovered: Vec<String>,
    pub unknown: Vec<UnknownClause>,
}

impl Coverage {
    pub fn is_complete(&self) -> bool {
        self.uncovered.is_empty() && self.unknown.is_empty()
    }
}

/// The coverage map of a unit (SPEC 10.3).
pub fn coverage(parsed: &ParsedUnit) -> Coverage {
    let mut clauses: Vec<Clause> = split_goal(&parsed.goal_lines)
        .into_iter()
        .enumerate()
        .map(|(i, (line, text))| Clause {
            id: format!("G{}", i + 1),
            text,
            line,
            covered_by: Vec::new(),
        })
        .collect();
    let mut unknown: Vec<UnknownClause> = Vec::new();
    let one_clause = clauses.len() == 1;
    for e in &parsed.expectations {
        let named = annotated_clauses(&e.text);
        if named.is_empty() && one_clause {
            clauses[0].covered_by.push(e.id.clone());
        }
        for name in named {
            let clause = name
                .strip_prefix('G')
                .and_then(|n| n.parse::<usize>().ok())
                .and_then(|n| n.checked_sub(1))
                .and_then(|i| clauses.get_mut(i));
            match clause {
                Some(c) if c.covered_by.contains(&e.id) => {}
                Some(c) => c.covered_by.push(e.id.clone()),
                None => {
                    let entry = UnknownClause {
                        expectation: e.id.clone(),
                        clause: name,
                        line: e.line,
                    };
                    if !unknown.contains(&entry) {
                        unknown.push(entry);
                    }
                }
            }
        }
    }
    let uncovered = clauses
        .iter()
        .filter(|c| c.covered_by.is_empty())
        .map(|c| c.id.clone())
        .collect();
    Coverage {
        clauses,
        uncovered,
        unknown,
    }
}

/// The Goal's clauses, each with the line where it starts (SPEC 10.3): list items start parts,
/// other lines continue the part; a part is cut after `;` (which is dropped) and after a sentence
/// end; pieces with no letter or digit are dropped.
pub fn split_goal(lines: &[(usize, String)]) -> Vec<(usize, String)> {
    /// A part's text and, for each line joined into it, the byte offset where that line begins.
    struct Part {
        text: String,
        starts: Vec<(usize, usize)>,
    }
    let mut parts: Vec<Part> = Vec::new();
    for (line, text) in lines {
        let (new, body) = match list_marker_end(text) {
            Some(at) => (true, js_trim(&text[at..])),
            None => (false, js_trim(text)),
        };
        let part = match parts.last_mut() {
            Some(part) if !new => part,
            _ => {
                parts.push(Part {
                    text: String::new(),
                    starts: Vec::new(),
                });
                parts.last_mut().expect("just pushed")
            }
        };
        if !part.text.is_empty() {
            part.text.push(' ');
        }
        part.starts.push((part.text.len(), *line));
        part.text.push_str(body);
    }
    let mut clauses = Vec::new();
    for part in &parts {
        let mut from = 0;
        for cut in cuts(&part.text).into_iter().chain([part.text.len()]) {
            let piece = &part.text[from..cut];
            let lead = piece.len() - piece.trim_start_matches(is_js_space).len();
            let text = js_trim(piece);
            let text = text.strip_suffix(';').map_or(text, js_trim);
            if text.chars().any(char::is_alphanumeric) {
                let line = part
                    .starts
                    .iter()
                    .rev()
                    .find(|(offset, _)| *offset <= from + lead)
                    .map_or(part.starts[0].1, |(_, line)| *line);
                clauses.push((line, text.to_owned()));
            }
            from = cut;
        }
    }
    clauses
}

/// Where a list item's marker (`-`, `*`, `+`, `1.`, `1)`) ends, when the line is one.
fn list_marker_end(line: &str) -> Option<usize> {
    if !is_list_item(line) {
        return None;
    }
    let s = line.trim_start_matches(is_js_space);
    let lead = line.len() - s.len();
    let marker = if s.starts_with(['-', '*', '+']) {
        1
    } else {
        s.bytes().take_while(u8::is_ascii_digit).count() + 1
    };
    Some(lead + marker)
}

/// Byte offsets just after each cut of a part: after every `;`, and after every `.`, `!` or `?`
/// followed by whitespace and then a character that is not a lower-case letter.
fn cuts(text: &str) -> Vec<usize> {
    let mut out = Vec::new();
    for (i, c) in text.char_indices() {
        let after = i + c.len_utf8();
        let cut = match c {
            ';' => true,
            '.' | '!' | '?' => {
                let rest = &text[after..];
                let next = rest.trim_start_matches(is_js_space);
                next.len() < rest.len() && next.chars().next().is_some_and(|n| !n.is_lowercase())
            }
            _ => false,
        };
        if cut {
            out.push(after);
        }
    }
    out
}

/// The clause ids named by every `{goal: G1, G2}` in an expectation's text, upper-cased, in order.
/// Text that does not have exactly that shape is not an annotation.
pub fn annotated_clauses(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (start, _) in text.match_indices('{') {
        if let Some(names) = annotation_at(&text[start + 1..]) {
            for name in names {
                if !out.contains(&name) {
                    out.push(name);
                }
            }
        }
    }
    out
}

/// `\s*goal\s*:\s*(G\d+)([\s,]+G\d+)*\s*\}` at the start of `s` (just after a `{`), `G` in either
/// case: the ids it names.
fn annotation_at(s: &str) -> Option<Vec<String>> {
    let s = s.trim_start_matches(is_js_space).strip_prefix("goal")?;
    let s = s.trim_start_matches(is_js_space).strip_prefix(':')?;
    let close = s.find('}')?;
    let mut names = Vec::new();
    for token in s[..close]
        .split(|c: char| c == ',' || is_js_space(c))
        .filter(|t| !t.is_empty())
    {
        let digits = token.strip_prefix(['G', 'g'])?;
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let number = digits.trim_start_matches('0');
        names.push(format!("G{}", if number.is_empty() { "0" } else { number }));
    }
    (!names.is_empty()).then_some(names)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::unit::parse_unit;

    fn lines(text: &str) -> Vec<(usize, String)> {
        text.lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| (i + 1, l.trim().to_owned()))
            .collect()
    }

    fn texts(goal: &str) -> Vec<String> {
        split_goal(&lines(goal)).into_iter().map(|c| c.1).collect()
    }

    #[test]
    fn one_sentence_is_one_clause_whatever_its_lines() {
        assert_eq!(
            texts("Users can switch the app to a dark theme\nfrom Settings, and it persists."),
            ["Users can switch the app to a dark theme from Settings, and it persists."]
        );
    }

    #[test]
    fn semicolons_and_sentence_ends_cut() {
        assert_eq!(
            texts("A person is greeted by name; anyone else gets the greeting. It is fast! Really? yes"),
            [
                "A person is greeted by name",
                "anyone else gets the greeting.",
                "It is fast!",
                "Really? yes"
            ]
        );
    }

    #[test]
    fn a_stop_before_a_lower_case_word_or_inside_a_word_does_not_cut() {
        assert_eq!(
            texts("Exports work in e.g. the orders list and v1.2 files. 10 s at most."),
            [
                "Exports work in e.g. the orders list and v1.2 files.",
                "10 s at most."
            ]
        );
    }

    #[test]
    fn list_items_start_clauses_and_keep_their_lines() {
        let goal = "Owners can:\n- invite by email\n  and by link\n2) revoke an invitation\n* see who joined";
        assert_eq!(
            split_goal(&lines(goal)),
            [
                (1, "Owners can:".to_owned()),
                (2, "invite by email and by link".to_owned()),
                (4, "revoke an invitation".to_owned()),
                (5, "see who joined".to_owned()),
            ]
        );
    }

    #[test]
    fn a_clause_starts_on_the_line_of_its_first_word() {
        let goal = "First part here.\nSecond part; third\npart.";
        assert_eq!(
            split_goal(&lines(goal)),
            [
                (1, "First part here.".to_owned()),
                (2, "Second part".to_owned()),
                (2, "third part.".to_owned()),
            ]
        );
    }

    #[test]
    fn pieces_without_a_letter_or_digit_are_dropped() {
        assert_eq!(texts("Works; ; ...\n-  \u{2014}"), ["Works"]);
        assert!(texts("").is_empty());
    }

    #[test]
    fn annotations_are_read_strictly() {
        assert_eq!(annotated_clauses("x {goal: G1} {verify: test}"), ["G1"]);
        assert_eq!(
            annotated_clauses("x { goal : g2, G01  G3 }"),
            ["G2", "G1", "G3"]
        );
        assert_eq!(
            annotated_clauses("{goal: G1} and {goal: G1,G2}"),
            ["G1", "G2"]
        );
        for not_one in [
            "{goal: 1}",
            "{goal: }",
            "{Goal: G1}",
            "{goal: G1 and G2}",
            "{goal G1}",
            "{goal: G1",
            "goal: G1",
            "{goals: G1}",
        ] {
            assert!(annotated_clauses(not_one).is_empty(), "{not_one}");
        }
    }

    const UNIT: &str = "---\nid: 001-x\n---\n## Intent\n### Goal\nA named person is greeted by name;\nanyone else gets the general greeting.\n## Expectations\n";

    fn unit(expectations: &str) -> Coverage {
        coverage(&parse_unit(&format!("{UNIT}{expectations}")))
    }

    #[test]
    fn each_clause_lists_the_expectations_that_name_it() {
        let c = unit("- [E1] Ada is greeted. {goal: G1} {verify: check | t}\n- [E2] Both. {goal: G2, G1} {verify: check | t}\n- [E3] Unnamed. {verify: check | t}\n");
        let covered: Vec<(&str, &str, usize, Vec<&str>)> = c
            .clauses
            .iter()
            .map(|c| {
                let by = c.covered_by.iter().map(String::as_str).collect();
                (c.id.as_str(), c.text.as_str(), c.line, by)
            })
            .collect();
        assert_eq!(
            covered,
            [
                (
                    "G1",
                    "A named person is greeted by name",
                    6,
                    vec!["E1", "E2"]
                ),
                (
                    "G2",
                    "anyone else gets the general greeting.",
                    7,
                    vec!["E2"]
                ),
            ]
        );
        assert!(c.uncovered.is_empty() && c.unknown.is_empty() && c.is_complete());
    }

    #[test]
    fn with_several_clauses_an_expectation_without_annotation_covers_none() {
        let c = unit(
            "- [E1] Ada is greeted. {verify: check | t}\n- [E2] x {goal: G1} {verify: check | t}\n",
        );
        assert_eq!(c.clauses[0].covered_by, ["E2"]);
        assert_eq!(c.uncovered, ["G2"]);
        assert!(!c.is_complete());
    }

    #[test]
    fn a_clause_the_goal_lacks_is_unknown() {
        let c = unit("- [E1] x {goal: G1, G3} {verify: check | t}\n- [E2] y {goal: G2} {verify: check | t}\n");
        assert_eq!(
            c.unknown,
            [UnknownClause {
                expectation: "E1".into(),
                clause: "G3".into(),
                line: 9
            }]
        );
        assert!(c.uncovered.is_empty());
        assert!(!c.is_complete());
    }

    #[test]
    fn one_clause_is_covered_by_every_expectation_without_annotation() {
        let text = "---\nid: 001-x\n---\n## Intent\n### Goal\nPeople stay signed in while active.\n## Expectations\n- [E1] a {verify: test | t}\n- [E2] b {goal: G1} {verify: test | t}\n- [E3] c {goal: G2} {verify: test | t}\n";
        let c = coverage(&parse_unit(text));
        assert_eq!(c.clauses.len(), 1);
        assert_eq!(c.clauses[0].covered_by, ["E1", "E2"]);
        assert_eq!(
            c.unknown.len(),
            1,
            "G2 is not a clause of a one-clause goal"
        );
    }

    #[test]
    fn no_goal_no_clauses() {
        let c = coverage(&parse_unit(
            "---\nid: 001-x\n---\n## Expectations\n- [E1] a {verify: test | t}\n",
        ));
        assert_eq!(c, Coverage::default());
    }
}
