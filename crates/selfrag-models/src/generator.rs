//! `LlamaGenerator`: the Self-RAG generator, a quantized Llama read from one GGUF file
//! ([`QuantizedLlama`]), implementing `selfrag_core::Generator`.
//!
//! A batch is decoded together: the longest prefix that all prompts share (in Self-RAG, the
//! instruction up to `[Retrieval]<paragraph>`) is run once on one row and copied into every row,
//! the rest of the prompts run as one left-padded batch, and then every live row advances one
//! token per forward pass until it stops; finished rows leave the batch. Long prompts are read in
//! chunks to bound the size of the attention scores.
//!
//! A probe's prompt stays in the cache after it ends: Self-RAG's retrieve decision reads
//! `<s>### Instruction:…### Response:\n`, and every prompt of the batch that follows begins with
//! those tokens, so the batch starts from them instead of reading them again.
//!
//! Probabilities are computed on the host in f32 over the whole vocabulary, at the last position
//! of each row only, so reflection-token probabilities are exact softmax values, never
//! renormalised.

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use candle_core::{DType, Device};
use selfrag_core::{
    BackendError, BatchTiming, CachePrecision, DummyPrefix, GenerateRequest, GeneratedToken,
    Generation, Generator, StopReason, TokenId, Tokenizer,
};

use crate::cpu_kernels::{KernelChoice, KernelPolicy};
use crate::decode_prefetch::{PrefetchChoice, PrefetchPolicy};
use crate::error::ModelError;
use crate::gguf_tokenizer::GgufTokenizer;
use crate::llama::QuantizedLlama;
use crate::mapped::MappedGguf;

/// Prompt tokens per forward pass, summed over the rows of a batch, where every weight matrix
/// runs on this crate's packed tiles. The prompt kernel unpacks each superblock of weights once
/// per pass and reads every weight from memory once per pass, so larger passes read prompts
/// faster: measured on an AMD EPYC (family 26, 2 cores, the 8-block 7B-shaped Q4_K_M model),
/// a 128-token prompt at 248–259 tokens/s against 213–228 in passes of 31, and the five
/// candidates of an answer (K = 5, about 1,350 prompt tokens) in 4.6 s against 5.9–6.0. A
/// pass of a 7B model on two cores then takes a few seconds, so it stops between blocks when
/// its generation is cancelled ([`BatchDecode::stop_when`]). Other requests to the model thread
/// (a question's query to embed, an indexing job's batch) wait for the pass to end: on two cores
/// a pass of a 7B model takes about 2.3 s on that EPYC (a quarter of the 8-block model's 220
/// tokens/s), against 0.6 s for 31 tokens.
pub(crate) const PREFILL_TOKENS: usize = 124;

/// The most prompt tokens left after a pass on the packed tiles that join it instead of
/// making a pass of their own: a pass of fewer than [`crate::packed::PROMPT_MIN_ROWS`] tokens
/// runs on the decode kernel, which reads every weight for them as a decode step does. A
/// 128-token prompt had been read as 124 tokens and then 4: measured on the Xeon (release
/// build, the 8-block model, 2 threads, 4 rounds), 124 tokens took 0.564 s and 128 took 0.623,
/// so the pass of 4 cost 59 ms, 9% of the prompt; joined, 128 tokens read at 219.6 tokens/s
/// against 205.4 (dev builds taking turns, medians of 4).
pub(crate) const PACKED_TAIL_TOKENS: usize = crate::packed::PROMPT_MIN_ROWS - 1;

/// Prompt tokens per forward pass where some block's matrix runs on candle's kernels: under 32
/// on purpose. On CPUs with AMX, candle multiplies 32 rows or more with AMX tiles from a
/// second packed copy of every Q4_K matrix, 2.2 times the size of the weights, kept next to the
/// original and the AVX-512 copy. For a 7B Q4_K_M model that is 8 GB more memory (measured:
/// peak RSS 4.1 GB instead of 2.5 GB on an 8-block, 1.16 GB model), for prompts about 25%
/// faster; and some virtual machines report AMX that faults when used.
pub(crate) const CANDLE_PREFILL_TOKENS: usize = 31;

/// Prompt tokens per forward pass on a GPU (CUDA, Metal), whatever the weights' types. Candle's
/// GPU products read each weight once per pass for up to hundreds of rows, and a pass costs
/// about 300 kernel launches whatever its size, so a pass of 31 read prompts at a third of the
/// GPU's speed: measured on an NVIDIA H200 (the 7B-shaped Q4_K_M model, a 128-token prompt),
/// 2,402 tokens/s in passes of 31 against PyTorch's 6,454 in fp16. A pass of 512 tokens takes
/// tens of milliseconds there, and its attention scores (slots × heads × context floats) a
/// quarter of a gigabyte at a 4,096-token context.
pub(crate) const GPU_PREFILL_TOKENS: usize = 512;

/// Slots of a prompt pass at most (rows × columns, pads included) on the CPU: rows of different
/// lengths are left-padded, and while only the longest rows have tokens a pass takes more
/// columns to hold its real ones. Pads cost no arithmetic but attention's, whose scores this
/// bounds (slots × heads × context floats, as for one row of `PREFILL_TOKENS`). A pass of more
/// tokens (a GPU's) may have as many slots as tokens.
const PREFILL_SLOTS: usize = PREFILL_TOKENS;

/// A GGUF Llama model and its tokenizer, on one device.
pub struct LlamaGenerator {
    model: QuantizedLlama,
    tokenizer: GgufTokenizer,
    device: Device,
    path: PathBuf,
    /// Incremented by every batch begun: the cache belongs to the batch with this serial.
    batch_serial: u64,
    /// Prompt tokens per forward pass: [`GPU_PREFILL_TOKENS`] on a GPU; on the CPU
    /// [`PREFILL_TOKENS`], or [`CANDLE_PREFILL_TOKENS`] where some block's matrix runs on
    /// candle's kernels.
    pass_tokens: usize,
    /// Tokens left after a pass that join it rather than make a pass of their own:
    /// [`PACKED_TAIL_TOKENS`] on the packed tiles, none elsewhere (candle's passes stay under
    /// 32 tokens, and a GPU reads a pass of a few tokens quickly).
    tail_tokens: usize,
    /// The tokens whose keys and values fill the model's cache (one row, from its first column)
    /// once a probe has ended; empty while the cache holds anything else.
    cached_prompt: Vec<TokenId>,
}

impl std::fmt::Debug for LlamaGenerator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlamaGenerator")
            .field("path", &self.path)
            .field("device", &self.device)
            .field("context_length", &self.model.config().context_length)
            .field("vocab_size", &self.tokenizer.vocab_size())
            .finish_non_exhaustive()
    }
}

/// A batch's generations with how long reading the prompts and decoding took
/// (for `selfrag debug generate` and benchmarks).
#[derive(Debug, Clone, PartialEq)]
pub struct TimedGeneration {
    /// One row per prompt, in order.
    pub rows: Vec<Generation>,
    /// Prompt tokens run through the model: the shared prefix once (but what the cache held
    /// from a probe, `cached_prompt_tokens`), plus every row's rest.
    pub prompt_tokens: usize,
    /// Prompt tokens not run because the cache held them from the probe before (the start of
    /// the shared prefix).
    pub cached_prompt_tokens: usize,
    /// Time to the logits of every prompt's last token (the first generated token of each row).
    pub prompt_seconds: f64,
    /// Tokens run by decode steps, over all rows (each row's generated tokens but its last).
    pub decode_tokens: usize,
    /// Time spent in decode steps.
    pub decode_seconds: f64,
}

impl TimedGeneration {
    /// The two times, as a Self-RAG run records them.
    pub fn timing(&self) -> BatchTiming {
        BatchTiming {
            prompt_seconds: self.prompt_seconds,
            decode_seconds: self.decode_seconds,
        }
    }
}

/// The watched probabilities a finished probe (see [`LlamaGenerator::begin_probe`]) read.
pub fn probe_result(done: TimedGeneration) -> Vec<f32> {
    done.rows
        .into_iter()
        .next()
        .and_then(|row| row.tokens.into_iter().next())
        .map(|token| token.watched)
        .unwrap_or_default()
}

/// A row that goes on decoding: (cache row, prompt index, its next token).
type GoingOn = (usize, usize, TokenId);

/// `log_softmax(logits)[i]` for every `i`, computed in f32 with an f64 normaliser; `None`
/// where a logit is NaN or infinite: then every value would be NaN, and a NaN score cannot be
/// shown or saved.
fn log_softmax(logits: &[f32]) -> Option<Vec<f32>> {
    if !logits.iter().all(|x| x.is_finite()) {
        return None;
    }
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f64 = logits.iter().map(|&x| f64::from(x - max).exp()).sum();
    #[allow(clippy::cast_possible_truncation)]
    let log_sum = sum.ln() as f32;
    Some(logits.iter().map(|&x| x - max - log_sum).collect())
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

/// The error of a prefetch calibration that failed on the model at `path`.
fn prefetch_failed(path: &Path) -> impl FnOnce(candle_core::Error) -> ModelError + '_ {
    move |e| ModelError::InvalidGguf {
        path: path.to_owned(),
        reason: format!("timing the decode kernel's prefetch distance failed: {e}"),
    }
}

/// Length of the longest common prefix of `prompts` (0 for none).
fn common_prefix_len(prompts: &[Vec<TokenId>]) -> usize {
    let Some((first, rest)) = prompts.split_first() else {
        return 0;
    };
    rest.iter().fold(first.len(), |len, p| {
        first[..len]
            .iter()
            .zip(p)
            .take_while(|(a, b)| a == b)
            .count()
    })
}

impl LlamaGenerator {
    /// Reads the GGUF at `path` once: tokenizer from its metadata, weights onto `device`, on
    /// the CPU kernels `SELFRAG_CPU_KERNELS` asks for (timed at load unless it says otherwise;
    /// see [`KernelChoice`]).
    pub fn load(path: &Path, device: &Device) -> Result<Self, ModelError> {
        let policy = KernelPolicy::from_env().map_err(ModelError::InvalidSetting)?;
        Self::load_as_set(path, device, policy)
    }

    /// [`LlamaGenerator::load`], the kernels' timing remembered in `memory` (the app's data
    /// folder): timed at the first load on this CPU model, recalled after (see
    /// [`crate::KernelMemory`]).
    pub fn load_remembering_kernels(
        path: &Path,
        device: &Device,
        memory: crate::KernelMemory,
    ) -> Result<Self, ModelError> {
        let policy = KernelPolicy::from_env().map_err(ModelError::InvalidSetting)?;
        Self::load_as_set(path, device, policy.remembering(memory))
    }

    /// The load with `policy`, the cache precision as `SELFRAG_KV_CACHE` sets it and the
    /// decode kernel's prefetch distance as `SELFRAG_CPU_PREFETCH` does (calibrated unless it
    /// says otherwise, remembered where `policy` remembers the kernels' timing).
    fn load_as_set(path: &Path, device: &Device, policy: KernelPolicy) -> Result<Self, ModelError> {
        let precision =
            crate::llama::cache_precision_from_env(device).map_err(ModelError::InvalidSetting)?;
        let prefetch = PrefetchPolicy::from_env().map_err(ModelError::InvalidSetting)?;
        let memory = policy.memory().cloned();
        let mut generator = Self::load_with_kernels(path, device, policy)?;
        generator.model.set_cache_precision(precision);
        generator
            .model
            .choose_prefetch(prefetch, memory.as_ref())
            .map_err(prefetch_failed(path))?;
        Ok(generator)
    }

    /// [`LlamaGenerator::load`] with the CPU kernels chosen as `policy` says.
    pub fn load_with_kernels(
        path: &Path,
        device: &Device,
        policy: KernelPolicy,
    ) -> Result<Self, ModelError> {
        let file = File::open(path).map_err(ModelError::io(path))?;
        let mut reader = BufReader::new(file);
        let content = crate::gguf_header::read(&mut reader, path)?;
        let config = crate::llama::LlamaConfig::from_gguf(&content, path)?;
        let tokenizer = GgufTokenizer::from_gguf(&content).map_err(|e| e.in_file(path))?;
        if config.vocab_size != tokenizer.vocab_size() {
            return Err(ModelError::InvalidGguf {
                path: path.to_owned(),
                reason: format!(
                    "the vocabulary has {} tokens but `token_embd.weight` has {} rows",
                    tokenizer.vocab_size(),
                    config.vocab_size
                ),
            });
        }
        // On the CPU the quantized weights are used in place from a map of the file (see
        // `mapped`); where the file cannot be mapped they are read into memory instead.
        let mapped = if device.is_cpu() {
            match MappedGguf::open(reader.get_ref(), path, &content) {
                Ok(mapped) => Some(mapped),
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "cannot map the model file; reading it into memory");
                    None
                }
            }
        } else {
            None
        };
        let mut model = QuantizedLlama::from_gguf(
            path,
            &content,
            &mut reader,
            mapped.as_ref(),
            device,
            policy,
        )?;
        model.warm_up().map_err(|e| ModelError::InvalidGguf {
            path: path.to_owned(),
            reason: format!("the first forward pass failed: {e}"),
        })?;
        tracing::info!(
            path = %path.display(),
            vocab = tokenizer.vocab_size(),
            context_length = config.context_length,
            blocks = config.block_count,
            heads = config.head_count,
            kv_heads = config.head_count_kv,
            packed_matrices = model.packed_matrices(),
            kernels = %model.kernel_choice(),
            "loaded GGUF Llama generator"
        );
        let (pass_tokens, tail_tokens) = if !device.is_cpu() {
            (GPU_PREFILL_TOKENS, 0)
        } else if model.all_blocks_packed() {
            (PREFILL_TOKENS, PACKED_TAIL_TOKENS)
        } else {
            (CANDLE_PREFILL_TOKENS, 0)
        };
        Ok(Self {
            model,
            tokenizer,
            device: device.clone(),
            path: path.to_owned(),
            batch_serial: 0,
            pass_tokens,
            tail_tokens,
            cached_prompt: Vec::new(),
        })
    }

    /// How the KV cache holds keys and values (see [`CachePrecision`]).
    pub fn cache_precision(&self) -> CachePrecision {
        self.model.cache_precision()
    }

    /// Holds the KV cache in `precision` from the next generation on; forgets a kept prompt.
    pub fn set_cache_precision(&mut self, precision: CachePrecision) {
        self.model.set_cache_precision(precision);
        self.cached_prompt.clear();
    }

    /// The precision [`Self::set_cache_precision`] puts in force when asked for `precision` (see
    /// [`QuantizedLlama::cache_precision_for`]).
    pub fn cache_precision_for(&self, precision: CachePrecision) -> CachePrecision {
        self.model.cache_precision_for(precision)
    }

    /// Tokenizes prompts with the dummy prefix placed as `dummy_prefix` says from now on (see
    /// [`DummyPrefix`]); the weights and the cache are untouched.
    pub fn set_dummy_prefix(&mut self, dummy_prefix: DummyPrefix) {
        self.tokenizer.set_dummy_prefix(dummy_prefix);
    }

    /// How many weight matrices run on this crate's packed AVX-512 tiles rather than candle's
    /// kernels (see [`QuantizedLlama::packed_matrices`]).
    pub fn packed_matrices(&self) -> usize {
        self.model.packed_matrices()
    }

    /// Which CPU kernels multiply the Q4_K and Q6_K matrices, and why.
    pub fn kernel_choice(&self) -> &KernelChoice {
        self.model.kernel_choice()
    }

    /// How far ahead the packed tiles' decode kernel reads, and why.
    pub fn prefetch_choice(&self) -> &PrefetchChoice {
        self.model.prefetch_choice()
    }

    /// Chooses the decode kernel's prefetch distance again, as `policy` says (a set distance,
    /// or a calibration on this model's matrices, not remembered), for the whole process: the
    /// benchmarks compare distances in one process with it.
    pub fn choose_prefetch(
        &mut self,
        policy: PrefetchPolicy,
    ) -> Result<&PrefetchChoice, ModelError> {
        self.model
            .choose_prefetch(policy, None)
            .map_err(prefetch_failed(&self.path))
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
        self.tokenizer.check_ids(ids)
    }

    fn check_prompt(&self, prompt: &[TokenId], max_new_tokens: usize) -> Result<(), ModelError> {
        if prompt.is_empty() {
            return Err(ModelError::EmptyPrompt);
        }
        self.check_ids(prompt)?;
        let context_length = self.model.config().context_length;
        if prompt.len().saturating_add(max_new_tokens) > context_length {
            return Err(ModelError::ContextOverflow {
                prompt_tokens: prompt.len(),
                max_new_tokens,
                context_length,
            });
        }
        Ok(())
    }

    /// One forward pass (see [`QuantizedLlama::forward`]); logits of each row's last token.
    fn forward(&mut self, rows: &[&[TokenId]]) -> Result<Vec<Vec<f32>>, ModelError> {
        let context = ModelError::candle(format!("forward pass of {}", self.path.display()));
        self.model
            .forward(rows)
            .and_then(|logits| logits.to_dtype(DType::F32))
            .and_then(|logits| logits.to_vec2::<f32>())
            .map_err(context)
    }

    /// One forward pass whose logits are not read (see [`QuantizedLlama::advance`]).
    fn forward_unread(&mut self, rows: &[&[TokenId]]) -> Result<(), ModelError> {
        let context = ModelError::candle(format!("forward pass of {}", self.path.display()));
        self.model.advance(rows).map_err(context)
    }

    /// Runs `rows` (continuing the cache's rows) left-padded to a common length, in passes of
    /// about `self.pass_tokens` tokens ([`pass_end`]); returns the logits of each row's last
    /// token.
    fn prefill(&mut self, rows: &[&[TokenId]]) -> Result<Vec<Vec<f32>>, ModelError> {
        let width = rows.iter().map(|r| r.len()).max().unwrap_or(0);
        if width == 0 {
            return Ok(Vec::new());
        }
        let mut begin = 0;
        loop {
            let end = pass_end(rows, begin, self.pass_tokens, self.tail_tokens);
            let columns = padded_columns(rows, begin, end);
            if end >= width {
                // Only the last pass's logits are read.
                return self.forward(&columns);
            }
            self.forward_unread(&columns)?;
            begin = end;
        }
    }

    /// Prompt tokens per forward pass on this model's device and kernels:
    /// [`GPU_PREFILL_TOKENS`] on a GPU, [`PREFILL_TOKENS`] where every block runs on the packed
    /// tiles, else [`CANDLE_PREFILL_TOKENS`].
    pub fn prompt_pass_tokens(&self) -> usize {
        self.pass_tokens
    }

    /// Frees the cache a finished probe left for the batch that follows, if it is still there:
    /// for when no batch follows soon (a 7B model's cache takes about 1 MiB a token).
    pub fn release_kept_prompt(&mut self) {
        if !self.cached_prompt.is_empty() {
            self.clear_cache();
        }
    }

    /// Empties the model's cache, and with it what a probe left there.
    fn clear_cache(&mut self) {
        self.model.clear_kv_cache();
        self.cached_prompt.clear();
    }

    /// How many of the first tokens of `prompt` the cache holds from the last probe, at most
    /// `limit`.
    fn cached_prefix_len(&self, prompt: &[TokenId], limit: usize) -> usize {
        self.cached_prompt
            .iter()
            .zip(&prompt[..limit.min(prompt.len())])
            .take_while(|(a, b)| a == b)
            .count()
    }

    /// Logits after the whole of `prompt` (already checked), with a fresh cache.
    fn prompt_logits(&mut self, prompt: &[TokenId]) -> Result<Vec<f32>, ModelError> {
        self.clear_cache();
        self.model.reserve(prompt.len());
        let logits = self.prefill(&[prompt]);
        self.clear_cache();
        logits?
            .into_iter()
            .next()
            .ok_or_else(|| ModelError::Candle {
                context: format!("forward pass of {}", self.path.display()),
                source: candle_core::Error::Msg("no logits for the prompt".to_owned()),
            })
    }

    /// The `n` most likely next tokens after `prompt`, with their log-probabilities
    /// (log-softmax over the whole vocabulary), most likely first.
    pub fn top_logprobs(
        &mut self,
        prompt: &[TokenId],
        n: usize,
    ) -> Result<Vec<(TokenId, f32)>, ModelError> {
        self.check_prompt(prompt, 0)?;
        let logits = self.prompt_logits(prompt)?;
        let logprobs = self.logprobs(&logits)?;
        let mut ranked: Vec<(TokenId, f32)> = logprobs
            .iter()
            .enumerate()
            .filter_map(|(id, &lp)| TokenId::try_from(id).ok().map(|id| (id, lp)))
            .collect();
        // Stable: equal log-probabilities keep the lower id first, as greedy decoding does.
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
        ranked.truncate(n);
        Ok(ranked)
    }

    /// Greedy continuation of every prompt as one batch, with timings. With `stop_at_eos`
    /// false, EOS ends a row only when it is in `request.stop_ids` (for benchmarks).
    pub fn generate_timed(
        &mut self,
        prompts: &[Vec<TokenId>],
        request: &GenerateRequest,
        stop_at_eos: bool,
    ) -> Result<TimedGeneration, ModelError> {
        let mut batch = self.begin_batch(prompts.to_vec(), request.clone(), stop_at_eos)?;
        loop {
            if let Some(done) = self.step(&mut batch)? {
                return Ok(done);
            }
        }
    }

    /// Starts the greedy continuation of every prompt as one batch, to be driven by
    /// [`LlamaGenerator::step`]; every row is checked before any work. With `stop_at_eos`
    /// false, EOS ends a row only when it is in `request.stop_ids` (for benchmarks).
    pub fn begin_batch(
        &mut self,
        prompts: Vec<Vec<TokenId>>,
        request: GenerateRequest,
        stop_at_eos: bool,
    ) -> Result<BatchDecode, ModelError> {
        for prompt in &prompts {
            self.check_prompt(prompt, request.max_new_tokens)?;
        }
        self.check_ids(&request.watch_ids)?;
        let longest = prompts.iter().map(Vec::len).max().unwrap_or(0);
        let columns = longest + request.max_new_tokens.saturating_sub(1);
        Ok(self.begin(prompts, request, stop_at_eos, columns))
    }

    /// Starts reading `prompt` for the probabilities of `watch_ids` at the position that
    /// follows it (the first generated token's `watched`), to be driven by
    /// [`LlamaGenerator::step`]. Unlike a batch of one new token, the prompt may fill the
    /// whole context.
    pub fn begin_probe(
        &mut self,
        prompt: Vec<TokenId>,
        watch_ids: Vec<TokenId>,
    ) -> Result<BatchDecode, ModelError> {
        self.check_prompt(&prompt, 0)?;
        self.check_ids(&watch_ids)?;
        let columns = prompt.len();
        let request = GenerateRequest {
            max_new_tokens: 1,
            stop_ids: Vec::new(),
            markup_ids: Vec::new(),
            watch_ids,
        };
        let mut probe = self.begin(vec![prompt], request, false, columns);
        probe.keeps_prompt = true;
        Ok(probe)
    }

    fn begin(
        &mut self,
        prompts: Vec<Vec<TokenId>>,
        request: GenerateRequest,
        stop_at_eos: bool,
        columns: usize,
    ) -> BatchDecode {
        self.batch_serial += 1;
        let empty = prompts.is_empty() || request.max_new_tokens == 0;
        // Every row keeps at least its last prompt token out of the shared part: its logits
        // give the row's first generated token.
        let shortest = prompts.iter().map(Vec::len).min().unwrap_or(0);
        let shareable = common_prefix_len(&prompts).min(shortest.saturating_sub(1));
        let cached = match prompts.first() {
            Some(first) if !empty => self.cached_prefix_len(first, shareable),
            _ => 0,
        };
        let cached = if cached > 0 && self.model.truncate(cached).is_ok() {
            cached
        } else {
            self.model.clear_kv_cache();
            0
        };
        self.cached_prompt.clear();
        // A single prompt is read in one part unless the cache holds its start.
        let shared = if prompts.len() > 1 { shareable } else { cached };
        if !empty {
            self.model.reserve(columns);
        }
        let rows = prompts
            .iter()
            .map(|_| Generation {
                tokens: Vec::with_capacity(request.max_new_tokens),
                stop: StopReason::Length,
            })
            .collect();
        let prompt_tokens = if empty {
            0
        } else {
            shared - cached + prompts.iter().map(|p| p.len() - shared).sum::<usize>()
        };
        BatchDecode {
            serial: self.batch_serial,
            live: (0..prompts.len()).collect(),
            phase: match (empty, shared) {
                (true, _) => Phase::Finished,
                (false, 0) => Phase::Rests { begin: 0 },
                (false, _) => Phase::SharedPrefix { begin: cached },
            },
            prompts,
            request,
            stop_at_eos,
            keeps_prompt: false,
            stop: None,
            shared,
            rows,
            prompt_tokens,
            cached_prompt_tokens: cached,
            decode_tokens: 0,
            started: Instant::now(),
            prompt_seconds: 0.0,
        }
    }

    /// Runs one forward pass of `batch` (a chunk of its prompts, or one token of every live
    /// row); returns the generations once every row has stopped, when the cache is freed (a
    /// probe's is kept for the batch that follows, see [`Self::release_kept_prompt`]).
    pub fn step(&mut self, batch: &mut BatchDecode) -> Result<Option<TimedGeneration>, ModelError> {
        if batch.serial != self.batch_serial {
            return Err(ModelError::BatchSuperseded);
        }
        self.model.set_interrupt(batch.stop.clone());
        let result = self.advance(batch);
        self.model.set_interrupt(None);
        match &result {
            Ok(None) => {}
            // A probe's one row is its prompt: kept for the batch that follows.
            Ok(Some(_)) if batch.keeps_prompt && self.model.columns() > 0 => {
                self.cached_prompt = batch.prompts.first().cloned().unwrap_or_default();
                batch.phase = Phase::Finished;
            }
            // The cache of a batch can be large; free it rather than keep it until the next one.
            _ => {
                self.clear_cache();
                batch.phase = Phase::Finished;
            }
        }
        result
    }

    /// Frees the cache of `batch`, left unfinished (a cancelled answer); nothing happens
    /// where another batch has started since.
    pub fn abandon(&mut self, batch: BatchDecode) {
        if batch.serial == self.batch_serial {
            self.clear_cache();
        }
    }

    fn advance(&mut self, batch: &mut BatchDecode) -> Result<Option<TimedGeneration>, ModelError> {
        let path = self.path.display().to_string();
        let candle = move |what: &str| ModelError::candle(format!("{what} of {path}"));
        let phase = std::mem::replace(&mut batch.phase, Phase::Finished);
        batch.phase = match phase {
            Phase::SharedPrefix { begin } => {
                let mut end = (begin + self.pass_tokens).min(batch.shared);
                if batch.shared - end <= self.tail_tokens {
                    end = batch.shared;
                }
                if begin < end {
                    self.forward_unread(&[&batch.prompts[0][begin..end]])?;
                }
                if end < batch.shared {
                    Phase::SharedPrefix { begin: end }
                } else {
                    if batch.prompts.len() > 1 {
                        self.model
                            .select_rows(&vec![0; batch.prompts.len()])
                            .map_err(candle("copying the shared prompt prefix"))?;
                    }
                    Phase::Rests { begin: 0 }
                }
            }
            Phase::Rests { begin } => {
                let rests: Vec<&[TokenId]> =
                    batch.prompts.iter().map(|p| &p[batch.shared..]).collect();
                let width = rests.iter().map(|r| r.len()).max().unwrap_or(0);
                let end = pass_end(&rests, begin, self.pass_tokens, self.tail_tokens);
                let columns = padded_columns(&rests, begin, end);
                if end < width {
                    // Only the last pass's logits are read.
                    self.forward_unread(&columns)?;
                    Phase::Rests { begin: end }
                } else {
                    let logits = self.forward(&columns)?;
                    batch.prompt_seconds = batch.started.elapsed().as_secs_f64();
                    Phase::Decoding { logits }
                }
            }
            Phase::Decoding { logits } => match self.choose_next(batch, &logits)? {
                None => return Ok(Some(batch.finish())),
                Some(next) => {
                    if next.len() < batch.live.len() {
                        let keep: Vec<usize> =
                            next.iter().map(|&(cache_row, _, _)| cache_row).collect();
                        self.model
                            .select_rows(&keep)
                            .map_err(candle("dropping finished rows"))?;
                    }
                    batch.live = next.iter().map(|&(_, row, _)| row).collect();
                    let ids: Vec<[TokenId; 1]> = next.iter().map(|&(_, _, id)| [id]).collect();
                    let step: Vec<&[TokenId]> = ids.iter().map(|id| id.as_slice()).collect();
                    let logits = self.forward(&step)?;
                    batch.decode_tokens += step.len();
                    Phase::Decoding { logits }
                }
            },
            Phase::Finished => return Ok(Some(batch.finish())),
        };
        Ok(None)
    }

    /// The log-probabilities of one row's logits, or the error that names the file where the
    /// model's output is not a number.
    fn logprobs(&self, logits: &[f32]) -> Result<Vec<f32>, ModelError> {
        log_softmax(logits).ok_or_else(|| ModelError::InvalidGguf {
            path: self.path.clone(),
            reason: "the model's output (its logits) was not a finite number (NaN or infinite) \
                     at a position, so no probability could be read from it"
                .to_owned(),
        })
    }

    /// Chooses every live row's next token from its logits and records it; returns the rows
    /// that go on, or `None` when every row has stopped.
    fn choose_next(
        &self,
        batch: &mut BatchDecode,
        logits: &[Vec<f32>],
    ) -> Result<Option<Vec<GoingOn>>, ModelError> {
        let eos = self.tokenizer.eos_id();
        let request = &batch.request;
        let mut next = Vec::with_capacity(batch.live.len());
        for (cache_row, (&row, row_logits)) in batch.live.iter().zip(logits).enumerate() {
            let logprobs = self.logprobs(row_logits)?;
            let best = argmax(&logprobs);
            let id = TokenId::try_from(best).unwrap_or(eos);
            let generation = &mut batch.rows[row];
            generation.tokens.push(GeneratedToken {
                id,
                logprob: logprobs[best],
                watched: request
                    .watch_ids
                    .iter()
                    .map(|&w| logprobs[w as usize].exp())
                    .collect(),
            });
            let stop = if batch.stop_at_eos && self.tokenizer.ends_generation(id) {
                Some(StopReason::EndOfSequence)
            } else if request.stops_at(
                id,
                generation.tokens[..generation.tokens.len() - 1]
                    .iter()
                    .map(|t| t.id),
            ) {
                Some(StopReason::StopToken)
            } else if generation.tokens.len() >= request.max_new_tokens {
                Some(StopReason::Length)
            } else {
                None
            };
            match stop {
                Some(stop) => generation.stop = stop,
                None => next.push((cache_row, row, id)),
            }
        }
        Ok((!next.is_empty()).then_some(next))
    }
}

/// Where the prompt pass that starts at column `begin` of `rows`, left-padded to the longest,
/// ends: after as many columns as hold `pass_tokens` real tokens, within `PREFILL_SLOTS` slots
/// (or `pass_tokens`, where more), and at least one column (at most the padded width); or at
/// the padded width, where at most `tail_tokens` real tokens would be left after it.
fn pass_end(rows: &[&[TokenId]], begin: usize, pass_tokens: usize, tail_tokens: usize) -> usize {
    let width = rows.iter().map(|r| r.len()).max().unwrap_or(0);
    let max_columns = (PREFILL_SLOTS.max(pass_tokens) / rows.len().max(1)).max(1);
    // Column `c` holds a real token of every row at least `width - c` long.
    let tokens_at = |column: usize| rows.iter().filter(|r| r.len() + column >= width).count();
    let mut end = (begin + 1).min(width);
    let mut tokens = if begin < width { tokens_at(begin) } else { 0 };
    while end < width && end - begin < max_columns && tokens + tokens_at(end) <= pass_tokens {
        tokens += tokens_at(end);
        end += 1;
    }
    let left: usize = (end..width).map(tokens_at).sum();
    if left <= tail_tokens { width } else { end }
}

/// Columns `begin..end` of `rows` left-padded to the longest: column c is token c - pad of a
/// row, so every chunk keeps the left padding of the whole batch.
fn padded_columns<'a>(rows: &[&'a [TokenId]], begin: usize, end: usize) -> Vec<&'a [TokenId]> {
    let width = rows.iter().map(|r| r.len()).max().unwrap_or(0);
    rows.iter()
        .map(|r| {
            let pad = width - r.len();
            &r[begin.saturating_sub(pad)..end.saturating_sub(pad)]
        })
        .collect()
}

/// One batch being decoded by a [`LlamaGenerator`], a forward pass per
/// [`LlamaGenerator::step`], so that whoever drives it can do other work between passes (the
/// app embeds an indexing job's passages there). The batch's attention cache lives in the
/// generator, so a generator decodes one batch at a time: beginning another supersedes this
/// one, whose next step is then an error.
#[derive(Debug)]
pub struct BatchDecode {
    /// Which of the generator's batches this is.
    serial: u64,
    prompts: Vec<Vec<TokenId>>,
    request: GenerateRequest,
    stop_at_eos: bool,
    /// When set, the pass that is running stops before its next block, and the step fails.
    stop: Option<Arc<AtomicBool>>,
    /// Whether the cache is kept when the batch ends (a probe, whose prompt a batch that follows
    /// may begin with).
    keeps_prompt: bool,
    /// Length of the prefix every prompt shares, read once (for a single prompt, the part the
    /// cache held when it began).
    shared: usize,
    phase: Phase,
    rows: Vec<Generation>,
    /// Prompt index of each cache row still decoding.
    live: Vec<usize>,
    prompt_tokens: usize,
    /// Prompt tokens the cache held from the probe before (see [`TimedGeneration`]).
    cached_prompt_tokens: usize,
    decode_tokens: usize,
    started: Instant,
    prompt_seconds: f64,
}

#[derive(Debug)]
enum Phase {
    /// Reading the shared prefix on one row; `begin` is its next token.
    SharedPrefix { begin: usize },
    /// Reading the rest of every prompt, left-padded; `begin` is the next column.
    Rests { begin: usize },
    /// Every live row's next token comes from these logits.
    Decoding { logits: Vec<Vec<f32>> },
    /// Nothing left to run.
    Finished,
}

impl BatchDecode {
    /// Stops the batch's forward passes between two blocks once `flag` is set (a cancelled
    /// answer): the step whose pass was running fails, the batch is over and its cache freed.
    /// The flag is read inside passes only; whoever drives the batch checks it between steps.
    pub fn stop_when(&mut self, flag: Arc<AtomicBool>) {
        self.stop = Some(flag);
    }

    fn finish(&mut self) -> TimedGeneration {
        let total = self.started.elapsed().as_secs_f64();
        TimedGeneration {
            rows: std::mem::take(&mut self.rows),
            prompt_tokens: self.prompt_tokens,
            cached_prompt_tokens: self.cached_prompt_tokens,
            prompt_seconds: self.prompt_seconds,
            decode_tokens: self.decode_tokens,
            decode_seconds: (total - self.prompt_seconds).max(0.0),
        }
    }
}

impl Generator for LlamaGenerator {
    fn tokenizer(&self) -> &dyn Tokenizer {
        &self.tokenizer
    }

    fn context_length(&self) -> usize {
        self.model.config().context_length
    }

    fn describe(&self) -> Option<selfrag_core::GeneratorInfo> {
        Some(selfrag_core::GeneratorInfo {
            kind: selfrag_core::GeneratorKind::Local,
            model: self.path.file_name().map_or_else(
                || self.path.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            ),
            runtime: crate::device_kind(&self.device).to_string(),
            url: None,
            cache_precision: Some(self.cache_precision()),
            dummy_prefix: Some(self.tokenizer.dummy_prefix()),
        })
    }

    fn next_token_probs(
        &mut self,
        prompt: &[TokenId],
        watch_ids: &[TokenId],
    ) -> Result<Vec<f32>, BackendError> {
        let mut probe = self.begin_probe(prompt.to_vec(), watch_ids.to_vec())?;
        loop {
            if let Some(done) = self.step(&mut probe)? {
                return Ok(probe_result(done));
            }
        }
    }

    fn generate_batch(
        &mut self,
        prompts: &[Vec<TokenId>],
        request: &GenerateRequest,
    ) -> Result<Vec<Generation>, BackendError> {
        Ok(self.generate_timed(prompts, request, true)?.rows)
    }

    fn generate_batch_timed(
        &mut self,
        prompts: &[Vec<TokenId>],
        request: &GenerateRequest,
    ) -> Result<(Vec<Generation>, Option<BatchTiming>), BackendError> {
        let timed = self.generate_timed(prompts, request, true)?;
        let timing = timed.timing();
        Ok((timed.rows, Some(timing)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_softmax_is_normalised_and_ordered() {
        let lp = log_softmax(&[1.0, 2.0, 3.0, -1e9]).unwrap();
        let total: f32 = lp.iter().map(|x| x.exp()).sum();
        assert!((total - 1.0).abs() < 1e-6);
        assert!(lp[2] > lp[1] && lp[1] > lp[0]);
        assert_eq!(argmax(&lp), 2);
    }

    /// Issue 44, item 6: a NaN logit made every log-probability NaN (and token 0 the "most
    /// likely"), and the answer's scores NaN: serde saves those as `null`, which never reads
    /// back. The tiny model with NaN scales in its output matrix, as a damaged file has them,
    /// is an error that names the file, for a batch, a probe and a top-n read alike.
    #[test]
    fn a_gguf_whose_logits_are_nan_is_an_error_naming_the_file_not_nan_probabilities() {
        use std::io::{Seek, SeekFrom, Write};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("damaged.gguf");
        selfrag_fixtures::write_tiny_llama_gguf(&path).unwrap();
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        let content = candle_core::quantized::gguf_file::Content::read(&mut file).unwrap();
        // A Q8_0 block is an f16 scale and 32 8-bit values. (A NaN activation would not do:
        // quantizing it for the next matrix product turns it into 0.)
        let output = &content.tensor_infos["output.weight"];
        assert_eq!(output.ggml_dtype, candle_core::quantized::GgmlDType::Q8_0);
        let start = content.tensor_data_offset + output.offset;
        for block in 0..output.shape.elem_count() / 32 {
            file.seek(SeekFrom::Start(start + 34 * block as u64))
                .unwrap();
            file.write_all(&half::f16::NAN.to_le_bytes()).unwrap();
        }
        drop(file);

        let mut generator = LlamaGenerator::load(&path, &crate::Device::Cpu).unwrap();
        let prompt = vec![generator.tokenizer().bos_id(), 5, 6, 7];
        let request = GenerateRequest {
            max_new_tokens: 4,
            stop_ids: Vec::new(),
            markup_ids: Vec::new(),
            watch_ids: vec![3, 4],
        };
        let batch = generator
            .generate_batch(std::slice::from_ref(&prompt), &request)
            .unwrap_err();
        let probe = generator.next_token_probs(&prompt, &[3, 4]).unwrap_err();
        let top = generator.top_logprobs(&prompt, 3).unwrap_err();
        for err in [batch.to_string(), probe.to_string(), top.to_string()] {
            assert!(
                err.contains("damaged.gguf") && err.contains("not a finite number"),
                "{err}"
            );
        }
    }

    #[test]
    fn argmax_prefers_the_lowest_index_on_ties() {
        assert_eq!(argmax(&[0.5, 0.9, 0.9]), 1);
    }

    #[test]
    fn common_prefix_of_prompts() {
        let p = |ids: &[u32]| ids.to_vec();
        assert_eq!(common_prefix_len(&[]), 0);
        assert_eq!(common_prefix_len(&[p(&[1, 2, 3])]), 3);
        assert_eq!(common_prefix_len(&[p(&[1, 2, 3]), p(&[1, 2, 4, 5])]), 2);
        assert_eq!(common_prefix_len(&[p(&[1, 2]), p(&[1, 2, 3]), p(&[1])]), 1);
        assert_eq!(common_prefix_len(&[p(&[1, 2]), p(&[2, 2])]), 0);
    }

    #[test]
    fn prompt_passes_hold_a_bounded_count_of_real_tokens() {
        let passes_with_tail = |lengths: &[usize], pass_tokens: usize, tail: usize| {
            let rows: Vec<Vec<TokenId>> = lengths.iter().map(|&n| vec![7; n]).collect();
            let rows: Vec<&[TokenId]> = rows.iter().map(Vec::as_slice).collect();
            let width = lengths.iter().copied().max().unwrap_or(0);
            let mut ends = Vec::new();
            let mut begin = 0;
            while begin < width {
                let end = pass_end(&rows, begin, pass_tokens, tail);
                assert!(end > begin);
                // A tail adds at most `tail` tokens, in at most `tail` columns.
                let slots = (end - begin) * rows.len();
                assert!(
                    slots <= (PREFILL_SLOTS.max(pass_tokens) + tail * rows.len())
                        || end == begin + 1
                );
                let real: usize = padded_columns(&rows, begin, end)
                    .iter()
                    .map(|r| r.len())
                    .sum();
                assert!(real <= pass_tokens + tail || end == begin + 1);
                ends.push(end);
                begin = end;
            }
            ends
        };
        let passes =
            |lengths: &[usize], pass_tokens: usize| passes_with_tail(lengths, pass_tokens, 0);
        let (packed, candle) = (PREFILL_TOKENS, CANDLE_PREFILL_TOKENS);
        // One row: 124 or 31 tokens a pass.
        assert_eq!(passes(&[300], packed), [124, 248, 300]);
        assert_eq!(passes(&[70], candle), [31, 62, 70]);
        // While only the longest of five rows has tokens, a pass takes 24 of its columns (the
        // slots' bound); then as many tokens as it may of however many rows have them.
        let five = [100, 40, 40, 40, 40];
        assert_eq!(passes(&five, packed), [24, 48, 72, 96, 100]);
        assert_eq!(
            passes(&five, candle),
            [24, 48, 63, 69, 75, 81, 87, 93, 99, 100]
        );
        // More rows than a pass's tokens: one column at a time.
        assert_eq!(passes(&[3; 40], candle), [1, 2, 3]);
        assert_eq!(passes(&[3; 40], packed), [3]);
        assert_eq!(passes(&[], packed), Vec::<usize>::new());
        // On a GPU: 512 tokens a pass, in as many slots.
        let gpu = GPU_PREFILL_TOKENS;
        assert_eq!(passes(&[1300], gpu), [512, 1024, 1300]);
        assert_eq!(passes(&five, gpu), [100]);
        assert_eq!(passes(&[300; 5], gpu), [102, 204, 300]);
        // On the packed tiles, up to 8 tokens left join the pass before rather than run on the
        // decode kernel alone; 9 make a pass of their own (the prompt kernel's least).
        let tail = PACKED_TAIL_TOKENS;
        assert_eq!(tail, 8);
        assert_eq!(passes_with_tail(&[128], packed, tail), [128]);
        assert_eq!(passes_with_tail(&[132], packed, tail), [132]);
        assert_eq!(passes_with_tail(&[133], packed, tail), [124, 133]);
        assert_eq!(passes_with_tail(&[252], packed, tail), [124, 252]);
        // Its last 4 columns hold 20 tokens: a pass of its own.
        assert_eq!(passes_with_tail(&five, packed, tail), [24, 48, 72, 96, 100]);
        // Two rows with 3 columns left (6 tokens) join; three rows with 3 left (9) do not.
        assert_eq!(passes_with_tail(&[65, 65], packed, tail), [65]);
        assert_eq!(passes_with_tail(&[44, 44, 44], packed, tail), [41, 44]);
    }
}
