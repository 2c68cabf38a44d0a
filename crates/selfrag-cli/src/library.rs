//! `selfrag index`, `selfrag library list|remove|stats|lookup` and `selfrag search`: the document
//! library from the command line. With `--json` each prints one JSON document on stdout; the
//! progress of indexing goes to stderr.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Subcommand;
use selfrag_engine::{Engine, IndexEvent, LibraryEvent, SearchFilter, SearchMode, SearchQuery};
use serde::Serialize;

#[derive(Subcommand)]
pub enum LibraryCommand {
    /// Every document: path, title, pages, passages, and how it is cited (author and year).
    /// With `--json`, each document's work record with every field's source.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Remove a document, or every document under a folder (the files stay on disk).
    Remove { path: PathBuf },
    /// Test the library's location without opening it: for a shared library (s3://, gs://,
    /// az://), that the store answers, takes the credentials, and honours conditional writes
    /// (without which two computers' commits could overwrite each other); for a folder, that it
    /// can be written.
    Check {
        #[arg(long)]
        json: bool,
    },
    /// A passage in its source, as the evidence viewer shows it: the file checked to hold the
    /// content that was indexed (for a shared library, the store's copy where no file here
    /// does), the passage's page, and for a format other than PDF the page's text with the
    /// passage marked. PASSAGE: a passage id, as `search --json` and answers' traces give it.
    Source {
        passage: String,
        /// The source as JSON (the app's evidence viewer receives the same).
        #[arg(long)]
        json: bool,
    },
    /// Counts, disk use and search indexes.
    Stats {
        #[arg(long)]
        json: bool,
    },
    /// Look works up online by their DOI (at doi.org: Crossref, DataCite) or arXiv id (at
    /// export.arxiv.org), sending only the identifier, nothing of a document's text; each
    /// registry's record is kept below your edits and your bibliography's. PATH: documents or
    /// folders of them; without, every document. SELFRAG_DOI_RESOLVER and SELFRAG_ARXIV_API
    /// send look-ups elsewhere.
    Lookup {
        paths: Vec<PathBuf>,
        /// Ask again for documents that already have a looked-up record.
        #[arg(long)]
        refresh: bool,
        /// The report as JSON: each work found with every field, each failure.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Serialize)]
struct StatsOut {
    documents: usize,
    contents: usize,
    pages: u64,
    passages: usize,
    disk_bytes: u64,
    vector_index: bool,
    text_index: bool,
    watched: Vec<PathBuf>,
}

#[derive(Serialize)]
struct HitOut {
    passage_id: String,
    document_id: String,
    text: String,
    path: String,
    title: String,
    page: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    page_label: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ocr_confidence: Option<f32>,
    section: Option<String>,
    span: [u64; 2],
    score: f32,
}

#[derive(Serialize)]
struct SearchOut {
    query: String,
    mode: &'static str,
    hits: Vec<HitOut>,
}

/// The reference managers and bibliography files `selfrag index` adds.
pub struct References {
    /// `--zotero [DIR]`: an empty path for Zotero's own data directory.
    pub zotero: Option<PathBuf>,
    pub bibliography: Option<PathBuf>,
}

impl References {
    fn is_empty(&self) -> bool {
        self.zotero.is_none() && self.bibliography.is_none()
    }

    /// Adds each, printing what it did; whether any file failed.
    async fn add(&self, engine: &Engine) -> Result<bool> {
        let mut imports = Vec::new();
        if let Some(dir) = &self.zotero {
            let dir = if dir.as_os_str().is_empty() {
                selfrag_references::zotero::default_data_dir().context(
                    "no home folder to find ~/Zotero in: name Zotero's data directory (`--zotero DIR`)",
                )?
            } else {
                dir.clone()
            };
            imports.push((
                format!("Zotero library {}", dir.display()),
                engine.add_zotero_library(&dir, print_event).await?,
            ));
        }
        if let Some(file) = &self.bibliography {
            imports.push((
                file.display().to_string(),
                engine.add_bibliography(file, print_event).await?,
            ));
        }
        let mut failed = false;
        for (name, import) in imports {
            eprintln_quiet(&format!(
                "{name}: {} files, {} documents with their record, {} skipped",
                import.files,
                import.with_record,
                import.skipped.len()
            ));
            for line in &import.skipped {
                eprintln_quiet(&format!("  skipped {line}"));
            }
            failed |=
                matches!(import.indexing, Some(IndexEvent::Finished { failed, .. }) if failed > 0);
        }
        Ok(failed)
    }
}

/// `selfrag index PATH... [--watch] [--zotero [DIR]] [--bibliography FILE] [--look-up]`: with
/// nothing to index, finishes an interrupted job. With `--look-up`, the works of the documents
/// indexed are looked up by their DOI or arXiv id; without, nothing is sent anywhere.
pub async fn index(
    mut paths: Vec<PathBuf>,
    watch: bool,
    samples: bool,
    exact: bool,
    references: References,
    look_up: bool,
) -> Result<()> {
    let config = crate::engine_config()?;
    let engine = Engine::new(if exact {
        config.with_exact_numbers()
    } else {
        config
    })?;
    engine.set_look_up_works(look_up);
    if samples {
        paths.push(engine.write_sample_documents()?);
    }
    if !references.is_empty() {
        let failed = references.add(&engine).await?;
        if paths.is_empty() && !watch {
            if failed {
                bail!("some files could not be indexed (see above)");
            }
            return Ok(());
        }
    }
    if paths.is_empty() && engine.pending_indexing().await?.is_empty() && !watch {
        if !engine.paused_indexing().await?.is_empty() {
            bail!(
                "nothing to index: a job is paused; take it up with `selfrag index --resume`, or name files or folders"
            );
        }
        bail!(
            "nothing to index: name files or folders (`selfrag index PATH...`), or add the sample documents (`selfrag index --samples`)"
        );
    }
    let finished = engine.index_paths(&paths, print_event).await?;
    if watch {
        for path in &paths {
            if path.is_dir() {
                engine.set_watched(path, true).await?;
            }
        }
        let folders = engine.watched_folders().await?;
        let zotero = engine.zotero_libraries();
        if folders.is_empty() && zotero.is_empty() {
            bail!("--watch needs a folder or a Zotero library (--zotero) to watch");
        }
        let names: Vec<String> = folders
            .iter()
            .chain(&zotero)
            .map(|f| f.display().to_string())
            .collect();
        eprintln_quiet(&format!("watching {} (Ctrl-C to stop)", names.join(", ")));
        // Ctrl-C ends the process: every write to the library is crash-safe. The engine's
        // background work is the app's; here its first failure ends the command.
        let (failure, mut failed) = tokio::sync::mpsc::unbounded_channel();
        let in_sync = engine.keep_library_in_sync(|event| match event {
            LibraryEvent::Index { event, .. } => print_event(event),
            LibraryEvent::Failed { message, .. } => {
                let _ = failure.send(message);
            }
            LibraryEvent::ChangedElsewhere { added, removed } => eprintln_quiet(&format!(
                "other computers have added {added} and removed {removed} documents since this one opened the library"
            )),
        });
        tokio::select! {
            () = in_sync => return Ok(()),
            Some(message) = failed.recv() => bail!("{message}"),
        }
    }
    if let IndexEvent::Finished { failed, .. } = finished
        && failed > 0
    {
        bail!("{failed} file(s) could not be indexed (see above)");
    }
    Ok(())
}

/// `selfrag index --resume`: the paused job, where it stopped.
pub async fn resume() -> Result<()> {
    let engine = Engine::new(crate::engine_config()?)?;
    let finished = engine.resume_indexing(print_event).await?;
    if let IndexEvent::Finished { failed, .. } = finished
        && failed > 0
    {
        bail!("{failed} file(s) could not be indexed (see above)");
    }
    Ok(())
}

fn print_event(event: IndexEvent) {
    let line = match &event {
        IndexEvent::Started { total, resumed } if !resumed.is_empty() => format!(
            "resuming an interrupted job ({}); {total} files",
            resumed.join(", ")
        ),
        IndexEvent::FileIndexed {
            path,
            passages,
            notes,
        } => {
            let mut line = format!("indexed {path} ({passages} passages)");
            for note in notes {
                line.push_str(&format!("\n  note: {note}"));
            }
            line
        }
        IndexEvent::FileSearchable { path, passages, of } => {
            format!("searchable {path}: {passages} of {of} passages so far")
        }
        IndexEvent::FileSkipped { path, reason } => format!("skipped {path}: {reason}"),
        IndexEvent::FileFailed { path, error } => format!("failed {path}: {error}"),
        IndexEvent::Removed { path } => format!("removed {path} (file is gone)"),
        IndexEvent::SlowStep {
            path,
            step,
            seconds,
        } => format!(
            "still {step} after {seconds} s{} (Ctrl-C stops; a parser that stops answering is \
             stopped at its time limit)",
            path.as_deref()
                .map(|p| format!(": {p}"))
                .unwrap_or_default()
        ),
        IndexEvent::WorksLookedUp {
            found,
            already,
            failed,
        } => {
            let mut line = format!(
                "looked up {found} work(s) by DOI or arXiv id ({already} had their record already, {} failed)",
                failed.len()
            );
            for failure in failed {
                line.push_str(&format!("\n  {}: {}", failure.path, failure.error));
            }
            line
        }
        IndexEvent::WatchRetrying {
            error,
            retry_in_seconds,
        } => {
            format!("watched changes not applied: {error}; trying again in {retry_in_seconds:.0} s")
        }
        IndexEvent::Finished {
            indexed,
            skipped,
            failed,
            removed,
            cancelled,
            paused,
        } => format!(
            "{}: {indexed} indexed, {skipped} skipped, {failed} failed, {removed} removed",
            match (*cancelled, *paused) {
                (_, true) => "paused",
                (true, false) => "cancelled",
                (false, false) => "done",
            }
        ),
        _ => return,
    };
    eprintln_quiet(&line);
}

fn eprintln_quiet(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

pub async fn library(command: LibraryCommand) -> Result<()> {
    if let LibraryCommand::Check { json } = command {
        return check(json).await;
    }
    let engine = Engine::new(crate::engine_config()?)?;
    match command {
        LibraryCommand::Check { .. } => Ok(()),
        LibraryCommand::List { json } => {
            // The engine's own type: the JSON the app's UI receives too.
            let docs = engine.documents().await?;
            if json {
                return print(&serde_json::to_string_pretty(&docs)?);
            }
            let mut out = String::new();
            for d in &docs {
                let passages = match d.passages_expected {
                    Some(of) => {
                        format!("{} of {of} passages (cut off: index it again)", d.passages)
                    }
                    None => format!("{} passages", d.passages),
                };
                let cited_as = selfrag_works::cite::author_year(&d.work)
                    .map(|label| format!("\t{label}"))
                    .unwrap_or_default();
                out.push_str(&format!(
                    "{}\t{} pages\t{passages}\t{}{cited_as}\n",
                    d.path, d.pages, d.title
                ));
            }
            out.push_str(&format!("{} documents\n", docs.len()));
            print(out.trim_end())
        }
        LibraryCommand::Remove { path } => {
            let removed = engine.remove_documents(&path).await?;
            if removed.is_empty() {
                bail!(
                    "{} is not in the library (see `selfrag library list`)",
                    path.display()
                );
            }
            engine.set_watched(&path, false).await?;
            for p in &removed {
                engine.exclude_from_zotero(std::path::Path::new(p)).await?;
            }
            for p in &removed {
                eprintln_quiet(&format!("removed {p}"));
            }
            Ok(())
        }
        LibraryCommand::Lookup {
            paths,
            refresh,
            json,
        } => {
            let paths = (!paths.is_empty()).then_some(paths);
            let report = engine.look_up_works(paths, refresh).await?;
            if json {
                print(&serde_json::to_string_pretty(&report)?)?;
            } else {
                print(&lookup_report(&report))?;
            }
            for failure in &report.failed {
                eprintln_quiet(&format!("failed {}: {}", failure.path, failure.error));
            }
            if !report.failed.is_empty() {
                bail!(
                    "{} look-up(s) failed (see above); the documents keep their records as they were",
                    report.failed.len()
                );
            }
            Ok(())
        }
        LibraryCommand::Source { passage, json } => {
            let source = engine.passage_source(&passage).await?;
            if json {
                return print(&serde_json::to_string_pretty(&source)?);
            }
            print(&source_report(&source))
        }
        LibraryCommand::Stats { json } => {
            let s = engine.library_stats().await?;
            let out = StatsOut {
                documents: s.documents,
                contents: s.contents,
                pages: s.pages,
                passages: s.passages,
                disk_bytes: s.disk_bytes,
                vector_index: s.vector_index,
                text_index: s.text_index,
                watched: engine.watched_folders().await?,
            };
            if json {
                return print(&serde_json::to_string_pretty(&out)?);
            }
            print(&format!(
                "{} documents ({} distinct contents), {} pages, {} passages, {:.1} MB on disk\nvector index: {}, full-text index: {}",
                out.documents,
                out.contents,
                out.pages,
                out.passages,
                out.disk_bytes as f64 / 1e6,
                if out.vector_index {
                    "yes"
                } else {
                    "no (exact search)"
                },
                if out.text_index { "yes" } else { "no" },
            ))
        }
    }
}

/// A passage's source as text: where it is, and the passage within its page's text marked
/// `>>>…<<<` (a PDF is named by its page: a terminal does not render it).
fn source_report(source: &selfrag_engine::PassageSource) -> String {
    let page = source
        .page
        .map(|p| match &source.page_label {
            Some(label) => format!(", page {p} (printed {label})"),
            None => format!(", page {p}"),
        })
        .unwrap_or_default();
    let copy = if source.stored_copy {
        " (the shared library's copy: no file on this computer holds it)"
    } else {
        ""
    };
    let mut out = format!(
        "{}{page}{copy}
{}
",
        source.path, source.title
    );
    match &source.view {
        selfrag_engine::SourceView::Pdf => out.push_str(&format!("\n{}\n", source.text)),
        selfrag_engine::SourceView::Text { text, span } => {
            let marked = span.and_then(|(start, end)| {
                let chars: Vec<char> = text.chars().collect();
                let (start, end) = (usize::try_from(start).ok()?, usize::try_from(end).ok()?);
                let take = |from: usize, to: usize| {
                    chars.get(from..to).map(|c| c.iter().collect::<String>())
                };
                Some(format!(
                    "{}>>>{}<<<{}",
                    take(0, start)?,
                    take(start, end)?,
                    take(end, chars.len())?
                ))
            });
            out.push('\n');
            out.push_str(&marked.unwrap_or_else(|| {
                format!("{text}\n\n(the passage is no longer in this text: index the file again)")
            }));
        }
    }
    out
}

/// `selfrag search QUERY [--mode] [-k N] [--folder DIR] [--collection NAME] [--json]`.
pub async fn search(
    query: String,
    mode: SearchMode,
    k: usize,
    filter: SearchFilter,
    json: bool,
) -> Result<()> {
    let engine = Engine::new(crate::engine_config()?)?;
    let hits = engine
        .search(SearchQuery {
            text: query.clone(),
            mode,
            k,
            filter,
        })
        .await?;
    let out = SearchOut {
        query,
        mode: match mode {
            SearchMode::Vector => "vector",
            SearchMode::Fts => "fts",
            SearchMode::Hybrid => "hybrid",
        },
        hits: hits
            .into_iter()
            .map(|h| HitOut {
                passage_id: h.passage_id,
                document_id: h.document_id,
                text: h.text,
                path: h.path,
                title: h.title,
                page: h.page,
                page_label: h.page_label,
                ocr_confidence: h.ocr_confidence,
                section: h.section,
                span: [h.span.0, h.span.1],
                score: h.score,
            })
            .collect(),
    };
    if json {
        return print(&serde_json::to_string_pretty(&out)?);
    }
    let mut text = String::new();
    for (i, h) in out.hits.iter().enumerate() {
        let page = match (h.page, &h.page_label) {
            (Some(p), Some(label)) => format!(", p. {label} (PDF page {p})"),
            (Some(p), None) => format!(", p. {p}"),
            (None, _) => String::new(),
        };
        let ocr = h
            .ocr_confidence
            .map(|c| format!(" ({})", selfrag_core::ocr_note(c)))
            .unwrap_or_default();
        text.push_str(&format!(
            "[{}] {:.4}  {}{page}{ocr}\n    {}\n",
            i + 1,
            h.score,
            h.path,
            h.text
        ));
    }
    if out.hits.is_empty() {
        text.push_str("no passages found\n");
    }
    print(text.trim_end())
}

/// One line per work found (its path, identifier, how it is cited and its title), then the
/// counts.
fn lookup_report(report: &selfrag_engine::LookupReport) -> String {
    let mut out = String::new();
    for found in &report.found {
        let cited_as = selfrag_works::cite::author_year(&found.work).unwrap_or_default();
        out.push_str(&format!(
            "{}\t{}\t{cited_as}\t{}\n",
            found.path,
            found.identifier,
            found.work.title().unwrap_or("untitled")
        ));
    }
    out.push_str(&format!(
        "{} found, {} had their record already, {} without a DOI or arXiv id, {} failed{}",
        report.found.len(),
        report.already,
        report.without_identifier,
        report.failed.len(),
        if report.dropped > 0 {
            format!(
                ", {} record(s) removed (their document no longer has that identifier)",
                report.dropped
            )
        } else {
            String::new()
        }
    ));
    out
}

fn print(text: &str) -> Result<()> {
    let mut stdout = std::io::stdout();
    stdout.write_all(text.as_bytes())?;
    stdout.write_all(b"\n")?;
    Ok(())
}

/// `selfrag debug search-depths`: the library's search at each ANN setting, as JSON.
pub async fn search_depths(queries: usize) -> Result<()> {
    let engine = Engine::new(crate::engine_config()?)?;
    let report = engine.measure_search_depths(queries).await?;
    print(&serde_json::to_string(&report)?)
}

/// `selfrag debug passages`: what the embedder read for `count` of the library's passages, as
/// a JSON list of strings.
pub async fn sample_passages(count: usize) -> Result<()> {
    let engine = Engine::new(crate::engine_config()?)?;
    print(&serde_json::to_string(
        &engine.sample_embedding_inputs(count).await?,
    )?)
}

/// `selfrag debug bench-search`: one synthetic search benchmark, as JSON. The library is built
/// in `dir`, or at `--library` (a shared library's new prefix) with `dir` as this computer's
/// state of it.
pub async fn bench_search(
    dir: PathBuf,
    passages: usize,
    dim: usize,
    queries: usize,
    sweep: bool,
) -> Result<()> {
    if dir.exists() {
        bail!(
            "{} exists; the benchmark builds its library in a new folder",
            dir.display()
        );
    }
    let location = crate::LIBRARY_OPTION
        .get()
        .map(|l| selfrag_engine::LibraryLocation::parse(l))
        .transpose()?
        .unwrap_or_else(|| selfrag_engine::LibraryLocation::Folder(dir.clone()));
    let report = selfrag_engine::bench::search_benchmark(
        &location, &dir, passages, dim, queries, 20261122, sweep,
    )
    .await?;
    print(&serde_json::to_string(&report)?)
}

/// `selfrag debug shared-visibility`: how long another computer takes to see a new document
/// of the shared library `--library`, as JSON.
pub async fn shared_visibility(scratch: PathBuf, rounds: usize) -> Result<()> {
    let Some(location) = crate::LIBRARY_OPTION.get() else {
        bail!("give the shared library with --library s3://bucket/prefix");
    };
    let location = selfrag_engine::LibraryLocation::parse(location)?;
    if !location.is_shared() {
        bail!("{location} is a folder; the benchmark measures a shared library");
    }
    let report = selfrag_engine::bench::visibility_benchmark(&location, &scratch, rounds).await?;
    print(&serde_json::to_string(&report)?)
}

#[derive(Serialize)]
struct ExtractOut {
    files: usize,
    pages: usize,
    chars: usize,
    failed: usize,
    seconds: f64,
}

/// One file as the library reads it, for `scripts/bench/pdf_corpus.py`: its pages and the
/// passages chunked from them, each with the page it claims, and the work the file says it
/// holds (each field with its source).
#[derive(Serialize)]
struct ExtractedPages {
    pages: Vec<selfrag_engine::ExtractedPage>,
    passages: Vec<PagePassage>,
    work: selfrag_works::Work,
}

#[derive(Serialize)]
struct PagePassage {
    page: Option<u32>,
    text: String,
}

/// `selfrag debug extract --pages-to OUT FILE`: the file's pages and passages as JSON in OUT.
fn extract_pages(file: &std::path::Path, out: &std::path::Path) -> Result<()> {
    let doc = selfrag_engine::extract_file(file)?;
    let passages = doc
        .pages
        .iter()
        .flat_map(|page| {
            selfrag_engine::chunk_text(&page.text)
                .into_iter()
                .map(|chunk| PagePassage {
                    page: page.number,
                    text: chunk.text,
                })
        })
        .collect();
    let json = serde_json::to_vec(&ExtractedPages {
        pages: doc.pages,
        passages,
        work: doc.work,
    })?;
    std::fs::write(out, json).with_context(|| format!("writing {}", out.display()))
}

/// `selfrag debug extract FILES...`: extraction alone, in this process, timed (JSON); with
/// `--pages-to OUT`, one file's pages and passages written to OUT instead.
pub async fn extract(files: Vec<PathBuf>, pages_to: Option<PathBuf>) -> Result<()> {
    if let Some(out) = pages_to {
        let [file] = files.as_slice() else {
            bail!("--pages-to takes one file, not {}", files.len());
        };
        return extract_pages(file, &out);
    }
    let started = std::time::Instant::now();
    let mut out = ExtractOut {
        files: files.len(),
        pages: 0,
        chars: 0,
        failed: 0,
        seconds: 0.0,
    };
    for file in &files {
        match selfrag_engine::extract_file(file) {
            Ok(doc) => {
                out.pages += doc.pages.len();
                out.chars += doc.pages.iter().map(|p| p.text.len()).sum::<usize>();
            }
            Err(e) => {
                out.failed += 1;
                eprintln_quiet(&format!("failed {}: {e}", file.display()));
            }
        }
    }
    out.seconds = started.elapsed().as_secs_f64();
    print(&serde_json::to_string(&out)?)
}

#[derive(Serialize)]
struct CheckOut {
    location: String,
    shared: bool,
    /// Where the requests went, in words.
    endpoint: String,
    /// Whether a library is there already.
    library_exists: bool,
}

/// `selfrag library check`: the connection test, with no model loaded.
async fn check(json: bool) -> Result<()> {
    let location = crate::engine_config()?.library_location();
    let found = selfrag_engine::check_location(&location).await?;
    let out = CheckOut {
        location: location.to_string(),
        shared: location.is_shared(),
        endpoint: found.endpoint,
        library_exists: found.library_exists,
    };
    if json {
        return print(&serde_json::to_string_pretty(&out)?);
    }
    let what = if out.shared {
        "reachable, credentials accepted, conditional writes honoured"
    } else {
        "a folder this computer can write"
    };
    let there = if out.library_exists {
        "a library is there"
    } else {
        "no library yet: the first `selfrag index` makes one"
    };
    print(&format!(
        "{} ({}): {what}; {there}",
        out.location, out.endpoint
    ))
}
