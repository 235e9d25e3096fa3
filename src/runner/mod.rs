//! Harness runners (SPEC 20.8): how a coding-agent harness run headless is started, and what its
//! machine output says about the run: argv from an invocation, a result from bytes (one module per
//! harness), an answer from a final message, redaction. Nothing here starts a process; only
//! `transcript_of` looks at the file system, to find where a harness kept a session, and `home`
//! seeds a confined agent's harness home with copies of the person's login files.

use serde::Serialize;
use serde_json::Value;
use std::path::{Path, PathBuf};

mod claude;
mod codex;
pub mod home;
mod pi;

pub use pi::pi_session_usage;

/// Which harness a runner is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An argv template (SPEC 20.1); its output is not read.
    Command,
    Claude,
    Codex,
    Pi,
}

impl Kind {
    pub fn parse(text: &str) -> Option<Kind> {
        match text {
            "command" => Some(Kind::Command),
            "claude" => Some(Kind::Claude),
            "codex" => Some(Kind::Codex),
            "pi" => Some(Kind::Pi),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Command => "command",
            Kind::Claude => "claude",
            Kind::Codex => "codex",
            Kind::Pi => "pi",
        }
    }

    pub fn is_harness(self) -> bool {
        self != Kind::Command
    }

    /// The prefixes of the variables of iced's environment this harness reads for its credentials
    /// and endpoints, kept in its child's environment.
    pub fn credential_prefixes(self) -> &'static [&'static str] {
        match self {
            Kind::Command => &[],
            Kind::Claude => &["ANTHROPIC_", "CLAUDE_"],
            Kind::Codex => &["OPENAI_", "CODEX_"],
            Kind::Pi => &["PI_", "ANTHROPIC_", "OPENAI_"],
        }
    }
}

/// What one start of a harness is for.
#[derive(Debug, Clone)]
pub struct Invocation<'a> {
    pub program: &'a str,
    /// Validators and the refuter read; only the implementer writes.
    pub read_only: bool,
    pub model: Option<&'a str>,
    /// The reasoning effort (SPEC 11: `verify.effort`, a model's `:level`), one the kind takes.
    pub effort: Option<&'a str>,
    /// The harness session's id, where the harness lets the caller choose it.
    pub session_id: &'a str,
    pub max_turns: Option<u32>,
    /// Whether the harness keeps a transcript of the session (claude: `--no-session-persistence`
    /// when not).
    pub transcripts: bool,
    pub extra_args: &'a [String],
    /// The git directories an implementer commits into: the repository's, and its worktree's
    /// own (codex's sandbox keeps them read-only unless named, the worktree's even when the
    /// repository's is).
    pub git_dirs: &'a [String],
    /// A settings file that installs the guard's hook (claude: `--settings`, SPEC 24.11).
    pub settings: Option<&'a str>,
    /// iced's MCP server for this agent (SPEC 20.8), given by claude and codex; the tools allowed
    /// follow `read_only`.
    pub mcp: Option<&'a McpServer>,
    /// The loop confines the agent itself (SPEC 24.12): codex's own sandbox, which cannot start
    /// inside that confinement, is off.
    pub confined: bool,
}

/// iced's MCP server as a harness starts it (SPEC 20.8, 20.18): the running iced and its
/// arguments (`mcp --repo <root> --role <role> --run <run> --lane <lane>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServer {
    pub program: String,
    pub args: Vec<String>,
}

/// The name the server is registered by, in every harness.
pub const MCP_SERVER: &str = "iced";
/// The MCP tools of a validator or the refuter (SPEC 20.18: the read tools).
pub const MCP_READ_TOOLS: &[&str] = &["iced_status", "iced_run_show", "iced_handover"];
/// The MCP tools of a lane's implementer.
pub const MCP_IMPLEMENTER_TOOLS: &[&str] = &[
    "iced_status",
    "iced_run_show",
    "iced_handover",
    "iced_decision",
    "iced_questions",
    "iced_escalate",
    "iced_submit",
];

impl McpServer {
    /// The tools of the role the server is started in.
    fn tools(read_only: bool) -> &'static [&'static str] {
        if read_only {
            MCP_READ_TOOLS
        } else {
            MCP_IMPLEMENTER_TOOLS
        }
    }

    /// Claude Code's `--mcp-config` value: the one server, as JSON.
    fn claude_config(&self) -> String {
        serde_json::json!({"mcpServers": {MCP_SERVER: {
            "type": "stdio",
            "command": self.program,
            "args": self.args,
        }}})
        .to_string()
    }
}

/// `text` as a TOML basic string (a codex `-c` value): JSON's escapes are TOML's, and DEL, which
/// JSON leaves as it is, is escaped too.
fn toml_string(text: &str) -> String {
    serde_json::to_string(text)
        .expect("a string serialises")
        .replace('\u{7f}', "\\u007F")
}

/// The tools a claude implementer may use, unattended.
const CLAUDE_WRITE_TOOLS: &str = "Bash,Edit,Write,Read,Glob,Grep";
/// The tools a claude validator may use: reading only.
const CLAUDE_READ_TOOLS: &str = "Read,Glob,Grep";
/// The implementer's tools the guard's hook judges (its matcher, SPEC 24.11): a denial of one of
/// them is the guard's, not a missing tool.
const CLAUDE_GUARDED_TOOLS: &[&str] = &["Bash", "Edit", "Write"];

/// The argv that starts the harness; the prompt goes to its standard input.
pub fn argv(kind: Kind, inv: &Invocation<'_>) -> Vec<String> {
    let mut argv: Vec<String> = vec![inv.program.to_owned()];
    let mut push = |items: &[&str]| argv.extend(items.iter().map(|s| (*s).to_owned()));
    match kind {
        Kind::Command => {}
        Kind::Claude => {
            push(&[
                "-p",
                "--output-format",
                "json",
                "--permission-mode",
                "dontAsk",
            ]);
            push(&["--session-id", inv.session_id]);
            let tools = if inv.read_only {
                CLAUDE_READ_TOOLS
            } else {
                CLAUDE_WRITE_TOOLS
            };
            match inv.mcp {
                None => push(&["--allowedTools", tools]),
                Some(server) => {
                    let mut allowed = tools.to_owned();
                    for tool in McpServer::tools(inv.read_only) {
                        allowed.push_str(&format!(",mcp__{MCP_SERVER}__{tool}"));
                    }
                    push(&["--allowedTools", &allowed]);
                    // `--mcp-config` takes several values: the next flag ends them.
                    push(&[
                        "--mcp-config",
                        &server.claude_config(),
                        "--strict-mcp-config",
                    ]);
                }
            }
            if let Some(settings) = inv.settings {
                push(&["--settings", settings]);
            }
            if let Some(model) = inv.model {
                push(&["--model", model]);
            }
            if let Some(effort) = inv.effort {
                push(&["--effort", effort]);
            }
            if let Some(turns) = inv.max_turns {
                argv.push("--max-turns".into());
                argv.push(turns.to_string());
            }
            if !inv.transcripts {
                argv.push("--no-session-persistence".into());
            }
        }
        Kind::Codex => {
            push(&["exec", "--json", "--skip-git-repo-check"]);
            // Codex's sandbox is bubblewrap, which must write `/proc/self/uid_map` and `/tmp` to
            // start: inside the loop's confinement every command would fail, and 0.171 refuses
            // its Landlock-only fallback. The confinement bounds what the agent writes instead.
            let sandbox = if inv.confined {
                "danger-full-access"
            } else if inv.read_only {
                "read-only"
            } else {
                "workspace-write"
            };
            push(&["--sandbox", sandbox]);
            if sandbox == "workspace-write" {
                for dir in inv.git_dirs {
                    push(&["--add-dir", dir]);
                }
            }
            if let Some(model) = inv.model {
                push(&["--model", model]);
            }
            if let Some(effort) = inv.effort {
                argv.push("-c".into());
                argv.push(format!("model_reasoning_effort={effort}"));
            }
            if let Some(server) = inv.mcp {
                let args: Vec<String> = server.args.iter().map(|a| toml_string(a)).collect();
                let key = format!("mcp_servers.{MCP_SERVER}");
                for setting in [
                    format!("{key}.command={}", toml_string(&server.program)),
                    format!("{key}.args=[{}]", args.join(", ")),
                    // `codex exec` has nobody to approve a tool call.
                    format!("{key}.default_tools_approval_mode=\"approve\""),
                ] {
                    argv.push("-c".into());
                    argv.push(setting);
                }
            }
        }
        Kind::Pi => {
            // `--no-approve`: no extension or setting from the repository under work is loaded.
            push(&["-p", "--mode", "json", "--no-approve"]);
            push(&["--session-id", inv.session_id]);
            if inv.read_only {
                push(&["--tools", "read"]);
            }
            if let Some(model) = inv.model {
                push(&["--model", model]);
            }
            if let Some(effort) = inv.effort {
                push(&["--thinking", effort]);
            }
            if !inv.transcripts {
                push(&["--no-session"]);
            }
        }
    }
    argv.extend(inv.extra_args.iter().cloned());
    if kind == Kind::Codex {
        // The prompt: standard input.
        argv.push("-".into());
    }
    argv
}

/// A nonce (hex) written as a UUID, for harnesses that take a session id of that form.
pub fn session_id(nonce: &str) -> String {
    let hex: String = nonce
        .chars()
        .filter(char::is_ascii_hexdigit)
        .chain(std::iter::repeat('0'))
        .take(32)
        .collect::<String>()
        .to_ascii_lowercase();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// What a harness said about its run.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct HarnessResult {
    pub session_id: Option<String>,
    /// The model the harness reports it used.
    pub model: Option<String>,
    pub turns: Option<u64>,
    /// `None` is unknown: the harness reported no cost, or zero usage after failing.
    #[serde(serialize_with = "cost_or_unknown")]
    pub cost_usd: Option<f64>,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub is_error: bool,
    /// Why the run failed, in a few words.
    pub error: Option<String>,
    /// HTTP 429 or an overload: the provider asks to slow down.
    pub rate_limited: bool,
    /// Tools the harness refused the agent.
    pub permission_denials: u64,
    /// Of those, calls of tools the agent is allowed: only the guard's hook (SPEC 24.11), or a
    /// deny rule of the repository's own settings, refuses them. The agent was told why and what
    /// to do instead, and the receipt checks what it did.
    pub guard_denials: u64,
    /// The agent's final message.
    #[serde(skip)]
    pub final_text: Option<String>,
}

fn cost_or_unknown<S: serde::Serializer>(cost: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    match cost {
        Some(c) => s.serialize_f64(*c),
        None => s.serialize_str("unknown"),
    }
}

impl HarnessResult {
    /// Whether the run failed for the role it was started in (SPEC 20.8): an implementer denied a
    /// tool it was not given did not do its work; one the guard refused a call is judged by its
    /// receipt.
    pub fn failed(&self, read_only: bool) -> bool {
        self.is_error || (!read_only && self.permission_denials > self.guard_denials)
    }

    /// What the step's outcome records (`harness`).
    pub fn to_value(&self) -> Value {
        let mut v = serde_json::to_value(self).expect("a result serialises");
        if let Some(map) = v.as_object_mut() {
            map.retain(|_, v| !v.is_null());
        }
        v
    }
}

/// Read a harness's machine output (the tail of its standard output). `None` when no result is
/// found: the run failed.
pub fn parse(kind: Kind, stdout: &str) -> Option<HarnessResult> {
    let mut result = match kind {
        Kind::Command => None,
        Kind::Claude => claude::parse(stdout),
        Kind::Codex => codex::parse(stdout),
        Kind::Pi => pi::parse(stdout),
    }?;
    result.cost_usd = result.cost_usd.and_then(cost);
    Some(result)
}

/// A cost a harness reported, when it is one (SPEC 20.12): a negative, NaN or infinite one is
/// unknown, and is charged as an unknown cost is, never paid back to a budget.
pub fn cost(usd: f64) -> Option<f64> {
    (usd.is_finite() && usd >= 0.0).then_some(usd)
}

/// JSON objects, one per line; lines that are not objects are skipped (a tail may begin mid-line).
fn objects(stdout: &str) -> impl Iterator<Item = Value> + '_ {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
        .filter(Value::is_object)
}

/// A harness's error message, short: its first line, at most `max` characters.
fn short(message: &str, max: usize) -> String {
    message
        .lines()
        .next()
        .unwrap_or("")
        .chars()
        .take(max)
        .collect()
}

fn u64_at(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
}

/// The answer in an agent's final message: its one fenced block marked `json`. None, or more than
/// one, is no answer.
pub fn fenced_json(text: &str) -> Option<String> {
    let mut blocks = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let open = line.trim_start();
        let Some(rest) = open.strip_prefix("```") else {
            continue;
        };
        if rest.trim() != "json" {
            // Another fenced block: skip to its end.
            for l in lines.by_ref() {
                if l.trim_start().starts_with("```") {
                    break;
                }
            }
            continue;
        }
        let mut body = Vec::new();
        let mut closed = false;
        for l in lines.by_ref() {
            if l.trim_start().starts_with("```") {
                closed = true;
                break;
            }
            body.push(l);
        }
        if closed {
            blocks.push(body.join("\n"));
        }
    }
    match blocks.as_slice() {
        [one] => Some(format!("{}\n", one.trim())),
        _ => None,
    }
}

/// `text` with secrets replaced by `<redacted>`: every value in `secrets` (8 characters or more),
/// API keys by their shape (`sk-` followed by 16 or more key characters), and what follows
/// `Bearer ` in an authorization header.
pub fn redact(text: &str, secrets: &[String]) -> String {
    let mut out = text.to_owned();
    for s in secrets.iter().filter(|s| s.len() >= 8) {
        out = out.replace(s.as_str(), "<redacted>");
    }
    let key_char = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    let mut result = String::with_capacity(out.len());
    let mut rest = out.as_str();
    loop {
        let next = [("sk-", 16usize), ("Bearer ", 8)]
            .iter()
            .filter_map(|(p, min)| rest.find(p).map(|at| (at, *p, *min)))
            .min_by_key(|(at, _, _)| *at);
        let Some((at, prefix, min)) = next else {
            result.push_str(rest);
            break;
        };
        let after = &rest[at + prefix.len()..];
        let len = after.find(|c: char| !key_char(c)).unwrap_or(after.len());
        // A key starts a word: `task-...` is not one.
        let starts_word = rest[..at].chars().last().is_none_or(|c| !key_char(c));
        if len >= min && starts_word {
            result.push_str(&rest[..at]);
            result.push_str(prefix);
            result.push_str("<redacted>");
        } else {
            result.push_str(&rest[..at + prefix.len()]);
            result.push_str(&after[..len]);
        }
        rest = &after[len..];
    }
    result
}

/// Where a harness whose home is `home` (SPEC 20.8: a confined agent's own, else the person's,
/// [`home::home_of`]) keeps the transcript of session `session`: Claude Code's
/// `projects/<folder>/<session>.jsonl`; Codex's `sessions/<y>/<m>/<d>/rollout-<time>-<session>.jsonl`;
/// pi's `sessions/<folder>/<time>_<session>.jsonl`. No link below `home` is followed: an agent
/// writes its home, and must not point the loop at a file elsewhere.
pub fn transcript_of(kind: Kind, session: &str, home: &Path) -> Option<PathBuf> {
    if session.is_empty() || session.contains('/') {
        return None;
    }
    // (the folder, folders down, the file's name begins with, and ends with)
    let (folder, depth, starts, ends) = match kind {
        Kind::Command => return None,
        Kind::Claude => ("projects", 1, "", format!("{session}.jsonl")),
        Kind::Codex => ("sessions", 3, "rollout-", format!("-{session}.jsonl")),
        Kind::Pi => ("sessions", 1, "", format!("_{session}.jsonl")),
    };
    // Claude's file is exactly `<session>.jsonl`; the others' end with the session.
    let name = |n: &str| {
        if kind == Kind::Claude {
            n == ends
        } else {
            n.starts_with(starts) && n.ends_with(&ends)
        }
    };
    // What is in `dir` of the kind `want`, as it is (a link is a link, not what it names).
    let entries = |dir: &PathBuf, want: fn(&std::fs::FileType) -> bool| -> Vec<PathBuf> {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| want(&t)))
            .map(|e| e.path())
            .collect()
    };
    let root = home.join(folder);
    if !std::fs::symlink_metadata(&root).is_ok_and(|m| m.is_dir()) {
        return None;
    }
    // Folders `depth` levels down, then the file.
    let mut dirs = vec![root];
    for _ in 0..depth {
        dirs = dirs
            .iter()
            .flat_map(|d| entries(d, std::fs::FileType::is_dir))
            .collect();
    }
    dirs.iter()
        .flat_map(|d| entries(d, std::fs::FileType::is_file))
        .find(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A recorded output of a harness (`fixtures/harness/<kind>/<name>`).
    pub(crate) fn fixture(kind: &str, name: &str) -> String {
        let path = format!(
            "{}/fixtures/harness/{kind}/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    fn inv(read_only: bool) -> Invocation<'static> {
        Invocation {
            program: "claude",
            read_only,
            model: Some("claude-sonnet-4-5"),
            effort: None,
            session_id: "0badc0de-0000-4000-8000-000000000001",
            max_turns: Some(50),
            transcripts: true,
            extra_args: &[],
            git_dirs: &[],
            settings: None,
            mcp: None,
            confined: false,
        }
    }

    /// SPEC 11: a validator's effort reaches each harness by the option it takes.
    #[test]
    fn an_effort_reaches_each_harness_by_its_own_option() {
        let with = Invocation {
            effort: Some("high"),
            ..inv(true)
        };
        for (kind, expected) in [
            (Kind::Claude, "--effort high"),
            (Kind::Codex, "-c model_reasoning_effort=high"),
            (Kind::Pi, "--thinking high"),
        ] {
            let a = argv(kind, &with).join(" ");
            assert!(a.contains(expected), "{kind:?}: {a}");
            let b = argv(kind, &inv(true)).join(" ");
            assert!(!b.contains("effort") && !b.contains("--thinking"), "{b}");
        }
    }

    #[test]
    fn claude_argv_sets_permissions_tools_and_session() {
        let a = argv(Kind::Claude, &inv(false));
        assert_eq!(a[0], "claude");
        let joined = a.join(" ");
        assert!(joined.contains("-p --output-format json --permission-mode dontAsk"));
        assert!(joined.contains("--session-id 0badc0de-0000-4000-8000-000000000001"));
        assert!(joined.contains("--allowedTools Bash,Edit,Write,Read,Glob,Grep"));
        assert!(joined.contains("--model claude-sonnet-4-5"));
        assert!(joined.contains("--max-turns 50"));
        let v = argv(Kind::Claude, &inv(true)).join(" ");
        assert!(v.contains("--allowedTools Read,Glob,Grep"), "{v}");
        assert!(!v.contains("Bash"), "{v}");
        assert!(!joined.contains("--no-session-persistence"));
        let quiet = Invocation {
            transcripts: false,
            ..inv(false)
        };
        assert!(argv(Kind::Claude, &quiet)
            .join(" ")
            .contains("--no-session-persistence"));
        assert!(!joined.contains("--settings"));
        let guarded = Invocation {
            settings: Some("/run/a/claude-settings.json"),
            ..inv(true)
        };
        assert!(argv(Kind::Claude, &guarded)
            .join(" ")
            .contains("--allowedTools Read,Glob,Grep --settings /run/a/claude-settings.json"));
    }

    /// SPEC 20.8: the server reaches claude as one JSON argument naming only it, with the role's
    /// tools allowed by Claude Code's names, and codex as `-c` overrides in TOML.
    #[test]
    fn each_harness_is_given_the_mcp_server_by_argv() {
        let server = McpServer {
            program: "/opt/ice d/iced".into(),
            args: vec!["mcp".into(), "--repo".into(), "/r/\"q\"".into()],
        };
        let implementer = Invocation {
            mcp: Some(&server),
            ..inv(false)
        };
        let a = argv(Kind::Claude, &implementer);
        let at = a
            .iter()
            .position(|x| x == "--mcp-config")
            .expect("--mcp-config");
        let config: Value = serde_json::from_str(&a[at + 1]).unwrap();
        assert_eq!(
            config,
            serde_json::json!({"mcpServers": {"iced": {"type": "stdio", "command": "/opt/ice d/iced", "args": ["mcp", "--repo", "/r/\"q\""]}}})
        );
        assert_eq!(a[at + 2], "--strict-mcp-config", "ends the variadic flag");
        let joined = a.join(" ");
        assert!(
            joined.contains("--allowedTools Bash,Edit,Write,Read,Glob,Grep,mcp__iced__iced_status,mcp__iced__iced_run_show,mcp__iced__iced_handover,mcp__iced__iced_decision,mcp__iced__iced_questions,mcp__iced__iced_escalate,mcp__iced__iced_submit "),
            "{joined}"
        );
        let reader = argv(
            Kind::Claude,
            &Invocation {
                mcp: Some(&server),
                ..inv(true)
            },
        )
        .join(" ");
        assert!(
            reader.contains("--allowedTools Read,Glob,Grep,mcp__iced__iced_status,mcp__iced__iced_run_show,mcp__iced__iced_handover "),
            "{reader}"
        );
        assert!(!argv(Kind::Claude, &inv(false)).join(" ").contains("mcp"));

        let codex = argv(Kind::Codex, &implementer);
        let overrides: Vec<&str> = codex
            .windows(2)
            .filter(|w| w[0] == "-c")
            .map(|w| w[1].as_str())
            .collect();
        assert_eq!(
            overrides,
            [
                r#"mcp_servers.iced.command="/opt/ice d/iced""#,
                r#"mcp_servers.iced.args=["mcp", "--repo", "/r/\"q\""]"#,
                r#"mcp_servers.iced.default_tools_approval_mode="approve""#,
            ]
        );
        assert_eq!(codex.last().map(String::as_str), Some("-"));
        let pi = Invocation {
            program: "pi",
            ..implementer
        };
        assert!(!argv(Kind::Pi, &pi).join(" ").contains("mcp"));
        assert_eq!(toml_string("a\u{7f}\"\\\n"), r#""a\u007F\"\\\n""#);
    }

    #[test]
    fn codex_reads_its_prompt_from_stdin_and_validators_get_a_read_only_sandbox() {
        let dirs = ["/repo/.git".to_owned(), "/repo/.git/worktrees/l".to_owned()];
        let mut i = inv(true);
        i.program = "codex";
        i.git_dirs = &dirs;
        let a = argv(Kind::Codex, &i);
        assert_eq!(a.last().map(String::as_str), Some("-"));
        assert!(a.join(" ").contains("--sandbox read-only"));
        assert!(
            !a.join(" ").contains("--add-dir"),
            "a validator writes nowhere"
        );
        i.read_only = false;
        let w = argv(Kind::Codex, &i).join(" ");
        assert!(
            w.contains(
                "--sandbox workspace-write --add-dir /repo/.git --add-dir /repo/.git/worktrees/l"
            ),
            "{w}"
        );
        // SPEC 20.8: confined by the loop, codex's own sandbox (which cannot start there) is off,
        // whatever the role.
        for read_only in [false, true] {
            i.read_only = read_only;
            i.confined = true;
            let c = argv(Kind::Codex, &i).join(" ");
            assert!(c.contains("--sandbox danger-full-access -"), "{c}");
            assert!(!c.contains("--add-dir"), "{c}");
        }
    }

    #[test]
    fn pi_loads_nothing_from_the_repository_and_validators_only_read() {
        let mut i = inv(false);
        i.program = "pi";
        let w = argv(Kind::Pi, &i).join(" ");
        assert!(
            w.starts_with("pi -p --mode json --no-approve --session-id 0badc0de-"),
            "{w}"
        );
        assert!(!w.contains("--tools"), "{w}");
        i.read_only = true;
        assert!(argv(Kind::Pi, &i).join(" ").contains("--tools read"));
    }

    #[test]
    fn session_ids_are_uuids_made_of_the_nonce() {
        assert_eq!(
            session_id("54753118fafd4274adabcb75a74d6ea3"),
            "54753118-fafd-4274-adab-cb75a74d6ea3"
        );
        assert_eq!(session_id("ab").len(), 36);
    }

    #[test]
    fn one_fenced_json_block_is_the_answer() {
        let text = "Done.\n\n```json\n{\"verdict\": \"pass\"}\n```\n";
        assert_eq!(
            fenced_json(text).as_deref(),
            Some("{\"verdict\": \"pass\"}\n")
        );
        let two = format!("{text}\n```json\n{{}}\n```\n");
        assert_eq!(fenced_json(&two), None);
        assert_eq!(fenced_json("no block"), None);
        // Another language's block is not the answer, and does not hide the json one.
        let mixed = "```sh\ncargo test\n```\n```json\n{\"a\": 1}\n```";
        assert_eq!(fenced_json(mixed).as_deref(), Some("{\"a\": 1}\n"));
        // An unclosed block is no answer.
        assert_eq!(fenced_json("```json\n{}"), None);
    }

    #[test]
    fn each_harness_transcript_is_found_where_it_keeps_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let made = |rel: &str| {
            let p = root.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, "{}\n").unwrap();
            p
        };
        let claude = made("claude/projects/-tmp-repo/abc-1.jsonl");
        let codex = made("codex/sessions/2026/11/30/rollout-2026-11-30T00-55-01-th-1.jsonl");
        let pi = made("pi/sessions/--tmp-repo--/2026-11-30T00-58-58-480Z_ps-1.jsonl");
        let home = |h: &str| root.join(h);
        assert_eq!(
            transcript_of(Kind::Claude, "abc-1", &home("claude")),
            Some(claude)
        );
        assert_eq!(
            transcript_of(Kind::Codex, "th-1", &home("codex")),
            Some(codex)
        );
        assert_eq!(transcript_of(Kind::Pi, "ps-1", &home("pi")), Some(pi));
        assert_eq!(transcript_of(Kind::Codex, "other", &home("codex")), None);
        assert_eq!(transcript_of(Kind::Claude, "../x", &home("claude")), None);
        assert_eq!(transcript_of(Kind::Command, "abc-1", &home("claude")), None);
    }

    /// An agent writes its harness's home: a link it left there (to a folder, or to a file named
    /// like its session) is not followed to a file elsewhere.
    #[test]
    fn a_transcript_is_not_found_through_a_link_in_the_home() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir_all(elsewhere.join("p")).unwrap();
        std::fs::write(elsewhere.join("p/s-1.jsonl"), "{}\n").unwrap();
        let linked_root = dir.path().join("a");
        std::fs::create_dir(&linked_root).unwrap();
        std::os::unix::fs::symlink(&elsewhere, linked_root.join("projects")).unwrap();
        assert_eq!(transcript_of(Kind::Claude, "s-1", &linked_root), None);
        let linked_folder = dir.path().join("b");
        std::fs::create_dir_all(linked_folder.join("projects")).unwrap();
        std::os::unix::fs::symlink(elsewhere.join("p"), linked_folder.join("projects/p")).unwrap();
        assert_eq!(transcript_of(Kind::Claude, "s-1", &linked_folder), None);
        let linked_file = dir.path().join("c");
        std::fs::create_dir_all(linked_file.join("projects/p")).unwrap();
        std::os::unix::fs::symlink(
            elsewhere.join("p/s-1.jsonl"),
            linked_file.join("projects/p/s-1.jsonl"),
        )
        .unwrap();
        assert_eq!(transcript_of(Kind::Claude, "s-1", &linked_file), None);
        // The same file, where it belongs, is found.
        std::fs::remove_file(linked_file.join("projects/p/s-1.jsonl")).unwrap();
        std::fs::copy(
            elsewhere.join("p/s-1.jsonl"),
            linked_file.join("projects/p/s-1.jsonl"),
        )
        .unwrap();
        assert!(transcript_of(Kind::Claude, "s-1", &linked_file).is_some());
    }

    #[test]
    fn secrets_are_redacted_by_value_and_by_shape() {
        let text = "key sk-ant-api03-abcdefghijklmnopqrstuvwxyz and Authorization: Bearer tok_0123456789abcdef; mine=hunter2-hunter2; task-abcdefghijklmnopqrstu sk-short";
        let out = redact(text, &["hunter2-hunter2".to_owned(), "short".to_owned()]);
        assert_eq!(
            out,
            "key sk-<redacted> and Authorization: Bearer <redacted>; mine=<redacted>; task-abcdefghijklmnopqrstu sk-short"
        );
    }

    #[test]
    fn an_empty_output_has_no_result() {
        for kind in [Kind::Claude, Kind::Codex, Kind::Pi] {
            assert_eq!(parse(kind, ""), None);
            assert_eq!(parse(kind, "not json\n"), None);
        }
    }

    /// Issue 35, why-case 8: a harness reporting a cost of -1000 stretched a budget. A negative
    /// cost, and one past what a float holds (JSON has no NaN; `1e999` reads as infinite where it
    /// reads at all), is unknown; zero and a real cost are kept.
    #[test]
    fn a_cost_that_is_not_one_is_unknown() {
        let success = fixture("claude", "success.json");
        for (cost, known) in [
            ("-1000", None),
            ("-0.01", None),
            ("0", Some(0.0)),
            ("0.25", Some(0.25)),
        ] {
            let text = success.replace(
                "\"total_cost_usd\":0.00162",
                &format!("\"total_cost_usd\":{cost}"),
            );
            assert_ne!(text, success);
            let r = parse(Kind::Claude, &text).unwrap();
            assert_eq!(r.cost_usd, known, "{cost}");
        }
        assert_eq!(cost(f64::NAN), None);
        assert_eq!(cost(f64::INFINITY), None);
        assert_eq!(cost(f64::NEG_INFINITY), None);
        let pi = fixture("pi", "success.jsonl").replace("\"total\":0.", "\"total\":-0.");
        assert_eq!(parse(Kind::Pi, &pi).unwrap().cost_usd, None);
    }
}
