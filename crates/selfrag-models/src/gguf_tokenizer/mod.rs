//! The tokenizer of a GGUF model, built from the file's own `tokenizer.ggml.*` metadata, so
//! that one `.gguf` file is the whole model (the Self-RAG checkpoints ship no
//! `tokenizer.json`).
//!
//! [`GgufTokenizer`] is the one public face; inside it runs one of two algorithms, chosen by
//! `tokenizer.ggml.model` as llama.cpp chooses them:
//! - `llama`: SentencePiece-style merges by score with byte fallback ([`spm`]; Llama-2 and the
//!   Self-RAG 7B/13B checkpoints);
//! - `gpt2`: byte-level BPE with merge ranks ([`bpe`]; Llama-3 and RAGLAB's selfrag_llama3-8B,
//!   Qwen2, Mistral's Tekken, …), its text first split by the pre-tokenizer that
//!   `tokenizer.ggml.pre` names ([`pre_tokenizer`]).
//!
//! A file whose tokenizer or pre-tokenizer is neither is refused naming it
//! ([`ModelError::UnsupportedTokenizer`]): the file is fine, this version cannot run it.
//!
//! Special tokens (control, user-defined and unknown entries: `<s>`, `<|begin_of_text|>`, the
//! 16 reflection tokens) are matched in text only with special-token parsing on, longest
//! first over the whole text as llama.cpp does; with it off no special id can come out of plain
//! text. (llama.cpp matches user-defined tokens even with parsing off; the app never does.)
//!
//! Whether text that follows a special token (a passage title after `<paragraph>`) also gets
//! SentencePiece's dummy prefix is the tokenizer's [`DummyPrefix`]: the two Llama tokenizers
//! disagree, and no GGUF key records which one a model was trained with. Byte-level BPE has no
//! dummy prefix, so there the setting changes nothing.

mod bpe;
mod pre_tokenizer;
mod spm;

use std::collections::HashMap;

use candle_core::quantized::gguf_file;

use selfrag_core::{BackendError, DummyPrefix, TokenId, Tokenizer};

use crate::error::ModelError;
use bpe::BpeModel;
use pre_tokenizer::PreTokenizer;
use spm::{SpmModel, parse_byte_token};

/// The type of a vocabulary entry, as stored in `tokenizer.ggml.token_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenType {
    Normal,
    Unknown,
    Control,
    UserDefined,
    Unused,
    Byte,
}

impl TokenType {
    /// The GGUF code of this type (1 normal … 6 byte).
    pub fn code(self) -> i32 {
        match self {
            Self::Normal => 1,
            Self::Unknown => 2,
            Self::Control => 3,
            Self::UserDefined => 4,
            Self::Unused => 5,
            Self::Byte => 6,
        }
    }

    fn from_code(code: i64) -> Option<Self> {
        Some(match code {
            1 => Self::Normal,
            2 => Self::Unknown,
            3 => Self::Control,
            4 => Self::UserDefined,
            5 => Self::Unused,
            6 => Self::Byte,
            _ => return None,
        })
    }
}

/// The algorithm under a [`GgufTokenizer`].
#[derive(Debug, Clone)]
enum Algorithm {
    /// `tokenizer.ggml.model = "llama"`.
    Spm(Box<SpmModel>),
    /// `tokenizer.ggml.model = "gpt2"`.
    Bpe(Box<BpeModel>),
}

/// The tokenizer algorithm a GGUF's `tokenizer.ggml.model` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenizerKind {
    /// SentencePiece-style merges by score (`llama`).
    SentencePiece,
    /// Byte-level BPE with merge ranks (`gpt2`).
    ByteLevelBpe,
}

/// A GGUF model's tokenizer: its vocabulary, token types, special tokens and algorithm.
#[derive(Debug, Clone)]
pub struct GgufTokenizer {
    tokens: Vec<String>,
    types: Vec<TokenType>,
    /// Every entry, for `token_to_id`.
    all_ids: HashMap<String, u32>,
    /// Control, user-defined and unknown tokens, longest first (then by id): what special-token
    /// parsing matches, in llama.cpp's order.
    specials: Vec<(String, u32)>,
    bos: u32,
    eos: u32,
    /// Every id that ends a generation, `eos` first (see [`end_of_generation_ids`]).
    ends: Vec<u32>,
    unk: Option<u32>,
    pad: Option<u32>,
    add_bos: bool,
    dummy_prefix: DummyPrefix,
    algorithm: Algorithm,
}

/// Texts of the end-of-turn tokens llama.cpp ends a generation at wherever a vocabulary has
/// them (its end-of-generation set), besides the ids the metadata names.
const END_OF_TURN_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|eom_id|>",
    "<|end_of_text|>",
    "<|im_end|>",
    "<|end|>",
    "<|endoftext|>",
    "<end_of_turn>",
    "<EOT>",
    "_<EOT>",
    "<end_of_utterance>",
    "<|return|>",
    "<|call|>",
];

/// The ids that end a generation, as llama.cpp gathers them: EOS, the end-of-turn,
/// end-of-message and fill-in-the-middle pad, repeat and separator ids the metadata names
/// (`tokenizer.ggml.eot_token_id`, `…eom_token_id`, `…fim_pad_token_id`, …), and
/// every entry whose text is one of [`END_OF_TURN_TEXTS`]. Llama-3's `<|eot_id|>` is one: a
/// model tuned from Llama-3-Instruct may end its answer there rather than at EOS.
fn end_of_generation_ids(
    content: &gguf_file::Content,
    all_ids: &HashMap<String, u32>,
    vocab_size: usize,
    eos: u32,
) -> Result<Vec<u32>, ModelError> {
    let mut ends = vec![eos];
    for key in [
        "tokenizer.ggml.eot_token_id",
        "tokenizer.ggml.eom_token_id",
        "tokenizer.ggml.fim_pad_token_id",
        "tokenizer.ggml.fim_rep_token_id",
        "tokenizer.ggml.fim_sep_token_id",
    ] {
        if let Some(id) = metadata_u32(content, key)?
            && (id as usize) < vocab_size
        {
            ends.push(id);
        }
    }
    ends.extend(
        END_OF_TURN_TEXTS
            .iter()
            .filter_map(|text| all_ids.get(*text).copied()),
    );
    let mut seen = std::collections::HashSet::new();
    ends.retain(|id| seen.insert(*id));
    Ok(ends)
}

/// One symbol of the linked list both merge loops (SentencePiece's and BPE's) work on: a byte
/// range of the text being merged, and its neighbours.
#[derive(Debug, Clone, Copy)]
struct Symbol {
    start: usize,
    len: usize,
    prev: Option<usize>,
    next: Option<usize>,
}

/// A stretch of text to encode, or a special token matched in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fragment<'t> {
    Text(&'t str),
    Special(u32),
}

fn metadata_u32(content: &gguf_file::Content, key: &str) -> Result<Option<u32>, ModelError> {
    match content.metadata.get(key) {
        None => Ok(None),
        Some(value) => value
            .to_u64()
            .ok()
            .or_else(|| {
                value
                    .to_i32()
                    .ok()
                    .and_then(|v| u64::try_from(v).ok())
                    .or_else(|| value.to_i64().ok().and_then(|v| u64::try_from(v).ok()))
            })
            .and_then(|v| u32::try_from(v).ok())
            .map(Some)
            .ok_or_else(|| ModelError::InvalidTokenizer {
                reason: format!("`{key}` is not a token id: {value:?}"),
            }),
    }
}

fn value_as_i64(value: &gguf_file::Value) -> Option<i64> {
    use gguf_file::Value as V;
    Some(match value {
        V::U8(v) => i64::from(*v),
        V::I8(v) => i64::from(*v),
        V::U16(v) => i64::from(*v),
        V::I16(v) => i64::from(*v),
        V::U32(v) => i64::from(*v),
        V::I32(v) => i64::from(*v),
        V::U64(v) => i64::try_from(*v).ok()?,
        V::I64(v) => *v,
        _ => return None,
    })
}

fn value_as_f32(value: &gguf_file::Value) -> Option<f32> {
    use gguf_file::Value as V;
    match value {
        V::F32(v) => Some(*v),
        #[allow(clippy::cast_possible_truncation)]
        V::F64(v) => Some(*v as f32),
        other => value_as_i64(other).map(|v| v as f32),
    }
}

fn metadata_array<'a>(
    content: &'a gguf_file::Content,
    key: &str,
) -> Result<Option<&'a Vec<gguf_file::Value>>, ModelError> {
    match content.metadata.get(key) {
        None => Ok(None),
        Some(value) => value
            .to_vec()
            .map(Some)
            .map_err(|_| ModelError::InvalidTokenizer {
                reason: format!("`{key}` is not an array"),
            }),
    }
}

fn metadata_string<'a>(
    content: &'a gguf_file::Content,
    key: &str,
) -> Result<Option<&'a str>, ModelError> {
    match content.metadata.get(key) {
        None => Ok(None),
        Some(value) => {
            value
                .to_string()
                .map(|s| Some(s.as_str()))
                .map_err(|_| ModelError::InvalidTokenizer {
                    reason: format!("`{key}` is not a string"),
                })
        }
    }
}

/// What `tokenizer.ggml.model` (and, for BPE, `tokenizer.ggml.pre`) say to run: the
/// SentencePiece algorithm (also when the key is absent, as in early Llama conversions), or
/// byte-level BPE with a pre-tokenizer; anything else is refused naming it.
enum Choice {
    Spm,
    Bpe(PreTokenizer),
}

fn choose_algorithm(content: &gguf_file::Content) -> Result<Choice, ModelError> {
    let model = metadata_string(content, "tokenizer.ggml.model")?;
    let pre = metadata_string(content, "tokenizer.ggml.pre")?;
    match model {
        None | Some("llama") => Ok(Choice::Spm),
        Some("gpt2") => {
            // As llama.cpp: a BPE file without a pre-tokenizer name gets the default split.
            let name = match pre {
                Some(name) if !name.is_empty() => name,
                _ => {
                    tracing::warn!(
                        "the GGUF names no `tokenizer.ggml.pre`; using llama.cpp's `default` \
                         split, which may not be the one the model was trained with"
                    );
                    "default"
                }
            };
            PreTokenizer::new(name)?.map(Choice::Bpe).ok_or_else(|| {
                ModelError::UnsupportedTokenizer {
                    path: None,
                    model: "gpt2".to_owned(),
                    pre: Some(name.to_owned()),
                }
            })
        }
        Some(other) => Err(ModelError::UnsupportedTokenizer {
            path: None,
            model: other.to_owned(),
            pre: pre.map(str::to_owned),
        }),
    }
}

/// `tokenizer.ggml.merges`, which a BPE file must have.
fn read_merges(content: &gguf_file::Content) -> Result<Vec<String>, ModelError> {
    metadata_array(content, "tokenizer.ggml.merges")?
        .ok_or_else(|| ModelError::InvalidTokenizer {
            reason: "`tokenizer.ggml.merges` is missing (a BPE tokenizer needs its merges)"
                .to_owned(),
        })?
        .iter()
        .map(|v| v.to_string().cloned())
        .collect::<Result<Vec<String>, _>>()
        .map_err(|_| ModelError::InvalidTokenizer {
            reason: "`tokenizer.ggml.merges` holds a non-string".to_owned(),
        })
}

/// The pieces with their scores and types, one of each per token id.
struct Vocabulary {
    tokens: Vec<String>,
    scores: Vec<f32>,
    types: Vec<TokenType>,
}

impl Vocabulary {
    /// `tokenizer.ggml.tokens`, `.scores` (0 when absent) and `.token_type` (normal when
    /// absent), which must be as long as one another.
    fn read(content: &gguf_file::Content) -> Result<Self, ModelError> {
        let tokens_value = metadata_array(content, "tokenizer.ggml.tokens")?.ok_or_else(|| {
            ModelError::InvalidTokenizer {
                reason: "`tokenizer.ggml.tokens` is missing".to_owned(),
            }
        })?;
        let tokens = tokens_value
            .iter()
            .map(|v| v.to_string().cloned())
            .collect::<Result<Vec<String>, _>>()
            .map_err(|_| ModelError::InvalidTokenizer {
                reason: "`tokenizer.ggml.tokens` holds a non-string".to_owned(),
            })?;
        if tokens.is_empty() {
            return Err(ModelError::InvalidTokenizer {
                reason: "`tokenizer.ggml.tokens` is empty".to_owned(),
            });
        }
        let n = tokens.len();
        let scores = match metadata_array(content, "tokenizer.ggml.scores")? {
            None => vec![0.0; n],
            Some(values) => values
                .iter()
                .map(value_as_f32)
                .collect::<Option<Vec<f32>>>()
                .ok_or_else(|| ModelError::InvalidTokenizer {
                    reason: "`tokenizer.ggml.scores` holds a non-number".to_owned(),
                })?,
        };
        let types = match metadata_array(content, "tokenizer.ggml.token_type")? {
            None => vec![TokenType::Normal; n],
            Some(values) => values
                .iter()
                .map(|v| value_as_i64(v).and_then(TokenType::from_code))
                .collect::<Option<Vec<TokenType>>>()
                .ok_or_else(|| ModelError::InvalidTokenizer {
                    reason: "`tokenizer.ggml.token_type` holds an unknown type code".to_owned(),
                })?,
        };
        if scores.len() != n || types.len() != n {
            return Err(ModelError::InvalidTokenizer {
                reason: format!(
                    "{n} tokens but {} scores and {} token types",
                    scores.len(),
                    types.len()
                ),
            });
        }
        Ok(Self {
            tokens,
            scores,
            types,
        })
    }
}

/// BOS, EOS, unknown and padding, each checked to lie inside the vocabulary.
struct SpecialIds {
    bos: u32,
    eos: u32,
    unk: Option<u32>,
    pad: Option<u32>,
}

impl SpecialIds {
    /// From `tokenizer.ggml.*_token_id`, with llama.cpp's defaults for the `kind` (SPM: BOS 1,
    /// EOS 2, unknown 0; BPE: BOS and EOS 11, no unknown; neither has padding).
    fn read(
        content: &gguf_file::Content,
        n: usize,
        kind: TokenizerKind,
    ) -> Result<Self, ModelError> {
        // An id the file gives must lie inside the vocabulary.
        let optional = |key: &str| -> Result<Option<u32>, ModelError> {
            match metadata_u32(content, key)? {
                Some(id) if (id as usize) >= n => Err(ModelError::InvalidTokenizer {
                    reason: format!("`{key}` = {id} is outside the vocabulary of {n} tokens"),
                }),
                id => Ok(id),
            }
        };
        // So must a default, for a vocabulary too small to hold it.
        let with_default = |key: &str, default: u32| -> Result<u32, ModelError> {
            match optional(key)? {
                Some(id) => Ok(id),
                None if (default as usize) < n => Ok(default),
                None => Err(ModelError::InvalidTokenizer {
                    reason: format!("`{key}` = {default} is outside the vocabulary of {n} tokens"),
                }),
            }
        };
        let (bos, eos, unk) = match kind {
            TokenizerKind::SentencePiece => (1, 2, Some(0)),
            TokenizerKind::ByteLevelBpe => (11, 11, None),
        };
        let unk = match (optional("tokenizer.ggml.unknown_token_id")?, unk) {
            (Some(id), _) => Some(id),
            (None, Some(default)) => {
                Some(with_default("tokenizer.ggml.unknown_token_id", default)?)
            }
            (None, None) => None,
        };
        Ok(Self {
            bos: with_default("tokenizer.ggml.bos_token_id", bos)?,
            eos: with_default("tokenizer.ggml.eos_token_id", eos)?,
            unk,
            pad: optional("tokenizer.ggml.padding_token_id")?,
        })
    }
}

/// Every entry by its text (the first of equal texts), and the entries special-token parsing
/// matches: control, user-defined and unknown ones, longest first, then by id.
struct PieceIndex {
    all_ids: HashMap<String, u32>,
    specials: Vec<(String, u32)>,
}

fn index_pieces(tokens: &[String], types: &[TokenType]) -> Result<PieceIndex, ModelError> {
    let mut all_ids = HashMap::new();
    let mut specials = Vec::new();
    for (id, (piece, ty)) in tokens.iter().zip(types).enumerate() {
        let id = u32::try_from(id).map_err(|_| ModelError::InvalidTokenizer {
            reason: "more than 2^32 tokens".to_owned(),
        })?;
        all_ids.entry(piece.clone()).or_insert(id);
        if matches!(
            ty,
            TokenType::Control | TokenType::UserDefined | TokenType::Unknown
        ) && !piece.is_empty()
        {
            specials.push((piece.clone(), id));
        }
    }
    specials.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.1.cmp(&b.1)));
    Ok(PieceIndex { all_ids, specials })
}

/// Refuses a vocabulary in which one of Self-RAG's reflection tokens (or `<pad>`) is a normal
/// text piece: a normal piece is what plain text tokenizes into, so a document that contains
/// `[Fully supported]` would hand the model the critique token itself. A vocabulary without
/// them passes here; the run refuses it by name (`ReflectionVocab::resolve`).
fn check_reflection_token_types(
    ids: &HashMap<String, u32>,
    types: &[TokenType],
) -> Result<(), ModelError> {
    let as_text: Vec<&str> = selfrag_core::REFLECTION_TOKENS
        .iter()
        .copied()
        .filter(|token| {
            ids.get(*token)
                .and_then(|&id| types.get(id as usize))
                .is_some_and(|ty| !matches!(ty, TokenType::Control | TokenType::UserDefined))
        })
        .collect();
    if as_text.is_empty() {
        return Ok(());
    }
    Err(ModelError::InvalidTokenizer {
        reason: format!(
            "the Self-RAG tokens {} are ordinary text pieces, not control or user-defined \
             tokens, so a document's own text could be read as them; convert the checkpoint \
             again with llama.cpp's convert_hf_to_gguf.py, which marks its added tokens \
             user-defined",
            as_text.join(", ")
        ),
    })
}

impl GgufTokenizer {
    /// Reads only the header of the GGUF at `path` (no weights) and builds its tokenizer.
    pub fn from_gguf_file(path: &std::path::Path) -> Result<Self, ModelError> {
        let file = std::fs::File::open(path).map_err(ModelError::io(path))?;
        let content = crate::gguf_header::read(&mut std::io::BufReader::new(file), path)?;
        Self::from_gguf(&content).map_err(|e| e.in_file(path))
    }

    /// The tokenizer of the Llama GGUF at `path` and the model's context length, from the
    /// header alone: all that building a prompt needs (see `selfrag debug prompt`).
    pub fn with_context_length(path: &std::path::Path) -> Result<(Self, usize), ModelError> {
        let file = std::fs::File::open(path).map_err(ModelError::io(path))?;
        let content = crate::gguf_header::read(&mut std::io::BufReader::new(file), path)?;
        let config = crate::llama::LlamaConfig::from_gguf(&content, path)?;
        let tokenizer = Self::from_gguf(&content).map_err(|e| e.in_file(path))?;
        Ok((tokenizer, config.context_length))
    }

    /// Builds the tokenizer from `tokenizer.ggml.*` metadata: SentencePiece for model `llama`
    /// (or none), byte-level BPE for `gpt2` with a pre-tokenizer this version runs.
    pub fn from_gguf(content: &gguf_file::Content) -> Result<Self, ModelError> {
        let choice = choose_algorithm(content)?;
        let kind = match choice {
            Choice::Spm => TokenizerKind::SentencePiece,
            Choice::Bpe(_) => TokenizerKind::ByteLevelBpe,
        };
        let Vocabulary {
            tokens,
            scores,
            types,
        } = Vocabulary::read(content)?;
        let SpecialIds { bos, eos, unk, pad } = SpecialIds::read(content, tokens.len(), kind)?;
        let flag = |key: &str| content.metadata.get(key).and_then(|v| v.to_bool().ok());
        let PieceIndex { all_ids, specials } = index_pieces(&tokens, &types)?;
        check_reflection_token_types(&all_ids, &types)?;
        let ends = end_of_generation_ids(content, &all_ids, tokens.len(), eos)?;
        let (algorithm, add_bos) = match choice {
            Choice::Spm => {
                let add_space_prefix = flag("tokenizer.ggml.add_space_prefix").unwrap_or(true);
                let unk = unk.unwrap_or(0);
                let model = SpmModel::new(&tokens, scores, &types, unk, add_space_prefix);
                (Algorithm::Spm(Box::new(model)), true)
            }
            Choice::Bpe(pre_tokenizer) => {
                let merges = read_merges(content)?;
                let model = BpeModel::new(&tokens, &types, &merges, pre_tokenizer);
                let add_bos = model.add_bos_default();
                (Algorithm::Bpe(Box::new(model)), add_bos)
            }
        };
        Ok(Self {
            tokens,
            types,
            all_ids,
            specials,
            bos,
            eos,
            ends,
            unk,
            pad,
            add_bos: flag("tokenizer.ggml.add_bos_token").unwrap_or(add_bos),
            dummy_prefix: DummyPrefix::default(),
            algorithm,
        })
    }

    /// Which algorithm this tokenizer runs.
    pub fn kind(&self) -> TokenizerKind {
        match self.algorithm {
            Algorithm::Spm(_) => TokenizerKind::SentencePiece,
            Algorithm::Bpe(_) => TokenizerKind::ByteLevelBpe,
        }
    }

    /// The dummy-prefix setting in force, for the record of an answer: `None` for byte-level
    /// BPE, which has no `▁` for the setting to place.
    pub fn dummy_prefix_in_force(&self) -> Option<DummyPrefix> {
        matches!(self.algorithm, Algorithm::Spm(_)).then_some(self.dummy_prefix)
    }

    /// The BPE pre-tokenizer's name (`tokenizer.ggml.pre`, `default` where the file gives
    /// none); `None` for SentencePiece.
    pub fn pre_tokenizer(&self) -> Option<&str> {
        match &self.algorithm {
            Algorithm::Spm(_) => None,
            Algorithm::Bpe(model) => Some(model.pre_tokenizer_name()),
        }
    }

    /// This tokenizer with the dummy prefix placed as `dummy_prefix` says.
    #[must_use]
    pub fn with_dummy_prefix(mut self, dummy_prefix: DummyPrefix) -> Self {
        self.set_dummy_prefix(dummy_prefix);
        self
    }

    /// Places the dummy prefix as `dummy_prefix` says from now on (SentencePiece only; BPE
    /// has none).
    pub fn set_dummy_prefix(&mut self, dummy_prefix: DummyPrefix) {
        self.dummy_prefix = dummy_prefix;
    }

    /// Where this tokenizer puts the dummy prefix.
    pub fn dummy_prefix(&self) -> DummyPrefix {
        self.dummy_prefix
    }

    /// Tokenizes plain text (no special-token parsing) that directly follows a special token,
    /// such as a passage after `<paragraph>`: for SentencePiece it starts with `▁` only under
    /// [`DummyPrefix::EveryFragment`]; for BPE it is [`Self::encode`]`(text, false)`, since
    /// BPE has no dummy prefix.
    pub fn encode_after_special(&self, text: &str) -> Vec<u32> {
        let mut out = Vec::new();
        self.encode_text(text, self.prefixes_after_special(), &mut out);
        out
    }

    fn prefixes_after_special(&self) -> bool {
        self.dummy_prefix == DummyPrefix::EveryFragment
    }

    /// Tokenizes `text` without BOS, as the start of a sequence. With `parse_special`, exact
    /// occurrences of control, user-defined and unknown token strings become their ids
    /// (longest token first over the whole text, as llama.cpp matches them), and for
    /// SentencePiece the text after each is prefixed as [`DummyPrefix`] says; without it, the
    /// result never contains a special id.
    pub fn encode(&self, text: &str, parse_special: bool) -> Vec<u32> {
        let fragments = if parse_special {
            self.partition(text)
        } else {
            vec![Fragment::Text(text)]
        };
        let mut out = Vec::new();
        let mut at_start = true;
        for fragment in fragments {
            match fragment {
                Fragment::Text(text) => {
                    let prefix = at_start || self.prefixes_after_special();
                    self.encode_text(text, prefix, &mut out);
                }
                Fragment::Special(id) => out.push(id),
            }
            at_start = false;
        }
        out
    }

    /// `text` cut at the special tokens in it: each special token in turn, longest first, is
    /// found in every text fragment left (leftmost occurrences first) and cut out.
    fn partition<'t>(&self, text: &'t str) -> Vec<Fragment<'t>> {
        if text.is_empty() {
            return Vec::new();
        }
        let mut fragments = vec![Fragment::Text(text)];
        for (piece, id) in &self.specials {
            if !fragments
                .iter()
                .any(|f| matches!(f, Fragment::Text(t) if t.contains(piece.as_str())))
            {
                continue;
            }
            let mut next = Vec::with_capacity(fragments.len() + 2);
            for fragment in fragments {
                let Fragment::Text(mut rest) = fragment else {
                    next.push(fragment);
                    continue;
                };
                while let Some(at) = rest.find(piece.as_str()) {
                    if at > 0 {
                        next.push(Fragment::Text(&rest[..at]));
                    }
                    next.push(Fragment::Special(*id));
                    rest = &rest[at + piece.len()..];
                }
                if !rest.is_empty() {
                    next.push(Fragment::Text(rest));
                }
            }
            fragments = next;
        }
        fragments
    }

    /// Appends the ids of plain `text`; `dummy_prefix` is SentencePiece's.
    fn encode_text(&self, text: &str, dummy_prefix: bool, out: &mut Vec<u32>) {
        match &self.algorithm {
            Algorithm::Spm(model) => model.encode_fragment(text, dummy_prefix, out),
            Algorithm::Bpe(model) => model.encode_fragment(text, out),
        }
    }

    /// [`ModelError::TokenOutOfRange`] for the first of `ids` past the vocabulary.
    pub fn check_ids(&self, ids: &[u32]) -> Result<(), ModelError> {
        let vocab_size = self.vocab_size();
        match ids.iter().find(|&&id| id as usize >= vocab_size) {
            Some(&id) => Err(ModelError::TokenOutOfRange { id, vocab_size }),
            None => Ok(()),
        }
    }

    /// The text of `ids`, every one of which must be in the vocabulary (what a generator's
    /// `decode` gives, local or on a server).
    pub fn decode_checked(&self, ids: &[u32]) -> Result<String, ModelError> {
        self.check_ids(ids)?;
        Ok(self.decode(ids))
    }

    /// Text of `ids`: the bytes of every piece are collected and read as UTF-8 at the end
    /// (invalid sequences become U+FFFD). SentencePiece: `▁` becomes a space, the leading
    /// space of the first piece is dropped, byte tokens are their bytes; byte-level BPE: each
    /// character of a piece is the byte it stands for. Control, user-defined and unknown
    /// tokens are rendered as their strings. Ids outside the vocabulary are skipped.
    pub fn decode(&self, ids: &[u32]) -> String {
        let mut bytes = Vec::new();
        for (i, &id) in ids.iter().enumerate() {
            self.append_bytes(id, i == 0, &mut bytes);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// The bytes `id` stands for, as [`Self::decode`] reads them after other tokens (empty for
    /// an id outside the vocabulary): a byte token or a byte-level BPE piece may be part of a
    /// UTF-8 character only.
    pub fn token_bytes(&self, id: u32) -> Vec<u8> {
        let mut bytes = Vec::new();
        self.append_bytes(id, false, &mut bytes);
        bytes
    }

    /// Appends the bytes of `id`; `first` if it starts the decoded sequence.
    fn append_bytes(&self, id: u32, first: bool, bytes: &mut Vec<u8>) {
        let Some(piece) = self.tokens.get(id as usize) else {
            return;
        };
        match (self.types[id as usize], &self.algorithm) {
            (TokenType::Normal, Algorithm::Spm(model)) => model.decode_piece(piece, first, bytes),
            (TokenType::Normal, Algorithm::Bpe(model)) => model.decode_piece(piece, bytes),
            (TokenType::Byte, algorithm) => match (parse_byte_token(piece), algorithm) {
                (Some(byte), _) => bytes.push(byte),
                (None, Algorithm::Bpe(model)) => model.decode_piece(piece, bytes),
                (None, Algorithm::Spm(_)) => bytes.extend_from_slice(piece.as_bytes()),
            },
            (TokenType::Control | TokenType::UserDefined | TokenType::Unknown, _) => {
                bytes.extend_from_slice(piece.as_bytes());
            }
            (TokenType::Unused, _) => {}
        }
    }

    /// The id of an exact vocabulary entry of any type (`"[Relevant]"`, `"<s>"`, `"▁the"`,
    /// `"Ġthe"`).
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.all_ids.get(token).copied()
    }

    /// The vocabulary entry of `id`, as stored (with `▁` for spaces in SentencePiece, with
    /// GPT-2's byte characters such as `Ġ` in byte-level BPE).
    pub fn id_to_token(&self, id: u32) -> Option<&str> {
        self.tokens.get(id as usize).map(String::as_str)
    }

    /// The type of `id`'s vocabulary entry.
    pub fn token_type(&self, id: u32) -> Option<TokenType> {
        self.types.get(id as usize).copied()
    }

    /// Beginning-of-sequence id (`<s>`, `<|begin_of_text|>`).
    pub fn bos_id(&self) -> u32 {
        self.bos
    }

    /// End-of-sequence id (`</s>`, `<|end_of_text|>`).
    pub fn eos_id(&self) -> u32 {
        self.eos
    }

    /// Every id that ends a generation: EOS first, then the model's end-of-turn tokens
    /// (`<|eot_id|>`, …), as llama.cpp stops at each.
    pub fn end_ids(&self) -> &[u32] {
        &self.ends
    }

    /// Whether generating `id` ends the generation (see [`GgufTokenizer::end_ids`]).
    pub fn ends_generation(&self, id: u32) -> bool {
        self.ends.contains(&id)
    }

    /// Unknown-token id (`<unk>`), which SentencePiece uses when a byte has no `<0xAB>` token;
    /// byte-level BPE vocabularies usually have none.
    pub fn unk_id(&self) -> Option<u32> {
        self.unk
    }

    /// Padding id (`<pad>`), if the model has one.
    pub fn pad_id(&self) -> Option<u32> {
        self.pad
    }

    /// Whether prompts should start with BOS (`tokenizer.ggml.add_bos_token`; where absent,
    /// llama.cpp's default: true for SentencePiece, Llama-3 and Tekken, false for other BPE
    /// pre-tokenizers).
    pub fn add_bos(&self) -> bool {
        self.add_bos
    }

    /// Number of vocabulary entries.
    pub fn vocab_size(&self) -> usize {
        self.tokens.len()
    }
}

/// The vocabulary every generator of the app reads and writes with: the local one, the one on
/// the model thread, the server's (prompts go to a server as our ids) and the prompt-only one.
impl Tokenizer for GgufTokenizer {
    fn token_id(&self, token: &str) -> Option<TokenId> {
        self.token_to_id(token)
    }

    fn tokenize(&self, text: &str) -> Result<Vec<TokenId>, BackendError> {
        Ok(self.encode(text, false))
    }

    fn tokenize_after_special(&self, text: &str) -> Result<Vec<TokenId>, BackendError> {
        Ok(self.encode_after_special(text))
    }

    fn decode(&self, ids: &[TokenId]) -> Result<String, BackendError> {
        Ok(self.decode_checked(ids)?)
    }

    fn bos_id(&self) -> TokenId {
        GgufTokenizer::bos_id(self)
    }

    fn eos_id(&self) -> TokenId {
        GgufTokenizer::eos_id(self)
    }

    fn end_ids(&self) -> Vec<TokenId> {
        self.ends.clone()
    }

    fn vocab_size(&self) -> usize {
        GgufTokenizer::vocab_size(self)
    }
}
