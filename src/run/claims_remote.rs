//! Claims on the remote (SPEC 24.9.1): with `land.remote` set, a unit's claim is also a ref on
//! that remote, `refs/iced/claims/<unit>`, so that machines which share nothing but the remote
//! never build one unit twice. The ref points at a commit of the empty tree whose message holds
//! the claim (`iced claim <unit>`, a blank line, the claim as JSON); no checkout is touched.
//!
//! Every change of a claim ref is a compare-and-swap push: created with a lease saying "must not
//! exist", taken over or deleted with a lease naming the value judged. The remote's ref update
//! checks the old value under its own lock, so of several pushes naming one value exactly one
//! wins. Admits of one checkout are put in a row by `.iced/run/admit.lock` (held from reading the
//! remote claim to recording the run), so a claim this checkout pushed and has not yet recorded
//! is never taken for its orphan. This module never judges another machine's run (only the age
//! of its claim against the lease), never forces a ref without naming what it replaces, and
//! never runs a shell: every ref and remote is an argv word.

use super::claims::{blocks, Claim, Standing};
use super::state::{ensure_dir, RunPaths, State};
use crate::refusal::Refusal;
use chrono::{DateTime, Utc};
use std::collections::BTreeSet;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

/// Where claim refs live on the remote.
pub const REF_PREFIX: &str = "refs/iced/claims/";

/// A claim commit's message is small; a larger one is not a claim.
const MESSAGE_LIMIT: usize = 64 * 1024;

/// The claims of one checkout on its `land.remote`.
#[derive(Debug, Clone)]
pub struct RemoteClaims {
    remote: String,
    lease: Duration,
    /// The checkout's root, canonical: git runs here, and a claim naming it (on this host) is
    /// this checkout's.
    root: PathBuf,
    host: String,
    /// The empty tree every claim commit has, once made.
    tree: std::sync::OnceLock<String>,
}

/// A claim found on the remote: the commit its ref points at, and what the commit says.
#[derive(Debug, Clone)]
pub struct Held {
    pub sha: String,
    pub claim: Claim,
}

/// What taking the remote claims of a new run came to.
#[derive(Debug)]
pub enum RemoteTaken {
    /// Every unit is claimed on the remote: `(unit, commit)` for each, to undo on a refusal.
    All(Vec<(String, String)>),
    /// A live run of this checkout holds the run's own unit: resume it.
    LiveHere(String),
}

impl RemoteClaims {
    pub fn new(root: &Path, remote: &str, lease: Duration) -> RemoteClaims {
        RemoteClaims {
            remote: remote.to_owned(),
            lease,
            root: root.canonicalize().unwrap_or_else(|_| root.to_owned()),
            host: super::claims::host_name(),
            tree: std::sync::OnceLock::new(),
        }
    }

    fn reference(unit: &str) -> String {
        format!("{REF_PREFIX}{unit}")
    }

    fn git(&self, args: &[&str]) -> Result<Output, String> {
        crate::git::command(&self.root)
            .args(args)
            .output()
            .map_err(|e| format!("git could not start: {e}"))
    }

    /// Whether `claim` is a claim of this checkout (its host and root are ours).
    fn is_mine(&self, claim: &Claim) -> bool {
        claim.host == self.host && claim.root.as_deref() == Some(self.root.as_path())
    }

    /// The claim ref of `unit` on the remote, read now, with the commit it names (fetched, writing
    /// no ref and no `FETCH_HEAD`, so that calls at once do not contend for a lock).
    pub fn read(&self, unit: &str, step: &str) -> Result<Option<Held>, Refusal> {
        let reference = Self::reference(unit);
        // A ref moved between listing and fetching leaves an object we lack: list again.
        for _ in 0..5 {
            let Some(sha) = self.ls_remote(&reference, unit, step)? else {
                return Ok(None);
            };
            if !self.has_object(&sha) {
                let out = self
                    .fetch_no_ref(&reference)
                    .map_err(|e| self.unreachable(unit, &e, step))?;
                if !out.status.success() {
                    // Deleted in between: there is no claim now, or another one. Ask again.
                    continue;
                }
                if !self.has_object(&sha) {
                    continue;
                }
            }
            let claim = self.parse(&sha, unit, step)?;
            return Ok(Some(Held { sha, claim }));
        }
        Err(Refusal::new(
            step,
            "unit-claimed",
            format!(
                "the claim on `{unit}` on the remote `{}` changed every time this call read it",
                self.remote
            ),
            "other machines are claiming and releasing it right now: build again",
        ))
    }

    /// The units whose claim refs are on the remote now: one `ls-remote` of them all. `unit` is
    /// the one a refusal names (the unit about to be claimed).
    pub fn listed(&self, unit: &str, step: &str) -> Result<BTreeSet<String>, Refusal> {
        Ok(self.listed_with_commits(unit, step)?.into_keys().collect())
    }

    /// [`RemoteClaims::listed`], with the commit each claim ref names.
    fn listed_with_commits(
        &self,
        unit: &str,
        step: &str,
    ) -> Result<std::collections::BTreeMap<String, String>, Refusal> {
        let pattern = format!("{REF_PREFIX}*");
        let out = self
            .git(&["ls-remote", "--", &self.remote, &pattern])
            .map_err(|e| self.unreachable(unit, &e, step))?;
        if !out.status.success() {
            return Err(self.unreachable(unit, &crate::git::what_failed(&out.stderr), step));
        }
        let text = String::from_utf8_lossy(&out.stdout);
        Ok(text
            .lines()
            .filter_map(|line| {
                let (sha, name) = line.split_once('\t')?;
                Some((name.strip_prefix(REF_PREFIX)?.to_owned(), sha.to_owned()))
            })
            .collect())
    }

    /// What an admit of `unit` would be refused now because of its claim on the remote, when a
    /// claim there holds it: a run of this checkout that `state` says lives, or another machine's
    /// run within its lease (an expired or orphaned claim is the admit's to take over).
    pub fn held_against(
        &self,
        unit: &str,
        state: &State,
        step: &str,
    ) -> Result<Option<Refusal>, Refusal> {
        let Some(held) = self.read(unit, step)? else {
            return Ok(None);
        };
        Ok(self
            .holds(&held, state)
            .then(|| self.claimed(unit, &held, step)))
    }

    /// Whether `held` keeps a new run of its unit out: this checkout's, when its state says the
    /// run lives (admits here are in a row, so a claim not in the state is an orphan, not one
    /// being recorded); another machine's, until its lease runs out.
    fn holds(&self, held: &Held, state: &State) -> bool {
        if self.is_mine(&held.claim) {
            blocks(Standing::of(state, &held.claim.run))
        } else {
            !self.expired(&held.claim)
        }
    }

    /// The commit `reference` names on the remote, if it exists.
    fn ls_remote(
        &self,
        reference: &str,
        unit: &str,
        step: &str,
    ) -> Result<Option<String>, Refusal> {
        let out = self
            .git(&["ls-remote", "--", &self.remote, reference])
            .map_err(|e| self.unreachable(unit, &e, step))?;
        if !out.status.success() {
            return Err(self.unreachable(unit, &crate::git::what_failed(&out.stderr), step));
        }
        let text = String::from_utf8_lossy(&out.stdout);
        Ok(text.lines().find_map(|line| {
            let (sha, name) = line.split_once('\t')?;
            (name == reference).then(|| sha.to_owned())
        }))
    }

    /// Fetch what the remote's `reference` points at, writing no ref and no `FETCH_HEAD`, so
    /// concurrent calls never fight over a lock.
    fn fetch_no_ref(&self, reference: &str) -> Result<std::process::Output, String> {
        self.git(&[
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            "--refmap=",
            "--",
            &self.remote,
            reference,
        ])
    }

    fn has_object(&self, sha: &str) -> bool {
        self.git(&["cat-file", "-e", &format!("{sha}^{{commit}}")])
            .is_ok_and(|o| o.status.success())
    }

    /// The claim a claim commit's message holds; anything else is refused, naming the ref.
    fn parse(&self, sha: &str, unit: &str, step: &str) -> Result<Claim, Refusal> {
        let unreadable = |why: &str| {
            Refusal::new(
                step,
                "unit-claimed",
                format!(
                    "`{}` on the remote `{}` is not a claim iced can read ({why})",
                    Self::reference(unit),
                    self.remote
                ),
                format!(
                    "if no machine is building `{unit}`, delete that ref (`git push {} :{}`) and build again",
                    self.remote,
                    Self::reference(unit)
                ),
            )
        };
        let out = self
            .git(&["cat-file", "commit", sha])
            .map_err(|e| unreadable(&e))?;
        if !out.status.success() || out.stdout.len() > MESSAGE_LIMIT {
            return Err(unreadable("not a small commit"));
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let message = text.split_once("\n\n").map(|(_, m)| m).unwrap_or("");
        let Some((title, body)) = message.split_once("\n\n") else {
            return Err(unreadable("its message has no claim"));
        };
        if title.trim() != format!("iced claim {unit}") {
            return Err(unreadable("its message names another unit"));
        }
        serde_json::from_str::<Claim>(body.trim()).map_err(|e| unreadable(&e.to_string()))
    }

    /// A commit of the empty tree whose message is `claim` on `unit`.
    fn commit(&self, unit: &str, claim: &Claim, step: &str) -> Result<String, Refusal> {
        let tree = match self.tree.get() {
            Some(tree) => tree.clone(),
            None => {
                let tree = self
                    .git(&["mktree"])
                    .ok()
                    .filter(|o| o.status.success())
                    .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
                    .ok_or_else(|| crate::refusal::io_error(step, "git mktree failed"))?;
                self.tree.get_or_init(|| tree).clone()
            }
        };
        let message = format!(
            "iced claim {unit}\n\n{}\n",
            serde_json::to_string_pretty(claim).expect("a claim serialises")
        );
        let out = self
            .git(&[
                "-c",
                "user.name=iced",
                "-c",
                "user.email=iced@localhost",
                "commit-tree",
                "--no-gpg-sign",
                "-m",
                &message,
                &tree,
            ])
            .map_err(|e| crate::refusal::io_error(step, e))?;
        if !out.status.success() {
            return Err(crate::refusal::io_error(
                step,
                format!("git commit-tree: {}", crate::git::what_failed(&out.stderr)),
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// Set the claim ref of `unit` to `new` (`None`: delete it) if the remote still holds
    /// `expect` there (`None`: no ref). False when another push won.
    fn swap(
        &self,
        unit: &str,
        new: Option<&str>,
        expect: Option<&str>,
        step: &str,
    ) -> Result<bool, Refusal> {
        self.swap_many(&[(unit, new, expect)], step)
            .pop()
            .expect("one answer a swap")
    }

    /// Several swaps in one push, each as [`RemoteClaims::swap`] says, answered in their order:
    /// the remote checks each ref's lease on its own, so one lost race fails no other.
    fn swap_many(
        &self,
        swaps: &[(&str, Option<&str>, Option<&str>)],
        step: &str,
    ) -> Vec<Result<bool, Refusal>> {
        let mut args: Vec<String> = vec!["push".into(), "--porcelain".into(), "--no-verify".into()];
        for (unit, _, expect) in swaps {
            let reference = Self::reference(unit);
            args.push(format!(
                "--force-with-lease={reference}:{}",
                expect.unwrap_or("")
            ));
        }
        args.push("--".into());
        args.push(self.remote.clone());
        for (unit, new, _) in swaps {
            args.push(format!("{}:{}", new.unwrap_or(""), Self::reference(unit)));
        }
        let out = match self.git(&args.iter().map(String::as_str).collect::<Vec<_>>()) {
            Ok(out) => out,
            Err(e) => {
                return swaps
                    .iter()
                    .map(|(unit, ..)| Err(self.unreachable(unit, &e, step)))
                    .collect()
            }
        };
        let stdout = String::from_utf8_lossy(&out.stdout);
        swaps
            .iter()
            .map(|(unit, ..)| {
                let reference = Self::reference(unit);
                // The porcelain line of the ref says what happened to it (`*` created, `+`
                // forced, `-` deleted, `!` refused), whatever else the push said or its exit code.
                let line = stdout.lines().find(|l| {
                    l.split('\t')
                        .nth(1)
                        .and_then(|spec| spec.rsplit(':').next())
                        == Some(reference.as_str())
                });
                if line
                    .is_some_and(|l| matches!(l.chars().next(), Some('*' | '+' | '-' | ' ' | '=')))
                    || (line.is_none() && out.status.success())
                {
                    return Ok(true);
                }
                match line.filter(|l| l.starts_with('!')) {
                    // The value was not the one named (seen before sending, or by the remote as
                    // it updated the ref under its lock): another push won.
                    Some(line) if lost_race(line) => Ok(false),
                    Some(line) => {
                        Err(self.unreachable(unit, line.trim_start_matches('!').trim(), step))
                    }
                    None => {
                        Err(self.unreachable(unit, &crate::git::what_failed(&out.stderr), step))
                    }
                }
            })
            .collect()
    }

    /// Claim every one of `units` on the remote for `claim`'s run (SPEC 24.9.1). `state` is this
    /// checkout's, read under the admit lock. On a refusal the claims made here are deleted
    /// again.
    pub fn take(
        &self,
        units: &[String],
        claim: &Claim,
        state: &State,
        step: &str,
    ) -> Result<RemoteTaken, Refusal> {
        let mut made: Vec<(String, String)> = Vec::new();
        for (i, unit) in units.iter().enumerate() {
            match self.take_one(unit, claim, state, step) {
                Ok(Ok(sha)) => made.push((unit.clone(), sha)),
                Ok(Err(held)) => {
                    self.undo(&made, step);
                    if i == 0 && self.is_mine(&held.claim) {
                        return Ok(RemoteTaken::LiveHere(held.claim.run));
                    }
                    return Err(self.claimed(unit, &held, step));
                }
                Err(refusal) => {
                    self.undo(&made, step);
                    return Err(refusal);
                }
            }
        }
        Ok(RemoteTaken::All(made))
    }

    /// Claim one unit: the claim commit, or the claim that blocks it.
    fn take_one(
        &self,
        unit: &str,
        claim: &Claim,
        state: &State,
        step: &str,
    ) -> Result<Result<String, Held>, Refusal> {
        let sha = self.commit(unit, claim, step)?;
        // Each round needs another caller to win a swap in between: bounded.
        for _ in 0..5 {
            let Some(held) = self.read(unit, step)? else {
                if self.swap(unit, Some(&sha), None, step)? {
                    crate::failpoint::hit("remote-claim-after-push");
                    return Ok(Ok(sha));
                }
                continue;
            };
            if held.sha == sha {
                return Ok(Ok(sha));
            }
            if self.holds(&held, state) {
                return Ok(Err(held));
            }
            if self.swap(unit, Some(&sha), Some(&held.sha), step)? {
                crate::failpoint::hit("remote-claim-after-takeover");
                return Ok(Ok(sha));
            }
        }
        Err(Refusal::new(
            step,
            "unit-claimed",
            format!("`{unit}` was claimed on the remote `{}` by other callers while this one tried to claim it", self.remote),
            "build again",
        ))
    }

    /// Whether another machine's claim is older than the lease (a claim whose time does not
    /// read is judged by nothing else: it is taken as expired only if it is not in the future).
    fn expired(&self, claim: &Claim) -> bool {
        match DateTime::parse_from_rfc3339(&claim.at) {
            Ok(at) => {
                let age = crate::clock::now().signed_duration_since(at.with_timezone(&Utc));
                age.to_std().is_ok_and(|age| age >= self.lease)
            }
            Err(_) => false,
        }
    }

    /// When a claim's lease runs out.
    fn lease_end(&self, claim: &Claim) -> String {
        DateTime::parse_from_rfc3339(&claim.at)
            .ok()
            .and_then(|at| {
                chrono::Duration::from_std(self.lease).ok().map(|lease| {
                    (at.with_timezone(&Utc) + lease)
                        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                })
            })
            .unwrap_or_else(|| "never (its time does not read)".to_owned())
    }

    /// Renew `claim`'s run's claims on `units` (SPEC 24.9.1): each claim of the run and this
    /// checkout is replaced by `claim` (its `at` now) with a swap naming the value read; a claim
    /// ref that is gone is taken again and the unit read at `target` on the remote; another's
    /// claim, one iced cannot read, or a unit landed at `target` is lost. All at once (one
    /// listing, one fetch of what is not here, one push a hundred refs), so a run of a thousand
    /// units renews in a few round trips; a unit whose swap lost a race is renewed on its own.
    /// Stops at the first unit the remote could not be reached for (or git failed for).
    pub fn renew(
        &self,
        units: &[String],
        claim: &Claim,
        target: Option<&str>,
        step: &str,
    ) -> Renewed {
        let mut renewed = Renewed::default();
        let first = match self.renew_at_once(units, claim, step) {
            Ok(first) => first,
            Err(r) => {
                renewed.unreachable = Some(r.reason);
                return renewed;
            }
        };
        for (unit, kept) in first {
            let kept = match kept {
                Ok(Kept::Raced) => self.renew_one(unit, claim, step),
                other => other,
            };
            let kept = kept.and_then(|kept| match (kept, target) {
                (Kept::Retaken, Some(target)) => {
                    self.done_on_target(target, std::slice::from_ref(unit), step)
                }
                _ => Ok(()),
            });
            match kept {
                Ok(()) => {}
                Err(r) if matches!(r.code, "unit-claimed" | "unit-done-on-remote") => {
                    renewed.lost.insert(unit.clone(), r.reason);
                }
                // The remote not reached, or git failing here: nothing is known of the claim.
                Err(r) => {
                    renewed.unreachable = Some(r.reason);
                    break;
                }
            }
        }
        renewed
    }

    /// The first pass of [`RemoteClaims::renew`]: what became of each unit's claim.
    fn renew_at_once<'u>(
        &self,
        units: &'u [String],
        claim: &Claim,
        step: &str,
    ) -> Result<Vec<Found<'u>>, Refusal> {
        let Some(first) = units.first() else {
            return Ok(Vec::new());
        };
        let listed = self.listed_with_commits(first, step)?;
        // The claim commits this checkout lacks come in one fetch, checked for once more after it.
        let absent: BTreeSet<&String> = units
            .iter()
            .filter(|u| listed.get(*u).is_some_and(|sha| !self.has_object(sha)))
            .collect();
        if !absent.is_empty() {
            let references: Vec<String> = absent.iter().map(|u| Self::reference(u)).collect();
            let mut args = vec![
                "fetch",
                "--quiet",
                "--no-tags",
                "--no-write-fetch-head",
                "--refmap=",
                "--",
                self.remote.as_str(),
            ];
            args.extend(references.iter().map(String::as_str));
            // A ref deleted since the listing fails the fetch: those units are renewed one by
            // one below, which reads them again.
            self.git(&args)
                .map_err(|e| self.unreachable(first, &e, step))?;
        }
        let mut found = Vec::new();
        let mut swaps: Vec<(&'u String, String, Option<String>)> = Vec::new();
        for unit in units {
            let Some(held) = listed.get(unit) else {
                swaps.push((unit, self.commit(unit, claim, step)?, None));
                continue;
            };
            if absent.contains(unit) && !self.has_object(held) {
                found.push((unit, Ok(Kept::Raced)));
                continue;
            }
            match self.parse(held, unit, step) {
                Err(unreadable) => found.push((unit, Err(unreadable))),
                Ok(c) if c.run == claim.run && self.is_mine(&c) => {
                    let sha = self.commit(unit, claim, step)?;
                    if sha == *held {
                        // Renewed already, this second, by another call of the run.
                        found.push((unit, Ok(Kept::Renewed)));
                    } else {
                        swaps.push((unit, sha, Some(held.clone())));
                    }
                }
                Ok(c) => {
                    let held = Held {
                        sha: held.clone(),
                        claim: c,
                    };
                    found.push((unit, Err(self.claimed(unit, &held, step))));
                }
            }
        }
        for chunk in swaps.chunks(100) {
            let asked: Vec<(&str, Option<&str>, Option<&str>)> = chunk
                .iter()
                .map(|(u, new, expect)| (u.as_str(), Some(new.as_str()), expect.as_deref()))
                .collect();
            for ((unit, _, expect), swapped) in chunk.iter().zip(self.swap_many(&asked, step)) {
                let kept = swapped.map(|won| match (won, expect) {
                    (false, _) => Kept::Raced,
                    (true, None) => Kept::Retaken,
                    (true, Some(_)) => Kept::Renewed,
                });
                found.push((*unit, kept));
            }
            crate::failpoint::hit("claims-after-renew");
        }
        Ok(found)
    }

    /// Renew the claim on one unit, reading it again each round: renewed, or taken again (its
    /// ref was gone); a refusal says why it is lost, or that the remote was not reached.
    fn renew_one(&self, unit: &str, claim: &Claim, step: &str) -> Result<Kept, Refusal> {
        let sha = self.commit(unit, claim, step)?;
        // Each round needs another caller to win a swap in between: bounded.
        for _ in 0..5 {
            let expect = match self.read(unit, step)? {
                None => None,
                Some(held) if held.sha == sha => return Ok(Kept::Renewed),
                Some(held) if held.claim.run == claim.run && self.is_mine(&held.claim) => {
                    Some(held.sha)
                }
                Some(held) => return Err(self.claimed(unit, &held, step)),
            };
            if self.swap(unit, Some(&sha), expect.as_deref(), step)? {
                return Ok(if expect.is_none() {
                    Kept::Retaken
                } else {
                    Kept::Renewed
                });
            }
        }
        Err(self.unreachable(unit, "its claim changed every time this call read it", step))
    }

    /// Best effort: delete the claims this call made before it was refused. What is left names a
    /// run no state holds, which the next admit here replaces.
    pub fn undo(&self, made: &[(String, String)], step: &str) {
        for (unit, sha) in made {
            let _ = self.swap(unit, None, Some(sha), step);
        }
    }

    /// Delete the claim on `unit` when `run` of this checkout holds it (the run ended, or its lane
    /// left it), with a lease naming the value read.
    pub fn release(&self, unit: &str, run: &str, step: &str) -> Result<(), Refusal> {
        if let Some(held) = self.read(unit, step)? {
            if held.claim.run == run && self.is_mine(&held.claim) {
                self.swap(unit, None, Some(&held.sha), step)?;
            }
        }
        Ok(())
    }

    /// A unit of `units` that is `done` or `accepted` at `<remote>/<target>`: another machine
    /// built and landed it (SPEC 24.9.1). Read after the claims are taken: a claim is released
    /// only after its run's landing was pushed.
    pub fn done_on_target(
        &self,
        target: &str,
        units: &[String],
        step: &str,
    ) -> Result<(), Refusal> {
        let reference = format!("refs/heads/{target}");
        let Some(sha) = self.ls_remote(&reference, &units[0], step)? else {
            return Ok(());
        };
        if !self.has_object(&sha) {
            let out = self
                .fetch_no_ref(&reference)
                .map_err(|e| self.unreachable(&units[0], &e, step))?;
            if !out.status.success() {
                return Err(self.unreachable(
                    &units[0],
                    &crate::git::what_failed(&out.stderr),
                    step,
                ));
            }
        }
        for unit in units {
            let out = self
                .git(&[
                    "cat-file",
                    "blob",
                    &format!("{sha}:./intent/{unit}/iced.md"),
                ])
                .map_err(|e| self.unreachable(unit, &e, step))?;
            if !out.status.success() {
                continue; // Not there: the unit is new to this checkout.
            }
            let parsed = crate::unit::parse::parse_unit(&String::from_utf8_lossy(&out.stdout));
            let status = parsed.frontmatter.str("status").unwrap_or("");
            if matches!(status, "done" | "accepted") {
                let short = &sha[..sha.len().min(12)];
                return Err(Refusal::new(
                    step,
                    "unit-done-on-remote",
                    format!(
                        "`{unit}` is {status} at `{}/{target}` ({short}): another machine built and landed it",
                        self.remote
                    ),
                    format!(
                        "bring the target in (`git pull {} {target}`): the unit is closed there",
                        self.remote
                    ),
                ));
            }
        }
        Ok(())
    }

    /// `unit-claimed` for a claim on the remote.
    fn claimed(&self, unit: &str, held: &Held, step: &str) -> Refusal {
        let c = &held.claim;
        let root = c
            .root
            .as_ref()
            .map(|r| format!(", checkout `{}`", r.display()))
            .unwrap_or_default();
        let (reason_tail, remedy) = if self.is_mine(&held.claim) {
            (
                String::new(),
                format!(
                    "step that run instead (`iced implement step --run {}`), or end it: `iced run abandon {}`",
                    c.run, c.run
                ),
            )
        } else {
            (
                format!("; its lease of {} s runs out at {}", self.lease.as_secs_f64(), self.lease_end(c)),
                "another machine is building it: wait for that run to end (its end deletes the claim), or, if that machine is gone, build again once the lease has run out (`land.claimLeaseSec`); `iced drain` passes it over".to_owned(),
            )
        };
        Refusal::new(
            step,
            "unit-claimed",
            format!(
                "`{unit}` is claimed on the remote `{}` by run `{}` of host {}{root} (session {}, pid {}, since {}){reason_tail}",
                self.remote,
                c.run,
                c.host,
                c.session.as_deref().unwrap_or("none"),
                c.pid,
                c.at
            ),
            remedy,
        )
    }

    /// `claim-remote-unreachable`: without the remote's claim another machine could build the
    /// unit too, so no claim is taken at all.
    fn unreachable(&self, unit: &str, why: &str, step: &str) -> Refusal {
        Refusal::new(
            step,
            "claim-remote-unreachable",
            format!(
                "the remote `{}` (`land.remote`) could not be reached to claim `{unit}`: {why}",
                self.remote
            ),
            format!(
                "check the remote and the network (`git ls-remote {}`), then build again; a claim on this machine alone would let another machine build `{unit}` too",
                self.remote
            ),
        )
    }
}

/// A unit of a renewal, and what became of its claim (a refusal: why it is lost, or that the
/// remote was not reached).
type Found<'u> = (&'u String, Result<Kept, Refusal>);

/// What became of one claim in a renewal.
#[derive(Debug, Clone, Copy)]
enum Kept {
    Renewed,
    /// Its ref was gone, and the run took the claim again.
    Retaken,
    /// Another push changed the ref first: read and renewed again on its own.
    Raced,
}

/// What renewing a run's claims on the remote found (SPEC 24.9.1).
#[derive(Debug, Default)]
pub struct Renewed {
    /// The units whose claim the run lost, and why.
    pub lost: std::collections::BTreeMap<String, String>,
    /// Why the remote could not be reached, when it could not (the renewal stopped there).
    pub unreachable: Option<String>,
}

/// The lock that puts the admits of one checkout in a row while they claim on the remote
/// (`.iced/run/admit.lock`): held from reading a remote claim to recording the run, and never
/// while anything else runs.
pub fn admit_lock(paths: &RunPaths, step: &str, wait: Duration) -> Result<File, Refusal> {
    ensure_dir(&paths.dir, step)?;
    super::claims::lock_within(
        &paths.dir.join("admit.lock"),
        wait,
        step,
        "the admit lock",
        "another `iced build` of this checkout is claiming a unit on the remote; run the command again",
    )
}

/// Whether a `git push --porcelain` line refusing a ref says another push changed it first: the
/// lease did not hold (`stale info`), or the remote found another old value, or the ref locked,
/// as it updated it. A hook's refusal is not a lost race.
fn lost_race(line: &str) -> bool {
    line.contains("[rejected] (stale info)")
        || (line.contains("[remote rejected]")
            && ["lock", "old value", "failed to update", "stale"]
                .iter()
                .any(|why| line.contains(why)))
}
