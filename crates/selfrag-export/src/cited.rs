//! The works an answer cites, as every format that cites works sees them (the bibliographies,
//! author–year and pandoc citations, LaTeX): one per cited document, the passages of one file
//! being one document, in the order of their first citation number, each with its work record,
//! its citation key, its citation numbers and the pages cited.
//!
//! A work is the passage's [`Work`] where the library knew one (the first of the document's
//! passages that carries one), else a record with the document's title alone; a record without
//! a title gets the document's. Keys come from [`cite::key_of`] (the person's own where the
//! record has one) made unique with [`KeySet`], over every document the whole answer cites, so
//! a document keeps its key whether or not the "only supported" filter leaves it in: a `.bib`
//! and a Markdown export of one answer agree.

use std::collections::HashMap;

use selfrag_core::{Answer, Passage};
use selfrag_works::cite::{self, KeySet};
use selfrag_works::{Author, FieldSource, Sourced, Work};

use crate::tex::{CitedPage, cited_page};
use crate::{View, one_line};

/// One cited document as a work.
pub struct CitedWork<'a> {
    /// Its citation key, unique within the export.
    pub key: String,
    /// Its record, with a title.
    pub work: Work,
    /// Its file.
    pub path: &'a str,
    /// The answer's citation numbers of its passages, in order.
    pub numbers: Vec<usize>,
    /// The pages cited, sorted, each once.
    pub pages: Vec<CitedPage>,
    /// The passages cited, in the order of their numbers.
    pub passages: Vec<(usize, &'a Passage)>,
}

impl CitedWork<'_> {
    /// How the text names it: "Marrow & Ødegård 1998", else the file's name.
    pub fn label(&self) -> String {
        cite::author_year(&self.work).unwrap_or_else(|| file_name(self.path).to_string())
    }

    /// The title: the record's (which holds the document's where it had none).
    pub fn title(&self) -> Option<&str> {
        self.work.title().map(str::trim).filter(|t| !t.is_empty())
    }

    /// "Cited as [2], [3]; pages 3, 7--9", then the provenance line: what a bibliography
    /// entry's note says of this answer, with `dash` in page ranges; not escaped.
    pub fn note(&self, provenance: Option<&str>, dash: &str) -> String {
        let numbers: Vec<String> = self.numbers.iter().map(|n| format!("[{n}]")).collect();
        let mut note = format!("Cited as {}", numbers.join(", "));
        if !self.pages.is_empty() {
            let word = if self.pages.len() == 1 {
                "page"
            } else {
                "pages"
            };
            note.push_str(&format!(
                "; {word} {}",
                crate::tex::page_ranges(&self.pages, dash)
            ));
        }
        if let Some(line) = provenance {
            note.push_str(&format!(". {line}"));
        }
        note
    }

    /// The full reference as a reference list gives it, in parts each format marks up.
    pub fn reference(&self) -> Reference {
        let w = &self.work;
        let text =
            |f: &Option<Sourced<String>>| Work::text(f).map(one_line).filter(|t| !t.is_empty());
        let authors = match w.authors() {
            [] => None,
            [one] => Some(one.display()),
            [rest @ .., last] => Some(format!(
                "{} & {}",
                rest.iter()
                    .map(Author::display)
                    .collect::<Vec<_>>()
                    .join(", "),
                last.display()
            )),
        };
        let mut details = Vec::new();
        let volume = match (text(&w.volume), text(&w.issue)) {
            (Some(v), Some(i)) => Some(format!("{v}({i})")),
            (Some(v), None) => Some(v),
            (None, Some(i)) => Some(format!("no. {i}")),
            (None, None) => None,
        };
        details.extend(volume);
        details.extend(text(&w.pages).map(|p| format!("pp. {}", crate::tex::work_pages(&p, "–"))));
        Reference {
            authors: authors.map(|a| one_line(&a)),
            year: w
                .year()
                .map_or_else(|| "n.d.".to_string(), |y| y.to_string()),
            title: self.title().map(one_line),
            container: text(&w.container),
            details: details.join(", "),
            publisher: text(&w.publisher),
            doi: text(&w.doi),
            url: text(&w.url)
                .or_else(|| text(&w.arxiv).map(|id| format!("https://arxiv.org/abs/{id}"))),
        }
    }
}

/// A full reference: "Ann Marrow & Bjørn Ødegård (1998). Title. *Journal* 12(3), pp. 117–129.
/// Publisher. https://doi.org/…", each part plain text.
pub struct Reference {
    pub authors: Option<String>,
    /// The year, or "n.d.".
    pub year: String,
    pub title: Option<String>,
    pub container: Option<String>,
    /// Volume, issue and pages: `12(3), pp. 117–129`; empty where none is known.
    pub details: String,
    pub publisher: Option<String>,
    /// Bare; link it with [`cite::doi_url`].
    pub doi: Option<String>,
    pub url: Option<String>,
}

/// The works cited by the segments a [`View`] kept.
pub struct CitedWorks<'a> {
    pub works: Vec<CitedWork<'a>>,
    /// Which work each citation number cites (an index into `works`).
    by_number: HashMap<usize, usize>,
}

impl<'a> CitedWorks<'a> {
    pub(crate) fn new(answer: &'a Answer, view: &View<'a>) -> Self {
        let keys = keys(answer);
        let mut works: Vec<CitedWork<'a>> = Vec::new();
        let mut by_number = HashMap::new();
        let mut identities: Vec<String> = Vec::new();
        for (n, p) in &view.sources {
            let identity = identity(p);
            let at = match identities.iter().position(|i| *i == identity) {
                Some(at) => at,
                None => {
                    let (work, key) = keys
                        .get(identity.as_str())
                        .cloned()
                        .unwrap_or_else(|| single(p));
                    identities.push(identity);
                    works.push(CitedWork {
                        key,
                        work,
                        path: &p.path,
                        numbers: Vec::new(),
                        pages: Vec::new(),
                        passages: Vec::new(),
                    });
                    works.len() - 1
                }
            };
            let work = &mut works[at];
            work.numbers.push(*n);
            work.pages.extend(cited_page(p));
            work.passages.push((*n, p));
            by_number.insert(*n, at);
        }
        for work in &mut works {
            work.pages.sort_unstable();
            work.pages.dedup();
        }
        Self { works, by_number }
    }

    /// The work citation number `n` cites, and its index in `works`.
    pub fn of(&self, n: usize) -> Option<(usize, &CitedWork<'a>)> {
        let at = *self.by_number.get(&n)?;
        Some((at, self.works.get(at)?))
    }
}

/// What makes two cited documents one work: the Zotero item their files are attached to (a
/// paper's PDF and its snapshot are one work), else the file.
fn identity(p: &Passage) -> String {
    match p.work.as_ref().and_then(|w| w.zotero.as_ref()) {
        Some(z) => format!("zotero:{}:{}", z.group.unwrap_or(0), z.item_key),
        None => format!("file:{}", p.path),
    }
}

/// Every work the whole answer cites, by [`identity`], with its unique key: the person's own
/// keys first, so that a key made up for another work never takes theirs, then the made-up
/// ones in the order of the works' first citation numbers.
fn keys(answer: &Answer) -> HashMap<String, (Work, String)> {
    let mut cited: Vec<usize> = answer.segments.iter().filter_map(|s| s.citation).collect();
    cited.sort_unstable();
    cited.dedup();
    let mut documents: Vec<(String, Vec<&Passage>)> = Vec::new();
    for p in cited
        .into_iter()
        .filter_map(|n| answer.passages.get(n.checked_sub(1)?))
    {
        let identity = identity(p);
        match documents.iter_mut().find(|(i, _)| *i == identity) {
            Some((_, passages)) => passages.push(p),
            None => documents.push((identity, vec![p])),
        }
    }
    let works: Vec<(String, Work, String)> = documents
        .into_iter()
        .map(|(identity, passages)| (identity, work_of(&passages), one_line(&passages[0].title)))
        .collect();
    let mut taken = KeySet::default();
    let mut keys: Vec<Option<String>> = works
        .iter()
        .map(|(_, work, _)| {
            Work::text(&work.citation_key)
                .map(str::trim)
                .filter(|k| cite::is_usable_key(k))
                .map(|k| taken.unique(k))
        })
        .collect();
    for ((_, work, title), key) in works.iter().zip(&mut keys) {
        if key.is_none() {
            *key = Some(taken.unique(&cite::key_of(work, title)));
        }
    }
    works
        .into_iter()
        .zip(keys)
        .map(|((identity, work, _), key)| (identity, (work, key.unwrap_or_default())))
        .collect()
}

/// The work and key of a passage no segment of the answer cites (never asked for by a view,
/// whose sources are cited; kept total).
fn single(p: &Passage) -> (Work, String) {
    let work = work_of(&[p]);
    let key = cite::key_of(&work, &one_line(&p.title));
    (work, key)
}

/// The document's work: the first record one of its passages carries, else one with the
/// document's title alone; a record without a title gets the document's.
fn work_of(passages: &[&Passage]) -> Work {
    let mut work = passages
        .iter()
        .find_map(|p| p.work.as_ref().filter(|w| !w.is_empty()))
        .cloned()
        .unwrap_or_default();
    let title = one_line(&passages[0].title);
    if work.title().is_none_or(|t| t.trim().is_empty()) && !title.is_empty() {
        // The library's title of the document: read from the file, its metadata or its name.
        work.title = Some(Sourced::new(title, FieldSource::FileMetadata));
    }
    work
}

/// The last component of a path, for either separator.
fn file_name(path: &str) -> &str {
    path.rsplit(['/', '\\'])
        .next()
        .filter(|last| !last.is_empty())
        .unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use selfrag_testkit::traces::TraceBuilder;
    use selfrag_works::WorkDate;

    use super::*;
    use crate::ExportOptions;

    fn work(family: &str, year: i32, title: &str) -> Work {
        let s = |v| Sourced::new(v, FieldSource::ReferenceManager);
        Work {
            authors: Some(Sourced::new(
                vec![Author::person(family, "A.")],
                FieldSource::ReferenceManager,
            )),
            date: Some(Sourced::new(
                WorkDate::year(year),
                FieldSource::ReferenceManager,
            )),
            title: Some(s(title.to_string())),
            ..Work::default()
        }
    }

    #[test]
    fn a_zotero_items_attachments_are_one_work_and_the_persons_keys_are_never_taken() {
        let answer = TraceBuilder::new("q")
            .passage("Telemetry", "/z/A/paper.pdf", Some(2), "a")
            .passage("Telemetry", "/z/A/snapshot.html", None, "b")
            .passage("Other", "/o.pdf", Some(1), "c")
            .segment("One.", Some(1), None)
            .segment("Two.", Some(2), None)
            .segment("Three.", Some(3), None)
            .build();
        let mut answer = answer;
        let mut item = work("Marrow", 1998, "Telemetry");
        item.zotero = Some(selfrag_works::ZoteroLink {
            item_key: "ITEMKEY1".into(),
            ..Default::default()
        });
        answer.passages[0].work = Some(item.clone());
        answer.passages[1].work = Some(item);
        // Cited last, but its own key is the one the first work would be given.
        let mut theirs = work("Other", 2001, "Else");
        theirs.citation_key = Some(Sourced::new(
            "marrow1998telemetry".into(),
            FieldSource::Person,
        ));
        answer.passages[2].work = Some(theirs);
        let all = View::new(&answer, &ExportOptions::default());
        let cited = CitedWorks::new(&answer, &all);
        let keys: Vec<&str> = cited.works.iter().map(|w| w.key.as_str()).collect();
        assert_eq!(keys, ["marrow1998telemetrya", "marrow1998telemetry"]);
        assert_eq!(cited.works[0].numbers, [1, 2]);
        assert_eq!(cited.works[1].work.title(), Some("Else"));
    }

    #[test]
    fn documents_are_grouped_by_path_keyed_once_and_keep_their_keys_under_the_filter() {
        let answer = TraceBuilder::new("q")
            .passage("Notes", "/a.md", None, "a")
            .passage("Paper", "/p.pdf", Some(3), "b")
            .passage("Paper", "/p.pdf", Some(7), "c")
            .passage("Other", "/o.pdf", Some(1), "d")
            .segment("One.", Some(1), Some([0.1, 0.1, 0.8]))
            .segment("Two.", Some(2), Some([0.9, 0.05, 0.05]))
            .segment("Three.", Some(3), Some([0.9, 0.05, 0.05]))
            .segment("Four.", Some(4), Some([0.9, 0.05, 0.05]))
            .build();
        let mut answer = answer;
        answer.passages[1].work = Some(work("Marrow", 1998, "Telemetry"));
        // A second paper by the same author in the same year and word: a second key.
        answer.passages[3].work = Some(work("Marrow", 1998, "Telemetry again"));
        let all = View::new(&answer, &ExportOptions::default());
        let cited = CitedWorks::new(&answer, &all);
        let keys: Vec<&str> = cited.works.iter().map(|w| w.key.as_str()).collect();
        assert_eq!(
            keys,
            ["notes", "marrow1998telemetry", "marrow1998telemetrya"]
        );
        assert_eq!(cited.works[1].numbers, [2, 3]);
        assert_eq!(
            cited.works[1].pages,
            [(3, "3".to_string()), (7, "7".to_string())]
        );
        assert_eq!(cited.works[0].work.title(), Some("Notes"));
        assert_eq!(cited.works[0].label(), "Notes n.d.");
        assert_eq!(cited.works[1].label(), "Marrow 1998");
        assert_eq!(cited.of(3).map(|(at, _)| at), Some(1));

        let filtered = View::new(
            &answer,
            &ExportOptions {
                only_supported: true,
                ..ExportOptions::default()
            },
        );
        let cited = CitedWorks::new(&answer, &filtered);
        let keys: Vec<&str> = cited.works.iter().map(|w| w.key.as_str()).collect();
        assert_eq!(keys, ["marrow1998telemetry", "marrow1998telemetrya"]);
        assert_eq!(
            cited.works[0].note(Some("Written here"), "--"),
            "Cited as [2], [3]; pages 3, 7. Written here"
        );
        assert_eq!(cited.works[1].note(None, "--"), "Cited as [4]; page 1");
    }
}
