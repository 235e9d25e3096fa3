//! What validators and the refuter answered (SPEC 22.3, 24.4, 24.5): read from the file an agent
//! wrote (a regular file, no link, at most 256 KiB), checked strictly against the unit's ids and
//! the findings asked about, and read back from the copy the loop kept. Never trusted otherwise.

use super::ctx::Ctx;
use super::keys::StepKey;
use super::state::Lane;
use super::validate::{self, Answer};
use crate::store::StoreError;
use serde_json::Value;
use std::path::Path;

/// Each validator's answer, read back from the copy the loop kept (SPEC 24.5); a copy that is
/// missing or changed is no answer.
pub fn answers(lane: &Lane, keys: &[StepKey]) -> Vec<(String, Option<Answer>)> {
    keys.iter()
        .map(|key| {
            let answer = super::kept::load_from::<Answer>(
                lane.record(key).and_then(|r| r.outcome.as_ref()),
                "answer",
            );
            (key.validator_name().unwrap_or("").to_owned(), answer)
        })
        .collect()
}

/// The ids a validator of `unit_text` may answer about (SPEC 24.4).
pub fn known_ids(ctx: &Ctx<'_>, unit_text: &str) -> validate::KnownIds {
    validate::KnownIds::of(
        &crate::unit::parse_unit(unit_text),
        &super::stage::brief::ancestor_ids(ctx.repo, unit_text),
    )
}

/// A validator's or the refuter's answer at `path`, checked strictly against the unit's ids and
/// the findings it was asked about (SPEC 24.4, 24.5), as the JSON the loop keeps.
pub fn read_answer(
    ctx: &Ctx<'_>,
    lane: &Lane,
    key: &StepKey,
    path: &Path,
) -> Result<Value, validate::AnswerProblem> {
    let problem = |code: &'static str, message: String| validate::AnswerProblem { code, message };
    // An agent wrote it: a link or anything but a regular file is refused as itself (SPEC 24.6).
    let bytes = match crate::store::read_no_follow(path, validate::OUTPUT_LIMIT) {
        Ok(b) => b,
        Err(e @ StoreError::Symlink(_)) => return Err(problem("path-symlink", e.to_string())),
        Err(e @ StoreError::NotRegular { .. }) => {
            return Err(problem("not-a-regular-file", e.to_string()))
        }
        Err(StoreError::TooLarge { limit, .. }) => {
            return Err(problem(
                "answer-too-large",
                format!("the answer is larger than {limit} bytes"),
            ))
        }
        Err(e) if e.is_not_found() => {
            return Err(problem("answer-missing", "no answer was written".into()))
        }
        Err(e) => return Err(problem("answer-invalid", e.to_string())),
    };
    let text = String::from_utf8_lossy(&bytes);
    if *key == StepKey::Refute {
        let asked: Vec<String> = lane
            .findings
            .iter()
            .filter(|f| f.round == lane.attempt && f.status == "open")
            .map(|f| f.id.clone())
            .collect();
        validate::parse_refutation(&text, &asked)
            .map(|a| serde_json::to_value(a).expect("serialises"))
    } else {
        let unit_text = crate::repo::read_text(&ctx.repo.unit_paths(&lane.unit).iced)
            .map_err(|e| problem("answer-invalid", format!("the unit cannot be read: {e:?}")))?;
        validate::parse_answer(&text, &known_ids(ctx, &unit_text))
            .map(|a| serde_json::to_value(a).expect("serialises"))
    }
}
