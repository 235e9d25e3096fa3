//! Independent validation: which validators look at a lane, what each is told, what each may answer,
//! and how the answers become one verdict. Pure where it can be: prompts render from values, outputs
//! are parsed from bytes, merging and minting are functions of what validators said. Only the loop
//! writes a verdict or gives a finding its id; a validator's answer carrying either is refused.
//!
//! Validators work in their own detached worktree (a sandbox per validator), fingerprinted before
//! and after, so a validator that writes, commits or switches branch is caught and its answer
//! discarded, and a validator running beside it is never blamed.

use crate::unit::{ParsedUnit, Risk, Tier};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;
use std::str::FromStr;

pub const LENSES: &[&str] = &["expectations", "failures", "rules", "full"];
pub const REVIEWERS: &[&str] = &["ruthless", "security", "fidelity"];
/// An answer (a validator's, the refuter's) is at most 256 KiB (SPEC 24.5).
pub const OUTPUT_LIMIT: u64 = 256 * 1024;
/// A finding's text fields, a judged item's evidence and a refutation's reason: at most this many
/// characters each; an answer at most `MAX_FINDINGS` findings (SPEC 24.5). What the state keeps of
/// an answer (its findings) stays small whatever an agent writes.
pub const MAX_TEXT: usize = 2_000;
pub const MAX_FINDINGS: usize = 50;

pub const CATEGORIES: &[&str] = &[
    "correctness",
    "security",
    "a11y",
    "performance",
    "visual-design",
    "behavioral-drift",
    "test-coverage",
    "over-engineering",
    "maintainability",
];
pub const SEVERITIES: &[&str] = &["S1-stop-the-line", "S2-major", "S3-minor", "S4-nit"];

/// Fields only the loop writes on a finding (or anywhere in an answer).
const IDENTITY: &[&str] = &[
    "finding_id",
    "found_by",
    "found_by_provider",
    "task_id",
    "fingerprint",
    "finding_status",
    "finding_scope",
    "id",
];

/// The lenses `auto` picks: three focused ones for a bigger or riskier unit, one `full` otherwise.
pub fn auto_lenses(parsed: &ParsedUnit) -> Vec<String> {
    let fm = &parsed.frontmatter;
    let tier = fm.str("tier").and_then(|t| Tier::from_str(t).ok());
    let risk = fm.str("risk").and_then(|r| Risk::from_str(r).ok());
    if matches!(tier, Some(Tier::M | Tier::L | Tier::Xl)) || risk == Some(Risk::High) {
        vec!["expectations".into(), "failures".into(), "rules".into()]
    } else {
        vec!["full".into()]
    }
}

/// What each validator is asked to look at.
pub fn focus(name: &str) -> &'static str {
    match name {
        "expectations" => "Judge every expectation (E items): does the delivered work meet it, as its verify ref says it would be checked? Answer `expectations` for every E item.",
        "failures" => "Try to trigger every failure condition (F items) against the delivered work. Answer `failures` for every F item.",
        "rules" => "Check every constraint (C items) and every inherited rule of an ancestor unit, and that nothing changed outside the unit's Scope. Answer `constraints` for every C item and list out-of-scope paths.",
        "full" => "Judge the whole contract: every expectation, every failure condition, every constraint and inherited rule, and the scope.",
        "ruthless" => "Read the diff of the delivered range as a hostile reviewer: defects, missing tests, edge cases the expectations imply, code that will not survive contact. Report findings; judge the contract items you can.",
        "security" => "Review the delivered range at every trust boundary it touches: input handling, authorisation, secrets, injection, unsafe file or process use. Report findings.",
        "fidelity" => "Compare the delivered range with the contract, clause by clause: is every expectation delivered as written, nothing more and nothing else? Report findings for drift in either direction.",
        _ => "Judge the contract.",
    }
}

// ------------------------------------------------------------------------------------------------
// Validator answers
// ------------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Judged {
    pub id: String,
    pub result: String,
    #[serde(default)]
    pub evidence: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Triggered {
    pub id: String,
    pub triggered: bool,
    #[serde(default)]
    pub evidence: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Violated {
    pub id: String,
    pub violated: bool,
    #[serde(default)]
    pub evidence: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub inputs: String,
    pub expected: String,
    pub actual: String,
}

/// A finding as a validator reports it: evidence, without identity.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Evidence {
    pub file_path: String,
    pub criterion_ref: String,
    pub finding_category: String,
    pub severity: String,
    pub summary: String,
    pub failure_scenario: Scenario,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Answer {
    pub verdict: String,
    #[serde(default)]
    pub expectations: Vec<Judged>,
    #[serde(default)]
    pub failures: Vec<Triggered>,
    #[serde(default)]
    pub constraints: Vec<Violated>,
    #[serde(default)]
    pub findings: Vec<Evidence>,
    #[serde(default)]
    pub out_of_scope: Vec<String>,
    #[serde(default)]
    pub notes: String,
}

/// Why an answer was refused, naming the field.
#[derive(Debug, Clone, PartialEq)]
pub struct AnswerProblem {
    pub code: &'static str,
    pub message: String,
}

fn problem(code: &'static str, message: impl Into<String>) -> AnswerProblem {
    AnswerProblem {
        code,
        message: message.into(),
    }
}

/// The JSON of an answer: the whole text, or the last fenced ```json block in it (a harness's
/// final message).
fn answer_json(text: &str) -> Option<Value> {
    if let Ok(v) = serde_json::from_str::<Value>(text.trim()) {
        return Some(v);
    }
    let mut last = None;
    let mut rest = text;
    while let Some(open) = rest.find("```json") {
        let body = &rest[open + 7..];
        let Some(close) = body.find("```") else { break };
        if let Ok(v) = serde_json::from_str::<Value>(body[..close].trim()) {
            last = Some(v);
        }
        rest = &body[close + 3..];
    }
    last
}

/// Check a validator's answer strictly. `answer-unparsable` means no JSON could be read at all
/// (the lens then needs a person); every other code names the field that is wrong.
pub fn parse_answer(text: &str, known: &KnownIds) -> Result<Answer, AnswerProblem> {
    let value = answer_json(text).ok_or_else(|| {
        problem(
            "answer-unparsable",
            "no JSON object could be read from the answer",
        )
    })?;
    let Value::Object(map) = &value else {
        return Err(problem("answer-invalid", "the answer is not a JSON object"));
    };
    for key in map.keys() {
        if IDENTITY.contains(&key.as_str()) {
            return Err(problem(
                "answer-forged",
                format!("carries `{key}`, which only the loop writes"),
            ));
        }
    }
    for (i, f) in map
        .get("findings")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let Some(obj) = f.as_object() else {
            return Err(problem(
                "answer-invalid",
                format!("findings[{i}] is not an object"),
            ));
        };
        for key in obj.keys() {
            if IDENTITY.contains(&key.as_str()) {
                return Err(problem(
                    "answer-forged",
                    format!("findings[{i}] carries `{key}`: the loop mints finding identities"),
                ));
            }
        }
        match obj.get("severity").and_then(Value::as_str) {
            Some(s) if SEVERITIES.contains(&s) => {}
            Some(s) => {
                return Err(problem(
                    "answer-invalid",
                    format!(
                        "findings[{i}].severity is `{s}`; write it in full: {}",
                        SEVERITIES.join(", ")
                    ),
                ))
            }
            None => {
                return Err(problem(
                    "answer-invalid",
                    format!("findings[{i}].severity is missing"),
                ))
            }
        }
        match obj.get("finding_category").and_then(Value::as_str) {
            Some(c) if CATEGORIES.contains(&c) => {}
            Some(c) => {
                return Err(problem(
                    "answer-invalid",
                    format!(
                        "findings[{i}].finding_category is `{c}`, not one of {}",
                        CATEGORIES.join(", ")
                    ),
                ))
            }
            None => {
                return Err(problem(
                    "answer-invalid",
                    format!("findings[{i}].finding_category is missing"),
                ))
            }
        }
        match obj.get("failure_scenario") {
            Some(Value::Object(s)) if ["inputs", "expected", "actual"].iter().all(|k| s.get(*k).and_then(Value::as_str).is_some_and(|v| !v.trim().is_empty())) => {}
            Some(_) => return Err(problem("answer-invalid", format!("findings[{i}].failure_scenario needs `inputs`, `expected` and `actual`, each a non-empty string"))),
            None => return Err(problem("answer-invalid", format!("findings[{i}] has no failure_scenario: a finding names what goes wrong"))),
        }
    }
    let answer: Answer =
        serde_json::from_value(value).map_err(|e| problem("answer-invalid", e.to_string()))?;
    if !matches!(answer.verdict.as_str(), "pass" | "fail") {
        return Err(problem(
            "answer-invalid",
            format!("`verdict` is `{}`, not pass or fail", answer.verdict),
        ));
    }
    for e in &answer.expectations {
        if !matches!(e.result.as_str(), "pass" | "fail" | "unknown") {
            return Err(problem(
                "answer-invalid",
                format!(
                    "expectations `{}`: result is `{}`, not pass, fail or unknown",
                    e.id, e.result
                ),
            ));
        }
    }
    known.check(&answer)?;
    check_lengths(&answer)?;
    Ok(answer)
}

/// The contract ids a validator may answer about: the unit's expectations, its failure conditions
/// and constraints, and its ancestors' (`<ancestor>:<id>`, as the prompt names them).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KnownIds {
    pub expectations: Vec<String>,
    pub failures: Vec<String>,
    pub constraints: Vec<String>,
}

impl KnownIds {
    /// The unit's own ids, and the ancestors' failure conditions and constraints (`ancestors`
    /// lists ids already written `<ancestor>:<id>`).
    pub fn of(unit: &ParsedUnit, ancestors: &[String]) -> KnownIds {
        let ids = |items: &[crate::unit::parse::Item]| {
            items.iter().map(|i| i.id.clone()).collect::<Vec<_>>()
        };
        let mut failures = ids(&unit.failures);
        let mut constraints = ids(&unit.constraints);
        for a in ancestors {
            let item = a.rsplit(':').next().unwrap_or("");
            if item.starts_with('F') {
                failures.push(a.clone());
            } else if item.starts_with('C') {
                constraints.push(a.clone());
            }
        }
        KnownIds {
            expectations: ids(&unit.expectations),
            failures,
            constraints,
        }
    }

    /// An answer about an item the unit does not have is refused, naming it (SPEC 24.4).
    fn check(&self, answer: &Answer) -> Result<(), AnswerProblem> {
        let unknown = |field: &str, id: &str, known: &[String]| {
            problem(
                "answer-invalid",
                format!(
                    "{field} names `{id}`, which the unit does not have (it has {})",
                    if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    }
                ),
            )
        };
        for e in &answer.expectations {
            if !self.expectations.contains(&e.id) {
                return Err(unknown("expectations", &e.id, &self.expectations));
            }
        }
        for f in &answer.failures {
            if !self.failures.contains(&f.id) {
                return Err(unknown("failures", &f.id, &self.failures));
            }
        }
        for c in &answer.constraints {
            if !self.constraints.contains(&c.id) {
                return Err(unknown("constraints", &c.id, &self.constraints));
            }
        }
        Ok(())
    }
}

/// A text field over [`MAX_TEXT`] characters, named.
fn too_long(field: String, text: &str) -> Result<(), AnswerProblem> {
    let n = text.chars().count();
    if n > MAX_TEXT {
        return Err(problem(
            "answer-invalid",
            format!("{field} is {n} characters; at most {MAX_TEXT} are taken"),
        ));
    }
    Ok(())
}

fn check_lengths(answer: &Answer) -> Result<(), AnswerProblem> {
    if answer.findings.len() > MAX_FINDINGS {
        return Err(problem(
            "answer-invalid",
            format!(
                "the answer has {} findings; at most {MAX_FINDINGS} are taken: keep the ones that matter most",
                answer.findings.len()
            ),
        ));
    }
    for (i, f) in answer.findings.iter().enumerate() {
        for (name, text) in [
            ("file_path", &f.file_path),
            ("criterion_ref", &f.criterion_ref),
            ("summary", &f.summary),
            ("failure_scenario.inputs", &f.failure_scenario.inputs),
            ("failure_scenario.expected", &f.failure_scenario.expected),
            ("failure_scenario.actual", &f.failure_scenario.actual),
        ] {
            too_long(format!("findings[{i}].{name}"), text)?;
        }
    }
    for e in &answer.expectations {
        too_long(format!("expectations `{}`.evidence", e.id), &e.evidence)?;
    }
    for f in &answer.failures {
        too_long(format!("failures `{}`.evidence", f.id), &f.evidence)?;
    }
    for c in &answer.constraints {
        too_long(format!("constraints `{}`.evidence", c.id), &c.evidence)?;
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------------
// Refutation
// ------------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Refutation {
    pub finding_id: String,
    pub decision: String,
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_scenario: Option<Scenario>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RefuteAnswer {
    pub findings: Vec<Refutation>,
}

/// Check the refuter's answer strictly: each `finding_id` one it was asked about (`asked`), each
/// decision `confirmed` or `refuted` with a reason, and a confirmation with a complete failure
/// scenario: a finding stays open on a concrete case, never on a word (SPEC 24.4).
pub fn parse_refutation(text: &str, asked: &[String]) -> Result<RefuteAnswer, AnswerProblem> {
    let value = answer_json(text).ok_or_else(|| {
        problem(
            "answer-unparsable",
            "no JSON object could be read from the answer",
        )
    })?;
    let answer: RefuteAnswer =
        serde_json::from_value(value).map_err(|e| problem("answer-invalid", e.to_string()))?;
    for r in &answer.findings {
        if !matches!(r.decision.as_str(), "confirmed" | "refuted") {
            return Err(problem(
                "answer-invalid",
                format!(
                    "`{}`: decision is `{}`, not confirmed or refuted",
                    r.finding_id, r.decision
                ),
            ));
        }
        if r.reason.trim().is_empty() {
            return Err(problem(
                "answer-invalid",
                format!("`{}`: the reason is empty", r.finding_id),
            ));
        }
        if !asked.contains(&r.finding_id) {
            return Err(problem(
                "answer-invalid",
                format!(
                    "`{}` is not a finding this refuter was asked about ({})",
                    r.finding_id,
                    asked.join(", ")
                ),
            ));
        }
        too_long(format!("`{}`.reason", r.finding_id), &r.reason)?;
        let complete = |s: &Scenario| {
            [&s.inputs, &s.expected, &s.actual]
                .iter()
                .all(|v| !v.trim().is_empty())
        };
        match (&r.failure_scenario, r.decision.as_str()) {
            (Some(s), "confirmed") if complete(s) => {}
            (_, "confirmed") => {
                return Err(problem(
                    "answer-invalid",
                    format!("`{}` is confirmed without a complete failure_scenario: give `inputs`, `expected` and `actual`, each a non-empty string", r.finding_id),
                ))
            }
            _ => {}
        }
        if let Some(s) = &r.failure_scenario {
            for (name, text) in [
                ("inputs", &s.inputs),
                ("expected", &s.expected),
                ("actual", &s.actual),
            ] {
                too_long(format!("`{}`.failure_scenario.{name}", r.finding_id), text)?;
            }
        }
    }
    Ok(answer)
}

// ------------------------------------------------------------------------------------------------
// Findings and the verdict
// ------------------------------------------------------------------------------------------------

/// A finding the loop minted: the validator's evidence, an id, and what became of it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Finding {
    pub id: String,
    /// The validator that reported it (a lens or reviewer name).
    pub by: String,
    /// The attempt (validation round) it was found in.
    pub round: u32,
    pub evidence: Evidence,
    /// `open` (blocking, not yet disposed), `refuted`, `applied`, `rejected`, or `noted` (S3/S4).
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refutation: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disposition: Option<Value>,
    /// The lane head it was found on (the verdict's): a fix that applies it is a later commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<String>,
}

impl Finding {
    pub fn is_blocking(&self) -> bool {
        matches!(
            self.evidence.severity.as_str(),
            "S1-stop-the-line" | "S2-major"
        )
    }
}

/// What every validator of a round said, merged by seed 000's rule.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub struct Merged {
    pub expectations: BTreeMap<String, String>,
    pub failures: BTreeMap<String, bool>,
    pub constraints: BTreeMap<String, bool>,
    pub out_of_scope: Vec<String>,
    /// Validators with no usable answer.
    pub unanswered: Vec<String>,
    pub needs_human: bool,
}

/// Merge: any fail, trigger, violation or out-of-scope path wins; pass outranks unknown; a lens
/// without an answer needs a person. Paths of ICED's own records are never out of scope.
pub fn merge(unit: &ParsedUnit, answers: &[(String, Option<Answer>)]) -> Merged {
    let mut m = Merged::default();
    for e in &unit.expectations {
        m.expectations.insert(e.id.clone(), "unknown".into());
    }
    for f in &unit.failures {
        m.failures.insert(f.id.clone(), false);
    }
    for c in &unit.constraints {
        m.constraints.insert(c.id.clone(), false);
    }
    for (name, answer) in answers {
        let Some(a) = answer else {
            m.unanswered.push(name.clone());
            m.needs_human = true;
            continue;
        };
        for e in &a.expectations {
            let slot = m
                .expectations
                .entry(e.id.clone())
                .or_insert_with(|| "unknown".into());
            let ranked = |r: &str| match r {
                "fail" => 2,
                "pass" => 1,
                _ => 0,
            };
            if ranked(&e.result) > ranked(slot) {
                *slot = e.result.clone();
            }
        }
        for f in &a.failures {
            *m.failures.entry(f.id.clone()).or_default() |= f.triggered;
        }
        for c in &a.constraints {
            *m.constraints.entry(c.id.clone()).or_default() |= c.violated;
        }
        for p in &a.out_of_scope {
            let own = p.starts_with("intent/") || p.starts_with(".iced/");
            if !own && !m.out_of_scope.contains(p) {
                m.out_of_scope.push(p.clone());
            }
        }
    }
    m
}

/// The expectations a person must judge (`manual`), which stay `unknown` without blocking.
pub fn manual_expectations(unit: &ParsedUnit) -> Vec<String> {
    unit.expectations
        .iter()
        .filter(|e| e.verify.as_ref().is_some_and(|v| v.kind == "manual"))
        .map(|e| e.id.clone())
        .collect()
}

/// Evidence for every failing contract item no finding already names, so that each failure a
/// validator reports reaches the fix round as a finding with an id.
pub fn contract_findings(
    unit: &ParsedUnit,
    merged: &Merged,
    answers: &[(String, Option<Answer>)],
) -> Vec<(String, Evidence)> {
    let named: Vec<&str> = answers
        .iter()
        .filter_map(|(_, a)| a.as_ref())
        .flat_map(|a| a.findings.iter().map(|f| f.criterion_ref.as_str()))
        .collect();
    let said = |id: &str, pick: &dyn Fn(&Answer) -> Option<String>| -> (String, String) {
        answers
            .iter()
            .find_map(|(n, a)| a.as_ref().and_then(|a| pick(a).map(|ev| (n.clone(), ev))))
            .unwrap_or_else(|| ("validators".into(), format!("{id} fails")))
    };
    let text_of = |id: &str| {
        unit.items()
            .find(|i| i.id == id)
            .map(|i| i.text.clone())
            .unwrap_or_default()
    };
    let mut out = Vec::new();
    let mut add = |id: &str, by: String, evidence: String, severity: &str| {
        if named.contains(&id) {
            return;
        }
        out.push((
            by,
            Evidence {
                file_path: String::new(),
                criterion_ref: id.to_owned(),
                finding_category: "correctness".into(),
                severity: severity.into(),
                summary: format!("{id} is not met: {}", evidence.lines().next().unwrap_or("")),
                failure_scenario: Scenario {
                    inputs: format!("the delivered work, checked against {id}"),
                    expected: text_of(id),
                    actual: evidence,
                },
            },
        ));
    };
    for (id, result) in &merged.expectations {
        if result == "fail" {
            let (by, ev) = said(id, &|a| {
                a.expectations
                    .iter()
                    .find(|e| &e.id == id && e.result == "fail")
                    .map(|e| e.evidence.clone())
            });
            add(id, by, ev, "S2-major");
        }
    }
    for (id, triggered) in &merged.failures {
        if *triggered {
            let (by, ev) = said(id, &|a| {
                a.failures
                    .iter()
                    .find(|f| &f.id == id && f.triggered)
                    .map(|f| f.evidence.clone())
            });
            add(id, by, ev, "S1-stop-the-line");
        }
    }
    for (id, violated) in &merged.constraints {
        if *violated {
            let (by, ev) = said(id, &|a| {
                a.constraints
                    .iter()
                    .find(|c| &c.id == id && c.violated)
                    .map(|c| c.evidence.clone())
            });
            add(id, by, ev, "S1-stop-the-line");
        }
    }
    let named_files: Vec<&str> = answers
        .iter()
        .filter_map(|(_, a)| a.as_ref())
        .flat_map(|a| a.findings.iter().map(|f| f.file_path.as_str()))
        .collect();
    for path in &merged.out_of_scope {
        if named_files.contains(&path.as_str()) {
            continue;
        }
        let by = answers
            .iter()
            .find(|(_, a)| a.as_ref().is_some_and(|a| a.out_of_scope.contains(path)))
            .map_or_else(|| "validators".to_owned(), |(n, _)| n.clone());
        out.push((
            by,
            Evidence {
                file_path: path.clone(),
                criterion_ref: "Scope".into(),
                finding_category: "behavioral-drift".into(),
                severity: "S2-major".into(),
                summary: format!("`{path}` changed, outside the unit's Scope"),
                failure_scenario: Scenario {
                    inputs: format!("the delivered range's change to `{path}`"),
                    expected: "changes only within the Scope's In list".into(),
                    actual: format!("`{path}` changed"),
                },
            },
        ));
    }
    out
}

// ------------------------------------------------------------------------------------------------
// Fingerprints
// ------------------------------------------------------------------------------------------------

/// What a validator could change: its worktree's HEAD and branch, the content of every dirty or
/// untracked file there, the lane branch itself, and the dirty or untracked files of the lane's
/// own worktree (which nobody else writes while the lane is validated).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Fingerprint {
    pub head: String,
    pub branch: Option<String>,
    pub lane_branch_head: String,
    pub dirty: BTreeMap<String, String>,
    #[serde(default)]
    pub lane_dirty: BTreeMap<String, String>,
}

/// Every dirty or untracked file of a worktree, by the hash of its content.
fn dirty_files(worktree: &Path) -> Result<BTreeMap<String, String>, String> {
    let status = crate::git::run(
        worktree,
        &["status", "--porcelain=v1", "-z", "--untracked-files=all"],
    )?;
    let mut dirty = BTreeMap::new();
    for entry in status.split('\0').filter(|e| e.len() > 3) {
        let path = &entry[3..];
        let hash = content_hash(&worktree.join(path));
        dirty.insert(path.to_owned(), hash);
    }
    Ok(dirty)
}

/// What a dirty file holds, as the fingerprint compares it: the sha256 of a regular file's bytes,
/// a link's target (never followed: a validator must not point the loop at a FIFO elsewhere), or
/// what it is when it is neither. Opening never blocks, and the bytes are hashed as they stream,
/// never held whole (SPEC 24.6). The planners' fingerprint of the checkout uses it too.
pub(crate) fn content_hash(path: &Path) -> String {
    use sha2::{Digest, Sha256};
    let hex = |digest: &[u8]| {
        digest
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };
    match crate::store::open_regular(path, crate::store::Links::Refuse) {
        Ok(mut file) => {
            let mut hasher = Sha256::new();
            match std::io::copy(&mut file, &mut hasher) {
                Ok(_) => hex(&hasher.finalize()),
                Err(_) => "unreadable".to_owned(),
            }
        }
        Err(crate::store::StoreError::Symlink(_)) => match std::fs::read_link(path) {
            Ok(target) => format!("link:{}", target.display()),
            Err(_) => "unreadable".to_owned(),
        },
        Err(crate::store::StoreError::NotRegular { kind, .. }) => format!("special:{kind}"),
        Err(e) if e.is_not_found() => "missing".to_owned(),
        Err(_) => "unreadable".to_owned(),
    }
}

pub fn fingerprint(
    worktree: &Path,
    lane_root: &Path,
    lane_branch: &str,
    lane_worktree: Option<&Path>,
) -> Result<Fingerprint, String> {
    let head = crate::git::run(worktree, &["rev-parse", "HEAD"])?;
    let branch = crate::git::current_branch(worktree);
    let lane_branch_head = crate::git::run(
        lane_root,
        &["rev-parse", &format!("refs/heads/{lane_branch}")],
    )?;
    Ok(Fingerprint {
        head,
        branch,
        lane_branch_head,
        dirty: dirty_files(worktree)?,
        lane_dirty: match lane_worktree.filter(|w| w.exists()) {
            Some(w) => dirty_files(w)?,
            None => BTreeMap::new(),
        },
    })
}

/// What moved between two fingerprints, in words; empty when nothing did.
pub fn moved(before: &Fingerprint, after: &Fingerprint) -> Vec<String> {
    let mut out = Vec::new();
    if before.lane_branch_head != after.lane_branch_head {
        out.push(format!(
            "the lane branch moved from {} to {}",
            short(&before.lane_branch_head),
            short(&after.lane_branch_head)
        ));
    }
    let lane_files: Vec<&String> = after
        .lane_dirty
        .iter()
        .filter(|(p, h)| before.lane_dirty.get(*p) != Some(*h))
        .map(|(p, _)| p)
        .chain(
            before
                .lane_dirty
                .keys()
                .filter(|p| !after.lane_dirty.contains_key(*p)),
        )
        .collect();
    if !lane_files.is_empty() {
        out.push(format!(
            "the lane's worktree changed: {}",
            lane_files
                .iter()
                .map(|f| f.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if before.head != after.head {
        out.push(format!(
            "HEAD moved from {} to {} (a commit or a checkout)",
            short(&before.head),
            short(&after.head)
        ));
    }
    if before.branch != after.branch {
        out.push(format!(
            "the branch changed from {} to {}",
            before.branch.as_deref().unwrap_or("a detached HEAD"),
            after.branch.as_deref().unwrap_or("a detached HEAD")
        ));
    }
    let mut files: Vec<&String> = Vec::new();
    for (path, hash) in &after.dirty {
        if before.dirty.get(path) != Some(hash) {
            files.push(path);
        }
    }
    for path in before.dirty.keys() {
        if !after.dirty.contains_key(path) {
            files.push(path);
        }
    }
    if !files.is_empty() {
        out.push(format!(
            "files changed: {}",
            files
                .iter()
                .map(|f| f.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    out
}

fn short(commit: &str) -> &str {
    &commit[..commit.len().min(12)]
}

// ------------------------------------------------------------------------------------------------
// Prompts
// ------------------------------------------------------------------------------------------------

pub const RUBRIC: &str = include_str!("../../spec/rubric.md");

pub struct PromptInput<'a> {
    pub name: &'a str,
    pub role: &'a str,
    pub unit: &'a str,
    pub unit_text: &'a str,
    pub ancestor_rules: &'a str,
    pub report: &'a Value,
    pub commands: &'a Value,
    pub changed_files: &'a [String],
    pub base: &'a str,
    pub head: &'a str,
    pub worktree: &'a Path,
    pub output: &'a Path,
    pub rejected: &'a [Finding],
    pub to_refute: &'a [Finding],
}

/// For an agent that cannot write files: where its answer goes instead (SPEC 20.8).
const ONLY_BLOCK: &str = "If you cannot write that file (you may only read), end your final \
message with the object as its only ```json block instead.";

pub fn render_prompt(p: &PromptInput<'_>) -> String {
    let mut b = String::new();
    if p.role == "refuter" {
        let _ = writeln!(b, "# Refute or confirm: findings against {}\n", p.unit);
        let _ = writeln!(b, "You did not find these. For each, try to show it is wrong: read the code in the worktree (`{}`, read only: do not write, commit or check out anything). Confirm it only when you can state a concrete failure scenario; refute it when the finder missed something, and say what.\n", p.worktree.display());
        for f in p.to_refute {
            let _ = writeln!(b, "## {} ({}, {}, by {})\n\n- file: `{}`\n- criterion: {}\n- summary: {}\n- inputs: {}\n- expected: {}\n- actual: {}\n", f.id, f.evidence.severity, f.evidence.finding_category, f.by, f.evidence.file_path, f.evidence.criterion_ref, f.evidence.summary, f.evidence.failure_scenario.inputs, f.evidence.failure_scenario.expected, f.evidence.failure_scenario.actual);
        }
        let _ = writeln!(
            b,
            "## The unit\n\n````markdown\n{}\n````\n",
            p.unit_text.trim_end()
        );
        let _ = writeln!(b, "## Your answer\n\nWrite one JSON object to `{}`:\n\n```json\n{{\"findings\": [{{\"finding_id\": \"<id above>\", \"decision\": \"confirmed|refuted\", \"reason\": \"...\", \"failure_scenario\": {{\"inputs\": \"...\", \"expected\": \"...\", \"actual\": \"...\"}}}}]}}\n```\n\nOne entry per finding above, and only those. A confirmation carries a complete `failure_scenario` (`inputs`, `expected`, `actual`, sharper than the finder's): one without it is not taken. Each text at most {MAX_TEXT} characters. {ONLY_BLOCK}", p.output.display());
        return b;
    }
    let _ = writeln!(b, "# Validate: {} ({} {})\n", p.unit, p.role, p.name);
    let _ = writeln!(b, "You did not build this. Try to prove it does not keep its contract. Work read only in `{}` (a checkout of the delivered head): do not write, commit or check out anything; a validator that changes the tree has its answer thrown away.\n", p.worktree.display());
    let _ = writeln!(b, "## Your focus\n\n{}\n", focus(p.name));
    let _ = writeln!(
        b,
        "## The unit\n\n````markdown\n{}\n````\n",
        p.unit_text.trim_end()
    );
    if !p.ancestor_rules.is_empty() {
        let _ = writeln!(b, "## Rules inherited from ancestor units (they apply here; use `<parent-id>:<item>` ids)\n\n{}", p.ancestor_rules);
    }
    let _ = writeln!(
        b,
        "## The delivered range\n\n`{}..{}`; files changed:\n",
        p.base, p.head
    );
    for f in p.changed_files {
        let _ = writeln!(b, "- `{f}`");
    }
    let _ = writeln!(
        b,
        "\n## What the implementer claims (claims, not facts)\n\n```json\n{}\n```\n",
        serde_json::to_string_pretty(p.report).unwrap_or_default()
    );
    let _ = writeln!(
        b,
        "## The definition of done, as the loop ran it\n\n```json\n{}\n```\n",
        serde_json::to_string_pretty(p.commands).unwrap_or_default()
    );
    if !p.rejected.is_empty() {
        let _ = writeln!(
            b,
            "## Findings the implementer rejected in writing (judge the reasons)\n"
        );
        for f in p.rejected {
            let reason = f
                .disposition
                .as_ref()
                .and_then(|d| d.get("reason"))
                .and_then(Value::as_str)
                .unwrap_or("");
            let _ = writeln!(
                b,
                "- {} ({}): {} -- rejected because: {reason}",
                f.id, f.evidence.severity, f.evidence.summary
            );
        }
        b.push('\n');
    }
    let _ = writeln!(b, "## Rubric\n\n{}\n", RUBRIC.trim_end());
    let _ = writeln!(
        b,
        "## Your answer\n\nWrite one JSON object to `{}`, shaped as below (`iced schema validator` prints its full schema):\n\n```json\n\
{{\"verdict\": \"pass|fail\",\n \"expectations\": [{{\"id\": \"E1\", \"result\": \"pass|fail|unknown\", \"evidence\": \"...\"}}],\n \
\"failures\": [{{\"id\": \"F1\", \"triggered\": false, \"evidence\": \"...\"}}],\n \"constraints\": [{{\"id\": \"C1\", \"violated\": false, \"evidence\": \"...\"}}],\n \
\"findings\": [{{\"file_path\": \"src/x.rs\", \"criterion_ref\": \"E1\", \"finding_category\": \"correctness\", \"severity\": \"S2-major\", \"summary\": \"...\", \
\"failure_scenario\": {{\"inputs\": \"...\", \"expected\": \"...\", \"actual\": \"...\"}}}}],\n \"out_of_scope\": [\"paths changed outside the Scope\"],\n \"notes\": \"...\"}}\n```\n\n\
Severities are written in full: {}. Categories: {}. Do not give findings ids or say who found them: the loop does. Name only the unit's own ids and the inherited rules' `<parent-id>:<item>` ids. At most {MAX_FINDINGS} findings, each text at most {MAX_TEXT} characters, the whole answer at most 256 KiB: an answer over any of these is not taken. {ONLY_BLOCK}",
        p.output.display(),
        SEVERITIES.join(", "),
        CATEGORIES.join(", ")
    );
    b
}

/// Short JSON of a finding for events and `run show`.
pub fn finding_json(f: &Finding) -> Value {
    let mut m = Map::new();
    m.insert("id".into(), f.id.clone().into());
    m.insert("severity".into(), f.evidence.severity.clone().into());
    m.insert("status".into(), f.status.clone().into());
    m.insert("summary".into(), f.evidence.summary.clone().into());
    Value::Object(m)
}

#[cfg(test)]
mod tests;
