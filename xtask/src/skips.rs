//! The log of tests that could not run on this machine, and the list printed at the end of
//! `cargo xtask test`.
//!
//! A test that lacks something (a CPU feature, root for a tmpfs) calls
//! `selfrag_testkit::skip`, which fails it under `CI=true` where the machine should have run it,
//! and otherwise appends one line, `where<TAB>why`, to the file named by [`ENV`]. Cargo's
//! summary counts such a test as passed; this list is where a reader learns it did not run.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// The variable naming the log; the same name as in `selfrag-testkit`.
pub const ENV: &str = "SELFRAG_TEST_SKIP_LOG";

pub struct Log {
    path: PathBuf,
}

impl Log {
    /// An empty log in the target folder, for this run.
    pub fn fresh(target: &Path) -> Result<Self> {
        std::fs::create_dir_all(target)
            .with_context(|| format!("creating {}", target.display()))?;
        let path = target.join("test-skips.log");
        std::fs::write(&path, "").with_context(|| format!("emptying {}", path.display()))?;
        Ok(Self { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Prints how many tests were skipped and why, however the run ended.
    pub fn report(&self) {
        let text = std::fs::read_to_string(&self.path).unwrap_or_default();
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        if lines.is_empty() {
            eprintln!("\nskipped tests: none (every test ran)");
            return;
        }
        eprintln!(
            "\nskipped tests: {} (counted as passed above; this machine lacks what they need)",
            lines.len()
        );
        for line in lines {
            let (test, why) = line.split_once('\t').unwrap_or((line, ""));
            eprintln!("  - {test}: {why}");
        }
    }
}
