//! Simple fonts embedded as Type 1C (CFF) programs: their text is read through the encoding
//! the program carries where the PDF names none, as poppler reads it.
//!
//! dvips and Ghostscript 5 to 8 wrote papers' fonts this way (many PDFs of the 2000s on arXiv
//! and in publishers' archives): each Type 1 font subset and converted to CFF, its encoding
//! left inside the program (a custom one, often with supplements: CMSY's `asteriskmath` at both
//! 3 and 164), and neither `/Encoding` nor `/ToUnicode` in the PDF. pdf-extract reads such a
//! program with cff-parser, which drops the supplements, puts the program's encoding before a
//! named `/Encoding`, and unwraps what it cannot read; a code it finds no character for stops
//! the whole page ("missing unicode map and encoding").
//!
//! So before any page is read, every such font gets a `/ToUnicode` map made here, and its
//! `/FontFile3` is taken out of the document in memory so that pdf-extract does not read the
//! program again. The encoding is poppler's:
//! - a named encoding (`/Encoding /WinAnsiEncoding`, or a `/BaseEncoding` under
//!   `/Differences`: MacRoman, MacExpert or WinAnsi) wins over the program's; pdf-extract reads
//!   those itself, so such a font loses its program, and its `/Differences` only are given as
//!   the map (read by the names here, where pdf-extract knows fewer), save names that draw
//!   nothing (`/suppress`, `/.notdef`), which leave the base's character at their code;
//! - else the program's built-in encoding: the standard encoding or a custom one (formats 0 and
//!   1, with supplements), each code to its glyph through the charset, the glyph to its name
//!   (one of the 391 standard strings, or the program's own); a code the custom encoding leaves
//!   out is looked up in the standard encoding where the program has that glyph, as poppler
//!   fills those gaps. (The expert
//!   encoding is read as the standard one, the one gap in ttf-parser's reading; expert sets of
//!   small capitals and old-style figures are rare in PDFs and come with `/Differences`.)
//! - then the `/Differences` of the font's `/Encoding` over it;
//! - each glyph name read as text by [`pdf_glyph_names`](super::pdf_glyph_names). A glyph that draws no character
//!   (`.notdef`, OT1's `suppress`) maps to no text. A symbol whose name no list knows (a
//!   dingbat's `a1`, LCIRCLE10's braille dots, `born`) maps, as poppler maps it, to its code
//!   read as a character where that is a printable one (`r` for the dot at 114), else to a
//!   space, which keeps the words either side of it apart as poppler's control character
//!   does (`Edit✄Reconfigure`). So a font whose glyphs all say nothing at control codes leaves
//!   its page with no text but spaces, and the page is refused as drawn in fonts that map
//!   their glyphs to no characters.
//!
//! A font's own `/ToUnicode` map comes first of all, as in every reader: it is written after
//! the map made here, whose later mappings win in pdf-extract, so the encoding only fills the
//! codes it leaves out (where pdf-extract looked them up in cff-parser's reading, and stopped
//! the page where that had none). The program is read by ttf-parser, which reads untrusted font
//! data without panicking; a program it cannot read (or a CID-keyed one) leaves the font as it
//! was.
//! Only fonts that are objects of their own are looked at, as every producer we know writes
//! them.

use pdf_extract::{Dictionary, Document, Object, ObjectId, Stream};
use ttf_parser::GlyphId;

use super::pdf::{self, resolve};
use super::pdf_glyph_names::{draws_no_character, glyph_text};

/// The largest font program read for its encoding. A subset is a few kilobytes and a whole
/// Latin font some hundreds; the CJK fonts that reach megabytes are CID-keyed, not read here.
const MAX_FONT_PROGRAM_BYTES: u64 = 16 << 20;

/// The largest `/ToUnicode` map of a simple font read to merge with its encoding: 256 codes
/// need a few kilobytes.
const MAX_TO_UNICODE_BYTES: u64 = 1 << 20;

/// Gives every simple font with an embedded Type 1C program the reading the module's doc
/// describes, before pdf-extract reads any page.
pub(super) fn read_builtin_encodings(doc: &mut Document) {
    let fonts: Vec<(ObjectId, Type1cFont)> = doc
        .objects
        .iter()
        .filter_map(|(&id, object)| Some((id, Type1cFont::read(doc, object.as_dict().ok()?)?)))
        .collect();
    for (id, font) in fonts {
        font.apply(doc, id);
    }
}

/// How one simple font whose program is Type 1C is to be read.
struct Type1cFont {
    /// Where its descriptor is, to take the program out.
    descriptor: DescriptorAt,
    /// The `/ToUnicode` map it is given (the font's own map after it), or `None` to keep what
    /// it has.
    to_unicode: Option<Vec<u8>>,
    /// Whether that map is the whole encoding, every code mapped (the program's encoding), so
    /// that pdf-extract is kept from the font's `/Encoding`: a base it may not know, unwrapped.
    whole_encoding: bool,
}

/// Where a font's descriptor is, to take its `/FontFile3` out.
enum DescriptorAt {
    Object(ObjectId),
    InFont,
}

impl Type1cFont {
    /// How `font` is to be read, or `None` where it is left as it is: not a simple Type 1 font,
    /// no Type 1C program, or a program (or `/ToUnicode` map) that cannot be read.
    fn read(doc: &Document, font: &Dictionary) -> Option<Self> {
        let subtype = font.get(b"Subtype").and_then(Object::as_name).ok()?;
        if !matches!(subtype, b"Type1" | b"MMType1")
            || font
                .get(b"Type")
                .and_then(Object::as_name)
                .is_ok_and(|kind| kind != b"Font")
        {
            return None;
        }
        let (descriptor, descriptor_dict) = match font.get(b"FontDescriptor").ok()? {
            Object::Reference(id) => (DescriptorAt::Object(*id), doc.get_dictionary(*id).ok()?),
            Object::Dictionary(dict) => (DescriptorAt::InFont, dict),
            _ => return None,
        };
        let program = match resolve(doc, descriptor_dict.get(b"FontFile3").ok()?) {
            Object::Stream(stream) => stream,
            _ => return None,
        };
        if program.dict.get(b"Subtype").and_then(Object::as_name).ok() != Some(b"Type1C") {
            return None;
        }
        let (named, differences) = match font.get(b"Encoding").ok().map(|e| resolve(doc, e)) {
            None => (false, None),
            // Another name is no encoding a reader knows: poppler reads the program's.
            Some(Object::Name(name)) => (is_named_encoding(name), None),
            Some(Object::Dictionary(dict)) => {
                let named = match dict.get(b"BaseEncoding").map(|b| resolve(doc, b)) {
                    Ok(Object::Name(name)) => is_named_encoding(name),
                    _ => false,
                };
                let differences = match dict.get(b"Differences").map(|d| resolve(doc, d)) {
                    Ok(Object::Array(differences)) => Some(differences.as_slice()),
                    _ => None,
                };
                (named, differences)
            }
            Some(_) => return None,
        };
        let (mut map, whole_encoding) = if named {
            // pdf-extract reads the named base itself; the map holds the `/Differences` only,
            // read by the names here (`uni…`, TeX's), where pdf-extract knows fewer.
            let mut names = vec![None; 256];
            let Some(differences) = differences else {
                return Some(Self {
                    descriptor,
                    to_unicode: None,
                    whole_encoding: false,
                });
            };
            apply_differences(doc, differences, &mut names);
            // A name that draws nothing (`/suppress`, `/.notdef`) is left to the base: Ghostscript
            // writes the program's names at codes the text uses as WinAnsi (a space at 32, `ç`
            // at 231), and poppler reads those codes through.
            let codes: Vec<(u8, String)> = (0..=u8::MAX)
                .zip(&names)
                .filter_map(|(code, name)| {
                    let name = name.as_deref().filter(|name| !draws_no_character(name))?;
                    Some((code, name_text(code, name)))
                })
                .collect();
            (to_unicode_cmap(&codes), false)
        } else {
            let program = pdf::decoded_within(program, MAX_FONT_PROGRAM_BYTES)?;
            let mut names = builtin_glyph_names(&program)?;
            if let Some(differences) = differences {
                apply_differences(doc, differences, &mut names);
            }
            let codes: Vec<(u8, String)> = (0..=u8::MAX)
                .zip(&names)
                .map(|(code, name)| {
                    let text = name.as_deref().map(|name| name_text(code, name));
                    (code, text.unwrap_or_default())
                })
                .collect();
            (to_unicode_cmap(&codes), true)
        };
        // The font's own map after this one: pdf-extract reads a map's mappings in order, the
        // later winning, so the font's own come first and the encoding fills their holes.
        match font.get(b"ToUnicode").map(|own| resolve(doc, own)) {
            Err(_) => {}
            Ok(Object::Stream(own)) => {
                map.push(b'\n');
                map.extend(pdf::decoded_within(own, MAX_TO_UNICODE_BYTES)?);
            }
            Ok(_) => return None,
        }
        Some(Self {
            descriptor,
            to_unicode: Some(map),
            whole_encoding,
        })
    }

    fn apply(self, doc: &mut Document, font_id: ObjectId) {
        if let Some(to_unicode) = self.to_unicode {
            let map = doc.add_object(Stream::new(Dictionary::new(), to_unicode));
            if let Ok(Object::Dictionary(font)) = doc.get_object_mut(font_id) {
                font.set("ToUnicode", Object::Reference(map));
                if self.whole_encoding {
                    font.remove(b"Encoding");
                }
            }
        }
        let descriptor = match self.descriptor {
            DescriptorAt::Object(id) => doc.get_object_mut(id).ok(),
            DescriptorAt::InFont => doc
                .get_object_mut(font_id)
                .ok()
                .and_then(|font| font.as_dict_mut().ok())
                .and_then(|font| font.get_mut(b"FontDescriptor").ok()),
        };
        if let Some(Object::Dictionary(descriptor)) = descriptor {
            descriptor.remove(b"FontFile3");
        }
    }
}

/// The text code `code`, whose glyph is named `name`, maps to: the name read as text; for a
/// symbol no list names, the code itself where it is a printable character (poppler passes
/// the code through), else a space; nothing for a glyph that draws no character.
fn name_text(code: u8, name: &str) -> String {
    glyph_text(name).unwrap_or_else(|| {
        if draws_no_character(name) {
            String::new()
        } else if matches!(code, 0x21..=0x7e | 0xa1..=0xff) {
            char::from(code).to_string()
        } else {
            " ".to_owned()
        }
    })
}

/// The encodings a PDF names and pdf-extract reads: the base of a simple font's encoding.
fn is_named_encoding(name: &[u8]) -> bool {
    matches!(
        name,
        b"WinAnsiEncoding" | b"MacRomanEncoding" | b"MacExpertEncoding"
    )
}

/// The glyph name of each code 0–255 in the built-in encoding of CFF program `program`
/// (`None`: no glyph, or `.notdef`); `None` for a program that cannot be read or is CID-keyed.
pub(super) fn builtin_glyph_names(program: &[u8]) -> Option<Vec<Option<String>>> {
    let table = ttf_parser::cff::Table::parse(program)?;
    // A CID-keyed program maps codes through CMaps, not an encoding: a simple font's is not.
    if table.glyph_cid(GlyphId(0)).is_some() {
        return None;
    }
    Some(
        (0..=u8::MAX)
            .map(|code| {
                let glyph = table.glyph_index(code).filter(|glyph| glyph.0 != 0)?;
                table.glyph_name(glyph).map(str::to_owned)
            })
            .collect(),
    )
}

/// `/Differences`: a code, then the names of that code and the ones after it, and so on.
fn apply_differences(doc: &Document, differences: &[Object], names: &mut [Option<String>]) {
    let mut code: Option<usize> = None;
    for item in differences {
        match resolve(doc, item) {
            Object::Integer(start) => code = usize::try_from(*start).ok(),
            Object::Name(name) => {
                if let Some(slot) = code.and_then(|at| names.get_mut(at)) {
                    *slot = std::str::from_utf8(name).ok().map(str::to_owned);
                }
                code = code.and_then(|at| at.checked_add(1));
            }
            _ => {}
        }
    }
}

/// A `/ToUnicode` CMap mapping each (one-byte) code of `codes` to its text in UTF-16BE (an
/// empty text to none).
fn to_unicode_cmap(codes: &[(u8, String)]) -> Vec<u8> {
    let mut cmap = String::from(
        "/CIDInit /ProcSet findresource begin\n12 dict begin\nbegincmap\n\
         /CMapName /SelfRAG-Type1C-encoding def\n/CMapType 2 def\n\
         1 begincodespacerange\n<00> <FF>\nendcodespacerange\n",
    );
    // At most 100 mappings to a block, as the CMap format wants.
    for block in codes.chunks(100) {
        cmap.push_str(&format!("{} beginbfchar\n", block.len()));
        for (code, text) in block {
            let utf16: String = text
                .encode_utf16()
                .map(|unit| format!("{unit:04X}"))
                .collect();
            cmap.push_str(&format!("<{code:02X}> <{utf16}>\n"));
        }
        cmap.push_str("endbfchar\n");
    }
    cmap.push_str("endcmap\nCMapName currentdict /CMap defineresource pop\nend\nend\n");
    cmap.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::IndexError;
    use lopdf::dictionary;

    /// Standard strings (CFF's SIDs) the test fonts name their glyphs by.
    const QUOTERIGHT: u16 = 8;
    const H: u16 = 41;
    const E: u16 = 70;
    const L: u16 = 77;
    const O: u16 = 80;
    /// The first SID past the standard strings: the program's own names, in order.
    const OWN: u16 = 391;

    /// A CFF INDEX of `items` (two-byte offsets).
    fn index(items: &[Vec<u8>]) -> Vec<u8> {
        if items.is_empty() {
            return vec![0, 0];
        }
        let mut out = u16::try_from(items.len()).unwrap().to_be_bytes().to_vec();
        out.push(2);
        let mut offset = 1u16;
        out.extend(offset.to_be_bytes());
        for item in items {
            offset += u16::try_from(item.len()).unwrap();
            out.extend(offset.to_be_bytes());
        }
        for item in items {
            out.extend(item);
        }
        out
    }

    /// A DICT operand as a five-byte integer, so that the Top DICT's size does not depend on
    /// the offsets in it.
    fn operand(value: usize) -> Vec<u8> {
        let mut out = vec![29];
        out.extend(i32::try_from(value).unwrap().to_be_bytes());
        out
    }

    /// A CFF program (Adobe TN #5176) whose glyphs after `.notdef` are `glyphs`: (SID, code),
    /// a SID from `OWN` on naming `own_names[SID - OWN]`. Its charset is format 0; its custom
    /// encoding format 1 (ranges) where `ranges`, else format 0; `supplements` add (code, SID)
    /// pairs. Every glyph is drawn as nothing (`endchar`): only the encoding matters here.
    fn cff_program(
        glyphs: &[(u16, u8)],
        own_names: &[&str],
        supplements: &[(u8, u16)],
        ranges: bool,
    ) -> Vec<u8> {
        let name_index = index(&[b"ABCDEF+Test".to_vec()]);
        let string_index = index(
            &own_names
                .iter()
                .map(|name| name.as_bytes().to_vec())
                .collect::<Vec<_>>(),
        );
        let global_subrs = index(&[]);
        let mut charset = vec![0];
        for (sid, _) in glyphs {
            charset.extend(sid.to_be_bytes());
        }
        let supplement_flag = if supplements.is_empty() { 0 } else { 0x80 };
        let mut encoding = Vec::new();
        if ranges {
            // One range per run of consecutive codes.
            let mut runs: Vec<(u8, u8)> = Vec::new();
            for &(_, code) in glyphs {
                match runs.last_mut() {
                    Some((first, left))
                        if usize::from(*first) + usize::from(*left) + 1 == usize::from(code) =>
                    {
                        *left += 1
                    }
                    _ => runs.push((code, 0)),
                }
            }
            encoding.extend([1 | supplement_flag, u8::try_from(runs.len()).unwrap()]);
            for (first, left) in runs {
                encoding.extend([first, left]);
            }
        } else {
            encoding.extend([supplement_flag, u8::try_from(glyphs.len()).unwrap()]);
            encoding.extend(glyphs.iter().map(|&(_, code)| code));
        }
        if !supplements.is_empty() {
            encoding.push(u8::try_from(supplements.len()).unwrap());
            for &(code, sid) in supplements {
                encoding.push(code);
                encoding.extend(sid.to_be_bytes());
            }
        }
        let char_strings = index(&vec![vec![14u8]; glyphs.len() + 1]);
        let top_dict = |charset_at: usize, encoding_at: usize, char_strings_at: usize| {
            let mut dict = operand(charset_at);
            dict.push(15);
            dict.extend(operand(encoding_at));
            dict.push(16);
            dict.extend(operand(char_strings_at));
            dict.push(17);
            index(&[dict])
        };
        let header = [1u8, 0, 4, 2];
        let charset_at = header.len()
            + name_index.len()
            + top_dict(0, 0, 0).len()
            + string_index.len()
            + global_subrs.len();
        let encoding_at = charset_at + charset.len();
        let char_strings_at = encoding_at + encoding.len();
        [
            header.to_vec(),
            name_index,
            top_dict(charset_at, encoding_at, char_strings_at),
            string_index,
            global_subrs,
            charset,
            encoding,
            char_strings,
        ]
        .concat()
    }

    /// The test font: H e l o ’ at codes 1 to 5, `f_f` (its own name) at 6 and `a1` (a name
    /// no list knows, as LaTeX's LINE10 names its pieces) at 7; and `l` again at 164 by a
    /// supplement. Codes no reader would guess: only the program's encoding reads them.
    fn hello_program(ranges: bool) -> Vec<u8> {
        cff_program(
            &[
                (H, 1),
                (E, 2),
                (L, 3),
                (O, 4),
                (QUOTERIGHT, 5),
                (OWN, 6),
                (OWN + 1, 7),
            ],
            &["f_f", "a1"],
            &[(164, L)],
            ranges,
        )
    }

    /// A one-page PDF, written with lopdf, showing `content` in font `/F1`: a simple Type 1
    /// font whose program is `program` (Type 1C), with `font_extra` added to its dictionary.
    fn pdf_with_type1c_font(content: &str, program: Vec<u8>, font_extra: Dictionary) -> Vec<u8> {
        let mut doc = Document::with_version("1.4");
        let pages_id = doc.new_object_id();
        let program_id =
            doc.add_object(Stream::new(dictionary! { "Subtype" => "Type1C" }, program));
        let descriptor_id = doc.add_object(dictionary! {
            "Type" => "FontDescriptor",
            "FontName" => "ABCDEF+Test",
            "Flags" => 4,
            "FontBBox" => vec![0.into(), 0.into(), 500.into(), 700.into()],
            "ItalicAngle" => 0,
            "Ascent" => 700,
            "Descent" => 0,
            "CapHeight" => 700,
            "StemV" => 80,
            "FontFile3" => program_id,
        });
        let mut font = dictionary! {
            "Type" => "Font",
            "Subtype" => "Type1",
            "BaseFont" => "ABCDEF+Test",
            "FirstChar" => 0,
            "LastChar" => 255,
            "Widths" => vec![Object::Integer(500); 256],
            "FontDescriptor" => descriptor_id,
        };
        for (key, value) in font_extra {
            font.set(key, value);
        }
        let font_id = doc.add_object(font);
        let content_id = doc.add_object(Stream::new(dictionary! {}, content.as_bytes().to_vec()));
        let page_id = doc.add_object(dictionary! {
            "Type" => "Page",
            "Parent" => pages_id,
            "MediaBox" => vec![0.into(), 0.into(), 612.into(), 792.into()],
            "Contents" => content_id,
            "Resources" => dictionary! { "Font" => dictionary! { "F1" => font_id } },
        });
        doc.objects.insert(
            pages_id,
            Object::Dictionary(dictionary! {
                "Type" => "Pages",
                "Kids" => vec![page_id.into()],
                "Count" => 1,
            }),
        );
        let catalog_id = doc.add_object(dictionary! { "Type" => "Catalog", "Pages" => pages_id });
        doc.trailer.set("Root", catalog_id);
        let mut bytes = Vec::new();
        doc.save_to(&mut bytes).unwrap();
        bytes
    }

    fn extract(pdf: &[u8]) -> Result<super::super::ExtractedDocument, IndexError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("type1c.pdf");
        std::fs::write(&path, pdf).unwrap();
        pdf::extract(&path)
    }

    /// "Hello", then "off" + "e’", the glyph named `a1`, and "Hel".
    const HELLO: &str = "BT /F1 12 Tf 72 700 Td <0102A40304> Tj 0 -20 Td <0406020507010203> Tj ET";

    #[test]
    fn a_cff_programs_builtin_encoding_names_its_glyphs() {
        for ranges in [false, true] {
            let names = builtin_glyph_names(&hello_program(ranges)).unwrap();
            let name = |code: usize| names[code].as_deref();
            assert_eq!(
                (name(1), name(3), name(5), name(6), name(7)),
                (
                    Some("H"),
                    Some("l"),
                    Some("quoteright"),
                    Some("f_f"),
                    Some("a1")
                ),
                "format {}",
                u8::from(ranges)
            );
            assert_eq!(name(164), Some("l"), "the supplement");
            assert_eq!((name(0), name(9), name(0xa5)), (None, None, None));
            // A code the custom encoding leaves out is the standard encoding's, where the
            // program has that glyph (poppler fills the gaps so too).
            assert_eq!(name(b'H'.into()), Some("H"));
        }
        assert_eq!(builtin_glyph_names(b"not a font"), None);
        assert_eq!(builtin_glyph_names(&[1, 0, 4, 2, 0]), None, "cut short");
    }

    /// Issue 45: Ghostscript 7's `pspicture.pdf` (texlive-latex-base-doc): Type 1C fonts with
    /// custom built-in encodings and supplements, no `/Encoding` and no `/ToUnicode`, were
    /// refused on every page ("the PDF parser failed on it"); pdftotext reads them.
    #[test]
    fn a_type1c_font_without_encoding_or_to_unicode_reads_through_its_builtin_encoding() {
        let document = extract(&pdf_with_type1c_font(
            HELLO,
            hello_program(false),
            Dictionary::new(),
        ))
        .unwrap();
        assert!(document.notes.is_empty(), "{:?}", document.notes);
        let text = &document.pages[0].text;
        assert!(text.contains("Hello"), "{text:?}");
        assert!(
            text.contains("offe\u{2019} Hel"),
            "a1 keeps the words apart: {text:?}"
        );

        // An encoding name no reader knows (PDF names three) is no encoding: the program's
        // is read, and pdf-extract, which unwraps such a name, never sees it.
        let unknown_name = dictionary! { "Encoding" => "StandardEncoding" };
        let document = extract(&pdf_with_type1c_font(
            HELLO,
            hello_program(false),
            unknown_name,
        ))
        .unwrap();
        assert!(document.pages[0].text.contains("Hello"), "{document:?}");
    }

    /// The `/Differences` of the font's `/Encoding` come over the program's encoding; a named
    /// encoding wins over it (poppler's order); a `/ToUnicode` map comes first of all.
    #[test]
    fn differences_named_encodings_and_to_unicode_maps_come_before_the_programs_encoding() {
        let differences = dictionary! {
            "Encoding" => dictionary! { "Differences" => vec![1.into(), "J".into()] },
        };
        let document = extract(&pdf_with_type1c_font(
            HELLO,
            hello_program(true),
            differences,
        ))
        .unwrap();
        assert!(
            document.pages[0].text.contains("Jello"),
            "{:?}",
            document.pages[0].text
        );

        // The program puts `o` at 0x48 (`H`), `l` at 0x65 (`e`) and `H` at 0x6f (`o`); the PDF
        // says WinAnsiEncoding, which reads the bytes of "Hello" as "Hello".
        let scrambled = cff_program(&[(O, 0x48), (L, 0x65), (H, 0x6f)], &[], &[], false);
        let named = dictionary! { "Encoding" => "WinAnsiEncoding" };
        let document = extract(&pdf_with_type1c_font(
            "BT /F1 12 Tf 72 700 Td (Hello) Tj ET",
            scrambled,
            named,
        ))
        .unwrap();
        assert!(
            document.pages[0].text.contains("Hello"),
            "{:?}",
            document.pages[0].text
        );

        // `/Differences` over a named base, read by the names here: `uni00E9` is é, and a
        // symbol no list names is its code where that is printable (LCIRCLE10's braille dot
        // `a114` at 114 is `r`, as pdftotext reads it), else a space that keeps the words
        // apart (a dingbat at 3).
        let named_differences = dictionary! {
            "Encoding" => dictionary! {
                "BaseEncoding" => "WinAnsiEncoding",
                "Differences" => vec![
                    3.into(), "a3".into(), 5.into(), "uni00E9".into(), 114.into(), "a114".into(),
                ],
            },
        };
        let document = extract(&pdf_with_type1c_font(
            "BT /F1 12 Tf 72 700 Td (Edit\\003Reconfigure caf\\005 \\162) Tj ET",
            hello_program(false),
            named_differences,
        ))
        .unwrap();
        assert!(
            document.pages[0].text.contains("Edit Reconfigure café r"),
            "{:?}",
            document.pages[0].text
        );

        // Ghostscript names the program's glyphs over a WinAnsi base (`/suppress` at 32, `.notdef`
        // at 227 and 231) where the text shows WinAnsi's space, `ã` and `ç` (featpost's manual):
        // names that draw nothing leave the base's characters, as poppler reads them.
        let suppressed = dictionary! {
            "Encoding" => dictionary! {
                "BaseEncoding" => "WinAnsiEncoding",
                "Differences" => vec![
                    32.into(), "suppress".into(), 227.into(), ".notdef".into(), 231.into(),
                    ".notdef".into(),
                ],
            },
        };
        let document = extract(&pdf_with_type1c_font(
            "BT /F1 12 Tf 72 700 Td (Texto com acentua\\347\\343o.) Tj ET",
            hello_program(false),
            suppressed,
        ))
        .unwrap();
        assert!(
            document.pages[0].text.contains("Texto com acentuação."),
            "{:?}",
            document.pages[0].text
        );

        let cmap = to_unicode_cmap(&[(1, "Y".into())]);
        let mut doc = Document::with_version("1.4");
        let cmap_id = doc.add_object(Stream::new(dictionary! {}, cmap));
        let mut pdf = pdf_with_type1c_font(HELLO, hello_program(false), Dictionary::new());
        // The font with a map of its own: rewritten through lopdf with the map added.
        let mut with_map = Document::load_mem(&pdf).unwrap();
        let map = with_map.add_object(doc.get_object(cmap_id).unwrap().clone());
        for object in with_map.objects.values_mut() {
            if let Object::Dictionary(dict) = object
                && dict.get(b"Type").and_then(Object::as_name).ok() == Some(b"Font")
            {
                dict.set("ToUnicode", map);
            }
        }
        pdf.clear();
        with_map.save_to(&mut pdf).unwrap();
        let text = extract(&pdf).unwrap().pages[0].text.clone();
        assert!(text.contains("Yello"), "{text:?}");
    }

    /// A Type 1C font whose glyph names say nothing (LaTeX's LINE10 and LCIRCLE10 call theirs
    /// `a1`, `a18`) leaves its page without text, refused with the reason, as before.
    #[test]
    fn a_type1c_font_whose_glyphs_name_nothing_is_refused_saying_so() {
        let program = cff_program(&[(OWN, 1), (OWN + 1, 2)], &["a1", "a18"], &[], false);
        let pdf = pdf_with_type1c_font(
            "BT /F1 12 Tf 72 700 Td <010201> Tj ET",
            program,
            Dictionary::new(),
        );
        match extract(&pdf) {
            Err(IndexError::NoTextLayer { reason, .. }) => assert!(
                reason.contains("map their glyphs to no characters"),
                "{reason}"
            ),
            other => panic!("{other:?}"),
        }
    }
}
