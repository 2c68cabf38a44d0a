//! The layering of DESIGN.md, checked against the real dependency graph: each crate's `//!`
//! says what it must not depend on, and this test holds it to that (`cargo tree`, offline).

// Test code: a failed unwrap is a failed test, at the line that failed.
#![allow(clippy::unwrap_used)]

/// What a crate that needs only the core's types must never reach: the model runtime, the async
/// runtime, the store, the shell and the crates built on them.
const ABOVE_THE_CORE: &[&str] = &[
    "candle",
    "tokio",
    "lance",
    "arrow",
    "tauri",
    "selfrag-models",
    "selfrag-hub",
    "selfrag-fixtures",
    "selfrag-index",
    "selfrag-engine",
];

/// (crate, a dependency it must have, prefixes of crates it must never reach).
const RULES: &[(&str, &str, &[&str])] = &[
    // The tests' S3 server: a store, which knows nothing of the library it holds.
    (
        "selfrag-s3-server",
        "s3s",
        &["candle", "lance", "arrow", "tauri", "selfrag-"],
    ),
    (
        "selfrag-works",
        "serde",
        &["candle", "tokio", "lance", "arrow", "tauri", "selfrag-"],
    ),
    (
        "selfrag-references",
        "selfrag-works",
        &[
            "candle",
            "tokio",
            "lance",
            "arrow",
            "tauri",
            "selfrag-core",
            "selfrag-models",
            "selfrag-hub",
            "selfrag-index",
            "selfrag-engine",
        ],
    ),
    (
        "selfrag-core",
        "serde",
        &[
            "candle",
            "tokio",
            "lance",
            "arrow",
            "tauri",
            "selfrag-models",
            "selfrag-hub",
            "selfrag-fixtures",
            "selfrag-index",
            "selfrag-engine",
            "selfrag-export",
            "selfrag-remote",
            "selfrag-eval",
            "selfrag-testkit",
        ],
    ),
    (
        "selfrag-models",
        "candle-core",
        &[
            "tokio",
            "lance",
            "tauri",
            "ureq",
            "selfrag-hub",
            "selfrag-fixtures",
            "selfrag-index",
            "selfrag-engine",
        ],
    ),
    (
        "selfrag-hub",
        "ureq",
        &[
            "candle",
            "tokenizers",
            "tokio",
            "lance",
            "tauri",
            "selfrag-models",
            "selfrag-fixtures",
            "selfrag-index",
            "selfrag-engine",
        ],
    ),
    (
        "selfrag-fixtures",
        "candle-core",
        &[
            "tokio",
            "lance",
            "tauri",
            "selfrag-models",
            "selfrag-hub",
            "selfrag-index",
            "selfrag-engine",
        ],
    ),
    (
        "selfrag-index",
        "lancedb",
        &[
            "candle",
            "tokenizers",
            "tauri",
            "selfrag-core",
            "selfrag-models",
            "selfrag-hub",
            "selfrag-fixtures",
        ],
    ),
    ("selfrag-export", "selfrag-core", ABOVE_THE_CORE),
    ("selfrag-eval", "selfrag-core", ABOVE_THE_CORE),
    (
        "selfrag-engine",
        "selfrag-core",
        &["tauri", "clap", "selfrag-fixtures"],
    ),
    (
        "selfrag-remote",
        "selfrag-core",
        &[
            "tokio",
            "lance",
            "tauri",
            "selfrag-engine",
            "selfrag-index",
            "selfrag-hub",
            "selfrag-fixtures",
        ],
    ),
    (
        "selfrag-cli",
        "selfrag-engine",
        &["tauri", "selfrag-fixtures"],
    ),
    ("selfrag-desktop", "selfrag-engine", &["selfrag-fixtures"]),
];

/// Every normal (non-dev, non-build) dependency of `package` built with `features` (cargo's
/// feature flags, e.g. `--no-default-features`), transitively, by name.
fn dependencies(package: &str, features: &[&str]) -> Vec<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    // Cargo sets CARGO_MANIFEST_DIR when it runs the test too; that one follows the checkout
    // even when the binary was built in another one sharing the target dir.
    let dir =
        std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").into());
    let manifest = format!("{dir}/../Cargo.toml");
    let out = std::process::Command::new(cargo)
        .args([
            "tree",
            "--offline",
            "-e",
            "normal",
            "--prefix",
            "none",
            "--format",
            "{p}",
        ])
        .args(["-p", package, "--manifest-path", &manifest])
        .args(features)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cargo tree -p {package}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .skip(1) // the package itself
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

#[test]
fn every_crate_stays_in_its_layer() {
    for (package, expected, forbidden) in RULES {
        let deps = dependencies(package, &[]);
        assert!(
            deps.iter().any(|d| d == expected),
            "{package}: the tree was not read: {deps:?}"
        );
        for prefix in *forbidden {
            let found: Vec<&String> = deps.iter().filter(|d| d.starts_with(prefix)).collect();
            assert!(
                found.is_empty(),
                "{package} must not depend on {prefix}*, but reaches {found:?}"
            );
        }
    }
}

#[test]
fn the_index_without_its_store_links_no_lancedb_nor_tokio() {
    // What the fuzz targets link (fuzz/Cargo.toml): a LanceDB build there takes over an hour.
    let deps = dependencies("selfrag-index", &["--no-default-features"]);
    assert!(
        deps.iter().any(|d| d == "pdf-extract"),
        "the tree was not read: {deps:?}"
    );
    let found: Vec<&String> = deps
        .iter()
        .filter(|d| {
            ["lance", "arrow", "datafusion", "tokio"]
                .iter()
                .any(|p| d.starts_with(p))
        })
        .collect();
    assert!(
        found.is_empty(),
        "selfrag-index without `store` reaches {found:?}"
    );
}

#[test]
fn the_testkit_stays_light() {
    // What xtask links: no crate of ours, so a fresh clone builds `cargo xtask` in seconds.
    let bare = dependencies("selfrag-testkit", &[]);
    assert!(
        bare.iter().any(|d| d == "serde_json"),
        "the tree was not read: {bare:?}"
    );
    let ours: Vec<&String> = bare.iter().filter(|d| d.starts_with("selfrag-")).collect();
    assert!(ours.is_empty(), "selfrag-testkit reaches {ours:?}");
    // What the tests link (`traces`): the core it builds traces of, and nothing heavy.
    let traces = dependencies("selfrag-testkit", &["--features", "traces"]);
    assert!(
        traces.iter().any(|d| d == "selfrag-core"),
        "the tree was not read: {traces:?}"
    );
    let heavy: Vec<&String> = traces
        .iter()
        .filter(|d| ABOVE_THE_CORE.iter().any(|p| d.starts_with(p)))
        .collect();
    assert!(
        heavy.is_empty(),
        "selfrag-testkit with `traces` reaches {heavy:?}"
    );
}
