//! Attention on the CPU: each row's new queries against that row's keys and values in the KV
//! cache, on candle's thread pool.
//!
//! Candle's batched matmul multiplies these as one small product per row and head, each a call
//! into gemm for a `queries × columns` times `columns × head_dim` matrix: on the 8-block
//! 7B-shaped model, K = 5 rows and a few hundred cache columns, those calls were 16% of a
//! decode run and ran on one core while the others waited. Here each (row, head) is, per query,
//! a dot product per column the mask lets it see, a softmax and a weighted sum of the values,
//! read where they lie in the cache, compiled for the CPU's vector width (`pulp`).
//!
//! `llama.rs` runs decode steps (one query a row) through [`cpu_attention`]. A prompt pass's
//! many queries go through [`cpu_prompt_attention`], where gemm's blocking wins (with the loop
//! above they were 13% of an answer's samples, against about 5% for gemm): per (row, key/value
//! head) on the same pool, two single-threaded gemm products. Every pass on a GPU runs as
//! candle's batched products ([`candle_attention`], with the same contract), which is also the
//! tests' reference. The cache may hold f16 ([`crate::cache_lines`]).

use candle_core::{DType, Result, Storage, Tensor};

use half::f16;

use crate::cache_lines::{CacheSimd, dequantize_q8, line_elements, widen};
use crate::packed::for_each_chunk;
use crate::strided::{View, strided_matmul};

/// The shape of one pass's attention.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AttentionShape {
    pub rows: usize,
    /// New tokens of each row in this pass (pads included): the last `queries` columns.
    pub queries: usize,
    pub heads: usize,
    /// Fewer than `heads` for grouped-query attention: consecutive query heads share one.
    pub kv_heads: usize,
    pub head_dim: usize,
    /// Filled cache columns, the new ones included.
    pub columns: usize,
}

/// `softmax(q · kᵀ / √head_dim + mask) · v` for each row and head, as `[rows, heads, queries,
/// head_dim]`. `q` is `[rows, heads, queries, head_dim]`, `k` and `v` the whole cache (`[rows,
/// kv_heads, capacity, line]`, of which the first `columns` columns are read), `mask`
/// (`[rows, 1, queries, columns]`, 0 or -inf) `None` where every query sees every column. All
/// contiguous, on the CPU, and f32 but for the keys and values, which may be f16 both, or both
/// `u8` lines of 8-bit blocks ([`crate::cache_lines`], on `lines`); a `line` is `head_dim`
/// values, or the bytes of their blocks. Anything else is an error.
pub(crate) fn cpu_attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&Tensor>,
    shape: AttentionShape,
    lines: CacheSimd,
) -> Result<Tensor> {
    let AttentionShape {
        rows,
        queries,
        heads,
        kv_heads,
        head_dim,
        columns,
    } = shape;
    let capacity = check(q, k, v, mask, shape)?;
    let group = heads / kv_heads;
    #[allow(clippy::cast_precision_loss)]
    let scale = (head_dim as f32).sqrt();
    let mut out = vec![0f32; rows * heads * queries * head_dim];
    with_inputs(q, k, v, mask, |inputs| {
        let Inputs {
            queries: query_values,
            cache,
            mask,
        } = *inputs;
        let arch = pulp::Arch::new();
        let line = cache.line_len(head_dim);
        // One chunk per (row, head): its `queries` lines of `head_dim` outputs.
        for_each_chunk(&mut out, queries * head_dim, |item, out| {
            let (row, head) = (item / heads, item % heads);
            // The row's cache of this head's key/value head: `capacity` lines.
            let at = (row * kv_heads + head / group) * capacity * line;
            let filled = at..at + columns * line;
            let head_queries = &query_values[item * queries * head_dim..][..queries * head_dim];
            let mask = mask.map(|m| &m[row * queries * columns..][..queries * columns]);
            let shape = (head_dim, scale);
            match cache {
                CacheValues::F32(pair) => {
                    let head = Head::over(head_queries, pair, filled, mask, shape);
                    arch.dispatch(Attend { head, out });
                }
                CacheValues::F16(pair) => {
                    Head::over(head_queries, pair, filled, mask, shape).attend(out, lines);
                }
                CacheValues::Q8(pair) => {
                    Head::over(head_queries, pair, filled, mask, shape).attend(out, lines);
                }
            }
        });
    })?;
    Tensor::from_vec(out, (rows, heads, queries, head_dim), q.device())
}

/// The capacity of the cache `k` when `q`, `k`, `v` and `mask` fit `shape` as
/// [`cpu_attention`] says, else an error that names them.
fn check(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&Tensor>,
    shape: AttentionShape,
) -> Result<usize> {
    let AttentionShape {
        rows,
        queries,
        heads,
        kv_heads,
        head_dim,
        columns,
    } = shape;
    let capacity = k.dim(2)?;
    let line = line_elements(k.dtype(), head_dim);
    if q.dims() != [rows, heads, queries, head_dim]
        || line.is_none_or(|line| k.dims() != [rows, kv_heads, capacity, line])
        || v.dims() != k.dims()
        || columns > capacity
        || queries > columns
        || kv_heads == 0
        || !heads.is_multiple_of(kv_heads)
        || mask.is_some_and(|m| m.dims() != [rows, 1, queries, columns])
    {
        candle_core::bail!(
            "attention: queries {:?}, keys {:?}, values {:?}, mask {:?}, {heads} heads over \
             {kv_heads} key/value heads, {columns} columns",
            q.dims(),
            k.dims(),
            v.dims(),
            mask.map(Tensor::dims)
        );
    }
    Ok(capacity)
}

/// [`cpu_attention`] for a prompt pass's many queries: per (row, key/value head) on candle's
/// thread pool, the query lines of the heads that share it times the filled keys as one gemm
/// product on the calling thread (`strided_matmul`), the mask and softmax, and the weights
/// times the values as another. An f16 or 8-bit cache's keys and values of that head are
/// widened into the thread's own buffers first, where they stay in its cache for both products.
///
/// Candle's batched products had run these as gemm calls parallelised on rayon's threads, next
/// to candle's own pool, whose waiting thread spun on the second core meanwhile; and an f16
/// cache had to be widened into a whole block's f32 copy first.
pub(crate) fn cpu_prompt_attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&Tensor>,
    shape: AttentionShape,
) -> Result<Tensor> {
    let AttentionShape {
        rows,
        queries,
        heads,
        kv_heads,
        head_dim,
        columns,
    } = shape;
    let capacity = check(q, k, v, mask, shape)?;
    let group = heads / kv_heads;
    // The query lines of one (row, key/value head): its `group` heads' queries, consecutive.
    let lines = group * queries;
    #[allow(clippy::cast_precision_loss)]
    let scale = (head_dim as f32).sqrt();
    let mut out = vec![0f32; rows * heads * queries * head_dim];
    let failed = std::sync::atomic::AtomicBool::new(false);
    with_inputs(q, k, v, mask, |inputs| {
        let Inputs {
            queries: query_values,
            cache,
            mask,
        } = *inputs;
        let line = cache.line_len(head_dim);
        let arch = pulp::Arch::new();
        // One chunk per (row, key/value head): its heads' `lines` lines of `head_dim` outputs.
        for_each_chunk(&mut out, lines * head_dim, |item, out| {
            let row = item / kv_heads;
            let at = item * capacity * line;
            let filled = at..at + columns * line;
            let head_queries = &query_values[item * lines * head_dim..][..lines * head_dim];
            let mask = mask.map(|m| &m[row * queries * columns..][..queries * columns]);
            let done = PROMPT_SCRATCH.with(|scratch| {
                let mut scratch = scratch.borrow_mut();
                let PromptScratch {
                    keys,
                    values,
                    scores,
                } = &mut *scratch;
                let (keys, values): (&[f32], &[f32]) = match cache {
                    CacheValues::F32((k, v)) => (&k[filled.clone()], &v[filled]),
                    CacheValues::F16((k, v)) => {
                        keys.resize(filled.len(), 0.0);
                        values.resize(filled.len(), 0.0);
                        widen(&k[filled.clone()], keys);
                        widen(&v[filled], values);
                        (keys, values)
                    }
                    CacheValues::Q8((k, v)) => {
                        keys.resize(columns * head_dim, 0.0);
                        values.resize(columns * head_dim, 0.0);
                        dequantize_q8(&k[filled.clone()], keys);
                        dequantize_q8(&v[filled], values);
                        (keys, values)
                    }
                };
                fn by_rows(data: &[f32], width: usize) -> View<'_> {
                    View {
                        data,
                        row_stride: width,
                        column_stride: 1,
                    }
                }
                // The keys as `head_dim × columns`: each key a column.
                let keys_t = View {
                    data: keys,
                    row_stride: 1,
                    column_stride: head_dim,
                };
                // At most `SCORE_LINES` query lines at a time, so that a thread's scores stay
                // small however long the prompt and however many heads share a key.
                for first in (0..lines).step_by(SCORE_LINES) {
                    let tile = SCORE_LINES.min(lines - first);
                    scores.resize(tile * columns, 0.0);
                    strided_matmul(
                        (tile, columns, head_dim),
                        by_rows(&head_queries[first * head_dim..], head_dim),
                        keys_t,
                        scores,
                        columns,
                    )?;
                    arch.dispatch(Weigh {
                        scores,
                        columns,
                        first,
                        queries,
                        mask,
                        scale,
                    });
                    strided_matmul(
                        (tile, head_dim, columns),
                        by_rows(scores, columns),
                        by_rows(values, head_dim),
                        &mut out[first * head_dim..],
                        head_dim,
                    )?;
                }
                Some(())
            });
            if done.is_none() {
                failed.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        });
    })?;
    if failed.into_inner() {
        candle_core::bail!("attention: a product's views did not fit its buffers");
    }
    Tensor::from_vec(out, (rows, heads, queries, head_dim), q.device())
}

/// A tile of [`cpu_prompt_attention`]'s scores (`columns` a line, its first line query line
/// `first` of the (row, key/value head)) made weights: scaled, masked and softmaxed, as a
/// `pulp` operation compiled for the CPU's vector width (on the crate's baseline, SSE2, the
/// loops ran one value at a time: 3% of a 372-token prompt's samples).
struct Weigh<'a> {
    scores: &'a mut [f32],
    columns: usize,
    first: usize,
    queries: usize,
    /// The row's mask, `queries × columns`; the query heads that share a key/value head take
    /// turns in the lines, so line `l` is query `l % queries`.
    mask: Option<&'a [f32]>,
    scale: f32,
}

impl pulp::WithSimd for Weigh<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _simd: S) {
        let Self {
            scores,
            columns,
            first,
            queries,
            mask,
            scale,
        } = self;
        for (line, line_scores) in scores.chunks_exact_mut(columns).enumerate() {
            let query = (first + line) % queries;
            match mask.map(|m| &m[query * columns..][..columns]) {
                Some(mask) => {
                    for (score, &hidden) in line_scores.iter_mut().zip(mask) {
                        *score = if hidden == f32::NEG_INFINITY {
                            f32::NEG_INFINITY
                        } else {
                            *score / scale + hidden
                        };
                    }
                }
                None => line_scores.iter_mut().for_each(|score| *score /= scale),
            }
            softmax(line_scores);
        }
    }
}

/// Query lines whose scores [`cpu_prompt_attention`] holds at once: a pass's new columns of
/// one head at the generator's largest passes (124 tokens over one row), or four heads' of a
/// pass over several rows.
const SCORE_LINES: usize = 128;

/// A thread's buffers for [`cpu_prompt_attention`]: one (row, key/value head)'s keys and
/// values widened from f16, and the scores of up to [`SCORE_LINES`] of its query lines; kept
/// for the thread's next head (at most a few MB at a 7B model's context).
#[derive(Default)]
struct PromptScratch {
    keys: Vec<f32>,
    values: Vec<f32>,
    scores: Vec<f32>,
}

thread_local! {
    static PROMPT_SCRATCH: std::cell::RefCell<PromptScratch> =
        std::cell::RefCell::new(PromptScratch::default());
}

/// [`cpu_attention`] as candle's batched products, on any device: grouped-query attention
/// without copying the keys and values per query head (the query heads that share a key/value
/// head, consecutive as in candle's `repeat_kv`, become extra query rows).
pub(crate) fn candle_attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&Tensor>,
    shape: AttentionShape,
) -> Result<Tensor> {
    let AttentionShape {
        rows,
        queries,
        heads,
        kv_heads,
        head_dim,
        columns,
    } = shape;
    if kv_heads == 0 || !heads.is_multiple_of(kv_heads) {
        candle_core::bail!("attention: {heads} heads over {kv_heads} key/value heads");
    }
    let k = k.narrow(2, 0, columns)?;
    let v = v.narrow(2, 0, columns)?;
    let group = heads / kv_heads;
    let q = q.reshape((rows, kv_heads, group * queries, head_dim))?;
    #[allow(clippy::cast_precision_loss)]
    let scale = (head_dim as f64).sqrt();
    let scores = (q.matmul(&k.t()?)? / scale)?;
    let scores = match mask {
        None => scores,
        Some(mask) => scores
            .reshape((rows, heads, queries, columns))?
            .broadcast_add(mask)?,
    };
    candle_nn::ops::softmax_last_dim(&scores)?
        .reshape((rows, kv_heads, group * queries, columns))?
        .matmul(&v)?
        .reshape((rows, heads, queries, head_dim))
}

/// The f32 values of a contiguous CPU tensor (`what` names them in the error).
pub(crate) fn f32_values<'a>(
    storage: &'a Storage,
    layout: &candle_core::Layout,
    what: &str,
) -> Result<&'a [f32]> {
    match (storage, layout.contiguous_offsets()) {
        (Storage::Cpu(candle_core::CpuStorage::F32(values)), Some((start, end))) => {
            Ok(&values[start..end])
        }
        _ => candle_core::bail!("the {what} are not contiguous f32 on the CPU"),
    }
}

/// A KV cache tensor's values, or a pair of them, in any of its precisions.
#[derive(Clone, Copy)]
enum CacheValues<T32, T16, T8> {
    F32(T32),
    F16(T16),
    /// The bytes of lines of 8-bit blocks.
    Q8(T8),
}

/// The values of the attention's inputs, borrowed from their CPU storage.
#[derive(Clone, Copy)]
struct Inputs<'a> {
    queries: &'a [f32],
    cache: CachePair<'a>,
    mask: Option<&'a [f32]>,
}

/// A cache's keys and values, both of one precision.
type CachePair<'a> =
    CacheValues<(&'a [f32], &'a [f32]), (&'a [f16], &'a [f16]), (&'a [u8], &'a [u8])>;

impl CachePair<'_> {
    /// Elements of one cache line of `head_dim` values.
    fn line_len(&self, head_dim: usize) -> usize {
        match self {
            Self::F32(_) => f32::line_len(head_dim),
            Self::F16(_) => f16::line_len(head_dim),
            Self::Q8(_) => u8::line_len(head_dim),
        }
    }
}

/// Runs `work` on the values of `q`, `k`, `v` and `mask` (see [`cpu_attention`] for what each
/// may be; anything else is an error).
fn with_inputs<R>(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&Tensor>,
    work: impl FnOnce(&Inputs<'_>) -> R,
) -> Result<R> {
    let (q_storage, q_layout) = q.storage_and_layout();
    let (k_storage, k_layout) = k.storage_and_layout();
    let (v_storage, v_layout) = v.storage_and_layout();
    let mask_storage = mask.map(Tensor::storage_and_layout);
    let inputs = Inputs {
        queries: f32_values(&q_storage, q_layout, "attention's queries")?,
        cache: cache_pair(&k_storage, k_layout, &v_storage, v_layout)?,
        mask: match &mask_storage {
            Some((storage, layout)) => Some(f32_values(storage, layout, "attention's mask")?),
            None => None,
        },
    };
    Ok(work(&inputs))
}

/// The keys' and values' slices of a contiguous CPU cache, both of one precision.
fn cache_pair<'a>(
    k_storage: &'a Storage,
    k_layout: &candle_core::Layout,
    v_storage: &'a Storage,
    v_layout: &candle_core::Layout,
) -> Result<CachePair<'a>> {
    match (
        cache_values(k_storage, k_layout, "keys")?,
        cache_values(v_storage, v_layout, "values")?,
    ) {
        (CacheValues::F32(keys), CacheValues::F32(values)) => Ok(CacheValues::F32((keys, values))),
        (CacheValues::F16(keys), CacheValues::F16(values)) => Ok(CacheValues::F16((keys, values))),
        (CacheValues::Q8(keys), CacheValues::Q8(values)) => Ok(CacheValues::Q8((keys, values))),
        _ => candle_core::bail!("attention: the keys and values differ in type"),
    }
}

/// The f32, f16 or 8-bit values of a contiguous CPU cache tensor.
fn cache_values<'a>(
    storage: &'a Storage,
    layout: &candle_core::Layout,
    what: &str,
) -> Result<CacheValues<&'a [f32], &'a [f16], &'a [u8]>> {
    match (storage, layout.contiguous_offsets()) {
        (Storage::Cpu(candle_core::CpuStorage::F32(values)), Some((start, end))) => {
            Ok(CacheValues::F32(&values[start..end]))
        }
        (Storage::Cpu(candle_core::CpuStorage::F16(values)), Some((start, end))) => {
            Ok(CacheValues::F16(&values[start..end]))
        }
        (Storage::Cpu(candle_core::CpuStorage::U8(values)), Some((start, end))) => {
            Ok(CacheValues::Q8(&values[start..end]))
        }
        _ => candle_core::bail!(
            "attention: the {what} are not contiguous f32, f16 or 8-bit blocks on the CPU"
        ),
    }
}

/// An element of a cache line: an f32 or f16 is one value, a `u8` one byte of a line's 8-bit
/// blocks ([`crate::cache_lines::quantize_q8`]).
pub(crate) trait CacheElement {
    /// The type of a cache tensor of these elements.
    const DTYPE: DType;

    /// Elements of a line of `head_dim` values ([`line_elements`]); 0 where no line of this type
    /// holds them, which [`check`] refuses before any line is read.
    fn line_len(head_dim: usize) -> usize {
        line_elements(Self::DTYPE, head_dim).unwrap_or(0)
    }
}

impl CacheElement for f32 {
    const DTYPE: DType = DType::F32;
}

impl CacheElement for f16 {
    const DTYPE: DType = DType::F16;
}

impl CacheElement for u8 {
    const DTYPE: DType = DType::U8;
}

/// One row's head: its queries, the keys and values of its cache (f32, or f16 or 8-bit lines
/// for [`crate::cache_lines`]), the mask lines.
pub(crate) struct Head<'a, E> {
    /// `queries × head_dim`.
    pub queries: &'a [f32],
    /// `columns` lines each.
    pub keys: &'a [E],
    pub values: &'a [E],
    /// `queries × columns`, 0 or -inf.
    pub mask: Option<&'a [f32]>,
    pub head_dim: usize,
    pub scale: f32,
}

impl<'a, E> Head<'a, E> {
    /// `queries` against the lines `filled` of a cache's keys and values (`pair`), with the
    /// mask lines `mask`; `(head_dim, scale)`.
    fn over(
        queries: &'a [f32],
        (keys, values): (&'a [E], &'a [E]),
        filled: std::ops::Range<usize>,
        mask: Option<&'a [f32]>,
        (head_dim, scale): (usize, f32),
    ) -> Self {
        Head {
            queries,
            keys: &keys[filled.clone()],
            values: &values[filled],
            mask,
            head_dim,
            scale,
        }
    }
}

/// [`Head::attend`] as a `pulp` operation: compiled, inlined whole, for each vector width
/// (AVX-512 or AVX2 with FMA where the CPU has them), and run at the CPU's. (A closure is not
/// inlined into the dispatched function, and ran on 4-lane SSE: 12% of an answer's samples.)
struct Attend<'a, 'b> {
    head: Head<'a, f32>,
    out: &'b mut [f32],
}

impl pulp::WithSimd for Attend<'_, '_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _simd: S) {
        self.head.attend(self.out);
    }
}

impl<E: CacheElement> Head<'_, E> {
    /// Each query's attention into its line of `out` (`queries × head_dim`, zeros), given the
    /// two line operations on the cache's element type: `dot(query, key)` and
    /// `add_scaled(out, weight, value)`. A column the mask hides is never read: its weight is
    /// exactly 0. Inlined into each caller, so that the operations are compiled for the
    /// caller's CPU features.
    #[inline(always)]
    pub(crate) fn attend_with(
        &self,
        out: &mut [f32],
        mut dot: impl FnMut(&[f32], &[E]) -> f32,
        mut add_scaled: impl FnMut(&mut [f32], f32, &[E]),
    ) {
        let hd = self.head_dim;
        let line = E::line_len(hd).max(1);
        let columns = self.keys.len() / line;
        let mut scores = vec![0f32; columns];
        for (index, (query, out)) in self
            .queries
            .chunks_exact(hd)
            .zip(out.chunks_exact_mut(hd))
            .enumerate()
        {
            let mask = self.mask.map(|m| &m[index * columns..][..columns]);
            for (column, (score, key)) in scores
                .iter_mut()
                .zip(self.keys.chunks_exact(line))
                .enumerate()
            {
                *score = match mask.map(|m| m[column]) {
                    Some(hidden) if hidden == f32::NEG_INFINITY => f32::NEG_INFINITY,
                    hidden => dot(query, key) / self.scale + hidden.unwrap_or(0.0),
                };
            }
            softmax(&mut scores);
            for (&weight, value) in scores.iter().zip(self.values.chunks_exact(line)) {
                if weight != 0.0 {
                    add_scaled(out, weight, value);
                }
            }
        }
    }
}

impl Head<'_, f32> {
    /// [`Head::attend_with`] on an f32 cache.
    #[inline(always)]
    fn attend(&self, out: &mut [f32]) {
        self.attend_with(out, dot, |out, weight, value| {
            for (o, x) in out.iter_mut().zip(value) {
                *o += weight * x;
            }
        });
    }
}

/// `Σ a·b`, in 16 lanes so that it vectorizes, the lanes summed as a tree.
#[inline(always)]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0f32; 16];
    let (a_chunks, a_rest) = a.as_chunks::<16>();
    let (b_chunks, b_rest) = b.as_chunks::<16>();
    for (x, y) in a_chunks.iter().zip(b_chunks) {
        for ((lane, x), y) in lanes.iter_mut().zip(x).zip(y) {
            *lane += x * y;
        }
    }
    let rest: f32 = a_rest.iter().zip(b_rest).map(|(x, y)| x * y).sum();
    // Halves added in a tree, each step one vector addition; summed one lane after another,
    // the 16 dependent additions took longer than the products.
    for half in [8, 4, 2, 1] {
        let (low, high) = lanes.split_at_mut(half);
        for (l, h) in low.iter_mut().zip(&high[..half]) {
            *l += h;
        }
    }
    lanes[0] + rest
}

/// Softmax in place, as candle's `softmax_last_dim` (the maximum subtracted, exponentials
/// divided by their sum), with the encoder's vectorizing `exp`; a -inf score's weight is 0.
/// The maximum and the sum run in 16 lanes, so that they vectorize (the sum's order, not
/// candle's one value after another, moves it by rounding only).
#[inline(always)]
pub(crate) fn softmax(scores: &mut [f32]) {
    let mut highest = [f32::NEG_INFINITY; 16];
    let (chunks, rest) = scores.as_chunks::<16>();
    for chunk in chunks {
        for (high, &score) in highest.iter_mut().zip(chunk) {
            *high = high.max(score);
        }
    }
    let max = rest
        .iter()
        .chain(&highest)
        .copied()
        .fold(f32::NEG_INFINITY, f32::max);
    let weight = |score: f32| {
        if score == f32::NEG_INFINITY {
            0.0
        } else {
            crate::bert::exp(score - max)
        }
    };
    let mut lanes = [0f32; 16];
    let (chunks, rest) = scores.as_chunks_mut::<16>();
    for chunk in chunks {
        for (lane, score) in lanes.iter_mut().zip(chunk) {
            *score = weight(*score);
            *lane += *score;
        }
    }
    for score in rest.iter_mut() {
        *score = weight(*score);
        lanes[0] += *score;
    }
    let sum: f32 = lanes.iter().sum();
    let inverse = 1.0 / sum;
    for score in scores.iter_mut() {
        *score *= inverse;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{DType, Device};

    /// The largest absolute difference between two tensors of one shape.
    fn largest_difference(ours: Tensor, reference: &Tensor) -> f32 {
        (ours - reference)
            .unwrap()
            .abs()
            .unwrap()
            .flatten_all()
            .unwrap()
            .max(0)
            .unwrap()
            .to_scalar::<f32>()
            .unwrap()
    }

    #[test]
    fn attention_matches_candles_operations() {
        let device = Device::Cpu;
        let values = |count: usize, seed: u64| {
            Tensor::from_vec(crate::test_values::uniform(count, seed), count, &device).unwrap()
        };
        // Grouped and plain heads; a head size that is not a multiple of 16; a cache with room
        // to spare; one new token a row (a decode step) and several, causal, with rows that
        // cannot see some columns (left padding).
        for (heads, kv_heads, head_dim, queries) in [(4, 2, 32, 1), (3, 3, 20, 1), (4, 2, 32, 6)] {
            let (rows, capacity, columns) = (3, 40, 29);
            let shape = AttentionShape {
                rows,
                queries,
                heads,
                kv_heads,
                head_dim,
                columns,
            };
            let q = values(rows * heads * queries * head_dim, 1)
                .reshape((rows, heads, queries, head_dim))
                .unwrap();
            let cache = |seed| {
                values(rows * kv_heads * capacity * head_dim, seed)
                    .reshape((rows, kv_heads, capacity, head_dim))
                    .unwrap()
            };
            let (k32, v32) = (cache(2), cache(3));
            let mask: Vec<f32> = (0..rows * queries * columns)
                .map(|i| {
                    let (row, query, column) =
                        (i / (queries * columns), i / columns % queries, i % columns);
                    let own = columns - queries + query;
                    // Row 2's first new column is a pad: it sees only itself, as in `mask()`.
                    let pad = row == 2 && query == 0 && queries > 1;
                    if column < 5 * row || column > own || (pad && column != own) {
                        f32::NEG_INFINITY
                    } else {
                        0.0
                    }
                })
                .collect();
            let mask = Tensor::from_vec(mask, (rows, 1, queries, columns), &device).unwrap();
            let masks = if queries == 1 {
                vec![None, Some(&mask)]
            } else {
                vec![Some(&mask)]
            };
            // An f16 cache on every vector path this CPU runs, against candle's products of
            // the same rounded keys and values in f32.
            let (k16, v16) = (
                k32.to_dtype(DType::F16).unwrap(),
                v32.to_dtype(DType::F16).unwrap(),
            );
            let rounded = |t: &Tensor| t.to_dtype(DType::F32).unwrap();
            // And an 8-bit cache where a head is a whole number of blocks, against the values
            // its blocks hold.
            let ((k8, k8_values), (v8, v8_values)) = if head_dim.is_multiple_of(32) {
                (
                    crate::cache_lines::q8_cache(&k32),
                    crate::cache_lines::q8_cache(&v32),
                )
            } else {
                ((k32.clone(), k32.clone()), (v32.clone(), v32.clone()))
            };
            let mut caches = vec![(&k32, &v32, k32.clone(), v32.clone(), CacheSimd::Portable)];
            for lines in [CacheSimd::Avx512, CacheSimd::Avx2, CacheSimd::Portable] {
                if lines.runs_here() {
                    caches.push((&k16, &v16, rounded(&k16), rounded(&v16), lines));
                    if head_dim.is_multiple_of(32) {
                        caches.push((&k8, &v8, k8_values.clone(), v8_values.clone(), lines));
                    }
                }
            }
            let eight_bit = caches.iter().filter(|c| c.0.dtype() == DType::U8).count();
            assert_eq!(
                eight_bit > 0,
                head_dim.is_multiple_of(32),
                "an 8-bit cache for whole blocks"
            );
            for mask in masks {
                for (k, v, k_ref, v_ref, lines) in &caches {
                    let reference = candle_attention(&q, k_ref, v_ref, mask, shape).unwrap();
                    let ours = cpu_attention(&q, k, v, mask, shape, *lines).unwrap();
                    let difference = largest_difference(ours, &reference);
                    assert!(difference < 1e-5, "{lines:?} {:?}: {difference}", k.dtype());
                    // The prompt passes' products, on either cache.
                    let ours = cpu_prompt_attention(&q, k, v, mask, shape).unwrap();
                    let difference = largest_difference(ours, &reference);
                    assert!(difference < 1e-5, "prompt, {:?}: {difference}", k.dtype());
                }
            }
        }
    }

    /// More query lines for one key/value head than a thread scores at once (two heads of
    /// 70 queries: two tiles), causal, on every cache.
    #[test]
    fn a_long_prompt_pass_is_scored_in_tiles_as_one() {
        let device = Device::Cpu;
        let (rows, heads, kv_heads, head_dim, queries, capacity, columns) =
            (2, 4, 2, 32, 70, 90, 80);
        let shape = AttentionShape {
            rows,
            queries,
            heads,
            kv_heads,
            head_dim,
            columns,
        };
        let values = |count: usize, seed: u64, dims: &[usize]| {
            Tensor::from_vec(crate::test_values::uniform(count, seed), dims, &device).unwrap()
        };
        let q = values(
            rows * heads * queries * head_dim,
            4,
            &[rows, heads, queries, head_dim],
        );
        let cache = [rows, kv_heads, capacity, head_dim];
        let (k, v) = (
            values(cache.iter().product(), 5, &cache),
            values(cache.iter().product(), 6, &cache),
        );
        let mask: Vec<f32> = (0..rows * queries * columns)
            .map(|i| {
                let (query, column) = (i / columns % queries, i % columns);
                if column > columns - queries + query {
                    f32::NEG_INFINITY
                } else {
                    0.0
                }
            })
            .collect();
        let mask = Tensor::from_vec(mask, (rows, 1, queries, columns), &device).unwrap();
        let wide = |t: &Tensor| t.to_dtype(DType::F32).unwrap();
        let mut caches: Vec<_> = [DType::F32, DType::F16]
            .into_iter()
            .map(|dtype| {
                let (k, v) = (k.to_dtype(dtype).unwrap(), v.to_dtype(dtype).unwrap());
                ((wide(&k), wide(&v)), (k, v))
            })
            .collect();
        let ((k8, k8_values), (v8, v8_values)) = (
            crate::cache_lines::q8_cache(&k),
            crate::cache_lines::q8_cache(&v),
        );
        caches.push(((k8_values, v8_values), (k8, v8)));
        for ((k_ref, v_ref), (k, v)) in &caches {
            let reference = candle_attention(&q, k_ref, v_ref, Some(&mask), shape).unwrap();
            let ours = cpu_prompt_attention(&q, k, v, Some(&mask), shape).unwrap();
            let difference = largest_difference(ours, &reference);
            assert!(difference < 1e-5, "{:?}: {difference}", k.dtype());
        }
    }

    #[test]
    fn shapes_that_do_not_fit_are_refused() {
        let device = Device::Cpu;
        let zeros = |dims: &[usize]| Tensor::zeros(dims, candle_core::DType::F32, &device).unwrap();
        let shape = AttentionShape {
            rows: 2,
            queries: 1,
            heads: 4,
            kv_heads: 2,
            head_dim: 8,
            columns: 10,
        };
        let (q, k, v) = (
            zeros(&[2, 4, 1, 8]),
            zeros(&[2, 2, 10, 8]),
            zeros(&[2, 2, 10, 8]),
        );
        assert!(cpu_attention(&q, &k, &v, None, shape, CacheSimd::Portable).is_ok());
        let longer = AttentionShape {
            columns: 11,
            ..shape
        };
        assert!(cpu_attention(&q, &k, &v, None, longer, CacheSimd::Portable).is_err());
        let mask = zeros(&[2, 1, 1, 9]);
        assert!(cpu_attention(&q, &k, &v, Some(&mask), shape, CacheSimd::Portable).is_err());
        let two = AttentionShape {
            queries: 2,
            ..shape
        };
        assert!(cpu_attention(&q, &k, &v, None, two, CacheSimd::Portable).is_err());
        assert!(cpu_prompt_attention(&q, &k, &v, None, two).is_err());
        assert!(cpu_prompt_attention(&q, &k, &v, None, longer).is_err());
        let half = v.to_dtype(DType::F16).unwrap();
        assert!(
            cpu_prompt_attention(&q, &k, &half, None, shape).is_err(),
            "keys and values of different types"
        );
        // 8-bit lines of 8 values: not a whole block.
        let bytes = Tensor::zeros((2, 2, 10, 8), DType::U8, &device).unwrap();
        assert!(cpu_attention(&q, &bytes, &bytes, None, shape, CacheSimd::Portable).is_err());
    }
}
