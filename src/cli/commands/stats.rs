use super::repo;
use crate::cli::Output;
use crate::metrics::{self, Summary};
use crate::refusal::Refusal;
use crate::repo::store_refusal;

fn rate(r: Option<f64>) -> String {
    r.map_or_else(|| "-".to_owned(), |v| format!("{v}%"))
}

fn line(s: &Summary) -> String {
    format!(
        "units {}, accepted {} | questions/unit {} | sign-off first-time approval {} | verify first-pass {} | human rejection {} | escalations/unit {}",
        s.units,
        s.accepted,
        s.questions_per_unit,
        rate(s.signoff_first_approval_rate),
        rate(s.verify_first_pass_rate),
        rate(s.human_rejection_rate),
        s.escalations_per_unit
    )
}

pub fn run() -> Result<Output, Refusal> {
    let step = "stats";
    let repo = repo(step)?;
    let config = crate::run::settings::load_config(&repo, step)?;
    let events = metrics::read(&repo.root).map_err(|e| store_refusal(step, e))?;
    let stats = metrics::stats(&events);
    let suggestions = metrics::promotion_suggestions(&events, &config);
    let mut text = vec![format!("Overall: {}", line(&stats.overall))];
    for (k, s) in &stats.by_risk {
        text.push(format!("Risk {k}: {}", line(s)));
    }
    for (k, s) in &stats.by_autonomy {
        text.push(format!("Autonomy {k}: {}", line(s)));
    }
    for s in &suggestions {
        text.push(format!(
            "Suggestion: raise the {}-risk default autonomy {} -> {}. {} (set it in .iced/config.json autonomyByRisk.{})",
            s.risk, s.from, s.to, s.reason, s.risk
        ));
    }
    let mut json = serde_json::to_value(&stats).expect("serialises");
    json["suggestions"] = serde_json::to_value(&suggestions).expect("serialises");
    Ok(Output::new(json, text.join("\n")))
}
