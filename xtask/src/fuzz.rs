//! `cargo xtask fuzz [TARGET] [--seconds N]`: runs the cargo-fuzz targets in `fuzz/` (chunker,
//! GGUF tokenizer, text extractors, export renderers, prompt builder, generator-server replies)
//! for a bounded time each, and says what to install when nightly Rust or cargo-fuzz is
//! missing.
//!
//! The fuzz crate is its own workspace (the root excludes it) built with nightly into its own
//! target directory, `~/.cache/selfrag-desktop/target-fuzz`, so it never invalidates the stable
//! build. Builds are `--dev` (opt-level 1 with overflow checks, see `fuzz/Cargo.toml`) and
//! without a sanitizer: the code is safe Rust, and the bugs worth finding are panics, hangs and
//! huge allocations. The targets link selfrag-index without its `store` feature and
//! selfrag-export rather than the engine, so LanceDB is never built here (a nightly LanceDB
//! build on two cores takes longer than the fuzzing).
//! Corpora live in `~/.cache/selfrag-desktop/fuzz-corpus/TARGET`; crashes land in
//! `fuzz/artifacts/TARGET/` and each one becomes a regression test named after the bug.

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

/// The targets, in the order they run.
pub const TARGETS: [&str; 6] = [
    "chunker",
    "gguf_tokenizer",
    "extractors",
    "export",
    "prompt_builder",
    "server_replies",
];

/// Default seconds per target.
const DEFAULT_SECONDS: u64 = 60;

#[derive(Debug)]
struct Args {
    targets: Vec<String>,
    seconds: u64,
}

fn parse(args: &[String]) -> Result<Args> {
    let mut targets = Vec::new();
    let mut seconds = DEFAULT_SECONDS;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--seconds" => {
                let value = args.next().context("--seconds needs a number")?;
                seconds = value
                    .parse()
                    .with_context(|| format!("--seconds {value}: not a whole number"))?;
            }
            target if TARGETS.contains(&target) => targets.push(target.to_owned()),
            other => bail!(
                "unknown fuzz target or option `{other}`; targets: {}; option: --seconds N",
                TARGETS.join(", ")
            ),
        }
    }
    if targets.is_empty() {
        targets = TARGETS.iter().map(|t| (*t).to_owned()).collect();
    }
    Ok(Args { targets, seconds })
}

/// What is missing to fuzz, as instructions; empty when everything is there.
fn missing_tools() -> Vec<&'static str> {
    let works = |args: &[&str]| {
        Command::new(args[0])
            .args(&args[1..])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let mut missing = Vec::new();
    if !works(&["rustup", "run", "nightly", "rustc", "--version"]) {
        missing.push("nightly Rust (libFuzzer needs it): rustup toolchain install nightly");
    }
    if !works(&["cargo", "fuzz", "--version"]) {
        missing.push("cargo-fuzz: cargo install cargo-fuzz");
    }
    missing
}

pub fn fuzz(root: &Path, args: &[String]) -> Result<()> {
    let args = parse(args)?;
    let missing = missing_tools();
    if !missing.is_empty() {
        bail!(
            "cargo xtask fuzz needs:\n  - {}\nInstall them and run it again.",
            missing.join("\n  - ")
        );
    }
    let target_dir = super::cache_dir().join("target-fuzz");
    let corpora = super::cache_dir().join("fuzz-corpus");
    let fuzz_dir = root.join("fuzz");
    for target in &args.targets {
        let started = super::step(&format!("fuzz {target} for {} s", args.seconds));
        let corpus = corpora.join(target);
        std::fs::create_dir_all(&corpus)
            .with_context(|| format!("creating {}", corpus.display()))?;
        let seeds = fuzz_dir.join("seeds").join(target);
        let mut command = Command::new("cargo");
        command
            .current_dir(&fuzz_dir)
            .env("CARGO_TARGET_DIR", &target_dir)
            .args(["+nightly", "fuzz", "run", "--dev", "-s", "none", target])
            .arg(&corpus);
        if seeds.is_dir() {
            command.arg(&seeds);
        }
        command.args([
            "--",
            &format!("-max_total_time={}", args.seconds),
            // A slow input is a bug too (the extractors run under a time limit in the app).
            "-timeout=10",
            "-rss_limit_mb=4096",
            "-print_final_stats=1",
        ]);
        super::status(&mut command, &format!("cargo fuzz run {target}")).with_context(|| {
            format!(
                "fuzz target {target} found a crash: the input is in fuzz/artifacts/{target}/; \
                 reproduce with `cargo +nightly fuzz run --dev -s none {target} FILE` in fuzz/, \
                 then add a regression test named after the bug"
            )
        })?;
        super::done(&format!("fuzz {target}"), started);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn every_target_runs_for_a_minute_unless_told_otherwise() {
        let all = parse(&[]).unwrap();
        assert_eq!(all.targets, TARGETS);
        assert_eq!(all.seconds, 60);
        let one = parse(&strings(&["export", "--seconds", "5"])).unwrap();
        assert_eq!((one.targets, one.seconds), (strings(&["export"]), 5));
        let err = parse(&strings(&["pdf"])).unwrap_err().to_string();
        assert!(
            err.contains("chunker") && err.contains("--seconds"),
            "{err}"
        );
        assert!(parse(&strings(&["--seconds", "x"])).is_err());
    }
}
