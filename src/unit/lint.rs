//! Lint: the checks a unit must pass at each stage of its life (seed 000's table, plus
//! `section-duplicate` and `context-tag` as iced-core reports them, and two checks on where the unit
//! lives). Pure: the caller reads the files and says what exists.

use super::coverage::coverage;
use super::frontmatter::FrontmatterProblem;
use super::hash::contract_hash;
use super::id::is_valid_id;
use super::kinds::{ContextTag, Risk, Stage, Status, Tier, UnitType, VerifyKind};
use super::parse::{canonical_h2, ParsedUnit};
use serde::Serialize;
use std::collections::HashMap;
use std::str::FromStr;

/// One finding. `line` is 1-based in the file, when the finding has a place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Issue {
    pub code: &'static str,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LintReport {
    pub errors: Vec<Issue>,
    pub warnings: Vec<Issue>,
}

impl LintReport {
    pub fn is_clean(&self) -> bool {
        self.errors.is_empty()
    }

    fn error(&mut self, code: &'static str, message: impl Into<String>, line: Option<usize>) {
        self.errors.push(Issue {
            code,
            message: message.into(),
            line,
        });
    }

    fn warn(&mut self, code: &'static str, message: impl Into<String>, line: Option<usize>) {
        self.warnings.push(Issue {
            code,
            message: message.into(),
            line,
        });
    }
}

/// What lint needs to know beyond the parsed text.
#[derive(Debug, Clone, Default)]
pub struct LintContext<'a> {
    /// The whole text, for the contract hash. Without it `contract-changed` is not checked.
    pub text: Option<&'a str>,
    /// Whether `evidence.md` exists beside the unit; `None` skips `evidence-missing`.
    pub evidence_exists: Option<bool>,
    /// The unit's folder name under `intent/`, when it lives in a repository.
    pub folder: Option<&'a str>,
    /// Other unit folders that use the same number.
    pub same_number: &'a [String],
}

pub const REQUIRED: &[&str] = &[
    "iced", "id", "title", "type", "tier", "status", "autonomy", "risk",
];

/// Words that name a technology: a Goal that uses one describes a solution, not an outcome.
const SOLUTION_WORDS: &[&str] = &[
    "react",
    "vue",
    "angular",
    "svelte",
    "next.js",
    "kubernetes",
    "k8s",
    "docker",
    "postgres",
    "postgresql",
    "mysql",
    "mongodb",
    "redis",
    "kafka",
    "rabbitmq",
    "lambda",
    "graphql",
    "grpc",
    "microservice",
    "microservices",
    "django",
    "rails",
    "spring",
    "express",
    "typescript",
    "python",
    "java",
    "golang",
    "rust",
    "terraform",
    "aws",
    "azure",
    "gcp",
    "sql",
    "orm",
    "prisma",
    "tailwind",
    "websocket",
    "cron",
    "regex",
];

/// The first solution word (in list order) the goal names as a whole word: iced-core's
/// `[^a-z0-9.]word[^a-z0-9]` on the lower-cased goal padded with spaces. Such a match starts a
/// maximal run of `[a-z0-9.]` and is followed by `.` or the run's end, so comparing each word with
/// the start of each run gives the same answer without a search per word.
pub fn solution_word(goal: &str) -> Option<&'static str> {
    let lower = goal.to_lowercase();
    let runs: Vec<&str> = lower
        .split(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.'))
        .filter(|run| !run.is_empty())
        .collect();
    SOLUTION_WORDS.iter().copied().find(|word| {
        runs.iter().any(|run| {
            run.strip_prefix(word)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
        })
    })
}

/// Lint a parsed unit at a stage.
pub fn lint(parsed: &ParsedUnit, stage: Stage, ctx: &LintContext<'_>) -> LintReport {
    let mut report = LintReport::default();
    let fm = &parsed.frontmatter;
    let line_of = |key: &str| fm.line_of(key);

    match &parsed.frontmatter_problem {
        Some(problem) => {
            let line = match problem {
                FrontmatterProblem::BadLine(n) => Some(*n),
                _ => None,
            };
            report.error("frontmatter-missing", problem.to_string(), line)
        }
        None if fm.is_empty() => report.error(
            "frontmatter-missing",
            "Frontmatter is empty: it needs at least the required fields.",
            Some(1),
        ),
        None => {}
    }
    // No block was read (absent, unterminated, behind a BOM): missing fields would only repeat that.
    let block_read = !matches!(
        parsed.frontmatter_problem,
        Some(
            FrontmatterProblem::Missing
                | FrontmatterProblem::Unterminated
                | FrontmatterProblem::ByteOrderMark
        )
    );
    for key in REQUIRED.iter().filter(|_| block_read) {
        if fm.get(key).is_none_or(|v| v.is_blank()) {
            report.error(
                "field-invalid",
                format!("Missing required field `{key}`."),
                line_of(key),
            );
        }
    }
    let mut check_enum = |key: &str, ok: bool, choices: String| {
        if let Some(value) = fm.get(key).filter(|v| !v.is_null()) {
            if !ok {
                report.error(
                    "field-invalid",
                    format!("`{key}` must be one of {choices} (got \"{value}\")."),
                    line_of(key),
                );
            }
        }
    };
    let parses = |key: &str, f: fn(&str) -> bool| fm.str(key).is_some_and(f);
    check_enum(
        "type",
        parses("type", |s| UnitType::from_str(s).is_ok()),
        UnitType::choices(),
    );
    check_enum(
        "tier",
        parses("tier", |s| Tier::from_str(s).is_ok()),
        Tier::choices(),
    );
    check_enum(
        "status",
        parses("status", |s| Status::from_str(s).is_ok()),
        Status::choices(),
    );
    check_enum(
        "risk",
        parses("risk", |s| Risk::from_str(s).is_ok()),
        Risk::choices(),
    );
    if let Some(value) = fm.get("autonomy").filter(|v| !v.is_null()) {
        if !value.as_int().is_some_and(|n| (0..=3).contains(&n)) {
            report.error(
                "field-invalid",
                "`autonomy` must be an integer 0-3.",
                line_of("autonomy"),
            );
        }
    }
    if let Some(id) = fm.get("id").filter(|v| !v.is_null()) {
        let id = id.to_string();
        if !is_valid_id(&id) {
            report.error(
                "field-invalid",
                "`id` must look like `042-short-slug`.",
                line_of("id"),
            );
        } else if let Some(folder) = ctx.folder.filter(|f| *f != id) {
            report.error(
                "field-invalid",
                format!(
                    "`id` is `{id}` but the unit lives in `intent/{folder}/`; make them the same."
                ),
                line_of("id"),
            );
        }
    }
    for other in ctx.same_number {
        report.error(
            "ids-duplicate",
            format!("Unit number is also used by `intent/{other}/`; renumber one of them."),
            line_of("id"),
        );
    }

    let mut seen_sections: Vec<&str> = Vec::new();
    for heading in &parsed.sections {
        if let Some(name) = canonical_h2(&heading.text) {
            if seen_sections.contains(&name) {
                report.error(
                    "section-duplicate",
                    format!("Section `## {}` appears more than once.", heading.text),
                    Some(heading.line),
                );
            }
            seen_sections.push(name);
        }
    }

    let mut seen_ids: HashMap<&str, usize> = HashMap::new();
    for item in parsed.items() {
        if let Some(first) = seen_ids.insert(&item.id, item.line) {
            report.error(
                "ids-duplicate",
                format!(
                    "Item id [{}] is used more than once (first on line {first}).",
                    item.id
                ),
                Some(item.line),
            );
            seen_ids.insert(&item.id, first);
        }
    }
    for c in &parsed.context {
        if ContextTag::from_str(&c.tag).is_err() {
            report.warn(
                "context-tag",
                format!(
                    "Unknown context tag [{}]; use {}.",
                    c.tag,
                    ContextTag::choices()
                ),
                Some(c.line),
            );
        }
    }

    let status = fm.str("status").and_then(|s| Status::from_str(s).ok());
    // A status iced-core reads as false (null, '', false, 0) counts as absent here.
    let status_text = fm.get("status").filter(|v| !v.is_falsy());
    let signoff_rules = match stage {
        Stage::Signoff | Stage::Accept => true,
        Stage::Validate => status_text
            .is_some_and(|s| !matches!(s.as_str(), Some("draft" | "rejected" | "blocked"))),
        Stage::Draft => false,
    };
    let past_approval = status.is_some_and(Status::is_past_approval);
    if signoff_rules {
        signoff_checks(parsed, &mut report);
    }
    // Coverage judges the sign-off itself: a signed-off contract is pinned by its hash instead.
    if stage == Stage::Signoff && !past_approval {
        coverage_checks(parsed, &mut report);
    }

    if matches!(stage, Stage::Accept | Stage::Validate) && past_approval {
        if let Some(text) = ctx.text {
            match fm.get("contract_hash").filter(|v| !v.is_blank()) {
                None => report.error(
                    "contract-changed",
                    "Unit is past approval but has no contract_hash.",
                    line_of("contract_hash").or(line_of("status")),
                ),
                Some(stored) => {
                    let now = contract_hash(text);
                    if stored.as_str() != Some(now.as_str()) {
                        report.error(
                            "contract-changed",
                            format!(
                                "Intent or Expectations changed after approval (contract_hash is {stored}, the text hashes to {now})."
                            ),
                            line_of("contract_hash"),
                        );
                    }
                }
            }
        }
    }
    if stage == Stage::Accept
        && matches!(status, Some(Status::Done | Status::Accepted))
        && ctx.evidence_exists == Some(false)
    {
        report.error(
            "evidence-missing",
            "No evidence.md for a done unit.",
            line_of("status"),
        );
    }
    report
}

fn signoff_checks(parsed: &ParsedUnit, report: &mut LintReport) {
    let fm = &parsed.frontmatter;
    if parsed.goal.is_empty() {
        report.error("goal-missing", "Intent > Goal is empty.", parsed.goal_line);
    } else if let Some(word) = solution_word(&parsed.goal) {
        report.warn(
            "goal-has-solution",
            format!("Goal mentions \"{word}\". State the outcome, not the solution; move technology choices to Context."),
            parsed.goal_line,
        );
    }
    if fm.str("type") != Some("review") && parsed.failures.is_empty() {
        report.error(
            "failures-missing",
            "No failure conditions ([F1] ...). Say what would count as failing the intent.",
            parsed.failures_line,
        );
    }
    if parsed.expectations.is_empty() {
        report.error(
            "expectations-missing",
            "No expectations ([E1] ...).",
            parsed.expectations_line,
        );
    }
    for e in &parsed.expectations {
        match &e.verify {
            None => report.error(
                "expectation-unverifiable",
                format!("[{}] has no {{verify: kind | ref}}.", e.id),
                Some(e.line),
            ),
            Some(v) if VerifyKind::from_str(&v.kind).is_err() => report.error(
                "expectation-unverifiable",
                format!(
                    "[{}] verify kind must be {} (got \"{}\").",
                    e.id,
                    VerifyKind::choices().replace(", ", "|"),
                    v.kind
                ),
                Some(e.line),
            ),
            Some(_) => {}
        }
    }
    for q in parsed.open_questions() {
        report.error(
            "open-questions",
            format!("[{}] is unanswered.", q.id),
            Some(q.line),
        );
    }
    for c in parsed.context.iter().filter(|c| c.tag == "assumed") {
        report.warn(
            "assumptions-present",
            format!("Assumption: {}", c.text),
            Some(c.line),
        );
    }
}

/// `goal-uncovered` and `goal-clause-unknown` (SPEC 10.3).
fn coverage_checks(parsed: &ParsedUnit, report: &mut LintReport) {
    let map = coverage(parsed);
    for clause in map.clauses.iter().filter(|c| c.covered_by.is_empty()) {
        report.error(
            "goal-uncovered",
            format!(
                "Goal clause {} \"{}\" is covered by no expectation; add one that checks it, or mark the one that does with {{goal: {}}}.",
                clause.id, clause.text, clause.id
            ),
            Some(clause.line),
        );
    }
    let have = match map.clauses.len() {
        0 => "no clauses".to_owned(),
        1 => "one clause, G1".to_owned(),
        n => format!("{n} clauses, G1 to G{n}"),
    };
    for unknown in &map.unknown {
        report.error(
            "goal-clause-unknown",
            format!(
                "[{}] names goal clause {}, but the Goal has {have}; name the clause it covers now.",
                unknown.expectation, unknown.clause
            ),
            Some(unknown.line),
        );
    }
}
