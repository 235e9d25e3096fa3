//! The shell heuristic, case by case: what it takes as a write, a mutation inside the root, and
//! inline code. The root is `/r`; commands run in `/r` unless they `cd`.

use super::paths::{Class, Owned};
use super::shell::{analyse, candidates, Written};
use std::path::Path;

/// (mutating, inside, inline, written paths as root-relative text; `!` marks a removal).
fn facts(command: &str) -> (bool, bool, bool, Vec<String>) {
    let f = analyse(Path::new("/r"), Path::new("/r"), command);
    let writes = f
        .writes
        .iter()
        .map(|w| {
            let shown = candidates(w)
                .first()
                .map(|(_, rel)| rel.clone())
                .unwrap_or_default();
            if w.destructive {
                format!("!{shown}")
            } else {
                shown
            }
        })
        .collect();
    (f.mutating, f.mutates_inside, f.inline_code, writes)
}

fn reads(command: &str) {
    let (mutating, _, inline, writes) = facts(command);
    assert!(
        !mutating && !inline && writes.is_empty(),
        "{command}: {:?}",
        facts(command)
    );
}

#[test]
fn reading_commands_change_nothing() {
    for command in [
        "ls -la",
        "cat .iced/active",
        "grep -rn status intent/001-a/iced.md",
        "git diff .iced/config.json",
        "git status; git log --oneline | head -5",
        "ls x 2>/dev/null",
        "grep -rn x dir 2>/dev/null | head",
        "git log > /dev/null 2>&1",
        "ls &> /tmp/listing.txt",
        "echo x > $TMPDIR/scratch",
        r#"git commit -m "rm -rf x > y" && git push origin main"#,
        "git add . && git commit -qm 'echo > .iced/active' && git tag v1",
        "sed -n '1,5p' .iced/config.json",
        "[[ a > b ]] && (( 2 > 1 ))",
        "git stash list",
        "cat .iced/run/state.json | python3 -m json.tool",
        "python3 script.py",
        "cargo test --test cli guard",
        "echo 'rm -rf /' # > .iced/active",
    ] {
        reads(command);
    }
}

#[test]
fn redirections_write_their_targets() {
    assert_eq!(
        facts("echo x > out.txt"),
        (true, true, false, vec!["out.txt".into()])
    );
    // Diagnostics are not a change of the repository, but a protected target still counts.
    assert_eq!(
        facts("make 2> build.log"),
        (false, false, false, vec!["build.log".into()])
    );
    assert_eq!(
        facts("echo x > intent/001-a/verify.json"),
        (true, true, false, vec!["intent/001-a/verify.json".into()])
    );
    assert_eq!(
        facts("cd .iced && echo '{}' > config.json"),
        (true, true, false, vec![".iced/config.json".into()])
    );
    assert_eq!(
        facts("cat > notes.md <<'EOF'\nrm -rf / > .iced/active\nEOF"),
        (true, true, false, vec!["notes.md".into()])
    );
    assert_eq!(facts("echo x > /tmp/x.log"), (false, false, false, vec![]));
    assert!(facts("echo x >> /elsewhere/log").0);
    assert!(!facts("echo x >> /elsewhere/log").1);
}

#[test]
fn file_commands_write_their_operands() {
    assert_eq!(
        facts("rm -rf intent/001-a"),
        (true, true, false, vec!["!intent/001-a".into()])
    );
    assert_eq!(
        facts("cp /tmp/x .iced/active").3,
        vec![".iced/active", ".iced/active/x"]
    );
    assert_eq!(
        facts("cp .iced/active /tmp/backup"),
        (true, false, false, vec![])
    );
    assert_eq!(
        facts("mv src/a.rs src/b.rs").3,
        vec!["!src/a.rs", "src/b.rs", "src/b.rs/a.rs"]
    );
    assert_eq!(
        facts("sed -i 's/a/b/' intent/001-a/iced.md").3,
        vec!["intent/001-a/iced.md"]
    );
    assert_eq!(facts("sed -e 's/a/b/' -i.bak x y").3, vec!["x", "y"]);
    assert_eq!(facts("chmod +x run.sh").3, vec!["run.sh"]);
    assert_eq!(facts("chmod 600 .iced/active").3, vec![".iced/active"]);
    assert_eq!(facts("chmod -x run.sh").3, vec!["run.sh"]);
    assert_eq!(
        facts("ln -s ../x .iced/active").3,
        vec![".iced/active", ".iced/active/x"]
    );
    assert_eq!(
        facts("dd if=/dev/zero of=.iced/metrics.jsonl").3,
        vec![".iced/metrics.jsonl"]
    );
    assert_eq!(facts("touch -d yesterday x").3, vec!["x"]);
    assert_eq!(
        facts("mkdir -p src/new"),
        (true, true, false, vec!["src/new".into()])
    );
    assert_eq!(
        facts("truncate -s 0 .iced/metrics.jsonl").3,
        vec![".iced/metrics.jsonl"]
    );
    assert_eq!(facts("sudo rm /r/.iced/active").3, vec!["!.iced/active"]);
    assert_eq!(
        facts("env X=1 tee -a .iced/active < /dev/null").3,
        vec![".iced/active"]
    );
    assert!(facts("curl -sSo .iced/active http://x").0);
    assert_eq!(
        facts("curl -o .iced/active http://x").3,
        vec![".iced/active"]
    );
    assert_eq!(facts("perl -pi -e 's/x/y/' src/a.rs").3, vec!["src/a.rs"]);
}

#[test]
fn expansions_and_globs() {
    // A path that starts with an expansion is taken from the root.
    assert_eq!(facts(r#"rm "$ROOT/.iced/active""#).3, vec!["!.iced/active"]);
    assert_eq!(
        facts("rm ~/.iced/metrics.jsonl").3,
        vec!["!.iced/metrics.jsonl"]
    );
    // A bare expansion names nothing, and its removal counts as inside.
    assert_eq!(facts(r#"rm "$f""#), (true, true, false, vec![]));
    assert_eq!(
        facts("rm intent/*/verify.json").3,
        vec!["!intent/*/verify.json"]
    );
    let w = Written {
        parts: vec!["intent".into(), "\u{1}".into(), "verify.json".into()],
        destructive: false,
    };
    assert_eq!(
        candidates(&w),
        vec![(Class::Owned(Owned::Verify), "intent/*/verify.json".into())]
    );
    let star = Written {
        parts: vec!["\u{1}".into()],
        destructive: true,
    };
    assert_eq!(candidates(&star)[0].0, Class::Owned(Owned::Tree));
    let iced = Written {
        parts: vec![".iced".into(), "\u{1}".into()],
        destructive: false,
    };
    let classes: Vec<Class> = candidates(&iced).into_iter().map(|c| c.0).collect();
    assert!(
        classes.contains(&Class::Owned(Owned::Active)),
        "{classes:?}"
    );
    assert!(classes.contains(&Class::Config), "{classes:?}");
    let code = Written {
        parts: vec!["src".into(), "\u{1}.rs".into()],
        destructive: true,
    };
    assert_eq!(candidates(&code), vec![(Class::Code, "src/*.rs".into())]);
    // `*` does not match dot files, as in the shell.
    let dots = Written {
        parts: vec!["\u{1}".into(), "active".into()],
        destructive: false,
    };
    assert_eq!(candidates(&dots)[0].0, Class::Code);
}

#[test]
fn mutations_outside_the_root_are_not_inside() {
    assert_eq!(
        facts("cd /elsewhere && npm install"),
        (true, false, false, vec![])
    );
    assert_eq!(facts("npm install"), (true, true, false, vec![]));
    assert_eq!(
        facts("git -C /elsewhere reset --hard"),
        (true, false, false, vec![])
    );
    assert_eq!(facts("git reset --hard"), (true, true, false, vec![]));
    assert!(!facts("(cd /elsewhere && rm -rf build) && ls").1);
    assert!(facts("(cd /elsewhere && rm -rf build) && rm x").1);
    assert!(facts("cd /elsewhere; cd /r; rm x").1);
    assert!(!facts("cd /elsewhere || exit 1; rm x").1);
    // If the cd failed, `rm` runs here; which happened is unknown.
    assert!(facts("cd /elsewhere || rm a; rm b").1);
    assert!(facts("cd \"$X\" && rm a").1);
    assert_eq!(
        facts("tar xzf a.tgz -C /elsewhere"),
        (true, false, false, vec![])
    );
    assert_eq!(facts("rm /elsewhere/a /r/b").3, vec!["!b"]);
    assert!(!facts("sed -i s/a/b/ /elsewhere/f").1);
}

#[test]
fn git_commands_by_what_they_do() {
    for command in [
        "git stash",
        "git checkout main",
        "git switch -c x",
        "git pull",
        "git clean -fd",
        "git push --force origin x",
        "git push -fu origin x",
        "git push origin :old",
        "git push origin +main",
        "git push --force-with-lease",
        "git rebase -i HEAD~2",
    ] {
        assert!(facts(command).1, "{command}");
    }
    for command in [
        "git push -u origin x",
        "git fetch",
        "git log -p",
        "git show HEAD:.iced/active",
    ] {
        reads(command);
    }
    assert_eq!(
        facts("git checkout -- .iced/config.json").3,
        vec![".iced/config.json"]
    );
    assert_eq!(
        facts("git -C /r rm -r intent/001-a").3,
        vec!["!intent/001-a"]
    );
}

#[test]
fn inline_code_is_seen_and_read_for_its_writes() {
    assert_eq!(
        facts(r#"python3 -c "open('.iced/active','w').write('x')""#),
        (true, true, true, vec![".iced/active".into()])
    );
    assert_eq!(
        facts(r#"python3 -c "print(1)""#),
        (false, false, true, vec![])
    );
    assert_eq!(
        facts(r#"node -e "require('fs').writeFileSync('intent/001-a/verify.json','{}')""#).3,
        vec!["fs", "intent/001-a/verify.json", "{}"]
    );
    assert_eq!(
        facts("bash -c 'rm -f .iced/metrics.jsonl'"),
        (true, true, true, vec!["!.iced/metrics.jsonl".into()])
    );
    assert_eq!(facts("sh -ec 'ls'"), (false, false, true, vec![]));
    assert_eq!(
        facts(r#"eval "touch x""#),
        (true, true, true, vec!["x".into()])
    );
    assert_eq!(
        facts("echo $(touch y)"),
        (true, true, false, vec!["y".into()])
    );
    assert_eq!(facts("echo `rm z`").3, vec!["!z"]);
    assert_eq!(
        facts("echo 'print(1)' | python3"),
        (true, true, true, vec![])
    );
    assert_eq!(
        facts("python3 - <<'EOF'\nimport os\nos.remove('.iced/active')\nEOF").3,
        vec![".iced/active"]
    );
    assert_eq!(
        facts("perl -ne 'print if /x/' f"),
        (false, false, true, vec![])
    );
    assert_eq!(facts("ls | xargs rm"), (true, true, true, vec![]));
    assert_eq!(
        facts("find . -name '*.pyc' -delete"),
        (true, true, false, vec![])
    );
    assert_eq!(
        facts("find . -name x -exec rm {} \\;"),
        (true, true, false, vec![])
    );
    assert!(!facts("find . -name x -exec cat {} \\;").0);
    assert_eq!(
        facts("ruby -e 'File.write(\"out.txt\", \"text\")'").3,
        vec!["out.txt", "text"]
    );
    assert!(facts("node -r ts-node/register x.ts").2);
}

#[test]
fn malformed_commands_never_panic() {
    for command in [
        "",
        "'",
        "\"",
        "\\",
        "$(",
        "`",
        "${",
        "echo >",
        "cat <<EOF",
        "((",
        "a &&",
        "| |",
        ")",
        "(((",
        "x=$(echo \"$(",
        "cd",
        "popd; popd",
        "rm -- -- -",
        "cp",
        "find . -exec",
        "xargs",
        "git -C",
        "python3 -c",
        "[[ x",
        "echo \u{0}\u{1}\u{2}",
    ] {
        analyse(Path::new("/r"), Path::new("/r"), command);
    }
    // Deep nesting is an unknown mutation, not a stack overflow.
    let deep = "eval ".repeat(50) + "ls";
    assert!(analyse(Path::new("/r"), Path::new("/r"), &deep).mutates_inside);
}
