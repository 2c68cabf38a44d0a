//! Markdown export: the question as the heading, each segment followed by its footnote marker
//! (and, if asked, its IsSup verdict), a closed-set question's options with their scores, one
//! footnote per cited passage with its title, file, page and the quoted passage.
//!
//! Text from documents and the model is written as text: a `<` is backslash-escaped so a
//! Markdown renderer never turns `<script>` or `<img onerror=…>` into HTML, `[` and `]` so that
//! `![](https://tracker/p.png)` or `[x](javascript:…)` in a document never becomes a live image
//! or link, and a file path is a code span fenced with more backticks than it contains.

use selfrag_core::Answer;

use super::{ExportOptions, OPTIONS_CAPTION, Piece, View, one_line};

/// The answer as Markdown.
pub fn markdown(answer: &Answer, options: &ExportOptions) -> String {
    let view = View::new(answer, options);
    let mut out = format!("# {}\n\n", escape(&one_line(view.question)));
    if let Some(note) = &view.note {
        out.push_str(&format!("*{}*\n\n", escape(note)));
    }
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
                    s.push_str(&format!(" *({} {})*", support.icon(), support.label()));
                }
                s
            }
        })
        .collect();
    out.push_str(&body.join(" "));
    out.push('\n');
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
    use crate::test_answer::{self, XSS_IMG, XSS_SCRIPT};

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

    #[test]
    fn code_spans_hold_backticks() {
        assert_eq!(code_span("/a/b.md"), "`/a/b.md`");
        assert_eq!(code_span("/a/``b`.md"), "```/a/``b`.md```");
        assert_eq!(code_span("`x"), "`` `x ``");
    }
}
