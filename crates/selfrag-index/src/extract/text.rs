//! Plain text and Markdown: the file is the text; a Markdown file's first `# ` heading is its
//! title (its headings become sections in the chunker). UTF-8, or UTF-16 when a byte-order
//! mark or the pattern of zero bytes says so (Windows Notepad's "Unicode"); bytes that do not
//! decode become U+FFFD, and a file that is mostly such bytes is refused as binary.

use std::path::Path;

use super::{ExtractedDocument, read_bytes, single_page};
use crate::IndexError;

pub(super) fn extract(path: &Path, markdown: bool) -> Result<ExtractedDocument, IndexError> {
    let bytes = read_bytes(path)?;
    // Lossy: one stray byte in a notes file should not cost the whole file.
    let text = decode(&bytes).replace("\r\n", "\n");
    let heading = markdown
        .then(|| {
            text.lines()
                .find_map(|l| l.strip_prefix("# ").map(|h| h.trim().to_string()))
        })
        .flatten();
    single_page(
        path,
        if markdown { "Markdown" } else { "text" },
        heading,
        text,
    )
}

/// The text of `bytes`: by byte-order mark (UTF-8, UTF-16LE/BE), else UTF-16 without a mark
/// when zero bytes fill every other position, else UTF-8.
fn decode(bytes: &[u8]) -> String {
    use encoding_rs::{UTF_8, UTF_16BE, UTF_16LE};
    if let Some((encoding, _)) = encoding_rs::Encoding::for_bom(bytes) {
        return encoding.decode_with_bom_removal(bytes).0.into_owned();
    }
    let head = &bytes[..bytes.len().min(4096)];
    let zeros_at = |parity: usize| {
        head.iter()
            .skip(parity)
            .step_by(2)
            .filter(|&&b| b == 0)
            .count()
    };
    let pairs = head.len() / 2;
    // ASCII-heavy UTF-16: one byte of most pairs is zero, the other almost never.
    if pairs >= 4 {
        let (even, odd) = (zeros_at(0), zeros_at(1));
        if odd * 10 >= pairs * 6 && even * 20 <= pairs {
            return UTF_16LE.decode_without_bom_handling(bytes).0.into_owned();
        }
        if even * 10 >= pairs * 6 && odd * 20 <= pairs {
            return UTF_16BE.decode_without_bom_handling(bytes).0.into_owned();
        }
    }
    UTF_8.decode_without_bom_handling(bytes).0.into_owned()
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
    fn utf16_with_or_without_a_byte_order_mark_is_decoded() {
        let text = "Notepad's \u{201c}Unicode\u{201d}: caf\u{e9}.\r\n";
        let le: Vec<u8> = text.encode_utf16().flat_map(u16::to_le_bytes).collect();
        let be: Vec<u8> = text.encode_utf16().flat_map(u16::to_be_bytes).collect();
        for (bytes, bom) in [(&le, &[0xFF, 0xFE][..]), (&be, &[0xFE, 0xFF][..])] {
            assert_eq!(decode(&[bom, bytes].concat()), text);
            assert_eq!(decode(bytes), text);
        }
        assert_eq!(decode(b"\xef\xbb\xbfplain"), "plain");
    }

    #[test]
    fn binary_junk_is_refused_and_nul_bytes_are_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let junk = dir.path().join("junk.txt");
        let bytes: Vec<u8> = (0..4000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        std::fs::write(&junk, bytes).unwrap();
        let err = extract(&junk, false).unwrap_err();
        assert!(err.to_string().contains("binary data"), "{err}");
        let nul = dir.path().join("nul.txt");
        std::fs::write(&nul, b"word\0word \0\0.\n").unwrap();
        assert_eq!(extract(&nul, false).unwrap().pages[0].text, "wordword .\n");
        std::fs::write(&nul, [0u8; 64]).unwrap();
        assert!(extract(&nul, false).is_err());
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
