//! Claude Code's side of the guard (SPEC 24.11): its `PreToolUse` hook input as a [`Call`], a
//! decision as its hook output, and the settings that install the hook (merged into a
//! repository's `.claude/settings.json` by `iced init --host claude`, or written for one agent
//! start of the loop and passed with `--settings`).

use super::{Call, Change, Problem, Replace};
use crate::guard::{Decision, Verdict};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::path::Path;

/// The tools the hook is asked about: the writing ones and the shell.
pub const MATCHER: &str = "Write|Edit|MultiEdit|NotebookEdit|Bash";

/// What Claude Code sends a `PreToolUse` hook on standard input (the fields the guard reads).
#[derive(Debug, Deserialize)]
pub struct HookInput {
    pub tool_name: String,
    #[serde(default)]
    pub tool_input: Value,
    pub cwd: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WriteInput {
    file_path: String,
    content: String,
}

#[derive(Debug, Deserialize)]
struct EditInput {
    file_path: String,
    old_string: String,
    new_string: String,
    #[serde(default)]
    replace_all: bool,
}

#[derive(Debug, Deserialize)]
struct MultiEditInput {
    file_path: String,
    edits: Vec<EditStep>,
}

#[derive(Debug, Deserialize)]
struct EditStep {
    old_string: String,
    new_string: String,
    #[serde(default)]
    replace_all: bool,
}

#[derive(Debug, Deserialize)]
struct NotebookInput {
    notebook_path: String,
}

#[derive(Debug, Deserialize)]
struct BashInput {
    command: String,
}

fn input_problem(reason: String) -> Problem {
    Problem {
        code: "guard-input",
        reason,
        remedy: "this is Claude Code's PreToolUse hook: run it from the hook, which sends the tool call on standard input".into(),
    }
}

impl HookInput {
    pub fn parse(bytes: &[u8]) -> Result<HookInput, Problem> {
        serde_json::from_slice(bytes)
            .map_err(|e| input_problem(format!("the hook input is not valid: {e}")))
    }

    /// The tool call: `Write`, `Edit`, `MultiEdit` and `NotebookEdit` are writes, `Bash` a shell
    /// command, anything else a read.
    pub fn call(&self) -> Result<Call, Problem> {
        fn typed<T: serde::de::DeserializeOwned>(tool: &str, v: &Value) -> Result<T, Problem> {
            T::deserialize(v)
                .map_err(|e| input_problem(format!("`{tool}`'s input is not valid: {e}")))
        }
        let tool = self.tool_name.as_str();
        let v = &self.tool_input;
        Ok(match tool {
            "Write" => {
                let w: WriteInput = typed(tool, v)?;
                Call::Write {
                    path: w.file_path,
                    change: Change::Content(w.content),
                }
            }
            "Edit" => {
                let e: EditInput = typed(tool, v)?;
                Call::Write {
                    path: e.file_path,
                    change: Change::Sequential(vec![Replace {
                        old: e.old_string,
                        new: e.new_string,
                        all: e.replace_all,
                    }]),
                }
            }
            "MultiEdit" => {
                let m: MultiEditInput = typed(tool, v)?;
                Call::Write {
                    path: m.file_path,
                    change: Change::Sequential(
                        m.edits
                            .into_iter()
                            .map(|e| Replace {
                                old: e.old_string,
                                new: e.new_string,
                                all: e.replace_all,
                            })
                            .collect(),
                    ),
                }
            }
            "NotebookEdit" => {
                let n: NotebookInput = typed(tool, v)?;
                Call::Write {
                    path: n.notebook_path,
                    change: Change::Unknown,
                }
            }
            "Bash" => {
                let b: BashInput = typed(tool, v)?;
                Call::Shell { command: b.command }
            }
            other => Call::Read {
                tool: other.to_owned(),
            },
        })
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct SpecificOutput<'a> {
    hook_event_name: &'static str,
    permission_decision: &'static str,
    permission_decision_reason: &'a str,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct HookOutput<'a> {
    hook_specific_output: SpecificOutput<'a>,
}

/// Claude Code's answer to a `PreToolUse` hook: `notify` is `allow` with its reason shown.
pub fn output(verdict: Verdict, reason: &str) -> String {
    let decision = match verdict {
        Verdict::Allow | Verdict::Notify => "allow",
        Verdict::Ask => "ask",
        Verdict::Deny => "deny",
    };
    let out = HookOutput {
        hook_specific_output: SpecificOutput {
            hook_event_name: "PreToolUse",
            permission_decision: decision,
            permission_decision_reason: reason,
        },
    };
    serde_json::to_string(&out).expect("a hook output serialises")
}

/// The answer for a decision of the guard.
pub fn decision_output(d: &Decision) -> String {
    output(d.verdict, &format!("iced guard ({}): {}", d.rule, d.reason))
}

/// The answer when the call could not be judged: denied, never allowed.
pub fn problem_output(p: &Problem) -> String {
    output(
        Verdict::Deny,
        &format!(
            "iced guard could not judge this call ({}): {} Next step: {}.",
            p.code,
            p.reason,
            p.remedy.trim_end_matches('.')
        ),
    )
}

/// The hook's command line: the iced binary by its absolute path, shell-quoted (Claude Code runs
/// hook commands through a shell).
pub fn hook_command(iced: &Path) -> String {
    let exe = iced.display().to_string();
    let quoted = shlex::try_quote(&exe).map_or_else(
        |_| format!("'{}'", exe.replace('\'', "'\\''")),
        |q| q.into_owned(),
    );
    format!("{quoted} hook claude")
}

/// One `PreToolUse` entry running `command`.
fn entry(command: &str) -> Value {
    json!({"matcher": MATCHER, "hooks": [{"type": "command", "command": command}]})
}

/// A settings file holding only the hook (for `--settings`).
pub fn settings_with_hook(command: &str) -> String {
    let settings = json!({"hooks": {"PreToolUse": [entry(command)]}});
    let mut text = serde_json::to_string_pretty(&settings).expect("settings serialise");
    text.push('\n');
    text
}

/// The settings file of one agent start, in its activity's folder.
pub const AGENT_SETTINGS: &str = "claude-settings.json";

/// Write the settings of one agent start into its activity's folder (created 0700; the file
/// 0600, never through a symbolic link): only the hook, running this iced binary by its absolute
/// path. Written again, with the same bytes, when a start is redone after a crash.
pub fn write_agent_settings(
    dir: &Path,
    iced: &Path,
) -> Result<std::path::PathBuf, crate::store::StoreError> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| crate::store::StoreError::io("create directory", dir, e))?;
    let path = dir.join(AGENT_SETTINGS);
    crate::store::write_atomic(
        &path,
        settings_with_hook(&hook_command(iced)).as_bytes(),
        0o600,
    )?;
    Ok(path)
}

/// Why a settings file cannot take the hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotAnObject(pub String);

/// `existing` settings (none for a new file) with the hook added once: every other key, and
/// every other hook, kept as it was. `None` when the hook is already there.
pub fn merge_hook(existing: Option<&str>, command: &str) -> Result<Option<String>, NotAnObject> {
    let mut settings: Map<String, Value> = match existing {
        None => Map::new(),
        Some(text) if text.trim().is_empty() => Map::new(),
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(map)) => map,
            Ok(_) => return Err(NotAnObject("it is JSON, but not an object".into())),
            Err(e) => return Err(NotAnObject(format!("it is not valid JSON: {e}"))),
        },
    };
    let hooks = settings
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(hooks) = hooks else {
        return Err(NotAnObject("its `hooks` is not an object".into()));
    };
    let pre = hooks
        .entry("PreToolUse")
        .or_insert_with(|| Value::Array(Vec::new()));
    let Value::Array(pre) = pre else {
        return Err(NotAnObject("its `hooks.PreToolUse` is not a list".into()));
    };
    let present = pre.iter().any(|e| {
        e["hooks"].as_array().is_some_and(|hs| {
            hs.iter().any(|h| {
                h["command"].as_str().is_some_and(|c| {
                    c.trim() == command
                        || c.trim_end().ends_with(" hook claude") && c.contains("iced")
                })
            })
        })
    });
    if present {
        return Ok(None);
    }
    pre.push(entry(command));
    let mut text =
        serde_json::to_string_pretty(&Value::Object(settings)).expect("settings serialise");
    text.push('\n');
    Ok(Some(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(tool: &str, input: Value) -> Result<Call, Problem> {
        HookInput::parse(
            json!({"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": input, "cwd": "/r"})
                .to_string()
                .as_bytes(),
        )
        .unwrap()
        .call()
    }

    #[test]
    fn each_tool_is_a_write_a_shell_command_or_a_read() {
        assert_eq!(
            call("Write", json!({"file_path": "/r/a", "content": "x"})).unwrap(),
            Call::Write {
                path: "/r/a".into(),
                change: Change::Content("x".into())
            }
        );
        assert_eq!(
            call("Edit", json!({"file_path": "/r/a", "old_string": "x", "new_string": "y", "replace_all": true})).unwrap(),
            Call::Write {
                path: "/r/a".into(),
                change: Change::Sequential(vec![Replace { old: "x".into(), new: "y".into(), all: true }])
            }
        );
        assert_eq!(
            call("MultiEdit", json!({"file_path": "/r/a", "edits": [{"old_string": "x", "new_string": "y"}, {"old_string": "y", "new_string": "z"}]})).unwrap(),
            Call::Write {
                path: "/r/a".into(),
                change: Change::Sequential(vec![
                    Replace { old: "x".into(), new: "y".into(), all: false },
                    Replace { old: "y".into(), new: "z".into(), all: false }
                ])
            }
        );
        assert_eq!(
            call(
                "NotebookEdit",
                json!({"notebook_path": "/r/n.ipynb", "new_source": "x"})
            )
            .unwrap(),
            Call::Write {
                path: "/r/n.ipynb".into(),
                change: Change::Unknown
            }
        );
        assert_eq!(
            call("Bash", json!({"command": "ls", "description": "list"})).unwrap(),
            Call::Shell {
                command: "ls".into()
            }
        );
        assert_eq!(
            call("Read", json!({"file_path": "/r/a"})).unwrap(),
            Call::Read {
                tool: "Read".into()
            }
        );
        assert_eq!(
            call("Write", json!({"file_path": "/r/a"}))
                .unwrap_err()
                .code,
            "guard-input"
        );
        assert_eq!(call("Bash", json!("ls")).unwrap_err().code, "guard-input");
        assert!(HookInput::parse(b"{").is_err());
        assert!(HookInput::parse(b"{\"tool_input\": {}}").is_err());
    }

    #[test]
    fn the_output_is_claude_codes_shape() {
        let out: Value = serde_json::from_str(&output(Verdict::Notify, "why")).unwrap();
        assert_eq!(
            out,
            json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow", "permissionDecisionReason": "why"}})
        );
        let out: Value =
            serde_json::from_str(&problem_output(&input_problem("bad".into()))).unwrap();
        assert_eq!(out["hookSpecificOutput"]["permissionDecision"], "deny");
    }

    #[test]
    fn the_hook_is_merged_once_and_everything_else_kept() {
        let cmd = hook_command(Path::new("/opt/my tools/iced"));
        assert_eq!(cmd, "'/opt/my tools/iced' hook claude");
        let fresh = merge_hook(None, &cmd).unwrap().unwrap();
        let v: Value = serde_json::from_str(&fresh).unwrap();
        assert_eq!(v["hooks"]["PreToolUse"][0]["matcher"], MATCHER);
        assert_eq!(v["hooks"]["PreToolUse"][0]["hooks"][0]["command"], cmd);
        assert_eq!(merge_hook(Some(&fresh), &cmd).unwrap(), None);
        let existing = r#"{"model": "x", "permissions": {"allow": ["Bash(ls)"]}, "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "lint"}]}], "Stop": []}}"#;
        let merged: Value = serde_json::from_str(
            &merge_hook(Some(existing), "iced hook claude")
                .unwrap()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(merged["model"], "x");
        assert_eq!(merged["permissions"]["allow"][0], "Bash(ls)");
        assert_eq!(merged["hooks"]["Stop"], json!([]));
        assert_eq!(merged["hooks"]["PreToolUse"].as_array().unwrap().len(), 2);
        assert_eq!(
            merged["hooks"]["PreToolUse"][0]["hooks"][0]["command"],
            "lint"
        );
        for bad in [
            "[1]",
            "{",
            "{\"hooks\": 3}",
            "{\"hooks\": {\"PreToolUse\": {}}}",
        ] {
            assert!(merge_hook(Some(bad), "iced hook claude").is_err(), "{bad}");
        }
    }
}
