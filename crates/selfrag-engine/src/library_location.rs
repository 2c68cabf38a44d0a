//! The library's location as the app shows and changes it: where the library is, whether the
//! environment fixes it (`SELFRAG_LIBRARY`), and the saved choice that applies at the next start.
//! A change of location takes effect when the app starts again: the open library, its jobs and
//! its watched folders belong to the location they were opened at.

use serde::{Deserialize, Serialize};

use crate::{EngineConfig, EngineError, LIBRARY_ENV, LibraryLocation};

/// The library's location as the settings show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct LibraryLocationState {
    /// The library open now: a folder's path, or a shared library's `s3://`, `gs://` or `az://`
    /// location.
    pub location: String,
    /// Whether several computers may share it.
    pub shared: bool,
    /// The folder the library is in when no location is chosen.
    pub default_folder: String,
    /// Set when `SELFRAG_LIBRARY` fixes the location for this run.
    pub fixed_by_env: bool,
    /// The location chosen for the next start, where it is not the one open now.
    pub next_start: Option<String>,
}

/// Whether `SELFRAG_LIBRARY` fixes the library's location for this run.
pub fn library_fixed_by_env() -> bool {
    std::env::var_os(LIBRARY_ENV).is_some_and(|v| !v.is_empty())
}

/// The state of `config`'s library, with `saved` the location the settings hold for the next
/// start (`None`: the default folder).
pub fn library_location_state(config: &EngineConfig, saved: Option<&str>) -> LibraryLocationState {
    let location = config.library_location();
    let fixed_by_env = library_fixed_by_env();
    let next = match parse_saved_location(saved) {
        Ok(Some(next)) => next,
        Ok(None) => LibraryLocation::Folder(config.data_dir.join("library")),
        Err(_) => location.clone(),
    };
    LibraryLocationState {
        shared: location.is_shared(),
        next_start: (!fixed_by_env && next != location).then(|| next.to_string()),
        location: location.to_string(),
        default_folder: config.data_dir.join("library").display().to_string(),
        fixed_by_env,
    }
}

/// A location as the settings hold it (`None`: the default folder), read; an unreadable one is
/// an error naming the setting.
pub fn parse_saved_location(saved: Option<&str>) -> Result<Option<LibraryLocation>, EngineError> {
    saved
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            LibraryLocation::parse(s)
                .map_err(|e| EngineError::Index(crate::set_by(e, "the Library location setting")))
        })
        .transpose()
}
