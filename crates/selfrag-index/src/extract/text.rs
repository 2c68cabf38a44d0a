//! Plain text and Markdown: the file is the text; a Markdown file's first `# ` heading is its
//! title (its headings become sections in the chunker).

use std::path::Path;

use super::{ExtractedDocument, read_bytes, single_page};
use crate::IndexError;

pub(super) fn extract(path: &Path, markdown: bool) -> Result<ExtractedDocument, IndexError> {
    let bytes = read_bytes(path)?;
    // Lossy: one stray byte in a notes file should not cost the whole file.
    let text = String::from_utf8_lossy(&bytes).replace("\r\n", "\n");
    let heading = markdown
        .then(|| {
            text.lines()
                .find_map(|l| l.strip_prefix("# ").map(|h| h.trim().to_string()))
        })
        .flatten();
    single_page(path, heading, text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_title_is_the_first_heading() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("notes.md");
        std::fs::write(&p, "intro\n# Self-RAG notes\nbody\n").unwrap();
        let doc = extract(&p, true).unwrap();
        assert_eq!(doc.title, "Self-RAG notes");
        assert_eq!(doc.pages.len(), 1);
    }

    #[test]
    fn plain_text_is_titled_by_its_file_name_and_keeps_stray_bytes_out() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("draft notes.txt");
        std::fs::write(&p, b"# not a title\r\nline \xff two\r\n").unwrap();
        let doc = extract(&p, false).unwrap();
        assert_eq!(doc.title, "draft notes");
        assert_eq!(doc.pages[0].text, "# not a title\nline \u{fffd} two\n");
    }
}
