//! The crash suite, for claims on the remote (SPEC 24.9.1): `iced` killed right after pushing a
//! claim, right after taking over a stale one, and after a run's end was saved but before its
//! claim on the remote was deleted. Each leaves a claim of its checkout on the remote that no live
//! run holds: the other machine still obeys it (it is younger than the lease), and the next build
//! of the checkout that left it replaces it at once, with one run and one agent.

use crate::claims_remote::{Machines, LONG_AGO, NOW};
use crate::loop_e2e::{last_line, str_of, wait_for};
use serde_json::json;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;

/// `cmd` was killed by its failpoint.
fn killed(mut cmd: std::process::Command) {
    let out = cmd.output().expect("iced runs");
    assert_eq!(out.status.signal(), Some(9), "not killed: {out:?}");
}

/// The orphan on the remote names `orphan`, which no state holds as live; the other machine is
/// refused by it; the checkout that left it builds again: a new run, and the claim names it.
fn replaced_by_its_own_checkout(m: &Machines, dir: &Path, other: &Path, unit: &str, orphan: &str) {
    let refused = m
        .env
        .iced_json_in(other, &["build", unit, "--no-wait"])
        .refused(3, "unit-claimed");
    assert!(str_of(&refused, "reason").contains(orphan), "{refused}");
    let out = m
        .iced(dir, NOW, None, &["build", unit, "--no-wait"])
        .output()
        .unwrap();
    let out = crate::env::Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert_eq!(out.code, 0, "{out:#?}");
    let run = str_of(&last_line(&out), "run").to_owned();
    assert_ne!(run, orphan);
    assert_eq!(m.remote_claim(unit).unwrap()["run"], run.as_str());
    wait_for("the agent to start", || !m.env.agent_starts().is_empty());
    m.env.iced_json_in(dir, &["run", "abandon", &run]).ok();
    assert!(m.remote_claim(unit).is_none(), "the claim outlived its run");
}

#[test]
fn killed_after_pushing_a_claim_the_next_build_replaces_its_own_orphan() {
    let m = Machines::new(1, "hang\n", json!({}));
    let unit = m.units[0].clone();
    let mut cmd = m.iced(m.a(), NOW, None, &["build", &unit, "--no-wait"]);
    cmd.env("ICED_FAILPOINT", "remote-claim-after-push");
    killed(cmd);
    let orphan = m.remote_claim(&unit).expect("the claim was pushed");
    assert!(m.runs(m.a()).is_empty(), "no run was recorded");
    let orphan = str_of(&orphan, "run").to_owned();
    replaced_by_its_own_checkout(&m, m.a(), &m.b, &unit, &orphan);
}

#[test]
fn killed_after_taking_over_a_stale_claim_the_next_build_replaces_its_own_orphan() {
    let m = Machines::new(1, "hang\n", json!({}));
    let unit = m.units[0].clone();
    m.build_killed_at(&m.b, LONG_AGO, &unit, "remote-claim-after-push");
    let stale = m.remote_claim(&unit).unwrap();
    let mut cmd = m.iced(m.a(), NOW, None, &["build", &unit, "--no-wait"]);
    cmd.env("ICED_FAILPOINT", "remote-claim-after-takeover");
    killed(cmd);
    let taken = m.remote_claim(&unit).unwrap();
    assert_ne!(taken["run"], stale["run"], "the stale claim was taken over");
    assert!(m.runs(m.a()).is_empty(), "no run was recorded");
    let orphan = str_of(&taken, "run").to_owned();
    replaced_by_its_own_checkout(&m, m.a(), &m.b, &unit, &orphan);
}

#[test]
fn killed_before_deleting_an_ended_run_s_claim_the_next_build_replaces_it() {
    let m = Machines::new(1, "hang\n", json!({}));
    let unit = m.units[0].clone();
    let out = m
        .iced(m.a(), NOW, None, &["build", &unit, "--no-wait"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let run = m.runs(m.a()).pop().unwrap();
    wait_for("the agent to start", || !m.env.agent_starts().is_empty());
    let mut cmd = m.iced(m.a(), NOW, None, &["run", "abandon", &run]);
    cmd.env("ICED_FAILPOINT", "remote-claim-before-release");
    killed(cmd);
    assert!(
        !m.env.claim_path(&unit).exists(),
        "the local claim is released"
    );
    assert_eq!(
        m.remote_claim(&unit).expect("the remote claim is left")["run"],
        run.as_str()
    );
    replaced_by_its_own_checkout(&m, m.a(), &m.b, &unit, &run);
}

/// Killed after renewing a run's claim on the remote and before recording the renewal: the next
/// step renews it again (a claim of the run is renewed whatever its value), nothing is lost, the
/// agent runs on and none starts again.
#[test]
fn killed_after_renewing_a_claim_the_next_step_renews_it_again() {
    use crate::claims_renew::{a_builds, machines, HALF};
    let m = machines();
    let unit = m.units[0].clone();
    let run = a_builds(&m, &unit);
    let mut cmd = m.iced(m.a(), HALF, None, &["implement", "step", "--run", &run]);
    cmd.env("ICED_FAILPOINT", "claims-after-renew");
    killed(cmd);
    assert_eq!(
        m.remote_claim(&unit).unwrap()["at"],
        HALF,
        "renewed on the remote"
    );
    let claims = |m: &Machines| {
        let state: serde_json::Value =
            serde_json::from_slice(&std::fs::read(m.a().join(".iced/run/state.json")).unwrap())
                .unwrap();
        state["runs"][&run]["claims"].clone()
    };
    assert_eq!(
        claims(&m),
        serde_json::Value::Null,
        "the renewal was not recorded"
    );

    let later = "2026-09-30T10:32:00Z";
    let out = m
        .iced(m.a(), later, None, &["implement", "step", "--run", &run])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(m.remote_claim(&unit).unwrap()["at"], later);
    assert_eq!(claims(&m), json!({"at": later}));
    assert_eq!(
        m.env.agent_starts().len(),
        1,
        "the agent runs on; none started again"
    );
    m.env.iced_json_in(m.a(), &["run", "abandon", &run]).ok();
    assert!(
        m.remote_claim(&unit).is_none(),
        "the claim outlived its run"
    );
}
