//! Byte-level BPE (`tokenizer.ggml.model = "gpt2"`: Llama-3, Qwen2, Mistral's Tekken, …) as
//! llama.cpp's `llm_tokenizer_bpe_session` runs it.
//!
//! A text fragment is cut into words by the vocabulary's [`PreTokenizer`]; each word's UTF-8
//! bytes become GPT-2's printable stand-ins (`bytes_to_unicode`: a space is `Ġ`, a line feed
//! `Ċ`); then, starting from single stand-ins, the adjacent pair of symbols that comes first in
//! `tokenizer.ggml.merges` (its rank is its position there) is merged until no pair has a
//! rank (ties: the leftmost pair). Each symbol is then its vocabulary entry; one that has none
//! (a merge whose result the vocabulary lacks) falls back to its single-byte entries, as in
//! llama.cpp. With Llama-3's and Tekken's pre-tokenizers a word that is an entry as a whole is
//! taken whole (llama.cpp's `ignore_merges`).
//!
//! Only entries that are not control, user-defined or unknown tokens are looked up, so plain
//! text never yields `<|begin_of_text|>` or a reflection token.
//!
//! There is no dummy prefix: the text after a special token is encoded like any other
//! fragment.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

use super::pre_tokenizer::PreTokenizer;
use super::{Symbol, TokenType};

/// GPT-2's byte-to-unicode table: the printable Latin-1 bytes stand for themselves, the other
/// 68 bytes (controls, space, soft hyphen, …) for U+0100 onwards, in byte order.
pub(super) fn byte_to_char_table() -> [char; 256] {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    let mut table = ['\0'; 256];
    let mut next_extra = 0x100u32;
    for b in 0..=255u8 {
        table[usize::from(b)] = if printable(b) {
            char::from(b)
        } else {
            let c = char::from_u32(next_extra).unwrap_or('\u{FFFD}');
            next_extra += 1;
            c
        };
    }
    table
}

/// The byte-level BPE model: merge ranks, the text entries and the byte table.
#[derive(Debug, Clone)]
pub(super) struct BpeModel {
    pre_tokenizer: PreTokenizer,
    /// Every string that is one side of a merge, numbered.
    merge_sides: HashMap<String, u32>,
    /// Rank of the merge of two sides (by their numbers): its position in the merges list.
    ranks: HashMap<(u32, u32), u32>,
    /// The entries plain text may become: every type but control, user-defined and unknown.
    text_ids: HashMap<String, u32>,
    byte_to_char: [char; 256],
    char_to_byte: HashMap<char, u8>,
}

/// A candidate merge of the symbols `left` and `right`.
#[derive(Debug, PartialEq, Eq)]
struct Bigram {
    rank: u32,
    left: usize,
    right: usize,
    /// Byte lengths of the two sides when queued, to detect stale entries.
    left_len: usize,
    right_len: usize,
}

impl Ord for Bigram {
    fn cmp(&self, other: &Self) -> Ordering {
        // A max-heap: the lowest rank first, then the leftmost.
        other
            .rank
            .cmp(&self.rank)
            .then_with(|| other.left.cmp(&self.left))
    }
}

impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl BpeModel {
    /// The model of `tokens` (with their `types`) and `merges` ("left right" strings, in rank
    /// order), splitting with `pre_tokenizer`.
    pub(super) fn new(
        tokens: &[String],
        types: &[TokenType],
        merges: &[String],
        pre_tokenizer: PreTokenizer,
    ) -> Self {
        let mut merge_sides: HashMap<String, u32> = HashMap::new();
        let mut ranks = HashMap::new();
        for (rank, merge) in merges.iter().enumerate() {
            // As llama.cpp: split at the first space after the first byte; the first of two
            // equal merges keeps its rank.
            let Some(space) = merge.bytes().skip(1).position(|b| b == b' ').map(|i| i + 1) else {
                continue;
            };
            let (left, right) = (&merge[..space], &merge[space + 1..]);
            let mut side = |s: &str| {
                let n = u32::try_from(merge_sides.len()).unwrap_or(u32::MAX);
                *merge_sides.entry(s.to_owned()).or_insert(n)
            };
            let key = (side(left), side(right));
            ranks
                .entry(key)
                .or_insert(u32::try_from(rank).unwrap_or(u32::MAX));
        }
        let mut text_ids = HashMap::new();
        for (id, (piece, ty)) in tokens.iter().zip(types).enumerate() {
            if matches!(
                ty,
                TokenType::Control | TokenType::UserDefined | TokenType::Unknown
            ) {
                continue;
            }
            // A piece listed twice is its last id, as llama.cpp's `token_to_id` keeps it.
            if let Ok(id) = u32::try_from(id) {
                text_ids.insert(piece.clone(), id);
            }
        }
        let byte_to_char = byte_to_char_table();
        let char_to_byte = byte_to_char
            .iter()
            .zip(0..=255u8)
            .map(|(&c, b)| (c, b))
            .collect();
        Self {
            pre_tokenizer,
            merge_sides,
            ranks,
            text_ids,
            byte_to_char,
            char_to_byte,
        }
    }

    /// The `tokenizer.ggml.pre` name.
    pub(super) fn pre_tokenizer_name(&self) -> &str {
        self.pre_tokenizer.name()
    }

    /// Whether prompts start with BOS unless the file says otherwise.
    pub(super) fn add_bos_default(&self) -> bool {
        self.pre_tokenizer.add_bos()
    }

    /// Appends the ids of plain `text` to `out`.
    pub(super) fn encode_fragment(&self, text: &str, out: &mut Vec<u32>) {
        for word in self.pre_tokenizer.split(text) {
            let encoded: String = word
                .bytes()
                .map(|b| self.byte_to_char[usize::from(b)])
                .collect();
            self.encode_word(&encoded, out);
        }
    }

    fn rank(&self, left: &str, right: &str) -> Option<u32> {
        let left = self.merge_sides.get(left)?;
        let right = self.merge_sides.get(right)?;
        self.ranks.get(&(*left, *right)).copied()
    }

    fn encode_word(&self, word: &str, out: &mut Vec<u32>) {
        if word.is_empty() {
            return;
        }
        if self.pre_tokenizer.ignore_merges()
            && let Some(&id) = self.text_ids.get(word)
        {
            out.push(id);
            return;
        }
        let mut symbols: Vec<Symbol> = Vec::with_capacity(word.len());
        for (i, (start, c)) in word.char_indices().enumerate() {
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
        let text = |s: &Symbol| &word[s.start..s.start + s.len];
        let mut queue = BinaryHeap::new();
        let try_add = |queue: &mut BinaryHeap<Bigram>, symbols: &[Symbol], left: usize| {
            let Some(right) = symbols[left].next else {
                return;
            };
            if let Some(rank) = self.rank(text(&symbols[left]), text(&symbols[right])) {
                queue.push(Bigram {
                    rank,
                    left,
                    right,
                    left_len: symbols[left].len,
                    right_len: symbols[right].len,
                });
            }
        };
        for i in 0..symbols.len() {
            try_add(&mut queue, &symbols, i);
        }
        while let Some(bigram) = queue.pop() {
            let (left, right) = (bigram.left, bigram.right);
            // Stale: a side was merged away or grew since this entry was queued.
            if symbols[left].len != bigram.left_len || symbols[right].len != bigram.right_len {
                continue;
            }
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
        let mut current = Some(0);
        while let Some(i) = current {
            let symbol = symbols[i];
            let piece = text(&symbol);
            match self.text_ids.get(piece) {
                Some(&id) => out.push(id),
                // llama.cpp looks each byte of the symbol's text up as a one-byte entry and
                // drops the bytes that have none.
                None => out.extend(piece.bytes().filter_map(|b| {
                    let single = [b];
                    std::str::from_utf8(&single)
                        .ok()
                        .and_then(|s| self.text_ids.get(s))
                        .copied()
                })),
            }
            current = symbol.next;
        }
    }

    /// Appends the bytes a normal entry stands for: each character mapped back through the
    /// byte table; a character outside it (no byte-level entry has one) as its own UTF-8.
    pub(super) fn decode_piece(&self, piece: &str, bytes: &mut Vec<u8>) {
        for c in piece.chars() {
            match self.char_to_byte.get(&c) {
                Some(&b) => bytes.push(b),
                None => {
                    let mut buf = [0; 4];
                    bytes.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_byte_table_is_gpt2s() {
        let table = byte_to_char_table();
        assert_eq!(table[usize::from(b' ')], 'Ġ');
        assert_eq!(table[usize::from(b'\n')], 'Ċ');
        assert_eq!(table[usize::from(b'A')], 'A');
        assert_eq!(table[0], '\u{100}');
        assert_eq!(table[0xAD], 'Ń');
        let mut all: Vec<char> = table.to_vec();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 256);
    }
}
