//! Lines of the KV cache's keys and values read and written on the CPU when the cache holds
//! them in f16 or in 8 bits ([`crate::llama`]'s `CachePrecision::F16` and `Q8`).
//!
//! A decode step's attention reads every filled column of the cache once, so its time is the
//! cache's bytes: at K = 5 on the 8-block 7B-shaped model, about 390 MB a step in f32 and 23% of
//! the step. And the cache is most of an answer's memory past the weights: a real 7B's five
//! rows of a K = 5 answer hold 1.84 GB in f32.
//! - **f16**: half the bytes of f32. Each line is widened in registers (`vcvtph2ps`, 16 values
//!   an instruction on AVX-512, 8 on AVX2 with F16C) right before it is multiplied, so the only
//!   rounding is that of the stored keys and values (relative 2⁻¹¹), as in llama.cpp's default
//!   f16 cache, whose products round the query and the weights to f16 as well.
//! - **8 bits** ([`quantize_q8`]): a line is cut into blocks of 32 values, each stored as an
//!   f16 scale and 32 signed bytes, the block's largest magnitude at ±127: llama.cpp's `q8_0`
//!   cache (`-ctk q8_0 -ctv q8_0`), 34 bytes for 32 values, 53% of f16. Each block is widened
//!   in registers (bytes to f32, times its scale) right before it is multiplied; the products
//!   stay f32, where llama.cpp's quantize the query to 8 bits as well.
//!
//! [`CacheSimd::detect`] says which code the CPU runs. Where it has neither vector path the
//! conversions run a line at a time in memory, and the generator keeps its cache in f32 instead
//! (`default_cache_precision`).
//!
//! This is one of the workspace's five `unsafe` modules (`mapped`, `packed`, `int8`, `strided`,
//! `cache_lines`); here: the intrinsics, each called only on the CPU features [`CacheSimd::detect`]
//! found.
#![allow(unsafe_code)]

use half::f16;
use half::slice::HalfFloatSliceExt;

use crate::cpu_attention::{CacheElement, Head};

/// The vector code that reads and writes the cache's f16 and 8-bit lines on this CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CacheSimd {
    /// AVX-512 F (with AVX2, FMA and F16C, as every such CPU has): 16 values an instruction.
    Avx512,
    /// AVX2, FMA and F16C: 8 values an instruction.
    Avx2,
    /// Neither: `half`'s conversions, one line at a time into f32.
    Portable,
}

impl CacheSimd {
    /// What this CPU runs: the widest of the paths [`Self::runs_here`].
    pub(crate) fn detect() -> Self {
        [Self::Avx512, Self::Avx2]
            .into_iter()
            .find(|lines| lines.runs_here())
            .unwrap_or(Self::Portable)
    }

    /// Whether this CPU has every feature the path's code is compiled for (the detection is
    /// cached by the standard library, so this is a few loads). The vector code runs only
    /// where this is true, whatever path a caller asks for.
    pub(crate) fn runs_here(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            let avx2 = std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
                && std::arch::is_x86_feature_detected!("f16c");
            match self {
                Self::Avx512 => avx2 && std::arch::is_x86_feature_detected!("avx512f"),
                Self::Avx2 => avx2,
                Self::Portable => true,
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            self == Self::Portable
        }
    }

    /// Whether lines are read in vector registers, not through a conversion in memory.
    pub(crate) fn vectorized(self) -> bool {
        self != Self::Portable
    }
}

/// `dst[i] = src[i]` widened to f32: 16 or 8 values an instruction where the CPU has AVX-512
/// or F16C (`half`'s own conversion calls a function per 8 values, and was 2.7% of an answer's
/// samples in the prompt passes), `half`'s elsewhere. `src` and `dst` are the same length.
pub(crate) fn widen(src: &[f16], dst: &mut [f32]) {
    let n = src.len().min(dst.len());
    let (src, dst) = (&src[..n], &mut dst[..n]);
    #[cfg(target_arch = "x86_64")]
    {
        match CacheSimd::detect() {
            // SAFETY: `detect` returns a path only where `runs_here` found its features.
            CacheSimd::Avx512 => return unsafe { x86::widen_avx512(src, dst) },
            CacheSimd::Avx2 => return unsafe { x86::widen_avx2(src, dst) },
            CacheSimd::Portable => {}
        }
    }
    src.convert_to_f32_slice(dst);
}

/// `dst[i] = src[i]` rounded to the nearest f16, a magnitude past f16's largest (65504) kept
/// at it: an infinity in the cache would make the prompt passes' products NaN (0 · ∞) where
/// the f32 cache gave a number. `src` and `dst` are the same length (else the shorter's).
pub(crate) fn narrow(src: &[f32], dst: &mut [f16]) {
    let largest = f16::MAX.to_f32();
    let mut clamped = [0f32; 256];
    for (src, dst) in src.chunks(clamped.len()).zip(dst.chunks_mut(clamped.len())) {
        let n = src.len().min(dst.len());
        for (c, &v) in clamped.iter_mut().zip(&src[..n]) {
            *c = v.clamp(-largest, largest);
        }
        dst[..n].convert_from_f32_slice(&clamped[..n]);
    }
}

/// Values of one 8-bit block (llama.cpp's `q8_0`).
pub(crate) const Q8_BLOCK: usize = 32;
/// Bytes of one 8-bit block: its scale (f16 bits, little-endian), then its 32 values (`i8`).
pub(crate) const Q8_BLOCK_BYTES: usize = 2 + Q8_BLOCK;

/// Bytes of an 8-bit line of `head_dim` values; `None` where `head_dim` is not a whole number
/// of blocks (such a model keeps an f16 cache).
pub(crate) fn q8_line_bytes(head_dim: usize) -> Option<usize> {
    head_dim
        .is_multiple_of(Q8_BLOCK)
        .then_some(head_dim / Q8_BLOCK * Q8_BLOCK_BYTES)
}

/// Elements of one cache line of `head_dim` values in a cache tensor of `dtype`: the values
/// themselves in f32 or f16, the bytes of their 8-bit blocks in `u8`; `None` for any other
/// type, or for 8 bits where `head_dim` is not a whole number of blocks. The one definition
/// of a line's width that the cache's allocation, writes and attention share.
pub(crate) fn line_elements(dtype: candle_core::DType, head_dim: usize) -> Option<usize> {
    match dtype {
        candle_core::DType::F32 | candle_core::DType::F16 => Some(head_dim),
        candle_core::DType::U8 => q8_line_bytes(head_dim),
        _ => None,
    }
}

/// `src` (whole blocks of 32 values) stored in 8 bits into `dst` (a block of
/// [`Q8_BLOCK_BYTES`] for each): the block's scale is its largest magnitude over 127, rounded to
/// f16 (and kept at f16's largest past it), and each value is rounded to the nearest multiple
/// of that rounded scale, within ±127. A block of zeros (or of magnitudes below f16's
/// smallest scale) is stored as zeros; NaN as 0. Values past the last whole block are left.
pub(crate) fn quantize_q8(src: &[f32], dst: &mut [u8]) {
    #[cfg(target_arch = "x86_64")]
    if CacheSimd::Avx512.runs_here() {
        // SAFETY: `runs_here` found every feature `x86::quantize_q8_avx512` is compiled for.
        return unsafe { x86::quantize_q8_avx512(src, dst) };
    }
    quantize_q8_blocks(src, dst);
}

/// [`quantize_q8`]'s work, inlined into each caller's instruction set (the crate's baseline,
/// SSE2, rounds 4 values an instruction; AVX-512 16: writing a prompt pass's keys and values
/// was 1.7% of its samples).
#[inline(always)]
fn quantize_q8_blocks(src: &[f32], dst: &mut [u8]) {
    let largest = f16::MAX.to_f32();
    for (values, block) in src
        .chunks_exact(Q8_BLOCK)
        .zip(dst.chunks_exact_mut(Q8_BLOCK_BYTES))
    {
        let (highest, lowest) = crate::int8::extremes(values);
        // Magnitudes: a block of zeros has the scale +0, whatever the zeros' signs.
        let amax = highest.abs().max(lowest.abs());
        let scale = f16::from_f32((amax / 127.0).min(largest));
        let inverse = if scale.to_f32() > 0.0 {
            1.0 / scale.to_f32()
        } else {
            0.0
        };
        let (scale_bytes, quantized) = block.split_at_mut(2);
        scale_bytes.copy_from_slice(&scale.to_le_bytes());
        for (q, &x) in quantized.iter_mut().zip(values) {
            // Within ±127: the byte is the value's two's complement.
            let byte = crate::int8::round_clamped::<-127, 127>(x * inverse).cast_unsigned();
            *q = byte;
        }
    }
}

/// The 8-bit blocks of `src` widened into `dst`: each value times its block's scale. `dst`
/// holds 32 values for each whole block of `src` (else the blocks that fit).
pub(crate) fn dequantize_q8(src: &[u8], dst: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if CacheSimd::Avx512.runs_here() {
        // SAFETY: `runs_here` found every feature `x86::dequantize_q8_avx512` is compiled for.
        return unsafe { x86::dequantize_q8_avx512(src, dst) };
    }
    dequantize_q8_blocks(src, dst);
}

/// [`dequantize_q8`]'s work, inlined into each caller's instruction set.
#[inline(always)]
fn dequantize_q8_blocks(src: &[u8], dst: &mut [f32]) {
    for (block, values) in src
        .chunks_exact(Q8_BLOCK_BYTES)
        .zip(dst.chunks_exact_mut(Q8_BLOCK))
    {
        let scale = f16::from_le_bytes([block[0], block[1]]).to_f32();
        for (v, &q) in values.iter_mut().zip(&block[2..]) {
            *v = scale * f32::from(q.cast_signed());
        }
    }
}

impl Head<'_, u8> {
    /// [`Head::attend`] on an 8-bit cache: each line's bytes are its blocks (see
    /// [`quantize_q8`]). A column the mask hides is never read.
    pub(crate) fn attend(&self, out: &mut [f32], lines: CacheSimd) {
        #[cfg(target_arch = "x86_64")]
        {
            if lines == CacheSimd::Avx512 && CacheSimd::Avx512.runs_here() {
                // SAFETY: the CPU has AVX-512 F and F16C (checked just above).
                return unsafe { x86::attend_q8_avx512(self, out) };
            }
            if lines.vectorized() && CacheSimd::Avx2.runs_here() {
                // SAFETY: the CPU has AVX2, FMA and F16C (checked just above).
                return unsafe { x86::attend_q8_avx2(self, out) };
            }
        }
        let _ = lines;
        self.attend_portable(out);
    }

    /// [`Self::attend`] a line at a time through [`dequantize_q8`].
    fn attend_portable(&self, out: &mut [f32]) {
        self.attend_widened(out, dequantize_q8);
    }
}

impl<E: CacheElement> Head<'_, E> {
    /// [`Head::attend_with`] where each key and value line is first widened into f32 by
    /// `widen_line` (the paths without vector code).
    fn attend_widened(&self, out: &mut [f32], widen_line: impl Fn(&[E], &mut [f32])) {
        let (mut key_line, mut value_line) = (vec![0f32; self.head_dim], vec![0f32; self.head_dim]);
        self.attend_with(
            out,
            |query, key| {
                widen_line(key, &mut key_line);
                query.iter().zip(&key_line).map(|(q, k)| q * k).sum()
            },
            |out, weight, value| {
                widen_line(value, &mut value_line);
                for (o, v) in out.iter_mut().zip(&value_line) {
                    *o += weight * v;
                }
            },
        );
    }
}

impl Head<'_, f16> {
    /// Each query's attention into its line of `out` (`queries × head_dim`, zeros), on `lines`.
    /// A column the mask hides is never read.
    pub(crate) fn attend(&self, out: &mut [f32], lines: CacheSimd) {
        #[cfg(target_arch = "x86_64")]
        {
            let vector = lines.vectorized() && CacheSimd::Avx2.runs_here();
            if lines == CacheSimd::Avx512
                && self.head_dim.is_multiple_of(16)
                && CacheSimd::Avx512.runs_here()
            {
                // SAFETY: the CPU has AVX-512 F (checked just above).
                return unsafe { x86::attend_avx512(self, out) };
            }
            if vector && self.head_dim.is_multiple_of(8) {
                // SAFETY: the CPU has AVX2, FMA and F16C (checked just above).
                return unsafe { x86::attend_avx2(self, out) };
            }
        }
        let _ = lines;
        self.attend_portable(out);
    }

    /// [`Self::attend`] through `half`'s conversions, a line at a time.
    fn attend_portable(&self, out: &mut [f32]) {
        self.attend_widened(out, widen);
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! The vector paths. Each function may be called only on the CPU features it names.
    use std::arch::x86_64::{
        __m256, __m512, _mm_add_ps, _mm_add_ss, _mm_cvtss_f32, _mm_loadu_si128, _mm_movehl_ps,
        _mm_shuffle_ps, _mm256_castps256_ps128, _mm256_cvtph_ps, _mm256_extractf128_ps,
        _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_loadu_si256, _mm256_set1_ps, _mm256_setzero_ps,
        _mm256_storeu_ps, _mm512_cvtph_ps, _mm512_fmadd_ps, _mm512_loadu_ps, _mm512_reduce_add_ps,
        _mm512_set1_ps, _mm512_setzero_ps, _mm512_storeu_ps,
    };

    use std::arch::x86_64::{
        __m128i, _mm_cvtph_ps, _mm_cvtsi32_si128, _mm_loadl_epi64, _mm256_add_ps,
        _mm256_cvtepi8_epi32, _mm256_cvtepi32_ps, _mm512_cvtepi8_epi32, _mm512_cvtepi32_ps,
        _mm512_mul_ps,
    };

    use half::f16;
    use half::slice::HalfFloatSliceExt;

    use super::{Head, Q8_BLOCK, Q8_BLOCK_BYTES};

    /// [`super::quantize_q8`] compiled for AVX-512 F: 16 values an instruction.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn quantize_q8_avx512(src: &[f32], dst: &mut [u8]) {
        super::quantize_q8_blocks(src, dst);
    }

    /// [`super::dequantize_q8`] compiled for AVX-512 F: 16 values an instruction.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn dequantize_q8_avx512(src: &[u8], dst: &mut [f32]) {
        super::dequantize_q8_blocks(src, dst);
    }

    /// [`super::widen`] on AVX-512 F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn widen_avx512(src: &[f16], dst: &mut [f32]) {
        let (src_chunks, src_rest) = src.as_chunks::<16>();
        let (dst_chunks, dst_rest) = dst.as_chunks_mut::<16>();
        for (s, d) in src_chunks.iter().zip(dst_chunks) {
            // SAFETY: whole 16-value chunks of both slices.
            let wide = _mm512_cvtph_ps(unsafe { _mm256_loadu_si256(s.as_ptr().cast()) });
            unsafe { _mm512_storeu_ps(d.as_mut_ptr(), wide) };
        }
        src_rest.convert_to_f32_slice(dst_rest);
    }

    /// [`super::widen`] on AVX2 with F16C.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) unsafe fn widen_avx2(src: &[f16], dst: &mut [f32]) {
        let (src_chunks, src_rest) = src.as_chunks::<8>();
        let (dst_chunks, dst_rest) = dst.as_chunks_mut::<8>();
        for (s, d) in src_chunks.iter().zip(dst_chunks) {
            // SAFETY: whole 8-value chunks of both slices.
            let wide = _mm256_cvtph_ps(unsafe { _mm_loadu_si128(s.as_ptr().cast()) });
            unsafe { _mm256_storeu_ps(d.as_mut_ptr(), wide) };
        }
        src_rest.convert_to_f32_slice(dst_rest);
    }

    /// [`Head::attend`] on AVX-512 F; `head_dim` a multiple of 16.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn attend_avx512(head: &Head<'_, f16>, out: &mut [f32]) {
        head.attend_with(
            out,
            // SAFETY (both): this function runs only on AVX-512 F; every load and store is of
            // a whole 16-value chunk of the slices it reads.
            |query, key| unsafe { dot_avx512(query, key) },
            |out, weight, value| unsafe { add_scaled_avx512(out, weight, value) },
        );
    }

    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn dot_avx512(query: &[f32], key: &[f16]) -> f32 {
        // Two accumulators, so that consecutive multiply-adds do not wait on each other.
        let mut sums: [__m512; 2] = [_mm512_setzero_ps(); 2];
        for (i, (q, k)) in query.chunks_exact(16).zip(key.chunks_exact(16)).enumerate() {
            let k = _mm512_cvtph_ps(unsafe { _mm256_loadu_si256(k.as_ptr().cast()) });
            let q = unsafe { _mm512_loadu_ps(q.as_ptr()) };
            sums[i & 1] = _mm512_fmadd_ps(q, k, sums[i & 1]);
        }
        _mm512_reduce_add_ps(sums[0]) + _mm512_reduce_add_ps(sums[1])
    }

    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn add_scaled_avx512(out: &mut [f32], weight: f32, value: &[f16]) {
        let weight = _mm512_set1_ps(weight);
        for (o, v) in out.chunks_exact_mut(16).zip(value.chunks_exact(16)) {
            let v = _mm512_cvtph_ps(unsafe { _mm256_loadu_si256(v.as_ptr().cast()) });
            let sum = _mm512_fmadd_ps(weight, v, unsafe { _mm512_loadu_ps(o.as_ptr()) });
            unsafe { _mm512_storeu_ps(o.as_mut_ptr(), sum) };
        }
    }

    /// [`Head::attend`] on AVX2 with FMA and F16C; `head_dim` a multiple of 8.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn attend_avx2(head: &Head<'_, f16>, out: &mut [f32]) {
        head.attend_with(
            out,
            // SAFETY (both): this function runs only on AVX2, FMA and F16C; every load and
            // store is of a whole 8-value chunk of the slices it reads.
            |query, key| unsafe { dot_avx2(query, key) },
            |out, weight, value| unsafe { add_scaled_avx2(out, weight, value) },
        );
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    fn sum_lanes_avx2(sum: __m256) -> f32 {
        let half = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps(sum, 1));
        let quarter = _mm_add_ps(half, _mm_movehl_ps(half, half));
        let one = _mm_add_ss(quarter, _mm_shuffle_ps(quarter, quarter, 1));
        _mm_cvtss_f32(one)
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn dot_avx2(query: &[f32], key: &[f16]) -> f32 {
        let mut sums: [__m256; 2] = [_mm256_setzero_ps(); 2];
        for (i, (q, k)) in query.chunks_exact(8).zip(key.chunks_exact(8)).enumerate() {
            let k = _mm256_cvtph_ps(unsafe { _mm_loadu_si128(k.as_ptr().cast()) });
            let q = unsafe { _mm256_loadu_ps(q.as_ptr()) };
            sums[i & 1] = _mm256_fmadd_ps(q, k, sums[i & 1]);
        }
        sum_lanes_avx2(_mm256_add_ps(sums[0], sums[1]))
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn add_scaled_avx2(out: &mut [f32], weight: f32, value: &[f16]) {
        let weight = _mm256_set1_ps(weight);
        for (o, v) in out.chunks_exact_mut(8).zip(value.chunks_exact(8)) {
            let v = _mm256_cvtph_ps(unsafe { _mm_loadu_si128(v.as_ptr().cast()) });
            let sum = _mm256_fmadd_ps(weight, v, unsafe { _mm256_loadu_ps(o.as_ptr()) });
            unsafe { _mm256_storeu_ps(o.as_mut_ptr(), sum) };
        }
    }

    /// The scale of an 8-bit block (its first two bytes), widened.
    #[target_feature(enable = "f16c")]
    #[inline]
    fn block_scale(block: &[u8]) -> f32 {
        let bits = i32::from(u16::from_le_bytes([block[0], block[1]]));
        _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(bits)))
    }

    /// The 32 values of an 8-bit block of [`Q8_BLOCK_BYTES`] bytes as f32 lanes, unscaled.
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn block_values_avx512(block: &[u8]) -> [__m512; 2] {
        debug_assert_eq!(block.len(), Q8_BLOCK_BYTES);
        // SAFETY: 16 bytes at 2 and at 18 of a block of 34.
        let (low, high): (__m128i, __m128i) = unsafe {
            (
                _mm_loadu_si128(block[2..].as_ptr().cast()),
                _mm_loadu_si128(block[18..].as_ptr().cast()),
            )
        };
        [
            _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(low)),
            _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(high)),
        ]
    }

    /// [`Head::attend`] on an 8-bit cache, on AVX-512 F with F16C.
    #[target_feature(enable = "avx512f,avx2,fma,f16c")]
    pub(super) unsafe fn attend_q8_avx512(head: &Head<'_, u8>, out: &mut [f32]) {
        head.attend_with(
            out,
            // SAFETY (both): this function runs only on AVX-512 F and F16C; every load and
            // store is of a whole block of the slices it reads.
            |query, key| unsafe { dot_q8_avx512(query, key) },
            |out, weight, value| unsafe { add_scaled_q8_avx512(out, weight, value) },
        );
    }

    #[target_feature(enable = "avx512f,avx2,fma,f16c")]
    #[inline]
    unsafe fn dot_q8_avx512(query: &[f32], key: &[u8]) -> f32 {
        let mut sum = _mm512_setzero_ps();
        for (q, block) in query
            .chunks_exact(Q8_BLOCK)
            .zip(key.chunks_exact(Q8_BLOCK_BYTES))
        {
            let [k0, k1] = unsafe { block_values_avx512(block) };
            // SAFETY: 16 values at 0 and at 16 of a chunk of 32.
            let (q0, q1) = unsafe {
                (
                    _mm512_loadu_ps(q.as_ptr()),
                    _mm512_loadu_ps(q[16..].as_ptr()),
                )
            };
            let block_sum = _mm512_fmadd_ps(q1, k1, _mm512_mul_ps(q0, k0));
            sum = _mm512_fmadd_ps(block_sum, _mm512_set1_ps(block_scale(block)), sum);
        }
        _mm512_reduce_add_ps(sum)
    }

    #[target_feature(enable = "avx512f,avx2,fma,f16c")]
    #[inline]
    unsafe fn add_scaled_q8_avx512(out: &mut [f32], weight: f32, value: &[u8]) {
        for (o, block) in out
            .chunks_exact_mut(Q8_BLOCK)
            .zip(value.chunks_exact(Q8_BLOCK_BYTES))
        {
            let weight = _mm512_set1_ps(weight * block_scale(block));
            let [v0, v1] = unsafe { block_values_avx512(block) };
            // SAFETY: 16 values at 0 and at 16 of a chunk of 32.
            unsafe {
                let (o0, o1) = (o.as_mut_ptr(), o[16..].as_mut_ptr());
                _mm512_storeu_ps(o0, _mm512_fmadd_ps(weight, v0, _mm512_loadu_ps(o0)));
                _mm512_storeu_ps(o1, _mm512_fmadd_ps(weight, v1, _mm512_loadu_ps(o1)));
            }
        }
    }

    /// The 32 values of an 8-bit block as four vectors of 8 f32 lanes, unscaled.
    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn block_values_avx2(block: &[u8]) -> [__m256; 4] {
        debug_assert_eq!(block.len(), Q8_BLOCK_BYTES);
        // SAFETY: 8 bytes at 2, 10, 18 and 26 of a block of 34.
        std::array::from_fn(|i| {
            let bytes = unsafe { _mm_loadl_epi64(block[2 + 8 * i..].as_ptr().cast()) };
            _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes))
        })
    }

    /// [`Head::attend`] on an 8-bit cache, on AVX2 with FMA and F16C.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn attend_q8_avx2(head: &Head<'_, u8>, out: &mut [f32]) {
        head.attend_with(
            out,
            // SAFETY (both): this function runs only on AVX2, FMA and F16C; every load and
            // store is of a whole block of the slices it reads.
            |query, key| unsafe { dot_q8_avx2(query, key) },
            |out, weight, value| unsafe { add_scaled_q8_avx2(out, weight, value) },
        );
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn dot_q8_avx2(query: &[f32], key: &[u8]) -> f32 {
        let mut sum = _mm256_setzero_ps();
        for (q, block) in query
            .chunks_exact(Q8_BLOCK)
            .zip(key.chunks_exact(Q8_BLOCK_BYTES))
        {
            let k = unsafe { block_values_avx2(block) };
            let mut block_sum = _mm256_setzero_ps();
            for (i, k) in k.into_iter().enumerate() {
                // SAFETY: 8 values at 0, 8, 16 and 24 of a chunk of 32.
                let q = unsafe { _mm256_loadu_ps(q[8 * i..].as_ptr()) };
                block_sum = _mm256_fmadd_ps(q, k, block_sum);
            }
            sum = _mm256_fmadd_ps(block_sum, _mm256_set1_ps(block_scale(block)), sum);
        }
        sum_lanes_avx2(sum)
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn add_scaled_q8_avx2(out: &mut [f32], weight: f32, value: &[u8]) {
        for (o, block) in out
            .chunks_exact_mut(Q8_BLOCK)
            .zip(value.chunks_exact(Q8_BLOCK_BYTES))
        {
            let weight = _mm256_set1_ps(weight * block_scale(block));
            let v = unsafe { block_values_avx2(block) };
            for (i, v) in v.into_iter().enumerate() {
                // SAFETY: 8 values at 0, 8, 16 and 24 of a chunk of 32.
                unsafe {
                    let o = o[8 * i..].as_mut_ptr();
                    _mm256_storeu_ps(o, _mm256_fmadd_ps(weight, v, _mm256_loadu_ps(o)));
                }
            }
        }
    }
}

/// `cache` (`[.., head_dim]` f32, `head_dim` a whole number of blocks) as an 8-bit cache
/// (`[.., line bytes]` u8) and as the f32 values that cache holds, for tests against candle.
#[cfg(test)]
pub(crate) fn q8_cache(cache: &candle_core::Tensor) -> (candle_core::Tensor, candle_core::Tensor) {
    let dims = cache.dims().to_vec();
    let head_dim = dims[dims.len() - 1];
    let line = q8_line_bytes(head_dim).unwrap();
    let values: Vec<f32> = cache.flatten_all().unwrap().to_vec1().unwrap();
    let mut bytes = vec![0u8; values.len() / head_dim * line];
    quantize_q8(&values, &mut bytes);
    let mut widened = vec![0f32; values.len()];
    dequantize_q8(&bytes, &mut widened);
    let mut byte_dims = dims.clone();
    byte_dims[dims.len() - 1] = line;
    (
        candle_core::Tensor::from_vec(bytes, byte_dims, cache.device()).unwrap(),
        candle_core::Tensor::from_vec(widened, dims, cache.device()).unwrap(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_8_bit_blocks_are_the_same_bytes_on_every_path() {
        let mut values: Vec<f32> = crate::test_values::uniform(32 * 7, 3)
            .into_iter()
            .map(|v| v * 5.0)
            .collect();
        // A block of a value at a half step, an infinity with a NaN, and one of zeros.
        values[..32].fill(0.25);
        values[0] = 127.0 * 0.25;
        (values[40], values[41]) = (f32::INFINITY, f32::NAN);
        values[64..96].fill(0.0);
        let mut bytes = vec![0u8; 7 * Q8_BLOCK_BYTES];
        quantize_q8(&values, &mut bytes);
        let mut baseline = vec![0u8; bytes.len()];
        quantize_q8_blocks(&values, &mut baseline);
        assert_eq!(bytes, baseline);
        let mut widened = vec![0f32; values.len()];
        dequantize_q8(&bytes, &mut widened);
        let mut baseline = vec![0f32; values.len()];
        dequantize_q8_blocks(&bytes, &mut baseline);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&widened), bits(&baseline));
    }

    #[test]
    fn an_8_bit_block_keeps_each_value_within_half_its_scale() {
        // Two blocks of ordinary values, one of zeros, one with an infinity and a NaN, one of
        // values too small for f16's smallest scale, one past f16's largest scale.
        let mut values: Vec<f32> = crate::test_values::uniform(64, 9)
            .into_iter()
            .map(|v| v * 3.0)
            .collect();
        values.extend([0.0; 32]);
        let mut special = vec![0.5f32; 32];
        special[3] = f32::INFINITY;
        special[4] = f32::NAN;
        special[5] = -1.0;
        values.extend(&special);
        values.extend([1e-12f32; 32]);
        let mut huge = vec![1.0f32; 32];
        huge[0] = -1e9;
        values.extend(&huge);
        assert_eq!(q8_line_bytes(values.len()), Some(6 * Q8_BLOCK_BYTES));
        assert_eq!(q8_line_bytes(16), None);
        let mut bytes = vec![0u8; 6 * Q8_BLOCK_BYTES];
        quantize_q8(&values, &mut bytes);
        let mut back = vec![0f32; values.len()];
        dequantize_q8(&bytes, &mut back);
        let scale = |b: usize| f16::from_le_bytes([bytes[b * 34], bytes[b * 34 + 1]]).to_f32();
        for b in 0..2 {
            let block = &values[b * 32..][..32];
            let amax = block.iter().fold(0f32, |m, x| m.max(x.abs()));
            // The scale is the largest magnitude over 127, rounded to f16.
            assert_eq!(scale(b), f16::from_f32(amax / 127.0).to_f32());
            for (v, w) in block.iter().zip(&back[b * 32..]) {
                assert!((v - w).abs() <= scale(b) / 2.0 * 1.0001, "{v} as {w}");
            }
            // The largest magnitude is ±127 steps (or within one step of the f16 scale's
            // rounding).
            let largest = bytes[b * 34 + 2..][..32]
                .iter()
                .map(|&q| i32::from(q.cast_signed()).abs())
                .max();
            assert!(matches!(largest, Some(126 | 127)), "{largest:?}");
        }
        assert!(back[64..96].iter().all(|&v| v == 0.0), "zeros");
        // The infinity is kept at the largest step, the NaN is 0, the rest in steps of it.
        let step = scale(3);
        assert_eq!(step, f16::MAX.to_f32());
        assert_eq!(back[96 + 3], 127.0 * step);
        assert_eq!(back[96 + 4], 0.0);
        assert_eq!(back[96 + 5], 0.0, "-1 is 0 steps of 65504");
        assert!(
            back[128..160].iter().all(|&v| v == 0.0),
            "below f16's smallest scale"
        );
        // Past f16's largest scale: the scale is kept at 65504 and the value at 127 steps.
        assert_eq!(scale(5), f16::MAX.to_f32());
        assert_eq!(back[160], -127.0 * f16::MAX.to_f32());
    }

    #[test]
    fn widening_is_exact_on_every_path_for_any_length() {
        // Normal values of both signs, subnormals, zeros, infinities and a NaN.
        let specials = [
            0.0,
            -0.0,
            1e-7,
            -3e-6,
            65504.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
        ];
        let values: Vec<f16> = crate::test_values::uniform(37, 3)
            .into_iter()
            .map(|v| v * 300.0)
            .chain(specials)
            .chain([f32::NAN])
            .map(f16::from_f32)
            .collect();
        for len in 0..values.len() {
            let src = &values[..len];
            let expected: Vec<f32> = src.iter().map(|v| v.to_f32()).collect();
            let mut ours = vec![7f32; len];
            widen(src, &mut ours);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&ours), bits(&expected), "{len} values");
            #[cfg(target_arch = "x86_64")]
            if CacheSimd::Avx2.runs_here() {
                let mut avx2 = vec![7f32; len];
                // SAFETY: the CPU has AVX2 and F16C (checked just above).
                unsafe { x86::widen_avx2(src, &mut avx2) };
                assert_eq!(bits(&avx2), bits(&expected), "AVX2, {len} values");
            }
        }
        // Narrowed: rounded to the nearest f16, and past f16's range kept at its largest.
        let wide = [
            1.0f32,
            -2.5e-8,
            70000.0,
            -1e9,
            65504.0,
            f32::INFINITY,
            1.2345,
        ];
        let mut half = [f16::ZERO; 7];
        narrow(&wide, &mut half);
        let expected = [1.0, -2.5e-8, 65504.0, -65504.0, 65504.0, 65504.0, 1.2345];
        for (h, e) in half.iter().zip(expected) {
            assert_eq!(*h, f16::from_f32(e));
        }
        let mut long = vec![f16::ZERO; 600];
        narrow(&vec![2.0; 600], &mut long);
        assert!(
            long.iter().all(|&h| h == f16::from_f32(2.0)),
            "past one chunk"
        );
        // Slices of different lengths: the shorter one's length is converted.
        let mut short = [0f32; 3];
        widen(&values[..10], &mut short);
        assert_eq!(short[2], values[2].to_f32());
    }
}
