//! Property tests: score ranges, and rerank's consistency with the run it reranks.

use proptest::prelude::*;
use selfrag_core::{
    Answer, CritiqueScores, CritiqueWeights, IsRelDistribution, IsSupDistribution,
    IsUseDistribution, RetrieveMode, Settings, rerank,
};

use crate::util::*;

proptest! {
    #[test]
    fn critique_scores_stay_in_range(
        rel in proptest::array::uniform2(0.0f32..=1.0),
        sup in proptest::array::uniform3(0.0f32..=1.0),
        usefulness in proptest::array::uniform5(0.0f32..=1.0),
    ) {
        let scores = CritiqueScores::from_distributions(
            Some(&IsRelDistribution { relevant: rel[0], irrelevant: rel[1] }),
            Some(&IsSupDistribution { fully: sup[0], partially: sup[1], no_support: sup[2] }),
            Some(&IsUseDistribution {
                u1: usefulness[0], u2: usefulness[1], u3: usefulness[2], u4: usefulness[3], u5: usefulness[4],
            }),
        );
        let eps = 1e-6;
        prop_assert!((-eps..=1.0 + eps).contains(&scores.s_rel), "{scores:?}");
        prop_assert!((-eps..=1.0 + eps).contains(&scores.s_sup), "{scores:?}");
        prop_assert!((-1.0 - eps..=1.0 + eps).contains(&scores.s_use), "{scores:?}");
    }
}

/// One candidate's distributions on a grid of quarters, so distinct s_sup values differ by
/// far more than f32 rounding.
#[derive(Debug, Clone)]
struct Spec {
    rel: [u8; 2],
    sup: [u8; 3],
    usefulness: [u8; 5],
    logprob: u8,
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        proptest::array::uniform2(0u8..=4),
        proptest::array::uniform3(0u8..=4),
        proptest::array::uniform5(0u8..=4),
        0u8..=8,
    )
        .prop_map(|(rel, sup, usefulness, logprob)| Spec {
            rel,
            sup,
            usefulness,
            logprob,
        })
}

fn q(x: u8) -> f32 {
    f32::from(x) / 4.0
}

fn answer_for(specs: &[Spec], hard_constraints: bool, use_p_lm: bool) -> Answer {
    let scripts: Vec<Script> = specs
        .iter()
        .enumerate()
        .map(|(i, s)| {
            Script::new()
                .isrel(q(s.rel[0]), q(s.rel[1]))
                .text(&format!("answer{i}"), -q(s.logprob))
                .issup(s.sup.map(q))
                .isuse(s.usefulness.map(q))
                .eos()
        })
        .collect();
    let mut g = Scripted::fixed(0.9, 0.1, move |prompt| {
        let i = (0..scripts.len())
            .find(|i| prompt.contains(&format!(" source{i}</paragraph>")))
            .unwrap();
        scripts[i].clone()
    });
    let texts: Vec<String> = (0..specs.len()).map(|i| format!("source{i}")).collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let settings = Settings {
        mode: RetrieveMode::Always,
        k: specs.len(),
        hard_constraints,
        use_p_lm,
        ..Settings::default()
    };
    run("Q?", &settings, &mut g, &mut Library::new(&refs)).0
}

fn chosen_s_sup(answer: &Answer) -> f32 {
    let segment = &answer.segments[0];
    segment.candidates[segment.chosen].s_sup
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn rerank_with_the_original_weights_reproduces_the_answer(
        specs in proptest::collection::vec(spec(), 1..6),
        hard in any::<bool>(),
        use_p_lm in any::<bool>(),
    ) {
        let answer = answer_for(&specs, hard, use_p_lm);
        let again = rerank(&answer, answer.settings.weights, hard);
        prop_assert_eq!(&again.answer, &answer);
        prop_assert_eq!(again.unexplored_segment, None);
        assert_clean(&answer);
    }

    #[test]
    fn raising_w_sup_never_lowers_the_chosen_s_sup(
        specs in proptest::collection::vec(spec(), 1..6),
        hard in any::<bool>(),
        w_sup in 0u8..=8,
        raise in 1u8..=8,
    ) {
        let answer = answer_for(&specs, hard, true);
        let low = CritiqueWeights { sup: q(w_sup), ..CritiqueWeights::default() };
        let high = CritiqueWeights { sup: q(w_sup) + q(raise), ..CritiqueWeights::default() };
        let before = chosen_s_sup(&rerank(&answer, low, hard).answer);
        let after = chosen_s_sup(&rerank(&answer, high, hard).answer);
        prop_assert!(after >= before, "{after} < {before}");
    }
}
