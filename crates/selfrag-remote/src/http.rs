//! The HTTP both server APIs share: one agent with the connect and silence timeouts, the API
//! key as a bearer token, and every transport or status failure turned into a [`RemoteError`]
//! that names the server.

use std::time::Duration;

use serde_json::Value;

use crate::RemoteError;
use crate::reply::{METADATA_LIMIT, REPLY_LIMIT, parse_json, read_body};

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
            ureq::Error::Status(status, response) => {
                // For the person reading the log; the error itself carries none of it. Only
                // the start is read: 400 characters are logged.
                let mut start = Vec::new();
                let _ = std::io::Read::read_to_end(
                    &mut std::io::Read::take(response.into_reader(), 1600),
                    &mut start,
                );
                let body: String = String::from_utf8_lossy(&start).chars().take(400).collect();
                tracing::warn!(%url, status, %body, "server failed");
                RemoteError::Failed { url, status }
            }
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

    /// The reply's body as untyped JSON, for the small replies that describe the server (at
    /// most [`METADATA_LIMIT`] bytes); `what` names the request in the error.
    pub fn json(&self, response: ureq::Response, what: &str) -> Result<Value, RemoteError> {
        let bytes = read_body(&self.url, response.into_reader(), METADATA_LIMIT, what)?;
        parse_json(&self.url, &bytes, what).map_err(|what| RemoteError::NotAServer {
            url: self.url.clone(),
            what,
        })
    }

    /// The body of a completion reply, at most [`REPLY_LIMIT`] bytes, to be read typed (see
    /// `reply`); `what` names the request in the error.
    pub fn body(&self, response: ureq::Response, what: &str) -> Result<Vec<u8>, RemoteError> {
        read_body(&self.url, response.into_reader(), REPLY_LIMIT, what)
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
            what: "/tokenize answered without a list of token ids".into(),
        })
}
