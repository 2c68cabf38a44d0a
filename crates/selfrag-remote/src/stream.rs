//! What both server APIs return for a generated position, and the one way a streamed
//! completion is followed: positions in order, the ones the server never sent read again, the
//! caller free to stop at any token.
//!
//! llama-server sends nothing for a token that leaves an incomplete UTF-8 character (a byte
//! token in the middle of a multi-byte character): neither its id nor its probabilities, on
//! its native API and its OpenAI-compatible one alike. Its events count the tokens generated
//! so far, so a gap is seen, and each missing position is read with a one-token request on
//! the same prefix, which the server's cache holds: greedy, the same token it chose. A server
//! that sends every token (vLLM) never has a gap.

use selfrag_core::TokenId;

use crate::RemoteError;

/// One generated position as a server reports it, checked as `reply` checks every number:
/// ids in the vocabulary, log-probabilities finite and at most 0.
#[derive(Debug, Clone)]
pub(crate) struct TokenProbs {
    pub id: TokenId,
    pub logprob: f32,
    /// The most likely tokens at this position (their order does not matter).
    pub top_logprobs: Vec<Alternative>,
}

#[derive(Debug, Clone)]
pub(crate) struct Alternative {
    pub id: TokenId,
    pub logprob: f32,
}

impl TokenProbs {
    /// The position whose token is the most likely of `top_logprobs` (a one-token request
    /// reads the greedy choice from the probabilities, not from what the server sampled).
    pub fn most_likely(top_logprobs: Vec<Alternative>) -> Option<Self> {
        let best = top_logprobs
            .iter()
            .max_by(|a, b| a.logprob.total_cmp(&b.logprob))?
            .clone();
        Some(Self {
            id: best.id,
            logprob: best.logprob,
            top_logprobs,
        })
    }

    /// The probabilities of `ids` here, if all of them are among the alternatives.
    pub fn lookup(&self, ids: &[TokenId]) -> Option<Vec<f32>> {
        ids.iter()
            .map(|&id| {
                self.top_logprobs
                    .iter()
                    .find(|a| a.id == id)
                    .map(|a| a.logprob.exp())
            })
            .collect()
    }
}

/// How a streamed completion ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StreamEnd {
    /// The server stopped: end of sequence.
    Eos,
    /// The server stopped: the token limit.
    Limit,
    /// The caller stopped reading.
    Caller,
}

/// One event of a streamed completion, in the terms both APIs share.
#[derive(Debug, Default)]
pub(crate) struct StreamEvent {
    /// The positions it carries, in order.
    pub positions: Vec<TokenProbs>,
    /// Tokens generated so far, these included, where the server counts them.
    pub generated: Option<usize>,
    /// Set on the last event: how the server stopped.
    pub end: Option<StreamEnd>,
}

/// Follows a streamed greedy continuation of `prompt` of at most `limit` tokens: `on_token`
/// sees every position in order and returns `false` to stop reading (dropping the reply then
/// closes the connection, and the server stops decoding). `next_position` reads one position
/// after a prefix, for the ones the stream skipped.
pub(crate) fn follow(
    url: &str,
    prompt: &[TokenId],
    limit: usize,
    events: impl Iterator<Item = Result<StreamEvent, RemoteError>>,
    next_position: impl Fn(&[TokenId]) -> Result<TokenProbs, RemoteError>,
    mut on_token: impl FnMut(TokenProbs) -> bool,
) -> Result<StreamEnd, RemoteError> {
    let mut context = prompt.to_vec();
    let mut generated = 0usize;
    // Gaps are filled only where every event so far was counted: without the counts, where a
    // token is missing cannot be told, and a filled gap would continue the wrong prefix.
    let mut counted_throughout = true;
    let miscounted = |generated: usize, counted: usize| RemoteError::Interrupted {
        url: url.to_owned(),
        message: format!(
            "its count of generated tokens ({counted}) does not match the {generated} it sent"
        ),
    };
    // Hands one position on; false when the caller stopped.
    let mut take = |context: &mut Vec<TokenId>, generated: &mut usize, position: TokenProbs| {
        context.push(position.id);
        *generated += 1;
        on_token(position)
    };
    for event in events {
        let event = event?;
        // The positions before this event's own that were never sent are read first.
        let sent_before = event
            .generated
            .map(|n| n.saturating_sub(event.positions.len()));
        if event.generated.is_none() && !event.positions.is_empty() {
            counted_throughout = false;
        }
        if let Some(upto) = sent_before {
            if upto < generated || (upto > generated && !counted_throughout) {
                return Err(miscounted(generated, upto));
            }
            while generated < upto.min(limit) {
                let position = next_position(&context)?;
                if !take(&mut context, &mut generated, position) {
                    return Ok(StreamEnd::Caller);
                }
            }
        }
        for position in event.positions {
            if !take(&mut context, &mut generated, position) {
                return Ok(StreamEnd::Caller);
            }
        }
        if let Some(end) = event.end {
            return Ok(end);
        }
    }
    Err(RemoteError::Interrupted {
        url: url.to_owned(),
        message: "the stream ended before the server said it had stopped".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn position(id: TokenId) -> TokenProbs {
        TokenProbs {
            id,
            logprob: -0.5,
            top_logprobs: vec![Alternative { id, logprob: -0.5 }],
        }
    }

    fn event(ids: &[TokenId], generated: Option<usize>, end: Option<StreamEnd>) -> StreamEvent {
        StreamEvent {
            positions: ids.iter().copied().map(position).collect(),
            generated,
            end,
        }
    }

    /// Follows `events` after the prompt `[1]`; a skipped position is read as token 100 + its
    /// index in the row.
    fn run(events: Vec<StreamEvent>) -> Result<(Vec<TokenId>, StreamEnd), RemoteError> {
        let mut seen = Vec::new();
        let end = follow(
            "http://gpu:8080",
            &[1],
            10,
            events.into_iter().map(Ok),
            |prefix| Ok(position(100 + prefix.len() as TokenId - 1)),
            |p| {
                seen.push(p.id);
                true
            },
        )?;
        Ok((seen, end))
    }

    #[test]
    fn counted_gaps_are_read_in_place_and_trailing_ones_at_the_end() {
        // The server skipped the 2nd token (an incomplete character) and the 4th, the last.
        let (ids, end) = run(vec![
            event(&[7], Some(1), None),
            event(&[9], Some(3), None),
            event(&[], Some(4), Some(StreamEnd::Eos)),
        ])
        .unwrap();
        assert_eq!(ids, [7, 101, 9, 103]);
        assert_eq!(end, StreamEnd::Eos);
    }

    #[test]
    fn a_gap_after_uncounted_events_or_a_count_behind_is_an_error_not_a_guess() {
        // No counts until the end: where the missing token was cannot be told.
        let err = run(vec![
            event(&[7], None, None),
            event(&[9], None, None),
            event(&[], Some(3), Some(StreamEnd::Eos)),
        ])
        .unwrap_err();
        assert!(err.to_string().contains("does not match"), "{err}");
        // Uncounted and complete (vLLM sends every token): fine.
        let (ids, _) = run(vec![
            event(&[7, 9], None, None),
            event(&[2], Some(3), Some(StreamEnd::Eos)),
        ])
        .unwrap();
        assert_eq!(ids, [7, 9, 2]);
        // A count behind what was sent.
        let err = run(vec![event(&[7, 9], Some(1), None)]).unwrap_err();
        assert!(err.to_string().contains("http://gpu:8080"), "{err}");
    }

    #[test]
    fn a_stream_cut_before_its_end_is_an_interruption() {
        let err = run(vec![event(&[7], Some(1), None)]).unwrap_err();
        assert!(matches!(err, RemoteError::Interrupted { .. }), "{err:?}");
    }
}
