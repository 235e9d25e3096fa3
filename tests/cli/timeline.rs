//! `iced run show --html <file>` (SPEC 20.6): the demo's run as a timeline page, snapshot; its
//! refusal; and the page loaded by a real browser. The browser is Chromium at `ICED_CHROMIUM`,
//! else `/usr/bin/chromium`, else `chromium` on PATH; without it the browser test says, on stderr
//! whatever the harness captures, that it was skipped (not passed), unless
//! `ICED_REQUIRE_CHROMIUM=1` (set by `.ci/run`, which installs it), where a missing browser fails
//! it.

use crate::env::{run, TestEnv};
use crate::snap::{assert_read, file, refusal_blocks};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `iced demo` in `env` with the pinned clock (every time of its run is its start): the demo's
/// repository.
fn demo(env: &TestEnv) -> PathBuf {
    let dir = env.outside("demo");
    let out = run(env
        .command()
        .args(["demo", "--dir", dir.to_str().unwrap(), "--json"]));
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(out.json()["status"], "landed", "{out:#?}");
    dir.join("greeter")
}

/// `iced run show --html <page>` in the demo's repository: its JSON answer.
fn write_page(env: &TestEnv, repo: &Path, page: &Path) -> Value {
    let out = env.iced_json_in(repo, &["run", "show", "--html", page.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{out:#?}");
    out.json()
}

/// The demo's run (one lane: the implementer, a definition-of-done command, one validator, the
/// landing; one minor finding, noted) as a page: every bar, its hover text and the finding.
#[test]
fn the_demos_timeline_reads_well() {
    let env = TestEnv::new();
    let repo = demo(&env);
    let page = env.outside("timeline.html");
    let said = write_page(&env, &repo, &page);
    assert_eq!(said["bars"], 8, "{said}");
    let html = std::fs::read_to_string(&page).unwrap();
    // Self-contained: nothing is fetched and nothing runs.
    for never in ["<script", "http://", "https://", "src=", "href=", "url("] {
        assert!(!html.contains(never), "the page has `{never}`:\n{html}");
    }
    assert_eq!(html.matches("<rect class=\"bar ").count(), 8, "{html}");
    let mode = std::fs::metadata(&page).unwrap().permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
        0o644
    );
    assert_read!(&env, "timeline_demo", file("timeline.html", &html));
}

/// Text from files (a finding's summary, a model) reaches the page escaped and without terminal
/// escapes: a validator that reports markup cannot put it into the page.
#[test]
fn text_from_files_reaches_the_page_escaped() {
    let env = TestEnv::new();
    let repo = demo(&env);
    // The run's record holds the finding as the validator wrote it; make it hostile.
    let record = std::fs::read_dir(repo.join(".iced/run"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.join("record.json").is_file())
        .unwrap()
        .join("record.json");
    let text = std::fs::read_to_string(&record).unwrap().replace(
        "test.sh does not try a name with a space",
        "<img src=x onerror=alert(1)> \\u001b[31mred\\u001b]8;;https://evil\\u0007",
    );
    let text = text.replace("\"model\": null", "\"model\": \"<b>m</b>\\u001b[2J\"");
    std::fs::write(&record, text).unwrap();
    // And the unit's title, as its file in the checkout says.
    let unit = repo.join("intent/001-greet-ignores-the-name-it-is-given/iced.md");
    let text = std::fs::read_to_string(&unit).unwrap().replace(
        "title: greet ignores the name it is given",
        "title: greet <script>alert(1)</script>\u{1b}]0;owned\u{7} people",
    );
    std::fs::write(&unit, text).unwrap();
    let page = env.outside("timeline.html");
    write_page(&env, &repo, &page);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("&lt;img src=x onerror=alert(1)&gt; red"),
        "{html}"
    );
    assert!(html.contains("model &lt;b&gt;m&lt;/b&gt;,"), "{html}");
    assert!(
        html.contains("greet &lt;script&gt;alert(1)&lt;/script&gt; people"),
        "{html}"
    );
    for never in ["\u{1b}", "\u{7}", "<img", "<b>", "<script", "owned"] {
        assert!(!html.contains(never), "`{never:?}` in the page:\n{html}");
    }
    assert!(!html.contains("https://"), "{html}");
}

/// A destination that is a symlink, or in a directory that is not there, is refused and nothing
/// is written: not the link's target, not a temporary file.
#[test]
fn an_unwritable_destination_is_refused() {
    let env = TestEnv::new();
    let repo = demo(&env);
    let target = env.outside("elsewhere.txt");
    std::fs::write(&target, "kept\n").unwrap();
    let link = env.outside("link.html");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let missing = env.outside("no-such-dir").join("timeline.html");
    let mut blocks = String::new();
    for (what, page) in [
        ("a symlink", &link),
        ("in a directory that is not there", &missing),
    ] {
        let args = ["run", "show", "--html", page.to_str().unwrap()];
        let text = run(env.command_in(&repo).args(args));
        let json = run(env.command_in(&repo).args(args).arg("--json"));
        blocks.push_str(&format!(
            "(the destination is {what})\n{}\n",
            refusal_blocks(&args, &text, &json, 3, "timeline-unwritable")
        ));
    }
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "kept\n");
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    let left: Vec<_> = std::fs::read_dir(env.outside("")).map_or(Vec::new(), |d| {
        d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".tmp-"))
            .collect()
    });
    assert!(left.is_empty(), "{left:?}");
    assert_read!(&env, "refused_timeline-unwritable", blocks);
}

/// The browser, or none (and a note that says the test did not pass, it was skipped); with
/// `ICED_REQUIRE_CHROMIUM=1` a missing browser fails the test instead.
fn chromium() -> Option<PathBuf> {
    let found = std::env::var_os("ICED_CHROMIUM")
        .map(PathBuf::from)
        .or_else(|| Some(PathBuf::from("/usr/bin/chromium")).filter(|p| p.is_file()))
        .or_else(|| {
            std::env::var_os("PATH").and_then(|paths| {
                std::env::split_paths(&paths)
                    .map(|d| d.join("chromium"))
                    .find(|p| p.is_file())
            })
        })
        .filter(|p| p.is_file());
    if found.is_none() {
        crate::skip::skipped(
            &crate::harness::test_name(),
            "ICED_REQUIRE_CHROMIUM",
            "no Chromium at ICED_CHROMIUM, /usr/bin/chromium or on PATH (apt-get install chromium)",
        );
    }
    found
}

/// Chromium, headless, on `url` with `args`: its stdout and stderr.
fn headless(chromium: &Path, home: &Path, args: &[&str], url: &str) -> (String, String) {
    let out = Command::new(chromium)
        .args([
            "--headless",
            // Root (as in CI containers) cannot use Chromium's sandbox.
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!(
            "--user-data-dir={}",
            home.join("profile").display()
        ))
        .args(args)
        .arg(url)
        .env("HOME", home)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("chromium runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "chromium failed:\n{stdout}\n{stderr}");
    (stdout, stderr)
}

/// The demo's timeline in a real browser: it loads, a screenshot is taken, the DOM holds every
/// bar, and the browser reports no error of the page (no console message, no failed load).
#[test]
fn the_demos_timeline_loads_in_chromium() {
    let Some(chromium) = chromium() else {
        return;
    };
    let env = TestEnv::new();
    let repo = demo(&env);
    let page = env.outside("timeline.html");
    let bars = write_page(&env, &repo, &page)["bars"].as_u64().unwrap();
    assert!(bars > 0);
    let url = format!("file://{}", page.display());
    let home = env.outside("browser");
    std::fs::create_dir_all(&home).unwrap();
    let shot = env.outside("timeline.png");
    let (_, shot_err) = headless(
        &chromium,
        &home,
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1100,700",
        ],
        &url,
    );
    let png = std::fs::read(&shot).unwrap_or_else(|e| panic!("no screenshot ({e}):\n{shot_err}"));
    assert!(png.len() > 1000, "a screenshot of {} bytes", png.len());
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    let (dom, dom_err) = headless(&chromium, &home, &["--dump-dom"], &url);
    assert_eq!(
        dom.matches("<rect class=\"bar ").count() as u64,
        bars,
        "{dom}"
    );
    assert!(dom.contains("<svg"), "{dom}");
    for err in [&shot_err, &dom_err] {
        for bad in ["CONSOLE", "Uncaught", "net::ERR", "Not allowed to load"] {
            assert!(!err.contains(bad), "the browser said `{bad}`:\n{err}");
        }
    }
}

/// A live run (host-driven, its implementer handed out and not back yet): the lane and the
/// implementer still run, and the page says so.
#[test]
fn a_live_runs_timeline_shows_what_still_runs() {
    let (env, id) = TestEnv::buildable(serde_json::json!({}));
    let built = env.iced_json(&["build", &id]);
    assert_eq!(built.code, 0, "{built:#?}");
    let page = env.outside("live.html");
    let said = write_page(&env, env.root(), &page);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(said["bars"].as_u64().unwrap() >= 2, "{said}");
    assert!(
        html.contains("<rect class=\"bar running\""),
        "the lane or its implementer runs:\n{html}"
    );
    assert!(
        html.contains("implement, attempt 1, runner unknown, model unknown, cost unknown, still running, running"),
        "{html}"
    );
}
