//! What every call of the loop carries: the repository, the run files, the config and settings,
//! the iced binary (to launch supervisors), the verb (named in refusals), and where each of a
//! run's files lives. Nothing here reads the state or decides.

use super::budget::Budgeted;
use super::claims::Claims;
use super::claims_remote::RemoteClaims;
use super::keys::StepKey;
use super::lock::transact_seeing;
use super::settings::Settings;
use super::state::{Driver, Run, RunPaths, State, ANSWER_LAYOUT};
use crate::config::Config;
use crate::refusal::{io_error, Refusal};
use crate::repo::Repo;
use std::path::{Path, PathBuf};

/// Everything a call of the loop needs.
pub struct Ctx<'a> {
    pub repo: &'a Repo,
    pub paths: RunPaths,
    pub config: Config,
    pub settings: Settings,
    /// The iced binary, for launching supervisors.
    pub exe: PathBuf,
    /// The verb this call serves (`build`, `implement step`, `run resume`), named in refusals.
    pub verb: &'static str,
    /// The claims of runs a transaction ended, `(run, unit)`: released once that transaction's
    /// state is saved (SPEC 20.3), never before, so a claim is gone only when its run has ended.
    /// A thread's own: another thread's transaction saved meanwhile is not this one's.
    releases: std::sync::Mutex<Vec<(String, String)>>,
    /// What this call learned from git, shared by its threads (`fork`).
    asked: std::sync::Arc<Asked>,
    /// The checkout's config and settings, kept while a run's rules are in their place
    /// (`follow`), for the next run this call admits (a drain's).
    checkout: Option<Box<(Config, Settings)>>,
}

/// What a call learned from git that holds for all its threads: what a commit holds, what lies
/// between two commits, and a worktree's index as this call left it never change under it.
struct Asked {
    /// The repository's claims, found on first use (one `git rev-parse` per call).
    claims: std::sync::OnceLock<Claims>,
    /// Files read at a commit this call, by (commit, path, limit): what a commit holds never
    /// changes, and a driver renders each live lane's brief again at every step to check its
    /// inputs (issue 16: a `git cat-file` a live lane a step). Under a budget (`ASKED_BUDGET`).
    at_commit: std::sync::Mutex<Budgeted<AtCommit, Option<Vec<u8>>>>,
    /// The one `git cat-file --batch` this call reads files at commits through, started at the
    /// first read (issue 16: a git process a read was about four a lane).
    blobs: std::sync::Mutex<Option<crate::git::Blobs>>,
    /// The repository's `user.email` is set, and `commit.gpgSign` is true: asked once a call.
    identity: std::sync::OnceLock<(bool, bool)>,
    /// git's answers about the range between two commits this call, by the git arguments: what
    /// lies between two commits never changes, and the receipt and the delivery of a lane ask the
    /// same (issue 16: the guard's `diff` and the commit list, a git each, twice a lane). Under a
    /// budget (`ASKED_BUDGET`).
    between: std::sync::Mutex<Budgeted<Vec<String>, String>>,
    /// Worktrees this call found clean on their lane branch (the receipt): the head their index
    /// then held exactly, and the index file as it was right after (`index_stamp`).
    clean_index: std::sync::Mutex<std::collections::HashMap<PathBuf, (String, IndexStamp)>>,
}

/// The bytes of answers each of `Asked`'s maps keeps: the files and diffs of the lanes live at
/// once, many times over, while a build of a thousand lanes stays as small as one of ten.
const ASKED_BUDGET: usize = 4 * 1024 * 1024;

impl Default for Asked {
    fn default() -> Asked {
        Asked {
            claims: std::sync::OnceLock::new(),
            at_commit: std::sync::Mutex::new(Budgeted::new(ASKED_BUDGET)),
            blobs: std::sync::Mutex::new(None),
            identity: std::sync::OnceLock::new(),
            between: std::sync::Mutex::new(Budgeted::new(ASKED_BUDGET)),
            clean_index: std::sync::Mutex::default(),
        }
    }
}

/// A file's identity and times, changed by any write to it (git writes an index anew and renames
/// it over the old; a write in place moves its ctime, which nobody can set back).
type IndexStamp = (u64, u64, u64, i64, i64, i64, i64);

/// The stamp of the index file of the worktree `dir` (its `.git` file names the folder git keeps
/// it in), or None when it cannot be read.
fn index_stamp(dir: &Path) -> Option<IndexStamp> {
    use std::os::unix::fs::MetadataExt;
    let dot_git = dir.join(".git");
    let git_dir = if dot_git.is_dir() {
        dot_git
    } else {
        let text = std::fs::read_to_string(&dot_git).ok()?;
        dir.join(text.strip_prefix("gitdir:")?.trim())
    };
    let m = std::fs::metadata(git_dir.join("index")).ok()?;
    Some((
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec(),
    ))
}

/// `rev` names one commit for good: a full object id.
fn is_object_id(rev: &str) -> bool {
    matches!(rev.len(), 40 | 64) && rev.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A file read at a commit: `(commit, path, limit)`.
type AtCommit = (String, String, u64);

impl<'a> Ctx<'a> {
    /// The exit codes definition-of-done command `cmd` of sequence `seq` may end with.
    pub fn expected(&self, seq: usize, cmd: usize) -> Vec<i32> {
        self.settings.dod[seq][cmd].expected_exit_codes.clone()
    }

    pub fn new(repo: &'a Repo, verb: &'static str) -> Result<Ctx<'a>, Refusal> {
        let config = repo.config_file(verb)?;
        let settings = Settings::from_config(&config, verb)?;
        // What reaches git's command line or a brief from the config, checked before anything
        // runs (SPEC 24.14, 24.15).
        if let Some(remote) = &settings.land.remote {
            super::land_remote::check_in(&repo.root, remote, verb)?;
        }
        super::memory_paths::check(&repo.root, &settings, verb)?;
        let exe = std::env::current_exe()
            .map_err(|e| io_error(verb, format!("cannot find the iced binary: {e}")))?;
        Ok(Ctx::with(repo, config, settings, exe, verb))
    }

    /// A context for another thread stepping the same run (SPEC 20.1): the same repository,
    /// configuration and settings (the pace flags included) and what this call asked git, with
    /// claim releases of its own, so that a claim one thread's transaction ends is released after
    /// that transaction's save and no other's.
    pub fn fork(&self) -> Ctx<'a> {
        Ctx {
            asked: std::sync::Arc::clone(&self.asked),
            ..Ctx::with(
                self.repo,
                self.config.clone(),
                self.settings.clone(),
                self.exe.clone(),
                self.verb,
            )
        }
    }

    /// A context with nothing asked yet: no claims found, no caches, no releases.
    fn with(
        repo: &'a Repo,
        config: Config,
        settings: Settings,
        exe: PathBuf,
        verb: &'static str,
    ) -> Ctx<'a> {
        Ctx {
            repo,
            paths: RunPaths::new(&repo.root),
            config,
            settings,
            exe,
            verb,
            releases: std::sync::Mutex::new(Vec::new()),
            asked: std::sync::Arc::default(),
            checkout: None,
        }
    }

    /// Whether git knows who commits (`user.email`) and signs (`commit.gpgSign`), in `dir`: asked
    /// once a call (a close commit a lane).
    pub(crate) fn git_identity(&self, dir: &Path) -> (bool, bool) {
        *self.asked.identity.get_or_init(|| {
            let email = crate::git::run(dir, &["config", "user.email"]).is_ok();
            let sign = crate::git::run(dir, &["config", "--bool", "commit.gpgSign"])
                .is_ok_and(|v| v == "true");
            (email, sign)
        })
    }

    /// The bytes of `path` at `commit` (`git::blob_at`), read through the call's one
    /// `git cat-file --batch`, and kept for the call when `commit` is a full object id (what a
    /// commit holds never changes); a failed read is not kept.
    pub(crate) fn blob_at(
        &self,
        commit: &str,
        path: &str,
        limit: u64,
    ) -> Result<Option<Vec<u8>>, String> {
        if !is_object_id(commit) {
            return self.read_blob(commit, path, limit);
        }
        let key = (commit.to_owned(), path.to_owned(), limit);
        let kept = self
            .asked
            .at_commit
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(bytes) = kept.get(&key) {
            return Ok(bytes);
        }
        drop(kept);
        let bytes = self.read_blob(commit, path, limit)?;
        let size = bytes.as_ref().map_or(0, Vec::len) + key.0.len() + key.1.len();
        self.asked
            .at_commit
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, bytes.clone(), size);
        Ok(bytes)
    }

    /// [`Ctx::blob_at`] for a question a run asks again and again (a lane's decision log at its
    /// base, in every brief rendered to check its inputs): when `commit` is a full object id, the
    /// answer is kept in the run's folder (`at_commit`), and a later call reads it there, starting
    /// no git (issue 36: a waiting step started a `git cat-file` for it).
    pub(crate) fn blob_at_kept(
        &self,
        run: &str,
        commit: &str,
        path: &str,
        limit: u64,
    ) -> Result<Option<Vec<u8>>, String> {
        if !is_object_id(commit) {
            return self.blob_at(commit, path, limit);
        }
        let dir = self.paths.run_dir(run).join("at-commit");
        if let Some(kept) = super::at_commit::read(&dir, commit, path, limit) {
            return Ok(kept);
        }
        let bytes = self.blob_at(commit, path, limit)?;
        super::at_commit::keep(&dir, commit, path, limit, bytes.as_deref());
        Ok(bytes)
    }

    /// `git <args>` in `dir` (`git::run`), a question about the range `from..to` only (a diff, a
    /// log): kept for the call when both are full object ids, so it is asked once; a failed
    /// answer is not kept. `dir` is any worktree of the repository: they share its commits.
    pub(crate) fn git_between(
        &self,
        dir: &Path,
        args: &[&str],
        (from, to): (&str, &str),
    ) -> Result<String, String> {
        if !(is_object_id(from) && is_object_id(to)) {
            return crate::git::run(dir, args);
        }
        let key: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        let kept = self.asked.between.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(out) = kept.get(&key) {
            return Ok(out);
        }
        drop(kept);
        let out = crate::git::run(dir, args)?;
        let size = out.len() + key.iter().map(String::len).sum::<usize>();
        self.asked
            .between
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, out.clone(), size);
        Ok(out)
    }

    /// `git status` found the worktree `dir` clean on its lane branch at `head`: its index holds
    /// exactly `head`'s tree while its file stays as it is now.
    pub(crate) fn saw_clean_index(&self, dir: &Path, head: &str) {
        if let Some(stamp) = index_stamp(dir) {
            self.asked
                .clean_index
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(dir.to_owned(), (head.to_owned(), stamp));
        }
    }

    /// Does the index of the worktree `dir` still hold exactly `head`'s tree, as this call saw
    /// (`saw_clean_index`), its file untouched since? False whenever it cannot tell.
    pub(crate) fn index_holds(&self, dir: &Path, head: &str) -> bool {
        let kept = self
            .asked
            .clean_index
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        kept.get(dir)
            .is_some_and(|(h, stamp)| h == head && index_stamp(dir).as_ref() == Some(stamp))
    }

    /// The commits of `from..to`, oldest first, as `<sha> <subject>` lines (`git_between`).
    pub(crate) fn commits_between(
        &self,
        dir: &Path,
        from: &str,
        to: &str,
    ) -> Result<String, String> {
        let range = format!("{from}..{to}");
        self.git_between(
            dir,
            &[
                "log",
                "--reverse",
                "--no-show-signature",
                "--format=%H %s",
                &range,
            ],
            (from, to),
        )
    }

    /// One read through the call's `git cat-file --batch`. A read that fails drops that git (its
    /// answers may no longer line up) and is tried once more through a new one, so a git that
    /// died under a long call costs a restart, not a failed read.
    fn read_blob(&self, commit: &str, path: &str, limit: u64) -> Result<Option<Vec<u8>>, String> {
        self.with_blobs(|blobs| blobs.get(commit, path, limit))
    }

    /// The raw bytes of the tree `spec` names (an id, `<commit>^{tree}`), through the call's
    /// `git cat-file --batch`; None when it names no tree.
    pub(crate) fn tree_object(&self, spec: &str) -> Result<Option<Vec<u8>>, String> {
        // A tree of a million entries is some 40 MB; no folder the loop changes comes near.
        self.with_blobs(|blobs| blobs.object(spec, "tree", 64 * 1024 * 1024))
    }

    /// The tree of the commit `commit` (its id), read through the call's `git cat-file --batch`.
    pub(crate) fn tree_of(&self, commit: &str) -> Option<String> {
        let raw = self
            .with_blobs(|blobs| blobs.object(commit, "commit", 16 * 1024 * 1024))
            .ok()??;
        let first = raw.split(|&b| b == b'\n').next()?;
        let tree = std::str::from_utf8(first.strip_prefix(b"tree ")?).ok()?;
        is_object_id(tree).then(|| tree.to_owned())
    }

    fn with_blobs(
        &self,
        read: impl Fn(&mut crate::git::Blobs) -> Result<Option<Vec<u8>>, String>,
    ) -> Result<Option<Vec<u8>>, String> {
        let mut blobs = self.asked.blobs.lock().unwrap_or_else(|e| e.into_inner());
        let reused = blobs.is_some();
        for fresh in [!reused, true] {
            if blobs.is_none() {
                *blobs = Some(crate::git::Blobs::open(&self.repo.root)?);
            }
            match read(blobs.as_mut().expect("opened")) {
                Ok(bytes) => return Ok(bytes),
                Err(e) => {
                    *blobs = None;
                    if fresh {
                        return Err(e);
                    }
                }
            }
        }
        unreachable!("the second try is always on a fresh git")
    }

    pub(super) fn claims(&self) -> &Claims {
        self.asked
            .claims
            .get_or_init(|| Claims::open(&self.repo.root))
    }

    /// `git <args>` in the repository, a `worktree` subcommand that changes git's list of
    /// worktrees (add, remove, move, prune), holding the repository's worktree lock (SPEC 21.3).
    pub(crate) fn worktree_git(&self, args: &[&str]) -> Result<String, String> {
        crate::git::worktrees::run(self.claims().common_dir(), &self.repo.root, args)
    }

    /// The repository's worktree lock, held (SPEC 21.3): for what is looked at and done as one.
    pub(crate) fn worktree_lock(&self) -> Result<crate::git::worktrees::Held, String> {
        crate::git::worktrees::lock(self.claims().common_dir(), &self.repo.root)
    }

    /// The pace given on the command line, over what the configs and rulings say.
    /// `config` in place of the checkout's for the rest of this call, with the settings read from
    /// it (a run's rules, SPEC 24.16: `rules::adopt`). The pace stays the one this call has: a
    /// run's pace is its own record's (SPEC 20.11), checked against the checkout's.
    pub(crate) fn follow(&mut self, config: Config) -> Result<(), Refusal> {
        let mut settings = Settings::from_config(&config, self.verb)?;
        settings.pace = self.settings.pace.clone();
        let checkout = (
            std::mem::replace(&mut self.config, config),
            std::mem::replace(&mut self.settings, settings),
        );
        self.checkout.get_or_insert(Box::new(checkout));
        Ok(())
    }

    /// The checkout's config and settings in force again, after `follow`: what a run this
    /// call admits next records.
    pub(crate) fn checkout_rules(&mut self) {
        if let Some(checkout) = self.checkout.take() {
            (self.config, self.settings) = *checkout;
        }
    }

    pub fn set_pace_flags(&mut self, flags: &super::pace::Flags) -> Result<(), Refusal> {
        if flags.is_empty() {
            return Ok(());
        }
        self.settings.pace = super::settings::pace_with(&self.config, flags, self.verb)?;
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
        self.transact_seeing(|_, state| f(state))
    }

    /// [`Ctx::transact`], `f` shown the state as read too (`lock::transact_seeing`).
    pub(super) fn transact_seeing<T>(
        &self,
        f: impl FnOnce(&State, &mut State) -> Result<T, Refusal>,
    ) -> Result<T, Refusal> {
        let done = transact_seeing(&self.paths, self.verb, self.settings.lock_wait, f);
        let releases =
            std::mem::take(&mut *self.releases.lock().unwrap_or_else(|e| e.into_inner()));
        let done = done?;
        // The state that ended these runs is saved: only now may another run claim their units.
        // A call killed here leaves claims of ended runs, which block nobody (`claims::blocks`).
        if !releases.is_empty() {
            crate::failpoint::hit("end-before-release");
        }
        for (run, unit) in releases {
            self.release_claim(&unit, &run)?;
        }
        Ok(done)
    }

    /// The branch a landing goes to: `land.target`, else the checkout's current branch.
    pub(super) fn land_target(&self) -> Option<String> {
        self.settings
            .land
            .target
            .clone()
            .or_else(|| crate::git::current_branch(&self.repo.root))
    }

    /// The claims on `land.remote` (SPEC 24.9.1), when one is set.
    pub(super) fn remote_claims(&self) -> Option<RemoteClaims> {
        let remote = self.settings.land.remote.as_deref()?;
        Some(RemoteClaims::new(
            &self.repo.root,
            remote,
            self.settings.land.claim_lease,
        ))
    }

    /// Release `run`'s claim on `unit`: this repository's, then the remote's. A remote that
    /// cannot be reached now keeps its claim: this checkout replaces it at its next admit (its run
    /// has ended), and another machine once its lease has run out (SPEC 24.9.1); the run's end
    /// is saved already and is not turned into a failure.
    pub(crate) fn release_claim(&self, unit: &str, run: &str) -> Result<(), Refusal> {
        self.claims().release(unit, run, self.verb)?;
        if let Some(remote) = self.remote_claims() {
            crate::failpoint::hit("remote-claim-before-release");
            let _ = remote.release(unit, run, self.verb);
        }
        Ok(())
    }

    /// Release `unit`'s claim for `run` once the current transaction's state is saved.
    pub(crate) fn release_after_save(&self, run: &str, unit: &str) {
        self.releases
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((run.to_owned(), unit.to_owned()));
    }

    pub(crate) fn refuse(
        &self,
        code: &'static str,
        reason: impl Into<String>,
        remedy: impl Into<String>,
    ) -> Refusal {
        Refusal::new(self.verb, code, reason, remedy)
    }

    pub(crate) fn lane_dir(&self, run: &str, lane: &str) -> PathBuf {
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

    /// Where attempt `attempt`'s implementer writes its report: `out/report.json` of its activity
    /// from brief layout 5 on, else `<lane>/report-<attempt>.json` (SPEC 21.1).
    pub fn receipt_path(&self, run: &Run, lane: &str, attempt: u32) -> PathBuf {
        self.receipt_path_of(&run.id, run.brief_layout, lane, attempt)
    }

    /// [`Ctx::receipt_path`] of run `run`, admitted with brief layout `layout`.
    pub fn receipt_path_of(&self, run: &str, layout: u32, lane: &str, attempt: u32) -> PathBuf {
        if layout >= ANSWER_LAYOUT {
            self.answer_dir(run, lane, &StepKey::Implement, attempt)
                .join("report.json")
        } else {
            self.lane_dir(run, lane)
                .join(format!("report-{attempt}.json"))
        }
    }

    /// The folder of its own the agent of `step` writes its answer to, and nothing of the loop's
    /// is in (brief layout 5 on; SPEC 21.1, 24.12).
    pub(crate) fn answer_dir(
        &self,
        run: &str,
        lane: &str,
        step: &StepKey,
        attempt: u32,
    ) -> PathBuf {
        self.activity_dir(run, lane, step, attempt).join("out")
    }

    /// Where the agent of `step` answers into, for a run of brief layout `layout`: its
    /// [`Ctx::answer_dir`] from layout 5 on, else its activity folder itself.
    pub(crate) fn answer_folder(
        &self,
        (run, layout): (&str, u32),
        lane: &str,
        step: &StepKey,
        attempt: u32,
    ) -> PathBuf {
        if layout >= ANSWER_LAYOUT {
            self.answer_dir(run, lane, step, attempt)
        } else {
            self.activity_dir(run, lane, step, attempt)
        }
    }

    pub(crate) fn brief_path(&self, run: &str, lane: &str, attempt: u32) -> PathBuf {
        self.lane_dir(run, lane).join(format!("brief-{attempt}.md"))
    }

    pub(crate) fn activity_dir(
        &self,
        run: &str,
        lane: &str,
        step: &StepKey,
        attempt: u32,
    ) -> PathBuf {
        self.lane_dir(run, lane)
            .join("activities")
            .join(format!("{step}-{attempt}"))
    }

    pub(crate) fn worktree_path(&self, lane: &str) -> PathBuf {
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

    pub(crate) fn driver(&self) -> Driver {
        if self.settings.implementer.is_some() {
            Driver::Process
        } else {
            Driver::Host
        }
    }
}

/// The pace `run` keeps: the one it recorded, else (a run from before paces were recorded) the
/// settings' (SPEC 20.11).
pub fn run_pace(ctx: &Ctx<'_>, run: &super::state::Run) -> crate::run::pace::Pace {
    run.pace
        .as_ref()
        .and_then(crate::run::pace::Pace::from_value)
        .unwrap_or_else(|| ctx.settings.pace.clone())
}

#[cfg(test)]
mod tests {
    use super::index_stamp;
    use std::path::Path;

    fn git(dir: &Path, args: &[&str]) {
        crate::git::tests::git_in(dir)(args)
    }

    /// The index stamp of a linked worktree (through its `.git` file) and of a repository's own
    /// folder: the same while nothing writes the index, another after any git that does (a
    /// `git add`, even of nothing new, a `reset`).
    #[test]
    fn an_index_stamp_moves_with_every_write_of_the_index() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("repo");
        std::fs::create_dir(&root).unwrap();
        git(&root, &["init", "-q"]);
        std::fs::write(root.join("a.txt"), "a\n").unwrap();
        git(&root, &["add", "-A"]);
        git(&root, &["commit", "-q", "-m", "one"]);
        let wt = dir.path().join("wt");
        git(
            &root,
            &["worktree", "add", "-q", "-b", "lane", wt.to_str().unwrap()],
        );
        for at in [&root, &wt] {
            let before = index_stamp(at).expect("an index");
            assert_eq!(index_stamp(at), Some(before));
            std::fs::write(at.join("b.txt"), "b\n").unwrap();
            git(at, &["add", "b.txt"]);
            let added = index_stamp(at).expect("an index");
            assert_ne!(added, before, "{}", at.display());
            git(at, &["reset", "-q"]);
            assert_ne!(index_stamp(at), Some(added), "{}", at.display());
        }
        assert_eq!(index_stamp(&dir.path().join("nowhere")), None);
    }
}
