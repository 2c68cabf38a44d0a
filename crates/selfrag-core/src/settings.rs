//! User-facing settings of one Self-RAG run, with the paper's defaults (SELFRAG.md).

use serde::{Deserialize, Deserializer, Serialize};

use crate::error::SelfRagError;

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
    /// Retrieve iff [Retrieval] is the argmax over the whole vocabulary (what greedy decoding
    /// would write next), not only of the two Retrieve tokens.
    Model,
}

impl RetrieveMode {
    /// The retrieve decision of step 1, the one rule: from the normalised p([Retrieval]), the
    /// threshold δ, and whether [Retrieval] is the argmax over the whole vocabulary where that was
    /// read. `None` only in `model` mode without that reading (a trace asked in another mode
    /// cannot say what `model` mode would do without running the model again).
    pub fn retrieves(
        self,
        p_retrieve: f32,
        threshold: f32,
        retrieval_is_argmax: Option<bool>,
    ) -> Option<bool> {
        match self {
            Self::Adaptive => Some(p_retrieve > threshold),
            Self::Always => Some(true),
            Self::Never => Some(false),
            Self::Model => retrieval_is_argmax,
        }
    }
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

/// Which generated tokens p_LM, the length-normalised sequence probability of a segment, is
/// taken over (SELFRAG.md step 5): `exp(Σ log p / n)` over those n tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub enum PLmTokens {
    /// Every generated token: the reflection tokens and the closing `</s>` or Retrieve token
    /// included. The paper's y_t holds the reflection tokens it writes, and the reference takes
    /// `exp(cumulative_logprob / len(token_ids))` over every token vLLM generated
    /// (`run_short_form.py` lines 100–101 and 153).
    #[default]
    All,
    /// The segment's text tokens only, reflection tokens and `</s>` left out: this project's
    /// rule before issue 47, kept for comparison.
    Text,
}

impl std::str::FromStr for PLmTokens {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "all" => Ok(Self::All),
            "text" => Ok(Self::Text),
            other => Err(format!("unknown p_LM tokens `{other}`: use all or text")),
        }
    }
}

/// How long form's beam search compares paths whose segments are of different kinds
/// (written without a passage, with a fresh passage, or continuing a passage after
/// `[Continue to Use Evidence]`). Neither the paper nor the reference defines this: the
/// reference's beam expands retrieval nodes only (`run_long_form_static.py` lines 225–247).
/// See docs/SELF-RAG-FIDELITY.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub enum LongFormRanking {
    /// Like with like: a path is ranked by the mean of its segments' f, each divided by the
    /// most a segment of its kind can score (`[p_LM] + w_use` without a passage,
    /// `[p_LM] + w_rel + w_sup + w_use` with one), and a continued segment that writes no IsSup
    /// token carries the IsSup of the segment whose passage it reads on, as it carries its IsRel.
    #[default]
    Normalised,
    /// The mean of the segments' f as they are: a segment with a passage can score about 2
    /// more than one without, and a continued segment scores s_sup = 0 (the rule before
    /// issue 47, kept as a setting).
    Raw,
}

impl std::str::FromStr for LongFormRanking {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "normalised" | "normalized" => Ok(Self::Normalised),
            "raw" => Ok(Self::Raw),
            other => Err(format!(
                "unknown long-form ranking `{other}`: use normalised or raw"
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
    /// Which generated tokens p_LM is taken over.
    pub p_lm_tokens: PLmTokens,
    /// Drop unsupported or irrelevant candidates unless nothing would be left (step 6).
    pub hard_constraints: bool,
    /// Segment-level beam search instead of one segment.
    pub long_form: bool,
    /// B: beams kept in long form.
    pub beam_width: usize,
    /// Long form stops after this many segments.
    pub max_segments: usize,
    /// How long form's beam search compares paths whose segments are of different kinds.
    pub long_form_ranking: LongFormRanking,
    /// Most tokens a prompt and its continuation may take together: the fine-tuning length
    /// (2,048) by default, up to the model's context. Where a long-form path's carried passages
    /// would pass it, the oldest are left out first (every reflection token stays).
    pub prompt_budget: usize,
    /// New-token limit of a short-form answer.
    pub max_new_tokens: usize,
    /// New-token limit of one long-form segment.
    pub max_segment_tokens: usize,
}

/// The sequence length the 7B Self-RAG checkpoint was fine-tuned at (the reference's
/// `retrieval_lm/script_finetune_7b.sh` line 22, `--max_seq_length 2048`; the 13B's script says
/// 1536): the default prompt budget.
pub const FINE_TUNING_LENGTH: usize = 2048;

impl Default for Settings {
    fn default() -> Self {
        Self {
            mode: RetrieveMode::Adaptive,
            threshold: 0.2,
            k: 5,
            weights: CritiqueWeights::default(),
            use_p_lm: true,
            p_lm_tokens: PLmTokens::All,
            hard_constraints: false,
            long_form: false,
            beam_width: 2,
            max_segments: 7,
            long_form_ranking: LongFormRanking::Normalised,
            prompt_budget: FINE_TUNING_LENGTH,
            max_new_tokens: 100,
            max_segment_tokens: 200,
        }
    }
}

/// The ranges [`Settings::validate`] allows: wide enough for every use of the app and the
/// command line, narrow enough that no setting can run the machine out of memory or time.
pub mod limits {
    /// K, passages and candidates per segment.
    pub const K: (usize, usize) = (1, 50);
    /// A critique weight.
    pub const WEIGHT: (f32, f32) = (0.0, 100.0);
    /// B, beams in long form.
    pub const BEAM_WIDTH: (usize, usize) = (1, 16);
    /// Segments of a long-form answer.
    pub const MAX_SEGMENTS: (usize, usize) = (1, 64);
    /// New tokens of a short answer or of one long-form segment.
    pub const NEW_TOKENS: (usize, usize) = (1, 8192);
    /// Tokens of a prompt and its continuation; a budget past the model's context is held
    /// to the context.
    pub const PROMPT_BUDGET: (usize, usize) = (256, 131_072);
}

fn within<T: PartialOrd + std::fmt::Display>(
    name: &'static str,
    value: T,
    (low, high): (T, T),
    allowed: &'static str,
) -> Result<(), SelfRagError> {
    if value >= low && value <= high {
        Ok(())
    } else {
        Err(SelfRagError::InvalidSetting {
            name,
            value: value.to_string(),
            allowed,
        })
    }
}

impl CritiqueWeights {
    /// Every weight is a number from 0 to 100 (NaN is not).
    pub fn validate(&self) -> Result<(), SelfRagError> {
        let allowed = "a number from 0 to 100";
        within("w_rel", self.rel, limits::WEIGHT, allowed)?;
        within("w_sup", self.sup, limits::WEIGHT, allowed)?;
        within("w_use", self.use_, limits::WEIGHT, allowed)
    }
}

impl Settings {
    /// Every setting within its range ([`limits`]); the first one that is not is named.
    pub fn validate(&self) -> Result<(), SelfRagError> {
        within(
            "threshold",
            self.threshold,
            (0.0, 1.0),
            "a probability from 0 to 1",
        )?;
        within("k", self.k, limits::K, "from 1 to 50")?;
        self.weights.validate()?;
        within(
            "beam_width",
            self.beam_width,
            limits::BEAM_WIDTH,
            "from 1 to 16",
        )?;
        within(
            "max_segments",
            self.max_segments,
            limits::MAX_SEGMENTS,
            "from 1 to 64",
        )?;
        within(
            "max_new_tokens",
            self.max_new_tokens,
            limits::NEW_TOKENS,
            "from 1 to 8192",
        )?;
        within(
            "max_segment_tokens",
            self.max_segment_tokens,
            limits::NEW_TOKENS,
            "from 1 to 8192",
        )?;
        within(
            "prompt_budget",
            self.prompt_budget,
            limits::PROMPT_BUDGET,
            "from 256 to 131072 tokens",
        )
    }
}

/// [`Settings`] as a saved answer recorded them. A field this version added reads as the rule
/// the answer was written under when the trace lacks it (every trace saved before the field
/// existed), not as today's default: p_LM over text tokens, long form ranked by raw f, prompts
/// bounded by the model's context only. Settings files and requests take today's defaults.
pub(crate) fn deserialize_recorded<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Settings, D::Error> {
    #[derive(Deserialize)]
    struct Recorded {
        #[serde(flatten)]
        settings: Settings,
        p_lm_tokens: Option<PLmTokens>,
        long_form_ranking: Option<LongFormRanking>,
        prompt_budget: Option<usize>,
    }
    let recorded = Recorded::deserialize(deserializer)?;
    Ok(Settings {
        p_lm_tokens: recorded.p_lm_tokens.unwrap_or(PLmTokens::Text),
        long_form_ranking: recorded.long_form_ranking.unwrap_or(LongFormRanking::Raw),
        prompt_budget: recorded.prompt_budget.unwrap_or(limits::PROMPT_BUDGET.1),
        ..recorded.settings
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod validation_tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_each_out_of_range_setting_is_named() {
        Settings::default().validate().unwrap();
        let cases: Vec<(&str, Settings)> = vec![
            (
                "threshold",
                Settings {
                    threshold: 1.5,
                    ..Settings::default()
                },
            ),
            (
                "threshold",
                Settings {
                    threshold: f32::NAN,
                    ..Settings::default()
                },
            ),
            (
                "k",
                Settings {
                    k: 1_000_000_000,
                    ..Settings::default()
                },
            ),
            (
                "k",
                Settings {
                    k: 0,
                    ..Settings::default()
                },
            ),
            (
                "w_sup",
                Settings {
                    weights: CritiqueWeights {
                        sup: -1.0,
                        ..CritiqueWeights::default()
                    },
                    ..Settings::default()
                },
            ),
            (
                "w_use",
                Settings {
                    weights: CritiqueWeights {
                        use_: f32::INFINITY,
                        ..CritiqueWeights::default()
                    },
                    ..Settings::default()
                },
            ),
            (
                "beam_width",
                Settings {
                    beam_width: 0,
                    ..Settings::default()
                },
            ),
            (
                "max_segments",
                Settings {
                    max_segments: 10_000,
                    ..Settings::default()
                },
            ),
            (
                "max_new_tokens",
                Settings {
                    max_new_tokens: 0,
                    ..Settings::default()
                },
            ),
            (
                "max_segment_tokens",
                Settings {
                    max_segment_tokens: 1 << 40,
                    ..Settings::default()
                },
            ),
            (
                "prompt_budget",
                Settings {
                    prompt_budget: 100,
                    ..Settings::default()
                },
            ),
        ];
        for (name, settings) in cases {
            let err = settings.validate().unwrap_err();
            assert!(
                matches!(&err, SelfRagError::InvalidSetting { name: n, .. } if *n == name),
                "{name}: {err}"
            );
            assert!(err.to_string().contains(&format!("`{name}`")), "{err}");
        }
    }
}
