//! `reef bench memory`: retrieval quality on the labelled set shipped with reef (recall@5 of
//! keyword, vector and hybrid search), embedding throughput per thread, and memory at scale —
//! ingest rate and p50/p99 query latency of each mode over N chunks (100,000 by default).

use crate::args::BenchMemoryArgs;
use crate::exit::Exit;
use crate::home;
use anyhow::Context as _;
use reef_config::EmbedderChoice;
use reef_core::Embedder;
use reef_llm::EmbedderSettings;
use reef_store::{
    Chunking, Fusion, Memory, NewMemory, SearchMode, SearchRequest, Store, VectorQuery,
};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The labelled set: documents, and queries with the ids of the documents that answer them.
const RETRIEVAL_SET: &str = include_str!("../../data/retrieval-set.json");

const MODES: [SearchMode; 3] = [SearchMode::Keyword, SearchMode::Vector, SearchMode::Hybrid];
const NAMESPACE: &str = "agent:bench";

#[derive(Deserialize)]
struct LabelledSet {
    documents: Vec<Document>,
    queries: Vec<LabelledQuery>,
}

#[derive(Deserialize)]
struct Document {
    id: String,
    text: String,
}

#[derive(Deserialize)]
struct LabelledQuery {
    query: String,
    relevant: Vec<String>,
    kind: String,
}

/// Recall@5 of one mode: overall and per query kind.
#[derive(Serialize)]
struct Recall {
    mode: SearchMode,
    recall_at_5: f64,
    by_kind: std::collections::BTreeMap<String, f64>,
}

#[derive(Serialize)]
struct Throughput {
    threads: usize,
    texts_per_sec: f64,
    per_thread: f64,
}

#[derive(Serialize)]
struct Latency {
    mode: String,
    p50_ms: f64,
    p99_ms: f64,
}

#[derive(Serialize)]
struct Scale {
    chunks: usize,
    ingest_chunks_per_sec: f64,
    index_load_ms: f64,
    index_mib: f64,
    queries: usize,
    latency: Vec<Latency>,
}

#[derive(Serialize)]
struct Report {
    embedder: String,
    keyword_weight: f64,
    vector_weight: f64,
    rrf_k: f64,
    documents: usize,
    queries: usize,
    quality: Vec<Recall>,
    throughput: Vec<Throughput>,
    scale: Option<Scale>,
}

pub async fn memory(overrides: &[String], args: BenchMemoryArgs) -> anyhow::Result<u8> {
    let config = home::load_config(overrides)?;
    let EmbedderChoice::Local { model } = &config.memory.embedder else {
        return Err(Exit::usage(
            "reef bench memory measures the local embedding model: set [memory] embedder = \"minilm\"",
        ));
    };
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let threads = args.threads.map_or(cores, |t| t as usize);
    let load = |threads: usize| {
        reef_llm::build_embedder(EmbedderSettings::Local {
            name: model.clone(),
            dir: config.models.dir.clone(),
            threads,
        })
        .map_err(|e| Exit::usage(e.to_string()))
    };
    let embedder = load(threads)?;
    let set: LabelledSet =
        serde_json::from_str(RETRIEVAL_SET).context("the built-in retrieval set is malformed")?;
    let fusion = Fusion {
        keyword_weight: config.memory.keyword_weight,
        vector_weight: config.memory.vector_weight,
        k: config.memory.rrf_k,
    };
    let quality = quality(&set, embedder.clone(), fusion).await?;
    let mut throughput = Vec::new();
    let mut scale_report = None;
    if !args.quality_only {
        let mut counts = vec![1];
        if threads > 1 {
            counts.push(threads);
        }
        for t in counts {
            throughput.push(embedding_throughput(&set, load(t)?, t).await?);
        }
        scale_report = Some(scale(&args, embedder.clone(), fusion).await?);
    }
    let report = Report {
        embedder: model.clone(),
        keyword_weight: fusion.keyword_weight,
        vector_weight: fusion.vector_weight,
        rrf_k: fusion.k,
        documents: set.documents.len(),
        queries: set.queries.len(),
        quality,
        throughput,
        scale: scale_report,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report);
    }
    Ok(crate::exit::OK)
}

fn print_report(r: &Report) {
    println!(
        "retrieval quality ({} documents, {} labelled queries, embedder {}): recall@5",
        r.documents, r.queries, r.embedder
    );
    for q in &r.quality {
        let kinds: Vec<String> = q
            .by_kind
            .iter()
            .map(|(k, v)| format!("{k} {v:.3}"))
            .collect();
        println!(
            "  {:<8} {:.3}   ({})",
            q.mode.to_string(),
            q.recall_at_5,
            kinds.join(", ")
        );
    }
    for t in &r.throughput {
        println!(
            "embedding: {} thread(s): {:.1} chunks/s ({:.1} per thread)",
            t.threads, t.texts_per_sec, t.per_thread
        );
    }
    if let Some(s) = &r.scale {
        println!(
            "scale: {} chunks ingested at {:.0} chunks/s (text + vector, store only); vector index {:.0} MiB, loaded in {:.0} ms",
            s.chunks, s.ingest_chunks_per_sec, s.index_mib, s.index_load_ms
        );
        for l in &s.latency {
            println!(
                "  {:<22} p50 {:>7.2} ms   p99 {:>7.2} ms   ({} queries)",
                l.mode, l.p50_ms, l.p99_ms, s.queries
            );
        }
    }
}

/// Recall@5 of each mode on the labelled set, documents stored one item each.
async fn quality(
    set: &LabelledSet,
    embedder: Arc<dyn Embedder>,
    fusion: Fusion,
) -> anyhow::Result<Vec<Recall>> {
    let memory = Memory::new(
        Store::open_in_memory()?,
        Ok(embedder),
        Chunking::default(),
        fusion,
    );
    let mut doc_of_item = HashMap::new();
    for doc in &set.documents {
        let saved = memory
            .save(NewMemory {
                namespace: NAMESPACE.into(),
                text: doc.text.clone(),
                tags: Vec::new(),
                source: Some(doc.id.clone()),
            })
            .await?;
        if let Some(note) = saved.note {
            anyhow::bail!("document {} was not embedded: {note}", doc.id);
        }
        doc_of_item.insert(saved.item.id, doc.id.clone());
    }
    let mut out = Vec::new();
    for mode in MODES {
        let mut total = 0.0;
        let mut by_kind: HashMap<String, (f64, usize)> = HashMap::new();
        for q in &set.queries {
            let outcome = memory
                .search(SearchRequest {
                    namespaces: vec![NAMESPACE.into()],
                    text: q.query.clone(),
                    limit: 5,
                    mode,
                    ..SearchRequest::default()
                })
                .await?;
            let found: Vec<&String> = outcome
                .hits
                .iter()
                .filter_map(|h| doc_of_item.get(&h.item_id))
                .collect();
            let hit = q.relevant.iter().filter(|r| found.contains(r)).count();
            let recall = hit as f64 / q.relevant.len().max(1) as f64;
            total += recall;
            let entry = by_kind.entry(q.kind.clone()).or_default();
            entry.0 += recall;
            entry.1 += 1;
        }
        out.push(Recall {
            mode,
            recall_at_5: total / set.queries.len().max(1) as f64,
            by_kind: by_kind
                .into_iter()
                .map(|(k, (sum, n))| (k, sum / n as f64))
                .collect(),
        });
    }
    Ok(out)
}

/// English chunks of about 700 characters (the labelled set's notes run together) embedded per
/// second with `threads` threads.
async fn embedding_throughput(
    set: &LabelledSet,
    embedder: Arc<dyn Embedder>,
    threads: usize,
) -> anyhow::Result<Throughput> {
    let mut notes = set.documents.iter().cycle();
    let texts: Vec<String> = (0..128)
        .map(|_| {
            let mut text = String::new();
            while text.len() < 700 {
                if let Some(doc) = notes.next() {
                    text.push_str(&doc.text);
                    text.push(' ');
                }
            }
            text
        })
        .collect();
    embedder.embed(&texts[..1]).await?; // loads the model
    let started = Instant::now();
    embedder.embed(&texts).await?;
    let rate = texts.len() as f64 / started.elapsed().as_secs_f64();
    Ok(Throughput {
        threads,
        texts_per_sec: rate,
        per_thread: rate / threads as f64,
    })
}

/// Ingest and query latency over `args.chunks` synthetic chunks in a database file. Texts are
/// drawn from a Zipf-like vocabulary; their vectors are random unit vectors (embedding 100k
/// chunks would take the model far longer than the store: that rate is measured apart).
async fn scale(
    args: &BenchMemoryArgs,
    embedder: Arc<dyn Embedder>,
    fusion: Fusion,
) -> anyhow::Result<Scale> {
    let dir = tempfile::tempdir().context("cannot create a scratch directory")?;
    let store = Store::open(&dir.path().join("bench.db"))?;
    let dims = embedder.embed(&["probe".to_owned()]).await?[0].len();
    let id = embedder.id().to_owned();
    let mut words = Words::new(42);
    let mut rng = Rng(99);
    let chunks = args.chunks as usize;
    let started = Instant::now();
    let mut pending = Vec::with_capacity(1000);
    for _ in 0..chunks {
        let item = store
            .add_memory(
                NewMemory {
                    namespace: NAMESPACE.into(),
                    text: words.text(90),
                    tags: Vec::new(),
                    source: None,
                },
                Chunking {
                    size: 2000,
                    overlap: 100,
                },
            )
            .await?;
        pending.push((item.id, rng.unit_vector(dims)));
        if pending.len() == 1000 {
            let batch = std::mem::take(&mut pending);
            store.store_vectors(&id, batch).await?;
        }
    }
    if !pending.is_empty() {
        store.store_vectors(&id, pending).await?;
    }
    let ingest = chunks as f64 / started.elapsed().as_secs_f64();
    // Chunk ids equal item ids here: one chunk per item, inserted in order.

    let memory = Memory::new(store.clone(), Ok(embedder), Chunking::default(), fusion);
    let probe = rng.unit_vector(dims);
    let vector_query = |vector: Vec<f32>| VectorQuery {
        namespaces: vec![NAMESPACE.into()],
        embedder: id.clone(),
        vector,
        limit: 5,
        ..VectorQuery::default()
    };
    let started = Instant::now();
    store.vector_search(vector_query(probe)).await?;
    let index_load_ms = started.elapsed().as_secs_f64() * 1000.0;

    let queries: Vec<String> = (0..args.queries).map(|_| words.query()).collect();
    let mut latency = Vec::new();
    for mode in MODES {
        let mut times = Vec::with_capacity(queries.len());
        for q in &queries {
            let started = Instant::now();
            memory
                .search(SearchRequest {
                    namespaces: vec![NAMESPACE.into()],
                    text: q.clone(),
                    limit: 5,
                    mode,
                    ..SearchRequest::default()
                })
                .await?;
            times.push(started.elapsed());
        }
        latency.push(summary(&format!("{mode} (end to end)"), times));
    }
    // The exact scan alone, without embedding the query.
    let mut times = Vec::with_capacity(queries.len());
    for _ in &queries {
        let vector = rng.unit_vector(dims);
        let started = Instant::now();
        store.vector_search(vector_query(vector)).await?;
        times.push(started.elapsed());
    }
    latency.push(summary("exact vector scan only", times));
    Ok(Scale {
        chunks,
        ingest_chunks_per_sec: ingest,
        index_load_ms,
        index_mib: (chunks * dims * 4) as f64 / (1024.0 * 1024.0),
        queries: queries.len(),
        latency,
    })
}

fn summary(mode: &str, mut times: Vec<Duration>) -> Latency {
    times.sort();
    let at = |p: f64| {
        let i = ((times.len() as f64 - 1.0) * p).round() as usize;
        times.get(i).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    };
    Latency {
        mode: mode.to_owned(),
        p50_ms: at(0.50),
        p99_ms: at(0.99),
    }
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn unit_vector(&mut self, dims: usize) -> Vec<f32> {
        let mut v: Vec<f32> = (0..dims).map(|_| (self.unit() - 0.5) as f32).collect();
        reef_core::normalize(&mut v);
        v
    }
}

/// Synthetic text: 5,000 pronounceable words drawn with a Zipf-like skew (the most frequent
/// word is in most chunks, like "the").
struct Words {
    vocab: Vec<String>,
    rng: Rng,
}

impl Words {
    fn new(seed: u64) -> Self {
        const SYLLABLES: &[&str] = &[
            "ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "qui", "dro", "fen", "gal",
            "hur", "jin", "mor", "pel", "stra", "won",
        ];
        let mut rng = Rng(seed.max(1));
        let vocab = (0..5000)
            .map(|_| {
                let n = 2 + (rng.next() % 3) as usize;
                (0..n)
                    .map(|_| SYLLABLES[(rng.next() % SYLLABLES.len() as u64) as usize])
                    .collect()
            })
            .collect();
        Self { vocab, rng }
    }

    /// A word at a Zipf-distributed rank (rank ~ vocab^u - 1, u uniform) of at least `min`.
    fn word(&mut self, min: usize) -> &str {
        loop {
            let rank = (self.vocab.len() as f64).powf(self.rng.unit()) as usize - 1;
            if rank >= min {
                return &self.vocab[rank.min(self.vocab.len() - 1)];
            }
        }
    }

    fn text(&mut self, words: usize) -> String {
        let mut out = String::new();
        for i in 0..words {
            if i > 0 {
                out.push(' ');
            }
            let w = self.word(0).to_owned();
            out.push_str(&w);
        }
        out
    }

    /// Three words, none of the 100 most frequent: those play the part of English stopwords,
    /// which real queries drop.
    fn query(&mut self) -> String {
        (0..3)
            .map(|_| self.word(100).to_owned())
            .collect::<Vec<_>>()
            .join(" ")
    }
}
