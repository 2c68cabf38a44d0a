//! DOCX: the paragraphs of `word/document.xml`, paragraphs in a heading style (or with an
//! outline level) written as Markdown heading lines so they become sections, titled by the
//! document properties' title or its Title-styled paragraph.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

use quick_xml::Reader;
use quick_xml::events::{BytesStart, Event};

use super::{ExtractedDocument, MAX_INFLATED_BYTES, open_document, single_page};
use crate::IndexError;

pub(super) fn extract(path: &Path) -> Result<ExtractedDocument, IndexError> {
    let malformed = |reason: String| IndexError::Malformed {
        path: path.to_path_buf(),
        format: "DOCX".into(),
        reason,
    };
    let file = open_document(path)?;
    let mut archive = zip::ZipArchive::new(std::io::BufReader::new(file))
        .map_err(|e| malformed(format!("it is not a zip archive ({e})")))?;
    let body = part(&mut archive, "word/document.xml")
        .map_err(malformed)?
        .ok_or_else(|| malformed("it has no word/document.xml".into()))?;
    // Styles and properties are optional: without them headings fall back to style ids and the
    // title to the file name.
    let styles = part(&mut archive, "word/styles.xml")
        .ok()
        .flatten()
        .map(|xml| heading_styles(&xml))
        .unwrap_or_default();
    let core_title = part(&mut archive, "docProps/core.xml")
        .ok()
        .flatten()
        .and_then(|xml| core_title(&xml));
    let body = paragraphs(&body, &styles).map_err(malformed)?;
    let title = core_title.or(body.title);
    single_page(path, "DOCX", title, body.text)
}

/// The text of a part of the archive, `None` when the archive has no such part.
fn part<R: Read + std::io::Seek>(
    archive: &mut zip::ZipArchive<R>,
    name: &str,
) -> Result<Option<String>, String> {
    // Raw entry: zip is built without its deflate feature (enabling it would rebuild candle,
    // which shares the crate), so stored parts are read as they are and deflated ones through
    // flate2.
    let entry = match archive.by_name_raw(name.as_bytes()) {
        Ok(entry) => entry,
        Err(zip::result::ZipError::FileNotFound) => return Ok(None),
        Err(e) => return Err(format!("{name}: {e}")),
    };
    let method = entry.compression();
    let reader: Box<dyn Read + '_> = if method == zip::CompressionMethod::STORE {
        Box::new(entry)
    } else if method == zip::CompressionMethod::DEFLATE {
        Box::new(flate2::read::DeflateDecoder::new(entry))
    } else {
        return Err(format!(
            "{name} is compressed with {method:?}, which Word does not use"
        ));
    };
    let mut xml = String::new();
    reader
        .take(MAX_INFLATED_BYTES + 1)
        .read_to_string(&mut xml)
        .map_err(|e| format!("{name}: {e}"))?;
    if xml.len() as u64 > MAX_INFLATED_BYTES {
        // Cut short, the part would parse as a document that ends early.
        return Err(format!(
            "{name} inflates to more than {} MiB (a zip bomb?)",
            MAX_INFLATED_BYTES >> 20
        ));
    }
    Ok(Some(xml))
}

/// Style id -> heading level, from the style names ("heading 1", "Title") in styles.xml, so that
/// documents whose style ids are localised ("berschrift1") still get their sections.
fn heading_styles(xml: &str) -> HashMap<String, usize> {
    let mut levels = HashMap::new();
    let mut reader = Reader::from_str(xml);
    let mut style_id: Option<String> = None;
    loop {
        match reader.read_event() {
            Ok(Event::Start(e) | Event::Empty(e)) => match e.local_name().as_ref() {
                "style" => style_id = attribute(&e, "w:styleId"),
                "name" => {
                    if let (Some(id), Some(name)) = (&style_id, attribute(&e, "w:val"))
                        && let Some(level) = heading_level(&name)
                    {
                        levels.insert(id.clone(), level);
                    }
                }
                _ => {}
            },
            Ok(Event::Eof) | Err(_) => break,
            _ => {}
        }
    }
    levels
}

/// The heading level a style name or id stands for: "heading 2"/"Heading2" -> 2, "Title" -> 1.
fn heading_level(style: &str) -> Option<usize> {
    let lower = style.to_ascii_lowercase();
    if lower == "title" {
        return Some(1);
    }
    let digits = lower.strip_prefix("heading")?.trim();
    digits.parse::<usize>().ok().filter(|l| (1..=9).contains(l))
}

/// `dc:title` of docProps/core.xml.
fn core_title(xml: &str) -> Option<String> {
    let mut reader = Reader::from_str(xml);
    let mut inside = false;
    let mut title = String::new();
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) if e.local_name().as_ref() == "title" => inside = true,
            Ok(Event::End(e)) if e.local_name().as_ref() == "title" => break,
            Ok(Event::Text(t)) if inside => title.push_str(&t.xml10_content()),
            Ok(Event::GeneralRef(r)) if inside => title.push_str(&entity(&r)),
            Ok(Event::Eof) | Err(_) => break,
            _ => {}
        }
    }
    let title = title.trim();
    (!title.is_empty()).then(|| title.to_string())
}

/// The body as text and the first Title-styled paragraph.
struct Body {
    text: String,
    title: Option<String>,
}

fn paragraphs(xml: &str, styles: &HashMap<String, usize>) -> Result<Body, String> {
    let mut reader = Reader::from_str(xml);
    let mut text = String::new();
    let mut title = None;
    let mut paragraph = String::new();
    let mut level: Option<usize> = None;
    let mut is_title = false;
    let mut in_text = false;
    loop {
        let event = reader
            .read_event()
            .map_err(|e| format!("word/document.xml: {e}"))?;
        match event {
            // An empty `<w:t/>` has no text to collect.
            Event::Start(e) if e.local_name().as_ref() == "t" => in_text = true,
            Event::Start(e) | Event::Empty(e) => match e.local_name().as_ref() {
                "p" => {
                    paragraph.clear();
                    (level, is_title) = (None, false);
                }
                "pStyle" => {
                    if let Some(style) = attribute(&e, "w:val") {
                        is_title = style.eq_ignore_ascii_case("title");
                        level = styles
                            .get(&style)
                            .copied()
                            .or_else(|| heading_level(&style));
                    }
                }
                // An outline level makes a heading of a paragraph whose style is not one.
                "outlineLvl" => {
                    if let Some(l) = attribute(&e, "w:val").and_then(|v| v.parse::<usize>().ok())
                        && l < 9
                    {
                        level = level.or(Some(l + 1));
                    }
                }
                "tab" => paragraph.push('\t'),
                "br" | "cr" => paragraph.push('\n'),
                _ => {}
            },
            Event::Text(t) if in_text => paragraph.push_str(&t.xml10_content()),
            Event::GeneralRef(r) if in_text => paragraph.push_str(&entity(&r)),
            Event::End(e) => match e.local_name().as_ref() {
                "t" => in_text = false,
                "p" => {
                    let words = paragraph.split_whitespace().collect::<Vec<_>>().join(" ");
                    if words.is_empty() {
                        continue;
                    }
                    if is_title && title.is_none() {
                        title = Some(words.clone());
                    }
                    match level {
                        Some(level) => {
                            text.push_str(&"#".repeat(level.min(6)));
                            text.push(' ');
                            text.push_str(&words);
                        }
                        None => text.push_str(paragraph.trim()),
                    }
                    // A blank line ends the paragraph for the chunker.
                    text.push_str("\n\n");
                }
                _ => {}
            },
            Event::Eof => break,
            _ => {}
        }
    }
    Ok(Body { text, title })
}

/// The unescaped value of attribute `name` (qualified, e.g. `w:val`).
fn attribute(e: &BytesStart<'_>, name: &str) -> Option<String> {
    let attr = e.try_get_attribute(name).ok()??;
    attr.normalized_value(quick_xml::XmlVersion::Implicit1_0)
        .ok()
        .map(|v| v.into_owned())
}

/// The text of an entity or character reference (`&amp;`, `&#233;`).
fn entity(r: &quick_xml::events::BytesRef<'_>) -> String {
    if let Ok(Some(c)) = r.resolve_char_ref() {
        return c.to_string();
    }
    match &**r {
        "amp" => "&",
        "lt" => "<",
        "gt" => ">",
        "quot" => "\"",
        "apos" => "'",
        _ => "",
    }
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heading_styles_become_sections_and_entities_are_decoded() {
        let xml = r#"<w:document xmlns:w="w"><w:body>
            <w:p><w:pPr><w:pStyle w:val="Title"/></w:pPr><w:r><w:t>A &amp; B</w:t></w:r></w:p>
            <w:p><w:pPr><w:pStyle w:val="berschrift2"/></w:pPr><w:r><w:t>Method</w:t></w:r></w:p>
            <w:p><w:r><w:t xml:space="preserve">Self-RAG </w:t></w:r><w:r><w:t>retrieves&#46;</w:t></w:r></w:p>
            </w:body></w:document>"#;
        let styles = HashMap::from([("berschrift2".to_string(), 2)]);
        let body = paragraphs(xml, &styles).unwrap();
        assert_eq!(body.title.as_deref(), Some("A & B"));
        assert_eq!(body.text, "# A & B\n\n## Method\n\nSelf-RAG retrieves.\n\n");
    }

    #[test]
    fn style_names_map_to_levels() {
        let xml = r#"<w:styles xmlns:w="w"><w:style w:styleId="berschrift1"><w:name w:val="heading 1"/></w:style>
            <w:style w:styleId="Normal"><w:name w:val="Normal"/></w:style></w:styles>"#;
        let levels = heading_styles(xml);
        assert_eq!(levels.get("berschrift1"), Some(&1));
        assert_eq!(levels.get("Normal"), None);
    }
}
