//! Unit ids: `NNN-slug`. The number is the next free one across `intent/`, zero-padded to three
//! digits; the slug comes from the title.

use unicode_normalization::UnicodeNormalization;

pub const SLUG_MAX: usize = 40;

/// `^\d{3,}-[a-z0-9-]+$`.
pub fn is_valid_id(id: &str) -> bool {
    let digits = id.bytes().take_while(u8::is_ascii_digit).count();
    digits >= 3
        && id[digits..].strip_prefix('-').is_some_and(|slug| {
            !slug.is_empty()
                && slug
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        })
}

/// The word no unit argument may be, nor a new unit's slug (SPEC 3): `iced build next` is the
/// queue.
pub const RESERVED: &str = "next";

/// The leading number of a directory name such as `042-dark-mode` (`^(\d{3,})-`).
pub fn leading_number(name: &str) -> Option<u64> {
    let digits = name.bytes().take_while(u8::is_ascii_digit).count();
    if digits < 3 || !name[digits..].starts_with('-') {
        return None;
    }
    // A number too long for u64 cannot be the next one to hand out; saturate.
    Some(name[..digits].parse().unwrap_or(u64::MAX))
}

/// A title as a slug: NFKD, combining marks dropped, lower case, runs of anything outside
/// `a-z0-9` become one `-`, trimmed, cut to 40 characters; `unit` when nothing is left.
pub fn slugify(title: &str) -> String {
    let folded: String = title
        .nfkd()
        .filter(|c| !('\u{300}'..='\u{36f}').contains(c))
        .collect::<String>()
        .to_lowercase();
    let mut slug = String::with_capacity(folded.len());
    let mut gap = false;
    for c in folded.chars() {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            if gap && !slug.is_empty() {
                slug.push('-');
            }
            gap = false;
            slug.push(c);
        } else {
            gap = true;
        }
    }
    slug.truncate(SLUG_MAX);
    let slug = slug.trim_end_matches('-');
    if slug.is_empty() {
        "unit".to_owned()
    } else {
        slug.to_owned()
    }
}

/// The id for a new unit numbered `number`.
pub fn format_id(number: u64, title: &str) -> String {
    format!("{number:03}-{}", slugify(title))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_follow_the_seed_rules() {
        assert_eq!(slugify("Dark mode in settings"), "dark-mode-in-settings");
        assert_eq!(slugify("  Café -- au LAIT!! "), "cafe-au-lait");
        assert_eq!(slugify("!!!"), "unit");
        assert_eq!(slugify("日本語"), "unit");
        let long = slugify("fix finding 1 from bug-hunt-report.md: mutation of shared state");
        assert_eq!(long, "fix-finding-1-from-bug-hunt-report-md-mu");
        assert!(long.len() <= SLUG_MAX);
        // Cutting at 40 must not leave a trailing dash.
        assert_eq!(
            slugify("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa b"),
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
        );
    }

    #[test]
    fn ids_are_checked() {
        assert!(is_valid_id("042-dark-mode"));
        assert!(is_valid_id("1042-x"));
        assert!(!is_valid_id("42-dark"));
        assert!(!is_valid_id("042-Dark"));
        assert!(!is_valid_id("042-"));
        assert!(!is_valid_id("042"));
        assert_eq!(leading_number("007-x"), Some(7));
        assert_eq!(leading_number("07-x"), None);
        assert_eq!(format_id(7, "A b"), "007-a-b");
        assert_eq!(format_id(1234, "A b"), "1234-a-b");
    }
}
