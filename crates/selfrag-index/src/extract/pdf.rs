//! PDF: the text layer of each page with its 1-based page number, through pdf-extract.
//!
//! Pages are extracted one at a time so that one bad page (pdf-extract panics on some
//! malformed pages) or one scanned page costs that page, reported in the document's notes, and
//! not the paper. A file with no text at all is an error that says it was probably scanned.
//!
//! Before any page is read, every stream the text comes from (contents, fonts, CMaps; not
//! images, which are never decoded here) is decoded through all its filters into nothing up to
//! [`MAX_INFLATED_BYTES`], and so, before lopdf loads the file, is every object and
//! cross-reference stream, which lopdf decodes as it loads ([`pdf_filters`]): a bomb is refused
//! by name instead of being inflated whole by lopdf.
//!
//! A page's text is tidied for reading ([`tidy_page_text`]): words hyphenated at a line end are
//! joined and ligature characters written as letters.
//!
//! The work the file holds ([`ExtractedDocument::work`]) comes from its document information
//! dictionary and XMP packet ([`metadata::pdf_work`]), the identifiers printed on its first two
//! pages, and a guess from the layout of page 1 ([`first_page`]), recorded while its text is
//! read. Where the file's metadata has no usable title, the guessed title names the document
//! rather than the file's name.
//!
//! pdf-extract 0.12 reads text shown by `Tj` and `TJ` only; the `'` and `"` shorthands ("next
//! line, then show") are rewritten into `T*` and `Tj` first, or their text would be lost.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use pdf_extract::content::{Content, Operation};
use pdf_extract::{Document, MediaBox, Object, OutputDev, OutputError, PlainTextOutput, Transform};

use super::first_page::FirstPageLayout;
use super::metadata::{self, MAX_XMP_BYTES, PdfInfo};
use super::{
    ExtractedDocument, ExtractedPage, MAX_INFLATED_BYTES, MAX_LABEL_PREFIX_CHARS, bidi, clean_text,
    cut_chars, file_stem, ocr, pdf_cff, pdf_filters, pdf_xref, read_bytes,
};
use crate::IndexError;

pub(super) fn extract(path: &Path) -> Result<ExtractedDocument, IndexError> {
    let started = std::time::Instant::now();
    let bytes = read_bytes(path)?;
    let malformed = |reason: String| IndexError::Malformed {
        path: path.to_path_buf(),
        format: "PDF".into(),
        reason,
    };
    pdf_filters::refuse_bombs_before_load(&bytes).map_err(malformed)?;
    let mut notes = Vec::new();
    let mut doc = match Document::load_mem(&bytes) {
        Ok(mut doc) => {
            restore_streams_read_as_dictionaries(&mut doc, &bytes);
            doc
        }
        Err(pdf_extract::Error::Decryption(_) | pdf_extract::Error::InvalidPassword) => {
            return Err(IndexError::Encrypted {
                path: path.to_path_buf(),
            });
        }
        // A damaged cross-reference table: read through one rebuilt from the objects.
        Err(e) => match pdf_xref::with_rebuilt_xref(&bytes).map(|b| Document::load_mem(&b)) {
            Some(Ok(doc)) => {
                notes.push(format!(
                    "its cross-reference table was damaged ({e}); it was read through one \
                     rebuilt from the objects the file holds"
                ));
                doc
            }
            Some(Err(pdf_extract::Error::Decryption(_) | pdf_extract::Error::InvalidPassword)) => {
                return Err(IndexError::Encrypted {
                    path: path.to_path_buf(),
                });
            }
            _ => return Err(malformed(e.to_string())),
        },
    };
    // lopdf decrypts files whose user password is empty while loading; a document that is
    // still encrypted needs a password we do not have.
    if doc.is_encrypted() {
        return Err(IndexError::Encrypted {
            path: path.to_path_buf(),
        });
    }
    refuse_inflation_bombs(&doc).map_err(malformed)?;
    expand_text_shorthands(&mut doc);
    pdf_cff::read_builtin_encodings(&mut doc);
    let numbered = doc.get_pages();
    if numbered.is_empty() {
        return Err(malformed("it has no pages".into()));
    }
    let labels = PageLabels::read(&doc);
    let mut pages = Vec::new();
    let mut unreadable = 0;
    let mut scans = Scans {
        engine: None,
        started,
    };
    let mut scan_reason = None;
    let first_number = numbered.keys().next().copied();
    let mut layout = FirstPageLayout::default();
    for (number, id) in numbered {
        let text = if parent_chain_loops(&doc, id) {
            Err("its page tree loops back on itself".to_owned())
        } else if Some(number) == first_number {
            page_text(&doc, number, Some(&mut layout))
        } else {
            page_text(&doc, number, None)
        };
        match text {
            Ok(text) if text.trim().is_empty() => match read_scan(&doc, id, &mut scans) {
                Ok(read) => pages.push(ExtractedPage {
                    number: Some(number),
                    label: labels.label(number),
                    text: tidy_page_text(&clean_text(&read.text)),
                    ocr_confidence: Some(read.confidence),
                }),
                Err(reason) => {
                    notes.push(format!(
                        "page {number} has no text layer (scanned?); {reason}"
                    ));
                    scan_reason.get_or_insert(reason);
                }
            },
            Ok(text) => pages.push(ExtractedPage {
                number: Some(number),
                label: labels.label(number),
                text: tidy_page_text(&bidi::reading_order(&clean_text(&text))),
                ocr_confidence: None,
            }),
            Err(reason) => {
                unreadable += 1;
                notes.push(format!("page {number} could not be read ({reason})"));
            }
        }
    }
    if pages.is_empty() {
        return Err(if unreadable == 0 {
            IndexError::NoTextLayer {
                path: path.to_path_buf(),
                reason: scan_reason.unwrap_or_default(),
            }
        } else {
            malformed(notes.join("; "))
        });
    }
    let first_pages: Vec<&str> = pages.iter().take(2).map(|p| p.text.as_str()).collect();
    let work = metadata::combined(
        layout.guess(),
        &first_pages.join("\n"),
        metadata::pdf_work(&info(&doc), xmp_packet(&doc).as_deref(), path),
    );
    Ok(ExtractedDocument {
        title: work
            .title()
            .map(str::to_string)
            .unwrap_or_else(|| file_stem(path)),
        pages,
        notes,
        work,
    })
}

/// The most OCR one file may take: the parser's worker is given up after
/// `Extractor::DEFAULT_TIMEOUT` (60 s), and the file's text layer must be read within it too.
const OCR_BUDGET: std::time::Duration = std::time::Duration::from_secs(40);

/// The OCR of one file's scanned pages: the engine, looked up at the first, and when the file's
/// extraction began (the budget counts from there).
struct Scans {
    engine: Option<Option<PathBuf>>,
    started: std::time::Instant,
}

/// A page without a text layer read by OCR; or why it was not, in words that follow "has no
/// text layer (scanned?); ".
fn read_scan(
    doc: &Document,
    id: pdf_extract::ObjectId,
    scans: &mut Scans,
) -> Result<ocr::OcrPage, String> {
    let Some(tesseract) = scans.engine.get_or_insert_with(ocr::engine) else {
        return Err("install Tesseract (the `tesseract-ocr` package, Homebrew's `tesseract`, or the Windows installer), then re-index the file to read it by OCR".into());
    };
    let left = OCR_BUDGET.saturating_sub(scans.started.elapsed());
    if left.is_zero() {
        return Err(format!(
            "the OCR of one file stops after {} s and this file's ran out before this page; OCR the file with `ocrmypdf` and index the result to read every page",
            OCR_BUDGET.as_secs()
        ));
    }
    let elsewhere = "; OCR the file with `ocrmypdf` and index the result";
    match ocr::read_page(doc, id, tesseract, left) {
        Ok(Some(read)) if !read.text.trim().is_empty() => Ok(read),
        Ok(Some(_)) => Err("the OCR found no text on it".into()),
        Ok(None) if shows_text(doc, id) => Err("its text is drawn in fonts that map their glyphs to no characters (no Unicode mapping), and it draws no image for the OCR to read; only a rendering of the page could be read".into()),
        Ok(None) => Err("it draws no image for the OCR to read".into()),
        Err(reason) => Err(format!("the OCR could not read it: {reason}{elsewhere}")),
    }
}

/// Whether the page's content shows any text (a string to `Tj` or `TJ` that is not only spaces):
/// a page with no text read from it that does is one whose fonts map their glyphs to no
/// characters. (Text inside form XObjects is not looked for: such a page is called scanned.)
fn shows_text(doc: &Document, id: pdf_extract::ObjectId) -> bool {
    let Ok(content) = doc.get_page_content(id) else {
        return false;
    };
    let Ok(content) = Content::decode(&content) else {
        return false;
    };
    // A string of spaces shows nothing to read (in a simple font; a CID font's codes are
    // rarely 0x20 0x20).
    let shows = |bytes: &[u8]| bytes.iter().any(|&b| b != b' ');
    let non_empty = |object: &Object| match object {
        Object::String(bytes, _) => shows(bytes),
        Object::Array(items) => items
            .iter()
            .any(|item| matches!(item, Object::String(bytes, _) if shows(bytes))),
        _ => false,
    };
    content
        .operations
        .iter()
        .any(|op| matches!(op.operator.as_str(), "Tj" | "TJ") && op.operands.iter().any(non_empty))
}

/// An error naming the first stream that decodes past [`MAX_INFLATED_BYTES`] through any stage
/// of its filters ([`pdf_filters`]). Each stream is decoded into a small buffer and dropped, so
/// the check holds no more than that buffer.
fn refuse_inflation_bombs(doc: &Document) -> Result<(), String> {
    for (&(number, generation), object) in &doc.objects {
        let Object::Stream(stream) = object else {
            continue;
        };
        let name = |key: &[u8]| stream.dict.get(key).and_then(Object::as_name).ok();
        if name(b"Subtype") == Some(b"Image".as_slice()) {
            continue;
        }
        // As lopdf reads them: names given directly, parameters as one dictionary.
        let Ok(names) = stream.filters() else {
            continue;
        };
        let early_change = lzw_early_change(stream);
        let filters = pdf_filters::chain(names, early_change)
            .map_err(|e| format!("stream {number} {generation}: {e}"))?;
        let limit = MAX_INFLATED_BYTES + 1;
        if pdf_filters::decoded_size(&stream.content, &filters, limit) > MAX_INFLATED_BYTES {
            let (number, generation) = (number.into(), generation.into());
            return Err(pdf_filters::too_large(
                number,
                generation,
                MAX_INFLATED_BYTES,
            ));
        }
    }
    Ok(())
}

/// Reads the streams lopdf took for bare dictionaries. VTeX ends a stream's data with a space
/// rather than an end-of-line before `endstream`; lopdf does not take that and keeps the
/// object's dictionary without its data, so the pages of the Bera and CM Bright manuals had no
/// text. Such an object's data is the `/Length` bytes after the `stream` keyword and its
/// end-of-line, at the object's offset in the cross-reference table, taken only where the
/// keyword follows the dictionary and nothing but whitespace lies between the data and
/// `endstream`.
fn restore_streams_read_as_dictionaries(doc: &mut Document, bytes: &[u8]) {
    let mut restored = Vec::new();
    for (&id, object) in &doc.objects {
        let Object::Dictionary(dict) = object else {
            continue;
        };
        let length = match dict.get(b"Length") {
            Ok(Object::Reference(target)) => doc.get_object(*target).and_then(Object::as_i64),
            Ok(length) => length.as_i64(),
            Err(e) => Err(e),
        };
        let Some(length) = length.ok().and_then(|l| usize::try_from(l).ok()) else {
            continue;
        };
        let Some(pdf_extract::xref::XrefEntry::Normal { offset, .. }) =
            doc.reference_table.get(id.0)
        else {
            continue;
        };
        if let Some(data) = stream_data_at(bytes, *offset as usize, length) {
            restored.push((id, dict.clone(), data.to_vec()));
        }
    }
    for (id, dict, data) in restored {
        doc.objects
            .insert(id, Object::Stream(pdf_extract::Stream::new(dict, data)));
    }
}

/// The `length` bytes of data of the stream object at `offset` in `file`, where they are followed
/// by whitespace and `endstream`.
fn stream_data_at(file: &[u8], offset: usize, length: usize) -> Option<&[u8]> {
    const KEYWORD: &[u8] = b"stream";
    if length == 0 {
        return None;
    }
    let object = file.get(offset..)?;
    // The keyword of this object, not of one after it: before its `endobj`.
    let end_of_object = object
        .windows(6)
        .position(|w| w == b"endobj")
        .unwrap_or(object.len());
    let keyword = object[..end_of_object]
        .windows(KEYWORD.len())
        .position(|w| w == KEYWORD)?;
    let mut start = keyword + KEYWORD.len();
    if object.get(start) == Some(&b'\r') {
        start += 1;
    }
    if object.get(start) == Some(&b'\n') {
        start += 1;
    }
    let end = start.checked_add(length)?;
    let data = object.get(start..end)?;
    let after = object.get(end..)?;
    let gap = after.iter().take_while(|b| b.is_ascii_whitespace()).count();
    after[gap..].starts_with(b"endstream").then_some(data)
}

/// Rewrites the `'` (next line, show) and `"` (set spacing, next line, show) operators of every
/// page as the `Tw`, `Tc`, `T*` and `Tj` they stand for. A page whose content cannot be
/// decoded or re-encoded is left as it is: extraction then reads what it can of it.
fn expand_text_shorthands(doc: &mut Document) {
    let pages: Vec<_> = doc.get_pages().into_values().collect();
    for page in pages {
        let Ok(bytes) = doc.get_page_content(page) else {
            continue;
        };
        // Cheap test first: most pages have neither byte at all.
        if !bytes.iter().any(|&b| b == b'\'' || b == b'"') {
            continue;
        }
        let Ok(content) = Content::decode(&bytes) else {
            continue;
        };
        if !content
            .operations
            .iter()
            .any(|op| op.operator == "'" || op.operator == "\"")
        {
            continue;
        }
        let mut operations = Vec::with_capacity(content.operations.len() + 8);
        for op in content.operations {
            match (op.operator.as_str(), op.operands.as_slice()) {
                ("'", [text]) => {
                    operations.push(Operation::new("T*", vec![]));
                    operations.push(Operation::new("Tj", vec![text.clone()]));
                }
                ("\"", [word_spacing, char_spacing, text]) => {
                    operations.push(Operation::new("Tw", vec![word_spacing.clone()]));
                    operations.push(Operation::new("Tc", vec![char_spacing.clone()]));
                    operations.push(Operation::new("T*", vec![]));
                    operations.push(Operation::new("Tj", vec![text.clone()]));
                }
                _ => operations.push(op),
            }
        }
        if let Ok(encoded) = (Content { operations }).encode() {
            let _ = doc.change_page_content(page, encoded);
        }
    }
}

/// Whether following the `/Parent` references up from page `page` comes back to an object
/// already passed. pdf-extract looks a page's inherited attributes (`/MediaBox`, `/Resources`)
/// up that chain with no end, so such a page would overflow the stack.
fn parent_chain_loops(doc: &Document, page: pdf_extract::ObjectId) -> bool {
    let mut passed = std::collections::HashSet::new();
    let mut current = page;
    loop {
        if !passed.insert(current) {
            return true;
        }
        let parent = doc
            .get_dictionary(current)
            .and_then(|dict| dict.get(b"Parent"))
            .and_then(Object::as_reference);
        match parent {
            Ok(next) => current = next,
            Err(_) => return false,
        }
    }
}

/// The text of page `number`, or why it could not be read; its characters' layout recorded
/// into `layout` as well where one is given (page 1's, for [`first_page`]). A page that could
/// not be read leaves `layout` empty.
fn page_text(
    doc: &Document,
    number: u32,
    mut layout: Option<&mut FirstPageLayout>,
) -> Result<String, String> {
    // pdf-extract unwraps on malformed pages; a panic there is one unreadable page. (Stack
    // overflows and endless loops are what the worker process is for.)
    let result = catch_unwind(AssertUnwindSafe(|| {
        let mut text = String::new();
        let written = {
            let mut output = PlainTextOutput::new(&mut text);
            match layout.as_deref_mut() {
                Some(layout) => {
                    pdf_extract::output_doc_page(doc, &mut Both(&mut output, layout), number)
                }
                None => pdf_extract::output_doc_page(doc, &mut output, number),
            }
        };
        written.map(|()| text)
    }));
    let result = match result {
        Ok(Ok(text)) => Ok(text),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("the PDF parser failed on it".into()),
    };
    if let (Err(_), Some(layout)) = (&result, layout) {
        *layout = FirstPageLayout::default();
    }
    result
}

/// An output device that hands everything to two: the page's text and its layout.
struct Both<'a>(&'a mut dyn OutputDev, &'a mut dyn OutputDev);

impl OutputDev for Both<'_> {
    fn begin_page(
        &mut self,
        page_num: u32,
        media_box: &MediaBox,
        art_box: Option<(f64, f64, f64, f64)>,
    ) -> Result<(), OutputError> {
        self.0.begin_page(page_num, media_box, art_box)?;
        self.1.begin_page(page_num, media_box, art_box)
    }

    fn end_page(&mut self) -> Result<(), OutputError> {
        self.0.end_page()?;
        self.1.end_page()
    }

    fn output_character(
        &mut self,
        trm: &Transform,
        width: f64,
        spacing: f64,
        font_size: f64,
        char: &str,
    ) -> Result<(), OutputError> {
        self.0
            .output_character(trm, width, spacing, font_size, char)?;
        self.1
            .output_character(trm, width, spacing, font_size, char)
    }

    fn begin_word(&mut self) -> Result<(), OutputError> {
        self.0.begin_word()?;
        self.1.begin_word()
    }

    fn end_word(&mut self) -> Result<(), OutputError> {
        self.0.end_word()?;
        self.1.end_word()
    }

    fn end_line(&mut self) -> Result<(), OutputError> {
        self.0.end_line()?;
        self.1.end_line()
    }
}

/// A page's text as passages want it:
/// - a word hyphenated at a line end joined again (`exam-\nple` → `example`, where the line goes
///   on in lower case: a hyphen before a capital or a digit is kept) and soft hyphens dropped;
/// - the Latin ligature characters of many fonts' encodings (`ﬁ`, `ﬂ`, `ﬀ`, `ﬃ`, `ﬄ`, `ﬅ`, `ﬆ`)
///   written as their letters, so that a search for "efficient" finds "eﬃcient";
/// - TeX's accents put back on their letters: with its 7-bit fonts an accent is a glyph of its
///   own drawn before the letter (`Conclus˜ao`, `Vin´ıcius`), composed here (`Conclusão`,
///   `Vinícius`).
pub(super) fn tidy_page_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{fb00}' => out.push_str("ff"),
            '\u{fb01}' => out.push_str("fi"),
            '\u{fb02}' => out.push_str("fl"),
            '\u{fb03}' => out.push_str("ffi"),
            '\u{fb04}' => out.push_str("ffl"),
            '\u{fb05}' | '\u{fb06}' => out.push_str("st"),
            '\u{ad}' => {}
            '-' | '\u{2010}' if out.chars().next_back().is_some_and(char::is_alphabetic) => {
                // A line end after the hyphen, then the rest of the word in lower case.
                let mut ahead = chars.clone();
                while ahead
                    .next_if(|&c| c == ' ' || c == '\t' || c == '\r')
                    .is_some()
                {}
                if ahead.next_if_eq(&'\n').is_some() {
                    while ahead.next_if(|&c| c == ' ' || c == '\t').is_some() {}
                    if ahead.peek().is_some_and(|c| c.is_lowercase()) {
                        chars = ahead;
                        continue;
                    }
                }
                out.push(c);
            }
            c => match (combining_accent(c), chars.peek().copied()) {
                (Some(mark), Some(letter))
                    if letter.is_alphabetic() && !(c == '\u{b4}' && contraction(&chars)) =>
                {
                    chars.next();
                    let base = match letter {
                        'ı' => 'i',
                        'ȷ' => 'j',
                        other => other,
                    };
                    match unicode_normalization::char::compose(base, mark) {
                        Some(composed) => out.push(composed),
                        None => {
                            out.push(base);
                            out.push(mark);
                        }
                    }
                }
                _ => out.push(c),
            },
        }
    }
    out
}

/// Whether the letters after an acute accent end an English contraction (`It´s`, `don´t`,
/// `we´ll`): Word and others write the apostrophe as `´`, which is no accent there.
fn contraction(after: &std::iter::Peekable<std::str::Chars<'_>>) -> bool {
    let word: String = after
        .clone()
        .take_while(|c| c.is_alphabetic())
        .take(3)
        .collect();
    matches!(word.as_str(), "s" | "t" | "d" | "m" | "ll" | "re" | "ve")
}

/// The combining mark of a spacing accent as TeX's 7-bit fonts draw it.
fn combining_accent(c: char) -> Option<char> {
    Some(match c {
        '\u{b4}' => '\u{301}',  // ´ acute
        '\u{2dc}' => '\u{303}', // ˜ tilde
        '\u{2c6}' => '\u{302}', // ˆ circumflex
        '\u{a8}' => '\u{308}',  // ¨ diaeresis
        '\u{b8}' => '\u{327}',  // ¸ cedilla
        '\u{2c7}' => '\u{30c}', // ˇ caron
        '\u{2d8}' => '\u{306}', // ˘ breve
        '\u{2da}' => '\u{30a}', // ˚ ring
        '\u{2dd}' => '\u{30b}', // ˝ double acute
        '\u{af}' => '\u{304}',  // ¯ macron
        '\u{2d9}' => '\u{307}', // ˙ dot
        _ => return None,
    })
}

/// The PDF's page labels (the catalog's `/PageLabels` number tree): the numbers printed on its
/// pages, which differ from their places in the file in front matter (`i`, `ii`, …) or in an
/// article printed as pages 117–131. A damaged tree gives no labels, never an error.
#[derive(Debug, Default)]
struct PageLabels {
    /// (first page index, 0-based; its range's style), by index.
    ranges: Vec<(u32, LabelRange)>,
}

#[derive(Debug, Clone, PartialEq)]
struct LabelRange {
    /// `D`, `R`, `r`, `A`, `a`, or none (the prefix alone).
    style: Option<u8>,
    prefix: String,
    start: u32,
}

/// How far a hostile number tree is followed.
const LABEL_TREE_DEPTH: usize = 16;
const LABEL_RANGES: usize = 100_000;

impl PageLabels {
    fn read(doc: &Document) -> Self {
        let mut ranges = Vec::new();
        let tree = doc
            .catalog()
            .ok()
            .and_then(|catalog| catalog.get(b"PageLabels").ok())
            .and_then(|tree| resolve_dict(doc, tree));
        if let Some(tree) = tree {
            collect_label_ranges(doc, tree, 0, &mut ranges);
        }
        ranges.sort_by_key(|(index, _)| *index);
        ranges.dedup_by_key(|(index, _)| *index);
        Self { ranges }
    }

    /// The label of the 1-based page `number`, where it is not just `number` itself.
    fn label(&self, number: u32) -> Option<String> {
        let index = number.checked_sub(1)?;
        let at = self.ranges.partition_point(|(first, _)| *first <= index);
        let (first, range) = self.ranges.get(at.checked_sub(1)?)?;
        let value = range.start.saturating_add(index - first);
        let numeral = match range.style {
            Some(b'D') => value.to_string(),
            Some(b'R') => roman(value).to_uppercase(),
            Some(b'r') => roman(value),
            Some(b'A') => letters(value).to_uppercase(),
            Some(b'a') => letters(value),
            _ => String::new(),
        };
        let label = clean_text(&format!("{}{numeral}", range.prefix))
            .trim()
            .to_owned();
        (!label.is_empty() && label != number.to_string()).then_some(label)
    }
}

/// `object`'s dictionary, through one reference where it is one; `None` for anything else.
pub(super) fn resolve_dict<'a>(
    doc: &'a Document,
    object: &'a Object,
) -> Option<&'a pdf_extract::Dictionary> {
    match object {
        Object::Reference(id) => doc.get_dictionary(*id).ok(),
        Object::Dictionary(dict) => Some(dict),
        _ => None,
    }
}

/// The object `object` refers to, or `object` itself where it is no reference (or a dangling
/// one).
pub(super) fn resolve<'a>(doc: &'a Document, object: &'a Object) -> &'a Object {
    match object {
        Object::Reference(id) => doc.get_object(*id).unwrap_or(object),
        other => other,
    }
}

/// The ranges of one node of the number tree: its `/Nums` pairs, then its `/Kids`.
fn collect_label_ranges(
    doc: &Document,
    node: &pdf_extract::Dictionary,
    depth: usize,
    ranges: &mut Vec<(u32, LabelRange)>,
) {
    if depth > LABEL_TREE_DEPTH || ranges.len() >= LABEL_RANGES {
        return;
    }
    if let Ok(Object::Array(nums)) = node.get(b"Nums").map(|n| resolve(doc, n)) {
        for pair in nums.chunks(2) {
            let [key, value] = pair else { break };
            let (Ok(index), Some(dict)) = (resolve(doc, key).as_i64(), resolve_dict(doc, value))
            else {
                continue;
            };
            let Ok(index) = u32::try_from(index) else {
                continue;
            };
            let style = match dict.get(b"S").map(|s| resolve(doc, s)) {
                Ok(Object::Name(name)) => name.first().copied(),
                _ => None,
            };
            let prefix = dict
                .get(b"P")
                .ok()
                .and_then(|p| pdf_extract::decode_text_string(resolve(doc, p)).ok())
                .map(|p| cut_chars(&p, MAX_LABEL_PREFIX_CHARS).to_owned())
                .unwrap_or_default();
            let start = dict
                .get(b"St")
                .ok()
                .and_then(|s| resolve(doc, s).as_i64().ok())
                .and_then(|s| u32::try_from(s).ok())
                .filter(|s| *s >= 1)
                .unwrap_or(1);
            ranges.push((
                index,
                LabelRange {
                    style,
                    prefix,
                    start,
                },
            ));
            if ranges.len() >= LABEL_RANGES {
                return;
            }
        }
    }
    if let Ok(Object::Array(kids)) = node.get(b"Kids").map(|k| resolve(doc, k)) {
        for kid in kids {
            if let Some(kid) = resolve_dict(doc, kid) {
                collect_label_ranges(doc, kid, depth + 1, ranges);
            }
        }
    }
}

/// Lower-case roman numerals; past 3,999 the thousands repeat, as PDF readers print them.
fn roman(mut n: u32) -> String {
    const DIGITS: [(u32, &str); 13] = [
        (1000, "m"),
        (900, "cm"),
        (500, "d"),
        (400, "cd"),
        (100, "c"),
        (90, "xc"),
        (50, "l"),
        (40, "xl"),
        (10, "x"),
        (9, "ix"),
        (5, "v"),
        (4, "iv"),
        (1, "i"),
    ];
    // A label is for reading: an absurd start is cut rather than spelled out in thousands.
    n = n.min(100_000);
    let mut out = String::new();
    for (value, digits) in DIGITS {
        while n >= value {
            out.push_str(digits);
            n -= value;
        }
    }
    out
}

/// Lower-case letter numbering as PDF defines it: a … z, then aa … zz, then aaa …
fn letters(n: u32) -> String {
    if n == 0 {
        return String::new();
    }
    let letter = char::from(b'a' + ((n - 1) % 26) as u8);
    let repeat = (((n - 1) / 26) + 1).min(64) as usize;
    std::iter::repeat_n(letter, repeat).collect()
}

/// The document information dictionary's `/Title`, `/Author` and `/doi` (or `/DOI`), where
/// they are text.
fn info(doc: &Document) -> PdfInfo {
    let dict = match doc.trailer.get(b"Info") {
        Ok(Object::Reference(id)) => doc.get_dictionary(*id).ok(),
        Ok(Object::Dictionary(dict)) => Some(dict),
        _ => None,
    };
    let Some(dict) = dict else {
        return PdfInfo::default();
    };
    let text = |key: &[u8]| {
        let value = pdf_extract::decode_text_string(resolve(doc, dict.get(key).ok()?)).ok()?;
        let value = value.trim();
        (!value.is_empty()).then(|| value.to_string())
    };
    PdfInfo {
        title: text(b"Title"),
        author: text(b"Author"),
        doi: text(b"doi").or_else(|| text(b"DOI")),
    }
}

/// The LZW `/EarlyChange` parameter of `stream`, where its `/DecodeParms` (one dictionary, as
/// lopdf reads them) gives one.
fn lzw_early_change(stream: &pdf_extract::Stream) -> Option<i64> {
    stream
        .dict
        .get(b"DecodeParms")
        .and_then(Object::as_dict)
        .and_then(|params| params.get(b"EarlyChange"))
        .and_then(Object::as_i64)
        .ok()
}

/// The content of `stream` through its filters, where it decodes within `limit` bytes.
pub(super) fn decoded_within(stream: &pdf_extract::Stream, limit: u64) -> Option<Vec<u8>> {
    let names = stream.filters().unwrap_or_default();
    if names.is_empty() {
        return (stream.content.len() as u64 <= limit).then(|| stream.content.clone());
    }
    let early_change = lzw_early_change(stream);
    let filters = pdf_filters::chain(names, early_change).ok()?;
    if pdf_filters::decoded_size(&stream.content, &filters, limit + 1) > limit {
        return None;
    }
    stream.decompressed_content().ok()
}

/// The catalog's XMP packet (its `/Metadata` stream) as text, where it decodes within
/// [`MAX_XMP_BYTES`]: UTF-8, or UTF-16 where a byte-order mark says so.
fn xmp_packet(doc: &Document) -> Option<String> {
    let metadata = doc.catalog().ok()?.get(b"Metadata").ok()?;
    let Object::Stream(stream) = resolve(doc, metadata) else {
        return None;
    };
    let bytes = decoded_within(stream, MAX_XMP_BYTES)?;
    let (text, _) = encoding_rs::Encoding::for_bom(&bytes)
        .map(|(encoding, _)| encoding)
        .unwrap_or(encoding_rs::UTF_8)
        .decode_with_bom_removal(&bytes);
    Some(text.into_owned())
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    #[test]
    fn hyphenated_line_ends_are_joined_and_ligatures_written_as_letters() {
        assert_eq!(
            tidy_page_text("an exam-\nple of the ef\u{fb01}cient\nre\u{ad}trieval"),
            "an example of the efficient\nretrieval"
        );
        // A hyphen kept: before a capital or a digit, inside a line, or at the end of the text.
        assert_eq!(
            tidy_page_text("Self-\nRAG, Llama-\n2, self-reflective, end-"),
            "Self-\nRAG, Llama-\n2, self-reflective, end-"
        );
        // Spaces around the line end go with it; a dash after a space is not a hyphen.
        assert_eq!(
            tidy_page_text("retrie- \n  val and - \nthen"),
            "retrieval and - \nthen"
        );
        assert_eq!(
            tidy_page_text("\u{fb00} \u{fb02} \u{fb03} \u{fb04} \u{fb06}"),
            "ff fl ffi ffl st"
        );
        // TeX's accents, drawn before their letters, composed with them.
        assert_eq!(
            tidy_page_text(
                "Conclus\u{2dc}ao, Disserta\u{b8}c\u{2dc}oes, Vin\u{b4}\u{131}cius, \u{a8}uber, 5 \u{b4} x"
            ),
            "Conclusão, Dissertações, Vinícius, über, 5 ´ x"
        );
        // An acute accent written for an apostrophe stays one.
        assert_eq!(
            tidy_page_text("It\u{b4}s, don\u{b4}t, we\u{b4}ll"),
            "It\u{b4}s, don\u{b4}t, we\u{b4}ll"
        );
    }

    /// A PDF of `objects` (numbered from 1, the first is the catalog) with a correct xref table.
    fn pdf_of(objects: &[&str]) -> Vec<u8> {
        pdf_with_trailer(objects, "")
    }

    /// [`pdf_of`] with `trailer` (`/Info 7 0 R`) added to its trailer dictionary.
    fn pdf_with_trailer(objects: &[&str], trailer: &str) -> Vec<u8> {
        let mut out = b"%PDF-1.4\n".to_vec();
        let mut offsets = Vec::new();
        for (i, object) in objects.iter().enumerate() {
            offsets.push(out.len());
            out.extend_from_slice(format!("{} 0 obj\n{object}\nendobj\n", i + 1).as_bytes());
        }
        let xref = out.len();
        out.extend_from_slice(
            format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes(),
        );
        for offset in offsets {
            out.extend_from_slice(format!("{offset:010} 00000 n \n").as_bytes());
        }
        out.extend_from_slice(
            format!(
                "trailer\n<< /Size {} /Root 1 0 R {trailer} >>\nstartxref\n{xref}\n%%EOF\n",
                objects.len() + 1
            )
            .as_bytes(),
        );
        out
    }

    /// A one-page PDF drawing `content`, whose font `/F1` is object 5: the first of `fonts`,
    /// which are objects 5, 6, … (a font and the objects it refers to).
    pub(in crate::extract) fn one_page_pdf(content: &str, fonts: &[&str]) -> Vec<u8> {
        let stream = format!(
            "<< /Length {} >>\nstream\n{content}\nendstream",
            content.len()
        );
        let mut objects = vec![
            "<< /Type /Catalog /Pages 2 0 R >>",
            "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R \
             /Resources << /Font << /F1 5 0 R >> >> >>",
            &stream,
        ];
        objects.extend_from_slice(fonts);
        pdf_of(&objects)
    }

    /// VTeX ends stream data with a space before `endstream`, not an end-of-line: lopdf read
    /// those streams as bare dictionaries, and the Bera and CM Bright manuals were refused as without text.
    #[test]
    fn a_stream_ended_by_a_space_before_endstream_is_read() {
        let font = "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>";
        let pdf = one_page_pdf("BT /F1 12 Tf 20 100 Td (Hello VTeX.) Tj ET", &[font]);
        let at = pdf.windows(10).position(|w| w == b"\nendstream").unwrap();
        let mut vtex = pdf.clone();
        vtex[at] = b' ';
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vtex.pdf");
        std::fs::write(&path, &vtex).unwrap();
        let document = extract(&path).unwrap();
        assert!(
            document.pages[0].text.contains("Hello VTeX."),
            "{document:?}"
        );
    }

    /// Found by the `extractors` fuzz target (2026-11-26, under gdb: 57,000 frames of
    /// pdf-extract's `get_inherited`): a page without `/MediaBox` whose `/Parent` chain loops
    /// sent pdf-extract up that chain for ever, and the stack overflowed (a crash of the worker
    /// in the app, of the whole process in-process). The page is now unreadable, and the other
    /// page of the file is read.
    #[test]
    fn a_page_tree_that_loops_is_an_unreadable_page_not_a_stack_overflow() {
        let stream = "BT /F1 12 Tf 20 100 Td (Hello PDF world.) Tj ET";
        let font = "<< /Font << /F1 << /Type /Font /Subtype /Type1 /BaseFont /Helvetica >> >> >>";
        let pdf = pdf_of(&[
            "<< /Type /Catalog /Pages 2 0 R >>",
            "<< /Type /Pages /Kids [3 0 R 4 0 R] /Count 2 >>",
            // Page 1: no MediaBox of its own, and its parents 6 -> 7 -> 6 loop.
            &format!("<< /Type /Page /Parent 6 0 R /Contents 5 0 R /Resources {font} >>"),
            &format!(
                "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] /Contents 5 0 R /Resources {font} >>"
            ),
            &format!(
                "<< /Length {} >>\nstream\n{stream}\nendstream",
                stream.len()
            ),
            "<< /Type /Pages /Parent 7 0 R >>",
            "<< /Type /Pages /Parent 6 0 R >>",
        ]);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("looping-page-tree.pdf");
        std::fs::write(&path, pdf).unwrap();
        let document = extract(&path).unwrap();
        assert_eq!(document.pages.len(), 1);
        assert_eq!(document.pages[0].number, Some(2));
        assert!(document.pages[0].text.contains("Hello PDF world."));
        assert!(
            document.notes.iter().any(
                |n| n.contains("page 1 could not be read (its page tree loops back on itself)")
            ),
            "{:?}",
            document.notes
        );
    }

    /// Found by the `extractors` fuzz target (2026-11-22): the page's font `5 0 R` does not
    /// parse (`/Type 'Font`, and `e~dobj` before it), so pdf-extract unwraps a missing object
    /// while reading the page. Inside the page boundary that is one unreadable page, and with no
    /// other page the file is malformed; never a panic out of `extract`.
    #[test]
    fn a_page_whose_font_object_is_broken_is_unreadable_not_a_crash() {
        let pdf = concat!(
            "%PDF-1.4\n",
            "1 0 obj\n",
            "<< /Type /Catalog /Pages 2 0 R >>\n",
            "endobj\n",
            "2 0 obj\n",
            "<< /Type /Pages /Kids [3 0 R] /Count 1 >>\n",
            "endobj\n",
            "3 0 obj\n",
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] /Contents 4 0 R ",
            "/Resources << /Font << /F1 5 0 R >> >> >>\n",
            "endobj\n",
            "4 0 obj\n",
            "<< /Length 48 >>\n",
            "stream\n",
            "BT /F1 12 Tf 20 100 Td (Hello PDF world.) Tj ET\n",
            "endstream\n",
            "e~dobj\n",
            "5 0 obj\n",
            "<< /Type 'Font /Subtype /Type1 /BaseFont /Helvetica >>\n",
            "endobj\n",
            "xref\n",
            "0 6\n",
            "0000000000 65535 f \n",
            "0000000009 00000 n \n",
            "0000000058 00000 n \n",
            "0000000115 00000 n \n",
            "0000000241 00000 n \n",
            "0000000338 00000 n \n",
            "trailer\n",
            "<< /Size 6 /Root 1 0 R >>\n",
            "startxref\n",
            "408\n",
            "%%EOF\n",
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("broken-font.pdf");
        std::fs::write(&path, pdf).unwrap();
        let err = extract(&path).unwrap_err();
        assert!(
            matches!(&err, IndexError::Malformed { reason, .. }
                if reason.contains("page 1 could not be read")),
            "{err}"
        );
    }

    /// `GuITlogo.pdf` (texlive-publishers-doc): a logo whose CID font has an empty ToUnicode
    /// map. Nothing maps its glyphs to characters (pdftotext reads the glyph ids as ";mAi R"),
    /// and the refusal says so instead of calling the page scanned.
    #[test]
    fn a_page_whose_glyphs_map_to_no_characters_is_refused_saying_so() {
        let cmap = "begincmap\n1 begincodespacerange\n<0000> <FFFF>\nendcodespacerange\nendcmap";
        let pdf = one_page_pdf(
            "BT /F1 24 Tf 72 720 Td <003b006d> Tj ET",
            &[
                "<< /Type /Font /Subtype /Type0 /BaseFont /Logo /Encoding /Identity-H \
             /DescendantFonts [6 0 R] /ToUnicode 7 0 R >>",
                "<< /Type /Font /Subtype /CIDFontType0 /BaseFont /Logo \
             /CIDSystemInfo << /Registry (Adobe) /Ordering (Identity) /Supplement 0 >> /DW 1000 \
             /FontDescriptor << /Type /FontDescriptor /FontName /Logo /Flags 4 >> >>",
                &format!("<< /Length {} >>\nstream\n{cmap}\nendstream", cmap.len()),
            ],
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logo.pdf");
        std::fs::write(&path, pdf).unwrap();
        match extract(&path) {
            Err(IndexError::NoTextLayer { reason, .. }) => assert!(
                reason.contains("map their glyphs to no characters"),
                "{reason}"
            ),
            other => panic!("{other:?}"),
        }
    }

    /// A paper's first page, set as papers are: a running head, the title large over two
    /// lines, the authors under it with superscript marks, an affiliation, then the body with
    /// a DOI and an arXiv id printed in it. `catalog_extra` and `trailer` add the metadata.
    fn paper_pdf(catalog_extra: &str, extra_objects: &[&str], trailer: &str) -> Vec<u8> {
        let content = "BT /F1 8 Tf 72 760 Td (Preprint. Under review.) Tj ET \
             BT /F1 18 Tf 72 700 Td (Otters and Their Hands:) Tj ET \
             BT /F1 18 Tf 72 678 Td (A Field Study) Tj ET \
             BT /F1 11 Tf 72 650 Td (Ann Marrow) Tj ET \
             BT /F1 7 Tf 130 655 Td (1) Tj ET \
             BT /F1 11 Tf 140 650 Td (and Bo Odegard) Tj ET \
             BT /F1 10 Tf 72 636 Td (University of the Sea) Tj ET \
             BT /F1 10 Tf 72 600 Td (Otters hold hands while they sleep, so that they do not drift apart.) Tj ET \
             BT /F1 10 Tf 72 588 Td (We counted how often they let go, over three winters on the coast.) Tj ET \
             BT /F1 10 Tf 72 576 Td (Data: doi 10.5555/otters.2020.1 and arXiv:2101.00001v2 hold it all.) Tj ET";
        let stream = format!(
            "<< /Length {} >>\nstream\n{content}\nendstream",
            content.len()
        );
        let catalog = format!("<< /Type /Catalog /Pages 2 0 R {catalog_extra} >>");
        let mut objects = vec![
            catalog.as_str(),
            "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R \
             /Resources << /Font << /F1 5 0 R >> >> >>",
            &stream,
            "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        ];
        objects.extend_from_slice(extra_objects);
        pdf_with_trailer(&objects, trailer)
    }

    fn family_names(work: &selfrag_works::Work) -> Vec<&str> {
        work.authors()
            .iter()
            .map(selfrag_works::Author::family)
            .collect()
    }

    /// Issue 45: a PDF whose Info dictionary says nothing usable (Word's printer's title for
    /// a file, a placeholder account for the author) is named and described by its first page.
    #[test]
    fn a_pdf_without_usable_metadata_is_described_by_its_first_page() {
        use selfrag_works::FieldSource;
        let pdf = paper_pdf(
            "",
            &["<< /Title (Microsoft Word - otters_final.doc) /Author (Administrator) >>"],
            "/Info 6 0 R",
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("otters_final.pdf");
        std::fs::write(&path, pdf).unwrap();
        let document = extract(&path).unwrap();
        let work = &document.work;
        assert_eq!(work.title(), Some("Otters and Their Hands: A Field Study"));
        assert_eq!(
            work.title.as_ref().map(|t| t.source),
            Some(FieldSource::FirstPageGuess)
        );
        assert_eq!(
            document.title, "Otters and Their Hands: A Field Study",
            "not the file name"
        );
        assert_eq!(family_names(work), ["Marrow", "Odegard"]);
        assert_eq!(
            work.authors.as_ref().map(|a| a.source),
            Some(FieldSource::FirstPageGuess)
        );
        assert_eq!(
            selfrag_works::Work::text(&work.doi),
            Some("10.5555/otters.2020.1")
        );
        assert_eq!(
            work.doi.as_ref().map(|d| d.source),
            Some(FieldSource::Identifier)
        );
        assert_eq!(selfrag_works::Work::text(&work.arxiv), Some("2101.00001"));
        assert!(work.date.is_none(), "the file's dates are not the work's");
    }

    /// Issue 45: the Info dictionary and the XMP packet are the file's metadata, XMP winning
    /// where both say something, and both above the first-page guess and the text's DOI.
    #[test]
    fn a_pdfs_info_and_xmp_are_its_metadata_and_outrank_the_page() {
        use selfrag_works::FieldSource;
        let xmp = r#"<?xpacket begin="" id="W5M0MpCehiHzreSzNTczkc9d"?>
<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">
<rdf:Description rdf:about="" xmlns:dc="http://purl.org/dc/elements/1.1/"
 xmlns:prism="http://prismstandard.org/namespaces/basic/3.0/">
<dc:title><rdf:Alt><rdf:li xml:lang="x-default">Sleeping Otters Hold Hands</rdf:li></rdf:Alt></dc:title>
<dc:creator><rdf:Seq><rdf:li>Marrow, Ann</rdf:li><rdf:li>Bo Ødegård</rdf:li></rdf:Seq></dc:creator>
<prism:doi>10.1000/OTTERS.1998</prism:doi>
<prism:coverDate>1998-03-15</prism:coverDate>
<prism:publicationName>Journal of Marine Mammals</prism:publicationName>
</rdf:Description></rdf:RDF></x:xmpmeta><?xpacket end="w"?>"#;
        let stream = format!(
            "<< /Type /Metadata /Subtype /XML /Length {} >>\nstream\n{xmp}\nendstream",
            xmp.len()
        );
        let info = "<< /Title (Otters, the Info title) /Author (Ann Marrow; Cy Twombly) \
                    /CreationDate (D:20240101000000Z) >>";
        let pdf = paper_pdf("/Metadata 7 0 R", &[info, &stream], "/Info 6 0 R");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("otters.pdf");
        std::fs::write(&path, &pdf).unwrap();
        let document = extract(&path).unwrap();
        let work = &document.work;
        assert_eq!(work.title(), Some("Sleeping Otters Hold Hands"));
        assert_eq!(document.title, "Sleeping Otters Hold Hands");
        assert_eq!(
            work.title.as_ref().map(|t| t.source),
            Some(FieldSource::FileMetadata)
        );
        assert_eq!(family_names(work), ["Marrow", "Ødegård"]);
        assert_eq!(
            selfrag_works::Work::text(&work.doi),
            Some("10.1000/otters.1998")
        );
        assert_eq!(
            work.doi.as_ref().map(|d| d.source),
            Some(FieldSource::FileMetadata)
        );
        assert_eq!(
            work.year(),
            Some(1998),
            "the cover date, not the CreationDate"
        );
        assert_eq!(
            selfrag_works::Work::text(&work.container),
            Some("Journal of Marine Mammals")
        );
        // The text's arXiv id is still there, below the metadata.
        assert_eq!(
            work.arxiv.as_ref().map(|a| a.source),
            Some(FieldSource::Identifier)
        );

        // Without the XMP packet, the Info dictionary's title and authors.
        let pdf = paper_pdf("", &[info], "/Info 6 0 R");
        std::fs::write(&path, &pdf).unwrap();
        let work = extract(&path).unwrap().work;
        assert_eq!(work.title(), Some("Otters, the Info title"));
        assert_eq!(family_names(&work), ["Marrow", "Twombly"]);
        assert_eq!(
            work.authors.as_ref().map(|a| a.source),
            Some(FieldSource::FileMetadata)
        );
    }
}
