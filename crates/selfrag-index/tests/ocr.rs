//! Scanned pages read by the real OCR engine (Tesseract): pages are rendered by code (DejaVu
//! Sans, Debian's default font, rasterized by fontdue), stored in a PDF as a scan is (an image
//! and no text layer) in the encodings scanners write, and read back through the extractor and
//! the library: the words come back, the page is marked as OCR text with its confidence, and a
//! search finds it.

// Test code: a failed unwrap is a failed test, at the line that failed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write;
use std::path::{Path, PathBuf};

mod common;

use common::{BAG_OF_WORDS, query};
use lopdf::{Document, Stream, dictionary};
use selfrag_index::{Library, extract_file};
use selfrag_testkit::{Lack, skip};

const FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
/// A letter page at 200 dpi.
const WIDTH: usize = 1700;
const HEIGHT: usize = 2200;

/// Tesseract and the font, or the test's verdict on their absence.
fn engine() -> Option<()> {
    if selfrag_index::extract::ocr::engine().is_none() {
        skip(
            Lack::SetUp,
            "no Tesseract (`tesseract-ocr`): the OCR of scanned pages is untested",
        );
        return None;
    }
    if !Path::new(FONT).is_file() {
        skip(
            Lack::SetUp,
            "no DejaVu Sans (`fonts-dejavu-core`) to render a page with",
        );
        return None;
    }
    Some(())
}

/// `lines` drawn black on white at 40 px (about 14 pt at 200 dpi), 8-bit gray, row by row.
fn render(lines: &[&str]) -> Vec<u8> {
    let font = fontdue::Font::from_bytes(
        std::fs::read(FONT).unwrap(),
        fontdue::FontSettings::default(),
    )
    .unwrap();
    let mut page = vec![255u8; WIDTH * HEIGHT];
    let size = 40.0;
    for (row, line) in lines.iter().enumerate() {
        let baseline = 200 + row * 70;
        let mut x = 150.0f32;
        for c in line.chars() {
            let (metrics, bitmap) = font.rasterize(c, size);
            let left = (x + metrics.xmin as f32) as isize;
            let top = baseline as isize - metrics.height as isize - metrics.ymin as isize;
            for gy in 0..metrics.height {
                for gx in 0..metrics.width {
                    let (px, py) = (left + gx as isize, top + gy as isize);
                    if px < 0 || py < 0 || px as usize >= WIDTH || py as usize >= HEIGHT {
                        continue;
                    }
                    let ink = bitmap[gy * metrics.width + gx];
                    let at = py as usize * WIDTH + px as usize;
                    page[at] = page[at].min(255 - ink);
                }
            }
            x += metrics.advance_width;
        }
    }
    page
}

/// How a scan's pixels are stored.
#[derive(Clone, Copy)]
enum Scan {
    /// 8-bit gray, deflated.
    Gray,
    /// 8-bit RGB, deflated.
    Rgb,
    /// 1 bit per pixel (0 is black), deflated.
    Bilevel,
}

fn deflate(bytes: &[u8]) -> Vec<u8> {
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    z.write_all(bytes).unwrap();
    z.finish().unwrap()
}

/// One page of a test PDF: a scan (`Some(pixels, how)`: an image filling the page, no text) or
/// typeset text (`None`: one line of Helvetica).
type TestPage<'a> = (Option<(&'a [u8], Scan)>, &'a str);

/// A PDF of `pages`.
fn pdf(pages: &[TestPage<'_>], path: &Path) -> PathBuf {
    let mut doc = Document::with_version("1.5");
    let pages_id = doc.new_object_id();
    let font = doc.add_object(dictionary! {
        "Type" => "Font", "Subtype" => "Type1", "BaseFont" => "Helvetica",
    });
    let mut kids = Vec::new();
    for (scan, text) in pages {
        let (content, resources) = match scan {
            Some((pixels, how)) => {
                let (space, bits, data): (&str, i64, Vec<u8>) = match how {
                    Scan::Gray => ("DeviceGray", 8, pixels.to_vec()),
                    Scan::Rgb => (
                        "DeviceRGB",
                        8,
                        pixels.iter().flat_map(|&p| [p, p, p]).collect(),
                    ),
                    Scan::Bilevel => ("DeviceGray", 1, pack_bits(pixels)),
                };
                let image = doc.add_object(Stream::new(
                    dictionary! {
                        "Type" => "XObject", "Subtype" => "Image",
                        "Width" => WIDTH as i64, "Height" => HEIGHT as i64,
                        "ColorSpace" => space, "BitsPerComponent" => bits,
                        "Filter" => "FlateDecode",
                    },
                    deflate(&data),
                ));
                (
                    b"q 612 0 0 792 0 0 cm /Scan Do Q".to_vec(),
                    dictionary! { "XObject" => dictionary! { "Scan" => image } },
                )
            }
            None => (
                format!("BT /F1 12 Tf 72 720 Td ({text}) Tj ET").into_bytes(),
                dictionary! { "Font" => dictionary! { "F1" => font } },
            ),
        };
        let contents = doc.add_object(Stream::new(dictionary! {}, content));
        kids.push(
            doc.add_object(dictionary! {
                "Type" => "Page", "Parent" => pages_id, "Contents" => contents,
                "MediaBox" => vec![0.into(), 0.into(), 612.into(), 792.into()],
                "Resources" => resources,
            })
            .into(),
        );
    }
    common::close_page_tree(&mut doc, pages_id, kids);
    doc.save(path).unwrap();
    path.to_path_buf()
}

/// 8-bit gray as 1-bit rows (PDF: 0 is black), each row padded to a byte.
fn pack_bits(gray: &[u8]) -> Vec<u8> {
    let row_bytes = WIDTH.div_ceil(8);
    let mut out = vec![0u8; row_bytes * HEIGHT];
    for y in 0..HEIGHT {
        for x in 0..WIDTH {
            if gray[y * WIDTH + x] >= 128 {
                out[y * row_bytes + x / 8] |= 0x80 >> (x % 8);
            }
        }
    }
    out
}

const SCANNED: &[&str] = &[
    "Scanned pages are read by the OCR engine.",
    "The harbour master counted forty gulls",
    "nesting on the breakwater in April.",
];

/// Lower-case words, for comparing what the OCR read with what was drawn.
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

#[test]
fn a_scanned_page_is_read_by_ocr_in_every_encoding_scanners_write() {
    let Some(()) = engine() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let pixels = render(SCANNED);
    for how in [Scan::Gray, Scan::Rgb, Scan::Bilevel] {
        let file = pdf(
            &[
                (None, "A typeset first page about retrieval."),
                (Some((&pixels, how)), ""),
            ],
            &tmp.path().join("scan.pdf"),
        );
        let doc = extract_file(&file).unwrap();
        assert_eq!(doc.pages.len(), 2, "{:?}", doc.notes);
        assert_eq!(doc.pages[0].ocr_confidence, None);
        let scanned = &doc.pages[1];
        assert_eq!(scanned.number, Some(2));
        let read = words(&scanned.text);
        let drawn = words(&SCANNED.join(" "));
        let found = drawn.iter().filter(|w| read.contains(w)).count();
        assert!(
            found * 10 >= drawn.len() * 9,
            "{found} of {} words read: {:?}",
            drawn.len(),
            scanned.text
        );
        let confidence = scanned.ocr_confidence.expect("marked as OCR text");
        assert!((0.6..=1.0).contains(&confidence), "{confidence}");
        assert!(doc.notes.is_empty(), "{:?}", doc.notes);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scanned_page_is_searchable_and_its_passages_say_they_are_ocr_text() {
    let Some(()) = engine() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let pixels = render(SCANNED);
    let file = pdf(
        &[(Some((&pixels, Scan::Gray)), "")],
        &tmp.path().join("harbour-scan.pdf"),
    );
    let lib = Library::open(&tmp.path().join("lib"), &BAG_OF_WORDS)
        .await
        .unwrap();
    lib.index_file(&file, &BAG_OF_WORDS).await.unwrap();
    let hits = lib
        .search(&query(&BAG_OF_WORDS, "gulls nesting on the breakwater", 3))
        .await
        .unwrap();
    let hit = hits.first().expect("the scanned page is found");
    assert!(hit.text.contains("breakwater"), "{hit:?}");
    assert_eq!(hit.page, Some(1));
    assert!(hit.ocr_confidence.is_some_and(|c| c > 0.6), "{hit:?}");
    // The evidence viewer shows the page as the PDF it is, and says where the text came from.
    let source = lib.passage_source(&hit.passage_id).await.unwrap();
    assert_eq!(source.ocr_confidence, hit.ocr_confidence);
}

#[test]
fn an_engine_that_cannot_run_is_a_note_on_the_page_never_a_crash() {
    let Some(()) = engine() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let pixels = render(SCANNED);
    let file = pdf(
        &[(Some((&pixels, Scan::Gray)), "")],
        &tmp.path().join("scan.pdf"),
    );
    let doc = lopdf::Document::load(&file).unwrap();
    let page = doc.get_pages()[&1];
    let err = selfrag_index::extract::ocr::read_page(
        &doc,
        page,
        Path::new("/nonexistent/tesseract"),
        std::time::Duration::from_secs(30),
    )
    .unwrap_err();
    assert!(err.contains("could not be started"), "{err}");
}
