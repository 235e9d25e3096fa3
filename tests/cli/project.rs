//! Project runs end to end (SPEC 23.6): `iced build <project>` builds the project's approved
//! children as the lanes of one run, in dependency order, at most `pace.lanes` at once; a lane
//! handed back or blocked holds its siblings before landing until a person releases or discards
//! it. Real temporary git repositories with a local bare repository as the remote, and
//! `fixtures/fake-agent` as every lane's implementer (its `lane` filter gives one child its own
//! behaviour).

use crate::env::{fake_runner, merge_json, TestEnv, GOOD_BODY};
use crate::landing::{add_remote, branch_exists, rev, state};
use crate::loop_e2e::{
    agent_commit, build, hand_in, json_lines, step, step_until, str_of, GOOD_REPORT,
};
use serde_json::{json, Value};

/// Every lane: a little work (long enough for two lanes to overlap), its own file committed,
/// evidence for both expectations.
const WORK: &str = "sleep 0.3\ncommit src/{lane}.txt the work of {lane}\nreport-ok E1 E2\n";

/// A project with children; everything approved, committed, and pushed to `origin`.
pub(crate) struct Project {
    pub(crate) env: TestEnv,
    pub(crate) id: String,
    pub(crate) children: Vec<String>,
}

impl Project {
    /// `iced init`, a remote, an approved project and one approved child per title (in order, so
    /// ids ascend), `script` as every lane's implementer, `land.mode: merge` through `origin`,
    /// `patch` on top of the config. `depends` sets a child's `depends:` (child index, the value
    /// written with `{N}` replaced by child N's id) before it is approved.
    pub(crate) fn new(
        titles: &[&str],
        depends: &[(usize, &str)],
        script: &str,
        patch: Value,
    ) -> Project {
        let env = TestEnv::initialized();
        add_remote(&env);
        let id = env.approved_unit("project sessions that end");
        assert_eq!(
            env.iced_json(&["status", &id]).ok().json()["type"],
            "project"
        );
        let mut children: Vec<String> = Vec::new();
        for title in titles {
            let child = env.iced_json(&["child", &id, title]).ok().json()["id"]
                .as_str()
                .expect("child prints an id")
                .to_owned();
            env.set_body(&child, GOOD_BODY);
            children.push(child);
        }
        for &(k, value) in depends {
            let mut value = value.to_owned();
            for (n, c) in children.iter().enumerate() {
                value = value.replace(&format!("{{{n}}}"), c);
            }
            env.set_field(&children[k], "depends", &value);
        }
        for child in &children {
            env.iced_json(&["approve", child, "--yes"]).ok();
        }
        let mut config = fake_runner(&env, script);
        merge_json(
            &mut config,
            &json!({
                "verify": {"independent": false, "commands": [{"argv": ["true"], "timeoutSec": 30}]},
                "land": {"mode": "merge", "strategy": "merge", "remote": "origin"},
            }),
        );
        merge_json(&mut config, &patch);
        env.patch_config(&config);
        env.commit_all(&format!("approve {id} and its children"));
        env.git(&["push", "-q", "origin", "main"]);
        Project { env, id, children }
    }

    /// Every event of `.iced/run/events.jsonl`, in the order they were appended.
    pub(crate) fn events(&self) -> Vec<Value> {
        std::fs::read_to_string(self.env.path(".iced/run/events.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }

    /// Which lanes ran an agent (any role), in the order of their first `agent_start`.
    fn lanes_started(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for e in self.events().iter().filter(|e| e["event"] == "agent_start") {
            let lane = str_of(e, "lane").to_owned();
            if !out.contains(&lane) {
                out.push(lane);
            }
        }
        out
    }

    /// The most lanes alive at once: a lane is alive from its first `agent_start` to its last
    /// `agent_end` (any role), positions taken from the events' order. An end with no start
    /// before it is an agent found crashed before it was ever started: it was never alive.
    fn most_alive(&self) -> usize {
        let events = self.events();
        let mut spans: std::collections::BTreeMap<String, (usize, usize)> = Default::default();
        for (i, e) in events.iter().enumerate() {
            let Some(lane) = e["lane"].as_str() else {
                continue;
            };
            match e["event"].as_str() {
                Some("agent_start") => {
                    spans.entry(lane.to_owned()).or_insert((i, i)).1 = i;
                }
                Some("agent_end") => {
                    if let Some(span) = spans.get_mut(lane) {
                        span.1 = i;
                    }
                }
                _ => {}
            }
        }
        (0..events.len())
            .map(|i| spans.values().filter(|(a, b)| *a <= i && i <= *b).count())
            .max()
            .unwrap_or(0)
    }

    pub(crate) fn run_show(&self, run: &str) -> Value {
        self.env.iced_json(&["run", "show", run]).ok().json()
    }

    /// The lane `id` of a `run show --json`.
    pub(crate) fn lane<'a>(show: &'a Value, id: &str) -> &'a Value {
        show["run"]["lanes"]
            .as_array()
            .or_else(|| show["lanes"].as_array())
            .expect("lanes")
            .iter()
            .find(|l| l["id"] == id)
            .unwrap_or_else(|| panic!("no lane {id} in {show:#}"))
    }

    /// Whether `main` holds child `id`'s work and its closed unit.
    pub(crate) fn landed(&self, id: &str) -> bool {
        let has = |rel: &str| {
            std::process::Command::new("git")
                .args(["cat-file", "-e", &format!("main:{rel}")])
                .current_dir(self.env.root())
                .env_clear()
                .env("PATH", std::env::var_os("PATH").unwrap_or_default())
                .output()
                .expect("git runs")
                .status
                .success()
        };
        if !has(&format!("src/{id}.txt")) {
            return false;
        }
        let unit = self
            .env
            .git_out(&["show", &format!("main:intent/{id}/iced.md")]);
        assert!(
            unit.lines().any(|l| l == "status: done"),
            "{id}'s work landed without its close:\n{unit}"
        );
        true
    }

    /// Whether a run of this repository has a record saying it was delivered.
    fn delivered_record(&self) -> bool {
        std::fs::read_dir(self.env.path(".iced/run"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| std::fs::read(e.path().join("record.json")).ok())
            .filter_map(|b| serde_json::from_slice::<Value>(&b).ok())
            .any(|r| r["run"]["status"] == "delivered")
    }

    fn branch(&self, child: &str) -> String {
        format!("iced/{}/{child}", self.id)
    }
}

/// SPEC 23.6: three independent children, `pace.lanes: 2`: all three land in `main` (and
/// `origin`), two lanes alive at once (the first child's agent waits until the second's has
/// started) and never three; the project unit itself untouched, every lane retired, every claim
/// released.
#[test]
fn a_project_of_three_children_lands_them_all_two_lanes_at_a_time() {
    let script =
        format!("lane 002-idle-sessions-end\nawait-start 003-active-sessions-stay\nlane *\n{WORK}");
    let p = Project::new(
        &[
            "idle sessions end",
            "active sessions stay",
            "the end is logged",
        ],
        &[],
        &script,
        json!({"pace": {"lanes": 2}}),
    );
    assert_eq!(
        p.children[0], "002-idle-sessions-end",
        "the script names the first child"
    );
    let project_before = p.env.read(&format!("intent/{}/iced.md", p.id));

    let (out, last) = build(&p.env, &p.id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    let run = str_of(&last, "run").to_owned();

    for child in &p.children {
        assert!(p.landed(child), "{child} is not in main");
        assert!(
            !branch_exists(&p.env, &p.branch(child)),
            "{child}'s branch is retired"
        );
    }
    assert_eq!(
        crate::landing::remote_rev(&p.env.outside("remote.git"), "main").as_deref(),
        Some(rev(&p.env, "main").as_str()),
        "origin's main is main"
    );
    assert!(state(&p.env).runs.is_empty(), "the run left state.json");
    assert_eq!(
        p.env.read(&format!("intent/{}/iced.md", p.id)),
        project_before,
        "the project unit is not edited by its run"
    );
    let shown = p.run_show(&run);
    assert_eq!(shown["run"]["status"], "delivered", "{shown:#}");
    for lane in shown["run"]["lanes"].as_array().expect("lanes") {
        assert_eq!(lane["stage"], "delivered", "{lane:#}");
    }
    for unit in p.children.iter().chain([&p.id]) {
        assert!(!p.env.claim_path(unit).exists(), "{unit}'s claim is left");
    }

    // Pace: two lanes overlapped, three never did; the third started in order, last. The first
    // two start on two threads at once, so either may log its start first.
    assert_eq!(p.most_alive(), 2, "events:\n{:#?}", p.events());
    let mut started = p.lanes_started();
    assert_eq!(started.len(), 3, "{started:?}");
    assert_eq!(
        started[2], p.children[2],
        "the third starts last: {started:?}"
    );
    started[..2].sort();
    assert_eq!(started, p.children);

    // Each lane appended its verify pass to `.iced/metrics.jsonl`; the appends merged by union
    // as the lanes landed (issue 11 item 7): every child's pass is in main's log, once.
    let metrics = p.env.git_out(&["show", "main:.iced/metrics.jsonl"]);
    assert!(!metrics.contains("<<<<<<<"), "{metrics}");
    for child in &p.children {
        let passes = metrics
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|e| e["id"] == *child && e["event"] == "verify" && e["result"] == "pass")
            .count();
        assert_eq!(passes, 1, "{child}:\n{metrics}");
    }
}

/// SPEC 23.6: a child that `depends:` on another starts only once that one has landed, from a
/// base holding its work, even with a lane free.
#[test]
fn a_child_starts_after_what_it_depends_on_has_landed_and_builds_on_it() {
    let p = Project::new(
        &["idle sessions end", "the end is logged"],
        &[(0, "{1}")],
        WORK,
        json!({"pace": {"lanes": 2}}),
    );
    // The first by id depends on the second: order follows dependencies, not ids.
    let (first, second) = (&p.children[1], &p.children[0]);
    let (out, last) = build(&p.env, &p.id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    let run = str_of(&last, "run").to_owned();
    assert!(p.landed(first) && p.landed(second));
    assert_eq!(p.lanes_started(), vec![first.clone(), second.clone()]);
    assert_eq!(p.most_alive(), 1, "events:\n{:#?}", p.events());
    let events = p.events();
    let position = |pred: &dyn Fn(&Value) -> bool| {
        events
            .iter()
            .position(pred)
            .unwrap_or_else(|| panic!("no such event in {events:#?}"))
    };
    let landed =
        position(&|e| e["event"] == "step_done" && e["lane"] == *first && e["step"] == "retire");
    let started = position(&|e| e["event"] == "agent_start" && e["lane"] == *second);
    assert!(landed < started, "{second} started before {first} landed");

    let shown = p.run_show(&run);
    let lane = Project::lane(&shown, second);
    assert_eq!(lane["depends"], json!([first]));
    let base = lane["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .find(|r| r["step"] == "base")
        .unwrap_or_else(|| panic!("{second} has no base step: {lane:#}"));
    let commit = str_of(&base["outcome"], "commit");
    p.env
        .git_out(&["cat-file", "-e", &format!("{commit}:src/{first}.txt")]);
}

/// The script where child `held` hands its lane back and every other child works.
/// When `after` is given, it waits until that lane's agent has started: both lanes are active.
fn handing_back(held: &str, after: Option<&str>) -> String {
    // Without a lane to wait for, it takes a while: long enough for a second lane to start,
    // were one allowed to.
    let wait = after.map_or("sleep 0.5\n".to_owned(), |a| format!("await-start {a}\n"));
    format!("lane {held}\n{wait}handback the contract contradicts itself\nexit 0\nlane *\n{WORK}")
}

/// SPEC 23.6: a handed-back child holds its siblings: the one already active finishes validation
/// and delivery and waits before landing, the one not started does not start, and the run is
/// blocked naming the lane; `iced run release` lets the others land, and the run ends handed back.
#[test]
fn a_handed_back_child_holds_its_siblings_until_it_is_released() {
    let titles = [
        "idle sessions end",
        "active sessions stay",
        "the end is logged",
    ];
    // Ids ascend from 002 (001 is the project).
    let p = Project::new(
        &titles,
        &[],
        &handing_back("002-idle-sessions-end", Some("003-active-sessions-stay")),
        json!({"pace": {"lanes": 2}}),
    );
    let (a, b, c) = (&p.children[0], &p.children[1], &p.children[2]);
    assert_eq!(
        a, "002-idle-sessions-end",
        "the script names the first child"
    );

    let (out, last) = build(&p.env, &p.id, &[], 4);
    assert_eq!(last["status"], "blocked", "{out:#?}");
    let run = str_of(&last, "run").to_owned();
    let shown = p.run_show(&run);
    assert_eq!(Project::lane(&shown, a)["stage"], "handback");
    let b_lane = Project::lane(&shown, b);
    assert_eq!(
        b_lane["stage"], "land",
        "{b} finished validation and delivery: {b_lane:#}"
    );
    assert!(
        !b_lane["steps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| str_of(r, "step").starts_with("integrate-")),
        "{b} began landing while {a} holds the run: {b_lane:#}"
    );
    assert!(!p.landed(b), "{b} landed while {a} holds the run");
    // Both lanes start at once (two threads may launch them), in either order.
    let mut started = p.lanes_started();
    started.sort();
    assert_eq!(
        started,
        vec![a.clone(), b.clone()],
        "{c} started while {a} holds the run"
    );
    let text = p.env.iced(&["run", "show", &run]).ok().stdout;
    assert!(
        text.contains(&format!("iced run release {run} {a}")),
        "{text}"
    );
    // Building again changes nothing while the hold stands.
    let (_, again) = build(&p.env, &p.id, &[], 4);
    assert_eq!(again["status"], "blocked");
    assert!(!p.landed(b));

    // Releasing a lane that holds nothing is refused, naming the lanes that can be released.
    p.env
        .iced_json(&["run", "release", &run, b])
        .refused(3, "lane-not-held");
    p.env.iced_json(&["run", "release", &run, a]).ok();
    let (out, last) = build(&p.env, &p.id, &[], 4);
    assert_eq!(last["status"], "handback", "{out:#?}");
    assert!(
        p.landed(b) && p.landed(c),
        "the released run lands the others"
    );
    assert!(!p.landed(a));
    assert!(
        branch_exists(&p.env, &p.branch(a)),
        "the handed-back lane's branch is kept"
    );
}

/// SPEC 23.6: a lane that blocks (its implementer fails every attempt) holds its siblings; a lane
/// depending on it can never start, and blocks naming it once it is discarded; discarding both
/// lets the third land, and the run ends delivered.
#[test]
fn discarding_a_blocked_child_and_its_dependent_delivers_the_rest() {
    let script =
        "lane 002-idle-sessions-end\nawait-start 003-active-sessions-stay\nexit 3\nlane *\n"
            .to_owned()
            + WORK;
    let p = Project::new(
        &[
            "idle sessions end",
            "active sessions stay",
            "the end is logged",
        ],
        &[(2, "{0}")],
        &script,
        json!({"pace": {"lanes": 2}, "verify": {"maxAttempts": 1}}),
    );
    let (a, b, c) = (&p.children[0], &p.children[1], &p.children[2]);

    let (out, last) = build(&p.env, &p.id, &[], 4);
    assert_eq!(last["status"], "blocked", "{out:#?}");
    let run = str_of(&last, "run").to_owned();
    let shown = p.run_show(&run);
    assert_eq!(Project::lane(&shown, a)["stage"], "blocked", "{shown:#}");
    assert_eq!(Project::lane(&shown, b)["stage"], "land", "{shown:#}");
    assert!(!p.landed(b));

    // The blocked lane leaves the run; its dependent, which can now never start, blocks.
    let discarded = p.env.iced_json(&["run", "discard", &run, a]).ok().json();
    let lane = discarded["lanes"]
        .as_array()
        .and_then(|l| l.iter().find(|l| l["id"] == *a).cloned())
        .unwrap_or_else(|| panic!("no lane {a}: {discarded}"));
    assert_eq!(lane["stage"], "discarded", "{discarded}");
    assert!(!p.env.claim_path(a).exists());
    let (out, last) = build(&p.env, &p.id, &[], 4);
    assert_eq!(last["status"], "blocked", "{out:#?}");
    assert!(p.landed(b), "{b} landed once the hold was gone");
    let shown = p.run_show(&run);
    let c_lane = Project::lane(&shown, c);
    assert_eq!(c_lane["stage"], "blocked", "{c_lane:#}");
    assert!(
        str_of(c_lane, "reason").contains(a.as_str()),
        "{c}'s reason names {a}: {c_lane:#}"
    );
    assert!(!p.lanes_started().contains(c), "{c} never ran");
    // Discarding it again changes nothing; a delivered lane cannot be discarded.
    let before = p.env.read(".iced/run/state.json");
    p.env.iced_json(&["run", "discard", &run, a]).ok();
    assert_eq!(p.env.read(".iced/run/state.json"), before);
    p.env
        .iced_json(&["run", "discard", &run, b])
        .refused(3, "lane-final");

    p.env.iced_json(&["run", "discard", &run, c]).ok();
    let (out, last) = build(&p.env, &p.id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    assert!(!p.landed(a) && !p.landed(c));
    assert!(
        branch_exists(&p.env, &p.branch(a)),
        "a discarded lane's branch is kept"
    );
}

/// SPEC 23.6: a lane that depends on a handed-back lane blocks naming it and can never deliver,
/// so with nothing left that a resume could take further the run ends handed back by itself:
/// its claims released, not left blocked for a person who has nothing to resume.
#[test]
fn a_run_whose_only_blocked_lane_waits_on_a_handback_ends_handed_back() {
    let p = Project::new(
        &["idle sessions end", "the end is logged"],
        &[(1, "{0}")],
        &handing_back("002-idle-sessions-end", None),
        json!({"pace": {"lanes": 2}}),
    );
    let (a, b) = (&p.children[0], &p.children[1]);
    let (out, last) = build(&p.env, &p.id, &[], 4);
    assert_eq!(last["status"], "handback", "{out:#?}");
    let run = str_of(&last, "run").to_owned();
    let shown = p.run_show(&run);
    assert_eq!(shown["status"], "handback", "{shown:#}");
    assert_eq!(Project::lane(&shown, a)["stage"], "handback", "{shown:#}");
    let b_lane = Project::lane(&shown, b);
    assert_eq!(b_lane["stage"], "blocked", "{b_lane:#}");
    assert!(str_of(b_lane, "reason").contains(a.as_str()), "{b_lane:#}");
    assert_eq!(p.lanes_started(), vec![a.clone()], "{b} never ran");
    for child in [a, b, &p.id] {
        assert!(
            !p.env.claim_path(child).exists(),
            "{child} is still claimed"
        );
    }
}

/// A project of two children, one lane at a time, whose first child hands back: `iced build`
/// returns the run blocked (its last line).
fn blocked_on_a_handback() -> (Project, Value) {
    let p = Project::new(
        &["idle sessions end", "active sessions stay"],
        &[],
        &handing_back("002-idle-sessions-end", None),
        json!({"pace": {"lanes": 1}}),
    );
    let (_, last) = build(&p.env, &p.id, &[], 4);
    assert_eq!(last["status"], "blocked");
    (p, last)
}

/// SPEC 23.6: while a project run is live, building one of its children alone is refused.
#[test]
fn a_child_of_a_live_project_run_cannot_be_built_alone() {
    let (p, last) = blocked_on_a_handback();
    let b = &p.children[1];
    let refusal = p.env.iced_json(&["build", b]).refused(3, "unit-claimed");
    assert!(
        str_of(&refusal, "reason").contains(str_of(&last, "run")),
        "{refusal}"
    );
    // pace 1: the second lane never started while the first was active, then held.
    assert_eq!(p.lanes_started(), vec![p.children[0].clone()]);
}

/// Issue 15 (#5): a run's claims go only after its end is saved. Killed between the two (an
/// abandon of a blocked project run), the state says the run ended while its children's claims
/// remain; those block nobody, so a child is built alone at once. Before, the claims went first:
/// killed there, the run was still live with its children unclaimed.
#[test]
fn a_run_killed_between_its_end_and_its_releases_has_ended_and_blocks_nobody() {
    let (p, last) = blocked_on_a_handback();
    let run = str_of(&last, "run").to_owned();
    let killed = p
        .env
        .command()
        .env("ICED_FAILPOINT", "end-before-release")
        .args(["run", "abandon", &run, "--json"])
        .output()
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(killed.status.signal(), Some(9), "{killed:?}");
    assert_eq!(
        state(&p.env).runs[&run].status,
        iced::run::state::RunStatus::Abandoned
    );
    for unit in std::iter::once(&p.id).chain(&p.children) {
        assert!(
            p.env.claim_path(unit).exists(),
            "the kill came before releasing {unit}'s claim"
        );
    }
    let b = &p.children[1];
    let (_, alone) = build(&p.env, b, &["--no-wait"], 0);
    assert_ne!(str_of(&alone, "run"), run);
    let claim: Value =
        serde_json::from_str(&std::fs::read_to_string(p.env.claim_path(b)).unwrap()).unwrap();
    assert_eq!(claim["run"], str_of(&alone, "run"), "{claim:#}");
    p.env
        .iced_json(&["run", "abandon", str_of(&alone, "run")])
        .ok();
}

/// Admit refuses a project it cannot build, naming why and writing nothing.
#[test]
fn admit_refuses_projects_it_cannot_build() {
    // No approved child: a draft child is not built.
    let env = TestEnv::initialized();
    let project = env.approved_unit("project sessions that end");
    let draft = env
        .iced_json(&["child", &project, "idle sessions end"])
        .ok()
        .json();
    env.commit_all("a project with a draft child");
    let refusal = env
        .iced_json(&["build", &project])
        .refused(3, "project-empty");
    // The reason names the children it left out, and why.
    let named = format!("{}: draft", str_of(&draft, "id"));
    assert!(str_of(&refusal, "reason").contains(&named), "{refusal}");
    assert!(!env.path(".iced/run/state.json").exists());

    // A dependency that names no unit.
    let p = Project::new(&["idle sessions end"], &[(0, "999")], WORK, json!({}));
    let refusal = p
        .env
        .iced_json(&["build", &p.id])
        .refused(3, "dependency-unknown");
    assert!(str_of(&refusal, "reason").contains("999"), "{refusal}");

    // Two children that wait for each other.
    let p = Project::new(
        &["idle sessions end", "active sessions stay"],
        &[(0, "{1}"), (1, "{0}")],
        WORK,
        json!({}),
    );
    let refusal = p
        .env
        .iced_json(&["build", &p.id])
        .refused(3, "dependency-cycle");
    for child in &p.children {
        assert!(
            str_of(&refusal, "reason").contains(child.as_str()),
            "{refusal}"
        );
    }

    // A dependency outside the run that is not done.
    let p = Project::new(&["idle sessions end"], &[], WORK, json!({}));
    let outside = p.env.approved_unit("the end is logged");
    p.env.set_field(&p.children[0], "depends", &outside);
    p.env.commit_all("depend on a unit outside the project");
    let refusal = p
        .env
        .iced_json(&["build", &p.id])
        .refused(3, "dependency-open");
    assert!(
        str_of(&refusal, "reason").contains(outside.as_str()),
        "{refusal}"
    );

    // Dependencies without landing: the dependent would never see its dependency's work.
    let p = Project::new(
        &["idle sessions end", "active sessions stay"],
        &[(1, "[{0}]")],
        WORK,
        json!({"land": {"mode": "none"}}),
    );
    p.env
        .iced_json(&["build", &p.id])
        .refused(3, "project-needs-landing");
    assert!(!p.env.path(".iced/run/state.json").exists());
}

/// SPEC 23.6 under the host driver: `implement step` hands each lane's implementer to the host in
/// lane order, asks again for one already handed only when nothing else can act, and `implement
/// receipt` finds its lane by the path; both lanes land.
#[test]
fn a_host_driven_project_run_hands_out_each_lane_and_takes_receipts_by_path() {
    let p = Project::new(
        &["idle sessions end", "active sessions stay"],
        &[],
        WORK,
        json!({"pace": {"lanes": 2}}),
    );
    // No implementer runner: the host drives.
    let mut config: Value = serde_json::from_str(&p.env.read(".iced/config.json")).unwrap();
    config["roles"]
        .as_object_mut()
        .expect("roles")
        .remove("implementer");
    p.env.write(
        ".iced/config.json",
        serde_json::to_string_pretty(&config).unwrap() + "\n",
    );
    p.env.trust_config();
    p.env.commit_all("the host drives");
    p.env.git(&["push", "-q", "origin", "main"]);
    let (a, b) = (&p.children[0], &p.children[1]);

    let (out, last) = build(&p.env, &p.id, &["--no-wait"], 0);
    let run = str_of(&last, "run").to_owned();
    assert_eq!(last["action"], "start_agent", "{out:#?}");
    let first = json_lines(&out)
        .into_iter()
        .find(|s| s["action"] == "start_agent")
        .expect("a start_agent line");
    assert_eq!(first["lane"], *a, "{first}");
    // The second lane is set up and handed out before the first is asked for again.
    let second = step_until(&p.env, |s| s["action"] == "start_agent");
    assert_eq!(second["lane"], *b, "{second}");
    // Both handed out: asking again names the first again.
    assert_eq!(step(&p.env)["lane"], *a);

    for agent in [&second, &first] {
        let lane = str_of(agent, "lane");
        let worktree = std::path::PathBuf::from(str_of(agent, "worktree"));
        agent_commit(
            &worktree,
            &format!("src/{lane}.txt"),
            &format!("the work of {lane}\n"),
        );
        let receipt = str_of(agent, "receipt_path");
        std::fs::write(receipt, GOOD_REPORT).unwrap();
        let handed = hand_in(&p.env, receipt).ok().json();
        assert_eq!(handed["lane"], lane, "{handed}");
        assert_eq!(handed["action"], "advanced", "{handed}");
    }
    let done = step_until(&p.env, |s| s["action"] == "delivered");
    assert_eq!(done["run"], run.as_str());
    assert!(p.landed(a) && p.landed(b));
}

/// Crash safety of `iced run discard` (SPEC 23.6): killed after the lane was recorded discarded
/// but before its claim was released, the run goes on without the lane, and discarding it again
/// releases the claim.
#[test]
fn a_discard_killed_before_releasing_the_claim_is_finished_by_discarding_again() {
    let p = Project::new(
        &["idle sessions end", "active sessions stay"],
        &[],
        &handing_back("002-idle-sessions-end", None),
        json!({"pace": {"lanes": 1}}),
    );
    let (a, b) = (&p.children[0], &p.children[1]);
    let (_, last) = build(&p.env, &p.id, &[], 4);
    assert_eq!(last["status"], "blocked");
    let run = str_of(&last, "run").to_owned();
    let claim = p.env.claim_path(a);
    assert!(claim.exists());

    let killed = p
        .env
        .command()
        .env("ICED_FAILPOINT", "discard-before-release")
        .args(["run", "discard", &run, a, "--json"])
        .output()
        .expect("iced runs");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        killed.status.signal(),
        Some(9),
        "killed by its failpoint: {killed:?}"
    );
    let shown = p.run_show(&run);
    assert_eq!(Project::lane(&shown, a)["stage"], "discarded", "{shown:#}");
    assert!(claim.exists(), "the claim outlived the kill");

    p.env.iced_json(&["run", "discard", &run, a]).ok();
    assert!(!claim.exists(), "discarding again released the claim");
    let (out, last) = build(&p.env, &p.id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    assert!(p.landed(b) && !p.landed(a));
}

/// The crash suite, for project runs: `iced build <project>` killed with SIGKILL at moments spread
/// over an uninterrupted build's duration (measured first), then built again to delivery. Every
/// time: the run is delivered, each child's work lands once, no lane's implementer ran twice in
/// one attempt, and never more than two lanes were alive.
#[test]
fn a_project_build_killed_at_random_moments_lands_each_child_once() {
    let titles = [
        "idle sessions end",
        "active sessions stay",
        "the end is logged",
    ];
    let make = || Project::new(&titles, &[(2, "{0}")], WORK, json!({"pace": {"lanes": 2}}));
    let calibration = make();
    let started = std::time::Instant::now();
    let (out, last) = build(&calibration.env, &calibration.id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    let full = started.elapsed().as_millis() as u64;
    let iterations: u64 = std::env::var("ICED_CRASH_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6);
    // Two at a time: the machines this runs on have two cores.
    let case = |i: u64| {
        // Spread evenly, with a seeded jitter: every stage gets its kills.
        let delay = full * i / iterations + (i * 7919) % (full / iterations + 1);
        let p = make();
        let mut child = p
            .env
            .command()
            .args(["build", &p.id, "--json"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("iced starts");
        std::thread::sleep(std::time::Duration::from_millis(delay));
        let _ = child.kill();
        let _ = child.wait();
        let context = format!("killed after {delay} ms of {full}");
        let mut status = String::new();
        for _ in 0..4 {
            // Building a delivered project again would be refused (nothing approved is left):
            // the run may have finished before its kill.
            if p.delivered_record() {
                status = "delivered".into();
                break;
            }
            let out = p.env.iced_json(&["build", &p.id]);
            let last = crate::loop_e2e::last_line(&out);
            status = str_of(&last, "status").to_owned();
            if status == "delivered" {
                break;
            }
            assert_eq!(
                out.code, 0,
                "{context}: the resuming build failed: {out:#?}"
            );
        }
        assert_eq!(status, "delivered", "{context}");
        for c in &p.children {
            assert!(p.landed(c), "{context}: {c} did not land");
            let commits =
                p.env
                    .git_out(&["log", "--format=%H", "main", "--", &format!("src/{c}.txt")]);
            assert_eq!(
                commits.lines().count(),
                1,
                "{context}: {c}'s work landed more than once:\n{commits}"
            );
        }
        let mut runs: std::collections::BTreeMap<String, usize> = Default::default();
        for start in p.env.agent_starts() {
            if start.contains("role=implementer") {
                let key: String = start
                    .split(' ')
                    .skip(2)
                    .take(2)
                    .collect::<Vec<_>>()
                    .join(" ");
                *runs.entry(key).or_default() += 1;
            }
        }
        assert!(
            runs.values().all(|&n| n == 1),
            "{context}: an implementer ran twice in one attempt: {runs:?}"
        );
        assert!(p.most_alive() <= 2, "{context}: events:\n{:#?}", p.events());
    };
    std::thread::scope(|scope| {
        let odd = scope.spawn(|| (1..iterations).step_by(2).for_each(case));
        (0..iterations).step_by(2).for_each(case);
        if let Err(panic) = odd.join() {
            std::panic::resume_unwind(panic);
        }
    });
}
