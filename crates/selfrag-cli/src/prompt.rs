//! `selfrag debug prompt`: the exact prompts a question builds, as token ids and pieces, so
//! anyone can check what the model reads, and what a question or document full of section
//! markers or reflection tokens turns into (text, never the special tokens).
//!
//! Only the GGUF's header is read: its tokenizer and context length are all that the prompt
//! builder needs.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use selfrag_core::{Passage, PromptBuilder, ReflectionVocab, Settings, TokenId};
use selfrag_models::GgufTokenizer;
use serde::Serialize;

#[derive(Serialize)]
struct PromptOut {
    /// `decision` (where the retrieve probability is read), `no_retrieval`, or `passage`.
    kind: &'static str,
    /// The passage's file, for `passage`.
    #[serde(skip_serializing_if = "Option::is_none")]
    passage: Option<PathBuf>,
    ids: Vec<TokenId>,
    pieces: Vec<String>,
}

/// Prints the prompts of `question` with the passages read from `passages`.
pub fn print(
    question: &str,
    model: &Path,
    passages: &[PathBuf],
    max_tokens: Option<usize>,
    json: bool,
) -> Result<()> {
    let (tokenizer, context_length) = GgufTokenizer::with_context_length(model)
        .with_context(|| format!("reading the tokenizer of {}", model.display()))?;
    let vocab = ReflectionVocab::resolve(&tokenizer)?;
    let budget = max_tokens.unwrap_or(Settings::default().max_new_tokens);
    let builder = PromptBuilder::new(&tokenizer, context_length, &vocab, question, budget)?;
    let piece = |id: &TokenId| tokenizer.id_to_token(*id).unwrap_or_default().to_owned();
    let mut prompts = vec![
        ("decision", None, builder.decision_point(&[])?.ids),
        ("no_retrieval", None, builder.without_passage(&[])?.ids),
    ];
    for file in passages {
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("reading the passage {}", file.display()))?;
        let passage = Passage {
            id: file.display().to_string(),
            title: file
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
            path: file.display().to_string(),
            page: None,
            page_label: None,
            ocr_confidence: None,
            text,
        };
        let ids = builder.with_passage(&tokenizer, &[], &passage)?.ids;
        prompts.push(("passage", Some(file.clone()), ids));
    }
    let out: Vec<PromptOut> = prompts
        .into_iter()
        .map(|(kind, passage, ids)| PromptOut {
            kind,
            passage,
            pieces: ids.iter().map(piece).collect(),
            ids,
        })
        .collect();
    let text = if json {
        format!("{}\n", serde_json::to_string_pretty(&out)?)
    } else {
        let mut text = String::new();
        for prompt in &out {
            let name = match &prompt.passage {
                Some(file) => format!("passage {}", file.display()),
                None => prompt.kind.replace('_', " "),
            };
            text.push_str(&format!("# {name} ({} tokens)\n", prompt.ids.len()));
            for (id, piece) in prompt.ids.iter().zip(&prompt.pieces) {
                text.push_str(&format!("{id:>6} {piece:?}\n"));
            }
        }
        text
    };
    crate::write_stdout(&text)
}
