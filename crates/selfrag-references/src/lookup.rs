//! Looking a work up by its identifier, for a person who turned look-ups on: a DOI at doi.org
//! (which answers for Crossref's and DataCite's DOIs alike with a CSL-JSON record, through its
//! content negotiation: `Accept: application/vnd.citationstyles.csl+json`, following the
//! redirect to the registration agency), an arXiv id at arXiv's API (`query?id_list=`, an Atom
//! feed). Each answer becomes a [`Work`] whose fields come from [`FieldSource::Lookup`].
//!
//! What leaves the machine is the identifier alone, in the request's address, with a
//! User-Agent that names the app: nothing of the document's text. Every request has a time
//! limit ([`LOOKUP_TIMEOUT`] by default, redirects and the body included), an answer larger
//! than [`RECORD_LIMIT`] is refused, and each failure is a [`ReferencesError`] naming the
//! service and the identifier. The services' addresses are [`LookupConfig`]'s
//! (`SELFRAG_DOI_RESOLVER`, `SELFRAG_ARXIV_API`): tests point them at a local stand-in.
//! Whether to look anything up at all is the caller's business.

use std::borrow::Cow;
use std::io::Read;
use std::time::Duration;

use quick_xml::events::{BytesRef, Event};
use quick_xml::name::ResolveResult;
use quick_xml::reader::NsReader;
use selfrag_works::{Author, FieldSource, Sourced, Work, WorkDate, identifiers};
use url::Url;

use crate::{ReferencesError, bibliography, text};

/// The environment variable that points DOI look-ups at another resolver.
pub const DOI_RESOLVER_ENV: &str = "SELFRAG_DOI_RESOLVER";
/// The environment variable that points arXiv look-ups at another API.
pub const ARXIV_API_ENV: &str = "SELFRAG_ARXIV_API";
/// Where DOIs are looked up by default.
pub const DEFAULT_DOI_RESOLVER: &str = "https://doi.org";
/// Where arXiv ids are looked up by default.
pub const DEFAULT_ARXIV_API: &str = "https://export.arxiv.org/api";
/// How long one look-up may take, redirects and the answer's body included.
pub const LOOKUP_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest answer read: a record is a few kilobytes.
pub const RECORD_LIMIT: usize = 1 << 20;

/// Sent with every request: the services ask callers to name themselves.
const USER_AGENT: &str = concat!(
    "selfrag-desktop/",
    env!("CARGO_PKG_VERSION"),
    " (look-up of a work by its DOI or arXiv id)"
);
/// The record doi.org is asked for.
const CSL_JSON: &str = "application/vnd.citationstyles.csl+json";
/// Atom's namespace (the feed's elements) and arXiv's (`arxiv:doi`, `arxiv:journal_ref`).
const ATOM: &str = "http://www.w3.org/2005/Atom";
const ARXIV: &str = "http://arxiv.org/schemas/atom";

/// Where look-ups are sent and how long each may take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LookupConfig {
    /// The DOI resolver: `GET {doi_resolver}/{doi}`.
    pub doi_resolver: Url,
    /// arXiv's API: `GET {arxiv_api}/query?id_list={id}`.
    pub arxiv_api: Url,
    pub timeout: Duration,
}

impl Default for LookupConfig {
    /// doi.org and export.arxiv.org, 10 s each.
    fn default() -> Self {
        Self {
            doi_resolver: constant_url(DEFAULT_DOI_RESOLVER),
            arxiv_api: constant_url(DEFAULT_ARXIV_API),
            timeout: LOOKUP_TIMEOUT,
        }
    }
}

// The defaults are constants: parsing them cannot fail (the tests below parse them).
#[allow(clippy::expect_used)]
fn constant_url(url: &str) -> Url {
    Url::parse(url).expect("a constant address")
}

impl LookupConfig {
    /// The defaults, with `SELFRAG_DOI_RESOLVER` and `SELFRAG_ARXIV_API` where they are set
    /// (an empty value counts as unset); one that is no http(s) address is an error naming it.
    pub fn from_env() -> Result<Self, ReferencesError> {
        let mut config = Self::default();
        let var = |name| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        if let Some(value) = var(DOI_RESOLVER_ENV) {
            config.doi_resolver = service_url(DOI_RESOLVER_ENV, &value, DEFAULT_DOI_RESOLVER)?;
        }
        if let Some(value) = var(ARXIV_API_ENV) {
            config.arxiv_api = service_url(ARXIV_API_ENV, &value, DEFAULT_ARXIV_API)?;
        }
        Ok(config)
    }

    /// The services this configuration sends identifiers to, as a person reads them:
    /// `doi.org, export.arxiv.org`.
    pub fn services(&self) -> String {
        format!(
            "{}, {}",
            service_name(&self.doi_resolver),
            service_name(&self.arxiv_api)
        )
    }
}

/// `value` as the base address of a service, checked; `variable` names it in the error.
fn service_url(
    variable: &'static str,
    value: &str,
    example: &'static str,
) -> Result<Url, ReferencesError> {
    let error = |message: String| ReferencesError::LookupAddress {
        variable,
        value: value.to_string(),
        message,
        example,
    };
    let url = Url::parse(value.trim()).map_err(|e| error(e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(error("not an http or https address".into()));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(error(
            "a base address has no `?` query or `#` fragment".into(),
        ));
    }
    Ok(url)
}

/// How an error names a service: its host, with the port where one is given
/// (`doi.org`, `127.0.0.1:8080`).
fn service_name(url: &Url) -> String {
    let host = url.host_str().unwrap_or("the service");
    match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_string(),
    }
}

/// The identifier a work is looked up by.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum WorkId {
    /// Bare and lower-cased, as [`Work::doi`] holds it.
    Doi(String),
    /// Without a version, as [`Work::arxiv`] holds it.
    Arxiv(String),
}

impl WorkId {
    /// The identifier to look `work` up by: its DOI (the published version's record, from
    /// its registration agency), else its arXiv id.
    pub fn of(work: &Work) -> Option<Self> {
        Work::text(&work.doi)
            .map(|doi| Self::Doi(doi.to_string()))
            .or_else(|| Work::text(&work.arxiv).map(|id| Self::Arxiv(id.to_string())))
    }

    /// Whether `record`, a looked-up record, was looked up by this identifier (a look-up's
    /// record carries the identifier it was asked for).
    pub fn was_looked_up_in(&self, record: &Work) -> bool {
        match self {
            Self::Doi(doi) => Work::text(&record.doi) == Some(doi.as_str()),
            Self::Arxiv(id) => Work::text(&record.arxiv) == Some(id.as_str()),
        }
    }
}

impl std::fmt::Display for WorkId {
    /// `DOI 10.1000/xyz`, `arXiv:2310.11511`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Doi(doi) => write!(f, "DOI {doi}"),
            Self::Arxiv(id) => write!(f, "arXiv:{id}"),
        }
    }
}

/// Looks works up at the services of a [`LookupConfig`]; one HTTP agent for every request.
#[derive(Debug, Clone)]
pub struct WorkLookup {
    agent: ureq::Agent,
    config: LookupConfig,
}

impl WorkLookup {
    pub fn new(config: LookupConfig) -> Self {
        let agent = ureq::AgentBuilder::new()
            .timeout(config.timeout)
            .timeout_connect(config.timeout)
            .user_agent(USER_AGENT)
            .build();
        Self { agent, config }
    }

    pub fn config(&self) -> &LookupConfig {
        &self.config
    }

    /// The service `id` is sent to, as errors name it (`doi.org`).
    pub fn service(&self, id: &WorkId) -> String {
        service_name(match id {
            WorkId::Doi(_) => &self.config.doi_resolver,
            WorkId::Arxiv(_) => &self.config.arxiv_api,
        })
    }

    /// The registry's record of the work `id` names, every field from
    /// [`FieldSource::Lookup`], carrying `id` itself. Blocks for up to the configured time.
    pub fn look_up(&self, id: &WorkId) -> Result<Work, ReferencesError> {
        let mut work = match id {
            WorkId::Doi(doi) => self.look_up_doi(id, doi)?,
            WorkId::Arxiv(arxiv) => self.look_up_arxiv(id, arxiv)?,
        }
        .from_source(FieldSource::Lookup);
        // A registry's key is not the person's: the citation key stays theirs or the
        // conventional one.
        work.citation_key = None;
        match id {
            WorkId::Doi(doi) => work.doi = Some(Sourced::new(doi.clone(), FieldSource::Lookup)),
            WorkId::Arxiv(arxiv) => {
                work.arxiv = Some(Sourced::new(arxiv.clone(), FieldSource::Lookup));
            }
        }
        Ok(work)
    }

    fn look_up_doi(&self, id: &WorkId, doi: &str) -> Result<Work, ReferencesError> {
        let mut url = self.config.doi_resolver.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            // The DOI's own slashes stay path separators, as doi.org takes them; `?`, `#`,
            // `%` and spaces in it are escaped.
            path.pop_if_empty().extend(doi.split('/'));
        }
        let body = self.get(id, &url, CSL_JSON)?;
        bibliography::csl_item_work(&body).map_err(|e| ReferencesError::LookupUnreadable {
            service: self.service(id),
            id: id.to_string(),
            message: format!(
                "not a CSL-JSON record: {e}; its registration agency may offer no record to \
                 look up"
            ),
        })
    }

    fn look_up_arxiv(&self, id: &WorkId, arxiv: &str) -> Result<Work, ReferencesError> {
        let mut url = self.config.arxiv_api.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().push("query");
        }
        url.query_pairs_mut().append_pair("id_list", arxiv);
        let body = self.get(id, &url, "application/atom+xml")?;
        let unreadable = |message: String| ReferencesError::LookupUnreadable {
            service: self.service(id),
            id: id.to_string(),
            message,
        };
        let feed = std::str::from_utf8(&body)
            .map_err(|_| unreadable("an answer that is not UTF-8 text".into()))?;
        let entry = arxiv_entry(feed).map_err(unreadable)?;
        match entry {
            Some(entry) if !entry.is_error && entry.title.is_some() => Ok(entry.work()),
            _ => Err(ReferencesError::LookupNotFound {
                service: self.service(id),
                id: id.to_string(),
            }),
        }
    }

    /// The body of `GET url`, asking for `accept`, at most [`RECORD_LIMIT`] bytes.
    fn get(&self, id: &WorkId, url: &Url, accept: &str) -> Result<Vec<u8>, ReferencesError> {
        let service = self.service(id);
        let unreachable = |message: String| ReferencesError::LookupUnreachable {
            service: service.clone(),
            id: id.to_string(),
            message,
        };
        let response = match self.agent.get(url.as_str()).set("Accept", accept).call() {
            Ok(response) => response,
            Err(ureq::Error::Status(404 | 410, _)) => {
                return Err(ReferencesError::LookupNotFound {
                    service,
                    id: id.to_string(),
                });
            }
            Err(ureq::Error::Status(406, _)) => {
                return Err(ReferencesError::LookupUnreadable {
                    service,
                    id: id.to_string(),
                    message: "it offers no record in the form asked for".into(),
                });
            }
            Err(ureq::Error::Status(status, _)) => {
                return Err(ReferencesError::LookupFailed {
                    service,
                    id: id.to_string(),
                    status,
                });
            }
            Err(ureq::Error::Transport(transport)) => {
                return Err(unreachable(self.transport_message(&transport)));
            }
        };
        let mut body = Vec::new();
        response
            .into_reader()
            .take(
                u64::try_from(RECORD_LIMIT)
                    .unwrap_or(u64::MAX)
                    .saturating_add(1),
            )
            .read_to_end(&mut body)
            .map_err(|e| unreachable(self.io_message(&e)))?;
        if body.len() > RECORD_LIMIT {
            return Err(ReferencesError::LookupTooLarge {
                service,
                id: id.to_string(),
                limit_mib: RECORD_LIMIT >> 20,
            });
        }
        Ok(body)
    }

    fn transport_message(&self, transport: &ureq::Transport) -> String {
        let timed_out = std::error::Error::source(transport)
            .and_then(|e| e.downcast_ref::<std::io::Error>())
            .is_some_and(is_timeout);
        if timed_out {
            self.no_answer()
        } else {
            transport.to_string()
        }
    }

    fn io_message(&self, error: &std::io::Error) -> String {
        if is_timeout(error) {
            self.no_answer()
        } else {
            error.to_string()
        }
    }

    fn no_answer(&self) -> String {
        format!(
            "no answer within {} s",
            self.config.timeout.as_secs_f64().max(0.1)
        )
    }
}

fn is_timeout(error: &std::io::Error) -> bool {
    matches!(
        error.kind(),
        std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
    )
}

/// What the first entry of an arXiv feed says.
#[derive(Debug, Default)]
struct ArxivEntry {
    /// arXiv's way of saying an id is malformed: an entry whose id is an error's address.
    is_error: bool,
    title: Option<String>,
    authors: Vec<String>,
    published: Option<String>,
    doi: Option<String>,
    journal_ref: Option<String>,
}

impl ArxivEntry {
    fn work(self) -> Work {
        let sourced = |v| Sourced::new(v, FieldSource::Lookup);
        let authors: Vec<Author> = self
            .authors
            .iter()
            .filter_map(|name| Author::parse_name(name))
            .collect();
        Work {
            title: self.title.as_deref().and_then(text::clean).map(sourced),
            authors: (!authors.is_empty()).then(|| Sourced::new(authors, FieldSource::Lookup)),
            date: self
                .published
                .as_deref()
                .and_then(WorkDate::parse_iso)
                .map(|d| Sourced::new(d, FieldSource::Lookup)),
            // The journal reference as its authors gave it (`Phys. Rev. D 76, 013009
            // (2007)`): where the paper appeared.
            container: self
                .journal_ref
                .as_deref()
                .and_then(text::clean)
                .map(sourced),
            doi: self
                .doi
                .as_deref()
                .and_then(identifiers::normalise_doi)
                .map(sourced),
            ..Work::default()
        }
    }
}

/// The element of an arXiv entry whose text is being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EntryField {
    Id,
    Title,
    AuthorName,
    Published,
    Doi,
    JournalRef,
}

/// An open element: its namespace where it is Atom's or arXiv's, and its local name.
type OpenElement = (Option<&'static str>, String);

/// The first `entry` of an arXiv Atom feed; `None` where the feed has none (no such id).
fn arxiv_entry(feed: &str) -> Result<Option<ArxivEntry>, String> {
    let mut reader = NsReader::from_str(feed);
    reader.config_mut().expand_empty_elements = true;
    let mut open: Vec<OpenElement> = Vec::new();
    let mut entry: Option<ArxivEntry> = None;
    let mut field: Option<(EntryField, String)> = None;
    loop {
        let (namespace, event) = reader
            .read_resolved_event()
            .map_err(|e| format!("not an Atom feed: {e}"))?;
        let namespace = match namespace {
            ResolveResult::Bound(ns) if ns.as_ref() == ATOM => Some(ATOM),
            ResolveResult::Bound(ns) if ns.as_ref() == ARXIV => Some(ARXIV),
            _ => None,
        };
        match event {
            Event::Start(e) => {
                open.push((namespace, e.local_name().as_ref().to_string()));
                if entry.is_none() && is_entry(&open) {
                    entry = Some(ArxivEntry::default());
                }
                // Inside the first entry (the feed ends being read with it), a field of it;
                // markup inside a field ends it.
                field = entry
                    .as_ref()
                    .and(entry_field(&open))
                    .map(|which| (which, String::new()));
            }
            Event::Text(t) => {
                if let Some((_, value)) = &mut field {
                    value.push_str(&t.xml10_content());
                }
            }
            Event::CData(c) => {
                if let Some((_, value)) = &mut field {
                    value.push_str(&c.xml10_content());
                }
            }
            Event::GeneralRef(r) => {
                if let Some((_, value)) = &mut field {
                    value.push_str(&reference_text(&r));
                }
            }
            Event::End(_) => {
                if let (Some((which, value)), Some(entry)) = (field.take(), entry.as_mut()) {
                    store(entry, which, value);
                }
                let was_entry = is_entry(&open);
                open.pop();
                if was_entry {
                    return Ok(entry);
                }
            }
            Event::Eof => return Ok(entry),
            _ => {}
        }
    }
}

fn is(element: &OpenElement, namespace: &str, name: &str) -> bool {
    element.0 == Some(namespace) && element.1 == name
}

/// Whether the innermost open element is an entry of the feed.
fn is_entry(open: &[OpenElement]) -> bool {
    matches!(open, [feed, entry] if is(feed, ATOM, "feed") && is(entry, ATOM, "entry"))
}

/// The field of the entry the innermost open element holds, if it is one that is read.
fn entry_field(open: &[OpenElement]) -> Option<EntryField> {
    match open {
        [_, entry, element] if is(entry, ATOM, "entry") => [
            (ATOM, "id", EntryField::Id),
            (ATOM, "title", EntryField::Title),
            (ATOM, "published", EntryField::Published),
            (ARXIV, "doi", EntryField::Doi),
            (ARXIV, "journal_ref", EntryField::JournalRef),
        ]
        .into_iter()
        .find(|(namespace, name, _)| is(element, namespace, name))
        .map(|(_, _, which)| which),
        [_, entry, author, name]
            if is(entry, ATOM, "entry") && is(author, ATOM, "author") && is(name, ATOM, "name") =>
        {
            Some(EntryField::AuthorName)
        }
        _ => None,
    }
}

fn store(entry: &mut ArxivEntry, which: EntryField, value: String) {
    let value = value.trim().to_string();
    match which {
        EntryField::Id => entry.is_error = value.contains("/api/errors"),
        EntryField::Title => entry.title = Some(value).filter(|v| !v.is_empty()),
        EntryField::AuthorName => entry.authors.push(value),
        EntryField::Published => entry.published = Some(value),
        EntryField::Doi => entry.doi = Some(value),
        EntryField::JournalRef => entry.journal_ref = Some(value),
    }
}

/// The text of an entity or character reference (`&amp;`, `&#233;`).
fn reference_text(r: &BytesRef<'_>) -> Cow<'static, str> {
    if let Ok(Some(c)) = r.resolve_char_ref() {
        return Cow::Owned(c.to_string());
    }
    Cow::Borrowed(match &**r {
        "amp" => "&",
        "lt" => "<",
        "gt" => ">",
        "quot" => "\"",
        "apos" => "'",
        _ => "",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_doi_org_and_arxiv_and_a_bad_address_names_its_variable() {
        let config = LookupConfig::default();
        assert_eq!(config.services(), "doi.org, export.arxiv.org");
        assert_eq!(config.timeout, LOOKUP_TIMEOUT);
        let error = service_url(DOI_RESOLVER_ENV, "ftp://doi.org", DEFAULT_DOI_RESOLVER)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(DOI_RESOLVER_ENV) && error.contains("https://doi.org"),
            "{error}"
        );
        assert!(service_url(ARXIV_API_ENV, "not a url", DEFAULT_ARXIV_API).is_err());
        assert_eq!(
            service_url(ARXIV_API_ENV, "http://127.0.0.1:9/api", DEFAULT_ARXIV_API)
                .unwrap()
                .as_str(),
            "http://127.0.0.1:9/api"
        );
    }

    #[test]
    fn a_work_is_looked_up_by_its_doi_first_and_names_it() {
        let mut work = Work {
            arxiv: Some(Sourced::new("2310.11511".into(), FieldSource::Identifier)),
            ..Work::default()
        };
        assert_eq!(WorkId::of(&work), Some(WorkId::Arxiv("2310.11511".into())));
        work.doi = Some(Sourced::new("10.1000/xyz".into(), FieldSource::Identifier));
        let id = WorkId::of(&work).unwrap();
        assert_eq!(id, WorkId::Doi("10.1000/xyz".into()));
        assert_eq!(id.to_string(), "DOI 10.1000/xyz");
        assert!(id.was_looked_up_in(&work));
        assert!(!WorkId::Doi("10.1000/other".into()).was_looked_up_in(&work));
        assert_eq!(WorkId::of(&Work::default()), None);
    }

    #[test]
    fn an_error_entry_and_an_empty_feed_are_no_record() {
        let error = r#"<feed xmlns="http://www.w3.org/2005/Atom"><entry>
            <id>http://arxiv.org/api/errors#incorrect_id_format_for_1234</id>
            <title>Error</title><summary>incorrect id format for 1234</summary></entry></feed>"#;
        assert!(arxiv_entry(error).unwrap().unwrap().is_error);
        let empty =
            r#"<feed xmlns="http://www.w3.org/2005/Atom"><title>ArXiv Query</title></feed>"#;
        assert!(arxiv_entry(empty).unwrap().is_none());
        assert!(arxiv_entry("<feed><entry>").is_ok_and(|e| e.is_none_or(|e| e.title.is_none())));
    }
}
