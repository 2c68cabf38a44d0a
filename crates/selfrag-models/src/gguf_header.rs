//! Reading a GGUF header defensively, for every caller in this crate (the generator, the
//! tokenizer alone, the download's architecture check): candle's reader behind a panic
//! boundary, then the checks candle leaves to its callers, so that a truncated or corrupt file
//! is an error naming it, never a panic or a huge allocation.
//!
//! candle 0.11 bounds string, array and table lengths by the file's size, but it divides by
//! `general.alignment` unchecked (0 panics), multiplies tensor dimensions unchecked when a
//! tensor is read (absurd dimensions overflow), and turns an empty tensor into a slice at a
//! misaligned pointer (a non-unwinding abort). All are caught here, before any tensor is read.

use std::io::{Read, Seek};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

use candle_core::quantized::gguf_file;

use crate::error::ModelError;

fn invalid(path: &Path, reason: String) -> ModelError {
    ModelError::InvalidGguf {
        path: path.to_owned(),
        reason,
    }
}

/// Reads the header of the GGUF file at `path` from `reader` and checks that every tensor it
/// lists has a sane size and lies inside the file.
pub(crate) fn read<R: Read + Seek>(
    reader: &mut R,
    path: &Path,
) -> Result<gguf_file::Content, ModelError> {
    let file_size = reader
        .seek(std::io::SeekFrom::End(0))
        .and_then(|size| reader.rewind().map(|()| size))
        .map_err(ModelError::io(path))?;
    // The reader only parses bytes; a panic in it leaves nothing behind but the reader's
    // position, and the caller gets an error instead of a crash.
    let content = catch_unwind(AssertUnwindSafe(|| gguf_file::Content::read(reader)))
        .map_err(|panic| {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            invalid(path, format!("the header is malformed ({what})"))
        })?
        .map_err(|e| invalid(path, e.to_string()))?;
    check_tensors(&content, file_size, path)?;
    Ok(content)
}

/// Every tensor: at most 4 dimensions whose product does not overflow, a whole number of
/// quantization blocks, and its bytes inside the file.
fn check_tensors(
    content: &gguf_file::Content,
    file_size: u64,
    path: &Path,
) -> Result<(), ModelError> {
    // As llama.cpp: the alignment is a power of two (candle divides by it unchecked).
    if let Some(value) = content.metadata.get("general.alignment") {
        use gguf_file::Value as V;
        let alignment = match value {
            V::U8(v) => Some(u64::from(*v)),
            V::U16(v) => Some(u64::from(*v)),
            V::U32(v) => Some(u64::from(*v)),
            V::I8(v) => u64::try_from(*v).ok(),
            V::I16(v) => u64::try_from(*v).ok(),
            V::I32(v) => u64::try_from(*v).ok(),
            // candle would silently use 32 instead.
            _ => None,
        };
        if !alignment.is_some_and(u64::is_power_of_two) {
            return Err(invalid(
                path,
                format!("`general.alignment` = {value:?} is not a power of two"),
            ));
        }
    }
    if content.tensor_data_offset > file_size {
        return Err(invalid(
            path,
            format!(
                "the tensor data would start at byte {}, past the end of the {file_size}-byte file",
                content.tensor_data_offset
            ),
        ));
    }
    for (name, info) in &content.tensor_infos {
        let dims = info.shape.dims();
        let elements = dims
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(d))
            .ok_or_else(|| {
                invalid(
                    path,
                    format!("tensor `{name}` has absurd dimensions {dims:?}"),
                )
            })?;
        // candle views a tensor's bytes as a slice of its element type; for an empty tensor
        // that slice starts at a dangling, misaligned pointer, which aborts the process.
        if elements == 0 {
            return Err(invalid(
                path,
                format!("tensor `{name}` has an empty dimension {dims:?}"),
            ));
        }
        let block = info.ggml_dtype.block_size();
        if block == 0 || !elements.is_multiple_of(block) {
            return Err(invalid(
                path,
                format!(
                    "tensor `{name}` has {elements} elements, not a whole number of {:?} blocks",
                    info.ggml_dtype
                ),
            ));
        }
        let bytes = (elements / block)
            .checked_mul(info.ggml_dtype.type_size())
            .and_then(|b| u64::try_from(b).ok());
        let end = bytes.and_then(|b| {
            content
                .tensor_data_offset
                .checked_add(info.offset)
                .and_then(|start| start.checked_add(b))
        });
        match end {
            Some(end) if end <= file_size => {}
            _ => {
                return Err(invalid(
                    path,
                    format!(
                        "tensor `{name}` ({dims:?}, {:?}) at offset {} runs past the end of the {file_size}-byte file",
                        info.ggml_dtype, info.offset
                    ),
                ));
            }
        }
    }
    Ok(())
}
