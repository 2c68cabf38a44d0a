//! `selfrag eval` and `selfrag ask --option` with the real tiny models: the table's shape, and
//! its figure is the metric over the predictions it printed; the options' scores are the sums
//! of their candidates' scores in the trace.

// Test code: a failed unwrap is a failed test, at the line that failed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{describe, ok};
use selfrag_eval::Gold;
use serde_json::Value;

/// The evaluation files shipped with selfrag-eval's tests.
fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../selfrag-eval/tests/data")
        .join(name)
}

fn selfrag(tmp: &Path, args: &[&str]) -> Output {
    let models = tmp.join("models");
    if !models.join(common::GENERATOR).exists() {
        common::tiny_models(&models);
    }
    common::selfrag_with_models(&tmp.join("data"), &models)
        .args(args)
        .output()
        .unwrap()
}

/// Two golds that any prediction of a few words holds (a space, an `e`) and two that none can.
const ENGINEERED: &str = r#"{"question": "Q one?", "answers": [" ", "e"], "ctxs": [{"title": "T1", "text": "First passage."}, {"title": "T2", "text": "Second passage."}]}
{"question": "Q two?", "answers": ["@@never@@"], "ctxs": [{"title": "T3", "text": "Third passage."}]}
{"question": "Q three?", "answers": [" ", "e"], "ctxs": [{"title": "T4", "text": "Fourth passage."}]}
{"question": "Q four?", "answers": ["@@nowhere@@"], "ctxs": [{"title": "T5", "text": "Fifth passage."}]}
"#;

/// The summary and items of `selfrag eval ARGS --json`.
fn eval_json(tmp: &Path, args: &[&str]) -> (Value, Vec<Value>) {
    let mut all = vec!["eval"];
    all.extend_from_slice(args);
    all.push("--json");
    let json: Value = serde_json::from_str(&ok(selfrag(tmp, &all))).unwrap();
    let items = json["items"].as_array().unwrap().clone();
    (json["summary"].clone(), items)
}

/// Each item's metric recomputed from its printed prediction and gold.
fn recomputed(items: &[Value]) -> Vec<f64> {
    items
        .iter()
        .map(|item| {
            let gold: Gold = gold_of(&item["gold"]);
            gold.score(item["prediction"].as_str().unwrap())
        })
        .collect()
}

fn gold_of(value: &Value) -> Gold {
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_owned())
            .collect()
    };
    if let Some(answers) = value.get("answers") {
        Gold::Answers(strings(answers))
    } else if let Some(label) = value.get("label") {
        Gold::Label(label.as_str().unwrap().to_owned())
    } else {
        Gold::ShortAnswers(
            value["short_answers"]
                .as_array()
                .unwrap()
                .iter()
                .map(strings)
                .collect(),
        )
    }
}

fn mean_percent(scores: &[f64]) -> f64 {
    100.0 * scores.iter().sum::<f64>() / scores.len() as f64
}

#[test]
fn the_figure_is_the_metric_over_the_printed_predictions() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("popqa.jsonl");
    std::fs::write(&input, ENGINEERED).unwrap();
    let input = input.to_str().unwrap();
    let args = ["--task", "popqa", "--input", input, "--max-tokens", "12"];

    let (summary, items) = eval_json(tmp.path(), &args);
    assert_eq!(items.len(), 4);
    let scores = recomputed(&items);
    for (item, score) in items.iter().zip(&scores) {
        assert_eq!(item["score"].as_f64().unwrap(), *score, "{item}");
    }
    assert_eq!(scores[1], 0.0);
    assert_eq!(scores[3], 0.0);
    assert!(
        scores.contains(&1.0),
        "the tiny model's predictions of 12 tokens hold a space or an `e`: {items:?}"
    );
    let ours = summary["ours"].as_f64().unwrap();
    assert!((ours - mean_percent(&scores)).abs() < 1e-9, "{summary}");
    assert_eq!(summary["items"], 4);
    assert_eq!(summary["metric"], "match");
    assert_eq!(summary["paper"], 54.9);
    assert_eq!(summary["rerun"], 50.8);
    // PopQA reads 10 passages, as the paper and the reference's README.
    assert_eq!(summary["settings"]["k"], 10);
    assert_eq!(summary["settings"]["max_new_tokens"], 12);
    assert_eq!(summary["generator"]["model"], common::GENERATOR);

    // The same run as text: a line per item with its score, then the table with the figure.
    let text = ok(selfrag(tmp.path(), &[&["eval"][..], &args[..]].concat()));
    let lines: Vec<&str> = text.lines().collect();
    for (i, score) in scores.iter().enumerate() {
        assert!(
            lines[i].starts_with(&format!("line {}: ", i + 1))
                && lines[i].ends_with(&format!("· match {score}")),
            "{text}"
        );
        let prediction = items[i]["prediction"].as_str().unwrap();
        let shown = prediction.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            lines[i].contains(&format!("prediction {shown:?}")),
            "{text}"
        );
    }
    let table: Vec<&str> = lines[5..].to_vec();
    assert_eq!(
        table[0],
        "| task  | items | failed | retrieved | metric | ours | paper (Table 2, Self-RAG 7B) \
         | rerun (self-rag #71) |"
    );
    let row: Vec<&str> = table[2].split('|').map(str::trim).collect();
    assert_eq!(row[1..5], ["popqa", "4", "0", "100.0%"], "{text}");
    assert_eq!(row[5], "match");
    assert_eq!(row[6], format!("{:.1}", mean_percent(&scores)), "{text}");
    assert_eq!(row[7..9], ["54.9", "50.8"], "{text}");
    assert!(
        text.contains("ours: mode adaptive, δ 0.2, K 10, w_rel 1, w_sup 1, w_use 0.5, p_LM on"),
        "{text}"
    );
    assert!(
        text.contains("generator: kind local, model tiny.gguf, runtime cpu"),
        "{text}"
    );
}

#[test]
fn closed_set_items_are_scored_by_the_option_their_candidates_chose() {
    let tmp = tempfile::tempdir().unwrap();
    let input = data("arc_c.jsonl");
    let (summary, items) = eval_json(
        tmp.path(),
        &[
            "--task",
            "arc_c",
            "--input",
            input.to_str().unwrap(),
            "--max-tokens",
            "8",
        ],
    );
    assert_eq!(items.len(), 3);
    for item in &items {
        let options = item["options"]["options"].as_array().unwrap();
        let labels: Vec<&str> = options
            .iter()
            .map(|o| o["label"].as_str().unwrap())
            .collect();
        assert!(labels.starts_with(&["A", "B", "C", "D"]), "{item}");
        // The prediction is the chosen option's label, or nothing where none was named.
        let prediction = item["prediction"].as_str().unwrap();
        match item["options"]["chosen"].as_u64() {
            Some(i) => assert_eq!(prediction, labels[i as usize]),
            None => assert_eq!(prediction, ""),
        }
    }
    // ARC's third item has a fifth option, kept.
    assert_eq!(items[2]["options"]["options"][4]["label"], "E");
    // The second's labels are 1–3, read as A–C, its gold `2` as B.
    assert_eq!(items[1]["gold"]["label"], "B");
    let scores = recomputed(&items);
    let ours = summary["ours"].as_f64().unwrap();
    assert!((ours - mean_percent(&scores)).abs() < 1e-9, "{summary}");
    assert_eq!(summary["metric"], "accuracy");
    assert_eq!(summary["rerun"], Value::Null);
    assert_eq!(summary["settings"]["max_new_tokens"], 8);
}

#[test]
fn every_tasks_test_file_runs_with_the_tasks_settings() {
    let tmp = tempfile::tempdir().unwrap();
    for (task, file, metric, paper) in [
        ("popqa", "popqa.jsonl", "match", "54.9"),
        ("triviaqa", "triviaqa.jsonl", "match", "66.4"),
        ("pubhealth", "pubhealth.jsonl", "accuracy", "72.4"),
        ("arc_c", "arc_c.jsonl", "accuracy", "67.3"),
        ("asqa", "asqa.json", "str-em", "30.0"),
    ] {
        let input = data(file);
        let out = selfrag(
            tmp.path(),
            &[
                "eval",
                "--task",
                task,
                "--input",
                input.to_str().unwrap(),
                "--limit",
                "2",
                "--max-tokens",
                "4",
            ],
        );
        let text = ok(out);
        let row = text
            .lines()
            .find(|l| l.starts_with(&format!("| {task} ")))
            .unwrap_or_else(|| panic!("no table row for {task}: {text}"));
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        assert_eq!(cells[2], "2", "--limit 2: {row}");
        assert_eq!(cells[5], metric, "{row}");
        assert_eq!(cells[7], paper, "{row}");
        if task == "asqa" {
            assert!(
                text.contains("mode always, K 5")
                    && text.contains("long form: beam 2, at most 6 segments of 4 tokens"),
                "{text}"
            );
        }
    }
}

#[test]
fn a_bad_line_is_named_with_its_file_and_line() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("broken.jsonl");
    let good = r#"{"question": "Q?", "answers": ["A"], "ctxs": [{"title": "T", "text": "X"}]}"#;
    std::fs::write(&input, format!("{good}\n{{\"question\": \"Q?\",\n")).unwrap();
    let out = selfrag(
        tmp.path(),
        &[
            "eval",
            "--task",
            "triviaqa",
            "--input",
            input.to_str().unwrap(),
        ],
    );
    assert!(!out.status.success(), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("{}, line 2: not a JSON object", input.display())),
        "{err}"
    );

    let out = selfrag(
        tmp.path(),
        &[
            "eval",
            "--task",
            "gsm8k",
            "--input",
            input.to_str().unwrap(),
        ],
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("popqa, triviaqa, pubhealth, arc_c or asqa")
    );
}

#[test]
fn ask_with_options_prints_them_with_the_sums_of_their_candidates_scores() {
    let tmp = tempfile::tempdir().unwrap();
    let notes = tmp.path().join("notes");
    std::fs::create_dir_all(&notes).unwrap();
    for (name, text) in [
        (
            "whales.md",
            "# Whales\nWhales are mammals that breathe air.\n",
        ),
        ("sharks.md", "# Sharks\nSharks are fish with gills.\n"),
        ("trout.md", "# Trout\nTrout are fish of cold rivers.\n"),
    ] {
        std::fs::write(notes.join(name), text).unwrap();
    }
    ok(selfrag(tmp.path(), &["index", notes.to_str().unwrap()]));
    let ask = |extra: &[&str]| {
        let mut args = vec![
            "ask",
            "Which is a mammal?",
            "--option",
            "whale",
            "--option",
            "shark",
            "--option",
            "trout",
            "--mode",
            "always",
            "--k",
            "3",
            "--max-tokens",
            "8",
        ];
        args.extend_from_slice(extra);
        ok(selfrag(tmp.path(), &args))
    };
    let trace: Value = serde_json::from_str(&ask(&["--json"])).unwrap();
    // The trace records the person's question (the model read the reference's layout of it).
    assert_eq!(trace["question"], "Which is a mammal?", "{trace}");
    let candidates = trace["segments"][0]["candidates"].as_array().unwrap();
    assert_eq!(candidates.len(), 3);
    let scores = &trace["closed_set"];
    assert_eq!(scores["kind"], "multiple_choice");
    assert_eq!(scores["question"], "Which is a mammal?");
    let options = scores["options"].as_array().unwrap();
    assert_eq!(options.len(), 3);
    let mut named = 0;
    for option in options {
        let sum: f64 = option["candidates"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                candidates[c.as_u64().unwrap() as usize]["score"]
                    .as_f64()
                    .unwrap()
            })
            .sum();
        assert!(
            (option["score"].as_f64().unwrap() - sum).abs() < 1e-5,
            "{option}"
        );
        named += option["candidates"].as_array().unwrap().len();
    }
    // Every candidate is counted for the option its text names, or for none.
    let options_core: Vec<selfrag_core::AnswerOption> = options
        .iter()
        .map(|o| selfrag_core::AnswerOption {
            label: o["label"].as_str().unwrap().into(),
            text: o["text"].as_str().unwrap().into(),
        })
        .collect();
    let naming = candidates
        .iter()
        .filter(|c| {
            selfrag_core::closed_set::option_named(
                selfrag_core::ClosedSetKind::MultipleChoice,
                &options_core,
                c["text"].as_str().unwrap(),
            )
            .is_some()
        })
        .count();
    assert_eq!(named, naming);

    let text = ask(&[]);
    assert!(
        text.contains("Options, each scored the sum of f over the candidates that name it:"),
        "{text}"
    );
    for (label, option) in ["A: whale", "B: shark", "C: trout"].iter().zip(options) {
        let score = option["score"].as_f64().unwrap();
        assert!(
            text.lines().any(|l| l
                .get(2..)
                .is_some_and(|l| l.starts_with(&format!("{label}  {score:.3}")))),
            "{label} {score}: {text}"
        );
    }

    let out = selfrag(
        tmp.path(),
        &["ask", "Which?", "--option", "only one", "--mode", "never"],
    );
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("from 2 to 26 answer options"),
        "{}",
        describe(&out)
    );
}
