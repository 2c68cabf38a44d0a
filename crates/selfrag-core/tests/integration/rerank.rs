//! rerank: new weights re-choose among stored candidates without the model.

use selfrag_core::{CritiqueWeights, RetrieveMode, Settings, rerank};

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
    let mut g = Scripted::fixed(0.9, 0.1, move |prompt| {
        if prompt.contains("first") {
            alpha.clone()
        } else {
            beta.clone()
        }
    });
    let settings = Settings {
        mode: RetrieveMode::Always,
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
    let free = rerank(&constrained.answer, CritiqueWeights::default(), false);
    assert_eq!(free.answer, answer);
}
