use super::repo;
use crate::cli::render::issue_line;
use crate::cli::Output;
use crate::record::{held_reason, unit_status, UnitView};
use crate::refusal::Refusal;
use crate::unit::kinds::autonomy_name;

#[derive(clap::Args)]
pub struct Args {
    /// The unit (id, number or unique part of an id); default: the active unit.
    pub id: Option<String>,
}

pub fn run(args: Args) -> Result<Output, Refusal> {
    let step = "status";
    let repo = repo(step)?;
    let view = unit_status(&repo, args.id.as_deref(), step)?;
    Ok(Output::new(view.to_json(), summary(&view)))
}

/// The contract as a person reads it before signing off, and the unit's standing.
pub fn summary(view: &UnitView) -> String {
    let p = &view.unit.parsed;
    let fm = &p.frontmatter;
    let field = |k: &str| fm.get(k).map_or_else(|| "?".to_owned(), |v| v.to_string());
    let mut out = vec![format!(
        "{}: {}{}",
        view.unit.id,
        view.summary.title.as_deref().unwrap_or("(untitled)"),
        if view.summary.active {
            "  (active)"
        } else {
            ""
        }
    )];
    out.push(format!(
        "  {} / {}, risk {}, autonomy {} (effective {} {}), status {}",
        field("type"),
        field("tier"),
        field("risk"),
        field("autonomy"),
        view.summary.effective_autonomy,
        autonomy_name(view.summary.effective_autonomy),
        match &view.summary.run {
            Some(run) => format!("{} (the file says {})", run.unit_status, field("status")),
            None => field("status"),
        }
    ));
    if let Some(run) = &view.summary.run {
        out.push(format!(
            "  run {}: {} (stage {}, attempt {})",
            run.id, run.status, run.stage, run.attempt
        ));
    }
    if let Some(reason) = held_reason(&view.unit) {
        out.push(format!("  held: {reason}"));
    }
    if let Some(parent) = fm.get("parent").filter(|v| !v.is_blank()) {
        out.push(format!("  parent: {parent}"));
    }
    if !view.summary.children.is_empty() {
        out.push(format!("  children: {}", view.summary.children.join(", ")));
    }
    out.extend(contract_lines(view));
    if !view.lint.errors.is_empty() || !view.lint.warnings.is_empty() {
        out.push("Lint (validate):".into());
        for issue in view.lint.errors.iter().chain(&view.lint.warnings) {
            out.push(format!(
                "  {}",
                issue_line(&serde_json::to_value(issue).expect("serialises"))
            ));
        }
    }
    out.join("\n")
}

pub fn contract_lines(view: &UnitView) -> Vec<String> {
    let p = &view.unit.parsed;
    let mut out = Vec::new();
    if !p.goal.is_empty() {
        out.push(format!("Goal: {}", p.goal));
    }
    // The clauses when there is more than one to map, or one nothing covers (SPEC 14.2).
    let clauses = &view.coverage.clauses;
    if clauses.len() > 1 || !view.coverage.uncovered.is_empty() {
        out.extend(clauses.iter().map(|c| {
            let by = if c.covered_by.is_empty() {
                "UNCOVERED".to_owned()
            } else {
                c.covered_by.join(", ")
            };
            format!("  [{}] {}  ({by})", c.id, c.text)
        }));
    }
    out.extend(view.coverage.unknown.iter().map(|u| {
        format!(
            "  [{}] names goal clause {}, which the Goal does not have",
            u.expectation, u.clause
        )
    }));
    let mut list = |label: &str, items: Vec<String>| {
        if !items.is_empty() {
            out.push(format!("{label}:"));
            out.extend(items.into_iter().map(|i| format!("  {i}")));
        }
    };
    list(
        "Constraints",
        p.constraints
            .iter()
            .map(|i| format!("[{}] {}", i.id, i.text))
            .collect(),
    );
    list(
        "Failure conditions",
        p.failures
            .iter()
            .map(|i| format!("[{}] {}", i.id, i.text))
            .collect(),
    );
    let mut scope = Vec::new();
    if !p.scope.inside.is_empty() {
        scope.push(format!("In: {}", p.scope.inside.join(", ")));
    }
    if !p.scope.outside.is_empty() {
        scope.push(format!("Out: {}", p.scope.outside.join(", ")));
    }
    list("Scope", scope);
    list(
        "Expectations",
        p.expectations
            .iter()
            .map(|e| match &e.verify {
                Some(v) if v.reference.is_empty() => format!("[{}] {}  ({})", e.id, e.text, v.kind),
                Some(v) => format!("[{}] {}  ({}: {})", e.id, e.text, v.kind, v.reference),
                None => format!("[{}] {}  (UNVERIFIABLE)", e.id, e.text),
            })
            .collect(),
    );
    list(
        "Assumptions (correct these if wrong)",
        p.context
            .iter()
            .filter(|c| c.tag == "assumed")
            .map(|c| c.text.clone())
            .collect(),
    );
    list(
        "Questions",
        p.questions
            .iter()
            .map(|q| match &q.answer {
                Some(a) => format!("[{}] {} -> {a}", q.id, q.text),
                None => format!("[{}] {} (OPEN)", q.id, q.text),
            })
            .collect(),
    );
    out
}
