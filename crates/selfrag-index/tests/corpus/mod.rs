//! A corpus of hostile and broken files, written by code into a folder: truncated, damaged,
//! encrypted, nested and oversized PDFs, zip bombs as DOCX, text in broken encodings, NUL bytes,
//! symlink loops, unreadable files and odd file names, with good files mixed in. Each file says
//! what a library should make of it ([`Expect`]).
//!
//! Std and flate2 only (every PDF and zip is laid out by hand), so the tests of other crates can
//! use it with `#[path = "../../selfrag-index/tests/corpus/mod.rs"] mod corpus;`.

#![allow(dead_code)] // each test binary uses part of it

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};

/// What indexing a file must end in.
#[derive(Debug, Clone, PartialEq)]
pub enum Expect {
    /// Indexed, and a search for this phrase finds it.
    Indexed(String),
    /// A per-file error that names the file.
    Refused,
    /// Either, depending on how much a parser can recover (a PDF cut after its last page, a
    /// file that root can read although its mode says it cannot).
    Either,
    /// Not a file a folder walk hands over (symlink loops, dangling links, FIFOs).
    NotWalked,
}

/// One file of the corpus.
#[derive(Debug, Clone)]
pub struct HostileFile {
    pub path: PathBuf,
    /// The group it belongs to, for the report ("truncated pdf", "zip bomb docx", ...).
    pub kind: &'static str,
    pub expect: Expect,
}

/// The files written, and what could not be set up as intended (said in the test output).
#[derive(Debug, Default)]
pub struct Corpus {
    pub files: Vec<HostileFile>,
    pub notes: Vec<String>,
}

impl Corpus {
    fn add(&mut self, path: PathBuf, kind: &'static str, expect: Expect) {
        self.files.push(HostileFile { path, kind, expect });
    }

    fn write(
        &mut self,
        dir: &Path,
        name: impl Into<OsString>,
        bytes: &[u8],
        kind: &'static str,
        expect: Expect,
    ) -> std::io::Result<PathBuf> {
        let path = dir.join(name.into());
        std::fs::write(&path, bytes)?;
        self.add(path.clone(), kind, expect);
        Ok(path)
    }

    /// Files per kind, in the order the kinds were first written.
    pub fn counts(&self) -> Vec<(&'static str, usize)> {
        let mut counts: Vec<(&'static str, usize)> = Vec::new();
        for f in &self.files {
            match counts.iter_mut().find(|(k, _)| *k == f.kind) {
                Some((_, n)) => *n += 1,
                None => counts.push((f.kind, 1)),
            }
        }
        counts
    }
}

/// A phrase of made-up words no other file contains, so a search for it has one right answer.
pub fn phrase(n: usize) -> String {
    const SYLLABLES: [&str; 16] = [
        "zor", "qua", "vel", "mip", "tras", "dun", "kex", "bol", "fyr", "gal", "hov", "jin", "lup",
        "nax", "pim", "wex",
    ];
    let word = |k: usize| -> String {
        let mut w = String::new();
        let mut x = k * 7 + 3;
        for _ in 0..3 {
            w.push_str(SYLLABLES[x % 16]);
            x /= 16;
            x += 5;
        }
        w
    };
    format!("{} {} {}", word(n * 3), word(n * 3 + 1), word(n * 3 + 2))
}

/// Writes the corpus into `dir` (which must exist and be empty).
pub fn write_corpus(dir: &Path) -> std::io::Result<Corpus> {
    let mut c = Corpus::default();
    let mut next_phrase = 0;
    let mut fresh = || {
        next_phrase += 1;
        phrase(next_phrase)
    };

    // Good files, one per format.
    for ext in ["txt", "md", "html", "docx", "pdf"] {
        let p = fresh();
        let bytes = match ext {
            "html" => format!(
                "<html><head><title>Good</title></head><body><p>A good page: {p}.</p></body></html>"
            )
            .into_bytes(),
            "docx" => docx(&format!("A good document: {p}.")),
            "pdf" => pdf(&[&format!("A good paper: {p}.")]),
            _ => format!("# Good notes\nA good file: {p}.\n").into_bytes(),
        };
        c.write(
            dir,
            format!("good.{ext}"),
            &bytes,
            "good file",
            Expect::Indexed(p),
        )?;
    }

    // Truncated PDFs: a three-page paper cut at 72 points, from the header to one byte short.
    let p = fresh();
    let whole = pdf(&[
        &format!("The first page says {p}."),
        "The second page.",
        "The third page ends the paper.",
    ]);
    c.write(dir, "whole.pdf", &whole, "good file", Expect::Indexed(p))?;
    let cuts = 72;
    for i in 0..cuts {
        let at = 1 + (whole.len() - 2) * i / (cuts - 1);
        c.write(
            dir,
            format!("truncated-{at:05}.pdf"),
            &whole[..at],
            "truncated pdf",
            Expect::Either,
        )?;
    }

    // Broken cross-reference tables.
    let good = pdf(&["Text behind a damaged cross-reference table."]);
    let startxref = rfind(&good, b"startxref").unwrap_or(good.len());
    let xref = rfind(&good, b"xref\n").unwrap_or(0);
    let trailer = rfind(&good, b"trailer").unwrap_or(good.len());
    let head_end = good.iter().position(|&b| b == b'\n').map_or(0, |i| i + 1);
    let with_tail = |tail: &str| [&good[..startxref], tail.as_bytes()].concat();
    let variants: Vec<(&str, Vec<u8>)> = vec![
        ("past-end", with_tail("startxref\n99999999\n%%EOF\n")),
        ("zero", with_tail("startxref\n0\n%%EOF\n")),
        ("negative", with_tail("startxref\n-42\n%%EOF\n")),
        ("not-a-number", with_tail("startxref\nxyz\n%%EOF\n")),
        (
            "huge-number",
            with_tail("startxref\n99999999999999999999999\n%%EOF\n"),
        ),
        ("no-startxref", good[..startxref].to_vec()),
        (
            "shifted",
            [
                &good[..head_end],
                b"% inserted by a broken tool\n",
                &good[head_end..],
            ]
            .concat(),
        ),
        (
            "garbage-entries",
            [
                &good[..xref],
                b"xref\n0 9\nzzzzzzzzzz zzzzz z \n".as_slice(),
                &good[trailer..],
            ]
            .concat(),
        ),
        (
            "huge-count",
            [
                &good[..xref],
                b"xref\n0 2147483647\n0000000000 65535 f \n".as_slice(),
                &good[trailer..],
            ]
            .concat(),
        ),
        (
            // The trailer's /Prev points back at the same table: an endless chain of updates.
            "prev-loop",
            {
                let mut b = good[..trailer].to_vec();
                b.extend(
                    format!(
                        "trailer\n<< /Size 6 /Root 1 0 R /Prev {xref} >>\nstartxref\n{xref}\n%%EOF\n"
                    )
                    .as_bytes(),
                );
                b
            },
        ),
        ("no-root", {
            let mut b = good[..trailer].to_vec();
            b.extend(format!("trailer\n<< /Size 6 >>\nstartxref\n{xref}\n%%EOF\n").as_bytes());
            b
        }),
        (
            "no-xref-at-all",
            [&good[..xref], b"%%EOF\n".as_slice()].concat(),
        ),
    ];
    for (name, bytes) in variants {
        c.write(
            dir,
            format!("xref-{name}.pdf"),
            &bytes,
            "broken xref pdf",
            Expect::Either,
        )?;
    }

    // Encrypted PDFs whose password nobody gave us (the security handler cannot authenticate
    // the empty password), and broken encryption dictionaries.
    let page = page_objects("Secret text that must not be read without the password.");
    let hex32 = |seed: u8| -> String {
        (0..32)
            .map(|i| format!("{:02x}", seed.wrapping_mul(31).wrapping_add(i * 7)))
            .collect()
    };
    let encryptions = [
        (
            "rc4-128",
            format!(
                "<< /Filter /Standard /V 2 /R 3 /Length 128 /O <{}> /U <{}> /P -4 >>",
                hex32(1),
                hex32(2)
            ),
        ),
        (
            "rc4-40",
            format!(
                "<< /Filter /Standard /V 1 /R 2 /O <{}> /U <{}> /P -44 >>",
                hex32(3),
                hex32(4)
            ),
        ),
        (
            "aes-256",
            format!(
                "<< /Filter /Standard /V 5 /R 6 /Length 256 /CF << /StdCF << /CFM /AESV3 /AuthEvent /DocOpen /Length 32 >> >> /StmF /StdCF /StrF /StdCF /O <{0}{0}{1}> /U <{1}{1}{0}> /OE <{0}> /UE <{1}> /Perms <{2}> /P -4 >>",
                hex32(5),
                hex32(6),
                &hex32(7)[..32]
            ),
        ),
        (
            "unknown-handler",
            "<< /Filter /AcmeDRM /V 4 /R 4 >>".to_string(),
        ),
        ("not-a-dictionary", "(nonsense)".to_string()),
    ];
    for (name, dict) in encryptions {
        let mut objects = page.clone();
        objects.push(dict.into_bytes());
        let n = objects.len();
        let trailer = format!("/Encrypt {n} 0 R /ID [<{0}> <{0}>]", hex32(9));
        c.write(
            dir,
            format!("encrypted-{name}.pdf"),
            &assemble(&objects, &trailer),
            "encrypted pdf",
            Expect::Refused,
        )?;
    }

    // Empty files of every supported extension.
    for ext in [
        "pdf", "txt", "text", "md", "markdown", "html", "htm", "xhtml", "docx",
    ] {
        c.write(
            dir,
            format!("empty.{ext}"),
            b"",
            "0-byte file",
            Expect::Refused,
        )?;
    }

    // Sparse 1 GiB files: set_len, never a gigabyte written.
    for ext in ["txt", "pdf", "docx", "md"] {
        let path = dir.join(format!("sparse-1gib.{ext}"));
        std::fs::File::create(&path)?.set_len(1 << 30)?;
        c.add(path, "sparse 1 GiB file", Expect::Refused);
    }

    // Deeply nested PDF objects.
    let deep = |open: &str, close: &str, depth: usize| {
        format!("{}{}", open.repeat(depth), close.repeat(depth))
    };
    let nested: Vec<(&str, Vec<Vec<u8>>)> = vec![
        (
            "array-in-page-100k",
            with_page_entry(&format!("/Deep {}", deep("[", "]", 100_000))),
        ),
        (
            "dict-in-page-50k",
            with_page_entry(&format!("/Deep {}", deep("<< /A ", ">>", 50_000))),
        ),
        (
            "array-in-content-200k",
            content_objects(
                format!("BT /F1 12 Tf 72 720 Td {} Tj ET", deep("[", "]", 200_000)).as_bytes(),
            ),
        ),
        (
            "dict-in-content-50k",
            content_objects(
                format!(
                    "BT /F1 12 Tf 72 720 Td {} Tj ET",
                    deep("<< /A ", ">>", 50_000)
                )
                .as_bytes(),
            ),
        ),
        (
            "q-nesting-100k",
            content_objects(
                format!(
                    "{} BT /F1 12 Tf 72 720 Td (deep) Tj ET {}",
                    "q ".repeat(100_000),
                    "Q ".repeat(100_000)
                )
                .as_bytes(),
            ),
        ),
        ("pages-cycle", pages_cycle()),
        ("xobject-draws-itself", self_drawing_xobject()),
        ("reference-cycle", reference_cycle()),
    ];
    for (name, objects) in nested {
        c.write(
            dir,
            format!("nested-{name}.pdf"),
            &assemble(&objects, ""),
            "deeply nested pdf",
            Expect::Either,
        )?;
    }

    // Huge, negative and nonsense page sizes and coordinates: the text is still there.
    let boxes = [
        (
            "1e30",
            "[0 0 1000000000000000000000000000000.0 1000000000000000000000000000000.0]",
            "72 720 Td",
        ),
        // PDF numbers have no exponent: this box is a syntax error, not a size.
        ("exponent", "[0 0 1e30 1e30]", "72 720 Td"),
        ("14400-inches", "[0 0 1036800 1036800]", "72 720 Td"),
        ("max-int", "[0 0 2147483647 2147483647]", "72 720 Td"),
        ("negative", "[0 0 -595 -842]", "72 720 Td"),
        ("names", "[/a /b /c /d]", "72 720 Td"),
        ("empty", "[]", "72 720 Td"),
        (
            "far-text",
            "[0 0 595 842]",
            "1000000000.0 0 0 1000000000.0 1000000000.0 1000000000.0 Tm",
        ),
        (
            "nan-like",
            "[0 0 595 842]",
            "99999999999999999999999999999 -99999999999999999999 Td",
        ),
    ];
    for (name, media_box, position) in boxes {
        let p = fresh();
        let objects = page_objects_with(&format!("Huge page text {p}."), media_box, position, "");
        let expect = if ["names", "empty", "exponent", "nan-like"].contains(&name) {
            Expect::Either
        } else {
            Expect::Indexed(p)
        };
        c.write(
            dir,
            format!("huge-page-{name}.pdf"),
            &assemble(&objects, ""),
            "huge page pdf",
            expect,
        )?;
    }
    let p = fresh();
    let mut objects = page_objects(&format!("A page tree that claims two billion pages {p}."));
    objects[1] = b"<< /Type /Pages /Kids [4 0 R] /Count 2147483647 >>".to_vec();
    c.write(
        dir,
        "huge-page-count.pdf",
        &assemble(&objects, ""),
        "huge page pdf",
        Expect::Indexed(p),
    )?;

    // Text that is not valid UTF-8.
    let p = fresh();
    c.write(
        dir,
        "stray-bytes.txt",
        &[
            format!("Mostly fine text {p} with ").as_bytes(),
            b"\xff\xfe\xc3 stray bytes.\n",
        ]
        .concat(),
        "invalid utf-8",
        Expect::Indexed(p),
    )?;
    let p = fresh();
    c.write(
        dir,
        "cut-multibyte.md",
        &[
            format!("# Notes\nCut in the middle of a character {p} caf").as_bytes(),
            b"\xc3",
        ]
        .concat(),
        "invalid utf-8",
        Expect::Indexed(p),
    )?;
    let p = fresh();
    c.write(
        dir,
        "overlong.txt",
        &[
            format!("Overlong slash {p} ").as_bytes(),
            b"\xc0\xaf\xe0\x80\xaf and surrogates \xed\xa0\x80.\n",
        ]
        .concat(),
        "invalid utf-8",
        Expect::Indexed(p),
    )?;
    let p = fresh();
    c.write(
        dir,
        "latin1.txt",
        &[
            b"Caf".as_slice(),
            b"\xe9 na\xefve r\xe9sum\xe9 ",
            p.as_bytes(),
            b" \xe0 la carte.\n",
        ]
        .concat(),
        "invalid utf-8",
        Expect::Indexed(p),
    )?;
    let p = fresh();
    c.write(
        dir,
        "latin1.html",
        &[
            b"<html><body><p>Caf\xe9 ".as_slice(),
            p.as_bytes(),
            b".</p></body></html>",
        ]
        .concat(),
        "invalid utf-8",
        Expect::Indexed(p),
    )?;
    for i in 0..6 {
        let ext = ["txt", "md", "html", "text", "markdown", "htm"][i];
        c.write(
            dir,
            format!("random-bytes-{i}.{ext}"),
            &noise(4096 + i * 1000, i as u64 + 1),
            "invalid utf-8",
            Expect::Refused,
        )?;
    }

    // UTF-16, with and without a byte-order mark, and broken.
    let utf16 = |text: &str, big_endian: bool, bom: bool| -> Vec<u8> {
        let mut out = Vec::new();
        let units: Vec<u16> = (if bom { "\u{feff}" } else { "" })
            .encode_utf16()
            .chain(text.encode_utf16())
            .collect();
        for u in units {
            out.extend(if big_endian {
                u.to_be_bytes()
            } else {
                u.to_le_bytes()
            });
        }
        out
    };
    for (name, be, bom) in [
        ("le-bom", false, true),
        ("be-bom", true, true),
        ("le-no-bom", false, false),
        ("be-no-bom", true, false),
    ] {
        let p = fresh();
        let text = format!("Notes saved by Windows Notepad as UTF-16: {p}.\r\nSecond line.\r\n");
        c.write(
            dir,
            format!("utf16-{name}.txt"),
            &utf16(&text, be, bom),
            "utf-16 text",
            Expect::Indexed(p),
        )?;
    }
    let p = fresh();
    let mut lone = utf16(&format!("Lone surrogates around {p} "), false, true);
    lone.extend([0x00, 0xD8, 0x41, 0x00, 0x00, 0xDC]);
    lone.extend(utf16(" end.", false, false));
    c.write(
        dir,
        "utf16-lone-surrogates.txt",
        &lone,
        "utf-16 text",
        Expect::Indexed(p),
    )?;
    let p = fresh();
    let mut odd = utf16(&format!("Odd number of bytes {p} "), false, true);
    odd.push(0x41);
    c.write(
        dir,
        "utf16-odd-length.md",
        &odd,
        "utf-16 text",
        Expect::Indexed(p),
    )?;
    let p = fresh();
    c.write(
        dir,
        "utf16-page.html",
        &utf16(
            &format!("<html><body><p>A page saved as UTF-16: {p}.</p></body></html>"),
            false,
            true,
        ),
        "utf-16 text",
        Expect::Indexed(p),
    )?;

    // NUL bytes.
    c.write(
        dir,
        "all-nul.txt",
        &[0u8; 4096],
        "nul bytes",
        Expect::Refused,
    )?;
    c.write(dir, "all-nul.md", &[0u8; 100], "nul bytes", Expect::Refused)?;
    let p = fresh();
    c.write(
        dir,
        "nul-inside.txt",
        &[
            format!("Before the NUL {p}").as_bytes(),
            b"\0\0\0",
            b" after the NUL.\n",
        ]
        .concat(),
        "nul bytes",
        Expect::Indexed(p),
    )?;
    let p = fresh();
    c.write(
        dir,
        "nul-between-words.md",
        format!("# NUL\nword\0word {p}\0.\n").as_bytes(),
        "nul bytes",
        Expect::Indexed(p),
    )?;
    let p = fresh();
    c.write(
        dir,
        "nul-in.html",
        format!("<html><body><p>NUL\0 in a page {p}.</p>\0</body></html>").as_bytes(),
        "nul bytes",
        Expect::Indexed(p),
    )?;
    let p = fresh();
    c.write(
        dir,
        "nul-in-string.pdf",
        &pdf(&[&format!("NUL \0 inside a PDF string {p}.")]),
        "nul bytes",
        Expect::Indexed(p),
    )?;
    let p = fresh();
    c.write(
        dir,
        "nul-in.docx",
        &docx(&format!("NUL \0 inside a DOCX {p}.")),
        "nul bytes",
        Expect::Either,
    )?;

    // Symbolic links: loops, dangling, and to things that are not files.
    #[cfg(unix)]
    {
        use std::os::unix::fs::symlink;
        let links: [(&str, PathBuf); 6] = [
            ("loop-a.txt", dir.join("loop-b.txt")),
            ("loop-b.txt", dir.join("loop-a.txt")),
            ("self-loop.md", dir.join("self-loop.md")),
            ("dangling.pdf", dir.join("no-such-file.pdf")),
            ("dev-zero.txt", PathBuf::from("/dev/zero")),
            ("parent-folder", dir.to_path_buf()),
        ];
        for (name, target) in links {
            let path = dir.join(name);
            symlink(&target, &path)?;
            c.add(path, "symlink loop or dangling", Expect::NotWalked);
        }
        let p = fresh();
        let target = c.write(
            dir,
            "link-target.txt",
            format!("Reached through a link: {p}.\n").as_bytes(),
            "good file",
            Expect::Indexed(p.clone()),
        )?;
        let path = dir.join("link-to-file.txt");
        symlink(&target, &path)?;
        // Same content as its target: reused, and found under both paths.
        c.add(path, "symlink loop or dangling", Expect::Indexed(p));
        let fifo = dir.join("pipe.txt");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|s| s.success()) {
            // Walked (it is not a folder or a link), refused as not a regular file.
            c.add(fifo, "fifo", Expect::Refused);
        } else {
            c.notes
                .push("mkfifo is missing: no FIFO in the corpus".into());
        }
    }

    // Unreadable files and folders. Root reads them anyway: then they are expected indexed,
    // and the report says the permission case was not exercised.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let p = fresh();
        let locked = c.write(
            dir,
            "unreadable.txt",
            format!("Nobody may read this {p}.\n").as_bytes(),
            "unreadable",
            Expect::Refused,
        )?;
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000))?;
        let sub = dir.join("locked-folder");
        std::fs::create_dir(&sub)?;
        let q = fresh();
        std::fs::write(
            sub.join("inside.txt"),
            format!("Inside a locked folder {q}.\n"),
        )?;
        std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o000))?;
        if std::fs::read(&locked).is_ok() {
            c.notes.push("running as root: mode 000 does not stop root, so the unreadable file and folder are readable here and expected indexed; the permission error itself is not exercised".into());
            if let Some(f) = c.files.last_mut() {
                f.expect = Expect::Indexed(p);
            }
            c.add(sub.join("inside.txt"), "unreadable", Expect::Indexed(q));
        } else {
            // The walk cannot list the folder: the folder itself gets the error.
            c.add(sub, "unreadable", Expect::Refused);
        }
    }

    // File names: newlines, bytes that are not UTF-8, control characters, shell syntax, a
    // leading dash, right-to-left override, the longest name allowed.
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStringExt;
        let names: Vec<OsString> = vec![
            "line\nbreak.txt".into(),
            "\nleading newline.md".into(),
            "tab\tand\rreturn.txt".into(),
            OsString::from_vec(b"latin1-caf\xe9.txt".to_vec()),
            OsString::from_vec(b"bytes-\xff\xfe-\x80.md".to_vec()),
            "-rf --help.txt".into(),
            "$(touch pwned) `id`; rm -rf ~.txt".into(),
            "quote\"s and 'apostrophes'.md".into(),
            "right-to-left-\u{202e}txt.exe.txt".into(),
            format!("{}.txt", "n".repeat(251)).into(),
            "bell\u{7}escape\u{1b}[31m.txt".into(),
        ];
        for name in names {
            let p = fresh();
            c.write(
                dir,
                name,
                format!("A file with an odd name says {p}.\n").as_bytes(),
                "odd file name",
                Expect::Indexed(p),
            )?;
        }
    }

    // PDF streams that inflate past the limit behind a chain of filters (the check once read
    // only the first), or in an object stream (which lopdf unpacks as it loads the file).
    let bomb = zlib_bomb(300 << 20);
    for (name, filters, content) in [
        (
            "bomb-ascii85-flate.pdf",
            "[/ASCII85Decode /FlateDecode]",
            ascii85(&bomb),
        ),
        (
            "bomb-hex-flate.pdf",
            "[/ASCIIHexDecode /FlateDecode]",
            ascii_hex(&bomb),
        ),
        (
            "bomb-flate-flate.pdf",
            "[/FlateDecode /FlateDecode]",
            zlib(&bomb),
        ),
    ] {
        c.write(
            dir,
            name,
            &pdf_with_filtered_content(filters, &content),
            "pdf filter bomb",
            Expect::Refused,
        )?;
    }
    c.write(
        dir,
        "bomb-object-stream.pdf",
        &object_stream_bomb_pdf("A page beside an object stream.", 300 << 20),
        "pdf filter bomb",
        Expect::Refused,
    )?;

    // Zip bombs and broken zips as DOCX.
    let xml_head = r#"<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>"#;
    let bomb = |uncompressed: u64, head: &str| -> Vec<u8> {
        let packed = deflate_bomb(head.as_bytes(), uncompressed);
        zip(&[ZipEntry::raw(
            "word/document.xml",
            8,
            packed,
            uncompressed.min(u32::MAX as u64) as u32,
        )])
    };
    c.write(
        dir,
        "bomb-1gib-text.docx",
        &bomb(1 << 30, xml_head),
        "zip bomb docx",
        Expect::Refused,
    )?;
    c.write(
        dir,
        "bomb-4gib-zeros.docx",
        &bomb(4 << 30, ""),
        "zip bomb docx",
        Expect::Refused,
    )?;
    c.write(
        dir,
        "bomb-300mib-text.docx",
        &bomb(300 << 20, xml_head),
        "zip bomb docx",
        Expect::Refused,
    )?;
    // Thousands of central-directory entries over one local file (overlapping entries).
    c.write(
        dir,
        "bomb-overlapping.docx",
        &overlapping_zip(&docx_xml("Overlapping entries."), 20_000),
        "zip bomb docx",
        Expect::Either,
    )?;
    // word/document.xml is itself a zip.
    c.write(
        dir,
        "zip-in-zip.docx",
        &zip(&[ZipEntry::stored("word/document.xml", docx(&fresh()))]),
        "zip bomb docx",
        Expect::Refused,
    )?;
    c.write(
        dir,
        "bzip2-part.docx",
        &zip(&[ZipEntry::raw(
            "word/document.xml",
            12,
            b"BZh91AY&SY".to_vec(),
            1000,
        )]),
        "zip bomb docx",
        Expect::Refused,
    )?;
    c.write(
        dir,
        "bad-deflate.docx",
        &zip(&[ZipEntry::raw(
            "word/document.xml",
            8,
            noise(2000, 99),
            100_000,
        )]),
        "zip bomb docx",
        Expect::Refused,
    )?;
    c.write(
        dir,
        "no-document-part.docx",
        &zip(&[ZipEntry::stored("word/other.xml", b"<x/>".to_vec())]),
        "zip bomb docx",
        Expect::Refused,
    )?;
    // 100,000 nested elements inside a paragraph.
    let p = fresh();
    let deep_xml = format!(
        "{xml_head}{p}</w:t></w:r>{}{}</w:p></w:body></w:document>",
        "<w:x>".repeat(100_000),
        "</w:x>".repeat(100_000)
    );
    c.write(
        dir,
        "deep-xml.docx",
        &zip(&[ZipEntry::deflated("word/document.xml", deep_xml.as_bytes())]),
        "zip bomb docx",
        Expect::Indexed(p),
    )?;
    // Truncated DOCX.
    let p = fresh();
    let whole = docx(&format!("A whole document: {p}."));
    for i in 0..20 {
        let at = 1 + (whole.len() - 2) * i / 19;
        c.write(
            dir,
            format!("truncated-{at:05}.docx"),
            &whole[..at],
            "truncated docx",
            Expect::Refused,
        )?;
    }

    // Deeply nested HTML, a very long line, and a PDF named .txt.
    let p = fresh();
    let html = format!(
        "<html><body>{}<p>Deep inside {p}.</p>{}</body></html>",
        "<div>".repeat(100_000),
        "</div>".repeat(100_000)
    );
    c.write(
        dir,
        "deep.html",
        html.as_bytes(),
        "other hostile",
        Expect::Either,
    )?;
    let p = fresh();
    c.write(
        dir,
        "one-long-line.txt",
        format!("{} {p} {}", "x".repeat(2 << 20), "y".repeat(2 << 20)).as_bytes(),
        "other hostile",
        Expect::Indexed(p),
    )?;
    c.write(
        dir,
        "pdf-named.txt",
        &pdf(&["Binary PDF bytes in a text file."]),
        "other hostile",
        Expect::Either,
    )?;
    let p = fresh();
    c.write(
        dir,
        "text-named.pdf",
        format!("Just text {p} in a file named .pdf").as_bytes(),
        "other hostile",
        Expect::Refused,
    )?;
    let _ = p;
    Ok(c)
}

fn rfind(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).rposition(|w| w == needle)
}

/// Deterministic noise (xorshift), mostly not UTF-8.
pub fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

// ---- PDF, by hand ---------------------------------------------------------------------------

/// A PDF with one page per entry, each a line of Helvetica text.
pub fn pdf(pages: &[&str]) -> Vec<u8> {
    // 1 catalog, 2 page tree, 3 font, then a page and its content per entry.
    let mut objects: Vec<Vec<u8>> = vec![
        b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
        Vec::new(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"
            .to_vec(),
    ];
    let mut kids = Vec::new();
    for text in pages {
        let page_id = objects.len() + 1;
        kids.push(format!("{page_id} 0 R"));
        objects.push(
            format!(
                "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font << /F1 3 0 R >> >> /Contents {} 0 R >>",
                page_id + 1
            )
            .into_bytes(),
        );
        objects.push(stream(&text_content(text, "72 720 Td")));
    }
    objects[1] = format!(
        "<< /Type /Pages /Kids [{}] /Count {} >>",
        kids.join(" "),
        pages.len()
    )
    .into_bytes();
    assemble(&objects, "")
}

/// `BT ... Tj ET` showing `text` at `position` (a `Td` or `Tm`).
fn text_content(text: &str, position: &str) -> Vec<u8> {
    let mut escaped = Vec::new();
    for b in text.bytes() {
        if matches!(b, b'(' | b')' | b'\\') {
            escaped.push(b'\\');
        }
        escaped.push(b);
    }
    [
        format!("BT /F1 12 Tf {position} (").as_bytes(),
        &escaped,
        b") Tj ET",
    ]
    .concat()
}

fn stream(content: &[u8]) -> Vec<u8> {
    [
        format!("<< /Length {} >>\nstream\n", content.len()).as_bytes(),
        content,
        b"\nendstream",
    ]
    .concat()
}

/// The objects of a one-page PDF (catalog, pages, font, page, content), page entries and
/// position open to change.
fn page_objects_with(
    text: &str,
    media_box: &str,
    position: &str,
    page_extra: &str,
) -> Vec<Vec<u8>> {
    vec![
        b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
        b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>".to_vec(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>".to_vec(),
        format!("<< /Type /Page /Parent 2 0 R /MediaBox {media_box} /Resources << /Font << /F1 3 0 R >> >> /Contents 5 0 R {page_extra} >>").into_bytes(),
        stream(&text_content(text, position)),
    ]
}

fn page_objects(text: &str) -> Vec<Vec<u8>> {
    page_objects_with(text, "[0 0 595 842]", "72 720 Td", "")
}

fn with_page_entry(entry: &str) -> Vec<Vec<u8>> {
    page_objects_with(
        "A page with a deep entry.",
        "[0 0 595 842]",
        "72 720 Td",
        entry,
    )
}

fn content_objects(content: &[u8]) -> Vec<Vec<u8>> {
    let mut objects = page_objects("");
    objects[4] = stream(content);
    objects
}

/// A page tree whose only kid is the tree itself.
fn pages_cycle() -> Vec<Vec<u8>> {
    let mut objects = page_objects("Never reached.");
    objects[1] = b"<< /Type /Pages /Kids [2 0 R 4 0 R] /Count 2 >>".to_vec();
    objects
}

/// A form XObject whose content draws itself: endless recursion for a naive interpreter.
fn self_drawing_xobject() -> Vec<Vec<u8>> {
    let mut objects = page_objects("");
    objects[3] = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font << /F1 3 0 R >> /XObject << /X1 6 0 R >> >> /Contents 5 0 R >>".to_vec();
    objects[4] = stream(b"BT /F1 12 Tf 72 720 Td (drawn once) Tj ET /X1 Do");
    let form = b"BT /F1 12 Tf 72 700 Td (again) Tj ET /X1 Do";
    objects.push([
        format!("<< /Type /XObject /Subtype /Form /BBox [0 0 595 842] /Resources << /Font << /F1 3 0 R >> /XObject << /X1 6 0 R >> >> /Length {} >>\nstream\n", form.len()).as_bytes(),
        form,
        b"\nendstream",
    ].concat());
    objects
}

/// The page's contents are a reference to a reference to the first.
fn reference_cycle() -> Vec<Vec<u8>> {
    let mut objects = page_objects("");
    objects[3] = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font << /F1 3 0 R >> >> /Contents 6 0 R >>".to_vec();
    objects.push(b"7 0 R".to_vec());
    objects.push(b"6 0 R".to_vec());
    objects
}

/// Objects 1..=n, a classic cross-reference table and a trailer naming object 1 as the root.
fn assemble(objects: &[Vec<u8>], trailer_extra: &str) -> Vec<u8> {
    let mut out = b"%PDF-1.5\n%\xe2\xe3\xcf\xd3\n".to_vec();
    let mut offsets = Vec::new();
    for (i, body) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend(format!("{} 0 obj\n", i + 1).as_bytes());
        out.extend(body);
        out.extend(b"\nendobj\n");
    }
    let xref = out.len();
    out.extend(format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes());
    for offset in offsets {
        out.extend(format!("{offset:010} 00000 n \n").as_bytes());
    }
    out.extend(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R {trailer_extra} >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    out
}

// ---- PDF filter bombs, by hand --------------------------------------------------------------

/// A zlib stream of `total` zero bytes, a few KiB per 100 MiB: [`deflate_bomb`] behind a zlib
/// header (no checksum: a reader stops at the last block).
pub fn zlib_bomb(total: u64) -> Vec<u8> {
    [&[0x78, 0xDA][..], &deflate_bomb(b"", total)].concat()
}

/// `bytes` deflated behind a zlib header, as a PDF's `/FlateDecode` stores them.
pub fn zlib(bytes: &[u8]) -> Vec<u8> {
    let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    let _ = zlib.write_all(bytes);
    zlib.finish().unwrap_or_default()
}

/// `bytes` as ASCII85, with its `~>` end.
pub fn ascii85(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len() * 5 / 4 + 8);
    for group in bytes.chunks(4) {
        let mut word = [0u8; 4];
        word[..group.len()].copy_from_slice(group);
        let mut value = u32::from_be_bytes(word);
        if value == 0 && group.len() == 4 {
            out.push(b'z');
            continue;
        }
        let mut digits = [0u8; 5];
        for digit in digits.iter_mut().rev() {
            *digit = b'!' + (value % 85) as u8;
            value /= 85;
        }
        out.extend_from_slice(&digits[..group.len() + 1]);
    }
    out.extend_from_slice(b"~>");
    out
}

/// `bytes` as ASCIIHex, with its `>` end.
pub fn ascii_hex(bytes: &[u8]) -> Vec<u8> {
    let mut out: Vec<u8> = bytes
        .iter()
        .flat_map(|b| format!("{b:02X}").into_bytes())
        .collect();
    out.push(b'>');
    out
}

/// A one-page PDF whose page content is `content` as stored, decoded through `filters` (the
/// value of `/Filter`, such as `[/ASCII85Decode /FlateDecode]`).
pub fn pdf_with_filtered_content(filters: &str, content: &[u8]) -> Vec<u8> {
    let mut objects = page_objects("");
    objects[4] = [
        format!(
            "<< /Length {} /Filter {filters} >>\nstream\n",
            content.len()
        )
        .as_bytes(),
        content,
        b"\nendstream",
    ]
    .concat();
    assemble(&objects, "")
}

/// A one-page PDF saying `text`, with one more object: an object stream (`/Type /ObjStm`)
/// that inflates to `total` zero bytes. lopdf unpacks object streams while it loads a file,
/// before any check of the loaded document could see them.
pub fn object_stream_bomb_pdf(text: &str, total: u64) -> Vec<u8> {
    let mut objects = page_objects(text);
    let packed = zlib_bomb(total);
    objects.push(
        [
            format!(
                "<< /Type /ObjStm /N 1 /First 4 /Filter /FlateDecode /Length {} >>\nstream\n",
                packed.len()
            )
            .as_bytes(),
            &packed,
            b"\nendstream",
        ]
        .concat(),
    );
    assemble(&objects, "")
}

/// A one-page PDF saying `text` whose `/Info` `/Title` is `title` and whose page label has the
/// prefix `prefix` (style decimal, so page 1 is labelled `{prefix}1`); both are written as
/// PDF strings, with `(`, `)` and `\\` escaped.
pub fn pdf_with_title_and_label(text: &str, title: &str, prefix: &str) -> Vec<u8> {
    let string = |s: &str| {
        let mut out = Vec::with_capacity(s.len() + 2);
        out.push(b'(');
        for b in s.bytes() {
            if matches!(b, b'(' | b')' | b'\\') {
                out.push(b'\\');
            }
            out.push(b);
        }
        out.push(b')');
        out
    };
    let mut objects = page_objects(text);
    objects[0] = [
        &b"<< /Type /Catalog /Pages 2 0 R /PageLabels << /Nums [0 << /S /D /P "[..],
        &string(prefix),
        b" >>] >> >>",
    ]
    .concat();
    objects.push([&b"<< /Title "[..], &string(title), b" >>"].concat());
    let info = objects.len();
    assemble(&objects, &format!("/Info {info} 0 R"))
}

// ---- DOCX and zip, by hand ------------------------------------------------------------------

fn docx_xml(text: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>{text}</w:t></w:r></w:p></w:body></w:document>"#
    )
}

/// A one-paragraph DOCX.
pub fn docx(text: &str) -> Vec<u8> {
    zip(&[
        ZipEntry::stored(
            "[Content_Types].xml",
            br#"<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>"#.to_vec(),
        ),
        ZipEntry::deflated("word/document.xml", docx_xml(text).as_bytes()),
    ])
}

/// One member of a zip archive, its data already compressed as `method` says.
pub struct ZipEntry {
    name: String,
    method: u16,
    data: Vec<u8>,
    size: u32,
    crc: u32,
}

impl ZipEntry {
    fn stored(name: &str, data: Vec<u8>) -> Self {
        let mut crc = flate2::Crc::new();
        crc.update(&data);
        Self {
            name: name.into(),
            method: 0,
            size: data.len() as u32,
            crc: crc.sum(),
            data,
        }
    }

    fn deflated(name: &str, data: &[u8]) -> Self {
        let mut deflate = flate2::write::DeflateEncoder::new(Vec::new(), Default::default());
        let _ = deflate.write_all(data);
        let packed = deflate.finish().unwrap_or_default();
        let mut crc = flate2::Crc::new();
        crc.update(data);
        Self {
            name: name.into(),
            method: 8,
            size: data.len() as u32,
            crc: crc.sum(),
            data: packed,
        }
    }

    /// Data as given, declared `size` bytes uncompressed, CRC left 0 (bombs are not checked).
    fn raw(name: &str, method: u16, data: Vec<u8>, size: u32) -> Self {
        Self {
            name: name.into(),
            method,
            data,
            size,
            crc: 0,
        }
    }
}

/// A zip archive as APPNOTE.TXT lays it out (no zip64, no data descriptors).
pub fn zip(entries: &[ZipEntry]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for e in entries {
        let offset = out.len() as u32;
        let common = header_common(e.method, e.crc, e.data.len() as u32, e.size, e.name.len());
        out.extend(0x0403_4b50u32.to_le_bytes());
        out.extend(&common);
        out.extend(e.name.as_bytes());
        out.extend(&e.data);
        central.extend(central_entry(&common, offset, &e.name));
    }
    finish_zip(out, central, entries.len())
}

/// Version, flags, method, time, date, CRC, sizes, name length, extra length.
fn header_common(method: u16, crc: u32, packed: u32, size: u32, name_len: usize) -> Vec<u8> {
    [
        &20u16.to_le_bytes()[..],
        &0u16.to_le_bytes(),
        &method.to_le_bytes(),
        &0u16.to_le_bytes(),
        &0x21u16.to_le_bytes(),
        &crc.to_le_bytes(),
        &packed.to_le_bytes(),
        &size.to_le_bytes(),
        &(name_len as u16).to_le_bytes(),
        &0u16.to_le_bytes(),
    ]
    .concat()
}

fn central_entry(common: &[u8], offset: u32, name: &str) -> Vec<u8> {
    let mut c = 0x0201_4b50u32.to_le_bytes().to_vec();
    c.extend(20u16.to_le_bytes());
    c.extend(common);
    // Comment length, disk, internal and external attributes, local header offset.
    c.extend([0u8; 10]);
    c.extend(offset.to_le_bytes());
    c.extend(name.as_bytes());
    c
}

fn finish_zip(mut out: Vec<u8>, central: Vec<u8>, count: usize) -> Vec<u8> {
    let (at, len) = (out.len() as u32, central.len() as u32);
    out.extend(central);
    out.extend(0x0605_4b50u32.to_le_bytes());
    out.extend([0u8; 4]);
    let count = count.min(u16::MAX as usize) as u16;
    out.extend(count.to_le_bytes());
    out.extend(count.to_le_bytes());
    out.extend(len.to_le_bytes());
    out.extend(at.to_le_bytes());
    out.extend(0u16.to_le_bytes());
    out
}

/// `count` central-directory entries (word/document.xml first) that all point at one local file.
fn overlapping_zip(xml: &str, count: usize) -> Vec<u8> {
    let entry = ZipEntry::deflated("word/document.xml", xml.as_bytes());
    let common = header_common(
        8,
        entry.crc,
        entry.data.len() as u32,
        entry.size,
        entry.name.len(),
    );
    let mut out = 0x0403_4b50u32.to_le_bytes().to_vec();
    out.extend(&common);
    out.extend(entry.name.as_bytes());
    out.extend(&entry.data);
    let mut central = central_entry(&common, 0, &entry.name);
    for i in 1..count.min(u16::MAX as usize) {
        let name = format!("word/media/{i:05}.xml");
        let common = header_common(
            8,
            entry.crc,
            entry.data.len() as u32,
            entry.size,
            name.len(),
        );
        central.extend(central_entry(&common, 0, &name));
    }
    finish_zip(out, central, count)
}

/// A raw deflate stream of `head` followed by zero bytes up to `total` bytes, a few KiB per
/// 100 MiB: one block of 1 MiB of zeros, compressed once and repeated (a block that ends on a
/// sync flush refers to nothing before it, so copies of it can follow each other).
fn deflate_bomb(head: &[u8], total: u64) -> Vec<u8> {
    use flate2::{Compress, Compression, FlushCompress};
    let block = |data: &[u8]| -> Vec<u8> {
        let mut c = Compress::new(Compression::best(), false);
        // Room for the worst case, so one call takes all the input and flushes all the output.
        let mut out = Vec::with_capacity(data.len() + 1024);
        let _ = c.compress_vec(data, &mut out, FlushCompress::Sync);
        out
    };
    let chunk = 1usize << 20;
    let mut out = block(head);
    let zeros = block(&vec![0u8; chunk]);
    let repeats = total.saturating_sub(head.len() as u64) / chunk as u64;
    for _ in 0..repeats {
        out.extend(&zeros);
    }
    // The final block: fixed Huffman, empty (BFINAL=1, BTYPE=01, end-of-block).
    out.extend([0x03, 0x00]);
    out
}
