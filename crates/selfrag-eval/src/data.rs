//! The reference's evaluation files: JSON Lines (PopQA, TriviaQA, PubHealth, ARC-Challenge) or
//! one JSON array (ASQA, ALCE's format), read into [`EvalItem`]s. Field names are the
//! reference's: the question in `question` (or `instruction`); the passages retrieved for it in
//! `ctxs` (or `docs`, ASQA's; or `top_contexts`), each with `title` and `text`; the gold answers
//! in `answers` (or `answer`, `output`, or PopQA's `possible_answers`, a JSON list in a string),
//! ARC's `choices` (`label`, `text`) and `answerKey`, ASQA's `qa_pairs` with `short_answers`.

use std::path::Path;

use selfrag_core::closed_set::{
    ARC_INSTRUCTION, AnswerOption, ClosedSetKind, ClosedSetQuestion, multiple_choice_instruction,
};
use selfrag_core::{Passage, Question};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::EvalError;
use crate::task::{ASQA_INSTRUCTION, Task};

/// Where an item is in its file: a line of a JSON Lines file, or a place in a JSON array.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Place {
    /// 1-based line.
    Line(usize),
    /// 1-based position in the array.
    Item(usize),
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Line(n) => write!(f, "line {n}"),
            Self::Item(n) => write!(f, "item {n}"),
        }
    }
}

/// What an answer is scored against.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Gold {
    /// Any of these in the prediction is a match (PopQA, TriviaQA).
    Answers(Vec<String>),
    /// The label of the correct option: `A`…`E` (ARC-Challenge), `true` or `false` (PubHealth).
    Label(String),
    /// ASQA: for each interpretation of the question, its short answers.
    ShortAnswers(Vec<Vec<String>>),
}

/// One evaluation item: the question as the model is asked it, its passages, its gold.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalItem {
    pub place: Place,
    /// The item's `id` (or `sample_id`, `question_id`), where it has one.
    pub id: Option<String>,
    /// The question as the file gives it.
    pub question: String,
    /// What Self-RAG is asked, laid out as the reference lays it out for the task.
    pub asked: Question,
    /// Every passage the file gives, in its order (a run reads the top K).
    pub passages: Vec<Passage>,
    pub gold: Gold,
}

/// Reads the evaluation file at `path` for `task`: a `.json` file is one JSON array (or an
/// object whose `data` is one), anything else JSON Lines, as the reference reads them
/// (`run_short_form.py` lines 292–296). Every problem names the file and the line or item.
pub fn read_items(path: &Path, task: Task) -> Result<Vec<EvalItem>, EvalError> {
    let text = std::fs::read_to_string(path).map_err(|source| EvalError::Read {
        path: path.display().to_string(),
        source,
    })?;
    let is_json = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"));
    parse_items(&text, &path.display().to_string(), task, is_json)
}

/// [`read_items`] on text already read; `source` names it in errors and in the passages'
/// `path`; `json_array` reads it as one JSON array instead of JSON Lines.
pub fn parse_items(
    text: &str,
    source: &str,
    task: Task,
    json_array: bool,
) -> Result<Vec<EvalItem>, EvalError> {
    let entries: Vec<(Place, Value)> = if json_array {
        array_entries(text, source)?
    } else {
        line_entries(text, source)?
    };
    if entries.is_empty() {
        return Err(EvalError::Empty {
            path: source.to_owned(),
        });
    }
    entries
        .into_iter()
        .map(|(place, value)| {
            item(&value, place, source, task).map_err(|message| EvalError::Item {
                path: source.to_owned(),
                place,
                message,
            })
        })
        .collect()
}

fn line_entries(text: &str, source: &str) -> Result<Vec<(Place, Value)>, EvalError> {
    let mut entries = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let place = Place::Line(i + 1);
        if line.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(line).map_err(|e| EvalError::Item {
            path: source.to_owned(),
            place,
            message: format!("not a JSON object ({e}); each line of a JSON Lines file is one item"),
        })?;
        entries.push((place, value));
    }
    Ok(entries)
}

fn array_entries(text: &str, source: &str) -> Result<Vec<(Place, Value)>, EvalError> {
    let value: Value = serde_json::from_str(text).map_err(|e| EvalError::File {
        path: source.to_owned(),
        message: format!(
            "not JSON ({e}); a .json file must hold one array of items (name JSON Lines \
             files .jsonl)"
        ),
    })?;
    let items = match value {
        Value::Array(items) => items,
        Value::Object(mut object) => match object.remove("data") {
            Some(Value::Array(items)) => items,
            _ => {
                return Err(EvalError::File {
                    path: source.to_owned(),
                    message: "a JSON object without a `data` array; expected an array of items"
                        .into(),
                });
            }
        },
        _ => {
            return Err(EvalError::File {
                path: source.to_owned(),
                message: "expected an array of items".into(),
            });
        }
    };
    Ok(items
        .into_iter()
        .enumerate()
        .map(|(i, v)| (Place::Item(i + 1), v))
        .collect())
}

/// One item, or what is wrong with it.
fn item(value: &Value, place: Place, source: &str, task: Task) -> Result<EvalItem, String> {
    let object = value
        .as_object()
        .ok_or_else(|| format!("expected a JSON object, found {}", kind_of(value)))?;
    let question = string_field(object, &["question", "instruction"])?
        .ok_or("no `question` (or `instruction`)")?;
    if question.trim().is_empty() {
        return Err("the question is empty".into());
    }
    let id = ["id", "sample_id", "question_id"]
        .iter()
        .find_map(|k| object.get(*k))
        .and_then(|v| match v {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        });
    let passages = passages(object, place, source)?;
    let (asked, gold) = match task {
        Task::PopQa | Task::TriviaQa => (
            Question::Open(question.clone()),
            Gold::Answers(answers(object)?),
        ),
        Task::PubHealth => {
            let label = true_false_label(object)?;
            let asked = ClosedSetQuestion::true_false(&question).map_err(|e| e.to_string())?;
            (Question::ClosedSet(asked), Gold::Label(label))
        }
        Task::ArcC => {
            let (asked, label) = multiple_choice(object, &question)?;
            (Question::ClosedSet(asked), Gold::Label(label))
        }
        Task::Asqa => (
            // As `run_long_form_static.py` lines 393–395 lay it out: no break before `##`.
            Question::Open(format!("{ASQA_INSTRUCTION}## Input:\n\n{question}")),
            Gold::ShortAnswers(qa_pairs(object)?),
        ),
    };
    Ok(EvalItem {
        place,
        id,
        question,
        asked,
        passages,
        gold,
    })
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The first of `keys` present, as a string; an error if it is present but not a string.
fn string_field(object: &Map<String, Value>, keys: &[&str]) -> Result<Option<String>, String> {
    for key in keys {
        match object.get(*key) {
            None | Some(Value::Null) => continue,
            Some(Value::String(s)) => return Ok(Some(s.clone())),
            Some(other) => {
                return Err(format!("`{key}` is {}, expected a string", kind_of(other)));
            }
        }
    }
    Ok(None)
}

/// A string or a list of strings (numbers and booleans as written) as a list.
fn strings(value: &Value, key: &str) -> Result<Vec<String>, String> {
    let one = |v: &Value| match v {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        other => Err(format!(
            "`{key}` holds {}, expected strings",
            kind_of(other)
        )),
    };
    match value {
        Value::Array(items) => items.iter().map(one).collect(),
        other => one(other).map(|s| vec![s]),
    }
}

/// The gold answers of open QA: `answers`, `answer`, `output`, or `possible_answers` (a JSON
/// list written as a string, as PopQA's original release has it).
fn answers(object: &Map<String, Value>) -> Result<Vec<String>, String> {
    let mut found = None;
    for key in ["answers", "answer", "output"] {
        if let Some(value) = object.get(key).filter(|v| !v.is_null()) {
            found = Some(strings(value, key)?);
            break;
        }
    }
    if found.is_none()
        && let Some(value) = object.get("possible_answers").filter(|v| !v.is_null())
    {
        found = Some(match value {
            Value::String(text) => {
                let list: Value = serde_json::from_str(text).map_err(|e| {
                    format!("`possible_answers` is not a JSON list in a string ({e})")
                })?;
                strings(&list, "possible_answers")?
            }
            other => strings(other, "possible_answers")?,
        });
    }
    let answers: Vec<String> = found
        .ok_or("no gold answers: expected `answers` (or `answer`, `output`, `possible_answers`)")?
        .into_iter()
        .filter(|a| !a.is_empty())
        .collect();
    if answers.is_empty() {
        return Err("the gold answers are empty".into());
    }
    Ok(answers)
}

/// PubHealth's gold: `true` or `false` in the gold answers (FEVER's `SUPPORTS` / `REFUTES`
/// read as they are, or a `label` field), lower-cased as the paper does (appendix B.2).
fn true_false_label(object: &Map<String, Value>) -> Result<String, String> {
    let first = match answers(object) {
        Ok(answers) => answers.into_iter().next(),
        Err(e) => match object.get("label") {
            Some(label) => strings(label, "label")?.into_iter().next(),
            None => return Err(e),
        },
    }
    .unwrap_or_default();
    match first.trim().to_lowercase().as_str() {
        "true" | "supports" => Ok("true".into()),
        "false" | "refutes" => Ok("false".into()),
        other => Err(format!(
            "the gold answer is `{other}`; a true/false task needs `true` or `false`"
        )),
    }
}

/// ARC's question with its options, laid out as the reference lays it out
/// (`run_short_form.py` lines 217–242): labels `1`–`4` read as `A`–`D`, the options in label
/// order, and fewer than four padded with empty ones up to `D`, as the reference pads `D`.
/// Unlike the reference, a fifth option `E` (or `5`) is kept and shown: there (lines 231 and
/// 238) it is never stored, so a five-option item is shown four and can never be answered
/// right; the instruction then names five. The gold `answerKey` is read the same way
/// (the reference compares a numeric key with a lettered answer).
fn multiple_choice(
    object: &Map<String, Value>,
    question: &str,
) -> Result<(ClosedSetQuestion, String), String> {
    let choices = object
        .get("choices")
        .and_then(Value::as_object)
        .ok_or("no `choices` object (with `label` and `text` lists)")?;
    let list = |key: &str| {
        choices
            .get(key)
            .ok_or(format!("`choices` has no `{key}` list"))
            .and_then(|v| strings(v, &format!("choices.{key}")))
    };
    let (labels, texts) = (list("label")?, list("text")?);
    if labels.len() != texts.len() {
        return Err(format!(
            "`choices` has {} labels for {} texts",
            labels.len(),
            texts.len()
        ));
    }
    let mut options: Vec<AnswerOption> = Vec::new();
    for (label, text) in labels.iter().zip(&texts) {
        let label =
            letter(label).ok_or(format!("the choice label `{label}` is none of A–E or 1–5"))?;
        if options.iter().any(|o| o.label == label) {
            return Err(format!("the choice label `{label}` appears twice"));
        }
        options.push(AnswerOption {
            label,
            text: text.clone(),
        });
    }
    options.sort_by(|a, b| a.label.cmp(&b.label));
    for (i, option) in options.iter().enumerate() {
        let expected = selfrag_core::closed_set::option_label(i);
        if option.label != expected {
            return Err(format!(
                "the choices skip `{expected}`: labels must run from A without gaps"
            ));
        }
    }
    while options.len() < 4 {
        options.push(AnswerOption {
            label: selfrag_core::closed_set::option_label(options.len()),
            text: String::new(),
        });
    }
    let key = string_field(object, &["answerKey"])?.ok_or("no `answerKey`")?;
    let gold = letter(&key).ok_or(format!("the `answerKey` `{key}` is none of A–E or 1–5"))?;
    if !options
        .iter()
        .any(|o| o.label == gold && !o.text.is_empty())
    {
        return Err(format!("the `answerKey` `{key}` is not one of the choices"));
    }
    let instruction = match options.len() {
        4 => ARC_INSTRUCTION.to_owned(),
        n => multiple_choice_instruction(n),
    };
    Ok((
        ClosedSetQuestion {
            kind: ClosedSetKind::MultipleChoice,
            instruction,
            question: question.to_owned(),
            options,
        },
        gold,
    ))
}

/// `A`–`E`, or `1`–`5` read as `A`–`E`.
fn letter(label: &str) -> Option<String> {
    match label.trim() {
        l @ ("A" | "B" | "C" | "D" | "E") => Some(l.to_owned()),
        "1" => Some("A".into()),
        "2" => Some("B".into()),
        "3" => Some("C".into()),
        "4" => Some("D".into()),
        "5" => Some("E".into()),
        _ => None,
    }
}

/// ASQA's interpretations, each with its short answers (ALCE's `qa_pairs`).
fn qa_pairs(object: &Map<String, Value>) -> Result<Vec<Vec<String>>, String> {
    let pairs = object
        .get("qa_pairs")
        .and_then(Value::as_array)
        .ok_or("no `qa_pairs` list (ASQA's interpretations with their `short_answers`)")?;
    if pairs.is_empty() {
        return Err("`qa_pairs` is empty".into());
    }
    pairs
        .iter()
        .enumerate()
        .map(|(i, pair)| {
            let answers = pair
                .get("short_answers")
                .ok_or(format!("qa_pairs[{i}] has no `short_answers`"))?;
            strings(answers, &format!("qa_pairs[{i}].short_answers"))
        })
        .collect()
}

/// The passages the file gives for the item: `ctxs`, else `docs`, else `top_contexts`
/// (`run_short_form.py` line 204; ASQA's `docs`, `run_long_form_static.py` line 392).
fn passages(
    object: &Map<String, Value>,
    place: Place,
    source: &str,
) -> Result<Vec<Passage>, String> {
    let Some((key, list)) = ["ctxs", "docs", "top_contexts"]
        .iter()
        .find_map(|k| object.get(*k).map(|v| (*k, v)))
    else {
        return Err(
            "no passages: expected `ctxs` (or `docs`, `top_contexts`), a list of \
                    objects with `title` and `text`"
                .into(),
        );
    };
    let list = list
        .as_array()
        .ok_or(format!("`{key}` is {}, expected a list", kind_of(list)))?;
    list.iter()
        .enumerate()
        .map(|(i, ctx)| {
            let ctx = ctx.as_object().ok_or(format!(
                "{key}[{i}] is {}, expected an object",
                kind_of(ctx)
            ))?;
            let field =
                |name: &str| string_field(ctx, &[name]).map_err(|e| format!("{key}[{i}]: {e}"));
            let text = field("text")?.ok_or(format!("{key}[{i}] has no `text`"))?;
            let id = match ctx.get("id") {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Number(n)) => n.to_string(),
                _ => format!("{source} {place} {key}[{i}]"),
            };
            Ok(Passage {
                id,
                title: field("title")?.unwrap_or_default(),
                path: source.to_owned(),
                page: None,
                page_label: None,
                ocr_confidence: None,
                text,
                work: None,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(task: Task, line: &str) -> Result<EvalItem, EvalError> {
        parse_items(line, "t.jsonl", task, false).map(|mut items| items.remove(0))
    }

    fn message(task: Task, text: &str) -> String {
        parse_items(text, "t.jsonl", task, false)
            .unwrap_err()
            .to_string()
    }

    const CTXS: &str = r#""ctxs": [{"id": "7", "title": "T", "text": "Body."}]"#;

    #[test]
    fn open_qa_reads_answers_in_every_form_the_reference_accepts() {
        for golds in [
            r#""answers": ["Oslo", "Christiania"]"#,
            r#""answer": ["Oslo", "Christiania"]"#,
            r#""output": ["Oslo", "Christiania"]"#,
            r#""possible_answers": "[\"Oslo\", \"Christiania\"]""#,
        ] {
            let item = one(
                Task::PopQa,
                &format!(r#"{{"question": "Capital of Norway?", {golds}, {CTXS}}}"#),
            )
            .unwrap();
            assert_eq!(
                item.gold,
                Gold::Answers(vec!["Oslo".into(), "Christiania".into()]),
                "{golds}"
            );
            assert_eq!(item.asked, Question::Open("Capital of Norway?".into()));
        }
        let item = one(
            Task::TriviaQa,
            &format!(r#"{{"instruction": "Q?", "answer": "A", "id": 12, {CTXS}}}"#),
        )
        .unwrap();
        assert_eq!(item.gold, Gold::Answers(vec!["A".into()]));
        assert_eq!(item.id.as_deref(), Some("12"));
        assert_eq!(item.passages[0].title, "T");
        assert_eq!(item.passages[0].id, "7");
        assert_eq!(item.passages[0].path, "t.jsonl");
    }

    #[test]
    fn arc_is_laid_out_as_the_reference_lays_it_out() {
        let item = one(
            Task::ArcC,
            &format!(
                r#"{{"id": "Mercury_1", "question": "Which is a mammal?", "choices": {{"text": ["shark", "whale", "trout"], "label": ["1", "2", "3"]}}, "answerKey": "2", {CTXS}}}"#
            ),
        )
        .unwrap();
        assert_eq!(item.gold, Gold::Label("B".into()));
        let Question::ClosedSet(asked) = &item.asked else {
            panic!("closed set")
        };
        assert_eq!(
            asked.prompt_text(),
            "Given four answer candidates, A, B, C and D, choose the best answer choice.\n\n\
             ### Input:\nWhich is a mammal?\nA: shark\nB: whale\nC: trout\nD: "
        );
    }

    #[test]
    fn a_fifth_arc_option_is_kept() {
        let item = one(
            Task::ArcC,
            &format!(
                r#"{{"question": "Q?", "choices": {{"text": ["e", "a", "b", "c", "d"], "label": ["E", "A", "B", "C", "D"]}}, "answerKey": "E", {CTXS}}}"#
            ),
        )
        .unwrap();
        let Question::ClosedSet(asked) = &item.asked else {
            panic!("closed set")
        };
        assert!(asked.prompt_text().starts_with(
            "Given five answer candidates, A, B, C, D and E, choose the best answer choice."
        ));
        assert!(
            asked
                .prompt_text()
                .ends_with("\nA: a\nB: b\nC: c\nD: d\nE: e")
        );
        assert_eq!(item.gold, Gold::Label("E".into()));
    }

    #[test]
    fn pubhealth_golds_are_lower_cased_true_or_false() {
        for (gold, label) in [
            (r#""answers": ["true"]"#, "true"),
            (r#""answers": ["False"]"#, "false"),
            (r#""answers": "SUPPORTS""#, "true"),
            (r#""label": "REFUTES""#, "false"),
            (r#""answers": [true]"#, "true"),
        ] {
            let item = one(
                Task::PubHealth,
                &format!(r#"{{"question": "Garlic cures flu.", {gold}, {CTXS}}}"#),
            )
            .unwrap();
            assert_eq!(item.gold, Gold::Label(label.into()), "{gold}");
        }
        assert!(
            message(
                Task::PubHealth,
                &format!(r#"{{"question": "Q", "answers": ["mixture"], {CTXS}}}"#)
            )
            .contains("`mixture`")
        );
    }

    #[test]
    fn asqa_reads_a_json_array_with_docs_and_qa_pairs() {
        let text = r#"[{"sample_id": "-1", "question": "Who won?", "docs": [{"title": "T", "text": "X won."}], "qa_pairs": [{"short_answers": ["X"]}, {"short_answers": ["Y", "Z"]}]}]"#;
        let items = parse_items(text, "asqa.json", Task::Asqa, true).unwrap();
        assert_eq!(items[0].place, Place::Item(1));
        assert_eq!(
            items[0].gold,
            Gold::ShortAnswers(vec![vec!["X".into()], vec!["Y".into(), "Z".into()]])
        );
        assert_eq!(
            items[0].asked,
            Question::Open(format!("{ASQA_INSTRUCTION}## Input:\n\nWho won?"))
        );
        let wrapped = format!(r#"{{"data": {text}}}"#);
        assert_eq!(
            parse_items(&wrapped, "asqa.json", Task::Asqa, true).unwrap(),
            items
        );
    }

    #[test]
    fn bad_input_names_the_file_the_line_and_the_fix() {
        let text = format!(
            "{{\"question\": \"Q\", \"answers\": [\"A\"], {CTXS}}}\n\n{{\"question\": \"Q\", \
             \"answers\": [\"A\"]\n"
        );
        let e = message(Task::PopQa, &text);
        assert!(e.starts_with("t.jsonl, line 3: not a JSON object"), "{e}");

        let e = message(Task::PopQa, r#"{"question": "Q", "answers": ["A"]}"#);
        assert!(e.contains("line 1: no passages: expected `ctxs`"), "{e}");

        let e = message(
            Task::PopQa,
            r#"{"question": "Q", "answers": ["A"], "ctxs": [{"title": "T"}]}"#,
        );
        assert!(e.contains("ctxs[0] has no `text`"), "{e}");

        let e = message(Task::PopQa, &format!(r#"{{"question": "Q", {CTXS}}}"#));
        assert!(e.contains("no gold answers"), "{e}");

        let e = message(
            Task::PopQa,
            &format!(r#"{{"question": 3, "answers": ["A"], {CTXS}}}"#),
        );
        assert!(
            e.contains("`question` is a number, expected a string"),
            "{e}"
        );

        let e = message(
            Task::ArcC,
            &format!(
                r#"{{"question": "Q", "choices": {{"text": ["a", "b"], "label": ["A", "B"]}}, "answerKey": "C", {CTXS}}}"#
            ),
        );
        assert!(
            e.contains("`answerKey` `C` is not one of the choices"),
            "{e}"
        );

        let e = message(Task::Asqa, &format!(r#"{{"question": "Q", {CTXS}}}"#));
        assert!(e.contains("no `qa_pairs`"), "{e}");

        let e = message(Task::PopQa, "\n\n");
        assert!(e.contains("no items"), "{e}");

        let e = parse_items("[1, 2", "a.json", Task::Asqa, true)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("a.json: not JSON"), "{e}");
    }

    #[test]
    fn read_items_names_a_missing_file() {
        let e = read_items(Path::new("/no/such/popqa.jsonl"), Task::PopQa)
            .unwrap_err()
            .to_string();
        assert!(e.contains("/no/such/popqa.jsonl"), "{e}");
    }
}
