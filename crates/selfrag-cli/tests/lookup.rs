//! `selfrag index --look-up` and `selfrag library lookup` against a stand-in for doi.org and
//! arXiv's API on 127.0.0.1, named by `SELFRAG_DOI_RESOLVER` and `SELFRAG_ARXIV_API` as a
//! person would: without `--look-up` indexing sends nothing; with it, and with the explicit
//! command, each work found is printed with how it is cited.

// Test code: a failed unwrap is a failed test, at the line that failed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use common::{describe, ok};
use selfrag_references::stand_in::{CROSSREF_DOI, StandInRegistry};

fn selfrag(data: &Path, models: &Path, registry: &StandInRegistry, args: &[&str]) -> Output {
    let services = registry.config(Duration::from_secs(5));
    common::selfrag_with_models(data, models)
        .env("SELFRAG_DOI_RESOLVER", services.doi_resolver.as_str())
        .env("SELFRAG_ARXIV_API", services.arxiv_api.as_str())
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn index_sends_nothing_without_look_up_and_the_lookup_command_prints_what_it_found() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let models = common::tiny_models(&tmp.path().join("models"));
    let registry = StandInRegistry::with_canned_records().unwrap();
    let paper = tmp.path().join("paper.md");
    std::fs::write(
        &paper,
        "Reindeer telemetry, doi:10.5555/Reindeer.1998 online.",
    )
    .unwrap();
    let preprint = tmp.path().join("preprint.md");
    std::fs::write(&preprint, "The method of arXiv:2310.11511v2.").unwrap();

    ok(selfrag(
        &data,
        &models,
        &registry,
        &["index", paper.to_str().unwrap()],
    ));
    assert_eq!(
        registry.requests(),
        [],
        "indexing without --look-up sends nothing"
    );

    let out = selfrag(
        &data,
        &models,
        &registry,
        &["index", "--look-up", preprint.to_str().unwrap()],
    );
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{}", describe(&out));
    assert!(
        stderr.contains("looked up 1 work(s) by DOI or arXiv id"),
        "{stderr}"
    );
    // Only the job's own document: the paper indexed before is not looked up.
    assert_eq!(registry.requests().len(), 1, "{:?}", registry.requests());

    let listed = ok(selfrag(&data, &models, &registry, &["library", "lookup"]));
    assert!(
        listed.contains(&format!(
            "DOI {CROSSREF_DOI}\tMarrow & Ødegård 1998\tSatellite telemetry"
        )),
        "{listed}"
    );
    assert!(
        listed
            .contains("1 found, 1 had their record already, 0 without a DOI or arXiv id, 0 failed"),
        "{listed}"
    );
    let list = ok(selfrag(&data, &models, &registry, &["library", "list"]));
    assert!(list.contains("Asai et al. 2023"), "{list}");

    // A look-up that fails says so and ends in failure.
    let other = tmp.path().join("other.md");
    std::fs::write(&other, "See doi:10.5555/nowhere.").unwrap();
    ok(selfrag(
        &data,
        &models,
        &registry,
        &["index", other.to_str().unwrap()],
    ));
    let out = selfrag(
        &data,
        &models,
        &registry,
        &["library", "lookup", other.to_str().unwrap()],
    );
    assert!(!out.status.success(), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("has no record of DOI 10.5555/nowhere")
            && stderr.contains("1 look-up(s) failed"),
        "{stderr}"
    );

    // A variable that names no address is named.
    let out = common::selfrag_with_models(&data, &models)
        .env("SELFRAG_DOI_RESOLVER", "doi.org")
        .args(["library", "lookup"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("SELFRAG_DOI_RESOLVER"),
        "{stderr}"
    );
}
