//! rerank: new weights re-choose among stored candidates without the model.

use selfrag_core::{CritiqueWeights, HardConstraint, RetrieveMode, Settings, rerank};

use crate::util::*;

fn two_candidates() -> (selfrag_core::Answer, Scripted) {
    // alpha: s_sup 0, s_use 1; beta: s_sup 1, s_use 0 (flip at w_sup = 0.5 with w_use = 0.5).
    let alpha = Script::candidate(
        "alpha",
        (1.0, 0.0),
        [0.0, 0.0, 1.0],
        [0.0, 0.0, 0.0, 0.0, 1.0],
    );
    let beta = Script::candidate(
        "beta",
        (1.0, 0.0),
        [1.0, 0.0, 0.0],
        [0.0, 0.0, 1.0, 0.0, 0.0],
    );
    answer_from(alpha, beta, false)
}

/// A short-form answer that always retrieves two passages, "first" (written `from_first`) and
/// "second" (`from_second`).
fn answer_from(
    from_first: Script,
    from_second: Script,
    hard_constraints: bool,
) -> (selfrag_core::Answer, Scripted) {
    let mut g = Scripted::fixed(0.9, 0.1, move |prompt| {
        if prompt.contains("first") {
            from_first.clone()
        } else {
            from_second.clone()
        }
    });
    let settings = Settings {
        mode: RetrieveMode::Always,
        hard_constraints,
        ..Settings::default()
    };
    let (answer, _) = run(
        "Q?",
        &settings,
        &mut g,
        &mut Library::new(&["first", "second"]),
    );
    (answer, g)
}

#[test]
fn rerank_flips_the_choice_at_the_same_boundary_as_a_fresh_run() {
    let (answer, g) = two_candidates();
    // Default w_sup = 1.0 favours the supported beta.
    assert_eq!(answer.answer, "beta [1]");
    assert_eq!(answer.passages[0].text, "second");
    let calls = g.batches.len();

    let above = rerank(
        &answer,
        CritiqueWeights {
            sup: 0.501,
            ..CritiqueWeights::default()
        },
        false,
    );
    assert_eq!(above.answer.answer, "beta [1]");
    let below = rerank(
        &answer,
        CritiqueWeights {
            sup: 0.499,
            ..CritiqueWeights::default()
        },
        false,
    );
    assert_eq!(below.answer.answer, "alpha [1]");
    assert_eq!(
        below.unexplored_segment, None,
        "short form never needs a rerun"
    );
    assert_eq!(below.answer.settings.weights.sup, 0.499);

    // The newly cited passage comes first; candidate indices follow it.
    assert_eq!(below.answer.passages[0].text, "first");
    let segment = &below.answer.segments[0];
    assert_eq!(segment.chosen, 0);
    assert_eq!(segment.candidates[0].passage, Some(0));
    assert_eq!(segment.candidates[1].passage, Some(1));
    assert_eq!(segment.citation, Some(1));
    // Scores follow the new weights.
    let beta = &segment.candidates[1];
    assert!(close(beta.score, beta.p_lm + 1.0 + 0.499));
    assert_eq!(g.batches.len(), calls, "rerank never calls the model");

    // Back to the original weights: the original answer exactly.
    let back = rerank(&below.answer, CritiqueWeights::default(), false);
    assert_eq!(back.answer, answer);
}

/// When every candidate violates them, the constraints keep all (as the paper's fallback does),
/// and the trace excludes none while still naming each verdict.
#[test]
fn hard_constraints_that_would_leave_nothing_exclude_nothing() {
    let irrelevant = |text: &str| {
        Script::candidate(text, (0.1, 0.9), [1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 1.0])
    };
    let (answer, _) = answer_from(irrelevant("alpha"), irrelevant("beta"), true);
    let segment = &answer.segments[0];
    assert!(segment.excluded.is_empty());
    for candidate in &segment.candidates {
        assert_eq!(candidate.violates, [HardConstraint::Irrelevant]);
    }
}

#[test]
fn rerank_applies_hard_constraints() {
    let (answer, _) = two_candidates();
    // Under w_sup = 0.2 alpha wins, but its argmax IsSup is [No support / Contradictory].
    let weights = CritiqueWeights {
        sup: 0.2,
        ..CritiqueWeights::default()
    };
    assert_eq!(rerank(&answer, weights, false).answer.answer, "alpha [1]");
    let constrained = rerank(&answer, weights, true);
    assert_eq!(constrained.answer.answer, "beta [1]");
    assert!(constrained.answer.settings.hard_constraints);

    // The trace says what the constraints decided, so no front end decides it again: alpha
    // is held to be unsupported in every trace, and left out only while they are on.
    let segment = |a: &selfrag_core::Answer| a.segments[0].clone();
    let alpha = |a: &selfrag_core::Answer| {
        segment(a)
            .candidates
            .iter()
            .position(|c| c.text == "alpha")
            .unwrap()
    };
    for trace in [&answer, &constrained.answer] {
        let seg = segment(trace);
        assert_eq!(
            seg.candidates[alpha(trace)].violates,
            [HardConstraint::Unsupported]
        );
        assert!(seg.candidates[1 - alpha(trace)].violates.is_empty());
    }
    assert!(
        segment(&answer).excluded.is_empty(),
        "off: nothing excluded"
    );
    assert_eq!(
        segment(&constrained.answer).excluded,
        [alpha(&constrained.answer)]
    );
    let json = serde_json::to_value(&constrained.answer).unwrap();
    assert_eq!(
        json["segments"][0]["candidates"][alpha(&constrained.answer)]["violates"],
        serde_json::json!(["unsupported"])
    );
    let free = rerank(&constrained.answer, CritiqueWeights::default(), false);
    assert_eq!(free.answer, answer);
}
