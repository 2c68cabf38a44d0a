//! GGUF weights read in place. On the CPU the generator's quantized matrices are slices of a
//! read-only memory map of the model file instead of copies on the heap.
//!
//! Why: on the CPU every quantized matrix is repacked into SIMD tiles at load, by
//! [`crate::packed`] (Q4_K and Q6_K on AVX-512 VNNI CPUs) or by candle on first use (Q8_0 there,
//! and more types on NEON), and the packed copy is what multiplies. Read into the heap, a model
//! would hold the file's blocks next to the tiles. Mapped, each matrix is packed at load
//! ([`crate::llama`]) and its blocks are handed back to the kernel ([`MappedGguf::release`]):
//! they stay in the file and the page cache, and a later read of them (a path nothing packs)
//! simply faults them in again. Memory is then the tiles, not the tiles plus a copy of the file.
//!
//! The embedder's safetensors file is mapped here too ([`map_weights`]): its tensors are copied
//! out of the map as they load, where reading the file first copied all of it into fresh heap
//! pages (440 MB for a BERT-base model, about a fifth of an answer's page faults); all but its
//! word table, whose rows are read from the map as tokens are embedded ([`MappedTable`]).
//!
//! This is one of the workspace's five `unsafe` modules (`mapped`, `packed`, `int8`, `strided`,
//! `cache_lines`); here: mapping a file, viewing its bytes as candle's block structs, and
//! `madvise(MADV_DONTNEED)`. Each block says why it is sound.
#![allow(unsafe_code)]

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use candle_core::quantized::gguf_file::{Content, TensorInfo};
use candle_core::quantized::k_quants::{self, GgmlType};
use candle_core::quantized::{GgmlDType, QStorage, QTensor, QuantizedType};
use candle_core::{CpuStorage, Result};
use memmap2::Mmap;

/// The weights file at `path` (an embedder's `model.safetensors`) mapped read-only: read while
/// the model loads, and its word table for as long as the model lives ([`MappedTable`]).
pub(crate) fn map_weights(path: &Path) -> std::io::Result<Mmap> {
    let file = File::open(path)?;
    // SAFETY: the map is only read. As for the GGUF below, it is unsound only if another
    // process truncates or rewrites the file while it is mapped; model directories are written
    // once by the downloader (to a temporary name, then renamed).
    unsafe { Mmap::map(&file) }
}

/// Drops the pages of the weights file `map` that are resident in this process: once an
/// embedder has loaded, only its word table is read from the map ([`MappedTable`]), a few rows
/// at a time, and every other page it touched while loading would otherwise count as its
/// memory for as long as the map lives. A no-op where the OS has no such advice (Windows).
#[cfg(unix)]
pub(crate) fn release_pages(map: &Mmap) {
    // SAFETY: the map is a read-only shared mapping of a file, so MADV_DONTNEED only drops
    // resident pages; the next read of any byte faults the same file contents in again. No
    // `&mut` into the map exists, and every `&[u8]` into it stays valid.
    let advised = unsafe { map.unchecked_advise(memmap2::UncheckedAdvice::DontNeed) };
    if let Err(e) = advised {
        tracing::debug!(error = %e, "madvise(DONTNEED) on a weights file failed");
    }
}

#[cfg(not(unix))]
pub(crate) fn release_pages(_map: &Mmap) {}

/// How a [`MappedTable`]'s values are stored in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TableValues {
    F32,
    F16,
    Bf16,
}

impl TableValues {
    fn bytes(self) -> usize {
        match self {
            Self::F32 => 4,
            Self::F16 | Self::Bf16 => 2,
        }
    }
}

/// A `rows × cols` table of a mapped safetensors file, read a row at a time where it lies: an
/// embedder's word embeddings, of which a text reads only its tokens' rows. Copied out at load
/// like the other weights, a BERT-base's table was 94 MB of the process's own memory for the
/// rest of its life; here only the pages of rows read are in memory, and they are the file's
/// (the system drops them under pressure and reads them again when needed).
pub(crate) struct MappedTable {
    map: Arc<Mmap>,
    /// Where the table's bytes start in the map.
    start: usize,
    rows: usize,
    cols: usize,
    values: TableValues,
}

impl std::fmt::Debug for MappedTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedTable")
            .field("rows", &self.rows)
            .field("cols", &self.cols)
            .field("values", &self.values)
            .finish_non_exhaustive()
    }
}

impl MappedTable {
    /// The tensor `name` of the safetensors file `map`, a `[rows, cols]` table of f32, f16 or
    /// bf16 values; `Ok(None)` where the file has no such tensor, an error where the file's
    /// header is not safetensors' or the table is of another shape or type.
    pub(crate) fn find(map: Arc<Mmap>, name: &str, cols: usize) -> Result<Option<Self>> {
        let tensors = safetensors::SafeTensors::deserialize(&map)
            .map_err(|e| candle_core::Error::Msg(format!("not a safetensors file: {e}")))?;
        let Ok(view) = tensors.tensor(name) else {
            return Ok(None);
        };
        let values = match view.dtype() {
            safetensors::Dtype::F32 => TableValues::F32,
            safetensors::Dtype::F16 => TableValues::F16,
            safetensors::Dtype::BF16 => TableValues::Bf16,
            other => candle_core::bail!("`{name}` holds {other:?} values, not f32, f16 or bf16"),
        };
        let rows = match *view.shape() {
            [rows, c] if c == cols => rows,
            ref other => candle_core::bail!("`{name}` has shape {other:?}, expected [_, {cols}]"),
        };
        // The view's bytes are the map's (`deserialize` borrows them): their place in it.
        let start = (view.data().as_ptr() as usize).wrapping_sub(map.as_ptr() as usize);
        if view.data().len() != rows * cols * values.bytes()
            || start
                .checked_add(view.data().len())
                .is_none_or(|end| end > map.len())
        {
            candle_core::bail!("`{name}` does not lie within its file");
        }
        drop(tensors);
        Ok(Some(Self {
            map,
            start,
            rows,
            cols,
            values,
        }))
    }

    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    /// Values of a row.
    pub(crate) fn cols(&self) -> usize {
        self.cols
    }

    /// The rows `ids`, in order, as f32 values (`ids.len() × cols`); an error names the first
    /// id past the table.
    pub(crate) fn rows_of(&self, ids: &[u32]) -> Result<Vec<f32>> {
        let row_bytes = self.cols * self.values.bytes();
        let mut out = Vec::with_capacity(ids.len() * self.cols);
        for &id in ids {
            let row = usize::try_from(id).unwrap_or(usize::MAX);
            if row >= self.rows {
                candle_core::bail!("token id {id} is past the table's {} rows", self.rows);
            }
            let bytes = &self.map[self.start + row * row_bytes..][..row_bytes];
            match self.values {
                TableValues::F32 => out.extend(
                    bytes
                        .chunks_exact(4)
                        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
                ),
                TableValues::F16 => out.extend(
                    bytes
                        .chunks_exact(2)
                        .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32()),
                ),
                TableValues::Bf16 => out.extend(
                    bytes
                        .chunks_exact(2)
                        .map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32()),
                ),
            }
        }
        Ok(out)
    }
}

/// A GGUF file mapped read-only, and where its tensor data starts.
#[derive(Clone)]
pub struct MappedGguf {
    map: Arc<Mmap>,
    tensor_data_offset: u64,
}

impl MappedGguf {
    /// Maps `file` (the GGUF at `path`, whose header is `content`).
    pub fn open(file: &File, path: &Path, content: &Content) -> std::io::Result<Self> {
        // SAFETY: the map is only read. Mapping is unsound only if another process truncates
        // or rewrites the model file while it is mapped; model files are written once by the
        // downloader (to a temporary name, then renamed), never in place, as llama.cpp and
        // candle's own safetensors loader also assume.
        let map = unsafe { Mmap::map(file)? };
        tracing::debug!(path = %path.display(), bytes = map.len(), "mapped the GGUF file");
        Ok(Self {
            map: Arc::new(map),
            tensor_data_offset: content.tensor_data_offset,
        })
    }

    /// Tensor `info` as a CPU tensor backed by the map, or `None` for a type that is read into
    /// memory instead (floats: small norms, or unquantized models that candle never repacks).
    pub(crate) fn tensor(&self, info: &TensorInfo) -> Result<Option<QTensor>> {
        let dims = info.shape.dims().to_vec();
        let storage: Box<dyn QuantizedType> = match info.ggml_dtype {
            GgmlDType::Q4_0 => Box::new(self.blocks::<k_quants::BlockQ4_0>(info)?),
            GgmlDType::Q4_1 => Box::new(self.blocks::<k_quants::BlockQ4_1>(info)?),
            GgmlDType::Q5_0 => Box::new(self.blocks::<k_quants::BlockQ5_0>(info)?),
            GgmlDType::Q5_1 => Box::new(self.blocks::<k_quants::BlockQ5_1>(info)?),
            GgmlDType::Q8_0 => Box::new(self.blocks::<k_quants::BlockQ8_0>(info)?),
            GgmlDType::Q2K => Box::new(self.blocks::<k_quants::BlockQ2K>(info)?),
            GgmlDType::Q3K => Box::new(self.blocks::<k_quants::BlockQ3K>(info)?),
            GgmlDType::Q4K => Box::new(self.blocks::<k_quants::BlockQ4K>(info)?),
            GgmlDType::Q5K => Box::new(self.blocks::<k_quants::BlockQ5K>(info)?),
            GgmlDType::Q6K => Box::new(self.blocks::<k_quants::BlockQ6K>(info)?),
            _ => return Ok(None),
        };
        QTensor::new(QStorage::Cpu(storage), dims).map(Some)
    }

    /// The byte range of tensor `info` in the file, checked against the file's length.
    fn range(&self, info: &TensorInfo) -> Result<(usize, usize)> {
        let elements = info.shape.elem_count();
        let block = info.ggml_dtype.block_size();
        if block == 0 || !elements.is_multiple_of(block) {
            candle_core::bail!("{elements} elements are not whole blocks of {block}");
        }
        let bytes = elements / block * info.ggml_dtype.type_size();
        let start = self.tensor_data_offset.saturating_add(info.offset);
        let end = start.saturating_add(bytes as u64);
        if end > self.map.len() as u64 {
            candle_core::bail!(
                "the tensor needs bytes {start}..{end} but the file has {}",
                self.map.len()
            );
        }
        Ok((start as usize, bytes))
    }

    fn blocks<T: GgmlType>(&self, info: &TensorInfo) -> Result<Blocks<T>> {
        let (start, bytes) = self.range(info)?;
        let size = std::mem::size_of::<T>();
        if size == 0 || bytes % size != 0 || start % std::mem::align_of::<T>() != 0 {
            candle_core::bail!(
                "the tensor at byte {start} is not aligned for {:?} blocks",
                T::DTYPE
            );
        }
        Ok(Blocks {
            mapped: Some((self.map.clone(), start)),
            count: bytes / size,
            owned: Vec::new(),
        })
    }

    /// Hands the pages of tensor `info` back to the kernel: they leave this process's memory and
    /// are read from the file again if anything reads them. Called once a matrix is packed.
    /// A no-op where the OS has no such advice (Windows).
    #[cfg(unix)]
    pub(crate) fn release(&self, info: &TensorInfo) {
        let Ok((start, bytes)) = self.range(info) else {
            return;
        };
        // Whole pages inside the tensor only (16 KiB, the largest page size of the platforms
        // built for): a page it shares with a neighbour stays.
        let page = 16 << 10;
        let first = start.div_ceil(page) * page;
        let last = (start + bytes) / page * page;
        if last <= first {
            return;
        }
        // SAFETY: the map is a read-only shared mapping of a file, so MADV_DONTNEED only drops
        // resident pages; the next read of any byte faults the same file contents in again. No
        // `&mut` into the map exists, and every `&[T]` into it stays valid.
        let advised = unsafe {
            self.map
                .unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, first, last - first)
        };
        if let Err(e) = advised {
            tracing::debug!(error = %e, "madvise(DONTNEED) on a packed tensor failed");
        }
    }

    #[cfg(not(unix))]
    pub(crate) fn release(&self, _info: &TensorInfo) {}
}

/// A quantized tensor's blocks: in the map, or owned once candle overwrites them
/// (`from_float`, which loading never calls).
struct Blocks<T> {
    mapped: Option<(Arc<Mmap>, usize)>,
    count: usize,
    owned: Vec<T>,
}

impl<T: GgmlType> Blocks<T> {
    fn as_slice(&self) -> &[T] {
        match &self.mapped {
            Some((map, start)) => {
                let bytes = &map[*start..*start + self.count * std::mem::size_of::<T>()];
                // SAFETY: `blocks` checked that the range lies in the map, is a whole number of
                // `T`s and is aligned for `T`; candle's block types are `repr(C)` structs of
                // integers and f16s, valid for every bit pattern, exactly as candle itself
                // reinterprets the bytes it reads from a GGUF file.
                unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<T>(), self.count) }
            }
            None => &self.owned,
        }
    }

    fn make_owned(&mut self) -> &mut Vec<T> {
        if self.mapped.is_some() {
            self.owned = self.as_slice().to_vec();
            self.mapped = None;
        }
        &mut self.owned
    }
}

impl<T: GgmlType> QuantizedType for Blocks<T> {
    fn dtype(&self) -> GgmlDType {
        T::DTYPE
    }

    fn matmul_t(&self, mkn: (usize, usize, usize), lhs: &[f32], dst: &mut [f32]) -> Result<()> {
        k_quants::matmul(mkn, lhs, self.as_slice(), dst)
    }

    fn matmul_t_f16(
        &self,
        mkn: (usize, usize, usize),
        lhs: &[half::f16],
        dst: &mut [half::f16],
    ) -> Result<()> {
        k_quants::matmul_f16(mkn, lhs, self.as_slice(), dst)
    }

    fn embedding(&self, ids: &[u32], rows: usize, hidden: usize) -> Result<CpuStorage> {
        let blocks = self.as_slice();
        if !hidden.is_multiple_of(T::BLCK_SIZE) || blocks.len() != rows * (hidden / T::BLCK_SIZE) {
            candle_core::bail!(
                "{} blocks of {} are not {rows} rows of {hidden}",
                blocks.len(),
                T::BLCK_SIZE
            );
        }
        let per_row = hidden / T::BLCK_SIZE;
        let mut out = vec![0f32; ids.len() * hidden];
        for (dst, &id) in out.chunks_exact_mut(hidden).zip(ids) {
            let row = id as usize;
            if row >= rows {
                candle_core::bail!("embedding id {row} is out of range for {rows} rows");
            }
            T::to_float(&blocks[row * per_row..(row + 1) * per_row], dst);
        }
        Ok(CpuStorage::F32(out))
    }

    fn dequantize(&self, elem_count: usize) -> Result<CpuStorage> {
        let mut out = vec![0f32; elem_count];
        T::to_float(self.as_slice(), &mut out);
        Ok(CpuStorage::F32(out))
    }

    fn storage_size_in_bytes(&self) -> usize {
        std::mem::size_of_val(self.as_slice())
    }

    fn as_ptr(&self) -> *const u8 {
        self.as_slice().as_ptr().cast()
    }

    fn block_size(&self) -> usize {
        T::BLCK_SIZE
    }

    fn from_float(&mut self, xs: &[f32]) {
        T::from_float(xs, self.make_owned())
    }

    fn from_float_imatrix(&mut self, xs: &[f32], imatrix_weights: &[f32], n_per_row: usize) {
        T::from_float_imatrix(xs, self.make_owned(), imatrix_weights, n_per_row)
    }

    fn size(&self) -> usize {
        self.storage_size_in_bytes()
    }
}

/// The bytes of a quantized tensor (`QTensor::data`, borrowed from its storage) seen as its
/// blocks of `T`, or `None` where they are not a whole number of blocks aligned for `T`.
/// Lets [`crate::llama`] multiply Q8_0 weights with candle's plain kernel, which candle's
/// `QMatMul` would not choose.
pub(crate) fn as_blocks<T: GgmlType>(bytes: &[u8]) -> Option<&[T]> {
    let size = std::mem::size_of::<T>();
    if size == 0
        || !bytes.len().is_multiple_of(size)
        || !(bytes.as_ptr() as usize).is_multiple_of(std::mem::align_of::<T>())
    {
        return None;
    }
    // SAFETY: the range is `bytes` itself, a whole number of `T`s, aligned for `T` (checked
    // above); candle's block types are `repr(C)` structs of integers and f16s, valid for every
    // bit pattern, exactly as candle itself reinterprets the bytes it reads from a GGUF file.
    Some(unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<T>(), bytes.len() / size) })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A safetensors file holding `tensors` (name, type, shape, little-endian bytes), mapped.
    fn mapped_file(
        dir: &Path,
        tensors: &[(&str, safetensors::Dtype, Vec<usize>, Vec<u8>)],
    ) -> Arc<Mmap> {
        let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = tensors
            .iter()
            .map(|(name, dtype, shape, bytes)| {
                let view = safetensors::tensor::TensorView::new(*dtype, shape.clone(), bytes);
                ((*name).to_owned(), view.unwrap())
            })
            .collect();
        let path = dir.join("model.safetensors");
        safetensors::tensor::serialize_to_file(views, None, &path).unwrap();
        Arc::new(map_weights(&path).unwrap())
    }

    #[test]
    fn a_mapped_table_reads_the_rows_asked_for_and_refuses_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let values: Vec<f32> = (0..12).map(|i| i as f32 * 0.5 - 1.0).collect();
        let f32_bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let f16_bytes: Vec<u8> = values
            .iter()
            .flat_map(|&v| half::f16::from_f32(v).to_le_bytes())
            .collect();
        let bf16_bytes: Vec<u8> = values
            .iter()
            .flat_map(|&v| half::bf16::from_f32(v).to_le_bytes())
            .collect();
        let map = mapped_file(
            dir.path(),
            &[
                ("other", safetensors::Dtype::F32, vec![2], vec![0; 8]),
                ("words", safetensors::Dtype::F32, vec![4, 3], f32_bytes),
                ("half", safetensors::Dtype::F16, vec![4, 3], f16_bytes),
                ("brain", safetensors::Dtype::BF16, vec![4, 3], bf16_bytes),
                ("ids", safetensors::Dtype::I64, vec![4, 3], vec![0; 96]),
            ],
        );
        // Every value is exact in all three types (halves from -1 to 4.5).
        for name in ["words", "half", "brain"] {
            let table = MappedTable::find(map.clone(), name, 3).unwrap().unwrap();
            assert_eq!((table.rows(), table.cols()), (4, 3));
            let rows = table.rows_of(&[2, 0, 2]).unwrap();
            let expected: Vec<f32> = [2, 0, 2]
                .iter()
                .flat_map(|&r| values[r * 3..r * 3 + 3].to_vec())
                .collect();
            assert_eq!(rows, expected, "{name}");
            let past = table.rows_of(&[1, 4]).unwrap_err().to_string();
            assert!(past.contains("token id 4"), "{past}");
        }
        assert!(MappedTable::find(map.clone(), "none", 3).unwrap().is_none());
        assert!(MappedTable::find(map.clone(), "words", 4).is_err(), "shape");
        assert!(MappedTable::find(map.clone(), "ids", 3).is_err(), "type");
        release_pages(&map);
        let table = MappedTable::find(map, "words", 3).unwrap().unwrap();
        assert_eq!(
            table.rows_of(&[3]).unwrap(),
            values[9..].to_vec(),
            "read again"
        );
    }
}
