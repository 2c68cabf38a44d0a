//! `cargo xtask gpu-check [build|run]`: the CUDA route, built on a machine without a GPU and run
//! on one that has it (issue 48, item 8).
//!
//! `build` (the default) installs NVIDIA's CUDA 13.0 compiler, headers and libraries from PyPI
//! (pinned wheels, into `~/.cache/selfrag-desktop/cuda/13.0`, through the project's private
//! Python; no system package), makes a stand-in for the driver's `libcuda.so` to link against,
//! builds selfrag-models' integration-test binary with the `cuda` feature in its own target
//! folder (`~/.cache/selfrag-desktop/target-cuda`: the shared one keeps its CPU build), and lays
//! out `.gpu-check/` in the clone (ignored through `.git/info/exclude`): the stripped binary
//! (gzipped), libcudart, the stand-in, `BUILD` (what was built from what), `run.sh` and
//! `peer.py` (the same timings in PyTorch, for the ratios against a peer). `run` runs
//! `.gpu-check/run.sh` here: on a machine without a GPU, the dry run.
//!
//! Why each piece: candle's `cuda` feature compiles its kernels with nvcc at build time (to PTX
//! for the GPU's compute capability, `CUDA_COMPUTE_CAP`, 90 for an H100 or H200 unless
//! `SELFRAG_GPU_CHECK_COMPUTE_CAP` says otherwise) and links libcuda, cuBLAS (with its
//! cuBLASLt), cuRAND and libcudart dynamically (cudarc's `dynamic-linking`, which candle
//! chooses; NVRTC is named to the linker too, which drops it: nothing calls it). Only libcudart
//! is small enough to carry (cuBLASLt alone is 540 MB): the GPU's machine must have CUDA 13's
//! libraries, as its toolkit or its Python's wheels; `run.sh` finds them. The driver's
//! libcuda comes with no wheel, so the link is made against a library of empty functions with
//! its name (`libcuda.so.1`) and the driver API's symbols, read from cudarc's own bindings: at
//! run time the driver's library is loaded in its place.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::device_bundle;
use crate::{cache_dir, cargo, done, exe, python_venv, status, step};

/// NVIDIA's CUDA 13.0 wheels on PyPI: compiler (nvcc, cicc, ptxas), headers, and the libraries
/// the binary links. 13.0, the driver 580's own version: a newer 13.x driver or toolkit runs
/// what 13.0 built.
const WHEELS: [&str; 8] = [
    "nvidia-cuda-nvcc==13.0.88",
    "nvidia-cuda-crt==13.0.88",
    "nvidia-nvvm==13.0.88",
    "nvidia-cuda-runtime==13.0.88",
    "nvidia-cuda-cccl==13.0.85",
    "nvidia-cuda-nvrtc==13.0.88",
    "nvidia-curand==10.4.0.35",
    "nvidia-cublas==13.0.0.19",
];
/// cudarc's name for the version the wheels hold (`CUDARC_CUDA_VERSION`).
const CUDARC_CUDA_VERSION: &str = "13000";
/// The libraries linked by name (`-lcudart`): each wheel ships only the versioned file.
const LINKED: [(&str, &str); 5] = [
    ("libcudart.so", "libcudart.so.13"),
    ("libcublas.so", "libcublas.so.13"),
    ("libcublasLt.so", "libcublasLt.so.13"),
    ("libcurand.so", "libcurand.so.10"),
    ("libnvrtc.so", "libnvrtc.so.13"),
];
/// The bundle's folder in the clone, and what the device may carry with the tree.
const BUNDLE: &str = ".gpu-check";

pub(crate) fn gpu_check(root: &Path, args: &[String]) -> Result<()> {
    device_bundle::command(root, BUNDLE, "gpu-check", args, build)
}

/// The CUDA toolkit's root in the wheels' layout (`bin/nvcc`, `include`, `lib`).
fn cuda_root() -> PathBuf {
    cache_dir().join("cuda/13.0/nvidia/cu13")
}

fn compute_cap() -> String {
    std::env::var("SELFRAG_GPU_CHECK_COMPUTE_CAP").unwrap_or_else(|_| "90".to_owned())
}

fn build(root: &Path) -> Result<()> {
    let cuda = install_toolkit()?;
    let stub = driver_stand_in(root, &cuda)?;
    let binary = build_tests(&cuda)?;
    lay_out(root, &cuda, &stub, &binary)
}

/// The wheels installed (once per set of pins) and the unversioned names the linker looks for.
fn install_toolkit() -> Result<PathBuf> {
    let target = cache_dir().join("cuda/13.0");
    let cuda = cuda_root();
    let marker = target.join("installed.txt");
    let pins = WHEELS.join("\n");
    if std::fs::read_to_string(&marker).ok().as_deref() != Some(pins.as_str()) {
        let t = step("install CUDA 13.0 from PyPI (about 1.2 GB)");
        let _ = std::fs::remove_dir_all(&target);
        status(
            Command::new(python_venv()?)
                .args(["-m", "pip", "install", "-q", "--no-deps", "--no-compile"])
                .arg("--target")
                .arg(&target)
                .args(WHEELS),
            "pip install the CUDA 13.0 wheels",
        )?;
        std::fs::write(&marker, &pins).with_context(|| format!("writing {}", marker.display()))?;
        done("install CUDA", t);
    }
    let lib = cuda.join("lib");
    for (name, file) in LINKED {
        let link = lib.join(name);
        if !link.exists() {
            if !lib.join(file).exists() {
                bail!(
                    "{} has no {file}: the wheels changed their layout",
                    lib.display()
                );
            }
            std::os::unix::fs::symlink(file, &link)
                .with_context(|| format!("linking {}", link.display()))?;
        }
    }
    Ok(cuda)
}

/// The version of `package` in Cargo.lock.
fn locked_version(root: &Path, package: &str) -> Result<String> {
    let lock = std::fs::read_to_string(root.join("Cargo.lock")).context("reading Cargo.lock")?;
    let needle = format!("name = \"{package}\"\nversion = \"");
    lock.find(&needle)
        .and_then(|i| {
            let rest = &lock[i + needle.len()..];
            rest.find('"').map(|end| rest[..end].to_owned())
        })
        .with_context(|| format!("Cargo.lock locks no {package}"))
}

/// `lib/stubs/libcuda.so` (soname `libcuda.so.1`): one empty function for each driver function
/// cudarc's bindings declare, so that the link finds every symbol the binary may use.
fn driver_stand_in(root: &Path, cuda: &Path) -> Result<PathBuf> {
    let stubs = cuda.join("lib/stubs");
    let stub = stubs.join("libcuda.so");
    let version = locked_version(root, "cudarc")?;
    // The stand-in's own version follows cudarc's: a new marker rebuilds it.
    let marker = stubs.join("stand-in-version.txt");
    let stamp = format!("cudarc {version}, marked");
    if stub.exists() && std::fs::read_to_string(&marker).ok().as_deref() == Some(&stamp) {
        return Ok(stub);
    }
    let t = step("the driver's stand-in for the link");
    status(cargo().args(["fetch", "--quiet"]), "cargo fetch")?;
    let home = std::env::var_os("CARGO_HOME").map_or_else(
        || {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_default()
                .join(".cargo")
        },
        PathBuf::from,
    );
    let registry = home.join("registry/src");
    let bindings = std::fs::read_dir(&registry)
        .with_context(|| format!("reading {}", registry.display()))?
        .filter_map(|entry| entry.ok())
        .map(|entry| {
            entry
                .path()
                .join(format!("cudarc-{version}/src/driver/sys/mod.rs"))
        })
        .find(|path| path.exists())
        .with_context(|| {
            format!(
                "cudarc {version}'s sources are not in {}",
                registry.display()
            )
        })?;
    let source = std::fs::read_to_string(&bindings)
        .with_context(|| format!("reading {}", bindings.display()))?;
    let names = driver_functions(&source);
    if names.len() < 100 {
        bail!(
            "only {} driver functions found in {}: cudarc's bindings changed their layout",
            names.len(),
            bindings.display()
        );
    }
    std::fs::create_dir_all(&stubs).with_context(|| format!("creating {}", stubs.display()))?;
    let c = stubs.join("libcuda-stand-in.c");
    // The marker tells `run.sh` this library from the driver's.
    let body: String = std::iter::once(
        "const char selfrag_libcuda_stand_in[] = \"not the NVIDIA driver\";\n".to_owned(),
    )
    .chain(
        names
            .iter()
            .map(|name| format!("int {name}(void) {{ return 999; }}\n")),
    )
    .collect();
    std::fs::write(&c, body).with_context(|| format!("writing {}", c.display()))?;
    status(
        Command::new("cc")
            .args(["-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o"])
            .arg(&stub)
            .arg(&c),
        "cc (the libcuda stand-in)",
    )?;
    std::fs::write(&marker, &stamp).with_context(|| format!("writing {}", marker.display()))?;
    done("the driver's stand-in", t);
    Ok(stub)
}

/// The driver functions cudarc links (`fn cuInit(` inside its `extern "C"` blocks), sorted,
/// each once.
fn driver_functions(bindings: &str) -> Vec<String> {
    let mut names: Vec<String> = bindings
        .lines()
        .filter_map(|line| line.trim_start().strip_prefix("fn cu"))
        // `cuInit`, `cuMemAlloc_v2`: the driver's names go on in capitals.
        .filter(|rest| rest.starts_with(|c: char| c.is_ascii_uppercase()))
        .filter_map(|rest| rest.split_once('('))
        .map(|(name, _)| format!("cu{name}"))
        .filter(|name| name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The target folder of the CUDA build: its own, so that the shared one's CPU build of candle
/// is never replaced.
fn cuda_target_dir() -> PathBuf {
    cache_dir().join("target-cuda")
}

/// selfrag-models' test binary `models` with the `cuda` feature; its path.
fn build_tests(cuda: &Path) -> Result<PathBuf> {
    let t = step("build selfrag-models' tests with the cuda feature");
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![cuda.join("bin")];
    paths.extend(std::env::split_paths(&path));
    let mut build = cargo();
    build
        .env("CARGO_TARGET_DIR", cuda_target_dir())
        .env(
            "PATH",
            std::env::join_paths(paths).context("a PATH entry holds a separator")?,
        )
        // cudarc's build reads the CUDA_* roots, candle-kernels' (cudaforge) NVCC and the
        // compute capability, which it would otherwise ask nvidia-smi for.
        .env("CUDA_HOME", cuda)
        .env("CUDA_ROOT", cuda)
        .env("CUDA_PATH", cuda)
        .env("NVCC", cuda.join("bin/nvcc"))
        .env("CUDA_COMPUTE_CAP", compute_cap())
        .env("CUDARC_CUDA_VERSION", CUDARC_CUDA_VERSION)
        // cuBLAS's own dependency (cuBLASLt) is found by the linker through this.
        .env("LD_LIBRARY_PATH", cuda.join("lib"))
        // A plain `-p`: selfrag-models links no LanceDB, and this target folder is its own.
        .args([
            "test",
            "--no-run",
            "-p",
            "selfrag-models",
            "--features",
            "cuda",
        ]);
    let binary = device_bundle::models_test_binary(build, "the cuda tests")?;
    done("build the cuda tests", t);
    Ok(binary)
}

fn lay_out(root: &Path, cuda: &Path, stub: &Path, binary: &Path) -> Result<()> {
    let t = step(&format!("lay out {BUNDLE}/"));
    let bundle = root.join(BUNDLE);
    let _ = std::fs::remove_dir_all(&bundle);
    for dir in ["lib", "stub"] {
        std::fs::create_dir_all(bundle.join(dir))
            .with_context(|| format!("creating {}/{dir}", bundle.display()))?;
    }
    let models = bundle.join(exe("models"));
    let copy = |from: &Path, to: &Path| {
        std::fs::copy(from, to)
            .with_context(|| format!("copying {} to {}", from.display(), to.display()))
    };
    copy(binary, &models)?;
    status(Command::new("strip").arg(&models), "strip")?;
    // Stripped, the binary is about 70 MiB (a third of it the kernels' code for the GPU, a
    // sixth their PTX); gzip makes it 18, which `run.sh` inflates with the gzip every Linux has.
    status(
        Command::new("gzip").args(["-9", "-n", "-f"]).arg(&models),
        "gzip",
    )?;
    copy(
        &cuda.join("lib/libcudart.so.13"),
        &bundle.join("lib/libcudart.so.13"),
    )?;
    copy(stub, &bundle.join("stub/libcuda.so.1"))?;
    let script = bundle.join("run.sh");
    std::fs::write(&script, include_str!("gpu_check.sh"))
        .with_context(|| format!("writing {}", script.display()))?;
    let peer = bundle.join("peer.py");
    std::fs::write(&peer, include_str!("gpu_peer.py"))
        .with_context(|| format!("writing {}", peer.display()))?;
    let cuda_info = format!("CUDA 13.0 from PyPI, compute capability {}", compute_cap());
    std::fs::write(
        bundle.join("BUILD"),
        device_bundle::build_info(root, binary, &cuda_info),
    )
    .with_context(|| format!("writing {}/BUILD", bundle.display()))?;
    device_bundle::exclude_from_git(root, BUNDLE)?;

    device_bundle::check_size(&bundle, BUNDLE, t)?;
    eprintln!(
        "\nOn the machine with the GPU, from the repository root (carry [\"{BUNDLE}\"]):\n  bash {BUNDLE}/run.sh\n\
         It writes $OUT/gpu-check.txt and $OUT/gpu-check-timings.md. Here, `cargo xtask gpu-check run` is the dry run."
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stand_in_has_each_driver_function_once_and_nothing_else() {
        let bindings = "pub unsafe fn cuInit(Flags: c_uint) -> CUresult {\n\
            extern \"C\" {\n        fn cuInit(Flags: c_uint) -> CUresult;\n    }\n\
            extern \"C\" {\n        fn cuMemAlloc_v2(p: *mut u64, n: usize) -> CUresult;\n    }\n\
            extern \"C\" {\n        fn cuInit(Flags: c_uint) -> CUresult;\n    }\n\
            fn custom_helper() {}\n        fn not_a_driver_function(x: u32) {}\n";
        assert_eq!(driver_functions(bindings), ["cuInit", "cuMemAlloc_v2"]);
    }
}
