//! A Zotero data directory for tests (feature `fixture`): `zotero.sqlite` with the real table
//! and column names of Zotero's schema, Better BibTeX's database and read-only key store beside
//! it, and a `storage/KEY/…` tree holding the files the caller supplies.
//!
//! The tables are this crate's own `CREATE TABLE` statements, written from reading Zotero's
//! schema (`resource/schema/userdata.sql` and the global schema's item types and fields), with
//! only the tables and columns the reader reads, plus the item notes. The numeric ids of item
//! types, fields and creator types are deliberately not Zotero's, so a reader that relied on
//! them instead of joining by name would read nonsense.
//!
//! What it holds, each returned in [`ZoteroFixture`] for tests to assert against:
//! - in the person's library, a journal article by Jane Marrow and Kjetil Ødegård (1998) with
//!   a Better BibTeX key, a DOI written as a URL, an arXiv id in Extra and a volume stored as an
//!   integer; its attachments are the caller's PDF and text file, an EPUB (not read), a PDF in
//!   the trash, a link to a web page and a note; it is in `Thesis/Chapter 2` and in a trashed
//!   collection;
//! - a book section with editors only (Åse Ødegård and the Nordic Council, a single-field
//!   name), a `Citation Key:` line in Extra, and two linked files: one by absolute path, one
//!   relative to the linked attachment base directory;
//! - a conference paper with only Zotero's own `citationKey` field, a Markdown file and a PDF
//!   missing from storage;
//! - an item in the trash with a stored PDF, a standalone note, and a standalone attachment;
//! - in a group library, an article whose Better BibTeX key is in the read-only key store;
//! - in a feed, an item with a PDF (feeds are never read).

use std::path::{Path, PathBuf};

use rusqlite::{Connection, params};

use crate::ReferencesError;
use crate::zotero::{BETTER_BIBTEX_FILE, DATABASE_FILE};

/// The caller's files the fixture's journal article holds: a PDF (an e2e test's real one) and
/// a text file.
#[derive(Debug, Clone)]
pub struct ArticleFiles {
    pub pdf: PathBuf,
    pub text: PathBuf,
}

/// A regular item the fixture wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixtureItem {
    pub key: String,
    pub title: String,
    /// The citation key the reader must find for it.
    pub citation_key: Option<String>,
}

/// An attachment the fixture wrote, and where its file is (or, for a missing one, would be).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixtureFile {
    pub attachment_key: String,
    pub path: PathBuf,
}

/// What [`write_zotero_dir`] wrote.
#[derive(Debug, Clone)]
pub struct ZoteroFixture {
    pub dir: PathBuf,
    /// The folder to give as Zotero's linked attachment base directory.
    pub linked_attachment_base: PathBuf,
    /// The group library's id (`groups.groupID`).
    pub group_id: u64,
    /// Marrow & Ødegård 1998, journal article.
    pub article: FixtureItem,
    pub article_pdf: FixtureFile,
    pub article_text: FixtureFile,
    /// Stored, in a format the app does not read.
    pub article_epub: FixtureFile,
    /// Stored, but in the trash itself.
    pub article_trashed_pdf: FixtureFile,
    /// A child note of the article.
    pub article_note_key: String,
    /// Ødegård & Nordic Council (eds.) 2004, book section.
    pub chapter: FixtureItem,
    /// Linked by absolute path.
    pub chapter_linked_html: FixtureFile,
    /// Linked as `attachments:…`, under [`Self::linked_attachment_base`].
    pub chapter_linked_markdown: FixtureFile,
    /// Asai 2024, conference paper.
    pub paper: FixtureItem,
    pub paper_markdown: FixtureFile,
    /// In the database, absent from storage.
    pub paper_missing_pdf: FixtureFile,
    /// In the trash, with a stored PDF that is there.
    pub trashed: FixtureItem,
    pub trashed_pdf: FixtureFile,
    pub standalone_note_key: String,
    /// A standalone attachment: its work is its own title.
    pub standalone: FixtureItem,
    pub standalone_text: FixtureFile,
    /// In the group library.
    pub group_item: FixtureItem,
    pub group_text: FixtureFile,
    /// In a feed, with a stored PDF: never read.
    pub feed_item_key: String,
    /// Every collection path the reader must list, sorted.
    pub collections: Vec<String>,
}

// Ids chosen unlike Zotero's own, so that only a join by name reads them right.
const ITEM_TYPES: &[(i64, &str)] = &[
    (117, "note"),
    (103, "attachment"),
    (149, "journalArticle"),
    (131, "bookSection"),
    (127, "conferencePaper"),
    (109, "book"),
    (157, "webpage"),
    (113, "annotation"),
    (139, "preprint"),
    (141, "thesis"),
    (143, "report"),
];
const FIELDS: &[(i64, &str)] = &[
    (211, "title"),
    (238, "publicationTitle"),
    (262, "proceedingsTitle"),
    (247, "bookTitle"),
    (255, "websiteTitle"),
    (203, "date"),
    (219, "volume"),
    (224, "issue"),
    (231, "pages"),
    (207, "publisher"),
    (290, "DOI"),
    (286, "ISBN"),
    (273, "url"),
    (299, "extra"),
    (281, "citationKey"),
    (266, "archiveID"),
    (268, "number"),
    (277, "university"),
    (279, "institution"),
    (284, "accessDate"),
];
/// (item type, base field, the type's own field).
const BASE_FIELDS: &[(&str, &str, &str)] = &[
    ("conferencePaper", "publicationTitle", "proceedingsTitle"),
    ("bookSection", "publicationTitle", "bookTitle"),
    ("webpage", "publicationTitle", "websiteTitle"),
    ("thesis", "publisher", "university"),
    ("report", "publisher", "institution"),
    ("preprint", "number", "archiveID"),
];
const CREATOR_TYPES: &[(i64, &str)] = &[
    (41, "author"),
    (47, "editor"),
    (43, "contributor"),
    (53, "bookAuthor"),
];

const USER_LIBRARY: i64 = 3;
const GROUP_LIBRARY: i64 = 9;
const FEED_LIBRARY: i64 = 5;
const GROUP_ID: u64 = 4_711_123;

/// The tables, with Zotero's names for them and their columns.
const SCHEMA: &str = "
CREATE TABLE itemTypes (itemTypeID INTEGER PRIMARY KEY, typeName TEXT, templateItemTypeID INT,
    display INT DEFAULT 1);
CREATE TABLE itemTypesCombined (itemTypeID INT NOT NULL, typeName TEXT NOT NULL,
    display INT DEFAULT 1 NOT NULL, custom INT NOT NULL, PRIMARY KEY (itemTypeID));
CREATE TABLE fields (fieldID INTEGER PRIMARY KEY, fieldName TEXT, fieldFormatID INT);
CREATE TABLE fieldsCombined (fieldID INT NOT NULL, fieldName TEXT NOT NULL, label TEXT,
    fieldFormatID INT, custom INT NOT NULL, PRIMARY KEY (fieldID));
CREATE TABLE baseFieldMappings (itemTypeID INT, baseFieldID INT, fieldID INT,
    PRIMARY KEY (itemTypeID, baseFieldID, fieldID));
CREATE TABLE baseFieldMappingsCombined (itemTypeID INT, baseFieldID INT, fieldID INT,
    PRIMARY KEY (itemTypeID, baseFieldID, fieldID));
CREATE TABLE creatorTypes (creatorTypeID INTEGER PRIMARY KEY, creatorType TEXT);
CREATE TABLE libraries (libraryID INTEGER PRIMARY KEY, type TEXT NOT NULL, editable INT NOT NULL,
    filesEditable INT NOT NULL, version INT NOT NULL DEFAULT 0);
CREATE TABLE groups (groupID INTEGER PRIMARY KEY, libraryID INT NOT NULL UNIQUE,
    name TEXT NOT NULL, description TEXT NOT NULL, version INT NOT NULL);
CREATE TABLE items (itemID INTEGER PRIMARY KEY, itemTypeID INT NOT NULL,
    dateAdded TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP, libraryID INT NOT NULL,
    key TEXT NOT NULL, version INT NOT NULL DEFAULT 0, UNIQUE (libraryID, key));
CREATE TABLE itemDataValues (valueID INTEGER PRIMARY KEY, value UNIQUE);
CREATE TABLE itemData (itemID INT, fieldID INT, valueID, PRIMARY KEY (itemID, fieldID));
CREATE TABLE itemNotes (itemID INTEGER PRIMARY KEY, parentItemID INT, note TEXT, title TEXT);
CREATE TABLE itemAttachments (itemID INTEGER PRIMARY KEY, parentItemID INT, linkMode INT,
    contentType TEXT, charsetID INT, path TEXT, syncState INT DEFAULT 0);
CREATE TABLE creators (creatorID INTEGER PRIMARY KEY, firstName TEXT, lastName TEXT,
    fieldMode INT, UNIQUE (lastName, firstName, fieldMode));
CREATE TABLE itemCreators (itemID INT NOT NULL, creatorID INT NOT NULL,
    creatorTypeID INT NOT NULL DEFAULT 1, orderIndex INT NOT NULL DEFAULT 0,
    PRIMARY KEY (itemID, creatorID, creatorTypeID, orderIndex), UNIQUE (itemID, orderIndex));
CREATE TABLE collections (collectionID INTEGER PRIMARY KEY, collectionName TEXT NOT NULL,
    parentCollectionID INT DEFAULT NULL, libraryID INT NOT NULL, key TEXT NOT NULL,
    UNIQUE (libraryID, key));
CREATE TABLE collectionItems (collectionID INT NOT NULL, itemID INT NOT NULL,
    orderIndex INT NOT NULL DEFAULT 0, PRIMARY KEY (collectionID, itemID));
CREATE TABLE deletedCollections (collectionID INTEGER PRIMARY KEY,
    dateDeleted DEFAULT CURRENT_TIMESTAMP NOT NULL);
CREATE TABLE deletedItems (itemID INTEGER PRIMARY KEY,
    dateDeleted DEFAULT CURRENT_TIMESTAMP NOT NULL);
CREATE TABLE feedItems (itemID INTEGER PRIMARY KEY, guid TEXT NOT NULL UNIQUE);
";

/// Writes the fixture's Zotero data directory into `dir` (created if needed; it must not
/// hold a `zotero.sqlite` yet), with `files` as the journal article's attachments.
pub fn write_zotero_dir(
    dir: &Path,
    files: &ArticleFiles,
) -> Result<ZoteroFixture, ReferencesError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ReferencesError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let db = dir.join(DATABASE_FILE);
    let database = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ReferencesError::Database { path, source }
    };
    let mut connection = Connection::open(&db).map_err(database(&db))?;
    let writer = connection.transaction().map_err(database(&db))?;
    let mut zotero = Writer {
        connection: &writer,
        dir,
    };
    let fixture = zotero.write(files).map_err(|e| match e {
        WriteError::Sql(source) => ReferencesError::Database {
            path: db.clone(),
            source,
        },
        WriteError::Io(path, source) => ReferencesError::Io { path, source },
    })?;
    writer.commit().map_err(database(&db))?;
    write_better_bibtex(dir, &fixture).map_err(|e| match e {
        WriteError::Sql(source) => ReferencesError::Database {
            path: dir.join(BETTER_BIBTEX_FILE),
            source,
        },
        WriteError::Io(path, source) => ReferencesError::Io { path, source },
    })?;
    Ok(fixture)
}

enum WriteError {
    Sql(rusqlite::Error),
    Io(PathBuf, std::io::Error),
}

impl From<rusqlite::Error> for WriteError {
    fn from(e: rusqlite::Error) -> Self {
        Self::Sql(e)
    }
}

struct Writer<'a> {
    connection: &'a Connection,
    dir: &'a Path,
}

impl Writer<'_> {
    fn write(&mut self, files: &ArticleFiles) -> Result<ZoteroFixture, WriteError> {
        let c = self.connection;
        c.execute_batch(SCHEMA)?;
        for (id, name) in ITEM_TYPES {
            c.execute(
                "INSERT INTO itemTypes (itemTypeID, typeName) VALUES (?1, ?2)",
                params![id, name],
            )?;
            c.execute(
                "INSERT INTO itemTypesCombined (itemTypeID, typeName, custom) VALUES (?1, ?2, 0)",
                params![id, name],
            )?;
        }
        for (id, name) in FIELDS {
            c.execute(
                "INSERT INTO fields (fieldID, fieldName) VALUES (?1, ?2)",
                params![id, name],
            )?;
            c.execute(
                "INSERT INTO fieldsCombined (fieldID, fieldName, custom) VALUES (?1, ?2, 0)",
                params![id, name],
            )?;
        }
        for (item_type, base, field) in BASE_FIELDS {
            for table in ["baseFieldMappings", "baseFieldMappingsCombined"] {
                c.execute(
                    &format!(
                        "INSERT INTO {table} (itemTypeID, baseFieldID, fieldID) VALUES (\
                         (SELECT itemTypeID FROM itemTypes WHERE typeName = ?1), \
                         (SELECT fieldID FROM fields WHERE fieldName = ?2), \
                         (SELECT fieldID FROM fields WHERE fieldName = ?3))"
                    ),
                    params![item_type, base, field],
                )?;
            }
        }
        for (id, name) in CREATOR_TYPES {
            c.execute(
                "INSERT INTO creatorTypes (creatorTypeID, creatorType) VALUES (?1, ?2)",
                params![id, name],
            )?;
        }
        c.execute_batch(&format!(
            "INSERT INTO libraries (libraryID, type, editable, filesEditable) VALUES
                 ({USER_LIBRARY}, 'user', 1, 1), ({GROUP_LIBRARY}, 'group', 0, 0),
                 ({FEED_LIBRARY}, 'feed', 1, 1);
             INSERT INTO groups (groupID, libraryID, name, description, version) VALUES
                 ({GROUP_ID}, {GROUP_LIBRARY}, 'Bridge lab', '', 1);
             INSERT INTO collections (collectionID, collectionName, parentCollectionID, libraryID, key)
                 VALUES (601, 'Thesis', NULL, {USER_LIBRARY}, 'C6THS2AB'),
                        (602, 'Chapter 2', 601, {USER_LIBRARY}, 'C6CH2BCD'),
                        (603, 'Old drafts', NULL, {USER_LIBRARY}, 'C6OLDDEF'),
                        (604, 'Lab reading', NULL, {GROUP_LIBRARY}, 'C6LABGHJ');
             INSERT INTO deletedCollections (collectionID) VALUES (603);"
        ))?;

        // The journal article and its attachments.
        let article = self.item(401, "journalArticle", USER_LIBRARY, "MRW8QDG2")?;
        let article_title = "Telemetry of the Øresund Bridge";
        self.field(article, "title", article_title)?;
        self.field(article, "publicationTitle", "Journal of Bridge Engineering")?;
        self.field(article, "date", "1998-03-15 March 15, 1998")?;
        // Zotero's value column has no type: a number may be stored as one.
        self.field(article, "volume", 12_i64)?;
        self.field(article, "issue", "3")?;
        self.field(article, "pages", "117-129")?;
        self.field(article, "DOI", "https://doi.org/10.1000/ABC.123")?;
        self.field(article, "url", "https://example.org/telemetry")?;
        self.field(
            article,
            "extra",
            "arXiv: 2101.00001\nCitation Key: extra-key-loses-to-bbt",
        )?;
        self.field(article, "citationKey", "field-key-loses-to-bbt")?;
        self.creator(article, 0, "Jane", "Marrow", 0, "author")?;
        self.creator(article, 1, "Kjetil", "Ødegård", 0, "author")?;
        self.creator(article, 2, "Ann", "Smith", 0, "editor")?;
        let article_pdf = self.stored(
            402,
            article,
            "PDF3KX7A",
            "Marrow and Ødegård - 1998 - Telemetry.pdf",
            "application/pdf",
            Source::Copy(&files.pdf),
        )?;
        let article_text = self.stored(
            403,
            article,
            "TXT4NQ2B",
            "reading notes.txt",
            "text/plain",
            Source::Copy(&files.text),
        )?;
        let article_epub = self.stored(
            404,
            article,
            "EPB5RT8C",
            "telemetry.epub",
            "application/epub+zip",
            Source::Text("PK\u{3}\u{4} not really an EPUB"),
        )?;
        let article_trashed_pdf = self.stored(
            405,
            article,
            "TRS6VW9D",
            "old version.pdf",
            "application/pdf",
            Source::Copy(&files.pdf),
        )?;
        self.trash(405)?;
        self.item(406, "attachment", USER_LIBRARY, "URL7YZ2E")?;
        c.execute(
            "INSERT INTO itemAttachments (itemID, parentItemID, linkMode, contentType, path) \
             VALUES (406, ?1, 3, 'text/html', NULL)",
            [article],
        )?;
        self.field(406, "url", "https://example.org/telemetry/online")?;
        self.item(407, "note", USER_LIBRARY, "NTE8AB3F")?;
        c.execute(
            "INSERT INTO itemNotes (itemID, parentItemID, note, title) \
             VALUES (407, ?1, '<p>Read section 3 twice.</p>', 'Read section 3 twice.')",
            [article],
        )?;
        c.execute_batch(&format!(
            "INSERT INTO collectionItems (collectionID, itemID) VALUES (602, {article}), (603, {article})"
        ))?;

        // The book section: editors only, a key in Extra, two linked files.
        let chapter = self.item(411, "bookSection", USER_LIBRARY, "CHP2XDG4")?;
        let chapter_title = "Bridges of the North";
        self.field(chapter, "title", chapter_title)?;
        self.field(chapter, "bookTitle", "Handbook of Nordic Engineering")?;
        self.field(chapter, "date", "2004-00-00 2004")?;
        self.field(chapter, "publisher", "Fagbokforlaget")?;
        self.field(chapter, "ISBN", "978-0-262-03384-8")?;
        self.field(chapter, "pages", "45–67")?;
        self.field(
            chapter,
            "extra",
            "Original date: 2003\nCitation Key: odegard2004bridges",
        )?;
        self.field(chapter, "citationKey", "field-key-loses-to-extra")?;
        self.creator(chapter, 0, "Åse", "Ødegård", 0, "editor")?;
        self.creator(chapter, 1, "", "Nordic Council", 1, "editor")?;
        self.creator(chapter, 2, "Per", "Hansen", 0, "contributor")?;
        let linked_folder = self.dir.join("Linked files");
        let chapter_html = linked_folder.join("bridges of the north.html");
        self.place(&chapter_html, Source::Text("<html><head><title>Bridges of the North</title></head><body><p>Cable-stayed bridges dominate Nordic fjord crossings.</p></body></html>"))?;
        let chapter_linked_html = self.attachment(
            412,
            chapter,
            "LNK3HTM5",
            2,
            "text/html",
            &path_text(&chapter_html),
        )?;
        let linked_attachment_base = self.dir.join("Linked base");
        let chapter_markdown = linked_attachment_base
            .join("papers")
            .join("bridges-notes.md");
        self.place(
            &chapter_markdown,
            Source::Text("# Notes on Bridges of the North\n\nThe Øresund link opened in 2000.\n"),
        )?;
        let chapter_linked_markdown = self.attachment(
            413,
            chapter,
            "LNK4REL6",
            2,
            "text/markdown",
            "attachments:papers/bridges-notes.md",
        )?;
        c.execute_batch(&format!(
            "INSERT INTO collectionItems (collectionID, itemID) VALUES (601, {chapter})"
        ))?;

        // The conference paper: Zotero's own citationKey field; a file missing from storage.
        let paper = self.item(421, "conferencePaper", USER_LIBRARY, "ASA2024S")?;
        let paper_title =
            "Self-RAG: Learning to Retrieve, Generate, and Critique through Self-Reflection";
        self.field(paper, "title", paper_title)?;
        self.field(
            paper,
            "proceedingsTitle",
            "International Conference on Learning Representations",
        )?;
        self.field(paper, "date", "2024-00-00 2024")?;
        self.field(paper, "url", "https://arxiv.org/abs/2310.11511")?;
        self.field(paper, "citationKey", "asai2024selfrag")?;
        self.creator(paper, 0, "Akari", "Asai", 0, "author")?;
        let paper_markdown = self.stored(
            422,
            paper,
            "MDN5ASA7",
            "self-rag.md",
            "text/markdown",
            Source::Text(
                "# Self-RAG\n\nA model that retrieves on demand and critiques its own output.\n",
            ),
        )?;
        let paper_missing_pdf = self.stored(
            423,
            paper,
            "GNE6MSS8",
            "self-rag.pdf",
            "application/pdf",
            Source::Missing,
        )?;

        // An item in the trash, with a file that is there.
        let trashed = self.item(431, "journalArticle", USER_LIBRARY, "TRA7SHD9")?;
        self.field(trashed, "title", "Retracted draft")?;
        self.creator(trashed, 0, "Jane", "Marrow", 0, "author")?;
        let trashed_pdf = self.stored(
            432,
            trashed,
            "TPD8FLE2",
            "retracted.pdf",
            "application/pdf",
            Source::Copy(&files.pdf),
        )?;
        self.trash(trashed)?;

        // A standalone note and a standalone attachment.
        self.item(441, "note", USER_LIBRARY, "SNT9NTE3")?;
        c.execute(
            "INSERT INTO itemNotes (itemID, parentItemID, note, title) \
             VALUES (441, NULL, '<p>Ideas for chapter 3</p>', 'Ideas for chapter 3')",
            [],
        )?;
        let standalone_title = "Field notes from Østfold";
        let standalone_text = self.stored(451, None, "STA2NDL4", "field notes.txt", "text/plain", Source::Text("Field notes from Østfold.\n\nThe old bridge at Svinesund carries the E6 no more.\n"))?;
        self.field(451, "title", standalone_title)?;
        c.execute_batch("INSERT INTO collectionItems (collectionID, itemID) VALUES (601, 451)")?;

        // The group library's article.
        let group_item = self.item(461, "journalArticle", GROUP_LIBRARY, "GRP3SHR5")?;
        let group_title = "Shared reading on the Øresund link";
        self.field(group_item, "title", group_title)?;
        self.field(group_item, "publicationTitle", "Bridge Lab Notes")?;
        self.field(group_item, "date", "2011-00-00 2011")?;
        self.creator(group_item, 0, "Kjetil", "Ødegård", 0, "author")?;
        let group_text = self.stored(
            462,
            group_item,
            "GTX4SHR6",
            "shared reading.md",
            "text/markdown",
            Source::Text(
                "# Shared reading\n\nThe lab's notes on the Øresund link's cable stays.\n",
            ),
        )?;
        c.execute_batch(&format!(
            "INSERT INTO collectionItems (collectionID, itemID) VALUES (604, {group_item})"
        ))?;

        // A feed's item, with a file.
        let feed_item = self.item(471, "journalArticle", FEED_LIBRARY, "FED5ITM7")?;
        c.execute(
            "INSERT INTO feedItems (itemID, guid) VALUES (?1, 'https://example.org/feed/1')",
            [feed_item],
        )?;
        self.field(feed_item, "title", "Feed entry")?;
        self.stored(
            472,
            feed_item,
            "FPD6ITM8",
            "feed.pdf",
            "application/pdf",
            Source::Copy(&files.pdf),
        )?;

        Ok(ZoteroFixture {
            dir: self.dir.to_path_buf(),
            linked_attachment_base,
            group_id: GROUP_ID,
            article: FixtureItem {
                key: "MRW8QDG2".into(),
                title: article_title.into(),
                citation_key: Some("marrow1998telemetry".into()),
            },
            article_pdf,
            article_text,
            article_epub,
            article_trashed_pdf,
            article_note_key: "NTE8AB3F".into(),
            chapter: FixtureItem {
                key: "CHP2XDG4".into(),
                title: chapter_title.into(),
                citation_key: Some("odegard2004bridges".into()),
            },
            chapter_linked_html,
            chapter_linked_markdown,
            paper: FixtureItem {
                key: "ASA2024S".into(),
                title: paper_title.into(),
                citation_key: Some("asai2024selfrag".into()),
            },
            paper_markdown,
            paper_missing_pdf,
            trashed: FixtureItem {
                key: "TRA7SHD9".into(),
                title: "Retracted draft".into(),
                citation_key: None,
            },
            trashed_pdf,
            standalone_note_key: "SNT9NTE3".into(),
            standalone: FixtureItem {
                key: "STA2NDL4".into(),
                title: standalone_title.into(),
                citation_key: None,
            },
            standalone_text,
            group_item: FixtureItem {
                key: "GRP3SHR5".into(),
                title: group_title.into(),
                citation_key: Some("odegard2011shared".into()),
            },
            group_text,
            feed_item_key: "FED5ITM7".into(),
            collections: vec![
                "Lab reading".into(),
                "Thesis".into(),
                "Thesis/Chapter 2".into(),
            ],
        })
    }

    fn item(&self, id: i64, type_name: &str, library: i64, key: &str) -> Result<i64, WriteError> {
        self.connection.execute(
            "INSERT INTO items (itemID, itemTypeID, libraryID, key) VALUES \
             (?1, (SELECT itemTypeID FROM itemTypes WHERE typeName = ?2), ?3, ?4)",
            params![id, type_name, library, key],
        )?;
        Ok(id)
    }

    fn field(&self, item: i64, name: &str, value: impl rusqlite::ToSql) -> Result<(), WriteError> {
        let c = self.connection;
        c.execute(
            "INSERT OR IGNORE INTO itemDataValues (value) VALUES (?1)",
            [&value],
        )?;
        c.execute(
            "INSERT INTO itemData (itemID, fieldID, valueID) VALUES (?1, \
             (SELECT fieldID FROM fields WHERE fieldName = ?2), \
             (SELECT valueID FROM itemDataValues WHERE value = ?3))",
            params![item, name, &value],
        )?;
        Ok(())
    }

    fn creator(
        &self,
        item: i64,
        order: i64,
        first: &str,
        last: &str,
        field_mode: i64,
        creator_type: &str,
    ) -> Result<(), WriteError> {
        let c = self.connection;
        c.execute(
            "INSERT OR IGNORE INTO creators (firstName, lastName, fieldMode) VALUES (?1, ?2, ?3)",
            params![first, last, field_mode],
        )?;
        c.execute(
            "INSERT INTO itemCreators (itemID, creatorID, creatorTypeID, orderIndex) VALUES (?1, \
             (SELECT creatorID FROM creators WHERE firstName = ?2 AND lastName = ?3 AND fieldMode = ?4), \
             (SELECT creatorTypeID FROM creatorTypes WHERE creatorType = ?5), ?6)",
            params![item, first, last, field_mode, creator_type, order],
        )?;
        Ok(())
    }

    fn trash(&self, item: i64) -> Result<(), WriteError> {
        self.connection
            .execute("INSERT INTO deletedItems (itemID) VALUES (?1)", [item])?;
        Ok(())
    }

    /// An attachment item and its `itemAttachments` row.
    fn attachment(
        &self,
        id: i64,
        parent: impl Into<Option<i64>>,
        key: &str,
        link_mode: i64,
        content_type: &str,
        path: &str,
    ) -> Result<FixtureFile, WriteError> {
        let parent = parent.into();
        let library = match parent {
            Some(parent) => self.connection.query_row(
                "SELECT libraryID FROM items WHERE itemID = ?1",
                [parent],
                |row| row.get(0),
            )?,
            None => USER_LIBRARY,
        };
        self.item(id, "attachment", library, key)?;
        self.connection.execute(
            "INSERT INTO itemAttachments (itemID, parentItemID, linkMode, contentType, path) \
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![id, parent, link_mode, content_type, path],
        )?;
        let file = match path.strip_prefix("storage:") {
            Some(name) => self.dir.join("storage").join(key).join(name),
            None => match path.strip_prefix("attachments:") {
                Some(relative) => self.dir.join("Linked base").join(relative),
                None => PathBuf::from(path),
            },
        };
        Ok(FixtureFile {
            attachment_key: key.to_string(),
            path: file,
        })
    }

    /// A stored attachment (`storage:NAME`) and its file in `storage/KEY/`.
    fn stored(
        &self,
        id: i64,
        parent: impl Into<Option<i64>>,
        key: &str,
        name: &str,
        content_type: &str,
        source: Source<'_>,
    ) -> Result<FixtureFile, WriteError> {
        let file = self.attachment(id, parent, key, 0, content_type, &format!("storage:{name}"))?;
        self.place(&file.path, source)?;
        Ok(file)
    }

    fn place(&self, path: &Path, source: Source<'_>) -> Result<(), WriteError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |e| WriteError::Io(path, e)
        };
        if let Source::Missing = source {
            return Ok(());
        }
        if let Some(folder) = path.parent() {
            std::fs::create_dir_all(folder).map_err(io(folder))?;
        }
        match source {
            Source::Copy(from) => std::fs::copy(from, path).map(|_| ()).map_err(io(from)),
            Source::Text(text) => std::fs::write(path, text).map_err(io(path)),
            Source::Missing => Ok(()),
        }
    }
}

/// What a fixture file holds.
enum Source<'a> {
    /// A copy of the caller's file.
    Copy(&'a Path),
    Text(&'a str),
    /// Nothing: the file is missing from storage.
    Missing,
}

fn path_text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// Better BibTeX's stores: its database (BBT 6's `citationkey` table) with the article's key,
/// and its read-only key store with the group item's.
fn write_better_bibtex(dir: &Path, fixture: &ZoteroFixture) -> Result<(), WriteError> {
    let connection = Connection::open(dir.join(BETTER_BIBTEX_FILE))?;
    connection.execute_batch(
        "CREATE TABLE citationkey (itemID NOT NULL, itemKey NOT NULL, libraryID NOT NULL,
             citationKey NOT NULL, pinned CHECK (pinned in (0, 1)) NOT NULL DEFAULT 0,
             PRIMARY KEY (itemID), UNIQUE (libraryID, itemKey));",
    )?;
    connection.execute(
        "INSERT INTO citationkey (itemID, itemKey, libraryID, citationKey, pinned) \
         VALUES (401, ?1, ?2, ?3, 1)",
        params![
            fixture.article.key,
            USER_LIBRARY,
            fixture.article.citation_key
        ],
    )?;
    let folder = dir.join("better-bibtex");
    std::fs::create_dir_all(&folder).map_err(|e| WriteError::Io(folder.clone(), e))?;
    let read_only = folder.join("read-only.json");
    let json = format!(
        r#"[{{"itemID": 461, "itemKey": "{}", "libraryID": {GROUP_LIBRARY}, "citationKey": "{}"}}]"#,
        fixture.group_item.key,
        fixture
            .group_item
            .citation_key
            .as_deref()
            .unwrap_or_default()
    );
    std::fs::write(&read_only, json).map_err(|e| WriteError::Io(read_only, e))
}
