//! Every format, from fixtures written by code, through the real worker process: page numbers,
//! sections, titles and spans reach the passages; damaged, encrypted, scanned and unsupported
//! files fail alone with an error that names them; a parser that crashes, hangs, babbles or
//! eats memory costs one file and the next file still indexes.

// Test code: a failed unwrap is a failed test, at the line that failed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod common;

use common::BAG_OF_WORDS;
use lopdf::content::{Content, Operation};
use lopdf::{Document, Object, Stream, StringFormat, dictionary};
use selfrag_index::{ExtractedDocument, Extractor, IndexError, IndexOutcome, Library, SearchHit};

/// The crate's test worker (a copy of what the app does in `main`, plus misbehaviour on demand).
const WORKER: &str = env!("CARGO_BIN_EXE_selfrag-extract-worker");

fn worker() -> Extractor {
    Extractor::worker(WORKER).with_timeout(Duration::from_secs(20))
}

/// Extracts through the worker process, as the app does.
fn extract(path: &Path) -> Result<ExtractedDocument, IndexError> {
    worker().extract_blocking(path)
}

async fn library(dir: &Path, extractor: Extractor) -> Library {
    Library::open(&dir.join("lib"), &BAG_OF_WORDS)
        .await
        .unwrap()
        .with_extractor(extractor)
}

async fn best_hit(lib: &Library, query: &str) -> SearchHit {
    lib.search(&common::query(&BAG_OF_WORDS, query, 1))
        .await
        .unwrap()
        .remove(0)
}

// ---- PDF fixtures -------------------------------------------------------------------------

/// One page: text lines at (x, y) in points, set in Helvetica (WinAnsi) or in the font whose
/// `/ToUnicode` map covers [`F2_CHARS`]; or no `/MediaBox` at all (pdf-extract panics).
#[derive(Clone, Default)]
struct Page {
    lines: Vec<(i64, i64, String)>,
    to_unicode_font: bool,
    no_media_box: bool,
}

/// What the fixture's second font can show: Greek and Chinese through a ToUnicode CMap, as
/// PDFs with subset fonts do.
const F2_CHARS: &str = " .RAGΣελίδααναζήτηση自己反思检索";

fn f2_code(c: char) -> u8 {
    let at = F2_CHARS.chars().position(|x| x == c);
    at.map(|i| i as u8 + 1)
        .unwrap_or_else(|| panic!("{c} is not in F2_CHARS"))
}

fn to_unicode_cmap() -> Vec<u8> {
    let mut map = String::new();
    let chars: Vec<char> = F2_CHARS.chars().collect();
    for (i, c) in chars.iter().enumerate() {
        // The first occurrence wins, as in `f2_code`.
        if chars[..i].contains(c) {
            continue;
        }
        map.push_str(&format!("<{:02X}> <{:04X}>\n", i + 1, *c as u32));
    }
    let entries = map.lines().count();
    format!(
        "/CIDInit /ProcSet findresource begin\n12 dict begin\nbegincmap\n\
         /CMapName /Fixture-UCS def\n/CMapType 2 def\n\
         1 begincodespacerange\n<00> <FF>\nendcodespacerange\n\
         {entries} beginbfchar\n{map}endbfchar\nendcmap\n\
         CMapName currentdict /CMapResource defineresource pop\nend\nend\n"
    )
    .into_bytes()
}

/// A page of lines set one under the other in the left margin.
fn page(lines: &[&str]) -> Page {
    Page {
        lines: lines
            .iter()
            .enumerate()
            .map(|(i, l)| (72, 760 - 16 * i as i64, l.to_string()))
            .collect(),
        ..Page::default()
    }
}

/// Windows-1252, the encoding of the fixture's Helvetica (`/WinAnsiEncoding`).
fn win_ansi(text: &str) -> Vec<u8> {
    text.chars()
        .map(|c| match c {
            '€' => 0x80,
            '–' => 0x96,
            '—' => 0x97,
            '“' => 0x93,
            '”' => 0x94,
            '’' => 0x92,
            c if (c as u32) < 0x100 => c as u8,
            other => panic!("{other} is not in WinAnsiEncoding"),
        })
        .collect()
}

fn pdf(title: Option<&str>, pages: &[Page]) -> Document {
    let mut doc = Document::with_version("1.5");
    let pages_id = doc.new_object_id();
    let font = doc.add_object(dictionary! {
        "Type" => "Font",
        "Subtype" => "Type1",
        "BaseFont" => "Helvetica",
        "Encoding" => "WinAnsiEncoding",
    });
    let cmap = doc.add_object(Stream::new(dictionary! {}, to_unicode_cmap()));
    let f2 = doc.add_object(dictionary! {
        "Type" => "Font",
        "Subtype" => "Type1",
        "BaseFont" => "Helvetica",
        "ToUnicode" => cmap,
    });
    let resources =
        doc.add_object(dictionary! { "Font" => dictionary! { "F1" => font, "F2" => f2 } });
    let mut kids = Vec::new();
    for p in pages {
        let mut operations = Vec::new();
        let (font, encode): (&str, fn(&str) -> Vec<u8>) = if p.to_unicode_font {
            ("F2", |t| t.chars().map(f2_code).collect())
        } else {
            ("F1", win_ansi)
        };
        for (x, y, text) in &p.lines {
            operations.extend([
                Operation::new("BT", vec![]),
                Operation::new("Tf", vec![font.into(), 11.into()]),
                Operation::new("Td", vec![(*x).into(), (*y).into()]),
                Operation::new(
                    "Tj",
                    // Hexadecimal: raw control bytes in a literal string would be rewritten.
                    vec![Object::String(encode(text), StringFormat::Hexadecimal)],
                ),
                Operation::new("ET", vec![]),
            ]);
        }
        let content = Content { operations }.encode().unwrap();
        let contents = doc.add_object(Stream::new(dictionary! {}, content));
        let mut page = dictionary! {
            "Type" => "Page",
            "Parent" => pages_id,
            "Contents" => contents,
            "Resources" => resources,
        };
        if !p.no_media_box {
            let a4 = vec![0.into(), 0.into(), 595.into(), 842.into()];
            page.set("MediaBox", Object::Array(a4));
        }
        kids.push(Object::from(doc.add_object(page)));
    }
    common::close_page_tree(&mut doc, pages_id, kids);
    if let Some(title) = title {
        let info = doc.add_object(dictionary! { "Title" => Object::string_literal(title) });
        doc.trailer.set("Info", info);
    }
    // Encryption keys are derived from the file identifier.
    let id = Object::String(b"selfrag-fixture!".to_vec(), StringFormat::Hexadecimal);
    doc.trailer.set("ID", vec![id.clone(), id]);
    doc
}

fn save(mut doc: Document, path: &Path) -> PathBuf {
    let mut bytes = Vec::new();
    doc.save_to(&mut bytes).unwrap();
    std::fs::write(path, bytes).unwrap();
    path.to_path_buf()
}

fn write(dir: &Path, name: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// The characters `[start, end)` of `text`, as a citation would highlight them.
fn span_of(text: &str, (start, end): (u64, u64)) -> String {
    text.chars()
        .skip(start as usize)
        .take((end - start) as usize)
        .collect()
}

// ---- PDF ----------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_passage_of_a_multi_page_pdf_knows_its_page_title_and_span() {
    let tmp = tempfile::tempdir().unwrap();
    let file = save(
        pdf(
            Some("Self-RAG: Learning to Retrieve"),
            &[
                page(&["Retrieval augmented generation retrieves passages on demand."]),
                page(&["Reflection tokens let the model critique its own output."]),
                page(&["The critic scores support, relevance and usefulness."]),
            ],
        ),
        &tmp.path().join("paper.pdf"),
    );
    let extracted = extract(&file).unwrap();
    let numbers: Vec<Option<u32>> = extracted.pages.iter().map(|p| p.number).collect();
    assert_eq!(numbers, [Some(1), Some(2), Some(3)]);
    assert!(extracted.notes.is_empty(), "{:?}", extracted.notes);

    let lib = library(tmp.path(), worker()).await;
    let outcome = lib.index_file(&file, &BAG_OF_WORDS).await.unwrap();
    assert!(
        matches!(outcome, IndexOutcome::Indexed { passages: 3, .. }),
        "{outcome:?}"
    );
    let hit = best_hit(&lib, "reflection tokens critique output").await;
    assert_eq!(hit.page, Some(2));
    assert_eq!(hit.title, "Self-RAG: Learning to Retrieve");
    assert_eq!(hit.path, file.to_string_lossy());
    let page_two = &extracted.pages[1].text;
    assert_eq!(span_of(page_two, hit.span).trim(), hit.text);
    assert!(hit.text.contains("Reflection tokens"), "{hit:?}");
}

/// A PDF's page labels: the numbers printed on its pages, from its `/PageLabels` number tree.
/// Roman front matter, then an article printed from page 117 with a prefix on its appendix;
/// the page's place in the file stays what a viewer opens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn printed_page_numbers_come_from_the_pdfs_page_labels() {
    let tmp = tempfile::tempdir().unwrap();
    let mut doc = pdf(
        Some("Proceedings"),
        &[
            page(&["Preface of the proceedings volume."]),
            page(&["Contents of the volume."]),
            page(&["Self-RAG retrieves passages on demand."]),
            page(&["Reflection tokens critique the output."]),
            page(&["Appendix with the critic's training data."]),
        ],
    );
    let range = |style: Option<&str>, start: Option<i64>, prefix: Option<&str>| {
        let mut d = dictionary! {};
        if let Some(style) = style {
            d.set("S", Object::Name(style.as_bytes().to_vec()));
        }
        if let Some(start) = start {
            d.set("St", start);
        }
        if let Some(prefix) = prefix {
            d.set("P", Object::string_literal(prefix));
        }
        Object::Dictionary(d)
    };
    // A /Kids node between the root and the ranges, as large files lay their trees out.
    let leaf = doc.add_object(dictionary! {
        "Nums" => vec![
            0.into(), range(Some("r"), None, None),
            2.into(), range(Some("D"), Some(117), None),
            4.into(), range(Some("D"), None, Some("A-")),
        ],
    });
    let catalog_id = doc.trailer.get(b"Root").unwrap().as_reference().unwrap();
    let catalog = doc
        .get_object_mut(catalog_id)
        .unwrap()
        .as_dict_mut()
        .unwrap();
    catalog.set("PageLabels", dictionary! { "Kids" => vec![leaf.into()] });
    let file = save(doc, &tmp.path().join("proceedings.pdf"));

    let extracted = extract(&file).unwrap();
    let labels: Vec<Option<&str>> = extracted.pages.iter().map(|p| p.label.as_deref()).collect();
    assert_eq!(
        labels,
        [Some("i"), Some("ii"), Some("117"), Some("118"), Some("A-1")]
    );
    let lib = library(tmp.path(), worker()).await;
    lib.index_file(&file, &BAG_OF_WORDS).await.unwrap();
    let hit = best_hit(&lib, "reflection tokens critique output").await;
    assert_eq!(
        (hit.page, hit.page_label.as_deref()),
        (Some(4), Some("118"))
    );

    // Without page labels, or where a label is just the page's own number, there is none.
    let plain = save(
        pdf(None, &[page(&["One page of plain text."])]),
        &tmp.path().join("plain.pdf"),
    );
    assert_eq!(extract(&plain).unwrap().pages[0].label, None);
}

#[test]
fn accented_and_typographic_characters_survive_pdf_extraction() {
    let tmp = tempfile::tempdir().unwrap();
    let line = "Café naïve Übermaß – “quoted” costs €5 and isn’t façade.";
    let file = save(pdf(None, &[page(&[line])]), &tmp.path().join("unicode.pdf"));
    let doc = extract(&file).unwrap();
    let text = &doc.pages[0].text;
    for word in [
        "Café",
        "naïve",
        "Übermaß",
        "–",
        "“quoted”",
        "€5",
        "isn’t",
        "façade.",
    ] {
        assert!(text.contains(word), "{word} missing from {text:?}");
    }
    assert_eq!(doc.title, "unicode", "no /Title: the file name");

    let mut greek_and_chinese = page(&["Σελίδα αναζήτηση RAG.", "自己反思检索."]);
    greek_and_chinese.to_unicode_font = true;
    let file = save(
        pdf(None, &[greek_and_chinese]),
        &tmp.path().join("cmap.pdf"),
    );
    let text = extract(&file).unwrap().pages.remove(0).text;
    for word in ["Σελίδα", "αναζήτηση", "自己反思检索"] {
        assert!(text.contains(word), "{word} missing from {text:?}");
    }
}

#[test]
fn text_shown_with_the_quote_shorthands_is_extracted() {
    // `'` is "next line, show" and `"` is "set word and character spacing, next line, show":
    // pdf-extract skips both, so a writer that uses them lost all its text.
    let tmp = tempfile::tempdir().unwrap();
    let mut doc = pdf(None, &[page(&["First line shown with Tj."])]);
    let page_id = doc.get_pages()[&1];
    let lines = |op: &str, text: &str| {
        let mut operands: Vec<Object> = if op == "\"" {
            vec![0.into(), 0.into()]
        } else {
            vec![]
        };
        operands.push(Object::string_literal(text));
        Operation::new(op, operands)
    };
    let content = Content {
        operations: vec![
            Operation::new("BT", vec![]),
            Operation::new("Tf", vec!["F1".into(), 11.into()]),
            Operation::new("TL", vec![14.into()]),
            Operation::new("Td", vec![72.into(), 700.into()]),
            lines("'", "Second line shown with a quote."),
            lines("\"", "Third line shown with a double quote."),
            Operation::new("ET", vec![]),
        ],
    };
    doc.add_to_page_content(page_id, content).unwrap();
    let file = save(doc, &tmp.path().join("quotes.pdf"));
    let text = extract(&file).unwrap().pages.remove(0).text;
    for line in [
        "First line shown with Tj.",
        "Second line shown with a quote.",
        "Third line shown with a double quote.",
    ] {
        assert!(text.contains(line), "{line:?} missing from {text:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_page_is_reported_and_the_rest_is_indexed() {
    let tmp = tempfile::tempdir().unwrap();
    let file = save(
        pdf(
            None,
            &[
                page(&["The introduction motivates adaptive retrieval."]),
                Page::default(),
                page(&["The conclusion summarises the findings."]),
            ],
        ),
        &tmp.path().join("scanned-middle.pdf"),
    );
    let lib = library(tmp.path(), worker()).await;
    let IndexOutcome::Indexed {
        passages, notes, ..
    } = lib.index_file(&file, &BAG_OF_WORDS).await.unwrap()
    else {
        panic!("expected the file to be indexed")
    };
    assert_eq!(passages, 2);
    // A blank page: no text layer and no scan for the OCR either.
    assert_eq!(
        notes,
        ["page 2 has no text layer (scanned?); it draws no image for the OCR to read"]
    );
    assert_eq!(best_hit(&lib, "conclusion findings").await.page, Some(3));
}

#[test]
fn a_pdf_without_any_text_layer_is_an_error_that_says_scanned() {
    let tmp = tempfile::tempdir().unwrap();
    let file = save(
        pdf(None, &[Page::default(), Page::default()]),
        &tmp.path().join("scan.pdf"),
    );
    let err = extract(&file).unwrap_err();
    assert!(matches!(err, IndexError::NoTextLayer { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains("scan.pdf") && msg.contains("no text layer (scanned?)"),
        "{msg}"
    );
}

/// The most a compressed part may inflate to, plus one MiB: the bombs' size.
const PAST_THE_INFLATE_LIMIT: usize = 257 << 20;

/// A PDF whose page content inflates past the limit is refused naming the stream, before any
/// page is read (lopdf would inflate it whole, and a real bomb inflates to gigabytes). The
/// content is spaces, which a content stream allows, deflated about 1,000 to 1.
#[test]
fn a_pdf_stream_that_inflates_past_the_limit_is_refused_as_a_bomb() {
    use std::io::Write;
    let tmp = tempfile::tempdir().unwrap();
    let mut doc = pdf(None, &[Page::default()]);
    let page = doc.get_pages()[&1];
    let contents = doc
        .get_dictionary(page)
        .unwrap()
        .get(b"Contents")
        .unwrap()
        .as_reference()
        .unwrap();
    let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    zlib.write_all(&vec![b' '; PAST_THE_INFLATE_LIMIT]).unwrap();
    let bomb = Stream::new(
        dictionary! { "Filter" => "FlateDecode" },
        zlib.finish().unwrap(),
    );
    doc.objects.insert(contents, Object::Stream(bomb));
    let file = save(doc, &tmp.path().join("bomb.pdf"));
    assert!(std::fs::metadata(&file).unwrap().len() < 2 << 20);
    let err = extract(&file).unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, IndexError::Malformed { .. }), "{err:?}");
    assert!(
        message.contains("bomb.pdf")
            && message.contains(&format!(
                "stream {} 0 inflates to more than 256 MiB",
                contents.0
            )),
        "{message}"
    );
}

/// The same for a DOCX whose document part inflates past the limit.
#[test]
fn a_docx_part_that_inflates_past_the_limit_is_refused_as_a_bomb() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("bomb.docx");
    let document = format!(
        r#"<?xml version="1.0"?><w:document xmlns:w="w">{}</w:document>"#,
        " ".repeat(PAST_THE_INFLATE_LIMIT)
    );
    let zip = deflated_zip(&[("word/document.xml", document)]);
    assert!(zip.len() < 2 << 20);
    std::fs::write(&file, zip).unwrap();
    let err = extract(&file).unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("bomb.docx")
            && message.contains("word/document.xml inflates to more than 256 MiB"),
        "{message}"
    );
}

#[test]
fn both_columns_of_a_two_column_page_are_extracted() {
    let tmp = tempfile::tempdir().unwrap();
    let left = [
        "alpha bravo charlie",
        "delta echo foxtrot",
        "golf hotel india",
    ];
    let right = [
        "juliet kilo lima",
        "mike november oscar",
        "papa quebec romeo",
    ];
    let mut two_columns = Page::default();
    for (i, (l, r)) in left.iter().zip(right).enumerate() {
        let y = 760 - 16 * i as i64;
        two_columns.lines.push((72, y, l.to_string()));
        two_columns.lines.push((320, y, r.to_string()));
    }
    let file = save(pdf(None, &[two_columns]), &tmp.path().join("columns.pdf"));
    let text = extract(&file).unwrap().pages.remove(0).text;
    for word in left.iter().chain(&right).flat_map(|l| l.split(' ')) {
        assert!(text.contains(word), "{word} missing from {text:?}");
    }
}

#[test]
fn a_pdf_with_a_broken_xref_is_recovered_or_refused_clearly_never_a_crash() {
    let tmp = tempfile::tempdir().unwrap();
    let mut good = Vec::new();
    pdf(
        None,
        &[page(&["Text behind a damaged cross-reference table."])],
    )
    .save_to(&mut good)
    .unwrap();
    let at = good.windows(9).rposition(|w| w == b"startxref").unwrap();
    // The xref offset points past the end of the file...
    let mut past_end = good[..at].to_vec();
    past_end.extend_from_slice(b"startxref\n99999999\n%%EOF\n");
    // ...or every object offset is wrong because bytes were inserted before the objects.
    let header_end = good.iter().position(|&b| b == b'\n').unwrap() + 1;
    let mut shifted = good[..header_end].to_vec();
    shifted.extend_from_slice(b"% inserted by a broken tool\n");
    shifted.extend_from_slice(&good[header_end..]);
    for (name, bytes) in [("past-end.pdf", past_end), ("shifted.pdf", shifted)] {
        let file = write(tmp.path(), name, bytes);
        match extract(&file) {
            Ok(doc) => assert!(doc.pages[0].text.contains("damaged"), "{name}: {doc:?}"),
            Err(e @ IndexError::Malformed { .. }) => {
                assert!(e.to_string().contains(name), "{e}")
            }
            Err(other) => panic!("{name}: neither recovered nor refused clearly: {other:?}"),
        }
    }
}

#[test]
fn a_password_protected_pdf_is_refused_with_the_fix() {
    let tmp = tempfile::tempdir().unwrap();
    let encrypted = |user_password: &str, name: &str| {
        let mut doc = pdf(None, &[page(&["Confidential findings about retrieval."])]);
        let state = lopdf::EncryptionState::try_from(lopdf::EncryptionVersion::V2 {
            document: &doc,
            owner_password: "owner",
            user_password,
            key_length: 128,
            permissions: lopdf::Permissions::all(),
        })
        .unwrap();
        doc.encrypt(&state).unwrap();
        save(doc, &tmp.path().join(name))
    };
    let locked = encrypted("secret", "locked.pdf");
    let err = extract(&locked).unwrap_err();
    assert!(matches!(err, IndexError::Encrypted { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains("locked.pdf") && msg.contains("password"),
        "{msg}"
    );
    // Encrypted with an empty user password (restrictions only): anyone can open it, so do we.
    let restricted = encrypted("", "restricted.pdf");
    let doc = extract(&restricted).unwrap();
    assert!(
        doc.pages[0].text.contains("Confidential findings"),
        "{doc:?}"
    );
}

#[test]
fn a_page_that_makes_pdf_extract_panic_costs_that_page_only() {
    let tmp = tempfile::tempdir().unwrap();
    let mut broken = page(&["This page has no media box."]);
    broken.no_media_box = true;
    let file = save(
        pdf(
            None,
            &[
                page(&["The first page is fine."]),
                broken,
                page(&["So is the third."]),
            ],
        ),
        &tmp.path().join("bad-page.pdf"),
    );
    let doc = extract(&file).unwrap();
    let numbers: Vec<Option<u32>> = doc.pages.iter().map(|p| p.number).collect();
    assert_eq!(numbers, [Some(1), Some(3)]);
    assert!(
        doc.notes.len() == 1 && doc.notes[0].starts_with("page 2 could not be read"),
        "{:?}",
        doc.notes
    );
}

// ---- HTML, DOCX, Markdown, plain text, others -----------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn html_gives_its_visible_text_titled_by_title_with_headings_as_sections() {
    let tmp = tempfile::tempdir().unwrap();
    let file = write(
        tmp.path(),
        "page.html",
        r#"<!doctype html><html><head><title>Self-RAG explained</title>
        <style>.critique { display: none }</style><script>var tracker = "analytics";</script></head>
        <body><nav>Home About Contact</nav>
        <h1>Overview</h1><p>Self-RAG trains one model to retrieve, generate and critique.</p>
        <h2>Critique tokens</h2><p>IsSup says whether the output is supported by the passage.</p>
        <script>document.write("invisible scripted text")</script></body></html>"#,
    );
    let doc = extract(&file).unwrap();
    assert_eq!(doc.title, "Self-RAG explained");
    let text = &doc.pages[0].text;
    for hidden in ["display", "tracker", "analytics", "invisible", "Contact"] {
        assert!(!text.contains(hidden), "{hidden} leaked into {text:?}");
    }
    let lib = library(tmp.path(), worker()).await;
    lib.index_file(&file, &BAG_OF_WORDS).await.unwrap();
    let hit = best_hit(&lib, "IsSup output supported passage").await;
    assert_eq!(hit.section.as_deref(), Some("Critique tokens"));
    assert_eq!(hit.title, "Self-RAG explained");
    assert_eq!(hit.page, None);
}

/// A minimal DOCX as Word writes it: deflated parts, heading styles, a core title.
fn docx(path: &Path, paragraphs: &[(&str, &str)], core_title: Option<&str>) -> PathBuf {
    let body: String = paragraphs
        .iter()
        .map(|(style, text)| {
            let props = if style.is_empty() {
                String::new()
            } else {
                format!(r#"<w:pPr><w:pStyle w:val="{style}"/></w:pPr>"#)
            };
            format!(r#"<w:p>{props}<w:r><w:t xml:space="preserve">{text}</w:t></w:r></w:p>"#)
        })
        .collect();
    let w = r#"xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main""#;
    let mut parts = vec![
        (
            "[Content_Types].xml",
            r#"<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>"#.to_string(),
        ),
        (
            "word/document.xml",
            format!(r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document {w}><w:body>{body}</w:body></w:document>"#),
        ),
        (
            "word/styles.xml",
            format!(r#"<w:styles {w}><w:style w:type="paragraph" w:styleId="Heading1"><w:name w:val="heading 1"/></w:style><w:style w:type="paragraph" w:styleId="berschrift2"><w:name w:val="heading 2"/></w:style></w:styles>"#),
        ),
    ];
    if let Some(title) = core_title {
        parts.push((
            "docProps/core.xml",
            format!(r#"<cp:coreProperties xmlns:cp="cp" xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>{title}</dc:title></cp:coreProperties>"#),
        ));
    }
    std::fs::write(path, deflated_zip(&parts)).unwrap();
    path.to_path_buf()
}

/// A zip archive of deflated entries, written out by hand (the workspace's zip is built without
/// its deflate feature), byte for byte as APPNOTE.TXT lays it out.
fn deflated_zip(parts: &[(&str, String)]) -> Vec<u8> {
    use std::io::Write;
    let mut out = Vec::new();
    let mut central = Vec::new();
    for (name, text) in parts {
        let data = text.as_bytes();
        let mut deflate = flate2::write::DeflateEncoder::new(Vec::new(), Default::default());
        deflate.write_all(data).unwrap();
        let packed = deflate.finish().unwrap();
        let mut crc = flate2::Crc::new();
        crc.update(data);
        let offset = out.len() as u32;
        // version 2.0, no flags, method 8 (deflate), 1980-01-01 00:00, crc, sizes, name length.
        let common = [
            &20u16.to_le_bytes()[..],
            &0u16.to_le_bytes(),
            &8u16.to_le_bytes(),
            &0u16.to_le_bytes(),
            &0x21u16.to_le_bytes(),
            &crc.sum().to_le_bytes(),
            &(packed.len() as u32).to_le_bytes(),
            &(data.len() as u32).to_le_bytes(),
            &(name.len() as u16).to_le_bytes(),
            &0u16.to_le_bytes(),
        ]
        .concat();
        out.extend(0x0403_4b50u32.to_le_bytes());
        out.extend(&common);
        out.extend(name.as_bytes());
        out.extend(&packed);
        central.extend(0x0201_4b50u32.to_le_bytes());
        central.extend(20u16.to_le_bytes());
        central.extend(&common);
        // comment length, disk, internal and external attributes, local header offset.
        central.extend([0u8; 10]);
        central.extend(offset.to_le_bytes());
        central.extend(name.as_bytes());
    }
    let (central_at, central_len) = (out.len() as u32, central.len() as u32);
    out.extend(central);
    out.extend(0x0605_4b50u32.to_le_bytes());
    out.extend([0u8; 4]);
    out.extend((parts.len() as u16).to_le_bytes());
    out.extend((parts.len() as u16).to_le_bytes());
    out.extend(central_len.to_le_bytes());
    out.extend(central_at.to_le_bytes());
    out.extend(0u16.to_le_bytes());
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docx_paragraphs_are_indexed_under_their_headings() {
    let tmp = tempfile::tempdir().unwrap();
    let file = docx(
        &tmp.path().join("report.docx"),
        &[
            ("Heading1", "Background"),
            ("", "Large language models hallucinate facts &amp; figures."),
            ("berschrift2", "Retrieval on demand"),
            (
                "",
                "Self-RAG retrieves only when a retrieval token is predicted.",
            ),
        ],
        Some("Quarterly research report"),
    );
    let lib = library(tmp.path(), worker()).await;
    lib.index_file(&file, &BAG_OF_WORDS).await.unwrap();
    let hit = best_hit(&lib, "retrieves only when retrieval token predicted").await;
    assert_eq!(hit.section.as_deref(), Some("Retrieval on demand"));
    assert_eq!(hit.title, "Quarterly research report");
    let hit = best_hit(&lib, "language models hallucinate facts figures").await;
    assert_eq!(hit.section.as_deref(), Some("Background"));
    assert!(hit.text.contains("facts & figures"), "{hit:?}");
}

#[test]
fn a_file_that_is_not_a_docx_is_refused_clearly() {
    let tmp = tempfile::tempdir().unwrap();
    let file = write(
        tmp.path(),
        "fake.docx",
        "just text with the wrong extension",
    );
    let err = extract(&file).unwrap_err();
    assert!(matches!(err, IndexError::Malformed { .. }), "{err:?}");
    assert!(err.to_string().contains("fake.docx"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_files_are_skipped_with_a_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let lib = library(tmp.path(), worker()).await;
    for name in ["picture.png", "Makefile"] {
        let file = write(tmp.path(), name, [0u8, 1, 2, 3]);
        let err = lib.index_file(&file, &BAG_OF_WORDS).await.unwrap_err();
        let IndexError::Unsupported { reason, .. } = &err else {
            panic!("{name}: {err:?}")
        };
        assert!(
            !reason.is_empty() && err.to_string().contains(name),
            "{err}"
        );
    }
    assert_eq!(lib.stats().await.unwrap().documents, 0);
}

// ---- the worker process ---------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parser_that_hangs_is_stopped_at_the_time_limit_and_the_next_file_indexes() {
    let tmp = tempfile::tempdir().unwrap();
    let hang = write(tmp.path(), "worker-hangs.txt", "The worker never answers.");
    let next = write(tmp.path(), "next.txt", "The next file is indexed as usual.");
    let lib = library(tmp.path(), worker().with_timeout(Duration::from_secs(2))).await;
    let started = Instant::now();
    let err = lib.index_file(&hang, &BAG_OF_WORDS).await.unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert!(matches!(err, IndexError::ParserFailed { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains("worker-hangs.txt") && msg.contains("ran out of time"),
        "{msg}"
    );
    assert!(matches!(
        lib.index_file(&next, &BAG_OF_WORDS).await.unwrap(),
        IndexOutcome::Indexed { .. }
    ));
    assert_eq!(lib.stats().await.unwrap().documents, 1);
}

/// Issue 44: the worker opened the file by path well after it was checked, so a file swapped
/// for a link (or for another file) in between was read through it. The worker now follows no
/// link and reads only the file that was seen (its device and inode), as the in-process
/// extraction does; the error names the file.
#[cfg(unix)]
#[test]
fn the_worker_reads_only_the_file_that_was_seen() {
    let tmp = tempfile::tempdir().unwrap();
    let secret = tmp.path().join("home/.ssh/id_rsa.txt");
    std::fs::create_dir_all(secret.parent().unwrap()).unwrap();
    std::fs::write(&secret, "BEGIN OPENSSH PRIVATE KEY zebrasecret").unwrap();
    let docs = tmp.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    let notes = docs.join("notes.txt");
    std::fs::write(&notes, "Otters hold hands while sleeping.").unwrap();
    let seen = selfrag_index::granted::see(&docs, &notes).unwrap();
    let text = worker().extract_seen_blocking(&seen).unwrap().pages[0]
        .text
        .clone();
    assert!(text.contains("Otters"), "{text}");
    // A link inside the folder is read from its target, and named and parsed as itself.
    let raw = docs.join("raw-notes");
    std::fs::write(&raw, "Seals sleep on ice floes.").unwrap();
    let alias = docs.join("alias.md");
    std::os::unix::fs::symlink(&raw, &alias).unwrap();
    let seen_alias = selfrag_index::granted::see(&docs, &alias).unwrap();
    assert_eq!(seen_alias.read_from, raw.canonicalize().unwrap());
    let document = worker().extract_seen_blocking(&seen_alias).unwrap();
    assert_eq!(document.title, "alias");
    assert!(document.pages[0].text.contains("Seals"), "{document:?}");

    let swapped = |extractor: &Extractor| {
        let err = extractor.extract_seen_blocking(&seen).unwrap_err();
        assert!(matches!(err, IndexError::Swapped { .. }), "{err}");
        assert!(err.to_string().contains("notes.txt"), "{err}");
    };
    // A link to a file outside, put where the file was (renamed away, so that its inode stays
    // taken and no new file gets its number).
    std::fs::rename(&notes, docs.join("notes.old")).unwrap();
    std::os::unix::fs::symlink(&secret, &notes).unwrap();
    swapped(&worker());
    swapped(&Extractor::in_process());
    // Another file in its place.
    std::fs::remove_file(&notes).unwrap();
    std::fs::copy(&secret, &notes).unwrap();
    swapped(&worker());
    swapped(&Extractor::in_process());
}

#[cfg(unix)]
#[test]
fn a_real_extraction_that_blocks_is_killed_at_the_time_limit() {
    let tmp = tempfile::tempdir().unwrap();
    // Opening a FIFO for reading blocks until a writer comes: the real reader never returns.
    let fifo = tmp.path().join("stuck.txt");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let started = Instant::now();
    let err = worker()
        .with_timeout(Duration::from_millis(500))
        .extract_blocking(&fifo)
        .unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(err.to_string().contains("ran out of time"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parser_that_crashes_or_babbles_costs_one_file_not_the_app() {
    let tmp = tempfile::tempdir().unwrap();
    let lib = library(tmp.path(), worker()).await;
    for (name, expected) in [
        ("worker-aborts.txt", "crashed"),
        ("worker-overflows.txt", "crashed"),
        ("worker-babbles.txt", "not a document"),
    ] {
        let file = write(tmp.path(), name, format!("{name} has ordinary text."));
        let err = lib.index_file(&file, &BAG_OF_WORDS).await.unwrap_err();
        let msg = err.to_string();
        assert!(
            matches!(err, IndexError::ParserFailed { .. }),
            "{name}: {err:?}"
        );
        assert!(msg.contains(name) && msg.contains(expected), "{msg}");
        assert!(msg.contains("the file was skipped"), "{msg}");
    }
    let fine = write(tmp.path(), "fine.md", "# Fine\nThis one is indexed.");
    lib.index_file(&fine, &BAG_OF_WORDS).await.unwrap();
    assert_eq!(lib.stats().await.unwrap().documents, 1);
}

/// The limit is the worker's own (its global allocator), so it holds on every OS, with or
/// without Linux's `prlimit`, and the error says which limit it was.
#[test]
fn a_parser_that_exceeds_the_memory_limit_is_stopped() {
    let tmp = tempfile::tempdir().unwrap();
    let hog = write(
        tmp.path(),
        "worker-hogs.txt",
        "The worker grows a buffer to 2 GiB first.",
    );
    let limited = worker().with_memory_limit(Some(512 << 20));
    let err = limited.extract_blocking(&hog).unwrap_err();
    assert!(matches!(err, IndexError::ParserFailed { .. }), "{err:?}");
    let message = err.to_string();
    assert!(
        message.contains("worker-hogs.txt")
            && message.contains("needed more than 512 MiB of memory"),
        "{message}"
    );
    // The same file under no limit parses: the limit, not the file, stopped it.
    let unlimited = worker().with_memory_limit(None);
    assert!(unlimited.extract_blocking(&hog).is_ok());
}

#[test]
fn a_worker_that_cannot_start_is_an_error_naming_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let file = write(tmp.path(), "notes.txt", "Some notes.");
    let err = Extractor::worker(tmp.path().join("no-such-worker"))
        .extract_blocking(&file)
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("notes.txt") && msg.contains("could not be started"),
        "{msg}"
    );
}

/// The worker's reply is read up to a limit and the document refused past it, and a document
/// of more passages than the library's limit is refused before anything is embedded: a small
/// compressed file that inflates to gigabytes of text cannot take the app's memory.
#[tokio::test]
async fn a_document_past_the_reply_or_passage_limit_is_refused_naming_the_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let big = tmp.path().join("big.txt");
    let paragraph = "Otters hold hands while they sleep so that they do not drift apart. ";
    std::fs::write(&big, paragraph.repeat(40_000)).unwrap(); // 2.7 MB of text
    let err = worker()
        .with_reply_limit(1 << 20)
        .extract_blocking(&big)
        .unwrap_err();
    let message = err.to_string();
    assert!(
        matches!(err, IndexError::ParserFailed { .. })
            && message.contains("more than 1 MiB of text"),
        "{message}"
    );

    let lib = library(tmp.path(), worker()).await.with_passage_limit(100);
    let err = lib.index_file(&big, &BAG_OF_WORDS).await.unwrap_err();
    match &err {
        IndexError::TooManyPassages {
            passages, limit, ..
        } => assert!(*passages > 100 && *limit == 100, "{err}"),
        other => panic!("{other}"),
    }
    assert!(err.to_string().contains("split it into smaller files"));
    assert!(lib.documents().is_empty());
}
