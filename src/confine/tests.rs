//! The rules as a child meets them: real processes, real files, real signals.

use super::*;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

/// `sh -c script` confined by `rules`, `$1` the folder the test works in; its exit status and
/// standard error.
fn confined(rules: &Rules, dir: &Path, script: &str) -> (i32, String) {
    let prepared = prepare(rules).expect("this machine confines (SPEC 24.12 needs Landlock ABI 6)");
    let mut command = Command::new("sh");
    command.args(["-c", script, "sh"]).arg(dir);
    let entry = prepared.entry();
    // SAFETY: `enter` makes two system calls and allocates nothing.
    unsafe {
        command.pre_exec(move || entry.enter().map_err(std::io::Error::from_raw_os_error));
    }
    let out = command.output().expect("sh runs");
    drop(prepared);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_confined_child_writes_beneath_its_paths_and_nowhere_else() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    for folder in ["work", "outside"] {
        std::fs::create_dir(dir.join(folder)).unwrap();
    }
    std::fs::write(dir.join("outside/kept.txt"), "theirs\n").unwrap();
    std::fs::write(dir.join("work/mine.txt"), "mine\n").unwrap();
    let rules = Rules {
        writable: vec![dir.join("work"), dir.join("missing")],
    };
    // Inside: create, write, truncate, rename, remove, make a folder.
    let (code, err) = confined(
        &rules,
        dir,
        r#"set -e
        echo new > "$1/work/new.txt"
        : > "$1/work/mine.txt"
        mkdir "$1/work/sub" && mv "$1/work/new.txt" "$1/work/sub/moved.txt"
        rm "$1/work/sub/moved.txt""#,
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        std::fs::read_to_string(dir.join("work/mine.txt")).unwrap(),
        ""
    );
    // Outside, each way a write can go: every one fails, and the file is as it was.
    for (what, script) in [
        ("create", r#"echo x > "$1/outside/new.txt""#),
        ("write", r#"echo x >> "$1/outside/kept.txt""#),
        ("truncate", r#"truncate -s 0 "$1/outside/kept.txt""#),
        ("remove", r#"rm -f "$1/outside/kept.txt""#),
        (
            "rename out",
            r#"mv "$1/outside/kept.txt" "$1/work/stolen.txt""#,
        ),
        ("link in", r#"ln "$1/outside/kept.txt" "$1/work/hard.txt""#),
        (
            "through a link",
            r#"ln -s "$1/outside" "$1/work/door" && echo x > "$1/work/door/new.txt""#,
        ),
        (
            "by /proc",
            r#"cd "$1/outside" && echo x > /proc/self/cwd/new.txt"#,
        ),
        ("a folder", r#"mkdir "$1/outside/sub""#),
        ("a fifo", r#"mkfifo "$1/outside/fifo""#),
    ] {
        let (code, err) = confined(&rules, dir, script);
        assert_ne!(code, 0, "{what}: the write outside went through");
        assert!(
            // Landlock denies a link or rename across its rules with EXDEV.
            ["ermission denied", "ot permitted", "cross-device"]
                .iter()
                .any(|denied| err.contains(denied)),
            "{what}: {err}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(dir.join("outside/kept.txt")).unwrap(),
        "theirs\n"
    );
    let mut left: Vec<String> = std::fs::read_dir(dir.join("outside"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["kept.txt"]);
    // Reads stay open.
    let (code, err) = confined(&rules, dir, r#"cat "$1/outside/kept.txt" >/dev/null"#);
    assert_eq!(code, 0, "a read failed: {err}");
}

/// A confined process cannot signal its parent (outside its confinement), but can signal what it
/// started itself.
#[test]
fn a_confined_child_signals_only_its_own() {
    let tmp = tempfile::tempdir().unwrap();
    let rules = Rules::default();
    let (code, err) = confined(&rules, tmp.path(), r#"kill -0 $PPID"#);
    assert_ne!(code, 0, "it signalled its parent");
    assert!(err.contains("ot permitted"), "{err}");
    let (code, err) = confined(
        &rules,
        tmp.path(),
        r#"sleep 30 & pid=$!; kill -9 "$pid" && wait "$pid"; [ $? -eq 137 ]"#,
    );
    assert_eq!(code, 0, "it could not signal its own child: {err}");
}

/// What the rules carry is what `spec.json` holds: the paths, nothing else.
#[test]
fn rules_serialise_as_the_writable_paths() {
    let rules = Rules {
        writable: vec!["/w".into()],
    };
    let text = serde_json::to_string(&rules).unwrap();
    assert_eq!(text, r#"{"writable":["/w"]}"#);
    assert_eq!(serde_json::from_str::<Rules>(&text).unwrap(), rules);
}
