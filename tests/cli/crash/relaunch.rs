//! A validator's launch recorded, its call killed before the supervisor registered (SPEC 21.4):
//! the validator never ran, so the next call launches it again in the sandbox it was prepared in.
//! Its step is started once, no crash is counted, and every validator runs once.

use super::*;

/// The CI failure of seed 0xc10003 (killed after "the validators are prepared" of attempt 2, the
/// `validate` step of attempt 2 then started twice), made deterministic: the first hit of
/// `validator-after-record` is attempt 1's validator, the second the refuter, the third attempt
/// 2's validator.
#[test]
fn a_validator_launch_killed_before_its_supervisor_registered_is_launched_again() {
    let specs = [
        "validator-after-record",
        "validator-after-record:2",
        "validator-after-record:3",
    ];
    each_in_parallel("validator launches killed", &specs, 3, |spec| {
        let case = Case::new(Setup::process(1).validated());
        let context = format!("`iced build` with ICED_FAILPOINT={spec}");
        let call = case.build(Some(spec));
        assert!(
            call.killed(),
            "{context}: failpoint not reached: {}",
            call.describe()
        );
        case.build_to_delivery(&context);
        case.assert_finished(&context, false);
        // A launch that never ran is no crash: the lane's crash budget is untouched.
        let state = case.state();
        let lane = &state.runs[&case.run_id()].lanes[0];
        assert_eq!(lane.crashes, 0, "{context}: no crash counted");
        // The story says the killed call's launch was taken up again.
        let events = case.env.read(".iced/run/events.jsonl");
        let gone: Vec<Value> = events
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|e| e["event"] == "owner_gone")
            .collect();
        assert_eq!(gone.len(), 1, "{context}: one owner_gone: {events}");
        let step = gone[0]["step"].as_str().unwrap_or("");
        assert!(
            step == "validate-full" || step == "refute",
            "{context}: {}",
            gone[0]
        );
    });
}
