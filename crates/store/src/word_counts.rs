//! How many chunks hold each word, remembered between searches while memory's chunks are
//! unchanged: counting a common word walks thousands of FTS5 postings, and the same words
//! come back query after query.

use std::collections::HashMap;

/// The most words remembered; past it the cache starts afresh.
const MAX_WORDS: usize = 50_000;

/// Counts of words, valid for one state of memory's chunks.
#[derive(Debug, Default)]
pub(crate) struct WordCounts {
    /// The highest chunk id when the counts were taken: a new chunk (from this process or
    /// another) raises it, and the counts start afresh.
    newest: i64,
    counts: HashMap<String, u64>,
}

impl WordCounts {
    /// The remembered count of `word` while the newest chunk is `newest`.
    pub(crate) fn get(&mut self, newest: i64, word: &str) -> Option<u64> {
        if newest != self.newest {
            self.counts.clear();
            self.newest = newest;
            return None;
        }
        self.counts.get(word).copied()
    }

    /// Remembers `count` for `word`, taken while the newest chunk was `newest`.
    pub(crate) fn put(&mut self, newest: i64, word: &str, count: u64) {
        if newest != self.newest || self.counts.len() >= MAX_WORDS {
            self.counts.clear();
            self.newest = newest;
        }
        self.counts.insert(word.to_owned(), count);
    }

    /// Forgets every count (chunks were deleted, which leaves the newest id as it was).
    pub(crate) fn clear(&mut self) {
        self.counts.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::WordCounts;

    #[test]
    fn counts_last_until_a_new_chunk_or_a_deletion() {
        let mut cache = WordCounts::default();
        assert_eq!(cache.get(10, "kafka"), None);
        cache.put(10, "kafka", 3);
        assert_eq!(cache.get(10, "kafka"), Some(3));
        assert_eq!(cache.get(10, "broker"), None);
        // A chunk was added: every count is stale.
        assert_eq!(cache.get(11, "kafka"), None);
        cache.put(11, "kafka", 4);
        assert_eq!(cache.get(11, "kafka"), Some(4));
        cache.clear();
        assert_eq!(cache.get(11, "kafka"), None);
        // A count taken before a newer chunk arrived replaces the stale ones.
        cache.put(11, "kafka", 4);
        cache.put(12, "broker", 1);
        assert_eq!(cache.get(12, "kafka"), None);
        assert_eq!(cache.get(12, "broker"), Some(1));
    }
}
