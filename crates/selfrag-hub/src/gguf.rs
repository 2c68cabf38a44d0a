//! The one fact the store reads from a GGUF file: its `general.architecture`, found in the
//! header's key–value table without candle (this crate links no inference code). Every length is
//! checked against the bytes the file has left, so a truncated or hostile header is an error,
//! never a huge allocation; the full header check (tensor shapes and offsets) is the loader's,
//! in selfrag-models.

use std::io::{Read, Seek, SeekFrom};

/// The types of GGUF values (the `gguf_type` enum of the format).
#[derive(Clone, Copy)]
enum ValueType {
    Fixed(u64),
    String,
    Array,
}

impl ValueType {
    fn from_code(code: u32) -> Result<Self, String> {
        Ok(match code {
            0 | 1 | 7 => Self::Fixed(1), // u8, i8, bool
            2 | 3 => Self::Fixed(2),     // u16, i16
            4..=6 => Self::Fixed(4),     // u32, i32, f32
            10..=12 => Self::Fixed(8),   // u64, i64, f64
            8 => Self::String,
            9 => Self::Array,
            other => return Err(format!("a value of unknown type {other}")),
        })
    }
}

/// Nested arrays deeper than this are refused (the format has no use for more than one level).
const MAX_ARRAY_DEPTH: u32 = 4;

/// The longest key or `general.architecture` value read into memory: real ones are a few dozen
/// bytes, and a damaged length must not read gigabytes of a multi-gigabyte file. Other values are
/// skipped, never read.
const MAX_STRING: u64 = 1 << 20;

/// A reader that knows how many bytes of the file are left after its position.
struct Header<'r, R> {
    reader: &'r mut R,
    left: u64,
}

impl<R: Read + Seek> Header<'_, R> {
    fn bytes<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let mut buf = [0u8; N];
        self.take(N as u64)?;
        self.reader
            .read_exact(&mut buf)
            .map_err(|e| format!("the header cannot be read ({e})"))?;
        Ok(buf)
    }

    fn u32(&mut self) -> Result<u32, String> {
        self.bytes::<4>().map(u32::from_le_bytes)
    }

    fn u64(&mut self) -> Result<u64, String> {
        self.bytes::<8>().map(u64::from_le_bytes)
    }

    /// Accounts for `n` more bytes, refusing to run past the end of the file.
    fn take(&mut self, n: u64) -> Result<(), String> {
        self.left = self.left.checked_sub(n).ok_or_else(|| {
            "the header runs past the end of the file (it is truncated or corrupt)".to_owned()
        })?;
        Ok(())
    }

    fn skip(&mut self, n: u64) -> Result<(), String> {
        self.take(n)?;
        let n = i64::try_from(n).map_err(|_| "a header length is absurd".to_owned())?;
        self.reader
            .seek(SeekFrom::Current(n))
            .map(drop)
            .map_err(|e| format!("the header cannot be read ({e})"))
    }

    fn string(&mut self) -> Result<String, String> {
        let len = self.u64()?;
        if len > MAX_STRING {
            return Err(format!(
                "a header string claims {len} bytes, more than the {MAX_STRING} a key or the architecture may hold"
            ));
        }
        self.take(len)?;
        let mut buf = Vec::new();
        (&mut *self.reader)
            .take(len)
            .read_to_end(&mut buf)
            .map_err(|e| format!("the header cannot be read ({e})"))?;
        String::from_utf8(buf).map_err(|_| "a header string is not UTF-8".to_owned())
    }

    fn skip_value(&mut self, kind: ValueType, depth: u32) -> Result<(), String> {
        match kind {
            ValueType::Fixed(size) => self.skip(size),
            ValueType::String => {
                let len = self.u64()?;
                self.skip(len)
            }
            ValueType::Array => {
                if depth >= MAX_ARRAY_DEPTH {
                    return Err("arrays are nested too deeply".to_owned());
                }
                let element = ValueType::from_code(self.u32()?)?;
                let count = self.u64()?;
                match element {
                    ValueType::Fixed(size) => self.skip(
                        count
                            .checked_mul(size)
                            .ok_or_else(|| "an array length is absurd".to_owned())?,
                    ),
                    _ => (0..count).try_for_each(|_| self.skip_value(element, depth + 1)),
                }
            }
        }
    }
}

/// `general.architecture` of the GGUF file read by `reader` (at its start); `Ok(None)` when the
/// header has no such key, `Err` with the reason when it is not a readable GGUF header.
pub(crate) fn architecture<R: Read + Seek>(reader: &mut R) -> Result<Option<String>, String> {
    let file_size = reader
        .seek(SeekFrom::End(0))
        .and_then(|size| reader.rewind().map(|()| size))
        .map_err(|e| format!("the file cannot be read ({e})"))?;
    let mut header = Header {
        reader,
        left: file_size,
    };
    if &header.bytes::<4>()? != b"GGUF" {
        return Err("it does not start with the GGUF magic bytes".to_owned());
    }
    match header.u32()? {
        2 | 3 => {}
        1 => return Err("it is GGUF version 1, which llama.cpp dropped in 2023".to_owned()),
        other => return Err(format!("GGUF version {other} is unknown")),
    }
    let _tensors = header.u64()?;
    let entries = header.u64()?;
    for _ in 0..entries {
        let key = header.string()?;
        let kind = ValueType::from_code(header.u32()?)?;
        if key == "general.architecture" {
            return match kind {
                ValueType::String => header.string().map(Some),
                _ => Err("`general.architecture` is not a string".to_owned()),
            };
        }
        header.skip_value(kind, 0)?;
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::io::Cursor;

    use super::architecture;

    fn string(s: &str) -> Vec<u8> {
        let mut out = (s.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(s.as_bytes());
        out
    }

    /// A GGUF v3 header with a `u32` array entry and a string array entry before
    /// `general.architecture`.
    fn header(architecture: &str) -> Vec<u8> {
        let mut out = b"GGUF".to_vec();
        out.extend(3u32.to_le_bytes());
        out.extend(0u64.to_le_bytes());
        out.extend(3u64.to_le_bytes());
        out.extend(string("a.ints"));
        out.extend(9u32.to_le_bytes());
        out.extend(4u32.to_le_bytes());
        out.extend(2u64.to_le_bytes());
        out.extend([1, 0, 0, 0, 2, 0, 0, 0]);
        out.extend(string("a.strings"));
        out.extend(9u32.to_le_bytes());
        out.extend(8u32.to_le_bytes());
        out.extend(2u64.to_le_bytes());
        out.extend(string("x"));
        out.extend(string("yz"));
        out.extend(string("general.architecture"));
        out.extend(8u32.to_le_bytes());
        out.extend(string(architecture));
        out
    }

    #[test]
    fn finds_the_architecture_after_arrays() {
        let found = architecture(&mut Cursor::new(header("llama"))).unwrap();
        assert_eq!(found.as_deref(), Some("llama"));
    }

    #[test]
    fn every_truncation_is_an_error_not_a_panic() {
        let full = header("llama");
        for len in 0..full.len() {
            assert!(
                architecture(&mut Cursor::new(full[..len].to_vec())).is_err(),
                "{len}"
            );
        }
    }

    #[test]
    fn an_absurd_length_is_refused_without_allocating() {
        let mut bytes = b"GGUF".to_vec();
        bytes.extend(3u32.to_le_bytes());
        bytes.extend(0u64.to_le_bytes());
        bytes.extend(1u64.to_le_bytes());
        // Within the cap on strings, but longer than what the file has left.
        bytes.extend(1000u64.to_le_bytes());
        let err = architecture(&mut Cursor::new(bytes)).unwrap_err();
        assert!(err.contains("past the end"), "{err}");
        // And an array of u64 counted past the end of the file, skipped without allocating.
        let mut bytes = b"GGUF".to_vec();
        bytes.extend(3u32.to_le_bytes());
        bytes.extend(0u64.to_le_bytes());
        bytes.extend(1u64.to_le_bytes());
        bytes.extend(1u64.to_le_bytes());
        bytes.push(b'k');
        bytes.extend(9u32.to_le_bytes());
        bytes.extend(10u32.to_le_bytes());
        bytes.extend(u64::MAX.to_le_bytes());
        let err = architecture(&mut Cursor::new(bytes)).unwrap_err();
        assert!(
            err.contains("absurd") || err.contains("past the end"),
            "{err}"
        );
    }

    #[test]
    fn a_key_longer_than_any_real_one_is_refused_before_it_is_read() {
        let mut bytes = b"GGUF".to_vec();
        bytes.extend(3u32.to_le_bytes());
        bytes.extend(0u64.to_le_bytes());
        bytes.extend(1u64.to_le_bytes());
        bytes.extend((super::MAX_STRING + 1).to_le_bytes());
        bytes.resize(bytes.len() + 2 * (1 << 20), b'k');
        let err = architecture(&mut Cursor::new(bytes)).unwrap_err();
        assert!(err.contains("claims"), "{err}");
    }

    #[test]
    fn not_gguf_is_said() {
        let err = architecture(&mut Cursor::new(b"PK\x03\x04....".to_vec())).unwrap_err();
        assert!(err.contains("magic"), "{err}");
    }
}
