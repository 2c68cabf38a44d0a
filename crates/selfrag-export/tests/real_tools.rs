//! The bibliography exports as the real tools read them: Debian's `bibtex` (texlive-binaries)
//! parses every BibTeX and BibLaTeX export, in UTF-8 and in ASCII, and `pandoc --citeproc`
//! renders the pandoc Markdown export with the CSL-JSON export, and with the BibLaTeX export,
//! as its bibliography. The answer cites works by people with letters outside ASCII, by an
//! organisation, with DOIs, capitals, `{`, `%` and `&` in their titles, and a document without
//! a record. Each check can fail: a deliberately broken `.bib`, a broken CSL-JSON file and a
//! citation without a reference make the tools fail.
//!
//! BibTeX runs a style written here (`probe.bst`), so that the check needs only BibTeX itself
//! (no TeX Live style files): it defines every entry type the exports write, warns of each
//! field a standard style requires and is empty (as `plain.bst` does), and writes each entry's
//! key, type, authors' family names (by BibTeX's own name parser, `format.name$`), title as a
//! style lower-cases it (`change.case$`), year or date and DOI. BibTeX exits 0 with warnings,
//! so the test also requires none.

// A failing test should stop at the line that failed, helpers included.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Command;

use selfrag_core::Answer;
use selfrag_export::{BibEncoding, CitationStyle, ExportFormat, ExportOptions, render_with};
use selfrag_testkit::traces::TraceBuilder;
use selfrag_testkit::{Lack, skip};
use selfrag_works::{Author, FieldSource, Sourced, Work, WorkDate, WorkType};

const FULLY: Option<[f32; 3]> = Some([0.9, 0.05, 0.05]);

fn s<T>(v: T) -> Option<Sourced<T>> {
    Some(Sourced::new(v, FieldSource::ReferenceManager))
}

/// An answer citing a journal article (two people, one with a name outside ASCII, and an
/// organisation; a Better BibTeX key; a DOI), a report by an organisation, and notes without a
/// record; one sentence cites two of them; one segment holds an `@` that is not a citation.
fn answer() -> Answer {
    let article = Work {
        kind: s(WorkType::JournalArticle),
        title: s("Self-RAG at the Ålesund station: 100% {telemetry} & GPU limits".into()),
        authors: s(vec![
            Author::person("Marrow", "Ann"),
            Author::person("Ødegård", "Bjørn"),
            Author::Organisation {
                name: "World Health Organization".into(),
            },
        ]),
        date: s(WorkDate {
            year: 1998,
            month: Some(3),
            day: Some(15),
        }),
        container: s("Journal of Telemetry & Control".into()),
        volume: s("12".into()),
        issue: s("3".into()),
        pages: s("117-129".into()),
        doi: s("10.1000/tel_1998.3".into()),
        citation_key: s("marrowSelfRAG1998".into()),
        ..Work::default()
    };
    let report = Work {
        kind: s(WorkType::Report),
        title: s("Global AI & health: a {50%} review of RAG".into()),
        authors: s(vec![Author::Organisation {
            name: "World Health Organization".into(),
        }]),
        date: s(WorkDate::year(2020)),
        publisher: s("World Health Organization".into()),
        doi: s("10.5555/who.2020".into()),
        ..Work::default()
    };
    TraceBuilder::new("What does Self-RAG cost, and who measured it?")
        .passage(
            "marrow.pdf",
            "/papers/marrow.pdf",
            Some(3),
            "Self-RAG critiques itself.",
        )
        .page_label("2")
        .work(article)
        .passage("who.pdf", "/papers/who.pdf", Some(7), "It is cheap.")
        .work(report)
        .passage("Field notes", "/notes/field.md", None, "Mail @nobody.")
        .segment("Self-RAG critiques itself.", Some(1), FULLY)
        .segment("It uses reflection tokens, and", Some(2), FULLY)
        .segment("it is cheap.", Some(1), FULLY)
        .segment("The notes say to mail @nobody about it.", Some(3), FULLY)
        .build()
}

fn export(format: ExportFormat, encoding: BibEncoding, citations: CitationStyle) -> String {
    render_with(
        &answer(),
        &ExportOptions {
            format,
            citations,
            bibtex_encoding: encoding,
            ..ExportOptions::default()
        },
    )
}

/// Whether `program` runs here; if not, the test is skipped (a failure under CI, whose set-up
/// installs it: `cargo xtask setup`).
fn have(program: &str, package: &str) -> bool {
    let runs = Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !runs {
        skip(
            Lack::SetUp,
            &format!(
                "`{program}` is not installed (Debian package {package}; `cargo xtask setup` installs it)"
            ),
        );
    }
    runs
}

/// A BibTeX style that checks and shows what a standard style reads of each entry.
const PROBE_BST: &str = r#"
ENTRY
  { author title year date journal journaltitle booktitle publisher school institution
    type doi }
  {}
  {}

INTEGERS { i n }
STRINGS { names field }

% a b -> b where it is not empty, else a
FUNCTION {either}
{ duplicate$ empty$ { pop$ } { swap$ pop$ } if$ }

% value name -> (warns where value is empty)
FUNCTION {require}
{ 'field :=
  empty$ { "empty " field * " in " * cite$ * warning$ } 'skip$ if$
}

FUNCTION {show.or.empty}
{ duplicate$ empty$ { pop$ "" } 'skip$ if$ }

FUNCTION {families}
{ 'names :=
  #1 'i :=
  names num.names$ 'n :=
  { n #1 + i > }
  { "FAMILY " names i "{vv~}{ll}" format.name$ * write$ newline$
    i #1 + 'i := }
  while$
}

FUNCTION {show}
{ "KEY " cite$ * write$ newline$
  "TYPE " type$ * write$ newline$
  author empty$ 'skip$ { author families } if$
  "TITLE " title "t" change.case$ * write$ newline$
  "YEAR " year show.or.empty * write$ newline$
  "DATE " date show.or.empty * write$ newline$
  "DOI " doi show.or.empty * write$ newline$
}

FUNCTION {article}
{ author "author" require  title "title" require
  journal journaltitle either "journal" require
  year date either "year" require  show }
FUNCTION {inproceedings}
{ author "author" require  title "title" require  booktitle "booktitle" require
  year date either "year" require  show }
FUNCTION {book}
{ author "author" require  title "title" require  publisher "publisher" require
  year date either "year" require  show }
FUNCTION {incollection}
{ author "author" require  title "title" require  booktitle "booktitle" require
  year date either "year" require  show }
FUNCTION {phdthesis}
{ author "author" require  title "title" require  school "school" require
  year "year" require  show }
FUNCTION {thesis}
{ author "author" require  title "title" require  institution "institution" require
  date year either "date" require  show }
FUNCTION {techreport}
{ author "author" require  title "title" require  institution "institution" require
  year "year" require  show }
FUNCTION {report}
{ author "author" require  title "title" require  institution "institution" require
  type "type" require  date year either "date" require  show }
FUNCTION {misc} { title "title" require  show }
FUNCTION {online} { title "title" require  show }
FUNCTION {default.type} { show }

READ
ITERATE {call.type$}
"#;

/// What BibTeX made of `bib`: its exit status, its messages and the probe's output.
struct BibtexRun {
    success: bool,
    messages: String,
    output: String,
}

fn run_bibtex(dir: &Path, bib: &str) -> BibtexRun {
    std::fs::write(dir.join("refs.bib"), bib).unwrap();
    std::fs::write(dir.join("probe.bst"), PROBE_BST).unwrap();
    std::fs::write(
        dir.join("answer.aux"),
        "\\citation{*}\n\\bibdata{refs}\n\\bibstyle{probe}\n",
    )
    .unwrap();
    let _ = std::fs::remove_file(dir.join("answer.bbl"));
    // Without TeX Live's own files, kpathsea searches only where it is told.
    let out = Command::new("bibtex")
        .arg("answer")
        .current_dir(dir)
        .env("BIBINPUTS", dir)
        .env("BSTINPUTS", dir)
        .output()
        .unwrap();
    BibtexRun {
        success: out.status.success(),
        messages: String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr),
        // BibTeX breaks a line longer than 79 characters at a space and indents the rest.
        output: std::fs::read_to_string(dir.join("answer.bbl"))
            .unwrap_or_default()
            .replace("\n  ", " "),
    }
}

#[test]
fn bibtex_parses_every_bib_export_in_utf8_and_ascii() {
    if !have("bibtex", "texlive-binaries") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for format in [ExportFormat::Bib, ExportFormat::Biblatex] {
        for encoding in [BibEncoding::Utf8, BibEncoding::Ascii] {
            let bib = export(format, encoding, CitationStyle::Numbers);
            let run = run_bibtex(dir.path(), &bib);
            let what = format!(
                "{format:?} {encoding:?}:\n{}\n{bib}\n{}",
                run.messages, run.output
            );
            assert!(run.success, "bibtex failed on {what}");
            assert!(
                !run.messages.contains("Warning--") && !run.messages.contains("error message"),
                "bibtex warned on {what}"
            );
            let out = &run.output;
            let (odegard, alesund) = match encoding {
                // 8-bit BibTeX changes the case of no byte outside ASCII; of a special
                // character, it does.
                BibEncoding::Utf8 => ("Ødegård", "Ålesund"),
                BibEncoding::Ascii => ("{\\O}deg{\\aa}rd", "{\\aa}lesund"),
            };
            let (report_type, date) = match format {
                ExportFormat::Biblatex => ("report", ("DATE 1998-03-15", "DATE 2020")),
                _ => ("techreport", ("YEAR 1998", "YEAR 2020")),
            };
            for line in [
                "KEY marrowSelfRAG1998\nTYPE article\nFAMILY Marrow\n",
                &format!("FAMILY {odegard}\nFAMILY {{World Health Organization}}\n"),
                // A style that sets titles in sentence case keeps the braced words' capitals.
                &format!(
                    "TITLE {{Self-RAG}} at the {alesund} station: 100\\% \\textbraceleft{{}}telemetry\\textbraceright{{}} \\& {{GPU}} limits\n"
                ),
                &format!("{}\n", date.0),
                "DOI 10.1000/tel_1998.3\n",
                &format!(
                    "KEY worldhealthorganization2020global\nTYPE {report_type}\nFAMILY {{World Health Organization}}\n"
                ),
                "TITLE Global {AI} \\& health: a \\textbraceleft{}50\\%\\textbraceright{} review of {RAG}\n",
                &format!("{}\n", date.1),
                "KEY field\nTYPE misc\nTITLE Field notes\n",
            ] {
                assert!(out.contains(line), "no {line:?} in {what}");
            }
        }
    }
}

#[test]
fn bibtex_fails_on_a_broken_bib() {
    if !have("bibtex", "texlive-binaries") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bib = export(ExportFormat::Bib, BibEncoding::Utf8, CitationStyle::Numbers);
    assert!(run_bibtex(dir.path(), &bib).success);
    // A field that is not closed, and a title brace an export that did not escape would leave.
    for broken in [
        bib.replacen("  volume = {12},", "  volume = {12,", 1),
        bib.replacen("\\textbraceleft{}telemetry", "{telemetry", 1),
        bib.replacen(
            "@article{marrowSelfRAG1998,",
            "@article{marrowSelfRAG1998",
            1,
        ),
    ] {
        assert_ne!(broken, bib);
        let run = run_bibtex(dir.path(), &broken);
        assert!(
            !run.success || run.messages.contains("error message"),
            "bibtex took a broken file:\n{}\n{broken}",
            run.messages
        );
    }
}

/// `pandoc --citeproc` on `markdown` with `bibliography` (its format told by its extension):
/// its exit status, its plain-text rendering and its messages. Any warning (a citation without
/// a reference among them) fails it.
fn run_pandoc(dir: &Path, markdown: &str, bibliography: (&str, &str)) -> (bool, String, String) {
    std::fs::write(dir.join("answer.md"), markdown).unwrap();
    std::fs::write(dir.join(bibliography.0), bibliography.1).unwrap();
    let out = Command::new("pandoc")
        .args([
            "--citeproc",
            "--bibliography",
            bibliography.0,
            "--fail-if-warnings",
            "--wrap=none",
            "-f",
            "markdown",
            "-t",
            "plain",
            "answer.md",
        ])
        .current_dir(dir)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn pandoc_renders_the_markdown_export_with_the_csl_json_and_biblatex_exports() {
    if !have("pandoc", "pandoc") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let md = export(ExportFormat::Md, BibEncoding::Utf8, CitationStyle::Pandoc);
    assert!(
        md.contains("It uses reflection tokens, and it is cheap [@worldhealthorganization2020global, p. 7; @marrowSelfRAG1998, p. 2]."),
        "{md}"
    );
    let bibliographies = [
        (
            "refs.json",
            export(
                ExportFormat::CslJson,
                BibEncoding::Utf8,
                CitationStyle::Numbers,
            ),
        ),
        (
            "refs.bib",
            export(
                ExportFormat::Biblatex,
                BibEncoding::Utf8,
                CitationStyle::Numbers,
            ),
        ),
        // pandoc reads the LaTeX escapes of the ASCII export back as the letters.
        (
            "refs.bib",
            export(
                ExportFormat::Biblatex,
                BibEncoding::Ascii,
                CitationStyle::Numbers,
            ),
        ),
        (
            "refs.bibtex",
            export(
                ExportFormat::Bib,
                BibEncoding::Ascii,
                CitationStyle::Numbers,
            ),
        ),
    ];
    for (name, bibliography) in &bibliographies {
        let (ok, text, messages) = run_pandoc(dir.path(), &md, (name, bibliography));
        let what = format!("{name}:\n{messages}\n{text}\n{bibliography}");
        assert!(ok, "pandoc failed with {what}");
        for expected in [
            // The citations, author–date with the printed page as the locator.
            "Self-RAG critiques itself (Marrow, Ødegård, and World Health Organization 1998, 2).",
            "(World Health Organization 2020, 7; Marrow, Ødegård, and World Health Organization 1998, 2)",
            // The text's own `@` stays text.
            "mail @nobody about it",
            // The references (pieces of them that do not depend on pandoc's version).
            "Marrow, Ann, Bjørn Ødegård, and World Health Organization. 1998.",
            "Journal of Telemetry & Control 12 (3)",
            "https://doi.org/10.1000/tel_1998.3",
            "World Health Organization. 2020.",
            "https://doi.org/10.5555/who.2020",
        ] {
            assert!(text.contains(expected), "no {expected:?} in {what}");
        }
        // The cited passages are block quotes, not text with `>` in it.
        assert!(!text.contains("> "), "{what}");
    }
}

#[test]
fn pandoc_fails_on_a_broken_bibliography_or_a_citation_without_a_reference() {
    if !have("pandoc", "pandoc") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let md = export(ExportFormat::Md, BibEncoding::Utf8, CitationStyle::Pandoc);
    let csl = export(
        ExportFormat::CslJson,
        BibEncoding::Utf8,
        CitationStyle::Numbers,
    );
    assert!(run_pandoc(dir.path(), &md, ("refs.json", &csl)).0);
    let truncated = &csl[..csl.len() / 2];
    let (ok, _, messages) = run_pandoc(dir.path(), &md, ("refs.json", truncated));
    assert!(!ok, "pandoc took a truncated CSL-JSON file: {messages}");
    let unknown = md.replace("@marrowSelfRAG1998", "@someoneElse1998");
    let (ok, _, messages) = run_pandoc(dir.path(), &unknown, ("refs.json", &csl));
    assert!(!ok && messages.contains("someoneElse1998"), "{messages}");
    // An `@` in the text that the export did not escape is read as a citation.
    let unescaped = md.replace("\\@nobody", "@nobody");
    assert_ne!(unescaped, md);
    let (ok, _, messages) = run_pandoc(dir.path(), &unescaped, ("refs.json", &csl));
    assert!(!ok && messages.contains("nobody"), "{messages}");
}
