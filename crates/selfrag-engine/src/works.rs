//! The works the library's documents hold, from the engine's side: the person's edit of a
//! document's record, and the reference managers and bibliography files a person adds (read by
//! selfrag-references): their files indexed as one job, then each document given the record
//! the reference manager or bibliography file keeps of it, then (where the person turned
//! look-ups on) the works of the documents indexed looked up by their DOI or arXiv id.
//!
//! A Zotero library added stays in sync ([`Engine::keep_zotero_in_sync`]): the libraries and
//! the files each gave are remembered in `zotero.json` beside the library, their databases'
//! stamps are polled, and a library whose database changed and then kept still for one poll is
//! read again: new items and attachments are indexed, edited records replace Zotero's record of
//! each document (the person's edits stay above them), and the files of items moved to the
//! trash leave the library.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use selfrag_references::{bibliography, zotero};
use selfrag_works::{FieldSource, Work};
use serde::{Deserialize, Serialize};

use crate::{Engine, EngineError, IndexEvent};

/// How often the app reads a Zotero database's stamp: a change is read within two polls (one
/// to see it, one to see it kept still), well inside a minute.
pub const ZOTERO_POLL: Duration = Duration::from_secs(10);

/// The Zotero libraries added to this library and the files each gave (`zotero.json`).
#[derive(Debug, Default, Serialize, Deserialize)]
struct AddedZoteroLibraries {
    libraries: Vec<AddedZotero>,
}

#[derive(Debug, Serialize, Deserialize)]
struct AddedZotero {
    dir: PathBuf,
    files: BTreeSet<PathBuf>,
    /// Files the person removed from the library: not added again.
    #[serde(default)]
    excluded: BTreeSet<PathBuf>,
}

/// What adding a Zotero library or a bibliography file did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct ReferenceImport {
    /// The files the reference manager or bibliography names that the app reads.
    pub files: usize,
    /// The documents of those files the library holds now, each with its record.
    pub with_record: usize,
    /// What was not added, and why (a missing file, a format the app does not read), one line
    /// each.
    pub skipped: Vec<String>,
    /// The indexing job's last event.
    pub indexing: Option<IndexEvent>,
}

impl Engine {
    /// Sets the person's own record of the work in the library's document at `path` (every
    /// field of `work` counts as theirs and wins over every other source; an empty work undoes
    /// their edits) and returns the work as it now reads.
    pub async fn set_work(&self, path: &Path, work: Work) -> Result<Work, EngineError> {
        let library = self.library().await?;
        // Where the document sits in Zotero is Zotero's to say: the `zotero://` address and
        // the collection filter are built from it, so an edit never carries one.
        let work = Work {
            zotero: None,
            ..work
        };
        let mut works = library
            .set_works(FieldSource::Person, vec![(path.to_path_buf(), work)])
            .await?;
        Ok(works.pop().unwrap_or_default())
    }

    /// The `zotero://` address that shows the library's document at `path` in Zotero: its PDF
    /// at `page` (1-based, the file's own page) where it is a PDF attachment, else its item
    /// selected; `None` where the document did not come from Zotero. Built from the library's
    /// record only, so a caller cannot make it name another item or scheme.
    pub async fn zotero_uri(
        &self,
        path: &Path,
        page: Option<u32>,
    ) -> Result<Option<String>, EngineError> {
        let library = self.library().await?;
        let document = library.document_at(path).ok_or_else(|| {
            EngineError::NotInLibrary(format!(
                "{} is not in the library; add it (or its Zotero library) first",
                path.display()
            ))
        })?;
        let is_pdf = Path::new(&document.path)
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("pdf"));
        Ok(document
            .work()
            .zotero
            .and_then(|link| link.open_uri(page, is_pdf)))
    }

    /// Adds the Zotero library in data directory `dir` (read-only, while Zotero runs): indexes
    /// the files attached to its items and gives each document its item's record.
    pub async fn add_zotero_library(
        &self,
        dir: &Path,
        on_event: impl Fn(IndexEvent),
    ) -> Result<ReferenceImport, EngineError> {
        let owned = dir.to_path_buf();
        let read = tokio::task::spawn_blocking(move || zotero::read_zotero(&owned))
            .await
            .map_err(|e| lost(dir, e))??;
        let skipped = read
            .skipped
            .iter()
            .map(|s| format!("{} ({}): {}", s.title, s.item_key, s.reason))
            .chain(read.notes.iter().cloned())
            .collect();
        let excluded = self
            .added_zotero_libraries()
            .libraries
            .into_iter()
            .find(|l| l.dir == dir)
            .map(|l| l.excluded)
            .unwrap_or_default();
        let files: Vec<(PathBuf, Work)> = read
            .documents
            .into_iter()
            .filter(|d| !excluded.contains(&d.path))
            .map(|d| (d.path, d.work))
            .collect();
        // What Zotero still lists: the files read, and those of live items that are missing
        // for now (an unmounted drive, not synced yet), which must not leave the library.
        let mut listed: BTreeSet<PathBuf> = files.iter().map(|(p, _)| p.clone()).collect();
        listed.extend(read.skipped.iter().filter_map(|s| match &s.reason {
            zotero::SkipReason::MissingFile { path } => Some(path.clone()),
            _ => None,
        }));
        let import = self
            .add_referenced_files(FieldSource::ReferenceManager, files, skipped, on_event)
            .await?;
        // The files of items trashed (or attachments removed) since the last read leave the
        // library, unless a watched folder holds them: the person added those themselves.
        let watched = self.watched_folders().await?;
        let _one_writer = self.jobs.zotero_record.lock().await;
        let mut added = self.added_zotero_libraries();
        let before = added
            .libraries
            .iter()
            .position(|l| l.dir == dir)
            .map(|i| added.libraries.remove(i))
            .unwrap_or_else(|| AddedZotero {
                dir: dir.to_path_buf(),
                files: BTreeSet::new(),
                excluded: BTreeSet::new(),
            });
        for gone in before.files.difference(&listed) {
            if !watched.iter().any(|folder| gone.starts_with(folder)) {
                self.remove_documents(gone).await?;
            }
        }
        added.libraries.push(AddedZotero {
            files: listed,
            ..before
        });
        self.remember_zotero_libraries(&added)?;
        Ok(import)
    }

    /// Remembers that the person removed the document at `path` from the library, so a Zotero
    /// library that lists it does not add it again at its next read.
    pub async fn exclude_from_zotero(&self, path: &Path) -> Result<(), EngineError> {
        let _one_writer = self.jobs.zotero_record.lock().await;
        let mut added = self.added_zotero_libraries();
        let mut changed = false;
        for library in &mut added.libraries {
            if library.files.remove(path) {
                library.excluded.insert(path.to_path_buf());
                changed = true;
            }
        }
        if changed {
            self.remember_zotero_libraries(&added)?;
        }
        Ok(())
    }

    /// The Zotero data directories added to this library.
    pub fn zotero_libraries(&self) -> Vec<PathBuf> {
        self.added_zotero_libraries()
            .libraries
            .into_iter()
            .map(|l| l.dir)
            .collect()
    }

    /// Keeps every Zotero library added in sync, for as long as the returned future is polled,
    /// reading their stamps every `poll` (see the module doc); `on_sync` hears each read's
    /// result, or why it failed.
    pub async fn keep_zotero_in_sync(
        &self,
        poll: Duration,
        on_event: impl Fn(IndexEvent),
        on_sync: impl Fn(&Path, Result<ReferenceImport, EngineError>),
    ) {
        let mut seen: HashMap<PathBuf, zotero::ZoteroStamp> = HashMap::new();
        let mut read: HashMap<PathBuf, zotero::ZoteroStamp> = HashMap::new();
        loop {
            for dir in self.zotero_libraries() {
                let Ok(stamp) = zotero::database_stamp(&dir) else {
                    // Gone for now (an unmounted disk): tried again at the next poll.
                    continue;
                };
                let still = seen.get(&dir) == Some(&stamp);
                if still && read.get(&dir) != Some(&stamp) {
                    let result = self.add_zotero_library(&dir, &on_event).await;
                    // A read that failed is tried again at the next poll.
                    if result.is_ok() {
                        read.insert(dir.clone(), stamp);
                    }
                    on_sync(&dir, result);
                }
                seen.insert(dir, stamp);
            }
            tokio::time::sleep(poll).await;
        }
    }

    fn zotero_file(&self) -> PathBuf {
        self.config().library_state_dir().join("zotero.json")
    }

    fn added_zotero_libraries(&self) -> AddedZoteroLibraries {
        std::fs::read(self.zotero_file())
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default()
    }

    fn remember_zotero_libraries(&self, added: &AddedZoteroLibraries) -> Result<(), EngineError> {
        // Plain data with string keys: serializing cannot fail.
        let json = serde_json::to_vec_pretty(added).unwrap_or_default();
        crate::write_atomically(&self.zotero_file(), &json)
    }

    /// Adds the BibTeX, BibLaTeX or CSL-JSON file at `path`: indexes the files its entries
    /// name (`file = {…}`) and gives each document its entry's record.
    pub async fn add_bibliography(
        &self,
        path: &Path,
        on_event: impl Fn(IndexEvent),
    ) -> Result<ReferenceImport, EngineError> {
        let owned = path.to_path_buf();
        let entries = tokio::task::spawn_blocking(move || bibliography::read_bibliography(&owned))
            .await
            .map_err(|e| lost(path, e))??;
        let mut skipped = Vec::new();
        let mut files = Vec::new();
        for entry in entries {
            if entry.files.is_empty() {
                let key = Work::text(&entry.work.citation_key).unwrap_or("an entry");
                skipped.push(format!("{key}: names no file"));
            }
            for file in entry.files {
                // A `.bib` is a file anyone can send: it names files to read, never folders
                // to walk, and only of the formats the app reads.
                let readable = file.extension().and_then(|e| e.to_str()).is_some_and(|e| {
                    zotero::READABLE_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str())
                });
                if file.is_file() && readable {
                    files.push((file, entry.work.clone()));
                } else {
                    skipped.push(format!(
                        "{}: not a file of a format the app reads",
                        file.display()
                    ));
                }
            }
        }
        self.add_referenced_files(FieldSource::BibliographyFile, files, skipped, on_event)
            .await
    }

    async fn add_referenced_files(
        &self,
        source: FieldSource,
        files: Vec<(PathBuf, Work)>,
        mut skipped: Vec<String>,
        on_event: impl Fn(IndexEvent),
    ) -> Result<ReferenceImport, EngineError> {
        // One record per document: the first entry that names a file gives it (two entries
        // naming one file, or `a.pdf` and `./a.pdf`).
        let mut seen = std::collections::HashSet::new();
        let mut files_once = Vec::with_capacity(files.len());
        for (path, work) in files {
            let path: PathBuf = path
                .components()
                .filter(|c| !matches!(c, std::path::Component::CurDir))
                .collect();
            if seen.insert(std::path::absolute(&path).unwrap_or_else(|_| path.clone())) {
                files_once.push((path, work));
            } else {
                skipped.push(format!(
                    "{}: named again by another entry; the first one's record is kept",
                    path.display()
                ));
            }
        }
        let files = files_once;
        let paths: Vec<PathBuf> = files.iter().map(|(p, _)| p.clone()).collect();
        let (indexing, indexed) = if paths.is_empty() {
            (None, Vec::new())
        } else {
            let (finished, indexed) = self.index_paths_alone(&paths, &on_event).await?;
            (Some(finished), indexed)
        };
        let library = self.library().await?;
        let (held, missing): (Vec<_>, Vec<_>) = files
            .into_iter()
            .partition(|(path, _)| library.document_at(path).is_some());
        skipped.extend(
            missing.iter().map(|(path, _)| {
                format!("{}: not indexed (see the indexing report)", path.display())
            }),
        );
        let with_record = library.set_works(source, held).await?.len();
        // With the records in place, so a DOI only the reference manager knows is looked up.
        self.look_up_after_job(&indexed, &on_event).await?;
        Ok(ReferenceImport {
            files: paths.len(),
            with_record,
            skipped,
            indexing,
        })
    }
}

fn lost(path: &Path, error: tokio::task::JoinError) -> EngineError {
    EngineError::ReferencesLost {
        path: path.to_path_buf(),
        reason: error.to_string(),
    }
}
