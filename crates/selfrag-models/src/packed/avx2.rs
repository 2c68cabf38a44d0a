//! The packed tiles' kernels for x86-64 CPUs without AVX-512: AVX2, FMA and F16C, with and
//! without AVX-VNNI (issue 48, goal 1: AMD Zen 2 and 3 and Intel's client CPUs, most of the
//! laptops the app runs on, had only candle's kernels, which read prompts at 0.84× and decoded
//! at 0.85× llama.cpp's AVX2 build on the same file).
//!
//! The tiles are the ones the AVX-512 kernels read (`super::avx512`): a tile's 16 output rows
//! are taken here as two vectors of 8, the rows `0..8` and `8..16` of each 64-byte group. The
//! decode kernel multiplies both halves of a tile before the next tile (the second half from
//! the cache lines the first brought in); the prompt kernel unpacks a quad's tiles into the
//! same scratch as the AVX-512 kernel and multiplies 2 activation rows by 4 vectors of
//! outputs at a time, which with the sums fills AVX2's 16 registers.
//!
//! Every kernel is written once, generic over how the 4 byte products of a 32-bit lane are
//! summed ([`Bytes`]): AVX-VNNI's `vpdpbusd` on 256 bits ([`Vnni`]), or AVX2's `vpmaddubsw`,
//! whose 16-bit sums are added a few at a time before `vpmaddwd` widens them ([`Madd`]). The
//! generic functions are `#[inline(always)]` and have no instruction set of their own: each is
//! compiled inside one of the entry points below, which carry `#[target_feature]`, the way the
//! `memchr` crate compiles its generic vector code. Their intrinsics are therefore called in
//! `unsafe` blocks: every function of this module may run only where the CPU has AVX2, FMA
//! and F16C (`PackedSimd::Avx2.runs_here()`), and the `_vnni` entry points only where it also
//! has AVX-VNNI (`PackedSimd::AvxVnni.runs_here()`).

use core::arch::x86_64::*;
use std::mem::MaybeUninit;

use super::{
    BlockQ8K, MAX_ACTIVATION_ROWS, PROMPT_CHUNK_ROWS, Q4K_SCRATCH, Q4KScratch, Q6K_SCRATCH,
    Q6KScratch, QK_K, QUAD_STRIPS, QUAD_WIDTH, QuadScratch, QuadShape, TILE_ROWS, TileQ4K, TileQ6K,
    Tiles, prefetch_share,
};

/// Output rows per vector: half a tile.
const HALF: usize = TILE_ROWS / 2;
/// The vectors of output columns (8 each) the prompt kernel takes at once: two strips.
const COLUMN_VECTORS: usize = 4;
/// Activation rows the prompt kernel takes at once.
const PROMPT_ROWS: usize = 2;
/// The largest Q4_K value (4 bits) and Q6_K value (6 bits, stored as `0..64`).
const Q4K_MAX_WEIGHT: i32 = 15;
const Q6K_MAX_WEIGHT: i32 = 63;

/// One output row of a quad, for the prompt kernel to write.
type QuadRow<'a> = &'a mut [MaybeUninit<f32>; QUAD_WIDTH];

/// How a vector's byte products are summed: per 32-bit lane, its 4 unsigned weight bytes times
/// the 4 signed activation bytes, added into an accumulator that [`widen`](Self::widen) turns
/// into 32-bit sums.
trait Bytes {
    /// How many [`add`](Self::add)s one accumulator takes before it must be widened, with
    /// weights of at most `max_weight` (activations are Q8_K's, at most 128 in magnitude).
    fn adds(max_weight: i32) -> usize;
    /// An empty accumulator.
    unsafe fn zero() -> __m256i;
    /// `acc` plus the products of `weights` (unsigned) and `acts` (signed), 4 per lane.
    unsafe fn add(acc: __m256i, weights: __m256i, acts: __m256i) -> __m256i;
    /// The accumulator's 32-bit sums.
    unsafe fn widen(acc: __m256i) -> __m256i;
}

/// AVX-VNNI: `vpdpbusd` adds the 4 products into the 32-bit lane, exactly.
struct Vnni;

impl Bytes for Vnni {
    #[inline(always)]
    fn adds(_max_weight: i32) -> usize {
        usize::MAX
    }

    #[inline(always)]
    unsafe fn zero() -> __m256i {
        // SAFETY: the module's contract (AVX2 here; the `_vnni` entry points for `add`).
        unsafe { _mm256_setzero_si256() }
    }

    #[inline(always)]
    unsafe fn add(acc: __m256i, weights: __m256i, acts: __m256i) -> __m256i {
        // SAFETY: reached only through the `_vnni` entry points (the module's contract).
        unsafe { _mm256_dpbusd_avx_epi32(acc, weights, acts) }
    }

    #[inline(always)]
    unsafe fn widen(acc: __m256i) -> __m256i {
        acc
    }
}

/// AVX2: `vpmaddubsw` sums two products into each 16-bit lane (at most 2 · 63 · 128 = 16,128
/// for a Q6_K weight, so it never saturates), and the 16-bit lanes of a few of them add up
/// exactly before `vpmaddwd` by ones sums each pair into 32 bits: 2 instructions a vector of
/// products and one per few, where widening each would take 3.
struct Madd;

impl Bytes for Madd {
    #[inline(always)]
    fn adds(max_weight: i32) -> usize {
        let per_add = 2 * max_weight.max(1) * 128;
        usize::try_from(i32::from(i16::MAX) / per_add).map_or(1, |n| n.max(1))
    }

    #[inline(always)]
    unsafe fn zero() -> __m256i {
        // SAFETY: the module's contract.
        unsafe { _mm256_setzero_si256() }
    }

    #[inline(always)]
    unsafe fn add(acc: __m256i, weights: __m256i, acts: __m256i) -> __m256i {
        // SAFETY: the module's contract.
        unsafe { _mm256_add_epi16(acc, _mm256_maddubs_epi16(weights, acts)) }
    }

    #[inline(always)]
    unsafe fn widen(acc: __m256i) -> __m256i {
        // SAFETY: the module's contract.
        unsafe { _mm256_madd_epi16(acc, _mm256_set1_epi16(1)) }
    }
}

/// Loads 32 bytes starting at `at`.
#[inline(always)]
unsafe fn load32(bytes: &[u8], at: usize) -> __m256i {
    let chunk = &bytes[at..at + 32];
    // SAFETY: 32 readable bytes, no alignment requirement; AVX by the module's contract.
    unsafe { _mm256_loadu_si256(chunk.as_ptr().cast()) }
}

/// Stores 32 bytes at the start of `bytes`.
#[inline(always)]
unsafe fn store32(bytes: &mut [u8], value: __m256i) {
    let chunk = &mut bytes[..32];
    // SAFETY: 32 writable bytes, no alignment requirement; AVX by the module's contract.
    unsafe { _mm256_storeu_si256(chunk.as_mut_ptr().cast(), value) }
}

/// The first 8 bytes of `bytes`, for widening to 8 lanes.
#[inline(always)]
unsafe fn load8(bytes: &[u8]) -> __m128i {
    let chunk = &bytes[..8];
    // SAFETY: 8 readable bytes, no alignment requirement.
    unsafe { _mm_loadl_epi64(chunk.as_ptr().cast()) }
}

/// The first 8 f16 values (as bits) of `bits` as f32 lanes.
#[inline(always)]
unsafe fn f16x8(bits: &[u16]) -> __m256 {
    let chunk = &bits[..8];
    // SAFETY: 16 readable bytes, no alignment requirement; F16C by the module's contract.
    unsafe { _mm256_cvtph_ps(_mm_loadu_si128(chunk.as_ptr().cast())) }
}

/// The first 8 values of `values` as lanes.
#[inline(always)]
unsafe fn f32x8(values: &[f32]) -> __m256 {
    let chunk = &values[..8];
    // SAFETY: 8 readable f32s, no alignment requirement.
    unsafe { _mm256_loadu_ps(chunk.as_ptr()) }
}

/// Stores 8 f32 lanes at the start of `values`.
#[inline(always)]
unsafe fn store_f32x8(values: &mut [f32], lanes: __m256) {
    let chunk = &mut values[..8];
    // SAFETY: 8 writable f32s, no alignment requirement.
    unsafe { _mm256_storeu_ps(chunk.as_mut_ptr(), lanes) }
}

/// The first 8 values of `values` as lanes.
#[inline(always)]
unsafe fn i32x8(values: &[i32]) -> __m256i {
    let chunk = &values[..8];
    // SAFETY: 32 readable bytes, no alignment requirement.
    unsafe { _mm256_loadu_si256(chunk.as_ptr().cast()) }
}

/// Stores 8 i32 lanes at the start of `values`.
#[inline(always)]
unsafe fn store_i32x8(values: &mut [i32], lanes: __m256i) {
    let chunk = &mut values[..8];
    // SAFETY: 32 writable bytes, no alignment requirement.
    unsafe { _mm256_storeu_si256(chunk.as_mut_ptr().cast(), lanes) }
}

/// Broadcasts 4 activation bytes starting at `at` to every 32-bit lane.
#[inline(always)]
unsafe fn broadcast4(qs: &[i8; QK_K], at: usize) -> __m256i {
    let bytes = [qs[at], qs[at + 1], qs[at + 2], qs[at + 3]];
    // SAFETY: the module's contract.
    unsafe { _mm256_set1_epi32(i32::from_le_bytes(bytes.map(i8::cast_unsigned))) }
}

/// The two 16-bit sums `sums[at]`, `sums[at + 1]` in every 32-bit lane, for `vpmaddwd`.
#[inline(always)]
unsafe fn broadcast_pair(sums: &[i16], at: usize) -> __m256i {
    let low = u32::from(sums[at].cast_unsigned());
    let high = u32::from(sums[at + 1].cast_unsigned());
    // SAFETY: the module's contract.
    unsafe { _mm256_set1_epi32((low | (high << 16)).cast_signed()) }
}

/// The pairs `(a, b)` of 16-bit lanes, `a` (the low 16 bits of `low`'s lane) in the low half
/// of each 32-bit lane.
#[inline(always)]
unsafe fn pair_lanes(low: __m256i, high: __m256i) -> __m256i {
    // SAFETY: the module's contract.
    unsafe {
        _mm256_or_si256(
            _mm256_and_si256(low, _mm256_set1_epi32(0xFFFF)),
            _mm256_slli_epi32(high, 16),
        )
    }
}

/// Adds one Q4_K tile times the activation blocks `acts` (up to 8 rows) into `acc` (`[half of
/// the tile's rows][activation row]`), as the AVX-512 kernel does: the sub-blocks' integer
/// products summed times their 6-bit scales in f32, their minimums times the activations' sums
/// in exact integers, the block scales and the activation's scale once per tile.
#[inline(always)]
unsafe fn q4k_tile<B: Bytes, const M: usize>(
    tile: &TileQ4K,
    acts: &[&BlockQ8K; M],
    acc: &mut [[__m256; M]; 2],
    ahead: Option<&TileQ4K>,
) {
    // SAFETY: the module's contract.
    unsafe {
        let nibble = _mm256_set1_epi8(0x0F);
        for (half, acc) in acc.iter_mut().enumerate() {
            let rows = half * HALF;
            let mut scaled = [_mm256_setzero_ps(); M];
            let mut minimums = [_mm256_setzero_si256(); M];
            for sub in 0..8 {
                if half == 0 {
                    prefetch_share(ahead, sub, 8);
                }
                // The sub-block's 32 inputs in 4 groups of 8, each a vector of low nibbles
                // (inputs `8g ..+ 4` of the sub-block) and one of high nibbles (`8g + 4 ..+ 4`),
                // into two sums per row: 4 adds each, within `Madd::adds(Q4K_MAX_WEIGHT)` (a
                // test holds it).
                let mut low_sums = [B::zero(); M];
                let mut high_sums = [B::zero(); M];
                for g in 0..4 {
                    let w = load32(&tile.qs, ((sub * 4 + g) * TILE_ROWS + rows) * 4);
                    let low = _mm256_and_si256(w, nibble);
                    let high = _mm256_and_si256(_mm256_srli_epi16(w, 4), nibble);
                    for (m, act) in acts.iter().enumerate() {
                        let at = sub * 32 + g * 8;
                        low_sums[m] = B::add(low_sums[m], low, broadcast4(&act.qs, at));
                        high_sums[m] = B::add(high_sums[m], high, broadcast4(&act.qs, at + 4));
                    }
                }
                let scale =
                    _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(load8(&tile.scales[sub][rows..])));
                // The minimum in both 16-bit halves of its row's lane: times the sums of the
                // sub-block's two 16-value halves, added.
                let min = _mm256_cvtepu8_epi32(load8(&tile.mins[sub][rows..]));
                let min = _mm256_or_si256(min, _mm256_slli_epi32(min, 16));
                for (m, act) in acts.iter().enumerate() {
                    let sum = _mm256_add_epi32(B::widen(low_sums[m]), B::widen(high_sums[m]));
                    scaled[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), scale, scaled[m]);
                    minimums[m] = _mm256_add_epi32(
                        minimums[m],
                        _mm256_madd_epi16(min, broadcast_pair(&act.bsums, 2 * sub)),
                    );
                }
            }
            let d = f16x8(&tile.d[rows..]);
            let dmin = f16x8(&tile.dmin[rows..]);
            for (m, act) in acts.iter().enumerate() {
                let value = _mm256_fmsub_ps(
                    scaled[m],
                    d,
                    _mm256_mul_ps(_mm256_cvtepi32_ps(minimums[m]), dmin),
                );
                acc[m] = _mm256_fmadd_ps(value, _mm256_set1_ps(act.d), acc[m]);
            }
        }
    }
}

/// A 6-bit value per byte: the low nibble of `low`, and bits 4–5 of `bits`.
#[inline(always)]
unsafe fn with_high(low: __m256i, bits: __m256i) -> __m256i {
    // SAFETY: the module's contract.
    unsafe {
        _mm256_or_si256(
            _mm256_and_si256(low, _mm256_set1_epi8(0x0F)),
            _mm256_and_si256(bits, _mm256_set1_epi8(0x30)),
        )
    }
}

/// The 6-bit values (`0..64`) of sub-block `sub` of a Q6_K tile for its output rows `rows ..+
/// 8`: inputs `16·sub + 4i ..+ 4` in vector `i` (as `super::avx512::q6k_values`).
#[inline(always)]
unsafe fn q6k_values(tile: &TileQ6K, sub: usize, rows: usize) -> [__m256i; 4] {
    // SAFETY: the module's contract.
    unsafe {
        let qh = load32(&tile.qh, (sub * TILE_ROWS + rows) * 4);
        let w0 = load32(&tile.ql, (2 * sub * TILE_ROWS + rows) * 4);
        let w1 = load32(&tile.ql, ((2 * sub + 1) * TILE_ROWS + rows) * 4);
        [
            with_high(w0, _mm256_slli_epi16(qh, 4)),
            with_high(_mm256_srli_epi16(w0, 4), _mm256_slli_epi16(qh, 2)),
            with_high(w1, qh),
            with_high(_mm256_srli_epi16(w1, 4), _mm256_srli_epi16(qh, 2)),
        ]
    }
}

/// Adds one Q6_K tile times the activation blocks `acts` (up to 8 rows) into `acc`, as the
/// AVX-512 kernel does: the scales per row in f32 over the tile, the offset of 32 in exact
/// integers, the block and activation scales once per tile.
#[inline(always)]
unsafe fn q6k_tile<B: Bytes, const M: usize>(
    tile: &TileQ6K,
    acts: &[&BlockQ8K; M],
    acc: &mut [[__m256; M]; 2],
    ahead: Option<&TileQ6K>,
) {
    // SAFETY: the module's contract.
    unsafe {
        for (half, acc) in acc.iter_mut().enumerate() {
            let rows = half * HALF;
            let mut scaled = [_mm256_setzero_ps(); M];
            let mut offsets = [_mm256_setzero_si256(); M];
            for sub in 0..16 {
                if half == 0 {
                    prefetch_share(ahead, sub, 16);
                }
                let values = q6k_values(tile, sub, rows);
                let scale32 = _mm256_cvtepi8_epi32(load8(&tile.scales[sub][rows..]));
                let scale = _mm256_cvtepi32_ps(scale32);
                // Two sums per row of 2 adds each, within `Madd::adds(Q6K_MAX_WEIGHT)`.
                for (m, act) in acts.iter().enumerate() {
                    let at = sub * 16;
                    let even = B::add(B::zero(), values[0], broadcast4(&act.qs, at));
                    let odd = B::add(B::zero(), values[1], broadcast4(&act.qs, at + 4));
                    let even = B::add(even, values[2], broadcast4(&act.qs, at + 8));
                    let odd = B::add(odd, values[3], broadcast4(&act.qs, at + 12));
                    let sum = _mm256_add_epi32(B::widen(even), B::widen(odd));
                    scaled[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), scale, scaled[m]);
                }
                if sub % 2 == 1 {
                    // The scales of this sub-block and the one before, one per 16-bit half of
                    // the row's lane: times the two sub-blocks' activation sums, added.
                    let before = _mm256_cvtepi8_epi32(load8(&tile.scales[sub - 1][rows..]));
                    let scales = pair_lanes(before, scale32);
                    for (m, act) in acts.iter().enumerate() {
                        offsets[m] = _mm256_add_epi32(
                            offsets[m],
                            _mm256_madd_epi16(scales, broadcast_pair(&act.bsums, sub - 1)),
                        );
                    }
                }
            }
            let d = f16x8(&tile.d[rows..]);
            // The stored values are offset by 32: subtract 32 · Σ scale · (sum of activations).
            let thirty_two = _mm256_set1_ps(32.0);
            for (m, act) in acts.iter().enumerate() {
                let value = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(offsets[m]), thirty_two, scaled[m]);
                acc[m] = _mm256_fmadd_ps(_mm256_mul_ps(value, d), _mm256_set1_ps(act.d), acc[m]);
            }
        }
    }
}

/// `M` activation rows (`acts`, `M · blocks_per_row` blocks) times the strip whose first tile
/// is `first`, into `out` (`[M][16]`); each tile asks for the one [`super::prefetch_tiles`]
/// ahead, a share of its lines at each sub-block.
#[inline(always)]
unsafe fn rows_product<B: Bytes, const M: usize>(
    tiles: &Tiles,
    first: usize,
    blocks_per_row: usize,
    acts: &[BlockQ8K],
    out: &mut [f32],
) {
    // SAFETY: the module's contract.
    unsafe {
        let mut lanes = [[_mm256_setzero_ps(); M]; 2];
        let ahead = super::prefetch_tiles();
        let mut blocks = [&acts[0]; M];
        match tiles {
            Tiles::Q4K(tiles) => {
                for b in 0..blocks_per_row {
                    for (i, block) in blocks.iter_mut().enumerate() {
                        *block = &acts[i * blocks_per_row + b];
                    }
                    let next = tiles.get(first + b + ahead);
                    q4k_tile::<B, M>(&tiles[first + b], &blocks, &mut lanes, next);
                }
            }
            Tiles::Q6K(tiles) => {
                for b in 0..blocks_per_row {
                    for (i, block) in blocks.iter_mut().enumerate() {
                        *block = &acts[i * blocks_per_row + b];
                    }
                    let next = tiles.get(first + b + ahead);
                    q6k_tile::<B, M>(&tiles[first + b], &blocks, &mut lanes, next);
                }
            }
        }
        for (m, row) in out.chunks_exact_mut(TILE_ROWS).take(M).enumerate() {
            store_f32x8(&mut row[..HALF], lanes[0][m]);
            store_f32x8(&mut row[HALF..], lanes[1][m]);
        }
    }
}

/// [`strip_product`]'s body for one way of summing bytes.
#[inline(always)]
unsafe fn strip_product_with<B: Bytes>(
    tiles: &Tiles,
    strip: usize,
    blocks_per_row: usize,
    activations: &[BlockQ8K],
    m: usize,
    out: &mut [f32],
) {
    for m0 in (0..m).step_by(MAX_ACTIVATION_ROWS) {
        let rows = (m - m0).min(MAX_ACTIVATION_ROWS);
        let acts = &activations[m0 * blocks_per_row..(m0 + rows) * blocks_per_row];
        let out = &mut out[m0 * TILE_ROWS..(m0 + rows) * TILE_ROWS];
        let first = strip * blocks_per_row;
        // SAFETY: the module's contract.
        unsafe {
            match rows {
                1 => rows_product::<B, 1>(tiles, first, blocks_per_row, acts, out),
                2 => rows_product::<B, 2>(tiles, first, blocks_per_row, acts, out),
                3 => rows_product::<B, 3>(tiles, first, blocks_per_row, acts, out),
                4 => rows_product::<B, 4>(tiles, first, blocks_per_row, acts, out),
                5 => rows_product::<B, 5>(tiles, first, blocks_per_row, acts, out),
                6 => rows_product::<B, 6>(tiles, first, blocks_per_row, acts, out),
                7 => rows_product::<B, 7>(tiles, first, blocks_per_row, acts, out),
                _ => rows_product::<B, 8>(tiles, first, blocks_per_row, acts, out),
            }
        }
    }
}

/// A quad's tiles of one superblock unpacked into the prompt kernel's scratch.
trait Unpack<T> {
    /// The largest weight the scratch holds.
    const MAX_WEIGHT: i32;
    /// The activations' sums the correction pairs multiply.
    fn sums(act: &BlockQ8K) -> &[i16];
    /// Unpacks `tiles` (one superblock of each of the quad's strips) into `self`.
    unsafe fn unpack(&mut self, tiles: [&T; QUAD_STRIPS]);
}

impl Unpack<TileQ4K> for Q4KScratch {
    const MAX_WEIGHT: i32 = Q4K_MAX_WEIGHT;

    fn sums(act: &BlockQ8K) -> &[i16] {
        &act.sums32
    }

    #[inline(always)]
    unsafe fn unpack(&mut self, tiles: [&TileQ4K; QUAD_STRIPS]) {
        // SAFETY: the module's contract.
        unsafe {
            let nibble = _mm256_set1_epi8(0x0F);
            for (strip, tile) in tiles.into_iter().enumerate() {
                for half in 0..2 {
                    let rows = half * HALF;
                    for group in 0..QK_K / 8 {
                        let packed = load32(&tile.qs, (group * TILE_ROWS + rows) * 4);
                        // Group `g` holds inputs 8g..8g+4 in its low nibbles and 8g+4..8g+8 in
                        // its high ones: steps 2·(g mod 4) and the one after, of sub-block g / 4.
                        let (sub, step) = (group / 4, 2 * (group % 4));
                        store32(
                            &mut self.weights[sub][step][strip][4 * rows..],
                            _mm256_and_si256(packed, nibble),
                        );
                        store32(
                            &mut self.weights[sub][step + 1][strip][4 * rows..],
                            _mm256_and_si256(_mm256_srli_epi16(packed, 4), nibble),
                        );
                    }
                    let d = f16x8(&tile.d[rows..]);
                    for sub in 0..8 {
                        let scale = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(load8(
                            &tile.scales[sub][rows..],
                        )));
                        store_f32x8(
                            &mut self.scales[sub][strip][rows..],
                            _mm256_mul_ps(scale, d),
                        );
                    }
                    for pair in 0..4 {
                        let low = _mm256_cvtepu8_epi32(load8(&tile.mins[2 * pair][rows..]));
                        let high = _mm256_cvtepu8_epi32(load8(&tile.mins[2 * pair + 1][rows..]));
                        store_i32x8(
                            &mut self.correction_pairs[pair][strip][rows..],
                            pair_lanes(low, high),
                        );
                    }
                    store_f32x8(
                        &mut self.correction_scale[strip][rows..],
                        f16x8(&tile.dmin[rows..]),
                    );
                }
            }
        }
    }
}

impl Unpack<TileQ6K> for Q6KScratch {
    const MAX_WEIGHT: i32 = Q6K_MAX_WEIGHT;

    fn sums(act: &BlockQ8K) -> &[i16] {
        &act.bsums
    }

    #[inline(always)]
    unsafe fn unpack(&mut self, tiles: [&TileQ6K; QUAD_STRIPS]) {
        // SAFETY: the module's contract.
        unsafe {
            for (strip, tile) in tiles.into_iter().enumerate() {
                for half in 0..2 {
                    let rows = half * HALF;
                    for sub in 0..16 {
                        let values = q6k_values(tile, sub, rows);
                        for (step, values) in values.into_iter().enumerate() {
                            store32(&mut self.weights[sub][step][strip][4 * rows..], values);
                        }
                    }
                    let d = f16x8(&tile.d[rows..]);
                    let mut scales = [_mm256_setzero_si256(); 16];
                    for (sub, scale) in scales.iter_mut().enumerate() {
                        *scale = _mm256_cvtepi8_epi32(load8(&tile.scales[sub][rows..]));
                        store_f32x8(
                            &mut self.scales[sub][strip][rows..],
                            _mm256_mul_ps(_mm256_cvtepi32_ps(*scale), d),
                        );
                    }
                    for pair in 0..8 {
                        store_i32x8(
                            &mut self.correction_pairs[pair][strip][rows..],
                            pair_lanes(scales[2 * pair], scales[2 * pair + 1]),
                        );
                    }
                    store_f32x8(
                        &mut self.correction_scale[strip][rows..],
                        _mm256_mul_ps(d, _mm256_set1_ps(32.0)),
                    );
                }
            }
        }
    }
}

/// `R` activation rows times the column vectors `4·group ..+ 4` (8 outputs each: strip
/// `vector / 2`, its rows `8·(vector mod 2) ..+ 8`) of the superblock unpacked in `scratch`,
/// added to `out` when `ADD`, else written over it.
///
/// # Safety
/// The module's contract; when `ADD`, every value of `out` has been written.
#[inline(always)]
unsafe fn quad_rows<
    B: Bytes,
    const R: usize,
    const SUBS: usize,
    const STEPS: usize,
    const PAIRS: usize,
    const ADD: bool,
>(
    scratch: &QuadScratch<SUBS, STEPS, PAIRS>,
    group: usize,
    acts: [&BlockQ8K; R],
    sums: [&[i16]; R],
    max_weight: i32,
    out: &mut [QuadRow<'_>],
) {
    let limit = B::adds(max_weight).clamp(1, STEPS);
    // Which strip and which half of it each of the group's vectors is.
    let place = |c: usize| {
        let vector = COLUMN_VECTORS * group + c;
        (vector / 2, (vector % 2) * HALF)
    };
    // SAFETY: the module's contract, and this function's for `ADD`.
    unsafe {
        let mut scaled = [[_mm256_setzero_ps(); COLUMN_VECTORS]; R];
        for sub in 0..SUBS {
            let mut products = [[_mm256_setzero_si256(); COLUMN_VECTORS]; R];
            let mut partial = [[B::zero(); COLUMN_VECTORS]; R];
            for step in 0..STEPS {
                if step > 0 && step % limit == 0 {
                    for (products, partial) in products.iter_mut().zip(&mut partial) {
                        for (p, q) in products.iter_mut().zip(partial.iter_mut()) {
                            *p = _mm256_add_epi32(*p, B::widen(*q));
                            *q = B::zero();
                        }
                    }
                }
                let mut xs = [_mm256_setzero_si256(); R];
                for (x, act) in xs.iter_mut().zip(&acts) {
                    *x = broadcast4(&act.qs, (sub * STEPS + step) * 4);
                }
                for c in 0..COLUMN_VECTORS {
                    let (strip, rows) = place(c);
                    let w = load32(&scratch.weights[sub][step][strip], 4 * rows);
                    for (partial, &x) in partial.iter_mut().zip(&xs) {
                        partial[c] = B::add(partial[c], w, x);
                    }
                }
            }
            for c in 0..COLUMN_VECTORS {
                let (strip, rows) = place(c);
                let scale = f32x8(&scratch.scales[sub][strip][rows..]);
                for r in 0..R {
                    let sum = _mm256_add_epi32(products[r][c], B::widen(partial[r][c]));
                    scaled[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), scale, scaled[r][c]);
                }
            }
        }
        for (r, (out, scaled)) in out.iter_mut().zip(scaled).enumerate() {
            let act_d = _mm256_set1_ps(acts[r].d);
            for (c, scaled) in scaled.into_iter().enumerate() {
                let (strip, rows) = place(c);
                let mut correction = _mm256_setzero_si256();
                for pair in 0..PAIRS {
                    let factors = i32x8(&scratch.correction_pairs[pair][strip][rows..]);
                    correction = _mm256_add_epi32(
                        correction,
                        _mm256_madd_epi16(factors, broadcast_pair(sums[r], 2 * pair)),
                    );
                }
                let factor = f32x8(&scratch.correction_scale[strip][rows..]);
                let value = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(correction), factor, scaled);
                let lanes = &mut out[strip * TILE_ROWS + rows..][..HALF];
                let before = if ADD {
                    // SAFETY: every value of `out` was written (this function's contract).
                    _mm256_loadu_ps(lanes.as_ptr().cast())
                } else {
                    _mm256_setzero_ps()
                };
                _mm256_storeu_ps(
                    lanes.as_mut_ptr().cast(),
                    _mm256_fmadd_ps(value, act_d, before),
                );
            }
        }
    }
}

/// Every row of `rows` times the superblock unpacked in `scratch` (`acts[i]` is row `i`'s
/// activation block), 2 rows and 4 column vectors at a time.
///
/// # Safety
/// The module's contract; when `ADD`, every value of `rows` has been written.
#[inline(always)]
unsafe fn superblock_rows<
    B: Bytes,
    T,
    const SUBS: usize,
    const STEPS: usize,
    const PAIRS: usize,
    const ADD: bool,
>(
    scratch: &QuadScratch<SUBS, STEPS, PAIRS>,
    acts: &[&BlockQ8K],
    rows: &mut [QuadRow<'_>],
) where
    QuadScratch<SUBS, STEPS, PAIRS>: Unpack<T>,
{
    let max_weight = <QuadScratch<SUBS, STEPS, PAIRS> as Unpack<T>>::MAX_WEIGHT;
    let sums = <QuadScratch<SUBS, STEPS, PAIRS> as Unpack<T>>::sums;
    for group in 0..QUAD_STRIPS * 2 / COLUMN_VECTORS {
        let mut first = 0;
        for rows in rows.chunks_mut(PROMPT_ROWS) {
            // SAFETY: as this function's.
            unsafe {
                if let &[a, b] = &acts[first..first + rows.len()] {
                    quad_rows::<B, 2, SUBS, STEPS, PAIRS, ADD>(
                        scratch,
                        group,
                        [a, b],
                        [sums(a), sums(b)],
                        max_weight,
                        rows,
                    );
                } else {
                    let a = acts[first];
                    quad_rows::<B, 1, SUBS, STEPS, PAIRS, ADD>(
                        scratch,
                        group,
                        [a],
                        [sums(a)],
                        max_weight,
                        rows,
                    );
                }
            }
            first += rows.len();
        }
    }
}

/// [`quad_product`]'s body for one tile type: rows in chunks of at most `PROMPT_CHUNK_ROWS`,
/// superblock by superblock, the quad's tiles unpacked then every row of the chunk; the first
/// superblock writes the outputs and the others add to them (as `super::avx512`'s).
#[inline(always)]
unsafe fn quad_rows_all<B: Bytes, T, const SUBS: usize, const STEPS: usize, const PAIRS: usize>(
    scratch: &mut QuadScratch<SUBS, STEPS, PAIRS>,
    tiles: &[T],
    shape: QuadShape,
    activations: &[BlockQ8K],
    rows: &mut [QuadRow<'_>],
) where
    QuadScratch<SUBS, STEPS, PAIRS>: Unpack<T>,
{
    let QuadShape { blocks_per_row, .. } = shape;
    let m = rows.len();
    let chunk_rows = m.div_ceil(m.div_ceil(PROMPT_CHUNK_ROWS).max(1)).max(1);
    // The chunk's activation blocks of one superblock, as references: indexed through a
    // stride in `superblock_rows` instead, AVX-VNNI prompts read 12% slower (dev builds, 3
    // rounds taking turns: 100.8–102.8 against 114.8–116.5 tokens/s); the one allocation per
    // quad costs nothing measurable.
    let mut acts: Vec<&BlockQ8K> = Vec::with_capacity(chunk_rows);
    for (chunk, rows) in rows.chunks_mut(chunk_rows).enumerate() {
        for b in 0..blocks_per_row {
            let quad_tiles = [0, 1, 2, 3].map(|strip| &tiles[shape.tile(strip, b)]);
            acts.clear();
            acts.extend(
                (0..rows.len())
                    .map(|row| &activations[(chunk * chunk_rows + row) * blocks_per_row + b]),
            );
            // SAFETY: the module's contract; superblock 0 wrote every value of every row of
            // this chunk before the others add (`superblock_rows` takes every row given).
            unsafe {
                scratch.unpack(quad_tiles);
                shape.prefetch_next(tiles, b);
                if b == 0 {
                    superblock_rows::<B, T, SUBS, STEPS, PAIRS, false>(scratch, &acts, rows);
                } else {
                    superblock_rows::<B, T, SUBS, STEPS, PAIRS, true>(scratch, &acts, rows);
                }
            }
        }
    }
}

/// [`quad_product`]'s body for one way of summing bytes.
#[inline(always)]
unsafe fn quad_product_with<B: Bytes>(
    tiles: &Tiles,
    quad: usize,
    blocks_per_row: usize,
    activations: &[BlockQ8K],
    rows: &mut [QuadRow<'_>],
) {
    let shape = QuadShape {
        quad,
        blocks_per_row,
    };
    // SAFETY (both): the module's contract.
    match tiles {
        Tiles::Q4K(tiles) => {
            let mut scratch = Q4K_SCRATCH.take().unwrap_or_else(Q4KScratch::boxed);
            unsafe {
                quad_rows_all::<B, TileQ4K, 8, 8, 4>(&mut scratch, tiles, shape, activations, rows);
            }
            Q4K_SCRATCH.set(Some(scratch));
        }
        Tiles::Q6K(tiles) => {
            let mut scratch = Q6K_SCRATCH.take().unwrap_or_else(Q6KScratch::boxed);
            unsafe {
                quad_rows_all::<B, TileQ6K, 16, 4, 8>(
                    &mut scratch,
                    tiles,
                    shape,
                    activations,
                    rows,
                );
            }
            Q6K_SCRATCH.set(Some(scratch));
        }
    }
}

/// [`super::quantize_blocks`] compiled for AVX2: its loops 8 values an instruction.
///
/// # Safety
/// The CPU must have AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn quantize_row(x: &[f32], blocks: &mut [BlockQ8K]) {
    super::quantize_blocks(x, blocks);
}

/// Outputs `16·strip .. 16·strip + 16` of all `m` activation rows into `out` (`[m][16]`), the
/// byte products by AVX2's `vpmaddubsw`.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C. `activations` holds `m` rows of `blocks_per_row`
/// blocks, the tiles `strip + 1` strips of `blocks_per_row`, and `out` `m · 16` values;
/// otherwise this panics (it never reads out of bounds).
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn strip_product(
    tiles: &Tiles,
    strip: usize,
    blocks_per_row: usize,
    activations: &[BlockQ8K],
    m: usize,
    out: &mut [f32],
) {
    // SAFETY: this function's contract is the module's.
    unsafe { strip_product_with::<Madd>(tiles, strip, blocks_per_row, activations, m, out) }
}

/// [`strip_product`] with AVX-VNNI's `vpdpbusd`.
///
/// # Safety
/// As [`strip_product`]'s, and the CPU must have AVX-VNNI.
#[target_feature(enable = "avx2,fma,f16c,avxvnni")]
pub(super) unsafe fn strip_product_vnni(
    tiles: &Tiles,
    strip: usize,
    blocks_per_row: usize,
    activations: &[BlockQ8K],
    m: usize,
    out: &mut [f32],
) {
    // SAFETY: this function's contract is the module's, with AVX-VNNI.
    unsafe { strip_product_with::<Vnni>(tiles, strip, blocks_per_row, activations, m, out) }
}

/// Outputs `64·quad .. 64·quad + 64` of every activation row written into `rows` (one slice
/// per row; nothing they held is read), on the prompt kernel, the byte products by AVX2's
/// `vpmaddubsw`.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C. `activations` holds `rows.len()` rows of
/// `blocks_per_row` blocks and the tiles `4·quad + 4` strips of `blocks_per_row`; otherwise
/// this panics (it never reads out of bounds).
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn quad_product(
    tiles: &Tiles,
    quad: usize,
    blocks_per_row: usize,
    activations: &[BlockQ8K],
    rows: &mut [QuadRow<'_>],
) {
    // SAFETY: this function's contract is the module's.
    unsafe { quad_product_with::<Madd>(tiles, quad, blocks_per_row, activations, rows) }
}

/// [`quad_product`] with AVX-VNNI's `vpdpbusd`.
///
/// # Safety
/// As [`quad_product`]'s, and the CPU must have AVX-VNNI.
#[target_feature(enable = "avx2,fma,f16c,avxvnni")]
pub(super) unsafe fn quad_product_vnni(
    tiles: &Tiles,
    quad: usize,
    blocks_per_row: usize,
    activations: &[BlockQ8K],
    rows: &mut [QuadRow<'_>],
) {
    // SAFETY: this function's contract is the module's, with AVX-VNNI.
    unsafe { quad_product_with::<Vnni>(tiles, quad, blocks_per_row, activations, rows) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Madd`'s 16-bit sums hold as many products of the largest weights and the largest
    /// activations as `adds` says, exactly, and the kernels ask no more of them (4 adds an
    /// accumulator for Q4_K, 2 for Q6_K).
    #[test]
    fn sixteen_bit_sums_hold_the_adds_they_are_given() {
        if !crate::packed::PackedSimd::Avx2.runs_here() {
            selfrag_testkit::skip(
                selfrag_testkit::Lack::CpuFeatures(&["avx2", "fma", "f16c"]),
                "this CPU lacks AVX2, FMA or F16C",
            );
            return;
        }
        assert!(Madd::adds(Q4K_MAX_WEIGHT) >= 4 && Madd::adds(Q6K_MAX_WEIGHT) >= 2);
        for max_weight in [Q4K_MAX_WEIGHT, Q6K_MAX_WEIGHT] {
            let adds = Madd::adds(max_weight);
            for activation in [-128i8, 127] {
                // SAFETY: this CPU has AVX2 (checked above).
                let lanes: [i32; 8] = unsafe {
                    let weights = _mm256_set1_epi8(i8::try_from(max_weight).unwrap());
                    let acts = _mm256_set1_epi8(activation);
                    let mut acc = Madd::zero();
                    for _ in 0..adds {
                        acc = Madd::add(acc, weights, acts);
                    }
                    std::mem::transmute(Madd::widen(acc))
                };
                let exact = i32::try_from(adds).unwrap() * 4 * max_weight * i32::from(activation);
                assert_eq!(
                    lanes, [exact; 8],
                    "{adds} adds of {max_weight} × {activation}"
                );
            }
        }
    }
}
