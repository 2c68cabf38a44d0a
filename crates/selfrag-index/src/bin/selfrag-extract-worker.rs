//! The extraction worker selfrag-index's own tests run: the app and the `selfrag` CLI are their
//! own workers, and the library's tests must not depend on either.
//!
//! It also misbehaves on request, chosen by the file's name (so nothing is shared with the test
//! process), because a parser that crashes, hangs, babbles or eats memory must cost one file and
//! nothing more, and the real parsers do not do that on demand. Never started by the app.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use selfrag_index::worker::WorkerHeap;

#[global_allocator]
static HEAP: WorkerHeap = WorkerHeap;

fn main() -> ExitCode {
    let name = std::env::args_os()
        .nth(2)
        .and_then(|p| {
            Path::new(&p)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_default();
    if name.starts_with("worker-aborts") {
        std::process::abort();
    } else if name.starts_with("worker-overflows") {
        let _ = std::hint::black_box(recurse(0));
    } else if name.starts_with("worker-hangs") {
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    } else if name.starts_with("worker-babbles") {
        let _ = writeln!(std::io::stdout(), "this is not a document");
        return ExitCode::SUCCESS;
    } else if name.starts_with("worker-hogs") {
        // Grows a buffer to 2 GiB by reallocation, as a parser inflating a stream does (address
        // space only, never touched, so it is quick), under the limit the parent set.
        if let Err(e) = WorkerHeap::limit_from_env() {
            let _ = writeln!(std::io::stderr(), "{e}");
            return ExitCode::from(2);
        }
        let mut hog: Vec<u8> = Vec::new();
        while hog.capacity() < 2 << 30 {
            hog.reserve_exact(hog.capacity() + (64 << 20));
            std::hint::black_box(&hog);
        }
    }
    selfrag_index::worker::main_if_worker().unwrap_or(ExitCode::from(2))
}

/// Recurses until the stack is gone, as a parser does on a pathologically nested file.
fn recurse(depth: u64) -> u64 {
    let frame = std::hint::black_box([depth; 64]);
    if depth == u64::MAX {
        return frame[0];
    }
    // black_box keeps the call out of tail position, so no optimiser turns it into a loop.
    std::hint::black_box(recurse(depth + 1)).wrapping_add(frame[1])
}
