//! What a file says about the work it holds, as a [`Work`] whose fields come from
//! [`FieldSource::FileMetadata`]: the readers' shared rules for metadata values (a placeholder
//! title such as "untitled" or the file's own name is no title, "Administrator" is no author),
//! author lists as metadata writes them (`Marrow, Ann; Ødegård, Bo`, `Ann Marrow and Bo
//! Ødegård`), dates, the XMP packet of a PDF, and [`combined`], which puts a document's record
//! together from a first-page guess, the identifiers in its first pages and its metadata, the
//! better source winning each field.
//!
//! Each format's reader finds the values (PDF: `pdf.rs`, DOCX: `docx.rs`, HTML: `html.rs`,
//! Markdown front matter: `text.rs`); this module decides what they are worth.

use std::collections::HashMap;
use std::path::Path;

use quick_xml::XmlVersion;
use quick_xml::events::Event;
use quick_xml::name::ResolveResult;
use quick_xml::reader::NsReader;
use selfrag_works::identifiers::{self, normalise_doi};
use selfrag_works::{Author, FieldSource, Sourced, Work, WorkDate, WorkType};

use super::docx::entity;
use super::{MAX_TITLE_CHARS, clean_text, cut_chars};

/// How many characters of a single-page document's text are searched for identifiers: about
/// the first two pages of a paper, where its DOI, arXiv stamp or ISBN is printed.
pub(super) const IDENTIFIER_SEARCH_CHARS: usize = 8_000;

/// The most authors one record keeps (a large physics collaboration lists a few thousand; the
/// record goes over the worker's pipe and into the library with every document).
pub(super) const MAX_AUTHORS: usize = 1_000;

/// The most characters of one author's name.
const MAX_NAME_CHARS: usize = 256;

/// The most characters of a URL; every other text field is cut to [`MAX_TITLE_CHARS`].
const MAX_URL_CHARS: usize = 2_048;

/// The most bytes of a PDF's XMP packet that are read (a packet is a few kilobytes; past this
/// it is not metadata).
pub(super) const MAX_XMP_BYTES: u64 = 4 << 20;

/// A value from the file's own metadata.
pub(super) fn from_file<T>(value: T) -> Sourced<T> {
    Sourced::new(value, FieldSource::FileMetadata)
}

/// The document's record: a first-page `guess`, under the identifiers found in `head` (the
/// text of its first pages), under what the file's `metadata` says. Merged from the least to
/// the most trusted source, so each field keeps the best one's value.
pub(super) fn combined(guess: Work, head: &str, metadata: Work) -> Work {
    let mut work = guess;
    work.merge(identifiers::in_text(cut_chars(
        head,
        IDENTIFIER_SEARCH_CHARS,
    )));
    work.merge(metadata);
    work
}

/// `work` with every text cut to a length a record can carry: what the worker answers.
pub(super) fn within_limits(mut work: Work) -> Work {
    fn cut(field: &mut Option<Sourced<String>>, max: usize) {
        if let Some(value) = field {
            value.value = cut_chars(&value.value, max).trim_end().to_string();
        }
    }
    for field in [
        &mut work.title,
        &mut work.container,
        &mut work.volume,
        &mut work.issue,
        &mut work.pages,
        &mut work.publisher,
        &mut work.doi,
        &mut work.arxiv,
        &mut work.isbn,
        &mut work.citation_key,
    ] {
        cut(field, MAX_TITLE_CHARS);
    }
    cut(&mut work.url, MAX_URL_CHARS);
    if let Some(authors) = &mut work.authors {
        authors.value.truncate(MAX_AUTHORS);
        for author in &mut authors.value {
            match author {
                Author::Person { family, given } => {
                    *family = cut_chars(family, MAX_NAME_CHARS).to_string();
                    *given = cut_chars(given, MAX_NAME_CHARS).to_string();
                }
                Author::Organisation { name } => {
                    *name = cut_chars(name, MAX_NAME_CHARS).to_string();
                }
            }
        }
    }
    work
}

/// Control characters removed, runs of white space made one space, trimmed, and cut to
/// [`MAX_TITLE_CHARS`] (a hostile file's "title" may be megabytes).
pub(super) fn tidy_value(value: &str) -> String {
    let value = cut_chars(value, MAX_TITLE_CHARS * 4);
    let words: Vec<&str> = value.split_whitespace().collect();
    let joined = clean_text(&words.join(" ")).into_owned();
    cut_chars(&joined, MAX_TITLE_CHARS).trim().to_string()
}

/// A value that says something: tidied, `None` when empty.
pub(super) fn text_value(value: &str) -> Option<String> {
    let value = tidy_value(value);
    (!value.is_empty()).then_some(value)
}

/// Prefixes that Office's PDF printer puts before a document's file name.
const OFFICE_PREFIXES: [&str; 4] = [
    "microsoft word - ",
    "microsoft powerpoint - ",
    "microsoft excel - ",
    "microsoft word-",
];

/// Extensions that make a short "title" a file name (`paper.dvi`, `Final report.doc`).
const FILE_EXTENSIONS: [&str; 24] = [
    "pdf", "doc", "docx", "rtf", "odt", "tex", "dvi", "ps", "eps", "txt", "indd", "qxd", "qxp",
    "wpd", "pages", "ppt", "pptx", "xls", "xlsx", "html", "htm", "md", "odp", "key",
];

/// Titles that tools write when a document has none.
const PLACEHOLDER_TITLES: [&str; 18] = [
    "untitled",
    "untitled document",
    "no title",
    "title",
    "document",
    "slide",
    "presentation",
    "powerpoint presentation",
    "(anonymous)",
    "anonymous",
    "unknown",
    "none",
    "null",
    "blank",
    "default",
    "new document",
    "microsoft word",
    "(untitled)",
];

/// A metadata title worth keeping: tidied, the Office printer's `Microsoft Word - ` prefix
/// taken off; `None` for a placeholder ("untitled", "Slide 1", "Document1"), for the file's
/// own name (`path`'s, with or without its extension), for another file's name or a path
/// (`paper.dvi`, `C:\Users\…`), for a template's unexpanded TeX command (`\title`), and for a
/// value without a letter.
pub(super) fn usable_title(value: &str, path: &Path) -> Option<String> {
    let mut title = tidy_value(value);
    for prefix in OFFICE_PREFIXES {
        if title.len() >= prefix.len()
            && title.is_char_boundary(prefix.len())
            && title[..prefix.len()].eq_ignore_ascii_case(prefix)
        {
            title = title[prefix.len()..].trim().to_string();
        }
    }
    let lower = title.to_lowercase();
    if !title.chars().any(char::is_alphabetic) {
        return None;
    }
    let names_the_file = [path.file_name(), path.file_stem()]
        .into_iter()
        .flatten()
        .any(|name| name.to_string_lossy().to_lowercase() == lower);
    // "Final report.doc" is a file's name; "Wide Equations in asmeconf.cls" a title.
    let is_file_name = lower.split_whitespace().count() <= 3
        && lower
            .rsplit_once('.')
            .is_some_and(|(_, ext)| FILE_EXTENSIONS.contains(&ext));
    // A TeX command left unexpanded (`This is your \title`): a template's placeholder.
    let has_command = title
        .as_bytes()
        .windows(2)
        .any(|pair| pair[0] == b'\\' && pair[1].is_ascii_alphabetic());
    let is_path = lower.starts_with('/')
        || lower.starts_with("\\\\")
        || (lower.as_bytes().get(1..3) == Some(b":\\".as_slice()));
    // "Untitled-1", "Slide 3", "Document1": a placeholder and a number.
    let without_number = lower.trim_end_matches(|c: char| c.is_ascii_digit() || c == ' ');
    let without_number = without_number.trim_end_matches(['-', '_', ' ']);
    let placeholder = PLACEHOLDER_TITLES.contains(&lower.as_str())
        || PLACEHOLDER_TITLES.contains(&without_number);
    // "XeTeX output 2006.08.24:1913", "TeX output 1998.03.15:0930": what dvipdfm and xdvipdfmx
    // write when the document sets no title.
    let tex_output = lower.starts_with("tex output") || lower.starts_with("xetex output");
    (!(names_the_file || is_file_name || is_path || placeholder || has_command || tex_output))
        .then_some(title)
}

/// Names that tools write for the account that made a file, not its author.
const PLACEHOLDER_CREATORS: [&str; 26] = [
    "administrator",
    "admin",
    "user",
    "owner",
    "author",
    "unknown",
    "anonymous",
    "root",
    "guest",
    "default",
    "standard",
    "test",
    "pc",
    "home",
    "staff",
    "office",
    "system",
    "superuser",
    "microsoft office user",
    "windows user",
    "valued customer",
    "preferred customer",
    "registered user",
    "licensed user",
    "unknown author",
    "none",
];

/// Whether `name` (as metadata wrote it) could be a person or an organisation: not a
/// placeholder account ("Administrator", "user", "Microsoft Office User"), not a login name
/// (one word in lower case or with digits: `jsmith`, `user01`), not an address or markup.
fn is_real_creator(name: &str) -> bool {
    let lower = name.to_lowercase();
    let words: Vec<&str> = name.split_whitespace().collect();
    let login = words.len() == 1
        && (name.chars().any(|c| c.is_ascii_digit())
            || (name.is_ascii() && !name.chars().any(char::is_uppercase)));
    // Markup and macro debris (`\author`, `%%%#&12_`) is no name.
    let debris = name.contains([
        '@', '`', '%', '#', '_', '~', '\\', '{', '}', '<', '>', '|', '^', '$',
    ]);
    !(PLACEHOLDER_CREATORS.contains(&lower.as_str())
        || login
        || debris
        || !name.chars().any(char::is_alphabetic))
}

/// Whether a part of a comma-separated list looks like given names: one word, or initials
/// only (`J.`, `J. A.`, `JA`).
fn is_given_like(part: &str) -> bool {
    let words: Vec<&str> = part.split_whitespace().collect();
    words.len() == 1
        || words.iter().all(|w| {
            let letters: Vec<char> = w.chars().filter(|c| *c != '.').collect();
            letters.len() == 1 && letters[0].is_uppercase()
        })
}

/// The names in one piece of an author list that has no `;` and no ` and `, split at its
/// commas only where the commas separate names: `Marrow, Ann` and `van der Berg, Jan` are one
/// person (family, given), `Ann Marrow, Bo Ødegård` two, `Smith, J., Jones, K.` two.
fn split_commas(piece: &str) -> Vec<String> {
    let parts: Vec<&str> = piece
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    // "Given Family": two words at least, the first capitalised ("van der Berg" is a family
    // name on its own).
    let full_name = |p: &&str| {
        p.split_whitespace().count() >= 2 && p.chars().next().is_some_and(char::is_uppercase)
    };
    if parts.len() <= 1 {
        return parts.into_iter().map(str::to_string).collect();
    }
    if parts.iter().all(full_name) {
        return parts.into_iter().map(str::to_string).collect();
    }
    if parts.len() == 2 {
        return vec![format!("{}, {}", parts[0], parts[1])];
    }
    if parts.len().is_multiple_of(2) && parts.iter().skip(1).step_by(2).all(|p| is_given_like(p)) {
        return parts
            .chunks(2)
            .map(|pair| format!("{}, {}", pair[0], pair[1]))
            .collect();
    }
    parts.into_iter().map(str::to_string).collect()
}

/// The authors in one metadata value that lists them (a PDF's `/Author`, a DOCX `dc:creator`,
/// a front matter `author:`): split on `;`, else on ` and ` / ` & ` and the commas between
/// full names ([`split_commas`]); each name read by [`Author::parse_name`]; "et al." and
/// placeholder accounts ("Administrator") dropped.
pub(super) fn authors_in_list(value: &str) -> Vec<Author> {
    let value = tidy_value(value);
    let names: Vec<String> = if value.contains(';') {
        value.split(';').map(str::to_string).collect()
    } else {
        let value = value
            .replace(", and ", " and ")
            .replace(", & ", " and ")
            .replace(" & ", " and ");
        value.split(" and ").flat_map(split_commas).collect()
    };
    names
        .iter()
        .map(|name| name.trim())
        .filter(|name| {
            let lower = name.to_lowercase();
            lower != "et al." && lower != "et al" && is_real_creator(name)
        })
        .filter_map(Author::parse_name)
        .take(MAX_AUTHORS)
        .collect()
}

/// Authors each written on its own (a list of `<meta name="citation_author">`, XMP's
/// `rdf:Seq`): each one name, placeholders dropped; one value alone may still list several.
pub(super) fn authors_each(values: &[String]) -> Vec<Author> {
    if let [one] = values {
        return authors_in_list(one);
    }
    values
        .iter()
        .map(|name| tidy_value(name))
        .filter(|name| is_real_creator(name))
        .filter_map(|name| Author::parse_name(&name))
        .take(MAX_AUTHORS)
        .collect()
}

/// The authors field, where there is one.
pub(super) fn authors_field(authors: Vec<Author>) -> Option<Sourced<Vec<Author>>> {
    (!authors.is_empty()).then(|| from_file(authors))
}

/// A publication date as metadata writes it: `2019-05-03`, `2019/05/03`, `2019-05`, `2019`,
/// a timestamp, or any text with a year in it (`May 3, 2019`).
pub(super) fn parse_date(value: &str) -> Option<WorkDate> {
    let value = value.trim();
    WorkDate::parse_iso(&value.replace('/', "-")).or_else(|| WorkDate::find_year(value))
}

/// An ISBN as metadata writes it (`978-0-262-03384-8`), as digits, where its check digit is
/// right.
pub(super) fn parse_isbn(value: &str) -> Option<String> {
    let digits: String = value
        .chars()
        .filter(|c| c.is_ascii_digit() || matches!(c, 'x' | 'X'))
        .map(|c| c.to_ascii_uppercase())
        .collect();
    identifiers::isbn_is_valid(&digits).then_some(digits)
}

/// An arXiv id as metadata writes it (`arXiv:2310.11511v2`, `2310.11511`, `hep-th/9901001`),
/// without its version.
pub(super) fn parse_arxiv(value: &str) -> Option<String> {
    let value = value.trim();
    identifiers::find_arxiv(value).or_else(|| identifiers::find_arxiv(&format!("arXiv:{value}")))
}

/// The work's pages from its first and last: `117--129`, or `117` alone.
pub(super) fn page_range(first: Option<&str>, last: Option<&str>) -> Option<String> {
    let first = first.map(str::trim).filter(|p| !p.is_empty())?;
    Some(
        match last.map(str::trim).filter(|p| !p.is_empty() && *p != first) {
            Some(last) => format!("{first}--{last}"),
            None => first.to_string(),
        },
    )
}

/// A PDF's document information dictionary, as read by `pdf.rs`.
#[derive(Debug, Default)]
pub(super) struct PdfInfo {
    pub title: Option<String>,
    pub author: Option<String>,
    /// Some publishers write a `/doi` (or `/DOI`) entry.
    pub doi: Option<String>,
}

/// The record a PDF's Info dictionary and XMP packet give, XMP winning where both say
/// something (it is the newer, richer record). `path` names the file, whose name is no title.
pub(super) fn pdf_work(info: &PdfInfo, xmp: Option<&str>, path: &Path) -> Work {
    let mut work = Work {
        title: info
            .title
            .as_deref()
            .and_then(|t| usable_title(t, path))
            .map(from_file),
        authors: info
            .author
            .as_deref()
            .map(authors_in_list)
            .and_then(authors_field),
        doi: info.doi.as_deref().and_then(normalise_doi).map(from_file),
        ..Work::default()
    };
    if let Some(xmp) = xmp {
        work.merge(xmp_work(xmp, path));
    }
    work
}

const RDF: &str = "http://www.w3.org/1999/02/22-rdf-syntax-ns#";
const DC: &str = "http://purl.org/dc/elements/1.1/";
/// PRISM's namespaces differ by version (`…/basic/2.0/`, `…/basic/3.0/`).
const PRISM: &str = "http://prismstandard.org/namespaces/";
/// Where Elsevier's and other publishers' PDFs also put the DOI.
const PDFX: &str = "http://ns.adobe.com/pdfx/1.3/";
const CROSSMARK: &str = "http://crossref.org/crossmark/1.0/";

/// The vocabularies read from an XMP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Vocabulary {
    Dc,
    Prism,
    Pdfx,
    Crossmark,
}

fn vocabulary(namespace: &str) -> Option<Vocabulary> {
    if namespace == DC {
        Some(Vocabulary::Dc)
    } else if namespace.starts_with(PRISM) {
        Some(Vocabulary::Prism)
    } else if namespace == PDFX {
        Some(Vocabulary::Pdfx)
    } else if namespace == CROSSMARK {
        Some(Vocabulary::Crossmark)
    } else {
        None
    }
}

/// One property's values: its `rdf:li` items in order (each with its `xml:lang`), or its text.
type XmpValues = Vec<(Option<String>, String)>;

/// A property of an `rdf:Description` being read.
struct OpenProperty {
    /// `None` for a vocabulary not read here (its values are collected and dropped).
    key: Option<(Vocabulary, String)>,
    /// How many elements are open around it.
    depth: usize,
    values: XmpValues,
    text: String,
}

/// The properties of an XMP packet's `rdf:Description`s, by vocabulary and local name (the
/// first occurrence of each), written as elements or as attributes. A packet that stops
/// parsing gives what was read before.
fn xmp_properties(xml: &str) -> HashMap<(Vocabulary, String), XmpValues> {
    let mut properties: HashMap<(Vocabulary, String), XmpValues> = HashMap::new();
    let mut store = |key: (Vocabulary, String), values: XmpValues| {
        if !values.is_empty() {
            properties.entry(key).or_insert(values);
        }
    };
    let mut reader = NsReader::from_str(xml);
    reader.config_mut().expand_empty_elements = true;
    // Each open element: whether it is an rdf:Description.
    let mut open: Vec<bool> = Vec::new();
    let mut property: Option<OpenProperty> = None;
    let mut item: Option<(Option<String>, String)> = None;
    while let Ok((namespace, event)) = reader.read_resolved_event() {
        let namespace = match namespace {
            ResolveResult::Bound(ns) => Some(ns.0.to_string()),
            _ => None,
        };
        match event {
            Event::Start(e) => {
                let local = e.local_name().as_ref().to_string();
                let is_rdf = namespace.as_deref() == Some(RDF);
                let in_description = open.last().copied().unwrap_or(false);
                if property.is_some() {
                    if is_rdf && local == "li" {
                        let lang = e
                            .attributes()
                            .flatten()
                            .find(|a| a.key.as_ref() == "xml:lang")
                            .and_then(|a| a.normalized_value(XmlVersion::Implicit1_0).ok())
                            .map(|v| v.into_owned());
                        item = Some((lang, String::new()));
                    }
                } else if in_description {
                    property = Some(OpenProperty {
                        key: namespace
                            .as_deref()
                            .and_then(vocabulary)
                            .map(|v| (v, local.clone())),
                        depth: open.len(),
                        values: Vec::new(),
                        text: String::new(),
                    });
                } else if is_rdf && local == "Description" {
                    for attribute in e.attributes().flatten() {
                        let (resolved, name) = reader.resolver().resolve_attribute(attribute.key);
                        let ResolveResult::Bound(ns) = resolved else {
                            continue;
                        };
                        let (Some(vocabulary), Ok(value)) = (
                            vocabulary(ns.0),
                            attribute.normalized_value(XmlVersion::Implicit1_0),
                        ) else {
                            continue;
                        };
                        let key = (vocabulary, name.as_ref().to_string());
                        store(key, vec![(None, value.into_owned())]);
                    }
                }
                open.push(is_rdf && local == "Description");
            }
            Event::Text(t) => {
                let text = t.xml10_content();
                if let Some((_, item)) = &mut item {
                    item.push_str(&text);
                } else if let Some(property) = &mut property {
                    property.text.push_str(&text);
                }
            }
            Event::GeneralRef(r) => {
                let text = entity(&r);
                if let Some((_, item)) = &mut item {
                    item.push_str(&text);
                } else if let Some(property) = &mut property {
                    property.text.push_str(&text);
                }
            }
            Event::End(e) => {
                open.pop();
                if e.local_name().as_ref() == "li"
                    && let Some(property) = &mut property
                    && let Some(done) = item.take()
                {
                    property.values.push(done);
                }
                if property.as_ref().is_some_and(|p| p.depth == open.len())
                    && let Some(mut done) = property.take()
                {
                    if done.values.is_empty() && !done.text.trim().is_empty() {
                        done.values.push((None, std::mem::take(&mut done.text)));
                    }
                    if let Some(key) = done.key {
                        store(key, done.values);
                    }
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    properties
}

/// The record an XMP packet gives: `dc:title` (its default language first), `dc:creator`
/// (each item one author), `prism:coverDate` / `prism:publicationDate` / `dc:date`,
/// `prism:doi` (else `pdfx:doi`, `crossmark:DOI`, a `dc:identifier` holding a DOI),
/// `prism:publicationName`, `prism:volume`, `prism:number`, `prism:startingPage` and
/// `prism:endingPage`, `dc:publisher`, and the work type where `prism:aggregationType` says
/// "journal" or "book".
pub(super) fn xmp_work(xml: &str, path: &Path) -> Work {
    use Vocabulary::{Crossmark, Dc, Pdfx, Prism};
    let properties = xmp_properties(xml);
    let values = |vocabulary: Vocabulary, name: &str| -> Vec<String> {
        properties
            .get(&(vocabulary, name.to_string()))
            .map(|v| v.iter().map(|(_, text)| text.clone()).collect())
            .unwrap_or_default()
    };
    let first = |vocabulary: Vocabulary, name: &str| -> Option<String> {
        values(vocabulary, name)
            .into_iter()
            .find_map(|v| text_value(&v))
    };
    let title = properties
        .get(&(Dc, "title".to_string()))
        .and_then(|items| {
            let default = items
                .iter()
                .find(|(lang, _)| lang.as_deref() == Some("x-default"));
            default
                .into_iter()
                .chain(items)
                .find_map(|(_, t)| usable_title(t, path))
        });
    let date = [
        (Prism, "coverDate"),
        (Prism, "publicationDate"),
        (Dc, "date"),
    ]
    .into_iter()
    .find_map(|(v, name)| values(v, name).iter().find_map(|d| parse_date(d)));
    let doi = [
        (Prism, "doi"),
        (Pdfx, "doi"),
        (Crossmark, "DOI"),
        (Dc, "identifier"),
    ]
    .into_iter()
    .find_map(|(v, name)| values(v, name).iter().find_map(|d| normalise_doi(d)));
    let kind =
        first(Prism, "aggregationType").and_then(|kind| match kind.to_ascii_lowercase().as_str() {
            "journal" => Some(WorkType::JournalArticle),
            "book" => Some(WorkType::Book),
            _ => None,
        });
    Work {
        kind: kind.map(from_file),
        title: title.map(from_file),
        authors: authors_field(authors_each(&values(Dc, "creator"))),
        date: date.map(from_file),
        container: first(Prism, "publicationName").map(from_file),
        volume: first(Prism, "volume").map(from_file),
        issue: first(Prism, "number").map(from_file),
        pages: page_range(
            first(Prism, "startingPage").as_deref(),
            first(Prism, "endingPage").as_deref(),
        )
        .map(from_file),
        publisher: first(Dc, "publisher").map(from_file),
        doi: doi.map(from_file),
        ..Work::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(authors: &[Author]) -> Vec<(String, String)> {
        authors
            .iter()
            .map(|a| match a {
                Author::Person { family, given } => (family.clone(), given.clone()),
                Author::Organisation { name } => (name.clone(), String::new()),
            })
            .collect()
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(f, g)| (f.to_string(), g.to_string()))
            .collect()
    }

    #[test]
    fn author_lists_split_between_people_and_never_inside_one() {
        let cases: [(&str, &[(&str, &str)]); 8] = [
            ("Marrow, Ann", &[("Marrow", "Ann")]),
            (
                "van der Berg, Jan Pieter",
                &[("van der Berg", "Jan Pieter")],
            ),
            (
                "Marrow, Ann; Ødegård, Bo",
                &[("Marrow", "Ann"), ("Ødegård", "Bo")],
            ),
            (
                "Ann Marrow and Bo Ødegård",
                &[("Marrow", "Ann"), ("Ødegård", "Bo")],
            ),
            (
                "Ann Marrow, Bo Ødegård, and Cy Twombly",
                &[("Marrow", "Ann"), ("Ødegård", "Bo"), ("Twombly", "Cy")],
            ),
            (
                "Marrow, Ann and Ødegård, Bo",
                &[("Marrow", "Ann"), ("Ødegård", "Bo")],
            ),
            (
                "Smith, J., Jones, K. A.",
                &[("Smith", "J."), ("Jones", "K. A.")],
            ),
            ("Ann Marrow & Administrator", &[("Marrow", "Ann")]),
        ];
        for (list, expected) in cases {
            assert_eq!(names(&authors_in_list(list)), pairs(expected), "{list}");
        }
        for junk in [
            "Administrator",
            "user",
            "jsmith",
            "user01",
            "Microsoft Office User",
            "is your \\author",
            "{%%%} #&_ ~~~rue",
        ] {
            assert!(authors_in_list(junk).is_empty(), "{junk}");
        }
    }

    #[test]
    fn placeholder_and_file_name_titles_are_no_titles() {
        let path = Path::new("/papers/self-rag_final.pdf");
        for junk in [
            "untitled",
            "Untitled-1",
            "Slide 1",
            "Document1",
            "self-rag_final",
            "SELF-RAG_FINAL.PDF",
            "Microsoft Word - draft v3.doc",
            "paper.dvi",
            "C:\\Users\\ann\\paper",
            "This is your \\title",
            "  12 ",
            "XeTeX output 2006.08.24:1913",
            "TeX output 1998.03.15:0930",
        ] {
            assert_eq!(usable_title(junk, path), None, "{junk}");
        }
        assert_eq!(
            usable_title("Microsoft Word - Reflection  tokens\nat work", path).as_deref(),
            Some("Reflection tokens at work")
        );
        assert_eq!(
            usable_title("Self-RAG: Learning to Retrieve", path).as_deref(),
            Some("Self-RAG: Learning to Retrieve")
        );
        assert_eq!(
            usable_title("Wide Equations in asmeconf.tex", path).as_deref(),
            Some("Wide Equations in asmeconf.tex")
        );
    }

    #[test]
    fn dates_isbns_and_arxiv_ids_are_read_as_metadata_writes_them() {
        assert_eq!(
            parse_date("2019/05/03").map(|d| d.to_string()).as_deref(),
            Some("2019-05-03")
        );
        assert_eq!(
            parse_date("2019").map(|d| d.to_string()).as_deref(),
            Some("2019")
        );
        assert_eq!(parse_date("May 3, 2019").map(|d| d.year), Some(2019));
        assert_eq!(parse_date("n.d."), None);
        assert_eq!(
            parse_isbn("978-0-262-03384-8").as_deref(),
            Some("9780262033848")
        );
        assert_eq!(parse_isbn("978-0-262-03384-9"), None);
        assert_eq!(parse_arxiv("2310.11511v2").as_deref(), Some("2310.11511"));
        assert_eq!(
            parse_arxiv("arXiv:hep-th/9901001").as_deref(),
            Some("hep-th/9901001")
        );
        assert_eq!(
            page_range(Some("117"), Some("129")).as_deref(),
            Some("117--129")
        );
    }

    const XMP: &str = r#"<?xpacket begin="" id="W5M0MpCehiHzreSzNTczkc9d"?>
<x:xmpmeta xmlns:x="adobe:ns:meta/">
 <rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">
  <rdf:Description rdf:about="" xmlns:dc="http://purl.org/dc/elements/1.1/"
      xmlns:pr="http://prismstandard.org/namespaces/basic/2.0/"
      pr:volume="12" pr:startingPage="117">
   <dc:title><rdf:Alt>
     <rdf:li xml:lang="de">Knochenmark</rdf:li>
     <rdf:li xml:lang="x-default">Marrow &amp; bone</rdf:li>
   </rdf:Alt></dc:title>
   <dc:creator><rdf:Seq>
     <rdf:li>Ann Marrow</rdf:li><rdf:li>Ødegård, Bo</rdf:li>
   </rdf:Seq></dc:creator>
   <dc:date><rdf:Seq><rdf:li>1998-03-15</rdf:li></rdf:Seq></dc:date>
   <dc:identifier>doi:10.1000/XYZ.123</dc:identifier>
   <dc:publisher><rdf:Bag><rdf:li>Bone Press</rdf:li></rdf:Bag></dc:publisher>
   <pr:publicationName>Journal of Bones</pr:publicationName>
   <pr:number>3</pr:number>
   <pr:endingPage>129</pr:endingPage>
   <pr:aggregationType>journal</pr:aggregationType>
   <xmpMM:History xmlns:xmpMM="http://ns.adobe.com/xap/1.0/mm/"><rdf:Seq><rdf:li>
     <rdf:Description><dc:title>not this</dc:title></rdf:Description>
   </rdf:li></rdf:Seq></xmpMM:History>
  </rdf:Description>
 </rdf:RDF>
</x:xmpmeta>
<?xpacket end="w"?>"#;

    #[test]
    fn an_xmp_packet_gives_the_whole_record() {
        let work = xmp_work(XMP, Path::new("bones.pdf"));
        assert_eq!(work.title(), Some("Marrow & bone"));
        assert_eq!(
            names(work.authors()),
            pairs(&[("Marrow", "Ann"), ("Ødegård", "Bo")])
        );
        assert_eq!(
            work.date.as_ref().map(|d| d.value.to_string()).as_deref(),
            Some("1998-03-15")
        );
        assert_eq!(Work::text(&work.doi), Some("10.1000/xyz.123"));
        assert_eq!(Work::text(&work.container), Some("Journal of Bones"));
        assert_eq!(Work::text(&work.volume), Some("12"));
        assert_eq!(Work::text(&work.issue), Some("3"));
        assert_eq!(Work::text(&work.pages), Some("117--129"));
        assert_eq!(Work::text(&work.publisher), Some("Bone Press"));
        assert_eq!(work.kind(), WorkType::JournalArticle);
        assert_eq!(work.sources()[FieldSource::FileMetadata as usize], 10);
    }

    #[test]
    fn xmp_wins_over_the_info_dictionary_and_metadata_over_text_and_guess() {
        let info = PdfInfo {
            title: Some("Old title".into()),
            author: Some("Administrator".into()),
            doi: None,
        };
        let work = pdf_work(&info, Some(XMP), Path::new("bones.pdf"));
        assert_eq!(work.title(), Some("Marrow & bone"));
        let info_only = pdf_work(&info, None, Path::new("bones.pdf"));
        assert_eq!(info_only.title(), Some("Old title"));
        assert!(
            info_only.authors.is_none(),
            "a placeholder creator is no author"
        );

        let guess = Work {
            title: Some(Sourced::new("Guessed".into(), FieldSource::FirstPageGuess)),
            isbn: Some(Sourced::new("0".into(), FieldSource::FirstPageGuess)),
            ..Work::default()
        };
        let text = "doi: 10.5555/other and arXiv:2101.00001 ISBN 978-0-262-03384-8";
        let merged = combined(guess.clone(), text, info_only);
        assert_eq!(
            merged.title.as_ref().map(|t| t.source),
            Some(FieldSource::FileMetadata)
        );
        assert_eq!(Work::text(&merged.doi), Some("10.5555/other"));
        assert_eq!(
            merged.arxiv.as_ref().map(|a| a.source),
            Some(FieldSource::Identifier)
        );
        assert_eq!(Work::text(&merged.isbn), Some("9780262033848"));
        let merged = combined(guess, text, work);
        assert_eq!(Work::text(&merged.doi), Some("10.1000/xyz.123"));
        assert_eq!(
            merged.doi.as_ref().map(|a| a.source),
            Some(FieldSource::FileMetadata)
        );
    }
}
