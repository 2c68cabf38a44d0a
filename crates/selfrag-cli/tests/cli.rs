//! The `selfrag` binary's public contract: index, ask --json (the trace), rerank, export.

// Test code: a failed unwrap is a failed test, at the line that failed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn selfrag(data: &Path, models: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_selfrag"))
        .args(args)
        .env("SELFRAG_DATA_DIR", data)
        .env("SELFRAG_GENERATOR", models.join("tiny.gguf"))
        .env("SELFRAG_EMBEDDER", models.join("tiny-bert"))
        .env("SELFRAG_DEVICE", "cpu")
        .output()
        .unwrap()
}

fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The question both `ask` tests put, always retrieving, trace as JSON.
const ASK_JSON: [&str; 7] = [
    "ask",
    "What are reflection tokens?",
    "--json",
    "--mode",
    "always",
    "--k",
    "2",
];

/// A temporary folder with the tiny models, and a library holding one indexed note; returns
/// the folder, the data folder and the models folder.
fn indexed_library() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let (data, models) = (tmp.path().join("data"), tmp.path().join("models"));
    std::fs::create_dir_all(&models).unwrap();
    selfrag_models::fixtures::write_tiny_llama_gguf(&models.join("tiny.gguf")).unwrap();
    selfrag_models::fixtures::write_tiny_bert(&models.join("tiny-bert")).unwrap();
    let doc = tmp.path().join("notes.md");
    std::fs::write(
        &doc,
        "# Notes\nSelf-RAG critiques its own generations with reflection tokens.\n",
    )
    .unwrap();
    ok(selfrag(&data, &models, &["index", doc.to_str().unwrap()]));
    (tmp, data, models)
}

#[test]
fn index_ask_json_rerank_and_export_round_trip() {
    let (tmp, data, models) = indexed_library();
    let json = ok(selfrag(&data, &models, &ASK_JSON));
    let trace: serde_json::Value = serde_json::from_str(&json).unwrap();
    for key in [
        "question", "settings", "retrieve", "passages", "segments", "answer",
    ] {
        assert!(trace.get(key).is_some(), "trace lacks `{key}`: {json}");
    }
    assert_eq!(trace["settings"]["mode"], "always");
    assert_eq!(trace["retrieve"]["retrieved"], true);
    let candidate = &trace["segments"][0]["candidates"][0];
    for key in [
        "passage", "text", "p_lm", "isrel", "issup", "isuse", "s_rel", "s_sup", "s_use", "score",
    ] {
        assert!(candidate.get(key).is_some(), "candidate lacks `{key}`");
    }
    assert!(candidate["isrel"].get("[Relevant]").is_some());

    let trace_path = tmp.path().join("trace.json");
    std::fs::write(&trace_path, &json).unwrap();
    let reranked = ok(selfrag(
        &data,
        &models,
        &[
            "rerank",
            trace_path.to_str().unwrap(),
            "--w-sup",
            "0",
            "--json",
        ],
    ));
    let reranked: serde_json::Value = serde_json::from_str(&reranked).unwrap();
    assert_eq!(reranked["settings"]["weights"]["sup"], 0.0);

    let md_path = tmp.path().join("answer.md");
    ok(selfrag(
        &data,
        &models,
        &[
            "export",
            trace_path.to_str().unwrap(),
            "--format",
            "md",
            "-o",
            md_path.to_str().unwrap(),
        ],
    ));
    let md = std::fs::read_to_string(&md_path).unwrap();
    assert!(md.starts_with("# What are reflection tokens?"), "{md}");
    assert!(md.contains("[^1]:") && md.contains("notes.md"), "{md}");
}

#[test]
fn a_file_that_is_not_a_trace_is_named_with_the_fix() {
    let tmp = tempfile::tempdir().unwrap();
    let bogus = tmp.path().join("bogus.json");
    std::fs::write(&bogus, "{\"not\": \"a trace\"}").unwrap();
    let out = selfrag(
        tmp.path(),
        tmp.path(),
        &["export", bogus.to_str().unwrap(), "--format", "md"],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bogus.json") && err.contains("selfrag ask --json"),
        "{err}"
    );
}

#[test]
fn models_list_and_path_read_the_hugging_face_cache_layout() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("hub");
    let snapshot = cache.join("models--m4r1--selfrag_llama2_7b-GGUF/snapshots/abc123");
    std::fs::create_dir_all(&snapshot).unwrap();
    let gguf = snapshot.join("selfrag_llama2_7b.q4_k_m.gguf");
    std::fs::write(&gguf, b"GGUF").unwrap();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_selfrag"))
            .args(args)
            .env("HF_HUB_CACHE", &cache)
            .output()
            .unwrap()
    };

    let listing: serde_json::Value =
        serde_json::from_str(&ok(run(&["models", "list", "--json"]))).unwrap();
    let models = listing.as_array().unwrap();
    let by_id = |id: &str| models.iter().find(|m| m["id"] == id).unwrap().clone();
    assert_eq!(by_id("selfrag-7b-q4km")["found"], gguf.to_str().unwrap());
    assert_eq!(by_id("selfrag-7b-q4km")["role"], "generator");
    assert!(by_id("contriever-msmarco")["found"].is_null());

    assert_eq!(
        ok(run(&["models", "path", "selfrag-7b-q4km"])).trim(),
        gguf.to_str().unwrap()
    );
    let missing = run(&["models", "path", "contriever-msmarco"]);
    assert!(!missing.status.success());
    let err = String::from_utf8_lossy(&missing.stderr);
    assert!(
        err.contains(cache.to_str().unwrap())
            && err.contains("huggingface-cli download facebook/contriever-msmarco"),
        "{err}"
    );
    let unknown = run(&["models", "path", "gpt-7"]);
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("selfrag models list"));
}

#[test]
fn ask_through_a_llama_server_gives_the_local_trace() {
    let Some(binary) = selfrag_testkit::llama_server::binary() else {
        return;
    };
    let (tmp, data, models) = indexed_library();
    let server = selfrag_testkit::llama_server::LlamaServer::start(
        &binary,
        &models.join("tiny.gguf"),
        tmp.path(),
        2,
        selfrag_models::fixtures::TINY_LLAMA_CONTEXT,
        &[],
    )
    .unwrap();
    let ask = ASK_JSON;
    let local = ok(selfrag(&data, &models, &ask));
    let mut remote_args = ask.to_vec();
    remote_args.extend(["--generator-url", server.url.as_str()]);
    let remote = ok(selfrag(&data, &models, &remote_args));
    let (mut local, mut remote): (serde_json::Value, serde_json::Value) = (
        serde_json::from_str(&local).unwrap(),
        serde_json::from_str(&remote).unwrap(),
    );
    assert_eq!(remote["retrieve"]["retrieved"], true);
    // The trace says which generator wrote it; everything else is the same.
    assert_eq!(local["generator"]["kind"], "local");
    assert_eq!(remote["generator"]["kind"], "server");
    assert_eq!(remote["generator"]["url"], server.url.as_str());
    local["generator"].take();
    remote["generator"].take();
    selfrag_testkit::assert_same_json(&local, &remote, 1e-3, "trace");

    // A server that is not there: the command fails naming the URL and what to do.
    let gone = format!(
        "http://127.0.0.1:{}",
        selfrag_testkit::llama_server::free_port().unwrap()
    );
    let mut gone_args = ask.to_vec();
    gone_args.extend(["--generator-url", gone.as_str()]);
    let out = selfrag(&data, &models, &gone_args);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&gone) && stderr.contains("Start the server"),
        "{stderr}"
    );
}
