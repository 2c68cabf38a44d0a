//! The byte-level BPE vocabulary of the tiny Llama-3-style fixtures, and the choice between it
//! and the SentencePiece one for a fixture Llama.
//!
//! The vocabulary is built the way GPT-2's and Llama-3's were, only small: the 256 byte
//! symbols in GPT-2's byte-to-unicode mapping (a space is `Ġ`, a line feed `Ċ`), then the
//! merges a small BPE trainer learns over [`CORPUS`] (English with digits, punctuation, runs
//! of spaces and line breaks, and some é, ß, Cyrillic, CJK and emoji), each merge's result a
//! new entry, so common words become single tokens; then a few whole words the merges cannot
//! reach (what Llama-3's `ignore_merges` rule is for), Llama-3's special tokens as control
//! tokens, and the 16 Self-RAG tokens (user-defined, as llama.cpp's converter marks added
//! tokens, or control on request).
//!
//! Training is deterministic (the most frequent pair first, ties broken by the pair's text),
//! so every write gives the same bytes.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::OnceLock;

use candle_core::quantized::gguf_file::Value;

use crate::llama_family::{LLAMA_2, LlamaFamily};
use crate::{FixtureError, LlamaFixture, SELFRAG_SPECIAL_TOKENS, TINY_LLAMA, write_llama};

/// How many merges the trainer learns (fewer only if every word became one symbol).
const MERGES: usize = 420;

/// The text the merges are learned from.
const CORPUS: &str = "### Instruction:
What is the capital of France?

### Response:
The capital of France is Paris. Paris is the largest city of France, and it is known for \
the Eiffel Tower, which was built in 1889. The city has about 2,100,000 people; the region \
around it has more than 12,000,000.

### Instruction:
Who wrote the book about the history of science?

### Response:
The book was written by a team of people who work at the school. It's the first book of \
its kind, and they've said that it'll be the last. We're sure they'd do it again: I'm not.

The model reads the passage and the question, then writes the answer. The answer is \
supported by the evidence in the passage when the passage says what the answer says.
When the passage is not relevant, the model should say so; when it is, the answer should use \
it. The evidence of a document is its text, and the title of the document is its name.

Numbers: 0 1 2 3 4 5 6 7 8 9 10 12 19 20 42 99 100 123 256 365 512 1000 1024 1984 2000 2019 \
2020 2021 2022 2023 2024 2025 12345 123456 1234567 3.14159 -7 +12% $100 (2023) [12] {42}.

Punctuation... and more!!! Is it? Yes -- no; maybe: (a, b) [c] {d} <e> \"quoted\" 'single' \
a/b a\\b a|b a_b a-b a+b=c a*b^2 #tag @user ~home `code` & 50% of $5.
Tabs\tand  double  spaces   and    runs, line\r\nbreaks,\n\n\nparagraphs.

The café in Zürich serves crème brûlée; the naïve résumé says Straße and Fuß. Ça va, señor?
Москва — столица России. Москва большой город, и в Москве много людей.
東京は日本の首都です。東京には多くの人が住んでいます。北京是中国的首都。
Emoji: 🚀 🚀 👍 👍 😀 🇫🇷 👩‍👩‍👧 ✓ ★ → ∞ ≤ ≥ ± × ÷ € £ ¥.

The history of the city is the history of its people. The people of the city work, and \
the city works for its people. The water of the country is used by the people of the state.
There are two, three, or more questions. The first question is what; the second is why.
";

/// Whole words added as entries after the merges, which the merges do not reach: with
/// Llama-3's and Tekken's pre-tokenizers (`ignore_merges`) such a word is its one entry,
/// with the others it is merged from its bytes.
const WHOLE_WORDS: [&str; 3] = ["Ġquokka", "quokka", "ĠQuokka"];

/// Llama-3's special tokens (control), in the order of their ids from 128,000 up.
pub const LLAMA3_SPECIAL_TOKENS: [&str; 11] = [
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|reserved_special_token_0|>",
    "<|reserved_special_token_1|>",
    "<|finetune_right_pad_id|>",
    "<|reserved_special_token_2|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eom_id|>",
    "<|eot_id|>",
    "<|python_tag|>",
];

/// The GGUF token type of the 16 Self-RAG tokens in a BPE fixture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReflectionTokenType {
    /// 4, as llama.cpp's converter marks added tokens (llama.cpp then matches them in text even
    /// with special-token parsing off).
    UserDefined,
    /// 3: matched in text only with special-token parsing on, by llama.cpp as by this app.
    Control,
}

impl ReflectionTokenType {
    fn code(self) -> i32 {
        match self {
            Self::UserDefined => 4,
            Self::Control => 3,
        }
    }
}

/// The tokenizer of a fixture Llama.
#[derive(Debug, Clone, Copy)]
pub(crate) enum FixtureTokenizer {
    /// The SentencePiece vocabulary of the Llama-2 Self-RAG model (`crate::llama_vocab`).
    SentencePiece,
    /// This module's byte-level BPE vocabulary, with `tokenizer.ggml.pre = pre`.
    ByteLevelBpe {
        pre: &'static str,
        reflection_tokens: ReflectionTokenType,
    },
}

/// GPT-2's byte-to-unicode table: the printable Latin-1 bytes stand for themselves, the other
/// 68 for U+0100 onwards, in byte order.
fn byte_chars() -> [char; 256] {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    let mut table = ['\0'; 256];
    let mut extra = 0x100u32;
    for b in 0..=255u8 {
        table[usize::from(b)] = if printable(b) {
            char::from(b)
        } else {
            extra += 1;
            char::from_u32(extra - 1).unwrap_or('\u{FFFD}')
        };
    }
    table
}

/// `word`'s bytes as GPT-2's characters.
fn byte_encode(word: &str) -> String {
    let table = byte_chars();
    word.bytes().map(|b| table[usize::from(b)]).collect()
}

/// The words the trainer counts: roughly Llama-3's split (a letter run with one leading
/// non-letter, digits in threes, punctuation runs with their line breaks, whitespace runs).
fn training_words(text: &str) -> Vec<&str> {
    #[derive(PartialEq, Clone, Copy)]
    enum Class {
        Letter,
        Digit,
        Space,
        Other,
    }
    let class = |c: char| {
        if c.is_alphabetic() {
            Class::Letter
        } else if c.is_numeric() {
            Class::Digit
        } else if c.is_whitespace() {
            Class::Space
        } else {
            Class::Other
        }
    };
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut words = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let start = chars[i].0;
        let c = chars[i].1;
        let next = chars.get(i + 1).map(|&(_, c)| class(c));
        let mut j = i + 1;
        match class(c) {
            Class::Letter => {
                while j < chars.len() && class(chars[j].1) == Class::Letter {
                    j += 1;
                }
            }
            _ if c != '\n' && c != '\r' && next == Some(Class::Letter) => {
                j += 1;
                while j < chars.len() && class(chars[j].1) == Class::Letter {
                    j += 1;
                }
            }
            Class::Digit => {
                while j < chars.len() && j - i < 3 && class(chars[j].1) == Class::Digit {
                    j += 1;
                }
            }
            Class::Space => {
                while j < chars.len() && class(chars[j].1) == Class::Space {
                    j += 1;
                }
            }
            Class::Other => {
                while j < chars.len() && class(chars[j].1) == Class::Other {
                    j += 1;
                }
                while j < chars.len() && matches!(chars[j].1, '\r' | '\n') {
                    j += 1;
                }
            }
        }
        let end = chars.get(j).map_or(text.len(), |&(at, _)| at);
        words.push(&text[start..end]);
        i = j;
    }
    words
}

/// The merges BPE learns from [`CORPUS`]: at each step the pair of adjacent symbols that
/// occurs most often (ties: the smaller pair by text), [`MERGES`] of them.
fn train_merges() -> Vec<(String, String)> {
    let mut words: BTreeMap<Vec<String>, usize> = BTreeMap::new();
    for word in training_words(CORPUS) {
        let symbols = byte_encode(word).chars().map(String::from).collect();
        *words.entry(symbols).or_default() += 1;
    }
    let mut merges = Vec::new();
    while merges.len() < MERGES {
        let mut pairs: BTreeMap<(&str, &str), usize> = BTreeMap::new();
        for (word, count) in &words {
            for pair in word.windows(2) {
                *pairs.entry((&pair[0], &pair[1])).or_default() += count;
            }
        }
        // Pairs seen once merge too, once the frequent ones are done: whole rare words (and
        // the bytes of CJK characters and emoji) become entries, as in a real vocabulary.
        let Some((&(left, right), _)) = pairs
            .iter()
            .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))
        else {
            break;
        };
        let (left, right) = (left.to_owned(), right.to_owned());
        let merged = format!("{left}{right}");
        let mut next: BTreeMap<Vec<String>, usize> = BTreeMap::new();
        for (word, count) in words {
            let mut out: Vec<String> = Vec::with_capacity(word.len());
            let mut i = 0;
            while i < word.len() {
                if i + 1 < word.len() && word[i] == left && word[i + 1] == right {
                    out.push(merged.clone());
                    i += 2;
                } else {
                    out.push(word[i].clone());
                    i += 1;
                }
            }
            *next.entry(out).or_default() += count;
        }
        words = next;
        merges.push((left, right));
    }
    merges
}

/// The trained merges, learned once per process.
fn merges() -> &'static [(String, String)] {
    static MERGES_LEARNED: OnceLock<Vec<(String, String)>> = OnceLock::new();
    MERGES_LEARNED.get_or_init(train_merges)
}

/// The BPE vocabulary: `(piece, score, type code)` in id order (scores are 0: byte-level BPE
/// ranks merges, not pieces), the reflection tokens last.
fn bpe_vocab(reflection_tokens: ReflectionTokenType) -> Vec<(String, f32, i32)> {
    let table = byte_chars();
    // GPT-2's order: the printable bytes first, then the others.
    let mut bytes: Vec<u8> = (0..=255u8).collect();
    bytes.sort_by_key(|&b| u32::from(table[usize::from(b)]));
    let mut pieces: Vec<String> = bytes
        .iter()
        .map(|&b| table[usize::from(b)].to_string())
        .collect();
    let mut push = |piece: String| {
        if !pieces.contains(&piece) {
            pieces.push(piece);
        }
    };
    for (left, right) in merges() {
        push(format!("{left}{right}"));
    }
    for word in WHOLE_WORDS {
        push(word.to_owned());
    }
    let mut vocab: Vec<(String, f32, i32)> = pieces.into_iter().map(|p| (p, 0.0, 1)).collect();
    vocab.extend(
        LLAMA3_SPECIAL_TOKENS
            .iter()
            .map(|t| ((*t).to_owned(), 0.0, 3)),
    );
    vocab.extend(
        SELFRAG_SPECIAL_TOKENS
            .iter()
            .map(|t| ((*t).to_owned(), 0.0, reflection_tokens.code())),
    );
    vocab
}

impl FixtureTokenizer {
    /// The vocabulary, `(piece, score, type code)` in id order, ending with the 16 Self-RAG
    /// tokens.
    pub(crate) fn vocab(self) -> Vec<(String, f32, i32)> {
        match self {
            Self::SentencePiece => crate::llama_vocab(),
            Self::ByteLevelBpe {
                reflection_tokens, ..
            } => bpe_vocab(reflection_tokens),
        }
    }

    /// This vocabulary's entry for what the SentencePiece fixture calls `piece` (`<0x0A>`,
    /// `▁The`, `</s>`): the same text in GPT-2's byte characters (`Ċ`, `ĠThe`), Llama-3's
    /// `<|begin_of_text|>` and `<|end_of_text|>` for `<s>` and `</s>`.
    pub(crate) fn piece(self, piece: &str) -> String {
        if let Self::SentencePiece = self {
            return piece.to_owned();
        }
        match piece {
            "<s>" => return LLAMA3_SPECIAL_TOKENS[0].to_owned(),
            "</s>" => return LLAMA3_SPECIAL_TOKENS[1].to_owned(),
            _ => {}
        }
        let byte = piece
            .strip_prefix("<0x")
            .and_then(|hex| hex.strip_suffix('>'))
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match byte {
            Some(b) => byte_chars()[usize::from(b)].to_string(),
            None if SELFRAG_SPECIAL_TOKENS.contains(&piece) => piece.to_owned(),
            None => byte_encode(&piece.replace('\u{2581}', " ")),
        }
    }

    /// Replaces the SentencePiece tokenizer keys `crate::llama_metadata` wrote with this
    /// tokenizer's (`vocab` as [`Self::vocab`] gave it); the name says which model it is.
    pub(crate) fn apply(
        self,
        metadata: &mut Vec<(&'static str, Value)>,
        vocab: &[(String, f32, i32)],
    ) {
        let Self::ByteLevelBpe { pre, .. } = self else {
            return;
        };
        metadata.retain(|(key, _)| !key.starts_with("tokenizer."));
        for (key, value) in metadata.iter_mut() {
            if *key == "general.name" {
                *value = Value::String("selfrag_llama3_8b (tiny random fixture)".to_owned());
            }
        }
        let id = |piece: &str| {
            let at = vocab.iter().position(|(p, _, _)| p == piece).unwrap_or(0);
            Value::U32(u32::try_from(at).unwrap_or(u32::MAX))
        };
        metadata.extend([
            ("tokenizer.ggml.model", Value::String("gpt2".to_owned())),
            ("tokenizer.ggml.pre", Value::String(pre.to_owned())),
            (
                "tokenizer.ggml.tokens",
                Value::Array(
                    vocab
                        .iter()
                        .map(|(p, _, _)| Value::String(p.clone()))
                        .collect(),
                ),
            ),
            (
                "tokenizer.ggml.token_type",
                Value::Array(vocab.iter().map(|(_, _, t)| Value::I32(*t)).collect()),
            ),
            (
                "tokenizer.ggml.merges",
                Value::Array(
                    merges()
                        .iter()
                        .map(|(l, r)| Value::String(format!("{l} {r}")))
                        .collect(),
                ),
            ),
            ("tokenizer.ggml.bos_token_id", id(LLAMA3_SPECIAL_TOKENS[0])),
            ("tokenizer.ggml.eos_token_id", id(LLAMA3_SPECIAL_TOKENS[1])),
            ("tokenizer.ggml.add_bos_token", Value::Bool(true)),
            ("tokenizer.ggml.add_eos_token", Value::Bool(false)),
        ]);
        if vocab.iter().any(|(p, _, _)| p == "<pad>") {
            metadata.push(("tokenizer.ggml.padding_token_id", id("<pad>")));
        }
    }
}

/// The tiny Self-RAG Llama in Llama-3's shape: 64-d, 2 blocks, 4 heads sharing 1 key/value
/// head, RoPE base 500,000, Q8_0 matrices, with `tokenizer.ggml.pre = pre`.
fn llama3_fixture(pre: &'static str, reflection_tokens: ReflectionTokenType) -> LlamaFixture {
    LlamaFixture {
        heads: 4,
        kv_heads: 1,
        family: LlamaFamily {
            rope_freq_base: 500_000.0,
            ..LLAMA_2
        },
        tokenizer: FixtureTokenizer::ByteLevelBpe {
            pre,
            reflection_tokens,
        },
        ..TINY_LLAMA
    }
}

/// Writes a random-weight Llama-3-style Self-RAG GGUF (RAGLAB's selfrag_llama3-8B in small):
/// the byte-level BPE vocabulary of this module with `tokenizer.ggml.pre = "llama-bpe"`, the
/// 16 Self-RAG tokens user-defined, Llama-3's shape in small (4 heads, 1 KV head, RoPE base
/// 500,000), context 512.
pub fn write_tiny_llama3_gguf(path: &Path) -> Result<(), FixtureError> {
    write_llama(
        path,
        &llama3_fixture("llama-bpe", ReflectionTokenType::UserDefined),
    )
}

/// [`write_tiny_llama3_gguf`] with another pre-tokenizer name (`gpt-2`, `qwen2`, `tekken`, …,
/// or one no version runs) and the Self-RAG tokens of type `reflection_tokens`.
pub fn write_tiny_bpe_llama_gguf(
    path: &Path,
    pre: &'static str,
    reflection_tokens: ReflectionTokenType,
) -> Result<(), FixtureError> {
    write_llama(path, &llama3_fixture(pre, reflection_tokens))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_vocabulary_has_every_byte_the_merges_and_the_special_tokens() {
        let vocab = bpe_vocab(ReflectionTokenType::UserDefined);
        let pieces: Vec<&str> = vocab.iter().map(|(p, _, _)| p.as_str()).collect();
        assert_eq!(pieces[0], "!");
        assert_eq!(pieces[255], "Ń");
        assert_eq!(merges().len(), MERGES);
        for common in ["Ġthe", "ĠThe", "Ġcapital", "ĠParis", "Ċ", "ĊĊ", "Ġpassage"] {
            assert!(pieces.contains(&common), "{common}");
        }
        for (left, right) in merges() {
            let merged = format!("{left}{right}");
            assert!(pieces.contains(&merged.as_str()), "{merged}");
        }
        let mut unique = pieces.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), pieces.len(), "pieces repeat");
        assert_eq!(&pieces[pieces.len() - 16..], &SELFRAG_SPECIAL_TOKENS);
        assert!(vocab[vocab.len() - 16..].iter().all(|(_, _, t)| *t == 4));
    }

    #[test]
    fn sentencepiece_pieces_translate_to_byte_level_ones() {
        let bpe = FixtureTokenizer::ByteLevelBpe {
            pre: "llama-bpe",
            reflection_tokens: ReflectionTokenType::UserDefined,
        };
        assert_eq!(bpe.piece("<0x0A>"), "Ċ");
        assert_eq!(bpe.piece("\u{2581}The"), "ĠThe");
        assert_eq!(bpe.piece("</s>"), "<|end_of_text|>");
        assert_eq!(bpe.piece("[Utility:5]"), "[Utility:5]");
    }
}
