//! Reading what a generator server sends, and no more of it than a real server could: one
//! server-sent event's line is at most [`EVENT_LINE_LIMIT`] bytes, one JSON reply at most
//! [`REPLY_LIMIT`] (metadata at most [`METADATA_LIMIT`]); a log-probability is a finite number
//! of at most 0, a token id lies in the model's vocabulary, and a position has no more
//! alternatives than the vocabulary has tokens. A reply that breaks one of these is refused,
//! naming the server: a broken or hostile server's numbers never reach a score, where one
//! `NaN` would make the answer unreadable once saved.
//!
//! Completion replies are read into typed structs, not `serde_json::Value`: the fields the
//! generator does not read (token texts and bytes, settings, timings) are skipped, not kept.
//! What is wrong with a reply is told by its kind and position, never by quoting it: the
//! message can reach the page, and the reply's text is the server's (it goes to the log).
//!
//! [`read_reply`] runs these parsers over bytes, as the generator runs them over a reply: for
//! the `server_replies` fuzz target and for tests.

use std::io::{BufRead, BufReader, Read};
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::{self, DeserializeOwned, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use selfrag_core::TokenId;

use crate::RemoteError;
use crate::stream::{Alternative, StreamEvent, TokenProbs};

/// The longest line of a server-sent event stream: one event is one token and its
/// alternatives, a few kilobytes; the widest a server is asked for in a stream is `top_n`.
pub(crate) const EVENT_LINE_LIMIT: usize = 8 << 20;

/// The largest completion reply: the whole vocabulary's probabilities for one position, read
/// where a watched token is outside the first alternatives, is about 2 MB of JSON for
/// Llama-2's 32k tokens in llama-server's shape (id, text, bytes and log-probability each), and
/// about 9 MB for a 128k vocabulary.
pub(crate) const REPLY_LIMIT: usize = 16 << 20;

/// The largest reply read as untyped JSON (`/props`, `/v1/models`, `/version`, `/tokenize`):
/// llama-server's `/props` with its chat template is tens of kilobytes.
pub(crate) const METADATA_LIMIT: usize = 1 << 20;

/// The most of a server's own error message kept, for the log.
const REPORTED_LIMIT: usize = 400;

/// Where a reply came from, and the vocabulary its token ids must lie in.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReplyCheck<'a> {
    pub url: &'a str,
    pub vocab: usize,
}

impl ReplyCheck<'_> {
    fn impossible(&self, what: String) -> RemoteError {
        RemoteError::ImpossibleValue {
            url: self.url.to_owned(),
            what,
        }
    }

    /// A token id, which must lie in the vocabulary; `what` names the token in the error.
    pub fn token(&self, id: u64, what: &str) -> Result<TokenId, RemoteError> {
        match TokenId::try_from(id) {
            Ok(token) if usize::try_from(token).is_ok_and(|t| t < self.vocab) => Ok(token),
            _ => Err(self.impossible(format!(
                "the token id {id} for {what}, outside the model's vocabulary of {} tokens",
                self.vocab
            ))),
        }
    }

    /// A log-probability, which must be a finite number of at most 0 as the f32 it is kept in
    /// (1e39 is finite as an f64 and infinite as an f32); `what` names its token in the error.
    pub fn logprob(&self, value: f64, what: &str) -> Result<f32, RemoteError> {
        #[allow(clippy::cast_possible_truncation)]
        let kept = value as f32;
        if kept.is_finite() && kept <= 0.0 {
            Ok(kept)
        } else {
            Err(self.impossible(format!(
                "the log-probability {} for {what}, where a log-probability is a finite number \
                 of at most 0",
                readable(value)
            )))
        }
    }

    /// At most as many alternatives for one position as the vocabulary has tokens.
    pub fn alternative_count(&self, count: usize) -> Result<(), RemoteError> {
        if count > self.vocab {
            return Err(self.impossible(format!(
                "{count} alternatives for one position, more than the model's {} tokens",
                self.vocab
            )));
        }
        Ok(())
    }

    /// One position as both llama-server APIs write it, checked.
    pub fn position(&self, wire: WirePosition) -> Result<TokenProbs, RemoteError> {
        let alternatives = wire.top_logprobs.unwrap_or_default();
        self.alternative_count(alternatives.len())?;
        let id = self.token(wire.id, "a generated token")?;
        Ok(TokenProbs {
            id,
            logprob: self.logprob(wire.logprob, &format!("the generated token {id}"))?,
            top_logprobs: alternatives
                .into_iter()
                .map(|a| {
                    let id = self.token(a.id, "an alternative")?;
                    let logprob = self.logprob(a.logprob, &format!("the alternative {id}"))?;
                    Ok(Alternative { id, logprob })
                })
                .collect::<Result<_, RemoteError>>()?,
        })
    }

    /// The error for the server's own report of a failure.
    pub fn reported(&self, error: &ReportedError) -> RemoteError {
        reported(self.url, error)
    }
}

/// The error for a server's own report of a failure: the report is logged, not carried.
fn reported(url: &str, error: &ReportedError) -> RemoteError {
    tracing::warn!(%url, message = %error.0, "the generator server reported an error");
    RemoteError::Interrupted {
        url: url.to_owned(),
        message: "the server reported an error (its message is in the app's log)".into(),
    }
}

/// `value` as a person reads it: `1e39`, not forty digits.
fn readable(value: f64) -> String {
    if value == 0.0 || (1e-4..1e16).contains(&value.abs()) {
        value.to_string()
    } else {
        format!("{value:e}")
    }
}

/// One generated position as llama-server writes it, natively (`completion_probabilities[]`)
/// and on `/v1` (`logprobs.content[]`); the token's text and bytes are skipped.
#[derive(Debug, Deserialize)]
pub(crate) struct WirePosition {
    id: u64,
    logprob: f64,
    #[serde(default)]
    top_logprobs: Option<Vec<WireAlternative>>,
}

#[derive(Debug, Deserialize)]
struct WireAlternative {
    id: u64,
    logprob: f64,
}

/// What a server said went wrong: `error` as text, or an object's `message`, at most
/// [`REPORTED_LIMIT`] characters; for the log only (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct ReportedError(pub String);

impl<'de> Deserialize<'de> for ReportedError {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Report;
        impl<'de> Visitor<'de> for Report {
            type Value = ReportedError;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an error message or object")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<ReportedError, E> {
                Ok(ReportedError(text.chars().take(REPORTED_LIMIT).collect()))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ReportedError, A::Error> {
                let mut report = ReportedError::default();
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    if key == "message" {
                        report = map.next_value::<ReportedError>()?;
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(report)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ReportedError, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(ReportedError("(a list)".into()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<ReportedError, E> {
                Ok(ReportedError(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ReportedError, E> {
                Ok(ReportedError(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ReportedError, E> {
                Ok(ReportedError(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<ReportedError, E> {
                Ok(ReportedError(v.to_string()))
            }
            fn visit_unit<E: de::Error>(self) -> Result<ReportedError, E> {
                Ok(ReportedError::default())
            }
        }
        deserializer.deserialize_any(Report)
    }
}

/// A JSON object read as its entries, in order, keys kept as text: vLLM keys its alternatives
/// by token (`"token_id:N"`) and its prompt scores by id (`"N"`). A list, not a hash map: no
/// table is built for entries that are read once.
#[derive(Debug)]
pub(crate) struct Entries<V>(pub Vec<(String, V)>);

impl<'de, V: Deserialize<'de>> Deserialize<'de> for Entries<V> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EntriesVisitor<V>(PhantomData<V>);
        impl<'de, V: Deserialize<'de>> Visitor<'de> for EntriesVisitor<V> {
            type Value = Entries<V>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries<V>, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    entries.push(entry);
                }
                Ok(Entries(entries))
            }
        }
        deserializer.deserialize_map(EntriesVisitor(PhantomData))
    }
}

/// The last element of a JSON list, the others read and dropped (`None` for an empty list):
/// vLLM scores every prompt position, and only the last one is asked for.
#[derive(Debug)]
pub(crate) struct LastOf<T>(pub Option<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for LastOf<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct LastVisitor<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for LastVisitor<T> {
            type Value = LastOf<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a list")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<LastOf<T>, A::Error> {
                let mut last = None;
                while let Some(element) = seq.next_element()? {
                    last = Some(element);
                }
                Ok(LastOf(last))
            }
        }
        deserializer.deserialize_seq(LastVisitor(PhantomData))
    }
}

/// The whole body of a reply, refused past `limit` bytes; `what` names the request.
pub(crate) fn read_body(
    url: &str,
    body: impl Read,
    limit: usize,
    what: &str,
) -> Result<Vec<u8>, RemoteError> {
    let mut bytes = Vec::new();
    body.take(u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| RemoteError::Interrupted {
            url: url.to_owned(),
            message: format!("reading the reply to {what}: {e}"),
        })?;
    if bytes.len() > limit {
        return Err(RemoteError::ReplyTooLarge {
            url: url.to_owned(),
            what: format!("a reply to {what}"),
            limit_mib: limit >> 20,
        });
    }
    Ok(bytes)
}

/// `bytes` as JSON of type `T`, or what is wrong with it in our words (see the module docs);
/// the parser's own message, which quotes the reply, goes to the log.
pub(crate) fn parse_json<T: DeserializeOwned>(
    url: &str,
    bytes: &[u8],
    what: &str,
) -> Result<T, String> {
    serde_json::from_slice(bytes).map_err(|e| {
        tracing::warn!(%url, error = %e, "{what} could not be read");
        let kind = match e.classify() {
            serde_json::error::Category::Syntax => "is not JSON",
            serde_json::error::Category::Eof => "ends before its JSON does",
            serde_json::error::Category::Data | serde_json::error::Category::Io => {
                "is JSON of another shape than expected"
            }
        };
        format!("{what} {kind} (line {}, column {})", e.line(), e.column())
    })
}

/// Server-sent events: the `data:` payload of each event, until the stream ends or `[DONE]`.
/// A line longer than [`EVENT_LINE_LIMIT`], an unreadable one, or an `error:` line (how
/// llama-server reports a failure inside a stream) is the server stopping mid-answer, and
/// the last item.
pub(crate) fn events(
    url: &str,
    body: impl Read,
) -> impl Iterator<Item = Result<Vec<u8>, RemoteError>> {
    let url = url.to_owned();
    let mut body = BufReader::new(body);
    let mut ended = false;
    std::iter::from_fn(move || {
        while !ended {
            let line = match read_line(&mut body, EVENT_LINE_LIMIT) {
                Ok(Some(line)) => line,
                Ok(None) => return None,
                Err(e) => {
                    ended = true;
                    return Some(Err(match e {
                        LineError::TooLong => RemoteError::ReplyTooLarge {
                            url: url.clone(),
                            what: "one line of its stream".into(),
                            limit_mib: EVENT_LINE_LIMIT >> 20,
                        },
                        LineError::Read(e) => RemoteError::Interrupted {
                            url: url.clone(),
                            message: e.to_string(),
                        },
                    }));
                }
            };
            if let Some(error) = line.strip_prefix(b"error:") {
                ended = true;
                let error = ReportedError(
                    String::from_utf8_lossy(error)
                        .trim()
                        .chars()
                        .take(REPORTED_LIMIT)
                        .collect(),
                );
                return Some(Err(reported(&url, &error)));
            }
            let Some(data) = line.strip_prefix(b"data:") else {
                continue; // comments, `event:` and the blank line that ends an event
            };
            let data = data.trim_ascii();
            if data == b"[DONE]" {
                ended = true;
                return None;
            }
            return Some(Ok(data.to_vec()));
        }
        None
    })
}

enum LineError {
    TooLong,
    Read(std::io::Error),
}

/// The next line without its `\n` or `\r\n`, of at most `limit` bytes; `None` at the end.
fn read_line(body: &mut impl BufRead, limit: usize) -> Result<Option<Vec<u8>>, LineError> {
    let mut line = Vec::new();
    // Room for the `\r\n` after a line of `limit` bytes.
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(2);
    let read = body
        .by_ref()
        .take(cap)
        .read_until(b'\n', &mut line)
        .map_err(LineError::Read)?;
    if read == 0 {
        return Ok(None);
    }
    if line.last() == Some(&b'\n') {
        line.pop();
        if line.last() == Some(&b'\r') {
            line.pop();
        }
    }
    if line.len() > limit {
        return Err(LineError::TooLong);
    }
    Ok(Some(line))
}

/// A reply [`read_reply`] reads, as the generator asks for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplyKind {
    /// llama-server's `/completion`, streamed: server-sent events, one token each.
    LlamaCppStream,
    /// llama-server's `/completion` for one position (`n_probs` alternatives), not streamed.
    LlamaCppCompletion,
    /// `/v1/completions` with `logprobs`, streamed (llama-server's or vLLM's shape).
    OpenAiStream,
    /// `/v1/completions` with `logprobs` for one position, not streamed.
    OpenAiCompletion,
    /// `/v1/completions` with `prompt_logprobs`: choice `i` scores `ids[i]` as the last token
    /// of its prompt (vLLM).
    OpenAiPromptLogprobs { ids: Vec<TokenId> },
}

/// Every number [`read_reply`] read, as the generator would use it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReplyNumbers {
    /// Each position's token and log-probability, in order.
    pub positions: Vec<(TokenId, f32)>,
    /// Every alternative of every position: token and log-probability.
    pub alternatives: Vec<(TokenId, f32)>,
    /// The probabilities of the scored ids (`prompt_logprobs`), where the reply gave all.
    pub scores: Option<Vec<f32>>,
}

/// The token limit a stream given to [`read_reply`] is followed with.
const READ_REPLY_TOKENS: usize = 256;

/// Reads `bytes` as the body of a reply of `kind` from the server at `url` whose model has
/// `vocab` tokens, with the parsers, limits and checks the generator reads replies with (a
/// stream followed as `stream::follow` follows it; a position the stream skips is not asked
/// for, and is an error). For fuzzing and tests; the generator itself reads from the network.
pub fn read_reply(
    url: &str,
    kind: &ReplyKind,
    bytes: &[u8],
    vocab: usize,
) -> Result<ReplyNumbers, RemoteError> {
    let check = ReplyCheck { url, vocab };
    let whole = || read_body(url, bytes, REPLY_LIMIT, "the completion");
    let mut read: Vec<TokenProbs> = Vec::new();
    let mut scores = None;
    // A stream followed as the generator follows it, from an empty prompt.
    let mut follow = |events: &mut dyn Iterator<Item = Result<StreamEvent, RemoteError>>| {
        let skipped = |_: &[TokenId]| -> Result<TokenProbs, RemoteError> {
            Err(RemoteError::Interrupted {
                url: url.to_owned(),
                message: "read_reply does not ask for a position the stream skipped".into(),
            })
        };
        crate::stream::follow(url, &[], READ_REPLY_TOKENS, events, skipped, |position| {
            read.push(position);
            true
        })
    };
    match kind {
        ReplyKind::LlamaCppStream => {
            let mut events = events(url, bytes).filter_map(|data| match data {
                Ok(data) => crate::llama_server::stream_event(check, &data).transpose(),
                Err(e) => Some(Err(e)),
            });
            follow(&mut events)?;
        }
        ReplyKind::OpenAiStream => {
            let mut events = events(url, bytes)
                .map(|data| data.and_then(|data| crate::openai::stream_event(check, &data)));
            follow(&mut events)?;
        }
        ReplyKind::LlamaCppCompletion => {
            read.push(crate::llama_server::completion_position(check, &whole()?)?);
        }
        ReplyKind::OpenAiCompletion => {
            read.push(crate::openai::completion_position(check, &whole()?)?);
        }
        ReplyKind::OpenAiPromptLogprobs { ids } => {
            scores = crate::openai::scored(check, &whole()?, ids)?;
        }
    }
    Ok(ReplyNumbers {
        positions: read.iter().map(|p| (p.id, p.logprob)).collect(),
        alternatives: read
            .iter()
            .flat_map(|p| p.top_logprobs.iter().map(|a| (a.id, a.logprob)))
            .collect(),
        scores,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &[u8], limit: usize) -> Vec<Result<Vec<u8>, ()>> {
        let mut body = BufReader::new(text);
        let mut out = Vec::new();
        loop {
            match read_line(&mut body, limit) {
                Ok(Some(line)) => out.push(Ok(line)),
                Ok(None) => return out,
                Err(_) => {
                    out.push(Err(()));
                    return out;
                }
            }
        }
    }

    #[test]
    fn a_line_is_read_up_to_its_limit_and_refused_past_it() {
        assert_eq!(
            lines(b"abcd\r\nxy\nz", 4),
            [Ok(b"abcd".to_vec()), Ok(b"xy".to_vec()), Ok(b"z".to_vec())]
        );
        assert_eq!(lines(b"abcde\nxy", 4), [Err(())]);
        assert_eq!(lines(b"abcd\rx\n", 4), [Err(())]);
        assert_eq!(lines(b"abcde", 4), [Err(())]);
    }

    /// The fuzz target's seeds, as the real shapes: each reads to what the generator uses.
    #[test]
    fn read_reply_reads_every_seed_of_the_fuzz_target() {
        let seeds = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fuzz/seeds/server_replies");
        let mut read = 0;
        for entry in std::fs::read_dir(&seeds).unwrap() {
            let path = entry.unwrap().path();
            let bytes = std::fs::read(&path).unwrap();
            let kind = match bytes[0] {
                0 => ReplyKind::LlamaCppStream,
                1 => ReplyKind::LlamaCppCompletion,
                2 => ReplyKind::OpenAiStream,
                3 => ReplyKind::OpenAiCompletion,
                _ => ReplyKind::OpenAiPromptLogprobs {
                    ids: vec![32_003, 32_004, 7],
                },
            };
            let numbers = read_reply("http://gpu:8080", &kind, &bytes[1..], 32_016)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            match kind {
                ReplyKind::OpenAiPromptLogprobs { .. } => {
                    let scores = numbers.scores.unwrap();
                    let expected = [(-4.0f32).exp(), (-2.0f32).exp(), (-0.75f32).exp()];
                    assert_eq!(scores, expected, "{}", path.display());
                }
                _ => assert!(!numbers.positions.is_empty(), "{}", path.display()),
            }
            read += 1;
        }
        assert_eq!(read, 6);
    }

    #[test]
    fn a_server_error_is_logged_not_quoted() {
        let reported: ReportedError =
            serde_json::from_str(r#"{"code": 500, "message": "secret text", "type": "x"}"#)
                .unwrap();
        assert_eq!(reported.0, "secret text");
        let err = ReplyCheck {
            url: "http://gpu:8080",
            vocab: 10,
        }
        .reported(&reported);
        assert!(!err.to_string().contains("secret"), "{err}");
        assert!(err.to_string().contains("http://gpu:8080"), "{err}");
    }

    #[test]
    fn a_log_probability_is_finite_and_at_most_zero_as_an_f32() {
        let check = ReplyCheck {
            url: "http://gpu:8080",
            vocab: 10,
        };
        assert_eq!(check.logprob(-0.5, "t").unwrap(), -0.5);
        assert_eq!(check.logprob(0.0, "t").unwrap(), 0.0);
        // llama-server writes a zero probability as f32's lowest value, not -inf.
        assert_eq!(check.logprob(-3.402_823_47e38, "t").unwrap(), f32::MIN);
        for bad in [1e-3, 1e39, -1e39] {
            let err = check.logprob(bad, "t").unwrap_err();
            assert!(
                matches!(err, RemoteError::ImpossibleValue { .. }),
                "{bad}: {err:?}"
            );
        }
        assert_eq!(check.token(9, "t").unwrap(), 9);
        assert!(check.token(10, "t").is_err());
        assert!(check.token(u64::MAX, "t").is_err());
    }
}
