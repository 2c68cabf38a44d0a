//! `QuantizedLlama` and batched decoding on the tiny GGUF: candle's batch-1
//! `quantized_llama::ModelWeights` is the reference for the numbers, and a batch must decode
//! every row exactly as that row decodes alone.

use std::fs::File;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use candle_core::quantized::gguf_file;
use candle_core::{Device, Tensor};
use candle_transformers::models::quantized_llama::ModelWeights;
use selfrag_core::{GenerateRequest, Generation, Generator, StopReason, Tokenizer};
use selfrag_fixtures::SELFRAG_SPECIAL_TOKENS;
use selfrag_models::{
    CachePrecision, CpuKernels, KernelPolicy, LlamaGenerator, MappedGguf, QuantizedLlama,
};

use crate::tiny_gguf;

/// Each cache precision and how far its log-probabilities may be from candle's, whose cache is
/// f32: f32 differs only by the order of sums; f16 rounds every stored key and value
/// (relative 2⁻¹¹) before the products. On these random models that moved the greedy tokens'
/// log-probabilities by up to 0.024 and the whole first distribution by up to 0.195, in its
/// tail (log-probabilities down to -35). The f16 cache's reading is otherwise exact: an f32
/// cache holding the same rounded values gave bit-identical distributions (checked by hand;
/// `cpu_attention` and `cache_rows` test the f16 paths against candle and f32 exactly). The
/// greedy ids must agree in both.
///
/// The 8-bit cache rounds each value to a 254th of its block's largest: on the Q4_K_M model
/// (heads of 64 values, two blocks) greedy log-probabilities moved by up to 0.057 and the first
/// distribution by up to 0.21, in its tail. The other tiny model's heads (16 values) are not a
/// whole block, so it runs that precision as f16 ([`assert_precision_in_force`]).
const PRECISIONS: [(CachePrecision, f32); 3] = [
    (CachePrecision::F32, 1e-4),
    (CachePrecision::F16, 0.25),
    (CachePrecision::Q8, 0.25),
];

/// The precision a model of heads of `head_dim` values holds its cache in when asked for
/// `asked`: 8 bits only for whole blocks of 32, else f16.
fn assert_precision_in_force(asked: CachePrecision, in_force: CachePrecision, head_dim: usize) {
    let expected = match asked {
        CachePrecision::Q8 if !head_dim.is_multiple_of(32) => CachePrecision::F16,
        other => other,
    };
    assert_eq!(
        in_force, expected,
        "asked for {asked:?}, heads of {head_dim}"
    );
}

fn log_softmax(logits: &[f32]) -> Vec<f32> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f64 = logits.iter().map(|&x| f64::from(x - max).exp()).sum();
    let log_sum = sum.ln() as f32;
    logits.iter().map(|&x| x - max - log_sum).collect()
}

fn argmax(values: &[f32]) -> usize {
    let mut best = 0;
    for (i, &v) in values.iter().enumerate() {
        if v > values[best] {
            best = i;
        }
    }
    best
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// candle's reference, batch 1: a fresh `ModelWeights` fed `pieces` one after the other;
/// the log-softmax after each piece.
fn candle_logprobs(path: &std::path::Path, pieces: &[&[u32]]) -> Vec<Vec<f32>> {
    let mut file = File::open(path).unwrap();
    let content = gguf_file::Content::read(&mut file).unwrap();
    let mut model = ModelWeights::from_gguf(content, &mut file, &Device::Cpu).unwrap();
    let mut position = 0;
    pieces
        .iter()
        .map(|piece| {
            let input = Tensor::new(*piece, &Device::Cpu)
                .unwrap()
                .unsqueeze(0)
                .unwrap();
            let logits = model.forward(&input, position).unwrap();
            position += piece.len();
            log_softmax(&logits.squeeze(0).unwrap().to_vec1::<f32>().unwrap())
        })
        .collect()
}

/// candle's greedy continuation of `prompt`: the ids, their log-probs, and the whole first
/// distribution.
fn candle_greedy(
    path: &std::path::Path,
    prompt: &[u32],
    steps: usize,
) -> (Vec<u32>, Vec<f32>, Vec<f32>) {
    let mut file = File::open(path).unwrap();
    let content = gguf_file::Content::read(&mut file).unwrap();
    let mut model = ModelWeights::from_gguf(content, &mut file, &Device::Cpu).unwrap();
    let input = Tensor::new(prompt, &Device::Cpu)
        .unwrap()
        .unsqueeze(0)
        .unwrap();
    let mut logits = model.forward(&input, 0).unwrap();
    let (mut ids, mut logprobs, mut first) = (Vec::new(), Vec::new(), Vec::new());
    for (step, position) in (0..steps).zip(prompt.len()..) {
        let lp = log_softmax(&logits.squeeze(0).unwrap().to_vec1::<f32>().unwrap());
        let best = argmax(&lp);
        ids.push(best as u32);
        logprobs.push(lp[best]);
        if step == 0 {
            first = lp;
        }
        let input = Tensor::new(&[best as u32], &Device::Cpu)
            .unwrap()
            .unsqueeze(0)
            .unwrap();
        logits = model.forward(&input, position).unwrap();
    }
    (ids, logprobs, first)
}

fn load() -> (tempfile::TempDir, std::path::PathBuf, LlamaGenerator) {
    let (dir, path) = tiny_gguf();
    let model = LlamaGenerator::load(&path, &Device::Cpu).unwrap();
    (dir, path, model)
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

fn reflection_ids(model: &LlamaGenerator) -> Vec<u32> {
    SELFRAG_SPECIAL_TOKENS
        .iter()
        .map(|t| model.tokenizer().token_id(t).unwrap())
        .collect()
}

/// Same ids and stop reason; log-probs within `logprob_tol`, watched probs within `watched_tol`.
pub fn assert_generations_close(
    a: &Generation,
    b: &Generation,
    logprob_tol: f32,
    watched_tol: f32,
) {
    let ids = |g: &Generation| g.tokens.iter().map(|t| t.id).collect::<Vec<u32>>();
    assert_eq!(ids(a), ids(b));
    assert_eq!(a.stop, b.stop);
    for (x, y) in a.tokens.iter().zip(&b.tokens) {
        assert!(
            (x.logprob - y.logprob).abs() < logprob_tol,
            "logprob {} vs {}",
            x.logprob,
            y.logprob
        );
        assert!(max_abs_diff(&x.watched, &y.watched) < watched_tol);
    }
}

const INSTRUCTION: &str = "### Instruction:\nWho is the president of France?\n\n### Response:\n";

/// Self-RAG prompts: one instruction, `[Retrieval]<paragraph>`, then a passage each.
fn selfrag_prompts(model: &LlamaGenerator, passages: &[&str]) -> Vec<Vec<u32>> {
    let id = |t: &str| model.tokenizer().token_id(t).unwrap();
    passages
        .iter()
        .map(|passage| {
            let mut p = prompt(model, INSTRUCTION);
            p.extend([id("[Retrieval]"), id("<paragraph>")]);
            p.extend(model.tokenizer().tokenize(passage).unwrap());
            p.push(id("</paragraph>"));
            p
        })
        .collect()
}

const PASSAGES: [&str; 5] = [
    "Paris",
    "The president of France is elected by the people of France.",
    "France is a country in Europe; its capital is Paris, which is also its largest city.",
    "It was made in 1920.",
    "Who knows? The history of the president and the state of France is long, and the paper says it is known to many people in the world.",
];

/// Greedy decoding of each prompt gives candle's ids, and its log-probs and first distribution
/// within `tolerance`. Where the ids part (with an f16 cache: rounding can flip a near tie of
/// these random models), our two best tokens at that step must be within `tolerance` of each
/// other, and the steps before it are compared.
fn assert_greedy_matches_candle(
    path: &std::path::Path,
    model: &mut LlamaGenerator,
    prompts: &[Vec<u32>],
    tolerance: f32,
) {
    for p in prompts {
        let steps = 12;
        let (ids, logprobs, first) = candle_greedy(path, p, steps);
        let ours = model
            .generate_timed(
                std::slice::from_ref(p),
                &request(steps, vec![], vec![]),
                false,
            )
            .unwrap();
        let row = &ours.rows[0];
        let our_ids: Vec<u32> = row.tokens.iter().map(|t| t.id).collect();
        let agree = our_ids.iter().zip(&ids).take_while(|(a, b)| a == b).count();
        if agree < ids.len() {
            let context = [p.as_slice(), &ids[..agree]].concat();
            let best = model.top_logprobs(&context, 2).unwrap();
            let two_best = [best[0].0, best[1].0];
            assert!(
                tolerance > 1e-3
                    && best[0].1 - best[1].1 < tolerance
                    && two_best.contains(&ids[agree])
                    && two_best.contains(&our_ids[agree]),
                "prompt of {} tokens: ids {our_ids:?} against candle's {ids:?}, our two best \
                 at step {agree}: {best:?}",
                p.len()
            );
        }
        for (t, lp) in row.tokens.iter().zip(&logprobs).take(agree) {
            assert!(
                (t.logprob - lp).abs() < tolerance,
                "prompt of {} tokens: {} vs {lp}",
                p.len(),
                t.logprob
            );
        }
        // The whole first distribution, not just the argmax.
        let vocab = model.tokenizer().vocab_size();
        let mut top = vec![0.0; vocab];
        for (id, lp) in model.top_logprobs(p, vocab).unwrap() {
            top[id as usize] = lp;
        }
        let diff = max_abs_diff(&top, &first);
        assert!(
            diff < tolerance,
            "prompt of {} tokens: first distribution off by {diff}",
            p.len()
        );
    }
}

/// A prompt longer than one prefill chunk (256 tokens), so it is read in two passes.
fn long_prompt(model: &LlamaGenerator) -> Vec<u32> {
    let mut long = prompt(model, INSTRUCTION);
    while long.len() < 300 {
        long.extend(
            model
                .tokenizer()
                .tokenize(" the river of the city was known")
                .unwrap(),
        );
    }
    long
}

#[test]
fn greedy_decoding_matches_candles_quantized_llama() {
    let (_dir, path, mut model) = load();
    let prompts = [
        prompt(&model, INSTRUCTION),
        prompt(&model, "The city of Paris"),
        selfrag_prompts(&model, &PASSAGES[2..3]).remove(0),
        long_prompt(&model),
    ];
    assert!(prompts[3].contains(&model.tokenizer().token_id("\u{2581}the").unwrap()));
    for (precision, tolerance) in PRECISIONS {
        model.set_cache_precision(precision);
        assert_greedy_matches_candle(&path, &mut model, &prompts, tolerance);
    }
}

/// The published model is Q4_K_M. Its Q4_K and Q6_K matrices run on the crate's packed tiles
/// where the CPU has AVX-512 VNNI, or on candle's kernels where those time faster, and must
/// decode as candle's reference does on either, alone and in a batch.
#[test]
fn a_q4_k_m_model_decodes_as_candles_quantized_llama_on_either_kernels() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("selfrag_llama2_7b.tiny.q4_k_m.gguf");
    selfrag_fixtures::write_tiny_q4_k_m_llama_gguf(&path).unwrap();
    for kernels in [CpuKernels::Packed, CpuKernels::Candle] {
        let mut model =
            LlamaGenerator::load_with_kernels(&path, &Device::Cpu, KernelPolicy::Use(kernels))
                .unwrap();
        // Large prompt passes only where no block's product reaches candle's kernels.
        let pass_tokens =
            if kernels == CpuKernels::Packed && selfrag_models::packed_kernels_available() {
                124
            } else {
                31
            };
        assert_eq!(model.prompt_pass_tokens(), pass_tokens);
        if kernels == CpuKernels::Candle {
            assert_eq!(model.packed_matrices(), 0);
        } else if selfrag_models::packed_kernels_available() {
            // 7 matrices in each of 2 blocks; the output's rows are the vocabulary, which need
            // not be a whole number of tiles.
            assert!(
                model.packed_matrices() >= 14,
                "only {} matrices packed",
                model.packed_matrices()
            );
        } else {
            eprintln!(
                "NOTE: the packed tiles do not run here (no AVX2, FMA and F16C): the Q4_K_M \
                 model ran on candle's kernels"
            );
            assert_eq!(model.packed_matrices(), 0);
        }
        for (precision, tolerance) in PRECISIONS {
            model.set_cache_precision(precision);
            // Heads of 256 / 4 = 64 values: two 8-bit blocks.
            assert_precision_in_force(precision, model.cache_precision(), 64);
            assert_decodes_as_candle(&path, &mut model, tolerance);
        }
    }
}

fn assert_decodes_as_candle(path: &std::path::Path, model: &mut LlamaGenerator, tolerance: f32) {
    // Prompts our prefill reads in one pass, as candle's reference does: with 8-bit
    // activations, sums grouped differently can round an activation one step apart, and a
    // long prompt read in chunks drifts from candle's one pass by up to 0.13 in a tail
    // log-prob, with candle's kernels as with ours (the Q8_0 model covers chunked prompts).
    let prompts = [
        prompt(model, INSTRUCTION),
        selfrag_prompts(model, &PASSAGES[0..1]).remove(0),
    ];
    assert!(prompts.iter().all(|p| p.len() <= 31));
    assert_greedy_matches_candle(path, model, &prompts, tolerance);

    // A batch reads its prompts in smaller chunks than one row alone does, so the same
    // rounding applies and grows over the steps: 0.03 here, the same with candle's kernels.
    // The ids must agree.
    let prompts = selfrag_prompts(model, &PASSAGES);
    let req = request(8, vec![], reflection_ids(model));
    let batch = model.generate_batch(&prompts, &req).unwrap();
    for (p, row) in prompts.iter().zip(&batch) {
        let alone = model
            .generate_batch(std::slice::from_ref(p), &req)
            .unwrap()
            .remove(0);
        assert_generations_close(row, &alone, 0.1, 0.1);
    }
    // Started from the retrieve decision's kept prompt, the batch writes the same.
    let decision = prompt(model, INSTRUCTION);
    model.next_token_probs(&decision, &[]).unwrap();
    let reused = model.generate_timed(&prompts, &req, true).unwrap();
    assert_eq!(reused.cached_prompt_tokens, decision.len());
    for (row, again) in batch.iter().zip(&reused.rows) {
        assert_generations_close(row, again, 0.1, 0.1);
    }
}

#[test]
fn a_model_mapped_from_its_file_holds_no_copy_of_its_quantized_weights() {
    use candle_core::quantized::GgmlDType;
    let (_dir, path) = tiny_gguf();
    let load = |mapped: bool| {
        let mut file = File::open(&path).unwrap();
        let content = gguf_file::Content::read(&mut file).unwrap();
        let map = mapped.then(|| MappedGguf::open(&file, &path, &content).unwrap());
        let mut model = QuantizedLlama::from_gguf(
            &path,
            &content,
            &mut file,
            map.as_ref(),
            &Device::Cpu,
            KernelPolicy::Measure,
        )
        .unwrap();
        // Packs every matrix for candle's SIMD kernels where the CPU has them.
        model.warm_up().unwrap();
        model
    };
    let content = gguf_file::Content::read(&mut File::open(&path).unwrap()).unwrap();
    let quantized: usize = content
        .tensor_infos
        .values()
        .filter(|i| {
            !matches!(
                i.ggml_dtype,
                GgmlDType::F32 | GgmlDType::F16 | GgmlDType::BF16
            )
        })
        .map(|i| i.shape.elem_count() / i.ggml_dtype.block_size() * i.ggml_dtype.type_size())
        .sum();
    assert!(
        quantized > 100_000,
        "the tiny model has {quantized} quantized bytes"
    );

    let (read, read_bytes) = crate::allocation::bytes_held(|| load(false));
    let (mapped, mapped_bytes) = crate::allocation::bytes_held(|| load(true));
    // Whatever candle packs, it packs in both; read into memory, the blocks are held as well.
    assert!(
        read_bytes - mapped_bytes >= quantized as isize * 9 / 10,
        "read into memory the model holds {read_bytes} bytes, mapped {mapped_bytes}; the quantized weights are {quantized}"
    );
    // And the two compute the same thing.
    let (mut read, mut mapped) = (read, mapped);
    let ids: Vec<u32> = (0..12).map(|i| 300 + 11 * i).collect();
    let a = read.forward(&[&ids]).unwrap().flatten_all().unwrap();
    let b = mapped.forward(&[&ids]).unwrap().flatten_all().unwrap();
    assert_eq!(a.to_vec1::<f32>().unwrap(), b.to_vec1::<f32>().unwrap());
}

/// The tiny model read into memory (`LlamaGenerator::load`, which the other tests use, maps
/// the file).
fn read_into_memory(path: &std::path::Path) -> QuantizedLlama {
    let mut file = File::open(path).unwrap();
    let content = gguf_file::Content::read(&mut file).unwrap();
    QuantizedLlama::from_gguf(
        path,
        &content,
        &mut file,
        None,
        &Device::Cpu,
        KernelPolicy::Measure,
    )
    .unwrap()
}

#[test]
fn forward_in_pieces_with_a_growing_cache_matches_candle() {
    let (_dir, path) = tiny_gguf();
    let mut ours = read_into_memory(&path);
    let ids: Vec<u32> = (0..40).map(|i| 300 + 7 * i).collect();
    let pieces: Vec<&[u32]> = vec![&ids[..5], &ids[5..6], &ids[6..9], &ids[9..30], &ids[30..]];
    let expected = candle_logprobs(&path, &pieces);
    for (precision, tolerance) in PRECISIONS {
        ours.set_cache_precision(precision);
        assert_precision_in_force(precision, ours.cache_precision(), ours.config().head_dim);
        for (piece, expected) in pieces.iter().zip(&expected) {
            // No `reserve`: the cache starts at 5 columns and has to grow.
            let logits = ours.forward(&[*piece]).unwrap();
            let ours = log_softmax(&logits.squeeze(0).unwrap().to_vec1::<f32>().unwrap());
            let difference = max_abs_diff(&ours, expected);
            assert!(difference < tolerance, "{precision:?}: {difference}");
        }
    }
    assert_eq!((ours.rows(), ours.columns()), (1, 40));

    // Misuse is an error, never a panic.
    assert!(ours.forward(&[&ids[..2], &ids[..2]]).is_err());
    let empty: &[u32] = &[];
    assert!(ours.forward(&[empty]).is_err());
    assert!(ours.select_rows(&[1]).is_err());
    ours.clear_kv_cache();
    let vocab = ours.config().vocab_size as u32;
    let out_of_range: &[u32] = &[1, vocab];
    assert!(ours.forward(&[out_of_range]).is_err());
    ours.clear_kv_cache();
    let context = ours.config().context_length;
    let too_long = vec![5u32; context + 1];
    assert!(ours.forward(&[&too_long]).is_err());
}

#[test]
fn rows_of_different_lengths_read_in_pieces_match_candle_row_by_row() {
    let (_dir, path) = tiny_gguf();
    let mut ours = read_into_memory(&path);
    let long: Vec<u32> = (0..31).map(|i| 300 + 7 * i).collect();
    let short: Vec<u32> = (0..10).map(|i| 500 + 5 * i).collect();
    let empty: &[u32] = &[];
    let row =
        |logits: &Tensor, i: usize| log_softmax(&logits.get(i).unwrap().to_vec1::<f32>().unwrap());
    let long_alone = candle_logprobs(&path, &[&long[..12], &long[12..30], &long[30..]]);
    let short_alone = candle_logprobs(&path, &[&short[..9], &short[9..]]);
    for (precision, tolerance) in PRECISIONS {
        ours.set_cache_precision(precision);
        // A pass where the short row is all padding, then one where it is mostly padding (9
        // tokens against 18), then a decode step of one token each: every real token must come
        // out as it does alone, whatever the pads around it.
        let first = ours.forward(&[&long[..12], empty]).unwrap();
        let second = ours.forward(&[&long[12..30], &short[..9]]).unwrap();
        let third = ours.forward(&[&long[30..], &short[9..]]).unwrap();
        assert_eq!((ours.rows(), ours.columns()), (2, 31));
        for (ours, alone) in [
            (row(&first, 0), &long_alone[0]),
            (row(&second, 0), &long_alone[1]),
            (row(&third, 0), &long_alone[2]),
            (row(&second, 1), &short_alone[0]),
            (row(&third, 1), &short_alone[1]),
        ] {
            let difference = max_abs_diff(&ours, alone);
            assert!(difference < tolerance, "{precision:?}: {difference}");
        }
    }
}

#[test]
fn a_batch_of_five_decodes_like_five_single_prompts() {
    let (_dir, _path, mut model) = load();
    let prompts = selfrag_prompts(&model, &PASSAGES);
    let lengths: std::collections::HashSet<usize> = prompts.iter().map(Vec::len).collect();
    assert_eq!(lengths.len(), 5, "the prompts should differ in length");
    let req = request(16, vec![], reflection_ids(&model));
    let batch = model.generate_batch(&prompts, &req).unwrap();
    assert_eq!(batch.len(), 5);
    for (p, row) in prompts.iter().zip(&batch) {
        let alone = model
            .generate_batch(std::slice::from_ref(p), &req)
            .unwrap()
            .remove(0);
        assert_generations_close(row, &alone, 1e-4, 1e-5);
        assert_eq!(
            row.tokens[0].id,
            model.tokenizer().token_id("[Relevant]").unwrap()
        );
    }
    // Prompts that are prefixes of one another, and duplicates, share everything they can.
    // With a BOS-only prompt nothing is shared; without it, everything but the last token of
    // the shortest prompt is.
    let base = prompt(&model, INSTRUCTION);
    let nested = [
        base[..base.len() - 3].to_vec(),
        base.clone(),
        base.clone(),
        base[..1].to_vec(),
    ];
    let req = request(6, vec![], vec![]);
    for prompts in [&nested[..], &nested[..3]] {
        let batch = model.generate_batch(prompts, &req).unwrap();
        for (p, row) in prompts.iter().zip(&batch) {
            let alone = model
                .generate_batch(std::slice::from_ref(p), &req)
                .unwrap()
                .remove(0);
            assert_generations_close(row, &alone, 1e-4, 1e-5);
        }
    }
}

#[test]
fn rows_stop_at_different_steps_each_with_its_reason() {
    let (_dir, _path, mut model) = load();
    let eos_row = prompt(&model, "It was made.");
    let stop_row = prompt(&model, "The city of Paris");
    let max = 12;
    let free = model
        .generate_batch(
            std::slice::from_ref(&stop_row),
            &request(max, vec![], vec![]),
        )
        .unwrap();
    let stop = free[0].tokens[2].id;
    let req = request(max, vec![stop], vec![]);
    // A third prompt whose free run has neither EOS nor the stop id: it runs to the limit.
    let candidates: Vec<Vec<u32>> = [
        "The history of science",
        INSTRUCTION,
        "Paris is the capital",
    ]
    .iter()
    .map(|text| prompt(&model, text))
    .collect();
    let length_row = candidates
        .into_iter()
        .find(|p| {
            let alone = model.generate_batch(std::slice::from_ref(p), &req).unwrap();
            alone[0].stop == StopReason::Length
        })
        .expect("one of the candidate prompts runs to the length limit");
    let prompts = vec![length_row, eos_row, stop_row];
    let batch = model.generate_batch(&prompts, &req).unwrap();
    let stops: Vec<StopReason> = batch.iter().map(|g| g.stop).collect();
    assert_eq!(
        stops,
        [
            StopReason::Length,
            StopReason::EndOfSequence,
            StopReason::StopToken
        ]
    );
    assert_eq!(batch[0].tokens.len(), max);
    assert_eq!(batch[1].tokens.len(), 3);
    assert_eq!(
        batch[1].tokens.last().map(|t| t.id),
        Some(model.tokenizer().eos_id())
    );
    assert_eq!(batch[2].tokens.last().map(|t| t.id), Some(stop));
    assert!(batch[2].tokens.len() <= 3);
    for (p, row) in prompts.iter().zip(&batch) {
        let alone = model
            .generate_batch(std::slice::from_ref(p), &req)
            .unwrap()
            .remove(0);
        assert_generations_close(row, &alone, 1e-4, 1e-5);
    }
}

#[test]
fn next_token_probs_is_the_first_step_of_generate() {
    let (_dir, _path, mut model) = load();
    let watch = reflection_ids(&model);
    let prompts = selfrag_prompts(&model, &PASSAGES);
    let req = request(2, vec![], watch.clone());
    let batch = model.generate_batch(&prompts, &req).unwrap();
    for (p, row) in prompts.iter().zip(&batch) {
        let direct = model.next_token_probs(p, &watch).unwrap();
        let alone = model
            .generate_batch(std::slice::from_ref(p), &req)
            .unwrap()
            .remove(0);
        // Alone, it starts from the probe's prompt and reads only the last token again.
        assert!(max_abs_diff(&alone.tokens[0].watched, &direct) < 1e-5);
        assert!(max_abs_diff(&row.tokens[0].watched, &direct) < 1e-5);
    }
}

#[test]
fn a_batch_after_a_probe_starts_from_the_probes_prompt() {
    let (_dir, _path, mut model) = load();
    let watch = reflection_ids(&model);
    let decision = prompt(&model, INSTRUCTION);
    let prompts = selfrag_prompts(&model, &PASSAGES);
    let req = request(6, vec![], watch.clone());
    // Read from nothing: a batch ends with its cache emptied.
    let fresh = model.generate_timed(&prompts, &req, true).unwrap();
    assert_eq!(fresh.cached_prompt_tokens, 0);

    model.next_token_probs(&decision, &watch).unwrap();
    let after = model.generate_timed(&prompts, &req, true).unwrap();
    assert_eq!(after.cached_prompt_tokens, decision.len());
    assert_eq!(
        fresh.prompt_tokens - after.prompt_tokens,
        decision.len(),
        "the probe's prompt is not read again"
    );
    for (a, b) in fresh.rows.iter().zip(&after.rows) {
        assert_generations_close(a, b, 1e-4, 1e-5);
    }
    // The batch did not keep its cache: the next one reads everything.
    let again = model.generate_timed(&prompts, &req, true).unwrap();
    assert_eq!(again.cached_prompt_tokens, 0);

    // A single prompt that begins with the probe's, and one that is the probe's: everything
    // the probe read, but the last token whose logits the first step needs.
    for (single, cached) in [
        (prompts[1].clone(), decision.len()),
        (decision.clone(), decision.len() - 1),
    ] {
        let alone = model
            .generate_timed(std::slice::from_ref(&single), &req, true)
            .unwrap();
        model.next_token_probs(&decision, &watch).unwrap();
        let reused = model
            .generate_timed(std::slice::from_ref(&single), &req, true)
            .unwrap();
        assert_eq!(reused.cached_prompt_tokens, cached);
        assert_eq!(reused.prompt_tokens, single.len() - cached);
        assert_generations_close(&alone.rows[0], &reused.rows[0], 1e-4, 1e-5);
    }

    // A prompt that parts from the probe's after its first tokens reuses just those, and so
    // does a probe after a probe.
    let other = prompt(&model, "### Instruction:\nName a city.");
    let shared = decision
        .iter()
        .zip(&other)
        .take_while(|(a, b)| a == b)
        .count();
    assert!(shared > 1 && shared < decision.len());
    let alone = model
        .generate_timed(std::slice::from_ref(&other), &req, true)
        .unwrap();
    let direct = model.next_token_probs(&other, &watch).unwrap();
    model.next_token_probs(&decision, &watch).unwrap();
    let partial = model
        .generate_timed(std::slice::from_ref(&other), &req, true)
        .unwrap();
    assert_eq!(partial.cached_prompt_tokens, shared);
    assert_generations_close(&alone.rows[0], &partial.rows[0], 1e-4, 1e-5);
    model.next_token_probs(&decision, &watch).unwrap();
    let probe_after_probe = model.next_token_probs(&other, &watch).unwrap();
    assert!(max_abs_diff(&probe_after_probe, &direct) < 1e-5);
}

#[test]
fn a_stopped_batch_fails_inside_its_pass_and_the_next_batch_reads_from_nothing() {
    let (_dir, _path, mut model) = load();
    let prompts = selfrag_prompts(&model, &PASSAGES);
    let req = request(4, vec![], reflection_ids(&model));
    let fresh = model.generate_timed(&prompts, &req, true).unwrap();
    // A probe first, so that the stopped batch starts from a kept prompt.
    model
        .next_token_probs(&prompt(&model, INSTRUCTION), &[])
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let mut batch = model
        .begin_batch(prompts.clone(), req.clone(), true)
        .unwrap();
    batch.stop_when(stop.clone());
    // The flag is read between the blocks of a pass: set before a step, that step fails.
    assert!(model.step(&mut batch).unwrap().is_none());
    stop.store(true, Ordering::Relaxed);
    let error = model.step(&mut batch).unwrap_err();
    assert!(error.to_string().contains("interrupted"), "{error}");
    let after = model.generate_timed(&prompts, &req, true).unwrap();
    assert_eq!(after.cached_prompt_tokens, 0);
    for (a, b) in fresh.rows.iter().zip(&after.rows) {
        assert_generations_close(a, b, 1e-4, 1e-5);
    }
}

#[test]
fn timings_count_prompt_and_decode_tokens() {
    let (_dir, _path, mut model) = load();
    let p = prompt(&model, "The city of Paris");
    let rows = vec![p.clone(); 3];
    let timed = model
        .generate_timed(&rows, &request(5, vec![], vec![]), false)
        .unwrap();
    // The shared prefix once, then each row's last prompt token.
    assert_eq!(timed.prompt_tokens, p.len() - 1 + 3);
    assert_eq!(timed.cached_prompt_tokens, 0);
    assert_eq!(timed.decode_tokens, 3 * 4);
    assert!(timed.rows.iter().all(|r| r.tokens.len() == 5));
    for row in &timed.rows[1..] {
        assert_generations_close(row, &timed.rows[0], 1e-5, 1e-5);
    }
    assert!(timed.prompt_seconds >= 0.0 && timed.decode_seconds >= 0.0);
}

#[test]
fn shapes_the_model_cannot_run_are_refused_with_the_reason() {
    use candle_core::quantized::gguf_file::Value;
    use candle_core::quantized::{GgmlDType, QTensor};
    use selfrag_models::ModelError;

    let dir = tempfile::tempdir().unwrap();
    let embeddings = QTensor::quantize(
        &Tensor::zeros((4, 32), candle_core::DType::F32, &Device::Cpu).unwrap(),
        GgmlDType::F32,
    )
    .unwrap();
    let cases: [(&str, Value, &str); 3] = [
        (
            "llama.attention.head_count_kv",
            Value::U32(3),
            "key/value heads",
        ),
        (
            "llama.rope.dimension_count",
            Value::U32(4),
            "partial rotary",
        ),
        ("llama.expert_count", Value::U32(8), "a mixture of experts"),
    ];
    for (key, value, reason) in cases {
        let path = dir.path().join("odd.gguf");
        let metadata = [
            ("general.architecture", Value::String("llama".to_owned())),
            ("llama.attention.head_count", Value::U32(4)),
            ("llama.block_count", Value::U32(1)),
            ("llama.embedding_length", Value::U32(32)),
            ("llama.context_length", Value::U32(16)),
            ("llama.attention.layer_norm_rms_epsilon", Value::F32(1e-5)),
            (key, value),
        ];
        let metadata: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (*k, v)).collect();
        let mut file = File::create(&path).unwrap();
        gguf_file::write(&mut file, &metadata, &[("token_embd.weight", &embeddings)]).unwrap();
        let err = LlamaGenerator::load(&path, &Device::Cpu).unwrap_err();
        // A shape no model can have is a broken file; one it can but this version does not
        // compute is named as such, never "download it again".
        if key == "llama.attention.head_count_kv" {
            assert!(matches!(err, ModelError::InvalidGguf { .. }), "{err}");
        } else {
            assert!(
                matches!(err, ModelError::UnsupportedModelFeature { .. }),
                "{err}"
            );
        }
        let message = err.to_string();
        assert!(
            message.contains(reason) && message.contains("odd.gguf"),
            "{message}"
        );
    }
}
