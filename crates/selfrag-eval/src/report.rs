//! Scoring one answer ([`ItemResult`]) and the run's summary ([`Summary`]): the per-item lines
//! and the table that sets our figure beside the paper's and an independent rerun's, with the
//! settings that produced ours.

use selfrag_core::{Answer, ClosedSetScores, GeneratorInfo, Settings};
use serde::Serialize;

use crate::data::{EvalItem, Gold, Place};
use crate::metrics;
use crate::task::{Metric, Task};

/// One item's outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ItemResult {
    pub place: Place,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub question: String,
    /// What the metric reads: for a closed-set task the label of the chosen option (empty when
    /// no candidate named one), else the answer's text ([`metrics::prediction_text`]).
    pub prediction: String,
    /// The answer's text.
    pub answer: String,
    pub gold: Gold,
    /// The item's metric: 0 or 1, or for str-em the share of interpretations answered.
    pub score: f64,
    /// Whether the answer read passages (its first retrieve decision).
    pub retrieved: bool,
    /// A closed-set task's options with their scores.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub options: Option<ClosedSetScores>,
    /// Why the item has no answer; it scores 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Gold {
    /// The metric this gold is scored with.
    pub fn metric(&self) -> Metric {
        match self {
            Self::Answers(_) => Metric::Match,
            Self::Label(_) => Metric::Accuracy,
            Self::ShortAnswers(_) => Metric::StrEm,
        }
    }

    /// `prediction` scored against this gold (for a label, `prediction` is the chosen label,
    /// empty for none).
    pub fn score(&self, prediction: &str) -> f64 {
        let hit = |yes: bool| if yes { 1.0 } else { 0.0 };
        match self {
            Self::Answers(golds) => hit(metrics::gold_in_prediction(prediction, golds)),
            Self::Label(label) => hit(metrics::option_is_gold(
                Some(prediction).filter(|p| !p.is_empty()),
                label,
            )),
            Self::ShortAnswers(pairs) => metrics::str_em(prediction, pairs),
        }
    }

    /// The gold as a line of text shows it.
    pub fn describe(&self) -> String {
        match self {
            Self::Answers(golds) => golds.join(" | "),
            Self::Label(label) => label.clone(),
            Self::ShortAnswers(pairs) => pairs
                .iter()
                .map(|answers| format!("[{}]", answers.join(" | ")))
                .collect::<Vec<_>>()
                .join(" "),
        }
    }
}

impl ItemResult {
    /// `item` scored on `answer`, the answer to its question over its passages. An answer cut
    /// short by its generator (a server that stopped answering) is a failed item, not a
    /// complete one.
    pub fn scored(item: &EvalItem, answer: &Answer) -> Self {
        if let Some(why) = &answer.cut_short {
            return Self::failed(item, format!("the answer was cut short: {why}"));
        }
        let text = metrics::prediction_text(answer);
        let prediction = match &answer.closed_set {
            Some(scores) => scores
                .chosen_option()
                .map(|o| o.label.clone())
                .unwrap_or_default(),
            None => text.clone(),
        };
        Self {
            place: item.place,
            id: item.id.clone(),
            question: item.question.clone(),
            score: item.gold.score(&prediction),
            prediction,
            answer: text,
            gold: item.gold.clone(),
            retrieved: answer.retrieve.retrieved,
            options: answer.closed_set.clone(),
            error: None,
        }
    }

    /// `item` without an answer: the run failed with `error`; it scores 0.
    pub fn failed(item: &EvalItem, error: impl std::fmt::Display) -> Self {
        Self {
            place: item.place,
            id: item.id.clone(),
            question: item.question.clone(),
            prediction: String::new(),
            answer: String::new(),
            gold: item.gold.clone(),
            score: 0.0,
            retrieved: false,
            options: None,
            error: Some(error.to_string()),
        }
    }

    /// The item as one line of text: where it is, what was predicted, the gold, the score.
    pub fn line(&self) -> String {
        let id = self
            .id
            .as_ref()
            .map(|id| format!(" ({id})"))
            .unwrap_or_default();
        let metric = self.gold.metric().name();
        if let Some(error) = &self.error {
            return format!(
                "{}{id}: failed: {} · gold {} · {metric} 0",
                self.place,
                one_line(error),
                self.gold.describe()
            );
        }
        let retrieved = if self.retrieved {
            "retrieved"
        } else {
            "no retrieval"
        };
        let prediction = match &self.options {
            Some(scores) => {
                let each = scores
                    .options
                    .iter()
                    .map(|o| format!("{} {:.2}", o.label, o.score))
                    .collect::<Vec<_>>()
                    .join(", ");
                let chosen = if self.prediction.is_empty() {
                    "no option named".to_owned()
                } else {
                    self.prediction.clone()
                };
                format!("{chosen} ({each}; answer {:?})", one_line(&self.answer))
            }
            None => format!("{:?}", one_line(&self.prediction)),
        };
        format!(
            "{}{id}: {retrieved} · prediction {prediction} · gold {} · {metric} {}",
            self.place,
            self.gold.describe(),
            number(self.score)
        )
    }
}

/// The run's outcome beside the paper's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub task: Task,
    pub metric: Metric,
    pub items: usize,
    /// Items whose run failed; each counts 0 in `ours`.
    pub failed: usize,
    /// 100 × the mean of the items' metric.
    pub ours: f64,
    /// Self-RAG 7B in the paper's Table 2.
    pub paper: f64,
    /// An independent rerun of the reference code (AkariAsai/self-rag issue #71).
    pub rerun: Option<f64>,
    /// Percentage of the items whose answer read passages.
    pub retrieved_percent: f64,
    /// The settings our figure was produced with.
    pub settings: Settings,
    /// The generator that produced it, as the first answer's trace records it.
    pub generator: Option<GeneratorInfo>,
}

impl Summary {
    pub fn new(
        task: Task,
        results: &[ItemResult],
        settings: Settings,
        generator: Option<GeneratorInfo>,
    ) -> Self {
        let scores: Vec<f64> = results.iter().map(|r| r.score).collect();
        let retrieved: Vec<f64> = results
            .iter()
            .map(|r| if r.retrieved { 1.0 } else { 0.0 })
            .collect();
        Self {
            task,
            metric: task.metric(),
            items: results.len(),
            failed: results.iter().filter(|r| r.error.is_some()).count(),
            ours: metrics::figure(&scores),
            paper: task.paper_figure(),
            rerun: task.rerun_figure(),
            retrieved_percent: metrics::figure(&retrieved),
            settings,
            generator,
        }
    }

    /// The table (Markdown), then the settings of our figure and where the others come from.
    pub fn table(&self) -> String {
        let header = [
            "task",
            "items",
            "failed",
            "retrieved",
            "metric",
            "ours",
            "paper (Table 2, Self-RAG 7B)",
            "rerun (self-rag #71)",
        ];
        let row = [
            self.task.name().to_owned(),
            self.items.to_string(),
            self.failed.to_string(),
            format!("{:.1}%", self.retrieved_percent),
            self.metric.name().to_owned(),
            format!("{:.1}", self.ours),
            format!("{:.1}", self.paper),
            self.rerun
                .map_or_else(|| "–".to_owned(), |r| format!("{r:.1}")),
        ];
        let widths: Vec<usize> = header
            .iter()
            .zip(&row)
            .map(|(h, r)| h.chars().count().max(r.chars().count()))
            .collect();
        let line = |cells: Vec<String>| format!("| {} |\n", cells.join(" | "));
        let pad = |cells: &[String]| -> Vec<String> {
            cells
                .iter()
                .zip(&widths)
                .map(|(c, w)| format!("{c:<w$}"))
                .collect()
        };
        let header: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
        let mut table = line(pad(&header));
        table.push_str(&line(widths.iter().map(|w| "-".repeat(*w)).collect()));
        table.push_str(&line(pad(&row)));
        table.push_str(&format!("\nours: {}\n", self.settings_text()));
        if let Some(generator) = self.generator_text() {
            table.push_str(&format!("generator: {generator}\n"));
        }
        table.push_str(
            "paper: Asai et al., ICLR 2024, Table 2 (the reference code on vLLM); rerun: the \
             reference code run again by others (AkariAsai/self-rag issue #71).\n",
        );
        table
    }

    /// The settings that produced our figure, in words.
    pub fn settings_text(&self) -> String {
        let s = &self.settings;
        let as_json = serde_json::to_value(s).unwrap_or_default();
        let mode = as_json["mode"].as_str().unwrap_or("?").to_owned();
        let mut parts = vec![format!("mode {mode}")];
        if mode == "adaptive" {
            parts.push(format!("δ {}", s.threshold));
        }
        parts.push(format!("K {}", s.k));
        parts.push(format!(
            "w_rel {}, w_sup {}, w_use {}",
            s.weights.rel, s.weights.sup, s.weights.use_
        ));
        parts.push(match (s.use_p_lm, as_json["p_lm_tokens"].as_str()) {
            (false, _) => "p_LM off".to_owned(),
            (true, Some(tokens)) => format!("p_LM on (over {tokens} tokens)"),
            (true, None) => "p_LM on".to_owned(),
        });
        parts.push(format!(
            "hard constraints {}",
            if s.hard_constraints { "on" } else { "off" }
        ));
        parts.push(format!("prompt budget {} tokens", s.prompt_budget));
        if s.long_form {
            let ranking = as_json["long_form_ranking"].as_str().unwrap_or("?");
            parts.push(format!(
                "long form: beam {}, at most {} segments of {} tokens, paths ranked {ranking}",
                s.beam_width, s.max_segments, s.max_segment_tokens
            ));
        } else {
            parts.push(format!("short form: {} new tokens", s.max_new_tokens));
        }
        parts.join(", ")
    }

    /// The generator's record (every field the trace keeps: where it ran, and the numerics it
    /// records such as its cache precision and dummy prefix), in words.
    pub fn generator_text(&self) -> Option<String> {
        let value = serde_json::to_value(self.generator.as_ref()?).ok()?;
        let fields = value.as_object()?;
        Some(
            fields
                .iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| match v {
                    serde_json::Value::String(s) => format!("{k} {s}"),
                    other => format!("{k} {other}"),
                })
                .collect::<Vec<_>>()
                .join(", "),
        )
    }
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// 0 and 1 as they are, a share with two decimals.
fn number(x: f64) -> String {
    if x == 0.0 || x == 1.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use selfrag_core::{ClosedSetKind, OptionScore, Question};

    fn item(gold: Gold) -> EvalItem {
        EvalItem {
            place: Place::Line(4),
            id: Some("q4".into()),
            question: "Q?".into(),
            asked: Question::Open("Q?".into()),
            passages: Vec::new(),
            gold,
        }
    }

    fn result(gold: Gold, prediction: &str, retrieved: bool) -> ItemResult {
        let item = item(gold);
        ItemResult {
            score: item.gold.score(prediction),
            prediction: prediction.into(),
            answer: prediction.into(),
            retrieved,
            error: None,
            ..ItemResult::failed(&item, "x")
        }
    }

    #[test]
    fn each_gold_scores_with_its_metric() {
        let answers = Gold::Answers(vec!["Oslo".into()]);
        assert_eq!(answers.score("It is Oslo."), 1.0);
        assert_eq!(answers.score("oslo"), 0.0);
        let label = Gold::Label("B".into());
        assert_eq!(label.score("B"), 1.0);
        assert_eq!(label.score(""), 0.0);
        let pairs = Gold::ShortAnswers(vec![vec!["X".into()], vec!["Y".into()]]);
        assert_eq!(pairs.score("x"), 0.5);
    }

    #[test]
    fn the_summary_averages_every_item_failed_ones_as_zero() {
        let gold = Gold::Answers(vec!["Oslo".into()]);
        let mut results = vec![
            result(gold.clone(), "Oslo", true),
            result(gold.clone(), "Bergen", true),
            result(gold.clone(), "Oslo", false),
        ];
        results.push(ItemResult::failed(&item(gold), "the prompt is too long"));
        let summary = Summary::new(Task::PopQa, &results, Task::PopQa.settings(), None);
        assert_eq!(summary.items, 4);
        assert_eq!(summary.failed, 1);
        assert_eq!(summary.ours, 50.0);
        assert_eq!(summary.retrieved_percent, 50.0);
        let table = summary.table();
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].starts_with("| task  | items | failed | retrieved | metric | ours "));
        assert!(
            lines[1].starts_with("| ----- | ----- | ------ |"),
            "{table}"
        );
        assert!(
            lines[2].starts_with("| popqa | 4     | 1      | 50.0%     | match  | 50.0 | 54.9 "),
            "{table}"
        );
        assert!(
            lines[2].trim_end().ends_with("| 50.8                 |"),
            "{table}"
        );
        assert!(
            table
                .contains("ours: mode adaptive, δ 0.2, K 10, w_rel 1, w_sup 1, w_use 0.5, p_LM on"),
            "{table}"
        );
        assert!(
            table.contains("prompt budget 2048 tokens, short form: 100 new tokens"),
            "{table}"
        );
    }

    #[test]
    fn a_task_without_a_rerun_shows_a_dash_and_long_form_its_segments() {
        let results = vec![result(
            Gold::ShortAnswers(vec![vec!["X".into()]]),
            "X",
            true,
        )];
        let table = Summary::new(Task::Asqa, &results, Task::Asqa.settings(), None).table();
        assert!(table.contains("| str-em | 100.0 | 30.0 "), "{table}");
        assert!(
            table
                .lines()
                .nth(2)
                .unwrap()
                .trim_end()
                .ends_with("| –                    |")
        );
        assert!(table.contains("mode always, K 5"), "{table}");
        assert!(table.contains("long form: beam 2, at most 6 segments of 300 tokens"));
    }

    #[test]
    fn item_lines_show_the_prediction_the_gold_and_the_score() {
        let line = result(Gold::Answers(vec!["Oslo".into()]), "In\nOslo", true).line();
        assert_eq!(
            line,
            "line 4 (q4): retrieved · prediction \"In Oslo\" · gold Oslo · match 1"
        );
        let mut closed = result(Gold::Label("B".into()), "A", false);
        closed.answer = "A: whale".into();
        closed.options = Some(ClosedSetScores {
            kind: ClosedSetKind::MultipleChoice,
            question: "Which is a mammal?".into(),
            options: vec![
                OptionScore {
                    label: "A".into(),
                    text: "whale".into(),
                    score: 2.5,
                    candidates: vec![0],
                },
                OptionScore {
                    label: "B".into(),
                    text: "shark".into(),
                    score: 0.0,
                    candidates: vec![],
                },
            ],
            chosen: Some(0),
        });
        assert_eq!(
            closed.line(),
            "line 4 (q4): no retrieval · prediction A (A 2.50, B 0.00; answer \"A: whale\") · \
             gold B · accuracy 0"
        );
        let failed = ItemResult::failed(&item(Gold::Label("B".into())), "too\nlong");
        assert_eq!(
            failed.line(),
            "line 4 (q4): failed: too long · gold B · accuracy 0"
        );
    }
}
