//! `strided_matmul`: one f32 matrix product over strided views of slices, through gemm (the
//! crate candle's own CPU matmul calls), with every index it touches checked first.
//!
//! The encoder's attention multiplies each head's queries, keys and values where they lie in
//! the packed query/key/value buffer: strided views, no copies. candle's tensors would copy
//! every head into its own contiguous tensor first, and those copies and their allocations cost
//! as much as the products.
//!
//! This is one of the workspace's five `unsafe` modules (`mapped`, `packed`, `int8`, `strided`,
//! `cache_lines`); here the call into gemm's raw-pointer interface, after the bounds of all three
//! views were checked.
#![allow(unsafe_code)]

/// A matrix inside a slice: element `(i, j)` is `data[i · row_stride + j · column_stride]`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct View<'a> {
    pub data: &'a [f32],
    pub row_stride: usize,
    pub column_stride: usize,
}

impl View<'_> {
    /// Whether a `rows × columns` matrix fits in the slice.
    fn holds(&self, rows: usize, columns: usize) -> bool {
        fits(
            self.data.len(),
            rows,
            columns,
            self.row_stride,
            self.column_stride,
        )
    }
}

/// Whether the largest index of a `rows × columns` view with these strides lies below `len`
/// (a view with no element always fits).
fn fits(len: usize, rows: usize, columns: usize, row_stride: usize, column_stride: usize) -> bool {
    if rows == 0 || columns == 0 {
        return true;
    }
    (rows - 1)
        .checked_mul(row_stride)
        .zip((columns - 1).checked_mul(column_stride))
        .and_then(|(a, b)| a.checked_add(b))
        .is_some_and(|last| last < len)
}

/// `out ← a · b` for `a` of `m × k` and `b` of `k × n`, into `out` as `m` rows of `n` starting
/// `out_row_stride` apart, on the calling thread; `None` (and nothing written) where a view
/// does not fit its slice.
pub(crate) fn strided_matmul(
    (m, n, k): (usize, usize, usize),
    a: View<'_>,
    b: View<'_>,
    out: &mut [f32],
    out_row_stride: usize,
) -> Option<()> {
    // Output rows closer than `n` would overlap: gemm's writes must not.
    let distinct_rows = m <= 1 || out_row_stride >= n;
    if !(distinct_rows
        && a.holds(m, k)
        && b.holds(k, n)
        && fits(out.len(), m, n, out_row_stride, 1))
    {
        return None;
    }
    if m == 0 || n == 0 {
        return Some(());
    }
    let stride = |s: usize| isize::try_from(s).ok();
    let (a_rs, a_cs) = (stride(a.row_stride)?, stride(a.column_stride)?);
    let (b_rs, b_cs) = (stride(b.row_stride)?, stride(b.column_stride)?);
    let out_rs = stride(out_row_stride)?;
    // SAFETY: gemm reads `a[i·a_rs + t·a_cs]` for i < m, t < k, `b[t·b_rs + j·b_cs]` for t < k,
    // j < n, and writes `out[i·out_rs + j]` for i < m, j < n (with `read_dst` false it never
    // reads `out`, and with k = 0 it writes zeros); all three were checked to lie within their
    // slices above, no two output elements coincide (`out_rs ≥ n`), and `out` is borrowed
    // mutably, so it aliases neither input.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            out.as_mut_ptr(),
            1,
            out_rs,
            false,
            a.data.as_ptr(),
            a_cs,
            a_rs,
            b.data.as_ptr(),
            b_cs,
            b_rs,
            0.0,
            1.0,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_strided_product_matches_the_plain_one_and_out_of_bounds_views_are_refused() {
        // a: 3 × 2 taken as the transpose of a 2 × 3 row-major block inside a wider buffer;
        // b: 2 × 4, rows 5 apart.
        let buffer_a: Vec<f32> = (0..12).map(|v| v as f32).collect();
        let a = View {
            data: &buffer_a[1..],
            row_stride: 1,
            column_stride: 6,
        };
        let buffer_b: Vec<f32> = (0..10).map(|v| (v as f32) * 0.5 - 1.0).collect();
        let b = View {
            data: &buffer_b,
            row_stride: 5,
            column_stride: 1,
        };
        let mut out = vec![f32::NAN; 3 * 7];
        strided_matmul((3, 4, 2), a, b, &mut out, 7).unwrap();
        for i in 0..3 {
            for j in 0..4 {
                let want: f32 = (0..2)
                    .map(|t| buffer_a[1 + i + 6 * t] * buffer_b[5 * t + j])
                    .sum();
                assert_eq!(out[i * 7 + j], want, "({i}, {j})");
            }
            // Columns past n are not written.
            assert!(out[i * 7 + 4].is_nan());
        }
        // One element too far in each view: refused, nothing written.
        let mut out = vec![0f32; 12];
        assert!(strided_matmul((3, 4, 3), a, b, &mut out, 4).is_none());
        assert!(strided_matmul((3, 5, 2), a, b, &mut out, 4).is_none());
        assert!(strided_matmul((3, 4, 2), a, b, &mut out[..11], 4).is_none());
        // Output rows that would overlap.
        assert!(strided_matmul((3, 4, 2), a, b, &mut out, 3).is_none());
        assert!(out.iter().all(|&v| v == 0.0));
    }
}
