//! `selfrag eval`: the paper's Table 2 benchmarks with this runtime. selfrag-eval reads the
//! reference's evaluation file and scores; this runs each item through the engine with the
//! generator `selfrag ask` uses (this computer's, or a generator server), over the item's own
//! passages, and prints a line per item and the table beside the paper's figures.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use selfrag_core::{RetrieveMode, SelfRagError, Settings};
use selfrag_engine::{Engine, EngineError};
use selfrag_eval::{ItemResult, Summary, Task};
use serde::Serialize;

/// `selfrag eval`'s arguments.
#[derive(clap::Args)]
pub(crate) struct EvalArgs {
    /// popqa, triviaqa, pubhealth, arc_c or asqa.
    #[arg(long)]
    task: Task,
    /// The task's evaluation file from the reference's release (JSON Lines; ASQA's is JSON),
    /// whose items carry their retrieved passages (`ctxs`, or ASQA's `docs`).
    #[arg(long, value_name = "FILE")]
    input: PathBuf,
    /// Only the first N items.
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Print every item and the summary as one JSON document instead of lines and a table.
    #[arg(long)]
    json: bool,
    /// Default: the task's, as the paper ran it (see docs/EVALUATION.md).
    #[arg(long)]
    mode: Option<RetrieveMode>,
    /// Retrieve threshold δ (adaptive mode). Default: 0.2.
    #[arg(long)]
    threshold: Option<f32>,
    /// Passages read per item, the first K of those the file gives. Default: the task's (10
    /// for PopQA and TriviaQA, 5 for the others).
    #[arg(long)]
    k: Option<usize>,
    #[command(flatten)]
    weights: crate::WeightArgs,
    /// Drop unsupported or irrelevant candidates unless none would be left.
    #[arg(long)]
    hard_constraints: bool,
    /// Leave p_LM out of the segment score f.
    #[arg(long)]
    no_p_lm: bool,
    #[command(flatten)]
    scoring: crate::ScoringArgs,
    /// New tokens per candidate (each segment in long form). Default: the task's.
    #[arg(long)]
    max_tokens: Option<usize>,
    /// Generate on this server, as `selfrag ask --generator-url` (vLLM:
    /// http://host:8000/v1). Default: SELFRAG_GENERATOR_URL.
    #[arg(long, value_name = "URL")]
    generator_url: Option<String>,
    /// The model to ask the server for. Default: SELFRAG_GENERATOR_MODEL.
    #[arg(long, value_name = "NAME", requires = "generator_url")]
    generator_model: Option<String>,
    #[command(flatten)]
    numerics: crate::NumericsArgs,
}

impl EvalArgs {
    /// The task's settings with the flags given over them.
    fn settings(&self) -> Settings {
        let task = self.task.settings();
        Settings {
            mode: self.mode.unwrap_or(task.mode),
            threshold: self.threshold.unwrap_or(task.threshold),
            k: self.k.unwrap_or(task.k),
            weights: self.weights.apply(task.weights),
            hard_constraints: self.hard_constraints,
            use_p_lm: !self.no_p_lm,
            max_new_tokens: self.max_tokens.unwrap_or(task.max_new_tokens),
            max_segment_tokens: self.max_tokens.unwrap_or(task.max_segment_tokens),
            ..self.scoring.apply(task)
        }
    }

    /// The engine `selfrag ask` would start, with this command's server and numerics.
    fn engine(&self) -> Result<Engine> {
        let server = self
            .generator_url
            .clone()
            .map(|url| (url, self.generator_model.clone()));
        crate::answering_engine(server, &self.numerics)
    }
}

/// `selfrag eval --json`: the summary and every item.
#[derive(Serialize)]
struct EvalOutput<'a> {
    summary: &'a Summary,
    items: &'a [ItemResult],
}

/// Runs the evaluation `args` describe.
pub(crate) async fn run(args: EvalArgs) -> Result<()> {
    let mut items = selfrag_eval::read_items(&args.input, args.task)?;
    if let Some(limit) = args.limit {
        items.truncate(limit);
    }
    let settings = args.settings();
    settings
        .validate()
        .context("the evaluation's settings (from the task and the flags)")?;
    let engine = args.engine()?;
    let total = items.len();
    let mut results = Vec::with_capacity(total);
    let mut generator = None;
    for (done, item) in items.iter().enumerate() {
        let answer = engine
            .answer_over_passages(item.asked.clone(), item.passages.clone(), settings.clone())
            .await;
        let result = match answer {
            Ok(answer) => {
                if generator.is_none() {
                    generator = answer.generator.clone();
                }
                ItemResult::scored(item, &answer)
            }
            // What this item's question or numbers did; the next item may run.
            Err(EngineError::SelfRag(e)) if !matches!(e, SelfRagError::Cancelled) => {
                ItemResult::failed(item, e)
            }
            // No model, no server, or a stop: no item can run.
            Err(e) => {
                return Err(e).with_context(|| {
                    format!("evaluating {}, {}", args.input.display(), item.place)
                });
            }
        };
        if args.json {
            let _ = writeln!(std::io::stderr(), "item {} of {total} done", done + 1);
        } else {
            crate::write_stdout(&format!("{}\n", result.line()))?;
        }
        results.push(result);
    }
    if !results.is_empty() && results.iter().all(|r| r.error.is_some()) {
        let first = results[0].error.clone().unwrap_or_default();
        anyhow::bail!("every item failed; the first: {first}");
    }
    let summary = Summary::new(args.task, &results, settings, generator);
    if args.json {
        let output = EvalOutput {
            summary: &summary,
            items: &results,
        };
        crate::write_stdout(&format!("{}\n", serde_json::to_string_pretty(&output)?))
    } else {
        crate::write_stdout(&format!("\n{}", summary.table()))
    }
}
