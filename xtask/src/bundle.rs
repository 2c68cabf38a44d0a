//! `cargo xtask bundle [--debug]`: the installers of this platform, built with the Tauri CLI
//! from npm (`@tauri-apps/cli`, a devDependency of `ui/`): `.deb` and AppImage on Linux, `.app`
//! and `.dmg` on macOS (with the `metal` feature), `.msi` on Windows.
//!
//! The app binary is built here with Cargo exactly as `cargo xtask run` builds it (UI embedded
//! through `custom-protocol`), then `tauri bundle` packages it; so a `--debug` bundle reuses the
//! test build. Each package kind runs on its own, so one that cannot be built (an AppImage needs
//! linuxdeploy, which the Tauri CLI downloads from GitHub on first use) does not hide the others.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::{build_ui, cargo, done, exe, setup, status, step, target_dir};

/// The package kinds of this platform, as `tauri bundle --bundles` names them, with the file
/// extension each one produces.
fn kinds() -> &'static [(&'static str, &'static str)] {
    if cfg!(target_os = "macos") {
        &[("app", "app"), ("dmg", "dmg")]
    } else if cfg!(target_os = "windows") {
        &[("msi", "msi")]
    } else {
        &[("deb", "deb"), ("appimage", "AppImage")]
    }
}

/// Features of the packaged app: the UI embedded, and Metal on macOS.
fn features() -> &'static str {
    if cfg!(target_os = "macos") {
        "custom-protocol,metal"
    } else {
        "custom-protocol"
    }
}

pub(crate) fn bundle(root: &Path, args: &[String]) -> Result<()> {
    let debug = args.iter().any(|a| a == "--debug");
    if let Some(other) = args.iter().find(|a| *a != "--debug") {
        bail!("unknown option `{other}` for `cargo xtask bundle` (only --debug)");
    }
    let profile = if debug { "debug" } else { "release" };
    setup(root, false)?;
    build_ui(root)?;

    let t = step(&format!("build the app ({profile})"));
    let mut build = cargo();
    build.args(["build", "-p", "selfrag-desktop", "--features", features()]);
    if !debug {
        build.arg("--release");
    }
    status(&mut build, "cargo build (app)")?;
    done("build the app", t);

    let tauri =
        root.join("ui/node_modules/.bin")
            .join(if cfg!(windows) { "tauri.cmd" } else { "tauri" });
    if !tauri.exists() {
        bail!(
            "{} is missing: run `npm install` in ui/ (the Tauri CLI is a devDependency there)",
            tauri.display()
        );
    }
    let out = target_dir().join(profile).join("bundle");
    let mut failed = Vec::new();
    for (kind, _) in kinds() {
        let t = step(&format!("bundle {kind}"));
        let mut cmd = Command::new(&tauri);
        cmd.args(["bundle", "--bundles", kind, "--features", features()])
            .current_dir(root.join("src-tauri"))
            .env("CARGO_TARGET_DIR", target_dir())
            // AppImage tools are AppImages themselves; without FUSE they must extract to run.
            .env("APPIMAGE_EXTRACT_AND_RUN", "1");
        if debug {
            cmd.arg("--debug");
        }
        match status(&mut cmd, &format!("tauri bundle --bundles {kind}")) {
            Ok(()) => done(&format!("bundle {kind}"), t),
            Err(e) => {
                eprintln!("bundle {kind} failed: {e:#}");
                failed.push(*kind);
            }
        }
    }

    eprintln!("\npackages in {}:", out.display());
    for (kind, ext) in kinds() {
        for file in artefacts(&out.join(kind), ext)? {
            let bytes = size(&file);
            eprintln!(
                "  {:>8.1} MB  {}",
                bytes as f64 / 1_000_000.0,
                file.display()
            );
        }
    }
    eprintln!(
        "  (the app binary alone: {:.1} MB)",
        size(&target_dir().join(profile).join(exe("selfrag-desktop"))) as f64 / 1_000_000.0
    );
    if !failed.is_empty() {
        bail!(
            "could not build: {} (see the messages above; an AppImage needs linuxdeploy, which the Tauri CLI downloads from github.com into ~/.cache/tauri on first use)",
            failed.join(", ")
        );
    }
    Ok(())
}

/// The files (or `.app` folders) in `dir` ending in `.ext`; none when `dir` does not exist.
fn artefacts(dir: &Path, ext: &str) -> Result<Vec<PathBuf>> {
    if !dir.exists() {
        return Ok(Vec::new());
    }
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let path = entry
            .with_context(|| format!("listing {}", dir.display()))?
            .path();
        if path.extension().is_some_and(|e| e == ext) {
            found.push(path);
        }
    }
    found.sort();
    Ok(found)
}

/// Bytes of a file, or of everything under a folder (a macOS `.app`).
fn size(path: &Path) -> u64 {
    if path.is_dir() {
        std::fs::read_dir(path)
            .map(|entries| entries.flatten().map(|e| size(&e.path())).sum())
            .unwrap_or(0)
    } else {
        std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
    }
}
