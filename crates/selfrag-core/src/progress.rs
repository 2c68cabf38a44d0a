//! What a running answer reports (`Progress`) and how a caller stops it (`Cancel`).

use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};

use crate::error::SelfRagError;
use crate::settings::RetrieveMode;

/// Asked between the steps of a run; `true` ends it with [`SelfRagError::Cancelled`].
pub trait Cancel {
    /// Whether the run should stop now.
    fn is_cancelled(&self) -> bool;
}

impl Cancel for AtomicBool {
    fn is_cancelled(&self) -> bool {
        // Acquire pairs with a Release store from the UI thread, though a flag needs no more.
        self.load(Ordering::Acquire)
    }
}

/// Never cancelled: for callers that always let a run finish.
impl Cancel for () {
    fn is_cancelled(&self) -> bool {
        false
    }
}

impl<F: Fn() -> bool> Cancel for F {
    fn is_cancelled(&self) -> bool {
        self()
    }
}

/// Fails with `Cancelled` if the caller asked to stop.
pub(crate) fn check(cancel: &dyn Cancel) -> Result<(), SelfRagError> {
    if cancel.is_cancelled() {
        Err(SelfRagError::Cancelled)
    } else {
        Ok(())
    }
}

/// One step of a run, in the order it happens. Segments are numbered from 0.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub enum Progress {
    /// The retrieve decision at a segment boundary (the first one is the answer's).
    RetrieveDecided {
        p_retrieve: f32,
        threshold: f32,
        mode: RetrieveMode,
        retrieved: bool,
    },
    /// The retriever returned `count` passages for `segment`.
    PassagesRetrieved { segment: usize, count: usize },
    /// `count` candidates of `segment` are being generated as one batch.
    CandidatesStarted { segment: usize, count: usize },
    /// Candidate `index` of `count` of `segment` is generated and scored.
    CandidateFinished {
        segment: usize,
        index: usize,
        count: usize,
    },
    /// The final text and citation of `segment`.
    SegmentChosen {
        segment: usize,
        text: String,
        citation: Option<usize>,
    },
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn every_cancel_kind_answers() {
        assert!(!().is_cancelled());
        let flag = AtomicBool::new(false);
        assert!(!flag.is_cancelled());
        flag.store(true, Ordering::Release);
        assert!(flag.is_cancelled());
        assert!((|| true).is_cancelled());
        assert!(matches!(check(&flag), Err(SelfRagError::Cancelled)));
        assert!(check(&()).is_ok());
    }
}
