//! Hand-made Self-RAG traces for the tests of the crates that store, search, render or export
//! answers: a question, its passages and its segments as a test names them, every other field
//! at a neutral value (default settings, a retrieve decision of p = 0.9, no tree).

use selfrag_core::{
    Answer, Candidate, IsSupDistribution, Passage, RetrieveDecision, Segment, Settings,
};

/// Builds an [`Answer`] step by step.
#[derive(Debug, Clone)]
pub struct TraceBuilder {
    answer: Answer,
}

impl TraceBuilder {
    /// An answer to `question` with the default settings, no passage and no segment.
    pub fn new(question: impl Into<String>) -> Self {
        Self {
            answer: Answer {
                question: question.into(),
                settings: Settings::default(),
                retrieve: RetrieveDecision {
                    p_retrieve: 0.9,
                    retrieved: true,
                    found_nothing: false,
                    passages_dropped: 0,
                    retrieval_is_argmax: None,
                },
                passages: Vec::new(),
                segments: Vec::new(),
                expansions: Vec::new(),
                answer: String::new(),
                generator: None,
                embedder: None,
                cut_short: None,
                timings: None,
                closed_set: None,
            },
        }
    }

    #[must_use]
    pub fn settings(mut self, settings: Settings) -> Self {
        self.answer.settings = settings;
        self
    }

    /// Adds a passage; the first is cited as `[1]`.
    #[must_use]
    pub fn passage(mut self, title: &str, path: &str, page: Option<u32>, text: &str) -> Self {
        let id = format!("p{}", self.answer.passages.len() + 1);
        self.answer.passages.push(Passage {
            id,
            title: title.into(),
            path: path.into(),
            page,
            page_label: None,
            ocr_confidence: None,
            text: text.into(),
            work: None,
        });
        self
    }

    /// Gives the passage added last the work its document holds (as the library records it).
    #[must_use]
    pub fn work(mut self, work: selfrag_works::Work) -> Self {
        if let Some(passage) = self.answer.passages.last_mut() {
            passage.work = Some(work);
        }
        self
    }

    /// Gives the passage added last the number printed on its page.
    #[must_use]
    pub fn page_label(mut self, label: &str) -> Self {
        if let Some(passage) = self.answer.passages.last_mut() {
            passage.page_label = Some(label.into());
        }
        self
    }

    /// Adds a segment of one candidate, written from the passage cited as `citation` (1-based)
    /// or without one, with IsSup `[fully, partially, no support]` where it was judged.
    #[must_use]
    pub fn segment(mut self, text: &str, citation: Option<usize>, issup: Option<[f32; 3]>) -> Self {
        self.answer.segments.push(Segment {
            text: text.into(),
            citation,
            chosen: 0,
            candidates: vec![candidate(text, citation.map(|c| c - 1), issup)],
            retrieve: None,
            excluded: Vec::new(),
        });
        self
    }

    /// The answer's text as a run would have assembled it.
    #[must_use]
    pub fn text(mut self, text: impl Into<String>) -> Self {
        self.answer.answer = text.into();
        self
    }

    /// The answer, with the verdicts the core derives from its distributions.
    pub fn build(mut self) -> Answer {
        self.answer.refresh_verdicts();
        self.answer
    }
}

/// A candidate written from `passage` (an index into the answer's passages), p_LM 0.5 and no
/// score, with IsSup `[fully, partially, no support]` where it was judged.
pub fn candidate(text: &str, passage: Option<usize>, issup: Option<[f32; 3]>) -> Candidate {
    Candidate {
        passage,
        text: text.into(),
        raw: text.into(),
        p_lm: 0.5,
        isrel: None,
        issup: issup.map(|[fully, partially, no_support]| IsSupDistribution {
            fully,
            partially,
            no_support,
        }),
        isuse: None,
        s_rel: 0.0,
        s_sup: 0.0,
        s_use: 0.0,
        score: 0.0,
        ends_answer: false,
        continued: false,
        evidence_issup: None,
        passages_dropped: 0,
        violates: Vec::new(),
        verdicts: selfrag_core::Verdicts::default(),
    }
}
