//! How memory search combines its two rankings. Reciprocal-rank fusion looks at ranks only,
//! so a keyword hit that matched one incidental word of the query ("keep") gets as much
//! credit as one that matched all of it, and can push the vector side's clear winner off the
//! top. Evidence fusion (the default) is score-aware instead: each candidate's cosine
//! similarity, plus the keyword side's evidence for it, which counts only as far as it is
//! real: the share of the query's content words the chunk holds (squared, so one word of four
//! is worth a sixteenth, not a quarter), and whether it holds the query's identifiers
//! (`INC-4471`, `db-eu-3`, `v2.7.1`) exactly, which look-alike records do not.

use crate::memory::MemoryHit;
use std::collections::{HashMap, HashSet};

/// Which fusion.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FusionMethod {
    /// Cosine similarity plus weighted keyword evidence.
    #[default]
    Evidence,
    /// Reciprocal-rank fusion: a hit at rank r (from 1) in a list adds `weight / (k + r)`.
    Rrf,
}

/// How keyword and vector rankings are combined.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fusion {
    pub method: FusionMethod,
    /// RRF: the keyword ranking's weight; evidence: the weight of the share of the query's
    /// words a chunk holds.
    pub keyword_weight: f64,
    /// Evidence: the weight of the share of the query's identifiers a chunk holds exactly.
    pub identifier_weight: f64,
    pub vector_weight: f64,
    /// The rank constant of [`FusionMethod::Rrf`].
    pub k: f64,
}

/// The weights of evidence fusion's words and identifiers, chosen on the training half of
/// reef's labelled set (`reef bench memory` reports the held-out half).
pub const EVIDENCE_KEYWORD_WEIGHT: f64 = 0.05;
pub const EVIDENCE_IDENTIFIER_WEIGHT: f64 = 1.0;

/// The keyword weight of reciprocal-rank fusion: half the vector ranking's.
pub const RRF_KEYWORD_WEIGHT: f64 = 0.5;

impl Fusion {
    /// `method` with its default weights (the vector side 1) and rank constant (60).
    pub fn of(method: FusionMethod) -> Fusion {
        Fusion {
            method,
            keyword_weight: match method {
                FusionMethod::Evidence => EVIDENCE_KEYWORD_WEIGHT,
                FusionMethod::Rrf => RRF_KEYWORD_WEIGHT,
            },
            identifier_weight: EVIDENCE_IDENTIFIER_WEIGHT,
            vector_weight: 1.0,
            k: 60.0,
        }
    }
}

impl Default for Fusion {
    fn default() -> Self {
        Fusion::of(FusionMethod::Evidence)
    }
}

/// The fused ranking of the keyword and vector hits of the query `terms` come from, best
/// first, at most `limit`; each hit's score is its fused score.
pub fn fuse(
    terms: &QueryTerms,
    keyword: &[MemoryHit],
    vector: &[MemoryHit],
    fusion: Fusion,
    limit: usize,
) -> Vec<MemoryHit> {
    let mut hits = match fusion.method {
        FusionMethod::Rrf => reciprocal_rank(keyword, vector, fusion),
        FusionMethod::Evidence => evidence(terms, keyword, vector, fusion),
    };
    hits.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then(a.chunk_id.cmp(&b.chunk_id))
    });
    hits.truncate(limit);
    hits
}

fn reciprocal_rank(keyword: &[MemoryHit], vector: &[MemoryHit], fusion: Fusion) -> Vec<MemoryHit> {
    let mut fused: HashMap<i64, MemoryHit> = HashMap::new();
    for (hits, weight) in [
        (keyword, fusion.keyword_weight),
        (vector, fusion.vector_weight),
    ] {
        for (rank, hit) in hits.iter().enumerate() {
            let add = weight / (fusion.k + rank as f64 + 1.0);
            fused
                .entry(hit.chunk_id)
                .and_modify(|h| h.score += add)
                .or_insert_with(|| MemoryHit {
                    score: add,
                    ..hit.clone()
                });
        }
    }
    fused.into_values().collect()
}

fn evidence(
    terms: &QueryTerms,
    keyword: &[MemoryHit],
    vector: &[MemoryHit],
    fusion: Fusion,
) -> Vec<MemoryHit> {
    // A candidate only the keyword side found is no closer than the vector side's last.
    let floor = vector
        .iter()
        .map(|h| h.score)
        .min_by(f64::total_cmp)
        .unwrap_or(0.0);
    let mut cosine: HashMap<i64, f64> = vector.iter().map(|h| (h.chunk_id, h.score)).collect();
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for hit in vector.iter().chain(keyword) {
        if !seen.insert(hit.chunk_id) {
            continue;
        }
        let similarity = cosine.remove(&hit.chunk_id).unwrap_or(floor);
        let score = fusion.vector_weight * similarity + terms.evidence(&hit.text, fusion);
        out.push(MemoryHit {
            score,
            ..hit.clone()
        });
    }
    out
}

/// What of a query keyword evidence is measured against: its content words, each with a
/// weight (how rare it is in memory, when the store said), and its identifiers.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QueryTerms {
    /// Content words as [`word_key`]s, without repeats, as written, and weighted.
    words: Vec<Term>,
    /// Identifier-like tokens, lower-cased.
    identifiers: Vec<String>,
}

#[derive(Clone, Debug, PartialEq)]
struct Term {
    key: String,
    word: String,
    weight: f64,
}

impl QueryTerms {
    /// The terms of `query`, every word weighing the same.
    pub fn of(query: &str) -> QueryTerms {
        let mut words: Vec<Term> = Vec::new();
        for word in query.split(|c: char| !c.is_alphanumeric()) {
            let lower = word.to_lowercase();
            if lower.is_empty() || crate::memory::is_stopword(&lower) {
                continue;
            }
            let key = word_key(&lower);
            if !words.iter().any(|t| t.key == key) {
                words.push(Term {
                    key,
                    word: word.to_owned(),
                    weight: 1.0,
                });
            }
        }
        let mut identifiers = Vec::new();
        for (n, token) in query.split_whitespace().enumerate() {
            let token = token.trim_matches(|c: char| !c.is_alphanumeric());
            // A capitalised word after the first is a name (`Hamid`, `VPN`).
            let name = n > 0 && token.chars().next().is_some_and(char::is_uppercase);
            if is_identifier(token) || (name && !crate::memory::is_stopword(&token.to_lowercase()))
            {
                let lower = token.to_lowercase();
                if !identifiers.contains(&lower) {
                    identifiers.push(lower);
                }
            }
        }
        QueryTerms { words, identifiers }
    }

    /// The content words as written, one per term.
    pub fn words(&self) -> Vec<String> {
        self.words.iter().map(|t| t.word.clone()).collect()
    }

    /// Weighs each term by how many of `total` chunks hold it (`document_counts`, in the
    /// order of [`QueryTerms::words`]): BM25's inverse document frequency, so a word most
    /// notes hold counts for little.
    pub fn weighted(mut self, total: u64, document_counts: &[u64]) -> QueryTerms {
        let n = total as f64;
        for (term, &count) in self.words.iter_mut().zip(document_counts) {
            let df = (count as f64).min(n);
            term.weight = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
        }
        self
    }

    /// How much `text` bears the query out: the squared share of its content words' weight
    /// `text` holds, times `fusion.keyword_weight`, plus the share of its identifiers `text`
    /// holds exactly, times `fusion.identifier_weight`.
    pub(crate) fn evidence(&self, text: &str, fusion: Fusion) -> f64 {
        let all: f64 = self.words.iter().map(|t| t.weight).sum();
        if all <= 0.0 {
            return 0.0;
        }
        // Each word of `text` is keyed in one reused buffer and checked against the query's
        // few terms: fusion weighs every candidate this way, and a set of each candidate's
        // keys was a hundred allocations a candidate.
        let mut held = vec![false; self.words.len()];
        let mut key = String::new();
        for word in text.split(|c: char| !c.is_alphanumeric()) {
            if word.is_empty() {
                continue;
            }
            key.clear();
            if word.is_ascii() {
                key.extend(
                    word.bytes()
                        .take(5)
                        .map(|b| char::from(b.to_ascii_lowercase())),
                );
            } else {
                key.push_str(&word_key(&word.to_lowercase()));
            }
            for (held, term) in held.iter_mut().zip(&self.words) {
                *held |= term.key == key;
            }
        }
        let held: f64 = self
            .words
            .iter()
            .zip(&held)
            .filter(|&(_, &held)| held)
            .map(|(t, _)| t.weight)
            .sum();
        let coverage = held / all;
        let words = fusion.keyword_weight * coverage * coverage;
        if self.identifiers.is_empty() {
            return words;
        }
        let lower = text.to_lowercase();
        let exact = self
            .identifiers
            .iter()
            .filter(|id| contains_token(&lower, id))
            .count();
        words + fusion.identifier_weight * exact as f64 / self.identifiers.len() as f64
    }
}

/// A word as compared: its first five characters (a cheap stem: `deploys`, `deployed` and
/// `deployment` agree), or all of a shorter one.
fn word_key(lower: &str) -> String {
    lower.chars().take(5).collect()
}

/// An identifier: a name (see [`QueryTerms::of`]), or a token with a digit in it (`INC-4471`, `v2`, `2.7.1`), or with a `-`, `_`,
/// `.`, `/` or `:` inside (`db-eu-3`, `release.yml`, `infra/charts`).
fn is_identifier(token: &str) -> bool {
    token.chars().count() >= 2
        && (token.chars().any(|c| c.is_ascii_digit())
            || token
                .trim_matches(|c: char| matches!(c, '-' | '_' | '.' | '/' | ':'))
                .contains(['-', '_', '.', '/', ':']))
}

/// Whether `needle` occurs in `haystack` as a whole token: not inside a longer word or
/// number (`inc-4471` is not in `inc-44712`).
fn contains_token(haystack: &str, needle: &str) -> bool {
    let continues = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
    haystack.match_indices(needle).any(|(at, _)| {
        !continues(haystack[..at].chars().next_back())
            && !continues(haystack[at + needle.len()..].chars().next())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_keep_content_words_and_identifiers() {
        let terms = QueryTerms::of("What happened in INC-4471 after the deploys?");
        let keys: Vec<&str> = terms.words.iter().map(|t| t.key.as_str()).collect();
        assert_eq!(keys, ["happe", "inc", "4471", "deplo"]);
        assert_eq!(terms.words(), ["happened", "INC", "4471", "deploys"]);
        assert_eq!(terms.identifiers, ["inc-4471"]);
        assert!(is_identifier("db-eu-3") && is_identifier("v2") && is_identifier("release.yml"));
        assert!(!is_identifier("keep") && !is_identifier("well-") && !is_identifier("x"));
    }

    /// Evidence with both weights 1.
    fn unit() -> Fusion {
        Fusion {
            keyword_weight: 1.0,
            identifier_weight: 1.0,
            ..Fusion::default()
        }
    }

    #[test]
    fn evidence_counts_what_is_real() {
        let terms = QueryTerms::of("how long do we keep the nightly database dumps");
        // One incidental word of five: a twenty-fifth.
        let incidental = terms.evidence("Keep the office plants watered on Fridays.", unit());
        assert!((incidental - 1.0 / 25.0).abs() < 1e-9, "{incidental}");
        let all = terms.evidence("We keep nightly database dumps for a long 35 days.", unit());
        assert!((all - 1.0).abs() < 1e-9, "{all}");
        // The exact identifier tells a record from its look-alikes.
        let terms = QueryTerms::of("status of INC-4471");
        let right = terms.evidence("INC-4471: the cache node ran out of memory.", unit());
        let alike = terms.evidence("INC-4472: the cache node ran out of disk.", unit());
        let longer = terms.evidence("INC-44712: the cache node restarted.", unit());
        // Two of its three words, and its one identifier.
        assert!((right - (4.0 / 9.0 + 1.0)).abs() < 1e-9, "{right}");
        assert!(alike < 0.3 && longer < 0.3, "{alike} {longer}");
        assert_eq!(QueryTerms::of("?!").evidence("anything", unit()), 0.0);
        // Words match by their first five letters in any case, accented ones too.
        let terms = QueryTerms::of("ÜBERSICHT deployments");
        let both = terms.evidence("die Übersichten der DEPLOYS", unit());
        assert!((both - 1.0).abs() < 1e-9, "{both}");
        let one = terms.evidence("überall deploys", unit());
        assert!((one - 0.25).abs() < 1e-9, "{one}");
    }

    #[test]
    fn a_common_word_weighs_less_than_a_rare_one() {
        // "keep" is in 900 of 1,000 chunks, "dumps" in 3.
        let terms = QueryTerms::of("keep dumps").weighted(1000, &[900, 3]);
        let common = terms.evidence("we keep plants", unit());
        let rare = terms.evidence("old dumps", unit());
        assert!(common < 0.01 && rare > 0.9, "{common} {rare}");
        // A capitalised word after the first is a name, held exactly or not.
        let terms = QueryTerms::of("when does Hamid need the paperwork");
        assert_eq!(terms.identifiers, ["hamid"]);
    }

    fn hit(id: i64, text: &str, score: f64) -> MemoryHit {
        MemoryHit {
            item_id: id,
            chunk_id: id,
            namespace: "shared".into(),
            text: text.into(),
            tags: Vec::new(),
            source: None,
            created_at: String::new(),
            score,
        }
    }

    #[test]
    fn an_incidental_keyword_match_does_not_unseat_the_vector_winner() {
        let query = "how long do we keep the nightly database dumps";
        let winner = hit(1, "Backups of Postgres are retained for 35 days.", 0.62);
        let incidental = hit(2, "Keep the office plants watered on Fridays.", 0.18);
        let vector = [
            winner.clone(),
            hit(3, "Unrelated.", 0.30),
            hit(4, "Far off.", 0.10),
        ];
        let keyword = [incidental, winner];
        let query = &QueryTerms::of(query);
        let evidence = fuse(query, &keyword, &vector, Fusion::default(), 3);
        assert_eq!(evidence[0].chunk_id, 1);
        // Reciprocal-rank fusion with equal weights puts the incidental match second, ahead of
        // a closer vector hit.
        let rrf = Fusion {
            method: FusionMethod::Rrf,
            keyword_weight: 1.0,
            ..Fusion::default()
        };
        let ranked: Vec<i64> = fuse(query, &keyword, &vector, rrf, 3)
            .iter()
            .map(|h| h.chunk_id)
            .collect();
        assert_eq!(ranked, [1, 2, 3]);
        let ranked: Vec<i64> = fuse(query, &keyword, &vector, Fusion::default(), 3)
            .iter()
            .map(|h| h.chunk_id)
            .collect();
        assert_eq!(
            ranked,
            [1, 3, 2],
            "a keyword-only hit sits at the vector side's floor, lifted by its evidence"
        );
    }

    #[test]
    fn an_exact_identifier_beats_a_closer_look_alike() {
        let query = &QueryTerms::of("what happened in INC-4471?");
        let right = hit(1, "INC-4471: the cache node ran out of memory.", 0.58);
        let alike = hit(2, "INC-4472: the cache node ran out of disk.", 0.61);
        let ranked = fuse(
            query,
            &[right.clone(), alike.clone()],
            &[alike, right],
            Fusion::default(),
            2,
        );
        assert_eq!(ranked[0].chunk_id, 1);
    }
}
