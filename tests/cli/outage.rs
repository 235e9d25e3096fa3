//! A remote that cannot be reached (SPEC 20.19, 20.10): an outage says nothing of a lane's work,
//! so it is waited out with the run's backoff, never a blocked lane to resume by hand: a remote
//! lane's publishes (before its implementer, before remote validators), its receipt's fetch, a
//! landing's push, and a drain's claim of its next unit.

use crate::env::{git_shim, run, TestEnv};
use crate::landing::{add_remote, assert_landed_and_retired, landing_env, remote_rev, rev, PASS};
use crate::loop_e2e::{build, json_lines, run_show, str_of};
use crate::remote_lanes::{remote_env, starts, Remote, AGENT};
use crate::snap::assert_read;
use crate::validation::{events, section};
use serde_json::{json, Value};
use std::path::PathBuf;

/// `lines` as a person reads them, each once, every time on the real clock (when a step runs
/// again) shown as `[UNTIL]`.
pub(crate) fn as_read(lines: &[&str]) -> String {
    let mut shown: Vec<String> = Vec::new();
    for line in lines {
        let mut out = String::new();
        let mut rest = *line;
        while let Some(i) = rest.find(|c: char| c.is_ascii_digit()) {
            let time = rest[i..].get(..20).filter(|t| {
                t.bytes().enumerate().all(|(k, b)| match k {
                    4 | 7 => b == b'-',
                    10 => b == b'T',
                    13 | 16 => b == b':',
                    19 => b == b'Z',
                    _ => b.is_ascii_digit(),
                })
            });
            let skip = time.map_or(1, str::len);
            out.push_str(&rest[..i]);
            out.push_str(if time.is_some() {
                "[UNTIL]"
            } else {
                &rest[i..i + 1]
            });
            rest = &rest[i + skip..];
        }
        out.push_str(rest);
        if !shown.contains(&out) {
            shown.push(out);
        }
    }
    shown.iter().map(|l| format!("{l}\n")).collect()
}

/// A backoff of a second or two, so that a test waits out an outage quickly.
fn brief_backoff() -> Value {
    json!({"backoffSec": 1, "backoffMaxSec": 2})
}

/// `env`'s config with [`brief_backoff`], committed.
fn back_off_briefly(env: &TestEnv) {
    env.patch_config(&json!({ "pace": brief_backoff() }));
    env.commit_all("a short backoff");
}

/// Ends the outage (removes `down`) once the run has logged a backoff for it; true if it did.
fn ends_once_backed_off(env: &TestEnv, down: PathBuf) -> std::thread::JoinHandle<bool> {
    let log = env.root().join(".iced/run/events.jsonl");
    std::thread::spawn(move || {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while std::time::Instant::now() < until {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if text.contains("\"remote_unreachable\"") {
                std::fs::remove_file(&down).unwrap();
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        false
    })
}

/// The remote goes down as the landing pushes `main` (every push, listing and fetch fails, as
/// with no network) and comes back once the run has backed off: the build waits it out and lands
/// in the same round; nothing is blocked, no definition of done runs again.
#[test]
fn a_landing_that_cannot_reach_the_remote_waits_it_out_and_lands() {
    let (env, id) = landing_env(
        crate::landing::AGENT,
        1,
        json!({"mode": "merge", "strategy": "merge", "remote": "origin"}),
    );
    back_off_briefly(&env);
    let origin = add_remote(&env);
    let (down, over) = (env.outside("down"), env.outside("over"));
    let path = git_shim(
        &env.outside("bin"),
        &format!(
            "case \" $* \" in *' push '*refs/heads/main*) [ -e '{over}' ] || : > '{down}';; esac\n\
             if [ -e '{down}' ]; then case \" $* \" in *' push '*|*' ls-remote '*|*' fetch '*) \
             : > '{over}'; echo 'fatal: unable to access the remote: Could not resolve host' >&2; exit 128;; esac; fi\n",
            over = over.display(),
            down = down.display()
        ),
    );
    let outage = ends_once_backed_off(&env, down.clone());
    let out = run(env
        .command()
        .env("PATH", &path)
        .args(["build", &id, "--json"]));
    assert!(outage.join().unwrap(), "the run never backed off: {out:#?}");
    assert_eq!(out.code, 0, "{out:#?}");
    let lines = json_lines(&out);
    let last = lines.last().unwrap();
    assert_eq!(last["status"], "delivered", "{out:#?}");
    let mut waited: Vec<&str> = lines
        .iter()
        .filter_map(|l| l["next"].as_str())
        .filter(|n| n.contains("could not be reached"))
        .collect();
    assert!(
        waited
            .iter()
            .any(|n| n.starts_with("`origin` could not be reached: ")
                && n.ends_with("; the run backs off, then tries `land-1` again")),
        "{waited:#?}"
    );
    // What the landing step says (whether the driver then also reports the wait depends on how
    // long it slept; the receipt's test shows that line).
    waited.retain(|n| n.starts_with("`origin`"));
    assert_read!(&env, "landing_waits_for_the_remote", as_read(&waited));
    let run = str_of(last, "run").to_owned();
    let (record, _) = assert_landed_and_retired(&env, &id, &run, "main");
    let lane = &record["run"]["lanes"][0];
    assert_eq!(lane["land_round"], 1, "{lane:#}");
    assert_eq!(lane["attempt"], 1, "{lane:#}");
    assert_eq!(
        remote_rev(&origin, "refs/heads/main").as_deref(),
        Some(rev(&env, "main").as_str())
    );
}

/// The served repository renamed away (`git daemon` no longer serves it): where it went.
fn take_away(r: &Remote) -> PathBuf {
    let away = r.origin.with_file_name("away.git");
    std::fs::rename(&r.origin, &away).unwrap();
    away
}

/// What `implement step` says (`next`) at most `most` times, until `done` says so.
fn steps(env: &TestEnv, run: &str, most: usize, done: impl Fn(&str) -> bool) -> Vec<String> {
    let mut said = Vec::new();
    for _ in 0..most {
        let out = env.iced_json(&["implement", "step", "--run", run]);
        assert!(out.code == 0 || out.code == 4, "{out:#?}");
        said.push(str_of(&out.json(), "next").to_owned());
        if done(said.last().unwrap()) {
            break;
        }
    }
    said
}

/// A remote that cannot be reached when the lane branch is published before the implementer
/// (SPEC 20.19, 20.10) is not the lane's fault: the run backs off and tries again, no attempt and
/// no crash counted, no agent started; once the remote answers again, the lane goes on and lands.
#[test]
fn a_remote_that_cannot_be_reached_is_waited_for_and_the_lane_goes_on() {
    let r = remote_env(AGENT, false);
    let env = &r.env;
    back_off_briefly(env);
    // Admitted (its claim taken on the remote, which answers then), the call killed right after.
    let admitted = env
        .command()
        .args(["build", &r.id, "--no-wait", "--json"])
        .env("ICED_FAILPOINT", "admit-after-state")
        .output()
        .expect("iced runs");
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&admitted.status),
        Some(9)
    );
    let state: Value = serde_json::from_str(&env.read(".iced/run/state.json")).unwrap();
    let run = state["runs"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    // The remote goes away: `git daemon` no longer serves the repository.
    let away = take_away(&r);
    let said = steps(env, &run, 6, |next| next.contains("runs again from"));
    let backed_off = said.last().unwrap();
    assert!(
        backed_off.starts_with("`implement` did not start: the remote could not be reached: ")
            && backed_off.ends_with(": call again"),
        "{said:#?}"
    );
    // As the host reads it.
    let said: Vec<&str> = said.iter().map(String::as_str).collect();
    assert_read!(env, "remote_unreachable_backs_off", as_read(&said));
    let show = run_show(env, &run);
    let lane = &show["lanes"][0];
    assert_ne!(lane["stage"], "blocked", "{show:#}");
    assert_eq!(lane["attempt"], 1, "{show:#}");
    assert!(starts(&r).is_empty(), "no agent started: {:#?}", r.log());
    let paced: Vec<Value> = events(env)
        .into_iter()
        .filter(|e| e["event"] == "paced")
        .collect();
    assert_eq!(paced.len(), 1, "{paced:#?}");
    assert_eq!(paced[0]["why"], "remote_unreachable");
    assert!(
        str_of(&paced[0], "error").contains("could not be reached"),
        "{paced:#?}"
    );
    // The remote answers again: the run goes on from where it waited and lands.
    std::fs::rename(&away, &r.origin).unwrap();
    let (out, last) = build(env, &r.id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    assert_eq!(str_of(&last, "run"), run);
    assert_eq!(starts(&r).len(), 1, "{:#?}", r.log());
    assert_eq!(
        env.git_out(&["show", "main:src/session.txt"]),
        "refreshed on activity\n"
    );
}

/// The same for remote validators (SPEC 20.19, 20.10): the remote goes away after the receipt (the
/// definition of done takes it away, as an outage would) and comes back once the run has backed
/// off. The build waits it out: the validators are prepared again, no crash counted, and the lane
/// lands in its first attempt.
#[test]
fn remote_validators_wait_for_a_remote_that_cannot_be_reached() {
    let script = format!(
        "{AGENT}{}",
        section("*", "validator", "full", &format!("clone\nreport {PASS}"))
    );
    let r = remote_env(&script, true);
    let env = &r.env;
    let away = r.origin.with_file_name("away.git");
    env.patch_config(&json!({
        "pace": brief_backoff(),
        "verify": {"commands": [{"argv": ["mv", r.origin, away], "timeoutSec": 30}]}
    }));
    env.commit_all("the remote goes away after the receipt");
    // The outage ends once the run has backed off.
    let log = env.root().join(".iced/run/events.jsonl");
    let (origin, gone) = (r.origin.clone(), away.clone());
    let outage = std::thread::spawn(move || {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while std::time::Instant::now() < until {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if text.contains("\"remote_unreachable\"") {
                std::fs::rename(&gone, &origin).unwrap();
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        false
    });
    let (out, last) = build(env, &r.id, &[], 0);
    assert!(outage.join().unwrap(), "the run never backed off: {out:#?}");
    assert_eq!(last["status"], "delivered", "{out:#?}");
    let run = str_of(&last, "run").to_owned();
    let lines = json_lines(&out);
    let redone: Vec<&str> = lines
        .iter()
        .filter_map(|l| l["next"].as_str())
        .filter(|n| n.contains("the remote could not be reached"))
        .collect();
    assert!(!redone.is_empty(), "{out:#?}");
    assert_read!(env, "validators_wait_for_the_remote", as_read(&redone));
    let validators = starts(&r)
        .into_iter()
        .filter(|s| s["role"] == "validator")
        .count();
    assert_eq!(validators, 1, "{:#?}", r.log());
    let show = run_show(env, &run);
    let lane = &show["run"]["lanes"][0];
    assert_eq!(lane["attempt"], 1, "{show:#}");
    assert_eq!(lane["crashes"], 0, "{show:#}");
}

/// What the agent pushed, when the remote cannot be reached at the receipt (SPEC 20.19): no gap
/// and no new attempt over work that is there, but the receipt checked again once the run has
/// backed off; the agent's work is then taken and lands, its agent run once.
#[test]
fn a_receipt_that_cannot_reach_the_remote_checks_again_not_a_new_attempt() {
    let r = remote_env(AGENT, false);
    let env = &r.env;
    back_off_briefly(env);
    // The run goes as far as its running implementer.
    let (out, last) = build(env, &r.id, &["--no-wait"], 0);
    let run = str_of(&last, "run").to_owned();
    assert!(
        out.stdout.contains("the implementer is running"),
        "{out:#?}"
    );
    let ended = env.path(&format!(
        ".iced/run/{run}/{}/activities/implement-1/outcome.json",
        r.id
    ));
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !ended.exists() {
        assert!(std::time::Instant::now() < until, "the agent never ended");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(r.log().contains(&"end role=implementer rc=0".to_owned()));
    // The agent has pushed its work; then the remote goes away.
    let away = take_away(&r);
    let said = steps(env, &run, 3, |_| false);
    assert!(
        said[0].starts_with(
            "what the agent pushed was not fetched: the remote could not be reached: "
        ) && said[0].ends_with("the run backs off, then checks it again: call again"),
        "{said:#?}"
    );
    assert!(
        said[1].starts_with("the remote could not be reached; `receipt` runs again from "),
        "{said:#?}"
    );
    let said: Vec<&str> = said.iter().map(String::as_str).collect();
    assert_read!(env, "receipt_waits_for_the_remote", as_read(&said));
    let show = run_show(env, &run);
    assert_eq!(show["lanes"][0]["stage"], "receipt", "{show:#}");
    assert_eq!(show["lanes"][0]["attempt"], 1, "{show:#}");
    // Back: the receipt takes the agent's work, and the lane lands in its first attempt.
    std::fs::rename(&away, &r.origin).unwrap();
    let (out, last) = build(env, &r.id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    assert_eq!(starts(&r).len(), 1, "{:#?}", r.log());
    assert_eq!(
        env.git_out(&["show", "main:src/session.txt"]),
        "refreshed on activity\n"
    );
    let show = run_show(env, &run);
    assert_eq!(show["run"]["lanes"][0]["attempt"], 1, "{show:#}");
}

/// A drain that meets an outage between two units (SPEC 20.13): the next admit cannot claim its
/// unit on the remote, whose error holds terminal escapes. Its first unit built, the drain waits it out (the pace's backoff, said as
/// it goes) and builds the rest, never stopping with the queue unbuilt.
#[test]
fn a_drain_waits_out_a_remote_it_cannot_reach_between_units() {
    let env = TestEnv::initialized();
    let mut config = crate::env::fake_runner(&env, "commit src/{lane}.txt done\nreport-ok E1 E2\n");
    crate::env::merge_json(
        &mut config,
        &json!({
            "verify": {"independent": false, "commands": []},
            "land": {"mode": "merge", "strategy": "merge", "remote": "origin"},
            "pace": brief_backoff()
        }),
    );
    env.patch_config(&config);
    let first = env.approved_unit("first of two");
    let second = env.approved_unit("second of two");
    env.commit_all("approve");
    add_remote(&env);
    // Down from the first landing on, for every claim on the remote, until the test says over.
    let (landed, hit, over) = (
        env.outside("landed"),
        env.outside("hit"),
        env.outside("over"),
    );
    let path = git_shim(
        &env.outside("bin"),
        &format!(
            "case \" $* \" in *' push '*refs/heads/main*) : > '{landed}';; esac\n\
             if [ -e '{landed}' ] && [ ! -e '{over}' ]; then case \" $* \" in *refs/iced/claims/*) \
             : > '{hit}'; printf 'fatal: unable to access the remote: \\033]0;owned\\007Could not resolve \\033[31mhost\\n' >&2; exit 128;; esac; fi\n",
            landed = landed.display(),
            hit = hit.display(),
            over = over.display()
        ),
    );
    // The outage ends once the drain has said that it waits for the remote (its line, read as it
    // is written), never after a time: on a busy machine the drain may take longer than any
    // grace to get there, and would then find the remote back and never wait.
    let (stdout, stderr) = (env.outside("drain.stdout"), env.outside("drain.stderr"));
    let mut drain = env
        .command()
        .env("PATH", &path)
        .args(["drain"])
        .stdout(std::fs::File::create(&stdout).unwrap())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .expect("iced runs");
    let waits = format!("drain: {second} waits for the remote (");
    let until = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let said_it_waits = || {
        [&stdout, &stderr].iter().any(|f| {
            std::fs::read_to_string(f)
                .unwrap_or_default()
                .lines()
                .any(|l| l.starts_with(&waits))
        })
    };
    let met = loop {
        if said_it_waits() {
            break true;
        }
        if std::time::Instant::now() > until || drain.try_wait().unwrap().is_some() {
            break false;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    std::fs::write(&over, "").unwrap();
    let status = drain.wait().unwrap();
    let out = crate::env::Run {
        code: status.code().unwrap_or(-1),
        stdout: std::fs::read_to_string(&stdout).unwrap(),
        stderr: std::fs::read_to_string(&stderr).unwrap(),
    };
    assert!(
        met && hit.exists(),
        "no claim met the outage, or the drain never said it waits: {out:#?}"
    );
    assert_eq!(out.code, 0, "{out:#?}");
    let said: Vec<&str> = out.stdout.lines().chain(out.stderr.lines()).collect();
    for unit in [&first, &second] {
        let ended = format!("drain: {unit} delivered");
        assert!(said.iter().any(|l| l.starts_with(&ended)), "{out:#?}");
    }
    let waited = said
        .iter()
        .find(|l| l.starts_with(&format!("drain: {second} waits for the remote (")))
        .unwrap_or_else(|| panic!("{out:#?}"));
    assert!(waited.contains("; tried again at "), "{waited}");
    // What the remote said comes with its terminal escapes (a hostile server's `remote:` lines
    // may hold any); none reaches the person's terminal.
    assert!(
        !out.stdout.contains('\u{1b}') && !out.stderr.contains('\u{1b}'),
        "{out:#?}"
    );
    assert_read!(&env, "drain_waits_for_the_remote", as_read(&[waited]));
}
