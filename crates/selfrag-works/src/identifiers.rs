//! Identifiers found in a document's text: DOIs, arXiv ids (new style `2310.11511`, old style
//! `hep-th/9901001`) and ISBNs (checked by their check digit). A paper prints its DOI and its
//! arXiv stamp on the first pages; [`in_text`] turns what it finds there into a [`Work`] whose
//! fields come from [`FieldSource::Identifier`].

use std::sync::LazyLock;

use regex::Regex;

use crate::{FieldSource, Sourced, Work};

// The patterns are constants: compiling them cannot fail (each is covered by the tests below).
#[allow(clippy::expect_used)]
fn pattern(re: &str) -> Regex {
    Regex::new(re).expect("a constant pattern")
}

static DOI: LazyLock<Regex> = LazyLock::new(|| pattern(r"\b10\.\d{4,9}/[^\s\x22<>{}]+"));
static ARXIV_NEW: LazyLock<Regex> = LazyLock::new(|| {
    pattern(r"(?i)\barxiv(?:\s*:\s*|\.org/(?:abs|pdf)/)(\d{4}\.\d{4,5})(?:v\d+)?\b")
});
static ARXIV_OLD: LazyLock<Regex> = LazyLock::new(|| {
    pattern(r"(?i)\barxiv(?:\s*:\s*|\.org/(?:abs|pdf)/)([a-z\-]+(?:\.[A-Z]{2})?/\d{7})(?:v\d+)?\b")
});
static ISBN: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)\bISBN(?:-1[03])?:?\s*((?:97[89][\s\-]?)?\d{1,5}[\s\-]?\d{1,7}[\s\-]?\d{1,7}[\s\-]?[\dX])\b",
    )
});

/// The first DOI in `text`, bare and lower-cased, without the punctuation that ends a
/// sentence around it (`(see 10.1000/xyz).` → `10.1000/xyz`).
pub fn find_doi(text: &str) -> Option<String> {
    DOI.find_iter(text).find_map(|m| clean_doi(m.as_str()))
}

/// A DOI as metadata writes it (`https://doi.org/10.1000/XYZ`, `doi:10.1000/xyz`, bare), bare
/// and lower-cased; `None` if it is not one.
pub fn normalise_doi(value: &str) -> Option<String> {
    DOI.find(value.trim()).and_then(|m| clean_doi(m.as_str()))
}

fn clean_doi(found: &str) -> Option<String> {
    let mut doi = found.trim_end_matches(['.', ',', ';', ':', '\'']);
    // A closing bracket belongs to the DOI only where the DOI opened it.
    while let Some(last) = doi.chars().last().filter(|c| matches!(c, ')' | ']')) {
        let open = if last == ')' { '(' } else { '[' };
        if doi.matches(open).count() >= doi.matches(last).count() {
            break;
        }
        doi = doi[..doi.len() - 1].trim_end_matches(['.', ',', ';', ':']);
    }
    let suffix = doi.split_once('/').map_or("", |(_, s)| s);
    (!suffix.is_empty()).then(|| doi.to_lowercase())
}

/// The first arXiv id in `text` written as arXiv writes it (`arXiv:2310.11511v1`,
/// `arxiv.org/abs/hep-th/9901001`), without its version.
pub fn find_arxiv(text: &str) -> Option<String> {
    let first = |re: &Regex| {
        re.captures(text)
            .and_then(|c| Some((c.get(0)?.start(), c.get(1)?.as_str().to_string())))
    };
    match (first(&ARXIV_NEW), first(&ARXIV_OLD)) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a.1 } else { b.1 }),
        (a, b) => a.or(b).map(|(_, id)| id),
    }
}

/// The first ISBN in `text` after the word ISBN whose check digit is right, as digits (and a
/// final X).
pub fn find_isbn(text: &str) -> Option<String> {
    ISBN.captures_iter(text).find_map(|c| {
        let digits: String = c
            .get(1)?
            .as_str()
            .chars()
            .filter(|c| c.is_ascii_digit() || *c == 'X' || *c == 'x')
            .map(|c| c.to_ascii_uppercase())
            .collect();
        isbn_is_valid(&digits).then_some(digits)
    })
}

/// Whether `digits` is an ISBN-10 or ISBN-13 with the right check digit.
pub fn isbn_is_valid(digits: &str) -> bool {
    let values: Vec<u32> = digits
        .chars()
        .map(|c| {
            if c == 'X' {
                10
            } else {
                c.to_digit(10).unwrap_or(99)
            }
        })
        .collect();
    match values.len() {
        10 => {
            values[..9].iter().all(|v| *v < 10)
                && values[9] <= 10
                && values
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (10 - i as u32) * v)
                    .sum::<u32>()
                    % 11
                    == 0
        }
        13 => {
            values.iter().all(|v| *v < 10)
                && values
                    .iter()
                    .enumerate()
                    .map(|(i, v)| if i % 2 == 0 { *v } else { 3 * v })
                    .sum::<u32>()
                    % 10
                    == 0
        }
        _ => false,
    }
}

/// The identifiers in `text` (a document's first pages) as a work record.
pub fn in_text(text: &str) -> Work {
    let sourced = |v: Option<String>| v.map(|v| Sourced::new(v, FieldSource::Identifier));
    Work {
        doi: sourced(find_doi(text)),
        arxiv: sourced(find_arxiv(text)),
        isbn: sourced(find_isbn(text)),
        ..Work::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dois_are_found_bare_and_without_the_sentence_around_them() {
        assert_eq!(
            find_doi("Available at https://doi.org/10.1145/3571730. Accessed").as_deref(),
            Some("10.1145/3571730")
        );
        assert_eq!(
            find_doi("(DOI: 10.1002/(SICI)1097-4571(199806)49:8<693::AID-ASI3>3.0.CO;2-O)")
                .as_deref(),
            Some("10.1002/(sici)1097-4571(199806)49:8")
        );
        assert_eq!(
            find_doi("see (10.18653/v1/2023.acl-long.1), then").as_deref(),
            Some("10.18653/v1/2023.acl-long.1")
        );
        assert_eq!(find_doi("version 10.2/ of the manual"), None);
        assert_eq!(
            normalise_doi("doi:10.1000/ABC.def").as_deref(),
            Some("10.1000/abc.def")
        );
    }

    #[test]
    fn arxiv_ids_of_both_styles_are_found_without_their_version() {
        assert_eq!(
            find_arxiv("arXiv:2310.11511v1 [cs.CL] 17 Oct 2023").as_deref(),
            Some("2310.11511")
        );
        assert_eq!(
            find_arxiv("https://arxiv.org/abs/hep-th/9901001v3").as_deref(),
            Some("hep-th/9901001")
        );
        assert_eq!(
            find_arxiv("arXiv: math.AG/0309136").as_deref(),
            Some("math.AG/0309136")
        );
        // A bare number is not an arXiv id.
        assert_eq!(find_arxiv("Table 2310.11511 shows"), None);
    }

    #[test]
    fn isbns_are_found_only_with_a_right_check_digit() {
        assert_eq!(
            find_isbn("ISBN 978-0-262-03384-8 (hardcover)").as_deref(),
            Some("9780262033848")
        );
        assert_eq!(
            find_isbn("ISBN: 0-201-53082-1").as_deref(),
            Some("0201530821")
        );
        assert_eq!(
            find_isbn("ISBN 0-8044-2957-X").as_deref(),
            Some("080442957X")
        );
        assert_eq!(find_isbn("ISBN 978-0-262-03384-9"), None);
    }

    #[test]
    fn in_text_marks_its_fields_as_identifiers() {
        let work = in_text("doi:10.5555/12345678 and arXiv:2101.00001");
        assert_eq!(work.doi.map(|d| d.source), Some(FieldSource::Identifier));
        assert_eq!(work.arxiv.map(|d| d.value).as_deref(), Some("2101.00001"));
        assert!(work.isbn.is_none());
    }
}
