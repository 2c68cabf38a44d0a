//! Scanned pages: a PDF page without a text layer is read by OCR.
//!
//! The engine is Tesseract, run as a process (`tesseract - - tsv`) on the page's scan: the
//! largest image drawn on the page, handed over in a format Tesseract reads (JPEG as stored, raw
//! samples as PNM, CCITT fax as TIFF). Raw samples are inflated only up to the size the image
//! declares, so a decompression bomb drawn as a scan is refused by name.
//!
//! Tesseract runs on Linux, macOS and Windows and is installed the way each platform installs
//! programs (Debian's `tesseract-ocr` with its English model, Homebrew, the Windows installer);
//! `SELFRAG_TESSERACT` names another binary. Without it a scanned page is a note that says what
//! to install (a PDF of scans only is refused with the same words).
//!
//! Every word Tesseract reads comes with its confidence (0–100): the page's text keeps the
//! lines and paragraphs Tesseract found, and the page's confidence is the mean over its words.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pdf_extract::{Dictionary, Document, Object, ObjectId};

use super::pdf::{resolve, resolve_dict};

/// Pixels of a scan at most (a 600 dpi A3 page is 70 Mpx); a larger image is not decoded.
const MAX_PIXELS: u64 = 100_000_000;
/// Pixels of one side at most (a side past it is no scan, and is not decoded).
const MAX_SIDE: u64 = 1 << 17;
/// The most one page may take; Tesseract is stopped after it.
const PAGE_TIMEOUT: Duration = Duration::from_secs(30);

/// A page read by OCR.
#[derive(Debug, Clone, PartialEq)]
pub struct OcrPage {
    pub text: String,
    /// Mean word confidence, 0–1.
    pub confidence: f32,
}

/// The OCR engine of this machine: `SELFRAG_TESSERACT`, `tesseract` on the `PATH`, or where the
/// platform's installers put it (a macOS app does not see the shell's `PATH`).
pub fn engine() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("SELFRAG_TESSERACT").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let name = if cfg!(windows) {
        "tesseract.exe"
    } else {
        "tesseract"
    };
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join(name));
    let installed = [
        "/opt/homebrew/bin/tesseract",
        "/usr/local/bin/tesseract",
        r"C:\Program Files\Tesseract-OCR\tesseract.exe",
    ]
    .into_iter()
    .map(PathBuf::from);
    on_path.chain(installed).find(|p| p.is_file())
}

/// Reads page `page` of `doc` with the engine at `tesseract`, giving it at most `timeout` (and
/// never more than [`PAGE_TIMEOUT`]): `Ok(None)` when the page draws no image to read.
pub fn read_page(
    doc: &Document,
    page: ObjectId,
    tesseract: &Path,
    timeout: Duration,
) -> Result<Option<OcrPage>, String> {
    let Some(image) = page_scan(doc, page)? else {
        return Ok(None);
    };
    run_tesseract(tesseract, &image, timeout.min(PAGE_TIMEOUT)).map(Some)
}

/// The largest image XObject a page draws (its resources inherited from the page tree), as a
/// file Tesseract reads.
fn page_scan(doc: &Document, page: ObjectId) -> Result<Option<Vec<u8>>, String> {
    let Some(resources) = inherited(doc, page, b"Resources") else {
        return Ok(None);
    };
    let Some(xobjects) = resources
        .get(b"XObject")
        .ok()
        .and_then(|x| resolve_dict(doc, x))
    else {
        return Ok(None);
    };
    let mut best: Option<(u64, &pdf_extract::Stream)> = None;
    for (_, value) in xobjects.iter() {
        let stream = match value {
            Object::Reference(id) => doc.get_object(*id).ok().and_then(|o| o.as_stream().ok()),
            Object::Stream(s) => Some(s),
            _ => None,
        };
        let Some(stream) = stream else { continue };
        if stream.dict.get(b"Subtype").and_then(Object::as_name).ok() != Some(b"Image") {
            continue;
        }
        let area = dimension(&stream.dict, b"Width") * dimension(&stream.dict, b"Height");
        if best.is_none_or(|(a, _)| area > a) {
            best = Some((area, stream));
        }
    }
    match best {
        Some((_, stream)) => image_file(doc, stream).map(Some),
        None => Ok(None),
    }
}

/// An image's `Width` or `Height`: 0 when missing, negative or beyond [`MAX_SIDE`] (so that
/// products of sides never overflow).
fn dimension(dict: &Dictionary, key: &[u8]) -> u64 {
    dict.get(key)
        .and_then(Object::as_i64)
        .ok()
        .and_then(|v| u64::try_from(v).ok())
        .filter(|&v| v <= MAX_SIDE)
        .unwrap_or(0)
}

/// The image as JPEG, PNM or TIFF bytes.
fn image_file(doc: &Document, stream: &pdf_extract::Stream) -> Result<Vec<u8>, String> {
    let dict = &stream.dict;
    let (width, height) = (dimension(dict, b"Width"), dimension(dict, b"Height"));
    if width == 0 || height == 0 || width * height > MAX_PIXELS {
        return Err(format!("its scan is {width}×{height} pixels"));
    }
    let filters: Vec<&[u8]> = match dict.get(b"Filter") {
        Ok(Object::Array(list)) => list.iter().filter_map(|f| f.as_name().ok()).collect(),
        Ok(Object::Name(name)) => vec![name.as_slice()],
        _ => Vec::new(),
    };
    let bits: u64 = match dict.get(b"BitsPerComponent").and_then(Object::as_i64) {
        Ok(b @ (1 | 8)) => b as u64,
        Ok(other) => {
            return Err(format!(
                "its scan has {other} bits per sample, which the OCR cannot read yet"
            ));
        }
        Err(_) => 8,
    };
    let bits = if image_mask(dict) { 1 } else { bits };
    match filters.as_slice() {
        [b"DCTDecode"] => Ok(stream.content.clone()),
        [b"CCITTFaxDecode"] => Ok(ccitt_tiff(dict, width, height, &stream.content)),
        [] | [b"FlateDecode"] => {
            let components = components(doc, dict)?;
            // At most 3 × 100 M bytes: the sides are bounded, so nothing overflows.
            let expected = (width * components * bits).div_ceil(8) * height;
            let limit = expected + (1 << 20);
            let flate = [super::pdf_filters::Filter::Flate];
            if !filters.is_empty()
                && super::pdf_filters::decoded_size(&stream.content, &flate, limit + 1) > limit
            {
                return Err("its scan inflates past its size (a decompression bomb?)".into());
            }
            let samples = stream
                .decompressed_content()
                .map_err(|e| format!("its scan could not be decoded ({e})"))?;
            pnm(dict, width, height, components, bits, &samples)
        }
        [other, ..] => Err(format!(
            "its scan is stored as {}, which the OCR cannot read yet",
            String::from_utf8_lossy(other)
        )),
    }
}

fn image_mask(dict: &Dictionary) -> bool {
    matches!(dict.get(b"ImageMask"), Ok(Object::Boolean(true)))
}

/// Colour components per sample: 1 (gray) or 3 (RGB); anything else is refused by name.
fn components(doc: &Document, dict: &Dictionary) -> Result<u64, String> {
    if image_mask(dict) {
        return Ok(1);
    }
    let space = dict.get(b"ColorSpace").ok().map(|o| resolve(doc, o));
    let name = match space {
        Some(Object::Name(n)) => n.clone(),
        Some(Object::Array(a)) => a
            .first()
            .and_then(|o| o.as_name().ok())
            .map(<[u8]>::to_vec)
            .unwrap_or_default(),
        _ => b"DeviceGray".to_vec(),
    };
    match name.as_slice() {
        b"DeviceGray" | b"CalGray" => Ok(1),
        b"DeviceRGB" | b"CalRGB" => Ok(3),
        b"ICCBased" => {
            let n = match space {
                Some(Object::Array(a)) => a
                    .get(1)
                    .and_then(|o| resolve(doc, o).as_stream().ok())
                    .and_then(|s| s.dict.get(b"N").and_then(Object::as_i64).ok()),
                _ => None,
            };
            match n {
                Some(1) => Ok(1),
                Some(3) => Ok(3),
                other => Err(format!("its scan has {other:?} colour components")),
            }
        }
        other => Err(format!(
            "its scan's colour space is {}, which the OCR cannot read yet",
            String::from_utf8_lossy(other)
        )),
    }
}

/// Samples as a PNM file: PBM for 1 bit (PDF's 0 is black unless `/Decode [1 0]` or a mask
/// says otherwise; PBM's 1 is black), PGM or PPM for 8 bits.
fn pnm(
    dict: &Dictionary,
    width: u64,
    height: u64,
    components: u64,
    bits: u64,
    samples: &[u8],
) -> Result<Vec<u8>, String> {
    let row = (width * components * bits).div_ceil(8) as usize;
    let rows = height as usize;
    if samples.len() < row * rows {
        return Err(format!(
            "its scan holds {} bytes where {}×{} pixels need {}",
            samples.len(),
            width,
            height,
            row * rows
        ));
    }
    let samples = &samples[..row * rows];
    let decode_inverted = matches!(dict.get(b"Decode"), Ok(Object::Array(d))
        if d.first().and_then(|v| v.as_float().ok()) == Some(1.0));
    match (bits, components) {
        (1, 1) => {
            // PDF: 0 is black (a stencil mask paints its 0 samples, black on the white page).
            let black_is_zero = !decode_inverted;
            let mut out = format!("P4\n{width} {height}\n").into_bytes();
            out.extend(samples.iter().map(|b| if black_is_zero { !b } else { *b }));
            Ok(out)
        }
        (8, 1) | (8, 3) => {
            let magic = if components == 1 { "P5" } else { "P6" };
            let mut out = format!("{magic}\n{width} {height}\n255\n").into_bytes();
            if decode_inverted {
                out.extend(samples.iter().map(|b| 255 - b));
            } else {
                out.extend_from_slice(samples);
            }
            Ok(out)
        }
        _ => Err(format!(
            "its scan has {bits} bits per sample, which the OCR cannot read yet"
        )),
    }
}

/// A CCITT fax stream wrapped in the smallest TIFF that says what it is (Group 4 when `/K` is
/// negative, else Group 3), for Leptonica to decode.
fn ccitt_tiff(dict: &Dictionary, width: u64, height: u64, data: &[u8]) -> Vec<u8> {
    let params = dict.get(b"DecodeParms").ok().and_then(|p| match p {
        Object::Dictionary(d) => Some(d),
        Object::Array(a) => a.first().and_then(|d| d.as_dict().ok()),
        _ => None,
    });
    let param = |key: &[u8]| params.and_then(|p| p.get(key).ok());
    let k = param(b"K").and_then(|v| v.as_i64().ok()).unwrap_or(0);
    let black_is_1 = matches!(param(b"BlackIs1"), Some(Object::Boolean(true)));
    // `Rows` 0 (unknown) or a size past the image's own bounds keeps the image's size.
    let side = |key: &[u8], default: u64| {
        param(key)
            .and_then(|v| v.as_i64().ok())
            .and_then(|v| u64::try_from(v).ok())
            .filter(|&v| v > 0 && v <= MAX_SIDE)
            .unwrap_or(default)
    };
    let (rows, width) = (side(b"Rows", height), side(b"Columns", width));
    let (rows, width) = if rows * width > MAX_PIXELS {
        (height, width.min(MAX_SIDE))
    } else {
        (rows, width)
    };
    let compression: u32 = if k < 0 { 4 } else { 3 };
    // Tags, in ascending order: (tag, type SHORT=3 / LONG=4, value).
    let mut tags: Vec<(u16, u16, u32)> = vec![
        (256, 4, width as u32),
        (257, 4, rows as u32),
        (258, 3, 1),
        (259, 3, compression),
        (262, 3, if black_is_1 { 1 } else { 0 }),
        (273, 4, 0), // strip offset, set below
        (277, 3, 1),
        (278, 4, rows as u32),
        (279, 4, data.len() as u32),
    ];
    if compression == 3 {
        // T4Options: 2-D coding when K > 0.
        tags.push((292, 4, if k > 0 { 1 } else { 0 }));
    }
    let ifd_len = 2 + tags.len() * 12 + 4;
    let data_offset = (8 + ifd_len) as u32;
    let mut out = Vec::with_capacity(data_offset as usize + data.len());
    out.extend_from_slice(b"II*\0");
    out.extend_from_slice(&8u32.to_le_bytes());
    out.extend_from_slice(&(tags.len() as u16).to_le_bytes());
    for (tag, kind, value) in tags {
        let value = if tag == 273 { data_offset } else { value };
        out.extend_from_slice(&tag.to_le_bytes());
        out.extend_from_slice(&kind.to_le_bytes());
        out.extend_from_slice(&1u32.to_le_bytes());
        if kind == 3 {
            out.extend_from_slice(&(value as u16).to_le_bytes());
            out.extend_from_slice(&[0, 0]);
        } else {
            out.extend_from_slice(&value.to_le_bytes());
        }
    }
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(data);
    out
}

/// Runs Tesseract on `image` (on stdin) and reads its TSV: lines and paragraphs as it found them,
/// and the mean confidence of its words.
fn run_tesseract(tesseract: &Path, image: &[u8], timeout: Duration) -> Result<OcrPage, String> {
    let mut command = Command::new(tesseract);
    command
        .args(["-", "-", "tsv"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    #[cfg(windows)]
    {
        // A console program started by a windowed app opens a console window unless told not to.
        use std::os::windows::process::CommandExt;
        const CREATE_NO_WINDOW: u32 = 0x0800_0000;
        command.creation_flags(CREATE_NO_WINDOW);
    }
    let mut child = command
        .spawn()
        .map_err(|e| format!("{} could not be started: {e}", tesseract.display()))?;
    // Input written and output read from threads: Tesseract may write before it has read all
    // of the image, and a page's TSV can outgrow a pipe's buffer before Tesseract exits.
    let mut stdin = child.stdin.take();
    let bytes = image.to_vec();
    let writer = std::thread::spawn(move || {
        if let Some(stdin) = stdin.as_mut() {
            let _ = stdin.write_all(&bytes);
        }
    });
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_string(&mut text);
            }
            text
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() > timeout => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "Tesseract was stopped after {} s on it",
                    timeout.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => {
                let _ = child.kill();
                return Err(format!("waiting for Tesseract failed: {e}"));
            }
        }
    };
    let _ = writer.join();
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    if !status.success() {
        let last = stderr.lines().last().unwrap_or("").trim().to_string();
        return Err(format!("Tesseract failed on it ({status}: {last})"));
    }
    Ok(parse_tsv(&stdout))
}

/// Tesseract's TSV (`level page block par line word left top width height conf text`) as text:
/// words of a line joined by spaces, lines by newlines, paragraphs by blank lines.
fn parse_tsv(tsv: &str) -> OcrPage {
    let mut text = String::new();
    let (mut sum, mut words) = (0.0f64, 0u32);
    let mut last: Option<(&str, &str, &str)> = None;
    for line in tsv.lines().skip(1) {
        let fields: Vec<&str> = line.split('\t').collect();
        if fields.len() < 12 || fields[0] != "5" {
            continue;
        }
        let word = fields[11].trim();
        let Ok(confidence) = fields[10].parse::<f64>() else {
            continue;
        };
        if word.is_empty() || confidence < 0.0 {
            continue;
        }
        let place = (fields[2], fields[3], fields[4]);
        match last {
            None => {}
            Some((block, par, _)) if (block, par) != (place.0, place.1) => text.push_str("\n\n"),
            Some((_, _, line)) if line != place.2 => text.push('\n'),
            Some(_) => text.push(' '),
        }
        text.push_str(word);
        last = Some(place);
        sum += confidence;
        words += 1;
    }
    OcrPage {
        text,
        confidence: if words == 0 {
            0.0
        } else {
            (sum / f64::from(words) / 100.0) as f32
        },
    }
}

/// A page dictionary's `key`, or the nearest ancestor's in the page tree.
fn inherited<'a>(doc: &'a Document, page: ObjectId, key: &[u8]) -> Option<&'a Dictionary> {
    let mut node = doc.get_dictionary(page).ok()?;
    for _ in 0..64 {
        if let Ok(value) = node.get(key) {
            return resolve_dict(doc, value);
        }
        let parent = node.get(b"Parent").ok()?.as_reference().ok()?;
        node = doc.get_dictionary(parent).ok()?;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tesseract_tsv_becomes_lines_paragraphs_and_a_mean_confidence() {
        let tsv = "level\tpage_num\tblock_num\tpar_num\tline_num\tword_num\tleft\ttop\twidth\theight\tconf\ttext\n\
                   1\t1\t0\t0\t0\t0\t0\t0\t100\t100\t-1\t\n\
                   5\t1\t1\t1\t1\t1\t0\t0\t10\t10\t96.5\tScanned\n\
                   5\t1\t1\t1\t1\t2\t0\t0\t10\t10\t93.5\tpages\n\
                   5\t1\t1\t1\t2\t1\t0\t0\t10\t10\t90\tare\n\
                   5\t1\t2\t1\t1\t1\t0\t0\t10\t10\t80\tread.\n\
                   5\t1\t2\t1\t1\t2\t0\t0\t10\t10\t-1\t \n";
        let page = parse_tsv(tsv);
        assert_eq!(page.text, "Scanned pages\nare\n\nread.");
        assert!((page.confidence - 0.9).abs() < 1e-6, "{}", page.confidence);
        assert_eq!(parse_tsv("").confidence, 0.0);
    }

    /// An image stream of `width` × `height` 8-bit gray samples, deflated from `samples`.
    fn gray_image(width: i64, height: i64, samples: &[u8]) -> pdf_extract::Stream {
        use std::io::Write as _;
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        let _ = z.write_all(samples);
        let mut dict = Dictionary::new();
        dict.set("Subtype", Object::Name(b"Image".to_vec()));
        dict.set("Width", Object::Integer(width));
        dict.set("Height", Object::Integer(height));
        dict.set("ColorSpace", Object::Name(b"DeviceGray".to_vec()));
        dict.set("BitsPerComponent", Object::Integer(8));
        dict.set("Filter", Object::Name(b"FlateDecode".to_vec()));
        pdf_extract::Stream::new(dict, z.finish().unwrap_or_default())
    }

    #[test]
    fn a_scan_that_lies_about_its_size_is_refused_by_name_never_a_crash() {
        let doc = Document::new();
        let pgm = image_file(&doc, &gray_image(4, 2, &[7; 8])).unwrap_or_default();
        assert_eq!(
            pgm,
            b"P5\n4 2\n255\n\x07\x07\x07\x07\x07\x07\x07\x07".to_vec()
        );
        // Sides whose product overflows, and absurd or negative ones.
        for (w, h) in [(1 << 62, 4), (-5, 10), (200_000, 200_000), (0, 10)] {
            let err = image_file(&doc, &gray_image(w, h, &[0; 16])).unwrap_err();
            assert!(err.contains("pixels"), "{w}×{h}: {err}");
        }
        // A small image whose stream inflates to 64 MiB: a bomb, refused before it is inflated.
        let err = image_file(&doc, &gray_image(10, 10, &vec![0; 64 << 20])).unwrap_err();
        assert!(err.contains("decompression bomb"), "{err}");
    }

    #[test]
    fn a_one_bit_scan_becomes_a_pbm_with_black_as_one() {
        let dict = Dictionary::new();
        // 8×2 pixels: PDF 0 = black.
        let pbm = pnm(&dict, 8, 2, 1, 1, &[0b0000_1111, 0xff]).unwrap_or_default();
        assert_eq!(pbm, b"P4\n8 2\n\xf0\x00".to_vec());
        assert!(pnm(&dict, 8, 3, 1, 1, &[0, 0]).is_err());
    }
}
