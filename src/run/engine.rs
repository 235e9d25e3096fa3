//! The loop: admit a unit, then one step per call. Every call takes the lock, reads the state,
//! records what finished activities reported, asks `decide` (pure) what comes next, and does that
//! one thing: either quickly under the lock, or by recording `started`, unlocking, acting, and
//! recording the outcome under the lock again after checking it is still current.
//!
//! The lock is never held while an agent, a command or git runs.

use super::claims::{self, Claim, Claims, Taken};
use super::decide::{decide_with, DecideView, Next};
use super::events::emit;
use super::lock::{transact, StateLock};
use super::report;
use super::settings::{find_program, Settings};
use super::state::{
    ensure_dir, Base, Driver, Lane, Run, RunPaths, RunStatus, Stage, State, StepRecord, StepStatus,
};
use crate::activity::{self, ActivitySpec, Observation};
use crate::config::Config;
use crate::refusal::{io_error, Exit, Refusal};
use crate::repo::Repo;
use crate::unit::{Stage as LintStage, Status};
use serde::Serialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// Everything a call of the loop needs.
pub struct Ctx<'a> {
    pub repo: &'a Repo,
    pub paths: RunPaths,
    pub config: Config,
    pub settings: Settings,
    /// The iced binary, for launching supervisors.
    pub exe: PathBuf,
    /// The verb, named in refusals.
    pub step: &'static str,
    /// The repository's claims, found on first use (one `git rev-parse` per call).
    claims: std::sync::OnceLock<Claims>,
}

/// What one call did, and what the caller does next. `implement step --json` prints this.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StepReport {
    pub run: Option<String>,
    pub lane: Option<String>,
    pub stage: Option<String>,
    pub attempt: Option<u32>,
    pub action: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    /// For a validator: which lens or reviewer it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lens: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub brief: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worktree: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receipt_path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receipt_key: Option<String>,
    pub next: String,
}

impl StepReport {
    pub(super) fn for_lane(
        run: &Run,
        lane: &Lane,
        action: &'static str,
        next: impl Into<String>,
    ) -> Self {
        StepReport {
            run: Some(run.id.clone()),
            lane: Some(lane.id.clone()),
            stage: Some(lane.stage.as_str().to_owned()),
            attempt: Some(lane.attempt),
            action,
            role: None,
            read_only: None,
            lens: None,
            brief: None,
            worktree: None,
            receipt_path: None,
            receipt_key: None,
            next: next.into(),
        }
    }

    pub fn nothing() -> Self {
        StepReport {
            run: None,
            lane: None,
            stage: None,
            attempt: None,
            action: "nothing",
            role: None,
            read_only: None,
            lens: None,
            brief: None,
            worktree: None,
            receipt_path: None,
            receipt_key: None,
            next: "no live run: start one with `iced build <id>`".into(),
        }
    }

    /// Whether the caller should stop driving (nothing more happens without someone else).
    pub fn is_final(&self) -> bool {
        matches!(
            self.action,
            "delivered" | "blocked" | "handback" | "nothing" | "paused" | "start_agent"
        )
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

pub(super) fn new_nonce() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

pub(super) fn me() -> (u32, Option<u64>) {
    let pid = std::process::id();
    (pid, activity::pid_start_time(pid))
}

/// Is the invocation that recorded `started` on this record still running?
fn owner_alive(record: &StepRecord) -> bool {
    match (record.pid, record.pid_start) {
        (Some(pid), Some(start)) => activity::pid_start_time(pid) == Some(start),
        _ => false,
    }
}

pub(super) fn started(
    step: &str,
    attempt: u32,
    inputs: Option<String>,
    nonce: Option<String>,
) -> StepRecord {
    let (pid, pid_start) = me();
    StepRecord {
        step: step.to_owned(),
        attempt,
        status: StepStatus::Started,
        started_at: crate::clock::now_iso(),
        ended_at: None,
        inputs,
        nonce,
        pid: Some(pid),
        pid_start,
        outcome: None,
    }
}

pub(super) fn finish(record: &mut StepRecord, status: StepStatus, outcome: Value) {
    record.status = status;
    record.ended_at = Some(crate::clock::now_iso());
    record.outcome = Some(outcome);
}

impl<'a> Ctx<'a> {
    pub fn new(repo: &'a Repo, step: &'static str) -> Result<Ctx<'a>, Refusal> {
        let config = repo.config(step)?;
        let settings = Settings::from_config(&config, step)?;
        let exe = std::env::current_exe()
            .map_err(|e| io_error(step, format!("cannot find the iced binary: {e}")))?;
        Ok(Ctx {
            repo,
            paths: RunPaths::new(&repo.root),
            config,
            settings,
            exe,
            step,
            claims: std::sync::OnceLock::new(),
        })
    }

    pub(super) fn claims(&self) -> &Claims {
        self.claims.get_or_init(|| Claims::open(&self.repo.root))
    }

    /// The pace given on the command line, over what the configs and rulings say.
    pub fn set_pace_flags(&mut self, flags: &super::pace::Flags) -> Result<(), Refusal> {
        if flags.lanes.is_none() && flags.agents.is_none() {
            return Ok(());
        }
        self.settings.pace = super::settings::pace_with(&self.config, flags, self.step)?;
        Ok(())
    }

    pub(super) fn transact_pub<T>(
        &self,
        f: impl FnOnce(&mut State) -> Result<T, Refusal>,
    ) -> Result<T, Refusal> {
        self.transact(f)
    }

    pub(super) fn refuse_pub(
        &self,
        code: &'static str,
        reason: impl Into<String>,
        remedy: impl Into<String>,
    ) -> Refusal {
        self.refuse(code, reason, remedy)
    }

    pub(super) fn transact<T>(
        &self,
        f: impl FnOnce(&mut State) -> Result<T, Refusal>,
    ) -> Result<T, Refusal> {
        transact(&self.paths, self.step, self.settings.lock_wait, f)
    }

    fn refuse(
        &self,
        code: &'static str,
        reason: impl Into<String>,
        remedy: impl Into<String>,
    ) -> Refusal {
        Refusal::new(self.step, code, reason, remedy)
    }

    fn lane_dir(&self, run: &str, lane: &str) -> PathBuf {
        self.paths.lane_dir(run, lane)
    }

    /// `.iced/run/<run>/transcripts/<lane>-<role>-<attempt>.jsonl` (SPEC 20.8).
    pub fn transcript_path(&self, run: &str, lane: &str, role: &str, attempt: u32) -> PathBuf {
        self.paths
            .dir
            .join(run)
            .join("transcripts")
            .join(format!("{lane}-{role}-{attempt}.jsonl"))
    }

    pub fn receipt_path(&self, run: &str, lane: &str, attempt: u32) -> PathBuf {
        self.lane_dir(run, lane)
            .join(format!("report-{attempt}.json"))
    }

    fn brief_path(&self, run: &str, lane: &str, attempt: u32) -> PathBuf {
        self.lane_dir(run, lane).join(format!("brief-{attempt}.md"))
    }

    pub(super) fn activity_dir(&self, run: &str, lane: &str, step: &str, attempt: u32) -> PathBuf {
        self.lane_dir(run, lane)
            .join("activities")
            .join(format!("{step}-{attempt}"))
    }

    fn worktree_path(&self, lane: &str) -> PathBuf {
        match &self.settings.worktree_dir {
            Some(dir) if dir.is_absolute() => dir.join(lane),
            Some(dir) => self.repo.root.join(dir).join(lane),
            None => {
                let name = self
                    .repo
                    .root
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| "repo".into());
                self.repo
                    .root
                    .parent()
                    .unwrap_or(&self.repo.root)
                    .join(format!("{name}.iced-worktrees"))
                    .join(lane)
            }
        }
    }

    fn driver(&self) -> Driver {
        if self.settings.implementer.is_some() {
            Driver::Process
        } else {
            Driver::Host
        }
    }
}

// ------------------------------------------------------------------------------------------------
// Admit
// ------------------------------------------------------------------------------------------------

/// Check that a unit may be built and create its run, or find the live run to resume. Every check
/// runs before anything is written; each failure is its own refusal.
pub fn admit(
    ctx: &Ctx<'_>,
    reference: &str,
    session: Option<&str>,
) -> Result<(String, bool), Refusal> {
    let step = ctx.step;
    let repo = ctx.repo;
    let id = repo.resolve(reference, step)?;
    let Some(head) = crate::git::head(&repo.root) else {
        return Err(ctx.refuse(
            "not-a-git-repo",
            format!("`{}` is not a git work tree with a commit at HEAD", repo.root.display()),
            "the loop works on branches and worktrees: `git init`, commit the repository, then build again",
        ));
    };
    let state = State::load(&ctx.paths, step)?;
    if let Some(run) = state.live_run_of(&id) {
        return Ok((run.id.clone(), true));
    }
    // A delivery not yet landed: the work exists on its branch, and building again would only
    // find nothing to do. Landing (merge or pull request) retires the run.
    if let Some(run) = state
        .runs
        .values()
        .find(|r| r.unit == id && r.status == RunStatus::Delivered)
    {
        let branch = run
            .lanes
            .first()
            .and_then(|l| l.branch.clone())
            .unwrap_or_default();
        return Err(ctx.refuse(
            "unit-delivered",
            format!("`{id}` was delivered by run `{}` on branch `{branch}`, which has not landed", run.id),
            format!("merge that branch (`git merge {branch}`); its delivery commit carries the unit's close"),
        ));
    }
    let numbers = crate::repo::Numbers::new(&repo.unit_ids(step)?);
    let unit = check_unit(ctx, &state, &id, session, &numbers)?;
    let plan = if unit.parsed.frontmatter.str("type") == Some("project") {
        plan_project(ctx, &state, &id, session, &numbers)?
    } else {
        ProjectPlan {
            lanes: vec![(id.clone(), Vec::new())],
            skipped: Vec::new(),
        }
    };
    if ctx.settings.independent && ctx.settings.distinct_model {
        let same = ctx.settings.validator_model.is_some()
            && ctx.settings.validator_model == ctx.settings.implementer_model;
        if same || ctx.settings.validator_model.is_none() {
            return Err(ctx.refuse(
                "validator-not-distinct",
                format!(
                    "roles.validator.distinct_model is on, but the validator's model is {}",
                    match &ctx.settings.validator_model {
                        Some(m) => format!("`{m}`, the implementer's too"),
                        None => "not named, so it cannot be shown to differ".to_owned(),
                    }
                ),
                "name a different model in roles.validator.model, or turn distinct_model off",
            ));
        }
    }
    for runner in [&ctx.settings.implementer, &ctx.settings.validator]
        .into_iter()
        .flatten()
    {
        let program = &runner.argv[0];
        if find_program(program, std::env::var_os("PATH").as_deref()).is_none() {
            return Err(ctx.refuse(
                "runner-missing",
                format!(
                    "runner `{}` starts `{program}`, which is not an executable file or on PATH",
                    runner.name
                ),
                "install it, or point `runners` in `.iced/config.json` at the right program",
            ));
        }
    }
    // A new run starts agents: the ceiling must have room for one (SPEC 20.9).
    if ctx.driver() == Driver::Process {
        let alive: usize = state
            .runs
            .values()
            .filter(|r| !r.status.is_ended())
            .map(|r| agents_alive(ctx, r, true))
            .sum();
        let ceiling = ctx.settings.pace.agents as usize;
        if alive >= ceiling {
            return Err(ctx.refuse(
                "ceiling-full",
                format!("{alive} agents are alive in this repository, and pace.agents is {ceiling}"),
                "build again when one has ended (`iced run list` shows the runs), or raise `pace.agents` (or give `--pace-agents`)",
            ));
        }
    }

    // Every check passed: now, and only now, write.
    let run_id = format!(
        "run-{}-{}",
        crate::clock::now().format("%Y%m%dT%H%M%S"),
        &new_nonce()[..6]
    );
    let branch_base = crate::git::current_branch(&repo.root);
    let (pid, _) = me();
    let now = crate::clock::now_iso();
    let run = Run {
        id: run_id.clone(),
        unit: id.clone(),
        status: RunStatus::Running,
        driver: ctx.driver(),
        session: session.map(str::to_owned),
        created_at: now.clone(),
        updated_at: now.clone(),
        base: Base {
            commit: head,
            branch: branch_base,
        },
        next_eligible_at: None,
        paced: 0,
        pace: Some(ctx.settings.pace.to_value()),
        window_from: None,
        lanes: plan
            .lanes
            .iter()
            .map(|(unit, depends)| Lane {
                id: unit.clone(),
                unit: unit.clone(),
                stage: Stage::Brief,
                attempt: 1,
                crashes: 0,
                worktree: None,
                branch: Some(format!("iced/{id}/{unit}")),
                reason: None,
                steps: Vec::new(),
                findings: Vec::new(),
                mutations: 0,
                validators: Vec::new(),
                land_round: 0,
                depends: depends.clone(),
                released: false,
            })
            .collect(),
    };
    ensure_dir(&ctx.paths.dir, step)?;
    let _ = crate::store::write_atomic(&ctx.paths.dir.join(".gitignore"), b"*\n", 0o600);
    // The run's unit and each lane's: every one is claimed.
    let units: Vec<String> = std::iter::once(id.clone())
        .chain(
            plan.lanes
                .iter()
                .map(|(u, _)| u.clone())
                .filter(|u| *u != id),
        )
        .collect();
    // Stale claims another checkout left go first, under that checkout's lock, never under ours.
    let wait = ctx.settings.lock_wait;
    ctx.claims().clear_elsewhere(&units, session, step, wait)?;
    let created = ctx.transact(|state| {
        // Re-check under the lock: another `build` may have won the race.
        if let Some(existing) = state.live_run_of(&id) {
            return Ok(Err(existing.id.clone()));
        }
        let claim = Claim {
            run: run_id.clone(),
            session: session.map(str::to_owned),
            host: claims::host_name(),
            pid,
            at: now.clone(),
            root: Some(ctx.claims().root().to_owned()),
        };
        if let Taken::LiveHere(holder) = ctx
            .claims()
            .take(&units, &claim, state, session, step, wait)?
        {
            return Ok(Err(holder));
        }
        crate::failpoint::hit("admit-after-claim");
        state.runs.insert(run_id.clone(), run);
        Ok(Ok(()))
    })?;
    match created {
        Ok(()) => {
            crate::failpoint::hit("admit-after-state");
            emit(
                &ctx.paths,
                &run_id,
                "run_start",
                json!({"unit": id, "driver": ctx.driver(), "session": session, "lanes": plan.lanes.iter().map(|(u, _)| u).collect::<Vec<_>>(), "skipped": plan.skipped}),
            );
            Ok((run_id, false))
        }
        Err(existing) => Ok((existing, true)),
    }
}

/// The checks every unit a run builds must pass (SPEC 20.3), in order, each its own refusal. Only
/// reads: nothing is written.
fn check_unit(
    ctx: &Ctx<'_>,
    state: &State,
    id: &str,
    session: Option<&str>,
    numbers: &crate::repo::Numbers,
) -> Result<crate::repo::UnitFile, Refusal> {
    let step = ctx.step;
    let repo = ctx.repo;
    let id = id.to_owned();
    let unit = repo.read_unit(&id, step)?;
    let status = unit
        .parsed
        .frontmatter
        .str("status")
        .and_then(|s| Status::from_str(s).ok());
    if status != Some(Status::Approved) {
        return Err(ctx.refuse(
            "unit-not-approved",
            format!(
                "`{id}` is {}; only an approved unit is built",
                status.map_or("without a valid status".to_owned(), |s| s.to_string())
            ),
            match status {
                Some(Status::Draft) | Some(Status::Blocked) => {
                    format!("sign it off first: `iced approve {id}`")
                }
                _ => format!("`iced status {id}` shows where it stands"),
            },
        ));
    }
    crate::record::refuse_if_held(&unit, step)?;
    if let Some(q) = unit.parsed.open_questions().next() {
        return Err(ctx.refuse(
            "open-questions",
            format!("`{id}` has an open question: [{}] {}", q.id, q.text),
            format!(
                "answer it in the unit (`- [{}] ... -> A: <answer>`), approve again, then build",
                q.id
            ),
        ));
    }
    let signoff = repo.lint_unit(&unit, LintStage::Signoff, numbers);
    if !signoff.is_clean() {
        return Err(ctx
            .refuse(
                "lint-errors",
                format!(
                    "`{id}` has {} lint error(s) at stage signoff",
                    signoff.errors.len()
                ),
                format!("`iced lint {id} --stage signoff` lists them; fix them and approve again"),
            )
            .detail("lint", serde_json::to_value(&signoff).expect("serialises")));
    }
    let validate = repo.lint_unit(&unit, LintStage::Validate, numbers);
    if validate.errors.iter().any(|e| e.code == "contract-changed") {
        return Err(ctx.refuse(
            "contract-changed",
            format!("`{id}`: Intent or Expectations changed after approval"),
            format!("restore the approved text (`git diff intent/{id}/iced.md`), or approve the new contract: set status back to draft by `iced abandon` and a new unit, or edit and re-approve"),
        ));
    }
    let rel = format!("intent/{id}");
    match crate::git::is_clean(&repo.root, &[&rel]) {
        Ok(true) => {}
        Ok(false) => {
            return Err(ctx.refuse(
                "unit-uncommitted",
                format!("`{rel}/` has changes that are not committed; the lane's worktree starts from HEAD and would not see them"),
                format!("commit the approved unit: `git add {rel} && git commit -m \"approve {id}\"`, then build again"),
            ))
        }
        Err(e) => return Err(io_error(step, e)),
    }
    ctx.claims()
        .check(&id, state, session, step, ctx.settings.lock_wait)?;
    Ok(unit)
}

/// What a run builds: its lanes in dependency order, each with the lanes it waits for, and the
/// units below a project that it leaves out, with why.
struct ProjectPlan {
    lanes: Vec<(String, Vec<String>)>,
    skipped: Vec<Value>,
}

/// The `depends:` entries of a unit: ids or numbers, by commas or spaces, `[a, b]` read the same.
fn depends_of(unit: &crate::repo::UnitFile) -> Vec<String> {
    use crate::unit::frontmatter::Scalar;
    // `depends: 3` is read as a number by the frontmatter; it names unit 3 all the same.
    let text = match unit.parsed.frontmatter.get("depends") {
        Some(Scalar::Str(s)) => s.clone(),
        Some(Scalar::Int(n)) => n.to_string(),
        _ => String::new(),
    };
    text.trim()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The lanes of a project run (SPEC 23.6): every approved, unheld unit below the project that is
/// not itself a project, ordered so that each comes after its parent (when that is a lane) and
/// after what it `depends:` on; ties by id. Each lane's unit passes the checks any unit does.
fn plan_project(
    ctx: &Ctx<'_>,
    state: &State,
    project: &str,
    session: Option<&str>,
    numbers: &crate::repo::Numbers,
) -> Result<ProjectPlan, Refusal> {
    let step = ctx.step;
    let repo = ctx.repo;
    // Every readable unit; one that cannot be read cannot say whose child it is (lint names it).
    let units: BTreeMap<String, crate::repo::UnitFile> = repo
        .unit_ids(step)?
        .into_iter()
        .filter_map(|u| repo.read_unit(&u, step).ok().map(|f| (u, f)))
        .collect();
    let field = |u: &str, key: &str| -> Option<String> {
        units
            .get(u)
            .and_then(|f| f.parsed.frontmatter.str(key))
            .map(str::to_owned)
    };
    let status_of = |u: &str| field(u, "status").and_then(|s| Status::from_str(&s).ok());
    // Below the project: by parent, transitively.
    let mut below: Vec<String> = Vec::new();
    let mut frontier = vec![project.to_owned()];
    while let Some(p) = frontier.pop() {
        for (u, _) in units
            .iter()
            .filter(|(u, _)| field(u, "parent").as_deref() == Some(&p))
        {
            if !below.contains(u) && u != project {
                below.push(u.clone());
                frontier.push(u.clone());
            }
        }
    }
    below.sort();
    let mut lanes: Vec<String> = Vec::new();
    let mut skipped = Vec::new();
    for u in &below {
        let file = &units[u];
        let status = status_of(u);
        let why = if field(u, "type").as_deref() == Some("project") {
            Some("a project: its children are lanes".to_owned())
        } else if crate::record::refuse_if_held(file, step).is_err() {
            Some("held".to_owned())
        } else if status != Some(Status::Approved) {
            Some(status.map_or("no valid status".to_owned(), |s| s.to_string()))
        } else {
            None
        };
        match why {
            Some(why) => skipped.push(json!({"unit": u, "why": why})),
            None => lanes.push(u.clone()),
        }
    }
    if lanes.is_empty() {
        return Err(ctx.refuse(
            "project-empty",
            format!(
                "project `{project}` has no approved child to build{}",
                if skipped.is_empty() {
                    String::new()
                } else {
                    format!(
                        " ({})",
                        skipped
                            .iter()
                            .map(|s| format!(
                                "{}: {}",
                                s["unit"].as_str().unwrap_or(""),
                                s["why"].as_str().unwrap_or("")
                            ))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }
            ),
            format!("approve its children (`iced approve <child>`), or add one: `iced child {project} <title>`"),
        ));
    }
    // What each lane waits for.
    let mut deps: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for u in &lanes {
        let mut wants: Vec<String> = Vec::new();
        if let Some(parent) = field(u, "parent").filter(|p| p != project) {
            wants.push(parent);
        }
        for entry in depends_of(&units[u]) {
            let Ok(d) = repo.resolve(&entry, step) else {
                return Err(ctx.refuse(
                    "dependency-unknown",
                    format!("`{u}` depends on `{entry}`, which names no unit"),
                    format!("fix the `depends:` line of `intent/{u}/iced.md`"),
                ));
            };
            wants.push(d);
        }
        let mut mine = Vec::new();
        for d in wants {
            if lanes.contains(&d) {
                if !mine.contains(&d) {
                    mine.push(d);
                }
                continue;
            }
            // Outside the run: its work must already be there. A nested project is not work.
            let closed = matches!(status_of(&d), Some(Status::Done | Status::Accepted));
            if !closed && field(&d, "type").as_deref() != Some("project") {
                return Err(ctx.refuse(
                    "dependency-open",
                    format!(
                        "`{u}` depends on `{d}`, which is {} and not part of this run",
                        status_of(&d).map_or("unreadable".to_owned(), |s| s.to_string())
                    ),
                    format!("deliver `{d}` first, or approve it so the run builds it too"),
                ));
            }
        }
        deps.insert(u.clone(), mine);
    }
    // Dependency order, ties by id (Kahn's algorithm over a sorted set).
    let mut ordered: Vec<String> = Vec::new();
    let mut left: std::collections::BTreeSet<String> = lanes.iter().cloned().collect();
    while !left.is_empty() {
        let ready = left
            .iter()
            .find(|u| deps[*u].iter().all(|d| ordered.contains(d)))
            .cloned();
        match ready {
            Some(u) => {
                left.remove(&u);
                ordered.push(u);
            }
            None => {
                return Err(ctx.refuse(
                    "dependency-cycle",
                    format!(
                        "the children of `{project}` depend on each other in a cycle: {}",
                        left.iter().cloned().collect::<Vec<_>>().join(", ")
                    ),
                    "break the cycle in their `parent:` or `depends:` lines",
                ))
            }
        }
    }
    if ctx.settings.land.mode == "none" && deps.values().any(|d| !d.is_empty()) {
        return Err(ctx.refuse(
            "project-needs-landing",
            format!("children of `{project}` depend on each other, but `land.mode` is `none`: a lane would start from a target its dependencies never reach"),
            "set `land.mode` to `merge` or `pr` in `.iced/config.json`, or build the children one by one",
        ));
    }
    for u in &ordered {
        check_unit(ctx, state, u, session, numbers)?;
    }
    Ok(ProjectPlan {
        lanes: ordered
            .into_iter()
            .map(|u| {
                let d = deps.remove(&u).unwrap_or_default();
                (u, d)
            })
            .collect(),
        skipped,
    })
}

// ------------------------------------------------------------------------------------------------
// Choosing a run
// ------------------------------------------------------------------------------------------------

/// The run a call is about: the one named, or the only live one.
pub fn pick_run(ctx: &Ctx<'_>, run: Option<&str>) -> Result<Option<String>, Refusal> {
    let state = State::load(&ctx.paths, ctx.step)?;
    if let Some(r) = run {
        if state.runs.contains_key(r) {
            return Ok(Some(r.to_owned()));
        }
        let hits: Vec<&String> = state.runs.keys().filter(|k| k.contains(r)).collect();
        return match hits.as_slice() {
            [one] => Ok(Some((*one).clone())),
            [] => Err(ctx.refuse(
                "run-not-found",
                format!("no run `{r}`"),
                "`iced run list` shows the runs",
            )),
            _ => Err(ctx.refuse(
                "run-ambiguous",
                format!("`{r}` matches several runs"),
                "name the run by its full id (`iced run list`)",
            )),
        };
    }
    let live: Vec<&Run> = state
        .runs
        .values()
        .filter(|r| !r.status.is_ended())
        .collect();
    match live.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some(one.id.clone())),
        many => Err(ctx.refuse(
            "run-ambiguous",
            format!(
                "{} runs are live: {}",
                many.len(),
                many.iter()
                    .map(|r| r.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            "name one with `--run <id>`",
        )),
    }
}

// ------------------------------------------------------------------------------------------------
// One step
// ------------------------------------------------------------------------------------------------

/// The view `decide` needs of the settings: plain data, so `decide` stays pure.
fn decide_view(ctx: &Ctx<'_>, run: &Run) -> DecideView {
    DecideView {
        driver: run.driver,
        dod_shape: ctx.settings.dod.iter().map(Vec::len).collect(),
        dod_parallel: ctx.settings.dod_parallel,
        max_attempts: ctx.settings.max_attempts,
        max_crash_retries: ctx.settings.max_crash_retries,
        independent: ctx.settings.independent,
        paused: run.status == RunStatus::Paused,
        validators: run
            .lanes
            .iter()
            .filter(|l| matches!(l.stage, Stage::Validate | Stage::Refute))
            .map(|l| (l.id.clone(), super::judging::pinned_validators(ctx, l)))
            .collect(),
        pace_lanes: run_pace(ctx, run).lanes as usize,
        pace_agents: run_pace(ctx, run).agents as usize,
        agents_alive: 0,
        paced_until: paced_until(run),
        validator_driver: super::judging::validator_driver(ctx),
        max_mutations: ctx.settings.max_mutations,
        land_mode: ctx.settings.land.mode.clone(),
        arm_auto: ctx.settings.land.arm == "auto",
    }
}

/// The agents of `run` alive now (SPEC 20.9): its launches recorded and not yet ended, of the
/// implementer under the process driver and of validators run by a runner, and the agents handed
/// to the host and not yet answered (SPEC 24.8). With `check`, a launch whose supervisor is gone
/// or finished (not yet observed by a step of that run) does not count.
fn agents_alive(ctx: &Ctx<'_>, run: &Run, check: bool) -> usize {
    let mut alive = super::host::alive(run);
    for lane in &run.lanes {
        for r in lane.steps.iter().filter(|r| {
            r.status == StepStatus::Started && r.nonce.is_some() && r.attempt == lane.attempt
        }) {
            let agent = (r.step == "implement" && run.driver == Driver::Process)
                || (super::judging::is_validator_step(&r.step)
                    && ctx.settings.validator.is_some()
                    && r.outcome
                        .as_ref()
                        .is_none_or(|o| o.get("finished").is_none()));
            if !agent {
                continue;
            }
            if check {
                let dir = ctx.activity_dir(&run.id, &lane.id, &r.step, r.attempt);
                if matches!(
                    activity::observe(&dir),
                    Observation::Finished(_) | Observation::Gone
                ) {
                    continue;
                }
            }
            alive += 1;
        }
    }
    alive
}

/// Do one step of `run_id`.
fn step_once(ctx: &Ctx<'_>, run_id: &str) -> Result<StepReport, Refusal> {
    // Phase 1, under the lock: record what finished activities say, then decide.
    let (next, snapshot) = ctx.transact(|state| {
        // The agents of the other runs that are still alive (SPEC 20.9).
        let elsewhere: usize = state
            .runs
            .values()
            .filter(|r| r.id != run_id && !r.status.is_ended())
            .map(|r| agents_alive(ctx, r, true))
            .sum();
        let Some(run) = state.runs.get_mut(run_id) else {
            // Landed and retired (by a concurrent call, since this one chose the run): the run
            // has left the state, and its record says how it ended.
            if let Some(run) = super::record::read(&ctx.paths, run_id)
                .and_then(|r| serde_json::from_value::<Run>(r["run"].clone()).ok())
                .filter(|r| r.status.is_ended())
            {
                return Ok((Pending::Report(Box::new(ended_report(&run))), run));
            }
            return Err(ctx.refuse(
                "run-not-found",
                format!("no run `{run_id}`"),
                "`iced run list` shows the runs",
            ));
        };
        let before = run.clone();
        observe(ctx, run)?;
        check_inputs(ctx, run)?;
        keep_work_window(ctx, run);
        let mut view = decide_view(ctx, run);
        // This run's were just observed: those recorded running are.
        view.agents_alive = elsewhere + agents_alive(ctx, run, false);
        if view.agents_alive > view.pace_agents {
            emit(
                &ctx.paths,
                run_id,
                "ceiling_overrun",
                json!({"alive": view.agents_alive, "ceiling": view.pace_agents, "ruling": run_pace(ctx, run).ruling}),
            );
        }
        let expected = |i: usize, j: usize| ctx.settings.dod[i][j].expected_exit_codes.clone();
        let next = decide_with(run, &view, &expected);
        // Quick decisions are applied here, under the same lock.
        let applied = apply_quick(ctx, run, &next)?;
        settle(ctx, run);
        super::host::end_stranded(ctx, run);
        // Only a step that changed something is an update: asking again (a host polling for its
        // `start_agent`) must write nothing (SPEC 20.2).
        if *run != before {
            run.updated_at = crate::clock::now_iso();
        }
        let snapshot = run.clone();
        // A delivery that landed and retired leaves the state; its record stays (SPEC 23.3).
        if snapshot.status == RunStatus::Delivered && is_retired(&snapshot) {
            state.runs.remove(run_id);
        }
        Ok((applied, snapshot))
    })?;
    let started_step = match &next {
        Pending::AddWorktree { lane } => Some((lane, "worktree")),
        Pending::LaunchImplementer { lane, .. } => Some((lane, "implement")),
        Pending::CheckReceipt { lane } => Some((lane, "receipt")),
        Pending::Deliver { lane } => Some((lane, "deliver")),
        Pending::PrepareValidators { lane, .. } => Some((lane, "validate")),
        Pending::Sync { lane, step } => Some((lane, step.as_str())),
        Pending::Report(_)
        | Pending::LaunchDod { .. }
        | Pending::LaunchValidators { .. }
        | Pending::CheckValidator { .. } => None,
    };
    if let Some((lane, step)) = started_step {
        let attempt = snapshot.lane(lane).map_or(0, |l| l.attempt);
        emit(
            &ctx.paths,
            run_id,
            "step_start",
            json!({"lane": lane, "step": step, "attempt": attempt}),
        );
    }
    // Phase 2: act outside the lock, when the decision has a side effect.
    act(ctx, &snapshot, next)
}

/// Every lane of the run has landed and been retired.
fn is_retired(run: &Run) -> bool {
    run.lanes.iter().all(|l| {
        l.stage == Stage::Discarded || l.outcome("retire").is_some_and(|o| o["retired"] == true)
    })
}

/// `iced run retire`: retire the lanes of delivered runs whose work is in the target (a person
/// merged a `none`-mode delivery, or a retire was left undone), and let those runs leave the state.
pub fn retire_runs(ctx: &Ctx<'_>, only: Option<&str>) -> Result<Vec<Value>, Refusal> {
    let state = State::load(&ctx.paths, ctx.step)?;
    let mut out = Vec::new();
    for run in state
        .runs
        .values()
        .filter(|r| r.status.is_ended() && only.is_none_or(|o| o == r.id))
    {
        let target = super::landing::target(ctx, run).unwrap_or_default();
        // Landed means in the remote's target when a remote is set (SPEC 23.3), fetched now.
        let landed_in = match &ctx.settings.land.remote {
            Some(remote) => super::land::fetch(&ctx.repo.root, remote, &target),
            None => super::land::rev(&ctx.repo.root, &format!("refs/heads/{target}")),
        }
        .unwrap_or_default();
        let mut all = true;
        let mut lanes = Vec::new();
        for lane in &run.lanes {
            let worktree = lane.worktree.as_deref().map(PathBuf::from);
            let branch = lane.branch.clone().unwrap_or_default();
            let result = if run.status == RunStatus::Delivered {
                let landed = super::landing::landed_by_loop(lane);
                super::land::retire(
                    &ctx.repo.root,
                    worktree.as_deref(),
                    &branch,
                    &landed_in,
                    landed.as_ref().map(|(c, h)| (c.as_str(), h.as_str())),
                )
            } else {
                // An abandoned or handed-back run's work never landed: its branch is kept for a
                // person; only a clean worktree goes.
                Ok(super::land::Retired::NotLanded)
            };
            let said = match result {
                Ok(super::land::Retired::Removed) => "retired".to_owned(),
                Ok(super::land::Retired::DirtyKept(p)) => {
                    format!("kept: `{}` has uncommitted changes", p.display())
                }
                Ok(super::land::Retired::NotLanded) => format!("not landed in `{target}` yet"),
                Err(e) => e,
            };
            all &= said == "retired";
            lanes.push(json!({"lane": lane.id, "result": said}));
        }
        if all {
            ctx.transact(|state| {
                if let Some(r) = state.runs.get(&run.id) {
                    super::record::write(ctx, r);
                }
                state.runs.remove(&run.id);
                Ok(())
            })?;
            emit(&ctx.paths, &run.id, "run_retired", json!({}));
        }
        out.push(json!({"run": run.id, "retired": all, "lanes": lanes}));
    }
    Ok(out)
}

/// `step`, logging a refusal as an event of the run it refused.
pub fn step(ctx: &Ctx<'_>, run_id: &str) -> Result<StepReport, Refusal> {
    logged(ctx, run_id, step_once(ctx, run_id)).map(|r| lane_not_run(ctx, run_id, r))
}

/// In a project run, one lane blocking or handed back ends nothing while the run goes on: the
/// report says what happened to the lane and asks to call again (SPEC 23.6). Only the run's own
/// end, or a run every lane of which waits for a person, is final for the caller.
fn lane_not_run(ctx: &Ctx<'_>, run_id: &str, mut report: StepReport) -> StepReport {
    if !matches!(report.action, "blocked" | "handback") {
        return report;
    }
    let Ok(state) = State::load(&ctx.paths, ctx.step) else {
        return report;
    };
    let Some(run) = state.runs.get(run_id) else {
        return report;
    };
    if run.lanes.len() < 2 || run.status != RunStatus::Running {
        return report;
    }
    report.next = format!(
        "lane `{}` is {}: {}; the other lanes go on: call again",
        report.lane.as_deref().unwrap_or(""),
        if report.action == "blocked" {
            "blocked"
        } else {
            "handed back"
        },
        report.next
    );
    report.action = "advanced";
    report
}

fn logged<T>(ctx: &Ctx<'_>, run_id: &str, result: Result<T, Refusal>) -> Result<T, Refusal> {
    if let Err(r) = &result {
        emit(
            &ctx.paths,
            run_id,
            "refusal",
            json!({"step": r.step, "code": r.code}),
        );
    }
    result
}

/// What phase 1 left for phase 2.
enum Pending {
    /// Nothing left to do; report this.
    Report(Box<StepReport>),
    AddWorktree {
        lane: String,
    },
    LaunchImplementer {
        lane: String,
        nonce: String,
    },
    CheckReceipt {
        lane: String,
    },
    LaunchDod {
        lane: String,
        keys: Vec<(String, usize, usize, String)>,
    },
    Deliver {
        lane: String,
    },
    Sync {
        lane: String,
        step: String,
    },
    PrepareValidators {
        lane: String,
        keys: Vec<String>,
    },
    LaunchValidators {
        lane: String,
        keys: Vec<(String, String)>,
    },
    CheckValidator {
        lane: String,
        key: String,
    },
}

/// Record the outcomes of finished activities of the run's lanes. A supervisor that is gone
/// without an outcome, or a launch whose launcher died before its supervisor registered, is a
/// crash. An outcome whose nonce is not the record's is superseded and ignored.
fn observe(ctx: &Ctx<'_>, run: &mut Run) -> Result<(), Refusal> {
    let run_id = run.id.clone();
    // Whether an implementer ended rate limited, or ended otherwise (SPEC 20.10).
    let mut rate_limited: Option<bool> = None;
    for lane in &mut run.lanes {
        let attempt = lane.attempt;
        let lane_id = lane.id.clone();
        for record in lane
            .steps
            .iter_mut()
            .filter(|r| r.status == StepStatus::Started)
        {
            let validator_process = super::judging::is_validator_step(&record.step)
                && ctx.settings.validator.is_some()
                && record.nonce.is_some()
                && record
                    .outcome
                    .as_ref()
                    .is_none_or(|o| o.get("finished").is_none());
            let is_activity = record.step == "implement" && run.driver == Driver::Process
                || is_dod_key(&record.step)
                || validator_process;
            if !is_activity {
                // A synchronous step whose call died: clear its owner, so `decide` redoes it.
                if record.pid.is_some() && !owner_alive(record) {
                    record.pid = None;
                    record.pid_start = None;
                    emit(
                        &ctx.paths,
                        &run_id,
                        "owner_gone",
                        json!({"lane": lane_id, "step": record.step, "attempt": record.attempt}),
                    );
                }
                continue;
            }
            if record.attempt != attempt {
                continue;
            }
            let Some(nonce) = record.nonce.clone() else {
                continue;
            };
            let dir = ctx.activity_dir(&run_id, &lane_id, &record.step, attempt);
            match activity::observe(&dir) {
                Observation::Finished(outcome) if outcome.nonce == nonce && validator_process => {
                    // A validator's tree and answer are checked outside the lock, next step.
                    let summary = serde_json::to_value(&outcome).expect("an outcome serialises");
                    super::judging::observed_finished(record, summary);
                    emit(
                        &ctx.paths,
                        &run_id,
                        "agent_end",
                        json!({"lane": lane_id, "attempt": attempt, "role": if record.step == "refute" { "refuter" } else { "validator" }, "step": record.step, "outcome": {"exit_code": outcome.exit_code, "timed_out": outcome.timed_out}}),
                    );
                }
                Observation::Finished(outcome) if outcome.nonce == nonce => {
                    let harness = (record.step == "implement")
                        .then_some(ctx.settings.implementer.as_ref())
                        .flatten()
                        .filter(|r| r.kind.is_harness())
                        .map(|r| {
                            let receipt = ctx.receipt_path(&run_id, &lane_id, attempt);
                            let transcript =
                                ctx.transcript_path(&run_id, &lane_id, "implementer", attempt);
                            read_harness(
                                &dir,
                                r,
                                (outcome.exit_code, outcome.timed_out),
                                false,
                                &receipt,
                                r.transcripts.then_some(transcript.as_path()),
                            )
                        });
                    crate::failpoint::hit("observe-before-record");
                    let mut summary =
                        serde_json::to_value(&outcome).expect("an outcome serialises");
                    if let Some((result, failed)) = &harness {
                        summary["harness"] = result.clone();
                        let limited = result["rate_limited"] == true;
                        rate_limited = Some(limited || rate_limited == Some(true));
                        if let Some(why) = failed {
                            // The harness says the run failed: a crash, whatever it exited with;
                            // unless the provider asked to slow down, which is nobody's fault.
                            if limited {
                                summary["rate_limited"] = true.into();
                            } else {
                                summary["crashed"] = true.into();
                            }
                            summary["harness_failed"] = why.clone().into();
                            finish(record, StepStatus::Failed, summary);
                            emit(
                                &ctx.paths,
                                &run_id,
                                "agent_end",
                                json!({"lane": lane_id, "attempt": attempt, "role": "implementer", "outcome": {"exit_code": outcome.exit_code, "harness_failed": why}}),
                            );
                            emit(
                                &ctx.paths,
                                &run_id,
                                "step_failed",
                                json!({"lane": lane_id, "step": record.step, "attempt": attempt, "outcome": "harness_failed"}),
                            );
                            continue;
                        }
                    }
                    finish(record, StepStatus::Done, summary);
                    let short = json!({"exit_code": outcome.exit_code, "signal": outcome.signal, "timed_out": outcome.timed_out, "duration_ms": outcome.duration_ms});
                    if record.step == "implement" {
                        emit(
                            &ctx.paths,
                            &run_id,
                            "agent_end",
                            json!({"lane": lane_id, "attempt": attempt, "role": "implementer", "outcome": short}),
                        );
                    }
                    emit(
                        &ctx.paths,
                        &run_id,
                        "step_done",
                        json!({"lane": lane_id, "step": record.step, "attempt": attempt, "outcome": short}),
                    );
                }
                Observation::Finished(outcome) => {
                    emit(
                        &ctx.paths,
                        &run_id,
                        "superseded",
                        json!({"lane": lane_id, "step": record.step, "attempt": attempt, "nonce": outcome.nonce}),
                    );
                }
                Observation::Running { .. } => {}
                Observation::NotRegistered if owner_alive(record) && !launch_stale(&dir) => {}
                Observation::NotRegistered | Observation::Gone => {
                    // Whatever the dead supervisor's child left running must not go on working
                    // in the worktree while the next attempt starts.
                    activity::kill_orphans(&dir);
                    finish(record, StepStatus::Failed, json!({"crashed": true}));
                    if record.step == "implement" || validator_process {
                        emit(
                            &ctx.paths,
                            &run_id,
                            "agent_end",
                            json!({"lane": lane_id, "attempt": attempt, "role": role_of_step(&record.step), "step": record.step, "outcome": "crashed"}),
                        );
                    }
                    emit(
                        &ctx.paths,
                        &run_id,
                        "step_failed",
                        json!({"lane": lane_id, "step": record.step, "attempt": attempt, "outcome": "crashed"}),
                    );
                }
            }
        }
    }
    // Validators' results are checked outside the lock; their pace is applied here, once per
    // record (marked `pace_applied`), so a call killed after recording a check loses nothing.
    for lane in &mut run.lanes {
        for record in lane.steps.iter_mut().filter(|r| {
            super::judging::is_validator_step(&r.step) && r.status != StepStatus::Started
        }) {
            let Some(o) = record.outcome.as_mut() else {
                continue;
            };
            if !o["harness"].is_object() || o.get("pace_applied").is_some() {
                continue;
            }
            let limited = o["harness"]["rate_limited"] == true;
            rate_limited = Some(limited || rate_limited == Some(true));
            o["pace_applied"] = true.into();
        }
    }
    match rate_limited {
        Some(true) => pace_after_rate_limit(ctx, run),
        Some(false) => run.paced = 0,
        None => {}
    }
    Ok(())
}

/// A rate-limited agent result: the run launches nothing before a backoff has passed, doubled
/// for each such result in a row, capped, with up to 20% jitter either way (SPEC 20.10).
pub(super) fn pace_after_rate_limit(ctx: &Ctx<'_>, run: &mut Run) {
    let pace = run_pace(ctx, run);
    let base = pace.backoff_sec * 1000.0;
    let cap = pace.backoff_max_sec * 1000.0;
    let doubled = base * 2f64.powi(run.paced.min(20) as i32);
    // Jitter from the clock's nanoseconds: enough to spread runs that were limited together.
    let nanos = f64::from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos()),
    );
    let jitter = 0.8 + 0.4 * (nanos / 1e9);
    let wait_ms = (doubled.min(cap) * jitter).max(1.0) as i64;
    let until = crate::clock::real_now() + chrono::Duration::milliseconds(wait_ms);
    // Whole seconds, rounded up: never earlier than the wait.
    let until = until
        .checked_add_signed(chrono::Duration::milliseconds(999))
        .map_or(until, |t| t)
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    run.paced += 1;
    run.next_eligible_at = Some(until.clone());
    emit(
        &ctx.paths,
        &run.id,
        "paced",
        json!({"until": until, "why": "rate_limited", "backoff_ms": wait_ms, "in_a_row": run.paced, "ruling": pace.ruling}),
    );
}

/// The pace `run` keeps: the one it recorded, else (a run from before paces were recorded) the
/// settings' (SPEC 20.11).
pub fn run_pace(ctx: &Ctx<'_>, run: &Run) -> super::pace::Pace {
    run.pace
        .as_ref()
        .and_then(super::pace::Pace::from_value)
        .unwrap_or_else(|| ctx.settings.pace.clone())
}

/// The work window (SPEC 20.11): after `workMinutes` of work, `pauseMinutes` launching nothing.
fn keep_work_window(ctx: &Ctx<'_>, run: &mut Run) {
    let pace = run_pace(ctx, run);
    let (Some(work), Some(pause)) = (pace.work_minutes, pace.pause_minutes) else {
        return;
    };
    let now = crate::clock::real_now();
    let iso =
        |t: chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let from = run
        .window_from
        .as_deref()
        .and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok())
        .map(|t| t.with_timezone(&chrono::Utc));
    let Some(from) = from else {
        run.window_from = Some(iso(now));
        return;
    };
    let minutes = |m: f64| chrono::Duration::milliseconds((m * 60_000.0) as i64);
    if now >= from + minutes(work) {
        let until = now + minutes(pause);
        run.next_eligible_at = Some(iso(until));
        run.window_from = Some(iso(until));
        emit(
            &ctx.paths,
            &run.id,
            "paced",
            json!({"until": iso(until), "why": "work_window", "work_minutes": work, "pause_minutes": pause, "ruling": pace.ruling}),
        );
    }
}

/// Whether `run` may launch an agent now: `None`, or the time it may.
fn paced_until(run: &Run) -> Option<String> {
    let until = run.next_eligible_at.as_deref()?;
    let at = chrono::DateTime::parse_from_rfc3339(until).ok()?;
    (at > crate::clock::real_now()).then(|| until.to_owned())
}

/// What a harness's output says of a finished agent (SPEC 20.8): the `harness` record of the
/// step's outcome, and why the run failed if it did. When it did not, and the agent left no answer
/// at `output`, the one fenced `json` block of its final message is written there (0600): once,
/// so a call killed after writing it finds it there and reads it as the agent's.
pub(super) fn read_harness(
    dir: &Path,
    runner: &super::settings::Runner,
    (exit_code, timed_out): (Option<i32>, bool),
    read_only: bool,
    output: &Path,
    transcript: Option<&Path>,
) -> (Value, Option<String>) {
    let kind = runner.kind;
    let stdout = crate::store::read_no_follow(&dir.join(activity::files::STDOUT), 1 << 20)
        .unwrap_or_default();
    let Some(result) = crate::runner::parse(kind, &String::from_utf8_lossy(&stdout)) else {
        let why = if timed_out {
            "it timed out before reporting a result".to_owned()
        } else {
            "its output holds no result".to_owned()
        };
        return (json!({"error": why}), Some(why));
    };
    let mut failed = result.failed(read_only).then(|| {
        result
            .error
            .clone()
            .unwrap_or_else(|| "the harness reported an error".into())
    });
    if failed.is_none() && exit_code != Some(0) {
        failed = Some(format!(
            "it exited with {}",
            exit_code.map_or_else(|| "a signal".to_owned(), |c| format!("code {c}"))
        ));
    }
    if failed.is_none() && !output.exists() {
        if let Some(answer) = result
            .final_text
            .as_deref()
            .and_then(crate::runner::fenced_json)
        {
            let _ = crate::store::write_atomic(output, answer.as_bytes(), 0o600);
            crate::failpoint::hit("answer-after-write");
        }
    }
    let mut value = result.to_value();
    if let (Some(session), Some(to)) = (&result.session_id, transcript) {
        if let Some(copied) = copy_transcript(runner, session, to) {
            // pi's session file holds every message once: its usage is whole, where the output's
            // kept tail may not be.
            if kind == crate::runner::Kind::Pi {
                let text = crate::store::read_no_follow(Path::new(&copied), 64 << 20)
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .unwrap_or_default();
                if let Some((turns, input, output, cost)) = crate::runner::pi_session_usage(&text) {
                    value["turns"] = turns.into();
                    value["input_tokens"] = input.into();
                    value["output_tokens"] = output.into();
                    if let (Some(c), false) = (cost, result.is_error && input + output == 0) {
                        value["cost_usd"] = c.into();
                    }
                }
            }
            value["transcript"] = copied.into();
        }
    }
    (value, failed)
}

/// Copy a harness session's transcript to `to` (0600), secrets redacted (SPEC 20.8): the values
/// of the variables iced passes the harness for its credentials, and keys by their shape. Done
/// again whole by a call that died before recording it. Returns the path written.
fn copy_transcript(runner: &super::settings::Runner, session: &str, to: &Path) -> Option<String> {
    let var = |k: &str| std::env::var(k).ok();
    let from = crate::runner::transcript_of(runner.kind, session, &var)?;
    let text = crate::store::read_limited(&from, 64 * 1024 * 1024).ok()?;
    // Secrets: every variable of iced's environment named like one, and the values the runner's
    // `env` gives to variables named like one (whatever its template reads them from).
    let secret_name = |k: &str| {
        ["KEY", "TOKEN", "SECRET", "PASSWORD"]
            .iter()
            .any(|w| k.to_ascii_uppercase().contains(w))
    };
    let vars: Vec<(String, String)> = std::env::vars().collect();
    let mut secrets: Vec<String> = vars
        .iter()
        .filter(|(k, _)| secret_name(k))
        .map(|(_, v)| v.clone())
        .collect();
    secrets.extend(
        runner
            .env
            .iter()
            .filter(|(k, _)| secret_name(k))
            .map(|(_, t)| crate::activity::expand_vars(t, &vars)),
    );
    let clean = crate::runner::redact(&String::from_utf8_lossy(&text), &secrets);
    if let Some(parent) = to.parent() {
        crate::store::create_dir_all(parent).ok()?;
    }
    crate::store::write_atomic(to, clean.as_bytes(), 0o600).ok()?;
    Some(to.display().to_string())
}

/// The role of an agent step's agent.
fn role_of_step(step: &str) -> &'static str {
    match step {
        "implement" => "implementer",
        "refute" => "refuter",
        _ => "validator",
    }
}

/// A definition-of-done command's step: `dod-<i>-<j>`, or `retest-<round>-<i>-<j>` after landing
/// brought the target in.
pub(super) fn is_dod_key(step: &str) -> bool {
    step.starts_with("dod-") || step.starts_with("retest-")
}

/// A launch whose supervisor has not registered 10 seconds after its spec was written died before
/// it could (wall clock of the file system, not `ICED_NOW`: a pinned clock must not hide a crash).
/// Declaring it crashed is safe even if it is only slow: the gate then refuses it.
fn launch_stale(dir: &Path) -> bool {
    std::fs::metadata(dir.join(activity::files::SPEC))
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age > std::time::Duration::from_secs(10))
}

/// A re-entry whose inputs changed is refused: the brief of the current attempt must still render
/// to the bytes the agent was (or will be) given.
fn check_inputs(ctx: &Ctx<'_>, run: &Run) -> Result<(), Refusal> {
    for lane in &run.lanes {
        // The brief feeds the attempt's work up to its validation; from delivery on the lane
        // works from its own branch, and landing rightly changes the unit in the person's checkout.
        if lane.stage.is_final()
            || matches!(lane.stage, Stage::Deliver | Stage::Land | Stage::Retire)
        {
            continue;
        }
        let Some(record) = lane
            .record("brief")
            .filter(|r| r.status == StepStatus::Done)
        else {
            continue;
        };
        let Some(worktree) = lane
            .worktree
            .as_deref()
            .map(PathBuf::from)
            .or_else(|| Some(ctx.worktree_path(&lane.id)))
        else {
            continue;
        };
        let text = render_brief(ctx, run, lane, &worktree)?;
        let now = sha256_hex(text.as_bytes());
        if record.inputs.as_deref() != Some(now.as_str()) {
            return Err(ctx.refuse(
                "inputs-changed",
                format!("the brief of `{}` attempt {} no longer renders as it did (the unit, an ancestor, a knowledge file or the definition of done changed under the live run)", lane.id, lane.attempt),
                format!("restore what changed (`git diff` in the repository), or end the run (`iced run abandon {}`) and build again", run.id),
            ));
        }
    }
    Ok(())
}

fn render_brief(ctx: &Ctx<'_>, run: &Run, lane: &Lane, worktree: &Path) -> Result<String, Refusal> {
    let unit_text = crate::repo::read_text(&ctx.repo.unit_paths(&lane.unit).iced)
        .map_err(|e| e.refusal(ctx.step))?;
    let receipt = ctx.receipt_path(&run.id, &lane.id, lane.attempt);
    let branch = lane.branch.clone().unwrap_or_default();
    // The findings this attempt was asked to dispose of: found before it, and still open or
    // disposed of by it. Fixed per attempt, so the brief renders the same bytes all attempt long.
    let open: Vec<super::validate::Finding> = lane
        .findings
        .iter()
        .filter(|f| {
            f.round < lane.attempt
                && (f.status == "open"
                    || f.disposition
                        .as_ref()
                        .and_then(|d| d.get("attempt"))
                        .and_then(Value::as_u64)
                        == Some(u64::from(lane.attempt)))
        })
        .cloned()
        .collect();
    let gaps = if lane.attempt > 1 {
        lane.reason.clone()
    } else {
        None
    };
    Ok(super::brief::render(&super::brief::BriefInput {
        repo: ctx.repo,
        settings: &ctx.settings,
        unit: &lane.unit,
        unit_text: &unit_text,
        run: &run.id,
        lane: &lane.id,
        attempt: lane.attempt,
        base_commit: run.base_of(lane),
        branch: &branch,
        worktree,
        receipt_path: &receipt,
        previous_gaps: gaps.as_deref(),
        findings: &open,
    }))
}

/// Start a new attempt of a lane: the current attempt's records move to the run's history.
pub(super) fn new_attempt(
    ctx: &Ctx<'_>,
    run_id: &str,
    lane: &mut Lane,
    reason: String,
    crashed: bool,
) -> Result<(), Refusal> {
    let attempt = lane.attempt;
    let (mut old, keep): (Vec<StepRecord>, Vec<StepRecord>) = lane
        .steps
        .drain(..)
        .partition(|r| r.attempt == attempt && r.step != "worktree" && r.step != "base");
    lane.steps = keep;
    super::host::end_with_attempt(ctx, run_id, &lane.id, &mut old);
    archive(ctx, run_id, &lane.id, &old)?;
    lane.attempt += 1;
    if crashed {
        lane.crashes += 1;
    }
    lane.reason = Some(reason);
    lane.stage = Stage::Brief;
    Ok(())
}

pub(super) fn archive(
    ctx: &Ctx<'_>,
    run_id: &str,
    lane: &str,
    records: &[StepRecord],
) -> Result<(), Refusal> {
    if records.is_empty() {
        return Ok(());
    }
    ensure_dir(&ctx.paths.run_dir(run_id), ctx.step)?;
    // Appended within a transaction, before the state is saved: a call killed in between leaves
    // these lines, and the next call archives the same records again. A record already there
    // (byte for byte: its nonce, owner and times make it unique) is not appended twice.
    let path = ctx.paths.history(run_id);
    let kept = super::record::read_history(&ctx.paths, run_id)
        .map_err(|e| crate::repo::store_refusal(ctx.step, e))?;
    let kept: std::collections::HashSet<&str> = kept.lines().collect();
    let mut text = String::new();
    for r in records {
        let mut v = serde_json::to_value(r).expect("a record serialises");
        v["lane"] = lane.into();
        let line = v.to_string();
        if !kept.contains(line.as_str()) {
            text.push_str(&line);
            text.push('\n');
        }
    }
    if text.is_empty() {
        return Ok(());
    }
    crate::store::append(&path, text.as_bytes(), 0o600)
        .map_err(|e| crate::repo::store_refusal(ctx.step, e))?;
    crate::failpoint::hit("archive-after-append");
    Ok(())
}

fn end_run(ctx: &Ctx<'_>, run: &mut Run, status: RunStatus) -> Result<(), Refusal> {
    run.status = status;
    super::host::end_stranded(ctx, run);
    crate::failpoint::hit("end-before-release");
    ctx.claims().release(&run.unit, &run.id, ctx.step)?;
    for lane in run.lanes.iter().filter(|l| l.unit != run.unit) {
        ctx.claims().release(&lane.unit, &run.id, ctx.step)?;
    }
    emit(
        &ctx.paths,
        &run.id,
        "run_end",
        json!({"status": status.as_str()}),
    );
    super::record::write(ctx, run);
    Ok(())
}

/// Apply a decision that needs no side effect outside the state (or only a small file of the
/// loop's own), and turn the rest into work for phase 2.
fn apply_quick(ctx: &Ctx<'_>, run: &mut Run, next: &Next) -> Result<Pending, Refusal> {
    let run_id = run.id.clone();
    let report = |run: &Run, lane_id: &str, action: &'static str, next: String| {
        let lane = run.lane(lane_id).expect("the lane exists");
        Pending::Report(Box::new(StepReport::for_lane(run, lane, action, next)))
    };
    Ok(match next {
        Next::Ended => Pending::Report(Box::new(ended_report(run))),
        Next::Paused => {
            let lane = &run.lanes[0];
            Pending::Report(Box::new(StepReport::for_lane(
                run,
                lane,
                "paused",
                format!("run `{run_id}` is paused: `iced run resume {run_id}` lets it go on"),
            )))
        }
        Next::Wait { lane, why } => {
            report(run, lane, "waiting", format!("{why}; call again later"))
        }
        Next::RenderBrief { lane } => {
            let worktree = run
                .lane(lane)
                .and_then(|l| l.worktree.clone())
                .map(PathBuf::from)
                .unwrap_or_else(|| ctx.worktree_path(lane));
            let l = run.lane(lane).expect("lane");
            let text = render_brief(ctx, run, l, &worktree)?;
            let path = ctx.brief_path(&run_id, lane, l.attempt);
            ensure_dir(&ctx.lane_dir(&run_id, lane), ctx.step)?;
            crate::store::write_atomic(&path, text.as_bytes(), 0o600)
                .map_err(|e| crate::repo::store_refusal(ctx.step, e))?;
            crate::failpoint::hit("brief-after-write");
            let sha = sha256_hex(text.as_bytes());
            let l = run.lane_mut(lane).expect("lane");
            let mut record = started("brief", l.attempt, Some(sha.clone()), None);
            finish(
                &mut record,
                StepStatus::Done,
                json!({"path": path, "sha256": sha}),
            );
            l.steps
                .retain(|r| !(r.step == "brief" && r.attempt == record.attempt));
            l.steps.push(record);
            l.stage = if l.worktree.is_some() {
                Stage::Implement
            } else {
                Stage::Worktree
            };
            emit(
                &ctx.paths,
                &run_id,
                "step_done",
                json!({"lane": lane, "step": "brief", "attempt": l.attempt, "outcome": {"sha256": sha}}),
            );
            report(
                run,
                lane,
                "advanced",
                "the brief is written; call again".into(),
            )
        }
        Next::AddWorktree { lane } => {
            let l = run.lane_mut(lane).expect("lane");
            let record = started("worktree", l.attempt, Some(run_id.clone()), None);
            l.steps.retain(|r| r.step != "worktree");
            l.steps.push(record);
            Pending::AddWorktree { lane: lane.clone() }
        }
        Next::LaunchImplementer { lane } => {
            let l = run.lane_mut(lane).expect("lane");
            let brief_sha = l
                .outcome("brief")
                .and_then(|o| o["sha256"].as_str())
                .map(str::to_owned);
            let nonce = new_nonce();
            let record = started("implement", l.attempt, brief_sha, Some(nonce.clone()));
            l.steps
                .retain(|r| !(r.step == "implement" && r.attempt == record.attempt));
            l.steps.push(record);
            Pending::LaunchImplementer {
                lane: lane.clone(),
                nonce,
            }
        }
        Next::HandToHost { lane } => {
            super::host::hand_implementer(ctx, &run_id, run.lane_mut(lane).expect("lane"));
            Pending::Report(Box::new(start_agent_report(ctx, run, lane)))
        }
        Next::CheckReceipt { lane } => {
            let l = run.lane_mut(lane).expect("lane");
            l.stage = Stage::Receipt;
            let record = started("receipt", l.attempt, None, None);
            l.steps
                .retain(|r| !(r.step == "receipt" && r.attempt == record.attempt));
            l.steps.push(record);
            Pending::CheckReceipt { lane: lane.clone() }
        }
        Next::LaunchDod {
            lane,
            prefix,
            slots,
        } => {
            let l = run.lane_mut(lane).expect("lane");
            let mut keys = Vec::new();
            for &(i, j) in slots {
                let key = format!("{prefix}-{i}-{j}");
                let nonce = new_nonce();
                let record = started(&key, l.attempt, None, Some(nonce.clone()));
                l.steps
                    .retain(|r| !(r.step == key && r.attempt == record.attempt));
                l.steps.push(record);
                keys.push((key, i, j, nonce));
            }
            Pending::LaunchDod {
                lane: lane.clone(),
                keys,
            }
        }
        Next::FinishReceipt { lane } => {
            finish_receipt(ctx, run, lane)?;
            let l = run.lane(lane).expect("lane");
            let action = match l.stage {
                Stage::Blocked => "blocked",
                Stage::Handback => "handback",
                _ => "advanced",
            };
            let next = match l.stage {
                Stage::Deliver => "the receipt verified; call again to deliver".to_owned(),
                Stage::Validate => {
                    "the receipt verified; independent validators judge it next: call again"
                        .to_owned()
                }
                Stage::Brief => format!(
                    "the receipt did not verify; attempt {} starts: call again",
                    l.attempt
                ),
                _ => l.reason.clone().unwrap_or_default(),
            };
            if run.lanes.iter().all(|l| l.stage.is_final()) {
                let status = if run.lanes.iter().any(|l| l.stage == Stage::Handback) {
                    RunStatus::Handback
                } else {
                    RunStatus::Blocked
                };
                if status == RunStatus::Handback {
                    end_run(ctx, run, status)?;
                } else {
                    run.status = status;
                    emit(&ctx.paths, &run_id, "run_blocked", json!({"reason": next}));
                }
            }
            report(run, lane, action, next)
        }
        Next::Retry {
            lane,
            reason,
            crashed,
        } => {
            let l = run.lane_mut(lane).expect("lane");
            new_attempt(ctx, &run_id, l, reason.clone(), *crashed)?;
            report(
                run,
                lane,
                "advanced",
                format!(
                    "attempt {} starts ({reason}); call again",
                    run.lane(lane).expect("lane").attempt
                ),
            )
        }
        Next::Requeue { lane, key } => {
            let old = run.lane_mut(lane).expect("lane").take_current(key);
            archive(ctx, &run_id, lane, &old)?;
            let until = run.next_eligible_at.clone().unwrap_or_default();
            report(
                run,
                lane,
                "advanced",
                format!("`{key}` was rate limited; it runs again from {until}: call again"),
            )
        }
        Next::RelaunchDod { lane, key } => {
            let l = run.lane_mut(lane).expect("lane");
            let old = l.take_current(key);
            l.crashes += 1;
            archive(ctx, &run_id, lane, &old)?;
            report(
                run,
                lane,
                "advanced",
                format!("`{key}` crashed; it runs again: call again"),
            )
        }
        Next::Block { lane, reason } => {
            let l = run.lane_mut(lane).expect("lane");
            l.stage = Stage::Blocked;
            l.reason = Some(reason.clone());
            run.status = RunStatus::Blocked;
            emit(
                &ctx.paths,
                &run_id,
                "run_blocked",
                json!({"lane": lane, "reason": reason}),
            );
            report(
                run,
                lane,
                "blocked",
                format!("{reason}; fix it, then `iced run resume {run_id}`"),
            )
        }
        Next::Deliver { lane } => {
            let l = run.lane_mut(lane).expect("lane");
            let mut record = started("deliver", l.attempt, None, None);
            // A delivery commit a dead call prepared is kept: the next call adopts exactly it.
            record.outcome = l
                .record("deliver")
                .and_then(|r| r.outcome.clone())
                .filter(|o| o.get("prepared").is_some());
            l.steps
                .retain(|r| !(r.step == "deliver" && r.attempt == record.attempt));
            l.steps.push(record);
            Pending::Deliver { lane: lane.clone() }
        }
        Next::PrepareValidators { lane, keys } => {
            let l = run.lane_mut(lane).expect("lane");
            super::judging::mark_prepare(l, keys);
            Pending::PrepareValidators {
                lane: lane.clone(),
                keys: keys.clone(),
            }
        }
        Next::LaunchValidators { lane, keys } => {
            let l = run.lane_mut(lane).expect("lane");
            let keys = super::judging::mark_launch(l, keys);
            Pending::LaunchValidators {
                lane: lane.clone(),
                keys,
            }
        }
        Next::HandValidator { lane, key } => {
            Pending::Report(Box::new(super::judging::hand(ctx, run, lane, key)))
        }
        Next::CheckValidator { lane, key } => {
            let (pid, pid_start) = me();
            let l = run.lane_mut(lane).expect("lane");
            let r = l.record_mut(key).expect("a finished validator");
            r.pid = Some(pid);
            r.pid_start = pid_start;
            Pending::CheckValidator {
                lane: lane.clone(),
                key: key.clone(),
            }
        }
        Next::RedoValidator { lane, key } => {
            let l = run.lane_mut(lane).expect("lane");
            let said = super::judging::redo(ctx, &run_id, l, key)?;
            report(run, lane, "advanced", format!("{said}; call again"))
        }
        Next::Judge { lane } => {
            let validators = super::judging::pinned_validators(ctx, run.lane(lane).expect("lane"));
            super::judging::judge(ctx, run, lane, &validators)?;
            super::judging::run_blocked(ctx, run, lane);
            let l = run.lane(lane).expect("lane");
            let (action, next) = match l.stage {
                Stage::Refute => (
                    "advanced",
                    "blocking findings go to a refuter first; call again".to_owned(),
                ),
                Stage::Deliver => (
                    "advanced",
                    "the validators pass it; call again to deliver".to_owned(),
                ),
                Stage::Blocked => ("blocked", l.reason.clone().unwrap_or_default()),
                _ => (
                    "advanced",
                    format!("fix round: attempt {} starts; call again", l.attempt),
                ),
            };
            report(run, lane, action, next)
        }
        Next::FinishRefute { lane } => {
            super::judging::finish_refute(ctx, run, lane)?;
            super::judging::run_blocked(ctx, run, lane);
            let l = run.lane(lane).expect("lane");
            let (action, next) = match l.stage {
                Stage::Deliver => (
                    "advanced",
                    "every blocking finding was refuted; call again to deliver".to_owned(),
                ),
                Stage::Blocked => ("blocked", l.reason.clone().unwrap_or_default()),
                _ => (
                    "advanced",
                    format!(
                        "confirmed findings go to a fix round: attempt {} starts; call again",
                        l.attempt
                    ),
                ),
            };
            report(run, lane, action, next)
        }
        Next::Finish => {
            let landed = |l: &Lane| matches!(l.stage, Stage::Delivered | Stage::Discarded);
            let status = if run.lanes.iter().all(landed)
                && run.lanes.iter().any(|l| l.stage == Stage::Delivered)
            {
                RunStatus::Delivered
            } else if run.lanes.iter().any(|l| l.stage == Stage::Handback) {
                RunStatus::Handback
            } else if run.lanes.iter().all(|l| l.stage == Stage::Discarded) {
                RunStatus::Abandoned
            } else {
                RunStatus::Blocked
            };
            if status == RunStatus::Blocked {
                // Not an end: `iced run resume` starts the blocked lanes' next attempts.
                run.status = status;
                let lane = focus_lane(run).id.clone();
                emit(&ctx.paths, &run_id, "run_blocked", json!({"lane": lane}));
            } else {
                end_run(ctx, run, status)?;
            }
            Pending::Report(Box::new(ended_report(run)))
        }
        Next::Stall { lane, reason } => {
            run.status = RunStatus::Blocked;
            emit(
                &ctx.paths,
                &run_id,
                "run_blocked",
                json!({"lane": lane, "reason": reason}),
            );
            Pending::Report(Box::new(ended_report(run)))
        }
        Next::Sync { lane, step } => {
            let l = run.lane_mut(lane).expect("lane");
            let record = started(step, l.attempt, None, None);
            l.steps
                .retain(|r| !(r.step == *step && r.attempt == record.attempt));
            l.steps.push(record);
            Pending::Sync {
                lane: lane.clone(),
                step: step.clone(),
            }
        }
        Next::LandAgain { lane } => {
            let l = run.lane_mut(lane).expect("lane");
            l.land_round += 1;
            let round = l.land_round;
            report(
                run,
                lane,
                "advanced",
                format!("the target moved under the landing; round {round} brings it in again"),
            )
        }
    })
}

/// The lane a report about the whole run is about: one that holds the run, else one not
/// delivered, else the first.
pub fn focus_lane(run: &Run) -> &Lane {
    super::decide::holder(run)
        .or_else(|| {
            run.lanes
                .iter()
                .find(|l| matches!(l.stage, Stage::Blocked | Stage::Handback))
        })
        .or_else(|| run.lanes.iter().find(|l| !l.stage.is_final()))
        .unwrap_or(&run.lanes[0])
}

/// A project run that can move again after a lane blocked (the others go on): running again.
/// A run whose every lane waits for a person stays blocked (SPEC 23.6).
fn settle(ctx: &Ctx<'_>, run: &mut Run) {
    if run.lanes.len() < 2 || run.status != RunStatus::Blocked {
        return;
    }
    let view = decide_view(ctx, run);
    let expected = |i: usize, j: usize| ctx.settings.dod[i][j].expected_exit_codes.clone();
    match super::decide::lanes_next(run, &view, &expected) {
        Next::Stall { .. } | Next::Finish => {}
        _ => run.status = RunStatus::Running,
    }
}

fn ended_report(run: &Run) -> StepReport {
    if run.lanes.len() > 1 {
        return project_report(run);
    }
    let lane = &run.lanes[0];
    let (action, next) = match run.status {
        RunStatus::Delivered => {
            let landed = lane
                .steps
                .iter()
                .rev()
                .find(|r| r.step.starts_with("land-") && r.status == StepStatus::Done)
                .and_then(|r| r.outcome.clone());
            let pr = lane
                .outcome("pr-open")
                .and_then(|o| o["url"].as_str().map(str::to_owned));
            // A worktree with uncommitted changes is kept (SPEC 23.3): the run stays in the
            // state until `iced run retire` finds it clean.
            let retired = match lane.outcome("retire") {
                Some(o) if o["retired"] == true => "; the lane is retired".to_owned(),
                Some(o) => format!(
                    "; the worktree `{}` has uncommitted changes and is kept: clean it, then `iced run retire`",
                    o["kept"].as_str().unwrap_or("")
                ),
                None => String::new(),
            };
            let next = match (landed, pr) {
                (Some(o), _) => format!(
                    "landed in `{}` as {}{retired}",
                    o["target"].as_str().unwrap_or(""),
                    o["commit"].as_str().unwrap_or(""),
                ),
                (None, Some(url)) => format!("landed through pull request {url}{retired}"),
                (None, None) => format!(
                    "delivered on branch `{}` (land.mode none: merge it when you are ready)",
                    lane.branch.clone().unwrap_or_default()
                ),
            };
            ("delivered", next)
        }
        RunStatus::Handback => (
            "handback",
            format!("handed back: {}", lane.reason.clone().unwrap_or_default()),
        ),
        RunStatus::Abandoned => ("nothing", "the run was abandoned".to_owned()),
        RunStatus::Blocked => (
            "blocked",
            format!(
                "{}; fix it, then `iced run resume {}`",
                lane.reason.clone().unwrap_or_default(),
                run.id
            ),
        ),
        RunStatus::Paused | RunStatus::Running => ("nothing", String::new()),
    };
    StepReport::for_lane(run, lane, action, next)
}

/// How a project run ended or stands: a line per lane that is not simply delivered.
fn project_report(run: &Run) -> StepReport {
    let lane = focus_lane(run);
    let count = |stage: Stage| run.lanes.iter().filter(|l| l.stage == stage).count();
    let tally = format!(
        "{} of {} lanes delivered{}",
        count(Stage::Delivered),
        run.lanes.len(),
        match count(Stage::Discarded) {
            0 => String::new(),
            n => format!(", {n} discarded"),
        }
    );
    let (action, next) = match run.status {
        RunStatus::Delivered => ("delivered", tally),
        RunStatus::Handback => (
            "handback",
            format!(
                "{tally}; `{}` was handed back: {}",
                lane.id,
                lane.reason.clone().unwrap_or_default()
            ),
        ),
        RunStatus::Abandoned => ("nothing", "the run was abandoned".to_owned()),
        RunStatus::Blocked => {
            let id = &run.id;
            let l = &lane.id;
            let why = match lane.stage {
                Stage::Blocked | Stage::Handback => format!(
                    "lane `{l}` is {}: {}",
                    lane.stage.as_str(),
                    lane.reason.clone().unwrap_or_default()
                ),
                _ => format!("lane `{l}` cannot move"),
            };
            (
                "blocked",
                format!("{tally}; {why}; the other lanes wait before landing. `iced run release {id} {l}` lets them land, `iced run discard {id} {l}` drops it, or fix it and `iced run resume {id}`"),
            )
        }
        RunStatus::Paused | RunStatus::Running => ("nothing", tally),
    };
    StepReport::for_lane(run, lane, action, next)
}

fn start_agent_report(ctx: &Ctx<'_>, run: &Run, lane_id: &str) -> StepReport {
    let lane = run.lane(lane_id).expect("lane");
    let key = lane.record("implement").and_then(|r| r.nonce.clone());
    let receipt = ctx.receipt_path(&run.id, lane_id, lane.attempt);
    let mut report = StepReport::for_lane(
        run,
        lane,
        "start_agent",
        "start a fresh implementer in `worktree` with `brief`; it writes its report to `receipt_path`; then run `iced implement receipt <receipt_path>`",
    );
    report.role = Some("implementer");
    report.read_only = Some(false);
    report.brief = Some(
        ctx.brief_path(&run.id, lane_id, lane.attempt)
            .display()
            .to_string(),
    );
    report.worktree = lane.worktree.clone();
    report.receipt_path = Some(receipt.display().to_string());
    report.receipt_key = key;
    report
}

/// Phase 2: the side effect, outside the lock; then record its outcome if still current.
fn act(ctx: &Ctx<'_>, snapshot: &Run, pending: Pending) -> Result<StepReport, Refusal> {
    match pending {
        Pending::Report(report) => Ok(*report),
        Pending::AddWorktree { lane } => {
            let branch = snapshot
                .lane(&lane)
                .and_then(|l| l.branch.clone())
                .expect("a lane has a branch");
            let path = ctx.worktree_path(&lane);
            let base = snapshot
                .base_of(snapshot.lane(&lane).expect("lane"))
                .to_owned();
            let result = add_worktree(ctx, &path, &branch, &base);
            crate::failpoint::hit("worktree-after-add");
            record_after(
                ctx,
                &snapshot.id,
                &lane,
                "worktree",
                |l, record| match &result {
                    Ok(()) => {
                        finish(
                            record,
                            StepStatus::Done,
                            json!({"path": path, "branch": branch}),
                        );
                        l.worktree = Some(path.display().to_string());
                        l.stage = Stage::Implement;
                        Ok(("advanced", "the worktree is ready; call again".to_owned()))
                    }
                    Err(e) => {
                        finish(record, StepStatus::Failed, json!({"error": e}));
                        l.stage = Stage::Blocked;
                        l.reason = Some(format!("worktree: {e}"));
                        Ok(("blocked", format!("the worktree could not be made: {e}")))
                    }
                },
            )
        }
        Pending::LaunchImplementer { lane, nonce } => {
            let l = snapshot.lane(&lane).expect("lane");
            let runner = ctx
                .settings
                .implementer
                .as_ref()
                .expect("the process driver has a runner");
            let worktree = PathBuf::from(l.worktree.clone().unwrap_or_default());
            let receipt = ctx.receipt_path(&snapshot.id, &lane, l.attempt);
            let brief = ctx.brief_path(&snapshot.id, &lane, l.attempt);
            let model = ctx.settings.implementer_model.clone().unwrap_or_default();
            let values: Vec<(&str, String)> = vec![
                ("prompt_file", brief.display().to_string()),
                ("output_file", receipt.display().to_string()),
                ("worktree", worktree.display().to_string()),
                ("role", "implementer".into()),
                ("model", model.clone()),
                ("run", snapshot.id.clone()),
                ("lane", lane.clone()),
                ("attempt", l.attempt.to_string()),
            ];
            let dir = ctx.activity_dir(&snapshot.id, &lane, "implement", l.attempt);
            let spec = agent_spec(
                ctx,
                runner,
                &values,
                AgentStart {
                    read_only: false,
                    nonce: &nonce,
                    model: ctx.settings.implementer_model.as_deref(),
                    prompt: &brief,
                    cwd: worktree,
                    gate: gate_value(ctx, &snapshot.id, &lane, "implement", l.attempt),
                    dir: &dir,
                },
            )?;
            crate::failpoint::hit("launch-after-record");
            // Before the launch: an agent may be counted alive that never started (its end is
            // logged when the loop finds it crashed), never one that runs uncounted.
            emit(
                &ctx.paths,
                &snapshot.id,
                "agent_start",
                json!({"lane": lane, "attempt": l.attempt, "role": "implementer", "runner": runner.name}),
            );
            launch(ctx, &dir, &spec)?;
            crate::failpoint::hit("launch-after-spawn");
            Ok(StepReport::for_lane(
                snapshot,
                l,
                "waiting",
                "the implementer is running; call again later",
            ))
        }
        Pending::LaunchDod { lane, keys } => {
            let l = snapshot.lane(&lane).expect("lane");
            let worktree = PathBuf::from(l.worktree.clone().unwrap_or_default());
            for (key, i, j, nonce) in keys {
                let command = &ctx.settings.dod[i][j];
                let cwd = match &command.cwd {
                    Some(c) => worktree.join(c),
                    None => worktree.clone(),
                };
                let dir = ctx.activity_dir(&snapshot.id, &lane, &key, l.attempt);
                let spec = ActivitySpec {
                    argv: command.argv.clone(),
                    cwd,
                    env: base_env(),
                    timeout_ms: command.timeout.as_millis() as u64,
                    grace_ms: ctx.settings.kill_grace.as_millis() as u64,
                    nonce,
                    gate: gate_value(ctx, &snapshot.id, &lane, &key, l.attempt),
                    stdin: None,
                    inherit_prefixes: Vec::new(),
                    env_templates: BTreeMap::new(),
                };
                launch(ctx, &dir, &spec)?;
                crate::failpoint::hit("dod-after-launch");
                emit(
                    &ctx.paths,
                    &snapshot.id,
                    "step_start",
                    json!({"lane": lane, "step": key, "attempt": l.attempt, "command": command.display()}),
                );
            }
            Ok(StepReport::for_lane(
                snapshot,
                l,
                "waiting",
                "the definition-of-done commands are running; call again later",
            ))
        }
        Pending::CheckReceipt { lane } => {
            let l = snapshot.lane(&lane).expect("lane");
            let checks = receipt_checks(ctx, snapshot, l);
            record_after(ctx, &snapshot.id, &lane, "receipt", |_, record| {
                record.outcome = Some(checks.clone());
                crate::failpoint::hit("receipt-after-record");
                Ok((
                    "advanced",
                    "the receipt's own checks are recorded; call again".to_owned(),
                ))
            })
        }
        Pending::Sync { lane, step } => {
            let l = snapshot.lane(&lane).expect("lane");
            let done = super::landing::perform(ctx, snapshot, l, &step);
            record_after(ctx, &snapshot.id, &lane, &step, |l, record| {
                finish(record, done.status, done.outcome.clone());
                if let Some(stage) = done.stage {
                    l.stage = stage;
                }
                if let Some(reason) = &done.reason {
                    l.reason = Some(reason.clone());
                }
                Ok((done.action, done.next.clone()))
            })
        }
        Pending::PrepareValidators { lane, keys } => {
            super::judging::prepare(ctx, snapshot, &lane, &keys)
        }
        Pending::LaunchValidators { lane, keys } => {
            super::judging::launch_all(ctx, snapshot, &lane, &keys)
        }
        Pending::CheckValidator { lane, key } => super::judging::check(ctx, snapshot, &lane, &key),
        Pending::Deliver { lane } => super::deliver::step(ctx, snapshot, &lane),
    }
}

/// A runner's argv with its placeholders filled, element by element (never through a shell).
pub(super) fn expand(argv: &[String], values: &[(&str, String)]) -> Vec<String> {
    argv.iter()
        .map(|a| {
            let mut s = a.clone();
            for (k, v) in values {
                s = s.replace(&format!("{{{k}}}"), v);
            }
            s
        })
        .collect()
}

/// What one agent start is for, beside its runner and placeholder values.
pub(super) struct AgentStart<'a> {
    pub read_only: bool,
    pub nonce: &'a str,
    pub model: Option<&'a str>,
    /// The brief or the validator's prompt.
    pub prompt: &'a Path,
    pub cwd: PathBuf,
    pub gate: Value,
    /// The activity's folder (a claude agent's settings go there).
    pub dir: &'a Path,
}

/// How an agent is started (SPEC 20.1, 20.8): a `command` runner's argv template expanded, or a
/// harness's own argv with the prompt on standard input; the `ICED_*` variables; for a harness,
/// its credential variables passed on by name and the runner's `env` by template, so that no
/// secret is written into the activity's spec.
pub(super) fn agent_spec(
    ctx: &Ctx<'_>,
    runner: &super::settings::Runner,
    values: &[(&str, String)],
    start: AgentStart<'_>,
) -> Result<ActivitySpec, Refusal> {
    let mut env = base_env();
    for (k, v) in values {
        env.insert(format!("ICED_{}", k.to_uppercase()), v.clone());
    }
    env.insert("ICED_RECEIPT_KEY".into(), start.nonce.to_owned());
    let (argv, stdin) = if runner.kind.is_harness() {
        let session = crate::runner::session_id(start.nonce);
        // The repository's git directory, and the worktree's own (`.git` in a worktree is a file
        // naming it).
        let mut git_dirs = vec![ctx.repo.root.join(".git").display().to_string()];
        if let Some(own) = crate::repo::read_text(&start.cwd.join(".git"))
            .ok()
            .and_then(|t| t.strip_prefix("gitdir:").map(|d| d.trim().to_owned()))
        {
            git_dirs.push(own);
        }
        // SPEC 24.11: a claude agent gets the guard's hook.
        let settings = (runner.kind == crate::runner::Kind::Claude)
            .then(|| crate::hook::claude::write_agent_settings(start.dir, &ctx.exe))
            .transpose()
            .map_err(|e| crate::repo::store_refusal(ctx.step, e))?
            .map(|p| p.display().to_string());
        let argv = crate::runner::argv(
            runner.kind,
            &crate::runner::Invocation {
                program: &runner.argv[0],
                read_only: start.read_only,
                model: start.model.filter(|m| !m.is_empty()),
                session_id: &session,
                max_turns: runner.max_turns,
                transcripts: runner.transcripts,
                extra_args: &runner.args,
                git_dirs: &git_dirs,
                settings: settings.as_deref(),
            },
        );
        (argv, Some(start.prompt.to_owned()))
    } else {
        (expand(&runner.argv, values), None)
    };
    Ok(ActivitySpec {
        argv,
        cwd: start.cwd,
        env,
        timeout_ms: runner.timeout.as_millis() as u64,
        grace_ms: ctx.settings.kill_grace.as_millis() as u64,
        nonce: start.nonce.to_owned(),
        gate: start.gate,
        stdin,
        inherit_prefixes: runner
            .kind
            .credential_prefixes()
            .iter()
            .map(|p| (*p).to_owned())
            .collect(),
        env_templates: runner.env.clone(),
    })
}

/// The environment a child of the loop gets: a few of iced's own variables, nothing that points
/// git or a tool somewhere else.
pub(super) fn base_env() -> BTreeMap<String, String> {
    ["PATH", "HOME", "USER", "LANG", "TERM", "TMPDIR"]
        .into_iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_owned(), v)))
        .collect()
}

pub(super) fn gate_value(ctx: &Ctx<'_>, run: &str, lane: &str, step: &str, attempt: u32) -> Value {
    json!({"root": ctx.repo.root, "run": run, "lane": lane, "step": step, "attempt": attempt})
}

pub(super) fn launch(ctx: &Ctx<'_>, dir: &Path, spec: &ActivitySpec) -> Result<(), Refusal> {
    ensure_dir(dir, ctx.step)?;
    activity::launch(&ctx.exe, dir, spec).map_err(|e| io_error(ctx.step, e))?;
    // Wait (briefly, without the lock) for the supervisor to say it is there, so that a caller
    // right behind us does not take a slow start for a crash.
    for _ in 0..250 {
        if !matches!(activity::observe(dir), Observation::NotRegistered) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Ok(())
}

/// Re-take the lock and record the outcome of a step done outside it, if its record is still the
/// one we started (same attempt, still `started`, owned by us). Otherwise the work is superseded.
pub(super) fn record_after(
    ctx: &Ctx<'_>,
    run_id: &str,
    lane_id: &str,
    step: &str,
    f: impl FnOnce(&mut Lane, &mut StepRecord) -> Result<(&'static str, String), Refusal>,
) -> Result<StepReport, Refusal> {
    let (mine, _) = me();
    ctx.transact(|state| {
        let run = state.runs.get_mut(run_id).ok_or_else(|| {
            ctx.refuse(
                "run-not-found",
                format!("run `{run_id}` is gone"),
                "`iced run list`",
            )
        })?;
        let lane = run.lane_mut(lane_id).expect("lane");
        let attempt = lane.attempt;
        let Some(index) = lane.steps.iter().position(|r| {
            r.step == step
                && r.attempt == attempt
                && r.status == StepStatus::Started
                && r.pid == Some(mine)
        }) else {
            emit(
                &ctx.paths,
                run_id,
                "superseded",
                json!({"lane": lane_id, "step": step, "attempt": attempt}),
            );
            let lane = run.lane(lane_id).expect("lane");
            return Ok(StepReport::for_lane(
                run,
                lane,
                "waiting",
                format!("`{step}` moved on while this call worked; call again"),
            ));
        };
        let mut record = lane.steps.remove(index);
        let (action, next) = f(lane, &mut record)?;
        let event = match record.status {
            StepStatus::Done => Some("step_done"),
            StepStatus::Failed => Some("step_failed"),
            StepStatus::Started => None,
        };
        if let Some(event) = event {
            emit(
                &ctx.paths,
                run_id,
                event,
                json!({"lane": lane_id, "step": step, "attempt": attempt, "outcome": record.outcome}),
            );
        }
        lane.steps.insert(index, record);
        if lane.stage == Stage::Blocked {
            run.status = RunStatus::Blocked;
            // A project run's other lanes may still move.
            settle(ctx, run);
        }
        let lane = run.lane(lane_id).expect("lane");
        Ok(StepReport::for_lane(run, lane, action, next))
    })
}

fn add_worktree(ctx: &Ctx<'_>, path: &Path, branch: &str, base: &str) -> Result<(), String> {
    let root = &ctx.repo.root;
    let is_ours = |existing: &Path| {
        existing == path || existing.canonicalize().ok() == path.canonicalize().ok()
    };
    // Adopt what a crashed call (or a person) already made.
    if let Some(existing) = crate::git::worktree_of_branch(root, branch) {
        if is_ours(&existing) {
            return Ok(());
        }
        return Err(format!(
            "branch `{branch}` is checked out at `{}`, not at `{}`",
            existing.display(),
            path.display()
        ));
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("create `{}`: {e}", parent.display()))?;
    }
    let path_s = path.display().to_string();
    // `--quiet`: git prints nothing, so if this call dies, the `git worktree add` it started
    // (which outlives it) is not killed by SIGPIPE halfway and does not undo its own work under a
    // later call that has already adopted the worktree.
    let add = || {
        if crate::git::branch_exists(root, branch) {
            crate::git::run(root, &["worktree", "add", "--quiet", &path_s, branch])
        } else {
            crate::git::run(
                root,
                &["worktree", "add", "--quiet", "-b", branch, &path_s, base],
            )
        }
    };
    let mut added = add();
    // The `git worktree add` of a call that died may still be running (it outlives that call)
    // and have taken the path first: adopt its worktree once it is there, or add again if it gave
    // up. Bounded: a directory someone else left at the path fails after a short wait.
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while added.is_err() && std::time::Instant::now() < give_up {
        std::thread::sleep(std::time::Duration::from_millis(50));
        if crate::git::worktree_of_branch(root, branch).is_some_and(|e| is_ours(&e)) {
            return Ok(());
        }
        if !path.exists() {
            added = add();
        }
    }
    added.map(|_| ())
}

/// The receipt's own checks (no command run but git's): commits ahead of the base on the lane
/// branch, a clean worktree, and the report. Recorded as the receipt record's partial outcome.
fn receipt_checks(ctx: &Ctx<'_>, run: &Run, lane: &Lane) -> Value {
    let worktree = PathBuf::from(lane.worktree.clone().unwrap_or_default());
    let branch = lane.branch.clone().unwrap_or_default();
    let mut missing: Vec<String> = Vec::new();
    let on_branch = crate::git::current_branch(&worktree);
    if on_branch.as_deref() != Some(branch.as_str()) {
        missing.push(format!(
            "the worktree is on `{}`, not on the lane branch `{branch}`",
            on_branch.unwrap_or_else(|| "a detached HEAD".into())
        ));
    }
    // The head this receipt judges, read once: the definition of done, the validators and the
    // delivery all refer to exactly this commit (SPEC 24.3).
    let head = crate::git::run(
        &worktree,
        &[
            "rev-parse",
            "--verify",
            &format!("refs/heads/{branch}^{{commit}}"),
        ],
    )
    .unwrap_or_default();
    let tree =
        crate::git::run(&worktree, &["rev-parse", &format!("{head}^{{tree}}")]).unwrap_or_default();
    let ahead = crate::git::run(
        &worktree,
        &[
            "rev-list",
            "--count",
            &format!("{}..{head}", run.base_of(lane)),
        ],
    )
    .ok()
    .and_then(|n| n.trim().parse::<u64>().ok())
    .unwrap_or(0);
    if ahead == 0 {
        missing.push(format!(
            "no commit on `{branch}` ahead of the base {}",
            &run.base_of(lane)[..run.base_of(lane).len().min(12)]
        ));
    }
    // What the lane changed, not only what it reports: each path judged by the guard as the
    // implementer's write, the units as they stood at the base (SPEC 24.2).
    let base = run.base_of(lane);
    let judged =
        super::lane_guard::judge_range(ctx, &lane.unit, &worktree, (base, &head), base, &[]);
    let guard = match judged {
        Ok(denied) => {
            missing.extend(denied.iter().map(|d| d.gap(base)));
            serde_json::to_value(&denied).expect("serialises")
        }
        Err(e) => {
            missing.push(format!("what the lane changed could not be judged: {e}"));
            Value::Null
        }
    };
    match crate::git::is_clean(&worktree, &[]) {
        Ok(true) => {}
        Ok(false) => missing.push("the worktree has uncommitted or untracked changes".into()),
        Err(e) => missing.push(format!("the worktree's status could not be read: {e}")),
    }
    let receipt = ctx.receipt_path(&run.id, &lane.id, lane.attempt);
    let mut handback = None;
    let mut kept = Value::Null;
    match report::read(&receipt) {
        Ok(r) => {
            if let Some(h) = &r.handback {
                handback = Some(h.reason.clone());
            }
            // Every expectation needs the implementer's evidence; each must name a real one.
            if let Ok(text) = crate::repo::read_text(&ctx.repo.unit_paths(&lane.unit).iced) {
                let parsed = crate::unit::parse_unit(&text);
                for e in &parsed.expectations {
                    if !r.evidence.iter().any(|x| x.expectation == e.id) && r.handback.is_none() {
                        missing.push(format!("the report gives no evidence for {}", e.id));
                    }
                }
                for x in &r.evidence {
                    if !parsed.expectations.iter().any(|e| e.id == x.expectation) {
                        missing.push(format!(
                            "the report's evidence names {}, which the unit does not have",
                            x.expectation
                        ));
                    }
                }
            }
            if r.handback.is_none() {
                missing.extend(super::dispositions::disposition_gaps(
                    ctx, run, lane, &r, &head,
                ));
            }
            // The report as the loop took it, in a file of its own (SPEC 24.5).
            let copy = ctx
                .lane_dir(&run.id, &lane.id)
                .join(format!("receipt-{}.json", lane.attempt));
            match super::kept::keep(&copy, &r) {
                Ok(k) => kept = serde_json::to_value(k).expect("serialises"),
                Err(e) => missing.push(format!("the report could not be kept: {e}")),
            }
        }
        Err(p) => missing.push(format!("{}: {}", p.code, p.message)),
    }
    json!({"missing": missing, "ahead": ahead, "head": head, "tree": tree, "guard": guard, "handback": handback, "report": kept})
}

/// All commands and checks are in: the receipt verifies or names every gap at once.
fn finish_receipt(ctx: &Ctx<'_>, run: &mut Run, lane_id: &str) -> Result<(), Refusal> {
    let run_id = run.id.clone();
    let max_attempts = ctx.settings.max_attempts;
    let independent = ctx.settings.independent;
    let lane = run.lane_mut(lane_id).expect("lane");
    let attempt = lane.attempt;
    let checks = lane
        .record("receipt")
        .and_then(|r| r.outcome.clone())
        .unwrap_or(Value::Null);
    let mut missing: Vec<String> = checks["missing"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect();
    let mut commands = Vec::new();
    for (i, sequence) in ctx.settings.dod.iter().enumerate() {
        for (j, command) in sequence.iter().enumerate() {
            let key = format!("dod-{i}-{j}");
            match lane.record(&key) {
                Some(r) if r.status == StepStatus::Done => {
                    let o = r.outcome.clone().unwrap_or(Value::Null);
                    let code = o["exit_code"].as_i64().and_then(|c| i32::try_from(c).ok());
                    let passed = code.is_some_and(|c| command.expected_exit_codes.contains(&c));
                    if !passed {
                        missing.push(format!(
                            "`{}` {}",
                            command.display(),
                            if o["timed_out"].as_bool() == Some(true) {
                                "timed out".to_owned()
                            } else {
                                match code {
                                    Some(c) => format!(
                                        "exited {c}, expected {:?}",
                                        command.expected_exit_codes
                                    ),
                                    None => "was killed by a signal or could not start".to_owned(),
                                }
                            }
                        ));
                    }
                    commands.push(json!({"command": command.display(), "argv": command.argv, "expected_exit_codes": command.expected_exit_codes, "exit_code": code, "passed": passed, "timed_out": o["timed_out"], "duration_ms": o["duration_ms"], "stdout": o["stdout"], "stderr": o["stderr"], "spawn_error": o["spawn_error"]}));
                }
                _ => {
                    commands.push(json!({"command": command.display(), "argv": command.argv, "passed": false, "skipped": true}));
                }
            }
        }
    }
    let handback = checks["handback"].as_str().map(str::to_owned);
    let verified = missing.is_empty() && handback.is_none();
    let record = lane
        .record_mut("receipt")
        .expect("the receipt record exists");
    finish(
        record,
        if verified {
            StepStatus::Done
        } else {
            StepStatus::Failed
        },
        json!({"verified": verified, "missing": missing, "commands": commands, "ahead": checks["ahead"], "head": checks["head"], "tree": checks["tree"], "guard": checks["guard"], "report": checks["report"], "handback": handback}),
    );
    emit(
        &ctx.paths,
        &run_id,
        if verified { "step_done" } else { "step_failed" },
        json!({"lane": lane_id, "step": "receipt", "attempt": attempt, "outcome": {"verified": verified, "missing": missing.len()}}),
    );
    if let Some(reason) = handback {
        lane.stage = Stage::Handback;
        lane.reason = Some(reason);
    } else if verified {
        // The dispositions of a fix round are now facts of the branch: record them on the findings.
        let dispositions = super::kept::load_from::<report::Report>(
            lane.record("receipt").and_then(|r| r.outcome.as_ref()),
            "report",
        )
        .map(|r| serde_json::to_value(r.dispositions).expect("serialises"))
        .unwrap_or(Value::Null);
        super::dispositions::apply_dispositions(lane, &dispositions);
        if independent {
            if lane.validators.is_empty() {
                lane.validators = super::judging::validators_for(ctx, lane);
            }
            lane.stage = Stage::Validate;
        } else {
            // `reason` is kept: an attempt's brief renders the previous attempt's gaps from it,
            // and the deliver step re-checks that the brief still renders to its recorded inputs.
            lane.stage = Stage::Deliver;
        }
    } else {
        let gaps = missing
            .iter()
            .map(|m| format!("- {m}"))
            .collect::<Vec<_>>()
            .join("\n");
        if attempt >= max_attempts {
            lane.stage = Stage::Blocked;
            lane.reason = Some(format!(
                "attempt {attempt} of {max_attempts} did not verify:\n{gaps}"
            ));
        } else {
            new_attempt(ctx, &run_id, lane, gaps, false)?;
        }
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------------
// The host's receipt
// ------------------------------------------------------------------------------------------------

/// `implement receipt <path>`: the host hands in its agent's report for the current attempt.
/// `said` is what the host says its agent used (SPEC 24.8), kept on the step's outcome.
pub fn submit_receipt(
    ctx: &Ctx<'_>,
    run_id: &str,
    path: &Path,
    said: &super::host::HostAgent,
) -> Result<StepReport, Refusal> {
    logged(ctx, run_id, submit_receipt_once(ctx, run_id, path, said))
        .map(|r| lane_not_run(ctx, run_id, r))
}

fn submit_receipt_once(
    ctx: &Ctx<'_>,
    run_id: &str,
    path: &Path,
    said: &super::host::HostAgent,
) -> Result<StepReport, Refusal> {
    let given = path.canonicalize().unwrap_or_else(|_| path.to_owned());
    ctx.transact(|state| {
        let run = open_run(ctx, state, run_id, "hand in")?;
        let run_snapshot = run.clone();
        if let Some(report) = super::judging::host_answer(ctx, run, &given, said)? {
            return Ok(report);
        }
        // The lane this path belongs to: the one whose receipt goes there now, else one in
        // Implement (whose path it then is not; refused below).
        let at = |l: &Lane, a: u32| {
            let p = ctx.receipt_path(&run_snapshot.id, &l.id, a);
            p.canonicalize().unwrap_or(p) == given
        };
        let index = run
            .lanes
            .iter()
            .position(|l| l.stage == Stage::Implement && at(l, l.attempt))
            .or_else(|| run.lanes.iter().position(|l| (1..=l.attempt).any(|a| at(l, a))))
            .or_else(|| run.lanes.iter().position(|l| l.stage == Stage::Implement))
            .ok_or_else(|| {
                ctx.refuse("receipt-superseded", format!("run `{run_id}` is not waiting for a receipt"), "`iced implement step` says what the run needs now")
            })?;
        let lane = &mut run.lanes[index];
        if lane.stage != Stage::Implement {
            return Err(ctx.refuse("receipt-superseded", format!("lane `{}` is not waiting for a receipt (it is at {})", lane.id, lane.stage.as_str()), "`iced implement step` says what the run needs now"));
        }
        let expected = ctx.receipt_path(&run_snapshot.id, &lane.id, lane.attempt);
        let expected_c = expected.canonicalize().unwrap_or_else(|_| expected.clone());
        if given != expected_c {
            // A report for an earlier attempt of this lane is superseded, anything else is a wrong path.
            let earlier = (1..lane.attempt).any(|a| {
                let p = ctx.receipt_path(&run_snapshot.id, &lane.id, a);
                p.canonicalize().unwrap_or(p) == given
            });
            return Err(if earlier {
                ctx.refuse("receipt-superseded", format!("`{}` is the report of an earlier attempt; attempt {} is current", path.display(), lane.attempt), format!("have the agent write to `{}`", expected.display()))
            } else {
                ctx.refuse("receipt-path", format!("`{}` is not where this attempt's report goes", path.display()), format!("the report goes to `{}` (`iced implement step` names it)", expected.display()))
            });
        }
        let record = lane.record("implement").cloned();
        match record {
            Some(r) if r.status == StepStatus::Started => {}
            _ => return Err(ctx.refuse("receipt-superseded", "this attempt is not waiting for a receipt", "`iced implement step` says what the run needs now")),
        }
        // A malformed or forged report is refused now, so the host can have it fixed; nothing is
        // recorded and the attempt keeps waiting.
        if let Err(p) = report::read(&expected) {
            let remedy = p.remedy();
            return Err(ctx.refuse(p.code, p.message, remedy));
        }
        let record = lane.record_mut("implement").expect("checked above");
        finish(record, StepStatus::Done, json!({"receipt_path": expected, super::host::SAID: said}));
        lane.stage = Stage::Receipt;
        emit(&ctx.paths, run_id, "agent_end", json!({"lane": lane.id, "attempt": lane.attempt, "role": "implementer", "step": "implement", "driver": "host"}));
        emit(&ctx.paths, run_id, "step_done", json!({"lane": lane.id, "step": "implement", "attempt": lane.attempt, "outcome": {"receipt_path": expected}}));
        let lane_id = lane.id.clone();
        let run = state.runs.get(run_id).expect("run");
        let lane = run.lane(&lane_id).expect("lane");
        Ok(StepReport::for_lane(run, lane, "advanced", "the receipt is in; call `iced implement step` until the run says delivered, blocked or start_agent"))
    })
}

// ------------------------------------------------------------------------------------------------
// Run verbs
// ------------------------------------------------------------------------------------------------

/// The run a verb steers, which must not have ended; `doing` says what the verb would do.
fn open_run<'s>(
    ctx: &Ctx<'_>,
    state: &'s mut State,
    run_id: &str,
    doing: &str,
) -> Result<&'s mut Run, Refusal> {
    let run = state.runs.get_mut(run_id).ok_or_else(|| {
        ctx.refuse(
            "run-not-found",
            format!("no run `{run_id}`"),
            "`iced run list` shows the runs",
        )
    })?;
    if run.status.is_ended() {
        return Err(ctx.refuse(
            "run-ended",
            format!("run `{run_id}` has ended ({})", run.status.as_str()),
            format!("nothing to {doing}"),
        ));
    }
    Ok(run)
}

/// A person resuming a run on a pace other than the one it recorded (SPEC 20.11): refused
/// (`pace-changed`, naming the differences) unless `repace`, which records the new pace.
pub fn check_pace(ctx: &Ctx<'_>, run_id: &str, repace: bool) -> Result<(), Refusal> {
    ctx.transact(|state| {
        let Some(run) = state.runs.get_mut(run_id) else {
            return Ok(());
        };
        let recorded = run_pace(ctx, run);
        let now = &ctx.settings.pace;
        let diffs = recorded.differences(now);
        if diffs.is_empty() {
            return Ok(());
        }
        if !repace {
            return Err(ctx.refuse(
                "pace-changed",
                format!(
                    "run `{}` keeps the pace it recorded, and the pace in force now differs: {}",
                    run.id,
                    diffs.join(", ")
                ),
                "add `--repace` to go on at the new pace, or restore the settings (`pace` in .iced/config.json, its rulings, your user config, the flags)",
            ));
        }
        run.pace = Some(now.to_value());
        run.updated_at = crate::clock::now_iso();
        emit(
            &ctx.paths,
            run_id,
            "repaced",
            json!({"changes": diffs, "ruling": now.ruling}),
        );
        Ok(())
    })
}

/// `iced run pause <run> --until T`: no agent launched before `T` (SPEC 20.10).
pub fn pace_until(ctx: &Ctx<'_>, run_id: &str, until: &str) -> Result<Run, Refusal> {
    let at = chrono::DateTime::parse_from_rfc3339(until).map_err(|e| {
        ctx.refuse(
            "time-invalid",
            format!("`{until}` is not an RFC 3339 time: {e}"),
            "give a time like 2026-12-01T09:00:00Z",
        )
    })?;
    let until = at
        .with_timezone(&chrono::Utc)
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    ctx.transact(|state| {
        let run = open_run(ctx, state, run_id, "pause")?;
        run.next_eligible_at = Some(until.clone());
        run.updated_at = crate::clock::now_iso();
        emit(
            &ctx.paths,
            run_id,
            "paced",
            json!({"until": until, "why": "pause"}),
        );
        Ok(run.clone())
    })
}

pub fn set_paused(ctx: &Ctx<'_>, run_id: &str, paused: bool) -> Result<Run, Refusal> {
    ctx.transact(|state| {
        let run = open_run(ctx, state, run_id, if paused { "pause" } else { "resume" })?;
        if !paused {
            // A resume lifts a pace a person set, or a backoff, too.
            run.next_eligible_at = None;
        }
        if paused {
            run.status = RunStatus::Paused;
        } else if run.status == RunStatus::Paused {
            run.status = RunStatus::Running;
        } else if run.status == RunStatus::Blocked {
            // Resuming a blocked run: a fresh attempt of every blocked lane, with a fresh budget;
            // a lane that blocked while landing (its close is committed) lands again instead, in
            // a new round that takes whatever the person did on its branch.
            let run_id = run.id.clone();
            for lane in run.lanes.iter_mut().filter(|l| l.stage == Stage::Blocked) {
                if lane.is_done("deliver") {
                    if lane.is_done("pr-arm") {
                        return Err(ctx.refuse(
                            "pr-armed",
                            format!(
                                "lane `{}` has an armed pull request ({}); the loop never pushes to a pull request after arming it",
                                lane.id,
                                lane.outcome("pr-open").and_then(|o| o["url"].as_str()).unwrap_or("?")
                            ),
                            "change it on the forge yourself, or close it and abandon this run (`iced run abandon`), then build again",
                        ));
                    }
                    // Landing steps that are not keyed by round are tried afresh.
                    let attempt = lane.attempt;
                    let failed: Vec<StepRecord> = lane
                        .steps
                        .iter()
                        .filter(|r| r.attempt == attempt && r.status == StepStatus::Failed)
                        .filter(|r| matches!(r.step.as_str(), "push-branch" | "pr-open" | "pr-arm" | "retire"))
                        .cloned()
                        .collect();
                    lane.steps.retain(|r| !failed.contains(r));
                    archive(ctx, &run_id, &lane.id, &failed)?;
                    lane.stage = Stage::Land;
                    lane.released = false;
                    lane.land_round = lane.land_round.max(1) + 1;
                    lane.crashes = 0;
                    // A person resumed this round: what they did on the lane branch is theirs to
                    // land (SPEC 23.3, 24.3); the landing records what it takes.
                    let mut record = started(&format!("resume-{}", lane.land_round), lane.attempt, None, None);
                    record.pid = None;
                    record.pid_start = None;
                    finish(&mut record, StepStatus::Done, json!({"by": "person"}));
                    lane.steps.push(record);
                    continue;
                }
                lane.released = false;
                let reason = lane.reason.clone().unwrap_or_else(|| "resumed".into());
                let had_worktree = lane.worktree.is_some();
                new_attempt(
                    ctx,
                    &run_id,
                    lane,
                    format!("resumed after: {reason}"),
                    false,
                )?;
                lane.crashes = 0;
                if !had_worktree {
                    lane.steps.retain(|r| r.step != "worktree");
                }
            }
            run.status = RunStatus::Running;
        }
        emit(
            &ctx.paths,
            run_id,
            if paused { "run_paused" } else { "run_resumed" },
            json!({}),
        );
        Ok(run.clone())
    })
}

pub fn abandon(ctx: &Ctx<'_>, run_id: &str) -> Result<Run, Refusal> {
    let run = ctx.transact(|state| {
        let run = open_run(ctx, state, run_id, "abandon")?;
        end_run(ctx, run, RunStatus::Abandoned)?;
        Ok(run.clone())
    })?;
    // Stop what still runs (outside the lock); their outcomes no longer matter.
    for lane in &run.lanes {
        stop_activities(ctx, &run.id, lane);
    }
    Ok(run)
}

/// Stop every activity of a lane that is still running, and what its dead supervisors left.
fn stop_activities(ctx: &Ctx<'_>, run_id: &str, lane: &Lane) {
    for record in lane
        .steps
        .iter()
        .filter(|r| r.status == StepStatus::Started && r.nonce.is_some())
    {
        let dir = ctx.activity_dir(run_id, &lane.id, &record.step, record.attempt);
        let _ = activity::stop(&dir);
        activity::kill_orphans(&dir);
    }
}

/// The lane of a run a verb names: by id, or by a unique part of it.
fn named_lane<'r>(ctx: &Ctx<'_>, run: &'r mut Run, lane: &str) -> Result<&'r mut Lane, Refusal> {
    let hits: Vec<usize> = run
        .lanes
        .iter()
        .enumerate()
        .filter(|(_, l)| l.id == lane || l.id.contains(lane))
        .map(|(i, _)| i)
        .collect();
    let exact = run.lanes.iter().position(|l| l.id == lane);
    match (exact, hits.as_slice()) {
        (Some(i), _) => Ok(&mut run.lanes[i]),
        (None, [i]) => Ok(&mut run.lanes[*i]),
        (None, []) => Err(ctx.refuse(
            "lane-not-found",
            format!("run `{}` has no lane `{lane}`", run.id),
            format!("`iced run show {}` lists its lanes", run.id),
        )),
        (None, _) => Err(ctx.refuse(
            "lane-ambiguous",
            format!("`{lane}` matches several lanes of run `{}`", run.id),
            "name the lane by its full id",
        )),
    }
}

/// `iced run release <run> <lane>`: a blocked or handed-back lane stops holding its siblings'
/// landing (SPEC 23.6). The lane itself stays as it is.
pub fn release(ctx: &Ctx<'_>, run_id: &str, lane: &str) -> Result<Run, Refusal> {
    ctx.transact(|state| {
        let run = open_run(ctx, state, run_id, "release")?;
        let l = named_lane(ctx, run, lane)?;
        if !matches!(l.stage, Stage::Blocked | Stage::Handback) {
            return Err(ctx.refuse(
                "lane-not-held",
                format!(
                    "lane `{}` is {}; only a blocked or handed-back lane holds its siblings",
                    l.id,
                    l.stage.as_str()
                ),
                "`iced run show` says where each lane stands",
            ));
        }
        l.released = true;
        let lane_id = l.id.clone();
        if run.status == RunStatus::Blocked {
            run.status = RunStatus::Running;
        }
        run.updated_at = crate::clock::now_iso();
        emit(
            &ctx.paths,
            run_id,
            "lane_released",
            json!({"lane": lane_id}),
        );
        Ok(run.clone())
    })
}

/// `iced run discard <run> <lane>`: the lane leaves the run (SPEC 23.6): its activities are
/// stopped, its claim released; its worktree and branch are kept.
pub fn discard(ctx: &Ctx<'_>, run_id: &str, lane: &str) -> Result<Run, Refusal> {
    let (run, lane_id) = ctx.transact(|state| {
        let run = open_run(ctx, state, run_id, "discard")?;
        let run_key = run.id.clone();
        let l = named_lane(ctx, run, lane)?;
        if l.stage == Stage::Discarded {
            // Again: finish what a call killed after recording it left (its claim, its activities).
            let id = l.id.clone();
            return Ok((run.clone(), id));
        }
        if l.stage == Stage::Delivered {
            return Err(ctx.refuse(
                "lane-final",
                format!("lane `{}` is already delivered", l.id),
                "nothing to discard",
            ));
        }
        if super::decide::landing_begun(l) || matches!(l.stage, Stage::Retire) {
            return Err(ctx.refuse(
                "lane-landing",
                format!(
                    "lane `{}` has begun landing; discarding it now could leave half a landing",
                    l.id
                ),
                format!("let it land (`iced run resume {run_key}`), or abandon the whole run"),
            ));
        }
        l.stage = Stage::Discarded;
        l.reason = Some("discarded by a person".into());
        let lane_id = l.id.clone();
        super::host::end_stranded(ctx, run);
        if run.status == RunStatus::Blocked {
            run.status = RunStatus::Running;
        }
        run.updated_at = crate::clock::now_iso();
        emit(
            &ctx.paths,
            run_id,
            "lane_discarded",
            json!({"lane": lane_id}),
        );
        Ok((run.clone(), lane_id))
    })?;
    // The lane left the run first; only then may its unit be claimed by another run.
    crate::failpoint::hit("discard-before-release");
    if let Some(lane) = run.lane(&lane_id).filter(|l| l.unit != run.unit) {
        ctx.claims().release(&lane.unit, &run.id, ctx.step)?;
    }
    // Stop what still runs (outside the lock); the gate refuses what has not started.
    if let Some(lane) = run.lane(&lane_id) {
        stop_activities(ctx, &run.id, lane);
    }
    Ok(run)
}

/// The gate a supervisor asks before it starts its child: is this launch still current?
pub struct RunGate;

impl activity::Gate for RunGate {
    fn register(
        &self,
        gate: &Value,
        nonce: &str,
        pid: u32,
        pid_start: u64,
    ) -> Result<bool, String> {
        let root = gate["root"].as_str().ok_or("the gate names no root")?;
        let run_id = gate["run"].as_str().ok_or("the gate names no run")?;
        let lane_id = gate["lane"].as_str().ok_or("the gate names no lane")?;
        let step = gate["step"].as_str().ok_or("the gate names no step")?;
        let attempt = gate["attempt"]
            .as_u64()
            .ok_or("the gate names no attempt")? as u32;
        let paths = RunPaths::new(Path::new(root));
        let _lock = StateLock::acquire(&paths, "supervise", std::time::Duration::from_secs(60))
            .map_err(|r| r.reason)?;
        let mut state = State::load(&paths, "supervise").map_err(|r| r.reason)?;
        let Some(run) = state.runs.get_mut(run_id) else {
            return Ok(false);
        };
        if run.status.is_ended() {
            return Ok(false);
        }
        let Some(lane) = run.lane_mut(lane_id) else {
            return Ok(false);
        };
        if lane.attempt != attempt || lane.stage.is_final() {
            return Ok(false);
        }
        let Some(record) = lane.record_mut(step) else {
            return Ok(false);
        };
        if record.status != StepStatus::Started || record.nonce.as_deref() != Some(nonce) {
            return Ok(false);
        }
        record.pid = Some(pid);
        record.pid_start = Some(pid_start);
        state.save(&paths, "supervise").map_err(|r| r.reason)?;
        Ok(true)
    }
}

pub fn exit_for(report: &StepReport) -> Exit {
    match report.action {
        "blocked" | "handback" => Exit::NeedsPerson,
        _ => Exit::Ok,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_launch_is_stale_ten_seconds_after_its_spec_was_written() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!launch_stale(dir.path()), "no spec: nothing launched yet");
        let spec = dir.path().join(activity::files::SPEC);
        std::fs::write(&spec, "{}").unwrap();
        assert!(!launch_stale(dir.path()));
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(11);
        std::fs::File::options()
            .write(true)
            .open(&spec)
            .unwrap()
            .set_modified(old)
            .unwrap();
        assert!(launch_stale(dir.path()));
    }
}
