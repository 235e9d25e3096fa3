//! An implementer's escalation or questions as a lane records them (SPEC 20.7): what the agent said,
//! the ids the loop gave its questions, and what the person did. Data only; the verbs that resolve
//! one are `escalation_verbs`, and `decide` says what the lane does.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum EscalationStatus {
    /// Waiting for a person: the lane stays blocked, a resume is refused.
    Open,
    /// The proposal (or the person's edit of it) is in the unit.
    Applied,
    /// The person said no, with guidance for the next attempt.
    Rejected,
    /// Every question has an answer.
    Answered,
}

impl EscalationStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            EscalationStatus::Open => "open",
            EscalationStatus::Applied => "applied",
            EscalationStatus::Rejected => "rejected",
            EscalationStatus::Answered => "answered",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Escalation {
    /// The attempt whose report made it: only that attempt's escalation is ever open.
    pub attempt: u32,
    /// One of seed 000's five words, or `questions`.
    pub kind: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proposal: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub questions: Vec<Asked>,
    pub status: EscalationStatus,
    /// The person's words: a rejection's guidance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guidance: Option<String>,
    /// The contract hash after an apply or an edit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract_hash: Option<String>,
}

/// A question as the loop numbered it, and the person's answer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Asked {
    pub id: String,
    pub text: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
}

impl Escalation {
    /// Still waiting for a person, and made by the lane's current attempt.
    pub fn is_open_at(&self, attempt: u32) -> bool {
        self.status == EscalationStatus::Open && self.attempt == attempt
    }

    /// Who stopped: the test writer for its requests (SPEC 20.17), else the implementer.
    pub fn by(&self) -> &'static str {
        match self.kind.as_str() {
            "research" | "spec-change" => "test writer",
            _ => "implementer",
        }
    }

    /// Whose escalation, as the next attempt's briefs say it: the implementer's own is "your";
    /// a test writer's request is read by the implementer too, so it is named (SPEC 20.17).
    fn whose(&self) -> &'static str {
        match self.by() {
            "implementer" => "your",
            _ => "the test writer's",
        }
    }

    /// The lane's reason while it waits: `escalation (conflict): <message>`, or `questions: Q4, Q5`.
    pub fn reason(&self) -> String {
        if self.kind == "questions" {
            let ids: Vec<&str> = self.questions.iter().map(|q| q.id.as_str()).collect();
            format!("questions: {}", ids.join(", "))
        } else {
            format!("escalation ({}): {}", self.kind, self.message)
        }
    }

    /// What the person decided, for the next attempt's brief.
    pub fn resolution(&self) -> String {
        match self.status {
            EscalationStatus::Open => self.reason(),
            EscalationStatus::Applied => format!(
                "the person applied {} {} escalation; the contract is now {} (its hash {})",
                self.whose(),
                self.kind,
                "the unit below",
                self.contract_hash.as_deref().unwrap_or("?")
            ),
            EscalationStatus::Rejected => format!(
                "the person rejected {} {} escalation: {}",
                self.whose(),
                self.kind,
                self.guidance.as_deref().unwrap_or("")
            ),
            EscalationStatus::Answered => {
                let answers: Vec<String> = self
                    .questions
                    .iter()
                    .map(|q| {
                        format!(
                            "{} {} -> A: {}",
                            q.id,
                            q.text,
                            q.answer.as_deref().unwrap_or("")
                        )
                    })
                    .collect();
                format!("the person answered your questions: {}", answers.join("; "))
            }
        }
    }
}
