//! Markdown export: the question as the heading, the answer's segments, a closed-set
//! question's options with their scores and the provenance line, then the sources, in the
//! [`CitationStyle`] asked:
//! - numbers: each segment followed by its footnote marker (and, if asked, its IsSup verdict),
//!   one footnote per cited passage with its title, file, page and the quoted passage;
//! - author–year: one citation per sentence, `(Marrow & Ødegård 1998, p. 2)` (the printed
//!   page), and a reference list of the cited works, each with its full reference, its DOI
//!   as a link, its file and the passages cited quoted with their pages;
//! - pandoc: one pandoc citation per sentence, `[@key, p. 2; @other, p. 7]`, with the keys
//!   of the BibTeX and CSL-JSON exports, the cited passages quoted, and the place pandoc's
//!   citeproc writes the bibliography (`::: {#refs}`): `pandoc --citeproc --bibliography
//!   refs.json answer.md` renders it as a paper would.
//!
//! Text from documents and the model is written as text: a `<` is backslash-escaped so a
//! Markdown renderer never turns `<script>` or `<img onerror=…>` into HTML, `[` and `]` so that
//! `![](https://tracker/p.png)` or `[x](javascript:…)` in a document never becomes a live image
//! or link, a file path is a code span fenced with more backticks than it contains, and in
//! pandoc's style an `@` too, so no text becomes a citation.

use selfrag_core::{Answer, Passage};
use selfrag_works::cite::doi_url;

use super::{ExportOptions, OPTIONS_CAPTION, Piece, View, one_line};
use crate::cited::{CitedWork, CitedWorks};
use crate::{CitationStyle, SentenceCites, Support};

/// The answer as Markdown.
pub fn markdown(answer: &Answer, options: &ExportOptions) -> String {
    let view = View::new(answer, options);
    match options.citations {
        CitationStyle::Numbers => numbered(&view, options),
        CitationStyle::AuthorYear => by_work(answer, &view, options, false),
        CitationStyle::Pandoc => by_work(answer, &view, options, true),
    }
}

/// The question and the note on what was left out.
fn heading(view: &View<'_>, escape: &dyn Fn(&str) -> String) -> String {
    let mut out = format!("# {}\n\n", escape(&one_line(view.question)));
    if let Some(note) = &view.note {
        out.push_str(&format!("*{}*\n\n", escape(note)));
    }
    out
}

/// A closed-set question's options and the provenance line, under the answer.
fn options_and_provenance(view: &View<'_>, escape: &dyn Fn(&str) -> String) -> String {
    let mut out = String::new();
    if !view.options.is_empty() {
        out.push_str(&format!("\n{OPTIONS_CAPTION}\n\n"));
        for (option, chosen) in &view.options {
            let option = escape(option);
            out.push_str(&if *chosen {
                format!("- **{option}**, chosen\n")
            } else {
                format!("- {option}\n")
            });
        }
    }
    if let Some(provenance) = &view.provenance {
        out.push_str(&format!("\n*{}*\n", escape(provenance)));
    }
    out
}

/// Numbered footnotes, one per passage.
fn numbered(view: &View<'_>, options: &ExportOptions) -> String {
    let mut out = heading(view, &escape);
    let body: Vec<String> = view
        .pieces
        .iter()
        .map(|piece| match piece {
            Piece::Gap => "[…]".to_string(),
            Piece::Segment {
                text,
                citation,
                support,
            } => {
                let mut s = escape(text);
                if let Some(n) = citation {
                    s.push_str(&format!("[^{n}]"));
                }
                if options.support_labels {
                    s.push_str(&support_label(*support));
                }
                s
            }
        })
        .collect();
    out.push_str(&body.join(" "));
    out.push('\n');
    out.push_str(&options_and_provenance(view, &escape));
    if !view.sources.is_empty() {
        out.push('\n');
    }
    for (n, p) in &view.sources {
        let page = crate::source_details(p, escape);
        out.push_str(&format!(
            "[^{n}]: **{}**, {}{page}\n",
            escape(&one_line(&p.title)),
            code_span(&p.path)
        ));
        for line in p.text.lines() {
            out.push_str(&format!("    > {}\n", escape(line)));
        }
    }
    out
}

/// " *(✓ Fully supported)*".
fn support_label(support: Support) -> String {
    format!(" *({} {})*", support.icon(), support.label())
}

/// Author–year citations and a reference list, or pandoc citations.
fn by_work(answer: &Answer, view: &View<'_>, options: &ExportOptions, pandoc: bool) -> String {
    let cited = CitedWorks::new(answer, view);
    let esc: &dyn Fn(&str) -> String = if pandoc { &escape_pandoc } else { &escape };
    let cluster = |numbers: &[usize]| {
        let cites: Vec<String> = numbers
            .iter()
            .filter_map(|&n| {
                let (_, work) = cited.of(n)?;
                let page = view
                    .sources
                    .iter()
                    .find(|(m, _)| *m == n)
                    .and_then(|(_, p)| p.printed_page())
                    .map(|page| format!(", p. {}", escape_locator(&one_line(&page))))
                    .unwrap_or_default();
                Some(if pandoc {
                    format!("{}{page}", pandoc_key(&work.key))
                } else {
                    format!("{}{page}", esc(&work.label()))
                })
            })
            .collect();
        match (cites.is_empty(), pandoc) {
            (true, _) => String::new(),
            (false, true) => format!("[{}]", cites.join("; ")),
            (false, false) => format!("({})", cites.join("; ")),
        }
    };
    let sentences = SentenceCites {
        escape: esc,
        cluster: &cluster,
        label: &support_label,
        gap: "[…]",
        before_cluster: " ",
    };
    let mut out = heading(view, esc);
    out.push_str(&sentences.render(&view.pieces, options.support_labels));
    out.push('\n');
    out.push_str(&options_and_provenance(view, esc));
    if cited.works.is_empty() {
        return out;
    }
    if pandoc {
        out.push_str("\n## Cited passages\n\n");
        for work in &cited.works {
            for (_, p) in &work.passages {
                out.push_str(&format!(
                    "- {}, {}\n",
                    esc(&work.label()),
                    code_span(&p.path)
                ));
                quote(&mut out, p, esc);
            }
        }
        out.push_str("\n## References\n\n::: {#refs}\n:::\n");
    } else {
        out.push_str("\n## References\n\n");
        for work in &cited.works {
            out.push_str(&format!("- {}\n", reference(work)));
            for (_, p) in &work.passages {
                quote(&mut out, p, esc);
            }
        }
    }
    out
}

/// A cited passage quoted under its reference, its page (and OCR note) first, after a blank
/// line (pandoc's Markdown starts a block quote only there).
fn quote(out: &mut String, p: &Passage, escape: &dyn Fn(&str) -> String) {
    let details: Vec<String> = p.page_citation().into_iter().chain(p.ocr_note()).collect();
    out.push('\n');
    if !details.is_empty() {
        out.push_str(&format!("    > {}:\n", escape(&details.join(", "))));
        out.push_str("    >\n");
    }
    for line in p.text.lines() {
        out.push_str(&format!("    > {}\n", escape(line)));
    }
}

/// "Ann Marrow & Bjørn Ødegård (1998). Title. *Journal* 12(3), pp. 117–129. Publisher.
/// <https://doi.org/…>. File `/docs/a.pdf`."
fn reference(work: &CitedWork<'_>) -> String {
    let r = work.reference();
    let mut parts: Vec<String> = Vec::new();
    let year = escape(&r.year);
    let title = r.title.as_deref().map(|t| escape(t.trim_end_matches('.')));
    match (&r.authors, title) {
        (Some(authors), Some(title)) => {
            parts.push(format!("{} ({year}).", escape(authors)));
            parts.push(format!("{title}."));
        }
        (Some(authors), None) => parts.push(format!("{} ({year}).", escape(authors))),
        (None, Some(title)) => parts.push(format!("{title} ({year}).")),
        (None, None) => parts.push(format!("({year}).")),
    }
    match (&r.container, r.details.is_empty()) {
        (Some(container), true) => parts.push(format!("*{}*.", escape(container))),
        (Some(container), false) => {
            parts.push(format!("*{}* {}.", escape(container), escape(&r.details)));
        }
        (None, false) => parts.push(format!("{}.", escape(&r.details))),
        (None, true) => {}
    }
    if let Some(publisher) = &r.publisher {
        parts.push(format!("{}.", escape(publisher)));
    }
    // The export's own link: the address is built, and percent-encoded, from the DOI.
    if let Some(doi) = &r.doi {
        parts.push(format!("<{}>.", doi_url(doi)));
    } else if let Some(url) = &r.url {
        parts.push(format!("{}.", escape(url)));
    }
    parts.push(format!("File {}.", code_span(work.path)));
    parts.join(" ")
}

/// A work's key as pandoc reads it: `@key`, or `@{key}` where the key holds a character pandoc
/// would end it at.
fn pandoc_key(key: &str) -> String {
    let plain = key.chars().all(|c| c.is_alphanumeric() || c == '_')
        || (key
            .chars()
            .all(|c| c.is_alphanumeric() || "_-:.".contains(c))
            && key.chars().last().is_some_and(char::is_alphanumeric)
            && key.chars().next().is_some_and(char::is_alphanumeric));
    if plain {
        format!("@{key}")
    } else {
        format!("@{{{key}}}")
    }
}

/// A page label as a citation's locator: Markdown-escaped, with `;` and `@` escaped too so it
/// can neither end the citation nor start another.
fn escape_locator(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '\\' | '<' | '[' | ']' | ';' | '@') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// [`escape`], with `@` escaped too: in pandoc's Markdown, `@word` is a citation.
fn escape_pandoc(s: &str) -> String {
    escape(s).replace('@', "\\@")
}

/// Text that Markdown shows as written: `\`, `<`, `[` and `]` are backslash-escaped (no raw
/// HTML, no autolinks, no links, images or footnote references); everything else stays
/// readable.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '\\' | '<' | '[' | ']') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A code span that holds `s` verbatim: fenced with one backtick more than its longest run.
fn code_span(s: &str) -> String {
    let s = one_line(s);
    let longest = s
        .split(|c| c != '`')
        .map(str::len)
        .max()
        .unwrap_or_default();
    let fence = "`".repeat(longest + 1);
    // A space inside the fence keeps a leading or trailing backtick apart from it.
    let pad = if s.starts_with('`') || s.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{s}{pad}{fence}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_answer::{self, XSS_IMG, XSS_SCRIPT, answer_citing, article};

    #[test]
    fn links_and_images_from_documents_stay_text() {
        let mut answer = test_answer::answer();
        let hostile =
            "See ![](https://tracker.example/p.png) and [x](javascript:alert(1)) or [^9].";
        answer.passages[0].text = hostile.into();
        answer.passages[0].title = "[t](https://evil.example)".into();
        answer.segments[0].text = "Click [here](https://evil.example).".into();
        let md = markdown(&answer, &ExportOptions::default());
        assert!(
            md.contains("!\\[\\](https://tracker.example/p.png)"),
            "{md}"
        );
        assert!(md.contains("\\[x\\](javascript:alert(1))"), "{md}");
        assert!(md.contains("\\[t\\](https://evil.example)"), "{md}");
        assert!(
            md.contains("Click \\[here\\](https://evil.example)."),
            "{md}"
        );
        // Every `[` left unescaped is the export's own footnote syntax.
        let bytes = md.as_bytes();
        for (i, _) in md.match_indices('[') {
            let escaped = i > 0 && bytes[i - 1] == b'\\';
            assert!(
                escaped || md[i..].starts_with("[^"),
                "unescaped [ at {i} in\n{md}"
            );
        }
        assert!(!md.contains("[^9]"), "{md}");
    }

    #[test]
    fn footnotes_quote_title_file_page_and_passage() {
        let md = markdown(&test_answer::answer(), &ExportOptions::default());
        assert!(
            md.starts_with("# What is \\<img src=x onerror=alert(1)> in Self-RAG?\n"),
            "{md}"
        );
        assert!(md.contains("It uses tokens.[^2] It is magic.[^1] Hope this helps.\n"));
        assert!(md.contains("[^2]: **Paper**, `/docs/paper.pdf`, p. 3\n    > Reflection tokens: IsRel, IsSup, IsUse.\n"));
        assert!(md.contains("    > Self-RAG critiques itself.\n    > \\<img"));
        assert!(
            !md.contains("Unused passage"),
            "uncited passages are not listed"
        );
        assert!(!md.contains("supported"), "no labels unless asked:\n{md}");
    }

    #[test]
    fn markup_from_documents_and_model_is_escaped() {
        let md = markdown(&test_answer::answer(), &ExportOptions::default());
        // Every `<` is escaped, so no renderer sees a tag.
        let bytes = md.as_bytes();
        for (i, _) in md.match_indices('<') {
            assert!(
                i > 0 && bytes[i - 1] == b'\\',
                "unescaped < at {i} in\n{md}"
            );
        }
        for raw in [XSS_IMG, XSS_SCRIPT] {
            assert!(md.contains(&escape(raw)), "{raw} is kept as text");
        }
        assert!(md.contains("\\<script>alert('x')\\</script>"));
        assert!(!md.contains("\n#"), "only the question is a heading");
    }

    #[test]
    fn support_labels_follow_each_segment() {
        let options = ExportOptions {
            support_labels: true,
            ..ExportOptions::default()
        };
        let md = markdown(&test_answer::answer(), &options);
        assert!(md.contains("itself.[^1] *(✓ Fully supported)*"), "{md}");
        assert!(md.contains("It uses tokens.[^2] *(◐ Partially supported)*"));
        assert!(md.contains("It is magic.[^1] *(✗ Not supported)*"));
        assert!(md.contains("Hope this helps. *(– No support judgement)*"));
    }

    #[test]
    fn only_supported_drops_the_rest_marks_the_gap_and_says_so() {
        let options = ExportOptions {
            only_supported: true,
            support_labels: true,
            ..ExportOptions::default()
        };
        let md = markdown(&test_answer::answer(), &options);
        assert!(md.contains("*Only fully supported sentences: 3 of 4 segments left out"));
        assert!(
            md.contains("itself.[^1] *(✓ Fully supported)* […]\n"),
            "{md}"
        );
        for dropped in ["It uses tokens", "It is magic", "Hope this helps", "[^2]"] {
            assert!(!md.contains(dropped), "{dropped} in\n{md}");
        }
    }

    fn styled(citations: CitationStyle) -> ExportOptions {
        ExportOptions {
            citations,
            ..ExportOptions::default()
        }
    }

    #[test]
    fn author_year_cites_once_a_sentence_and_lists_the_full_references() {
        let answer = answer_citing(article());
        let md = markdown(&answer, &styled(CitationStyle::AuthorYear));
        assert!(
            md.contains("It uses tokens (Marrow et al. 1998, p. 3). It is magic (Notes \\<script>alert('x')\\</script> & {braces}… n.d.). Hope this helps.\n"),
            "{md}"
        );
        assert!(md.contains("\n## References\n\n- Notes \\<script>"), "{md}");
        assert!(
            md.contains("- Ann Marrow, Bjørn Ødegård & World Health Organization (1998). Self-RAG and the Ålesund telemetry: 100% {sure} & more. *Journal of Telemetry & Control* 12(3), pp. 117–129. Nordic Press. <https://doi.org/10.1000/xyz_1>. File `/docs/paper.pdf`.\n\n    > p. 3:\n    >\n    > Reflection tokens: IsRel, IsSup, IsUse.\n"),
            "{md}"
        );
        assert!(!md.contains("[^"), "no footnotes: {md}");
        // Numbers stay what they were, work or no work.
        assert_eq!(
            markdown(&answer, &ExportOptions::default()),
            markdown(&test_answer::answer(), &ExportOptions::default())
        );
    }

    #[test]
    fn pandoc_style_cites_keys_at_printed_pages_one_cluster_a_sentence() {
        let mut answer = answer_citing(article());
        answer.question = "Mail @someone [x]?".into();
        // Two segments, one sentence: one cluster, before its full stop.
        answer.segments[0].text = "It critiques itself, and".into();
        answer.passages[1].page_label = Some("xii; @evil]".into());
        let md = markdown(&answer, &styled(CitationStyle::Pandoc));
        assert!(md.starts_with("# Mail \\@someone \\[x\\]?\n"), "{md}");
        assert!(
            md.contains("It critiques itself, and It uses tokens [@notes; @marrowTelemetry98, p. xii\\; \\@evil\\]]. It is magic [@notes]. Hope this helps.\n"),
            "{md}"
        );
        assert!(
            md.ends_with("\n## References\n\n::: {#refs}\n:::\n"),
            "{md}"
        );
        // Each passage is quoted under the work's label.
        assert!(md.contains("- Marrow et al. 1998, `/docs/paper.pdf`\n\n    > p. xii; \\@evil\\] (PDF page 3):\n"), "{md}");
        assert_eq!(pandoc_key("marrow1998"), "@marrow1998");
        assert_eq!(pandoc_key("doe:2001.x"), "@doe:2001.x");
        assert_eq!(pandoc_key("doe2001."), "@{doe2001.}");
        assert_eq!(pandoc_key("a(b)"), "@{a(b)}");
    }

    #[test]
    fn text_in_the_styles_by_work_stays_text() {
        for style in [CitationStyle::AuthorYear, CitationStyle::Pandoc] {
            let md = markdown(&answer_citing(article()), &styled(style));
            let bytes = md.as_bytes();
            for (i, _) in md.match_indices('<') {
                let escaped = i > 0 && bytes[i - 1] == b'\\';
                assert!(
                    escaped || md[i..].starts_with("<https://doi.org/"),
                    "unescaped < at {i} in\n{md}"
                );
            }
            for (i, _) in md.match_indices('[') {
                let escaped = i > 0 && bytes[i - 1] == b'\\';
                let ours = style == CitationStyle::Pandoc && md[i..].starts_with("[@");
                assert!(
                    escaped || ours || md[i..].starts_with("[…]"),
                    "unescaped [ at {i} in\n{md}"
                );
            }
        }
    }

    #[test]
    fn code_spans_hold_backticks() {
        assert_eq!(code_span("/a/b.md"), "`/a/b.md`");
        assert_eq!(code_span("/a/``b`.md"), "```/a/``b`.md```");
        assert_eq!(code_span("`x"), "`` `x ``");
    }
}
