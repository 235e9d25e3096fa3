//! The simulator's stepper and its world: a move applied as `under_lock::apply` applies it, and its
//! side effect done as `outside_lock::act` and the stages do it, with the world's outcome drawn
//! from the dice; what finished activities say (`observe`); what the host hands in; what a person
//! does (`control`). Every lane moves by `decide`'s `LaneMove`s, every run status is `decide`'s,
//! as in the real code (tests/cli/layout.rs holds the real code to that).

use super::{
    apply_move, finish, flag, mark_started, new_attempt, nonce, replace, started_record, Activity,
    Sim,
};
use crate::run::decide::*;
use crate::run::state::{Driver, RunStatus, Stage, StepStatus};
use crate::run::validate::Finding;
use serde_json::{json, Value};

impl Sim {
    /// The work under the lock. True when the move has a side effect outside it.
    pub(super) fn under_lock(&mut self, next: &Next, v: &DecideView) -> bool {
        match next {
            Next::Ended | Next::Paused | Next::Wait { .. } => false,
            // Nothing is recorded under the lock: a renewal is done again, whole, until one is.
            Next::RenewClaims => true,
            // A check is done outside the lock; a move applied under it.
            Next::Plan { lane, next } => self.plan_under_lock(lane, next),
            Next::RenderBrief { lane } => {
                let l = self.lane_mut(lane);
                let mut record = super::started_record(StepKey::Brief, l.attempt, None);
                record.pid = None;
                finish(&mut record, StepStatus::Done, json!({"sha256": "b"}));
                replace(l, record);
                let mv = after_brief(l);
                apply_move(l, mv);
                false
            }
            Next::HandToHost { lane } => {
                let due = self.t + self.dice.upto(3);
                let l = self.lane_mut(lane);
                if l.record(&StepKey::Implement).is_none() {
                    let n = nonce();
                    let mut record =
                        super::started_record(StepKey::Implement, l.attempt, Some(n.clone()));
                    record.pid = None;
                    record.outcome = Some(json!({"handed": true}));
                    l.steps.push(record);
                    self.host_due.insert(n, due);
                }
                false
            }
            Next::HandValidator { lane, key } => {
                let due = self.t + self.dice.upto(3);
                let l = self.lane_mut(lane);
                let record = l.record_mut(key).expect("a prepared validator");
                let first = !flag(record, "handed");
                if let Some(Value::Object(o)) = record.outcome.as_mut() {
                    o.insert("handed".into(), true.into());
                }
                if first {
                    let n = record.nonce.clone().expect("a receipt key");
                    self.host_due.insert(n, due);
                }
                false
            }
            Next::FinishReceipt { lane } => {
                self.finish_receipt(lane, v);
                if self.run.lanes.iter().all(|l| l.stage.is_final()) {
                    let status = run_status(&self.run, v, &super::expected);
                    if status.is_ended() {
                        self.end_run(status);
                    } else {
                        self.run.status = status;
                    }
                }
                false
            }
            Next::Retry {
                lane,
                reason,
                crashed,
            } => {
                new_attempt(self.lane_mut(lane), reason.clone(), *crashed);
                false
            }
            Next::Requeue { lane, key } => {
                self.lane_mut(lane).take_current(key);
                false
            }
            Next::RelaunchDod { lane, key } => {
                let l = self.lane_mut(lane);
                l.take_current(key);
                l.crashes += 1;
                false
            }
            Next::OverBudget { lane, reason } => {
                // The sim keeps no budget: a handback all the same.
                let l = self.lane_mut(lane);
                l.stage = Stage::Handback;
                l.reason = Some(reason.clone());
                false
            }
            Next::Block { lane, reason } => {
                let l = self.lane_mut(lane);
                l.stage = Stage::Blocked;
                l.reason = Some(reason.clone());
                self.lane_blocked_the_run();
                false
            }
            Next::RedoValidator { lane, key } => {
                let l = self.lane_mut(lane);
                let old = l.take_current(key);
                let mutated = old.iter().any(|r| flag(r, "mutation"));
                let limited = old.iter().any(backs_off);
                if mutated {
                    l.mutations += 1;
                } else if !limited {
                    l.crashes += 1;
                }
                false
            }
            Next::Judge { lane } => {
                self.judge(lane, v);
                false
            }
            Next::FinishRefute { lane } => {
                self.finish_refute(lane, v);
                false
            }
            Next::Finish => {
                let status = run_status(&self.run, v, &super::expected);
                if status == RunStatus::Blocked {
                    self.run.status = status;
                } else {
                    self.end_run(status);
                }
                false
            }
            Next::Stall { .. } => {
                self.run.status = RunStatus::Blocked;
                false
            }
            Next::LandAgain { lane } => {
                self.lane_mut(lane).land_round += 1;
                false
            }
            Next::AddWorktree { .. }
            | Next::LaunchImplementer { .. }
            | Next::Tester { .. }
            | Next::CheckReceipt { .. }
            | Next::LaunchDod { .. }
            | Next::Deliver { .. }
            | Next::PrepareValidators { .. }
            | Next::LaunchValidators { .. }
            | Next::CheckValidator { .. }
            | Next::Sync { .. } => {
                mark_started(&mut self.run, next, self.case.validator_driver);
                true
            }
        }
    }

    /// The side effect, and its outcome recorded. True when it blocked its lane. Now and then the
    /// call dies first: its records stay started, owned by a dead process.
    pub(super) fn outside(&mut self, next: &Next) -> bool {
        if self.budget.deaths > 0 && self.dice.chance(3) {
            self.budget.deaths -= 1;
            return false;
        }
        let mishap = |sim: &mut Sim, pct: u64| {
            let hit = sim.budget.mishaps > 0 && sim.dice.chance(pct);
            if hit {
                sim.budget.mishaps -= 1;
            }
            hit
        };
        match next {
            Next::RenewClaims => {
                self.renew_claims();
                false
            }
            Next::AddWorktree { lane } => {
                let failed = mishap(self, 3);
                let l = self.lane_mut(lane);
                let record = l
                    .steps
                    .iter_mut()
                    .find(|s| s.step == StepKey::Worktree)
                    .expect("marked");
                if failed {
                    finish(record, StepStatus::Failed, json!({"error": "no room"}));
                    apply_move(l, after_worktree(Err("no room")));
                    return true;
                }
                finish(record, StepStatus::Done, json!({"path": "/w"}));
                l.worktree = Some(format!("/w/{lane}"));
                apply_move(l, after_worktree(Ok(())));
                false
            }
            Next::LaunchImplementer { lane } if self.outage() => {
                // The lane branch could not be published (`stage::implement`): no agent.
                let l = self.lane_mut(lane);
                let record = l.record_mut(&StepKey::Implement).expect("marked");
                finish(
                    record,
                    StepStatus::Failed,
                    json!({"remote": "down", "unreachable": true}),
                );
                record.nonce = None;
                self.rate_limited();
                false
            }
            Next::Tester { lane, next } => {
                self.tester(lane, next);
                false
            }
            Next::Plan { lane, next } => {
                self.plan_outside(lane, next);
                false
            }
            Next::LaunchImplementer { lane } => {
                let key = StepKey::Implement;
                let limited = self.budget.rate_limits > 0 && self.dice.chance(8);
                if limited {
                    self.budget.rate_limits -= 1;
                }
                let exit = (!self.dice.chance(12)).then_some(0);
                self.spawn(lane, &key, exit, limited, true);
                false
            }
            Next::LaunchDod { lane, run, slots } => {
                for &(i, j) in slots {
                    let exit = if self.dice.chance(10) {
                        None
                    } else {
                        Some(if self.dice.chance(20) { 1 } else { 0 })
                    };
                    self.spawn(lane, &run.key(i, j), exit, false, false);
                }
                false
            }
            Next::LaunchValidators { lane, keys } => {
                for key in keys {
                    let exit = (!self.dice.chance(8)).then_some(0);
                    self.spawn(lane, key, exit, false, true);
                }
                false
            }
            Next::CheckReceipt { lane } => {
                let down = self.outage();
                if down {
                    self.rate_limited();
                }
                let checks = if down {
                    json!({"unreachable": "down"})
                } else if self.dice.chance(5) {
                    json!({"missing": [], "handback": "the unit asks for two things at once"})
                } else if self.dice.chance(20) {
                    json!({"missing": ["the worktree has uncommitted or untracked changes"], "handback": null})
                } else {
                    json!({"missing": [], "handback": null})
                };
                let l = self.lane_mut(lane);
                // The checks are recorded; the record stays started until the commands are in.
                l.record_mut(&StepKey::Receipt).expect("marked").outcome = Some(checks);
                false
            }
            Next::Deliver { lane } => {
                let moved = mishap(self, 4);
                let failed = !moved && mishap(self, 2);
                // Failed after preparing its close (git failed at the checkout), or before.
                let prepared = failed && self.dice.chance(50);
                let denied = failed && !prepared && self.dice.chance(50);
                let mode = self.case.land_mode;
                let l = self.lane_mut(lane);
                let record = l.record_mut(&StepKey::Deliver).expect("marked");
                if moved {
                    let o =
                        json!({"moved": {"judged": "a1", "head": "b2", "commits": ["b2 later"]}});
                    finish(record, StepStatus::Failed, o);
                    return false;
                }
                if failed {
                    let mut o = json!({"error": "git failed"});
                    if prepared {
                        o["prepared"] = "p1".into();
                    } else if denied {
                        // The guard refused the range: a resume starts a fresh attempt.
                        o["denied"] = true.into();
                    }
                    finish(record, StepStatus::Failed, o);
                    let mv = after_deliver(mode.into(), Delivered::Failed("git failed"));
                    apply_move(l, mv.expect("a failed delivery moves the lane"));
                    return true;
                }
                finish(record, StepStatus::Done, json!({"commit": "c1"}));
                let mv = after_deliver(mode.into(), Delivered::Committed);
                if mv == Some(LaneMove::To(Stage::Land)) {
                    l.land_round = 1;
                }
                apply_move(l, mv.expect("a delivery moves the lane"));
                false
            }
            Next::PrepareValidators { lane, keys } => {
                let moved = mishap(self, 3);
                let host = self.case.validator_driver == Driver::Host;
                let l = self.lane_mut(lane);
                for key in keys {
                    let record = l.record_mut(key).expect("marked");
                    if moved {
                        let o = json!({"moved": {"judged": "a1", "head": "b2", "commits": []}});
                        finish(record, StepStatus::Failed, o);
                        continue;
                    }
                    record.outcome = Some(json!({"prepared": true}));
                    record.pid = None;
                    if host {
                        record.nonce = Some(nonce());
                    }
                }
                false
            }
            Next::CheckValidator { lane, key } => self.check_validator(lane, key),
            Next::Sync { lane, step } => {
                self.sync(lane, step);
                false
            }
            _ => false,
        }
    }

    pub(super) fn spawn(
        &mut self,
        lane: &str,
        key: &StepKey,
        exit: Option<i64>,
        limited: bool,
        agent: bool,
    ) {
        let done_at = self.t + self.dice.upto(4);
        let l = self.lane_mut(lane);
        let n = l.record(key).and_then(|r| r.nonce.clone()).expect("marked");
        self.world.push(Activity {
            nonce: n,
            done_at,
            exit,
            rate_limited: limited,
            agent,
        });
    }

    /// `stage::validators::check`: the validator's tree and its answer.
    fn check_validator(&mut self, lane: &str, key: &StepKey) -> bool {
        let limited = self.budget.rate_limits > 0 && self.dice.chance(6);
        let roll = self.dice.next() % 100;
        let crashed = !limited && roll < 8;
        let mutated = !limited && (8..16).contains(&roll);
        let lane_moved = mutated && roll < 10 && self.budget.mishaps > 0;
        self.budget.rate_limits -= u32::from(limited);
        self.budget.mishaps -= u32::from(lane_moved);
        if limited {
            self.rate_limited();
        }
        let answer = self.answer(lane, key);
        let l = self.lane_mut(lane);
        let record = l.record_mut(key).expect("a finished validator");
        let finished = record
            .outcome
            .as_ref()
            .and_then(|o| o.get("finished"))
            .cloned()
            .unwrap_or(Value::Null);
        let (status, outcome) = if limited {
            let o = json!({"rate_limited": true, "harness": {"rate_limited": true}, "finished": finished});
            (StepStatus::Failed, o)
        } else if crashed {
            let o = json!({"crashed": true, "harness_failed": "it stopped", "finished": finished});
            (StepStatus::Failed, o)
        } else if mutated {
            let why = if lane_moved {
                "the lane branch moved"
            } else {
                "a file in the sandbox changed"
            };
            (
                StepStatus::Failed,
                json!({"mutation": [why], "finished": finished}),
            )
        } else {
            (
                StepStatus::Done,
                json!({"answer": answer, "finished": finished}),
            )
        };
        finish(record, status, outcome);
        if lane_moved {
            apply_move(
                l,
                after_validator_moved_lane(key, &["the lane branch".into()]),
            );
        }
        lane_moved
    }

    /// What a validator answers (the findings' severities, the expectations it could not judge),
    /// or what the refuter decides for each of this round's open findings.
    fn answer(&mut self, lane: &str, key: &StepKey) -> Value {
        if *key == StepKey::Refute {
            let l = self.run.lane(lane).expect("lane");
            let open: Vec<String> = l
                .findings
                .iter()
                .filter(|f| f.round == l.attempt && f.status == "open")
                .map(|f| f.id.clone())
                .collect();
            let mut decisions = serde_json::Map::new();
            for id in open {
                match self.dice.next() % 20 {
                    0..=9 => decisions.insert(id, "refuted".into()),
                    10..=16 => decisions.insert(id, "confirmed".into()),
                    _ => None,
                };
            }
            return json!({"decisions": decisions});
        }
        match self.dice.next() % 10 {
            0..=5 => json!({"findings": [], "undecided": []}),
            6 => json!({"findings": ["S2-major"], "undecided": []}),
            7 => json!({"findings": ["S1-stop-the-line", "S3-minor"], "undecided": []}),
            8 => json!({"findings": ["S3-minor"], "undecided": []}),
            _ => json!({"findings": [], "undecided": ["E1"]}),
        }
    }

    /// `stage::land::perform`: the landing step's outcome, and where the lane goes.
    fn sync(&mut self, lane: &str, step: &StepKey) {
        let failed = self.budget.mishaps > 0 && self.dice.chance(2);
        let moved = !failed
            && matches!(step, StepKey::Land(_))
            && self.budget.target_moves > 0
            && self.dice.chance(15);
        let waits = !failed
            && *step == StepKey::Retire
            && self.case.land_mode == "pr"
            && self.budget.pr_waits > 0
            && self.dice.chance(40);
        let merged = self.dice.chance(30);
        self.budget.mishaps -= u32::from(failed);
        self.budget.target_moves -= u32::from(moved);
        self.budget.pr_waits -= u32::from(waits);
        let arm_auto = self.case.arm_auto;
        let again = |new_round: bool| {
            let o = json!({"again": true, "new_round": new_round});
            (StepStatus::Failed, o)
        };
        let down = !failed && !moved && !waits && self.outage();
        if down {
            self.rate_limited();
        }
        let (status, outcome): (StepStatus, Value) = if down {
            let o = json!({"again": true, "new_round": false, "unreachable": "down"});
            (StepStatus::Failed, o)
        } else if failed {
            (StepStatus::Failed, json!({"error": "the forge said no"}))
        } else if moved {
            again(true)
        } else if waits {
            again(false)
        } else {
            let o = match step {
                StepKey::Integrate(_) => json!({"merged": merged}),
                StepKey::Land(_) => json!({"commit": "l1"}),
                StepKey::PrOpen => json!({"url": "u"}),
                StepKey::PrArm => json!({"armed": true}),
                StepKey::Retire => json!({"retired": true}),
                _ => json!({"commit": "t1"}),
            };
            (StepStatus::Done, o)
        };
        let l = self.lane_mut(lane);
        let record = l.record_mut(step).expect("marked");
        finish(record, status, outcome);
        if status == StepStatus::Done {
            if let Some(mv) = after_land_step(step, arm_auto) {
                apply_move(l, mv);
            }
        }
    }

    /// `stage::receipt::finish_receipt`: every gap at once, then `after_receipt`.
    fn finish_receipt(&mut self, lane: &str, v: &DecideView) {
        let shape = self.case.dod_shape.clone();
        let applied = self.dice.chance(70);
        let validators = self.case.validators.clone();
        let l = self.lane_mut(lane);
        let checks = l
            .record(&StepKey::Receipt)
            .and_then(|r| r.outcome.clone())
            .unwrap_or(Value::Null);
        let mut missing: Vec<String> = checks["missing"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m.as_str().map(str::to_owned))
            .collect();
        for (i, len) in shape.iter().enumerate() {
            for j in 0..*len {
                let key = StepKey::Dod { seq: i, cmd: j };
                if let Some(r) = l.record(&key).filter(|r| r.status == StepStatus::Done) {
                    let code = r.outcome.as_ref().and_then(|o| o["exit_code"].as_i64());
                    if code != Some(0) {
                        missing.push(format!("`{key}` exited {code:?}, expected [0]"));
                    }
                }
            }
        }
        let handback = checks["handback"].as_str().map(str::to_owned);
        let verified = missing.is_empty() && handback.is_none();
        let record = l.record_mut(&StepKey::Receipt).expect("the receipt");
        let status = if verified {
            StepStatus::Done
        } else {
            StepStatus::Failed
        };
        finish(
            record,
            status,
            json!({"verified": verified, "missing": missing}),
        );
        let tests_refused = l
            .record(&StepKey::TestCheck)
            .and_then(|r| r.outcome_as::<crate::run::outcome::TestCheckOutcome>())
            .as_ref()
            .and_then(tester::refused);
        let found = ReceiptFound {
            tests_refused: tests_refused.as_deref(),
            replaced: None,
            escalation: None,
            verified,
            handback: handback.as_deref(),
            missing: &missing,
        };
        let mv = after_receipt(l, v, &found);
        if verified {
            // The fix round's dispositions, now facts of the branch.
            for f in l.findings.iter_mut().filter(|f| f.status == "open") {
                f.status = if applied { "applied" } else { "rejected" }.into();
            }
            if mv == LaneMove::To(Stage::Validate) && l.validators.is_empty() {
                l.validators = validators;
            }
        }
        apply_move(l, mv);
    }

    /// `stage::judge::judge`: findings minted from the answers, then `after_judge`.
    fn judge(&mut self, lane: &str, v: &DecideView) {
        let names = self.pinned(self.run.lane(lane).expect("lane"));
        let l = self.lane_mut(lane);
        let attempt = l.attempt;
        let mut undecided: Vec<String> = Vec::new();
        for name in names {
            let answer = l
                .outcome(&StepKey::Validate(name.clone()))
                .map(|o| o["answer"].clone())
                .unwrap_or(Value::Null);
            for severity in answer["findings"].as_array().into_iter().flatten() {
                let severity = severity.as_str().unwrap_or("S2-major");
                let status = if severity.starts_with("S3") {
                    "noted"
                } else {
                    "open"
                };
                let n = l.findings.len() + 1;
                let f: Finding =
                    crate::run::decide::tests::finding(&l.id, n, attempt, severity, status);
                l.findings.push(f);
            }
            for e in answer["undecided"].as_array().into_iter().flatten() {
                let e = e.as_str().unwrap_or("E1").to_owned();
                if !undecided.contains(&e) {
                    undecided.push(e);
                }
            }
        }
        let mut record = super::started_record(StepKey::Judge, attempt, None);
        record.pid = None;
        finish(
            &mut record,
            StepStatus::Done,
            json!({"undecided": undecided}),
        );
        replace(l, record);
        let mv = after_judge(l, v, &undecided);
        apply_move(l, mv);
        self.run_blocked(lane);
    }

    /// `stage::refute::finish_refute`: refuted findings close, then `resolve`.
    fn finish_refute(&mut self, lane: &str, v: &DecideView) {
        let l = self.lane_mut(lane);
        let attempt = l.attempt;
        let decisions = l
            .outcome(&StepKey::Refute)
            .map(|o| o["answer"]["decisions"].clone())
            .unwrap_or(Value::Null);
        for f in l
            .findings
            .iter_mut()
            .filter(|f| f.round == attempt && f.status == "open")
        {
            if decisions[&f.id] == "refuted" {
                f.status = "refuted".into();
            }
        }
        let undecided: Vec<String> = l
            .outcome(&StepKey::Judge)
            .and_then(|o| o["undecided"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|e| e.as_str().map(str::to_owned))
            .collect();
        let mv = resolve(l, v, &undecided);
        apply_move(l, mv);
        self.run_blocked(lane);
    }

    /// A lane that judging or refuting blocked blocks its run (`stage::judge::run_blocked`).
    fn run_blocked(&mut self, lane: &str) {
        if self
            .run
            .lane(lane)
            .is_some_and(|l| l.stage == Stage::Blocked)
        {
            self.lane_blocked_the_run();
        }
    }

    /// A lane blocked: the run is blocked (`settle` lets it go on if another lane can move); once
    /// every lane is final, it ends as its lanes say (SPEC 23.6). Outside decide, the stepper
    /// sets `blocked` whatever the other lanes are (`under_lock.rs` at `Next::Block`,
    /// `stage::judge::run_blocked`, `stepper::blocked`) and `settle` leaves a run whose lanes are
    /// all final as it is: a run whose last lane blocks after another was handed back stays
    /// `blocked` where SPEC 23.6 and `run_status` say `handback`. The model asks `run_status`.
    pub(super) fn lane_blocked_the_run(&mut self) {
        if self.run.lanes.iter().all(|l| l.stage.is_final()) {
            let status = run_status(&self.run, &self.view(), &super::expected);
            if status.is_ended() {
                self.end_run(status);
            } else {
                self.run.status = status;
            }
        } else {
            self.run.status = RunStatus::Blocked;
        }
    }

    /// The host hands in what its agents did (`implement receipt`), each when it is due.
    pub(super) fn host_hands_in(&mut self) {
        if self.run.status.is_ended() {
            return;
        }
        let t = self.t;
        for l in &mut self.run.lanes {
            let attempt = l.attempt;
            for s in l.steps.iter_mut().filter(|s| {
                s.attempt == attempt
                    && s.status == StepStatus::Started
                    && flag(s, "handed")
                    && !flag(s, "finished")
            }) {
                let due = s.nonce.as_ref().and_then(|n| self.host_due.get(n));
                if due.is_none_or(|d| *d > t) {
                    continue;
                }
                if s.step == StepKey::Implement && l.stage == Stage::Implement {
                    finish(s, StepStatus::Done, json!({"receipt_path": "r.json"}));
                    apply_move(l, after_implementer());
                    break;
                }
                if s.step.is_validator() && matches!(l.stage, Stage::Validate | Stage::Refute) {
                    if let Some(Value::Object(o)) = s.outcome.as_mut() {
                        o.insert("finished".into(), json!({"host": true}));
                    }
                    s.pid = None;
                }
            }
        }
    }

    /// What finished activities say (`observe::observe`); a synchronous step whose call died has
    /// its owner cleared (every owner the model left is dead: its calls do not overlap).
    pub(super) fn observe(&mut self) {
        let (t, driver, validators) = (self.t, self.case.driver, self.case.validator_driver);
        let mut limited = false;
        for l in &mut self.run.lanes {
            let attempt = l.attempt;
            for s in l
                .steps
                .iter_mut()
                .filter(|s| s.status == StepStatus::Started)
            {
                let validator_process = s.step.is_validator()
                    && validators == Driver::Process
                    && s.nonce.is_some()
                    && !flag(s, "finished");
                let activity = (s.step == StepKey::Implement && driver == Driver::Process)
                    || (s.step.runs_once() && s.nonce.is_some())
                    || s.step.is_dod()
                    || validator_process;
                if !activity {
                    s.pid = None;
                    continue;
                }
                let Some(n) = s.nonce.clone().filter(|_| s.attempt == attempt) else {
                    continue;
                };
                let found = self.world.iter().find(|a| a.nonce == n);
                match found {
                    Some(a) if a.done_at > t => {}
                    Some(a) if a.exit.is_some() && validator_process => {
                        let o = s.outcome.get_or_insert_with(|| json!({}));
                        o["finished"] = json!({"exit_code": a.exit});
                        s.pid = None;
                    }
                    Some(a) if a.rate_limited => {
                        limited = true;
                        finish(s, StepStatus::Failed, json!({"rate_limited": true}));
                    }
                    Some(Activity {
                        exit: Some(code), ..
                    }) => {
                        finish(s, StepStatus::Done, json!({"exit_code": code}));
                    }
                    // Never spawned (the call died first): its supervisor never registered.
                    None if s.step.runs_once() => finish(
                        s,
                        StepStatus::Failed,
                        json!({"crashed": true, "registered": false}),
                    ),
                    // Gone without an outcome, or never registered: a crash.
                    _ => finish(s, StepStatus::Failed, json!({"crashed": true})),
                }
            }
        }
        if limited {
            self.rate_limited();
        }
    }

    /// `stage::tester`: the test writer launched (an agent: it may be rate limited, crash or
    /// exit), or what it changed checked (now and then refused: it left the worktree dirty).
    fn tester(&mut self, lane: &str, next: &tester::TesterNext) {
        match next {
            tester::TesterNext::Launch => {
                let limited = self.budget.rate_limits > 0 && self.dice.chance(8);
                self.budget.rate_limits -= u32::from(limited);
                let exit = (!self.dice.chance(10)).then_some(0);
                self.spawn(lane, &StepKey::TestWrite, exit, limited, true);
            }
            tester::TesterNext::Check => {
                let dirty = self.dice.chance(15);
                let l = self.lane_mut(lane);
                let record = l.record_mut(&StepKey::TestCheck).expect("marked");
                finish(
                    record,
                    StepStatus::Done,
                    json!({"from": "a", "head": "b", "commits": ["b"], "denied": [], "dirty": dirty}),
                );
            }
        }
    }

    /// `stage::claims::renew`: the remote may be down (the run backs off), and a renewal may find
    /// another machine holding a unit (a lane's, or now and then the run's own).
    fn renew_claims(&mut self) {
        if self.outage() {
            self.rate_limited();
            return;
        }
        let kept = self.run.claims.get_or_insert_with(Default::default);
        if self.budget.losses > 0 && self.dice.chance(30) {
            self.budget.losses -= 1;
            let live: Vec<String> = std::iter::once(self.run.unit.clone())
                .chain(
                    self.run
                        .lanes
                        .iter()
                        .filter(|l| !l.stage.is_final())
                        .map(|l| l.unit.clone()),
                )
                .collect();
            let unit = live[self.dice.next() as usize % live.len()].clone();
            kept.lost.insert(unit, "another machine holds it".into());
        }
        kept.now = false;
        self.renew_at = self.t + 5 + self.dice.upto(30);
    }

    /// The remote cannot be reached this time (while the budget of outages lasts).
    fn outage(&mut self) -> bool {
        let down = self.budget.outages > 0 && self.dice.chance(10);
        self.budget.outages -= u32::from(down);
        down
    }

    fn rate_limited(&mut self) {
        self.run.paced += 1;
        self.eligible_at = self.t + self.dice.upto(4);
    }

    /// A person, while the run goes on: pauses it for a few calls, or discards a lane.
    pub(super) fn person_during(&mut self) {
        if self.paused_for > 0 {
            self.paused_for -= 1;
            if self.paused_for == 0 && self.run.status == RunStatus::Paused {
                // `iced run resume`: it lifts the pace too.
                self.run.status = RunStatus::Running;
                self.eligible_at = 0;
            }
            return;
        }
        if self.budget.person == 0 || self.run.status != RunStatus::Running || !self.dice.chance(2)
        {
            return;
        }
        self.budget.person -= 1;
        if self.dice.chance(60) {
            self.run.status = RunStatus::Paused;
            self.paused_for = self.dice.upto(3) as u32;
        } else {
            self.discard();
        }
    }

    /// A person, once the run is blocked: resumes it, releases a lane that holds it, or discards
    /// a lane. False when nobody acts and the run stays as it ended.
    pub(super) fn person_after(&mut self) -> bool {
        if self.run.status != RunStatus::Blocked || self.budget.person == 0 || !self.dice.chance(60)
        {
            return false;
        }
        self.budget.person -= 1;
        match self.dice.next() % 3 {
            0 => self.resume(),
            1 => {
                let held = self.run.lanes.find_mut(|l| {
                    matches!(l.stage, Stage::Blocked | Stage::Handback) && !l.released
                });
                let Some(l) = held else { return false };
                l.released = true;
                self.run.status = RunStatus::Running;
                true
            }
            _ => self.discard(),
        }
    }

    /// `iced run discard`: a lane not delivered and not landing leaves the run; its activities
    /// are stopped.
    fn discard(&mut self) -> bool {
        let pick = self.dice.next() as usize;
        let open: Vec<usize> = (0..self.run.lanes.len())
            .filter(|i| {
                let l = &self.run.lanes[*i];
                !matches!(l.stage, Stage::Delivered | Stage::Discarded | Stage::Retire)
                    && !landing_begun(l)
            })
            .collect();
        let Some(&i) = open.get(pick % open.len().max(1)) else {
            return false;
        };
        let l = &mut self.run.lanes[i];
        l.stage = Stage::Discarded;
        l.reason = Some("discarded by a person".into());
        let nonces: Vec<String> = l.steps.iter().filter_map(|s| s.nonce.clone()).collect();
        for a in self.world.iter_mut().filter(|a| nonces.contains(&a.nonce)) {
            a.done_at = a.done_at.min(self.t);
            a.exit = None;
        }
        self.end_stranded();
        if self.run.status == RunStatus::Blocked {
            self.run.status = RunStatus::Running;
        }
        true
    }

    /// `iced run resume` on a blocked run (`control::set_paused`): a fresh attempt of each blocked
    /// lane, or, for one blocked while landing, a new landing round, or, for one whose delivery
    /// failed for the loop's own reasons, that delivery again.
    fn resume(&mut self) -> bool {
        let armed = self
            .run
            .lanes
            .iter()
            .any(|l| l.stage == Stage::Blocked && l.is_done(&StepKey::PrArm));
        if armed {
            // Refused (`pr-armed`): nothing changes.
            return false;
        }
        self.eligible_at = 0;
        if let Some(kept) = self.run.claims.as_mut().filter(|k| !k.lost.is_empty()) {
            kept.lost.clear();
            kept.now = true;
        }
        for l in self.run.lanes.iter_mut_where(|l| l.stage == Stage::Blocked) {
            // The rule `control` applies: a delivery that failed for the loop's own reasons is
            // made again.
            if crate::run::decide::deliver_again(l).is_some() {
                continue;
            }
            if l.is_done(&StepKey::Deliver) {
                let attempt = l.attempt;
                l.steps.retain(|s| {
                    !(s.attempt == attempt
                        && s.status == StepStatus::Failed
                        && matches!(
                            s.step,
                            StepKey::PushBranch
                                | StepKey::PrOpen
                                | StepKey::PrArm
                                | StepKey::Retire
                        ))
                });
                l.stage = Stage::Land;
                l.released = false;
                l.land_round = l.land_round.max(1) + 1;
                l.crashes = 0;
                let mut record = started_record(StepKey::Resume(l.land_round), attempt, None);
                record.pid = None;
                finish(&mut record, StepStatus::Done, json!({"by": "person"}));
                l.steps.push(record);
                continue;
            }
            l.released = false;
            l.attempts_before = l.attempt;
            let had_worktree = l.worktree.is_some();
            new_attempt(l, "resumed".into(), false);
            l.crashes = 0;
            if !had_worktree {
                l.steps.retain(|s| s.step != StepKey::Worktree);
            }
        }
        self.run.status = RunStatus::Running;
        true
    }
}
