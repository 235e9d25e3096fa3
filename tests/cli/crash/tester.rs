//! A build with a test writer (SPEC 20.17) killed (SIGKILL) at each of the test writer's
//! failpoints: the next `iced build` takes the run up and delivers it, the test writer started
//! once (a kill before its supervisor registered never ran it), the implementer once, and the
//! delivery carries both commits.

use super::each_in_parallel;
use crate::loop_e2e::{build, lane_branch};
use crate::tester::{starts, tester_env, GOOD_TESTER};
use std::os::unix::process::ExitStatusExt;

/// The variable and the failpoint each case kills at.
const KILLS: &[(&str, &str)] = &[
    ("ICED_FAILPOINT", "tester-after-record"),
    ("ICED_FAILPOINT", "tester-after-spawn"),
    ("ICED_FAILPOINT", "tester-check-after-record"),
    // The test writer's outcome observed (the implementer's is the first).
    ("ICED_FAILPOINT", "observe-before-record:2"),
];

#[test]
fn a_build_killed_at_each_test_writer_failpoint_starts_it_once() {
    each_in_parallel("tester kills", KILLS, 2, |(var, point)| {
        let (env, id) = tester_env(
            GOOD_TESTER,
            serde_json::json!(["bash tests/session_test.sh"]),
        );
        let out = env
            .command()
            .env(var, point)
            .args(["build", &id, "--json"])
            .output()
            .expect("iced runs");
        assert_eq!(
            out.status.signal(),
            Some(9),
            "{point}: not killed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let (out, last) = build(&env, &id, &[], 0);
        assert_eq!(last["status"], "delivered", "{point}: {out:#?}");
        assert_eq!(starts(&env, "implementer").len(), 1, "{point}");
        assert_eq!(
            starts(&env, "test-writer").len(),
            1,
            "{point}: {:#?}",
            env.agent_starts()
        );
        let log = env.git_out(&["log", "--format=%s", &lane_branch(&id)]);
        assert_eq!(
            log.matches("fake agent: tests/session_test.sh").count(),
            1,
            "{point}: {log}"
        );
        assert_eq!(log.matches("iced: deliver").count(), 1, "{point}: {log}");
    });
}

/// `iced build` of a lane with a test writer killed after a random delay (over how long an
/// uninterrupted build takes here), then built again: delivered once, each agent started once,
/// both commits and one delivery on the branch. The kills fall in the test writer's steps as
/// much as anywhere, which the failpoints above only reach at named places.
#[test]
fn a_build_with_a_test_writer_killed_at_random_moments_delivers_once() {
    let new_case = || {
        tester_env(
            GOOD_TESTER,
            serde_json::json!(["bash tests/session_test.sh"]),
        )
    };
    let (env, id) = new_case();
    let started = std::time::Instant::now();
    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(
        last["status"], "delivered",
        "an uninterrupted build: {out:#?}"
    );
    let full = started.elapsed().as_millis() as u64;
    let seeds: Vec<u64> = (1..=8).map(|i| 0x7E57 + i).collect();
    each_in_parallel("tester random kills", &seeds, 2, |&seed| {
        let delay = super::walks::Rng::new(seed).next() % (full + 1);
        let (env, id) = new_case();
        let mut child = env
            .command()
            .args(["build", &id, "--json"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("iced runs");
        std::thread::sleep(std::time::Duration::from_millis(delay));
        let _ = child.kill();
        let _ = child.wait();
        let context = format!("seed {seed:#x}, killed after {delay} ms of {full}");
        let out = env.iced_json(&["build", &id]);
        // A build that had delivered before its kill is refused as such (`unit-delivered`).
        let delivered = match out.code {
            0 => crate::loop_e2e::last_line(&out)["status"] == "delivered",
            3 => out.stdout.contains("unit-delivered"),
            _ => false,
        };
        assert!(delivered, "{context}: {out:#?}");
        assert_eq!(starts(&env, "implementer").len(), 1, "{context}");
        assert_eq!(
            starts(&env, "test-writer").len(),
            1,
            "{context}: {:#?}",
            env.agent_starts()
        );
        let log = env.git_out(&["log", "--format=%s", &lane_branch(&id)]);
        assert_eq!(
            log.matches("fake agent: tests/session_test.sh").count(),
            1,
            "{context}: {log}"
        );
        assert_eq!(log.matches("iced: deliver").count(), 1, "{context}: {log}");
    });
}
