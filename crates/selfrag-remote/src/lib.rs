//! The Self-RAG generator on an inference server: llama.cpp's `llama-server` (native API), or
//! any OpenAI-compatible completions server that returns token ids and exact log-probabilities
//! (vLLM, llama-server's `/v1`). These run the model on whatever the user's machine or lab has
//! (CUDA, Metal, Vulkan, ROCm, tensor-parallel GPUs, CPU).
//!
//! [`ServerGenerator`] is a peer of the local candle generator behind selfrag-core's
//! `Generator` trait. Three rules make its traces equal to the local ones:
//! - **Prompts travel as token ids** built by the local GGUF tokenizer with special tokens off.
//!   A server given text turns `[Fully supported]` written in a document into the reflection
//!   token: llama.cpp matches a GGUF's user-defined tokens even with `parse_special` off (the
//!   tests show it), and Hugging Face tokenizers (vLLM) always match added tokens. Given ids,
//!   it reads exactly what the local model reads.
//! - **Probabilities are exact.** Every generated position comes with the server's `top_n` most
//!   likely tokens, from a softmax of the raw logits over the whole vocabulary. Where the
//!   algorithm reads the watched ids (the first position, and every position whose token is
//!   itself watched) and one of them is not among those `top_n`, it is read exactly: with more
//!   alternatives where the server gives any number (llama-server), else by scoring each as the
//!   last token of a prompt (vLLM's `prompt_logprobs`); a server that can do neither is refused
//!   when it is checked. No value is ever estimated or made up.
//! - **Checked before use.** [`ServerGenerator::connect`] asks the server for each of the 16
//!   reflection tokens and requires each to be one token with the local tokenizer's id, and
//!   compares a plain sentence's ids, so a server running another model fails at once, naming
//!   the URL.
//! - **Every reply is bounded and its numbers checked** where it is read (`reply`): an event
//!   line up to 8 MiB, a reply up to 16 MiB; token ids inside the vocabulary, log-probabilities
//!   finite and at most 0. A broken or hostile server is refused, naming it, before any of its
//!   numbers reaches a score ([`read_reply`] runs the same readers over bytes, for fuzzing).
//!
//! The K candidates of a step are sent at once, one streamed request each; the server decodes
//! them together (llama-server: start it with `-np K` or more; vLLM batches by itself) and
//! keeps each prompt's prefix in its cache.
//!
//! Which API a URL speaks: one ending in `/v1` is OpenAI-compatible; any other is asked for
//! llama.cpp's `/props`, and without it for `/v1/models`.
//!
//! The embedder may run on a server too: [`ServerEmbedder`] speaks OpenAI's `/v1/embeddings`
//! (see `embeddings`).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use selfrag_core::{
    BackendError, DummyPrefix, GenerateRequest, GeneratedToken, Generation, Generator,
    GeneratorInfo, GeneratorKind, REFLECTION_TOKENS, StopReason, TokenId, Tokenizer,
};
use selfrag_models::{GgufTokenizer, TokenType};

mod embeddings;
mod error;
mod http;
mod llama_server;
mod openai;
mod reply;
mod server_url;
mod stream;

pub use embeddings::{
    EmbedderServerConfig, EmbedderServerError, EmbedderServerInfo, ServerEmbedder,
    TEXTS_PER_REQUEST,
};
pub use error::RemoteError;
use http::Http;
use openai::ExactRead;
pub use reply::{ReplyKind, ReplyNumbers, read_reply};
pub use server_url::{ServerUrl, check_url};
use stream::{StreamEnd, TokenProbs};

/// Where the server is and how to ask it.
#[derive(Clone, PartialEq)]
pub struct ServerConfig {
    /// The server's base URL, e.g. `http://127.0.0.1:8080`.
    pub url: String,
    /// Sent as `Authorization: Bearer …` (llama-server's and vLLM's `--api-key`); never
    /// logged.
    pub api_key: Option<String>,
    /// The model to ask an OpenAI-compatible server for; `None`: the one it serves.
    pub model: Option<String>,
    /// Alternatives asked for at every generated position.
    pub top_n: usize,
    /// How long a reply may stay silent.
    pub timeout: Duration,
}

impl ServerConfig {
    /// A server at `url`, no key, 20 alternatives per position, 5 minutes of silence at most.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            api_key: None,
            model: None,
            top_n: 20,
            timeout: Duration::from_secs(300),
        }
    }
}

impl std::fmt::Debug for ServerConfig {
    /// The key is redacted.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConfig")
            .field("url", &self.url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("model", &self.model)
            .field("top_n", &self.top_n)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// The API a server is spoken to through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerApi {
    /// llama.cpp's own (`/completion` with `n_probs`).
    LlamaCpp,
    /// OpenAI-compatible completions (`/v1/completions` with `logprobs`).
    OpenAi,
}

/// What the server said about itself when it was checked.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerInfo {
    /// The URL requests go to (an OpenAI-compatible API's ends in `/v1`).
    pub url: String,
    pub api: ServerApi,
    /// The model file, alias or name it serves.
    pub model: String,
    /// The server software and version, e.g. `llama.cpp b6800-abc1234` or `vLLM 0.11.0`,
    /// and the API when it is not the server's own.
    pub runtime: String,
    /// Tokens of context per request.
    pub context_length: usize,
    /// Requests it decodes at once, where it says (llama-server).
    pub slots: Option<usize>,
    /// How long the check's first request took, in milliseconds.
    pub round_trip_ms: f64,
}

/// The server's API, and how it reads a probability its alternatives left out.
enum Api {
    LlamaCpp(llama_server::Client),
    OpenAi {
        client: openai::Client,
        exact: ExactRead,
    },
}

impl Api {
    /// The server's tokenization of `text` without BOS, Self-RAG tokens written in it read as
    /// the tokens.
    fn tokenize(&self, text: &str) -> Result<Vec<TokenId>, RemoteError> {
        match self {
            Api::LlamaCpp(c) => c.tokenize(text),
            Api::OpenAi { client, .. } => client.tokenize(text),
        }
    }

    fn next_position(
        &self,
        prefix: &[TokenId],
        width: usize,
        byte_ids: &[TokenId],
    ) -> Result<TokenProbs, RemoteError> {
        match self {
            Api::LlamaCpp(c) => c.next_position(prefix, width, byte_ids),
            Api::OpenAi { client, .. } => client.next_position(prefix, width, byte_ids),
        }
    }

    fn stream(
        &self,
        prompt: &[TokenId],
        limit: usize,
        top_n: usize,
        byte_ids: &[TokenId],
        on_token: impl FnMut(TokenProbs) -> bool,
    ) -> Result<StreamEnd, RemoteError> {
        match self {
            Api::LlamaCpp(c) => c.stream(prompt, limit, top_n, byte_ids, on_token),
            Api::OpenAi { client, .. } => client.stream(prompt, limit, top_n, byte_ids, on_token),
        }
    }
}

/// The generator on a server; see the module documentation.
pub struct ServerGenerator {
    api: Api,
    tokenizer: GgufTokenizer,
    /// The vocabulary's byte tokens and the byte-level BPE pieces that are part of a UTF-8
    /// character only (see `Client::next_position`).
    byte_ids: Vec<TokenId>,
    top_n: usize,
    info: ServerInfo,
    /// Set by the caller to stop: every open request is closed at its next token, so the
    /// server stops decoding it.
    cancel: Option<Arc<AtomicBool>>,
}

impl std::fmt::Debug for ServerGenerator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerGenerator")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

/// The second, wider look at a position whose watched ids are not among the first `top_n`:
/// reflection tokens the model does not expect there are usually still within it.
const WIDE_TOP_N: usize = 1024;

/// A plain sentence whose ids must be the same on both sides: words, digits, punctuation and
/// non-ASCII text. No reflection token written as text: llama.cpp's tokenizer turns the
/// Self-RAG tokens (user-defined tokens of the GGUF) into their ids even with `parse_special`
/// off, which is exactly why prompts are sent as ids.
const TOKENIZER_PROBE: &str = "Self-RAG cites 3 sources, naïvely — écrit \"as plain text\".";

impl ServerGenerator {
    /// Connects to the server in `config` and checks that it serves the model whose
    /// vocabulary is in the GGUF file `tokenizer_gguf` (only its header is read).
    pub fn connect(config: &ServerConfig, tokenizer_gguf: &Path) -> Result<Self, RemoteError> {
        check_url(&config.url)?;
        let (tokenizer, file_context) = GgufTokenizer::with_context_length(tokenizer_gguf)
            .map_err(|e| RemoteError::Tokenizer {
                path: tokenizer_gguf.display().to_string(),
                message: e.to_string(),
            })?;
        let http = Http::new(&config.url, config.api_key.clone(), config.timeout);
        let started = Instant::now();
        let (api, mut info) = open(http, config.model.as_deref(), tokenizer.vocab_size())?;
        info.round_trip_ms = started.elapsed().as_secs_f64() * 1000.0;
        if info.context_length == 0 {
            info.context_length = file_context;
        }
        let url = info.url.clone();
        for token in REFLECTION_TOKENS {
            let ours = tokenizer.token_to_id(token);
            let theirs = api.tokenize(token)?;
            if theirs.len() != 1 {
                return Err(RemoteError::MissingReflectionToken {
                    url,
                    token: token.to_owned(),
                    found: format!("the server splits it into ids {theirs:?}"),
                });
            }
            if ours != Some(theirs[0]) {
                return Err(RemoteError::VocabularyMismatch {
                    url,
                    tokenizer: tokenizer_gguf.display().to_string(),
                    detail: format!(
                        "{token} is id {} on the server and {} here",
                        theirs[0],
                        ours.map_or("missing".to_owned(), |id| id.to_string())
                    ),
                });
            }
        }
        let ours = tokenizer.encode(TOKENIZER_PROBE, false);
        let theirs = api.tokenize(TOKENIZER_PROBE)?;
        if ours != theirs {
            return Err(RemoteError::VocabularyMismatch {
                url,
                tokenizer: tokenizer_gguf.display().to_string(),
                detail: format!("{TOKENIZER_PROBE:?} is {theirs:?} there and {ours:?} here"),
            });
        }
        // Byte tokens, and the byte-level BPE pieces that are part of a UTF-8 character only
        // (`ðŁ`, F0 9F): the tokens whose probabilities the server holds back.
        let byte_ids: Vec<TokenId> = (0..tokenizer.vocab_size())
            .filter_map(|id| TokenId::try_from(id).ok())
            .filter(|&id| {
                tokenizer.token_type(id) == Some(TokenType::Byte)
                    || std::str::from_utf8(&tokenizer.token_bytes(id)).is_err()
            })
            .collect();
        let api = match api {
            Api::OpenAi { client, .. } => {
                let exact = exact_read(&client, &tokenizer, &byte_ids)?;
                if exact == ExactRead::PromptLogprobs {
                    // Scoring a token appends it to the prompt: one position is kept free.
                    info.context_length = info.context_length.saturating_sub(1);
                }
                Api::OpenAi { client, exact }
            }
            native => native,
        };
        tracing::info!(%url, model = %info.model, runtime = %info.runtime, "generator server checked");
        Ok(Self {
            byte_ids,
            info,
            api,
            tokenizer,
            top_n: config.top_n.max(1),
            cancel: None,
        })
    }

    /// The flag that stops the requests in flight (see the field); `None`: never stopped.
    pub fn set_cancel(&mut self, cancel: Option<Arc<AtomicBool>>) {
        self.cancel = cancel;
    }

    fn cancelled(&self) -> bool {
        self.cancel
            .as_ref()
            .is_some_and(|c| c.load(Ordering::Acquire))
    }

    /// Tokenizes prompts with the dummy prefix placed as `dummy_prefix` says from the next
    /// request on: the server reads the ids built here (see [`DummyPrefix`]).
    pub fn set_dummy_prefix(&mut self, dummy_prefix: DummyPrefix) {
        self.tokenizer.set_dummy_prefix(dummy_prefix);
    }

    /// What the server said about itself.
    pub fn info(&self) -> &ServerInfo {
        &self.info
    }

    fn check_prompt(&self, prompt: &[TokenId], max_new_tokens: usize) -> Result<(), RemoteError> {
        if prompt.len().saturating_add(max_new_tokens) > self.info.context_length {
            return Err(RemoteError::ContextOverflow {
                url: self.info.url.clone(),
                prompt_tokens: prompt.len(),
                max_new_tokens,
                context_length: self.info.context_length,
            });
        }
        Ok(())
    }

    /// Exact probabilities of `ids` after `prefix`. `first_look` is the position as already
    /// read with `top_n` alternatives, if it was; else it is read first. Where some of `ids`
    /// are not among them: llama-server is asked for the top [`WIDE_TOP_N`], then the whole
    /// vocabulary; an OpenAI-compatible server for what its checked [`ExactRead`] gives. Every
    /// step is exact; the wider ones only cost a larger reply (the whole of a 32k vocabulary is
    /// about 2 MB of JSON).
    fn probabilities_after(
        &self,
        prefix: &[TokenId],
        ids: &[TokenId],
        first_look: Option<&TokenProbs>,
    ) -> Result<Vec<f32>, RemoteError> {
        let vocab = self.tokenizer.vocab_size();
        let looked;
        let first = match first_look {
            Some(position) => position,
            None => {
                looked = self
                    .api
                    .next_position(prefix, self.top_n.min(vocab), &self.byte_ids)?;
                &looked
            }
        };
        if let Some(found) = first.lookup(ids) {
            return Ok(found);
        }
        if let Api::OpenAi {
            client,
            exact: ExactRead::PromptLogprobs,
        } = &self.api
        {
            return client
                .score(prefix, ids)?
                .ok_or_else(|| RemoteError::NoProbabilities {
                    url: self.info.url.clone(),
                    what: format!("it stopped scoring prompts (prompt_logprobs) for {ids:?}"),
                });
        }
        let mut widths: Vec<usize> = [WIDE_TOP_N, vocab]
            .into_iter()
            .map(|w| w.min(vocab))
            .collect();
        widths.dedup();
        for width in widths.into_iter().filter(|&w| w > self.top_n) {
            let position = self.api.next_position(prefix, width, &self.byte_ids)?;
            if let Some(found) = position.lookup(ids) {
                return Ok(found);
            }
        }
        Err(RemoteError::NoProbabilities {
            url: self.info.url.clone(),
            what: format!(
                "asked for all {vocab} tokens' probabilities, it left out some of {ids:?}"
            ),
        })
    }

    /// One row of a batch, streamed.
    fn generate_row(
        &self,
        prompt: &[TokenId],
        request: &GenerateRequest,
    ) -> Result<Generation, RemoteError> {
        self.check_prompt(prompt, request.max_new_tokens)?;
        let mut positions: Vec<TokenProbs> = Vec::new();
        let mut stop = StopReason::Length;
        if request.max_new_tokens > 0 {
            let end = self.api.stream(
                prompt,
                request.max_new_tokens,
                self.top_n,
                &self.byte_ids,
                |position: TokenProbs| {
                    let id = position.id;
                    positions.push(position);
                    if self.cancelled() {
                        false
                    } else if self.tokenizer.ends_generation(id) {
                        stop = StopReason::EndOfSequence;
                        false
                    } else if request
                        .stops_at(id, positions[..positions.len() - 1].iter().map(|p| p.id))
                    {
                        stop = StopReason::StopToken;
                        false
                    } else {
                        positions.len() < request.max_new_tokens
                    }
                },
            )?;
            // llama-server ends a sequence at EOS without always sending the EOS position:
            // read it, so the row ends with its EOS token as the local generator's does.
            let ends = |id| self.tokenizer.ends_generation(id);
            if end == StreamEnd::Eos && positions.last().is_none_or(|p| !ends(p.id)) {
                let mut prefix = prompt.to_vec();
                prefix.extend(positions.iter().map(|p| p.id));
                let last = self
                    .api
                    .next_position(&prefix, self.top_n, &self.byte_ids)?;
                // Only the model's own end is taken; a server that stopped at another token
                // (a generation config's extra stop ids) wrote a row the local generator
                // would not have, and saying so beats a made-up ending.
                if !ends(last.id) {
                    return Err(RemoteError::Interrupted {
                        url: self.info.url.clone(),
                        message: format!(
                            "it stopped after {} tokens where the model's most likely next \
                             token is {}, not the end of sequence: start it without extra \
                             stop tokens",
                            positions.len(),
                            last.id
                        ),
                    });
                }
                positions.push(last);
                stop = StopReason::EndOfSequence;
            }
        }
        let mut tokens = Vec::with_capacity(positions.len());
        let mut prefix = prompt.to_vec();
        for (i, position) in positions.iter().enumerate() {
            // Read where the algorithm reads: the first position (IsRel) and every watched
            // token's own position (the IsSup and IsUse groups).
            let needed = i == 0 || request.watch_ids.contains(&position.id);
            let watched = match position.lookup(&request.watch_ids) {
                Some(found) => found,
                None if needed => {
                    self.probabilities_after(&prefix, &request.watch_ids, Some(position))?
                }
                None => Vec::new(),
            };
            tokens.push(GeneratedToken {
                id: position.id,
                logprob: position.logprob,
                watched,
            });
            prefix.push(position.id);
        }
        Ok(Generation { tokens, stop })
    }
}

/// The server at `http`'s URL, through the API it speaks (see the module docs), and what it
/// says about itself; `context_length` 0 where it does not say. Its replies' token ids must
/// lie in a vocabulary of `vocab` tokens.
fn open(http: Http, model: Option<&str>, vocab: usize) -> Result<(Api, ServerInfo), RemoteError> {
    let openai = |api: Http| -> Result<(Api, ServerInfo), RemoteError> {
        let (client, models) = openai::Client::connect(api, model, vocab)?;
        let info = ServerInfo {
            url: client.url().to_owned(),
            api: ServerApi::OpenAi,
            model: models.model,
            runtime: format!("{}, OpenAI-compatible API", models.runtime),
            context_length: models.context_length.unwrap_or(0),
            slots: None,
            round_trip_ms: 0.0,
        };
        // Checked once the tokenizer is known (`exact_read`).
        let exact = ExactRead::AnyWidth;
        Ok((Api::OpenAi { client, exact }, info))
    };
    if http.url().ends_with("/v1") {
        return openai(http);
    }
    let native = llama_server::Client::new(http, vocab);
    match native.props() {
        Ok(props) => {
            let info = ServerInfo {
                url: native.url().to_owned(),
                api: ServerApi::LlamaCpp,
                model: props.model,
                runtime: format!("llama.cpp {}", props.build),
                context_length: props.n_ctx,
                slots: Some(props.slots),
                round_trip_ms: 0.0,
            };
            Ok((Api::LlamaCpp(native), info))
        }
        Err(RemoteError::NotAServer { url, what }) => {
            let v1 = native.http().with_base(&format!("{url}/v1"));
            openai(v1).map_err(|e| match e {
                RemoteError::NotAServer { what: also, .. } => RemoteError::NotAServer {
                    url,
                    what: format!("{what}, and {also}"),
                },
                other => other,
            })
        }
        Err(e) => Err(e),
    }
}

/// How an OpenAI-compatible server reads exactly a probability its `logprobs` alternatives
/// left out, tried on a short prompt: it scores prompts (vLLM), or it gives the whole
/// vocabulary as alternatives (llama-server). A server that does neither is refused: Self-RAG
/// would have to guess the reflection tokens it leaves out.
fn exact_read(
    client: &openai::Client,
    tokenizer: &GgufTokenizer,
    byte_ids: &[TokenId],
) -> Result<ExactRead, RemoteError> {
    let mut prefix = vec![tokenizer.bos_id()];
    prefix.extend(tokenizer.encode(TOKENIZER_PROBE, false));
    let probe = [tokenizer.eos_id()];
    if client.score(&prefix, &probe)?.is_some() {
        return Ok(ExactRead::PromptLogprobs);
    }
    let vocab = tokenizer.vocab_size();
    let refused = |what: String| RemoteError::NoProbabilities {
        url: client.url().to_owned(),
        what,
    };
    match client.next_position(&prefix, vocab, byte_ids) {
        Ok(position) if position.top_logprobs.len() >= vocab => Ok(ExactRead::AnyWidth),
        Ok(position) => Err(refused(format!(
            "it does not score prompts (prompt_logprobs) and gave {} of the {vocab} alternatives \
             asked for",
            position.top_logprobs.len()
        ))),
        Err(RemoteError::Failed { status, .. }) => Err(refused(format!(
            "it does not score prompts (prompt_logprobs) and refused to give all {vocab} \
             alternatives (HTTP status {status})"
        ))),
        Err(e) => Err(e),
    }
}

impl Generator for ServerGenerator {
    fn tokenizer(&self) -> &dyn Tokenizer {
        &self.tokenizer
    }

    fn context_length(&self) -> usize {
        self.info.context_length
    }

    fn describe(&self) -> Option<GeneratorInfo> {
        Some(GeneratorInfo {
            kind: GeneratorKind::Server,
            model: self.info.model.clone(),
            runtime: self.info.runtime.clone(),
            url: Some(self.info.url.clone()),
            // The server keeps its cache as it was started; nothing here can tell how.
            cache_precision: None,
            dummy_prefix: self.tokenizer.dummy_prefix_in_force(),
        })
    }

    fn next_token_probs(
        &mut self,
        prompt: &[TokenId],
        watch_ids: &[TokenId],
    ) -> Result<Vec<f32>, BackendError> {
        self.check_prompt(prompt, 1)?;
        Ok(self.probabilities_after(prompt, watch_ids, None)?)
    }

    fn generate_batch(
        &mut self,
        prompts: &[Vec<TokenId>],
        request: &GenerateRequest,
    ) -> Result<Vec<Generation>, BackendError> {
        let this = &*self;
        let rows: Vec<Result<Generation, RemoteError>> = std::thread::scope(|scope| {
            let handles: Vec<_> = prompts
                .iter()
                .map(|prompt| scope.spawn(move || this.generate_row(prompt, request)))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(RemoteError::Interrupted {
                            url: this.info.url.clone(),
                            message: "a request thread panicked".into(),
                        })
                    })
                })
                .collect()
        });
        Ok(rows.into_iter().collect::<Result<Vec<_>, _>>()?)
    }
}
