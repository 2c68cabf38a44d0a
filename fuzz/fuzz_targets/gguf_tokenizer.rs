//! Fuzzes the GGUF tokenizer two ways, chosen by the first byte: (even) the rest is a GGUF file,
//! read as `selfrag debug tokenize` reads one (no panic, errors only; a candle panic that
//! `gguf_header::read` catches is an error here as in the app, see
//! [`selfrag_fuzz::as_the_app_runs_it`]); (odd) the rest is text, encoded by the tiny Self-RAG
//! tokenizer with and without special tokens (no panic; without special tokens no reflection
//! token comes out; decode gives the text back).

#![no_main]

use libfuzzer_sys::fuzz_target;
use selfrag_models::{GgufTokenizer, TokenType};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode % 2 == 0 {
        // Through the app's own entry point: the file is read by `gguf_header::read`.
        let Ok(dir) = tempfile::tempdir() else {
            return;
        };
        let path = dir.path().join("fuzzed.gguf");
        if std::fs::write(&path, rest).is_ok()
            && let Ok(tokenizer) =
                selfrag_fuzz::as_the_app_runs_it(|| GgufTokenizer::from_gguf_file(&path))
        {
            let ids = tokenizer.encode("Hello <paragraph> [Retrieval] world", true);
            let _ = tokenizer.decode(&ids);
        }
        return;
    }
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let tokenizer = selfrag_fuzz::tiny_tokenizer();
    for parse_special in [false, true] {
        let ids = tokenizer.encode(text, parse_special);
        assert!(ids.iter().all(|&id| (id as usize) < tokenizer.vocab_size()));
        if !parse_special {
            assert!(
                ids.iter().all(|&id| !matches!(
                    tokenizer.token_type(id),
                    Some(TokenType::UserDefined | TokenType::Control)
                )),
                "text made a special token without parse_special: {text:?}"
            );
        }
        let _ = tokenizer.decode(&ids);
    }
});
