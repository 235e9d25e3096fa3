//! What one call did and what its caller does next, as a value: the `next` of a step report
//! (SPEC 20.2). The core says which; `cli/render/then.rs` holds the words. Reasons the loop
//! recorded (a lane's block or handback reason, a git or forge error, why a landing waits) are data
//! and are carried as they were recorded.

use crate::run::keys::StepKey;
use crate::run::settings::LandMode;

#[derive(Debug, Clone, PartialEq)]
pub enum Then {
    /// No live run; the latest run and how it stands, when there is one (a host whose call was
    /// killed after its run ended learns how it ended).
    NoLiveRun {
        last: Option<(String, crate::run::state::RunStatus)>,
    },
    /// Nothing to add (a run that is running or paused, asked how it ended).
    Nothing,
    Paused {
        run: String,
    },
    /// A lane waits, for the reason `decide` gave.
    Wait {
        why: crate::run::decide::Waiting,
    },
    /// A step another call (or another thread of this one) is doing has made no progress for
    /// longer than its bound, `secs` (SPEC 20.1): said once, and still waited on.
    Stalled {
        step: crate::run::keys::StepKey,
        secs: u64,
    },
    /// A lane's recorded reason (blocked, handed back), as it stands.
    Reason(String),
    /// A lane blocked: its reason, and resuming the run once it is fixed.
    FixThenResume {
        reason: String,
        run: String,
    },
    /// A lane whose implementer stopped for a person (SPEC 20.7): the reason, and the verbs that
    /// answer it (questions are answered; an escalation is applied, edited or rejected).
    Escalated {
        reason: String,
        unit: String,
        questions: bool,
        /// Who stopped: `implementer` or `test writer`.
        by: &'static str,
    },
    BriefWritten,
    WorktreeReady,
    WorktreeFailed {
        error: String,
    },
    ImplementerRunning,
    DodRunning,
    ReceiptChecksRecorded,
    /// The loop checked what the test writer changed (SPEC 20.17).
    TestsChecked,
    /// A host handed its receipt in.
    ReceiptIn,
    ReceiptVerified,
    ReceiptToValidators,
    ReceiptNotVerified {
        attempt: u32,
    },
    AttemptStarts {
        attempt: u32,
        reason: String,
    },
    /// A step that failed through no fault of its lane runs again after the run's backoff:
    /// rate limited, or (`unreachable`, git's error) its remote could not be reached.
    RateLimited {
        key: StepKey,
        until: String,
        unreachable: Option<String>,
    },
    Crashed {
        key: StepKey,
    },
    /// The run's claims on the remote were renewed (SPEC 24.9.1): how many units, and how many
    /// of them were found lost (their lanes block next).
    ClaimsRenewed {
        units: usize,
        lost: usize,
    },
    /// The run's claims on the remote could not be renewed (git's error): it backs off until
    /// `until`, and nothing moves before they are.
    ClaimsNotRenewed {
        why: String,
        until: String,
    },
    ToRefuter,
    /// The loop checked what a planning agent wrote: a draft refused or an answer unusable says
    /// why (SPEC 20.16).
    PlanChecked {
        step: StepKey,
        refused: Option<String>,
    },
    /// The loop decided on the plan: approved (the build goes on in this run), or not.
    PlanDecided {
        approved: bool,
        unit: String,
    },
    ValidatorsPass,
    FixRound {
        attempt: u32,
    },
    AllRefuted,
    ConfirmedFixRound {
        attempt: u32,
    },
    LandAgain {
        round: u32,
    },
    /// Another call recorded this step first; this call's result is not used.
    MovedOn {
        step: StepKey,
    },
    /// The host starts a fresh implementer.
    StartImplementer,
    /// The host starts a fresh agent with `brief`, which says the rest (a small `start_agent`,
    /// SPEC 20.2): its role, and where its report goes.
    StartFromBrief {
        role: &'static str,
        /// The report's path from the repository root.
        receipt: String,
    },
    /// The host starts a fresh, read-only validator (`role`, and its lens or reviewer).
    StartValidator {
        role: &'static str,
        lens: String,
    },
    /// The validators' sandboxes and prompts are made (the refuter's alone, at the refute stage).
    ValidatorsPrepared {
        refuter: bool,
    },
    LaneMovedAfterReceipt,
    ValidatorsRunning {
        refuter: bool,
    },
    ValidatorFailed {
        key: StepKey,
        why: String,
    },
    ValidatorChangedTree {
        key: StepKey,
        moved: Vec<String>,
    },
    ValidatorAnswered {
        key: StepKey,
    },
    /// A host handed a validator's answer in.
    AnswerIn {
        key: StepKey,
    },
    ValidatorRedone {
        key: StepKey,
        why: Redo,
    },
    DeliveredOnLane,
    CloseCommitted {
        mode: LandMode,
    },
    LaneMovedAfterJudged {
        commits: usize,
    },
    DeliverFailed {
        error: String,
    },
    /// A landing step's result.
    Landing(Landing),
    /// How a one-lane run ended.
    Ended(Ending),
    /// How a project run ended or stands.
    Project {
        delivered: usize,
        lanes: usize,
        discarded: usize,
        stands: ProjectStands,
    },
    /// A lane of a project run blocked or was handed back; the run's other lanes go on.
    OthersGoOn {
        lane: String,
        handed_back: bool,
        then: Box<Then>,
    },
}

/// Why a validator step is thrown away and prepared again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Redo {
    ChangedTree,
    RateLimited,
    /// The lane branch could not be published to the remote before it (SPEC 20.19).
    RemoteUnreachable,
    Crashed,
}

/// What a landing step did (SPEC 23.2).
#[derive(Debug, Clone, PartialEq)]
pub enum Landing {
    /// The target was merged into the lane (the definition of done runs again), or the lane
    /// already contained it.
    Integrated {
        merged: bool,
    },
    /// A lane with dependencies starts from the target as they left it.
    Based {
        target: String,
        commit: String,
    },
    CommitMade,
    Landed {
        target: String,
    },
    BranchPushed,
    PullRequestOpen {
        url: String,
    },
    PullRequestArmed {
        url: String,
    },
    Retired,
    RetiredKept {
        path: String,
    },
    /// Failed: the error, and the lane blocks.
    Failed {
        error: String,
    },
    /// Not there yet (the target moved, a pull request waits): why, as recorded.
    NotYet {
        why: String,
    },
}

/// How a one-lane run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Ending {
    Landed {
        target: String,
        commit: String,
        retired: Retirement,
    },
    LandedByPullRequest {
        url: String,
        retired: Retirement,
    },
    OnBranch {
        branch: String,
    },
    HandedBack {
        reason: String,
    },
    Abandoned,
}

/// Whether a delivered lane's worktree and branch are gone.
#[derive(Debug, Clone, PartialEq)]
pub enum Retirement {
    NotYet,
    Retired,
    /// Its worktree had uncommitted changes and is kept until `iced run retire` finds it clean.
    Kept {
        path: String,
    },
}

/// How a project run ended or stands, past its tally.
#[derive(Debug, Clone, PartialEq)]
pub enum ProjectStands {
    /// Delivered, or still going (the tally says it all).
    Tally,
    HandedBack {
        lane: String,
        reason: String,
    },
    Abandoned,
    /// Blocked on `lane`: its stage (blocked, handed back, or none when it simply cannot move) and
    /// reason; the other lanes wait before landing.
    Blocked {
        run: String,
        lane: String,
        stage: Option<&'static str>,
        reason: String,
    },
}
