//! Text extraction: one file in, its title and text out, page by page where the format has pages.
//!
//! One module per format: [`text`] (plain text and Markdown), [`pdf`], [`html`] and [`docx`].
//! Each also says what it can of the work the file holds ([`ExtractedDocument::work`]): the
//! file's own metadata, the identifiers printed in its first pages and, for a PDF, a guess from
//! its first page's layout ([`metadata`], [`first_page`]).
//! Structured formats write their headings as Markdown `#` lines into the extracted text: that
//! is the one heading syntax the chunker reads, so every format gets sections the same way.
//!
//! These parsers run on untrusted files and some of them (pdf-extract above all) can panic,
//! overflow the stack or loop. The app therefore calls them in a child process through
//! [`crate::Extractor`]; [`extract_file`] is what that child runs.

mod bidi;
mod docx;
mod first_page;
mod html;
mod metadata;
pub mod ocr;
mod pdf;
mod pdf_cff;
mod pdf_filters;
mod pdf_glyph_names;
mod pdf_xref;
mod text;

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use selfrag_works::Work;
use serde::{Deserialize, Serialize};

use crate::IndexError;
use crate::granted::{FileIdentity, Waiting, open_checked};

/// A page of extracted text (a whole file is one page for formats without pages).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExtractedPage {
    /// 1-based page number, `None` for formats without pages.
    pub number: Option<u32>,
    /// The number printed on the page where the PDF's page labels give one that differs from
    /// `number` (`xii`, `117`, `A-3`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The text passages' character spans refer to.
    pub text: String,
    /// Where the page had no text layer and its scan was read by OCR: the engine's mean word
    /// confidence, 0–1 ([`ocr`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ocr_confidence: Option<f32>,
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
    /// The work the file says it holds: its own metadata, identifiers in its first pages, a
    /// guess from its first page, each field marked with where it came from.
    #[serde(default)]
    pub work: Work,
}

/// The most characters of a document's title (HTML `<title>`, a Markdown file's first heading,
/// a PDF's `/Title`): the title is stored with every passage, so one long title would be
/// copied into each of them.
pub const MAX_TITLE_CHARS: usize = 512;

/// The most characters of a page label's prefix (the `A-` of `A-3`, the `Appendix ` of
/// `Appendix 2`), for the same reason: the label is stored with every passage of its page.
pub const MAX_LABEL_PREFIX_CHARS: usize = 64;

impl ExtractedDocument {
    /// The document with its title cut to [`MAX_TITLE_CHARS`], and its work record's fields
    /// to lengths a record carries; what the worker answers.
    pub fn within_limits(mut self) -> Self {
        self.title = cut_chars(&self.title, MAX_TITLE_CHARS)
            .trim_end()
            .to_string();
        self.work = metadata::within_limits(self.work);
        self
    }
}

/// `text` cut to its first `max` characters (on a character boundary).
pub(crate) fn cut_chars(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((cut, _)) => &text[..cut],
        None => text,
    }
}

/// The extensions [`extract_file`] reads, for messages and file pickers.
pub const SUPPORTED_EXTENSIONS: &[&str] = &[
    "pdf", "txt", "text", "md", "markdown", "html", "htm", "xhtml", "docx",
];

/// The largest file read of each format, in bytes: a text file past 64 MiB is a log, a dump
/// or a sparse file rather than a document, and would be millions of passages; a PDF or DOCX
/// may be larger because images take most of it.
pub fn max_file_bytes(extension: &str) -> u64 {
    match extension {
        "pdf" | "docx" => 512 << 20,
        _ => 64 << 20,
    }
}

/// The most one compressed part of a file (a DOCX's XML part, a PDF's text or font stream) may
/// inflate to: nobody writes 256 MiB of one page's text, and a bomb is refused before it is
/// inflated whole.
pub(crate) const MAX_INFLATED_BYTES: u64 = 256 << 20;

/// [`IndexError::TooLarge`] when a file of `size` bytes is past [`max_file_bytes`]; decided from
/// a `stat`, before a byte is read.
pub fn check_size(path: &Path, extension: &str, size: u64) -> Result<(), IndexError> {
    let limit = max_file_bytes(extension);
    if size <= limit {
        return Ok(());
    }
    Err(IndexError::TooLarge {
        path: path.to_path_buf(),
        extension: extension.to_string(),
        size_mib: size.div_ceil(1 << 20),
        limit_mib: limit >> 20,
    })
}

/// Reads `path` and extracts its text according to its extension, in this process.
pub fn extract_file(path: &Path) -> Result<ExtractedDocument, IndexError> {
    let extension = supported_extension(path)?;
    let meta = std::fs::metadata(path).map_err(|source| IndexError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    check_size(path, &extension, meta.len())?;
    match extension.as_str() {
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

thread_local! {
    /// Where [`extract_checked`] reads from and the file it must find there. The format
    /// readers open by path and are fuzzed through [`extract_file`], so the check rides along
    /// with the call rather than through every reader's signature.
    static CHECKED: RefCell<Option<(PathBuf, FileIdentity)>> = const { RefCell::new(None) };
}

/// [`extract_file`] for a file checked beforehand (see [`crate::granted::see`]): `path` names
/// it (its format, its title of last resort, the errors), its bytes are read from `read_from`
/// (the same, or a link's target) without following a link, and a file other than `expected`
/// there is refused ([`IndexError::Swapped`]). What the extraction worker runs for the app.
pub fn extract_checked(
    path: &Path,
    read_from: &Path,
    expected: FileIdentity,
) -> Result<ExtractedDocument, IndexError> {
    struct Forget;
    impl Drop for Forget {
        fn drop(&mut self) {
            CHECKED.set(None);
        }
    }
    CHECKED.set(Some((read_from.to_path_buf(), expected)));
    let _forget = Forget;
    extract_file(path)
}

/// `path` opened for reading: as checked by [`extract_checked`] when it asked, else as it is.
fn open_document(path: &Path) -> Result<std::fs::File, IndexError> {
    let checked = CHECKED.with_borrow(|checked| {
        checked.as_ref().map(|(read_from, expected)| {
            open_checked(path, read_from, *expected, Waiting::AsReadsDo)
        })
    });
    match checked {
        Some(opened) => opened.map(|(file, _)| file),
        None => std::fs::File::open(path).map_err(|source| IndexError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// The whole file, with the error that names it.
fn read_bytes(path: &Path) -> Result<Vec<u8>, IndexError> {
    use std::io::Read;
    let read = |source| IndexError::Read {
        path: path.to_path_buf(),
        source,
    };
    let mut file = open_document(path)?;
    let size = file.metadata().map_err(read)?.len();
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    file.read_to_end(&mut bytes).map_err(read)?;
    Ok(bytes)
}

/// The title of last resort: the file name without its extension, control characters (a
/// newline in a file name) shown as spaces.
fn file_stem(path: &Path) -> String {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string());
    stem.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// Text with the characters no reader wants removed: NUL and the other C0 and C1 control
/// characters but tab, newline, carriage return and form feed, and stray byte-order marks.
/// They come from binary junk, padding and broken converters, and would otherwise reach
/// passages, prompts and the screen.
pub(crate) fn clean_text(text: &str) -> std::borrow::Cow<'_, str> {
    let unwanted =
        |c: char| (c.is_control() && !matches!(c, '\t' | '\n' | '\r' | '\x0c')) || c == '\u{feff}';
    if !text.contains(unwanted) {
        return std::borrow::Cow::Borrowed(text);
    }
    std::borrow::Cow::Owned(text.chars().filter(|&c| !unwanted(c)).collect())
}

/// Share of characters that cannot be text: replacement characters (bytes that did not
/// decode) and control characters. Above this, a "text" file is binary data.
const MAX_JUNK_SHARE: f64 = 0.25;

/// [`IndexError::Malformed`] when `text`, as decoded, is mostly binary junk.
fn refuse_binary(path: &Path, format: &str, text: &str) -> Result<(), IndexError> {
    let (mut junk, mut total) = (0usize, 0usize);
    for c in text.chars().filter(|c| !c.is_whitespace()) {
        total += 1;
        if c == '\u{fffd}' || c.is_control() {
            junk += 1;
        }
    }
    if total == 0 || (junk as f64) <= MAX_JUNK_SHARE * total as f64 {
        return Ok(());
    }
    Err(IndexError::Malformed {
        path: path.to_path_buf(),
        format: format.into(),
        reason: format!(
            "it looks like binary data, not text ({}% of its characters are not valid text)",
            junk * 100 / total
        ),
    })
}

/// One page of text, or [`IndexError::Empty`] when there is nothing to index, or
/// [`IndexError::Malformed`] when the "text" is binary junk. `metadata` is what the file's
/// metadata says of its work; the identifiers in the text's first
/// [`metadata::IDENTIFIER_SEARCH_CHARS`] characters go under it. The title is the format's
/// own (`title`), else the work's, else the file's name.
fn single_page(
    path: &Path,
    format: &str,
    title: Option<String>,
    text: String,
    metadata: Work,
) -> Result<ExtractedDocument, IndexError> {
    refuse_binary(path, format, &text)?;
    let text = clean_text(&text).into_owned();
    let title = title.map(|t| clean_text(&t).into_owned());
    if text.trim().is_empty() {
        return Err(IndexError::Empty {
            path: path.to_path_buf(),
        });
    }
    let work = metadata::combined(Work::default(), &text, metadata);
    Ok(ExtractedDocument {
        title: title
            .filter(|t| !t.trim().is_empty())
            .map(|t| t.trim().to_string())
            .or_else(|| work.title().map(str::to_string))
            .unwrap_or_else(|| file_stem(path)),
        pages: vec![ExtractedPage {
            number: None,
            label: None,
            text,
            ocr_confidence: None,
        }],
        notes: Vec::new(),
        work,
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

    /// Issue 45: an older worker's answer has no `work`; it still reads, with an empty one.
    #[test]
    fn a_document_without_a_work_record_still_reads() {
        let old = r#"{"title":"Old","pages":[{"number":1,"text":"Text."}],"notes":[]}"#;
        let document: ExtractedDocument = serde_json::from_str(old).unwrap();
        assert!(document.work.is_empty());
        assert_eq!(document.title, "Old");
    }

    /// A hostile file's metadata is cut to what a record carries before it crosses the pipe.
    #[test]
    fn a_work_record_is_cut_to_its_limits() {
        use selfrag_works::{Author, FieldSource, Sourced};
        let document = ExtractedDocument {
            title: "T".into(),
            pages: Vec::new(),
            notes: Vec::new(),
            work: Work {
                title: Some(Sourced::new("ä".repeat(100_000), FieldSource::FileMetadata)),
                authors: Some(Sourced::new(
                    vec![Author::person("F".repeat(10_000), "G"); 5_000],
                    FieldSource::FileMetadata,
                )),
                ..Work::default()
            },
        }
        .within_limits();
        let work = document.work;
        assert_eq!(
            work.title().map(|t| t.chars().count()),
            Some(MAX_TITLE_CHARS)
        );
        assert_eq!(work.authors().len(), metadata::MAX_AUTHORS);
        assert!(work.authors()[0].family().len() <= 256);
    }
}
