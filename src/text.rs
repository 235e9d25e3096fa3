//! Text rules shared by the unit format and everything that prints.
//!
//! The ICED record was first implemented in JavaScript (iced-core), and a unit's contract hash
//! depends on exactly which characters count as whitespace and how line endings are read. The
//! helpers here reproduce JavaScript's `\s`, `trim()` and the `.` of a regular expression, so
//! that a unit approved by iced-core hashes to the same value here. Nothing in this module does I/O.

use std::borrow::Cow;

/// Whitespace as JavaScript's `\s` and `String.prototype.trim` define it (WhiteSpace and
/// LineTerminator). It differs from `char::is_whitespace`: it includes U+FEFF and excludes U+0085.
pub fn is_js_space(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\u{0B}' | '\u{0C}' | '\r' | ' ' | '\u{A0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200A}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202F}'
                | '\u{205F}'
                | '\u{3000}'
                | '\u{FEFF}'
    )
}

/// Characters a JavaScript regular expression's `.` does not match.
pub fn is_js_line_terminator(c: char) -> bool {
    matches!(c, '\n' | '\r' | '\u{2028}' | '\u{2029}')
}

/// True when every character could be matched by `.` (so `.+$` / `.*$` can match the text).
pub fn js_dot_matches_all(s: &str) -> bool {
    !s.chars().any(is_js_line_terminator)
}

pub fn js_trim(s: &str) -> &str {
    s.trim_matches(is_js_space)
}

pub fn js_trim_end(s: &str) -> &str {
    s.trim_end_matches(is_js_space)
}

pub fn js_trim_start(s: &str) -> &str {
    s.trim_start_matches(is_js_space)
}

/// `heading.toLowerCase() === name` for a lower-case ASCII `name` without a `k`. No non-ASCII
/// character lower-cases to an ASCII letter other than `k` (U+212A KELVIN SIGN), so for such names
/// an ASCII case-insensitive comparison gives exactly JavaScript's answer, without allocating.
pub fn js_lower_eq(heading: &str, name: &str) -> bool {
    debug_assert!(!name.contains('k') && name.bytes().all(|b| !b.is_ascii_uppercase()));
    heading.eq_ignore_ascii_case(name)
}

/// CRLF and lone CR become LF, as every reader of a unit sees the text.
pub fn to_lf(text: &str) -> Cow<'_, str> {
    if !text.contains('\r') {
        return Cow::Borrowed(text);
    }
    Cow::Owned(text.replace("\r\n", "\n").replace('\r', "\n"))
}

/// Replace every HTML comment `<!-- ... -->` by the newlines it contained, so the text keeps its
/// line numbers while the comment's words disappear. An unterminated comment is left as it is.
pub fn blank_comments(text: &str) -> Cow<'_, str> {
    let Some(first) = text.find("<!--") else {
        return Cow::Borrowed(text);
    };
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut start = first;
    loop {
        let Some(close) = rest[start + 4..].find("-->") else {
            out.push_str(rest);
            break;
        };
        let end = start + 4 + close + 3;
        out.push_str(&rest[..start]);
        out.extend(rest[start..end].chars().filter(|&c| c == '\n'));
        rest = &rest[end..];
        match rest.find("<!--") {
            Some(next) => start = next,
            None => {
                out.push_str(rest);
                break;
            }
        }
    }
    Cow::Owned(out)
}

/// Text read from a file, made safe to print on a terminal: escape sequences (CSI, OSC and other
/// ESC-introduced sequences) are removed, and every other control character except newline and
/// tab is dropped. A unit, a report or a claim file can hold anything; printing it must never
/// move the cursor, retitle the window or hide text.
pub fn for_terminal(s: &str) -> Cow<'_, str> {
    if !s.chars().any(|c| c != '\n' && c != '\t' && c.is_control()) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => match chars.peek() {
                // CSI: parameters and intermediates, ended by a final byte in 0x40..=0x7e.
                Some('[') => {
                    chars.next();
                    for c in chars.by_ref() {
                        if ('\u{40}'..='\u{7e}').contains(&c) {
                            break;
                        }
                    }
                }
                // OSC, DCS, SOS, PM, APC: a string ended by BEL or ESC \.
                Some(']' | 'P' | 'X' | '^' | '_') => {
                    chars.next();
                    while let Some(c) = chars.next() {
                        if c == '\u{7}' {
                            break;
                        }
                        if c == '\u{1b}' {
                            if chars.peek() == Some(&'\\') {
                                chars.next();
                            }
                            break;
                        }
                    }
                }
                Some(_) => {
                    chars.next();
                }
                None => {}
            },
            '\n' | '\t' => out.push(c),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn js_whitespace_includes_bom_and_nbsp_but_not_nel() {
        assert!(is_js_space('\u{FEFF}'));
        assert!(is_js_space('\u{A0}'));
        assert!(!is_js_space('\u{85}'));
        assert_eq!(js_trim("\u{FEFF} a \u{3000}"), "a");
    }

    #[test]
    fn lf_converts_crlf_and_lone_cr() {
        assert_eq!(to_lf("a\r\nb\rc\n"), "a\nb\nc\n");
    }

    #[test]
    fn comments_are_blanked_keeping_newlines() {
        assert_eq!(blank_comments("a<!-- x\ny -->b<!--z-->c"), "a\nbc");
        assert_eq!(blank_comments("a <!-- open"), "a <!-- open");
        // `<!-->` is not a closed comment: the closing `-->` must follow the opening one.
        assert_eq!(blank_comments("<!-->x-->"), "");
        assert_eq!(blank_comments("<!-->x"), "<!-->x");
    }

    #[test]
    fn terminal_escapes_are_stripped() {
        assert_eq!(for_terminal("a\u{1b}[31mred\u{1b}[0m"), "ared");
        assert_eq!(for_terminal("t\u{1b}]0;title\u{7}x"), "tx");
        assert_eq!(for_terminal("t\u{1b}]8;;http://x\u{1b}\\link"), "tlink");
        assert_eq!(for_terminal("bell\u{7}\r\nok\tz"), "bell\nok\tz");
        assert_eq!(for_terminal("c1\u{9b}2Jx"), "c12Jx");
    }
}
