//! A run's lanes, each held behind an `Arc` (issue 16). Every transaction copies the state it
//! read and compares the copy with it after; every save writes each lane's line. In a run of a
//! thousand lanes nearly all of them are ended and never change, so a lane is shared between the
//! state as read and its copy, and one that a step changes is copied then (`Arc::make_mut`). A lane
//! still shared is the very lane it was: equal without a look at its fields, and its kept line
//! (`lines`) is taken without one either.

use super::Lane;
use std::sync::Arc;

#[derive(Debug, Clone, Default)]
pub struct Lanes(Vec<Arc<Lane>>);

impl Lanes {
    pub fn new() -> Lanes {
        Lanes(Vec::new())
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Each lane, in order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Lane> + ExactSizeIterator + Clone {
        self.0.iter().map(|lane| &**lane)
    }

    /// Each lane, to change: each one still shared is copied first, so only where every lane may
    /// change; to change one, [`Lanes::get_mut`] or [`Lanes::find_mut`].
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Lane> {
        self.0.iter_mut().map(Arc::make_mut)
    }

    /// The lanes `pick` chooses, to change: only those are copied.
    pub fn iter_mut_where(
        &mut self,
        pick: impl Fn(&Lane) -> bool,
    ) -> impl Iterator<Item = &mut Lane> {
        self.0
            .iter_mut()
            .filter(move |lane| pick(lane))
            .map(Arc::make_mut)
    }

    /// Each lane as its shared handle (its identity is the kept line's key).
    pub(super) fn shared(&self) -> &[Arc<Lane>] {
        &self.0
    }

    pub fn first(&self) -> Option<&Lane> {
        self.0.first().map(|lane| &**lane)
    }

    /// The lane at `at`, to change (copied first when still shared).
    fn get_mut(&mut self, at: usize) -> Option<&mut Lane> {
        self.0.get_mut(at).map(Arc::make_mut)
    }

    /// The first lane `found` names, to change: only that one is copied.
    pub fn find_mut(&mut self, found: impl Fn(&Lane) -> bool) -> Option<&mut Lane> {
        let at = self.0.iter().position(|lane| found(lane))?;
        self.get_mut(at)
    }

    pub fn push(&mut self, lane: Lane) {
        self.0.push(Arc::new(lane));
    }

    pub fn truncate(&mut self, len: usize) {
        self.0.truncate(len);
    }

    /// Each lane given to `f`, which returns it as it should be: a lane `f` returns unchanged
    /// (the same `Arc`) stays shared.
    pub fn map_shared(&mut self, f: impl FnMut(Arc<Lane>) -> Arc<Lane>) {
        let lanes = std::mem::take(&mut self.0);
        self.0 = lanes.into_iter().map(f).collect();
    }
}

impl std::ops::Index<usize> for Lanes {
    type Output = Lane;
    fn index(&self, at: usize) -> &Lane {
        &self.0[at]
    }
}

impl std::ops::IndexMut<usize> for Lanes {
    fn index_mut(&mut self, at: usize) -> &mut Lane {
        Arc::make_mut(&mut self.0[at])
    }
}

/// Lanes are equal lane by lane; a lane still shared with the other is equal at once.
impl PartialEq for Lanes {
    fn eq(&self, other: &Lanes) -> bool {
        self.0.len() == other.0.len()
            && self
                .0
                .iter()
                .zip(&other.0)
                .all(|(a, b)| Arc::ptr_eq(a, b) || **a == **b)
    }
}

impl From<Vec<Lane>> for Lanes {
    fn from(lanes: Vec<Lane>) -> Lanes {
        lanes.into_iter().collect()
    }
}

impl FromIterator<Arc<Lane>> for Lanes {
    fn from_iter<I: IntoIterator<Item = Arc<Lane>>>(lanes: I) -> Lanes {
        Lanes(lanes.into_iter().collect())
    }
}

impl FromIterator<Lane> for Lanes {
    fn from_iter<I: IntoIterator<Item = Lane>>(lanes: I) -> Lanes {
        Lanes(lanes.into_iter().map(Arc::new).collect())
    }
}

impl<'a> IntoIterator for &'a Lanes {
    type Item = &'a Lane;
    type IntoIter = std::iter::Map<std::slice::Iter<'a, Arc<Lane>>, fn(&Arc<Lane>) -> &Lane>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|lane| &**lane)
    }
}

impl<'a> IntoIterator for &'a mut Lanes {
    type Item = &'a mut Lane;
    type IntoIter =
        std::iter::Map<std::slice::IterMut<'a, Arc<Lane>>, fn(&mut Arc<Lane>) -> &mut Lane>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter_mut().map(Arc::make_mut)
    }
}

impl IntoIterator for Lanes {
    type Item = Lane;
    type IntoIter = std::iter::Map<std::vec::IntoIter<Arc<Lane>>, fn(Arc<Lane>) -> Lane>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter().map(Arc::unwrap_or_clone)
    }
}

#[cfg(test)]
mod tests {
    use super::super::State;
    use std::sync::Arc;

    fn state() -> State {
        super::super::lines::run_of(
            r#"{"id":"002-a","stage":"delivered","attempt":1,"branch":"iced/001-p/002-a","ended":{"close":"c2"}},
            {"id":"003-b","stage":"delivered","attempt":1,"branch":"iced/001-p/003-b","ended":{"close":"c3"}},
            {"id":"004-c","stage":"brief","waiting":true}"#,
        )
    }

    /// Whether each lane of `a` is the very lane (the same handle) of `b`.
    fn same(a: &State, b: &State) -> Vec<bool> {
        let (a, b) = (&a.runs["r"].lanes, &b.runs["r"].lanes);
        a.shared()
            .iter()
            .zip(b.shared())
            .map(|(x, y)| Arc::ptr_eq(x, y))
            .collect()
    }

    /// A transaction's copy shares every lane with the state as read; changing one copies that
    /// one only, and the two states then differ in it alone.
    #[test]
    fn a_copy_shares_its_lanes_until_one_is_changed() {
        let read = state();
        let mut copy = read.clone();
        assert_eq!(same(&read, &copy), [true, true, true]);
        assert_eq!(read, copy);
        let run = copy.runs.get_mut("r").unwrap();
        run.lane_mut("003-b").unwrap().attempt = 2;
        assert_eq!(same(&read, &copy), [true, false, true]);
        assert_ne!(read, copy);
        let lane = &read.runs["r"].lanes[1];
        assert_eq!(lane.attempt, 1, "the state as read is unchanged");
        // Only the lanes picked are copied.
        let mut picked = read.clone();
        let lanes = &mut picked.runs.get_mut("r").unwrap().lanes;
        assert_eq!(lanes.iter_mut_where(|l| l.ended.is_none()).count(), 1);
        assert_eq!(same(&read, &picked), [true, true, false]);
        assert_eq!(read, picked, "copied, not changed");
    }

    /// The same text read again gives the same short-form lanes (the handles a save knows them
    /// by); a lane whose text changed is read afresh.
    #[test]
    fn a_short_form_read_again_is_the_lane_read_before() {
        let first = state();
        assert_eq!(same(&first, &state()), [true, true, true]);
        let text = String::from_utf8(super::super::forms::file_text(&first)).unwrap();
        let text = text.replace(r#""close":"c3""#, r#""close":"c9""#);
        let changed = State::parse(text.as_bytes()).unwrap();
        assert_eq!(same(&first, &changed), [true, false, true]);
        let lane = &changed.runs["r"].lanes[1];
        assert_eq!(lane.ended.as_ref().unwrap().close.as_deref(), Some("c9"));
    }
}
