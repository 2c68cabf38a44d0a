//! HTML: the visible text of the page, titled by `<title>`, with `<h1>`…`<h6>` as sections.
//!
//! Scripts, styles, templates and navigation are not part of what a person reads, so they never
//! reach a passage.

use std::path::Path;

use dom_query::Document;
use encoding_rs::{Encoding, UTF_8};

use super::{ExtractedDocument, read_bytes, single_page};
use crate::IndexError;

/// Elements whose content is not reading matter.
const HIDDEN: &str = "head, script, style, noscript, template, nav, svg, iframe, object";

pub(super) fn extract(path: &Path) -> Result<ExtractedDocument, IndexError> {
    let bytes = read_bytes(path)?;
    let (title, text) = visible_text(&decode(&bytes));
    single_page(path, "HTML", title, text)
}

/// The page as text: UTF-8 unless a byte-order mark or a `<meta charset>` near the top says
/// otherwise, as in saved pages from older sites (windows-1252, Shift_JIS, ...).
fn decode(bytes: &[u8]) -> String {
    let head = String::from_utf8_lossy(&bytes[..bytes.len().min(2048)]).to_ascii_lowercase();
    let declared = head.find("charset=").and_then(|at| {
        let label: String = head[at + "charset=".len()..]
            .trim_start_matches(['"', '\'', ' '])
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':' | '.'))
            .collect();
        Encoding::for_label(label.as_bytes())
    });
    // `decode` still prefers a byte-order mark over the declaration, as browsers do.
    let (text, _, _) = declared.unwrap_or(UTF_8).decode(bytes);
    text.into_owned()
}

/// The page's `<title>` (if any) and its visible text, headings written as Markdown lines.
fn visible_text(html: &str) -> (Option<String>, String) {
    let doc = Document::from(html);
    let title = doc.select("title").text();
    let title = title.split_whitespace().collect::<Vec<_>>().join(" ");
    doc.select(HIDDEN).remove();
    for level in 1..=6 {
        for heading in doc.select(&format!("h{level}")).nodes() {
            let words = heading.text();
            let words = words.split_whitespace().collect::<Vec<_>>().join(" ");
            heading.set_text(format!("{} {words}", "#".repeat(level)).as_str());
        }
    }
    // Block elements end in a blank line, which the chunker treats as a paragraph end.
    let text = doc.formatted_text().to_string();
    ((!title.is_empty()).then_some(title), text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_in_a_legacy_charset_is_decoded_by_its_meta_tag() {
        let mut page = b"<html><head><meta charset=\"windows-1252\"><title>Caf".to_vec();
        page.extend([0xE9]);
        page.extend(b"</title></head><body><p>na\xEFve</p></body></html>");
        let (title, text) = visible_text(&decode(&page));
        assert_eq!(title.as_deref(), Some("Caf\u{e9}"));
        assert_eq!(text, "na\u{ef}ve");
        assert_eq!(
            decode("caf\u{e9}".as_bytes()),
            "caf\u{e9}",
            "UTF-8 by default"
        );
    }

    #[test]
    fn headings_become_markdown_lines_and_scripts_vanish() {
        let (title, text) = visible_text(
            "<html><head><title> A  page </title><style>p{color:red}</style></head>\
             <body><nav>Home | About</nav><h2>Method</h2><p>Self-RAG <b>retrieves</b>.</p>\
             <script>var hidden = 1;</script></body></html>",
        );
        assert_eq!(title.as_deref(), Some("A page"));
        assert!(text.contains("## Method\n"), "{text:?}");
        assert!(text.contains("Self-RAG retrieves."), "{text:?}");
        for hidden in ["color:red", "hidden", "Home", "A page"] {
            assert!(!text.contains(hidden), "{hidden} leaked into {text:?}");
        }
    }
}
