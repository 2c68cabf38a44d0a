//! A Zotero data directory, read-only, while Zotero runs: each regular item's files (stored in
//! `storage/KEY/` or linked from elsewhere) with the item's metadata as a [`Work`], the
//! collections, and every attachment left out with the reason.
//!
//! `zotero.sqlite` is read from a consistent private copy (see the `snapshot` module: Zotero
//! keeps the database open with an exclusive lock and recent commits in its WAL); nothing in
//! the data directory is written or locked. Item types, fields and creator types are joined by
//! their names (`journalArticle`, `publicationTitle`, `author`), never by Zotero's numeric ids,
//! which differ between installations; a type-specific field (`proceedingsTitle`, `university`)
//! is read through Zotero's own base-field mapping (`publicationTitle`, `publisher`).
//!
//! The citation key is Better BibTeX's first: its database beside Zotero's
//! (`better-bibtex.sqlite`, table `citationkey`, kept until BBT moves the keys into Zotero) and
//! its `better-bibtex/read-only.json` for read-only group libraries; else a `Citation Key: …`
//! line in the item's Extra field; else Zotero's own `citationKey` field, where BBT 7 and
//! later keep the keys.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use rusqlite::Connection;
use selfrag_works::{
    Author, FieldSource, Sourced, Work, WorkDate, WorkType, ZoteroLink, identifiers,
};
use serde::{Deserialize, Serialize};

pub use crate::snapshot::FileStamp;
use crate::snapshot::{self, Snapshot};
use crate::{ReferencesError, text};

/// The file name of Zotero's database in its data directory.
pub const DATABASE_FILE: &str = "zotero.sqlite";

/// Better BibTeX's own database beside Zotero's (BBT 6 and earlier; BBT 7 moves the keys into
/// Zotero's `citationKey` field and renames this file once it has).
pub const BETTER_BIBTEX_FILE: &str = "better-bibtex.sqlite";

/// Where Better BibTeX keeps the keys of read-only group libraries, which it cannot write to
/// Zotero's `citationKey` field.
const BETTER_BIBTEX_READ_ONLY: &str = "better-bibtex/read-only.json";

/// The file extensions the app reads (the same list as `selfrag_index`'s
/// `SUPPORTED_EXTENSIONS`, which this crate cannot link): attachments of other formats (EPUB,
/// images, snapshots saved as other types) are reported as skipped.
pub const READABLE_EXTENSIONS: &[&str] = &[
    "pdf", "txt", "text", "md", "markdown", "html", "htm", "xhtml", "docx",
];

/// Item types that are not works: their rows in `items` are never read as one.
const NOT_WORKS: [&str; 3] = ["attachment", "note", "annotation"];

/// Zotero's attachment link modes (`itemAttachments.linkMode`), from its `Zotero.Attachments`.
const IMPORTED_FILE: i64 = 0;
const IMPORTED_URL: i64 = 1;
const LINKED_FILE: i64 = 2;

/// Zotero's default data directory, `~/Zotero`, on every operating system.
pub fn default_data_dir() -> Option<PathBuf> {
    directories::BaseDirs::new().map(|dirs| dirs.home_dir().join("Zotero"))
}

/// What only the person's Zotero settings know.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ZoteroOptions {
    /// Zotero's "Linked Attachment Base Directory" (Settings ▸ Advanced ▸ Files and Folders):
    /// linked files stored relative to it (`attachments:papers/x.pdf`) are found under it.
    /// Without it they are reported as skipped.
    pub linked_attachment_base: Option<PathBuf>,
}

/// What a Zotero data directory holds for the app.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct ZoteroLibrary {
    /// Each readable attachment file with its item's work record.
    pub documents: Vec<ReferencedFile>,
    /// Attachments that are files but cannot be read, and why.
    pub skipped: Vec<SkippedAttachment>,
    /// Every collection as a path from the top (`Thesis/Chapter 2`), sorted, once each.
    pub collections: Vec<String>,
    /// What the person should know although the library was read (Better BibTeX's keys that
    /// could not be read, so Zotero's own keys were used).
    pub notes: Vec<String>,
}

/// A file and the work it holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReferencedFile {
    pub path: PathBuf,
    pub work: Work,
}

/// An attachment left out of [`ZoteroLibrary::documents`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SkippedAttachment {
    /// The key of the item the attachment belongs to (its own, for a standalone attachment).
    pub item_key: String,
    pub attachment_key: String,
    /// The item's title, as the person knows it from Zotero.
    pub title: String,
    pub reason: SkipReason,
}

/// Why an attachment was left out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum SkipReason {
    /// The file is not where Zotero says: not downloaded from Zotero's storage (yet), or moved
    /// or deleted outside Zotero.
    MissingFile { path: PathBuf },
    /// A format the app does not read.
    UnsupportedFormat {
        path: PathBuf,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content_type: Option<String>,
    },
    /// A linked file stored relative to Zotero's linked attachment base directory, which was
    /// not given ([`ZoteroOptions::linked_attachment_base`]), or in a form Zotero does not
    /// write.
    UnresolvedLinkedPath { stored: String },
    /// A stored file name that would leave its `storage/KEY/` folder, or a linked file in a
    /// group library (Zotero allows none there): not followed.
    UnsafePath { stored: String },
    /// An attachment with no file recorded.
    NoPath,
}

impl std::fmt::Display for SkipReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::MissingFile { path } => write!(
                f,
                "{} is missing: open the item in Zotero to download or relink it",
                path.display()
            ),
            Self::UnsupportedFormat { path, content_type } => write!(
                f,
                "{} is {}, a format the app does not read ({})",
                path.display(),
                content_type.as_deref().unwrap_or("of an unknown type"),
                READABLE_EXTENSIONS.join(", ")
            ),
            Self::UnresolvedLinkedPath { stored } => write!(
                f,
                "the linked file {stored} is relative to Zotero's Linked Attachment Base \
                 Directory: give that folder (Zotero's Settings ▸ Advanced ▸ Files and Folders)"
            ),
            Self::UnsafePath { stored } => write!(
                f,
                "the attachment path {stored} points outside Zotero's storage or is a linked \
                 file in a group library: not followed"
            ),
            Self::NoPath => write!(f, "the attachment has no file"),
        }
    }
}

/// A cheap fingerprint of a Zotero data directory: the size and modification time of Zotero's
/// database, its WAL and journal, and Better BibTeX's key stores. A watcher polls it and reads
/// the library again when it changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ZoteroStamp {
    pub database: FileStamp,
    pub wal: Option<FileStamp>,
    pub journal: Option<FileStamp>,
    pub better_bibtex: Option<FileStamp>,
    pub better_bibtex_read_only: Option<FileStamp>,
}

/// The [`ZoteroStamp`] of the data directory `dir`, from file metadata alone.
pub fn database_stamp(dir: &Path) -> Result<ZoteroStamp, ReferencesError> {
    let db = dir.join(DATABASE_FILE);
    let [database, wal, journal] = snapshot::stamps(&db)?;
    let database = database.ok_or_else(|| ReferencesError::NotZoteroDirectory {
        dir: dir.to_path_buf(),
    })?;
    Ok(ZoteroStamp {
        database,
        wal,
        journal,
        better_bibtex: FileStamp::of(&dir.join(BETTER_BIBTEX_FILE))?,
        better_bibtex_read_only: FileStamp::of(&dir.join(BETTER_BIBTEX_READ_ONLY))?,
    })
}

/// Reads the Zotero data directory `dir` (the folder holding `zotero.sqlite` and `storage/`)
/// without Zotero's linked attachment base directory.
pub fn read_zotero(dir: &Path) -> Result<ZoteroLibrary, ReferencesError> {
    read_zotero_with(dir, &ZoteroOptions::default())
}

/// Reads the Zotero data directory `dir` with what the person's Zotero settings say.
pub fn read_zotero_with(
    dir: &Path,
    options: &ZoteroOptions,
) -> Result<ZoteroLibrary, ReferencesError> {
    let db = dir.join(DATABASE_FILE);
    if !db.is_file() {
        return Err(ReferencesError::NotZoteroDirectory {
            dir: dir.to_path_buf(),
        });
    }
    let snapshot = snapshot::open(&db)?;
    let tables = Tables::of(&snapshot.connection, &db)?;
    let rows =
        Rows::read(&snapshot.connection, &tables).map_err(|source| ReferencesError::Database {
            path: db.clone(),
            source,
        })?;
    drop(snapshot);
    // Better BibTeX's store is an add-on's file: one it cannot read costs its keys, never the
    // library.
    let (keys, note) = match better_bibtex_keys(dir) {
        Ok(keys) => (keys, None),
        Err(error) => (
            HashMap::new(),
            Some(format!(
                "Better BibTeX's citation keys could not be read ({error}); Zotero's own keys are used"
            )),
        ),
    };
    let mut library = rows.library(dir, options, &keys);
    library.notes.extend(note);
    Ok(library)
}

/// The tables read, by the names this database has for them.
struct Tables {
    item_types: &'static str,
    fields: &'static str,
    base_fields: Option<&'static str>,
    deleted_collections: bool,
}

impl Tables {
    fn of(connection: &Connection, db: &Path) -> Result<Self, ReferencesError> {
        let has = |name: &str| {
            snapshot::has_table(connection, name).map_err(|source| ReferencesError::Database {
                path: db.to_path_buf(),
                source,
            })
        };
        for table in [
            "items",
            "itemData",
            "itemDataValues",
            "creators",
            "itemCreators",
            "creatorTypes",
            "itemAttachments",
            "deletedItems",
            "collections",
            "collectionItems",
            "libraries",
            "groups",
        ] {
            if !has(table)? {
                return Err(ReferencesError::UnknownSchema {
                    path: db.to_path_buf(),
                    table,
                });
            }
        }
        // The `…Combined` tables are what Zotero itself reads (built-in plus custom types and
        // fields); a database that has only the built-in ones is read from those.
        let first = |names: &[&'static str]| -> Result<Option<&'static str>, ReferencesError> {
            for name in names {
                if has(name)? {
                    return Ok(Some(name));
                }
            }
            Ok(None)
        };
        let missing = |table| ReferencesError::UnknownSchema {
            path: db.to_path_buf(),
            table,
        };
        Ok(Self {
            item_types: first(&["itemTypesCombined", "itemTypes"])?
                .ok_or_else(|| missing("itemTypes"))?,
            fields: first(&["fieldsCombined", "fields"])?.ok_or_else(|| missing("fields"))?,
            base_fields: first(&["baseFieldMappingsCombined", "baseFieldMappings"])?,
            deleted_collections: has("deletedCollections")?,
        })
    }
}

struct ItemRow {
    key: String,
    library: i64,
    type_name: String,
    trashed: bool,
}

struct CreatorRow {
    first: String,
    last: String,
    single_field: bool,
    creator_type: String,
}

struct AttachmentRow {
    item: i64,
    parent: Option<i64>,
    link_mode: Option<i64>,
    content_type: Option<String>,
    path: Option<String>,
}

struct CollectionRow {
    name: String,
    parent: Option<i64>,
    library: i64,
    trashed: bool,
}

/// A library the app reads: the person's own or a group's (feeds are not).
struct LibraryRow {
    group: Option<u64>,
}

/// Everything read from the snapshot, before it is made into works.
struct Rows {
    libraries: HashMap<i64, LibraryRow>,
    items: HashMap<i64, ItemRow>,
    /// Per item: field name → value, under the field's own name and its base field's.
    fields: HashMap<i64, HashMap<String, String>>,
    /// Per item, in the item's order.
    creators: HashMap<i64, Vec<CreatorRow>>,
    attachments: Vec<AttachmentRow>,
    collections: HashMap<i64, CollectionRow>,
    item_collections: HashMap<i64, Vec<i64>>,
}

impl Rows {
    fn read(connection: &Connection, tables: &Tables) -> Result<Self, rusqlite::Error> {
        let libraries = collect(
            connection,
            "SELECT l.libraryID, g.groupID FROM libraries l \
             LEFT JOIN groups g ON g.libraryID = l.libraryID \
             WHERE l.type IN ('user', 'group')",
            |row| {
                Ok((
                    row.get(0)?,
                    LibraryRow {
                        group: row
                            .get::<_, Option<i64>>(1)?
                            .and_then(|g| u64::try_from(g).ok()),
                    },
                ))
            },
        )?
        .into_iter()
        .collect();

        let items = collect(
            connection,
            &format!(
                "SELECT i.itemID, i.key, i.libraryID, t.typeName, \
                        i.itemID IN (SELECT itemID FROM deletedItems) \
                 FROM items i JOIN {} t ON t.itemTypeID = i.itemTypeID",
                tables.item_types
            ),
            |row| {
                Ok((
                    row.get(0)?,
                    ItemRow {
                        key: row.get(1)?,
                        library: row.get(2)?,
                        type_name: row.get(3)?,
                        trashed: row.get(4)?,
                    },
                ))
            },
        )?
        .into_iter()
        .collect();

        let base_join = match tables.base_fields {
            Some(mappings) => format!(
                "LEFT JOIN {mappings} m ON m.itemTypeID = i.itemTypeID AND m.fieldID = d.fieldID \
                 LEFT JOIN {fields} b ON b.fieldID = m.baseFieldID",
                fields = tables.fields
            ),
            None => "LEFT JOIN (SELECT NULL AS fieldName) b ON 0".to_string(),
        };
        let mut fields: HashMap<i64, HashMap<String, String>> = HashMap::new();
        for (item, name, base, value) in collect(
            connection,
            &format!(
                "SELECT d.itemID, f.fieldName, b.fieldName, v.value \
                 FROM itemData d \
                 JOIN items i ON i.itemID = d.itemID \
                 JOIN {fields} f ON f.fieldID = d.fieldID \
                 JOIN itemDataValues v ON v.valueID = d.valueID \
                 {base_join}",
                fields = tables.fields
            ),
            |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, Option<String>>(2)?,
                    snapshot::text(row.get_ref(3)?),
                ))
            },
        )? {
            let Some(value) = value else { continue };
            let item_fields = fields.entry(item).or_default();
            if let Some(base) = base {
                item_fields.entry(base).or_insert_with(|| value.clone());
            }
            // A field's own name wins over another field's base name.
            item_fields.insert(name, value);
        }

        let mut creators: HashMap<i64, Vec<CreatorRow>> = HashMap::new();
        for (item, creator) in collect(
            connection,
            "SELECT ic.itemID, c.firstName, c.lastName, c.fieldMode, ct.creatorType \
             FROM itemCreators ic \
             JOIN creators c ON c.creatorID = ic.creatorID \
             JOIN creatorTypes ct ON ct.creatorTypeID = ic.creatorTypeID \
             ORDER BY ic.itemID, ic.orderIndex",
            |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    CreatorRow {
                        first: row.get::<_, Option<String>>(1)?.unwrap_or_default(),
                        last: row.get::<_, Option<String>>(2)?.unwrap_or_default(),
                        single_field: row.get::<_, Option<i64>>(3)? == Some(1),
                        creator_type: row.get(4)?,
                    },
                ))
            },
        )? {
            creators.entry(item).or_default().push(creator);
        }

        let attachments = collect(
            connection,
            "SELECT itemID, parentItemID, linkMode, contentType, path FROM itemAttachments \
             ORDER BY itemID",
            |row| {
                Ok(AttachmentRow {
                    item: row.get(0)?,
                    parent: row.get(1)?,
                    link_mode: row.get(2)?,
                    content_type: row.get(3)?,
                    path: snapshot::text(row.get_ref(4)?),
                })
            },
        )?;

        let trashed_collections = if tables.deleted_collections {
            "collectionID IN (SELECT collectionID FROM deletedCollections)"
        } else {
            "0"
        };
        let collections = collect(
            connection,
            &format!(
                "SELECT collectionID, collectionName, parentCollectionID, libraryID, \
                        {trashed_collections} FROM collections"
            ),
            |row| {
                Ok((
                    row.get(0)?,
                    CollectionRow {
                        name: row.get(1)?,
                        parent: row.get(2)?,
                        library: row.get(3)?,
                        trashed: row.get(4)?,
                    },
                ))
            },
        )?
        .into_iter()
        .collect();

        let mut item_collections: HashMap<i64, Vec<i64>> = HashMap::new();
        for (collection, item) in collect(
            connection,
            "SELECT collectionID, itemID FROM collectionItems",
            |row| Ok((row.get::<_, i64>(0)?, row.get::<_, i64>(1)?)),
        )? {
            item_collections.entry(item).or_default().push(collection);
        }

        Ok(Self {
            libraries,
            items,
            fields,
            creators,
            attachments,
            collections,
            item_collections,
        })
    }

    /// The collection's path from the top of its library; `None` if it or a collection above
    /// it is in the trash.
    fn collection_path(&self, id: i64) -> Option<String> {
        let mut names = Vec::new();
        let mut next = Some(id);
        while let Some(id) = next {
            let collection = self.collections.get(&id)?;
            // A cycle is a broken database; the first 64 levels are more than any library has.
            if collection.trashed || names.len() > 64 {
                return None;
            }
            names.push(collection.name.as_str());
            next = collection.parent;
        }
        names.reverse();
        Some(names.join("/"))
    }

    fn collections_of(&self, item: i64) -> Vec<String> {
        let paths: BTreeSet<String> = self
            .item_collections
            .get(&item)
            .into_iter()
            .flatten()
            .filter_map(|c| self.collection_path(*c))
            .collect();
        paths.into_iter().collect()
    }

    fn text(&self, item: i64, field: &str) -> Option<String> {
        self.fields
            .get(&item)
            .and_then(|f| f.get(field))
            .and_then(|v| text::clean(v))
    }

    /// The work record of the regular item `id`.
    fn work(&self, id: i64, item: &ItemRow, citation_key: Option<String>) -> Work {
        let field = |name: &str| self.text(id, name);
        let extra_raw = self
            .fields
            .get(&id)
            .and_then(|f| f.get("extra"))
            .cloned()
            .unwrap_or_default();
        let doi = field("DOI")
            .and_then(|d| identifiers::normalise_doi(&d))
            .or_else(|| extra_line(&extra_raw, &["doi"]).and_then(identifiers::normalise_doi));
        // `arXiv: 2310.11511` in Extra, an arxiv.org address, a preprint's `arXiv:…` archive id.
        let arxiv = [field("extra"), field("url"), field("archiveID")]
            .into_iter()
            .flatten()
            .find_map(|text| identifiers::find_arxiv(&text));
        let citation_key = citation_key
            .or_else(|| {
                extra_line(
                    &extra_raw,
                    &["citation key", "citation-key", "citationkey", "bibtex"],
                )
                .and_then(text::clean)
            })
            .or_else(|| field("citationKey"));
        Work {
            kind: Some(sourced(work_type(&item.type_name))),
            title: field("title").map(sourced),
            authors: Some(self.authors(id))
                .filter(|a| !a.is_empty())
                .map(sourced),
            date: field("date").and_then(|d| zotero_date(&d)).map(sourced),
            // By base field: a conference paper's `proceedingsTitle`, a book section's
            // `bookTitle`, a web page's `websiteTitle` (and a thesis's `university` below).
            container: field("publicationTitle").map(sourced),
            volume: field("volume").map(sourced),
            issue: field("issue").map(sourced),
            pages: field("pages").and_then(|p| text::pages(&p)).map(sourced),
            publisher: field("publisher").map(sourced),
            doi: doi.map(sourced),
            arxiv: arxiv.map(sourced),
            isbn: field("ISBN").and_then(|i| text::isbn(&i)).map(sourced),
            url: field("url").map(sourced),
            citation_key: citation_key.map(sourced),
            zotero: Some(ZoteroLink {
                group: self.libraries.get(&item.library).and_then(|l| l.group),
                item_key: item.key.clone(),
                attachment_key: None,
                collections: self.collections_of(id),
            }),
        }
    }

    /// The item's authors in order; where it has none, its editors.
    fn authors(&self, id: i64) -> Vec<Author> {
        let creators = self.creators.get(&id).map_or(&[][..], Vec::as_slice);
        let of_type = |kind: &str| -> Vec<Author> {
            creators
                .iter()
                .filter(|c| c.creator_type == kind)
                .filter_map(|c| {
                    let last = text::clean(&c.last)?;
                    Some(if c.single_field {
                        Author::Organisation { name: last }
                    } else {
                        Author::person(last, text::clean(&c.first).unwrap_or_default())
                    })
                })
                .collect()
        };
        let authors = of_type("author");
        if authors.is_empty() {
            of_type("editor")
        } else {
            authors
        }
    }

    /// The library: every attachment of a readable item, as a document or as skipped.
    fn library(
        &self,
        dir: &Path,
        options: &ZoteroOptions,
        keys: &HashMap<(i64, String), String>,
    ) -> ZoteroLibrary {
        let readable = |item: &ItemRow| !item.trashed && self.libraries.contains_key(&item.library);
        let mut works: HashMap<i64, Work> = HashMap::new();
        let mut library = ZoteroLibrary::default();
        for attachment in &self.attachments {
            let Some(own) = self.items.get(&attachment.item).filter(|i| readable(i)) else {
                continue;
            };
            let (owner, work) = match attachment.parent {
                Some(parent_id) => {
                    let Some(parent) = self
                        .items
                        .get(&parent_id)
                        .filter(|p| readable(p) && !NOT_WORKS.contains(&p.type_name.as_str()))
                    else {
                        continue;
                    };
                    let work = works.entry(parent_id).or_insert_with(|| {
                        let key = keys.get(&(parent.library, parent.key.clone())).cloned();
                        self.work(parent_id, parent, key)
                    });
                    (parent, work.clone())
                }
                None => (own, self.standalone_work(attachment.item, own)),
            };
            let is_group = self
                .libraries
                .get(&own.library)
                .is_some_and(|l| l.group.is_some());
            match self.attachment_path(dir, options, attachment, &own.key, is_group) {
                Ok(Some(path)) => {
                    let mut work = work;
                    if let Some(link) = work.zotero.as_mut() {
                        link.attachment_key = Some(own.key.clone());
                    }
                    library.documents.push(ReferencedFile { path, work });
                }
                Ok(None) => {}
                Err(reason) => library.skipped.push(SkippedAttachment {
                    item_key: owner.key.clone(),
                    attachment_key: own.key.clone(),
                    title: work.title().unwrap_or_default().to_string(),
                    reason,
                }),
            }
        }
        let collections: BTreeSet<String> = self
            .collections
            .iter()
            .filter(|(_, c)| self.libraries.contains_key(&c.library))
            .filter_map(|(id, _)| self.collection_path(*id))
            .collect();
        library.collections = collections.into_iter().collect();
        library
    }

    /// A standalone attachment's work: its own title, and where it is in Zotero.
    fn standalone_work(&self, id: i64, item: &ItemRow) -> Work {
        Work {
            title: self.text(id, "title").map(sourced),
            zotero: Some(ZoteroLink {
                group: self.libraries.get(&item.library).and_then(|l| l.group),
                item_key: item.key.clone(),
                attachment_key: None,
                collections: self.collections_of(id),
            }),
            ..Work::default()
        }
    }

    /// The readable file of an attachment; `Ok(None)` for one that is not a file (a link to a
    /// web page, an image embedded in a note).
    fn attachment_path(
        &self,
        dir: &Path,
        options: &ZoteroOptions,
        attachment: &AttachmentRow,
        key: &str,
        in_group: bool,
    ) -> Result<Option<PathBuf>, SkipReason> {
        let stored = attachment
            .path
            .as_deref()
            .map(str::trim)
            .unwrap_or_default();
        let path = match attachment.link_mode {
            Some(IMPORTED_FILE | IMPORTED_URL) => {
                if stored.is_empty() {
                    return Err(SkipReason::NoPath);
                }
                let name = stored.strip_prefix("storage:").unwrap_or(stored);
                let unsafe_name = name.is_empty()
                    || name.contains(['/', '\\'])
                    || name == ".."
                    || Path::new(name).is_absolute();
                if unsafe_name {
                    return Err(SkipReason::UnsafePath {
                        stored: stored.to_string(),
                    });
                }
                dir.join("storage").join(key).join(name)
            }
            Some(LINKED_FILE) => {
                if stored.is_empty() {
                    return Err(SkipReason::NoPath);
                }
                if in_group {
                    return Err(SkipReason::UnsafePath {
                        stored: stored.to_string(),
                    });
                }
                resolve_linked(stored, options)?
            }
            _ => return Ok(None),
        };
        let extension = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase)
            .unwrap_or_default();
        if !READABLE_EXTENSIONS.contains(&extension.as_str()) {
            return Err(SkipReason::UnsupportedFormat {
                path,
                content_type: attachment.content_type.clone().filter(|c| !c.is_empty()),
            });
        }
        if !path.is_file() {
            return Err(SkipReason::MissingFile { path });
        }
        Ok(Some(path))
    }
}

/// A linked file's path: absolute as stored, or `attachments:` + a path relative to the
/// linked attachment base directory (Zotero writes `/` between its parts on every system).
fn resolve_linked(stored: &str, options: &ZoteroOptions) -> Result<PathBuf, SkipReason> {
    if let Some(relative) = stored.strip_prefix("attachments:") {
        let base = options.linked_attachment_base.as_ref().ok_or_else(|| {
            SkipReason::UnresolvedLinkedPath {
                stored: stored.to_string(),
            }
        })?;
        let mut path = base.clone();
        for part in relative.split(['/', '\\']).filter(|p| !p.is_empty()) {
            if part == ".." {
                return Err(SkipReason::UnsafePath {
                    stored: stored.to_string(),
                });
            }
            path.push(part);
        }
        return Ok(path);
    }
    let path = PathBuf::from(stored);
    if path.is_absolute() {
        Ok(path)
    } else {
        Err(SkipReason::UnresolvedLinkedPath {
            stored: stored.to_string(),
        })
    }
}

fn sourced<T>(value: T) -> Sourced<T> {
    Sourced::new(value, FieldSource::ReferenceManager)
}

/// Zotero's item type as a work type.
fn work_type(type_name: &str) -> WorkType {
    match type_name {
        "journalArticle" => WorkType::JournalArticle,
        "conferencePaper" => WorkType::ConferencePaper,
        "book" => WorkType::Book,
        "bookSection" => WorkType::Chapter,
        "thesis" => WorkType::Thesis,
        "report" => WorkType::Report,
        "webpage" => WorkType::WebPage,
        _ => WorkType::Other,
    }
}

/// A date as Zotero stores it: `2004-00-00 2004`, `1998-03-15 March 15, 1998` (ISO with zeros
/// for what is unknown, then the text as typed); a year in the typed text where the first part
/// is not a date.
fn zotero_date(stored: &str) -> Option<WorkDate> {
    // Zotero writes year 0000 where only the typed text has a date (`0000-00-00 Spring 1987`).
    WorkDate::parse_iso(stored)
        .filter(|d| d.year > 0)
        .or_else(|| WorkDate::find_year(stored))
}

/// The value of the first line of Extra that starts with one of `labels` and a colon
/// (`Citation Key: marrow1998`), compared without case.
fn extra_line<'e>(extra: &'e str, labels: &[&str]) -> Option<&'e str> {
    extra.lines().find_map(|line| {
        let (label, value) = line.split_once(':')?;
        let label = label.trim().to_lowercase();
        labels
            .contains(&label.as_str())
            .then_some(value.trim())
            .filter(|v| !v.is_empty())
    })
}

/// Better BibTeX's citation keys, by (library id, item key): from its own database where it is
/// still there, and from its store for read-only libraries.
fn better_bibtex_keys(dir: &Path) -> Result<HashMap<(i64, String), String>, ReferencesError> {
    let mut keys = HashMap::new();
    let read_only = dir.join(BETTER_BIBTEX_READ_ONLY);
    if read_only.is_file() {
        // BBT's own names: `itemKey`, `libraryID`, `citationKey`.
        #[derive(Deserialize)]
        struct StoredKey {
            #[serde(rename = "itemKey")]
            item_key: String,
            #[serde(rename = "libraryID")]
            library_id: i64,
            #[serde(rename = "citationKey")]
            citation_key: String,
        }
        let json = std::fs::read(&read_only).map_err(|source| ReferencesError::Io {
            path: read_only.clone(),
            source,
        })?;
        let stored: Vec<StoredKey> =
            serde_json::from_slice(&json).map_err(|e| ReferencesError::Unreadable {
                path: read_only.clone(),
                message: e.to_string(),
            })?;
        for key in stored {
            if let Some(citation_key) = text::clean(&key.citation_key) {
                keys.insert((key.library_id, key.item_key), citation_key);
            }
        }
    }
    let db = dir.join(BETTER_BIBTEX_FILE);
    if db.is_file() {
        let Snapshot { connection, .. } = &snapshot::open(&db)?;
        let database = |source| ReferencesError::Database {
            path: db.clone(),
            source,
        };
        // Better BibTeX before version 6 kept a different store in this file, without keys
        // in a table of their own.
        if snapshot::has_table(connection, "citationkey").map_err(database)? {
            let rows = collect(
                connection,
                "SELECT libraryID, itemKey, citationKey FROM citationkey",
                |row| {
                    Ok((
                        row.get::<_, i64>(0)?,
                        row.get::<_, String>(1)?,
                        snapshot::text(row.get_ref(2)?),
                    ))
                },
            )
            .map_err(database)?;
            for (library, item_key, citation_key) in rows {
                if let Some(citation_key) = citation_key.as_deref().and_then(text::clean) {
                    keys.insert((library, item_key), citation_key);
                }
            }
        }
    }
    Ok(keys)
}

/// Every row of `sql`, mapped.
fn collect<T>(
    connection: &Connection,
    sql: &str,
    map: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<Vec<T>> {
    connection
        .prepare(sql)?
        .query_map([], map)?
        .collect::<rusqlite::Result<Vec<T>>>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_read_in_zoteros_stored_form() {
        assert_eq!(zotero_date("2004-00-00 2004"), Some(WorkDate::year(2004)));
        assert_eq!(
            zotero_date("1998-03-15 March 15, 1998"),
            Some(WorkDate {
                year: 1998,
                month: Some(3),
                day: Some(15)
            })
        );
        assert_eq!(
            zotero_date("0000-00-00 Spring 1987"),
            Some(WorkDate::year(1987))
        );
        assert_eq!(zotero_date("0000-00-00 n.d."), None);
    }

    #[test]
    fn extra_lines_are_found_by_label_without_case() {
        let extra = "Some note\ncitation key:  marrow1998 \nDOI: 10.1/x";
        assert_eq!(extra_line(extra, &["citation key"]), Some("marrow1998"));
        assert_eq!(extra_line(extra, &["doi"]), Some("10.1/x"));
        assert_eq!(extra_line(extra, &["bibtex"]), None);
    }

    #[test]
    fn linked_paths_resolve_against_the_base_directory_and_never_above_it() {
        let options = ZoteroOptions {
            linked_attachment_base: Some(PathBuf::from("/base")),
        };
        assert_eq!(
            resolve_linked("attachments:papers/a.pdf", &options),
            Ok(PathBuf::from("/base/papers/a.pdf"))
        );
        assert!(matches!(
            resolve_linked("attachments:../a.pdf", &options),
            Err(SkipReason::UnsafePath { .. })
        ));
        assert!(matches!(
            resolve_linked("attachments:papers/a.pdf", &ZoteroOptions::default()),
            Err(SkipReason::UnresolvedLinkedPath { .. })
        ));
        assert!(matches!(
            resolve_linked("papers/a.pdf", &options),
            Err(SkipReason::UnresolvedLinkedPath { .. })
        ));
    }
}
