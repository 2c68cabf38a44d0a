//! What the fuzz targets share: running the code under test as the app runs it.

use std::cell::RefCell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::OnceLock;

use selfrag_models::GgufTokenizer;

thread_local! {
    /// Where and why the last panic under [`as_the_app_runs_it`] happened.
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Runs `f` with the library's own panic boundaries working as they do in the app.
///
/// Two readers sit behind a `catch_unwind` in the library by design: candle's GGUF header reader
/// (`selfrag_models::gguf_header::read`, a malformed header is an error) and pdf-extract's page
/// reader (`selfrag_index::extract::pdf`, a page it panics on is one unreadable page). libFuzzer's
/// panic hook aborts at the panic itself, before any boundary catches it, so while `f` runs the
/// hook only records the panic. A panic that escapes `f` is still a crash: it is raised again,
/// with where it happened, under libFuzzer's hook.
pub fn as_the_app_runs_it<T>(f: impl FnOnce() -> T) -> T {
    let libfuzzer_hook = panic::take_hook();
    panic::set_hook(Box::new(|info| {
        LAST_PANIC.with(|last| *last.borrow_mut() = Some(info.to_string()));
    }));
    let result = panic::catch_unwind(AssertUnwindSafe(f));
    panic::set_hook(libfuzzer_hook);
    match result {
        Ok(value) => value,
        Err(_) => {
            let what = LAST_PANIC.with(|last| last.borrow_mut().take());
            panic!(
                "a panic escaped the library's boundaries: {}",
                what.unwrap_or_default()
            )
        }
    }
}

/// The tokenizer of the tiny Self-RAG GGUF (`selfrag_fixtures`), written and read once per
/// fuzzing process.
pub fn tiny_tokenizer() -> &'static GgufTokenizer {
    static TOKENIZER: OnceLock<GgufTokenizer> = OnceLock::new();
    TOKENIZER.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("tiny.gguf");
        selfrag_fixtures::write_tiny_llama_gguf(&path).expect("tiny GGUF");
        GgufTokenizer::from_gguf_file(&path).expect("tiny tokenizer")
    })
}
