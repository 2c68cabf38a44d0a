//! Model manifests and the hub-cache layout.

// Test code: a failed unwrap is a failed test, at the line that failed.
#![allow(clippy::unwrap_used)]

use std::path::Path;

use selfrag_hub::ModelRole;
use selfrag_hub::store::{ModelSpec, find_in_cache, locate_in};

fn touch(path: &Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, b"x").unwrap();
}

#[test]
fn a_generator_is_found_in_the_snapshot_refs_main_names() {
    let cache = tempfile::tempdir().unwrap();
    let spec = ModelSpec::default_generator().unwrap();
    let repo = cache.path().join("models--m4r1--selfrag_llama2_7b-GGUF");
    let before = locate_in(cache.path(), &spec);
    assert_eq!(before.found, None);
    assert_eq!(before.searched, vec![repo.clone()]);

    touch(&repo.join("snapshots/aaa/selfrag_llama2_7b.q4_k_m.gguf"));
    touch(&repo.join("snapshots/bbb/selfrag_llama2_7b.q4_k_m.gguf"));
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::write(repo.join("refs/main"), "bbb\n").unwrap();
    let expected = repo.join("snapshots/bbb/selfrag_llama2_7b.q4_k_m.gguf");
    assert_eq!(locate_in(cache.path(), &spec).found, Some(expected.clone()));
    assert_eq!(
        find_in_cache(cache.path(), &spec.repo, "selfrag_llama2_7b.q4_k_m.gguf"),
        Some(expected)
    );
    assert_eq!(find_in_cache(cache.path(), &spec.repo, "other.gguf"), None);
}

#[test]
fn an_embedder_needs_every_required_file() {
    let cache = tempfile::tempdir().unwrap();
    let spec = ModelSpec::default_embedder().unwrap();
    assert_eq!(spec.role, ModelRole::Embedder);
    let snapshot = cache
        .path()
        .join("models--facebook--contriever-msmarco/snapshots/abc");
    touch(&snapshot.join("config.json"));
    touch(&snapshot.join("pytorch_model.bin"));
    let partial = locate_in(cache.path(), &spec);
    assert_eq!(partial.found, None);
    assert_eq!(partial.searched, vec![snapshot.clone()]);
    touch(&snapshot.join("vocab.txt"));
    assert_eq!(locate_in(cache.path(), &spec).found, Some(snapshot));
}

#[test]
fn every_shipped_manifest_has_a_license_and_files() {
    let specs = ModelSpec::all().unwrap();
    assert!(specs.len() >= 4);
    for spec in specs {
        assert!(
            !spec.license.is_empty() && !spec.files.is_empty(),
            "{}",
            spec.id
        );
        assert!(spec.repo.contains('/'), "{}", spec.id);
        // The licence in words, with where it is stated, for the first-run screen and
        // `selfrag models list`.
        assert!(spec.license_terms.len() > 20, "{}", spec.id);
        assert!(
            !spec.license_sources.is_empty()
                && spec
                    .license_sources
                    .iter()
                    .all(|s| s.starts_with("https://")),
            "{}",
            spec.id
        );
        if spec.license == "cc-by-nc-4.0" {
            assert!(
                spec.license_terms.contains("not for commercial"),
                "{}",
                spec.id
            );
        }
        if spec.role == ModelRole::Generator {
            // Every generator is fine-tuned from a base model whose licence also governs it.
            assert!(
                [
                    "Llama 2 Community License",
                    "Meta Llama 3 Community License",
                    "Apache-2.0",
                ]
                .iter()
                .any(|base| spec.license_terms.contains(base)),
                "{}",
                spec.id
            );
        }
    }
}

#[test]
fn the_self_rag_checkpoints_of_other_families_are_listed_with_their_licences() {
    let sciphi = ModelSpec::by_id("sciphi-selfrag-mistral-7b-q4km").unwrap();
    assert_eq!(sciphi.role, ModelRole::Generator);
    assert!(sciphi.downloadable);
    assert!(sciphi.license_terms.contains("Apache-2.0"));
    let file = sciphi.primary_file().unwrap();
    assert!(file.name.ends_with(".Q4_K_M.gguf"));
    // The hub's own hash of the file: a download is checked against it.
    assert_eq!(file.sha256.as_deref().map(str::len), Some(64));

    let raglab = ModelSpec::by_id("raglab-selfrag-llama3-8b-q4km").unwrap();
    assert_eq!(raglab.repo, "RAGLAB/selfrag_llama3-8B");
    assert!(!raglab.downloadable, "only safetensors are published");
    assert!(
        raglab
            .license_terms
            .contains("Meta Llama 3 Community License")
    );
    assert!(
        !ModelSpec::by_id("selfrag-13b-q4km").unwrap().downloadable,
        "the 13B is published as PyTorch shards only"
    );
    assert!(ModelSpec::default_generator().unwrap().downloadable);
    assert!(ModelSpec::default_embedder().unwrap().downloadable);
}
