//! What the loop's git must never start: a program a repository's configuration names (SPEC
//! 24.13). An agent can write that configuration (a lane's worktree shares the checkout's, and so
//! does every sandbox), and the loop's git runs there after the agent has ended: issue 34 found an
//! implementer's `core.hooksPath` running its `post-checkout` in a validator's sandbox and its
//! `post-merge` in the person's checkout. Settings whose name holds a driver's or a remote's name
//! (`filter.<driver>.clean`, `credential.helper`) cannot be switched off from here: the SPEC lists
//! them, and confinement covers them.

use std::process::Command;

/// The settings that make git start a program a configuration file names, each set so that it
/// starts none.
const NO_PROGRAMS: &[(&str, &str)] = &[
    // A folder of no hooks: neither the repository's nor the person's run.
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", "false"),
    // Empty: no askpass program, nor `SSH_ASKPASS` (a `GIT_ASKPASS` in iced's environment,
    // the person's, still wins).
    ("core.askPass", ""),
    // Empty: a patch git would hand to a program fails instead; the loop asks for none.
    ("diff.external", ""),
    // Empty: an alternate's refs go unlisted, and nothing is started to list them.
    ("core.alternateRefsCommand", ""),
    // `ext::<command>` as a remote (a `url.<base>.insteadOf` can make `land.remote` one).
    ("protocol.ext.allow", "never"),
    // `git log` would run `gpg.program` for each signed commit it shows.
    ("log.showSignature", "false"),
];

/// Variables git reads before any configuration file, set for the same reason. A pager and an
/// editor are switched off here, not by `core.pager` or `core.editor`: a `pager.<command>` naming
/// a program wins over `core.pager=cat`, and these win over both. `:` is git's own "edit
/// nothing", which starts no program, not even a shell.
const NO_PROGRAM_VARS: &[(&str, &str)] = &[
    ("GIT_PAGER", "cat"),
    ("GIT_EDITOR", ":"),
    ("GIT_SEQUENCE_EDITOR", ":"),
    ("GIT_TERMINAL_PROMPT", "0"),
];

/// Give `cmd` (a git) the settings above. They go in its environment (`GIT_CONFIG_COUNT`), after
/// any pairs iced's own environment holds, not as `-c` on its command line. git reads them after
/// every configuration file and passes them to every git it starts (the checkout `git worktree
/// add` runs), as it would `-c`; but the command line stays the command, for the person who reads
/// it (SPEC 24.6 names a git that holds a lock by its command line, cut at 200 characters). A
/// caller's own `-c` (an identity, the attributes file) is read after these. An activity gets
/// none of this: its environment is its own, and the agent's git is not the loop's.
pub fn switch_off(cmd: &mut Command) {
    let held = std::env::var("GIT_CONFIG_COUNT").ok();
    cmd.envs(config_env(held.as_deref(), NO_PROGRAMS));
    cmd.envs(NO_PROGRAM_VARS.iter().copied());
    // git takes the first `core.gitProxy` it reads, so the repository's wins over one given
    // last; this variable is read before any, and empty it names no proxy. A person's is kept.
    if std::env::var_os("GIT_PROXY_COMMAND").is_none_or(|v| v.is_empty()) {
        cmd.env("GIT_PROXY_COMMAND", "");
    }
}

/// The variables that give git `pairs` as configuration (`GIT_CONFIG_COUNT`,
/// `GIT_CONFIG_KEY_<n>`, `GIT_CONFIG_VALUE_<n>`) in an environment whose `GIT_CONFIG_COUNT` is
/// `held`: appended after the pairs held, which still apply, and read after them, so ours win.
pub fn config_env(held: Option<&str>, pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    let held: usize = held.and_then(|n| n.parse().ok()).unwrap_or(0);
    let mut vars = vec![(
        "GIT_CONFIG_COUNT".to_owned(),
        (held + pairs.len()).to_string(),
    )];
    for (i, (key, value)) in pairs.iter().enumerate() {
        vars.push((format!("GIT_CONFIG_KEY_{}", held + i), (*key).to_owned()));
        vars.push((
            format!("GIT_CONFIG_VALUE_{}", held + i),
            (*value).to_owned(),
        ));
    }
    vars
}

#[cfg(test)]
mod tests {
    //! Each setting against a repository whose configuration names a program that writes down
    //! that it ran: through the loop's git the program never runs, and through a plain git (the
    //! same commands without the settings) it does, so that each test can fail.

    use super::*;
    use std::path::{Path, PathBuf};
    use std::process::{Output, Stdio};

    /// A folder holding `prog`, a program that appends the name it was started by to `ran`
    /// (links to it under other names tell them apart), and the repositories a test makes.
    struct Trap {
        dir: tempfile::TempDir,
    }

    /// The git a test tries: the loop's ([`crate::git::command`]) or a plain one. Either way the
    /// person's own configuration files are the trap's (none).
    struct Git<'a> {
        loops: bool,
        trap: &'a Trap,
    }

    impl Trap {
        fn new() -> Trap {
            let dir = tempfile::tempdir().unwrap();
            let source = dir.path().join("prog.source");
            let ran = dir.path().join("ran");
            std::fs::write(
                &source,
                format!("#!/bin/sh\necho \"${{0##*/}}\" >> '{}'\n", ran.display()),
            )
            .unwrap();
            // Put in place by a child, never opened for writing here: a file this process holds
            // open for writing is inherited by whatever another test thread forks at that
            // moment, and running it fails ("Text file busy") until that child has exec'd.
            let installed = Command::new("install")
                .args(["-m", "0755"])
                .arg(&source)
                .arg(dir.path().join("prog"))
                .status()
                .unwrap();
            assert!(installed.success());
            Trap { dir }
        }

        fn path(&self, name: &str) -> PathBuf {
            self.dir.path().join(name)
        }

        /// `prog` as `folder/name` (a link to it): its path.
        fn program(&self, folder: &Path, name: &str) -> String {
            std::fs::create_dir_all(folder).unwrap();
            let link = folder.join(name);
            std::os::unix::fs::symlink(self.path("prog"), &link).unwrap();
            link.display().to_string()
        }

        /// `prog` as `name` in the trap's `bin/`: its path.
        fn named(&self, name: &str) -> String {
            self.program(&self.path("bin"), name)
        }

        /// The names `prog` was started by, in order.
        fn ran(&self) -> Vec<String> {
            let text = std::fs::read_to_string(self.path("ran")).unwrap_or_default();
            text.lines().map(str::to_owned).collect()
        }

        /// A plain git that sets a test up, which must succeed; its stdout.
        fn git(&self, dir: &Path, args: &[&str]) -> String {
            Git {
                loops: false,
                trap: self,
            }
            .ok(dir, args)
        }

        /// A repository `name` with an identity and one commit.
        fn repo(&self, name: &str) -> PathBuf {
            let repo = self.path(name);
            std::fs::create_dir(&repo).unwrap();
            self.git(&repo, &["init", "-q", "-b", "main"]);
            self.git(&repo, &["config", "user.name", "t"]);
            self.git(&repo, &["config", "user.email", "t@t.invalid"]);
            self.git(&repo, &["commit", "-q", "--allow-empty", "-m", "one"]);
            repo
        }

        /// A bare repository `name` holding `repo`'s `main`.
        fn remote_of(&self, repo: &Path, name: &str) -> String {
            let remote = self.path(name).display().to_string();
            self.git(repo, &["init", "-q", "--bare", "-b", "main", &remote]);
            self.git(repo, &["push", "-q", &remote, "main"]);
            remote
        }
    }

    impl Git<'_> {
        fn command(&self, dir: &Path) -> Command {
            let mut cmd = if self.loops {
                crate::git::command(dir)
            } else {
                let mut cmd = Command::new("git");
                cmd.current_dir(dir).stdin(Stdio::null());
                cmd
            };
            cmd.env("HOME", self.trap.dir.path())
                .env("XDG_CONFIG_HOME", self.trap.dir.path())
                .env("GIT_CONFIG_NOSYSTEM", "1");
            cmd
        }

        /// `git args` in `dir`, succeeding or not.
        fn run(&self, dir: &Path, args: &[&str]) -> Output {
            self.command(dir).args(args).output().unwrap()
        }

        /// `git args` in `dir`, which must succeed; its stdout.
        fn ok(&self, dir: &Path, args: &[&str]) -> String {
            let out = self.run(dir, args);
            assert!(
                out.status.success(),
                "git {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8_lossy(&out.stdout).into_owned()
        }
    }

    /// `try_it` twice, each time with a new trap: through the loop's git `prog` never runs; through
    /// a plain git it runs under each of `names` (else the test proves nothing).
    fn only_a_plain_git_runs(names: &[&str], try_it: impl Fn(&Trap, &Git)) {
        for loops in [true, false] {
            let trap = Trap::new();
            try_it(&trap, &Git { loops, trap: &trap });
            let ran = trap.ran();
            if loops {
                assert!(ran.is_empty(), "the loop's git ran {ran:?}");
            } else {
                for name in names {
                    assert!(ran.iter().any(|r| r == name), "no `{name}` ran: {ran:?}");
                }
            }
        }
    }

    /// The hooks a test installs: every one a git of the loop could start.
    const HOOKS: &[&str] = &[
        "pre-commit",
        "prepare-commit-msg",
        "commit-msg",
        "post-commit",
        "pre-merge-commit",
        "post-merge",
        "post-checkout",
        "reference-transaction",
        "post-index-change",
        "pre-push",
        "pre-auto-gc",
    ];

    /// Issue 34: an implementer ran `git config core.hooksPath <dir>` with hooks in it, and the
    /// loop's own git ran them. No hook runs, in the folder `core.hooksPath` names or in
    /// `.git/hooks/`, for what the loop does: a commit, a switch, a merge commit, a new worktree
    /// (its checkout is a git of its own), a fast-forward, a push, a status.
    #[test]
    fn no_hook_runs_for_the_loops_git() {
        for in_config in [true, false] {
            let ran = [
                "pre-commit",
                "post-commit",
                "post-merge",
                "post-checkout",
                "reference-transaction",
                "pre-push",
            ];
            only_a_plain_git_runs(&ran, |trap, git| {
                let repo = trap.repo("repo");
                let remote = trap.remote_of(&repo, "remote.git");
                let hooks = if in_config {
                    let hooks = trap.path("hooks");
                    trap.git(
                        &repo,
                        &["config", "core.hooksPath", &hooks.display().to_string()],
                    );
                    hooks
                } else {
                    repo.join(".git/hooks")
                };
                for hook in HOOKS {
                    trap.program(&hooks, hook);
                }
                let worktree = trap.path("worktree").display().to_string();
                std::fs::write(repo.join("a.txt"), "a\n").unwrap();
                git.ok(&repo, &["add", "a.txt"]);
                git.ok(&repo, &["commit", "-q", "-m", "two"]);
                git.ok(&repo, &["switch", "-q", "-c", "lane"]);
                git.ok(&repo, &["commit", "-q", "--allow-empty", "-m", "lane"]);
                git.ok(&repo, &["switch", "-q", "main"]);
                git.ok(&repo, &["merge", "-q", "--no-ff", "--no-edit", "lane"]);
                git.ok(
                    &repo,
                    &["worktree", "add", "--quiet", "--detach", &worktree, "lane"],
                );
                git.ok(&repo, &["switch", "-q", "lane"]);
                git.ok(&repo, &["merge", "--ff-only", "--quiet", "main"]);
                git.ok(&repo, &["push", "-q", &remote, "lane"]);
                git.ok(&repo, &["status", "--porcelain"]);
            });
        }
    }

    /// `core.fsmonitor` naming a program: a status, an add, a commit, a switch ask it nothing.
    #[test]
    fn no_file_system_monitor_is_asked() {
        only_a_plain_git_runs(&["fsmonitor"], |trap, git| {
            let repo = trap.repo("repo");
            trap.git(
                &repo,
                &["config", "core.fsmonitor", &trap.named("fsmonitor")],
            );
            std::fs::write(repo.join("a.txt"), "a\n").unwrap();
            git.ok(&repo, &["--no-optional-locks", "status", "--porcelain"]);
            git.ok(&repo, &["status", "--porcelain"]);
            git.ok(&repo, &["add", "a.txt"]);
            git.ok(&repo, &["commit", "-q", "-m", "two"]);
            git.ok(&repo, &["switch", "-q", "-c", "lane"]);
        });
    }

    /// `core.pager` and `pager.<command>` naming programs: a git whose output is a terminal
    /// (a git of the loop that writes to iced's own) pages with neither.
    #[test]
    fn no_pager_runs_on_a_terminal() {
        only_a_plain_git_runs(&["pager", "pager-log"], |trap, git| {
            let repo = trap.repo("repo");
            trap.git(&repo, &["config", "core.pager", &trap.named("pager")]);
            trap.git(&repo, &["config", "pager.log", &trap.named("pager-log")]);
            for args in [&["log", "--oneline"][..], &["branch"]] {
                let terminal = nix::pty::openpty(None, None).unwrap();
                let out = git
                    .command(&repo)
                    .args(args)
                    .stdout(Stdio::from(terminal.slave))
                    .output()
                    .unwrap();
                // The terminal's other end is held until git has ended, so its writes land.
                drop(terminal.master);
                if git.loops {
                    assert!(out.status.success(), "{args:?}: {out:?}");
                }
            }
        });
    }

    /// `core.editor` and `sequence.editor` naming programs: a commit that asks for its message
    /// and an interactive rebase start neither (the commit fails, having no message).
    #[test]
    fn no_editor_runs() {
        only_a_plain_git_runs(&["editor", "sequence-editor"], |trap, git| {
            let repo = trap.repo("repo");
            trap.git(&repo, &["commit", "-q", "--allow-empty", "-m", "two"]);
            trap.git(&repo, &["config", "core.editor", &trap.named("editor")]);
            let sequence = trap.named("sequence-editor");
            trap.git(&repo, &["config", "sequence.editor", &sequence]);
            git.run(&repo, &["commit", "-q", "--allow-empty"]);
            git.run(&repo, &["rebase", "-q", "-i", "HEAD~1"]);
        });
    }

    /// `diff.external` naming a program: a patch fails rather than start it, and the names and
    /// statuses the loop asks for still come.
    #[test]
    fn no_external_diff_runs() {
        only_a_plain_git_runs(&["diff"], |trap, git| {
            let repo = trap.repo("repo");
            std::fs::write(repo.join("a.txt"), "a\n").unwrap();
            trap.git(&repo, &["add", "a.txt"]);
            trap.git(&repo, &["commit", "-q", "-m", "two"]);
            std::fs::write(repo.join("a.txt"), "b\n").unwrap();
            trap.git(&repo, &["config", "diff.external", &trap.named("diff")]);
            assert_eq!(git.ok(&repo, &["diff", "--name-only"]), "a.txt\n");
            let names = git.ok(&repo, &["diff", "--name-status", "HEAD~1", "HEAD"]);
            assert_eq!(names, "A\ta.txt\n");
            let patch = git.run(&repo, &["diff"]);
            if git.loops {
                assert!(!patch.status.success(), "a patch was made: {patch:?}");
            }
        });
    }

    /// `core.askPass` naming a program: a remote asking for a user name gets no answer (git's
    /// credential fill, which a push or fetch over https goes through), and none is asked on the
    /// terminal either.
    #[test]
    fn no_askpass_runs() {
        only_a_plain_git_runs(&["askpass"], |trap, git| {
            let repo = trap.repo("repo");
            trap.git(&repo, &["config", "core.askPass", &trap.named("askpass")]);
            let mut fill = git.command(&repo);
            fill.args(["credential", "fill"])
                .env("GIT_TERMINAL_PROMPT", "0");
            let asked =
                super::super::with_input(fill, &[], b"protocol=https\nhost=example.invalid\n\n");
            if git.loops {
                assert!(asked.is_err(), "{asked:?}");
            }
        });
    }

    /// `core.alternateRefsCommand` naming a program, in a repository that borrows objects from
    /// another: a fetch lists the alternate's refs without it.
    #[test]
    fn no_alternate_refs_command_runs() {
        only_a_plain_git_runs(&["alternate-refs"], |trap, git| {
            let lender = trap.repo("lender");
            let repo = trap.repo("repo");
            let remote = trap.remote_of(&repo, "remote.git");
            let objects = lender.join(".git/objects");
            std::fs::write(
                repo.join(".git/objects/info/alternates"),
                format!("{}\n", objects.display()),
            )
            .unwrap();
            let command = trap.named("alternate-refs");
            trap.git(&repo, &["config", "core.alternateRefsCommand", &command]);
            git.ok(&repo, &["fetch", "-q", &remote, "main"]);
        });
    }

    /// A remote `url.<base>.insteadOf` turns into `ext::<program>`, with `protocol.ext.allow`
    /// saying always: the loop's fetch and ls-remote refuse the transport.
    #[test]
    fn no_ext_remote_runs() {
        only_a_plain_git_runs(&["ext"], |trap, git| {
            let repo = trap.repo("repo");
            let remote = trap.remote_of(&repo, "remote.git");
            trap.git(&repo, &["remote", "add", "origin", &remote]);
            trap.git(&repo, &["config", "protocol.ext.allow", "always"]);
            let ext = format!("url.ext::{} %S .insteadOf", trap.named("ext"));
            trap.git(&repo, &["config", &ext, &remote]);
            let fetched = git.run(&repo, &["fetch", "-q", "origin"]);
            let listed = git.run(&repo, &["ls-remote", "origin"]);
            if git.loops {
                assert!(!fetched.status.success(), "{fetched:?}");
                assert!(!listed.status.success(), "{listed:?}");
            }
        });
    }

    /// `log.showSignature` with `gpg.program` naming a program: a `git log` of a signed commit
    /// (the loop reads logs by format) checks no signature.
    #[test]
    fn no_signature_is_checked_in_a_log() {
        only_a_plain_git_runs(&["gpg"], |trap, git| {
            let repo = trap.repo("repo");
            let tree = trap.git(&repo, &["rev-parse", "HEAD^{tree}"]);
            let signed = format!(
                "tree {}\nauthor t <t@t.invalid> 1 +0000\ncommitter t <t@t.invalid> 1 +0000\ngpgsig -----BEGIN PGP SIGNATURE-----\n \n x\n -----END PGP SIGNATURE-----\n\nsigned\n",
                tree.trim()
            );
            let commit = super::super::with_input(
                Git { loops: false, trap }.command(&repo),
                &["hash-object", "-t", "commit", "-w", "--stdin"],
                signed.as_bytes(),
            )
            .unwrap();
            trap.git(&repo, &["update-ref", "refs/heads/main", &commit]);
            trap.git(&repo, &["config", "log.showSignature", "true"]);
            trap.git(&repo, &["config", "gpg.program", &trap.named("gpg")]);
            let log = git.ok(&repo, &["log", "--format=%s"]);
            if git.loops {
                assert_eq!(log, "signed\n");
            }
        });
    }

    /// `core.gitProxy` naming a program: a `git://` remote is reached without it (here: refused,
    /// nothing listens).
    #[test]
    fn no_git_proxy_runs() {
        only_a_plain_git_runs(&["proxy"], |trap, git| {
            let repo = trap.repo("repo");
            trap.git(&repo, &["config", "core.gitProxy", &trap.named("proxy")]);
            let listed = git.run(&repo, &["ls-remote", "git://127.0.0.1:9/none"]);
            assert!(!listed.status.success(), "{listed:?}");
        });
    }

    /// A repository's configuration cannot override a setting: git reads the loop's after it.
    #[test]
    fn a_repositorys_configuration_overrides_none() {
        let trap = Trap::new();
        let repo = trap.repo("repo");
        let program = trap.named("any");
        for (key, _) in NO_PROGRAMS {
            trap.git(&repo, &["config", key, &program]);
        }
        let git = Git {
            loops: true,
            trap: &trap,
        };
        for (key, value) in NO_PROGRAMS {
            let read = git.run(&repo, &["config", "--get", key]);
            assert_eq!(
                String::from_utf8_lossy(&read.stdout),
                format!("{value}\n"),
                "{key}"
            );
        }
    }

    /// Pairs the environment holds keep their numbers and still apply; ours come after them.
    #[test]
    fn config_env_appends_after_the_pairs_held() {
        let vars = config_env(Some("2"), &[("a.b", "c"), ("d.e", "")]);
        let want = [
            ("GIT_CONFIG_COUNT", "4"),
            ("GIT_CONFIG_KEY_2", "a.b"),
            ("GIT_CONFIG_VALUE_2", "c"),
            ("GIT_CONFIG_KEY_3", "d.e"),
            ("GIT_CONFIG_VALUE_3", ""),
        ];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        assert_eq!(vars, want);
        assert_eq!(config_env(Some("not a number"), &[])[0].1, "0");
        assert_eq!(config_env(None, &[("a.b", "c")])[0].1, "1");
    }
}
