//! Passages like the paper's: about a hundred words, cut at sentence ends, with a small overlap,
//! each carrying the character span it came from so a citation can highlight it.

/// One passage of a page.
#[derive(Debug, Clone, PartialEq)]
pub struct Chunk {
    pub text: String,
    /// Character offsets `[start, end)` of the passage in the page text (Unicode scalar values).
    pub span: (usize, usize),
    /// The heading the passage falls under, if any (a Markdown `#` line: the extractors write
    /// the headings of every format that has them that way).
    pub section: Option<String>,
}

/// Words a passage aims for (the paper's retrieval unit is ~100 words).
pub const TARGET_WORDS: usize = 100;
/// A single sentence longer than this is cut at word boundaries.
const MAX_WORDS: usize = 150;
/// Trailing sentences of up to this many words are repeated at the start of the next passage.
const OVERLAP_WORDS: usize = 20;

/// A sentence (or a piece of an overlong one) with its byte range in the page.
#[derive(Debug, Clone, Copy)]
struct Piece {
    start: usize,
    end: usize,
    words: usize,
    /// A Markdown heading: passages never run across one.
    heading: bool,
}

/// Splits `text` into passages of about [`TARGET_WORDS`] words.
pub fn chunk_text(text: &str) -> Vec<Chunk> {
    let pieces = sentence_pieces(text);
    let headings = markdown_headings(text);
    let mut chars = CharCursor::default();
    let mut chunks = Vec::new();
    let mut i = 0;
    while i < pieces.len() {
        let first = i;
        let mut words = 0;
        while i < pieces.len()
            && (words == 0 || (words + pieces[i].words <= TARGET_WORDS && !pieces[i].heading))
        {
            words += pieces[i].words;
            i += 1;
        }
        let (start, end) = (pieces[first].start, pieces[i - 1].end);
        let start_char = chars.offset(text, start);
        chunks.push(Chunk {
            text: text[start..end].trim().to_string(),
            span: (start_char, start_char + text[start..end].chars().count()),
            section: section_at(&headings, start),
        });
        // Repeat the last sentence when it is short, so a fact cut at a boundary survives whole.
        if i < pieces.len()
            && i - first > 1
            && pieces[i - 1].words <= OVERLAP_WORDS
            && !pieces[i].heading
        {
            i -= 1;
        }
    }
    chunks
}

fn sentence_pieces(text: &str) -> Vec<Piece> {
    let mut pieces = Vec::new();
    let mut start = None;
    let mut prev: Option<char> = None;
    let mut iter = text.char_indices().peekable();
    while let Some((idx, c)) = iter.next() {
        if start.is_none() && !c.is_whitespace() {
            start = Some(idx);
        }
        let next = iter.peek().map(|&(_, n)| n);
        let sentence_end = matches!(c, '.' | '!' | '?') && next.is_none_or(char::is_whitespace);
        let paragraph_end = c == '\n' && (next == Some('\n') || prev == Some('\n'));
        let heading_end = c == '\n'
            && (start.is_some_and(|s| is_heading(&text[s..])) || is_heading(&text[idx + 1..]));
        if let Some(s) = start
            && (sentence_end || paragraph_end || heading_end || next.is_none())
        {
            let end = idx + c.len_utf8();
            push_piece(text, s, end, &mut pieces);
            start = None;
        }
        prev = Some(c);
    }
    pieces
}

/// Adds `text[start..end]`, cut into word-bounded parts when it is longer than [`MAX_WORDS`].
fn push_piece(text: &str, start: usize, end: usize, out: &mut Vec<Piece>) {
    let slice = &text[start..end];
    let word_starts: Vec<usize> = slice
        .char_indices()
        .filter(|&(i, c)| {
            !c.is_whitespace() && (i == 0 || slice[..i].ends_with(char::is_whitespace))
        })
        .map(|(i, _)| start + i)
        .collect();
    if word_starts.is_empty() {
        return;
    }
    let heading = is_heading(slice);
    for part in word_starts.chunks(MAX_WORDS) {
        let part_start = part[0];
        let part_end = word_starts
            .get(word_starts.partition_point(|&w| w <= part[part.len() - 1]))
            .copied()
            .unwrap_or(end);
        out.push(Piece {
            start: part_start,
            end: part_end,
            words: part.len(),
            heading,
        });
    }
}

fn is_heading(line: &str) -> bool {
    line.starts_with('#') && line.trim_start_matches('#').starts_with(' ')
}

fn markdown_headings(text: &str) -> Vec<(usize, String)> {
    let mut offset = 0;
    let mut headings = Vec::new();
    for line in text.split_inclusive('\n') {
        if is_heading(line) {
            headings.push((offset, line.trim_start_matches('#').trim().to_string()));
        }
        offset += line.len();
    }
    headings
}

fn section_at(headings: &[(usize, String)], byte: usize) -> Option<String> {
    let after = headings.partition_point(|(at, _)| *at <= byte);
    after.checked_sub(1).map(|i| headings[i].1.clone())
}

/// Character offsets of byte positions that only move forward (passage starts), counted from
/// the last one rather than from the start of the page: a long page costs one pass, not one
/// pass per passage.
#[derive(Default)]
struct CharCursor {
    byte: usize,
    chars: usize,
}

impl CharCursor {
    fn offset(&mut self, text: &str, byte: usize) -> usize {
        if byte < self.byte {
            *self = Self::default();
        }
        self.chars += text[self.byte..byte].chars().count();
        self.byte = byte;
        self.chars
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sentence(n: usize, words: usize) -> String {
        let body: Vec<String> = (0..words).map(|w| format!("w{n}x{w}")).collect();
        format!("{}.", body.join(" "))
    }

    #[test]
    fn passages_are_about_a_hundred_words_and_end_at_sentences() {
        let text: Vec<String> = (0..30).map(|n| sentence(n, 12)).collect();
        let text = text.join(" ");
        let chunks = chunk_text(&text);
        assert!(chunks.len() >= 4, "{}", chunks.len());
        for c in &chunks {
            let words = c.text.split_whitespace().count();
            assert!(words <= TARGET_WORDS, "{words} words");
            assert!(c.text.ends_with('.'), "cut mid-sentence: {}", c.text);
        }
    }

    #[test]
    fn spans_point_back_at_the_passage_text_even_with_unicode() {
        let text = "Überblick über Ärzte. Ça va très bien! Self-RAG critiques itself? Yes.";
        let chars: Vec<char> = text.chars().collect();
        for c in chunk_text(text) {
            let from_span: String = chars[c.span.0..c.span.1].iter().collect();
            assert_eq!(from_span.trim(), c.text);
        }
    }

    #[test]
    fn consecutive_passages_overlap_by_a_short_sentence() {
        let text: Vec<String> = (0..20).map(|n| sentence(n, 9)).collect();
        let chunks = chunk_text(&text.join(" "));
        let last_of_first = chunks[0].text.rsplit(". ").next().unwrap().to_string();
        assert!(
            chunks[1]
                .text
                .starts_with(last_of_first.trim_end_matches('.'))
        );
    }

    #[test]
    fn an_overlong_sentence_is_cut_at_word_boundaries() {
        let text = sentence(0, 400);
        let chunks = chunk_text(&text);
        assert!(chunks.len() >= 3);
        let rejoined: Vec<&str> = chunks
            .iter()
            .flat_map(|c| c.text.split_whitespace())
            .collect();
        assert_eq!(rejoined.len(), 400);
    }

    #[test]
    fn markdown_sections_follow_headings() {
        let text = "# Intro\nSelf-RAG is a model.\n\n## Method\nIt retrieves on demand.\n";
        let chunks = chunk_text(text);
        let method = chunks
            .iter()
            .find(|c| c.text.contains("retrieves"))
            .unwrap();
        assert_eq!(method.section.as_deref(), Some("Method"));
    }

    #[test]
    fn a_long_page_is_chunked_in_linear_time() {
        // 8 MiB, 80,000 passages: counting each passage's offset from the start of the page
        // took minutes; the cursor takes one pass.
        let text: String = (0..100_000).map(|n| sentence(n, 12) + " ").collect();
        let started = std::time::Instant::now();
        let chunks = chunk_text(&text);
        assert!(chunks.len() > 10_000, "{}", chunks.len());
        assert!(started.elapsed().as_secs() < 20, "{:?}", started.elapsed());
        let last = chunks.last().unwrap();
        let from_span: String = text
            .chars()
            .skip(last.span.0)
            .take(last.span.1 - last.span.0)
            .collect();
        assert_eq!(from_span.trim(), last.text);
    }

    #[test]
    fn blank_text_has_no_passages() {
        assert!(chunk_text("  \n\n ").is_empty());
    }
}
