//! `VectorMatrix`: the vectors memory search compares a query with, held in RAM as one
//! contiguous matrix of unit vectors and again as 4-bit codes (`nibbles.rs`: each coordinate a
//! level of its row's largest). A small matrix is scanned exactly. From [`APPROXIMATE_FROM`]
//! rows in the namespaces searched, a search scans the codes instead (an eighth of the memory
//! to stream, which is what an exact scan of 100,000 rows waits on) and scores its best
//! candidates again exactly, so the order of the hits it returns is the exact one;
//! `reef bench memory` reports its recall against the exact scan and where it starts to pay.

use crate::nibbles::{self, Query};
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// From this many rows in the namespaces searched, a search scans the 4-bit codes first:
/// below it the exact scan is as fast (`reef bench memory` measures the crossover).
pub const APPROXIMATE_FROM: usize = 5_000;

/// The rows, per hit asked for, that a quantised search scores exactly (at least
/// [`MIN_RERANKED`]).
pub const RERANKED_PER_HIT: usize = 20;

/// The fewest rows a quantised search scores exactly.
pub const MIN_RERANKED: usize = 200;

/// From this many rows an exact scan is split among threads.
pub const PARALLEL_FROM: usize = 20_000;

/// The most threads one scan uses.
pub const SCAN_THREADS: usize = 4;

/// The rows a quantised search for `k` hits scores exactly.
pub fn reranked_for(k: usize) -> usize {
    k.saturating_mul(RERANKED_PER_HIT).max(MIN_RERANKED)
}

/// How a search goes over the matrix.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Scan {
    /// Every row's dot product with the query.
    Exact,
    /// Every row's 4-bit dot product, then the best `reranked` rows exactly.
    Quantized { reranked: usize },
    /// Exact below [`APPROXIMATE_FROM`] rows, else quantised with [`reranked_for`].
    #[default]
    Auto,
}

/// Unit vectors with an id and a group (the namespace) each.
#[derive(Clone, Debug, Default)]
pub struct VectorMatrix {
    dims: usize,
    ids: Vec<i64>,
    groups: Vec<u32>,
    data: Vec<f32>,
    /// The rows' 4-bit codes, [`nibbles::stride`] bytes each; a row's scores are multiplied
    /// by its `scales` entry.
    codes: Vec<u8>,
    scales: Vec<f32>,
}

/// Rows scored together by the 4-bit kernel.
const SCORED_TOGETHER: usize = 256;

impl VectorMatrix {
    /// An empty matrix of `dims`-long vectors.
    pub fn new(dims: usize) -> Self {
        Self {
            dims,
            ..Self::default()
        }
    }

    pub fn dims(&self) -> usize {
        self.dims
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Row `row`'s vector.
    ///
    /// # Panics
    /// When `row` is not below [`Self::len`].
    pub fn row(&self, row: usize) -> &[f32] {
        &self.data[row * self.dims..(row + 1) * self.dims]
    }

    /// The ids of the rows, in row order.
    pub fn ids(&self) -> &[i64] {
        &self.ids
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Bytes the matrix takes: four a coordinate, its codes, and the ids, groups and scales.
    pub fn bytes(&self) -> usize {
        self.data.len() * 4 + self.codes.len() + self.ids.len() * 16
    }

    fn stride(&self) -> usize {
        nibbles::stride(self.dims)
    }

    /// Appends a row. `vector` must be `dims` long.
    pub fn push(&mut self, id: i64, group: u32, vector: &[f32]) {
        debug_assert_eq!(vector.len(), self.dims);
        self.ids.push(id);
        self.groups.push(group);
        self.data.extend_from_slice(vector);
        let scale = nibbles::encode(vector, self.stride(), &mut self.codes);
        self.scales.push(scale);
    }

    /// Drops the rows with these ids, keeping the order of the rest.
    pub fn remove(&mut self, ids: &[i64]) {
        if ids.is_empty() {
            return;
        }
        let drop: std::collections::HashSet<i64> = ids.iter().copied().collect();
        let (dims, stride) = (self.dims, self.stride());
        let mut keep = 0;
        for row in 0..self.ids.len() {
            if drop.contains(&self.ids[row]) {
                continue;
            }
            if keep != row {
                self.ids[keep] = self.ids[row];
                self.groups[keep] = self.groups[row];
                self.scales[keep] = self.scales[row];
                self.data
                    .copy_within(row * dims..(row + 1) * dims, keep * dims);
                self.codes
                    .copy_within(row * stride..(row + 1) * stride, keep * stride);
            }
            keep += 1;
        }
        self.ids.truncate(keep);
        self.groups.truncate(keep);
        self.scales.truncate(keep);
        self.data.truncate(keep * dims);
        self.codes.truncate(keep * stride);
    }

    /// The best `k` rows of the `allowed` groups (indexed by group) by dot product with
    /// `query`, best first, as (score, id). Scores are always the exact dot products.
    pub fn top(&self, query: &[f32], allowed: &[bool], k: usize, scan: Scan) -> Vec<(f32, i64)> {
        let all = allowed.iter().all(|a| *a);
        let in_scope = |row: usize| {
            all || allowed
                .get(self.groups[row] as usize)
                .copied()
                .unwrap_or(false)
        };
        let rows = if all {
            self.len()
        } else {
            (0..self.len()).filter(|&r| in_scope(r)).count()
        };
        let reranked = match scan {
            Scan::Exact => None,
            Scan::Quantized { reranked } => Some(reranked.max(k)),
            Scan::Auto if rows < APPROXIMATE_FROM => None,
            Scan::Auto => Some(reranked_for(k)),
        };
        let dims = self.dims;
        let exact = |row: usize| crate::vectors::dot(query, &self.data[row * dims..][..dims]);
        let best = match reranked {
            Some(r) if r < rows => {
                let stride = self.stride();
                let coded = Query::new(query, stride);
                // One thread: at 100,000 rows the codes stream in about a millisecond, faster than
                // splitting them (1.06 against 1.28 ms p50), and the other cores stay free for
                // the keyword side and the query's embedding.
                let candidates = {
                    let mut found = Best::new(r);
                    let mut scores = [0i32; SCORED_TOGETHER];
                    for start in (0..self.len()).step_by(SCORED_TOGETHER) {
                        let end = (start + SCORED_TOGETHER).min(self.len());
                        let scores = &mut scores[..end - start];
                        nibbles::score_rows(
                            &self.codes[start * stride..end * stride],
                            stride,
                            &coded,
                            scores,
                        );
                        for (row, &score) in (start..end).zip(scores.iter()) {
                            if in_scope(row) {
                                found.offer(score as f32 * self.scales[row], row);
                            }
                        }
                    }
                    found.into_vec()
                };
                best_rows(candidates.into_iter().map(|(_, row)| (exact(row), row)), k)
            }
            _ => self.best_of(k, &|range: std::ops::Range<usize>| {
                best_rows(range.filter(|&r| in_scope(r)).map(|r| (exact(r), r)), k)
            }),
        };
        let mut best: Vec<(f32, i64)> = best
            .into_iter()
            .map(|(s, row)| (s, self.ids[row]))
            .collect();
        best.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        best
    }

    /// The `k` best rows, in no order, of those `part` finds in each range of rows. From
    /// [`PARALLEL_FROM`] rows the matrix is split among up to [`SCAN_THREADS`] threads, each
    /// running `part` on its share.
    fn best_of<F>(&self, k: usize, part: &F) -> Vec<(f32, usize)>
    where
        F: Fn(std::ops::Range<usize>) -> Vec<(f32, usize)> + Sync,
    {
        let n = self.len();
        let threads = if n >= PARALLEL_FROM {
            std::thread::available_parallelism().map_or(1, |t| t.get().min(SCAN_THREADS))
        } else {
            1
        };
        if threads <= 1 {
            return part(0..n);
        }
        let size = n.div_ceil(threads);
        let found = std::thread::scope(|s| {
            let others: Vec<_> = (1..threads)
                .map(|t| s.spawn(move || part(t * size..((t + 1) * size).min(n))))
                .collect();
            let mut found = part(0..size);
            for other in others {
                match other.join() {
                    Ok(best) => found.extend(best),
                    Err(panic) => std::panic::resume_unwind(panic),
                }
            }
            found
        });
        best_rows(found.into_iter(), k)
    }
}

/// The `k` highest-scoring (score, row) pairs, in no order.
fn best_rows(scored: impl Iterator<Item = (f32, usize)>, k: usize) -> Vec<(f32, usize)> {
    let mut best = Best::new(k);
    for (score, row) in scored {
        best.offer(score, row);
    }
    best.into_vec()
}

/// The `k` highest-scoring rows offered so far.
struct Best {
    heap: BinaryHeap<MinScore>,
    k: usize,
}

impl Best {
    fn new(k: usize) -> Self {
        Self {
            heap: BinaryHeap::with_capacity(k + 1),
            k,
        }
    }

    fn offer(&mut self, score: f32, row: usize) {
        if self.heap.len() < self.k {
            self.heap.push(MinScore(score, row));
        } else if self.heap.peek().is_some_and(|m| score > m.0) {
            self.heap.pop();
            self.heap.push(MinScore(score, row));
        }
    }

    fn into_vec(self) -> Vec<(f32, usize)> {
        self.heap
            .into_iter()
            .map(|MinScore(s, row)| (s, row))
            .collect()
    }
}

/// A heap entry ordered so the worst score is on top.
struct MinScore(f32, usize);

impl PartialEq for MinScore {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for MinScore {}
impl PartialOrd for MinScore {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for MinScore {
    fn cmp(&self, other: &Self) -> Ordering {
        other.0.total_cmp(&self.0).then(self.1.cmp(&other.1))
    }
}

#[cfg(test)]
mod tests {
    use super::{PARALLEL_FROM, Scan, VectorMatrix};

    fn unit(seed: &mut u64, dims: usize) -> Vec<f32> {
        let mut v: Vec<f32> = (0..dims)
            .map(|_| {
                *seed ^= *seed << 13;
                *seed ^= *seed >> 7;
                *seed ^= *seed << 17;
                (*seed % 2000) as f32 / 1000.0 - 1.0
            })
            .collect();
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter_mut().for_each(|x| *x /= norm);
        v
    }

    #[test]
    fn the_quantised_search_agrees_with_the_exact_one_and_respects_groups() {
        let mut seed = 7u64;
        let mut m = VectorMatrix::new(96);
        for id in 0..3000 {
            m.push(id, (id % 2) as u32, &unit(&mut seed, 96));
        }
        // A query next to row 1234 (group 0).
        let mut q: Vec<f32> = m.data[1234 * 96..1235 * 96].to_vec();
        q[0] += 0.05;
        let quantized = m.top(&q, &[true, true], 3, Scan::Quantized { reranked: 20 });
        let exact = m.top(&q, &[true, true], 3, Scan::Exact);
        assert_eq!(exact[0].1, 1234);
        // Scores are exact, so the rows found agree in score and order.
        assert_eq!(quantized, exact);
        let odd_only = m.top(&q, &[false, true], 5, Scan::Quantized { reranked: 20 });
        assert_eq!(odd_only.len(), 5);
        assert!(odd_only.iter().all(|(_, id)| id % 2 == 1), "{odd_only:?}");
        // Re-ranking more rows than are in scope is the exact scan.
        let all = m.top(&q, &[true, false], 5, Scan::Quantized { reranked: 5000 });
        assert_eq!(all, m.top(&q, &[true, false], 5, Scan::Exact));
    }

    #[test]
    fn removing_rows_keeps_the_codes_in_step() {
        let mut seed = 3u64;
        let mut m = VectorMatrix::new(64);
        for id in 0..2000 {
            m.push(id, 0, &unit(&mut seed, 64));
        }
        let target: Vec<f32> = m.data[1500 * 64..1501 * 64].to_vec();
        m.remove(&(0..1000).collect::<Vec<_>>());
        assert_eq!(m.len(), 1000);
        let hit = m.top(&target, &[true], 1, Scan::Quantized { reranked: 20 });
        assert_eq!(hit[0].1, 1500);
        assert!((hit[0].0 - 1.0).abs() < 1e-4);
    }

    #[test]
    fn a_scan_split_among_threads_finds_what_one_thread_finds() {
        let mut seed = 11u64;
        let dims = 16;
        let mut m = VectorMatrix::new(dims);
        let n = PARALLEL_FROM + 4321;
        for id in 0..n {
            m.push(id as i64, (id % 3) as u32, &unit(&mut seed, dims));
        }
        let q = unit(&mut seed, dims);
        // The best 10 of groups 0 and 2, by brute force over every row.
        let mut want: Vec<(f32, i64)> = (0..n)
            .filter(|id| id % 3 != 1)
            .map(|id| {
                let row = &m.data[id * dims..(id + 1) * dims];
                (
                    row.iter().zip(&q).map(|(a, b)| a * b).sum::<f32>(),
                    id as i64,
                )
            })
            .collect();
        want.sort_by(|a, b| b.0.total_cmp(&a.0));
        want.truncate(10);
        let got = m.top(&q, &[true, false, true], 10, Scan::Exact);
        let ids = |v: &[(f32, i64)]| v.iter().map(|h| h.1).collect::<Vec<_>>();
        assert_eq!(ids(&got), ids(&want));
        // The quantised scan (on one thread) re-ranks its way to the same rows.
        let quantized = m.top(
            &q,
            &[true, false, true],
            10,
            Scan::Quantized { reranked: 2000 },
        );
        assert_eq!(ids(&quantized), ids(&want));
    }
}
