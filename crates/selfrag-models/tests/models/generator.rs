//! `LlamaGenerator` on the tiny GGUF: vocabulary, probabilities, greedy decoding, limits, and
//! files that are not a usable Llama.

use std::collections::HashSet;
use std::io::Write;

use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use selfrag_core::{BackendError, GenerateRequest, Generator, StopReason, Tokenizer};
use selfrag_fixtures::{SELFRAG_SPECIAL_TOKENS, TINY_LLAMA_CONTEXT};
use selfrag_models::{LlamaGenerator, ModelError};

use crate::llama::assert_generations_close;
use crate::tiny_gguf;

fn load() -> (tempfile::TempDir, LlamaGenerator) {
    let (dir, path) = tiny_gguf();
    let model = LlamaGenerator::load(&path, &Device::Cpu).unwrap();
    (dir, model)
}

fn prompt(model: &LlamaGenerator, text: &str) -> Vec<u32> {
    let mut ids = vec![model.tokenizer().bos_id()];
    ids.extend(model.tokenizer().tokenize(text).unwrap());
    ids
}

fn request(max_new_tokens: usize, stop_ids: Vec<u32>, watch_ids: Vec<u32>) -> GenerateRequest {
    GenerateRequest {
        max_new_tokens,
        stop_ids,
        markup_ids: Vec::new(),
        watch_ids,
    }
}

fn model_error(err: &BackendError) -> &ModelError {
    err.downcast_ref::<ModelError>().unwrap()
}

const INSTRUCTION: &str = "### Instruction:\nWho is the president of France?\n\n### Response:\n";

#[test]
fn token_id_finds_all_sixteen_reflection_tokens_at_the_end_of_the_vocabulary() {
    let (_dir, model) = load();
    let ids: Vec<u32> = SELFRAG_SPECIAL_TOKENS
        .iter()
        .map(|t| model.tokenizer().token_id(t).unwrap())
        .collect();
    let vocab = model.tokenizer().vocab_size() as u32;
    assert_eq!(ids, (vocab - 16..vocab).collect::<Vec<u32>>());
    assert_eq!(model.tokenizer().token_id("[Not a token]"), None);
    assert_eq!(model.tokenizer().bos_id(), 1);
    assert_eq!(model.tokenizer().eos_id(), 2);
    assert_eq!(model.context_length(), TINY_LLAMA_CONTEXT);
}

#[test]
fn next_token_probs_are_probabilities_of_the_whole_vocabulary() {
    let (_dir, mut model) = load();
    let p = prompt(&model, INSTRUCTION);
    let watch: Vec<u32> = SELFRAG_SPECIAL_TOKENS
        .iter()
        .map(|t| model.tokenizer().token_id(t).unwrap())
        .chain([model.tokenizer().eos_id()])
        .collect();
    let probs = model.next_token_probs(&p, &watch).unwrap();
    assert_eq!(probs.len(), watch.len());
    assert!(
        probs
            .iter()
            .all(|p| p.is_finite() && (0.0..=1.0).contains(p))
    );
    assert!(probs.iter().sum::<f32>() <= 1.0 + 1e-5);
    let all: Vec<u32> = (0..model.tokenizer().vocab_size() as u32).collect();
    let total: f32 = model.next_token_probs(&p, &all).unwrap().iter().sum();
    assert!((total - 1.0).abs() < 1e-4, "{total}");
    // The same prompt again (fresh KV cache) gives the same numbers.
    assert_eq!(model.next_token_probs(&p, &watch).unwrap(), probs);
}

#[test]
fn watched_probs_of_the_first_generated_token_match_next_token_probs() {
    let (_dir, mut model) = load();
    let p = prompt(&model, INSTRUCTION);
    let watch: Vec<u32> = ["[Retrieval]", "[No Retrieval]", "[Relevant]"]
        .iter()
        .map(|t| model.tokenizer().token_id(t).unwrap())
        .collect();
    let direct = model.next_token_probs(&p, &watch).unwrap();
    let rows = model
        .generate_batch(&[p], &request(3, vec![], watch.clone()))
        .unwrap();
    let first = &rows[0].tokens[0];
    for (a, b) in first.watched.iter().zip(&direct) {
        assert!((a - b).abs() < 1e-6, "{a} vs {b}");
    }
    // The fixture makes "\n" lean towards [Retrieval]: greedy picks it.
    assert_eq!(first.id, watch[0]);
    assert!((first.logprob.exp() - direct[0]).abs() < 1e-6);
}

#[test]
fn generation_stops_at_eos_and_keeps_it() {
    let (_dir, mut model) = load();
    let p = prompt(&model, "It was made.");
    let rows = model
        .generate_batch(&[p], &request(20, vec![], vec![]))
        .unwrap();
    let row = &rows[0];
    assert_eq!(row.stop, StopReason::EndOfSequence);
    assert_eq!(
        row.tokens.last().map(|t| t.id),
        Some(model.tokenizer().eos_id())
    );
    let ids: Vec<u32> = row.tokens.iter().map(|t| t.id).collect();
    assert_eq!(
        Tokenizer::decode(model.tokenizer(), &ids).unwrap(),
        "[Fully supported][Utility:5]</s>"
    );
}

#[test]
fn generation_stops_at_the_length_limit() {
    let (_dir, mut model) = load();
    let p = prompt(&model, "The city of Paris");
    let rows = model
        .generate_batch(&[p], &request(7, vec![], vec![]))
        .unwrap();
    assert_eq!(rows[0].stop, StopReason::Length);
    assert_eq!(rows[0].tokens.len(), 7);
    let distinct: HashSet<u32> = rows[0].tokens.iter().map(|t| t.id).collect();
    assert!(
        distinct.len() > 3,
        "the random model should vary its tokens"
    );
    assert!(
        rows[0]
            .tokens
            .iter()
            .all(|t| t.logprob.is_finite() && t.logprob <= 0.0 && t.watched.is_empty())
    );
}

#[test]
fn generation_stops_right_after_a_stop_token_and_includes_it() {
    let (_dir, mut model) = load();
    let p = prompt(&model, "The city of Paris");
    let free = model
        .generate_batch(std::slice::from_ref(&p), &request(7, vec![], vec![]))
        .unwrap();
    let third = free[0].tokens[2].id;
    let stopped = model
        .generate_batch(&[p], &request(7, vec![third], vec![]))
        .unwrap();
    let row = &stopped[0];
    assert_eq!(row.stop, StopReason::StopToken);
    let first_occurrence = free[0].tokens.iter().position(|t| t.id == third).unwrap();
    assert_eq!(row.tokens.len(), first_occurrence + 1);
    assert_eq!(row.tokens.last().map(|t| t.id), Some(third));
    assert_eq!(row.tokens[..], free[0].tokens[..first_occurrence + 1]);
}

#[test]
fn a_batch_driven_step_by_step_is_superseded_by_the_next_one_and_a_probe_reads_the_full_context() {
    let (_dir, mut model) = load();
    let a = prompt(&model, INSTRUCTION);
    let req = request(6, vec![], vec![]);
    let whole = model.generate_batch(&[a.clone(), a.clone()], &req).unwrap();

    // One forward pass per step: the shared prefix, the rests, then a token per row per step.
    let mut batch = model
        .begin_batch(vec![a.clone(), a.clone()], req.clone(), true)
        .unwrap();
    let mut steps = 0;
    let stepped = loop {
        steps += 1;
        if let Some(done) = model.step(&mut batch).unwrap() {
            break done;
        }
    };
    assert_eq!(stepped.rows, whole);
    assert!(steps > whole[0].tokens.len(), "{steps} steps");

    // Beginning a batch takes the cache from the one in progress, which then refuses to go on.
    let mut first = model
        .begin_batch(vec![a.clone()], req.clone(), true)
        .unwrap();
    model.step(&mut first).unwrap();
    let mut second = model
        .begin_batch(vec![a.clone()], req.clone(), true)
        .unwrap();
    assert!(matches!(
        model.step(&mut first),
        Err(ModelError::BatchSuperseded)
    ));
    let second = loop {
        if let Some(done) = model.step(&mut second).unwrap() {
            break done;
        }
    };
    assert_eq!(second.rows[0], whole[0]);

    // A probe may fill the context (a batch of one new token may not), and reads the same
    // numbers as the prompt's log-probabilities.
    let mut full = a.clone();
    full.resize(TINY_LLAMA_CONTEXT, a[1]);
    let top = model.top_logprobs(&full, 3).unwrap();
    let watch: Vec<u32> = top.iter().map(|&(id, _)| id).collect();
    let probs = model.next_token_probs(&full, &watch).unwrap();
    for ((_, logprob), p) in top.iter().zip(&probs) {
        assert!((logprob.exp() - p).abs() < 1e-6, "{logprob} vs {p}");
    }
    assert!(
        model
            .generate_batch(&[full], &request(1, vec![], vec![]))
            .is_err()
    );
}

#[test]
fn a_batch_returns_one_row_per_prompt_in_order_with_watched_probs() {
    let (_dir, mut model) = load();
    let a = prompt(&model, INSTRUCTION);
    let b = prompt(&model, "It was made.");
    let watch: Vec<u32> = SELFRAG_SPECIAL_TOKENS
        .iter()
        .map(|t| model.tokenizer().token_id(t).unwrap())
        .collect();
    let req = request(12, vec![], watch.clone());
    let batch = model
        .generate_batch(&[a.clone(), b.clone(), a.clone()], &req)
        .unwrap();
    assert_eq!(batch.len(), 3);
    // Rows run batched, not one by one: the same numbers up to float rounding.
    assert_generations_close(&batch[0], &batch[2], 1e-5, 1e-5);
    assert_generations_close(
        &batch[0],
        &model.generate_batch(&[a], &req).unwrap()[0],
        1e-4,
        1e-5,
    );
    assert_generations_close(
        &batch[1],
        &model.generate_batch(&[b], &req).unwrap()[0],
        1e-4,
        1e-5,
    );
    for row in &batch {
        assert!(!row.tokens.is_empty() && row.tokens.len() <= 12);
        for token in &row.tokens {
            assert_eq!(token.watched.len(), watch.len());
            assert!(token.watched.iter().all(|p| p.is_finite() && *p >= 0.0));
            assert!(token.watched.iter().sum::<f32>() <= 1.0 + 1e-5);
        }
    }
    assert!(model.generate_batch(&[], &req).unwrap().is_empty());
    let none = model
        .generate_batch(&[prompt(&model, "x")], &request(0, vec![], vec![]))
        .unwrap();
    assert_eq!(none[0].stop, StopReason::Length);
    assert!(none[0].tokens.is_empty());
}

#[test]
fn a_prompt_longer_than_the_context_is_an_error_not_a_panic() {
    let (_dir, mut model) = load();
    let the = model.tokenizer().token_id("\u{2581}the").unwrap();
    let mut long = vec![model.tokenizer().bos_id()];
    long.extend(std::iter::repeat_n(the, TINY_LLAMA_CONTEXT - 10));
    let err = model
        .generate_batch(std::slice::from_ref(&long), &request(20, vec![], vec![]))
        .unwrap_err();
    assert!(matches!(
        model_error(&err),
        ModelError::ContextOverflow {
            context_length: TINY_LLAMA_CONTEXT,
            ..
        }
    ));
    assert!(err.to_string().contains("context length"), "{err}");

    let mut too_long = long.clone();
    too_long.extend(std::iter::repeat_n(the, 20));
    assert!(model.next_token_probs(&too_long, &[the]).is_err());

    // Exactly at the limit (503 + 9 = 512) is fine.
    let rows = model
        .generate_batch(std::slice::from_ref(&long), &request(9, vec![], vec![]))
        .unwrap();
    assert!(rows[0].tokens.len() <= 9);
}

#[test]
fn bad_ids_and_empty_prompts_are_errors() {
    let (_dir, mut model) = load();
    let vocab = model.tokenizer().vocab_size() as u32;
    assert!(matches!(
        model_error(&model.next_token_probs(&[], &[1]).unwrap_err()),
        ModelError::EmptyPrompt
    ));
    assert!(matches!(
        model_error(&model.next_token_probs(&[1, vocab], &[1]).unwrap_err()),
        ModelError::TokenOutOfRange { .. }
    ));
    assert!(model.next_token_probs(&[1], &[vocab + 5]).is_err());
    assert!(
        model
            .generate_batch(&[vec![1]], &request(2, vec![], vec![vocab]))
            .is_err()
    );
    assert!(Tokenizer::decode(model.tokenizer(), &[vocab]).is_err());
}

fn write_gguf(path: &std::path::Path, metadata: &[(&str, Value)]) {
    let tensor = QTensor::quantize(
        &Tensor::zeros((4, 32), candle_core::DType::F32, &Device::Cpu).unwrap(),
        GgmlDType::F32,
    )
    .unwrap();
    let mut file = std::fs::File::create(path).unwrap();
    let metadata: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (*k, v)).collect();
    gguf_file::write(&mut file, &metadata, &[("token_embd.weight", &tensor)]).unwrap();
}

#[test]
fn another_architecture_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gpt2.gguf");
    write_gguf(
        &path,
        &[("general.architecture", Value::String("gpt2".to_owned()))],
    );
    let err = LlamaGenerator::load(&path, &Device::Cpu).unwrap_err();
    assert!(matches!(err, ModelError::UnsupportedArchitecture { .. }));
    let message = err.to_string();
    assert!(
        message.contains("gpt2") && message.contains("gpt2.gguf"),
        "{message}"
    );
}

#[test]
fn missing_llama_metadata_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("partial.gguf");
    write_gguf(
        &path,
        &[("general.architecture", Value::String("llama".to_owned()))],
    );
    let err = LlamaGenerator::load(&path, &Device::Cpu).unwrap_err();
    assert!(matches!(err, ModelError::MissingMetadata { .. }), "{err}");
}

#[test]
fn truncated_or_garbage_files_are_errors_not_panics() {
    let (dir, path) = tiny_gguf();
    let bytes = std::fs::read(&path).unwrap();
    for keep in [0, 3, 24, bytes.len() / 3, bytes.len() - 100] {
        let cut = dir.path().join(format!("cut-{keep}.gguf"));
        std::fs::write(&cut, &bytes[..keep]).unwrap();
        let err = LlamaGenerator::load(&cut, &Device::Cpu).unwrap_err();
        assert!(
            err.to_string().contains(&format!("cut-{keep}.gguf")),
            "{err}"
        );
    }
    let garbage = dir.path().join("garbage.gguf");
    let mut file = std::fs::File::create(&garbage).unwrap();
    file.write_all(&[0xAB; 4096]).unwrap();
    assert!(LlamaGenerator::load(&garbage, &Device::Cpu).is_err());
    let missing = dir.path().join("nope.gguf");
    assert!(matches!(
        LlamaGenerator::load(&missing, &Device::Cpu),
        Err(ModelError::Io { .. })
    ));
}
