//! What planning reads and writes as text (SPEC 20.16): the planner's and the reviewers' prompts,
//! the loop's check of a draft (the keys it keeps, lint, an untouched checkout), and the decision
//! record `plan-decision.md` with its grounds. Nothing here launches or records anything.

use crate::repo::{Numbers, Repo, UnitFile};
use crate::run::validate::{content_hash, Answer, Finding};
use crate::unit::kinds::effective_autonomy;
use crate::unit::{parse_unit, Risk, Scalar, Stage};
use sha2::{Digest, Sha256};
use std::path::Path;
use std::str::FromStr;

/// Frontmatter keys the loop keeps: a draft must leave each as the unit file has it.
pub const PROTECTED: &[&str] = &[
    "id",
    "status",
    "contract_hash",
    "approved_at",
    "approved_by",
    "base_ref",
    "blocked_from",
    "held",
    "parent",
    "autonomy",
];

/// The largest draft the loop reads: a unit file's own limit.
pub const DRAFT_LIMIT: u64 = 1024 * 1024;

const RULES: &str = "Write the whole unit file (frontmatter and body) to the output file, and nothing else anywhere: \
the loop takes the draft from that file only, and refuses it if the repository changed.\n\n\
- Keep the frontmatter keys the loop owns exactly as they are: id, status, contract_hash, approved_at, approved_by, base_ref, blocked_from, held, parent, autonomy.\n\
- `## Intent` with a `### Goal`: what must be true when the unit is done, one clause per promise.\n\
- `## Expectations`: `- [E<n>] <what is checked> {goal: G<n>} {verify: <kind> | <how>}`; every clause of the Goal \
(G1, G2, ... in order: one per sentence or list item) named by at least one expectation.\n\
- `## Context`: what the implementer must know.\n\
- A question you cannot settle from the repository is a Q item (`- [Q<n>] ...`), never a decision made in prose.\n";

/// The planner's prompt for `round`: the line or unit it plans, the rules, and from round 2 the
/// open findings it must answer by revising.
pub fn planner_prompt(unit: &str, text: &str, round: u32, open: &[&Finding]) -> String {
    let mut p = format!(
        "# Plan unit {unit}, round {round}\n\nYou are the planner. Draft the ICED unit `{unit}` from its current text below.\n\n## Rules\n\n{RULES}\n## The current text\n\n```markdown\n{text}\n```\n"
    );
    if !open.is_empty() {
        p.push_str("\n## Findings to answer by revising the draft\n\n");
        for f in open {
            p.push_str(&format!(
                "- {} ({}, {}): {} (expected: {}; actual: {})\n",
                f.id,
                f.by,
                f.evidence.severity,
                f.evidence.summary,
                f.evidence.failure_scenario.expected,
                f.evidence.failure_scenario.actual
            ));
        }
    }
    p
}

/// A reviewer's prompt: the draft and the lens's focus; the answer is the validator's format.
pub fn reviewer_prompt(unit: &str, draft: &str, lens: &str, round: u32) -> String {
    let focus = match lens {
        "design" => "design and feasibility: can every expectation be met and verified as written, is the scope right, is anything missing or contradictory",
        _ => "record discipline and goal coverage: every Goal clause covered by an expectation, verify annotations runnable, questions written as Q items, nothing decided in prose",
    };
    format!(
        "# Review the draft of unit {unit}, round {round}\n\nYou are an adversarial reviewer. Your focus: {focus}.\n\nAnswer with one JSON object in the output file, in the validator format (spec/schema/validator.schema.json): `verdict`, `expectations`, `findings` (each with file_path `intent/{unit}/iced.md`, criterion_ref, finding_category, severity in full such as `S2-major`, summary, failure_scenario). Do not name finding ids: the loop mints them.\n\n## The draft\n\n```markdown\n{draft}\n```\n"
    )
}

/// What the checkout holds now, as one hash: `HEAD`, and every changed or untracked path with
/// what it holds as the validators' fingerprint says it (a file's sha256, a link's target, a
/// special file's kind). The planner's only output is its draft: this must not move. A path is
/// never read through a link nor opened if it is a FIFO: a planner that leaves one behind must
/// not hang the loop or point it at a file outside the checkout (SPEC 24.6).
pub fn checkout_fingerprint(root: &Path) -> Result<String, String> {
    let head = crate::git::head(root).unwrap_or_default();
    let status = crate::git::run(
        root,
        &["status", "--porcelain=v1", "-z", "--untracked-files=all"],
    )?;
    let mut hasher = Sha256::new();
    hasher.update(head.as_bytes());
    for entry in status.split('\0').filter(|e| e.len() > 3) {
        hasher.update(entry.as_bytes());
        match content_hash(&root.join(&entry[3..])).as_str() {
            // What an earlier iced hashed, so a `before.txt` it wrote mid-planning still compares:
            // a regular file's digest as bytes, nothing for a path that is gone.
            "missing" | "unreadable" => {}
            hex if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) => {
                let bytes: Vec<u8> = (0..32)
                    .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap_or(0))
                    .collect();
                hasher.update(bytes);
            }
            other => hasher.update(other.as_bytes()),
        }
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// The loop's check of a draft against the text it revises: the keys the loop keeps, and lint at
/// stage `draft`. `Err` says why it is refused.
pub fn check_draft(repo: &Repo, id: &str, current: &str, draft: &str) -> Result<(), String> {
    let (was, now) = (parse_unit(current), parse_unit(draft));
    if now.frontmatter_problem.is_some() {
        return Err("the draft's frontmatter does not parse".into());
    }
    for key in PROTECTED {
        if was.frontmatter.get(key) != now.frontmatter.get(key) {
            return Err(format!("the draft changes `{key}`, which the loop keeps"));
        }
    }
    let unit = UnitFile {
        id: id.to_owned(),
        path: repo.unit_paths(id).iced,
        text: draft.to_owned(),
        parsed: now,
    };
    let numbers = Numbers::new(&repo.unit_ids("build").unwrap_or_default());
    let report = repo.lint_unit(&unit, Stage::Draft, &numbers);
    if let Some(e) = report.errors.first() {
        return Err(format!("lint at stage draft: {} ({})", e.code, e.message));
    }
    Ok(())
}

/// One ground of the loop's approval: what it is, and whether it holds.
pub struct Ground {
    pub what: String,
    pub holds: bool,
}

/// The grounds the loop needs to approve `unit` after the last round's reviews (SPEC 20.16).
pub fn grounds(
    repo: &Repo,
    unit: &UnitFile,
    config: &crate::config::Config,
    answered: &[(String, bool)],
    open: usize,
) -> Vec<Ground> {
    let fm = &unit.parsed.frontmatter;
    let numbers = Numbers::new(&repo.unit_ids("build").unwrap_or_default());
    let lint = repo.lint_unit(unit, Stage::Signoff, &numbers);
    let risk = fm.str("risk").and_then(|r| Risk::from_str(r).ok());
    let level = effective_autonomy(
        fm.get("autonomy").and_then(Scalar::as_int),
        risk,
        config.autonomy,
        config.max_autonomy,
    );
    let questions = unit.parsed.questions.len();
    let depends = crate::unit::parse::depends(&unit.parsed).len();
    let mut g = Vec::new();
    for (lens, ok) in answered {
        g.push(Ground {
            what: format!("the {lens} reviewer of the last round answered"),
            holds: *ok,
        });
    }
    g.push(Ground {
        what: format!("no open S1 or S2 finding of the last round ({open} open)"),
        holds: open == 0,
    });
    g.push(Ground {
        what: if lint.errors.is_empty() {
            "lint at stage signoff has no errors (every goal clause is covered)".into()
        } else {
            format!(
                "lint at stage signoff has no errors (it has: {})",
                lint.errors
                    .iter()
                    .map(|e| e.code)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        },
        holds: lint.errors.is_empty(),
    });
    g.push(Ground {
        what: format!("no question is open ({questions} Q items)"),
        holds: questions == 0,
    });
    g.push(Ground {
        what: format!("the unit depends on no other unit ({depends} `depends:` entries)"),
        holds: depends == 0,
    });
    g.push(Ground {
        what: format!("the effective autonomy is 3 (it is {level})"),
        holds: level == 3,
    });
    g
}

/// One reviewer's answer of one round, as the decision record tells it.
pub struct Review {
    pub round: u32,
    pub lens: String,
    pub answer: Result<Answer, String>,
}

/// `plan-decision.md`: the reviews, each finding's fate, the coverage map, the grounds, the
/// decision. Written by the loop only.
pub fn decision_record(
    unit: &UnitFile,
    run: &str,
    rounds: u32,
    reviews: &[Review],
    findings: &[Finding],
    grounds: &[Ground],
    approved: bool,
) -> String {
    let mut t = format!(
        "# Plan decision: {}\n\nWritten by the loop (`iced build --auto-plan`, SPEC 20.16); do not edit.\n\n- Run: {run}\n- Rounds: {rounds}\n- Decision: {}\n\n## Reviews\n\n",
        unit.id,
        if approved {
            "approved by the loop; the same run builds the unit"
        } else {
            "not approved by the loop; it awaits a person's `iced approve`"
        }
    );
    for r in reviews {
        let said = match &r.answer {
            Ok(a) => format!(
                "verdict {}, {} finding{}",
                a.verdict,
                a.findings.len(),
                if a.findings.len() == 1 { "" } else { "s" }
            ),
            Err(p) => format!("no usable answer ({p})"),
        };
        t.push_str(&format!("- Round {} {}: {said}\n", r.round, r.lens));
    }
    t.push_str("\n## Findings\n\n");
    if findings.is_empty() {
        t.push_str("None.\n");
    }
    for f in findings {
        t.push_str(&format!(
            "- {} (round {}, {}, {}): {}: {}\n",
            f.id, f.round, f.by, f.evidence.severity, f.status, f.evidence.summary
        ));
    }
    t.push_str("\n## Goal coverage\n\n");
    let map = crate::unit::coverage::coverage(&unit.parsed);
    if map.clauses.is_empty() {
        t.push_str("The Goal has no clauses.\n");
    }
    for c in &map.clauses {
        let by = if c.covered_by.is_empty() {
            "uncovered".to_owned()
        } else {
            c.covered_by.join(", ")
        };
        t.push_str(&format!("- {} \"{}\": {by}\n", c.id, c.text));
    }
    t.push_str("\n## Grounds\n\n");
    for g in grounds {
        t.push_str(&format!(
            "- [{}] {}\n",
            if g.holds { "x" } else { " " },
            g.what
        ));
    }
    t
}
