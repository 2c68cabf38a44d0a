//! `QuantizedLlama`: the Llama decoder (Touvron et al., "LLaMA: Open and Efficient Foundation
//! Language Models", 2023, <https://arxiv.org/abs/2302.13971>; Llama 2,
//! <https://arxiv.org/abs/2307.09288>) read from one GGUF file, decoding several sequences
//! ("rows") as one batch.
//!
//! It follows candle's `quantized_llama` (the same GGUF tensors and the same arithmetic, with
//! candle's quantized matmuls, RMSNorm and interleaved RoPE kernels), which runs one sequence with
//! one shared cache. Here every row has its own slice of the KV cache
//! (`[rows, kv_heads, columns, head_dim]`), its own RoPE positions and its own attention mask, so
//! that:
//! - rows of different lengths advance together, one forward pass per decode step;
//! - a prompt prefix that all rows share is run once on one row and then copied into every row
//!   ([`QuantizedLlama::select_rows`]);
//! - rows that have finished are dropped from the batch (`select_rows` again).
//!
//! A forward pass appends the same number of cache columns to every row: a row with fewer new
//! tokens is padded on the left, and no real token of that row ever attends to its pad columns.
//! Pads cost no arithmetic but attention's: the projections and the feed-forward network run
//! over the real tokens alone, and a pad's cache column holds zeros ([`Ragged`]).
//! So the last column of a pass holds a real token of every row that had tokens in it, and the
//! vocabulary projection runs there only: logits are `[rows, vocab]`, never `[rows, seq, vocab]`.
//!
//! The families llama.cpp converts as `llama` run as llama.cpp runs them: any RoPE base, linear
//! RoPE scaling and Llama-3.1's per-pair frequency divisors ([`RopeFrequencies`]), grouped-query
//! attention, and a sliding window where the file names one ([`sliding_window`], applied
//! through the attention mask, so every attention kernel honours it). What this crate does not
//! compute (YaRN, partial rotary, weight types nothing here multiplies) is refused by name.

use std::io::{Read, Seek};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use candle_core::quantized::{GgmlDType, QMatMul, QTensor, gguf_file};
use candle_core::{DType, Device, Module, Result, Tensor};

use crate::cache_rows::{gather_rows, keep_rows, write_columns};
use candle_transformers::quantized_nn::RmsNorm;

use crate::cache_lines::{CacheSimd, line_elements};
use crate::cpu_attention::{AttentionShape, candle_attention, cpu_attention, cpu_prompt_attention};
use crate::cpu_kernels::{CpuKernels, KernelChoice, KernelPolicy};
use crate::decode_prefetch::{PrefetchChoice, PrefetchDefault, PrefetchPolicy};
use crate::error::ModelError;
use crate::head_layout::{HeadShape, merge_heads, split_heads};
use crate::kernel_memory::KernelMemory;
use crate::mapped::MappedGguf;
use crate::packed::PackedMatrix;
use selfrag_core::CachePrecision;

/// Hyper-parameters of a GGUF Llama, all read from the file (nothing assumes the 7B shape).
#[derive(Debug, Clone, PartialEq)]
pub struct LlamaConfig {
    pub vocab_size: usize,
    pub embedding_length: usize,
    pub feed_forward_length: usize,
    pub block_count: usize,
    pub head_count: usize,
    /// Fewer than `head_count` for grouped-query attention.
    pub head_count_kv: usize,
    pub head_dim: usize,
    pub rms_norm_eps: f64,
    pub rope_freq_base: f32,
    /// What RoPE multiplies every position by: 1, or `1 / llama.rope.scaling.factor` for linear
    /// scaling (llama.cpp's `freq_scale`).
    pub rope_freq_scale: f32,
    /// Whether the file carries Llama-3.1's per-dimension frequency divisors
    /// (`rope_freqs.weight`, `head_dim / 2` values), read with the weights.
    pub rope_freq_factors: bool,
    /// Keys a query sees, itself included (`llama.attention.sliding_window`), or `None` for
    /// all of them (llama.cpp's standard window).
    pub sliding_window: Option<usize>,
    /// Positions the model was trained for (`llama.context_length`).
    pub context_length: usize,
}

/// An integer metadata value of any width; `None` when absent, an error when of another type.
fn metadata_usize(
    content: &gguf_file::Content,
    path: &Path,
    key: &str,
) -> std::result::Result<Option<usize>, ModelError> {
    use gguf_file::Value as V;
    let Some(value) = content.metadata.get(key) else {
        return Ok(None);
    };
    let number = match value {
        V::U8(v) => Some(u64::from(*v)),
        V::U16(v) => Some(u64::from(*v)),
        V::U32(v) => Some(u64::from(*v)),
        V::U64(v) => Some(*v),
        V::I8(v) => u64::try_from(*v).ok(),
        V::I16(v) => u64::try_from(*v).ok(),
        V::I32(v) => u64::try_from(*v).ok(),
        V::I64(v) => u64::try_from(*v).ok(),
        _ => None,
    };
    number
        .and_then(|n| usize::try_from(n).ok())
        .map(Some)
        .ok_or_else(|| ModelError::MissingMetadata {
            path: path.to_owned(),
            key: key.to_owned(),
        })
}

/// A float metadata value; `None` when absent, an error when of another type.
fn metadata_f64(
    content: &gguf_file::Content,
    path: &Path,
    key: &str,
) -> std::result::Result<Option<f64>, ModelError> {
    match content.metadata.get(key) {
        None => Ok(None),
        Some(gguf_file::Value::F32(v)) => Ok(Some(f64::from(*v))),
        Some(gguf_file::Value::F64(v)) => Ok(Some(*v)),
        Some(_) => Err(ModelError::MissingMetadata {
            path: path.to_owned(),
            key: key.to_owned(),
        }),
    }
}

impl LlamaConfig {
    /// Reads and checks the hyper-parameters of the Llama GGUF at `path` (its parsed header).
    pub fn from_gguf(
        content: &gguf_file::Content,
        path: &Path,
    ) -> std::result::Result<Self, ModelError> {
        require_llama(content, path)?;
        let shape = Shape::read(content, path)?;
        let (vocab_size, feed_forward_length) = tensor_sizes(content, path, &shape)?;
        Ok(Self {
            vocab_size,
            embedding_length: shape.embedding_length,
            feed_forward_length,
            block_count: shape.block_count,
            head_count: shape.head_count,
            head_count_kv: shape.head_count_kv,
            head_dim: shape.head_dim(),
            rms_norm_eps: shape.rms_norm_eps,
            rope_freq_base: shape.rope_freq_base,
            rope_freq_scale: shape.rope_freq_scale,
            rope_freq_factors: shape.rope_freq_factors,
            sliding_window: shape.sliding_window,
            context_length: shape.context_length,
        })
    }
}

/// Refuses a GGUF of another architecture than `llama`, or one that names none.
fn require_llama(content: &gguf_file::Content, path: &Path) -> std::result::Result<(), ModelError> {
    let architecture = content
        .metadata
        .get("general.architecture")
        .and_then(|v| v.to_string().ok())
        .ok_or_else(|| ModelError::MissingMetadata {
            path: path.to_owned(),
            key: "general.architecture".to_owned(),
        })?;
    if architecture != "llama" {
        return Err(ModelError::UnsupportedArchitecture {
            path: path.to_owned(),
            found: architecture.clone(),
        });
    }
    Ok(())
}

/// The `llama.*` hyper-parameters, checked to describe a model this crate runs.
struct Shape {
    head_count: usize,
    head_count_kv: usize,
    block_count: usize,
    embedding_length: usize,
    context_length: usize,
    rms_norm_eps: f64,
    rope_freq_base: f32,
    rope_freq_scale: f32,
    rope_freq_factors: bool,
    sliding_window: Option<usize>,
}

/// The tensor of Llama-3.1's RoPE frequency divisors, as llama.cpp's converter names it.
const ROPE_FREQS: &str = "rope_freqs.weight";

/// The metadata key of a sliding attention window. llama.cpp names it for every architecture
/// (`%s.attention.sliding_window`, src/llama-arch.cpp) but reads it only for architectures
/// built with windowed attention, not for `llama`; its converter writes none for Mistral v0.1
/// (converted as `llama`). Where a `llama` file carries one, this crate honours it, as
/// Mistral's own reference implementation does.
const SLIDING_WINDOW_KEY: &str = "llama.attention.sliding_window";

/// A string metadata value; `None` when absent, an error when of another type.
fn metadata_string(
    content: &gguf_file::Content,
    path: &Path,
    key: &str,
) -> std::result::Result<Option<String>, ModelError> {
    match content.metadata.get(key) {
        None => Ok(None),
        Some(gguf_file::Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(ModelError::MissingMetadata {
            path: path.to_owned(),
            key: key.to_owned(),
        }),
    }
}

/// What llama.cpp's `freq_scale` is for this file (`llama_model::load_hparams`): the scaling
/// type defaults to `linear`, `none` never scales, and a linear factor comes from
/// `llama.rope.scaling.factor` or the older `llama.rope.scale_linear` (absent or 0: no
/// scaling). Any other type (YaRN, LongRoPE) is refused by name.
fn rope_freq_scale(
    content: &gguf_file::Content,
    path: &Path,
) -> std::result::Result<f32, ModelError> {
    let unsupported = |feature: String| ModelError::UnsupportedModelFeature {
        path: path.to_owned(),
        feature,
    };
    let scaling = metadata_string(content, path, "llama.rope.scaling.type")?;
    match scaling.as_deref() {
        Some("none") => return Ok(1.0),
        None | Some("linear") => {}
        Some(other) => {
            return Err(unsupported(format!(
                "RoPE scaling (`llama.rope.scaling.type` = `{other}`)"
            )));
        }
    }
    let factor = match metadata_f64(content, path, "llama.rope.scaling.factor")? {
        Some(factor) => Some(factor),
        None => metadata_f64(content, path, "llama.rope.scale_linear")?,
    };
    if let Some(attn_factor) = metadata_f64(content, path, "llama.rope.scaling.attn_factor")?
        && attn_factor != 1.0
    {
        return Err(unsupported(format!(
            "a RoPE attention factor (`llama.rope.scaling.attn_factor` = {attn_factor})"
        )));
    }
    match factor {
        None | Some(0.0) => Ok(1.0),
        #[allow(clippy::cast_possible_truncation)]
        Some(factor) if factor.is_finite() && factor > 0.0 => Ok((1.0 / factor) as f32),
        Some(factor) => Err(ModelError::InvalidGguf {
            path: path.to_owned(),
            reason: format!("the linear RoPE scaling factor {factor} is not a positive number"),
        }),
    }
}

impl Shape {
    fn read(content: &gguf_file::Content, path: &Path) -> std::result::Result<Self, ModelError> {
        let required = |key: &str| -> std::result::Result<usize, ModelError> {
            metadata_usize(content, path, key)?.ok_or_else(|| ModelError::MissingMetadata {
                path: path.to_owned(),
                key: key.to_owned(),
            })
        };
        let head_count = required("llama.attention.head_count")?;
        let block_count = required("llama.block_count")?;
        let embedding_length = required("llama.embedding_length")?;
        let context_length = required("llama.context_length")?;
        let rms_norm_eps = metadata_f64(content, path, "llama.attention.layer_norm_rms_epsilon")?
            .ok_or_else(|| ModelError::MissingMetadata {
            path: path.to_owned(),
            key: "llama.attention.layer_norm_rms_epsilon".to_owned(),
        })?;
        // llama.cpp's defaults for the optional keys: no GQA, full rotary, base 10000.
        let head_count_kv =
            metadata_usize(content, path, "llama.attention.head_count_kv")?.unwrap_or(head_count);
        #[allow(clippy::cast_possible_truncation)]
        let rope_freq_base =
            metadata_f64(content, path, "llama.rope.freq_base")?.unwrap_or(10_000.0) as f32;
        let experts = metadata_usize(content, path, "llama.expert_count")?.unwrap_or(0);
        let invalid = |reason: String| ModelError::InvalidGguf {
            path: path.to_owned(),
            reason,
        };
        let unsupported = |feature: String| ModelError::UnsupportedModelFeature {
            path: path.to_owned(),
            feature,
        };
        if experts > 1 {
            return Err(unsupported(format!(
                "a mixture of experts ({experts} experts)"
            )));
        }
        // 0 is llama.cpp's "no window".
        let sliding_window = metadata_usize(content, path, SLIDING_WINDOW_KEY)?.filter(|&w| w > 0);
        let shape = Self {
            head_count,
            head_count_kv,
            block_count,
            embedding_length,
            context_length,
            rms_norm_eps,
            rope_freq_base,
            rope_freq_scale: rope_freq_scale(content, path)?,
            rope_freq_factors: content.tensor_infos.contains_key(ROPE_FREQS),
            sliding_window,
        };
        shape.check().map_err(invalid)?;
        let head_dim = shape.head_dim();
        let rope_dimension =
            metadata_usize(content, path, "llama.rope.dimension_count")?.unwrap_or(head_dim);
        if rope_dimension != head_dim {
            return Err(unsupported(format!(
                "partial rotary embeddings ({rope_dimension} of {head_dim} dimensions)"
            )));
        }
        // Heads wider or narrower than `embedding_length / head_count` (Mistral-Nemo's 128 of
        // 160): llama.cpp reads them from these keys; this crate does not.
        for key in ["llama.attention.key_length", "llama.attention.value_length"] {
            if let Some(length) = metadata_usize(content, path, key)?
                && length != head_dim
            {
                return Err(unsupported(format!(
                    "attention heads of {length} dimensions (`{key}`) where the embedding \
                     splits into heads of {head_dim}"
                )));
            }
        }
        if let Some(info) = content.tensor_infos.get(ROPE_FREQS) {
            let dims = info.shape.dims();
            if dims != [head_dim / 2] {
                return Err(invalid(format!(
                    "`{ROPE_FREQS}` has shape {dims:?}, expected [{}] (one factor per pair of \
                     head dimensions)",
                    head_dim / 2
                )));
            }
        }
        Ok(shape)
    }

    /// Dimensions per attention head (once [`Shape::check`] has passed: no zero head count).
    fn head_dim(&self) -> usize {
        self.embedding_length / self.head_count
    }

    /// What is wrong with these numbers, if anything.
    fn check(&self) -> std::result::Result<(), String> {
        let Self {
            head_count,
            head_count_kv,
            block_count,
            embedding_length,
            context_length,
            rms_norm_eps,
            rope_freq_base,
            rope_freq_scale,
            rope_freq_factors: _,
            sliding_window: _,
        } = *self;
        if head_count == 0 || block_count == 0 || context_length == 0 {
            return Err("head count, block count and context length must be positive".to_owned());
        }
        if !embedding_length.is_multiple_of(head_count)
            || !(embedding_length / head_count).is_multiple_of(2)
        {
            return Err(format!(
                "embedding length {embedding_length} does not split into {head_count} heads of even size"
            ));
        }
        if !(rms_norm_eps.is_finite() && rms_norm_eps > 0.0) {
            return Err(format!(
                "RMS norm epsilon {rms_norm_eps} is not a small positive number"
            ));
        }
        if !(rope_freq_base.is_finite() && rope_freq_base > 0.0) {
            return Err(format!(
                "RoPE frequency base {rope_freq_base} is not a positive number"
            ));
        }
        if !(rope_freq_scale.is_finite() && rope_freq_scale > 0.0) {
            return Err(format!(
                "RoPE frequency scale {rope_freq_scale} is not a positive number"
            ));
        }
        if head_count_kv == 0 || !head_count.is_multiple_of(head_count_kv) {
            return Err(format!(
                "{head_count} attention heads cannot share {head_count_kv} key/value heads"
            ));
        }
        Ok(())
    }
}

/// The vocabulary and feed-forward sizes, read off the tensors after checking that the file
/// has as many blocks as `shape` says.
fn tensor_sizes(
    content: &gguf_file::Content,
    path: &Path,
    shape: &Shape,
) -> std::result::Result<(usize, usize), ModelError> {
    let invalid = |reason: String| ModelError::InvalidGguf {
        path: path.to_owned(),
        reason,
    };
    let (block_count, embedding_length) = (shape.block_count, shape.embedding_length);
    // Checked against the tensors before anything is sized by it: a corrupt count must not
    // allocate room for billions of blocks.
    let last_block = format!("blk.{}.attn_q.weight", block_count.saturating_sub(1));
    if block_count > content.tensor_infos.len() || !content.tensor_infos.contains_key(&last_block) {
        return Err(invalid(format!(
            "`llama.block_count` says {block_count} blocks but the file has no `{last_block}`"
        )));
    }
    let dims = |name: &str| {
        content
            .tensor_infos
            .get(name)
            .map(|info| info.shape.dims().to_vec())
            .ok_or_else(|| invalid(format!("tensor `{name}` is missing")))
    };
    let vocab_size = match dims("token_embd.weight")?[..] {
        [rows, cols] if cols == embedding_length => rows,
        ref other => {
            return Err(invalid(format!(
                "`token_embd.weight` has shape {other:?}, expected [vocab, {embedding_length}]"
            )));
        }
    };
    let feed_forward_length = match dims("blk.0.ffn_gate.weight")?[..] {
        [rows, cols] if cols == embedding_length => rows,
        ref other => {
            return Err(invalid(format!(
                "`blk.0.ffn_gate.weight` has shape {other:?}, expected [ffn, {embedding_length}]"
            )));
        }
    };
    Ok((vocab_size, feed_forward_length))
}

/// The GGUF tensor types this crate multiplies and looks up: the floats, and the quantized
/// types llama.cpp writes into models (through candle's kernels, Q4_K and Q6_K also on
/// [`PackedMatrix`]'s). Q8_1 and Q8_K are activation types that no model file uses; the
/// types candle cannot read at all (the IQ, TQ and FP4 families) are refused while the header
/// is read (`gguf_header`).
const WEIGHT_TYPES: [GgmlDType; 13] = [
    GgmlDType::F32,
    GgmlDType::F16,
    GgmlDType::BF16,
    GgmlDType::Q4_0,
    GgmlDType::Q4_1,
    GgmlDType::Q5_0,
    GgmlDType::Q5_1,
    GgmlDType::Q8_0,
    GgmlDType::Q2K,
    GgmlDType::Q3K,
    GgmlDType::Q4K,
    GgmlDType::Q5K,
    GgmlDType::Q6K,
];

/// Refuses a file with a tensor of a type outside [`WEIGHT_TYPES`], naming the tensor and type.
fn check_weight_types(
    content: &gguf_file::Content,
    path: &Path,
) -> std::result::Result<(), ModelError> {
    let mut tensors: Vec<_> = content.tensor_infos.iter().collect();
    tensors.sort_by_key(|(name, _)| name.as_str());
    match tensors
        .into_iter()
        .find(|(_, info)| !WEIGHT_TYPES.contains(&info.ggml_dtype))
    {
        Some((name, info)) => Err(ModelError::UnsupportedModelFeature {
            path: path.to_owned(),
            feature: format!(
                "weights of type {:?} (tensor `{name}`); quantize the model to Q4_K_M, Q5_K_M, \
                 Q4_0, Q4_1, Q5_0, Q5_1, Q6_K or Q8_0 instead",
                info.ggml_dtype
            ),
        }),
        None => Ok(()),
    }
}

/// A quantized weight matrix, applied as `x · Wᵀ`.
///
/// On CPUs with AVX-512 VNNI, Q4_K and Q6_K matrices (all of a Q4_K_M model's) are packed at
/// load into this crate's compact tiles ([`PackedMatrix`]): 4.6 and 6.6 bits per weight, where
/// candle's own tiles take 6 and 10, and decoding is the time it takes to read the weights;
/// unless candle's kernels timed faster on this CPU ([`KernelChoice`]). Q8_0, Q4_1 and Q5_1
/// matrices on the CPU are multiplied from their blocks with llama.cpp's activation
/// quantization ([`QLinear::Blocks`]); everything else through candle's quantized matmul.
#[derive(Debug, Clone)]
enum QLinear {
    Packed(Arc<PackedMatrix>),
    /// Q8_0, Q4_1 or Q5_1 weights on the CPU, multiplied from the file's blocks with the
    /// activations quantized as llama.cpp quantizes them ([`crate::block_products`]).
    Blocks(Arc<QTensor>),
    Candle {
        matmul: QMatMul,
        /// Whether a single row is multiplied as two, see [`QLinear::candle`].
        pad_single_row: bool,
    },
}

impl QLinear {
    /// `weights` packed into tiles where `kernels` are the packed tiles and this CPU and their
    /// type allow, else for candle.
    fn new(weights: Arc<QTensor>, device: &Device, kernels: CpuKernels) -> Result<Self> {
        if device.is_cpu()
            && kernels == CpuKernels::Packed
            && let Some(packed) = PackedMatrix::pack(&weights)?
        {
            return Ok(Self::Packed(Arc::new(packed)));
        }
        if device.is_cpu() && crate::block_products::multiplies(&weights)? {
            return Ok(Self::Blocks(weights));
        }
        Ok(Self::candle(QMatMul::from_arc(weights)?, device))
    }

    /// Candle's matmul. On x86 CPUs with AVX2, candle repacks Q4_K and Q6_K weights into SIMD
    /// tiles the first time they multiply and uses them for every later product, except Q6_K
    /// times a single row, which it computes on the compact blocks with a slower dot product.
    /// The packed Q6_K copy exists anyway (prompts are several rows), so a single row is
    /// multiplied as two copies of itself to stay on the tiled kernel: twice the rows cost
    /// about the same, because reading the weights is the work.
    fn candle(matmul: QMatMul, device: &Device) -> Self {
        let pad_single_row = device.is_cpu()
            && matches!(&matmul, QMatMul::QTensor(t) if t.dtype() == GgmlDType::Q6K);
        Self::Candle {
            matmul,
            pad_single_row,
        }
    }
}

impl QLinear {
    /// `x` times each of `linears`, which all take `x`'s last dimension: where all of them
    /// are packed tiles, `x` is quantized once and their products run as one piece of work
    /// (`PackedMatrix::forward_all`); otherwise one by one.
    fn forward_all<const N: usize>(linears: [&Self; N], x: &Tensor) -> Result<[Tensor; N]> {
        let packed: Vec<&PackedMatrix> = linears
            .iter()
            .filter_map(|linear| match linear {
                Self::Packed(packed) => Some(packed.as_ref()),
                Self::Blocks(_) | Self::Candle { .. } => None,
            })
            .collect();
        if let Ok(packed) = <[&PackedMatrix; N]>::try_from(packed) {
            return PackedMatrix::forward_all(packed, x);
        }
        let mut out = Vec::with_capacity(N);
        for linear in linears {
            out.push(linear.forward(x)?);
        }
        out.try_into()
            .map_err(|_| candle_core::Error::Msg("one product per matrix".into()))
    }
}

impl Module for QLinear {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let (matmul, pad_single_row) = match self {
            Self::Packed(packed) => return packed.forward(x),
            Self::Blocks(weights) => return crate::block_products::forward(weights, x),
            Self::Candle {
                matmul,
                pad_single_row,
            } => (matmul, *pad_single_row),
        };
        let dims = x.dims();
        let k = dims.last().copied().unwrap_or(0);
        if !pad_single_row || k == 0 || x.elem_count() != k {
            return matmul.forward(x);
        }
        let row = x.reshape((1, k))?;
        let y = matmul
            .forward(&Tensor::cat(&[&row, &row], 0)?)?
            .narrow(0, 0, 1)?;
        let mut out = dims.to_vec();
        if let Some(last) = out.last_mut() {
            *last = y.dim(1)?;
        }
        y.reshape(out)
    }
}

/// Self-attention of one block, with grouped-query attention when `head_count_kv < head_count`.
#[derive(Debug, Clone)]
struct Attention {
    wq: QLinear,
    wk: QLinear,
    wv: QLinear,
    wo: QLinear,
    head_count: usize,
    head_count_kv: usize,
    head_dim: usize,
}

/// Keys and values of one block for every row: `[rows, kv_heads, capacity, line]`, of which the
/// first `KvCache::columns` columns are filled; a line is `head_dim` values, or the bytes of
/// their 8-bit blocks.
#[derive(Debug)]
struct LayerCache {
    k: Tensor,
    v: Tensor,
}

/// The environment variable that sets the KV cache's precision for a run: `q8` (or llama.cpp's
/// name, `q8_0`), `f16` or `f32` ([`CachePrecision`]); unset or empty, the device's default.
pub const KV_CACHE_ENV: &str = "SELFRAG_KV_CACHE";

/// The KV cache's precision on `device` where none is asked for: 8-bit on a CPU that reads the
/// cache's lines in vector registers (AVX2 with F16C, or AVX-512), else f32. 8 bits take 53%
/// of f16's bytes ([`crate::cache_lines`]); a decode step widens each block in registers, a
/// prompt pass widens each head's filled columns into a thread's buffer for its products.
pub fn default_cache_precision(device: &Device) -> CachePrecision {
    if device.is_cpu() && CacheSimd::detect().vectorized() {
        CachePrecision::Q8
    } else {
        CachePrecision::F32
    }
}

/// What [`KV_CACHE_ENV`] asks for on `device`, or the default where it is unset or empty.
pub fn cache_precision_from_env(device: &Device) -> std::result::Result<CachePrecision, String> {
    match std::env::var(KV_CACHE_ENV) {
        Ok(value) => parse_cache_precision(&value, device),
        Err(std::env::VarError::NotPresent) => Ok(default_cache_precision(device)),
        Err(std::env::VarError::NotUnicode(_)) => Err(format!(
            "{KV_CACHE_ENV} is not valid text; set it to q8, f16 or f32, or unset it"
        )),
    }
}

/// [`KV_CACHE_ENV`]'s `value` on `device`: a precision's name, or empty for the default.
fn parse_cache_precision(
    value: &str,
    device: &Device,
) -> std::result::Result<CachePrecision, String> {
    if value.trim().is_empty() {
        return Ok(default_cache_precision(device));
    }
    value.parse().map_err(|_| {
        format!(
            "{KV_CACHE_ENV} is `{}`; set it to q8, f16 or f32, or unset it",
            value.trim()
        )
    })
}

/// `precision` where a model's heads have `head_dim` values: 8-bit blocks need a whole number
/// of them in a head, else f16.
fn precision_for_head(precision: CachePrecision, head_dim: usize) -> CachePrecision {
    match precision {
        CachePrecision::Q8 if cache_layout(precision, head_dim).is_none() => CachePrecision::F16,
        other => other,
    }
}

/// The cache tensors' type for `precision`, and the elements of one line of `head_dim` values
/// (an 8-bit line is the bytes of its blocks); `None` for 8 bits where `head_dim` is not a
/// whole number of blocks.
fn cache_layout(precision: CachePrecision, head_dim: usize) -> Option<(DType, usize)> {
    let dtype = match precision {
        CachePrecision::Q8 => DType::U8,
        CachePrecision::F16 => DType::F16,
        CachePrecision::F32 => DType::F32,
    };
    line_elements(dtype, head_dim).map(|line| (dtype, line))
}

/// What a block's attention reads its cache through in one pass.
struct CacheView<'a> {
    layer: &'a LayerCache,
    /// The vector code that reads an f16 or 8-bit cache's lines on this CPU.
    lines: CacheSimd,
}

/// Per-row rotary tables (`[rows, columns, head_dim / 2]`) and the additive attention mask
/// (`[rows, 1, columns, cache_columns]`, 0 or -inf; `None` when every row sees every column).
struct PassInputs {
    /// The pass's layout: `rows` rows of `columns` new cache columns each.
    rows: usize,
    columns: usize,
    cos: Tensor,
    sin: Tensor,
    mask: Option<Tensor>,
    /// Set when some of the layout is padding: the hidden states then hold the real tokens only.
    ragged: Option<Ragged>,
}

/// Where a pass's real tokens sit in its `[rows, columns]` layout when some of that layout is
/// padding (rows of different lengths). Everything but attention (the norms, the projections,
/// the feed-forward network: nearly all of the arithmetic) runs over the real tokens alone, as
/// `[1, tokens, hidden]`; attention spreads its queries, keys and values into the layout, with
/// zeros at the pads (which no real token attends to), and gathers its outputs back.
struct Ragged {
    /// For every slot of the layout, row-major: 1 + the index of its real token, or 0 for a pad.
    spread: Tensor,
    /// For every real token, in order: its slot in the layout.
    gather: Tensor,
    /// `spread` and `gather` on the host, for the CPU's head layouts ([`crate::head_layout`]).
    spread_slots: Vec<u32>,
    gather_slots: Vec<u32>,
}

impl Ragged {
    /// `[1, tokens, d]` (or `[tokens, d]`) as `[rows · columns, d]`, zeros at the pads.
    fn spread(&self, tokens: &Tensor) -> Result<Tensor> {
        let d = tokens.dim(candle_core::D::Minus1)?;
        let tokens = tokens.reshape(((), d))?;
        let zero = Tensor::zeros((1, d), tokens.dtype(), tokens.device())?;
        Tensor::cat(&[&zero, &tokens], 0)?.index_select(&self.spread, 0)
    }

    /// The real tokens' lines of `[rows, columns, d]`, as `[1, tokens, d]`.
    fn gather(&self, layout: &Tensor) -> Result<Tensor> {
        let d = layout.dim(candle_core::D::Minus1)?;
        layout
            .reshape(((), d))?
            .index_select(&self.gather, 0)?
            .unsqueeze(0)
    }
}

impl Attention {
    fn forward(
        &self,
        x: &Tensor,
        view: &CacheView<'_>,
        start: usize,
        inputs: &PassInputs,
    ) -> Result<Tensor> {
        let cache = view.layer;
        let (rows, columns) = (inputs.rows, inputs.columns);
        let heads = |t: Tensor, n: usize| {
            let t = match &inputs.ragged {
                Some(ragged) => ragged.spread(&t)?,
                None => t,
            };
            t.reshape((rows, columns, n, self.head_dim))?
                .transpose(1, 2)?
                .contiguous()
        };
        let [q, k, v] = QLinear::forward_all([&self.wq, &self.wk, &self.wv], x)?;
        // A prompt pass on the CPU moves its heads in one parallel pass each, rotating as it
        // goes; a decode step's single column needs no transpose.
        let prompt_on_cpu = columns > 1 && x.device().is_cpu();
        let head_shape = |heads: usize| HeadShape {
            rows,
            columns,
            heads,
            head_dim: self.head_dim,
        };
        let (q, k, v) = if prompt_on_cpu {
            let slots = inputs.ragged.as_ref().map(|r| r.spread_slots.as_slice());
            let rope = Some((&inputs.cos, &inputs.sin));
            (
                split_heads(&q, slots, head_shape(self.head_count), rope)?,
                split_heads(&k, slots, head_shape(self.head_count_kv), rope)?,
                split_heads(&v, slots, head_shape(self.head_count_kv), None)?,
            )
        } else {
            let q = heads(q, self.head_count)?;
            let k = heads(k, self.head_count_kv)?;
            let v = heads(v, self.head_count_kv)?;
            (
                candle_nn::rotary_emb::rope_i(&q, &inputs.cos, &inputs.sin)?,
                candle_nn::rotary_emb::rope_i(&k, &inputs.cos, &inputs.sin)?,
                v,
            )
        };

        // Written in place: the cache never moves while a batch decodes.
        if k.device().is_cpu() {
            write_columns(&cache.k, &k, start)?;
            write_columns(&cache.v, &v, start)?;
        } else {
            cache.k.slice_set(&k, 2, start)?;
            cache.v.slice_set(&v, 2, start)?;
        }
        let shape = AttentionShape {
            rows,
            queries: columns,
            heads: self.head_count,
            kv_heads: self.head_count_kv,
            head_dim: self.head_dim,
            columns: start + columns,
        };
        // On the CPU a decode step's attention reads the cache line by line; a prompt pass's
        // many queries multiply as gemm products per (row, key/value head) (a loop of dot
        // products over them was 13% of an answer's samples, against about 5% for gemm). GPUs
        // run candle's.
        let y = if columns == 1 && q.device().is_cpu() {
            cpu_attention(
                &q,
                &cache.k,
                &cache.v,
                inputs.mask.as_ref(),
                shape,
                view.lines,
            )?
        } else if q.device().is_cpu() {
            cpu_prompt_attention(&q, &cache.k, &cache.v, inputs.mask.as_ref(), shape)?
        } else {
            candle_attention(&q, &cache.k, &cache.v, inputs.mask.as_ref(), shape)?
        };
        if prompt_on_cpu {
            let gather = inputs.ragged.as_ref().map(|r| r.gather_slots.as_slice());
            return self
                .wo
                .forward(&merge_heads(&y, gather, head_shape(self.head_count))?);
        }
        let y = y
            .transpose(1, 2)?
            .reshape((rows, columns, self.head_count * self.head_dim))?;
        match &inputs.ragged {
            Some(ragged) => self.wo.forward(&ragged.gather(&y)?),
            None => self.wo.forward(&y),
        }
    }
}

/// The SwiGLU feed-forward network of one block.
#[derive(Debug, Clone)]
struct FeedForward {
    gate: QLinear,
    up: QLinear,
    down: QLinear,
}

impl Module for FeedForward {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let gated = match (&self.gate, &self.up) {
            (QLinear::Packed(gate), QLinear::Packed(up)) => gate.gated_forward(up, x)?,
            (gate, up) => (candle_nn::ops::silu(&gate.forward(x)?)? * up.forward(x)?)?,
        };
        self.down.forward(&gated)
    }
}

/// One transformer block: pre-norm attention and pre-norm feed-forward, each with a residual.
#[derive(Debug, Clone)]
struct Block {
    attention_norm: RmsNorm,
    attention: Attention,
    ffn_norm: RmsNorm,
    feed_forward: FeedForward,
}

impl Block {
    fn forward(
        &self,
        x: &Tensor,
        view: &CacheView<'_>,
        start: usize,
        inputs: &PassInputs,
    ) -> Result<Tensor> {
        let attended =
            self.attention
                .forward(&self.attention_norm.forward(x)?, view, start, inputs)?;
        let x = (attended + x)?;
        let fed = self.feed_forward.forward(&self.ffn_norm.forward(&x)?)?;
        fed + x
    }
}

/// The angle per position of each pair of head dimensions: llama.cpp's `ggml_rope_ext` with
/// `freq_scale` and `freq_factors`, `θᵢ = freq_scale · base^(−2i/head_dim) / factorᵢ`.
/// Without scaling or factors (Llama-2) this is `1 / base^(2i/head_dim)`, bit for bit as before.
#[derive(Debug, Clone, PartialEq)]
struct RopeFrequencies(Vec<f32>);

impl RopeFrequencies {
    /// `factors`: Llama-3.1's `rope_freqs.weight`, one divisor per pair, or `None`.
    fn new(head_dim: usize, base: f32, scale: f32, factors: Option<&[f32]>) -> Result<Self> {
        if let Some(factors) = factors
            && (factors.len() != head_dim / 2 || !factors.iter().all(|f| f.is_finite() && *f > 0.0))
        {
            candle_core::bail!(
                "`{ROPE_FREQS}` must hold {} positive factors, one per pair of head dimensions",
                head_dim / 2
            );
        }
        #[allow(clippy::cast_precision_loss)]
        let theta = (0..head_dim)
            .step_by(2)
            .map(|i| {
                let theta = 1f32 / base.powf(i as f32 / head_dim as f32);
                let theta = if scale == 1.0 { theta } else { theta * scale };
                match factors {
                    Some(factors) => theta / factors[i / 2],
                    None => theta,
                }
            })
            .collect();
        Ok(Self(theta))
    }
}

/// RoPE `cos` and `sin` tables (`[positions, head_dim / 2]`), computed as candle does and grown
/// on demand up to the context length.
#[derive(Debug, Clone)]
struct RotaryTables {
    cos: Tensor,
    sin: Tensor,
    positions: usize,
}

impl RotaryTables {
    fn new(frequencies: &RopeFrequencies, positions: usize, device: &Device) -> Result<Self> {
        let theta = Tensor::new(frequencies.0.as_slice(), device)?;
        let count = u32::try_from(positions)
            .map_err(|_| candle_core::Error::Msg(format!("{positions} positions")))?;
        let angles = Tensor::arange(0, count, device)?
            .to_dtype(DType::F32)?
            .reshape((positions, 1))?
            .matmul(&theta.reshape((1, theta.elem_count()))?)?;
        Ok(Self {
            cos: angles.cos()?,
            sin: angles.sin()?,
            positions,
        })
    }
}

/// Opens (sets to 0) the entries of `line` that the last of the cache columns `attend` may see:
/// the columns of real tokens, and with a `window` of `w` only those whose position is less
/// than `w` before its own, as llama.cpp's standard sliding window
/// (`llama_hparams::is_masked_swa`: a key at position `p0` is hidden from a query at `p1` when
/// `p1 − p0 ≥ w`). A row's positions count its real tokens, so the last `w` of them stay.
fn sliding_window(attend: &[bool], window: Option<usize>, line: &mut [f32]) {
    let mut seen = 0;
    for (value, &real) in line.iter_mut().zip(attend).rev() {
        if real {
            if window.is_some_and(|w| seen >= w) {
                break;
            }
            *value = 0.0;
            seen += 1;
        }
    }
}

/// What the cache knows about one row.
#[derive(Debug, Clone, Default)]
struct RowState {
    /// For every cache column: whether this row's real tokens may attend to it (false for pads).
    attend: Vec<bool>,
    /// The RoPE position of this row's next real token.
    next_position: usize,
}

/// The KV cache of every block and row.
#[derive(Debug, Default)]
struct KvCache {
    layers: Vec<LayerCache>,
    rows: Vec<RowState>,
    /// Filled columns (the same for every row).
    columns: usize,
    /// Allocated columns.
    capacity: usize,
}

/// A quantized Llama with a per-row KV cache. Call [`forward`](Self::forward) with the new tokens
/// of every row; [`clear_kv_cache`](Self::clear_kv_cache) before an unrelated batch.
///
/// Not `Clone`: the cache is written in place, so clones would overwrite each other's rows.
pub struct QuantizedLlama {
    config: LlamaConfig,
    /// Kept quantized and dequantized row by row on lookup: the f32 table of a 7B model alone
    /// would take 0.5 GB.
    embeddings: Arc<QTensor>,
    blocks: Vec<Block>,
    norm: RmsNorm,
    output: QLinear,
    /// The angle per position of each pair of head dimensions.
    frequencies: RopeFrequencies,
    rotary: RotaryTables,
    cache: KvCache,
    /// How the cache holds keys and values (from its next batch).
    cache_precision: CachePrecision,
    /// The vector code that reads an f16 or 8-bit cache on this CPU.
    lines: CacheSimd,
    /// Columns to allocate when the cache is created or grows, so that it grows at most once.
    reserved_columns: usize,
    device: Device,
    /// Which CPU kernels the Q4_K and Q6_K matrices were made for.
    kernel_choice: KernelChoice,
    /// How far ahead the packed tiles' decode kernel reads (set by [`Self::choose_prefetch`]).
    prefetch_choice: PrefetchChoice,
    /// When set, a forward pass stops before its next block (see [`Self::set_interrupt`]).
    interrupt: Option<Arc<AtomicBool>>,
}

impl std::fmt::Debug for QuantizedLlama {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuantizedLlama")
            .field("config", &self.config)
            .field("device", &self.device)
            .field("rows", &self.cache.rows.len())
            .field("columns", &self.cache.columns)
            .finish_non_exhaustive()
    }
}

/// Where the weights come from: the GGUF's reader, and on the CPU a map of the same file whose
/// quantized tensors are used in place ([`MappedGguf`]).
struct WeightSource<'a, R> {
    content: &'a gguf_file::Content,
    reader: &'a mut R,
    mapped: Option<&'a MappedGguf>,
    device: &'a Device,
    /// The kernels the Q4_K and Q6_K matrices are made for.
    kernels: CpuKernels,
}

impl<R: Read + Seek> WeightSource<'_, R> {
    /// Reads tensor `name` and checks its shape against what the metadata implies.
    fn tensor(&mut self, name: &str, shape: &[usize]) -> Result<QTensor> {
        Ok(self.tensor_and_origin(name, shape)?.0)
    }

    /// Tensor `name`, and whether it is backed by the map.
    fn tensor_and_origin(&mut self, name: &str, shape: &[usize]) -> Result<(QTensor, bool)> {
        let in_map = match (self.mapped, self.content.tensor_infos.get(name)) {
            (Some(mapped), Some(info)) => mapped.tensor(info)?,
            _ => None,
        };
        let mapped = in_map.is_some();
        let tensor = match in_map {
            Some(tensor) => tensor,
            None => self.content.tensor(self.reader, name, self.device)?,
        };
        if tensor.shape().dims() != shape {
            candle_core::bail!(
                "tensor `{name}` has shape {:?}, the metadata implies {shape:?}",
                tensor.shape().dims()
            );
        }
        Ok((tensor, mapped))
    }

    /// Weight matrix `name` (`[n, k]`). Once packed (here into tiles, or by candle on its first
    /// product, which a throw-away product of two rows triggers now), a matrix read from the
    /// map has its blocks released from memory.
    fn matmul(&mut self, name: &str, shape: &[usize]) -> Result<QLinear> {
        let (weights, mapped) = self.tensor_and_origin(name, shape)?;
        let linear = QLinear::new(Arc::new(weights), self.device, self.kernels)?;
        if let (true, Some(map), Some(info), [_, k]) = (
            mapped,
            self.mapped,
            self.content.tensor_infos.get(name),
            shape,
        ) {
            match &linear {
                QLinear::Candle { matmul, .. } => {
                    matmul.forward(&Tensor::zeros((2, *k), DType::F32, self.device)?)?;
                }
                // Multiplied from the map's blocks on every product: nothing to release.
                QLinear::Blocks(_) => return Ok(linear),
                QLinear::Packed(_) => {}
            }
            map.release(info);
        }
        Ok(linear)
    }
}

impl QuantizedLlama {
    /// Loads the model from the GGUF at `path`, whose header is `content`, onto `device`; on the
    /// CPU from `mapped`, a map of the same file, where it can, with its Q4_K and Q6_K matrices
    /// made for the kernels `policy` chooses.
    pub fn from_gguf<R: Read + Seek>(
        path: &Path,
        content: &gguf_file::Content,
        reader: &mut R,
        mapped: Option<&MappedGguf>,
        device: &Device,
        policy: KernelPolicy,
    ) -> std::result::Result<Self, ModelError> {
        let config = LlamaConfig::from_gguf(content, path)?;
        check_weight_types(content, path)?;
        let source = WeightSource {
            content,
            reader,
            mapped: mapped.filter(|_| device.is_cpu()),
            device,
            kernels: CpuKernels::Candle,
        };
        Self::from_config(config, source, policy).map_err(|e| ModelError::InvalidGguf {
            path: path.to_owned(),
            reason: e.to_string(),
        })
    }

    fn from_config<R: Read + Seek>(
        config: LlamaConfig,
        mut source: WeightSource<'_, R>,
        policy: KernelPolicy,
    ) -> Result<Self> {
        let c = &config;
        let device = source.device;
        let kernel_choice = {
            let name = "blk.0.ffn_up.weight";
            // Read only where both kernels can run and the choice is to be timed.
            let timed = device.is_cpu() && policy.measures() && crate::packed::cpu_supported();
            let sample = match (timed, source.content.tensor_infos.get(name)) {
                (true, Some(_)) => Some((
                    name,
                    Arc::new(source.tensor(name, &[c.feed_forward_length, c.embedding_length])?),
                )),
                _ => None,
            };
            let started = std::time::Instant::now();
            let choice = crate::cpu_kernels::choose(&policy, sample, device)?;
            tracing::info!(
                seconds = started.elapsed().as_secs_f64(),
                kernels = %choice,
                "CPU kernels chosen"
            );
            choice
        };
        source.kernels = kernel_choice.kernels();
        let embd = c.embedding_length;
        let kv_dim = c.head_count_kv * c.head_dim;
        let norm =
            |t: QTensor| -> Result<RmsNorm> { RmsNorm::from_qtensor(t, config.rms_norm_eps) };

        let embeddings = Arc::new(source.tensor("token_embd.weight", &[c.vocab_size, embd])?);
        let final_norm = norm(source.tensor("output_norm.weight", &[embd])?)?;
        // Models with tied embeddings have no `output.weight`.
        let output = if source.content.tensor_infos.contains_key("output.weight") {
            source.matmul("output.weight", &[c.vocab_size, embd])?
        } else {
            QLinear::new(embeddings.clone(), device, source.kernels)?
        };
        let mut blocks = Vec::with_capacity(c.block_count);
        for i in 0..c.block_count {
            let name = |part: &str| format!("blk.{i}.{part}.weight");
            let attention = Attention {
                wq: source.matmul(&name("attn_q"), &[embd, embd])?,
                wk: source.matmul(&name("attn_k"), &[kv_dim, embd])?,
                wv: source.matmul(&name("attn_v"), &[kv_dim, embd])?,
                wo: source.matmul(&name("attn_output"), &[embd, embd])?,
                head_count: c.head_count,
                head_count_kv: c.head_count_kv,
                head_dim: c.head_dim,
            };
            let feed_forward = FeedForward {
                gate: source.matmul(&name("ffn_gate"), &[c.feed_forward_length, embd])?,
                up: source.matmul(&name("ffn_up"), &[c.feed_forward_length, embd])?,
                down: source.matmul(&name("ffn_down"), &[embd, c.feed_forward_length])?,
            };
            blocks.push(Block {
                attention_norm: norm(source.tensor(&name("attn_norm"), &[embd])?)?,
                attention,
                ffn_norm: norm(source.tensor(&name("ffn_norm"), &[embd])?)?,
                feed_forward,
            });
        }
        let cache_precision = precision_for_head(default_cache_precision(device), c.head_dim);
        let factors = if c.rope_freq_factors {
            let factors = source.tensor(ROPE_FREQS, &[c.head_dim / 2])?;
            Some(factors.dequantize(&Device::Cpu)?.to_vec1::<f32>()?)
        } else {
            None
        };
        let frequencies = RopeFrequencies::new(
            c.head_dim,
            c.rope_freq_base,
            c.rope_freq_scale,
            factors.as_deref(),
        )?;
        // Grown on demand (see `forward`): long-context models need not pay for unused positions.
        let rotary = RotaryTables::new(&frequencies, c.context_length.min(256), device)?;
        Ok(Self {
            config,
            embeddings,
            blocks,
            norm: final_norm,
            output,
            frequencies,
            rotary,
            cache: KvCache::default(),
            cache_precision,
            lines: CacheSimd::detect(),
            reserved_columns: 0,
            device: device.clone(),
            kernel_choice,
            prefetch_choice: PrefetchChoice::Default(PrefetchDefault::NothingPacked),
            interrupt: None,
        })
    }

    /// Which CPU kernels multiply the Q4_K and Q6_K matrices, and why.
    pub fn kernel_choice(&self) -> &KernelChoice {
        &self.kernel_choice
    }

    /// The hyper-parameters read from the GGUF metadata.
    pub fn config(&self) -> &LlamaConfig {
        &self.config
    }

    /// How many weight matrices are multiplied on this crate's packed tiles (Q4_K and Q6_K on
    /// CPUs with AVX-512 VNNI); the others go through candle's kernels.
    pub fn packed_matrices(&self) -> usize {
        self.matrices()
            .filter(|linear| matches!(linear, QLinear::Packed(_)))
            .count()
    }

    /// Whether every block's weight matrices are multiplied on this crate's packed tiles, so
    /// that no product of a prompt pass's rows reaches candle's kernels (see
    /// `generator::PREFILL_TOKENS`); the output layer multiplies each row's last token only.
    pub fn all_blocks_packed(&self) -> bool {
        self.block_matrices()
            .all(|linear| matches!(linear, QLinear::Packed(_)))
    }

    /// Every weight matrix: the output layer's and the blocks'.
    fn matrices(&self) -> impl Iterator<Item = &QLinear> {
        std::iter::once(&self.output).chain(self.block_matrices())
    }

    /// Chooses the packed tiles' decode prefetch distance as `policy` says, timed over this
    /// model's packed matrices in the order a step reads them (the blocks', then the output
    /// layer's), recalled from and kept in `memory` where there is one (see
    /// [`crate::decode_prefetch`]), and sets it for the process.
    pub(crate) fn choose_prefetch(
        &mut self,
        policy: PrefetchPolicy,
        memory: Option<&KernelMemory>,
    ) -> Result<&PrefetchChoice> {
        let packed: Vec<&PackedMatrix> = self
            .block_matrices()
            .chain(std::iter::once(&self.output))
            .filter_map(|linear| match linear {
                QLinear::Packed(packed) => Some(packed.as_ref()),
                QLinear::Blocks(_) | QLinear::Candle { .. } => None,
            })
            .collect();
        let started = std::time::Instant::now();
        let choice = crate::decode_prefetch::choose(policy, &packed, memory)?;
        tracing::info!(
            seconds = started.elapsed().as_secs_f64(),
            prefetch = %choice,
            "decode prefetch chosen"
        );
        self.prefetch_choice = choice;
        Ok(&self.prefetch_choice)
    }

    /// How far ahead the packed tiles' decode kernel reads, and why.
    pub fn prefetch_choice(&self) -> &PrefetchChoice {
        &self.prefetch_choice
    }

    /// Each block's seven weight matrices.
    fn block_matrices(&self) -> impl Iterator<Item = &QLinear> {
        self.blocks.iter().flat_map(|b| {
            let (a, f) = (&b.attention, &b.feed_forward);
            [&a.wq, &a.wk, &a.wv, &a.wo, &f.gate, &f.up, &f.down]
        })
    }

    /// A flag that, once set, stops a forward pass before its next block (a 124-token pass of
    /// a 7B model takes seconds; a block, a thirty-second of that): the pass then fails, and
    /// the cache is left half-written, to be cleared. `None` runs every pass to its end.
    pub fn set_interrupt(&mut self, flag: Option<Arc<AtomicBool>>) {
        self.interrupt = flag;
    }

    /// Rows in the KV cache (0 before the first forward pass).
    pub fn rows(&self) -> usize {
        self.cache.rows.len()
    }

    /// Filled cache columns, the same for every row (pads included).
    pub fn columns(&self) -> usize {
        self.cache.columns
    }

    /// Runs one throw-away step of two rows, so that candle packs every weight matrix for its
    /// SIMD kernels now (it does so on first use, and keeps the packed copy) rather than during
    /// the first question; llama.cpp repacks at load time too. Leaves the cache empty.
    pub fn warm_up(&mut self) -> Result<()> {
        self.clear_kv_cache();
        // Token 0 is in every vocabulary; what it gives is thrown away.
        let result = self.forward(&[&[0], &[0]]);
        self.clear_kv_cache();
        result.map(|_| ())
    }

    /// How the KV cache holds keys and values.
    pub fn cache_precision(&self) -> CachePrecision {
        self.cache_precision
    }

    /// Holds keys and values in `precision` from the next batch on (off the CPU, f32 always;
    /// 8 bits only where a head is a whole number of blocks, else f16; [`Self::cache_precision`]
    /// says which). Empties the cache.
    pub fn set_cache_precision(&mut self, precision: CachePrecision) {
        self.cache_precision = self.cache_precision_for(precision);
        self.clear_kv_cache();
    }

    /// The precision [`Self::set_cache_precision`] puts in force when asked for `precision`:
    /// f32 off the CPU, and f16 for 8 bits where a head is not a whole number of blocks.
    pub fn cache_precision_for(&self, precision: CachePrecision) -> CachePrecision {
        if self.device.is_cpu() {
            precision_for_head(precision, self.config.head_dim)
        } else {
            CachePrecision::F32
        }
    }

    /// Empties the KV cache; the next forward pass starts a new batch with as many rows as it has.
    pub fn clear_kv_cache(&mut self) {
        self.cache = KvCache::default();
        self.reserved_columns = 0;
    }

    /// Sizes the cache for `columns` columns when the next forward pass creates or grows it, or
    /// [`select_rows`](Self::select_rows) forks it, so it grows at most once (growing copies
    /// it).
    pub fn reserve(&mut self, columns: usize) {
        self.reserved_columns = columns;
    }

    /// Keeps the first `columns` columns of a one-row cache without pads (a prompt read before,
    /// whose start the next batch begins with) and forgets the rest; the next pass continues
    /// from there. Refuses any other cache, which stays as it was.
    pub fn truncate(&mut self, columns: usize) -> Result<()> {
        let [row] = self.cache.rows.as_mut_slice() else {
            candle_core::bail!("only a cache of one row can be cut");
        };
        if columns > self.cache.columns || row.attend[..columns].iter().any(|&a| !a) {
            candle_core::bail!(
                "cannot keep {columns} of {} cache columns",
                self.cache.columns
            );
        }
        row.attend.truncate(columns);
        row.next_position = columns;
        self.cache.columns = columns;
        Ok(())
    }

    /// Keeps the cache rows at `rows`, in that order; an index may repeat. Forks a one-row
    /// prefix into every row of a batch (`&[0; k]`) and drops finished rows.
    pub fn select_rows(&mut self, rows: &[usize]) -> Result<()> {
        let count = self.cache.rows.len();
        if rows.is_empty() || count == 0 {
            candle_core::bail!("select_rows needs a filled cache and at least one row");
        }
        let indices = rows
            .iter()
            .map(|&r| {
                if r < count {
                    u32::try_from(r).map_err(|_| candle_core::Error::Msg(format!("row {r}")))
                } else {
                    Err(candle_core::Error::Msg(format!(
                        "row {r} is not in a cache of {count} rows"
                    )))
                }
            })
            .collect::<Result<Vec<u32>>>()?;
        let columns = self.cache.columns;
        if !self.device.is_cpu() {
            let indices = Tensor::new(indices.as_slice(), &self.device)?;
            for layer in &mut self.cache.layers {
                layer.k = layer.k.index_select(&indices, 0)?;
                layer.v = layer.v.index_select(&indices, 0)?;
            }
        } else if rows.windows(2).all(|pair| pair[0] < pair[1]) {
            // Finished rows dropped: the others move down in place.
            for layer in &mut self.cache.layers {
                layer.k = keep_rows(&layer.k, rows, columns)?;
                layer.v = keep_rows(&layer.v, rows, columns)?;
            }
        } else {
            // A prefix forked into every row: a new cache, sized at once for the reservation.
            let capacity = self.cache.capacity.max(self.reserved_columns);
            for layer in &mut self.cache.layers {
                layer.k = gather_rows(&layer.k, rows, columns, capacity)?;
                layer.v = gather_rows(&layer.v, rows, columns, capacity)?;
            }
            self.cache.capacity = capacity;
        }
        self.cache.rows = rows.iter().map(|&r| self.cache.rows[r].clone()).collect();
        Ok(())
    }

    /// Runs the new tokens of every row (`rows[i]` continues cache row `i`; rows may have
    /// different lengths and are padded on the left) and returns the f32 logits `[rows, vocab]`
    /// at the last column. A row given no tokens gets meaningless logits.
    ///
    /// The first pass after `clear_kv_cache` fixes the number of rows; later passes must give
    /// that many (see [`select_rows`](Self::select_rows)).
    pub fn forward(&mut self, rows: &[&[u32]]) -> Result<Tensor> {
        let (x, last) = self.pass(rows)?;
        let hidden = x.dim(candle_core::D::Minus1)?;
        let last = x
            .reshape(((), hidden))?
            .index_select(&Tensor::new(last.as_slice(), &self.device)?, 0)?;
        self.output
            .forward(&self.norm.forward(&last)?)?
            .to_dtype(DType::F32)
    }

    /// As [`Self::forward`], without the logits: a pass of a prompt whose next token is not
    /// read yet skips the output layer (for a 7B model, 131 M multiply-adds a row).
    pub fn advance(&mut self, rows: &[&[u32]]) -> Result<()> {
        self.pass(rows).map(drop)
    }

    /// The pass of [`Self::forward`] through the blocks: the hidden states before the final
    /// norm, `[rows, width, hidden]`, or `[1, tokens, hidden]` for the real tokens alone when
    /// some rows were padded ([`Ragged`]); and for every row, the line of its last token in
    /// those states seen as `[lines, hidden]` (some other row's for a row given no tokens).
    fn pass(&mut self, rows: &[&[u32]]) -> Result<(Tensor, Vec<u32>)> {
        let batch = rows.len();
        let width = rows.iter().map(|r| r.len()).max().unwrap_or(0);
        if batch == 0 || width == 0 {
            candle_core::bail!("a forward pass needs at least one token");
        }
        if self.cache.rows.is_empty() {
            self.cache.rows = vec![RowState::default(); batch];
        } else if self.cache.rows.len() != batch {
            candle_core::bail!(
                "{batch} rows given to a KV cache of {} rows",
                self.cache.rows.len()
            );
        }
        let start = self.cache.columns;
        let end = start + width;
        let context = self.config.context_length;

        let line =
            |i: usize| u32::try_from(i).map_err(|_| candle_core::Error::Msg(format!("{i} tokens")));
        let real = rows.iter().map(|r| r.len()).sum::<usize>();
        let padded = real < batch * width;
        let (mut spread, mut gather) = (Vec::new(), Vec::new());
        let mut last = Vec::with_capacity(batch);
        let mut ids = Vec::with_capacity(batch * width);
        let mut positions = Vec::with_capacity(batch * width);
        let mut last_position = 0;
        for (row, (tokens, state)) in rows.iter().zip(&mut self.cache.rows).enumerate() {
            let pad = width - tokens.len();
            if padded {
                spread.extend(std::iter::repeat_n(0, pad));
                for slot in row * width + pad..(row + 1) * width {
                    gather.push(line(slot)?);
                    spread.push(line(gather.len())?);
                }
                last.push(line(gather.len().saturating_sub(1))?);
            } else {
                last.push(line(row * width + width - 1)?);
            }
            ids.extend_from_slice(tokens);
            if state.next_position + tokens.len() > context {
                candle_core::bail!(
                    "{} positions exceed the context length of {context}",
                    state.next_position + tokens.len()
                );
            }
            // A pad's position is never seen by a real token; 0 is always in the table.
            positions.extend(std::iter::repeat_n(0, pad));
            for _ in tokens.iter() {
                positions.push(
                    u32::try_from(state.next_position)
                        .map_err(|_| candle_core::Error::Msg("position".to_owned()))?,
                );
                last_position = last_position.max(state.next_position);
                state.next_position += 1;
            }
            state.attend.extend(std::iter::repeat_n(false, pad));
            state.attend.extend(std::iter::repeat_n(true, tokens.len()));
        }

        self.ensure_capacity(batch, end)?;
        if last_position >= self.rotary.positions {
            let positions = (last_position + 1)
                .max(2 * self.rotary.positions)
                .min(context);
            self.rotary = RotaryTables::new(&self.frequencies, positions, &self.device)?;
        }
        let positions = Tensor::new(positions.as_slice(), &self.device)?;
        let half = self.config.head_dim / 2;
        let ragged = if padded {
            Some(Ragged {
                spread: Tensor::new(spread.as_slice(), &self.device)?,
                gather: Tensor::new(gather.as_slice(), &self.device)?,
                spread_slots: spread,
                gather_slots: gather,
            })
        } else {
            None
        };
        let inputs = PassInputs {
            rows: batch,
            columns: width,
            cos: self
                .rotary
                .cos
                .index_select(&positions, 0)?
                .reshape((batch, width, half))?,
            sin: self
                .rotary
                .sin
                .index_select(&positions, 0)?
                .reshape((batch, width, half))?,
            mask: self.mask(start, width)?,
            ragged,
        };

        let ids = if padded {
            Tensor::from_vec(ids, (1, real), &self.device)?
        } else {
            Tensor::from_vec(ids, (batch, width), &self.device)?
        };
        let mut x = self.embeddings.embedding(&ids)?;
        for (block, layer) in self.blocks.iter().zip(&self.cache.layers) {
            if let Some(flag) = &self.interrupt
                && flag.load(Ordering::Relaxed)
            {
                candle_core::bail!("the forward pass was interrupted");
            }
            let view = CacheView {
                layer,
                lines: self.lines,
            };
            x = block.forward(&x, &view, start, &inputs)?;
        }
        self.cache.columns = end;
        Ok((x, last))
    }

    /// The additive mask for queries at columns `start..start + width`: a real token sees the
    /// real tokens of its row up to itself, and with a sliding window only the last
    /// [`LlamaConfig::sliding_window`] of them ([`sliding_window`]); a pad sees only itself,
    /// which keeps its (unused) values finite. `None` when that is every column for every row
    /// (one new column, no pads, no key past the window).
    fn mask(&self, start: usize, width: usize) -> Result<Option<Tensor>> {
        let end = start + width;
        let rows = &self.cache.rows;
        let window = self.config.sliding_window;
        let within_window = window.is_none_or(|w| end <= w);
        if width == 1 && within_window && rows.iter().all(|r| r.attend.iter().all(|&a| a)) {
            return Ok(None);
        }
        let mut mask = vec![f32::NEG_INFINITY; rows.len() * width * end];
        for (row, state) in rows.iter().enumerate() {
            for query in 0..width {
                let column = start + query;
                let line = &mut mask[(row * width + query) * end..][..end];
                if state.attend[column] {
                    sliding_window(&state.attend[..=column], window, &mut line[..=column]);
                } else {
                    line[column] = 0.0;
                }
            }
        }
        Tensor::from_vec(mask, (rows.len(), 1, width, end), &self.device).map(Some)
    }

    /// Makes room for `columns` columns in a cache of `rows` rows, creating it if needed.
    fn ensure_capacity(&mut self, rows: usize, columns: usize) -> Result<()> {
        let c = &self.config;
        // f32 off the CPU, and 8 bits only for whole blocks: `set_cache_precision`,
        // `default_cache_precision` and `precision_for_head` see to it.
        let Some((dtype, line)) = cache_layout(self.cache_precision, c.head_dim) else {
            candle_core::bail!(
                "a {:?} cache cannot hold heads of {} values",
                self.cache_precision,
                c.head_dim
            );
        };
        let zeros = |capacity: usize| {
            Tensor::zeros((rows, c.head_count_kv, capacity, line), dtype, &self.device)
        };
        if self.cache.layers.is_empty() {
            let capacity = columns.max(self.reserved_columns);
            self.cache.layers = (0..c.block_count)
                .map(|_| {
                    Ok(LayerCache {
                        k: zeros(capacity)?,
                        v: zeros(capacity)?,
                    })
                })
                .collect::<Result<_>>()?;
            self.cache.capacity = capacity;
        } else if columns > self.cache.capacity {
            // To the reservation, or past it by half again to keep copies rare.
            let capacity = if self.reserved_columns >= columns {
                self.reserved_columns
            } else {
                columns.max(self.cache.capacity + self.cache.capacity / 2)
            };
            if self.device.is_cpu() {
                let (all, filled): (Vec<usize>, _) = ((0..rows).collect(), self.cache.columns);
                for layer in &mut self.cache.layers {
                    layer.k = gather_rows(&layer.k, &all, filled, capacity)?;
                    layer.v = gather_rows(&layer.v, &all, filled, capacity)?;
                }
            } else {
                let extra = zeros(capacity - self.cache.capacity)?;
                for layer in &mut self.cache.layers {
                    layer.k = Tensor::cat(&[&layer.k, &extra], 2)?;
                    layer.v = Tensor::cat(&[&layer.v, &extra], 2)?;
                }
            }
            self.cache.capacity = capacity;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_setting_reads_q8_f16_f32_or_nothing_and_names_itself_otherwise() {
        let cpu = Device::Cpu;
        let parse = |value| parse_cache_precision(value, &cpu);
        assert_eq!(parse(" F32 "), Ok(CachePrecision::F32));
        assert_eq!(parse("f16"), Ok(CachePrecision::F16));
        for q8 in ["q8", "Q8_0"] {
            assert_eq!(parse(q8), Ok(CachePrecision::Q8));
        }
        // 8 bits for heads of whole blocks only.
        assert_eq!(
            precision_for_head(CachePrecision::Q8, 128),
            CachePrecision::Q8
        );
        assert_eq!(
            precision_for_head(CachePrecision::Q8, 16),
            CachePrecision::F16
        );
        assert_eq!(
            precision_for_head(CachePrecision::F32, 16),
            CachePrecision::F32
        );
        assert_eq!(parse(""), Ok(default_cache_precision(&cpu)));
        let wrong = parse("bf16").unwrap_err();
        assert!(
            wrong.contains("SELFRAG_KV_CACHE") && wrong.contains("bf16"),
            "{wrong}"
        );
    }

    fn state(attend: &[bool]) -> RowState {
        RowState {
            attend: attend.to_vec(),
            next_position: 0,
        }
    }

    #[test]
    fn a_single_row_times_q6k_gives_the_same_product_as_candle() {
        // A shape candle packs into tiles (rows a multiple of 16, columns of 256).
        let device = Device::Cpu;
        let (n, k) = (32, 512);
        let w: Vec<f32> = (0..n * k)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 400.0)
            .collect();
        let w = Tensor::from_vec(w, (n, k), &device).unwrap();
        let q = Arc::new(QTensor::quantize(&w, GgmlDType::Q6K).unwrap());
        let linear = QLinear::candle(QMatMul::from_arc(q.clone()).unwrap(), &device);
        assert!(matches!(
            linear,
            QLinear::Candle {
                pad_single_row: true,
                ..
            }
        ));
        let plain = QMatMul::from_arc(q).unwrap();
        let x: Vec<f32> = (0..3 * k)
            .map(|i| ((i * 13 % 29) as f32 - 14.0) / 10.0)
            .collect();
        let x = Tensor::from_vec(x, (3, 1, k), &device).unwrap();
        let one = x.narrow(0, 1, 1).unwrap();
        let ours = linear.forward(&one).unwrap();
        assert_eq!(ours.dims(), [1, 1, n]);
        let ours: Vec<f32> = ours.flatten_all().unwrap().to_vec1().unwrap();
        // Candle's compact single-row kernel, and the same row inside a three-row product.
        let theirs: Vec<f32> = plain
            .forward(&one)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap();
        let in_batch: Vec<f32> = plain
            .forward(&x)
            .unwrap()
            .narrow(0, 1, 1)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap();
        for ((a, b), c) in ours.iter().zip(&theirs).zip(&in_batch) {
            assert!((a - b).abs() <= 1e-4 * (1.0 + b.abs()), "{a} vs {b}");
            assert_eq!(a, c);
        }
        // Other types and several rows go straight through.
        let q8 = QTensor::quantize(&w, GgmlDType::Q8_0).unwrap();
        assert!(matches!(
            QLinear::candle(QMatMul::from_qtensor(q8).unwrap(), &device),
            QLinear::Candle {
                pad_single_row: false,
                ..
            }
        ));
        let rows: Vec<f32> = linear
            .forward(&x)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap();
        let expected: Vec<f32> = plain
            .forward(&x)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap();
        assert_eq!(rows, expected);
    }

    #[test]
    fn masks_hide_pads_and_the_future_but_keep_every_line_finite() {
        let device = Device::Cpu;
        let config = LlamaConfig {
            vocab_size: 4,
            embedding_length: 4,
            feed_forward_length: 4,
            block_count: 0,
            head_count: 1,
            head_count_kv: 1,
            head_dim: 4,
            rms_norm_eps: 1e-5,
            rope_freq_base: 10_000.0,
            rope_freq_scale: 1.0,
            rope_freq_factors: false,
            sliding_window: None,
            context_length: 8,
        };
        let weights = |rows: usize| {
            Tensor::zeros((rows, 4), DType::F32, &device)
                .and_then(|t| QTensor::quantize(&t, candle_core::quantized::GgmlDType::F32))
        };
        let embeddings = Arc::new(weights(4).unwrap());
        let mut model = QuantizedLlama {
            config,
            output: QLinear::candle(QMatMul::from_arc(embeddings.clone()).unwrap(), &device),
            embeddings,
            blocks: Vec::new(),
            norm: RmsNorm::from_qtensor(
                QTensor::quantize(
                    &Tensor::ones(4, DType::F32, &device).unwrap(),
                    candle_core::quantized::GgmlDType::F32,
                )
                .unwrap(),
                1e-5,
            )
            .unwrap(),
            frequencies: RopeFrequencies::new(4, 10_000.0, 1.0, None).unwrap(),
            rotary: RotaryTables::new(
                &RopeFrequencies::new(4, 10_000.0, 1.0, None).unwrap(),
                8,
                &device,
            )
            .unwrap(),
            cache: KvCache::default(),
            cache_precision: default_cache_precision(&device),
            lines: CacheSimd::detect(),
            reserved_columns: 0,
            device: device.clone(),
            kernel_choice: KernelChoice::Set(CpuKernels::Candle),
            prefetch_choice: PrefetchChoice::Default(PrefetchDefault::NothingPacked),
            interrupt: None,
        };
        // Row 0: two real tokens; row 1: a pad, then one real token.
        model.cache.rows = vec![state(&[true, true]), state(&[false, true])];
        let mask = model.mask(0, 2).unwrap().unwrap();
        let values: Vec<f32> = mask.flatten_all().unwrap().to_vec1().unwrap();
        let inf = f32::NEG_INFINITY;
        assert_eq!(values, [0.0, inf, 0.0, 0.0, 0.0, inf, inf, 0.0]);
        // A decode step after that: row 1 must still not see its pad.
        model.cache.rows[0].attend.push(true);
        model.cache.rows[1].attend.push(true);
        let mask = model.mask(2, 1).unwrap().unwrap();
        let values: Vec<f32> = mask.flatten_all().unwrap().to_vec1().unwrap();
        assert_eq!(values, [0.0, 0.0, 0.0, inf, 0.0, 0.0]);
        // No pads and one column: no mask at all.
        model.cache.rows = vec![state(&[true, true, true])];
        assert!(model.mask(2, 1).unwrap().is_none());

        // A window of 2: each query sees itself and the real token before it, pads skipped;
        // a decode step past the window needs a mask again.
        model.config.sliding_window = Some(2);
        model.cache.rows = vec![state(&[true, true, true]), state(&[false, true, true])];
        let mask = model.mask(0, 3).unwrap().unwrap();
        let values: Vec<f32> = mask.flatten_all().unwrap().to_vec1().unwrap();
        #[rustfmt::skip]
        assert_eq!(values, [
            0.0, inf, inf,   0.0, 0.0, inf,   inf, 0.0, 0.0,
            0.0, inf, inf,   inf, 0.0, inf,   inf, 0.0, 0.0,
        ]);
        model.cache.rows = vec![state(&[true, true]), state(&[true, true])];
        assert!(model.mask(1, 1).unwrap().is_none());
        model.cache.rows = vec![state(&[true, true, true]), state(&[false, true, true])];
        let mask = model.mask(2, 1).unwrap().unwrap();
        let values: Vec<f32> = mask.flatten_all().unwrap().to_vec1().unwrap();
        assert_eq!(values, [inf, 0.0, 0.0, inf, 0.0, 0.0]);
    }

    /// Q8_0, Q4_1 and Q5_1 matrices on the CPU are multiplied from their blocks with
    /// llama.cpp's activation quantization (the products: `block_products`' tests); the other
    /// types by candle.
    #[test]
    fn legacy_8_and_5_bit_matrices_multiply_from_their_blocks() {
        let device = Device::Cpu;
        let w = Tensor::from_vec(
            (0..64 * 256)
                .map(|i| (i % 13) as f32 * 0.01)
                .collect::<Vec<f32>>(),
            (64, 256),
            &device,
        )
        .unwrap();
        for (dtype, blocks) in [
            (GgmlDType::Q8_0, true),
            (GgmlDType::Q4_1, true),
            (GgmlDType::Q5_1, true),
            (GgmlDType::Q4_0, false),
            (GgmlDType::Q5_0, false),
        ] {
            let q = Arc::new(QTensor::quantize(&w, dtype).unwrap());
            let linear = QLinear::new(q, &device, CpuKernels::Candle).unwrap();
            assert_eq!(matches!(linear, QLinear::Blocks(_)), blocks, "{dtype:?}");
        }
    }

    #[test]
    fn rope_frequencies_scale_and_divide_as_llama_cpp_and_stay_bitwise_without_either() {
        let plain = RopeFrequencies::new(8, 10_000.0, 1.0, None).unwrap();
        let before: Vec<f32> = (0..8)
            .step_by(2)
            .map(|i| 1f32 / 10_000f32.powf(i as f32 / 8.0))
            .collect();
        assert_eq!(plain.0, before);
        let factors = [1.0, 2.0, 8.0, 32.0];
        let scaled = RopeFrequencies::new(8, 10_000.0, 0.25, Some(&factors)).unwrap();
        for ((s, p), f) in scaled.0.iter().zip(&plain.0).zip(factors) {
            assert!((s - p * 0.25 / f).abs() <= 1e-7 * p, "{s} {p} {f}");
        }
        assert!(RopeFrequencies::new(8, 10_000.0, 1.0, Some(&[1.0, 2.0, 0.0, 1.0])).is_err());
        assert!(RopeFrequencies::new(8, 10_000.0, 1.0, Some(&[1.0, 2.0])).is_err());
    }
}
