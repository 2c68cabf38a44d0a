//! Deterministic pseudo-random values for the SIMD kernels' unit tests: a 64-bit linear
//! congruential generator, so a failing case reproduces from its seed.

/// `count` values spread over `-1.0..1.0`, the same for the same `seed`.
pub(crate) fn uniform(count: usize, seed: u64) -> Vec<f32> {
    let mut state = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
    (0..count)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            #[allow(clippy::cast_precision_loss)]
            let unit = (state >> 40) as f32 / (1u64 << 24) as f32;
            unit * 2.0 - 1.0
        })
        .collect()
}
