//! `Int8Matrix`: an f32 weight matrix quantized to int8 for the CPU, and its product with f32
//! activations, computed in 8-bit integers with AVX-512 VNNI (`vpdpbusd`), or with AVX-VNNI's
//! 256-bit `vpdpbusd` on CPUs without AVX-512 ([`avx_vnni`]), to the same outputs.
//!
//! This is the embedder's int8 path: BERT's four projections of every layer are matrices this
//! large, and multiplying them is most of an embedding. In f32 a core does 32 multiply-adds a
//! cycle (two FMA units of 16 lanes); `vpdpbusd` does 64 per instruction, four byte products
//! summed into each 32-bit lane.
//!
//! Quantization, as dynamic int8 linear layers do it:
//! - weights: symmetric, one scale per output row, `w ≈ s_w · q` with `q` in −127..=127;
//! - activations: asymmetric, one scale and zero point per row of the input, computed for each
//!   product, `a ≈ s_a · (u − z)` with `u` in 0..=255 (`vpdpbusd` multiplies unsigned bytes by
//!   signed ones) and `z` where 0 lands, so that the row's range is used in full (a GELU output
//!   is mostly positive and a symmetric scale would waste half its codes);
//! - `Σ a·w ≈ s_a · s_w · (Σ u·q − z · Σ q)`, with `Σ q` of every weight row computed once.
//!
//! Layout: the `n × k` matrix (row-major, as a linear layer stores it) is cut into panels of 64
//! output rows; a panel is `k / 4` groups, and a group holds, for each of the 64 rows, the 4
//! consecutive inputs one `vpdpbusd` lane sums: 256 bytes, four vectors. A product runs over
//! blocks of activation rows in parallel (rayon's pool, as the rest of the encoder), each block
//! quantized by the thread that multiplies it, and up to 6 rows against one panel at a time:
//! 24 accumulators in registers.
//!
//! This is one of the workspace's five `unsafe` modules (`mapped`, `packed`, `int8` with its
//! `avx_vnni`, `strided`, `cache_lines`); here the SIMD loads and the calls into functions
//! compiled for AVX-512 or AVX-VNNI, made only after the CPU was checked for them, and the rounding's float-to-integer conversion without a
//! saturating check, of a value already clamped (`round_clamped`). Each block says why it is
//! sound.
#![allow(unsafe_code)]
// Off x86-64 no matrix is ever quantized (`cpu_supported` is false), so the panels go unread.
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]

use candle_core::{CpuStorage, DType, Result, Storage, Tensor};
use rayon::prelude::*;

use crate::packed::PackedSimd;

#[cfg(target_arch = "x86_64")]
mod avx_vnni;

/// Output rows per panel: four vectors of 16 lanes.
const PANEL_ROWS: usize = 64;
/// Inputs one `vpdpbusd` lane sums.
const GROUP_INPUTS: usize = 4;
/// Activation rows multiplied against one panel at a time (4 · 6 = 24 accumulators).
const MAX_ACTIVATION_ROWS: usize = 6;
/// Activation rows per parallel task: 96 rows of 3072 bytes stay in a core's L2 while every
/// panel passes over them.
const BLOCK_ROWS: usize = 96;
/// Inputs per slice of a panel: 64 rows of 512 bytes, 32 KiB, stay in a core's L1 while
/// every row of the block passes over them. A multiple of 4.
const K_SLICE: usize = 512;

/// One group of a panel: 4 inputs of each of its 64 output rows, `[row][input]`.
#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Group([u8; PANEL_ROWS * GROUP_INPUTS]);

/// Whether the int8 products run in this process: on AVX-512 VNNI, or AVX-VNNI (as the packed
/// tiles' instruction set, [`crate::packed::packed_simd`], says); without them the embedder
/// keeps its f32 matmuls. AVX2's `vpmaddubsw` would saturate the sums of an activation byte
/// of up to 255 times a weight of up to 127, so AVX2 alone has no int8 path.
pub fn cpu_supported() -> bool {
    int8_simd().is_some()
}

/// The instruction set the int8 products run with here, if any.
fn int8_simd() -> Option<PackedSimd> {
    match crate::packed::packed_simd() {
        Ok(Some(simd @ (PackedSimd::Avx512Vnni | PackedSimd::AvxVnni))) => Some(simd),
        _ => None,
    }
}

/// An `n × k` weight matrix in int8 panels (see the module documentation).
pub(crate) struct Int8Matrix {
    /// `ceil(n / 64)` panels of `k / 4` groups, panel after panel; rows past `n` are zero.
    groups: Vec<Group>,
    /// Each output row's scale, `ceil(n / 64) · 64` of them (0 past `n`).
    scales: Vec<f32>,
    /// Each output row's sum of quantized weights, for the activations' zero points.
    sums: Vec<i32>,
    n: usize,
    k: usize,
    /// The kernels that multiply it: AVX-512 VNNI or AVX-VNNI.
    simd: PackedSimd,
}

impl std::fmt::Debug for Int8Matrix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Int8Matrix")
            .field("n", &self.n)
            .field("k", &self.k)
            .finish_non_exhaustive()
    }
}

/// An activation row quantized to bytes: `a ≈ scale · (byte − zero)`.
#[derive(Clone, Copy, Debug, PartialEq)]
struct RowQuantization {
    scale: f32,
    zero: i32,
}

impl RowQuantization {
    /// The scale and zero point of a row whose values span `min..=max` (`min ≤ 0 ≤ max`), and
    /// the reciprocal of the scale; `None` for a row of zeros or one with a non-finite range.
    fn for_range(min: f32, max: f32) -> Option<(Self, f32)> {
        let scale = (max - min) / 255.0;
        let inverse = 1.0 / scale;
        if !(scale > 0.0 && scale.is_finite() && inverse.is_finite()) {
            return None;
        }
        // 0 ≤ −min/scale ≤ 255 since min ≤ 0 ≤ max; clamped against rounding, so the cast is
        // exact.
        #[allow(clippy::cast_possible_truncation)]
        let zero = (-min * inverse).round_ties_even().clamp(0.0, 255.0) as i32;
        Some((Self { scale, zero }, inverse))
    }

    /// Row quantization one value at a time, the specification the AVX-512 version is tested
    /// against: `out` (the same length as `row`) gets each value divided by the scale, plus
    /// the zero point, rounded to even and clamped to 0..=255.
    fn quantize(row: &[f32], out: &mut [u8]) -> Self {
        let (min, max) = row
            .iter()
            .fold((0f32, 0f32), |(lo, hi), &a| (lo.min(a), hi.max(a)));
        let Some((quantization, inverse)) = Self::for_range(min, max) else {
            out.fill(0);
            return Self::ZEROS;
        };
        #[allow(clippy::cast_precision_loss)]
        let zero = quantization.zero as f32;
        for (byte, &a) in out.iter_mut().zip(row) {
            *byte = Self::byte(a, inverse, zero);
        }
        quantization
    }

    /// One value's byte: `a / scale + zero`, clamped to 0..=255 and rounded to even; a NaN
    /// (which no layer should hold) is the zero point, i.e. 0, not the row's minimum.
    fn byte(a: f32, inverse: f32, zero: f32) -> u8 {
        let shifted = if a.is_nan() { zero } else { a * inverse + zero };
        // Within 0..=255, so the cast is exact.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        {
            shifted.clamp(0.0, 255.0).round_ties_even() as u8
        }
    }

    /// A row of zeros (or a non-finite one, which no code can hold): every byte is 0.
    const ZEROS: Self = Self {
        scale: 0.0,
        zero: 0,
    };
}

/// The largest and the smallest of `xs` and 0 (NaN skipped, as `f32::max` skips it), in 16
/// independent lanes that the compiler turns into vector instructions: a single running value
/// is a chain of compares one value at a time, which made quantizing a prompt's activations
/// five cycles a value.
#[inline(always)]
pub(crate) fn extremes(xs: &[f32]) -> (f32, f32) {
    let (mut highest, mut lowest) = ([0f32; 16], [0f32; 16]);
    let (chunks, rest) = xs.as_chunks::<16>();
    for chunk in chunks {
        for lane in 0..16 {
            // `vmaxps`/`vminps` exactly: a NaN `x` keeps the lane (the comparison is false).
            if chunk[lane] > highest[lane] {
                highest[lane] = chunk[lane];
            }
            if chunk[lane] < lowest[lane] {
                lowest[lane] = chunk[lane];
            }
        }
    }
    for &x in rest {
        highest[0] = highest[0].max(x);
        lowest[0] = lowest[0].min(x);
    }
    (
        highest.into_iter().fold(0f32, f32::max),
        lowest.into_iter().fold(0f32, f32::min),
    )
}

/// `v.clamp(LO, HI).round()` (half away from zero) as a byte, in a form the compiler
/// vectorizes (`f32::round` is a call into libm for each value, and a saturating cast a
/// scalar conversion per value): NaN to 0 (as `round` and a cast give), clamp (whole bounds,
/// so the order does not matter; an infinite value stays at the bound), truncate, then step
/// away from zero when the fraction left is at least a half.
#[inline]
pub(crate) fn round_clamped<const LO: i8, const HI: i8>(v: f32) -> i8 {
    let v = if v.is_nan() {
        0.0
    } else {
        v.clamp(f32::from(LO), f32::from(HI))
    };
    // SAFETY: `v` is a number within `LO..=HI`, so its truncation is too, and fits `i32`.
    let truncated: i32 = unsafe { v.to_int_unchecked() };
    #[allow(clippy::cast_precision_loss)]
    let fraction = v - truncated as f32;
    // Within `LO..=HI`: a step up needs `v ≥ truncated + 0.5`, so `truncated < HI`; down
    // alike. Wrapping arithmetic, which never wraps here: a checked sum would not vectorize.
    #[allow(clippy::cast_possible_truncation)]
    let rounded = truncated
        .wrapping_add(i32::from(fraction >= 0.5))
        .wrapping_sub(i32::from(fraction <= -0.5)) as i8;
    rounded
}

impl Int8Matrix {
    /// Quantizes the `n × k` f32 `weight` (a linear layer's, `out × in`), or `None` where the
    /// int8 products cannot run: a CPU without AVX-512 VNNI or AVX-VNNI, `k` not a multiple of 4, or `k`
    /// so large that a sum could overflow `i32`.
    /// A `SELFRAG_CPU_SIMD` it cannot take is an error naming it, not a silent f32.
    pub(crate) fn quantize(weight: &Tensor) -> Result<Option<Self>> {
        crate::packed::packed_simd().map_err(candle_core::Error::Msg)?;
        let (n, k) = weight.dims2()?;
        if !Self::runs(n, k) {
            return Ok(None);
        }
        let values = weight
            .to_dtype(candle_core::DType::F32)?
            .flatten_all()?
            .to_vec1::<f32>()?;
        Ok(Self::from_rows(&values, n, k))
    }

    /// Whether an `n × k` matrix can be multiplied here: see [`Int8Matrix::quantize`].
    fn runs(n: usize, k: usize) -> bool {
        cpu_supported() && Self::shape_fits(n, k)
    }

    /// Whether the kernels take an `n × k` matrix: whole groups of inputs, and a sum of `k`
    /// terms `(u − z)·q` of at most 255 · 127, exact in `i32` below 66,000 terms.
    fn shape_fits(n: usize, k: usize) -> bool {
        n > 0 && k > 0 && k.is_multiple_of(GROUP_INPUTS) && k < 66_000
    }

    /// Quantizes `n` rows of `k` values (row-major), or `None` where [`Int8Matrix::runs`] says
    /// no: an `Int8Matrix` exists only on a CPU that multiplies it.
    fn from_rows(values: &[f32], n: usize, k: usize) -> Option<Self> {
        Self::from_rows_for(values, n, k, int8_simd()?)
    }

    /// [`from_rows`](Self::from_rows) for the kernels of `simd` (AVX-512 VNNI or AVX-VNNI),
    /// `None` where this CPU lacks them.
    fn from_rows_for(values: &[f32], n: usize, k: usize, simd: PackedSimd) -> Option<Self> {
        let kernels = matches!(simd, PackedSimd::Avx512Vnni | PackedSimd::AvxVnni);
        if !kernels || !simd.runs_here() || !Self::shape_fits(n, k) || values.len() < n * k {
            return None;
        }
        let panels = n.div_ceil(PANEL_ROWS);
        let groups_per_panel = k / GROUP_INPUTS;
        let mut groups = vec![Group([0; PANEL_ROWS * GROUP_INPUTS]); panels * groups_per_panel];
        let mut scales = vec![0f32; panels * PANEL_ROWS];
        let mut sums = vec![0i32; panels * PANEL_ROWS];
        // Panel by panel in parallel: a model's load quantizes some 85 million weights.
        groups
            .par_chunks_mut(groups_per_panel)
            .zip(scales.par_chunks_mut(PANEL_ROWS))
            .zip(sums.par_chunks_mut(PANEL_ROWS))
            .zip(values[..n * k].par_chunks(PANEL_ROWS * k))
            .for_each(|(((panel_groups, scales), sums), rows)| {
                for (lane, weights) in rows.chunks_exact(k).enumerate() {
                    let max = weights.iter().fold(0f32, |m, w| m.max(w.abs()));
                    let scale = max / 127.0;
                    let inverse = if scale > 0.0 { 1.0 / scale } else { 0.0 };
                    let mut sum = 0i32;
                    for (group, weights) in panel_groups
                        .iter_mut()
                        .zip(weights.chunks_exact(GROUP_INPUTS))
                    {
                        let bytes = &mut group.0[lane * GROUP_INPUTS..][..GROUP_INPUTS];
                        for (byte, &w) in bytes.iter_mut().zip(weights) {
                            // Within −127..=127 by the choice of scale; clamped against
                            // rounding.
                            let q = round_clamped::<-127, 127>(w * inverse);
                            sum += i32::from(q);
                            *byte = q.cast_unsigned();
                        }
                    }
                    scales[lane] = scale;
                    sums[lane] = sum;
                }
            });
        Some(Self {
            groups,
            scales,
            sums,
            n,
            k,
            simd,
        })
    }

    /// `x · Wᵀ` for `x` of shape `[..., k]` (f32, CPU); the result has shape `[..., n]`.
    pub(crate) fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let dims = x.dims();
        let Some((&k, batch)) = dims.split_last() else {
            candle_core::bail!("a matrix product needs at least one dimension");
        };
        if k != self.k {
            candle_core::bail!(
                "an input of {k} values given to a {}×{} matrix",
                self.n,
                self.k
            );
        }
        let m: usize = batch.iter().product();
        // The activations in place where they are a contiguous f32 CPU tensor (the encoder's
        // always are): a copy of a feed-forward layer's would cost a tenth of its product.
        let (storage, layout) = x.storage_and_layout();
        let out = match (&*storage, layout.contiguous_offsets()) {
            (Storage::Cpu(CpuStorage::F32(values)), Some((start, end))) => {
                self.matmul(&values[start..end], m)
            }
            _ => {
                drop(storage);
                let x = x.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?;
                self.matmul(&x, m)
            }
        };
        let mut out_dims = dims.to_vec();
        if let Some(last) = out_dims.last_mut() {
            *last = self.n;
        }
        Tensor::from_vec(out, out_dims, &candle_core::Device::Cpu)
    }

    /// `x · Wᵀ` for `m` rows of `k` values, row-major; returns `m` rows of `n`.
    fn matmul(&self, x: &[f32], m: usize) -> Vec<f32> {
        let mut out = vec![0f32; m * self.n];
        if self.n == 0 {
            return out;
        }
        out.par_chunks_mut(BLOCK_ROWS * self.n)
            .zip(x.par_chunks(BLOCK_ROWS * self.k))
            .for_each(|(out, x)| self.block_product(x, out));
        out
    }

    /// One block of activation rows (`x`, whole rows of `k`) into `out` (their rows of `n`).
    ///
    /// Panel by panel, a slice of `K_SLICE` inputs at a time, so that the slice of the panel
    /// (32 KiB) stays in the L1 cache while every chunk of rows passes over it; the rows'
    /// sums wait in `acc` between slices and are dequantized after the last.
    fn block_product(&self, x: &[f32], out: &mut [f32]) {
        let rows = x.len() / self.k;
        let mut bytes = vec![0u8; x.len()];
        let quantization: Vec<RowQuantization> = x
            .chunks_exact(self.k)
            .zip(bytes.chunks_exact_mut(self.k))
            .map(|(row, bytes)| quantize_row(row, bytes, self.simd))
            .collect();
        let groups_per_panel = self.k / GROUP_INPUTS;
        let mut acc =
            vec![0i32; MAX_ACTIVATION_ROWS * PANEL_ROWS * rows.div_ceil(MAX_ACTIVATION_ROWS)];
        for (panel, groups) in self.groups.chunks_exact(groups_per_panel).enumerate() {
            let panel_out = PanelOut {
                scales: &self.scales[panel * PANEL_ROWS..][..PANEL_ROWS],
                sums: &self.sums[panel * PANEL_ROWS..][..PANEL_ROWS],
                columns: panel * PANEL_ROWS..(panel * PANEL_ROWS + PANEL_ROWS).min(self.n),
                n: self.n,
            };
            for start in (0..self.k).step_by(K_SLICE) {
                let end = (start + K_SLICE).min(self.k);
                let slice = KSlice {
                    groups: &groups[start / GROUP_INPUTS..end / GROUP_INPUTS],
                    start,
                    fresh: start == 0,
                    last: end == self.k,
                };
                for first in (0..rows).step_by(MAX_ACTIVATION_ROWS) {
                    let count = (rows - first).min(MAX_ACTIVATION_ROWS);
                    let chunk = RowChunk {
                        bytes: &bytes[first * self.k..(first + count) * self.k],
                        quantization: &quantization[first..first + count],
                        acc: &mut acc[first * PANEL_ROWS..(first + count) * PANEL_ROWS],
                        out: &mut out[first * self.n..(first + count) * self.n],
                    };
                    #[cfg(target_arch = "x86_64")]
                    // SAFETY: an `Int8Matrix` exists only where its `simd.runs_here()` was true
                    // (see `from_rows_for`), i.e. this CPU has every feature the kernel called
                    // is compiled for; the chunk holds whole rows of `k` bytes, 64 sums and `n`
                    // outputs each, and the slice's groups cover inputs `start..end ≤ k`.
                    unsafe {
                        if self.simd == PackedSimd::Avx512Vnni {
                            avx512::rows_product(&slice, &panel_out, chunk, self.k);
                        } else {
                            avx_vnni::rows_product(&slice, &panel_out, chunk, self.k);
                        }
                    }
                    #[cfg(not(target_arch = "x86_64"))]
                    {
                        let _ = (&slice, &panel_out, chunk);
                        unreachable!("`quantize` builds no Int8Matrix off x86-64");
                    }
                }
            }
        }
    }
}

/// Quantizes `row` into `out` (the same length): with the AVX-512 kernel where the matrix's
/// instruction set is AVX-512 VNNI, else one value at a time, to the same bytes.
fn quantize_row(row: &[f32], out: &mut [u8], simd: PackedSimd) -> RowQuantization {
    #[cfg(target_arch = "x86_64")]
    if simd == PackedSimd::Avx512Vnni && simd.runs_here() {
        // SAFETY: this CPU has AVX-512 F and BW (`runs_here`); `out` is `row`'s length
        // wherever this is called (the kernel asserts it).
        return unsafe { avx512::quantize_row(row, out) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = simd;
    RowQuantization::quantize(row, out)
}

/// The part of a panel one call of the kernel multiplies: the groups of inputs
/// `start .. start + 4 · groups.len()`; `fresh` for the first slice (the sums start at 0, not
/// at the previous slices'), `last` for the last (the sums are dequantized into the output).
struct KSlice<'a> {
    groups: &'a [Group],
    start: usize,
    fresh: bool,
    last: bool,
}

/// What a panel's sums become: its 64 rows' scales and sums of quantized weights, and the
/// output columns it fills (fewer than 64 for the last panel of an `n` that is no multiple of
/// 64) among `n`.
struct PanelOut<'a> {
    scales: &'a [f32],
    sums: &'a [i32],
    columns: std::ops::Range<usize>,
    n: usize,
}

/// Up to 6 activation rows: their bytes (whole rows of `k`), quantization, 64 running sums
/// each (between slices) and output rows (`n` each).
struct RowChunk<'a> {
    bytes: &'a [u8],
    quantization: &'a [RowQuantization],
    acc: &'a mut [i32],
    out: &'a mut [f32],
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    //! The kernel. Every function here is compiled for AVX-512 F/BW/VNNI and may be called
    //! only after `cpu_supported()` returned true.
    use super::{
        GROUP_INPUTS, KSlice, MAX_ACTIVATION_ROWS, PANEL_ROWS, PanelOut, RowChunk, RowQuantization,
    };
    use core::arch::x86_64::*;

    /// Vectors of 16 lanes per panel.
    const VECTORS: usize = PANEL_ROWS / 16;

    /// [`RowQuantization::quantize`], 16 values at a time: the same operations in the same
    /// order (`cvtps2dq` rounds to even), so the same bytes.
    ///
    /// # Safety
    /// The CPU must have AVX-512 F and BW; `out` is at least as long as `row`.
    #[target_feature(enable = "avx512f,avx512bw")]
    pub(super) unsafe fn quantize_row(row: &[f32], out: &mut [u8]) -> RowQuantization {
        assert!(out.len() >= row.len());
        let chunks = row.chunks_exact(16);
        let tail = chunks.remainder();
        let (mut low, mut high) = (_mm512_setzero_ps(), _mm512_setzero_ps());
        for chunk in chunks.clone() {
            // SAFETY: 16 readable f32s; no alignment requirement.
            let values = unsafe { _mm512_loadu_ps(chunk.as_ptr()) };
            // The new values second: `vminps` returns its second operand where either is NaN,
            // so a NaN is skipped, as `f32::min` skips it.
            low = _mm512_min_ps(values, low);
            high = _mm512_max_ps(values, high);
        }
        let min = tail
            .iter()
            .fold(_mm512_reduce_min_ps(low), |m, &a| m.min(a));
        let max = tail
            .iter()
            .fold(_mm512_reduce_max_ps(high), |m, &a| m.max(a));
        let Some((quantization, inverse)) = RowQuantization::for_range(min, max) else {
            out.fill(0);
            return RowQuantization::ZEROS;
        };
        #[allow(clippy::cast_precision_loss)]
        let zero = quantization.zero as f32;
        let (inverses, zeros) = (_mm512_set1_ps(inverse), _mm512_set1_ps(zero));
        let (floor, ceiling) = (_mm512_setzero_ps(), _mm512_set1_ps(255.0));
        for (chunk, bytes) in chunks.zip(out.chunks_exact_mut(16)) {
            // SAFETY: 16 readable f32s; no alignment requirement.
            let values = unsafe { _mm512_loadu_ps(chunk.as_ptr()) };
            let shifted = _mm512_add_ps(_mm512_mul_ps(values, inverses), zeros);
            // A NaN lane becomes the zero point, as in `RowQuantization::byte`.
            let numbers = _mm512_cmp_ps_mask::<_CMP_ORD_Q>(values, values);
            let shifted = _mm512_mask_blend_ps(numbers, zeros, shifted);
            let clamped = _mm512_min_ps(_mm512_max_ps(shifted, floor), ceiling);
            let packed = _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(clamped));
            // SAFETY: `bytes` is 16 writable bytes; no alignment requirement.
            unsafe { _mm_storeu_si128(bytes.as_mut_ptr().cast(), packed) };
        }
        let done = row.len() - tail.len();
        for (byte, &a) in out[done..].iter_mut().zip(tail) {
            *byte = RowQuantization::byte(a, inverse, zero);
        }
        quantization
    }

    /// A chunk's rows times one slice of a panel, added to their running sums; after the
    /// last slice, the sums dequantized into the panel's columns of the rows' outputs:
    /// `Σ a·w ≈ s_a · s_w · (Σ u·q − z · Σ q)`, exact in i32 (no sum of fewer than 66,000
    /// inputs reaches 2³¹), then one rounding to f32.
    ///
    /// # Safety
    /// The CPU must have AVX-512 F, BW and VNNI. The chunk is 1 to 6 rows of `k` bytes, with
    /// a quantization, 64 sums and `panel.n` outputs each; the slice's inputs and the panel's
    /// columns lie within `k` and `n`; otherwise this panics (it never reads out of bounds).
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(super) unsafe fn rows_product(
        slice: &KSlice<'_>,
        panel: &PanelOut<'_>,
        chunk: RowChunk<'_>,
        k: usize,
    ) {
        match chunk.bytes.len() / k {
            1 => product::<1>(slice, panel, chunk, k),
            2 => product::<2>(slice, panel, chunk, k),
            3 => product::<3>(slice, panel, chunk, k),
            4 => product::<4>(slice, panel, chunk, k),
            5 => product::<5>(slice, panel, chunk, k),
            _ => product::<MAX_ACTIVATION_ROWS>(slice, panel, chunk, k),
        }
    }

    /// [`rows_product`] for `M` rows, `M` a constant so that the sums stay in registers.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    fn product<const M: usize>(
        slice: &KSlice<'_>,
        panel: &PanelOut<'_>,
        chunk: RowChunk<'_>,
        k: usize,
    ) {
        let RowChunk {
            bytes,
            quantization,
            acc,
            out,
        } = chunk;
        let end = slice.start + slice.groups.len() * GROUP_INPUTS;
        assert!(
            bytes.len() >= M * k
                && end <= k
                && acc.len() >= M * PANEL_ROWS
                && quantization.len() >= M
                && out.len() >= M * panel.n
                && panel.columns.end <= panel.n
                && panel.scales.len() == PANEL_ROWS
                && panel.sums.len() == PANEL_ROWS
        );
        let mut sums = [[_mm512_setzero_si512(); VECTORS]; M];
        if !slice.fresh {
            for (r, row) in sums.iter_mut().enumerate() {
                for (v, lanes) in row.iter_mut().enumerate() {
                    let at = r * PANEL_ROWS + v * 16;
                    // SAFETY: 16 readable i32s (`acc` holds 64 per row, asserted above).
                    *lanes = unsafe { _mm512_loadu_si512(acc[at..at + 16].as_ptr().cast()) };
                }
            }
        }
        // Raw pointers stepped along the rows and the panel, so that the loop is loads and
        // products only, its 24 sums in registers.
        let mut inputs: [*const u8; M] =
            std::array::from_fn(|i| bytes[i * k + slice.start..].as_ptr());
        for group in slice.groups {
            let weights = group.0.as_ptr();
            // SAFETY: a `Group` is 256 bytes aligned to 64, i.e. four aligned vectors.
            let w: [__m512i; VECTORS] =
                std::array::from_fn(|v| unsafe { _mm512_load_si512(weights.add(v * 64).cast()) });
            for r in 0..M {
                // SAFETY: the row's pointer started at input `start` and has moved 4 bytes
                // per group before this one, so its next 4 bytes lie below `end ≤ k`
                // (asserted above); the read has no alignment requirement.
                let four = unsafe { inputs[r].cast::<i32>().read_unaligned() };
                let activations = _mm512_set1_epi32(four);
                for v in 0..VECTORS {
                    sums[r][v] = _mm512_dpbusd_epi32(sums[r][v], activations, w[v]);
                }
                // SAFETY: at most one past the slice's end within the row.
                inputs[r] = unsafe { inputs[r].add(GROUP_INPUTS) };
            }
        }
        if !slice.last {
            for (r, row) in sums.iter().enumerate() {
                for (v, lanes) in row.iter().enumerate() {
                    let at = r * PANEL_ROWS + v * 16;
                    // SAFETY: 16 writable i32s (asserted above).
                    unsafe { _mm512_storeu_si512(acc[at..at + 16].as_mut_ptr().cast(), *lanes) };
                }
            }
            return;
        }
        let width = panel.columns.len();
        for ((row, q), out) in sums
            .iter()
            .zip(quantization)
            .zip(out.chunks_exact_mut(panel.n))
        {
            let zero = _mm512_set1_epi32(q.zero);
            let row_scale = _mm512_set1_ps(q.scale);
            let mut values = [0f32; PANEL_ROWS];
            for (v, lanes) in row.iter().enumerate() {
                // SAFETY: `scales` and `sums` hold 64 values (asserted above), so 16 from
                // `16v` are readable.
                let (scales, weight_sums) = unsafe {
                    (
                        _mm512_loadu_ps(panel.scales.as_ptr().add(v * 16)),
                        _mm512_loadu_si512(panel.sums.as_ptr().add(v * 16).cast()),
                    )
                };
                let exact = _mm512_sub_epi32(*lanes, _mm512_mullo_epi32(zero, weight_sums));
                let value =
                    _mm512_mul_ps(_mm512_cvtepi32_ps(exact), _mm512_mul_ps(row_scale, scales));
                // SAFETY: `values` holds 64 f32s, so 16 from `16v` are writable.
                unsafe { _mm512_storeu_ps(values.as_mut_ptr().add(v * 16), value) };
            }
            out[panel.columns.clone()].copy_from_slice(&values[..width]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_values::uniform as values;

    #[test]
    fn a_row_is_quantized_over_its_range_with_zero_exact() {
        let row = [-1.0, 0.0, 0.5, 3.0];
        let mut bytes = [0u8; 4];
        let q = RowQuantization::quantize(&row, &mut bytes);
        assert!((q.scale - 4.0 / 255.0).abs() < 1e-7);
        assert_eq!(q.zero, 64);
        assert_eq!(bytes, [0, 64, 96, 255]);
        let mut bytes = [7u8; 3];
        let q = RowQuantization::quantize(&[0.0; 3], &mut bytes);
        assert_eq!((q.scale, q.zero, bytes), (0.0, 0, [0; 3]));
        // A row of one sign still holds 0: its zero point sits at an end.
        let q = RowQuantization::quantize(&[2.0, 0.4, 0.0], &mut bytes);
        assert_eq!((q.zero, bytes), (0, [255, 51, 0]));
        // A range so small that its scale's reciprocal is infinite: a row of zeros, not a
        // zero point out of range.
        let q = RowQuantization::quantize(&[1e-40, 0.0, 0.0], &mut bytes);
        assert_eq!((q.scale, q.zero, bytes), (0.0, 0, [0; 3]));
        // Sums that could overflow i32 are not multiplied here.
        assert!(!Int8Matrix::runs(64, 66_000));
    }

    #[test]
    fn the_vector_quantization_gives_the_scalar_bytes() {
        if !cpu_supported() {
            selfrag_testkit::skip(
                selfrag_testkit::Lack::CpuFeatures(&["avx512f", "avx512bw", "avx512_vnni"]),
                "the int8 quantization kernel needs AVX-512",
            );
            return;
        }
        for (len, seed) in [(768, 3), (3072, 4), (37, 5), (5, 6)] {
            let mut row: Vec<f32> = values(len, seed).iter().map(|v| v * 3.0 + 0.7).collect();
            row[len / 2] = f32::NAN;
            let (mut scalar, mut vector) = (vec![0u8; len], vec![0u8; len]);
            let want = RowQuantization::quantize(&row, &mut scalar);
            let got = quantize_row(&row, &mut vector, PackedSimd::Avx512Vnni);
            assert_eq!((got, &vector), (want, &scalar), "{len}");
            #[allow(clippy::cast_sign_loss, clippy::cast_possible_truncation)]
            let zero_byte = got.zero as u8;
            assert_eq!(vector[len / 2], zero_byte, "NaN is the zero point");
        }
    }

    /// Both int8 kernels give the same outputs to the bit (the same integer sums, dequantized
    /// by the same operations), for shapes with a partial panel, partial row groups, an odd
    /// row count and several slices of inputs.
    #[test]
    fn the_avx_vnni_products_are_the_avx512_ones() {
        let here: Vec<PackedSimd> = [PackedSimd::Avx512Vnni, PackedSimd::AvxVnni]
            .into_iter()
            .filter(|s| s.runs_here())
            .collect();
        if here.len() < 2 {
            selfrag_testkit::skip(
                selfrag_testkit::Lack::CpuFeatures(&[
                    "avx512f",
                    "avx512bw",
                    "avx512_vnni",
                    "avx_vnni",
                ]),
                "comparing the int8 kernels needs AVX-512 VNNI and AVX-VNNI",
            );
            return;
        }
        for (m, n, k) in [(1, 64, 4), (7, 100, 36), (13, 768, 768), (200, 130, 3072)] {
            let x = values(m * k, 11);
            let w = values(n * k, 12);
            let products: Vec<Vec<f32>> = here
                .iter()
                .map(|&simd| {
                    Int8Matrix::from_rows_for(&w, n, k, simd)
                        .unwrap()
                        .matmul(&x, m)
                })
                .collect();
            let bits = |p: &[f32]| p.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&products[0]), bits(&products[1]), "({m},{n},{k})");
        }
        assert!(Int8Matrix::from_rows_for(&values(64, 1), 16, 4, PackedSimd::Avx2).is_none());
    }

    /// The int8 product against the f32 one, for shapes with a partial panel and partial row
    /// groups, within the error the quantization allows.
    #[test]
    fn products_match_f32_within_the_quantization_error() {
        if !cpu_supported() {
            selfrag_testkit::skip(
                selfrag_testkit::Lack::CpuFeatures(&["avx512f", "avx512bw", "avx512_vnni"]),
                "the int8 products need AVX-512 VNNI or AVX-VNNI",
            );
            return;
        }
        for (m, n, k) in [(1, 64, 4), (7, 100, 36), (13, 768, 768), (200, 130, 3072)] {
            let x = values(m * k, 1);
            let w = values(n * k, 2);
            let matrix = Int8Matrix::from_rows(&w, n, k).unwrap();
            let got = matrix.matmul(&x, m);
            let mut worst = 0f32;
            for i in 0..m {
                for j in 0..n {
                    let exact: f32 = (0..k).map(|t| x[i * k + t] * w[j * k + t]).sum();
                    // Each of the k terms errs by at most half a step of either factor.
                    #[allow(clippy::cast_precision_loss)]
                    let bound = (k as f32) * (1.0 / 127.0 + 2.0 / 255.0);
                    let error = (got[i * n + j] - exact).abs();
                    assert!(
                        error <= bound,
                        "({m},{n},{k}) [{i}][{j}]: {error} > {bound}"
                    );
                    worst = worst.max(error / (k as f32).sqrt());
                }
            }
            // Errors of random sign add like a random walk: far below the worst-case bound.
            assert!(worst < 0.02, "({m},{n},{k}): typical error {worst}");
        }
    }
}
