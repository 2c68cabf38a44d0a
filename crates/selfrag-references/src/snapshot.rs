//! A consistent private copy of an SQLite database that another program keeps open, locked and
//! written: how Zotero's `zotero.sqlite` (and Better BibTeX's database beside it) is read.
//!
//! Zotero opens its database with `locking_mode=EXCLUSIVE` and, where the file system allows,
//! in WAL mode: the latest commits may live only in `zotero.sqlite-wal` until a checkpoint
//! folds them in. So the database is never opened in place. Opening it normally would wait on
//! (or fight for) Zotero's lock; `?immutable=1` takes no lock but ignores the WAL, so it misses
//! the newest items and may read pages Zotero is rewriting. Instead the database file and its
//! companions (`-wal`, and `-journal` of a rollback-mode database) are copied together into a
//! private temporary folder and the copy is opened there: SQLite replays the copied WAL (or
//! rolls back a copied hot journal), so the copy holds exactly the last committed state. Each
//! file's size and modification time are taken before and after the copy; if Zotero wrote
//! meanwhile the copy is thrown away and made again. The original files are only ever read:
//! no lock is taken on them, nothing is written beside them.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use rusqlite::{Connection, OpenFlags};
use serde::{Deserialize, Serialize};

use crate::ReferencesError;

/// The files SQLite keeps beside a database while it is open, by suffix: the write-ahead log
/// and the rollback journal. Never `-shm`: it is an index SQLite rebuilds from the WAL.
const COMPANIONS: [&str; 2] = ["-wal", "-journal"];

/// How often a copy is tried before giving up on a database that keeps changing.
const ATTEMPTS: u32 = 6;

/// A file's size and modification time: what changes when a program writes to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FileStamp {
    pub len: u64,
    pub modified: Option<SystemTime>,
}

impl FileStamp {
    /// The stamp of `path`; `None` where there is no such file.
    pub(crate) fn of(path: &Path) -> Result<Option<Self>, ReferencesError> {
        match std::fs::metadata(path) {
            Ok(meta) => Ok(Some(Self {
                len: meta.len(),
                modified: meta.modified().ok(),
            })),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(ReferencesError::Io {
                path: path.to_path_buf(),
                source,
            }),
        }
    }
}

/// `path` with `suffix` appended to its file name (`zotero.sqlite` + `-wal`).
pub(crate) fn companion(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
}

/// The stamps of a database and each of its companions, in [`COMPANIONS`]' order.
pub(crate) fn stamps(db: &Path) -> Result<[Option<FileStamp>; 3], ReferencesError> {
    Ok([
        FileStamp::of(db)?,
        FileStamp::of(&companion(db, COMPANIONS[0]))?,
        FileStamp::of(&companion(db, COMPANIONS[1]))?,
    ])
}

/// An open connection to a private copy of a database; the copy is deleted when it is dropped.
pub(crate) struct Snapshot {
    pub connection: Connection,
    /// Kept to delete the copy when the snapshot goes (after the connection: field order).
    _folder: tempfile::TempDir,
}

/// A consistent copy of the database at `db` (which must exist), opened.
pub(crate) fn open(db: &Path) -> Result<Snapshot, ReferencesError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ReferencesError::Io { path, source }
    };
    for attempt in 0..ATTEMPTS {
        if attempt > 0 {
            std::thread::sleep(Duration::from_millis(50 << attempt));
        }
        let before = stamps(db)?;
        let folder = tempfile::Builder::new()
            .prefix("selfrag-zotero-")
            .tempdir()
            .map_err(io(&std::env::temp_dir()))?;
        let name = db.file_name().unwrap_or_default();
        let copy = folder.path().join(name);
        std::fs::copy(db, &copy).map_err(io(db))?;
        let mut vanished = false;
        for (suffix, stamp) in COMPANIONS.iter().zip(&before[1..]) {
            let original = companion(db, suffix);
            match std::fs::copy(&original, companion(&copy, suffix)) {
                Ok(_) => {}
                // A journal deleted at a commit between the stamp and the copy: copy again.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => vanished |= stamp.is_some(),
                Err(source) => return Err(io(&original)(source)),
            }
        }
        if vanished || stamps(db)? != before {
            continue;
        }
        let database = |source| ReferencesError::Database {
            path: db.to_path_buf(),
            source,
        };
        // Read-write on the private copy only: SQLite must be able to replay the copied WAL or
        // roll back a copied hot journal. `query_only` then refuses any write.
        let connection = Connection::open_with_flags(
            &copy,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(database)?;
        connection
            .execute_batch("PRAGMA query_only = ON; SELECT count(*) FROM sqlite_master;")
            .map_err(database)?;
        return Ok(Snapshot {
            connection,
            _folder: folder,
        });
    }
    Err(ReferencesError::KeptChanging {
        path: db.to_path_buf(),
    })
}

/// Whether the snapshot's database has a table (or view) named `name`.
pub(crate) fn has_table(connection: &Connection, name: &str) -> Result<bool, rusqlite::Error> {
    connection.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type IN ('table', 'view') AND name = ?1",
        [name],
        |row| row.get::<_, i64>(0).map(|n| n > 0),
    )
}

/// A column's value as text, whatever SQLite stored it as (Zotero's `itemDataValues.value`
/// has no type: a volume may be stored as the integer 12).
pub(crate) fn text(value: rusqlite::types::ValueRef<'_>) -> Option<String> {
    use rusqlite::types::ValueRef;
    match value {
        ValueRef::Null | ValueRef::Blob(_) => None,
        ValueRef::Integer(i) => Some(i.to_string()),
        ValueRef::Real(r) => Some(r.to_string()),
        ValueRef::Text(t) => Some(String::from_utf8_lossy(t).into_owned()),
    }
}
