//! pi's machine output (`pi -p --mode json`) and its own session file.

use super::{objects, short, u64_at, HarnessResult};

/// `pi -p --mode json`: usage summed over `message_end` events of the assistant; a `stopReason`
/// of `error` or `aborted` fails (pi exits 0 either way).
pub(super) fn parse(stdout: &str) -> Option<HarnessResult> {
    let mut r = HarnessResult::default();
    let mut seen = false;
    let (mut input, mut output, mut cost, mut costed) = (0u64, 0u64, 0f64, false);
    for o in objects(stdout) {
        if o["type"] == "session" {
            r.session_id = o["id"].as_str().map(str::to_owned);
        }
        if o["type"] != "message_end" {
            continue;
        }
        let message = &o["message"];
        if message["role"] != "assistant" {
            continue;
        }
        seen = true;
        r.turns = Some(r.turns.unwrap_or(0) + 1);
        if let Some(model) = message["model"].as_str() {
            r.model = Some(model.to_owned());
        }
        let usage = &message["usage"];
        input += u64_at(usage, "input").unwrap_or(0);
        output += u64_at(usage, "output").unwrap_or(0);
        if let Some(c) = usage["cost"]["total"].as_f64() {
            cost += c;
            costed = true;
        }
        let text: String = message["content"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["type"] == "text")
            .filter_map(|c| c["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n");
        if !text.is_empty() {
            r.final_text = Some(text);
        }
        match message["stopReason"].as_str() {
            Some("error") | Some("aborted") => {
                r.is_error = true;
                let why = message["errorMessage"]
                    .as_str()
                    .unwrap_or("the model call failed");
                r.rate_limited |= why.contains("429") || why.contains("rate limit");
                r.error = Some(short(why, 200));
            }
            _ => {
                r.is_error = false;
                r.error = None;
            }
        }
    }
    if !seen {
        return None;
    }
    r.input_tokens = Some(input);
    r.output_tokens = Some(output);
    r.cost_usd = (costed && !(r.is_error && input + output == 0)).then_some(cost);
    Some(r)
}

/// Usage from pi's own session file, which holds each message once (its JSON output also holds
/// every streamed delta, and only its tail is kept): turns, input and output tokens, and cost
/// (when every assistant message reported one). `None` when it holds no assistant message.
pub fn pi_session_usage(session: &str) -> Option<(u64, u64, u64, Option<f64>)> {
    let (mut turns, mut input, mut output, mut cost, mut costed) = (0, 0, 0, 0.0, true);
    for o in objects(session).filter(|o| o["type"] == "message") {
        let m = &o["message"];
        if m["role"] != "assistant" {
            continue;
        }
        turns += 1;
        input += u64_at(&m["usage"], "input").unwrap_or(0);
        output += u64_at(&m["usage"], "output").unwrap_or(0);
        match m["usage"]["cost"]["total"].as_f64() {
            Some(c) => cost += c,
            None => costed = false,
        }
    }
    (turns > 0).then_some((turns, input, output, costed.then_some(cost)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::tests::fixture;
    use crate::runner::{fenced_json, parse, Kind};

    #[test]
    fn pi_success_sums_usage_and_cost_over_its_messages() {
        let r = parse(Kind::Pi, &fixture("pi", "success.jsonl")).expect("a result");
        assert!(!r.failed(false), "{r:?}");
        assert_eq!(
            r.session_id.as_deref(),
            Some("01a229f6-522f-7270-99ca-55f23f81880e")
        );
        assert_eq!(r.model.as_deref(), Some("claude-sonnet-4-5"));
        assert_eq!(r.turns, Some(2));
        assert_eq!(
            (r.input_tokens, r.output_tokens),
            (Some(1533 + 1661), Some(84))
        );
        let cost = r.cost_usd.expect("pi reports a cost");
        assert!((cost - (0.005229 + 0.005613)).abs() < 1e-9, "{cost}");
        assert!(fenced_json(r.final_text.as_deref().unwrap()).is_some());
    }

    #[test]
    fn pi_session_files_give_the_whole_usage() {
        let (turns, input, output, cost) =
            pi_session_usage(&fixture("pi", "session-success.jsonl")).expect("usage");
        assert_eq!((turns, input, output), (2, 1533 + 1661, 84));
        assert!((cost.unwrap() - (0.005229 + 0.005613)).abs() < 1e-9);
        assert_eq!(pi_session_usage("{\"type\": \"session\"}\n"), None);
    }

    #[test]
    fn pi_failures_are_read_from_its_stop_reason_though_it_exits_0() {
        for (name, limited) in [
            ("api-error-500.jsonl", false),
            ("rate-limited-429.jsonl", true),
            ("connection-dropped.jsonl", false),
        ] {
            let r = parse(Kind::Pi, &fixture("pi", name)).expect("a result");
            assert!(r.is_error, "{name}: {r:?}");
            assert_eq!(r.rate_limited, limited, "{name}");
        }
        let r = parse(Kind::Pi, &fixture("pi", "api-error-500.jsonl")).unwrap();
        assert!(r.error.as_deref().unwrap().starts_with("500 "), "{r:?}");
        assert_eq!(r.cost_usd, None, "zero usage after failing is unknown");
        // The dropped stream had begun: what it cost is known.
        let r = parse(Kind::Pi, &fixture("pi", "connection-dropped.jsonl")).unwrap();
        assert!(r.cost_usd.is_some_and(|c| c > 0.0), "{r:?}");
        // Killed before any assistant message ended: no result at all.
        assert_eq!(
            parse(Kind::Pi, &fixture("pi", "killed-mid-stream.jsonl")),
            None
        );
    }
}
