//! Writes the Zotero data directory of the app's end-to-end test:
//! `selfrag-zotero-fixture DIR PDF TEXT` writes selfrag-references' fixture library into DIR
//! (Zotero's real table and column names, Better BibTeX's key store, a `storage/` tree) with
//! PDF and TEXT as its journal article's attachments, and prints on stdout, as JSON, what a
//! test asserts against: the article's item key, title and Better BibTeX key, and each of its
//! two files' attachment key and path in storage. `cargo xtask test` builds it and hands its
//! path to the end-to-end tests as `SELFRAG_ZOTERO_FIXTURE`.

// A command-line tool reports on stdout and stderr.
#![allow(clippy::print_stderr, clippy::print_stdout)]

use std::path::PathBuf;
use std::process::ExitCode;

use selfrag_references::fixture::{ArticleFiles, FixtureFile, write_zotero_dir};

const USAGE: &str = "usage: selfrag-zotero-fixture DIR PDF TEXT";

fn file(f: &FixtureFile) -> serde_json::Value {
    serde_json::json!({ "attachmentKey": f.attachment_key, "path": f.path })
}

fn run(args: &[PathBuf]) -> Result<String, String> {
    let [dir, pdf, text] = args else {
        return Err(USAGE.to_string());
    };
    let files = ArticleFiles {
        pdf: pdf.clone(),
        text: text.clone(),
    };
    let zotero = write_zotero_dir(dir, &files).map_err(|e| e.to_string())?;
    let described = serde_json::json!({
        "dir": zotero.dir,
        "article": {
            "key": zotero.article.key,
            "title": zotero.article.title,
            "citationKey": zotero.article.citation_key,
        },
        "articlePdf": file(&zotero.article_pdf),
        "articleText": file(&zotero.article_text),
        "collections": zotero.collections,
    });
    serde_json::to_string_pretty(&described).map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    match run(&args) {
        Ok(json) => {
            println!("{json}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
