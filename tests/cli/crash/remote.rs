//! A remote lane (SPEC 20.19) killed after a publish of its lane branch (before the loop knew it
//! pushed) and after its receipt fetched what the agent pushed: the next `iced build` takes the
//! run up, the agent's work lands once, and the remote lane branch ends at the judged head.

use crate::landing::{remote_rev, rev};
use crate::loop_e2e::{build, lane_branch, str_of};
use crate::remote_lanes::{remote_env, starts, AGENT};
use std::os::unix::process::ExitStatusExt;

/// The variable and the failpoint each case kills at: the publish before the implementer starts,
/// the fetch of its push, and the publish of the judged head after it.
const KILLS: &[(&str, &str)] = &[
    ("ICED_FAILPOINT", "remote-after-push"),
    ("ICED_FAILPOINT", "receipt-after-fetch"),
    ("ICED_FAILPOINT", "remote-after-push:2"),
];

#[test]
fn a_remote_lane_killed_after_a_publish_or_a_fetch_lands_once() {
    for &(var, point) in KILLS {
        let r = remote_env(AGENT, false);
        let env = &r.env;
        let main = rev(env, "main");
        let killed = env
            .command()
            .env(var, point)
            .args(["build", &r.id, "--json"])
            .output()
            .expect("iced runs");
        assert_eq!(
            killed.status.signal(),
            Some(9),
            "{point}: not killed: {}",
            String::from_utf8_lossy(&killed.stderr)
        );
        let (out, last) = build(env, &r.id, &[], 0);
        assert_eq!(last["status"], "delivered", "{point}: {out:#?}");
        let _ = str_of(&last, "run");
        // One agent: a kill before its launch leaves a launch that never ran (SPEC 21.4).
        assert_eq!(starts(&r).len(), 1, "{point}: {:#?}", r.log());
        // Landed once: one merge on main, holding the agent's commit once.
        let landed = rev(env, "main");
        assert_eq!(
            remote_rev(&r.origin, "refs/heads/main").as_deref(),
            Some(landed.as_str()),
            "{point}"
        );
        let first_parents = env.git_out(&["rev-list", "--first-parent", &format!("{main}..main")]);
        assert_eq!(first_parents.lines().count(), 1, "{point}: {first_parents}");
        let agents = env.git_out(&["log", "--format=%s", &format!("{main}..main")]);
        assert_eq!(
            agents
                .lines()
                .filter(|s| *s == "fake agent: src/session.txt")
                .count(),
            1,
            "{point}: {agents}"
        );
        assert!(!agents.contains("the report"), "{point}: {agents}");
        // The remote lane branch went with the lane at retire, and the loop's record of it.
        assert_eq!(
            remote_rev(&r.origin, &format!("refs/heads/{}", lane_branch(&r.id))),
            None,
            "{point}"
        );
        assert_eq!(
            env.git_out(&["for-each-ref", "refs/iced/remote/"]),
            "",
            "{point}"
        );
    }
}
