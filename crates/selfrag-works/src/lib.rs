//! # selfrag-works: the work a document holds
//!
//! A researcher cites works (authors, year, title, venue, DOI, their own citation key) at a
//! page, not files. This crate owns that record and nothing that reads or stores it:
//! - [`Work`]: the bibliographic fields of one document, each with the [`FieldSource`] it came
//!   from, and [`Work::merge`], which keeps for every field the value of the best source (the
//!   person's own edit above a reference manager, above a bibliography file, above a registry's
//!   record looked up by its DOI or arXiv id, above the file's metadata, above an identifier
//!   found in its text, above a guess from its first page), and
//!   [`WorkRecords`], each source's record kept apart so one can be read again or undone;
//! - [`identifiers`]: DOIs, arXiv ids (new and old style) and ISBNs found in text, checked;
//! - [`cite`]: how a work is named in an answer ("Marrow & Ødegård 1998") and the conventional
//!   citation key a bibliography gets where the person has none of their own.
//!
//! It depends only on serde and text crates, so the algorithm (selfrag-core, whose passages
//! carry their work into the trace), the library (selfrag-index, which stores it), the readers
//! of reference managers and the exports all share one definition.

pub mod cite;
pub mod identifiers;
mod work;

pub use work::{Author, FieldSource, Sourced, Work, WorkDate, WorkRecords, WorkType, ZoteroLink};
