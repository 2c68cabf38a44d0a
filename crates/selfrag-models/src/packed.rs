//! Q4_K and Q6_K weight matrices repacked for x86-64 CPUs, in tiles about as compact as the
//! file's own blocks, and their products with f32 activations: the kernels here for AVX-512
//! VNNI, and for CPUs without AVX-512 (AVX2, with or without AVX-VNNI) in [`avx2`], on the
//! same tiles; which one runs is [`PackedSimd`], the CPU's best unless `SELFRAG_CPU_SIMD` says
//! a lower one.
//!
//! Why not candle's tiles: candle 0.11 repacks these types for the same instructions, but
//! unpacks every scale to an f32 and every Q6_K value to a whole byte, so its tiles are 6 bits
//! per weight for Q4_K (the file has 4.5) and 10 for Q6_K (the file has 6.56). A decode step
//! reads every weight once, and on the machines we measure that reading is the work: profiled on
//! the 7B-shaped benchmark model, candle's two tile kernels were 80% of decoding and streamed
//! about 25 GB/s of a measured 32 GB/s. Here a tile keeps the 6-bit scales and 4-bit nibbles
//! as bytes and the block scales as f16: 4.63 bits per weight for Q4_K and 6.63 for Q6_K, with
//! the same integer arithmetic as candle and ggml (activations quantized to Q8_K, `vpdpbusd`
//! products, the Q4_K minimum and the Q6_K offset of 32 corrected through the activations'
//! 16-value sums, or for the Q4_K minimum in the prompt kernel their 32-value sums).
//!
//! Layout: the matrix (`n` output rows of `k` inputs, row-major, as the GGUF stores it) is cut
//! into strips of 16 output rows; a strip is `k / 256` tiles, one per superblock, stored one
//! after the other, so a strip is read front to back. Inside a tile the 16 rows are the 16
//! lanes of a vector, so one scale vector serves all rows at once.
//!
//! Work is split by strips over candle's thread pool (the one its own kernels use), so decoding
//! does not wake a second set of threads; the threads claim runs of strips that shrink as the
//! work runs out, so that they finish together ([`for_each_chunk`]).
//!
//! Two kernels multiply the same tiles. A decode step of one or a few rows (up to 8: the K
//! candidates of an answer) waits on the reading of the weights: the decode kernel unpacks each
//! tile in registers and multiplies it by every row at once. From [`PROMPT_MIN_ROWS`] rows (a
//! prompt pass) the time is arithmetic, and the prompt kernel runs: it unpacks the tiles of 4
//! strips (64 output rows) for one superblock into a scratch of bytes once, then multiplies
//! every row by them, 3 rows × 4 strips at a time, so that unpacking costs nothing per row and
//! each `vpdpbusd` needs no other instruction but its share of the sub-block scales (one conversion and one
//! multiply-add per 32 inputs for Q4_K, per 16 for Q6_K). Measured for Q4_K on the Xeon (one
//! thread, 128 rows times an 11008×4096 matrix): 205 GMAC/s in this crate; standalone copies
//! of the two kernels: 241 against 165. The core's `vpdpbusd` peak is 388.
//!
//! This is one of the workspace's five `unsafe` modules (`mapped`, `packed` with its `avx2`,
//! `int8`, `strided`, `cache_lines`); here the SIMD loads and the calls into functions compiled
//! for AVX-512 or AVX2, made only after the CPU was checked for them. Each block says why it is
//! sound.
#![allow(unsafe_code)]
// Off x86-64 nothing is ever packed (`cpu_supported` is false), so the tiles go unread there.
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]

use std::mem::MaybeUninit;
use std::ops::Range;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Result, Tensor};

/// Output rows per tile: the 16 f32 lanes of one AVX-512 vector.
const TILE_ROWS: usize = 16;
/// Values per Q4_K / Q6_K / Q8_K superblock.
const QK_K: usize = 256;
/// Activation rows the decode kernel multiplies against one tile at once: every row of a decode
/// step of up to 8 candidates, so that each tile is read and unpacked once per step. Past 4 rows
/// the accumulators no longer all fit in registers, and the decode kernel is still faster than
/// the prompt kernel (measured on an AMD EPYC of family 26 with 512-bit AVX-512, 8-block
/// 7B-shaped model, two cores, two runs each: K = 5 decodes at 80–88 total tokens/s against 68
/// on the prompt kernel and 76–77 as 4 rows then 1; K = 6 at 88–93 against 78–79; K = 8 at
/// 108–110 against 94–95).
const MAX_ACTIVATION_ROWS: usize = 8;

/// How many tiles ahead of the one being multiplied the decode kernel asks into the cache,
/// until a load calibrates it for this CPU ([`crate::decode_prefetch`]). Tiles are read front
/// to back, strip after strip; with one activation row a tile is multiplied in about the time
/// memory takes to deliver it, so without asking early each tile waits (decode at 0.64×
/// without it, on the AMD EPYC of family 26).
///
/// Two tiles, 4.7 KB of Q4_K. On that EPYC (two threads, alternating runs, 5 rounds each),
/// decode ran 1.087× as fast with 2 as with 8 (every round 1.06–1.09×), 1.081× with 1, 1.026×
/// with 3; 16 was 0.94×; K = 5 decode steps 1.114×. On the Xeon of the first rounds 8 had
/// measured best, within its runs' ±3% (2: 3% slower, single runs): why it is calibrated.
pub(crate) const DEFAULT_PREFETCH_TILES: usize = 2;

/// The decode kernel's prefetch distance in tiles, for the whole process: it is the CPU's
/// (its memory's latency against its cores' speed), the same for every model loaded. Any value
/// computes the same products; only their speed differs.
static PREFETCH_TILES: AtomicUsize = AtomicUsize::new(DEFAULT_PREFETCH_TILES);

/// The decode kernel's prefetch distance now.
pub(crate) fn prefetch_tiles() -> usize {
    PREFETCH_TILES.load(Ordering::Relaxed)
}

/// Sets the decode kernel's prefetch distance for every later product.
pub(crate) fn set_prefetch_tiles(tiles: usize) {
    PREFETCH_TILES.store(tiles, Ordering::Relaxed);
}

/// Activation rows from which a product runs on the prompt kernel (a prompt pass).
pub(crate) const PROMPT_MIN_ROWS: usize = MAX_ACTIVATION_ROWS + 1;
/// Strips the prompt kernel unpacks and multiplies together: 64 output rows.
const QUAD_STRIPS: usize = 4;
/// Output rows of a quad of strips (columns of the product).
const QUAD_WIDTH: usize = QUAD_STRIPS * TILE_ROWS;
/// Activation rows the prompt kernel multiplies at once: 3 rows × 4 strips of accumulators, and
/// as many of their scaled sums, fill the registers.
const PROMPT_GROUP_ROWS: usize = 3;
/// Activation rows the prompt kernel takes through a whole quad at most before the next rows;
/// rows are split into chunks of nearly equal size, and each chunk unpacks every superblock
/// again. A whole prompt pass (124 rows) is one chunk: its outputs (256 bytes a row) and
/// activations (308 bytes a row per superblock) then outgrow a 48 KiB L1 cache into L2, which
/// costs less than unpacking more than once (measured on an AMD EPYC of family 26, two cores,
/// 124-row passes of a 128-token prompt: 248–259 tokens/s in one chunk against 230–240 in
/// chunks of at most 48).
const PROMPT_CHUNK_ROWS: usize = 128;

/// Bytes of a Q4_K block in the file: `d`, `dmin` (f16), 12 bytes of 6-bit scales and minimums,
/// 128 bytes of nibbles.
const Q4K_BLOCK_BYTES: usize = 144;
/// Bytes of a Q6_K block in the file: 128 bytes of low nibbles, 64 of high bit pairs, 16 signed
/// 8-bit scales, `d` (f16).
const Q6K_BLOCK_BYTES: usize = 210;

/// One Q4_K superblock (256 inputs) of 16 output rows.
#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct TileQ4K {
    /// `[8-value group (32)][row (16)][4 bytes]`: byte `j` of group `g` holds value `8g + j` in
    /// its low nibble and `8g + j + 4` in its high one.
    qs: [u8; QK_K / 2 * TILE_ROWS],
    /// The 6-bit scale of each 32-value sub-block (8) and row.
    scales: [[u8; TILE_ROWS]; 8],
    /// The 6-bit minimum of each sub-block and row.
    mins: [[u8; TILE_ROWS]; 8],
    /// Each row's block scale and minimum scale, f16 bits.
    d: [u16; TILE_ROWS],
    dmin: [u16; TILE_ROWS],
}

impl TileQ4K {
    const ZERO: Self = Self {
        qs: [0; QK_K / 2 * TILE_ROWS],
        scales: [[0; TILE_ROWS]; 8],
        mins: [[0; TILE_ROWS]; 8],
        d: [0; TILE_ROWS],
        dmin: [0; TILE_ROWS],
    };
}

/// One Q6_K superblock of 16 output rows. Values are `0..64`, meaning `value - 32`.
#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct TileQ6K {
    /// Low 4 bits, laid out as [`TileQ4K::qs`].
    ql: [u8; QK_K / 2 * TILE_ROWS],
    /// `[16-value sub-block (16)][row (16)][4 bytes]`: the high 2 bits of the four values in the
    /// matching `ql` byte of the sub-block's two groups: bits 0–1 and 2–3 for the low and high
    /// nibble of its first group, bits 4–5 and 6–7 for its second.
    qh: [u8; QK_K / 4 * TILE_ROWS],
    /// The signed 8-bit scale of each 16-value sub-block (16) and row, as its byte.
    scales: [[u8; TILE_ROWS]; 16],
    /// Each row's block scale, f16 bits.
    d: [u16; TILE_ROWS],
}

impl TileQ6K {
    const ZERO: Self = Self {
        ql: [0; QK_K / 2 * TILE_ROWS],
        qh: [0; QK_K / 4 * TILE_ROWS],
        scales: [[0; TILE_ROWS]; 16],
        d: [0; TILE_ROWS],
    };
}

/// A block of 256 activations quantized as ggml's Q8_K: `value ≈ d · qs`, with the sums of each
/// 16 values for the minimum/offset corrections.
#[derive(Clone, Copy)]
struct BlockQ8K {
    d: f32,
    qs: [i8; QK_K],
    bsums: [i16; QK_K / 16],
    /// The sums of each 32 values (a Q4_K sub-block's), for the prompt kernel's minimums.
    sums32: [i16; QK_K / 32],
}

impl BlockQ8K {
    const ZERO: Self = Self {
        d: 0.0,
        qs: [0; QK_K],
        bsums: [0; QK_K / 16],
        sums32: [0; QK_K / 32],
    };

    /// Quantizes 256 values exactly as candle's and ggml's `quantize_row_q8_K`: the value of
    /// largest magnitude maps to -127, the others are rounded to nearest.
    ///
    /// Written so that the compiler vectorizes it (a prompt quantizes every matrix's input;
    /// [`quantize_row`] compiles it for AVX-512 where the CPU has it): wrapping integer
    /// arithmetic where no value can overflow (the values are clamped to the bytes' range
    /// before they are rounded), and the value of largest magnitude read off the largest and
    /// the smallest value. Where both signs have it (`-a` and `a`), the first of the two
    /// counts, as ggml's loop keeps the first; NaN is never the largest, in either.
    #[inline(always)]
    fn quantize(xs: &[f32], out: &mut Self) {
        // From 0, as ggml's: a block of zeros (or of NaN) has no largest magnitude.
        let (highest, lowest) = crate::int8::extremes(xs);
        let amax = highest.max(-lowest);
        if amax <= 0.0 {
            *out = Self::ZERO;
            return;
        }
        let max = match (highest == amax, -lowest == amax) {
            (true, false) => highest,
            (false, _) => lowest,
            // `a` and `-a`: whichever comes first (a rare scan; the folds above vectorize).
            (true, true) => xs
                .iter()
                .copied()
                .find(|x| x.abs() == amax)
                .unwrap_or(highest),
        };
        let iscale = -127f32 / max;
        for (q, &x) in out.qs.iter_mut().zip(xs) {
            // `f32::round` then the clamp, vectorized; an infinite product (the largest
            // magnitude so small that `iscale` overflows) stays at the bound.
            *q = crate::int8::round_clamped::<-128, 127>(iscale * x);
        }
        for (sum, group) in out.bsums.iter_mut().zip(out.qs.chunks_exact(16)) {
            // At most 16 · 128: fits.
            #[allow(clippy::cast_possible_truncation)]
            let s = group
                .iter()
                .fold(0i32, |sum, &q| sum.wrapping_add(i32::from(q))) as i16;
            *sum = s;
        }
        for (sum, halves) in out.sums32.iter_mut().zip(out.bsums.chunks_exact(2)) {
            // At most 32 · 128: fits.
            *sum = halves[0].wrapping_add(halves[1]);
        }
        out.d = 1.0 / iscale;
    }
}

enum Tiles {
    Q4K(Vec<TileQ4K>),
    Q6K(Vec<TileQ6K>),
}

/// A Q4_K or Q6_K matrix `[n, k]` in tiles, multiplied as `x · Wᵀ`.
pub(crate) struct PackedMatrix {
    tiles: Tiles,
    n: usize,
    k: usize,
    /// The kernels that multiply it.
    simd: PackedSimd,
}

impl std::fmt::Debug for PackedMatrix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let dtype = match self.tiles {
            Tiles::Q4K(_) => "Q4K",
            Tiles::Q6K(_) => "Q6K",
        };
        f.debug_struct("PackedMatrix")
            .field("dtype", &dtype)
            .field("n", &self.n)
            .field("k", &self.k)
            .field("simd", &self.simd)
            .finish()
    }
}

/// The instruction sets the packed tiles are multiplied with, best first. The tiles are the
/// same bytes for all three; only the kernels differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PackedSimd {
    /// AVX-512 F, BW and VNNI with F16C: 16 output rows a vector, `vpdpbusd` on 512 bits
    /// (Intel Xeons from Cascade Lake, AMD Zen 4 and 5).
    Avx512Vnni,
    /// AVX2, FMA and F16C with AVX-VNNI's 256-bit `vpdpbusd` (Intel client CPUs from Alder
    /// Lake, without AVX-512).
    AvxVnni,
    /// AVX2, FMA and F16C: the byte products as `vpmaddubsw` and `vpmaddwd` (AMD Zen 2 and 3,
    /// Intel client CPUs before Alder Lake).
    Avx2,
}

/// The setting that makes the packed tiles use a lower instruction set than the CPU's best
/// (to measure or test what such a CPU runs): `avx512-vnni`, `avx-vnni` or `avx2`.
pub const SIMD_ENV: &str = "SELFRAG_CPU_SIMD";

impl PackedSimd {
    /// Best first.
    pub const ALL: [Self; 3] = [Self::Avx512Vnni, Self::AvxVnni, Self::Avx2];

    /// The name [`SIMD_ENV`] takes.
    pub fn setting(self) -> &'static str {
        match self {
            Self::Avx512Vnni => "avx512-vnni",
            Self::AvxVnni => "avx-vnni",
            Self::Avx2 => "avx2",
        }
    }

    /// Whether this CPU has every instruction this set's kernels use.
    pub fn runs_here(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            let avx2 = has!("avx2") && has!("fma") && has!("f16c");
            match self {
                Self::Avx512Vnni => {
                    has!("avx512f") && has!("avx512bw") && has!("avx512vnni") && has!("f16c")
                }
                Self::AvxVnni => avx2 && has!("avxvnni"),
                Self::Avx2 => avx2,
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }

    /// The best set this CPU runs, if any.
    pub fn best_here() -> Option<Self> {
        Self::ALL.into_iter().find(|simd| simd.runs_here())
    }

    /// The set [`SIMD_ENV`] asks for (`value`), or this CPU's best where it is unset; an error
    /// that names the setting for a value it does not take or a set this CPU lacks.
    fn from_setting(value: Option<&str>) -> std::result::Result<Option<Self>, String> {
        let Some(value) = value.map(|v| v.trim().to_ascii_lowercase()) else {
            return Ok(Self::best_here());
        };
        if value.is_empty() {
            return Ok(Self::best_here());
        }
        let names = Self::ALL.map(Self::setting).join(", ");
        let Some(simd) = Self::ALL.into_iter().find(|s| s.setting() == value) else {
            return Err(format!(
                "{SIMD_ENV} is `{value}`; set it to one of {names}, or unset it"
            ));
        };
        if !simd.runs_here() {
            let here: Vec<&str> = Self::ALL
                .into_iter()
                .filter(|s| s.runs_here())
                .map(Self::setting)
                .collect();
            return Err(format!(
                "{SIMD_ENV} asks for {simd}, which this CPU lacks; it runs {}; set one of those, \
                 or unset it",
                if here.is_empty() {
                    "none of them".to_owned()
                } else {
                    here.join(", ")
                }
            ));
        }
        Ok(Some(simd))
    }
}

impl std::fmt::Display for PackedSimd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Avx512Vnni => "AVX-512 VNNI",
            Self::AvxVnni => "AVX-VNNI",
            Self::Avx2 => "AVX2",
        })
    }
}

/// The instruction set this process multiplies the packed tiles with: [`SIMD_ENV`]'s, else
/// the CPU's best; `Ok(None)` where the CPU has none of them (the matrices then go through
/// candle's kernels). Read once.
pub fn packed_simd() -> std::result::Result<Option<PackedSimd>, String> {
    static IN_FORCE: std::sync::OnceLock<std::result::Result<Option<PackedSimd>, String>> =
        std::sync::OnceLock::new();
    IN_FORCE
        .get_or_init(|| match std::env::var(SIMD_ENV) {
            Ok(value) => PackedSimd::from_setting(Some(&value)),
            Err(std::env::VarError::NotPresent) => PackedSimd::from_setting(None),
            Err(std::env::VarError::NotUnicode(_)) => Err(format!(
                "{SIMD_ENV} is not valid text; set it to one of avx512-vnni, avx-vnni, avx2, or \
                 unset it"
            )),
        })
        .clone()
}

/// Whether the packed tiles run in this process (some [`PackedSimd`] is in force); without
/// them every matrix goes through candle's kernels.
pub fn cpu_supported() -> bool {
    matches!(packed_simd(), Ok(Some(_)))
}

fn f16_bits(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([bytes[at], bytes[at + 1]])
}

/// ggml's unpacking of the 6-bit scale and minimum of Q4_K sub-block `j`.
fn q4k_scale_min(j: usize, scales: &[u8]) -> (u8, u8) {
    if j < 4 {
        (scales[j] & 63, scales[j + 4] & 63)
    } else {
        (
            (scales[j + 4] & 0x0F) | ((scales[j - 4] >> 6) << 4),
            (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4),
        )
    }
}

impl PackedMatrix {
    /// Packs `weights` (`[n, k]`) when this CPU, its type and its shape allow it, for the
    /// process's instruction set ([`packed_simd`]); `None` means "multiply it with candle".
    pub(crate) fn pack(weights: &QTensor) -> Result<Option<Self>> {
        match packed_simd().map_err(candle_core::Error::Msg)? {
            Some(simd) => Self::pack_for(weights, simd),
            None => Ok(None),
        }
    }

    /// [`pack`](Self::pack) for the kernels of `simd`; `None` where this CPU lacks them.
    pub(crate) fn pack_for(weights: &QTensor, simd: PackedSimd) -> Result<Option<Self>> {
        let Ok((n, k)) = weights.shape().dims2() else {
            return Ok(None);
        };
        let dtype = weights.dtype();
        if !matches!(dtype, GgmlDType::Q4K | GgmlDType::Q6K)
            || n == 0
            || k == 0
            || !n.is_multiple_of(TILE_ROWS)
            || !k.is_multiple_of(QK_K)
            || !simd.runs_here()
        {
            return Ok(None);
        }
        let data = weights.data()?;
        let block_bytes = if dtype == GgmlDType::Q4K {
            Q4K_BLOCK_BYTES
        } else {
            Q6K_BLOCK_BYTES
        };
        let blocks_per_row = k / QK_K;
        if data.len() != n * blocks_per_row * block_bytes {
            candle_core::bail!(
                "a {dtype:?} matrix of {n}×{k} has {} bytes, expected {}",
                data.len(),
                n * blocks_per_row * block_bytes
            );
        }
        let block = |row: usize, b: usize| {
            let at = (row * blocks_per_row + b) * block_bytes;
            &data[at..at + block_bytes]
        };
        let tiles = if dtype == GgmlDType::Q4K {
            Tiles::Q4K(pack_tiles(n, blocks_per_row, |t, b| {
                pack_q4k_tile(|r| block(t * TILE_ROWS + r, b))
            })?)
        } else {
            Tiles::Q6K(pack_tiles(n, blocks_per_row, |t, b| {
                pack_q6k_tile(|r| block(t * TILE_ROWS + r, b))
            })?)
        };
        Ok(Some(Self { tiles, n, k, simd }))
    }

    /// The bytes of its tiles: what a decode step reads of this matrix.
    pub(crate) fn bytes(&self) -> usize {
        match &self.tiles {
            Tiles::Q4K(tiles) => std::mem::size_of_val(tiles.as_slice()),
            Tiles::Q6K(tiles) => std::mem::size_of_val(tiles.as_slice()),
        }
    }

    /// The inputs it takes: `x`'s last dimension.
    pub(crate) fn k(&self) -> usize {
        self.k
    }

    /// `x · Wᵀ` for `x` of shape `[..., k]`; the result has shape `[..., n]`.
    pub(crate) fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let [y] = Self::forward_all([self], x)?;
        Ok(y)
    }

    /// `x · Wᵀ` for each matrix `W` of `matrices`, which all take the `k` values of `x`'s last
    /// dimension: `x` is quantized once for all of them, and their products run as one piece
    /// of work on the thread pool (the query, key and value projections of a block, or its
    /// gate and up projections).
    pub(crate) fn forward_all<const N: usize>(
        matrices: [&Self; N],
        x: &Tensor,
    ) -> Result<[Tensor; N]> {
        let (batch, products) = Self::products(&matrices, x)?;
        let mut out = Vec::with_capacity(N);
        for (w, product) in matrices.iter().zip(products) {
            let dims: Vec<usize> = batch.iter().copied().chain([w.n]).collect();
            out.push(Tensor::from_vec(product, dims, &candle_core::Device::Cpu)?);
        }
        out.try_into()
            .map_err(|_| candle_core::Error::Msg("one product per matrix".into()))
    }

    /// The products of [`forward_all`](Self::forward_all) as rows of values, with the
    /// dimensions of `x` before its last.
    fn products(matrices: &[&Self], x: &Tensor) -> Result<(Vec<usize>, Vec<Vec<f32>>)> {
        let dims = x.dims();
        let Some((&k, batch)) = dims.split_last() else {
            candle_core::bail!("a matrix product needs at least one dimension");
        };
        if let Some(w) = matrices.iter().find(|w| w.k != k) {
            candle_core::bail!("an input of {k} values given to a {}×{} matrix", w.n, w.k);
        }
        let m: usize = batch.iter().product();
        let x = x
            .to_dtype(candle_core::DType::F32)?
            .flatten_all()?
            .to_vec1::<f32>()?;
        let simd = matrices.first().map(|w| w.simd);
        let activations = quantize_rows(&x, m, k, simd);
        Ok((batch.to_vec(), matmul_all(matrices, &activations, m)))
    }

    /// `silu(x · Gᵀ) ⊙ (x · Uᵀ)` with this matrix as `G`: a feed-forward network's gated input
    /// to its down projection, for `x` of shape `[..., k]`. The two products run as in
    /// [`forward_all`](Self::forward_all), then the gate is applied in their output, row by
    /// row on the thread pool: candle's `silu` is one thread calling libm's `expf` per value
    /// (1.1% of an answer's samples, the other core waiting), and its product with `up`
    /// another pass over new memory.
    pub(crate) fn gated_forward(&self, up: &Self, x: &Tensor) -> Result<Tensor> {
        if self.n != up.n {
            candle_core::bail!(
                "a gate of {} outputs and an up projection of {}",
                self.n,
                up.n
            );
        }
        let (batch, products) = Self::products(&[self, up], x)?;
        let [mut gated, up_values]: [Vec<f32>; 2] = products
            .try_into()
            .map_err(|_| candle_core::Error::Msg("one product per matrix".into()))?;
        let n = self.n;
        for_each_chunk(&mut gated, n, |row, gates| {
            for (g, &u) in gates.iter_mut().zip(&up_values[row * n..]) {
                *g = *g / (1.0 + crate::bert::exp(-*g)) * u;
            }
        });
        let dims: Vec<usize> = batch.into_iter().chain([n]).collect();
        Tensor::from_vec(gated, dims, &candle_core::Device::Cpu)
    }

    /// Output columns `64·quad .. 64·quad + 64` of every activation row written into `rows`
    /// (one slice per row, from `matmul_all`), on the prompt kernel: every value of every row
    /// is written, whatever `rows` held (nothing is read before it is written).
    fn quad_product(
        &self,
        quad: usize,
        activations: &[BlockQ8K],
        rows: &mut [&mut [MaybeUninit<f32>; QUAD_WIDTH]],
    ) {
        let blocks_per_row = self.k / QK_K;
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a `PackedMatrix` exists only where its `simd.runs_here()` was true (see
        // `pack_for`), i.e. this CPU has every feature the function called is compiled for; the
        // slices it indexes are sized by `matmul_all` from the same `n`, `k` and `m`.
        unsafe {
            match self.simd {
                PackedSimd::Avx512Vnni => {
                    avx512::quad_product(&self.tiles, quad, blocks_per_row, activations, rows);
                }
                PackedSimd::AvxVnni => {
                    avx2::quad_product_vnni(&self.tiles, quad, blocks_per_row, activations, rows);
                }
                PackedSimd::Avx2 => {
                    avx2::quad_product(&self.tiles, quad, blocks_per_row, activations, rows);
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (quad, activations, rows, blocks_per_row);
            unreachable!("`pack` builds no PackedMatrix off x86-64");
        }
    }

    /// Output columns `16·strip .. 16·strip + 16` of all `m` rows into `out` (`[m][16]`).
    fn strip_product(&self, strip: usize, activations: &[BlockQ8K], m: usize, out: &mut [f32]) {
        let blocks_per_row = self.k / QK_K;
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as in `quad_product`.
        unsafe {
            let (tiles, acts) = (&self.tiles, activations);
            match self.simd {
                PackedSimd::Avx512Vnni => {
                    avx512::strip_product(tiles, strip, blocks_per_row, acts, m, out);
                }
                PackedSimd::AvxVnni => {
                    avx2::strip_product_vnni(tiles, strip, blocks_per_row, acts, m, out);
                }
                PackedSimd::Avx2 => avx2::strip_product(tiles, strip, blocks_per_row, acts, m, out),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (strip, activations, m, out, blocks_per_row);
            unreachable!("`pack` builds no PackedMatrix off x86-64");
        }
    }
}

/// The `m` rows of `k` values in `x` (row-major) as Q8_K blocks, row after row, in the
/// instructions of `simd` where given.
fn quantize_rows(x: &[f32], m: usize, k: usize, simd: Option<PackedSimd>) -> Vec<BlockQ8K> {
    let blocks_per_row = k / QK_K;
    let mut activations = vec![BlockQ8K::ZERO; m * blocks_per_row];
    for_each_chunk(&mut activations, blocks_per_row, |row, blocks| {
        quantize_row(&x[row * k..(row + 1) * k], blocks, simd);
    });
    activations
}

/// One row's values `x` as its Q8_K blocks, 16 values an instruction with AVX-512 and 8 with
/// AVX2 (the crate's baseline, SSE2, does 4: the quantization was 4.8% of a prompt's samples),
/// the same bytes every way.
fn quantize_row(x: &[f32], blocks: &mut [BlockQ8K], simd: Option<PackedSimd>) {
    #[cfg(target_arch = "x86_64")]
    match simd.filter(|s| s.runs_here()) {
        // SAFETY: this CPU has the features each function is compiled for (`runs_here`).
        Some(PackedSimd::Avx512Vnni) => return unsafe { avx512::quantize_row(x, blocks) },
        Some(PackedSimd::AvxVnni | PackedSimd::Avx2) => {
            return unsafe { avx2::quantize_row(x, blocks) };
        }
        None => {}
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = simd;
    quantize_blocks(x, blocks);
}

/// [`quantize_row`]'s work, inlined into each caller's instruction set.
#[inline(always)]
fn quantize_blocks(x: &[f32], blocks: &mut [BlockQ8K]) {
    for (values, block) in x.chunks_exact(QK_K).zip(blocks) {
        BlockQ8K::quantize(values, block);
    }
}

/// One row's 64 outputs of a quad, for the prompt kernel to write.
type QuadRow<'a> = &'a mut [MaybeUninit<f32>; QUAD_WIDTH];

/// `x · Wᵀ` for each matrix, `x` being the `m` quantized rows `activations`; returns `m` rows
/// of each matrix's `n` outputs, row-major, in the order of `matrices`. The pieces of work
/// (a quad of 64 outputs on the prompt kernel, a strip of 16 on the decode kernel) of all the
/// matrices go to the thread pool together.
fn matmul_all(matrices: &[&PackedMatrix], activations: &[BlockQ8K], m: usize) -> Vec<Vec<f32>> {
    let zeros = || -> Vec<Vec<f32>> { matrices.iter().map(|w| vec![0f32; m * w.n]).collect() };
    if m == 0 {
        return zeros();
    }
    let whole_quads = matrices.iter().all(|w| w.n.is_multiple_of(QUAD_WIDTH));
    if m >= PROMPT_MIN_ROWS && !whole_quads && matrices.len() > 1 {
        // Each on its own kernel: one matrix without whole quads keeps the others on theirs.
        return matrices
            .iter()
            .flat_map(|&w| matmul_all(&[w], activations, m))
            .collect();
    }
    if m >= PROMPT_MIN_ROWS && whole_quads {
        // Each quad writes its 64 columns of every row in place: a list of those slices per
        // quad, so threads never share a destination. The outputs are not zeroed first: the
        // quads write every value. (Zeroed, they were a memset of 21 MB a block of the 7B
        // shape per 124-row pass, on the calling thread while the pool's others waited: 3% of
        // its samples in a prompt on the Xeon, as the allocator hands back memory it had used.)
        let mut outs: Vec<Vec<f32>> = matrices
            .iter()
            .map(|w| Vec::with_capacity(m * w.n))
            .collect();
        let mut quads: Vec<(&PackedMatrix, usize, Vec<QuadRow<'_>>)> = Vec::new();
        for (&w, out) in matrices.iter().zip(&mut outs) {
            let first = quads.len();
            quads.extend((0..w.n / QUAD_WIDTH).map(|quad| (w, quad, Vec::with_capacity(m))));
            for row in out.spare_capacity_mut()[..m * w.n].chunks_exact_mut(w.n) {
                for ((_, _, rows), columns) in quads[first..].iter_mut().zip(row.as_chunks_mut().0)
                {
                    rows.push(columns);
                }
            }
        }
        for_each_chunk(&mut quads, 1, |_, quads| {
            for (w, quad, rows) in quads {
                w.quad_product(*quad, activations, rows);
            }
        });
        for (w, out) in matrices.iter().zip(&mut outs) {
            // SAFETY: the capacity is `m · n`, and every one of those values was written above:
            // the quads `0 .. n / 64` (`n` is a multiple of 64 here) each wrote its 64 columns
            // of every one of the `m` rows (`quad_product` writes every value it is given, in
            // its first superblock: `pack` packs no matrix of fewer than 256 inputs).
            unsafe { out.set_len(m * w.n) };
        }
        return outs;
    }
    // Each strip writes `[m][16]` of its own: one slice per strip, so threads never share a
    // destination; for one row that is already the output's layout.
    let mut by_strip = zeros();
    let mut strips: Vec<(&PackedMatrix, usize, &mut [f32])> = Vec::new();
    for (&w, values) in matrices.iter().zip(&mut by_strip) {
        strips.extend(
            values
                .chunks_exact_mut(m * TILE_ROWS)
                .enumerate()
                .map(|(strip, out)| (w, strip, out)),
        );
    }
    for_each_chunk(&mut strips, 1, |_, strips| {
        for (w, strip, out) in strips {
            w.strip_product(*strip, activations, m, out);
        }
    });
    if m == 1 {
        return by_strip;
    }
    let mut outs = zeros();
    for ((w, values), out) in matrices.iter().zip(&by_strip).zip(&mut outs) {
        for (strip, values) in values.chunks_exact(m * TILE_ROWS).enumerate() {
            for (row, lane) in values.chunks_exact(TILE_ROWS).enumerate() {
                out[row * w.n + strip * TILE_ROWS..][..TILE_ROWS].copy_from_slice(lane);
            }
        }
    }
    outs
}

/// Tiles of `n / 16` strips of `blocks_per_row` each, strip by strip, the strips packed in
/// parallel on candle's thread pool (a 7B model's matrices are 3.8 GB to repack at load).
///
/// Each tile is written once, by the thread that packs its strip, into memory that was never
/// written before: filled with zeros first, on the calling thread, a 7B model's tiles took
/// that thread through every page's first touch alone (about a third of the load's samples
/// were page faults) before the packing began.
fn pack_tiles<T: Copy + Send>(
    n: usize,
    blocks_per_row: usize,
    tile: impl Fn(usize, usize) -> T + Sync,
) -> Result<Vec<T>> {
    let len = n / TILE_ROWS * blocks_per_row;
    let mut tiles: Vec<T> = Vec::with_capacity(len);
    let written = AtomicUsize::new(0);
    for_each_chunk(
        &mut tiles.spare_capacity_mut()[..len],
        blocks_per_row,
        |strip, chunk| {
            for (b, slot) in chunk.iter_mut().enumerate() {
                slot.write(tile(strip, b));
            }
            written.fetch_add(chunk.len(), Ordering::Relaxed);
        },
    );
    if written.into_inner() != len {
        candle_core::bail!("packing a matrix's tiles stopped before its last strip");
    }
    // SAFETY: every one of the first `len` slots was written above (each chunk counts its
    // slots once it has written them all, and the chunks cover the `len` slots).
    unsafe { tiles.set_len(len) };
    Ok(tiles)
}

/// One Q4_K tile from the 16 file blocks `block(row)`.
fn pack_q4k_tile<'a>(block: impl Fn(usize) -> &'a [u8]) -> TileQ4K {
    let mut tile = TileQ4K::ZERO;
    for r in 0..TILE_ROWS {
        let blk = block(r);
        tile.d[r] = f16_bits(blk, 0);
        tile.dmin[r] = f16_bits(blk, 2);
        let scales = &blk[4..16];
        for sub in 0..8 {
            let (scale, min) = q4k_scale_min(sub, scales);
            tile.scales[sub][r] = scale;
            tile.mins[sub][r] = min;
        }
        // The file's nibbles: byte `j` of 32-byte chunk `c` holds value `64c + j` low and
        // `64c + 32 + j` high. The tile's group `g` (values `8g .. 8g + 8`) holds values
        // `8g + j` low and `8g + j + 4` high in its byte `j < 4`. So the 8 bytes at `8h` of
        // chunk `c` give group `8c + h` from their low nibbles and group `8c + 4 + h` from
        // their high ones, 4 bytes each, computed a word at a time.
        let qs = &blk[16..Q4K_BLOCK_BYTES];
        let mut groups = [0u8; QK_K / 2];
        for (c, chunk) in qs.chunks_exact(32).enumerate() {
            for (h, eight) in chunk.chunks_exact(8).enumerate() {
                let (first, second) = (le_word(&eight[..4]), le_word(&eight[4..]));
                let low = (first & 0x0F0F_0F0F) | ((second & 0x0F0F_0F0F) << 4);
                let high = ((first >> 4) & 0x0F0F_0F0F) | (second & 0xF0F0_F0F0);
                groups[(8 * c + h) * 4..][..4].copy_from_slice(&low.to_le_bytes());
                groups[(8 * c + 4 + h) * 4..][..4].copy_from_slice(&high.to_le_bytes());
            }
        }
        put_row(&mut tile.qs, r, &groups);
    }
    tile
}

/// The 4 bytes of `four` as a little-endian word.
fn le_word(four: &[u8]) -> u32 {
    u32::from_le_bytes([four[0], four[1], four[2], four[3]])
}

/// Writes row `r`'s bytes `row` (4 per group) into a tile's `[group][row (16)][4 bytes]`.
fn put_row(tile: &mut [u8], r: usize, row: &[u8]) {
    for (g, four) in row.chunks_exact(4).enumerate() {
        tile[(g * TILE_ROWS + r) * 4..][..4].copy_from_slice(four);
    }
}

/// One Q6_K tile from the 16 file blocks `block(row)`.
fn pack_q6k_tile<'a>(block: impl Fn(usize) -> &'a [u8]) -> TileQ6K {
    let mut tile = TileQ6K::ZERO;
    for r in 0..TILE_ROWS {
        let blk = block(r);
        let (ql, rest) = blk.split_at(128);
        let (qh, rest) = rest.split_at(64);
        for (sub, &scale) in rest[..16].iter().enumerate() {
            tile.scales[sub][r] = scale;
        }
        tile.d[r] = f16_bits(rest, 16);
        // The file's layout, in two halves of 128 values: `ql` holds the low 4 bits of values
        // `j` and `j + 32` (low and high nibble of byte `j`) and of `j + 64`, `j + 96`
        // (byte `j + 32`); `qh` byte `j` holds their high 2 bits, in that order.
        let mut values = [0u8; QK_K];
        for h in 0..2 {
            let ql = &ql[h * 64..];
            let qh = &qh[h * 32..];
            for j in 0..32 {
                values[h * 128 + j] = (ql[j] & 0x0F) | ((qh[j] & 3) << 4);
                values[h * 128 + j + 32] = (ql[j + 32] & 0x0F) | (((qh[j] >> 2) & 3) << 4);
                values[h * 128 + j + 64] = (ql[j] >> 4) | (((qh[j] >> 4) & 3) << 4);
                values[h * 128 + j + 96] = (ql[j + 32] >> 4) | (((qh[j] >> 6) & 3) << 4);
            }
        }
        let mut low_nibbles = [0u8; QK_K / 2];
        let mut high_bits = [0u8; QK_K / 4];
        for g in 0..QK_K / 8 {
            for j in 0..4 {
                let (low, high) = (values[g * 8 + j], values[g * 8 + j + 4]);
                low_nibbles[g * 4 + j] = (low & 0x0F) | ((high & 0x0F) << 4);
                high_bits[(g / 2) * 4 + j] |= ((low >> 4) | ((high >> 4) << 2)) << (4 * (g % 2));
            }
        }
        put_row(&mut tile.ql, r, &low_nibbles);
        put_row(&mut tile.qh, r, &high_bits);
    }
    tile
}

/// Runs `work(i, chunk)` for every `chunk_len`-long chunk of `data` on candle's thread pool.
/// Each chunk is behind its own lock, taken once by the one thread that claims it.
///
/// Threads claim runs of chunks that shrink as the work runs out ([`claim_run`]), so that they
/// finish together: candle's own split hands out runs of a sixteenth of the work at two threads,
/// and in a decode step the thread that finished first waited for the other's last run (2% of
/// the main thread's samples, in candle's barrier).
pub(crate) fn for_each_chunk<T: Send>(
    data: &mut [T],
    chunk_len: usize,
    work: impl Fn(usize, &mut [T]) + Sync,
) {
    if chunk_len == 0 || data.is_empty() {
        return;
    }
    if data.len() <= chunk_len {
        work(0, data);
        return;
    }
    let chunks: Vec<Mutex<&mut [T]>> = data.chunks_mut(chunk_len).map(Mutex::new).collect();
    let pool = candle_core::utils::barrier_pool();
    let threads = pool.n_workers() + 1;
    let cursor = AtomicUsize::new(0);
    // One item per thread, each claiming runs until none is left. Through `execute_chunked`,
    // which runs the items in place when called from one of the pool's own threads.
    pool.execute_chunked(threads, |items| {
        for _ in items {
            while let Some(run) = claim_run(&cursor, chunks.len(), threads) {
                for i in run {
                    // A poisoned lock means another chunk's work panicked; its own data is
                    // still whole.
                    let mut chunk = chunks[i]
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    work(i, &mut chunk);
                }
            }
        }
    });
}

/// The cache lines (64 bytes, counted from the start of a tile of `bytes` bytes) of share
/// `share` of `shares`: consecutive runs of equal length but the last, which together hold
/// every line once. The decode kernel asks for the tile it will multiply [`prefetch_tiles`]
/// tiles later one share per sub-block (or pair of them) of this one, so that its requests
/// leave while it computes instead of in one burst: 37 lines of a Q4_K tile at once filled
/// the core's miss buffers and held up the multiplications behind them.
fn share_lines(bytes: usize, share: usize, shares: usize) -> Range<usize> {
    let lines = bytes.div_ceil(64);
    let each = lines.div_ceil(shares.max(1));
    (share * each).min(lines)..((share + 1) * each).min(lines)
}

/// The next run of the `items` that `cursor` has not handed out yet, for one of `threads`:
/// half of a thread's fair share of what is left, at least one item (guided self-scheduling).
fn claim_run(cursor: &AtomicUsize, items: usize, threads: usize) -> Option<Range<usize>> {
    let mut start = cursor.load(Ordering::Relaxed);
    loop {
        if start >= items {
            return None;
        }
        let len = ((items - start) / (2 * threads)).max(1);
        match cursor.compare_exchange_weak(start, start + len, Ordering::Relaxed, Ordering::Relaxed)
        {
            Ok(_) => return Some(start..start + len),
            Err(now) => start = now,
        }
    }
}

/// One superblock of a quad of strips, unpacked for the prompt kernel: `SUBS` sub-blocks of
/// `STEPS` × 4 inputs, each with its own scale, and `PAIRS` pairs of sub-blocks for the
/// correction (the Q4_K minimums, the Q6_K offset of 32).
#[repr(C, align(64))]
struct QuadScratch<const SUBS: usize, const STEPS: usize, const PAIRS: usize> {
    /// `[sub-block][step][strip]`: the 16 rows' 4 bytes of inputs
    /// `4·STEPS·sub + 4·step ..+ 4`, one unsigned value per byte.
    weights: [[[[u8; 64]; QUAD_STRIPS]; STEPS]; SUBS],
    /// `[sub-block][strip]`: each row's block scale times its sub-block scale.
    scales: [[[f32; TILE_ROWS]; QUAD_STRIPS]; SUBS],
    /// `[sub-block pair][strip]`: the pair's two correction factors (Q4_K: 6-bit minimums;
    /// Q6_K: the sub-block scales) in the two 16-bit halves of each row's lane, for
    /// `vpdpwssd` with the activations' sums over the same sub-blocks.
    correction_pairs: [[[i32; TILE_ROWS]; QUAD_STRIPS]; PAIRS],
    /// `[strip]`: what the correction is multiplied by (Q4_K: the minimum scale; Q6_K: 32
    /// times the block scale) before it is subtracted.
    correction_scale: [[f32; TILE_ROWS]; QUAD_STRIPS],
}

/// Q4_K: 8 sub-blocks of 32 inputs; minimums paired over the activations' 32-value sums.
type Q4KScratch = QuadScratch<8, 8, 4>;
/// Q6_K: 16 sub-blocks of 16 inputs; scales paired over the activations' 16-value sums.
type Q6KScratch = QuadScratch<16, 4, 8>;

thread_local! {
    /// Each thread's scratches, made once: a prompt pass of the 8-block benchmark model
    /// runs the prompt kernel on some 5,300 quads, and a scratch allocated and zeroed for
    /// each would be a memset of 100 MB a pass. A kernel takes its thread's scratch out for one
    /// quad and puts it back (not through `with`, whose closure would not be compiled for the
    /// kernel's instruction set); one that is not put back, by a panic, is made again.
    static Q4K_SCRATCH: std::cell::Cell<Option<Box<Q4KScratch>>> =
        const { std::cell::Cell::new(None) };
    static Q6K_SCRATCH: std::cell::Cell<Option<Box<Q6KScratch>>> =
        const { std::cell::Cell::new(None) };
}

impl<const SUBS: usize, const STEPS: usize, const PAIRS: usize> QuadScratch<SUBS, STEPS, PAIRS> {
    const ZERO: Self = Self {
        weights: [[[[0; 64]; QUAD_STRIPS]; STEPS]; SUBS],
        scales: [[[0.0; TILE_ROWS]; QUAD_STRIPS]; SUBS],
        correction_pairs: [[[0; TILE_ROWS]; QUAD_STRIPS]; PAIRS],
        correction_scale: [[0.0; TILE_ROWS]; QUAD_STRIPS],
    };

    /// A new scratch, for a thread whose slot is empty.
    fn boxed() -> Box<Self> {
        Box::new(Self::ZERO)
    }
}

/// Which quad, of how many superblocks per row.
#[derive(Clone, Copy)]
struct QuadShape {
    quad: usize,
    blocks_per_row: usize,
}

impl QuadShape {
    /// The index of superblock `b` of the quad's strip `strip` among the matrix's tiles.
    fn tile(self, strip: usize, b: usize) -> usize {
        (self.quad * QUAD_STRIPS + strip) * self.blocks_per_row + b
    }

    /// Asks for the quad's tiles of superblock `b + 1`, read from memory while the rows are
    /// multiplied by superblock `b`: unpacked without it, each superblock waited on memory
    /// (a fifth of the kernel's time in perf's samples). All at once: asked in shares before
    /// each group of rows, as the decode kernel asks, the prompt read no faster (dev builds
    /// taking turns, 248-token prompt, 7 rounds each: median 183 against 189 tokens/s).
    #[inline]
    fn prefetch_next<T>(self, tiles: &[T], b: usize) {
        if b + 1 < self.blocks_per_row {
            for strip in 0..QUAD_STRIPS {
                prefetch_share(tiles.get(self.tile(strip, b + 1)), 0, 1);
            }
        }
    }
}

/// Asks for share `share` of `shares` of `tile`'s cache lines ([`share_lines`];
/// share 0 of 1 is every line) without waiting for them; nothing where there is no tile.
#[inline]
fn prefetch_share<T>(tile: Option<&T>, share: usize, shares: usize) {
    let Some(tile) = tile else {
        return;
    };
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let start: *const i8 = (tile as *const T).cast();
        for line in share_lines(std::mem::size_of::<T>(), share, shares) {
            // SAFETY: `share_lines` gives only lines that start inside `tile`; a prefetch
            // reads nothing into the program and cannot fault (SSE, every x86-64 CPU's).
            unsafe { _mm_prefetch::<_MM_HINT_T0>(start.add(line * 64)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (tile, share, shares);
}

#[cfg(target_arch = "x86_64")]
mod avx2;

#[cfg(target_arch = "x86_64")]
mod avx512 {
    //! The kernels. Every function here is compiled for AVX-512 F/BW/VNNI and F16C and may be
    //! called only after `cpu_supported()` returned true.
    use super::{
        BlockQ8K, MAX_ACTIVATION_ROWS, PROMPT_CHUNK_ROWS, PROMPT_GROUP_ROWS, Q4K_SCRATCH,
        Q4KScratch, Q6K_SCRATCH, Q6KScratch, QK_K, QUAD_STRIPS, QUAD_WIDTH, QuadScratch, QuadShape,
        TILE_ROWS, TileQ4K, TileQ6K, Tiles, prefetch_share,
    };
    use core::arch::x86_64::*;
    use std::mem::MaybeUninit;

    /// [`super::quantize_blocks`] compiled for AVX-512: its loops 16 values an instruction.
    ///
    /// # Safety
    /// The CPU must have AVX-512 F and BW.
    #[target_feature(enable = "avx512f,avx512bw")]
    pub(super) unsafe fn quantize_row(x: &[f32], blocks: &mut [BlockQ8K]) {
        super::quantize_blocks(x, blocks);
    }

    /// Broadcasts 4 activation bytes starting at `at` to every 32-bit lane.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn broadcast4(qs: &[i8; QK_K], at: usize) -> __m512i {
        let bytes = [qs[at], qs[at + 1], qs[at + 2], qs[at + 3]];
        _mm512_set1_epi32(i32::from_le_bytes(bytes.map(i8::cast_unsigned)))
    }

    /// Loads 64 bytes starting at `at`.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn load64(bytes: &[u8], at: usize) -> __m512i {
        let chunk = &bytes[at..at + 64];
        // SAFETY: `chunk` is 64 readable bytes; the load has no alignment requirement.
        unsafe { _mm512_loadu_si512(chunk.as_ptr().cast()) }
    }

    /// Loads 16 bytes, for widening to 16 lanes.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn load16(bytes: &[u8; TILE_ROWS]) -> __m128i {
        // SAFETY: 16 readable bytes; no alignment requirement.
        unsafe { _mm_loadu_si128(bytes.as_ptr().cast()) }
    }

    /// 16 f16 values (as bits) to f32 lanes.
    #[inline]
    #[target_feature(enable = "avx512f,f16c")]
    fn load16_f16(bits: &[u16; TILE_ROWS]) -> __m512 {
        // SAFETY: 32 readable bytes; no alignment requirement.
        _mm512_cvtph_ps(unsafe { _mm256_loadu_si256(bits.as_ptr().cast()) })
    }

    /// Adds one Q4_K tile times the activation blocks `acts` (up to 8 rows) into `acc`.
    ///
    /// Per row, the sub-blocks' integer products are summed times their 6-bit scales in f32,
    /// and their minimums times the activations' sums in exact integers (`vpdpwssd`), so the
    /// block scales and the activation's scale are applied once per tile, not per sub-block.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,f16c")]
    fn q4k_tile<const M: usize>(
        tile: &TileQ4K,
        acts: &[&BlockQ8K; M],
        acc: &mut [__m512; M],
        ahead: Option<&TileQ4K>,
    ) {
        let nibble = _mm512_set1_epi8(0x0F);
        let mut scaled = [_mm512_setzero_ps(); M];
        let mut minimums = [_mm512_setzero_si512(); M];
        // Sub-blocks in pairs: two independent integer sums keep `vpdpbusd`'s latency hidden
        // when there is a single activation row.
        for pair in 0..4 {
            let (sa, sb) = (2 * pair, 2 * pair + 1);
            prefetch_share(ahead, pair, 4);
            let mut sum_a = [_mm512_setzero_si512(); M];
            let mut sum_b = [_mm512_setzero_si512(); M];
            for g in 0..4 {
                let (ga, gb) = (sa * 4 + g, sb * 4 + g);
                let wa = load64(&tile.qs, ga * TILE_ROWS * 4);
                let wb = load64(&tile.qs, gb * TILE_ROWS * 4);
                let lo_a = _mm512_and_si512(wa, nibble);
                let hi_a = _mm512_and_si512(_mm512_srli_epi16(wa, 4), nibble);
                let lo_b = _mm512_and_si512(wb, nibble);
                let hi_b = _mm512_and_si512(_mm512_srli_epi16(wb, 4), nibble);
                for (m, act) in acts.iter().enumerate() {
                    sum_a[m] = _mm512_dpbusd_epi32(sum_a[m], lo_a, broadcast4(&act.qs, ga * 8));
                    sum_a[m] = _mm512_dpbusd_epi32(sum_a[m], hi_a, broadcast4(&act.qs, ga * 8 + 4));
                    sum_b[m] = _mm512_dpbusd_epi32(sum_b[m], lo_b, broadcast4(&act.qs, gb * 8));
                    sum_b[m] = _mm512_dpbusd_epi32(sum_b[m], hi_b, broadcast4(&act.qs, gb * 8 + 4));
                }
            }
            for (sub, sums) in [(sa, &sum_a), (sb, &sum_b)] {
                let scale = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(load16(&tile.scales[sub])));
                // The minimum in both 16-bit halves of its row's lane: times the sums of the
                // sub-block's two 16-value halves, added.
                let min = _mm512_cvtepu8_epi32(load16(&tile.mins[sub]));
                let min = _mm512_or_si512(min, _mm512_slli_epi32(min, 16));
                for (m, act) in acts.iter().enumerate() {
                    scaled[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums[m]), scale, scaled[m]);
                    minimums[m] =
                        _mm512_dpwssd_epi32(minimums[m], min, broadcast_pair(&act.bsums, 2 * sub));
                }
            }
        }
        let d = load16_f16(&tile.d);
        let dmin = load16_f16(&tile.dmin);
        for (m, act) in acts.iter().enumerate() {
            let act_d = _mm512_set1_ps(act.d);
            let value = _mm512_fmsub_ps(
                scaled[m],
                d,
                _mm512_mul_ps(_mm512_cvtepi32_ps(minimums[m]), dmin),
            );
            acc[m] = _mm512_fmadd_ps(value, act_d, acc[m]);
        }
    }

    /// A 6-bit value per byte: the low nibble of `low`, and bits 4–5 of `bits`.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn with_high(low: __m512i, bits: __m512i) -> __m512i {
        _mm512_or_si512(
            _mm512_and_si512(low, _mm512_set1_epi8(0x0F)),
            _mm512_and_si512(bits, _mm512_set1_epi8(0x30)),
        )
    }

    /// The 6-bit values (`0..64`) of sub-block `sub` of a Q6_K tile, 4 inputs per lane in each
    /// of 4 vectors, inputs `16·sub ..+ 4`, `+ 4`, `+ 8`, `+ 12`: the sub-block's two groups of
    /// low nibbles, with the high bit pairs of all four of their nibbles from one vector.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    fn q6k_values(tile: &TileQ6K, sub: usize) -> [__m512i; 4] {
        let qh = load64(&tile.qh, sub * TILE_ROWS * 4);
        let w0 = load64(&tile.ql, 2 * sub * TILE_ROWS * 4);
        let w1 = load64(&tile.ql, (2 * sub + 1) * TILE_ROWS * 4);
        [
            with_high(w0, _mm512_slli_epi16(qh, 4)),
            with_high(_mm512_srli_epi16(w0, 4), _mm512_slli_epi16(qh, 2)),
            with_high(w1, qh),
            with_high(_mm512_srli_epi16(w1, 4), _mm512_srli_epi16(qh, 2)),
        ]
    }

    /// Adds one Q6_K tile times the activation blocks `acts` (up to 8 rows) into `acc`.
    ///
    /// As for Q4_K, the scales are applied per row in f32 over the tile and the offset of 32 in
    /// exact integers (each pair of sub-blocks' scales times their activation sums, `vpdpwssd`);
    /// the block and activation scales once per tile.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,f16c")]
    fn q6k_tile<const M: usize>(
        tile: &TileQ6K,
        acts: &[&BlockQ8K; M],
        acc: &mut [__m512; M],
        ahead: Option<&TileQ6K>,
    ) {
        let mut scaled = [_mm512_setzero_ps(); M];
        let mut offsets = [_mm512_setzero_si512(); M];
        for sub in 0..16 {
            prefetch_share(ahead, sub, 16);
            let [lo0, hi0, lo1, hi1] = q6k_values(tile, sub);
            let scale32 = _mm512_cvtepi8_epi32(load16(&tile.scales[sub]));
            let scale = _mm512_cvtepi32_ps(scale32);
            for (m, act) in acts.iter().enumerate() {
                let at = sub * 16;
                let mut sum =
                    _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo0, broadcast4(&act.qs, at));
                sum = _mm512_dpbusd_epi32(sum, hi0, broadcast4(&act.qs, at + 4));
                sum = _mm512_dpbusd_epi32(sum, lo1, broadcast4(&act.qs, at + 8));
                sum = _mm512_dpbusd_epi32(sum, hi1, broadcast4(&act.qs, at + 12));
                scaled[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), scale, scaled[m]);
            }
            if sub % 2 == 1 {
                // The scales of this sub-block and the one before, one per 16-bit half of
                // the row's lane: times the two sub-blocks' activation sums, added.
                let before = _mm512_cvtepi8_epi32(load16(&tile.scales[sub - 1]));
                let scales = _mm512_or_si512(
                    _mm512_and_si512(before, _mm512_set1_epi32(0xFFFF)),
                    _mm512_slli_epi32(scale32, 16),
                );
                for (m, act) in acts.iter().enumerate() {
                    offsets[m] = _mm512_dpwssd_epi32(
                        offsets[m],
                        scales,
                        broadcast_pair(&act.bsums, sub - 1),
                    );
                }
            }
        }
        let d = load16_f16(&tile.d);
        // The stored values are offset by 32: subtract 32 · Σ scale · (sum of the activations).
        let thirty_two = _mm512_set1_ps(32.0);
        for (m, act) in acts.iter().enumerate() {
            let value = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(offsets[m]), thirty_two, scaled[m]);
            acc[m] = _mm512_fmadd_ps(_mm512_mul_ps(value, d), _mm512_set1_ps(act.d), acc[m]);
        }
    }

    /// The pairs `(a, b)` of 16-bit lanes, `a` in the low half of each 32-bit lane.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn pair_lanes(low: __m512i, high: __m512i) -> __m512i {
        _mm512_or_si512(
            _mm512_and_si512(low, _mm512_set1_epi32(0xFFFF)),
            _mm512_slli_epi32(high, 16),
        )
    }

    impl Q4KScratch {
        /// Unpacks `tiles` (one superblock of each of the quad's strips) into `self`.
        #[target_feature(enable = "avx512f,avx512bw,f16c")]
        fn unpack_q4k(&mut self, tiles: [&TileQ4K; QUAD_STRIPS]) {
            let nibble = _mm512_set1_epi8(0x0F);
            for (strip, tile) in tiles.into_iter().enumerate() {
                for group in 0..QK_K / 8 {
                    let packed = load64(&tile.qs, group * TILE_ROWS * 4);
                    // Group `g` holds inputs 8g..8g+4 in its low nibbles and 8g+4..8g+8 in its
                    // high ones: steps 2·(g mod 4) and the one after, of sub-block g / 4.
                    let (sub, step) = (group / 4, 2 * (group % 4));
                    store64(
                        &mut self.weights[sub][step][strip],
                        _mm512_and_si512(packed, nibble),
                    );
                    store64(
                        &mut self.weights[sub][step + 1][strip],
                        _mm512_and_si512(_mm512_srli_epi16(packed, 4), nibble),
                    );
                }
                let d = load16_f16(&tile.d);
                for sub in 0..8 {
                    let scale = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(load16(&tile.scales[sub])));
                    store16_f32(&mut self.scales[sub][strip], _mm512_mul_ps(scale, d));
                }
                for pair in 0..4 {
                    let low = _mm512_cvtepu8_epi32(load16(&tile.mins[2 * pair]));
                    let high = _mm512_cvtepu8_epi32(load16(&tile.mins[2 * pair + 1]));
                    store16_i32(
                        &mut self.correction_pairs[pair][strip],
                        pair_lanes(low, high),
                    );
                }
                store16_f32(&mut self.correction_scale[strip], load16_f16(&tile.dmin));
            }
        }
    }

    impl Q6KScratch {
        /// Unpacks `tiles` (one superblock of each of the quad's strips) into `self`: 6-bit
        /// values `0..64`, meaning `value - 32`.
        #[target_feature(enable = "avx512f,avx512bw,f16c")]
        fn unpack_q6k(&mut self, tiles: [&TileQ6K; QUAD_STRIPS]) {
            for (strip, tile) in tiles.into_iter().enumerate() {
                for sub in 0..16 {
                    for (step, values) in q6k_values(tile, sub).into_iter().enumerate() {
                        store64(&mut self.weights[sub][step][strip], values);
                    }
                }
                let d = load16_f16(&tile.d);
                let mut scales = [_mm512_setzero_si512(); 16];
                for (sub, scale) in scales.iter_mut().enumerate() {
                    *scale = _mm512_cvtepi8_epi32(load16(&tile.scales[sub]));
                    store16_f32(
                        &mut self.scales[sub][strip],
                        _mm512_mul_ps(_mm512_cvtepi32_ps(*scale), d),
                    );
                }
                for pair in 0..8 {
                    store16_i32(
                        &mut self.correction_pairs[pair][strip],
                        pair_lanes(scales[2 * pair], scales[2 * pair + 1]),
                    );
                }
                store16_f32(
                    &mut self.correction_scale[strip],
                    _mm512_mul_ps(d, _mm512_set1_ps(32.0)),
                );
            }
        }
    }

    /// Stores 64 bytes.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn store64(bytes: &mut [u8; 64], value: __m512i) {
        // SAFETY: 64 writable bytes; no alignment requirement.
        unsafe { _mm512_storeu_si512(bytes.as_mut_ptr().cast(), value) }
    }

    /// Stores 16 f32 lanes.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn store16_f32(values: &mut [f32; TILE_ROWS], lanes: __m512) {
        // SAFETY: 16 writable f32s; no alignment requirement.
        unsafe { _mm512_storeu_ps(values.as_mut_ptr(), lanes) }
    }

    /// Stores 16 i32 lanes.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn store16_i32(values: &mut [i32; TILE_ROWS], lanes: __m512i) {
        // SAFETY: 16 writable i32s; no alignment requirement.
        unsafe { _mm512_storeu_si512(values.as_mut_ptr().cast(), lanes) }
    }

    /// Loads 16 f32 lanes.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn load16_f32(values: &[f32; TILE_ROWS]) -> __m512 {
        // SAFETY: 16 readable f32s; no alignment requirement.
        unsafe { _mm512_loadu_ps(values.as_ptr()) }
    }

    /// Loads 16 i32 lanes.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn load16_i32(values: &[i32; TILE_ROWS]) -> __m512i {
        // SAFETY: 16 readable i32s; no alignment requirement.
        unsafe { _mm512_loadu_si512(values.as_ptr().cast()) }
    }

    /// Writes 16 f32 lanes of output.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn store16_out(values: &mut [MaybeUninit<f32>; TILE_ROWS], lanes: __m512) {
        // SAFETY: 16 writable f32s (`MaybeUninit<f32>` has f32's layout); writing needs no
        // initialized value; no alignment requirement.
        unsafe { _mm512_storeu_ps(values.as_mut_ptr().cast(), lanes) }
    }

    /// Loads 16 f32 lanes of output.
    ///
    /// # Safety
    /// All 16 values have been written.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn load16_written(values: &[MaybeUninit<f32>; TILE_ROWS]) -> __m512 {
        // SAFETY: 16 readable f32s, initialized (the caller's contract); no alignment
        // requirement.
        unsafe { _mm512_loadu_ps(values.as_ptr().cast()) }
    }

    /// The quad in `scratch` times the activation blocks `acts` (`R` rows, one superblock
    /// each), added to `out` (`R` rows of 64 outputs) when `ADD`, else written over it without
    /// reading it. `sums` gives a block's activation sums over the correction's sub-blocks
    /// (`2 · PAIRS` of them).
    ///
    /// Per sub-block, each row's integer sums against the 4 strips are scaled in f32 (the block
    /// scale times the sub-block's); the correction is exact integers (`vpdpwssd`, two
    /// sub-blocks per instruction); the activation's scale is applied once per superblock.
    ///
    /// # Safety
    /// When `ADD`, every value of `out` has been written.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,f16c")]
    unsafe fn quad_rows<
        const R: usize,
        const SUBS: usize,
        const STEPS: usize,
        const PAIRS: usize,
        const ADD: bool,
    >(
        scratch: &QuadScratch<SUBS, STEPS, PAIRS>,
        acts: [&BlockQ8K; R],
        sums: impl Fn(&BlockQ8K) -> &[i16],
        out: &mut [&mut [MaybeUninit<f32>; QUAD_WIDTH]; R],
    ) {
        let mut scaled = [[_mm512_setzero_ps(); QUAD_STRIPS]; R];
        for sub in 0..SUBS {
            let mut products = [[_mm512_setzero_si512(); QUAD_STRIPS]; R];
            for step in 0..STEPS {
                let weights: [__m512i; QUAD_STRIPS] =
                    std::array::from_fn(|strip| load64(&scratch.weights[sub][step][strip], 0));
                for (row, act) in acts.iter().enumerate() {
                    let x = broadcast4(&act.qs, (sub * STEPS + step) * 4);
                    for (product, w) in products[row].iter_mut().zip(weights) {
                        *product = _mm512_dpbusd_epi32(*product, w, x);
                    }
                }
            }
            for strip in 0..QUAD_STRIPS {
                let scale = load16_f32(&scratch.scales[sub][strip]);
                for (scaled, products) in scaled.iter_mut().zip(&products) {
                    scaled[strip] =
                        _mm512_fmadd_ps(_mm512_cvtepi32_ps(products[strip]), scale, scaled[strip]);
                }
            }
        }
        // By value: iterating by reference kept `scaled` in memory, stored at every sub-block.
        for ((act, scaled), out) in acts.iter().zip(scaled).zip(out.iter_mut()) {
            let act_d = _mm512_set1_ps(act.d);
            let act_sums = sums(act);
            let (lanes, _) = out.as_chunks_mut::<TILE_ROWS>();
            for (strip, (scaled, lanes)) in scaled.into_iter().zip(lanes).enumerate() {
                let mut correction = _mm512_setzero_si512();
                for pair in 0..PAIRS {
                    let sums = broadcast_pair(act_sums, 2 * pair);
                    let factors = load16_i32(&scratch.correction_pairs[pair][strip]);
                    correction = _mm512_dpwssd_epi32(correction, factors, sums);
                }
                let factor = load16_f32(&scratch.correction_scale[strip]);
                let value = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(correction), factor, scaled);
                let before = if ADD {
                    // SAFETY: the caller wrote every value of `out` (this function's contract).
                    unsafe { load16_written(lanes) }
                } else {
                    _mm512_setzero_ps()
                };
                store16_out(lanes, _mm512_fmadd_ps(value, act_d, before));
            }
        }
    }

    /// The two 16-bit sums `sums[at]`, `sums[at + 1]` in every 32-bit lane, for `vpdpwssd`.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn broadcast_pair(sums: &[i16], at: usize) -> __m512i {
        let low = u32::from(sums[at].cast_unsigned());
        let high = u32::from(sums[at + 1].cast_unsigned());
        _mm512_set1_epi32((low | (high << 16)).cast_signed())
    }

    /// Outputs `64·quad .. 64·quad + 64` of every activation row written into `rows` (one slice
    /// per row; nothing they held is read), on the prompt kernel: superblock by superblock, the
    /// quad's four tiles are unpacked once and multiplied by every row.
    ///
    /// # Safety
    /// The CPU must have AVX-512 F, BW and VNNI and F16C. `activations` holds `rows.len()` rows
    /// of `blocks_per_row` blocks and the tiles `4·quad + 4` strips of `blocks_per_row`;
    /// otherwise this panics (it never reads out of bounds).
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,f16c")]
    pub(super) unsafe fn quad_product(
        tiles: &Tiles,
        quad: usize,
        blocks_per_row: usize,
        activations: &[BlockQ8K],
        rows: &mut [&mut [MaybeUninit<f32>; QUAD_WIDTH]],
    ) {
        let shape = QuadShape {
            quad,
            blocks_per_row,
        };
        match tiles {
            Tiles::Q4K(tiles) => {
                let mut scratch = Q4K_SCRATCH.take().unwrap_or_else(Q4KScratch::boxed);
                let unpack = |scratch: &mut Q4KScratch, b: usize| {
                    scratch.unpack_q4k(std::array::from_fn(|strip| &tiles[shape.tile(strip, b)]));
                    shape.prefetch_next(tiles, b);
                };
                quad_rows_all(
                    &mut scratch,
                    unpack,
                    |a| &a.sums32[..],
                    shape,
                    activations,
                    rows,
                );
                Q4K_SCRATCH.set(Some(scratch));
            }
            Tiles::Q6K(tiles) => {
                let mut scratch = Q6K_SCRATCH.take().unwrap_or_else(Q6KScratch::boxed);
                let unpack = |scratch: &mut Q6KScratch, b: usize| {
                    scratch.unpack_q6k(std::array::from_fn(|strip| &tiles[shape.tile(strip, b)]));
                    shape.prefetch_next(tiles, b);
                };
                quad_rows_all(
                    &mut scratch,
                    unpack,
                    |a| &a.bsums[..],
                    shape,
                    activations,
                    rows,
                );
                Q6K_SCRATCH.set(Some(scratch));
            }
        }
    }

    /// The body of [`quad_product`] for one tile type: rows in chunks of at most
    /// `PROMPT_CHUNK_ROWS`, superblock by superblock, `unpack` then every row of the chunk, 3 at
    /// a time.
    ///
    /// The first superblock writes the outputs and the others add to them, so the outputs'
    /// memory is never read before it is written. Read first, each page of a fresh allocation
    /// is mapped to the operating system's shared zero page, and the write that follows
    /// replaces it with a page of its own, which flushes the old mapping from the other cores'
    /// TLBs by interrupt: on the Xeon's 2-core VM that took 29% of a prompt's samples.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,f16c")]
    fn quad_rows_all<const SUBS: usize, const STEPS: usize, const PAIRS: usize>(
        scratch: &mut QuadScratch<SUBS, STEPS, PAIRS>,
        unpack: impl Fn(&mut QuadScratch<SUBS, STEPS, PAIRS>, usize),
        sums: impl Fn(&BlockQ8K) -> &[i16] + Copy,
        shape: QuadShape,
        activations: &[BlockQ8K],
        rows: &mut [&mut [MaybeUninit<f32>; QUAD_WIDTH]],
    ) {
        let QuadShape { blocks_per_row, .. } = shape;
        let m = rows.len();
        let chunk_rows = m.div_ceil(m.div_ceil(PROMPT_CHUNK_ROWS).max(1)).max(1);
        for (chunk, rows) in rows.chunks_mut(chunk_rows).enumerate() {
            for b in 0..blocks_per_row {
                unpack(scratch, b);
                // Rows are `blocks_per_row` blocks apart; this chunk's first row's block `b`.
                let chunk_acts = &activations[chunk * chunk_rows * blocks_per_row + b..];
                let act = |row: usize| &chunk_acts[row * blocks_per_row];
                if b == 0 {
                    // SAFETY: writing needs nothing written before.
                    unsafe {
                        superblock_rows::<_, _, SUBS, STEPS, PAIRS, false>(
                            scratch, act, sums, rows,
                        );
                    }
                } else {
                    // SAFETY: superblock 0 wrote every value of every row of this chunk
                    // (`superblock_rows` takes every row it is given).
                    unsafe {
                        superblock_rows::<_, _, SUBS, STEPS, PAIRS, true>(scratch, act, sums, rows);
                    }
                }
            }
        }
    }

    /// Every row of a chunk times the superblock unpacked in `scratch` (`act(row)` is the row's
    /// activation block), 3 rows at a time, added to `rows` when `ADD`, else written over them.
    ///
    /// # Safety
    /// When `ADD`, every value of `rows` has been written.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,f16c")]
    unsafe fn superblock_rows<
        'a,
        Act: Fn(usize) -> &'a BlockQ8K,
        Sums: Fn(&BlockQ8K) -> &[i16] + Copy,
        const SUBS: usize,
        const STEPS: usize,
        const PAIRS: usize,
        const ADD: bool,
    >(
        scratch: &QuadScratch<SUBS, STEPS, PAIRS>,
        act: Act,
        sums: Sums,
        rows: &mut [&mut [MaybeUninit<f32>; QUAD_WIDTH]],
    ) {
        // SAFETY (each call below): its rows are some of `rows`, written when `ADD` (this
        // function's contract).
        let (groups, remainder) = rows.as_chunks_mut::<PROMPT_GROUP_ROWS>();
        let mut first = 0;
        for group in groups {
            let acts = [act(first), act(first + 1), act(first + 2)];
            unsafe { quad_rows::<_, SUBS, STEPS, PAIRS, ADD>(scratch, acts, sums, group) };
            first += PROMPT_GROUP_ROWS;
        }
        // A remainder of 2 rows as one pair: twice the independent sums of single rows.
        let (pairs, single) = remainder.as_chunks_mut::<2>();
        for pair in pairs {
            unsafe {
                quad_rows::<_, SUBS, STEPS, PAIRS, ADD>(
                    scratch,
                    [act(first), act(first + 1)],
                    sums,
                    pair,
                );
            }
            first += 2;
        }
        for row in single {
            unsafe {
                quad_rows::<1, SUBS, STEPS, PAIRS, ADD>(
                    scratch,
                    [act(first)],
                    sums,
                    std::array::from_mut(row),
                );
            }
            first += 1;
        }
    }

    /// Outputs `16·strip .. 16·strip + 16` of all `m` activation rows into `out` (`[m][16]`).
    ///
    /// # Safety
    /// The CPU must have AVX-512 F, BW and VNNI and F16C. `activations` holds `m` rows of
    /// `blocks_per_row` blocks, the tiles `strip + 1` strips of `blocks_per_row`, and `out`
    /// `m · 16` values; otherwise this panics (it never reads out of bounds).
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,f16c")]
    pub(super) unsafe fn strip_product(
        tiles: &Tiles,
        strip: usize,
        blocks_per_row: usize,
        activations: &[BlockQ8K],
        m: usize,
        out: &mut [f32],
    ) {
        for m0 in (0..m).step_by(MAX_ACTIVATION_ROWS) {
            let rows = (m - m0).min(MAX_ACTIVATION_ROWS);
            let acts = &activations[m0 * blocks_per_row..(m0 + rows) * blocks_per_row];
            let out = &mut out[m0 * TILE_ROWS..(m0 + rows) * TILE_ROWS];
            let first = strip * blocks_per_row;
            match rows {
                1 => rows_product::<1>(tiles, first, blocks_per_row, acts, out),
                2 => rows_product::<2>(tiles, first, blocks_per_row, acts, out),
                3 => rows_product::<3>(tiles, first, blocks_per_row, acts, out),
                4 => rows_product::<4>(tiles, first, blocks_per_row, acts, out),
                5 => rows_product::<5>(tiles, first, blocks_per_row, acts, out),
                6 => rows_product::<6>(tiles, first, blocks_per_row, acts, out),
                7 => rows_product::<7>(tiles, first, blocks_per_row, acts, out),
                _ => rows_product::<8>(tiles, first, blocks_per_row, acts, out),
            }
        }
    }

    /// `M` activation rows (`acts`, `M · blocks_per_row` blocks) times the strip whose first
    /// tile is `first`, into `out` (`[M][16]`). `M` is a constant so that the accumulators
    /// stay in registers. Each tile's product asks for the tile [`super::prefetch_tiles`]
    /// ahead, a share of its lines at each sub-block ([`super::share_lines`]).
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,f16c")]
    fn rows_product<const M: usize>(
        tiles: &Tiles,
        first: usize,
        blocks_per_row: usize,
        acts: &[BlockQ8K],
        out: &mut [f32],
    ) {
        let mut acc = [_mm512_setzero_ps(); M];
        let ahead = super::prefetch_tiles();
        let blocks =
            |b: usize| -> [&BlockQ8K; M] { std::array::from_fn(|i| &acts[i * blocks_per_row + b]) };
        match tiles {
            Tiles::Q4K(tiles) => {
                for b in 0..blocks_per_row {
                    let next = tiles.get(first + b + ahead);
                    q4k_tile(&tiles[first + b], &blocks(b), &mut acc, next);
                }
            }
            Tiles::Q6K(tiles) => {
                for b in 0..blocks_per_row {
                    let next = tiles.get(first + b + ahead);
                    q6k_tile(&tiles[first + b], &blocks(b), &mut acc, next);
                }
            }
        }
        for (lanes, row) in acc.iter().zip(out.chunks_exact_mut(TILE_ROWS)) {
            // SAFETY: `row` is 16 writable f32s; no alignment requirement.
            unsafe { _mm512_storeu_ps(row.as_mut_ptr(), *lanes) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::quantized::QMatMul;
    use candle_core::{Device, Module};

    /// Deterministic values of both signs and a spread of magnitudes, per row.
    /// Values of sizes that vary along a row (1× to 7×), as a model's do.
    fn values(count: usize, seed: u64) -> Vec<f32> {
        crate::test_values::uniform(count, seed)
            .into_iter()
            .enumerate()
            .map(|(i, unit)| unit * 0.5 * (1.0 + (i % 7) as f32))
            .collect()
    }

    /// The instruction sets of the packed tiles this CPU runs, best first; where it runs none,
    /// the test is recorded as skipped (a failure under `CI=true` on a machine that should run
    /// it).
    fn simds_here() -> Vec<PackedSimd> {
        let here: Vec<PackedSimd> = PackedSimd::ALL
            .into_iter()
            .filter(|simd| simd.runs_here())
            .collect();
        if here.is_empty() {
            selfrag_testkit::skip(
                selfrag_testkit::Lack::CpuFeatures(&["avx2", "fma", "f16c"]),
                "this CPU lacks AVX2, FMA or F16C, so nothing is packed",
            );
        }
        here
    }

    /// Whether the packed tiles run in this process (see [`simds_here`]).
    fn packing_here() -> bool {
        !simds_here().is_empty() && cpu_supported()
    }

    /// A matrix of `n × k` test values (from `seed`) in `dtype`, packed for the process.
    fn packed_values(dtype: GgmlDType, n: usize, k: usize, seed: u64) -> PackedMatrix {
        let w = Tensor::from_vec(values(n * k, seed), (n, k), &Device::Cpu).unwrap();
        PackedMatrix::pack(&QTensor::quantize(&w, dtype).unwrap())
            .unwrap()
            .unwrap()
    }

    /// Every instruction set this CPU runs, against candle's products.
    fn product_against_candle(dtype: GgmlDType) {
        // 48 outputs: strips only, every row count of the decode kernel, and 12 as 8 then 4.
        // 128: quads of strips too, for the prompt kernel from 9 rows (groups of 3 or 2,
        // remainders of 1 and 2, one chunk up to 128 rows, and 129 and 200 rows in chunks of
        // 65 and 100).
        let strips: &[usize] = &[1, 2, 3, 4, 5, 6, 7, 8, 12];
        let quads: &[usize] = &[5, 8, 9, 10, 11, 31, 124, 129, 200];
        for simd in simds_here() {
            for (n, k, rows) in [(48, 768, strips), (128, 512, quads)] {
                products_match_candle(simd, dtype, n, k, rows);
            }
        }
    }

    fn products_match_candle(
        simd: PackedSimd,
        dtype: GgmlDType,
        n: usize,
        k: usize,
        rows: &[usize],
    ) {
        let device = Device::Cpu;
        let w = Tensor::from_vec(values(n * k, 1), (n, k), &device).unwrap();
        let q = QTensor::quantize(&w, dtype).unwrap();
        let packed = PackedMatrix::pack_for(&q, simd).unwrap().unwrap();
        let candle = QMatMul::from_qtensor(q).unwrap();
        for &m in rows {
            let x = Tensor::from_vec(values(m * k, 7 + m as u64), (m, 1, k), &device).unwrap();
            let flat = |t: Result<Tensor>| -> Vec<f32> {
                t.and_then(|t| t.flatten_all()?.to_vec1()).unwrap()
            };
            let (ours, theirs) = (flat(packed.forward(&x)), flat(candle.forward(&x)));
            assert_eq!(ours.len(), m * n);
            let scale = theirs.iter().map(|v| v.abs()).fold(0f32, f32::max);
            for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
                assert!(
                    (a - b).abs() <= 1e-5 * scale,
                    "{simd}, {dtype:?}, {m} rows: output {i} is {a}, candle says {b}"
                );
            }
        }
    }

    /// The byte products of the instruction sets are exact integers, so every set gives the
    /// same products to the bit, on both kernels.
    #[test]
    fn every_instruction_set_gives_the_same_products() {
        let here = simds_here();
        let (n, k) = (128, 768);
        for dtype in [GgmlDType::Q4K, GgmlDType::Q6K] {
            let w = Tensor::from_vec(values(n * k, 3), (n, k), &Device::Cpu).unwrap();
            let q = QTensor::quantize(&w, dtype).unwrap();
            for m in [1, 5, 8, 9, 20, 124] {
                let x = values(m * k, 11 + m as u64);
                let products: Vec<Vec<f32>> = here
                    .iter()
                    .map(|&simd| {
                        let packed = PackedMatrix::pack_for(&q, simd).unwrap().unwrap();
                        let activations = quantize_rows(&x, m, k, Some(simd));
                        matmul_all(&[&packed], &activations, m).remove(0)
                    })
                    .collect();
                for (simd, product) in here.iter().zip(&products).skip(1) {
                    let differ = product
                        .iter()
                        .zip(&products[0])
                        .filter(|(a, b)| a.to_bits() != b.to_bits())
                        .count();
                    // The same integers, scaled in another order of f32 operations where the
                    // vectors are narrower: equal within rounding.
                    let scale = products[0].iter().map(|v| v.abs()).fold(0f32, f32::max);
                    for (a, b) in product.iter().zip(&products[0]) {
                        assert!(
                            (a - b).abs() <= 1e-6 * scale,
                            "{simd} against {}, {dtype:?}, {m} rows: {a} and {b} ({differ} differ)",
                            here[0]
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn the_instruction_set_setting_names_itself_and_what_this_cpu_runs() {
        let best = PackedSimd::best_here();
        assert_eq!(PackedSimd::from_setting(None), Ok(best));
        assert_eq!(PackedSimd::from_setting(Some(" ")), Ok(best));
        for simd in PackedSimd::ALL {
            let chosen = PackedSimd::from_setting(Some(&simd.setting().to_uppercase()));
            if simd.runs_here() {
                assert_eq!(chosen, Ok(Some(simd)));
            } else {
                let error = chosen.unwrap_err();
                assert!(
                    error.contains(SIMD_ENV) && error.contains("lacks"),
                    "{error}"
                );
            }
        }
        let error = PackedSimd::from_setting(Some("neon")).unwrap_err();
        assert!(
            error.contains(SIMD_ENV) && error.contains("`neon`") && error.contains("avx-vnni"),
            "{error}"
        );
    }

    /// The prompt kernel writes its outputs without reading what they held (see
    /// `quad_rows_all`): started on NaN instead of `matmul_all`'s zeros, each quad gives the
    /// same products, for both tile types, in one chunk and in several.
    #[test]
    fn the_prompt_kernel_writes_over_its_outputs_without_reading_them() {
        if !packing_here() {
            return;
        }
        let (n, k) = (128, 512);
        for (simd, dtype) in simds_here()
            .into_iter()
            .flat_map(|simd| [(simd, GgmlDType::Q4K), (simd, GgmlDType::Q6K)])
        {
            let w = Tensor::from_vec(values(n * k, 5), (n, k), &Device::Cpu).unwrap();
            let w = PackedMatrix::pack_for(&QTensor::quantize(&w, dtype).unwrap(), simd)
                .unwrap()
                .unwrap();
            for m in [PROMPT_MIN_ROWS, 31, 124, 129] {
                let activations = quantize_rows(&values(m * k, 13 + m as u64), m, k, Some(simd));
                let expected = matmul_all(&[&w], &activations, m).remove(0);
                let mut outputs = vec![MaybeUninit::new(f32::NAN); m * n];
                let mut by_quad: Vec<Vec<&mut [MaybeUninit<f32>; QUAD_WIDTH]>> =
                    (0..n / QUAD_WIDTH).map(|_| Vec::new()).collect();
                for row in outputs.chunks_exact_mut(n) {
                    for (quad, columns) in by_quad.iter_mut().zip(row.as_chunks_mut().0) {
                        quad.push(columns);
                    }
                }
                for (quad, rows) in by_quad.iter_mut().enumerate() {
                    w.quad_product(quad, &activations, rows);
                }
                // SAFETY: every value was initialized (to NaN) before the kernel wrote it.
                let outputs: Vec<f32> = outputs
                    .into_iter()
                    .map(|v| unsafe { v.assume_init() })
                    .collect();
                assert_eq!(outputs, expected, "{simd}, {dtype:?}, {m} rows");
            }
        }
    }

    #[test]
    fn the_shares_of_a_tile_ask_for_each_of_its_lines_once() {
        let q4k = std::mem::size_of::<TileQ4K>();
        let q6k = std::mem::size_of::<TileQ6K>();
        for (bytes, shares) in [(q4k, 4), (q6k, 16), (q4k, 64), (64, 4), (65, 16), (1, 1)] {
            let mut asked = vec![0; bytes.div_ceil(64)];
            for share in 0..shares {
                for line in share_lines(bytes, share, shares) {
                    asked[line] += 1;
                }
            }
            assert!(
                asked.iter().all(|&times| times == 1),
                "{bytes} bytes in {shares} shares: {asked:?}"
            );
        }
    }

    #[test]
    fn threads_claim_every_item_once_in_runs_that_shrink_to_one() {
        for (items, threads) in [(256, 2), (43, 2), (3, 2), (1000, 5), (1, 1)] {
            let cursor = AtomicUsize::new(0);
            let runs: Vec<Range<usize>> =
                std::iter::from_fn(|| claim_run(&cursor, items, threads)).collect();
            let claimed: Vec<usize> = runs.iter().flat_map(Clone::clone).collect();
            assert_eq!(claimed, (0..items).collect::<Vec<_>>(), "{items} items");
            assert_eq!(
                runs[0].len(),
                (items / (2 * threads)).max(1),
                "{items} items"
            );
            assert!(
                runs.windows(2).all(|w| w[1].len() <= w[0].len()),
                "{runs:?}"
            );
            assert_eq!(runs.last().map(ExactSizeIterator::len), Some(1), "{runs:?}");
        }
    }

    /// On candle's pool, with every thread it has: each chunk's work runs exactly once, with
    /// its own index.
    #[test]
    fn every_chunk_is_worked_once() {
        let mut data = vec![0usize; 1001];
        for_each_chunk(&mut data, 7, |i, chunk| {
            for value in chunk {
                *value += i + 1;
            }
        });
        let expected: Vec<usize> = (0..1001).map(|at| at / 7 + 1).collect();
        assert_eq!(data, expected);
    }

    /// Several matrices times one input, as a block's query, key and value projections: the
    /// same products as each matrix alone, on both kernels, for mixed types and sizes, also
    /// where one matrix's outputs are not whole quads (it alone then takes the decode kernel
    /// for a prompt's rows).
    #[test]
    fn products_of_several_matrices_match_each_alone() {
        if !packing_here() {
            return;
        }
        let device = Device::Cpu;
        let k = 512;
        let matrix = |dtype: GgmlDType, n: usize, seed: u64| packed_values(dtype, n, k, seed);
        let a = matrix(GgmlDType::Q4K, 128, 1);
        let b = matrix(GgmlDType::Q6K, 64, 2);
        let c = matrix(GgmlDType::Q4K, 192, 3);
        let d = matrix(GgmlDType::Q6K, 48, 4);
        let flat = |t: &Tensor| -> Vec<f32> { t.flatten_all().unwrap().to_vec1().unwrap() };
        for m in [1, 5, 8, 12, 31, 124] {
            let x = Tensor::from_vec(values(m * k, 11 + m as u64), (m, 1, k), &device).unwrap();
            let together = PackedMatrix::forward_all([&a, &b, &c], &x).unwrap();
            let mixed = PackedMatrix::forward_all([&a, &d], &x).unwrap();
            for (w, product) in [&a, &b, &c, &a, &d]
                .into_iter()
                .zip(together.iter().chain(&mixed))
            {
                assert_eq!(product.dims(), &[m, 1, w.n]);
                let alone = w.forward(&x).unwrap();
                assert_eq!(flat(product), flat(&alone), "{m} rows, {} outputs", w.n);
            }
        }
        let x = Tensor::zeros((2, 256), candle_core::DType::F32, &device).unwrap();
        assert!(
            PackedMatrix::forward_all([&a], &x).is_err(),
            "a width the matrix lacks"
        );
        let none = Tensor::zeros((0, k), candle_core::DType::F32, &device).unwrap();
        let [empty] = PackedMatrix::forward_all([&a], &none).unwrap();
        assert_eq!(empty.dims(), &[0, 128]);
    }

    /// The gated product is candle's `silu(x · Gᵀ) ⊙ (x · Uᵀ)` on the same products, up to
    /// the rounding of `exp`, on both kernels.
    #[test]
    fn the_gated_product_is_silu_of_the_gate_times_up() {
        if !packing_here() {
            return;
        }
        let device = Device::Cpu;
        let k = 512;
        let matrix = |dtype: GgmlDType, n: usize, seed: u64| packed_values(dtype, n, k, seed);
        let (gate, up) = (
            matrix(GgmlDType::Q4K, 128, 5),
            matrix(GgmlDType::Q6K, 128, 6),
        );
        let flat = |t: &Tensor| -> Vec<f32> { t.flatten_all().unwrap().to_vec1().unwrap() };
        for m in [1, 5, 12] {
            let x = Tensor::from_vec(values(m * k, 21 + m as u64), (m, 1, k), &device).unwrap();
            let ours = gate.gated_forward(&up, &x).unwrap();
            assert_eq!(ours.dims(), &[m, 1, 128]);
            let expected = (candle_nn::ops::silu(&gate.forward(&x).unwrap()).unwrap()
                * up.forward(&x).unwrap())
            .unwrap();
            let (ours, expected) = (flat(&ours), flat(&expected));
            let scale = expected.iter().map(|v| v.abs()).fold(0f32, f32::max);
            assert!(scale > 0.0);
            for (i, (a, b)) in ours.iter().zip(&expected).enumerate() {
                assert!(
                    (a - b).abs() <= 1e-6 * scale,
                    "{m} rows: output {i} is {a}, not {b}"
                );
            }
        }
        let other = matrix(GgmlDType::Q4K, 64, 7);
        let x = Tensor::zeros((1, k), candle_core::DType::F32, &device).unwrap();
        assert!(
            gate.gated_forward(&other, &x).is_err(),
            "outputs that differ"
        );
    }

    #[test]
    fn activations_quantize_as_candle_rounds_them() {
        use candle_core::quantized::GgmlType;
        use candle_core::quantized::k_quants::BlockQ8K as CandleQ8K;
        // The largest magnitude is 127, so the scale is -1 and the values land on halves.
        let mut halves: Vec<f32> = (0..QK_K).map(|i| i as f32 / 2.0 - 64.0).collect();
        halves[0] = 127.0;
        halves[1] = f32::NAN;
        halves[2] = 0.49999997;
        halves[3] = -0.49999997;
        halves[4] = -126.5;
        // Largest magnitudes so small that the scale overflows to infinity (a normal number and
        // a subnormal one), and an infinite value.
        let tiny = |largest: f32| -> Vec<f32> {
            (0..QK_K)
                .map(|i| largest * (i as f32 - 100.0) / 155.0)
                .collect()
        };
        let mut infinite = tiny(1.0);
        infinite[7] = f32::NEG_INFINITY;
        // The largest magnitude with both signs: the first of the two counts (its sign is the
        // scale's), either way round; and every value the same negative one.
        let both_signs = |first: f32| -> Vec<f32> {
            let mut xs = tiny(3.0);
            (xs[40], xs[200]) = (first, -first);
            xs
        };
        let cases = [
            halves,
            tiny(1e-38),
            tiny(1e-45),
            infinite,
            both_signs(9.0),
            both_signs(-9.0),
            vec![-2.5; QK_K],
        ];
        for xs in cases {
            let mut ours = BlockQ8K::ZERO;
            quantize_row(&xs, std::slice::from_mut(&mut ours), None);
            let mut portable = BlockQ8K::ZERO;
            BlockQ8K::quantize(&xs, &mut portable);
            assert_eq!(block_bytes(&ours), block_bytes(&portable));
            for simd in PackedSimd::ALL {
                let mut wide = BlockQ8K::ZERO;
                quantize_row(&xs, std::slice::from_mut(&mut wide), Some(simd));
                assert_eq!(block_bytes(&wide), block_bytes(&portable), "{simd}");
            }
            // Candle's own algorithm: the first value of largest magnitude, `f32::round`, then
            // the clamp and the saturating cast.
            let (mut max, mut amax) = (0f32, 0f32);
            for &x in &xs {
                if amax < x.abs() {
                    (amax, max) = (x.abs(), x);
                }
            }
            let iscale = -127.0 / max;
            let expected: Vec<i8> = xs
                .iter()
                .map(|&x| (iscale * x).round().clamp(-128.0, 127.0) as i8)
                .collect();
            assert_eq!(ours.qs.to_vec(), expected, "largest magnitude {amax}");
            assert_eq!(ours.d.to_bits(), (1.0 / iscale).to_bits());
            // And candle's block holds the same values (its fields are private: compare them
            // dequantized).
            let mut theirs = [CandleQ8K::zeros()];
            CandleQ8K::from_float(&xs, &mut theirs);
            let mut values = vec![0f32; QK_K];
            CandleQ8K::to_float(&theirs, &mut values);
            let ours_values: Vec<f32> = ours.qs.iter().map(|&q| ours.d * f32::from(q)).collect();
            let same = |a: f32, b: f32| a == b || (a.is_nan() && b.is_nan());
            assert!(ours_values.iter().zip(&values).all(|(&a, &b)| same(a, b)));
            // The sums the kernels correct with.
            for (i, &sum) in ours.bsums.iter().enumerate() {
                let expected: i32 = expected[16 * i..16 * i + 16]
                    .iter()
                    .map(|&q| i32::from(q))
                    .sum();
                assert_eq!(i32::from(sum), expected);
            }
            for (i, &sum) in ours.sums32.iter().enumerate() {
                assert_eq!(sum, ours.bsums[2 * i] + ours.bsums[2 * i + 1]);
            }
        }
        // Blocks with no largest magnitude are zeros: all zeros, all NaN.
        for xs in [vec![0.0; QK_K], vec![-0.0; QK_K], vec![f32::NAN; QK_K]] {
            let mut ours = BlockQ8K::ZERO;
            ours.d = 1.0;
            quantize_row(
                &xs,
                std::slice::from_mut(&mut ours),
                PackedSimd::best_here(),
            );
            assert_eq!(block_bytes(&ours), block_bytes(&BlockQ8K::ZERO));
        }
    }

    /// Every field of a block, for comparing two.
    fn block_bytes(block: &BlockQ8K) -> (u32, Vec<i8>, Vec<i16>, Vec<i16>) {
        let BlockQ8K {
            d,
            qs,
            bsums,
            sums32,
        } = block;
        (d.to_bits(), qs.to_vec(), bsums.to_vec(), sums32.to_vec())
    }

    #[test]
    fn a_row_of_blocks_quantizes_block_by_block_on_every_path() {
        let x: Vec<f32> = (0..4 * QK_K)
            .map(|i| ((i * 7919) % 1000) as f32 / 37.0 - 13.0)
            .collect();
        for simd in PackedSimd::ALL.map(Some).into_iter().chain([None]) {
            let mut wide = vec![BlockQ8K::ZERO; 4];
            quantize_row(&x, &mut wide, simd);
            for (values, block) in x.chunks_exact(QK_K).zip(&wide) {
                let mut one = BlockQ8K::ZERO;
                BlockQ8K::quantize(values, &mut one);
                assert_eq!(block_bytes(block), block_bytes(&one), "{simd:?}");
            }
        }
    }

    #[test]
    fn q4k_products_match_candle() {
        product_against_candle(GgmlDType::Q4K);
    }

    #[test]
    fn q6k_products_match_candle() {
        product_against_candle(GgmlDType::Q6K);
    }
}
