//! Admit (SPEC 20.3, 23.6): every check a unit (or each child of a project) must pass before any
//! state is written, each failure its own refusal; then the run, its lanes and its claims, written
//! in one hold of the lock.

use crate::refusal::{io_error, Refusal};
use crate::run::alive::agents_alive;
use crate::run::claims::{self, Claim, Taken};
use crate::run::claims_remote::RemoteTaken;
use crate::run::ctx::*;
use crate::run::events::{emit, Event};
use crate::run::records::*;
use crate::run::settings::find_program;
use crate::run::state::{ensure_dir, Base, Driver, Lane, Run, RunStatus, Stage, State};
use crate::unit::{Stage as LintStage, Status};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::str::FromStr;

/// Check that a unit may be built and create its run, or find the live run to resume. Every check
/// runs before anything is written; each failure is its own refusal.
/// With `planning` (`build --auto-plan`, SPEC 20.16) the unit is a draft and the run starts at stage
/// `plan`.
pub fn admit(
    ctx: &Ctx<'_>,
    reference: &str,
    session: Option<&str>,
    picked: Option<&crate::run::picked::Picked>,
    planning: bool,
) -> Result<(String, bool), Refusal> {
    let step = ctx.verb;
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
    let plan = if planning {
        // A draft: its dependencies are a ground of the loop's approval, not a check here
        // (SPEC 20.16).
        check_draft(ctx, &id)?;
        ProjectPlan {
            lanes: vec![(id.clone(), Vec::new())],
            skipped: Vec::new(),
            planning: true,
        }
    } else {
        let numbers = crate::repo::Numbers::new(&repo.unit_ids(step)?);
        plan(ctx, &state, &id, &numbers)?
    };
    admit_planned(ctx, &state, &id, head, plan, session, picked)
}

/// What a unit with no live run must pass to be built, in the order `build` checks it (SPEC 20.3,
/// 23.6), and what its run would build; the queue asks the same of every unit (SPEC 20.13). Only
/// reads: nothing is written.
pub(crate) fn plan(
    ctx: &Ctx<'_>,
    state: &State,
    id: &str,
    numbers: &crate::repo::Numbers,
) -> Result<ProjectPlan, Refusal> {
    let (step, repo) = (ctx.verb, ctx.repo);
    let id = id.to_owned();
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
    let unit = check_unit(ctx, state, &id, numbers, None)?;
    if unit.parsed.frontmatter.str("type") == Some("project") {
        plan_project(ctx, state, &id, numbers)
    } else {
        // A unit built alone waits for nothing: what it `depends:` on must be delivered already.
        for entry in depends_of(&unit) {
            let d = resolve_dependency(ctx, &id, &entry)?;
            let file = repo.read_unit(&d, step).ok();
            let how = format!(" (`iced build {d}` once it is approved)");
            dependency_closed(ctx, &id, &d, file.as_ref(), &how)?;
        }
        Ok(ProjectPlan {
            lanes: vec![(id.clone(), Vec::new())],
            skipped: Vec::new(),
            planning: false,
        })
    }
}

/// The checks of the repository rather than the unit, then the run, its lanes and its claims.
fn admit_planned(
    ctx: &Ctx<'_>,
    state: &State,
    id: &str,
    head: String,
    plan: ProjectPlan,
    session: Option<&str>,
    picked: Option<&crate::run::picked::Picked>,
) -> Result<(String, bool), Refusal> {
    let (step, repo) = (ctx.verb, ctx.repo);
    let planning = plan.planning;
    let id = id.to_owned();
    if ctx.settings.independent && ctx.settings.distinct_model {
        // Every model a validator may get: `verify.model`'s rotation, or the role's one.
        let models: Vec<Option<String>> = if ctx.settings.verify_models.is_empty() {
            vec![ctx.settings.validator_model.clone()]
        } else {
            ctx.settings
                .verify_models
                .iter()
                .map(|m| Some(crate::config::split_effort(m).0.to_owned()))
                .collect()
        };
        for model in models {
            let same = model.is_some() && model == ctx.settings.implementer_model;
            if same || model.is_none() {
                return Err(ctx.refuse(
                    "validator-not-distinct",
                    format!(
                        "roles.validator.distinct_model is on, but the validator's model is {}",
                        match &model {
                            Some(m) => format!("`{m}`, the implementer's too"),
                            None => "not named, so it cannot be shown to differ".to_owned(),
                        }
                    ),
                    "name a different model in roles.validator.model (or verify.model), or turn distinct_model off",
                ));
            }
        }
    }
    for runner in [
        &ctx.settings.implementer,
        &ctx.settings.validator,
        &ctx.settings.planner,
        &ctx.settings.plan_reviewer,
    ]
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
    dod_programs(ctx, &head)?;
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

    // What an ended run of these units left running stops before a new agent can start.
    let units: Vec<String> = plan.lanes.iter().map(|(u, _)| u.clone()).collect();
    crate::run::control::stop_leftovers(ctx, state, &units);

    // What each review lane reviews, resolved now and kept (SPEC 20.14).
    let mut reviews = std::collections::BTreeMap::new();
    for (unit, _) in &plan.lanes {
        let file = repo.read_unit(unit, step)?;
        if let Some(t) = crate::run::stage::review::target(ctx, &file.parsed, &head)? {
            reviews.insert(unit.clone(), t);
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
    let mut run = Run {
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
        overrun: None,
        paced: 0,
        pace: Some(ctx.settings.pace.to_value()),
        window_from: None,
        spares: Vec::new(),
        claims: None,
        lanes: plan
            .lanes
            .iter()
            .map(|(unit, depends)| Lane {
                id: unit.clone(),
                unit: unit.clone(),
                stage: if planning { Stage::Plan } else { Stage::Brief },
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
                attempts_before: 0,
                arm_requested: false,
                metrics: Vec::new(),
                rejected: rejection_of(repo, unit, step),
                escalation: None,
                unit_text: None,
                review: reviews.get(unit).cloned(),
                ended: None,
            })
            .collect(),
        brief_layout: crate::run::state::BRIEF_LAYOUT,
        picked: picked.cloned(),
        rules: None,
    };
    ensure_dir(&ctx.paths.dir, step)?;
    // The loop's files never show in `git status` (a lane's worktree has its own checkout).
    crate::store::write_atomic(&ctx.paths.dir.join(".gitignore"), b"*\n", 0o600)
        .map_err(|e| crate::repo::store_refusal(step, e))?;
    crate::failpoint::hit("admit-after-gitignore");
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
    ctx.claims().clear_elsewhere(&units, step, wait)?;
    let claim = Claim {
        run: run_id.clone(),
        session: session.map(str::to_owned),
        host: claims::host_name(),
        pid,
        at: now.clone(),
        root: Some(ctx.claims().root().to_owned()),
    };
    // With a remote, the claim is taken there too, before the run is recorded (SPEC 24.9.1);
    // the admit lock keeps this checkout's admits in a row until the run is in the state.
    let (_admit_lock, remote_made) = match claim_on_remote(ctx, &id, &units, &claim)? {
        OnRemote::Resume(existing) => return Ok((existing, true)),
        OnRemote::Taken(lock, made) => (lock, made),
    };
    let undo_remote = |made: &[(String, String)]| {
        if let Some(remote) = ctx.remote_claims() {
            remote.undo(made, step);
        }
    };
    // The rules every later step of the run reads (SPEC 24.16), in its folder before the state
    // names it: an admit killed in between leaves the folder of a run that never was.
    run.rules = Some(
        crate::run::rules::record(ctx, &run_id, &ctx.config).inspect_err(|_| {
            undo_remote(&remote_made);
        })?,
    );
    let created = ctx.transact(|state| {
        // Re-check under the lock: another `build` may have won the race.
        if let Some(existing) = state.live_run_of(&id) {
            return Ok(Err(existing.id.clone()));
        }
        if let Taken::LiveHere(holder) = ctx.claims().take(&units, &claim, state, step, wait)? {
            return Ok(Err(holder));
        }
        crate::failpoint::hit("admit-after-claim");
        state.runs.insert(run_id.clone(), run);
        // Logged before the state that holds the run is saved (SPEC 21.5): a run never lacks
        // its `run_start`; an admit killed in between leaves one for a run that never was.
        emit(
            &ctx.paths,
            &run_id,
            Event::RunStart,
            {
                let mut fields = json!({"unit": id, "driver": ctx.driver(), "session": session, "lanes": plan.lanes.iter().map(|(u, _)| u).collect::<Vec<_>>(), "skipped": plan.skipped});
                if let Some(picked) = picked {
                    fields["picked"] = serde_json::to_value(picked).expect("a choice serialises");
                }
                fields
            },
        );
        Ok(Ok(()))
    });
    match created {
        Ok(Ok(())) => {
            crate::failpoint::hit("admit-after-state");
            Ok((run_id, false))
        }
        Ok(Err(existing)) => {
            undo_remote(&remote_made);
            // The rules recorded for a run that never was.
            let _ = std::fs::remove_dir_all(ctx.paths.run_dir(&run_id));
            Ok((existing, true))
        }
        Err(refusal) => {
            undo_remote(&remote_made);
            // A refusal writes nothing: the rules recorded for a run that never was go.
            let _ = std::fs::remove_dir_all(ctx.paths.run_dir(&run_id));
            Err(refusal)
        }
    }
}

/// What claiming on the remote came to.
enum OnRemote {
    /// Claimed (or no remote): the admit lock to hold until the run is recorded, and the claims
    /// made, to undo on a refusal.
    Taken(Option<std::fs::File>, Vec<(String, String)>),
    /// A live run of this checkout has the unit: resume it.
    Resume(String),
}

/// Claim `units` on `land.remote` for `claim`'s run (SPEC 24.9.1), under this checkout's admit
/// lock, and refuse a unit another machine has landed on the remote's target already. Without a
/// remote, nothing.
fn claim_on_remote(
    ctx: &Ctx<'_>,
    id: &str,
    units: &[String],
    claim: &Claim,
) -> Result<OnRemote, Refusal> {
    let Some(remote) = ctx.remote_claims() else {
        return Ok(OnRemote::Taken(None, Vec::new()));
    };
    let step = ctx.verb;
    let lock = crate::run::claims_remote::admit_lock(&ctx.paths, step, ctx.settings.lock_wait)?;
    // An admit that held the lock before this one may have recorded a run of the unit.
    let state = State::load(&ctx.paths, step)?;
    if let Some(existing) = state.live_run_of(id) {
        return Ok(OnRemote::Resume(existing.id.clone()));
    }
    let made = match remote.take(units, claim, &state, step)? {
        RemoteTaken::LiveHere(run) => return Ok(OnRemote::Resume(run)),
        RemoteTaken::All(made) => made,
    };
    if let Some(target) = ctx.land_target() {
        if let Err(refusal) = remote.done_on_target(&target, units, step) {
            remote.undo(&made, step);
            return Err(refusal);
        }
    }
    Ok(OnRemote::Taken(Some(lock), made))
}

/// The unit `--auto-plan <id>` plans: a draft, not held (SPEC 20.16).
fn check_draft(ctx: &Ctx<'_>, id: &str) -> Result<crate::repo::UnitFile, Refusal> {
    let unit = ctx.repo.read_unit(id, ctx.verb)?;
    let status = unit.parsed.frontmatter.str("status").unwrap_or("no status");
    if status != "draft" {
        return Err(ctx.refuse(
            "plan-not-draft",
            format!("`{id}` is {status}; only a draft is planned"),
            format!("`iced build {id}` builds an approved unit; `iced status {id}` shows where it stands"),
        ));
    }
    crate::record::refuse_if_held(&unit, ctx.verb)?;
    Ok(unit)
}

/// Why a unit is built again: a `building` unit with no live run is one a person rejected at
/// acceptance, and the reason is the last `reject` event of it in the metrics (SPEC 20.3), which
/// no agent writes. None for any other status.
fn rejection_of(repo: &crate::repo::Repo, unit: &str, step: &str) -> Option<String> {
    let file = repo.read_unit(unit, step).ok()?;
    if file.parsed.frontmatter.str("status") != Some("building") {
        return None;
    }
    let reason = crate::metrics::read(&repo.root)
        .unwrap_or_default()
        .into_iter()
        .rev()
        .find(|e| {
            e.get("id").and_then(Value::as_str) == Some(unit)
                && e.get("event").and_then(Value::as_str) == Some("reject")
        })
        .and_then(|e| e.get("reason").and_then(Value::as_str).map(str::to_owned));
    Some(reason.unwrap_or_else(|| {
        "(no reason was recorded: the unit's status is `building` without a `reject` event)"
            .to_owned()
    }))
}

/// The checks every unit a run builds must pass (SPEC 20.3), in order, each its own refusal. Only
/// reads: nothing is written. `committed`: whether the unit's folder is committed, when the
/// caller asked git already (for a project's children at once); else asked here.
pub(crate) fn check_unit(
    ctx: &Ctx<'_>,
    state: &State,
    id: &str,
    numbers: &crate::repo::Numbers,
    committed: Option<bool>,
) -> Result<crate::repo::UnitFile, Refusal> {
    let step = ctx.verb;
    let repo = ctx.repo;
    let id = id.to_owned();
    let unit = repo.read_unit(&id, step)?;
    let status = unit
        .parsed
        .frontmatter
        .str("status")
        .and_then(|s| Status::from_str(s).ok());
    // A unit a person rejected at acceptance is `building` with no run: it is built again.
    if !matches!(status, Some(Status::Approved | Status::Building)) {
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
    let committed = match committed {
        Some(committed) => Ok(committed),
        None => crate::git::is_clean(&repo.root, &[&rel]),
    };
    match committed {
        Ok(true) => {}
        Ok(false) => {
            return Err(ctx.refuse(
                "unit-uncommitted",
                format!("`{rel}/` has changes that are not committed; the lane's worktree starts from HEAD and would not see them"),
                match status {
                    Some(Status::Building) => format!("commit the rejected unit: `git add {rel} && git commit -m \"reject {id}\"`, then build again"),
                    _ => format!("commit the approved unit: `git add {rel} && git commit -m \"approve {id}\"`, then build again"),
                },
            ))
        }
        Err(e) => return Err(io_error(step, e)),
    }
    ctx.claims()
        .check(&id, state, step, ctx.settings.lock_wait)?;
    Ok(unit)
}

/// What a run builds: its lanes in dependency order, each with the lanes it waits for, and the
/// units below a project that it leaves out, with why.
pub(crate) struct ProjectPlan {
    lanes: Vec<(String, Vec<String>)>,
    skipped: Vec<Value>,
    /// The run starts at stage `plan` (`build --auto-plan`, SPEC 20.16).
    planning: bool,
}

impl ProjectPlan {
    /// The units the run would build, the unit itself first when it is a lane (a project's
    /// children, in the plan's order); each is claimed at the admit.
    pub(crate) fn lane_units(&self) -> impl Iterator<Item = &str> {
        self.lanes.iter().map(|(unit, _)| unit.as_str())
    }
}

/// The `depends:` entries of a unit (`unit::parse::depends`).
pub(crate) fn depends_of(unit: &crate::repo::UnitFile) -> Vec<String> {
    crate::unit::parse::depends(&unit.parsed)
}

/// The lanes of a project run (SPEC 23.6): every approved, unheld unit below the project that is
/// not itself a project, ordered so that each comes after its parent (when that is a lane) and
/// after what it `depends:` on; ties by id. Each lane's unit passes the checks any unit does.
pub(crate) fn plan_project(
    ctx: &Ctx<'_>,
    state: &State,
    project: &str,
    numbers: &crate::repo::Numbers,
) -> Result<ProjectPlan, Refusal> {
    let step = ctx.verb;
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
        } else if !matches!(status, Some(Status::Approved | Status::Building)) {
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
            wants.push(resolve_dependency(ctx, u, &entry)?);
        }
        let mut mine = Vec::new();
        for d in wants {
            if lanes.contains(&d) {
                if !mine.contains(&d) {
                    mine.push(d);
                }
                continue;
            }
            // Outside the run: its work must already be there.
            dependency_closed(
                ctx,
                u,
                &d,
                units.get(&d),
                ", or approve it so the run builds it too",
            )?;
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
    if ctx.settings.land.mode == crate::run::settings::LandMode::None
        && deps.values().any(|d| !d.is_empty())
    {
        return Err(ctx.refuse(
            "project-needs-landing",
            format!("children of `{project}` depend on each other, but `land.mode` is `none`: a lane would start from a target its dependencies never reach"),
            "set `land.mode` to `merge` or `pr` in `.iced/config.json`, or build the children one by one",
        ));
    }
    // Whether each child's folder is committed: one git for them all (issue 16).
    let folders: Vec<String> = ordered.iter().map(|u| format!("intent/{u}")).collect();
    let folders: Vec<&str> = folders.iter().map(String::as_str).collect();
    let unclean =
        crate::git::unclean_paths(&ctx.repo.root, &folders).map_err(|e| io_error(ctx.verb, e))?;
    for u in &ordered {
        let inside = format!("intent/{u}/");
        let committed = !unclean.iter().any(|p| p.starts_with(&inside));
        check_unit(ctx, state, u, numbers, Some(committed))?;
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
        planning: false,
    })
}

/// A `depends:` entry as a unit id, or `dependency-unknown`.
fn resolve_dependency(ctx: &Ctx<'_>, unit: &str, entry: &str) -> Result<String, Refusal> {
    ctx.repo.resolve(entry, ctx.verb).map_err(|_| {
        ctx.refuse(
            "dependency-unknown",
            format!("`{unit}` depends on `{entry}`, which names no unit"),
            format!("fix the `depends:` line of `intent/{unit}/iced.md`"),
        )
    })
}

/// A dependency outside the run must be delivered (`done` or `accepted`), or `dependency-open`.
/// A project is not work itself: its children are what is built.
fn dependency_closed(
    ctx: &Ctx<'_>,
    unit: &str,
    dependency: &str,
    file: Option<&crate::repo::UnitFile>,
    or: &str,
) -> Result<(), Refusal> {
    let field = |key: &str| file.and_then(|f| f.parsed.frontmatter.str(key));
    let status = field("status").and_then(|s| Status::from_str(s).ok());
    if matches!(status, Some(Status::Done | Status::Accepted)) || field("type") == Some("project") {
        return Ok(());
    }
    Err(ctx.refuse(
        "dependency-open",
        format!(
            "`{unit}` depends on `{dependency}`, which is {} and not part of this run",
            status.map_or("unreadable".to_owned(), |s| s.to_string())
        ),
        format!("deliver `{dependency}` first{or}"),
    ))
}

/// Each definition-of-done command's program can be started as the loop will start it (SPEC
/// 20.3): a bare name on `PATH`; a path in the repository, from the command's folder, committed
/// executable at `head` (the lane's worktree is a checkout of it, not of the working files); a
/// path outside it, an executable file. A missing one is refused here, not found by a failed
/// attempt.
fn dod_programs(ctx: &Ctx<'_>, head: &str) -> Result<(), Refusal> {
    for command in ctx.settings.dod.iter().flatten() {
        let program = &command.argv[0];
        let at = std::path::Path::new(command.cwd.as_deref().unwrap_or(".")).join(program);
        let missing = if !program.contains('/') {
            find_program(program, std::env::var_os("PATH").as_deref())
                .is_none()
                .then(|| "not on PATH".to_owned())
        } else {
            match in_repository(&at) {
                Some(rel) => committed_executable(ctx, head, &rel)
                    .err()
                    .map(|(what, how)| format!("{what} at `{rel}` in the repository{how}")),
                None => find_program(&ctx.repo.root.join(&at).display().to_string(), None)
                    .is_none()
                    .then(|| format!("not an executable file at `{}`", at.display())),
            }
        };
        if let Some(why) = missing {
            return Err(ctx.refuse(
                "dod-program-missing",
                format!(
                    "the definition-of-done command `{}` starts `{program}`, which is {why}",
                    command.display(),
                ),
                "install it (or commit it, executable), or fix `verify.commands` in `.iced/config.json`; then run `iced trust` and build again",
            ));
        }
    }
    Ok(())
}

/// `path` (relative to the repository's root) with `.` and `..` taken out, or `None` when it is
/// absolute or leaves the repository.
fn in_repository(path: &std::path::Path) -> Option<String> {
    use std::path::Component;
    let mut parts: Vec<&std::ffi::OsStr> = Vec::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::Normal(p) => parts.push(p),
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    let parts: Vec<&str> = parts.iter().map(|p| p.to_str()).collect::<Option<_>>()?;
    Some(parts.join("/"))
}

/// Whether `rel` is committed at `head` as a file a checkout can start: an executable file, or
/// a symlink whose target in the working tree is one. Else what it is, and how to mend it.
fn committed_executable(ctx: &Ctx<'_>, head: &str, rel: &str) -> Result<(), (String, String)> {
    let listed = crate::git::run(&ctx.repo.root, &["ls-tree", head, "--", rel])
        .map_err(|e| (format!("not readable from git ({e})"), String::new()))?;
    let mode = listed.split_whitespace().next().unwrap_or("");
    let on_disk = find_program(&ctx.repo.root.join(rel).display().to_string(), None).is_some();
    let short = &head[..head.len().min(12)];
    match mode {
        "100755" => Ok(()),
        "120000" if on_disk => Ok(()),
        "100644" => Err((
            "committed without its executable bit".into(),
            format!(" (`git update-index --chmod=+x {rel}`, then commit)"),
        )),
        _ if on_disk => Err((
            "not committed".into(),
            format!(", only in the working tree (a lane's worktree is a checkout of {short})"),
        )),
        _ => Err(("not an executable file".into(), String::new())),
    }
}
