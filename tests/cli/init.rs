//! `iced init` (SPEC section 13): it writes only the files it owns, only what is missing, never
//! deletes, and a second run changes nothing. Pre-existing text a person wrote is kept.

use crate::env::TestEnv;
use serde_json::{json, Value};

fn lines(text: &str) -> Vec<&str> {
    text.lines().map(|l| l.trim_end_matches('\r')).collect()
}

fn config(env: &TestEnv) -> Value {
    serde_json::from_str(&env.read(".iced/config.json")).expect("the config is JSON")
}

#[test]
fn init_twice_changes_nothing_the_second_time() {
    let env = TestEnv::new();
    let first = env.iced_json(&["init"]).ok().json();
    assert!(!first["created"].as_array().unwrap().is_empty(), "{first}");
    let after_first = env.snapshot();
    let second = env.iced_json(&["init"]).ok().json();
    assert_eq!(second["created"], json!([]), "{second}");
    assert_eq!(second["updated"], json!([]), "{second}");
    assert!(!second["skipped"].as_array().unwrap().is_empty());
    assert_eq!(
        env.snapshot(),
        after_first,
        "the second init wrote something"
    );
}

#[test]
fn init_writes_exactly_the_files_of_the_spec() {
    let env = TestEnv::new();
    let report = env.iced_json(&["init"]).ok().json();
    let mut created: Vec<&str> = report["created"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    created.sort_unstable();
    let mut expected = vec![
        ".gitattributes",
        ".gitignore",
        ".iced/config.json",
        ".iced/memory/knowledge.md",
        ".iced/memory/product.md",
        ".iced/templates/bug.md",
        ".iced/templates/chore.md",
        ".iced/templates/feature.md",
        ".iced/templates/project.md",
        ".iced/templates/review.md",
        "intent/README.md",
    ];
    expected.sort_unstable();
    assert_eq!(created, expected);
    let mut on_disk: Vec<String> = env.snapshot().into_keys().collect();
    on_disk.retain(|p| p != "README.md");
    assert_eq!(on_disk, expected, "init wrote a file it does not own");
    assert_eq!(
        lines(&env.read(".gitignore")),
        [".iced/active", ".iced/tmp/"]
    );
    assert_eq!(
        lines(&env.read(".gitattributes")),
        [
            "intent/**/*.md text eol=lf",
            ".iced/metrics.jsonl merge=union",
            "intent/*/decisions.md merge=union"
        ]
    );
    for kind in ["project", "feature", "bug", "review", "chore"] {
        let builtin = std::fs::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join(format!("spec/templates/{kind}.md")),
        )
        .unwrap();
        assert_eq!(
            env.read_bytes(&format!(".iced/templates/{kind}.md")),
            builtin,
            "{kind} template"
        );
    }
    assert!(config(&env).is_object());
}

#[test]
fn init_appends_missing_ignore_lines_and_keeps_what_was_there() {
    // (existing .gitignore, the lines it must end up with)
    let cases: [(&str, &[&str]); 5] = [
        (
            "target/\nnode_modules/\n",
            &["target/", "node_modules/", ".iced/active", ".iced/tmp/"],
        ),
        ("target/", &["target/", ".iced/active", ".iced/tmp/"]),
        (
            "target/\r\n.iced/active\r\n",
            &["target/", ".iced/active", ".iced/tmp/"],
        ),
        (
            "target/\r\n*.log",
            &["target/", "*.log", ".iced/active", ".iced/tmp/"],
        ),
        (
            "# ours\n.iced/tmp/\n\n.iced/active\n",
            &["# ours", ".iced/tmp/", "", ".iced/active"],
        ),
    ];
    for (before, after) in cases {
        let env = TestEnv::new();
        env.write(".gitignore", before);
        env.iced_json(&["init"]).ok();
        let text = env.read(".gitignore");
        assert!(
            text.starts_with(before),
            "the existing content was rewritten: {before:?} became {text:?}"
        );
        assert_eq!(lines(&text), after, "from {before:?}: {text:?}");
        assert!(text.ends_with('\n'), "{text:?}");
        env.iced_json(&["init"]).ok();
        assert_eq!(env.read(".gitignore"), text, "a second init changed it");
    }
}

#[test]
fn init_appends_the_attributes_line_once() {
    let env = TestEnv::new();
    env.write(".gitattributes", "*.png binary");
    env.iced_json(&["init"]).ok();
    let text = env.read(".gitattributes");
    assert_eq!(
        text,
        "*.png binary\nintent/**/*.md text eol=lf\n.iced/metrics.jsonl merge=union\nintent/*/decisions.md merge=union\n"
    );

    // A repository with the older single line gets the union lines (issue 11 item 7), once.
    let env = TestEnv::new();
    env.write(
        ".gitattributes",
        "  intent/**/*.md text eol=lf  \n*.png binary\n",
    );
    env.iced_json(&["init"]).ok();
    let with_union = "  intent/**/*.md text eol=lf  \n*.png binary\n.iced/metrics.jsonl merge=union\nintent/*/decisions.md merge=union\n";
    assert_eq!(env.read(".gitattributes"), with_union);
    let report = env.iced_json(&["init"]).ok().json();
    assert_eq!(env.read(".gitattributes"), with_union);
    assert!(
        report["skipped"]
            .as_array()
            .unwrap()
            .contains(&json!(".gitattributes")),
        "{report}"
    );
}

#[test]
fn init_keeps_existing_memory_files_and_intent_readme() {
    let env = TestEnv::new();
    let ours = [
        (
            ".iced/memory/product.md",
            "# Our product\n\nIt sells tea.\n",
        ),
        (".iced/memory/knowledge.md", "# Our rules\n"),
        ("intent/README.md", "Our own intent readme.\n"),
    ];
    for (rel, text) in ours {
        env.write(rel, text);
    }
    let report = env.iced_json(&["init"]).ok().json();
    for (rel, text) in ours {
        assert_eq!(env.read(rel), text, "{rel} was overwritten");
        assert!(
            report["skipped"].as_array().unwrap().contains(&json!(rel)),
            "{rel} not reported skipped: {report}"
        );
    }
    // Also after a first init: an edited memory file survives a second one, and --force.
    env.write(".iced/memory/product.md", "edited\n");
    env.iced_json(&["init"]).ok();
    env.iced_json(&["init", "--force"]).ok();
    assert_eq!(env.read(".iced/memory/product.md"), "edited\n");
}

#[test]
fn init_never_deletes_a_file() {
    let env = TestEnv::initialized();
    let id = env.good_unit("dark mode");
    env.write(".iced/templates/custom.md", "our own template\n");
    env.write(".iced/notes.txt", "notes\n");
    env.write(&format!("intent/{id}/evidence.md"), "evidence\n");
    env.write(".iced/templates/bug.md", "an edited bug template\n");
    let before = env.snapshot();
    env.iced_json(&["init"]).ok();
    env.iced_json(&["init", "--force"]).ok();
    let after = env.snapshot();
    for path in before.keys() {
        assert!(after.contains_key(path), "init deleted {path}");
    }
    for (path, bytes) in &before {
        if path == ".iced/templates/bug.md" || path == ".iced/config.json" {
            continue;
        }
        assert_eq!(&after[path], bytes, "init changed {path}");
    }
}

#[test]
fn init_refreshes_a_template_that_differs_from_the_builtin() {
    let env = TestEnv::initialized();
    let builtin = env.read_bytes(".iced/templates/bug.md");
    env.write(".iced/templates/bug.md", "stale\n");
    let report = env.iced_json(&["init"]).ok().json();
    assert_eq!(report["updated"], json!([".iced/templates/bug.md"]));
    assert_eq!(env.read_bytes(".iced/templates/bug.md"), builtin);
}

#[test]
fn init_refuses_an_invalid_config_unless_forced() {
    for bad in ["{\"autonomy\": \"high\"}\n", "{ not json\n", "[1, 2]\n"] {
        let env = TestEnv::new();
        env.write(".iced/config.json", bad);
        let before = env.snapshot();
        let run = env.iced_json(&["init"]);
        let refused = run.refused(3, "config-invalid");
        assert_eq!(refused["step"], "init");
        assert!(
            refused["reason"].as_str().unwrap().contains("config.json"),
            "{refused}"
        );
        assert!(
            refused["remedy"].as_str().unwrap().contains("--force"),
            "{refused}"
        );
        assert_eq!(env.snapshot(), before, "a refused init wrote files");

        let report = env.iced_json(&["init", "--force"]).ok().json();
        assert!(
            report["updated"]
                .as_array()
                .unwrap()
                .contains(&json!(".iced/config.json")),
            "{report}"
        );
        let config = config(&env);
        assert_eq!(config["autonomy"], 1);
        assert_eq!(config["gate"], "strict");
        env.iced_json(&["list"]).ok();
    }
}

#[test]
fn init_names_the_invalid_key() {
    let env = TestEnv::new();
    env.write(".iced/config.json", "{\"autonomy\": \"high\"}");
    let refused = env.iced_json(&["init"]).refused(3, "config-invalid");
    assert!(
        refused["reason"].as_str().unwrap().contains("autonomy"),
        "{refused}"
    );
}

#[test]
fn init_detects_verify_commands() {
    let real_npm = r#"{"name": "x", "scripts": {"test": "vitest run"}}"#;
    let placeholder =
        r#"{"name": "x", "scripts": {"test": "echo \"Error: no test specified\" && exit 1"}}"#;
    let cases: [(&[(&str, &str)], Value); 8] = [
        (
            &[("Cargo.toml", "[package]\nname = \"x\"\n")],
            json!(["cargo test"]),
        ),
        (&[("package.json", real_npm)], json!(["npm test"])),
        (&[("package.json", placeholder)], json!([])),
        (
            &[("package.json", placeholder), ("Cargo.toml", "")],
            json!(["cargo test"]),
        ),
        (
            &[("package.json", real_npm), ("Cargo.toml", "")],
            json!(["npm test"]),
        ),
        (&[("go.mod", "module x\n")], json!(["go test ./..."])),
        (&[("pyproject.toml", "")], json!(["python -m pytest -q"])),
        (&[], json!([])),
    ];
    for (files, expected) in cases {
        let env = TestEnv::new();
        for (rel, text) in files {
            env.write(rel, text);
        }
        env.iced_json(&["init"]).ok();
        assert_eq!(
            config(&env)["verify"]["commands"],
            expected,
            "with {files:?}"
        );
    }
}

#[test]
fn init_from_a_subdirectory_sets_up_at_the_top_level() {
    let env = TestEnv::new();
    env.write("src/deep/keep.txt", "x\n");
    let sub = env.path("src/deep");
    crate::env::run(env.command().current_dir(&sub).args(["init", "--json"])).ok();
    assert!(env.path(".iced/config.json").is_file());
    assert!(env.path("intent/README.md").is_file());
    assert!(env.path(".gitignore").is_file());
    assert!(
        !sub.join(".iced").exists(),
        "init wrote into the subdirectory"
    );
    assert!(!sub.join("intent").exists());
    // And the other verbs find the root from there.
    let run = crate::env::run(
        env.command()
            .current_dir(&sub)
            .args(["new", "dark mode", "--json"]),
    )
    .ok();
    assert!(env.path(run.json()["path"].as_str().unwrap()).is_file());
}

#[test]
fn init_outside_git_sets_up_in_the_current_directory() {
    let env = TestEnv::without_git();
    env.iced_json(&["init"]).ok();
    assert!(env.path(".iced/config.json").is_file());
    assert!(env.path("intent").is_dir());
    assert_eq!(
        lines(&env.read(".gitignore")),
        [".iced/active", ".iced/tmp/"]
    );
}

// ---- iced init --host: iced's MCP server registered (SPEC 13) -------------------------------

const CODEX_TABLE: &str = "[mcp_servers.iced]\ncommand = \"iced\"\nargs = [\"mcp\"]\n";

fn listed(report: &Value, key: &str, path: &str) -> bool {
    report[key].as_array().unwrap().contains(&json!(path))
}

/// `--host claude` writes `.mcp.json` beside the hook, what it prints is snapshot, and a second
/// run skips both files; `--host codex` writes Codex's project config and says what Codex needs
/// of the person before it reads it.
#[test]
fn init_host_registers_the_mcp_server_and_says_so() {
    let env = TestEnv::new();
    crate::snap::assert_read!(
        &env,
        "init_host_claude",
        crate::snap::both(&env, &["init", "--host", "claude"])
    );
    let mcp: Value = serde_json::from_str(&env.read(".mcp.json")).unwrap();
    assert_eq!(
        mcp,
        json!({"mcpServers": {"iced": {"command": "iced", "args": ["mcp"]}}})
    );
    let before = env.snapshot();
    let again = env.iced_json(&["init", "--host", "claude"]).ok().json();
    assert!(listed(&again, "skipped", ".mcp.json"), "{again:#}");
    assert_eq!(env.snapshot(), before, "a second run changes nothing");

    crate::snap::assert_read!(
        &env,
        "init_host_codex",
        crate::snap::both(&env, &["init", "--host", "codex"])
    );
    assert_eq!(env.read(".codex/config.toml"), CODEX_TABLE);
}

/// An existing `.mcp.json` keeps every server and key; an `iced` entry a person edited is kept
/// as they wrote it.
#[test]
fn init_host_claude_merges_into_the_mcp_json_there() {
    let env = TestEnv::new();
    let mine = "{\n  \"mcpServers\": {\n    \"db\": {\"command\": \"db-mcp\", \"args\": [\"--ro\"]}\n  },\n  \"x\": 1\n}\n";
    env.write(".mcp.json", mine);
    let report = env.iced_json(&["init", "--host", "claude"]).ok().json();
    assert!(listed(&report, "updated", ".mcp.json"), "{report:#}");
    let mcp: Value = serde_json::from_str(&env.read(".mcp.json")).unwrap();
    assert_eq!(
        mcp,
        json!({"mcpServers": {"db": {"command": "db-mcp", "args": ["--ro"]}, "iced": {"command": "iced", "args": ["mcp"]}}, "x": 1})
    );

    let edited = TestEnv::new();
    let theirs = "{\"mcpServers\": {\"iced\": {\"command\": \"/opt/iced\", \"args\": [\"mcp\", \"--role\", \"host\"]}}}";
    edited.write(".mcp.json", theirs);
    let report = edited.iced_json(&["init", "--host", "claude"]).ok().json();
    assert!(listed(&report, "skipped", ".mcp.json"), "{report:#}");
    assert_eq!(edited.read(".mcp.json"), theirs);
}

/// An existing `.codex/config.toml` keeps every byte; the table is appended once, and an entry
/// already there (in any of TOML's spellings) is left alone.
#[test]
fn init_host_codex_appends_to_the_config_there() {
    let env = TestEnv::new();
    let mine = "model = \"o3\"  # mine\n\n[mcp_servers.db]\ncommand = \"db-mcp\"";
    env.write(".codex/config.toml", mine);
    let report = env.iced_json(&["init", "--host", "codex"]).ok().json();
    assert!(
        listed(&report, "updated", ".codex/config.toml"),
        "{report:#}"
    );
    assert!(
        str_at(&report, "note").contains("trust_level = \"trusted\""),
        "{report:#}"
    );
    assert_eq!(
        env.read(".codex/config.toml"),
        format!("{mine}\n\n{CODEX_TABLE}")
    );
    let before = env.snapshot();
    let again = env.iced_json(&["init", "--host", "codex"]).ok().json();
    assert!(listed(&again, "skipped", ".codex/config.toml"), "{again:#}");
    assert_eq!(env.snapshot(), before);

    let dotted = TestEnv::new();
    let theirs = "[mcp_servers]\niced = { command = \"/opt/iced\", args = [\"mcp\"] }\n";
    dotted.write(".codex/config.toml", theirs);
    dotted.iced_json(&["init", "--host", "codex"]).ok();
    assert_eq!(dotted.read(".codex/config.toml"), theirs);
}

fn str_at<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("no {key} in {v:#}"))
}

/// A host file that cannot take the entry is refused before anything is written (iced's own
/// files and the hook included): not JSON or not the shape, not UTF-8, an inline `mcp_servers`,
/// a folder where the file goes, a symbolic link.
#[test]
fn init_host_refuses_what_cannot_take_the_entry_and_writes_nothing() {
    for (host, file, bad, why) in [
        (
            "claude",
            ".mcp.json",
            &b"{\"mcpServers\": "[..],
            "not valid JSON",
        ),
        (
            "claude",
            ".mcp.json",
            b"{\"mcpServers\": [1]}",
            "`mcpServers` is not an object",
        ),
        ("claude", ".mcp.json", b"\xff\xfe", "not UTF-8"),
        (
            "codex",
            ".codex/config.toml",
            b"mcp_servers = { db = { command = \"db\" } }\n",
            "inline table",
        ),
        (
            "codex",
            ".codex/config.toml",
            b"a = \"\xff\"\n",
            "not UTF-8",
        ),
    ] {
        let env = TestEnv::new();
        env.write(file, bad);
        let before = env.snapshot();
        let out = env.iced_json(&["init", "--host", host]);
        let refused = out.refused(3, "host-settings-invalid");
        let reason = str_at(&refused, "reason");
        assert!(
            reason.starts_with(&format!("`{file}` cannot take the MCP entry: "))
                && reason.contains(why),
            "{reason}"
        );
        assert!(
            str_at(&refused, "remedy").contains(&format!("iced init --host {host}")),
            "{refused:#}"
        );
        assert_eq!(env.snapshot(), before, "{file}: nothing is written");
        assert!(!env.path(".iced").exists() && !env.path(".claude").exists());
    }
    // How the refusal reads, for each host's MCP file.
    let env = TestEnv::new();
    env.write(".mcp.json", "{\"mcpServers\": [1]}");
    env.write(
        ".codex/config.toml",
        "mcp_servers = { db = { command = \"db\" } }\n",
    );
    let mut shown = crate::snap::refused(
        &env,
        &["init", "--host", "claude"],
        3,
        "host-settings-invalid",
    );
    shown.push_str(&crate::snap::refused(
        &env,
        &["init", "--host", "codex"],
        3,
        "host-settings-invalid",
    ));
    crate::snap::assert_read!(&env, "init_host_mcp_refused", shown);
    for (host, file) in [("claude", ".mcp.json"), ("codex", ".codex/config.toml")] {
        let env = TestEnv::new();
        std::fs::create_dir_all(env.path(file)).unwrap();
        env.iced_json(&["init", "--host", host])
            .refused(3, "host-settings-invalid");
        let linked = TestEnv::new();
        std::fs::create_dir_all(linked.path(file).parent().unwrap()).unwrap();
        std::fs::write(linked.outside("elsewhere"), "{}").unwrap();
        std::os::unix::fs::symlink(linked.outside("elsewhere"), linked.path(file)).unwrap();
        linked
            .iced_json(&["init", "--host", host])
            .refused(3, "path-symlink");
        assert_eq!(
            std::fs::read_to_string(linked.outside("elsewhere")).unwrap(),
            "{}"
        );
        assert!(!linked.path(".iced").exists());
    }
}
