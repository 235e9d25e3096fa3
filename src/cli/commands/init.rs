use super::current_dir;
use crate::cli::Output;
use crate::config::Config;
use crate::refusal::Refusal;
use crate::repo::{config_refusal, store_refusal};

#[derive(clap::Args)]
pub struct Args {
    /// Rewrite .iced/config.json with the defaults, even when it exists.
    #[arg(long)]
    pub force: bool,
}

pub fn run(args: Args) -> Result<Output, Refusal> {
    let step = "init";
    let cwd = current_dir(step)?;
    let root = crate::git::toplevel(&cwd).unwrap_or(cwd);
    if !args.force && Config::path(&root).exists() {
        Config::load(&root).map_err(|e| {
            let mut r = config_refusal(step, e);
            r.remedy = format!(
                "{}; or run `iced init --force` to replace it with the defaults",
                r.remedy
            );
            r
        })?;
    }
    let report = crate::init::init_repo(&root, args.force).map_err(|e| store_refusal(step, e))?;
    let mut text = String::new();
    for (label, list) in [("created", &report.created), ("updated", &report.updated)] {
        for path in list {
            text.push_str(&format!("{label:8} {path}\n"));
        }
    }
    if report.created.is_empty() && report.updated.is_empty() {
        text.push_str("Nothing to do: iced is already set up here.\n");
    } else {
        text.push_str(&format!(
            "\niced is set up in `{}`. Next: `iced new \"<what you want>\"`.\n",
            root.display()
        ));
    }
    Ok(Output::new(
        serde_json::to_value(&report).expect("serialises"),
        text,
    ))
}
