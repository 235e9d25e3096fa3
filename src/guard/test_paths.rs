//! Test paths (SPEC 20.17): where a test writer may write. A root-relative path is a test path when
//! one of `build.testPaths` matches it: `*` within one segment, `?` one character, a segment `**`
//! any number of segments (none included). `intent/` and `.iced/` never are, whatever the globs say.

/// Whether the root-relative, `/`-separated path `rel` is a test path under `globs`.
pub fn is_test_path(rel: &str, globs: &[String]) -> bool {
    let first = rel.split('/').next().unwrap_or("");
    if rel.is_empty() || rel.starts_with('/') || first == "intent" || first == ".iced" {
        return false;
    }
    let path: Vec<&str> = rel.split('/').collect();
    globs.iter().any(|g| {
        let pattern: Vec<&str> = g.split('/').collect();
        segments(&pattern, &path)
    })
}

fn segments(pattern: &[&str], path: &[&str]) -> bool {
    match pattern.split_first() {
        None => path.is_empty(),
        Some((&"**", rest)) => (0..=path.len()).any(|k| segments(rest, &path[k..])),
        Some((p, rest)) => path
            .split_first()
            .is_some_and(|(name, tail)| segment(p, name) && segments(rest, tail)),
    }
}

/// One segment against one glob segment (`*`, `?`, any other character itself).
fn segment(pattern: &str, name: &str) -> bool {
    fn go(p: &[char], n: &[char]) -> bool {
        match p.split_first() {
            None => n.is_empty(),
            Some(('*', rest)) => (0..=n.len()).any(|k| go(rest, &n[k..])),
            Some(('?', rest)) => !n.is_empty() && go(rest, &n[1..]),
            Some((c, rest)) => n.first() == Some(c) && go(rest, &n[1..]),
        }
    }
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    go(&p, &n)
}

#[cfg(test)]
mod tests {
    use super::is_test_path;

    #[test]
    fn the_default_globs_take_tests_and_leave_code() {
        let globs: Vec<String> = crate::config::TEST_PATHS
            .iter()
            .map(|g| (*g).to_owned())
            .collect();
        for yes in [
            "tests/a.rs",
            "tests/cli/deep/b.rs",
            "test/x.py",
            "src/__tests__/a.js",
            "pkg/thing_test.go",
            "thing_test.go",
            "web/app.test.ts",
            "spec/foo_spec.rb",
            "src/a.spec.js",
            "py/test_mod.py",
        ] {
            assert!(is_test_path(yes, &globs), "{yes}");
        }
        for no in [
            "src/lib.rs",
            "testing/a.rs",
            "src/tests.rs",
            "README.md",
            "intent/u/iced.md",
            ".iced/config.json",
            "intent/u/tests/x.rs",
            "src/contest.rs",
            "",
        ] {
            assert!(!is_test_path(no, &globs), "{no}");
        }
        assert!(is_test_path("src/a.rs", &["src/*.rs".to_owned()]));
        assert!(!is_test_path("src/x/a.rs", &["src/*.rs".to_owned()]));
        assert!(is_test_path("src/x/a.rs", &["src/**/a.?s".to_owned()]));
    }
}
