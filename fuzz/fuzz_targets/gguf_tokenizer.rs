//! Fuzzes the GGUF tokenizer two ways, chosen by the first byte: (even) the rest is a GGUF file,
//! read with candle's header reader and turned into a tokenizer (no panic, errors only); (odd)
//! the rest is text, encoded by the tiny Self-RAG tokenizer with and without special tokens
//! (no panic; without special tokens no reflection token comes out; decode gives the text back).

#![no_main]

use std::sync::OnceLock;

use candle_core::quantized::gguf_file;
use libfuzzer_sys::fuzz_target;
use selfrag_models::{GgufTokenizer, TokenType, fixtures};

fn tiny() -> &'static GgufTokenizer {
    static TOKENIZER: OnceLock<GgufTokenizer> = OnceLock::new();
    TOKENIZER.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("tiny.gguf");
        fixtures::write_tiny_llama_gguf(&path).expect("tiny GGUF");
        GgufTokenizer::from_gguf_file(&path).expect("tiny tokenizer")
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode % 2 == 0 {
        let mut cursor = std::io::Cursor::new(rest);
        if let Ok(content) = gguf_file::Content::read(&mut cursor) {
            if let Ok(tokenizer) = GgufTokenizer::from_gguf(&content) {
                let ids = tokenizer.encode("Hello <paragraph> [Retrieval] world", true);
                let _ = tokenizer.decode(&ids);
            }
        }
        return;
    }
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let tokenizer = tiny();
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
