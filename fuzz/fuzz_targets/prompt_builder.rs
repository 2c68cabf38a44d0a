//! Fuzzes the prompt builder with the tiny Self-RAG tokenizer: a question and up to four
//! passages (title and text) from the input, strings separated by 0xFF bytes, built into the
//! prompts of a first segment and of a second one after a written segment (decision point,
//! without a passage, with each passage, continuing). No panic; a question too long for the
//! context is an error, never a panic. In every prompt built, the special and reflection ids sit
//! only where the builder puts them (BOS first; `[Retrieval]<paragraph>…</paragraph>`,
//! `[No Retrieval]` or `[Continue to Use Evidence]` as the opening; the written segment's own
//! tokens), never where text was given; and the section markers `### Instruction:` and
//! `### Response:` appear once each, as the template writes them, whatever the text held.

#![no_main]

use libfuzzer_sys::fuzz_target;
use selfrag_core::{Passage, PromptBuilder, ReflectionVocab, TokenId, WrittenSegment};
use selfrag_models::{GgufTokenizer, TokenType};

/// Llama-2's context: room for long passages, so that cutting them is reached too.
const CONTEXT_LENGTH: usize = 4096;

fn is_special(tokenizer: &GgufTokenizer, id: TokenId) -> bool {
    matches!(
        tokenizer.token_type(id),
        Some(TokenType::UserDefined | TokenType::Control)
    )
}

/// Checks one built prompt: specials only at `allowed` positions, markers once each.
fn check(tokenizer: &GgufTokenizer, ids: &[TokenId], allowed: &[usize], what: &str) {
    assert_eq!(ids.first(), Some(&tokenizer.bos_id()), "{what}: BOS first");
    for (i, &id) in ids.iter().enumerate() {
        if is_special(tokenizer, id) {
            assert!(
                allowed.contains(&i),
                "{what}: a special id ({:?}) at {i}, where text was given",
                tokenizer.id_to_token(id)
            );
        }
    }
    let text = tokenizer.decode(ids);
    for marker in ["### Instruction:", "### Response:"] {
        assert_eq!(
            text.matches(marker).count(),
            1,
            "{what}: {marker} in {text:?}"
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let mut fields = data.split(|&b| b == 0xFF).map(String::from_utf8_lossy);
    let question = fields.next().unwrap_or_default().into_owned();
    let passages: Vec<Passage> = (0..4)
        .map_while(|i| {
            let title = fields.next()?.into_owned();
            let text = fields.next().unwrap_or_default().into_owned();
            Some(Passage {
                id: format!("p{i}"),
                title,
                path: format!("p{i}.txt"),
                page: None,
                page_label: None,
                ocr_confidence: None,
                text,
                work: None,
            })
        })
        .collect();
    let tokenizer = selfrag_fuzz::tiny_tokenizer();
    let vocab = ReflectionVocab::resolve(tokenizer).expect("the tiny model has every token");
    let Ok(builder) = PromptBuilder::new(tokenizer, CONTEXT_LENGTH, &vocab, &question, 100) else {
        return; // the question alone does not fit: an error, as in the app
    };
    let head = builder.head().len();

    // A written first segment: its opening and critique tokens are the model's own.
    let written = WrittenSegment {
        opening: vocab.retrieval,
        passage: tokenizer.encode_after_special("earlier passage"),
        written: [
            vec![vocab.relevant],
            tokenizer.encode_after_special("It is so."),
            vec![vocab.fully_supported, vocab.utility[4]],
        ]
        .concat(),
    };
    for path in [Vec::new(), vec![written]] {
        // The path's own special ids: its opening, then those the model wrote.
        let mut at = head;
        let mut allowed: Vec<usize> = vec![0];
        for segment in &path {
            allowed.push(at);
            at += 1 + segment.passage.len();
            for (i, &id) in segment.written.iter().enumerate() {
                if is_special(tokenizer, id) {
                    allowed.push(at + i);
                }
            }
            at += segment.written.len();
        }
        let Ok(decision) = builder.decision_point(&path) else {
            continue; // too long with the path: an error, as in the app
        };
        check(tokenizer, &decision.ids, &allowed, "decision point");
        for opening in [builder.without_passage(&path), builder.continuing(&path)] {
            let ids = opening
                .expect("one more token fits when the decision point did")
                .ids;
            let last = ids.len() - 1;
            check(
                tokenizer,
                &ids,
                &[allowed.as_slice(), &[last]].concat(),
                "opening",
            );
        }
        for passage in &passages {
            let Ok(prompt) = builder.with_passage(tokenizer, &path, passage) else {
                continue;
            };
            let ids = &prompt.ids;
            let start = ids.len() - prompt.opening().len();
            // `[Retrieval]`, `<paragraph>`, the text, `</paragraph>`; earlier positions move when
            // an earlier passage was dropped, so only the opening and BOS are placed exactly.
            let mut allowed_here = vec![0, start, start + 1, ids.len() - 1];
            if prompt.passages_dropped == 0 {
                allowed_here.extend_from_slice(&allowed);
            } else {
                allowed_here.extend((head..start).filter(|&i| is_special(tokenizer, ids[i])));
                let specials_in_path = ids[head..start]
                    .iter()
                    .filter(|&&id| is_special(tokenizer, id))
                    .count();
                assert_eq!(
                    specials_in_path,
                    allowed.len() - 1,
                    "a dropped passage kept its specials"
                );
            }
            check(tokenizer, ids, &allowed_here, "with a passage");
            assert_eq!(ids[start], vocab.retrieval);
            assert_eq!(ids[start + 1], vocab.paragraph_open);
            assert_eq!(ids[ids.len() - 1], vocab.paragraph_close);
        }
    }
});
