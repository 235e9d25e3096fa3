//! The words for what a call did and what its caller does next (`run::then::Then`): the `next`
//! line of `implement step`, `implement receipt` and `build`, in text and JSON alike.

use crate::run::decide::Waiting;
use crate::run::then::{Ending, Landing, ProjectStands, Redo, Retirement, Then};

pub fn words(then: &Then) -> String {
    match then {
        Then::NoLiveRun { last: None } => "no live run: start one with `iced build <id>`".into(),
        Then::NoLiveRun {
            last: Some((run, status)),
        } => format!(
            "no live run; the latest, `{run}`, is {} (`iced run show {run}`): start another with `iced build <id>`",
            status.as_str()
        ),
        Then::Nothing => String::new(),
        Then::Paused { run } => {
            format!("run `{run}` is paused: `iced run resume {run}` lets it go on")
        }
        Then::Wait { why } => format!("{}; call again later", waiting(why)),
        Then::Stalled { step, secs } => format!(
            "`{step}` has made no progress for {secs} s: the call doing it may be stuck (`iced run show` names it); still waiting on it"
        ),
        Then::Reason(reason) => reason.clone(),
        Then::FixThenResume { reason, run } => fix_then_resume(reason, run),
        Then::Escalated {
            reason,
            unit,
            questions,
            by,
        } => {
            let how = if *questions {
                format!("answer each with `iced answer {unit} <Q id> <text>`")
            } else {
                format!("`iced escalation apply {unit}`, `edit {unit} --file <path>` or `reject {unit} <guidance>`")
            };
            format!("{reason}; the {by} waits for a person: `iced escalation show {unit}`, then {how}; then `iced build {unit}` resumes")
        }
        Then::ClaimsRenewed { units, lost: 0 } => {
            format!("the run's claims on the remote are renewed ({}); call again", count(*units, "unit"))
        }
        Then::ClaimsRenewed { units, lost } => format!(
            "the run's claims on the remote are renewed ({}), and {} lost: their lanes block; call again",
            count(*units, "unit"),
            count(*lost, "claim")
        ),
        Then::ClaimsNotRenewed { why, until } => format!(
            "the run's claims on the remote could not be renewed: {why}; nothing moves before they are, tried again from {until}: call again"
        ),
        Then::BriefWritten => "the brief is written; call again".into(),
        Then::WorktreeReady => "the worktree is ready; call again".into(),
        Then::WorktreeFailed { error } => format!("the worktree could not be made: {error}"),
        Then::ImplementerRunning => "the implementer is running; call again later".into(),
        Then::DodRunning => "the definition-of-done commands are running; call again later".into(),
        Then::ReceiptChecksRecorded => "the receipt's own checks are recorded; call again".into(),
        Then::TestsChecked => "what the test writer changed is checked; call again".into(),
        Then::ReceiptIn => "the receipt is in; call `iced implement step` until the run says delivered, blocked or start_agent".into(),
        Then::ReceiptVerified => "the receipt verified; call again to deliver".into(),
        Then::ReceiptToValidators => {
            "the receipt verified; independent validators judge it next: call again".into()
        }
        Then::ReceiptNotVerified { attempt } => {
            format!("the receipt did not verify; attempt {attempt} starts: call again")
        }
        Then::AttemptStarts { attempt, reason } => {
            format!("attempt {attempt} starts ({reason}); call again")
        }
        Then::RateLimited {
            key,
            until,
            unreachable: None,
        } => format!("`{key}` was rate limited; it runs again from {until}: call again"),
        Then::RateLimited {
            key,
            until,
            unreachable: Some(why),
        } => format!("`{key}` did not start: {why}; it runs again from {until}: call again"),
        Then::Crashed { key } => format!("`{key}` crashed; it runs again: call again"),
        Then::ToRefuter => "blocking findings go to a refuter first; call again".into(),
        Then::PlanChecked {
            step,
            refused: None,
        } => format!("the loop checked what `{step}` wrote; call again"),
        Then::PlanChecked {
            step,
            refused: Some(why),
        } => format!("the loop did not take what `{step}` wrote: {why}; call again"),
        Then::PlanDecided {
            approved: true,
            unit,
        } => format!("the loop approved `{unit}` (intent/{unit}/plan-decision.md); its build goes on in this run"),
        Then::PlanDecided {
            approved: false,
            unit,
        } => format!("the loop did not approve `{unit}`: intent/{unit}/plan-decision.md says why; call again"),
        Then::ValidatorsPass => "the validators pass it; call again to deliver".into(),
        Then::FixRound { attempt } => format!("fix round: attempt {attempt} starts; call again"),
        Then::AllRefuted => "every blocking finding was refuted; call again to deliver".into(),
        Then::ConfirmedFixRound { attempt } => format!(
            "confirmed findings go to a fix round: attempt {attempt} starts; call again"
        ),
        Then::LandAgain { round } => {
            format!("the target moved under the landing; round {round} brings it in again")
        }
        Then::MovedOn { step } => format!("`{step}` moved on while this call worked; call again"),
        Then::StartImplementer => "start a fresh implementer in `worktree` with `brief`; it writes its report to `receipt_path`; then run `iced implement receipt <receipt_path>`".into(),
        // Paths from the repository root (SPEC 20.2); the lens is the answer's own key.
        Then::StartFromBrief { role, receipt } => format!(
            "start a fresh {role} on `brief`; when it ends, run `iced implement receipt {receipt} --until-host`"
        ),
        Then::StartValidator { role, lens } => format!(
            "start a fresh, read-only {role} ({lens}) in `worktree` with `brief`; it writes its answer to `receipt_path`; then run `iced implement receipt <receipt_path>`"
        ),
        Then::ValidatorsPrepared { refuter: false } => {
            "the validators are prepared; call again".into()
        }
        Then::ValidatorsPrepared { refuter: true } => "the refuter is prepared; call again".into(),
        Then::LaneMovedAfterReceipt => {
            "the lane moved after its receipt; nothing unjudged is validated: call again".into()
        }
        Then::ValidatorsRunning { refuter: false } => {
            "the validators are running; call again later".into()
        }
        Then::ValidatorsRunning { refuter: true } => {
            "the refuter is running; call again later".into()
        }
        Then::ValidatorFailed { key, why } => format!("`{key}` failed ({why}); it runs again"),
        Then::ValidatorChangedTree { key, moved } => format!(
            "`{key}` changed its tree ({}); its answer is thrown away",
            moved.join("; ")
        ),
        Then::ValidatorAnswered { key } => format!("`{key}` answered; call again"),
        Then::AnswerIn { key } => {
            format!("the answer of `{key}` is in; call `iced implement step`")
        }
        Then::ValidatorRedone { key, why } => format!(
            "{}; call again",
            match why {
                Redo::ChangedTree => format!("`{key}` changed its tree; its answer is thrown away and it runs again on a clean checkout"),
                Redo::RateLimited => format!("`{key}` was rate limited; it runs again once the run may launch agents"),
                Redo::RemoteUnreachable => format!("`{key}` did not start: the remote could not be reached; it runs again once the run may launch agents"),
                Redo::Crashed => format!("`{key}` crashed; it runs again"),
            }
        ),
        Then::DeliveredOnLane => "delivered on the lane branch; call again to finish".into(),
        Then::CloseCommitted { mode } => format!("the close is committed; it lands by `{mode}` next"),
        Then::LaneMovedAfterJudged { commits } => format!(
            "the lane moved after it was judged ({commits} commit(s) added); nothing is delivered"
        ),
        Then::DeliverFailed { error } => format!("delivering failed: {error}"),
        Then::Landing(landing) => landing_words(landing),
        Then::Ended(ending) => ending_words(ending),
        Then::Project {
            delivered,
            lanes,
            discarded,
            stands,
        } => {
            let tally = format!(
                "{delivered} of {lanes} lanes delivered{}",
                match discarded {
                    0 => String::new(),
                    n => format!(", {n} discarded"),
                }
            );
            match stands {
                ProjectStands::Tally => tally,
                ProjectStands::HandedBack { lane, reason } => {
                    format!("{tally}; `{lane}` was handed back: {reason}")
                }
                ProjectStands::Abandoned => "the run was abandoned".into(),
                ProjectStands::Blocked {
                    run,
                    lane,
                    stage,
                    reason,
                } => {
                    let why = match stage {
                        Some(stage) => format!("lane `{lane}` is {stage}: {reason}"),
                        None => format!("lane `{lane}` cannot move"),
                    };
                    format!("{tally}; {why}; the other lanes wait before landing. `iced run release {run} {lane}` lets them land, `iced run discard {run} {lane}` drops it, or fix it and `iced run resume {run}`")
                }
            }
        }
        Then::OthersGoOn {
            lane,
            handed_back,
            then,
        } => format!(
            "lane `{lane}` is {}: {}; the other lanes go on: call again",
            if *handed_back {
                "handed back"
            } else {
                "blocked"
            },
            words(then)
        ),
    }
}

fn landing_words(landing: &Landing) -> String {
    match landing {
        Landing::Integrated { merged: true } => {
            "the target moved: it is merged into the lane and the definition of done runs again"
                .into()
        }
        Landing::Integrated { merged: false } => "the lane contains the target".into(),
        Landing::Based { target, commit } => {
            format!("the lane starts from `{target}` at {commit}")
        }
        Landing::CommitMade => "the landed commit is made".into(),
        Landing::Landed { target } => format!("landed in `{target}`"),
        Landing::BranchPushed => "the lane branch is pushed".into(),
        Landing::PullRequestOpen { url } => format!("pull request {url} is open"),
        Landing::PullRequestArmed { url } => {
            format!("pull request {url} is armed; it lands under the repository's rule")
        }
        Landing::Retired => "the lane is retired: worktree and branch removed".into(),
        Landing::RetiredKept { path } => {
            format!("landed; the worktree `{path}` has uncommitted changes and is kept")
        }
        Landing::Failed { error } => format!("{error}; the lane blocks"),
        Landing::NotYet { why } => why.clone(),
    }
}

fn ending_words(ending: &Ending) -> String {
    let retired = |r: &Retirement| {
        match r {
        Retirement::NotYet => String::new(),
        Retirement::Retired => "; the lane is retired".into(),
        Retirement::Kept { path } => format!(
            "; the worktree `{path}` has uncommitted changes and is kept: clean it, then `iced run retire`"
        ),
    }
    };
    match ending {
        Ending::Landed {
            target,
            commit,
            retired: r,
        } => format!("landed in `{target}` as {commit}{}", retired(r)),
        Ending::LandedByPullRequest { url, retired: r } => {
            format!("landed through pull request {url}{}", retired(r))
        }
        Ending::OnBranch { branch } => {
            format!("delivered on branch `{branch}` (land.mode none: merge it when you are ready)")
        }
        Ending::HandedBack { reason } => format!("handed back: {reason}"),
        Ending::Abandoned => "the run was abandoned".into(),
    }
}

/// Why a lane waits.
pub fn waiting(why: &Waiting) -> String {
    match why {
        Waiting::MakingWorktree => "another call is making the worktree".into(),
        Waiting::Paced { until } => {
            format!("paced: paused until {until}; no agent starts before then")
        }
        Waiting::Unreachable { step, until } => {
            format!("the remote could not be reached; `{step}` runs again from {until}")
        }
        Waiting::Renewing { until } => format!(
            "the run's claims on the remote could not be renewed; nothing moves before they are, tried again from {until}"
        ),
        Waiting::Ceiling { alive } => {
            format!("waits its turn: {alive} agents are alive, the ceiling (pace.agents)")
        }
        Waiting::ImplementerRunning => "the implementer is running".into(),
        Waiting::TestWriterRunning => "the test writer is running".into(),
        Waiting::Delivering => "another call is delivering".into(),
        Waiting::Landed => "the lane has landed".into(),
        Waiting::ValidatorsWorking => "the validators are working".into(),
        Waiting::RefuterWorking => "the refuter is working".into(),
        Waiting::DoingStep { step } => format!("another call is doing `{step}`"),
        Waiting::PullRequestOpen => "the pull request is open".into(),
        Waiting::DodRunning => "the definition-of-done commands are running".into(),
        Waiting::CheckingReceipt => "another call is checking the receipt".into(),
        Waiting::Planning { round } => {
            format!("the planner or the plan reviewers of round {round} are working")
        }
    }
}

/// `n` things, `1 unit` or `3 units`.
fn count(n: usize, thing: &str) -> String {
    if n == 1 {
        format!("1 {thing}")
    } else {
        format!("{n} {thing}s")
    }
}

/// A blocked lane's reason and the resume after the fix; a reason that already says to resume
/// (`restore it and resume`) is given the command only, not the advice a second time.
fn fix_then_resume(reason: &str, run: &str) -> String {
    if reason.contains("resume") {
        format!("{reason} (`iced run resume {run}`)")
    } else {
        format!("{reason}; fix it, then `iced run resume {run}`")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// "fix it, then resume" is said once, never after a reason that says it already.
    #[test]
    fn a_blocked_lanes_remedy_is_said_once() {
        let said = words(&Then::FixThenResume {
            reason: "`validate-full` changed the lane itself: x; restore it and resume".into(),
            run: "r1".into(),
        });
        assert_eq!(
            said,
            "`validate-full` changed the lane itself: x; restore it and resume (`iced run resume r1`)"
        );
        let said = words(&Then::FixThenResume {
            reason: "deliver: git failed".into(),
            run: "r1".into(),
        });
        assert_eq!(
            said,
            "deliver: git failed; fix it, then `iced run resume r1`"
        );
    }
}
