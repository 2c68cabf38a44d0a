//! Fuzzes the text extractors through `selfrag_index::extract_file`, the function the
//! extraction worker runs: the first byte picks the format (.txt, .md, .html, .docx, .pdf), the
//! rest is the file. No panic, no hang; the text that comes out chunks without panicking.
//!
//! The app runs extraction in a child process with a time limit, so a crash here costs one file,
//! not the app; the fuzzer still treats every panic as a bug to fix, except those pdf-extract
//! raises inside the page reader's own `catch_unwind` (one unreadable page, by design): those
//! are errors here as in the app ([`selfrag_fuzz::as_the_app_runs_it`]).

#![no_main]

use libfuzzer_sys::fuzz_target;

const EXTENSIONS: [&str; 5] = ["txt", "md", "html", "docx", "pdf"];

fuzz_target!(|data: &[u8]| {
    let Some((&kind, bytes)) = data.split_first() else {
        return;
    };
    let extension = EXTENSIONS[usize::from(kind) % EXTENSIONS.len()];
    let Ok(dir) = tempfile::tempdir() else {
        return;
    };
    let path = dir.path().join(format!("input.{extension}"));
    if std::fs::write(&path, bytes).is_err() {
        return;
    }
    if let Ok(document) = selfrag_fuzz::as_the_app_runs_it(|| selfrag_index::extract_file(&path)) {
        for page in &document.pages {
            let _ = selfrag_index::chunk_text(&page.text);
        }
    }
});
