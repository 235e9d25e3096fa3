//! A map of answers a call keeps under a budget of bytes. A build lives as long as its run, and
//! what it asked git about one lane (a file at the lane's head, the lane's diff) is seldom asked
//! again once the lane has moved on: kept for good, those answers grew the process by some 100 KB
//! a lane (issue 16), and every lane's supervisor is forked from it. The oldest answers go first.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

/// Answers by key with their sizes, the oldest dropped once the sizes pass the budget.
pub struct Budgeted<K, V> {
    map: HashMap<K, (V, usize)>,
    /// The keys in the order they were kept, oldest first.
    order: VecDeque<K>,
    bytes: usize,
    budget: usize,
}

impl<K: Hash + Eq + Clone, V: Clone> Budgeted<K, V> {
    pub fn new(budget: usize) -> Budgeted<K, V> {
        Budgeted {
            map: HashMap::new(),
            order: VecDeque::new(),
            bytes: 0,
            budget,
        }
    }

    pub fn get(&self, key: &K) -> Option<V> {
        self.map.get(key).map(|(value, _)| value.clone())
    }

    /// Keeps `value`, of `size` bytes, under `key`, dropping the oldest answers until all fit. An
    /// answer larger than the whole budget is not kept; a key kept already keeps its first answer
    /// (what was asked of a commit does not change).
    pub fn insert(&mut self, key: K, value: V, size: usize) {
        if size > self.budget || self.map.contains_key(&key) {
            return;
        }
        while self.bytes + size > self.budget {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            if let Some((_, gone)) = self.map.remove(&oldest) {
                self.bytes -= gone;
            }
        }
        self.order.push_back(key.clone());
        self.map.insert(key, (value, size));
        self.bytes += size;
    }

    /// The bytes kept now.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::Budgeted;

    #[test]
    fn the_oldest_answers_go_once_the_budget_is_passed() {
        let mut kept: Budgeted<&str, &str> = Budgeted::new(10);
        kept.insert("a", "A", 4);
        kept.insert("b", "B", 4);
        assert_eq!(
            (kept.get(&"a"), kept.get(&"b"), kept.bytes()),
            (Some("A"), Some("B"), 8)
        );
        // Asked again, a key keeps its first answer and its size.
        kept.insert("a", "other", 1);
        assert_eq!((kept.get(&"a"), kept.bytes()), (Some("A"), 8));
        // Another 4 bytes pass the budget: the oldest goes, however recently it was read.
        kept.insert("c", "C", 4);
        assert_eq!(kept.get(&"a"), None);
        assert_eq!(
            (kept.get(&"b"), kept.get(&"c"), kept.bytes()),
            (Some("B"), Some("C"), 8)
        );
        // Larger than the whole budget: not kept, and nothing is dropped for it.
        kept.insert("d", "D", 11);
        assert_eq!(
            (kept.get(&"d"), kept.get(&"b"), kept.bytes()),
            (None, Some("B"), 8)
        );
        // Exactly the budget: everything else goes.
        kept.insert("e", "E", 10);
        assert_eq!(
            (kept.get(&"b"), kept.get(&"c"), kept.get(&"e")),
            (None, None, Some("E"))
        );
        assert_eq!(kept.bytes(), 10);
    }
}
