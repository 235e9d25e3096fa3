//! A run renews its claims on the remote (SPEC 24.9.1): a run longer than `land.claimLeaseSec`
//! keeps its units, and a run that lost one (not stepped while its lease ran out, and another
//! machine took the unit over) learns it at its next step, stops what that unit's lane runs and
//! blocks it, so nothing of it lands. Two clones of one bare remote are two machines
//! (`claims_remote::Machines`); iced's clock is pinned per call, so the lease passes between two
//! calls.

use crate::claims_remote::{claim_on, other_machine, Machines};
use crate::env::{git_shim, run, Run};
use crate::loop_e2e::{last_line, str_of, wait_for};
use crate::snap::assert_read;
use serde_json::{json, Value};
use std::path::Path;

/// When machine A admits its run; the lease is an hour.
pub(crate) const ADMITTED: &str = "2026-09-30T10:00:00Z";
/// Half the lease later: the run's claims are due.
pub(crate) const HALF: &str = "2026-09-30T10:31:00Z";
/// The first lease has run out.
const PAST: &str = "2026-09-30T11:01:00Z";
const LATER: &str = "2026-09-30T11:02:00Z";

pub(crate) fn machines() -> Machines {
    Machines::new(1, "hang\n", json!({"land": {"claimLeaseSec": 3600}}))
}

/// `iced <args>` in `dir` at `now`, in text (`--json` when `json`).
fn at(m: &Machines, dir: &Path, now: &str, args: &[&str], json: bool) -> Run {
    let mut cmd = m.env.command_in(dir);
    cmd.env("ICED_NOW", now).args(args);
    if json {
        cmd.arg("--json");
    }
    run(&mut cmd)
}

/// `iced implement step --run <run>` in machine A at `now`, in text.
fn step(m: &Machines, now: &str, run: &str) -> Run {
    at(m, m.a(), now, &["implement", "step", "--run", run], false)
}

/// Machine A builds the unit at [`ADMITTED`]; its agent hangs. The run's id.
pub(crate) fn a_builds(m: &Machines, unit: &str) -> String {
    let out = at(m, m.a(), ADMITTED, &["build", unit, "--no-wait"], true);
    assert_eq!(out.code, 0, "{out:#?}");
    wait_for("the agent to start", || m.env.agent_starts().len() == 1);
    str_of(&last_line(&out), "run").to_owned()
}

/// `claims_renewed` events of `dir`'s runs.
fn renewals(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join(".iced/run/events.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["event"] == "claims_renewed")
        .collect()
}

/// A run stepped once half its lease has passed renews its claim: another machine that tries the
/// unit after the first lease ran out is refused, told the renewed lease's end. Without the
/// renewal the other machine would take the unit over and build it a second time.
#[test]
fn a_run_longer_than_its_lease_keeps_its_claim() {
    let m = machines();
    let unit = m.units[0].clone();
    let run_a = a_builds(&m, &unit);
    assert_eq!(m.remote_claim(&unit).unwrap()["at"], ADMITTED);

    // Before half the lease, a step renews nothing.
    let early = at(
        &m,
        m.a(),
        "2026-09-30T10:29:00Z",
        &["implement", "step", "--run", &run_a],
        true,
    );
    assert!(
        !str_of(&early.json(), "next").contains("renewed"),
        "{early:#?}"
    );
    assert_eq!(m.remote_claim(&unit).unwrap()["at"], ADMITTED);

    let renewed = step(&m, HALF, &run_a);
    assert_eq!(renewed.code, 0, "{renewed:#?}");
    let claim = m.remote_claim(&unit).unwrap();
    assert_eq!(claim["at"], HALF, "{claim}");
    assert_eq!(claim["run"], run_a.as_str());
    let events = renewals(m.a());
    assert_eq!(events.len(), 1, "{events:#?}");
    assert_eq!(events[0]["units"], json!([unit]));
    assert_eq!(events[0]["lost"], json!({}));
    let shown = at(&m, m.a(), HALF, &["run", "show", &run_a], false);
    assert!(
        shown
            .stdout
            .contains(&format!("claims on the remote: renewed at {HALF}\n")),
        "{shown:#?}"
    );
    // Asked again at once, nothing more is renewed: the next renewal is half a lease away.
    let again = step(&m, HALF, &run_a);
    assert_eq!(renewals(m.a()).len(), 1, "{again:#?}");

    let refused =
        at(&m, &m.b, PAST, &["build", &unit, "--no-wait"], true).refused(3, "unit-claimed");
    let reason = str_of(&refused, "reason");
    assert!(reason.contains(&run_a), "{reason}");
    assert!(
        reason.contains("runs out at 2026-09-30T11:31:00Z"),
        "{reason}"
    );
    assert!(m.runs(&m.b).is_empty());
    assert_eq!(m.env.agent_starts().len(), 1, "one agent, on A");
    assert_read!(
        &m.env,
        "claims_renewed_step",
        format!("{}{}", renewed.stdout, again.stdout)
    );
    at(&m, m.a(), HALF, &["run", "abandon", &run_a], true);
}

/// A run not stepped while its lease ran out loses its unit to another machine; its next step
/// renews, finds the other machine's claim, stops its own agent and blocks the lane, naming the
/// holder; a resume while the other machine still builds blocks again. Once the other run has
/// ended (its claim deleted), a resume takes the claim again and the lane goes on.
#[test]
fn a_run_that_lost_its_claim_blocks_and_goes_on_only_once_the_claim_is_its_own_again() {
    let m = machines();
    let unit = m.units[0].clone();
    let run_a = a_builds(&m, &unit);

    // B tries after the lease ran out, A not having stepped: B takes the unit over.
    let taken = at(&m, &m.b, PAST, &["build", &unit, "--no-wait"], true);
    assert_eq!(taken.code, 0, "{taken:#?}");
    let run_b = str_of(&last_line(&taken), "run").to_owned();
    assert_eq!(m.remote_claim(&unit).unwrap()["run"], run_b.as_str());
    wait_for("B's agent to start", || m.env.agent_starts().len() == 2);

    let renew = step(&m, LATER, &run_a);
    let block = step(&m, LATER, &run_a);
    let text = at(&m, m.a(), LATER, &["run", "show", &run_a], false).stdout;
    assert!(
        text.contains(&format!("claims on the remote: lost `{unit}`: `{unit}` is claimed on the remote `origin` by run `{run_b}`")),
        "{text}"
    );
    let shown = at(&m, m.a(), LATER, &["run", "show", &run_a], true).json();
    assert_eq!(shown["status"], "blocked", "{shown:#}");
    let reason = shown["lanes"][0]["reason"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        reason.contains(&run_b) && reason.contains("was lost"),
        "{reason}"
    );
    // B's claim is untouched, and A's agent was stopped.
    assert_eq!(m.remote_claim(&unit).unwrap()["run"], run_b.as_str());
    let outcome = m.a().join(format!(
        ".iced/run/{run_a}/{unit}/activities/implement-1/outcome.json"
    ));
    wait_for("A's agent to be stopped", || outcome.exists());
    let outcome: Value = serde_json::from_slice(&std::fs::read(&outcome).unwrap()).unwrap();
    assert_eq!(outcome["stopped"], true, "{outcome:#}");
    assert_read!(
        &m.env,
        "claim_lost_blocks_the_lane",
        format!("{}{}", renew.stdout, block.stdout)
    );

    // Resumed while B still builds: blocked again, nothing started.
    at(&m, m.a(), LATER, &["run", "resume", &run_a], true);
    for _ in 0..3 {
        step(&m, LATER, &run_a);
    }
    let shown = at(&m, m.a(), LATER, &["run", "show", &run_a], true).json();
    assert_eq!(shown["status"], "blocked", "{shown:#}");
    assert_eq!(m.env.agent_starts().len(), 2, "no agent started on A again");

    // B's run ends (its claim is deleted); A resumed takes the claim again and goes on.
    at(&m, &m.b, LATER, &["run", "abandon", &run_b], true);
    assert!(m.remote_claim(&unit).is_none());
    at(&m, m.a(), LATER, &["run", "resume", &run_a], true);
    for _ in 0..6 {
        step(&m, LATER, &run_a);
        if m.env.agent_starts().len() == 3 {
            break;
        }
    }
    assert_eq!(m.remote_claim(&unit).unwrap()["run"], run_a.as_str());
    wait_for("A's agent to start again", || {
        m.env.agent_starts().len() == 3
    });
    at(&m, m.a(), LATER, &["run", "abandon", &run_a], true);
    assert!(
        m.remote_claim(&unit).is_none(),
        "the claim outlived its run"
    );
}

/// A remote that cannot be reached when the claims are due backs the run off (a `paced` event,
/// why `remote_unreachable`), and nothing moves until they are renewed: the agent's finished work
/// waits unread, since the lane could otherwise land what another machine took over. Once the
/// remote answers and the backoff has passed, the claims are renewed and the lane lands.
#[test]
fn claims_that_cannot_be_renewed_hold_every_lane_until_they_are() {
    let m = Machines::new(
        1,
        crate::landing::AGENT,
        json!({"land": {"claimLeaseSec": 3600}, "pace": {"backoffSec": 1, "backoffMaxSec": 2}}),
    );
    let unit = m.units[0].clone();
    let out = at(&m, m.a(), ADMITTED, &["build", &unit, "--no-wait"], true);
    assert_eq!(out.code, 0, "{out:#?}");
    let run_a = str_of(&last_line(&out), "run").to_owned();
    let finished = m.a().join(format!(
        ".iced/run/{run_a}/{unit}/activities/implement-1/outcome.json"
    ));
    wait_for("the agent to finish", || finished.exists());

    let down = m.env.outside("down");
    std::fs::write(&down, "").unwrap();
    let path = git_shim(
        &m.env.outside("bin"),
        &format!(
            "if [ -e '{}' ]; then case \" $* \" in *' push '*|*' ls-remote '*|*' fetch '*) \
             echo 'fatal: unable to access the remote: Could not resolve host' >&2; exit 128;; esac; fi\n",
            down.display()
        ),
    );
    let step = || {
        run(m
            .env
            .command_in(m.a())
            .env("PATH", &path)
            .env("ICED_NOW", HALF)
            .args(["implement", "step", "--run", &run_a]))
    };
    let mut said = vec![step(), step()];
    let shown = at(&m, m.a(), HALF, &["run", "show", &run_a], true).json();
    assert_eq!(shown["lanes"][0]["stage"], "implement", "{shown:#}");
    let events = std::fs::read_to_string(m.a().join(".iced/run/events.jsonl")).unwrap();
    assert!(
        events
            .lines()
            .any(|l| l.contains("\"paced\"") && l.contains("\"remote_unreachable\"")),
        "{events}"
    );
    assert!(renewals(m.a()).is_empty());

    std::fs::remove_file(&down).unwrap();
    wait_for("the claims to be renewed", || {
        said.push(step());
        !renewals(m.a()).is_empty()
    });
    let text: Vec<&str> = said
        .iter()
        .flat_map(|r| r.stdout.lines())
        .filter(|l| l.starts_with("next:"))
        .collect();
    assert_read!(&m.env, "claims_not_renewed", crate::outage::as_read(&text));
    let built = at(&m, m.a(), HALF, &["build", &unit], true);
    assert_eq!(built.code, 0, "{built:#?}");
    assert_eq!(last_line(&built)["status"], "delivered", "{built:#?}");
    assert_eq!(m.env.agent_starts().len(), 1);
}

/// A project run claims its own unit and each child's; it renews them all in one push. A child
/// another machine took over while the run was not stepped is lost alone: its lane blocks, the
/// other lanes go on, and every other claim is the run's, renewed. Discarding the lost lane
/// leaves the other machine's claim alone.
#[test]
fn a_project_run_renews_every_claim_in_one_push_and_a_lost_child_blocks_alone() {
    let p = crate::project::Project::new(
        &["alpha", "beta", "gamma"],
        &[],
        "hang\n",
        json!({"land": {"claimLeaseSec": 3600}, "pace": {"lanes": 3, "agents": 3}}),
    );
    let env = &p.env;
    let remote = env.outside("remote.git");
    let out =
        run(env
            .command()
            .env("ICED_NOW", ADMITTED)
            .args(["build", &p.id, "--no-wait", "--json"]));
    assert_eq!(out.code, 0, "{out:#?}");
    let run_a = str_of(&last_line(&out), "run").to_owned();
    // `--no-wait` ends at the first launch; the steps after it start the other lanes.
    wait_for("three agents", || {
        at_in(env, ADMITTED, &["implement", "step", "--run", &run_a]);
        env.agent_starts().len() == 3
    });

    // Machine B, a clone of the remote, takes `beta` over once the first lease has run out.
    let b = other_machine(env, &remote);
    let beta = p.children[1].clone();
    let taken =
        run(env
            .command_in(&b)
            .env("ICED_NOW", PAST)
            .args(["build", &beta, "--no-wait", "--json"]));
    assert_eq!(taken.code, 0, "{taken:#?}");
    let run_b = str_of(&last_line(&taken), "run").to_owned();

    let pushes = env.outside("pushes");
    let path = git_shim(
        &env.outside("bin"),
        &format!(
            "case \" $* \" in *' push '*) echo \"$*\" >> '{}';; esac\n",
            pushes.display()
        ),
    );
    let renew = run(env
        .command()
        .env("PATH", &path)
        .env("ICED_NOW", LATER)
        .args(["implement", "step", "--run", &run_a]));
    assert!(
        renew.stdout.contains("renewed (4 units), and 1 claim lost"),
        "{renew:#?}"
    );
    let pushed = std::fs::read_to_string(&pushes).unwrap();
    assert_eq!(pushed.lines().count(), 1, "one push: {pushed}");
    for unit in [&p.id, &p.children[0], &p.children[2]] {
        let claim = claim_on(&remote, unit).unwrap();
        assert_eq!(
            (claim["run"].as_str(), claim["at"].as_str()),
            (Some(run_a.as_str()), Some(LATER))
        );
    }
    assert_eq!(claim_on(&remote, &beta).unwrap()["run"], run_b.as_str());

    at_in(env, LATER, &["implement", "step", "--run", &run_a]);
    let shown = env.iced_json(&["run", "show", &run_a]).ok().json();
    let stage = |lane: &str| crate::project::Project::lane(&shown, lane)["stage"].clone();
    assert_eq!(stage(&beta), "blocked", "{shown:#}");
    assert_eq!(stage(&p.children[0]), "implement", "{shown:#}");
    assert_eq!(stage(&p.children[2]), "implement", "{shown:#}");
    assert_eq!(shown["status"], "running", "{shown:#}");
    // Dropping the lost lane leaves the other machine's claim where it is.
    env.iced_json(&["run", "discard", &run_a, &beta]).ok();
    assert_eq!(claim_on(&remote, &beta).unwrap()["run"], run_b.as_str());
    env.iced_json_in(&b, &["run", "abandon", &run_b]).ok();
    env.iced_json(&["run", "abandon", &run_a]).ok();
}

/// `iced implement step <args>` in the test's checkout at `now`.
fn at_in(env: &crate::env::TestEnv, now: &str, args: &[&str]) -> Run {
    run(env.command().env("ICED_NOW", now).args(args))
}

/// Someone forces the run's claim ref to a commit that holds no claim: the renewal does not take
/// it for the run's, nor replace it, nor stop; the unit is lost, its lane blocks naming the ref,
/// and the ref is left as it was for a person to look at.
#[test]
fn a_claim_ref_forced_to_what_is_no_claim_is_lost_not_overwritten() {
    let m = machines();
    let unit = m.units[0].clone();
    let run_a = a_builds(&m, &unit);
    let head = m.env.git_out(&["rev-parse", "HEAD"]);
    let reference = format!("refs/iced/claims/{unit}");
    m.env.git(&[
        "push",
        "-q",
        "origin",
        &format!("+{}:{reference}", head.trim()),
    ]);

    let renew = step(&m, HALF, &run_a);
    assert!(renew.stdout.contains("and 1 claim lost"), "{renew:#?}");
    step(&m, HALF, &run_a);
    let shown = at(&m, m.a(), HALF, &["run", "show", &run_a], true).json();
    assert_eq!(shown["status"], "blocked", "{shown:#}");
    let reason = shown["lanes"][0]["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains(&format!(
            "`{reference}` on the remote `origin` is not a claim iced can read"
        )),
        "{reason}"
    );
    assert_eq!(m.remote_git(&["rev-parse", &reference]).trim(), head.trim());
    at(&m, m.a(), HALF, &["run", "abandon", &run_a], true);
}
