//! `selfrag debug index-while-answering`: how fast an indexing job embeds while a question is
//! answered in the same engine, against the same job alone, how long the answer takes with
//! and without the job beside it, and how long a search takes with and without it (its query's
//! embedding waits for the job's embedding in progress) (JSON, for `cargo xtask bench server`).
//!
//! It drives the engine only through its public API (`Engine::index_paths`, `Engine::cancel`,
//! `Engine::ask`), with the models and generator of `EngineConfig::from_env`
//! (`SELFRAG_GENERATOR`, `SELFRAG_EMBEDDER`, `SELFRAG_GENERATOR_URL` for a server), in a new
//! data folder. The corpus is written by the command: Markdown notes of one passage each, so
//! that the job's progress is counted a passage at a time.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use selfrag_core::{RetrieveMode, Settings};
use selfrag_engine::{
    Engine, EngineConfig, IndexEvent, JobKind, SearchFilter, SearchMode, SearchQuery,
};
use serde::Serialize;

#[derive(Serialize)]
struct Report {
    /// Who answered (`local` or the server's URL) and where.
    generator: String,
    files_alone: usize,
    seconds_alone: f64,
    passages_per_second_alone: f64,
    answer_seconds_alone: f64,
    answer_seconds_while_indexing: f64,
    /// Passages the job embedded between the question and its answer.
    passages_while_answering: u64,
    passages_per_second_while_answering: f64,
    /// Candidates generated for the measured answers (K when it retrieved).
    candidates: usize,
    /// Seconds of [`SEARCHES`] vector searches, [`SEARCH_GAP`] apart, with no job running.
    search_seconds_alone: Vec<f64>,
    /// The same searches while the job runs (after the answer beside it).
    search_seconds_while_indexing: Vec<f64>,
}

/// Searches timed each way: each waits for whatever the model thread is doing when it comes.
const SEARCHES: usize = 7;
/// The pause between two timed searches: not a multiple of anything the job does, so that the
/// searches arrive at different points of its embedding.
const SEARCH_GAP: Duration = Duration::from_millis(730);

/// A job's `FileIndexed` events as (time, passages so far).
#[derive(Default)]
struct Timeline {
    points: Mutex<Vec<(Instant, u64)>>,
}

impl Timeline {
    fn record(&self, event: &IndexEvent) {
        if let IndexEvent::FileIndexed { passages, .. } = event {
            let mut points = self.points.lock().unwrap_or_else(|p| p.into_inner());
            let total = points.last().map_or(0, |&(_, n)| n) + u64::from(*passages);
            points.push((Instant::now(), total));
        }
    }

    /// Passages done by `at`.
    fn passages_at(&self, at: Instant) -> u64 {
        let points = self.points.lock().unwrap_or_else(|p| p.into_inner());
        points
            .iter()
            .take_while(|(t, _)| *t <= at)
            .last()
            .map_or(0, |&(_, n)| n)
    }

    fn first_file_done(&self) -> bool {
        !self
            .points
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_empty()
    }
}

/// Writes `files` notes of about 90 words into `dir`, different for every `seed`.
fn write_corpus(dir: &Path, files: usize, seed: u64) -> Result<()> {
    const WORDS: &[&str] = &[
        "retrieval",
        "passage",
        "model",
        "evidence",
        "citation",
        "support",
        "question",
        "answer",
        "library",
        "document",
        "critique",
        "segment",
        "token",
        "reflection",
        "relevance",
        "utility",
        "embedding",
        "vector",
        "search",
        "index",
        "corpus",
        "claim",
        "source",
        "page",
        "reader",
        "method",
        "result",
        "measure",
        "protein",
        "climate",
        "river",
        "history",
        "theorem",
        "signal",
        "market",
        "language",
        "memory",
        "network",
    ];
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut next = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) as usize
    };
    for i in 0..files {
        let mut text = format!("# Note {seed}-{i}\n\n");
        for w in 0..90 {
            text.push_str(WORDS[next() % WORDS.len()]);
            text.push(if w % 15 == 14 { '.' } else { ' ' });
        }
        text.push('\n');
        let path = dir.join(format!("note-{i:05}.md"));
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

fn settings(k: usize, max_tokens: usize) -> Settings {
    Settings {
        mode: RetrieveMode::Always,
        k,
        max_new_tokens: max_tokens,
        ..Settings::default()
    }
}

/// [`SEARCHES`] vector searches for `question`, [`SEARCH_GAP`] apart: the seconds of each.
async fn timed_searches(engine: &Engine, question: &str) -> Result<Vec<f64>> {
    let mut seconds = Vec::with_capacity(SEARCHES);
    for _ in 0..SEARCHES {
        tokio::time::sleep(SEARCH_GAP).await;
        let started = Instant::now();
        engine
            .search(SearchQuery {
                text: question.to_owned(),
                mode: SearchMode::Vector,
                k: 5,
                filter: SearchFilter::default(),
            })
            .await
            .context("searching for the benchmark question")?;
        seconds.push(started.elapsed().as_secs_f64());
    }
    Ok(seconds)
}

/// Asks `question`, returning the seconds it took and the candidates it generated.
async fn timed_ask(engine: &Engine, question: &str, settings: &Settings) -> Result<(f64, usize)> {
    let started = Instant::now();
    let record = engine
        .ask(question.to_owned(), settings.clone(), |_| {})
        .await
        .context("answering the benchmark question")?;
    Ok((
        started.elapsed().as_secs_f64(),
        record
            .answer
            .segments
            .iter()
            .map(|s| s.candidates.len())
            .sum(),
    ))
}

/// `selfrag debug index-while-answering` (see the module docs).
pub async fn index_while_answering(
    dir: PathBuf,
    files: usize,
    question: String,
    k: usize,
    max_tokens: usize,
) -> Result<()> {
    if dir.exists() {
        bail!(
            "{} exists; the measurement runs in a new folder",
            dir.display()
        );
    }
    let alone = dir.join("alone");
    let beside = dir.join("beside");
    write_corpus(&alone, files, 1)?;
    // Enough for the job to outlast any answer; it is cancelled once the answer is in.
    write_corpus(&beside, files * 20, 2)?;

    let config = EngineConfig {
        data_dir: dir.join("data"),
        library: None,
        ..crate::engine_config()?
    };
    let generator = match &config.generator_server {
        Some(server) => server.url.clone(),
        None => format!("local ({})", config.device),
    };
    let engine = Arc::new(Engine::new(config)?);
    let settings = settings(k, max_tokens);

    // Loads the models (or connects to the server) before anything is timed.
    timed_ask(&engine, &question, &settings).await?;

    let started = Instant::now();
    let timeline = Arc::new(Timeline::default());
    let job_timeline = timeline.clone();
    engine
        .index_paths(std::slice::from_ref(&alone), move |e| {
            job_timeline.record(&e)
        })
        .await?;
    let seconds_alone = started.elapsed().as_secs_f64();
    let passages_alone = timeline.passages_at(Instant::now());

    let (answer_seconds_alone, candidates) = timed_ask(&engine, &question, &settings).await?;
    let search_seconds_alone = timed_searches(&engine, &question).await?;

    let timeline = Arc::new(Timeline::default());
    let job = {
        let (engine, timeline) = (engine.clone(), timeline.clone());
        tokio::spawn(async move {
            let job_timeline = timeline.clone();
            engine
                .index_paths(std::slice::from_ref(&beside), move |e| {
                    job_timeline.record(&e)
                })
                .await
        })
    };
    while !timeline.first_file_done() {
        if job.is_finished() {
            bail!("the indexing job ended before its first file");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let asked = Instant::now();
    let (answer_seconds_while_indexing, _) = timed_ask(&engine, &question, &settings).await?;
    let answered = Instant::now();
    let search_seconds_while_indexing = timed_searches(&engine, &question).await?;
    if job.is_finished() {
        bail!(
            "the indexing job ended before the searches beside it did; measure with more --files"
        );
    }
    engine.cancel(&JobKind::Indexing);
    job.await.context("the indexing job")??;
    let passages_while_answering = timeline.passages_at(answered) - timeline.passages_at(asked);

    let report = Report {
        generator,
        files_alone: files,
        seconds_alone,
        passages_per_second_alone: passages_alone as f64 / seconds_alone,
        answer_seconds_alone,
        answer_seconds_while_indexing,
        passages_while_answering,
        passages_per_second_while_answering: passages_while_answering as f64
            / answer_seconds_while_indexing,
        candidates,
        search_seconds_alone,
        search_seconds_while_indexing,
    };
    crate::write_stdout(&format!("{}\n", serde_json::to_string(&report)?))
}
