//! int8 linear layers for the fused encoder. Weights are quantised once, per output, to i8;
//! each activation row is quantised as it arrives to u8 with its own scale and zero point; the
//! products are summed exactly in i32 and scaled back to f32 with the bias added. The sums come
//! from AVX-512 VNNI (`vpdpbusd`: 64 multiply-adds an instruction, four times the f32 rate)
//! where the CPU has it, or from a portable kernel that computes the same integers.

use crate::kernels::{Threads, range_with_zero};
use rayon::prelude::*;

/// Outputs in a panel: one 512-bit register of i32 sums.
const LANES: usize = 16;
/// Panels a block computes at once.
const PANELS: usize = 2;
/// Outputs a block computes at once.
const BLOCK_OUTPUTS: usize = LANES * PANELS;
/// Rows a block computes at once: 12 rows × 2 panels keep 24 of the 32 vector registers as
/// sums, the rest for the weights and the broadcast input.
const BLOCK_ROWS: usize = 12;
/// Rows quantised and multiplied together in the many-rows path: their u8 inputs (at most
/// 96 × 1536 bytes) stay in L2 while every panel of weights passes over them.
const CHUNK_ROWS: usize = 8 * BLOCK_ROWS;
/// Bytes of a packed panel per group of four inputs: four weights for each of its outputs.
const GROUP_BYTES: usize = 4 * LANES;
/// How many groups ahead the kernel asks for its weights (3 KiB of each panel). A query's few
/// rows spend a few instructions on each line of weights, so its layers wait on memory
/// whenever the weights have left the cache; asking ahead measured its embedding 15–18%
/// faster from a cold cache, and the many-rows path the same.
const PREFETCH_GROUPS: usize = 48;

/// What sums the integer products.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kernel {
    /// AVX-512 VNNI, which this CPU was found to have.
    #[cfg(target_arch = "x86_64")]
    Vnni(Vnni),
    /// Plain integer loops: the same sums, several times slower than the f32 encoder; what
    /// the VNNI kernel is tested against, and how the int8 path is tested on other CPUs.
    #[cfg(test)]
    Portable,
}

/// Proof that the CPU has AVX-512 F, BW and VNNI: only [`Kernel::detect`] makes one.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Vnni(());

impl Kernel {
    /// VNNI when the CPU has it, `None` otherwise.
    pub(crate) fn detect() -> Option<Self> {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512vnni")
        {
            return Some(Self::Vnni(Vnni(())));
        }
        None
    }
}

/// A linear layer `x · Wᵀ + b` with `W` quantised per output.
pub(crate) struct QuantDense {
    /// Panels of [`LANES`] outputs, one after the other. In a panel, each group of four inputs
    /// takes [`GROUP_BYTES`]: the four weights of output 0, then of output 1, and so on.
    packed: Vec<i8>,
    /// Per output: the weight a quantised step stands for.
    scales: Vec<f32>,
    /// Per output: the sum of its quantised weights (to remove the inputs' zero points).
    sums: Vec<i32>,
    bias: Vec<f32>,
    inputs: usize,
    outputs: usize,
}

/// Rows of inputs quantised to u8: `x ≈ scale · (q − zero)`, row by row. Holds a whole number
/// of blocks; rows past the real ones are zeros.
struct Quantised {
    data: Vec<u8>,
    scales: Vec<f32>,
    zeros: Vec<i32>,
    rows: usize,
}

impl QuantDense {
    /// Quantises `weight` (`[outputs, inputs]`, as PyTorch stores it). `None` when the shape
    /// does not suit the kernels (inputs not a multiple of 4, outputs not of 32); the caller
    /// keeps the f32 layer.
    pub(crate) fn new(weight: &[f32], bias: &[f32], inputs: usize, outputs: usize) -> Option<Self> {
        if inputs == 0
            || !inputs.is_multiple_of(4)
            || !outputs.is_multiple_of(BLOCK_OUTPUTS)
            || weight.len() != inputs * outputs
            || bias.len() != outputs
        {
            return None;
        }
        let groups = inputs / 4;
        let mut packed = vec![0i8; outputs * inputs];
        let mut scales = Vec::with_capacity(outputs);
        let mut sums = Vec::with_capacity(outputs);
        for (o, row) in weight.chunks_exact(inputs).enumerate() {
            let largest = row.iter().fold(0.0f32, |m, w| m.max(w.abs()));
            let scale = if largest > 0.0 { largest / 127.0 } else { 1.0 };
            let inverse = 1.0 / scale;
            let (panel, lane) = (o / LANES, o % LANES);
            let mut sum = 0i32;
            for (i, w) in row.iter().enumerate() {
                // |w / scale| ≤ 127; `as` rounds toward zero, so add a half away from it.
                let q = (w * inverse + 0.5f32.copysign(*w)) as i8;
                sum += i32::from(q);
                let at = panel * groups * GROUP_BYTES + (i / 4) * GROUP_BYTES + lane * 4 + i % 4;
                packed[at] = q;
            }
            scales.push(scale);
            sums.push(sum);
        }
        Some(Self {
            packed,
            scales,
            sums,
            bias: bias.to_vec(),
            inputs,
            outputs,
        })
    }

    /// `out[rows, outputs] = x[rows, inputs] · Wᵀ + b`.
    pub(crate) fn forward(
        &self,
        x: &[f32],
        rows: usize,
        out: &mut Vec<f32>,
        kernel: Kernel,
        threads: Threads,
    ) {
        let (k, n) = (self.inputs, self.outputs);
        assert!(x.len() >= rows * k, "QuantDense::forward: input too short");
        out.clear();
        out.resize(rows * n, 0.0);
        // Each thread quantises and multiplies its own chunks of rows. A query's few rows are
        // one chunk on one thread: splitting its outputs across threads was measured no faster
        // (1.50 against 1.53 ms for a query, p50) and kept every core busy.
        let parts = match threads {
            Threads::One => 1,
            Threads::Many(parts) => parts,
        };
        let chunk = rows
            .div_ceil(parts)
            .next_multiple_of(BLOCK_ROWS)
            .clamp(BLOCK_ROWS, CHUNK_ROWS);
        let work = |(c, out): (usize, &mut [f32])| {
            let first = c * chunk;
            let count = out.len() / n;
            let input = quantise(&x[first * k..(first + count) * k], count, k);
            self.compute(&input, out, kernel);
        };
        if parts > 1 {
            out.par_chunks_mut(chunk * n).enumerate().for_each(work);
        } else {
            out.chunks_mut(chunk * n).enumerate().for_each(work);
        }
    }

    /// Writes every output of every row of `input` into `out` (rows of `outputs` floats).
    fn compute(&self, input: &Quantised, out: &mut [f32], kernel: Kernel) {
        let (k, n) = (self.inputs, self.outputs);
        let panel_bytes = k * LANES;
        let mut sums = [[0i32; BLOCK_OUTPUTS]; BLOCK_ROWS];
        for block in 0..n / BLOCK_OUTPUTS {
            let weights = &self.packed[block * PANELS * panel_bytes..][..PANELS * panel_bytes];
            let o0 = block * BLOCK_OUTPUTS;
            let (scales, totals, bias) = (
                &self.scales[o0..o0 + BLOCK_OUTPUTS],
                &self.sums[o0..o0 + BLOCK_OUTPUTS],
                &self.bias[o0..o0 + BLOCK_OUTPUTS],
            );
            for r0 in (0..input.rows).step_by(BLOCK_ROWS) {
                // The last block computes only the rows it has: a query of 13 tokens costs 13
                // rows of work, not 24.
                let count = (input.rows - r0).min(BLOCK_ROWS);
                let rows = &input.data[r0 * k..(r0 + count) * k];
                match kernel {
                    #[cfg(target_arch = "x86_64")]
                    Kernel::Vnni(proof) => vnni::block(proof, rows, count, k, weights, &mut sums),
                    #[cfg(test)]
                    Kernel::Portable => portable_block(rows, count, k, weights, &mut sums),
                }
                for (r, row_sums) in sums.iter().enumerate().take(count) {
                    let (scale, zero) = (input.scales[r0 + r], input.zeros[r0 + r]);
                    let dst = &mut out[(r0 + r) * n + o0..][..BLOCK_OUTPUTS];
                    for j in 0..BLOCK_OUTPUTS {
                        let exact = row_sums[j] - zero * totals[j];
                        dst[j] = (exact as f32).mul_add(scale * scales[j], bias[j]);
                    }
                }
            }
        }
    }
}

/// 2²³: the float whose unit in the last place is 1.
const ROUNDER: f32 = 8_388_608.0;

/// Quantises `rows` rows of `width` inputs, each to u8 over its own range (widened to hold 0,
/// so a zero input is exact), padded with zero rows to whole blocks.
fn quantise(x: &[f32], rows: usize, width: usize) -> Quantised {
    let padded = rows.next_multiple_of(BLOCK_ROWS).max(BLOCK_ROWS);
    let mut data = vec![0u8; padded * width];
    let mut scales = Vec::with_capacity(rows);
    let mut zeros = Vec::with_capacity(rows);
    for (row, q) in x[..rows * width]
        .chunks_exact(width)
        .zip(data.chunks_exact_mut(width))
    {
        let (lo, hi) = range_with_zero(row);
        let range = hi - lo;
        let (scale, zero) = if range > 0.0 {
            let scale = range / 255.0;
            // lo ≤ 0 ≤ hi, so −lo / scale is in [0, 255].
            (scale, (-lo / scale + 0.5) as i32)
        } else {
            (1.0, 0)
        };
        let inverse = 1.0 / scale;
        let shift = zero as f32;
        for (q, &v) in q.iter_mut().zip(row) {
            // In [0, 255] up to rounding, which the bounds absorb.
            let y = v.mul_add(inverse, shift);
            let y = if y < 0.0 { 0.0 } else { y };
            let y = if y > 255.0 { 255.0 } else { y };
            // Adding 2²³ rounds to the nearest integer and leaves it in the low mantissa bits:
            // a conversion with no branch, which vectorises (a cast does not).
            *q = (y + ROUNDER).to_bits() as u8;
        }
        scales.push(scale);
        zeros.push(zero);
    }
    Quantised {
        data,
        scales,
        zeros,
        rows,
    }
}

/// The block's sums with plain integer arithmetic: what [`vnni::block`] computes.
#[cfg(test)]
fn portable_block(
    rows: &[u8],
    count: usize,
    k: usize,
    weights: &[i8],
    sums: &mut [[i32; BLOCK_OUTPUTS]; BLOCK_ROWS],
) {
    let panel_bytes = k * LANES;
    for (r, row_sums) in sums.iter_mut().enumerate().take(count) {
        let x = &rows[r * k..][..k];
        for (j, sum) in row_sums.iter_mut().enumerate() {
            let panel = &weights[(j / LANES) * panel_bytes..][..panel_bytes];
            let lane = j % LANES;
            *sum = x
                .iter()
                .enumerate()
                .map(|(i, &v)| {
                    i32::from(v) * i32::from(panel[(i / 4) * GROUP_BYTES + lane * 4 + i % 4])
                })
                .sum();
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod vnni {
    use super::{BLOCK_OUTPUTS, BLOCK_ROWS, GROUP_BYTES, LANES, PANELS, PREFETCH_GROUPS, Vnni};
    use std::arch::x86_64::{
        __m512i, _MM_HINT_T0, _mm_prefetch, _mm512_dpbusd_epi32, _mm512_loadu_si512,
        _mm512_set1_epi32, _mm512_setzero_si512, _mm512_storeu_si512,
    };

    /// The sums of the first `count` rows of a block: `count` rows of `k` u8 inputs
    /// (row-major in `rows`) against the `PANELS` packed panels in `weights`.
    ///
    /// # Panics
    /// When `count` is not in 1..=`BLOCK_ROWS` or the slices are shorter than the block (a bug
    /// in the caller).
    pub(super) fn block(
        _proof: Vnni,
        rows: &[u8],
        count: usize,
        k: usize,
        weights: &[i8],
        sums: &mut [[i32; BLOCK_OUTPUTS]; BLOCK_ROWS],
    ) {
        assert!(
            k.is_multiple_of(4)
                && (1..=BLOCK_ROWS).contains(&count)
                && rows.len() >= count * k
                && weights.len() >= PANELS * LANES * k,
            "vnni::block: a block of {count} rows of {k} inputs does not fit its slices"
        );
        let (rows, weights) = (rows.as_ptr(), weights.as_ptr());
        // SAFETY: `Vnni` exists only when the CPU has the features `kernel` enables, and the
        // assertion above puts every read `kernel::<R>` makes (R = count) inside `rows` and
        // `weights`.
        #[allow(
            unsafe_code,
            reason = "VNNI intrinsics and their unaligned loads; bounds are checked above"
        )]
        unsafe {
            match count {
                12 => kernel::<12>(rows, k, weights, sums),
                11 => kernel::<11>(rows, k, weights, sums),
                10 => kernel::<10>(rows, k, weights, sums),
                9 => kernel::<9>(rows, k, weights, sums),
                8 => kernel::<8>(rows, k, weights, sums),
                7 => kernel::<7>(rows, k, weights, sums),
                6 => kernel::<6>(rows, k, weights, sums),
                5 => kernel::<5>(rows, k, weights, sums),
                4 => kernel::<4>(rows, k, weights, sums),
                3 => kernel::<3>(rows, k, weights, sums),
                2 => kernel::<2>(rows, k, weights, sums),
                _ => kernel::<1>(rows, k, weights, sums),
            }
        }
    }

    /// The sums of `R` rows (`R` ≤ `BLOCK_ROWS`), into the first `R` rows of `sums`.
    ///
    /// # Safety
    /// The CPU has AVX-512 F, BW and VNNI; `rows` points at `R · k` bytes and `weights` at
    /// `PANELS · LANES · k`; `k` is a multiple of 4.
    #[allow(unsafe_code, reason = "see `block`")]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn kernel<const R: usize>(
        rows: *const u8,
        k: usize,
        weights: *const i8,
        sums: &mut [[i32; BLOCK_OUTPUTS]; BLOCK_ROWS],
    ) {
        let panel_bytes = k * LANES;
        let mut acc: [[__m512i; PANELS]; R] = [[_mm512_setzero_si512(); PANELS]; R];
        for g in 0..k / 4 {
            for p in 0..PANELS {
                // A prefetch never faults, so the address may run past the panel (it is
                // computed with wrapping arithmetic, never dereferenced).
                let ahead =
                    weights.wrapping_add(p * panel_bytes + (g + PREFETCH_GROUPS) * GROUP_BYTES);
                _mm_prefetch::<_MM_HINT_T0>(ahead.cast());
            }
            // SAFETY (all reads): g < k / 4, so every offset is inside the caller's slices.
            let w: [__m512i; PANELS] = std::array::from_fn(|p| unsafe {
                _mm512_loadu_si512(weights.add(p * panel_bytes + g * GROUP_BYTES).cast())
            });
            for (r, acc) in acc.iter_mut().enumerate() {
                let x = unsafe { rows.add(r * k + 4 * g).cast::<i32>().read_unaligned() };
                let x = _mm512_set1_epi32(x);
                for (a, w) in acc.iter_mut().zip(&w) {
                    *a = _mm512_dpbusd_epi32(*a, x, *w);
                }
            }
        }
        for (row, acc) in sums.iter_mut().zip(&acc) {
            for (p, a) in acc.iter().enumerate() {
                // SAFETY: each panel's 16 sums fill `row[p·16 .. p·16 + 16]`.
                unsafe { _mm512_storeu_si512(row[p * LANES..].as_mut_ptr().cast(), *a) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn random(n: usize, seed: u64) -> Vec<f32> {
        let mut state = seed | 1;
        (0..n)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
            })
            .collect()
    }

    fn f32_product(x: &[f32], rows: usize, w: &[f32], b: &[f32], k: usize, n: usize) -> Vec<f32> {
        let mut out = Vec::with_capacity(rows * n);
        for r in 0..rows {
            for o in 0..n {
                let dot: f32 = (0..k).map(|i| x[r * k + i] * w[o * k + i]).sum();
                out.push(dot + b[o]);
            }
        }
        out
    }

    #[test]
    fn the_int8_product_is_close_to_the_f32_one_on_every_path() {
        let (k, n) = (64, 96);
        let w = random(k * n, 7);
        let b = random(n, 11);
        let layer = QuantDense::new(&w, &b, k, n).unwrap_or_else(|| panic!("shape suits"));
        // 1 to 13 rows: a partial block of every size the kernel computes; 40 rows: several
        // chunks, on 2 threads split by rows.
        for rows in (1usize..=13).chain([40]) {
            let mut x = random(rows * k, rows as u64);
            // A row of zeros and a row with one large value: the edges of a row's range.
            x[..k].iter_mut().for_each(|v| *v = 0.0);
            if rows > 1 {
                x[k] = 40.0;
            }
            let want = f32_product(&x, rows, &w, &b, k, n);
            let mut kernels = vec![Kernel::Portable];
            kernels.extend(Kernel::detect());
            let mut outputs = Vec::new();
            for kernel in kernels {
                for threads in [Threads::One, Threads::Many(2)] {
                    let mut got = Vec::new();
                    layer.forward(&x, rows, &mut got, kernel, threads);
                    assert_eq!(got.len(), rows * n);
                    for (r, (g, e)) in got.chunks(n).zip(want.chunks(n)).enumerate() {
                        let (mut dot, mut gg, mut ee) = (0.0f64, 0.0f64, 0.0f64);
                        for (a, c) in g.iter().zip(e) {
                            let (a, c) = (f64::from(*a), f64::from(*c));
                            dot += a * c;
                            gg += a * a;
                            ee += c * c;
                        }
                        let cosine = dot / (gg.sqrt() * ee.sqrt());
                        assert!(
                            cosine > 0.999,
                            "{kernel:?} {threads:?}, {rows} rows, row {r}: cosine {cosine}"
                        );
                    }
                    outputs.push(got);
                }
            }
            // Integer sums are exact: every kernel and split gives the same floats.
            assert!(outputs.windows(2).all(|p| p[0] == p[1]), "{rows} rows");
        }
    }

    #[test]
    fn shapes_the_kernels_cannot_take_are_refused() {
        assert!(QuantDense::new(&[0.0; 6 * 32], &[0.0; 32], 6, 32).is_none());
        assert!(QuantDense::new(&[0.0; 8 * 16], &[0.0; 16], 8, 16).is_none());
        assert!(QuantDense::new(&[0.0; 8 * 32], &[0.0; 32], 8, 32).is_some());
    }
}
