//! SentencePiece-style (SPM) encoding (`tokenizer.ggml.model = "llama"`: Llama-2 and the
//! Self-RAG checkpoints built on it), as llama.cpp's `llm_tokenizer_spm` runs it.
//!
//! Spaces become `▁`, a dummy-prefix `▁` is prepended where [`super::GgufTokenizer`] says, the
//! text is split into UTF-8 characters, and the adjacent pair whose concatenation is a
//! vocabulary piece with the highest score is merged until no pair is left (ties: leftmost
//! first). Characters with no piece fall back to the byte tokens `<0x00>`..`<0xFF>`.
//!
//! Only NORMAL pieces take part in merges, so no control or user-defined token (`<s>`,
//! `[Fully supported]`, …) can ever come out of plain text.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

use super::{Symbol, TokenType};

/// The SentencePiece word-boundary marker that stands for a space.
pub(super) const SPACE_MARKER: char = '\u{2581}';

/// Parses `<0xAB>` into the byte 0xAB.
pub(super) fn parse_byte_token(piece: &str) -> Option<u8> {
    let hex = piece.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

/// The SPM model: scores, the normal pieces and the byte-fallback tokens.
#[derive(Debug, Clone)]
pub(super) struct SpmModel {
    scores: Vec<f32>,
    /// NORMAL pieces only: the pieces plain text may be made of.
    normal_ids: HashMap<String, u32>,
    byte_ids: [Option<u32>; 256],
    unk: u32,
    /// `tokenizer.ggml.add_space_prefix` (default true): whether the dummy prefix is used at
    /// all.
    pub(super) add_space_prefix: bool,
}

/// A candidate merge of the symbols at `left` and its right neighbour.
#[derive(Debug, PartialEq)]
struct Bigram {
    score: f32,
    left: usize,
    /// Byte length of the merged text, to detect stale entries.
    size: usize,
}

impl Eq for Bigram {}

impl Ord for Bigram {
    fn cmp(&self, other: &Self) -> Ordering {
        // Highest score first; on ties the leftmost pair first.
        self.score
            .total_cmp(&other.score)
            .then_with(|| other.left.cmp(&self.left))
    }
}

impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl SpmModel {
    /// The model of `tokens` with their `scores` and `types`; `unk` stands for a byte with no
    /// `<0xAB>` token.
    pub(super) fn new(
        tokens: &[String],
        scores: Vec<f32>,
        types: &[TokenType],
        unk: u32,
        add_space_prefix: bool,
    ) -> Self {
        let mut normal_ids = HashMap::new();
        let mut byte_ids = [None; 256];
        for (id, (piece, ty)) in tokens.iter().zip(types).enumerate() {
            let Ok(id) = u32::try_from(id) else { break };
            match ty {
                // First occurrence wins, as in llama.cpp.
                TokenType::Normal => {
                    normal_ids.entry(piece.clone()).or_insert(id);
                }
                TokenType::Byte => {
                    if let Some(byte) = parse_byte_token(piece) {
                        byte_ids[usize::from(byte)].get_or_insert(id);
                    }
                }
                _ => {}
            }
        }
        Self {
            scores,
            normal_ids,
            byte_ids,
            unk,
            add_space_prefix,
        }
    }

    /// Appends the ids of plain `raw` to `out`, with the dummy prefix if `dummy_prefix` (and
    /// the vocabulary uses one).
    pub(super) fn encode_fragment(&self, raw: &str, dummy_prefix: bool, out: &mut Vec<u32>) {
        if raw.is_empty() {
            return;
        }
        let mut text = String::with_capacity(raw.len() + 3);
        if self.add_space_prefix && dummy_prefix {
            text.push(SPACE_MARKER);
        }
        text.extend(raw.chars().map(|c| if c == ' ' { SPACE_MARKER } else { c }));

        let mut symbols: Vec<Symbol> = Vec::with_capacity(text.len());
        for (i, (start, c)) in text.char_indices().enumerate() {
            symbols.push(Symbol {
                start,
                len: c.len_utf8(),
                prev: i.checked_sub(1),
                next: None,
            });
            if let Some(prev) = i.checked_sub(1) {
                symbols[prev].next = Some(i);
            }
        }

        // The two halves of each merge, so that a merged symbol with no vocabulary piece of its
        // own (impossible with NORMAL-only merges, but cheap to keep exact) can be split again.
        let mut merges: HashMap<(usize, usize), (usize, usize)> = HashMap::new();
        let mut queue = BinaryHeap::new();
        let try_add = |queue: &mut BinaryHeap<Bigram>, symbols: &[Symbol], left: usize| {
            let Some(right) = symbols[left].next else {
                return;
            };
            let (l, r) = (symbols[left], symbols[right]);
            let merged = &text[l.start..r.start + r.len];
            if let Some(&id) = self.normal_ids.get(merged) {
                queue.push(Bigram {
                    score: self.scores[id as usize],
                    left,
                    size: merged.len(),
                });
            }
        };
        for i in 0..symbols.len() {
            try_add(&mut queue, &symbols, i);
        }
        while let Some(bigram) = queue.pop() {
            let left = bigram.left;
            let Some(right) = symbols[left].next else {
                continue;
            };
            // Stale: one side was merged away or grew since this entry was queued.
            if symbols[left].len == 0
                || symbols[right].len == 0
                || symbols[left].len + symbols[right].len != bigram.size
            {
                continue;
            }
            merges.insert(
                (symbols[left].start, bigram.size),
                (symbols[left].len, symbols[right].len),
            );
            symbols[left].len += symbols[right].len;
            symbols[right].len = 0;
            symbols[left].next = symbols[right].next;
            if let Some(next) = symbols[right].next {
                symbols[next].prev = Some(left);
            }
            if let Some(prev) = symbols[left].prev {
                try_add(&mut queue, &symbols, prev);
            }
            try_add(&mut queue, &symbols, left);
        }

        let mut current = if symbols.is_empty() { None } else { Some(0) };
        while let Some(i) = current {
            let s = symbols[i];
            self.resegment(&text, s.start, s.len, &merges, out);
            current = s.next;
        }
    }

    fn resegment(
        &self,
        text: &str,
        start: usize,
        len: usize,
        merges: &HashMap<(usize, usize), (usize, usize)>,
        out: &mut Vec<u32>,
    ) {
        let piece = &text[start..start + len];
        if let Some(&id) = self.normal_ids.get(piece) {
            out.push(id);
            return;
        }
        if let Some(&(left_len, right_len)) = merges.get(&(start, len)) {
            self.resegment(text, start, left_len, merges, out);
            self.resegment(text, start + left_len, right_len, merges, out);
            return;
        }
        for byte in piece.bytes() {
            out.push(self.byte_ids[usize::from(byte)].unwrap_or(self.unk));
        }
    }

    /// Appends the text of a normal piece: `▁` becomes a space, and the first piece of a
    /// sequence loses the space of its dummy prefix.
    pub(super) fn decode_piece(&self, piece: &str, first: bool, bytes: &mut Vec<u8>) {
        let text = piece.replace(SPACE_MARKER, " ");
        let text = if first && self.add_space_prefix {
            text.strip_prefix(' ').unwrap_or(&text)
        } else {
            &text
        };
        bytes.extend_from_slice(text.as_bytes());
    }
}
