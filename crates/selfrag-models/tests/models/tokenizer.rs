//! `GgufTokenizer`: SPM encoding, byte fallback, special tokens, decoding.

use std::collections::HashMap;

use candle_core::quantized::gguf_file::{Content, Value, VersionedMagic};
use selfrag_fixtures::SELFRAG_SPECIAL_TOKENS;
use selfrag_models::{GgufTokenizer, TokenType};

use crate::tiny_gguf;

fn tiny_tokenizer() -> GgufTokenizer {
    let (_dir, path) = tiny_gguf();
    let mut file = std::fs::File::open(&path).unwrap();
    let content = Content::read(&mut file).unwrap();
    GgufTokenizer::from_gguf(&content).unwrap()
}

fn content(metadata: Vec<(&str, Value)>) -> Content {
    Content {
        magic: VersionedMagic::GgufV3,
        metadata: metadata
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect::<HashMap<_, _>>(),
        tensor_infos: HashMap::new(),
        tensor_data_offset: 0,
    }
}

fn strings(items: &[&str]) -> Value {
    Value::Array(
        items
            .iter()
            .map(|s| Value::String((*s).to_owned()))
            .collect(),
    )
}

fn special_ids(tok: &GgufTokenizer) -> Vec<u32> {
    (0..tok.vocab_size() as u32)
        .filter(|&id| {
            matches!(
                tok.token_type(id),
                Some(TokenType::Control | TokenType::UserDefined | TokenType::Unknown)
            )
        })
        .collect()
}

#[test]
fn ascii_text_roundtrips() {
    let tok = tiny_tokenizer();
    for text in [
        "The city of Paris is the capital of France.",
        "Hello, world! 1234 (x+y)^2 = z; #tag @user ~`|{}[]\\\"'",
        "### Instruction:\nWho wrote it?\n\n### Response:\n",
        "  two leading spaces and  a double space ",
        "tabs\tand\r\nnewlines",
    ] {
        let ids = tok.encode(text, false);
        assert!(!ids.is_empty());
        assert_eq!(tok.decode(&ids), text);
    }
}

#[test]
fn unicode_text_roundtrips_through_byte_tokens() {
    let tok = tiny_tokenizer();
    let text = "Café naïve — 東京 🚀 Ünïcödé";
    let ids = tok.encode(text, false);
    assert_eq!(tok.decode(&ids), text);
    let byte_ids: Vec<u32> = ids
        .iter()
        .copied()
        .filter(|&id| tok.token_type(id) == Some(TokenType::Byte))
        .collect();
    // 🚀 is four bytes, each its own <0xNN> token.
    assert!(byte_ids.len() >= 4);
    assert_eq!(tok.id_to_token(tok.encode("🚀", false)[1]), Some("<0xF0>"));
}

#[test]
fn reflection_token_text_never_becomes_a_special_id_without_parse_special() {
    let tok = tiny_tokenizer();
    let specials = special_ids(&tok);
    for token in SELFRAG_SPECIAL_TOKENS
        .iter()
        .chain(&["<s>", "</s>", "<unk>"])
    {
        let text = format!("The passage says {token} here.");
        let ids = tok.encode(&text, false);
        assert!(
            ids.iter().all(|id| !specials.contains(id)),
            "{token} became a special id: {ids:?}"
        );
        assert_eq!(tok.decode(&ids), text);
    }
    let plain = tok.encode("[Fully supported]", false);
    assert!(plain.len() > 1);
    assert!(!plain.contains(&tok.token_to_id("[Fully supported]").unwrap()));
}

#[test]
fn parse_special_turns_exact_token_strings_into_their_ids() {
    let tok = tiny_tokenizer();
    let id = |t: &str| tok.token_to_id(t).unwrap();
    assert_eq!(
        tok.encode("[Fully supported]", true),
        vec![id("[Fully supported]")]
    );
    // After a special token, text has no dummy prefix (the default `DummyPrefix::TextStart`).
    let mut expected = vec![id("[Retrieval]"), id("<paragraph>")];
    expected.extend(tok.encode_after_special("Paris"));
    assert_ne!(
        tok.encode_after_special("Paris"),
        tok.encode("Paris", false)
    );
    expected.push(id("</paragraph>"));
    assert_eq!(
        tok.encode("[Retrieval]<paragraph>Paris</paragraph>", true),
        expected
    );
    // Longest match: the whole IsSup token, not a shorter special inside it.
    assert_eq!(
        tok.encode("[No support / Contradictory]", true),
        vec![id("[No support / Contradictory]")]
    );
    let mixed = tok.encode("It is.[Utility:5]</s>", true);
    assert_eq!(
        &mixed[mixed.len() - 2..],
        &[id("[Utility:5]"), tok.eos_id()]
    );
}

#[test]
fn a_dummy_prefix_marks_the_first_word() {
    let tok = tiny_tokenizer();
    let the = tok.token_to_id("\u{2581}the").unwrap();
    assert_eq!(tok.encode("the", false), vec![the]);
    assert_eq!(tok.encode("the the", false), vec![the, the]);
    assert_eq!(tok.decode(&[the, the]), "the the");
    assert!(tok.encode("", false).is_empty());
}

#[test]
fn decode_renders_special_tokens_as_their_strings() {
    let tok = tiny_tokenizer();
    let mut ids = tok.encode("Paris", false);
    ids.push(tok.token_to_id("[Fully supported]").unwrap());
    ids.push(tok.token_to_id("[Utility:5]").unwrap());
    ids.push(tok.eos_id());
    assert_eq!(tok.decode(&ids), "Paris[Fully supported][Utility:5]</s>");
}

#[test]
fn metadata_ids_match_the_real_layout() {
    let tok = tiny_tokenizer();
    assert_eq!(tok.bos_id(), 1);
    assert_eq!(tok.eos_id(), 2);
    assert_eq!(tok.unk_id(), 0);
    assert!(tok.add_bos());
    assert_eq!(tok.id_to_token(1), Some("<s>"));
    assert_eq!(tok.pad_id(), tok.token_to_id("<pad>"));
    assert_eq!(tok.pad_id(), Some(tok.vocab_size() as u32 - 1));
    assert_eq!(tok.id_to_token(3), Some("<0x00>"));
    assert_eq!(tok.id_to_token(tok.vocab_size() as u32), None);
}

#[test]
fn merges_follow_scores_not_position() {
    let tokens = strings(&["<unk>", "a", "b", "c", "ab", "bc"]);
    let types = Value::Array([2, 1, 1, 1, 1, 1].map(Value::I32).to_vec());
    let tokenizer = |ab: f32, bc: f32| {
        let scores = Value::Array([0.0, -10.0, -10.0, -10.0, ab, bc].map(Value::F32).to_vec());
        GgufTokenizer::from_gguf(&content(vec![
            ("tokenizer.ggml.model", Value::String("llama".to_owned())),
            ("tokenizer.ggml.tokens", tokens.clone()),
            ("tokenizer.ggml.scores", scores),
            ("tokenizer.ggml.token_type", types.clone()),
            ("tokenizer.ggml.bos_token_id", Value::U32(0)),
            ("tokenizer.ggml.eos_token_id", Value::U32(0)),
            ("tokenizer.ggml.add_space_prefix", Value::Bool(false)),
        ]))
        .unwrap()
    };
    // "bc" scores higher: a + bc.
    assert_eq!(tokenizer(-2.0, -1.0).encode("abc", false), vec![1, 5]);
    // "ab" scores higher: ab + c.
    assert_eq!(tokenizer(-1.0, -2.0).encode("abc", false), vec![4, 3]);
    // No byte tokens in this vocabulary: unknown characters become <unk>.
    assert_eq!(tokenizer(-1.0, -2.0).encode("az", false), vec![1, 0]);
}

#[test]
fn unusable_tokenizer_metadata_is_an_error() {
    assert!(GgufTokenizer::from_gguf(&content(vec![])).is_err());
    let gpt2 = content(vec![
        ("tokenizer.ggml.model", Value::String("gpt2".to_owned())),
        ("tokenizer.ggml.tokens", strings(&["a"])),
    ]);
    let err = GgufTokenizer::from_gguf(&gpt2).unwrap_err().to_string();
    assert!(err.contains("gpt2"), "{err}");
    let bad_bos = content(vec![
        ("tokenizer.ggml.tokens", strings(&["a", "b"])),
        ("tokenizer.ggml.bos_token_id", Value::U32(7)),
        ("tokenizer.ggml.eos_token_id", Value::U32(1)),
    ]);
    assert!(GgufTokenizer::from_gguf(&bad_bos).is_err());
    let short_scores = content(vec![
        ("tokenizer.ggml.tokens", strings(&["a", "b"])),
        ("tokenizer.ggml.scores", Value::Array(vec![Value::F32(0.0)])),
    ]);
    assert!(GgufTokenizer::from_gguf(&short_scores).is_err());
}

#[test]
fn a_reflection_token_stored_as_a_normal_text_piece_is_refused_by_name() {
    let (_dir, path) = tiny_gguf();
    let mut file = std::fs::File::open(&path).unwrap();
    let mut content = Content::read(&mut file).unwrap();
    let Some(Value::Array(tokens)) = content.metadata.get("tokenizer.ggml.tokens").cloned() else {
        panic!("no tokens")
    };
    let id = |piece: &str| {
        tokens
            .iter()
            .position(|t| matches!(t, Value::String(s) if s == piece))
            .unwrap()
    };
    let Some(Value::Array(types)) = content.metadata.get_mut("tokenizer.ggml.token_type") else {
        panic!("no token types")
    };
    // As a converter that forgot the added tokens' types would write them: normal (1).
    types[id("[Fully supported]")] = Value::I32(1);
    types[id("<pad>")] = Value::I32(1);
    let err = GgufTokenizer::from_gguf(&content).unwrap_err().to_string();
    assert!(
        err.contains("[Fully supported], <pad> are ordinary text pieces"),
        "{err}"
    );
    // Control (3) is as good as user-defined (4).
    let Some(Value::Array(types)) = content.metadata.get_mut("tokenizer.ggml.token_type") else {
        panic!("no token types")
    };
    types[id("[Fully supported]")] = Value::I32(3);
    types[id("<pad>")] = Value::I32(4);
    assert!(GgufTokenizer::from_gguf(&content).is_ok());
}
