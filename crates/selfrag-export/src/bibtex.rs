//! BibTeX and BibLaTeX export: one entry per cited work (see [`crate::cited`]) of its real
//! type, with the fields its record has, and in a note (`note` in BibTeX, `addendum` in
//! BibLaTeX) the answer's own use of it: its citation numbers, the pages it cites (printed
//! numbers where the PDF has them) and the answer's provenance line. `pages` is the work's own
//! page range in its journal or book, never the pages an answer cites.
//!
//! | work | BibTeX | BibLaTeX |
//! | --- | --- | --- |
//! | journal article | `@article`, `journal` | `@article`, `journaltitle` |
//! | conference paper | `@inproceedings`, `booktitle` | `@inproceedings`, `booktitle` |
//! | book | `@book` | `@book` |
//! | chapter (an edited volume's contribution) | `@incollection`, `booktitle` | `@incollection`, `booktitle` |
//! | thesis | `@phdthesis`, `school` | `@thesis`, `institution` |
//! | report | `@techreport`, `institution` | `@report`, `institution`, `type = {techreport}` |
//! | web page | `@misc`, `howpublished` | `@online`, `organization` |
//! | other | `@misc`, `howpublished` | `@misc`, `howpublished` |
//!
//! Authors are `Family, Given and Family, Given`, an organisation braced whole; BibTeX gets the
//! `year`, BibLaTeX the ISO `date`; an arXiv id is `archivePrefix`/`eprint` (BibTeX) or
//! `eprint`/`eprinttype` (BibLaTeX). The key is the work's citation key (the person's own, e.g.
//! Better BibTeX's, where the record has one), unique within the file. Every field is escaped
//! ([`crate::tex`]): a title keeps its capitals, letters outside ASCII are UTF-8 or LaTeX
//! escapes as [`crate::BibEncoding`] says, and DOI and URL are percent-encoded where they hold
//! a character that could end the field.

use selfrag_core::Answer;
use selfrag_works::{Author, Work, WorkType};

use super::{ExportOptions, View, one_line};
use crate::BibEncoding;
use crate::cited::{CitedWork, CitedWorks};
use crate::tex;

/// Which of the two bibliography formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dialect {
    Bibtex,
    Biblatex,
}

/// The cited works as classic BibTeX.
pub fn bibtex(answer: &Answer, options: &ExportOptions) -> String {
    write(answer, options, Dialect::Bibtex)
}

/// The cited works as BibLaTeX (for biber).
pub fn biblatex(answer: &Answer, options: &ExportOptions) -> String {
    write(answer, options, Dialect::Biblatex)
}

fn write(answer: &Answer, options: &ExportOptions, dialect: Dialect) -> String {
    let view = View::new(answer, options);
    let cited = CitedWorks::new(answer, &view);
    let mut out = String::from("% Sources cited by an answer exported from Self-RAG Desktop.\n");
    for work in &cited.works {
        out.push('\n');
        out.push_str(&entry(
            work,
            dialect,
            options.bibtex_encoding,
            view.provenance.as_deref(),
        ));
    }
    out
}

/// One entry.
fn entry(
    cited: &CitedWork<'_>,
    dialect: Dialect,
    encoding: BibEncoding,
    provenance: Option<&str>,
) -> String {
    use Dialect::{Biblatex, Bibtex};
    let work = &cited.work;
    let kind = work.kind();
    let text = |s: &str| tex::text(&one_line(s), encoding);
    let field = |f: &Option<selfrag_works::Sourced<String>>| {
        Work::text(f).map(one_line).filter(|v| !v.is_empty())
    };
    let mut fields: Vec<(&str, String)> = Vec::new();
    if !work.authors().is_empty() {
        fields.push(("author", names(work.authors(), encoding)));
    }
    if let Some(title) = cited.title() {
        fields.push(("title", tex::title(title, encoding)));
    }
    if let Some(container) = field(&work.container) {
        let name = match (kind, dialect) {
            (WorkType::JournalArticle, Bibtex) => "journal",
            (WorkType::JournalArticle, Biblatex) => "journaltitle",
            (WorkType::ConferencePaper | WorkType::Chapter, _) => "booktitle",
            (WorkType::Book | WorkType::Report | WorkType::Thesis, _) => "series",
            (WorkType::WebPage, Biblatex) => "organization",
            (WorkType::WebPage | WorkType::Other, _) => "howpublished",
        };
        fields.push((name, text(&container)));
    }
    if let Some(date) = &work.date {
        match dialect {
            Bibtex => fields.push(("year", date.value.year.to_string())),
            Biblatex => fields.push(("date", date.value.to_string())),
        }
    }
    if let Some(volume) = field(&work.volume) {
        fields.push(("volume", text(&volume)));
    }
    if let Some(issue) = field(&work.issue) {
        fields.push(("number", text(&issue)));
    }
    if let Some(pages) = field(&work.pages) {
        fields.push(("pages", text(&tex::work_pages(&pages, "--"))));
    }
    if let Some(publisher) = field(&work.publisher) {
        let name = match (kind, dialect) {
            (WorkType::Thesis, Bibtex) => "school",
            (WorkType::Thesis | WorkType::Report, _) => "institution",
            _ => "publisher",
        };
        fields.push((name, text(&publisher)));
    }
    if kind == WorkType::Report && dialect == Biblatex {
        fields.push(("type", "techreport".to_string()));
    }
    if let Some(doi) = field(&work.doi) {
        fields.push(("doi", tex::verbatim(&doi, encoding)));
    }
    if let Some(arxiv) = field(&work.arxiv) {
        let id = tex::verbatim(&arxiv, encoding);
        match dialect {
            Bibtex => {
                fields.push(("archivePrefix", "arXiv".to_string()));
                fields.push(("eprint", id));
            }
            Biblatex => {
                fields.push(("eprint", id));
                fields.push(("eprinttype", "arxiv".to_string()));
            }
        }
    }
    if let Some(isbn) = field(&work.isbn) {
        fields.push(("isbn", text(&isbn)));
    }
    if let Some(url) = field(&work.url) {
        fields.push(("url", tex::verbatim(&url, encoding)));
    }
    fields.push(("file", text(cited.path)));
    let note = match dialect {
        Bibtex => "note",
        Biblatex => "addendum",
    };
    fields.push((note, text(&cited.note(provenance, "--"))));

    let mut out = format!("@{}{{{},\n", entry_type(kind, dialect), cited.key);
    for (name, value) in fields {
        out.push_str(&format!("  {name} = {{{value}}},\n"));
    }
    out.push_str("}\n");
    out
}

/// The entry type of a kind of work.
fn entry_type(kind: WorkType, dialect: Dialect) -> &'static str {
    use Dialect::{Biblatex, Bibtex};
    match (kind, dialect) {
        (WorkType::JournalArticle, _) => "article",
        (WorkType::ConferencePaper, _) => "inproceedings",
        (WorkType::Book, _) => "book",
        (WorkType::Chapter, _) => "incollection",
        (WorkType::Thesis, Bibtex) => "phdthesis",
        (WorkType::Thesis, Biblatex) => "thesis",
        (WorkType::Report, Bibtex) => "techreport",
        (WorkType::Report, Biblatex) => "report",
        (WorkType::WebPage, Biblatex) => "online",
        (WorkType::WebPage | WorkType::Other, _) => "misc",
    }
}

/// `Family, Given and Family, Given`, an organisation's name braced whole so BibTeX never
/// splits it; a name part holding a comma or the word "and" braced too.
fn names(authors: &[Author], encoding: BibEncoding) -> String {
    let part = |s: &str| {
        let s = one_line(s);
        let escaped = tex::text(&s, encoding);
        if s.contains(',') || s.split(' ').any(|w| w.eq_ignore_ascii_case("and")) {
            tex::protect(&escaped)
        } else {
            escaped
        }
    };
    authors
        .iter()
        .filter_map(|a| match a {
            Author::Person { family, given } if family.trim().is_empty() => {
                (!given.trim().is_empty())
                    .then(|| tex::protect(&tex::text(&one_line(given), encoding)))
            }
            Author::Person { family, given } if given.trim().is_empty() => Some(part(family)),
            Author::Person { family, given } => Some(format!("{}, {}", part(family), part(given))),
            Author::Organisation { name } => {
                Some(tex::protect(&tex::text(&one_line(name), encoding)))
            }
        })
        .collect::<Vec<_>>()
        .join(" and ")
}

#[cfg(test)]
mod tests {
    use selfrag_works::{FieldSource, Sourced, WorkDate};

    use super::*;
    use crate::test_answer::{self, answer_citing, article};

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

    /// The field names of each entry, in order.
    fn field_names(bib: &str) -> Vec<Vec<String>> {
        bib.split("\n@")
            .skip(1)
            .map(|entry| {
                entry
                    .lines()
                    .skip(1)
                    .filter_map(|l| {
                        l.strip_prefix("  ")?
                            .split_once(" = ")
                            .map(|(f, _)| f.to_string())
                    })
                    .collect()
            })
            .collect()
    }

    fn s<T>(v: T) -> Option<Sourced<T>> {
        Some(Sourced::new(v, FieldSource::ReferenceManager))
    }

    #[test]
    fn an_article_has_its_real_type_and_fields_in_both_dialects() {
        let answer = answer_citing(article());
        let bib = bibtex(&answer, &ExportOptions::default());
        let expected = "@article{marrowTelemetry98,
  author = {Marrow, Ann and Ødegård, Bjørn and {World Health Organization}},
  title = {{Self-RAG} and the Ålesund telemetry: 100\\% \\textbraceleft{}sure\\textbraceright{} \\& more},
  journal = {Journal of Telemetry \\& Control},
  year = {1998},
  volume = {12},
  number = {3},
  pages = {117--129},
  publisher = {Nordic Press},
  doi = {10.1000/xyz_1},
  archivePrefix = {arXiv},
  eprint = {2310.11511},
  url = {https://example.org/a_b?c=1&d=2},
  file = {/docs/paper.pdf},
  note = {Cited as [2]; page 3},
}
";
        assert!(bib.contains(expected), "{bib}");
        let latex = biblatex(&answer, &ExportOptions::default());
        let expected = "@article{marrowTelemetry98,
  author = {Marrow, Ann and Ødegård, Bjørn and {World Health Organization}},
  title = {{Self-RAG} and the Ålesund telemetry: 100\\% \\textbraceleft{}sure\\textbraceright{} \\& more},
  journaltitle = {Journal of Telemetry \\& Control},
  date = {1998-03-15},
  volume = {12},
  number = {3},
  pages = {117--129},
  publisher = {Nordic Press},
  doi = {10.1000/xyz_1},
  eprint = {2310.11511},
  eprinttype = {arxiv},
  url = {https://example.org/a_b?c=1&d=2},
  file = {/docs/paper.pdf},
  addendum = {Cited as [2]; page 3},
}
";
        assert!(latex.contains(expected), "{latex}");
        // The document without a record is cited by its title alone.
        assert!(bib.contains("@misc{notes,\n  title = {Notes "), "{bib}");
        assert!(balanced(&bib) && balanced(&latex));
    }

    #[test]
    fn every_kind_of_work_gets_its_entry_type_and_container_field() {
        let expected = [
            (
                WorkType::JournalArticle,
                "article",
                "journal",
                "article",
                "journaltitle",
            ),
            (
                WorkType::ConferencePaper,
                "inproceedings",
                "booktitle",
                "inproceedings",
                "booktitle",
            ),
            (WorkType::Book, "book", "series", "book", "series"),
            (
                WorkType::Chapter,
                "incollection",
                "booktitle",
                "incollection",
                "booktitle",
            ),
            (WorkType::Thesis, "phdthesis", "series", "thesis", "series"),
            (WorkType::Report, "techreport", "series", "report", "series"),
            (
                WorkType::WebPage,
                "misc",
                "howpublished",
                "online",
                "organization",
            ),
            (
                WorkType::Other,
                "misc",
                "howpublished",
                "misc",
                "howpublished",
            ),
        ];
        for (kind, bib_type, bib_container, latex_type, latex_container) in expected {
            let work = Work {
                kind: s(kind),
                ..article()
            };
            let answer = answer_citing(work);
            let bib = bibtex(&answer, &ExportOptions::default());
            assert!(
                bib.contains(&format!("@{bib_type}{{marrowTelemetry98,")),
                "{bib}"
            );
            assert!(
                bib.contains(&format!("  {bib_container} = {{Journal of")),
                "{bib}"
            );
            let latex = biblatex(&answer, &ExportOptions::default());
            assert!(
                latex.contains(&format!("@{latex_type}{{marrowTelemetry98,")),
                "{latex}"
            );
            assert!(
                latex.contains(&format!("  {latex_container} = {{Journal of")),
                "{latex}"
            );
            let publisher = match kind {
                WorkType::Thesis => ("school", "institution"),
                WorkType::Report => ("institution", "institution"),
                _ => ("publisher", "publisher"),
            };
            assert!(bib.contains(&format!("  {} = {{Nordic Press}}", publisher.0)));
            assert!(latex.contains(&format!("  {} = {{Nordic Press}}", publisher.1)));
            assert_eq!(
                latex.contains("  type = {techreport},"),
                kind == WorkType::Report
            );
        }
    }

    #[test]
    fn ascii_writes_letters_outside_it_as_latex_escapes() {
        let answer = answer_citing(article());
        let options = ExportOptions {
            bibtex_encoding: BibEncoding::Ascii,
            ..ExportOptions::default()
        };
        let bib = bibtex(&answer, &options);
        assert!(bib.is_ascii(), "{bib}");
        assert!(
            bib.contains("  author = {Marrow, Ann and {\\O}deg{\\aa}rd, Bj{\\o}rn and {World Health Organization}},\n"),
            "{bib}"
        );
        assert!(bib.contains("the {\\AA}lesund telemetry"), "{bib}");
        assert!(balanced(&bib));
        // UTF-8 is the default, for biber.
        assert!(bibtex(&answer, &ExportOptions::default()).contains("Ødegård, Bjørn"));
    }

    #[test]
    fn names_with_a_comma_or_an_and_are_braced_and_a_lone_given_name_stands_alone() {
        let authors = [
            Author::person("van Beethoven", "Ludwig"),
            Author::person("Smith, Jr.", "John"),
            Author::person("Black and Decker", ""),
            Author::person("", "Plato"),
            Author::Organisation {
                name: "Bill and Melinda Gates Foundation".into(),
            },
        ];
        assert_eq!(
            names(&authors, BibEncoding::Utf8),
            "van Beethoven, Ludwig and {Smith, Jr.}, John and {Black and Decker} and {Plato} and {Bill and Melinda Gates Foundation}"
        );
    }

    #[test]
    fn one_entry_per_cited_document_with_title_file_and_cited_pages_in_the_note() {
        let bib = bibtex(&test_answer::answer(), &ExportOptions::default());
        assert_eq!(bib.matches("@misc{").count(), 2, "{bib}");
        assert!(
            bib.contains("@misc{paper,\n  title = {Paper},\n  file = {/docs/paper.pdf},\n  note = {Cited as [2]; page 3},\n}"),
            "{bib}"
        );
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
    }

    /// Every field of a record read from a file someone else wrote is escaped: none can close
    /// its field, add another or run a command.
    #[test]
    fn a_hostile_record_cannot_add_fields_or_latex_commands() {
        let hostile = "}, note={x}, author={\\input{/etc/passwd}\n";
        let work = Work {
            kind: s(WorkType::JournalArticle),
            title: s(hostile.into()),
            authors: s(vec![
                Author::person(hostile, hostile),
                Author::Organisation {
                    name: hostile.into(),
                },
            ]),
            date: s(WorkDate::year(2001)),
            container: s(hostile.into()),
            volume: s(hostile.into()),
            issue: s(hostile.into()),
            pages: s(hostile.into()),
            publisher: s(hostile.into()),
            doi: s(format!("10.1/{hostile}")),
            arxiv: s(hostile.into()),
            isbn: s(hostile.into()),
            url: s(format!("https://x.org/{hostile}")),
            citation_key: s(hostile.into()),
            zotero: None,
        };
        for render in [bibtex, biblatex] {
            for encoding in [BibEncoding::Utf8, BibEncoding::Ascii] {
                let options = ExportOptions {
                    bibtex_encoding: encoding,
                    ..ExportOptions::default()
                };
                let bib = render(&answer_citing(work.clone()), &options);
                assert!(balanced(&bib), "{bib}");
                assert!(!bib.contains("\\input{"), "{bib}");
                let fields = field_names(&bib);
                assert_eq!(fields.len(), 2, "{bib}");
                // The key is not the unusable one the record gave, but one made of letters.
                let key = bib
                    .split("@article{")
                    .nth(1)
                    .and_then(|e| e.split_once(",\n"));
                let key = key.map(|(k, _)| k).unwrap_or_default();
                assert!(
                    key.ends_with("2001note") && key.chars().all(|c| c.is_ascii_alphanumeric()),
                    "{bib}"
                );
                for names in &fields {
                    let mut sorted = names.clone();
                    sorted.dedup();
                    assert_eq!(&sorted, names, "a field twice: {bib}");
                    assert!(!names.iter().any(|n| n == "x"), "{bib}");
                }
                assert_eq!(fields[1].iter().filter(|n| *n == "author").count(), 1);
            }
        }
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
        for fields in field_names(&bib) {
            assert_eq!(
                fields,
                ["title", "file", "note"],
                "no field came from the label: {bib}"
            );
        }
        assert!(
            bib.contains("note = {Cited as [2]; page \\textbraceright{}, note="),
            "{bib}"
        );
    }

    #[test]
    fn pages_of_one_document_merge_into_ranges_in_the_note() {
        let mut a = test_answer::answer();
        a.segments[0].citation = None;
        a.segments[2].citation = Some(3);
        let bib = bibtex(&a, &ExportOptions::default());
        assert!(
            bib.contains("note = {Cited as [2], [3]; pages 3, 7}"),
            "{bib}"
        );
        assert_eq!(
            bib.matches("@misc{").count(),
            1,
            "the notes are no longer cited"
        );
    }

    #[test]
    fn only_supported_lists_only_the_documents_kept_segments_cite() {
        let options = ExportOptions {
            only_supported: true,
            ..ExportOptions::default()
        };
        let bib = bibtex(&test_answer::answer(), &options);
        assert_eq!(bib.matches("@misc{").count(), 1);
        assert!(bib.contains("@misc{notes,"));
        assert!(!bib.contains("paper.pdf"));
    }
}
