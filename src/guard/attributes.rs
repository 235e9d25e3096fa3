//! Merge rules in `.gitattributes` (SPEC 24.1, `merge-attribute`): how git merges a path decides
//! what lands when a lane is merged with its target. The built-in `union` driver keeps both sides'
//! lines and never conflicts, so a lane that set it on its code would land a merge nobody wrote
//! or judged. Only a person sets merge rules; iced's own two union lines (section 23.1) are the
//! exception an agent may write too.

/// Whether `rel` (root-relative, `/`-separated) is a `.gitattributes` file, at any depth.
pub fn is_attributes(rel: &str) -> bool {
    rel.rsplit('/').next() == Some(".gitattributes")
}

/// The lines of `text` that say something about merging: an attribute `merge` set, unset, unspecified
/// or given a value (`merge`, `-merge`, `!merge`, `merge=<driver>`), in a pattern line or an
/// `[attr]` macro. Whitespace inside a line is normalised; comments and blank lines are skipped.
fn merge_lines(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|tokens| tokens.first().is_some_and(|t| !t.starts_with('#')))
        .filter(|tokens| {
            tokens[1..].iter().any(|t| {
                let name = t.trim_start_matches(['-', '!']);
                name == "merge" || name.starts_with("merge=")
            })
        })
        .map(|tokens| tokens.join(" "))
        .collect()
}

/// The merge lines `after` has that `before` had not, other than iced's own.
pub fn added_merge_lines(before: Option<&str>, after: &str) -> Vec<String> {
    let old = merge_lines(before.unwrap_or(""));
    merge_lines(after)
        .into_iter()
        .filter(|l| !old.contains(l) && !crate::init::UNION_ATTRIBUTES.contains(&l.as_str()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_merge_rule_is_found_in_every_spelling() {
        for line in [
            "* merge=union",
            "src/**   merge=union text",
            "*.rs -merge",
            "*.rs !merge",
            "*.rs merge",
            "[attr]mine merge=union",
        ] {
            assert_eq!(added_merge_lines(None, line).len(), 1, "{line}");
        }
    }

    #[test]
    fn what_was_there_ours_and_other_attributes_are_not_new_merge_rules() {
        let before = "*.lock merge=binary\n";
        let after = "# merge=union in a comment\n*.lock   merge=binary\n*.sh text eol=lf\n*.png binary\n.iced/metrics.jsonl merge=union\nintent/*/decisions.md merge=union\n*.merge text\n";
        assert_eq!(added_merge_lines(Some(before), after), Vec::<String>::new());
    }

    #[test]
    fn only_a_file_named_gitattributes_is_one() {
        assert!(is_attributes(".gitattributes"));
        assert!(is_attributes("src/deep/.gitattributes"));
        assert!(!is_attributes("src/gitattributes"));
        assert!(!is_attributes(".gitattributes.bak"));
    }
}
