//! The guard (SPEC 24.1): one pure function that answers "may this change happen?" for an agent
//! in a host session, a lane's implementer, a validator or the refuter. It owns the path classes,
//! the rule table in its order, the config's integrity keys and the shell heuristic. It must never
//! read a file, a clock or a process: the caller hands it every text it needs (the text before a
//! write, the unit files as they stand, the config), so the receipt, the hook and `iced guard`
//! judge the same way, and a table test can walk every rule.

mod attributes;
mod config;
pub mod lex;
pub mod paths;
mod reasons;
pub mod shell;
pub mod test_paths;

#[cfg(test)]
mod shell_tests;
#[cfg(test)]
mod tests;

pub use config::{compare as compare_config, ConfigChange, INTEGRITY_KEYS};
pub use paths::{Class, Owned, Target};

use crate::unit::kinds::effective_autonomy;
use crate::unit::{
    contract_hash, lint, parse_unit, LintContext, Risk, Scalar, Stage, Status, UnitType,
    PROTECTED_KEYS,
};
use serde::Serialize;
use std::path::Path;
use std::str::FromStr;

/// Who proposes the change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Who {
    /// An interactive host session (seed 000's gate).
    Agent,
    /// A lane's implementer; the lane builds `unit`.
    Implementer {
        unit: String,
    },
    /// A lane's test writer (SPEC 20.17): `unit`'s implementer, fenced to the test paths matched
    /// by these globs (`build.testPaths`).
    TestWriter {
        unit: String,
        test_paths: Vec<String>,
    },
    Validator,
    Refuter,
}

impl Who {
    fn read_only(&self) -> Option<&'static str> {
        match self {
            Who::Validator => Some("validator"),
            Who::Refuter => Some("refuter"),
            _ => None,
        }
    }
}

/// Config `gate` (SPEC 11). It applies to `Who::Agent` only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    Strict,
    Always,
    Warn,
    Off,
}

impl Gate {
    /// The config's `gate` value; anything else is `strict` (the config refuses other values
    /// before the guard ever sees them).
    pub fn parse(text: &str) -> Gate {
        match text {
            "always" => Gate::Always,
            "warn" => Gate::Warn,
            "off" => Gate::Off,
            _ => Gate::Strict,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Allow,
    /// Allowed, and the host shows the reason as a notice.
    Notify,
    /// A person confirms it.
    Ask,
    Deny,
}

/// The text a write leaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum After {
    Text(String),
    Deleted,
    /// A shell write, or an edit whose old text is not found exactly once.
    Unpredictable,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Proposal {
    /// `path` is absolute or relative to the context's `cwd`; `before` is the file's text, none
    /// for a new file.
    Write {
        path: String,
        before: Option<String>,
        after: After,
    },
    Shell {
        command: String,
    },
    /// Any other tool call: a read.
    Other {
        tool: String,
    },
}

/// Everything the guard knows about the world.
pub struct Context<'a> {
    /// The repository root; paths are resolved against it (symbolic links already followed).
    pub root: &'a Path,
    pub cwd: &'a Path,
    pub who: Who,
    pub gate: Gate,
    /// For effective autonomy (SPEC 8).
    pub config: &'a crate::config::Config,
    /// The agent's active unit (`.iced/active`); ignored for the other roles.
    pub active: Option<&'a str>,
    /// A unit's `iced.md` text as it stands (the world before the change), by id.
    pub unit_text: &'a dyn Fn(&str) -> Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    #[serde(rename = "decision")]
    pub verdict: Verdict,
    /// A stable kebab-case code: the rule that decided, `allowed` or `gate-off`.
    pub rule: &'static str,
    /// A rule `gate: warn` never loosens.
    pub hard: bool,
    /// One paragraph; its last sentence is `Next step: <next>`.
    pub reason: String,
    pub next: String,
}

impl Decision {
    fn new(verdict: Verdict, rule: &'static str, hard: bool, why: String, next: String) -> Self {
        let next = next.trim_end_matches('.').to_owned() + ".";
        Decision {
            verdict,
            rule,
            hard,
            reason: format!("{} Next step: {next}", why.trim_end()),
            next,
        }
    }

    fn deny(rule: &'static str, hard: bool, why: String, next: String) -> Self {
        Decision::new(Verdict::Deny, rule, hard, why, next)
    }

    fn allow(why: impl Into<String>) -> Self {
        Decision::new(
            Verdict::Allow,
            "allowed",
            false,
            why.into(),
            "go ahead".into(),
        )
    }
}

/// What the guard knows of one unit.
#[derive(Debug, Clone)]
struct Unit {
    id: String,
    /// The text as it stands; none for a unit that does not exist.
    text: Option<String>,
    status: Option<Status>,
    kind: Option<UnitType>,
    autonomy: i64,
    contract_hash: Option<String>,
}

/// Whether a unit id as shown is a glob or an expansion (a shell path), not a real id.
fn is_pattern_id(id: &str) -> bool {
    id.contains(['*', '?', '…'])
}

/// Apply exact-text edits: each old text must occur exactly once in `before`, and the edits must
/// not overlap; otherwise the result cannot be predicted.
pub fn predict(before: &str, edits: &[(String, String)]) -> Option<String> {
    let mut spans: Vec<(usize, usize, &str)> = Vec::new();
    for (old, new) in edits {
        if old.is_empty() {
            return None;
        }
        let mut found = before.match_indices(old.as_str());
        let (start, _) = found.next()?;
        // A second occurrence starting inside the first counts too (`aa` in `aaa`).
        let after_first_char = start + old.chars().next().map_or(1, char::len_utf8);
        if before[after_first_char..].contains(old.as_str()) {
            return None;
        }
        spans.push((start, start + old.len(), new));
    }
    spans.sort_by_key(|s| s.0);
    if spans.windows(2).any(|w| w[1].0 < w[0].1) {
        return None;
    }
    let mut out = String::with_capacity(before.len());
    let mut at = 0;
    for (start, end, new) in spans {
        out.push_str(&before[at..start]);
        out.push_str(new);
        at = end;
    }
    out.push_str(&before[at..]);
    Some(out)
}

pub fn judge(ctx: &Context<'_>, proposal: &Proposal) -> Decision {
    let judge = Judge::new(ctx);
    if ctx.who == Who::Agent && ctx.gate == Gate::Off {
        return Decision::new(
            Verdict::Allow,
            "gate-off",
            false,
            "The gate is off in this repository (`gate: off`).".into(),
            "go ahead".into(),
        );
    }
    let decision = match proposal {
        Proposal::Write {
            path,
            before,
            after,
        } => judge.write(path, before.as_deref(), after),
        Proposal::Shell { command } => judge.shell(command),
        Proposal::Other { tool } => Decision::allow(format!("`{tool}` reads and changes nothing.")),
    };
    judge.loosen(decision)
}

struct Judge<'c, 'a> {
    ctx: &'c Context<'a>,
    /// The implementer's unit (taken as building) or the agent's active unit.
    focus: Option<Unit>,
}

/// Frontmatter values of these keys that differ between two texts (absent counts as null).
fn changed_keys(keys: &[&'static str], before: &str, after: &str) -> Vec<&'static str> {
    let a = parse_unit(before).frontmatter;
    let b = parse_unit(after).frontmatter;
    let value = |fm: &crate::unit::Frontmatter, k: &str| fm.get(k).cloned().unwrap_or(Scalar::Null);
    keys.iter()
        .copied()
        .filter(|k| value(&a, k) != value(&b, k))
        .collect()
}

/// Keys that choose a signed-off unit's lenses, autonomy and lanes.
const FROZEN_KEYS: &[&str] = &["type", "tier", "risk", "parent", "depends"];

impl<'c, 'a> Judge<'c, 'a> {
    fn new(ctx: &'c Context<'a>) -> Self {
        let mut judge = Judge { ctx, focus: None };
        judge.focus = match &ctx.who {
            Who::Implementer { unit } | Who::TestWriter { unit, .. } => {
                let mut u = judge.unit(unit);
                u.status = Some(Status::Building);
                Some(u)
            }
            Who::Agent => ctx
                .active
                .map(|id| judge.unit(id))
                .filter(|u| u.text.is_some() && !u.status.is_some_and(Status::is_terminal)),
            Who::Validator | Who::Refuter => None,
        };
        judge
    }

    fn unit(&self, id: &str) -> Unit {
        let text = if is_pattern_id(id) {
            None
        } else {
            (self.ctx.unit_text)(id)
        };
        let parsed = text.as_deref().map(parse_unit);
        let fm = parsed.as_ref().map(|p| &p.frontmatter);
        let str_of = |k: &str| fm.and_then(|f| f.str(k));
        Unit {
            id: id.to_owned(),
            status: str_of("status").and_then(|s| Status::from_str(s).ok()),
            kind: str_of("type").and_then(|s| UnitType::from_str(s).ok()),
            autonomy: effective_autonomy(
                fm.and_then(|f| f.get("autonomy")).and_then(Scalar::as_int),
                str_of("risk").and_then(|r| Risk::from_str(r).ok()),
                self.ctx.config.autonomy,
                self.ctx.config.max_autonomy,
            ),
            contract_hash: str_of("contract_hash")
                .filter(|h| !h.is_empty())
                .map(str::to_owned),
            text,
        }
    }

    /// The unit a path belongs to: the focus when it is the same id (so the implementer's unit
    /// keeps counting as building), else read.
    fn unit_of(&self, id: &str) -> Unit {
        match &self.focus {
            Some(u) if u.id == id => u.clone(),
            _ => self.unit(id),
        }
    }

    fn own_unit(&self) -> Option<&str> {
        match &self.ctx.who {
            Who::Implementer { unit } | Who::TestWriter { unit, .. } => Some(unit),
            _ => None,
        }
    }

    /// `gate: warn` turns an agent's soft denial into a notice.
    fn loosen(&self, mut d: Decision) -> Decision {
        if self.ctx.who == Who::Agent
            && self.ctx.gate == Gate::Warn
            && d.verdict == Verdict::Deny
            && !d.hard
        {
            d.verdict = Verdict::Notify;
            d.reason = format!(
                "The gate is `warn`, so this goes ahead with a notice. {}",
                d.reason
            );
        }
        d
    }

    fn write(&self, path: &str, before: Option<&str>, after: &After) -> Decision {
        let target = paths::classify(self.ctx.root, self.ctx.cwd, path);
        if let Some(role) = self.ctx.who.read_only() {
            return reasons::read_only(role, &format!("writes `{}`", target.rel));
        }
        if let Who::TestWriter { test_paths, .. } = &self.ctx.who {
            if target.class == Class::Outside || !test_paths::is_test_path(&target.rel, test_paths)
            {
                return reasons::test_path_only(&target.rel, test_paths);
            }
        }
        if let Some(d) = self.file_rules(&target, before, after) {
            return d;
        }
        if target.class == Class::Code {
            if let Some(d) = self.code_rules(&format!("this write to `{}`", target.rel)) {
                return d;
            }
        }
        Decision::allow(reasons::allowed(&target))
    }

    fn shell(&self, command: &str) -> Decision {
        let facts = shell::analyse(self.ctx.root, self.ctx.cwd, command);
        if let Some(role) = self.ctx.who.read_only() {
            if facts.mutating {
                return reasons::read_only(role, "runs a command that changes files");
            }
            if facts.inline_code {
                return reasons::read_only(role, "runs inline code");
            }
        }
        for written in &facts.writes {
            for (class, rel) in shell::candidates(written) {
                if let Who::TestWriter { test_paths, .. } = &self.ctx.who {
                    if !test_paths::is_test_path(&rel, test_paths) {
                        return reasons::test_path_only(&rel, test_paths);
                    }
                }
                let target = Target { class, rel };
                if let Some(mut d) = self.file_rules(&target, None, &After::Unpredictable) {
                    if d.rule == "owned-file" {
                        d.rule = "shell-owned";
                    }
                    return d;
                }
            }
        }
        if facts.mutates_inside {
            if let Some(d) = self.code_rules("this command") {
                return d;
            }
        }
        Decision::allow(if facts.mutating {
            "This command changes nothing iced guards."
        } else {
            "This command only reads."
        })
    }

    /// The rules about iced's own files, in the table's order: the first that denies wins.
    fn file_rules(&self, target: &Target, before: Option<&str>, after: &After) -> Option<Decision> {
        let who = &self.ctx.who;
        let own = self.own_unit();
        let rel = target.rel.as_str();
        match &target.class {
            Class::Owned(kind) => return Some(reasons::owned(*kind, rel, own, self.ctx.active)),
            Class::Host if *who != Who::Agent => return Some(reasons::host(rel)),
            Class::Config => {
                let change = match after {
                    After::Text(text) => config::compare(before, text),
                    _ => return Some(reasons::config_unpredictable(own)),
                };
                return match change {
                    ConfigChange::Keeps => None,
                    ConfigChange::NotAnObject => Some(reasons::config_not_object()),
                    ConfigChange::Changes(keys) => Some(reasons::config_keys(&keys, own)),
                };
            }
            Class::Code if attributes::is_attributes(rel) => {
                return match after {
                    After::Text(text) => {
                        let added = attributes::added_merge_lines(before, text);
                        (!added.is_empty()).then(|| reasons::merge_attribute(rel, &added))
                    }
                    After::Deleted => None,
                    // A shell write, or a file too large or not a file: its merge rules cannot be
                    // read, so they cannot be shown to be unchanged.
                    After::Unpredictable => Some(reasons::attributes_unpredictable(rel)),
                };
            }
            _ => {}
        }
        let id = match &target.class {
            Class::Unit(id) | Class::Decisions(id) | Class::Aux(id) => id,
            Class::Memory if own.is_some() => return Some(reasons::memory(rel, own?)),
            _ => return None,
        };
        let unit = self.unit_of(id);
        let is_unit_file = matches!(target.class, Class::Unit(_));
        if is_unit_file && unit.text.is_none() && !is_pattern_id(id) {
            return Some(reasons::unit_create(id, own));
        }
        if let Some(status) = unit.status.filter(|s| s.is_terminal()) {
            return Some(reasons::unit_closed(id, status, own));
        }
        if is_unit_file {
            if let Some(d) = self.unit_rules(&unit, before, after) {
                return Some(d);
            }
        }
        let own = own?;
        match &target.class {
            Class::Decisions(id) if id == own => {
                let old = before.unwrap_or("");
                let keeps = matches!(after, After::Text(new) if new.starts_with(old));
                (!keeps).then(|| reasons::decisions_append_only(id))
            }
            _ if id != own => Some(reasons::other_unit(rel, id, own)),
            _ => None,
        }
    }

    /// protected-key, frozen-key and contract-frozen, for a write to an existing unit's iced.md.
    fn unit_rules(&self, unit: &Unit, before: Option<&str>, after: &After) -> Option<Decision> {
        let own = self.own_unit();
        let before = before.or(unit.text.as_deref()).unwrap_or("");
        let after = match after {
            After::Text(t) => t.as_str(),
            After::Deleted => return Some(reasons::unit_deleted(&unit.id, own)),
            After::Unpredictable => return Some(reasons::unit_unpredictable(&unit.id, own)),
        };
        let changed = changed_keys(PROTECTED_KEYS, before, after);
        if !changed.is_empty() {
            return Some(reasons::protected(&unit.id, &changed, own));
        }
        let signed_off = match unit.status {
            Some(Status::Draft) => false,
            // Blocked before sign-off: no hash, only the protected keys are frozen.
            Some(Status::Blocked) => unit.contract_hash.is_some(),
            _ => true,
        };
        if !signed_off {
            return None;
        }
        let status = unit.status.map_or("past draft", Status::as_str);
        let frozen = changed_keys(FROZEN_KEYS, before, after);
        if !frozen.is_empty() {
            return Some(reasons::frozen(&unit.id, status, &frozen, own));
        }
        let Some(hash) = &unit.contract_hash else {
            return Some(reasons::no_hash(&unit.id, status));
        };
        if contract_hash(after) != *hash {
            let sections = reasons::changed_sections(before, after);
            return Some(reasons::contract(&unit.id, status, &sections, own));
        }
        let parsed = parse_unit(after);
        let report = lint(
            &parsed,
            Stage::Validate,
            &LintContext {
                text: Some(after),
                folder: Some(&unit.id),
                ..LintContext::default()
            },
        );
        (!report.is_clean()).then(|| reasons::lint_errors(&unit.id, &report))
    }

    /// review-read-only, code-frozen and autonomy-zero, for a change to code (`what` names it).
    fn code_rules(&self, what: &str) -> Option<Decision> {
        let who = &self.ctx.who;
        if !matches!(
            who,
            Who::Agent | Who::Implementer { .. } | Who::TestWriter { .. }
        ) {
            return None;
        }
        let Some(unit) = &self.focus else {
            return (self.ctx.gate == Gate::Always && *who == Who::Agent)
                .then(|| reasons::no_active_unit(what));
        };
        if unit.kind == Some(UnitType::Review) {
            return Some(reasons::review(&unit.id, what));
        }
        match unit.status {
            Some(Status::Building) if unit.autonomy == 0 => {
                Some(reasons::autonomy_zero(&unit.id, what))
            }
            Some(Status::Building) => None,
            status if *who == Who::Agent => {
                Some(reasons::code_frozen(&unit.id, status, unit.autonomy, what))
            }
            _ => None,
        }
    }
}
