//! `LlamaGenerator`: the Self-RAG generator, a quantized Llama read from one GGUF file with
//! candle's `quantized_llama`, implementing `selfrag_core::Generator`.
//!
//! This is the walking skeleton: rows of a batch are decoded one after the other with a fresh
//! KV cache each (a forward pass at position 0 resets it). Probabilities are computed on the
//! host in f32 over the whole vocabulary, so reflection-token probabilities are exact softmax
//! values, never renormalised.

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use candle_core::quantized::gguf_file;
use candle_core::{DType, Device, Tensor};
use candle_transformers::models::quantized_llama::{self, ModelWeights};
use selfrag_core::{
    BackendError, GenerateRequest, GeneratedToken, Generation, Generator, StopReason, TokenId,
};

use crate::error::ModelError;
use crate::gguf_tokenizer::GgufTokenizer;

/// Metadata keys `quantized_llama` needs; checked up front for a clear error.
const REQUIRED_KEYS: [&str; 6] = [
    "llama.attention.head_count",
    "llama.attention.head_count_kv",
    "llama.block_count",
    "llama.embedding_length",
    "llama.rope.dimension_count",
    "llama.attention.layer_norm_rms_epsilon",
];

/// A GGUF Llama model and its tokenizer, on one device.
pub struct LlamaGenerator {
    model: ModelWeights,
    tokenizer: GgufTokenizer,
    device: Device,
    context_length: usize,
    path: PathBuf,
}

impl std::fmt::Debug for LlamaGenerator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlamaGenerator")
            .field("path", &self.path)
            .field("device", &self.device)
            .field("context_length", &self.context_length)
            .field("vocab_size", &self.tokenizer.vocab_size())
            .finish_non_exhaustive()
    }
}

/// `log_softmax(logits)[i]` for every `i`, computed in f32 with an f64 normaliser.
fn log_softmax(logits: &[f32]) -> Vec<f32> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f64 = logits.iter().map(|&x| f64::from(x - max).exp()).sum();
    #[allow(clippy::cast_possible_truncation)]
    let log_sum = sum.ln() as f32;
    logits.iter().map(|&x| x - max - log_sum).collect()
}

/// The index of the largest value; the lowest index on ties.
fn argmax(values: &[f32]) -> usize {
    let mut best = 0;
    for (i, &v) in values.iter().enumerate() {
        if v > values[best] {
            best = i;
        }
    }
    best
}

impl LlamaGenerator {
    /// Reads the GGUF at `path` once: tokenizer from its metadata, weights onto `device`.
    pub fn load(path: &Path, device: &Device) -> Result<Self, ModelError> {
        let file = File::open(path).map_err(ModelError::io(path))?;
        let mut reader = BufReader::new(file);
        let content =
            gguf_file::Content::read(&mut reader).map_err(|e| ModelError::InvalidGguf {
                path: path.to_owned(),
                reason: e.to_string(),
            })?;

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
        for key in REQUIRED_KEYS {
            if !content.metadata.contains_key(key) {
                return Err(ModelError::MissingMetadata {
                    path: path.to_owned(),
                    key: key.to_owned(),
                });
            }
        }
        let declared_context = content
            .metadata
            .get("llama.context_length")
            .and_then(|v| v.to_u64().ok())
            .ok_or_else(|| ModelError::MissingMetadata {
                path: path.to_owned(),
                key: "llama.context_length".to_owned(),
            })?;
        // candle precomputes rotary embeddings for MAX_SEQ_LEN positions only.
        let context_length = usize::try_from(declared_context)
            .unwrap_or(usize::MAX)
            .min(quantized_llama::MAX_SEQ_LEN);
        if (context_length as u64) < declared_context {
            tracing::warn!(
                path = %path.display(),
                declared_context,
                context_length,
                "context length capped to what candle's quantized_llama supports"
            );
        }

        let tokenizer = GgufTokenizer::from_gguf(&content)?;
        let embedding_rows = content
            .tensor_infos
            .get("token_embd.weight")
            .map(|info| info.shape.dims().first().copied().unwrap_or(0))
            .ok_or_else(|| ModelError::InvalidGguf {
                path: path.to_owned(),
                reason: "tensor `token_embd.weight` is missing".to_owned(),
            })?;
        if embedding_rows != tokenizer.vocab_size() {
            return Err(ModelError::InvalidGguf {
                path: path.to_owned(),
                reason: format!(
                    "the vocabulary has {} tokens but `token_embd.weight` has {embedding_rows} rows",
                    tokenizer.vocab_size()
                ),
            });
        }

        let model = ModelWeights::from_gguf(content, &mut reader, device).map_err(|e| {
            ModelError::InvalidGguf {
                path: path.to_owned(),
                reason: e.to_string(),
            }
        })?;
        tracing::info!(
            path = %path.display(),
            vocab = tokenizer.vocab_size(),
            context_length,
            "loaded GGUF Llama generator"
        );
        Ok(Self {
            model,
            tokenizer,
            device: device.clone(),
            context_length,
            path: path.to_owned(),
        })
    }

    /// The tokenizer read from the GGUF metadata.
    pub fn tokenizer(&self) -> &GgufTokenizer {
        &self.tokenizer
    }

    /// The GGUF file this model was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn check_ids(&self, ids: &[TokenId]) -> Result<(), ModelError> {
        let vocab_size = self.tokenizer.vocab_size();
        match ids.iter().find(|&&id| id as usize >= vocab_size) {
            Some(&id) => Err(ModelError::TokenOutOfRange { id, vocab_size }),
            None => Ok(()),
        }
    }

    fn check_prompt(&self, prompt: &[TokenId], max_new_tokens: usize) -> Result<(), ModelError> {
        if prompt.is_empty() {
            return Err(ModelError::EmptyPrompt);
        }
        self.check_ids(prompt)?;
        if prompt.len().saturating_add(max_new_tokens) > self.context_length {
            return Err(ModelError::ContextOverflow {
                prompt_tokens: prompt.len(),
                max_new_tokens,
                context_length: self.context_length,
            });
        }
        Ok(())
    }

    /// Logits (f32, whole vocabulary) at the last of `ids`, which start at `index_pos`
    /// (0 resets the KV cache).
    fn forward(&mut self, ids: &[TokenId], index_pos: usize) -> Result<Vec<f32>, ModelError> {
        let path = &self.path;
        let context = |source| ModelError::Candle {
            context: format!("forward pass of {}", path.display()),
            source,
        };
        let input = Tensor::new(ids, &self.device)
            .and_then(|t| t.unsqueeze(0))
            .map_err(context)?;
        self.model
            .forward(&input, index_pos)
            .and_then(|logits| logits.squeeze(0))
            .and_then(|logits| logits.to_dtype(DType::F32))
            .and_then(|logits| logits.to_vec1::<f32>())
            .map_err(context)
    }

    /// Greedy continuation of one prompt.
    fn generate_row(
        &mut self,
        prompt: &[TokenId],
        request: &GenerateRequest,
    ) -> Result<Generation, ModelError> {
        let eos = self.tokenizer.eos_id();
        let mut tokens = Vec::with_capacity(request.max_new_tokens);
        if request.max_new_tokens == 0 {
            return Ok(Generation {
                tokens,
                stop: StopReason::Length,
            });
        }
        let mut logits = self.forward(prompt, 0)?;
        let mut position = prompt.len();
        loop {
            let logprobs = log_softmax(&logits);
            let best = argmax(&logprobs);
            let id = TokenId::try_from(best).unwrap_or(eos);
            tokens.push(GeneratedToken {
                id,
                logprob: logprobs[best],
                watched: request
                    .watch_ids
                    .iter()
                    .map(|&w| logprobs[w as usize].exp())
                    .collect(),
            });
            if id == eos {
                return Ok(Generation {
                    tokens,
                    stop: StopReason::EndOfSequence,
                });
            }
            if request.stop_ids.contains(&id) {
                return Ok(Generation {
                    tokens,
                    stop: StopReason::StopToken,
                });
            }
            if tokens.len() >= request.max_new_tokens {
                return Ok(Generation {
                    tokens,
                    stop: StopReason::Length,
                });
            }
            logits = self.forward(&[id], position)?;
            position += 1;
        }
    }
}

impl Generator for LlamaGenerator {
    fn token_id(&self, token: &str) -> Option<TokenId> {
        self.tokenizer.token_to_id(token)
    }

    fn tokenize(&self, text: &str) -> Result<Vec<TokenId>, BackendError> {
        Ok(self.tokenizer.encode(text, false))
    }

    fn decode(&self, ids: &[TokenId]) -> Result<String, BackendError> {
        self.check_ids(ids)?;
        Ok(self.tokenizer.decode(ids))
    }

    fn bos_id(&self) -> TokenId {
        self.tokenizer.bos_id()
    }

    fn eos_id(&self) -> TokenId {
        self.tokenizer.eos_id()
    }

    fn context_length(&self) -> usize {
        self.context_length
    }

    fn next_token_probs(
        &mut self,
        prompt: &[TokenId],
        watch_ids: &[TokenId],
    ) -> Result<Vec<f32>, BackendError> {
        self.check_prompt(prompt, 0)?;
        self.check_ids(watch_ids)?;
        let logprobs = log_softmax(&self.forward(prompt, 0)?);
        Ok(watch_ids
            .iter()
            .map(|&id| logprobs[id as usize].exp())
            .collect())
    }

    fn generate_batch(
        &mut self,
        prompts: &[Vec<TokenId>],
        request: &GenerateRequest,
    ) -> Result<Vec<Generation>, BackendError> {
        // Validate every row before spending time on any of them.
        for prompt in prompts {
            self.check_prompt(prompt, request.max_new_tokens)?;
        }
        self.check_ids(&request.watch_ids)?;
        let mut rows = Vec::with_capacity(prompts.len());
        for prompt in prompts {
            rows.push(self.generate_row(prompt, request)?);
        }
        Ok(rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_softmax_is_normalised_and_ordered() {
        let lp = log_softmax(&[1.0, 2.0, 3.0, -1e9]);
        let total: f32 = lp.iter().map(|x| x.exp()).sum();
        assert!((total - 1.0).abs() < 1e-6);
        assert!(lp[2] > lp[1] && lp[1] > lp[0]);
        assert_eq!(argmax(&lp), 2);
    }

    #[test]
    fn argmax_prefers_the_lowest_index_on_ties() {
        assert_eq!(argmax(&[0.5, 0.9, 0.9]), 1);
    }
}
