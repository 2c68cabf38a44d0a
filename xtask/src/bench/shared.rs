//! The `shared` section of `cargo xtask bench`: a library on object storage (issue 46) against
//! the same library in a local folder, in one run. The store is `selfrag-s3-server` (s3s over
//! files) on a loopback port, so the figures are the cost of the S3 protocol and of Lance's
//! object-store commits without a network's latency; a store across a network adds its round
//! trips to every figure.
//!
//! - hybrid search p50/p95 of a synthetic library of 100,000 passages (`selfrag debug
//!   bench-search`, as in the `search` section), built and searched in the store and in a folder;
//! - `selfrag index` of small notes with the real all-MiniLM-L6-v2, into the store and a folder;
//! - how long a document one computer indexes takes to turn up in another's search (`selfrag
//!   debug shared-visibility`: two opened libraries, the reader searching every 20 ms).

use std::fmt::Write as _;
use std::io::BufRead as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};

use super::{Bench, command_line, json_number, library_only, load_average, machine, our_binaries};

/// Passages of the search libraries (`SELFRAG_BENCH_SHARED_PASSAGES`).
const PASSAGES: usize = 100_000;
/// Small notes indexed into each library (`SELFRAG_BENCH_SHARED_FILES`).
const NOTES: usize = 500;
/// Notes of the visibility measurement.
const VISIBILITY_ROUNDS: usize = 10;
const ACCESS_KEY: &str = "bench";
const SECRET_KEY: &str = "bench-secret";

/// The loopback store, killed on drop.
struct Store {
    child: Child,
    endpoint: String,
}

impl Drop for Store {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Store {
    fn start(bench: &Bench, root: &Path) -> Result<Self> {
        std::fs::create_dir_all(root)?;
        let mut child = Command::new(bench.binary("selfrag-s3-server"))
            .args(["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY])
            .args(["--bucket", "lab"])
            .arg(root)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("starting selfrag-s3-server")?;
        let mut line = String::new();
        if let Some(out) = child.stdout.take() {
            std::io::BufReader::new(out).read_line(&mut line)?;
        }
        let Some(endpoint) = line.trim().strip_prefix("listening on ") else {
            let _ = child.kill();
            bail!("selfrag-s3-server did not start (it printed {line:?})");
        };
        Ok(Self {
            endpoint: endpoint.to_owned(),
            child,
        })
    }

    /// `cmd` as a client of this store.
    fn client<'a>(&self, cmd: &'a mut Command) -> &'a mut Command {
        cmd.env("AWS_ENDPOINT_URL", &self.endpoint)
            .env("AWS_ALLOW_HTTP", "true")
            .env("AWS_ACCESS_KEY_ID", ACCESS_KEY)
            .env("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
            .env("AWS_REGION", "us-east-1")
            .env_remove("AWS_PROFILE")
    }
}

pub(super) fn shared(bench: &Bench) -> Result<String> {
    let started = command_line("date", &["-u", "+%Y-%m-%d %H:%M UTC"]);
    let load_before = load_average();
    let scratch = bench.out.join("shared");
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).context("creating target/bench/shared")?;
    let store = Store::start(bench, &scratch.join("store"))?;
    let selfrag = bench.binary("selfrag");
    let number = |key: &str, default: usize| {
        std::env::var(key)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let passages: usize = number("SELFRAG_BENCH_SHARED_PASSAGES", PASSAGES);
    let notes: usize = number("SELFRAG_BENCH_SHARED_FILES", NOTES);

    // Search at scale, the same library built in a folder and in the store.
    let search = |library: Option<&str>, dir: &Path| -> Result<String> {
        let mut cmd = Command::new(&selfrag);
        cmd.args(["debug", "bench-search", "--dir"]).arg(dir).args([
            "--passages",
            &passages.to_string(),
            "--queries",
            "100",
        ]);
        if let Some(library) = library {
            cmd.args(["--library", library]);
            store.client(&mut cmd);
        }
        bench.output(&mut cmd, "selfrag debug bench-search")
    };
    let t = Instant::now();
    let local = search(None, &scratch.join("search-local"))?;
    eprintln!(
        "  local search: {local} ({:.0} s)",
        t.elapsed().as_secs_f64()
    );
    let t = Instant::now();
    let shared = search(Some("s3://lab/search"), &scratch.join("search-state"))?;
    eprintln!(
        "  store search: {shared} ({:.0} s)",
        t.elapsed().as_secs_f64()
    );

    // Indexing small notes with the real MiniLM.
    let minilm = crate::minilm_dir()?;
    let folder = scratch.join("notes");
    std::fs::create_dir_all(&folder)?;
    for i in 0..notes {
        std::fs::write(
            folder.join(format!("note{i:04}.md")),
            format!(
                "# Note {i}\nA short note, number {i}, on topic {} of a lab's reading list.\n",
                i % 37
            ),
        )?;
    }
    let index = |library: Option<&str>, data: &Path| -> Result<f64> {
        let mut cmd = Command::new(&selfrag);
        library_only(&mut cmd, data, &minilm)
            .args(["index"])
            .arg(&folder);
        if let Some(library) = library {
            cmd.args(["--library", library]);
            store.client(&mut cmd);
        }
        let t = Instant::now();
        bench.output(&mut cmd, "selfrag index (notes)")?;
        Ok(t.elapsed().as_secs_f64())
    };
    let local_index = index(None, &scratch.join("index-local"))?;
    let shared_index = index(Some("s3://lab/notes"), &scratch.join("index-state"))?;
    eprintln!("  index {notes} notes: local {local_index:.1} s, store {shared_index:.1} s");

    // Another computer's view.
    let mut cmd = Command::new(&selfrag);
    cmd.args(["debug", "shared-visibility", "--dir"])
        .arg(scratch.join("visibility"))
        .args(["--rounds", &VISIBILITY_ROUNDS.to_string()])
        .args(["--library", "s3://lab/visibility"]);
    store.client(&mut cmd);
    let visibility = bench.output(&mut cmd, "selfrag debug shared-visibility")?;
    eprintln!("  visibility: {visibility}");
    drop(store);
    let store_bytes = dir_bytes(&scratch.join("store").join("lab").join("search"));
    let _ = std::fs::remove_dir_all(&scratch);

    let mut md = String::new();
    let _ = writeln!(
        md,
        "## Shared library\n\nMeasured from {started} on {}; load average {load_before:.2} before and {:.2} after. \
         The store is `selfrag-s3-server` (s3s over files) on a loopback port: the cost of the S3 protocol and of Lance's \
         object-store commits, without a network's round trips. {}, lance {}.{}\n",
        machine(),
        load_average(),
        command_line("rustc", &["-V"]),
        super::locked_version(&bench.root, "lance"),
        our_binaries(bench),
    );
    let _ = writeln!(
        md,
        "Search: the synthetic library of the Search section ({passages} passages of 768-d vectors, HNSW over 8-bit codes, BM25), \
         built and searched in a folder and in the store, 100 hybrid queries each, one process each.\n\n\
         | library | write s | index s | hybrid p50 ms | hybrid p95 ms | vector k=10 p95 ms | recall@10 |\n|---|---|---|---|---|---|---|"
    );
    for (name, out) in [("local folder", &local), ("loopback S3 store", &shared)] {
        let _ = writeln!(
            md,
            "| {name} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.3} |",
            json_number(out, "write_seconds")?,
            json_number(out, "index_seconds")?,
            json_number(out, "hybrid_p50_ms")?,
            json_number(out, "hybrid_p95_ms")?,
            json_number(out, "vector_p95_ms")?,
            json_number(out, "recall_at_10")?,
        );
    }
    let ratio = |key: &str| -> Result<f64> {
        Ok(json_number(&shared, key)? / json_number(&local, key)?.max(1e-9))
    };
    let _ = writeln!(
        md,
        "\nStore against folder: hybrid p50 {:.2}×, p95 {:.2}× the folder's time. The store held {:.1} MB of the search library.\n",
        ratio("hybrid_p50_ms")?,
        ratio("hybrid_p95_ms")?,
        store_bytes as f64 / 1e6,
    );
    let _ = writeln!(
        md,
        "Indexing: `selfrag index` of {notes} one-passage notes with the real all-MiniLM-L6-v2 (int8), from an empty library, \
         compaction and index upkeep included.\n\n\
         | library | seconds | files/s |\n|---|---|---|\n\
         | local folder | {local_index:.1} | {:.1} |\n\
         | loopback S3 store | {shared_index:.1} | {:.1} |\n\n\
         Store against folder: {:.2}× the folder's files/s.\n",
        notes as f64 / local_index,
        notes as f64 / shared_index,
        local_index / shared_index,
    );
    let _ = writeln!(
        md,
        "Another computer's view: one process opens the library twice (two state folders, two LanceDB connections); \
         one indexes a note, the other searches every 20 ms; the time from the writer's commit to the \
         reader's first search that returns the note, {VISIBILITY_ROUNDS} notes. The reader looks for other computers' \
         commits at most every 2 s (`SHARED_READ_INTERVAL`).\n\n\
         | median s | max s | writer's index of one note, median s |\n|---|---|---|\n| {:.2} | {:.2} | {:.2} |",
        json_number(&visibility, "median_seconds")?,
        json_number(&visibility, "max_seconds")?,
        json_number(&visibility, "index_median_seconds")?,
    );
    Ok(md)
}

fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            _ => e.metadata().map_or(0, |m| m.len()),
        })
        .sum()
}
