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

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Value, json};

use selfrag_core::TokenId;

use crate::RemoteError;
use crate::http::{Http, tokenized};
use crate::reply::{Entries, LastOf, ReplyCheck, ReportedError, WirePosition, events, parse_json};
use crate::stream::{Alternative, StreamEnd, StreamEvent, TokenProbs, follow};

/// The OpenAI-compatible API of one server.
pub(crate) struct Client {
    /// The API's base, ending in `/v1`.
    api: Http,
    /// The server's root, where `/tokenize` and `/version` are.
    root: Http,
    /// The model every request names.
    model: String,
    /// The model's vocabulary size, which every token id of a reply must be below.
    vocab: usize,
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
    /// serves when `None`, whose vocabulary has `vocab` tokens.
    pub fn connect(
        api: Http,
        model: Option<&str>,
        vocab: usize,
    ) -> Result<(Self, Models), RemoteError> {
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
                // A few short names: the message reaches the page, and the list is the
                // server's text.
                served: names
                    .iter()
                    .take(8)
                    .map(|name| name.chars().filter(|c| !c.is_control()).take(64).collect())
                    .collect(),
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
                crate::llama_server::Client::new(root.with_base(root.url()), vocab)
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
            vocab,
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

    fn check(&self) -> ReplyCheck<'_> {
        ReplyCheck {
            url: self.url(),
            vocab: self.vocab,
        }
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
            .body(self.api.post("/completions", &body)?, "/v1/completions")?;
        completion_position(self.check(), &reply)
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
            .body(self.api.post("/completions", &body)?, "/v1/completions")?;
        scored(self.check(), &reply, ids)
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
        let events = events(self.url(), response.into_reader())
            .map(|data| data.and_then(|data| stream_event(self.check(), &data)));
        follow(
            self.url(),
            prompt,
            max_tokens,
            events,
            |prefix| self.next_position(prefix, logprobs, byte_ids),
            on_token,
        )
    }
}

/// What the generator reads of a `/v1/completions` reply, streamed chunk or whole.
#[derive(Debug, Deserialize)]
struct CompletionsReply {
    error: Option<ReportedError>,
    choices: Option<Vec<Choice>>,
    /// llama-server's count of generated tokens (`timings_per_token`).
    timings: Option<Timings>,
    /// The count at the end, where `timings` is not sent.
    usage: Option<Usage>,
}

#[derive(Debug, Deserialize)]
struct Choice {
    index: Option<u64>,
    logprobs: Option<Logprobs>,
    finish_reason: Option<String>,
    /// vLLM's score of every prompt position, only the last kept (see [`scored`]).
    prompt_logprobs: Option<LastOf<Option<Entries<PromptScore>>>>,
}

/// A choice's `logprobs` in either shape (see the module docs).
#[derive(Debug, Deserialize)]
struct Logprobs {
    /// llama-server's: positions with ids.
    content: Option<Vec<WirePosition>>,
    /// vLLM's: tokens as `token_id:N`, their log-probabilities, and the alternatives of each.
    tokens: Option<Vec<String>>,
    token_logprobs: Option<Vec<Option<f64>>>,
    top_logprobs: Option<Vec<Option<Entries<f64>>>>,
}

#[derive(Debug, Deserialize)]
struct Timings {
    predicted_n: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct Usage {
    completion_tokens: Option<u64>,
}

/// One prompt score of vLLM: `{"logprob": x, "rank": …, "decoded_token": …}`, or a number.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum PromptScore {
    Number(f64),
    Detailed {
        logprob: Option<f64>,
    },
    /// Anything else scores nothing (as a missing entry does).
    Other(IgnoredAny),
}

impl PromptScore {
    fn logprob(&self) -> Option<f64> {
        match self {
            PromptScore::Number(lp) => Some(*lp),
            PromptScore::Detailed { logprob } => *logprob,
            PromptScore::Other(_) => None,
        }
    }
}

/// A completion reply read, or what is wrong with it; the server's own error is refused.
fn completions_reply(
    check: ReplyCheck<'_>,
    bytes: &[u8],
    what: &str,
) -> Result<CompletionsReply, RemoteError> {
    let reply: CompletionsReply =
        parse_json(check.url, bytes, what).map_err(|what| RemoteError::NotAServer {
            url: check.url.to_owned(),
            what,
        })?;
    if let Some(error) = &reply.error {
        return Err(check.reported(error));
    }
    Ok(reply)
}

fn first_choice(check: ReplyCheck<'_>, reply: CompletionsReply) -> Result<Choice, RemoteError> {
    reply
        .choices
        .and_then(|c| c.into_iter().next())
        .ok_or_else(|| RemoteError::NotAServer {
            url: check.url.to_owned(),
            what: "a completion came without choices".into(),
        })
}

/// The position of a whole completion of one token, its most likely alternative as its token
/// (see [`Client::next_position`]).
pub(crate) fn completion_position(
    check: ReplyCheck<'_>,
    bytes: &[u8],
) -> Result<TokenProbs, RemoteError> {
    let reply = completions_reply(check, bytes, "the reply to /v1/completions")?;
    let choice = first_choice(check, reply)?;
    positions(check, choice.logprobs)?
        .into_iter()
        .next()
        .and_then(|p| TokenProbs::most_likely(p.top_logprobs))
        .ok_or_else(|| RemoteError::NoProbabilities {
            url: check.url.to_owned(),
            what: "a completion asked for log-probabilities came without them".into(),
        })
}

/// One chunk of a streamed completion.
pub(crate) fn stream_event(check: ReplyCheck<'_>, data: &[u8]) -> Result<StreamEvent, RemoteError> {
    let chunk = completions_reply(check, data, "a streamed chunk")?;
    // llama-server counts its tokens (`timings_per_token`, and `usage` at the end).
    let generated = chunk
        .timings
        .as_ref()
        .and_then(|t| t.predicted_n)
        .or_else(|| chunk.usage.as_ref().and_then(|u| u.completion_tokens))
        .and_then(|n| usize::try_from(n).ok());
    let choice = first_choice(check, chunk)?;
    let end = match choice.finish_reason.as_deref() {
        None => None,
        Some("stop") => Some(StreamEnd::Eos),
        Some("length") => Some(StreamEnd::Limit),
        Some(other) => {
            let other: String = other.chars().filter(|c| !c.is_control()).take(40).collect();
            return Err(RemoteError::Interrupted {
                url: check.url.to_owned(),
                message: format!("the server ended with {other:?}"),
            });
        }
    };
    Ok(StreamEvent {
        positions: positions(check, choice.logprobs)?,
        generated,
        end,
    })
}

/// The `logprobs` positions of one choice, in either shape (see the module docs), checked.
fn positions(
    check: ReplyCheck<'_>,
    logprobs: Option<Logprobs>,
) -> Result<Vec<TokenProbs>, RemoteError> {
    let no_probabilities = |what: String| RemoteError::NoProbabilities {
        url: check.url.to_owned(),
        what,
    };
    let Some(logprobs) = logprobs else {
        return Ok(Vec::new());
    };
    if let Some(content) = logprobs.content {
        return content.into_iter().map(|p| check.position(p)).collect();
    }
    let tokens = logprobs.tokens.unwrap_or_default();
    let chosen = logprobs.token_logprobs.unwrap_or_default();
    let mut tops = logprobs.top_logprobs.unwrap_or_default().into_iter();
    let id_of = |token: &str, what: &str| {
        let number = token.strip_prefix("token_id:").ok_or_else(|| {
            let shown: String = token.chars().filter(|c| !c.is_control()).take(40).collect();
            no_probabilities(format!(
                "it named a token {shown:?} by its text, not by its id (vLLM: a version with \
                 `return_tokens_as_token_ids`)"
            ))
        })?;
        let id = number.parse::<u64>().map_err(|_| {
            no_probabilities(format!("it named {what} by an id that is not a number"))
        })?;
        check.token(id, what)
    };
    tokens
        .iter()
        .enumerate()
        .map(|(i, token)| {
            let id = id_of(token, "a generated token")?;
            let logprob = chosen.get(i).copied().flatten().ok_or_else(|| {
                no_probabilities(format!("token {i} came without its log-probability"))
            })?;
            let alternatives = tops.next().flatten().map_or_else(Vec::new, |top| top.0);
            check.alternative_count(alternatives.len())?;
            Ok(TokenProbs {
                id,
                logprob: check.logprob(logprob, &format!("the generated token {id}"))?,
                top_logprobs: alternatives
                    .into_iter()
                    .map(|(token, logprob)| {
                        let id = id_of(&token, "an alternative")?;
                        let logprob = check.logprob(logprob, &format!("the alternative {id}"))?;
                        Ok(Alternative { id, logprob })
                    })
                    .collect::<Result<_, RemoteError>>()?,
            })
        })
        .collect()
}

/// The probability of `ids[i]` as the last prompt token of choice `i`, from the choices'
/// `prompt_logprobs` (a list with an entry per prompt position, each keyed by token id);
/// `Ok(None)` where a choice has none, and an error where a score is no log-probability.
pub(crate) fn scored(
    check: ReplyCheck<'_>,
    bytes: &[u8],
    ids: &[TokenId],
) -> Result<Option<Vec<f32>>, RemoteError> {
    let reply = completions_reply(check, bytes, "the reply to /v1/completions")?;
    let Some(choices) = reply.choices else {
        return Ok(None);
    };
    let mut found = vec![None; ids.len()];
    for (n, choice) in choices.into_iter().enumerate() {
        let index = choice
            .index
            .and_then(|i| usize::try_from(i).ok())
            .unwrap_or(n);
        let Some(LastOf(Some(last))) = choice.prompt_logprobs else {
            return Ok(None);
        };
        let (Some(slot), Some(&id)) = (found.get_mut(index), ids.get(index)) else {
            continue;
        };
        let Some(Entries(entries)) = last else {
            *slot = None;
            continue;
        };
        check.alternative_count(entries.len())?;
        let key = id.to_string();
        *slot = match entries.iter().find(|(k, _)| *k == key) {
            Some((_, score)) => score
                .logprob()
                .map(|lp| check.logprob(lp, &format!("the scored token {id}")))
                .transpose()?
                .map(f32::exp),
            None => None,
        };
    }
    Ok(found.into_iter().collect())
}

#[cfg(test)]
mod tests {
    //! The shapes of vLLM's replies, as its source writes them (vllm/entrypoints/openai/
    //! completion/protocol.py and serving.py): vLLM cannot run on this machine (it needs a GPU
    //! or its own CPU build), so its parsing is pinned here; llama-server's shapes are read by
    //! the tests against the real server.
    use super::*;

    /// vLLM serving a Llama-2 Self-RAG model (32,000 tokens and the 16 reflection tokens).
    const VLLM: ReplyCheck<'static> = ReplyCheck {
        url: "http://gpu:8000/v1",
        vocab: 32_016,
    };

    /// A streamed chunk whose one choice is `choice`.
    fn chunk(choice: &Value) -> Vec<u8> {
        json!({ "id": "cmpl-1", "object": "text_completion", "choices": [choice] })
            .to_string()
            .into_bytes()
    }

    #[test]
    fn a_vllm_chunk_gives_its_tokens_by_id_with_every_alternative() {
        let choice = json!({
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
        });
        let event = stream_event(VLLM, &chunk(&choice)).unwrap();
        assert_eq!(event.end, Some(StreamEnd::Eos));
        let positions = event.positions;
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
        let err = stream_event(VLLM, &chunk(&choice)).unwrap_err();
        assert!(
            matches!(err, RemoteError::NoProbabilities { .. }),
            "{err:?}"
        );
        assert!(
            err.to_string().contains("return_tokens_as_token_ids"),
            "{err}"
        );
    }

    /// Issue 44, item 6: vLLM's shape carries its numbers as JSON numbers and its ids in text;
    /// neither is taken on trust.
    #[test]
    fn a_vllm_log_probability_that_no_model_gives_or_an_id_outside_the_vocabulary_is_refused() {
        let with = |tokens: Value, chosen: Value, top: Value| {
            json!({ "logprobs": {
                "tokens": tokens, "token_logprobs": chosen, "top_logprobs": [top]
            }})
        };
        let good = json!({"token_id:3681": -0.25});
        for (what, choice) in [
            (
                "1e39",
                with(json!(["token_id:3681"]), json!([1e39]), good.clone()),
            ),
            (
                "0.5",
                with(json!(["token_id:3681"]), json!([0.5]), good.clone()),
            ),
            (
                "-1e39",
                with(
                    json!(["token_id:3681"]),
                    json!([-0.25]),
                    json!({"token_id:13": -1e39}),
                ),
            ),
            (
                "32016",
                with(json!(["token_id:32016"]), json!([-0.25]), good.clone()),
            ),
            (
                "4294967296",
                with(
                    json!(["token_id:3681"]),
                    json!([-0.25]),
                    json!({"token_id:4294967296": -1.0}),
                ),
            ),
        ] {
            let err = stream_event(VLLM, &chunk(&choice)).unwrap_err();
            assert!(
                matches!(err, RemoteError::ImpossibleValue { .. }),
                "{what}: {err:?}"
            );
            let message = err.to_string();
            assert!(
                message.contains("http://gpu:8000/v1") && message.contains(what),
                "{message}"
            );
        }
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
        let score = |reply: &Value, ids: &[TokenId]| {
            scored(VLLM, reply.to_string().as_bytes(), ids).unwrap()
        };
        let p = score(&reply, &[32003, 32004]).unwrap();
        assert!((p[0] - (-4.0f32).exp()).abs() < 1e-7, "{p:?}");
        assert!((p[1] - (-2.0f32).exp()).abs() < 1e-7, "{p:?}");
        // A server that ignores `prompt_logprobs` (llama-server) scores nothing.
        let ignored = json!({ "choices": [{"index": 0, "text": "x", "logprobs": null}] });
        assert_eq!(score(&ignored, &[32003]), None);
        // One missing id is no score at all, never a made-up one.
        let partial =
            json!({ "choices": [{"index": 0, "prompt_logprobs": [null, entry(9, -1.0)]}] });
        assert_eq!(score(&partial, &[32003]), None);
        // A score that is no log-probability is refused, naming the server.
        let positive =
            json!({ "choices": [{"index": 0, "prompt_logprobs": [null, entry(32003, 2.0)]}] });
        let err = scored(VLLM, positive.to_string().as_bytes(), &[32003]).unwrap_err();
        assert!(
            matches!(err, RemoteError::ImpossibleValue { .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains("http://gpu:8000/v1"), "{err}");
    }
}
