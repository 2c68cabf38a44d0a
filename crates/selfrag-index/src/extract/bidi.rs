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
    let mut clusters = clusters(line);
    let count = |wanted: Class| clusters.iter().filter(|c| c.class == wanted).count();
    let right_to_left = count(Class::RightToLeft);
    if right_to_left == 0 {
        return line.to_owned();
    }
    if right_to_left > count(Class::LeftToRight) {
        clusters.reverse();
        mirror(&mut clusters);
        // Left-to-right runs (with the neutrals between their letters) read forwards again.
        for run in runs(
            &clusters,
            |c| c != Class::RightToLeft,
            |c| matches!(c, Class::LeftToRight | Class::Number),
        ) {
            clusters[run.clone()].reverse();
            mirror(&mut clusters[run]);
        }
    } else {
        for run in runs(
            &clusters,
            |c| c != Class::LeftToRight,
            |c| c == Class::RightToLeft,
        ) {
            let inside = &mut clusters[run];
            inside.reverse();
            mirror(inside);
            for digits in runs(inside, |c| c != Class::RightToLeft, |c| c == Class::Number) {
                inside[digits].reverse();
            }
        }
    }
    clusters.into_iter().map(|c| c.text).collect()
}

/// A letter with the combining marks after it, or one other character.
struct Cluster<'a> {
    text: &'a str,
    class: Class,
}

fn clusters(line: &str) -> Vec<Cluster<'_>> {
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

/// The maximal runs of clusters whose class passes `inside`, trimmed to begin and end at one
/// that passes `edge`.
fn runs(
    clusters: &[Cluster<'_>],
    inside: impl Fn(Class) -> bool,
    edge: impl Fn(Class) -> bool,
) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < clusters.len() {
        if !edge(clusters[at].class) {
            at += 1;
            continue;
        }
        let start = at;
        let mut end = at + 1;
        let mut probe = end;
        while probe < clusters.len() && inside(clusters[probe].class) {
            probe += 1;
            if edge(clusters[probe - 1].class) {
                end = probe;
            }
        }
        out.push(start..end);
        at = end;
    }
    out
}

/// Brackets drawn in a right-to-left run are the mirror images of the ones written.
fn mirror(clusters: &mut [Cluster<'_>]) {
    for cluster in clusters {
        cluster.text = match cluster.text {
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
        };
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
