//! The reference's metrics, each on one item (0 or 1, or a share for str-em); a task's figure is
//! 100 × their mean ([`figure`]), as the reference prints it.

use selfrag_core::Answer;
use selfrag_core::closed_set::normalize_answer;

/// `match` (the reference's `metrics.py` `match`, lines 83–87, used for PopQA and TriviaQA,
/// `run_short_form.py` lines 344–349; the paper follows Mallen et al. 2023 in asking whether
/// a gold answer is included in the generation): whether any gold answer is a substring of the
/// prediction, case-sensitive and without normalisation, as the reference compares them. An
/// empty gold answer is skipped (in Python `"" in s` always holds, so one would match
/// anything).
pub fn gold_in_prediction(prediction: &str, golds: &[String]) -> bool {
    golds
        .iter()
        .any(|gold| !gold.is_empty() && prediction.contains(gold.as_str()))
}

/// Accuracy on one closed-set item: whether the chosen option is the gold one (`None`, no
/// option named, is wrong). The paper's Table 2 reports accuracy for PubHealth and ARC; the
/// reference's README runs them with `--metric match`, a gold label as a substring of the
/// prediction, which a text naming no option can pass by containing the letter (`A` in
/// `A whale`); here the prediction is the option the candidates' scores chose
/// (`selfrag_core::closed_set`), so the two agree wherever an option is named.
pub fn option_is_gold(chosen: Option<&str>, gold: &str) -> bool {
    chosen.is_some_and(|label| label.eq_ignore_ascii_case(gold))
}

/// ALCE's `exact_presence` (`eval.py` lines 69–84): whether any short answer, normalised as
/// SQuAD normalises ([`normalize_answer`]: lower case, no punctuation or articles, single
/// spaces), is a substring of the normalised text.
pub fn exact_presence(short_answers: &[String], text: &str) -> bool {
    let text = normalize_answer(text);
    short_answers
        .iter()
        .any(|answer| text.contains(normalize_answer(answer).as_str()))
}

/// ASQA's str-em on one item (ALCE's `compute_str_em`, `eval.py` lines 158–179): the share of
/// the question's interpretations with a short answer present in the prediction. An item with
/// no interpretations scores 0.
pub fn str_em(prediction: &str, qa_pairs: &[Vec<String>]) -> f64 {
    if qa_pairs.is_empty() {
        return 0.0;
    }
    let present = qa_pairs
        .iter()
        .filter(|answers| exact_presence(answers, prediction))
        .count();
    present as f64 / qa_pairs.len() as f64
}

/// A task's figure: 100 × the mean of its items' metric, as the reference prints it
/// (`run_short_form.py` line 366); 0 without items.
pub fn figure(scores: &[f64]) -> f64 {
    if scores.is_empty() {
        0.0
    } else {
        100.0 * scores.iter().sum::<f64>() / scores.len() as f64
    }
}

/// The text an answer is scored on: its segments' texts joined by spaces, with the reflection
/// tokens, `</s>` and the `[n]` citation markers left out (the reference scores the generated
/// text; its ASQA output adds citation markers, which str-em's normalisation turns into stray
/// digits). A leading `#` or `:` is dropped, as the reference drops it (`run_short_form.py`
/// lines 331–332).
pub fn prediction_text(answer: &Answer) -> String {
    let joined = answer
        .segments
        .iter()
        .map(|s| s.text.trim())
        .filter(|t| !t.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    joined
        .strip_prefix(['#', ':'])
        .unwrap_or(&joined)
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn golds(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn match_is_a_case_sensitive_substring_as_in_the_reference() {
        let g = golds(&["Bram Stoker", "Abraham Stoker"]);
        assert!(gold_in_prediction(
            "Dracula was written by Bram Stoker.",
            &g
        ));
        assert!(gold_in_prediction("Abraham Stoker", &g));
        assert!(!gold_in_prediction("bram stoker", &g), "case matters");
        assert!(!gold_in_prediction("Bram  Stoker", &g), "no normalisation");
        assert!(
            gold_in_prediction("Stokerville", &golds(&["Stoker"])),
            "a substring"
        );
        assert!(
            !gold_in_prediction("anything", &golds(&[""])),
            "empty gold skipped"
        );
        assert!(!gold_in_prediction("anything", &[]));
    }

    #[test]
    fn accuracy_compares_the_chosen_label_with_the_gold_one() {
        assert!(option_is_gold(Some("B"), "B"));
        assert!(option_is_gold(Some("true"), "TRUE"));
        assert!(!option_is_gold(Some("A"), "B"));
        assert!(!option_is_gold(None, "B"));
    }

    #[test]
    fn str_em_is_the_share_of_interpretations_answered() {
        let pairs = vec![
            golds(&["The Beatles"]),
            golds(&["1969", "nineteen sixty-nine"]),
            golds(&["Abbey Road Studios"]),
        ];
        // "beatles" and "1969" are present after normalisation; the studio is not.
        let prediction = "It was the BEATLES, in 1969!";
        assert!((str_em(prediction, &pairs) - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(str_em("", &pairs), 0.0);
        assert_eq!(str_em("anything", &[]), 0.0);
        // Normalisation edge cases: punctuation inside words goes, articles go, spaces
        // collapse, so "U.S.A." is present in "usa" and "an  Apple" in "apple".
        assert!(exact_presence(&golds(&["U.S.A."]), "made in the usa"));
        assert!(exact_presence(&golds(&["an  Apple"]), "APPLE pie"));
        assert!(!exact_presence(&golds(&["rock-and-roll"]), "Rock and roll"));
        assert!(exact_presence(&golds(&["rock-and-roll"]), "rockandroll"));
        // A substring, not whole words, as ALCE checks it.
        assert!(exact_presence(&golds(&["art"]), "the party"));
        // An answer of only an article normalises to "" and is present in anything.
        assert!(exact_presence(&golds(&["The"]), "x"));
    }

    #[test]
    fn the_figure_is_a_percentage_of_the_mean() {
        assert_eq!(figure(&[1.0, 0.0, 1.0, 0.0]), 50.0);
        assert!((figure(&[1.0, 0.5]) - 75.0).abs() < 1e-12);
        assert_eq!(figure(&[]), 0.0);
    }
}
