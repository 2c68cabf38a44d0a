//! The OpenAI-compatible completions API (`/v1/completions`) as vLLM and llama-server serve it,
//! as far as the generator uses it: `/v1/models`, the server's `/tokenize`, and completions
//! with token-id prompts, greedy decoding and `logprobs`, streamed as server-sent events.
//!
//! The two servers answer the same request in two shapes, and both are read:
//! - **vLLM** returns the legacy `logprobs` object (`tokens`, `token_logprobs`, `top_logprobs`
//!   keyed by token); with `return_tokens_as_token_ids` every token is written `token_id:N`,
//!   so ids are exact and never guessed from text. Its log-probabilities are those of the raw
//!   logits (vLLM's default `logprobs_mode`), and at most `--max-logprobs` (20 by default)
//!   alternatives come per position. A reflection token outside them is read exactly by
//!   scoring it as the last token of a prompt (`prompt_logprobs`).
//! - **llama-server** returns `logprobs.content[]` with ids (its native format), takes
//!   `logprobs` as `n_probs` with no upper limit, and counts generated tokens in `timings`
//!   (`timings_per_token`), which shows the positions it leaves out (see `stream`).
//!
//! Fields one server does not know, the other's included, are ignored by it.

use serde_json::{Value, json};

use selfrag_core::TokenId;

use crate::RemoteError;
use crate::http::{Http, events, tokenized};
use crate::stream::{Alternative, StreamEnd, StreamEvent, TokenProbs, follow};

/// The OpenAI-compatible API of one server.
pub(crate) struct Client {
    /// The API's base, ending in `/v1`.
    api: Http,
    /// The server's root, where `/tokenize` and `/version` are.
    root: Http,
    /// The model every request names.
    model: String,
}

/// What `/v1/models` (and vLLM's `/version`) say about the server.
#[derive(Debug, Clone)]
pub(crate) struct Models {
    pub model: String,
    /// `vLLM 0.11.0`, `llama.cpp`, or the model's `owned_by`.
    pub runtime: String,
    /// The served model's context, where the server says it.
    pub context_length: Option<usize>,
}

/// How a server reads the probability of a token the alternatives left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ExactRead {
    /// It scores a given continuation (`prompt_logprobs`, vLLM).
    PromptLogprobs,
    /// It gives as many alternatives as asked, the whole vocabulary included (llama-server).
    AnyWidth,
}

fn as_usize(v: &Value) -> Option<usize> {
    v.as_u64().and_then(|n| usize::try_from(n).ok())
}

impl Client {
    /// The API at `api` (a base URL ending in `/v1`) serving `model`, or the one model it
    /// serves when `None`.
    pub fn connect(api: Http, model: Option<&str>) -> Result<(Self, Models), RemoteError> {
        let root = api.with_base(api.url().trim_end_matches("/v1"));
        let url = api.url().to_owned();
        let not_a_server = |what: String| RemoteError::NotAServer {
            url: url.clone(),
            what,
        };
        let reply = api
            .get("/models")?
            .ok_or_else(|| not_a_server("it has no /v1/models".into()))?;
        let reply = api.json(reply, "/v1/models")?;
        let served: Vec<&Value> = reply
            .get("data")
            .and_then(Value::as_array)
            .map(|d| d.iter().collect())
            .unwrap_or_default();
        let id = |m: &Value| m.get("id").and_then(Value::as_str).map(str::to_owned);
        let names: Vec<String> = served.iter().filter_map(|m| id(m)).collect();
        let chosen = match model {
            Some(wanted) => served.iter().find(|m| id(m).as_deref() == Some(wanted)),
            None if served.len() == 1 => served.first(),
            None => None,
        };
        let Some(chosen) = chosen else {
            return Err(RemoteError::ModelNotServed {
                url,
                wanted: model.map(str::to_owned),
                served: names,
            });
        };
        let name = id(chosen).unwrap_or_default();
        let owned_by = chosen
            .get("owned_by")
            .and_then(Value::as_str)
            .unwrap_or_default();
        // vLLM says its context here; llama-server's per-request context is its slots' in
        // `/props` (its `/v1/models` gives the context before it is shared out among slots).
        let context_length = match chosen.get("max_model_len").and_then(as_usize) {
            Some(n) => Some(n),
            None if owned_by == "llamacpp" => {
                crate::llama_server::Client::new(root.with_base(root.url()))
                    .props()
                    .ok()
                    .map(|p| p.n_ctx)
            }
            None => None,
        };
        let version = match root.get("/version") {
            Ok(Some(reply)) => root
                .json(reply, "/version")
                .ok()
                .and_then(|v| v.get("version").and_then(Value::as_str).map(str::to_owned)),
            _ => None,
        };
        let runtime = match (owned_by, version) {
            ("vllm", Some(version)) => format!("vLLM {version}"),
            ("llamacpp", _) => "llama.cpp".to_owned(),
            (owner, Some(version)) => format!("{owner} {version}"),
            (owner, None) => owner.to_owned(),
        };
        let client = Self {
            api,
            root,
            model: name.clone(),
        };
        Ok((
            client,
            Models {
                model: name,
                runtime,
                context_length,
            },
        ))
    }

    pub fn url(&self) -> &str {
        self.api.url()
    }

    /// The server's tokenization of `text`, without BOS, Self-RAG tokens written in it read
    /// as the tokens. vLLM reads `prompt` and `add_special_tokens`, llama-server `content`,
    /// `add_special` and `parse_special`.
    pub fn tokenize(&self, text: &str) -> Result<Vec<TokenId>, RemoteError> {
        let body = json!({
            "model": self.model,
            "prompt": text,
            "add_special_tokens": false,
            "content": text,
            "add_special": false,
            "parse_special": true,
        });
        let reply = self
            .root
            .post_if_found("/tokenize", &body)?
            .ok_or_else(|| RemoteError::NotAServer {
                url: self.url().to_owned(),
                what: format!(
                    "it has no {}/tokenize to check the model's vocabulary with",
                    self.root.url()
                ),
            })?;
        tokenized(self.url(), &self.root.json(reply, "/tokenize")?)
    }

    /// The settings of every completion: greedy, no penalties (vLLM takes a value left out from
    /// the model's generation config), the prompt as ids, ids in the reply, special tokens kept.
    fn completion_body(&self, prompt: Value, max_tokens: usize, logprobs: usize) -> Value {
        json!({
            "model": self.model,
            "prompt": prompt,
            "max_tokens": max_tokens,
            "temperature": 0.0,
            "repetition_penalty": 1.0,
            "presence_penalty": 0.0,
            "frequency_penalty": 0.0,
            "logprobs": logprobs,
            "return_tokens_as_token_ids": true,
            "skip_special_tokens": false,
            "timings_per_token": true,
            "cache_prompt": true,
        })
    }

    fn positions(&self, choice: &Value) -> Result<Vec<TokenProbs>, RemoteError> {
        positions(self.url(), choice)
    }

    fn first_choice<'a>(&self, reply: &'a Value) -> Result<&'a Value, RemoteError> {
        reply
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
            .ok_or_else(|| RemoteError::NotAServer {
                url: self.url().to_owned(),
                what: format!("a completion came without choices: {reply}"),
            })
    }

    /// The `width` most likely tokens after `prompt`, the most likely one as the position's
    /// token; sampling is kept off `byte_ids` (see `llama_server::Client::next_position`).
    pub fn next_position(
        &self,
        prompt: &[TokenId],
        width: usize,
        byte_ids: &[TokenId],
    ) -> Result<TokenProbs, RemoteError> {
        let mut body = self.completion_body(json!(prompt), 1, width.max(1));
        body["logit_bias"] = byte_ids
            .iter()
            .map(|id| (id.to_string(), json!(-100)))
            .collect::<serde_json::Map<_, _>>()
            .into();
        let reply = self
            .api
            .json(self.api.post("/completions", &body)?, "/v1/completions")?;
        let position = self
            .positions(self.first_choice(&reply)?)?
            .into_iter()
            .next();
        position
            .and_then(|p| TokenProbs::most_likely(p.top_logprobs))
            .ok_or_else(|| RemoteError::NoProbabilities {
                url: self.url().to_owned(),
                what: "a completion asked for log-probabilities came without them".into(),
            })
    }

    /// The exact probability of each of `ids` right after `prefix`, each scored as the last
    /// token of a prompt (`prompt_logprobs`), in one request; `None` where the server does not
    /// score prompts.
    pub fn score(
        &self,
        prefix: &[TokenId],
        ids: &[TokenId],
    ) -> Result<Option<Vec<f32>>, RemoteError> {
        let prompts: Vec<Vec<TokenId>> = ids
            .iter()
            .map(|&id| {
                let mut p = prefix.to_vec();
                p.push(id);
                p
            })
            .collect();
        let mut body = self.completion_body(json!(prompts), 1, 0);
        body["prompt_logprobs"] = json!(0);
        if let Some(fields) = body.as_object_mut() {
            fields.remove("logprobs");
        }
        let reply = self
            .api
            .json(self.api.post("/completions", &body)?, "/v1/completions")?;
        Ok(scored(&reply, ids))
    }

    /// Greedy continuation of `prompt`, streamed (see `stream::follow`).
    pub fn stream(
        &self,
        prompt: &[TokenId],
        max_tokens: usize,
        logprobs: usize,
        byte_ids: &[TokenId],
        on_token: impl FnMut(TokenProbs) -> bool,
    ) -> Result<StreamEnd, RemoteError> {
        let mut body = self.completion_body(json!(prompt), max_tokens, logprobs);
        body["stream"] = json!(true);
        let response = self.api.post("/completions", &body)?;
        let events = events(self.url(), response).map(|chunk| self.stream_event(&chunk?));
        follow(
            self.url(),
            prompt,
            max_tokens,
            events,
            |prefix| self.next_position(prefix, logprobs, byte_ids),
            on_token,
        )
    }

    fn stream_event(&self, chunk: &Value) -> Result<StreamEvent, RemoteError> {
        let interrupted = |message: String| RemoteError::Interrupted {
            url: self.url().to_owned(),
            message,
        };
        if let Some(error) = chunk.get("error") {
            return Err(interrupted(format!("the server reported {error}")));
        }
        let choice = self.first_choice(chunk)?;
        let positions = self.positions(choice)?;
        let end = match choice.get("finish_reason").and_then(Value::as_str) {
            None => None,
            Some("stop") => Some(StreamEnd::Eos),
            Some("length") => Some(StreamEnd::Limit),
            Some(other) => return Err(interrupted(format!("the server ended with {other:?}"))),
        };
        // llama-server counts its tokens (`timings_per_token`, and `usage` at the end).
        let generated = chunk
            .pointer("/timings/predicted_n")
            .or_else(|| chunk.pointer("/usage/completion_tokens"))
            .and_then(as_usize);
        Ok(StreamEvent {
            positions,
            generated,
            end,
        })
    }
}

/// The `logprobs` positions of one choice, in either shape (see the module docs).
fn positions(url: &str, choice: &Value) -> Result<Vec<TokenProbs>, RemoteError> {
    let no_probabilities = |what: String| RemoteError::NoProbabilities {
        url: url.to_owned(),
        what,
    };

    let logprobs = match choice.get("logprobs") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(l) => l,
    };
    if let Some(content) = logprobs.get("content") {
        return serde_json::from_value(content.clone())
            .map_err(|e| no_probabilities(format!("unexpected logprobs.content: {e}")));
    }
    let list = |key: &str| {
        logprobs
            .get(key)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let (tokens, chosen, tops) = (list("tokens"), list("token_logprobs"), list("top_logprobs"));
    let id_of = |token: &str| {
        token
            .strip_prefix("token_id:")
            .and_then(|n| n.parse::<TokenId>().ok())
            .ok_or_else(|| {
                no_probabilities(format!(
                    "it named a token {token:?} by its text, not by its id (vLLM: a version \
                     with `return_tokens_as_token_ids`)"
                ))
            })
    };
    tokens
        .iter()
        .enumerate()
        .map(|(i, token)| {
            let id = id_of(token.as_str().unwrap_or_default())?;
            let logprob = chosen.get(i).and_then(Value::as_f64).ok_or_else(|| {
                no_probabilities(format!("token {i} came without its log-probability"))
            })? as f32;
            let top_logprobs = tops
                .get(i)
                .and_then(Value::as_object)
                .map(|top| {
                    top.iter()
                        .map(|(token, lp)| {
                            Ok(Alternative {
                                id: id_of(token)?,
                                logprob: lp.as_f64().ok_or_else(|| {
                                    no_probabilities(format!(
                                        "the alternative {token} came without a number: {lp}"
                                    ))
                                })? as f32,
                            })
                        })
                        .collect::<Result<Vec<_>, RemoteError>>()
                })
                .transpose()?
                .unwrap_or_default();
            Ok(TokenProbs {
                id,
                logprob,
                top_logprobs,
            })
        })
        .collect()
}

/// The probability of `ids[i]` as the last prompt token of choice `i`, from the choices'
/// `prompt_logprobs` (a list with an entry per prompt position, each keyed by token id);
/// `None` where a choice has none.
fn scored(reply: &Value, ids: &[TokenId]) -> Option<Vec<f32>> {
    let choices = reply.get("choices").and_then(Value::as_array)?;
    let mut found = vec![None; ids.len()];
    for (n, choice) in choices.iter().enumerate() {
        let index = choice.get("index").and_then(as_usize).unwrap_or(n);
        let last = choice
            .get("prompt_logprobs")
            .and_then(Value::as_array)
            .and_then(|p| p.last())?;
        let (Some(slot), Some(&id)) = (found.get_mut(index), ids.get(index)) else {
            continue;
        };
        *slot = last
            .get(id.to_string())
            .and_then(|entry| entry.get("logprob").or(Some(entry)))
            .and_then(Value::as_f64)
            .map(|lp| (lp as f32).exp());
    }
    found.into_iter().collect()
}

#[cfg(test)]
mod tests {
    //! The shapes of vLLM's replies, as its source writes them (vllm/entrypoints/openai/
    //! completion/protocol.py and serving.py): vLLM cannot run on this machine (it needs a GPU
    //! or its own CPU build), so its parsing is pinned here; llama-server's shapes are read by
    //! the tests against the real server.
    use super::*;

    #[test]
    fn a_vllm_chunk_gives_its_tokens_by_id_with_every_alternative() {
        let chunk = json!({
            "id": "cmpl-1", "object": "text_completion", "model": "selfrag",
            "choices": [{
                "index": 0, "text": " Paris",
                "logprobs": {
                    "text_offset": [0, 1],
                    "tokens": ["token_id:3681", "token_id:2"],
                    "token_logprobs": [-0.25, -0.5],
                    "top_logprobs": [
                        {"token_id:3681": -0.25, "token_id:32003": -3.0},
                        {"token_id:2": -0.5, "token_id:13": -1.5}
                    ]
                },
                "finish_reason": "stop", "stop_reason": null
            }]
        });
        let choice = &chunk["choices"][0];
        let positions = positions("http://gpu:8000/v1", choice).unwrap();
        let ids: Vec<TokenId> = positions.iter().map(|p| p.id).collect();
        assert_eq!(ids, [3681, 2]);
        assert_eq!(positions[1].logprob, -0.5);
        let p = positions[0].lookup(&[32003, 3681]).unwrap();
        assert!((p[0] - (-3.0f32).exp()).abs() < 1e-7 && (p[1] - (-0.25f32).exp()).abs() < 1e-7);
        assert_eq!(positions[0].lookup(&[5]), None);
    }

    #[test]
    fn a_token_named_by_its_text_is_refused_rather_than_guessed() {
        let choice = json!({
            "logprobs": {
                "tokens": [" Paris"], "token_logprobs": [-0.25],
                "top_logprobs": [{" Paris": -0.25}]
            }
        });
        let err = positions("http://gpu:8000/v1", &choice).unwrap_err();
        assert!(
            matches!(err, RemoteError::NoProbabilities { .. }),
            "{err:?}"
        );
        assert!(
            err.to_string().contains("return_tokens_as_token_ids"),
            "{err}"
        );
    }

    #[test]
    fn prompt_logprobs_score_each_last_token_in_the_order_asked() {
        let entry = |id: u32, logprob: f64| json!({ id.to_string(): {"logprob": logprob, "rank": 4, "decoded_token": "x"} });
        let reply = json!({
            "choices": [
                {"index": 1, "prompt_logprobs": [null, entry(7, -1.0), entry(32004, -2.0)]},
                {"index": 0, "prompt_logprobs": [null, entry(7, -1.0), entry(32003, -4.0)]}
            ]
        });
        let p = scored(&reply, &[32003, 32004]).unwrap();
        assert!((p[0] - (-4.0f32).exp()).abs() < 1e-7, "{p:?}");
        assert!((p[1] - (-2.0f32).exp()).abs() < 1e-7, "{p:?}");
        // A server that ignores `prompt_logprobs` (llama-server) scores nothing.
        let ignored = json!({ "choices": [{"index": 0, "text": "x", "logprobs": null}] });
        assert_eq!(scored(&ignored, &[32003]), None);
        // One missing id is no score at all, never a made-up one.
        let partial =
            json!({ "choices": [{"index": 0, "prompt_logprobs": [null, entry(9, -1.0)]}] });
        assert_eq!(scored(&partial, &[32003]), None);
    }
}
