//! A SentencePiece-style (SPM) Llama tokenizer built from a GGUF file's own `tokenizer.ggml.*`
//! metadata, so that one `.gguf` file is the whole model (the Self-RAG checkpoints ship no
//! `tokenizer.json`).
//!
//! Encoding follows llama.cpp's `llm_tokenizer_spm`: spaces become `▁`, a dummy-prefix `▁` is
//! prepended, the text is split into UTF-8 characters, and the adjacent pair whose concatenation
//! is a vocabulary piece with the highest score is merged until no pair is left (ties: leftmost
//! first). Characters with no piece fall back to the byte tokens `<0x00>`..`<0xFF>`.
//!
//! Only NORMAL pieces take part in merges, so with special-token parsing off no control or
//! user-defined token (`<s>`, `[Fully supported]`, …) can ever come out of plain text.
//!
//! Whether text that follows a special token (a passage title after `<paragraph>`) also gets
//! the dummy prefix is the tokenizer's [`DummyPrefix`]: the two Llama tokenizers disagree, and
//! no GGUF key records which one a model was trained with.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

use candle_core::quantized::gguf_file;

use selfrag_core::{BackendError, DummyPrefix, TokenId, Tokenizer};

use crate::error::ModelError;

/// The SentencePiece word-boundary marker that stands for a space.
const SPACE_MARKER: char = '\u{2581}';

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

/// A Llama SPM tokenizer read from GGUF metadata.
#[derive(Debug, Clone)]
pub struct GgufTokenizer {
    tokens: Vec<String>,
    scores: Vec<f32>,
    types: Vec<TokenType>,
    /// NORMAL pieces only: the pieces plain text may be made of.
    normal_ids: HashMap<String, u32>,
    /// Every entry, for `token_to_id`.
    all_ids: HashMap<String, u32>,
    /// Control and user-defined tokens, longest first.
    specials: Vec<(String, u32)>,
    byte_ids: [Option<u32>; 256],
    bos: u32,
    eos: u32,
    unk: u32,
    pad: Option<u32>,
    add_bos: bool,
    add_space_prefix: bool,
    dummy_prefix: DummyPrefix,
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

/// Parses `<0xAB>` into the byte 0xAB.
fn parse_byte_token(piece: &str) -> Option<u8> {
    let hex = piece.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

/// A candidate merge of the symbols at `left` and its right neighbour.
#[derive(Debug, PartialEq)]
struct Bigram {
    score: f32,
    left: usize,
    /// Byte length of the merged text, to detect stale entries.
    size: usize,
}

impl Eq for Bigram {}

impl Ord for Bigram {
    fn cmp(&self, other: &Self) -> Ordering {
        // Highest score first; on ties the leftmost pair first.
        self.score
            .total_cmp(&other.score)
            .then_with(|| other.left.cmp(&self.left))
    }
}

impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// One symbol of the linked list the merge loop works on: a byte range of the text.
/// Refuses a GGUF whose `tokenizer.ggml.model` names another tokenizer than SentencePiece.
fn require_spm(content: &gguf_file::Content) -> Result<(), ModelError> {
    let Some(model) = content.metadata.get("tokenizer.ggml.model") else {
        return Ok(());
    };
    let model = model
        .to_string()
        .map_err(|_| ModelError::InvalidTokenizer {
            reason: "`tokenizer.ggml.model` is not a string".to_owned(),
        })?;
    if model != "llama" {
        let pre = content
            .metadata
            .get("tokenizer.ggml.pre")
            .and_then(|v| v.to_string().ok())
            .cloned();
        return Err(ModelError::UnsupportedTokenizer {
            path: None,
            model: model.clone(),
            pre,
        });
    }
    Ok(())
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
    unk: u32,
    pad: Option<u32>,
}

impl SpecialIds {
    /// From `tokenizer.ggml.*_token_id`, with Llama's defaults (1, 2, 0, no padding).
    fn read(content: &gguf_file::Content, n: usize) -> Result<Self, ModelError> {
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
        Ok(Self {
            bos: with_default("tokenizer.ggml.bos_token_id", 1)?,
            eos: with_default("tokenizer.ggml.eos_token_id", 2)?,
            unk: with_default("tokenizer.ggml.unknown_token_id", 0)?,
            pad: optional("tokenizer.ggml.padding_token_id")?,
        })
    }
}

/// The lookups the encoder needs: normal pieces, every piece, the special pieces longest first,
/// and the byte-fallback tokens.
struct PieceIndex {
    normal_ids: HashMap<String, u32>,
    all_ids: HashMap<String, u32>,
    specials: Vec<(String, u32)>,
    byte_ids: [Option<u32>; 256],
}

impl PieceIndex {
    fn build(tokens: &[String], types: &[TokenType]) -> Result<Self, ModelError> {
        let mut index = Self {
            normal_ids: HashMap::new(),
            all_ids: HashMap::new(),
            specials: Vec::new(),
            byte_ids: [None; 256],
        };
        for (id, (piece, ty)) in tokens.iter().zip(types).enumerate() {
            let id = u32::try_from(id).map_err(|_| ModelError::InvalidTokenizer {
                reason: "more than 2^32 tokens".to_owned(),
            })?;
            // First occurrence wins, as in llama.cpp.
            index.all_ids.entry(piece.clone()).or_insert(id);
            match ty {
                TokenType::Normal => {
                    index.normal_ids.entry(piece.clone()).or_insert(id);
                }
                TokenType::Byte => {
                    if let Some(byte) = parse_byte_token(piece) {
                        index.byte_ids[usize::from(byte)].get_or_insert(id);
                    }
                }
                TokenType::Control | TokenType::UserDefined if !piece.is_empty() => {
                    index.specials.push((piece.clone(), id));
                }
                _ => {}
            }
        }
        index
            .specials
            .sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.1.cmp(&b.1)));
        Ok(index)
    }
}

#[derive(Debug, Clone, Copy)]
struct Symbol {
    start: usize,
    len: usize,
    prev: Option<usize>,
    next: Option<usize>,
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

    /// Builds the tokenizer from `tokenizer.ggml.*` metadata (model `llama`, i.e. SPM).
    pub fn from_gguf(content: &gguf_file::Content) -> Result<Self, ModelError> {
        require_spm(content)?;
        let Vocabulary {
            tokens,
            scores,
            types,
        } = Vocabulary::read(content)?;
        let SpecialIds { bos, eos, unk, pad } = SpecialIds::read(content, tokens.len())?;
        let flag = |key: &str, default: bool| {
            content
                .metadata
                .get(key)
                .and_then(|v| v.to_bool().ok())
                .unwrap_or(default)
        };
        let add_bos = flag("tokenizer.ggml.add_bos_token", true);
        let add_space_prefix = flag("tokenizer.ggml.add_space_prefix", true);
        let PieceIndex {
            normal_ids,
            all_ids,
            specials,
            byte_ids,
        } = PieceIndex::build(&tokens, &types)?;
        check_reflection_token_types(&all_ids, &types)?;
        Ok(Self {
            tokens,
            scores,
            types,
            normal_ids,
            all_ids,
            specials,
            byte_ids,
            bos,
            eos,
            unk,
            pad,
            add_bos,
            add_space_prefix,
            dummy_prefix: DummyPrefix::default(),
        })
    }

    /// This tokenizer with the dummy prefix placed as `dummy_prefix` says.
    #[must_use]
    pub fn with_dummy_prefix(mut self, dummy_prefix: DummyPrefix) -> Self {
        self.set_dummy_prefix(dummy_prefix);
        self
    }

    /// Places the dummy prefix as `dummy_prefix` says from now on.
    pub fn set_dummy_prefix(&mut self, dummy_prefix: DummyPrefix) {
        self.dummy_prefix = dummy_prefix;
    }

    /// Where this tokenizer puts the dummy prefix.
    pub fn dummy_prefix(&self) -> DummyPrefix {
        self.dummy_prefix
    }

    /// Tokenizes plain text (no special-token parsing) that directly follows a special token,
    /// such as a passage after `<paragraph>`: it starts with `▁` only under
    /// [`DummyPrefix::EveryFragment`].
    pub fn encode_after_special(&self, text: &str) -> Vec<u32> {
        let mut out = Vec::new();
        self.encode_fragment(text, self.prefixes_after_special(), &mut out);
        out
    }

    fn prefixes_after_special(&self) -> bool {
        self.dummy_prefix == DummyPrefix::EveryFragment
    }

    /// Tokenizes `text` without BOS, as the start of a sequence. With `parse_special`, exact
    /// occurrences of control and user-defined token strings (longest match first) become
    /// their ids, and the text after each is prefixed as [`DummyPrefix`] says; without it, the
    /// result never contains a special id.
    pub fn encode(&self, text: &str, parse_special: bool) -> Vec<u32> {
        let mut out = Vec::new();
        if !parse_special {
            self.encode_fragment(text, true, &mut out);
            return out;
        }
        let mut at_start = true;
        let mut fragment_start = 0;
        let mut pos = 0;
        while pos < text.len() {
            let rest = &text[pos..];
            if let Some((piece, id)) = self.specials.iter().find(|(s, _)| rest.starts_with(s)) {
                if fragment_start < pos {
                    let prefix = at_start || self.prefixes_after_special();
                    self.encode_fragment(&text[fragment_start..pos], prefix, &mut out);
                }
                out.push(*id);
                at_start = false;
                pos += piece.len();
                fragment_start = pos;
            } else {
                pos += rest.chars().next().map_or(1, char::len_utf8);
            }
        }
        if fragment_start < text.len() {
            let prefix = at_start || self.prefixes_after_special();
            self.encode_fragment(&text[fragment_start..], prefix, &mut out);
        }
        out
    }

    fn encode_fragment(&self, raw: &str, dummy_prefix: bool, out: &mut Vec<u32>) {
        if raw.is_empty() {
            return;
        }
        let mut text = String::with_capacity(raw.len() + 3);
        if self.add_space_prefix && dummy_prefix {
            text.push(SPACE_MARKER);
        }
        text.extend(raw.chars().map(|c| if c == ' ' { SPACE_MARKER } else { c }));

        let mut symbols: Vec<Symbol> = Vec::with_capacity(text.len());
        for (i, (start, c)) in text.char_indices().enumerate() {
            symbols.push(Symbol {
                start,
                len: c.len_utf8(),
                prev: i.checked_sub(1),
                next: None,
            });
            if let Some(prev) = i.checked_sub(1) {
                symbols[prev].next = Some(i);
            }
        }

        // The two halves of each merge, so that a merged symbol with no vocabulary piece of its
        // own (impossible with NORMAL-only merges, but cheap to keep exact) can be split again.
        let mut merges: HashMap<(usize, usize), (usize, usize)> = HashMap::new();
        let mut queue = BinaryHeap::new();
        let try_add = |queue: &mut BinaryHeap<Bigram>, symbols: &[Symbol], left: usize| {
            let Some(right) = symbols[left].next else {
                return;
            };
            let (l, r) = (symbols[left], symbols[right]);
            let merged = &text[l.start..r.start + r.len];
            if let Some(&id) = self.normal_ids.get(merged) {
                queue.push(Bigram {
                    score: self.scores[id as usize],
                    left,
                    size: merged.len(),
                });
            }
        };
        for i in 0..symbols.len() {
            try_add(&mut queue, &symbols, i);
        }
        while let Some(bigram) = queue.pop() {
            let left = bigram.left;
            let Some(right) = symbols[left].next else {
                continue;
            };
            // Stale: one side was merged away or grew since this entry was queued.
            if symbols[left].len == 0
                || symbols[right].len == 0
                || symbols[left].len + symbols[right].len != bigram.size
            {
                continue;
            }
            merges.insert(
                (symbols[left].start, bigram.size),
                (symbols[left].len, symbols[right].len),
            );
            symbols[left].len += symbols[right].len;
            symbols[right].len = 0;
            symbols[left].next = symbols[right].next;
            if let Some(next) = symbols[right].next {
                symbols[next].prev = Some(left);
            }
            if let Some(prev) = symbols[left].prev {
                try_add(&mut queue, &symbols, prev);
            }
            try_add(&mut queue, &symbols, left);
        }

        let mut current = if symbols.is_empty() { None } else { Some(0) };
        while let Some(i) = current {
            let s = symbols[i];
            self.resegment(&text, s.start, s.len, &merges, out);
            current = s.next;
        }
    }

    fn resegment(
        &self,
        text: &str,
        start: usize,
        len: usize,
        merges: &HashMap<(usize, usize), (usize, usize)>,
        out: &mut Vec<u32>,
    ) {
        let piece = &text[start..start + len];
        if let Some(&id) = self.normal_ids.get(piece) {
            out.push(id);
            return;
        }
        if let Some(&(left_len, right_len)) = merges.get(&(start, len)) {
            self.resegment(text, start, left_len, merges, out);
            self.resegment(text, start + left_len, right_len, merges, out);
            return;
        }
        for byte in piece.bytes() {
            out.push(self.byte_ids[usize::from(byte)].unwrap_or(self.unk));
        }
    }

    /// Text of `ids`: byte tokens are reassembled into UTF-8 (invalid sequences become U+FFFD),
    /// `▁` becomes a space, the leading space of the first piece is dropped, and control,
    /// user-defined and unknown tokens are rendered as their strings. Ids outside the
    /// vocabulary are skipped.
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

    pub fn decode(&self, ids: &[u32]) -> String {
        let mut bytes = Vec::new();
        for (i, &id) in ids.iter().enumerate() {
            let Some(piece) = self.tokens.get(id as usize) else {
                continue;
            };
            match self.types[id as usize] {
                TokenType::Normal => {
                    let text = piece.replace(SPACE_MARKER, " ");
                    let text = if i == 0 && self.add_space_prefix {
                        text.strip_prefix(' ').unwrap_or(&text)
                    } else {
                        &text
                    };
                    bytes.extend_from_slice(text.as_bytes());
                }
                TokenType::Byte => match parse_byte_token(piece) {
                    Some(byte) => bytes.push(byte),
                    None => bytes.extend_from_slice(piece.as_bytes()),
                },
                TokenType::Control | TokenType::UserDefined | TokenType::Unknown => {
                    bytes.extend_from_slice(piece.as_bytes());
                }
                TokenType::Unused => {}
            }
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// The id of an exact vocabulary entry of any type (`"[Relevant]"`, `"<s>"`, `"▁the"`).
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.all_ids.get(token).copied()
    }

    /// The vocabulary entry of `id`, as stored (with `▁` for spaces).
    pub fn id_to_token(&self, id: u32) -> Option<&str> {
        self.tokens.get(id as usize).map(String::as_str)
    }

    /// The type of `id`'s vocabulary entry.
    pub fn token_type(&self, id: u32) -> Option<TokenType> {
        self.types.get(id as usize).copied()
    }

    /// Beginning-of-sequence id (`<s>`).
    pub fn bos_id(&self) -> u32 {
        self.bos
    }

    /// End-of-sequence id (`</s>`).
    pub fn eos_id(&self) -> u32 {
        self.eos
    }

    /// Unknown-token id (`<unk>`), used when a byte has no `<0xAB>` token.
    pub fn unk_id(&self) -> u32 {
        self.unk
    }

    /// Padding id (`<pad>`), if the model has one.
    pub fn pad_id(&self) -> Option<u32> {
        self.pad
    }

    /// Whether prompts should start with BOS (`tokenizer.ggml.add_bos_token`, default true).
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

    fn vocab_size(&self) -> usize {
        GgufTokenizer::vocab_size(self)
    }
}
