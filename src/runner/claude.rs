//! Claude Code's machine output (`claude -p --output-format json`, or the last `result` of
//! `stream-json`).

use super::{objects, u64_at, HarnessResult};

/// `claude -p --output-format json` (one result object) or `stream-json` (its last `result`).
pub(super) fn parse(stdout: &str) -> Option<HarnessResult> {
    let result = objects(stdout).filter(|o| o["type"] == "result").last()?;
    let subtype = result["subtype"].as_str().unwrap_or("");
    let status = result["api_error_status"].as_u64();
    let api_error = result["api_error"].as_str();
    let is_error = result["is_error"].as_bool().unwrap_or(true) || subtype != "success";
    let usage = &result["usage"];
    let input = u64_at(usage, "input_tokens");
    let output = u64_at(usage, "output_tokens");
    let zero_usage = input.unwrap_or(0) == 0 && output.unwrap_or(0) == 0;
    let cost = result["total_cost_usd"]
        .as_f64()
        .filter(|c| !(is_error && zero_usage && *c == 0.0));
    // The model actually used: the one `modelUsage` names with the most output.
    let model = result["modelUsage"].as_object().and_then(|m| {
        m.iter()
            .max_by_key(|(_, u)| u["outputTokens"].as_u64().unwrap_or(0))
            .map(|(name, _)| name.clone())
    });
    let text = result["result"].as_str().map(str::to_owned);
    let overloaded = text
        .as_deref()
        .is_some_and(|t| t.contains("overloaded_error") || t.contains("Overloaded"));
    let error = is_error.then(|| {
        let why = match (status, api_error, subtype) {
            (Some(code), _, _) => format!("the API answered HTTP {code}"),
            (None, Some(e), _) => format!("the API call failed: {e}"),
            (None, None, "success") => result["terminal_reason"]
                .as_str()
                .map_or("the harness reported an error".to_owned(), |r| {
                    format!("the harness ended: {r}")
                }),
            (None, None, other) => format!("the harness ended: {other}"),
        };
        why
    });
    let listed = result["permission_denials"].as_array();
    let denials = listed.map_or(0, |a| a.len() as u64);
    let guard_denials = listed.map_or(0, |a| {
        a.iter()
            .filter(|d| {
                d["tool_name"]
                    .as_str()
                    .is_some_and(|t| super::CLAUDE_GUARDED_TOOLS.contains(&t))
            })
            .count() as u64
    });
    Some(HarnessResult {
        session_id: result["session_id"].as_str().map(str::to_owned),
        model,
        turns: u64_at(&result, "num_turns"),
        cost_usd: cost,
        input_tokens: input,
        output_tokens: output,
        is_error,
        error: error.or_else(|| {
            let missing = denials - guard_denials;
            (missing > 0).then(|| format!("{missing} tool call(s) were denied"))
        }),
        rate_limited: status == Some(429) || status == Some(529) || overloaded,
        permission_denials: denials,
        guard_denials,
        final_text: text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::tests::fixture;
    use crate::runner::{fenced_json, parse, Kind};

    /// What the real Claude Code CLI printed, recorded against the mock API
    /// (`tests/cli/harness.rs`, `record_claude_outputs`).
    fn claude_fixture(name: &str) -> HarnessResult {
        parse(Kind::Claude, &fixture("claude", name)).unwrap_or_else(|| panic!("{name}: no result"))
    }

    #[test]
    fn claude_success_reports_session_model_turns_cost_and_answer() {
        let r = claude_fixture("success.json");
        assert!(!r.is_error && !r.failed(false), "{r:?}");
        assert_eq!(
            r.session_id.as_deref(),
            Some("0badc0de-0000-4000-8000-000000000000")
        );
        assert_eq!(r.model.as_deref(), Some("claude-sonnet-4-5"));
        assert_eq!(r.turns, Some(2));
        assert_eq!(r.cost_usd, Some(0.00162));
        assert_eq!((r.input_tokens, r.output_tokens), (Some(240), Some(60)));
        let answer = fenced_json(r.final_text.as_deref().unwrap()).expect("a json block");
        assert!(answer.starts_with("{\"summary\""), "{answer}");
    }

    #[test]
    fn claude_api_errors_fail_whatever_the_subtype_says_and_cost_unknown() {
        for (name, status, limited) in [
            ("api-error-500.json", 500, false),
            ("rate-limited-429.json", 429, true),
            ("overloaded-529.json", 529, true),
        ] {
            let r = claude_fixture(name);
            assert!(r.is_error && r.failed(true), "{name}: {r:?}");
            assert_eq!(
                r.error.as_deref(),
                Some(format!("the API answered HTTP {status}").as_str()),
                "{name}"
            );
            assert_eq!(r.rate_limited, limited, "{name}");
            assert_eq!(
                r.cost_usd, None,
                "{name}: zero usage after failing is unknown"
            );
            assert_eq!(
                r.to_value()["cost_usd"],
                "unknown",
                "{name}: written as unknown"
            );
        }
        let dropped = claude_fixture("connection-dropped.json");
        assert!(dropped.is_error && !dropped.rate_limited);
        assert_eq!(
            dropped.error.as_deref(),
            Some("the API call failed: connection_failed")
        );
        assert_eq!(dropped.cost_usd, None);
    }

    #[test]
    fn claude_limits_fail_and_keep_what_they_cost() {
        let turns = claude_fixture("max-turns.json");
        assert!(turns.is_error);
        assert_eq!(
            turns.error.as_deref(),
            Some("the harness ended: error_max_turns")
        );
        assert_eq!(turns.cost_usd, Some(0.00081));
        let budget = claude_fixture("budget-exceeded.json");
        assert!(budget.is_error);
        assert_eq!(
            budget.error.as_deref(),
            Some("the harness ended: error_max_budget_usd")
        );
        assert_eq!(budget.cost_usd, Some(0.00081));
    }

    #[test]
    fn a_denied_tool_fails_an_implementer_but_not_a_reader() {
        let r = claude_fixture("tool-denied.json");
        assert!(!r.is_error, "the CLI says success");
        assert_eq!(r.permission_denials, 1);
        assert!(
            r.failed(false),
            "an implementer whose tool was denied did not do its work"
        );
        assert!(!r.failed(true));
        assert_eq!(r.error.as_deref(), Some("1 tool call(s) were denied"));
        assert_eq!(r.guard_denials, 0);
    }

    #[test]
    fn a_call_the_guard_denied_does_not_fail_the_implementer() {
        // The same run, the denied call an Edit: a tool the implementer has, so the guard's hook
        // refused it (SPEC 24.11); the receipt judges what the agent did instead.
        let text = fixture("claude", "tool-denied.json").replace("\"WebFetch\"", "\"Edit\"");
        let r = parse(Kind::Claude, &text).unwrap();
        assert_eq!((r.permission_denials, r.guard_denials), (1, 1));
        assert!(!r.failed(false), "{r:?}");
        assert_eq!(r.error, None);
    }

    #[test]
    fn a_claude_killed_mid_stream_left_no_result() {
        let text = fixture("claude", "killed-mid-stream.jsonl");
        assert!(text.contains("\"type\":\"system\""), "the stream had begun");
        assert_eq!(parse(Kind::Claude, &text), None);
    }
}
