//! Long form: segment-level beam search, per-beam prompts, [Continue to Use Evidence].

use std::sync::atomic::{AtomicBool, Ordering};

use selfrag_core::{
    CritiqueWeights, Progress, RetrieveMode, SelfRagError, Settings, Tokenizer, rerank,
};

use crate::util::*;

const SUP: [f32; 3] = [0.9, 0.05, 0.05];
const U1: [f32; 5] = [1.0, 0.0, 0.0, 0.0, 0.0];
const U5: [f32; 5] = [0.0, 0.0, 0.0, 0.0, 1.0];

/// `[IsRel]text[IsSup]` then `end` (a Retrieve token or `</s>`).
fn seg(text: &str, rel: (f32, f32), end: &str) -> Script {
    Script::new()
        .isrel(rel.0, rel.1)
        .text(text, -0.1)
        .issup(SUP)
        .special(end, &[])
}

fn long(k: usize, beams: usize) -> Settings {
    Settings {
        mode: RetrieveMode::Always,
        long_form: true,
        k,
        beam_width: beams,
        ..Settings::default()
    }
}

fn reads(prompt: &str, source: &str) -> bool {
    prompt.ends_with(&format!(" {source}</paragraph>"))
}

#[test]
fn segments_are_chosen_and_cited_by_first_use() {
    let mut g = Scripted::fixed(0.9, 0.1, |prompt| {
        match (prompt.contains("Alpha"), reads(prompt, "source0")) {
            (false, true) => seg("Weak start", (0.5, 0.5), "[Retrieval]"),
            (false, false) => seg("Alpha one", (1.0, 0.0), "[Retrieval]"),
            (true, true) => seg("Beta two", (1.0, 0.0), EOS_TOKEN),
            (true, false) => seg("Weak end", (0.5, 0.5), EOS_TOKEN),
        }
    });
    let mut lib = Library::new(&["source0", "source1"]);
    let (answer, events) = run("Q?", &long(2, 1), &mut g, &mut lib);
    assert_eq!(answer.answer, "Alpha one [1] Beta two [2]");
    let ids: Vec<&str> = answer.passages.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, ["p1", "p0"]);
    assert_eq!(answer.segments.len(), 2);
    assert_eq!(answer.segments[0].citation, Some(1));
    assert_eq!(answer.segments[1].citation, Some(2));
    // Candidate passage indices follow the reordered passages.
    assert_eq!(answer.segments[0].candidates[0].passage, Some(1));
    assert_eq!(answer.segments[0].candidates[1].passage, Some(0));
    assert!(answer.retrieve.retrieved);
    assert!(answer.segments.iter().all(|s| s.retrieve.is_some()));

    // The retrieval query of segment 2 is the question plus the previous segment.
    assert_eq!(
        lib.queries,
        [("Q?".to_string(), 2), ("Q? Alpha one".to_string(), 2)]
    );
    // Segment 2 continues the path as the model read and wrote it, passage included, as in
    // training; the model's closing [Retrieval] is replaced by the boundary's own decision.
    assert_eq!(
        g.batch_prompts(1)[0],
        "<s> ### Instruction: Q? ### Response:[Retrieval]<paragraph> Doc1 source1</paragraph>\
         [Relevant] Alpha one[Fully supported][Retrieval]<paragraph> Doc0 source0</paragraph>"
    );
    assert_eq!(
        g.render(&g.decisions[1]),
        "<s> ### Instruction: Q? ### Response:[Retrieval]<paragraph> Doc1 source1</paragraph>\
         [Relevant] Alpha one[Fully supported]"
    );
    let request = &g.batches[0].1;
    assert_eq!(request.stop_ids, [32000, 32001, 32002]);
    assert_eq!(request.max_new_tokens, 200);
    assert_eq!(g.batches.len(), 2);
    assert!(events.contains(&Progress::SegmentChosen {
        segment: 1,
        text: "Beta two".into(),
        citation: Some(2)
    }));
    assert_clean(&answer);
}

/// The reference's beam search let sibling candidates leak each other's text into their
/// prompts. Each beam's prompts and decision points hold only its own path.
#[test]
fn reference_sibling_prompts_leaked_each_others_text() {
    let mut g = Scripted::fixed(0.9, 0.1, |prompt| {
        if prompt.contains("one") {
            seg("End", (1.0, 0.0), EOS_TOKEN)
        } else if reads(prompt, "source0") {
            seg("Alpha one", (1.0, 0.0), "[Retrieval]")
        } else {
            seg("Beta one", (0.9, 0.1), "[Retrieval]")
        }
    });
    let (answer, _) = run(
        "Q?",
        &long(2, 2),
        &mut g,
        &mut Library::new(&["source0", "source1"]),
    );
    assert_eq!(
        g.batches.len(),
        3,
        "one batch for the root, one per surviving beam"
    );
    for (call, own, other) in [(1, "Alpha", "Beta"), (2, "Beta", "Alpha")] {
        for prompt in g.batch_prompts(call) {
            assert!(prompt.contains(own), "{prompt}");
            assert!(!prompt.contains(other), "{prompt}");
        }
        let decision = g.render(&g.decisions[call]);
        assert!(
            decision.contains(own) && !decision.contains(other),
            "{decision}"
        );
    }
    assert_eq!(answer.answer, "Alpha one [1] End [1]");
    assert_clean(&answer);
}

/// The reference left `[Continue to Use Evidence]` in the final answer. It also keeps the
/// current passage for the next segment: no new decision, no new search, one candidate, and
/// (as in training) the next text follows the token directly, the passage already in context,
/// with the passage's IsRel judgement carried over rather than asked again.
#[test]
fn reference_left_continue_to_use_evidence_in_the_answer() {
    let mut g = Scripted::fixed(0.9, 0.1, |prompt| {
        if prompt.contains("Alpha") {
            seg("Alpha two", (1.0, 0.0), EOS_TOKEN)
        } else if reads(prompt, "source0") {
            seg("Alpha one", (1.0, 0.0), "[Continue to Use Evidence]")
        } else {
            seg("Weak", (0.2, 0.8), "[Retrieval]")
        }
    });
    let mut lib = Library::new(&["source0", "source1"]);
    let (answer, _) = run("Q?", &long(2, 1), &mut g, &mut lib);
    assert_eq!(answer.answer, "Alpha one [1] Alpha two [1]");
    assert_eq!(g.decisions.len(), 1);
    assert_eq!(lib.queries.len(), 1);
    assert_eq!(g.batches[1].0.len(), 1);
    assert_eq!(
        g.batch_prompts(1)[0],
        "<s> ### Instruction: Q? ### Response:[Retrieval]<paragraph> Doc0 source0</paragraph>\
         [Relevant] Alpha one[Fully supported][Continue to Use Evidence]"
    );
    assert_eq!(answer.segments[1].retrieve, None);
    let continued = &answer.segments[1].candidates[0];
    assert!(continued.continued);
    assert_eq!(continued.isrel, answer.segments[0].candidates[0].isrel);
    assert_eq!(continued.passage, answer.segments[0].candidates[0].passage);
    assert!(
        answer.segments[0].candidates[0]
            .raw
            .contains("[Continue to Use Evidence]")
    );
    assert_clean(&answer);
}

/// The reference's long-form scorer looped over the wrong dictionary, so utility was 0.
#[test]
fn reference_long_form_ignored_utility() {
    let mut g = Scripted::fixed(0.9, 0.1, |prompt| {
        let usefulness = if reads(prompt, "source0") { U1 } else { U5 };
        let text = if reads(prompt, "source0") {
            "useless"
        } else {
            "useful"
        };
        Script::new()
            .isrel(1.0, 0.0)
            .text(text, -0.1)
            .issup(SUP)
            .isuse(usefulness)
            .eos()
    });
    let (answer, _) = run(
        "Q?",
        &long(2, 1),
        &mut g,
        &mut Library::new(&["source0", "source1"]),
    );
    let candidates = &answer.segments[0].candidates;
    assert_eq!(candidates[0].s_use, -1.0);
    assert_eq!(candidates[1].s_use, 1.0);
    assert!(close(candidates[1].score - candidates[0].score, 0.5 * 2.0));
    assert_eq!(answer.answer, "useful [1]");
}

/// The reference never passed `use_seqscore` down to long form: p_LM must follow `use_p_lm`.
#[test]
fn reference_long_form_ignored_use_seqscore() {
    let respond = |prompt: &str| {
        let (text, logprob, rel) = if reads(prompt, "source0") {
            ("fluent", -0.01, (0.7, 0.3))
        } else {
            ("halting", -3.0, (1.0, 0.0))
        };
        Script::new()
            .isrel(rel.0, rel.1)
            .text(text, logprob)
            .issup(SUP)
            .eos()
    };
    let lib = || Library::new(&["source0", "source1"]);
    let (with, _) = run(
        "Q?",
        &long(2, 1),
        &mut Scripted::fixed(0.9, 0.1, respond),
        &mut lib(),
    );
    assert_eq!(with.segments[0].text, "fluent");
    let settings = Settings {
        use_p_lm: false,
        ..long(2, 1)
    };
    let (without, _) = run(
        "Q?",
        &settings,
        &mut Scripted::fixed(0.9, 0.1, respond),
        &mut lib(),
    );
    assert_eq!(without.segments[0].text, "halting");
    let c = &without.segments[0].candidates[1];
    assert!(close(c.score, c.s_rel + c.s_sup));
}

/// Path b starts 0.2 worse than path a but its second segment is 0.9 better: by mean score
/// the beam keeps b, though a was the better first segment on its own.
fn mean_beats_greedy() -> (selfrag_core::Answer, Scripted) {
    let mut g = Scripted::fixed(0.9, 0.1, |prompt| {
        if prompt.contains("Quick") {
            seg("Stalls", (0.1, 0.9), EOS_TOKEN)
        } else if prompt.contains("Slow") {
            seg("Finishes well", (1.0, 0.0), EOS_TOKEN)
        } else if reads(prompt, "source0") {
            seg("Quick start", (1.0, 0.0), "[Retrieval]")
        } else {
            seg("Slow start", (0.8, 0.2), "[Retrieval]")
        }
    });
    let (answer, _) = run(
        "Q?",
        &long(2, 2),
        &mut g,
        &mut Library::new(&["source0", "source1"]),
    );
    (answer, g)
}

#[test]
fn beams_are_ranked_by_mean_segment_score() {
    let (answer, _) = mean_beats_greedy();
    // The tied second-segment candidates go to the first passage, so two citations.
    assert_eq!(answer.answer, "Slow start [1] Finishes well [2]");
    let first = &answer.segments[0];
    assert_eq!(first.chosen, 1);
    assert!(first.candidates[0].score > first.candidates[1].score);
}

/// Issue 18's spliced answer: the first segment's own best (Quick, once relevance weighs a
/// little more) was written on by a path that scores worse as a whole. The old re-rank showed
/// "Quick start … Finishes well", which no run writes; the replay keeps the path the beam
/// search keeps, and the weights set back give the trace byte for byte.
#[test]
fn long_form_rerank_replays_the_beam_search_instead_of_splicing() {
    let (answer, g) = mean_beats_greedy();
    let calls = g.batches.len();
    // Both first-step paths were expanded: the tree holds 3 expansions.
    assert_eq!(answer.expansions.len(), 3);
    let same = rerank(&answer, answer.settings.weights, false);
    assert_eq!(same.answer, answer);
    assert_eq!(same.unexplored_segment, None);

    let weights = CritiqueWeights {
        rel: 1.01,
        ..CritiqueWeights::default()
    };
    let changed = rerank(&answer, weights, false);
    let first = &changed.answer.segments[0];
    assert!(first.candidates[0].score > first.candidates[1].score);
    assert_eq!(
        first.chosen, 1,
        "the path through the first segment's runner-up"
    );
    assert_eq!(changed.answer.answer, "Slow start [1] Finishes well [2]");
    assert_eq!(
        changed.unexplored_segment, None,
        "every branch it needed was expanded"
    );
    assert_eq!(g.batches.len(), calls);
    assert_clean(&changed.answer);

    let back = rerank(&changed.answer, answer.settings.weights, false);
    assert_eq!(
        serde_json::to_string(&back.answer).unwrap(),
        serde_json::to_string(&answer).unwrap()
    );
}

/// With one beam only the best first segment was continued: weights that prefer the other
/// show the best path within the tree (it ends after its first segment) and say that a re-run
/// would write segment 2 on it.
#[test]
fn a_replay_that_needs_an_unexpanded_branch_says_which_segment() {
    let mut g = Scripted::fixed(0.9, 0.1, |prompt| {
        if prompt.contains("Plain") {
            seg("Then more", (1.0, 0.0), EOS_TOKEN)
        } else if reads(prompt, "source0") {
            Script::new()
                .isrel(1.0, 0.0)
                .text("Plain start", -0.1)
                .issup(SUP)
                .isuse([0.0, 0.0, 1.0, 0.0, 0.0])
                .special("[Retrieval]", &[])
        } else {
            Script::new()
                .isrel(0.2, 0.8)
                .text("Useful start", -0.1)
                .issup(SUP)
                .isuse(U5)
                .special("[Retrieval]", &[])
        }
    });
    let (answer, _) = run(
        "Q?",
        &long(2, 1),
        &mut g,
        &mut Library::new(&["source0", "source1"]),
    );
    assert_eq!(answer.answer, "Plain start [1] Then more [1]");
    let weights = CritiqueWeights {
        use_: 1.0,
        ..CritiqueWeights::default()
    };
    let changed = rerank(&answer, weights, false);
    assert_eq!(changed.answer.answer, "Useful start [1]");
    assert_eq!(changed.unexplored_segment, Some(1));
    assert_clean(&changed.answer);
}

#[test]
fn stops_after_max_segments() {
    let mut g = Scripted::fixed(0.9, 0.1, |_| seg("more", (1.0, 0.0), "[Retrieval]"));
    let settings = Settings {
        max_segments: 3,
        ..long(1, 1)
    };
    let (answer, _) = run("Q?", &settings, &mut g, &mut Library::new(&["source0"]));
    assert_eq!(answer.segments.len(), 3);
    assert_eq!(g.batches.len(), 3);
    assert_eq!(answer.answer, "more [1] more [1] more [1]");
}

#[test]
fn a_segment_ends_at_the_token_limit_and_the_next_one_continues() {
    let mut g = Scripted::fixed(0.9, 0.1, |_| {
        Script::new()
            .isrel(1.0, 0.0)
            .text("a b c d e", -0.1)
            .issup(SUP)
            .eos()
    });
    let settings = Settings {
        max_segments: 2,
        max_segment_tokens: 3,
        ..long(1, 1)
    };
    let (answer, _) = run("Q?", &settings, &mut g, &mut Library::new(&["source0"]));
    assert_eq!(g.batches[0].1.max_new_tokens, 3);
    assert_eq!(answer.segments.len(), 2);
    assert_eq!(answer.segments[0].text, "a b");
    assert!(g.batch_prompts(1)[0].contains("[Relevant] a b[Retrieval]"));
}

#[test]
fn without_retrieval_every_segment_says_no_retrieval() {
    let mut g = Scripted::fixed(0.0, 1.0, |prompt| {
        if prompt.contains("first") {
            Script::new().text("second part", -0.1).isuse(U5).eos()
        } else {
            Script::new()
                .text("first part", -0.1)
                .special("[No Retrieval]", &[])
        }
    });
    let settings = Settings {
        mode: RetrieveMode::Adaptive,
        ..long(2, 2)
    };
    let mut lib = Library::new(&["source0"]);
    let (answer, _) = run("Q?", &settings, &mut g, &mut lib);
    assert_eq!(answer.answer, "first part second part");
    assert!(answer.passages.is_empty());
    assert!(lib.queries.is_empty());
    for call in 0..2 {
        assert!(g.batch_prompts(call)[0].ends_with("[No Retrieval]"));
    }
    assert!(!answer.retrieve.retrieved);
}

#[test]
fn cancel_stops_the_beam_search_between_segments() {
    let flag = AtomicBool::new(false);
    let mut g = Scripted::fixed(0.9, 0.1, |_| seg("more", (1.0, 0.0), "[Retrieval]"));
    let err = selfrag_core::answer(
        "Q?",
        &long(2, 2),
        &mut g,
        &mut Library::new(&["source0", "source1"]),
        &mut |event| {
            if matches!(event, Progress::CandidateFinished { .. }) {
                flag.store(true, Ordering::Release);
            }
        },
        &flag,
    )
    .unwrap_err();
    assert!(matches!(err, SelfRagError::Cancelled));
    assert_eq!(g.batches.len(), 1);
}

/// A generator that stops answering after the first segment: the answer keeps that segment,
/// complete and scored, and says why it stops; at the first segment there is nothing to keep;
/// once cancelled, a failure is the cancellation.
#[test]
fn a_generator_failing_after_the_first_segment_cuts_the_answer_short_and_keeps_it() {
    let script = |prompt: &str| {
        if prompt.contains("Alpha") {
            seg("Beta two", (1.0, 0.0), EOS_TOKEN)
        } else {
            seg("Alpha one", (1.0, 0.0), "[Retrieval]")
        }
    };
    let mut g = Scripted::fixed(0.9, 0.1, script);
    g.fail_batch = Some(1);
    let mut lib = Library::new(&["source0"]);
    let (answer, events) = run("Q?", &long(1, 1), &mut g, &mut lib);
    assert_eq!(answer.answer, "Alpha one [1]");
    assert_eq!(answer.segments.len(), 1);
    let why = answer.cut_short.as_deref().unwrap();
    assert!(
        why.contains("http://gpu-box:8080 closed the connection"),
        "{why}"
    );
    assert!(events.contains(&Progress::SegmentChosen {
        segment: 0,
        text: "Alpha one".into(),
        citation: Some(1),
    }));
    let json = serde_json::to_value(&answer).unwrap();
    assert_eq!(json["cut_short"].as_str(), Some(why));

    let mut finished = Scripted::fixed(0.9, 0.1, script);
    let (whole, _) = run(
        "Q?",
        &long(1, 1),
        &mut finished,
        &mut Library::new(&["source0"]),
    );
    assert_eq!(whole.cut_short, None);
    assert_eq!(whole.segments.len(), 2);
    assert!(
        serde_json::to_value(&whole)
            .unwrap()
            .get("cut_short")
            .is_none()
    );

    let mut first = Scripted::fixed(0.9, 0.1, script);
    first.fail_batch = Some(0);
    let err = selfrag_core::answer(
        "Q?",
        &long(1, 1),
        &mut first,
        &mut Library::new(&["source0"]),
        &mut |_| {},
        &(),
    )
    .unwrap_err();
    assert!(matches!(err, SelfRagError::Generator { .. }), "{err}");

    let cancelled = AtomicBool::new(false);
    let mut stopping = Scripted::fixed(0.9, 0.1, script);
    stopping.fail_batch = Some(1);
    let err = selfrag_core::answer(
        "Q?",
        &long(1, 1),
        &mut stopping,
        &mut Library::new(&["source0"]),
        &mut |p| {
            if matches!(p, Progress::CandidatesStarted { segment: 1, .. }) {
                cancelled.store(true, Ordering::Relaxed);
            }
        },
        &cancelled,
    )
    .unwrap_err();
    assert!(matches!(err, SelfRagError::Cancelled), "{err}");
}

/// The ids of segment 3's prompt after a retrieved segment, a continued one and a boundary
/// that chose not to retrieve: the training data's form exactly, each segment opened by its
/// own Retrieve-group token, its passage in place, every reflection token kept.
#[test]
fn segment_three_reads_the_path_exactly_as_the_model_wrote_it() {
    let mut g = Scripted::new(
        |prompt| {
            if prompt.contains("two") {
                (0.1, 0.9)
            } else {
                (0.9, 0.1)
            }
        },
        |prompt| {
            if prompt.contains("two") {
                seg("Gamma three", (1.0, 0.0), EOS_TOKEN)
            } else if prompt.contains("one") {
                Script::new()
                    .text("Alpha two", -0.1)
                    .issup([0.1, 0.8, 0.1])
                    .special("[Retrieval]", &[])
            } else {
                seg("Alpha one", (1.0, 0.0), "[Continue to Use Evidence]")
            }
        },
    );
    let settings = Settings {
        mode: RetrieveMode::Adaptive,
        ..long(1, 1)
    };
    let (answer, _) = run("Q?", &settings, &mut g, &mut Library::new(&["source0"]));
    assert_eq!(answer.answer, "Alpha one [1] Alpha two [1] Gamma three");
    assert_eq!(g.batches.len(), 3);
    let words = |text: &str| g.tokenize(text).unwrap();
    let mut expected = g.decisions[0].clone();
    expected.extend([32001, 32005]);
    expected.extend(words("Doc0 source0"));
    expected.extend([32006, 32004]);
    expected.extend(words("Alpha one"));
    expected.extend([32012, 32002]);
    expected.extend(words("Alpha two"));
    expected.extend([32013, 32000]);
    assert_eq!(g.batches[2].0, [expected]);
    let third = &answer.segments[2].candidates[0];
    assert_eq!(third.passages_dropped, 0);
    assert_eq!(third.passage, None);
}

/// Where the whole path does not fit the context, the oldest passages are left out first and
/// every Retrieve and reflection token stays; the trace says how many were left out.
#[test]
fn a_path_too_long_for_the_context_drops_its_oldest_passages_first() {
    let mut g = Scripted::fixed(0.9, 0.1, |prompt| {
        let n = prompt.matches("[Relevant]").count();
        seg(&format!("Step{n} text"), (1.0, 0.0), "[Retrieval]")
    });
    let passage = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do";
    let settings = Settings {
        max_segments: 3,
        max_segment_tokens: 10,
        ..long(1, 1)
    };
    // Generation 10, head 6; a segment is its [Retrieval], 13 tokens of passage markup and 4
    // written: segment 3 needs 6 + 2·18 + 14 = 56 with both earlier passages, 44 without the
    // first.
    g.context = 10 + 55;
    let (answer, _) = run("Q?", &settings, &mut g, &mut Library::new(&[passage]));
    assert_eq!(answer.segments.len(), 3);
    let third = g.render(&g.batches[2].0[0]);
    assert_eq!(
        third,
        format!(
            "<s> ### Instruction: Q? ### Response:[Retrieval][Relevant] Step0 text[Fully supported]\
             [Retrieval]<paragraph> Doc0 {passage}</paragraph>[Relevant] Step1 text\
             [Fully supported][Retrieval]<paragraph> Doc0 {passage}</paragraph>"
        )
    );
    assert_eq!(answer.segments[2].candidates[0].passages_dropped, 1);
    // The decision before it, with no new passage yet, still read the whole path.
    assert_eq!(answer.segments[2].retrieve.unwrap().passages_dropped, 0);
    assert_eq!(g.decisions[2].len(), 6 + 2 * 18);
    assert_eq!(answer.segments[1].candidates[0].passages_dropped, 0);
}

/// The prompt budget (the fine-tuning length by default) bounds prompts as the context does:
/// the smaller of the two is the limit, the oldest passages leave first, and the trace records
/// the budget it ran under.
#[test]
fn the_prompt_budget_bounds_a_path_below_the_models_context() {
    let respond = |prompt: &str| {
        let n = prompt.matches("[Relevant]").count();
        seg(&format!("Step{n} text"), (1.0, 0.0), "[Retrieval]")
    };
    // 100 words: as in the test above, segment 3 needs 6 + 2·108 + 104 = 326 prompt tokens
    // with both earlier passages and 224 without the first; generation takes 10 more.
    let passage = vec!["word"; 100].join(" ");
    let dropped_in_third = |context: usize, budget: usize| {
        let mut g = Scripted::fixed(0.9, 0.1, respond);
        g.context = context;
        let settings = Settings {
            max_segments: 3,
            max_segment_tokens: 10,
            prompt_budget: budget,
            ..long(1, 1)
        };
        let (answer, _) = run("Q?", &settings, &mut g, &mut Library::new(&[&passage]));
        assert_eq!(answer.settings.prompt_budget, budget);
        assert_eq!(answer.segments.len(), 3);
        let third = &answer.segments[2].candidates[0];
        assert!(g.batches[2].0[0].len() + 10 <= context.min(budget));
        third.passages_dropped
    };
    // The default budget holds the whole path on a 4,096-token model.
    assert_eq!(Settings::default().prompt_budget, 2048);
    assert_eq!(dropped_in_third(4096, 2048), 0);
    // A budget of 300 drops the oldest passage although the context holds it.
    assert_eq!(dropped_in_third(4096, 300), 1);
    // A budget past the context is held to it.
    assert_eq!(dropped_in_third(300, 131_072), 1);
}

/// A Retrieve token before any text does not end the segment (SELFRAG.md step 8: a segment
/// ends at a Retrieve token after some text).
#[test]
fn a_retrieve_token_before_any_text_does_not_end_the_segment() {
    let mut g = Scripted::fixed(0.9, 0.1, |prompt| {
        if prompt.contains("Alpha") {
            seg("End", (1.0, 0.0), EOS_TOKEN)
        } else {
            Script::new()
                .isrel(1.0, 0.0)
                .special("[Retrieval]", &[])
                .text("Alpha one", -0.1)
                .issup(SUP)
                .special("[Retrieval]", &[])
        }
    });
    let (answer, _) = run("Q?", &long(1, 1), &mut g, &mut Library::new(&["source0"]));
    assert_eq!(answer.answer, "Alpha one [1] End [1]");
    let request = &g.batches[0].1;
    assert!(!request.stops_at(32001, [32004]));
    assert!(request.stops_at(32001, [32004, 200]));
    assert_eq!(
        answer.segments[0].candidates[0].raw,
        "[Relevant][Retrieval] Alpha one[Fully supported][Retrieval]"
    );
}
