//! Where a library lives: a folder on this machine (the default), or a prefix in an object store
//! that several machines share (`s3://bucket/prefix`, `gs://bucket/prefix`, `az://container/prefix`).
//!
//! A shared library is LanceDB's own object-store support, not a storage layer of ours: its
//! tables are written by Lance, whose commits there are conditional puts (`If-None-Match: *` on
//! the next manifest), so several writers commit to one table with no lock service. Credentials
//! and endpoints come from each cloud's standard environment and files (`AWS_*` and `~/.aws`,
//! `GOOGLE_APPLICATION_CREDENTIALS`, `AZURE_STORAGE_*`), never from the location itself: a
//! location with a user name, password or query is refused.
//!
//! Before a shared library is used, [`check_store`] proves the store refuses to overwrite an
//! object under a conditional put; a store that overwrites it (S3-compatible servers from before
//! conditional writes) would let two machines' commits replace each other, and is refused.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use object_store::ObjectStoreExt as _;

use crate::IndexError;

/// Where a library lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LibraryLocation {
    /// A folder on this machine: the library, its state and its power-cut protection in it.
    Folder(PathBuf),
    /// A prefix in an object store, shared by every machine that opens it.
    Shared(StoreUri),
}

impl LibraryLocation {
    /// Reads a location as a person writes it: `s3://`, `gs://` or `az://` followed by a bucket
    /// (or container) and an optional prefix is shared; `file://` or anything without a scheme
    /// is a folder. Another scheme, or a store location with credentials, a query or no bucket,
    /// is an error that says what to write instead.
    pub fn parse(text: &str) -> Result<Self, IndexError> {
        let written = text.trim();
        // What an error repeats of it: never a query (an Azure SAS token is one) nor what comes
        // before an `@` (a user name and password).
        let shown = redacted(written);
        let invalid = |problem: &str| IndexError::Location {
            location: shown.clone(),
            problem: problem.to_owned(),
        };
        if written.is_empty() {
            return Err(invalid(
                "it is empty; give a folder, or s3://bucket/prefix, gs://bucket/prefix or az://container/prefix",
            ));
        }
        if written.chars().any(char::is_control) {
            return Err(invalid(
                "it holds a control character (a line break, a tab)",
            ));
        }
        let Some((scheme, _)) = written.split_once("://") else {
            // Absolute now: a relative folder would name another one from another directory.
            let folder = std::path::absolute(written).map_err(|e| invalid(&e.to_string()))?;
            return Ok(Self::Folder(folder));
        };
        // A Windows path such as C:\x has no "://"; anything with one is a URI.
        let scheme = scheme.to_ascii_lowercase();
        if scheme == "file" {
            let url = url::Url::parse(written).map_err(|e| invalid(&e.to_string()))?;
            return url.to_file_path().map(Self::Folder).map_err(|()| {
                invalid("it is not a local file URI; write the folder's path instead")
            });
        }
        if !STORE_SCHEMES.contains(&scheme.as_str()) {
            return Err(invalid(&format!(
                "{scheme}:// is not a store this build reads; use s3:// (Amazon S3, MinIO, R2, Ceph and other S3-compatible stores), gs:// or az://, or a folder"
            )));
        }
        let url = url::Url::parse(written).map_err(|e| invalid(&e.to_string()))?;
        if !url.username().is_empty() || url.password().is_some() {
            return Err(IndexError::Location {
                location: shown,
                problem: CREDENTIALS_IN_LOCATION.to_owned(),
            });
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(invalid(
                "it has a query or fragment; a library location is the bucket and a prefix only (endpoints and regions go in the environment, e.g. AWS_ENDPOINT_URL and AWS_REGION)",
            ));
        }
        let bucket = url.host_str().unwrap_or_default();
        if bucket.is_empty() {
            return Err(invalid(
                "it names no bucket; write it as s3://bucket/prefix",
            ));
        }
        // The URL parser has resolved `.` and `..` already.
        let prefix = url.path().trim_matches('/');
        let canonical = if prefix.is_empty() {
            format!("{scheme}://{bucket}")
        } else {
            format!("{scheme}://{bucket}/{prefix}")
        };
        Ok(Self::Shared(StoreUri {
            uri: canonical,
            scheme,
        }))
    }

    /// Whether several machines may share this library.
    pub fn is_shared(&self) -> bool {
        matches!(self, Self::Shared(_))
    }
}

impl std::fmt::Display for LibraryLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Folder(path) => write!(f, "{}", path.display()),
            Self::Shared(store) => f.write_str(&store.uri),
        }
    }
}

/// `text` as an error may show it: without a query or fragment, and with `…` for whatever
/// comes before an `@` in its authority.
fn redacted(text: &str) -> String {
    let end = text.find(['?', '#']).unwrap_or(text.len());
    let text = &text[..end];
    let Some((scheme, rest)) = text.split_once("://") else {
        return text.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://…@{}", &rest[at + 1..]),
        None => text.to_owned(),
    }
}

/// What a location with a user name or password gets told.
const CREDENTIALS_IN_LOCATION: &str = "it holds credentials; remove them from the location and \
     set them where the store's tools read them (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or \
     ~/.aws for s3://, GOOGLE_APPLICATION_CREDENTIALS for gs://, AZURE_STORAGE_ACCOUNT_NAME and \
     AZURE_STORAGE_ACCOUNT_KEY for az://)";

/// The schemes of the stores LanceDB is built with here.
const STORE_SCHEMES: [&str; 3] = ["s3", "gs", "az"];

/// A library's place in an object store: `scheme://bucket[/prefix]`, without a trailing slash.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StoreUri {
    uri: String,
    scheme: String,
}

impl StoreUri {
    pub fn as_str(&self) -> &str {
        &self.uri
    }

    /// Where requests go, as the errors name it: the endpoint the environment sets for this
    /// kind of store, else the cloud's own.
    pub fn endpoint(&self) -> String {
        let from_env = |names: &[&str]| {
            names
                .iter()
                .find_map(|n| std::env::var(n).ok().filter(|v| !v.trim().is_empty()))
        };
        let from_env = |names: &[&str]| from_env(names).map(|e| redacted(&e));
        match self.scheme.as_str() {
            "s3" => from_env(&["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT"])
                .unwrap_or_else(|| "Amazon S3 (no AWS_ENDPOINT_URL set)".to_owned()),
            "gs" => from_env(&["GOOGLE_STORAGE_ENDPOINT"])
                .unwrap_or_else(|| "Google Cloud Storage".to_owned()),
            _ => from_env(&["AZURE_STORAGE_ENDPOINT"])
                .unwrap_or_else(|| "Azure Blob Storage".to_owned()),
        }
    }

    /// The name of this library's folder of per-machine state (its job, its watched folders)
    /// inside the machine's data folder: readable, and distinct for distinct locations.
    pub fn state_folder_name(&self) -> String {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(self.uri.as_bytes());
        let readable: String = self
            .uri
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .take(48)
            .collect();
        let short: String = digest[..6].iter().map(|b| format!("{b:02x}")).collect();
        format!("{readable}-{short}")
    }
}

/// Options every connection to a shared library is made with: a bounded number of retries, so
/// an unreachable store is an error in seconds rather than minutes. Lance retries commit
/// conflicts itself, apart from these.
pub(crate) fn storage_options(retries: u32, retry_timeout: Duration) -> HashMap<String, String> {
    HashMap::from([
        ("client_max_retries".to_owned(), retries.to_string()),
        (
            "client_retry_timeout".to_owned(),
            retry_timeout.as_secs().to_string(),
        ),
    ])
}

/// Retries of a library's requests.
pub(crate) const LIBRARY_RETRIES: u32 = 3;
pub(crate) const LIBRARY_RETRY_TIMEOUT: Duration = Duration::from_secs(30);
/// The connection test's: it must answer within seconds.
const CHECK_RETRIES: u32 = 1;
const CHECK_RETRY_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest the connection test may take.
const CHECK_DEADLINE: Duration = Duration::from_secs(30);

/// Whether a conditional put wrote its object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Created {
    Yes,
    AlreadyThere,
}

/// The library's files in its store (its commit pointer, the connection test's probe), through
/// the same store and credentials Lance uses for its tables.
pub(crate) struct SharedStore {
    pub uri: StoreUri,
    store: Arc<lance::io::ObjectStore>,
    base: object_store::path::Path,
}

impl SharedStore {
    pub(crate) async fn connect(
        uri: &StoreUri,
        options: HashMap<String, String>,
    ) -> Result<Self, IndexError> {
        let params = lance::io::ObjectStoreParams {
            storage_options_accessor: Some(Arc::new(
                lance::io::StorageOptionsAccessor::with_static_options(options),
            )),
            ..Default::default()
        };
        let registry = Arc::new(lance::io::ObjectStoreRegistry::default());
        let (store, base) =
            lance::io::ObjectStore::from_uri_and_params(registry, uri.as_str(), &params)
                .await
                .map_err(|e| unreachable_store(uri, &e.to_string()))?;
        Ok(Self {
            uri: uri.clone(),
            store,
            base,
        })
    }

    /// The object `name` (parts separated by `/`) under the library's prefix.
    fn path(&self, name: &str) -> object_store::path::Path {
        name.split('/')
            .fold(self.base.clone(), |path, part| path.join(part))
    }

    /// The object `name` under the library, or `None` where there is none.
    pub(crate) async fn read(&self, name: &str) -> Result<Option<Vec<u8>>, IndexError> {
        match self.store.inner.get(&self.path(name)).await {
            Ok(got) => got
                .bytes()
                .await
                .map(|b| Some(b.to_vec()))
                .map_err(|e| self.failed(&format!("reading {name}"), &e)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.failed(&format!("reading {name}"), &e)),
        }
    }

    /// Whether the object `name` exists under the library.
    pub(crate) async fn exists(&self, name: &str) -> Result<bool, IndexError> {
        Ok(self.size_of(name).await?.is_some())
    }

    /// The size of the object `name` under the library, or `None` where there is none.
    pub(crate) async fn size_of(&self, name: &str) -> Result<Option<u64>, IndexError> {
        match self.store.inner.head(&self.path(name)).await {
            Ok(meta) => Ok(Some(meta.size)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.failed(&format!("looking for {name}"), &e)),
        }
    }

    /// Writes `name` only if no object of that name exists; `false` where one does (another
    /// machine wrote it first).
    pub(crate) async fn create(&self, name: &str, bytes: Vec<u8>) -> Result<bool, IndexError> {
        match self.try_create(name, bytes).await {
            Ok(created) => Ok(created == Created::Yes),
            Err(e) => Err(self.failed(&format!("writing {name}"), &e)),
        }
    }

    /// [`SharedStore::create`] with the store's own error.
    async fn try_create(&self, name: &str, bytes: Vec<u8>) -> Result<Created, object_store::Error> {
        let options = object_store::PutOptions {
            mode: object_store::PutMode::Create,
            ..Default::default()
        };
        match self
            .store
            .inner
            .put_opts(&self.path(name), bytes.into(), options)
            .await
        {
            Ok(_) => Ok(Created::Yes),
            Err(
                object_store::Error::AlreadyExists { .. }
                | object_store::Error::Precondition { .. },
            ) => Ok(Created::AlreadyThere),
            Err(e) => Err(e),
        }
    }

    async fn delete(&self, name: &str) -> Result<(), IndexError> {
        match self.store.inner.delete(&self.path(name)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.failed(&format!("removing {name}"), &e)),
        }
    }

    /// The bytes every object under the library takes.
    pub(crate) async fn size(&self) -> Result<u64, IndexError> {
        use futures::TryStreamExt as _;
        self.store
            .inner
            .list(Some(&self.base))
            .try_fold(0u64, |sum, meta| async move { Ok(sum + meta.size) })
            .await
            .map_err(|e| self.failed("listing the library", &e))
    }

    /// An error of the store, told apart: refused credentials, a missing bucket, or a store
    /// that cannot be reached.
    fn failed(&self, doing: &str, error: &object_store::Error) -> IndexError {
        match error {
            object_store::Error::PermissionDenied { .. }
            | object_store::Error::Unauthenticated { .. } => IndexError::Location {
                location: self.uri.as_str().to_owned(),
                problem: format!(
                    "{} refused the credentials while {doing} ({error}); check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), GOOGLE_APPLICATION_CREDENTIALS or AZURE_STORAGE_* and that they may read and write this bucket",
                    self.uri.endpoint()
                ),
            },
            _ if error.to_string().contains("NoSuchBucket") => IndexError::Location {
                location: self.uri.as_str().to_owned(),
                problem: format!(
                    "{} has no such bucket ({doing}); create it, or correct the location",
                    self.uri.endpoint()
                ),
            },
            _ => unreachable_store(&self.uri, &format!("{doing}: {error}")),
        }
    }
}

fn unreachable_store(uri: &StoreUri, detail: &str) -> IndexError {
    let endpoint = uri.endpoint();
    let http_allowed = std::env::var("AWS_ALLOW_HTTP")
        .is_ok_and(|v| v.trim().eq_ignore_ascii_case("true") || v.trim() == "1");
    if uri.scheme == "s3" && endpoint.starts_with("http://") && !http_allowed {
        return IndexError::Location {
            location: uri.as_str().to_owned(),
            problem: format!(
                "the endpoint {endpoint} is plain http, which is refused unless AWS_ALLOW_HTTP=true is set; set it for a store on this computer or a network you trust, or give the store's https address"
            ),
        };
    }
    IndexError::Location {
        location: uri.as_str().to_owned(),
        problem: format!(
            "the store at {} could not be used ({detail}); check that it is running and reachable from this computer, and its address (AWS_ENDPOINT_URL for S3-compatible stores; AWS_ALLOW_HTTP=true for one on plain http)",
            uri.endpoint()
        ),
    }
}

/// What the connection test found.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct StoreCheck {
    /// The endpoint the requests went to, in words.
    pub endpoint: String,
    /// Whether a library is there already (its `library.json`).
    pub library_exists: bool,
}

/// The connection test of a library's location: for a folder, that it can be made and written
/// in; for a shared library, as [`check_store`].
///
/// The connection test of a shared library's store: reads the library's commit pointer, writes
/// a probe object with a conditional put, writes it again under the same condition (which the
/// store must refuse), and removes it. Bounded in time; an error names the endpoint and what
/// to set. A store that accepts the second write does not honour conditional writes and is
/// refused.
pub async fn check_location(location: &LibraryLocation) -> Result<StoreCheck, IndexError> {
    match location {
        LibraryLocation::Shared(uri) => check_store(uri).await,
        LibraryLocation::Folder(dir) => {
            let cannot = |source| IndexError::Write {
                path: dir.clone(),
                source,
            };
            std::fs::create_dir_all(dir).map_err(cannot)?;
            let probe = dir.join(".selfrag-write-test");
            std::fs::write(&probe, b"").map_err(cannot)?;
            let _ = std::fs::remove_file(&probe);
            Ok(StoreCheck {
                endpoint: "this computer".to_owned(),
                library_exists: super::meta::LibraryMeta::path(dir).exists(),
            })
        }
    }
}

/// [`check_location`] of a shared library.
pub async fn check_store(uri: &StoreUri) -> Result<StoreCheck, IndexError> {
    match tokio::time::timeout(CHECK_DEADLINE, check_store_within(uri)).await {
        Ok(result) => result,
        Err(_) => Err(unreachable_store(
            uri,
            &format!("no answer within {} s", CHECK_DEADLINE.as_secs()),
        )),
    }
}

async fn check_store_within(uri: &StoreUri) -> Result<StoreCheck, IndexError> {
    let store =
        SharedStore::connect(uri, storage_options(CHECK_RETRIES, CHECK_RETRY_TIMEOUT)).await?;
    let library_exists = store.read(super::meta::META_FILE).await?.is_some();
    let probe = format!(
        ".selfrag-probe-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    );
    if !store.create(&probe, b"first".to_vec()).await? {
        return Err(IndexError::Location {
            location: uri.as_str().to_owned(),
            problem: format!("the probe object {probe} exists already; run the test again"),
        });
    }
    let second = store.try_create(&probe, b"second".to_vec()).await;
    let removed = store.delete(&probe).await;
    let no_conditional_writes = |what: &str| IndexError::Location {
        location: uri.as_str().to_owned(),
        problem: format!(
            "the store at {} {what}, so two computers' commits could replace each other; use a store with conditional writes (Amazon S3, MinIO, Cloudflare R2, Ceph RGW 19 or later), or a folder",
            uri.endpoint()
        ),
    };
    match second {
        Ok(Created::Yes) => {
            return Err(no_conditional_writes(
                "overwrote an object that a conditional write (If-None-Match: *) must leave alone",
            ));
        }
        Ok(Created::AlreadyThere) => {}
        Err(object_store::Error::NotImplemented { .. }) => {
            return Err(no_conditional_writes(
                "does not take conditional writes (If-None-Match: *)",
            ));
        }
        Err(e) if e.to_string().contains("501") || e.to_string().contains("NotImplemented") => {
            return Err(no_conditional_writes(
                "refused a conditional write (If-None-Match: *) as not implemented",
            ));
        }
        Err(e) => return Err(store.failed("writing the probe object again", &e)),
    }
    removed?;
    Ok(StoreCheck {
        endpoint: uri.endpoint(),
        library_exists,
    })
}

/// The folder of `location`'s per-machine state inside `data_dir`: the library folder itself
/// for a local library, `shared-libraries/<name>` for a shared one.
pub fn machine_state_dir(location: &LibraryLocation, data_dir: &Path) -> PathBuf {
    match location {
        LibraryLocation::Folder(dir) => dir.clone(),
        LibraryLocation::Shared(uri) => data_dir
            .join("shared-libraries")
            .join(uri.state_folder_name()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn shared(text: &str) -> String {
        match LibraryLocation::parse(text).unwrap() {
            LibraryLocation::Shared(uri) => uri.as_str().to_owned(),
            other => panic!("{text} read as {other:?}"),
        }
    }

    fn refused(text: &str) -> String {
        LibraryLocation::parse(text).unwrap_err().to_string()
    }

    #[test]
    fn store_locations_are_read_and_written_one_way() {
        assert_eq!(shared("s3://lab/papers/"), "s3://lab/papers");
        assert_eq!(shared("  S3://lab  "), "s3://lab");
        assert_eq!(shared("gs://lab/a/b"), "gs://lab/a/b");
        assert_eq!(shared("az://container/x"), "az://container/x");
        assert_eq!(shared("s3://lab/a/../b"), "s3://lab/b");
    }

    #[test]
    fn errors_repeat_no_secret_of_a_location() {
        for (written, secret) in [
            ("az://c/p?sv=2024&sig=SECRETSIG", "SECRETSIG"),
            (
                "https://acct.blob.core.windows.net/c?sig=SECRETSIG",
                "SECRETSIG",
            ),
            ("s3://key:SECRETPW@lab/papers", "SECRETPW"),
            ("s3://key:SECRETPW@[bad/papers", "SECRETPW"),
            ("ftp://user:SECRETPW@host/x#frag", "SECRETPW"),
        ] {
            let error = refused(written);
            assert!(!error.contains(secret), "{written}: {error}");
        }
        assert_eq!(redacted("s3://k:s@lab/p?x=1"), "s3://…@lab/p");
        assert_eq!(redacted("http://minio:9000"), "http://minio:9000");
        assert_eq!(redacted("/home/a@b/lib"), "/home/a@b/lib");
    }

    #[test]
    fn a_folder_is_absolute_and_has_no_control_character() {
        let LibraryLocation::Folder(dir) = LibraryLocation::parse("relative/library").unwrap()
        else {
            panic!("not a folder");
        };
        assert!(dir.is_absolute(), "{}", dir.display());
        assert!(dir.ends_with("relative/library"));
        assert!(refused("/tmp/a\nUse this library").contains("control character"));
    }

    #[test]
    fn folders_are_paths_or_file_uris() {
        assert_eq!(
            LibraryLocation::parse("/home/me/library").unwrap(),
            LibraryLocation::Folder(PathBuf::from("/home/me/library"))
        );
        assert_eq!(
            LibraryLocation::parse("file:///srv/library").unwrap(),
            LibraryLocation::Folder(PathBuf::from("/srv/library"))
        );
        // A drive path is absolute where drives exist; elsewhere it is a relative name.
        #[cfg(windows)]
        assert_eq!(
            LibraryLocation::parse(r"C:\Users\me\library").unwrap(),
            LibraryLocation::Folder(PathBuf::from(r"C:\Users\me\library"))
        );
    }

    #[test]
    fn what_cannot_be_a_location_says_what_to_write() {
        assert!(refused("").contains("is empty"));
        assert!(refused("http://lab/papers").contains("not a store"));
        assert!(refused("s3://key:secret@lab/papers").contains("holds credentials"));
        let credentials = refused("s3://key:secret@lab/papers");
        assert!(
            !credentials.contains("secret") && !credentials.contains("key:"),
            "{credentials}"
        );
        assert!(credentials.contains("s3://…@lab/papers"), "{credentials}");
        assert!(refused("s3://lab/papers?region=x").contains("query"));
        assert!(refused("s3:///papers").contains("no bucket"));
    }

    #[test]
    fn each_store_location_has_its_own_state_folder() {
        let a = LibraryLocation::parse("s3://lab/papers").unwrap();
        let b = LibraryLocation::parse("s3://lab/papers2").unwrap();
        let data = Path::new("/data");
        assert_ne!(machine_state_dir(&a, data), machine_state_dir(&b, data));
        assert!(machine_state_dir(&a, data).starts_with("/data/shared-libraries"));
        let folder = LibraryLocation::Folder(PathBuf::from("/x/library"));
        assert_eq!(
            machine_state_dir(&folder, data),
            PathBuf::from("/x/library")
        );
    }
}
