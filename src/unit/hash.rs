//! The contract hash: sha256 over the normalised Intent and Expectations sections, the part of a
//! unit a person signs off. It must equal iced-core's value byte for byte, so that units approved
//! with iced-core keep verifying here; every rule below reproduces that implementation, including
//! its quirks (a repeated section counts from its last heading; `##` followed by two spaces and
//! nothing else still ends a section).

use super::frontmatter;
use crate::text::{
    blank_comments, is_js_line_terminator, is_js_space, js_dot_matches_all, js_lower_eq,
    js_trim_end,
};
use sha2::{Digest, Sha256};

/// What a raw line is to the hash: the start of the Intent or Expectations section, of another
/// `##` section, or neither.
#[derive(Debug, PartialEq, Eq)]
enum Line {
    Intent,
    Expectations,
    OtherSection,
    Text,
}

/// `^##\s+(.+?)\s*$` on a raw line that does not start with `###`, and which section the lower-cased
/// heading names.
fn classify(line: &str) -> Line {
    let Some(rest) = line.strip_prefix("##").filter(|_| !line.starts_with("###")) else {
        return Line::Text;
    };
    let text = rest.trim_start_matches(is_js_space);
    let run = &rest[..rest.len() - text.len()];
    if run.is_empty() {
        return Line::Text;
    }
    let name = js_trim_end(text);
    if name.is_empty() {
        // Only whitespace after `##`: the lazy group still takes one whitespace character that
        // `.` can match, provided `\s+` keeps at least one before it. Such a heading names no
        // section iced knows, but it does end the one before it.
        return if run.chars().skip(1).any(|c| !is_js_line_terminator(c)) {
            Line::OtherSection
        } else {
            Line::Text
        };
    }
    if !js_dot_matches_all(name) {
        return Line::Text;
    }
    if js_lower_eq(name, "intent") {
        Line::Intent
    } else if js_lower_eq(name, "expectations") {
        Line::Expectations
    } else {
        Line::OtherSection
    }
}

/// Lines of the section, trailing whitespace stripped, empty lines dropped, joined with `\n`.
fn normalise(lines: &[&str]) -> String {
    let mut out = String::new();
    for line in lines
        .iter()
        .map(|l| js_trim_end(l))
        .filter(|l| !l.is_empty())
    {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(line);
    }
    out
}

/// The exact bytes the contract hash is taken over.
pub fn contract_material(text: &str) -> String {
    let body = frontmatter::body(text);
    let body = blank_comments(&body);
    let mut intent: Vec<&str> = Vec::new();
    let mut expectations: Vec<&str> = Vec::new();
    #[derive(PartialEq)]
    enum In {
        Nothing,
        Intent,
        Expectations,
        Other,
    }
    let mut current = In::Nothing;
    for line in body.split('\n') {
        match classify(line) {
            Line::Intent => {
                intent.clear();
                current = In::Intent;
            }
            Line::Expectations => {
                expectations.clear();
                current = In::Expectations;
            }
            Line::OtherSection => current = In::Other,
            Line::Text => match current {
                In::Intent => intent.push(line),
                In::Expectations => expectations.push(line),
                In::Nothing | In::Other => {}
            },
        }
    }
    format!(
        "## intent\n{}\n## expectations\n{}",
        normalise(&intent),
        normalise(&expectations)
    )
}

/// Lowercase hex sha256 of [`contract_material`].
pub fn contract_hash(text: &str) -> String {
    let digest = Sha256::digest(contract_material(text).as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn material_is_intent_then_expectations_normalised() {
        let text = "---\nid: 001-x\n---\n# T\n## Intent  \r\n### Goal\r\nDo it.   \n\n<!-- gone -->\n## Context\n- [code] not hashed\n## Expectations\n- [E1] y {verify: test | t}\n## Open questions\n";
        assert_eq!(
            contract_material(text),
            "## intent\n### Goal\nDo it.\n## expectations\n- [E1] y {verify: test | t}"
        );
    }

    #[test]
    fn context_edits_do_not_change_the_hash_but_expectation_edits_do() {
        let a = "## Intent\n### Goal\nG\n## Context\n- [code] a\n## Expectations\n- [E1] e {verify: test | t}\n";
        let b = a.replace("[code] a", "[code] b");
        let c = a.replace("[E1] e", "[E1] f");
        assert_eq!(contract_hash(a), contract_hash(&b));
        assert_ne!(contract_hash(a), contract_hash(&c));
    }

    #[test]
    fn missing_sections_hash_as_empty() {
        assert_eq!(
            contract_material("no sections"),
            "## intent\n\n## expectations\n"
        );
        // sha256("## intent\n\n## expectations\n"), computed with sha256sum.
        assert_eq!(
            contract_hash("---\nid: 001-x\n---\n"),
            "55eb6e8f38865e44471758475974b5d8cd70a99e6c799e73e8132d6d9bc431d5"
        );
    }

    #[test]
    fn repeated_section_counts_from_its_last_heading() {
        let once = "## Intent\nB\n## Expectations\nE\n";
        let twice = "## Intent\nA\n## Expectations\nE\n## intent\nB\n";
        assert_eq!(contract_material(once), contract_material(twice));
    }

    #[test]
    fn double_space_heading_ends_a_section_single_space_does_not() {
        assert_eq!(classify("## "), Line::Text);
        assert_eq!(classify("##  "), Line::OtherSection);
        assert_eq!(classify("##\u{2028}\u{2028}"), Line::Text);
        assert_eq!(classify("##Intent"), Line::Text);
        assert_eq!(classify("### Goal"), Line::Text);
        assert_eq!(classify("##\tINTENT \t"), Line::Intent);
        assert_eq!(classify("## expectations"), Line::Expectations);
        assert_eq!(classify("## \u{130}ntent"), Line::OtherSection);
    }
}
