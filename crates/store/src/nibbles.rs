//! 4-bit codes of the vector index's rows, for its first pass: each coordinate a level in
//! −7..=7 of its row's largest, two to a byte. A query is scored against many rows at once,
//! by AVX-512 VNNI where the CPU has it (64 products an instruction: a 384-long row is three
//! loads and six of them) or by a portable loop that computes the same integers.

/// Levels on each side of zero.
const LEVELS: f32 = 7.0;
/// Added to a level to store it as an unsigned nibble, so a nibble of 8 is zero (padding).
const OFFSET: i32 = 8;
/// Bytes the kernel takes at a time.
const BLOCK: usize = 64;

/// Bytes of a row's codes for `dims`-long vectors: byte `j` holds coordinate `j` in its low
/// nibble and coordinate `j + stride` in its high one (a whole number of kernel blocks).
pub(crate) fn stride(dims: usize) -> usize {
    dims.div_ceil(2).next_multiple_of(BLOCK).max(BLOCK)
}

/// Appends the codes of `vector` (`stride` bytes) to `out` and returns what one level stands
/// for, the factor of the row's scores.
pub(crate) fn encode(vector: &[f32], stride: usize, out: &mut Vec<u8>) -> f32 {
    let largest = vector.iter().fold(0f32, |m, x| m.max(x.abs()));
    let step = if largest > 0.0 { largest / LEVELS } else { 1.0 };
    let nibble = |i: usize| -> u8 {
        let level = vector
            .get(i)
            .map_or(0, |x| (x / step).round().clamp(-LEVELS, LEVELS) as i32);
        (level + OFFSET) as u8
    };
    out.extend((0..stride).map(|j| nibble(j) | (nibble(j + stride) << 4)));
    step
}

/// A query as the kernels take it: 8-bit coordinates split as the codes are.
pub(crate) struct Query {
    low: Vec<i8>,
    high: Vec<i8>,
    /// `OFFSET` times the sum of the coordinates: what the nibbles' offset adds to a score.
    offset: i32,
}

impl Query {
    pub(crate) fn new(vector: &[f32], stride: usize) -> Self {
        let largest = vector.iter().fold(0f32, |m, x| m.max(x.abs()));
        let step = if largest > 0.0 { largest / 127.0 } else { 1.0 };
        let level = |i: usize| -> i8 {
            vector
                .get(i)
                .map_or(0, |x| (x / step).round().clamp(-127.0, 127.0) as i8)
        };
        let low: Vec<i8> = (0..stride).map(level).collect();
        let high: Vec<i8> = (stride..2 * stride).map(level).collect();
        let offset = OFFSET * low.iter().chain(&high).map(|&q| i32::from(q)).sum::<i32>();
        Self { low, high, offset }
    }
}

/// `scores[r]` = the dot product, in levels, of row `r` of `codes` (rows of `stride` bytes)
/// with `query`; as many rows as `scores` is long.
///
/// # Panics
/// When `codes` holds fewer rows or the query another stride (a bug in the caller).
pub(crate) fn score_rows(codes: &[u8], stride: usize, query: &Query, scores: &mut [i32]) {
    assert!(
        stride.is_multiple_of(BLOCK)
            && codes.len() >= scores.len() * stride
            && query.low.len() == stride
            && query.high.len() == stride,
        "score_rows: {} rows of {stride} bytes do not fit",
        scores.len()
    );
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512vnni")
    {
        // SAFETY: the CPU has the features `vnni` enables, and the assertion above puts every
        // read it makes inside `codes`, `query.low` and `query.high`.
        #[allow(
            unsafe_code,
            reason = "VNNI intrinsics and their unaligned loads; bounds are checked above"
        )]
        unsafe {
            vnni(codes, stride, query, scores);
        }
        return;
    }
    portable(codes, stride, query, scores);
}

/// What [`vnni`] computes, with plain integer arithmetic.
fn portable(codes: &[u8], stride: usize, query: &Query, scores: &mut [i32]) {
    for (score, row) in scores.iter_mut().zip(codes.chunks_exact(stride)) {
        let sum: i32 = row
            .iter()
            .zip(query.low.iter().zip(&query.high))
            .map(|(&b, (&l, &h))| {
                i32::from(b & 15) * i32::from(l) + i32::from(b >> 4) * i32::from(h)
            })
            .sum();
        *score = sum - query.offset;
    }
}

/// # Safety
/// The CPU has AVX-512 F, BW and VNNI; `codes` holds `scores.len()` rows of `stride` bytes,
/// `stride` is a multiple of 64, and the query's halves are `stride` long.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code, reason = "see `score_rows`")]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn vnni(codes: &[u8], stride: usize, query: &Query, scores: &mut [i32]) {
    use std::arch::x86_64::{
        _mm512_and_si512, _mm512_dpbusd_epi32, _mm512_loadu_si512, _mm512_reduce_add_epi32,
        _mm512_set1_epi8, _mm512_setzero_si512, _mm512_srli_epi16,
    };
    let nibble = _mm512_set1_epi8(0x0f);
    let (low, high) = (query.low.as_ptr(), query.high.as_ptr());
    for (r, score) in scores.iter_mut().enumerate() {
        let row = codes[r * stride..].as_ptr();
        let mut sum = _mm512_setzero_si512();
        for b in (0..stride).step_by(BLOCK) {
            // SAFETY: b + 64 ≤ stride, so the three reads are inside the row and both halves
            // of the query.
            let (bytes, l, h) = unsafe {
                (
                    _mm512_loadu_si512(row.add(b).cast()),
                    _mm512_loadu_si512(low.add(b).cast()),
                    _mm512_loadu_si512(high.add(b).cast()),
                )
            };
            let lo = _mm512_and_si512(bytes, nibble);
            let hi = _mm512_and_si512(_mm512_srli_epi16::<4>(bytes), nibble);
            sum = _mm512_dpbusd_epi32(sum, lo, l);
            sum = _mm512_dpbusd_epi32(sum, hi, h);
        }
        *score = _mm512_reduce_add_epi32(sum) - query.offset;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_score_what_their_levels_give_on_every_kernel() {
        let mut seed = 5u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % 2001) as f32 / 1000.0 - 1.0
        };
        for dims in [3usize, 16, 130, 384] {
            let stride = stride(dims);
            let rows: Vec<Vec<f32>> = (0..37)
                .map(|_| (0..dims).map(|_| next()).collect())
                .collect();
            let mut codes = Vec::new();
            let steps: Vec<f32> = rows.iter().map(|r| encode(r, stride, &mut codes)).collect();
            assert_eq!(codes.len(), rows.len() * stride);
            let q: Vec<f32> = (0..dims).map(|_| next()).collect();
            let query = Query::new(&q, stride);
            let mut fast = vec![0; rows.len()];
            score_rows(&codes, stride, &query, &mut fast);
            let mut slow = vec![0; rows.len()];
            portable(&codes, stride, &query, &mut slow);
            assert_eq!(fast, slow, "{dims} dimensions");
            // Scaled back, a score is close to the true dot product.
            let q_step = q.iter().fold(0f32, |m, x| m.max(x.abs())) / 127.0;
            for ((row, step), score) in rows.iter().zip(&steps).zip(&fast) {
                let exact: f32 = row.iter().zip(&q).map(|(a, b)| a * b).sum();
                let rough = *score as f32 * step * q_step;
                // Each coordinate is off by at most half a step: about 0.17 · √dims · step in all.
                let bound = (dims as f32).sqrt() * step;
                assert!(
                    (rough - exact).abs() < bound,
                    "{dims}: {rough} against {exact}"
                );
            }
        }
    }
}
