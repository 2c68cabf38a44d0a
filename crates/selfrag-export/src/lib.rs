//! # selfrag-export: an answer as Markdown, HTML, JSON, a bibliography or LaTeX
//!
//! Renders an answer for people and for other tools: Markdown with the citations as footnotes
//! ([`markdown()`]), a self-contained HTML page with inline CSS, no script and everything escaped
//! ([`html()`]), the JSON trace, the cited works as BibTeX or BibLaTeX ([`bibtex()`]), CSL-JSON
//! ([`csl_json()`]) and RIS ([`ris()`]), and the answer as a LaTeX fragment citing them
//! ([`latex()`]). [`render_with`] picks the renderer from [`ExportOptions`].
//!
//! Every cited document is cited as the work it holds (module `cited`): the passage's
//! [`selfrag_works::Work`] where the library knew one, else a record with the document's title
//! alone. Each work has one citation key ([`selfrag_works::cite::key_of`], made unique), the
//! same in the bibliographies, the pandoc Markdown and the LaTeX, so a bibliography exported
//! next to the text resolves every citation. [`CitationStyle`] picks how Markdown and HTML cite:
//! numbered footnotes (the default), author–year with a reference list, or pandoc citations
//! (`[@key, p. 15]`, for `pandoc --citeproc`).
//!
//! Markdown and HTML give the [`provenance`] line under the answer, the bibliographies in each
//! entry's note: which generator wrote it, with which KV cache, and which embedder its passages
//! were found with (the JSON trace holds them as data).
//!
//! [`ExportOptions`] adds IsSup labels after each segment and the "only supported" filter.
//! The filter keeps the segments whose chosen candidate's most probable IsSup token is
//! `[Fully supported]` ([`Support`]). Partially supported segments are left out too (a partial
//! support is a claim the passage does not fully carry), and so are segments without any IsSup
//! judgement (written without a passage). Every gap is marked `[…]` in the text and a note under
//! the question counts what was left out and why, so a filtered export never passes for the
//! whole answer. The JSON export is the full trace and ignores both options: it is the record of
//! what the model did, not a rendering of it.
//!
//! It reads only [`selfrag_core::Answer`] and must not depend on the models, the library
//! (LanceDB) or the engine: the export fuzz target links it without them.
//!
//! ```
//! use selfrag_export::{CitationStyle, ExportFormat, ExportOptions, render_with};
//!
//! fn supported_only_html(answer: &selfrag_core::Answer) -> String {
//!     let options = ExportOptions {
//!         format: ExportFormat::Html,
//!         support_labels: true,
//!         only_supported: true,
//!         citations: CitationStyle::AuthorYear,
//!         ..ExportOptions::default()
//!     };
//!     render_with(answer, &options)
//! }
//! ```

mod bibtex;
mod cited;
mod csl;
mod html;
mod latex;
mod markdown;
mod provenance;
mod ris;
mod tex;

use selfrag_core::{Answer, IsSupDistribution, IsSupVerdict, Passage, Segment};
use serde::{Deserialize, Serialize};

pub use bibtex::{biblatex, bibtex};
pub use csl::csl_json;
pub use html::html;
pub use latex::latex;
pub use markdown::markdown;
pub use provenance::provenance;
pub use ris::ris;

/// The formats an answer can be exported to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub enum ExportFormat {
    #[default]
    Md,
    Html,
    Json,
    /// Classic BibTeX (`bibtex` with a `.bst` style).
    Bib,
    /// BibLaTeX's data model, for biber.
    Biblatex,
    /// CSL-JSON: pandoc's citeproc, Zotero's import.
    #[serde(rename = "csl-json")]
    CslJson,
    /// RIS: EndNote, Mendeley, Zotero's import.
    Ris,
    /// The answer as a LaTeX fragment with `\cite`s of the BibTeX export's keys.
    Latex,
}

impl ExportFormat {
    /// Every format, in the order the UI offers them.
    pub const ALL: [Self; 8] = [
        Self::Md,
        Self::Html,
        Self::Json,
        Self::Bib,
        Self::Biblatex,
        Self::CslJson,
        Self::Ris,
        Self::Latex,
    ];

    /// The file extension for a save dialog.
    pub fn extension(self) -> &'static str {
        match self {
            Self::Md => "md",
            Self::Html => "html",
            Self::Json | Self::CslJson => "json",
            Self::Bib | Self::Biblatex => "bib",
            Self::Ris => "ris",
            Self::Latex => "tex",
        }
    }

    /// The name a save dialog's filter shows.
    pub fn label(self) -> &'static str {
        match self {
            Self::Md => "Markdown",
            Self::Html => "HTML page",
            Self::Json => "JSON trace",
            Self::Bib => "BibTeX",
            Self::Biblatex => "BibLaTeX",
            Self::CslJson => "CSL-JSON",
            Self::Ris => "RIS",
            Self::Latex => "LaTeX",
        }
    }

    /// The name `--format` and the settings file use.
    pub fn name(self) -> &'static str {
        match self {
            Self::Md => "md",
            Self::Html => "html",
            Self::Json => "json",
            Self::Bib => "bib",
            Self::Biblatex => "biblatex",
            Self::CslJson => "csl-json",
            Self::Ris => "ris",
            Self::Latex => "latex",
        }
    }

    /// Whether the format is a list of the cited works (BibTeX, BibLaTeX, CSL-JSON, RIS).
    pub fn is_bibliography(self) -> bool {
        matches!(self, Self::Bib | Self::Biblatex | Self::CslJson | Self::Ris)
    }
}

impl std::str::FromStr for ExportFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "md" | "markdown" => Ok(Self::Md),
            "html" | "htm" => Ok(Self::Html),
            "json" => Ok(Self::Json),
            "bib" | "bibtex" => Ok(Self::Bib),
            "biblatex" => Ok(Self::Biblatex),
            "csl-json" | "csljson" => Ok(Self::CslJson),
            "ris" => Ok(Self::Ris),
            "latex" | "tex" => Ok(Self::Latex),
            other => Err(format!(
                "unknown export format `{other}`: use md, html, json, bib, biblatex, csl-json, ris or latex"
            )),
        }
    }
}

/// How Markdown and HTML cite the passages in the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub enum CitationStyle {
    /// A numbered footnote per passage: `[^1]` (Markdown), `[1]` (HTML).
    #[default]
    Numbers,
    /// `(Marrow & Ødegård 1998, p. 2)` in the text and the full references under it.
    AuthorYear,
    /// Markdown with pandoc citations, `[@key, p. 2]`, for `pandoc --citeproc` with the
    /// BibTeX or CSL-JSON export as its bibliography; in HTML, author–year.
    Pandoc,
}

impl std::str::FromStr for CitationStyle {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "numbers" | "numbered" => Ok(Self::Numbers),
            "author-year" | "authoryear" | "author_year" => Ok(Self::AuthorYear),
            "pandoc" => Ok(Self::Pandoc),
            other => Err(format!(
                "unknown citation style `{other}`: use numbers, author-year or pandoc"
            )),
        }
    }
}

/// How the BibTeX, BibLaTeX and LaTeX exports write letters outside ASCII.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub enum BibEncoding {
    /// As UTF-8: biber, BibLaTeX and every LaTeX since 2018 read it.
    #[default]
    Utf8,
    /// As LaTeX escapes (`{\o}`, `{\"o}`, `{\'e}`), for classic 8-bit BibTeX.
    Ascii,
}

/// How to export: the format, and for the formats they apply to, the options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct ExportOptions {
    pub format: ExportFormat,
    /// Write each segment's IsSup verdict after it (Markdown, HTML and LaTeX).
    pub support_labels: bool,
    /// Keep only the segments judged fully supported (see the module doc); the bibliographies
    /// then list only the documents those segments cite.
    pub only_supported: bool,
    /// How Markdown and HTML cite (LaTeX always uses `\cite`, the bibliographies none).
    pub citations: CitationStyle,
    /// How BibTeX, BibLaTeX and LaTeX write letters outside ASCII.
    pub bibtex_encoding: BibEncoding,
}

impl From<ExportFormat> for ExportOptions {
    fn from(format: ExportFormat) -> Self {
        Self {
            format,
            ..Self::default()
        }
    }
}

/// The answer in `format` with no options (the whole answer, no labels).
pub fn render(answer: &Answer, format: ExportFormat) -> String {
    render_with(answer, &format.into())
}

/// The answer rendered as `options` say.
pub fn render_with(answer: &Answer, options: &ExportOptions) -> String {
    match options.format {
        ExportFormat::Md => markdown(answer, options),
        ExportFormat::Html => html(answer, options),
        // Serializing plain data with string keys cannot fail.
        ExportFormat::Json => serde_json::to_string_pretty(answer).unwrap_or_default(),
        ExportFormat::Bib => bibtex(answer, options),
        ExportFormat::Biblatex => biblatex(answer, options),
        ExportFormat::CslJson => csl_json(answer, options),
        ExportFormat::Ris => ris(answer, options),
        ExportFormat::Latex => latex(answer, options),
    }
}

/// A segment's IsSup verdict, the core's ([`IsSupDistribution::verdict`], as the UI's badge
/// shows it), or none where the model emitted no IsSup token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    Full,
    Partial,
    NotSupported,
    Unjudged,
}

impl Support {
    pub fn of(segment: &Segment) -> Self {
        let dist = segment
            .candidates
            .get(segment.chosen)
            .and_then(|c| c.issup.as_ref());
        dist.map_or(Self::Unjudged, Self::from_distribution)
    }

    fn from_distribution(d: &IsSupDistribution) -> Self {
        match d.verdict() {
            IsSupVerdict::Fully => Self::Full,
            IsSupVerdict::Partially => Self::Partial,
            IsSupVerdict::NoSupport => Self::NotSupported,
        }
    }

    /// The words the UI's badge uses.
    pub fn label(self) -> &'static str {
        match self {
            Self::Full => "Fully supported",
            Self::Partial => "Partially supported",
            Self::NotSupported => "Not supported",
            Self::Unjudged => "No support judgement",
        }
    }

    /// The badge's icon: the verdict is never carried by colour alone.
    pub fn icon(self) -> &'static str {
        match self {
            Self::Full => "✓",
            Self::Partial => "◐",
            Self::NotSupported => "✗",
            Self::Unjudged => "–",
        }
    }

    /// A class-name-safe key (HTML export).
    fn key(self) -> &'static str {
        match self {
            Self::Full => "full",
            Self::Partial => "partial",
            Self::NotSupported => "none",
            Self::Unjudged => "unjudged",
        }
    }
}

/// One piece of the exported text: a kept segment, or a gap where segments were left out.
enum Piece<'a> {
    Segment {
        text: &'a str,
        citation: Option<usize>,
        support: Support,
    },
    Gap,
}

/// What precedes a closed-set answer's options in Markdown and HTML.
const OPTIONS_CAPTION: &str =
    "Options, each scored by the sum of f over the candidates that name it:";

/// What every renderer needs: the kept segments in order, the gaps, the passages still cited
/// (1-based number and passage), and the note on what the filter left out.
struct View<'a> {
    question: &'a str,
    pieces: Vec<Piece<'a>>,
    sources: Vec<(usize, &'a Passage)>,
    note: Option<String>,
    /// Which generator and numerics the scores came from ([`provenance`]).
    provenance: Option<String>,
    /// A closed-set question's options, each as `A: whale (3.600)`, and whether it was chosen.
    options: Vec<(String, bool)>,
}

impl<'a> View<'a> {
    fn new(answer: &'a Answer, options: &ExportOptions) -> Self {
        let mut pieces = Vec::with_capacity(answer.segments.len());
        let (mut partial, mut unsupported, mut unjudged) = (0usize, 0usize, 0usize);
        for segment in &answer.segments {
            let support = Support::of(segment);
            if options.only_supported && support != Support::Full {
                match support {
                    Support::Partial => partial += 1,
                    Support::NotSupported => unsupported += 1,
                    _ => unjudged += 1,
                }
                if !matches!(pieces.last(), Some(Piece::Gap)) {
                    pieces.push(Piece::Gap);
                }
                continue;
            }
            pieces.push(Piece::Segment {
                text: segment.text.trim(),
                citation: segment.citation,
                support,
            });
        }
        let mut cited: Vec<usize> = pieces
            .iter()
            .filter_map(|p| match p {
                Piece::Segment { citation, .. } => *citation,
                Piece::Gap => None,
            })
            .collect();
        cited.sort_unstable();
        cited.dedup();
        let sources = cited
            .into_iter()
            .filter_map(|n| Some((n, answer.passages.get(n.checked_sub(1)?)?)))
            .collect();
        let filtered = options
            .only_supported
            .then(|| filter_note(answer.segments.len(), partial, unsupported, unjudged));
        // An answer cut short says so wherever it goes, as the app does.
        let stopped = answer.cut_short.as_ref().map(|why| {
            format!(
                "The answer stops early, after {} segment(s): {}.",
                answer.segments.len(),
                one_line(why)
            )
        });
        let note = match (stopped, filtered) {
            (Some(stopped), Some(filtered)) => Some(format!("{stopped} {filtered}")),
            (stopped, filtered) => stopped.or(filtered),
        };
        Self {
            question: &answer.question,
            pieces,
            sources,
            note,
            provenance: provenance(answer),
            options: answer
                .closed_set
                .iter()
                .flat_map(|scores| {
                    scores.options.iter().enumerate().map(|(i, o)| {
                        let line = one_line(&format!("{}: {} ({:.3})", o.label, o.text, o.score));
                        (line, scores.chosen == Some(i))
                    })
                })
                .collect(),
        }
    }
}

/// "Only fully supported sentences: 2 of 5 segments left out (1 partially supported, 1 not
/// supported)."
fn filter_note(total: usize, partial: usize, unsupported: usize, unjudged: usize) -> String {
    let left_out = partial + unsupported + unjudged;
    if left_out == 0 {
        return format!(
            "Only fully supported sentences: all {total} segments are fully supported; nothing was left out."
        );
    }
    let reasons: Vec<String> = [
        (partial, "partially supported"),
        (unsupported, "not supported"),
        (unjudged, "without a support judgement"),
    ]
    .into_iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, why)| format!("{n} {why}"))
    .collect();
    format!(
        "Only fully supported sentences: {left_out} of {total} segments left out ({}), each gap marked […].",
        reasons.join(", ")
    )
}

/// What a source line says after the path: the page as cited (`p. 117 (PDF page 3)`) and how
/// its text was read (`OCR text, confidence 87%`), each as ", …" in the format's `escape`.
fn source_details(p: &Passage, escape: fn(&str) -> String) -> String {
    p.page_citation()
        .into_iter()
        .chain(p.ocr_note())
        .map(|detail| format!(", {}", escape(&detail)))
        .collect()
}

/// Collapses whitespace (titles and questions on one line).
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// How a renderer that cites works writes a sentence's citations: the cluster for the
/// citation numbers of one sentence (empty where none names a cited work), each segment's
/// support label, the gap, and what goes between a sentence's last word and its cluster.
struct SentenceCites<'f> {
    escape: &'f dyn Fn(&str) -> String,
    cluster: &'f dyn Fn(&[usize]) -> String,
    label: &'f dyn Fn(Support) -> String,
    gap: &'f str,
    before_cluster: &'f str,
}

impl SentenceCites<'_> {
    /// The kept text with one citation cluster per sentence, before its final punctuation
    /// (`… itself [@a, p. 2; @b, p. 7].`): the segments up to one that ends a sentence are one
    /// sentence, and cite the passages each of them cites, each once, in order.
    fn render(&self, pieces: &[Piece<'_>], support_labels: bool) -> String {
        let mut out: Vec<String> = Vec::new();
        let mut sentence: Vec<(&str, Option<usize>, Support)> = Vec::new();
        for piece in pieces {
            match piece {
                Piece::Gap => {
                    if !sentence.is_empty() {
                        out.push(self.sentence(&std::mem::take(&mut sentence), support_labels));
                    }
                    out.push(self.gap.to_string());
                }
                Piece::Segment {
                    text,
                    citation,
                    support,
                } => {
                    sentence.push((text, *citation, *support));
                    if ends_sentence(text) {
                        out.push(self.sentence(&std::mem::take(&mut sentence), support_labels));
                    }
                }
            }
        }
        if !sentence.is_empty() {
            out.push(self.sentence(&sentence, support_labels));
        }
        out.join(" ")
    }

    fn sentence(&self, parts: &[(&str, Option<usize>, Support)], support_labels: bool) -> String {
        let mut cited: Vec<usize> = Vec::new();
        for n in parts.iter().filter_map(|(_, c, _)| *c) {
            if !cited.contains(&n) {
                cited.push(n);
            }
        }
        let label = |support: Support| {
            if support_labels {
                (self.label)(support)
            } else {
                String::new()
            }
        };
        // Empty where no number names a passage of the answer (a trace that cites out of range).
        let cluster = if cited.is_empty() {
            String::new()
        } else {
            (self.cluster)(&cited)
        };
        let last = parts.len().saturating_sub(1);
        parts
            .iter()
            .enumerate()
            .map(|(i, (text, _, support))| {
                if i < last || cluster.is_empty() {
                    return format!("{}{}", (self.escape)(text), label(*support));
                }
                let (words, end) = split_final_punctuation(text);
                format!(
                    "{}{}{cluster}{}{}",
                    (self.escape)(words),
                    self.before_cluster,
                    (self.escape)(end),
                    label(*support)
                )
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Whether a segment ends its sentence: its text ends in `.`, `!`, `?` or `…`, perhaps inside
/// closing quotes or brackets.
fn ends_sentence(text: &str) -> bool {
    let text = text.trim_end_matches(['"', '\'', '”', '’', ')', ']', '»']);
    text.ends_with(['.', '!', '?', '…'])
}

/// A sentence's words and its final run of `.`, `!`, `?`, `…` (empty where it has none at its
/// very end), so a citation can stand before the full stop.
fn split_final_punctuation(text: &str) -> (&str, &str) {
    let words = text.trim_end_matches(['.', '!', '?', '…']);
    (words.trim_end(), &text[words.len()..])
}

#[cfg(test)]
pub(crate) mod test_answer {
    //! A hand-made answer with every support verdict and hostile text in every field.

    use selfrag_core::{Answer, Settings};
    use selfrag_testkit::traces::TraceBuilder;
    use selfrag_works::{Author, FieldSource, Sourced, Work, WorkDate, WorkType};

    pub const XSS_IMG: &str = "<img src=x onerror=alert(1)>";
    pub const XSS_SCRIPT: &str = "<script>alert('x')</script>";

    /// Four segments: fully supported [1], partially supported [2], not supported [1],
    /// unjudged; hostile markup in the question, a segment, a title, a path and a passage.
    pub fn answer() -> Answer {
        TraceBuilder::new(format!("What is {XSS_IMG} in   Self-RAG?"))
            .settings(Settings {
                long_form: true,
                ..Settings::default()
            })
            .passage(
                &format!("Notes {XSS_SCRIPT} & {{braces}} 100% $5 #1 a_b ^ ~"),
                "/docs/notes_{x}.md",
                None,
                &format!("Self-RAG critiques itself.\n{XSS_IMG}"),
            )
            .passage(
                "Paper",
                "/docs/paper.pdf",
                Some(3),
                "Reflection tokens: IsRel, IsSup, IsUse.",
            )
            .passage("Paper", "/docs/paper.pdf", Some(7), "Unused passage.")
            .segment(
                &format!("It critiques {XSS_SCRIPT} itself."),
                Some(1),
                Some([0.8, 0.15, 0.05]),
            )
            .segment("It uses tokens.", Some(2), Some([0.2, 0.7, 0.1]))
            .segment("It is magic.", Some(1), Some([0.1, 0.2, 0.7]))
            .segment("Hope this helps.", None, None)
            .build()
    }

    /// A journal article with every field but the ISBN, by two people and an organisation,
    /// with capitals, braces, `%` and `&` in its title.
    pub fn article() -> Work {
        fn s<T>(v: T) -> Option<Sourced<T>> {
            Some(Sourced::new(v, FieldSource::ReferenceManager))
        }
        Work {
            kind: s(WorkType::JournalArticle),
            title: s("Self-RAG and the Ålesund telemetry: 100% {sure} & more".into()),
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
            publisher: s("Nordic Press".into()),
            doi: s("10.1000/xyz_1".into()),
            arxiv: s("2310.11511".into()),
            isbn: None,
            url: s("https://example.org/a_b?c=1&d=2".into()),
            citation_key: s("marrowTelemetry98".into()),
            zotero: None,
        }
    }

    /// [`answer`] with `work` as the record of `/docs/paper.pdf` (cited as [2], page 3).
    pub fn answer_citing(work: Work) -> Answer {
        let mut answer = answer();
        for p in answer
            .passages
            .iter_mut()
            .filter(|p| p.path == "/docs/paper.pdf")
        {
            p.work = Some(work.clone());
        }
        answer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A page whose printed number differs from its place in the file is cited with both in
    /// every format; the bibliographies' notes and the citations by work give the printed
    /// number.
    #[test]
    fn printed_page_numbers_are_cited_with_the_pdf_page_in_every_export() {
        let mut answer = test_answer::answer();
        for p in answer.passages.iter_mut().filter(|p| p.page == Some(3)) {
            p.page_label = Some("117".into());
        }
        let options = ExportOptions::default();
        let md = markdown(&answer, &options);
        assert!(
            md.contains("`/docs/paper.pdf`, p. 117 (PDF page 3)\n"),
            "{md}"
        );
        let page = html(&answer, &options);
        assert!(
            page.contains("<code>/docs/paper.pdf</code>, p. 117 (PDF page 3)\n"),
            "{page}"
        );
        let bib = bibtex(&answer, &options);
        assert!(
            bib.contains("  note = {Cited as [2]; page 117},\n"),
            "{bib}"
        );
        assert!(
            !bib.contains("pages ="),
            "the cited page is not the work's range: {bib}"
        );
        let ris = ris(&answer, &options);
        assert!(ris.contains("N1  - Cited as [2]; page 117\r\n"), "{ris}");
        let pandoc = ExportOptions {
            citations: CitationStyle::Pandoc,
            ..options
        };
        assert!(markdown(&answer, &pandoc).contains("[@paper, p. 117]"));
        let author_year = ExportOptions {
            citations: CitationStyle::AuthorYear,
            ..options
        };
        assert!(markdown(&answer, &author_year).contains("(Paper n.d., p. 117)"));
        assert!(latex(&answer, &options).contains("\\cite[p.~{117}]{paper}"));
        let json = render(&answer, ExportFormat::Json);
        assert!(json.contains("\"page_label\": \"117\""), "{json}");
    }

    /// A passage read from a scan by OCR says so, with the engine's confidence, in every format.
    #[test]
    fn ocr_text_is_marked_with_its_confidence_in_every_export() {
        let mut answer = test_answer::answer();
        for p in answer.passages.iter_mut().filter(|p| p.page == Some(3)) {
            p.ocr_confidence = Some(0.874);
        }
        let options = ExportOptions::default();
        let md = markdown(&answer, &options);
        assert!(
            md.contains("`/docs/paper.pdf`, p. 3, OCR text, confidence 87%\n"),
            "{md}"
        );
        let page = html(&answer, &options);
        assert!(
            page.contains("<code>/docs/paper.pdf</code>, p. 3, OCR text, confidence 87%\n"),
            "{page}"
        );
        let json = render(&answer, ExportFormat::Json);
        assert!(json.contains("\"ocr_confidence\": 0.874"), "{json}");
    }

    /// A closed-set answer's options go with it: each with its score, the chosen one marked, its
    /// text escaped as any text from a person or a data file.
    #[test]
    fn a_closed_set_answers_options_are_listed_with_their_scores() {
        let mut answer = test_answer::answer();
        let option = |label: &str, text: &str, score: f32| selfrag_core::OptionScore {
            label: label.into(),
            text: text.into(),
            score,
            candidates: Vec::new(),
        };
        answer.closed_set = Some(selfrag_core::ClosedSetScores {
            kind: selfrag_core::ClosedSetKind::MultipleChoice,
            question: "Which is a mammal?".into(),
            options: vec![option("A", "whale <b>", 3.6), option("B", "shark", 3.65)],
            chosen: Some(1),
        });
        let options = ExportOptions::default();
        let md = markdown(&answer, &options);
        assert!(
            md.contains("- A: whale \\<b> (3.600)\n- **B: shark (3.650)**, chosen\n"),
            "{md}"
        );
        let page = html(&answer, &options);
        assert!(
            page.contains("<li>A: whale &lt;b&gt; (3.600)</li>\n<li><strong>B: shark (3.650)</strong>, chosen</li>"),
            "{page}"
        );
    }

    /// Every rendering says which generator and numerics the answer's scores came from: under
    /// the answer in Markdown and HTML, in each entry's note in BibTeX; the JSON keeps the data.
    #[test]
    fn the_provenance_line_is_in_every_export() {
        let mut answer = test_answer::answer();
        answer.generator = Some(selfrag_core::GeneratorInfo {
            kind: selfrag_core::GeneratorKind::Local,
            model: "/m/selfrag_llama2_7b.q4_k_m.gguf".into(),
            runtime: "cpu".into(),
            url: None,
            cache_precision: Some(selfrag_core::CachePrecision::Q8),
            dummy_prefix: Some(selfrag_core::DummyPrefix::TextStart),
        });
        answer.embedder = Some(selfrag_core::EmbedderInfo {
            model: "facebook/contriever-msmarco@abc".into(),
            precision: selfrag_core::EmbedderPrecision::Int8,
            device: selfrag_core::DeviceKind::Cpu,
            server: None,
        });
        let line = "Written on this computer (CPU) by selfrag_llama2_7b.q4_k_m.gguf · KV cache 8-bit · embedder int8";
        assert_eq!(provenance(&answer).as_deref(), Some(line));
        let options = ExportOptions::default();
        let md = markdown(&answer, &options);
        assert!(md.contains(&format!("\n*{line}*\n")), "{md}");
        let page = html(&answer, &options);
        assert!(
            page.contains(&format!("<p class=\"provenance\">{line}</p>")),
            "{page}"
        );
        let bib = bibtex(&answer, &options);
        let escaped = line.replace('_', "\\_");
        assert_eq!(
            bib.matches(&format!("  note = {{Cited as [1]. {escaped}}},\n"))
                .count(),
            1,
            "{bib}"
        );
        assert!(
            bib.contains(&format!("  note = {{Cited as [2]; page 3. {escaped}}},\n")),
            "{bib}"
        );
        assert!(biblatex(&answer, &options).contains(&format!(
            "  addendum = {{Cited as [2]; page 3. {escaped}}},\n"
        )));
        assert!(
            ris(&answer, &options).contains(&format!("N1  - Cited as [2]; page 3. {line}\r\n"))
        );
        assert!(latex(&answer, &options).contains(&format!("\n\\emph{{{escaped}}}\n")));
        let json = render(&answer, ExportFormat::Json);
        assert!(
            json.contains("\"cache_precision\": \"q8\"")
                && json.contains("\"precision\": \"int8\""),
            "{json}"
        );
        // A trace that recorded neither says nothing of them.
        let bare = test_answer::answer();
        assert!(!markdown(&bare, &options).contains("Written on"));
        assert!(!html(&bare, &options).contains("provenance\">"));
        assert!(bibtex(&bare, &options).contains("  note = {Cited as [1]},\n"));
    }

    #[test]
    fn formats_parse_from_their_names_and_the_usual_aliases() {
        for f in ExportFormat::ALL {
            assert_eq!(f.name().parse::<ExportFormat>(), Ok(f));
            // The settings file and the UI use the same name.
            assert_eq!(
                serde_json::to_string(&f).unwrap(),
                format!("\"{}\"", f.name())
            );
        }
        for (alias, format) in [
            ("BibTeX", ExportFormat::Bib),
            ("markdown", ExportFormat::Md),
            ("csljson", ExportFormat::CslJson),
            ("tex", ExportFormat::Latex),
        ] {
            assert_eq!(alias.parse::<ExportFormat>(), Ok(format));
        }
        let extensions: Vec<&str> = ExportFormat::ALL.iter().map(|f| f.extension()).collect();
        assert_eq!(
            extensions,
            ["md", "html", "json", "bib", "bib", "json", "ris", "tex"]
        );
        let err = "pdf".parse::<ExportFormat>().unwrap_err();
        assert!(err.contains("pdf") && err.contains("csl-json"), "{err}");
        assert_eq!(
            "author-year".parse::<CitationStyle>(),
            Ok(CitationStyle::AuthorYear)
        );
        assert!(
            "harvard"
                .parse::<CitationStyle>()
                .unwrap_err()
                .contains("pandoc")
        );
    }

    #[test]
    fn options_deserialize_from_camel_case_with_defaults() {
        // Saved before the citation style and the encoding existed.
        let o: ExportOptions =
            serde_json::from_str(r#"{"format":"html","onlySupported":true}"#).unwrap();
        assert_eq!(
            o,
            ExportOptions {
                format: ExportFormat::Html,
                support_labels: false,
                only_supported: true,
                citations: CitationStyle::Numbers,
                bibtex_encoding: BibEncoding::Utf8,
            }
        );
        let o: ExportOptions = serde_json::from_str(
            r#"{"format":"csl-json","citations":"authorYear","bibtexEncoding":"ascii"}"#,
        )
        .unwrap();
        assert_eq!(
            (o.format, o.citations, o.bibtex_encoding),
            (
                ExportFormat::CslJson,
                CitationStyle::AuthorYear,
                BibEncoding::Ascii
            )
        );
        assert_eq!(
            serde_json::to_value(ExportOptions::default()).unwrap(),
            serde_json::json!({"format": "md", "supportLabels": false, "onlySupported": false,
                "citations": "numbers", "bibtexEncoding": "utf8"})
        );
    }

    #[test]
    fn a_citation_out_of_range_leaves_no_empty_cluster() {
        let mut answer = test_answer::answer();
        answer.segments[1].citation = Some(9);
        for citations in [CitationStyle::AuthorYear, CitationStyle::Pandoc] {
            let options = ExportOptions {
                citations,
                ..ExportOptions::default()
            };
            let md = markdown(&answer, &options);
            assert!(md.contains(" It uses tokens. It is magic "), "{md}");
            assert!(html(&answer, &options).contains(" It uses tokens. It is magic "));
        }
        let tex = latex(&answer, &ExportOptions::default());
        assert!(tex.contains(" It uses tokens. It is magic~"), "{tex}");
    }

    #[test]
    fn a_sentence_cites_once_before_its_full_stop() {
        assert!(
            ends_sentence("It is.") && ends_sentence("He said \"yes!\"") && ends_sentence("Why?)")
        );
        assert!(!ends_sentence("It is, and") && !ends_sentence("e.g"));
        assert_eq!(split_final_punctuation("It is..."), ("It is", "..."));
        assert_eq!(
            split_final_punctuation("He said \"yes.\""),
            ("He said \"yes.\"", "")
        );
        assert_eq!(split_final_punctuation("No stop"), ("No stop", ""));
    }

    #[test]
    fn support_is_the_most_probable_issup_token_first_on_ties() {
        let a = test_answer::answer();
        let verdicts: Vec<Support> = a.segments.iter().map(Support::of).collect();
        assert_eq!(
            verdicts,
            [
                Support::Full,
                Support::Partial,
                Support::NotSupported,
                Support::Unjudged
            ]
        );
        let tie = IsSupDistribution {
            fully: 0.4,
            partially: 0.4,
            no_support: 0.2,
        };
        assert_eq!(Support::from_distribution(&tie), Support::Full);
    }

    #[test]
    fn json_is_the_full_trace_whatever_the_options() {
        let a = test_answer::answer();
        let filtered = render_with(
            &a,
            &ExportOptions {
                format: ExportFormat::Json,
                support_labels: true,
                only_supported: true,
                citations: CitationStyle::Pandoc,
                bibtex_encoding: BibEncoding::Ascii,
            },
        );
        let back: Answer = serde_json::from_str(&filtered).unwrap();
        assert_eq!(back, a);
    }

    #[test]
    fn the_filter_keeps_fully_supported_segments_marks_gaps_and_says_why() {
        let a = test_answer::answer();
        let view = View::new(
            &a,
            &ExportOptions {
                only_supported: true,
                ..ExportOptions::default()
            },
        );
        assert_eq!(
            view.pieces.len(),
            2,
            "one kept segment, then one merged gap"
        );
        assert!(matches!(view.pieces[1], Piece::Gap));
        assert_eq!(
            view.sources.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
            [1]
        );
        assert_eq!(
            view.note.as_deref(),
            Some(
                "Only fully supported sentences: 3 of 4 segments left out (1 partially supported, 1 not supported, 1 without a support judgement), each gap marked […]."
            )
        );
        let all = View::new(&a, &ExportOptions::default());
        assert_eq!(all.pieces.len(), 4);
        assert_eq!(all.sources.len(), 2);
        assert!(all.note.is_none());
    }

    #[test]
    fn an_answer_cut_short_says_so_in_every_export() {
        let mut a = test_answer::answer();
        a.cut_short = Some("the generator server at http://lab:8080 stopped\nanswering".into());
        let note = "The answer stops early, after 4 segment(s): the generator server at http://lab:8080 stopped answering.";
        assert_eq!(
            View::new(&a, &ExportOptions::default()).note.as_deref(),
            Some(note)
        );
        assert!(crate::markdown(&a, &ExportOptions::default()).contains(note));
        assert!(crate::html(&a, &ExportOptions::default()).contains(note));
        let filtered = View::new(
            &a,
            &ExportOptions {
                only_supported: true,
                ..ExportOptions::default()
            },
        );
        assert!(filtered.note.unwrap().starts_with(note));
    }
}
