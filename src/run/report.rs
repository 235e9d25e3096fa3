//! The lane report an implementer writes: strict JSON, unknown keys refused, and no field that only
//! the loop may write (a verdict, a finding's identity, token counts). The report is a claim about
//! the work, never a judgement of it.

use crate::store::StoreError;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::Path;

/// A lane report is at most 256 KiB (SPEC 24.5).
pub const REPORT_LIMIT: u64 = 256 * 1024;
/// A hand-back's reason is kept in the state: at most this many characters.
pub const HANDBACK_LIMIT: usize = 2_000;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Report {
    pub summary: String,
    pub evidence: Vec<Evidence>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handback: Option<Handback>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dispositions: Vec<Disposition>,
    /// The agent stops for a person (SPEC 20.7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalate: Option<Escalate>,
    /// Questions for a person; the loop numbers them (SPEC 20.7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub questions: Option<Vec<Question>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Escalate {
    pub kind: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proposal: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Question {
    pub text: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
}

/// Seed 000's five reasons an agent may stop for a person.
pub const ESCALATION_KINDS: &[&str] = &[
    "ambiguity",
    "conflict",
    "change-expectation",
    "irreversible",
    "stuck",
];
/// A proposal is contract lines, not a file: at most 16 KiB.
pub const PROPOSAL_LIMIT: usize = 16 * 1024;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Evidence {
    pub expectation: String,
    pub kind: String,
    #[serde(rename = "ref")]
    pub reference: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Handback {
    pub reason: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Disposition {
    pub finding_id: String,
    pub action: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// What a piece of evidence can be (seed 000's verify kinds).
pub const EVIDENCE_KINDS: &[&str] = &["test", "check", "metric", "manual"];

/// Fields only the loop writes. A report carrying one is forged, not merely malformed.
const LOOP_ONLY: &[&str] = &[
    "verdict",
    "finding_id",
    "findings",
    "id",
    "severity",
    "expectations",
    "failures",
    "constraints",
];
const TOKEN_COUNTS: &[&str] = &[
    "tokens",
    "usage",
    "cost",
    "total_cost_usd",
    "input_tokens",
    "output_tokens",
    "modelUsage",
];

/// Why a report was refused: `code` is `report-invalid`, `report-forged`, `path-symlink` or
/// `not-a-regular-file`.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportProblem {
    pub code: &'static str,
    pub message: String,
}

fn problem(code: &'static str, message: impl Into<String>) -> ReportProblem {
    ReportProblem {
        code,
        message: message.into(),
    }
}

/// Read and check the report at `path`: an agent wrote it, so a symbolic link (`path-symlink`) and
/// anything but a regular file (`not-a-regular-file`) are refused before a byte is read.
pub fn read(path: &Path) -> Result<Report, ReportProblem> {
    let shown = path.display();
    let bytes = crate::store::read_no_follow(path, REPORT_LIMIT).map_err(|e| match e {
        StoreError::Symlink(_) => problem("path-symlink", format!("`{shown}` is a symbolic link")),
        e @ StoreError::NotRegular { .. } => problem("not-a-regular-file", e.to_string()),
        e if e.is_not_found() => problem("report-invalid", format!("no report at `{shown}`")),
        StoreError::TooLarge { limit, .. } => problem(
            "report-too-large",
            format!("`{shown}` is larger than {limit} bytes"),
        ),
        e => problem("report-invalid", e.to_string()),
    })?;
    parse(&bytes).map_err(|mut p| {
        p.message = format!("`{shown}`: {}", p.message);
        p
    })
}

/// Check a report handed over as bytes rather than as a file (`iced_submit`, SPEC 20.18): the size
/// limit `read` applies, then the same `parse`.
pub fn check_bytes(bytes: &[u8]) -> Result<Report, ReportProblem> {
    if bytes.len() as u64 > REPORT_LIMIT {
        return Err(problem(
            "report-too-large",
            format!("the report is larger than {REPORT_LIMIT} bytes"),
        ));
    }
    parse(bytes)
}

impl ReportProblem {
    /// What the host should do about a report `implement receipt` refused.
    pub fn remedy(&self) -> &'static str {
        match self.code {
            "report-forged" => "the report is the agent's claim; the verdict and finding ids are the loop's: remove the field and hand it in again",
            "path-symlink" | "not-a-regular-file" => "have the agent write the report as a regular file at that path (not a link, not a FIFO), then hand it in again",
            "report-too-large" => "shorten the report to 256 KiB or less (evidence points at tests and files; it does not hold them), then hand it in again",
            _ => "fix the report (`iced schema report` prints its shape), then hand it in again",
        }
    }
}

pub fn parse(bytes: &[u8]) -> Result<Report, ReportProblem> {
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|e| problem("report-invalid", format!("not JSON: {e}")))?;
    let Value::Object(map) = &value else {
        return Err(problem("report-invalid", "not a JSON object"));
    };
    for key in map.keys() {
        if LOOP_ONLY.contains(&key.as_str()) {
            return Err(problem(
                "report-forged",
                format!("carries `{key}`, which only the loop writes"),
            ));
        }
        if TOKEN_COUNTS.contains(&key.as_str()) {
            return Err(problem(
                "report-forged",
                format!(
                    "carries `{key}`: token counts and cost come from the harness, not the report"
                ),
            ));
        }
    }
    for (i, e) in map
        .get("evidence")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        if let Some(obj) = e.as_object() {
            for key in obj.keys() {
                if LOOP_ONLY.contains(&key.as_str()) || key == "result" || key == "verified" {
                    return Err(problem(
                        "report-forged",
                        format!("evidence[{i}] carries `{key}`, which only the loop writes"),
                    ));
                }
            }
        }
    }
    let report: Report =
        serde_json::from_value(value).map_err(|e| problem("report-invalid", e.to_string()))?;
    if report.summary.trim().is_empty() {
        return Err(problem("report-invalid", "`summary` is empty"));
    }
    for (i, e) in report.evidence.iter().enumerate() {
        if !EVIDENCE_KINDS.contains(&e.kind.as_str()) {
            return Err(problem(
                "report-invalid",
                format!(
                    "evidence[{i}] ({}): kind `{}` is not one of {}",
                    e.expectation,
                    e.kind.chars().take(40).collect::<String>(),
                    EVIDENCE_KINDS.join(", ")
                ),
            ));
        }
    }
    for d in &report.dispositions {
        if !matches!(d.action.as_str(), "applied" | "rejected") {
            return Err(problem(
                "report-invalid",
                format!(
                    "disposition of `{}`: action must be applied or rejected",
                    d.finding_id
                ),
            ));
        }
    }
    if let Some(h) = &report.handback {
        if h.reason.trim().is_empty() {
            return Err(problem("report-invalid", "`handback.reason` is empty"));
        }
        // The reason is kept in the state and shown to the person: a paragraph, not a file.
        let n = h.reason.chars().count();
        if n > HANDBACK_LIMIT {
            return Err(problem(
                "report-invalid",
                format!("`handback.reason` is {n} characters; at most {HANDBACK_LIMIT} are taken"),
            ));
        }
    }
    check_stop(&report)?;
    Ok(report)
}

/// `escalate` and `questions` (SPEC 20.5, 20.7): one way to stop at most, each bounded, a proposal
/// only where the contract is in question.
fn check_stop(report: &Report) -> Result<(), ReportProblem> {
    let stops = [
        report.handback.is_some(),
        report.escalate.is_some(),
        report.questions.is_some(),
    ];
    if stops.iter().filter(|s| **s).count() > 1 {
        return Err(problem(
            "report-invalid",
            "carries more than one of `handback`, `escalate` and `questions`",
        ));
    }
    let bounded = |what: &str, text: &str| -> Result<(), ReportProblem> {
        if text.trim().is_empty() {
            return Err(problem("report-invalid", format!("`{what}` is empty")));
        }
        let n = text.chars().count();
        if n > HANDBACK_LIMIT {
            return Err(problem(
                "report-invalid",
                format!("`{what}` is {n} characters; at most {HANDBACK_LIMIT} are taken"),
            ));
        }
        Ok(())
    };
    if let Some(e) = &report.escalate {
        if !ESCALATION_KINDS.contains(&e.kind.as_str()) {
            return Err(problem(
                "report-invalid",
                format!(
                    "`escalate.kind` `{}` is not one of {}",
                    e.kind.chars().take(40).collect::<String>(),
                    ESCALATION_KINDS.join(", ")
                ),
            ));
        }
        bounded("escalate.message", &e.message)?;
        if let Some(p) = &e.proposal {
            if !matches!(e.kind.as_str(), "change-expectation" | "conflict") {
                return Err(problem(
                    "report-invalid",
                    format!("`escalate.proposal` is taken only with change-expectation or conflict, not {}", e.kind),
                ));
            }
            if p.len() > PROPOSAL_LIMIT {
                return Err(problem(
                    "report-invalid",
                    format!(
                        "`escalate.proposal` is {} bytes; at most {PROPOSAL_LIMIT} are taken",
                        p.len()
                    ),
                ));
            }
        }
    }
    if let Some(questions) = &report.questions {
        if questions.is_empty() {
            return Err(problem("report-invalid", "`questions` is empty"));
        }
        for (i, q) in questions.iter().enumerate() {
            bounded(&format!("questions[{i}].text"), &q.text)?;
            if q.text.contains('\n') || q.text.contains("-> A:") {
                return Err(problem(
                    "report-invalid",
                    format!("`questions[{i}].text` must be one line without `-> A:`"),
                ));
            }
            for o in &q.options {
                bounded(&format!("questions[{i}].options"), o)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (issue 11, item 16): `kind: "bogus"` was taken, and the receipt later said "no
    /// evidence for E1".
    #[test]
    fn evidence_of_an_unknown_kind_is_refused_naming_it() {
        let p = parse(br#"{"summary": "x", "evidence": [{"expectation": "E1", "kind": "bogus", "ref": "r"}]}"#).unwrap_err();
        assert_eq!(p.code, "report-invalid");
        assert_eq!(
            p.message,
            "evidence[0] (E1): kind `bogus` is not one of test, check, metric, manual"
        );
        for kind in EVIDENCE_KINDS {
            let text = format!(
                r#"{{"summary": "x", "evidence": [{{"expectation": "E1", "kind": "{kind}", "ref": "r"}}]}}"#
            );
            assert!(parse(text.as_bytes()).is_ok(), "{kind}");
        }
    }

    #[test]
    fn an_escalation_or_questions_are_checked_strictly() {
        let code = |s: &str| parse(s.as_bytes()).map(|_| "ok").unwrap_or_else(|p| p.code);
        let ok = r#"{"summary": "x", "evidence": [], "escalate": {"kind": "change-expectation", "message": "E2 is wrong", "proposal": "- [E2] new text"}}"#;
        assert_eq!(code(ok), "ok");
        for bad in [
            r#"{"summary": "x", "evidence": [], "escalate": {"kind": "bored", "message": "m"}}"#,
            r#"{"summary": "x", "evidence": [], "escalate": {"kind": "stuck", "message": " "}}"#,
            r#"{"summary": "x", "evidence": [], "escalate": {"kind": "stuck", "message": "m", "proposal": "- [E1] x"}}"#,
            r#"{"summary": "x", "evidence": [], "escalate": {"kind": "stuck", "message": "m", "extra": 1}}"#,
            r#"{"summary": "x", "evidence": [], "escalate": {"kind": "stuck", "message": "m"}, "handback": {"reason": "r"}}"#,
            r#"{"summary": "x", "evidence": [], "questions": []}"#,
            r#"{"summary": "x", "evidence": [], "questions": [{"id": "Q1", "text": "t"}]}"#,
            r#"{"summary": "x", "evidence": [], "questions": [{"text": "a -> A: b"}]}"#,
            r#"{"summary": "x", "evidence": [], "questions": [{"text": "two
lines"}]}"#,
        ] {
            assert_eq!(code(bad), "report-invalid", "{bad}");
        }
        assert_eq!(
            code(
                r#"{"summary": "x", "evidence": [], "questions": [{"text": "which?", "options": ["a", "b"]}]}"#
            ),
            "ok"
        );
    }

    #[test]
    fn a_good_report_parses() {
        let r = parse(br#"{"summary": "did it", "evidence": [{"expectation": "E1", "kind": "test", "ref": "t"}]}"#).unwrap();
        assert_eq!(r.evidence[0].expectation, "E1");
    }

    #[test]
    fn forged_and_unknown_fields_are_refused() {
        let code = |s: &str| parse(s.as_bytes()).unwrap_err().code;
        assert_eq!(
            code(r#"{"summary": "x", "evidence": [], "verdict": "pass"}"#),
            "report-forged"
        );
        assert_eq!(
            code(r#"{"summary": "x", "evidence": [], "total_cost_usd": 1}"#),
            "report-forged"
        );
        assert_eq!(
            code(
                r#"{"summary": "x", "evidence": [{"expectation": "E1", "kind": "test", "ref": "r", "result": "pass"}]}"#
            ),
            "report-forged"
        );
        assert_eq!(
            code(r#"{"summary": "x", "evidence": [], "extra": 1}"#),
            "report-invalid"
        );
        assert_eq!(code(r#"{"summary": "", "evidence": []}"#), "report-invalid");
        assert_eq!(code(r#"{"evidence": []}"#), "report-invalid");
        assert_eq!(code(r#"[1]"#), "report-invalid");
        assert_eq!(
            code(r#"{"summary": "x", "evidence": [], "handback": {"reason": " "}}"#),
            "report-invalid"
        );
    }
}
