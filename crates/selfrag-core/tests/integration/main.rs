//! Integration tests of selfrag-core, one binary: a scripted Generator pins every formula,
//! branch and known reference-code defect of SELFRAG.md.

// A failing test should stop loudly at the line that failed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod closed_set;
mod defects;
mod long_form;
mod properties;
mod ranking;
mod replay;
mod rerank;
mod short_form;
mod trace_json;
mod util;
