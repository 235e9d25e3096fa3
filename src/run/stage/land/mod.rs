//! The landing steps of a lane, run outside the lock: each returns the
//! outcome to record, and where the lane goes next. Idempotent on replay: a step that finds its
//! work already done (the target already moved, the pull request already open, the worktree
//! already gone) records that.

pub mod git;

use self::git as land;
use self::git::{Integrated, Retired};
use crate::run::ctx::Ctx;
use crate::run::events::Event;
use crate::run::keys::StepKey;
use crate::run::outcome::{DeliverOutcome, LandOutcome};
use crate::run::reply::Action;
use crate::run::state::{Lane, Run, StepStatus};
use crate::run::then::Landing;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// What a landing step did.
pub struct Done {
    pub status: StepStatus,
    pub outcome: Value,
    pub reason: Option<String>,
    pub action: Action,
    pub next: Landing,
}

fn ok(outcome: Value, next: Landing) -> Done {
    Done {
        status: StepStatus::Done,
        outcome,
        reason: None,
        action: Action::Advanced,
        next,
    }
}

fn failed(error: impl Into<String>) -> Done {
    let error = error.into();
    Done {
        status: StepStatus::Failed,
        outcome: json!({"error": error}),
        reason: None,
        action: Action::Advanced,
        next: Landing::Failed { error },
    }
}

/// Not a failure: the world is not there yet. `new_round`: the target moved, integrate again.
fn again(why: impl Into<String>, new_round: bool) -> Done {
    let why = why.into();
    Done {
        status: StepStatus::Failed,
        outcome: json!({"again": true, "new_round": new_round, "why": why}),
        reason: None,
        action: Action::Waiting,
        next: Landing::NotYet { why },
    }
}

/// `-c user.name=.. -c user.email=..` when the repository has no identity of its own.
fn identity(dir: &Path) -> Vec<String> {
    if crate::git::run(dir, &["config", "user.email"]).is_ok() {
        Vec::new()
    } else {
        ["-c", "user.name=iced", "-c", "user.email=iced@localhost"]
            .map(str::to_owned)
            .to_vec()
    }
}

/// The branch a run lands into.
pub fn target(ctx: &Ctx<'_>, run: &Run) -> Option<String> {
    ctx.settings
        .land
        .target
        .clone()
        .or_else(|| run.base.branch.clone())
}

/// The target's commit as the landing sees it: the remote's (fetched) when a remote is set.
fn target_commit(ctx: &Ctx<'_>, target: &str) -> Result<String, String> {
    match &ctx.settings.land.remote {
        Some(remote) => {
            let fetched = land::fetch(&ctx.repo.root, remote, target);
            // Fetched, not recorded: a replay fetches again (it only moves FETCH_HEAD).
            crate::failpoint::hit("land-after-fetch");
            fetched
        }
        None => land::rev(&ctx.repo.root, &format!("refs/heads/{target}")),
    }
}

/// The lane heads the loop can account for (SPEC 24.3): its delivery commit, each merge of the
/// target it made itself, and each head a person accepted by resuming a blocked landing.
fn accounted_heads(lane: &Lane) -> Vec<String> {
    let mut heads = Vec::new();
    if let Some(d) = lane
        .outcome_as::<DeliverOutcome>(&StepKey::Deliver)
        .and_then(|o| o.commit)
    {
        heads.push(d);
    }
    for r in lane.steps.iter().filter(|r| {
        r.attempt == lane.attempt
            && r.status == StepStatus::Done
            && matches!(r.step, StepKey::Integrate(_) | StepKey::PushBranch)
    }) {
        let o = r.outcome_as::<LandOutcome>().unwrap_or_default();
        heads.extend([o.head, o.accepted, o.commit].into_iter().flatten());
    }
    heads
}

/// Whether the lane's head may go on landing in round `round`: a head the loop accounts for, or
/// one a person accepted by resuming this round (returned, with the commits it takes). Any other
/// head moved after it was judged: the reason, naming its commits.
fn check_head(
    lane: &Lane,
    worktree: &Path,
    head: &str,
    round: u32,
    target: Option<(&str, &[String])>,
) -> Result<Option<Vec<String>>, String> {
    let heads = accounted_heads(lane);
    if heads.iter().any(|h| h == head) {
        return Ok(None);
    }
    if target.is_some_and(|(t, merge)| own_merge(worktree, head, &heads, t, merge)) {
        return Ok(None);
    }
    let since = heads.last().cloned().unwrap_or_default();
    let commits: Vec<String> = crate::git::run(
        worktree,
        &[
            "log",
            "--reverse",
            "--format=%h %s",
            &format!("{since}..{head}"),
        ],
    )
    .map(|l| l.lines().map(str::to_owned).collect())
    .unwrap_or_default();
    if lane.outcome(&StepKey::Resume(round)).is_some() {
        return Ok(Some(commits));
    }
    Err(format!(
        "the lane moved after it was judged: its branch is at {} and holds {} commit(s) the loop did not judge or make ({}); nothing unjudged lands. Remove them from the lane branch (`git reset --hard {}` in the lane's worktree) and resume, or abandon the run",
        &head[..head.len().min(12)],
        commits.len(),
        commits.join("; "),
        &since[..since.len().min(12)]
    ))
}

/// Whether `head` is the merge the loop's own integrate step makes (a call killed before recording
/// it leaves it on the branch): a merge of the target (as of `target` or before) into a head the
/// loop accounts for, whose tree is exactly what git merges them into. A person's resolution of a
/// conflict would not be: it has a tree git did not make by itself.
fn own_merge(
    worktree: &Path,
    head: &str,
    heads: &[String],
    target: &str,
    merge: &[String],
) -> bool {
    let git = |args: &[&str]| crate::git::run(worktree, args);
    let Ok(parents) = git(&["rev-list", "--parents", "-n", "1", head]) else {
        return false;
    };
    let [_, first, second] = parents.split_whitespace().collect::<Vec<_>>()[..] else {
        return false;
    };
    if !heads.iter().any(|h| h == first) || !land::is_ancestor(worktree, second, target) {
        return false;
    }
    // Merged as the integrate step merges: iced's append-only files by union (SPEC 23.1).
    let mut args: Vec<&str> = merge.iter().map(String::as_str).collect();
    args.extend(["merge-tree", "--write-tree", first, second]);
    let merged = git(&args);
    let tree = git(&["rev-parse", &format!("{head}^{{tree}}")]);
    matches!((merged, tree), (Ok(m), Ok(t)) if m.lines().next() == Some(t.as_str()))
}

/// A landing step. One that failed while `land.remote` could not be reached (listing the target
/// there fails too) is not the lane's failure: it is tried again after the run's backoff (SPEC
/// 23.2), as a replay would, never a blocked lane to resume by hand.
pub fn perform(ctx: &Ctx<'_>, run: &Run, lane: &Lane, step: &StepKey) -> Done {
    let done = perform_step(ctx, run, lane, step);
    let (StepStatus::Failed, Some(remote)) = (done.status, &ctx.settings.land.remote) else {
        return done;
    };
    if done.outcome["again"] == true {
        return done;
    }
    let target = target(ctx, run).unwrap_or_default();
    let Err(e) = land::remote_head(&ctx.repo.root, remote, &target) else {
        return done;
    };
    let why = format!("`{remote}` could not be reached: {e}");
    Done {
        status: StepStatus::Failed,
        outcome: json!({"again": true, "new_round": false, "why": why, "unreachable": why, "error": done.outcome["error"]}),
        reason: None,
        action: Action::Waiting,
        next: Landing::NotYet {
            why: format!("{why}; the run backs off, then tries `{step}` again"),
        },
    }
}

fn perform_step(ctx: &Ctx<'_>, run: &Run, lane: &Lane, step: &StepKey) -> Done {
    let Some(target) = target(ctx, run) else {
        return failed(
            "the run started on a detached HEAD and `land.target` names no branch to land into",
        );
    };
    let worktree = PathBuf::from(lane.worktree.clone().unwrap_or_default());
    let branch = lane.branch.clone().unwrap_or_default();
    let root = &ctx.repo.root;
    let settings = &ctx.settings.land;
    let delivered = lane
        .outcome_as::<DeliverOutcome>(&StepKey::Deliver)
        .and_then(|o| o.commit)
        .unwrap_or_default();
    // The steps that write the lane worktree's index and move its branch: a git lock a landing's
    // definition of done, or a call of the loop killed in its own git, left goes (SPEC 24.6).
    if matches!(step, StepKey::Integrate(_) | StepKey::LandCommit(_)) {
        let named = step.to_string();
        let lane_of = (run.id.as_str(), lane.id.as_str());
        if let Err(e) = crate::run::stage::worktree::clear_git_locks(
            ctx,
            lane_of,
            (&named, Some(&branch)),
            &worktree,
        ) {
            return failed(e);
        }
    }
    match step {
        // A project's lane with dependencies starts from the target as they left it (SPEC 23.6).
        StepKey::Base => match target_commit(ctx, &target) {
            Ok(commit) => ok(
                json!({"commit": commit, "target": target}),
                Landing::Based {
                    target: target.clone(),
                    commit: commit[..commit.len().min(12)].to_owned(),
                },
            ),
            Err(e) => failed(format!("the target `{target}` could not be read: {e}")),
        },
        StepKey::Integrate(_) => {
            let round = lane.land_round.max(1);
            let before = match land::rev(&worktree, &format!("refs/heads/{branch}")) {
                Ok(h) => h,
                Err(e) => return failed(e),
            };
            let target_head = match target_commit(ctx, &target) {
                Ok(c) => c,
                Err(e) => return failed(format!("the target `{target}` could not be read: {e}")),
            };
            let merge = match land::union_attributes(&ctx.paths.dir) {
                Ok(attributes) => [identity(&worktree), attributes].concat(),
                Err(e) => {
                    return failed(format!(
                        "the loop's attributes file could not be written: {e}"
                    ))
                }
            };
            let accepted = match check_head(
                lane,
                &worktree,
                &before,
                round,
                Some((&target_head, &merge)),
            ) {
                Ok(a) => a,
                Err(why) => return failed(why),
            };
            if accepted.is_some() {
                // What a person's resume takes is judged as the implementer's write against the
                // delivery, the loop's own close aside, and so are the paths the target holds as
                // they are (the target's own work came in with a merge) (SPEC 24.3).
                let differs: Vec<String> = crate::git::run(
                    &worktree,
                    &[
                        "diff",
                        "--name-only",
                        "--no-renames",
                        &target_head,
                        &before,
                        "--",
                    ],
                )
                .map(|o| o.lines().map(str::to_owned).collect())
                .unwrap_or_default();
                let mut close: Vec<String> = ["iced.md", "evidence.md", "verify.json"]
                    .iter()
                    .map(|f| format!("intent/{}/{f}", lane.unit))
                    .chain([".iced/metrics.jsonl".to_owned()])
                    .collect();
                close.extend(
                    crate::git::run(
                        &worktree,
                        &[
                            "diff",
                            "--name-only",
                            "--no-renames",
                            &delivered,
                            &before,
                            "--",
                        ],
                    )
                    .map(|o| o.lines().map(str::to_owned).collect::<Vec<_>>())
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|p| !differs.contains(p)),
                );
                match crate::run::lane_guard::judge_range(
                    ctx,
                    &lane.unit,
                    &worktree,
                    (&delivered, &before),
                    &delivered,
                    &close,
                ) {
                    Ok(denied) if denied.is_empty() => {}
                    Ok(denied) => {
                        return failed(
                            denied
                                .iter()
                                .map(|d| d.gap(&delivered))
                                .collect::<Vec<_>>()
                                .join("; "),
                        )
                    }
                    Err(e) => {
                        return failed(format!("what the lane holds could not be judged: {e}"))
                    }
                }
            }
            let result = land::integrate(&worktree, &target_head, &merge);
            crate::failpoint::hit("land-after-integrate");
            match result {
                // Whether the target came in is judged against the delivery commit, so a call
                // that died after merging still knows the definition of done must run again.
                Ok(Integrated::AlreadyIn | Integrated::Merged { .. }) => {
                    let merged = !land::is_ancestor(&worktree, &target_head, &delivered);
                    let head = land::rev(&worktree, "HEAD").unwrap_or_default();
                    let mut outcome = json!({"target": target, "target_commit": target_head, "merged": merged, "head": head});
                    if let Some(commits) = &accepted {
                        // What the person's resume took, on record and in the event log.
                        outcome["accepted"] = before.clone().into();
                        outcome["accepted_commits"] = json!(commits);
                        crate::run::events::emit(
                            &ctx.paths,
                            &run.id,
                            Event::LandAccepted,
                            json!({"lane": lane.id, "round": round, "head": before, "commits": commits}),
                        );
                    }
                    ok(
                        outcome,
                        Landing::Integrated { merged },
                    )
                }
                Ok(Integrated::Conflict { files }) => failed(format!(
                    "merging `{target}` into the lane conflicts in {}; resolve it on the lane branch `{branch}` and resume",
                    files.join(", ")
                )),
                Err(e) => failed(format!("merging `{target}` into the lane failed: {e}")),
            }
        }
        StepKey::LandCommit(_) => {
            let round = lane.land_round.max(1);
            let integrated = lane
                .outcome_as::<LandOutcome>(&StepKey::Integrate(round))
                .unwrap_or_default();
            let target_head = integrated.target_commit.clone().unwrap_or_default();
            let head = match land::rev(&worktree, &format!("refs/heads/{branch}")) {
                Ok(h) => h,
                Err(e) => return failed(e),
            };
            // Only the head this round's integration left lands (SPEC 24.3).
            if integrated.head.as_deref() != Some(head.as_str()) {
                if let Err(why) = check_head(lane, &worktree, &head, u32::MAX, None) {
                    return failed(why);
                }
            }
            let message = format!(
                "{} ({})\n\nLanded by iced: run {}, lane {}.\n\nIced-Run: {}\nIced-Lane: {}\n",
                lane.unit, settings.strategy, run.id, lane.id, run.id, lane.id
            );
            let made = land::landed_commit(
                root,
                settings.strategy,
                &head,
                &target_head,
                &message,
                &identity(root),
            );
            // Made (an object no ref names yet), not recorded: a replay makes it again and the
            // first is left for git's garbage collection.
            crate::failpoint::hit("land-after-commit");
            match made {
                Ok(commit) => ok(
                    json!({"landed": commit, "from": target_head, "head": head, "strategy": settings.strategy}),
                    Landing::CommitMade,
                ),
                Err(e) => failed(e),
            }
        }
        StepKey::Land(_) => {
            let round = lane.land_round.max(1);
            let made = lane
                .outcome_as::<LandOutcome>(&StepKey::LandCommit(round))
                .unwrap_or_default();
            let commit = made.landed.unwrap_or_default();
            let from = made.from.unwrap_or_default();
            let kept = left_in_checkout(lane);
            let ours = as_ours(&kept);
            let result = match &settings.remote {
                Some(remote) => match land::push(root, remote, &commit, &target) {
                    // The local target (and the person's checkout of it) follows the remote's.
                    Ok(true) => Ok(match land::follow(root, &target, &commit, &ours) {
                        Ok(()) => json!({"commit": commit, "target": target, "remote": remote}),
                        Err(e) => {
                            json!({"commit": commit, "target": target, "remote": remote, "local": e})
                        }
                    }),
                    Ok(false) => {
                        return again(
                            format!(
                                "`{remote}/{target}` moved while landing; landing starts again"
                            ),
                            true,
                        )
                    }
                    Err(e) => Err(e),
                },
                None => match land::move_target(root, &target, &from, &commit, &ours) {
                    Ok(()) => Ok(json!({"commit": commit, "target": target})),
                    Err(e) if e.contains("moved to") => return again(e, true),
                    Err(e) => Err(e),
                },
            };
            crate::failpoint::hit("land-after-move");
            match result {
                Ok(outcome) => ok(
                    outcome,
                    Landing::Landed {
                        target: target.clone(),
                    },
                ),
                Err(e) => failed(e),
            }
        }
        StepKey::PushBranch => {
            // push-branch: the lane branch goes to the remote for its pull request.
            let remote = settings.remote.clone().unwrap_or_default();
            let head = land::rev(&worktree, &format!("refs/heads/{branch}")).unwrap_or_default();
            if let Err(why) = check_head(lane, &worktree, &head, lane.land_round.max(1), None) {
                return failed(why);
            }
            // A call that died after pushing left the branch there: seen on the remote, it is not
            // pushed again.
            if land::remote_head(root, &remote, &branch)
                .ok()
                .flatten()
                .as_deref()
                == Some(head.as_str())
            {
                return ok(
                    json!({"remote": remote, "branch": branch, "commit": head, "found": true}),
                    Landing::BranchPushed,
                );
            }
            let pushed = land::push(root, &remote, &head, &branch);
            crate::failpoint::hit("push-after-push");
            // A push that failed while another push of the same commit got there first (a killed
            // call's `git push` outlives it and races the replay's) finds the head there: pushed.
            let there = || {
                land::remote_head(root, &remote, &branch)
                    .ok()
                    .flatten()
                    .as_deref()
                    == Some(head.as_str())
            };
            match pushed {
                Ok(true) => ok(json!({"remote": remote, "branch": branch, "commit": head}), Landing::BranchPushed),
                _ if there() => ok(
                    json!({"remote": remote, "branch": branch, "commit": head, "found": true}),
                    Landing::BranchPushed,
                ),
                Ok(false) => failed(format!("`{remote}` refused the lane branch `{branch}` (it holds other commits there); the loop never forces a push")),
                Err(e) => failed(e),
            }
        }
        StepKey::PrOpen => {
            let body = crate::run::record::pr_body(run, lane);
            let body_file = ctx
                .activity_dir(&run.id, &lane.id, &StepKey::PrOpen, lane.attempt)
                .join("body.md");
            if let Some(dir) = body_file.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            if let Err(e) = crate::store::write_atomic(&body_file, body.as_bytes(), 0o600) {
                return failed(e.to_string());
            }
            let title = format!("{}: {}", lane.unit, unit_title(ctx, lane));
            let values = placeholders(&branch, &target, &title, &body_file, "", "");
            // A call that died after opening left a pull request: find it rather than open a second.
            if let Some(find) = &settings.pr_find {
                if let Ok(out) = land::forge(root, &crate::run::launch::expand(find, &values)) {
                    if let Some((url, number)) = land::pr_from_output(&out) {
                        return ok(
                            json!({"url": url, "number": number, "found": true}),
                            Landing::PullRequestOpen { url: url.clone() },
                        );
                    }
                }
            }
            let out = land::forge(
                root,
                &crate::run::launch::expand(&settings.pr_open, &values),
            );
            crate::failpoint::hit("pr-after-open");
            match out {
                Ok(out) => match land::pr_from_output(&out) {
                    Some((url, number)) => ok(
                        json!({"url": url, "number": number}),
                        Landing::PullRequestOpen { url: url.clone() },
                    ),
                    None => failed(format!(
                        "the open command printed no pull request URL: {}",
                        out.trim()
                    )),
                },
                Err(e) => failed(format!("opening the pull request failed: {e}")),
            }
        }
        StepKey::PrArm => {
            // pr-arm: from here on, the loop never pushes to this pull request.
            let opened = lane
                .outcome_as::<LandOutcome>(&StepKey::PrOpen)
                .unwrap_or_default();
            let url = opened.url.unwrap_or_default();
            let number = opened.number.map(|n| n.to_string()).unwrap_or_default();
            let title = format!("{}: {}", lane.unit, unit_title(ctx, lane));
            let body_file = ctx
                .activity_dir(&run.id, &lane.id, &StepKey::PrOpen, lane.attempt)
                .join("body.md");
            let values = placeholders(&branch, &target, &title, &body_file, &url, &number);
            // A call that died after arming left it armed: asked, the forge says so, and it is
            // not armed twice (arming a merged pull request can fail).
            if let Some(armed) = &settings.pr_armed {
                if let Ok(out) = land::forge(root, &crate::run::launch::expand(armed, &values)) {
                    if out.trim() == "true" {
                        return ok(
                            json!({"url": url, "armed": true, "found": true}),
                            Landing::PullRequestArmed { url: url.clone() },
                        );
                    }
                }
            }
            let out = land::forge(root, &crate::run::launch::expand(&settings.pr_arm, &values));
            crate::failpoint::hit("pr-after-arm");
            match out {
                Ok(_) => ok(
                    json!({"url": url, "armed": true}),
                    Landing::PullRequestArmed { url: url.clone() },
                ),
                Err(e) => failed(format!("arming the pull request failed: {e}")),
            }
        }
        StepKey::Retire => {
            let landed_in = match &settings.remote {
                Some(remote) if settings.mode != crate::run::settings::LandMode::None => {
                    match land::fetch(root, remote, &target) {
                        Ok(c) => c,
                        Err(e) => {
                            return again(
                                format!("`{remote}/{target}` could not be fetched: {e}"),
                                false,
                            )
                        }
                    }
                }
                _ => match land::rev(root, &format!("refs/heads/{target}")) {
                    Ok(c) => c,
                    Err(e) => return failed(e),
                },
            };
            let landed = landed_by_loop(lane);
            let retired = land::retire(
                (root, ctx.claims().common_dir()),
                Some(&worktree),
                &branch,
                &landed_in,
                landed.as_ref().map(|(c, h)| (c.as_str(), h.as_str())),
            );
            crate::failpoint::hit("retire-after-remove");
            if matches!(retired, Ok(Retired::Removed)) {
                // Landed through a pull request: the person's checkout still holds what the
                // escalation verbs left there, which `git pull` would refuse to overwrite
                // (SPEC 23.3). A merge landing restored it already.
                for ours in as_ours(&left_in_checkout(lane)) {
                    match land::restore_ours(root, &landed_in, &ours) {
                        Ok(true) => crate::failpoint::hit("retire-after-restore"),
                        Ok(false) => {}
                        Err(e) => return failed(e),
                    }
                }
            }
            // A remote lane's branch on the remote goes with the local one (SPEC 20.19).
            let remote_left = match &retired {
                Ok(Retired::Removed) => {
                    match crate::run::stage::remote::unpublish(ctx, &run.id, &lane.id, &branch) {
                        Ok(left) => left,
                        Err(e) => return again(e, false),
                    }
                }
                _ => None,
            };
            match retired {
                Ok(Retired::Removed) => match remote_left {
                    None => ok(json!({"retired": true}), Landing::Retired),
                    Some(left) => ok(
                        json!({"retired": true, "remote_branch": left}),
                        Landing::Retired,
                    ),
                },
                Ok(Retired::DirtyKept(path)) => {
                    let mut d = ok(
                        json!({"retired": false, "kept": path}),
                        Landing::RetiredKept {
                            path: path.display().to_string(),
                        },
                    );
                    d.reason = Some(format!(
                        "worktree kept: `{}` has uncommitted or untracked changes",
                        path.display()
                    ));
                    d
                }
                Ok(Retired::NotLanded) => again(
                    match lane
                        .outcome_as::<LandOutcome>(&StepKey::PrOpen)
                        .and_then(|o| o.url)
                    {
                        Some(url) => {
                            format!("the pull request {url} has not landed in `{target}` yet")
                        }
                        None => format!("the lane has not landed in `{target}` yet"),
                    },
                    false,
                ),
                Err(e) => failed(e),
            }
        }
        _ => failed(format!("unknown landing step `{step}`")),
    }
}

/// The commit the loop moved the target to, and the lane head it was made from (`merge` mode).
pub fn landed_by_loop(lane: &Lane) -> Option<(String, String)> {
    let round = lane.land_round.max(1);
    let commit = lane
        .outcome_as::<LandOutcome>(&StepKey::Land(round))?
        .commit?;
    let head = lane
        .outcome_as::<LandOutcome>(&StepKey::LandCommit(round))?
        .head?;
    Some((commit, head))
}

fn placeholders(
    branch: &str,
    target: &str,
    title: &str,
    body_file: &Path,
    url: &str,
    number: &str,
) -> Vec<(&'static str, String)> {
    vec![
        ("branch", branch.to_owned()),
        ("target", target.to_owned()),
        ("title", title.to_owned()),
        ("body_file", body_file.display().to_string()),
        ("pr_url", url.to_owned()),
        ("pr_number", number.to_owned()),
    ]
}

fn unit_title(ctx: &Ctx<'_>, lane: &Lane) -> String {
    crate::repo::read_text(&ctx.repo.unit_paths(&lane.unit).iced)
        .ok()
        .and_then(|t| crate::unit::parse_unit(&t).title)
        .unwrap_or_default()
}

/// The unit and its decision log as a person's escalation verbs left them in the checkout, for
/// the lane (SPEC 20.7, 23.2): each path with the bytes the verb wrote.
fn left_in_checkout(lane: &Lane) -> Vec<(String, String)> {
    let left = crate::run::escalation_verbs::left_for_lane(lane)
        .ok()
        .flatten()
        .unwrap_or_default();
    [("iced.md", left.text), ("decisions.md", left.decisions)]
        .into_iter()
        .filter_map(|(file, text)| Some((format!("intent/{}/{file}", lane.unit), text?)))
        .collect()
}

fn as_ours(kept: &[(String, String)]) -> Vec<land::Ours<'_>> {
    kept.iter()
        .map(|(path, text)| land::Ours {
            path,
            text: text.as_bytes(),
        })
        .collect()
}
