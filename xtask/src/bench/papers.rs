//! The `papers` section of `cargo xtask bench`: how well the library reads real PDFs.
//!
//! The corpus is the PDFs of Debian documentation packages (`scripts/bench/pdf-corpus.txt`:
//! journal and conference class examples, two-column papers among them, theses with roman front
//! matter, manuals; pdfTeX, LuaTeX, XeTeX, Ghostscript, Distiller, Word, LibreOffice, cairo),
//! downloaded once with `apt-get download` into `~/.cache/selfrag-desktop/pdf-corpus` and
//! unpacked there, identical files kept once. `scripts/bench/pdf_corpus.py` then reads every file
//! with `selfrag debug extract --pages-to` and with pdftotext, and measures per page the word
//! recall, the order (word pairs), the passages' page attribution and the refusals against it
//! (goals: recall ≥ 0.97, attribution ≥ 0.99, no file pdftotext reads refused).

use std::collections::HashSet;
use std::fmt::Write as _;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use super::{Bench, json_number, verdict};

pub(super) fn papers(bench: &Bench) -> Result<String> {
    super::index::ensure_pdftotext()?;
    let corpus = corpus(&bench.root)?;
    let out = bench.out.join("papers");
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).context("creating target/bench/papers")?;
    let report = bench.output(
        Command::new("python3")
            .arg(bench.root.join("scripts/bench/pdf_corpus.py"))
            .arg(bench.binary("selfrag"))
            .arg(&corpus.dir)
            .arg(&out)
            .arg(bench.root.join("scripts/bench/pdf-corpus-two-column.txt")),
        "scripts/bench/pdf_corpus.py",
    )?;
    let number = |key: &str| json_number(&report, key);
    let (recall, order, attribution, attribution_text) = (
        number("word_recall")?,
        number("order")?,
        number("attribution")?,
        number("attribution_text")?,
    );
    let refused = number("refused_count")?;
    let details = std::fs::read_to_string(out.join("details.md")).unwrap_or_default();
    let mut md = String::from("## Real papers\n\n");
    let _ = writeln!(
        md,
        "{} PDFs ({} pages with text) from Debian 12's {} (`scripts/bench/pdf-corpus.txt`), read by \
         the library's extractor and chunker and by pdftotext {}; every figure is a corpus-wide sum \
         over the pages pdftotext reads text from (`scripts/bench/pdf_corpus.py` says how each is \
         counted). {} files pdftotext reads no text from are left out.\n\n\
         | | ours | goal |\n|---|---:|---|\n\
         | word recall (pdftotext's words on the page that ours has) | {recall:.4} | ≥ 0.97: {} |\n\
         | order (pdftotext's consecutive word pairs that ours has) | {order:.4} | — |\n\
         | page attribution, spacing aside ({} passages: 90% of the passage's words of 4 letters \
         or more in the claimed page's letters run together) | {attribution_text:.4} | ≥ 0.99: {} |\n\
         | page attribution, words (90% of the passage's words on the claimed page) | \
         {attribution:.4} | — |\n\
         | passages on another page than the one claimed | {:.0} | — |\n\
         | by chance: each test passing for the page half the file away, spacing aside / words | \
         {:.4} / {:.4} | — |\n\
         | files refused that pdftotext reads | {refused:.0} | 0: {} |\n\
         | words broken at a line end left, per 1,000 words | {:.2} | — |\n\
         | ligature characters left, per 1,000 words | {:.2} | — |\n\n\
         Two-column files ({} of them): word recall {:.4}, order {:.4}.\n",
        number("files")?,
        number("pages")?,
        corpus.packages.join(", "),
        pdftotext_version(),
        number("unread_by_pdftotext")?,
        verdict(recall >= 0.97),
        number("passages")?,
        verdict(attribution_text >= 0.99),
        number("on_another_page")?,
        number("chance_text")?,
        number("chance_words")?,
        verdict(refused == 0.0),
        number("broken_words_per_1000")?,
        number("ligatures_per_1000")?,
        number("two_column_files")?,
        number("two_column_word_recall")?,
        number("two_column_order")?,
    );
    md.push_str(&works_table(&report, corpus_files(&report)));
    md.push_str(&details);
    Ok(md)
}

fn corpus_files(report: &str) -> f64 {
    json_number(report, "files").unwrap_or(0.0)
}

/// The files whose work record got each field, by the source it came from (the script's
/// `works`: `"field/source": n`; a pair missing there is 0).
fn works_table(report: &str, files: f64) -> String {
    const FIELDS: [(&str, &str); 4] = [
        ("title", "title"),
        ("authors", "authors"),
        ("date", "year"),
        ("doi", "DOI"),
    ];
    const SOURCES: [(&str, &str); 3] = [
        ("fileMetadata", "the file's metadata"),
        ("identifier", "an identifier in its text"),
        ("firstPageGuess", "a guess from its first page"),
    ];
    let mut md = format!(
        "
Work records ({files:.0} files; `{}` lists each file's title, authors, year and DOI          for checking by hand):

| source |",
        "target/bench/papers/works.tsv"
    );
    for (_, name) in FIELDS {
        let _ = write!(md, " {name} |");
    }
    md.push_str(
        "
|---|",
    );
    md.push_str(&"---:|".repeat(FIELDS.len()));
    md.push('\n');
    let mut any = [0.0; 4];
    for (source, label) in SOURCES {
        let _ = write!(md, "| {label} |");
        for (i, (field, _)) in FIELDS.iter().enumerate() {
            let n = json_number(report, &format!("{field}/{source}")).unwrap_or(0.0);
            any[i] += n;
            let _ = write!(md, " {n:.0} |");
        }
        md.push('\n');
    }
    md.push_str("| any |");
    for n in any {
        let _ = write!(md, " {n:.0} ({:.0}%) |", 100.0 * n / files.max(1.0));
    }
    md.push('\n');
    md
}

/// The unpacked corpus and the packages it came from.
pub(super) struct Corpus {
    pub(super) dir: PathBuf,
    packages: Vec<String>,
}

/// Downloads and unpacks the corpus's packages once; later runs find the PDFs in place.
pub(super) fn corpus(root: &Path) -> Result<Corpus> {
    let list = root.join("scripts/bench/pdf-corpus.txt");
    let text =
        std::fs::read_to_string(&list).with_context(|| format!("reading {}", list.display()))?;
    let packages: Vec<String> = text
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim().to_string())
        .filter(|l| !l.is_empty())
        .collect();
    let base = crate::cache_dir().join("pdf-corpus");
    let dir = base.join("pdfs");
    let stamp = base.join("unpacked.txt");
    if std::fs::read_to_string(&stamp).ok().as_deref() == Some(text.as_str()) {
        return Ok(Corpus { dir, packages });
    }
    let debs = base.join("debs");
    std::fs::create_dir_all(&debs).with_context(|| format!("creating {}", debs.display()))?;
    let _ = std::fs::remove_dir_all(&dir);
    let mut seen = HashSet::new();
    for package in &packages {
        let name = package.split('=').next().unwrap_or(package);
        if find_deb(&debs, name)?.is_none() {
            // The pinned version, or the archive's current one once a point release replaced it.
            let pinned = crate::status(
                Command::new("apt-get")
                    .args(["download", "-q", package])
                    .current_dir(&debs),
                &format!("apt-get download {package}"),
            );
            if pinned.is_err() {
                crate::status(
                    Command::new("apt-get")
                        .args(["download", "-q", name])
                        .current_dir(&debs),
                    &format!("apt-get download {name}"),
                )?;
            }
        }
        let Some(deb) = find_deb(&debs, name)? else {
            bail!("apt-get download {name} left no .deb in {}", debs.display());
        };
        let unpacked = base.join("unpacked");
        let _ = std::fs::remove_dir_all(&unpacked);
        crate::status(
            Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&unpacked),
            &format!("dpkg-deb -x {}", deb.display()),
        )?;
        let target = dir.join(name);
        std::fs::create_dir_all(&target)?;
        collect_pdfs(&unpacked, &unpacked, &target, &mut seen)?;
        let _ = std::fs::remove_dir_all(&unpacked);
    }
    std::fs::write(&stamp, &text)?;
    Ok(Corpus { dir, packages })
}

/// The downloaded `.deb` of `package` in `debs`, if any.
fn find_deb(debs: &Path, package: &str) -> Result<Option<PathBuf>> {
    let prefix = format!("{package}_");
    for entry in std::fs::read_dir(debs)? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with(&prefix) && name.ends_with(".deb") {
            return Ok(Some(path));
        }
    }
    Ok(None)
}

/// Copies every PDF (and gunzipped `.pdf.gz`) under `dir` into `target`, named by its path in
/// the package, skipping content already seen.
fn collect_pdfs(top: &Path, dir: &Path, target: &Path, seen: &mut HashSet<u64>) -> Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        // A package's links point into the package or elsewhere on the system: not its PDFs.
        if entry.file_type()?.is_symlink() {
            continue;
        }
        if path.is_dir() {
            collect_pdfs(top, &path, target, seen)?;
            continue;
        }
        let name = path.to_string_lossy().to_ascii_lowercase();
        let bytes = if name.ends_with(".pdf") {
            std::fs::read(&path)?
        } else if name.ends_with(".pdf.gz") {
            let out = Command::new("gzip").arg("-dc").arg(&path).output()?;
            if !out.status.success() {
                continue;
            }
            out.stdout
        } else {
            continue;
        };
        let mut hasher = DefaultHasher::new();
        bytes.hash(&mut hasher);
        if !seen.insert(hasher.finish()) {
            continue;
        }
        let relative = path.strip_prefix(top).unwrap_or(&path).to_string_lossy();
        let flat = relative
            .trim_end_matches(".gz")
            .trim_start_matches("usr/share/doc/")
            .replace('/', "__");
        std::fs::write(target.join(flat), bytes)?;
    }
    Ok(())
}

fn pdftotext_version() -> String {
    Command::new("pdftotext")
        .arg("-v")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stderr).into_owned())
        .and_then(|v| v.lines().next().map(|l| l.trim().to_string()))
        .unwrap_or_else(|| "pdftotext".into())
}
