//! # selfrag-eval: the paper's table with this runtime
//!
//! This crate owns evaluation on the benchmarks of the paper's Table 2 that the reference
//! (AkariAsai/self-rag) ships with their retrieved passages: reading its evaluation files
//! (PopQA, TriviaQA, PubHealth and ARC-Challenge as JSON Lines, ASQA as ALCE's JSON), asking
//! each item's question as the reference lays it out, the reference's metrics (`match`,
//! accuracy, ASQA's str-em), and the table that sets our figure beside the paper's and an
//! independent rerun's, with the settings that produced ours.
//!
//! It runs no model: the caller answers each [`EvalItem::asked`] over the item's own
//! [`EvalItem::passages`], the top K as given (`selfrag eval` does it through selfrag-engine's
//! `answer_over_passages`, with the generator `selfrag ask` uses), and hands the answer back to
//! [`ItemResult::scored`]. It depends on selfrag-core alone: no engine, models or I/O beyond
//! reading the data file. docs/EVALUATION.md says how to reproduce the table.
//!
//! ## Tour
//! - [`Task`]: the five benchmarks, each with its [`Metric`], the settings the paper ran it
//!   with ([`Task::settings`]) and the figures to compare with.
//! - [`read_items`]: an evaluation file into [`EvalItem`]s; bad input names the file and line.
//! - [`metrics`]: `match`, accuracy and str-em on one item, and the figure over a run.
//! - [`ItemResult`] and [`Summary`]: one scored answer, and the table.
//!
//! ## Example
//! ```
//! use selfrag_eval::{Gold, Task, parse_items};
//!
//! let line = r#"{"question": "Who wrote Dracula?", "answers": ["Bram Stoker"],
//!   "ctxs": [{"title": "Dracula", "text": "Dracula is an 1897 novel by Bram Stoker."}]}"#;
//! let items = parse_items(&line.replace('\n', ""), "popqa.jsonl", Task::PopQa, false)?;
//! assert_eq!(items[0].passages[0].title, "Dracula");
//! // An answer is scored as the reference scores PopQA: is a gold answer in the prediction?
//! assert_eq!(items[0].gold.score("It was written by Bram Stoker."), 1.0);
//! assert_eq!(items[0].gold.score("bram stoker"), 0.0);
//! # Ok::<(), selfrag_eval::EvalError>(())
//! ```

mod data;
pub mod metrics;
mod report;
mod task;

pub use data::{EvalItem, Gold, Place, parse_items, read_items};
pub use report::{ItemResult, Summary};
pub use task::{ASQA_INSTRUCTION, Metric, Task};

/// Why an evaluation file cannot be read; each names the file and, for an item, where it is.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// The file as a whole is not what a task reads.
    #[error("{path}: {message}")]
    File { path: String, message: String },
    /// One item is malformed; `message` says what it lacks or holds wrongly.
    #[error("{path}, {place}: {message}")]
    Item {
        path: String,
        place: Place,
        message: String,
    },
    #[error(
        "{path} has no items; an evaluation file holds one JSON object per line (JSON Lines) or one JSON array"
    )]
    Empty { path: String },
}
