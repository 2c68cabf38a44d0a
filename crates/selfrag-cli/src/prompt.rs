//! `selfrag debug prompt`: the exact prompts a question builds, as token ids and pieces, so
//! anyone can check what the model reads, and what a question or document full of section
//! markers or reflection tokens turns into (text, never the special tokens).
//!
//! Only the GGUF's header is read: its tokenizer and context length are all that the prompt
//! builder needs.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use selfrag_core::{DummyPrefix, Passage, PromptBuilder, ReflectionVocab, Settings, TokenId};
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

/// The limits `ask` would build a short answer's prompts under; `None` takes its default.
pub struct Limits {
    /// New tokens reserved for the answer.
    pub max_tokens: Option<usize>,
    /// Tokens a prompt and its continuation may take, held to the model's context.
    pub prompt_budget: Option<usize>,
}

/// Prints the prompts of `question` with the passages read from `passages`, the dummy prefix
/// placed as `dummy_prefix` says, within `limits` as `ask` would build them.
pub fn print(
    question: &str,
    model: &Path,
    passages: &[PathBuf],
    limits: Limits,
    dummy_prefix: DummyPrefix,
    json: bool,
) -> Result<()> {
    let (tokenizer, context_length) = GgufTokenizer::with_context_length(model)
        .with_context(|| format!("reading the tokenizer of {}", model.display()))?;
    let tokenizer = tokenizer.with_dummy_prefix(dummy_prefix);
    let vocab = ReflectionVocab::resolve(&tokenizer)?;
    let defaults = Settings::default();
    let budget = limits.max_tokens.unwrap_or(defaults.max_new_tokens);
    let window = context_length.min(limits.prompt_budget.unwrap_or(defaults.prompt_budget));
    let builder = PromptBuilder::new(&tokenizer, window, &vocab, question, budget)?;
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
            work: None,
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
