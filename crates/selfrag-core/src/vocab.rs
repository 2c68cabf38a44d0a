//! The reflection tokens of Self-RAG: their exact strings, and their ids in the loaded model,
//! looked up by string (never hard-coded, since a 13B or re-quantized model may number them
//! differently).

use crate::backend::{TokenId, Tokenizer};
use crate::error::SelfRagError;

/// The 15 reflection tokens and `<pad>`, in the id order of `selfrag/selfrag_llama2_7b`
/// (32000 … 32015).
pub const REFLECTION_TOKENS: [&str; 16] = [
    "[No Retrieval]",
    "[Retrieval]",
    "[Continue to Use Evidence]",
    "[Irrelevant]",
    "[Relevant]",
    "<paragraph>",
    "</paragraph>",
    "[Utility:1]",
    "[Utility:2]",
    "[Utility:3]",
    "[Utility:4]",
    "[Utility:5]",
    "[Fully supported]",
    "[Partially supported]",
    "[No support / Contradictory]",
    "<pad>",
];

/// Which family a special id of the model belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenGroup {
    /// `[No Retrieval]`, `[Retrieval]`, `[Continue to Use Evidence]`.
    Retrieve,
    /// `[Relevant]`, `[Irrelevant]`.
    IsRel,
    /// `<paragraph>`, `</paragraph>`.
    Paragraph,
    /// `[Utility:1]` … `[Utility:5]`.
    IsUse,
    /// `[Fully supported]`, `[Partially supported]`, `[No support / Contradictory]`.
    IsSup,
    /// `<pad>`.
    Pad,
    /// `</s>`.
    EndOfSequence,
}

/// Ids of the reflection tokens in the loaded model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReflectionVocab {
    pub no_retrieval: TokenId,
    pub retrieval: TokenId,
    pub continue_evidence: TokenId,
    pub irrelevant: TokenId,
    pub relevant: TokenId,
    pub paragraph_open: TokenId,
    pub paragraph_close: TokenId,
    /// `[Utility:1]` … `[Utility:5]`, in that order.
    pub utility: [TokenId; 5],
    pub fully_supported: TokenId,
    pub partially_supported: TokenId,
    pub no_support: TokenId,
    /// `<pad>` is optional: a model without it never generates it.
    pub pad: Option<TokenId>,
    /// `</s>`, from the generator.
    pub eos: TokenId,
    /// Every id that ends a generation: `eos` and the model's end-of-turn tokens, if any.
    pub ends: Vec<TokenId>,
}

/// Positions in [`ReflectionVocab::critique_watch_ids`], and so in `GeneratedToken::watched`.
pub(crate) mod watch {
    pub const RELEVANT: usize = 0;
    pub const IRRELEVANT: usize = 1;
    pub const FULLY: usize = 2;
    pub const PARTIALLY: usize = 3;
    pub const NO_SUPPORT: usize = 4;
    pub const UTILITY: usize = 5;
    pub const LEN: usize = 10;
}

impl ReflectionVocab {
    /// Looks every reflection token up in the model's vocabulary; fails naming all the
    /// required ones it lacks (only `<pad>` may be missing).
    pub fn resolve(tokenizer: &dyn Tokenizer) -> Result<Self, SelfRagError> {
        let mut missing = Vec::new();
        let mut id = |token: &str| match tokenizer.token_id(token) {
            Some(id) => id,
            None => {
                missing.push(token.to_string());
                0
            }
        };
        let vocab = Self {
            no_retrieval: id("[No Retrieval]"),
            retrieval: id("[Retrieval]"),
            continue_evidence: id("[Continue to Use Evidence]"),
            irrelevant: id("[Irrelevant]"),
            relevant: id("[Relevant]"),
            paragraph_open: id("<paragraph>"),
            paragraph_close: id("</paragraph>"),
            utility: [
                id("[Utility:1]"),
                id("[Utility:2]"),
                id("[Utility:3]"),
                id("[Utility:4]"),
                id("[Utility:5]"),
            ],
            fully_supported: id("[Fully supported]"),
            partially_supported: id("[Partially supported]"),
            no_support: id("[No support / Contradictory]"),
            pad: tokenizer.token_id("<pad>"),
            eos: tokenizer.eos_id(),
            ends: tokenizer.end_ids(),
        };
        if missing.is_empty() {
            Ok(vocab)
        } else {
            Err(SelfRagError::MissingReflectionTokens { missing })
        }
    }

    /// Whether `id` ends a generation (`</s>`, or an end-of-turn token of the model).
    pub fn is_end(&self, id: TokenId) -> bool {
        id == self.eos || self.ends.contains(&id)
    }

    /// The group of a special id, or `None` for an ordinary text token.
    pub fn group(&self, id: TokenId) -> Option<TokenGroup> {
        if self.is_end(id) {
            Some(TokenGroup::EndOfSequence)
        } else if self.retrieve_ids().contains(&id) {
            Some(TokenGroup::Retrieve)
        } else if id == self.relevant || id == self.irrelevant {
            Some(TokenGroup::IsRel)
        } else if id == self.paragraph_open || id == self.paragraph_close {
            Some(TokenGroup::Paragraph)
        } else if self.utility.contains(&id) {
            Some(TokenGroup::IsUse)
        } else if self.issup_ids().contains(&id) {
            Some(TokenGroup::IsSup)
        } else if Some(id) == self.pad {
            Some(TokenGroup::Pad)
        } else {
            None
        }
    }

    /// Whether `id` is one of the 15 reflection tokens (not `<pad>`, not `</s>`).
    pub fn is_reflection(&self, id: TokenId) -> bool {
        matches!(
            self.group(id),
            Some(
                TokenGroup::Retrieve
                    | TokenGroup::IsRel
                    | TokenGroup::Paragraph
                    | TokenGroup::IsUse
                    | TokenGroup::IsSup
            )
        )
    }

    /// Whether `id` is answer text: neither reflection, `<pad>` nor `</s>`.
    pub fn is_text(&self, id: TokenId) -> bool {
        self.group(id).is_none()
    }

    /// The answer text of a generated id sequence: reflection tokens, `<pad>` and `</s>` removed.
    pub fn strip(&self, ids: &[TokenId]) -> Vec<TokenId> {
        ids.iter().copied().filter(|&id| self.is_text(id)).collect()
    }

    /// `[No Retrieval]`, `[Retrieval]`, `[Continue to Use Evidence]`: where a long-form segment ends.
    pub fn retrieve_ids(&self) -> [TokenId; 3] {
        [self.no_retrieval, self.retrieval, self.continue_evidence]
    }

    /// Every id that is not answer text and not `</s>`: the 15 reflection tokens and `<pad>`
    /// (`GenerateRequest::markup_ids`: a segment ends only after some text).
    pub fn markup_ids(&self) -> Vec<TokenId> {
        let mut ids = vec![
            self.no_retrieval,
            self.retrieval,
            self.continue_evidence,
            self.irrelevant,
            self.relevant,
            self.paragraph_open,
            self.paragraph_close,
        ];
        ids.extend(self.utility);
        ids.extend(self.issup_ids());
        ids.extend(self.pad);
        ids
    }

    /// `[Fully supported]`, `[Partially supported]`, `[No support / Contradictory]`.
    pub fn issup_ids(&self) -> [TokenId; 3] {
        [
            self.fully_supported,
            self.partially_supported,
            self.no_support,
        ]
    }

    /// The ids whose probabilities every generation records: IsRel (2), IsSup (3), IsUse (5),
    /// in the order of the crate's `watch` positions.
    pub fn critique_watch_ids(&self) -> Vec<TokenId> {
        let mut ids = vec![self.relevant, self.irrelevant];
        ids.extend(self.issup_ids());
        ids.extend(self.utility);
        debug_assert_eq!(ids.len(), watch::LEN);
        ids
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
mod tests {
    use super::*;
    use crate::backend::BackendError;

    /// A vocabulary with the 7B model's ids, minus the tokens named in `lacks`.
    struct Vocabulary {
        lacks: Vec<&'static str>,
    }

    impl Tokenizer for Vocabulary {
        fn token_id(&self, token: &str) -> Option<TokenId> {
            if self.lacks.contains(&token) {
                return None;
            }
            let index = REFLECTION_TOKENS.iter().position(|t| *t == token)?;
            Some(32000 + index as TokenId)
        }
        fn tokenize(&self, _: &str) -> Result<Vec<TokenId>, BackendError> {
            Ok(Vec::new())
        }
        fn tokenize_after_special(&self, _: &str) -> Result<Vec<TokenId>, BackendError> {
            Ok(Vec::new())
        }
        fn decode(&self, _: &[TokenId]) -> Result<String, BackendError> {
            Ok(String::new())
        }
        fn bos_id(&self) -> TokenId {
            1
        }
        fn eos_id(&self) -> TokenId {
            2
        }
        fn vocab_size(&self) -> usize {
            32016
        }
    }

    #[test]
    fn resolves_the_real_models_ids_by_string() {
        let vocab = ReflectionVocab::resolve(&Vocabulary { lacks: vec![] }).unwrap();
        assert_eq!(vocab.no_retrieval, 32000);
        assert_eq!(vocab.relevant, 32004);
        assert_eq!(vocab.utility, [32007, 32008, 32009, 32010, 32011]);
        assert_eq!(vocab.no_support, 32014);
        assert_eq!(vocab.pad, Some(32015));
    }

    #[test]
    fn missing_tokens_are_named_and_pad_is_optional() {
        let err = ReflectionVocab::resolve(&Vocabulary {
            lacks: vec!["[Utility:3]", "</paragraph>", "<pad>"],
        })
        .unwrap_err();
        match err {
            SelfRagError::MissingReflectionTokens { missing } => {
                assert_eq!(missing, vec!["</paragraph>", "[Utility:3]"]);
            }
            other => panic!("unexpected {other:?}"),
        }
        let vocab = ReflectionVocab::resolve(&Vocabulary {
            lacks: vec!["<pad>"],
        })
        .unwrap();
        assert_eq!(vocab.pad, None);
    }

    /// A model's end-of-turn token (Llama-3's `<|eot_id|>`) ends an answer as `</s>` does.
    #[test]
    fn every_end_of_generation_id_is_an_end_of_sequence() {
        struct EndsAtTurn(Vocabulary);
        impl Tokenizer for EndsAtTurn {
            fn token_id(&self, token: &str) -> Option<TokenId> {
                self.0.token_id(token)
            }
            fn tokenize(&self, text: &str) -> Result<Vec<TokenId>, BackendError> {
                self.0.tokenize(text)
            }
            fn tokenize_after_special(&self, text: &str) -> Result<Vec<TokenId>, BackendError> {
                self.0.tokenize_after_special(text)
            }
            fn decode(&self, ids: &[TokenId]) -> Result<String, BackendError> {
                self.0.decode(ids)
            }
            fn bos_id(&self) -> TokenId {
                self.0.bos_id()
            }
            fn eos_id(&self) -> TokenId {
                self.0.eos_id()
            }
            fn end_ids(&self) -> Vec<TokenId> {
                vec![2, 7]
            }
            fn vocab_size(&self) -> usize {
                self.0.vocab_size()
            }
        }
        let vocab = ReflectionVocab::resolve(&EndsAtTurn(Vocabulary { lacks: vec![] })).unwrap();
        assert!(vocab.is_end(2) && vocab.is_end(7) && !vocab.is_end(8));
        assert_eq!(vocab.group(7), Some(TokenGroup::EndOfSequence));
        assert_eq!(vocab.group(8), None);
        let plain = ReflectionVocab::resolve(&Vocabulary { lacks: vec![] }).unwrap();
        assert_eq!(plain.group(7), None);
    }

    #[test]
    fn strip_keeps_only_text() {
        let vocab = ReflectionVocab::resolve(&Vocabulary { lacks: vec![] }).unwrap();
        let ids = [32004, 500, 501, 32012, 32011, 32015, 32002, 502, 2];
        assert_eq!(vocab.strip(&ids), vec![500, 501, 502]);
        assert!(vocab.is_reflection(32002));
        assert!(!vocab.is_reflection(32015));
        assert!(!vocab.is_reflection(2));
        assert_eq!(vocab.group(32015), Some(TokenGroup::Pad));
        assert_eq!(vocab.group(32013), Some(TokenGroup::IsSup));
        assert_eq!(vocab.group(500), None);
    }
}
