//! HTML export: one self-contained page with inline CSS and no script. Every piece of text
//! (question, answer, titles, file names, passages) is escaped, and the page's own
//! Content-Security-Policy forbids scripts, so a document containing `<script>` or
//! `<img src=x onerror=…>` shows those characters and runs nothing in any browser.

use selfrag_core::Answer;

use super::{ExportOptions, OPTIONS_CAPTION, Piece, View, one_line};

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
    let body: Vec<String> = view
        .pieces
        .iter()
        .map(|piece| match piece {
            Piece::Gap => {
                "<span class=\"gap\" title=\"left out: not fully supported\">[…]</span>".to_string()
            }
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
                    s.push_str(&format!(
                        "<span class=\"support support-{}\">{} {}</span>",
                        support.key(),
                        support.icon(),
                        support.label()
                    ));
                }
                s
            }
        })
        .collect();
    out.push_str(&body.join(" "));
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
    if !view.sources.is_empty() {
        out.push_str("<section class=\"sources\">\n<h2>Sources</h2>\n<ol>\n");
        for (n, p) in &view.sources {
            let page = crate::source_details(p, escape);
            out.push_str(&format!(
                "<li id=\"source-{n}\" value=\"{n}\"><strong>{}</strong>, <code>{}</code>{page}\n<blockquote>{}</blockquote></li>\n",
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
    use crate::test_answer::{self, XSS_IMG, XSS_SCRIPT};

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
