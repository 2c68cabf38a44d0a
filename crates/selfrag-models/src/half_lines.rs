//! Lines of f16 values read and written on the CPU: the KV cache's keys and values when it holds
//! them in half precision ([`crate::llama`]'s `CachePrecision::F16`).
//!
//! A decode step's attention reads every filled column of the cache once, so its time is the
//! cache's bytes: at K = 5 on the 8-block 7B-shaped model, about 390 MB a step in f32 and 23% of
//! the step. In f16 the same columns are half the bytes. The products stay f32: each line is
//! widened in registers (`vcvtph2ps`, 16 values an instruction on AVX-512, 8 on AVX2 with F16C)
//! right before it is multiplied, so the only rounding is that of the stored keys and values
//! (relative 2⁻¹¹), as in llama.cpp's default f16 cache, whose products round the query and
//! the weights to f16 as well.
//!
//! [`F16Lines::detect`] says which code the CPU runs. Where it has neither vector path the
//! conversions fall back to `half`'s, and the generator keeps its cache in f32 instead
//! (`CachePrecision::default_for`).
//!
//! This is one of the workspace's five `unsafe` modules (`mapped`, `packed`, `int8`, `strided`,
//! `half_lines`); here: the intrinsics, each called only on the CPU features [`F16Lines::detect`]
//! found.
#![allow(unsafe_code)]

use half::f16;
use half::slice::HalfFloatSliceExt;

use crate::cpu_attention::Head;

/// The vector code that reads and writes f16 lines on this CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum F16Lines {
    /// AVX-512 F (with AVX2, FMA and F16C, as every such CPU has): 16 values an instruction.
    Avx512,
    /// AVX2, FMA and F16C: 8 values an instruction.
    Avx2,
    /// Neither: `half`'s conversions, one line at a time into f32.
    Portable,
}

impl F16Lines {
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
        match F16Lines::detect() {
            // SAFETY: `detect` returns a path only where `runs_here` found its features.
            F16Lines::Avx512 => return unsafe { x86::widen_avx512(src, dst) },
            F16Lines::Avx2 => return unsafe { x86::widen_avx2(src, dst) },
            F16Lines::Portable => {}
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

impl Head<'_, f16> {
    /// Each query's attention into its line of `out` (`queries × head_dim`, zeros), on `lines`.
    /// A column the mask hides is never read.
    pub(crate) fn attend(&self, out: &mut [f32], lines: F16Lines) {
        #[cfg(target_arch = "x86_64")]
        {
            let vector = lines.vectorized() && F16Lines::Avx2.runs_here();
            if lines == F16Lines::Avx512
                && self.head_dim.is_multiple_of(16)
                && F16Lines::Avx512.runs_here()
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
        let (mut key_line, mut value_line) = (vec![0f32; self.head_dim], vec![0f32; self.head_dim]);
        self.attend_with(
            out,
            |query, key| {
                widen(key, &mut key_line);
                query.iter().zip(&key_line).map(|(q, k)| q * k).sum()
            },
            |out, weight, value| {
                widen(value, &mut value_line);
                for (o, v) in out.iter_mut().zip(&value_line) {
                    *o += weight * v;
                }
            },
        );
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

    use half::f16;
    use half::slice::HalfFloatSliceExt;

    use super::Head;

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
    unsafe fn dot_avx2(query: &[f32], key: &[f16]) -> f32 {
        let mut sums: [__m256; 2] = [_mm256_setzero_ps(); 2];
        for (i, (q, k)) in query.chunks_exact(8).zip(key.chunks_exact(8)).enumerate() {
            let k = _mm256_cvtph_ps(unsafe { _mm_loadu_si128(k.as_ptr().cast()) });
            let q = unsafe { _mm256_loadu_ps(q.as_ptr()) };
            sums[i & 1] = _mm256_fmadd_ps(q, k, sums[i & 1]);
        }
        let sum = std::arch::x86_64::_mm256_add_ps(sums[0], sums[1]);
        let half = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps(sum, 1));
        let quarter = _mm_add_ps(half, _mm_movehl_ps(half, half));
        let one = _mm_add_ss(quarter, _mm_shuffle_ps(quarter, quarter, 1));
        _mm_cvtss_f32(one)
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
}

#[cfg(test)]
mod tests {
    use super::*;

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
            if F16Lines::Avx2.runs_here() {
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
