//! The int8 products on CPUs with AVX-VNNI but not AVX-512 (Intel's client CPUs from Alder
//! Lake; issue 48, goal 1): the same panels and the same exact integer sums as the AVX-512
//! kernel (`super::avx512`), with `vpdpbusd` on 256 bits, so the same outputs to the bit.
//!
//! A panel's 64 rows are 8 vectors of 8 lanes here; AVX2 has 16 registers, so a pass takes
//! one half of the panel (4 vectors) against 2 activation rows (8 sums, 4 weight vectors, 2
//! broadcasts), and each row's sums wait in the chunk's running sums between passes. The
//! panel's slice (32 KiB) stays in the L1 cache across the passes.
//!
//! Every function here is compiled for AVX2, FMA and AVX-VNNI and may be called only where
//! `PackedSimd::AvxVnni.runs_here()`.

use core::arch::x86_64::*;

use super::{GROUP_INPUTS, KSlice, PANEL_ROWS, PanelOut, RowChunk};

/// Lanes of a vector.
const LANES: usize = 8;
/// Vectors of a pass: half a panel.
const HALF_VECTORS: usize = PANEL_ROWS / LANES / 2;
/// Activation rows of a pass.
const PASS_ROWS: usize = 2;

/// A chunk's rows times one slice of a panel, added to their running sums; after the last
/// slice, the sums dequantized into the panel's columns of the rows' outputs, as
/// `super::avx512::rows_product` does.
///
/// # Safety
/// The CPU must have AVX2, FMA and AVX-VNNI. The chunk is 1 to 6 rows of `k` bytes, with a
/// quantization, 64 sums and `panel.n` outputs each; the slice's inputs and the panel's
/// columns lie within `k` and `n`; otherwise this panics (it never reads out of bounds).
#[target_feature(enable = "avx2,fma,avxvnni")]
pub(super) unsafe fn rows_product(
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
    let rows = bytes.len() / k;
    let end = slice.start + slice.groups.len() * GROUP_INPUTS;
    assert!(
        rows >= 1
            && end <= k
            && acc.len() >= rows * PANEL_ROWS
            && quantization.len() >= rows
            && out.len() >= rows * panel.n
            && panel.columns.end <= panel.n
            && panel.scales.len() == PANEL_ROWS
            && panel.sums.len() == PANEL_ROWS
    );
    let mut first = 0;
    while first < rows {
        let count = (rows - first).min(PASS_ROWS);
        let bytes = &bytes[first * k..(first + count) * k];
        let acc = &mut acc[first * PANEL_ROWS..(first + count) * PANEL_ROWS];
        for half in 0..2 {
            if count == PASS_ROWS {
                pass::<PASS_ROWS>(slice, half, bytes, acc, k);
            } else {
                pass::<1>(slice, half, bytes, acc, k);
            }
        }
        first += count;
    }
    if !slice.last {
        return;
    }
    let width = panel.columns.len();
    for ((sums, q), out) in acc
        .chunks_exact(PANEL_ROWS)
        .zip(quantization)
        .zip(out.chunks_exact_mut(panel.n))
        .take(rows)
    {
        let zero = _mm256_set1_epi32(q.zero);
        let row_scale = _mm256_set1_ps(q.scale);
        let mut values = [0f32; PANEL_ROWS];
        for v in 0..PANEL_ROWS / LANES {
            let at = v * LANES;
            // SAFETY: `sums`, `scales` and `weight sums` hold 64 values each (asserted
            // above), so 8 from `8v` are readable; no alignment requirement.
            let (lanes, scales, weight_sums) = unsafe {
                (
                    _mm256_loadu_si256(sums[at..at + LANES].as_ptr().cast()),
                    _mm256_loadu_ps(panel.scales[at..at + LANES].as_ptr()),
                    _mm256_loadu_si256(panel.sums[at..at + LANES].as_ptr().cast()),
                )
            };
            let exact = _mm256_sub_epi32(lanes, _mm256_mullo_epi32(zero, weight_sums));
            let value = _mm256_mul_ps(_mm256_cvtepi32_ps(exact), _mm256_mul_ps(row_scale, scales));
            // SAFETY: `values` holds 64 f32s, so 8 from `8v` are writable.
            unsafe { _mm256_storeu_ps(values[at..at + LANES].as_mut_ptr(), value) };
        }
        out[panel.columns.clone()].copy_from_slice(&values[..width]);
    }
}

/// `M` rows (`bytes`, whole rows of `k`) times half `half` of the slice's panel rows (rows
/// `32·half ..+ 32`), added to their running sums in `acc` (64 a row; from 0 on the first
/// slice).
#[inline]
#[target_feature(enable = "avx2,fma,avxvnni")]
fn pass<const M: usize>(slice: &KSlice<'_>, half: usize, bytes: &[u8], acc: &mut [i32], k: usize) {
    let end = slice.start + slice.groups.len() * GROUP_INPUTS;
    assert!(bytes.len() >= M * k && end <= k && acc.len() >= M * PANEL_ROWS && half < 2);
    let first_lane = half * HALF_VECTORS * LANES;
    let mut sums = [[_mm256_setzero_si256(); HALF_VECTORS]; M];
    if !slice.fresh {
        for (r, row) in sums.iter_mut().enumerate() {
            for (v, lanes) in row.iter_mut().enumerate() {
                let at = r * PANEL_ROWS + first_lane + v * LANES;
                // SAFETY: 8 readable i32s (`acc` holds 64 per row, asserted above).
                *lanes = unsafe { _mm256_loadu_si256(acc[at..at + LANES].as_ptr().cast()) };
            }
        }
    }
    // Raw pointers stepped along the rows, so that the loop is loads and products only.
    let mut inputs: [*const u8; M] = std::array::from_fn(|i| bytes[i * k + slice.start..].as_ptr());
    for group in slice.groups {
        // SAFETY: a `Group` is 256 bytes aligned to 64, `[row][input]`: the half's 32 rows are
        // its 128 bytes from `128·half`, four vectors aligned to 32.
        let weights = unsafe { group.0.as_ptr().add(first_lane * GROUP_INPUTS) };
        let w: [__m256i; HALF_VECTORS] = std::array::from_fn(|v| {
            // SAFETY: as above.
            unsafe { _mm256_load_si256(weights.add(v * 32).cast()) }
        });
        for (sums, input) in sums.iter_mut().zip(inputs.iter_mut()) {
            // SAFETY: the row's pointer started at input `start` and has moved 4 bytes per
            // group before this one, so its next 4 bytes lie below `end ≤ k` (asserted
            // above); the read has no alignment requirement.
            let four = unsafe { input.cast::<i32>().read_unaligned() };
            let activations = _mm256_set1_epi32(four);
            for (lanes, &w) in sums.iter_mut().zip(&w) {
                *lanes = _mm256_dpbusd_avx_epi32(*lanes, activations, w);
            }
            // SAFETY: at most one past the slice's end within the row.
            *input = unsafe { input.add(GROUP_INPUTS) };
        }
    }
    for (r, row) in sums.iter().enumerate() {
        for (v, lanes) in row.iter().enumerate() {
            let at = r * PANEL_ROWS + first_lane + v * LANES;
            // SAFETY: 8 writable i32s (asserted above).
            unsafe { _mm256_storeu_si256(acc[at..at + LANES].as_mut_ptr().cast(), *lanes) };
        }
    }
}
