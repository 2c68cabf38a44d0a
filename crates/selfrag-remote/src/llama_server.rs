//! llama.cpp's native HTTP API, as far as the generator uses it: `/props`, `/tokenize` and
//! `/completion` with token-id prompts, greedy decoding and `n_probs`, streamed as server-sent
//! events so that a row can stop at any token and a cut connection keeps what arrived.
//!
//! With `n_probs` (and `post_sampling_probs` off) llama-server returns, for each generated
//! token, the `n_probs` most likely tokens with their log-probabilities taken from a softmax of
//! the raw logits over the whole vocabulary: exact values, not sampler-adjusted ones.

use std::io::{BufRead, BufReader};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use selfrag_core::TokenId;

use crate::RemoteError;

/// A connection to one llama-server.
pub(crate) struct Client {
    agent: ureq::Agent,
    url: String,
    api_key: Option<String>,
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

/// One generated position as the server reports it.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct TokenProbs {
    pub id: TokenId,
    pub logprob: f32,
    /// The most likely tokens at this position, most likely first.
    #[serde(default)]
    pub top_logprobs: Vec<Alternative>,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Alternative {
    pub id: TokenId,
    pub logprob: f32,
}

/// How a streamed completion ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StreamEnd {
    /// The server stopped: end of sequence.
    Eos,
    /// The server stopped: `n_predict` tokens.
    Limit,
    /// The caller stopped reading.
    Caller,
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
    pub fn new(url: &str, api_key: Option<String>, timeout: Duration) -> Self {
        let agent = ureq::AgentBuilder::new()
            .timeout_connect(Duration::from_secs(10))
            .timeout_read(timeout)
            .build();
        Self {
            agent,
            url: url.trim_end_matches('/').to_owned(),
            api_key,
        }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    fn request(&self, method: &str, path: &str) -> ureq::Request {
        let request = self.agent.request(method, &format!("{}{path}", self.url));
        match &self.api_key {
            Some(key) => request.set("Authorization", &format!("Bearer {key}")),
            None => request,
        }
    }

    fn error(&self, e: ureq::Error) -> RemoteError {
        let url = self.url.clone();
        match e {
            ureq::Error::Status(status @ (401 | 403), _) => {
                RemoteError::Unauthorized { url, status }
            }
            ureq::Error::Status(status, response) => RemoteError::Failed {
                url,
                status,
                body: response
                    .into_string()
                    .unwrap_or_default()
                    .chars()
                    .take(400)
                    .collect(),
            },
            ureq::Error::Transport(t) => RemoteError::Unreachable {
                url,
                message: t.to_string(),
            },
        }
    }

    fn post(&self, path: &str, body: &Value) -> Result<ureq::Response, RemoteError> {
        self.request("POST", path)
            .set("Content-Type", "application/json")
            .send_string(&body.to_string())
            .map_err(|e| self.error(e))
    }

    fn json(&self, response: ureq::Response, what: &str) -> Result<Value, RemoteError> {
        let text = response
            .into_string()
            .map_err(|e| RemoteError::Interrupted {
                url: self.url.clone(),
                message: format!("reading the reply to {what}: {e}"),
            })?;
        serde_json::from_str(&text).map_err(|e| RemoteError::NotLlamaServer {
            url: self.url.clone(),
            what: format!("{what} answered with no JSON: {e}"),
        })
    }

    pub fn props(&self) -> Result<Props, RemoteError> {
        let response = match self.request("GET", "/props").call() {
            Err(ureq::Error::Status(404, _)) => {
                return Err(RemoteError::NotLlamaServer {
                    url: self.url.clone(),
                    what: "it has no /props".into(),
                });
            }
            other => other.map_err(|e| self.error(e))?,
        };
        let props = self.json(response, "/props")?;
        let n_ctx = props
            .pointer("/default_generation_settings/n_ctx")
            .and_then(Value::as_u64)
            .ok_or_else(|| RemoteError::NotLlamaServer {
                url: self.url.clone(),
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

    /// The server's tokenization of `text`, without BOS; `parse_special` lets it turn
    /// `[Fully supported]` into the special token.
    pub fn tokenize(&self, text: &str, parse_special: bool) -> Result<Vec<TokenId>, RemoteError> {
        let body = json!({ "content": text, "add_special": false, "parse_special": parse_special });
        let reply = self.json(self.post("/tokenize", &body)?, "/tokenize")?;
        reply
            .get("tokens")
            .and_then(Value::as_array)
            .and_then(|ids| {
                ids.iter()
                    .map(|id| id.as_u64().and_then(|id| TokenId::try_from(id).ok()))
                    .collect::<Option<Vec<_>>>()
            })
            .ok_or_else(|| RemoteError::NotLlamaServer {
                url: self.url.clone(),
                what: format!("/tokenize answered {reply}"),
            })
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
        let reply = self.json(self.post("/completion", &body)?, "/completion")?;
        let first = reply
            .get("completion_probabilities")
            .and_then(Value::as_array)
            .and_then(|p| p.first())
            .cloned()
            .ok_or_else(|| RemoteError::NoProbabilities {
                url: self.url.clone(),
                what: "/completion answered without completion_probabilities".into(),
            })?;
        let mut position = self.token_probs(first)?;
        let best =
            position
                .top_logprobs
                .first()
                .cloned()
                .ok_or_else(|| RemoteError::NoProbabilities {
                    url: self.url.clone(),
                    what: "/completion answered with no alternatives".into(),
                })?;
        position.id = best.id;
        position.logprob = best.logprob;
        Ok(position)
    }

    fn token_probs(&self, value: Value) -> Result<TokenProbs, RemoteError> {
        serde_json::from_value(value).map_err(|e| RemoteError::NoProbabilities {
            url: self.url.clone(),
            what: format!("unexpected completion_probabilities: {e}"),
        })
    }

    /// Greedy continuation of `prompt`, streamed: `on_token` sees every position in order and
    /// returns `false` to stop reading (the server then ends the request).
    ///
    /// llama-server sends nothing for a token that leaves an incomplete UTF-8 character (a
    /// byte token in the middle of a multi-byte character): neither its id nor its
    /// probabilities. Each event counts the tokens generated so far (`tokens_predicted`), so a
    /// gap is seen, and each missing position is read with a one-token request on the same
    /// prefix, which the server's cache holds: greedy, the same token it chose.
    pub fn stream(
        &self,
        prompt: &[TokenId],
        n_predict: usize,
        n_probs: usize,
        byte_ids: &[TokenId],
        mut on_token: impl FnMut(TokenProbs) -> bool,
    ) -> Result<StreamEnd, RemoteError> {
        let response = self.post(
            "/completion",
            &completion_body(prompt, n_predict, n_probs, true),
        )?;
        let interrupted = |message: String| RemoteError::Interrupted {
            url: self.url.clone(),
            message,
        };
        let mut context = prompt.to_vec();
        let mut generated = 0usize;
        // Reads the positions the server skipped, up to `upto` generated tokens; false when
        // the caller stopped.
        let fill = |context: &mut Vec<TokenId>,
                    generated: &mut usize,
                    upto: usize,
                    on_token: &mut dyn FnMut(TokenProbs) -> bool|
         -> Result<bool, RemoteError> {
            while *generated < upto.min(n_predict) {
                let position = self.next_position(context, n_probs, byte_ids)?;
                context.push(position.id);
                *generated += 1;
                if !on_token(position) {
                    return Ok(false);
                }
            }
            Ok(true)
        };
        let reader = BufReader::new(response.into_reader());
        for line in reader.lines() {
            let line = line.map_err(|e| interrupted(e.to_string()))?;
            let Some(data) = line.strip_prefix("data: ") else {
                continue;
            };
            let chunk: Value = serde_json::from_str(data)
                .map_err(|e| interrupted(format!("an event that is not JSON ({e}): {data}")))?;
            if let Some(error) = chunk.get("error") {
                return Err(interrupted(format!("the server reported {error}")));
            }
            let predicted = chunk
                .get("tokens_predicted")
                .and_then(Value::as_u64)
                .and_then(|n| usize::try_from(n).ok());
            let probs = chunk
                .get("completion_probabilities")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let stop = chunk.get("stop").and_then(Value::as_bool) == Some(true);
            let has_tokens = chunk
                .get("tokens")
                .and_then(Value::as_array)
                .is_some_and(|t| !t.is_empty());
            if !stop && probs.is_empty() && !has_tokens {
                // An event that carries no token (the start of the stream, progress).
                continue;
            }
            if !stop {
                let (Some(predicted), [position]) = (predicted, probs.as_slice()) else {
                    return Err(RemoteError::NoProbabilities {
                        url: self.url.clone(),
                        what: format!(
                            "a streamed token came without its count and probabilities: {data}"
                        ),
                    });
                };
                // This event's token is the `predicted`-th; the ones before it that were
                // never sent are read first.
                if !fill(
                    &mut context,
                    &mut generated,
                    predicted.saturating_sub(1),
                    &mut on_token,
                )? {
                    return Ok(StreamEnd::Caller);
                }
                let position = self.token_probs(position.clone())?;
                context.push(position.id);
                generated += 1;
                if !on_token(position) {
                    return Ok(StreamEnd::Caller);
                }
                continue;
            }
            // The last event carries no token; the ones it counts beyond those sent are read.
            let counted = predicted.unwrap_or(generated);
            if !fill(&mut context, &mut generated, counted, &mut on_token)? {
                return Ok(StreamEnd::Caller);
            }
            let end = chunk.get("stop_type").and_then(Value::as_str);
            return Ok(if end == Some("eos") {
                StreamEnd::Eos
            } else {
                StreamEnd::Limit
            });
        }
        Err(interrupted(
            "the stream ended before the server said it had stopped".into(),
        ))
    }
}
