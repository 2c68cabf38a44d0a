//! The tiny BERT as a GGUF for llama.cpp's `llama-server --embedding`: the same weights and
//! vocabulary as [`crate::write_tiny_bert`]'s folder, laid out as llama.cpp's own converter
//! (`convert_hf_to_gguf.py`, `BertModel`) lays out a BERT: its tensor names, its "phantom space"
//! vocabulary (a word's first piece written `▁piece`, a continuation `##piece` written `piece`,
//! special tokens as they are) and mean pooling, Contriever's. Tests serve it to check the
//! embeddings-server client against the local embedder on one model.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};

use crate::{BERT_HEADS, BERT_INTERMEDIATE, BERT_LAYERS, BERT_MAX_POSITIONS, FixtureError};

/// The special tokens, llama.cpp's token type 3 (control); every other token is 1 (normal).
const SPECIAL: [&str; 5] = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"];

/// llama.cpp's pooling type for a mean over the tokens.
const POOLING_MEAN: u32 = 1;

/// The GGUF tensor name of a Hugging Face BERT tensor (contriever-msmarco's names); `None` for
/// the pooler, which an embedding model does not use.
fn gguf_name(hf: &str) -> Option<String> {
    let fixed = [
        ("embeddings.word_embeddings.weight", "token_embd.weight"),
        (
            "embeddings.position_embeddings.weight",
            "position_embd.weight",
        ),
        (
            "embeddings.token_type_embeddings.weight",
            "token_types.weight",
        ),
        ("embeddings.LayerNorm.weight", "token_embd_norm.weight"),
        ("embeddings.LayerNorm.bias", "token_embd_norm.bias"),
    ];
    if let Some((_, name)) = fixed.iter().find(|(from, _)| *from == hf) {
        return Some((*name).to_owned());
    }
    let rest = hf.strip_prefix("encoder.layer.")?;
    let (layer, part) = rest.split_once('.')?;
    let (module, kind) = part.rsplit_once('.')?;
    let gguf = match module {
        "attention.self.query" => "attn_q",
        "attention.self.key" => "attn_k",
        "attention.self.value" => "attn_v",
        "attention.output.dense" => "attn_output",
        "attention.output.LayerNorm" => "attn_output_norm",
        "intermediate.dense" => "ffn_up",
        "output.dense" => "ffn_down",
        "output.LayerNorm" => "layer_output_norm",
        _ => return None,
    };
    Some(format!("blk.{layer}.{gguf}.{kind}"))
}

/// A vocabulary entry as llama.cpp's WordPiece reads it.
fn phantom_space(token: &str) -> String {
    if SPECIAL.contains(&token) {
        token.to_owned()
    } else if let Some(piece) = token.strip_prefix("##") {
        piece.to_owned()
    } else {
        format!("\u{2581}{token}")
    }
}

/// Writes the tiny BERT (see [`crate::write_tiny_bert`]) to `path` as an f32 GGUF that
/// llama-server serves with `--embedding`.
pub fn write_tiny_bert_gguf(path: &Path) -> Result<(), FixtureError> {
    let vocab = crate::bert_vocab();
    let id = |token: &str| {
        let index = vocab.iter().position(|t| t == token).unwrap_or(0);
        Value::U32(u32::try_from(index).unwrap_or(0))
    };
    let u32_value = |v: usize| Value::U32(u32::try_from(v).unwrap_or(u32::MAX));
    let metadata: Vec<(&str, Value)> = vec![
        ("general.architecture", Value::String("bert".to_owned())),
        (
            "general.name",
            Value::String("contriever-msmarco (tiny random fixture)".to_owned()),
        ),
        ("general.file_type", Value::U32(0)),
        ("bert.context_length", u32_value(BERT_MAX_POSITIONS)),
        ("bert.embedding_length", u32_value(crate::BERT_HIDDEN)),
        ("bert.feed_forward_length", u32_value(BERT_INTERMEDIATE)),
        ("bert.block_count", u32_value(BERT_LAYERS)),
        ("bert.attention.head_count", u32_value(BERT_HEADS)),
        ("bert.attention.layer_norm_epsilon", Value::F32(1e-12)),
        ("bert.attention.causal", Value::Bool(false)),
        ("bert.pooling_type", Value::U32(POOLING_MEAN)),
        ("tokenizer.ggml.model", Value::String("bert".to_owned())),
        ("tokenizer.ggml.token_type_count", Value::U32(2)),
        (
            "tokenizer.ggml.tokens",
            Value::Array(
                vocab
                    .iter()
                    .map(|t| Value::String(phantom_space(t)))
                    .collect(),
            ),
        ),
        (
            "tokenizer.ggml.token_type",
            Value::Array(
                vocab
                    .iter()
                    .map(|t| Value::I32(if SPECIAL.contains(&t.as_str()) { 3 } else { 1 }))
                    .collect(),
            ),
        ),
        ("tokenizer.ggml.bos_token_id", id("[CLS]")),
        ("tokenizer.ggml.seperator_token_id", id("[SEP]")),
        ("tokenizer.ggml.unknown_token_id", id("[UNK]")),
        ("tokenizer.ggml.padding_token_id", id("[PAD]")),
        ("tokenizer.ggml.mask_token_id", id("[MASK]")),
        ("tokenizer.ggml.normalizer.lowercase", Value::Bool(true)),
    ];
    let err = |what: &str| FixtureError::candle(format!("writing {what} to {}", path.display()));
    let mut tensors: Vec<(String, QTensor)> = Vec::new();
    for (hf, (shape, data)) in crate::bert_tensors(vocab.len()) {
        let Some(name) = gguf_name(&hf) else {
            continue;
        };
        let tensor = Tensor::from_vec(data, shape, &Device::Cpu)
            .and_then(|t| QTensor::quantize(&t, GgmlDType::F32))
            .map_err(err(&name))?;
        tensors.push((name, tensor));
    }
    let file = File::create(path).map_err(FixtureError::io(path))?;
    let mut writer = BufWriter::new(file);
    let metadata_refs: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (*k, v)).collect();
    let tensor_refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    gguf_file::write(&mut writer, &metadata_refs, &tensor_refs).map_err(err("the GGUF"))?;
    writer.flush().map_err(FixtureError::io(path))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn every_weight_but_the_pooler_has_a_llama_cpp_name() {
        let names: Vec<Option<String>> = crate::bert_tensors(10)
            .keys()
            .map(|k| gguf_name(k))
            .collect();
        let named = names.iter().flatten().count();
        // 5 embedding tensors and 16 per layer; the pooler's 2 are left out.
        assert_eq!(named, 5 + 16 * BERT_LAYERS);
        assert_eq!(names.len(), named + 2);
        assert_eq!(
            gguf_name("encoder.layer.1.attention.output.LayerNorm.bias").as_deref(),
            Some("blk.1.attn_output_norm.bias")
        );
        assert_eq!(gguf_name("pooler.dense.weight"), None);
    }

    #[test]
    fn the_vocabulary_marks_word_starts_as_llama_cpp_does() {
        assert_eq!(phantom_space("[CLS]"), "[CLS]");
        assert_eq!(phantom_space("##ing"), "ing");
        assert_eq!(phantom_space("model"), "\u{2581}model");
    }

    #[test]
    fn the_gguf_reads_back_with_its_vocabulary_and_tensors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bert.gguf");
        write_tiny_bert_gguf(&path).unwrap();
        let mut file = File::open(&path).unwrap();
        let content = gguf_file::Content::read(&mut file).unwrap();
        assert_eq!(
            content.metadata["general.architecture"]
                .to_string()
                .unwrap(),
            "bert"
        );
        let tokens = content.metadata["tokenizer.ggml.tokens"].to_vec().unwrap();
        assert_eq!(tokens.len(), crate::bert_vocab().len());
        assert!(
            content
                .tensor_infos
                .contains_key("blk.1.layer_output_norm.weight")
        );
        assert!(!content.tensor_infos.keys().any(|k| k.starts_with("pooler")));
    }
}
