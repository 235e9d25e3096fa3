//! The closed vocabularies of a unit: type, tier, risk, status, lint stage, autonomy, and the
//! status machine with its owners. Pure data; nothing here reads a file.

use serde::Serialize;
use std::fmt;
use std::str::FromStr;

macro_rules! closed_enum {
    ($(#[$meta:meta])* $name:ident { $($variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
        #[serde(rename_all = "lowercase")]
        pub enum $name { $($variant),+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }

            /// The allowed values, comma-separated, for messages.
            pub fn choices() -> String {
                Self::ALL.iter().map(|v| v.as_str()).collect::<Vec<_>>().join(", ")
            }
        }

        impl FromStr for $name {
            type Err = ();
            fn from_str(s: &str) -> Result<Self, ()> {
                match s { $($text => Ok($name::$variant),)+ _ => Err(()) }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

closed_enum!(
    /// What kind of work a unit is.
    UnitType { Project => "project", Feature => "feature", Bug => "bug", Review => "review", Chore => "chore" }
);

closed_enum!(
    /// How big a unit is: depth of the process, not a different process.
    Tier { S => "S", M => "M", L => "L", Xl => "XL" }
);

closed_enum!(Risk { Low => "low", Medium => "medium", High => "high" });

closed_enum!(
    /// A unit's lifecycle state.
    Status {
        Draft => "draft",
        Approved => "approved",
        Building => "building",
        Verifying => "verifying",
        Done => "done",
        Accepted => "accepted",
        Blocked => "blocked",
        Rejected => "rejected",
    }
);

closed_enum!(
    /// Which rule set lint applies.
    Stage { Draft => "draft", Signoff => "signoff", Accept => "accept", Validate => "validate" }
);

closed_enum!(
    /// The kind of proof an expectation names.
    VerifyKind { Test => "test", Check => "check", Metric => "metric", Manual => "manual" }
);

closed_enum!(
    /// The source a context line cites.
    ContextTag { Code => "code", Product => "product", Knowledge => "knowledge", Assumed => "assumed", Parent => "parent" }
);

impl UnitType {
    pub fn default_tier(self) -> Tier {
        match self {
            UnitType::Project => Tier::L,
            UnitType::Feature => Tier::M,
            UnitType::Bug | UnitType::Review | UnitType::Chore => Tier::S,
        }
    }

    /// The type a one-line request names with its first word (`fix` is a bug), if any.
    pub fn from_leading_word(word: &str) -> Option<UnitType> {
        match word.to_lowercase().as_str() {
            "bug" | "fix" => Some(UnitType::Bug),
            "feature" => Some(UnitType::Feature),
            "project" => Some(UnitType::Project),
            "review" => Some(UnitType::Review),
            "chore" => Some(UnitType::Chore),
            _ => None,
        }
    }
}

impl Status {
    /// Past sign-off: the contract hash must hold.
    pub fn is_past_approval(self) -> bool {
        matches!(
            self,
            Status::Approved
                | Status::Building
                | Status::Verifying
                | Status::Done
                | Status::Accepted
        )
    }

    /// Accepted and rejected units are closed: no verb edits them.
    pub fn is_terminal(self) -> bool {
        matches!(self, Status::Accepted | Status::Rejected)
    }

    /// The statuses this one may move to.
    pub fn next(self) -> &'static [Status] {
        use Status::*;
        match self {
            Draft => &[Approved, Rejected],
            Approved => &[Building, Rejected],
            Building => &[Verifying, Blocked],
            Verifying => &[Done, Building, Blocked],
            Done => &[Accepted, Building],
            Blocked => &[Draft, Approved, Building, Rejected],
            Accepted | Rejected => &[],
        }
    }

    pub fn can_move_to(self, to: Status) -> bool {
        self.next().contains(&to)
    }
}

/// Who asks for a status change. Some transitions belong to one party only: a person signs off and
/// accepts (or the autonomy rule does it for them), and only the verifier declares work done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Actor {
    Person,
    AutonomyRule,
    Loop,
    Verifier,
}

impl Actor {
    pub fn as_str(self) -> &'static str {
        match self {
            Actor::Person => "a person",
            Actor::AutonomyRule => "the autonomy rule",
            Actor::Loop => "the build loop",
            Actor::Verifier => "the verifier",
        }
    }
}

/// Who may make the move `from -> to`, for a transition the machine allows.
pub fn owners(from: Status, to: Status) -> &'static [Actor] {
    use Actor::*;
    use Status::*;
    match (from, to) {
        (Draft, Approved) | (Done, Accepted) => &[Person, AutonomyRule],
        (Verifying, Done) => &[Verifier],
        (Done, Building) | (_, Rejected) => &[Person],
        (Blocked, Draft | Approved | Building) => &[Person, Loop],
        _ => &[Loop],
    }
}

/// Why a status change is not allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransitionError {
    NotAllowed {
        from: Status,
        to: Status,
    },
    NotOwner {
        from: Status,
        to: Status,
        actor: Actor,
    },
}

impl fmt::Display for TransitionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TransitionError::NotAllowed { from, to } => {
                let next = from.next();
                if next.is_empty() {
                    write!(f, "a `{from}` unit is closed and cannot move to `{to}`")
                } else {
                    let next: Vec<_> = next.iter().map(|s| format!("`{s}`")).collect();
                    write!(
                        f,
                        "a `{from}` unit cannot move to `{to}` (it can move to {})",
                        next.join(", ")
                    )
                }
            }
            TransitionError::NotOwner { from, to, actor } => {
                let who: Vec<_> = owners(*from, *to).iter().map(|a| a.as_str()).collect();
                write!(
                    f,
                    "`{from}` -> `{to}` belongs to {}, not {}",
                    who.join(" or "),
                    actor.as_str()
                )
            }
        }
    }
}

/// Check one status change against the machine and its owners.
pub fn check_transition(from: Status, to: Status, actor: Actor) -> Result<(), TransitionError> {
    if !from.can_move_to(to) {
        return Err(TransitionError::NotAllowed { from, to });
    }
    if !owners(from, to).contains(&actor) {
        return Err(TransitionError::NotOwner { from, to, actor });
    }
    Ok(())
}

/// Autonomy levels: 0 Assist, 1 Gated, 2 Trusted, 3 Autonomous.
pub const MAX_AUTONOMY: i64 = 3;

pub fn autonomy_name(level: i64) -> &'static str {
    match level {
        0 => "Assist",
        1 => "Gated",
        2 => "Trusted",
        3 => "Autonomous",
        _ => "invalid",
    }
}

/// `min(unit autonomy, maxAutonomy)`, at most 1 when the risk is high, never below 0. A unit
/// without a valid autonomy takes the configured default.
pub fn effective_autonomy(
    unit_autonomy: Option<i64>,
    risk: Option<Risk>,
    config_autonomy: i64,
    max_autonomy: i64,
) -> i64 {
    let own = unit_autonomy.unwrap_or(config_autonomy);
    let mut level = own.min(max_autonomy).max(0);
    if risk == Some(Risk::High) {
        level = level.min(1);
    }
    level
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seed's allowed transitions, verbatim; everything else is refused.
    const ALLOWED: &[(&str, &str)] = &[
        ("draft", "approved"),
        ("draft", "rejected"),
        ("approved", "building"),
        ("approved", "rejected"),
        ("building", "verifying"),
        ("building", "blocked"),
        ("verifying", "done"),
        ("verifying", "building"),
        ("verifying", "blocked"),
        ("done", "accepted"),
        ("done", "building"),
        ("blocked", "draft"),
        ("blocked", "approved"),
        ("blocked", "building"),
        ("blocked", "rejected"),
    ];

    #[test]
    fn exactly_the_seed_transitions_are_allowed() {
        for &from in Status::ALL {
            for &to in Status::ALL {
                let listed = ALLOWED.contains(&(from.as_str(), to.as_str()));
                assert_eq!(from.can_move_to(to), listed, "{from} -> {to}");
            }
        }
    }

    #[test]
    fn owners_guard_signoff_acceptance_and_done() {
        use Actor::*;
        use Status::*;
        assert!(check_transition(Draft, Approved, Person).is_ok());
        assert!(check_transition(Draft, Approved, AutonomyRule).is_ok());
        assert!(check_transition(Draft, Approved, Loop).is_err());
        assert!(check_transition(Done, Accepted, Loop).is_err());
        assert!(check_transition(Verifying, Done, Verifier).is_ok());
        assert!(check_transition(Verifying, Done, Loop).is_err());
        assert!(check_transition(Verifying, Done, Person).is_err());
        assert!(check_transition(Done, Building, Person).is_ok());
        assert!(check_transition(Approved, Building, Loop).is_ok());
        assert!(check_transition(Building, Rejected, Person).is_err());
        let e = check_transition(Accepted, Building, Person).unwrap_err();
        assert!(e.to_string().contains("closed"), "{e}");
    }

    #[test]
    fn effective_autonomy_caps() {
        assert_eq!(effective_autonomy(Some(3), Some(Risk::Low), 1, 3), 3);
        assert_eq!(effective_autonomy(Some(3), Some(Risk::Low), 1, 2), 2);
        assert_eq!(effective_autonomy(Some(3), Some(Risk::High), 1, 3), 1);
        assert_eq!(effective_autonomy(None, Some(Risk::Medium), 2, 3), 2);
        assert_eq!(effective_autonomy(Some(-4), None, 1, 3), 0);
    }

    #[test]
    fn tier_defaults_and_leading_words() {
        assert_eq!(UnitType::Bug.default_tier(), Tier::S);
        assert_eq!(UnitType::Chore.default_tier(), Tier::S);
        assert_eq!(UnitType::Review.default_tier(), Tier::S);
        assert_eq!(UnitType::Feature.default_tier(), Tier::M);
        assert_eq!(UnitType::Project.default_tier(), Tier::L);
        assert_eq!(UnitType::from_leading_word("Fix"), Some(UnitType::Bug));
        assert_eq!(UnitType::from_leading_word("add"), None);
    }
}
