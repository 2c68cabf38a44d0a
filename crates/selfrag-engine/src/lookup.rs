//! Looking the library's works up by their DOI or arXiv id (selfrag-references' `lookup`):
//! the explicit action ([`Engine::look_up_works`]: `selfrag library lookup`, the app's "Look
//! up"), and the look-ups after an indexing job, which run only where the person turned them
//! on ([`Engine::set_look_up_works`], the app's setting `lookUpWorks`, `selfrag index
//! --look-up`). With the setting off an indexing job sends nothing anywhere.
//!
//! A registry's record is kept as the document's [`FieldSource::Lookup`] record, apart from
//! what the file and the person say, and carries the identifier it was looked up by: a
//! document that still has that identifier is not looked up again (unless asked to refresh);
//! one whose identifier changed (a file replaced by another paper, the person's edit) is
//! looked up by its new one, and one with none left loses the record. Only the identifier
//! leaves the machine.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use selfrag_index::DocumentRecord;
use selfrag_references::ReferencesError;
use selfrag_references::lookup::{LookupConfig, WorkId, WorkLookup};
use selfrag_works::{FieldSource, Work, WorkRecords};
use serde::{Deserialize, Serialize};

use crate::{Engine, EngineError, IndexEvent};

/// Whether indexing jobs look their documents' works up, and where look-ups go.
#[derive(Debug, Default)]
pub(crate) struct LookupState {
    /// The person's setting; off until a front end turns it on.
    on: std::sync::atomic::AtomicBool,
    /// The services set for this engine; `None`: the environment's (`SELFRAG_DOI_RESOLVER`,
    /// `SELFRAG_ARXIV_API`), else doi.org and export.arxiv.org.
    services: std::sync::Mutex<Option<LookupConfig>>,
}

/// A document given a registry's record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct LookedUpWork {
    pub path: String,
    /// `DOI 10.1000/xyz` or `arXiv:2310.11511`.
    pub identifier: String,
    /// What the registry said, every field from `lookup`.
    pub work: Work,
}

/// A document whose look-up failed: its record stays as the other sources gave it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct LookupFailure {
    pub path: String,
    pub identifier: String,
    /// Names the service and what to do.
    pub error: String,
}

/// What a round of look-ups did.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct LookupReport {
    /// The documents given a registry's record now.
    pub found: Vec<LookedUpWork>,
    /// Documents that already had a record looked up by the identifier they have.
    pub already: usize,
    /// Documents with neither a DOI nor an arXiv id: nothing to look up.
    pub without_identifier: usize,
    /// Records removed because their document no longer has the identifier they were looked
    /// up by.
    pub dropped: usize,
    pub failed: Vec<LookupFailure>,
}

/// What to do for one document.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Plan {
    /// Look it up by this identifier.
    Fetch(WorkId),
    /// Its record was looked up by the identifier it has.
    Keep,
    /// It has a record but no identifier any more.
    Drop,
    /// No identifier, no record.
    Nothing,
}

/// The plan for a document with `records`: its identifier is what the document says of itself
/// (every source but the look-up), so a look-up's own DOI never hides a changed one.
fn plan(records: &WorkRecords, refresh: bool) -> Plan {
    let id = WorkId::of(&records.merged_except(FieldSource::Lookup));
    match (id, records.get(FieldSource::Lookup)) {
        (None, Some(_)) => Plan::Drop,
        (None, None) => Plan::Nothing,
        (Some(id), Some(record)) if !refresh && id.was_looked_up_in(record) => Plan::Keep,
        (Some(id), _) => Plan::Fetch(id),
    }
}

impl Engine {
    /// Turns the look-ups after each indexing job on or off (the person's setting; off by
    /// default). Off, an indexing job sends nothing.
    pub fn set_look_up_works(&self, on: bool) {
        self.lookup
            .on
            .store(on, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether indexing jobs look their documents' works up.
    pub fn looks_up_works(&self) -> bool {
        self.lookup.on.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Sends look-ups to `services` instead of the environment's (or doi.org's and arXiv's).
    pub fn set_lookup_services(&self, services: LookupConfig) {
        *self
            .lookup
            .services
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(services);
    }

    /// Where look-ups go: the services set, else the environment's; a variable that names no
    /// address is an error naming it.
    pub fn lookup_services(&self) -> Result<LookupConfig, EngineError> {
        let set = self
            .lookup
            .services
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        match set {
            Some(services) => Ok(services),
            None => Ok(LookupConfig::from_env()?),
        }
    }

    /// Looks up the works of the library's documents at `paths` (each a document, or a folder
    /// of them; every document when `None`) that have a DOI or an arXiv id, whatever the
    /// setting (this is the person asking), and keeps each registry's record as the
    /// document's [`FieldSource::Lookup`] record, all in one commit. A document whose record
    /// was looked up by the identifier it has is skipped unless `refresh`. One failure is a
    /// line of the report, never the end of the round.
    pub async fn look_up_works(
        &self,
        paths: Option<Vec<PathBuf>>,
        refresh: bool,
    ) -> Result<LookupReport, EngineError> {
        let library = self.library().await?;
        let documents = match paths {
            None => library.documents(),
            Some(paths) => {
                let all = library.documents();
                let mut chosen = Vec::new();
                for path in paths {
                    let under = documents_at(&all, &path);
                    if under.is_empty() {
                        return Err(EngineError::NotInLibrary(format!(
                            "{} is not in the library (see `selfrag library list`); add it first",
                            path.display()
                        )));
                    }
                    chosen.extend(under);
                }
                chosen
            }
        };
        let services = self.lookup_services()?;
        self.look_up_documents(documents, refresh, Some(services))
            .await
    }

    /// After an indexing job: the documents it indexed are looked up where the setting is on
    /// (the round's report goes to `on_event`); with it off nothing is sent, and only the
    /// records whose document no longer has their identifier are removed.
    pub(crate) async fn look_up_after_job(
        &self,
        indexed: &[PathBuf],
        on_event: impl Fn(IndexEvent),
    ) -> Result<(), EngineError> {
        if indexed.is_empty() {
            return Ok(());
        }
        let library = self.library().await?;
        let documents: Vec<DocumentRecord> = indexed
            .iter()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .filter_map(|path| library.document_at(path))
            .collect();
        let services = if self.looks_up_works() {
            Some(self.lookup_services()?)
        } else {
            None
        };
        let sent = services.is_some();
        let report = self.look_up_documents(documents, false, services).await?;
        if sent && (!report.found.is_empty() || !report.failed.is_empty()) {
            for failure in &report.failed {
                tracing::warn!(path = %failure.path, error = %failure.error, "look-up failed");
            }
            on_event(IndexEvent::WorksLookedUp {
                found: report.found.len(),
                already: report.already,
                failed: report.failed,
            });
        }
        Ok(())
    }

    /// The round itself: `services` `None` sends nothing (records that lost their identifier
    /// are still removed, and a changed identifier's old record with them).
    async fn look_up_documents(
        &self,
        documents: Vec<DocumentRecord>,
        refresh: bool,
        services: Option<LookupConfig>,
    ) -> Result<LookupReport, EngineError> {
        let mut report = LookupReport::default();
        let mut fetch: Vec<(PathBuf, WorkId, bool)> = Vec::new();
        let mut records: Vec<(PathBuf, Work)> = Vec::new();
        for document in documents {
            let path = PathBuf::from(&document.path);
            let works = document.works.unwrap_or_default();
            match plan(&works, refresh) {
                Plan::Nothing => report.without_identifier += 1,
                Plan::Keep => report.already += 1,
                Plan::Drop => {
                    report.dropped += 1;
                    records.push((path, Work::default()));
                }
                Plan::Fetch(id) => {
                    // A record of another identifier is wrong now, whatever the look-up gives.
                    let stale = works
                        .get(FieldSource::Lookup)
                        .is_some_and(|record| !id.was_looked_up_in(record));
                    if services.is_some() {
                        fetch.push((path, id, stale));
                    } else if stale {
                        report.dropped += 1;
                        records.push((path, Work::default()));
                    }
                }
            }
        }
        if let Some(services) = services
            && !fetch.is_empty()
        {
            let lookup = WorkLookup::new(services);
            let fetched = tokio::task::spawn_blocking(move || fetch_all(&lookup, fetch))
                .await
                .map_err(|e| EngineError::ReferencesLost {
                    path: PathBuf::from("the look-ups"),
                    reason: e.to_string(),
                })?;
            for (path, id, stale, result) in fetched {
                let path_text = path.display().to_string();
                match result {
                    Ok(work) => {
                        report.found.push(LookedUpWork {
                            path: path_text,
                            identifier: id.to_string(),
                            work: work.clone(),
                        });
                        records.push((path, work));
                    }
                    Err(error) => {
                        if stale {
                            report.dropped += 1;
                            records.push((path, Work::default()));
                        }
                        report.failed.push(LookupFailure {
                            path: path_text,
                            identifier: id.to_string(),
                            error: error.to_string(),
                        });
                    }
                }
            }
        }
        if !records.is_empty() {
            let library = self.library().await?;
            // A document removed meanwhile (a watched folder's change) is left out, not an
            // error for the others.
            records.retain(|(path, _)| library.document_at(path).is_some());
            library.set_works(FieldSource::Lookup, records).await?;
        }
        Ok(report)
    }
}

/// The library's documents at `path`: the document there, or those under it when it is a
/// folder.
fn documents_at(all: &[DocumentRecord], path: &Path) -> Vec<DocumentRecord> {
    let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    all.iter()
        .filter(|d| Path::new(&d.path).starts_with(&path))
        .cloned()
        .collect()
}

/// Looks each identifier up in turn. Once a service cannot be reached, the documents left for
/// it fail with that error without a request each (an offline machine would otherwise wait out
/// every time limit).
fn fetch_all(
    lookup: &WorkLookup,
    fetch: Vec<(PathBuf, WorkId, bool)>,
) -> Vec<(PathBuf, WorkId, bool, Result<Work, ReferencesError>)> {
    let mut unreachable: Vec<(String, String)> = Vec::new();
    fetch
        .into_iter()
        .map(|(path, id, stale)| {
            let service = lookup.service(&id);
            let result = match unreachable.iter().find(|(s, _)| *s == service) {
                Some((_, message)) => Err(ReferencesError::LookupUnreachable {
                    service: service.clone(),
                    id: id.to_string(),
                    message: format!("not tried: {message}"),
                }),
                None => lookup.look_up(&id),
            };
            if let Err(ReferencesError::LookupUnreachable { message, .. }) = &result
                && !message.starts_with("not tried")
            {
                unreachable.push((service, message.clone()));
            }
            (path, id, stale, result)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use selfrag_works::Sourced;

    use super::*;

    fn with_doi(doi: &str, source: FieldSource) -> Work {
        Work {
            doi: Some(Sourced::new(doi.into(), source)),
            ..Work::default()
        }
    }

    #[test]
    fn a_document_is_looked_up_by_what_it_says_of_itself_and_once_per_identifier() {
        let mut records = WorkRecords::default();
        assert_eq!(plan(&records, false), Plan::Nothing);
        records.set_from_file(&with_doi("10.1/a", FieldSource::Identifier));
        assert_eq!(
            plan(&records, false),
            Plan::Fetch(WorkId::Doi("10.1/a".into()))
        );
        records.set(FieldSource::Lookup, with_doi("10.1/a", FieldSource::Lookup));
        assert_eq!(plan(&records, false), Plan::Keep);
        assert_eq!(
            plan(&records, true),
            Plan::Fetch(WorkId::Doi("10.1/a".into()))
        );
        // The file now names another DOI: the look-up's own DOI does not hide it.
        records.set_from_file(&with_doi("10.1/b", FieldSource::Identifier));
        assert_eq!(
            plan(&records, false),
            Plan::Fetch(WorkId::Doi("10.1/b".into()))
        );
        // The person's DOI is the one looked up.
        records.set(
            FieldSource::Person,
            with_doi("10.1/mine", FieldSource::Person),
        );
        assert_eq!(
            plan(&records, false),
            Plan::Fetch(WorkId::Doi("10.1/mine".into()))
        );
        // No identifier left: the record goes.
        records.set(FieldSource::Person, Work::default());
        records.set_from_file(&Work::default());
        assert_eq!(plan(&records, false), Plan::Drop);
    }
}
