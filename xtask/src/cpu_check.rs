//! `cargo xtask cpu-check [build|run]`: the generator's CPU timings, built here and run on
//! another machine's CPU (issue 48, goals 1 and 2: a row per CPU family), such as the host of a
//! machine lent for the GPU check, which has no Rust and no network.
//!
//! `build` (the default) builds selfrag-models' integration-test binary as CI builds it (its
//! `cpu_timings` test is `#[ignore]`d, run only by the script) and llama.cpp's `llama-server`
//! with the benchmark peer's instruction sets (this CPU's AVX-512, no AMX) and for x86-64-v3
//! (the peer on a CPU without AVX-512, where the other would fault), and lays out
//! `.cpu-check/` in the clone (ignored through `.git/info/exclude`): the binaries gzipped,
//! `BUILD` (what was built from what) and `run.sh`. On the other machine, `bash
//! .cpu-check/run.sh` writes the benchmark's 8-block model, times our prompt and decode with
//! each prefetch distance and the one the load calibrated, and llama.cpp's on the same file, at
//! 2 threads and at all of the machine's; `run` runs it here.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};

use crate::device_bundle::{self, build_info, exclude_from_git};
use crate::{cargo, done, exe, status, step};

/// The bundle's folder in the clone.
const BUNDLE: &str = ".cpu-check";

pub(crate) fn cpu_check(root: &Path, args: &[String]) -> Result<()> {
    device_bundle::command(root, BUNDLE, "cpu-check", args, build)
}

fn build(root: &Path) -> Result<()> {
    let binary = build_tests()?;
    let t = step("llama-server with the peer's instruction sets");
    let server = crate::llama_server::binary_with("peer", &crate::bench::peer_cmake_flags())?;
    // For a machine without this one's AVX-512, where that build would fault.
    let portable = crate::llama_server::binary()?;
    done("llama-server for the peer", t);
    lay_out(root, &binary, &server, &portable)
}

/// selfrag-models' test binary `models`, built with the workspace's features (as CI builds it,
/// so the shared target folder keeps its build); its path.
fn build_tests() -> Result<PathBuf> {
    let t = step("build selfrag-models' tests");
    let mut build = cargo();
    build.args(["test", "--workspace", "--exclude", "xtask", "--no-run"]);
    let binary = device_bundle::models_test_binary(build, "the tests")?;
    done("build the tests", t);
    Ok(binary)
}

fn lay_out(root: &Path, binary: &Path, server: &Path, portable: &Path) -> Result<()> {
    let t = step(&format!("lay out {BUNDLE}/"));
    let bundle = root.join(BUNDLE);
    let _ = std::fs::remove_dir_all(&bundle);
    std::fs::create_dir_all(&bundle).with_context(|| format!("creating {}", bundle.display()))?;
    for (from, name) in [
        (binary, exe("models")),
        (server, exe("llama-server")),
        (portable, exe("llama-server-x86-64-v3")),
    ] {
        let to = bundle.join(name);
        std::fs::copy(from, &to)
            .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
        status(Command::new("strip").arg(&to), "strip")?;
        status(
            Command::new("gzip").args(["-9", "-n", "-f"]).arg(&to),
            "gzip",
        )?;
    }
    let script = bundle.join("run.sh");
    std::fs::write(&script, include_str!("cpu_check.sh"))
        .with_context(|| format!("writing {}", script.display()))?;
    std::fs::write(
        bundle.join("BUILD"),
        build_info(
            root,
            binary,
            &format!(
                "llama.cpp of llama-cpp-python's sdist with {}",
                crate::bench::peer_cmake_flags().join(" ")
            ),
        ),
    )
    .with_context(|| format!("writing {}/BUILD", bundle.display()))?;
    exclude_from_git(root, BUNDLE)?;

    device_bundle::check_size(&bundle, BUNDLE, t)?;
    eprintln!(
        "\nOn the other machine, from the repository root (carry [\"{BUNDLE}\"]):\n  bash {BUNDLE}/run.sh\n\
         It writes $OUT/cpu-check.txt and $OUT/cpu-check.md. Here, `cargo xtask cpu-check run` runs it on this CPU."
    );
    Ok(())
}
