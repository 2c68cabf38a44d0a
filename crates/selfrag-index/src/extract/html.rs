//! HTML: the visible text of the page, titled by `<title>`, with `<h1>`…`<h6>` as sections.
//!
//! Scripts, styles, templates and navigation are not part of what a person reads, so they never
//! reach a passage.
//!
//! The work the page holds is read from its `<meta>` tags: the Highwire `citation_*` tags that
//! publishers' and repositories' pages carry (Google Scholar reads them), else Dublin Core
//! (`DC.title`, `dc.creator`, `DCTERMS.date`, …); a page with neither is a web page titled by
//! its `<title>`.

use std::collections::HashMap;
use std::path::Path;

use dom_query::Document;
use encoding_rs::{Encoding, UTF_8};
use selfrag_works::identifiers::normalise_doi;
use selfrag_works::{Work, WorkType};

use super::metadata::{self, from_file, text_value};
use super::{ExtractedDocument, read_bytes, single_page};
use crate::IndexError;

/// Elements whose content is not reading matter.
const HIDDEN: &str = "head, script, style, noscript, template, nav, svg, iframe, object";

pub(super) fn extract(path: &Path) -> Result<ExtractedDocument, IndexError> {
    let bytes = read_bytes(path)?;
    let doc = Document::from(decode(&bytes).as_str());
    // The metadata first: reading the text removes the head.
    let page_title = page_title(&doc);
    let work = meta_work(&doc, page_title.as_deref(), path);
    let (title, text) = page_text(&doc);
    single_page(path, "HTML", title, text, work)
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
#[cfg(test)]
fn visible_text(html: &str) -> (Option<String>, String) {
    page_text(&Document::from(html))
}

/// [`visible_text`] of a parsed page. The hidden elements (and the head) are removed from
/// `doc`: read its `<meta>` tags first.
fn page_text(doc: &Document) -> (Option<String>, String) {
    let title = page_title(doc);
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
    (title, text)
}

/// The page's `<title>`, its white space made single spaces; `None` where it has none.
fn page_title(doc: &Document) -> Option<String> {
    let title = doc.select("title").text();
    let title = title.split_whitespace().collect::<Vec<_>>().join(" ");
    (!title.is_empty()).then_some(title)
}

/// The most `<meta>` tags read from one page (a publisher's page has a few dozen; a hostile one
/// could have millions).
const MAX_META_TAGS: usize = 5_000;

/// The page's `<meta name|property="…" content="…">` values, by lower-cased name, in order.
fn meta_tags(doc: &Document) -> HashMap<String, Vec<String>> {
    let mut tags: HashMap<String, Vec<String>> = HashMap::new();
    for node in doc
        .select("meta[content]")
        .nodes()
        .iter()
        .take(MAX_META_TAGS)
    {
        let Some(name) = node.attr("name").or_else(|| node.attr("property")) else {
            continue;
        };
        let Some(content) = node.attr("content") else {
            continue;
        };
        tags.entry(name.trim().to_ascii_lowercase())
            .or_default()
            .push(content.to_string());
    }
    tags
}

/// The work a page's `<meta>` tags describe: Highwire `citation_*` tags first, Dublin Core
/// (`DC.`, `dc.`, `DCTERMS.`) for what they leave out. Its type: a journal, conference, book,
/// thesis or report tag says which; a page with no `citation_*` tag is a web page, titled by
/// its Dublin Core title or its `<title>`.
fn meta_work(doc: &Document, page_title: Option<&str>, path: &Path) -> Work {
    let tags = meta_tags(doc);
    let all = |name: &str| tags.get(name).map(Vec::as_slice).unwrap_or_default();
    let first = |names: &[&str]| {
        names
            .iter()
            .flat_map(|name| all(name))
            .find_map(|value| text_value(value))
    };
    let dublin_core = |element: &str| {
        ["dc.", "dcterms."]
            .iter()
            .flat_map(|prefix| all(&format!("{prefix}{element}")))
            .map(String::as_str)
            .collect::<Vec<_>>()
    };
    let dc_first = |element: &str| dublin_core(element).into_iter().find_map(text_value);
    let highwire = tags.keys().any(|name| name.starts_with("citation_"));

    let title = [all("citation_title"), all("dc.title"), all("dcterms.title")]
        .into_iter()
        .flatten()
        .find_map(|t| metadata::usable_title(t, path))
        .or_else(|| {
            (!highwire)
                .then_some(page_title)
                .flatten()
                .and_then(|t| metadata::usable_title(t, path))
        });
    let mut authors = metadata::authors_each(all("citation_author"));
    if authors.is_empty() {
        // The older tag: every author in one, separated by `;`.
        authors = all("citation_authors")
            .iter()
            .flat_map(|list| metadata::authors_in_list(list))
            .collect();
    }
    if authors.is_empty() {
        let creators: Vec<String> = dublin_core("creator")
            .into_iter()
            .map(str::to_string)
            .collect();
        authors = metadata::authors_each(&creators);
    }
    let date = [
        "citation_publication_date",
        "citation_date",
        "citation_cover_date",
        "dc.date",
        "dcterms.date",
        "dcterms.issued",
        "dcterms.created",
        "citation_online_date",
    ]
    .iter()
    .flat_map(|name| all(name))
    .find_map(|d| metadata::parse_date(d));
    let doi = all("citation_doi")
        .iter()
        .chain(all("dc.identifier"))
        .chain(all("dcterms.identifier"))
        .find_map(|d| normalise_doi(d));
    let kinds = [
        ("citation_journal_title", WorkType::JournalArticle),
        ("citation_conference_title", WorkType::ConferencePaper),
        ("citation_inbook_title", WorkType::Chapter),
        ("citation_dissertation_institution", WorkType::Thesis),
        ("citation_technical_report_institution", WorkType::Report),
    ];
    let kind = kinds
        .iter()
        .find(|(tag, _)| first(&[tag]).is_some())
        .map(|(_, kind)| *kind)
        .or((!highwire).then_some(WorkType::WebPage));
    Work {
        kind: kind.map(from_file),
        title: title.map(from_file),
        authors: metadata::authors_field(authors),
        date: date.map(from_file),
        container: first(&[
            "citation_journal_title",
            "citation_conference_title",
            "citation_inbook_title",
        ])
        .map(from_file),
        volume: first(&["citation_volume"]).map(from_file),
        issue: first(&["citation_issue"]).map(from_file),
        pages: metadata::page_range(
            first(&["citation_firstpage"]).as_deref(),
            first(&["citation_lastpage"]).as_deref(),
        )
        .map(from_file),
        publisher: first(&[
            "citation_publisher",
            "citation_dissertation_institution",
            "citation_technical_report_institution",
        ])
        .or_else(|| dc_first("publisher"))
        .map(from_file),
        doi: doi.map(from_file),
        arxiv: all("citation_arxiv_id")
            .iter()
            .find_map(|id| metadata::parse_arxiv(id))
            .map(from_file),
        isbn: all("citation_isbn")
            .iter()
            .find_map(|isbn| metadata::parse_isbn(isbn))
            .map(from_file),
        url: first(&["citation_abstract_html_url"])
            .filter(|url| url.starts_with("https://") || url.starts_with("http://"))
            .map(from_file),
        ..Work::default()
    }
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

    fn extracted(name: &str, html: &str) -> ExtractedDocument {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        std::fs::write(&path, html).unwrap();
        extract(&path).unwrap()
    }

    /// Issue 45: the Highwire tags publishers' pages carry are the page's work, in order, above
    /// the Dublin Core tags beside them.
    #[test]
    fn highwire_tags_describe_the_work_and_win_over_dublin_core() {
        use selfrag_works::{Author, FieldSource};
        let document = extracted(
            "article.html",
            r#"<html><head>
            <meta name="citation_title" content="Sleeping Otters Hold Hands">
            <meta name="DC.title" content="The Dublin Core title">
            <meta name="citation_author" content="Marrow, Ann">
            <meta name="citation_author" content="Bo Ødegård">
            <meta name="citation_author" content="Cy Twombly">
            <meta name="DC.creator" content="Someone Else">
            <meta name="citation_online_date" content="2019/01/02">
            <meta name="citation_publication_date" content="2019/05/03">
            <meta name="citation_journal_title" content="Journal of Marine Mammals">
            <meta name="citation_volume" content="12"><meta name="citation_issue" content="3">
            <meta name="citation_firstpage" content="117"><meta name="citation_lastpage" content="129">
            <meta name="citation_doi" content="https://doi.org/10.1000/OTTERS.19">
            <meta name="citation_publisher" content="Bone Press">
            <meta name="citation_isbn" content="978-0-262-03384-8">
            <meta name="citation_arxiv_id" content="2101.00001v3">
            <meta name="citation_pdf_url" content="https://example.org/otters.pdf">
            <meta name="citation_abstract_html_url" content="https://example.org/otters">
            </head><body><p>Otters hold hands while they sleep.</p></body></html>"#,
        );
        let work = &document.work;
        assert_eq!(
            document.title, "Sleeping Otters Hold Hands",
            "not the file name"
        );
        assert_eq!(work.title(), Some("Sleeping Otters Hold Hands"));
        let families: Vec<&str> = work.authors().iter().map(Author::family).collect();
        assert_eq!(families, ["Marrow", "Ødegård", "Twombly"]);
        assert_eq!(
            work.date.as_ref().map(|d| d.value.to_string()).as_deref(),
            Some("2019-05-03"),
            "the publication date, the online date only as a last resort"
        );
        assert_eq!(work.kind(), WorkType::JournalArticle);
        assert_eq!(
            Work::text(&work.container),
            Some("Journal of Marine Mammals")
        );
        assert_eq!(Work::text(&work.volume), Some("12"));
        assert_eq!(Work::text(&work.issue), Some("3"));
        assert_eq!(Work::text(&work.pages), Some("117--129"));
        assert_eq!(Work::text(&work.doi), Some("10.1000/otters.19"));
        assert_eq!(Work::text(&work.publisher), Some("Bone Press"));
        assert_eq!(Work::text(&work.isbn), Some("9780262033848"));
        assert_eq!(Work::text(&work.arxiv), Some("2101.00001"));
        assert_eq!(Work::text(&work.url), Some("https://example.org/otters"));
        assert_eq!(work.sources()[FieldSource::FileMetadata as usize], 13);

        // The online date where it is the only one.
        let online = extracted(
            "online.html",
            r#"<html><head><meta name="citation_title" content="T">
            <meta name="citation_online_date" content="2018-11-30"></head><body><p>Text.</p></body></html>"#,
        );
        assert_eq!(online.work.year(), Some(2018));

        // The type follows the tag that names the container.
        for (tag, kind) in [
            ("citation_conference_title", WorkType::ConferencePaper),
            ("citation_dissertation_institution", WorkType::Thesis),
            ("citation_technical_report_institution", WorkType::Report),
        ] {
            let html = format!(
                r#"<html><head><meta name="citation_title" content="T"><meta name="{tag}" content="Where">
                </head><body><p>Text.</p></body></html>"#
            );
            assert_eq!(extracted("page.html", &html).work.kind(), kind, "{tag}");
        }
    }

    /// Issue 45: a page with Dublin Core tags only (any case, `DC.` or `DCTERMS.`), or none, is
    /// a web page.
    #[test]
    fn a_page_with_dublin_core_only_is_a_web_page() {
        let document = extracted(
            "page.html",
            r#"<html><head><title>Site | A page</title>
            <meta name="dc.title" content="Otters at Rest">
            <meta name="DC.Creator" content="Ann Marrow">
            <meta name="DCTERMS.date" content="2021-07-01">
            <meta name="DC.identifier" content="doi:10.1000/rest.7">
            <meta name="dc.publisher" content="Otter Society">
            </head><body><p>Text.</p></body></html>"#,
        );
        let work = &document.work;
        assert_eq!(
            document.title, "Site | A page",
            "the page's own title stays its name"
        );
        assert_eq!(work.title(), Some("Otters at Rest"));
        assert_eq!(work.kind(), WorkType::WebPage);
        assert_eq!(work.authors().len(), 1);
        assert_eq!(work.year(), Some(2021));
        assert_eq!(Work::text(&work.doi), Some("10.1000/rest.7"));
        assert_eq!(Work::text(&work.publisher), Some("Otter Society"));

        let plain = extracted(
            "plain.html",
            "<html><head><title>Notes on otters</title></head><body><p>Text.</p></body></html>",
        );
        assert_eq!(plain.work.title(), Some("Notes on otters"));
        assert_eq!(plain.work.kind(), WorkType::WebPage);
    }
}
