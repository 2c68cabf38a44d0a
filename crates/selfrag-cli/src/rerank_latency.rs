//! `selfrag debug rerank-latency TRACE --dir DIR`: how long a weight slider's move takes on a
//! saved answer (JSON, for `cargo xtask bench rerank`). It imports the trace into a new data
//! folder's history and drags the IsSup weight from 0 to 2 in even steps, timing each move
//! twice: the replay alone (`selfrag_core::rerank`), and the engine's whole re-rank as the
//! app calls it (the view, saved to disk, and the answer under it).

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use selfrag_core::{Answer, CritiqueWeights};
use selfrag_engine::{Engine, EngineConfig};
use serde::Serialize;

#[derive(Serialize)]
struct Report {
    segments: usize,
    beam_width: usize,
    k: usize,
    expansions: usize,
    candidates: usize,
    trace_bytes: usize,
    moves: usize,
    core_ms_median: f64,
    core_ms_max: f64,
    engine_ms_median: f64,
    engine_ms_p95: f64,
    engine_ms_max: f64,
    /// Moves whose answer a re-run could change (a branch the run did not expand).
    moves_with_unexplored_branch: usize,
}

pub async fn run(trace: &Path, dir: &Path, moves: usize) -> Result<String> {
    let text = std::fs::read_to_string(trace)
        .with_context(|| format!("reading the trace {}", trace.display()))?;
    let answer: Answer = serde_json::from_str(&text)
        .with_context(|| format!("{} is not an answer trace", trace.display()))?;
    let engine = Engine::new(EngineConfig {
        data_dir: dir.join("data"),
        library: None,
        ..crate::engine_config()?
    })?;
    let id = engine.import_answer(answer.clone()).id;
    let hard = answer.settings.hard_constraints;
    let moves = moves.max(2);
    let mut core = Vec::with_capacity(moves);
    let mut whole = Vec::with_capacity(moves);
    let mut unexplored = 0;
    for step in 0..moves {
        let weights = CritiqueWeights {
            sup: 2.0 * step as f32 / (moves - 1) as f32,
            ..answer.settings.weights
        };
        let started = Instant::now();
        let replayed = selfrag_core::rerank(&answer, weights, hard);
        core.push(started.elapsed().as_secs_f64() * 1e3);
        unexplored += usize::from(replayed.unexplored_segment.is_some());
        let started = Instant::now();
        engine.rerank(&id, weights, hard)?;
        whole.push(started.elapsed().as_secs_f64() * 1e3);
    }
    core.sort_by(f64::total_cmp);
    whole.sort_by(f64::total_cmp);
    let at = |v: &[f64], q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    let report = Report {
        segments: answer.segments.len(),
        beam_width: answer.settings.beam_width,
        k: answer.settings.k,
        expansions: answer.expansions.len(),
        candidates: answer.expansions.iter().map(|e| e.candidates.len()).sum(),
        trace_bytes: text.len(),
        moves,
        core_ms_median: at(&core, 0.5),
        core_ms_max: at(&core, 1.0),
        engine_ms_median: at(&whole, 0.5),
        engine_ms_p95: at(&whole, 0.95),
        engine_ms_max: at(&whole, 1.0),
        moves_with_unexplored_branch: unexplored,
    };
    Ok(serde_json::to_string(&report)?)
}
