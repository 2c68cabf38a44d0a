//! A stand-in for doi.org and arXiv's API on 127.0.0.1, for tests (feature `fixture`): a plain
//! HTTP/1.1 server on a thread of its own that answers the requests it was given replies for,
//! 404 to the rest, and records every request it saw (its path and query, `Accept`,
//! `User-Agent`), so a test can prove what was sent, and that nothing was.
//!
//! [`StandInRegistry::config`] is the [`LookupConfig`] that points look-ups at it: DOIs at
//! `/doi/{doi}`, arXiv's API at `/arxiv/api/query?id_list={id}`. [`CROSSREF_CSL`] and
//! [`ARXIV_ATOM`] are answers shaped as the real services give them.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use url::Url;

use crate::lookup::LookupConfig;

/// The DOI of [`CROSSREF_CSL`].
pub const CROSSREF_DOI: &str = "10.5555/reindeer.1998";

/// A CSL-JSON record as doi.org's content negotiation gives it for a Crossref DOI (Crossref's
/// `transform`): the fields the reader reads among many it does not (ISSN and ISBN lists,
/// affiliations, `created`, `link`).
pub const CROSSREF_CSL: &str = r#"{
  "indexed": {"date-parts": [[2024, 1, 9]], "date-time": "2024-01-09T12:00:00Z", "timestamp": 1704801600000},
  "reference-count": 12,
  "publisher": "Nordic Society of Telemetry",
  "issue": "3",
  "content-domain": {"domain": [], "crossmark-restriction": false},
  "short-container-title": ["J. Arct. Telem."],
  "published-print": {"date-parts": [[1998, 3]]},
  "DOI": "10.5555/Reindeer.1998",
  "type": "article-journal",
  "created": {"date-parts": [[2006, 10, 5]], "date-time": "2006-10-05T12:56:56Z", "timestamp": 1160053016000},
  "page": "117-129",
  "source": "Crossref",
  "is-referenced-by-count": 4,
  "title": "Satellite telemetry of reindeer herds in winter",
  "prefix": "10.5555",
  "volume": "12",
  "author": [
    {"given": "Jane", "family": "Marrow", "sequence": "first", "affiliation": [{"name": "University of Tromsø"}]},
    {"given": "Kjetil", "family": "Ødegård", "sequence": "additional", "affiliation": []}
  ],
  "member": "7822",
  "container-title": "Journal of Arctic Telemetry",
  "original-title": [],
  "link": [{"URL": "https://example.org/reindeer.pdf", "content-type": "application/pdf"}],
  "deposited": {"date-parts": [[2016, 12, 6]], "date-time": "2016-12-06T10:00:00Z", "timestamp": 1481018400000},
  "score": 1,
  "subtitle": [],
  "short-title": [],
  "issued": {"date-parts": [[1998, 3, 15]]},
  "references-count": 12,
  "journal-issue": {"issue": "3", "published-print": {"date-parts": [[1998, 3]]}},
  "URL": "https://doi.org/10.5555/reindeer.1998",
  "ISSN": ["0000-0019", "1234-5679"],
  "ISBN": ["978-0-262-03384-9", "9780262033848"],
  "subject": ["Ecology"],
  "published": {"date-parts": [[1998, 3, 15]]}
}"#;

/// The arXiv id of [`ARXIV_ATOM`].
pub const ARXIV_ID: &str = "2310.11511";

/// arXiv's API's answer for [`ARXIV_ID`]: an Atom feed with one entry, a title broken over
/// lines, three authors, the journal's DOI and its reference.
pub const ARXIV_ATOM: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<feed xmlns="http://www.w3.org/2005/Atom">
  <link href="http://arxiv.org/api/query?search_query%3D%26id_list%3D2310.11511%26start%3D0%26max_results%3D10" rel="self" type="application/atom+xml"/>
  <title type="html">ArXiv Query: search_query=&amp;id_list=2310.11511&amp;start=0&amp;max_results=10</title>
  <id>http://arxiv.org/api/cHxbiOdZaP56ODnBPIenZhzg5f8</id>
  <updated>2024-01-09T00:00:00-05:00</updated>
  <opensearch:totalResults xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/">1</opensearch:totalResults>
  <entry>
    <id>http://arxiv.org/abs/2310.11511v1</id>
    <updated>2023-10-17T17:41:14Z</updated>
    <published>2023-10-17T17:41:14Z</published>
    <title>Self-RAG: Learning to Retrieve, Generate, and Critique through
  Self-Reflection</title>
    <summary>  Despite their remarkable capabilities, large language models (LLMs) often
produce responses containing factual inaccuracies &amp; more.</summary>
    <author>
      <name>Akari Asai</name>
    </author>
    <author>
      <name>Zeqiu Wu</name>
      <arxiv:affiliation xmlns:arxiv="http://arxiv.org/schemas/atom">University of Washington</arxiv:affiliation>
    </author>
    <author>
      <name>Hannaneh Hajishirzi</name>
    </author>
    <arxiv:doi xmlns:arxiv="http://arxiv.org/schemas/atom">10.5555/SelfRAG.2024</arxiv:doi>
    <link title="doi" href="http://dx.doi.org/10.5555/SelfRAG.2024" rel="related"/>
    <arxiv:comment xmlns:arxiv="http://arxiv.org/schemas/atom">30 pages, 2 figures, 12 tables</arxiv:comment>
    <arxiv:journal_ref xmlns:arxiv="http://arxiv.org/schemas/atom">ICLR 2024 &amp; oral</arxiv:journal_ref>
    <link href="http://arxiv.org/abs/2310.11511v1" rel="alternate" type="text/html"/>
    <link title="pdf" href="http://arxiv.org/pdf/2310.11511v1" rel="related" type="application/pdf"/>
    <arxiv:primary_category xmlns:arxiv="http://arxiv.org/schemas/atom" term="cs.CL" scheme="http://arxiv.org/schemas/atom"/>
    <category term="cs.CL" scheme="http://arxiv.org/schemas/atom"/>
  </entry>
</feed>
"#;

/// What the stand-in answers to one path (with its query).
#[derive(Debug, Clone)]
pub enum StandInReply {
    /// 200 with this body.
    Body {
        content_type: &'static str,
        body: Vec<u8>,
    },
    /// This status, with a short text body.
    Status(u16),
    /// 302 to another path of the stand-in (as doi.org sends a look-up on to the
    /// registration agency).
    RedirectTo(String),
    /// Takes the request and never answers (until the stand-in is dropped).
    Silent,
}

/// One request the stand-in saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenRequest {
    /// The path with its query, as sent (`/doi/10.5555/reindeer.1998`).
    pub target: String,
    pub accept: Option<String>,
    pub user_agent: Option<String>,
}

/// A stand-in registry; stops serving when dropped.
#[derive(Debug)]
pub struct StandInRegistry {
    base: Url,
    seen: Arc<Mutex<Vec<SeenRequest>>>,
    stop: Arc<AtomicBool>,
}

impl StandInRegistry {
    /// Serves `replies` (by path with query, e.g. `/doi/10.5555/reindeer.1998`) on a free port
    /// of 127.0.0.1.
    pub fn start(replies: HashMap<String, StandInReply>) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let base = Url::parse(&format!("http://{}/", listener.local_addr()?))
            .map_err(std::io::Error::other)?;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let replies = Arc::new(replies);
        {
            let (seen, stop) = (seen.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            let (seen, stop, replies) =
                                (seen.clone(), stop.clone(), replies.clone());
                            std::thread::spawn(move || serve(stream, &replies, &seen, &stop));
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(5)),
                    }
                }
            });
        }
        Ok(Self { base, seen, stop })
    }

    /// The stand-in answering [`CROSSREF_CSL`] for [`CROSSREF_DOI`] (through a redirect, as
    /// doi.org does) and [`ARXIV_ATOM`] for [`ARXIV_ID`].
    pub fn with_canned_records() -> std::io::Result<Self> {
        Self::start(HashMap::from([
            (
                format!("/doi/{CROSSREF_DOI}"),
                StandInReply::RedirectTo(format!("/crossref/works/{CROSSREF_DOI}/transform")),
            ),
            (
                format!("/crossref/works/{CROSSREF_DOI}/transform"),
                StandInReply::Body {
                    content_type: "application/vnd.citationstyles.csl+json",
                    body: CROSSREF_CSL.as_bytes().to_vec(),
                },
            ),
            (
                format!("/arxiv/api/query?id_list={ARXIV_ID}"),
                StandInReply::Body {
                    content_type: "application/atom+xml; charset=utf-8",
                    body: ARXIV_ATOM.as_bytes().to_vec(),
                },
            ),
        ]))
    }

    /// Look-ups sent here, each given `timeout`.
    pub fn config(&self, timeout: Duration) -> LookupConfig {
        LookupConfig {
            doi_resolver: self.url("doi"),
            arxiv_api: self.url("arxiv/api"),
            timeout,
        }
    }

    fn url(&self, path: &str) -> Url {
        let mut url = self.base.clone();
        url.set_path(path);
        url
    }

    /// Every request seen so far, in order.
    pub fn requests(&self) -> Vec<SeenRequest> {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Drop for StandInRegistry {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Reads one request from `stream` and answers it.
fn serve(
    stream: TcpStream,
    replies: &HashMap<String, StandInReply>,
    seen: &Mutex<Vec<SeenRequest>>,
    stop: &AtomicBool,
) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut reader = BufReader::new(&stream);
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    let target = request_line
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_string();
    let mut headers = HashMap::new();
    loop {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) if line.trim().is_empty() => break,
            Ok(_) => {
                if let Some((name, value)) = line.split_once(':') {
                    headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_string());
                }
            }
        }
    }
    seen.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(SeenRequest {
            target: target.clone(),
            accept: headers.get("accept").cloned(),
            user_agent: headers.get("user-agent").cloned(),
        });
    let reply = replies
        .get(&target)
        .cloned()
        .unwrap_or(StandInReply::Status(404));
    let (status, extra, content_type, body) = match reply {
        StandInReply::Body { content_type, body } => (200, String::new(), content_type, body),
        StandInReply::Status(status) => (
            status,
            String::new(),
            "text/plain",
            format!("status {status}").into_bytes(),
        ),
        StandInReply::RedirectTo(path) => (
            302,
            format!("Location: {path}\r\n"),
            "text/html",
            b"<html><body>Handle Redirect</body></html>".to_vec(),
        ),
        StandInReply::Silent => {
            let until = Instant::now() + Duration::from_secs(120);
            while !stop.load(Ordering::SeqCst) && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(20));
            }
            return;
        }
    };
    let head = format!(
        "HTTP/1.1 {status} Stand-in\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n",
        body.len()
    );
    let mut stream = &stream;
    // The client may stop reading (an answer too large): that is no failure of the stand-in.
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(&body);
    let _ = stream.flush();
}
