//! The sample documents that ship with the app, written for the project and kept in the
//! repository's `assets/samples/`: how an answer is made, a short tour of the badges, and how to
//! check a citation. A first question can be asked about them the moment the models are there.
//! They are compiled in and written to `DATA_DIR/samples` on request, so the app and the CLI
//! index them like any folder.

use std::path::PathBuf;

use crate::{Engine, EngineError};

/// (file name, Markdown) of each sample document.
pub const SAMPLE_DOCUMENTS: &[(&str, &str)] = &[
    (
        "how-self-rag-answers.md",
        include_str!("../../../assets/samples/how-self-rag-answers.md"),
    ),
    (
        "reading-the-badges.md",
        include_str!("../../../assets/samples/reading-the-badges.md"),
    ),
    (
        "checking-a-citation.md",
        include_str!("../../../assets/samples/checking-a-citation.md"),
    ),
];

impl Engine {
    /// Writes the sample documents into `DATA_DIR/samples` and returns that folder, for the
    /// caller to index. A sample already there with the same text is left as it is (its
    /// modification time too, so indexing it again finds it unchanged); one the user edited
    /// is written back.
    pub fn write_sample_documents(&self) -> Result<PathBuf, EngineError> {
        let dir = self.config().data_dir.join("samples");
        std::fs::create_dir_all(&dir).map_err(|source| EngineError::Write {
            path: dir.clone(),
            source,
        })?;
        for (name, text) in SAMPLE_DOCUMENTS {
            let path = dir.join(name);
            if std::fs::read(&path).is_ok_and(|held| held == text.as_bytes()) {
                continue;
            }
            crate::write_atomically(&path, text.as_bytes())?;
        }
        Ok(dir)
    }
}
