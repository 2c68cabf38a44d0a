//! Bibliography files the person points to: BibTeX and BibLaTeX (`.bib`, parsed by the
//! `biblatex` crate, which decodes LaTeX accents and braces to Unicode) and CSL-JSON (`.json`,
//! what Zotero, Better BibTeX and pandoc write). Each entry becomes a [`Work`] whose fields come
//! from [`FieldSource::BibliographyFile`] and whose citation key is the entry's key, with the
//! files its `file` field names.
//!
//! The `file` field is read in the forms the reference managers write: Zotero's
//! `Description:path:mime/type` records and plain paths, JabRef's `:path:PDF` with `\:` and
//! `\\` escapes, and Mendeley's `:C$\backslash$:/…pdf:pdf`; several records are separated by
//! `;`. A relative path is found from the `.bib` file's folder. CSL-JSON has no file field: a
//! CSL-JSON entry comes without files, and matching it to a library's documents (by DOI or
//! title) is the caller's job. The CSL-JSON reading serves one item too (`csl_item_work`):
//! the record doi.org answers for a DOI (see `lookup`).

use std::path::{Path, PathBuf};

use biblatex::{ChunksExt, DateValue, Entry, EntryType, PermissiveType, Person};
use selfrag_works::{Author, FieldSource, Sourced, Work, WorkDate, WorkType, identifiers};
use serde::Deserialize;

use crate::{ReferencesError, text};

/// One entry of a bibliography file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BibliographyEntry {
    pub work: Work,
    /// The files the entry names, absolute where the `.bib` file's folder made them so.
    pub files: Vec<PathBuf>,
}

/// Reads the BibTeX, BibLaTeX or CSL-JSON file at `path`: by its extension (`.bib`,
/// `.bibtex`, `.biblatex`; `.json`), else by its first character.
pub fn read_bibliography(path: &Path) -> Result<Vec<BibliographyEntry>, ReferencesError> {
    let bytes = std::fs::read(path).map_err(|source| ReferencesError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let source = decode(&bytes);
    let extension = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match extension.as_deref() {
        Some("bib" | "bibtex" | "biblatex") => read_bibtex(path, &source),
        Some("json") => read_csl_json(path, &source),
        _ => match source.trim_start().chars().next() {
            Some('[' | '{') => read_csl_json(path, &source),
            Some('@' | '%') => read_bibtex(path, &source),
            _ => Err(ReferencesError::UnknownBibliographyFormat {
                path: path.to_path_buf(),
            }),
        },
    }
}

/// The file's text: UTF-8 (without a byte-order mark), else Windows-1252, the encoding older
/// tools (JabRef's ISO 8859-1 default among them) wrote `.bib` files in.
fn decode(bytes: &[u8]) -> String {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    match std::str::from_utf8(bytes) {
        Ok(text) => text.to_string(),
        Err(_) => encoding_rs::WINDOWS_1252.decode(bytes).0.into_owned(),
    }
}

/// The line (from 1) of byte `offset` in `source`.
fn line_of(source: &str, offset: usize) -> usize {
    let offset = offset.min(source.len());
    source.as_bytes()[..offset]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

fn sourced<T>(value: T) -> Sourced<T> {
    Sourced::new(value, FieldSource::BibliographyFile)
}

// ---------------------------------------------------------------------------------------------
// BibTeX and BibLaTeX
// ---------------------------------------------------------------------------------------------

fn read_bibtex(path: &Path, source: &str) -> Result<Vec<BibliographyEntry>, ReferencesError> {
    let bibliography =
        biblatex::Bibliography::parse(source).map_err(|e| ReferencesError::Bibliography {
            path: path.to_path_buf(),
            line: Some(line_of(source, e.span.start)),
            message: e.kind.to_string(),
        })?;
    let folder = path.parent().unwrap_or(Path::new(""));
    Ok(bibliography
        .iter()
        .map(|entry| BibliographyEntry {
            work: bibtex_work(entry),
            files: entry
                .get("file")
                .map(|chunks| {
                    // The file field as written: the parser's own unescaping cannot tell a
                    // JabRef `\:` from a record's `:`.
                    let raw = source
                        .get(chunks.span())
                        .map_or_else(|| chunks.format_verbatim(), str::to_string);
                    file_field(&raw)
                        .into_iter()
                        .map(|file| resolve_file(folder, &file))
                        .collect()
                })
                .unwrap_or_default(),
        })
        .collect())
}

/// A field as text: braces gone, accents decoded, case kept, white space made single.
fn field(entry: &Entry, name: &str) -> Option<String> {
    entry
        .get(name)
        .and_then(|chunks| text::clean(&chunks.format_verbatim()))
}

fn first_field(entry: &Entry, names: &[&str]) -> Option<String> {
    names.iter().find_map(|name| field(entry, name))
}

fn bibtex_work(entry: &Entry) -> Work {
    let kind = bibtex_type(&entry.entry_type);
    let container = first_field(entry, &["journaltitle", "journal", "booktitle"]);
    let publisher = first_field(
        entry,
        &["publisher", "institution", "school", "organization"],
    );
    let eprint_is_arxiv = first_field(entry, &["eprinttype", "archiveprefix"])
        .is_some_and(|t| t.eq_ignore_ascii_case("arxiv"));
    let arxiv = field(entry, "eprint")
        .filter(|_| eprint_is_arxiv)
        .and_then(|id| identifiers::find_arxiv(&format!("arXiv:{id}")))
        .or_else(|| {
            ["journal", "journaltitle", "note", "howpublished", "url"]
                .iter()
                .filter_map(|name| field(entry, name))
                .find_map(|text| identifiers::find_arxiv(&text))
        });
    Work {
        kind: Some(sourced(kind)),
        title: field(entry, "title").map(sourced),
        authors: Some(bibtex_authors(entry))
            .filter(|a| !a.is_empty())
            .map(sourced),
        date: bibtex_date(entry).map(sourced),
        container: container.map(sourced),
        volume: field(entry, "volume").map(sourced),
        issue: first_field(entry, &["number", "issue"]).map(sourced),
        pages: field(entry, "pages")
            .and_then(|p| text::pages(&p))
            .map(sourced),
        publisher: publisher.map(sourced),
        doi: field(entry, "doi")
            .and_then(|d| identifiers::normalise_doi(&d))
            .map(sourced),
        arxiv: arxiv.map(sourced),
        isbn: field(entry, "isbn")
            .and_then(|i| text::isbn(&i))
            .map(sourced),
        url: field(entry, "url").map(sourced),
        citation_key: text::clean(&entry.key).map(sourced),
        zotero: None,
    }
}

fn bibtex_type(kind: &EntryType) -> WorkType {
    match kind {
        EntryType::Article => WorkType::JournalArticle,
        EntryType::InProceedings => WorkType::ConferencePaper,
        EntryType::Book | EntryType::MvBook | EntryType::Collection | EntryType::MvCollection => {
            WorkType::Book
        }
        EntryType::InBook
        | EntryType::InCollection
        | EntryType::BookInBook
        | EntryType::SuppBook
        | EntryType::SuppCollection => WorkType::Chapter,
        EntryType::MastersThesis | EntryType::PhdThesis | EntryType::Thesis => WorkType::Thesis,
        EntryType::TechReport | EntryType::Report => WorkType::Report,
        EntryType::Online => WorkType::WebPage,
        EntryType::Unknown(name) if matches!(name.as_str(), "www" | "webpage") => WorkType::WebPage,
        _ => WorkType::Other,
    }
}

/// The authors in order; where there are none, the editors.
fn bibtex_authors(entry: &Entry) -> Vec<Author> {
    let people = |persons: Vec<Person>| -> Vec<Author> {
        persons.into_iter().filter_map(bibtex_person).collect()
    };
    let authors = entry.author().map(people).unwrap_or_default();
    if !authors.is_empty() {
        return authors;
    }
    entry
        .editors()
        .unwrap_or_default()
        .into_iter()
        .map(|(persons, _)| people(persons))
        .find(|editors| !editors.is_empty())
        .unwrap_or_default()
}

/// A parsed name as an author: a name with spaces in one brace group and nothing else
/// (`{World Health Organization}`) is an organisation's; `and others` is no one.
fn bibtex_person(person: Person) -> Option<Author> {
    let family = text::clean(&person.name)?;
    let given = text::clean(&person.given_name).unwrap_or_default();
    let prefix = text::clean(&person.prefix);
    let suffix = text::clean(&person.suffix);
    if given.is_empty() && prefix.is_none() && suffix.is_none() {
        if family == "others" {
            return None;
        }
        if family.contains(' ') {
            return Some(Author::Organisation { name: family });
        }
    }
    let family = [prefix, Some(family), suffix]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(" ");
    Some(Author::person(family, given))
}

/// The date from `date`, or `year` and `month`; a year found in the text of either where it
/// is not a date (`1998a`, `in press 2024`).
fn bibtex_date(entry: &Entry) -> Option<WorkDate> {
    match entry.date() {
        Ok(PermissiveType::Typed(date)) => {
            let at = match date.value {
                DateValue::At(at) | DateValue::After(at) | DateValue::Before(at) => at,
                DateValue::Between(start, _) => start,
            };
            // The parser counts months and days from zero.
            let month = at.month.map(|m| m + 1).filter(|m| (1..=12).contains(m));
            Some(WorkDate {
                year: at.year,
                month,
                day: month.and(at.day.map(|d| d + 1)),
            })
        }
        _ => first_field(entry, &["date", "year"]).and_then(|y| WorkDate::find_year(&y)),
    }
}

/// The files of a `file` field as written, in order.
fn file_field(raw: &str) -> Vec<String> {
    // Mendeley writes a backslash as `$\backslash$` and escapes other characters LaTeX's way
    // (`\~{}` is `~`, `\_` is `_`).
    let raw = raw.replace("$\\backslash$", "\\");
    split_unescaped(&raw, ';')
        .into_iter()
        .filter_map(|record| file_record(&record))
        .collect()
}

/// The path of one record: `Description:path:type` (Zotero, JabRef, Mendeley) or a plain
/// path (Better BibTeX); a Windows drive letter's colon, escaped or not, is part of the path.
fn file_record(record: &str) -> Option<String> {
    let parts = split_unescaped(record, ':');
    let path = match parts.len() {
        0 => return None,
        1 => parts[0].clone(),
        // A plain Windows path (`C:\papers\a.pdf`).
        2 if is_drive(&parts[0]) => format!("{}:{}", parts[0], parts[1]),
        2 => parts[1].clone(),
        // `Description:path:type`, the path holding an unescaped colon where there are more.
        n => parts[1..n - 1].join(":"),
    };
    let path = unescape(path.trim());
    (!path.is_empty()).then_some(path)
}

fn is_drive(part: &str) -> bool {
    let part = part.trim();
    part.len() == 1 && part.chars().all(|c| c.is_ascii_alphabetic())
}

/// `text` split at each `separator` not escaped by a backslash; the escapes are kept.
fn split_unescaped(text: &str, separator: char) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            let current = parts.last_mut();
            if let Some(current) = current {
                current.push(c);
                if let Some(next) = chars.next() {
                    current.push(next);
                }
            }
        } else if c == separator {
            parts.push(String::new());
        } else if let Some(current) = parts.last_mut() {
            current.push(c);
        }
    }
    parts
}

/// The escapes of a file path undone: `\:` → `:`, `\\` → `\`, and Mendeley's `\~{}` → `~`.
/// A backslash before a letter or digit is a Windows path's separator written unescaped
/// (`C:\papers\a.pdf`) and stays.
fn unescape(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        match (chars[i], chars.get(i + 1)) {
            ('\\', Some(next)) if !next.is_ascii_alphanumeric() => {
                out.push(*next);
                i += 2;
                if chars.get(i..i + 2) == Some(&['{', '}']) {
                    i += 2;
                }
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

/// A file's path from the `.bib` file's folder: absolute paths (a Windows drive path counts)
/// as they are; Mendeley's paths written without their leading `/` where that is where the
/// file is.
fn resolve_file(folder: &Path, file: &str) -> PathBuf {
    let path = PathBuf::from(file);
    let mut chars = file.chars();
    let drive =
        matches!((chars.next(), chars.next()), (Some(c), Some(':')) if c.is_ascii_alphabetic());
    if path.is_absolute() || drive {
        return path;
    }
    let beside = folder.join(&path);
    let rooted = Path::new("/").join(&path);
    if !beside.exists() && rooted.is_file() {
        rooted
    } else {
        beside
    }
}

// ---------------------------------------------------------------------------------------------
// CSL-JSON
// ---------------------------------------------------------------------------------------------

/// A CSL-JSON string that some writers give as a number (`"volume": 12`) or as a list of
/// strings (Crossref's `"ISBN": ["…", "…"]`: the first that has text counts).
#[derive(Deserialize)]
#[serde(untagged)]
enum CslText {
    Text(String),
    Integer(i64),
    Number(f64),
    List(Vec<CslText>),
}

impl CslText {
    fn text(&self) -> Option<String> {
        match self {
            Self::Text(t) => text::clean(t),
            Self::Integer(i) => Some(i.to_string()),
            Self::Number(n) => Some(n.to_string()),
            Self::List(items) => items.iter().find_map(Self::text),
        }
    }

    fn number(&self) -> Option<i64> {
        match self {
            Self::Text(t) => t.trim().parse().ok(),
            Self::Integer(i) => Some(*i),
            Self::Number(n) => Some(*n as i64),
            Self::List(items) => items.first().and_then(Self::number),
        }
    }
}

#[derive(Deserialize)]
struct CslName {
    family: Option<String>,
    given: Option<String>,
    literal: Option<String>,
    #[serde(rename = "non-dropping-particle")]
    non_dropping_particle: Option<String>,
    #[serde(rename = "dropping-particle")]
    dropping_particle: Option<String>,
    suffix: Option<String>,
}

#[derive(Deserialize)]
struct CslDate {
    /// A registry may leave a part out as `null` (`[[null]]`: no date known).
    #[serde(rename = "date-parts")]
    date_parts: Option<Vec<Vec<Option<CslText>>>>,
    raw: Option<String>,
    literal: Option<String>,
}

#[derive(Deserialize)]
struct CslItem {
    id: Option<CslText>,
    #[serde(rename = "citation-key")]
    citation_key: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
    title: Option<CslText>,
    author: Option<Vec<CslName>>,
    editor: Option<Vec<CslName>>,
    issued: Option<CslDate>,
    #[serde(rename = "container-title")]
    container_title: Option<CslText>,
    volume: Option<CslText>,
    issue: Option<CslText>,
    page: Option<CslText>,
    publisher: Option<CslText>,
    #[serde(rename = "DOI")]
    doi: Option<CslText>,
    #[serde(rename = "ISBN")]
    isbn: Option<CslText>,
    #[serde(rename = "URL")]
    url: Option<CslText>,
    note: Option<CslText>,
}

/// The work one CSL-JSON item describes (an object, as doi.org's content negotiation answers
/// for a DOI), its fields from [`FieldSource::BibliographyFile`] like a file's entries: the
/// caller marks them as its own source.
pub(crate) fn csl_item_work(json: &[u8]) -> Result<Work, serde_json::Error> {
    serde_json::from_slice::<CslItem>(json).map(csl_work)
}

fn read_csl_json(path: &Path, source: &str) -> Result<Vec<BibliographyEntry>, ReferencesError> {
    let items: Vec<CslItem> =
        serde_json::from_str(source).map_err(|e| ReferencesError::Bibliography {
            path: path.to_path_buf(),
            line: (e.line() > 0).then_some(e.line()),
            message: format!("not CSL JSON (an array of items): {e}"),
        })?;
    Ok(items
        .into_iter()
        .map(|item| BibliographyEntry {
            work: csl_work(item),
            files: Vec::new(),
        })
        .collect())
}

fn csl_work(item: CslItem) -> Work {
    let names = |names: Option<Vec<CslName>>| -> Vec<Author> {
        names
            .unwrap_or_default()
            .into_iter()
            .filter_map(csl_author)
            .collect()
    };
    let authors = Some(names(item.author))
        .filter(|a| !a.is_empty())
        .or_else(|| Some(names(item.editor)))
        .filter(|a| !a.is_empty());
    // Zotero's own export gives each item an id that is its address, not a key.
    let key = item
        .citation_key
        .as_deref()
        .and_then(text::clean)
        .or_else(|| item.id.as_ref().and_then(CslText::text))
        .filter(|k| !k.contains("://"));
    let url = item.url.as_ref().and_then(CslText::text);
    let arxiv = [url.clone(), item.note.as_ref().and_then(CslText::text)]
        .into_iter()
        .flatten()
        .find_map(|text| identifiers::find_arxiv(&text));
    Work {
        kind: Some(sourced(csl_type(item.kind.as_deref().unwrap_or_default()))),
        title: item.title.as_ref().and_then(CslText::text).map(sourced),
        authors: authors.map(sourced),
        date: item.issued.as_ref().and_then(csl_date).map(sourced),
        container: item
            .container_title
            .as_ref()
            .and_then(CslText::text)
            .map(sourced),
        volume: item.volume.as_ref().and_then(CslText::text).map(sourced),
        issue: item.issue.as_ref().and_then(CslText::text).map(sourced),
        pages: item
            .page
            .as_ref()
            .and_then(CslText::text)
            .and_then(|p| text::pages(&p))
            .map(sourced),
        publisher: item.publisher.as_ref().and_then(CslText::text).map(sourced),
        doi: item
            .doi
            .as_ref()
            .and_then(CslText::text)
            .and_then(|d| identifiers::normalise_doi(&d))
            .map(sourced),
        arxiv: arxiv.map(sourced),
        isbn: csl_isbn(item.isbn.as_ref()).map(sourced),
        url: url.map(sourced),
        citation_key: key.map(sourced),
        zotero: None,
    }
}

/// The first right ISBN of the item: one string, or each of a list (a print and an
/// electronic ISBN) in turn.
fn csl_isbn(isbn: Option<&CslText>) -> Option<String> {
    match isbn? {
        CslText::List(items) => items.iter().find_map(|i| csl_isbn(Some(i))),
        one => one.text().and_then(|i| text::isbn(&i)),
    }
}

fn csl_author(name: CslName) -> Option<Author> {
    let clean = |v: &Option<String>| v.as_deref().and_then(text::clean);
    if let Some(literal) = clean(&name.literal) {
        return Some(Author::Organisation { name: literal });
    }
    let family = clean(&name.family)?;
    let family = [
        clean(&name.non_dropping_particle),
        Some(family),
        clean(&name.suffix),
    ]
    .into_iter()
    .flatten()
    .collect::<Vec<_>>()
    .join(" ");
    let given = [clean(&name.given), clean(&name.dropping_particle)]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(" ");
    Some(Author::person(family, given))
}

fn csl_date(date: &CslDate) -> Option<WorkDate> {
    let from_parts = date
        .date_parts
        .as_ref()
        .and_then(|parts| parts.first())
        .and_then(|first| {
            let year = i32::try_from(first.first()?.as_ref()?.number()?).ok()?;
            let part = |i: usize, max: i64| {
                first
                    .get(i)
                    .and_then(Option::as_ref)
                    .and_then(CslText::number)
                    .filter(|n| (1..=max).contains(n))
                    .and_then(|n| u8::try_from(n).ok())
            };
            let month = part(1, 12);
            Some(WorkDate {
                year,
                month,
                day: month.and(part(2, 31)),
            })
        });
    from_parts
        .or_else(|| date.raw.as_deref().and_then(WorkDate::parse_iso))
        .or_else(|| {
            [date.raw.as_deref(), date.literal.as_deref()]
                .into_iter()
                .flatten()
                .find_map(WorkDate::find_year)
        })
}

fn csl_type(kind: &str) -> WorkType {
    match kind {
        "article-journal" => WorkType::JournalArticle,
        "paper-conference" => WorkType::ConferencePaper,
        "book" => WorkType::Book,
        "chapter" => WorkType::Chapter,
        "thesis" => WorkType::Thesis,
        "report" => WorkType::Report,
        "webpage" | "post-weblog" | "post" => WorkType::WebPage,
        _ => WorkType::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_records_of_each_tool_give_their_paths() {
        assert_eq!(
            file_field(
                "Full Text:files/12/a.pdf:application/pdf;Snapshot:files/13/b.html:text/html"
            ),
            ["files/12/a.pdf", "files/13/b.html"]
        );
        assert_eq!(
            file_field(r":C\:/Users/doe/papers/jab.pdf:PDF;:rel/o\;ther.pdf:PDF"),
            ["C:/Users/doe/papers/jab.pdf", "rel/o;ther.pdf"]
        );
        assert_eq!(
            file_field(r":C$\backslash$:/Users/roe/Mendeley Desktop/Roe\_2010.pdf:pdf"),
            ["C:/Users/roe/Mendeley Desktop/Roe_2010.pdf"]
        );
        assert_eq!(
            file_field("/home/me/Zotero/storage/AB/x.pdf;/home/me/y.pdf"),
            ["/home/me/Zotero/storage/AB/x.pdf", "/home/me/y.pdf"]
        );
        // Windows paths, escaped as JabRef writes them or not.
        assert_eq!(file_field(r"C:\papers\a.pdf"), [r"C:\papers\a.pdf"]);
        assert_eq!(file_field(r":C\:\\papers\\a.pdf:PDF"), [r"C:\papers\a.pdf"]);
        assert_eq!(
            file_field(r"Test:E:\some\folder\b.pdf:application/pdf"),
            [r"E:\some\folder\b.pdf"]
        );
        assert_eq!(file_field(r":a\~{}b\_c.pdf:pdf"), ["a~b_c.pdf"]);
    }

    #[test]
    fn lines_are_counted_from_one() {
        assert_eq!(line_of("a\nb\nc", 0), 1);
        assert_eq!(line_of("a\nb\nc", 2), 2);
        assert_eq!(line_of("a\nb\nc", 99), 3);
    }
}
