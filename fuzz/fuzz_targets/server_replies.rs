//! Fuzzes the readers of a generator server's replies (`selfrag_remote::read_reply`, the
//! parsers, limits and checks `ServerGenerator` reads the network with). The first byte picks
//! the reply: llama-server's `/completion` streamed as server-sent events or answered whole, or
//! `/v1/completions` with `logprobs` streamed or whole (llama-server's and vLLM's shapes), or
//! with `prompt_logprobs` (vLLM); the rest is the reply's body. No panic, no huge allocation;
//! and whatever is read is what a model can give: every token id inside the vocabulary, every
//! log-probability finite and at most 0, every score a probability, one per asked id.

#![no_main]

use libfuzzer_sys::fuzz_target;
use selfrag_core::TokenId;
use selfrag_remote::{ReplyKind, read_reply};

/// Llama-2's 32,000 tokens and the 16 Self-RAG tokens: the published model's vocabulary.
const VOCAB: usize = 32_016;

/// The ids a `prompt_logprobs` reply scores: two reflection tokens and a plain one.
const SCORED: [TokenId; 3] = [32_003, 32_004, 7];

fuzz_target!(|data: &[u8]| {
    let Some((&pick, body)) = data.split_first() else {
        return;
    };
    let kind = match pick % 5 {
        0 => ReplyKind::LlamaCppStream,
        1 => ReplyKind::LlamaCppCompletion,
        2 => ReplyKind::OpenAiStream,
        3 => ReplyKind::OpenAiCompletion,
        _ => ReplyKind::OpenAiPromptLogprobs {
            ids: SCORED.to_vec(),
        },
    };
    let numbers = match read_reply("http://127.0.0.1:8080", &kind, body, VOCAB) {
        Ok(numbers) => numbers,
        Err(e) => {
            // Every error names the server, and says what went wrong in a bounded message.
            let message = e.to_string();
            assert!(message.contains("http://127.0.0.1:8080"), "{message}");
            assert!(
                message.len() < 4096,
                "{} bytes: {message:.200}",
                message.len()
            );
            return;
        }
    };
    for &(id, logprob) in numbers.positions.iter().chain(&numbers.alternatives) {
        assert!(usize::try_from(id).is_ok_and(|id| id < VOCAB), "id {id}");
        assert!(
            logprob.is_finite() && logprob <= 0.0,
            "log-probability {logprob}"
        );
    }
    if let Some(scores) = numbers.scores {
        assert_eq!(scores.len(), SCORED.len());
        for p in scores {
            assert!((0.0..=1.0).contains(&p), "score {p}");
        }
    }
});
