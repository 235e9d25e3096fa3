//! A person's answer to an implementer's escalation or questions (SPEC 20.7): show it, apply the
//! proposal (or the person's edit of it), reject it with guidance, answer a question. Each checks
//! everything before its first write, then writes in an order a killed call can repeat: the
//! decision entry (never twice), the unit (the same bytes again), the kept text, and last the state.
//! The lane stays blocked: the resume (`iced build`, `iced run resume`) is `control`'s.

use crate::refusal::Refusal;
use crate::run::ctx::Ctx;
use crate::run::escalation::{Escalation, EscalationStatus};
use crate::run::state::{Lane, Stage, State};
use crate::unit::proposal::{self, Change};
use crate::unit::{Edit, PROTECTED_KEYS};
use serde::Serialize;

/// Where an escalation is: its run and lane.
#[derive(Debug, Clone, Serialize)]
pub struct Place {
    pub unit: String,
    pub run: String,
    pub lane: String,
    pub attempt: u32,
}

/// `iced escalation show`: the escalation, and for a proposal what it would change.
#[derive(Debug, Clone, Serialize)]
pub struct Shown {
    #[serde(flatten)]
    pub place: Place,
    #[serde(flatten)]
    pub escalation: Escalation,
    pub changes: Vec<Change>,
    /// Why the proposal does not apply to the unit as it is.
    pub problem: Option<String>,
}

/// What `apply`, `edit` or `reject` did.
#[derive(Debug, Clone, Serialize)]
pub struct Resolved {
    #[serde(flatten)]
    pub place: Place,
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contract_hash: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<Change>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guidance: Option<String>,
}

/// What `answer` did.
#[derive(Debug, Clone, Serialize)]
pub struct Answered {
    #[serde(flatten)]
    pub place: Place,
    pub question: String,
    pub answer: String,
    pub status: &'static str,
}

/// How a person resolves an escalation.
pub enum Resolve {
    /// The agent's proposal as it is.
    Apply,
    /// The person's own contract lines.
    Edit(String),
    /// No, with guidance for the next attempt.
    Reject(String),
}

/// The lane of a live run building `unit` with an escalation, and the run's id.
fn lane_of<'s>(state: &'s mut State, unit: &str) -> Option<(String, &'s mut Lane)> {
    state
        .runs
        .values_mut()
        .filter(|r| !r.status.is_ended())
        .find_map(|r| {
            let id = r.id.clone();
            r.lanes
                .find_mut(|l| l.unit == unit && l.escalation.is_some())
                .map(|l| (id, l))
        })
}

fn none(ctx: &Ctx<'_>, unit: &str, what: &str) -> Refusal {
    ctx.refuse(
        "escalation-none",
        format!("no live run of `{unit}` has {what}"),
        format!("`iced run show` lists the runs; `iced status {unit}` says where the unit stands"),
    )
}

/// The open escalation of `unit` and where it is, or `escalation-none`.
fn open<'s>(
    ctx: &Ctx<'_>,
    state: &'s mut State,
    unit: &str,
) -> Result<(Place, &'s mut Lane), Refusal> {
    let Some((run, lane)) = lane_of(state, unit) else {
        return Err(none(ctx, unit, "an open escalation"));
    };
    let is_open = lane.stage == Stage::Blocked
        && lane
            .escalation
            .as_ref()
            .is_some_and(|e| e.is_open_at(lane.attempt));
    if !is_open {
        return Err(none(ctx, unit, "an open escalation"));
    }
    let place = Place {
        unit: unit.to_owned(),
        run,
        lane: lane.id.clone(),
        attempt: lane.attempt,
    };
    Ok((place, lane))
}

pub fn show(ctx: &Ctx<'_>, reference: &str) -> Result<Shown, Refusal> {
    let unit = ctx.repo.resolve(reference, ctx.verb)?;
    let mut state = State::load(&ctx.paths, ctx.verb)?;
    let Some((run, lane)) = lane_of(&mut state, &unit) else {
        return Err(none(ctx, &unit, "an escalation"));
    };
    let escalation = lane.escalation.clone().expect("found with one");
    let place = Place {
        unit: unit.clone(),
        run,
        lane: lane.id.clone(),
        attempt: escalation.attempt,
    };
    let (mut changes, mut problem) = (Vec::new(), None);
    if escalation.status == EscalationStatus::Open {
        if let Some(p) = &escalation.proposal {
            let text = ctx.repo.read_unit(&unit, ctx.verb)?.text;
            match proposal::apply(&text, p) {
                Ok(a) => changes = a.changes,
                Err(why) => problem = Some(why),
            }
        }
    }
    Ok(Shown {
        place,
        escalation,
        changes,
        problem,
    })
}

/// The decision entry's first line: the same words for the same escalation, so a repeated call
/// finds it and appends no second one.
fn decided(place: &Place, verb: &str, kind: &str) -> String {
    format!(
        "{verb} the {kind} escalation of run {}, lane {}, attempt {}",
        place.run, place.lane, place.attempt
    )
}

/// Append the person's decision entry to the unit's `decisions.md` unless it is there already,
/// and return the entry as the file holds it (from its heading to the next), so a replay after a
/// killed call finds the same entry it would have appended.
fn append_decision_once(
    ctx: &Ctx<'_>,
    unit: &str,
    decision: &str,
    why: &str,
    more: &[(&str, String)],
) -> Result<String, Refusal> {
    let path = ctx.repo.unit_paths(unit).decisions;
    let line = format!("- Decision: {decision}\n");
    let logged = crate::repo::read_text(&path)
        .map(|t| t.contains(&line))
        .unwrap_or(false);
    if !logged {
        let mut lines: Vec<(&str, &str)> = vec![("Decision", decision), ("Why", why)];
        lines.extend(more.iter().map(|(k, v)| (*k, v.as_str())));
        ctx.repo.append_decision(unit, "person", &lines, ctx.verb)?;
    }
    crate::failpoint::hit("escalation-after-decision");
    let text = crate::repo::read_text(&path).map_err(|e| e.refusal(ctx.verb))?;
    Ok(entry_of(&text, &line).unwrap_or_default())
}

/// The entry of `text` holding `line`: from the `## ` heading before it to the next heading.
fn entry_of(text: &str, line: &str) -> Option<String> {
    let at = text.find(line)?;
    let start = text[..at].rfind("\n## ")?;
    let end = text[at..].find("\n## ").map_or(text.len(), |n| at + n + 1);
    Some(text[start..end].to_owned())
}

/// The largest decision log kept beside a lane to be landed as the loop's own.
const DECISIONS_KEPT: usize = 256 * 1024;

/// What a person's escalation verbs left in the checkout for a lane (SPEC 20.7, 23.2): the unit
/// as the last of them wrote it, `decisions.md` as they left it, and their entries in it. The
/// delivery's close is made from it, and a landing by merge takes these files as the loop's own.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
pub struct LeftForLane {
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub decisions: Option<String>,
    #[serde(default)]
    pub entries: Vec<String>,
}

/// What the escalation verbs left for `lane`, if anything and intact; `Err` when the state names
/// a copy that is gone or changed.
pub fn left_for_lane(lane: &Lane) -> Result<Option<LeftForLane>, String> {
    let Some(kept) = lane.unit_text.as_ref() else {
        return Ok(None);
    };
    crate::run::kept::load(kept).map(Some).ok_or_else(|| {
        format!(
            "what the escalation verbs left for the lane (`{}`) is gone or changed",
            kept.path.display()
        )
    })
}

/// Keep what the verb left for the lane: the unit it wrote (if it wrote one), the decision log as
/// it is now and the verb's entry, over what earlier verbs of this lane left.
fn keep_left(
    ctx: &Ctx<'_>,
    place: &Place,
    lane: &mut Lane,
    text: Option<&str>,
    entry: String,
) -> Result<(), Refusal> {
    let mut left = left_for_lane(lane).ok().flatten().unwrap_or_default();
    if let Some(text) = text {
        left.text = Some(text.to_owned());
    }
    // A log too large to keep beside the lane is left for the person to commit (SPEC 23.2).
    let decisions = ctx.repo.unit_paths(&place.unit).decisions;
    left.decisions = crate::repo::read_text(&decisions)
        .ok()
        .filter(|d| d.len() <= DECISIONS_KEPT);
    if !entry.is_empty() && !left.entries.contains(&entry) {
        left.entries.push(entry);
    }
    let copy = ctx.lane_dir(&place.run, &place.lane).join("unit.json");
    let kept = crate::run::kept::keep(&copy, &left)
        .map_err(|e| crate::repo::store_refusal(ctx.verb, e))?;
    lane.unit_text = Some(kept);
    Ok(())
}

/// Write the unit and keep it for the lane (the delivery's close is made from it).
fn write_unit(
    ctx: &Ctx<'_>,
    place: &Place,
    lane: &mut Lane,
    text: &str,
    entry: String,
) -> Result<(), Refusal> {
    ctx.repo.write_unit(&place.unit, text, ctx.verb)?;
    crate::failpoint::hit("escalation-after-unit");
    keep_left(ctx, place, lane, Some(text), entry)
}

pub fn resolve(ctx: &Ctx<'_>, reference: &str, how: Resolve) -> Result<Resolved, Refusal> {
    let unit = ctx.repo.resolve(reference, ctx.verb)?;
    ctx.transact(|state| {
        let (place, lane) = open(ctx, state, &unit)?;
        let e = lane.escalation.clone().expect("open");
        if e.kind == "questions" {
            return Err(ctx.refuse(
                "escalation-kind",
                format!("the implementer of `{unit}` asked questions; they are answered, not applied or rejected"),
                format!("answer each with `iced answer {unit} <Q id> <text>` (`iced escalation show {unit}` lists them)"),
            ));
        }
        let (verb, lines) = match &how {
            Resolve::Reject(guidance) => {
                let decision = decided(&place, "rejected", &e.kind);
                let entry = append_decision_once(ctx, &unit, &decision, guidance, &[])?;
                keep_left(ctx, &place, lane, None, entry)?;
                let mut e = e;
                e.status = EscalationStatus::Rejected;
                e.guidance = Some(guidance.clone());
                lane.reason = Some(e.resolution());
                lane.escalation = Some(e);
                return Ok(Resolved {
                    place,
                    status: "rejected",
                    contract_hash: None,
                    changes: Vec::new(),
                    guidance: Some(guidance.clone()),
                });
            }
            Resolve::Apply => match &e.proposal {
                Some(p) => ("applied", p.clone()),
                None => {
                    return Err(ctx.refuse(
                        "proposal-none",
                        format!("the {} escalation of `{unit}` carries no proposal to apply", e.kind),
                        format!("write the contract lines yourself: `iced escalation edit {unit} --file <path>`, or `iced escalation reject {unit} <guidance>`"),
                    ))
                }
            },
            Resolve::Edit(lines) => ("edited", lines.clone()),
        };
        let file = ctx.repo.read_unit(&unit, ctx.verb)?;
        let recorded = file.parsed.frontmatter.str("contract_hash").unwrap_or("");
        if recorded != crate::unit::contract_hash(&file.text) {
            return Err(ctx.refuse(
                "contract-changed",
                format!("the contract of `{unit}` no longer matches its contract_hash: it was edited since it was approved"),
                format!("restore the approved text (`git diff intent/{unit}/iced.md`), then apply again"),
            ));
        }
        let applied = proposal::apply(&file.text, &lines).map_err(|why| {
            ctx.refuse(
                "proposal-invalid",
                format!("the proposal does not apply to `{unit}`: {why}"),
                format!("write the contract lines yourself: `iced escalation edit {unit} --file <path>`, or `iced escalation reject {unit} <guidance>`"),
            )
        })?;
        let hash = crate::unit::contract_hash(&applied.text);
        let text = crate::unit::frontmatter::apply(
            &applied.text,
            &[Edit::set("contract_hash", hash.as_str())],
        );
        let before = crate::unit::frontmatter::parse(&file.text);
        let after = crate::unit::frontmatter::parse(&text);
        if let Some(key) = PROTECTED_KEYS
            .iter()
            .filter(|k| **k != "contract_hash")
            .find(|k| before.data.get(k) != after.data.get(k))
        {
            return Err(ctx.refuse(
                "proposal-invalid",
                format!("the proposal would change `{key}` of `{unit}`, a protected key"),
                format!("write the contract lines yourself: `iced escalation edit {unit} --file <path>`"),
            ));
        }
        let decision = decided(&place, verb, &e.kind);
        let changed: Vec<(&str, String)> = applied
            .changes
            .iter()
            .map(|c| {
                (
                    "Change",
                    format!(
                        "{}: was `{}`, becomes `{}`",
                        c.id,
                        c.was.as_deref().unwrap_or("(absent)"),
                        c.becomes.as_deref().unwrap_or("(removed)")
                    ),
                )
            })
            .collect();
        let entry = append_decision_once(ctx, &unit, &decision, &e.message, &changed)?;
        write_unit(ctx, &place, lane, &text, entry)?;
        let mut e = e;
        e.status = EscalationStatus::Applied;
        e.contract_hash = Some(hash.clone());
        lane.reason = Some(e.resolution());
        lane.escalation = Some(e);
        Ok(Resolved {
            place,
            status: "applied",
            contract_hash: Some(hash),
            changes: applied.changes,
            guidance: None,
        })
    })
}

pub fn answer(
    ctx: &Ctx<'_>,
    reference: &str,
    question: &str,
    text: &str,
) -> Result<Answered, Refusal> {
    let unit = ctx.repo.resolve(reference, ctx.verb)?;
    let id = question.trim().to_ascii_uppercase();
    ctx.transact(|state| {
        let (place, lane) = open(ctx, state, &unit)?;
        let mut e = lane.escalation.clone().expect("open");
        if e.kind != "questions" {
            return Err(ctx.refuse(
                "escalation-kind",
                format!("the {} of `{unit}` escalated ({}); it asked no question", e.by(), e.kind),
                format!("read it with `iced escalation show {unit}`, then `iced escalation apply {unit}`, `iced escalation edit {unit} --file <path>` or `iced escalation reject {unit} <guidance>`"),
            ));
        }
        let ids: Vec<String> = e.questions.iter().map(|q| q.id.clone()).collect();
        let Some(asked) = e.questions.iter_mut().find(|q| q.id == id) else {
            return Err(ctx.refuse(
                "question-unknown",
                format!("the open questions of `{unit}` are {}, not `{}`", ids.join(", "), question.chars().take(40).collect::<String>()),
                format!("answer one of them: `iced answer {unit} {} <text>`", ids.first().map_or("Q1", String::as_str)),
            ));
        };
        let file = ctx.repo.read_unit(&unit, ctx.verb)?;
        let written = proposal::set_question(&file.text, &id, &asked.text, text).map_err(|why| {
            ctx.refuse(
                "question-unknown",
                format!("the answer cannot be written into `{unit}`: {why}"),
                "answer in plain words, without `<!--` or `-->`",
            )
        })?;
        asked.answer = Some(text.to_owned());
        write_unit(ctx, &place, lane, &written, String::new())?;
        if e.questions.iter().all(|q| q.answer.is_some()) {
            e.status = EscalationStatus::Answered;
            lane.reason = Some(e.resolution());
        }
        let status = e.status.as_str();
        lane.escalation = Some(e);
        Ok(Answered {
            place,
            question: id.clone(),
            answer: text.to_owned(),
            status,
        })
    })
}
