//! `Memory`: long-term memory as agents and the CLI use it. Saving chunks and embeds an item;
//! searching ranks by keyword (BM25), by vector similarity, or both fused ([`crate::fusion`]).
//! Without an embedder everything still works by keyword, and every answer says so.

use crate::error::StoreError;
use crate::fusion::{Fusion, FusionMethod, QueryTerms, fuse};
use crate::memory::{Chunking, DOCUMENT_COUNT_CAP, MemoryHit, MemoryItem, MemoryQuery, NewMemory};
use crate::query_cache::QueryCache;
use crate::store::Store;
use crate::vectors::VectorQuery;
use reef_core::{Embedder, ModelError};
use serde::Serialize;

use std::sync::Arc;

/// Chunks embedded per call to the embedder.
const EMBED_BATCH: usize = 64;

/// Chunks a search embeds on the way (left over from a time without an embedder), unless
/// something else embeds them in the background ([`Memory::embedded_in_background`]).
const SEARCH_BACKFILL: usize = 256;

/// How a search ranks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchMode {
    /// Keyword and vector rankings fused.
    #[default]
    Hybrid,
    /// BM25 over the full-text index only.
    Keyword,
    /// Vector similarity only.
    Vector,
}

impl std::str::FromStr for SearchMode {
    type Err = StoreError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "hybrid" => Ok(SearchMode::Hybrid),
            "keyword" => Ok(SearchMode::Keyword),
            "vector" => Ok(SearchMode::Vector),
            other => Err(StoreError::Invalid {
                field: "mode",
                message: format!("`{other}` is not hybrid, keyword or vector"),
            }),
        }
    }
}

impl std::fmt::Display for SearchMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SearchMode::Hybrid => "hybrid",
            SearchMode::Keyword => "keyword",
            SearchMode::Vector => "vector",
        })
    }
}

/// A search of long-term memory.
#[derive(Clone, Debug, Default)]
pub struct SearchRequest {
    pub namespaces: Vec<String>,
    pub text: String,
    pub tags: Vec<String>,
    pub since: Option<String>,
    pub limit: usize,
    pub mode: SearchMode,
}

/// What a search found, how it ranked, and anything the caller should know (no embedder, or
/// chunks not embedded yet).
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct SearchOutcome {
    pub mode: SearchMode,
    pub hits: Vec<MemoryHit>,
    pub note: Option<String>,
}

/// A saved item, and a note when it could not be embedded (it is still found by keyword).
#[derive(Clone, Debug, Serialize)]
pub struct Saved {
    pub item: MemoryItem,
    pub note: Option<String>,
}

/// Long-term memory over a store, with an embedder when one is available.
#[derive(Clone)]
pub struct Memory {
    store: Store,
    embedder: Result<Arc<dyn Embedder>, String>,
    chunking: Chunking,
    fusion: Fusion,
    queries: QueryCache,
    /// Chunks a search embeds before it ranks: [`SEARCH_BACKFILL`], or none when a
    /// background task embeds them.
    search_backfill: usize,
}

impl std::fmt::Debug for Memory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memory")
            .field(
                "embedder",
                &self.embedder.as_ref().map(|e| e.id().to_owned()),
            )
            .field("chunking", &self.chunking)
            .field("fusion", &self.fusion)
            .finish()
    }
}

impl Memory {
    /// `embedder` is the embedder, or why there is none (said with keyword-only results).
    pub fn new(
        store: Store,
        embedder: Result<Arc<dyn Embedder>, String>,
        chunking: Chunking,
        fusion: Fusion,
    ) -> Self {
        Self {
            store,
            embedder,
            chunking,
            fusion,
            queries: QueryCache::default(),
            search_backfill: SEARCH_BACKFILL,
        }
    }

    /// This memory with searches that never embed chunks on the way, for when a background
    /// task embeds them (the daemon's): a search answers at once, by keyword for the chunks
    /// not embedded yet, and its note says how many those are.
    #[must_use]
    pub fn embedded_in_background(mut self) -> Self {
        self.search_backfill = 0;
        self
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The embedder, or why there is none.
    pub fn embedder(&self) -> Result<&Arc<dyn Embedder>, &str> {
        self.embedder.as_ref().map_err(String::as_str)
    }

    /// Stores `memory` without embedding it (it is found by keyword until something embeds
    /// it: [`Memory::embed_pending`], a search, or the daemon's background embedder).
    pub async fn save_text(&self, memory: NewMemory) -> Result<MemoryItem, StoreError> {
        self.store.add_memory(memory, self.chunking).await
    }

    /// Stores `memory` and embeds its chunks.
    pub async fn save(&self, memory: NewMemory) -> Result<Saved, StoreError> {
        let namespace = memory.namespace.clone();
        let item = self.store.add_memory(memory, self.chunking).await?;
        let note = match &self.embedder {
            Err(why) => Some(format!("keyword search only: {why}")),
            Ok(_) => match self.embed_pending(vec![namespace], usize::MAX).await {
                Ok(_) => None,
                Err(e) => Some(format!(
                    "saved, but not embedded ({e}); it is found by keyword until a search embeds it"
                )),
            },
        };
        Ok(Saved { item, note })
    }

    /// Embeds up to `max` chunks of `namespaces` that have no vector from the current
    /// embedder; returns how many were embedded and whether more are left.
    pub async fn embed_pending(
        &self,
        namespaces: Vec<String>,
        max: usize,
    ) -> Result<(usize, bool), EmbedFailure> {
        let embedder = self
            .embedder
            .as_ref()
            .map_err(|why| EmbedFailure(why.clone()))?;
        let mut done = 0;
        while done < max {
            let want = EMBED_BATCH.min(max - done);
            let pending = self
                .store
                .chunks_to_embed(embedder.id(), namespaces.clone(), want + 1)
                .await
                .map_err(|e| EmbedFailure(e.to_string()))?;
            if pending.is_empty() {
                return Ok((done, false));
            }
            let more = pending.len() > want;
            let batch: Vec<(i64, String)> = pending.into_iter().take(want).collect();
            let count = batch.len();
            let texts: Vec<String> = batch.iter().map(|(_, t)| t.clone()).collect();
            let vectors = embedder
                .embed(&texts)
                .await
                .map_err(|e| EmbedFailure(describe(&e)))?;
            if vectors.len() != batch.len() {
                return Err(EmbedFailure(format!(
                    "the embedder returned {} vectors for {} texts",
                    vectors.len(),
                    batch.len()
                )));
            }
            let rows = batch.into_iter().map(|(id, _)| id).zip(vectors).collect();
            self.store
                .store_vectors(embedder.id(), rows)
                .await
                .map_err(|e| EmbedFailure(e.to_string()))?;
            done += count;
            if !more {
                return Ok((done, false));
            }
        }
        Ok((done, true))
    }

    /// Searches in `request.mode`; hybrid falls back to keyword when there is no embedder or
    /// it fails, and the outcome's note says so. Vector mode without an embedder is an error.
    pub async fn search(&self, request: SearchRequest) -> Result<SearchOutcome, StoreError> {
        let limit = request.limit.clamp(1, 1000);
        let keyword_query = |limit: usize| MemoryQuery {
            namespaces: request.namespaces.clone(),
            text: request.text.clone(),
            tags: request.tags.clone(),
            since: request.since.clone(),
            limit,
            every_word: false,
        };
        if request.mode == SearchMode::Keyword {
            return Ok(SearchOutcome {
                mode: SearchMode::Keyword,
                hits: self.store.search_memory(keyword_query(limit)).await?,
                note: None,
            });
        }
        // The keyword side (BM25 and the words' weights, on the connection) runs while the
        // query is embedded and the vector index scanned (under its own lock).
        let vector_side = async {
            match self.query_vector(&request).await {
                Ok((query, note)) => self
                    .store
                    .vector_search(query)
                    .await
                    .map(|hits| Ok((hits, note))),
                Err(why) => Ok(Err(why)),
            }
        };
        let keyword_side = async {
            if request.mode == SearchMode::Vector {
                return Ok((Vec::new(), QueryTerms::of("")));
            }
            let words = QueryTerms::of(&request.text).words();
            let (total, counts) = if words.is_empty() {
                (0, Vec::new())
            } else {
                self.store.document_counts(words.clone()).await?
            };
            let (text, every_word) = distinctive(&words, total, &counts)
                .unwrap_or_else(|| (request.text.clone(), false));
            let query = MemoryQuery {
                text,
                every_word,
                ..keyword_query(candidates(request.mode, limit))
            };
            let hits = match self.store.search_memory(query).await {
                Ok(hits) => hits,
                // A query of only punctuation has no words for BM25; the vector side still
                // ranks.
                Err(StoreError::Invalid { field: "query", .. }) => Vec::new(),
                Err(e) => return Err(e),
            };
            let terms = QueryTerms::of(&request.text);
            let terms = if self.fusion.method == FusionMethod::Evidence && !words.is_empty() {
                terms.weighted(total, &counts)
            } else {
                terms
            };
            Ok((hits, terms))
        };
        let (by_vector, keyword) = tokio::join!(vector_side, keyword_side);
        let (by_vector, note) = match (by_vector?, request.mode) {
            (Ok(found), _) => found,
            (Err(why), SearchMode::Vector) => {
                return Err(StoreError::Invalid {
                    field: "mode",
                    message: format!("vector search needs an embedder: {why}"),
                });
            }
            (Err(why), _) => {
                return Ok(SearchOutcome {
                    mode: SearchMode::Keyword,
                    hits: match keyword {
                        Ok((mut hits, _)) => {
                            hits.truncate(limit);
                            hits
                        }
                        // Without vectors an unsearchable query is the caller's error.
                        Err(_) => self.store.search_memory(keyword_query(limit)).await?,
                    },
                    note: Some(format!("keyword search only: {why}")),
                });
            }
        };
        if request.mode == SearchMode::Vector {
            let mut hits = by_vector;
            hits.truncate(limit);
            return Ok(SearchOutcome {
                mode: SearchMode::Vector,
                hits,
                note,
            });
        }
        let (by_keyword, terms) = keyword?;
        Ok(SearchOutcome {
            mode: SearchMode::Hybrid,
            hits: fuse(&terms, &by_keyword, &by_vector, self.fusion, limit),
            note,
        })
    }

    /// The query's terms as evidence fusion weighs them: each word by how many chunks of
    /// memory hold it.
    pub async fn query_terms(&self, text: &str) -> Result<QueryTerms, StoreError> {
        let terms = QueryTerms::of(text);
        if self.fusion.method != FusionMethod::Evidence || terms.words().is_empty() {
            return Ok(terms);
        }
        let (total, counts) = self.store.document_counts(terms.words()).await?;
        Ok(terms.weighted(total, &counts))
    }

    /// Embeds the query (after embedding a bounded number of pending chunks) into a vector
    /// query; the note reports chunks still without vectors.
    async fn query_vector(
        &self,
        request: &SearchRequest,
    ) -> Result<(VectorQuery, Option<String>), String> {
        let embedder = self.embedder.as_ref().map_err(Clone::clone)?;
        let waiting = self.waiting_note(embedder.id(), &request.namespaces);
        let query = self.embed_query(embedder, &request.text);
        // Counting what waits is a lookup, found beside the query's embedding; embedding a
        // backlog first keeps the embedder's calls in order.
        let (note, vector) = if self.search_backfill == 0 {
            tokio::join!(waiting, query)
        } else {
            let note = waiting.await;
            (note, query.await)
        };
        let (note, vector) = (note?, vector?);
        Ok((
            VectorQuery {
                namespaces: request.namespaces.clone(),
                embedder: embedder.id().to_owned(),
                vector,
                tags: request.tags.clone(),
                since: request.since.clone(),
                limit: candidates(request.mode, request.limit.clamp(1, 1000)),
                scan: crate::vector_index::Scan::Auto,
            },
            note,
        ))
    }

    /// The note on chunks of `namespaces` still without a vector, after embedding a bounded
    /// number of them when searches backfill.
    async fn waiting_note(
        &self,
        embedder: &str,
        namespaces: &[String],
    ) -> Result<Option<String>, String> {
        Ok(if self.search_backfill == 0 {
            // The common case, nothing waiting, is one step down an index; only a backlog
            // is counted.
            let waiting = self
                .store
                .chunks_to_embed(embedder, namespaces.to_vec(), 1)
                .await
                .map_err(|e| e.to_string())?;
            if waiting.is_empty() {
                None
            } else {
                self.backlog_note(embedder, namespaces).await?
            }
        } else {
            let (_, more) = self
                .embed_pending(namespaces.to_vec(), self.search_backfill)
                .await
                .map_err(|e| e.0)?;
            more.then(|| {
                "some chunks have no vector yet (they are embedded a batch per search); \
                 vector ranking covers the rest"
                    .to_owned()
            })
        })
    }

    /// The query's vector, from the cache of recent queries or the embedder.
    async fn embed_query(
        &self,
        embedder: &Arc<dyn Embedder>,
        text: &str,
    ) -> Result<Vec<f32>, String> {
        if let Some(cached) = self.queries.get(embedder.id(), text) {
            return Ok(cached.as_ref().clone());
        }
        let mut vectors = embedder
            .embed(&[text.to_owned()])
            .await
            .map_err(|e| describe(&e))?;
        let vector = vectors.pop().ok_or("the embedder returned no vector")?;
        self.queries
            .put(embedder.id(), text, Arc::new(vector.clone()));
        Ok(vector)
    }
}

/// The words the keyword side of a hybrid search looks for, and whether a chunk must hold
/// all of them; `None` for the query as written. BM25 ranks every chunk holding any word, so a
/// word that a large share of memory holds (more than one chunk in 50, and more than 1,000)
/// makes the search slow while narrowing nothing: it is left to the fusion's evidence, which
/// still counts it, and the rarer words choose the candidates. When every word is that
/// common, a candidate must hold all of them.
fn distinctive(words: &[String], total: u64, counts: &[u64]) -> Option<(String, bool)> {
    let common = (total / 50).clamp(1000, DOCUMENT_COUNT_CAP as u64);
    let rare: Vec<&str> = words
        .iter()
        .zip(counts)
        .filter(|&(_, &count)| count < common)
        .map(|(w, _)| w.as_str())
        .collect();
    if rare.len() == words.len() {
        None
    } else if rare.is_empty() {
        Some((words.join(" "), true))
    } else {
        Some((rare.join(" "), false))
    }
}

impl Memory {
    /// How many chunks of `namespaces` are waiting for a vector, as a search's note.
    async fn backlog_note(
        &self,
        embedder: &str,
        namespaces: &[String],
    ) -> Result<Option<String>, String> {
        let coverage = self
            .store
            .vector_coverage(embedder, namespaces.to_vec())
            .await
            .map_err(|e| e.to_string())?;
        let waiting = coverage.chunks.saturating_sub(coverage.embedded);
        Ok((waiting > 0).then(|| {
            format!(
                "{waiting} of {} chunks have no vector yet (they are being embedded in the \
                 background); keyword ranking covers them",
                coverage.chunks
            )
        }))
    }
}

/// How many hits each ranking contributes: fusion re-ranks the union of both rankings' top
/// candidates, so each gives more than the final limit.
fn candidates(mode: SearchMode, limit: usize) -> usize {
    match mode {
        SearchMode::Hybrid => (limit * 2).max(10),
        SearchMode::Keyword | SearchMode::Vector => limit,
    }
}

/// An embedder's error for a note: who failed, the HTTP status if any, and the message (without
/// the chat-provider recovery hint of `ModelError`'s display, which does not fit an embedder).
fn describe(e: &ModelError) -> String {
    match e.status {
        Some(status) => format!("embedder `{}`: HTTP {status}: {}", e.provider, e.message),
        None => format!("embedder `{}`: {}", e.provider, e.message),
    }
}

/// Why chunks could not be embedded.
#[derive(Clone, Debug, thiserror::Error)]
#[error("{0}")]
pub struct EmbedFailure(pub String);

#[cfg(test)]
mod tests {
    use super::distinctive;

    #[test]
    fn common_words_leave_the_choice_of_candidates_to_rare_ones() {
        let words: Vec<String> = ["deploy", "kafka", "broker"].map(String::from).to_vec();
        // A small memory: every word counts.
        assert_eq!(distinctive(&words, 900, &[800, 3, 40]), None);
        // 100,000 chunks: "deploy" is in 4,000 of them (more than one in 50).
        assert_eq!(
            distinctive(&words, 100_000, &[4000, 3, 40]),
            Some(("kafka broker".into(), false))
        );
        // Every word common: only chunks with all of them.
        assert_eq!(
            distinctive(&words, 100_000, &[4000, 5000, 2500]),
            Some(("deploy kafka broker".into(), true))
        );
    }
}
