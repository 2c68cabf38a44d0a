//! `FusedBert`: BERT's encoder for the CPU, built on candle's matmuls with the element-wise work
//! between them fused into single passes.
//!
//! candle-transformers' `BertModel` computes the same function one candle op at a time: every
//! bias add, residual add, scale, mask, softmax and activation is its own pass over a freshly
//! allocated tensor, and the attention of all rows and heads is one batched matmul split between
//! threads piece by tiny piece. On the CPU that made the passes and the attention 40% of an
//! embedding. Here a layer is four large matmuls (query, key and value as one) with fused passes
//! in place between them, and the attention runs row by row, the rows in parallel:
//! - `QkvBias`: the query/key/value biases, and the 1/√d attention scale on the queries;
//! - `softmax`: the attention softmax, over one row's real tokens only;
//! - `BiasResidualNorm`: a projection's bias, the residual and the LayerNorm;
//! - `BiasActivation`: the feed-forward bias and GELU (or ReLU).
//!
//! A pass carries no padding: its rows' tokens lie end to end (as many `hidden`-wide lines as
//! the rows have tokens in all), so the projections, which are nearly all of the work,
//! multiply only real tokens however unequal the rows, and only the attention looks at where a
//! row ends.
//!
//! The passes run on rayon's pool, as the matmuls do, and their hot loops are compiled for the
//! CPU's vector width through `pulp` (runtime dispatch, safe code); `exp` and `erf` are written
//! out so that those loops vectorise.
//!
//! The four projections of a layer are f32 matrices for candle's matmul, or int8 ones
//! multiplied in `int8` (`EmbedderPrecision::Int8` on a CPU with AVX-512 VNNI): `Projection`.
//!
//! The weights are read by candle-nn's own loaders under the names `BertModel` uses, so every
//! checkpoint that loads there loads here; the tests hold the two to the same outputs. The word
//! table of a safetensors file is read in place from its map (`WordEmbeddings`). CUDA and
//! Metal keep `BertModel` (`BertEmbedder` chooses): these passes are CPU code.

use candle_core::{
    CpuStorage, InplaceOp1, InplaceOp2, Layout, Module, Result, Storage, Tensor, bail,
};
use candle_nn::{Embedding, LayerNorm, VarBuilder};
use candle_transformers::models::bert::{Config, HiddenAct};
use rayon::prelude::*;
use selfrag_core::EmbedderPrecision;

use std::sync::Arc;

use memmap2::Mmap;

use crate::int8::Int8Matrix;
use crate::mapped::MappedTable;
use crate::strided::{View, strided_matmul};

/// BERT's encoder (embeddings and layers, no pooler) with fused element-wise passes.
pub(crate) struct FusedBert {
    word_embeddings: WordEmbeddings,
    /// `max_position_embeddings × hidden` absolute positions.
    position_embeddings: Tensor,
    /// Row 0 of the token-type table: every embedded text is one segment.
    token_type: Tensor,
    embedding_norm: LayerNorm,
    layers: Vec<FusedLayer>,
    hidden: usize,
    /// The precision the projections run in (f32 where int8 was asked for but cannot run).
    precision: EmbedderPrecision,
}

/// The word-embedding table: read in place from the mapped weights file where it was loaded
/// from one ([`MappedTable`]), else copied out like the other weights.
enum WordEmbeddings {
    Mapped(MappedTable),
    Copied(Embedding),
}

impl WordEmbeddings {
    /// The rows of `ids` (`rows × width`, u32) as `rows × width × hidden`.
    fn forward(&self, ids: &Tensor) -> Result<Tensor> {
        match self {
            Self::Copied(table) => table.forward(ids),
            Self::Mapped(table) => {
                let (rows, width) = ids.dims2()?;
                let values = table.rows_of(&ids.flatten_all()?.to_vec1::<u32>()?)?;
                Tensor::from_vec(values, (rows, width, table.cols()), ids.device())
            }
        }
    }
}

/// A linear layer's weight (`out × in`), multiplied as `x · Wᵀ`.
enum Projection {
    F32(Tensor),
    Int8(Int8Matrix),
}

impl Projection {
    /// `weight` in `precision`, or in f32 where the int8 products cannot run on this CPU.
    fn new(weight: Tensor, precision: EmbedderPrecision) -> Result<Self> {
        Ok(match precision {
            EmbedderPrecision::Int8 => match Int8Matrix::quantize(&weight)? {
                Some(matrix) => Self::Int8(matrix),
                None => Self::F32(weight),
            },
            EmbedderPrecision::F32 => Self::F32(weight),
        })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        match self {
            Self::F32(weight) => x.matmul(&weight.t()?),
            Self::Int8(matrix) => matrix.forward(x),
        }
    }

    fn precision(&self) -> EmbedderPrecision {
        match self {
            Self::F32(_) => EmbedderPrecision::F32,
            Self::Int8(_) => EmbedderPrecision::Int8,
        }
    }
}

struct FusedLayer {
    /// Query, key and value projections stacked: `3·hidden × hidden`.
    qkv: Projection,
    /// The three biases in the same order.
    qkv_bias: Vec<f32>,
    attention_output: Projection,
    attention_norm: BiasResidualNorm,
    intermediate: Projection,
    intermediate_activation: BiasActivation,
    output: Projection,
    output_norm: BiasResidualNorm,
    heads: usize,
}

fn load_linear(vb: &VarBuilder, in_dim: usize, out_dim: usize) -> Result<(Tensor, Vec<f32>)> {
    let linear = candle_nn::linear(in_dim, out_dim, vb.clone())?;
    let bias = match linear.bias() {
        Some(bias) => bias.to_vec1::<f32>()?,
        None => bail!("{}: a BERT projection without a bias", vb.prefix()),
    };
    Ok((linear.weight().clone(), bias))
}

fn load_norm(vb: &VarBuilder, size: usize, eps: f64, bias: Vec<f32>) -> Result<BiasResidualNorm> {
    let norm = candle_nn::layer_norm(size, eps, vb.clone())?;
    let beta = match norm.bias() {
        Some(beta) => beta.to_vec1::<f32>()?,
        None => vec![0.0; size],
    };
    Ok(BiasResidualNorm {
        bias,
        gamma: norm.weight().to_vec1::<f32>()?,
        beta,
        eps: eps as f32,
    })
}

impl FusedLayer {
    fn load(vb: &VarBuilder, config: &Config, precision: EmbedderPrecision) -> Result<Self> {
        let (h, i) = (config.hidden_size, config.intermediate_size);
        let eps = config.layer_norm_eps;
        let mut weights = Vec::with_capacity(3);
        let mut qkv_bias = Vec::with_capacity(3 * h);
        for name in ["query", "key", "value"] {
            let (weight, bias) = load_linear(&vb.pp("attention.self").pp(name), h, h)?;
            weights.push(weight);
            qkv_bias.extend(bias);
        }
        let (attention_output_weight, attention_output_bias) =
            load_linear(&vb.pp("attention.output.dense"), h, h)?;
        let attention_norm = load_norm(
            &vb.pp("attention.output.LayerNorm"),
            h,
            eps,
            attention_output_bias,
        )?;
        let (intermediate_weight, intermediate_bias) =
            load_linear(&vb.pp("intermediate.dense"), h, i)?;
        let (output_weight, output_bias) = load_linear(&vb.pp("output.dense"), i, h)?;
        let output_norm = load_norm(&vb.pp("output.LayerNorm"), h, eps, output_bias)?;
        Ok(Self {
            qkv: Projection::new(Tensor::cat(&weights, 0)?, precision)?,
            qkv_bias,
            attention_output: Projection::new(attention_output_weight, precision)?,
            attention_norm,
            intermediate: Projection::new(intermediate_weight, precision)?,
            intermediate_activation: BiasActivation {
                bias: intermediate_bias,
                activation: config.hidden_act,
            },
            output: Projection::new(output_weight, precision)?,
            output_norm,
            heads: config.num_attention_heads,
        })
    }

    /// One layer on `hidden` (`Σ lengths × hidden`): row `r`'s `lengths[r]` tokens follow
    /// row `r - 1`'s.
    fn forward(&self, hidden: &Tensor, lengths: &[usize]) -> Result<Tensor> {
        let qkv = self.qkv.forward(hidden)?;
        qkv.inplace_op1(&QkvBias {
            bias: &self.qkv_bias,
            heads: self.heads,
        })?;
        let context = self.attend(&qkv, lengths)?;
        let attended = self.attention_output.forward(&context)?;
        attended.inplace_op2(hidden, &self.attention_norm)?;
        let intermediate = self.intermediate.forward(&attended)?;
        intermediate.inplace_op1(&self.intermediate_activation)?;
        let output = self.output.forward(&intermediate)?;
        output.inplace_op2(&attended, &self.output_norm)?;
        Ok(output)
    }
}

impl FusedLayer {
    /// Each row's self-attention over its own tokens, from `qkv` (`Σ lengths × 3·hidden`,
    /// queries scaled, rows end to end): the `Σ lengths × hidden` context.
    ///
    /// Row by row, the rows in parallel: one row's attention is a few small products, too small
    /// to split between threads. Each head multiplies its queries, keys and values where they
    /// lie in `qkv` (`strided`: no copies).
    fn attend(&self, qkv: &Tensor, lengths: &[usize]) -> Result<Tensor> {
        let (tokens, packed) = qkv.dims2()?;
        let size = packed / 3;
        let head_dim = size / self.heads;
        let (storage, layout) = qkv.storage_and_layout();
        let Storage::Cpu(storage) = &*storage else {
            bail!("bert attention: the projections are not on the CPU");
        };
        let qkv = f32_slice(storage, layout, "bert attention")?;
        if tokens != lengths.iter().sum::<usize>() {
            bail!(
                "bert attention: {tokens} tokens for rows of {} in all",
                lengths.iter().sum::<usize>()
            );
        }
        let mut context = vec![0f32; tokens * size];
        // Each row's slices of the context and of `qkv`, cut off the fronts in turn.
        let mut rows = Vec::with_capacity(lengths.len());
        let (mut context_rest, mut qkv_rest) = (context.as_mut_slice(), qkv);
        for &n in lengths {
            let (row_context, rest) = context_rest.split_at_mut(n * size);
            context_rest = rest;
            let (row_qkv, rest) = qkv_rest.split_at(n * packed);
            qkv_rest = rest;
            rows.push((row_context, row_qkv, n));
        }
        let arch = pulp::Arch::new();
        rows.into_par_iter().try_for_each(|(context, qkv, n)| {
            if n == 0 {
                return Ok(());
            }
            let mut scores = vec![0f32; n * n];
            // Head `h`'s queries, keys and values start at `h·head_dim` in the three
            // thirds of each token's `3·hidden`.
            let part = |third: usize, h: usize| &qkv[third * size + h * head_dim..];
            for h in 0..self.heads {
                let queries = View {
                    data: part(0, h),
                    row_stride: packed,
                    column_stride: 1,
                };
                // The keys transposed: `head_dim × n`.
                let keys = View {
                    data: part(1, h),
                    row_stride: 1,
                    column_stride: packed,
                };
                strided_matmul((n, n, head_dim), queries, keys, &mut scores, n)
                    .ok_or_else(|| candle_core::Error::msg("bert attention: scores"))?;
                scores
                    .chunks_exact_mut(n)
                    .for_each(|line| softmax(arch, line));
                let probabilities = View {
                    data: &scores,
                    row_stride: n,
                    column_stride: 1,
                };
                let values = View {
                    data: part(2, h),
                    row_stride: packed,
                    column_stride: 1,
                };
                strided_matmul(
                    (n, head_dim, n),
                    probabilities,
                    values,
                    &mut context[h * head_dim..],
                    size,
                )
                .ok_or_else(|| candle_core::Error::msg("bert attention: context"))?;
            }
            Ok::<(), candle_core::Error>(())
        })?;
        Tensor::from_vec(context, (tokens, size), &candle_core::Device::Cpu)
    }
}

impl FusedBert {
    /// Loads the encoder from `vb` under the names candle-transformers' `BertModel::load` tries:
    /// at the root, under `bert.`, or under the config's `model_type`; the projections in
    /// `precision` where this CPU can run it, else in f32. Where `vb` reads the safetensors
    /// file `map`, the word table is read from the map in place.
    pub(crate) fn load(
        vb: &VarBuilder,
        config: &Config,
        precision: EmbedderPrecision,
        map: Option<&Arc<Mmap>>,
    ) -> Result<Self> {
        let vb = if vb.contains_tensor("bert.embeddings.word_embeddings.weight") {
            vb.pp("bert")
        } else {
            vb.clone()
        };
        match Self::load_at(&vb, config, precision, map) {
            Ok(model) => Ok(model),
            Err(err) => match &config.model_type {
                Some(model_type) => {
                    Self::load_at(&vb.pp(model_type), config, precision, map).map_err(|_| err)
                }
                None => Err(err),
            },
        }
    }

    fn load_at(
        vb: &VarBuilder,
        config: &Config,
        precision: EmbedderPrecision,
        map: Option<&Arc<Mmap>>,
    ) -> Result<Self> {
        let h = config.hidden_size;
        let embeddings = vb.pp("embeddings");
        let words = embeddings.pp("word_embeddings");
        let mapped = match map {
            Some(map) => MappedTable::find(map.clone(), &format!("{}.weight", words.prefix()), h)?,
            None => None,
        };
        let word_embeddings = match mapped {
            Some(table) if table.rows() == config.vocab_size => WordEmbeddings::Mapped(table),
            Some(table) => bail!(
                "{}.weight has {} rows for a vocabulary of {}",
                words.prefix(),
                table.rows(),
                config.vocab_size
            ),
            None => WordEmbeddings::Copied(candle_nn::embedding(config.vocab_size, h, words)?),
        };
        let position_embeddings = embeddings.get(
            (config.max_position_embeddings, h),
            "position_embeddings.weight",
        )?;
        let token_type = embeddings
            .get((config.type_vocab_size, h), "token_type_embeddings.weight")?
            .get(0)?;
        let embedding_norm =
            candle_nn::layer_norm(h, config.layer_norm_eps, embeddings.pp("LayerNorm"))?;
        let layers = (0..config.num_hidden_layers)
            .map(|i| FusedLayer::load(&vb.pp(format!("encoder.layer.{i}")), config, precision))
            .collect::<Result<Vec<FusedLayer>>>()?;
        // Int8 only where every projection runs in it: `k` differs between them (the hidden
        // size, or the feed-forward size for the last), and one may fall back alone.
        let precision = if !layers.is_empty()
            && layers.iter().all(|layer| {
                [
                    &layer.qkv,
                    &layer.attention_output,
                    &layer.intermediate,
                    &layer.output,
                ]
                .iter()
                .all(|p| p.precision() == EmbedderPrecision::Int8)
            }) {
            EmbedderPrecision::Int8
        } else {
            EmbedderPrecision::F32
        };
        Ok(Self {
            word_embeddings,
            position_embeddings,
            token_type,
            embedding_norm,
            layers,
            hidden: h,
            precision,
        })
    }

    /// The precision the projections run in.
    pub(crate) fn precision(&self) -> EmbedderPrecision {
        self.precision
    }

    /// The last hidden states of the texts whose token ids are `rows`, each encoded alone:
    /// `Σ rows' lengths × hidden`, row `r`'s tokens after row `r - 1`'s (no padding).
    pub(crate) fn forward(&self, rows: &[&[u32]]) -> Result<Tensor> {
        let lengths: Vec<usize> = rows.iter().map(|row| row.len()).collect();
        let tokens: usize = lengths.iter().sum();
        let device = self.position_embeddings.device();
        if tokens == 0 {
            return Tensor::zeros((0, self.hidden), self.position_embeddings.dtype(), device);
        }
        let limit = self.position_embeddings.dim(0)?;
        if let Some(&longest) = lengths.iter().max()
            && longest > limit
        {
            bail!("a text of {longest} tokens for BERT's {limit} positions");
        }
        // Each token's position within its own row.
        let positions: Vec<u32> = lengths.iter().flat_map(|&n| 0..n as u32).collect();
        let positions = self
            .position_embeddings
            .index_select(&Tensor::from_vec(positions, tokens, device)?, 0)?
            .broadcast_add(&self.token_type)?;
        let ids = Tensor::from_vec(rows.concat(), (1, tokens), device)?;
        let embedded = self
            .word_embeddings
            .forward(&ids)?
            .reshape((tokens, self.hidden))?
            .add(&positions)?;
        let mut hidden = self.embedding_norm.forward(&embedded)?;
        for layer in &self.layers {
            hidden = layer.forward(&hidden, &lengths)?;
        }
        Ok(hidden)
    }
}

/// The contiguous f32 values of a CPU tensor.
fn f32_slice<'a>(storage: &'a CpuStorage, layout: &Layout, op: &str) -> Result<&'a [f32]> {
    match (storage, layout.contiguous_offsets()) {
        (CpuStorage::F32(values), Some((start, end))) => Ok(&values[start..end]),
        (CpuStorage::F32(_), None) => bail!("{op}: the input is not contiguous"),
        _ => bail!("{op}: the input is not f32"),
    }
}

fn f32_slice_mut<'a>(
    storage: &'a mut CpuStorage,
    layout: &Layout,
    op: &str,
) -> Result<&'a mut [f32]> {
    match (storage, layout.contiguous_offsets()) {
        (CpuStorage::F32(values), Some((start, end))) => Ok(&mut values[start..end]),
        (CpuStorage::F32(_), None) => bail!("{op}: the output is not contiguous"),
        _ => bail!("{op}: the output is not f32"),
    }
}

/// `tokens × 3·hidden` query, key and value projections: biases added and the queries scaled
/// by 1/√head_dim (the attention scale, applied once here rather than to every score), in place.
struct QkvBias<'a> {
    bias: &'a [f32],
    heads: usize,
}

impl InplaceOp1 for QkvBias<'_> {
    fn name(&self) -> &'static str {
        "bert-qkv-bias"
    }

    fn cpu_fwd(&self, qkv: &mut CpuStorage, layout: &Layout) -> Result<()> {
        let qkv = f32_slice_mut(qkv, layout, self.name())?;
        let width = self.bias.len();
        let hidden = width / 3;
        if width == 0 || !qkv.len().is_multiple_of(width) || !hidden.is_multiple_of(self.heads) {
            bail!("{}: unexpected shape {:?}", self.name(), layout.shape());
        }
        #[allow(clippy::cast_precision_loss)]
        let scale = 1.0 / ((hidden / self.heads) as f32).sqrt();
        qkv.par_chunks_mut(width).for_each(|token| {
            let (queries, keys_values) = token.split_at_mut(hidden);
            let (query_bias, key_value_bias) = self.bias.split_at(hidden);
            for (q, b) in queries.iter_mut().zip(query_bias) {
                *q = (*q + b) * scale;
            }
            for (v, b) in keys_values.iter_mut().zip(key_value_bias) {
                *v += b;
            }
        });
        Ok(())
    }
}

/// Softmax of one line of attention scores, in place.
fn softmax(arch: pulp::Arch, line: &mut [f32]) {
    let max = line.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    arch.dispatch(|| line.iter_mut().for_each(|s| *s = exp(*s - max)));
    let inverse = 1.0 / line.iter().sum::<f32>();
    line.iter_mut().for_each(|s| *s *= inverse);
}

/// `x ← LayerNorm(x + bias + residual)` row by row, for `tokens × hidden` tensors.
struct BiasResidualNorm {
    bias: Vec<f32>,
    gamma: Vec<f32>,
    beta: Vec<f32>,
    eps: f32,
}

impl InplaceOp2 for BiasResidualNorm {
    fn name(&self) -> &'static str {
        "bert-bias-residual-norm"
    }

    fn cpu_fwd(
        &self,
        x: &mut CpuStorage,
        x_layout: &Layout,
        residual: &CpuStorage,
        residual_layout: &Layout,
    ) -> Result<()> {
        let residual = f32_slice(residual, residual_layout, self.name())?;
        let x = f32_slice_mut(x, x_layout, self.name())?;
        let hidden = self.bias.len();
        if hidden == 0 || x.len() != residual.len() || !x.len().is_multiple_of(hidden) {
            bail!("{}: shapes do not match", self.name());
        }
        #[allow(clippy::cast_precision_loss)]
        let n = hidden as f32;
        x.par_chunks_mut(hidden)
            .zip(residual.par_chunks(hidden))
            .for_each(|(x, residual)| {
                for ((v, r), b) in x.iter_mut().zip(residual).zip(&self.bias) {
                    *v += b + r;
                }
                let mean = x.iter().sum::<f32>() / n;
                let variance = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / n;
                let inverse = 1.0 / (variance + self.eps).sqrt();
                for ((v, g), b) in x.iter_mut().zip(&self.gamma).zip(&self.beta) {
                    *v = (*v - mean) * inverse * g + b;
                }
            });
        Ok(())
    }
}

/// `x ← activation(x + bias)` row by row, for `tokens × intermediate` tensors.
struct BiasActivation {
    bias: Vec<f32>,
    activation: HiddenAct,
}

impl InplaceOp1 for BiasActivation {
    fn name(&self) -> &'static str {
        "bert-bias-activation"
    }

    fn cpu_fwd(&self, x: &mut CpuStorage, layout: &Layout) -> Result<()> {
        let x = f32_slice_mut(x, layout, self.name())?;
        let width = self.bias.len();
        if width == 0 || !x.len().is_multiple_of(width) {
            bail!("{}: shapes do not match", self.name());
        }
        let bias = &self.bias;
        let arch = pulp::Arch::new();
        // One loop per activation, each straight-line arithmetic that `arch` compiles for the
        // CPU's widest vectors.
        match self.activation {
            HiddenAct::Gelu => x.par_chunks_mut(width).for_each(|row| {
                arch.dispatch(|| {
                    for (v, b) in row.iter_mut().zip(bias) {
                        let z = *v + b;
                        *v = 0.5 * z * (1.0 + erf(z * std::f32::consts::FRAC_1_SQRT_2));
                    }
                });
            }),
            HiddenAct::GeluApproximate => x.par_chunks_mut(width).for_each(|row| {
                for (v, b) in row.iter_mut().zip(bias) {
                    let z = *v + b;
                    let inner = 0.797_884_6 * (z + 0.044_715 * z * z * z);
                    *v = 0.5 * z * (1.0 + inner.tanh());
                }
            }),
            HiddenAct::Relu => x.par_chunks_mut(width).for_each(|row| {
                arch.dispatch(|| {
                    for (v, b) in row.iter_mut().zip(bias) {
                        *v = (*v + b).max(0.0);
                    }
                });
            }),
        }
        Ok(())
    }
}

/// The error function, to 1.5e-7 absolute (Abramowitz and Stegun 7.1.26), for the exact GELU.
#[inline(always)]
fn erf(x: f32) -> f32 {
    let a = x.abs();
    let t = 1.0 / (1.0 + 0.327_591_1 * a);
    let poly = t
        * (0.254_829_6
            + t * (-0.284_496_74 + t * (1.421_413_7 + t * (-1.453_152 + t * 1.061_405_4))));
    let y = 1.0 - poly * exp(-a * a);
    y.copysign(x)
}

/// eˣ to within 2 ulp for x in [-87, 88] (clamped outside), without a libm call so that the
/// loops above vectorise: x = k·ln 2 + f with |f| ≤ ln 2 / 2 (Cody–Waite), eᶠ by its Taylor
/// series to degree 7 (error below 5e-9), 2ᵏ built in the exponent bits.
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    // 1.5·2²³: adding it rounds to an integer, which then sits in the low mantissa bits.
    const ROUND: f32 = 12_582_912.0;
    const LN2_HIGH: f32 = 0.693_145_75;
    const LN2_LOW: f32 = 1.428_606_8e-6;
    let x = x.clamp(-87.0, 88.0);
    let shifted = x * std::f32::consts::LOG2_E + ROUND;
    let k = shifted - ROUND;
    let f = x - k * LN2_HIGH - k * LN2_LOW;
    let p = 1.0
        + f * (1.0
            + f * (1.0 / 2.0
                + f * (1.0 / 6.0
                    + f * (1.0 / 24.0
                        + f * (1.0 / 120.0 + f * (1.0 / 720.0 + f * (1.0 / 5040.0)))))));
    let k_bits = shifted.to_bits().wrapping_sub(ROUND.to_bits());
    p * f32::from_bits(k_bits.wrapping_add(127) << 23)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{DType, Device};
    use candle_transformers::models::bert::BertModel;
    use std::collections::HashMap;

    #[test]
    fn exp_is_within_3e_7_relative_of_std() {
        let mut worst = 0f32;
        for i in 0..=20_000 {
            #[allow(clippy::cast_precision_loss)]
            let x = -87.0 + 175.0 * i as f32 / 20_000.0;
            let want = x.exp();
            worst = worst.max((exp(x) - want).abs() / want);
        }
        assert!(worst < 3e-7, "largest relative error {worst}");
        assert!(exp(-1e4) >= 0.0 && exp(-1e4) < 1e-37);
    }

    #[test]
    fn erf_is_within_2e_7_of_reference_values() {
        // erf at 0, ±0.5, 1, 2, 3 (Abramowitz and Stegun, table 7.1).
        let reference = [
            (0.0, 0.0),
            (0.5, 0.520_499_9),
            (-0.5, -0.520_499_9),
            (1.0, 0.842_700_8),
            (2.0, 0.995_322_3),
            (3.0, 0.999_977_9),
        ];
        for (x, want) in reference {
            let got = erf(x);
            assert!((got - want).abs() < 2e-7, "erf({x}) = {got}, want {want}");
        }
    }

    /// Random weights (LayerNorm scales and shifts too, so a swapped gamma and beta shows).
    fn random_weights(config: &Config, seed: u64) -> HashMap<String, Tensor> {
        // Each tensor draws from its own seed.
        let mut drawn = 0u64;
        let mut tensor = |shape: &[usize], scale: f32, offset: f32| {
            drawn += 1;
            let n: usize = shape.iter().product();
            let data: Vec<f32> = crate::test_values::uniform(n, seed.wrapping_mul(1000) + drawn)
                .into_iter()
                .map(|unit| unit * scale + offset)
                .collect();
            Tensor::from_vec(data, shape, &Device::Cpu).unwrap()
        };
        let (h, i) = (config.hidden_size, config.intermediate_size);
        let mut weights = HashMap::new();
        let mut put = |name: String, t: Tensor| {
            weights.insert(name, t);
        };
        put(
            "embeddings.word_embeddings.weight".into(),
            tensor(&[config.vocab_size, h], 1.0, 0.0),
        );
        put(
            "embeddings.position_embeddings.weight".into(),
            tensor(&[config.max_position_embeddings, h], 0.5, 0.0),
        );
        put(
            "embeddings.token_type_embeddings.weight".into(),
            tensor(&[config.type_vocab_size, h], 0.5, 0.0),
        );
        put("embeddings.LayerNorm.weight".into(), tensor(&[h], 0.3, 1.0));
        put("embeddings.LayerNorm.bias".into(), tensor(&[h], 0.2, 0.0));
        for layer in 0..config.num_hidden_layers {
            let p = format!("encoder.layer.{layer}");
            let linears = [
                ("attention.self.query", h, h),
                ("attention.self.key", h, h),
                ("attention.self.value", h, h),
                ("attention.output.dense", h, h),
                ("intermediate.dense", h, i),
                ("output.dense", i, h),
            ];
            for (name, in_dim, out_dim) in linears {
                let scale = 1.5 / (in_dim as f32).sqrt();
                put(
                    format!("{p}.{name}.weight"),
                    tensor(&[out_dim, in_dim], scale, 0.0),
                );
                put(format!("{p}.{name}.bias"), tensor(&[out_dim], 0.2, 0.0));
            }
            for norm in ["attention.output.LayerNorm", "output.LayerNorm"] {
                put(format!("{p}.{norm}.weight"), tensor(&[h], 0.3, 1.0));
                put(format!("{p}.{norm}.bias"), tensor(&[h], 0.2, 0.0));
            }
        }
        weights
    }

    fn config(activation: HiddenAct) -> Config {
        Config {
            vocab_size: 50,
            hidden_size: 24,
            num_hidden_layers: 2,
            num_attention_heads: 3,
            intermediate_size: 40,
            hidden_act: activation,
            max_position_embeddings: 16,
            type_vocab_size: 2,
            layer_norm_eps: 1e-12,
            ..Config::default()
        }
    }

    #[test]
    fn fused_encoder_on_rows_end_to_end_matches_candle_transformers_bert_on_a_padded_batch() {
        for activation in [HiddenAct::Gelu, HiddenAct::GeluApproximate, HiddenAct::Relu] {
            let config = config(activation);
            let weights = random_weights(&config, 7);
            // The same weights in a safetensors file, its word table read from the map.
            let dir = tempfile::tempdir().unwrap();
            let file = dir.path().join("model.safetensors");
            candle_core::safetensors::save(&weights, &file).unwrap();
            let map = Arc::new(crate::mapped::map_weights(&file).unwrap());
            let file_vb = VarBuilder::from_slice_safetensors(&map, DType::F32, &Device::Cpu);
            let mapped = FusedBert::load(
                &file_vb.unwrap(),
                &config,
                EmbedderPrecision::F32,
                Some(&map),
            )
            .unwrap();
            assert!(matches!(mapped.word_embeddings, WordEmbeddings::Mapped(_)));
            let vb = VarBuilder::from_tensors(weights, DType::F32, &Device::Cpu);
            let fused = FusedBert::load(&vb, &config, EmbedderPrecision::F32, None).unwrap();
            assert_eq!(fused.precision(), EmbedderPrecision::F32);
            assert!(matches!(fused.word_embeddings, WordEmbeddings::Copied(_)));
            let int8 = FusedBert::load(&vb, &config, EmbedderPrecision::Int8, None).unwrap();
            let reference = BertModel::load(vb, &config).unwrap();

            // Three rows of 9, 5 and 1 real tokens (and an empty one for the fused encoder),
            // padded to 9 for candle-transformers'.
            let lengths = [9usize, 5, 1];
            let width = 9;
            let mut ids = Vec::new();
            let mut mask = Vec::new();
            let mut rows: Vec<Vec<u32>> = vec![Vec::new(); lengths.len()];
            for (row, &n) in lengths.iter().enumerate() {
                for t in 0..width {
                    let real = t < n;
                    let id = ((row * 13 + t * 7) % 49 + 1) as u32;
                    ids.push(if real { id } else { 0 });
                    if real {
                        rows[row].push(id);
                    }
                    mask.push(u32::from(real));
                }
            }
            let mut rows: Vec<&[u32]> = rows.iter().map(Vec::as_slice).collect();
            rows.insert(1, &[]);
            // Where each row's tokens start in the fused encoder's states.
            let starts = [0usize, 9, 14];
            let ids = Tensor::from_vec(ids, (3, width), &Device::Cpu).unwrap();
            let mask = Tensor::from_vec(mask, (3, width), &Device::Cpu).unwrap();
            let want = reference
                .forward(&ids, &ids.zeros_like().unwrap(), Some(&mask))
                .unwrap();
            let got = fused.forward(&rows).unwrap();
            assert_eq!(got.dims(), [15, config.hidden_size]);
            let from_map = mapped.forward(&rows).unwrap();
            assert_eq!(
                from_map.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
                got.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
                "{activation:?}: the mapped word table gives the copied table's states"
            );
            let want = want.to_vec3::<f32>().unwrap();
            let got = got.to_vec2::<f32>().unwrap();
            // The int8 projections, where this CPU runs them: every real token's state within
            // cosine 0.999 of f32's (two layers of this tiny model).
            let int8_states = int8.forward(&rows).unwrap().to_vec2::<f32>().unwrap();
            if crate::int8::cpu_supported() {
                assert_eq!(int8.precision(), EmbedderPrecision::Int8);
            } else {
                assert_eq!(int8.precision(), EmbedderPrecision::F32);
            }
            for (row, &n) in lengths.iter().enumerate() {
                for t in 0..n {
                    let (a, b) = (&int8_states[starts[row] + t], &want[row][t]);
                    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
                    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
                    let cosine = dot / (norm(a) * norm(b));
                    assert!(
                        cosine > 0.999,
                        "{activation:?}: row {row} token {t}: {cosine}"
                    );
                }
            }
            for (row, &n) in lengths.iter().enumerate() {
                for t in 0..n {
                    for (a, b) in got[starts[row] + t].iter().zip(&want[row][t]) {
                        assert!(
                            (a - b).abs() < 1e-4,
                            "{activation:?}: row {row} token {t}: {a} against {b}"
                        );
                    }
                }
            }
        }
    }
}
