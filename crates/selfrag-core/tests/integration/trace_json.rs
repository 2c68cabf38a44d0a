//! The JSON trace is a public contract: pin its key names.

use std::collections::BTreeSet;

use selfrag_core::{Answer, LongFormRanking, PLmTokens, Progress, RetrieveMode, Settings};
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
            "p_lm_tokens",
            "hard_constraints",
            "long_form",
            "beam_width",
            "max_segments",
            "long_form_ranking",
            "prompt_budget",
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

/// A trace saved before p_LM's tokens, the long-form ranking and the prompt budget were
/// settings reads as the rules it was written under; a settings file or request without them
/// takes today's defaults.
#[test]
fn settings_added_later_read_as_the_rule_an_older_trace_was_written_under() {
    let mut json = serde_json::to_value(sample()).unwrap();
    for field in ["p_lm_tokens", "long_form_ranking", "prompt_budget"] {
        json["settings"]
            .as_object_mut()
            .unwrap()
            .remove(field)
            .unwrap();
    }
    let old: Answer = serde_json::from_value(json.clone()).unwrap();
    assert_eq!(old.settings.p_lm_tokens, PLmTokens::Text);
    assert_eq!(old.settings.long_form_ranking, LongFormRanking::Raw);
    assert_eq!(old.settings.prompt_budget, 131_072);

    let request: Settings = serde_json::from_value(json["settings"].clone()).unwrap();
    assert_eq!(request.p_lm_tokens, PLmTokens::All);
    assert_eq!(request.long_form_ranking, LongFormRanking::Normalised);
    assert_eq!(request.prompt_budget, 2048);

    // Recorded ones read back as recorded.
    let new = sample();
    let read: Answer = serde_json::from_value(serde_json::to_value(&new).unwrap()).unwrap();
    assert_eq!(read.settings, new.settings);
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

/// The numerics every answer states (issue 47, item 7): the generator's KV cache and dummy
/// prefix, the embedder its query was searched with. A trace saved before they were recorded
/// reads with them absent, and one that has them reads back equal.
#[test]
fn numerics_recorded_later_are_absent_from_older_traces_and_read_back_when_present() {
    let mut json = serde_json::to_value(sample()).unwrap();
    json["generator"] = serde_json::json!({
        "kind": "local",
        "model": "selfrag_llama2_7b.q4_k_m.gguf",
        "runtime": "cpu",
    });
    let old: Answer = serde_json::from_value(json).unwrap();
    let generator = old.generator.unwrap();
    assert_eq!(generator.cache_precision, None);
    assert_eq!(generator.dummy_prefix, None);
    assert_eq!(old.embedder, None);

    let mut new = sample();
    new.generator = Some(selfrag_core::GeneratorInfo {
        cache_precision: Some(selfrag_core::CachePrecision::Q8),
        dummy_prefix: Some(selfrag_core::DummyPrefix::EveryFragment),
        ..generator
    });
    new.embedder = Some(selfrag_core::EmbedderInfo {
        model: "facebook/contriever-msmarco@abc".into(),
        precision: selfrag_core::EmbedderPrecision::Int8,
        device: selfrag_core::DeviceKind::Cpu,
        server: None,
    });
    let json = serde_json::to_value(&new).unwrap();
    assert_eq!(json["generator"]["cache_precision"], "q8");
    assert_eq!(json["generator"]["dummy_prefix"], "every-fragment");
    assert_eq!(
        json["embedder"],
        serde_json::json!({
            "model": "facebook/contriever-msmarco@abc",
            "precision": "int8",
            "device": "cpu",
        })
    );
    assert_eq!(serde_json::from_value::<Answer>(json).unwrap(), new);
}

/// The trace's embedder is the one the retriever says made the query's vector, asked once the
/// run is over; a retriever that says nothing leaves it absent.
#[test]
fn the_embedder_the_retriever_names_is_recorded_in_the_trace() {
    struct Described {
        library: Library,
        searched_with: Option<selfrag_core::EmbedderInfo>,
    }
    impl selfrag_core::Retriever for Described {
        fn search(
            &mut self,
            query: &str,
            k: usize,
        ) -> Result<Vec<selfrag_core::Passage>, selfrag_core::BackendError> {
            self.searched_with = Some(selfrag_core::EmbedderInfo {
                model: "bert".into(),
                precision: selfrag_core::EmbedderPrecision::F32,
                device: selfrag_core::DeviceKind::Cpu,
                server: None,
            });
            selfrag_core::Retriever::search(&mut self.library, query, k)
        }
        fn describe(&self) -> Option<selfrag_core::EmbedderInfo> {
            self.searched_with.clone()
        }
    }
    let settings = |mode| Settings {
        mode,
        ..Settings::default()
    };
    let generator = || {
        Scripted::fixed(0.9, 0.1, |_| {
            Script::candidate(
                "Paris",
                (0.6, 0.2),
                [0.3, 0.2, 0.1],
                [0.1, 0.1, 0.2, 0.2, 0.4],
            )
        })
    };
    let answer = |mode| {
        let mut retriever = Described {
            library: Library::new(&["Paris is"]),
            searched_with: None,
        };
        selfrag_core::answer(
            "Capital?",
            &settings(mode),
            &mut generator(),
            &mut retriever,
            &mut |_| {},
            &(),
        )
        .unwrap()
    };
    let searched = answer(RetrieveMode::Always).embedder.unwrap();
    assert_eq!(searched.precision, selfrag_core::EmbedderPrecision::F32);
    assert_eq!(
        answer(RetrieveMode::Never).embedder,
        None,
        "nothing searched"
    );
    assert_eq!(sample().embedder, None, "a retriever that says nothing");
}
