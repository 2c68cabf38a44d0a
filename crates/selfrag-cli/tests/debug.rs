//! `selfrag debug tokenize|logits|generate`: the JSON contract of the diagnostics, on the tiny
//! GGUF.

// Test code: a failed unwrap is a failed test, at the line that failed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::Path;
use std::process::Command;

use serde_json::Value;

fn debug(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_selfrag"))
        .arg("debug")
        .args(args)
        .output()
        .unwrap();
    serde_json::from_str(&common::ok(out)).unwrap()
}

fn ids(value: &Value) -> Vec<u64> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect()
}

fn tiny_model(dir: &Path) -> String {
    let path = dir.join("tiny.gguf");
    selfrag_fixtures::write_tiny_llama_gguf(&path).unwrap();
    path.to_str().unwrap().to_owned()
}

#[test]
fn tokenize_starts_with_bos_and_parses_special_tokens_only_when_asked() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tiny_model(tmp.path());
    let text = "It is [Fully supported]";
    let plain = debug(&["tokenize", "--model", &model, text]);
    let special = debug(&["tokenize", "--model", &model, "--parse-special", text]);
    let (plain_ids, special_ids) = (ids(&plain["ids"]), ids(&special["ids"]));
    assert_eq!(plain_ids[0], 1, "BOS first: {plain}");
    assert_eq!(plain["tokens"][0], "<s>");
    assert_eq!(
        plain["tokens"].as_array().unwrap().len(),
        plain_ids.len(),
        "one piece per id"
    );
    let tokens: Vec<&str> = special["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(tokens.last(), Some(&"[Fully supported]"));
    assert!(
        !plain["tokens"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "[Fully supported]")
    );
    assert!(special_ids.len() < plain_ids.len());
}

#[test]
fn logits_lists_the_top_tokens_by_log_probability() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tiny_model(tmp.path());
    let tokens = debug(&["tokenize", "--model", &model, "It was made."]);
    let prompt = ids(&tokens["ids"])
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let out = debug(&["logits", "--model", &model, "--ids", &prompt, "--top", "5"]);
    let top = out["top"].as_array().unwrap();
    assert_eq!(top.len(), 5);
    let logprobs: Vec<f64> = top.iter().map(|t| t["logprob"].as_f64().unwrap()).collect();
    assert!(logprobs.windows(2).all(|w| w[0] >= w[1]), "{out}");
    assert!(logprobs.iter().all(|lp| *lp <= 0.0));
    assert!(logprobs.iter().map(|lp| lp.exp()).sum::<f64>() <= 1.0 + 1e-5);
    // The fixture makes "." lean towards [Fully supported].
    let fully = debug(&[
        "tokenize",
        "--model",
        &model,
        "--parse-special",
        "[Fully supported]",
    ]);
    let fully_id = *ids(&fully["ids"]).last().unwrap();
    assert_eq!(top[0]["id"].as_u64(), Some(fully_id));
}

#[test]
fn generate_decodes_k_copies_as_one_batch_and_reports_timings() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tiny_model(tmp.path());
    let tokens = debug(&["tokenize", "--model", &model, "The city of Paris"]);
    let prompt_ids = ids(&tokens["ids"]);
    let prompt = prompt_ids
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let single = debug(&[
        "generate",
        "--model",
        &model,
        "--ids",
        &prompt,
        "--max-tokens",
        "6",
        "--ignore-eos",
    ]);
    let rows = single["ids"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(ids(&rows[0]).len(), 6);
    assert_eq!(
        single["prompt_tokens"].as_u64(),
        Some(prompt_ids.len() as u64)
    );
    assert_eq!(single["decode_tokens"].as_u64(), Some(5));
    for key in ["prompt_seconds", "decode_seconds"] {
        assert!(single[key].as_f64().unwrap() >= 0.0, "{key}: {single}");
    }

    let batched = debug(&[
        "generate",
        "--model",
        &model,
        "--ids",
        &prompt,
        "--max-tokens",
        "6",
        "--ignore-eos",
        "--batch",
        "3",
        "--threads",
        "1",
    ]);
    let rows = batched["ids"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    for row in rows {
        assert_eq!(row, &single["ids"][0]);
    }
    assert_eq!(batched["decode_tokens"].as_u64(), Some(15));
}

/// The Q4_K_M model decodes to the same tokens on every CPU kernel path this machine can run,
/// each chosen from outside as a user's CPU would choose it: the packed tiles on AVX-512 VNNI,
/// on AVX-VNNI and on AVX2 (`SELFRAG_CPU_SIMD`, what Intel's client CPUs and AMD Zen 2 and 3
/// run, which have no AVX-512), candle's AVX-512 tiles, and candle's AVX2 tier
/// (`MISTRALRS_FORCE_AVX2=1`); and the choice is reported. Bad settings are refused, naming
/// themselves.
#[test]
fn generate_decodes_alike_on_every_cpu_kernel_path() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tmp.path().join("tiny.q4_k_m.gguf");
    selfrag_fixtures::write_tiny_q4_k_m_llama_gguf(&model).unwrap();
    let model = model.to_str().unwrap();
    let prompt = debug(&["tokenize", "--model", model, "The city of Paris"]);
    let prompt = ids(&prompt["ids"])
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let generate = |env: &[(&str, &str)]| -> Value {
        let out = Command::new(env!("CARGO_BIN_EXE_selfrag"))
            .args(["debug", "generate", "--model", model, "--ids", &prompt])
            .args(["--max-tokens", "12", "--ignore-eos", "--batch", "2"])
            .env_remove("SELFRAG_CPU_KERNELS")
            .env_remove("SELFRAG_CPU_SIMD")
            .envs(env.iter().copied())
            .output()
            .unwrap();
        serde_json::from_str(&common::ok(out)).unwrap()
    };
    // A bad setting is refused on any CPU, naming itself.
    let refused = |setting: &str, value: &str, message: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_selfrag"))
            .args(["debug", "generate", "--model", model, "--ids", &prompt])
            .args(["--max-tokens", "2"])
            .env(setting, value)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{setting}={value} was taken");
        assert!(stderr.contains(message), "{stderr}");
    };
    refused(
        "SELFRAG_CPU_KERNELS",
        "fastest",
        "SELFRAG_CPU_KERNELS is `fastest`; set it to measure, packed or candle",
    );
    refused(
        "SELFRAG_CPU_SIMD",
        "sse2",
        "SELFRAG_CPU_SIMD is `sse2`; set it to one of avx512-vnni, avx-vnni, avx2, or unset it",
    );

    let measured = generate(&[]);
    let kernels = measured["kernels"].as_str().unwrap().to_owned();
    let cpu = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let has = |flag: &str| cpu.split_whitespace().any(|f| f == flag);
    if ![
        "avx512f",
        "avx512bw",
        "avx512_vnni",
        "avx_vnni",
        "avx2",
        "fma",
        "f16c",
    ]
    .iter()
    .all(|f| has(f))
    {
        selfrag_testkit::skip(
            selfrag_testkit::Lack::CpuFeatures(&[
                "avx512f",
                "avx512bw",
                "avx512_vnni",
                "avx_vnni",
                "avx2",
                "fma",
                "f16c",
            ]),
            "this CPU cannot run every kernel path",
        );
        return;
    }
    assert!(
        kernels.contains("timed on blk.0.ffn_up.weight"),
        "{kernels}"
    );
    let packed = generate(&[("SELFRAG_CPU_KERNELS", "packed")]);
    assert_eq!(
        packed["kernels"],
        "packed tiles (AVX-512 VNNI), set by SELFRAG_CPU_KERNELS"
    );
    let lower = |simd: &str, name: &str| -> Value {
        let run = generate(&[
            ("SELFRAG_CPU_KERNELS", "packed"),
            ("SELFRAG_CPU_SIMD", simd),
        ]);
        assert_eq!(
            run["kernels"],
            format!("packed tiles ({name}), set by SELFRAG_CPU_KERNELS")
        );
        run
    };
    let avx_vnni = lower("avx-vnni", "AVX-VNNI");
    let packed_avx2 = lower("avx2", "AVX2");
    // Measured with the tiles on AVX2: timed against candle's kernels, as on such a CPU.
    let measured_avx2 = generate(&[("SELFRAG_CPU_SIMD", "avx2")]);
    assert!(
        measured_avx2["kernels"]
            .as_str()
            .is_some_and(|k| k.contains("timed on blk.0.ffn_up.weight")),
        "{}",
        measured_avx2["kernels"]
    );
    let candle = generate(&[("SELFRAG_CPU_KERNELS", "candle")]);
    assert_eq!(
        candle["kernels"],
        "candle's kernels, set by SELFRAG_CPU_KERNELS"
    );
    let avx2 = generate(&[
        ("SELFRAG_CPU_KERNELS", "candle"),
        ("MISTRALRS_FORCE_AVX2", "1"),
    ]);
    let tokens = &packed["ids"];
    assert_eq!(ids(&tokens[0]).len(), 12);
    for (path, run) in [
        ("measured", &measured),
        ("packed AVX-VNNI", &avx_vnni),
        ("packed AVX2", &packed_avx2),
        ("measured on AVX2", &measured_avx2),
        ("candle AVX-512", &candle),
        ("candle AVX2", &avx2),
    ] {
        assert_eq!(
            &run["ids"], tokens,
            "{path} kernels decode otherwise than the packed tiles"
        );
    }
}

#[test]
fn generate_with_a_prompt_longer_than_the_context_fails_with_the_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tiny_model(tmp.path());
    let prompt = vec!["5"; 600].join(",");
    let out = Command::new(env!("CARGO_BIN_EXE_selfrag"))
        .args([
            "debug",
            "generate",
            "--model",
            &model,
            "--ids",
            &prompt,
            "--max-tokens",
            "4",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("context length"), "{err}");
}

/// The embedder refuses an instruction set it cannot take, naming the setting, rather than
/// falling back to f32 unsaid.
#[test]
fn embed_refuses_a_bad_instruction_set_setting_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let bert = tmp.path().join("bert");
    selfrag_fixtures::write_tiny_bert(&bert).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_selfrag"))
        .args([
            "debug",
            "embed",
            "--model",
            bert.to_str().unwrap(),
            "a text",
        ])
        .env("SELFRAG_CPU_SIMD", "neon")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a bad setting was taken");
    assert!(
        stderr.contains(
            "SELFRAG_CPU_SIMD is `neon`; set it to one of avx512-vnni, avx-vnni, avx2, or unset it"
        ),
        "{stderr}"
    );
}

#[test]
fn embed_prints_one_unnormalised_mean_pooled_vector_per_text() {
    let tmp = tempfile::tempdir().unwrap();
    let bert = tmp.path().join("bert");
    selfrag_fixtures::write_tiny_bert(&bert).unwrap();
    let texts = [
        "self-rag retrieves passages",
        "a much longer text that forces padding of the first one",
    ];
    let out = debug(&[
        "embed",
        "--model",
        bert.to_str().unwrap(),
        texts[0],
        texts[1],
    ]);
    let rows = out["embeddings"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    let as_f32 = |v: &Value| -> Vec<f32> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() as f32)
            .collect()
    };
    let library = selfrag_models::BertEmbedder::load(&bert, &selfrag_models::Device::Cpu).unwrap();
    let alone = library.embed(&[texts[0]]).unwrap().remove(0);
    let printed = as_f32(&rows[0]);
    assert_eq!(printed.len(), alone.len());
    // Padding next to a longer text changes nothing, and the CLI prints what the library computes.
    let max_diff = printed
        .iter()
        .zip(&alone)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f32::max);
    assert!(max_diff < 1e-5, "max |Δ| {max_diff}");
    let norm: f32 = printed.iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!(
        (norm - 1.0).abs() > 1e-3,
        "vectors are not normalised (norm {norm})"
    );
}

/// `debug generate` reports the decode kernel's prefetch distance and why: set by
/// `SELFRAG_CPU_PREFETCH`, or not timed on the tiny model, whose packed weights stay in any
/// cache; a bad setting is refused, naming itself, on any CPU. The kernels are set to the
/// packed tiles: timed, candle's can win on a matrix this small, and then nothing is packed.
#[test]
fn generate_reports_the_decode_prefetch_distance_and_obeys_its_setting() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tmp.path().join("tiny.q4_k_m.gguf");
    selfrag_fixtures::write_tiny_q4_k_m_llama_gguf(&model).unwrap();
    let model = model.to_str().unwrap();
    let generate = |prefetch: Option<&str>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_selfrag"));
        cmd.args(["debug", "generate", "--model", model, "--ids", "1,450,368"])
            .args(["--max-tokens", "3", "--ignore-eos"])
            .env("SELFRAG_CPU_KERNELS", "packed")
            .env_remove("SELFRAG_CPU_PREFETCH");
        if let Some(value) = prefetch {
            cmd.env("SELFRAG_CPU_PREFETCH", value);
        }
        cmd.output().unwrap()
    };
    let out = generate(Some("far"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains(
            "SELFRAG_CPU_PREFETCH is `far`; set it to measure or a number of tiles from 1 to 64"
        ),
        "{stderr}"
    );
    let report = |prefetch: Option<&str>| -> String {
        let json: Value = serde_json::from_str(&common::ok(generate(prefetch))).unwrap();
        json["prefetch"].as_str().unwrap().to_owned()
    };
    let packed = selfrag_models::packed_kernels_available();
    let measured = report(None);
    let set = report(Some("6"));
    if !packed {
        selfrag_testkit::skip(
            selfrag_testkit::Lack::CpuFeatures(&["avx2", "fma", "f16c"]),
            "this CPU lacks AVX2, FMA or F16C: nothing is packed, nothing prefetched",
        );
        assert_eq!(measured, "2 tiles ahead (no matrix on the packed tiles)");
        return;
    }
    assert!(
        measured.starts_with("2 tiles ahead, not timed: the packed weights (")
            && measured.contains("are fewer than a timing reads"),
        "{measured}"
    );
    assert_eq!(set, "6 tiles ahead, set by SELFRAG_CPU_PREFETCH");
}
