//! Which kernels multiply a model's Q4_K and Q6_K matrices on the CPU: this crate's packed
//! tiles ([`crate::packed`]) or candle's own, and how the choice is made.
//!
//! Both compute the same products (the packed tiles' tests hold them to candle's within 1e-5)
//! and both have AVX-512 VNNI paths, but which is faster depends on the CPU's execution units
//! and memory, not on its list of instructions. On the Xeons we measure, with two 512-bit
//! units, the packed tiles read the weights about as fast as the memory delivers them and
//! decode 1.10× llama.cpp where candle's kernels decode 0.98×; on an AMD EPYC, which runs a
//! 512-bit instruction as two 256-bit halves, the packed tiles decoded at 0.53× llama.cpp,
//! bound by arithmetic. So when the CPU can run both, both multiply one of the model's own
//! matrices at load, block 0's `ffn_up` (a Q4_K matrix in every Q4_K_M file, the type of most
//! of its weights), with the products of a default answer, and the faster is used for the
//! whole model.
//!
//! The products timed are a pass of a prompt (the generator's pass on each kernel: 124 rows on
//! the packed tiles, 31 on candle's, which from 32 rows would take its AMX path) and a step of
//! five candidates decoded together (5 rows, K = 5), weighted as a short-form answer over five
//! passages of about 250 tokens spends them: [`PACKED_PREFILL_PASSES`] or
//! [`CANDLE_PREFILL_PASSES`] passes and [`DECODE_STEPS`] steps. Candle's copy of the weights is the larger (6 bits per Q4_K weight against 4.63, 10
//! per Q6_K weight against 6.63), so it is chosen only when it is faster by
//! [`CANDLE_MARGIN`]: two timings a few percent apart would otherwise pick one kernel on one
//! start and the other on the next. One matrix fits in the last-level cache where a whole
//! model does not, so the timing sees each kernel's arithmetic more than its reading of
//! memory, which favours candle's larger tiles a little; the margin covers that too.
//!
//! The app remembers a choice in its data folder ([`crate::kernel_memory`]): the timing runs at
//! the first load on a CPU model, not at every start.
//!
//! `SELFRAG_CPU_KERNELS` sets the choice instead: `measure` (the default), `packed` or
//! `candle`. With `candle` and candle's own `MISTRALRS_FORCE_AVX2=1`, a machine with AVX-512
//! runs exactly what an AVX2-only CPU (AMD Zen 3, Intel client CPUs) runs; the CLI's tests do
//! that to keep that path tested.

use std::sync::Arc;
use std::time::Instant;

use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{Device, Module, Result, Tensor};

use crate::kernel_memory::{CpuModel, KernelMemory, RememberedChoice, choice_key};
use crate::packed::PackedMatrix;

/// The setting that overrides the choice.
pub const KERNELS_ENV: &str = "SELFRAG_CPU_KERNELS";

/// Rows of a prompt pass on the packed tiles: the generator's `PREFILL_TOKENS`.
pub(crate) const PACKED_PASS_ROWS: usize = 124;
/// Rows of a prompt pass on candle's kernels: the generator's `CANDLE_PREFILL_TOKENS`.
pub(crate) const CANDLE_PASS_ROWS: usize = 31;
/// Rows of a decode step: K = 5 candidates, one per passage (selfrag-core's default `k`).
pub(crate) const DECODE_ROWS: usize = 5;
/// Prompt passes of a default short-form answer on the packed tiles: five passages of about
/// 250 tokens, with the instruction, are about 1,240 tokens, read 124 at a time.
pub const PACKED_PREFILL_PASSES: u32 = 10;
/// The same tokens on candle's kernels, read 31 at a time.
pub const CANDLE_PREFILL_PASSES: u32 = 40;
/// Decode steps of a default answer: five candidates of about 60 tokens, decoded together.
pub const DECODE_STEPS: u32 = 60;
/// How much faster candle's kernels must be to be chosen over the packed tiles (see the
/// module's documentation).
pub const CANDLE_MARGIN: f64 = 1.10;
/// Rounds of timing, taking turns; the best round of each kernel counts.
const ROUNDS: usize = 3;

/// The kernels that multiply a model's Q4_K and Q6_K matrices on the CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuKernels {
    /// This crate's packed tiles (`packed`), where the CPU has AVX2, FMA and F16C (with
    /// AVX-512 VNNI or AVX-VNNI where it has them: [`crate::packed::PackedSimd`]).
    Packed,
    /// Candle's quantized matmul (its own tiles, AVX-512, AVX-VNNI or AVX2, or NEON).
    Candle,
}

impl std::fmt::Display for CpuKernels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self, crate::packed::packed_simd()) {
            (Self::Packed, Ok(Some(simd))) => write!(f, "packed tiles ({simd})"),
            (Self::Packed, _) => f.write_str("packed tiles"),
            (Self::Candle, _) => f.write_str("candle's kernels"),
        }
    }
}

/// How long one kernel took for a prompt pass and a decode step, on one matrix.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProductTimes {
    pub prefill_pass_seconds: f64,
    pub decode_step_seconds: f64,
    /// The prompt passes of a default answer on this kernel ([`PACKED_PREFILL_PASSES`] or
    /// [`CANDLE_PREFILL_PASSES`]).
    pub prefill_passes: u32,
}

impl ProductTimes {
    /// The time of a default answer's products with this matrix (`prefill_passes` passes and
    /// [`DECODE_STEPS`] steps).
    pub fn answer_seconds(&self) -> f64 {
        f64::from(self.prefill_passes) * self.prefill_pass_seconds
            + f64::from(DECODE_STEPS) * self.decode_step_seconds
    }
}

/// Why a model runs on candle's kernels without a timing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CandleOnly {
    /// The model is on a GPU.
    NotOnCpu,
    /// The CPU lacks AVX2, FMA or F16C, which the packed tiles need at the least.
    CpuLacksAvx2,
    /// The model has no `blk.0.ffn_up` the packed tiles can hold to time: of another type (a
    /// Q8_0 model, for one) or shape.
    NothingToTime,
}

/// Which kernels a model runs on, and why.
#[derive(Debug, Clone, PartialEq)]
pub enum KernelChoice {
    /// Both timed on the model's matrix `matrix`: at this load, or (`remembered`) at an
    /// earlier load on this CPU model, as [`KernelMemory`] kept it.
    Measured {
        kernels: CpuKernels,
        matrix: String,
        packed: ProductTimes,
        candle: ProductTimes,
        remembered: bool,
    },
    /// Set by [`KERNELS_ENV`].
    Set(CpuKernels),
    /// Only candle's can run.
    CandleOnly(CandleOnly),
}

impl KernelChoice {
    pub fn kernels(&self) -> CpuKernels {
        match self {
            Self::Measured { kernels, .. } | Self::Set(kernels) => *kernels,
            Self::CandleOnly(_) => CpuKernels::Candle,
        }
    }
}

impl std::fmt::Display for KernelChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Measured {
                kernels,
                matrix,
                packed,
                candle,
                remembered,
            } => write!(
                f,
                "{kernels}, timed on {matrix}{}: a default answer's products take {:.1} ms on \
                 the packed tiles and {:.1} ms on candle's kernels",
                if *remembered {
                    " at an earlier load on this CPU model"
                } else {
                    ""
                },
                packed.answer_seconds() * 1e3,
                candle.answer_seconds() * 1e3
            ),
            Self::Set(kernels) => write!(f, "{kernels}, set by {KERNELS_ENV}"),
            Self::CandleOnly(CandleOnly::NotOnCpu) => {
                f.write_str("candle's kernels (not on the CPU)")
            }
            Self::CandleOnly(CandleOnly::CpuLacksAvx2) => {
                f.write_str("candle's kernels (this CPU lacks AVX2, FMA or F16C)")
            }
            Self::CandleOnly(CandleOnly::NothingToTime) => {
                f.write_str("candle's kernels (no Q4_K or Q6_K matrix the packed tiles hold)")
            }
        }
    }
}

/// How the kernels are to be chosen: by timing them, or as [`KERNELS_ENV`] says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelPolicy {
    /// Timed at this load.
    Measure,
    /// Timed at the first load on this CPU model, then taken from `memory`.
    Remember(KernelMemory),
    Use(CpuKernels),
}

impl KernelPolicy {
    /// Whether the kernels are to be timed (or a timing recalled) rather than set.
    pub fn measures(&self) -> bool {
        !matches!(self, Self::Use(_))
    }

    /// Where the timing is remembered, if anywhere.
    pub fn memory(&self) -> Option<&KernelMemory> {
        match self {
            Self::Remember(memory) => Some(memory),
            Self::Measure | Self::Use(_) => None,
        }
    }

    /// This policy, with a timing remembered in `memory` where it times the kernels.
    pub fn remembering(self, memory: KernelMemory) -> Self {
        match self {
            Self::Measure | Self::Remember(_) => Self::Remember(memory),
            set @ Self::Use(_) => set,
        }
    }

    /// The policy [`KERNELS_ENV`] sets; `Measure` when it is unset.
    pub fn from_env() -> std::result::Result<Self, String> {
        match std::env::var(KERNELS_ENV) {
            Ok(value) => Self::parse(&value),
            Err(std::env::VarError::NotPresent) => Ok(Self::Measure),
            Err(std::env::VarError::NotUnicode(_)) => Err(format!(
                "{KERNELS_ENV} is not valid text; set it to measure, packed or candle, or unset it"
            )),
        }
    }

    fn parse(value: &str) -> std::result::Result<Self, String> {
        match value.trim().to_ascii_lowercase().as_str() {
            "" | "measure" => Ok(Self::Measure),
            "packed" => Ok(Self::Use(CpuKernels::Packed)),
            "candle" => Ok(Self::Use(CpuKernels::Candle)),
            other => Err(format!(
                "{KERNELS_ENV} is `{other}`; set it to measure, packed or candle, or unset it"
            )),
        }
    }
}

/// The kernels to use given both timings: the packed tiles unless candle's are faster by
/// [`CANDLE_MARGIN`].
pub(crate) fn faster(packed: &ProductTimes, candle: &ProductTimes) -> CpuKernels {
    if candle.answer_seconds() * CANDLE_MARGIN < packed.answer_seconds() {
        CpuKernels::Candle
    } else {
        CpuKernels::Packed
    }
}

/// Chooses the kernels for a model whose `blk.0.ffn_up` is `sample` (`None` when the file has
/// none), on `device`, as `policy` says.
pub(crate) fn choose(
    policy: &KernelPolicy,
    sample: Option<(&str, Arc<QTensor>)>,
    device: &Device,
) -> Result<KernelChoice> {
    if !device.is_cpu() {
        return Ok(KernelChoice::CandleOnly(CandleOnly::NotOnCpu));
    }
    if crate::packed::packed_simd()
        .map_err(candle_core::Error::Msg)?
        .is_none()
    {
        return Ok(KernelChoice::CandleOnly(CandleOnly::CpuLacksAvx2));
    }
    if let KernelPolicy::Use(kernels) = policy {
        return Ok(KernelChoice::Set(*kernels));
    }
    let Some((name, weights)) =
        sample.filter(|(_, w)| matches!(w.dtype(), GgmlDType::Q4K | GgmlDType::Q6K))
    else {
        return Ok(KernelChoice::CandleOnly(CandleOnly::NothingToTime));
    };
    // Where the choice is remembered: the file, and this CPU's key in it.
    let memory = match policy {
        KernelPolicy::Remember(memory) => CpuModel::of_this_machine().map(|cpu| {
            let key = choice_key(
                &cpu,
                rayon::current_num_threads(),
                name,
                weights.dtype(),
                weights.shape().dims(),
            );
            (memory, key)
        }),
        _ => None,
    };
    if let Some(remembered) = memory.as_ref().and_then(|(memory, key)| memory.recall(key)) {
        return Ok(KernelChoice::Measured {
            kernels: remembered.kernels,
            matrix: name.to_owned(),
            packed: remembered.packed,
            candle: remembered.candle,
            remembered: true,
        });
    }
    let Some((packed, candle)) = time_both(&weights)? else {
        return Ok(KernelChoice::CandleOnly(CandleOnly::NothingToTime));
    };
    let kernels = faster(&packed, &candle);
    if let Some((memory, key)) = &memory {
        memory.remember(
            key,
            &RememberedChoice {
                kernels,
                packed,
                candle,
            },
        );
    }
    Ok(KernelChoice::Measured {
        kernels,
        matrix: name.to_owned(),
        packed,
        candle,
        remembered: false,
    })
}

/// `rows × k` activations to time products with: of both signs and a spread of sizes, as a
/// layer's are; the values do not change the time.
pub(crate) fn timing_activations(rows: usize, k: usize) -> Result<Tensor> {
    let values: Vec<f32> = (0..rows * k)
        .map(|i| ((i * 7919 % 1000) as f32 / 500.0 - 1.0) * (1.0 + (i % 5) as f32))
        .collect();
    Tensor::from_vec(values, (rows, k), &Device::Cpu)
}

/// Times a prompt pass and a decode step with `weights` on both kernels, taking turns; `None`
/// when the packed tiles cannot hold this matrix (its shape).
fn time_both(weights: &Arc<QTensor>) -> Result<Option<(ProductTimes, ProductTimes)>> {
    let Some(packed) = PackedMatrix::pack(weights)? else {
        return Ok(None);
    };
    let candle = QMatMul::from_arc(weights.clone())?;
    let k = weights.shape().dims2()?.1;
    let input = |rows: usize| timing_activations(rows, k);
    let passes = [input(PACKED_PASS_ROWS)?, input(CANDLE_PASS_ROWS)?];
    let step = input(DECODE_ROWS)?;
    // Candle packs its tiles on its first product: not part of the time.
    packed.forward(&step)?;
    candle.forward(&step)?;
    // The best of each kernel's rounds, the kernels taking turns.
    let mut best =
        [PACKED_PREFILL_PASSES, CANDLE_PREFILL_PASSES].map(|prefill_passes| ProductTimes {
            prefill_pass_seconds: f64::INFINITY,
            decode_step_seconds: f64::INFINITY,
            prefill_passes,
        });
    for _ in 0..ROUNDS {
        for (kernel, b) in best.iter_mut().enumerate() {
            let seconds = |x: &Tensor| -> Result<f64> {
                let started = Instant::now();
                match kernel {
                    0 => packed.forward(x)?,
                    _ => candle.forward(x)?,
                };
                Ok(started.elapsed().as_secs_f64())
            };
            b.prefill_pass_seconds = b.prefill_pass_seconds.min(seconds(&passes[kernel])?);
            b.decode_step_seconds = b.decode_step_seconds.min(seconds(&step)?);
        }
    }
    let [packed, candle] = best;
    Ok(Some((packed, candle)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kernel's times with the packed tiles' count of passes.
    fn times(pass_ms: f64, step_ms: f64) -> ProductTimes {
        ProductTimes {
            prefill_pass_seconds: pass_ms / 1e3,
            decode_step_seconds: step_ms / 1e3,
            prefill_passes: PACKED_PREFILL_PASSES,
        }
    }

    #[test]
    fn the_faster_kernel_for_a_whole_answer_wins_and_candle_only_by_the_margin() {
        // An answer is 10 passes and 60 steps: 40 ms a pass and 2 ms a step weigh 400 and
        // 120 ms.
        let packed = times(40.0, 2.0);
        assert!((packed.answer_seconds() - 0.52).abs() < 1e-12);
        // Candle faster at both, by 21% over an answer (430 ms).
        assert_eq!(faster(&packed, &times(28.0, 2.5)), CpuKernels::Candle);
        // Faster by 5% only (494 ms): the packed tiles stay, their copy of the weights is the
        // smaller.
        assert_eq!(faster(&packed, &times(38.0, 1.9)), CpuKernels::Packed);
        // Faster at steps, slower over an answer (540 ms).
        assert_eq!(faster(&packed, &times(48.0, 1.0)), CpuKernels::Packed);
        assert_eq!(faster(&times(28.0, 2.5), &packed), CpuKernels::Packed);
        // Candle's passes are a quarter the size, four times as many: 12 ms a pass is 480 ms.
        let candle = ProductTimes {
            prefill_passes: CANDLE_PREFILL_PASSES,
            ..times(12.0, 1.0)
        };
        assert!((candle.answer_seconds() - 0.54).abs() < 1e-12);
        assert_eq!(faster(&packed, &candle), CpuKernels::Packed);
    }

    #[test]
    fn the_setting_reads_three_words_and_names_itself_otherwise() {
        assert_eq!(KernelPolicy::parse("measure"), Ok(KernelPolicy::Measure));
        assert_eq!(KernelPolicy::parse(""), Ok(KernelPolicy::Measure));
        assert_eq!(
            KernelPolicy::parse(" Packed "),
            Ok(KernelPolicy::Use(CpuKernels::Packed))
        );
        assert_eq!(
            KernelPolicy::parse("candle"),
            Ok(KernelPolicy::Use(CpuKernels::Candle))
        );
        let error = KernelPolicy::parse("avx2").unwrap_err();
        assert!(
            error.contains(KERNELS_ENV) && error.contains("`avx2`"),
            "{error}"
        );
    }

    #[test]
    fn the_rows_timed_are_the_generators_pass_and_the_default_k() {
        assert_eq!(PACKED_PASS_ROWS, crate::generator::PREFILL_TOKENS);
        assert_eq!(CANDLE_PASS_ROWS, crate::generator::CANDLE_PREFILL_TOKENS);
        assert_eq!(
            PACKED_PREFILL_PASSES as usize * PACKED_PASS_ROWS,
            CANDLE_PREFILL_PASSES as usize * CANDLE_PASS_ROWS
        );
        const { assert!(CANDLE_PASS_ROWS < 32, "candle's AMX path starts at 32 rows") };
        assert_eq!(DECODE_ROWS, selfrag_core::Settings::default().k);
    }

    /// On a CPU that can run both, a Q4_K matrix is timed on both and the choice is one of
    /// them, with finite times; a Q8_0 matrix has nothing to time.
    #[test]
    fn both_kernels_are_timed_on_a_q4_k_matrix() {
        let device = Device::Cpu;
        let (n, k) = (256, 1024);
        let values: Vec<f32> = (0..n * k)
            .map(|i| ((i % 97) as f32 - 48.0) / 50.0)
            .collect();
        let w = Tensor::from_vec(values, (n, k), &device).unwrap();
        let q4k = Arc::new(QTensor::quantize(&w, GgmlDType::Q4K).unwrap());
        let q8 = Arc::new(QTensor::quantize(&w, GgmlDType::Q8_0).unwrap());
        let choice = choose(&KernelPolicy::Measure, Some(("m", q4k.clone())), &device).unwrap();
        if !crate::packed::cpu_supported() {
            selfrag_testkit::skip(
                selfrag_testkit::Lack::CpuFeatures(&["avx2", "fma", "f16c"]),
                "this CPU lacks AVX2, FMA or F16C, so only candle's kernels run",
            );
            assert_eq!(choice, KernelChoice::CandleOnly(CandleOnly::CpuLacksAvx2));
            return;
        }
        let KernelChoice::Measured {
            kernels,
            packed,
            candle,
            ..
        } = choice
        else {
            panic!("not measured: {choice:?}");
        };
        for t in [packed, candle] {
            assert!(t.prefill_pass_seconds > 0.0 && t.prefill_pass_seconds.is_finite());
            assert!(t.decode_step_seconds > 0.0 && t.decode_step_seconds.is_finite());
        }
        assert_eq!(kernels, faster(&packed, &candle));
        assert_eq!(
            choose(&KernelPolicy::Measure, Some(("m", q8)), &device).unwrap(),
            KernelChoice::CandleOnly(CandleOnly::NothingToTime)
        );
        assert_eq!(
            choose(
                &KernelPolicy::Use(CpuKernels::Candle),
                Some(("m", q4k.clone())),
                &device
            )
            .unwrap(),
            KernelChoice::Set(CpuKernels::Candle)
        );
    }

    /// Remembering, the first load times the kernels and keeps the choice; the next takes it
    /// from the file without timing (what the file says wins, even a choice no timing here
    /// would make), and a matrix of another shape is timed on its own.
    #[test]
    fn a_choice_timed_once_is_taken_from_the_data_folder_after() {
        if !crate::packed::cpu_supported() {
            selfrag_testkit::skip(
                selfrag_testkit::Lack::CpuFeatures(&["avx2", "fma", "f16c"]),
                "this CPU lacks AVX2, FMA or F16C: nothing is timed or remembered",
            );
            return;
        }
        let device = Device::Cpu;
        let matrix = |n: usize, k: usize| {
            let values: Vec<f32> = (0..n * k)
                .map(|i| ((i % 89) as f32 - 44.0) / 40.0)
                .collect();
            let w = Tensor::from_vec(values, (n, k), &device).unwrap();
            Arc::new(QTensor::quantize(&w, GgmlDType::Q4K).unwrap())
        };
        let (first, other) = (matrix(256, 1024), matrix(512, 1024));
        let dir = tempfile::tempdir().unwrap();
        let memory = crate::kernel_memory::KernelMemory::in_data_folder(dir.path());
        let policy = KernelPolicy::Measure.remembering(memory.clone());
        let KernelChoice::Measured {
            kernels,
            packed,
            candle,
            remembered: false,
            ..
        } = choose(&policy, Some(("m", first.clone())), &device).unwrap()
        else {
            panic!("the first load did not time the kernels");
        };
        assert_eq!(
            choose(&policy, Some(("m", first.clone())), &device).unwrap(),
            KernelChoice::Measured {
                kernels,
                matrix: "m".into(),
                packed,
                candle,
                remembered: true,
            },
            "the second load recalls the first's timing"
        );
        // A file that says candle's kernels, with times no product here takes: recalled as
        // it stands, so nothing was timed.
        let text = std::fs::read_to_string(memory.file()).unwrap();
        let planted = text.replace("\"packed\",", "\"candle\",").replacen(
            &format!("{}", packed.prefill_pass_seconds),
            "123.5",
            1,
        );
        assert_ne!(planted, text);
        std::fs::write(memory.file(), planted).unwrap();
        let KernelChoice::Measured {
            kernels: CpuKernels::Candle,
            remembered: true,
            ..
        } = choose(&policy, Some(("m", first)), &device).unwrap()
        else {
            panic!("the planted choice was not taken");
        };
        let KernelChoice::Measured {
            remembered: false, ..
        } = choose(&policy, Some(("m", other)), &device).unwrap()
        else {
            panic!("a matrix of another shape was not timed");
        };
        assert_eq!(
            KernelPolicy::Use(CpuKernels::Packed).remembering(memory),
            KernelPolicy::Use(CpuKernels::Packed),
            "a set choice stays set"
        );
    }
}
