//! # selfrag-hub: where model files come from and where they live
//!
//! This crate owns the model files, not what runs them: the manifests shipped in `models/`, the
//! lookup in the Hugging Face hub cache (the layout Python's `huggingface_hub` writes, so a
//! model fetched by any tool is found), downloads into that cache (resume, cancel, progress,
//! size and SHA-256 checks), and the check that a file is the kind of model its role needs.
//!
//! It must not depend on candle, tokio, LanceDB or Tauri: inference is selfrag-models', and a
//! tool that only fetches or checks models (xtask, an installer) can link this crate alone.
//!
//! ## Tour
//! - [`store`]: [`ModelSpec`] manifests, [`locate`] in the hub cache, and [`store::Resolved`],
//!   what the start screen says about each model.
//! - [`download`]: [`download::download_model`] and [`download::verify_model`].
//! - `gguf`: the GGUF header's `general.architecture`, read without candle.

pub mod download;
mod error;
mod gguf;
pub mod store;

pub use error::StoreError;
pub use store::{ModelLocation, ModelRole, ModelSpec, find_in_hf_cache, hf_hub_cache_dir, locate};
