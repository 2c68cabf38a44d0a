//! The whole slice through the engine with real components: the tiny GGUF generator and tiny
//! BERT embedder written by selfrag-fixtures, a real LanceDB library in a temp dir.

// Test code: a failed unwrap is a failed test, at the line that failed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use selfrag_core::{RetrieveMode, Settings};
use selfrag_engine::{
    Engine, EngineConfig, ExportFormat, IndexEvent, JobKind, LibraryEvent, ModelRole,
};

struct Fixture {
    _tmp: tempfile::TempDir,
    config: EngineConfig,
    docs: PathBuf,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let models = tmp.path().join("models");
    std::fs::create_dir_all(&models).unwrap();
    let gguf = models.join("tiny.gguf");
    selfrag_fixtures::write_tiny_llama_gguf(&gguf).unwrap();
    let bert = models.join("tiny-bert");
    selfrag_fixtures::write_tiny_bert(&bert).unwrap();
    let docs = tmp.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    let config = EngineConfig::in_process(tmp.path().join("data"), gguf, bert);
    Fixture {
        _tmp: tmp,
        config,
        docs,
    }
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn always() -> Settings {
    Settings {
        mode: RetrieveMode::Always,
        k: 3,
        max_new_tokens: 24,
        ..Settings::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn index_ask_rerank_export_with_real_models_and_lancedb() {
    let f = fixture();
    write(
        &f.docs,
        "a.md",
        "# Self-RAG\nSelf-RAG retrieves passages on demand. It critiques its output.\n",
    );
    write(
        &f.docs,
        "b.txt",
        "Contriever embeds text with mean pooling. The dot product ranks passages.",
    );
    write(&f.docs, "c.pdfx", "not a supported format");
    let engine = Engine::new(f.config.clone()).unwrap();

    let events = std::sync::Mutex::new(Vec::new());
    let finished = engine
        .index_paths(std::slice::from_ref(&f.docs), |e| {
            events.lock().unwrap().push(e)
        })
        .await
        .unwrap();
    assert_eq!(
        finished,
        IndexEvent::Finished {
            indexed: 2,
            skipped: 1,
            failed: 0,
            removed: 0,
            cancelled: false,
            paused: false,
        }
    );
    let events = events.into_inner().unwrap();
    assert_eq!(
        events.first(),
        Some(&IndexEvent::Started {
            total: 3,
            resumed: Vec::new()
        })
    );
    assert!(events.iter().any(|e| matches!(
        e,
        IndexEvent::Progress { done: 3, total: 3, eta_seconds: Some(eta), .. } if *eta == 0.0
    )));
    assert!(
        events
            .iter()
            .any(|e| matches!(e, IndexEvent::FileSkipped { path, .. } if path.ends_with("c.pdfx")))
    );
    let docs = engine.documents().await.unwrap();
    assert_eq!(
        docs.iter().map(|d| d.title.as_str()).collect::<Vec<_>>(),
        ["b", "Self-RAG"]
    );

    let progress = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = progress.clone();
    let record = engine
        .ask(
            "How does Self-RAG decide to retrieve?".into(),
            always(),
            move |p| sink.lock().unwrap().push(p),
        )
        .await
        .unwrap();
    let answer = &record.answer;
    assert!(answer.retrieve.retrieved);
    assert_eq!(answer.passages.len(), 3.min(answer.passages.len()));
    assert!(!answer.passages.is_empty());
    let segment = &answer.segments[0];
    assert_eq!(
        segment.candidates.len(),
        answer.passages.len(),
        "one candidate per passage"
    );
    assert_eq!(segment.citation, Some(1));
    assert!(answer.answer.contains("[1]"), "{}", answer.answer);
    for token in selfrag_core::REFLECTION_TOKENS {
        assert!(
            !answer.answer.contains(token),
            "{token} leaked into {}",
            answer.answer
        );
    }
    assert!(
        !progress.lock().unwrap().is_empty(),
        "progress was streamed"
    );
    // Where the time went: the first answer loaded the generator; the local generator tells
    // reading the prompts from decoding; the steps fit in the whole.
    let t = answer.timings.expect("a run records its timings");
    let (prefill, decode) = (t.prefill_seconds.unwrap(), t.decode_seconds.unwrap());
    assert!(
        t.load_seconds > 0.0 && t.decide_seconds > 0.0 && t.search_seconds > 0.0,
        "{t:?}"
    );
    assert!(
        prefill > 0.0 && decode > 0.0 && prefill + decode <= t.generate_seconds,
        "{t:?}"
    );
    let steps = t.decide_seconds + t.search_seconds + t.generate_seconds + t.critique_seconds;
    assert!(steps <= t.answer_seconds, "{t:?}");
    let second = engine
        .ask("And how does it critique?".into(), always(), |_| {})
        .await
        .unwrap();
    let t2 = second.answer.timings.unwrap();
    assert_eq!(t2.load_seconds, 0.0, "loaded again: {t2:?} after {t:?}");

    // Re-rank with no model call: the weights are stored in the returned trace.
    let reranked = engine
        .rerank(
            &record.id,
            selfrag_core::CritiqueWeights {
                rel: 0.0,
                sup: 2.0,
                use_: 0.0,
            },
            false,
        )
        .unwrap();
    assert_eq!(reranked.answer.settings.weights.sup, 2.0);

    let out = f.config.data_dir.join("export/answer.md");
    engine.export(&record.id, ExportFormat::Md, &out).unwrap();
    let md = std::fs::read_to_string(&out).unwrap();
    assert!(md.starts_with("# How does Self-RAG decide to retrieve?"));
    assert!(md.contains("[^1]:"), "{md}");
    let cited = &reranked.answer.passages[0];
    assert!(md.contains(cited.text.lines().next().unwrap()), "{md}");

    // The answer survives a restart of the engine (history on disk).
    drop(engine);
    let engine = Engine::new(f.config.clone()).unwrap();
    let again = engine
        .rerank(&record.id, selfrag_core::CritiqueWeights::default(), false)
        .unwrap();
    assert_eq!(
        again.answer.question,
        "How does Self-RAG decide to retrieve?"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_models_status_says_where_it_looked_and_ask_says_what_to_do() {
    let tmp = tempfile::tempdir().unwrap();
    let config = EngineConfig {
        data_dir: tmp.path().join("data"),
        library: None,
        generator: Some(tmp.path().join("nowhere.gguf")),
        embedder: Some(tmp.path().join("no-bert")),
        device: selfrag_engine::DeviceChoice::Cpu,
        embedder_precision: Default::default(),
        generator_numerics: Default::default(),
        extract_worker: None,
        generator_server: None,
        embedder_server: None,
        shared_source_limit: selfrag_engine::DEFAULT_SHARED_SOURCE_LIMIT,
    };
    let engine = Engine::new(config).unwrap();
    let status = engine.status().await;
    assert_eq!(status.models.len(), 2);
    for m in &status.models {
        assert!(!m.found);
        assert!(!m.searched.is_empty());
        assert!(m.fix.contains("huggingface-cli download"), "{}", m.fix);
    }
    assert_eq!(status.models[0].role, ModelRole::Generator);
    let err = engine
        .ask("why?".into(), always(), |_| {})
        .await
        .unwrap_err();
    assert_eq!(err.code(), selfrag_engine::ErrorCode::ModelMissing, "{err}");
    assert!(
        engine.documents().await.unwrap().is_empty(),
        "no embedder: an empty library, not an error"
    );
    let err = engine
        .index_paths(&[tmp.path().to_path_buf()], |_| {})
        .await
        .unwrap_err();
    assert_eq!(err.code(), selfrag_engine::ErrorCode::ModelMissing, "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_question_ends_with_the_cancelled_code_and_leaves_no_job() {
    let f = fixture();
    let engine = Arc::new(Engine::new(f.config.clone()).unwrap());
    let stopper = engine.clone();
    let err = engine
        .ask("anything".into(), always(), move |_| {
            stopper.cancel(&JobKind::Answer);
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), selfrag_engine::ErrorCode::Cancelled);
    assert!(engine.running_jobs().is_empty());
    assert!(!engine.cancel(&JobKind::Answer), "nothing left to stop");
}

/// A job whose future is dropped half-way (a closed window, a timeout) leaves neither its entry
/// nor the indexing lock behind: the next job runs, and Stop has nothing stale to hit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_indexing_job_dropped_half_way_leaves_nothing_behind() {
    let f = fixture();
    for i in 0..40 {
        write(
            &f.docs,
            &format!("note-{i}.md"),
            &format!("# Note {i}\nOtters number {i} hold hands while sleeping."),
        );
    }
    let engine = Engine::new(f.config.clone()).unwrap();
    let first_file = tokio::sync::Notify::new();
    let dropped = tokio::select! {
        _ = engine.index_paths(std::slice::from_ref(&f.docs), |e| {
            if matches!(e, IndexEvent::FileIndexed { .. }) {
                first_file.notify_one();
            }
        }) => false,
        () = first_file.notified() => true,
    };
    assert!(dropped, "the job ended before its first file was indexed");
    assert!(
        engine.running_jobs().is_empty(),
        "{:?}",
        engine.running_jobs()
    );
    assert!(!engine.cancel(&JobKind::Indexing));
    let finished = tokio::time::timeout(
        std::time::Duration::from_secs(120),
        engine.index_paths(std::slice::from_ref(&f.docs), |_| {}),
    )
    .await
    .expect("the next job waited for a lock nobody holds")
    .unwrap();
    assert!(
        matches!(
            finished,
            IndexEvent::Finished {
                failed: 0,
                cancelled: false,
                ..
            }
        ),
        "{finished:?}"
    );
}

/// Pause stops a job as Stop does but keeps it: a restarted engine's background work does not
/// take it up, Resume finishes it (the files done before are only checked), and a second
/// Resume says nothing is paused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_job_survives_a_restart_and_resume_finishes_it() {
    let f = fixture();
    // Each note longer than the small files a job commits together (16 passages), so that
    // the job writes them one by one and a pause falls between two of them.
    let body: String = (0..1_500).map(|w| format!("stream{} ", w % 89)).collect();
    for i in 0..30 {
        write(
            &f.docs,
            &format!("note-{i}.md"),
            &format!("# Note {i}\nBeavers number {i} build dams across streams.\n\n{body}"),
        );
    }
    let engine = Engine::new(f.config.clone()).unwrap();
    let paused = engine
        .index_paths(std::slice::from_ref(&f.docs), |e| {
            if matches!(e, IndexEvent::Progress { done: 10, .. }) {
                assert!(engine.pause_indexing(), "the job runs");
            }
        })
        .await
        .unwrap();
    let IndexEvent::Finished {
        indexed,
        skipped: 0,
        failed: 0,
        cancelled: true,
        paused: true,
        ..
    } = paused
    else {
        panic!("not paused: {paused:?}");
    };
    // The job runs as a task of its own and its events reach this callback through a channel,
    // so it may finish the file after the tenth before it sees the pause (issue 50).
    assert!(
        (10..=12).contains(&indexed),
        "paused within a file or two: {indexed}"
    );
    assert_eq!(
        engine.paused_indexing().await.unwrap(),
        vec![f.docs.clone()]
    );
    assert!(engine.running_jobs().is_empty());
    drop(engine);

    let engine = Engine::new(f.config.clone()).unwrap();
    let background = std::sync::Mutex::new(Vec::new());
    let _ = tokio::time::timeout(
        std::time::Duration::from_secs(3),
        engine.keep_library_in_sync(|e| background.lock().unwrap().push(e)),
    )
    .await;
    assert!(
        background.lock().unwrap().is_empty(),
        "the restarted engine took up the paused job: {:?}",
        background.lock().unwrap()
    );
    assert_eq!(engine.documents().await.unwrap().len(), 10);

    let resumed = engine.resume_indexing(|_| {}).await.unwrap();
    assert_eq!(
        resumed,
        IndexEvent::Finished {
            indexed: 20,
            skipped: 10,
            failed: 0,
            removed: 0,
            cancelled: false,
            paused: false,
        }
    );
    assert_eq!(engine.documents().await.unwrap().len(), 30);
    assert!(engine.paused_indexing().await.unwrap().is_empty());
    let again = engine.resume_indexing(|_| {}).await.unwrap_err();
    assert_eq!(again.code(), selfrag_engine::ErrorCode::NothingPaused);

    // A re-index is stopped by Pause, never paused: its document, removed first, would be out
    // of the library while it waited.
    let note = f.docs.join("note-3.md");
    let stopped = engine
        .reindex_document(&note, |e| {
            if matches!(e, IndexEvent::FileStarted { .. }) {
                assert!(engine.pause_indexing());
            }
        })
        .await
        .unwrap();
    assert!(
        matches!(
            stopped,
            IndexEvent::Finished {
                cancelled: true,
                paused: false,
                ..
            }
        ),
        "{stopped:?}"
    );
    assert!(engine.paused_indexing().await.unwrap().is_empty());
}

/// Cancelling while the candidates are being decoded stops the batch within its forward pass
/// (not after the batch), reports the run as cancelled, and leaves the model thread
/// ready for the next question.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_cancelled_while_its_candidates_decode_ends_cancelled_and_the_next_one_runs() {
    let f = fixture();
    let engine = Arc::new(Engine::new(f.config.clone()).unwrap());
    let stopper = engine.clone();
    let err = engine
        .ask(
            "Who is the president of France?".into(),
            always(),
            move |progress| {
                if matches!(progress, selfrag_core::Progress::CandidatesStarted { .. }) {
                    stopper.cancel(&JobKind::Answer);
                }
            },
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), selfrag_engine::ErrorCode::Cancelled, "{err}");
    let record = engine
        .ask("Who is the president of France?".into(), always(), |_| {})
        .await
        .unwrap();
    assert!(!record.answer.segments.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_form_beam_search_runs_on_the_real_models_and_cites_consistently() {
    let f = fixture();
    write(
        &f.docs,
        "a.md",
        "# Self-RAG\nSelf-RAG retrieves passages on demand. It critiques its output.\n",
    );
    write(
        &f.docs,
        "b.txt",
        "Contriever embeds text with mean pooling. The dot product ranks passages.",
    );
    let engine = Engine::new(f.config.clone()).unwrap();
    engine
        .index_paths(std::slice::from_ref(&f.docs), |_| {})
        .await
        .unwrap();
    let settings = Settings {
        long_form: true,
        beam_width: 2,
        max_segments: 3,
        max_segment_tokens: 16,
        ..always()
    };
    let record = engine
        .ask("Explain Self-RAG.".into(), settings, |_| {})
        .await
        .unwrap();
    let answer = &record.answer;
    assert!(answer.settings.long_form);
    assert!(!answer.segments.is_empty() && answer.segments.len() <= 3);
    for (i, segment) in answer.segments.iter().enumerate() {
        assert!(
            !segment.candidates.is_empty(),
            "segment {i} kept its candidates"
        );
        assert!(segment.chosen < segment.candidates.len());
        if let Some(n) = segment.citation {
            assert!(
                (1..=answer.passages.len()).contains(&n),
                "segment {i} cites [{n}]"
            );
            assert!(answer.answer.contains(&format!("[{n}]")));
        }
        for token in selfrag_core::REFLECTION_TOKENS {
            assert!(
                !segment.text.contains(token),
                "{token} in segment {i}: {}",
                segment.text
            );
        }
    }
    assert!(!answer.answer.contains("[Continue to Use Evidence]"));
    assert!(
        !answer.expansions.is_empty(),
        "the trace keeps the search tree"
    );
    // Re-ranking a long-form answer replays the beam search over that tree, never calls the
    // model, and is a view: the answer as generated is kept, on disk too, and its own weights
    // show it again byte for byte.
    let weights = selfrag_core::CritiqueWeights {
        rel: 0.0,
        sup: 0.0,
        use_: 3.0,
    };
    let reranked = engine.rerank(&record.id, weights, true).unwrap();
    assert!(!reranked.answer.segments.is_empty());
    assert_eq!(reranked.answer.settings.weights, weights);
    if let Some(segment) = reranked.unexplored_segment {
        assert!((1..3).contains(&segment), "{segment}");
    }
    drop(engine);
    let engine = Engine::new(f.config.clone()).unwrap();
    assert_eq!(engine.answer(&record.id).unwrap(), reranked);
    let back = engine
        .rerank(
            &record.id,
            answer.settings.weights,
            answer.settings.hard_constraints,
        )
        .unwrap();
    assert_eq!(
        serde_json::to_string(&back.answer).unwrap(),
        serde_json::to_string(answer).unwrap()
    );
    assert_eq!(back.unexplored_segment, None);
}

/// A batch of watched changes that fails as a whole (here the library's passage table is
/// moved away, as when its disk goes missing) is reported and tried again until it applies;
/// watching does not end on it (it did: the rest of the session saw no change).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_batch_of_watched_changes_is_reported_and_tried_again() {
    let f = fixture();
    let kept = write(
        &f.docs,
        "kept.md",
        "# Kept\nOtters hold hands while sleeping.",
    );
    let doomed = write(
        &f.docs,
        "doomed.md",
        "# Doomed\nPenguins swim in cold water.",
    );
    let engine = Arc::new(Engine::new(f.config.clone()).unwrap());
    engine.set_watched(&f.docs, true).await.unwrap();
    let events = Arc::new(std::sync::Mutex::new(Vec::<IndexEvent>::new()));
    let watching = {
        let (engine, events) = (engine.clone(), events.clone());
        tokio::spawn(async move {
            engine
                .keep_library_in_sync(move |e| match e {
                    LibraryEvent::Index { event, .. } => events.lock().unwrap().push(event),
                    LibraryEvent::Failed { message, .. } => panic!("watching stopped: {message}"),
                    LibraryEvent::ChangedElsewhere { .. } => {}
                })
                .await
        })
    };
    let wait_for = |what: &'static str, found: fn(&IndexEvent) -> bool| {
        let events = events.clone();
        async move {
            let started = std::time::Instant::now();
            while !events.lock().unwrap().iter().any(found) {
                assert!(
                    started.elapsed() < std::time::Duration::from_secs(30),
                    "no {what}: {:?}",
                    events.lock().unwrap()
                );
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    };
    wait_for("catch-up", |e| matches!(e, IndexEvent::Finished { .. })).await;

    let table = f.config.library_state_dir().join("passages.lance");
    let away = f.config.library_state_dir().join("passages.lance.away");
    std::fs::rename(&table, &away).unwrap();
    std::fs::remove_file(&doomed).unwrap();
    wait_for("retry notice", |e| {
        matches!(e, IndexEvent::WatchRetrying { .. })
    })
    .await;
    std::fs::rename(&away, &table).unwrap();
    // Watching goes on: a file written after the failure is indexed.
    let later = write(
        &f.docs,
        "later.md",
        "# Later
Seals sleep on ice floes.",
    );
    wait_for(
        "the later file",
        |e| matches!(e, IndexEvent::FileIndexed { path, .. } if path.ends_with("later.md")),
    )
    .await;

    assert!(!watching.is_finished(), "the background work ended");
    watching.abort();
    let mut paths: Vec<String> = engine
        .documents()
        .await
        .unwrap()
        .into_iter()
        .map(|d| d.path)
        .collect();
    paths.sort();
    assert_eq!(
        paths,
        [kept.display().to_string(), later.display().to_string()]
    );
    let notice = events
        .lock()
        .unwrap()
        .iter()
        .find_map(|e| match e {
            IndexEvent::WatchRetrying {
                error,
                retry_in_seconds,
            } => Some((error.clone(), *retry_in_seconds)),
            _ => None,
        })
        .unwrap();
    assert_eq!(notice.1, 1.0);
    assert!(!notice.0.is_empty());
}

/// Issue 44: Re-index ran a job with the document's path as its own root, where a link was
/// followed as one the user named: an indexed `notes.txt` swapped for a link to a file outside
/// was read through it. It is refused now with an error that names it, and the document stays
/// as it was; a link inside a watched folder still re-indexes, the folder being its bound.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_document_swapped_for_a_link_outside_is_refused_on_reindex_naming_it() {
    let f = fixture();
    let secret = f.docs.parent().unwrap().join("home/.ssh/id_rsa.txt");
    std::fs::create_dir_all(secret.parent().unwrap()).unwrap();
    std::fs::write(&secret, "BEGIN OPENSSH PRIVATE KEY zebrasecret").unwrap();
    let notes = write(&f.docs, "notes.txt", "Otters hold hands while sleeping.");
    let engine = Engine::new(f.config.clone()).unwrap();
    engine
        .index_paths(std::slice::from_ref(&notes), |_| {})
        .await
        .unwrap();
    let before = engine.documents().await.unwrap();
    assert_eq!(before.len(), 1);

    std::fs::rename(&notes, f.docs.join("notes.old")).unwrap();
    std::os::unix::fs::symlink(&secret, &notes).unwrap();
    let err = engine.reindex_document(&notes, |_| {}).await.unwrap_err();
    assert_eq!(err.code(), selfrag_engine::ErrorCode::Index);
    let message = err.to_string();
    assert!(
        message.contains(&notes.display().to_string()) && message.contains("outside"),
        "{message}"
    );
    let after = engine.documents().await.unwrap();
    assert_eq!(
        after.iter().map(|d| (&d.id, &d.path)).collect::<Vec<_>>(),
        before.iter().map(|d| (&d.id, &d.path)).collect::<Vec<_>>()
    );

    // A link whose target lies inside the watched folder that holds it is still followed.
    let real = write(&f.docs, "real.txt", "Seals sleep on ice floes.");
    let again = f.docs.join("again.txt");
    std::os::unix::fs::symlink(&real, &again).unwrap();
    engine.set_watched(&f.docs, true).await.unwrap();
    engine
        .index_paths(std::slice::from_ref(&f.docs), |_| {})
        .await
        .unwrap();
    assert!(
        engine
            .documents()
            .await
            .unwrap()
            .iter()
            .any(|d| d.path == again.display().to_string())
    );
    let reindexed = engine.reindex_document(&again, |_| {}).await.unwrap();
    assert!(
        matches!(reindexed, IndexEvent::Finished { failed: 0, .. }),
        "{reindexed:?}"
    );
    assert!(
        engine
            .documents()
            .await
            .unwrap()
            .iter()
            .any(|d| d.path == again.display().to_string())
    );
}

/// Issue 50: a job stuck on one file said nothing (the progress froze, the log was silent) and
/// Stop waited for the parser's 60 s time limit. With a parsing worker that never answers (a
/// real process that sleeps), the job now reports the step that lasts, naming the file and the
/// step, and Stop ends the job at once and kills the worker.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_step_is_reported_with_its_file_and_stop_ends_it_killing_the_worker() {
    use std::os::unix::fs::PermissionsExt;
    let mut f = fixture();
    let pid_file = f.docs.parent().unwrap().join("worker.pid");
    let worker = f.docs.parent().unwrap().join("silent-worker.sh");
    std::fs::write(
        &worker,
        format!(
            "#!/bin/sh\necho $$ > '{}'\nexec sleep 300\n",
            pid_file.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&worker, std::fs::Permissions::from_mode(0o755)).unwrap();
    f.config.extract_worker = Some(worker);
    let stuck = write(&f.docs, "stuck.md", "# Stuck\nThe parser never answers.\n");
    let engine = Arc::new(Engine::new(f.config.clone()).unwrap());
    engine.set_slow_step_notice(std::time::Duration::from_millis(600));

    let (events, mut received) = tokio::sync::mpsc::unbounded_channel();
    let job = {
        let (engine, docs) = (engine.clone(), f.docs.clone());
        tokio::spawn(async move {
            engine
                .index_paths(&[docs], |e| {
                    let _ = events.send(e);
                })
                .await
        })
    };
    let slow = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        while let Some(event) = received.recv().await {
            if let IndexEvent::SlowStep { .. } = event {
                return event;
            }
        }
        panic!("the job ended without reporting its stuck step");
    })
    .await
    .expect("no slow-step notice within 30 s");
    let IndexEvent::SlowStep {
        path,
        step,
        seconds,
    } = slow
    else {
        unreachable!()
    };
    assert_eq!(path.as_deref(), Some(stuck.to_str().unwrap()));
    assert_eq!(step, "parsing in the worker process");
    assert!(seconds < 5, "{seconds}");
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(Path::new(&format!("/proc/{pid}")).exists());

    let stopped_at = std::time::Instant::now();
    assert!(engine.cancel(&JobKind::Indexing));
    let finished = tokio::time::timeout(std::time::Duration::from_secs(5), job)
        .await
        .expect("Stop did not end a job stuck in its parser within 5 s")
        .unwrap()
        .unwrap();
    assert!(
        matches!(
            finished,
            IndexEvent::Finished {
                cancelled: true,
                indexed: 0,
                ..
            }
        ),
        "{finished:?}"
    );
    // The worker is killed, not left to sleep out its time limit.
    let gone = (0..50).any(|_| {
        let status = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // Gone, or a zombie (state Z) waiting for its parent's wait.
        if status.is_empty()
            || status
                .split(") ")
                .nth(1)
                .is_some_and(|s| s.starts_with('Z'))
        {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        false
    });
    assert!(gone, "the stuck worker {pid} still runs after Stop");
    assert!(stopped_at.elapsed() < std::time::Duration::from_secs(5));
}

/// Issue 47, items 6 and 7: every answer's trace states the numerics it ran on (the local
/// generator's KV cache and dummy prefix, the embedder of its query), and exact numbers and the
/// reference code's dummy prefix, chosen between two questions, are what the next one records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_trace_states_its_numerics_and_a_new_choice_holds_for_the_next_answer() {
    use selfrag_core::{CachePrecision, DummyPrefix, EmbedderPrecision};

    let f = fixture();
    write(
        &f.docs,
        "a.md",
        "# Self-RAG\nSelf-RAG retrieves passages on demand. It critiques its output.\n",
    );
    let engine = Engine::new(f.config.clone()).unwrap();
    engine
        .index_paths(std::slice::from_ref(&f.docs), |_| {})
        .await
        .unwrap();
    let ask = || engine.ask("How does Self-RAG retrieve?".into(), always(), |_| {});

    let default = ask().await.unwrap().answer;
    let generator = default.generator.clone().unwrap();
    let default_cache = selfrag_models::default_cache_precision(&selfrag_models::Device::Cpu);
    // The tiny model's heads are not whole 8-bit blocks: where 8 bits are the default it keeps
    // f16 (`precision_for_head`), and f32 where f32 is.
    let expected = match default_cache {
        CachePrecision::F32 => CachePrecision::F32,
        _ => CachePrecision::F16,
    };
    assert_eq!(generator.cache_precision, Some(expected));
    assert_eq!(generator.dummy_prefix, Some(DummyPrefix::TextStart));
    let embedder = default.embedder.clone().expect("the query's embedder");
    assert!(embedder.model.ends_with("tiny-bert"), "{embedder:?}");
    let int8_in_force = if selfrag_models::int8_embedder_available() {
        EmbedderPrecision::Int8
    } else {
        EmbedderPrecision::F32
    };
    assert_eq!(embedder.precision, int8_in_force);
    assert_eq!(embedder.device, selfrag_engine::DeviceKind::Cpu);

    engine.set_generator_numerics(selfrag_engine::GeneratorNumerics {
        cache_precision: Some(CachePrecision::F32),
        dummy_prefix: DummyPrefix::EveryFragment,
    });
    engine
        .set_embedder_precision(EmbedderPrecision::F32)
        .unwrap();
    let exact = ask().await.unwrap().answer;
    let generator = exact.generator.clone().unwrap();
    assert_eq!(generator.cache_precision, Some(CachePrecision::F32));
    assert_eq!(generator.dummy_prefix, Some(DummyPrefix::EveryFragment));
    assert_eq!(
        exact.embedder.as_ref().unwrap().precision,
        EmbedderPrecision::F32
    );
    let status = engine.device_status();
    assert_eq!(status.cache_precision, Some(CachePrecision::F32));
    assert_eq!(status.dummy_prefix, DummyPrefix::EveryFragment);
    // The exports say it too.
    let line = selfrag_engine::export::provenance(&exact).unwrap();
    assert!(
        line.contains("KV cache f32")
            && line.contains("space prefix after special tokens")
            && line.ends_with("embedder f32"),
        "{line}"
    );

    // Back to the defaults: the device's cache again.
    engine.set_generator_numerics(selfrag_engine::GeneratorNumerics::default());
    let again = ask().await.unwrap().answer.generator.unwrap();
    assert_eq!(again.cache_precision, Some(expected));
    assert_eq!(again.dummy_prefix, Some(DummyPrefix::TextStart));
}
