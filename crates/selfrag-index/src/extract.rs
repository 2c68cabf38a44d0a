//! Text extraction: one file in, its title and text out, page by page where the format has pages.

use std::path::Path;

use crate::IndexError;

/// A page of extracted text (a whole file is one page for formats without pages).
#[derive(Debug, Clone, PartialEq)]
pub struct ExtractedPage {
    /// 1-based page number, `None` for formats without pages.
    pub number: Option<u32>,
    pub text: String,
}

/// The text of one file, ready to chunk.
#[derive(Debug, Clone, PartialEq)]
pub struct ExtractedDocument {
    pub title: String,
    pub pages: Vec<ExtractedPage>,
}

/// Reads `path` and extracts its text according to its extension.
pub fn extract_file(path: &Path) -> Result<ExtractedDocument, IndexError> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    match ext.as_str() {
        "txt" | "text" => extract_plain(path, false),
        "md" | "markdown" => extract_plain(path, true),
        "" => Err(IndexError::Unsupported {
            path: path.to_path_buf(),
            reason: "the file has no extension".into(),
        }),
        other => Err(IndexError::Unsupported {
            path: path.to_path_buf(),
            reason: format!("`.{other}` files are not read yet"),
        }),
    }
}

fn extract_plain(path: &Path, markdown: bool) -> Result<ExtractedDocument, IndexError> {
    let bytes = std::fs::read(path).map_err(|source| IndexError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let text = String::from_utf8_lossy(&bytes).replace("\r\n", "\n");
    if text.trim().is_empty() {
        return Err(IndexError::Empty {
            path: path.to_path_buf(),
        });
    }
    let heading = markdown
        .then(|| {
            text.lines()
                .find_map(|l| l.strip_prefix("# ").map(|h| h.trim().to_string()))
        })
        .flatten();
    let title = heading.unwrap_or_else(|| file_stem(path));
    Ok(ExtractedDocument {
        title,
        pages: vec![ExtractedPage { number: None, text }],
    })
}

fn file_stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_title_is_the_first_heading() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("notes.md");
        std::fs::write(&p, "intro\n# Self-RAG notes\nbody\n").unwrap();
        let doc = extract_file(&p).unwrap();
        assert_eq!(doc.title, "Self-RAG notes");
        assert_eq!(doc.pages.len(), 1);
    }

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
