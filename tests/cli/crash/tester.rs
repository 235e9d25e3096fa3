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
