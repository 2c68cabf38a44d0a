//! The two traits the algorithm needs from the outside world, `Generator` and `Retriever`,
//! and the plain data that crosses them. Implementations live in selfrag-models (candle)
//! and selfrag-engine (LanceDB search); tests use scripted doubles.

use serde::{Deserialize, Serialize};

/// A token id in the generator's vocabulary.
pub type TokenId = u32;

/// The error type a backend reports; the algorithm wraps it with what it was doing.
pub type BackendError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What `Generator::generate_batch` is asked to do for every row of a batch.
#[derive(Debug, Clone, PartialEq)]
pub struct GenerateRequest {
    /// Greedy decoding stops after this many new tokens.
    pub max_new_tokens: usize,
    /// Decoding of a row stops right after it emits one of these ids once it has written text
    /// (see [`GenerateRequest::stops_at`]); EOS is always a stop.
    pub stop_ids: Vec<TokenId>,
    /// Ids that are not text: reflection tokens and passage markup. A stop id ends a row only
    /// after the row has emitted an id outside this list and `stop_ids` (SELFRAG.md step 8: a
    /// segment ends at a Retrieve token *after some text*). Empty: every stop id ends a row.
    pub markup_ids: Vec<TokenId>,
    /// Ids whose probabilities are recorded (see `GeneratedToken::watched`): at least at the
    /// first generated position and at every position whose chosen token is one of them.
    pub watch_ids: Vec<TokenId>,
}

impl GenerateRequest {
    /// Whether a row ends at `id`, the token it just emitted after `earlier`, by a stop id.
    pub fn stops_at(&self, id: TokenId, earlier: impl IntoIterator<Item = TokenId>) -> bool {
        self.stop_ids.contains(&id)
            && (self.markup_ids.is_empty()
                || earlier
                    .into_iter()
                    .any(|e| !self.markup_ids.contains(&e) && !self.stop_ids.contains(&e)))
    }
}

/// Why a generated row ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model emitted its end-of-sequence token.
    EndOfSequence,
    /// The model emitted one of `GenerateRequest::stop_ids`.
    StopToken,
    /// `max_new_tokens` was reached.
    Length,
}

/// One greedily chosen token and what the model thought at that position.
#[derive(Debug, Clone, PartialEq)]
pub struct GeneratedToken {
    pub id: TokenId,
    /// Natural log of the chosen token's probability (softmax over the whole vocabulary).
    pub logprob: f32,
    /// Probabilities (softmax over the whole vocabulary, not renormalised) of
    /// `GenerateRequest::watch_ids` at this position, in the same order. Required at the first
    /// position and where `id` is itself watched (the positions the critique reads); a backend
    /// that cannot give them exactly elsewhere leaves it empty there, never estimated.
    pub watched: Vec<f32>,
}

/// One row of a batch: the continuation of one prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct Generation {
    pub tokens: Vec<GeneratedToken>,
    pub stop: StopReason,
}

/// A model's vocabulary as the algorithm uses it: the ids of named tokens, and text to ids and
/// back.
///
/// Text is tokenized with special-token parsing off: reflection tokens reach a prompt only by
/// id, so document text such as `[Fully supported]` can never become a reflection token.
pub trait Tokenizer {
    /// The id of an exact vocabulary entry (e.g. `"[Relevant]"`), or `None` if the model lacks it.
    fn token_id(&self, token: &str) -> Option<TokenId>;
    /// Plain-text tokenization, no BOS, special tokens never recognised: text that starts a
    /// sequence (after BOS), so SentencePiece's dummy-prefix `▁` starts it.
    fn tokenize(&self, text: &str) -> Result<Vec<TokenId>, BackendError>;
    /// Plain-text tokenization of text that directly follows a special token (a passage after
    /// `<paragraph>`): it starts with `▁` only where the model was trained that way (the
    /// Self-RAG checkpoints were not; see [`DummyPrefix`]).
    fn tokenize_after_special(&self, text: &str) -> Result<Vec<TokenId>, BackendError>;
    /// Text of generated ids; special and reflection tokens are rendered as their strings.
    fn decode(&self, ids: &[TokenId]) -> Result<String, BackendError>;
    /// Beginning-of-sequence id, prepended to every prompt.
    fn bos_id(&self) -> TokenId;
    /// End-of-sequence id (`</s>`).
    fn eos_id(&self) -> TokenId;
    /// Every id that ends a generation, [`Tokenizer::eos_id`] first: a model may also end at an
    /// end-of-turn token (Llama-3's `<|eot_id|>`), and llama.cpp stops at each of them.
    fn end_ids(&self) -> Vec<TokenId> {
        vec![self.eos_id()]
    }
    /// Tokens in the vocabulary: ids are `0..vocab_size()`.
    fn vocab_size(&self) -> usize;
}

/// A language model that can score and continue prompts given as token ids.
pub trait Generator {
    /// The vocabulary its prompts are written in and its output is read with.
    fn tokenizer(&self) -> &dyn Tokenizer;
    /// Maximum prompt + generation length in tokens.
    fn context_length(&self) -> usize;
    /// Probabilities (softmax over the whole vocabulary) of `watch_ids` at the position that
    /// follows `prompt`, in the order given.
    fn next_token_probs(
        &mut self,
        prompt: &[TokenId],
        watch_ids: &[TokenId],
    ) -> Result<Vec<f32>, BackendError>;
    /// Which generator this is, for the trace; `None` for a test double.
    fn describe(&self) -> Option<crate::GeneratorInfo> {
        None
    }
    /// Greedy continuation of every prompt, decoded together as one batch. Returns one
    /// `Generation` per prompt, in order.
    fn generate_batch(
        &mut self,
        prompts: &[Vec<TokenId>],
        request: &GenerateRequest,
    ) -> Result<Vec<Generation>, BackendError>;
    /// [`Generator::generate_batch`], with how long reading the prompts and decoding took,
    /// where the generator can tell the two apart (`None`: it cannot, as a server's streamed
    /// tokens do not say).
    fn generate_batch_timed(
        &mut self,
        prompts: &[Vec<TokenId>],
        request: &GenerateRequest,
    ) -> Result<(Vec<Generation>, Option<BatchTiming>), BackendError> {
        Ok((self.generate_batch(prompts, request)?, None))
    }
}

/// How one batch's generation spent its time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BatchTiming {
    /// Reading the prompts, up to each row's first generated token.
    pub prompt_seconds: f64,
    /// The decode steps after it.
    pub decode_seconds: f64,
}

/// Which of the two models a model file serves: the Self-RAG language model (a `Generator`)
/// or the retriever's passage encoder (what a `Retriever` embeds with). The one definition
/// the model store, the engine's errors and status, and the UI share.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub enum ModelRole {
    /// The Self-RAG language model (one GGUF file).
    Generator,
    /// The retriever's passage encoder (a BERT directory).
    Embedder,
}

impl std::fmt::Display for ModelRole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Generator => "generator",
            Self::Embedder => "embedder",
        })
    }
}

/// Where the user wants the models to run: the one definition the model loader, the engine's
/// settings and status, the CLI's `--device` and `SELFRAG_DEVICE`, and the UI share.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub enum DeviceChoice {
    /// A GPU when this build supports one and it is present, else the CPU.
    #[default]
    Auto,
    Cpu,
    Cuda,
    Metal,
}

impl DeviceChoice {
    /// Every choice, in the order a menu lists them.
    pub const ALL: [Self; 4] = [Self::Auto, Self::Cpu, Self::Cuda, Self::Metal];

    /// The name a user types (`--device`, `SELFRAG_DEVICE`) and the settings file stores.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Cpu => "cpu",
            Self::Cuda => "cuda",
            Self::Metal => "metal",
        }
    }
}

impl std::fmt::Display for DeviceChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A device name that is none of [`DeviceChoice::ALL`]; its message names it and the choices.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown device `{0}`: choose auto, cpu, cuda or metal")]
pub struct UnknownDevice(pub String);

impl std::str::FromStr for DeviceChoice {
    type Err = UnknownDevice;

    /// Case and surrounding spaces do not matter.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let name = s.trim();
        Self::ALL
            .into_iter()
            .find(|choice| choice.as_str().eq_ignore_ascii_case(name))
            .ok_or_else(|| UnknownDevice(name.to_owned()))
    }
}

/// How the passage embedder multiplies its matrices on the CPU: the one definition the model
/// loader, the engine's settings, `SELFRAG_EMBEDDER_PRECISION`, `selfrag debug embed
/// --precision` and the UI share. A GPU always runs f32.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub enum EmbedderPrecision {
    /// Weights and activations quantized to 8 bits, products in integers, where the CPU has
    /// the instructions for it (AVX-512 VNNI or AVX-VNNI); f32 elsewhere. On the models measured
    /// (all-MiniLM-L6-v2, real text) the vectors stay within cosine 0.998 of f32's.
    #[default]
    Int8,
    /// The model's own f32 weights, for vectors equal to PyTorch's.
    F32,
}

impl EmbedderPrecision {
    /// Every choice, in the order a menu lists them.
    pub const ALL: [Self; 2] = [Self::Int8, Self::F32];

    /// The name a user types and the settings file stores.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Int8 => "int8",
            Self::F32 => "f32",
        }
    }
}

impl std::fmt::Display for EmbedderPrecision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A precision name that is neither `int8` nor `f32`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown embedder precision `{0}`: choose int8 or f32")]
pub struct UnknownPrecision(pub String);

impl std::str::FromStr for EmbedderPrecision {
    type Err = UnknownPrecision;

    /// Case and surrounding spaces do not matter.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let name = s.trim();
        Self::ALL
            .into_iter()
            .find(|choice| choice.as_str().eq_ignore_ascii_case(name))
            .ok_or_else(|| UnknownPrecision(name.to_owned()))
    }
}

/// How a local generator's KV cache holds the keys and values of the tokens it has read: the
/// one definition the model loader, `SELFRAG_KV_CACHE`, the engine's settings, the trace and
/// the UI share. Measured against Hugging Face on held-out f32 weights, 8 bits move next-token
/// log-probabilities by up to 1.26e-2, f32 by 1.0e-5 (docs/ARCHITECTURE.md, "Numerics").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub enum CachePrecision {
    /// 8 bits a value: blocks of 32 values, each an f16 scale and 32 signed bytes, as
    /// llama.cpp's `q8_0` cache. The default on a CPU that reads it in vector registers, for a
    /// model whose head size is a whole number of blocks (every Llama-2's).
    Q8,
    /// Half the bytes of f32; what a model whose heads are not whole blocks gets for 8 bits.
    F16,
    /// Exactly the values computed: the default on other CPUs and on GPUs, and the one
    /// precision off the CPU.
    F32,
}

impl CachePrecision {
    /// Every precision, in the order a menu lists them.
    pub const ALL: [Self; 3] = [Self::Q8, Self::F16, Self::F32];

    /// The name a user types (`SELFRAG_KV_CACHE`, `--kv-cache`) and the settings file stores.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Q8 => "q8",
            Self::F16 => "f16",
            Self::F32 => "f32",
        }
    }

    /// How a person reads it: `8-bit`, `f16`, `f32`.
    pub fn label(self) -> &'static str {
        match self {
            Self::Q8 => "8-bit",
            Self::F16 => "f16",
            Self::F32 => "f32",
        }
    }
}

impl std::fmt::Display for CachePrecision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A KV-cache precision name that is none of `q8`, `f16` or `f32`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown KV-cache precision `{0}`: choose q8, f16 or f32")]
pub struct UnknownCachePrecision(pub String);

impl std::str::FromStr for CachePrecision {
    type Err = UnknownCachePrecision;

    /// Case and surrounding spaces do not matter; llama.cpp's `q8_0` is `q8`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let name = s.trim();
        if name.eq_ignore_ascii_case("q8_0") {
            return Ok(Self::Q8);
        }
        Self::ALL
            .into_iter()
            .find(|choice| choice.as_str().eq_ignore_ascii_case(name))
            .ok_or_else(|| UnknownCachePrecision(name.to_owned()))
    }
}

/// Where a SentencePiece tokenizer puts its dummy-prefix `▁` (only for a vocabulary with
/// `tokenizer.ggml.add_space_prefix`): the one definition the tokenizer, the engine's settings,
/// `SELFRAG_DUMMY_PREFIX`, the CLI's `--dummy-prefix`, the trace and the UI share.
///
/// The Self-RAG checkpoints were fine-tuned with transformers' slow `LlamaTokenizer` and the
/// `"legacy": false` that Meta's Llama-2 tokenizer configuration sets, which prefixes only the
/// start of the text ([`DummyPrefix::TextStart`], the default). llama.cpp (since May 2024, PR
/// 7375), `legacy=True` and the fast tokenizer the reference code ran its inference through
/// (vLLM) prefix every text fragment after a special token as well
/// ([`DummyPrefix::EveryFragment`]): `<paragraph>▁Title` where the model was trained on
/// `<paragraph>Title`. selfrag-models' `tests/golden/space_prefix.json` pins both against
/// transformers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub enum DummyPrefix {
    /// `▁` before the first text of a sequence only: as in fine-tuning.
    #[default]
    TextStart,
    /// `▁` before the first text and before every text that follows a special token: as the
    /// reference code's inference, for reproducing its numbers.
    EveryFragment,
}

impl DummyPrefix {
    /// Every choice, in the order a menu lists them.
    pub const ALL: [Self; 2] = [Self::TextStart, Self::EveryFragment];

    /// The name a user types (`--dummy-prefix`, `SELFRAG_DUMMY_PREFIX`) and the settings file
    /// stores.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::TextStart => "text-start",
            Self::EveryFragment => "every-fragment",
        }
    }
}

impl std::fmt::Display for DummyPrefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A dummy-prefix name that is neither `text-start` nor `every-fragment`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown dummy prefix `{0}`: choose text-start or every-fragment")]
pub struct UnknownDummyPrefix(pub String);

impl std::str::FromStr for DummyPrefix {
    type Err = UnknownDummyPrefix;

    /// Case, surrounding spaces and `_` for `-` do not matter.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let name = s.trim().replace('_', "-");
        Self::ALL
            .into_iter()
            .find(|choice| choice.as_str().eq_ignore_ascii_case(&name))
            .ok_or_else(|| UnknownDummyPrefix(s.trim().to_owned()))
    }
}

/// The kind of device the models were loaded on, once a choice is resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub enum DeviceKind {
    Cpu,
    Cuda,
    Metal,
}

impl DeviceKind {
    /// Whether this is a GPU (CUDA or Metal).
    pub fn is_gpu(self) -> bool {
        !matches!(self, Self::Cpu)
    }

    /// `cpu`, `cuda` or `metal`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Cpu => "cpu",
            Self::Cuda => "cuda",
            Self::Metal => "metal",
        }
    }
}

impl std::fmt::Display for DeviceKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A passage of the user's library, as found by a `Retriever` and cited in an answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct Passage {
    /// Stable id of the passage in the library.
    pub id: String,
    /// Title of the source document.
    pub title: String,
    /// Path of the source file on disk.
    pub path: String,
    /// 1-based page in the source, where the format has pages: the page a viewer opens.
    pub page: Option<u32>,
    /// The number printed on that page, where the source's page labels give one that differs
    /// from `page` (`xii`, `117`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "typescript", ts(optional))]
    pub page_label: Option<String>,
    /// Where the page was a scan read by OCR: the engine's mean word confidence, 0–1 (the text
    /// may hold misread words).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "typescript", ts(optional))]
    pub ocr_confidence: Option<f32>,
    /// The passage text the model read.
    pub text: String,
    /// The work its document holds (authors, year, DOI, citation key) as the library knew it
    /// when the answer was written: what an export cites where the document is gone since.
    /// `None` in traces written before works existed and for documents without a record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "typescript", ts(optional))]
    pub work: Option<selfrag_works::Work>,
}

impl Passage {
    /// The page as a citation gives it: `p. 117 (PDF page 1)` where the printed number
    /// differs from the page's place in the file, else `p. 1`; `None` without pages.
    pub fn page_citation(&self) -> Option<String> {
        let page = self.page?;
        Some(match &self.page_label {
            Some(label) => format!("p. {label} (PDF page {page})"),
            None => format!("p. {page}"),
        })
    }

    /// "OCR text, confidence 91%" where the passage was read from a scan by OCR.
    pub fn ocr_note(&self) -> Option<String> {
        self.ocr_confidence.map(ocr_note)
    }

    /// The page as a reference list gives it: the printed number where there is one.
    pub fn printed_page(&self) -> Option<String> {
        self.page_label
            .clone()
            .or_else(|| self.page.map(|p| p.to_string()))
    }
}

/// How a citation says its text was read from a scan by OCR with mean word `confidence` (0–1).
pub fn ocr_note(confidence: f32) -> String {
    format!("OCR text, confidence {:.0}%", confidence * 100.0)
}

/// Finds the passages most relevant to a query.
pub trait Retriever {
    /// The top `k` passages for `query`, best first.
    fn search(&mut self, query: &str, k: usize) -> Result<Vec<Passage>, BackendError>;
    /// Which embedder made the vector of the last query searched, for the trace; `None`
    /// before any search, and for a test double.
    fn describe(&self) -> Option<crate::EmbedderInfo> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_name_parses_in_any_case_and_names_itself_back() {
        for choice in DeviceChoice::ALL {
            assert_eq!(choice.as_str().parse::<DeviceChoice>(), Ok(choice));
            assert_eq!(
                format!(" {} ", choice.as_str().to_uppercase()).parse::<DeviceChoice>(),
                Ok(choice)
            );
        }
        let err = "tpu"
            .parse::<DeviceChoice>()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("`tpu`") && err.contains("auto, cpu, cuda or metal"),
            "{err}"
        );
    }

    #[test]
    fn a_precision_parses_in_any_case_and_serialises_as_its_name() {
        for choice in EmbedderPrecision::ALL {
            assert_eq!(
                format!(" {} ", choice.as_str().to_uppercase()).parse::<EmbedderPrecision>(),
                Ok(choice)
            );
            let json = serde_json::to_string(&choice).unwrap_or_default();
            assert_eq!(json, format!("\"{choice}\""));
        }
        let err = "fp16"
            .parse::<EmbedderPrecision>()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("`fp16`") && err.contains("int8 or f32"),
            "{err}"
        );
    }

    #[test]
    fn cache_precisions_and_dummy_prefixes_parse_their_names_and_serialise_as_them() {
        for choice in CachePrecision::ALL {
            assert_eq!(
                format!(" {} ", choice.as_str().to_uppercase()).parse::<CachePrecision>(),
                Ok(choice)
            );
            let json = serde_json::to_string(&choice).unwrap_or_default();
            assert_eq!(json, format!("\"{choice}\""));
        }
        assert_eq!("Q8_0".parse::<CachePrecision>(), Ok(CachePrecision::Q8));
        let err = "bf16"
            .parse::<CachePrecision>()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("`bf16`") && err.contains("q8, f16 or f32"),
            "{err}"
        );
        for choice in DummyPrefix::ALL {
            assert_eq!(choice.as_str().parse::<DummyPrefix>(), Ok(choice));
            let json = serde_json::to_string(&choice).unwrap_or_default();
            assert_eq!(json, format!("\"{choice}\""));
        }
        assert_eq!(
            " EVERY_FRAGMENT ".parse::<DummyPrefix>(),
            Ok(DummyPrefix::EveryFragment)
        );
        let err = "legacy"
            .parse::<DummyPrefix>()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("`legacy`") && err.contains("text-start or every-fragment"),
            "{err}"
        );
    }

    #[test]
    fn the_serialised_names_are_the_typed_names() {
        for choice in DeviceChoice::ALL {
            let json = serde_json::to_string(&choice).unwrap_or_default();
            assert_eq!(json, format!("\"{choice}\""));
        }
        for kind in [DeviceKind::Cpu, DeviceKind::Cuda, DeviceKind::Metal] {
            let json = serde_json::to_string(&kind).unwrap_or_default();
            assert_eq!(json, format!("\"{kind}\""));
        }
    }
}
