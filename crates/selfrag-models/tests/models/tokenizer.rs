//! `GgufTokenizer`: SPM encoding, byte fallback, special tokens, decoding.

use std::collections::HashMap;

use candle_core::quantized::gguf_file::{Content, Value, VersionedMagic};
use selfrag_fixtures::SELFRAG_SPECIAL_TOKENS;
use selfrag_models::{DummyPrefix, GgufTokenizer, ModelError, TokenType};

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
    assert_eq!(tok.unk_id(), Some(0));
    assert!(tok.add_bos());
    assert_eq!(tok.id_to_token(1), Some("<s>"));
    assert_eq!(tok.pad_id(), tok.token_to_id("<pad>"));
    assert_eq!(tok.pad_id(), Some(tok.vocab_size() as u32 - 1));
    assert_eq!(tok.id_to_token(3), Some("<0x00>"));
    assert_eq!(tok.id_to_token(tok.vocab_size() as u32), None);
}

#[test]
fn generations_end_at_eos_and_at_the_end_of_turn_tokens_llama_cpp_stops_at() {
    // Llama-2's vocabulary ends only at `</s>`.
    let tok = tiny_tokenizer();
    assert_eq!(tok.end_ids(), [tok.eos_id()]);
    // Llama-3's also at `<|eot_id|>` (and `<|end_of_text|>`, its EOS), found by their text.
    let tok = llama3_tokenizer("llama-bpe");
    let eot = tok.token_to_id("<|eot_id|>").unwrap();
    assert_eq!(tok.end_ids()[0], tok.eos_id());
    assert!(tok.ends_generation(eot) && tok.ends_generation(tok.eos_id()));
    assert!(!tok.ends_generation(tok.token_to_id("<|begin_of_text|>").unwrap()));
    // And at the ids the metadata names, once each.
    let tok = GgufTokenizer::from_gguf(&content(vec![
        ("tokenizer.ggml.model", Value::String("gpt2".to_owned())),
        ("tokenizer.ggml.pre", Value::String("llama-bpe".to_owned())),
        ("tokenizer.ggml.tokens", strings(&["a", "b", "c", "d"])),
        (
            "tokenizer.ggml.token_type",
            Value::Array(vec![Value::I32(1); 4]),
        ),
        ("tokenizer.ggml.merges", strings(&[])),
        ("tokenizer.ggml.bos_token_id", Value::U32(0)),
        ("tokenizer.ggml.eos_token_id", Value::U32(1)),
        ("tokenizer.ggml.eot_token_id", Value::U32(3)),
        ("tokenizer.ggml.eom_token_id", Value::U32(1)),
        ("tokenizer.ggml.fim_pad_token_id", Value::U32(2)),
        ("tokenizer.ggml.fim_sep_token_id", Value::U32(9)),
    ]))
    .unwrap();
    assert_eq!(
        tok.end_ids(),
        [1, 3, 2],
        "an id past the vocabulary is no end"
    );
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
    // A BPE vocabulary needs its merges.
    let no_merges = content(vec![
        ("tokenizer.ggml.model", Value::String("gpt2".to_owned())),
        ("tokenizer.ggml.pre", Value::String("gpt-2".to_owned())),
        ("tokenizer.ggml.tokens", strings(&["a"])),
        ("tokenizer.ggml.bos_token_id", Value::U32(0)),
        ("tokenizer.ggml.eos_token_id", Value::U32(0)),
    ]);
    let err = GgufTokenizer::from_gguf(&no_merges)
        .unwrap_err()
        .to_string();
    assert!(err.contains("`tokenizer.ggml.merges` is missing"), "{err}");
    // BPE's default BOS and EOS are llama.cpp's (11), which a one-token vocabulary lacks.
    let no_bos = content(vec![
        ("tokenizer.ggml.model", Value::String("gpt2".to_owned())),
        ("tokenizer.ggml.pre", Value::String("gpt-2".to_owned())),
        ("tokenizer.ggml.tokens", strings(&["a"])),
        ("tokenizer.ggml.merges", strings(&[])),
    ]);
    let err = GgufTokenizer::from_gguf(&no_bos).unwrap_err().to_string();
    assert!(err.contains("`tokenizer.ggml.bos_token_id` = 11"), "{err}");
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

// Byte-level BPE (`tokenizer.ggml.model = "gpt2"`). Its parity with llama.cpp on every
// pre-tokenizer is selfrag-remote's tests/tokenizer_parity.rs; these pin the rules one by one.

fn llama3_tokenizer(pre: &'static str) -> GgufTokenizer {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny-llama3.gguf");
    selfrag_fixtures::write_tiny_bpe_llama_gguf(
        &path,
        pre,
        selfrag_fixtures::ReflectionTokenType::UserDefined,
    )
    .unwrap();
    GgufTokenizer::from_gguf_file(&path).unwrap()
}

/// A hand-made BPE vocabulary: `tokens` (all normal but those in `specials`, user-defined),
/// `merges` in rank order.
fn bpe(pre: &str, tokens: &[&str], specials: &[&str], merges: &[&str]) -> GgufTokenizer {
    let types = tokens
        .iter()
        .map(|t| Value::I32(if specials.contains(t) { 4 } else { 1 }))
        .collect();
    GgufTokenizer::from_gguf(&content(vec![
        ("tokenizer.ggml.model", Value::String("gpt2".to_owned())),
        ("tokenizer.ggml.pre", Value::String(pre.to_owned())),
        ("tokenizer.ggml.tokens", strings(tokens)),
        ("tokenizer.ggml.token_type", Value::Array(types)),
        ("tokenizer.ggml.merges", strings(merges)),
        ("tokenizer.ggml.bos_token_id", Value::U32(0)),
        ("tokenizer.ggml.eos_token_id", Value::U32(0)),
    ]))
    .unwrap()
}

#[test]
fn bpe_merges_follow_their_rank_in_the_merges_list() {
    let tokens = ["a", "b", "c", "ab", "bc"];
    // `b c` ranks first: a + bc.
    assert_eq!(
        bpe("gpt-2", &tokens, &[], &["b c", "a b"]).encode("abc", false),
        vec![0, 4]
    );
    // `a b` ranks first: ab + c.
    assert_eq!(
        bpe("gpt-2", &tokens, &[], &["a b", "b c"]).encode("abc", false),
        vec![3, 2]
    );
    // Equal pairs: the leftmost merges first (`aa` + `a`, not `a` + `aa`).
    let aaa = bpe("gpt-2", &["a", "aa"], &[], &["a a"]);
    assert_eq!(aaa.encode("aaa", false), vec![1, 0]);
}

#[test]
fn bpe_falls_back_to_single_bytes() {
    // The merge `a b` has no entry of its own: the symbol `ab` is its bytes' entries.
    let tok = bpe("gpt-2", &["a", "b"], &[], &["a b"]);
    assert_eq!(tok.encode("ab", false), vec![0, 1]);
    // In the fixture a character the merges do not cover whole (an otter, U+1F9A6, is not in
    // the training text) is made of its UTF-8 bytes' entries: F0 9F A6 A6 as GPT-2's
    // characters.
    let tok = llama3_tokenizer("llama-bpe");
    let ids = tok.encode("\u{1F9A6}", false);
    assert!(ids.len() > 1, "{ids:?}");
    let pieces: String = ids.iter().map(|&id| tok.id_to_token(id).unwrap()).collect();
    assert_eq!(pieces, "ðŁ¦¦");
    assert_eq!(tok.decode(&ids), "\u{1F9A6}");
    assert!(
        ids.iter()
            .all(|&id| tok.token_type(id) == Some(TokenType::Normal))
    );
}

#[test]
fn bpe_special_tokens_come_only_from_parse_special() {
    let tok = llama3_tokenizer("llama-bpe");
    let id = |t: &str| tok.token_to_id(t).unwrap();
    let specials = special_ids(&tok);
    let text = "<|begin_of_text|>Paris[Fully supported][Utility:5]<|end_of_text|>";
    let plain = tok.encode(text, false);
    assert!(plain.iter().all(|id| !specials.contains(id)), "{plain:?}");
    assert_eq!(tok.decode(&plain), text);
    let parsed = tok.encode(text, true);
    let mut expected = vec![id("<|begin_of_text|>")];
    expected.extend(tok.encode("Paris", false));
    expected.extend([id("[Fully supported]"), id("[Utility:5]"), tok.eos_id()]);
    assert_eq!(parsed, expected);
    assert_eq!(tok.decode(&parsed), text);
    // No dummy prefix in BPE: the text after a special token is encoded as any other.
    for prefix in [DummyPrefix::TextStart, DummyPrefix::EveryFragment] {
        let tok = tok.clone().with_dummy_prefix(prefix);
        assert_eq!(
            tok.encode_after_special("Paris"),
            tok.encode("Paris", false)
        );
    }
}

#[test]
fn special_tokens_are_matched_longest_first_over_the_whole_text() {
    // As llama.cpp: `bcd` (longer) is cut out first, so `ab` no longer occurs in `abcd`.
    let tok = bpe(
        "gpt-2",
        &["a", "b", "c", "d", "ab", "bcd"],
        &["ab", "bcd"],
        &[],
    );
    assert_eq!(tok.encode("abcd", true), vec![0, 5]);
    assert_eq!(tok.encode("abab", true), vec![4, 4]);
    assert_eq!(tok.encode("abcd", false), vec![0, 1, 2, 3]);
}

#[test]
fn llama3s_whole_word_entries_skip_the_merges_other_pre_tokenizers_apply() {
    // ` quokka` is an entry the merges never build: Llama-3's rule (`ignore_merges`) takes it
    // whole; GPT-2's split merges it from its bytes.
    let llama3 = llama3_tokenizer("llama-bpe");
    let quokka = llama3.token_to_id("Ġquokka").unwrap();
    assert_eq!(llama3.encode(" quokka", false), vec![quokka]);
    let gpt2 = llama3_tokenizer("gpt-2");
    let ids = gpt2.encode(" quokka", false);
    assert!(ids.len() > 1 && !ids.contains(&quokka), "{ids:?}");
    assert_eq!(gpt2.decode(&ids), " quokka");
}

#[test]
fn bpe_pre_tokenizers_split_digits_as_llama_cpp_names_them() {
    let digits = |pre: &'static str| {
        let tok = llama3_tokenizer(pre);
        let ids = tok.encode("1234567", false);
        ids.iter()
            .map(|&id| tok.decode(&[id]))
            .collect::<Vec<String>>()
    };
    // Llama-3 groups digits in threes; Qwen2 and SmolLM one by one.
    assert!(digits("llama-bpe").iter().all(|d| d.len() <= 3));
    assert!(digits("llama-bpe").iter().any(|d| d.len() == 3));
    assert!(digits("qwen2").iter().all(|d| d.len() == 1));
    assert!(digits("smollm").iter().all(|d| d.len() == 1));
}

#[test]
fn a_bpe_file_says_which_tokenizer_it_runs_and_whether_prompts_start_with_bos() {
    let tok = llama3_tokenizer("llama-bpe");
    assert_eq!(tok.kind(), selfrag_models::TokenizerKind::ByteLevelBpe);
    assert_eq!(tok.pre_tokenizer(), Some("llama-bpe"));
    assert_eq!(tok.id_to_token(tok.bos_id()), Some("<|begin_of_text|>"));
    assert_eq!(tok.id_to_token(tok.eos_id()), Some("<|end_of_text|>"));
    assert_eq!(tok.unk_id(), None);
    assert!(tok.add_bos());
    assert_eq!(tok.decode(&tok.encode(" the", false)), " the");
    selfrag_core::ReflectionVocab::resolve(&tok).unwrap();
    // Without `tokenizer.ggml.add_bos_token`, llama.cpp's default: BOS for Llama-3, none for
    // GPT-2's split; the key wins over both.
    let without_key = |pre: &str, add_bos: Option<bool>| {
        let mut metadata = vec![
            ("tokenizer.ggml.model", Value::String("gpt2".to_owned())),
            ("tokenizer.ggml.pre", Value::String(pre.to_owned())),
            ("tokenizer.ggml.tokens", strings(&["a"])),
            ("tokenizer.ggml.merges", strings(&[])),
            ("tokenizer.ggml.bos_token_id", Value::U32(0)),
            ("tokenizer.ggml.eos_token_id", Value::U32(0)),
        ];
        metadata.extend(add_bos.map(|b| ("tokenizer.ggml.add_bos_token", Value::Bool(b))));
        GgufTokenizer::from_gguf(&content(metadata))
            .unwrap()
            .add_bos()
    };
    assert!(without_key("llama-bpe", None));
    assert!(!without_key("gpt-2", None));
    assert!(without_key("gpt-2", Some(true)));
    assert!(!without_key("llama-bpe", Some(false)));
    // The SentencePiece fixture is SentencePiece.
    assert_eq!(
        tiny_tokenizer().kind(),
        selfrag_models::TokenizerKind::SentencePiece
    );
    assert_eq!(tiny_tokenizer().pre_tokenizer(), None);
}

#[test]
fn a_bpe_pre_tokenizer_this_version_does_not_run_is_refused_by_its_name() {
    for pre in ["kimi-k2", "no-such-split"] {
        let err = GgufTokenizer::from_gguf(&content(vec![
            ("tokenizer.ggml.model", Value::String("gpt2".to_owned())),
            ("tokenizer.ggml.pre", Value::String(pre.to_owned())),
            ("tokenizer.ggml.tokens", strings(&["a"])),
        ]))
        .unwrap_err();
        assert!(
            matches!(&err, ModelError::UnsupportedTokenizer { pre: Some(p), .. } if p == pre),
            "{err:?}"
        );
        let message = err.to_string();
        assert!(
            message.contains(&format!("`gpt2` with the `{pre}` pre-tokenizer")),
            "{message}"
        );
    }
}
