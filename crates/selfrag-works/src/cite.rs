//! How a work is named: in an answer's text (author–year, "Marrow & Ødegård 1998"), and by the
//! citation key a bibliography gives it where the person has none of their own (family name,
//! year, first significant title word: `marrow1998telemetry`), made unique within one export;
//! and the address a reference links its DOI to ([`doi_url`]).

use crate::Work;

/// Title words a conventional key skips.
const STOP_WORDS: &[&str] = &[
    "a", "an", "the", "on", "of", "in", "for", "and", "to", "at", "by", "with", "from", "is",
    "are", "der", "die", "das", "le", "la", "les", "el", "un", "une",
];

/// "Marrow 1998", "Marrow & Ødegård 1998", "Marrow et al. 1998", with "n.d." for a work
/// without a year. Without authors, the title's first words stand in for them. `None` where
/// the work has neither authors nor a title (the caller names the file instead).
pub fn author_year(work: &Work) -> Option<String> {
    let names = match work.authors() {
        [] => short_title(work.title()?),
        [one] => one.family().to_string(),
        [a, b] => format!("{} & {}", a.family(), b.family()),
        [first, ..] => format!("{} et al.", first.family()),
    };
    let year = work
        .year()
        .map_or_else(|| "n.d.".to_string(), |y| y.to_string());
    Some(format!("{names} {year}"))
}

/// Up to four words of a title, with an ellipsis where it was longer.
fn short_title(title: &str) -> String {
    let words: Vec<&str> = title.split_whitespace().collect();
    if words.len() <= 4 {
        words.join(" ")
    } else {
        format!("{}…", words[..4].join(" "))
    }
}

/// The work's citation key: the person's own where the record has one, else
/// [`conventional_key`].
pub fn key_of(work: &Work, fallback_title: &str) -> String {
    Work::text(&work.citation_key)
        .map(str::trim)
        .filter(|k| is_usable_key(k))
        .map_or_else(|| conventional_key(work, fallback_title), str::to_string)
}

/// Whether `key` can stand in `@type{key,`, `\\cite{key}` and `[@key]` as it is: ASCII letters,
/// digits and `_ : . + / -` only. Anything else is refused, not escaped: TeX reads `^^5c` as a
/// backslash inside any argument, so a key from a shared library or a downloaded `.bib` could
/// otherwise run a command in the person's paper.
pub fn is_usable_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | ':' | '.' | '+' | '/' | '-'))
}

/// `marrow1998telemetry`: the first author's family name, the year and the first significant
/// word of the title (of `fallback_title` where the work has none), folded to lower-case ASCII
/// letters and digits. A work with nothing to build from gets `source`.
pub fn conventional_key(work: &Work, fallback_title: &str) -> String {
    let fold = |s: &str| -> String {
        deunicode::deunicode(s)
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .collect::<String>()
            .to_ascii_lowercase()
    };
    let author = work
        .authors()
        .first()
        .map(|a| fold(a.family()))
        .unwrap_or_default();
    let year = work.year().map(|y| y.to_string()).unwrap_or_default();
    let title = work.title().unwrap_or(fallback_title);
    let word = title
        .split(|c: char| !c.is_alphanumeric())
        .map(fold)
        .find(|w| !w.is_empty() && !STOP_WORDS.contains(&w.as_str()))
        .unwrap_or_default();
    let key = format!("{author}{year}{word}");
    match key.chars().next() {
        None => "source".to_string(),
        // A key starting with a digit is valid BibTeX but trips some tools.
        Some(c) if c.is_ascii_digit() => format!("ref{key}"),
        Some(_) => key,
    }
}

/// Keys made unique within one bibliography: a second `marrow1998telemetry` becomes
/// `marrow1998telemetrya`, then `…b`, as BibTeX styles letter same-year works.
#[derive(Debug, Default)]
pub struct KeySet {
    taken: std::collections::HashSet<String>,
}

impl KeySet {
    /// `key`, or the first of `keya`, `keyb`, … (then `key27`, …) not yet given out; recorded
    /// as given.
    pub fn unique(&mut self, key: &str) -> String {
        let candidates = std::iter::once(key.to_string())
            .chain(('a'..='z').map(|c| format!("{key}{c}")))
            .chain((27..).map(|n| format!("{key}{n}")));
        for candidate in candidates {
            if self.taken.insert(candidate.clone()) {
                return candidate;
            }
        }
        // The chain above is endless; this line is never reached.
        key.to_string()
    }
}

/// The address that resolves a DOI: `https://doi.org/` and the DOI, with every character
/// that a URL's path cannot hold as it is (`#`, `?`, `%`, `<`, `>`, `"`, braces, spaces,
/// letters outside ASCII, …) percent-encoded, as the DOI Handbook asks.
pub fn doi_url(doi: &str) -> String {
    let mut url = String::from("https://doi.org/");
    for c in doi.trim().chars() {
        if c.is_ascii_alphanumeric() || "-._~/:;()@!$&'*+,=".contains(c) {
            url.push(c);
        } else {
            let mut bytes = [0u8; 4];
            for b in c.encode_utf8(&mut bytes).bytes() {
                url.push_str(&format!("%{b:02X}"));
            }
        }
    }
    url
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Author, FieldSource, Sourced, WorkDate};

    fn work(authors: Vec<Author>, year: Option<i32>, title: &str) -> Work {
        fn s<T>(v: T) -> Sourced<T> {
            Sourced::new(v, FieldSource::ReferenceManager)
        }
        Work {
            authors: (!authors.is_empty()).then(|| s(authors)),
            date: year.map(|y| s(WorkDate::year(y))),
            title: (!title.is_empty()).then(|| s(title.to_string())),
            ..Work::default()
        }
    }

    #[test]
    fn author_year_names_one_two_or_the_first_of_many() {
        let a = Author::person("Marrow", "Ann");
        let b = Author::person("Ødegård", "Bjørn");
        let c = Author::Organisation {
            name: "World Health Organization".into(),
        };
        let label = |authors, year| author_year(&work(authors, year, "T"));
        assert_eq!(
            label(vec![a.clone()], Some(1998)).as_deref(),
            Some("Marrow 1998")
        );
        assert_eq!(
            label(vec![a.clone(), b.clone()], Some(1998)).as_deref(),
            Some("Marrow & Ødegård 1998")
        );
        assert_eq!(
            label(vec![c, a, b], None).as_deref(),
            Some("World Health Organization et al. n.d.")
        );
        assert_eq!(
            author_year(&work(vec![], Some(2001), "A very long title for a report")).as_deref(),
            Some("A very long title… 2001")
        );
        assert_eq!(author_year(&Work::default()), None);
    }

    #[test]
    fn conventional_keys_fold_names_and_skip_stop_words() {
        let w = work(
            vec![Author::person("Ødegård", "Bjørn")],
            Some(1998),
            "The Ålesund telemetry study",
        );
        assert_eq!(conventional_key(&w, "file"), "odegard1998alesund");
        assert_eq!(conventional_key(&Work::default(), "2019 budget"), "ref2019");
        assert_eq!(conventional_key(&Work::default(), "—"), "source");
    }

    #[test]
    fn the_persons_key_wins_where_it_is_usable() {
        let mut w = work(vec![Author::person("Marrow", "A")], Some(1998), "Telemetry");
        w.citation_key = Some(Sourced::new(
            "marrowTelemetry98".into(),
            FieldSource::Person,
        ));
        assert_eq!(key_of(&w, ""), "marrowTelemetry98");
        w.citation_key = Some(Sourced::new("bad key}".into(), FieldSource::Person));
        assert_eq!(key_of(&w, ""), "marrow1998telemetry");
        // TeX reads `^^5c` as a backslash: such a key would run `\input` in the paper.
        w.citation_key = Some(Sourced::new(
            "a^^5cinput^^7b/etc/passwd^^7d".into(),
            FieldSource::ReferenceManager,
        ));
        assert_eq!(key_of(&w, ""), "marrow1998telemetry");
        w.citation_key = Some(Sourced::new(
            "Marrow_1998:tel-2.b".into(),
            FieldSource::Person,
        ));
        assert_eq!(key_of(&w, ""), "Marrow_1998:tel-2.b");
    }

    #[test]
    fn doi_addresses_percent_encode_what_a_path_cannot_hold() {
        assert_eq!(doi_url("10.1000/xyz"), "https://doi.org/10.1000/xyz");
        assert_eq!(
            doi_url("10.1002/(sici)1097-4571(199806)49:8<693::aid-asi3>3.0.co;2-o"),
            "https://doi.org/10.1002/(sici)1097-4571(199806)49:8%3C693::aid-asi3%3E3.0.co;2-o"
        );
        assert_eq!(
            doi_url(" 10.1000/a#b?c%d\"{e} ø"),
            "https://doi.org/10.1000/a%23b%3Fc%25d%22%7Be%7D%20%C3%B8"
        );
    }

    #[test]
    fn keys_are_made_unique_by_letters() {
        let mut keys = KeySet::default();
        assert_eq!(keys.unique("k"), "k");
        assert_eq!(keys.unique("k"), "ka");
        assert_eq!(keys.unique("k"), "kb");
        assert_eq!(keys.unique("ka"), "kaa");
    }
}
