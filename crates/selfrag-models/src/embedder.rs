//! `BertEmbedder`: the Contriever retriever encoder (Izacard et al., "Unsupervised Dense
//! Information Retrieval with Contrastive Learning", 2022), a BERT model run with candle.
//!
//! A passage embedding is the **mean of the last hidden states over the attention mask, not
//! normalised**; similarity is the dot product (SELFRAG.md). A model directory holds
//! `config.json`, `model.safetensors` or else `pytorch_model.bin`, and `tokenizer.json` or else
//! `vocab.txt` (then the tokenizer is BERT uncased WordPiece, as `facebook/contriever-msmarco`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use candle_core::{Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config, DTYPE};
use selfrag_core::EmbedderPrecision;
use tokenizers::models::wordpiece::WordPiece;
use tokenizers::normalizers::BertNormalizer;
use tokenizers::pre_tokenizers::bert::BertPreTokenizer;
use tokenizers::processors::template::TemplateProcessing;
use tokenizers::{AddedToken, Tokenizer, TruncationParams};

use crate::bert::FusedBert;
use crate::error::ModelError;

/// Tokens per forward pass on the CPU, counted as the pass's rows × its longest row (the texts
/// are sorted by length, so that is close to their real tokens, the only ones the fused encoder
/// computes). The largest tensor of a pass, the feed-forward activations
/// (`tokens × 3072` f32 in BERT-base), is then 25 MB: below the size at which glibc hands every
/// allocation fresh pages from the kernel (32 MB), so the passes reuse memory instead of
/// faulting in new pages. On the benchmark, 2048 beat 1024 by 4% and 4096 by 6%.
const TOKENS_PER_BATCH: usize = 2048;
/// Rows per forward pass at most (short texts such as queries).
const MAX_ROWS: usize = 32;
/// On a GPU (CUDA, Metal): padded tokens and rows per forward pass. A GPU runs a pass of a few
/// hundred rows in about the time of a dozen, and its memory holds the activations (about
/// 200 MB of feed-forward activations, 400 MB of attention scores at 512-token rows).
const GPU_TOKENS_PER_BATCH: usize = 16_384;
const GPU_MAX_ROWS: usize = 256;

/// How [`BertEmbedder::embed`] groups texts into forward passes: texts sorted by length, a pass
/// closed at `rows` rows or where the next (longer) text would take it past `tokens` tokens
/// counted as rows × the longest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EmbedBatching {
    pub rows: usize,
    pub tokens: usize,
}
/// BERT's position limit; lowered to `max_position_embeddings` where a config says less.
const MAX_TOKENS: usize = 512;

/// The encoder that runs: the fused one on the CPU, candle-transformers' on CUDA and Metal
/// (the fused passes are CPU code). Both compute the same function; the tests hold them to it.
enum Encoder {
    Fused(FusedBert),
    Candle(BertModel),
}

/// A BERT encoder with mean pooling, e.g. `facebook/contriever-msmarco`.
pub struct BertEmbedder {
    encoder: Encoder,
    tokenizer: Tokenizer,
    device: Device,
    dim: usize,
    pad_id: u32,
    dir: PathBuf,
}

impl std::fmt::Debug for BertEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BertEmbedder")
            .field("dir", &self.dir)
            .field("device", &self.device)
            .field("dim", &self.dim)
            .finish_non_exhaustive()
    }
}

/// `do_lower_case` of a `tokenizer_config.json` next to `vocab.txt`; true (uncased) without one.
fn lowercase_setting(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("tokenizer_config.json"))
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .and_then(|config| {
            config
                .get("do_lower_case")
                .and_then(serde_json::Value::as_bool)
        })
        .unwrap_or(true)
}

/// BERT WordPiece from `vocab.txt`, as `BertTokenizerFast` builds it (uncased unless
/// `lowercase` is false, e.g. for the cased mContriever).
fn wordpiece_from_vocab(vocab: &Path, lowercase: bool) -> Result<Tokenizer, ModelError> {
    let invalid = |reason: String| ModelError::InvalidBertTokenizer {
        path: vocab.to_owned(),
        reason,
    };
    let vocab_str = vocab
        .to_str()
        .ok_or_else(|| invalid("the path is not valid UTF-8".to_owned()))?;
    let wordpiece = WordPiece::from_file(vocab_str)
        .unk_token("[UNK]".to_owned())
        .build()
        .map_err(|e| invalid(e.to_string()))?;
    let mut tokenizer = Tokenizer::new(wordpiece);
    let id = |token: &str| {
        tokenizer
            .token_to_id(token)
            .ok_or_else(|| invalid(format!("the vocabulary has no `{token}`")))
    };
    let (cls, sep) = (id("[CLS]")?, id("[SEP]")?);
    let template = TemplateProcessing::builder()
        .try_single("[CLS] $A [SEP]")
        .and_then(|b| b.try_pair("[CLS] $A [SEP] $B:1 [SEP]:1"))
        .map_err(|e| invalid(e.to_string()))?
        .special_tokens(vec![("[CLS]", cls), ("[SEP]", sep)])
        .build()
        .map_err(|e| invalid(e.to_string()))?;
    tokenizer
        .with_normalizer(Some(BertNormalizer::new(true, true, None, lowercase)))
        .map_err(|e| invalid(e.to_string()))?
        .with_pre_tokenizer(Some(BertPreTokenizer))
        .with_post_processor(Some(template));
    let specials: Vec<AddedToken> = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        .iter()
        .filter(|t| tokenizer.token_to_id(t).is_some())
        .map(|t| AddedToken::from(*t, true))
        .collect();
    tokenizer
        .add_special_tokens(specials)
        .map_err(|e| invalid(e.to_string()))?;
    Ok(tokenizer)
}

/// The sizes candle's BERT divides by or allocates from, checked first: a zero head count
/// would divide by zero, and no real BERT has an empty dimension.
fn check_config(config: &Config) -> Result<(), String> {
    let sizes = [
        ("hidden_size", config.hidden_size),
        ("num_attention_heads", config.num_attention_heads),
        ("num_hidden_layers", config.num_hidden_layers),
        ("intermediate_size", config.intermediate_size),
        ("max_position_embeddings", config.max_position_embeddings),
        ("vocab_size", config.vocab_size),
    ];
    if let Some((key, _)) = sizes.iter().find(|(_, size)| *size == 0) {
        return Err(format!("not a BERT config: `{key}` is 0"));
    }
    if !config
        .hidden_size
        .is_multiple_of(config.num_attention_heads)
    {
        return Err(format!(
            "not a BERT config: `hidden_size` {} does not split into {} attention heads",
            config.hidden_size, config.num_attention_heads
        ));
    }
    Ok(())
}

impl BertEmbedder {
    /// Loads the model in `dir` onto `device`, in the default precision (int8 on a CPU that
    /// runs it).
    pub fn load(dir: &Path, device: &Device) -> Result<Self, ModelError> {
        Self::load_with_precision(dir, device, EmbedderPrecision::default())
    }

    /// Loads the model in `dir` onto `device`, its CPU projections in `precision` where the CPU
    /// runs it (else f32; [`BertEmbedder::precision`] says which). A GPU runs f32.
    pub fn load_with_precision(
        dir: &Path,
        device: &Device,
        precision: EmbedderPrecision,
    ) -> Result<Self, ModelError> {
        let missing = |file: &str| ModelError::MissingFile {
            dir: dir.to_owned(),
            file: file.to_owned(),
        };
        let config_path = dir.join("config.json");
        if !config_path.is_file() {
            return Err(missing("config.json"));
        }
        let config_text =
            std::fs::read_to_string(&config_path).map_err(ModelError::io(&config_path))?;
        let config: Config =
            serde_json::from_str(&config_text).map_err(|e| ModelError::InvalidModelFile {
                path: config_path.clone(),
                reason: format!("not a BERT config: {e}"),
            })?;

        check_config(&config).map_err(|reason| ModelError::InvalidModelFile {
            path: config_path.clone(),
            reason,
        })?;

        let safetensors = dir.join("model.safetensors");
        let pytorch = dir.join("pytorch_model.bin");
        // Mapped, not read: every tensor is copied out of the file as it loads (and the int8
        // projections quantized from that copy), so a buffer of the whole file would only be
        // one more copy, in pages the system must clear first. The word table stays in the map
        // (on the CPU), read a row at a time.
        let map = if safetensors.is_file() {
            let map =
                crate::mapped::map_weights(&safetensors).map_err(ModelError::io(&safetensors))?;
            Some(Arc::new(map))
        } else {
            None
        };
        let (weights_path, vb) = if let Some(map) = &map {
            let vb = VarBuilder::from_slice_safetensors(map, DTYPE, device);
            (safetensors, vb)
        } else if pytorch.is_file() {
            let vb = VarBuilder::from_pth(&pytorch, DTYPE, device);
            (pytorch, vb)
        } else {
            return Err(missing("model.safetensors or pytorch_model.bin"));
        };
        let invalid_weights = |e: candle_core::Error| ModelError::InvalidModelFile {
            path: weights_path.clone(),
            reason: format!("cannot load BERT weights: {e}"),
        };
        let encoder = vb
            .and_then(|vb| {
                if device.is_cpu() {
                    FusedBert::load(&vb, &config, precision, map.as_ref()).map(Encoder::Fused)
                } else {
                    BertModel::load(vb, &config).map(Encoder::Candle)
                }
            })
            .map_err(invalid_weights)?;
        if let Some(map) = &map {
            crate::mapped::release_pages(map);
        }

        let tokenizer_json = dir.join("tokenizer.json");
        let vocab_txt = dir.join("vocab.txt");
        let mut tokenizer = if tokenizer_json.is_file() {
            Tokenizer::from_file(&tokenizer_json).map_err(|e| ModelError::InvalidBertTokenizer {
                path: tokenizer_json.clone(),
                reason: e.to_string(),
            })?
        } else if vocab_txt.is_file() {
            wordpiece_from_vocab(&vocab_txt, lowercase_setting(dir))?
        } else {
            return Err(missing("tokenizer.json or vocab.txt"));
        };
        let max_length = MAX_TOKENS.min(config.max_position_embeddings);
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length,
                ..TruncationParams::default()
            }))
            .map_err(|e| ModelError::InvalidBertTokenizer {
                path: dir.to_owned(),
                reason: e.to_string(),
            })?
            .with_padding(None);
        // `[SEP]`, `[CLS]` or `[MASK]` written in a document is text: only the
        // post-processor's own `[CLS]` … `[SEP]` frame a passage (as the generator embeds
        // document text with special tokens off).
        tokenizer.set_encode_special_tokens(true);
        let pad_id = u32::try_from(config.pad_token_id).unwrap_or(0);

        let embedder = Self {
            encoder,
            tokenizer,
            device: device.clone(),
            dim: config.hidden_size,
            pad_id,
            dir: dir.to_owned(),
        };
        tracing::info!(
            dir = %dir.display(),
            dim = config.hidden_size,
            precision = %embedder.precision(),
            "loaded BERT embedder"
        );
        Ok(embedder)
    }

    /// The precision the embedder multiplies in: int8 only where it was asked for and this CPU
    /// runs it.
    pub fn precision(&self) -> EmbedderPrecision {
        match &self.encoder {
            Encoder::Fused(model) => model.precision(),
            Encoder::Candle(_) => EmbedderPrecision::F32,
        }
    }

    /// The ids the encoder reads for `text`, framed by `[CLS]` and `[SEP]`, not truncated.
    pub fn token_ids(&self, text: &str) -> Result<Vec<u32>, ModelError> {
        self.tokenizer
            .encode(text, true)
            .map(|e| e.get_ids().to_vec())
            .map_err(|e| ModelError::InvalidBertTokenizer {
                path: self.dir.clone(),
                reason: format!("cannot tokenize: {e}"),
            })
    }

    /// How texts are grouped into forward passes on this embedder's device.
    pub fn batching(&self) -> EmbedBatching {
        if self.device.is_cpu() {
            EmbedBatching {
                rows: MAX_ROWS,
                tokens: TOKENS_PER_BATCH,
            }
        } else {
            EmbedBatching {
                rows: GPU_MAX_ROWS,
                tokens: GPU_TOKENS_PER_BATCH,
            }
        }
    }

    /// Width of the embeddings (768 for Contriever).
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// One embedding per text, in order: mean of the last hidden states over the real
    /// (unpadded) tokens, not normalised. Texts longer than 512 tokens are truncated.
    ///
    /// Texts are batched by length (all tokenized first, then sorted), and a batch holds as
    /// many rows as fit in [`BertEmbedder::batching`]'s tokens. On the CPU a batch's rows lie
    /// end to end with no padding; on a GPU each is padded to the batch's longest, which the
    /// sorting keeps short. A row's vector does not depend on the other rows of its batch.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| ModelError::InvalidBertTokenizer {
                path: self.dir.clone(),
                reason: format!("cannot tokenize: {e}"),
            })?;
        let mut order: Vec<usize> = (0..encodings.len()).collect();
        order.sort_by_key(|&i| encodings[i].len());
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        // Sorted by length, so the text just added is the batch's longest and sets its width.
        let limits = self.batching();
        let mut batch: Vec<usize> = Vec::new();
        for (position, &i) in order.iter().enumerate() {
            batch.push(i);
            let next_width = order.get(position + 1).map(|&j| encodings[j].len());
            let full = batch.len() == limits.rows
                || next_width.is_none_or(|width| (batch.len() + 1) * width.max(1) > limits.tokens);
            if full {
                let rows: Vec<&tokenizers::Encoding> =
                    batch.iter().map(|&i| &encodings[i]).collect();
                for (&i, vector) in batch.iter().zip(self.embed_batch(&rows)?) {
                    out[i] = vector;
                }
                batch.clear();
            }
        }
        Ok(out)
    }

    /// The mean-pooled states of one forward pass's texts.
    fn embed_batch(
        &self,
        encodings: &[&tokenizers::Encoding],
    ) -> Result<Vec<Vec<f32>>, ModelError> {
        let context = || format!("embedding with the BERT model in {}", self.dir.display());
        match &self.encoder {
            Encoder::Fused(model) => {
                let rows: Vec<&[u32]> = encodings.iter().map(|e| e.get_ids()).collect();
                let states = model
                    .forward(&rows)
                    .and_then(|states| states.flatten_all()?.to_vec1::<f32>())
                    .map_err(ModelError::candle(context()))?;
                let lengths = rows.iter().map(|row| row.len());
                Ok(mean_of_rows(&states, lengths, self.dim))
            }
            Encoder::Candle(model) => self
                .embed_padded(model, encodings)
                .map_err(ModelError::candle(context())),
        }
    }

    /// candle-transformers' encoder, which takes rows of equal width: each row padded to the
    /// longest, the padding masked out of the attention and of the mean.
    fn embed_padded(
        &self,
        model: &BertModel,
        encodings: &[&tokenizers::Encoding],
    ) -> candle_core::Result<Vec<Vec<f32>>> {
        let width = encodings.iter().map(|e| e.len()).max().unwrap_or(0).max(1);
        let rows = encodings.len();
        let mut ids = Vec::with_capacity(rows * width);
        let mut mask = Vec::with_capacity(rows * width);
        for encoding in encodings {
            let n = encoding.len();
            ids.extend_from_slice(encoding.get_ids());
            ids.extend(std::iter::repeat_n(self.pad_id, width - n));
            // No padding in the encodings themselves: a row is its `n` tokens, then padding.
            mask.extend(std::iter::repeat_n(1f32, n));
            mask.extend(std::iter::repeat_n(0f32, width - n));
        }
        let ids = Tensor::from_vec(ids, (rows, width), &self.device)?;
        let mask = Tensor::from_vec(mask, (rows, width), &self.device)?;
        let hidden = model.forward(&ids, &ids.zeros_like()?, Some(&mask))?;
        let mask = mask.unsqueeze(2)?;
        let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
        // An empty row (no tokens at all) would divide by zero; it stays all zeros.
        let counts = mask.sum(1)?.clamp(1f32, f32::MAX)?;
        summed.broadcast_div(&counts)?.to_vec2::<f32>()
    }
}

/// The mean of each row's states, where `states` holds rows of `lengths` tokens end to end,
/// `dim` values a token; an empty row's mean is all zeros.
fn mean_of_rows(states: &[f32], lengths: impl Iterator<Item = usize>, dim: usize) -> Vec<Vec<f32>> {
    let mut tokens = states.chunks_exact(dim);
    lengths
        .map(|n| {
            let mut sum = vec![0f32; dim];
            for token in tokens.by_ref().take(n) {
                sum.iter_mut().zip(token).for_each(|(s, x)| *s += x);
            }
            let count = n.max(1) as f32;
            sum.iter_mut().for_each(|s| *s /= count);
            sum
        })
        .collect()
}
