//! A test that cannot run here (a CLI or a folder it needs is missing) says so where a person
//! reads the results, not in output the test harness captures and hides on success, and fails
//! instead when its `ICED_REQUIRE_*` variable is `1` (`.ci/run` sets them; issue 15, item 4).

use std::io::Write;

/// Refuse to skip when `require` is set to 1; else print the skip uncaptured: libtest captures
/// `eprintln!`, not a write to the process's own stderr.
pub(crate) fn skipped(test: &str, require: &str, why: &str) {
    assert!(
        std::env::var(require).as_deref() != Ok("1"),
        "{require}=1 but {why}"
    );
    let mut stderr = std::io::stderr().lock();
    // Nothing else can be told if stderr itself is gone.
    writeln!(
        stderr,
        "SKIPPED {test}: {why} (set {require}=1 to make this a failure)"
    )
    .ok();
}
