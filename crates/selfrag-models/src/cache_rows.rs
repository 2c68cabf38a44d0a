//! Rows of the generator's KV cache forked, dropped and regrown on the CPU, copying only the
//! columns that hold keys and values.
//!
//! A cache tensor is `[rows, kv_heads, capacity, line]`, f32 or f16 lines of `head_dim` values,
//! or `u8` lines of the bytes of their 8-bit blocks ([`crate::llama`], [`crate::cache_lines`]),
//! and only its first `columns` columns are filled: the rest is reserved for the tokens still to
//! come.
//! Candle's `index_select` and `cat` copy the whole capacity, into memory never touched before.
//! Profiled at K = 5 on the 8-block 7B-shaped model, forking the shared prompt's one row into
//! five and then dropping each finished candidate copied the five rows' whole caches again and
//! again, and clearing the new pages alone was 4.7% of an answer's samples (growing a cache
//! with `cat` another 1.3%). Here:
//! - [`gather_rows`] makes a new cache whose row `i` holds the filled columns of row `from[i]`
//!   of the old one; its other columns are zero pages the system maps only when the decode
//!   writes them;
//! - [`keep_rows`] moves the kept rows down in place and narrows the tensor to them (no new
//!   memory at all).
//!
//! - [`write_columns`] writes a pass's new keys or values (f32) into a cache's columns at
//!   their place, rounded to f16 or stored in 8-bit blocks where the cache holds those; a
//!   prompt pass's many columns on candle's thread pool, a line (row and head) per item.
//!
//! All three are candle in-place operations on the CPU storage; other devices keep candle's
//! operations and an f32 cache (`QuantizedLlama` chooses).

use std::ops::Range;

use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, InplaceOp1, InplaceOp2, Layout, Result, Tensor};

use crate::cache_lines::{line_elements, narrow, quantize_q8};
use crate::packed::for_each_chunk;

/// Where one cache tensor's filled columns lie in its storage.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Filled {
    /// First element of the tensor in its storage.
    start: usize,
    rows: usize,
    heads: usize,
    capacity: usize,
    /// Elements of one column's line.
    line: usize,
    /// Filled columns of every row.
    columns: usize,
}

impl Filled {
    fn of(layout: &Layout, columns: usize) -> Result<Self> {
        let &[rows, heads, capacity, line] = layout.dims() else {
            candle_core::bail!("a KV cache has 4 dimensions, not {:?}", layout.dims());
        };
        let Some((start, _)) = layout.contiguous_offsets() else {
            candle_core::bail!("a KV cache is contiguous");
        };
        if columns > capacity {
            candle_core::bail!("{columns} filled columns in a cache of {capacity}");
        }
        Ok(Self {
            start,
            rows,
            heads,
            capacity,
            line,
            columns,
        })
    }

    /// The filled columns of head `head` of row `row`, as storage indices.
    fn range(&self, row: usize, head: usize) -> Range<usize> {
        let at = self.start + (row * self.heads + head) * self.capacity * self.line;
        at..at + self.columns * self.line
    }
}

/// Copies, into every row `i` of the operation's tensor, the filled columns of row `from[i]`
/// of the other.
struct GatherRows<'a> {
    from: &'a [usize],
    columns: usize,
}

impl InplaceOp2 for GatherRows<'_> {
    fn name(&self) -> &'static str {
        "gather-cache-rows"
    }

    fn cpu_fwd(
        &self,
        s1: &mut CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<()> {
        let (to, of) = (Filled::of(l1, self.columns)?, Filled::of(l2, self.columns)?);
        if (to.heads, to.line) != (of.heads, of.line) || to.rows != self.from.len() {
            candle_core::bail!("cannot gather rows {:?} of {of:?} into {to:?}", self.from);
        }
        if let Some(row) = self.from.iter().find(|&&row| row >= of.rows) {
            candle_core::bail!("row {row} is not in a cache of {} rows", of.rows);
        }
        match (s1, s2) {
            (CpuStorage::F32(dst), CpuStorage::F32(src)) => self.gather(dst, &to, src, &of),
            (CpuStorage::F16(dst), CpuStorage::F16(src)) => self.gather(dst, &to, src, &of),
            (CpuStorage::U8(dst), CpuStorage::U8(src)) => self.gather(dst, &to, src, &of),
            _ => candle_core::bail!("a KV cache is f32, f16 or 8-bit, both tensors alike"),
        }
        Ok(())
    }
}

impl GatherRows<'_> {
    fn gather<T: Copy>(&self, dst: &mut [T], to: &Filled, src: &[T], of: &Filled) {
        for (i, &row) in self.from.iter().enumerate() {
            for head in 0..to.heads {
                dst[to.range(i, head)].copy_from_slice(&src[of.range(row, head)]);
            }
        }
    }
}

/// Moves the filled columns of row `keep[i]` to row `i`, in place; `keep` is strictly
/// increasing, so a row is read before anything is written over it.
struct CompactRows<'a> {
    keep: &'a [usize],
    columns: usize,
}

impl InplaceOp1 for CompactRows<'_> {
    fn name(&self) -> &'static str {
        "compact-cache-rows"
    }

    fn cpu_fwd(&self, storage: &mut CpuStorage, layout: &Layout) -> Result<()> {
        let filled = Filled::of(layout, self.columns)?;
        if !self.keep.windows(2).all(|pair| pair[0] < pair[1])
            || self.keep.last().is_some_and(|&last| last >= filled.rows)
        {
            candle_core::bail!(
                "cannot keep rows {:?} of a cache of {} rows in place",
                self.keep,
                filled.rows
            );
        }
        match storage {
            CpuStorage::F32(data) => self.compact(data, &filled),
            CpuStorage::F16(data) => self.compact(data, &filled),
            CpuStorage::U8(data) => self.compact(data, &filled),
            _ => candle_core::bail!("a KV cache is f32, f16 or 8-bit"),
        }
        Ok(())
    }
}

impl CompactRows<'_> {
    fn compact<T: Copy>(&self, data: &mut [T], filled: &Filled) {
        for (i, &row) in self.keep.iter().enumerate().filter(|(i, row)| i != *row) {
            for head in 0..filled.heads {
                let to = filled.range(i, head).start;
                data.copy_within(filled.range(row, head), to);
            }
        }
    }
}

/// Writes a pass's new columns (`[rows, heads, new, head_dim]` f32, contiguous) into the
/// operation's cache at column `start`.
struct WriteColumns {
    start: usize,
}

/// The (row, head) lines of a cache's storage that a pass writes: `count` regions of `each`
/// elements from `first`, of which `written` is written in each, from `values` new values.
struct Lines {
    first: usize,
    count: usize,
    each: usize,
    written: Range<usize>,
    values: usize,
}

impl Lines {
    /// How many new values (all lines together) a pass writes at least for them to be written
    /// on the thread pool: a prompt pass's keys of a 7B block (124 columns × 32 heads × 128
    /// values), rounded to 8 bits on the calling thread while the pool's others waited, were
    /// 3% of a prompt's samples on the Xeon; a decode step's (one column per row) stay on the
    /// calling thread.
    const PARALLEL_VALUES: usize = 1 << 16;

    /// Writes each line's new values, `src` holding the lines one after the other, through
    /// `store` into the line's written range of `dst`.
    fn write<T: Send>(&self, dst: &mut [T], src: &[f32], store: impl Fn(&[f32], &mut [T]) + Sync) {
        let values = self.values;
        let regions = &mut dst[self.first..][..self.count * self.each];
        let write = |line: usize, region: &mut [T]| {
            store(
                &src[line * values..][..values],
                &mut region[self.written.clone()],
            );
        };
        if self.count * values >= Self::PARALLEL_VALUES {
            for_each_chunk(regions, self.each, write);
        } else {
            for (line, region) in regions.chunks_exact_mut(self.each).enumerate() {
                write(line, region);
            }
        }
    }
}

impl InplaceOp2 for WriteColumns {
    fn name(&self) -> &'static str {
        "write-cache-columns"
    }

    fn cpu_fwd(
        &self,
        s1: &mut CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<()> {
        let cache = Filled::of(l1, 0)?;
        let &[rows, heads, new, head_dim] = l2.dims() else {
            candle_core::bail!("new cache columns have 4 dimensions, not {:?}", l2.dims());
        };
        let (Some((src_start, _)), CpuStorage::F32(src)) = (l2.contiguous_offsets(), s2) else {
            candle_core::bail!("new cache columns are contiguous f32");
        };
        let line = line_elements(s1.dtype(), head_dim);
        if (rows, heads, line) != (cache.rows, cache.heads, Some(cache.line))
            || self.start + new > cache.capacity
        {
            candle_core::bail!(
                "cannot write {:?} at column {} of {cache:?}",
                l2.dims(),
                self.start
            );
        }
        let lines = Lines {
            first: cache.start,
            count: rows * heads,
            each: cache.capacity * cache.line,
            written: self.start * cache.line..(self.start + new) * cache.line,
            values: new * head_dim,
        };
        let src = &src[src_start..];
        match &mut *s1 {
            CpuStorage::F32(dst) => lines.write(dst, src, |from, to| to.copy_from_slice(from)),
            CpuStorage::F16(dst) => lines.write(dst, src, narrow),
            CpuStorage::U8(dst) => lines.write(dst, src, quantize_q8),
            _ => candle_core::bail!("a KV cache is f32, f16 or 8-bit"),
        }
        Ok(())
    }
}

/// A new cache of `from.len()` rows and `capacity` columns whose row `i` holds the first
/// `columns` columns of row `from[i]` of `cache` (an index may repeat); the rest is zeros.
pub(crate) fn gather_rows(
    cache: &Tensor,
    from: &[usize],
    columns: usize,
    capacity: usize,
) -> Result<Tensor> {
    let (_, heads, _, line) = cache.dims4()?;
    let gathered = Tensor::zeros(
        (from.len(), heads, capacity, line),
        cache.dtype(),
        cache.device(),
    )?;
    gathered.inplace_op2(cache, &GatherRows { from, columns })?;
    Ok(gathered)
}

/// Writes `new` (`[rows, heads, n, head_dim]` f32) into columns `start..start + n` of `cache`,
/// in the cache's precision.
pub(crate) fn write_columns(cache: &Tensor, new: &Tensor, start: usize) -> Result<()> {
    cache.inplace_op2(new, &WriteColumns { start })
}

/// `cache` with only the rows `keep` (strictly increasing), in that order, moved in place:
/// their first `columns` columns are kept, the rest of each row is left as it was.
pub(crate) fn keep_rows(cache: &Tensor, keep: &[usize], columns: usize) -> Result<Tensor> {
    cache.inplace_op1(&CompactRows { keep, columns })?;
    cache.narrow(0, 0, keep.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{DType, Device, IndexOp};

    /// A cache of `rows` rows, 2 heads, `capacity` columns of width 3, every value distinct.
    fn cache(rows: usize, capacity: usize) -> Tensor {
        let count = rows * 2 * capacity * 3;
        Tensor::arange(0f32, count as f32, &Device::Cpu)
            .unwrap()
            .reshape((rows, 2, capacity, 3))
            .unwrap()
    }

    fn filled(t: &Tensor, row: usize, columns: usize) -> Vec<f32> {
        t.i(row)
            .unwrap()
            .narrow(1, 0, columns)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap()
    }

    #[test]
    fn gathered_rows_hold_their_sources_filled_columns_and_zeros_after() {
        let old = cache(3, 5);
        let new = gather_rows(&old, &[2, 0, 2, 1], 4, 7).unwrap();
        assert_eq!(new.dims(), &[4, 2, 7, 3]);
        for (i, &row) in [2, 0, 2, 1].iter().enumerate() {
            assert_eq!(filled(&new, i, 4), filled(&old, row, 4), "row {i}");
            let rest = new.i(i).unwrap().narrow(1, 4, 3).unwrap();
            assert_eq!(
                rest.abs()
                    .unwrap()
                    .sum_all()
                    .unwrap()
                    .to_scalar::<f32>()
                    .unwrap(),
                0.0
            );
        }
        assert!(gather_rows(&old, &[3], 4, 7).is_err(), "a row it lacks");
        assert!(
            gather_rows(&old, &[0], 6, 7).is_err(),
            "more columns than it has"
        );
    }

    #[test]
    fn an_f16_cache_is_written_rounded_and_forked_and_kept_like_f32() {
        // New columns of a pass (2 rows, 2 heads, 3 columns of width 3) written at column 2.
        let count = 2 * 2 * 3 * 3;
        let new: Vec<f32> = (0..count).map(|i| i as f32 / 7.0 - 2.0).collect();
        let new = Tensor::from_vec(new, (2, 2, 3, 3), &Device::Cpu).unwrap();
        let cache = Tensor::zeros((2, 2, 6, 3), DType::F16, &Device::Cpu).unwrap();
        let exact = Tensor::zeros((2, 2, 6, 3), DType::F32, &Device::Cpu).unwrap();
        write_columns(&cache, &new, 2).unwrap();
        write_columns(&exact, &new, 2).unwrap();
        let written = cache.narrow(2, 2, 3).unwrap();
        let rounded = new.to_dtype(DType::F16).unwrap();
        assert_eq!(
            written
                .flatten_all()
                .unwrap()
                .to_vec1::<half::f16>()
                .unwrap(),
            rounded
                .flatten_all()
                .unwrap()
                .to_vec1::<half::f16>()
                .unwrap()
        );
        assert_eq!(
            filled(&exact.narrow(2, 2, 3).unwrap(), 1, 3),
            filled(&new, 1, 3)
        );
        // Forked and kept as an f32 cache is.
        let forked = gather_rows(&cache, &[1, 1, 0], 5, 6).unwrap();
        assert_eq!(forked.dtype(), DType::F16);
        let f32_row = |t: &Tensor, row| filled(&t.to_dtype(DType::F32).unwrap(), row, 5);
        assert_eq!(f32_row(&forked, 0), f32_row(&cache, 1));
        assert_eq!(f32_row(&forked, 2), f32_row(&cache, 0));
        let kept = keep_rows(&forked, &[2], 5).unwrap();
        assert_eq!(f32_row(&kept, 0), f32_row(&cache, 0));
        // Mismatched caches are refused.
        assert!(write_columns(&cache, &new, 4).is_err(), "past the capacity");
        assert!(gather_rows(&cache, &[0], 5, 6).is_ok());
        let mixed = Tensor::zeros((1, 2, 6, 3), DType::F32, &Device::Cpu).unwrap();
        assert!(
            mixed
                .inplace_op2(
                    &cache,
                    &GatherRows {
                        from: &[0],
                        columns: 5
                    }
                )
                .is_err()
        );
    }

    #[test]
    fn an_8_bit_cache_is_written_in_blocks_and_forked_and_kept_like_f32() {
        // New columns of a pass (2 rows, 2 heads, 3 columns of 64 values) written at column 2.
        let new = Tensor::from_vec(
            crate::test_values::uniform(2 * 2 * 3 * 64, 11),
            (2, 2, 3, 64),
            &Device::Cpu,
        )
        .unwrap();
        let line = crate::cache_lines::q8_line_bytes(64).unwrap();
        let cache = Tensor::zeros((2, 2, 6, line), DType::U8, &Device::Cpu).unwrap();
        write_columns(&cache, &new, 2).unwrap();
        let (expected, _) = crate::cache_lines::q8_cache(&new);
        let bytes = |t: &Tensor| t.flatten_all().unwrap().to_vec1::<u8>().unwrap();
        assert_eq!(bytes(&cache.narrow(2, 2, 3).unwrap()), bytes(&expected));
        assert!(
            bytes(&cache.narrow(2, 0, 2).unwrap())
                .iter()
                .all(|&b| b == 0),
            "the columns before are untouched"
        );
        // Forked and kept as an f32 cache is.
        let forked = gather_rows(&cache, &[1, 1, 0], 5, 6).unwrap();
        assert_eq!(forked.dims(), &[3, 2, 6, line]);
        let row = |t: &Tensor, r: usize| bytes(&t.i(r).unwrap().narrow(1, 0, 5).unwrap());
        assert_eq!(row(&forked, 0), row(&cache, 1));
        assert_eq!(row(&forked, 2), row(&cache, 0));
        let kept = keep_rows(&forked, &[2], 5).unwrap();
        assert_eq!(row(&kept, 0), row(&cache, 0));
        // A line that is not the new columns' blocks is refused.
        let narrow = Tensor::zeros((2, 2, 6, line - 1), DType::U8, &Device::Cpu).unwrap();
        assert!(write_columns(&narrow, &new, 2).is_err());
    }

    /// A prompt pass's columns, enough to be written on the thread pool, land in each kind of
    /// cache exactly as the same columns written one at a time (a decode step's way).
    #[test]
    fn a_large_pass_is_written_on_the_pool_as_columns_one_by_one() {
        let (rows, heads, columns, head_dim) = (2, 8, 64, 128);
        assert!(rows * heads * columns * head_dim >= Lines::PARALLEL_VALUES);
        assert!(rows * heads * head_dim < Lines::PARALLEL_VALUES);
        let new = Tensor::from_vec(
            crate::test_values::uniform(rows * heads * columns * head_dim, 5),
            (rows, heads, columns, head_dim),
            &Device::Cpu,
        )
        .unwrap();
        let q8_line = crate::cache_lines::q8_line_bytes(head_dim).unwrap();
        for (dtype, line) in [
            (DType::F32, head_dim),
            (DType::F16, head_dim),
            (DType::U8, q8_line),
        ] {
            let shape = (rows, heads, columns + 6, line);
            let whole = Tensor::zeros(shape, dtype, &Device::Cpu).unwrap();
            let by_column = Tensor::zeros(shape, dtype, &Device::Cpu).unwrap();
            write_columns(&whole, &new, 3).unwrap();
            for column in 0..columns {
                let one = new.narrow(2, column, 1).unwrap().contiguous().unwrap();
                write_columns(&by_column, &one, 3 + column).unwrap();
            }
            let values = |t: &Tensor| {
                t.to_dtype(DType::F32)
                    .unwrap()
                    .flatten_all()
                    .unwrap()
                    .to_vec1::<f32>()
                    .unwrap()
            };
            assert_eq!(values(&whole), values(&by_column), "{dtype:?}");
            let written = whole.narrow(2, 3, columns).unwrap();
            assert!(values(&written).iter().any(|&v| v != 0.0), "{dtype:?}");
            for (first, count) in [(0, 3), (3 + columns, 3)] {
                let rest = values(&whole.narrow(2, first, count).unwrap());
                assert!(rest.iter().all(|&v| v == 0.0), "{dtype:?}: untouched");
            }
        }
    }

    #[test]
    fn kept_rows_move_down_in_place() {
        let old = cache(5, 6);
        let expected: Vec<Vec<f32>> = [1, 3, 4].iter().map(|&r| filled(&old, r, 4)).collect();
        let kept = keep_rows(&old, &[1, 3, 4], 4).unwrap();
        assert_eq!(kept.dims(), &[3, 2, 6, 3]);
        assert_eq!(
            filled(&old, 0, 4),
            expected[0],
            "moved in place, not copied"
        );
        for (i, values) in expected.iter().enumerate() {
            assert_eq!(&filled(&kept, i, 4), values, "row {i}");
        }
        // Kept again from the narrowed tensor, as finished rows drop one by one.
        let again = keep_rows(&kept, &[0, 2], 4).unwrap();
        assert_eq!(filled(&again, 1, 4), expected[2]);
        assert!(keep_rows(&again, &[1, 0], 4).is_err(), "out of order");
        assert!(keep_rows(&again, &[2], 4).is_err(), "a row it lacks");
        // A narrowed cache forks and is written in place like any other.
        let forked = gather_rows(&again, &[1, 1, 0], 4, 6).unwrap();
        assert_eq!(filled(&forked, 0, 4), expected[2]);
        assert_eq!(filled(&forked, 2, 4), expected[0]);
        let column = Tensor::full(-1f32, (2, 2, 1, 3), &Device::Cpu).unwrap();
        again.slice_set(&column, 2, 4).unwrap();
        assert_eq!(filled(&again, 1, 4), expected[2], "the filled columns stay");
        let written = again.i((1, .., 4)).unwrap().flatten_all().unwrap();
        assert_eq!(written.to_vec1::<f32>().unwrap(), vec![-1.0; 6]);
    }
}
