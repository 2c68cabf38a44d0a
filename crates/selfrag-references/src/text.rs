//! Field values as both readers hand them to a work record: trimmed, one space between words,
//! page ranges with BibTeX's `--`, ISBNs as checked digits.

use selfrag_works::identifiers;

/// `value` with its runs of white space made one space and trimmed; `None` where nothing is
/// left.
pub(crate) fn clean(value: &str) -> Option<String> {
    let cleaned = value.split_whitespace().collect::<Vec<_>>().join(" ");
    (!cleaned.is_empty()).then_some(cleaned)
}

/// A page range as BibTeX writes it (`117--129`), whether it came with a hyphen, an en dash or
/// already so; other page text (`e1234`, `117, 130`) as it is.
pub(crate) fn pages(value: &str) -> Option<String> {
    let value = clean(value)?;
    let parts: Vec<&str> = value
        .split(['–', '—', '-'])
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    let is_range = parts.len() == 2
        && value.chars().any(|c| matches!(c, '–' | '—' | '-'))
        && parts.iter().all(|p| p.chars().any(|c| c.is_ascii_digit()));
    Some(if is_range {
        format!("{}--{}", parts[0], parts[1])
    } else {
        value
    })
}

/// The first ISBN in `value` (`978-0-262-03384-8 0262033844`) with a right check digit, as
/// digits (and a final X).
pub(crate) fn isbn(value: &str) -> Option<String> {
    value
        .split([' ', ',', ';', '/'])
        .map(|token| {
            token
                .chars()
                .filter(|c| c.is_ascii_digit() || matches!(c, 'x' | 'X'))
                .map(|c| c.to_ascii_uppercase())
                .collect::<String>()
        })
        .find(|digits| identifiers::isbn_is_valid(digits))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_ranges_get_bibtex_dashes_and_other_pages_stay() {
        assert_eq!(pages("117-129").as_deref(), Some("117--129"));
        assert_eq!(pages("117–129").as_deref(), Some("117--129"));
        assert_eq!(pages(" 117--129 ").as_deref(), Some("117--129"));
        assert_eq!(pages("e1234").as_deref(), Some("e1234"));
        assert_eq!(pages("117, 130").as_deref(), Some("117, 130"));
        assert_eq!(pages("  "), None);
    }

    #[test]
    fn isbns_are_checked_digits() {
        assert_eq!(
            isbn("978-0-262-03384-8 0262033844").as_deref(),
            Some("9780262033848")
        );
        assert_eq!(isbn("0-8044-2957-x").as_deref(), Some("080442957X"));
        assert_eq!(isbn("978-0-262-03384-9"), None);
    }
}
