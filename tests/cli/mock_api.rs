//! A mock of the model API on 127.0.0.1, for running the real agent CLIs offline: Anthropic's
//! Messages API (`POST /v1/messages`, streamed as server-sent events or not) and OpenAI's
//! Responses API (`POST .../responses`, streamed), answering from a script. A rule matches a request when its conversation's first message contains the rule's
//! text; the reply is the rule's n-th, n being how many assistant turns the conversation already
//! holds (so a tool call, then the final message). Every request is logged for the test to read.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One scripted answer.
#[derive(Clone, Debug)]
pub enum Reply {
    /// A tool call (`stop_reason: tool_use`).
    Tool { name: String, input: Value },
    /// A final message.
    Text(String),
    /// An HTTP error with an Anthropic error body (`429` rate limit, `500` api error, `529`
    /// overloaded).
    Status(u16),
    /// Accept the request and never answer.
    Hang,
    /// Close the connection without answering.
    Drop,
}

impl Reply {
    pub fn bash(command: &str) -> Reply {
        Reply::Tool {
            name: "Bash".into(),
            input: json!({"command": command, "description": "run it"}),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Rule {
    pub when: String,
    pub turns: Vec<Reply>,
    /// Matches only its first `n` requests, when set; later ones go to the next rule.
    pub times: Option<usize>,
    used: Arc<Mutex<usize>>,
}

impl Rule {
    pub fn new(when: &str, turns: Vec<Reply>) -> Rule {
        Rule {
            when: when.into(),
            turns,
            times: None,
            used: Arc::new(Mutex::new(0)),
        }
    }

    pub fn times(mut self, n: usize) -> Rule {
        self.times = Some(n);
        self
    }

    /// Whether this rule answers a conversation starting with `first`; counts the use.
    fn take(&self, first: &str) -> bool {
        if !first.contains(&self.when) {
            return false;
        }
        let mut used = self.used.lock().unwrap();
        if self.times.is_some_and(|n| *used >= n) {
            return false;
        }
        *used += 1;
        true
    }
}

/// What the mock saw of one request.
#[derive(Clone, Debug)]
pub struct Seen {
    pub at: std::time::Instant,
    pub model: String,
    pub rule: Option<String>,
    pub turn: usize,
    pub authorization: bool,
    /// The key the request carried: `x-api-key`, or what follows `Bearer ` in `authorization`.
    pub credential: Option<String>,
    /// What the conversation's tool calls returned, in order (what the agent's harness told the
    /// model: an output, or why a call was refused).
    pub tool_results: Vec<String>,
    /// The names of the tools the request offered the model.
    pub tools: Vec<String>,
    /// The request's body, whole.
    pub body: Value,
}

pub struct MockApi {
    pub url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    rules: Arc<Mutex<Vec<Rule>>>,
}

impl MockApi {
    pub fn start(rules: Vec<Rule>) -> MockApi {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let rules = Arc::new(Mutex::new(rules));
        let (s, r) = (seen.clone(), rules.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (s, r) = (s.clone(), r.clone());
                std::thread::spawn(move || serve(stream, &s, &r));
            }
        });
        MockApi { url, seen, rules }
    }

    /// Add a rule after the server started (one that names a path known only later), tried
    /// after the others.
    pub fn push_rule(&self, rule: Rule) {
        self.rules.lock().unwrap().push(rule);
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

struct Request {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Request> {
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_owned();
    let path = parts.next()?.to_owned();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        reader.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':')?;
        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
    }
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let mut body = Vec::new();
    if header("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size).ok()?;
            let n = usize::from_str_radix(size.trim(), 16).ok()?;
            let mut chunk = vec![0; n + 2];
            reader.read_exact(&mut chunk).ok()?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    } else if let Some(n) = header("content-length").and_then(|v| v.parse::<usize>().ok()) {
        body.resize(n, 0);
        reader.read_exact(&mut body).ok()?;
    }
    Some(Request {
        method,
        path,
        headers,
        body,
    })
}

fn serve(stream: TcpStream, seen: &Mutex<Vec<Seen>>, rules: &Mutex<Vec<Rule>>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut reader = BufReader::new(stream.try_clone().expect("clone the stream"));
    let mut out = stream;
    while let Some(req) = read_request(&mut reader) {
        if req.method == "POST"
            && req
                .path
                .split('?')
                .next()
                .unwrap_or("")
                .ends_with("/responses")
        {
            let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
            responses(&mut out, &body, &req, seen, rules);
            return;
        }
        if req.method != "POST" || !req.path.starts_with("/v1/messages") {
            let _ = respond(&mut out, 200, "application/json", b"{}", true);
            continue;
        }
        if req.path.starts_with("/v1/messages/count_tokens") {
            let _ = respond(
                &mut out,
                200,
                "application/json",
                br#"{"input_tokens": 10}"#,
                true,
            );
            continue;
        }
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let first = messages.first().map(|m| m.to_string()).unwrap_or_default();
        let turn = messages.iter().filter(|m| m["role"] == "assistant").count();
        let model = body["model"].as_str().unwrap_or("claude-mock").to_owned();
        let results = messages
            .iter()
            .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
            .filter(|b| b["type"] == "tool_result")
            .map(|b| match &b["content"] {
                Value::String(s) => s.clone(),
                Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
                other => other.to_string(),
            })
            .collect();
        let reply = scripted(&req, &body, &model, &first, turn, results, seen, rules);
        let stream = body["stream"].as_bool().unwrap_or(false);
        match reply {
            Reply::Status(code) => {
                let (kind, message) = match code {
                    429 => (
                        "rate_limit_error",
                        "Number of requests has exceeded your rate limit",
                    ),
                    529 => ("overloaded_error", "Overloaded"),
                    _ => ("api_error", "Internal server error"),
                };
                let body = json!({"type": "error", "error": {"type": kind, "message": message}});
                let _ = respond(
                    &mut out,
                    code,
                    "application/json",
                    body.to_string().as_bytes(),
                    false,
                );
                return;
            }
            Reply::Hang => {
                std::thread::sleep(Duration::from_secs(120));
                return;
            }
            Reply::Drop => return,
            Reply::Text(text) => {
                let blocks = vec![json!({"type": "text", "text": text})];
                let _ = answer(&mut out, &model, blocks, "end_turn", stream);
                return;
            }
            Reply::Tool { name, input } => {
                // pi's shell tool is `bash` (with a timeout); Claude Code's is `Bash`.
                let offers = |n: &str| {
                    body["tools"]
                        .as_array()
                        .is_some_and(|t| t.iter().any(|t| t["name"] == n))
                };
                let (name, input) = if name == "Bash" && !offers("Bash") && offers("bash") {
                    let mut input = input;
                    input["timeout"] = 60.into();
                    ("bash".to_owned(), input)
                } else {
                    (name, input)
                };
                let blocks = vec![
                    json!({"type": "tool_use", "id": format!("toolu_{turn:02}"), "name": name, "input": input}),
                ];
                let _ = answer(&mut out, &model, blocks, "tool_use", stream);
                return;
            }
        }
    }
}

/// The reply the script gives the `turn`-th turn of a conversation asking `asked`, the request
/// logged as seen.
#[allow(clippy::too_many_arguments)]
fn scripted(
    req: &Request,
    body: &Value,
    model: &str,
    asked: &str,
    turn: usize,
    tool_results: Vec<String>,
    seen: &Mutex<Vec<Seen>>,
    rules: &Mutex<Vec<Rule>>,
) -> Reply {
    let rule = rules
        .lock()
        .unwrap()
        .iter()
        .find(|r| r.take(asked))
        .cloned();
    seen.lock().unwrap().push(Seen {
        at: std::time::Instant::now(),
        model: model.to_owned(),
        rule: rule.as_ref().map(|r| r.when.clone()),
        turn,
        authorization: req
            .headers
            .iter()
            .any(|(k, _)| k == "x-api-key" || k == "authorization"),
        credential: req.headers.iter().find_map(|(k, v)| match k.as_str() {
            "x-api-key" => Some(v.clone()),
            "authorization" => v.strip_prefix("Bearer ").map(str::to_owned),
            _ => None,
        }),
        tool_results,
        tools: tool_names(body),
        body: body.clone(),
    });
    rule.and_then(|r| r.turns.get(turn).cloned())
        .unwrap_or_else(|| Reply::Text("Nothing is scripted for this.".into()))
}

/// The names of the tools a request offers: Anthropic's `tools[].name`; OpenAI's function tools'
/// `name`, and a namespace's tools as `<namespace>.<name>`.
fn tool_names(body: &Value) -> Vec<String> {
    let mut names = Vec::new();
    for tool in body["tools"].as_array().into_iter().flatten() {
        if let Some(name) = tool["name"].as_str() {
            names.push(name.to_owned());
        }
        for inner in tool["tools"].as_array().into_iter().flatten() {
            if let Some(name) = inner["name"].as_str() {
                names.push(format!("{}.{name}", tool["name"].as_str().unwrap_or("")));
            }
        }
    }
    names
}

/// OpenAI's Responses API, streamed, as Codex speaks it: the conversation is `input`; a turn is a
/// `function_call` the model already made; a Bash reply becomes a call of Codex's own shell tool.
fn responses(
    out: &mut TcpStream,
    body: &Value,
    req: &Request,
    seen: &Mutex<Vec<Seen>>,
    rules: &Mutex<Vec<Rule>>,
) {
    let input = body["input"].as_array().cloned().unwrap_or_default();
    let asked: String = input
        .iter()
        .filter(|i| i["role"] == "user")
        .map(Value::to_string)
        .collect();
    let turn = input
        .iter()
        .filter(|i| i["type"] == "function_call")
        .count();
    let model = body["model"].as_str().unwrap_or("gpt-mock").to_owned();
    let results = input
        .iter()
        .filter(|i| i["type"] == "function_call_output")
        .map(|i| match &i["output"] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect();
    let item = match scripted(req, body, &model, &asked, turn, results, seen, rules) {
        Reply::Status(code) => {
            let body =
                json!({"error": {"message": format!("mock status {code}"), "type": "mock_error"}});
            let _ = respond(
                out,
                code,
                "application/json",
                body.to_string().as_bytes(),
                false,
            );
            return;
        }
        Reply::Hang => {
            std::thread::sleep(Duration::from_secs(120));
            return;
        }
        Reply::Drop => return,
        Reply::Text(text) => {
            json!({"id": "msg_mock", "type": "message", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}]})
        }
        Reply::Tool { name, input } => {
            let tools: Vec<String> = body["tools"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|t| t["name"].as_str().map(str::to_owned))
                .collect();
            let command = input["command"].as_str().unwrap_or("true").to_owned();
            // An MCP tool Codex defers (its server's namespace named to the model, the tool found
            // by `tool_search`): called in its namespace, `mcp__<server>`.
            if let Some((server, tool)) = name
                .strip_prefix("mcp__")
                .and_then(|rest| rest.split_once("__"))
                .filter(|_| !tools.contains(&name))
            {
                let item = json!({"id": format!("fc_{turn:02}"), "type": "function_call", "status": "completed",
                    "call_id": format!("call_{turn:02}"), "namespace": format!("mcp__{server}"), "name": tool,
                    "arguments": input.to_string()});
                return stream_item(out, &model, item);
            }
            let (name, arguments) = if name == "Bash" && tools.iter().any(|t| t == "exec_command") {
                ("exec_command".to_owned(), json!({"cmd": command}))
            } else if name == "Bash" && tools.iter().any(|t| t == "shell") {
                (
                    "shell".to_owned(),
                    json!({"command": ["bash", "-lc", command]}),
                )
            } else {
                (name, input)
            };
            json!({"id": format!("fc_{turn:02}"), "type": "function_call", "status": "completed",
                "call_id": format!("call_{turn:02}"), "name": name, "arguments": arguments.to_string()})
        }
    };
    stream_item(out, &model, item);
}

/// One output item of a response, streamed as the Responses API streams it.
fn stream_item(out: &mut TcpStream, model: &str, item: Value) {
    let _ = (|| -> std::io::Result<()> {
        write!(
            out,
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n"
        )?;
        let mut n = 0;
        let mut event = |name: &str, mut data: Value| -> std::io::Result<()> {
            data["type"] = name.into();
            data["sequence_number"] = n.into();
            n += 1;
            write!(out, "event: {name}\ndata: {data}\n\n")?;
            out.flush()
        };
        let base = json!({"id": "resp_mock", "object": "response", "created_at": 0, "status": "in_progress",
            "model": model, "output": [], "usage": null});
        event("response.created", json!({"response": base}))?;
        event(
            "response.output_item.added",
            json!({"output_index": 0, "item": item}),
        )?;
        event(
            "response.output_item.done",
            json!({"output_index": 0, "item": item}),
        )?;
        let mut done = base;
        done["status"] = "completed".into();
        done["output"] = json!([item]);
        done["usage"] = json!({"input_tokens": 120, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 30, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 150});
        event("response.completed", json!({"response": done}))
    })();
}

fn respond(
    out: &mut TcpStream,
    code: u16,
    content_type: &str,
    body: &[u8],
    keep_alive: bool,
) -> std::io::Result<()> {
    let reason = match code {
        200 => "OK",
        429 => "Too Many Requests",
        529 => "Overloaded",
        _ => "Internal Server Error",
    };
    write!(
        out,
        "HTTP/1.1 {code} {reason}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: {}\r\n\r\n",
        body.len(),
        if keep_alive { "keep-alive" } else { "close" }
    )?;
    out.write_all(body)?;
    out.flush()
}

/// A new id for each message: Claude Code merges assistant messages that share an id (the blocks
/// of one streamed message), so two answers with one id would read as one turn to it.
fn message_id() -> String {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("msg_mock_{n:04}")
}

/// A message of these content blocks: one JSON object, or its stream of events.
fn answer(
    out: &mut TcpStream,
    model: &str,
    blocks: Vec<Value>,
    stop: &str,
    stream: bool,
) -> std::io::Result<()> {
    let usage = json!({"input_tokens": 120, "output_tokens": 30});
    let id = message_id();
    if !stream {
        let message = json!({"id": id, "type": "message", "role": "assistant", "model": model,
            "content": blocks, "stop_reason": stop, "stop_sequence": null, "usage": usage});
        return respond(
            out,
            200,
            "application/json",
            message.to_string().as_bytes(),
            false,
        );
    }
    write!(
        out,
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n"
    )?;
    let mut event = |name: &str, data: Value| -> std::io::Result<()> {
        write!(out, "event: {name}\ndata: {data}\n\n")?;
        out.flush()
    };
    event(
        "message_start",
        json!({"type": "message_start", "message": {"id": id, "type": "message", "role": "assistant",
            "model": model, "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 120, "output_tokens": 1}}}),
    )?;
    for (index, block) in blocks.iter().enumerate() {
        match block["type"].as_str() {
            Some("text") => {
                event(
                    "content_block_start",
                    json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
                )?;
                event(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": block["text"]}}),
                )?;
            }
            _ => {
                event(
                    "content_block_start",
                    json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}}),
                )?;
                event(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": block["input"].to_string()}}),
                )?;
            }
        }
        event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        )?;
    }
    event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": 30}}),
    )?;
    event("message_stop", json!({"type": "message_stop"}))
}
