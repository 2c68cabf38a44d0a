//! Long form's comparison of paths whose segments are of different kinds (issue 47 item 1):
//! `LongFormRanking::Normalised` compares like with like, `Raw` is the rule before it.

use proptest::prelude::*;
use selfrag_core::{
    Answer, LongFormRanking, PLmTokens, RetrieveMode, Settings, ranking_value, rerank,
};

use crate::util::*;

fn long(ranking: LongFormRanking) -> Settings {
    Settings {
        mode: RetrieveMode::Always,
        long_form: true,
        k: 1,
        beam_width: 1,
        long_form_ranking: ranking,
        ..Settings::default()
    }
}

/// The beam search's rank of the answer's path: the mean of its chosen candidates' ranking
/// values under the answer's settings.
fn path_rank(answer: &Answer) -> f32 {
    let values: Vec<f32> = answer
        .segments
        .iter()
        .map(|segment| ranking_value(&segment.candidates[segment.chosen], &answer.settings))
        .collect();
    values.iter().sum::<f32>() / values.len() as f32
}

#[test]
fn a_continued_segment_is_ranked_with_the_issup_of_its_evidence_but_not_labelled_with_it() {
    let sup = [0.6, 0.3, 0.1];
    let respond = move |prompt: &str| {
        if prompt.contains("Alpha") {
            Script::new().text("Alpha two", -0.1).eos()
        } else {
            Script::new()
                .isrel(0.9, 0.1)
                .text("Alpha one", -0.1)
                .issup(sup)
                .special("[Continue to Use Evidence]", &[])
        }
    };
    let mut g = Scripted::fixed(0.9, 0.1, respond);
    let settings = long(LongFormRanking::Normalised);
    let (answer, _) = run("Q?", &settings, &mut g, &mut Library::new(&["source0"]));
    let first = &answer.segments[0].candidates[0];
    let continued = &answer.segments[1].candidates[0];
    assert!(continued.continued);
    // Its own record (badge, export labels, f) says what the model wrote: no IsSup.
    assert_eq!((continued.issup, continued.s_sup), (None, 0.0));
    assert_eq!(continued.evidence_issup, first.issup);
    // The ranking counts its evidence's: (p_LM + s_rel + s_sup) / (1 + 1 + 1).
    let s_sup = (0.6 + 0.5 * 0.3) / 1.0;
    let expected = (continued.p_lm + continued.s_rel + s_sup) / 3.0;
    assert!(close(ranking_value(continued, &settings), expected));
    // Re-rank under the trace's own settings gives it back byte for byte.
    let again = rerank(
        &answer,
        answer.settings.weights,
        answer.settings.hard_constraints,
    );
    assert_eq!(again.answer, answer);

    // Ranked raw, the continued segment counts no support, as before.
    let raw = long(LongFormRanking::Raw);
    assert!(close(ranking_value(continued, &raw), continued.score));
}

/// Two paths at segment 2: one beam retrieves again and writes a weakly supported segment
/// from a barely relevant passage, the other declines retrieval and writes a fluent one. Ranked
/// raw, the retrieved segment's evidence terms (worth up to 2 more) win whatever their quality;
/// ranked normalised, each segment is measured against what its kind can score. `ends` says
/// whether segment 2 ends the answer (with IsUse) or leads on to a third (no IsUse yet: the
/// model writes IsUse only at the end, so it must not weigh on either side).
fn weak_retrieval_against_fluent_text(ranking: LongFormRanking, ends: bool) -> String {
    let decide = |prompt: &str| {
        if prompt.contains("Beta") {
            (0.05, 0.95)
        } else {
            (0.9, 0.1)
        }
    };
    let end = move |script: Script, utility: usize| {
        if ends {
            let mut usefulness = [0.0; 5];
            usefulness[utility] = 1.0;
            script.isuse(usefulness).eos()
        } else {
            script.special("[Retrieval]", &[])
        }
    };
    let respond = move |prompt: &str| {
        if prompt.contains("Alpha") {
            // Retrieved again after Alpha: half relevant, mostly unsupported.
            let weak = Script::new()
                .isrel(0.6, 0.4)
                .text("Weak follow", -0.3)
                .issup([0.3, 0.4, 0.3]);
            end(weak, 2)
        } else if prompt.contains("Beta") {
            // Written without retrieval after Beta. Mid-answer its f is p_LM ≈ 0.70 against
            // the weak segment's ≈ 1.77: over the most each can score without IsUse (1 and 3)
            // the fluent one wins, 0.70 to 0.59; with w_use counted in both maxima it would
            // lose, 0.47 to 0.50.
            end(Script::new().text("Fluent follow", -0.53), 4)
        } else if prompt.ends_with(" source0</paragraph>") {
            Script::new()
                .isrel(1.0, 0.0)
                .text("Alpha", -0.1)
                .issup([1.0, 0.0, 0.0])
                .special("[Retrieval]", &[])
        } else {
            Script::new()
                .isrel(1.0, 0.0)
                .text("Beta", -0.1)
                .issup([1.0, 0.0, 0.0])
                .special("[Retrieval]", &[])
        }
    };
    let settings = Settings {
        mode: RetrieveMode::Adaptive,
        long_form: true,
        k: 2,
        beam_width: 2,
        max_segments: 2,
        long_form_ranking: ranking,
        ..Settings::default()
    };
    let mut g = Scripted::new(decide, respond);
    let (answer, _) = run(
        "Q?",
        &settings,
        &mut g,
        &mut Library::new(&["source0", "source1"]),
    );
    answer.answer
}

#[test]
fn a_weakly_supported_retrieval_no_longer_beats_a_fluent_answer_without_one() {
    for ends in [true, false] {
        assert_eq!(
            weak_retrieval_against_fluent_text(LongFormRanking::Raw, ends),
            "Alpha [1] Weak follow [1]",
            "raw, segment 2 ends the answer: {ends}"
        );
        assert_eq!(
            weak_retrieval_against_fluent_text(LongFormRanking::Normalised, ends),
            "Beta [1] Fluent follow",
            "normalised, segment 2 ends the answer: {ends}"
        );
    }
}

/// The scripts of one two-segment path over one passage: segment 1 retrieves it and ends with
/// `second`, segment 2 writes `Tail` with `isuse` and ends the answer.
fn two_segments(
    rel: (f32, f32),
    sup: [f32; 3],
    usefulness: [f32; 5],
    logprob: f32,
    continued: bool,
) -> impl FnMut(&str) -> Script + 'static {
    move |prompt: &str| {
        if prompt.contains("Head") {
            let tail = if continued {
                Script::new()
            } else {
                // Retrieved again: the same passage, judged as before.
                Script::new().isrel(rel.0, rel.1)
            };
            let tail = tail.text("Tail words", logprob);
            let tail = if continued { tail } else { tail.issup(sup) };
            tail.isuse(usefulness).eos()
        } else {
            let end = if continued {
                "[Continue to Use Evidence]"
            } else {
                "[Retrieval]"
            };
            Script::new()
                .isrel(rel.0, rel.1)
                .text("Head words", logprob)
                .issup(sup)
                .special(end, &[])
        }
    }
}

fn quarter(x: u8) -> f32 {
    f32::from(x) / 4.0
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// A path's rank does not depend on whether its second segment reads its evidence on after
    /// `[Continue to Use Evidence]` or retrieves the same passage again and judges it the same
    /// way. Ranked raw it does: the continued segment loses w_sup·s_sup.
    #[test]
    fn a_paths_rank_does_not_depend_on_how_equal_evidence_is_split_between_kinds(
        rel in (1u8..=4, 0u8..=4),
        sup in proptest::array::uniform3(0u8..=4),
        usefulness in proptest::array::uniform5(0u8..=4),
        logprob in 1u8..=8,
        w_sup in 1u8..=8,
    ) {
        let rel = (quarter(rel.0), quarter(rel.1));
        let sup = sup.map(quarter);
        let usefulness = usefulness.map(quarter);
        let logprob = -quarter(logprob);
        for ranking in [LongFormRanking::Normalised, LongFormRanking::Raw] {
            let mut settings = Settings {
                max_segments: 2,
                // p_LM over the text, so both paths read the same p_LM; the critique terms
                // are what the property is about.
                p_lm_tokens: PLmTokens::Text,
                ..long(ranking)
            };
            settings.weights.sup = quarter(w_sup);
            let mut ranks = Vec::new();
            for continued in [true, false] {
                let mut g = Scripted::fixed(
                    0.9,
                    0.1,
                    two_segments(rel, sup, usefulness, logprob, continued),
                );
                let (answer, _) = run("Q?", &settings, &mut g, &mut Library::new(&["source0"]));
                prop_assert_eq!(answer.segments.len(), 2);
                prop_assert_eq!(answer.segments[1].retrieve.is_none(), continued);
                ranks.push(path_rank(&answer));
            }
            let s_sup = {
                let total: f32 = sup.iter().sum();
                if total > 0.0 { (sup[0] + 0.5 * sup[1]) / total } else { 0.0 }
            };
            match ranking {
                LongFormRanking::Normalised => {
                    prop_assert!((ranks[0] - ranks[1]).abs() < 1e-5, "{ranks:?}");
                }
                LongFormRanking::Raw => {
                    // Continued: s_sup 0 in the second of two segments.
                    let gap = settings.weights.sup * s_sup / 2.0;
                    prop_assert!((ranks[1] - ranks[0] - gap).abs() < 1e-5, "{ranks:?} {gap}");
                }
            }
        }
    }

    /// Where the model's p(Retrieval) stays under δ at every segment boundary, adaptive
    /// long form writes exactly the answer `never` writes: the no-retrieval path, whatever the
    /// ranking, beams and utilities.
    #[test]
    fn where_the_model_declines_retrieval_at_every_step_the_answer_is_the_no_retrieval_path(
        threshold in 1u8..=19,
        below in proptest::collection::vec(0u8..20, 7),
        utilities in proptest::collection::vec(0usize..5, 7),
        beams in 1usize..=3,
        normalised in any::<bool>(),
    ) {
        let threshold = f32::from(threshold) / 20.0;
        let ranking = if normalised { LongFormRanking::Normalised } else { LongFormRanking::Raw };
        let respond = move |prompt: &str| {
            let n = prompt.matches("Step").count();
            let mut usefulness = [0.0; 5];
            usefulness[utilities[n % utilities.len()]] = 1.0;
            let script = Script::new().text(&format!("Step{n} said"), -0.2).isuse(usefulness);
            if n >= 3 { script.eos() } else { script.special("[Retrieval]", &[]) }
        };
        let settings = |mode| Settings {
            mode,
            threshold,
            long_form: true,
            k: 3,
            beam_width: beams,
            long_form_ranking: ranking,
            ..Settings::default()
        };
        let mut decisions = 0;
        let mut declining = Scripted::new(
            move |_| {
                // A probability under δ, with [No Retrieval] holding the rest.
                let p = threshold * f32::from(below[decisions % below.len()]) / 20.0;
                decisions += 1;
                (p, 1.0 - p)
            },
            respond.clone(),
        );
        let library = || Library::new(&["source0", "source1", "source2"]);
        let (adaptive, _) = run("Q?", &settings(RetrieveMode::Adaptive), &mut declining, &mut library());
        let mut never = Scripted::fixed(0.0, 1.0, respond);
        let (without, _) = run("Q?", &settings(RetrieveMode::Never), &mut never, &mut library());
        prop_assert_eq!(&adaptive.answer, &without.answer);
        prop_assert_eq!(adaptive.segments.len(), 4);
        prop_assert!(adaptive.passages.is_empty());
        prop_assert!(adaptive.segments.iter().all(|s| s.citation.is_none()
            && s.retrieve.is_some_and(|d| !d.retrieved)));
    }
}
