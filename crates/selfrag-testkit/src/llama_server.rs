//! A real llama-server for tests: the binary `cargo xtask test` builds (`SELFRAG_LLAMA_SERVER`),
//! started on a free loopback port and killed on drop.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{Lack, skip};

/// A running llama-server, killed on drop.
#[derive(Debug)]
pub struct LlamaServer {
    pub child: Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The arguments that make llama-server embed with a BERT GGUF as the local embedder does: mean
/// pooling (Contriever's), every text in one batch; for [`LlamaServer::start`] with one slot of
/// 512 tokens.
pub const EMBEDDING_ARGS: [&str; 7] = [
    "--embedding",
    "--pooling",
    "mean",
    "-b",
    "512",
    "-ub",
    "512",
];

/// The llama-server binary, or `None` after [`skip`] (a failure under CI).
pub fn binary() -> Option<PathBuf> {
    let path = std::env::var_os("SELFRAG_LLAMA_SERVER").map(PathBuf::from);
    match path {
        Some(path) if path.is_file() => Some(path),
        _ => {
            skip(
                Lack::SetUp,
                "SELFRAG_LLAMA_SERVER names no llama-server binary (cargo xtask test builds one)",
            );
            None
        }
    }
}

/// A free port on 127.0.0.1 (bound and released: a tiny race, harmless in tests).
pub fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// The whole reply (status line, headers, body) to `GET path` on the loopback `port`, or
/// `None` when the server does not answer within 2 s.
pub fn get(port: u16, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply).ok()?;
    Some(reply)
}

/// Whether `GET /health` on `port` answers 200.
fn healthy(port: u16) -> bool {
    get(port, "/health").is_some_and(|reply| reply.starts_with("HTTP/1.1 200"))
}

impl LlamaServer {
    /// Starts `binary` on `model` with `slots` parallel requests of `context_per_slot` tokens
    /// each, in f32 with flash attention off (the local generator's arithmetic), plus `extra`
    /// arguments; waits up to 60 s for it to answer. Its output goes to files in `log_dir`.
    pub fn start(
        binary: &Path,
        model: &Path,
        log_dir: &Path,
        slots: usize,
        context_per_slot: usize,
        extra: &[&str],
    ) -> std::io::Result<Self> {
        let port = free_port()?;
        let log =
            |name: &str| std::fs::File::create(log_dir.join(format!("llama-server-{port}.{name}")));
        let child = Command::new(binary)
            .arg("-m")
            .arg(model)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["-c", &(context_per_slot * slots).to_string()])
            .args(["-np", &slots.to_string(), "-t", "2", "-ngl", "0"])
            // With llama-server's defaults (f16 cache, flash attention on the CPU) decode
            // probabilities drift from the local generator's by about 1e-3 on the tiny model.
            .args(["-ctk", "f32", "-ctv", "f32", "-fa", "off"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(log("out")?)
            .stderr(log("err")?)
            .spawn()?;
        let mut server = Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
        };
        let started = Instant::now();
        while !healthy(port) {
            if let Ok(Some(status)) = server.child.try_wait() {
                return Err(std::io::Error::other(format!(
                    "llama-server exited ({status}); see {}",
                    log_dir.display()
                )));
            }
            if started.elapsed() > Duration::from_secs(60) {
                let _ = server.child.kill();
                return Err(std::io::Error::other(format!(
                    "llama-server did not answer within 60 s; see {}",
                    log_dir.display()
                )));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(server)
    }
}
