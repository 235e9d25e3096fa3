//! `iced memory draft` (SPEC 20.15): an agent in the `memory` role proposes the repository's
//! memory files on a branch of their own, which the person merges. The loop checks the branch's
//! change itself (only `.iced/memory/`), never merges it, and says how to.
//!
//! A draft in progress is `.iced/run/memory/draft.json`: a call killed at any point is taken up by
//! the next `iced memory draft`, which adopts the worktree and the agent's launch (its supervisor
//! registers by creating the launch folder's `registered` file, at most once), so no memory agent
//! runs twice for one draft.

use crate::refusal::{io_error, Refusal};
use crate::run::ctx::Ctx;
use crate::run::stage::brief::KNOWLEDGE_LIMIT;
use crate::run::stage::plan_text::checkout_fingerprint;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where a memory draft may write.
pub const MEMORY_DIR: &str = ".iced/memory/";

/// A draft in progress, as `draft.json` keeps it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Draft {
    stamp: String,
    base: String,
    branch: String,
    worktree: PathBuf,
    nonce: String,
}

/// What a draft left for the person.
#[derive(Debug, Clone, Serialize)]
pub struct Drafted {
    pub branch: String,
    pub base: String,
    pub files: Vec<String>,
    pub land: &'static str,
    /// The command that merges it.
    pub merge: String,
    /// The command that shows it first.
    pub diff: String,
}

fn folder(ctx: &Ctx<'_>) -> PathBuf {
    ctx.paths.dir.join("memory")
}

fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    crate::git::run(dir, args)
}

/// The memory files a draft proposes: `memory.product` and `memory.knowledge` of the config.
fn memory_files(ctx: &Ctx<'_>) -> Vec<String> {
    let raw = &ctx.config.raw;
    let mut files: Vec<String> = raw
        .pointer("/memory/product")
        .and_then(|v| v.as_str())
        .map(str::to_owned)
        .into_iter()
        .collect();
    for k in raw
        .pointer("/memory/knowledge")
        .and_then(|v| v.as_array())
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str())
    {
        files.push(k.to_owned());
    }
    files
}

/// The agent's prompt: the files it may write, what each is for, their text now, and the rule.
fn prompt(ctx: &Ctx<'_>, files: &[String]) -> String {
    let mut out = String::from(
        "# Draft the repository's memory\n\nRead this repository and write its memory files: what the product is and must do, and the conventions and standards its code keeps. Change only files under `.iced/memory/`, and commit your work on the current branch: the loop refuses a draft that changes anything else, and the person merges it.\n\n## The files\n\n",
    );
    for f in files {
        let what = if f.ends_with("product.md") {
            "what the product is and must do"
        } else {
            "conventions and standards"
        };
        out.push_str(&format!("### `{f}` ({what})\n\n"));
        // Only a file inside the repository (SPEC 24.15); the verb refused any other already.
        let text = match super::memory_paths::not_inside(&ctx.repo.root, f) {
            None => crate::repo::read_text(&ctx.repo.root.join(f)).unwrap_or_default(),
            Some(_) => String::new(),
        };
        let text: String = text.chars().take(64 * 1024).collect();
        out.push_str(&format!("```markdown\n{}\n```\n\n", text.trim_end()));
    }
    out
}

fn refuse_io(ctx: &Ctx<'_>, what: impl std::fmt::Display) -> Refusal {
    io_error(ctx.verb, what.to_string())
}

/// Draft the memory files (SPEC 20.15), or take up the draft a killed call left.
pub fn draft(ctx: &Ctx<'_>) -> Result<Drafted, Refusal> {
    crate::trust::require(&ctx.repo.root, &ctx.config, &ctx.settings, ctx.verb)?;
    crate::run::confinement::require(&ctx.settings, ctx.verb)?;
    let Some(runner) = ctx.settings.memory.clone() else {
        return Err(ctx.refuse(
            "memory-needs-runner",
            "no runner for the memory role: neither `roles.memory.runner` nor `roles.implementer.runner` is set",
            "name a runner in `roles.memory.runner` (or `roles.implementer.runner`) in `.iced/config.json`, then `iced trust`",
        ));
    };
    let root = ctx.repo.root.clone();
    let dir = folder(ctx);
    let record = dir.join("draft.json");
    let draft: Draft = match crate::store::read_limited(&record, 64 * 1024) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map_err(|e| refuse_io(ctx, format!("`{}`: {e}", record.display())))?,
        Err(_) => {
            let base =
                git(&root, &["rev-parse", "--verify", "HEAD"]).map_err(|e| refuse_io(ctx, e))?;
            let stamp = free_stamp(ctx, &dir)?;
            let draft = Draft {
                branch: format!("iced/memory/{stamp}"),
                worktree: ctx.worktree_path(&format!("memory-{stamp}")),
                nonce: crate::run::step_record::new_nonce(),
                stamp,
                base,
            };
            crate::run::state::ensure_dir(&dir, ctx.verb)?;
            // The loop's files never show in the person's `git status` (as admit makes sure for a
            // run): the checkout's fingerprint must not move by the draft's own files.
            crate::store::write_atomic(&ctx.paths.dir.join(".gitignore"), b"*\n", 0o600)
                .map_err(|e| crate::repo::store_refusal(ctx.verb, e))?;
            crate::failpoint::hit("memory-after-gitignore");
            let bytes = serde_json::to_vec_pretty(&draft).expect("serialises");
            if crate::store::create_new_whole(&record, &bytes, 0o600)
                .map_err(|e| crate::repo::store_refusal(ctx.verb, e))?
            {
                crate::failpoint::hit("memory-after-record");
                draft
            } else {
                // Another `memory draft` recorded its draft meanwhile: take that one up.
                let bytes = crate::store::read_limited(&record, 64 * 1024)
                    .map_err(|e| crate::repo::store_refusal(ctx.verb, e))?;
                serde_json::from_slice(&bytes)
                    .map_err(|e| refuse_io(ctx, format!("`{}`: {e}", record.display())))?
            }
        }
    };
    crate::run::stage::worktree::add_worktree(ctx, &draft.worktree, &draft.branch, &draft.base)
        .map_err(|e| refuse_io(ctx, format!("the memory draft's worktree: {e}")))?;
    crate::failpoint::hit("memory-after-worktree");
    let activity = dir.join(&draft.stamp);
    run_agent(ctx, &runner, &draft, &activity)?;
    let checkout_moved = checkout_moved(ctx, &activity);
    check_and_leave(ctx, &draft, (&record, &activity), checkout_moved)
}

/// The draft's stamp: the time (`%Y%m%dT%H%M%S`), with `-2`, `-3`, ... when an earlier draft of
/// the same second left its branch, its worktree or its folder (SPEC 20.15).
fn free_stamp(ctx: &Ctx<'_>, dir: &Path) -> Result<String, Refusal> {
    let time = crate::clock::now().format("%Y%m%dT%H%M%S").to_string();
    for n in 1..1000 {
        let stamp = if n == 1 {
            time.clone()
        } else {
            format!("{time}-{n}")
        };
        let branch = format!("refs/heads/iced/memory/{stamp}");
        let taken = git(
            &ctx.repo.root,
            &["rev-parse", "--verify", "--quiet", &branch],
        )
        .is_ok()
            || ctx.worktree_path(&format!("memory-{stamp}")).exists()
            || dir.join(&stamp).exists();
        if !taken {
            return Ok(stamp);
        }
    }
    Err(refuse_io(
        ctx,
        format!("a thousand memory drafts of `{time}` are kept: no name is left for another"),
    ))
}

/// Whether the person's checkout changed while the agent ran: its fingerprint now against the one
/// taken before the launch (a draft an earlier iced started has none, and is not judged by it).
fn checkout_moved(ctx: &Ctx<'_>, activity: &Path) -> bool {
    let Ok(before) = crate::store::read_no_follow(&activity.join("before.txt"), 1024) else {
        return false;
    };
    checkout_fingerprint(&ctx.repo.root).map_or(true, |now| now.as_bytes() != before.as_slice())
}

/// Start the memory agent once (a launch already made is adopted) and wait for it to end.
fn run_agent(
    ctx: &Ctx<'_>,
    runner: &crate::run::settings::Runner,
    draft: &Draft,
    activity: &Path,
) -> Result<(), Refusal> {
    use crate::activity::Observation;
    let launched = activity.join(crate::activity::files::SPEC).exists();
    let never_ran = matches!(
        crate::activity::observe(activity),
        Observation::NotRegistered
    ) && crate::run::launch::launch_stale(activity, &draft.nonce)
        && !activity.join("registered").exists();
    if !launched || never_ran {
        crate::run::state::ensure_dir(activity, ctx.verb)?;
        let prompt_path = activity.join("prompt.md");
        crate::store::write_atomic(
            &prompt_path,
            prompt(ctx, &memory_files(ctx)).as_bytes(),
            0o600,
        )
        .map_err(|e| crate::repo::store_refusal(ctx.verb, e))?;
        // What the person's checkout is before the agent: it must be the same after.
        let before = checkout_fingerprint(&ctx.repo.root).unwrap_or_default();
        crate::store::write_atomic(&activity.join("before.txt"), before.as_bytes(), 0o600)
            .map_err(|e| crate::repo::store_refusal(ctx.verb, e))?;
        // Its answer in a folder of its own, which is all of the activity it may write (SPEC 21.1).
        let output = activity.join("out").join("output.md");
        let values: Vec<(&str, String)> = vec![
            ("prompt_file", prompt_path.display().to_string()),
            ("output_file", output.display().to_string()),
            ("worktree", draft.worktree.display().to_string()),
            ("role", "memory".into()),
            (
                "model",
                ctx.settings.memory_model.clone().unwrap_or_default(),
            ),
            ("effort", String::new()),
            ("run", format!("memory-{}", draft.stamp)),
            ("lane", "memory".into()),
            ("attempt", "1".into()),
        ];
        let spec = crate::run::launch::agent_spec(
            ctx,
            runner,
            &values,
            crate::run::launch::AgentStart {
                read_only: false,
                nonce: &draft.nonce,
                model: ctx.settings.memory_model.as_deref(),
                effort: None,
                prompt: &prompt_path,
                cwd: draft.worktree.clone(),
                gate: json!({"memory": activity}),
                dir: activity,
            },
        )?;
        crate::run::launch::launch(ctx, activity, &spec)?;
        crate::failpoint::hit("memory-after-launch");
    }
    let mut wait = Duration::from_millis(50);
    loop {
        match crate::activity::observe(activity) {
            Observation::Finished(_) => return Ok(()),
            Observation::NotRegistered
                if crate::run::launch::launch_stale(activity, &draft.nonce) =>
            {
                return Err(refuse_io(
                    ctx,
                    "the memory agent's supervisor never started it",
                ))
            }
            Observation::Gone => {
                return Err(refuse_io(
                    ctx,
                    "the memory agent's supervisor ended without an outcome",
                ))
            }
            _ => {}
        }
        std::thread::sleep(wait);
        wait = (wait * 2).min(Duration::from_secs(1));
    }
}

/// The loop's own check of the branch (only `.iced/memory/` changed, something did), then the
/// worktree removed and the branch left for the person.
fn check_and_leave(
    ctx: &Ctx<'_>,
    draft: &Draft,
    (record, activity): (&Path, &Path),
    checkout_moved: bool,
) -> Result<Drafted, Refusal> {
    let root = &ctx.repo.root;
    // A confined memory agent committed into a git of its own: its branch comes in first (SPEC
    // 24.12).
    let taken = crate::run::stage::worktree::own_worktree(ctx, &draft.worktree).map_or_else(
        |_| Vec::new(),
        |admin| crate::run::lane_git::gaps_taking_back(ctx, &draft.branch, &admin, activity),
    );
    let head = git(
        root,
        &[
            "rev-parse",
            "--verify",
            &format!("refs/heads/{}", draft.branch),
        ],
    )
    .map_err(|e| refuse_io(ctx, e))?;
    let files: Vec<String> = git(
        root,
        &[
            "diff",
            "--name-only",
            "--no-renames",
            &format!("{}..{head}", draft.base),
        ],
    )
    .map_err(|e| refuse_io(ctx, e))?
    .lines()
    .map(str::to_owned)
    .collect();
    // The draft is over whatever the check says: the worktree goes, the branch stays.
    let _ = ctx.worktree_git(&[
        "worktree",
        "remove",
        "--force",
        &draft.worktree.display().to_string(),
    ]);
    crate::failpoint::hit("memory-after-remove");
    let _ = std::fs::remove_file(record);
    let outside: Vec<String> = files
        .iter()
        .filter(|f| !f.starts_with(MEMORY_DIR))
        .map(|f| format!("`{f}`"))
        .collect();
    let mut why = taken;
    if !outside.is_empty() {
        why.push(format!(
            "the memory agent's branch `{}` changes {} outside `{MEMORY_DIR}`",
            draft.branch,
            outside.join(", ")
        ));
    }
    if checkout_moved {
        // Written around its worktree, into the person's own checkout: never taken, named.
        why.push(
            "the checkout changed while the memory agent ran, outside its worktree".to_owned(),
        );
    }
    if !why.is_empty() {
        let mut remedy = format!(
            "look at it with `git diff {}..{}`, delete it with `git branch -D {}`, and draft again",
            short(&draft.base),
            draft.branch,
            draft.branch
        );
        if checkout_moved {
            remedy.push_str("; `git status` shows what changed in the checkout");
        }
        return Err(ctx.refuse(
            "memory-outside",
            format!("{}: it is not offered to merge", why.join("; ")),
            remedy,
        ));
    }
    not_regular(ctx, draft, &head, &files)?;
    if files.is_empty() {
        return Err(ctx.refuse(
            "memory-empty",
            format!(
                "the memory agent committed nothing under `{MEMORY_DIR}` on `{}`",
                draft.branch
            ),
            format!(
                "delete the branch with `git branch -D {}`, and draft again",
                draft.branch
            ),
        ));
    }
    Ok(Drafted {
        merge: format!("git merge {}", draft.branch),
        diff: format!("git diff {}..{}", short(&draft.base), draft.branch),
        branch: draft.branch.clone(),
        base: draft.base.clone(),
        files,
        land: "branch",
    })
}

/// Each memory file the branch holds must be a regular file the brief can carry (SPEC 20.15): a
/// symbolic link would have every brief after the merge read whatever it points at (a secret
/// outside the repository), a submodule is no file, and a file over the brief's 64 KiB is never
/// copied into it. A file the branch deletes is not looked at.
fn not_regular(ctx: &Ctx<'_>, draft: &Draft, head: &str, files: &[String]) -> Result<(), Refusal> {
    if files.is_empty() {
        return Ok(());
    }
    let mut args = vec!["ls-tree", "-l", "-z", head, "--"];
    args.extend(files.iter().map(String::as_str));
    let listed = git(&ctx.repo.root, &args).map_err(|e| refuse_io(ctx, e))?;
    let remedy = format!(
        "look at it with `git diff {}..{}`, delete it with `git branch -D {}`, and draft again",
        short(&draft.base),
        draft.branch,
        draft.branch
    );
    let (mut links, mut special, mut large) = (Vec::new(), Vec::new(), Vec::new());
    for entry in listed.split('\0').filter(|e| !e.is_empty()) {
        let Some((meta, path)) = entry.split_once('\t') else {
            continue;
        };
        let mut fields = meta.split_whitespace();
        let (mode, size) = (fields.next().unwrap_or(""), fields.nth(2).unwrap_or("-"));
        let named = format!("`{path}`");
        match mode {
            "120000" => links.push(named),
            "100644" | "100755" => {
                if size.parse::<u64>().unwrap_or(u64::MAX) > KNOWLEDGE_LIMIT {
                    large.push(named);
                }
            }
            _ => special.push(named),
        }
    }
    let refuse = |code: &'static str, what: &str, paths: &[String]| {
        ctx.refuse(
            code,
            format!(
                "the memory agent's branch `{}` makes {} {what}: it is not offered to merge",
                draft.branch,
                paths.join(", ")
            ),
            remedy.clone(),
        )
    };
    if !links.is_empty() {
        return Err(refuse(
            "path-symlink",
            "a symbolic link, which every brief would read through",
            &links,
        ));
    }
    if !special.is_empty() {
        return Err(refuse(
            "not-a-regular-file",
            "something other than a regular file",
            &special,
        ));
    }
    if !large.is_empty() {
        return Err(refuse(
            "memory-too-large",
            "larger than 64 KiB, more than a brief carries",
            &large,
        ));
    }
    Ok(())
}

fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}
