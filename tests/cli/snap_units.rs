//! Snapshots of the authoring views (SPEC 14): `iced status`, `iced list` and `iced lint`, as text
//! and as `--json`, on one repository holding every kind of unit those views tell apart.

use crate::env::{unit_file, TestEnv, GOOD_BODY};
use crate::snap::{assert_read, both};

/// A body that lints with errors and warnings at stage signoff: a solution in the goal and an
/// unknown context tag and an assumption (warnings); no failure condition, an expectation without a
/// verify suffix and an open question (errors).
const FLAWED_BODY: &str = "
# Dark mode

## Intent

### Goal
Keep the theme in redis so every device shows the same one.

### Scope
- In: the settings page

## Context
- [assumed] Every browser supports prefers-color-scheme.
- [rumour] The designers want it by spring.

## Expectations
- [E1] The settings page offers a dark theme.
- [E2] The choice follows the person to another device. {verify: test | tests/theme.rs}

## Open questions
- [Q1] Does the print stylesheet follow the theme?
";

/// The repository the views read: a clean approved unit (active), a flawed draft, a child of it
/// that is held, and a unit whose file is not UTF-8 (listed with its error).
fn units() -> (TestEnv, [String; 4]) {
    let env = TestEnv::initialized();
    let flawed = env.new_unit("dark mode for the settings page");
    env.set_body(&flawed, FLAWED_BODY);
    let child = env
        .iced_json(&["child", &flawed, "bug: the toggle forgets its state"])
        .ok()
        .json()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    env.iced_json(&["hold", &child, "waiting for the design review"])
        .ok();
    let broken = env.new_unit("export sessions as csv");
    let mut bytes = env.read_bytes(&unit_file(&broken));
    bytes.extend_from_slice(b"\n\xff\xfe not UTF-8\n");
    env.write(&unit_file(&broken), bytes);
    let clean = env.approved_unit("session timeout");
    (env, [clean, flawed, child, broken])
}

#[test]
fn status_list_and_lint_read_well() {
    let empty = TestEnv::initialized();
    assert_read!(&empty, "list_no_units", both(&empty, &["list"]));

    let (env, [clean, flawed, child, _broken]) = units();
    assert_read!(&env, "list", both(&env, &["list"]));
    // The active unit (`status` without an id), approved and clean.
    assert_read!(&env, "status_active_approved", both(&env, &["status"]));
    // A draft with lint findings at stage validate (the draft's rules) and a child.
    assert_read!(
        &env,
        "status_draft_with_findings",
        both(&env, &["status", &flawed])
    );
    // A held child.
    assert_read!(&env, "status_held_child", both(&env, &["status", &child]));

    assert_read!(&env, "lint_clean", both(&env, &["lint", &clean]));
    assert_read!(
        &env,
        "lint_clean_signoff",
        both(&env, &["lint", &clean, "--stage", "signoff"])
    );
    assert_read!(
        &env,
        "lint_errors_and_warnings",
        both(&env, &["lint", &flawed, "--stage", "signoff"])
    );
    // A GOOD_BODY unit lints clean: the clean snapshots above are of that body.
    assert!(env.read(&unit_file(&clean)).ends_with(GOOD_BODY));
}
