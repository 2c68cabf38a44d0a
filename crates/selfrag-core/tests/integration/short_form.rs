//! Short form: retrieve decision, one batch of K candidates, critique, choice, citations.

use std::sync::atomic::{AtomicBool, Ordering};

use selfrag_core::{PLmTokens, Progress, RetrieveMode, SelfRagError, Settings};

use crate::util::*;

const SUPPORTED: [f32; 3] = [0.9, 0.05, 0.05];
const UNSUPPORTED: [f32; 3] = [0.05, 0.05, 0.9];
const USEFUL: [f32; 5] = [0.0, 0.0, 0.0, 0.0, 1.0];
const NEUTRAL: [f32; 5] = [0.0, 0.0, 1.0, 0.0, 0.0];

fn always() -> Settings {
    Settings {
        mode: RetrieveMode::Always,
        ..Settings::default()
    }
}

#[test]
fn scores_come_from_the_models_own_distributions() {
    let mut g = Scripted::fixed(0.9, 0.1, |_| {
        Script::candidate(
            "Paris is the capital",
            (0.6, 0.2),
            [0.3, 0.2, 0.1],
            [0.1, 0.1, 0.2, 0.2, 0.4],
        )
    });
    let settings = Settings {
        k: 1,
        ..Settings::default()
    };
    let (answer, _) = run(
        "Capital of France?",
        &settings,
        &mut g,
        &mut numbered_library(1),
    );
    let c = &answer.segments[0].candidates[0];
    assert!(close(c.s_rel, 0.75));
    assert!(close(c.s_sup, 0.4 / 0.6));
    assert!(close(c.s_use, 0.35));
    // p_LM over every generated token: [Relevant], four words, [Fully supported],
    // [Utility:5] and </s>, each at its own log-probability.
    let every = [
        0.6f32.ln(),
        -0.1,
        -0.1,
        -0.1,
        -0.1,
        0.3f32.ln(),
        0.4f32.ln(),
        SPECIAL_LOGPROB,
    ];
    assert!(close(c.p_lm, p_lm_of(&every)), "{}", c.p_lm);
    assert!(close(c.score, c.p_lm + 0.75 + 0.4 / 0.6 + 0.5 * 0.35));
    // The trace keeps the raw full-vocabulary probabilities, not the renormalised ones.
    assert_eq!(c.isrel.unwrap().relevant, 0.6);
    assert_eq!(c.issup.unwrap().fully, 0.3);
    assert_eq!(c.isuse.unwrap().u5, 0.4);
    assert_eq!(c.text, "Paris is the capital");
    assert_eq!(
        c.raw,
        "[Relevant] Paris is the capital[Fully supported][Utility:5]</s>"
    );
    assert_eq!(answer.answer, "Paris is the capital [1]");
    assert_clean(&answer);
}

#[test]
fn p_lm_is_taken_over_every_generated_token_by_default_and_over_text_on_request() {
    let script = || {
        Script::new()
            .isrel(1.0, 0.0)
            .text("a", -1.0)
            .text("b", -3.0)
            .issup(SUPPORTED)
            .isuse(USEFUL)
            .eos()
    };
    // As the reference: exp(cumulative log-probability / number of generated tokens), the
    // reflection tokens and </s> included.
    let mut g = Scripted::fixed(0.9, 0.1, move |_| script());
    let (answer, _) = run("Q?", &always(), &mut g, &mut numbered_library(1));
    let every = [0.0, -1.0, -3.0, 0.9f32.ln(), 0.0, SPECIAL_LOGPROB];
    let c = &answer.segments[0].candidates[0];
    assert!(close(c.p_lm, p_lm_of(&every)), "{}", c.p_lm);
    assert_eq!(answer.settings.p_lm_tokens, PLmTokens::All);

    let text_only = Settings {
        p_lm_tokens: PLmTokens::Text,
        ..always()
    };
    let mut g = Scripted::fixed(0.9, 0.1, move |_| script());
    let (answer, _) = run("Q?", &text_only, &mut g, &mut numbered_library(1));
    let c = &answer.segments[0].candidates[0];
    assert!(close(c.p_lm, (-2.0f32).exp()), "{}", c.p_lm);
    assert_eq!(answer.settings.p_lm_tokens, PLmTokens::Text);
}

#[test]
fn empty_text_has_p_lm_zero_over_text_tokens_and_its_reflection_tokens_over_all() {
    let text_only = Settings {
        p_lm_tokens: PLmTokens::Text,
        ..always()
    };
    let mut g = Scripted::fixed(0.9, 0.1, |_| Script::new().isrel(1.0, 0.0).eos());
    let (answer, _) = run("Q?", &text_only, &mut g, &mut numbered_library(1));
    assert_eq!(answer.segments[0].candidates[0].p_lm, 0.0);
    assert_eq!(answer.answer, "");

    let mut g = Scripted::fixed(0.9, 0.1, |_| Script::new().isrel(1.0, 0.0).eos());
    let (answer, _) = run("Q?", &always(), &mut g, &mut numbered_library(1));
    let p_lm = answer.segments[0].candidates[0].p_lm;
    assert!(close(p_lm, p_lm_of(&[0.0, SPECIAL_LOGPROB])), "{p_lm}");
}

#[test]
fn threshold_equal_does_not_retrieve_and_just_above_does() {
    let settings = Settings::default();
    assert_eq!(settings.threshold, 0.2);
    let respond = |_: &str| Script::new().text("x", -0.1).eos();

    let mut g = Scripted::fixed(0.1, 0.4, respond);
    let (answer, _) = run("Q?", &settings, &mut g, &mut numbered_library(3));
    assert_eq!(answer.retrieve.p_retrieve, 0.2);
    assert!(!answer.retrieve.retrieved);

    let mut g = Scripted::fixed(0.1001, 0.4, respond);
    let (answer, _) = run("Q?", &settings, &mut g, &mut numbered_library(3));
    assert!(answer.retrieve.p_retrieve > 0.2);
    assert!(answer.retrieve.retrieved);
}

#[test]
fn every_mode_decides_as_specified_and_records_p_retrieve() {
    let cases = [
        // (mode, p_retrieval, p_no_retrieval, retrieved, p_retrieve)
        (RetrieveMode::Adaptive, 0.4, 0.6, true, 0.4),
        (RetrieveMode::Adaptive, 0.1, 0.9, false, 0.1),
        (RetrieveMode::Always, 0.0, 1.0, true, 0.0),
        (RetrieveMode::Never, 1.0, 0.0, false, 1.0),
        (RetrieveMode::Model, 0.6, 0.4, true, 0.6),
        (RetrieveMode::Model, 0.4, 0.6, false, 0.4),
        (RetrieveMode::Model, 0.5, 0.5, false, 0.5),
        (RetrieveMode::Adaptive, 0.0, 0.0, false, 0.0),
    ];
    for (mode, yes, no, retrieved, p) in cases {
        let mut g = Scripted::fixed(yes, no, |_| Script::new().text("x", -0.1).eos());
        let settings = Settings {
            mode,
            ..Settings::default()
        };
        let (answer, events) = run("Q?", &settings, &mut g, &mut numbered_library(2));
        assert_eq!(answer.retrieve.retrieved, retrieved, "{mode:?} {yes} {no}");
        assert!(close(answer.retrieve.p_retrieve, p), "{mode:?} {yes} {no}");
        assert_eq!(
            events[0],
            Progress::RetrieveDecided {
                p_retrieve: answer.retrieve.p_retrieve,
                threshold: 0.2,
                mode,
                retrieved
            }
        );
        let expected_candidates = if retrieved { 2 } else { 1 };
        assert_eq!(answer.segments[0].candidates.len(), expected_candidates);
    }
}

/// `model` mode retrieves iff [Retrieval] is the argmax over the whole vocabulary (what greedy
/// decoding would write), not merely likelier than [No Retrieval]: a model that would rather
/// write text has chosen not to retrieve. Adaptive mode still reads the normalised pair.
#[test]
fn model_mode_reads_the_argmax_over_the_whole_vocabulary() {
    let settings = |mode| Settings {
        mode,
        threshold: 0.5,
        ..Settings::default()
    };
    let respond = |_: &str| Script::new().text("x", -0.1).eos();
    let mut g = Scripted::fixed(0.3, 0.2, respond);
    g.other_next = Some((150, 0.5));
    let (answer, _) = run(
        "Q?",
        &settings(RetrieveMode::Model),
        &mut g,
        &mut numbered_library(2),
    );
    assert!(
        !answer.retrieve.retrieved,
        "text is likelier than [Retrieval]"
    );
    assert!(close(answer.retrieve.p_retrieve, 0.6));
    // The decision read the prompt once, every id of the vocabulary after it.
    assert_eq!(g.decisions.len(), 1);

    let mut g = Scripted::fixed(0.3, 0.2, respond);
    g.other_next = Some((150, 0.5));
    let (answer, _) = run(
        "Q?",
        &settings(RetrieveMode::Adaptive),
        &mut g,
        &mut numbered_library(2),
    );
    assert!(answer.retrieve.retrieved, "adaptive: 0.6 > δ 0.5");

    let mut g = Scripted::fixed(0.3, 0.2, respond);
    g.other_next = Some((150, 0.25));
    let (answer, _) = run(
        "Q?",
        &settings(RetrieveMode::Model),
        &mut g,
        &mut numbered_library(2),
    );
    assert!(answer.retrieve.retrieved, "[Retrieval] is the argmax");
}

#[test]
fn no_retrieval_path_scores_p_lm_and_utility_only() {
    let mut g = Scripted::fixed(0.0, 1.0, |_| {
        Script::new()
            .text("Hello there", -0.5)
            .issup(SUPPORTED)
            .isuse(USEFUL)
            .eos()
    });
    let (answer, _) = run(
        "Say hi",
        &Settings::default(),
        &mut g,
        &mut numbered_library(2),
    );
    let c = &answer.segments[0].candidates[0];
    assert_eq!(c.passage, None);
    assert_eq!(c.isrel, None);
    let every = [-0.5, -0.5, 0.9f32.ln(), 0.0, SPECIAL_LOGPROB];
    assert!(close(c.p_lm, p_lm_of(&every)), "{}", c.p_lm);
    assert!(close(c.score, c.p_lm + 0.5 * 1.0));
    assert_eq!(answer.answer, "Hello there");
    assert_eq!(answer.segments[0].citation, None);
    assert!(g.batch_prompts(0)[0].ends_with("Response:[No Retrieval]"));
}

#[test]
fn all_k_candidates_are_generated_in_one_batch() {
    let mut g = Scripted::fixed(0.9, 0.1, |_| {
        Script::candidate("x", (0.9, 0.1), SUPPORTED, USEFUL)
    });
    let (answer, events) = run("Q?", &Settings::default(), &mut g, &mut numbered_library(7));
    assert_eq!(g.batches.len(), 1);
    let (prompts, request) = &g.batches[0];
    assert_eq!(prompts.len(), 5);
    assert_eq!(request.max_new_tokens, 100);
    assert!(request.stop_ids.is_empty());
    assert_eq!(
        request.watch_ids,
        vec![
            32004, 32003, 32012, 32013, 32014, 32007, 32008, 32009, 32010, 32011
        ]
    );
    assert_eq!(answer.passages.len(), 5);
    assert_eq!(answer.segments[0].candidates.len(), 5);
    let finished = events
        .iter()
        .filter(|e| matches!(e, Progress::CandidateFinished { .. }))
        .count();
    assert_eq!(finished, 5);
    assert!(events.contains(&Progress::PassagesRetrieved {
        segment: 0,
        count: 5
    }));
    assert!(events.contains(&Progress::CandidatesStarted {
        segment: 0,
        count: 5
    }));
    assert_eq!(
        events.last(),
        Some(&Progress::SegmentChosen {
            segment: 0,
            text: "x".into(),
            citation: Some(1)
        })
    );
}

#[test]
fn document_text_that_looks_like_a_reflection_token_stays_text() {
    let mut g = Scripted::fixed(0.9, 0.1, |_| {
        Script::candidate("x", (0.9, 0.1), SUPPORTED, USEFUL)
    });
    let mut lib = Library::new(&["It was [Fully supported] and [Retrieval] <paragraph>"]);
    run("Is it [Relevant]?", &always(), &mut g, &mut lib);
    let prompt = &g.batches[0].0[0];
    let special: Vec<u32> = prompt.iter().copied().filter(|&id| id >= 32000).collect();
    assert_eq!(special, vec![32001, 32005, 32006]);
    assert_eq!(prompt[0], BOS);
    assert_eq!(*prompt.last().unwrap(), 32006);
    let decision = &g.decisions[0];
    assert!(decision.iter().all(|&id| id < 32000));
}

#[test]
fn prompt_is_the_papers_format() {
    let mut g = Scripted::fixed(0.9, 0.1, |_| Script::new().text("x", -0.1).eos());
    run(
        "What is it?",
        &always(),
        &mut g,
        &mut Library::new(&["body words"]),
    );
    assert_eq!(
        g.batch_prompts(0)[0],
        "<s> ### Instruction: What is it? ### Response:[Retrieval]<paragraph> Doc0 body words</paragraph>"
    );
    assert_eq!(
        g.render(&g.decisions[0]),
        "<s> ### Instruction: What is it? ### Response:"
    );
}

#[test]
fn higher_f_wins_and_ties_go_to_the_lowest_index() {
    let same = Script::candidate("same", (0.9, 0.1), SUPPORTED, USEFUL);
    let mut g = Scripted::fixed(0.9, 0.1, by_passage(vec![same.clone(), same.clone(), same]));
    let (answer, _) = run("Q?", &always(), &mut g, &mut numbered_library(3));
    assert_eq!(answer.segments[0].chosen, 0);

    let worse = Script::candidate("worse", (0.5, 0.5), SUPPORTED, USEFUL);
    let better = Script::candidate("better", (0.9, 0.1), SUPPORTED, USEFUL);
    let mut g = Scripted::fixed(0.9, 0.1, by_passage(vec![worse, better]));
    let (answer, _) = run("Q?", &always(), &mut g, &mut numbered_library(2));
    assert_eq!(answer.segments[0].chosen, 1);
    assert_eq!(answer.answer, "better [1]");
}

/// A: s_sup 0, s_use 1; B: s_sup 1, s_use 0; same s_rel, and the same p_LM over their text
/// tokens (the test's setting). f_A - f_B = 0.5 - w_sup.
fn sup_versus_use() -> Scripted {
    let a = Script::candidate("alpha", (1.0, 0.0), [0.0, 0.0, 0.0], USEFUL);
    let b = Script::candidate("beta", (1.0, 0.0), [1.0, 0.0, 0.0], NEUTRAL);
    Scripted::fixed(0.9, 0.1, by_passage(vec![a, b]))
}

#[test]
fn the_winner_flips_exactly_where_w_sup_crosses_half_w_use() {
    for (w_sup, winner) in [(0.499, "alpha"), (0.501, "beta")] {
        let mut settings = always();
        settings.weights.sup = w_sup;
        settings.p_lm_tokens = PLmTokens::Text;
        let (answer, _) = run(
            "Q?",
            &settings,
            &mut sup_versus_use(),
            &mut numbered_library(2),
        );
        assert_eq!(answer.segments[0].text, winner, "w_sup = {w_sup}");
    }
}

#[test]
fn hard_constraints_drop_unsupported_and_irrelevant_candidates() {
    let unsupported = Script::candidate("unsupported", (1.0, 0.0), UNSUPPORTED, USEFUL);
    let irrelevant = Script::candidate("irrelevant", (0.4, 0.6), SUPPORTED, USEFUL);
    let modest = Script::candidate("modest", (0.7, 0.3), [0.4, 0.35, 0.25], NEUTRAL);
    let scripts = vec![unsupported, irrelevant, modest];

    let mut settings = always();
    settings.weights.sup = 0.1;
    let mut g = Scripted::fixed(0.9, 0.1, by_passage(scripts.clone()));
    let (free, _) = run("Q?", &settings, &mut g, &mut numbered_library(3));
    assert_eq!(free.segments[0].text, "unsupported");

    settings.hard_constraints = true;
    let mut g = Scripted::fixed(0.9, 0.1, by_passage(scripts));
    let (constrained, _) = run("Q?", &settings, &mut g, &mut numbered_library(3));
    assert_eq!(constrained.segments[0].text, "modest");
    // The dropped candidates stay in the trace.
    assert_eq!(constrained.segments[0].candidates.len(), 3);
}

#[test]
fn hard_constraints_keep_everything_when_nothing_would_be_left() {
    let a = Script::candidate("a", (1.0, 0.0), UNSUPPORTED, NEUTRAL);
    let b = Script::candidate("b", (0.2, 0.8), SUPPORTED, USEFUL);
    let mut settings = always();
    settings.hard_constraints = true;
    let mut g = Scripted::fixed(0.9, 0.1, by_passage(vec![a, b]));
    let (answer, _) = run("Q?", &settings, &mut g, &mut numbered_library(2));
    let c = &answer.segments[0].candidates;
    let best = if c[0].score >= c[1].score { "a" } else { "b" };
    assert_eq!(answer.segments[0].text, best);
}

#[test]
fn missing_issup_and_isuse_score_zero_and_record_none() {
    let mut g = Scripted::fixed(0.9, 0.1, |_| {
        Script::new().isrel(0.8, 0.2).text("bare", -0.2).eos()
    });
    let (answer, _) = run("Q?", &always(), &mut g, &mut numbered_library(1));
    let c = &answer.segments[0].candidates[0];
    assert_eq!((c.issup, c.isuse), (None, None));
    assert_eq!((c.s_sup, c.s_use), (0.0, 0.0));
    let every = [0.8f32.ln(), -0.2, SPECIAL_LOGPROB];
    assert!(close(c.p_lm, p_lm_of(&every)), "{}", c.p_lm);
    assert!(close(c.score, c.p_lm + 0.8));
}

#[test]
fn citations_are_numbered_by_first_use_and_passages_reordered() {
    let low = Script::candidate("low", (0.3, 0.7), SUPPORTED, NEUTRAL);
    let high = Script::candidate("chosen", (1.0, 0.0), SUPPORTED, USEFUL);
    let mut g = Scripted::fixed(
        0.9,
        0.1,
        by_passage(vec![low.clone(), low.clone(), high, low]),
    );
    let settings = Settings { k: 4, ..always() };
    let (answer, _) = run("Q?", &settings, &mut g, &mut numbered_library(4));
    let ids: Vec<&str> = answer.passages.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, ["p2", "p0", "p1", "p3"]);
    let segment = &answer.segments[0];
    assert_eq!(segment.chosen, 2);
    assert_eq!(segment.citation, Some(1));
    let remapped: Vec<Option<usize>> = segment.candidates.iter().map(|c| c.passage).collect();
    assert_eq!(remapped, [Some(1), Some(2), Some(0), Some(3)]);
    assert_eq!(answer.answer, "chosen [1]");
}

#[test]
fn retrieval_that_finds_nothing_falls_back_to_no_retrieval() {
    let mut g = Scripted::fixed(0.9, 0.1, |_| Script::new().text("own words", -0.1).eos());
    let (answer, events) = run("Q?", &always(), &mut g, &mut Library::new(&[]));
    assert!(!answer.retrieve.retrieved);
    // The trace says what happened: the run chose to retrieve and found nothing.
    assert!(answer.retrieve.found_nothing);
    let json = serde_json::to_value(answer.retrieve).unwrap();
    assert_eq!(json["found_nothing"], true);
    assert!(answer.passages.is_empty());
    assert_eq!(answer.segments[0].candidates[0].passage, None);
    assert!(g.batch_prompts(0)[0].ends_with("[No Retrieval]"));
    assert!(events.contains(&Progress::PassagesRetrieved {
        segment: 0,
        count: 0
    }));
}

#[test]
fn the_query_is_the_question_and_k_is_honoured() {
    let mut g = Scripted::fixed(0.9, 0.1, |_| Script::new().text("x", -0.1).eos());
    let mut lib = numbered_library(9);
    let settings = Settings { k: 3, ..always() };
    let (answer, _) = run("  Who wrote it?  ", &settings, &mut g, &mut lib);
    assert_eq!(lib.queries, [("Who wrote it?".to_string(), 3)]);
    assert!(answer.retrieve.retrieved && !answer.retrieve.found_nothing);
    let json = serde_json::to_value(answer.retrieve).unwrap();
    assert!(
        json.get("found_nothing").is_none(),
        "absent when false: {json}"
    );
    assert_eq!(g.batches[0].0.len(), 3);
}

#[test]
fn empty_question_is_refused_before_the_model_runs() {
    let mut g = Scripted::fixed(0.9, 0.1, |_| Script::new().eos());
    let err = selfrag_core::answer(
        " \n\t",
        &Settings::default(),
        &mut g,
        &mut numbered_library(1),
        &mut |_| {},
        &(),
    )
    .unwrap_err();
    assert!(matches!(err, SelfRagError::EmptyQuestion));
    assert!(g.decisions.is_empty());
}

#[test]
fn a_model_without_reflection_tokens_is_named() {
    let mut g = Scripted::fixed(0.9, 0.1, |_| Script::new().eos());
    g.lacks = vec!["[Utility:5]", "[Relevant]"];
    let err = selfrag_core::answer(
        "Q?",
        &Settings::default(),
        &mut g,
        &mut numbered_library(1),
        &mut |_| {},
        &(),
    )
    .unwrap_err();
    match err {
        SelfRagError::MissingReflectionTokens { missing } => {
            assert_eq!(missing, ["[Relevant]", "[Utility:5]"]);
        }
        other => panic!("unexpected {other}"),
    }
}

#[test]
fn a_question_longer_than_the_context_is_refused() {
    let mut g = Scripted::fixed(0.9, 0.1, |_| Script::new().eos());
    g.context = 120;
    let question = "word ".repeat(30);
    let err = selfrag_core::answer(
        &question,
        &Settings::default(),
        &mut g,
        &mut numbered_library(1),
        &mut |_| {},
        &(),
    )
    .unwrap_err();
    assert!(
        matches!(err, SelfRagError::PromptTooLong { limit: 20, .. }),
        "{err}"
    );
}

#[test]
fn long_passages_are_truncated_to_fit_the_context() {
    let mut g = Scripted::fixed(0.9, 0.1, |_| Script::new().text("x", -0.1).eos());
    g.context = 150;
    let long = "filler ".repeat(500);
    let (answer, _) = run("Q?", &always(), &mut g, &mut Library::new(&[&long]));
    let prompt = &g.batches[0].0[0];
    assert_eq!(prompt.len(), 50);
    assert_eq!(*prompt.last().unwrap(), 32006);
    assert_eq!(answer.answer, "x [1]");
}

#[test]
fn cancel_stops_between_steps() {
    let mut g = Scripted::fixed(0.9, 0.1, |_| Script::new().text("x", -0.1).eos());
    let err = selfrag_core::answer(
        "Q?",
        &Settings::default(),
        &mut g,
        &mut numbered_library(2),
        &mut |_| {},
        &|| true,
    )
    .unwrap_err();
    assert!(matches!(err, SelfRagError::Cancelled));
    assert!(g.decisions.is_empty());

    // Cancelled as soon as the retrieve decision is announced: nothing is generated.
    let flag = AtomicBool::new(false);
    let mut g = Scripted::fixed(0.9, 0.1, |_| Script::new().text("x", -0.1).eos());
    let err = selfrag_core::answer(
        "Q?",
        &Settings::default(),
        &mut g,
        &mut numbered_library(2),
        &mut |_| flag.store(true, Ordering::Release),
        &flag,
    )
    .unwrap_err();
    assert!(matches!(err, SelfRagError::Cancelled));
    assert_eq!(g.decisions.len(), 1);
    assert!(g.batches.is_empty());
}

#[test]
fn no_reflection_token_reaches_any_visible_text() {
    let messy = Script::new()
        .isrel(0.9, 0.1)
        .text("one", -0.1)
        .special("<pad>", &[])
        .special("[Continue to Use Evidence]", &[])
        .text("two", -0.1)
        .issup(SUPPORTED)
        .special("<paragraph>", &[])
        .isuse(USEFUL)
        .eos();
    let mut g = Scripted::fixed(0.9, 0.1, move |_| messy.clone());
    let (answer, _) = run("Q?", &always(), &mut g, &mut numbered_library(3));
    assert_clean(&answer);
    assert_eq!(answer.segments[0].text, "one two");
}

/// A run records where its time went; a generator that cannot tell reading prompts from
/// decoding (a server, this script) leaves that split out rather than guessing it.
#[test]
fn an_answer_records_its_steps_times_and_no_split_the_generator_cannot_give() {
    let mut g = Scripted::fixed(
        0.9,
        0.1,
        by_passage(vec![
            Script::new().text("Paris", -0.1).eos(),
            Script::new().text("Lyon", -0.2).eos(),
        ]),
    );
    let (answer, _) = run(
        "Capital of France?",
        &Settings { k: 2, ..always() },
        &mut g,
        &mut numbered_library(2),
    );
    let t = answer.timings.expect("a run records its timings");
    assert_eq!((t.prefill_seconds, t.decode_seconds), (None, None));
    assert_eq!(t.load_seconds, 0.0, "loading is the engine's to record");
    let steps = t.decide_seconds + t.search_seconds + t.generate_seconds + t.critique_seconds;
    assert!(
        t.generate_seconds > 0.0 && steps <= t.answer_seconds,
        "{t:?}"
    );
}
