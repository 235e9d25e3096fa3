//! A project run under `land.mode: none` keeps about as many worktrees as it has lanes at once
//! (SPEC 20.4, 23.2; issue 16): a delivered lane's worktree becomes a spare of the run, and a later
//! lane takes it (switched to its own branch at the base, its ignored files removed, moved to the
//! lane's path) instead of adding one. A spare something wrote into after its lane was delivered
//! is never reused nor cleaned. Real git, `fixtures/fake-agent` as every implementer.

use crate::loop_e2e::{build, step_until, str_of, worktree_of};
use crate::project::Project;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// Every lane commits its own file and leaves an ignored file behind (an agent's build output):
/// neither may reach a later lane that takes its worktree.
pub(crate) const WORK: &str =
    "commit src/{lane}.txt the work of {lane}\nwrite cache/{lane}.o leftovers of {lane}\nreport-ok E1 E2\n";

/// A project of `n` children under `land.mode: none` at `lanes` lanes at once, whose `.gitignore`
/// ignores `cache/`, [`WORK`] every lane's implementer.
pub(crate) fn project(n: usize, lanes: u32) -> Project {
    project_with(n, lanes, WORK)
}

/// ... with `script` as every lane's implementer.
pub(crate) fn project_with(n: usize, lanes: u32, script: &str) -> Project {
    let titles: Vec<String> = (0..n)
        .map(|k| format!("sessions end after step {k}"))
        .collect();
    let titles: Vec<&str> = titles.iter().map(String::as_str).collect();
    let p = Project::new(
        &titles,
        &[],
        script,
        json!({"pace": {"lanes": lanes}, "land": {"mode": "none", "remote": null}}),
    );
    p.env.write(".gitignore", "cache/\n");
    p.env.commit_all("ignore the build cache");
    p
}

/// The worktrees git lists: path and branch (None when detached).
pub(crate) fn worktrees(p: &Project) -> Vec<(PathBuf, Option<String>)> {
    let list = p.env.git_out(&["worktree", "list", "--porcelain"]);
    let mut out: Vec<(PathBuf, Option<String>)> = Vec::new();
    for line in list.lines() {
        if let Some(path) = line.strip_prefix("worktree ") {
            out.push((PathBuf::from(path), None));
        } else if let Some(b) = line.strip_prefix("branch refs/heads/") {
            out.last_mut().expect("a worktree line first").1 = Some(b.to_owned());
        }
    }
    out
}

pub(crate) fn branch(p: &Project, child: &str) -> String {
    format!("iced/{}/{child}", p.id)
}

/// The files a lane's branch changed since the base (`main`).
fn changed(p: &Project, child: &str) -> Vec<String> {
    p.env
        .git_out(&[
            "diff",
            "--name-only",
            &format!("main...{}", branch(p, child)),
        ])
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Each lane's branch holds exactly its own work and close: its file, its unit's close files and
/// metrics, nothing of another lane, nothing ignored.
pub(crate) fn assert_own_work(p: &Project) {
    for child in &p.children {
        let files = changed(p, child);
        assert!(
            files.contains(&format!("src/{child}.txt")),
            "{child}: {files:?}"
        );
        for f in &files {
            assert!(
                f == &format!("src/{child}.txt")
                    || f.starts_with(&format!("intent/{child}/"))
                    || f == ".iced/metrics.jsonl",
                "{child}'s branch holds `{f}`, not its own work: {files:?}"
            );
        }
        let log = p.env.git_out(&["log", "--format=%s", &branch(p, child)]);
        assert_eq!(
            log.lines()
                .filter(|l| l.starts_with("iced: deliver"))
                .count(),
            1,
            "{child}: one delivery\n{log}"
        );
    }
}

pub(crate) fn events(p: &Project) -> Vec<Value> {
    std::fs::read_to_string(p.env.path(".iced/run/events.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// What each lane's worktree step took, in the order the steps were done: (lane, spare).
pub(crate) fn taken(p: &Project) -> Vec<(String, Option<String>)> {
    events(p)
        .iter()
        .filter(|e| e["event"] == "step_done" && e["step"] == "worktree")
        .map(|e| {
            (
                str_of(e, "lane").to_owned(),
                e["outcome"]["spare"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

/// The one `worktree_kept` event of the run, which must be `lane`'s.
fn kept_once(p: &Project, lane: &str) -> Value {
    let mut kept: Vec<Value> = events(p)
        .into_iter()
        .filter(|e| e["event"] == "worktree_kept")
        .collect();
    assert_eq!(kept.len(), 1, "{kept:#?}");
    assert_eq!(kept[0]["lane"], lane, "{kept:#?}");
    kept.remove(0)
}

pub(crate) fn files_under(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

pub(crate) fn assert_clean(dir: &Path) {
    let status = crate::env::git_at(dir, &["status", "--porcelain", "--untracked-files=all"]);
    assert!(status.trim().is_empty(), "{}: {status}", dir.display());
}

/// Four children one lane at a time: lanes 2 to 4 each take the worktree the lane before
/// delivered, so git lists the person's checkout and one worktree at the end, where a run
/// without spares kept five. The last one, which went through every lane, holds the last lane's
/// branch, clean, with only that lane's ignored file.
#[test]
fn one_lane_at_a_time_the_run_reuses_one_worktree() {
    let p = project(4, 1);
    let (_, last) = build(&p.env, &p.id, &[], 0);
    assert_eq!(last["status"], "delivered", "{last}");
    assert_own_work(&p);
    let paths: Vec<PathBuf> = p.children.iter().map(|c| worktree_of(&p.env, c)).collect();
    let took = taken(&p);
    let expected: Vec<(String, Option<String>)> = p
        .children
        .iter()
        .enumerate()
        .map(|(k, c)| {
            let spare = (k > 0).then(|| paths[k - 1].display().to_string());
            (c.clone(), spare)
        })
        .collect();
    assert_eq!(
        took, expected,
        "each lane took the worktree of the one before"
    );
    let listed = worktrees(&p);
    assert_eq!(listed.len(), 2, "the checkout and one worktree: {listed:?}");
    let last_child = p.children.last().unwrap();
    let (at, on) = &listed[1];
    assert!(
        crate::loop_e2e::same_file(&at.display().to_string(), &paths[3]),
        "{listed:?}"
    );
    assert_eq!(on.as_deref(), Some(branch(&p, last_child).as_str()));
    for gone in &paths[..3] {
        assert!(!gone.exists(), "{} moved on", gone.display());
    }
    assert_clean(&paths[3]);
    assert_eq!(
        files_under(&paths[3].join("cache")),
        [format!("{last_child}.o")],
        "an earlier lane's ignored file reached a later lane"
    );
    for c in &p.children[..3] {
        assert!(
            !paths[3].join(format!("src/{c}.txt")).exists(),
            "{c}'s work is in the last lane's worktree"
        );
    }
    // The run left no spare behind it: the last lane's worktree was wanted by nobody.
    let state: Value = serde_json::from_str(&p.env.read(".iced/run/state.json")).unwrap();
    for run in state["runs"].as_object().unwrap().values() {
        assert!(run.get("spares").is_none(), "{run:#}");
    }
}

/// Five children two lanes at a time: never more than the checkout and three worktrees.
#[test]
fn two_lanes_at_a_time_keep_at_most_three_worktrees() {
    let p = project(5, 2);
    let (_, last) = build(&p.env, &p.id, &[], 0);
    assert_eq!(last["status"], "delivered", "{last}");
    assert_own_work(&p);
    let listed = worktrees(&p);
    // The checkout, the two lanes at work, and a spare between a delivery and the next lane.
    assert!(listed.len() <= 4, "at most pace.lanes + 1: {listed:?}");
    let reused = taken(&p).iter().filter(|(_, s)| s.is_some()).count();
    assert!(reused >= 2, "{:?}", taken(&p));
    for (at, _) in &listed[1..] {
        assert_clean(at);
        let cache = files_under(&at.join("cache"));
        assert_eq!(cache.len(), 1, "{}: {cache:?}", at.display());
    }
    // No spare was taken twice.
    let mut spares: Vec<String> = taken(&p).into_iter().filter_map(|(_, s)| s).collect();
    let n = spares.len();
    spares.sort();
    spares.dedup();
    assert_eq!(spares.len(), n, "a spare taken twice");
}

/// A project of two children run one lane at a time, stepped until the first is delivered: the
/// project and its two children, first and second.
fn first_of_two_delivered() -> (Project, String, String) {
    let p = project(2, 1);
    let (a, b) = (p.children[0].clone(), p.children[1].clone());
    let created = p.env.iced_json(&["build", &p.id, "--no-wait"]);
    assert_eq!(created.code, 0, "{created:#?}");
    step_until(&p.env, |s| {
        s["lane"] == a.as_str() && s["stage"] == "delivered"
    });
    (p, a, b)
}

/// A spare that something wrote into after its lane was delivered is not clean: the next lane
/// does not take it (event `worktree_kept`), nothing in it is cleaned or moved, and the lane gets a
/// fresh worktree of its own.
#[test]
fn a_spare_written_into_after_its_delivery_is_left_for_a_person() {
    let (p, a, b) = first_of_two_delivered();
    let state: Value = serde_json::from_str(&p.env.read(".iced/run/state.json")).unwrap();
    let run = state["runs"].as_object().unwrap().values().next().unwrap();
    let spare = worktree_of(&p.env, &a);
    assert_eq!(
        run["spares"],
        json!([spare.display().to_string()]),
        "{run:#}"
    );
    std::fs::write(spare.join("notes.txt"), "a person's notes\n").unwrap();
    step_until(&p.env, |s| s["action"] == "delivered");

    let kept = kept_once(&p, &b);
    assert!(
        crate::loop_e2e::same_file(str_of(&kept, "worktree"), &spare),
        "{kept:#}"
    );
    assert_eq!(
        kept["reason"], "it has uncommitted or untracked changes",
        "{kept:#}"
    );
    // Untouched: the note, the lane's own ignored file, its branch.
    assert_eq!(
        std::fs::read_to_string(spare.join("notes.txt")).unwrap(),
        "a person's notes\n"
    );
    assert_eq!(files_under(&spare.join("cache")), [format!("{a}.o")]);
    let on = crate::env::git_at(&spare, &["branch", "--show-current"]);
    assert_eq!(on.trim(), branch(&p, &a));
    // The next lane made its own, from the base, and took nothing.
    assert_eq!(taken(&p), [(a.clone(), None), (b.clone(), None)]);
    let fresh = worktree_of(&p.env, &b);
    assert_clean(&fresh);
    assert_eq!(files_under(&fresh.join("cache")), [format!("{b}.o")]);
    assert!(!fresh.join("notes.txt").exists());
    assert_own_work(&p);
    assert_eq!(worktrees(&p).len(), 3);
}

/// A lane branch an earlier run left (its tip not the base) is moved aside before a spare is
/// switched to the lane branch, as when a worktree is added (SPEC 20.4): the spare is still
/// reused, the old branch kept under its new name, and the lane starts from the base.
#[test]
fn a_spare_is_reused_for_a_lane_whose_branch_an_earlier_run_left() {
    let p = project(2, 1);
    let (a, b) = (p.children[0].clone(), p.children[1].clone());
    // An earlier run's branch for `b`: one commit on the base, checked out nowhere.
    let dir = p.env.outside("earlier");
    crate::env::git_at(
        p.env.root(),
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            &branch(&p, &b),
            &dir.display().to_string(),
        ],
    );
    std::fs::write(dir.join("old.txt"), "an earlier run's work\n").unwrap();
    crate::env::git_at(&dir, &["add", "old.txt"]);
    crate::env::git_at(&dir, &["commit", "-q", "-m", "an earlier run's work"]);
    let old_tip = crate::env::git_at(&dir, &["rev-parse", "HEAD"])
        .trim()
        .to_owned();
    crate::env::git_at(
        p.env.root(),
        &["worktree", "remove", &dir.display().to_string()],
    );

    let (_, last) = build(&p.env, &p.id, &[], 0);
    assert_eq!(last["status"], "delivered", "{last}");
    assert_own_work(&p);
    let spare = worktree_of(&p.env, &a).display().to_string();
    assert_eq!(taken(&p), [(a.clone(), None), (b.clone(), Some(spare))]);
    let aside = format!("{}-{}", branch(&p, &b), &old_tip[..12]);
    let moved = p.env.git_out(&["rev-parse", &aside]);
    assert_eq!(
        moved.trim(),
        old_tip,
        "the earlier run's branch is kept as `{aside}`"
    );
    let moved_events: Vec<Value> = events(&p)
        .into_iter()
        .filter(|e| e["event"] == "branch_moved_aside")
        .collect();
    assert_eq!(moved_events.len(), 1, "{moved_events:#?}");
    let step = events(&p)
        .into_iter()
        .find(|e| e["event"] == "step_done" && e["step"] == "worktree" && e["lane"] == b.as_str())
        .expect("b's worktree step");
    assert_eq!(step["outcome"]["moved_aside"], aside.as_str(), "{step:#}");
    assert_eq!(worktrees(&p).len(), 2, "{:?}", worktrees(&p));
}

/// A spare something replaced after its lane was delivered (an escaped process of the agent's,
/// say) is not the worktree git made: the next lane does not take it, and no git runs in what is
/// there now, so the person's checkout, which it leads to, keeps its branch, its head and its
/// files. The lane gets a fresh worktree of its own.
fn a_replaced_spare_is_not_taken(tamper: impl FnOnce(&Project, &Path), why: &str) {
    let (p, a, b) = first_of_two_delivered();
    let spare = worktree_of(&p.env, &a);
    let head = p.env.git_out(&["rev-parse", "HEAD"]);
    let status = p.env.git_out(&["status", "--porcelain", "--ignored"]);
    tamper(&p, &spare);
    step_until(&p.env, |s| s["action"] == "delivered");

    let kept = kept_once(&p, &b);
    let reason = str_of(&kept, "reason");
    assert!(
        reason.starts_with("it is not the worktree git made: ") && reason.contains(why),
        "{reason}"
    );
    // The person's checkout: on main, at the same head, its files as they were.
    let on = p.env.git_out(&["branch", "--show-current"]);
    assert_eq!(on.trim(), "main");
    assert_eq!(p.env.git_out(&["rev-parse", "HEAD"]), head);
    assert_eq!(
        p.env.git_out(&["status", "--porcelain", "--ignored"]),
        status
    );
    // The next lane made its own worktree, from the base, and took nothing.
    assert_eq!(taken(&p), [(a.clone(), None), (b.clone(), None)]);
    let fresh = worktree_of(&p.env, &b);
    assert_clean(&fresh);
    assert_own_work(&p);
}

#[test]
fn a_spare_replaced_by_a_link_to_the_checkout_is_not_taken() {
    a_replaced_spare_is_not_taken(
        |p, spare| {
            std::fs::rename(spare, spare.with_extension("moved")).unwrap();
            std::os::unix::fs::symlink(p.env.root(), spare).unwrap();
        },
        "not a folder",
    );
}

#[test]
fn a_spare_replaced_by_a_fifo_is_not_taken() {
    a_replaced_spare_is_not_taken(
        |_, spare| {
            std::fs::rename(spare, spare.with_extension("moved")).unwrap();
            nix::unistd::mkfifo(spare, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        },
        "not a folder",
    );
}

#[test]
fn a_spare_whose_git_file_names_the_checkouts_repository_is_not_taken() {
    a_replaced_spare_is_not_taken(
        |p, spare| {
            let main_git = p.env.root().join(".git");
            std::fs::write(
                spare.join(".git"),
                format!("gitdir: {}\n", main_git.display()),
            )
            .unwrap();
        },
        "not a worktree of this repository",
    );
}
