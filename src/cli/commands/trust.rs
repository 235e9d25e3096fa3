//! `iced trust`: the person trusts what this checkout's config would run (SPEC 24.10).

use super::repo;
use crate::cli::Output;
use crate::refusal::Refusal;
use crate::run::settings::Settings;

pub fn run() -> Result<Output, Refusal> {
    let step = "trust";
    let repo = repo(step)?;
    let config = crate::run::settings::load_config(&repo, step)?;
    let settings = Settings::from_config(&config, step)?;
    let trusted = crate::trust::trust(&repo.root, &config, &settings, step)?;
    let text = match &trusted.store {
        None => {
            "Nothing to trust: `.iced/config.json` names no runner, command, forge argv or hook."
                .to_owned()
        }
        Some(store) => {
            let mut text = format!(
                "Trusted for `{}` (recorded in `{}`); iced may now run:",
                trusted.root,
                store.display()
            );
            for w in &trusted.trusted {
                text.push_str(&format!("\n  {}", w.line()));
            }
            text.push_str("\n\nA change to these parts of the config needs `iced trust` again.");
            text
        }
    };
    Ok(Output::new(
        serde_json::to_value(&trusted).expect("serialises"),
        text,
    ))
}
