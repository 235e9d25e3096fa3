//! Globs and the paths the guard cares about: which classes a written path with a `*` (or an
//! expansion) in it can fall in, so that `rm intent/*/verify.json` is judged as a write of an
//! owned file.

use super::Written;
use crate::guard::lex::{Word, ANY, EXPANDED, ONE};
use crate::guard::paths::{class_of, holds_owned, Class, Owned};

/// Whether a name matches one part of a glob (the sentinels of `lex`); like the shell, a
/// leading `.` is matched only by a leading `.`.
fn part_matches(pattern: &str, name: &str) -> bool {
    fn go(p: &[char], n: &[char]) -> bool {
        match p.split_first() {
            None => n.is_empty(),
            Some((&c, rest)) if c == ANY || c == EXPANDED => {
                (0..=n.len()).any(|k| go(rest, &n[k..]))
            }
            Some((&c, rest)) if c == ONE => !n.is_empty() && go(rest, &n[1..]),
            Some((&c, rest)) => n.first() == Some(&c) && go(rest, &n[1..]),
        }
    }
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    if name.starts_with('.') && !pattern.starts_with('.') && pattern.starts_with([ANY, ONE]) {
        return false;
    }
    go(&p, &n)
}

fn is_pattern(part: &str) -> bool {
    part.contains([ANY, ONE, EXPANDED])
}

/// How a part reads in a message: sentinels shown as the shell spells them.
fn shown(part: &str) -> String {
    Word {
        text: part.to_owned(),
        raw: String::new(),
    }
    .shown()
}

/// A template of a path the guard cares about: literal parts, `?` one part (a unit id), `**`
/// one or more parts.
/// A path template and the class of a path it matches (given the unit id the template's `?`
/// took).
type Template = (&'static [&'static str], fn(&str) -> Class);

const TEMPLATES: &[Template] = &[
    (&[".iced", "active"], |_| Class::Owned(Owned::Active)),
    (&[".iced", "metrics.jsonl"], |_| {
        Class::Owned(Owned::Metrics)
    }),
    (&[".iced", "run"], |_| Class::Owned(Owned::Run)),
    (&[".iced", "run", "**"], |_| Class::Owned(Owned::Run)),
    (&[".iced", "config.json"], |_| Class::Config),
    (&[".claude", "settings.json"], |_| Class::Host),
    (&[".claude", "settings.local.json"], |_| Class::Host),
    (&[".iced", "memory", "**"], |_| Class::Memory),
    (&["intent", "?", "evidence.md"], |_| {
        Class::Owned(Owned::Evidence)
    }),
    (&["intent", "?", "verify.json"], |_| {
        Class::Owned(Owned::Verify)
    }),
    (&["intent", "?", "iced.md"], |id| Class::Unit(id.to_owned())),
    (&["intent", "?", "decisions.md"], |id| {
        Class::Decisions(id.to_owned())
    }),
    (&["intent", "?", "**"], |id| Class::Aux(id.to_owned())),
];

/// Folders whose removal takes owned files with them.
const HOLDERS: &[&[&str]] = &[
    &[],
    &[".iced"],
    &[".iced", "run"],
    &["intent"],
    &["intent", "?"],
];

/// Parts match a template; the unit id the `?` took.
fn template_match(parts: &[String], template: &[&str]) -> Option<String> {
    let mut id = String::new();
    for (k, t) in template.iter().enumerate() {
        match *t {
            "**" => return (parts.len() > k).then_some(id),
            "?" => id = shown(parts.get(k)?),
            lit => {
                if !part_matches(parts.get(k)?, lit) {
                    return None;
                }
            }
        }
    }
    (parts.len() == template.len()).then_some(id)
}

/// What a written path may be: each class it can fall in with the path as shown. A literal path
/// has one; a glob one per template it can match (none special: its own class).
pub fn candidates(w: &Written) -> Vec<(Class, String)> {
    let rel = w
        .parts
        .iter()
        .map(|p| shown(p))
        .collect::<Vec<_>>()
        .join("/");
    if !w.parts.iter().any(|p| is_pattern(p)) {
        let class = if w.destructive && holds_owned(&w.parts) {
            Class::Owned(Owned::Tree)
        } else {
            class_of(&w.parts)
        };
        return vec![(class, rel)];
    }
    let mut out: Vec<(Class, String)> = Vec::new();
    if w.destructive
        && HOLDERS
            .iter()
            .any(|t| template_match(&w.parts, t).is_some())
    {
        out.push((Class::Owned(Owned::Tree), rel.clone()));
    }
    for (template, class) in TEMPLATES {
        if let Some(id) = template_match(&w.parts, template) {
            let c = class(&id);
            // `intent/*/x` is an aux file only when it is not one of the named ones.
            if matches!(c, Class::Aux(_)) && !out.is_empty() {
                continue;
            }
            out.push((c, rel.clone()));
        }
    }
    if out.is_empty() {
        out.push((class_of(&w.parts), rel));
    }
    out
}
