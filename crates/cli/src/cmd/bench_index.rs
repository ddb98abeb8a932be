//! The vector index part of `reef bench memory`: recall@10 of the quantised search (4-bit codes
//! scanned, the best re-scored exactly) against the exact scan over N rows, for three kinds of
//! vectors (random directions, the worst case for any approximation; queries next to a stored
//! vector; and clustered vectors, as embeddings of notes on a few hundred subjects are), and
//! both scans timed from 1,000 rows up to N, which shows where the quantised scan starts to
//! pay.

use reef_store::{Scan, VectorMatrix, reranked_for};
use serde::Serialize;
use std::time::Instant;

/// Queries per recall figure and per timed size.
const QUERIES: usize = 100;

/// Hits compared for recall.
const K: usize = 10;

/// Subjects of the clustered vectors.
const SUBJECTS: usize = 500;

#[derive(Serialize)]
pub struct IndexReport {
    pub rows: usize,
    /// Rows the quantised search scores exactly for 10 hits.
    pub reranked: usize,
    pub recall_at_10_uniform: f64,
    pub recall_at_10_near: f64,
    pub recall_at_10_clustered: f64,
    pub scans: Vec<ScanTimes>,
    /// The smallest size timed where the quantised search was faster.
    pub crossover_rows: Option<usize>,
}

#[derive(Serialize)]
pub struct ScanTimes {
    pub rows: usize,
    pub exact_p50_ms: f64,
    pub quantized_p50_ms: f64,
}

/// Measures the index over `rows` rows of `dims` dimensions; `unit` draws a random unit
/// vector.
pub fn measure(rows: usize, dims: usize, unit: &mut dyn FnMut(usize) -> Vec<f32>) -> IndexReport {
    let uniform = matrix((0..rows).map(|_| unit(dims)), dims);
    let queries: Vec<Vec<f32>> = (0..QUERIES).map(|_| unit(dims)).collect();
    let recall_at_10_uniform = recall(&uniform, &queries);
    // Next to a stored row: the row plus noise of 0.6 its length (cosine about 0.86).
    let near: Vec<Vec<f32>> = (0..QUERIES)
        .map(|i| {
            let row = (i * 7919) % rows;
            let noise = unit(dims);
            let mut q: Vec<f32> = uniform
                .row(row)
                .iter()
                .zip(&noise)
                .map(|(x, n)| x + 0.6 * n)
                .collect();
            reef_core::normalize(&mut q);
            q
        })
        .collect();
    let recall_at_10_near = recall(&uniform, &near);
    drop(uniform);
    let centers: Vec<Vec<f32>> = (0..SUBJECTS).map(|_| unit(dims)).collect();
    let mut around = |i: usize| {
        let noise = unit(dims);
        let mut v: Vec<f32> = centers[i % SUBJECTS]
            .iter()
            .zip(&noise)
            .map(|(c, n)| c + 0.8 * n)
            .collect();
        reef_core::normalize(&mut v);
        v
    };
    let clustered = matrix((0..rows).map(&mut around), dims);
    let queries: Vec<Vec<f32>> = (0..QUERIES).map(|i| around(i * 31)).collect();
    let recall_at_10_clustered = recall(&clustered, &queries);
    drop(clustered);

    let mut sizes: Vec<usize> = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000]
        .iter()
        .map(|k| k * 1000)
        .filter(|&s| s < rows)
        .collect();
    sizes.push(rows);
    let scans: Vec<ScanTimes> = sizes
        .into_iter()
        .map(|size| {
            let m = matrix((0..size).map(|_| unit(dims)), dims);
            let queries: Vec<Vec<f32>> = (0..QUERIES).map(|_| unit(dims)).collect();
            ScanTimes {
                rows: size,
                exact_p50_ms: p50(&m, &queries, Scan::Exact),
                quantized_p50_ms: p50(&m, &queries, quantized()),
            }
        })
        .collect();
    let crossover_rows = scans
        .iter()
        .find(|s| s.quantized_p50_ms < s.exact_p50_ms)
        .map(|s| s.rows);
    IndexReport {
        rows,
        reranked: reranked_for(K),
        recall_at_10_uniform,
        recall_at_10_near,
        recall_at_10_clustered,
        scans,
        crossover_rows,
    }
}

fn matrix(vectors: impl Iterator<Item = Vec<f32>>, dims: usize) -> VectorMatrix {
    let mut m = VectorMatrix::new(dims);
    for (id, v) in vectors.enumerate() {
        m.push(id as i64, 0, &v);
    }
    m
}

/// The quantised search as memory search runs it for 10 hits.
fn quantized() -> Scan {
    Scan::Quantized {
        reranked: reranked_for(K),
    }
}

/// The share of the exact top 10 the quantised search finds, over `queries`.
fn recall(m: &VectorMatrix, queries: &[Vec<f32>]) -> f64 {
    let mut found = 0;
    for q in queries {
        let exact = m.top(q, &[true], K, Scan::Exact);
        let approx = m.top(q, &[true], K, quantized());
        found += exact
            .iter()
            .filter(|(_, id)| approx.iter().any(|(_, a)| a == id))
            .count();
    }
    found as f64 / (queries.len() * K) as f64
}

fn p50(m: &VectorMatrix, queries: &[Vec<f32>], scan: Scan) -> f64 {
    let mut times: Vec<f64> = queries
        .iter()
        .map(|q| {
            let started = Instant::now();
            std::hint::black_box(m.top(q, &[true], K, scan));
            started.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}
