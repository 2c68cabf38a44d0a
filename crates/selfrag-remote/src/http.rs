//! The HTTP both server APIs share: one agent with the connect and silence timeouts, the API
//! key as a bearer token, and every transport or status failure turned into a [`RemoteError`]
//! that names the server.

use std::time::Duration;

use serde_json::Value;

use crate::RemoteError;

/// The most read of one JSON reply: the whole vocabulary's probabilities for a position (asked
/// where a reflection token is not among the first alternatives) is about 3 MB for Llama-2's
/// 32k tokens in llama-server's shape, and ureq's own `into_string` stops at 10 MB.
const REPLY_LIMIT: u64 = 256 << 20;

/// A connection to one server at a base URL (no trailing slash).
pub(crate) struct Http {
    agent: ureq::Agent,
    url: String,
    api_key: Option<String>,
}

impl Http {
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

    /// The same server under another base URL (an API's path below the server's root).
    pub fn with_base(&self, url: &str) -> Self {
        Self {
            agent: self.agent.clone(),
            url: url.trim_end_matches('/').to_owned(),
            api_key: self.api_key.clone(),
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

    /// The error for a failed request, naming the server.
    pub fn error(&self, e: ureq::Error) -> RemoteError {
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

    /// `GET path`; a 404 is `Ok(None)`, the way an API says it has no such endpoint.
    pub fn get(&self, path: &str) -> Result<Option<ureq::Response>, RemoteError> {
        match self.request("GET", path).call() {
            Err(ureq::Error::Status(404, _)) => Ok(None),
            other => other.map(Some).map_err(|e| self.error(e)),
        }
    }

    /// `POST path` with a JSON body.
    pub fn post(&self, path: &str, body: &Value) -> Result<ureq::Response, RemoteError> {
        self.send_post(path, body).map_err(|e| self.error(*e))
    }

    fn send_post(&self, path: &str, body: &Value) -> Result<ureq::Response, Box<ureq::Error>> {
        self.request("POST", path)
            .set("Content-Type", "application/json")
            .send_string(&body.to_string())
            .map_err(Box::new)
    }

    /// `POST path` with a JSON body; a 404 is `Ok(None)`, as with [`Http::get`].
    pub fn post_if_found(
        &self,
        path: &str,
        body: &Value,
    ) -> Result<Option<ureq::Response>, RemoteError> {
        match self.send_post(path, body) {
            Err(e) if matches!(*e, ureq::Error::Status(404, _)) => Ok(None),
            other => other.map(Some).map_err(|e| self.error(*e)),
        }
    }

    /// The reply's body as JSON, up to [`REPLY_LIMIT`] bytes; `what` names the request in the
    /// error.
    pub fn json(&self, response: ureq::Response, what: &str) -> Result<Value, RemoteError> {
        use std::io::Read;
        let mut text = String::new();
        response
            .into_reader()
            .take(REPLY_LIMIT)
            .read_to_string(&mut text)
            .map_err(|e| RemoteError::Interrupted {
                url: self.url.clone(),
                message: format!("reading the reply to {what}: {e}"),
            })?;
        serde_json::from_str(&text).map_err(|e| RemoteError::NotAServer {
            url: self.url.clone(),
            what: format!("{what} answered with no JSON: {e}"),
        })
    }
}

/// The ids of a `/tokenize` reply, `{"tokens": [ids]}` from llama-server and vLLM alike.
pub(crate) fn tokenized(
    url: &str,
    reply: &Value,
) -> Result<Vec<selfrag_core::TokenId>, RemoteError> {
    reply
        .get("tokens")
        .and_then(Value::as_array)
        .and_then(|ids| {
            ids.iter()
                .map(|id| {
                    id.as_u64()
                        .and_then(|id| selfrag_core::TokenId::try_from(id).ok())
                })
                .collect::<Option<Vec<_>>>()
        })
        .ok_or_else(|| RemoteError::NotAServer {
            url: url.to_owned(),
            what: format!("/tokenize answered {reply}"),
        })
}

/// Server-sent events: the `data:` payload of each event, JSON, until the stream ends or
/// `[DONE]`; an unreadable line or payload is the server stopping mid-answer.
pub(crate) fn events(
    url: &str,
    response: ureq::Response,
) -> impl Iterator<Item = Result<Value, RemoteError>> {
    use std::io::{BufRead, BufReader};
    let url = url.to_owned();
    BufReader::new(response.into_reader())
        .lines()
        .filter_map(move |line| {
            let interrupted = |message: String| RemoteError::Interrupted {
                url: url.clone(),
                message,
            };
            let line = match line {
                Ok(line) => line,
                Err(e) => return Some(Err(interrupted(e.to_string()))),
            };
            // llama-server reports a failure inside a stream as an `error:` line.
            if let Some(error) = line.strip_prefix("error:") {
                return Some(Err(interrupted(format!(
                    "the server reported {}",
                    error.trim()
                ))));
            }
            let data = line.strip_prefix("data:")?.trim();
            if data == "[DONE]" {
                return None;
            }
            Some(
                serde_json::from_str(data)
                    .map_err(|e| interrupted(format!("an event that is not JSON ({e}): {data}"))),
            )
        })
}
