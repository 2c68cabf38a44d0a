//! Text as BibTeX and LaTeX read it: the one escape every BibTeX, BibLaTeX and LaTeX field and
//! sentence goes through, letters outside ASCII kept as UTF-8 or written as LaTeX escapes
//! ([`BibEncoding`]), a title's capitals protected from the styles that lower-case titles, and
//! the verbatim fields (DOI, URL, eprint) kept usable as links.
//!
//! The escape: `{`, `}` and `\` become `\textbraceleft{}`, `\textbraceright{}` and
//! `\textbackslash{}` (BibTeX counts every brace, escaped or not, so a lone `\{` would unbalance
//! the entry), `^` and `~` become `\textasciicircum{}` and `\textasciitilde{}`, and
//! `$ & % # _` are backslash-escaped. Control characters are dropped. So no text from a
//! document, a page label, a bibliography file or the model can close a field, add one, or
//! run a LaTeX command.
//!
//! In [`BibEncoding::Ascii`], a letter with an accent is written as BibTeX's special character
//! (`{\'e}`, `{\"o}`, `{\c{c}}`), the letters LaTeX has commands for as those (`{\o}`,
//! `{\aa}`, `{\ss}`, `{\l}`), dashes, quotes and a few symbols as their LaTeX input (`--`,
//! `---`, ``` `` ```, `\ldots{}`), and anything else transliterated to ASCII.

use selfrag_core::Passage;

use crate::BibEncoding;

/// `s` as the text of a BibTeX field or a LaTeX paragraph.
pub fn text(s: &str, encoding: BibEncoding) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        push_char(&mut out, c, encoding);
    }
    out
}

fn push_char(out: &mut String, c: char, encoding: BibEncoding) {
    match c {
        '\\' => out.push_str("\\textbackslash{}"),
        '{' => out.push_str("\\textbraceleft{}"),
        '}' => out.push_str("\\textbraceright{}"),
        '^' => out.push_str("\\textasciicircum{}"),
        '~' => out.push_str("\\textasciitilde{}"),
        '$' | '&' | '%' | '#' | '_' => {
            out.push('\\');
            out.push(c);
        }
        c if c.is_control() => {
            if c.is_whitespace() {
                out.push(' ');
            }
        }
        c if c.is_ascii() || encoding == BibEncoding::Utf8 => out.push(c),
        c => push_ascii_latex(out, c),
    }
}

/// Letters LaTeX names by a command of their own.
const LETTERS: &[(char, &str)] = &[
    ('Å', "{\\AA}"),
    ('å', "{\\aa}"),
    ('Ø', "{\\O}"),
    ('ø', "{\\o}"),
    ('Æ', "{\\AE}"),
    ('æ', "{\\ae}"),
    ('Œ', "{\\OE}"),
    ('œ', "{\\oe}"),
    ('ß', "{\\ss}"),
    ('Ł', "{\\L}"),
    ('ł', "{\\l}"),
    ('ı', "{\\i}"),
    ('ȷ', "{\\j}"),
    ('Đ', "{\\DJ}"),
    ('đ', "{\\dj}"),
    ('Ð', "{\\DH}"),
    ('ð', "{\\dh}"),
    ('Þ', "{\\TH}"),
    ('þ', "{\\th}"),
    ('Ŋ', "{\\NG}"),
    ('ŋ', "{\\ng}"),
    ('\u{a0}', "~"),
    ('–', "--"),
    ('—', "---"),
    ('‘', "`"),
    ('’', "'"),
    ('“', "``"),
    ('”', "''"),
    ('„', ",,"),
    ('…', "\\ldots{}"),
    ('«', "\\guillemotleft{}"),
    ('»', "\\guillemotright{}"),
    ('€', "\\texteuro{}"),
    ('£', "\\pounds{}"),
    ('§', "\\S{}"),
    ('¶', "\\P{}"),
    ('©', "\\textcopyright{}"),
    ('®', "\\textregistered{}"),
    ('°', "\\textdegree{}"),
    ('×', "\\texttimes{}"),
    ('·', "\\textperiodcentered{}"),
    ('¿', "?`"),
    ('¡', "!`"),
];

/// Letters with one accent, by the accent's LaTeX command: each pair is the letter and the
/// ASCII letter it is written on (Unicode's canonical decomposition of Latin-1, Latin
/// Extended-A and -B and Latin Extended Additional).
const ACCENTED: &[(&str, &str)] = &[
    ("`", "ÀAÈEÌIÒOÙUàaèeìiòoùuǸNǹnẀWẁwỲYỳy"),
    (
        "'",
        "ÁAÉEÍIÓOÚUÝYáaéeíióoúuýyĆCćcĹLĺlŃNńnŔRŕrŚSśsŹZźzǴGǵgḰKḱkḾMḿmṔPṕpẂWẃw",
    ),
    ("^", "ÂAÊEÎIÔOÛUâaêeîiôoûuĈCĉcĜGĝgĤHĥhĴJĵjŜSŝsŴWŵwŶYŷyẐZẑz"),
    ("~", "ÃAÑNÕOãañnõoĨIĩiŨUũuṼVṽvẼEẽeỸYỹy"),
    ("\"", "ÄAËEÏIÖOÜUäaëeïiöoüuÿyŸYḦHḧhẄWẅwẌXẍxẗt"),
    ("c", "ÇCçcĢGģgĶKķkĻLļlŅNņnŖRŗrŞSşsŢTţtȨEȩeḐDḑdḨHḩh"),
    ("=", "ĀAāaĒEēeĪIīiŌOōoŪUūuȲYȳyḠGḡg"),
    ("u", "ĂAăaĔEĕeĞGğgĬIĭiŎOŏoŬUŭu"),
    ("k", "ĄAąaĘEęeĮIįiŲUųuǪOǫo"),
    (
        ".",
        "ĊCċcĖEėeĠGġgİIŻZżzȦAȧaȮOȯoḂBḃbḊDḋdḞFḟfḢHḣhṀMṁmṄNṅnṖPṗpṘRṙrṠSṡsṪTṫtẆWẇwẊXẋxẎYẏy",
    ),
    (
        "v",
        "ČCčcĎDďdĚEěeĽLľlŇNňnŘRřrŠSšsŤTťtŽZžzǍAǎaǏIǐiǑOǒoǓUǔuǦGǧgǨKǩkǰjȞHȟh",
    ),
    ("H", "ŐOőoŰUűu"),
    ("r", "ŮUůuẘwẙy"),
    (
        "d",
        "ḄBḅbḌDḍdḤHḥhḲKḳkḶLḷlṂMṃmṆNṇnṚRṛrṢSṣsṬTṭtṾVṿvẈWẉwẒZẓzẠAạaẸEẹeỊIịiỌOọoỤUụuỴYỵy",
    ),
];

/// A character outside ASCII as LaTeX input made of ASCII.
fn push_ascii_latex(out: &mut String, c: char) {
    if let Some((_, latex)) = LETTERS.iter().find(|(l, _)| *l == c) {
        out.push_str(latex);
        return;
    }
    for (accent, pairs) in ACCENTED {
        let chars: Vec<char> = pairs.chars().collect();
        if let Some(pair) = chars.chunks(2).find(|pair| pair[0] == c) {
            let base = pair[1];
            // A command named by a letter needs its argument braced; a symbol does not.
            if accent.chars().all(|a| a.is_ascii_alphabetic()) {
                out.push_str(&format!("{{\\{accent}{{{base}}}}}"));
            } else {
                out.push_str(&format!("{{\\{accent}{base}}}"));
            }
            return;
        }
    }
    // Anything else (Greek, Cyrillic, CJK, symbols): its ASCII transliteration, escaped in
    // turn, as classic BibTeX cannot hold it.
    for t in deunicode::deunicode_char(c).unwrap_or("").chars() {
        if t.is_ascii() {
            push_char(out, t, BibEncoding::Ascii);
        }
    }
}

/// A title as a BibTeX field: escaped, with every word that has a capital letter after its
/// first letter (`RAG`, `Self-RAG`, `LaTeX`, `McDonald`) and every lone capital after the first
/// word (`Vitamin A`) braced, so that a style that sets titles in sentence case keeps them.
/// Other capitalised words (`Norway`) are left to the style, as BibTeX's own conventions do.
pub fn title(s: &str, encoding: BibEncoding) -> String {
    crate::one_line(s)
        .split(' ')
        .enumerate()
        .map(|(i, word)| {
            let escaped = text(word, encoding);
            if needs_protection(word, i == 0) {
                protect(&escaped)
            } else {
                escaped
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn needs_protection(word: &str, first: bool) -> bool {
    let letters: Vec<char> = word.chars().filter(|c| c.is_alphabetic()).collect();
    match letters.as_slice() {
        [] => false,
        [only] => !first && only.is_uppercase(),
        [_, rest @ ..] => rest.iter().any(|c| c.is_uppercase()),
    }
}

/// `s` in a brace group that BibTeX keeps as it is: `{…}`, or `{{…}}` where `s` starts with a
/// command (a group that starts `{\` is one of BibTeX's "special characters", whose case
/// styles do change).
pub fn protect(s: &str) -> String {
    if s.starts_with('\\') {
        format!("{{{{{s}}}}}")
    } else {
        format!("{{{s}}}")
    }
}

/// A verbatim field (DOI, URL, eprint), which biber and `\url` read character by character:
/// LaTeX escapes would end up in the link, so the characters that could unbalance the entry or
/// end the field (`{`, `}`, `\`, `"`, whitespace, controls), `^` (TeX's `^^5c` is a backslash)
/// and, in ASCII, the letters outside it are percent-encoded instead, as a URL writes them.
pub fn verbatim(s: &str, encoding: BibEncoding) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.trim().chars() {
        // `^` too: TeX reads `^^5c` as a backslash even in a verbatim argument.
        let encode = matches!(c, '{' | '}' | '\\' | '"' | '^')
            || c.is_whitespace()
            || c.is_control()
            || (!c.is_ascii() && encoding == BibEncoding::Ascii);
        if encode {
            let mut bytes = [0u8; 4];
            for b in c.encode_utf8(&mut bytes).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A cited page: its place in the file, and the number printed on it (the same unless the
/// file's page labels say otherwise).
pub type CitedPage = (u32, String);

/// The page a passage is cited at, where it has one.
pub fn cited_page(p: &Passage) -> Option<CitedPage> {
    p.page
        .map(|page| (page, p.printed_page().unwrap_or_default()))
}

/// "3, 5--7" from sorted, distinct pages: runs of consecutive pages of the file, each written
/// with the numbers printed on its first and last page (`117--119`, `iii--v`) joined by
/// `dash`; not escaped (a printed label is the PDF's own text, and the caller escapes it).
pub fn page_ranges(pages: &[CitedPage], dash: &str) -> String {
    let label = |page: &CitedPage| crate::one_line(&page.1);
    let mut ranges: Vec<(&CitedPage, &CitedPage)> = Vec::new();
    for page in pages {
        match ranges.last_mut() {
            Some((_, end)) if end.0 + 1 == page.0 => *end = page,
            _ => ranges.push((page, page)),
        }
    }
    ranges
        .iter()
        .map(|(a, b)| {
            if a.0 == b.0 {
                label(a)
            } else {
                format!("{}{dash}{}", label(a), label(b))
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A work's own page range (`117-129`, `117–129`, `117 - 129`) with `dash` between its ends;
/// anything else as it is.
pub fn work_pages(pages: &str, dash: &str) -> String {
    let pages = crate::one_line(pages);
    let ends: Vec<&str> = pages
        .split(['-', '–', '—'])
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    match ends.as_slice() {
        [start, end] => format!("{start}{dash}{end}"),
        _ => pages,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use BibEncoding::{Ascii, Utf8};

    /// Every brace group closes: what BibTeX checks of a braced value.
    pub fn balanced(s: &str) -> bool {
        let mut depth = 0i32;
        for c in s.chars() {
            depth += match c {
                '{' => 1,
                '}' => -1,
                _ => 0,
            };
            if depth < 0 {
                return false;
            }
        }
        depth == 0
    }

    #[test]
    fn latex_characters_are_escaped_and_braces_stay_balanced() {
        assert_eq!(
            text("{braces} 100% $5 #1 a_b ^ ~ & \\x", Utf8),
            "\\textbraceleft{}braces\\textbraceright{} 100\\% \\$5 \\#1 a\\_b \\textasciicircum{} \\textasciitilde{} \\& \\textbackslash{}x"
        );
        assert_eq!(text("a\u{7}b\tc", Utf8), "ab c");
        assert!(balanced(&text("}{ \\ { ", Ascii)));
    }

    #[test]
    fn letters_outside_ascii_stay_utf8_or_become_latex_escapes() {
        let names = "Ødegård, Bjørn; Ñúñez; Łukasz; Müller; Straße; Dvořák; Çelik; Ő; …—“x”";
        assert_eq!(text(names, Utf8), names);
        assert_eq!(
            text(names, Ascii),
            "{\\O}deg{\\aa}rd, Bj{\\o}rn; {\\~N}{\\'u}{\\~n}ez; {\\L}ukasz; M{\\\"u}ller; Stra{\\ss}e; Dvo{\\v{r}}{\\'a}k; {\\c{C}}elik; {\\H{O}}; \\ldots{}---``x''"
        );
        // No LaTeX command for it: transliterated, and escaped where that yields a special.
        assert_eq!(text("Σωκράτης 東京", Ascii), "Sokrates Dong Jing ");
        assert!(text("Σωκράτης 東京 Ø ü", Ascii).is_ascii());
    }

    #[test]
    fn title_words_with_inner_capitals_and_lone_capitals_are_protected() {
        assert_eq!(
            title(
                "Self-RAG: Learning to Retrieve with LaTeX and Vitamin A",
                Utf8
            ),
            "{Self-RAG:} Learning to Retrieve with {LaTeX} and Vitamin {A}"
        );
        assert_eq!(title("A study of RAG", Utf8), "A study of {RAG}");
        assert_eq!(
            title("The {GPU} 100% ÅRHUS", Ascii),
            "The {{\\textbraceleft{}GPU\\textbraceright{}}} 100\\% {{\\AA}RHUS}"
        );
        assert_eq!(
            title("x \\TeX{}", Utf8),
            "x {{\\textbackslash{}TeX\\textbraceleft{}\\textbraceright{}}}"
        );
    }

    #[test]
    fn verbatim_fields_percent_encode_what_could_end_them() {
        assert_eq!(
            verbatim("https://x.org/a_b%20c?q=1&r=~u#f", Utf8),
            "https://x.org/a_b%20c?q=1&r=~u#f"
        );
        assert_eq!(
            verbatim("https://x.org/}{\\ \"ø", Utf8),
            "https://x.org/%7D%7B%5C%20%22ø"
        );
        assert_eq!(verbatim("https://x.org/ø", Ascii), "https://x.org/%C3%B8");
        assert_eq!(verbatim("10.1/a^^5cinput", Utf8), "10.1/a%5E%5E5cinput");
    }

    #[test]
    fn pages_merge_into_ranges_and_a_works_range_gets_its_dash() {
        let plain = |pages: &[u32]| -> Vec<CitedPage> {
            pages.iter().map(|&p| (p, p.to_string())).collect()
        };
        assert_eq!(page_ranges(&plain(&[1, 3, 4, 5, 9]), "--"), "1, 3--5, 9");
        // Printed numbers: an article printed from page 117, and roman front matter.
        let printed = [
            (1, "iii".to_owned()),
            (2, "iv".to_owned()),
            (9, "117".to_owned()),
            (10, "118".to_owned()),
            (12, "120".to_owned()),
        ];
        assert_eq!(page_ranges(&printed, "–"), "iii–iv, 117–118, 120");
        assert_eq!(work_pages("117-129", "--"), "117--129");
        assert_eq!(work_pages("117 – 129", "-"), "117-129");
        assert_eq!(work_pages("e1234", "--"), "e1234");
    }
}
