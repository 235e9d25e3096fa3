use super::current_dir;
use crate::cli::Output;
use crate::config::Config;
use crate::init::{Host, HostError};
use crate::refusal::Refusal;
use crate::repo::{config_refusal, store_refusal};

#[derive(clap::Args)]
pub struct Args {
    /// Rewrite .iced/config.json with the defaults, even when it exists.
    #[arg(long)]
    pub force: bool,
    /// Also set up this coding agent host: claude gets the guard's hook (.claude/settings.json) and iced's MCP server (.mcp.json); codex the server (.codex/config.toml).
    #[arg(long, value_parser = parse_host)]
    pub host: Option<Host>,
}

fn parse_host(s: &str) -> Result<Host, String> {
    match s {
        "claude" => Ok(Host::Claude),
        "codex" => Ok(Host::Codex),
        _ => Err(format!(
            "unknown host `{s}`; iced sets up `claude` and `codex`"
        )),
    }
}

fn host_refusal(step: &str, host: Host, e: HostError) -> Refusal {
    match e {
        HostError::Store(e) => store_refusal(step, e),
        HostError::Invalid { ref path, .. } => {
            let shape = match path.as_str() {
                ".claude/settings.json" => "make it a JSON object (Claude Code's settings)",
                ".mcp.json" => "make it a JSON object whose `mcpServers` is an object",
                _ => "make it UTF-8 TOML whose servers are tables (`[mcp_servers.<name>]`, Codex's project config)",
            };
            let remedy = format!(
                "{shape}, or move it away, then run `iced init --host {}` again",
                host.as_str()
            );
            Refusal::new(step, "host-settings-invalid", e.to_string(), remedy)
        }
    }
}

/// What a new config lands by pull request with, and what to set for another forge.
const FORGE_NOTE: &str = "\nLanding by pull request (`land.mode: pr`) runs GitHub's `gh` as shipped; for another forge, set
`land.pr.open`, `arm`, `find` and `armed` in `.iced/config.json` to its CLI (spec/SPEC.md 23.2).
";

pub fn run(args: Args) -> Result<Output, Refusal> {
    let step = "init";
    let cwd = current_dir(step)?;
    let root = crate::git::toplevel(&cwd).unwrap_or(cwd);
    if !args.force && Config::path(&root).exists() {
        Config::load(&root)
            .map_err(|e| config_refusal(step, e))
            .and_then(|c| crate::run::settings::check(&c, step))
            .map_err(|mut r| {
                r.remedy = format!(
                    "{}; or run `iced init --force` to replace it with the defaults",
                    r.remedy
                );
                r
            })?;
    }
    // Every check before the first write: a settings file that cannot take the hook changes
    // nothing.
    let host = args
        .host
        .map(|h| crate::init::plan_host(&root, h).map_err(|e| host_refusal(step, h, e)))
        .transpose()?;
    let mut report =
        crate::init::init_repo(&root, args.force).map_err(|e| store_refusal(step, e))?;
    if let Some(plans) = &host {
        crate::init::apply_host(&root, plans, &mut report).map_err(|e| store_refusal(step, e))?;
    }
    let note = args.host.and_then(|h| crate::init::host_note(&root, h));
    let mut json = serde_json::to_value(&report).expect("serialises");
    if let Some(note) = &note {
        json["note"] = note.clone().into();
    }
    // The config init wrote is the person's own: what it runs (the detected test command) is
    // trusted here. One that was already there came from someone else and is not (SPEC 24.10).
    let config = ".iced/config.json".to_owned();
    let mut trusted = Vec::new();
    if report.created.contains(&config) || report.updated.contains(&config) {
        match trust_written(&root, step) {
            Ok(Some(t)) => {
                json["trusted"] = serde_json::to_value(&t.trusted).expect("serialises");
                trusted = t.trusted;
            }
            Ok(None) => {}
            Err(refusal) => {
                json["warnings"] = serde_json::json!([format!(
                    "the new config was not trusted: {}",
                    refusal.reason
                )]);
            }
        }
    }
    let mut text = String::new();
    for (label, list) in [("created", &report.created), ("updated", &report.updated)] {
        for path in list {
            text.push_str(&format!("{label:8} {path}\n"));
        }
    }
    for w in &trusted {
        text.push_str(&format!("trusted  {}\n", w.line()));
    }
    if report.created.is_empty() && report.updated.is_empty() {
        text.push_str("Nothing to do: iced is already set up here.\n");
    } else {
        text.push_str(&format!(
            "\niced is set up in `{}`. Next: `iced new \"<what you want>\"`.\n",
            root.display()
        ));
    }
    if report.created.contains(&config) || report.updated.contains(&config) {
        // JSON holds no comment, and a `land.pr` in the config would be a part to trust: what to
        // set for another forge is said here (SPEC 13, 23.2).
        text.push_str(FORGE_NOTE);
    }
    if let Some(note) = &note {
        text.push_str(&format!("\nnote: {note}.\n"));
    }
    Ok(Output::new(json, text))
}

/// Trust the config init just wrote; `None` when it runs nothing.
fn trust_written(
    root: &std::path::Path,
    step: &str,
) -> Result<Option<crate::trust::Trusted>, Refusal> {
    let config = Config::load(root).map_err(|e| config_refusal(step, e))?;
    let settings = crate::run::settings::Settings::from_config(&config, step)?;
    let trusted = crate::trust::trust(root, &config, &settings, step)?;
    Ok(trusted.sha256.is_some().then_some(trusted))
}
