//! A folder laid out here for a machine without Rust or network (a device call carries it
//! with the tree): the parts `cargo xtask gpu-check` and `cargo xtask cpu-check` share. Each
//! check builds its own binaries into its bundle; this module runs the `build | run` command,
//! checks that the bundle fits what a call carries, says what it was built from, and keeps it
//! out of git.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};

use crate::{done, status};

/// What a device call carries with the tree, in MiB.
const CARRY_LIMIT_MB: f64 = 64.0;
/// Room left for the tree itself.
const TREE_MB: f64 = 8.0;

/// `cargo xtask NAME [build|run]` for the bundle in `root/bundle`: `build` (the default) runs
/// `build`, `run` the bundle's `run.sh` here.
pub(crate) fn command(
    root: &Path,
    bundle: &str,
    name: &str,
    args: &[String],
    build: impl FnOnce(&Path) -> Result<()>,
) -> Result<()> {
    match args.first().map(String::as_str) {
        None | Some("build") => build(root),
        Some("run") => {
            let script = root.join(bundle).join("run.sh");
            if !script.exists() {
                bail!(
                    "{} is missing: run `cargo xtask {name} build` first",
                    script.display()
                );
            }
            status(Command::new("bash").arg(&script), "run.sh")
        }
        Some(other) => bail!("unknown `cargo xtask {name} {other}`: build or run"),
    }
}

/// Runs `cargo` (a `cargo test --no-run …` with its package, features and environment) for
/// the `models` integration-test binary, and returns that binary's path as cargo names it;
/// `what` names the build in its error.
pub(crate) fn models_test_binary(mut cargo: Command, what: &str) -> Result<PathBuf> {
    let output = cargo
        .args([
            "--test",
            "models",
            "--message-format",
            "json-render-diagnostics",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .context("starting cargo")?
        .wait_with_output()
        .context("waiting for cargo")?;
    if !output.status.success() {
        bail!("building {what} failed ({})", output.status);
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let binary = stdout
        .lines()
        .filter(|line| line.contains("\"name\":\"models\""))
        .find_map(|line| json_field(line, "executable"))
        .context("cargo named no executable for the `models` tests")?;
    Ok(PathBuf::from(binary))
}

/// Ends the step `t` of laying out `dir` (the bundle `bundle`) with its size, and fails where
/// it would not fit a device call beside the tree.
pub(crate) fn check_size(dir: &Path, bundle: &str, t: Instant) -> Result<()> {
    let bytes = folder_bytes(dir)?;
    #[allow(clippy::cast_precision_loss)]
    let mb = bytes as f64 / 1_048_576.0;
    done(&format!("lay out {bundle}/ ({mb:.1} MiB)"), t);
    if mb > CARRY_LIMIT_MB - TREE_MB {
        bail!(
            "{bundle}/ is {mb:.1} MiB: with the tree it would not fit the {CARRY_LIMIT_MB} MiB a device call carries"
        );
    }
    Ok(())
}

/// The string value of `"key":"…"` in one line of cargo's JSON (paths on Linux need no
/// unescaping but of `\\` and `\"`).
pub(crate) fn json_field(line: &str, key: &str) -> Option<String> {
    let needle = format!("\"{key}\":\"");
    let start = line.find(&needle)? + needle.len();
    let mut value = String::new();
    let mut chars = line[start..].chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some(value),
            '\\' => value.push(chars.next()?),
            c => value.push(c),
        }
    }
    None
}

/// What a bundle was built from, for the report's header: the commit, the compiler, `what`
/// else went into it, and the test binary's name.
pub(crate) fn build_info(root: &Path, binary: &Path, what: &str) -> String {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(root)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default()
    };
    let changed = git(&["status", "--porcelain", "--untracked-files=no"])
        .lines()
        .count();
    let rustc = Command::new("rustc")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    format!(
        "built from {} ({changed} files changed from it), {rustc}, {what}, binary {}\n",
        git(&["rev-parse", "--short", "HEAD"]),
        binary
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    )
}

/// `/BUNDLE/` in `.git/info/exclude`, once: a bundle is a build output, never committed.
pub(crate) fn exclude_from_git(root: &Path, bundle: &str) -> Result<()> {
    let out = Command::new("git")
        .args(["rev-parse", "--git-path", "info/exclude"])
        .current_dir(root)
        .output()
        .context("running git rev-parse")?;
    if !out.status.success() {
        bail!("git rev-parse --git-path info/exclude failed");
    }
    let exclude = root.join(String::from_utf8_lossy(&out.stdout).trim());
    let line = format!("/{bundle}/");
    let text = std::fs::read_to_string(&exclude).unwrap_or_default();
    if text.lines().any(|l| l.trim() == line) {
        return Ok(());
    }
    if let Some(dir) = exclude.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let separator = if text.is_empty() || text.ends_with('\n') {
        ""
    } else {
        "\n"
    };
    std::fs::write(&exclude, format!("{text}{separator}{line}\n"))
        .with_context(|| format!("writing {}", exclude.display()))
}

pub(crate) fn folder_bytes(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry.with_context(|| format!("reading {}", dir.display()))?;
        let meta = entry
            .metadata()
            .with_context(|| format!("reading {}", entry.path().display()))?;
        total += if meta.is_dir() {
            folder_bytes(&entry.path())?
        } else {
            meta.len()
        };
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_executable_is_read_from_cargos_json() {
        let line = r#"{"reason":"compiler-artifact","target":{"name":"models","kind":["test"]},"executable":"/t/debug/deps/models-0a1b","fresh":true}"#;
        assert_eq!(
            json_field(line, "executable").as_deref(),
            Some("/t/debug/deps/models-0a1b")
        );
        assert_eq!(
            json_field(r#"{"executable":"/a \"b\"/c"}"#, "executable").as_deref(),
            Some(r#"/a "b"/c"#)
        );
        assert_eq!(json_field(r#"{"executable":null}"#, "executable"), None);
        assert_eq!(json_field(r#"{"executable":"/cut"#, "executable"), None);
    }
}
