//! What the guard says: one decision per rule outcome, its reason in plain words and the next
//! step it names (an `iced` verb, `decisions.md`, `review.md`, the lane report's `handback`, or
//! asking the person). Kept apart from the rules so the wording can be read in one place.

use super::{Decision, Owned, Target, Verdict};
use crate::unit::hash::contract_material;
use crate::unit::{LintReport, Status};

const HANDBACK: &str = "hand the lane back in your report (`handback`, with the reason)";

fn list(keys: &[&str]) -> String {
    keys.iter()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn read_only(role: &str, what: &str) -> Decision {
    Decision::deny(
        "read-only-role",
        true,
        format!("A {role} is read-only, and this call {what}."),
        "read files and run only commands that change nothing (tests, builds, `git diff`, `git log`); put what you find in your answer".into(),
    )
}

pub fn test_path_only(rel: &str, globs: &[String]) -> Decision {
    Decision::deny(
        "test-path-only",
        true,
        format!(
            "A test writer writes tests only, and `{rel}` is not a test path (`build.testPaths`: {}).",
            globs
                .iter()
                .map(|g| format!("`{g}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        "leave the code under test to the implementer; write the test under a test path, or ask in your report (`research_request`, `spec_change_request`)".into(),
    )
}

pub fn owned(kind: Owned, rel: &str, own: Option<&str>, active: Option<&str>) -> Decision {
    let (why, next) = match kind {
        Owned::Active => (
            format!("`{rel}` names the active unit; only `iced use` writes it."),
            "ask the person to run `iced use <id>` (or `iced use none`)".to_owned(),
        ),
        Owned::Metrics => (
            format!("`{rel}` is iced's own record of sign-offs, verifications and rejections."),
            "let the `iced` verbs record their events (`iced approve`, `iced accept`, `iced reject`)".to_owned(),
        ),
        Owned::Run => (
            format!("`{rel}` is the build loop's state, written only by the loop."),
            match own {
                Some(_) => "write your report only where the brief says, and leave the loop's files alone".to_owned(),
                None => "steer runs with `iced run pause`, `iced run resume` or `iced run abandon`, or ask the person".to_owned(),
            },
        ),
        Owned::Evidence | Owned::Verify => (
            format!("`{rel}` is written by the loop when it delivers a unit, never by hand."),
            match (own, active) {
                (Some(_), _) => "give your evidence in your report; the loop writes `evidence.md` and `verify.json`".to_owned(),
                (None, Some(id)) => format!("ask the person to run `iced build {id}`, and note what you found in `intent/{id}/decisions.md`"),
                (None, None) => "ask the person to run `iced build <id>`, and note what you found in the unit's `decisions.md`".to_owned(),
            },
        ),
        Owned::Tree => (
            format!("Removing or moving `{}` takes iced's own files with it.", if rel.is_empty() { "." } else { rel }),
            "remove or move only the files you mean, by name, and leave `.iced/` and the unit folders in place".to_owned(),
        ),
    };
    Decision::deny("owned-file", true, why, next)
}

pub fn merge_attribute(rel: &str, added: &[String]) -> Decision {
    Decision::deny(
        "merge-attribute",
        true,
        format!(
            "This adds a merge rule to `{rel}` (`{}`): how git merges a path decides what lands when the lane is merged with its target (`union` keeps both sides' lines and never conflicts), and only a person sets it.",
            added.join("`, `")
        ),
        format!("leave the merge attributes as they are; if the work needs one, {HANDBACK}"),
    )
}

pub fn attributes_unpredictable(rel: &str) -> Decision {
    Decision::deny(
        "merge-attribute",
        true,
        format!(
            "iced cannot tell what this leaves in `{rel}` (a shell command, or a file too large or not a file), so it cannot check that no merge rule is added."
        ),
        format!("write `{rel}` with the editor's write or edit tool, whole and under 1 MiB; if the work cannot, {HANDBACK}"),
    )
}

pub fn host(rel: &str) -> Decision {
    Decision::deny(
        "host-settings",
        true,
        format!(
            "`{rel}` holds the hook that enforces this guard; a lane's agents leave it as it is."
        ),
        format!("leave it unchanged; if the work cannot be done without it, {HANDBACK}"),
    )
}

pub fn config_unpredictable(own: Option<&str>) -> Decision {
    let next = match own {
        Some(_) => format!("leave `.iced/config.json` as it is; if the work needs a change there, {HANDBACK}"),
        None => "change it with a file edit whose old text occurs exactly once, keeping every integrity key as it is".into(),
    };
    Decision::deny(
        "config-integrity",
        true,
        "iced cannot tell what this leaves in `.iced/config.json` (a shell command, a deletion, or an edit whose old text is not found exactly once), so it cannot check the integrity keys.".into(),
        next,
    )
}

pub fn config_not_object() -> Decision {
    Decision::deny(
        "config-integrity",
        true,
        "After this write `.iced/config.json` is not a JSON object, and every iced command would refuse to load it.".into(),
        "write the whole file as one valid JSON object, keeping every integrity key as it is".into(),
    )
}

pub fn config_keys(keys: &[&str], own: Option<&str>) -> Decision {
    let next = match own {
        Some(_) => format!(
            "revert the change to {}; if the work needs it, {HANDBACK}",
            list(keys)
        ),
        None => format!(
            "change only other keys, and ask the person to change {} themselves",
            list(keys)
        ),
    };
    Decision::deny(
        "config-integrity",
        true,
        format!(
            "This changes {} in `.iced/config.json`: integrity keys, which decide how far agents are trusted, what iced runs and what passes, and only a person changes them.",
            list(keys)
        ),
        next,
    )
}

pub fn memory(rel: &str, own: &str) -> Decision {
    Decision::deny(
        "memory-person",
        true,
        format!("`{rel}` is the team's memory: every later brief is told what it says, so a person decides what goes in."),
        format!("note what should be remembered in `intent/{own}/decisions.md`"),
    )
}

pub fn unit_create(id: &str, own: Option<&str>) -> Decision {
    let next = match own {
        Some(own) => format!(
            "work on `{own}` only, and note the unit you would add in `intent/{own}/decisions.md`"
        ),
        None => {
            "create units with `iced new \"<what you want>\"` (or `iced child <parent> \"<what>\"`)"
                .into()
        }
    };
    Decision::deny(
        "unit-create",
        false,
        format!("`intent/{id}/iced.md` is not a unit yet: iced creates units, with an id, a template and a decision log."),
        next,
    )
}

pub fn unit_closed(id: &str, status: Status, own: Option<&str>) -> Decision {
    let next = match own {
        Some(own) => {
            format!("leave `{id}` as it is, and note what it needs in `intent/{own}/decisions.md`")
        }
        None => "start follow-up work as a new unit with `iced new \"<what you want>\"`".into(),
    };
    Decision::deny(
        "unit-closed",
        true,
        format!("`{id}` is {status}: a closed unit does not change."),
        next,
    )
}

fn frontmatter_next(own: Option<&str>) -> String {
    match own {
        Some(_) => "leave the frontmatter as it is; the loop records status and attempts itself".into(),
        None => "leave them as they are: they change through `iced approve`, `iced accept`, `iced autonomy` and `iced hold`, which the person runs".into(),
    }
}

pub fn unit_deleted(id: &str, own: Option<&str>) -> Decision {
    let next = match own {
        Some(_) => {
            format!("keep `intent/{id}/iced.md`; if the unit should not be built, {HANDBACK}")
        }
        None => format!("ask the person to run `iced abandon {id}` if the unit should go"),
    };
    Decision::deny(
        "protected-key",
        true,
        format!("Deleting `intent/{id}/iced.md` removes every protected field of `{id}`."),
        next,
    )
}

pub fn unit_unpredictable(id: &str, own: Option<&str>) -> Decision {
    Decision::deny(
        "protected-key",
        true,
        format!("iced cannot tell whether this keeps the protected fields of `intent/{id}/iced.md` (a shell command, or an edit whose old text is not found exactly once)."),
        match own {
            Some(_) => "edit the file with an exact edit whose old text occurs once, leaving the frontmatter as it is".into(),
            None => "edit the file with an exact edit whose old text occurs once, leaving the protected fields as they are".into(),
        },
    )
}

pub fn protected(id: &str, keys: &[&str], own: Option<&str>) -> Decision {
    Decision::deny(
        "protected-key",
        true,
        format!(
            "This changes {} in `intent/{id}/iced.md`: protected fields that only iced's verbs and the person set.",
            list(keys)
        ),
        frontmatter_next(own),
    )
}

fn escalate(id: &str, own: Option<&str>, what: &str) -> String {
    match own {
        Some(_) => format!("keep {what} as signed off; if the contract cannot be met as written, {HANDBACK}"),
        None => format!("keep {what} as signed off; if they are wrong, write the change you propose and why in `intent/{id}/decisions.md` and ask the person"),
    }
}

pub fn frozen(id: &str, status: &str, keys: &[&str], own: Option<&str>) -> Decision {
    Decision::deny(
        "frozen-key",
        true,
        format!(
            "`{id}` is signed off ({status}), and this changes {}: they choose its lenses, its autonomy and its lanes.",
            list(keys)
        ),
        escalate(id, own, &list(keys)),
    )
}

pub fn no_hash(id: &str, status: &str) -> Decision {
    Decision::deny(
        "contract-frozen",
        true,
        format!("`{id}` is {status} but has no `contract_hash`, so no change can be checked against its contract."),
        format!("ask the person to look at the unit (`iced lint {id}`)"),
    )
}

/// Which hashed sections differ: `Intent`, `Expectations`, or both.
pub fn changed_sections(before: &str, after: &str) -> String {
    fn split(text: &str) -> (String, String) {
        let material = contract_material(text);
        match material.split_once("\n## expectations\n") {
            Some((intent, expectations)) => (intent.to_owned(), expectations.to_owned()),
            None => (material, String::new()),
        }
    }
    let (bi, be) = split(before);
    let (ai, ae) = split(after);
    match (bi != ai, be != ae) {
        (true, true) => "its Intent and its Expectations".into(),
        (true, false) => "its Intent".into(),
        _ => "its Expectations".into(),
    }
}

pub fn contract(id: &str, status: &str, sections: &str, own: Option<&str>) -> Decision {
    Decision::deny(
        "contract-frozen",
        true,
        format!("`{id}` is signed off ({status}) and this changes {sections}, which must keep the contract hash it was approved with (Context and Open questions may change)."),
        escalate(id, own, "the Intent and the Expectations"),
    )
}

pub fn lint_errors(id: &str, report: &LintReport) -> Decision {
    let issues: Vec<String> = report
        .errors
        .iter()
        .map(|i| format!("{} ({})", i.code, i.message))
        .collect();
    Decision::deny(
        "contract-frozen",
        true,
        format!(
            "After this change `intent/{id}/iced.md` has lint errors at stage validate: {}.",
            issues.join("; ")
        ),
        format!("change it so that the unit still lints clean (`iced lint {id}`)"),
    )
}

pub fn decisions_append_only(id: &str) -> Decision {
    Decision::deny(
        "decisions-append-only",
        true,
        format!("`intent/{id}/decisions.md` is append-only, and this does not keep what it holds as its beginning."),
        "append your entry at the end, keeping every earlier line as it is".into(),
    )
}

pub fn other_unit(rel: &str, id: &str, own: &str) -> Decision {
    Decision::deny(
        "decisions-other-unit",
        true,
        format!("`{rel}` belongs to `{id}`, and this lane builds `{own}`."),
        format!("work on `{own}` only, and note what `{id}` needs in `intent/{own}/decisions.md`"),
    )
}

pub fn review(id: &str, what: &str) -> Decision {
    Decision::deny(
        "review-read-only",
        false,
        format!("`{id}` is a review unit: it reads the code and reports, and {what} would change the code."),
        format!("write your findings to `intent/{id}/review.md`"),
    )
}

pub fn no_active_unit(what: &str) -> Decision {
    Decision::deny(
        "code-frozen",
        false,
        format!("No unit is active, and this repository gates every code change (`gate: always`), so {what} waits for one."),
        "start one with `iced new \"<what you want>\"` and have it signed off, or ask the person to run `iced use <id>`".into(),
    )
}

pub fn autonomy_zero(id: &str, what: &str) -> Decision {
    Decision::new(
        Verdict::Ask,
        "autonomy-zero",
        false,
        format!("`{id}` is building at autonomy 0 (Assist): a person confirms each change, {what} included."),
        format!("wait for the person's answer; if they decline, record the change you wanted in `intent/{id}/decisions.md`"),
    )
}

/// A code change while the active unit is not building: denied at autonomy 0 and 1, a notice at 2
/// and 3.
pub fn code_frozen(id: &str, status: Option<Status>, autonomy: i64, what: &str) -> Decision {
    let shown = status.map_or("in an unknown status", Status::as_str);
    if autonomy >= 2 {
        return Decision::new(
            Verdict::Notify,
            "code-frozen",
            false,
            format!("The active unit `{id}` is {shown}; at effective autonomy {autonomy} {what} goes ahead, and verification checks it against the contract."),
            format!("note why in `intent/{id}/decisions.md`"),
        );
    }
    let next = match status {
        Some(Status::Draft) => format!("finish the draft and ask the person to sign it off with `iced approve {id}`"),
        Some(Status::Approved) => format!("ask the person to start the build with `iced build {id}`"),
        Some(Status::Verifying | Status::Done) => format!("wait for verification, or ask the person to accept with `iced accept {id}` or send it back with `iced reject {id}`"),
        Some(Status::Blocked) => format!("ask the person to resolve it: `iced build {id}` to retry, or `iced abandon {id}`"),
        _ => format!("ask the person what `{id}` needs (`iced status {id}`)"),
    };
    Decision::deny(
        "code-frozen",
        false,
        format!("The active unit `{id}` is {shown} at effective autonomy {autonomy}: code changes wait until it is building, and {what} would change code."),
        next,
    )
}

pub fn allowed(target: &Target) -> String {
    use super::Class::*;
    let rel = &target.rel;
    match &target.class {
        Outside => format!("`{rel}` is outside the repository."),
        Code => format!("`{rel}` may change now."),
        _ => format!("`{rel}` may change, and this change keeps every rule that guards it."),
    }
}
