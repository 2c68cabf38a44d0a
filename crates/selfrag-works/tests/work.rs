//! The work record: merging by source rank, the person's edits kept apart, names and dates.

// Test code: a failed unwrap is a failed test, at the line that failed.
#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use selfrag_works::{Author, FieldSource, Sourced, Work, WorkDate, ZoteroLink};

fn title(value: &str, source: FieldSource) -> Work {
    Work {
        title: Some(Sourced::new(value.into(), source)),
        ..Work::default()
    }
}

#[test]
fn a_better_source_replaces_a_worse_one_and_never_the_other_way() {
    let mut work = title("Guess", FieldSource::FirstPageGuess);
    work.merge(title("From Zotero", FieldSource::ReferenceManager));
    assert_eq!(work.title(), Some("From Zotero"));
    work.merge(title("From the PDF", FieldSource::FileMetadata));
    assert_eq!(work.title(), Some("From Zotero"));
    work.merge(title("Mine", FieldSource::Person));
    work.merge(title("Zotero again", FieldSource::ReferenceManager));
    assert_eq!(work.title(), Some("Mine"));
    // An equal source re-read replaces what was read before.
    work.merge(title("Mine, edited", FieldSource::Person));
    assert_eq!(work.title(), Some("Mine, edited"));
}

#[test]
fn a_looked_up_record_ranks_above_the_files_metadata_and_below_the_persons_bibliography() {
    let mut work = title("From the PDF's Info", FieldSource::FileMetadata);
    work.merge(title("From Crossref", FieldSource::Lookup));
    assert_eq!(work.title(), Some("From Crossref"));
    work.merge(title("From the PDF again", FieldSource::FileMetadata));
    assert_eq!(work.title(), Some("From Crossref"));
    work.merge(title("From my .bib", FieldSource::BibliographyFile));
    work.merge(title("From Crossref again", FieldSource::Lookup));
    assert_eq!(work.title(), Some("From my .bib"));
    assert_eq!(
        serde_json::to_string(&FieldSource::Lookup).unwrap(),
        "\"lookup\""
    );
    assert_eq!(FieldSource::Lookup.label(), "looked up by its DOI/arXiv id");
    // `sources()` counts in `ALL`'s order.
    let looked_up = title("x", FieldSource::Lookup);
    let at = FieldSource::ALL
        .iter()
        .position(|s| *s == FieldSource::Lookup)
        .unwrap();
    assert_eq!(looked_up.sources()[at], 1);
    assert_eq!(looked_up.sources().iter().sum::<usize>(), 1);
}

#[test]
fn only_from_keeps_the_persons_edits_for_a_re_read() {
    let mut work = title("Mine", FieldSource::Person);
    work.doi = Some(Sourced::new("10.1/x".into(), FieldSource::Identifier));
    let edits = work.only_from(FieldSource::Person);
    assert_eq!(edits.title(), Some("Mine"));
    assert!(edits.doi.is_none());
    assert_eq!(work.sources()[FieldSource::Person as usize], 1);
    assert_eq!(work.sources()[FieldSource::Identifier as usize], 1);
}

#[test]
fn the_record_round_trips_through_json_and_an_empty_one_is_empty() {
    let mut work = title("Nature of telemetry", FieldSource::BibliographyFile);
    work.authors = Some(Sourced::new(
        vec![
            Author::person("Ødegård", "Bjørn"),
            Author::Organisation {
                name: "CERN".into(),
            },
        ],
        FieldSource::ReferenceManager,
    ));
    work.date = Some(Sourced::new(
        WorkDate::parse_iso("1998-03-15").unwrap(),
        FieldSource::ReferenceManager,
    ));
    work.zotero = Some(ZoteroLink {
        item_key: "ABCD2345".into(),
        ..ZoteroLink::default()
    });
    let json = serde_json::to_string(&work).unwrap();
    assert_eq!(serde_json::from_str::<Work>(&json).unwrap(), work);
    assert!(serde_json::from_str::<Work>("{}").unwrap().is_empty());
    assert!(!work.is_empty());
}

#[test]
fn names_split_into_family_and_given() {
    assert_eq!(
        Author::parse_name("Ødegård, Bjørn"),
        Some(Author::person("Ødegård", "Bjørn"))
    );
    assert_eq!(
        Author::parse_name("Ludwig  van Beethoven"),
        Some(Author::person("van Beethoven", "Ludwig"))
    );
    assert_eq!(
        Author::parse_name("Plato"),
        Some(Author::person("Plato", ""))
    );
    assert_eq!(Author::parse_name("  "), None);
}

#[test]
fn dates_keep_what_is_known() {
    let date = |s| WorkDate::parse_iso(s).map(|d| d.to_string());
    assert_eq!(date("2004-00-00").as_deref(), Some("2004"));
    assert_eq!(date("1998-03-15").as_deref(), Some("1998-03-15"));
    assert_eq!(date("2021-07-01T10:00:00Z").as_deref(), Some("2021-07-01"));
    assert_eq!(date("2021-07-00").as_deref(), Some("2021-07"));
    assert_eq!(date("March 1998"), None);
    assert_eq!(
        WorkDate::find_year("Spring 1998, vol. 12").map(|d| d.year),
        Some(1998)
    );
    assert_eq!(WorkDate::find_year("page 12345"), None);
}

#[test]
fn zotero_links_open_the_pdf_at_the_page_or_select_the_item() {
    let mut link = ZoteroLink {
        item_key: "ITEMKEY1".into(),
        attachment_key: Some("ATTKEY01".into()),
        ..ZoteroLink::default()
    };
    assert_eq!(
        link.open_uri(Some(7), true).as_deref(),
        Some("zotero://open-pdf/library/items/ATTKEY01?page=7")
    );
    assert_eq!(
        link.open_uri(Some(7), false).as_deref(),
        Some("zotero://select/library/items/ITEMKEY1")
    );
    link.group = Some(42);
    assert_eq!(
        link.open_uri(None, true).as_deref(),
        Some("zotero://select/groups/42/items/ITEMKEY1")
    );
    // A key that is not Zotero's reaches no address.
    link.item_key = "X?y#evil".into();
    assert_eq!(link.open_uri(None, true), None);
}

proptest! {
    /// Whatever order the sources are read in, each field ends with the best source's value.
    #[test]
    fn merge_order_does_not_matter(order in Just((0..FieldSource::ALL.len()).collect::<Vec<_>>()).prop_shuffle()) {
        let mut work = Work::default();
        for i in &order {
            let source = FieldSource::ALL[*i];
            work.merge(title(source.label(), source));
        }
        prop_assert_eq!(work.title(), Some(FieldSource::Person.label()));
    }
}

#[test]
fn records_keep_each_source_apart_so_an_edit_can_be_undone() {
    use selfrag_works::WorkRecords;
    let mut records = WorkRecords::default();
    records.set(
        FieldSource::ReferenceManager,
        title("From Zotero", FieldSource::Person),
    );
    records.set_from_file(&title("From the PDF", FieldSource::FileMetadata));
    assert_eq!(records.merged().title(), Some("From Zotero"));
    // Marked with the source it was set under, whatever the record said.
    assert_eq!(
        records.merged().title.map(|t| t.source),
        Some(FieldSource::ReferenceManager)
    );
    records.set(
        FieldSource::Person,
        title("Mine", FieldSource::FirstPageGuess),
    );
    assert_eq!(records.merged().title(), Some("Mine"));
    records.set(FieldSource::Person, Work::default());
    assert_eq!(records.merged().title(), Some("From Zotero"));
    records.set(FieldSource::ReferenceManager, Work::default());
    assert_eq!(records.merged().title(), Some("From the PDF"));
    // A re-read of the file replaces only what the file said.
    records.set_from_file(&Work::default());
    assert!(records.is_empty());
    let json = serde_json::to_string(&records).unwrap();
    assert_eq!(json, "{}");
}

#[test]
fn a_record_merged_without_the_look_up_shows_what_the_document_says_of_itself() {
    use selfrag_works::WorkRecords;
    let mut records = WorkRecords::default();
    let mut in_text = title("Guessed", FieldSource::FirstPageGuess);
    in_text.doi = Some(Sourced::new("10.1/new".into(), FieldSource::Identifier));
    records.set_from_file(&in_text);
    let mut looked_up = title("From Crossref", FieldSource::Lookup);
    looked_up.doi = Some(Sourced::new("10.1/old".into(), FieldSource::Lookup));
    records.set(FieldSource::Lookup, looked_up);
    assert_eq!(Work::text(&records.merged().doi), Some("10.1/old"));
    let own = records.merged_except(FieldSource::Lookup);
    assert_eq!(Work::text(&own.doi), Some("10.1/new"));
    assert_eq!(own.title(), Some("Guessed"));
    // Stored under its name.
    let json = serde_json::to_string(&records).unwrap();
    assert!(json.contains("\"lookup\":"), "{json}");
}
