//! What the build, the app and the tests need from the machine, each need with the probe that
//! shows it is there and the Debian package that provides it.
//!
//! [`install`] installs the packages of the needs that are missing (Debian and Ubuntu, with
//! `sudo` when not root); [`verify`] then runs every probe, on every platform, and fails naming
//! each missing thing and what to install. A gap in the set-up therefore fails here, in seconds
//! and with the fix, instead of deep inside a build script after ten minutes of compiling, and a
//! machine that happens to have a package installed by hand passes only because the list names
//! it: the list is the set-up.
//!
//! protoc is not a system package on any platform: `protoc-bin-vendored` brings the binary and
//! its well-known `.proto` files (Debian's `protobuf-compiler` ships the binary without them),
//! and [`protoc_env`] hands both to LanceDB's build scripts.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

use crate::{have, status};

/// How a need is seen to be met.
#[derive(Clone, Copy)]
enum Probe {
    /// A program on `PATH`.
    Program(&'static str),
    /// A `pkg-config` module, as the `-sys` crates' build scripts probe it.
    PkgConfig(&'static str),
    /// A command that must exit 0.
    Command(&'static [&'static str]),
}

#[derive(Clone, Copy, PartialEq)]
enum Scope {
    /// Building and running the app (`cargo xtask run` and `test`).
    Build,
    /// Only the tests.
    Test,
}

/// One thing the machine must have.
struct Need {
    probe: Probe,
    /// The Debian package that provides it.
    package: &'static str,
    /// Who needs it, for the error message.
    needed_by: &'static str,
    scope: Scope,
}

const fn need(probe: Probe, package: &'static str, needed_by: &'static str, scope: Scope) -> Need {
    Need {
        probe,
        package,
        needed_by,
        scope,
    }
}

use Probe::{Command as Cmd, PkgConfig, Program};
use Scope::{Build, Test};

/// The Linux needs. The `pkg-config` modules are exactly those the workspace's `-sys` crates
/// probe in their build scripts (system-deps metadata and `pkg_config::probe` calls).
#[rustfmt::skip]
const LINUX_NEEDS: &[Need] = &[
    need(Program("cc"), "build-essential", "C code in ring, zstd-sys, onig_sys", Build),
    need(Program("c++"), "build-essential", "C++ code in LanceDB's dependencies", Build),
    need(Program("pkg-config"), "pkg-config", "the -sys crates' build scripts", Build),
    need(PkgConfig("webkit2gtk-4.1"), "libwebkit2gtk-4.1-dev", "webkit2gtk-sys (Tauri's webview)", Build),
    need(PkgConfig("javascriptcoregtk-4.1"), "libjavascriptcoregtk-4.1-dev", "javascriptcore-rs-sys", Build),
    need(PkgConfig("libsoup-3.0"), "libsoup-3.0-dev", "soup3-sys", Build),
    need(PkgConfig("gtk+-3.0"), "libgtk-3-dev", "gtk-sys", Build),
    need(PkgConfig("gdk-3.0"), "libgtk-3-dev", "gdk-sys", Build),
    need(PkgConfig("gdk-x11-3.0"), "libgtk-3-dev", "gdkx11-sys", Build),
    need(PkgConfig("pango"), "libpango1.0-dev", "pango-sys", Build),
    need(PkgConfig("atk"), "libatk1.0-dev", "atk-sys", Build),
    need(PkgConfig("gdk-pixbuf-2.0"), "libgdk-pixbuf-2.0-dev", "gdk-pixbuf-sys", Build),
    need(PkgConfig("cairo"), "libcairo2-dev", "cairo-sys-rs", Build),
    need(PkgConfig("glib-2.0"), "libglib2.0-dev", "glib-sys", Build),
    need(PkgConfig("gio-2.0"), "libglib2.0-dev", "gio-sys", Build),
    need(PkgConfig("gobject-2.0"), "libglib2.0-dev", "gobject-sys", Build),
    need(PkgConfig("dbus-1"), "libdbus-1-dev", "libdbus-sys (tao)", Build),
    need(PkgConfig("x11"), "libx11-dev", "x11 (gdkx11)", Build),
    need(Program("tesseract"), "tesseract-ocr", "the app's OCR of scanned PDF pages (and its tests, with the English model)", Build),
    need(Program("Xvfb"), "xvfb", "the end-to-end tests' display", Test),
    need(Program("WebKitWebDriver"), "webkit2gtk-driver", "tauri-driver, in the end-to-end tests", Test),
    need(Program("xdotool"), "xdotool", "the end-to-end tests' native dialogs and drags", Test),
    need(Cmd(&["/usr/bin/python3", "-c", "import gi; gi.require_version('Gtk', '3.0'); from gi.repository import Gtk"]),
         "python3-gi gir1.2-gtk-3.0", "tests/e2e/drag-source.py", Test),
    need(Cmd(&["python3", "-c", "import ensurepip, venv"]), "python3-venv", "the MiniLM weights' virtual environment", Test),
    need(Program("cmake"), "cmake", "building llama-server for the server-generator tests", Test),
    need(Program("prlimit"), "util-linux", "the parsing worker's address-space fence on Linux (its heap limit is its own)", Test),
    need(Program("mount"), "mount", "the disk-full test's tmpfs", Test),
    need(Program("bibtex"), "texlive-binaries", "selfrag-export's real_tools test: BibTeX parses every .bib export", Test),
    need(Program("pandoc"), "pandoc", "selfrag-export's real_tools test: pandoc --citeproc renders the Markdown export with the CSL-JSON and BibLaTeX exports", Test),
];

fn needs(for_tests: bool) -> impl Iterator<Item = &'static Need> {
    LINUX_NEEDS
        .iter()
        .filter(move |n| cfg!(target_os = "linux") && (for_tests || n.scope == Build))
}

fn met(probe: Probe) -> bool {
    let quiet = |mut c: Command| {
        c.stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    match probe {
        Program(name) => have(name),
        PkgConfig(module) => {
            let mut c = Command::new("pkg-config");
            c.args(["--exists", module]);
            quiet(c)
        }
        Cmd(argv) => {
            let mut c = Command::new(argv[0]);
            c.args(&argv[1..]);
            quiet(c)
        }
    }
}

/// Installs the Debian packages of the needs that are not met (nothing where all are).
pub fn install(for_tests: bool) -> Result<()> {
    if !(cfg!(target_os = "linux") && have("apt-get")) {
        return Ok(());
    }
    let mut missing: Vec<&str> = needs(for_tests)
        .filter(|n| !met(n.probe))
        .flat_map(|n| n.package.split(' '))
        .collect();
    missing.sort_unstable();
    missing.dedup();
    if missing.is_empty() {
        return Ok(());
    }
    eprintln!("installing Debian packages: {}", missing.join(" "));
    let sudo = !is_root() && have("sudo");
    let apt = |args: &[&str]| {
        let mut c = if sudo {
            let mut c = Command::new("sudo");
            c.arg("apt-get");
            c
        } else {
            Command::new("apt-get")
        };
        c.args(args).env("DEBIAN_FRONTEND", "noninteractive");
        c
    };
    status(&mut apt(&["update", "-qq"]), "apt-get update")?;
    let mut install = apt(&["install", "-y", "-qq", "--no-install-recommends"]);
    install.args(&missing);
    status(&mut install, "apt-get install")
}

/// Runs every probe and fails naming each need that is not met, with its package.
pub fn verify(for_tests: bool) -> Result<()> {
    let mut problems: Vec<String> = needs(for_tests)
        .filter(|n| !met(n.probe))
        .map(|n| {
            let what = match n.probe {
                Program(p) => format!("the program `{p}`"),
                PkgConfig(m) => format!("the pkg-config module `{m}`"),
                Cmd(argv) => format!("`{}`", argv.join(" ")),
            };
            format!(
                "{what}, needed by {}: install the Debian package(s) {}",
                n.needed_by, n.package
            )
        })
        .collect();
    if !have("npm") {
        problems.push("`npm`, needed to build the UI: install Node.js 20.19 or newer".into());
    }
    if for_tests && !have("tauri-driver") {
        problems.push(
            "`tauri-driver`, needed by the end-to-end tests: `cargo install tauri-driver --locked`"
                .into(),
        );
    }
    match protoc_env() {
        Ok(env) => {
            let include = &env[1].1;
            if !include.join("google/protobuf/empty.proto").is_file() {
                problems.push(format!(
                    "google/protobuf/empty.proto under {}, needed by lance-encoding's build script",
                    include.display()
                ));
            }
            let runs = Command::new(&env[0].1)
                .arg("--version")
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if !runs {
                problems.push(format!(
                    "a protoc that runs ({} did not), needed by LanceDB's build scripts: set PROTOC \
                     to a protoc 3.12+ and PROTOC_INCLUDE to its include folder",
                    env[0].1.display()
                ));
            }
        }
        Err(e) => problems.push(format!("{e:#}")),
    }
    if problems.is_empty() {
        return Ok(());
    }
    bail!(
        "this machine lacks what the build or the tests need:\n  - {}",
        problems.join("\n  - ")
    )
}

/// `PROTOC` and `PROTOC_INCLUDE` for LanceDB's build scripts (prost-build reads both): the
/// vendored protoc and its well-known types, unless the caller set `PROTOC` (then theirs, with
/// their `PROTOC_INCLUDE` if any, else the vendored includes).
pub fn protoc_env() -> Result<[(&'static str, PathBuf); 2]> {
    let vendored_include = || {
        protoc_bin_vendored::include_path().context("finding protoc-bin-vendored's include folder")
    };
    if let Some(protoc) = std::env::var_os("PROTOC") {
        let include = match std::env::var_os("PROTOC_INCLUDE") {
            Some(dir) => PathBuf::from(dir),
            None => vendored_include()?,
        };
        return Ok([("PROTOC", protoc.into()), ("PROTOC_INCLUDE", include)]);
    }
    let protoc = protoc_bin_vendored::protoc_bin_path().context(
        "protoc-bin-vendored has no protoc for this platform: set PROTOC to a protoc 3.12+ and \
         PROTOC_INCLUDE to its include folder",
    )?;
    Ok([("PROTOC", protoc), ("PROTOC_INCLUDE", vendored_include()?)])
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}
