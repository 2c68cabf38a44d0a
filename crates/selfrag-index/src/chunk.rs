//! Passages like the paper's: about a hundred words, cut at sentence ends, with a small overlap,
//! each carrying the character span it came from so a citation can highlight it.
//!
//! Every passage is bounded whatever the text: at most [`MAX_PASSAGE_CHARS`] characters (a run
//! without whitespace, such as a base64 data URI or a language written without spaces, is cut
//! there) and a section heading of at most [`MAX_SECTION_CHARS`]. Passages come one at a time
//! from [`chunks`], so a caller can count them and stop before holding them all.

/// One passage of a page.
#[derive(Debug, Clone, PartialEq)]
pub struct Chunk {
    pub text: String,
    /// Character offsets `[start, end)` of the passage in the page text (Unicode scalar values).
    pub span: (usize, usize),
    /// The heading the passage falls under, if any (a Markdown `#` line: the extractors write
    /// the headings of every format that has them that way), cut to [`MAX_SECTION_CHARS`].
    pub section: Option<String>,
}

/// Words a passage aims for (the paper's retrieval unit is ~100 words).
pub const TARGET_WORDS: usize = 100;
/// A single sentence longer than this is cut at word boundaries.
const MAX_WORDS: usize = 150;
/// Trailing sentences of up to this many words are repeated at the start of the next passage.
const OVERLAP_WORDS: usize = 20;
/// The most characters of a passage: a hundred words of prose are 500 to 800, and a passage is
/// tokenized whole into every prompt that cites it, copied into traces and shown on screen.
pub const MAX_PASSAGE_CHARS: usize = 1_000;
/// The most characters of the heading kept with each passage: the section is stored with every
/// passage under it, so one long heading line would otherwise be copied thousands of times.
pub const MAX_SECTION_CHARS: usize = 256;

/// A sentence (or a piece of an overlong one) with its byte and character range in the page.
#[derive(Debug, Clone, Copy)]
struct Piece {
    start: usize,
    end: usize,
    start_char: usize,
    end_char: usize,
    words: usize,
    /// A Markdown heading: passages never run across one.
    heading: bool,
}

impl Piece {
    /// Characters from this piece's start to `other`'s end.
    fn chars_through(&self, other: &Piece) -> usize {
        other.end_char.saturating_sub(self.start_char)
    }
}

/// Splits `text` into passages of about [`TARGET_WORDS`] words.
pub fn chunk_text(text: &str) -> Vec<Chunk> {
    chunks(text).collect()
}

/// The passages of `text`, as [`chunk_text`] makes them, one at a time: the memory held is one
/// passage and one sentence, whatever the length of the text.
pub fn chunks(text: &str) -> Chunks<'_> {
    Chunks {
        text,
        pieces: SentencePieces::new(text).peekable(),
        carried: None,
        sections: SectionCursor::default(),
    }
}

/// The iterator of [`chunks`].
pub struct Chunks<'a> {
    text: &'a str,
    pieces: std::iter::Peekable<SentencePieces<'a>>,
    /// The short last sentence of the passage before, which opens the next one.
    carried: Option<Piece>,
    sections: SectionCursor,
}

impl Iterator for Chunks<'_> {
    type Item = Chunk;

    fn next(&mut self) -> Option<Chunk> {
        let first = self.carried.take().or_else(|| self.pieces.next())?;
        let (mut last, mut taken, mut words) = (first, 1, first.words);
        while let Some(next) = self.pieces.peek() {
            if next.heading
                || words + next.words > TARGET_WORDS
                || first.chars_through(next) > MAX_PASSAGE_CHARS
            {
                break;
            }
            words += next.words;
            last = *next;
            taken += 1;
            self.pieces.next();
        }
        // Repeat the last sentence when it is short, so a fact cut at a boundary survives whole;
        // only where the next passage can go on past it (else it would be a passage again).
        if taken > 1
            && last.words <= OVERLAP_WORDS
            && self.pieces.peek().is_some_and(|next| {
                !next.heading
                    && last.words + next.words <= TARGET_WORDS
                    && last.chars_through(next) <= MAX_PASSAGE_CHARS
            })
        {
            self.carried = Some(last);
        }
        Some(Chunk {
            text: self.text[first.start..last.end].trim().to_string(),
            span: (first.start_char, last.end_char),
            section: self.sections.at(self.text, first.start),
        })
    }
}

/// The sentences of a text in order, each cut into parts of at most [`MAX_WORDS`] words and
/// [`MAX_PASSAGE_CHARS`] characters.
struct SentencePieces<'a> {
    text: &'a str,
    chars: std::iter::Peekable<std::str::CharIndices<'a>>,
    /// Characters before the next one `chars` yields.
    char_at: usize,
    /// Where the sentence being read began (byte, character).
    start: Option<(usize, usize)>,
    prev: Option<char>,
    /// Parts of the last sentence read, not yet yielded.
    ready: std::collections::VecDeque<Piece>,
}

impl<'a> SentencePieces<'a> {
    fn new(text: &'a str) -> Self {
        Self {
            text,
            chars: text.char_indices().peekable(),
            char_at: 0,
            start: None,
            prev: None,
            ready: std::collections::VecDeque::new(),
        }
    }
}

impl Iterator for SentencePieces<'_> {
    type Item = Piece;

    fn next(&mut self) -> Option<Piece> {
        while self.ready.is_empty() {
            let (idx, c) = self.chars.next()?;
            let char_idx = self.char_at;
            self.char_at += 1;
            if self.start.is_none() && !c.is_whitespace() {
                self.start = Some((idx, char_idx));
            }
            let next = self.chars.peek().map(|&(_, n)| n);
            let text = self.text;
            let sentence_end = matches!(c, '.' | '!' | '?') && next.is_none_or(char::is_whitespace);
            let paragraph_end = c == '\n' && (next == Some('\n') || self.prev == Some('\n'));
            let heading_end = c == '\n'
                && (self.start.is_some_and(|(s, _)| is_heading(&text[s..]))
                    || is_heading(&text[idx + 1..]));
            if let Some((start, start_char)) = self.start
                && (sentence_end || paragraph_end || heading_end || next.is_none())
            {
                let end = (idx + c.len_utf8(), char_idx + 1);
                split_sentence(text, (start, start_char), end, &mut self.ready);
                self.start = None;
            }
            self.prev = Some(c);
        }
        self.ready.pop_front()
    }
}

/// Adds the sentence `text[start..end]` (byte, character), cut into parts of at most
/// [`MAX_WORDS`] words and [`MAX_PASSAGE_CHARS`] characters at word boundaries; a word longer
/// than that is cut between characters. A part ends where the next one begins.
fn split_sentence(
    text: &str,
    (start, start_char): (usize, usize),
    (end, end_char): (usize, usize),
    out: &mut std::collections::VecDeque<Piece>,
) {
    let slice = &text[start..end];
    let heading = is_heading(slice);
    let mut part: Option<Piece> = None;
    let mut close = |part: &mut Option<Piece>, at: (usize, usize)| {
        if let Some(mut done) = part.take() {
            (done.end, done.end_char) = at;
            out.push_back(done);
        }
    };
    // The word being read: where it began, and its length in characters.
    let mut word: Option<(usize, usize)> = None;
    let mut word_chars = 0;
    let mut chars = slice.char_indices().enumerate().peekable();
    while let Some((n, (i, c))) = chars.next() {
        let at = (start + i, start_char + n);
        if c.is_whitespace() {
            word = None;
            continue;
        }
        if word.is_some() && word_chars == MAX_PASSAGE_CHARS {
            word = None;
        }
        if word.is_none() {
            word = Some(at);
            word_chars = 0;
        }
        word_chars += 1;
        let word_ends = chars
            .peek()
            .is_none_or(|&(_, (_, next))| next.is_whitespace())
            || word_chars == MAX_PASSAGE_CHARS;
        if !word_ends {
            continue;
        }
        let word_start = word.unwrap_or(at);
        let word_end_char = at.1 + 1;
        let fits = part.as_ref().is_some_and(|p| {
            p.words < MAX_WORDS && word_end_char - p.start_char <= MAX_PASSAGE_CHARS
        });
        if fits {
            if let Some(p) = part.as_mut() {
                p.words += 1;
            }
        } else {
            close(&mut part, word_start);
            part = Some(Piece {
                start: word_start.0,
                end,
                start_char: word_start.1,
                end_char,
                words: 1,
                heading,
            });
        }
    }
    close(&mut part, (end, end_char));
}

fn is_heading(line: &str) -> bool {
    line.starts_with('#') && line.trim_start_matches('#').starts_with(' ')
}

/// The Markdown heading in force at byte positions that only move forward (passage starts):
/// the lines are read once, not once per passage, and no list of every heading is kept.
#[derive(Default)]
struct SectionCursor {
    /// Where the first line not read yet begins.
    next_line: usize,
    /// The byte asked for last.
    last_asked: usize,
    current: Option<String>,
}

impl SectionCursor {
    /// The last heading whose line begins at or before `byte`, cut to [`MAX_SECTION_CHARS`].
    fn at(&mut self, text: &str, byte: usize) -> Option<String> {
        if byte < self.last_asked {
            *self = Self::default();
        }
        self.last_asked = byte;
        while self.next_line <= byte && self.next_line < text.len() {
            let rest = &text[self.next_line..];
            let line = &rest[..rest.find('\n').map_or(rest.len(), |i| i + 1)];
            if is_heading(line) {
                let heading = line.trim_start_matches('#').trim();
                self.current = Some(
                    crate::extract::cut_chars(heading, MAX_SECTION_CHARS)
                        .trim_end()
                        .to_string(),
                );
            }
            self.next_line += line.len();
        }
        self.current.clone()
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

    /// The fuzz target's invariants, and the bounds: every span holds its passage's text, no
    /// passage is empty or longer than [`MAX_PASSAGE_CHARS`], no section longer than
    /// [`MAX_SECTION_CHARS`].
    fn assert_well_formed(text: &str, chunks: &[Chunk]) {
        let chars: Vec<char> = text.chars().collect();
        for c in chunks {
            let (start, end) = c.span;
            assert!(start <= end && end <= chars.len(), "span {start}..{end}");
            let spanned: String = chars[start..end].iter().collect();
            assert_eq!(spanned.trim(), c.text, "span {start}..{end}");
            assert!(!c.text.is_empty());
            assert!(
                c.text.chars().count() <= MAX_PASSAGE_CHARS,
                "{} characters",
                c.text.chars().count()
            );
            if let Some(section) = &c.section {
                assert!(section.chars().count() <= MAX_SECTION_CHARS);
            }
        }
    }

    /// Issue 44: a base64 data URI (or a hostile 64 MB `.txt`) was one passage, tokenized whole
    /// into the prompt at ask time.
    #[test]
    fn a_run_without_whitespace_is_cut_into_passages_of_at_most_a_thousand_characters() {
        let alphabet: Vec<char> =
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/ä€"
                .chars()
                .collect();
        let run: String = (0..64 * 1024usize)
            .map(|i| alphabet[(i * 7919 + i / 64) % alphabet.len()])
            .collect();
        let text = format!("An image follows. data:image/png;base64,{run} And text after it.");
        let chunks = chunk_text(&text);
        assert_well_formed(&text, &chunks);
        assert!(chunks.len() >= 64, "{} passages", chunks.len());
        let rejoined: String = chunks
            .iter()
            .filter(|c| !c.text.starts_with("An image") && !c.text.starts_with("And text"))
            .map(|c| c.text.as_str())
            .collect();
        assert!(
            rejoined.contains(&run),
            "the run is kept whole across its passages"
        );
        assert!(chunks.iter().any(|c| c.text.contains("And text after it.")));
    }

    /// Issue 44: a 1 MiB heading line was copied into the section of every passage under it.
    #[test]
    fn a_long_heading_is_cut_in_the_section_of_every_passage() {
        let heading = "Heading ".repeat(128 << 10);
        let body: String = (0..50).map(|n| sentence(n, 12) + " ").collect();
        let text = format!("# {heading}\n{body}\n## Short\n{body}");
        let chunks = chunk_text(&text);
        assert_well_formed(&text, &chunks);
        let sections: Vec<&str> = chunks.iter().filter_map(|c| c.section.as_deref()).collect();
        assert_eq!(sections.len(), chunks.len());
        assert!(sections.iter().any(|s| s.starts_with("Heading Heading")));
        assert!(sections.contains(&"Short"));
    }

    #[test]
    fn long_words_end_a_passage_before_a_thousand_characters() {
        let word = "x".repeat(40);
        let text: String = (0..200).map(|n| format!("{word}{n} {word}. ")).collect();
        let chunks = chunk_text(&text);
        assert_well_formed(&text, &chunks);
        assert!(chunks.len() >= 18, "{} passages", chunks.len());
    }

    /// What the `chunker` fuzz target checks, over texts made of the pieces that have broken
    /// chunkers: headings, long runs, blank lines, multi-byte characters, stray whitespace.
    #[test]
    fn any_text_gives_well_formed_passages() {
        let parts = [
            "# ",
            "## ",
            "#",
            "\n",
            "\n\n",
            " ",
            "\t",
            ". ",
            "? ",
            "!",
            "word ",
            "é",
            "日本語",
            "🦀",
            "a. ",
            "\u{2028}",
            "\r\n",
        ];
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        for round in 0..400 {
            let mut text = String::new();
            let pieces = 1 + round * 7 % 300;
            for _ in 0..pieces {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                match seed % 23 {
                    0 => text.push_str(&"z".repeat((seed >> 8) as usize % 2500)),
                    1 => text.push_str(&"# ".repeat((seed >> 8) as usize % 300)),
                    n => text.push_str(parts[n as usize % parts.len()]),
                }
            }
            assert_well_formed(&text, &chunk_text(&text));
        }
    }

    #[test]
    fn blank_text_has_no_passages() {
        assert!(chunk_text("  \n\n ").is_empty());
    }
}
