//! Closed-set questions (paper §4.1 and appendix B.2: PubHealth and ARC-Challenge): a question
//! whose answer is one of a fixed set of options. This module owns how such a question is put
//! to the model ([`ClosedSetQuestion::prompt_text`], the reference's layout) and how its options
//! are scored from the short-form candidates ([`ClosedSetQuestion::score`]), recorded in the
//! trace as [`ClosedSetScores`] and recomputed by [`crate::rerank`].
//!
//! ## The rule, against the paper and the reference
//! The paper (appendix B.2): "instead of determining the output with the highest score as in
//! other tasks, we aggregate the scores for each option and select the answer option with the
//! highest score"; predictions are lower-cased for fact checking, and where a model words its
//! answer differently (`(A)` for `A`) it is matched to the options by string matching.
//!
//! The reference (`retrieval_lm/run_short_form.py` of AkariAsai/self-rag, commit 1fcdc42,
//! lines 182–193) sums the final score of every retrieved candidate keyed by its text after
//! removing the reflection tokens, `</s>` and newlines (lines 36–48), and returns the text with
//! the highest sum. So:
//! - the candidate written without a passage (the `no_retrieval` continuation the reference
//!   always generates in adaptive mode) is left out when passages were retrieved (lines
//!   185–186); where nothing was retrieved, the one `[No Retrieval]` continuation is the answer
//!   (lines 178–180). Here likewise: candidates without a passage count only when no candidate
//!   has one.
//! - **defect, the paper followed instead**: the reference keys the sum by the raw text, not by
//!   option, so `A`, `A.` and `(A)` (or `true` and `True`) split one option's votes, and a
//!   text that names no option can win. Here each candidate's text is mapped to the option it
//!   names ([`option_named`]) and the scores are summed per option; a text that names no option
//!   counts for none, and [`ClosedSetScores::chosen`] is `None` when no candidate names one.
//!
//! Candidates the hard constraints leave out (`Segment::excluded`, step 6) do not count; the
//! reference has no hard constraints in short form. Ties go to the earlier option.

use serde::{Deserialize, Serialize};

use crate::backend::{Generator, Retriever};
use crate::error::SelfRagError;
use crate::progress::{Cancel, Progress};
use crate::prompt::{Instruction, defuse_markers};
use crate::settings::Settings;
use crate::trace::Answer;

/// What kind of closed set a question has: it decides the prompt's layout and how a
/// candidate's text is read as an option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub enum ClosedSetKind {
    /// The options are listed under the question, labelled A, B, C…, and the model answers
    /// with a label (ARC-Challenge).
    MultipleChoice,
    /// A statement the model judges `true` or `false` (PubHealth; the reference's task `fever`).
    TrueFalse,
}

/// One answer a closed-set question allows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnswerOption {
    /// What the model answers with: `A`, `B`… for multiple choice, `true` / `false`.
    pub label: String,
    /// The option's text (for true/false, the label again).
    pub text: String,
}

/// A closed-set question as it is put to the model: the task instruction, the question and
/// its options. Build one with [`ClosedSetQuestion::multiple_choice`] or
/// [`ClosedSetQuestion::true_false`]; its [`prompt_text`](Self::prompt_text) is the question
/// Self-RAG answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClosedSetQuestion {
    pub kind: ClosedSetKind,
    /// The task instruction the prompt opens with.
    pub instruction: String,
    /// The question (or, for true/false, the statement) as the person wrote it.
    pub question: String,
    pub options: Vec<AnswerOption>,
}

/// How one option scored: the candidates that name it and the sum of their scores f.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct OptionScore {
    pub label: String,
    pub text: String,
    /// The sum of f over [`candidates`](Self::candidates); 0 when none names it.
    pub score: f32,
    /// Indices into the first segment's candidates of those that name this option.
    pub candidates: Vec<usize>,
}

/// A closed-set question's options with their scores, as recorded in the trace
/// (`Answer::closed_set`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct ClosedSetScores {
    pub kind: ClosedSetKind,
    /// The question as the person wrote it, without the instruction and the options that the
    /// trace's `question`, what the model read, holds.
    #[serde(default)]
    pub question: String,
    pub options: Vec<OptionScore>,
    /// Index into `options` of the answer: the highest score among the options at least one
    /// counted candidate names, the earlier on a tie; `None` when no candidate names an option.
    pub chosen: Option<usize>,
}

/// The reference's instruction for ARC-Challenge (`retrieval_lm/utils.py` line 39, task
/// `arc_c`): the four-option wording of [`multiple_choice_instruction`].
pub const ARC_INSTRUCTION: &str =
    "Given four answer candidates, A, B, C and D, choose the best answer choice.";

/// The reference's instruction for PubHealth (`retrieval_lm/utils.py` line 35, task `fever`).
/// The paper's Table 5 gives a longer wording used for its zero-shot baselines; the Self-RAG
/// runs used this one (`run_short_form.py` lines 211–213 and 316).
pub const TRUE_FALSE_INSTRUCTION: &str =
    "Is the following statement correct or not? Say true if it's correct; otherwise say false.";

/// The most options a multiple-choice question may have: one label per letter A–Z.
pub const MAX_OPTIONS: usize = 26;

/// The multiple-choice instruction for `count` options, worded as the reference's four-option
/// one ([`ARC_INSTRUCTION`] exactly for four): "Given three answer candidates, A, B and C, …".
pub fn multiple_choice_instruction(count: usize) -> String {
    const WORDS: [&str; 11] = [
        "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    ];
    let labels: Vec<String> = (0..count).map(option_label).collect();
    let listed = match labels.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        Some((last, _)) => last.clone(),
        None => String::new(),
    };
    let count_word = WORDS
        .get(count)
        .map_or_else(|| count.to_string(), |w| (*w).to_string());
    format!("Given {count_word} answer candidates, {listed}, choose the best answer choice.")
}

/// The label of the option at `index`: A, B, … Z.
pub fn option_label(index: usize) -> String {
    u8::try_from(index).ok().filter(|&i| i < 26).map_or_else(
        || format!("#{}", index + 1),
        |i| char::from(b'A' + i).to_string(),
    )
}

impl ClosedSetQuestion {
    /// A multiple-choice question with `options` labelled A, B, C… in order: 2 to 26 options,
    /// none empty, and a question that is not empty.
    pub fn multiple_choice(question: &str, options: &[String]) -> Result<Self, SelfRagError> {
        let question = question.trim();
        if question.is_empty() {
            return Err(SelfRagError::EmptyQuestion);
        }
        let texts: Vec<&str> = options.iter().map(|o| o.trim()).collect();
        if !(2..=MAX_OPTIONS).contains(&texts.len()) || texts.iter().any(|t| t.is_empty()) {
            return Err(SelfRagError::InvalidSetting {
                name: "options",
                value: format!("{options:?}"),
                allowed: "from 2 to 26 answer options, none of them empty",
            });
        }
        Ok(Self {
            kind: ClosedSetKind::MultipleChoice,
            instruction: multiple_choice_instruction(texts.len()),
            question: question.to_owned(),
            options: texts
                .iter()
                .enumerate()
                .map(|(i, text)| AnswerOption {
                    label: option_label(i),
                    text: (*text).to_owned(),
                })
                .collect(),
        })
    }

    /// A statement to judge `true` or `false`, with the reference's PubHealth instruction.
    pub fn true_false(statement: &str) -> Result<Self, SelfRagError> {
        let statement = statement.trim();
        if statement.is_empty() {
            return Err(SelfRagError::EmptyQuestion);
        }
        let option = |word: &str| AnswerOption {
            label: word.to_owned(),
            text: word.to_owned(),
        };
        Ok(Self {
            kind: ClosedSetKind::TrueFalse,
            instruction: TRUE_FALSE_INSTRUCTION.to_owned(),
            question: statement.to_owned(),
            options: vec![option("true"), option("false")],
        })
    }

    /// The question Self-RAG is asked, laid out as the reference lays it out
    /// (`run_short_form.py` lines 210–249): multiple choice as the instruction, `### Input:`,
    /// the question and one `label: text` line per option; true/false as the instruction,
    /// `## Input:` and the statement.
    pub fn prompt_text(&self) -> String {
        self.lay_out(|part| part.into())
    }

    /// [`prompt_text`](Self::prompt_text) as the model reads it: the layout's own `### Input:`
    /// is kept, as the reference's model read it, while every section marker in the question
    /// and the options (written by a person or a data file) is defused, as in any question.
    pub fn instruction(&self) -> Instruction {
        Instruction::laid_out(self.lay_out(defuse_markers))
    }

    /// The layout, with `part` applied to each person-written part.
    fn lay_out<'t>(&'t self, part: impl Fn(&'t str) -> std::borrow::Cow<'t, str>) -> String {
        match self.kind {
            ClosedSetKind::MultipleChoice => {
                let mut text = format!(
                    "{}\n\n### Input:\n{}",
                    self.instruction,
                    part(&self.question)
                );
                for option in &self.options {
                    text.push_str(&format!(
                        "\n{}: {}",
                        part(&option.label),
                        part(&option.text)
                    ));
                }
                text
            }
            ClosedSetKind::TrueFalse => {
                format!(
                    "{}\n\n## Input:\n\n{}",
                    self.instruction,
                    part(&self.question)
                )
            }
        }
    }

    /// This question's options scored from `answer`, the short-form answer to its
    /// [`prompt_text`](Self::prompt_text) (see the module's rule).
    pub fn score(&self, answer: &Answer) -> ClosedSetScores {
        tally(self.kind, &self.question, &self.options, answer)
    }
}

/// What Self-RAG is asked: an open question, or a closed-set one whose options are scored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Question {
    Open(String),
    ClosedSet(ClosedSetQuestion),
}

impl Question {
    /// Answers it: [`crate::answer`] for an open question, [`answer_closed_set`] for a
    /// closed-set one.
    pub fn answer(
        &self,
        settings: &Settings,
        generator: &mut dyn Generator,
        retriever: &mut dyn Retriever,
        on_progress: &mut dyn FnMut(Progress),
        cancel: &dyn Cancel,
    ) -> Result<Answer, SelfRagError> {
        match self {
            Self::Open(question) => crate::answer(
                question,
                settings,
                generator,
                retriever,
                on_progress,
                cancel,
            ),
            Self::ClosedSet(question) => answer_closed_set(
                question,
                settings,
                generator,
                retriever,
                on_progress,
                cancel,
            ),
        }
    }
}

/// Answers a closed-set question: Self-RAG on its [`ClosedSetQuestion::prompt_text`] in short
/// form, as [`crate::answer`] does, with its options scored into `Answer::closed_set`. Long form
/// is refused: the paper and the reference answer closed-set questions in short form.
pub fn answer_closed_set(
    question: &ClosedSetQuestion,
    settings: &Settings,
    generator: &mut dyn Generator,
    retriever: &mut dyn Retriever,
    on_progress: &mut dyn FnMut(Progress),
    cancel: &dyn Cancel,
) -> Result<Answer, SelfRagError> {
    if settings.long_form {
        return Err(SelfRagError::InvalidSetting {
            name: "long_form",
            value: "true".into(),
            allowed: "off for a question with answer options (closed-set questions are answered \
                      in short form)",
        });
    }
    // The library is searched for the person's question, which the trace records; the model
    // reads the reference's layout of it with its options.
    let mut answer = crate::answer_instruction(
        &question.question,
        &question.instruction(),
        settings,
        generator,
        retriever,
        on_progress,
        cancel,
    )?;
    answer.closed_set = Some(question.score(&answer));
    Ok(answer)
}

impl ClosedSetScores {
    /// The same options scored again from `answer` (after a re-rank changed its scores).
    pub fn rescored(&self, answer: &Answer) -> Self {
        let options: Vec<AnswerOption> = self
            .options
            .iter()
            .map(|o| AnswerOption {
                label: o.label.clone(),
                text: o.text.clone(),
            })
            .collect();
        tally(self.kind, &self.question, &options, answer)
    }

    /// The chosen option, if any candidate named one.
    pub fn chosen_option(&self) -> Option<&OptionScore> {
        self.chosen.and_then(|i| self.options.get(i))
    }
}

/// Indices into the first segment's candidates of those that vote: not left out by the hard
/// constraints, and only those with a passage where any has one.
fn voters(answer: &Answer) -> Vec<usize> {
    let Some(segment) = answer.segments.first() else {
        return Vec::new();
    };
    let kept: Vec<usize> = (0..segment.candidates.len())
        .filter(|i| !segment.excluded.contains(i))
        .collect();
    let any_retrieved = kept
        .iter()
        .any(|&i| segment.candidates[i].passage.is_some());
    kept.into_iter()
        .filter(|&i| !any_retrieved || segment.candidates[i].passage.is_some())
        .collect()
}

fn tally(
    kind: ClosedSetKind,
    question: &str,
    options: &[AnswerOption],
    answer: &Answer,
) -> ClosedSetScores {
    let mut scores: Vec<OptionScore> = options
        .iter()
        .map(|o| OptionScore {
            label: o.label.clone(),
            text: o.text.clone(),
            score: 0.0,
            candidates: Vec::new(),
        })
        .collect();
    if let Some(segment) = answer.segments.first() {
        for i in voters(answer) {
            let candidate = &segment.candidates[i];
            if let Some(o) = option_named(kind, options, &candidate.text) {
                scores[o].score += candidate.score;
                scores[o].candidates.push(i);
            }
        }
    }
    let mut chosen: Option<usize> = None;
    for (i, option) in scores.iter().enumerate() {
        if option.candidates.is_empty() {
            continue;
        }
        // Strictly greater: the earlier option stays ahead on a tie.
        if chosen.is_none_or(|c| option.score > scores[c].score) {
            chosen = Some(i);
        }
    }
    ClosedSetScores {
        kind,
        question: question.to_owned(),
        options: scores,
        chosen,
    }
}

/// The option a candidate's `text` names, or `None`. The text is first cleaned as the reference
/// cleans a prediction (newlines removed, `run_short_form.py` lines 42–43; a leading `#` or `:`
/// dropped, lines 331–332), then:
/// - true/false: lower-cased (paper B.2), the first word that is `true` or `false` names that
///   option; `supports` and `refutes` (FEVER's labels, which the reference maps the same way,
///   lines 345–348) name `true` and `false`.
/// - multiple choice: a text that opens with a label, alone or followed by `:` `.` `)` or `,`
///   (`B`, `(B)`, `B: shark`, `B. shark`), names it (a lone lower-case letter too); otherwise
///   the option whose text, normalised as [`normalize_answer`], appears in the normalised text as
///   whole words names it, the longest where several do (`iron oxide` over `iron`); two
///   different options of that longest length are a tie, and name none.
pub fn option_named(kind: ClosedSetKind, options: &[AnswerOption], text: &str) -> Option<usize> {
    let start = text.trim().trim_start_matches(['#', ':']).trim_start();
    // A label alone on the first line (`A` then the explanation) names its option.
    let first_line = start.lines().next().unwrap_or_default().trim();
    let cleaned = start.replace(['\n', '\r'], " ");
    match kind {
        ClosedSetKind::TrueFalse => true_false_named(options, &cleaned),
        ClosedSetKind::MultipleChoice => label_opening(options, first_line)
            .or_else(|| label_opening(options, &cleaned))
            .or_else(|| option_text_within(options, &cleaned)),
    }
}

fn true_false_named(options: &[AnswerOption], text: &str) -> Option<usize> {
    let lower = text.to_lowercase();
    lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .find_map(|word| {
            let word = match word {
                "supports" => "true",
                "refutes" => "false",
                other => other,
            };
            options.iter().position(|o| o.label.to_lowercase() == word)
        })
}

/// A label at the start of `text`: `B`, `(B)`, `B:`, `B.`, `B)`, `B,` (and what follows).
fn label_opening(options: &[AnswerOption], text: &str) -> Option<usize> {
    let position = |label: &str| options.iter().position(|o| o.label == label);
    let mut chars = text.chars();
    let first = chars.next()?;
    // A lone letter, in either case.
    if chars.as_str().is_empty() {
        return position(&first.to_uppercase().to_string());
    }
    let (letter, rest, closed) = if first == '(' {
        let letter = chars.next()?;
        let rest = chars.as_str();
        (letter, rest.strip_prefix(')')?, true)
    } else {
        (first, chars.as_str(), false)
    };
    if !letter.is_ascii_uppercase() {
        return None;
    }
    // `(B)` is closed by its parenthesis, whatever follows.
    let closes = closed || rest.is_empty() || rest.starts_with([':', '.', ')', ',']);
    if closes {
        position(&letter.to_string())
    } else {
        None
    }
}

/// The option whose normalised text appears in `text` as whole words; the longest wins, and two
/// different options of the same longest length name none.
fn option_text_within(options: &[AnswerOption], text: &str) -> Option<usize> {
    let haystack = format!(" {} ", normalize_answer(text));
    let mut best: Option<(usize, usize)> = None; // (option, normalised length)
    let mut tied = false;
    for (i, option) in options.iter().enumerate() {
        let needle = normalize_answer(&option.text);
        if needle.is_empty() || !haystack.contains(&format!(" {needle} ")) {
            continue;
        }
        let length = needle.chars().count();
        match best {
            Some((_, best_length)) if length < best_length => {}
            Some((b, best_length)) if length == best_length => {
                tied |= normalize_answer(&options[b].text) != needle;
            }
            _ => {
                best = Some((i, length));
                tied = false;
            }
        }
    }
    if tied { None } else { best.map(|(i, _)| i) }
}

/// The answer normalisation of SQuAD, which the reference's `metrics.py` (`normalize_answer`,
/// lines 54–67) and ALCE's `utils.py` (lines 12–26) both use: lower-case, ASCII punctuation
/// removed, the words `a`, `an` and `the` removed, whitespace collapsed to single spaces.
///
/// A word is a maximal run of letters, digits and `_` (Python's `\b`), so `the` inside `theory`
/// stays; punctuation (`_` included) goes first, so `a.b.` becomes the word `ab` and `the_end`
/// the word `theend`.
pub fn normalize_answer(text: &str) -> String {
    let lower = text.to_lowercase();
    let without_punctuation: String = lower
        .chars()
        .filter(|c| !c.is_ascii_punctuation())
        .collect();
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let mut kept = String::with_capacity(without_punctuation.len());
    let mut rest = without_punctuation.as_str();
    while let Some(c) = rest.chars().next() {
        let word = is_word(c);
        let end = rest
            .find(|ch: char| is_word(ch) != word)
            .unwrap_or(rest.len());
        let (run, tail) = rest.split_at(end);
        if word && matches!(run, "a" | "an" | "the") {
            kept.push(' ');
        } else {
            kept.push_str(run);
        }
        rest = tail;
    }
    kept.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn abcd() -> Vec<AnswerOption> {
        ["whale", "shark", "iron", "iron oxide"]
            .iter()
            .enumerate()
            .map(|(i, t)| AnswerOption {
                label: option_label(i),
                text: (*t).to_owned(),
            })
            .collect()
    }

    fn named(text: &str) -> Option<usize> {
        option_named(ClosedSetKind::MultipleChoice, &abcd(), text)
    }

    fn judged(text: &str) -> Option<usize> {
        let q = ClosedSetQuestion::true_false("Water is wet.").unwrap();
        option_named(ClosedSetKind::TrueFalse, &q.options, text)
    }

    #[test]
    fn a_label_names_its_option_however_it_is_wrapped() {
        for text in [
            "B",
            "b",
            "(B)",
            "B.",
            "B:",
            "B)",
            "B, the shark",
            "B: shark",
            "#B",
            ":B",
            "(B) the largest fish there is",
            "B\nSharks are fish, so this one is not.",
        ] {
            assert_eq!(named(text), Some(1), "{text:?}");
        }
        assert_eq!(named("  C\n"), Some(2));
        // A label alone on its first line names it even where the explanation names another.
        assert_eq!(named("A\nWhales are mammals"), Some(0));
    }

    #[test]
    fn a_word_that_starts_with_a_label_letter_is_not_a_label() {
        // "A whale" opens with the article A, not the label: the text matching finds whale (A)
        // for the right reason, and "Be careful" names nothing.
        assert_eq!(named("A whale is a mammal"), Some(0));
        assert_eq!(named("Be careful"), None);
        assert_eq!(named("Bx"), None);
    }

    #[test]
    fn option_text_matches_whole_words_and_the_longest_wins() {
        assert_eq!(named("It is the Shark!"), Some(1));
        assert_eq!(named("rust is iron oxide"), Some(3));
        assert_eq!(named("pure iron"), Some(2));
        assert_eq!(named("ironic"), None);
        assert_eq!(
            named("whale or shark"),
            None,
            "two options of equal length tie"
        );
        assert_eq!(named("nothing here"), None);
    }

    #[test]
    fn an_empty_option_text_never_matches_by_text() {
        let mut options = abcd();
        options[3].text = String::new();
        assert_eq!(
            option_named(ClosedSetKind::MultipleChoice, &options, "anything"),
            None
        );
        assert_eq!(
            option_named(ClosedSetKind::MultipleChoice, &options, "D"),
            Some(3)
        );
    }

    #[test]
    fn true_false_is_read_lower_cased_and_from_fevers_labels() {
        assert_eq!(judged("true"), Some(0));
        assert_eq!(judged("True."), Some(0));
        assert_eq!(judged("FALSE"), Some(1));
        assert_eq!(judged("SUPPORTS"), Some(0));
        assert_eq!(judged("REFUTES"), Some(1));
        assert_eq!(
            judged("It is false, not true"),
            Some(1),
            "the first one said"
        );
        assert_eq!(judged("untrue"), None);
        assert_eq!(judged("maybe"), None);
    }

    #[test]
    fn the_prompt_text_is_the_references_layout() {
        let q = ClosedSetQuestion::multiple_choice(
            "Which is a mammal?",
            &["whale".into(), "shark".into(), "trout".into(), "eel".into()],
        )
        .unwrap();
        assert_eq!(
            q.prompt_text(),
            "Given four answer candidates, A, B, C and D, choose the best answer choice.\n\n\
             ### Input:\nWhich is a mammal?\nA: whale\nB: shark\nC: trout\nD: eel"
        );
        assert_eq!(q.instruction, ARC_INSTRUCTION);
        let claim = ClosedSetQuestion::true_false("Vitamin C cures colds.").unwrap();
        assert_eq!(
            claim.prompt_text(),
            "Is the following statement correct or not? Say true if it's correct; otherwise say \
             false.\n\n## Input:\n\nVitamin C cures colds."
        );
    }

    #[test]
    fn the_instruction_names_as_many_options_as_there_are() {
        assert_eq!(
            multiple_choice_instruction(2),
            "Given two answer candidates, A and B, choose the best answer choice."
        );
        assert_eq!(
            multiple_choice_instruction(3),
            "Given three answer candidates, A, B and C, choose the best answer choice."
        );
        assert!(multiple_choice_instruction(12).starts_with("Given 12 answer candidates, A, B,"));
    }

    #[test]
    fn too_few_too_many_or_empty_options_are_refused() {
        let refused = |options: Vec<String>| {
            matches!(
                ClosedSetQuestion::multiple_choice("Q?", &options),
                Err(SelfRagError::InvalidSetting {
                    name: "options",
                    ..
                })
            )
        };
        assert!(refused(vec!["only".into()]));
        assert!(refused(vec!["a".into(), "  ".into()]));
        assert!(refused((0..27).map(|i| i.to_string()).collect()));
        assert!(!refused((0..26).map(|i| i.to_string()).collect()));
        assert!(matches!(
            ClosedSetQuestion::multiple_choice(" ", &["a".into(), "b".into()]),
            Err(SelfRagError::EmptyQuestion)
        ));
    }

    #[test]
    fn normalisation_follows_squad() {
        assert_eq!(normalize_answer("The  Beatles!"), "beatles");
        assert_eq!(normalize_answer("an apple a day"), "apple day");
        assert_eq!(normalize_answer("A.B.C."), "abc");
        assert_eq!(normalize_answer("Theory of the_end"), "theory of theend");
        assert_eq!(normalize_answer("the.end"), "theend");
        assert_eq!(normalize_answer("at the end"), "at end");
        assert_eq!(normalize_answer("Théâtre\u{a0}Royal"), "théâtre royal");
        assert_eq!(normalize_answer("rock-and-roll"), "rockandroll");
        assert_eq!(normalize_answer("“Quoted” — dash"), "“quoted” — dash");
        assert_eq!(normalize_answer("the"), "");
        assert_eq!(normalize_answer(""), "");
    }
}
