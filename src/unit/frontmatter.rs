//! The restricted-YAML frontmatter of a unit: one `key: scalar` per line between `---` lines.
//!
//! Reading follows iced-core exactly (where the block ends, how a scalar is typed, the last of a
//! repeated key wins). Writing changes only the lines of the keys it is asked to change: key order,
//! comments and unknown keys survive, and the body is never touched.

use crate::text::{is_js_space, js_dot_matches_all, js_trim, to_lf};
use serde::Serialize;
use std::borrow::Cow;
use std::fmt;

/// A frontmatter value. Nesting and lists do not exist in this format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scalar {
    Null,
    Bool(bool),
    Int(i64),
    Str(String),
}

impl Scalar {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Scalar::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_int(&self) -> Option<i64> {
        match self {
            Scalar::Int(n) => Some(*n),
            _ => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Scalar::Null)
    }

    /// Empty in the sense of a required field: null or the empty string.
    pub fn is_blank(&self) -> bool {
        match self {
            Scalar::Null => true,
            Scalar::Str(s) => s.is_empty(),
            _ => false,
        }
    }

    /// False as iced-core's JavaScript reads it: null, `false`, `0` or the empty string.
    pub fn is_falsy(&self) -> bool {
        match self {
            Scalar::Null => true,
            Scalar::Bool(b) => !b,
            Scalar::Int(n) => *n == 0,
            Scalar::Str(s) => s.is_empty(),
        }
    }

    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Scalar::Null => serde_json::Value::Null,
            Scalar::Bool(b) => (*b).into(),
            Scalar::Int(n) => (*n).into(),
            Scalar::Str(s) => s.clone().into(),
        }
    }
}

impl fmt::Display for Scalar {
    /// The value as a person reads it (`null`, `true`, `3`, the string's text).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::Null => f.write_str("null"),
            Scalar::Bool(b) => write!(f, "{b}"),
            Scalar::Int(n) => write!(f, "{n}"),
            Scalar::Str(s) => f.write_str(s),
        }
    }
}

impl Serialize for Scalar {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(s)
    }
}

impl From<&str> for Scalar {
    fn from(s: &str) -> Self {
        Scalar::Str(s.to_owned())
    }
}

impl From<String> for Scalar {
    fn from(s: String) -> Self {
        Scalar::Str(s)
    }
}

impl From<i64> for Scalar {
    fn from(n: i64) -> Self {
        Scalar::Int(n)
    }
}

impl<T: Into<Scalar>> From<Option<T>> for Scalar {
    fn from(v: Option<T>) -> Self {
        v.map_or(Scalar::Null, Into::into)
    }
}

/// Why the frontmatter could not be read, in words that say what to fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrontmatterProblem {
    ByteOrderMark,
    Missing,
    Unterminated,
    /// 1-based line number of a line inside the block that is not `key: value`.
    BadLine(usize),
}

impl fmt::Display for FrontmatterProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrontmatterProblem::ByteOrderMark => f.write_str(
                "The file starts with a byte-order mark (U+FEFF), so its frontmatter is not read; save it as UTF-8 without a BOM.",
            ),
            FrontmatterProblem::Missing => {
                f.write_str("Frontmatter is missing: the file must start with a `---` line.")
            }
            FrontmatterProblem::Unterminated => f.write_str(
                "Frontmatter is not closed: add a line `---` after the last `key: value` line.",
            ),
            FrontmatterProblem::BadLine(n) => {
                write!(f, "Frontmatter line {n} is not `key: value`.")
            }
        }
    }
}

/// The parsed frontmatter: values in first-seen key order (a repeated key keeps its first place
/// and its last value), plus the line each key was last seen on.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Frontmatter {
    entries: Vec<(String, Scalar, usize)>,
}

impl Frontmatter {
    pub fn get(&self, key: &str) -> Option<&Scalar> {
        self.entries
            .iter()
            .find(|(k, _, _)| k == key)
            .map(|(_, v, _)| v)
    }

    pub fn str(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Scalar::as_str)
    }

    pub fn line_of(&self, key: &str) -> Option<usize> {
        self.entries
            .iter()
            .find(|(k, _, _)| k == key)
            .map(|(_, _, l)| *l)
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &Scalar)> {
        self.entries.iter().map(|(k, v, _)| (k.as_str(), v))
    }

    fn insert(&mut self, key: &str, value: Scalar, line: usize) {
        match self.entries.iter_mut().find(|(k, _, _)| k == key) {
            Some(entry) => {
                entry.1 = value;
                entry.2 = line;
            }
            None => self.entries.push((key.to_owned(), value, line)),
        }
    }

    pub fn to_json(&self) -> serde_json::Map<String, serde_json::Value> {
        self.iter()
            .map(|(k, v)| (k.to_owned(), v.to_json()))
            .collect()
    }
}

/// The result of reading a unit's text: its frontmatter, the body after it and the body's first
/// line number (1-based, in the LF-normalised text).
#[derive(Debug, Clone)]
pub struct Parsed {
    pub data: Frontmatter,
    pub body: String,
    pub body_line: usize,
    pub problem: Option<FrontmatterProblem>,
}

struct Split<'a> {
    head: &'a str,
    body: &'a str,
    body_line: usize,
}

/// Where the frontmatter block is. iced-core's rule: the text starts with `---\n`; the block ends at
/// the first `\n---`, and that line must read `---` once trimmed, or there is no frontmatter.
fn split(t: &str) -> Result<Split<'_>, FrontmatterProblem> {
    if !t.starts_with("---\n") {
        return Err(if t.starts_with('\u{FEFF}') {
            FrontmatterProblem::ByteOrderMark
        } else {
            FrontmatterProblem::Missing
        });
    }
    let end = t[3..]
        .find("\n---")
        .map(|i| i + 3)
        .ok_or(FrontmatterProblem::Unterminated)?;
    let after = t[end + 4..].find('\n').map(|i| i + end + 4);
    let close_line_end = after.map_or(t.len(), |a| a + 1);
    let closing = &t[end + 1..after.unwrap_or(t.len())];
    if js_trim(closing) != "---" {
        return Err(FrontmatterProblem::Unterminated);
    }
    let prefix = &t[..close_line_end];
    Ok(Split {
        head: &t[4..end + 1],
        body: &t[close_line_end..],
        body_line: prefix.matches('\n').count() + 1,
    })
}

/// `^([A-Za-z_][\w-]*)\s*:` at the start of a line: the key and the text after the colon.
fn split_key(line: &str) -> Option<(&str, &str)> {
    let first = line.chars().next()?;
    if !(first.is_ascii_alphabetic() || first == '_') {
        return None;
    }
    let key_end = line
        .char_indices()
        .find(|&(_, c)| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
        .map_or(line.len(), |(i, _)| i);
    let value = line[key_end..]
        .trim_start_matches(is_js_space)
        .strip_prefix(':')?;
    Some((&line[..key_end], value))
}

/// `^([A-Za-z_][\w-]*)\s*:(.*)$`: as [`split_key`], and the value must fit on one line as a
/// JavaScript `.` sees it.
fn key_value(line: &str) -> Option<(&str, &str)> {
    split_key(line).filter(|(_, value)| js_dot_matches_all(value))
}

/// Type a raw value as iced-core does.
pub fn parse_scalar(raw: &str) -> Scalar {
    let v = js_trim(raw);
    match v {
        "" | "null" | "~" => return Scalar::Null,
        "true" => return Scalar::Bool(true),
        "false" => return Scalar::Bool(false),
        _ => {}
    }
    if is_integer(v) {
        // A number too large for i64 stays text rather than losing digits.
        return v
            .parse()
            .map_or_else(|_| Scalar::Str(v.to_owned()), Scalar::Int);
    }
    if v.len() >= 2 && v.starts_with('"') && v.ends_with('"') {
        return match serde_json::from_str::<String>(v) {
            Ok(s) => Scalar::Str(s),
            Err(_) => Scalar::Str(v[1..v.len() - 1].to_owned()),
        };
    }
    if v.len() >= 2 && v.starts_with('\'') && v.ends_with('\'') {
        return Scalar::Str(v[1..v.len() - 1].replace("''", "'"));
    }
    Scalar::Str(v.to_owned())
}

fn is_integer(v: &str) -> bool {
    let digits = v.strip_prefix('-').unwrap_or(v);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// Write a value so that [`parse_scalar`] reads it back unchanged. Strings are quoted (JSON
/// escaping) whenever the bare text would read differently or break the line-per-key format.
pub fn format_scalar(value: &Scalar) -> String {
    let s = match value {
        Scalar::Null => return "null".to_owned(),
        Scalar::Bool(b) => return b.to_string(),
        Scalar::Int(n) => return n.to_string(),
        Scalar::Str(s) => s,
    };
    if needs_quotes(s) {
        // U+2028/2029 are legal unescaped in JSON but end a line for the reader; escape them.
        serde_json::to_string(s)
            .expect("a string always serialises")
            .replace('\u{2028}', "\\u2028")
            .replace('\u{2029}', "\\u2029")
    } else {
        s.clone()
    }
}

fn needs_quotes(s: &str) -> bool {
    let first = s.chars().next();
    let last = s.chars().next_back();
    s.is_empty()
        || first.is_some_and(is_js_space)
        || last.is_some_and(is_js_space)
        || has_marker_before_space(s)
        || first.is_some_and(|c| "\"'[]{}>|*&!%@`#,?".contains(c))
        || s == "-"
        || s.strip_prefix('-')
            .and_then(|r| r.chars().next())
            .is_some_and(is_js_space)
        || s.chars()
            .zip(s.chars().skip(1))
            .any(|(a, b)| is_js_space(a) && b == '#')
        || s.chars()
            .any(|c| c.is_control() || c == '\u{2028}' || c == '\u{2029}')
        || matches!(s, "null" | "true" | "false" | "~")
        || is_integer(s)
}

/// `[:#]\s` anywhere in the text.
fn has_marker_before_space(s: &str) -> bool {
    s.chars()
        .zip(s.chars().skip(1))
        .any(|(a, b)| (a == ':' || a == '#') && is_js_space(b))
}

/// The body of a unit's text (LF), found without typing the frontmatter's values.
pub fn body(text: &str) -> Cow<'_, str> {
    match to_lf(text) {
        Cow::Borrowed(t) => Cow::Borrowed(split(t).map_or(t, |parts| parts.body)),
        Cow::Owned(t) => Cow::Owned(split(&t).map_or(t.as_str(), |parts| parts.body).to_owned()),
    }
}

/// Read the frontmatter of a unit's text.
pub fn parse(text: &str) -> Parsed {
    let t = to_lf(text);
    let parts = match split(&t) {
        Ok(parts) => parts,
        Err(problem) => {
            return Parsed {
                data: Frontmatter::default(),
                body: t.into_owned(),
                body_line: 1,
                problem: Some(problem),
            }
        }
    };
    let mut data = Frontmatter::default();
    let mut problem = None;
    for (i, line) in parts.head.split('\n').enumerate() {
        let trimmed = js_trim(line);
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        match key_value(line) {
            Some((key, raw)) => data.insert(key, parse_scalar(raw), i + 2),
            None => {
                problem.get_or_insert(FrontmatterProblem::BadLine(i + 2));
            }
        }
    }
    Parsed {
        data,
        body: parts.body.to_owned(),
        body_line: parts.body_line,
        problem,
    }
}

/// One change to the frontmatter: set a key to a value, or remove it.
#[derive(Debug, Clone)]
pub enum Edit {
    Set(String, Scalar),
    Remove(String),
}

impl Edit {
    pub fn set(key: &str, value: impl Into<Scalar>) -> Edit {
        Edit::Set(key.to_owned(), value.into())
    }

    fn key(&self) -> &str {
        match self {
            Edit::Set(k, _) | Edit::Remove(k) => k,
        }
    }
}

/// Apply edits to a unit's text. A set key is rewritten on its first line (later duplicates of it
/// are dropped, since a reader would take the last); a new key is appended at the end of the block;
/// a removed key loses every line. Everything else, the body included, is kept byte for byte
/// (after LF normalisation). Text without frontmatter gets a new block in front of it.
pub fn apply(text: &str, edits: &[Edit]) -> String {
    let t = to_lf(text);
    let (head, body) = match split(&t) {
        Ok(parts) => (Some(parts.head), parts.body),
        Err(_) => (None, &*t),
    };
    let lines: Vec<&str> = match head {
        Some(h) if !h.is_empty() => h.strip_suffix('\n').unwrap_or(h).split('\n').collect(),
        _ => Vec::new(),
    };
    let mut written: Vec<&str> = Vec::new();
    let mut out: Vec<String> = Vec::with_capacity(lines.len() + edits.len());
    for line in lines {
        let key = split_key(line).map(|(k, _)| k);
        let edit = key.and_then(|k| edits.iter().rev().find(|e| e.key() == k));
        match edit {
            None => out.push(line.to_owned()),
            Some(Edit::Remove(_)) => {}
            Some(Edit::Set(k, v)) => {
                if !written.contains(&k.as_str()) {
                    written.push(k);
                    out.push(format!("{k}: {}", format_scalar(v)));
                }
            }
        }
    }
    // Keys not in the block yet, in the order of their first edit; the last edit of a key wins.
    for edit in edits {
        let k = edit.key();
        if !written.contains(&k) {
            written.push(k);
            if let Some(Edit::Set(_, v)) = edits.iter().rev().find(|e| e.key() == k) {
                out.push(format!("{k}: {}", format_scalar(v)));
            }
        }
    }
    let mut result = String::with_capacity(t.len() + 64);
    result.push_str("---\n");
    for line in &out {
        result.push_str(line);
        result.push('\n');
    }
    result.push_str("---\n");
    result.push_str(body);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    const UNIT: &str = "---\niced: 0.1\nid: 042-dark-mode\n# a comment\ntitle: \"Dark: mode\"\nautonomy: 1\nparent: null\nodd: 'it''s'\nextra: keep me\n---\n\n# Body\n";

    #[test]
    fn scalars_are_typed_like_iced_core() {
        let p = parse(UNIT);
        assert_eq!(p.problem, None);
        assert_eq!(p.data.get("iced"), Some(&Scalar::Str("0.1".into())));
        assert_eq!(p.data.get("autonomy"), Some(&Scalar::Int(1)));
        assert_eq!(p.data.get("parent"), Some(&Scalar::Null));
        assert_eq!(p.data.str("title"), Some("Dark: mode"));
        assert_eq!(p.data.str("odd"), Some("it's"));
        assert_eq!(p.body, "\n# Body\n");
        assert_eq!(p.body_line, 11);
        assert_eq!(p.data.line_of("title"), Some(5));
        assert_eq!(parse_scalar(" ~ "), Scalar::Null);
        assert_eq!(parse_scalar("-12"), Scalar::Int(-12));
        assert_eq!(parse_scalar("\"bad \\q\""), Scalar::Str("bad \\q".into()));
        assert_eq!(
            parse_scalar("123456789012345678901234567890"),
            Scalar::Str("123456789012345678901234567890".into())
        );
    }

    #[test]
    fn repeated_key_last_value_wins() {
        let p = parse("---\na: 1\na: 2\n---\n");
        assert_eq!(p.data.get("a"), Some(&Scalar::Int(2)));
    }

    #[test]
    fn problems_are_named() {
        assert_eq!(parse("no block").problem, Some(FrontmatterProblem::Missing));
        assert_eq!(
            parse("\u{FEFF}---\na: 1\n---\n").problem,
            Some(FrontmatterProblem::ByteOrderMark)
        );
        assert_eq!(
            parse("---\na: 1\n").problem,
            Some(FrontmatterProblem::Unterminated)
        );
        // The first `\n---` line decides; `----` there means no frontmatter, as in iced-core.
        assert_eq!(
            parse("---\na: 1\n----\n---\n").problem,
            Some(FrontmatterProblem::Unterminated)
        );
        assert_eq!(
            parse("---\na: 1\nnot a pair\n---\n").problem,
            Some(FrontmatterProblem::BadLine(3))
        );
    }

    #[test]
    fn crlf_is_read_as_lf() {
        let p = parse("---\r\nid: 001-x\r\n---\r\nbody\r\n");
        assert_eq!(p.problem, None);
        assert_eq!(p.data.str("id"), Some("001-x"));
        assert_eq!(p.body, "body\n");
    }

    #[test]
    fn edits_keep_order_comments_unknown_keys_and_body() {
        let out = apply(
            UNIT,
            &[
                Edit::set("autonomy", 2),
                Edit::set("held", "legal review: pending"),
                Edit::Remove("odd".into()),
            ],
        );
        assert_eq!(
            out,
            "---\niced: 0.1\nid: 042-dark-mode\n# a comment\ntitle: \"Dark: mode\"\nautonomy: 2\nparent: null\nextra: keep me\nheld: \"legal review: pending\"\n---\n\n# Body\n"
        );
    }

    #[test]
    fn a_set_key_drops_its_stale_duplicates() {
        let out = apply("---\na: 1\nb: x\na: 2\n---\n", &[Edit::set("a", 3)]);
        assert_eq!(out, "---\na: 3\nb: x\n---\n");
    }

    #[test]
    fn text_without_frontmatter_gets_a_block() {
        assert_eq!(
            apply("body\n", &[Edit::set("a", 1)]),
            "---\na: 1\n---\nbody\n"
        );
    }

    #[test]
    fn quoting_matches_iced_core() {
        let q = |s: &str| format_scalar(&Scalar::Str(s.into()));
        assert_eq!(q("plain text"), "plain text");
        assert_eq!(q("0.1"), "0.1");
        assert_eq!(q("2026-09-30T11:00:00Z"), "2026-09-30T11:00:00Z");
        assert_eq!(q(""), "\"\"");
        assert_eq!(q("12"), "\"12\"");
        assert_eq!(q("null"), "\"null\"");
        assert_eq!(q("a: b"), "\"a: b\"");
        assert_eq!(q("- item"), "\"- item\"");
        assert_eq!(q("x #y"), "\"x #y\"");
        assert_eq!(q("[x]"), "\"[x]\"");
        assert_eq!(q(" lead"), "\" lead\"");
        assert_eq!(q("a\rb"), "\"a\\rb\"");
        assert_eq!(q("a\u{2028}b"), "\"a\\u2028b\"");
    }
}
