//! A saved generator API key goes to the server it was saved for and nowhere else (issue 44,
//! item 1): not to a connection test of another address, not to a newly chosen server. Each
//! "server" is a real loopback listener that records the requests it receives and refuses them
//! (404, so the app's check stops at once); the engine, its key file and its HTTP client are
//! real.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use selfrag_core::{RetrieveMode, Settings};
use selfrag_engine::{Engine, EngineConfig};

/// A loopback listener that keeps each request's head (lowercased) and answers 404 with a body
/// that must never reach the caller's error.
struct Recorder {
    url: String,
    heads: Arc<Mutex<Vec<String>>>,
}

const SECRET_BODY: &str = "internal-service-secret-4711";

impl Recorder {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
        let heads = Arc::new(Mutex::new(Vec::new()));
        let kept = heads.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut head = String::new();
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    head.push_str(&line.to_ascii_lowercase());
                }
                kept.lock().unwrap().push(head);
                let mut stream = stream;
                let _ = write!(
                    stream,
                    "HTTP/1.1 500 Internal Server Error\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{SECRET_BODY}",
                    SECRET_BODY.len()
                );
            }
        });
        Self { url, heads }
    }

    fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }

    fn sent_key(&self) -> bool {
        self.heads()
            .iter()
            .any(|h| h.contains("authorization: bearer sesame"))
    }
}

fn engine(tmp: &std::path::Path) -> Engine {
    let gguf = tmp.join("tiny.gguf");
    selfrag_fixtures::write_tiny_llama_gguf(&gguf).unwrap();
    let bert = tmp.join("tiny-bert");
    selfrag_fixtures::write_tiny_bert(&bert).unwrap();
    Engine::new(EngineConfig::in_process(tmp.join("data"), gguf, bert)).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_test_of_another_address_gets_no_saved_key_and_no_reply_text() {
    let tmp = tempfile::tempdir().unwrap();
    let engine = engine(tmp.path());
    let saved_for = Recorder::start();
    let elsewhere = Recorder::start();
    engine
        .set_generator_server(Some(saved_for.url.clone()), None, Some("sesame".into()))
        .unwrap();

    let error = engine
        .test_generator_server(format!("{}/v1", elsewhere.url), None, None)
        .await
        .unwrap_err()
        .to_string();
    assert!(!elsewhere.heads().is_empty(), "the test reached no server");
    assert!(
        !elsewhere.sent_key(),
        "the saved key went to another address: {:?}",
        elsewhere.heads()
    );
    assert!(
        !error.contains(SECRET_BODY),
        "the reply's text reached the caller: {error}"
    );

    // The key still goes where it was saved for, under any path there.
    let _ = engine
        .test_generator_server(format!("{}/v1", saved_for.url), None, None)
        .await;
    assert!(saved_for.sent_key(), "{:?}", saved_for.heads());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newly_chosen_server_does_not_inherit_the_old_servers_key() {
    let tmp = tempfile::tempdir().unwrap();
    let engine = engine(tmp.path());
    let old = Recorder::start();
    let new = Recorder::start();
    engine
        .set_generator_server(Some(old.url.clone()), None, Some("sesame".into()))
        .unwrap();
    engine
        .set_generator_server(Some(new.url.clone()), None, None)
        .unwrap();
    let settings = Settings {
        mode: RetrieveMode::Never,
        max_new_tokens: 4,
        ..Settings::default()
    };
    let _ = engine
        .ask("Who runs the model?".into(), settings, |_| {})
        .await;
    assert!(!new.heads().is_empty(), "the answer reached no server");
    assert!(
        !new.sent_key(),
        "the old server's key went to the new one: {:?}",
        new.heads()
    );
}
