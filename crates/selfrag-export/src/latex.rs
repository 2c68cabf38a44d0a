//! LaTeX export: the answer as a fragment to `\input` into a paper. The question is a
//! `\paragraph`, each sentence cites the works its segments cite with `\cite[p.~15]{key}` (the
//! printed page; the keys of the BibTeX and BibLaTeX exports of the same answer), a gap left by
//! the "only supported" filter is `[\ldots]`, and comments at the top say to export the BibTeX
//! next to it. Every piece of text is escaped by the BibTeX export's rules ([`crate::tex`]), so
//! nothing from a document or the model runs as a LaTeX command; a page label in a `\cite`'s
//! optional argument is braced, so a `]` in it cannot end the argument.

use selfrag_core::Answer;

use super::{ExportOptions, View, one_line};
use crate::cited::CitedWorks;
use crate::{SentenceCites, Support, tex};

/// The answer as a LaTeX fragment.
pub fn latex(answer: &Answer, options: &ExportOptions) -> String {
    let view = View::new(answer, options);
    let cited = CitedWorks::new(answer, &view);
    let encoding = options.bibtex_encoding;
    let esc = |s: &str| tex::text(&one_line(s), encoding);
    let mut out = String::from(
        "% An answer exported from Self-RAG Desktop as a LaTeX fragment: \\input it into a document.\n\
         % Its \\cite keys are those of the BibTeX export of the same answer: export that next to\n\
         % this file as refs.bib and load it with \\bibliography{refs} (BibTeX) or, from the BibLaTeX\n\
         % export, with \\addbibresource{refs.bib} (BibLaTeX and biber).\n",
    );
    out.push_str(&format!("\\paragraph{{{}}}\n", esc(view.question)));
    if let Some(note) = &view.note {
        out.push_str(&format!("\\emph{{{}}}\n\n", esc(note)));
    }
    let cluster = |numbers: &[usize]| {
        numbers
            .iter()
            .filter_map(|&n| {
                let (_, work) = cited.of(n)?;
                let page = view
                    .sources
                    .iter()
                    .find(|(m, _)| *m == n)
                    .and_then(|(_, p)| p.printed_page())
                    .map(|page| format!("[p.~{}]", tex::protect(&esc(&page))))
                    .unwrap_or_default();
                Some(format!("\\cite{page}{{{}}}", work.key))
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    let label = |support: Support| format!(" \\emph{{({})}}", support.label().to_lowercase());
    let sentences = SentenceCites {
        escape: &esc,
        cluster: &cluster,
        label: &label,
        gap: "[\\ldots]",
        before_cluster: "~",
    };
    out.push_str(&sentences.render(&view.pieces, options.support_labels));
    out.push('\n');
    if !view.options.is_empty() {
        out.push_str(&format!(
            "\n{}\n\\begin{{itemize}}\n",
            esc(crate::OPTIONS_CAPTION)
        ));
        for (option, chosen) in &view.options {
            out.push_str(&if *chosen {
                format!("  \\item \\textbf{{{}}}, chosen\n", esc(option))
            } else {
                format!("  \\item {}\n", esc(option))
            });
        }
        out.push_str("\\end{itemize}\n");
    }
    if let Some(provenance) = &view.provenance {
        out.push_str(&format!("\n\\emph{{{}}}\n", esc(provenance)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BibEncoding;
    use crate::test_answer::{self, answer_citing, article};

    #[test]
    fn sentences_cite_the_bibtex_keys_at_the_printed_page() {
        let mut answer = answer_citing(article());
        answer.passages[1].page_label = Some("118".into());
        let tex = latex(&answer, &ExportOptions::default());
        assert!(
            tex.contains("\\paragraph{What is <img src=x onerror=alert(1)> in Self-RAG?}\n"),
            "{tex}"
        );
        assert!(
            tex.contains("It critiques <script>alert('x')</script> itself~\\cite{notes}. It uses tokens~\\cite[p.~{118}]{marrowTelemetry98}. It is magic~\\cite{notes}. Hope this helps.\n"),
            "{tex}"
        );
        assert!(tex.contains("% Its \\cite keys are those of the BibTeX export"));
        let bib = crate::bibtex(&answer, &ExportOptions::default());
        assert!(bib.contains("@article{marrowTelemetry98,") && bib.contains("@misc{notes,"));
    }

    #[test]
    fn text_and_page_labels_cannot_run_commands_or_end_the_argument() {
        let mut answer = test_answer::answer();
        answer.question = "\\input{/etc/passwd} 100% & $x$ Ødegård".into();
        answer.segments[1].text = "See \\write18{rm -rf ~} here.".into();
        answer.passages[1].page_label = Some("3]{x}\\def".into());
        let options = ExportOptions {
            bibtex_encoding: BibEncoding::Ascii,
            support_labels: true,
            ..ExportOptions::default()
        };
        let tex = latex(&answer, &options);
        assert!(
            !tex.contains("\\input{") && !tex.contains("\\write18"),
            "{tex}"
        );
        assert!(tex.contains("\\paragraph{\\textbackslash{}input\\textbraceleft{}/etc/passwd\\textbraceright{} 100\\% \\& \\$x\\$ {\\O}deg{\\aa}rd}"), "{tex}");
        assert!(
            tex.contains(
                "\\cite[p.~{3]\\textbraceleft{}x\\textbraceright{}\\textbackslash{}def}]{paper}"
            ),
            "{tex}"
        );
        assert!(
            tex.contains("~\\cite{notes}. \\emph{(fully supported)}"),
            "{tex}"
        );
        assert!(tex.is_ascii());
    }

    #[test]
    fn several_passages_of_one_sentence_share_one_place() {
        let mut answer = test_answer::answer();
        // "It critiques … itself" and "It uses tokens." become one sentence.
        answer.segments[0].text = "It critiques itself, and".into();
        let tex = latex(&answer, &ExportOptions::default());
        assert!(
            tex.contains(
                "It critiques itself, and It uses tokens~\\cite{notes}; \\cite[p.~{3}]{paper}."
            ),
            "{tex}"
        );
        let gap = latex(
            &answer,
            &ExportOptions {
                only_supported: true,
                ..ExportOptions::default()
            },
        );
        assert!(
            gap.contains("It critiques itself, and~\\cite{notes} [\\ldots]\n"),
            "{gap}"
        );
    }
}
