//! The app's persisted settings: the ask settings (weights, δ, K, mode, beam, long or short
//! form, hard constraints), the theme, the device, the embedder's precision, the generator's KV
//! cache and dummy prefix, the generator server's URL, the export options, how the answer on
//! screen cites (numbers or author–year) and whether works are looked up online by their DOI
//! or arXiv id, in one JSON file under the platform config dir
//! (`SELFRAG_CONFIG_DIR` overrides it).
//!
//! Saves are atomic ([`crate::write_atomically`]). A settings file that cannot be parsed is
//! never deleted: it is renamed to `settings.json.broken-<unix seconds>`, the defaults are used,
//! and [`LoadedSettings::notice`] says so, so the UI can tell the user where their old file went.
//! Unknown fields are ignored and missing ones take their defaults, so files written by other
//! versions load.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use selfrag_core::{CachePrecision, DeviceChoice, DummyPrefix, EmbedderPrecision, Settings};
use serde::{Deserialize, Serialize};

use crate::{EngineError, ExportOptions};
use selfrag_export::CitationStyle;

/// The file name inside the config dir.
pub const SETTINGS_FILE: &str = "settings.json";

/// The colour scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub enum Theme {
    /// Follow the system's light or dark preference.
    #[default]
    System,
    Light,
    Dark,
}

/// Everything the app remembers between runs.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct AppSettings {
    /// The settings a question is asked with.
    pub ask: Settings,
    pub theme: Theme,
    pub device: DeviceChoice,
    /// How the embedder multiplies on the CPU.
    pub embedder_precision: EmbedderPrecision,
    /// How the local generator's KV cache holds keys and values; `None`: the device's default
    /// (8-bit on most CPUs). With `embedder_precision` f32 it is the app's "Exact numbers".
    #[cfg_attr(feature = "typescript", ts(optional))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_precision: Option<CachePrecision>,
    /// Where the generator's tokenizer puts the dummy prefix: the fine-tuning's (the default),
    /// or the reference code's, to reproduce its numbers.
    pub dummy_prefix: DummyPrefix,
    /// The server that generates (llama.cpp's, or OpenAI-compatible at a URL ending in `/v1`);
    /// `None`: this computer. Its API key is not here (see `generator_server`).
    #[cfg_attr(feature = "typescript", ts(optional))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generator_url: Option<String>,
    /// The model to ask that server for, where it serves several; `None`: the one it serves.
    #[cfg_attr(feature = "typescript", ts(optional))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator_model: Option<String>,
    /// The library's location from the next start on: a folder, or a shared library's
    /// `s3://`, `gs://` or `az://` location; `None`: the folder `library` in the data folder.
    /// Its credentials are not here: they come from the store's own environment and files.
    #[cfg_attr(feature = "typescript", ts(optional))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub library_location: Option<String>,
    /// The embeddings server (OpenAI-compatible `/v1/embeddings`) from the next start on;
    /// `None`: the embedder on this computer. Its API key is not here (`embedder-api-key`).
    #[cfg_attr(feature = "typescript", ts(optional))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedder_url: Option<String>,
    /// The model to ask that server for, where it serves several; `None`: the one it serves.
    #[cfg_attr(feature = "typescript", ts(optional))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedder_model: Option<String>,
    /// The export menu's last choices.
    pub export: ExportOptions,
    /// How the answer on screen cites its passages: numbers (`[1]`, the default) or
    /// author–year (`Marrow & Ødegård 1998, p. 2`); pandoc citations show as author–year.
    pub citation_display: CitationStyle,
    /// Look up the works of indexed documents by their DOI (doi.org: Crossref, DataCite) or
    /// arXiv id (export.arxiv.org). Off by default: only the identifier is sent, nothing of a
    /// document's text, and nothing at all while this is off.
    pub look_up_works: bool,
}

/// The settings as loaded at start, with where they live and what went wrong, if anything.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct LoadedSettings {
    pub settings: AppSettings,
    /// The settings file.
    pub path: String,
    /// Set when the file could not be used: what happened and where the old file is now.
    pub notice: Option<String>,
}

/// The settings file and the settings in force.
#[derive(Debug)]
pub struct SettingsStore {
    path: PathBuf,
    current: Mutex<AppSettings>,
    notice: Option<String>,
    /// The broken file could not be moved aside: saving would overwrite it.
    keep_file: bool,
}

/// The config dir: `SELFRAG_CONFIG_DIR` when set, else the platform's (e.g.
/// `~/.config/selfrag-desktop`).
pub fn config_dir_from_env() -> PathBuf {
    std::env::var_os("SELFRAG_CONFIG_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            directories::ProjectDirs::from("org", "selfrag", "selfrag-desktop")
                .map(|d| d.config_dir().to_path_buf())
        })
        .unwrap_or_else(|| PathBuf::from(".selfrag"))
}

/// Whether `SELFRAG_DEVICE` is set: it then wins over the saved device choice.
pub fn device_fixed_by_env() -> bool {
    std::env::var_os("SELFRAG_DEVICE").is_some_and(|v| !v.is_empty())
}

/// The environment variable that fixes the embedder's precision for a run.
pub const EMBEDDER_PRECISION_ENV: &str = "SELFRAG_EMBEDDER_PRECISION";

/// Whether `SELFRAG_EMBEDDER_PRECISION` is set: it then wins over the saved choice.
pub fn embedder_precision_fixed_by_env() -> bool {
    std::env::var_os(EMBEDDER_PRECISION_ENV).is_some_and(|v| !v.is_empty())
}

/// Whether `SELFRAG_KV_CACHE` is set: it then wins over the saved choice.
pub fn cache_precision_fixed_by_env() -> bool {
    std::env::var_os(selfrag_models::KV_CACHE_ENV).is_some_and(|v| !v.is_empty())
}

/// The environment variable that fixes where the generator's tokenizer puts the dummy prefix.
pub const DUMMY_PREFIX_ENV: &str = "SELFRAG_DUMMY_PREFIX";

/// Whether `SELFRAG_DUMMY_PREFIX` is set: it then wins over the saved choice.
pub fn dummy_prefix_fixed_by_env() -> bool {
    std::env::var_os(DUMMY_PREFIX_ENV).is_some_and(|v| !v.is_empty())
}

impl SettingsStore {
    /// Loads `dir/settings.json`; a missing file gives the defaults, a broken one is moved
    /// aside (see the module doc).
    pub fn open(dir: &Path) -> Self {
        let path = dir.join(SETTINGS_FILE);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Self::with(path, AppSettings::default(), None, false);
            }
            Err(e) => {
                let notice = format!(
                    "The settings file {} could not be read ({e}); the defaults are in use and will not be saved over it. Check its permissions.",
                    path.display()
                );
                tracing::warn!("{notice}");
                return Self::with(path, AppSettings::default(), Some(notice), true);
            }
        };
        match serde_json::from_slice::<AppSettings>(&bytes) {
            Ok(settings) => Self::with(path, settings, None, false),
            Err(parse) => {
                let (notice, keep_file) = move_aside(&path, &parse.to_string());
                tracing::warn!("{notice}");
                Self::with(path, AppSettings::default(), Some(notice), keep_file)
            }
        }
    }

    /// The store for the environment's config dir.
    pub fn from_env() -> Self {
        Self::open(&config_dir_from_env())
    }

    fn with(path: PathBuf, settings: AppSettings, notice: Option<String>, keep: bool) -> Self {
        Self {
            path,
            current: Mutex::new(settings),
            notice,
            keep_file: keep,
        }
    }

    /// The settings file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The settings in force.
    pub fn get(&self) -> AppSettings {
        self.lock().clone()
    }

    /// What the UI gets at start.
    pub fn loaded(&self) -> LoadedSettings {
        LoadedSettings {
            settings: self.get(),
            path: self.path.display().to_string(),
            notice: self.notice.clone(),
        }
    }

    /// Writes `settings` to the file atomically and puts them in force; returns the previous
    /// ones.
    pub fn save(&self, settings: AppSettings) -> Result<AppSettings, EngineError> {
        if self.keep_file {
            return Err(EngineError::Write {
                path: self.path.clone(),
                source: std::io::Error::other(
                    "the settings file could not be read or moved aside, so it is not overwritten; fix or remove it and restart",
                ),
            });
        }
        let json = serde_json::to_vec_pretty(&settings).map_err(|e| EngineError::Write {
            path: self.path.clone(),
            source: std::io::Error::other(e),
        })?;
        let mut current = self.lock();
        crate::write_atomically(&self.path, &json)?;
        Ok(std::mem::replace(&mut current, settings))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, AppSettings> {
        // Replaced whole under the lock: never half-updated.
        self.current.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Renames the unparseable file to `settings.json.broken-<unix seconds>` (a free name); returns
/// the notice for the user and whether the file is still in place.
fn move_aside(path: &Path, why: &str) -> (String, bool) {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| SETTINGS_FILE.into());
    let mut aside = path.with_file_name(format!("{name}.broken-{secs}"));
    let mut n = 2;
    while aside.exists() {
        aside = path.with_file_name(format!("{name}.broken-{secs}-{n}"));
        n += 1;
    }
    match std::fs::rename(path, &aside) {
        Ok(()) => (
            format!(
                "The settings file {} could not be parsed ({why}). It was kept as {} and the defaults are in use.",
                path.display(),
                aside.display()
            ),
            false,
        ),
        Err(e) => (
            format!(
                "The settings file {} could not be parsed ({why}) nor moved aside ({e}); the defaults are in use and will not be saved over it. Fix or remove the file.",
                path.display()
            ),
            true,
        ),
    }
}

#[cfg(test)]
mod tests {
    use selfrag_core::{CritiqueWeights, RetrieveMode};

    use super::*;
    use crate::ExportFormat;

    fn changed() -> AppSettings {
        AppSettings {
            ask: Settings {
                mode: RetrieveMode::Always,
                threshold: 0.35,
                k: 3,
                weights: CritiqueWeights {
                    rel: 0.5,
                    sup: 2.0,
                    use_: 0.0,
                },
                hard_constraints: true,
                long_form: true,
                beam_width: 3,
                ..Settings::default()
            },
            theme: Theme::Dark,
            device: DeviceChoice::Cpu,
            embedder_precision: EmbedderPrecision::F32,
            cache_precision: Some(CachePrecision::F32),
            dummy_prefix: DummyPrefix::EveryFragment,
            generator_url: Some("http://gpu-box:8080".into()),
            generator_model: Some("selfrag/selfrag_llama2_13b".into()),
            library_location: Some("s3://lab/papers".into()),
            embedder_url: Some("http://gpu-box:8081".into()),
            embedder_model: Some("contriever-msmarco".into()),
            export: ExportOptions {
                format: ExportFormat::Bib,
                support_labels: true,
                only_supported: true,
                ..ExportOptions::default()
            },
            citation_display: CitationStyle::AuthorYear,
            look_up_works: true,
        }
    }

    fn files(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn no_file_gives_the_defaults_and_writes_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let store = SettingsStore::open(&tmp.path().join("cfg"));
        assert_eq!(store.get(), AppSettings::default());
        assert_eq!(store.loaded().notice, None);
        assert!(!tmp.path().join("cfg").exists());
    }

    #[test]
    fn settings_round_trip_through_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        let store = SettingsStore::open(tmp.path());
        let previous = store.save(changed()).unwrap();
        assert_eq!(previous, AppSettings::default());
        assert_eq!(store.get(), changed());
        let reopened = SettingsStore::open(tmp.path());
        assert_eq!(reopened.get(), changed());
        assert_eq!(reopened.loaded().notice, None);
        assert_eq!(files(tmp.path()), [SETTINGS_FILE], "no temp file left");
        let text = std::fs::read_to_string(tmp.path().join(SETTINGS_FILE)).unwrap();
        assert!(text.contains("\"theme\": \"dark\"") && text.contains("\"onlySupported\": true"));
        assert!(
            text.contains("\"citationDisplay\": \"authorYear\""),
            "{text}"
        );
        assert!(text.contains("\"lookUpWorks\": true"), "{text}");
        assert!(
            text.contains("\"cachePrecision\": \"f32\"")
                && text.contains("\"dummyPrefix\": \"every-fragment\""),
            "{text}"
        );
    }

    #[test]
    fn missing_fields_take_defaults_and_unknown_ones_are_ignored() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(
            tmp.path().join(SETTINGS_FILE),
            r#"{"theme":"light","ask":{"k":7},"fromAFutureVersion":1}"#,
        )
        .unwrap();
        let s = SettingsStore::open(tmp.path()).get();
        assert_eq!(s.theme, Theme::Light);
        assert_eq!(s.ask.k, 7);
        assert_eq!(s.ask.threshold, Settings::default().threshold);
        assert_eq!(s.device, DeviceChoice::Auto);
        // A file from before the embedder precision was a setting: int8, the default.
        assert_eq!(s.embedder_precision, EmbedderPrecision::Int8);
        // From before the KV cache and the dummy prefix were: the device's default cache, and
        // the prefix of fine-tuning.
        assert_eq!(s.cache_precision, None);
        assert_eq!(s.dummy_prefix, DummyPrefix::TextStart);
        // From before answers could cite author–year: numbers.
        assert_eq!(s.citation_display, CitationStyle::Numbers);
        // From before works could be looked up: nothing is sent.
        assert!(!s.look_up_works);
    }

    #[test]
    fn a_broken_file_is_kept_aside_reported_and_replaced_by_defaults() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join(SETTINGS_FILE);
        std::fs::write(&file, b"{\"theme\": \"dark\", oops").unwrap();
        let store = SettingsStore::open(tmp.path());
        assert_eq!(store.get(), AppSettings::default());
        let notice = store.loaded().notice.unwrap();
        let names = files(tmp.path());
        assert_eq!(names.len(), 1, "{names:?}");
        assert!(names[0].starts_with("settings.json.broken-"), "{names:?}");
        assert!(
            notice.contains(&names[0]),
            "the notice names the kept file: {notice}"
        );
        assert!(notice.contains("could not be parsed"), "{notice}");
        assert_eq!(
            std::fs::read(tmp.path().join(&names[0])).unwrap(),
            b"{\"theme\": \"dark\", oops",
            "the broken file's content is kept"
        );
        // Saving now writes a fresh file next to the kept one.
        store.save(changed()).unwrap();
        assert_eq!(files(tmp.path()).len(), 2);
        assert_eq!(SettingsStore::open(tmp.path()).get(), changed());
    }

    #[test]
    fn wrong_types_count_as_broken_and_a_second_breakage_gets_its_own_name() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join(SETTINGS_FILE);
        std::fs::write(&file, br#"{"theme":"purple"}"#).unwrap();
        let first = SettingsStore::open(tmp.path());
        assert!(first.loaded().notice.unwrap().contains("purple"));
        std::fs::write(&file, br#"{"ask":{"k":"five"}}"#).unwrap();
        let second = SettingsStore::open(tmp.path());
        assert!(second.loaded().notice.is_some());
        let broken = files(tmp.path())
            .into_iter()
            .filter(|n| n.contains(".broken-"))
            .count();
        assert_eq!(broken, 2, "neither broken file is lost");
    }
}
