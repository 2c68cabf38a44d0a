//! Exports, history and the device switch through the engine with real components: the tiny
//! GGUF generator and BERT embedder from selfrag-fixtures and a LanceDB library.

// Test code: a failed unwrap is a failed test, at the line that failed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use selfrag_core::{RetrieveMode, Settings};
use selfrag_engine::{
    DeviceChoice, Engine, EngineConfig, EngineError, ExportFormat, ExportOptions,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_every_format_search_reopen_delete_and_switch_device() {
    let tmp = tempfile::tempdir().unwrap();
    let gguf = tmp.path().join("tiny.gguf");
    selfrag_fixtures::write_tiny_llama_gguf(&gguf).unwrap();
    let bert = tmp.path().join("tiny-bert");
    selfrag_fixtures::write_tiny_bert(&bert).unwrap();
    let docs = tmp.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(
        docs.join("notes.md"),
        "# Notes <script>alert(1)</script>\nSelf-RAG critiques its output <img src=x onerror=alert(1)>.\n",
    )
    .unwrap();
    let config = EngineConfig::in_process(tmp.path().join("data"), gguf, bert);
    let engine = Engine::new(config.clone()).unwrap();
    engine.index_paths(&[docs], |_| {}).await.unwrap();
    let settings = Settings {
        mode: RetrieveMode::Always,
        k: 2,
        max_new_tokens: 16,
        ..Settings::default()
    };
    let mut ids = Vec::new();
    for question in ["How does Self-RAG critique?", "What is a zebra?"] {
        let record = engine
            .ask(question.into(), settings.clone(), |_| {})
            .await
            .unwrap();
        ids.push(record.id);
    }
    assert_eq!(
        engine.device_status().in_use,
        Some(selfrag_engine::DeviceKind::Cpu)
    );

    // Every format, written atomically and identical to what the clipboard gets.
    let out = tmp.path().join("out");
    for format in ExportFormat::ALL {
        let options = ExportOptions {
            format,
            support_labels: true,
            only_supported: false,
            ..ExportOptions::default()
        };
        let path = out.join(format!("answer.{}", format.extension()));
        engine.export(&ids[0], options, &path).unwrap();
        let written = std::fs::read_to_string(&path).unwrap();
        assert_eq!(written, engine.render(&ids[0], options).unwrap());
        match format {
            ExportFormat::Md => assert!(written.starts_with("# How does Self-RAG critique?")),
            ExportFormat::Html => {
                assert!(!written.contains("<script") && !written.contains("<img"));
                assert!(written.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
            }
            ExportFormat::Json => {
                let trace: selfrag_core::Answer = serde_json::from_str(&written).unwrap();
                assert_eq!(trace, engine.answer(&ids[0]).unwrap().answer);
            }
            // The cited note as a work: its key from its title, its file, the answer's use.
            ExportFormat::Bib => assert!(written.contains("note = {Cited as [1]")),
            ExportFormat::Biblatex => assert!(written.contains("addendum = {Cited as [1]")),
            ExportFormat::CslJson => {
                let items: serde_json::Value = serde_json::from_str(&written).unwrap();
                assert!(items.as_array().is_some_and(|a| !a.is_empty()), "{written}");
            }
            ExportFormat::Ris => assert!(written.starts_with("TY  - ")),
            ExportFormat::Latex => assert!(written.contains("\\cite")),
        }
    }

    // History: newest first, searchable, survives a restart, deletable.
    drop(engine);
    let engine = Engine::new(config).unwrap();
    let listed: Vec<String> = engine
        .history("")
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(listed, [ids[1].clone(), ids[0].clone()]);
    let found = engine.history("ZEBRA").unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].question, "What is a zebra?");
    let reopened = engine.answer(&ids[1]).unwrap();
    assert_eq!(reopened.answer.question, "What is a zebra?");
    engine.delete_answer(&ids[1]).unwrap();
    assert!(engine.history("zebra").unwrap().is_empty());
    assert!(matches!(
        engine.answer(&ids[1]),
        Err(EngineError::UnknownAnswer(_))
    ));

    // A new device: the models are dropped now and load again on the next request.
    assert_eq!(engine.device_status().chosen, DeviceChoice::Cpu);
    engine.set_device(DeviceChoice::Auto).unwrap();
    let status = engine.device_status();
    assert_eq!(status.chosen, DeviceChoice::Auto);
    assert!(
        status
            .available
            .starts_with(&[DeviceChoice::Auto, DeviceChoice::Cpu])
    );
    engine.ask("Again?".into(), settings, |_| {}).await.unwrap();
    assert!(engine.device_status().in_use.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_that_cannot_be_saved_is_returned_and_kept_with_why() {
    let tmp = tempfile::tempdir().unwrap();
    let gguf = tmp.path().join("tiny.gguf");
    selfrag_fixtures::write_tiny_llama_gguf(&gguf).unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    // The history folder's place is taken by a file: every save fails, as on a full or
    // read-only disk, whatever the user running the test may write.
    std::fs::write(data.join("history"), "not a folder").unwrap();
    let engine = Engine::new(EngineConfig {
        data_dir: data.clone(),
        library: None,
        generator: Some(gguf),
        embedder: None,
        device: selfrag_engine::DeviceChoice::Cpu,
        embedder_precision: Default::default(),
        generator_numerics: Default::default(),
        extract_worker: None,
        generator_server: None,
        embedder_server: None,
        shared_source_limit: selfrag_engine::DEFAULT_SHARED_SOURCE_LIMIT,
    })
    .unwrap();
    let settings = Settings {
        mode: RetrieveMode::Never,
        max_new_tokens: 16,
        ..Settings::default()
    };
    let record = engine
        .ask("What is Self-RAG?".into(), settings, |_| {})
        .await
        .expect("the answer comes back although it cannot be saved");
    let why = record.not_saved.clone().expect("it says it was not saved");
    assert!(
        why.contains("history") && why.contains("export it"),
        "{why}"
    );
    assert!(!record.answer.segments.is_empty());
    // Kept for the session: it can be re-ranked and exported.
    let again = engine.answer(&record.id).unwrap();
    assert_eq!(again.answer, record.answer);
    let reranked = engine
        .rerank(&record.id, selfrag_core::CritiqueWeights::default(), false)
        .unwrap();
    assert!(reranked.not_saved.is_some());
    let out = tmp.path().join("answer.md");
    engine.export(&record.id, ExportFormat::Md, &out).unwrap();
    assert!(
        std::fs::read_to_string(&out)
            .unwrap()
            .contains("What is Self-RAG?")
    );
}

/// The sample documents are written once into the data folder (an unchanged sample keeps its
/// file, so a second write leaves indexing nothing to do), indexed like any folder, and a
/// first question about the badges finds the tour.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sample_documents_are_written_into_the_data_folder_and_indexed() {
    let tmp = tempfile::tempdir().unwrap();
    let gguf = tmp.path().join("tiny.gguf");
    selfrag_fixtures::write_tiny_llama_gguf(&gguf).unwrap();
    let bert = tmp.path().join("tiny-bert");
    selfrag_fixtures::write_tiny_bert(&bert).unwrap();
    let engine = Engine::new(EngineConfig {
        data_dir: tmp.path().join("data"),
        library: None,
        generator: Some(gguf),
        embedder: Some(bert),
        device: DeviceChoice::Cpu,
        embedder_precision: Default::default(),
        generator_numerics: Default::default(),
        extract_worker: None,
        generator_server: None,
        embedder_server: None,
        shared_source_limit: selfrag_engine::DEFAULT_SHARED_SOURCE_LIMIT,
    })
    .unwrap();

    let folder = engine.write_sample_documents().unwrap();
    assert_eq!(folder, tmp.path().join("data").join("samples"));
    let written = |name: &str| {
        std::fs::metadata(folder.join(name))
            .unwrap()
            .modified()
            .unwrap()
    };
    let first = written("reading-the-badges.md");
    let finished = engine
        .index_paths(std::slice::from_ref(&folder), |_| {})
        .await
        .unwrap();
    assert!(
        matches!(
            finished,
            selfrag_engine::IndexEvent::Finished {
                indexed: 3,
                failed: 0,
                ..
            }
        ),
        "{finished:?}"
    );

    // Written again: the same files, so nothing to index.
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(engine.write_sample_documents().unwrap(), folder);
    assert_eq!(written("reading-the-badges.md"), first);
    let again = engine
        .index_paths(std::slice::from_ref(&folder), |_| {})
        .await
        .unwrap();
    assert!(
        matches!(
            again,
            selfrag_engine::IndexEvent::Finished {
                indexed: 0,
                skipped: 3,
                ..
            }
        ),
        "{again:?}"
    );

    let titles: Vec<String> = engine
        .documents()
        .await
        .unwrap()
        .into_iter()
        .map(|d| d.title)
        .collect();
    assert_eq!(
        titles.len(),
        selfrag_engine::SAMPLE_DOCUMENTS.len(),
        "{titles:?}"
    );
    assert!(
        titles
            .iter()
            .any(|t| t == "Reading the badges: a short tour of the reflection tokens"),
        "{titles:?}"
    );
    let hits = engine
        .search(selfrag_engine::SearchQuery {
            text: "IsSup Fully supported".into(),
            k: 1,
            mode: selfrag_engine::SearchMode::Fts,
            filter: Default::default(),
        })
        .await
        .unwrap();
    assert!(hits[0].path.ends_with("reading-the-badges.md"), "{hits:?}");
}
