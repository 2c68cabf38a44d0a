//! `selfrag models pull` and `selfrag models verify`: downloading a shipped model into the
//! Hugging Face cache with one progress line on stderr, and checking the cached files' sizes,
//! SHA-256 hashes and architecture with a verdict per file.

use std::io::{IsTerminal, Write};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use selfrag_hub::ModelSpec;
use selfrag_hub::download::{
    DownloadPhase, DownloadProgress, FileCheck, HubOptions, Verdict, download_model, verify_model,
};
use serde::Serialize;

/// Downloads model `id` (or, with `offline`, only looks in the cache) and prints where it is.
pub fn pull(id: &str, offline: bool) -> Result<()> {
    let spec = known(id)?;
    let mut options = HubOptions::from_env();
    options.offline |= offline;
    let mut line = ProgressLine::new(&spec.id);
    let cancel = AtomicBool::new(false);
    let result = download_model(&spec, &options, &mut |p| line.show(p), &cancel);
    line.finish();
    let report = result.with_context(|| format!("pulling {}", spec.id))?;
    let mut err = std::io::stderr();
    let _ = writeln!(
        err,
        "{}: {} downloaded, {} already in the cache, {} resumed",
        spec.id,
        bytes(report.fetched_bytes),
        bytes(report.cached_bytes),
        bytes(report.resumed_bytes)
    );
    super::write_stdout(&format!("{}\n", report.found.display()))
}

#[derive(Serialize)]
struct ModelCheck {
    id: String,
    repo: String,
    /// Every required file present and none wrong.
    complete: bool,
    /// Some file is there but wrong (size, hash) or the model is of another architecture.
    corrupt: bool,
    architecture_error: Option<String>,
    files: Vec<FileCheck>,
}

/// Checks model `id`, or every shipped model with files in the cache; fails when a file is
/// wrong, or (for an explicit `id`) when a required file is missing.
pub fn verify(id: Option<&str>, json: bool) -> Result<()> {
    let cache = selfrag_hub::hf_hub_cache_dir().context(
        "no Hugging Face cache folder: HOME, HF_HOME and HF_HUB_CACHE are all unset; set HF_HOME",
    )?;
    let specs = match id {
        Some(id) => vec![known(id)?],
        None => ModelSpec::all()?,
    };
    let mut results = Vec::new();
    for spec in &specs {
        let mut line = ProgressLine::new(&spec.id);
        let (files, architecture) = verify_model(spec, &cache, &mut |p| line.show(p));
        line.finish();
        let wrong = files
            .iter()
            .any(|f| matches!(f.verdict, Verdict::WrongHash | Verdict::WrongSize));
        let complete = files
            .iter()
            .all(|f| !f.required || matches!(f.verdict, Verdict::Ok | Verdict::Unverified));
        results.push(ModelCheck {
            id: spec.id.clone(),
            repo: spec.repo.clone(),
            complete: complete && !wrong,
            corrupt: wrong || architecture.is_some(),
            architecture_error: architecture.map(|e| e.to_string()),
            files,
        });
    }
    if json {
        super::write_stdout(&format!("{}\n", serde_json::to_string_pretty(&results)?))?;
    } else {
        super::write_stdout(&human(&results))?;
    }
    let corrupt: Vec<&str> = results
        .iter()
        .filter(|r| r.corrupt)
        .map(|r| r.id.as_str())
        .collect();
    if !corrupt.is_empty() {
        anyhow::bail!(
            "{} failed verification; run `selfrag models pull ID` for each to download it again",
            corrupt.join(", ")
        );
    }
    if let Some(id) = id
        && results.iter().any(|r| !r.complete)
    {
        anyhow::bail!("{id} is not completely in the cache; run `selfrag models pull {id}`");
    }
    Ok(())
}

fn human(results: &[ModelCheck]) -> String {
    let mut text = String::new();
    for r in results {
        let verdict = if r.corrupt {
            "FAILED"
        } else if r.complete {
            "ok"
        } else {
            "not downloaded"
        };
        text.push_str(&format!("{} ({}): {verdict}\n", r.id, r.repo));
        for f in &r.files {
            let label = match f.verdict {
                Verdict::Ok => "ok",
                Verdict::Unverified => "present",
                Verdict::Missing => "missing",
                Verdict::WrongSize => "WRONG SIZE",
                Verdict::WrongHash => "CORRUPT",
            };
            let size = f.size.map(bytes).unwrap_or_else(|| "-".into());
            text.push_str(&format!(
                "  {label:<10} {:<28} {size:>10}  {}\n",
                f.file, f.detail
            ));
        }
        if let Some(e) = &r.architecture_error {
            text.push_str(&format!("  WRONG MODEL {e}\n"));
        }
    }
    text
}

fn known(id: &str) -> Result<ModelSpec> {
    ModelSpec::by_id(id).with_context(|| {
        format!("`{id}` is not a known model; `selfrag models list` shows the ids")
    })
}

/// One line on stderr, rewritten in place on a terminal; elsewhere a line every few seconds.
struct ProgressLine {
    id: String,
    tty: bool,
    last: Option<Instant>,
    width: usize,
}

impl ProgressLine {
    fn new(id: &str) -> Self {
        Self {
            id: id.to_owned(),
            tty: std::io::stderr().is_terminal(),
            last: None,
            width: 0,
        }
    }

    fn show(&mut self, p: &DownloadProgress) {
        let every = if self.tty {
            Duration::from_millis(200)
        } else {
            Duration::from_secs(5)
        };
        let phase_end = matches!(p.phase, DownloadPhase::Done);
        if !phase_end && self.last.is_some_and(|t| t.elapsed() < every) {
            return;
        }
        self.last = Some(Instant::now());
        let what = match p.phase {
            DownloadPhase::Checking => "checking",
            DownloadPhase::Downloading => "downloading",
            DownloadPhase::Verifying => "verifying",
            DownloadPhase::Done => "done",
        };
        let mut text = format!("{} {what} {}", self.id, p.file);
        if p.bytes_total > 0 {
            text.push_str(&format!(
                "  {} / {} ({:.0}%)",
                bytes(p.bytes_done),
                bytes(p.bytes_total),
                100.0 * p.bytes_done as f64 / p.bytes_total as f64
            ));
        }
        if p.bytes_per_second > 0.0 && p.phase == DownloadPhase::Downloading {
            text.push_str(&format!("  {}/s", bytes(p.bytes_per_second as u64)));
        }
        if let Some(eta) = p
            .eta_seconds
            .filter(|_| p.phase == DownloadPhase::Downloading)
        {
            text.push_str(&format!("  {} left", duration(eta)));
        }
        let mut err = std::io::stderr();
        if self.tty {
            let pad = self.width.saturating_sub(text.len());
            let _ = write!(err, "\r{text}{}", " ".repeat(pad));
            self.width = text.len();
        } else {
            let _ = writeln!(err, "{text}");
        }
        let _ = err.flush();
    }

    fn finish(&mut self) {
        if self.tty && self.width > 0 {
            let _ = writeln!(std::io::stderr());
        }
    }
}

/// "4.08 GB", "512.0 MB", "12 kB": decimal units, as the hub shows sizes.
fn bytes(n: u64) -> String {
    let n = n as f64;
    if n >= 1e9 {
        format!("{:.2} GB", n / 1e9)
    } else if n >= 1e6 {
        format!("{:.1} MB", n / 1e6)
    } else if n >= 1e3 {
        format!("{:.0} kB", n / 1e3)
    } else {
        format!("{n} B")
    }
}

/// "3 min 12 s", "45 s", "2 h 5 min".
fn duration(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min {} s", s / 60, s % 60),
        _ => format!("{} h {} min", s / 3600, (s % 3600) / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_durations_read_like_the_hub() {
        assert_eq!(bytes(4_080_000_000), "4.08 GB");
        assert_eq!(bytes(438_000_000), "438.0 MB");
        assert_eq!(bytes(999), "999 B");
        assert_eq!(duration(45.2), "45 s");
        assert_eq!(duration(192.0), "3 min 12 s");
        assert_eq!(duration(7500.0), "2 h 5 min");
    }
}
