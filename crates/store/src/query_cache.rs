//! `QueryCache`: the vectors of recent search texts, so a query asked again (an agent
//! retrying, a dashboard refreshing, the same question from two channels) skips the embedder,
//! which costs more than the whole search once the index is quantised.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// Query vectors kept; the least recently used goes first.
pub const QUERY_CACHE_SIZE: usize = 512;

/// Recent query vectors by (embedder, text). Cheap to clone; clones share the entries.
#[derive(Clone, Debug, Default)]
pub struct QueryCache {
    inner: Arc<Mutex<Entries>>,
}

/// (embedder, text).
type Key = (String, String);

/// When an entry was last used, and its vector.
type Entry = (u64, Arc<Vec<f32>>);

#[derive(Debug, Default)]
struct Entries {
    tick: u64,
    map: HashMap<Key, Entry>,
}

impl QueryCache {
    /// The vector `embedder` made for `text`, if it is still kept.
    pub fn get(&self, embedder: &str, text: &str) -> Option<Arc<Vec<f32>>> {
        let mut entries = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        entries.tick += 1;
        let tick = entries.tick;
        let entry = entries
            .map
            .get_mut(&(embedder.to_owned(), text.to_owned()))?;
        entry.0 = tick;
        Some(Arc::clone(&entry.1))
    }

    /// Keeps `vector` as `embedder`'s for `text`, dropping the least recently used entry
    /// when full.
    pub fn put(&self, embedder: &str, text: &str, vector: Arc<Vec<f32>>) {
        let mut entries = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        entries.tick += 1;
        let tick = entries.tick;
        if entries.map.len() >= QUERY_CACHE_SIZE
            && let Some(oldest) = entries
                .map
                .iter()
                .min_by_key(|(_, (used, _))| *used)
                .map(|(key, _)| key.clone())
        {
            entries.map.remove(&oldest);
        }
        entries
            .map
            .insert((embedder.to_owned(), text.to_owned()), (tick, vector));
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .map
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::{QUERY_CACHE_SIZE, QueryCache};
    use std::sync::Arc;

    #[test]
    fn the_least_recently_used_query_goes_first() {
        let cache = QueryCache::default();
        for i in 0..QUERY_CACHE_SIZE {
            cache.put("m", &format!("q{i}"), Arc::new(vec![i as f32]));
        }
        // q0 is used again, so q1 is the oldest when one more arrives.
        assert_eq!(cache.get("m", "q0").unwrap()[0], 0.0);
        cache.put("m", "new", Arc::new(vec![-1.0]));
        assert_eq!(cache.len(), QUERY_CACHE_SIZE);
        assert!(cache.get("m", "q1").is_none());
        assert!(cache.get("m", "q0").is_some());
        // Another embedder's vector for the same text is another entry.
        assert!(cache.get("other", "q0").is_none());
    }
}
