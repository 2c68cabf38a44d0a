//! Fuzzes the export renderers (Markdown, HTML, JSON, BibTeX, BibLaTeX, CSL-JSON, RIS and
//! LaTeX, each with and without the "only fully supported" filter and support labels, in every
//! citation style and both encodings) on answers built from the input: any text in the
//! question, segments, titles, paths and passages; citations and chosen candidates in or out of
//! range; any probabilities (NaN and infinities included). No panic; the JSON export of finite
//! numbers reads back.

#![no_main]

use libfuzzer_sys::fuzz_target;
use selfrag_core::{
    Answer, Candidate, IsSupDistribution, Passage, RetrieveDecision, Segment, Settings, Verdicts,
};
use selfrag_export::{BibEncoding, CitationStyle, ExportFormat, ExportOptions, render_with};

/// Reads fields off the input: strings up to a 0xFF byte, numbers from single bytes.
struct Fields<'a>(std::slice::Iter<'a, u8>);

impl Fields<'_> {
    fn byte(&mut self) -> u8 {
        self.0.next().copied().unwrap_or(0)
    }

    fn text(&mut self) -> String {
        let mut bytes = Vec::new();
        for &b in self.0.by_ref() {
            if b == 0xFF {
                break;
            }
            bytes.push(b);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }

    fn probability(&mut self) -> f32 {
        match self.byte() {
            250 => f32::NAN,
            251 => f32::INFINITY,
            252 => f32::NEG_INFINITY,
            253 => -1.0,
            b => f32::from(b) / 249.0,
        }
    }

    /// `None` or a small index, sometimes out of range.
    fn index(&mut self) -> Option<usize> {
        match self.byte() {
            0 => None,
            b => Some(usize::from(b % 8)),
        }
    }
}

fn answer(data: &[u8]) -> Answer {
    let mut f = Fields(data.iter());
    let question = f.text();
    let passages = (0..f.byte() % 5)
        .map(|i| Passage {
            id: format!("p{i}"),
            title: f.text(),
            path: f.text(),
            page: f.index().map(|p| p as u32),
            page_label: None,
            ocr_confidence: None,
            text: f.text(),
            work: None,
        })
        .collect();
    let segments = (0..f.byte() % 6)
        .map(|_| {
            let text = f.text();
            let candidates = (0..f.byte() % 3)
                .map(|_| Candidate {
                    passage: f.index(),
                    text: text.clone(),
                    raw: f.text(),
                    p_lm: f.probability(),
                    isrel: None,
                    issup: (f.byte() % 2 == 0).then(|| IsSupDistribution {
                        fully: f.probability(),
                        partially: f.probability(),
                        no_support: f.probability(),
                    }),
                    isuse: None,
                    s_rel: f.probability(),
                    s_sup: f.probability(),
                    s_use: f.probability(),
                    score: f.probability(),
                    ends_answer: false,
                    continued: false,
                    evidence_issup: None,
                    passages_dropped: 0,
                    violates: Vec::new(),
                    verdicts: Verdicts::default(),
                })
                .collect();
            Segment {
                text,
                citation: f.index(),
                chosen: usize::from(f.byte() % 4),
                candidates,
                retrieve: None,
                excluded: Vec::new(),
            }
        })
        .collect();
    let mut answer = Answer {
        question,
        settings: Settings {
            long_form: f.byte() % 2 == 0,
            ..Settings::default()
        },
        retrieve: RetrieveDecision {
            p_retrieve: f.probability(),
            retrieved: true,
            found_nothing: false,
            passages_dropped: 0,
            retrieval_is_argmax: None,
        },
        passages,
        segments,
        expansions: Vec::new(),
        answer: f.text(),
        generator: None,
        embedder: None,
        cut_short: None,
        timings: None,
        closed_set: None,
    };
    // The verdicts the core derives, as every answer the app exports has them.
    answer.refresh_verdicts();
    answer
}

fuzz_target!(|data: &[u8]| {
    let answer = answer(data);
    let styles = [
        (CitationStyle::Numbers, BibEncoding::Utf8),
        (CitationStyle::AuthorYear, BibEncoding::Ascii),
        (CitationStyle::Pandoc, BibEncoding::Utf8),
    ];
    for format in ExportFormat::ALL {
        for ((support_labels, only_supported), (citations, bibtex_encoding)) in
            [(false, false), (true, false), (true, true)]
                .into_iter()
                .zip(styles)
        {
            let options = ExportOptions {
                format,
                support_labels,
                only_supported,
                citations,
                bibtex_encoding,
            };
            let text = render_with(&answer, &options);
            // serde_json writes NaN and infinities as `null`, which no f32 reads back: a trace
            // with a non-finite probability is not re-readable, which is the trace's contract.
            if format == ExportFormat::Json && !text.contains("null") {
                let back: Result<Answer, _> = serde_json::from_str(&text);
                assert!(back.is_ok(), "the JSON export does not read back: {text}");
            }
        }
    }
});
