//! The embedder on an inference server: any OpenAI-compatible `/v1/embeddings` endpoint
//! (llama.cpp's `llama-server --embedding`, text-embeddings-inference, vLLM, Ollama), so that a
//! lab's GPU server embeds for every desktop and for its headless indexer.
//!
//! [`ServerEmbedder::connect`] finds the model (the one named, or the only one `/v1/models`
//! lists) and embeds one sentence to learn the vectors' length; every later reply must keep
//! it. Texts travel in requests of [`TEXTS_PER_REQUEST`] (text-embeddings-inference's default
//! client batch). Every reply is bounded and checked before a number of it is used: one vector
//! per text, each index once, the learnt length, finite values.
//!
//! The vectors are asked for unnormalized (`embd_normalize: -1`, which llama-server reads and
//! the others ignore): the library searches by inner product, and a Contriever-style model's
//! vectors are its mean-pooled states as they are. A server that normalizes anyway gives
//! vectors of another length than the local model's, which the library's fingerprint tells
//! apart (`selfrag_index`'s `fingerprint`), so the two never share a library.

use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{Value, json};

use crate::RemoteError;
use crate::http::Http;
use crate::reply::parse_json;
use crate::server_url::ServerUrl;

/// Texts per request.
pub const TEXTS_PER_REQUEST: usize = 32;

/// Where the embeddings server is and how to ask it.
#[derive(Clone, PartialEq)]
pub struct EmbedderServerConfig {
    /// The server's address, e.g. `http://gpu-box:8081`, or its OpenAI API's (`…/v1`).
    pub url: String,
    /// Sent as `Authorization: Bearer …`; never logged.
    pub api_key: Option<String>,
    /// The model to ask for; `None`: the one the server serves.
    pub model: Option<String>,
    /// How long a reply may stay silent.
    pub timeout: Duration,
}

impl EmbedderServerConfig {
    /// A server at `url`, no key, its only model, two minutes of silence at most.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            api_key: None,
            model: None,
            timeout: Duration::from_secs(120),
        }
    }
}

impl std::fmt::Debug for EmbedderServerConfig {
    /// The key is redacted.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbedderServerConfig")
            .field("url", &self.url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("model", &self.model)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// What can go wrong with an embeddings server, each case naming it and what to do.
#[derive(Debug, Clone, thiserror::Error)]
pub enum EmbedderServerError {
    #[error(
        "could not reach the embedder server at {url}, or it did not answer in time: {message}. \
         Start the server, or check the embedder's address (the Embedder setting, \
         SELFRAG_EMBEDDER_URL or --embedder-url)"
    )]
    Unreachable { url: String, message: String },

    #[error(
        "the embedder server at {url} refused the request ({status}): check its API key (the \
         Embedder setting, or SELFRAG_EMBEDDER_API_KEY)"
    )]
    Unauthorized { url: String, status: u16 },

    #[error(
        "the embedder server at {url} failed with HTTP status {status}; its reason is in the \
         log and the server's own (llama-server embeds only when started with --embedding)"
    )]
    Failed { url: String, status: u16 },

    #[error(
        "the server at {url} does not answer as an OpenAI-compatible embeddings server ({what}): \
         point the embedder URL at llama-server --embedding, text-embeddings-inference, vLLM or \
         Ollama (e.g. http://gpu-box:8081)"
    )]
    NotEmbeddings { url: String, what: String },

    #[error(
        "the embedder server at {url} does not serve {}: it serves {}. Set the embedder's model \
         name (the Embedder setting, SELFRAG_EMBEDDER_MODEL or --embedder-model) to one of them",
        wanted.as_deref().map_or("one model only".to_owned(), |w| format!("the model {w:?}")),
        if served.is_empty() { "none".to_owned() } else { format!("{served:?}") }
    )]
    ModelNotServed {
        url: String,
        wanted: Option<String>,
        served: Vec<String>,
    },

    /// Nothing of that reply is used.
    #[error(
        "the embedder server at {url} sent {what}: it is broken, or not the server it claims to \
         be. Nothing of that reply was used; check the server and the model it serves"
    )]
    ImpossibleValue { url: String, what: String },

    /// The server's model changed under a running app: its vectors would not be the library's.
    #[error(
        "the embedder server at {url} now answers with the model {now:?}, not {was:?} as when it \
         was connected; nothing it sent since was used. Serve {was:?} there again, or restart the \
         app to connect afresh (a library opens only with the model that made its vectors)"
    )]
    ModelChanged {
        url: String,
        was: String,
        now: String,
    },

    #[error(
        "the embedder server at {url} sent a reply larger than {limit_mib} MiB; nothing of it \
         was kept. Check the server"
    )]
    ReplyTooLarge { url: String, limit_mib: usize },

    #[error(
        "the embedder address \"{url}\" cannot be used: {why}. Enter the server's address as \
         http://host:port (e.g. http://gpu-box:8081)"
    )]
    InvalidUrl { url: String, why: String },
}

impl From<RemoteError> for EmbedderServerError {
    /// The transport's errors (shared with the generator's client) in the embedder's words.
    fn from(error: RemoteError) -> Self {
        match error {
            RemoteError::Unreachable { url, message }
            | RemoteError::Interrupted { url, message } => Self::Unreachable { url, message },
            RemoteError::Unauthorized { url, status } => Self::Unauthorized { url, status },
            RemoteError::Failed { url, status } => Self::Failed { url, status },
            RemoteError::ReplyTooLarge { url, limit_mib, .. } => {
                Self::ReplyTooLarge { url, limit_mib }
            }
            RemoteError::InvalidUrl { url, why } => Self::InvalidUrl { url, why },
            RemoteError::ImpossibleValue { url, what } => Self::ImpossibleValue { url, what },
            RemoteError::ModelNotServed {
                url,
                wanted,
                served,
            } => Self::ModelNotServed {
                url,
                wanted,
                served,
            },
            RemoteError::NotAServer { url, what } | RemoteError::NoProbabilities { url, what } => {
                Self::NotEmbeddings { url, what }
            }
            // The generator's checks; the embeddings client makes none of them.
            RemoteError::MissingReflectionToken { url, .. }
            | RemoteError::VocabularyMismatch { url, .. }
            | RemoteError::ContextOverflow { url, .. } => Self::NotEmbeddings {
                url,
                what: "a generator's check failed".into(),
            },
            RemoteError::Tokenizer { path, message } => Self::NotEmbeddings {
                url: path,
                what: message,
            },
        }
    }
}

/// What a connection test found.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbedderServerInfo {
    /// The API's base URL requests go to (ending in `/v1`).
    pub url: String,
    /// The model the server names in its replies.
    pub model: String,
    /// The vectors' length.
    pub dim: usize,
    /// The first embedding's round trip, in milliseconds.
    pub round_trip_ms: f64,
}

/// A connected, checked embeddings server.
pub struct ServerEmbedder {
    api: Http,
    /// The model every request names; `None` where the server lists none (it serves one).
    requested: Option<String>,
    /// The model the connection's reply named, which every later reply that names one must name.
    named: Option<String>,
    info: EmbedderServerInfo,
}

/// How long the connection test's requests may stay silent: one sentence, on a server that is
/// up, takes milliseconds; a stalled one is not waited on for the embedding timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

impl std::fmt::Debug for ServerEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerEmbedder")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

/// `/v1/embeddings`' reply, as far as it is read.
#[derive(Deserialize)]
struct EmbeddingsReply {
    data: Vec<EmbeddingItem>,
    #[serde(default)]
    model: Option<String>,
}

#[derive(Deserialize)]
struct EmbeddingItem {
    /// Which input this is; the order of `data` where a server leaves it out.
    #[serde(default)]
    index: Option<usize>,
    embedding: Vec<f64>,
}

impl ServerEmbedder {
    /// Connects to the server `config` names, finds its model and learns its vectors' length.
    pub fn connect(config: &EmbedderServerConfig) -> Result<Self, EmbedderServerError> {
        let url = ServerUrl::parse(&config.url)?;
        let base = if url.path().ends_with("/v1") {
            url.as_str().to_owned()
        } else {
            format!("{}/v1", url.as_str())
        };
        let probe = Http::new(
            &base,
            config.api_key.clone(),
            config.timeout.min(CONNECT_TIMEOUT),
        );
        let requested = served_model(&probe, config.model.as_deref())?;
        let mut embedder = Self {
            api: probe,
            requested,
            named: None,
            info: EmbedderServerInfo {
                url: base.clone(),
                model: String::new(),
                dim: 0,
                round_trip_ms: 0.0,
            },
        };
        let start = Instant::now();
        let (vectors, model) = embedder.request(&["Is this server an embedder?"], None)?;
        embedder.info.round_trip_ms = start.elapsed().as_secs_f64() * 1e3;
        embedder.info.dim = vectors.first().map_or(0, Vec::len);
        embedder.named.clone_from(&model);
        embedder.info.model = model
            .or_else(|| embedder.requested.clone())
            .unwrap_or_else(|| "the served model".to_owned());
        embedder.api = Http::new(&base, config.api_key.clone(), config.timeout);
        tracing::info!(url = %embedder.info.url, model = %embedder.info.model, dim = embedder.info.dim, "embedder server connected");
        Ok(embedder)
    }

    /// What the connection test found.
    pub fn info(&self) -> &EmbedderServerInfo {
        &self.info
    }

    /// The vectors' length.
    pub fn dim(&self) -> usize {
        self.info.dim
    }

    /// The model and where it runs, e.g. `contriever-msmarco on http://gpu-box:8081/v1`.
    pub fn model_id(&self) -> String {
        format!("{} on {}", self.info.model, self.info.url)
    }

    /// One vector per text, in order.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedderServerError> {
        let mut vectors = Vec::with_capacity(texts.len());
        for batch in texts.chunks(TEXTS_PER_REQUEST) {
            vectors.extend(self.request(batch, Some(self.info.dim))?.0);
        }
        Ok(vectors)
    }

    /// One request's vectors, checked (of length `dim` where it is known), and the model the
    /// reply names.
    fn request(
        &self,
        texts: &[&str],
        dim: Option<usize>,
    ) -> Result<(Vec<Vec<f32>>, Option<String>), EmbedderServerError> {
        let mut body = json!({
            "input": texts,
            "encoding_format": "float",
            "embd_normalize": -1,
        });
        if let Some(model) = &self.requested {
            body["model"] = Value::String(model.clone());
        }
        let response = self.api.post("/embeddings", &body)?;
        let bytes = self.api.body(response, "/v1/embeddings")?;
        let reply: EmbeddingsReply =
            parse_json(self.api.url(), &bytes, "the reply to /v1/embeddings").map_err(|what| {
                EmbedderServerError::NotEmbeddings {
                    url: self.api.url().to_owned(),
                    what,
                }
            })?;
        let vectors = checked_vectors(reply.data, texts.len(), dim).map_err(|what| {
            EmbedderServerError::ImpossibleValue {
                url: self.api.url().to_owned(),
                what,
            }
        })?;
        let model = reply.model.map(|m| crate::server_url::shown(&m, 128));
        if let (Some(was), Some(now)) = (&self.named, &model)
            && was != now
        {
            return Err(EmbedderServerError::ModelChanged {
                url: self.api.url().to_owned(),
                was: was.clone(),
                now: now.clone(),
            });
        }
        Ok((vectors, model))
    }
}

/// The model to name in requests: `wanted` where `/v1/models` lists it (or lists nothing, or
/// is not there), else the only model it lists.
fn served_model(api: &Http, wanted: Option<&str>) -> Result<Option<String>, EmbedderServerError> {
    let Some(reply) = api.get("/models")? else {
        return Ok(wanted.map(str::to_owned));
    };
    let reply = api.json(reply, "/v1/models")?;
    let names: Vec<String> = reply
        .get("data")
        .and_then(Value::as_array)
        .map(|served| {
            served
                .iter()
                .filter_map(|m| m.get("id").and_then(Value::as_str))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    match wanted {
        Some(wanted) if names.is_empty() || names.iter().any(|n| n == wanted) => {
            Ok(Some(wanted.to_owned()))
        }
        None if names.len() <= 1 => Ok(names.into_iter().next()),
        _ => Err(EmbedderServerError::ModelNotServed {
            url: api.url().to_owned(),
            wanted: wanted.map(str::to_owned),
            // A few short names: the message reaches the page, and the list is the server's.
            served: names
                .iter()
                .take(8)
                .map(|name| crate::server_url::shown(name, 64))
                .collect(),
        }),
    }
}

/// `items` in input order as f32 vectors, or what is wrong with them: one per input, each
/// index once, all of one length (`dim` where known, never 0), every value finite.
fn checked_vectors(
    items: Vec<EmbeddingItem>,
    inputs: usize,
    dim: Option<usize>,
) -> Result<Vec<Vec<f32>>, String> {
    if items.len() != inputs {
        return Err(format!("{} vectors for {inputs} texts", items.len()));
    }
    let mut vectors: Vec<Option<Vec<f32>>> = vec![None; inputs];
    let dim = dim.or_else(|| items.first().map(|i| i.embedding.len()));
    for (position, item) in items.into_iter().enumerate() {
        let index = item.index.unwrap_or(position);
        let slot = vectors
            .get_mut(index)
            .ok_or_else(|| format!("a vector for text {index} of {inputs}"))?;
        if slot.is_some() {
            return Err(format!("two vectors for text {index}"));
        }
        if Some(item.embedding.len()) != dim || item.embedding.is_empty() {
            return Err(format!(
                "a vector of {} numbers where {} were expected",
                item.embedding.len(),
                dim.unwrap_or(0)
            ));
        }
        let mut vector = Vec::with_capacity(item.embedding.len());
        for value in item.embedding {
            let single = value as f32;
            if !single.is_finite() {
                return Err(format!("the number {value:e} in a vector"));
            }
            vector.push(single);
        }
        *slot = Some(vector);
    }
    Ok(vectors.into_iter().flatten().collect())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn item(index: Option<usize>, embedding: &[f64]) -> EmbeddingItem {
        EmbeddingItem {
            index,
            embedding: embedding.to_vec(),
        }
    }

    #[test]
    fn vectors_come_back_in_input_order_by_their_index() {
        let items = vec![item(Some(1), &[3.0, 4.0]), item(Some(0), &[1.0, 2.0])];
        assert_eq!(
            checked_vectors(items, 2, None).unwrap(),
            vec![vec![1.0, 2.0], vec![3.0, 4.0]]
        );
        let unindexed = vec![item(None, &[1.0]), item(None, &[2.0])];
        assert_eq!(
            checked_vectors(unindexed, 2, Some(1)).unwrap(),
            vec![vec![1.0], vec![2.0]]
        );
    }

    #[test]
    fn a_reply_that_cannot_be_the_texts_vectors_is_refused() {
        let too_few = checked_vectors(vec![item(Some(0), &[1.0])], 2, None).unwrap_err();
        assert_eq!(too_few, "1 vectors for 2 texts");
        let twice = vec![item(Some(0), &[1.0]), item(Some(0), &[2.0])];
        assert_eq!(
            checked_vectors(twice, 2, None).unwrap_err(),
            "two vectors for text 0"
        );
        let outside = vec![item(Some(5), &[1.0])];
        assert!(
            checked_vectors(outside, 1, None)
                .unwrap_err()
                .contains("text 5 of 1")
        );
        let ragged = vec![item(Some(0), &[1.0, 2.0]), item(Some(1), &[1.0])];
        assert!(
            checked_vectors(ragged, 2, None)
                .unwrap_err()
                .contains("1 numbers where 2")
        );
        let other_length = vec![item(Some(0), &[1.0, 2.0])];
        assert!(checked_vectors(other_length, 1, Some(3)).is_err());
        let empty = vec![item(Some(0), &[])];
        assert!(checked_vectors(empty, 1, None).is_err());
        let overflow = vec![item(Some(0), &[1e300])];
        assert!(
            checked_vectors(overflow, 1, None)
                .unwrap_err()
                .contains("1e300")
        );
    }

    #[test]
    fn the_key_never_shows_in_debug_output() {
        let mut config = EmbedderServerConfig::new("http://127.0.0.1:1");
        config.api_key = Some("sk-secret".into());
        assert!(!format!("{config:?}").contains("sk-secret"));
    }

    #[test]
    fn an_unreachable_server_is_named_as_the_embedder() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let config = EmbedderServerConfig::new(format!("http://127.0.0.1:{port}"));
        let error = ServerEmbedder::connect(&config).unwrap_err();
        assert!(
            matches!(error, EmbedderServerError::Unreachable { .. }),
            "{error}"
        );
        let message = error.to_string();
        assert!(
            message.contains("embedder server at http://127.0.0.1:"),
            "{message}"
        );
        assert!(message.contains("SELFRAG_EMBEDDER_URL"), "{message}");
    }
}
