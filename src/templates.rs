//! The built-in unit templates (the files under `spec/templates/`, compiled in) and their rendering.
//! `init` copies them to `.iced/templates/`, where a team may edit them; `new` prefers those copies.

use crate::unit::UnitType;

pub fn builtin(kind: UnitType) -> &'static str {
    match kind {
        UnitType::Project => include_str!("../spec/templates/project.md"),
        UnitType::Feature => include_str!("../spec/templates/feature.md"),
        UnitType::Bug => include_str!("../spec/templates/bug.md"),
        UnitType::Review => include_str!("../spec/templates/review.md"),
        UnitType::Chore => include_str!("../spec/templates/chore.md"),
    }
}

/// Replace every `{{name}}` with its value; an unknown name becomes empty. Values never contain
/// `}}` handling surprises: the text is scanned once, left to right, and substituted text is not
/// scanned again.
pub fn render(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len() + 128);
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else {
            break;
        };
        let name = &after[..close];
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            out.push_str(&rest[..open + 2]);
            rest = after;
            continue;
        }
        out.push_str(&rest[..open]);
        if let Some((_, value)) = values.iter().find(|(k, _)| *k == name) {
            out.push_str(value);
        }
        rest = &after[close + 2..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_replaced_once() {
        assert_eq!(
            render(
                "a {{x}} b {{y}} {{x}} {{ z }} {{",
                &[("x", "{{y}}"), ("y", "2")]
            ),
            "a {{y}} b 2 {{y}} {{ z }} {{"
        );
    }

    #[test]
    fn builtin_templates_are_drafts_with_every_section() {
        for &kind in UnitType::ALL {
            let text = builtin(kind);
            let parsed = crate::unit::parse_unit(&render(text, &[("id", "001-x"), ("title", "X")]));
            assert_eq!(parsed.frontmatter.str("status"), Some("draft"), "{kind}");
            assert_eq!(
                parsed.frontmatter.str("type"),
                Some(kind.as_str()),
                "{kind}"
            );
            let sections: Vec<_> = parsed
                .sections
                .iter()
                .map(|h| h.text.to_lowercase())
                .collect();
            for s in ["intent", "context", "expectations", "open questions"] {
                assert!(sections.contains(&s.to_owned()), "{kind} lacks {s}");
            }
        }
    }
}
