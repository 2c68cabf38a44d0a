//! Right-to-left text that a PDF holds in visual order, put back in reading order.
//!
//! XeTeX (the `bidi` and `xepersian` packages) and other typesetters draw Arabic and Persian
//! glyphs from left to right as they stand on the page, and pdf-extract writes glyphs in the order
//! they are drawn: every right-to-left line of such a file reads backwards, and neither a search
//! nor the model can read it. pdftotext puts such lines back in reading order; so does this.
//!
//! Which order a page is in shows in its shaped glyphs (Arabic presentation forms): in reading
//! order a word runs initial → medial → final, read backwards final → medial → initial. Hebrew
//! shows it in its final letters (ך ם ן ף ץ), which end a word and begin one read backwards. Only
//! a page whose letters say "backwards" more often than "forwards" is turned; a page in reading
//! order, or one whose Arabic is written in base letters (which carry no order), is left as it is.
//!
//! A line is turned as the Unicode bidirectional algorithm lays out text of two levels:
//! - a line with more right-to-left than left-to-right letters is right-to-left: it is reversed
//!   whole, and each left-to-right run inside it (Latin words, numbers) turned back;
//! - any other line keeps its order, and each right-to-left run inside it is reversed.
//!
//! Combining marks stay after their letter, brackets in a reversed run are mirrored, and digits
//! keep their own left-to-right order. Presentation forms are then written as their base letters
//! (NFKC), so that a word typed on a keyboard finds them.

use std::borrow::Cow;
use std::ops::Range;

use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

/// A page's text with its visual-order right-to-left lines in reading order and Arabic
/// presentation forms as base letters; text without any is returned as it is.
pub(super) fn reading_order(text: &str) -> Cow<'_, str> {
    if !text.chars().any(|c| class(c) == Class::RightToLeft) {
        return Cow::Borrowed(text);
    }
    let turned = if drawn_backwards(text) {
        let lines: Vec<String> = text.split('\n').map(logical_line).collect();
        Cow::Owned(lines.join("\n"))
    } else {
        Cow::Borrowed(text)
    };
    if turned.chars().any(is_presentation_form) {
        let mut out = String::with_capacity(turned.len());
        for c in turned.chars() {
            if is_presentation_form(c) {
                out.extend(std::iter::once(c).nfkc());
            } else {
                out.push(c);
            }
        }
        Cow::Owned(out)
    } else {
        turned
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    RightToLeft,
    LeftToRight,
    Number,
    Neutral,
}

fn class(c: char) -> Class {
    match c {
        '0'..='9' | '\u{660}'..='\u{669}' | '\u{6f0}'..='\u{6f9}' => Class::Number,
        '\u{590}'..='\u{8ff}' | '\u{fb1d}'..='\u{fdff}' | '\u{fe70}'..='\u{feff}'
            if !is_combining_mark(c) =>
        {
            Class::RightToLeft
        }
        c if c.is_alphabetic() => Class::LeftToRight,
        _ => Class::Neutral,
    }
}

fn is_presentation_form(c: char) -> bool {
    matches!(c, '\u{fb50}'..='\u{fdff}' | '\u{fe70}'..='\u{feff}')
}

/// Whether the page reads backwards more often than forwards: Arabic shaped glyphs that run
/// final → initial, and Hebrew words that begin with a final letter (ך ם ן ף ץ, which only end a
/// word).
fn drawn_backwards(text: &str) -> bool {
    let (mut forwards, mut backwards) = hebrew_word_ends(text);
    let mut previous = None;
    for c in text.chars().filter(|&c| !is_combining_mark(c)) {
        let form = shaping_form(c);
        match (previous, form) {
            (Some(b'i'), Some(b'm' | b'f')) | (Some(b'm'), Some(b'f')) => forwards += 1,
            (Some(b'f'), Some(b'm' | b'i')) | (Some(b'm'), Some(b'i')) => backwards += 1,
            _ => {}
        }
        previous = form;
    }
    backwards > forwards
}

/// Hebrew words of two letters or more that end with a final letter (read forwards) and that
/// begin with one (read backwards).
fn hebrew_word_ends(text: &str) -> (usize, usize) {
    let is_final = |c: char| matches!(c, '\u{5da}' | '\u{5dd}' | '\u{5df}' | '\u{5e3}' | '\u{5e5}');
    let (mut forwards, mut backwards) = (0, 0);
    for word in text.split(|c: char| !('\u{5d0}'..='\u{5ea}').contains(&c)) {
        let (Some(first), Some(last)) = (word.chars().next(), word.chars().next_back()) else {
            continue;
        };
        if word.chars().nth(1).is_none() {
            continue;
        }
        forwards += usize::from(is_final(last));
        backwards += usize::from(is_final(first));
    }
    (forwards, backwards)
}

/// `i`, `m`, `f` or `s` for a presentation form of those shapes.
fn shaping_form(c: char) -> Option<u8> {
    let code = c as usize;
    let form = match c {
        '\u{fb50}'..='\u{fdff}' => FORMS_A[code - 0xfb50],
        '\u{fe70}'..='\u{feff}' => FORMS_B[code - 0xfe70],
        _ => return None,
    };
    (form != b'-').then_some(form)
}

/// One line drawn left to right, in reading order.
fn logical_line(line: &str) -> String {
    let clusters = clusters(line);
    let count = |wanted: Class| clusters.iter().filter(|c| c.class == wanted).count();
    let right_to_left = count(Class::RightToLeft);
    if right_to_left == 0 {
        return line.to_owned();
    }
    // Pieces in the order drawn, each kept whole (a left-to-right stretch, a number) or a single
    // cluster; a right-to-left stretch reads them from the right.
    let mut out = String::with_capacity(line.len());
    if right_to_left > count(Class::LeftToRight) {
        let pieces = pieces(&clusters, &left_to_right_stretches(&clusters));
        for piece in pieces.iter().rev() {
            push_piece(&mut out, &clusters, piece);
        }
    } else {
        let mut at = 0;
        for stretch in right_to_left_stretches(&clusters) {
            for cluster in &clusters[at..stretch.start] {
                out.push_str(cluster.text);
            }
            let inside = &clusters[stretch.clone()];
            for piece in pieces(inside, &numbers(inside)).iter().rev() {
                push_piece(&mut out, inside, piece);
            }
            at = stretch.end;
        }
        for cluster in &clusters[at..] {
            out.push_str(cluster.text);
        }
    }
    out
}

/// A piece of a line: a stretch read forwards, or one cluster of a right-to-left stretch.
enum Piece {
    Forwards(Range<usize>),
    Mirrored(usize),
}

/// `clusters` cut into the `kept` stretches and single clusters between them, in drawn order.
fn pieces(clusters: &[Cluster<'_>], kept: &[Range<usize>]) -> Vec<Piece> {
    let mut out = Vec::with_capacity(clusters.len());
    let mut at = 0;
    for range in kept {
        out.extend((at..range.start).map(Piece::Mirrored));
        out.push(Piece::Forwards(range.clone()));
        at = range.end;
    }
    out.extend((at..clusters.len()).map(Piece::Mirrored));
    out
}

fn push_piece(out: &mut String, clusters: &[Cluster<'_>], piece: &Piece) {
    match piece {
        Piece::Forwards(range) => {
            for cluster in &clusters[range.clone()] {
                out.push_str(cluster.text);
            }
        }
        Piece::Mirrored(at) => out.push_str(mirrored(clusters[*at].text)),
    }
}

/// In a right-to-left line, the stretches drawn left to right as the bidirectional algorithm
/// makes them: Latin words with the neutrals between them (N1), a number after Latin text
/// joining it (W7), a number standing alone otherwise (the neutrals between two numbers, or
/// between a number and the Latin after it, are right-to-left), and brackets paired (N0).
fn left_to_right_stretches(clusters: &[Cluster<'_>]) -> Vec<Range<usize>> {
    let forwards = |class| matches!(class, Class::LeftToRight | Class::Number);
    let mut out = Vec::new();
    let mut at = 0;
    while at < clusters.len() {
        if !forwards(clusters[at].class) {
            at += 1;
            continue;
        }
        let start = at;
        let mut seen_latin = clusters[at].class == Class::LeftToRight;
        // Whether the stretch so far ends in text that is Latin by the algorithm's rules.
        let mut ends_latin = seen_latin;
        let mut end = at + 1;
        loop {
            let gap_end = (end..clusters.len())
                .find(|&i| clusters[i].class != Class::Neutral)
                .unwrap_or(clusters.len());
            let Some(next) = clusters.get(gap_end).map(|c| c.class) else {
                break;
            };
            let joins = match next {
                Class::RightToLeft | Class::Neutral => false,
                _ if gap_end == end => true,
                Class::LeftToRight => ends_latin,
                Class::Number => {
                    seen_latin
                        || (gap_end == end + 1
                            && clusters[end - 1].class == Class::Number
                            && is_number_separator(clusters[end].text))
                }
            };
            if !joins {
                break;
            }
            seen_latin |= next == Class::LeftToRight;
            ends_latin = next == Class::LeftToRight || seen_latin;
            end = gap_end + 1;
        }
        let taken = out.last().map_or(0, |last: &Range<usize>| last.end);
        let (start, end) = with_paired_brackets(clusters, taken, start, end);
        out.push(start..end);
        at = end;
    }
    out
}

/// In a left-to-right line, the stretches from a right-to-left letter to the last one before
/// the next Latin letter, with the numbers and neutrals between them.
fn right_to_left_stretches(clusters: &[Cluster<'_>]) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < clusters.len() {
        if clusters[at].class != Class::RightToLeft {
            at += 1;
            continue;
        }
        let mut end = at + 1;
        for (i, cluster) in clusters.iter().enumerate().skip(at + 1) {
            match cluster.class {
                Class::LeftToRight => break,
                Class::RightToLeft => end = i + 1,
                _ => {}
            }
        }
        out.push(at..end);
        at = end;
    }
    out
}

/// The numbers among `clusters`: digits with the signs that touch them (W5) and single
/// separators between digits (W4), each read forwards.
fn numbers(clusters: &[Cluster<'_>]) -> Vec<Range<usize>> {
    let mut out: Vec<Range<usize>> = Vec::new();
    for (i, cluster) in clusters.iter().enumerate() {
        if cluster.class != Class::Number {
            continue;
        }
        match out.last_mut() {
            Some(last)
                if last.end == i
                    || (last.end + 1 == i && is_number_separator(clusters[last.end].text)) =>
            {
                last.end = i + 1;
            }
            _ => out.push(i..i + 1),
        }
    }
    out
}

/// `,` `.` `:` `/` between two digits keep them one number (`1,234.5`, `12:30`, `1/2`).
fn is_number_separator(text: &str) -> bool {
    matches!(text, "," | "." | ":" | "/" | "\u{66b}" | "\u{66c}")
}

/// A stretch widened to the bracket that closes or opens one it holds unpaired (N0), never
/// back past `taken` (the end of the stretch before it).
fn with_paired_brackets(
    clusters: &[Cluster<'_>],
    taken: usize,
    start: usize,
    end: usize,
) -> (usize, usize) {
    let (mut start, mut end) = (start, end);
    for (open, close) in [("(", ")"), ("[", "]"), ("{", "}")] {
        let count = |text: &str, range: Range<usize>| {
            clusters[range].iter().filter(|c| c.text == text).count()
        };
        if count(open, start..end) > count(close, start..end)
            && clusters.get(end).is_some_and(|c| c.text == close)
        {
            end += 1;
        }
        if count(close, start..end) > count(open, start..end)
            && start > taken
            && clusters[start - 1].text == open
        {
            start -= 1;
        }
    }
    (start, end)
}

/// A letter with the combining marks after it, or one other character.
struct Cluster<'a> {
    text: &'a str,
    class: Class,
}

fn clusters(line: &str) -> Vec<Cluster<'_>> {
    let mut out = drawn_clusters(line);
    // Signs that touch a digit belong to its number (W5): `50%`, `-3`, `$12`, `+1`.
    let touches_digit = |out: &[Cluster<'_>], i: usize| {
        (i > 0 && out[i - 1].class == Class::Number)
            || out.get(i + 1).is_some_and(|c| c.class == Class::Number)
    };
    for i in 0..out.len() {
        let sign = matches!(
            out[i].text,
            "%" | "\u{66a}" | "\u{2030}" | "\u{b0}" | "$" | "\u{20ac}" | "\u{a3}" | "#" | "+" | "-"
        );
        if sign && out[i].class == Class::Neutral && touches_digit(&out, i) {
            out[i].class = Class::Number;
        }
    }
    out
}

fn drawn_clusters(line: &str) -> Vec<Cluster<'_>> {
    let mut out: Vec<Cluster<'_>> = Vec::new();
    let mut start = 0;
    for (at, c) in line.char_indices().skip(1) {
        if !is_combining_mark(c) {
            out.push(cluster(&line[start..at]));
            start = at;
        }
    }
    if start < line.len() {
        out.push(cluster(&line[start..]));
    }
    out
}

fn cluster(text: &str) -> Cluster<'_> {
    Cluster {
        text,
        class: text.chars().next().map_or(Class::Neutral, class),
    }
}

/// A bracket drawn in a right-to-left stretch is the mirror image of the one written.
fn mirrored(text: &str) -> &str {
    match text {
        "(" => ")",
        ")" => "(",
        "[" => "]",
        "]" => "[",
        "{" => "}",
        "}" => "{",
        "<" => ">",
        ">" => "<",
        "«" => "»",
        "»" => "«",
        other => other,
    }
}

/// The shaping form of each code point of Arabic Presentation Forms-A (U+FB50–U+FDFF), from its
/// decomposition tag in UnicodeData.txt (Unicode 14.0, read by `scripts/golden/arabic_forms.py`):
/// `i` initial, `m` medial, `f` final, `s` isolated, `-` none.
const FORMS_A: &[u8; 688] = b"\
sfsfimsfimsfimsfimsfimsfimsfimsfimsfimsfimsfimsfimsfsfsfsfsfsfsfimsfimsfimsfimsfsfimsfsf\
imsfimsfsf---------------------------------sfimsfsfsfssfsfsfsfimimsfsfsfsfsfsfsfisfisfim\
ssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssss\
ssssssssssssfffffffffffffffffffffffffffffffffffffffffffffffffffiiiiiiiiiiiiiiiiiiiiiiiii\
iiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiimmmmmmmmmmmmmmmmmmmmmmsssssssssssssssssss\
sssssssssffffffffffffffffffffffffffffiiiiiiimmmmmmmmfs------------------ifiiiiiififfiiff\
iifififfiffififfifiifffifffffifffffiffifiiifiiii--iiiiffiffffiffffffffffffffffffffffiiff\
ififfffffffiiiff----------------------------------------sssssssssssss---";
/// The same for Arabic Presentation Forms-B (U+FE70–U+FEFF).
const FORMS_B: &[u8; 144] = b"\
sms-s-smsmsmsmsmssfsfsfsfsfimsfsfimsfsfimsfimsfimsfimsfimsfsfsfsfsfimsfimsfimsfimsfimsfi\
msfimsfimsfimsfimsfimsfimsfimsfimsfimsfsfsfimsfsfsfsf---";

#[cfg(test)]
mod tests {
    use super::*;

    // Lines of `thesis-qom.pdf` (texlive-publishers-doc), as pdf-extract reads them: the glyphs
    // in the order XeTeX drew them, left to right.
    const DRAWN: &str =
        "ﻪﮑﻨﯾﺍ ﻪﺑ ﻪﺟﻮﺗ ﺎﺑ .ﺪﻨﺘﺴﻫ ﺩﻮﺧ ﻉﻮﺒﻄﻣ\n0.5 ﮥﺨﺴﻧ ،thesis-qom ﺱﻼﮐ ﻂﺳﻮﺗ ﻩﺪﺷ ﻩﺩﺎﻣﺁ";

    #[test]
    fn a_page_drawn_backwards_is_read_in_reading_order_in_base_letters() {
        // What pdftotext reads from the same lines, in base letters (NFKC).
        let expected = "\u{645}\u{637}\u{628}\u{648}\u{639} \u{62e}\u{648}\u{62f} \
            \u{647}\u{633}\u{62a}\u{646}\u{62f}. \u{628}\u{627} \u{62a}\u{648}\u{62c}\u{647} \
            \u{628}\u{647} \u{627}\u{6cc}\u{646}\u{6a9}\u{647}\n\
            \u{622}\u{645}\u{627}\u{62f}\u{647} \u{634}\u{62f}\u{647} \u{62a}\u{648}\u{633}\u{637} \
            \u{6a9}\u{644}\u{627}\u{633} thesis-qom\u{60c} \u{646}\u{633}\u{62e}\u{6c0} 0.5";
        assert_eq!(reading_order(DRAWN), expected);
    }

    #[test]
    fn a_page_in_reading_order_keeps_its_order() {
        let logical = reading_order(DRAWN).into_owned();
        // Shaped again as a typesetter writing in reading order would: forms say "forwards".
        let shaped_forwards = "ﻣﻄﺒﻮﻉ ﺧﻮﺩ ﻫﺴﺘﻨﺪ. ﺑﺎ ﺗﻮﺟﻪ ﺑﻪ ﺍﯾﻨﮑﻪ";
        assert_eq!(
            reading_order(shaped_forwards),
            logical.lines().next().unwrap()
        );
        // Base letters carry no order: left as they are.
        assert_eq!(reading_order(&logical), logical);
        assert!(matches!(
            reading_order("plain text (1, 2)"),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn a_right_to_left_run_in_a_latin_line_is_turned_with_its_digits_and_brackets() {
        // Drawn: "see " then the Persian "(page 12 of)" backwards, then " here".
        let drawn = format!("see {} here\nﻪﺑ ﻪﺟﻮﺗ", "(ﺯﺍ 12 ﻪﺤﻔﺻ)");
        assert_eq!(
            reading_order(&drawn),
            "see (\u{635}\u{641}\u{62d}\u{647} 12 \u{627}\u{632}) here\n\
             \u{62a}\u{648}\u{62c}\u{647} \u{628}\u{647}"
        );
    }

    #[test]
    fn latin_numbers_signs_and_brackets_in_a_right_to_left_line_follow_the_bidi_rules() {
        for (drawn, read) in [
            // Brackets stay with the Latin they hold (N0).
            (
                "\u{fe96}\u{feb3}\u{fe8d} O(n) \u{feea}\u{fe9f}\u{feee}\u{fe97} \u{fe8e}\u{fe91}",
                "\u{628}\u{627} \u{62a}\u{648}\u{62c}\u{647} O(n) \u{627}\u{633}\u{62a}",
            ),
            // A sign that touches a number is part of it (W5).
            (
                "\u{feaa}\u{febb}\u{fead}\u{fea9} 50% \u{fe8e}\u{fe91}",
                "\u{628}\u{627} 50% \u{62f}\u{631}\u{635}\u{62f}",
            ),
            // Two numbers apart are read from the right, each forwards.
            (
                "15 - 12 \u{feea}\u{fea4}\u{fed4}\u{febb}",
                "\u{635}\u{641}\u{62d}\u{647} 12 - 15",
            ),
            // A number after Latin text joins it (W7), and the spaces between them too.
            (
                "\u{fe96}\u{feb3}\u{fe8d} \u{feea}\u{fe9f}\u{feee}\u{fe97} abc 12 def \u{fe8e}\u{fe91}",
                "\u{628}\u{627} abc 12 def \u{62a}\u{648}\u{62c}\u{647} \u{627}\u{633}\u{62a}",
            ),
        ] {
            assert_eq!(reading_order(drawn), read, "{drawn}");
        }
    }

    /// Whatever a line mixes, turning it neither drops nor repeats a character: the output holds
    /// the input's characters (presentation forms as their letters, brackets as brackets).
    #[test]
    fn turning_a_line_keeps_every_character() {
        const ALPHABET: &[&str] = &[
            "\u{fe96}", "\u{feb3}", "\u{fe8d}", "\u{feea}", "\u{fe9f}", "\u{feee}", "\u{fe97}",
            "\u{fe8e}", "\u{fe91}", "\u{5dd}", "\u{5dc}", "\u{5e9}", "\u{64b}", "a", "Z", "1", "9",
            " ", " ", "(", ")", "[", "]", "%", "-", ",", ".", "\n",
        ];
        let canonical = |text: &str| -> Vec<char> {
            let mut chars: Vec<char> = text
                .nfkc()
                .map(|c| match c {
                    ')' => '(',
                    ']' => '[',
                    other => other,
                })
                .collect();
            chars.sort_unstable();
            chars
        };
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..3000 {
            let mut line = String::new();
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            for _ in 0..(state >> 58) {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1);
                line.push_str(ALPHABET[(state >> 33) as usize % ALPHABET.len()]);
            }
            let read = reading_order(&line);
            assert_eq!(canonical(&read), canonical(&line), "{line:?} → {read:?}");
        }
    }

    #[test]
    fn hebrew_drawn_backwards_is_told_by_its_final_letters() {
        // "שלום עולם, 2024" drawn left to right: the words' final mems come first.
        let drawn = "2024 ,\u{5dd}\u{5dc}\u{5d5}\u{5e2} \u{5dd}\u{5d5}\u{5dc}\u{5e9}";
        let logical = "\u{5e9}\u{5dc}\u{5d5}\u{5dd} \u{5e2}\u{5d5}\u{5dc}\u{5dd}, 2024";
        assert_eq!(reading_order(drawn), logical);
        assert_eq!(reading_order(logical), logical);
    }

    #[test]
    fn combining_marks_stay_after_their_letter() {
        // "عموماً با" drawn backwards: the tanwin (U+064B) was drawn after its alef.
        let drawn = "\u{fe8e}\u{fe91} \u{fe8e}\u{64b}\u{fee3}\u{feee}\u{fee4}\u{fecb}";
        assert_eq!(
            reading_order(drawn),
            "\u{639}\u{645}\u{648}\u{645}\u{627}\u{64b} \u{628}\u{627}"
        );
    }
}
