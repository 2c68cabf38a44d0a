//! Long-form re-rank replays the beam search (issue 18 part 1): over a fully expanded tree, a
//! replay with any weights, hard constraints and beam width equals a fresh run with them.

use proptest::prelude::*;
use selfrag_core::{Answer, CritiqueWeights, RetrieveMode, Settings, rerank};

use crate::util::*;

const K: usize = 3;
const SEGMENTS: usize = 3;

/// What the model writes at one depth from one passage, whatever came before: the candidates
/// do not depend on their history, so a wider run explores a superset of a narrower one.
#[derive(Debug, Clone)]
struct Spec {
    rel: [u8; 2],
    sup: [u8; 3],
    usefulness: [u8; 5],
    logprob: u8,
    ends: bool,
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        proptest::array::uniform2(0u8..=4),
        proptest::array::uniform3(0u8..=4),
        proptest::array::uniform5(0u8..=4),
        0u8..=8,
        proptest::bool::weighted(0.2),
    )
        .prop_map(|(rel, sup, usefulness, logprob, ends)| Spec {
            rel,
            sup,
            usefulness,
            logprob,
            ends,
        })
}

fn q(x: u8) -> f32 {
    f32::from(x) / 4.0
}

/// A generator whose candidate for (depth, passage) is `specs[depth * K + passage]`.
fn generator(specs: Vec<Spec>) -> Scripted {
    Scripted::fixed(0.9, 0.1, move |prompt| {
        let depth = prompt.matches("[Retrieval]").count().saturating_sub(1);
        let passage = (0..K)
            .find(|i| prompt.ends_with(&format!(" source{i}</paragraph>")))
            .unwrap();
        let s = &specs[(depth * K + passage) % specs.len()];
        let script = Script::new()
            .isrel(q(s.rel[0]), q(s.rel[1]))
            .text(&format!("d{depth}p{passage}"), -q(s.logprob))
            .issup(s.sup.map(q))
            .isuse(s.usefulness.map(q));
        if s.ends {
            script.eos()
        } else {
            script.special("[Retrieval]", &[])
        }
    })
}

fn settings(weights: CritiqueWeights, hard_constraints: bool, beam_width: usize) -> Settings {
    Settings {
        mode: RetrieveMode::Always,
        long_form: true,
        k: K,
        max_segments: SEGMENTS,
        weights,
        hard_constraints,
        beam_width,
        ..Settings::default()
    }
}

fn library() -> Library {
    Library::new(
        &(0..K)
            .map(|i| format!("source{i}"))
            .collect::<Vec<_>>()
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    )
}

/// One segment as a reader sees it: text, cited passage id, chosen index, and every
/// candidate's passage id and score bits.
#[derive(Debug, PartialEq)]
struct Seen {
    text: String,
    cites: Option<String>,
    chosen: usize,
    candidates: Vec<(Option<String>, u32)>,
}

/// What a reader sees of an answer, with passages named by id (their numbering depends on
/// which passages the trace holds besides the cited ones).
fn seen(answer: &Answer) -> Vec<Seen> {
    let id = |index: Option<usize>| index.map(|i| answer.passages[i].id.clone());
    answer
        .segments
        .iter()
        .map(|s| Seen {
            text: s.text.clone(),
            cites: s.citation.and_then(|n| id(Some(n - 1))),
            chosen: s.chosen,
            candidates: s
                .candidates
                .iter()
                .map(|c| (id(c.passage), c.score.to_bits()))
                .collect(),
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn a_replay_over_a_fully_expanded_tree_equals_a_fresh_run(
        specs in proptest::collection::vec(spec(), K * SEGMENTS),
        rel in 0u8..=8,
        sup in 0u8..=8,
        usefulness in 0u8..=8,
        hard in any::<bool>(),
        width in 1usize..=K,
    ) {
        // Every path expanded: K^(SEGMENTS-1) beams kept, no hard constraints.
        let full = settings(CritiqueWeights::default(), false, K.pow(SEGMENTS as u32 - 1));
        let (mut tree, _) = run("Q?", &full, &mut generator(specs.clone()), &mut library());
        let weights = CritiqueWeights { rel: q(rel), sup: q(sup), use_: q(usefulness) };

        // The tree with its own settings replays to itself.
        let same = rerank(&tree, tree.settings.weights, tree.settings.hard_constraints);
        prop_assert_eq!(&same.answer, &tree);

        tree.settings.beam_width = width;
        let replayed = rerank(&tree, weights, hard);
        let mut g = generator(specs);
        let (fresh, _) = run("Q?", &settings(weights, hard, width), &mut g, &mut library());
        prop_assert_eq!(replayed.unexplored_segment, None);
        prop_assert_eq!(&replayed.answer.answer, &fresh.answer);
        prop_assert_eq!(seen(&replayed.answer), seen(&fresh));
        assert_clean(&replayed.answer);
    }
}
