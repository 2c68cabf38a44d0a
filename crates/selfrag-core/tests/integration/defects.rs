//! Regression tests named after the defects of the public reference code (SELFRAG.md,
//! "Defects in the public reference code"): each pins the paper's behaviour instead.

use selfrag_core::{RetrieveMode, Settings};

use crate::util::*;

const SUPPORTED: [f32; 3] = [0.9, 0.05, 0.05];
const USEFUL: [f32; 5] = [0.0, 0.0, 0.0, 0.0, 1.0];
const NEUTRAL: [f32; 5] = [0.0, 0.0, 1.0, 0.0, 0.0];

fn always() -> Settings {
    Settings {
        mode: RetrieveMode::Always,
        ..Settings::default()
    }
}

/// `run_short_form.py` divided raw log-probabilities: log 0.1 / (log 0.1 + log 0.9) ≈ 0.96
/// would retrieve at δ = 0.2. The paper's probabilities give 0.1, which does not.
#[test]
fn reference_threshold_compared_raw_log_probabilities() {
    let mut g = Scripted::fixed(0.1, 0.9, |_| Script::new().text("x", -0.1).eos());
    let (adaptive, _) = run(
        "Q?",
        &Settings::default(),
        &mut g,
        &mut Library::new(&["p"]),
    );
    assert!(close(adaptive.retrieve.p_retrieve, 0.1));
    assert!(!adaptive.retrieve.retrieved);

    let mut g = Scripted::fixed(0.1, 0.9, |_| Script::new().text("x", -0.1).eos());
    let (always, _) = run("Q?", &always(), &mut g, &mut Library::new(&["p"]));
    assert!(
        always.retrieve.retrieved,
        "adaptive and always must differ here"
    );

    // Tiny but balanced probabilities renormalise to 0.5: retrieve.
    let mut g = Scripted::fixed(0.001, 0.001, |_| Script::new().text("x", -0.1).eos());
    let (small, _) = run(
        "Q?",
        &Settings::default(),
        &mut g,
        &mut Library::new(&["p"]),
    );
    assert!(close(small.retrieve.p_retrieve, 0.5));
    assert!(small.retrieve.retrieved);
}

/// The reference CLI defaulted `--w_use` to 1.0; the paper says 0.5, and it changes answers.
#[test]
fn reference_cli_defaulted_w_use_to_one() {
    assert_eq!(Settings::default().weights.use_, 0.5);
    // useful: s_rel 0.4, s_use 1; relevant: s_rel 1, s_use 0. At w_use 0.5 relevant wins by
    // 0.1; at 1.0 useful would win by 0.4.
    let useful = Script::candidate("useful", (0.4, 0.6), SUPPORTED, USEFUL);
    let relevant = Script::candidate("relevant", (1.0, 0.0), SUPPORTED, NEUTRAL);
    let respond = move |prompt: &str| {
        if prompt.contains("one") {
            useful.clone()
        } else {
            relevant.clone()
        }
    };
    let mut g = Scripted::fixed(0.9, 0.1, respond.clone());
    let (answer, _) = run("Q?", &always(), &mut g, &mut Library::new(&["one", "two"]));
    assert_eq!(answer.segments[0].text, "relevant");

    let mut settings = always();
    settings.weights.use_ = 1.0;
    let mut g = Scripted::fixed(0.9, 0.1, respond);
    let (answer, _) = run("Q?", &settings, &mut g, &mut Library::new(&["one", "two"]));
    assert_eq!(answer.segments[0].text, "useful");
}

/// The reference stored a missing token's log-prob as -100 and sometimes used it as a
/// probability. A missing IsSup / IsUse token scores 0 and records no distribution; a group
/// with no probability mass scores 0, never NaN.
#[test]
fn reference_used_minus_100_for_missing_tokens() {
    let mut g = Scripted::fixed(0.9, 0.1, |_| {
        Script::new()
            .isrel(0.5, 0.5)
            .text("bare answer", -0.3)
            .eos()
    });
    let (answer, _) = run("Q?", &always(), &mut g, &mut Library::new(&["p"]));
    let c = &answer.segments[0].candidates[0];
    assert_eq!((c.issup, c.isuse, c.s_sup, c.s_use), (None, None, 0.0, 0.0));
    let every = [0.5f32.ln(), -0.3, -0.3, SPECIAL_LOGPROB];
    assert!(close(c.score, p_lm_of(&every) + 0.5), "{}", c.score);

    // Emitted, but the watched probabilities are all zero.
    let mut g = Scripted::fixed(0.9, 0.1, |_| {
        Script::new()
            .special("[Relevant]", &[])
            .text("zero mass", -0.3)
            .special("[Fully supported]", &[])
            .special("[Utility:5]", &[])
            .eos()
    });
    let (answer, _) = run("Q?", &always(), &mut g, &mut Library::new(&["p"]));
    let c = &answer.segments[0].candidates[0];
    assert!(c.issup.is_some() && c.isuse.is_some());
    assert_eq!((c.s_rel, c.s_sup, c.s_use), (0.0, 0.0, 0.0));
    assert!(c.score.is_finite());
    let every = [
        SPECIAL_LOGPROB,
        -0.3,
        -0.3,
        SPECIAL_LOGPROB,
        SPECIAL_LOGPROB,
        SPECIAL_LOGPROB,
    ];
    assert!(close(c.score, p_lm_of(&every)), "{}", c.score);
}
