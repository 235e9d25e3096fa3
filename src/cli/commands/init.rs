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
    /// Also install the guard's hook for this coding agent host (claude: .claude/settings.json).
    #[arg(long, value_parser = parse_host)]
    pub host: Option<Host>,
}

fn parse_host(s: &str) -> Result<Host, String> {
    match s {
        "claude" => Ok(Host::Claude),
        _ => Err(format!(
            "unknown host `{s}`; the one host iced installs a hook for is `claude`"
        )),
    }
}

fn host_refusal(step: &str, e: HostError) -> Refusal {
    match e {
        HostError::Store(e) => store_refusal(step, e),
        e @ HostError::Invalid { .. } => Refusal::new(
            step,
            "host-settings-invalid",
            e.to_string(),
            "make it a JSON object (Claude Code's settings), or move it away, then run `iced init --host claude` again",
        ),
    }
}

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
        .map(|h| crate::init::plan_host(&root, h))
        .transpose()
        .map_err(|e| host_refusal(step, e))?;
    let mut report =
        crate::init::init_repo(&root, args.force).map_err(|e| store_refusal(step, e))?;
    if let Some(plan) = &host {
        crate::init::apply_host(&root, plan, &mut report).map_err(|e| store_refusal(step, e))?;
    }
    let mut json = serde_json::to_value(&report).expect("serialises");
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
