//! How far ahead of the tile it multiplies the packed tiles' decode kernel asks memory for the
//! next ones (`packed::prefetch_tiles`), chosen per CPU model by a calibration at load
//! (issue 48, goal 1).
//!
//! A decode step reads every weight once, and each tile is multiplied in about the time memory
//! takes to deliver it, so the kernel asks for tiles some distance ahead. How far is best is a
//! property of the CPU: its memory's latency against its cores' speed. Asked too late, each tile
//! waits; too early, the lines arrive and are pushed out again before their turn. Measured: 2
//! tiles decoded 1.087× as fast as 8 on an AMD EPYC of family 26, where 8 had been best on an
//! Intel Xeon.
//!
//! The calibration times one-row decode steps over the model's own packed matrices, in the
//! order a step reads them, with each candidate distance ([`CANDIDATES`]), the candidates taking turns over [`ROUNDS`] rounds; the
//! best round of each counts. The matrices timed hold at least twice the CPU's last-level cache
//! (from CPUID), so that the steps read memory, not cache, as a real step does: a timing on one
//! matrix, as the kernels' choice makes ([`crate::cpu_kernels`]), would see the cache. A model
//! smaller than that is not timed and keeps the default. The default distance stays unless
//! another is faster by [`DEFAULT_MARGIN`]: the runs of a shared machine differ by a few
//! percent.
//!
//! The result is remembered with the kernels' choice in the data folder
//! ([`crate::kernel_memory`]), so it runs once per CPU model and thread count, not at each
//! start. `SELFRAG_CPU_PREFETCH` sets the distance instead (`measure`, the default, or a number
//! of tiles from 1 to [`MAX_TILES`]); the benchmarks compare distances with it.

use std::time::Instant;

use candle_core::{Result, Tensor};

use crate::cpu_kernels::timing_activations;
use crate::kernel_memory::{CpuModel, KernelMemory, prefetch_key};
use crate::packed::{DEFAULT_PREFETCH_TILES, PackedMatrix, set_prefetch_tiles};

/// The setting that overrides the calibration.
pub const PREFETCH_ENV: &str = "SELFRAG_CPU_PREFETCH";
/// The distances timed, in tiles (a Q4_K tile is 2.3 KB).
pub const CANDIDATES: [usize; 4] = [1, 2, 4, 8];
/// The largest distance the setting accepts.
pub const MAX_TILES: usize = 64;
/// Rounds of timing, the candidates taking turns; each candidate's best round counts.
const ROUNDS: usize = 3;
/// How much faster another distance must be to replace the default.
pub const DEFAULT_MARGIN: f64 = 1.02;
/// The weights a calibration reads at least, and at most: twice the last-level cache, within
/// these bounds (and [`UNKNOWN_CACHE_BYTES`] where CPUID does not say).
const MIN_TIMED_BYTES: usize = 64 << 20;
const MAX_TIMED_BYTES: usize = 1 << 30;
const UNKNOWN_CACHE_BYTES: usize = 256 << 20;

/// How the distance is to be chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrefetchPolicy {
    /// Calibrated at load (or recalled, where the load remembers the kernels' timing).
    Measure,
    /// Set by [`PREFETCH_ENV`].
    Use(usize),
}

impl PrefetchPolicy {
    /// The policy [`PREFETCH_ENV`] sets; `Measure` when it is unset.
    pub fn from_env() -> std::result::Result<Self, String> {
        match std::env::var(PREFETCH_ENV) {
            Ok(value) => Self::parse(&value),
            Err(std::env::VarError::NotPresent) => Ok(Self::Measure),
            Err(std::env::VarError::NotUnicode(_)) => Err(format!(
                "{PREFETCH_ENV} is not valid text; set it to measure or a number of tiles from 1 \
                 to {MAX_TILES}, or unset it"
            )),
        }
    }

    fn parse(value: &str) -> std::result::Result<Self, String> {
        let value = value.trim();
        if value.is_empty() || value.eq_ignore_ascii_case("measure") {
            return Ok(Self::Measure);
        }
        match value.parse::<usize>() {
            Ok(tiles) if (1..=MAX_TILES).contains(&tiles) => Ok(Self::Use(tiles)),
            _ => Err(format!(
                "{PREFETCH_ENV} is `{value}`; set it to measure or a number of tiles from 1 to \
                 {MAX_TILES}, or unset it"
            )),
        }
    }
}

/// A calibration: the distance chosen, each candidate's best step time, and the bytes of
/// weights a step read.
#[derive(Debug, Clone, PartialEq)]
pub struct PrefetchTimings {
    pub tiles: usize,
    /// `(tiles, seconds)`: a one-row step over the matrices timed.
    pub timed: Vec<(usize, f64)>,
    pub bytes: usize,
}

/// Why the decode kernel runs at the default distance without a calibration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrefetchDefault {
    /// No matrix is on the packed tiles (candle's kernels, or not a CPU).
    NothingPacked,
    /// The packed weights, `bytes`, are fewer than a calibration reads (`needed`): they stay
    /// in the cache, where a timing cannot see the memory.
    FitsInCache { bytes: usize, needed: usize },
}

/// The decode kernel's prefetch distance for a model, and why.
#[derive(Debug, Clone, PartialEq)]
pub enum PrefetchChoice {
    /// Calibrated: at this load, or (`remembered`) at an earlier load on this CPU model.
    Measured {
        timings: PrefetchTimings,
        remembered: bool,
    },
    /// Set by [`PREFETCH_ENV`].
    Set(usize),
    Default(PrefetchDefault),
}

impl PrefetchChoice {
    /// Tiles ahead.
    pub fn tiles(&self) -> usize {
        match self {
            Self::Measured { timings, .. } => timings.tiles,
            Self::Set(tiles) => *tiles,
            Self::Default(_) => DEFAULT_PREFETCH_TILES,
        }
    }
}

impl std::fmt::Display for PrefetchChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mb = |bytes: usize| bytes as f64 / 1e6;
        match self {
            Self::Measured {
                timings,
                remembered,
            } => {
                write!(
                    f,
                    "{} tiles ahead, timed over {:.0} MB of the model's weights{}: a one-row step \
                     took",
                    timings.tiles,
                    mb(timings.bytes),
                    if *remembered {
                        " at an earlier load on this CPU model"
                    } else {
                        ""
                    }
                )?;
                for (i, (tiles, seconds)) in timings.timed.iter().enumerate() {
                    let sep = if i == 0 { " " } else { ", " };
                    write!(f, "{sep}{:.1} ms at {tiles}", seconds * 1e3)?;
                }
                Ok(())
            }
            Self::Set(tiles) => write!(f, "{tiles} tiles ahead, set by {PREFETCH_ENV}"),
            Self::Default(PrefetchDefault::NothingPacked) => write!(
                f,
                "{DEFAULT_PREFETCH_TILES} tiles ahead (no matrix on the packed tiles)"
            ),
            Self::Default(PrefetchDefault::FitsInCache { bytes, needed }) => write!(
                f,
                "{DEFAULT_PREFETCH_TILES} tiles ahead, not timed: the packed weights ({:.0} MB) \
                 are fewer than a timing reads ({:.0} MB, twice the last-level cache)",
                mb(*bytes),
                mb(*needed)
            ),
        }
    }
}

/// Chooses the decode kernel's distance for a model whose packed matrices are `matrices`, in
/// the order a step reads them, as `policy` says, recalled from and kept in `memory` where
/// there is one; and sets it for the process.
pub(crate) fn choose(
    policy: PrefetchPolicy,
    matrices: &[&PackedMatrix],
    memory: Option<&KernelMemory>,
) -> Result<PrefetchChoice> {
    let choice = match policy {
        // Within the setting's bounds, as `from_env` reads it: the kernel adds the distance
        // to a tile's index.
        PrefetchPolicy::Use(tiles) => PrefetchChoice::Set(tiles.clamp(1, MAX_TILES)),
        PrefetchPolicy::Measure => measure(matrices, memory, timed_bytes())?,
    };
    set_prefetch_tiles(choice.tiles());
    Ok(choice)
}

/// The calibration of [`choose`], reading at least `needed` bytes of weights a step.
fn measure(
    matrices: &[&PackedMatrix],
    memory: Option<&KernelMemory>,
    needed: usize,
) -> Result<PrefetchChoice> {
    if matrices.is_empty() {
        return Ok(PrefetchChoice::Default(PrefetchDefault::NothingPacked));
    }
    let mut timed = Vec::new();
    let mut bytes = 0;
    for &matrix in matrices {
        if bytes >= needed {
            break;
        }
        bytes += matrix.bytes();
        timed.push(matrix);
    }
    if bytes < needed {
        return Ok(PrefetchChoice::Default(PrefetchDefault::FitsInCache {
            bytes,
            needed,
        }));
    }
    let memory = memory.and_then(|memory| {
        let key = prefetch_key(&CpuModel::of_this_machine()?, rayon::current_num_threads());
        Some((memory, key))
    });
    if let Some(timings) = memory
        .as_ref()
        .and_then(|(memory, key)| memory.recall_prefetch(key))
    {
        return Ok(PrefetchChoice::Measured {
            timings,
            remembered: true,
        });
    }
    let steps = time_steps(&timed, &CANDIDATES, ROUNDS)?;
    let timings = PrefetchTimings {
        tiles: fastest(&steps),
        timed: steps,
        bytes,
    };
    if let Some((memory, key)) = &memory {
        memory.remember_prefetch(key, &timings);
    }
    Ok(PrefetchChoice::Measured {
        timings,
        remembered: false,
    })
}

/// The distance to use given each candidate's step time: the fastest, unless the default is
/// within [`DEFAULT_MARGIN`] of it.
pub(crate) fn fastest(steps: &[(usize, f64)]) -> usize {
    let default = steps
        .iter()
        .find(|&&(tiles, _)| tiles == DEFAULT_PREFETCH_TILES)
        .map(|&(_, seconds)| seconds);
    let Some(&(best, best_seconds)) = steps.iter().min_by(|a, b| a.1.total_cmp(&b.1)) else {
        return DEFAULT_PREFETCH_TILES;
    };
    match default {
        Some(default) if best_seconds * DEFAULT_MARGIN >= default => DEFAULT_PREFETCH_TILES,
        _ => best,
    }
}

/// Each candidate's best time, over `rounds` rounds taking turns, for a one-row step through
/// `matrices`. Leaves the process's distance as it found it.
///
/// One row, not the five of an answer's candidates: both steps read the same weights and
/// wait on memory alike (on the EPYC, 2 tiles against 8 decoded one row 1.087× as fast and
/// five rows 1.114×), and a step of five takes as long again.
fn time_steps(
    matrices: &[&PackedMatrix],
    candidates: &[usize],
    rounds: usize,
) -> Result<Vec<(usize, f64)>> {
    let before = crate::packed::prefetch_tiles();
    let mut inputs: Vec<(usize, Tensor)> = Vec::new();
    for matrix in matrices {
        let k = matrix.k();
        if !inputs.iter().any(|(known, _)| *known == k) {
            inputs.push((k, timing_activations(1, k)?));
        }
    }
    let step = || -> Result<()> {
        for matrix in matrices {
            let Some((_, x)) = inputs.iter().find(|(k, _)| *k == matrix.k()) else {
                candle_core::bail!("no input of {} values", matrix.k());
            };
            matrix.forward(x)?;
        }
        Ok(())
    };
    let result = (|| {
        // The first step finds the pool's threads asleep and the pages untouched since packing.
        step()?;
        let mut best = vec![f64::INFINITY; candidates.len()];
        for round in 0..rounds {
            // Each round starts with another candidate, so none is always first after a pause.
            for turn in 0..candidates.len() {
                let i = (turn + round) % candidates.len();
                set_prefetch_tiles(candidates[i]);
                let started = Instant::now();
                step()?;
                best[i] = best[i].min(started.elapsed().as_secs_f64());
            }
        }
        Ok(candidates.iter().copied().zip(best).collect())
    })();
    set_prefetch_tiles(before);
    result
}

/// The bytes a calibration reads: twice the last-level cache, within bounds.
fn timed_bytes() -> usize {
    last_level_cache_bytes()
        .map_or(UNKNOWN_CACHE_BYTES, |bytes| bytes.saturating_mul(2))
        .clamp(MIN_TIMED_BYTES, MAX_TIMED_BYTES)
}

/// The size of the CPU's last-level cache, as CPUID describes its caches (leaf 4 on Intel,
/// 0x8000001D on AMD: the same layout); `None` where it does not.
pub(crate) fn last_level_cache_bytes() -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::__cpuid_count;
        let vendor = CpuModel::of_this_machine()?.vendor;
        let leaf = if vendor == "AuthenticAMD" || vendor == "HygonGenuine" {
            // Only where the CPU has the topology extensions (CPUID 0x80000001, ECX bit 22).
            let extended = std::arch::x86_64::__cpuid(0x8000_0000).eax;
            let topology = extended >= 0x8000_0001
                && std::arch::x86_64::__cpuid(0x8000_0001).ecx & (1 << 22) != 0;
            if extended < 0x8000_001D || !topology {
                return None;
            }
            0x8000_001D
        } else {
            if std::arch::x86_64::__cpuid(0).eax < 4 {
                return None;
            }
            4
        };
        let mut largest: Option<(u32, usize)> = None;
        // Subleaf after subleaf until one says "no more caches"; 16 is far past any CPU's.
        for subleaf in 0..16 {
            let r = __cpuid_count(leaf, subleaf);
            let kind = r.eax & 0x1F;
            if kind == 0 {
                break;
            }
            // Data (1) or unified (3) caches; an instruction cache is not where weights go.
            if kind == 2 {
                continue;
            }
            let level = (r.eax >> 5) & 0x7;
            let ways = ((r.ebx >> 22) & 0x3FF) as usize + 1;
            let partitions = ((r.ebx >> 12) & 0x3FF) as usize + 1;
            let line = (r.ebx & 0xFFF) as usize + 1;
            let sets = r.ecx as usize + 1;
            let size = ways * partitions * line * sets;
            if largest.is_none_or(|(l, _)| level > l) {
                largest = Some((level, size));
            }
        }
        largest.map(|(_, size)| size)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        None
    }
}

#[cfg(test)]
mod tests {
    use candle_core::Device;
    use candle_core::quantized::{GgmlDType, QTensor};

    use super::*;

    #[test]
    fn the_setting_reads_measure_or_a_distance_and_names_itself_otherwise() {
        assert_eq!(PrefetchPolicy::parse(""), Ok(PrefetchPolicy::Measure));
        assert_eq!(
            PrefetchPolicy::parse(" Measure "),
            Ok(PrefetchPolicy::Measure)
        );
        assert_eq!(PrefetchPolicy::parse("8"), Ok(PrefetchPolicy::Use(8)));
        assert_eq!(PrefetchPolicy::parse("1"), Ok(PrefetchPolicy::Use(1)));
        for bad in ["0", "65", "-2", "far"] {
            let error = PrefetchPolicy::parse(bad).unwrap_err();
            assert!(
                error.contains(PREFETCH_ENV) && error.contains(&format!("`{bad}`")),
                "{error}"
            );
        }
    }

    #[test]
    fn the_default_stays_unless_another_distance_is_faster_by_the_margin() {
        let d = DEFAULT_PREFETCH_TILES;
        assert_eq!(fastest(&[(1, 0.100), (d, 0.101), (8, 0.100)]), d);
        assert_eq!(fastest(&[(1, 0.100), (d, 0.110), (8, 0.090)]), 8);
        assert_eq!(fastest(&[(1, 0.080), (d, 0.110), (8, 0.090)]), 1);
        assert_eq!(fastest(&[(d, 0.050), (8, 0.090)]), d);
        // Without the default among them, the fastest; without any, the default.
        assert_eq!(fastest(&[(4, 0.07), (8, 0.06)]), 8);
        assert_eq!(fastest(&[]), d);
    }

    /// Linux reads the same CPUID leaves for its account of the caches: the two must agree.
    #[test]
    fn the_last_level_cache_is_the_one_linux_reports() {
        let from_cpuid = last_level_cache_bytes();
        if !cfg!(target_arch = "x86_64") {
            assert_eq!(from_cpuid, None);
            return;
        }
        let Ok(entries) = std::fs::read_dir("/sys/devices/system/cpu/cpu0/cache") else {
            return;
        };
        let mut largest: Option<(u32, usize)> = None;
        for entry in entries.flatten() {
            let read = |name: &str| std::fs::read_to_string(entry.path().join(name)).ok();
            let (Some(level), Some(kind), Some(size)) = (read("level"), read("type"), read("size"))
            else {
                continue;
            };
            if kind.trim() == "Instruction" {
                continue;
            }
            let level: u32 = level.trim().parse().unwrap();
            let size = size.trim();
            let bytes = match size.strip_suffix('K') {
                Some(k) => k.parse::<usize>().unwrap() << 10,
                None => size.parse::<usize>().unwrap(),
            };
            if largest.is_none_or(|(l, _)| level > l) {
                largest = Some((level, bytes));
            }
        }
        assert_eq!(from_cpuid, largest.map(|(_, bytes)| bytes));
    }

    fn packed(n: usize, k: usize, seed: usize) -> Option<PackedMatrix> {
        let values: Vec<f32> = (0..n * k)
            .map(|i| (((i + seed) % 97) as f32 - 48.0) / 50.0)
            .collect();
        let w = Tensor::from_vec(values, (n, k), &Device::Cpu).unwrap();
        PackedMatrix::pack(&QTensor::quantize(&w, GgmlDType::Q4K).unwrap()).unwrap()
    }

    /// Every candidate is timed, the choice follows [`fastest`], it is set for the process and
    /// remembered; the next load recalls it without timing, what the file says winning; a
    /// setting wins over both; too few weights are not timed.
    #[test]
    fn a_calibration_times_every_distance_once_and_is_recalled_after() {
        let (Some(a), Some(b)) = (packed(512, 1024, 0), packed(256, 2048, 7)) else {
            selfrag_testkit::skip(
                selfrag_testkit::Lack::CpuFeatures(&["avx2", "fma", "f16c"]),
                "this CPU lacks AVX2, FMA or F16C: nothing is packed, nothing to time",
            );
            return;
        };
        let matrices = [&a, &b];
        let needed = a.bytes() + 1;
        let dir = tempfile::tempdir().unwrap();
        let memory = KernelMemory::in_data_folder(dir.path());
        let PrefetchChoice::Measured {
            timings,
            remembered: false,
        } = measure(&matrices, Some(&memory), needed).unwrap()
        else {
            panic!("the first load did not time the distances");
        };
        assert_eq!(timings.bytes, a.bytes() + b.bytes());
        let tiles: Vec<usize> = timings.timed.iter().map(|&(t, _)| t).collect();
        assert_eq!(tiles, CANDIDATES);
        assert!(timings.timed.iter().all(|&(_, s)| s > 0.0 && s.is_finite()));
        assert_eq!(timings.tiles, fastest(&timings.timed));
        assert_eq!(
            measure(&matrices, Some(&memory), needed).unwrap(),
            PrefetchChoice::Measured {
                timings: timings.clone(),
                remembered: true,
            }
        );
        // A file naming a distance no timing here chose, with a time no step takes: recalled
        // as it stands, so nothing was timed.
        let key = prefetch_key(
            &CpuModel::of_this_machine().unwrap(),
            rayon::current_num_threads(),
        );
        let planted = PrefetchTimings {
            tiles: 8,
            timed: vec![(2, 123.5), (8, 99.0)],
            bytes: timings.bytes,
        };
        memory.remember_prefetch(&key, &planted);
        assert_eq!(
            measure(&matrices, Some(&memory), needed).unwrap(),
            PrefetchChoice::Measured {
                timings: planted,
                remembered: true,
            }
        );
        // A distance no setting makes (a damaged file) is not taken: timed over and rewritten.
        for tiles in [0, MAX_TILES + 1, usize::MAX >> 1] {
            let damaged = PrefetchTimings {
                tiles,
                timed: vec![(tiles, 0.5)],
                bytes: timings.bytes,
            };
            memory.remember_prefetch(&key, &damaged);
            let PrefetchChoice::Measured {
                timings: retimed,
                remembered: false,
            } = measure(&matrices, Some(&memory), needed).unwrap()
            else {
                panic!("a distance of {tiles} tiles was recalled");
            };
            assert!(CANDIDATES.contains(&retimed.tiles));
        }
        // Without a memory it times again; with too few weights, not at all.
        assert!(matches!(
            measure(&matrices, None, needed).unwrap(),
            PrefetchChoice::Measured {
                remembered: false,
                ..
            }
        ));
        let all = a.bytes() + b.bytes();
        assert_eq!(
            measure(&matrices, Some(&memory), all + 1).unwrap(),
            PrefetchChoice::Default(PrefetchDefault::FitsInCache {
                bytes: all,
                needed: all + 1
            })
        );
        assert_eq!(
            measure(&[], Some(&memory), needed).unwrap(),
            PrefetchChoice::Default(PrefetchDefault::NothingPacked)
        );
        let set = choose(PrefetchPolicy::Use(5), &matrices, Some(&memory)).unwrap();
        assert_eq!(set, PrefetchChoice::Set(5));
        assert_eq!(crate::packed::prefetch_tiles(), 5);
        // A caller's distance past the setting's bounds is held to them.
        let far = choose(PrefetchPolicy::Use(usize::MAX), &matrices, None).unwrap();
        assert_eq!(far, PrefetchChoice::Set(MAX_TILES));
        assert_eq!(crate::packed::prefetch_tiles(), MAX_TILES);
        set_prefetch_tiles(DEFAULT_PREFETCH_TILES);
    }

    /// The products do not depend on the distance: it only says when tiles are asked for.
    #[test]
    fn every_distance_computes_the_same_products() {
        let Some(a) = packed(256, 1024, 3) else {
            selfrag_testkit::skip(
                selfrag_testkit::Lack::CpuFeatures(&["avx2", "fma", "f16c"]),
                "this CPU lacks AVX2, FMA or F16C: nothing is packed",
            );
            return;
        };
        let x = Tensor::from_vec(
            (0..5 * 1024)
                .map(|i| (i % 13) as f32 - 6.0)
                .collect::<Vec<f32>>(),
            (5, 1024),
            &Device::Cpu,
        )
        .unwrap();
        let before = crate::packed::prefetch_tiles();
        let products: Vec<Vec<Vec<f32>>> = [1, 2, 8, MAX_TILES]
            .iter()
            .map(|&tiles| {
                set_prefetch_tiles(tiles);
                a.forward(&x).unwrap().to_vec2::<f32>().unwrap()
            })
            .collect();
        set_prefetch_tiles(before);
        assert!(products.windows(2).all(|w| w[0] == w[1]));
    }
}
