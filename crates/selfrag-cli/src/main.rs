//! The `selfrag` command-line tool: the same engine as the desktop app, for scripts, tests and
//! power users. Its command names and JSON outputs are a public contract.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use selfrag_core::{Answer, CritiqueWeights, RetrieveMode, Settings};
use selfrag_engine::{Engine, EngineConfig, ExportFormat, IndexEvent};

#[derive(Parser)]
#[command(
    name = "selfrag",
    version,
    about = "Self-RAG over your own documents, on your own machine"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Index files and folders into the library.
    Index {
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
    /// Ask a question; prints the answer, or the full trace with --json.
    Ask {
        question: String,
        #[arg(long)]
        json: bool,
        #[arg(long, default_value = "adaptive")]
        mode: RetrieveMode,
        /// Retrieve threshold δ (adaptive mode).
        #[arg(long)]
        threshold: Option<f32>,
        /// Passages retrieved, candidates written.
        #[arg(long)]
        k: Option<usize>,
        #[command(flatten)]
        weights: WeightArgs,
        /// Drop unsupported or irrelevant candidates unless none would be left.
        #[arg(long)]
        hard_constraints: bool,
    },
    /// Re-rank a saved trace with new weights, without running the model.
    Rerank {
        trace: PathBuf,
        #[command(flatten)]
        weights: WeightArgs,
        #[arg(long)]
        hard_constraints: bool,
        #[arg(long)]
        json: bool,
    },
    /// Render a saved trace (from `ask --json`) as Markdown or JSON.
    Export {
        trace: PathBuf,
        #[arg(long, default_value = "md")]
        format: ExportFormat,
        /// Output file; standard output when absent.
        #[arg(short = 'o', long)]
        output: Option<PathBuf>,
    },
}

#[derive(clap::Args)]
struct WeightArgs {
    #[arg(long)]
    w_rel: Option<f32>,
    #[arg(long)]
    w_sup: Option<f32>,
    #[arg(long)]
    w_use: Option<f32>,
}

impl WeightArgs {
    fn apply(&self, mut w: CritiqueWeights) -> CritiqueWeights {
        w.rel = self.w_rel.unwrap_or(w.rel);
        w.sup = self.w_sup.unwrap_or(w.sup);
        w.use_ = self.w_use.unwrap_or(w.use_);
        w
    }
}

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("SELFRAG_LOG")
                .unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        match cli.command {
            Command::Index { paths } => index(paths).await,
            Command::Ask {
                question,
                json,
                mode,
                threshold,
                k,
                weights,
                hard_constraints,
            } => {
                let defaults = Settings::default();
                let settings = Settings {
                    mode,
                    threshold: threshold.unwrap_or(defaults.threshold),
                    k: k.unwrap_or(defaults.k),
                    weights: weights.apply(defaults.weights),
                    hard_constraints,
                    ..defaults
                };
                ask(question, settings, json).await
            }
            Command::Rerank {
                trace,
                weights,
                hard_constraints,
                json,
            } => {
                let answer = read_trace(&trace)?;
                let reranked = selfrag_core::rerank(
                    &answer,
                    weights.apply(answer.settings.weights),
                    hard_constraints,
                );
                print_answer(&reranked.answer, json)
            }
            Command::Export {
                trace,
                format,
                output,
            } => {
                let answer = read_trace(&trace)?;
                let text = selfrag_engine::render(&answer, format);
                match output {
                    Some(path) => selfrag_engine::write_atomically(&path, text.as_bytes())
                        .with_context(|| format!("exporting to {}", path.display())),
                    None => write_stdout(&text),
                }
            }
        }
    })
}

async fn index(paths: Vec<PathBuf>) -> Result<()> {
    let engine = Engine::new(EngineConfig::from_env())?;
    let finished = engine
        .index_paths(&paths, |event| {
            let line = match &event {
                IndexEvent::FileIndexed { path, passages } => {
                    format!("indexed {path} ({passages} passages)")
                }
                IndexEvent::FileSkipped { path, reason } => format!("skipped {path}: {reason}"),
                IndexEvent::FileFailed { path, error } => format!("failed {path}: {error}"),
                _ => return,
            };
            let _ = writeln!(std::io::stderr(), "{line}");
        })
        .await?;
    if let IndexEvent::Finished { failed, .. } = finished
        && failed > 0
    {
        anyhow::bail!("{failed} file(s) could not be indexed (see above)");
    }
    Ok(())
}

async fn ask(question: String, settings: Settings, json: bool) -> Result<()> {
    let engine = Engine::new(EngineConfig::from_env())?;
    let record = engine
        .ask(question, settings, |_| {}, Arc::new(AtomicBool::new(false)))
        .await?;
    print_answer(&record.answer, json)
}

fn print_answer(answer: &Answer, json: bool) -> Result<()> {
    if json {
        write_stdout(&format!("{}\n", serde_json::to_string_pretty(answer)?))
    } else {
        write_stdout(&format!("{}\n", answer.answer))
    }
}

fn read_trace(path: &PathBuf) -> Result<Answer> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_slice(&bytes).with_context(|| {
        format!(
            "{} is not a Self-RAG trace (write one with `selfrag ask --json`)",
            path.display()
        )
    })
}

fn write_stdout(text: &str) -> Result<()> {
    std::io::stdout()
        .write_all(text.as_bytes())
        .context("writing to standard output")
}
