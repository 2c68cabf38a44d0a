//! How much a PDF stream decodes to, measured without holding it: its filters (Flate, LZW,
//! ASCII85, ASCIIHex, RunLength) are run as a chain of readers whose output is counted and
//! dropped, up to a cap. Every prefix of a chain is measured, because lopdf holds each stage's
//! output whole before the next: `[/FlateDecode /FlateDecode]` is a bomb in its first stage or
//! its second, `[/ASCII85Decode /FlateDecode]` in its second.
//!
//! Streams that lopdf decodes while it loads a file are measured in the file's bytes, before
//! the load ([`refuse_bombs_before_load`]): object streams (`/Type /ObjStm`), cross-reference
//! streams (`/Type /XRef`), and any stream where a cross-reference section is said to begin.
//! The others are measured after the load, where lopdf has parsed their dictionaries
//! (`pdf::refuse_inflation_bombs`).

use std::io::Read;

use super::MAX_INFLATED_BYTES;
use super::pdf_xref::number_before;

/// One decoding filter of a stream, as lopdf applies it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Filter {
    /// zlib; lopdf reads the deflate data after the two header bytes when the header is
    /// damaged, so it is measured that way whatever the header says.
    Flate,
    /// `EarlyChange` 1 (the default) widens the codes one code early, as TIFF does.
    Lzw {
        early_change: bool,
    },
    Ascii85,
    AsciiHex,
    RunLength,
}

/// The most filters a stream may name: no writer chains more than three, and each stage is
/// decoded in turn.
const MAX_FILTERS: usize = 16;

impl Filter {
    /// The filter called `name` (full or abbreviated), with the stream's `/DecodeParms`
    /// `/EarlyChange`; `None` for one nothing here decodes (images' DCT, JPX, CCITT, JBIG2).
    pub(super) fn named(name: &[u8], early_change: Option<i64>) -> Option<Self> {
        Some(match name {
            b"FlateDecode" | b"Fl" => Self::Flate,
            b"LZWDecode" | b"LZW" => Self::Lzw {
                early_change: early_change != Some(0),
            },
            b"ASCII85Decode" | b"A85" => Self::Ascii85,
            b"ASCIIHexDecode" | b"AHx" => Self::AsciiHex,
            b"RunLengthDecode" | b"RL" => Self::RunLength,
            _ => return None,
        })
    }

    fn reader<'a>(self, input: Box<dyn Read + 'a>) -> Box<dyn Read + 'a> {
        match self {
            Self::Flate => Box::new(flate2::read::DeflateDecoder::new(input.chain_skip(2))),
            Self::Lzw { early_change } => Box::new(LzwReader::new(input, early_change)),
            Self::Ascii85 => Box::new(StepReader::new(input, ascii85_step)),
            Self::AsciiHex => Box::new(StepReader::new(input, ascii_hex_step)),
            Self::RunLength => Box::new(StepReader::new(input, run_length_step)),
        }
    }
}

/// The filters of a stream in decoding order, up to the first that nothing here decodes (lopdf
/// decodes the ones before it, then gives up). `Err` when there are more than [`MAX_FILTERS`].
pub(super) fn chain<'n>(
    names: impl IntoIterator<Item = &'n [u8]>,
    early_change: Option<i64>,
) -> Result<Vec<Filter>, String> {
    let names: Vec<&[u8]> = names.into_iter().collect();
    if names.len() > MAX_FILTERS {
        return Err(format!(
            "it names {} filters for one stream, more than the {MAX_FILTERS} read",
            names.len()
        ));
    }
    Ok(names
        .into_iter()
        .map_while(|name| Filter::named(name, early_change))
        .collect())
}

/// The most bytes any stage of `filters` turns `content` into, counted up to `limit` (a stage
/// that stops on damaged data counts what came out before the damage, as lopdf keeps it).
pub(super) fn decoded_size(content: &[u8], filters: &[Filter], limit: u64) -> u64 {
    let mut largest = 0;
    for stages in 1..=filters.len() {
        let mut reader: Box<dyn Read + '_> = Box::new(content);
        for filter in &filters[..stages] {
            reader = filter.reader(reader);
        }
        largest = largest.max(count(reader, limit));
        if largest >= limit {
            break;
        }
    }
    largest
}

/// Bytes read from `reader` until its end, an error or `limit`.
fn count(mut reader: impl Read, limit: u64) -> u64 {
    let mut buffer = vec![0u8; 64 << 10];
    let mut total = 0u64;
    while total < limit {
        match reader.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => total += n as u64,
        }
    }
    total.min(limit)
}

/// The error for stream `number generation`, which [`decoded_size`] found past `limit` bytes.
pub(super) fn too_large(number: u64, generation: u64, limit: u64) -> String {
    format!(
        "stream {number} {generation} inflates to more than {} MiB (a decompression bomb?)",
        limit >> 20
    )
}

/// Refuses, naming it, a stream that lopdf would decode while loading `bytes` and that decodes
/// past [`MAX_INFLATED_BYTES`] (object and cross-reference streams): found in the raw bytes,
/// because lopdf holds them decoded before anything else could look.
pub(super) fn refuse_bombs_before_load(bytes: &[u8]) -> Result<(), String> {
    refuse_bombs_past(bytes, MAX_INFLATED_BYTES)
}

/// [`refuse_bombs_before_load`] with the limit `limit`.
fn refuse_bombs_past(bytes: &[u8], limit: u64) -> Result<(), String> {
    // lopdf counts offsets from the header, as readers do.
    let file = bytes
        .windows(5)
        .position(|w| w == b"%PDF-")
        .map_or(bytes, |at| &bytes[at..]);
    let sections = cross_reference_offsets(file);
    for header in object_headers(file) {
        let Some(stream) = raw_stream(file, header.body) else {
            continue;
        };
        let typed = |name: &[u8]| matches!(stream.get(b"Type"), Some(Value::Name(n)) if n == name);
        let read_at_load = typed(b"ObjStm") || typed(b"XRef") || sections.contains(&header.at);
        if !read_at_load {
            continue;
        }
        let early_change = match stream.get(b"DecodeParms") {
            Some(Value::Dict(params)) => params.iter().find_map(|(k, v)| match v {
                Value::Int(n) if k == b"EarlyChange" => Some(*n),
                _ => None,
            }),
            _ => None,
        };
        let names: Vec<&[u8]> = match stream.get(b"Filter") {
            Some(Value::Name(name)) => vec![name.as_slice()],
            Some(Value::Array(items)) => {
                let names: Vec<&[u8]> = items
                    .iter()
                    .filter_map(|v| match v {
                        Value::Name(name) => Some(name.as_slice()),
                        _ => None,
                    })
                    .collect();
                // lopdf decodes nothing of a list that holds anything but names.
                if names.len() != items.len() {
                    continue;
                }
                names
            }
            _ => continue,
        };
        let filters = chain(names, early_change)
            .map_err(|e| format!("stream {} {}: {e}", header.number, header.generation))?;
        // The length lopdf takes when the dictionary gives it as a number; else the rest of the
        // file, which decodes to at least as much (every filter here stops at its own end).
        let content = &file[stream.content_at..];
        let content = match stream.get(b"Length") {
            Some(&Value::Int(length)) => usize::try_from(length)
                .ok()
                .and_then(|length| content.get(..length))
                .unwrap_or(content),
            _ => content,
        };
        if decoded_size(content, &filters, limit + 1) > limit {
            return Err(too_large(header.number, header.generation, limit));
        }
    }
    Ok(())
}

/// An `N G obj` in a file's bytes: where `N` begins and where the body after `obj` begins.
struct ObjectHeader {
    number: u64,
    generation: u64,
    at: usize,
    body: usize,
}

/// Every `N G obj`, wherever it stands (lopdf reads objects at the offsets its tables give, not
/// only at line starts). Bytes inside other streams that look like a header are looked at too:
/// measuring one more stream costs time, never a missed bomb.
fn object_headers(file: &[u8]) -> Vec<ObjectHeader> {
    let mut headers = Vec::new();
    let mut from = 0;
    while let Some(found) = find(&file[from..], b"obj") {
        let obj = from + found;
        from = obj + 3;
        if file
            .get(obj + 3)
            .is_some_and(|&b| !is_delimiter_or_space(b))
        {
            continue;
        }
        let Some((generation, before)) = number_before(&file[..obj]) else {
            continue;
        };
        let Some((number, before)) = number_before(before) else {
            continue;
        };
        if before.last().is_some_and(|&b| !is_delimiter_or_space(b)) {
            continue;
        }
        headers.push(ObjectHeader {
            number,
            generation,
            at: before.len(),
            body: obj + 3,
        });
    }
    headers
}

/// Where the cross-reference sections that lopdf reads begin (`startxref`, `/Prev`,
/// `/XRefStm`), each moved past any blanks, as the object there would begin. Every mention in
/// the file counts: a few too many cost nothing.
fn cross_reference_offsets(file: &[u8]) -> std::collections::HashSet<usize> {
    let mut offsets = std::collections::HashSet::new();
    for key in [&b"startxref"[..], b"/Prev", b"/XRefStm"] {
        let mut from = 0;
        while let Some(found) = find(&file[from..], key) {
            from += found + key.len();
            let rest = file[from..].trim_ascii_start();
            let digits = rest
                .iter()
                .take(20)
                .take_while(|b| b.is_ascii_digit())
                .count();
            let offset = std::str::from_utf8(&rest[..digits])
                .ok()
                .and_then(|d| d.parse::<usize>().ok());
            if let Some(offset) = offset.filter(|&o| o < file.len()) {
                let blanks = file[offset..].len() - file[offset..].trim_ascii_start().len();
                offsets.insert(offset + blanks);
            }
        }
    }
    offsets
}

/// A stream object's dictionary and where its data begins.
struct RawStream {
    dict: Vec<(Vec<u8>, Value)>,
    content_at: usize,
}

impl RawStream {
    fn get(&self, key: &[u8]) -> Option<&Value> {
        self.dict.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
}

/// The stream whose object body begins at `body` (just after `obj`): `<< … >>`, `stream`, an
/// end of line, the data. `None` when the object is not a stream.
fn raw_stream(file: &[u8], body: usize) -> Option<RawStream> {
    let mut lexer = Lexer { s: file, at: body };
    lexer.skip_blanks();
    if !file[lexer.at..].starts_with(b"<<") {
        return None;
    }
    let Value::Dict(dict) = lexer.value(0)? else {
        return None;
    };
    lexer.skip_blanks();
    let after = file.get(lexer.at..)?.strip_prefix(b"stream")?;
    let spaces = after
        .iter()
        .take_while(|&&b| b == b' ' || b == b'\t')
        .count();
    let after = &after[spaces..];
    let data = after
        .strip_prefix(b"\r\n")
        .or_else(|| after.strip_prefix(b"\n"))
        .or_else(|| after.strip_prefix(b"\r"))?;
    Some(RawStream {
        dict,
        content_at: file.len() - data.len(),
    })
}

/// A PDF object as far as the filters need it.
#[derive(Debug, PartialEq)]
enum Value {
    Name(Vec<u8>),
    Int(i64),
    Array(Vec<Value>),
    Dict(Vec<(Vec<u8>, Value)>),
    /// A reference, a string, a real number, a keyword.
    Other,
}

/// How deep arrays and dictionaries are read inside a stream's dictionary.
const MAX_DEPTH: usize = 32;

/// Reads PDF objects from raw bytes.
struct Lexer<'a> {
    s: &'a [u8],
    at: usize,
}

impl Lexer<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.at).copied()
    }

    /// Skips white space and comments.
    fn skip_blanks(&mut self) {
        while let Some(b) = self.peek() {
            if b.is_ascii_whitespace() || b == 0 {
                self.at += 1;
            } else if b == b'%' {
                while self.peek().is_some_and(|b| b != b'\n' && b != b'\r') {
                    self.at += 1;
                }
            } else {
                break;
            }
        }
    }

    fn value(&mut self, depth: usize) -> Option<Value> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.skip_blanks();
        let rest = &self.s[self.at..];
        match *rest.first()? {
            b'/' => {
                self.at += 1;
                Some(Value::Name(self.name()))
            }
            b'<' if rest.starts_with(b"<<") => {
                self.at += 2;
                let mut entries = Vec::new();
                loop {
                    self.skip_blanks();
                    if self.s[self.at..].starts_with(b">>") {
                        self.at += 2;
                        return Some(Value::Dict(entries));
                    }
                    let Value::Name(key) = self.value(depth + 1)? else {
                        return None;
                    };
                    let value = self.value(depth + 1)?;
                    entries.push((key, value));
                }
            }
            b'<' => {
                self.at += find(rest, b">")? + 1;
                Some(Value::Other)
            }
            b'[' => {
                self.at += 1;
                let mut items = Vec::new();
                loop {
                    self.skip_blanks();
                    if self.peek()? == b']' {
                        self.at += 1;
                        return Some(Value::Array(items));
                    }
                    items.push(self.value(depth + 1)?);
                }
            }
            b'(' => {
                self.string()?;
                Some(Value::Other)
            }
            b'+' | b'-' | b'.' | b'0'..=b'9' => Some(self.number()),
            b if !is_delimiter_or_space(b) => {
                // true, false, null, R after a number read on its own.
                while self.peek().is_some_and(|b| !is_delimiter_or_space(b)) {
                    self.at += 1;
                }
                Some(Value::Other)
            }
            _ => None,
        }
    }

    /// A name's characters after its `/`, with `#xx` escapes decoded.
    fn name(&mut self) -> Vec<u8> {
        let mut name = Vec::new();
        while let Some(b) = self.peek().filter(|&b| !is_delimiter_or_space(b)) {
            self.at += 1;
            let hex = |b: Option<&u8>| b.and_then(|&b| (b as char).to_digit(16));
            if b == b'#'
                && let (Some(high), Some(low)) =
                    (hex(self.s.get(self.at)), hex(self.s.get(self.at + 1)))
            {
                name.push((high * 16 + low) as u8);
                self.at += 2;
            } else {
                name.push(b);
            }
        }
        name
    }

    /// A literal string, balanced parentheses and escapes skipped.
    fn string(&mut self) -> Option<()> {
        let mut open = 0usize;
        while let Some(b) = self.peek() {
            self.at += 1;
            match b {
                b'\\' => self.at += 1,
                b'(' => open += 1,
                b')' => {
                    open = open.saturating_sub(1);
                    if open == 0 {
                        return Some(());
                    }
                }
                _ => {}
            }
        }
        None
    }

    /// An integer (a reference `N G R` is read as a whole and is [`Value::Other`]), or a real.
    fn number(&mut self) -> Value {
        let start = self.at;
        while self
            .peek()
            .is_some_and(|b| b.is_ascii_digit() || matches!(b, b'+' | b'-' | b'.'))
        {
            self.at += 1;
        }
        let Some(int) = std::str::from_utf8(&self.s[start..self.at])
            .ok()
            .and_then(|t| t.parse::<i64>().ok())
        else {
            return Value::Other;
        };
        // `N G R`: two unsigned integers and an R.
        let after_first = self.at;
        self.skip_blanks();
        let generation = self.at;
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.at += 1;
        }
        if self.at > generation {
            self.skip_blanks();
            if self.peek() == Some(b'R')
                && self
                    .s
                    .get(self.at + 1)
                    .is_none_or(|&b| is_delimiter_or_space(b))
            {
                self.at += 1;
                return Value::Other;
            }
        }
        self.at = after_first;
        Value::Int(int)
    }
}

fn is_delimiter_or_space(b: u8) -> bool {
    b.is_ascii_whitespace() || b == 0 || b"()<>[]{}/%".contains(&b)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Skipping the first bytes of a reader.
trait ChainSkip<'a> {
    /// The reader without its first `n` bytes (fewer if it ends first).
    fn chain_skip(self, n: u64) -> Box<dyn Read + 'a>;
}

impl<'a> ChainSkip<'a> for Box<dyn Read + 'a> {
    fn chain_skip(mut self, n: u64) -> Box<dyn Read + 'a> {
        let _ = std::io::copy(&mut (&mut self).take(n), &mut std::io::sink());
        self
    }
}

/// Moves as much of `pending` as fits into `out`; how much.
fn hand_out(pending: &mut Vec<u8>, out: &mut [u8]) -> usize {
    let n = pending.len().min(out.len());
    out[..n].copy_from_slice(&pending[..n]);
    pending.drain(..n);
    n
}

/// Reads the next byte of `inner`, `None` at its end or an error.
fn next_byte(inner: &mut dyn Read) -> Option<u8> {
    let mut byte = [0u8];
    loop {
        match inner.read(&mut byte) {
            Ok(0) => return None,
            Ok(_) => return Some(byte[0]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
}

/// LZW as lopdf decodes it (weezl, most significant bit first, 8-bit symbols).
struct LzwReader<'a> {
    inner: Box<dyn Read + 'a>,
    decoder: weezl::decode::Decoder,
    input: Vec<u8>,
    /// `input[taken..filled]` is not decoded yet.
    taken: usize,
    filled: usize,
    input_ended: bool,
    done: bool,
}

impl<'a> LzwReader<'a> {
    fn new(inner: Box<dyn Read + 'a>, early_change: bool) -> Self {
        use weezl::{BitOrder, decode::Decoder};
        let decoder = if early_change {
            Decoder::with_tiff_size_switch(BitOrder::Msb, 8)
        } else {
            Decoder::new(BitOrder::Msb, 8)
        };
        Self {
            inner,
            decoder,
            input: vec![0; 16 << 10],
            taken: 0,
            filled: 0,
            input_ended: false,
            done: false,
        }
    }
}

impl Read for LzwReader<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while !self.done && !out.is_empty() {
            if self.taken == self.filled && !self.input_ended {
                self.filled = self.inner.read(&mut self.input).unwrap_or(0);
                self.taken = 0;
                self.input_ended = self.filled == 0;
            }
            let result = self
                .decoder
                .decode_bytes(&self.input[self.taken..self.filled], out);
            self.taken += result.consumed_in;
            match result.status {
                Ok(weezl::LzwStatus::Ok) => {}
                Ok(weezl::LzwStatus::NoProgress) => self.done = self.input_ended,
                Ok(weezl::LzwStatus::Done) | Err(_) => self.done = true,
            }
            if result.consumed_out > 0 {
                return Ok(result.consumed_out);
            }
        }
        Ok(0)
    }
}

/// A filter decoded a step at a time: each step reads from the input it is given and appends
/// to the bytes not handed out yet, and says whether the data has ended.
type DecodeStep = fn(&mut dyn Read, &mut Vec<u8>) -> bool;

/// The reader of a filter that [`DecodeStep`] decodes (ASCII85, ASCIIHex, RunLength).
struct StepReader<'a> {
    inner: Box<dyn Read + 'a>,
    /// Decoded bytes not handed out yet.
    pending: Vec<u8>,
    ended: bool,
    step: DecodeStep,
}

impl<'a> StepReader<'a> {
    fn new(inner: Box<dyn Read + 'a>, step: DecodeStep) -> Self {
        Self {
            inner,
            pending: Vec::new(),
            ended: false,
            step,
        }
    }
}

impl Read for StepReader<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.pending.len() < out.len().min(4096) && !self.ended {
            self.ended = (self.step)(&mut *self.inner, &mut self.pending);
        }
        Ok(hand_out(&mut self.pending, out))
    }
}

/// ASCII85 as lopdf decodes it: `z` is four zero bytes, blanks are skipped, and the first byte
/// outside `!`…`u` (the `~` of `~>` among them) ends the data. One step decodes one group.
fn ascii85_step(inner: &mut dyn Read, pending: &mut Vec<u8>) -> bool {
    let (mut value, mut digits) = (0u32, 0usize);
    while let Some(b) = next_byte(inner) {
        match b {
            b'z' if digits == 0 => {
                pending.extend_from_slice(&[0; 4]);
                return false;
            }
            b if b.is_ascii_whitespace() => {}
            b'!'..=b'u' => {
                value = value.wrapping_mul(85).wrapping_add(u32::from(b - b'!'));
                digits += 1;
                if digits == 5 {
                    pending.extend_from_slice(&value.to_be_bytes());
                    return false;
                }
            }
            _ => break,
        }
    }
    if digits > 1 {
        for _ in digits..5 {
            value = value.wrapping_mul(85).wrapping_add(84);
        }
        pending.extend_from_slice(&value.to_be_bytes()[..digits - 1]);
    }
    true
}

/// ASCIIHex: pairs of hexadecimal digits, blanks skipped, ending at `>` (a last odd digit is
/// followed by 0). One step decodes one byte.
fn ascii_hex_step(inner: &mut dyn Read, pending: &mut Vec<u8>) -> bool {
    let mut high = None;
    while let Some(b) = next_byte(inner) {
        if b.is_ascii_whitespace() {
            continue;
        }
        let Some(digit) = (b as char).to_digit(16) else {
            break;
        };
        match high.take() {
            None => high = Some(digit),
            Some(h) => {
                pending.push((h * 16 + digit) as u8);
                return false;
            }
        }
    }
    if let Some(h) = high {
        pending.push((h * 16) as u8);
    }
    true
}

/// RunLength: a length byte 0–127 copies that many plus one bytes, 129–255 repeats the next
/// byte 257 minus it times, 128 ends the data. One step decodes one run.
fn run_length_step(inner: &mut dyn Read, pending: &mut Vec<u8>) -> bool {
    let Some(length) = next_byte(inner).filter(|&l| l != 128) else {
        return true;
    };
    if length < 128 {
        for _ in 0..=length {
            match next_byte(inner) {
                Some(b) => pending.push(b),
                None => return true,
            }
        }
        false
    } else if let Some(b) = next_byte(inner) {
        pending.extend(std::iter::repeat_n(b, 257 - usize::from(length)));
        false
    } else {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn zlib(bytes: &[u8]) -> Vec<u8> {
        let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        zlib.write_all(bytes).unwrap();
        zlib.finish().unwrap()
    }

    fn raw_deflate(bytes: &[u8]) -> Vec<u8> {
        let mut deflate = flate2::write::DeflateEncoder::new(Vec::new(), Default::default());
        deflate.write_all(bytes).unwrap();
        deflate.finish().unwrap()
    }

    fn lzw(bytes: &[u8], early_change: bool) -> Vec<u8> {
        use weezl::{BitOrder, encode::Encoder};
        let mut encoder = if early_change {
            Encoder::with_tiff_size_switch(BitOrder::Msb, 8)
        } else {
            Encoder::new(BitOrder::Msb, 8)
        };
        encoder.encode(bytes).unwrap()
    }

    fn ascii85(bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        for group in bytes.chunks(4) {
            let mut word = [0u8; 4];
            word[..group.len()].copy_from_slice(group);
            let mut value = u32::from_be_bytes(word);
            if value == 0 && group.len() == 4 {
                out.push(b'z');
                continue;
            }
            let mut digits = [0u8; 5];
            for digit in digits.iter_mut().rev() {
                *digit = b'!' + (value % 85) as u8;
                value /= 85;
            }
            out.extend_from_slice(&digits[..group.len() + 1]);
        }
        out.extend_from_slice(b"~>");
        out
    }

    /// What lopdf, which the text is read with, decodes `content` to through `names`.
    fn lopdf_decoded(content: &[u8], names: &[&str], params: Option<lopdf::Dictionary>) -> usize {
        let mut dict = lopdf::Dictionary::new();
        let names: Vec<lopdf::Object> = names
            .iter()
            .map(|n| lopdf::Object::Name(n.as_bytes().to_vec()))
            .collect();
        dict.set("Filter", lopdf::Object::Array(names));
        if let Some(params) = params {
            dict.set("DecodeParms", lopdf::Object::Dictionary(params));
        }
        lopdf::Stream::new(dict, content.to_vec())
            .decompressed_content()
            .unwrap()
            .len()
    }

    fn measured(content: &[u8], names: &[&str], early_change: Option<i64>) -> u64 {
        let filters = chain(names.iter().map(|n| n.as_bytes()), early_change).unwrap();
        decoded_size(content, &filters, u64::MAX)
    }

    /// Text that compresses, so a chain's last stage is its largest.
    fn text() -> Vec<u8> {
        (0..20_000)
            .map(|i| format!("word{} ", i * 7919 % 1000))
            .collect::<String>()
            .into_bytes()
    }

    #[test]
    fn every_filter_and_chain_measures_what_lopdf_decodes() {
        let text = text();
        let mut early_off = lopdf::Dictionary::new();
        early_off.set("EarlyChange", 0i64);
        let cases: Vec<(Vec<u8>, Vec<&str>, Option<lopdf::Dictionary>)> = vec![
            (zlib(&text), vec!["FlateDecode"], None),
            (lzw(&text, true), vec!["LZWDecode"], None),
            (lzw(&text, false), vec!["LZWDecode"], Some(early_off)),
            (ascii85(&text), vec!["ASCII85Decode"], None),
            (
                ascii85(&zlib(&text)),
                vec!["ASCII85Decode", "FlateDecode"],
                None,
            ),
            (zlib(&zlib(&text)), vec!["FlateDecode", "FlateDecode"], None),
            (
                zlib(&lzw(&text, true)),
                vec!["FlateDecode", "LZWDecode"],
                None,
            ),
            // A damaged zlib header: lopdf reads the deflate data after it all the same.
            (
                [&[0u8, 0][..], &raw_deflate(&text)].concat(),
                vec!["FlateDecode"],
                None,
            ),
            // Damaged halfway: what came out before the damage is kept.
            (
                zlib(&text)[..zlib(&text).len() / 2].to_vec(),
                vec!["FlateDecode"],
                None,
            ),
        ];
        for (content, names, params) in cases {
            let early_change = params
                .as_ref()
                .and_then(|p| p.get(b"EarlyChange").ok())
                .and_then(|v| v.as_i64().ok());
            let expected = lopdf_decoded(&content, &names, params);
            assert!(expected > 0, "{names:?}");
            assert_eq!(
                measured(&content, &names, early_change),
                expected as u64,
                "{names:?}"
            );
        }
    }

    #[test]
    fn ascii_hex_and_run_length_decode_as_iso_32000_says() {
        assert_eq!(measured(b"48 65 6C\n6c 6F>", &["ASCIIHexDecode"], None), 5);
        assert_eq!(measured(b"486>", &["AHx"], None), 2, "an odd last digit");
        let run_length = [2, b'a', b'b', b'c', 254, b'x', 128, b'n', b'o'];
        assert_eq!(measured(&run_length, &["RunLengthDecode"], None), 6);
    }

    #[test]
    fn a_bomb_in_any_stage_of_a_chain_is_measured() {
        let limit = 1 << 20;
        let zeros = vec![0u8; 4 << 20];
        // The first stage is the bomb; the second makes nothing of zero bytes.
        let first = zlib(&zeros);
        let filters = chain([&b"FlateDecode"[..], b"ASCIIHexDecode"], None).unwrap();
        assert_eq!(decoded_size(&first, &filters, limit), limit);
        // The last stage is.
        let last = ascii85(&zlib(&zeros));
        let filters = chain([&b"ASCII85Decode"[..], b"FlateDecode"], None).unwrap();
        assert_eq!(decoded_size(&last, &filters, limit), limit);
        let filters = chain([&b"LZWDecode"[..]], None).unwrap();
        assert_eq!(decoded_size(&lzw(&zeros, true), &filters, limit), limit);
        assert_eq!(
            decoded_size(&lzw(&zeros, true), &filters, u64::MAX),
            zeros.len() as u64
        );
        // What follows a filter nothing here decodes is not decoded; what precedes it is.
        let filters = chain([&b"FlateDecode"[..], b"DCTDecode"], None).unwrap();
        assert_eq!(filters, [Filter::Flate]);
        assert_eq!(decoded_size(&first, &filters, limit), limit);
        let many = vec![&b"FlateDecode"[..]; MAX_FILTERS + 1];
        assert!(chain(many, None).is_err());
    }

    /// A PDF of `objects` (numbered from 1) and a classic cross-reference table; `stream` is the
    /// dictionary and data of one more object, number `objects.len() + 1`.
    fn pdf_with_stream(dict: &str, data: &[u8]) -> Vec<u8> {
        let mut out = b"%PDF-1.5\n1 0 obj\n<< /Type /Catalog >>\nendobj\n".to_vec();
        out.extend_from_slice(format!("2 0 obj\n{dict}\nstream\n").as_bytes());
        out.extend_from_slice(data);
        out.extend_from_slice(b"\nendstream\nendobj\n3 0 obj\n12\nendobj\n");
        out.extend_from_slice(b"trailer\n<< /Root 1 0 R >>\n%%EOF\n");
        out
    }

    #[test]
    fn object_and_cross_reference_streams_are_measured_in_the_raw_bytes() {
        let limit = 1 << 20;
        let bomb = zlib(&vec![0u8; 2 << 20]);
        let length = bomb.len();
        let refused = |dict: &str| refuse_bombs_past(&pdf_with_stream(dict, &bomb), limit);
        for dict in [
            format!("<< /Type /ObjStm /N 1 /First 4 /Filter /FlateDecode /Length {length} >>"),
            format!("<</Type/XRef/Filter[/FlateDecode]/Length {length}>>"),
            // A name written with an escape, the length in another object.
            "<< /Type /Obj#53tm /Filter /FlateDecode /Length 3 0 R >>".to_owned(),
            format!(
                "<< /Type /ObjStm % a comment\n /DecodeParms << /Predictor 1 >> /Filter /Fl /Length {length} >>"
            ),
        ] {
            let err = refused(&dict).unwrap_err();
            assert_eq!(
                err,
                "stream 2 0 inflates to more than 1 MiB (a decompression bomb?)"
            );
        }
        // Other streams are measured after the load, where lopdf has read their dictionaries.
        assert!(refused(&format!("<< /Filter /FlateDecode /Length {length} >>")).is_ok());
        // Unless a cross-reference section is said to begin there.
        let mut pdf = pdf_with_stream(
            &format!("<< /Filter /FlateDecode /Length {length} >>"),
            &bomb,
        );
        let at = find(&pdf, b"2 0 obj").unwrap();
        pdf.extend_from_slice(format!("startxref\n{at}\n%%EOF\n").as_bytes());
        assert!(refuse_bombs_past(&pdf, limit).is_err());
        // Small ones pass.
        let small = zlib(b"1 0 2 0 << >> << >>");
        let pdf = pdf_with_stream(
            &format!(
                "<< /Type /ObjStm /Filter /FlateDecode /Length {} >>",
                small.len()
            ),
            &small,
        );
        assert!(refuse_bombs_past(&pdf, limit).is_ok());
    }

    #[test]
    fn a_stream_dictionary_is_read_as_lopdf_reads_it() {
        let dict = b"<< /Type /ObjStm /Length 12 0 R /N 3 /Filter [/A85 /Fl] \
                     /DecodeParms << /EarlyChange 0 >> /S (a(b)c\\)) /H <00ff> /R -1.5 /B true >>";
        let mut lexer = Lexer { s: dict, at: 0 };
        let Some(Value::Dict(entries)) = lexer.value(0) else {
            panic!("not a dictionary");
        };
        let get = |key: &[u8]| entries.iter().find(|(k, _)| k == key).map(|(_, v)| v);
        assert_eq!(get(b"Type"), Some(&Value::Name(b"ObjStm".to_vec())));
        assert_eq!(get(b"Length"), Some(&Value::Other));
        assert_eq!(get(b"N"), Some(&Value::Int(3)));
        assert_eq!(
            get(b"Filter"),
            Some(&Value::Array(vec![
                Value::Name(b"A85".to_vec()),
                Value::Name(b"Fl".to_vec())
            ]))
        );
        assert_eq!(
            get(b"DecodeParms"),
            Some(&Value::Dict(vec![(b"EarlyChange".to_vec(), Value::Int(0))]))
        );
        assert_eq!(entries.len(), 9);
        assert_eq!(lexer.at, dict.len());
    }
}
