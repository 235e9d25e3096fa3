//! iced's MCP server registered for a host (SPEC 13): merged into Claude Code's `.mcp.json` (JSON,
//! every other key kept in its order) or appended to Codex's `.codex/config.toml` (TOML, the
//! file's bytes kept: only as much of it is read as says whether the entry is there and whether a
//! table can be appended). Pure: text in, text out.

use serde_json::{json, Map, Value};

/// The server's name in every host's config.
const NAME: &str = "iced";

/// `.mcp.json` with the `iced` server added; `None` when it has one already (kept as the person
/// wrote it). An error says why the file cannot take it.
pub fn merge_claude(existing: Option<&str>) -> Result<Option<String>, String> {
    let mut file: Map<String, Value> = match existing {
        None => Map::new(),
        Some(text) if text.trim().is_empty() => Map::new(),
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(map)) => map,
            Ok(_) => return Err("it is JSON, but not an object".into()),
            Err(e) => return Err(format!("it is not valid JSON: {e}")),
        },
    };
    let servers = file
        .entry("mcpServers")
        .or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(servers) = servers else {
        return Err("its `mcpServers` is not an object".into());
    };
    if servers.contains_key(NAME) {
        return Ok(None);
    }
    servers.insert(NAME.into(), json!({"command": "iced", "args": ["mcp"]}));
    let mut text = serde_json::to_string_pretty(&Value::Object(file)).expect("JSON serialises");
    text.push('\n');
    Ok(Some(text))
}

/// The table appended to Codex's config.
const CODEX_TABLE: &str = "[mcp_servers.iced]\ncommand = \"iced\"\nargs = [\"mcp\"]\n";

/// `.codex/config.toml` with the table `[mcp_servers.iced]` appended; `None` when a header or a
/// key already names `mcp_servers.iced`. An error when `mcp_servers` is a value at the top (an
/// inline table, which no table may extend).
pub fn merge_codex(existing: Option<&str>) -> Result<Option<String>, String> {
    let text = existing.unwrap_or("");
    let mut table: Vec<String> = Vec::new();
    let mut multiline: Option<&str> = None;
    for line in text.lines() {
        // Inside a multi-line string nothing is a key or a header.
        if let Some(quote) = multiline {
            if line.matches(quote).count() % 2 == 1 {
                multiline = None;
            }
            continue;
        }
        let line = line.trim();
        if let Some(inner) = line.strip_prefix('[') {
            let inner = inner.trim_start_matches('[');
            let end = outside_quotes(inner, ']').unwrap_or(inner.len());
            table = dotted(&inner[..end]);
            if names_iced(&table) {
                return Ok(None);
            }
            continue;
        }
        let Some(eq) = outside_quotes(line, '=') else {
            continue;
        };
        let mut key = table.clone();
        key.extend(dotted(&line[..eq]));
        if names_iced(&key) {
            return Ok(None);
        }
        if key == ["mcp_servers"] {
            return Err(
                "its `mcp_servers` is a value at the top (an inline table), which the table `[mcp_servers.iced]` cannot extend".into(),
            );
        }
        let value = &line[eq + 1..];
        for quote in ["\"\"\"", "'''"] {
            if value.matches(quote).count() % 2 == 1 {
                multiline = Some(quote);
            }
        }
    }
    if text.trim().is_empty() {
        return Ok(Some(CODEX_TABLE.to_owned()));
    }
    let eol = if text.contains("\r\n") { "\r\n" } else { "\n" };
    let mut out = text.to_owned();
    if !out.ends_with('\n') {
        out.push_str(eol);
    }
    out.push_str(eol);
    out.push_str(&CODEX_TABLE.replace('\n', eol));
    Ok(Some(out))
}

fn names_iced(path: &[String]) -> bool {
    path.len() >= 2 && path[0] == "mcp_servers" && path[1] == NAME
}

/// Where `c` first occurs in `text` outside a quoted string, before a comment.
fn outside_quotes(text: &str, c: char) -> Option<usize> {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (at, ch) in text.char_indices() {
        match quote {
            Some('"') if escaped => escaped = false,
            Some('"') if ch == '\\' => escaped = true,
            Some(q) if ch == q => quote = None,
            Some(_) => {}
            None if ch == '"' || ch == '\'' => quote = Some(ch),
            None if ch == '#' => return None,
            None if ch == c => return Some(at),
            None => {}
        }
    }
    None
}

/// A dotted key's parts, each trimmed and unquoted (`mcp_servers . "iced"` is `mcp_servers`,
/// `iced`).
fn dotted(key: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut rest = key;
    loop {
        let end = outside_quotes(rest, '.').unwrap_or(rest.len());
        let part = rest[..end].trim();
        let part = part
            .strip_prefix('"')
            .and_then(|p| p.strip_suffix('"'))
            .or_else(|| part.strip_prefix('\'').and_then(|p| p.strip_suffix('\'')))
            .unwrap_or(part);
        parts.push(part.to_owned());
        if end == rest.len() {
            return parts;
        }
        rest = &rest[end + 1..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_gets_the_server_beside_every_other_key_and_an_entry_there_is_kept() {
        let fresh = merge_claude(None).unwrap().unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(&fresh).unwrap(),
            json!({"mcpServers": {"iced": {"command": "iced", "args": ["mcp"]}}})
        );
        assert_eq!(merge_claude(Some(&fresh)).unwrap(), None);
        let other = r#"{"z": 1, "mcpServers": {"db": {"command": "db-mcp"}}, "a": [2]}"#;
        let merged = merge_claude(Some(other)).unwrap().unwrap();
        let keys: Vec<&str> = merged
            .lines()
            .filter(|l| l.starts_with("  \""))
            .map(|l| l.trim().split('"').nth(1).unwrap())
            .collect();
        assert_eq!(keys, ["z", "mcpServers", "a"], "{merged}");
        let v: Value = serde_json::from_str(&merged).unwrap();
        assert_eq!(v["mcpServers"]["db"]["command"], "db-mcp");
        assert_eq!(v["mcpServers"]["iced"]["args"], json!(["mcp"]));
        let edited = r#"{"mcpServers": {"iced": {"command": "/opt/iced", "args": ["mcp", "--role", "host"]}}}"#;
        assert_eq!(merge_claude(Some(edited)).unwrap(), None);
        for bad in ["[1]", "{", r#"{"mcpServers": []}"#] {
            assert!(merge_claude(Some(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn codex_gets_a_table_appended_and_every_byte_before_it_kept() {
        assert_eq!(merge_codex(None).unwrap().as_deref(), Some(CODEX_TABLE));
        let mine = "model = \"o3\" # mine\n\n[mcp_servers.db]\ncommand = \"db\"";
        let merged = merge_codex(Some(mine)).unwrap().unwrap();
        assert_eq!(merged, format!("{mine}\n\n{CODEX_TABLE}"));
        assert_eq!(merge_codex(Some(&merged)).unwrap(), None, "once");
        let crlf = merge_codex(Some("a = 1\r\n")).unwrap().unwrap();
        assert_eq!(
            crlf,
            "a = 1\r\n\r\n[mcp_servers.iced]\r\ncommand = \"iced\"\r\nargs = [\"mcp\"]\r\n"
        );
    }

    #[test]
    fn codex_finds_the_entry_however_the_toml_names_it() {
        for there in [
            "[mcp_servers.iced]\ncommand = \"x\"",
            "[ mcp_servers . \"iced\" ]\ncommand = \"x\"",
            "[mcp_servers.'iced'.env]\nA = \"1\"",
            "[mcp_servers]\niced = { command = \"x\" }",
            "[mcp_servers]\niced.command = \"x\"",
            "mcp_servers.iced.command = \"x\"",
        ] {
            assert_eq!(merge_codex(Some(there)).unwrap(), None, "{there}");
        }
        for absent in [
            "# [mcp_servers.iced]\nmodel = \"x\"",
            "note = \"[mcp_servers.iced]\"",
            "note = \"\"\"\n[mcp_servers.iced]\n\"\"\"\n",
            "[mcp_servers.icedx]\ncommand = \"x\"",
            "[other]\nmcp_servers.iced = 1\n[x]",
        ] {
            // `[other]` then `mcp_servers.iced` is `other.mcp_servers.iced`: not the server.
            assert!(merge_codex(Some(absent)).unwrap().is_some(), "{absent}");
        }
        assert!(merge_codex(Some("mcp_servers = { db = { command = \"db\" } }")).is_err());
    }
}
