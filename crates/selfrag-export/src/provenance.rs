//! The provenance line: which generator wrote an answer and with which numerics (its KV cache,
//! where its tokenizer put the dummy prefix, the embedder its query was searched with), in the
//! words the app shows under the answer and in its inspector, so that every exported score says
//! where it came from. The UI's `provenanceLine` (ui/src/lib/format.ts) writes the same line;
//! src-tauri's bindings test keeps the two equal through `ui/src/tests/golden/provenance.json`.

use selfrag_core::{Answer, DummyPrefix, EmbedderInfo, GeneratorInfo, GeneratorKind};

/// "Written on this computer (CPU) by selfrag_llama2_7b.q4_k_m.gguf · KV cache 8-bit ·
/// embedder int8"; `None` for a trace that records neither its generator nor its embedder.
pub fn provenance(answer: &Answer) -> Option<String> {
    let mut parts = Vec::new();
    if let Some(generator) = &answer.generator {
        parts.push(written_by(generator));
        parts.extend(generator_numerics(generator));
    }
    if let Some(embedder) = &answer.embedder {
        parts.push(embedder_numerics(embedder));
    }
    (!parts.is_empty()).then(|| parts.join(" · "))
}

/// Where the answer was written and by which model file.
fn written_by(generator: &GeneratorInfo) -> String {
    let model = file_name(&generator.model);
    let model = if model.is_empty() { "the model" } else { model };
    match generator.kind {
        GeneratorKind::Local => format!(
            "Written on this computer ({}) by {model}",
            generator.runtime.to_uppercase()
        ),
        GeneratorKind::Server => format!(
            "Written on the server {} ({}) by {model}",
            generator.url.as_deref().unwrap_or("(unknown address)"),
            generator.runtime
        ),
    }
}

/// The KV cache, and the dummy prefix where it is not fine-tuning's; nothing a trace from
/// before they were recorded does not say.
fn generator_numerics(generator: &GeneratorInfo) -> Vec<String> {
    let mut parts = Vec::new();
    match (generator.kind, generator.cache_precision) {
        (GeneratorKind::Server, _) => parts.push("the server's own KV cache".to_owned()),
        (GeneratorKind::Local, Some(precision)) => {
            parts.push(format!("KV cache {}", precision.label()));
        }
        (GeneratorKind::Local, None) => {}
    }
    if generator.dummy_prefix == Some(DummyPrefix::EveryFragment) {
        parts.push("space prefix after special tokens (as the reference code)".to_owned());
    }
    parts
}

/// The embedder's precision, or the server it ran on (which does not say its own).
fn embedder_numerics(embedder: &EmbedderInfo) -> String {
    match &embedder.server {
        Some(url) => format!("embedder on the server {url}"),
        None => format!("embedder {}", embedder.precision),
    }
}

/// The last component of a path, for either separator (a server names its model file by the
/// path it loaded it from).
fn file_name(path: &str) -> &str {
    path.rsplit(['/', '\\'])
        .next()
        .filter(|last| !last.is_empty())
        .unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use selfrag_core::{CachePrecision, DeviceKind, EmbedderPrecision};
    use selfrag_testkit::traces::TraceBuilder;

    use super::*;

    fn local(cache: Option<CachePrecision>, prefix: Option<DummyPrefix>) -> GeneratorInfo {
        GeneratorInfo {
            kind: GeneratorKind::Local,
            model: "/models/selfrag_llama2_7b.q4_k_m.gguf".into(),
            runtime: "cpu".into(),
            url: None,
            cache_precision: cache,
            dummy_prefix: prefix,
        }
    }

    fn embedder(precision: EmbedderPrecision) -> EmbedderInfo {
        EmbedderInfo {
            model: "facebook/contriever-msmarco@abc123".into(),
            precision,
            device: DeviceKind::Cpu,
            server: None,
        }
    }

    #[test]
    fn the_line_names_the_generator_its_cache_and_the_embedder() {
        let mut answer = TraceBuilder::new("q").build();
        assert_eq!(provenance(&answer), None);
        answer.generator = Some(local(
            Some(CachePrecision::Q8),
            Some(DummyPrefix::TextStart),
        ));
        answer.embedder = Some(embedder(EmbedderPrecision::Int8));
        assert_eq!(
            provenance(&answer).as_deref(),
            Some(
                "Written on this computer (CPU) by selfrag_llama2_7b.q4_k_m.gguf · KV cache 8-bit · embedder int8"
            )
        );
        answer.generator = Some(local(
            Some(CachePrecision::F32),
            Some(DummyPrefix::EveryFragment),
        ));
        answer.embedder = Some(embedder(EmbedderPrecision::F32));
        assert_eq!(
            provenance(&answer).as_deref(),
            Some(
                "Written on this computer (CPU) by selfrag_llama2_7b.q4_k_m.gguf · KV cache f32 · space prefix after special tokens (as the reference code) · embedder f32"
            )
        );
    }

    #[test]
    fn a_server_keeps_its_own_cache_and_an_old_trace_says_only_what_it_recorded() {
        let mut answer = TraceBuilder::new("q").build();
        answer.generator = Some(GeneratorInfo {
            kind: GeneratorKind::Server,
            model: "C:\\models\\selfrag_llama2_13b.Q4_K_M.gguf".into(),
            runtime: "llama.cpp b6800-abc1234".into(),
            url: Some("http://gpu-box:8080".into()),
            cache_precision: None,
            dummy_prefix: Some(DummyPrefix::TextStart),
        });
        assert_eq!(
            provenance(&answer).as_deref(),
            Some(
                "Written on the server http://gpu-box:8080 (llama.cpp b6800-abc1234) by selfrag_llama2_13b.Q4_K_M.gguf · the server's own KV cache"
            )
        );
        // Saved before the numerics were recorded: the generator alone.
        answer.generator = Some(local(None, None));
        assert_eq!(
            provenance(&answer).as_deref(),
            Some("Written on this computer (CPU) by selfrag_llama2_7b.q4_k_m.gguf")
        );
    }
}
