//! User-facing settings of one Self-RAG run, with the paper's defaults (SELFRAG.md).

use serde::{Deserialize, Serialize};

/// How the retrieve decision is made (SELFRAG.md step 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub enum RetrieveMode {
    /// Retrieve iff the normalised p([Retrieval]) is strictly greater than the threshold δ.
    #[default]
    Adaptive,
    /// Always retrieve.
    Always,
    /// Never retrieve.
    Never,
    /// Retrieve iff [Retrieval] is the argmax of the two Retrieve tokens.
    Model,
}

impl std::str::FromStr for RetrieveMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "adaptive" => Ok(Self::Adaptive),
            "always" => Ok(Self::Always),
            "never" => Ok(Self::Never),
            "model" => Ok(Self::Model),
            other => Err(format!(
                "unknown retrieve mode `{other}`: use adaptive, always, never or model"
            )),
        }
    }
}

/// Weights of the critique terms in the segment score `f` (SELFRAG.md step 5).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct CritiqueWeights {
    /// Weight of s_rel (IsRel).
    pub rel: f32,
    /// Weight of s_sup (IsSup).
    pub sup: f32,
    /// Weight of s_use (IsUse).
    #[serde(rename = "use")]
    pub use_: f32,
}

impl Default for CritiqueWeights {
    fn default() -> Self {
        // The paper's values; the reference CLI's w_use = 1.0 is a known defect.
        Self {
            rel: 1.0,
            sup: 1.0,
            use_: 0.5,
        }
    }
}

/// Everything that shapes one answer. Serialized into the trace as `settings`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct Settings {
    pub mode: RetrieveMode,
    /// δ: the retrieve threshold for `adaptive` mode.
    pub threshold: f32,
    /// K: passages retrieved, and so candidates written, per segment.
    pub k: usize,
    pub weights: CritiqueWeights,
    /// Include the length-normalised sequence probability p_LM in `f`.
    pub use_p_lm: bool,
    /// Drop unsupported or irrelevant candidates unless nothing would be left (step 6).
    pub hard_constraints: bool,
    /// Segment-level beam search instead of one segment.
    pub long_form: bool,
    /// B: beams kept in long form.
    pub beam_width: usize,
    /// Long form stops after this many segments.
    pub max_segments: usize,
    /// New-token limit of a short-form answer.
    pub max_new_tokens: usize,
    /// New-token limit of one long-form segment.
    pub max_segment_tokens: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            mode: RetrieveMode::Adaptive,
            threshold: 0.2,
            k: 5,
            weights: CritiqueWeights::default(),
            use_p_lm: true,
            hard_constraints: false,
            long_form: false,
            beam_width: 2,
            max_segments: 7,
            max_new_tokens: 100,
            max_segment_tokens: 200,
        }
    }
}
