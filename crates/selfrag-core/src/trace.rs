//! The answer and its full reflection record: the JSON trace that the UI, the exports and
//! outside checks read (a public contract, see issue "The JSON trace"). Every score can be
//! recomputed from the distributions stored here.

use serde::{Deserialize, Serialize};

use crate::backend::{CachePrecision, DeviceKind, DummyPrefix, EmbedderPrecision, Passage};
use crate::settings::Settings;

/// The retrieve decision at the start of the answer.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct RetrieveDecision {
    /// p(Retrieval) / (p(Retrieval) + p(No Retrieval)) at the first position after the prompt.
    pub p_retrieve: f32,
    /// Whether passages were retrieved.
    pub retrieved: bool,
    /// The run chose to retrieve and the library returned no passage, so the answer was
    /// written without one (`retrieved` is then false). Absent when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[cfg_attr(feature = "typescript", ts(type = "boolean | undefined"))]
    pub found_nothing: bool,
    /// Passages of earlier segments left out of the prompt it was read after, to fit the
    /// context (long form; see [`Candidate::passages_dropped`]). Absent when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[cfg_attr(feature = "typescript", ts(type = "number | undefined"))]
    pub passages_dropped: usize,
    /// Whether `[Retrieval]` was the most probable next token over the whole vocabulary: read
    /// in `model` mode only (see [`crate::RetrieveMode::retrieves`]). Absent when not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "typescript", ts(type = "boolean | undefined"))]
    pub retrieval_is_argmax: Option<bool>,
}

/// A verdict of the model's own critique that the hard constraints drop a candidate for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub enum HardConstraint {
    /// IsRel: `[Irrelevant]` is more likely than `[Relevant]`.
    Irrelevant,
    /// IsSup: `[No support / Contradictory]` is the most likely of the three.
    Unsupported,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// IsRel: the model's probabilities of the two IsRel tokens at the first generated position.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct IsRelDistribution {
    #[serde(rename = "[Relevant]")]
    pub relevant: f32,
    #[serde(rename = "[Irrelevant]")]
    pub irrelevant: f32,
}

/// IsSup: the model's probabilities of the three IsSup tokens where it emitted one.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct IsSupDistribution {
    #[serde(rename = "[Fully supported]")]
    pub fully: f32,
    #[serde(rename = "[Partially supported]")]
    pub partially: f32,
    #[serde(rename = "[No support / Contradictory]")]
    pub no_support: f32,
}

/// IsUse: the model's probabilities of the five utility tokens where it emitted one.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct IsUseDistribution {
    #[serde(rename = "[Utility:1]")]
    pub u1: f32,
    #[serde(rename = "[Utility:2]")]
    pub u2: f32,
    #[serde(rename = "[Utility:3]")]
    pub u3: f32,
    #[serde(rename = "[Utility:4]")]
    pub u4: f32,
    #[serde(rename = "[Utility:5]")]
    pub u5: f32,
}

/// One candidate segment: written from one passage (or none) and critiqued by the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct Candidate {
    /// Index into `Answer::passages` of the passage it was written from; `None` without retrieval.
    pub passage: Option<usize>,
    /// The segment text with every reflection token, `<pad>` and `</s>` stripped.
    pub text: String,
    /// The raw generated text, reflection tokens included (for the inspector).
    #[serde(default)]
    pub raw: String,
    /// p_LM: exp(mean log p) over the generated tokens the trace's `settings.p_lm_tokens`
    /// names (every token, or the text tokens only).
    pub p_lm: f32,
    pub isrel: Option<IsRelDistribution>,
    pub issup: Option<IsSupDistribution>,
    pub isuse: Option<IsUseDistribution>,
    pub s_rel: f32,
    pub s_sup: f32,
    pub s_use: f32,
    /// The segment score f under the trace's settings.
    pub score: f32,
    /// The model ended the answer with it (`</s>`): a long-form path through it goes no
    /// further. Absent when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[cfg_attr(feature = "typescript", ts(type = "boolean | undefined"))]
    pub ends_answer: bool,
    /// Written after `[Continue to Use Evidence]` (long form): it reads the passage of the
    /// segment before, already in its prompt, and carries that segment's IsRel judgement, as
    /// the model does not judge a passage twice. Absent when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[cfg_attr(feature = "typescript", ts(type = "boolean | undefined"))]
    pub continued: bool,
    /// Continued segments only: the IsSup last given on the passage it reads on, along its
    /// path. The model never writes IsSup after `[Continue to Use Evidence]` in its training
    /// data, so long form ranked `normalised` counts this one where the segment wrote none.
    /// It is not this segment's own judgement: `issup`, its badge and `score` (f) do not
    /// include it. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "typescript", ts(optional))]
    pub evidence_issup: Option<IsSupDistribution>,
    /// Passages of earlier segments left out of its prompt, oldest first, because the whole
    /// path did not fit the prompt budget (`settings.prompt_budget`, held to the model's
    /// context; long form). Their `[Retrieval]` tokens and every
    /// reflection token stay. Absent when 0: the prompt held the path exactly as the model
    /// wrote it, passages included, as in training.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[cfg_attr(feature = "typescript", ts(type = "number | undefined"))]
    pub passages_dropped: usize,
    /// What the hard constraints (step 6) hold against it, whether or not they are on: its
    /// passage judged irrelevant, its text judged unsupported. Absent when nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "typescript", ts(type = "Array<HardConstraint> | undefined"))]
    pub violates: Vec<HardConstraint>,
    /// What the model's critique says of it, group by group: what its badges show.
    #[serde(default)]
    pub verdicts: Verdicts,
}

/// The verdict of each critique group: its most probable token, ties going to the better
/// verdict (so a candidate is irrelevant or unsupported exactly when [`Candidate::violates`]
/// says so). `None` where the model emitted no token of the group.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct Verdicts {
    pub isrel: Option<IsRelVerdict>,
    pub issup: Option<IsSupVerdict>,
    /// 1 to 5, as in `[Utility:n]`.
    pub isuse: Option<u8>,
}

/// IsRel's verdict: `[Relevant]` or `[Irrelevant]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub enum IsRelVerdict {
    Relevant,
    Irrelevant,
}

/// IsSup's verdict: `[Fully supported]`, `[Partially supported]` or
/// `[No support / Contradictory]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub enum IsSupVerdict {
    Fully,
    Partially,
    NoSupport,
}

/// One segment of the answer: its chosen candidate and the rejected ones.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct Segment {
    /// Text of the chosen candidate.
    pub text: String,
    /// 1-based index into `Answer::passages`, numbered by first use; `None` if uncited.
    pub citation: Option<usize>,
    /// Index into `candidates` of the chosen one.
    pub chosen: usize,
    pub candidates: Vec<Candidate>,
    /// The retrieve decision at this segment's boundary; `None` where none was made (a
    /// long-form segment that continued with its passage after `[Continue to Use Evidence]`).
    #[serde(default)]
    pub retrieve: Option<RetrieveDecision>,
    /// Indices into `candidates` that the hard constraints left out of the choice under the
    /// trace's settings: none when they are off, or when they would leave nothing. Absent when
    /// none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "typescript", ts(type = "Array<number> | undefined"))]
    pub excluded: Vec<usize>,
}

/// A place in the long-form search tree: candidate `candidate` of expansion `expansion`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct TreeNode {
    /// Index into `Answer::expansions`.
    pub expansion: usize,
    /// Index into that expansion's `candidates`.
    pub candidate: usize,
}

/// One expansion of the long-form beam search: a path that reached a segment boundary, its
/// retrieve decision there, and the candidates written for its next segment. Re-rank replays
/// the beam search over every expansion the run made (SELFRAG.md step 5).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct Expansion {
    /// The path it continues, named by its last segment; `None` for the first segment.
    pub parent: Option<TreeNode>,
    /// The retrieve decision at the boundary; `None` after `[Continue to Use Evidence]`.
    pub retrieve: Option<RetrieveDecision>,
    /// One per passage (or one without); empty when `no_room`.
    pub candidates: Vec<Candidate>,
    /// The path's prompt no longer fit the context, even with every earlier passage left out:
    /// the path ends at its parent. Absent when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[cfg_attr(feature = "typescript", ts(type = "boolean | undefined"))]
    pub no_room: bool,
}

/// Where the generator that wrote an answer ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum GeneratorKind {
    /// In this process, on this computer's CPU or GPU.
    Local,
    /// On an inference server (llama.cpp's llama-server).
    Server,
}

/// Which generator wrote an answer: recorded in its trace, so that a saved answer says where
/// its probabilities came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct GeneratorInfo {
    pub kind: GeneratorKind,
    /// The model: the GGUF file's name locally, the server's model path or alias there.
    pub model: String,
    /// The device locally (`cpu`, `cuda`, `metal`); the server's software and build there
    /// (e.g. `llama.cpp b6800-abc1234`).
    pub runtime: String,
    /// The server's URL; `None` locally.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "typescript", ts(optional))]
    pub url: Option<String>,
    /// How the KV cache held keys and values: the precision in force locally; `None` on a
    /// server (which keeps its own, unknown here) and in traces saved before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "typescript", ts(optional))]
    pub cache_precision: Option<CachePrecision>,
    /// Where the prompts' tokenizer put SentencePiece's dummy-prefix `▁` (prompts travel to a
    /// server as ids from the same tokenizer); `None` for a byte-level BPE model (Llama-3's),
    /// which has no `▁`, and in traces saved before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "typescript", ts(optional))]
    pub dummy_prefix: Option<DummyPrefix>,
}

/// Which embedder made the query's vector that retrieval searched with: recorded in the trace,
/// so that a saved answer says which numerics its passages were found with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct EmbedderInfo {
    /// The model: its Hugging Face repository and revision, or its folder.
    pub model: String,
    /// The precision it multiplied in (int8 only where asked for and the CPU runs it).
    pub precision: EmbedderPrecision,
    /// The device it ran on.
    pub device: DeviceKind,
    /// The embeddings server's API address, where the vectors came from one. A server does not
    /// report its numerics: `precision` and `device` then say nothing (f32 and CPU are written)
    /// and are not shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "typescript", ts(optional))]
    pub server: Option<String>,
}

/// Where the time of an answer went, in seconds, each step summed over the answer (long form
/// repeats them at every segment). The critique is read while the candidates are written (their
/// reflection tokens' probabilities), so it is part of `decode_seconds`; `critique_seconds` is
/// the scoring and choosing that follows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct AnswerTimings {
    /// Loading the generator before the answer could start (the first answer after a start or
    /// a change of model or device), with the embedder where it loaded at the same time; 0
    /// when it was loaded, and on a server.
    #[serde(default)]
    pub load_seconds: f64,
    /// Reading the question up to the retrieve decision.
    pub decide_seconds: f64,
    /// Embedding the query and searching the library.
    pub search_seconds: f64,
    /// Writing the candidates: reading their prompts and decoding them.
    pub generate_seconds: f64,
    /// Of `generate_seconds`, reading the prompts (the passages), where the generator can tell;
    /// `None` on a server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "typescript", ts(optional))]
    pub prefill_seconds: Option<f64>,
    /// Of `generate_seconds`, the decode steps, where the generator can tell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "typescript", ts(optional))]
    pub decode_seconds: Option<f64>,
    /// Scoring the candidates by their reflection tokens and choosing.
    pub critique_seconds: f64,
    /// The whole answer, loading aside; the steps' sum and what lies between them.
    pub answer_seconds: f64,
}

impl AnswerTimings {
    /// Each time rounded to the microsecond, as recorded: a saved answer then reads back
    /// equal (sums of many timings have more digits than JSON's float parsing keeps exactly).
    pub fn to_microseconds(self) -> Self {
        let us = |s: f64| (s * 1e6).round() / 1e6;
        Self {
            load_seconds: us(self.load_seconds),
            decide_seconds: us(self.decide_seconds),
            search_seconds: us(self.search_seconds),
            generate_seconds: us(self.generate_seconds),
            prefill_seconds: self.prefill_seconds.map(us),
            decode_seconds: self.decode_seconds.map(us),
            critique_seconds: us(self.critique_seconds),
            answer_seconds: us(self.answer_seconds),
        }
    }
}

/// A complete answer and its trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct Answer {
    pub question: String,
    /// The settings it was written under. A setting added after the trace was saved reads as
    /// the rule it was written under (see `settings::deserialize_recorded`).
    #[serde(deserialize_with = "crate::settings::deserialize_recorded")]
    pub settings: Settings,
    pub retrieve: RetrieveDecision,
    /// The passages the answer read, in citation order first, then the unused ones.
    pub passages: Vec<Passage>,
    pub segments: Vec<Segment>,
    /// Long form: every expansion the beam search made, in the order it made them (the
    /// chosen path's segments among them). Empty for short form and for traces saved before
    /// the tree was kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "typescript", ts(as = "Option<Vec<Expansion>>", optional))]
    pub expansions: Vec<Expansion>,
    /// The final answer text with `[n]` citation markers.
    pub answer: String,
    /// The generator that wrote it; absent in traces saved before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "typescript", ts(optional))]
    pub generator: Option<GeneratorInfo>,
    /// The embedder that made the query's vector; absent where no query was searched, and in
    /// traces saved before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "typescript", ts(optional))]
    pub embedder: Option<EmbedderInfo>,
    /// Why the answer stops early: the generator failed (a server that stopped answering) after
    /// the segments kept here, which are complete and scored. `None` for a finished answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "typescript", ts(optional))]
    pub cut_short: Option<String>,
    /// Where the answer's time went; absent in traces saved before it was recorded, and in
    /// answers not written by a run (imported, built by hand).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "typescript", ts(optional))]
    pub timings: Option<AnswerTimings>,
    /// A closed-set question's options with their scores (see [`crate::closed_set`]); absent
    /// for an open question, and in traces saved before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "typescript", ts(optional))]
    pub closed_set: Option<crate::closed_set::ClosedSetScores>,
}

impl Candidate {
    /// Its scores and the probabilities they come from, named as the inspector names them.
    fn named_numbers(&self) -> Vec<(&'static str, f32)> {
        let mut numbers = vec![
            ("p_lm", self.p_lm),
            ("s_rel", self.s_rel),
            ("s_sup", self.s_sup),
            ("s_use", self.s_use),
            ("score", self.score),
        ];
        if let Some(d) = self.isrel {
            numbers.extend([
                ("p([Relevant])", d.relevant),
                ("p([Irrelevant])", d.irrelevant),
            ]);
        }
        if let Some(d) = self.issup {
            numbers.extend([
                ("p([Fully supported])", d.fully),
                ("p([Partially supported])", d.partially),
                ("p([No support / Contradictory])", d.no_support),
            ]);
        }
        if let Some(d) = self.isuse {
            let names = [
                "p([Utility:1])",
                "p([Utility:2])",
                "p([Utility:3])",
                "p([Utility:4])",
                "p([Utility:5])",
            ];
            numbers.extend(names.into_iter().zip(d.probabilities()));
        }
        numbers
    }
}

impl Answer {
    /// The first score or probability of the trace that is not a finite number, with where it
    /// is (`segment 1, candidate 2: p([Fully supported]) is NaN`); `None` when every one is.
    /// JSON has no NaN or infinity: serde writes them as `null`, which does not read back as
    /// a number, so a saved answer holding one would drop out of the history.
    pub fn non_finite_score(&self) -> Option<String> {
        if !self.retrieve.p_retrieve.is_finite() {
            return Some(format!(
                "the retrieve decision: p_retrieve is {}",
                self.retrieve.p_retrieve
            ));
        }
        let segments = self.segments.iter().enumerate().map(|(i, s)| {
            let place = format!("segment {}", i + 1);
            (place, s.retrieve.as_ref(), s.candidates.as_slice())
        });
        let expansions = self.expansions.iter().enumerate().map(|(i, e)| {
            let place = format!("expansion {}", i + 1);
            (place, e.retrieve.as_ref(), e.candidates.as_slice())
        });
        for (place, retrieve, candidates) in segments.chain(expansions) {
            if let Some(d) = retrieve.filter(|d| !d.p_retrieve.is_finite()) {
                return Some(format!("{place}: p_retrieve is {}", d.p_retrieve));
            }
            for (j, candidate) in candidates.iter().enumerate() {
                let numbers = candidate.named_numbers();
                if let Some((name, value)) = numbers.iter().find(|(_, v)| !v.is_finite()) {
                    return Some(format!("{place}, candidate {}: {name} is {value}", j + 1));
                }
            }
        }
        None
    }
}
