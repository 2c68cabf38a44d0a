//! Where models live: the TOML manifests of `models/` (embedded at build time) and the
//! Hugging Face hub cache (`~/.cache/huggingface/hub` layout, shared with Python tools), so a
//! model downloaded once by anything is found here. Nothing is downloaded in this module (see
//! [`crate::download`]).

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::StoreError;

/// The manifests shipped with the app, `(file name, contents)`.
const MANIFESTS: [(&str, &str); 6] = [
    (
        "selfrag-7b-q4km.toml",
        include_str!("../../../models/selfrag-7b-q4km.toml"),
    ),
    (
        "selfrag-13b-q4km.toml",
        include_str!("../../../models/selfrag-13b-q4km.toml"),
    ),
    (
        "sciphi-selfrag-mistral-7b-q4km.toml",
        include_str!("../../../models/sciphi-selfrag-mistral-7b-q4km.toml"),
    ),
    (
        "raglab-selfrag-llama3-8b-q4km.toml",
        include_str!("../../../models/raglab-selfrag-llama3-8b-q4km.toml"),
    ),
    (
        "contriever-msmarco.toml",
        include_str!("../../../models/contriever-msmarco.toml"),
    ),
    (
        "mcontriever-msmarco.toml",
        include_str!("../../../models/mcontriever-msmarco.toml"),
    ),
];

/// Id of the default generator manifest.
pub const DEFAULT_GENERATOR: &str = "selfrag-7b-q4km";
/// Id of the default embedder manifest.
pub const DEFAULT_EMBEDDER: &str = "contriever-msmarco";

/// What a model is used for (a manifest's `role`).
pub use selfrag_core::ModelRole;

/// One file of a model repository.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelFile {
    /// Path inside the repository.
    pub name: String,
    /// Hex SHA-256 of the file, where recorded. Downloads are checked against it (and, for
    /// files stored with Git LFS, against the hub's own SHA-256 as well).
    #[serde(default)]
    pub sha256: Option<String>,
    /// Exact size in bytes, where recorded: a cached file of another size is not accepted.
    #[serde(default)]
    pub size_bytes: Option<u64>,
    /// Whether the model is unusable without it.
    #[serde(default = "default_true")]
    pub required: bool,
}

fn default_true() -> bool {
    true
}

/// A model manifest from `models/*.toml`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    /// Stable id, also the manifest's file stem.
    pub id: String,
    pub role: ModelRole,
    /// One line for people choosing a model.
    pub description: String,
    /// Hugging Face repository, `org/name`.
    pub repo: String,
    /// Branch, tag or commit.
    pub revision: String,
    /// SPDX-style license id of the weights.
    pub license: String,
    /// The licence in words, for people choosing a model: what it allows and forbids, and the
    /// licences it inherits (e.g. Llama 2's). Every shipped manifest has it.
    #[serde(default)]
    pub license_terms: String,
    /// Where the licence is stated (the model card, the code's LICENSE file), as URLs.
    #[serde(default)]
    pub license_sources: Vec<String>,
    /// Approximate download size in bytes.
    pub size_bytes: u64,
    pub files: Vec<ModelFile>,
    /// Caveats, e.g. that no public conversion exists.
    #[serde(default)]
    pub note: Option<String>,
    /// Whether `repo` holds `files` to download. `false` for a checkpoint published only as
    /// PyTorch or safetensors weights: `files` then names the GGUF a llama.cpp conversion is
    /// expected to write, and a download is refused saying how to convert it
    /// (docs/MODELS.md).
    #[serde(default = "default_true")]
    pub downloadable: bool,
}

impl ModelSpec {
    /// Parses one manifest; `name` is used in errors.
    pub fn from_toml(name: &str, text: &str) -> Result<Self, StoreError> {
        let spec: Self = toml::from_str(text).map_err(|e| StoreError::InvalidManifest {
            name: name.to_owned(),
            reason: e.to_string(),
        })?;
        if spec.files.iter().all(|f| !f.required) {
            return Err(StoreError::InvalidManifest {
                name: name.to_owned(),
                reason: "lists no required file".to_owned(),
            });
        }
        for file in &spec.files {
            let bad_hash = file.sha256.as_deref().is_some_and(|h| {
                h.len() != 64
                    || !h
                        .bytes()
                        .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
            });
            if bad_hash {
                return Err(StoreError::InvalidManifest {
                    name: name.to_owned(),
                    reason: format!("the sha256 of {} is not 64 lowercase hex digits", file.name),
                });
            }
            let unsafe_name = file.name.is_empty()
                || file.name.starts_with('/')
                || file.name.contains('\\')
                || file
                    .name
                    .split('/')
                    .any(|part| part.is_empty() || part == "." || part == "..");
            if unsafe_name {
                return Err(StoreError::InvalidManifest {
                    name: name.to_owned(),
                    reason: format!(
                        "file name `{}` is not a plain path inside the repository",
                        file.name
                    ),
                });
            }
        }
        Ok(spec)
    }

    /// Every manifest shipped with the app.
    pub fn all() -> Result<Vec<Self>, StoreError> {
        MANIFESTS
            .iter()
            .map(|(name, text)| Self::from_toml(name, text))
            .collect()
    }

    /// The shipped manifest with this id.
    pub fn by_id(id: &str) -> Result<Self, StoreError> {
        Self::all()?
            .into_iter()
            .find(|spec| spec.id == id)
            .ok_or_else(|| StoreError::InvalidManifest {
                name: id.to_owned(),
                reason: "no shipped manifest has this id".to_owned(),
            })
    }

    /// The default generator, Self-RAG 7B Q4_K_M.
    pub fn default_generator() -> Result<Self, StoreError> {
        Self::by_id(DEFAULT_GENERATOR)
    }

    /// The default embedder, Contriever-MS MARCO.
    pub fn default_embedder() -> Result<Self, StoreError> {
        Self::by_id(DEFAULT_EMBEDDER)
    }

    /// The first required file: the GGUF of a generator.
    pub fn primary_file(&self) -> Option<&ModelFile> {
        self.files.iter().find(|f| f.required)
    }
}

/// The result of looking for a model on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelLocation {
    /// A generator's GGUF file, or an embedder's directory, when every required file is there.
    pub found: Option<PathBuf>,
    /// The directories looked at, for an error message that says where to put the files.
    pub searched: Vec<PathBuf>,
}

/// The hub cache: `$HF_HUB_CACHE`, else `$HF_HOME/hub`, else `~/.cache/huggingface/hub`.
pub fn hf_hub_cache_dir() -> Option<PathBuf> {
    let non_empty = |key: &str| std::env::var_os(key).filter(|v| !v.is_empty());
    if let Some(dir) = non_empty("HF_HUB_CACHE") {
        return Some(PathBuf::from(dir));
    }
    if let Some(home) = non_empty("HF_HOME") {
        return Some(PathBuf::from(home).join("hub"));
    }
    let home = non_empty("HOME").or_else(|| non_empty("USERPROFILE"))?;
    Some(
        PathBuf::from(home)
            .join(".cache")
            .join("huggingface")
            .join("hub"),
    )
}

/// `models--{org}--{name}` inside the cache.
pub(crate) fn repo_dir(cache: &Path, repo_id: &str) -> PathBuf {
    cache.join(format!("models--{}", repo_id.replace('/', "--")))
}

/// Snapshot directories of a cached repo: the one `refs/{revision}` names first (or the
/// revision itself when it is a commit), then `refs/main`'s, then the others in name order.
fn snapshot_dirs(repo: &Path, revision: &str) -> Vec<PathBuf> {
    let snapshots = repo.join("snapshots");
    let mut dirs = Vec::new();
    let is_commit = revision.len() == 40 && revision.bytes().all(|b| b.is_ascii_hexdigit());
    if is_commit {
        dirs.push(snapshots.join(revision));
    }
    for name in [revision, "main"] {
        if let Ok(commit) = std::fs::read_to_string(repo.join("refs").join(name)) {
            let commit = commit.trim();
            let dir = snapshots.join(commit);
            if !commit.is_empty() && !dirs.contains(&dir) {
                dirs.push(dir);
            }
        }
    }
    let mut others: Vec<PathBuf> = std::fs::read_dir(&snapshots)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    others.sort();
    for dir in others {
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    dirs
}

/// `filename` of `repo_id` in the hub cache, if any snapshot has it.
pub fn find_in_hf_cache(repo_id: &str, filename: &str) -> Option<PathBuf> {
    let cache = hf_hub_cache_dir()?;
    find_in_cache(&cache, repo_id, filename)
}

/// As [`find_in_hf_cache`], in an explicit cache directory.
pub fn find_in_cache(cache: &Path, repo_id: &str, filename: &str) -> Option<PathBuf> {
    snapshot_dirs(&repo_dir(cache, repo_id), "main")
        .into_iter()
        .map(|dir| dir.join(filename))
        .find(|path| path.is_file())
}

/// Looks for `spec` in the hub cache.
pub fn locate(spec: &ModelSpec) -> ModelLocation {
    match hf_hub_cache_dir() {
        Some(cache) => locate_in(&cache, spec),
        None => ModelLocation {
            found: None,
            searched: Vec::new(),
        },
    }
}

/// A regular file (a snapshot's symlink resolves to its blob) of the recorded size, if any.
fn file_is_usable(path: &Path, file: &ModelFile) -> bool {
    match std::fs::metadata(path) {
        Ok(meta) => meta.is_file() && file.size_bytes.is_none_or(|size| meta.len() == size),
        Err(_) => false,
    }
}

/// Looks for `spec` in an explicit hub-cache directory.
pub fn locate_in(cache: &Path, spec: &ModelSpec) -> ModelLocation {
    let repo = repo_dir(cache, &spec.repo);
    let dirs: Vec<PathBuf> = snapshot_dirs(&repo, &spec.revision)
        .into_iter()
        .filter(|dir| dir.is_dir())
        .collect();
    let searched = if dirs.is_empty() { vec![repo] } else { dirs };
    let complete = searched.iter().find(|dir| {
        spec.files
            .iter()
            .filter(|f| f.required)
            .all(|f| file_is_usable(&dir.join(&f.name), f))
    });
    let found = complete.and_then(|dir| match spec.role {
        ModelRole::Generator => spec.primary_file().map(|f| dir.join(&f.name)),
        ModelRole::Embedder => Some(dir.clone()),
    });
    ModelLocation { found, searched }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_manifests_parse_and_ids_match_file_names() {
        let specs = ModelSpec::all();
        assert!(specs.is_ok(), "{specs:?}");
        for ((file, _), spec) in MANIFESTS.iter().zip(specs.unwrap_or_default()) {
            assert_eq!(Some(spec.id.as_str()), file.strip_suffix(".toml"));
        }
    }

    #[test]
    fn defaults_are_the_documented_models() {
        let generator = ModelSpec::default_generator().ok();
        let generator_file = generator
            .as_ref()
            .and_then(|g| g.primary_file())
            .map(|f| f.name.as_str());
        assert_eq!(
            generator.as_ref().map(|g| g.repo.as_str()),
            Some("m4r1/selfrag_llama2_7b-GGUF")
        );
        assert_eq!(generator_file, Some("selfrag_llama2_7b.q4_k_m.gguf"));
        let embedder = ModelSpec::default_embedder().ok();
        assert_eq!(embedder.as_ref().map(|e| e.role), Some(ModelRole::Embedder));
        assert_eq!(
            embedder.as_ref().map(|e| e.repo.as_str()),
            Some("facebook/contriever-msmarco")
        );
    }

    #[test]
    fn unknown_manifest_fields_are_rejected_with_the_file_name() {
        let err = ModelSpec::from_toml("bad.toml", "id = 1")
            .err()
            .map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.contains("bad.toml")));
    }
}

/// A model as the start screen reports it: found or not, where the app looked, and the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// Human name, e.g. the manifest's description.
    pub name: String,
    /// A generator's GGUF file or an embedder's folder.
    pub found: Option<PathBuf>,
    pub searched: Vec<PathBuf>,
    /// What to do when it is missing.
    pub fix: String,
    /// The manifest the model was looked up by; `None` when the environment named a path, so
    /// downloading would not change what is used.
    pub spec: Option<ModelSpec>,
}

/// The generator: `explicit` (from `SELFRAG_GENERATOR`) if given, else the default manifest's
/// file in the hub cache.
pub fn resolve_generator(explicit: Option<&Path>) -> Resolved {
    resolve(
        ModelSpec::default_generator(),
        explicit,
        "SELFRAG_GENERATOR",
        "a Self-RAG GGUF file",
    )
}

/// The embedder: `explicit` (from `SELFRAG_EMBEDDER`) if given, else the default manifest's
/// snapshot folder in the hub cache.
pub fn resolve_embedder(explicit: Option<&Path>) -> Resolved {
    resolve(
        ModelSpec::default_embedder(),
        explicit,
        "SELFRAG_EMBEDDER",
        "a BERT model folder",
    )
}

fn resolve(
    spec: Result<ModelSpec, StoreError>,
    explicit: Option<&Path>,
    variable: &str,
    what: &str,
) -> Resolved {
    let spec = match spec {
        Ok(spec) => spec,
        Err(e) => {
            return Resolved {
                name: variable.to_owned(),
                found: None,
                searched: Vec::new(),
                fix: format!("the shipped model manifest is broken ({e}); reinstall the app"),
                spec: None,
            };
        }
    };
    let files: Vec<&str> = spec
        .files
        .iter()
        .filter(|f| f.required)
        .map(|f| f.name.as_str())
        .collect();
    let download = format!(
        "Download it here, or with `selfrag models pull {}` or `huggingface-cli download {} {}` (all land in the Hugging Face cache, where the app looks), or set {variable} to {what}.",
        spec.id,
        spec.repo,
        files.join(" ")
    );
    if let Some(path) = explicit {
        let exists = match spec.role {
            ModelRole::Generator => path.is_file(),
            ModelRole::Embedder => path.is_dir(),
        };
        return Resolved {
            name: spec.description.clone(),
            found: exists.then(|| path.to_path_buf()),
            searched: vec![path.to_path_buf()],
            fix: format!(
                "{variable} points at {}, which does not exist. {download}",
                path.display()
            ),
            spec: None,
        };
    }
    let location = locate(&spec);
    let searched = if location.searched.is_empty() {
        hf_hub_cache_dir().into_iter().collect()
    } else {
        location.searched
    };
    Resolved {
        name: spec.description.clone(),
        found: location.found,
        searched,
        fix: download,
        spec: Some(spec),
    }
}
