//! Looking works up against a stand-in for doi.org and arXiv's API on 127.0.0.1 (real HTTP,
//! the real client): a DOI's CSL-JSON record through doi.org's redirect, an arXiv id's Atom
//! entry, what each request carries (the identifier alone, the record type asked for, the
//! app's name), and the failures a person meets: no such record, a service that answers too
//! much, one that never answers, one that cannot be reached.

// Test code: a failed unwrap is a failed test, at the line that failed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::time::{Duration, Instant};

use selfrag_references::ReferencesError;
use selfrag_references::lookup::{LookupConfig, RECORD_LIMIT, WorkId, WorkLookup};
use selfrag_references::stand_in::{ARXIV_ID, CROSSREF_DOI, StandInRegistry, StandInReply};
use selfrag_works::{Author, FieldSource, Work, WorkDate, WorkType};

const TIMEOUT: Duration = Duration::from_secs(5);

fn doi(id: &str) -> WorkId {
    WorkId::Doi(id.into())
}

#[test]
fn a_doi_gets_its_registrys_csl_record_through_the_resolvers_redirect() {
    let registry = StandInRegistry::with_canned_records().unwrap();
    let lookup = WorkLookup::new(registry.config(TIMEOUT));
    let work = lookup.look_up(&doi(CROSSREF_DOI)).unwrap();

    assert_eq!(
        work.title(),
        Some("Satellite telemetry of reindeer herds in winter")
    );
    assert_eq!(
        work.authors(),
        [
            Author::person("Marrow", "Jane"),
            Author::person("Ødegård", "Kjetil")
        ]
    );
    assert_eq!(
        work.date.as_ref().map(|d| d.value),
        WorkDate::parse_iso("1998-03-15")
    );
    assert_eq!(work.kind(), WorkType::JournalArticle);
    assert_eq!(
        Work::text(&work.container),
        Some("Journal of Arctic Telemetry")
    );
    assert_eq!(Work::text(&work.volume), Some("12"));
    assert_eq!(Work::text(&work.issue), Some("3"));
    assert_eq!(Work::text(&work.pages), Some("117--129"));
    assert_eq!(
        Work::text(&work.publisher),
        Some("Nordic Society of Telemetry")
    );
    // The first ISBN of the list whose check digit is right.
    assert_eq!(Work::text(&work.isbn), Some("9780262033848"));
    // The identifier it was asked for, as the library holds it.
    assert_eq!(Work::text(&work.doi), Some(CROSSREF_DOI));
    assert!(doi(CROSSREF_DOI).was_looked_up_in(&work));
    // A registry's key is not the person's.
    assert_eq!(work.citation_key, None);
    // Every field is the look-up's.
    let sources = work.sources();
    let lookup_at = FieldSource::ALL
        .iter()
        .position(|s| *s == FieldSource::Lookup)
        .unwrap();
    assert_eq!(sources.iter().sum::<usize>(), sources[lookup_at]);
    assert!(sources[lookup_at] >= 10, "{sources:?}");

    // Two requests: doi.org's, then the registration agency's it redirected to; each asking
    // for CSL-JSON, naming the app, carrying the DOI and nothing else.
    let seen = registry.requests();
    assert_eq!(
        seen.iter().map(|r| r.target.as_str()).collect::<Vec<_>>(),
        [
            format!("/doi/{CROSSREF_DOI}"),
            format!("/crossref/works/{CROSSREF_DOI}/transform")
        ]
    );
    for request in &seen {
        assert_eq!(
            request.accept.as_deref(),
            Some("application/vnd.citationstyles.csl+json")
        );
        let agent = request.user_agent.as_deref().unwrap_or_default();
        assert!(agent.starts_with("selfrag-desktop/"), "{agent}");
    }
}

/// DataCite's CSL, as doi.org gives it for a data set: an organisation as the author, a year
/// alone, an `id` that is an address and a key of the registry's own, which is not the
/// person's.
#[test]
fn a_datacite_record_gives_an_organisation_and_never_a_citation_key() {
    let record = br#"{
      "type": "dataset",
      "id": "https://doi.org/10.5281/zenodo.12345",
      "citation-key": "cern2021",
      "categories": ["FOS: Physical sciences"],
      "author": [{"literal": "CERN"}],
      "issued": {"date-parts": [[2021]]},
      "abstract": "Open data.",
      "DOI": "10.5281/ZENODO.12345",
      "publisher": "Zenodo",
      "title": "Collision events, 2021 run",
      "URL": "https://zenodo.org/record/12345",
      "version": "1.0",
      "copyright": "Creative Commons Attribution 4.0 International"
    }"#;
    let registry = StandInRegistry::start(HashMap::from([(
        "/doi/10.5281/zenodo.12345".to_string(),
        StandInReply::Body {
            content_type: "application/vnd.citationstyles.csl+json",
            body: record.to_vec(),
        },
    )]))
    .unwrap();
    let work = WorkLookup::new(registry.config(TIMEOUT))
        .look_up(&doi("10.5281/zenodo.12345"))
        .unwrap();
    assert_eq!(work.title(), Some("Collision events, 2021 run"));
    assert_eq!(
        work.authors(),
        [Author::Organisation {
            name: "CERN".into()
        }]
    );
    assert_eq!(work.year(), Some(2021));
    assert_eq!(work.kind(), WorkType::Other);
    assert_eq!(Work::text(&work.publisher), Some("Zenodo"));
    assert_eq!(
        Work::text(&work.url),
        Some("https://zenodo.org/record/12345")
    );
    assert_eq!(
        work.citation_key, None,
        "the registry's key is not the person's"
    );
}

#[test]
fn an_arxiv_id_gets_its_atom_entry() {
    let registry = StandInRegistry::with_canned_records().unwrap();
    let lookup = WorkLookup::new(registry.config(TIMEOUT));
    let work = lookup.look_up(&WorkId::Arxiv(ARXIV_ID.into())).unwrap();

    // The title's line break is one space.
    assert_eq!(
        work.title(),
        Some("Self-RAG: Learning to Retrieve, Generate, and Critique through Self-Reflection")
    );
    assert_eq!(
        work.authors(),
        [
            Author::person("Asai", "Akari"),
            Author::person("Wu", "Zeqiu"),
            Author::person("Hajishirzi", "Hannaneh"),
        ]
    );
    assert_eq!(
        work.date.as_ref().map(|d| d.value),
        WorkDate::parse_iso("2023-10-17")
    );
    // The journal's DOI, bare and lower-cased, and its reference as the authors wrote it.
    assert_eq!(Work::text(&work.doi), Some("10.5555/selfrag.2024"));
    assert_eq!(Work::text(&work.container), Some("ICLR 2024 & oral"));
    assert_eq!(Work::text(&work.arxiv), Some(ARXIV_ID));
    assert_eq!(
        work.title.as_ref().map(|t| t.source),
        Some(FieldSource::Lookup)
    );
    let seen = registry.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].target,
        format!("/arxiv/api/query?id_list={ARXIV_ID}")
    );
}

#[test]
fn an_unknown_identifier_is_a_clear_error_naming_the_service_and_the_identifier() {
    let registry = StandInRegistry::with_canned_records().unwrap();
    let lookup = WorkLookup::new(registry.config(TIMEOUT));
    let error = lookup.look_up(&doi("10.5555/nowhere")).unwrap_err();
    assert!(
        matches!(error, ReferencesError::LookupNotFound { .. }),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains("has no record of DOI 10.5555/nowhere")
            && message.contains("127.0.0.1:")
            && message.contains("the record stays as the file gave it"),
        "{message}"
    );
    // arXiv says so with an empty feed.
    let empty = StandInRegistry::start(HashMap::from([(
        "/arxiv/api/query?id_list=2401.00001".to_string(),
        StandInReply::Body {
            content_type: "application/atom+xml",
            body: br#"<feed xmlns="http://www.w3.org/2005/Atom"><title>ArXiv Query</title></feed>"#
                .to_vec(),
        },
    )]))
    .unwrap();
    let error = WorkLookup::new(empty.config(TIMEOUT))
        .look_up(&WorkId::Arxiv("2401.00001".into()))
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("has no record of arXiv:2401.00001"),
        "{error}"
    );
}

#[test]
fn a_server_error_and_a_page_that_is_no_record_are_told_apart() {
    let registry = StandInRegistry::start(HashMap::from([
        ("/doi/10.5555/busy".to_string(), StandInReply::Status(503)),
        (
            "/doi/10.5555/landing".to_string(),
            StandInReply::Body {
                content_type: "text/html",
                body: b"<html><body>The publisher's page</body></html>".to_vec(),
            },
        ),
    ]))
    .unwrap();
    let lookup = WorkLookup::new(registry.config(TIMEOUT));
    let busy = lookup.look_up(&doi("10.5555/busy")).unwrap_err();
    assert!(
        matches!(busy, ReferencesError::LookupFailed { status: 503, .. }),
        "{busy:?}"
    );
    assert!(busy.to_string().contains("Try again later"), "{busy}");
    let landing = lookup.look_up(&doi("10.5555/landing")).unwrap_err();
    assert!(
        matches!(landing, ReferencesError::LookupUnreadable { .. }),
        "{landing:?}"
    );
    assert!(
        landing.to_string().contains("not a CSL-JSON record"),
        "{landing}"
    );
}

#[test]
fn an_answer_over_the_limit_is_refused() {
    let mut huge = b"{\"title\": \"".to_vec();
    huge.resize(RECORD_LIMIT + 10, b'a');
    huge.extend(b"\"}");
    let registry = StandInRegistry::start(HashMap::from([(
        "/doi/10.5555/huge".to_string(),
        StandInReply::Body {
            content_type: "application/vnd.citationstyles.csl+json",
            body: huge,
        },
    )]))
    .unwrap();
    let error = WorkLookup::new(registry.config(TIMEOUT))
        .look_up(&doi("10.5555/huge"))
        .unwrap_err();
    assert!(
        matches!(error, ReferencesError::LookupTooLarge { limit_mib: 1, .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("more than 1 MiB"), "{error}");
}

#[test]
fn a_service_that_never_answers_fails_within_the_time_limit() {
    let registry = StandInRegistry::start(HashMap::from([(
        "/doi/10.5555/silent".to_string(),
        StandInReply::Silent,
    )]))
    .unwrap();
    let limit = Duration::from_millis(600);
    let started = Instant::now();
    let error = WorkLookup::new(registry.config(limit))
        .look_up(&doi("10.5555/silent"))
        .unwrap_err();
    let took = started.elapsed();
    assert!(
        took < limit + Duration::from_secs(3),
        "the look-up gave up after {took:?}, its limit is {limit:?}"
    );
    assert!(
        matches!(error, ReferencesError::LookupUnreachable { .. }),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains("could not reach 127.0.0.1:") && message.contains("no answer within"),
        "{message}"
    );
}

#[test]
fn a_service_that_cannot_be_reached_says_the_record_stays_as_the_file_gave_it() {
    // A port that was free a moment ago: nothing listens there now.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = LookupConfig {
        doi_resolver: format!("http://127.0.0.1:{port}/").parse().unwrap(),
        ..LookupConfig::default()
    };
    let error = WorkLookup::new(config)
        .look_up(&doi("10.5555/offline"))
        .unwrap_err();
    let message = error.to_string();
    assert!(
        message.starts_with(&format!(
            "could not reach 127.0.0.1:{port} to look up DOI 10.5555/offline"
        )) && message.contains("the record stays as the file gave it"),
        "{message}"
    );
}
