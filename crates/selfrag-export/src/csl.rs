//! CSL-JSON export: the cited works as an array of CSL items, the bibliography format of
//! pandoc's citeproc (`pandoc --citeproc --bibliography refs.json`) and of Zotero's import.
//! Each item's `id` is the work's citation key, the same as in the BibTeX export and in the
//! pandoc Markdown export's `[@key]`. Written with serde_json, so every string is escaped as JSON
//! and nothing needs escaping for TeX.

use selfrag_core::Answer;
use selfrag_works::{Author, Sourced, Work, WorkType};
use serde::Serialize;

use super::{ExportOptions, View, one_line};
use crate::cited::{CitedWork, CitedWorks};

/// One CSL item, with the variables the record can fill.
#[derive(Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
struct Item {
    id: String,
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    title: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    author: Vec<Name>,
    #[serde(skip_serializing_if = "Option::is_none")]
    issued: Option<Date>,
    #[serde(skip_serializing_if = "Option::is_none")]
    container_title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    volume: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    issue: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    page: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    publisher: Option<String>,
    #[serde(rename = "DOI", skip_serializing_if = "Option::is_none")]
    doi: Option<String>,
    #[serde(rename = "ISBN", skip_serializing_if = "Option::is_none")]
    isbn: Option<String>,
    #[serde(rename = "URL", skip_serializing_if = "Option::is_none")]
    url: Option<String>,
}

/// A CSL name: a person's parts, or an organisation's one literal name.
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum Name {
    Person {
        family: String,
        #[serde(skip_serializing_if = "String::is_empty")]
        given: String,
    },
    Literal {
        literal: String,
    },
}

/// `{"date-parts": [[1998, 3, 15]]}`.
#[derive(Debug, Serialize)]
struct Date {
    #[serde(rename = "date-parts")]
    date_parts: [Vec<i32>; 1],
}

/// The cited works as a CSL-JSON array.
pub fn csl_json(answer: &Answer, options: &ExportOptions) -> String {
    let view = View::new(answer, options);
    let cited = CitedWorks::new(answer, &view);
    let items: Vec<Item> = cited.works.iter().map(item).collect();
    // Serializing plain data with string keys cannot fail.
    serde_json::to_string_pretty(&items).unwrap_or_default() + "\n"
}

/// The CSL type of a kind of work.
fn csl_type(kind: WorkType) -> &'static str {
    match kind {
        WorkType::JournalArticle => "article-journal",
        WorkType::ConferencePaper => "paper-conference",
        WorkType::Book => "book",
        WorkType::Chapter => "chapter",
        WorkType::Thesis => "thesis",
        WorkType::Report => "report",
        WorkType::WebPage => "webpage",
        WorkType::Other => "document",
    }
}

fn item(cited: &CitedWork<'_>) -> Item {
    let w = &cited.work;
    let text = |f: &Option<Sourced<String>>| Work::text(f).map(one_line).filter(|t| !t.is_empty());
    Item {
        id: cited.key.clone(),
        kind: csl_type(w.kind()),
        title: cited.title().map(one_line),
        author: w
            .authors()
            .iter()
            .map(|a| match a {
                Author::Person { family, given } => Name::Person {
                    family: one_line(family),
                    given: one_line(given),
                },
                Author::Organisation { name } => Name::Literal {
                    literal: one_line(name),
                },
            })
            .collect(),
        issued: w.date.as_ref().map(|d| {
            let d = d.value;
            let mut parts = vec![d.year];
            if let Some(month) = d.month {
                parts.push(i32::from(month));
                parts.extend(d.day.map(i32::from));
            }
            Date {
                date_parts: [parts],
            }
        }),
        container_title: text(&w.container),
        volume: text(&w.volume),
        issue: text(&w.issue),
        page: text(&w.pages).map(|p| crate::tex::work_pages(&p, "-")),
        publisher: text(&w.publisher),
        doi: text(&w.doi),
        isbn: text(&w.isbn),
        url: text(&w.url)
            .or_else(|| text(&w.arxiv).map(|id| format!("https://arxiv.org/abs/{id}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_answer::{self, answer_citing, article};

    #[test]
    fn works_become_csl_items_with_the_bibtex_keys() {
        let json = csl_json(&answer_citing(article()), &ExportOptions::default());
        let items: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(
            items,
            serde_json::json!([
                {"id": "notes", "type": "document",
                 "title": "Notes <script>alert('x')</script> & {braces} 100% $5 #1 a_b ^ ~"},
                {"id": "marrowTelemetry98", "type": "article-journal",
                 "title": "Self-RAG and the Ålesund telemetry: 100% {sure} & more",
                 "author": [
                     {"family": "Marrow", "given": "Ann"},
                     {"family": "Ødegård", "given": "Bjørn"},
                     {"literal": "World Health Organization"}
                 ],
                 "issued": {"date-parts": [[1998, 3, 15]]},
                 "container-title": "Journal of Telemetry & Control",
                 "volume": "12", "issue": "3", "page": "117-129",
                 "publisher": "Nordic Press", "DOI": "10.1000/xyz_1",
                 "URL": "https://example.org/a_b?c=1&d=2"}
            ])
        );
        let bib = crate::bibtex(&answer_citing(article()), &ExportOptions::default());
        for key in ["notes", "marrowTelemetry98"] {
            assert!(bib.contains(&format!("{{{key},\n")), "{bib}");
        }
    }

    #[test]
    fn every_kind_of_work_has_its_csl_type_and_a_year_alone_is_one_part() {
        for (kind, expected) in [
            (WorkType::JournalArticle, "article-journal"),
            (WorkType::ConferencePaper, "paper-conference"),
            (WorkType::Book, "book"),
            (WorkType::Chapter, "chapter"),
            (WorkType::Thesis, "thesis"),
            (WorkType::Report, "report"),
            (WorkType::WebPage, "webpage"),
            (WorkType::Other, "document"),
        ] {
            let mut work = article();
            work.kind = Some(Sourced::new(kind, selfrag_works::FieldSource::Person));
            work.date = Some(Sourced::new(
                selfrag_works::WorkDate::year(2004),
                selfrag_works::FieldSource::Person,
            ));
            work.url = None;
            let json = csl_json(&answer_citing(work), &ExportOptions::default());
            let items: serde_json::Value = serde_json::from_str(&json).unwrap();
            assert_eq!(items[1]["type"], expected);
            assert_eq!(
                items[1]["issued"],
                serde_json::json!({"date-parts": [[2004]]})
            );
            // An arXiv preprint without an address links to arXiv.
            assert_eq!(items[1]["URL"], "https://arxiv.org/abs/2310.11511");
        }
        let none = csl_json(
            &test_answer::answer(),
            &ExportOptions {
                only_supported: true,
                ..ExportOptions::default()
            },
        );
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&none)
                .unwrap()
                .as_array()
                .map(Vec::len),
            Some(1)
        );
    }
}
