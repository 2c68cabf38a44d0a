//! The work record: its fields, where each came from, and the merge that keeps the best source's
//! value of each.

use serde::{Deserialize, Serialize};

/// Where a field's value came from, from the least to the most trusted: [`Work::merge`] keeps
/// the value of the highest, so the person's own edit outranks every source the app reads.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub enum FieldSource {
    /// Read off the first page's layout (the largest text near the top as the title): shown
    /// as a guess.
    #[default]
    FirstPageGuess,
    /// An identifier (DOI, arXiv id, ISBN) found in the text of the first pages.
    Identifier,
    /// The file's own metadata: PDF Info and XMP, DOCX core properties, HTML `citation_*` and
    /// Dublin Core tags.
    FileMetadata,
    /// A registry's record of the work's DOI (Crossref, DataCite, through doi.org) or arXiv id
    /// (arXiv's API), looked up where the person turned look-ups on: above what the file says
    /// of itself, below the person's own bibliography.
    Lookup,
    /// A BibTeX, BibLaTeX or CSL-JSON file the person pointed to.
    BibliographyFile,
    /// A reference manager's library (Zotero).
    ReferenceManager,
    /// The person's own edit in the app.
    Person,
}

impl FieldSource {
    /// Every source, from the least to the most trusted.
    pub const ALL: [Self; 7] = [
        Self::FirstPageGuess,
        Self::Identifier,
        Self::FileMetadata,
        Self::Lookup,
        Self::BibliographyFile,
        Self::ReferenceManager,
        Self::Person,
    ];

    /// How the UI and `selfrag library list` name it.
    pub fn label(self) -> &'static str {
        match self {
            Self::FirstPageGuess => "guessed from the first page",
            Self::Identifier => "identifier in the text",
            Self::FileMetadata => "the file's metadata",
            Self::Lookup => "looked up by its DOI/arXiv id",
            Self::BibliographyFile => "bibliography file",
            Self::ReferenceManager => "Zotero",
            Self::Person => "your edit",
        }
    }
}

/// A value and where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct Sourced<T> {
    pub value: T,
    pub source: FieldSource,
}

impl<T> Sourced<T> {
    pub fn new(value: T, source: FieldSource) -> Self {
        Self { value, source }
    }
}

/// What kind of work a document holds: the types a bibliography distinguishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub enum WorkType {
    JournalArticle,
    ConferencePaper,
    Book,
    /// A chapter or section of a book (an edited volume's contribution).
    Chapter,
    Thesis,
    Report,
    WebPage,
    #[default]
    Other,
}

impl WorkType {
    pub const ALL: [Self; 8] = [
        Self::JournalArticle,
        Self::ConferencePaper,
        Self::Book,
        Self::Chapter,
        Self::Thesis,
        Self::Report,
        Self::WebPage,
        Self::Other,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Self::JournalArticle => "Journal article",
            Self::ConferencePaper => "Conference paper",
            Self::Book => "Book",
            Self::Chapter => "Book chapter",
            Self::Thesis => "Thesis",
            Self::Report => "Report",
            Self::WebPage => "Web page",
            Self::Other => "Other",
        }
    }
}

/// One author (or editor, where a work has no authors): a person's family and given names, or
/// an organisation's one name, which is never split.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub enum Author {
    Person {
        family: String,
        /// Empty where only the family name is known.
        given: String,
    },
    Organisation {
        name: String,
    },
}

impl Author {
    /// A person from their names as they are written.
    pub fn person(family: impl Into<String>, given: impl Into<String>) -> Self {
        Self::Person {
            family: family.into(),
            given: given.into(),
        }
    }

    /// A person from one display name: `Family, Given` or `Given Family` (the last word is the
    /// family name, with its lower-case particles: "Ludwig van Beethoven" → van Beethoven).
    pub fn parse_name(name: &str) -> Option<Self> {
        let name = name.split_whitespace().collect::<Vec<_>>().join(" ");
        if name.is_empty() {
            return None;
        }
        if let Some((family, given)) = name.split_once(',') {
            return Some(Self::person(family.trim(), given.trim()));
        }
        let words: Vec<&str> = name.split(' ').collect();
        let mut family_from = words.len() - 1;
        while family_from > 1
            && words[family_from - 1]
                .chars()
                .next()
                .is_some_and(char::is_lowercase)
        {
            family_from -= 1;
        }
        Some(Self::person(
            words[family_from..].join(" "),
            words[..family_from].join(" "),
        ))
    }

    /// The name a citation gives: the family name, or the organisation's.
    pub fn family(&self) -> &str {
        match self {
            Self::Person { family, .. } => family,
            Self::Organisation { name } => name,
        }
    }

    /// "Given Family", or the organisation's name.
    pub fn display(&self) -> String {
        match self {
            Self::Person { family, given } if given.is_empty() => family.clone(),
            Self::Person { family, given } => format!("{given} {family}"),
            Self::Organisation { name } => name.clone(),
        }
    }
}

/// A publication date: a year at least.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct WorkDate {
    pub year: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "typescript", ts(optional))]
    pub month: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "typescript", ts(optional))]
    pub day: Option<u8>,
}

impl WorkDate {
    pub fn year(year: i32) -> Self {
        Self {
            year,
            month: None,
            day: None,
        }
    }

    /// `1998`, `1998-03`, `1998-03-15`, `1998-00-00` (a zero month or day is unknown), or a
    /// timestamp that starts so (`2004-05-01T10:00:00Z`). `None` without a four-digit year.
    pub fn parse_iso(text: &str) -> Option<Self> {
        let text = text.trim();
        let date = text.split(['T', ' ']).next()?;
        let mut parts = date.split('-');
        let year = parts.next()?;
        if year.len() != 4 || !year.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let part = |p: Option<&str>, max: u8| {
            p.and_then(|p| p.parse::<u8>().ok())
                .filter(|n| (1..=max).contains(n))
        };
        let month = part(parts.next(), 12);
        let day = month.and(part(parts.next(), 31));
        Some(Self {
            year: year.parse().ok()?,
            month,
            day,
        })
    }

    /// The first plausible year (1400–2199) written anywhere in `text`: "Spring 1998",
    /// "March 15, 1998", "D:19980315…" is not read (use [`Self::parse_iso`] for formats).
    pub fn find_year(text: &str) -> Option<Self> {
        let bytes = text.as_bytes();
        (0..bytes.len().saturating_sub(3)).find_map(|i| {
            let window = &bytes[i..i + 4];
            let bounded = (i == 0 || !bytes[i - 1].is_ascii_digit())
                && bytes.get(i + 4).is_none_or(|b| !b.is_ascii_digit());
            let year: i32 = std::str::from_utf8(window).ok()?.parse().ok()?;
            (bounded && (1400..2200).contains(&year) && window.iter().all(u8::is_ascii_digit))
                .then(|| Self::year(year))
        })
    }
}

impl std::fmt::Display for WorkDate {
    /// ISO 8601 with what is known: `1998`, `1998-03`, `1998-03-15`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:04}", self.year)?;
        if let Some(month) = self.month {
            write!(f, "-{month:02}")?;
            if let Some(day) = self.day {
                write!(f, "-{day:02}")?;
            }
        }
        Ok(())
    }
}

/// Where a document sits in the person's Zotero library: what "Open in Zotero" opens and what
/// the collection filter reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct ZoteroLink {
    /// The group library's id; `None` in the person's own library.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "typescript", ts(optional, type = "number"))]
    pub group: Option<u64>,
    /// The regular item's eight-character key.
    pub item_key: String,
    /// The attachment item's key, where the document is a file attached to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "typescript", ts(optional))]
    pub attachment_key: Option<String>,
    /// The names of the collections the item is in, each as a path from the top
    /// (`Thesis/Chapter 2`).
    #[serde(default)]
    pub collections: Vec<String>,
}

impl ZoteroLink {
    /// The `zotero://` address that opens the document: its PDF at `page` where it is a PDF
    /// attachment and the page is known, else the item selected in Zotero's window.
    /// `None` where a key is not one of Zotero's (eight letters and digits): the address is
    /// opened by the desktop, so nothing else may reach it.
    pub fn open_uri(&self, page: Option<u32>, is_pdf: bool) -> Option<String> {
        let is_key = |k: &str| k.len() == 8 && k.bytes().all(|b| b.is_ascii_alphanumeric());
        let library = match self.group {
            Some(id) => format!("groups/{id}"),
            None => "library".to_string(),
        };
        match (&self.attachment_key, page) {
            (Some(attachment), Some(page)) if is_pdf && is_key(attachment) => Some(format!(
                "zotero://open-pdf/{library}/items/{attachment}?page={page}"
            )),
            _ => is_key(&self.item_key)
                .then(|| format!("zotero://select/{library}/items/{}", self.item_key)),
        }
    }
}

/// The work a document holds. Every field is optional and carries its [`FieldSource`]; a
/// document indexed before works existed has an empty one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct Work {
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "typescript", ts(optional))]
    pub kind: Option<Sourced<WorkType>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "typescript", ts(optional))]
    pub title: Option<Sourced<String>>,
    /// In the order the work lists them.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "typescript", ts(optional))]
    pub authors: Option<Sourced<Vec<Author>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "typescript", ts(optional))]
    pub date: Option<Sourced<WorkDate>>,
    /// The journal, the proceedings or the book a part of it appeared in.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "typescript", ts(optional))]
    pub container: Option<Sourced<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "typescript", ts(optional))]
    pub volume: Option<Sourced<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "typescript", ts(optional))]
    pub issue: Option<Sourced<String>>,
    /// The work's pages in its container (`117--129`), not the pages an answer cites.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "typescript", ts(optional))]
    pub pages: Option<Sourced<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "typescript", ts(optional))]
    pub publisher: Option<Sourced<String>>,
    /// Bare (`10.1000/xyz`), lower-cased: DOIs are case-insensitive.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "typescript", ts(optional))]
    pub doi: Option<Sourced<String>>,
    /// `2310.11511` or `hep-th/9901001`, without a version.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "typescript", ts(optional))]
    pub arxiv: Option<Sourced<String>>,
    /// Digits (and a final X) only.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "typescript", ts(optional))]
    pub isbn: Option<Sourced<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "typescript", ts(optional))]
    pub url: Option<Sourced<String>>,
    /// The person's own key (Better BibTeX, a bibliography file, their edit).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "typescript", ts(optional))]
    pub citation_key: Option<Sourced<String>>,
    /// Where the document is in Zotero, when it came from there.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "typescript", ts(optional))]
    pub zotero: Option<ZoteroLink>,
}

/// Applies `$apply!(field)` to every sourced field of [`Work`].
macro_rules! each_field {
    ($apply:ident) => {
        $apply!(kind);
        $apply!(title);
        $apply!(authors);
        $apply!(date);
        $apply!(container);
        $apply!(volume);
        $apply!(issue);
        $apply!(pages);
        $apply!(publisher);
        $apply!(doi);
        $apply!(arxiv);
        $apply!(isbn);
        $apply!(url);
        $apply!(citation_key);
    };
}

impl Work {
    /// Whether no field is set.
    pub fn is_empty(&self) -> bool {
        let mut empty = self.zotero.is_none();
        macro_rules! check {
            ($f:ident) => {
                empty &= self.$f.is_none();
            };
        }
        each_field!(check);
        empty
    }

    /// Takes every field of `other` whose source ranks at least as high as this record's
    /// value of it (the later of two equal sources wins: a re-read replaces what was read
    /// before). The Zotero link is `other`'s where it has one.
    pub fn merge(&mut self, other: Work) {
        macro_rules! take {
            ($f:ident) => {
                if let Some(theirs) = other.$f {
                    if self
                        .$f
                        .as_ref()
                        .is_none_or(|ours| theirs.source >= ours.source)
                    {
                        self.$f = Some(theirs);
                    }
                }
            };
        }
        each_field!(take);
        if other.zotero.is_some() {
            self.zotero = other.zotero;
        }
    }

    /// The record with only the fields from `source`.
    pub fn only_from(&self, source: FieldSource) -> Work {
        let mut kept = Work::default();
        macro_rules! keep {
            ($f:ident) => {
                kept.$f = self.$f.clone().filter(|v| v.source == source);
            };
        }
        each_field!(keep);
        kept
    }

    /// The record with every field marked as coming from `source` (what a reader or an edit
    /// hands over).
    pub fn from_source(mut self, source: FieldSource) -> Work {
        macro_rules! mark {
            ($f:ident) => {
                if let Some(v) = &mut self.$f {
                    v.source = source;
                }
            };
        }
        each_field!(mark);
        self
    }

    /// How many fields came from each source, in [`FieldSource::ALL`]'s order.
    pub fn sources(&self) -> [usize; FieldSource::ALL.len()] {
        let mut counts = [0; FieldSource::ALL.len()];
        macro_rules! count {
            ($f:ident) => {
                if let Some(v) = &self.$f {
                    counts[v.source as usize] += 1;
                }
            };
        }
        each_field!(count);
        counts
    }

    pub fn title(&self) -> Option<&str> {
        self.title.as_ref().map(|t| t.value.as_str())
    }

    pub fn authors(&self) -> &[Author] {
        self.authors.as_ref().map_or(&[], |a| a.value.as_slice())
    }

    pub fn year(&self) -> Option<i32> {
        self.date.as_ref().map(|d| d.value.year)
    }

    pub fn kind(&self) -> WorkType {
        self.kind.as_ref().map(|k| k.value).unwrap_or_default()
    }

    /// The value of a string field, where set.
    pub fn text(field: &Option<Sourced<String>>) -> Option<&str> {
        field.as_ref().map(|f| f.value.as_str())
    }
}

/// Every source's own record of one document's work, kept apart, so that one source can be
/// read again (a re-index, a Zotero sync, a new bibliography file) or an edit undone without
/// losing what the others said; [`WorkRecords::merged`] is the work shown and cited.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(transparent)]
pub struct WorkRecords {
    by_source: std::collections::BTreeMap<FieldSource, Work>,
}

/// The sources a document's own file gives: read again whenever the file is.
const FILE_SOURCES: [FieldSource; 3] = [
    FieldSource::FirstPageGuess,
    FieldSource::Identifier,
    FieldSource::FileMetadata,
];

impl WorkRecords {
    /// Replaces what `source` says with `work` (its fields marked as `source`'s); an empty
    /// `work` removes the source.
    pub fn set(&mut self, source: FieldSource, work: Work) {
        let zotero = work.zotero.clone();
        let mut work = work.from_source(source);
        work.zotero = zotero;
        if work.is_empty() {
            self.by_source.remove(&source);
        } else {
            self.by_source.insert(source, work);
        }
    }

    /// Replaces what the file itself said (its metadata, identifiers, first-page guess) with
    /// `work`, a record whose fields carry those sources.
    pub fn set_from_file(&mut self, work: &Work) {
        for source in FILE_SOURCES {
            self.set(source, work.only_from(source));
        }
    }

    /// What `source` says, if anything.
    pub fn get(&self, source: FieldSource) -> Option<&Work> {
        self.by_source.get(&source)
    }

    /// The work: each field from the best source that has it.
    pub fn merged(&self) -> Work {
        let mut work = Work::default();
        // BTreeMap order is FieldSource's: from the least to the most trusted.
        for layer in self.by_source.values() {
            work.merge(layer.clone());
        }
        work
    }

    /// The work as every source but `left_out` gives it: what a document says of itself
    /// without a look-up's record, to tell which identifier it is looked up by.
    pub fn merged_except(&self, left_out: FieldSource) -> Work {
        let mut work = Work::default();
        for (_, layer) in self.by_source.iter().filter(|(s, _)| **s != left_out) {
            work.merge(layer.clone());
        }
        work
    }

    pub fn is_empty(&self) -> bool {
        self.by_source.is_empty()
    }

    /// The sources that gave a record, from the least to the most trusted.
    pub fn sources(&self) -> Vec<FieldSource> {
        self.by_source.keys().copied().collect()
    }
}
