//! A prompt pass's queries, keys and values moved on the CPU between the hidden states' layout
//! (each token's heads side by side, `[tokens, heads · head_dim]`) and attention's (each row's
//! heads one after another, `[rows, heads, columns, head_dim]`), and the attention's output
//! back.
//!
//! With candle's operations this was a chain of copies on the calling thread while the pool's
//! other thread waited: the spread of a ragged pass's tokens into its padded layout (`cat`,
//! `index_select`), the transpose to heads (`contiguous`), the rotary embedding (candle's
//! `rope_i`, on rayon's threads beside candle's pool), and on the way back the transpose and
//! the gather. Here each direction is one pass over the values on candle's pool, a chunk per
//! (row, head) or per token, with the rotation done as the values are moved. The arithmetic is
//! candle's `rope_i` to the bit (`x₀·cos − x₁·sin`, `x₀·sin + x₁·cos` per pair of values, a
//! pad's zeros rotated too), so the results are the same values.

use candle_core::{Result, Tensor};

use crate::cpu_attention::f32_values;
use crate::packed::for_each_chunk;

/// The attention layout of one pass.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HeadShape {
    pub rows: usize,
    pub columns: usize,
    pub heads: usize,
    pub head_dim: usize,
}

/// `tokens` (`[tokens, heads · head_dim]`, any leading dimensions of one) as `[rows, heads,
/// columns, head_dim]`. Slot `row · columns + column` of the layout holds the token `slots`
/// names (1 + its index, 0 for a pad, which holds zeros), or with no `slots` the token of that
/// index. With `rope` (`cos` and `sin`, `[rows, columns, head_dim / 2]`), each slot's heads are
/// rotated by its entries, as candle's `rope_i`.
pub(crate) fn split_heads(
    tokens: &Tensor,
    slots: Option<&[u32]>,
    shape: HeadShape,
    rope: Option<(&Tensor, &Tensor)>,
) -> Result<Tensor> {
    let HeadShape {
        rows,
        columns,
        heads,
        head_dim,
    } = shape;
    let width = heads * head_dim;
    let half = head_dim / 2;
    let slot_count = rows * columns;
    if head_dim == 0 || rope.is_some() && !head_dim.is_multiple_of(2) {
        candle_core::bail!("heads of {head_dim} values cannot be rotated in pairs");
    }
    if let Some(slots) = slots
        && slots.len() != slot_count
    {
        candle_core::bail!("{} slots for a layout of {slot_count}", slots.len());
    }
    let tokens = tokens.contiguous()?;
    let (storage, layout) = tokens.storage_and_layout();
    let values = f32_values(&storage, layout, "hidden states")?;
    let token_count = values.len() / width;
    if values.len() != token_count * width {
        candle_core::bail!(
            "hidden states of {} values are not lines of {width}",
            values.len()
        );
    }
    let source = |slot: usize| -> Option<usize> {
        match slots {
            Some(slots) => (slots[slot] as usize).checked_sub(1),
            None => Some(slot),
        }
    };
    if (0..slot_count).any(|slot| source(slot).is_some_and(|token| token >= token_count)) {
        candle_core::bail!("a slot names a token past the pass's {token_count}");
    }
    let rope_storage = rope.map(|(cos, sin)| (cos.storage_and_layout(), sin.storage_and_layout()));
    let tables = match &rope_storage {
        Some(((cos, cos_layout), (sin, sin_layout))) => {
            let cos = f32_values(cos, cos_layout, "rotary cosines")?;
            let sin = f32_values(sin, sin_layout, "rotary sines")?;
            if cos.len() != slot_count * half || sin.len() != slot_count * half {
                candle_core::bail!(
                    "rotary tables of {} values for {slot_count} slots",
                    cos.len()
                );
            }
            Some((cos, sin))
        }
        None => None,
    };
    let zeros = vec![0f32; head_dim];
    let mut out = vec![0f32; rows * heads * columns * head_dim];
    for_each_chunk(&mut out, columns * head_dim, |item, out| {
        let (row, head) = (item / heads, item % heads);
        for (column, out) in out.chunks_exact_mut(head_dim).enumerate() {
            let slot = row * columns + column;
            let x = match source(slot) {
                Some(token) => &values[token * width + head * head_dim..][..head_dim],
                None => &zeros[..],
            };
            match tables {
                Some((cos, sin)) => {
                    let (cos, sin) = (&cos[slot * half..][..half], &sin[slot * half..][..half]);
                    let pairs = x.chunks_exact(2).zip(out.chunks_exact_mut(2));
                    for ((x, out), (&c, &s)) in pairs.zip(cos.iter().zip(sin)) {
                        out[0] = x[0] * c - x[1] * s;
                        out[1] = x[0] * s + x[1] * c;
                    }
                }
                None => out.copy_from_slice(x),
            }
        }
    });
    drop(storage);
    Tensor::from_vec(out, (rows, heads, columns, head_dim), tokens.device())
}

/// Attention's output `layout` (`[rows, heads, columns, head_dim]`) as the hidden states'
/// layout: `[rows, columns, heads · head_dim]`, or with `gather` (each real token's slot, in
/// order) `[1, tokens, heads · head_dim]` of the real tokens only.
pub(crate) fn merge_heads(
    layout: &Tensor,
    gather: Option<&[u32]>,
    shape: HeadShape,
) -> Result<Tensor> {
    let HeadShape {
        rows,
        columns,
        heads,
        head_dim,
    } = shape;
    let width = heads * head_dim;
    if head_dim == 0 {
        candle_core::bail!("heads of no values");
    }
    let layout = layout.contiguous()?;
    let (storage, tensor_layout) = layout.storage_and_layout();
    let values = f32_values(&storage, tensor_layout, "attention's output")?;
    if values.len() != rows * heads * columns * head_dim {
        candle_core::bail!(
            "attention's output of {} values for {shape:?}",
            values.len()
        );
    }
    let tokens = gather.map_or(rows * columns, <[u32]>::len);
    let slot = |token: usize| gather.map_or(token, |gather| gather[token] as usize);
    if (0..tokens).any(|token| slot(token) >= rows * columns) {
        candle_core::bail!("a token's slot lies past the layout's {}", rows * columns);
    }
    let mut out = vec![0f32; tokens * width];
    for_each_chunk(&mut out, width, |token, out| {
        let slot = slot(token);
        let (row, column) = (slot / columns, slot % columns);
        for (head, out) in out.chunks_exact_mut(head_dim).enumerate() {
            out.copy_from_slice(
                &values[((row * heads + head) * columns + column) * head_dim..][..head_dim],
            );
        }
    });
    drop(storage);
    match gather {
        Some(_) => Tensor::from_vec(out, (1, tokens, width), layout.device()),
        None => Tensor::from_vec(out, (rows, columns, width), layout.device()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    fn bits(t: &Tensor) -> Vec<u32> {
        t.flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap()
            .into_iter()
            .map(f32::to_bits)
            .collect()
    }

    /// A ragged pass of two rows of 3 columns (the first row one pad), 2 heads of 8 values.
    #[test]
    fn heads_are_split_rotated_and_merged_as_candles_operations_do() {
        let shape = HeadShape {
            rows: 2,
            columns: 3,
            heads: 2,
            head_dim: 8,
        };
        let (slots, gather): (Vec<u32>, Vec<u32>) = (vec![0, 1, 2, 3, 4, 5], vec![1, 2, 3, 4, 5]);
        let dev = &Device::Cpu;
        let tokens =
            Tensor::from_vec(crate::test_values::uniform(5 * 16, 4), (1, 5, 16), dev).unwrap();
        let table = |seed| {
            Tensor::from_vec(crate::test_values::uniform(2 * 3 * 4, seed), (2, 3, 4), dev).unwrap()
        };
        let (cos, sin) = (table(5), table(6));
        // Candle's chain, as the model ran it.
        let zero = Tensor::zeros((1, 16), candle_core::DType::F32, dev).unwrap();
        let spread = Tensor::cat(&[&zero, &tokens.reshape((5, 16)).unwrap()], 0)
            .unwrap()
            .index_select(&Tensor::new(slots.as_slice(), dev).unwrap(), 0)
            .unwrap()
            .reshape((2, 3, 2, 8))
            .unwrap()
            .transpose(1, 2)
            .unwrap()
            .contiguous()
            .unwrap();
        let rotated = candle_nn::rotary_emb::rope_i(&spread, &cos, &sin).unwrap();
        let ours = split_heads(&tokens, Some(&slots), shape, Some((&cos, &sin))).unwrap();
        assert_eq!(ours.dims(), rotated.dims());
        assert_eq!(bits(&ours), bits(&rotated));
        let unrotated = split_heads(&tokens, Some(&slots), shape, None).unwrap();
        assert_eq!(bits(&unrotated), bits(&spread));
        // Without slots: every slot its own token.
        let full =
            Tensor::from_vec(crate::test_values::uniform(6 * 16, 7), (2, 3, 16), dev).unwrap();
        let theirs = full
            .reshape((2, 3, 2, 8))
            .unwrap()
            .transpose(1, 2)
            .unwrap()
            .contiguous()
            .unwrap();
        let theirs = candle_nn::rotary_emb::rope_i(&theirs, &cos, &sin).unwrap();
        let ours = split_heads(&full, None, shape, Some((&cos, &sin))).unwrap();
        assert_eq!(bits(&ours), bits(&theirs));
        // And back: the transpose, then the real tokens gathered.
        let merged = rotated
            .transpose(1, 2)
            .unwrap()
            .reshape((2, 3, 16))
            .unwrap();
        let gathered = merged
            .reshape((6, 16))
            .unwrap()
            .index_select(&Tensor::new(gather.as_slice(), dev).unwrap(), 0)
            .unwrap()
            .unsqueeze(0)
            .unwrap();
        let ours = merge_heads(&rotated, Some(&gather), shape).unwrap();
        assert_eq!(ours.dims(), gathered.dims());
        assert_eq!(bits(&ours), bits(&gathered));
        let ours = merge_heads(&rotated, None, shape).unwrap();
        assert_eq!(ours.dims(), merged.dims());
        assert_eq!(bits(&ours), bits(&merged));
    }

    #[test]
    fn layouts_that_do_not_fit_are_errors() {
        let dev = &Device::Cpu;
        let shape = HeadShape {
            rows: 1,
            columns: 2,
            heads: 1,
            head_dim: 4,
        };
        let tokens = Tensor::zeros((2, 4), candle_core::DType::F32, dev).unwrap();
        // A slot past the tokens, too few slots, an odd head.
        assert!(split_heads(&tokens, Some(&[1, 3]), shape, None).is_err());
        assert!(split_heads(&tokens, Some(&[1]), shape, None).is_err());
        let odd = HeadShape {
            head_dim: 3,
            ..shape
        };
        let table = Tensor::zeros((1, 2, 1), candle_core::DType::F32, dev).unwrap();
        let tokens3 = Tensor::zeros((2, 3), candle_core::DType::F32, dev).unwrap();
        assert!(split_heads(&tokens3, None, odd, Some((&table, &table))).is_err());
        assert!(split_heads(&tokens3, None, odd, None).is_ok());
        let layout = Tensor::zeros((1, 1, 2, 4), candle_core::DType::F32, dev).unwrap();
        assert!(merge_heads(&layout, Some(&[2]), shape).is_err());
    }
}
