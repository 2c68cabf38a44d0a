//! Where the dummy-prefix `▁` goes after a special token, against transformers' slow
//! `LlamaTokenizer` (golden file written by scripts/golden/space_prefix.py from a SentencePiece
//! model it trains, with the 16 Self-RAG tokens added as the fine-tuning script added them).
//!
//! - `legacy_false`: `"legacy": false`, the setting of the tokenizer the checkpoints were
//!   fine-tuned with, is [`DummyPrefix::TextStart`] (the default);
//! - `legacy_true`: the older transformers behaviour, and llama.cpp's since May 2024, is
//!   [`DummyPrefix::EveryFragment`];
//! - `legacy_false_strip`: transformers <= 4.34 also dropped whitespace next to a special token
//!   added as a plain string, which the fine-tuning script did: the training data is
//!   `TextStart` on the text with that whitespace removed.

use std::collections::HashMap;

use candle_core::quantized::gguf_file::{Content, Value, VersionedMagic};
use selfrag_models::{DummyPrefix, GgufTokenizer, TokenType};
use serde::Deserialize;

#[derive(Deserialize)]
struct Golden {
    vocab: Vec<Piece>,
    special_tokens: HashMap<String, u32>,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Piece {
    piece: String,
    score: f32,
    /// SentencePiece's type: 1 normal, 2 unknown, 3 control, 6 byte (GGUF uses the same codes).
    #[serde(rename = "type")]
    kind: i32,
}

#[derive(Deserialize)]
struct Case {
    text: String,
    legacy_true: Vec<u32>,
    legacy_false: Vec<u32>,
    legacy_false_strip: Vec<u32>,
}

fn golden() -> Golden {
    serde_json::from_str(include_str!("../golden/space_prefix.json")).unwrap()
}

/// The golden SentencePiece model plus the Self-RAG tokens, as GGUF tokenizer metadata with
/// the layout llama.cpp's converter writes (added tokens user-defined, score 0).
fn tokenizer(golden: &Golden) -> GgufTokenizer {
    let mut specials: Vec<(&String, &u32)> = golden.special_tokens.iter().collect();
    specials.sort_by_key(|(_, id)| **id);
    assert_eq!(*specials[0].1 as usize, golden.vocab.len());
    let mut tokens: Vec<Value> = golden
        .vocab
        .iter()
        .map(|p| Value::String(p.piece.clone()))
        .collect();
    let mut scores: Vec<Value> = golden.vocab.iter().map(|p| Value::F32(p.score)).collect();
    let mut types: Vec<Value> = golden.vocab.iter().map(|p| Value::I32(p.kind)).collect();
    for (token, _) in &specials {
        tokens.push(Value::String((*token).clone()));
        scores.push(Value::F32(0.0));
        types.push(Value::I32(TokenType::UserDefined.code()));
    }
    let metadata = [
        ("tokenizer.ggml.model", Value::String("llama".to_owned())),
        ("tokenizer.ggml.tokens", Value::Array(tokens)),
        ("tokenizer.ggml.scores", Value::Array(scores)),
        ("tokenizer.ggml.token_type", Value::Array(types)),
        ("tokenizer.ggml.unknown_token_id", Value::U32(0)),
        ("tokenizer.ggml.bos_token_id", Value::U32(1)),
        ("tokenizer.ggml.eos_token_id", Value::U32(2)),
        (
            "tokenizer.ggml.padding_token_id",
            Value::U32(golden.special_tokens["<pad>"]),
        ),
    ];
    GgufTokenizer::from_gguf(&Content {
        magic: VersionedMagic::GgufV3,
        metadata: metadata
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
        tensor_infos: HashMap::new(),
        tensor_data_offset: 0,
    })
    .unwrap()
}

fn pieces(tok: &GgufTokenizer, ids: &[u32]) -> Vec<String> {
    ids.iter()
        .map(|&id| tok.id_to_token(id).unwrap_or("?").to_owned())
        .collect()
}

/// `text` without the whitespace next to each special token (transformers <= 4.34's
/// `lstrip`/`rstrip` for special tokens added as strings).
fn strip_around_specials(text: &str, specials: &[&str]) -> String {
    let mut pieces: Vec<(bool, &str)> = Vec::new();
    let mut rest = text;
    'outer: while !rest.is_empty() {
        for (at, _) in rest.char_indices() {
            if let Some(special) = specials.iter().find(|s| rest[at..].starts_with(**s)) {
                pieces.push((false, &rest[..at]));
                pieces.push((true, special));
                rest = &rest[at + special.len()..];
                continue 'outer;
            }
        }
        pieces.push((false, rest));
        break;
    }
    let mut out = String::new();
    for (i, &(special, piece)) in pieces.iter().enumerate() {
        let mut piece = piece;
        if !special {
            if i > 0 && pieces[i - 1].0 {
                piece = piece.trim_start();
            }
            if pieces.get(i + 1).is_some_and(|p| p.0) {
                piece = piece.trim_end();
            }
        }
        out.push_str(piece);
    }
    out
}

/// `tok` encodes every golden text (special tokens parsed) to the ids `theirs` picks.
fn assert_encodes_as(tok: &GgufTokenizer, golden: &Golden, theirs: fn(&Case) -> &[u32]) {
    for case in &golden.cases {
        let ours = tok.encode(&case.text, true);
        assert_eq!(
            ours,
            theirs(case),
            "{:?}\nours:   {:?}\ntheirs: {:?}",
            case.text,
            pieces(tok, &ours),
            pieces(tok, theirs(case))
        );
    }
}

#[test]
fn the_default_is_the_fine_tuning_tokenizer_legacy_false() {
    let golden = golden();
    let tok = tokenizer(&golden);
    assert_eq!(tok.dummy_prefix(), DummyPrefix::TextStart);
    assert_encodes_as(&tok, &golden, |case| &case.legacy_false);
}

#[test]
fn every_fragment_is_legacy_true_and_llama_cpp() {
    let golden = golden();
    let tok = tokenizer(&golden).with_dummy_prefix(DummyPrefix::EveryFragment);
    assert_encodes_as(&tok, &golden, |case| &case.legacy_true);
}

#[test]
fn the_training_data_is_text_start_without_whitespace_next_to_special_tokens() {
    let golden = golden();
    let tok = tokenizer(&golden);
    let specials: Vec<&str> = golden.special_tokens.keys().map(String::as_str).collect();
    for case in &golden.cases {
        let stripped = strip_around_specials(&case.text, &specials);
        assert_eq!(
            tok.encode(&stripped, true),
            case.legacy_false_strip,
            "{stripped:?}"
        );
    }
    // `### Response:\n[Retrieval]` was read as `### Response:[Retrieval]` in training.
    let response = &golden.cases[0];
    assert_eq!(
        response.legacy_false_strip.len() + 1,
        response.legacy_false.len()
    );
}

#[test]
fn text_after_a_special_token_follows_the_setting() {
    let golden = golden();
    let plain = tokenizer(&golden);
    let llama_cpp = plain.clone().with_dummy_prefix(DummyPrefix::EveryFragment);
    let paragraph = golden.special_tokens["<paragraph>"];
    for tok in [&plain, &llama_cpp] {
        // What `encode_after_special` gives is what the same text reads as after `<paragraph>`.
        let text = "Alpha Title\nThe text of it.";
        let mut expected = vec![paragraph];
        expected.extend(tok.encode_after_special(text));
        assert_eq!(tok.encode(&format!("<paragraph>{text}"), true), expected);
        // The start of a sequence is prefixed either way.
        assert_eq!(tok.encode(text, false), plain.encode(text, false));
    }
    assert_ne!(
        plain.encode_after_special("Alpha"),
        llama_cpp.encode_after_special("Alpha")
    );
    assert_eq!(
        llama_cpp.id_to_token(llama_cpp.encode_after_special("Alpha")[0]),
        Some("\u{2581}")
    );
}
