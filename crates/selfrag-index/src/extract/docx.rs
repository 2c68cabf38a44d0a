//! DOCX: the paragraphs of `word/document.xml`, paragraphs in a heading style (or with an
//! outline level) written as Markdown heading lines so they become sections, titled by the
//! document properties' title or its Title-styled paragraph. The core properties' title and
//! creators (`docProps/core.xml`) are the work's metadata; its dates are when the file was made
//! and saved, not when the work was published, and are not read.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

use quick_xml::Reader;
use quick_xml::events::{BytesStart, Event};

use selfrag_works::Work;

use super::{ExtractedDocument, MAX_INFLATED_BYTES, metadata, open_document, single_page};
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
    let core = part(&mut archive, "docProps/core.xml")
        .ok()
        .flatten()
        .map(|xml| core_properties(&xml))
        .unwrap_or_default();
    let work = core.work(path);
    let body = paragraphs(&body, &styles).map_err(malformed)?;
    // The properties' title where it is one (not "untitled" or the file's name), else the
    // Title-styled paragraph.
    let title = work.title().map(str::to_string).or(body.title);
    single_page(path, "DOCX", title, body.text, work)
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

/// What docProps/core.xml says of the work: `dc:title` and `dc:creator` as written.
#[derive(Debug, Default, PartialEq)]
struct CoreProperties {
    title: Option<String>,
    creator: Option<String>,
}

impl CoreProperties {
    /// The work they describe: the title where it is one, the creators (one or several,
    /// separated by `;`) where they are people and not an account such as "Administrator".
    fn work(&self, path: &Path) -> Work {
        Work {
            title: self
                .title
                .as_deref()
                .and_then(|t| metadata::usable_title(t, path))
                .map(metadata::from_file),
            authors: self
                .creator
                .as_deref()
                .map(metadata::authors_in_list)
                .and_then(metadata::authors_field),
            ..Work::default()
        }
    }
}

/// `dc:title` and `dc:creator` of docProps/core.xml (`dcterms:created` and `modified` are the
/// file's dates, not the work's).
fn core_properties(xml: &str) -> CoreProperties {
    let mut reader = Reader::from_str(xml);
    let mut properties = CoreProperties::default();
    let mut inside: Option<&'static str> = None;
    let mut value = String::new();
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) if e.local_name().as_ref() == "title" => inside = Some("title"),
            Ok(Event::Start(e)) if e.local_name().as_ref() == "creator" => inside = Some("creator"),
            Ok(Event::End(_)) if inside.is_some() => {
                let field = match inside.take() {
                    Some("title") => &mut properties.title,
                    _ => &mut properties.creator,
                };
                let text = value.trim();
                if field.is_none() && !text.is_empty() {
                    *field = Some(text.to_string());
                }
                value.clear();
            }
            Ok(Event::Text(t)) if inside.is_some() => value.push_str(&t.xml10_content()),
            Ok(Event::GeneralRef(r)) if inside.is_some() => value.push_str(&entity(&r)),
            Ok(Event::Eof) | Err(_) => break,
            _ => {}
        }
    }
    properties
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
pub(super) fn entity(r: &quick_xml::events::BytesRef<'_>) -> String {
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

    /// A DOCX of `document` and `core` (docProps/core.xml), stored uncompressed.
    fn docx_file(path: &Path, document: &str, core: &str) {
        use std::io::Write;
        let file = std::fs::File::create(path).unwrap();
        let mut zip = zip::ZipWriter::new(file);
        let stored = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored);
        for (name, xml) in [("word/document.xml", document), ("docProps/core.xml", core)] {
            zip.start_file(name, stored).unwrap();
            zip.write_all(xml.as_bytes()).unwrap();
        }
        zip.finish().unwrap();
    }

    const BODY: &str = r#"<w:document xmlns:w="w"><w:body>
        <w:p><w:r><w:t>Otters hold hands; see doi:10.5555/otters.1 for the data.</w:t></w:r></w:p>
        </w:body></w:document>"#;

    fn core(title: &str, creator: &str) -> String {
        format!(
            r#"<?xml version="1.0" encoding="UTF-8"?>
<cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties"
 xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:dcterms="http://purl.org/dc/terms/">
<dc:title>{title}</dc:title><dc:creator>{creator}</dc:creator>
<cp:lastModifiedBy>Administrator</cp:lastModifiedBy>
<dcterms:created>2024-01-02T03:04:05Z</dcterms:created></cp:coreProperties>"#
        )
    }

    /// Issue 45: a DOCX's core properties are its work's title and authors; its created date
    /// is the file's, not the work's.
    #[test]
    fn a_docx_core_title_and_creators_are_its_metadata() {
        use selfrag_works::FieldSource;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("otters.docx");
        docx_file(
            &path,
            BODY,
            &core("Otters &amp; Hands", "Marrow, Ann; Bo Ødegård"),
        );
        let document = extract(&path).unwrap();
        let work = &document.work;
        assert_eq!(document.title, "Otters & Hands");
        assert_eq!(work.title(), Some("Otters & Hands"));
        assert_eq!(
            work.title.as_ref().map(|t| t.source),
            Some(FieldSource::FileMetadata)
        );
        let families: Vec<&str> = work
            .authors()
            .iter()
            .map(selfrag_works::Author::family)
            .collect();
        assert_eq!(families, ["Marrow", "Ødegård"]);
        assert!(
            work.date.is_none(),
            "dcterms:created is not a publication date"
        );
        assert_eq!(Work::text(&work.doi), Some("10.5555/otters.1"));
        assert_eq!(
            work.doi.as_ref().map(|d| d.source),
            Some(FieldSource::Identifier)
        );

        // A placeholder title and account: no title, no author; the file's name names it.
        docx_file(&path, BODY, &core("Untitled", "Administrator"));
        let document = extract(&path).unwrap();
        assert_eq!(document.title, "otters");
        assert!(document.work.title.is_none() && document.work.authors.is_none());
    }
}
