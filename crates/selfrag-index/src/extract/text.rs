//! Plain text and Markdown: the file is the text; a Markdown file's first `# ` heading is its
//! title (its headings become sections in the chunker). UTF-8, or UTF-16 when a byte-order
//! mark or the pattern of zero bytes says so (Windows Notepad's "Unicode"); bytes that do not
//! decode become U+FFFD, and a file that is mostly such bytes is refused as binary.
//!
//! A Markdown file may open with the YAML front matter pandoc reads (`---`, `title:`,
//! `author:`, `date:`, `doi:`, `---`): its title, authors, date and DOI are the work's
//! metadata ([`front_matter`]), and its title the document's where no `# ` heading gives one.

use std::path::Path;

use selfrag_works::Work;
use selfrag_works::identifiers::normalise_doi;

use super::metadata::{self, from_file};
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
    let work = if markdown {
        front_matter(&text, path)
    } else {
        Work::default()
    };
    single_page(
        path,
        if markdown { "Markdown" } else { "text" },
        heading,
        text,
        work,
    )
}

/// The most lines of front matter read: past this, a `---` line is a rule, not its end.
const MAX_FRONT_MATTER_LINES: usize = 200;

/// The work a Markdown file's YAML front matter describes: the block between a first line
/// `---` and the next `---` or `...`. Read line by line, for the keys pandoc's templates
/// use and in the forms people write them:
/// - `title: Text`, `title: "Text"` (a block scalar, `title: >` or `|`, is not read);
/// - `author: Name`, `author: Name and Name`, `author: [Name, Name]`, or a list on the lines
///   below (`- Name`, or `- name: Name` as pandoc's templates write authors with affiliations);
///   `authors:` the same;
/// - `date: 2019-05-03` (or any text with a year);
/// - `doi: 10.…` (or a doi.org address).
///
/// Anything else YAML can say (anchors, nested maps other than `name:`, multi-line values) is
/// left alone rather than misread.
pub(super) fn front_matter(text: &str, path: &Path) -> Work {
    let mut lines = text.lines();
    if lines.next().map(str::trim_end) != Some("---") {
        return Work::default();
    }
    let mut block = Vec::new();
    for line in lines.by_ref().take(MAX_FRONT_MATTER_LINES) {
        if matches!(line.trim_end(), "---" | "...") {
            break;
        }
        block.push(line);
    }
    let mut work = Work::default();
    let mut authors = Vec::new();
    let mut in_author_list = false;
    for line in block {
        let indented = line.starts_with([' ', '\t']);
        let trimmed = line.trim();
        if in_author_list && (indented || trimmed.starts_with('-')) {
            // `- Name`, `- name: Name`, or a further key of the same author (`affiliation:`).
            let item = trimmed.strip_prefix('-').map(str::trim);
            let name = match item {
                Some(item) => item
                    .strip_prefix("name:")
                    .map(str::trim)
                    .or((!item.contains(": ")).then_some(item)),
                None => trimmed.strip_prefix("name:").map(str::trim),
            };
            if let Some(name) = name.map(unquote).filter(|n| !n.is_empty()) {
                authors.extend(metadata::authors_in_list(name));
            }
            continue;
        }
        in_author_list = false;
        if indented {
            continue;
        }
        let Some((key, value)) = trimmed.split_once(':') else {
            continue;
        };
        let value = unquote(value.trim());
        match key.trim().to_ascii_lowercase().as_str() {
            "title" if !matches!(value.chars().next(), Some('>' | '|')) => {
                work.title = metadata::usable_title(value, path).map(from_file);
            }
            "author" | "authors" => {
                if value.is_empty() {
                    in_author_list = true;
                } else if let Some(list) = value.strip_prefix('[').and_then(|v| v.strip_suffix(']'))
                {
                    authors.extend(
                        list.split(',')
                            .map(|name| unquote(name.trim()))
                            .flat_map(metadata::authors_in_list),
                    );
                } else {
                    authors.extend(metadata::authors_in_list(value));
                }
            }
            "date" => work.date = metadata::parse_date(value).map(from_file),
            "doi" => work.doi = normalise_doi(value).map(from_file),
            _ => {}
        }
    }
    work.authors = metadata::authors_field(authors);
    work
}

/// A YAML scalar without the quotes around it.
fn unquote(value: &str) -> &str {
    for quote in ['"', '\''] {
        if let Some(inner) = value
            .strip_prefix(quote)
            .and_then(|v| v.strip_suffix(quote))
        {
            return inner;
        }
    }
    value
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

    /// Issue 45: pandoc's YAML front matter is a Markdown file's metadata, and its title the
    /// document's where no heading gives one.
    #[test]
    fn markdown_front_matter_gives_title_authors_date_and_doi() {
        use selfrag_works::{Author, FieldSource};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("draft.md");
        std::fs::write(
            &path,
            "---\ntitle: \"Otters: A Field Study\"\nauthor:\n  - name: Ann Marrow\n    affiliation: Sea\n  - Bo Ødegård\ndate: 2020-06-01\ndoi: https://doi.org/10.1000/Otters.20\n---\n\nOtters hold hands.\n",
        )
        .unwrap();
        let document = extract(&path, true).unwrap();
        let work = &document.work;
        assert_eq!(document.title, "Otters: A Field Study", "not the file name");
        assert_eq!(
            work.title.as_ref().map(|t| t.source),
            Some(FieldSource::FileMetadata)
        );
        let families: Vec<&str> = work.authors().iter().map(Author::family).collect();
        assert_eq!(families, ["Marrow", "Ødegård"]);
        assert_eq!(
            work.date.as_ref().map(|d| d.value.to_string()).as_deref(),
            Some("2020-06-01")
        );
        assert_eq!(Work::text(&work.doi), Some("10.1000/otters.20"));

        for (front, expected) in [
            ("author: [Ann Marrow, Bo Ødegård]", 2),
            ("author: Ann Marrow and Bo Ødegård", 2),
            ("authors: Marrow, Ann", 1),
        ] {
            let work = front_matter(&format!("---\n{front}\n---\nText"), &path);
            assert_eq!(work.authors().len(), expected, "{front}");
        }
        // No front matter: nothing read (a rule later in the file is not one).
        assert!(front_matter("Text\n---\ntitle: No\n---\n", &path).is_empty());
        // A block scalar is not read rather than misread.
        assert!(
            front_matter("---\ntitle: >\n  Folded\n---\n", &path)
                .title
                .is_none()
        );
    }
}
