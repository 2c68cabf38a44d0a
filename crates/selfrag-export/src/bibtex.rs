//! BibTeX export: one `@misc` entry per cited document (passages of one file are one document)
//! with its title, file path, the cited pages, and a note with the citation numbers and the
//! answer's provenance line.
//!
//! Keys are stable and valid: a slug of the title (ASCII letters and digits) and a 32-bit
//! FNV-1a hash of the path, so the same document gets the same key in every export. Field
//! values are escaped for BibTeX and LaTeX: `{`, `}` and `\` become `\textbraceleft{}`,
//! `\textbraceright{}` and `\textbackslash{}` (BibTeX counts every brace, escaped or not, so a
//! lone `\{` would unbalance the entry), and `$ & % # _` are backslash-escaped.

use selfrag_core::{Answer, Passage};

use super::{ExportOptions, View, one_line};

/// The cited documents as BibTeX.
pub fn bibtex(answer: &Answer, options: &ExportOptions) -> String {
    let view = View::new(answer, options);
    // Documents in order of their first citation, each with its citation numbers and pages.
    let mut docs: Vec<(&Passage, Vec<usize>, Vec<CitedPage>)> = Vec::new();
    for (n, p) in &view.sources {
        let page = p
            .page
            .map(|page| (page, p.printed_page().unwrap_or_default()));
        match docs.iter_mut().find(|(d, _, _)| d.path == p.path) {
            Some((_, numbers, pages)) => {
                numbers.push(*n);
                pages.extend(page);
            }
            None => docs.push((p, vec![*n], page.into_iter().collect())),
        }
    }
    let mut out = String::from("% Sources cited by an answer exported from Self-RAG Desktop.\n");
    let mut keys: Vec<String> = Vec::new();
    for (doc, numbers, mut pages) in docs {
        let mut key = key(doc);
        // Two paths with the same hash and slug in one file: keep keys unique.
        let base = key.clone();
        let mut i = 2;
        while keys.contains(&key) {
            key = format!("{base}-{i}");
            i += 1;
        }
        keys.push(key.clone());
        out.push_str(&format!("\n@misc{{{key},\n"));
        out.push_str(&format!(
            "  title = {{{}}},\n",
            escape(&one_line(&doc.title))
        ));
        out.push_str(&format!("  file = {{{}}},\n", escape(&doc.path)));
        pages.sort_unstable();
        pages.dedup();
        if !pages.is_empty() {
            out.push_str(&format!("  pages = {{{}}},\n", page_ranges(&pages)));
        }
        let cited: Vec<String> = numbers.iter().map(|n| format!("[{n}]")).collect();
        let written = view
            .provenance
            .as_ref()
            .map(|line| format!(". {}", escape(line)))
            .unwrap_or_default();
        out.push_str(&format!(
            "  note = {{Cited as {}{written}}},\n",
            cited.join(", ")
        ));
        out.push_str("}\n");
    }
    out
}

/// `selfragnotes-1a2b3c4d`: up to three words of the title, then the path's hash.
fn key(doc: &Passage) -> String {
    let slug: String = doc
        .title
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .take(3)
        .collect::<String>()
        .to_ascii_lowercase()
        .chars()
        .take(24)
        .collect();
    // A key starting with a digit is valid BibTeX but trips some tools.
    let slug = match slug.chars().next() {
        None => "source".to_string(),
        Some(c) if c.is_ascii_digit() => format!("s{slug}"),
        Some(_) => slug,
    };
    format!("{slug}-{:08x}", fnv1a(doc.path.as_bytes()))
}

/// 32-bit FNV-1a: small, stable across versions and platforms (unlike `std`'s hasher).
fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5, |h: u32, b| {
        (h ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    })
}

/// A cited page: its place in the file, and the number printed on it (the same unless the
/// file's page labels say otherwise).
type CitedPage = (u32, String);

/// "3, 5--7" from sorted, distinct pages: runs of consecutive pages of the file, each written
/// with the numbers printed on its first and last page (`117--119`, `iii--v`), escaped: a
/// printed label is the PDF's own text (its `/P` prefix), and could close the field.
fn page_ranges(pages: &[CitedPage]) -> String {
    let label = |page: &CitedPage| escape(&one_line(&page.1));
    let mut ranges: Vec<(&CitedPage, &CitedPage)> = Vec::new();
    for page in pages {
        match ranges.last_mut() {
            Some((_, end)) if end.0 + 1 == page.0 => *end = page,
            _ => ranges.push((page, page)),
        }
    }
    ranges
        .iter()
        .map(|(a, b)| {
            if a.0 == b.0 {
                label(a)
            } else {
                format!("{}--{}", label(a), label(b))
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A field value BibTeX reads back as the same text and LaTeX typesets without error.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\textbackslash{}"),
            '{' => out.push_str("\\textbraceleft{}"),
            '}' => out.push_str("\\textbraceright{}"),
            '^' => out.push_str("\\textasciicircum{}"),
            '~' => out.push_str("\\textasciitilde{}"),
            '$' | '&' | '%' | '#' | '_' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_answer;

    /// Every brace group closes: what BibTeX checks of a braced value.
    fn balanced(s: &str) -> bool {
        let mut depth = 0i32;
        for c in s.chars() {
            depth += match c {
                '{' => 1,
                '}' => -1,
                _ => 0,
            };
            if depth < 0 {
                return false;
            }
        }
        depth == 0
    }

    #[test]
    fn one_entry_per_cited_document_with_title_file_and_pages() {
        let bib = bibtex(&test_answer::answer(), &ExportOptions::default());
        assert_eq!(bib.matches("@misc{").count(), 2, "{bib}");
        let paper = format!("@misc{{paper-{:08x},\n", fnv1a(b"/docs/paper.pdf"));
        assert!(bib.contains(&paper), "{bib}");
        assert!(bib.contains("  title = {Paper},\n  file = {/docs/paper.pdf},\n  pages = {3},\n  note = {Cited as [2]},\n}"));
        assert!(balanced(&bib), "{bib}");
        // Only one `@` per entry: none comes from the text.
        assert_eq!(bib.matches('@').count(), 2);
    }

    #[test]
    fn special_characters_are_escaped_for_bibtex() {
        let bib = bibtex(&test_answer::answer(), &ExportOptions::default());
        assert!(bib.contains(
            "title = {Notes <script>alert('x')</script> \\& \\textbraceleft{}braces\\textbraceright{} 100\\% \\$5 \\#1 a\\_b \\textasciicircum{} \\textasciitilde{}},"
        ), "{bib}");
        assert!(bib.contains("file = {/docs/notes\\_\\textbraceleft{}x\\textbraceright{}.md},"));
        assert_eq!(escape("C:\\docs"), "C:\\textbackslash{}docs");
        assert!(balanced(&escape("}{ \\ { ")));
    }

    #[test]
    fn keys_are_valid_and_stable() {
        let a = test_answer::answer();
        let k = key(&a.passages[0]);
        assert_eq!(
            k,
            format!("notesscriptalert-{:08x}", fnv1a(b"/docs/notes_{x}.md"))
        );
        assert!(k.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'));
        assert_eq!(key(&a.passages[0]), k, "same document, same key");
        // Known FNV-1a values pin the hash across versions.
        assert_eq!(fnv1a(b""), 0x811c_9dc5);
        assert_eq!(fnv1a(b"a"), 0xe40c_292c);
        let mut untitled = a.passages[1].clone();
        untitled.title = "—".into();
        assert!(key(&untitled).starts_with("source-"));
        untitled.title = "2024 report".into();
        assert!(key(&untitled).starts_with("s2024report-"));
    }

    #[test]
    fn pages_of_one_document_merge_into_ranges() {
        let plain = |pages: &[u32]| -> Vec<CitedPage> {
            pages.iter().map(|&p| (p, p.to_string())).collect()
        };
        assert_eq!(page_ranges(&plain(&[1, 3, 4, 5, 9])), "1, 3--5, 9");
        // Printed numbers: an article printed from page 117, and roman front matter.
        let printed = [
            (1, "iii".to_owned()),
            (2, "iv".to_owned()),
            (9, "117".to_owned()),
            (10, "118".to_owned()),
            (12, "120".to_owned()),
        ];
        assert_eq!(page_ranges(&printed), "iii--iv, 117--118, 120");
        let mut a = test_answer::answer();
        a.segments[0].citation = None;
        a.segments[2].citation = Some(3);
        let bib = bibtex(&a, &ExportOptions::default());
        assert!(
            bib.contains("pages = {3, 7},\n  note = {Cited as [2], [3]}"),
            "{bib}"
        );
        assert_eq!(
            bib.matches("@misc{").count(),
            1,
            "the notes are no longer cited"
        );
    }

    #[test]
    fn a_printed_page_label_cannot_add_fields_or_latex_commands() {
        let mut a = test_answer::answer();
        for p in &mut a.passages {
            p.page_label = Some("}, note={x}, author={\\input{/etc/passwd}\n".into());
        }
        let bib = bibtex(&a, &ExportOptions::default());
        assert!(balanced(&bib), "{bib}");
        assert!(!bib.contains("\\input{"), "{bib}");
        for entry in bib.split("\n@misc{").skip(1) {
            let fields: Vec<&str> = entry
                .lines()
                .skip(1)
                .filter_map(|l| l.strip_prefix("  ")?.split_once(" = ").map(|(f, _)| f))
                .collect();
            let expected: &[&str] = if entry.contains("pages = ") {
                &["title", "file", "pages", "note"]
            } else {
                &["title", "file", "note"]
            };
            assert_eq!(fields, expected, "no field came from the label: {entry}");
        }
    }

    #[test]
    fn only_supported_lists_only_the_documents_kept_segments_cite() {
        let options = ExportOptions {
            only_supported: true,
            ..ExportOptions::default()
        };
        let bib = bibtex(&test_answer::answer(), &options);
        assert_eq!(bib.matches("@misc{").count(), 1);
        assert!(bib.contains("@misc{notesscriptalert-"));
        assert!(!bib.contains("paper.pdf"));
    }
}
