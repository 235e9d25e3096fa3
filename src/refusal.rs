//! The one refusal shape of the whole tool and its exit-code table.
//!
//! Every "no" iced says names the step that refused, a stable kebab-case code a script can match
//! on, the reason in plain words and the remedy: what to do next. The command line renders it as
//! text or as `{"refused": {...}}`; nothing else decides how a refusal looks.

use serde::Serialize;
use serde_json::Value;

/// The exit-code table (spec/SPEC.md, "Exit codes").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Exit {
    /// 0: done, advanced, waiting or paused.
    Ok = 0,
    /// 1: an internal error (a bug, or the machine failed us: I/O).
    Internal = 1,
    /// 2: the command line was wrong.
    Usage = 2,
    /// 3: a check failed; nothing was changed.
    Refused = 3,
    /// 4: blocked, or only a person can go on from here.
    NeedsPerson = 4,
}

impl Exit {
    pub fn code(self) -> i32 {
        self as i32
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Refusal {
    pub step: String,
    pub code: &'static str,
    pub reason: String,
    pub remedy: String,
    #[serde(skip)]
    pub exit: Exit,
    /// Data that explains the refusal (a lint report, the candidates of an ambiguous id), printed
    /// beside `refused` in JSON and after the reason in text.
    #[serde(skip)]
    pub detail: Option<Box<(&'static str, Value)>>,
}

impl Refusal {
    pub fn new(
        step: &str,
        code: &'static str,
        reason: impl Into<String>,
        remedy: impl Into<String>,
    ) -> Refusal {
        Refusal {
            step: step.to_owned(),
            code,
            reason: reason.into(),
            remedy: remedy.into(),
            exit: Exit::Refused,
            detail: None,
        }
    }

    pub fn exit(mut self, exit: Exit) -> Refusal {
        self.exit = exit;
        self
    }

    pub fn detail(mut self, key: &'static str, value: Value) -> Refusal {
        self.detail = Some(Box::new((key, value)));
        self
    }

    /// `{"refused": {"step", "code", "reason", "remedy"}}`, plus the detail when there is one.
    pub fn to_json(&self) -> Value {
        let mut out = serde_json::Map::new();
        out.insert(
            "refused".into(),
            serde_json::to_value(self).expect("a refusal serialises"),
        );
        if let Some(detail) = &self.detail {
            let (key, value) = &**detail;
            out.insert((*key).into(), value.clone());
        }
        Value::Object(out)
    }
}

/// A failure of the machine rather than a check: a file that cannot be written, git gone.
pub fn io_error(step: &str, error: impl std::fmt::Display) -> Refusal {
    Refusal::new(
        step,
        "io-error",
        error.to_string(),
        "check that the path exists, is writable and the disk has room, then run the command again",
    )
    .exit(Exit::Internal)
}
