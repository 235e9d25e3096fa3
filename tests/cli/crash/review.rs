//! A review build (SPEC 20.14) killed (SIGKILL) at each side effect on its way: `iced build`
//! again takes the same run up, and delivers one review.md; no reviewer runs twice, and the target
//! gains only the review's close.

use super::each_in_parallel;
use crate::review::{changed, review_env, FAIL_S2};
use crate::validation::{attempts_of, section};
use serde_json::Value;
use std::os::unix::process::ExitStatusExt;

/// Every side effect a review passes, from admit to landing.
const POINTS: &[&str] = &[
    "admit-after-claim",
    "admit-after-state",
    "brief-after-write",
    "worktree-after-add",
    "validator-after-prepare",
    "validator-after-launch",
    "validator-after-check",
    "validator-after-remove",
    "deliver-after-prepare",
    "deliver-after-commit",
    "deliver-after-record",
    "land-after-integrate",
    "land-after-move",
    "end-before-release",
];

#[test]
fn a_review_killed_at_each_side_effect_runs_each_reviewer_once() {
    each_in_parallel("review kills", POINTS, 2, |point| {
        let script = section("*", "validator", "*", &format!("report {FAIL_S2}"));
        let (env, id) = review_env(Some("{from}..{to}"), None, &script);
        let before = env.git_out(&["rev-parse", "HEAD"]).trim().to_owned();
        let out = env
            .command()
            .env("ICED_FAILPOINT", point)
            .args(["build", &id, "--json"])
            .output()
            .expect("iced runs");
        assert_eq!(
            out.status.signal(),
            Some(9),
            "{point}: not killed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Killed after the run's end was saved, the review has landed already: nothing to take up.
        if *point != "end-before-release" {
            let again = env.iced_json(&["build", &id]);
            let last: Value = again
                .stdout
                .lines()
                .last()
                .and_then(|l| serde_json::from_str(l).ok())
                .unwrap_or(Value::Null);
            assert_eq!(last["status"], "delivered", "{point}: {again:#?}");
        }
        assert_eq!(
            attempts_of(&env, "validator", "full"),
            [1],
            "{point}: the reviewer ran once"
        );
        assert!(
            attempts_of(&env, "implementer", "*").is_empty(),
            "{point}: an implementer ran"
        );
        assert_eq!(
            changed(&env, &format!("{before}..HEAD")),
            [
                format!("intent/{id}/iced.md"),
                format!("intent/{id}/review.md")
            ],
            "{point}"
        );
        let reviews = env.git_out(&["log", "--format=%s", &format!("{before}..HEAD")]);
        let closes = reviews
            .lines()
            .filter(|l| l.starts_with("iced: review"))
            .count();
        assert_eq!(closes, 1, "{point}: {reviews}");
        let review = env.read(&format!("intent/{id}/review.md"));
        assert_eq!(review.matches("### ").count(), 1, "{point}: {review}");
    });
}
