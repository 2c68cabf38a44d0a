//! Text extraction: one file in, its title and text out, page by page where the format has pages.
//!
//! One module per format: [`text`] (plain text and Markdown), [`pdf`], [`html`] and [`docx`].
//! Structured formats write their headings as Markdown `#` lines into the extracted text: that
//! is the one heading syntax the chunker reads, so every format gets sections the same way.
//!
//! These parsers run on untrusted files and some of them (pdf-extract above all) can panic,
//! overflow the stack or loop. The app therefore calls them in a child process through
//! [`crate::Extractor`]; [`extract_file`] is what that child runs.

mod docx;
mod html;
mod pdf;
mod text;

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::IndexError;

/// A page of extracted text (a whole file is one page for formats without pages).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExtractedPage {
    /// 1-based page number, `None` for formats without pages.
    pub number: Option<u32>,
    /// The text passages' character spans refer to.
    pub text: String,
}

/// The text of one file, ready to chunk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExtractedDocument {
    pub title: String,
    /// Pages with text, in order; a PDF page without text is left out and named in `notes`.
    pub pages: Vec<ExtractedPage>,
    /// What the reader should know about this file although it was indexed, such as
    /// "page 3 has no text layer (scanned?)".
    #[serde(default)]
    pub notes: Vec<String>,
}

/// The extensions [`extract_file`] reads, for messages and file pickers.
pub const SUPPORTED_EXTENSIONS: &[&str] = &[
    "pdf", "txt", "text", "md", "markdown", "html", "htm", "xhtml", "docx",
];

/// Reads `path` and extracts its text according to its extension, in this process.
pub fn extract_file(path: &Path) -> Result<ExtractedDocument, IndexError> {
    match supported_extension(path)?.as_str() {
        "md" | "markdown" => text::extract(path, true),
        "pdf" => pdf::extract(path),
        "html" | "htm" | "xhtml" => html::extract(path),
        "docx" => docx::extract(path),
        _ => text::extract(path, false),
    }
}

/// The lower-cased extension of `path` when it is one of [`SUPPORTED_EXTENSIONS`], otherwise
/// why the file is skipped. Cheap: decides before any parser (or worker process) starts.
pub fn supported_extension(path: &Path) -> Result<String, IndexError> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    if SUPPORTED_EXTENSIONS.contains(&ext.as_str()) {
        return Ok(ext);
    }
    Err(IndexError::Unsupported {
        path: path.to_path_buf(),
        reason: if ext.is_empty() {
            "the file has no extension".into()
        } else {
            format!("`.{ext}` files are not read")
        },
    })
}

/// The whole file, with the error that names it.
fn read_bytes(path: &Path) -> Result<Vec<u8>, IndexError> {
    std::fs::read(path).map_err(|source| IndexError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// The title of last resort: the file name without its extension.
fn file_stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// One page of text, or [`IndexError::Empty`] when there is nothing to index.
fn single_page(
    path: &Path,
    title: Option<String>,
    text: String,
) -> Result<ExtractedDocument, IndexError> {
    if text.trim().is_empty() {
        return Err(IndexError::Empty {
            path: path.to_path_buf(),
        });
    }
    Ok(ExtractedDocument {
        title: title
            .filter(|t| !t.trim().is_empty())
            .map(|t| t.trim().to_string())
            .unwrap_or_else(|| file_stem(path)),
        pages: vec![ExtractedPage { number: None, text }],
        notes: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_unsupported_files_are_named_in_the_error() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.txt");
        std::fs::write(&empty, "  \n").unwrap();
        let err = extract_file(&empty).unwrap_err().to_string();
        assert!(err.contains("empty.txt"), "{err}");
        let odd = dir.path().join("image.png");
        std::fs::write(&odd, [0u8, 1, 2]).unwrap();
        let err = extract_file(&odd).unwrap_err().to_string();
        assert!(err.contains("image.png") && err.contains(".png"), "{err}");
    }
}
