//! Lint's goal coverage rows of the table in [`super::lint_tests`] (SPEC 10.1 to 10.3):
//! `goal-uncovered` and `goal-clause-unknown` at stage signoff, only before approval.

use super::kinds::Status;
use super::lint_tests::*;

/// The rows: every status, each rule raised, and near misses.
pub(super) fn cases() -> Vec<Case> {
    use Sev::Error;
    let mut cases = Vec::new();
    // goal-uncovered and goal-clause-unknown: stage signoff only, and only before approval
    // (10.2): a unit past approval is pinned by its hash, not judged again.
    let two_clauses = "Users can read the app at night without glare; the choice is kept.\n";
    for status in Status::ALL {
        let on = [false, !status.is_past_approval(), false, false];
        cases.push(
            case(
                format!("two clauses, no annotation, {status}"),
                "goal-uncovered",
                Error,
                on,
                unit(status.as_str(), Hash::Right, &[(GOAL, two_clauses)]),
            )
            .lines(&[20, 20]),
        );
        cases.push(
            case(
                format!("E2 names G3 of two, {status}"),
                "goal-clause-unknown",
                Error,
                on,
                unit(
                    status.as_str(),
                    Hash::Right,
                    &[
                        (GOAL, two_clauses),
                        ("theme. {verify", "theme. {goal: G1} {verify"),
                        ("reload. {verify", "reload. {goal: G2, G3} {verify"),
                    ],
                ),
            )
            .lines(&[38]),
        );
    }
    // Near misses: each clause named; one clause needs no annotation (CLEAN itself).
    cases.push(case(
        "both clauses named",
        "goal-uncovered",
        Error,
        NEVER,
        unit(
            "draft",
            Hash::Right,
            &[
                (GOAL, two_clauses),
                ("theme. {verify", "theme. {goal: G1} {verify"),
                ("reload. {verify", "reload. {goal: g2} {verify"),
            ],
        ),
    ));
    cases.push(
        case(
            "a clause named by nobody, unknown status",
            "goal-uncovered",
            Error,
            [false, true, false, false],
            unit("finished", Hash::Right, &[(GOAL, two_clauses)]),
        )
        .also(&["field-invalid"]),
    );
    cases
}
