//! llama.cpp's native HTTP API, as far as the generator uses it: `/props`, `/tokenize` and
//! `/completion` with token-id prompts, greedy decoding and `n_probs`, streamed as server-sent
//! events so that a row can stop at any token and a cut connection keeps what arrived.
//!
//! With `n_probs` (and `post_sampling_probs` off) llama-server returns, for each generated
//! token, the `n_probs` most likely tokens with their log-probabilities taken from a softmax of
//! the raw logits over the whole vocabulary: exact values, not sampler-adjusted ones.

use serde_json::{Value, json};

use selfrag_core::TokenId;

use crate::RemoteError;
use crate::http::{Http, events, tokenized};
use crate::stream::{StreamEnd, StreamEvent, TokenProbs, follow};

/// llama.cpp's native API on one server.
pub(crate) struct Client {
    http: Http,
}

/// What `/props` says about the server.
#[derive(Debug, Clone)]
pub(crate) struct Props {
    /// Tokens of context each request (slot) has.
    pub n_ctx: usize,
    /// The model file or alias the server loaded.
    pub model: String,
    /// llama.cpp's build, e.g. `b6800-abc1234`.
    pub build: String,
    /// Requests decoded at once.
    pub slots: usize,
}

/// The sampling settings of every request: greedy, no penalties, prompts given as ids.
fn completion_body(prompt: &[TokenId], n_predict: usize, n_probs: usize, stream: bool) -> Value {
    json!({
        "logit_bias": [],
        "prompt": prompt,
        "n_predict": n_predict,
        "n_probs": n_probs,
        "post_sampling_probs": false,
        "temperature": -1.0,
        "top_k": 0,
        "repeat_penalty": 1.0,
        "repeat_last_n": 0,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "dry_multiplier": 0.0,
        "cache_prompt": true,
        "return_tokens": true,
        "stream": stream,
    })
}

impl Client {
    pub fn new(http: Http) -> Self {
        Self { http }
    }

    pub fn url(&self) -> &str {
        self.http.url()
    }

    pub fn http(&self) -> &Http {
        &self.http
    }

    pub fn props(&self) -> Result<Props, RemoteError> {
        let response = self
            .http
            .get("/props")?
            .ok_or_else(|| RemoteError::NotAServer {
                url: self.url().to_owned(),
                what: "it has no /props".into(),
            })?;
        let props = self.http.json(response, "/props")?;
        let n_ctx = props
            .pointer("/default_generation_settings/n_ctx")
            .and_then(Value::as_u64)
            .ok_or_else(|| RemoteError::NotAServer {
                url: self.url().to_owned(),
                what: "/props has no default_generation_settings.n_ctx".into(),
            })?;
        let text = |key: &str| {
            props
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let model = [text("model_alias"), text("model_path")]
            .into_iter()
            .find(|s| !s.is_empty())
            .unwrap_or_default();
        Ok(Props {
            n_ctx: usize::try_from(n_ctx).unwrap_or(usize::MAX),
            model,
            build: text("build_info"),
            slots: props
                .get("total_slots")
                .and_then(Value::as_u64)
                .map_or(1, |n| usize::try_from(n).unwrap_or(1)),
        })
    }

    /// The server's tokenization of `text`, without BOS, `[Fully supported]` written in it read
    /// as the special token (as the OpenAI-compatible client's `tokenize` reads it).
    pub fn tokenize(&self, text: &str) -> Result<Vec<TokenId>, RemoteError> {
        let body = json!({ "content": text, "add_special": false, "parse_special": true });
        let reply = self
            .http
            .json(self.http.post("/tokenize", &body)?, "/tokenize")?;
        tokenized(self.url(), &reply)
    }

    /// The `n_probs` most likely tokens after `prompt` (one position, not streamed); `id` and
    /// `logprob` are those of the most likely one.
    ///
    /// The server drops the probabilities of a token that leaves an incomplete UTF-8
    /// character, so the token it *samples* here is kept off `byte_ids` by a logit bias. The
    /// bias is a sampler: the probabilities it returns come from the raw logits, untouched by
    /// it, and the most likely token is read from them.
    pub fn next_position(
        &self,
        prompt: &[TokenId],
        n_probs: usize,
        byte_ids: &[TokenId],
    ) -> Result<TokenProbs, RemoteError> {
        let mut body = completion_body(prompt, 1, n_probs.max(1), false);
        body["logit_bias"] = byte_ids.iter().map(|&id| json!([id, false])).collect();
        let reply = self
            .http
            .json(self.http.post("/completion", &body)?, "/completion")?;
        let first = reply
            .get("completion_probabilities")
            .and_then(Value::as_array)
            .and_then(|p| p.first())
            .cloned()
            .ok_or_else(|| RemoteError::NoProbabilities {
                url: self.url().to_owned(),
                what: "/completion answered without completion_probabilities".into(),
            })?;
        TokenProbs::most_likely(self.token_probs(first)?.top_logprobs).ok_or_else(|| {
            RemoteError::NoProbabilities {
                url: self.url().to_owned(),
                what: "/completion answered with no alternatives".into(),
            }
        })
    }

    fn token_probs(&self, value: Value) -> Result<TokenProbs, RemoteError> {
        serde_json::from_value(value).map_err(|e| RemoteError::NoProbabilities {
            url: self.url().to_owned(),
            what: format!("unexpected completion_probabilities: {e}"),
        })
    }

    /// Greedy continuation of `prompt`, streamed (see [`follow`]).
    pub fn stream(
        &self,
        prompt: &[TokenId],
        n_predict: usize,
        n_probs: usize,
        byte_ids: &[TokenId],
        on_token: impl FnMut(TokenProbs) -> bool,
    ) -> Result<StreamEnd, RemoteError> {
        let response = self.http.post(
            "/completion",
            &completion_body(prompt, n_predict, n_probs, true),
        )?;
        let events = events(self.url(), response).filter_map(|chunk| match chunk {
            Ok(chunk) => self.stream_event(&chunk).transpose(),
            Err(e) => Some(Err(e)),
        });
        follow(
            self.url(),
            prompt,
            n_predict,
            events,
            |prefix| self.next_position(prefix, n_probs, byte_ids),
            on_token,
        )
    }

    /// One streamed event; `None` for one that carries no token (the start, progress).
    fn stream_event(&self, chunk: &Value) -> Result<Option<StreamEvent>, RemoteError> {
        if let Some(error) = chunk.get("error") {
            return Err(RemoteError::Interrupted {
                url: self.url().to_owned(),
                message: format!("the server reported {error}"),
            });
        }
        let generated = chunk
            .get("tokens_predicted")
            .and_then(Value::as_u64)
            .and_then(|n| usize::try_from(n).ok());
        let probs = chunk
            .get("completion_probabilities")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if chunk.get("stop").and_then(Value::as_bool) == Some(true) {
            // The last event carries no token; the ones it counts beyond those sent are read.
            let end = match chunk.get("stop_type").and_then(Value::as_str) {
                Some("eos") => StreamEnd::Eos,
                _ => StreamEnd::Limit,
            };
            return Ok(Some(StreamEvent {
                positions: Vec::new(),
                generated,
                end: Some(end),
            }));
        }
        let has_tokens = chunk
            .get("tokens")
            .and_then(Value::as_array)
            .is_some_and(|t| !t.is_empty());
        if probs.is_empty() && !has_tokens {
            return Ok(None);
        }
        let (Some(generated), [position]) = (generated, probs.as_slice()) else {
            return Err(RemoteError::NoProbabilities {
                url: self.url().to_owned(),
                what: format!("a streamed token came without its count and probabilities: {chunk}"),
            });
        };
        Ok(Some(StreamEvent {
            positions: vec![self.token_probs(position.clone())?],
            generated: Some(generated),
            end: None,
        }))
    }
}
