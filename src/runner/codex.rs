//! Codex's machine output (`codex exec --json`).

use super::{objects, short, u64_at, HarnessResult};

/// `codex exec --json`: `thread.started`, `item.completed` (`agent_message`), `turn.completed`
/// (usage), `turn.failed`. Its `error` events are notices of retries (`Reconnecting...`), not
/// failures; a stream that ends without `turn.completed` (killed, or codex waiting for a network
/// that never came) failed, with the last notice as its reason. Codex reports tokens, never a
/// cost.
pub(super) fn parse(stdout: &str) -> Option<HarnessResult> {
    let mut r = HarnessResult::default();
    let mut seen = false;
    let mut completed = false;
    let mut notice: Option<String> = None;
    let (mut input, mut output) = (0u64, 0u64);
    let limited = |m: &str| m.contains("429") || m.to_ascii_lowercase().contains("rate limit");
    for o in objects(stdout) {
        let kind = o["type"].as_str().unwrap_or("");
        match kind {
            "thread.started" => {
                seen = true;
                r.session_id = o["thread_id"].as_str().map(str::to_owned);
            }
            "turn.completed" => {
                seen = true;
                completed = true;
                r.turns = Some(r.turns.unwrap_or(0) + 1);
                input += u64_at(&o["usage"], "input_tokens").unwrap_or(0);
                output += u64_at(&o["usage"], "output_tokens").unwrap_or(0);
            }
            "item.completed" if o["item"]["type"] == "agent_message" => {
                seen = true;
                r.final_text = o["item"]["text"].as_str().map(str::to_owned);
            }
            "turn.failed" => {
                seen = true;
                r.is_error = true;
                let message = o["error"]["message"]
                    .as_str()
                    .unwrap_or("the harness reported an error");
                r.rate_limited |= limited(message);
                r.error = Some(short(message, 200));
            }
            "error" => {
                seen = true;
                notice = o["message"].as_str().map(str::to_owned);
            }
            _ => {}
        }
    }
    if !seen {
        return None;
    }
    if !completed && !r.is_error {
        r.is_error = true;
        r.rate_limited |= notice.as_deref().is_some_and(limited);
        r.error = Some(match notice {
            Some(n) => format!("no turn completed; last: {}", short(&n, 160)),
            None => "no turn completed".into(),
        });
    }
    r.input_tokens = Some(input);
    r.output_tokens = Some(output);
    Some(r)
}

#[cfg(test)]
mod tests {
    use crate::runner::tests::fixture;
    use crate::runner::{fenced_json, parse, Kind};

    #[test]
    fn codex_success_reports_its_thread_tokens_and_answer_but_no_cost() {
        let r = parse(Kind::Codex, &fixture("codex", "success.jsonl")).expect("a result");
        assert!(!r.failed(false), "{r:?}");
        assert_eq!(
            r.session_id.as_deref(),
            Some("01a229f2-7e13-7742-9c7f-abb6acc1ec3d")
        );
        assert_eq!((r.input_tokens, r.output_tokens), (Some(20301), Some(84)));
        assert_eq!(r.turns, Some(1));
        assert_eq!(r.cost_usd, None, "codex reports tokens only");
        assert_eq!(r.to_value()["cost_usd"], "unknown");
        let answer = fenced_json(r.final_text.as_deref().unwrap()).expect("a json block");
        assert!(answer.contains("\"committed\": true"), "{answer}");
    }

    #[test]
    fn codex_failures_are_its_turn_failed_or_a_stream_that_never_completed() {
        let r = parse(Kind::Codex, &fixture("codex", "rate-limited-429.jsonl")).unwrap();
        assert!(r.is_error && r.rate_limited, "{r:?}");
        assert_eq!(
            r.error.as_deref(),
            Some("exceeded retry limit, last status: 429 Too Many Requests")
        );
        let r = parse(Kind::Codex, &fixture("codex", "api-error-500.jsonl")).unwrap();
        assert!(r.is_error && !r.rate_limited, "{r:?}");
        let r = parse(Kind::Codex, &fixture("codex", "connection-dropped.jsonl")).unwrap();
        assert!(r.is_error, "{r:?}");
        // Killed while waiting for a network that never came: its notices are not a success.
        let r = parse(Kind::Codex, &fixture("codex", "api-unreachable.jsonl")).unwrap();
        assert!(r.is_error, "{r:?}");
        assert!(
            r.error
                .as_deref()
                .unwrap()
                .starts_with("no turn completed; last: Reconnecting"),
            "{r:?}"
        );
        let r = parse(Kind::Codex, &fixture("codex", "killed-mid-stream.jsonl")).unwrap();
        assert_eq!(r.error.as_deref(), Some("no turn completed"));
    }
}
