//! The lines of a state file's short-form lanes, kept by the thread that wrote them (issue 16).
//! In a run of a thousand lanes nearly every lane is ended or waiting, and each save wrote each of
//! them again: a form made and serialised a lane, a thousand times a save, though an ended lane
//! never changes. A line is kept with the lane it was made from and taken again only for a lane
//! equal to that one, so the text written is the text the lane serialises to, whatever changed.
//! The other way, a short form's text read again (another process wrote the file) is taken as
//! the lane this thread read from the same text before: the same handle, so the next save knows
//! it without a look at its fields.

use super::Lane;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

/// At most this many lanes' lines are kept; past it they are all dropped and made again.
const KEPT_AT_MOST: usize = 20_000;

/// A lane as its line was made from it (shared: a lane a transaction did not change is this very
/// one), whether it was in a run of several, and its line (none when the lane is written whole).
struct Kept {
    lane: Arc<Lane>,
    several: bool,
    line: Option<Box<RawValue>>,
}

impl Kept {
    /// Is the line kept the line of `lane`: the very lane it was made from, or one equal to it.
    fn is_of(&self, lane: &Arc<Lane>, several: bool) -> bool {
        self.several == several && (Arc::ptr_eq(&self.lane, lane) || *self.lane == **lane)
    }
}

/// A lane's text this long at most is kept with the lane read from it (a short form is a few
/// hundred bytes; a whole lane at work changes with every step).
const READ_AT_MOST: usize = 2048;

thread_local! {
    static LINES: RefCell<HashMap<String, Kept>> = RefCell::new(HashMap::new());
    static READ: RefCell<HashMap<Box<str>, Arc<Lane>>> = RefCell::new(HashMap::new());
}

/// The lanes this thread read, by their text.
pub(super) struct Read<'a>(&'a mut HashMap<Box<str>, Arc<Lane>>);

impl Read<'_> {
    /// The lane `text` reads as: the one read from the same text before, else `parse`d.
    pub(super) fn lane(
        &mut self,
        text: &str,
        parse: impl Fn(&str) -> Result<Lane, serde_json::Error>,
    ) -> Result<Arc<Lane>, serde_json::Error> {
        if let Some(lane) = self.0.get(text) {
            // Every test and every debug build checks that the lane kept is what the text reads as.
            debug_assert!(
                parse(text).is_ok_and(|read| read == **lane),
                "the lane kept for `{text}` is not what it reads as"
            );
            return Ok(lane.clone());
        }
        let lane = Arc::new(parse(text)?);
        if text.len() <= READ_AT_MOST && may_be_short(&lane) {
            self.0.insert(text.into(), lane.clone());
        }
        Ok(lane)
    }
}

/// `f` given the lanes this thread read before.
pub(super) fn with_read<T>(f: impl FnOnce(&mut Read<'_>) -> T) -> T {
    READ.with_borrow_mut(|read| {
        if read.len() > KEPT_AT_MOST {
            read.clear();
        }
        f(&mut Read(read))
    })
}

/// Whether a lane may have a short form: ended, or briefing or planning (waiting). Only these are
/// kept; a lane at work changes with every step and is written whole.
pub(super) fn may_be_short(lane: &Lane) -> bool {
    lane.ended.is_some() || matches!(lane.stage, super::Stage::Brief | super::Stage::Plan)
}

/// `f` given `lanes`' lines, in their order (`None`: the lane is written whole), each made by
/// `make` only when this thread has not made it for the lane as it is now. A lane whose id another
/// of `lanes` has too gets its line made afresh, never one kept for the other.
pub(super) fn with_lines<T>(
    lanes: &[Arc<Lane>],
    several: bool,
    make: impl Fn(&Lane) -> Option<Box<RawValue>>,
    f: impl FnOnce(&[Option<Cow<'_, RawValue>>]) -> T,
) -> T {
    LINES.with_borrow_mut(|lines| {
        if lines.len() > KEPT_AT_MOST {
            lines.clear();
        }
        for lane in lanes.iter().filter(|l| may_be_short(l)) {
            match lines.get_mut(&lane.id) {
                Some(kept) if kept.is_of(lane, several) => {
                    // An equal lane read again (another process wrote the file): kept as the lane
                    // now, so the next save knows it by its handle alone.
                    if !Arc::ptr_eq(&kept.lane, lane) {
                        kept.lane = lane.clone();
                    }
                    // Every test and every debug build checks that the kept line is the line.
                    if cfg!(debug_assertions) {
                        let made = make(lane);
                        assert_eq!(
                            made.as_deref().map(RawValue::get),
                            kept.line.as_deref().map(RawValue::get),
                            "the line kept for lane `{}` is not what it serialises to",
                            lane.id
                        );
                    }
                }
                _ => {
                    let kept = Kept {
                        lane: lane.clone(),
                        several,
                        line: make(lane),
                    };
                    lines.insert(lane.id.clone(), kept);
                }
            }
        }
        // Each lane's kept line is taken only for the very lane it was made from: of two lanes
        // of one id, the one whose line another replaced has its own made here.
        let out: Vec<Option<Cow<'_, RawValue>>> = lanes
            .iter()
            .map(|lane| match lines.get(&lane.id) {
                _ if !may_be_short(lane) => None,
                Some(kept) if kept.is_of(lane, several) => kept.line.as_deref().map(Cow::Borrowed),
                _ => make(lane).map(Cow::Owned),
            })
            .collect();
        f(&out)
    })
}

/// A state of one run `r` of unit `001-p` whose lanes are `lanes` (their JSON, as the file holds
/// them), for the tests of the state's lanes.
#[cfg(test)]
pub(super) fn run_of(lanes: &str) -> super::State {
    let text = format!(
        r#"{{"schema": 1, "runs": {{"r": {{
        "id": "r", "unit": "001-p", "status": "running", "driver": "process", "session": null,
        "created_at": "2026-09-30T11:00:00Z", "updated_at": "2026-09-30T11:00:00Z",
        "base": {{"commit": "c", "branch": "main"}}, "next_eligible_at": null,
        "lanes": [{lanes}]}}}}}}"#
    );
    super::State::parse(text.as_bytes()).unwrap()
}

#[cfg(test)]
mod tests {
    use super::super::{forms::file_text, State};

    fn state() -> State {
        super::run_of(
            r#"{"id":"002-a","stage":"delivered","attempt":1,"branch":"iced/001-p/002-a","ended":{"close":"first"}},
            {"id":"003-b","stage":"brief","waiting":true}"#,
        )
    }

    fn text(state: &State) -> String {
        let text = String::from_utf8(file_text(state)).unwrap();
        assert_eq!(&State::parse(text.as_bytes()).unwrap(), state);
        text
    }

    /// A lane changed after this thread wrote its line is written as it is now: an ended lane's
    /// new close, a waiting lane that started (whole), a second lane of the same id (its own).
    #[test]
    fn a_line_is_taken_again_only_for_the_very_lane_it_was_made_from() {
        let mut state = state();
        let first = text(&state);
        assert!(first.contains(r#""close":"first""#), "{first}");
        assert!(first.contains(r#"{"id":"003-b","stage":"brief","waiting":true}"#));

        let lanes = &mut state.runs.get_mut("r").unwrap().lanes;
        lanes[0].ended.as_mut().unwrap().close = Some("second".into());
        lanes[1].attempt = 2;
        let second = text(&state);
        assert!(second.contains(r#""close":"second""#), "{second}");
        assert!(!second.contains(r#""close":"first""#), "{second}");
        assert!(!second.contains(r#""waiting""#), "{second}");

        let lanes = &mut state.runs.get_mut("r").unwrap().lanes;
        let mut twin = lanes[0].clone();
        twin.ended.as_mut().unwrap().close = Some("twin".into());
        lanes.push(twin);
        let third = text(&state);
        assert!(
            third.contains(r#""close":"second""#) && third.contains(r#""close":"twin""#),
            "{third}"
        );
    }
}
