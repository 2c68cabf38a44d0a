//! Answering through a real llama-server does not hold the model thread: while the server is
//! writing the candidates, an indexing job embeds and finishes. A loopback relay in front of
//! the server holds back the replies to `/completion` until the test lets them through, so the
//! answer is in flight for exactly as long as the test needs; everything else (the server, the
//! models, LanceDB) is real.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use selfrag_core::{GeneratorKind, RetrieveMode, Settings};
use selfrag_engine::{Engine, EngineConfig, IndexEvent};
use selfrag_testkit::llama_server::{self, LlamaServer};

/// Relays loopback connections to `upstream`; replies to a `POST /completion` wait until the
/// gate opens. Counts the requests held.
struct Relay {
    port: u16,
    held: Arc<AtomicUsize>,
    gate: Arc<(Mutex<bool>, Condvar)>,
}

impl Relay {
    fn start(upstream: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let held = Arc::new(AtomicUsize::new(0));
        let gate = Arc::new((Mutex::new(false), Condvar::new()));
        let (thread_held, thread_gate) = (held.clone(), gate.clone());
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let (held, gate) = (thread_held.clone(), thread_gate.clone());
                std::thread::spawn(move || relay(client, upstream, &held, &gate));
            }
        });
        Self { port, held, gate }
    }

    fn open(&self) {
        let (open, wake) = &*self.gate;
        *open.lock().unwrap() = true;
        wake.notify_all();
    }
}

fn relay(mut client: TcpStream, upstream: u16, held: &AtomicUsize, gate: &(Mutex<bool>, Condvar)) {
    let Ok(mut server) = TcpStream::connect(("127.0.0.1", upstream)) else {
        return;
    };
    let (mut client_in, mut server_out) =
        (client.try_clone().unwrap(), server.try_clone().unwrap());
    // Requests go through at once; the first bytes say whether the replies must wait.
    let first = Arc::new(Mutex::new(Vec::new()));
    let seen = first.clone();
    let up = std::thread::spawn(move || {
        let mut buf = [0u8; 8192];
        while let Ok(n) = client_in.read(&mut buf) {
            if n == 0 || server_out.write_all(&buf[..n]).is_err() {
                break;
            }
            let mut seen = seen.lock().unwrap();
            if seen.len() < 32 {
                seen.extend_from_slice(&buf[..n.min(32)]);
            }
        }
        let _ = server_out.shutdown(Shutdown::Write);
    });
    let mut buf = [0u8; 8192];
    let mut waited = false;
    while let Ok(n) = server.read(&mut buf) {
        if n == 0 {
            break;
        }
        if !waited && first.lock().unwrap().starts_with(b"POST /completion") {
            waited = true;
            held.fetch_add(1, Ordering::SeqCst);
            let (open, wake) = gate;
            let mut open = open.lock().unwrap();
            while !*open {
                open = wake.wait(open).unwrap();
            }
        }
        if client.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = client.shutdown(Shutdown::Write);
    let _ = up.join();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn indexing_goes_on_while_a_server_writes_the_answer() {
    let Some(binary) = llama_server::binary() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let gguf = tmp.path().join("tiny.gguf");
    selfrag_fixtures::write_tiny_llama_gguf(&gguf).unwrap();
    let bert = tmp.path().join("tiny-bert");
    selfrag_fixtures::write_tiny_bert(&bert).unwrap();
    let server = LlamaServer::start(
        &binary,
        &gguf,
        tmp.path(),
        3,
        selfrag_fixtures::TINY_LLAMA_CONTEXT,
        &[],
    )
    .unwrap();
    let upstream: u16 = server.url.rsplit(':').next().unwrap().parse().unwrap();
    let relay = Relay::start(upstream);
    let docs = tmp.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    let first = docs.join("first.md");
    std::fs::write(
        &first,
        "# First\nThe lab's server runs the model for everyone.\n",
    )
    .unwrap();
    let engine = Arc::new(
        Engine::new(EngineConfig {
            generator_server: Some(selfrag_remote::ServerConfig::new(format!(
                "http://127.0.0.1:{}",
                relay.port
            ))),
            ..EngineConfig::in_process(tmp.path().join("data"), gguf, bert)
        })
        .unwrap(),
    );
    engine.index_paths(&[first], |_| {}).await.unwrap();
    // The reference code's dummy prefix reaches a server too: its prompts are our ids.
    engine.set_generator_numerics(selfrag_engine::GeneratorNumerics {
        cache_precision: Some(selfrag_core::CachePrecision::F32),
        dummy_prefix: selfrag_core::DummyPrefix::EveryFragment,
    });

    let asking = engine.clone();
    let answer = tokio::spawn(async move {
        let settings = Settings {
            mode: RetrieveMode::Always,
            k: 2,
            max_new_tokens: 24,
            ..Settings::default()
        };
        asking
            .ask("Who runs the model?".into(), settings, |_| {})
            .await
    });
    // The answer is now in flight: the server's candidates are held at the relay.
    for _ in 0..600 {
        if relay.held.load(Ordering::SeqCst) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        relay.held.load(Ordering::SeqCst) > 0,
        "no completion reached the server"
    );
    assert!(!answer.is_finished());

    // Indexing needs the model thread's embedder: it finishes while the answer waits.
    let second = docs.join("second.md");
    std::fs::write(
        &second,
        "# Second\nA GPU box in the lab serves every laptop.\n",
    )
    .unwrap();
    let indexed = tokio::time::timeout(
        Duration::from_secs(120),
        engine.index_paths(&[second], |_| {}),
    )
    .await
    .expect("indexing waited for the answer: the model thread was held")
    .unwrap();
    assert!(
        matches!(indexed, IndexEvent::Finished { indexed: 1, .. }),
        "{indexed:?}"
    );
    assert!(
        !answer.is_finished(),
        "the answer was still held while indexing ran"
    );

    relay.open();
    let record = answer.await.unwrap().unwrap();
    let generator = record
        .answer
        .generator
        .expect("the trace names its generator");
    assert_eq!(generator.kind, GeneratorKind::Server);
    // The server keeps the cache it was started with, whatever is asked here, and says so.
    assert_eq!(generator.cache_precision, None);
    assert_eq!(
        generator.dummy_prefix,
        Some(selfrag_core::DummyPrefix::EveryFragment)
    );
    assert!(
        record.answer.embedder.is_some(),
        "the query was embedded here"
    );
    assert!(record.answer.retrieve.retrieved);
}
