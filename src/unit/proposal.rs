//! An agent's contract proposal (seed 000, SPEC 20.7) applied to a unit's text: lines `- [ID] text`
//! whose id is a C, F or E item; the same id replaces the item, a new id adds one at the end of its
//! section, `(remove)` drops it. Pure: the proposal is data, and nothing but those items changes
//! (the frontmatter is the caller's, which sets only `contract_hash`).

use super::parse::{parse_unit, Item, ParsedUnit};

/// One item the proposal changes: its text now (`was`, absent for a new item) and after (`becomes`,
/// absent for a removed one), each as the unit's raw line(s) joined.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Change {
    pub id: String,
    pub was: Option<String>,
    pub becomes: Option<String>,
}

/// The unit's text with the proposal applied, and what changed.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    pub text: String,
    pub changes: Vec<Change>,
}

/// One proposal line: the id, upper-cased, and its text (`None`: remove).
#[derive(Debug, Clone, PartialEq)]
struct Line {
    id: String,
    text: Option<String>,
}

/// Why a proposal does not apply, naming the line.
pub type Problem = String;

/// What a unit says apart from the items `except` (by id): the goal, scope, context, every other
/// item with its verify suffix or answer. A proposal or an answer must leave it as it was.
fn rest_of(p: &ParsedUnit, except: &[&str]) -> String {
    let items: Vec<String> = items_of(p)
        .chain(&p.questions)
        .filter(|i| !except.contains(&i.id.as_str()))
        .map(|i| format!("{}|{}|{:?}|{:?}", i.id, i.text, i.verify, i.answer))
        .collect();
    let context: Vec<String> = p
        .context
        .iter()
        .map(|c| format!("{}|{}", c.tag, c.text))
        .collect();
    // An answer may add `## Open questions`; no other heading may come or go.
    let headings: Vec<&str> = p
        .sections
        .iter()
        .map(|h| h.text.as_str())
        .filter(|h| !h.trim().eq_ignore_ascii_case("open questions"))
        .collect();
    format!(
        "{}\n{:?}\n{}\n{}\n{}",
        p.goal,
        p.scope,
        context.join("\n"),
        headings.join("\n"),
        items.join("\n")
    )
}

/// `- [E4] text` or `* [E4] text`; blank lines and HTML comments skipped; anything else refused.
fn lines(proposal: &str) -> Result<Vec<Line>, Problem> {
    let blanked = crate::text::blank_comments(proposal);
    let mut out: Vec<Line> = Vec::new();
    for (n, raw) in blanked.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        let shown = || {
            format!(
                "line {}: `{}`",
                n + 1,
                line.chars().take(80).collect::<String>()
            )
        };
        let rest = line
            .strip_prefix("- [")
            .or_else(|| line.strip_prefix("* ["))
            .ok_or_else(|| format!("{} is not a contract line `- [ID] text`", shown()))?;
        let (id, text) = rest
            .split_once(']')
            .ok_or_else(|| format!("{} has no `]` after its id", shown()))?;
        let id = id.trim().to_ascii_uppercase();
        let letter_ok = matches!(id.chars().next(), Some('C' | 'F' | 'E'));
        let digits_ok = id.len() > 1 && id[1..].chars().all(|c| c.is_ascii_digit());
        if !letter_ok || !digits_ok {
            return Err(format!(
                "{}: a proposal changes only C, F and E items, not `{id}`",
                shown()
            ));
        }
        let text = text.trim();
        if text.is_empty() {
            return Err(format!(
                "{} has no text (`(remove)` drops an item)",
                shown()
            ));
        }
        if out.iter().any(|l| l.id == id) {
            return Err(format!("{} names {id} a second time", shown()));
        }
        out.push(Line {
            id,
            text: (text != "(remove)").then(|| text.to_owned()),
        });
    }
    if out.is_empty() {
        return Err("the proposal holds no contract line".into());
    }
    Ok(out)
}

fn items_of(parsed: &ParsedUnit) -> impl Iterator<Item = &Item> {
    parsed
        .constraints
        .iter()
        .chain(&parsed.failures)
        .chain(&parsed.expectations)
}

/// Where an item's lines end (exclusive, 0-based): continuation lines run to a blank line, a
/// heading or another list item (SPEC 6.2).
fn item_end(lines: &[&str], start: usize) -> usize {
    let mut end = start + 1;
    while end < lines.len() {
        let t = lines[end].trim();
        let numbered = t.split_once(['.', ')']).is_some_and(|(d, r)| {
            !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()) && r.starts_with(' ')
        });
        if t.is_empty()
            || t.starts_with('#') && t.trim_start_matches('#').starts_with(' ')
            || ["- ", "* ", "+ "].iter().any(|p| t.starts_with(p))
            || numbered
        {
            break;
        }
        end += 1;
    }
    end
}

/// The last line (0-based) of the section an item of `letter` belongs to, and whether it exists:
/// new items go after the last non-blank line of `### Constraints`, `### Failure conditions` or
/// `## Expectations`.
fn section_end(lines: &[&str], letter: char) -> Option<usize> {
    let (level, name) = match letter {
        'C' => ("###", "constraints"),
        'F' => ("###", "failure conditions"),
        _ => ("##", "expectations"),
    };
    let heading = |l: &str| -> Option<(usize, String)> {
        let t = l.trim_end();
        let hashes = t.chars().take_while(|c| *c == '#').count();
        let rest = &t[hashes..];
        (hashes > 0 && rest.starts_with(' ')).then(|| (hashes, rest.trim().to_lowercase()))
    };
    let start = lines
        .iter()
        .rposition(|l| heading(l).is_some_and(|(h, n)| h == level.len() && n == name))?;
    let mut last = start;
    for (i, l) in lines.iter().enumerate().skip(start + 1) {
        if let Some((h, _)) = heading(l) {
            if h <= level.len() {
                break;
            }
        }
        if !l.trim().is_empty() {
            last = i;
        }
    }
    Some(last)
}

/// Apply `proposal` to the unit `text`. Applying it again to the result gives the same text.
pub fn apply(text: &str, proposal: &str) -> Result<Applied, Problem> {
    let wanted = lines(proposal)?;
    let newline = if text.contains("\r\n") { "\r\n" } else { "\n" };
    let mut rows: Vec<String> = text.lines().map(str::to_owned).collect();
    let mut changes = Vec::new();
    for line in &wanted {
        let view: Vec<&str> = rows.iter().map(String::as_str).collect();
        let parsed = parse_unit(&view.join("\n"));
        let existing = items_of(&parsed).find(|i| i.id == line.id).map(|i| i.line);
        match (existing, &line.text) {
            (Some(at), _) => {
                let start = at.saturating_sub(1);
                let end = item_end(&view, start);
                let was = view[start..end]
                    .iter()
                    .map(|l| l.trim())
                    .collect::<Vec<_>>()
                    .join(" ");
                let becomes = line.text.as_ref().map(|t| format!("- [{}] {t}", line.id));
                if becomes.as_deref() == Some(was.as_str()) {
                    continue;
                }
                rows.splice(start..end, becomes.clone());
                changes.push(Change {
                    id: line.id.clone(),
                    was: Some(was),
                    becomes,
                });
            }
            (None, None) => {
                // Gone already: a second apply after a call died is the same text.
                continue;
            }
            (None, Some(t)) => {
                let letter = line.id.chars().next().unwrap_or('E');
                let after = section_end(&view, letter).ok_or_else(|| {
                    format!(
                        "{} adds an item, but the unit has no section for {letter} items",
                        line.id
                    )
                })?;
                let becomes = format!("- [{}] {t}", line.id);
                rows.insert(after + 1, becomes.clone());
                changes.push(Change {
                    id: line.id.clone(),
                    was: None,
                    becomes: Some(becomes),
                });
            }
        }
    }
    let mut out = rows.join(newline);
    if text.ends_with('\n') {
        out.push_str(newline);
    }
    // Each changed item must read back as given: a line that would end a section, open a comment or
    // join the next item is refused rather than written.
    let parsed = parse_unit(&out);
    let named: Vec<&str> = wanted.iter().map(|l| l.id.as_str()).collect();
    if rest_of(&parse_unit(text), &named) != rest_of(&parsed, &named) {
        return Err(format!(
            "writing {} into the unit would change what else it says (a comment or a heading in the text?)",
            named.join(", ")
        ));
    }
    for line in &wanted {
        let found: Vec<&Item> = items_of(&parsed).filter(|i| i.id == line.id).collect();
        let ok = match &line.text {
            None => found.is_empty(),
            Some(t) => {
                found.len() == 1 && {
                    let expected = parse_unit(&format!("## Expectations\n- [{}] {t}\n", line.id));
                    expected
                        .expectations
                        .first()
                        .is_some_and(|e| e.text == found[0].text && e.verify == found[0].verify)
                }
            }
        };
        if !ok {
            return Err(format!(
                "{} does not read back as proposed once written into the unit",
                line.id
            ));
        }
    }
    Ok(Applied { text: out, changes })
}

/// The unit `text` with question `id` (a `Q` id) written as `- [Qn] <question> -> A: <answer>` in
/// `## Open questions`: the line of that id replaced, or one added at the end of the section, which
/// is added at the end of the unit when absent. Refused when the line would not read back.
pub fn set_question(text: &str, id: &str, question: &str, answer: &str) -> Result<String, Problem> {
    let newline = if text.contains("\r\n") { "\r\n" } else { "\n" };
    let mut rows: Vec<String> = text.lines().map(str::to_owned).collect();
    let line = format!("- [{id}] {question} -> A: {answer}");
    let parsed = parse_unit(text);
    let view: Vec<&str> = text.lines().collect();
    if let Some(at) = parsed.questions.iter().find(|q| q.id == id).map(|q| q.line) {
        let start = at.saturating_sub(1);
        let end = item_end(&view, start);
        rows.splice(start..end, [line]);
    } else if let Some(last) = section_end_named(&view, "open questions") {
        rows.insert(last + 1, line);
    } else {
        if rows.last().is_some_and(|l| !l.trim().is_empty()) {
            rows.push(String::new());
        }
        rows.push("## Open questions".into());
        rows.push(String::new());
        rows.push(line);
    }
    let mut out = rows.join(newline);
    out.push_str(newline);
    let back = parse_unit(&out);
    let ok = back
        .questions
        .iter()
        .filter(|q| q.id == id)
        .map(|q| (q.text.as_str(), q.answer.as_deref()))
        .eq([(question, Some(answer))]);
    let contract_kept = super::hash::contract_hash(&out) == super::hash::contract_hash(text);
    if !ok || !contract_kept || rest_of(&parsed, &[id]) != rest_of(&back, &[id]) {
        return Err(format!(
            "{id} does not read back as answered once written into the unit"
        ));
    }
    Ok(out)
}

/// The last non-blank line of the `##` section `name` (lower case), or of its heading.
fn section_end_named(lines: &[&str], name: &str) -> Option<usize> {
    let is_h2 = |l: &str| l.starts_with("## ") || l.starts_with("##\t");
    let start = lines
        .iter()
        .rposition(|l| is_h2(l) && l[2..].trim().to_lowercase() == name)?;
    let mut last = start;
    for (i, l) in lines.iter().enumerate().skip(start + 1) {
        if is_h2(l) {
            break;
        }
        if !l.trim().is_empty() {
            last = i;
        }
    }
    Some(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    const UNIT: &str = "---\nid: 001-a\ncontract_hash: abc\n---\n# A\n\n## Intent\n\n### Goal\nDo it.\n\n### Constraints\n- [C1] keep it small\n\n### Failure conditions\n- [F1] it breaks\n\n## Context\n- [code] x\n\n## Expectations\n- [E1] one {verify: test | t1}\n- [E2] two\n  continued {verify: test | t2}\n\n## Open questions\n";

    #[test]
    fn same_id_replaces_new_id_adds_remove_drops() {
        let a = apply(
            UNIT,
            "<!-- why -->\n- [E2] two, better {verify: test | t2}\n- [E3] three {verify: check | c}\n- [C1] (remove)\n- [F2] it leaks\n",
        )
        .unwrap();
        let p = parse_unit(&a.text);
        assert_eq!(
            p.expectations
                .iter()
                .map(|e| e.id.as_str())
                .collect::<Vec<_>>(),
            ["E1", "E2", "E3"]
        );
        assert_eq!(p.expectations[1].text, "two, better");
        assert!(p.constraints.is_empty());
        assert_eq!(p.failures.len(), 2);
        assert_eq!(
            a.changes[0].was.as_deref(),
            Some("- [E2] two continued {verify: test | t2}")
        );
        assert_eq!(a.changes[2].becomes, None);
        // The frontmatter and every other section are as they were.
        assert!(a
            .text
            .starts_with("---\nid: 001-a\ncontract_hash: abc\n---\n"));
        assert!(a.text.contains("## Context\n- [code] x\n"));
        // Applying it again changes nothing.
        let again = apply(&a.text, "- [E2] two, better {verify: test | t2}\n- [E3] three {verify: check | c}\n- [C1] (remove)\n- [F2] it leaks\n").unwrap();
        assert_eq!(again.text, a.text);
        assert!(again.changes.is_empty());
    }

    #[test]
    fn anything_but_c_f_e_lines_is_refused() {
        for bad in [
            "rm -rf /",
            "- [Q1] answer it",
            "- [X1] other",
            "- [E] no number",
            "- [E5]",
            "- [E5] a\n- [E5] b",
            "",
            "- [E3] x\n## Intent",
        ] {
            assert!(apply(UNIT, bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_answer_is_a_q_item_outside_the_contract() {
        let once = set_question(UNIT, "Q1", "Which store?", "the sqlite one").unwrap();
        let p = parse_unit(&once);
        assert_eq!(p.questions[0].answer.as_deref(), Some("the sqlite one"));
        let twice = set_question(&once, "Q1", "Which store?", "postgres").unwrap();
        let p = parse_unit(&twice);
        assert_eq!(p.questions.len(), 1);
        assert_eq!(p.questions[0].answer.as_deref(), Some("postgres"));
        // Without the section, it is added at the end.
        let bare = UNIT.replace("## Open questions\n", "");
        let added = set_question(&bare, "Q2", "Why?", "because").unwrap();
        assert!(
            added.ends_with("## Open questions\n\n- [Q2] Why? -> A: because\n"),
            "{added}"
        );
    }

    #[test]
    fn a_line_that_would_not_read_back_is_refused() {
        // An unclosed comment would run to a `-->` further down, swallowing what is between.
        let unit = UNIT.replace("- [code] x", "- [code] x --> y");
        assert!(apply(&unit, "- [F2] opens <!-- a comment").is_err());
        assert!(set_question(&unit.replace("## Open questions\n", ""), "Q1", "q", "a").is_ok());
    }
}
