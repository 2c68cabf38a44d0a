//! llama.cpp's `llama-server`, built from source for the server-generator tests and cached
//! outside the clone.
//!
//! The source comes from a registry package: the sdist of `llama-cpp-python` on PyPI carries
//! the whole of llama.cpp in `vendor/llama.cpp`, server included. It is built with CMake
//! (`llama-server` target only), for the tests for x86-64-v3 (AVX2, FMA, F16C) rather than the
//! build machine's own CPU: a native build would use AMX where the CPU reports it, and AMX
//! faults on the virtual machines this project runs on. `cargo xtask cpu-check` builds another,
//! with this CPU's AVX-512 as the benchmark's peer has it (AMX still off). No web UI, no HTTPS, no downloads at build time.
//! The first build takes a few minutes on 2 cores; later runs find the binary in
//! `~/.cache/selfrag-desktop/llama-server/<version>/`.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::{cache_dir, status};

/// The llama-cpp-python release whose vendored llama.cpp is built.
const LLAMA_CPP_PYTHON: &str = "0.3.36";

/// The instruction sets of the tests' build: x86-64-v3, no AMX.
const PORTABLE: [&str; 8] = [
    "-DGGML_NATIVE=OFF",
    "-DGGML_AVX=ON",
    "-DGGML_AVX2=ON",
    "-DGGML_FMA=ON",
    "-DGGML_F16C=ON",
    "-DGGML_AMX_TILE=OFF",
    "-DGGML_AMX_INT8=OFF",
    "-DGGML_AMX_BF16=OFF",
];

/// The cached `llama-server` of the tests (x86-64-v3), built first if missing.
pub fn binary() -> Result<PathBuf> {
    built_with(LLAMA_CPP_PYTHON, &PORTABLE.map(str::to_owned))
}

/// A `llama-server` for x86-64-v3 with AVX-VNNI too (Intel's client CPUs from Alder Lake), the
/// peer of the packed tiles' AVX-VNNI kernels in `cargo xtask bench avx2`.
pub fn binary_avx_vnni() -> Result<PathBuf> {
    let mut flags = PORTABLE.map(str::to_owned).to_vec();
    flags.push("-DGGML_AVX_VNNI=ON".to_owned());
    binary_with("avx-vnni", &flags)
}

/// A `llama-server` built with the instruction sets `flags` name (CMake `-D` options, as the
/// benchmark's peer is built for this CPU), cached under `tag` beside the tests' build.
pub fn binary_with(tag: &str, flags: &[String]) -> Result<PathBuf> {
    built_with(&format!("{LLAMA_CPP_PYTHON}-{tag}"), flags)
}

fn built_with(folder: &str, flags: &[String]) -> Result<PathBuf> {
    let home = cache_dir().join("llama-server").join(folder);
    let binary = home.join("llama-server");
    if runs(&binary) {
        return Ok(binary);
    }
    let work = home.join("build-tree");
    // A half-finished earlier attempt is started over.
    if work.exists() {
        std::fs::remove_dir_all(&work).with_context(|| format!("removing {}", work.display()))?;
    }
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    let source = unpack_sdist(&work)?;
    let build = work.join("build");
    let jobs = std::thread::available_parallelism().map_or(2, |n| n.get());
    status(
        Command::new("cmake")
            .arg("-S")
            .arg(&source)
            .arg("-B")
            .arg(&build)
            .args(flags)
            .args([
                "-DCMAKE_BUILD_TYPE=Release",
                "-DBUILD_SHARED_LIBS=OFF",
                "-DLLAMA_BUILD_TESTS=OFF",
                "-DLLAMA_BUILD_EXAMPLES=OFF",
                "-DLLAMA_BUILD_SERVER=ON",
                "-DLLAMA_BUILD_UI=OFF",
                "-DLLAMA_USE_PREBUILT_UI=OFF",
                "-DLLAMA_OPENSSL=OFF",
                "-DLLAMA_CURL=OFF",
            ]),
        "cmake (configuring llama-server)",
    )?;
    status(
        Command::new("cmake").arg("--build").arg(&build).args([
            "--target",
            "llama-server",
            "--parallel",
            &jobs.to_string(),
        ]),
        "cmake --build (llama-server)",
    )?;
    let built = build.join("bin").join("llama-server");
    std::fs::copy(&built, &binary)
        .with_context(|| format!("copying {} to {}", built.display(), binary.display()))?;
    if !runs(&binary) {
        bail!(
            "the llama-server just built ({}) does not run",
            binary.display()
        );
    }
    std::fs::remove_dir_all(&work).with_context(|| format!("removing {}", work.display()))?;
    Ok(binary)
}

fn runs(binary: &Path) -> bool {
    binary.is_file()
        && Command::new(binary)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
}

/// Downloads the llama-cpp-python sdist into `work` and unpacks it; returns its llama.cpp.
fn unpack_sdist(work: &Path) -> Result<PathBuf> {
    let python = crate::python_venv()?;
    status(
        Command::new(&python)
            .args(["-m", "pip", "download", "-q", "--no-deps", "--no-binary"])
            .arg("llama-cpp-python")
            .arg(format!("llama-cpp-python=={LLAMA_CPP_PYTHON}"))
            .arg("-d")
            .arg(work),
        "pip download llama-cpp-python (sdist)",
    )?;
    let sdist = work.join(format!("llama_cpp_python-{LLAMA_CPP_PYTHON}.tar.gz"));
    status(
        Command::new("tar")
            .arg("xzf")
            .arg(&sdist)
            .arg("-C")
            .arg(work),
        "unpacking the llama-cpp-python sdist",
    )?;
    let source = work
        .join(format!("llama_cpp_python-{LLAMA_CPP_PYTHON}"))
        .join("vendor")
        .join("llama.cpp");
    if !source.join("tools/server/server.cpp").is_file() {
        bail!("{} holds no llama.cpp server source", sdist.display());
    }
    Ok(source)
}
