//! Products of quantized weights read block by block from the GGUF's own layout, with the
//! activations quantized as llama.cpp quantizes them, for the types where candle's `QMatMul`
//! would quantize them otherwise:
//!
//! - **Q8_0.** candle 0.11 repacks Q8_0 matrices whose inputs are a multiple of 256 on AVX-512
//!   CPUs and quantizes their activations to Q8_K superblocks of 256: one scale for 8 times the
//!   values, 4e-3 from llama.cpp's product on a 256-input matrix and more on wider ones, which
//!   moved a 128-d model's probabilities by 5e-3 from llama-server's. Here they go through
//!   candle's plain kernel (`k_quants::matmul`), which quantizes to blocks of 32 as llama.cpp.
//! - **Q4_1 and Q5_1.** Their activations are Q8_1 blocks, whose `s` (the block's scale times
//!   the sum of its values) multiplies every weight block's minimum. candle computes it in f16
//!   arithmetic from the f16-rounded scale; llama.cpp (`quantize_row_q8_1`,
//!   ggml-cpu/arch/x86/quants.c) rounds the f32 product once. That moved a 64-d model's first
//!   next-token probabilities by up to 3.5e-4 from llama-server's where a last-bit change of
//!   the model's own arithmetic moved them by nothing. Here the activations are quantized as
//!   llama.cpp's x86 code does (scale `max/127`, multiplier `127/max`, rounding half to even)
//!   and multiplied by candle's integer dot products (`GgmlType::vec_dot`). llama.cpp's scalar
//!   and NEON quantizers multiply by `1/d` instead of `127/max`, which can round a value a
//!   step apart where the two differ in the last bit: the x86 code is the reference here, as
//!   the parity tests run it.

use candle_core::quantized::k_quants::{self, BlockQ4_1, BlockQ5_1, BlockQ8_0, BlockQ8_1};
use candle_core::quantized::{GgmlDType, GgmlType, QTensor};
use candle_core::{DType, Result, Tensor};
use half::f16;
use rayon::prelude::*;

/// Values in a Q8_1 block.
const Q8_1_VALUES: usize = 32;
/// Bytes of a Q8_1 block: the f16 scale, the f16 `s`, the 32 values.
const Q8_1_BYTES: usize = 36;
const _: () = assert!(std::mem::size_of::<BlockQ8_1>() == Q8_1_BYTES);
const _: () = assert!(std::mem::align_of::<BlockQ8_1>() <= 2);

/// Whether weights of `dtype` are multiplied here on the CPU rather than by candle's
/// `QMatMul`, and their blocks can be read in place (a whole number of aligned blocks).
pub(crate) fn multiplies(weights: &QTensor) -> Result<bool> {
    match weights.shape().dims() {
        [_, k] if *k > 0 => {}
        _ => return Ok(false),
    }
    // The type first: the bytes are looked at only for the types multiplied here.
    Ok(match weights.dtype() {
        GgmlDType::Q8_0 => crate::mapped::as_blocks::<BlockQ8_0>(&weights.data()?).is_some(),
        GgmlDType::Q4_1 => crate::mapped::as_blocks::<BlockQ4_1>(&weights.data()?).is_some(),
        GgmlDType::Q5_1 => crate::mapped::as_blocks::<BlockQ5_1>(&weights.data()?).is_some(),
        _ => false,
    })
}

/// `x · Wᵀ` for weights `W` (`[n, k]`) of a type [`multiplies`] accepts.
pub(crate) fn forward(weights: &QTensor, x: &Tensor) -> Result<Tensor> {
    let (n, k) = weights.shape().dims2()?;
    let dims = x.dims();
    if dims.last() != Some(&k) {
        candle_core::bail!("a product with a [{n}, {k}] matrix got inputs of shape {dims:?}");
    }
    let m = x.elem_count() / k;
    let lhs = x.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?;
    let bytes = weights.data()?;
    let not_blocks = || {
        candle_core::Error::Msg(format!(
            "{:?} weights not laid out as blocks",
            weights.dtype()
        ))
    };
    let mut out = vec![0f32; m * n];
    match weights.dtype() {
        GgmlDType::Q8_0 => {
            let blocks = crate::mapped::as_blocks::<BlockQ8_0>(&bytes).ok_or_else(not_blocks)?;
            k_quants::matmul((m, k, n), &lhs, blocks, &mut out)?;
        }
        GgmlDType::Q4_1 => {
            let blocks = crate::mapped::as_blocks::<BlockQ4_1>(&bytes).ok_or_else(not_blocks)?;
            q8_1_matmul((m, k, n), &lhs, blocks, &mut out)?;
        }
        GgmlDType::Q5_1 => {
            let blocks = crate::mapped::as_blocks::<BlockQ5_1>(&bytes).ok_or_else(not_blocks)?;
            q8_1_matmul((m, k, n), &lhs, blocks, &mut out)?;
        }
        other => candle_core::bail!("{other:?} weights are multiplied by candle's QMatMul"),
    }
    let mut shape = dims.to_vec();
    if let Some(last) = shape.last_mut() {
        *last = n;
    }
    Tensor::from_vec(out, shape, x.device())
}

/// `out = lhs · rhsᵀ` (`lhs` `[m, k]`, `rhs` `[n, k]` in blocks, `out` `[m, n]`) for weights
/// paired with Q8_1 activations, the rows of `lhs` quantized by [`quantize_row_q8_1`]. The
/// weight rows are shared out over rayon's pool.
fn q8_1_matmul<T: GgmlType<VecDotType = BlockQ8_1>>(
    (m, k, n): (usize, usize, usize),
    lhs: &[f32],
    rhs: &[T],
    out: &mut [f32],
) -> Result<()> {
    if !k.is_multiple_of(Q8_1_VALUES) || lhs.len() != m * k || rhs.len() * Q8_1_VALUES != n * k {
        candle_core::bail!("a [{m}, {k}] by [{n}, {k}] product got mismatched blocks");
    }
    let blocks_per_row = k / Q8_1_VALUES;
    // One byte of slack, so that the blocks can start at an f16's alignment (2) whatever the
    // allocation's; the capacity is never exceeded, so the start stays where it is.
    let mut bytes: Vec<u8> = Vec::with_capacity(m * blocks_per_row * Q8_1_BYTES + 1);
    let start = bytes
        .as_ptr()
        .align_offset(std::mem::align_of::<BlockQ8_1>())
        .min(1);
    bytes.resize(start, 0);
    for row in lhs.chunks_exact(k) {
        quantize_row_q8_1(row, &mut bytes);
    }
    let activations = crate::mapped::as_blocks::<BlockQ8_1>(&bytes[start..])
        .ok_or_else(|| candle_core::Error::Msg("Q8_1 activations not aligned".into()))?;
    // Column-major first (each weight row's products with every input row), then transposed.
    let mut columns = vec![0f32; n * m];
    columns
        .par_chunks_mut(m.max(1))
        .zip(rhs.par_chunks(blocks_per_row.max(1)))
        // A weight row's products take microseconds: tasks of 16 rows keep the pool's own
        // cost out of a decode step's time.
        .with_min_len(16)
        .for_each(|(column, weights)| {
            for (value, input) in column
                .iter_mut()
                .zip(activations.chunks_exact(blocks_per_row))
            {
                *value = T::vec_dot(k, weights, input);
            }
        });
    for (j, column) in columns.chunks_exact(m.max(1)).enumerate() {
        for (i, value) in column.iter().enumerate() {
            out[i * n + j] = *value;
        }
    }
    Ok(())
}

/// Appends `row` (a whole number of 32-value blocks) to `out` as Q8_1 blocks, as llama.cpp's
/// x86 `quantize_row_q8_1` writes them: scale `d = max|x| / 127` stored as f16, values
/// `x · (127 / max|x|)` rounded half to even, and `s = d · Σ values` rounded to f16 once.
fn quantize_row_q8_1(row: &[f32], out: &mut Vec<u8>) {
    for block in row.chunks_exact(Q8_1_VALUES) {
        let max = block.iter().fold(0f32, |max, x| max.max(x.abs()));
        let scale = max / 127.0;
        let multiplier = if max == 0.0 { 0.0 } else { 127.0 / max };
        let values: Vec<i8> = block
            .iter()
            .map(|x| {
                // Within ±127 (a rounded multiple of at most max·127/max): the cast is exact.
                #[allow(clippy::cast_possible_truncation)]
                let value = (x * multiplier).round_ties_even() as i8;
                value
            })
            .collect();
        let sum: i32 = values.iter().map(|v| i32::from(*v)).sum();
        out.extend_from_slice(&f16::from_f32(scale).to_le_bytes());
        #[allow(clippy::cast_precision_loss)]
        out.extend_from_slice(&f16::from_f32(scale * sum as f32).to_le_bytes());
        out.extend(values.iter().map(|v| v.to_le_bytes()[0]));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    /// llama.cpp's product of Q4_1/Q5_1 weights (given dequantized: `d·q + m` per weight,
    /// with the blocks' minimums `mins`) and one input row: per block, `d_w·d_x·Σ q_w·q_x +
    /// m_w·s_x`, with the activations quantized as `quantize_row_q8_1` does. Written from the
    /// definitions, apart from the kernel.
    fn llama_cpp_q8_1_product(
        quantized: &[(f32, f32, Vec<i32>)],
        x: &[f32],
        n: usize,
        k: usize,
    ) -> Vec<f32> {
        let blocks: Vec<(f32, f32, Vec<i32>)> = x
            .chunks(32)
            .map(|block| {
                let max = block.iter().fold(0f32, |m, v| m.max(v.abs()));
                let d = max / 127.0;
                let id = if max == 0.0 { 0.0 } else { 127.0 / max };
                let q: Vec<i32> = block
                    .iter()
                    .map(|v| (v * id).round_ties_even() as i32)
                    .collect();
                let s = half::f16::from_f32(d * q.iter().sum::<i32>() as f32).to_f32();
                (half::f16::from_f32(d).to_f32(), s, q)
            })
            .collect();
        (0..n)
            .map(|row| {
                quantized[row * k / 32..(row + 1) * k / 32]
                    .iter()
                    .zip(&blocks)
                    .map(|((dw, mw, qw), (dx, sx, qx))| {
                        dw * dx * qw.iter().zip(qx).map(|(a, b)| a * b).sum::<i32>() as f32
                            + mw * sx
                    })
                    .sum()
            })
            .collect()
    }

    /// The blocks of `q` (a Q4_1 or Q5_1 tensor) as (scale, minimum, values), read back from
    /// its dequantized weights: each block's smallest weight is its minimum (a value of 0),
    /// and `(w - m) / d` its integer value.
    fn blocks_of(q: &QTensor, dequantized: &[f32], levels: f32) -> Vec<(f32, f32, Vec<i32>)> {
        let bytes = q.data().unwrap();
        let stride = bytes.len() / (dequantized.len() / 32);
        dequantized
            .chunks(32)
            .enumerate()
            .map(|(i, w)| {
                let block = &bytes[i * stride..];
                let d = half::f16::from_le_bytes([block[0], block[1]]).to_f32();
                let m = half::f16::from_le_bytes([block[2], block[3]]).to_f32();
                let values = w
                    .iter()
                    .map(|w| {
                        let v = ((w - m) / d).round();
                        assert!((0.0..levels).contains(&v), "{v}");
                        v as i32
                    })
                    .collect();
                (d, m, values)
            })
            .collect()
    }

    /// llama.cpp's Q8_0 product (`ggml_vec_dot_q8_0_q8_0`) of weights given dequantized:
    /// each input row quantized to blocks of 32 (scale `max|x| / 127` stored as f16, values
    /// rounded), integer products per block.
    fn llama_cpp_q8_0_product(weights: &[f32], x: &[f32], n: usize, k: usize) -> Vec<f32> {
        let blocks: Vec<(f32, Vec<f32>)> = x
            .chunks(32)
            .map(|block| {
                let d = block.iter().fold(0f32, |m, v| m.max(v.abs())) / 127.0;
                let id = if d == 0.0 { 0.0 } else { 1.0 / d };
                let q = block.iter().map(|v| (v * id).round()).collect();
                (half::f16::from_f32(d).to_f32(), q)
            })
            .collect();
        (0..n)
            .map(|row| {
                let w = &weights[row * k..(row + 1) * k];
                blocks
                    .iter()
                    .zip(w.chunks(32))
                    .map(|((d, q), w)| d * w.iter().zip(q).map(|(a, b)| a * b).sum::<f32>())
                    .sum()
            })
            .collect()
    }

    /// `dtype` weights of three shapes, times one and three input rows, against `theirs` (the
    /// quantized tensor, its dequantized weights, an input row) to 1e-5.
    fn products_match(
        dtype: GgmlDType,
        theirs: impl Fn(&QTensor, &[f32], &[f32], usize, usize) -> Vec<f32>,
    ) {
        let device = Device::Cpu;
        for (n, k) in [(48, 64), (64, 256), (32, 1024)] {
            let w: Vec<f32> = (0..n * k)
                .map(|i| ((i * 7919 % 1000) as f32 / 1000.0 - 0.3) * 0.1)
                .collect();
            let w = Tensor::from_vec(w, (n, k), &device).unwrap();
            let q = QTensor::quantize(&w, dtype).unwrap();
            assert!(multiplies(&q).unwrap());
            let dequantized: Vec<f32> = q
                .dequantize(&device)
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1()
                .unwrap();
            for rows in [1, 3] {
                let x: Vec<f32> = (0..rows * k)
                    .map(|i| ((i * 104_729 % 997) as f32 / 997.0 - 0.4) * 3.0)
                    .collect();
                let ours: Vec<f32> = forward(
                    &q,
                    &Tensor::from_vec(x.clone(), (rows, 1, k), &device).unwrap(),
                )
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1()
                .unwrap();
                for (row, x) in x.chunks(k).enumerate() {
                    let theirs = theirs(&q, &dequantized, x, n, k);
                    for (a, b) in ours[row * n..(row + 1) * n].iter().zip(&theirs) {
                        assert!(
                            (a - b).abs() <= 1e-5 * (1.0 + b.abs()),
                            "{dtype:?} {n}x{k}: {a} vs {b}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn q8_0_matrices_multiply_with_llama_cpps_blocks_of_32() {
        products_match(GgmlDType::Q8_0, |_, w, x, n, k| {
            llama_cpp_q8_0_product(w, x, n, k)
        });
    }

    #[test]
    fn q4_1_and_q5_1_matrices_multiply_with_llama_cpps_q8_1_activations() {
        for (dtype, levels) in [(GgmlDType::Q4_1, 16.0), (GgmlDType::Q5_1, 32.0)] {
            products_match(dtype, |q, w, x, n, k| {
                llama_cpp_q8_1_product(&blocks_of(q, w, levels), x, n, k)
            });
        }
    }

    #[test]
    fn the_sum_term_is_the_f32_product_rounded_once_where_candle_rounds_three_times() {
        // A block whose sum (4,063) is odd and above 2,048, where f16 holds only even
        // integers, and whose scale 0.7/127 is not an f16: candle rounds the sum and the scale
        // to f16 before their product, llama.cpp rounds only the product.
        let mut row = vec![0.7f32; 32];
        row[0] = 0.7 * 126.0 / 127.0;
        let mut ours = Vec::new();
        quantize_row_q8_1(&row, &mut ours);
        assert_eq!(ours.len(), Q8_1_BYTES);
        let values: Vec<i32> = ours[4..].iter().map(|b| i32::from(*b as i8)).collect();
        let sum: i32 = values.iter().sum();
        assert_eq!(sum, 126 + 31 * 127);
        let scale = 0.7f32 / 127.0;
        let s = half::f16::from_le_bytes([ours[2], ours[3]]);
        assert_eq!(s, half::f16::from_f32(scale * sum as f32));
        let candle = QTensor::quantize(
            &Tensor::from_vec(row, (1, 32), &Device::Cpu).unwrap(),
            GgmlDType::Q8_1,
        )
        .unwrap()
        .data()
        .unwrap()
        .to_vec();
        assert_eq!(candle[..2], ours[..2], "the same scale");
        assert_eq!(candle[4..], ours[4..], "the same values");
        assert_ne!(candle[2..4], ours[2..4], "another sum term");
    }
}
