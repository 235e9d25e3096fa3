//! A dependent child retried after a sibling landed (SPEC 23.6): its next attempt goes on from
//! the base its first took, not from the target the sibling has since moved.

use crate::loop_e2e::{build, str_of};
use crate::project::Project;
use serde_json::json;

/// `004` depends on `002`; `003` lands while `004`'s first attempt runs, and that attempt
/// crashes. The second attempt keeps the lane's base and worktree: the receipt judges only the
/// lane's own work, and the project lands every child once.
#[test]
fn a_dependent_childs_second_attempt_keeps_its_base_after_a_sibling_landed() {
    let script = "lane 003-active-sessions-stay\nawait-start 004-the-end-is-logged\nlane 004-the-end-is-logged\nattempt 1\nsleep 3\nexit 3\nattempt *\nlane *\ncommit src/{lane}.txt the work of {lane}\nreport-ok E1 E2\n";
    let p = Project::new(
        &[
            "idle sessions end",
            "active sessions stay",
            "the end is logged",
        ],
        &[(2, "{0}")],
        script,
        json!({"pace": {"lanes": 2}}),
    );
    let (out, last) = build(&p.env, &p.id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    let run = str_of(&last, "run").to_owned();
    for c in &p.children {
        assert!(p.landed(c), "{c} did not land");
    }
    let record: serde_json::Value =
        serde_json::from_str(&p.env.read(&format!(".iced/run/{run}/record.json"))).unwrap();
    let lane = record["run"]["lanes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["id"] == "004-the-end-is-logged")
        .expect("the dependent lane")
        .clone();
    assert_eq!(lane["attempt"], 2, "{lane:#}");
}
