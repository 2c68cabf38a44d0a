//! What sets a fixture Llama of another family apart from the Llama-2 layout of the tiny
//! Self-RAG model: its RoPE (frequency base, linear scaling, Llama-3.1's `rope_freqs.weight`
//! divisors), a sliding attention window, and the type of its embedding table. The metadata
//! keys are the ones llama.cpp's converter writes for `general.architecture = llama`.

use std::path::Path;

use candle_core::quantized::GgmlDType;
use candle_core::quantized::gguf_file::Value;

use crate::{FixtureError, LlamaFixture, TINY_LLAMA, write_llama};

/// The family traits of a fixture Llama ([`LLAMA_2`] for the Self-RAG model's own).
#[derive(Debug, Clone, Copy)]
pub(crate) struct LlamaFamily {
    /// `llama.rope.freq_base` (Llama-2 10,000; Llama-3 500,000).
    pub rope_freq_base: f32,
    /// `llama.rope.scaling.type = linear` with this `llama.rope.scaling.factor`.
    pub linear_rope_scaling: Option<f32>,
    /// Whether the file carries a `rope_freqs.weight` of `head_dim / 2` divisors, shaped like
    /// Llama-3.1's ([`llama31_rope_factors`]).
    pub rope_freqs: bool,
    /// `llama.attention.sliding_window`.
    pub sliding_window: Option<usize>,
    /// The type of `token_embd.weight` (llama.cpp's quantizer gives it the file's base type).
    pub embedding_type: GgmlDType,
    /// `llama.attention.layer_norm_rms_epsilon`.
    pub rms_epsilon: f32,
}

/// Llama-2: base 10,000, no scaling, no window, an f32 embedding table.
pub(crate) const LLAMA_2: LlamaFamily = LlamaFamily {
    rope_freq_base: 10_000.0,
    linear_rope_scaling: None,
    rope_freqs: false,
    sliding_window: None,
    embedding_type: GgmlDType::F32,
    rms_epsilon: TINY_RMS_EPSILON,
};

/// The RMS-norm epsilon of every fixture Llama, Llama-2's.
pub const TINY_RMS_EPSILON: f32 = 1e-5;

impl LlamaFamily {
    /// Puts these traits into `metadata` (as [`crate::llama_metadata`] wrote it for Llama-2):
    /// the RoPE base, and the scaling and window keys where there are any.
    pub(crate) fn apply(&self, metadata: &mut Vec<(&'static str, Value)>) {
        for (key, value) in metadata.iter_mut() {
            match *key {
                "llama.rope.freq_base" => *value = Value::F32(self.rope_freq_base),
                "llama.attention.layer_norm_rms_epsilon" => {
                    *value = Value::F32(self.rms_epsilon);
                }
                _ => {}
            }
        }
        if let Some(factor) = self.linear_rope_scaling {
            metadata.push((
                "llama.rope.scaling.type",
                Value::String("linear".to_owned()),
            ));
            metadata.push(("llama.rope.scaling.factor", Value::F32(factor)));
        }
        if let Some(window) = self.sliding_window {
            metadata.push((
                "llama.attention.sliding_window",
                Value::U32(u32::try_from(window).unwrap_or(u32::MAX)),
            ));
        }
    }
}

/// Mistral 7B v0.1's shape in small: 8 heads sharing 2 key/value heads, a 32,768-token
/// context, base 10,000, Q8_0 matrices. No `llama.attention.sliding_window`: llama.cpp's
/// converter writes none for Mistral v0.1 (`general.architecture = llama`), and llama.cpp's
/// `llama` architecture would not read one (src/models/llama.cpp builds full attention).
const TINY_MISTRAL: LlamaFixture = LlamaFixture {
    embd: 64,
    ff: 128,
    heads: 8,
    kv_heads: 2,
    blocks: 2,
    context: 32_768,
    ..TINY_LLAMA
};

/// Writes [`TINY_MISTRAL`]: the tiny Self-RAG Llama (SentencePiece vocabulary with the 16
/// reflection tokens) in Mistral 7B v0.1's shape, as llama.cpp converts
/// `SciPhi-Self-RAG-Mistral-7B-32k`.
pub fn write_tiny_mistral_gguf(path: &Path) -> Result<(), FixtureError> {
    write_llama(path, &TINY_MISTRAL)
}

/// Keys a query of [`write_tiny_windowed_llama_gguf`]'s model sees, itself included.
pub const TINY_SLIDING_WINDOW: usize = 32;

/// [`write_tiny_mistral_gguf`] with `llama.attention.sliding_window` = [`TINY_SLIDING_WINDOW`],
/// so that a prompt of 100 tokens attends through a window of 32.
pub fn write_tiny_windowed_llama_gguf(path: &Path) -> Result<(), FixtureError> {
    write_llama(
        path,
        &LlamaFixture {
            family: LlamaFamily {
                sliding_window: Some(TINY_SLIDING_WINDOW),
                ..LLAMA_2
            },
            ..TINY_MISTRAL
        },
    )
}

/// Llama-3.1's shape in small: 8 heads sharing 2 key/value heads (4:1), base 500,000, and a
/// `rope_freqs.weight` of [`llama31_rope_factors`], context 131,072, Q8_0 matrices; with the
/// SentencePiece vocabulary of the other fixtures (a BPE one is written elsewhere).
pub fn write_tiny_llama31_gguf(path: &Path) -> Result<(), FixtureError> {
    write_llama(
        path,
        &LlamaFixture {
            heads: 4,
            kv_heads: 1,
            context: 131_072,
            family: LlamaFamily {
                rope_freq_base: 500_000.0,
                rope_freqs: true,
                ..LLAMA_2
            },
            ..TINY_MISTRAL
        },
    )
}

/// The linear scaling factor of [`write_tiny_linear_rope_llama_gguf`].
pub const TINY_LINEAR_ROPE_FACTOR: f32 = 4.0;

/// The tiny Self-RAG Llama with `llama.rope.scaling.type = linear` and a factor of
/// [`TINY_LINEAR_ROPE_FACTOR`] (positions divided by it, as in Llama-2 models stretched to
/// 16k), context 2,048.
pub fn write_tiny_linear_rope_llama_gguf(path: &Path) -> Result<(), FixtureError> {
    write_llama(
        path,
        &LlamaFixture {
            context: 2048,
            family: LlamaFamily {
                linear_rope_scaling: Some(TINY_LINEAR_ROPE_FACTOR),
                ..LLAMA_2
            },
            ..TINY_LLAMA
        },
    )
}

/// The weight types of [`write_tiny_quant_llama_gguf`]: the ones published Llama GGUFs use
/// besides Q4_K_M's mix ([`WeightType::ALL`]), and f32, the unquantized reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightType {
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q5K,
    Q6K,
    Q8_0,
    F32,
}

impl WeightType {
    /// The quantized types.
    pub const ALL: [Self; 7] = [
        Self::Q4_0,
        Self::Q4_1,
        Self::Q5_0,
        Self::Q5_1,
        Self::Q5K,
        Self::Q6K,
        Self::Q8_0,
    ];

    /// llama.cpp's name of the type (`Q5_K`), as in file names.
    pub fn name(self) -> &'static str {
        match self {
            Self::Q4_0 => "Q4_0",
            Self::Q4_1 => "Q4_1",
            Self::Q5_0 => "Q5_0",
            Self::Q5_1 => "Q5_1",
            Self::Q5K => "Q5_K",
            Self::Q6K => "Q6_K",
            Self::Q8_0 => "Q8_0",
            Self::F32 => "F32",
        }
    }

    /// The width of the narrowest model whose rows hold whole blocks of this type: 256 for the
    /// K-quants' superblocks, else 64.
    pub fn narrowest_width(self) -> usize {
        match self {
            Self::Q5K | Self::Q6K => 256,
            _ => 64,
        }
    }

    /// The type of every matrix, as [`LlamaFixture::matrix_type`] gives it, and llama.cpp's
    /// `general.file_type` of a file all of that type (`LLAMA_FTYPE_MOSTLY_*`; Q5_K_S for Q5_K).
    fn layout(self) -> (fn(&str, usize) -> GgmlDType, u32) {
        match self {
            Self::Q4_0 => (|_, _| GgmlDType::Q4_0, 2),
            Self::Q4_1 => (|_, _| GgmlDType::Q4_1, 3),
            Self::Q5_0 => (|_, _| GgmlDType::Q5_0, 8),
            Self::Q5_1 => (|_, _| GgmlDType::Q5_1, 9),
            Self::Q5K => (|_, _| GgmlDType::Q5K, 16),
            Self::Q6K => (|_, _| GgmlDType::Q6K, 18),
            Self::Q8_0 => (|_, _| GgmlDType::Q8_0, 7),
            Self::F32 => (|_, _| GgmlDType::F32, 0),
        }
    }

    fn dtype(self) -> GgmlDType {
        (self.layout().0)("token_embd", 0)
    }
}

/// The tiny Self-RAG Llama with every matrix and the embedding table of type `weights`, at
/// its narrowest width ([`WeightType::narrowest_width`]): 64-d (feed-forward 128, 4 heads of
/// 16), or 256-d (feed-forward 512, 4 heads of 64, as [`crate::write_tiny_q4_k_m_llama_gguf`])
/// for Q5_K and Q6_K; 2 KV heads.
pub fn write_tiny_quant_llama_gguf(path: &Path, weights: WeightType) -> Result<(), FixtureError> {
    write_weight_type_llama_gguf(path, weights, weights.narrowest_width(), TINY_RMS_EPSILON)
}

/// [`write_tiny_quant_llama_gguf`] at `width` (a multiple of the type's block: 64 or 256),
/// feed-forward twice as wide, and with RMS-norm epsilon `rms_epsilon`: the parity tests
/// write the same weights with two epsilons to measure how far a model moves when its
/// arithmetic does by a last bit or so.
pub fn write_weight_type_llama_gguf(
    path: &Path,
    weights: WeightType,
    width: usize,
    rms_epsilon: f32,
) -> Result<(), FixtureError> {
    let (matrix_type, file_type) = weights.layout();
    write_llama(
        path,
        &LlamaFixture {
            embd: width,
            ff: 2 * width,
            heads: 4,
            kv_heads: 2,
            matrix_type,
            file_type,
            family: LlamaFamily {
                embedding_type: weights.dtype(),
                rms_epsilon,
                ..LLAMA_2
            },
            ..TINY_LLAMA
        },
    )
}

/// `rope_freqs.weight` for heads of `head_dim` values, computed as llama.cpp's converter does
/// for Llama-3.1 (`LlamaModel.generate_extra_tensors`, rope_type `llama3`: factor 8, low/high
/// frequency factors 1 and 4, original context 8192) but for a tiny model's base and head:
/// 1 for the fast-turning pairs, the factor 8 for the slow ones, a smooth ramp between. With
/// `base` 500,000 and 16-value heads the pairs span all three regions. Values lie in [1, 32].
pub(crate) fn llama31_rope_factors(head_dim: usize, base: f32) -> Vec<f32> {
    let (factor, low_freq_factor, high_freq_factor, old_context) = (8.0f32, 1.0f32, 4.0f32, 64.0);
    let low_freq_wavelen = old_context / low_freq_factor;
    let high_freq_wavelen = old_context / high_freq_factor;
    #[allow(clippy::cast_precision_loss)]
    (0..head_dim)
        .step_by(2)
        .map(|i| {
            let freq = 1.0 / base.powf(i as f32 / head_dim as f32);
            let wavelen = 2.0 * std::f32::consts::PI / freq;
            if wavelen < high_freq_wavelen {
                1.0
            } else if wavelen > low_freq_wavelen {
                factor
            } else {
                let smooth = (old_context / wavelen - low_freq_factor)
                    / (high_freq_factor - low_freq_factor);
                1.0 / ((1.0 - smooth) / factor + smooth)
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llama31_factors_span_one_to_eight_with_a_ramp_between() {
        let factors = llama31_rope_factors(16, 500_000.0);
        assert_eq!(factors.len(), 8);
        assert_eq!(factors[0], 1.0);
        assert_eq!(factors[7], 8.0);
        assert!(factors.iter().all(|f| (1.0..=32.0).contains(f)));
        assert!(
            factors.iter().any(|f| *f > 1.0 && *f < 8.0),
            "no ramp: {factors:?}"
        );
        assert!(factors.windows(2).all(|w| w[0] <= w[1]), "{factors:?}");
    }
}
