//! HTML export: one self-contained page with inline CSS and no script. Every piece of text
//! (question, answer, titles, file names, passages) is escaped, and the page's own
//! Content-Security-Policy forbids scripts, so a document containing `<script>` or
//! `<img src=x onerror=…>` shows those characters and runs nothing in any browser.
//!
//! Citations are numbers linking to the numbered sources, or (author–year, and pandoc's style,
//! which in HTML is author–year) one `(Marrow & Ødegård 1998, p. 2)` per sentence linking to
//! a reference list of the cited works. Each work with a DOI links to it
//! (`https://doi.org/…`, percent-encoded): the page's only links that leave it.

use selfrag_core::{Answer, Passage};
use selfrag_works::cite::doi_url;

use super::{ExportOptions, OPTIONS_CAPTION, Piece, View, one_line};
use crate::cited::{CitedWork, CitedWorks};
use crate::{CitationStyle, SentenceCites, Support};

const STYLE: &str = "
:root { color-scheme: light dark; --muted: #5b616e; --border: #d9dce1; --good: #1d7a3e; --partial: #8a5a00; --bad: #b3261e; }
@media (prefers-color-scheme: dark) { :root { --muted: #a2a8b3; --border: #3a3f47; --good: #6fcf8f; --partial: #e8bb5c; --bad: #f08a82; } }
body { font-family: system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif; line-height: 1.6; max-width: 46rem; margin: 2rem auto; padding: 0 1rem; }
h1 { font-size: 1.5rem; line-height: 1.3; }
.note { color: var(--muted); font-style: italic; }
.provenance { color: var(--muted); font-size: 0.85rem; }
.answer { font-size: 1.1rem; }
.gap { color: var(--muted); }
sup a { text-decoration: none; }
.support { font-size: 0.8rem; border: 1px solid currentColor; border-radius: 4px; padding: 0 0.3em; margin-left: 0.2em; white-space: nowrap; }
.support-full { color: var(--good); }
.support-partial { color: var(--partial); }
.support-none { color: var(--bad); }
.support-unjudged { color: var(--muted); }
.sources li { margin-bottom: 1rem; }
.sources code { overflow-wrap: anywhere; }
blockquote { margin: 0.4rem 0 0; padding-left: 0.8rem; border-left: 3px solid var(--border); white-space: pre-wrap; }
footer { margin-top: 2rem; color: var(--muted); font-size: 0.85rem; }
";

/// The answer as a standalone HTML page.
pub fn html(answer: &Answer, options: &ExportOptions) -> String {
    let view = View::new(answer, options);
    let question = escape(&one_line(view.question));
    let mut out = String::new();
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    // No script, no network: only the inline style may apply.
    out.push_str("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    out.push_str("<meta name=\"generator\" content=\"Self-RAG Desktop\">\n");
    out.push_str(&format!(
        "<title>{question}</title>\n<style>{STYLE}</style>\n"
    ));
    out.push_str("</head>\n<body>\n<main>\n");
    out.push_str(&format!("<h1>{question}</h1>\n"));
    if let Some(note) = &view.note {
        out.push_str(&format!("<p class=\"note\">{}</p>\n", escape(note)));
    }
    out.push_str("<p class=\"answer\">");
    let by_work = options.citations != CitationStyle::Numbers;
    let cited = CitedWorks::new(answer, &view);
    if by_work {
        out.push_str(&author_year_body(&view, &cited, options));
    } else {
        out.push_str(&numbered_body(&view, options));
    }
    out.push_str("</p>\n");
    if !view.options.is_empty() {
        out.push_str(&format!(
            "<p>{OPTIONS_CAPTION}</p>\n<ul class=\"options\">\n"
        ));
        for (option, chosen) in &view.options {
            let option = escape(option);
            out.push_str(&if *chosen {
                format!("<li><strong>{option}</strong>, chosen</li>\n")
            } else {
                format!("<li>{option}</li>\n")
            });
        }
        out.push_str("</ul>\n");
    }
    if let Some(provenance) = &view.provenance {
        out.push_str(&format!(
            "<p class=\"provenance\">{}</p>\n",
            escape(provenance)
        ));
    }
    if by_work {
        out.push_str(&references(&cited));
    } else if !view.sources.is_empty() {
        out.push_str("<section class=\"sources\">\n<h2>Sources</h2>\n<ol>\n");
        for (n, p) in &view.sources {
            let page = crate::source_details(p, escape);
            let doi = p
                .work
                .as_ref()
                .and_then(|w| selfrag_works::Work::text(&w.doi))
                .map(|doi| format!(", {}", doi_link(doi)))
                .unwrap_or_default();
            out.push_str(&format!(
                "<li id=\"source-{n}\" value=\"{n}\"><strong>{}</strong>, <code>{}</code>{page}{doi}\n<blockquote>{}</blockquote></li>\n",
                escape(&one_line(&p.title)),
                escape(&p.path),
                escape(p.text.trim()),
            ));
        }
        out.push_str("</ol>\n</section>\n");
    }
    out.push_str("<footer>Exported from Self-RAG Desktop.</footer>\n</main>\n</body>\n</html>\n");
    out
}

/// The segments with numbered citations linking to their sources.
fn numbered_body(view: &View<'_>, options: &ExportOptions) -> String {
    let body: Vec<String> = view
        .pieces
        .iter()
        .map(|piece| match piece {
            Piece::Gap => GAP.to_string(),
            Piece::Segment {
                text,
                citation,
                support,
            } => {
                let mut s = escape(text);
                if let Some(n) = citation {
                    s.push_str(&format!("<sup><a href=\"#source-{n}\">[{n}]</a></sup>"));
                }
                if options.support_labels {
                    s.push_str(&support_badge(*support));
                }
                s
            }
        })
        .collect();
    body.join(" ")
}

const GAP: &str = "<span class=\"gap\" title=\"left out: not fully supported\">[…]</span>";

fn support_badge(support: Support) -> String {
    format!(
        "<span class=\"support support-{}\">{} {}</span>",
        support.key(),
        support.icon(),
        support.label()
    )
}

/// The segments with one `(Marrow & Ødegård 1998, p. 2)` per sentence, each name linking to
/// its reference.
fn author_year_body(view: &View<'_>, cited: &CitedWorks<'_>, options: &ExportOptions) -> String {
    let page_of = |n: usize| -> Option<String> {
        view.sources
            .iter()
            .find(|(m, _)| *m == n)
            .and_then(|(_, p)| p.printed_page())
    };
    let cluster = |numbers: &[usize]| {
        let cites: Vec<String> = numbers
            .iter()
            .filter_map(|&n| {
                let (at, work) = cited.of(n)?;
                let page = page_of(n)
                    .map(|page| format!(", p. {}", escape(&one_line(&page))))
                    .unwrap_or_default();
                Some(format!(
                    "<a href=\"#ref-{}\">{}</a>{page}",
                    at + 1,
                    escape(&work.label())
                ))
            })
            .collect();
        if cites.is_empty() {
            return String::new();
        }
        format!("<span class=\"cite\">({})</span>", cites.join("; "))
    };
    let sentences = SentenceCites {
        escape: &escape,
        cluster: &cluster,
        label: &support_badge,
        gap: GAP,
        before_cluster: " ",
    };
    sentences.render(&view.pieces, options.support_labels)
}

/// The reference list: each cited work's full reference, its DOI linked, its file, and the
/// passages cited quoted with their pages.
fn references(cited: &CitedWorks<'_>) -> String {
    if cited.works.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<section class=\"sources\">\n<h2>References</h2>\n<ul class=\"references\">\n",
    );
    for (i, work) in cited.works.iter().enumerate() {
        out.push_str(&format!("<li id=\"ref-{}\">{}", i + 1, reference(work)));
        for (_, p) in &work.passages {
            out.push_str(&format!("\n<blockquote>{}</blockquote>", quoted(p)));
        }
        out.push_str("</li>\n");
    }
    out.push_str("</ul>\n</section>\n");
    out
}

/// A passage with its page (and OCR note) first.
fn quoted(p: &Passage) -> String {
    let details: Vec<String> = p.page_citation().into_iter().chain(p.ocr_note()).collect();
    let text = escape(p.text.trim());
    if details.is_empty() {
        text
    } else {
        format!(
            "<span class=\"page\">{}:</span> {text}",
            escape(&details.join(", "))
        )
    }
}

/// "Ann Marrow &amp; Bjørn Ødegård (1998). Title. <em>Journal</em> 12(3), pp. 117–129.
/// Publisher. <a href=…>https://doi.org/…</a>. <code>/docs/a.pdf</code>"
fn reference(work: &CitedWork<'_>) -> String {
    let r = work.reference();
    let mut parts: Vec<String> = Vec::new();
    let year = escape(&r.year);
    let title = r
        .title
        .as_deref()
        .map(|t| format!("<strong>{}</strong>", escape(t.trim_end_matches('.'))));
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
        (Some(container), true) => parts.push(format!("<em>{}</em>.", escape(container))),
        (Some(container), false) => parts.push(format!(
            "<em>{}</em> {}.",
            escape(container),
            escape(&r.details)
        )),
        (None, false) => parts.push(format!("{}.", escape(&r.details))),
        (None, true) => {}
    }
    if let Some(publisher) = &r.publisher {
        parts.push(format!("{}.", escape(publisher)));
    }
    if let Some(doi) = &r.doi {
        parts.push(format!("{}.", doi_link(doi)));
    } else if let Some(url) = &r.url {
        parts.push(format!("{}.", escape(url)));
    }
    parts.push(format!("<code>{}</code>", escape(work.path)));
    parts.join(" ")
}

/// A link to a DOI: its address built from it and percent-encoded ([`doi_url`]), so no DOI can
/// make it point anywhere but doi.org.
fn doi_link(doi: &str) -> String {
    let url = escape(&doi_url(doi));
    format!("<a class=\"doi\" href=\"{url}\">{url}</a>")
}

/// Text as HTML text or attribute value: the five characters with a meaning in markup become
/// entities.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + s.len() / 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_answer::{self, XSS_IMG, XSS_SCRIPT, answer_citing, article};

    /// The tag names that appear in the page: only the ones the renderer writes itself.
    fn tags(page: &str) -> Vec<String> {
        page.split('<')
            .skip(1)
            .map(|rest| {
                rest.trim_start_matches('/')
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '!')
                    .collect::<String>()
                    .to_ascii_lowercase()
            })
            .collect()
    }

    #[test]
    fn hostile_text_everywhere_comes_out_as_text() {
        let options = ExportOptions {
            support_labels: true,
            ..ExportOptions::default()
        };
        let page = html(&test_answer::answer(), &options);
        let allowed = [
            "!doctype",
            "html",
            "head",
            "meta",
            "title",
            "style",
            "body",
            "main",
            "h1",
            "h2",
            "p",
            "span",
            "sup",
            "a",
            "section",
            "ol",
            "li",
            "strong",
            "code",
            "blockquote",
            "footer",
        ];
        for tag in tags(&page) {
            assert!(
                allowed.contains(&tag.as_str()),
                "unexpected <{tag}> in\n{page}"
            );
        }
        let lower = page.to_ascii_lowercase();
        assert!(
            !lower.contains("<script") && !lower.contains("<img"),
            "{page}"
        );
        // Question, segment, title and passage keep the characters, as text.
        assert_eq!(
            page.matches(&escape(XSS_IMG)).count(),
            3,
            "title, h1, passage"
        );
        assert_eq!(
            page.matches(&escape(XSS_SCRIPT)).count(),
            2,
            "segment, title"
        );
        assert!(page.contains("&lt;img src=x onerror=alert(1)&gt;"));
        assert!(page.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"));
        assert!(page.contains("<code>/docs/notes_{x}.md</code>"));
        assert!(page.contains("&amp; {braces} 100% $5"));
    }

    #[test]
    fn the_page_is_self_contained_and_forbids_scripts() {
        let page = html(&test_answer::answer(), &ExportOptions::default());
        assert!(page.starts_with("<!DOCTYPE html>"));
        assert!(page.contains("content=\"default-src 'none'; style-src 'unsafe-inline'\""));
        for external in ["src=\"", "<link", "http://", "https://", "@import", "url("] {
            assert!(!page.contains(external), "{external} in\n{page}");
        }
        for (i, _) in page.match_indices("href=\"") {
            assert!(page[i + 6..].starts_with('#'), "only links within the page");
        }
        assert!(!page.contains("class=\"support "), "no labels unless asked");
    }

    #[test]
    fn citations_link_to_their_source_with_file_page_and_passage() {
        let page = html(&test_answer::answer(), &ExportOptions::default());
        assert!(page.contains("It uses tokens.<sup><a href=\"#source-2\">[2]</a></sup>"));
        assert!(page.contains("<li id=\"source-2\" value=\"2\"><strong>Paper</strong>, <code>/docs/paper.pdf</code>, p. 3\n<blockquote>Reflection tokens: IsRel, IsSup, IsUse.</blockquote></li>"));
        assert!(!page.contains("Unused passage"));
    }

    #[test]
    fn author_year_links_each_citation_to_its_reference_and_each_reference_to_its_doi() {
        let answer = answer_citing(article());
        for style in [CitationStyle::AuthorYear, CitationStyle::Pandoc] {
            let options = ExportOptions {
                citations: style,
                ..ExportOptions::default()
            };
            let page = html(&answer, &options);
            assert!(
                page.contains("It uses tokens <span class=\"cite\">(<a href=\"#ref-2\">Marrow et al. 1998</a>, p. 3)</span>."),
                "{page}"
            );
            assert!(
                page.contains("<li id=\"ref-2\">Ann Marrow, Bjørn Ødegård &amp; World Health Organization (1998). <strong>Self-RAG and the Ålesund telemetry: 100% {sure} &amp; more</strong>. <em>Journal of Telemetry &amp; Control</em> 12(3), pp. 117–129. Nordic Press. <a class=\"doi\" href=\"https://doi.org/10.1000/xyz_1\">https://doi.org/10.1000/xyz_1</a>. <code>/docs/paper.pdf</code>\n<blockquote><span class=\"page\">p. 3:</span> Reflection tokens: IsRel, IsSup, IsUse.</blockquote></li>"),
                "{page}"
            );
            assert!(!page.contains("source-"), "{page}");
            let allowed = [
                "!doctype",
                "html",
                "head",
                "meta",
                "title",
                "style",
                "body",
                "main",
                "h1",
                "h2",
                "p",
                "span",
                "a",
                "section",
                "ul",
                "li",
                "strong",
                "em",
                "code",
                "blockquote",
                "footer",
            ];
            for tag in tags(&page) {
                assert!(
                    allowed.contains(&tag.as_str()),
                    "unexpected <{tag}> in\n{page}"
                );
            }
        }
    }

    #[test]
    fn a_numbered_source_links_its_doi_and_a_hostile_doi_stays_inside_the_link() {
        let page = html(&answer_citing(article()), &ExportOptions::default());
        assert!(page.contains("<code>/docs/paper.pdf</code>, p. 3, <a class=\"doi\" href=\"https://doi.org/10.1000/xyz_1\">https://doi.org/10.1000/xyz_1</a>\n<blockquote>"), "{page}");
        let mut work = article();
        work.doi = Some(selfrag_works::Sourced::new(
            "10.1/\"><script>alert(1)</script><a href=\"javascript:x".into(),
            selfrag_works::FieldSource::BibliographyFile,
        ));
        for citations in [CitationStyle::Numbers, CitationStyle::AuthorYear] {
            let options = ExportOptions {
                citations,
                ..ExportOptions::default()
            };
            let page = html(&answer_citing(work.clone()), &options);
            assert!(!page.to_ascii_lowercase().contains("<script"), "{page}");
            assert!(!page.contains("href=\"javascript"), "{page}");
            for (i, _) in page.match_indices("href=\"") {
                let target = &page[i + 6..];
                assert!(
                    target.starts_with('#')
                        || target.starts_with("https://doi.org/10.1/%22%3E%3Cscript%3E"),
                    "{page}"
                );
            }
        }
    }

    #[test]
    fn only_supported_with_labels() {
        let options = ExportOptions {
            support_labels: true,
            only_supported: true,
            ..ExportOptions::default()
        };
        let page = html(&test_answer::answer(), &options);
        assert!(page.contains("<p class=\"note\">Only fully supported sentences: 3 of 4"));
        assert!(page.contains(
            "<span class=\"support support-full\">✓ Fully supported</span> <span class=\"gap\""
        ));
        for dropped in ["It uses tokens", "It is magic", "source-2", "Partially"] {
            assert!(!page.contains(dropped), "{dropped} in\n{page}");
        }
    }
}
