//! The Llama families besides Llama-2 (Mistral's sliding window, Llama-3.1's RoPE frequency
//! factors, linear RoPE scaling, more weight types) against a reference written here from the
//! definitions alone: every weight dequantized to f32, a naive attention with the causal band
//! mask, no cache, no batching. llama.cpp's `llama` architecture ignores a sliding window
//! (`crates/selfrag-remote/tests/family_parity.rs` compares the rest with the real
//! llama-server), so the window is checked here only. Then the refusals that remain.

use std::path::Path;

use candle_core::quantized::gguf_file::{self, Value};
use candle_core::{Device, Tensor};
use selfrag_core::{GenerateRequest, Generator, Tokenizer};
use selfrag_models::{CachePrecision, LlamaGenerator, ModelError};

use crate::fixtures;

/// What the reference reads from the metadata: the keys llama.cpp reads for `llama`.
struct Hyper {
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    blocks: usize,
    eps: f32,
    theta: Vec<f32>,
}

fn metadata_u32(content: &gguf_file::Content, key: &str) -> Option<usize> {
    content
        .metadata
        .get(key)
        .map(|v| v.to_u32().unwrap() as usize)
}

fn metadata_f32(content: &gguf_file::Content, key: &str) -> Option<f32> {
    content.metadata.get(key).map(|v| v.to_f32().unwrap())
}

/// Weights as f32 matrices `[rows, cols]` (a GGUF's `[n, k]`).
struct Weights {
    content: gguf_file::Content,
    file: std::fs::File,
}

impl Weights {
    fn open(path: &Path) -> Self {
        let mut file = std::fs::File::open(path).unwrap();
        let content = gguf_file::Content::read(&mut file).unwrap();
        Self { content, file }
    }

    fn tensor(&mut self, name: &str) -> Tensor {
        self.content
            .tensor(&mut self.file, name, &Device::Cpu)
            .unwrap()
            .dequantize(&Device::Cpu)
            .unwrap()
    }

    fn hyper(&mut self) -> Hyper {
        let c = &self.content;
        let heads = metadata_u32(c, "llama.attention.head_count").unwrap();
        let kv_heads = metadata_u32(c, "llama.attention.head_count_kv").unwrap();
        let embd = metadata_u32(c, "llama.embedding_length").unwrap();
        let blocks = metadata_u32(c, "llama.block_count").unwrap();
        let eps = metadata_f32(c, "llama.attention.layer_norm_rms_epsilon").unwrap();
        let base = metadata_f32(c, "llama.rope.freq_base").unwrap_or(10_000.0);
        let scale = match c.metadata.get("llama.rope.scaling.type") {
            Some(Value::String(t)) if t == "linear" => {
                1.0 / metadata_f32(c, "llama.rope.scaling.factor").unwrap()
            }
            None => 1.0,
            Some(other) => panic!("the reference computes no {other:?} scaling"),
        };
        let head_dim = embd / heads;
        let factors = c
            .tensor_infos
            .contains_key("rope_freqs.weight")
            .then(|| self.tensor("rope_freqs.weight").to_vec1::<f32>().unwrap());
        // llama.cpp's ggml_rope_ext: θᵢ = scale · base^(−2i/d) / factorᵢ, pairs (2i, 2i+1).
        let theta = (0..head_dim / 2)
            .map(|i| {
                let f = factors.as_ref().map_or(1.0, |f| f[i]);
                scale * base.powf(-2.0 * i as f32 / head_dim as f32) / f
            })
            .collect();
        Hyper {
            heads,
            kv_heads,
            head_dim,
            blocks,
            eps,
            theta,
        }
    }
}

fn rms_norm(x: &Tensor, weight: &Tensor, eps: f32) -> Tensor {
    let mean = x.sqr().unwrap().mean_keepdim(1).unwrap();
    let scale = (mean + f64::from(eps))
        .unwrap()
        .sqrt()
        .unwrap()
        .recip()
        .unwrap();
    x.broadcast_mul(&scale)
        .unwrap()
        .broadcast_mul(weight)
        .unwrap()
}

/// `x · Wᵀ`.
fn linear(x: &Tensor, w: &Tensor) -> Tensor {
    x.matmul(&w.t().unwrap()).unwrap()
}

/// Rotates each head's pairs `(2i, 2i+1)` of `x` (`[tokens, heads · head_dim]`) by
/// `position · θᵢ`.
fn rope(x: &Tensor, heads: usize, hyper: &Hyper) -> Vec<Vec<f32>> {
    let mut rows: Vec<Vec<f32>> = x.to_vec2().unwrap();
    for (position, row) in rows.iter_mut().enumerate() {
        for head in 0..heads {
            for (i, theta) in hyper.theta.iter().enumerate() {
                let at = head * hyper.head_dim + 2 * i;
                let angle = position as f32 * theta;
                let (sin, cos) = angle.sin_cos();
                let (a, b) = (row[at], row[at + 1]);
                row[at] = a * cos - b * sin;
                row[at + 1] = a * sin + b * cos;
            }
        }
    }
    rows
}

/// The reference's probabilities (softmax over the vocabulary) after every token of `tokens`,
/// attending to at most `window` keys (itself included) when given.
fn reference_probabilities(path: &Path, tokens: &[u32], window: Option<usize>) -> Vec<Vec<f32>> {
    let mut weights = Weights::open(path);
    let hyper = weights.hyper();
    let ids = Tensor::new(tokens, &Device::Cpu).unwrap();
    let mut x = weights
        .tensor("token_embd.weight")
        .index_select(&ids, 0)
        .unwrap();
    let n = tokens.len();
    let group = hyper.heads / hyper.kv_heads;
    let d = hyper.head_dim;
    for block in 0..hyper.blocks {
        let mut w = |part: &str| weights.tensor(&format!("blk.{block}.{part}.weight"));
        let h = rms_norm(&x, &w("attn_norm"), hyper.eps);
        let q = rope(&linear(&h, &w("attn_q")), hyper.heads, &hyper);
        let k = rope(&linear(&h, &w("attn_k")), hyper.kv_heads, &hyper);
        let v: Vec<Vec<f32>> = linear(&h, &w("attn_v")).to_vec2().unwrap();
        let mut out = vec![0f32; n * hyper.heads * d];
        for t in 0..n {
            let first = window.map_or(0, |w| (t + 1).saturating_sub(w));
            for head in 0..hyper.heads {
                let kv = head / group;
                let query = &q[t][head * d..][..d];
                let scores: Vec<f32> = (first..=t)
                    .map(|s| {
                        let key = &k[s][kv * d..][..d];
                        query.iter().zip(key).map(|(a, b)| a * b).sum::<f32>() / (d as f32).sqrt()
                    })
                    .collect();
                let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let exps: Vec<f32> = scores.iter().map(|s| (s - max).exp()).collect();
                let total: f32 = exps.iter().sum();
                let line = &mut out[(t * hyper.heads + head) * d..][..d];
                for (s, e) in (first..=t).zip(&exps) {
                    for (o, value) in line.iter_mut().zip(&v[s][kv * d..][..d]) {
                        *o += e / total * value;
                    }
                }
            }
        }
        let attended = Tensor::from_vec(out, (n, hyper.heads * d), &Device::Cpu).unwrap();
        x = (x + linear(&attended, &w("attn_output"))).unwrap();
        let h = rms_norm(&x, &w("ffn_norm"), hyper.eps);
        let gate = candle_nn::ops::silu(&linear(&h, &w("ffn_gate"))).unwrap();
        let fed = linear(&(gate * linear(&h, &w("ffn_up"))).unwrap(), &w("ffn_down"));
        x = (x + fed).unwrap();
    }
    let x = rms_norm(&x, &weights.tensor("output_norm.weight"), hyper.eps);
    let logits = linear(&x, &weights.tensor("output.weight"));
    candle_nn::ops::softmax_last_dim(&logits)
        .unwrap()
        .to_vec2()
        .unwrap()
}

/// How far the generator's probabilities may be from the f32 reference on the 64-d fixtures
/// (measured: at most 5.7e-3, the windowed one).
const REFERENCE_TOLERANCE: f32 = 8e-3;
/// The same on the 256-d fixtures of the K-quant types (measured: at most 3.6e-2, Q6_K): wider rows
/// give larger logits, so the 8-bit inputs of the products move them further.
const WIDE_REFERENCE_TOLERANCE: f32 = 5e-2;

/// A Self-RAG prompt of more than 100 tokens: an instruction and three passages.
fn long_prompt(model: &LlamaGenerator) -> Vec<u32> {
    let tok = model.tokenizer();
    let mut ids = vec![tok.bos_id()];
    ids.extend(tok.encode(
        "### Instruction:\nWhat is the capital of France, and which river flows through it?\n\n### Response:\n",
        false,
    ));
    for evidence in [
        "Paris is the capital and largest city of France, known for its history and science.",
        "The Seine flows through Paris, and many people live along the river in the city.",
        "France is a country in Western Europe; its capital has been Paris for many years.",
    ] {
        ids.push(tok.token_id("[Retrieval]").unwrap());
        ids.push(tok.token_id("<paragraph>").unwrap());
        ids.extend(tok.encode(evidence, false));
        ids.push(tok.token_id("</paragraph>").unwrap());
    }
    ids
}

/// The local generator (f32 cache) on `path` continues a long prompt as the reference does:
/// the same greedy tokens, and at every position the chosen token's probability and the
/// watched ones within `tolerance` (the greedy texts may part where the two choices are a tie
/// within it). The products quantize their inputs to 8 bits as llama.cpp does and the
/// reference does not, hence a tolerance of the order of 1e-3. Returns the largest difference it saw, and how far the
/// reference moves when computed with `other_window` instead (to show the check can tell).
fn matches_the_reference(
    path: &Path,
    window: Option<usize>,
    other_window: Option<usize>,
    tolerance: f32,
) -> f32 {
    let mut model = LlamaGenerator::load(path, &Device::Cpu).unwrap();
    model.set_cache_precision(CachePrecision::F32);
    let prompt = long_prompt(&model);
    assert!(prompt.len() > 100, "{} tokens", prompt.len());
    let watch: Vec<u32> = ["[Retrieval]", "[No Retrieval]", "[Relevant]", "\u{2581}The"]
        .iter()
        .map(|t| model.tokenizer().token_id(t).unwrap())
        .collect();
    let request = GenerateRequest {
        max_new_tokens: 24,
        stop_ids: Vec::new(),
        markup_ids: Vec::new(),
        watch_ids: watch.clone(),
    };
    let generated = model
        .generate_batch(std::slice::from_ref(&prompt), &request)
        .unwrap()
        .remove(0);
    let mut all = prompt.clone();
    all.extend(generated.tokens.iter().map(|t| t.id));
    let reference = reference_probabilities(path, &all, window);
    let elsewhere = reference_probabilities(path, &all, other_window);
    let (mut worst, mut moved) = (0f32, 0f32);
    for (i, token) in generated.tokens.iter().enumerate() {
        let probs = &reference[prompt.len() - 1 + i];
        let argmax = (0..probs.len())
            .max_by(|&a, &b| probs[a].total_cmp(&probs[b]))
            .unwrap();
        worst = worst.max((token.logprob.exp() - probs[token.id as usize]).abs());
        if token.id as usize != argmax {
            // Parted at a tie: the rest continues other text.
            assert!(
                (probs[argmax] - probs[token.id as usize]).abs() <= tolerance,
                "greedy token {i} differs from the reference's beyond a tie"
            );
            break;
        }
        let other = &elsewhere[prompt.len() - 1 + i];
        for (w, id) in watch.iter().enumerate() {
            if let Some(p) = token.watched.get(w) {
                worst = worst.max((p - probs[*id as usize]).abs());
            }
            moved = moved.max((other[*id as usize] - probs[*id as usize]).abs());
        }
        moved = moved.max((other[argmax] - probs[argmax]).abs());
    }
    eprintln!("{}: at most {worst} from the reference", path.display());
    assert!(
        worst <= tolerance,
        "{}: the generator is {worst} from the reference",
        path.display()
    );
    moved
}

#[test]
fn a_sliding_window_hides_keys_older_than_it_in_prefill_and_decode() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("windowed.gguf");
    fixtures::write_tiny_windowed_llama_gguf(&path).unwrap();
    let window = fixtures::TINY_SLIDING_WINDOW;
    let moved = matches_the_reference(&path, Some(window), None, REFERENCE_TOLERANCE);
    // Without the window the reference is elsewhere: the check above can tell the two apart.
    assert!(
        moved > 2e-2,
        "the window moves probabilities by only {moved}"
    );
}

/// The definitions' side of the RoPE families, next to llama-server's in
/// `crates/selfrag-remote/tests/family_parity.rs`, which is the check that tells a missing
/// factor or scale apart (within 1e-5 there; this reference's 8-bit tolerance is too wide).
#[test]
fn llama31_frequency_factors_and_linear_scaling_rotate_as_the_definition_says() {
    let dir = tempfile::tempdir().unwrap();
    for (name, write) in [
        (
            "llama31.gguf",
            fixtures::write_tiny_llama31_gguf as fn(&Path) -> _,
        ),
        ("linear.gguf", fixtures::write_tiny_linear_rope_llama_gguf),
        ("mistral.gguf", fixtures::write_tiny_mistral_gguf),
    ] {
        let path = dir.path().join(name);
        write(&path).unwrap();
        matches_the_reference(&path, None, None, REFERENCE_TOLERANCE);
    }
}

#[test]
fn every_weight_type_runs_as_its_dequantized_weights_do() {
    let dir = tempfile::tempdir().unwrap();
    for weights in fixtures::WeightType::ALL {
        let path = dir.path().join(format!("tiny-{}.gguf", weights.name()));
        fixtures::write_tiny_quant_llama_gguf(&path, weights).unwrap();
        let content = gguf_file::Content::read(&mut std::fs::File::open(&path).unwrap()).unwrap();
        let types: std::collections::BTreeSet<String> = content
            .tensor_infos
            .iter()
            .filter(|(name, _)| !name.ends_with("norm.weight"))
            .map(|(_, info)| format!("{:?}", info.ggml_dtype))
            .collect();
        assert_eq!(types.len(), 1, "{types:?}");
        let wide = matches!(
            weights,
            fixtures::WeightType::Q5K | fixtures::WeightType::Q6K
        );
        let tolerance = if wide {
            WIDE_REFERENCE_TOLERANCE
        } else {
            REFERENCE_TOLERANCE
        };
        matches_the_reference(&path, None, None, tolerance);
    }
}

/// A copy of the tiny model with `extra` metadata keys added (or replaced).
fn tiny_with(dir: &Path, name: &str, extra: &[(&str, Value)]) -> std::path::PathBuf {
    let source = dir.join("source.gguf");
    fixtures::write_tiny_llama_gguf(&source).unwrap();
    let mut file = std::fs::File::open(&source).unwrap();
    let content = gguf_file::Content::read(&mut file).unwrap();
    let mut metadata: Vec<(&str, &Value)> = content
        .metadata
        .iter()
        .filter(|(k, _)| !extra.iter().any(|(e, _)| e == k))
        .map(|(k, v)| (k.as_str(), v))
        .collect();
    metadata.extend(extra.iter().map(|(k, v)| (*k, v)));
    let names: Vec<String> = content.tensor_infos.keys().cloned().collect();
    let tensors: Vec<_> = names
        .iter()
        .map(|n| {
            (
                n.as_str(),
                content.tensor(&mut file, n, &Device::Cpu).unwrap(),
            )
        })
        .collect();
    let tensor_refs: Vec<(&str, &candle_core::quantized::QTensor)> =
        tensors.iter().map(|(n, t)| (*n, t)).collect();
    let path = dir.join(name);
    let mut out = std::fs::File::create(&path).unwrap();
    gguf_file::write(&mut out, &metadata, &tensor_refs).unwrap();
    path
}

#[test]
fn rope_scaling_other_than_linear_and_partial_rotary_and_odd_heads_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let string = |s: &str| Value::String(s.to_owned());
    // (file name, metadata keys set, what the refusal names)
    type Case<'a> = (&'a str, Vec<(&'a str, Value)>, &'a str);
    let cases: Vec<Case> = vec![
        (
            "yarn",
            vec![
                ("llama.rope.scaling.type", string("yarn")),
                ("llama.rope.scaling.factor", Value::F32(4.0)),
            ],
            "RoPE scaling (`llama.rope.scaling.type` = `yarn`)",
        ),
        (
            "longrope",
            vec![("llama.rope.scaling.type", string("longrope"))],
            "`llama.rope.scaling.type` = `longrope`",
        ),
        (
            "attn-factor",
            vec![("llama.rope.scaling.attn_factor", Value::F32(1.5))],
            "RoPE attention factor",
        ),
        (
            "partial",
            vec![("llama.rope.dimension_count", Value::U32(8))],
            "partial rotary embeddings (8 of 16 dimensions)",
        ),
        (
            "key-length",
            vec![("llama.attention.key_length", Value::U32(32))],
            "attention heads of 32 dimensions (`llama.attention.key_length`)",
        ),
    ];
    for (name, extra, feature) in cases {
        let path = tiny_with(dir.path(), &format!("{name}.gguf"), &extra);
        let err = LlamaGenerator::load(&path, &Device::Cpu).unwrap_err();
        assert!(
            matches!(&err, ModelError::UnsupportedModelFeature { feature: f, .. } if f.contains(feature)),
            "{name}: {err:?}"
        );
        let message = err.to_string();
        assert!(
            message.contains(&format!("{name}.gguf")) && message.contains("not damaged"),
            "{message}"
        );
    }
    // Linear scaling of factor 1 (or 0, llama.cpp's "none"), `none`, and the old
    // `llama.rope.scale_linear` key run; a negative factor is a broken file.
    for (name, extra) in [
        (
            "linear-1",
            vec![
                ("llama.rope.scaling.type", string("linear")),
                ("llama.rope.scaling.factor", Value::F32(1.0)),
            ],
        ),
        (
            "factor-0",
            vec![("llama.rope.scaling.factor", Value::F32(0.0))],
        ),
        ("none", vec![("llama.rope.scaling.type", string("none"))]),
        (
            "old-key",
            vec![("llama.rope.scale_linear", Value::F32(2.0))],
        ),
    ] {
        let path = tiny_with(dir.path(), &format!("{name}.gguf"), &extra);
        LlamaGenerator::load(&path, &Device::Cpu).unwrap();
    }
    let path = tiny_with(
        dir.path(),
        "negative.gguf",
        &[("llama.rope.scaling.factor", Value::F32(-2.0))],
    );
    let err = LlamaGenerator::load(&path, &Device::Cpu).unwrap_err();
    assert!(matches!(err, ModelError::InvalidGguf { .. }), "{err:?}");
}

/// The old `llama.rope.scale_linear` key scales as `llama.rope.scaling.factor` does (llama.cpp
/// reads it where the new one is absent): the two files give the same probabilities, and
/// not those of the unscaled model.
#[test]
fn the_old_linear_scale_key_scales_as_the_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let old = tiny_with(
        dir.path(),
        "old.gguf",
        &[("llama.rope.scale_linear", Value::F32(4.0))],
    );
    let new = dir.path().join("new.gguf");
    fixtures::write_tiny_linear_rope_llama_gguf(&new).unwrap();
    let plain = dir.path().join("plain.gguf");
    fixtures::write_tiny_llama_gguf(&plain).unwrap();
    let probs = |path: &Path| {
        let mut model = LlamaGenerator::load(path, &Device::Cpu).unwrap();
        model.set_cache_precision(CachePrecision::F32);
        let prompt = long_prompt(&model);
        let ids: Vec<u32> = (0..40).collect();
        model.next_token_probs(&prompt, &ids).unwrap()
    };
    let (old, new, plain) = (probs(&old), probs(&new), probs(&plain));
    assert_eq!(old, new);
    assert_ne!(old, plain);
}

/// A file with a tensor of a type candle reads but nothing here multiplies (Q8_K, an
/// activation type) is refused naming the tensor and the type.
#[test]
fn a_weight_type_nothing_here_runs_is_refused_naming_the_tensor_and_type() {
    use candle_core::quantized::{GgmlDType, QTensor};
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source.gguf");
    fixtures::write_tiny_quant_llama_gguf(&source, fixtures::WeightType::Q6K).unwrap();
    let mut file = std::fs::File::open(&source).unwrap();
    let content = gguf_file::Content::read(&mut file).unwrap();
    let metadata: Vec<(&str, &Value)> = content
        .metadata
        .iter()
        .map(|(k, v)| (k.as_str(), v))
        .collect();
    let names: Vec<String> = content.tensor_infos.keys().cloned().collect();
    let tensors: Vec<(&str, QTensor)> = names
        .iter()
        .map(|n| {
            let t = content.tensor(&mut file, n, &Device::Cpu).unwrap();
            if n == "blk.1.ffn_up.weight" {
                let f = t.dequantize(&Device::Cpu).unwrap();
                (n.as_str(), QTensor::quantize(&f, GgmlDType::Q8K).unwrap())
            } else {
                (n.as_str(), t)
            }
        })
        .collect();
    let refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(n, t)| (*n, t)).collect();
    let path = dir.path().join("q8k.gguf");
    gguf_file::write(&mut std::fs::File::create(&path).unwrap(), &metadata, &refs).unwrap();
    let err = LlamaGenerator::load(&path, &Device::Cpu).unwrap_err();
    let message = err.to_string();
    assert!(
        matches!(err, ModelError::UnsupportedModelFeature { .. })
            && message.contains("Q8K")
            && message.contains("`blk.1.ffn_up.weight`")
            && message.contains("q8k.gguf"),
        "{message}"
    );
}

/// A file with weights of a type candle cannot even read (IQ4_XS, common among published
/// GGUFs) is refused naming the tensor and the type, not as a damaged file.
#[test]
fn a_weight_type_candle_cannot_read_is_refused_naming_the_tensor_and_type() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("iq4_xs.gguf");
    fixtures::write_tiny_llama_gguf(&path).unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    // The tensor's header entry: name, 2 dimensions, the dimensions, its type, its offset.
    let name = b"blk.1.ffn_down.weight";
    let at = bytes.windows(name.len()).position(|w| w == name).unwrap();
    let type_at = at + name.len() + 4 + 2 * 8;
    assert_eq!(bytes[type_at..type_at + 4], 8u32.to_le_bytes(), "Q8_0");
    bytes[type_at..type_at + 4].copy_from_slice(&23u32.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let err = LlamaGenerator::load(&path, &Device::Cpu).unwrap_err();
    let message = err.to_string();
    assert!(
        matches!(err, ModelError::UnsupportedModelFeature { .. })
            && message.contains("IQ4_XS (ggml type 23)")
            && message.contains("`blk.1.ffn_down.weight`")
            && message.contains("not damaged"),
        "{message}"
    );
}
