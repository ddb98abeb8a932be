//! The numeric kernels of the fused encoder: a bounds-checked matrix product over strided
//! views (the one call into `gemm`), and the element-wise GELU, softmax and layer norm,
//! written so the compiler vectorises them (an exponential without library calls, sums in
//! independent lanes).

use rayon::prelude::*;

/// How many threads of the caller's rayon pool a computation may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Threads {
    One,
    Many(usize),
}

impl Threads {
    pub(crate) fn new(threads: usize) -> Self {
        if threads > 1 {
            Self::Many(threads)
        } else {
            Self::One
        }
    }

    fn parallelism(self) -> gemm::Parallelism {
        match self {
            Self::One => gemm::Parallelism::None,
            Self::Many(n) => gemm::Parallelism::Rayon(n),
        }
    }

    /// Runs `work` on every item, spread over the threads.
    pub(crate) fn for_each<T: Send>(self, items: Vec<T>, work: impl Fn(T) + Send + Sync) {
        match self {
            Self::One => items.into_iter().for_each(work),
            Self::Many(_) => items.into_par_iter().for_each(work),
        }
    }
}

/// Where a matrix's elements are in its slice: element `(i, j)` at
/// `i · row_stride + j · col_stride`.
#[derive(Clone, Copy)]
struct Layout {
    rows: usize,
    cols: usize,
    row_stride: usize,
    col_stride: usize,
}

impl Layout {
    /// # Panics
    /// When the matrix does not fit in `len` elements (a bug in the caller, never
    /// input-dependent: shapes come from a checked model config).
    fn fitting(len: usize, rows: usize, cols: usize, row_stride: usize, col_stride: usize) -> Self {
        let extent = if rows == 0 || cols == 0 {
            0
        } else {
            (rows - 1) * row_stride + (cols - 1) * col_stride + 1
        };
        assert!(
            extent <= len,
            "a {rows}×{cols} matrix does not fit in {len} floats"
        );
        Self {
            rows,
            cols,
            row_stride,
            col_stride,
        }
    }
}

/// A read-only matrix in a slice.
#[derive(Clone, Copy)]
pub(crate) struct Matrix<'a> {
    data: &'a [f32],
    at: Layout,
}

impl<'a> Matrix<'a> {
    /// A `rows × cols` row-major matrix at the start of `data`.
    pub(crate) fn rows(data: &'a [f32], rows: usize, cols: usize) -> Self {
        Self::strided(data, rows, cols, cols, 1)
    }

    /// Element `(i, j)` is `data[i · row_stride + j · col_stride]`.
    ///
    /// # Panics
    /// When the matrix does not fit in `data` (see [`Layout::fitting`]).
    pub(crate) fn strided(
        data: &'a [f32],
        rows: usize,
        cols: usize,
        row_stride: usize,
        col_stride: usize,
    ) -> Self {
        let at = Layout::fitting(data.len(), rows, cols, row_stride, col_stride);
        Self { data, at }
    }
}

/// A writable matrix in a slice.
pub(crate) struct MatrixMut<'a> {
    data: &'a mut [f32],
    at: Layout,
}

impl<'a> MatrixMut<'a> {
    pub(crate) fn rows(data: &'a mut [f32], rows: usize, cols: usize) -> Self {
        Self::strided(data, rows, cols, cols, 1)
    }

    /// # Panics
    /// As [`Matrix::strided`].
    pub(crate) fn strided(
        data: &'a mut [f32],
        rows: usize,
        cols: usize,
        row_stride: usize,
        col_stride: usize,
    ) -> Self {
        let at = Layout::fitting(data.len(), rows, cols, row_stride, col_stride);
        Self { data, at }
    }
}

/// `dst = scale · lhs · rhs`, or `dst += scale · lhs · rhs` when `accumulate`.
///
/// # Panics
/// When the shapes do not agree (a bug in the caller).
pub(crate) fn product(
    dst: MatrixMut<'_>,
    lhs: Matrix<'_>,
    rhs: Matrix<'_>,
    scale: f32,
    accumulate: bool,
    threads: Threads,
) {
    assert!(
        lhs.at.rows == dst.at.rows && rhs.at.cols == dst.at.cols && lhs.at.cols == rhs.at.rows,
        "product of {}×{} and {}×{} into {}×{}",
        lhs.at.rows,
        lhs.at.cols,
        rhs.at.rows,
        rhs.at.cols,
        dst.at.rows,
        dst.at.cols
    );
    if dst.at.rows == 0 || dst.at.cols == 0 {
        return;
    }
    if lhs.at.cols == 0 {
        if !accumulate {
            for i in 0..dst.at.rows {
                for j in 0..dst.at.cols {
                    dst.data[i * dst.at.row_stride + j * dst.at.col_stride] = 0.0;
                }
            }
        }
        return;
    }
    let stride = |s: usize| isize::try_from(s).unwrap_or(isize::MAX);
    // SAFETY: the three views were checked to lie inside their slices (`strided`), the shapes
    // agree (above), `dst` is borrowed mutably so it overlaps neither input, and gemm reads
    // and writes only elements inside those views.
    #[allow(
        unsafe_code,
        reason = "gemm takes raw pointers and strides; the views are bounds-checked above"
    )]
    unsafe {
        gemm::gemm(
            dst.at.rows,
            dst.at.cols,
            lhs.at.cols,
            dst.data.as_mut_ptr(),
            stride(dst.at.col_stride),
            stride(dst.at.row_stride),
            accumulate,
            lhs.data.as_ptr(),
            stride(lhs.at.col_stride),
            stride(lhs.at.row_stride),
            rhs.data.as_ptr(),
            stride(rhs.at.col_stride),
            stride(rhs.at.row_stride),
            1.0,
            scale,
            false,
            false,
            false,
            threads.parallelism(),
        );
    }
}

/// Up to this many rows (a query's tokens), a linear layer streams its weights once through
/// [`few_rows_product`] instead of calling `gemm`, whose tiles suit many rows.
pub(crate) const FEW_ROWS: usize = 32;

/// `out[r] += x[r] · Wᵀ` for each of `rows` rows, with `weight` as `[outputs, inputs]`: each
/// output's weights are read once, contiguously, and dotted with four rows at a time. With
/// several threads, each takes a contiguous share of the outputs.
pub(crate) fn few_rows_product(
    out: &mut [f32],
    x: &[f32],
    rows: usize,
    weight: &[f32],
    inputs: usize,
    outputs: usize,
    threads: Threads,
) {
    assert!(
        out.len() >= rows * outputs && x.len() >= rows * inputs && weight.len() >= outputs * inputs,
        "few_rows_product: buffers too small"
    );
    let Threads::Many(parts) = threads else {
        add_outputs(out, outputs, x, rows, weight, inputs, 0..outputs);
        return;
    };
    let share = outputs.div_ceil(parts);
    let shares: Vec<(usize, Vec<f32>)> = (0..parts)
        .into_par_iter()
        .map(|p| {
            let range = p * share..((p + 1) * share).min(outputs);
            let mut part = vec![0.0; rows * range.len()];
            let width = range.len();
            let start = range.start;
            add_outputs(&mut part, width, x, rows, weight, inputs, range);
            (start, part)
        })
        .collect();
    for (start, part) in shares {
        let width = part.len() / rows.max(1);
        for (r, values) in part.chunks_exact(width.max(1)).enumerate().take(rows) {
            for (o, v) in out[r * outputs + start..][..width].iter_mut().zip(values) {
                *o += v;
            }
        }
    }
}

/// Adds `x[r] · weight[o]` to `out[r · stride + (o − outputs.start)]` for the `outputs` given.
fn add_outputs(
    out: &mut [f32],
    stride: usize,
    x: &[f32],
    rows: usize,
    weight: &[f32],
    inputs: usize,
    outputs: std::ops::Range<usize>,
) {
    let first = outputs.start;
    // Outputs outermost: each output's weights come from memory once and stay in L1 while
    // every block of four rows is dotted with them (the rows themselves stay in cache).
    for o in outputs {
        let w = &weight[o * inputs..][..inputs];
        let mut r = 0;
        while r < rows {
            let block = (rows - r).min(4);
            let xs: [&[f32]; 4] =
                std::array::from_fn(|b| &x[(r + b.min(block - 1)) * inputs..][..inputs]);
            let dots = dot4(xs, w);
            for (b, dot) in dots.iter().enumerate().take(block) {
                out[(r + b) * stride + o - first] += dot;
            }
            r += block;
        }
    }
}

/// The dot products of four vectors with `w`, in 16 lanes each (vectorised; `w` is loaded once
/// for all four).
#[inline(always)]
fn dot4(xs: [&[f32]; 4], w: &[f32]) -> [f32; 4] {
    let (w_blocks, w_tail) = w.as_chunks::<16>();
    let n = w_blocks.len();
    let [x0, x1, x2, x3] = xs.map(|x| &x.as_chunks::<16>().0[..n]);
    let (mut a0, mut a1, mut a2, mut a3) = ([0.0f32; 16], [0.0f32; 16], [0.0f32; 16], [0.0f32; 16]);
    for k in 0..n {
        let (wk, p0, p1, p2, p3) = (&w_blocks[k], &x0[k], &x1[k], &x2[k], &x3[k]);
        for l in 0..16 {
            a0[l] = p0[l].mul_add(wk[l], a0[l]);
            a1[l] = p1[l].mul_add(wk[l], a1[l]);
            a2[l] = p2[l].mul_add(wk[l], a2[l]);
            a3[l] = p3[l].mul_add(wk[l], a3[l]);
        }
    }
    let whole = w.len() - w_tail.len();
    let tail = |x: &[f32]| -> f32 { x[whole..].iter().zip(w_tail).map(|(p, q)| p * q).sum() };
    [
        sum(&a0) + tail(xs[0]),
        sum(&a1) + tail(xs[1]),
        sum(&a2) + tail(xs[2]),
        sum(&a3) + tail(xs[3]),
    ]
}

/// The sum of `xs`, accumulated in 16 independent lanes (which the compiler vectorises; a
/// single running sum it may not reorder).
fn sum(xs: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 16];
    let chunks = xs.chunks_exact(16);
    let tail: f32 = chunks.remainder().iter().sum();
    for chunk in chunks {
        for (lane, x) in lanes.iter_mut().zip(chunk) {
            *lane += x;
        }
    }
    lanes.iter().sum::<f32>() + tail
}

/// The largest of `xs` (−∞ for none), in 16 independent lanes: `f32::max` in a single fold
/// is a chain the compiler may not vectorise.
fn max(xs: &[f32]) -> f32 {
    let mut lanes = [f32::NEG_INFINITY; 16];
    let chunks = xs.chunks_exact(16);
    let tail = chunks.remainder();
    for chunk in chunks {
        for (lane, &x) in lanes.iter_mut().zip(chunk) {
            *lane = if x > *lane { x } else { *lane };
        }
    }
    lanes
        .iter()
        .chain(tail)
        .fold(f32::NEG_INFINITY, |m, &x| if x > m { x } else { m })
}

/// The smallest and largest of `xs` and 0, in 16 independent lanes.
pub(crate) fn range_with_zero(xs: &[f32]) -> (f32, f32) {
    let (mut lo, mut hi) = ([0.0f32; 16], [0.0f32; 16]);
    let chunks = xs.chunks_exact(16);
    let tail = chunks.remainder();
    for chunk in chunks {
        for ((l, h), &x) in lo.iter_mut().zip(hi.iter_mut()).zip(chunk) {
            *l = if x < *l { x } else { *l };
            *h = if x > *h { x } else { *h };
        }
    }
    lo.iter()
        .zip(&hi)
        .map(|(&l, &h)| (l, h))
        .chain(tail.iter().map(|&x| (x, x)))
        .fold((0.0, 0.0), |(lo, hi), (l, h)| {
            (if l < lo { l } else { lo }, if h > hi { h } else { hi })
        })
}

/// `e^x` for `x ≤ 0` (larger `x` is not needed here), relative error below 2e-7; no branch
/// and no library call, so loops over it vectorise. Below −87 the result is e^−87.
#[inline(always)]
fn exp_nonpositive(x: f32) -> f32 {
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    let x = x.clamp(-87.0, 0.0);
    // x = n·ln2 + r with |r| ≤ ln2/2, e^x = 2^n · e^r.
    let n = (x * std::f32::consts::LOG2_E + 0.5).floor();
    let r = x - n * LN2_HI - n * LN2_LO;
    let poly = 1.0
        + r * (1.0
            + r * (1.0 / 2.0
                + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0))))));
    // n is in [-126, 0]: 2^n is the float with biased exponent n + 127. Adding 2²³ puts that
    // integer in the low mantissa bits, a conversion that vectorises (a cast does not).
    let biased = (n + 127.0 + 8_388_608.0).to_bits() & 0xff;
    let scale = f32::from_bits(biased << 23);
    poly * scale
}

/// The error function, absolute error below 5e-7 (Abramowitz and Stegun 7.1.26, 1.5e-7,
/// evaluated in f32).
#[inline(always)]
fn erf(x: f32) -> f32 {
    let a = x.abs();
    let t = 1.0 / (1.0 + 0.327_591_1 * a);
    let poly = t
        * (0.254_829_6
            + t * (-0.284_496_74 + t * (1.421_413_8 + t * (-1.453_152_1 + t * 1.061_405_4))));
    (1.0 - poly * exp_nonpositive(-a * a)).copysign(x)
}

/// GELU as BERT defines it, `x · Φ(x)` with the exact normal CDF, in place.
pub(crate) fn gelu(xs: &mut [f32]) {
    for x in xs {
        let v = *x;
        *x = 0.5 * v * (1.0 + erf(v * std::f32::consts::FRAC_1_SQRT_2));
    }
}

/// Softmax of one row, in place.
pub(crate) fn softmax(row: &mut [f32]) {
    let max = max(row);
    for x in row.iter_mut() {
        *x = exp_nonpositive(*x - max);
    }
    let inverse = 1.0 / sum(row);
    for x in row.iter_mut() {
        *x *= inverse;
    }
}

/// `row ← (row + residual − mean) / √(variance + eps) · gamma + beta`.
pub(crate) fn add_and_normalise(
    row: &mut [f32],
    residual: Option<&[f32]>,
    gamma: &[f32],
    beta: &[f32],
    eps: f32,
) {
    if let Some(residual) = residual {
        for (x, r) in row.iter_mut().zip(residual) {
            *x += r;
        }
    }
    let n = row.len().max(1) as f32;
    let mean = sum(row) / n;
    for x in row.iter_mut() {
        *x -= mean;
    }
    let mut squares = [0.0f32; 16];
    let chunks = row.chunks_exact(16);
    let tail: f32 = chunks.remainder().iter().map(|x| x * x).sum();
    for chunk in chunks {
        for (lane, x) in squares.iter_mut().zip(chunk) {
            *lane += x * x;
        }
    }
    let variance = (squares.iter().sum::<f32>() + tail) / n;
    let inverse = 1.0 / (variance + eps).sqrt();
    for ((x, g), b) in row.iter_mut().zip(gamma).zip(beta) {
        *x = *x * inverse * g + b;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exponential_and_erf_are_accurate() {
        let mut x = -87.0f32;
        while x <= 0.0 {
            let (got, want) = (exp_nonpositive(x), x.exp());
            assert!(
                ((got - want) / want).abs() < 3e-7,
                "e^{x}: {got} against {want}"
            );
            x += 0.013;
        }
        let mut x = -6.0f64;
        while x <= 6.0 {
            let want = libm_erf(x);
            let got = f64::from(erf(x as f32));
            assert!((got - want).abs() < 5e-7, "erf({x}): {got} against {want}");
            x += 0.001;
        }
    }

    /// erf by its Taylor series (|x| < 3) or its complement's continued fraction, in f64.
    fn libm_erf(x: f64) -> f64 {
        let a = x.abs();
        let value = if a < 3.0 {
            let (mut term, mut total, mut k) = (a, a, 0.0f64);
            while term.abs() > 1e-17 {
                k += 1.0;
                term *= -a * a / k;
                total += term / (2.0 * k + 1.0);
            }
            total * 2.0 / std::f64::consts::PI.sqrt()
        } else {
            let mut fraction = 0.0f64;
            for k in (1..60).rev() {
                fraction = f64::from(k) / 2.0 / (a + fraction);
            }
            1.0 - (-a * a).exp() / std::f64::consts::PI.sqrt() / (a + fraction)
        };
        value.copysign(x)
    }

    #[test]
    fn a_strided_product_matches_the_definition() {
        // lhs 2×3 read transposed out of a 3×2 buffer; rhs 3×2 row-major.
        let lhs_t = [1.0, 4.0, 2.0, 5.0, 3.0, 6.0];
        let rhs = [7.0, 8.0, 9.0, 10.0, 11.0, 12.0];
        let mut dst = [1.0f32; 4];
        product(
            MatrixMut::rows(&mut dst, 2, 2),
            Matrix::strided(&lhs_t, 2, 3, 1, 2),
            Matrix::rows(&rhs, 3, 2),
            2.0,
            true,
            Threads::One,
        );
        assert_eq!(
            dst,
            [
                1.0 + 2.0 * 58.0,
                1.0 + 2.0 * 64.0,
                1.0 + 2.0 * 139.0,
                1.0 + 2.0 * 154.0
            ]
        );
    }

    #[test]
    fn softmax_and_layer_norm_match_their_definitions() {
        let mut row = [1.0f32, 2.0, 3.0, -50.0];
        softmax(&mut row);
        let total: f32 = [1.0f32, 2.0, 3.0, -50.0].iter().map(|x| x.exp()).sum();
        for (got, x) in row.iter().zip([1.0f32, 2.0, 3.0, -50.0]) {
            assert!((got - x.exp() / total).abs() < 1e-7);
        }
        let mut row: Vec<f32> = (0..40).map(|i| i as f32 * 0.5).collect();
        let residual = vec![1.0f32; 40];
        add_and_normalise(&mut row, Some(&residual), &[2.0; 40], &[0.5; 40], 1e-12);
        let mean: f32 = row.iter().sum::<f32>() / 40.0;
        let var: f32 = row.iter().map(|x| (x - mean).powi(2)).sum::<f32>() / 40.0;
        assert!((mean - 0.5).abs() < 1e-5, "{mean}");
        assert!((var - 4.0).abs() < 1e-4, "{var}");
    }
}
