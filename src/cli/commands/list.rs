use super::repo;
use crate::cli::Output;
use crate::record::{list_units, ListEntry};
use crate::refusal::Refusal;
use serde_json::Value;

pub fn run(json_only: bool) -> Result<Output, Refusal> {
    let step = "list";
    let repo = repo(step)?;
    let entries = list_units(&repo, step)?;
    if json_only {
        // Serialise each unit on the worker threads (and free it there), then join: over a
        // thousand units this is a good share of the command's time.
        let parts = crate::par::map_owned(entries, |entry| entry.to_json_string());
        let mut out = Output::new(Value::Null, "");
        out.json_text = Some(format!("[{}]", parts.join(",")));
        return Ok(out);
    }
    if entries.is_empty() {
        return Ok(Output::new(
            Value::Null,
            "No units yet. Start one with `iced new \"<what you want>\"`.",
        ));
    }
    let mut text = String::new();
    for entry in &entries {
        match entry {
            ListEntry::Unit(view) => {
                let fm = &view.frontmatter;
                let field = |k: &str| fm.get(k).map_or_else(|| "?".to_owned(), |v| v.to_string());
                let mark = if view.active { "*" } else { " " };
                let mut line = format!(
                    "{mark} {:<40} {:<9} {:<8} {:<2} risk:{:<6} a{}",
                    view.id,
                    view.status()
                        .as_str()
                        .map_or_else(|| field("status"), str::to_owned),
                    field("type"),
                    field("tier"),
                    field("risk"),
                    field("autonomy"),
                );
                if let Some(parent) = fm.get("parent").filter(|p| !p.is_blank()) {
                    line.push_str(&format!("  <- {parent}"));
                }
                if fm.get("held").is_some_and(|h| !h.is_null()) {
                    line.push_str("  [held]");
                }
                if let Some(run) = &view.run {
                    line.push_str(&format!("  [run {}: {}]", run.id, run.status));
                }
                if view.lint_errors > 0 {
                    line.push_str(&format!("  [{} lint errors]", view.lint_errors));
                }
                text.push_str(line.trim_end());
            }
            ListEntry::Unreadable { id, refusal } => {
                text.push_str(&format!(
                    "! {id:<40} unreadable ({}): {}",
                    refusal.code, refusal.reason
                ));
            }
        }
        text.push('\n');
    }
    Ok(Output::new(Value::Null, text))
}
