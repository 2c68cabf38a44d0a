//! # selfrag-references: reading reference managers
//!
//! A researcher's papers already have records: in Zotero, or in the bibliography file their
//! paper cites from. This crate reads those records as [`selfrag_works::Work`]s, each with the
//! files it holds, and owns nothing else:
//! - [`zotero`]: a Zotero data directory, read-only and while Zotero runs (from a consistent
//!   snapshot of `zotero.sqlite`, never taking its lock): each regular item's stored and linked
//!   attachments with the item's metadata, its collections, its Better BibTeX citation key, and
//!   what was left out and why; [`zotero::database_stamp`] tells a watcher when to read again;
//! - [`bibliography`]: BibTeX and BibLaTeX files (parsed by the `biblatex` crate, with the
//!   `file` fields Zotero, JabRef and Mendeley write) and CSL-JSON files;
//! - [`lookup`]: a work looked up by its DOI (doi.org's CSL-JSON, for Crossref's and DataCite's
//!   DOIs) or its arXiv id (arXiv's API), sending the identifier alone, for a caller whose
//!   person turned look-ups on;
//! - `fixture` (feature `fixture`): writes a Zotero data directory with Zotero's real table and
//!   column names, for this crate's tests and the engine's and the app's; `stand_in` (the same
//!   feature): a stand-in for doi.org and arXiv's API on 127.0.0.1 that records what it was
//!   sent.
//!
//! Every field it reads carries [`selfrag_works::FieldSource::ReferenceManager`] (Zotero),
//! [`selfrag_works::FieldSource::BibliographyFile`] or [`selfrag_works::FieldSource::Lookup`].
//! Nothing here reaches the network but [`lookup`], and only when called. Which documents of a
//! library the records belong to, what is indexed and whether anything is looked up is the
//! caller's business: this crate reads and never writes what it reads. It must not depend on the models, the async runtime, the store (LanceDB,
//! Arrow), Tauri, the algorithm (selfrag-core) or the crates built on them.
//!
//! ```no_run
//! use selfrag_references::{bibliography, zotero};
//!
//! # fn main() -> Result<(), selfrag_references::ReferencesError> {
//! if let Some(dir) = zotero::default_data_dir() {
//!     let library = zotero::read_zotero(&dir)?;
//!     for document in &library.documents {
//!         let title = document.work.title().unwrap_or("untitled");
//!         println!("{}: {title}", document.path.display());
//!     }
//! }
//! let entries = bibliography::read_bibliography(std::path::Path::new("thesis.bib"))?;
//! # let _ = entries;
//! # Ok(())
//! # }
//! ```

pub mod bibliography;
mod error;
#[cfg(feature = "fixture")]
pub mod fixture;
pub mod lookup;
mod snapshot;
#[cfg(feature = "fixture")]
pub mod stand_in;
mod text;
pub mod zotero;

pub use error::ReferencesError;
