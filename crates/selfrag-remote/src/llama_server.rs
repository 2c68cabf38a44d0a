//! llama.cpp's native HTTP API, as far as the generator uses it: `/props`, `/tokenize` and
//! `/completion` with token-id prompts, greedy decoding and `n_probs`, streamed as server-sent
//! events so that a row can stop at any token and a cut connection keeps what arrived.
//!
//! With `n_probs` (and `post_sampling_probs` off) llama-server returns, for each generated
//! token, the `n_probs` most likely tokens with their log-probabilities taken from a softmax of
//! the raw logits over the whole vocabulary: exact values, not sampler-adjusted ones.

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Value, json};

use selfrag_core::TokenId;

use crate::RemoteError;
use crate::http::{Http, tokenized};
use crate::reply::{ReplyCheck, ReportedError, WirePosition, events, parse_json};
use crate::stream::{StreamEnd, StreamEvent, TokenProbs, follow};

/// llama.cpp's native API on one server.
pub(crate) struct Client {
    http: Http,
    /// The model's vocabulary size, which every token id of a reply must be below.
    vocab: usize,
}

/// What the generator reads of a `/completion` reply, streamed event or whole.
#[derive(Debug, Deserialize)]
struct CompletionReply {
    error: Option<ReportedError>,
    tokens_predicted: Option<u64>,
    completion_probabilities: Option<Vec<WirePosition>>,
    stop: Option<bool>,
    stop_type: Option<String>,
    tokens: Option<Vec<IgnoredAny>>,
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
    /// The API at `http`'s URL, serving a model of `vocab` tokens.
    pub fn new(http: Http, vocab: usize) -> Self {
        Self { http, vocab }
    }

    fn check(&self) -> ReplyCheck<'_> {
        ReplyCheck {
            url: self.url(),
            vocab: self.vocab,
        }
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
            .body(self.http.post("/completion", &body)?, "/completion")?;
        completion_position(self.check(), &reply)
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
        let events = events(self.url(), response.into_reader()).filter_map(|data| match data {
            Ok(data) => stream_event(self.check(), &data).transpose(),
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
}

/// The position of a whole `/completion` reply for one token, its most likely alternative as
/// its token (see [`Client::next_position`]).
pub(crate) fn completion_position(
    check: ReplyCheck<'_>,
    bytes: &[u8],
) -> Result<TokenProbs, RemoteError> {
    let no_probabilities = |what: String| RemoteError::NoProbabilities {
        url: check.url.to_owned(),
        what,
    };
    let reply: CompletionReply =
        parse_json(check.url, bytes, "the reply to /completion").map_err(no_probabilities)?;
    if let Some(error) = &reply.error {
        return Err(check.reported(error));
    }
    let first = reply
        .completion_probabilities
        .and_then(|p| p.into_iter().next())
        .ok_or_else(|| {
            no_probabilities("/completion answered without completion_probabilities".into())
        })?;
    TokenProbs::most_likely(check.position(first)?.top_logprobs)
        .ok_or_else(|| no_probabilities("/completion answered with no alternatives".into()))
}

/// One streamed event of `/completion`; `None` for one that carries no token (the start,
/// progress).
pub(crate) fn stream_event(
    check: ReplyCheck<'_>,
    data: &[u8],
) -> Result<Option<StreamEvent>, RemoteError> {
    let no_probabilities = |what: String| RemoteError::NoProbabilities {
        url: check.url.to_owned(),
        what,
    };
    let chunk: CompletionReply =
        parse_json(check.url, data, "a streamed event").map_err(no_probabilities)?;
    if let Some(error) = &chunk.error {
        return Err(check.reported(error));
    }
    let generated = chunk.tokens_predicted.and_then(|n| usize::try_from(n).ok());
    let probs = chunk.completion_probabilities.unwrap_or_default();
    if chunk.stop == Some(true) {
        // The last event carries no token; the ones it counts beyond those sent are read.
        let end = match chunk.stop_type.as_deref() {
            Some("eos") => StreamEnd::Eos,
            _ => StreamEnd::Limit,
        };
        return Ok(Some(StreamEvent {
            positions: Vec::new(),
            generated,
            end: Some(end),
        }));
    }
    let has_tokens = chunk.tokens.is_some_and(|t| !t.is_empty());
    if probs.is_empty() && !has_tokens {
        return Ok(None);
    }
    let (Some(generated), Ok([position])) = (generated, <[WirePosition; 1]>::try_from(probs))
    else {
        return Err(no_probabilities(
            "a streamed token came without its count and probabilities".into(),
        ));
    };
    Ok(Some(StreamEvent {
        positions: vec![check.position(position)?],
        generated: Some(generated),
        end: None,
    }))
}
