//! Corrupted model files (issue 7, "Faults"): the tiny GGUF, safetensors and pytorch_model.bin
//! cut at many points, with bytes flipped in the header, the metadata and the tensor-info table,
//! with absurd counts, lengths, shapes, offsets and hyper-parameters, and a GGUF of another
//! architecture. Every one must load or be refused with an error that names the file and says
//! what to do; none may panic or ask for a huge allocation (see `allocation`).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use candle_core::Device;
use candle_core::quantized::QTensor;
use candle_core::quantized::gguf_file::{self, Value};
use selfrag_fixtures as fixtures;
use selfrag_models::{BertEmbedder, GgufTokenizer, LlamaGenerator, ModelError};
use tempfile::TempDir;

use crate::allocation::largest_allocation;

/// The tiny models need a few MB at once; a corrupt count must never ask for more than this.
const ALLOCATION_LIMIT: usize = 64 << 20;

/// Deterministic byte positions and values for the random flips.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-string panic".to_owned())
}

/// Whether an error message tells the user what to do next.
fn says_what_to_do(message: &str) -> bool {
    ["download", "convert", "use a ", "check that", "fix "]
        .iter()
        .any(|advice| message.contains(advice))
}

/// How one corrupted file went.
#[derive(Debug, PartialEq)]
enum Outcome {
    Loaded,
    Refused,
}

/// Runs `load` on the corrupted file `path`; `Err` describes a broken promise (a panic, a huge
/// allocation, or an error that does not name the file or say what to do).
fn try_load(
    path: &Path,
    load: impl FnOnce() -> Result<(), ModelError>,
) -> Result<(Outcome, String), String> {
    let (result, largest) = largest_allocation(|| catch_unwind(AssertUnwindSafe(load)));
    if largest > ALLOCATION_LIMIT {
        return Err(format!("allocated {largest} bytes at once"));
    }
    match result {
        Err(panic) => Err(format!("panicked: {}", panic_message(&*panic))),
        Ok(Ok(())) => Ok((Outcome::Loaded, String::new())),
        Ok(Err(error)) => {
            let message = error.to_string();
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
            if !name.is_some_and(|name| message.contains(&name)) {
                Err(format!("error does not name the file: {message}"))
            } else if !says_what_to_do(&message) {
                Err(format!("error does not say what to do: {message}"))
            } else {
                Ok((Outcome::Refused, message))
            }
        }
    }
}

/// Loads every case as a GGUF generator; returns the broken promises, one line each.
/// `must_refuse` cases may not load.
fn check_gguf_cases(dir: &Path, cases: &[(String, Vec<u8>, bool)]) -> Vec<String> {
    let path = dir.join("corrupt.gguf");
    let mut broken = Vec::new();
    for (what, bytes, must_refuse) in cases {
        std::fs::write(&path, bytes).unwrap();
        let outcome = try_load(&path, || {
            LlamaGenerator::load(&path, &Device::Cpu).map(|_| ())
        });
        match outcome {
            Err(problem) => broken.push(format!("{what}: {problem}")),
            Ok((Outcome::Loaded, _)) if *must_refuse => {
                broken.push(format!("{what}: loaded, should be refused"));
            }
            Ok(_) => {}
        }
        // The tokenizer alone reads the same header (`selfrag debug tokenize`).
        if let Err(problem) = try_load(&path, || GgufTokenizer::from_gguf_file(&path).map(|_| ())) {
            broken.push(format!("{what} (tokenizer only): {problem}"));
        }
    }
    broken
}

fn assert_none_broken(cases: usize, broken: &[String]) {
    eprintln!("{cases} corrupt files, {} broken promises", broken.len());
    assert!(
        broken.is_empty(),
        "{} of {cases} corrupt files broke a promise:\n{}",
        broken.len(),
        broken
            .iter()
            .take(30)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// One field of a GGUF header, found by [`gguf_fields`].
#[derive(Debug, Clone)]
struct Field {
    at: usize,
    width: usize,
    what: String,
}

/// The fields of the tiny GGUF's header (v2/v3: 8-byte lengths), in file order; of each array
/// only the first two elements. Also returns where the tensor-info table ends.
fn gguf_fields(bytes: &[u8]) -> (Vec<Field>, usize) {
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as usize;
    let mut fields = Vec::new();
    let mut push = |at: usize, width: usize, what: String| fields.push(Field { at, width, what });
    push(0, 4, "magic".into());
    push(4, 4, "version".into());
    push(8, 8, "tensor count".into());
    push(16, 8, "metadata count".into());
    let tensors = u64_at(8);
    let kvs = u64_at(16);
    let mut at = 24;

    // Walks one value of type `ty` at `at`, recording its fields when `record`.
    fn value(
        bytes: &[u8],
        at: &mut usize,
        ty: u32,
        owner: &str,
        record: bool,
        push: &mut dyn FnMut(usize, usize, String),
    ) {
        let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as usize;
        let scalar = |width: usize| (width, format!("{owner} value"));
        let (width, what) = match ty {
            0 | 1 | 7 => scalar(1),
            2 | 3 => scalar(2),
            4..=6 => scalar(4),
            10..=12 => scalar(8),
            8 => {
                if record {
                    push(*at, 8, format!("{owner} string length"));
                }
                let len = u64_at(*at);
                *at += 8 + len;
                return;
            }
            9 => {
                let element = u32_at(*at);
                let len = u64_at(*at + 4);
                if record {
                    push(*at, 4, format!("{owner} array type"));
                    push(*at + 4, 8, format!("{owner} array length"));
                }
                *at += 12;
                for i in 0..len {
                    value(bytes, at, element, owner, record && i < 2, push);
                }
                return;
            }
            other => panic!("the tiny GGUF has a value of type {other}"),
        };
        if record {
            push(*at, width, what);
        }
        *at += width;
    }

    for _ in 0..kvs {
        let len = u64_at(at);
        let key = String::from_utf8_lossy(&bytes[at + 8..at + 8 + len]).into_owned();
        push(at, 8, format!("{key} key length"));
        push(at + 8, len.min(1), format!("{key} key"));
        at += 8 + len;
        let ty = u32_at(at);
        push(at, 4, format!("{key} value type"));
        at += 4;
        value(bytes, &mut at, ty, &key, true, &mut push);
    }
    for _ in 0..tensors {
        let len = u64_at(at);
        let name = String::from_utf8_lossy(&bytes[at + 8..at + 8 + len]).into_owned();
        push(at, 8, format!("{name} name length"));
        push(at + 8, len.min(1), format!("{name} name"));
        at += 8 + len;
        let dims = u32_at(at) as usize;
        push(at, 4, format!("{name} dimension count"));
        at += 4;
        for d in 0..dims {
            push(at, 8, format!("{name} dimension {d}"));
            at += 8;
        }
        push(at, 4, format!("{name} dtype"));
        push(at + 4, 8, format!("{name} offset"));
        at += 12;
    }
    (fields, at)
}

/// Values written over a field: zero, small, off by one, and absurd.
fn replacements(original: u64, width: usize) -> Vec<u64> {
    let mut values = vec![
        0,
        1,
        5,
        13,
        original.wrapping_add(1),
        original.wrapping_sub(1),
        0x7FC0_0000, // f32 NaN
        0x7F80_0000, // f32 infinity
        0x7FFF_FFFF,
        0xFFFF_FFFF,
    ];
    if width == 8 {
        values.extend([1 << 31, 1 << 40, 1 << 62, u64::MAX]);
    }
    values
}

fn with_field(bytes: &[u8], field: &Field, value: u64) -> Vec<u8> {
    let mut out = bytes.to_vec();
    let le = value.to_le_bytes();
    out[field.at..field.at + field.width].copy_from_slice(&le[..field.width]);
    out
}

fn read_field(bytes: &[u8], field: &Field) -> u64 {
    let mut le = [0u8; 8];
    le[..field.width].copy_from_slice(&bytes[field.at..field.at + field.width]);
    u64::from_le_bytes(le)
}

fn tiny_gguf_bytes() -> (TempDir, Vec<u8>) {
    let (dir, path) = crate::tiny_gguf();
    let bytes = std::fs::read(path).unwrap();
    (dir, bytes)
}

#[test]
fn gguf_cut_anywhere_is_refused_naming_the_file() {
    let (dir, bytes) = tiny_gguf_bytes();
    let (fields, table_end) = gguf_fields(&bytes);
    let mut cuts: Vec<usize> = (0..64).collect();
    for field in &fields {
        cuts.extend([field.at, field.at + 1, field.at + field.width - 1]);
    }
    cuts.extend((table_end - 2..table_end + 40).filter(|&c| c < bytes.len()));
    cuts.extend((1..200).map(|i| i * bytes.len() / 200));
    cuts.push(bytes.len() - 1);
    cuts.sort_unstable();
    cuts.dedup();
    let cases: Vec<_> = cuts
        .iter()
        .map(|&keep| (format!("cut to {keep} bytes"), bytes[..keep].to_vec(), true))
        .collect();
    assert_none_broken(cases.len(), &check_gguf_cases(dir.path(), &cases));
}

#[test]
fn gguf_absurd_counts_lengths_and_types_in_the_header_and_metadata() {
    let (dir, bytes) = tiny_gguf_bytes();
    let (fields, _) = gguf_fields(&bytes);
    let mut cases = Vec::new();
    for field in fields
        .iter()
        .filter(|f| !f.what.contains(" name") && f.at < 4096)
    {
        let original = read_field(&bytes, field);
        for value in replacements(original, field.width) {
            if value != original {
                let what = format!("{} = {value:#x}", field.what);
                cases.push((what, with_field(&bytes, field, value), false));
            }
        }
    }
    // Counts past what the file can hold are refused before anything is allocated.
    for (at, what) in [(8, "tensor count"), (16, "metadata count")] {
        let field = Field {
            at,
            width: 8,
            what: what.into(),
        };
        for value in [1 << 40, u64::MAX] {
            cases.push((
                format!("{what} = {value:#x}"),
                with_field(&bytes, &field, value),
                true,
            ));
        }
    }
    assert_none_broken(cases.len(), &check_gguf_cases(dir.path(), &cases));
}

#[test]
fn gguf_absurd_tensor_shapes_types_and_offsets() {
    let (dir, bytes) = tiny_gguf_bytes();
    let (fields, _) = gguf_fields(&bytes);
    let tensor_fields = fields.iter().filter(|f| {
        f.what.ends_with("dimension count")
            || f.what.contains(" dimension ")
            || f.what.ends_with(" dtype")
            || f.what.ends_with(" offset")
    });
    let mut cases = Vec::new();
    for field in tensor_fields {
        let original = read_field(&bytes, field);
        for value in replacements(original, field.width) {
            if value != original {
                let what = format!("{} = {value:#x}", field.what);
                cases.push((what, with_field(&bytes, field, value), false));
            }
        }
    }
    assert_none_broken(cases.len(), &check_gguf_cases(dir.path(), &cases));
}

#[test]
fn gguf_random_byte_flips_in_the_header() {
    let (dir, bytes) = tiny_gguf_bytes();
    let (_, table_end) = gguf_fields(&bytes);
    let mut rng = SplitMix64(0x05E1_F4A6_0007);
    let cases: Vec<_> = (0..400)
        .map(|i| {
            let mut out = bytes.clone();
            // Mostly one byte, sometimes a few; the tensor data is left alone (any bytes there
            // are valid weights).
            let flips = 1 + usize::from(i % 4 == 0) * 3;
            let mut what = String::from("flipped");
            for _ in 0..flips {
                let at = rng.below(table_end);
                let xor = (rng.next() % 255 + 1) as u8;
                out[at] ^= xor;
                what.push_str(&format!(" byte {at} ^ {xor:#04x}"));
            }
            (what, out, false)
        })
        .collect();
    assert_none_broken(cases.len(), &check_gguf_cases(dir.path(), &cases));
}

/// The tiny GGUF's metadata and tensors, to write variants with other metadata.
struct GgufParts {
    metadata: Vec<(String, Value)>,
    tensors: Vec<(String, QTensor)>,
}

impl GgufParts {
    fn read(path: &Path) -> Self {
        let mut file = std::fs::File::open(path).unwrap();
        let content = gguf_file::Content::read(&mut file).unwrap();
        let mut names: Vec<String> = content.tensor_infos.keys().cloned().collect();
        names.sort();
        let tensors = names
            .into_iter()
            .map(|name| {
                let tensor = content.tensor(&mut file, &name, &Device::Cpu).unwrap();
                (name, tensor)
            })
            .collect();
        let mut metadata: Vec<(String, Value)> = content.metadata.into_iter().collect();
        metadata.sort_by(|a, b| a.0.cmp(&b.0));
        Self { metadata, tensors }
    }

    /// The file with each `(key, value)` of `set` set (added if absent).
    fn with_all(&self, set: &[(&str, Value)]) -> Vec<u8> {
        let mut metadata: Vec<(&str, &Value)> = self
            .metadata
            .iter()
            .filter(|(k, _)| set.iter().all(|(key, _)| k != key))
            .map(|(k, v)| (k.as_str(), v))
            .collect();
        metadata.extend(set.iter().map(|(k, v)| (*k, v)));
        let tensors: Vec<(&str, &QTensor)> =
            self.tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
        let mut out = std::io::Cursor::new(Vec::new());
        gguf_file::write(&mut out, &metadata, &tensors).unwrap();
        out.into_inner()
    }

    /// The file with `key` set to `value` (added if absent, removed if `None`).
    fn with(&self, key: &str, value: Option<Value>) -> Vec<u8> {
        let mut metadata: Vec<(&str, &Value)> = self
            .metadata
            .iter()
            .filter(|(k, _)| k != key)
            .map(|(k, v)| (k.as_str(), v))
            .collect();
        if let Some(value) = &value {
            metadata.push((key, value));
        }
        let tensors: Vec<(&str, &QTensor)> =
            self.tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
        let mut out = std::io::Cursor::new(Vec::new());
        gguf_file::write(&mut out, &metadata, &tensors).unwrap();
        out.into_inner()
    }
}

#[test]
fn gguf_absurd_hyper_parameters_and_tokenizer_metadata_are_refused() {
    let (dir, path) = crate::tiny_gguf();
    let parts = GgufParts::read(&path);
    let string = |s: &str| Some(Value::String(s.to_owned()));
    let n_vocab = match parts
        .metadata
        .iter()
        .find(|(k, _)| k == "tokenizer.ggml.tokens")
    {
        Some((_, Value::Array(tokens))) => tokens.len(),
        _ => panic!("the tiny GGUF has no vocabulary"),
    };
    let refused: Vec<(&str, Option<Value>)> = vec![
        ("general.architecture", None),
        ("general.architecture", Some(Value::U32(7))),
        ("general.alignment", Some(Value::U32(0))),
        ("general.alignment", Some(Value::U32(3))),
        ("general.alignment", Some(Value::U32(u32::MAX))),
        ("llama.block_count", Some(Value::U32(0))),
        ("llama.block_count", Some(Value::U32(3))),
        ("llama.block_count", Some(Value::U64(1 << 40))),
        ("llama.block_count", Some(Value::U64(u64::MAX))),
        ("llama.embedding_length", Some(Value::U32(0))),
        ("llama.embedding_length", Some(Value::U32(65))),
        ("llama.embedding_length", Some(Value::U64(1 << 40))),
        ("llama.attention.head_count", Some(Value::U32(0))),
        ("llama.attention.head_count", Some(Value::U32(3))),
        ("llama.attention.head_count", Some(Value::U64(1 << 40))),
        ("llama.attention.head_count_kv", Some(Value::U32(0))),
        ("llama.attention.head_count_kv", Some(Value::U32(3))),
        ("llama.attention.head_count_kv", Some(Value::U32(64))),
        ("llama.context_length", Some(Value::U32(0))),
        ("llama.context_length", Some(Value::I32(-1))),
        ("llama.rope.dimension_count", Some(Value::U32(0))),
        (
            "llama.attention.layer_norm_rms_epsilon",
            Some(Value::F32(f32::NAN)),
        ),
        (
            "llama.attention.layer_norm_rms_epsilon",
            Some(Value::F32(-1.0)),
        ),
        ("llama.attention.layer_norm_rms_epsilon", string("1e-5")),
        ("llama.rope.freq_base", Some(Value::F32(0.0))),
        ("llama.rope.freq_base", Some(Value::F32(f32::INFINITY))),
        ("llama.rope.freq_base", Some(Value::F32(f32::NAN))),
        ("tokenizer.ggml.tokens", None),
        ("tokenizer.ggml.tokens", Some(Value::Array(vec![]))),
        (
            "tokenizer.ggml.tokens",
            Some(Value::Array(vec![Value::U32(1)])),
        ),
        ("tokenizer.ggml.scores", Some(Value::Array(vec![]))),
        (
            "tokenizer.ggml.token_type",
            Some(Value::Array(vec![Value::I32(99); n_vocab])),
        ),
        ("tokenizer.ggml.bos_token_id", Some(Value::U32(u32::MAX))),
        (
            "tokenizer.ggml.eos_token_id",
            Some(Value::U32(n_vocab as u32)),
        ),
    ];
    let mut cases: Vec<(String, Vec<u8>, bool)> = refused
        .into_iter()
        .map(|(key, value)| (format!("{key} = {value:?}"), parts.with(key, value), true))
        .collect();
    // A huge context is not an error by itself: only what is used is allocated.
    cases.push((
        "llama.context_length = u64::MAX".to_owned(),
        parts.with("llama.context_length", Some(Value::U64(u64::MAX))),
        false,
    ));
    assert_none_broken(cases.len(), &check_gguf_cases(dir.path(), &cases));
}

#[test]
fn gguf_of_another_architecture_is_refused_by_name() {
    let (dir, path) = crate::tiny_gguf();
    let parts = GgufParts::read(&path);
    for architecture in ["gpt2", "falcon", "bert", "mistral"] {
        let file = dir.path().join(format!("tiny-{architecture}.gguf"));
        let bytes = parts.with(
            "general.architecture",
            Some(Value::String(architecture.to_owned())),
        );
        std::fs::write(&file, bytes).unwrap();
        let err = LlamaGenerator::load(&file, &Device::Cpu).unwrap_err();
        assert!(
            matches!(err, ModelError::UnsupportedArchitecture { ref found, .. } if found == architecture),
            "{err}"
        );
        let message = err.to_string();
        assert!(
            message.contains(&format!("tiny-{architecture}.gguf"))
                && message.contains("use a Llama GGUF"),
            "{message}"
        );
    }
}

/// A sound GGUF of a kind this version cannot run (a BPE pre-tokenizer or a tokenizer it does
/// not run, RoPE scaling it does not compute) is refused saying exactly that, never "truncated
/// or corrupt, download it again", which would send the person to download 4 GB again for
/// nothing. (Llama-3's `gpt2` + `llama-bpe` runs: tests/tokenizer_parity.rs in selfrag-remote.)
#[test]
fn a_sound_gguf_this_version_cannot_run_is_refused_by_what_it_lacks_not_as_corrupt() {
    let (dir, path) = crate::tiny_gguf();
    let parts = GgufParts::read(&path);
    for (model, pre, named) in [
        (
            "gpt2",
            Some("deepseek-v3"),
            "its tokenizer is `gpt2` with the `deepseek-v3` pre-tokenizer",
        ),
        ("t5", None, "its tokenizer is `t5` (tokenizer.ggml.model)"),
    ] {
        let file = dir.path().join(format!("tiny-{model}.gguf"));
        let mut keys = vec![("tokenizer.ggml.model", Value::String(model.to_owned()))];
        keys.extend(pre.map(|pre| ("tokenizer.ggml.pre", Value::String(pre.to_owned()))));
        std::fs::write(&file, parts.with_all(&keys)).unwrap();
        for err in [
            LlamaGenerator::load(&file, &Device::Cpu).unwrap_err(),
            GgufTokenizer::from_gguf_file(&file).unwrap_err(),
        ] {
            assert!(
                matches!(&err, ModelError::UnsupportedTokenizer { model: m, pre: p, .. }
                    if m == model && p.as_deref() == pre),
                "{err:?}"
            );
            let message = err.to_string();
            assert!(
                message.contains(&format!("tiny-{model}.gguf: {named}")),
                "{message}"
            );
            assert!(
                message.contains("not damaged") && !message.contains("corrupt"),
                "{message}"
            );
        }
    }

    for (key, value, feature) in [
        (
            "llama.rope.scaling.type",
            Value::String("yarn".to_owned()),
            "RoPE scaling (`llama.rope.scaling.type` = `yarn`)",
        ),
        (
            "llama.expert_count",
            Value::U32(8),
            "a mixture of experts (8 experts)",
        ),
    ] {
        let file = dir.path().join("tiny-scaled.gguf");
        std::fs::write(&file, parts.with(key, Some(value))).unwrap();
        let err = LlamaGenerator::load(&file, &Device::Cpu).unwrap_err();
        assert!(
            matches!(&err, ModelError::UnsupportedModelFeature { feature: f, .. } if f == feature),
            "{err:?}"
        );
        let message = err.to_string();
        assert!(
            message.contains("not damaged") && !message.contains("corrupt"),
            "{message}"
        );
    }
    // `none` is no scaling.
    let file = dir.path().join("tiny-unscaled.gguf");
    let unscaled = parts.with(
        "llama.rope.scaling.type",
        Some(Value::String("none".to_owned())),
    );
    std::fs::write(&file, unscaled).unwrap();
    LlamaGenerator::load(&file, &Device::Cpu).unwrap();
}

/// A tiny BERT directory written by `write`, and the bytes of its weights file `weights`.
fn tiny_bert(
    write: fn(&Path) -> Result<(), fixtures::FixtureError>,
    weights: &str,
) -> (TempDir, PathBuf, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path()).unwrap();
    let path = dir.path().join(weights);
    let bytes = std::fs::read(&path).unwrap();
    (dir, path, bytes)
}

/// Loads the BERT directory with each variant of its weights file; returns broken promises.
fn check_bert_cases(dir: &Path, weights: &Path, cases: &[(String, Vec<u8>, bool)]) -> Vec<String> {
    let mut broken = Vec::new();
    for (what, bytes, must_refuse) in cases {
        std::fs::write(weights, bytes).unwrap();
        match try_load(weights, || {
            BertEmbedder::load(dir, &Device::Cpu).map(|_| ())
        }) {
            Err(problem) => broken.push(format!("{what}: {problem}")),
            Ok((Outcome::Loaded, _)) if *must_refuse => {
                broken.push(format!("{what}: loaded, should be refused"));
            }
            Ok(_) => {}
        }
    }
    broken
}

fn cuts_and_flips(bytes: &[u8], seed: u64, flips_in: usize) -> Vec<(String, Vec<u8>, bool)> {
    let mut cases: Vec<_> = (0..64)
        .chain((1..120).map(|i| i * bytes.len() / 120))
        .chain([bytes.len() - 1])
        .map(|keep| (format!("cut to {keep} bytes"), bytes[..keep].to_vec(), true))
        .collect();
    let mut rng = SplitMix64(seed);
    for _ in 0..250 {
        let mut out = bytes.to_vec();
        let at = rng.below(flips_in.min(bytes.len()));
        let xor = (rng.next() % 255 + 1) as u8;
        out[at] ^= xor;
        cases.push((format!("byte {at} ^ {xor:#04x}"), out, false));
    }
    cases
}

#[test]
fn safetensors_cut_or_flipped_is_refused_naming_the_file() {
    let (dir, path, bytes) = tiny_bert(fixtures::write_tiny_bert, "model.safetensors");
    let header_len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let mut cases = cuts_and_flips(&bytes, 0x5AFE, 8 + header_len);
    for value in [0u64, 1, 1 << 31, 1 << 40, u64::MAX] {
        let mut out = bytes.clone();
        out[..8].copy_from_slice(&value.to_le_bytes());
        cases.push((format!("header length {value:#x}"), out, true));
    }
    assert_none_broken(cases.len(), &check_bert_cases(dir.path(), &path, &cases));
}

#[test]
fn pytorch_zip_cut_or_flipped_is_refused_naming_the_file() {
    let (dir, path, bytes) = tiny_bert(fixtures::write_tiny_bert_pytorch_bin, "pytorch_model.bin");
    // Flips anywhere: local headers, the pickle, the tensor data and the central directory.
    let cases = cuts_and_flips(&bytes, 0x0B1B, bytes.len());
    assert_none_broken(cases.len(), &check_bert_cases(dir.path(), &path, &cases));
}

#[test]
fn bert_config_with_absurd_sizes_is_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    fixtures::write_tiny_bert(dir.path()).unwrap();
    let config_path = dir.path().join("config.json");
    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&config_path).unwrap()).unwrap();
    let mut broken = Vec::new();
    let mut cases = 0;
    for key in [
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "intermediate_size",
        "max_position_embeddings",
        "vocab_size",
        "type_vocab_size",
    ] {
        for value in [0u64, 3, 1 << 40, u64::MAX] {
            cases += 1;
            let mut variant = config.clone();
            variant[key] = serde_json::json!(value);
            std::fs::write(&config_path, variant.to_string()).unwrap();
            // The error may name config.json or the weights that do not match it.
            let weights = dir.path().join("model.safetensors");
            let outcome = try_load(&weights, || {
                BertEmbedder::load(dir.path(), &Device::Cpu).map(|_| ())
            })
            .or_else(|problem| {
                if problem.contains("does not name the file") && problem.contains("config.json") {
                    Ok((Outcome::Refused, problem))
                } else {
                    Err(problem)
                }
            });
            if let Err(problem) = outcome {
                broken.push(format!("{key} = {value}: {problem}"));
            }
        }
    }
    assert_none_broken(cases, &broken);
}
