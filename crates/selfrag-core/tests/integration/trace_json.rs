//! The JSON trace is a public contract: pin its key names.

use std::collections::BTreeSet;

use selfrag_core::{Answer, Progress, RetrieveMode, Settings};
use serde_json::Value;

use crate::util::*;

fn keys(value: &Value) -> BTreeSet<String> {
    value.as_object().unwrap().keys().cloned().collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

fn sample() -> Answer {
    let mut g = Scripted::fixed(0.9, 0.1, |_| {
        Script::candidate(
            "Paris",
            (0.6, 0.2),
            [0.3, 0.2, 0.1],
            [0.1, 0.1, 0.2, 0.2, 0.4],
        )
    });
    let settings = Settings {
        mode: RetrieveMode::Always,
        ..Settings::default()
    };
    run(
        "Capital?",
        &settings,
        &mut g,
        &mut Library::new(&["Paris is"]),
    )
    .0
}

#[test]
fn answer_json_has_exactly_the_trace_keys() {
    let answer = sample();
    let json = serde_json::to_value(&answer).unwrap();
    assert_eq!(
        keys(&json),
        set(&[
            "question", "settings", "retrieve", "passages", "segments", "answer", "timings"
        ])
    );
    // The scripted generator cannot tell reading the prompts from decoding.
    assert_eq!(
        keys(&json["timings"]),
        set(&[
            "load_seconds",
            "decide_seconds",
            "search_seconds",
            "generate_seconds",
            "critique_seconds",
            "answer_seconds",
        ])
    );
    // Microseconds: a saved answer reads back equal (serde_json's fast float parser is exact
    // for numbers of so few digits).
    let read: Answer = serde_json::from_value(json.clone()).unwrap();
    assert_eq!(read, answer);
    assert_eq!(
        keys(&json["settings"]),
        set(&[
            "mode",
            "threshold",
            "k",
            "weights",
            "use_p_lm",
            "hard_constraints",
            "long_form",
            "beam_width",
            "max_segments",
            "max_new_tokens",
            "max_segment_tokens",
        ])
    );
    assert_eq!(
        keys(&json["settings"]["weights"]),
        set(&["rel", "sup", "use"])
    );
    assert_eq!(json["settings"]["mode"], "always");
    assert_eq!(keys(&json["retrieve"]), set(&["p_retrieve", "retrieved"]));
    assert_eq!(
        keys(&json["passages"][0]),
        set(&["id", "title", "path", "page", "text"])
    );
    let segment = &json["segments"][0];
    assert_eq!(
        keys(segment),
        set(&["text", "citation", "chosen", "candidates", "retrieve"])
    );
    let candidate = &segment["candidates"][0];
    assert_eq!(
        keys(candidate),
        set(&[
            "passage",
            "text",
            "raw",
            "p_lm",
            "isrel",
            "issup",
            "isuse",
            "s_rel",
            "s_sup",
            "s_use",
            "score",
            "ends_answer",
            "verdicts",
        ])
    );
    assert_eq!(
        keys(&candidate["verdicts"]),
        set(&["isrel", "issup", "isuse"])
    );
    assert_eq!(
        candidate["verdicts"],
        serde_json::json!({"isrel": "relevant", "issup": "fully", "isuse": 5})
    );
    assert_eq!(
        keys(&candidate["isrel"]),
        set(&["[Relevant]", "[Irrelevant]"])
    );
    assert_eq!(
        keys(&candidate["issup"]),
        set(&[
            "[Fully supported]",
            "[Partially supported]",
            "[No support / Contradictory]"
        ])
    );
    assert_eq!(
        keys(&candidate["isuse"]),
        set(&[
            "[Utility:1]",
            "[Utility:2]",
            "[Utility:3]",
            "[Utility:4]",
            "[Utility:5]"
        ])
    );
    let back: Answer = serde_json::from_value(json).unwrap();
    assert_eq!(back, answer);
}

#[test]
fn progress_json_is_tagged_by_kind() {
    let event = Progress::RetrieveDecided {
        p_retrieve: 0.5,
        threshold: 0.2,
        mode: RetrieveMode::Adaptive,
        retrieved: true,
    };
    let json = serde_json::to_value(&event).unwrap();
    assert_eq!(json["kind"], "retrieve_decided");
    assert_eq!(json["mode"], "adaptive");
    let chosen = serde_json::to_value(Progress::SegmentChosen {
        segment: 0,
        text: "x".into(),
        citation: None,
    })
    .unwrap();
    assert_eq!(keys(&chosen), set(&["kind", "segment", "text", "citation"]));
    assert_eq!(chosen["kind"], "segment_chosen");
}

/// Issue 44, item 6: JSON has no NaN or infinity. serde writes one as `null`, which does not
/// read back as a score, so a saved answer holding one dropped out of the history (and the
/// page threw on `null.toFixed`). Whatever a generator gives, an answer with such a number is
/// an error that says where it is, never an answer.
#[test]
fn a_score_that_is_not_a_finite_number_is_an_error_not_an_answer_that_cannot_be_saved() {
    let settings = Settings {
        mode: RetrieveMode::Always,
        ..Settings::default()
    };
    let useful = [0.1, 0.1, 0.2, 0.2, 0.4];
    let cases: [(&str, Scripted); 3] = [
        (
            "segment 1, candidate 1: p([Relevant]) is NaN",
            Scripted::fixed(0.9, 0.1, move |_| {
                Script::candidate("Paris", (f32::NAN, 0.2), [0.3, 0.2, 0.1], useful)
            }),
        ),
        (
            "segment 1, candidate 1: p_lm is inf",
            Scripted::fixed(0.9, 0.1, move |_| {
                Script::new()
                    .isrel(0.6, 0.2)
                    .text("Paris", f32::INFINITY)
                    .issup([0.3, 0.2, 0.1])
                    .isuse(useful)
                    .eos()
            }),
        ),
        (
            "the retrieve decision: p_retrieve is NaN",
            Scripted::fixed(f32::INFINITY, 0.1, move |_| {
                Script::candidate("Paris", (0.6, 0.2), [0.3, 0.2, 0.1], useful)
            }),
        ),
    ];
    for (where_, mut g) in cases {
        let err = selfrag_core::answer(
            "Capital?",
            &settings,
            &mut g,
            &mut Library::new(&["Paris is"]),
            &mut |_| {},
            &(),
        )
        .unwrap_err();
        assert!(
            matches!(err, selfrag_core::SelfRagError::NonFiniteScore { .. }),
            "{where_}: {err:?}"
        );
        let message = err.to_string();
        assert!(message.contains(where_), "{message}");
    }
    // What a finite answer's JSON does, and a NaN's does not: read back.
    let mut answer = sample();
    let json = serde_json::to_string(&answer).unwrap();
    assert_eq!(serde_json::from_str::<Answer>(&json).unwrap(), answer);
    answer.segments[0].candidates[0].s_sup = f32::NAN;
    let json = serde_json::to_string(&answer).unwrap();
    assert!(serde_json::from_str::<Answer>(&json).is_err());
    assert!(
        answer
            .non_finite_score()
            .is_some_and(|w| w == "segment 1, candidate 1: s_sup is NaN")
    );
}
