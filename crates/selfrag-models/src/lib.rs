//! # selfrag-models: local inference with candle
//!
//! This crate runs model weights: the Self-RAG generator (a quantized Llama read from one GGUF
//! file, implementing [`selfrag_core::Generator`]), the tokenizer built from that file's own
//! metadata, the Contriever/BERT passage embedder, and the choice of device. Where model files
//! come from and live is selfrag-hub's; the tiny test models are selfrag-fixtures'.
//!
//! It must not depend on tokio, LanceDB, Tauri, selfrag-hub, selfrag-index or selfrag-engine:
//! it is called synchronously from the engine's model thread, and knows nothing of documents,
//! downloads or the UI.
//!
//! ## Tour
//! - [`LlamaGenerator`]: `load(path, device)`, then the `Generator` methods: exact softmax
//!   probabilities of watched ids (the reflection tokens), greedy decoding with stop rules, all
//!   rows of a batch decoded together with their shared prompt prefix run once (and the
//!   retrieve decision's prompt, which the batch begins with, not read again).
//! - [`QuantizedLlama`]: the batched quantized Llama under it (per-row KV cache, positions and
//!   attention masks), in candle's style; on AVX-512 VNNI CPUs its Q4_K and Q6_K matrices are
//!   multiplied in `packed`, compact SIMD tiles of this crate, or by candle where its kernels
//!   time faster at load ([`KernelChoice`]); on the CPU its attention in `cpu_attention`,
//!   its KV cache in 8-bit blocks (or f16) where the CPU widens them in registers
//!   (`cache_lines`, [`CachePrecision`]), its cache rows forked, dropped and grown in `cache_rows`, and the
//!   feed-forward gate in `packed` where its matrices are; everything else by candle.
//! - [`GgufTokenizer`]: the tokenizer from `tokenizer.ggml.*`, SentencePiece (Llama-2) or
//!   byte-level BPE with llama.cpp's pre-tokenizers (Llama-3, Qwen2, Tekken, …); plain text
//!   never yields a reflection token.
//! - [`BertEmbedder`]: mean-pooled, unnormalised embeddings (Contriever's recipe); on the CPU
//!   through `bert`, BERT with the element-wise passes fused between candle's matmuls.
//! - [`pick_device`]: a `DeviceChoice` made a candle device, falling back to the CPU.
//!
//! ```no_run
//! use selfrag_core::{Generator, Tokenizer};
//! use selfrag_models::{LlamaGenerator, pick_device};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let device = pick_device(selfrag_core::DeviceChoice::Auto);
//! let mut model = LlamaGenerator::load("selfrag_llama2_7b.q4_k_m.gguf".as_ref(), &device)?;
//! let tokenizer = model.tokenizer();
//! let mut prompt = vec![tokenizer.bos_id()];
//! prompt.extend(tokenizer.tokenize("### Instruction:\nWho wrote Hamlet?\n\n### Response:\n")?);
//! let ids: Vec<u32> = ["[Retrieval]", "[No Retrieval]"]
//!     .iter()
//!     .filter_map(|t| tokenizer.token_id(t))
//!     .collect();
//! let probs = model.next_token_probs(&prompt, &ids)?;
//! # let _ = probs;
//! # Ok(())
//! # }
//! ```

mod bert;
mod block_products;
mod cache_lines;
mod cache_rows;
mod cpu_attention;
mod cpu_kernels;
mod decode_prefetch;
mod device;
mod embedder;
mod error;
mod generator;
mod gguf_header;
mod gguf_tokenizer;
mod head_layout;
mod int8;
mod kernel_memory;
mod llama;
mod mapped;
mod packed;
mod read_rate;
mod strided;
#[cfg(test)]
mod test_values;

pub use candle_core::Device;
pub use cpu_kernels::{
    CANDLE_MARGIN, CANDLE_PREFILL_PASSES, CandleOnly, CpuKernels, DECODE_STEPS, KERNELS_ENV,
    KernelChoice, KernelPolicy, PACKED_PREFILL_PASSES, ProductTimes,
};
pub use decode_prefetch::{
    PREFETCH_ENV, PrefetchChoice, PrefetchDefault, PrefetchPolicy, PrefetchTimings,
};
pub use device::{compiled_devices, device_kind, pick_device};
pub use embedder::{BertEmbedder, EmbedBatching};
pub use error::ModelError;
pub use generator::{BatchDecode, LlamaGenerator, TimedGeneration, probe_result};
pub use gguf_tokenizer::{GgufTokenizer, TokenType, TokenizerKind};
pub use int8::cpu_supported as int8_embedder_available;
pub use kernel_memory::{CpuModel, KERNEL_MEMORY_FILE, KernelMemory};
pub use llama::{
    KV_CACHE_ENV, LlamaConfig, QuantizedLlama, cache_precision_from_env, default_cache_precision,
};
pub use mapped::MappedGguf;
pub use packed::{PackedSimd, SIMD_ENV, cpu_supported as packed_kernels_available, packed_simd};
pub use read_rate::read_rate;
/// The numerics choices, defined in selfrag-core (the trace records them) and re-exported here.
pub use selfrag_core::{CachePrecision, DummyPrefix, EmbedderPrecision};
