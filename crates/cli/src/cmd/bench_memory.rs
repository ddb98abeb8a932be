//! `reef bench memory`: retrieval quality on the labelled set shipped with reef (recall@1 and
//! recall@5 of keyword, vector and hybrid search per kind of query, on a held-out half of the
//! queries, with the fusion's keyword weight chosen on the other half), embedding throughput
//! per thread of the fused encoders (f32, and int8 where the CPU has AVX-512 VNNI) against the
//! reference one, and memory at scale — ingest rate and p50/p99 query latency of each mode over
//! N chunks (100,000 by default).

use crate::args::BenchMemoryArgs;
use crate::exit::Exit;
use crate::home;
use anyhow::Context as _;
use reef_config::EmbedderChoice;
use reef_core::Embedder;
use reef_llm::LocalEngine;
use reef_store::{
    Chunking, Fusion, FusionMethod, Memory, MemoryHit, NewMemory, QueryTerms, Scan, SearchMode,
    SearchRequest, Store, VectorQuery, fuse,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The labelled set: documents, and queries with the ids of the documents that answer them.
const RETRIEVAL_SET: &str = include_str!("../../data/retrieval-set.json");

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

/// Recall@1 and recall@5 of one way of ranking: overall and per kind of query.
#[derive(Serialize)]
struct Recall {
    ranking: String,
    recall_at_1: f64,
    recall_at_5: f64,
    /// Per kind: recall@1, recall@5.
    by_kind: BTreeMap<String, (f64, f64)>,
}

/// The quality report: each ranking on the queries held out from tuning and on the ones
/// tuned on, and the keyword weights tried on the training half.
#[derive(Serialize)]
struct Quality {
    train_queries: usize,
    held_out_queries: usize,
    held_out: Vec<Recall>,
    train: Vec<Recall>,
    /// Evidence fusion's weights tried on the training half: (words, identifiers), the
    /// (kind, recall@k) cells where hybrid is at least as good as both sides, and the mean
    /// recall.
    tuning: Vec<((f64, f64), usize, f64)>,
    /// The weights the training half chooses.
    chosen_weights: (f64, f64),
}

#[derive(Serialize)]
struct Throughput {
    engine: &'static str,
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
    index: crate::cmd::bench_index::IndexReport,
}

#[derive(Serialize)]
struct Report {
    embedder: String,
    /// The encoder behind `quality` and `scale`: the one reef uses on this CPU.
    engine: &'static str,
    fusion: String,
    keyword_weight: f64,
    identifier_weight: f64,
    vector_weight: f64,
    documents: usize,
    queries: usize,
    quality: Quality,
    /// The same evaluation with the f32 encoder, when reef uses the int8 one.
    quality_f32: Option<Quality>,
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
    let load = |threads: usize, engine: LocalEngine| {
        reef_llm::build_local_embedder(model, &config.models.dir, threads, engine)
            .map_err(|e| Exit::usage(e.to_string()))
    };
    let engine = LocalEngine::fastest();
    let embedder = load(threads, engine)?;
    let set: LabelledSet =
        serde_json::from_str(RETRIEVAL_SET).context("the built-in retrieval set is malformed")?;
    let fusion = reef_agent::memory_fusion(&config.memory);
    let measured = quality(&set, embedder.clone(), fusion).await?;
    // The int8 encoder approximates the f32 one: the same set ranked with f32 vectors shows
    // what the approximation costs.
    let quality_f32 = if engine == LocalEngine::Fused {
        None
    } else {
        Some(quality(&set, load(threads, LocalEngine::Fused)?, fusion).await?)
    };
    let mut throughput = Vec::new();
    let mut scale_report = None;
    if !args.quality_only {
        let mut counts = vec![1];
        if threads > 1 {
            counts.push(threads);
        }
        // The reference encoder first, then reef's own, on the same texts in the same run.
        let mut engines = vec![LocalEngine::Reference, LocalEngine::Fused];
        if engine == LocalEngine::Int8 {
            engines.push(LocalEngine::Int8);
        }
        for engine in engines {
            for &t in &counts {
                throughput
                    .push(embedding_throughput(&set, load(t, engine)?, engine.name(), t).await?);
            }
        }
        scale_report = Some(scale(&args, embedder.clone(), fusion).await?);
    }
    let report = Report {
        embedder: model.clone(),
        engine: engine.name(),
        fusion: match fusion.method {
            FusionMethod::Evidence => "evidence".into(),
            FusionMethod::Rrf => format!("rrf (k {})", fusion.k),
        },
        keyword_weight: fusion.keyword_weight,
        identifier_weight: fusion.identifier_weight,
        vector_weight: fusion.vector_weight,
        documents: set.documents.len(),
        queries: set.queries.len(),
        quality: measured,
        quality_f32,
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
    let q = &r.quality;
    println!(
        "retrieval quality: {} documents, {} labelled queries ({} to tune on, {} held out), \
         embedder {} ({} encoder), fusion {} with weights {} (words) and {} (identifiers)",
        r.documents,
        r.queries,
        q.train_queries,
        q.held_out_queries,
        r.embedder,
        r.engine,
        r.fusion,
        r.keyword_weight,
        r.identifier_weight
    );
    for (title, rows) in [
        ("held out (recall@1 / recall@5)", &q.held_out),
        ("tuned on (recall@1 / recall@5)", &q.train),
    ] {
        println!("  {title}");
        for row in rows {
            let kinds: Vec<String> = row
                .by_kind
                .iter()
                .map(|(k, (r1, r5))| format!("{k} {r1:.2}/{r5:.2}"))
                .collect();
            println!(
                "    {:<13} {:.3} / {:.3}   ({})",
                row.ranking,
                row.recall_at_1,
                row.recall_at_5,
                kinds.join(", ")
            );
        }
    }
    let best = q.tuning.iter().map(|t| t.1).max().unwrap_or(0);
    let tried: Vec<String> = q
        .tuning
        .iter()
        .filter(|t| t.1 == best)
        .map(|((w, i), _, mean)| format!("{w}/{i} {mean:.3}"))
        .collect();
    println!(
        "  on the training half, {} of {} weight pairs (words/identifiers) put hybrid at or above both sides in {best} cells: {}; chosen {}/{}",
        tried.len(),
        q.tuning.len(),
        tried.join(", "),
        q.chosen_weights.0,
        q.chosen_weights.1
    );
    if let Some(f32) = &r.quality_f32 {
        let rows: Vec<String> = f32
            .held_out
            .iter()
            .map(|row| {
                format!(
                    "{} {:.3} / {:.3}",
                    row.ranking, row.recall_at_1, row.recall_at_5
                )
            })
            .collect();
        println!(
            "  held out, ranked with the f32 encoder's vectors: {}",
            rows.join(", ")
        );
    }
    let reference = LocalEngine::Reference.name();
    for t in &r.throughput {
        let before = r
            .throughput
            .iter()
            .find(|b| b.threads == t.threads && b.engine == reference && t.engine != reference);
        let ratio = before.map_or(String::new(), |b| {
            format!(", {:.2}× the reference", t.texts_per_sec / b.texts_per_sec)
        });
        println!(
            "embedding, {} encoder: {} thread(s): {:.1} chunks/s ({:.1} per thread){ratio}",
            t.engine, t.threads, t.texts_per_sec, t.per_thread
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
        let i = &s.index;
        println!(
            "vector index: 4-bit codes scanned, the best {} scored exactly; recall@10 against the exact scan at {} rows: {:.3} (random directions), {:.3} (queries next to a stored vector), {:.3} (clustered vectors)",
            i.reranked,
            i.rows,
            i.recall_at_10_uniform,
            i.recall_at_10_near,
            i.recall_at_10_clustered
        );
        for t in &i.scans {
            println!(
                "  {:>9} rows   exact p50 {:>7.3} ms   quantised p50 {:>7.3} ms",
                t.rows, t.exact_p50_ms, t.quantized_p50_ms
            );
        }
        match i.crossover_rows {
            Some(rows) => println!(
                "  the quantised scan is faster from {rows} rows (reef uses it from {} rows in the namespaces searched)",
                reef_store::APPROXIMATE_FROM
            ),
            None => println!("  the exact scan was faster at every size timed"),
        }
    }
}

/// The candidates hybrid search fuses for a final limit of 5: each side's first ten.
const CANDIDATES: usize = 10;
/// Evidence fusion's word and identifier weights tried on the training half.
const WORD_WEIGHTS: [f64; 7] = [0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0];
const IDENTIFIER_WEIGHTS: [f64; 7] = [0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5];

/// One query's two rankings, as hybrid search gets them, and what answers it.
struct Ranked<'a> {
    query: &'a LabelledQuery,
    terms: QueryTerms,
    keyword: Vec<MemoryHit>,
    vector: Vec<MemoryHit>,
}

/// Recall@1 and @5 of each ranking on the labelled set (documents stored one item each):
/// queries split in two halves alternately within each kind; evidence fusion's keyword
/// weight chosen on one half, every ranking reported on both.
async fn quality(
    set: &LabelledSet,
    embedder: Arc<dyn Embedder>,
    fusion: Fusion,
) -> anyhow::Result<Quality> {
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
    let mut train = Vec::new();
    let mut held_out = Vec::new();
    let mut seen_of_kind: HashMap<&str, usize> = HashMap::new();
    for q in &set.queries {
        let side = |mode| SearchRequest {
            namespaces: vec![NAMESPACE.into()],
            text: q.query.clone(),
            limit: CANDIDATES,
            mode,
            ..SearchRequest::default()
        };
        let keyword = match memory.search(side(SearchMode::Keyword)).await {
            Ok(outcome) => outcome.hits,
            // A query whose words are all stopwords finds nothing by keyword.
            Err(reef_store::StoreError::Invalid { field: "query", .. }) => Vec::new(),
            Err(e) => return Err(e.into()),
        };
        let vector = memory.search(side(SearchMode::Vector)).await?.hits;
        let ranked = Ranked {
            query: q,
            terms: memory.query_terms(&q.query).await?,
            keyword,
            vector,
        };
        let n = seen_of_kind.entry(q.kind.as_str()).or_default();
        if n.is_multiple_of(2) {
            train.push(ranked);
        } else {
            held_out.push(ranked);
        }
        *n += 1;
    }
    let report = |ranked: &[Ranked], (words, identifiers): (f64, f64)| -> Vec<Recall> {
        let evidence = Fusion {
            method: FusionMethod::Evidence,
            keyword_weight: words,
            identifier_weight: identifiers,
            ..fusion
        };
        let rrf = Fusion::of(FusionMethod::Rrf);
        [
            ("keyword", None),
            ("vector", None),
            ("hybrid", Some(evidence)),
            ("hybrid (rrf)", Some(rrf)),
        ]
        .into_iter()
        .map(|(name, fused)| {
            recall(name, ranked, &doc_of_item, |r| match (name, fused) {
                ("keyword", _) => r.keyword.clone(),
                (_, Some(f)) => fuse(&r.terms, &r.keyword, &r.vector, f, 5),
                _ => r.vector.clone(),
            })
        })
        .collect()
    };
    // Cells where hybrid is at least as good as each side, per kind and k; then mean recall.
    let standing = |rows: &[Recall]| -> (usize, f64) {
        let (keyword, vector, hybrid) = (&rows[0], &rows[1], &rows[2]);
        let mut cells = 0;
        for (kind, (h1, h5)) in &hybrid.by_kind {
            let (k1, k5) = keyword.by_kind[kind];
            let (v1, v5) = vector.by_kind[kind];
            cells += usize::from(*h1 >= k1.max(v1)) + usize::from(*h5 >= k5.max(v5));
        }
        (cells, (hybrid.recall_at_1 + hybrid.recall_at_5) / 2.0)
    };
    let mut tuning = Vec::new();
    for words in WORD_WEIGHTS {
        for identifiers in IDENTIFIER_WEIGHTS {
            let (cells, mean) = standing(&report(&train, (words, identifiers)));
            tuning.push(((words, identifiers), cells, mean));
        }
    }
    let configured = (fusion.keyword_weight, fusion.identifier_weight);
    // The best pairs (most cells, then the highest mean recall); of a plateau of equals,
    // the middle one in grid order, away from the plateau's edges.
    let best = tuning
        .iter()
        .max_by(|a, b| a.1.cmp(&b.1).then(a.2.total_cmp(&b.2)))
        .map(|t| (t.1, t.2));
    let plateau: Vec<(f64, f64)> = tuning
        .iter()
        .filter(|t| Some((t.1, t.2)) == best)
        .map(|t| t.0)
        .collect();
    let chosen = plateau
        .get(plateau.len() / 2)
        .copied()
        .unwrap_or(configured);
    Ok(Quality {
        train_queries: train.len(),
        held_out_queries: held_out.len(),
        held_out: report(&held_out, configured),
        train: report(&train, configured),
        tuning,
        chosen_weights: chosen,
    })
}

/// Recall@1 and @5 of the ranking `rank` gives each query.
fn recall(
    name: &str,
    ranked: &[Ranked],
    doc_of_item: &HashMap<i64, String>,
    rank: impl Fn(&Ranked) -> Vec<MemoryHit>,
) -> Recall {
    let mut total = (0.0, 0.0);
    let mut by_kind: BTreeMap<String, (f64, f64, usize)> = BTreeMap::new();
    for r in ranked {
        let found: Vec<&String> = rank(r)
            .iter()
            .filter_map(|h| doc_of_item.get(&h.item_id))
            .collect();
        let at = |k: usize| {
            let top = &found[..found.len().min(k)];
            let hit = r.query.relevant.iter().filter(|d| top.contains(d)).count();
            // At 1 a single relevant document in first place is full recall.
            hit as f64 / r.query.relevant.len().min(k).max(1) as f64
        };
        let (r1, r5) = (at(1), at(5));
        total.0 += r1;
        total.1 += r5;
        let entry = by_kind.entry(r.query.kind.clone()).or_default();
        entry.0 += r1;
        entry.1 += r5;
        entry.2 += 1;
    }
    let n = ranked.len().max(1) as f64;
    Recall {
        ranking: name.to_owned(),
        recall_at_1: total.0 / n,
        recall_at_5: total.1 / n,
        by_kind: by_kind
            .into_iter()
            .map(|(k, (r1, r5, n))| (k, (r1 / n as f64, r5 / n as f64)))
            .collect(),
    }
}

/// Rounds of the embedding throughput measure; the best counts.
const ROUNDS: usize = 2;

/// English chunks of about 700 characters (the labelled set's notes run together) embedded per
/// second with `threads` threads, the better of [`ROUNDS`] rounds.
async fn embedding_throughput(
    set: &LabelledSet,
    embedder: Arc<dyn Embedder>,
    engine: &'static str,
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
    // The better of two rounds: a round the machine's other work slowed says nothing about
    // the encoder.
    let mut rate = 0.0f64;
    for _ in 0..ROUNDS {
        let started = Instant::now();
        embedder.embed(&texts).await?;
        rate = rate.max(texts.len() as f64 / started.elapsed().as_secs_f64());
    }
    Ok(Throughput {
        engine,
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

    // Each mode gets queries of its own, so no query's vector is cached from another mode;
    // the last line asks the hybrid queries again, with their vectors cached.
    let mut latency = Vec::new();
    let mut hybrid_queries = Vec::new();
    for mode in [SearchMode::Keyword, SearchMode::Vector, SearchMode::Hybrid] {
        let queries: Vec<String> = (0..args.queries).map(|_| words.query()).collect();
        let times = time_searches(&memory, &queries, mode).await?;
        latency.push(summary(&format!("{mode} (end to end)"), times));
        hybrid_queries = queries;
    }
    let times = time_searches(&memory, &hybrid_queries, SearchMode::Hybrid).await?;
    latency.push(summary("hybrid, query cached", times));
    // The vector side alone, without embedding the query: the exact scan and the
    // quantised search the index uses at this size.
    for (label, scan) in [
        ("exact vector scan only", Scan::Exact),
        ("index search only", Scan::Auto),
    ] {
        let mut times = Vec::with_capacity(hybrid_queries.len());
        for _ in &hybrid_queries {
            let query = VectorQuery {
                scan,
                ..vector_query(rng.unit_vector(dims))
            };
            let started = Instant::now();
            store.vector_search(query).await?;
            times.push(started.elapsed());
        }
        latency.push(summary(label, times));
    }
    drop(memory);
    drop(store);
    let index = crate::cmd::bench_index::measure(chunks, dims, &mut |d| rng.unit_vector(d));
    Ok(Scale {
        chunks,
        ingest_chunks_per_sec: ingest,
        index_load_ms,
        index_mib: (chunks * dims * 4) as f64 / (1024.0 * 1024.0),
        queries: hybrid_queries.len(),
        latency,
        index,
    })
}

/// The time of each search of `queries` in `mode`, end to end.
async fn time_searches(
    memory: &Memory,
    queries: &[String],
    mode: SearchMode,
) -> anyhow::Result<Vec<Duration>> {
    let mut times = Vec::with_capacity(queries.len());
    for q in queries {
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
    Ok(times)
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
