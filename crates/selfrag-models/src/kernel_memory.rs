//! Kernel choices remembered per CPU model: what [`crate::cpu_kernels`] timed at a model's load,
//! kept in a file of the app's data folder, so that the next load of a model with the same
//! sample matrix, on a CPU of the same vendor, family, model and stepping, with as many threads
//! and the same kernels, takes the choice without timing again (issue 48, goal 1: a short
//! calibration, once per CPU model).
//!
//! The timing runs while the embedder loads beside the generator and costs a few hundred
//! milliseconds of every start; remembered, the choice is also the same on every start, where
//! two timings a few percent apart could differ. The file is a cache: one that cannot be read
//! or is not this format is timed over and rewritten, and one that cannot be written leaves the
//! choice timed on each load, with a warning in the log. Deleting it makes the next load time
//! the kernels again.

use std::path::{Path, PathBuf};

use crate::cpu_kernels::{CpuKernels, ProductTimes};
use crate::decode_prefetch::{MAX_TILES, PrefetchTimings};

/// The file's name in the data folder.
pub const KERNEL_MEMORY_FILE: &str = "cpu-kernels.json";

/// Changes whenever either kernel's code changes (this crate's packed tiles, or a new candle):
/// a choice remembered for older kernels is not taken.
const KERNELS_REVISION: &str = concat!(env!("CARGO_PKG_VERSION"), "+packed-tiles-4");

/// Layout of the file.
const FORMAT: u64 = 1;

/// The CPU as its identification instruction names it: what decides how fast each kernel runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuModel {
    pub vendor: String,
    pub family: u32,
    pub model: u32,
    pub stepping: u32,
}

impl CpuModel {
    /// This machine's CPU; `None` where there is no identification instruction to ask (not
    /// x86-64, where the packed tiles do not run either).
    pub fn of_this_machine() -> Option<Self> {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::__cpuid;
            // CPUID is on every x86-64 CPU, with leaves 0 and 1 on every one of them.
            let (leaf0, leaf1) = (__cpuid(0), __cpuid(1));
            let vendor: Vec<u8> = [leaf0.ebx, leaf0.edx, leaf0.ecx]
                .iter()
                .flat_map(|r| r.to_le_bytes())
                .collect();
            let eax = leaf1.eax;
            let stepping = eax & 0xF;
            let base_family = (eax >> 8) & 0xF;
            let base_model = (eax >> 4) & 0xF;
            let family = if base_family == 0xF {
                base_family + ((eax >> 20) & 0xFF)
            } else {
                base_family
            };
            let model = if base_family == 0x6 || base_family == 0xF {
                base_model + (((eax >> 16) & 0xF) << 4)
            } else {
                base_model
            };
            Some(Self {
                vendor: String::from_utf8_lossy(&vendor).trim().to_owned(),
                family,
                model,
                stepping,
            })
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            None
        }
    }
}

impl std::fmt::Display for CpuModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} family {} model {} stepping {}",
            self.vendor, self.family, self.model, self.stepping
        )
    }
}

/// What a timing chose, as remembered.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RememberedChoice {
    pub kernels: CpuKernels,
    pub packed: ProductTimes,
    pub candle: ProductTimes,
}

/// The remembered choices: a file, normally [`KERNEL_MEMORY_FILE`] in the data folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelMemory {
    file: PathBuf,
}

impl KernelMemory {
    /// The choices kept in `file`, which need not exist yet.
    pub fn in_file(file: PathBuf) -> Self {
        Self { file }
    }

    /// The choices kept in the data folder `dir`.
    pub fn in_data_folder(dir: &Path) -> Self {
        Self::in_file(dir.join(KERNEL_MEMORY_FILE))
    }

    pub fn file(&self) -> &Path {
        &self.file
    }

    /// What the file holds under `key`, if it holds a readable choice there.
    pub(crate) fn recall(&self, key: &str) -> Option<RememberedChoice> {
        let choices = self.read()?;
        let entry = choices.get(key)?;
        let kernels = match entry.get("kernels")?.as_str()? {
            "packed" => CpuKernels::Packed,
            "candle" => CpuKernels::Candle,
            _ => return None,
        };
        let times = |name: &str| -> Option<ProductTimes> {
            let t = entry.get(name)?;
            Some(ProductTimes {
                prefill_pass_seconds: t.get("prefill_pass_seconds")?.as_f64()?,
                decode_step_seconds: t.get("decode_step_seconds")?.as_f64()?,
                prefill_passes: u32::try_from(t.get("prefill_passes")?.as_u64()?).ok()?,
            })
        };
        Some(RememberedChoice {
            kernels,
            packed: times("packed")?,
            candle: times("candle")?,
        })
    }

    /// Keeps `choice` under `key` beside the other choices (see [`KernelMemory::store`]).
    pub(crate) fn remember(&self, key: &str, choice: &RememberedChoice) {
        let times = |t: &ProductTimes| {
            serde_json::json!({
                "prefill_pass_seconds": t.prefill_pass_seconds,
                "decode_step_seconds": t.decode_step_seconds,
                "prefill_passes": t.prefill_passes,
            })
        };
        self.store(
            key,
            serde_json::json!({
                "kernels": match choice.kernels {
                    CpuKernels::Packed => "packed",
                    CpuKernels::Candle => "candle",
                },
                "packed": times(&choice.packed),
                "candle": times(&choice.candle),
            }),
        );
    }

    /// The decode kernel's prefetch distance remembered under `key`, if the file holds a
    /// readable one there.
    pub(crate) fn recall_prefetch(&self, key: &str) -> Option<PrefetchTimings> {
        let choices = self.read()?;
        let entry = choices.get(key)?;
        // A distance no setting could make (a damaged or foreign file) is timed over: the
        // kernel adds it to a tile's index.
        let tiles = usize::try_from(entry.get("prefetch_tiles")?.as_u64()?)
            .ok()
            .filter(|tiles| (1..=MAX_TILES).contains(tiles))?;
        let timed = entry
            .get("step_seconds")?
            .as_object()?
            .iter()
            .map(|(tiles, seconds)| Some((tiles.parse().ok()?, seconds.as_f64()?)))
            .collect::<Option<Vec<(usize, f64)>>>()?;
        let bytes = usize::try_from(entry.get("bytes")?.as_u64()?).ok()?;
        timed
            .iter()
            .any(|&(t, _)| t == tiles)
            .then_some(PrefetchTimings {
                tiles,
                timed,
                bytes,
            })
    }

    /// Keeps a calibration of the decode kernel's prefetch distance under `key`.
    pub(crate) fn remember_prefetch(&self, key: &str, timings: &PrefetchTimings) {
        let steps: serde_json::Map<String, serde_json::Value> = timings
            .timed
            .iter()
            .map(|&(tiles, seconds)| (tiles.to_string(), seconds.into()))
            .collect();
        self.store(
            key,
            serde_json::json!({
                "prefetch_tiles": timings.tiles,
                "step_seconds": steps,
                "bytes": timings.bytes,
            }),
        );
    }

    /// Keeps `entry` under `key` beside the other entries, replacing the file whole (a write
    /// to a new file, then a rename): a load that reads it meanwhile sees the old file or the
    /// new one. A failure is logged; the choice then stands for this load only.
    fn store(&self, key: &str, entry: serde_json::Value) {
        let mut choices = self.read().unwrap_or_default();
        choices.insert(key.to_owned(), entry);
        let document = serde_json::json!({ "format": FORMAT, "choices": choices });
        if let Err(e) = self.write(&document) {
            tracing::warn!(
                file = %self.file.display(),
                error = %e,
                "cannot remember the CPU kernels' timing; they will be timed again at the next load"
            );
        }
    }

    fn read(&self) -> Option<serde_json::Map<String, serde_json::Value>> {
        let text = std::fs::read_to_string(&self.file).ok()?;
        let document: serde_json::Value = match serde_json::from_str(&text) {
            Ok(document) => document,
            Err(e) => {
                tracing::warn!(file = %self.file.display(), error = %e, "the remembered CPU kernel choices are not JSON; timing the kernels again");
                return None;
            }
        };
        if document.get("format")?.as_u64()? != FORMAT {
            return None;
        }
        document.get("choices")?.as_object().cloned()
    }

    fn write(&self, document: &serde_json::Value) -> std::io::Result<()> {
        let dir = self.file.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let name = self
            .file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| KERNEL_MEMORY_FILE.to_owned());
        let temporary = dir.join(format!(".{name}.{}.tmp", std::process::id()));
        std::fs::write(&temporary, format!("{document:#}\n"))?;
        std::fs::rename(&temporary, &self.file).inspect_err(|_| {
            let _ = std::fs::remove_file(&temporary);
        })
    }
}

/// The key a choice is remembered under: the CPU model, the threads the products ran on, the
/// matrix timed (name, type, shape), the packed tiles' instruction set and the kernels'
/// revision. Any of them changed, the
/// kernels are timed again.
pub(crate) fn choice_key(
    cpu: &CpuModel,
    threads: usize,
    matrix: &str,
    dtype: candle_core::quantized::GgmlDType,
    shape: &[usize],
) -> String {
    let shape: Vec<String> = shape.iter().map(usize::to_string).collect();
    format!(
        "{cpu}; {threads} threads; {matrix} {dtype:?} {}; kernels {KERNELS_REVISION}{}",
        shape.join("x"),
        simd_suffix()
    )
}

/// The key a prefetch distance is remembered under: the CPU model, the threads that read the
/// weights, the packed tiles' instruction set and the kernels' revision. It does not depend on the model: the distance is how
/// far ahead of the cores the memory must be asked, whatever it holds.
pub(crate) fn prefetch_key(cpu: &CpuModel, threads: usize) -> String {
    format!(
        "{cpu}; {threads} threads; decode prefetch; kernels {KERNELS_REVISION}{}",
        simd_suffix()
    )
}

/// The packed tiles' instruction set in force, for the keys: a CPU told to use a lower one
/// (`SELFRAG_CPU_SIMD`) times its kernels again.
fn simd_suffix() -> String {
    match crate::packed::packed_simd() {
        Ok(Some(simd)) => format!(" on {}", simd.setting()),
        Ok(None) | Err(_) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn times(pass: f64, step: f64, passes: u32) -> ProductTimes {
        ProductTimes {
            prefill_pass_seconds: pass,
            decode_step_seconds: step,
            prefill_passes: passes,
        }
    }

    #[test]
    fn a_remembered_choice_is_recalled_under_its_key_only() {
        let dir = tempfile::tempdir().unwrap();
        let memory = KernelMemory::in_data_folder(dir.path());
        assert_eq!(memory.recall("a"), None, "no file yet");
        let choice = RememberedChoice {
            kernels: CpuKernels::Candle,
            packed: times(0.04, 0.002, 10),
            candle: times(0.01, 0.001, 40),
        };
        memory.remember("a", &choice);
        let other = RememberedChoice {
            kernels: CpuKernels::Packed,
            ..choice
        };
        memory.remember("b", &other);
        assert_eq!(memory.recall("a"), Some(choice));
        assert_eq!(memory.recall("b"), Some(other));
        assert_eq!(memory.recall("c"), None);
        // Another process reading it meanwhile finds a whole file: no temporary is left.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from(KERNEL_MEMORY_FILE)]);
    }

    #[test]
    fn a_damaged_or_foreign_file_is_timed_over_and_rewritten() {
        let dir = tempfile::tempdir().unwrap();
        let memory = KernelMemory::in_data_folder(dir.path());
        let choice = RememberedChoice {
            kernels: CpuKernels::Packed,
            packed: times(0.04, 0.002, 10),
            candle: times(0.05, 0.003, 40),
        };
        for text in [
            "{not json",
            r#"{"format": 99, "choices": {}}"#,
            r#"{"format": 1, "choices": {"a": {"kernels": "avx2"}}}"#,
        ] {
            std::fs::write(memory.file(), text).unwrap();
            assert_eq!(memory.recall("a"), None, "{text}");
            memory.remember("a", &choice);
            assert_eq!(memory.recall("a"), Some(choice), "{text}");
        }
    }

    #[test]
    fn a_folder_that_cannot_hold_the_file_leaves_the_choice_unremembered() {
        let dir = tempfile::tempdir().unwrap();
        let blocker = dir.path().join("not-a-folder");
        std::fs::write(&blocker, "").unwrap();
        let memory = KernelMemory::in_data_folder(&blocker);
        let choice = RememberedChoice {
            kernels: CpuKernels::Packed,
            packed: times(0.04, 0.002, 10),
            candle: times(0.05, 0.003, 40),
        };
        memory.remember("a", &choice);
        assert_eq!(memory.recall("a"), None);
    }

    #[test]
    fn the_key_changes_with_the_cpu_the_threads_and_the_matrix() {
        let cpu = CpuModel {
            vendor: "GenuineIntel".into(),
            family: 6,
            model: 207,
            stepping: 2,
        };
        let q4k = candle_core::quantized::GgmlDType::Q4K;
        let key = choice_key(&cpu, 2, "blk.0.ffn_up.weight", q4k, &[11008, 4096]);
        assert!(
            key.contains("GenuineIntel family 6 model 207 stepping 2")
                && key.contains("11008x4096"),
            "{key}"
        );
        let zen5 = CpuModel {
            vendor: "AuthenticAMD".into(),
            family: 26,
            ..cpu.clone()
        };
        for other in [
            choice_key(&zen5, 2, "blk.0.ffn_up.weight", q4k, &[11008, 4096]),
            choice_key(&cpu, 4, "blk.0.ffn_up.weight", q4k, &[11008, 4096]),
            choice_key(&cpu, 2, "blk.0.ffn_up.weight", q4k, &[14336, 4096]),
            choice_key(
                &cpu,
                2,
                "blk.0.ffn_up.weight",
                candle_core::quantized::GgmlDType::Q6K,
                &[11008, 4096],
            ),
        ] {
            assert_ne!(key, other);
        }
    }

    #[test]
    fn this_machines_cpu_is_named_where_it_can_be() {
        let cpu = CpuModel::of_this_machine();
        if !cfg!(target_arch = "x86_64") {
            assert_eq!(cpu, None);
            return;
        }
        let cpu = cpu.unwrap();
        assert!(!cpu.vendor.is_empty() && cpu.vendor.is_ascii(), "{cpu}");
        // Linux reads the same instruction: its account must agree.
        if let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") {
            let field = |name: &str| -> Option<String> {
                info.lines().find_map(|line| {
                    let (key, value) = line.split_once(':')?;
                    (key.trim() == name).then(|| value.trim().to_owned())
                })
            };
            assert_eq!(field("vendor_id").as_deref(), Some(cpu.vendor.as_str()));
            assert_eq!(field("cpu family"), Some(cpu.family.to_string()));
            assert_eq!(field("model"), Some(cpu.model.to_string()));
            assert_eq!(field("stepping"), Some(cpu.stepping.to_string()));
        }
    }
}
