//! A PDF whose cross-reference table is damaged, read again through a table rebuilt from the
//! objects the file holds.
//!
//! A PDF finds its objects through the byte offsets of its cross-reference table. A tool that
//! edits a file without rewriting that table (a title changed in place, a line ending converted)
//! leaves offsets that point beside the objects, and lopdf then refuses the whole file ("invalid
//! file trailer"), where pdftotext and every viewer rebuild the table and read it. So does this:
//! the file is scanned for `N G obj` headers at line starts (the last header of a number wins,
//! as an incremental update's would), and a new table and trailer are appended, which a reader
//! takes before any older one. The trailer keeps the last trailer's `/Root`, `/Info`, `/ID` and
//! `/Encrypt`, or, without a trailer (a file whose table was a stream), names the last object
//! that says `/Type /Catalog`. Objects inside object streams need no entry: lopdf unpacks the
//! streams it finds.

/// The file with a rebuilt cross-reference table and trailer appended, or `None` when it holds
/// no objects or no document catalog to name.
pub(super) fn with_rebuilt_xref(bytes: &[u8]) -> Option<Vec<u8>> {
    // Offsets count from the header, as readers count them (bytes before it are skipped).
    let start = bytes.windows(5).position(|w| w == b"%PDF-")?;
    let file = &bytes[start..];
    let objects = object_headers(file);
    if objects.is_empty() {
        return None;
    }
    let trailer = last_trailer(file);
    let root = trailer
        .and_then(|t| reference_after(t, b"/Root"))
        .or_else(|| last_catalog(file, &objects))?;
    // An encrypted file read without its `/Encrypt` would be read as plain text: garbage. Where
    // the trailer does not name it as a reference (a stream table, a direct dictionary), the
    // file is not rebuilt.
    let encrypt = trailer.and_then(|t| reference_after(t, b"/Encrypt"));
    if encrypt.is_none() && find(file, b"/Encrypt").is_some() {
        return None;
    }
    let mut out = Vec::with_capacity(file.len() + 32 * objects.len() + 256);
    out.extend_from_slice(file);
    if !out.ends_with(b"\n") {
        out.push(b'\n');
    }
    let xref_at = out.len();
    out.extend_from_slice(b"xref\n0 1\n0000000000 65535 f \n");
    for (number, (generation, offset)) in &objects {
        out.extend_from_slice(format!("{number} 1\n{offset:010} {generation:05} n \n").as_bytes());
    }
    let size = objects.keys().next_back().map_or(1, |last| last + 1);
    out.extend_from_slice(format!("trailer\n<< /Size {size} /Root {root}").as_bytes());
    if let Some(trailer) = trailer {
        if let Some(info) = reference_after(trailer, b"/Info") {
            out.extend_from_slice(format!(" /Info {info}").as_bytes());
        }
        if let Some(id) = array_after(trailer, b"/ID") {
            out.extend_from_slice(b" /ID ");
            out.extend_from_slice(id);
        }
    }
    if let Some(encrypt) = encrypt {
        out.extend_from_slice(format!(" /Encrypt {encrypt}").as_bytes());
    }
    out.extend_from_slice(format!(" >>\nstartxref\n{xref_at}\n%%EOF\n").as_bytes());
    Some(out)
}

/// The largest object number a PDF may use (ISO 32000, annex C).
const MAX_OBJECT_NUMBER: u64 = 8_388_607;
/// The largest generation number, five digits in a cross-reference entry.
const MAX_GENERATION: u64 = 65_535;

/// Every `N G obj` at a line start: object number → (generation, offset of `N`).
fn object_headers(file: &[u8]) -> std::collections::BTreeMap<u64, (u64, usize)> {
    let mut found = std::collections::BTreeMap::new();
    let mut at = 0;
    while let Some(found_at) = find(&file[at..], b"obj") {
        let obj = at + found_at;
        at = obj + 3;
        if file
            .get(obj + 3)
            .is_some_and(|b| !is_delimiter_or_space(*b))
        {
            continue;
        }
        let before = &file[..obj];
        let Some((generation, rest)) = separated_number_before(before) else {
            continue;
        };
        let Some((number, rest)) = separated_number_before(rest) else {
            continue;
        };
        let line_start = rest.is_empty() || matches!(rest.last(), Some(b'\n' | b'\r'));
        // PDF's own limits: a number past them is no object (lopdf would wrap it onto another).
        if line_start && number <= MAX_OBJECT_NUMBER && generation <= MAX_GENERATION {
            found.insert(number, (generation, rest.len()));
        }
    }
    found
}

/// The decimal number that ends `before` after at least one blank, and what precedes it (at most
/// 10 digits). The pre-load stream scan (`pdf_filters`) reads object headers with it too.
pub(super) fn number_before(before: &[u8]) -> Option<(u64, &[u8])> {
    let trimmed = before.trim_ascii_end();
    if trimmed.len() == before.len() {
        return None;
    }
    let digits = trimmed
        .iter()
        .rev()
        .take_while(|b| b.is_ascii_digit())
        .take(11)
        .count();
    if digits == 0 || digits > 10 {
        return None;
    }
    let (rest, number) = trimmed.split_at(trimmed.len() - digits);
    let number = std::str::from_utf8(number).ok()?.parse().ok()?;
    Some((number, rest))
}

/// [`number_before`], where the number must also be separated from what precedes it by a
/// blank (or start the text): the rebuilt table takes only headers that stand alone.
fn separated_number_before(before: &[u8]) -> Option<(u64, &[u8])> {
    let (number, rest) = number_before(before)?;
    if rest.last().is_some_and(|b| !b.is_ascii_whitespace()) {
        return None;
    }
    Some((number, rest))
}

/// The last `trailer` dictionary's text, `<<` to its `>>`.
fn last_trailer(file: &[u8]) -> Option<&[u8]> {
    let at = rfind(file, b"trailer")?;
    let open = at + find(&file[at..], b"<<")?;
    Some(&file[open..open + dictionary_length(&file[open..])?])
}

/// The length of the dictionary that starts `text` (at its `<<`), strings skipped.
fn dictionary_length(text: &[u8]) -> Option<usize> {
    let mut depth = 0usize;
    let mut at = 0;
    while at < text.len() {
        match text[at] {
            b'<' if text.get(at + 1) == Some(&b'<') => {
                depth += 1;
                at += 2;
                continue;
            }
            b'>' if text.get(at + 1) == Some(&b'>') => {
                depth = depth.checked_sub(1)?;
                at += 2;
                if depth == 0 {
                    return Some(at);
                }
                continue;
            }
            // A hex string.
            b'<' => at += find(&text[at..], b">")?,
            // A literal string, with balanced parentheses and escapes.
            b'(' => {
                let mut open = 0usize;
                while at < text.len() {
                    match text[at] {
                        b'\\' => at += 1,
                        b'(' => open += 1,
                        b')' => {
                            open -= 1;
                            if open == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    at += 1;
                }
            }
            _ => {}
        }
        at += 1;
    }
    None
}

/// `N G R` after `key` in a dictionary's text.
fn reference_after(dictionary: &[u8], key: &[u8]) -> Option<String> {
    let at = key_value(dictionary, key)?;
    let words: Vec<&[u8]> = at
        .split(|b| b.is_ascii_whitespace())
        .filter(|w| !w.is_empty())
        .take(3)
        .collect();
    let [number, generation, r] = words.as_slice() else {
        return None;
    };
    let number: u64 = std::str::from_utf8(number).ok()?.parse().ok()?;
    let generation: u32 = std::str::from_utf8(generation).ok()?.parse().ok()?;
    (r.first() == Some(&b'R')).then(|| format!("{number} {generation} R"))
}

/// The `[ … ]` array after `key` in a dictionary's text.
fn array_after<'a>(dictionary: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
    let value = key_value(dictionary, key)?;
    let value = value.trim_ascii_start();
    if value.first() != Some(&b'[') {
        return None;
    }
    Some(&value[..=find(value, b"]")?])
}

/// The text after `key` (a whole name, not the prefix of a longer one).
fn key_value<'a>(dictionary: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
    let mut at = 0;
    while let Some(found) = find(&dictionary[at..], key) {
        let end = at + found + key.len();
        if dictionary
            .get(end)
            .is_some_and(|b| is_delimiter_or_space(*b))
        {
            return Some(&dictionary[end..]);
        }
        at = end;
    }
    None
}

/// `N G R` of the last object whose body says `/Type /Catalog`.
fn last_catalog(
    file: &[u8],
    objects: &std::collections::BTreeMap<u64, (u64, usize)>,
) -> Option<String> {
    let mut by_offset: Vec<(usize, u64, u64)> = objects
        .iter()
        .map(|(number, (generation, offset))| (*offset, *number, *generation))
        .collect();
    by_offset.sort_unstable();
    by_offset
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, (offset, number, generation))| {
            let end = by_offset.get(i + 1).map_or(file.len(), |next| next.0);
            let body = &file[*offset..end];
            let typed = key_value(body, b"/Type")?.trim_ascii_start();
            typed
                .starts_with(b"/Catalog")
                .then(|| format!("{number} {generation} R"))
        })
}

fn is_delimiter_or_space(b: u8) -> bool {
    b.is_ascii_whitespace() || b"()<>[]{}/%".contains(&b)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn rfind(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).rposition(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A one-page PDF whose every offset is right, with its text.
    fn pdf(text: &str) -> Vec<u8> {
        super::super::pdf::tests::one_page_pdf(
            &format!("BT /F1 12 Tf 72 720 Td ({text}) Tj ET"),
            &["<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"],
        )
    }

    fn text_of(bytes: &[u8]) -> Result<String, String> {
        let doc = pdf_extract::Document::load_mem(bytes).map_err(|e| e.to_string())?;
        let mut text = String::new();
        let mut output = pdf_extract::PlainTextOutput::new(&mut text);
        pdf_extract::output_doc_page(&doc, &mut output, 1).map_err(|e| e.to_string())?;
        Ok(text)
    }

    #[test]
    fn a_table_whose_offsets_point_beside_the_objects_is_rebuilt() {
        let good = pdf("Offsets one byte off");
        assert!(text_of(&good).unwrap().contains("Offsets one byte off"));
        // As in ksp-thesis.pdf: one byte gone before the table, so startxref misses it.
        let blank = find(&good, b"/Count 1 >>").unwrap() + 8;
        let broken = [&good[..blank], &good[blank + 1..]].concat();
        assert!(
            text_of(&broken).is_err(),
            "lopdf reads the broken file itself"
        );
        let rebuilt = with_rebuilt_xref(&broken).unwrap();
        assert!(text_of(&rebuilt).unwrap().contains("Offsets one byte off"));
    }

    #[test]
    fn a_file_without_a_trailer_names_its_catalog() {
        let good = pdf("No trailer at all");
        let broken = &good[..find(&good, b"xref").unwrap()];
        assert!(text_of(broken).is_err());
        let rebuilt = with_rebuilt_xref(broken).unwrap();
        assert!(text_of(&rebuilt).unwrap().contains("No trailer at all"));
    }

    #[test]
    fn the_last_header_of_a_number_wins_and_odd_headers_are_not_objects() {
        let file = b"%PDF-1.4\n1 0 obj\n<<>>\nendobj\nx 1 0 obj\n9 0 objection\n1 0 obj\n<<>>\n\
            4294967297 0 obj\n2 65536 obj\n";
        let found = object_headers(file);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[&1], (0, 53));
        assert_eq!(&file[53..60], b"1 0 obj");
        assert_eq!(with_rebuilt_xref(b"%PDF-1.4\nno objects\n"), None);
        assert_eq!(with_rebuilt_xref(b"not a pdf 1 0 obj"), None);
    }

    #[test]
    fn an_encrypted_file_whose_encryption_cannot_be_carried_over_is_not_rebuilt() {
        let good = pdf("Secret");
        let broken = &good[..find(&good, b"xref").unwrap()];
        let direct = [
            broken,
            b"trailer\n<< /Root 1 0 R /Encrypt << /Filter /Standard >> >>\n",
        ]
        .concat();
        assert_eq!(with_rebuilt_xref(&direct), None);
        let by_reference = [broken, b"trailer\n<< /Root 1 0 R /Encrypt 9 0 R >>\n"].concat();
        let rebuilt = with_rebuilt_xref(&by_reference).unwrap();
        let tail = String::from_utf8_lossy(&rebuilt[rebuilt.len().saturating_sub(100)..]);
        assert!(tail.contains("/Encrypt 9 0 R >>"), "{tail}");
    }

    #[test]
    fn trailer_keys_are_read_past_strings() {
        let trailer =
            b"<< /Info (a >> (nested) string) /Root 7 0 R /ID [<0A> <0B>] /Rooted 9 0 R >>";
        assert_eq!(dictionary_length(trailer), Some(trailer.len()));
        assert_eq!(reference_after(trailer, b"/Root").as_deref(), Some("7 0 R"));
        assert_eq!(
            array_after(trailer, b"/ID"),
            Some(b"[<0A> <0B>]".as_slice())
        );
        assert_eq!(reference_after(trailer, b"/Info"), None);
    }
}
