//! A real S3-compatible server for tests of shared libraries: the `selfrag-s3-server` binary
//! `cargo xtask test` builds (`SELFRAG_S3_SERVER`), started over a fresh folder on a free
//! loopback port with one bucket and one key pair, and killed on drop.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::{Lack, skip};

/// The access key and secret every test server takes.
pub const ACCESS_KEY: &str = "selfrag-test";
pub const SECRET_KEY: &str = "selfrag-test-secret";
/// The bucket every test server has.
pub const BUCKET: &str = "lab";

/// A running server, killed on drop.
#[derive(Debug)]
pub struct S3Server {
    pub child: Child,
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The server binary, or `None` after [`skip`] (a failure under CI).
pub fn binary() -> Option<PathBuf> {
    match std::env::var_os("SELFRAG_S3_SERVER").map(PathBuf::from) {
        Some(path) if path.is_file() => Some(path),
        _ => {
            skip(
                Lack::SetUp,
                "SELFRAG_S3_SERVER names no selfrag-s3-server binary (cargo xtask test builds one)",
            );
            None
        }
    }
}

/// How a test server treats conditional writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conditions {
    /// As S3, MinIO and R2 do.
    Honoured,
    /// As S3-compatible stores from before conditional writes: every put overwrites.
    Ignored,
}

impl S3Server {
    /// Starts `binary` over `root` (its objects are files there) and waits for its line
    /// `listening on http://…`.
    pub fn start(binary: &Path, root: &Path, conditions: Conditions) -> std::io::Result<Self> {
        let mut command = Command::new(binary);
        command
            .args(["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY])
            .args(["--bucket", BUCKET])
            .arg(root)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if conditions == Conditions::Ignored {
            command.arg("--ignore-conditional-writes");
        }
        let mut child = command.spawn()?;
        let mut line = String::new();
        if let Some(out) = child.stdout.take() {
            std::io::BufReader::new(out).read_line(&mut line)?;
        }
        let Some(endpoint) = line.trim().strip_prefix("listening on ") else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(std::io::Error::other(format!(
                "selfrag-s3-server did not start (it printed {line:?})"
            )));
        };
        Ok(Self {
            endpoint: endpoint.to_owned(),
            child,
        })
    }

    /// The environment a client of this server needs: its endpoint over plain http, the key
    /// pair and a region.
    pub fn client_env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.endpoint.clone()),
            ("AWS_ALLOW_HTTP", "true".to_owned()),
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY.to_owned()),
            ("AWS_SECRET_ACCESS_KEY", SECRET_KEY.to_owned()),
            ("AWS_REGION", "us-east-1".to_owned()),
        ]
    }
}
