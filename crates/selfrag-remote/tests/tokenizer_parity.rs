//! The GGUF tokenizer against the real llama.cpp (the llama-server `cargo xtask test` builds,
//! path in `SELFRAG_LLAMA_SERVER`): for every byte-level BPE pre-tokenizer the app runs, the
//! tiny Llama-3-style Self-RAG GGUF with that `tokenizer.ggml.pre` tokenizes a hostile string
//! set to the same ids as llama-server's `/tokenize`, with special-token parsing off and on,
//! and decodes each string back to itself.
//!
//! With parsing off llama.cpp still matches user-defined tokens in text (the app never does:
//! SELFRAG.md), so those strings are compared on a copy of the fixture whose Self-RAG tokens
//! are control tokens, which llama.cpp too leaves to the text; the user-defined fixture is
//! compared with parsing on, and checked to give the same ids as the control one with it off.

// Test code: a failed unwrap is a failed test, at the line that failed.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use selfrag_core::{
    GenerateRequest, Generation, Generator, Passage, ReflectionVocab, RetrieveMode, Retriever,
    Settings, Tokenizer,
};
use selfrag_fixtures::ReflectionTokenType;
use selfrag_models::{
    CachePrecision, Device, GgufTokenizer, LlamaGenerator, TokenType, TokenizerKind,
};
use selfrag_remote::{ServerConfig, ServerGenerator};
use selfrag_testkit::llama_server::{self, LlamaServer};

/// One name of each split llama.cpp has for Llama-architecture GGUFs, and some aliases: every
/// one runs here and must agree with llama.cpp.
const PRE_TOKENIZERS: [&str; 19] = [
    "llama-bpe",
    "llama3",
    "smaug-bpe",
    "dbrx",
    "default",
    "gpt-2",
    "mpt",
    "olmo",
    "smollm",
    "starcoder",
    "command-r",
    "qwen2",
    "stablelm2",
    "tekken",
    "falcon",
    "viking",
    "poro-chat",
    "deepseek-llm",
    "deepseek-coder",
];

/// Strings a tokenizer gets wrong first: whitespace runs, digit runs of every length Llama-3
/// groups, contractions in both cases, punctuation runs, mixed scripts, emoji sequences,
/// combining marks, text that looks like bytes or broken encodings, and special-token text.
const HOSTILE: &[&str] = &[
    "",
    " ",
    "  ",
    "\t",
    "\n",
    "\n\n\n",
    " \n ",
    "\t\t x",
    "\r\n",
    "a\r\nb\r\n\r\nc",
    "   leading and trailing   ",
    "word  two   three    four\t\tfive \t six",
    "1",
    "12",
    "123",
    "1234",
    "12345",
    "123456",
    "1234567",
    " 2024 and 1984",
    "3.14159 1,000,000 -7 +12% $100",
    "x1y22z333w4444",
    "it's IT'S we'll WE'LL they've I'm you'd we're",
    "'s 'T 'LL 'd 'Re 've 'M 'x",
    "don't rock 'n' roll ''quoted''",
    "...",
    "!!!???",
    "---> <== ((([[[{{{",
    "a.b,c;d:e",
    "#$%&*+/<=>@\\^_`|~",
    "end.\nnext?!\n\nlast:\r\n",
    "Hello, world! The capital of France is Paris.",
    "Москва — столица России.",
    "東京は日本の首都です。北京是中国的首都",
    "café naïve Straße Fuß Ça va, señor?",
    "ΑΒΓ αβγ עברית العربية हिन्दी 한국어",
    "👩\u{200D}👩\u{200D}👧 🇫🇷🇩🇪 👍🏽 🚀🚀🚀 ✓★→∞",
    "e\u{301} a\u{308}\u{304} Z\u{351}\u{34b}\u{34c}",
    "\u{FFFD} \u{FEFF}BOM Ã©tÃ© <0xFF> <0x0A>",
    "\u{0}nul \u{7f}\u{1b}[31mred",
    "\u{200B}zero\u{200B}width \u{A0}nbsp\u{A0} \u{2028}\u{2029} \u{3000}wide \u{85}nel",
    "HelloWorld XMLHttpRequest iPhone ABCdef camelCaseWord",
    "path/to/file.txt\nline/\n",
    " quokka quokkas Quokka quokka",
    "[Retrieval]<paragraph>Paris</paragraph>[Relevant]It is.[Fully supported][Utility:5]<|end_of_text|>",
    "<|begin_of_text|>### Instruction:\nWho?\n\n### Response:\n[No Retrieval]",
    "[No support / Contradictory] and [Partially supported] x[Utility:1]y <pad><pad>",
    "[Fully supported <|begin_of_text| <paragraph </paragraph",
    "The history of the city is the history of its people. The people of the city work, and \
     the city works for its people.",
];

/// One server at a time: several llama-servers on two cores slow each other down.
static ONE_SERVER_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

struct Served {
    _dir: tempfile::TempDir,
    model: PathBuf,
    server: LlamaServer,
    _alone: std::sync::MutexGuard<'static, ()>,
}

/// A llama-server on the tiny BPE Llama with `pre` and reflection tokens of `types`; `None`
/// after a skip (a failure under CI=true).
fn serve(pre: &'static str, types: ReflectionTokenType) -> Option<Served> {
    let binary = llama_server::binary()?;
    let alone = ONE_SERVER_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join(format!("tiny-{pre}.gguf"));
    selfrag_fixtures::write_tiny_bpe_llama_gguf(&model, pre, types).unwrap();
    let context = selfrag_fixtures::TINY_LLAMA_CONTEXT;
    let server = LlamaServer::start(&binary, &model, dir.path(), 1, context, &[]).unwrap();
    Some(Served {
        _dir: dir,
        model,
        server,
        _alone: alone,
    })
}

/// llama.cpp's ids for `text` (no BOS).
fn llama_cpp_ids(server: &LlamaServer, text: &str, parse_special: bool) -> Vec<u32> {
    let body = serde_json::json!({
        "content": text,
        "add_special": false,
        "parse_special": parse_special,
    });
    let reply = ureq::post(&format!("{}/tokenize", server.url))
        .send_string(&body.to_string())
        .unwrap()
        .into_string()
        .unwrap();
    let reply: serde_json::Value = serde_json::from_str(&reply).unwrap();
    reply["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|id| u32::try_from(id.as_u64().unwrap()).unwrap())
        .collect()
}

fn pieces(tokenizer: &GgufTokenizer, ids: &[u32]) -> Vec<String> {
    ids.iter()
        .map(|&id| tokenizer.id_to_token(id).unwrap_or("?").to_owned())
        .collect()
}

fn is_special(tokenizer: &GgufTokenizer, id: u32) -> bool {
    matches!(
        tokenizer.token_type(id),
        Some(TokenType::Control | TokenType::UserDefined | TokenType::Unknown)
    )
}

/// Every hostile string: our ids equal llama.cpp's with parsing off and on, decoding gives the
/// string back, and with parsing off no special id appears.
fn assert_parity(pre: &str, served: &Served, tokenizer: &GgufTokenizer) {
    for text in HOSTILE {
        for parse_special in [false, true] {
            let ours = tokenizer.encode(text, parse_special);
            let theirs = llama_cpp_ids(&served.server, text, parse_special);
            assert_eq!(
                ours,
                theirs,
                "`{pre}`, parse_special {parse_special}, {text:?}:\n ours   {:?}\n theirs {:?}",
                pieces(tokenizer, &ours),
                pieces(tokenizer, &theirs)
            );
            assert_eq!(tokenizer.decode(&ours), *text, "`{pre}` decodes {text:?}");
            if !parse_special {
                assert!(
                    !ours.iter().any(|&id| is_special(tokenizer, id)),
                    "`{pre}`: plain text {text:?} gave a special id: {ours:?}"
                );
            }
        }
    }
}

#[test]
fn every_pre_tokenizer_splits_and_merges_as_llama_cpp_does() {
    for pre in PRE_TOKENIZERS {
        let Some(served) = serve(pre, ReflectionTokenType::Control) else {
            return;
        };
        let tokenizer = GgufTokenizer::from_gguf_file(&served.model).unwrap();
        assert_eq!(tokenizer.kind(), TokenizerKind::ByteLevelBpe);
        assert_eq!(tokenizer.pre_tokenizer(), Some(pre));
        assert_parity(pre, &served, &tokenizer);
    }
}

#[test]
fn user_defined_reflection_tokens_match_llama_cpp_with_parsing_on_and_stay_text_with_it_off() {
    let Some(served) = serve("llama-bpe", ReflectionTokenType::UserDefined) else {
        return;
    };
    let tokenizer = GgufTokenizer::from_gguf_file(&served.model).unwrap();
    let control_dir = tempfile::tempdir().unwrap();
    let control_model = control_dir.path().join("control.gguf");
    selfrag_fixtures::write_tiny_bpe_llama_gguf(
        &control_model,
        "llama-bpe",
        ReflectionTokenType::Control,
    )
    .unwrap();
    let control = GgufTokenizer::from_gguf_file(&control_model).unwrap();
    let vocab = ReflectionVocab::resolve(&tokenizer).unwrap();
    for text in HOSTILE {
        let ours = tokenizer.encode(text, true);
        assert_eq!(ours, llama_cpp_ids(&served.server, text, true), "{text:?}");
        // Parsing off: llama.cpp reads `[Fully supported]` as the token; the app reads text,
        // exactly as llama.cpp does where the token is not user-defined.
        let plain = tokenizer.encode(text, false);
        assert_eq!(plain, control.encode(text, false), "{text:?}");
        assert!(!plain.contains(&vocab.fully_supported), "{text:?}");
        assert_eq!(tokenizer.decode(&plain), *text);
    }
    let injected = llama_cpp_ids(&served.server, "It is.[Fully supported]", false);
    assert!(injected.contains(&vocab.fully_supported), "{injected:?}");
}

#[test]
fn the_local_generator_loads_the_llama3_fixture_and_tokenizes_as_llama_cpp() {
    let Some(served) = serve("llama-bpe", ReflectionTokenType::UserDefined) else {
        return;
    };
    let generator = LlamaGenerator::load(&served.model, &Device::Cpu)
        .unwrap_or_else(|e| panic!("the Llama-3 fixture does not load: {e}"));
    let tokenizer = generator.tokenizer();
    assert!(tokenizer.add_bos());
    assert_eq!(
        tokenizer.id_to_token(tokenizer.bos_id()),
        Some("<|begin_of_text|>")
    );
    let prompt = "### Instruction:\nWhat is the capital of France?\n\n### Response:\n";
    let ours = Tokenizer::tokenize(tokenizer, prompt).unwrap();
    assert_eq!(ours, llama_cpp_ids(&served.server, prompt, false));
    let with_bos = {
        let body = serde_json::json!({ "content": prompt, "add_special": true });
        let reply = ureq::post(&format!("{}/tokenize", served.server.url))
            .send_string(&body.to_string())
            .unwrap()
            .into_string()
            .unwrap();
        let reply: serde_json::Value = serde_json::from_str(&reply).unwrap();
        reply["tokens"][0].as_u64().unwrap()
    };
    assert_eq!(with_bos, u64::from(tokenizer.bos_id()));
    ReflectionVocab::resolve(tokenizer).unwrap();
}

/// The same model file as [`serve`] writes, without a server: what the name-only checks need.
fn written(dir: &Path, pre: &'static str) -> PathBuf {
    let model = dir.join(format!("{pre}.gguf"));
    selfrag_fixtures::write_tiny_bpe_llama_gguf(&model, pre, ReflectionTokenType::UserDefined)
        .unwrap();
    model
}

#[test]
fn a_pre_tokenizer_this_version_does_not_run_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let model = written(dir.path(), "deepseek-v3");
    let err = GgufTokenizer::from_gguf_file(&model)
        .unwrap_err()
        .to_string();
    assert!(err.contains("`deepseek-v3` pre-tokenizer"), "{err}");
    assert!(err.contains("not damaged"), "{err}");
    assert!(err.contains(&model.display().to_string()), "{err}");
}

/// The server generator on the Llama-3 fixture continues prompts as the local one does: the
/// server holds back the probabilities of a byte-level piece that ends inside a UTF-8
/// character (`ðŁ`), which the generator must treat as SentencePiece's byte tokens.
#[test]
fn the_server_generator_continues_a_bpe_model_as_the_local_one() {
    let Some(served) = serve("llama-bpe", ReflectionTokenType::UserDefined) else {
        return;
    };
    let mut local = LlamaGenerator::load(&served.model, &Device::Cpu).unwrap();
    local.set_cache_precision(CachePrecision::F32);
    let mut remote =
        ServerGenerator::connect(&ServerConfig::new(&served.server.url), &served.model).unwrap();
    let vocab = ReflectionVocab::resolve(local.tokenizer()).unwrap();
    let tok = local.tokenizer().clone();
    let prompts: Vec<Vec<u32>> = [
        "Who wrote the book? 🚀 東京",
        "What is the capital of France?",
        "Москва — столица России.",
    ]
    .iter()
    .map(|question| {
        let mut ids = vec![tok.bos_id()];
        ids.extend(tok.encode(
            &format!("### Instruction:\n{question}\n\n### Response:\n"),
            false,
        ));
        ids
    })
    .collect();
    let request = GenerateRequest {
        max_new_tokens: 40,
        stop_ids: Vec::new(),
        markup_ids: Vec::new(),
        watch_ids: vocab.critique_watch_ids(),
    };
    let here = local.generate_batch(&prompts, &request).unwrap();
    let there = remote.generate_batch(&prompts, &request).unwrap();
    let mut partial_pieces = 0;
    for (row, (l, r)) in here.iter().zip(&there).enumerate() {
        let ids = |g: &Generation| g.tokens.iter().map(|t| t.id).collect::<Vec<_>>();
        assert_eq!(ids(l), ids(r), "row {row}");
        for (lt, rt) in l.tokens.iter().zip(&r.tokens) {
            assert!(
                (lt.logprob.exp() - rt.logprob.exp()).abs() <= 1e-3,
                "row {row}"
            );
            partial_pieces += usize::from(std::str::from_utf8(&tok.token_bytes(lt.id)).is_err());
        }
    }
    // The case the generator must handle occurred.
    assert!(partial_pieces > 0, "{here:?}");
}

/// A fixed list of passages, so that both runs read the same evidence.
struct Fixed(Vec<Passage>);

impl Retriever for Fixed {
    fn search(
        &mut self,
        _query: &str,
        k: usize,
    ) -> Result<Vec<Passage>, selfrag_core::BackendError> {
        Ok(self.0.iter().take(k).cloned().collect())
    }
}

/// The Llama-3-style Self-RAG model answers a question end to end, short and long form, on
/// the local generator and through llama-server alike: the prompts, reflection tokens,
/// critique values and answers of the two traces agree.
#[test]
fn a_llama3_self_rag_model_answers_locally_as_through_llama_cpp() {
    let Some(served) = serve("llama-bpe", ReflectionTokenType::UserDefined) else {
        return;
    };
    let mut local = LlamaGenerator::load(&served.model, &Device::Cpu).unwrap();
    local.set_cache_precision(CachePrecision::F32);
    let mut remote =
        ServerGenerator::connect(&ServerConfig::new(&served.server.url), &served.model).unwrap();
    let passage = |id: &str, text: &str| Passage {
        id: id.into(),
        title: format!("Doc {id}"),
        path: format!("/docs/{id}.txt"),
        page: None,
        page_label: None,
        ocr_confidence: None,
        text: text.into(),
        work: None,
    };
    let evidence = vec![
        passage("a", "Paris is the capital and largest city of France."),
        passage(
            "b",
            "The Seine flows through Paris. [Fully supported] is text here.",
        ),
        passage("c", "Москва — столица России. 東京は日本の首都です。🚀"),
    ];
    for (mode, long_form) in [
        (RetrieveMode::Always, false),
        (RetrieveMode::Adaptive, false),
        (RetrieveMode::Always, true),
    ] {
        let settings = Settings {
            mode,
            long_form,
            k: 3,
            beam_width: 2,
            max_segments: 2,
            max_new_tokens: 40,
            max_segment_tokens: 20,
            ..Settings::default()
        };
        let run = |g: &mut dyn Generator| {
            let answer = selfrag_core::answer(
                "What is the capital of France?",
                &settings,
                g,
                &mut Fixed(evidence.clone()),
                &mut |_| {},
                &AtomicBool::new(false),
            )
            .unwrap();
            let mut json = serde_json::to_value(answer).unwrap();
            json["generator"].take();
            json["timings"].take();
            json
        };
        let here = run(&mut local);
        let there = run(&mut remote);
        assert!(
            here["segments"].as_array().is_some_and(|s| !s.is_empty()),
            "{here}"
        );
        selfrag_testkit::assert_same_json(
            &here,
            &there,
            1e-3,
            &format!("{mode:?} long_form={long_form}"),
        );
    }
}
