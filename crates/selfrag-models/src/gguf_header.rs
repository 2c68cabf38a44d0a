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
        .map_err(|e| match unknown_tensor_type(reader, file_size) {
            Some((name, type_id)) => ModelError::UnsupportedModelFeature {
                path: path.to_owned(),
                feature: format!(
                    "weights of type {} (tensor `{name}`); quantize the model to Q4_K_M, \
                     Q5_K_M, Q4_0, Q4_1, Q5_0, Q5_1, Q6_K or Q8_0 instead",
                    ggml_type_name(type_id)
                ),
            },
            None => invalid(path, e.to_string()),
        })?;
    check_tensors(&content, file_size, path)?;
    Ok(content)
}

/// llama.cpp's name of ggml type `id` (ggml.h), for the types candle 0.11 cannot read.
fn ggml_type_name(id: u32) -> String {
    let name = match id {
        16 => "IQ2_XXS",
        17 => "IQ2_XS",
        18 => "IQ3_XXS",
        19 => "IQ1_S",
        20 => "IQ4_NL",
        21 => "IQ3_S",
        22 => "IQ2_S",
        23 => "IQ4_XS",
        24 => "I8",
        25 => "I16",
        26 => "I32",
        27 => "I64",
        28 => "F64",
        29 => "IQ1_M",
        31..=33 => "Q4_0_4_4/Q4_0_4_8/Q4_0_8_8 (a repacked Q4_0 no longer written)",
        34 => "TQ1_0",
        35 => "TQ2_0",
        39 => "MXFP4",
        40 => "NVFP4",
        41 => "Q1_0",
        42 => "Q2_0",
        _ => return format!("ggml type {id}"),
    };
    format!("{name} (ggml type {id})")
}

/// The first tensor of the GGUF in `reader` whose type candle does not know, and that type's
/// id: read again from the start when candle's reader has stopped at it, so that the person
/// learns which weights the file has rather than that it is damaged. `None` when the header
/// does not parse this far or every type is known. Lengths are bounded by the file's size.
fn unknown_tensor_type<R: Read + Seek>(reader: &mut R, file_size: u64) -> Option<(String, u32)> {
    reader.rewind().ok()?;
    let mut scan = HeaderScan {
        reader: std::io::BufReader::new(reader),
        file_size,
    };
    if scan.u32()? != 0x4655_4747 || scan.u32()? < 2 {
        return None;
    }
    let tensor_count = scan.count()?;
    for _ in 0..scan.count()? {
        scan.string()?;
        match scan.u32()? {
            8 => scan.skip_string()?,
            9 => {
                let item_type = scan.u32()?;
                for _ in 0..scan.count()? {
                    scan.skip_value(item_type)?;
                }
            }
            value_type => scan.skip_value(value_type)?,
        }
    }
    for _ in 0..tensor_count {
        let name = scan.string()?;
        let dims = scan.u32().filter(|&n| n <= 8)?;
        scan.skip(8 * dims as usize)?;
        let type_id = scan.u32()?;
        scan.skip(8)?;
        // F32, F16, Q4_0..Q8_K (4 and 5 were removed from ggml), BF16: candle reads these.
        if !matches!(type_id, 0..=3 | 6..=15 | 30) {
            return Some((name, type_id));
        }
    }
    None
}

/// A plain reading of a GGUF header's fields (little-endian), with every count and length
/// bounded by the file's size.
struct HeaderScan<R> {
    reader: std::io::BufReader<R>,
    file_size: u64,
}

impl<R: Read> HeaderScan<R> {
    fn bytes<const N: usize>(&mut self) -> Option<[u8; N]> {
        let mut buf = [0u8; N];
        self.reader.read_exact(&mut buf).ok().map(|()| buf)
    }

    fn u32(&mut self) -> Option<u32> {
        self.bytes().map(u32::from_le_bytes)
    }

    /// A count or length: a u64 no larger than the file.
    fn count(&mut self) -> Option<u64> {
        self.bytes()
            .map(u64::from_le_bytes)
            .filter(|&n| n <= self.file_size)
    }

    fn skip(&mut self, n: usize) -> Option<()> {
        let n = u64::try_from(n).ok()?;
        let skipped = std::io::copy(&mut (&mut self.reader).take(n), &mut std::io::sink()).ok()?;
        (skipped == n).then_some(())
    }

    fn string(&mut self) -> Option<String> {
        let len = usize::try_from(self.count()?).ok()?;
        let mut buf = vec![0u8; len];
        self.reader.read_exact(&mut buf).ok()?;
        String::from_utf8(buf).ok()
    }

    fn skip_string(&mut self) -> Option<()> {
        let len = usize::try_from(self.count()?).ok()?;
        self.skip(len)
    }

    /// Skips a value of GGUF type `value_type` inside an array (a scalar or a string).
    fn skip_value(&mut self, value_type: u32) -> Option<()> {
        match value_type {
            0 | 1 | 7 => self.skip(1),
            2 | 3 => self.skip(2),
            4..=6 => self.skip(4),
            10..=12 => self.skip(8),
            8 => self.skip_string(),
            _ => None,
        }
    }
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
