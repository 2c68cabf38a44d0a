//! A benchmark, not a test: one matrix-vector product (a decode step's product of one row) per
//! weight type, on a 4096 × 4096 matrix of Llama-7B's width, with candle's `QMatMul` (what the
//! generator uses for every type but Q8_0 and, on CPUs with AVX-512 VNNI, Q4_K and Q6_K) and
//! candle's plain kernel (what it uses for Q8_0), against the rate at which this machine reads
//! memory. A decode step reads every weight once, so a type whose product already reads its
//! weights at about that rate gains nothing from packed tiles of its own; this crate's tiles
//! (`packed`) pay for Q4_K and Q6_K because candle's copies of those are larger than the file's.
//!
//! `cargo run --release -p selfrag-models --example matvec_by_type` (the example alone; or
//! through the workspace: `cargo run --release --example matvec_by_type`).

// A benchmark prints its table.
#![allow(clippy::print_stdout, clippy::unwrap_used, unsafe_code)]

use std::time::Instant;

use candle_core::quantized::{GgmlDType, QMatMul, QTensor, k_quants};
use candle_core::{Device, Module, Tensor};

const N: usize = 4096;
const K: usize = 4096;
const REPEATS: usize = 50;
/// Copies of the matrix multiplied in turn, so that each product reads its weights from memory
/// rather than from the last-level cache (8 × 9.4 MB for Q4_K).
const COPIES: usize = 8;

/// The mean of `REPEATS` rounds of `product` over the copies, in seconds per product.
fn mean(mut product: impl FnMut(usize)) -> f64 {
    (0..COPIES).for_each(&mut product);
    let start = Instant::now();
    for _ in 0..REPEATS {
        (0..COPIES).for_each(&mut product);
    }
    start.elapsed().as_secs_f64() / (REPEATS * COPIES) as f64
}

/// `weights`' blocks of `T`, copied out of its bytes (candle's block types are `repr(C)`
/// integers and f16s, valid for every bit pattern).
fn blocks<T: k_quants::GgmlType>(weights: &QTensor) -> Vec<T> {
    let bytes = weights.data().unwrap();
    let count = bytes.len() / std::mem::size_of::<T>();
    let mut out: Vec<T> = Vec::with_capacity(count);
    // SAFETY: `out` has room for `count` blocks, `bytes` holds at least that many bytes, and
    // every bit pattern is a valid block.
    unsafe {
        std::ptr::copy_nonoverlapping(
            bytes.as_ptr(),
            out.as_mut_ptr().cast::<u8>(),
            count * std::mem::size_of::<T>(),
        );
        out.set_len(count);
    }
    out
}

/// Seconds of one product by candle's plain kernel for `dtype`, or `None` for a float type.
fn plain(dtype: GgmlDType, weights: &[QTensor], x: &[f32]) -> Option<f64> {
    let mut out = vec![0f32; N];
    macro_rules! time {
        ($block:ty) => {{
            let b: Vec<Vec<$block>> = weights.iter().map(blocks::<$block>).collect();
            Some(mean(|i| {
                k_quants::matmul((1, K, N), x, &b[i], &mut out).unwrap();
            }))
        }};
    }
    match dtype {
        GgmlDType::Q4_0 => time!(k_quants::BlockQ4_0),
        GgmlDType::Q4_1 => time!(k_quants::BlockQ4_1),
        GgmlDType::Q5_0 => time!(k_quants::BlockQ5_0),
        GgmlDType::Q5_1 => time!(k_quants::BlockQ5_1),
        GgmlDType::Q8_0 => time!(k_quants::BlockQ8_0),
        GgmlDType::Q4K => time!(k_quants::BlockQ4K),
        GgmlDType::Q5K => time!(k_quants::BlockQ5K),
        GgmlDType::Q6K => time!(k_quants::BlockQ6K),
        _ => None,
    }
}

fn main() {
    let device = Device::Cpu;
    let threads = rayon::current_num_threads();
    let memory = selfrag_models::read_rate(256 << 20, threads, 3).unwrap_or(f64::NAN);
    println!(
        "{N}×{K} matrix times one row, {COPIES} copies in turn, mean of {REPEATS} rounds; this machine reads memory at {:.1} GB/s on {threads} threads",
        memory / 1e9
    );
    println!("| type | bits/weight | QMatMul µs | GB/s | plain kernel µs | GB/s |");
    println!("|---|---|---|---|---|---|");
    let w: Vec<f32> = (0..N * K)
        .map(|i| ((i * 7919 % 1000) as f32 / 1000.0 - 0.5) * 0.1)
        .collect();
    let w = Tensor::from_vec(w, (N, K), &device).unwrap();
    let x: Vec<f32> = (0..K)
        .map(|i| ((i * 104_729 % 997) as f32 / 997.0 - 0.5) * 3.0)
        .collect();
    let row = Tensor::from_vec(x.clone(), (1, K), &device).unwrap();
    for dtype in [
        GgmlDType::Q4_0,
        GgmlDType::Q4_1,
        GgmlDType::Q5_0,
        GgmlDType::Q5_1,
        GgmlDType::Q8_0,
        GgmlDType::Q4K,
        GgmlDType::Q5K,
        GgmlDType::Q6K,
    ] {
        let weights: Vec<QTensor> = (0..COPIES)
            .map(|_| QTensor::quantize(&w, dtype).unwrap())
            .collect();
        let bytes = weights[0].storage_size_in_bytes() as f64;
        let bits = bytes * 8.0 / (N * K) as f64;
        let plain = plain(dtype, &weights, &x);
        let matmuls: Vec<QMatMul> = weights
            .into_iter()
            .map(|w| QMatMul::from_qtensor(w).unwrap())
            .collect();
        let candle = mean(|i| {
            matmuls[i].forward(&row).unwrap();
        });
        let plain = plain.map_or_else(
            || "–".to_owned(),
            |s| format!("{:.0} | {:.1}", s * 1e6, bytes / s / 1e9),
        );
        println!(
            "| {dtype:?} | {bits:.2} | {:.0} | {:.1} | {plain} |",
            candle * 1e6,
            bytes / candle / 1e9
        );
    }
}
