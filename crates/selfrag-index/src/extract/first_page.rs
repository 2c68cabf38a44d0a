//! A guess at a PDF's title and authors from the layout of its first page
//! ([`FieldSource::FirstPageGuess`]): the title is the largest text near the top of page 1,
//! the authors the name-shaped line(s) right under it.
//!
//! [`FirstPageLayout`] is a pdf-extract output device that records each character of page 1
//! with its place and its size on the page (the font size through the text and graphics
//! matrices), while the page's text is read as usual; [`FirstPageLayout::guess`] then:
//! 1. joins the characters into runs (same size, same baseline, going right) and the runs into
//!    lines (same baseline);
//! 2. takes, in the top half of the page, the lines of the largest size that is larger than the
//!    page's body text, the first of them and the ones right under it of the same size, as the
//!    title, unless it is no title (all digits, an address, a running header such as
//!    `arXiv:…`, a section heading, longer than [`MAX_GUESSED_TITLE_CHARS`]), in which case the
//!    next size down is tried;
//! 3. reads the lines under the title as authors while they are lists of names (`Ann Marrow,
//!    Bo Ødegård and Cy Twombly`, names set apart in columns), footnote marks and smaller
//!    superscripts left out; the first line that is not (an affiliation, an address, the
//!    abstract) ends them.
//!
//! Rotated text (arXiv's stamp in the margin) is not part of the layout.

use pdf_extract::{MediaBox, OutputDev, OutputError, Transform};
use selfrag_works::{Author, FieldSource, Sourced, Work};

/// The most characters of page 1 recorded: a title and its authors are in the first few
/// hundred; a page of tens of thousands is a table or a drawing.
const MAX_GLYPHS: usize = 20_000;

/// A guessed title longer than this is a paragraph, not a title.
pub(super) const MAX_GUESSED_TITLE_CHARS: usize = 300;

/// How many sizes, from the largest down, are tried for the title.
const TITLE_SIZES_TRIED: usize = 3;

/// How much larger than the body text a title must be.
const TITLE_SIZE_OVER_BODY: f64 = 1.05;

/// The most lines of authors read under a title.
const MAX_AUTHOR_LINES: usize = 4;

/// One character drawn on the page: its origin, where its advance ends, and its size, in the
/// page's default user space (y upward).
#[derive(Debug, Clone)]
struct Glyph {
    x: f64,
    end: f64,
    y: f64,
    size: f64,
    text: String,
}

/// The characters of a page as pdf-extract draws them (see the module's documentation).
#[derive(Debug, Default)]
pub(super) struct FirstPageLayout {
    glyphs: Vec<Glyph>,
    /// The page's bottom and top (its media box).
    bounds: Option<(f64, f64)>,
}

impl OutputDev for FirstPageLayout {
    fn begin_page(
        &mut self,
        _page_num: u32,
        media_box: &MediaBox,
        _art_box: Option<(f64, f64, f64, f64)>,
    ) -> Result<(), OutputError> {
        let (bottom, top) = (
            media_box.lly.min(media_box.ury),
            media_box.lly.max(media_box.ury),
        );
        if bottom.is_finite() && top.is_finite() && top > bottom {
            self.bounds = Some((bottom, top));
        }
        Ok(())
    }

    fn end_page(&mut self) -> Result<(), OutputError> {
        Ok(())
    }

    fn output_character(
        &mut self,
        trm: &Transform,
        width: f64,
        _spacing: f64,
        font_size: f64,
        char: &str,
    ) -> Result<(), OutputError> {
        if self.glyphs.len() >= MAX_GLYPHS {
            return Ok(());
        }
        // Upright text only: no rotation, no mirroring.
        let (a, b, c, d) = (trm.m11, trm.m12, trm.m21, trm.m22);
        let upright = a > 0.0 && d > 0.0 && b.abs() <= 0.05 * a && c.abs() <= 0.05 * d;
        // The height of the font on the page: its size through the matrices' vertical scale.
        let size = font_size.abs() * d;
        let (x, y) = (trm.m31, trm.m32);
        let end = x + width * font_size.abs() * a;
        if upright && [size, x, y, end].iter().all(|v| v.is_finite()) && size > 0.0 {
            self.glyphs.push(Glyph {
                x,
                end,
                y,
                size,
                text: char.to_string(),
            });
        }
        Ok(())
    }

    fn begin_word(&mut self) -> Result<(), OutputError> {
        Ok(())
    }

    fn end_word(&mut self) -> Result<(), OutputError> {
        Ok(())
    }

    fn end_line(&mut self) -> Result<(), OutputError> {
        Ok(())
    }
}

/// Characters of one size, on one baseline, in the order drawn.
#[derive(Debug, Clone)]
struct Run {
    x: f64,
    end: f64,
    y: f64,
    size: f64,
    text: String,
}

impl Run {
    fn letters(&self) -> usize {
        self.text.chars().filter(|c| !c.is_whitespace()).count()
    }
}

/// Runs on one baseline, left to right; its size and baseline are those of its longest run.
#[derive(Debug, Clone)]
struct Line {
    runs: Vec<Run>,
    y: f64,
    size: f64,
}

impl Line {
    /// The text of the runs at least 80% of the line's size (footnote marks and superscripts
    /// left out), a tab where runs are set far apart (names in columns), a space where they
    /// are a word apart.
    fn text(&self) -> String {
        let mut text = String::new();
        let mut last_end: Option<f64> = None;
        for run in self.runs.iter().filter(|r| r.size >= 0.8 * self.size) {
            if let Some(end) = last_end {
                let gap = run.x - end;
                if gap > self.size {
                    text.push('\t');
                } else if gap > 0.15 * self.size && !text.ends_with(' ') {
                    text.push(' ');
                }
            }
            text.push_str(&run.text);
            last_end = Some(run.end);
        }
        text
    }
}

fn same_size(a: f64, b: f64) -> bool {
    (a - b).abs() <= 0.03 * a.max(b)
}

impl FirstPageLayout {
    /// The drawn characters as runs: a new run where the size or the baseline changes, or the
    /// text goes back left or jumps far right.
    fn runs(&self) -> Vec<Run> {
        let mut runs: Vec<Run> = Vec::new();
        for glyph in &self.glyphs {
            let continues = runs.last().is_some_and(|run| {
                same_size(run.size, glyph.size)
                    && (glyph.y - run.y).abs() <= 0.2 * run.size
                    && glyph.x >= run.end - 0.5 * run.size
                    && glyph.x <= run.end + 3.0 * run.size
            });
            match runs.last_mut() {
                Some(run) if continues => {
                    let blank = glyph.text.trim().is_empty();
                    if !blank && glyph.x > run.end + 0.15 * run.size && !run.text.ends_with(' ') {
                        run.text.push(' ');
                    }
                    run.text.push_str(&glyph.text);
                    run.end = run.end.max(glyph.end);
                }
                _ => runs.push(Run {
                    x: glyph.x,
                    end: glyph.end,
                    y: glyph.y,
                    size: glyph.size,
                    text: glyph.text.clone(),
                }),
            }
        }
        runs.retain(|run| run.letters() > 0);
        runs
    }

    /// The runs as lines, from the top of the page down.
    fn lines(runs: Vec<Run>) -> Vec<Line> {
        let mut runs = runs;
        runs.sort_by(|a, b| b.y.total_cmp(&a.y));
        let mut lines: Vec<Line> = Vec::new();
        for run in runs {
            match lines.last_mut() {
                Some(line) if (line.y - run.y).abs() <= 0.5 * line.size.max(run.size) => {
                    line.runs.push(run);
                }
                _ => lines.push(Line {
                    y: run.y,
                    size: run.size,
                    runs: vec![run],
                }),
            }
            // The line's baseline and size are its longest run's.
            if let Some(line) = lines.last_mut()
                && let Some(main) = line.runs.iter().max_by_key(|r| r.letters())
            {
                (line.y, line.size) = (main.y, main.size);
            }
        }
        for line in &mut lines {
            line.runs.sort_by(|a, b| a.x.total_cmp(&b.x));
        }
        lines
    }

    /// The size most of the page's characters are set in.
    fn body_size(runs: &[Run]) -> Option<f64> {
        let mut by_size: Vec<(f64, usize)> = Vec::new();
        for run in runs {
            match by_size
                .iter_mut()
                .find(|(size, _)| same_size(*size, run.size))
            {
                Some((_, count)) => *count += run.letters(),
                None => by_size.push((run.size, run.letters())),
            }
        }
        by_size
            .into_iter()
            .max_by_key(|(_, count)| *count)
            .map(|(size, _)| size)
    }

    /// The title and authors the page's layout suggests, as [`FieldSource::FirstPageGuess`];
    /// empty where it suggests none.
    pub(super) fn guess(&self) -> Work {
        let runs = self.runs();
        let Some(body) = Self::body_size(&runs) else {
            return Work::default();
        };
        let lines = Self::lines(runs);
        let middle = match self.bounds {
            Some((bottom, top)) => (bottom + top) / 2.0,
            None => return Work::default(),
        };
        let mut sizes: Vec<f64> = Vec::new();
        for line in lines.iter().filter(|l| l.y >= middle) {
            if line.size > TITLE_SIZE_OVER_BODY * body
                && !sizes.iter().any(|s| same_size(*s, line.size))
            {
                sizes.push(line.size);
            }
        }
        sizes.sort_by(|a, b| b.total_cmp(a));
        for size in sizes.into_iter().take(TITLE_SIZES_TRIED) {
            let Some(start) = lines
                .iter()
                .position(|l| l.y >= middle && same_size(l.size, size))
            else {
                continue;
            };
            let mut end = start + 1;
            while end < lines.len()
                && same_size(lines[end].size, size)
                && lines[end - 1].y - lines[end].y <= 2.5 * size
            {
                end += 1;
            }
            // Lines joined by line ends, so that a word hyphenated across two is joined again.
            let title = lines[start..end]
                .iter()
                .map(Line::text)
                .collect::<Vec<_>>()
                .join("\n");
            let Some(title) = acceptable_title(&title) else {
                continue;
            };
            let authors = authors_under(&lines[end..], lines[end - 1].y, size);
            let guessed = |value| Sourced::new(value, FieldSource::FirstPageGuess);
            return Work {
                title: Some(guessed(title)),
                authors: (!authors.is_empty())
                    .then(|| Sourced::new(authors, FieldSource::FirstPageGuess)),
                ..Work::default()
            };
        }
        Work::default()
    }
}

/// Lines that open a page but are no title: running heads and banners.
const NOT_TITLE_STARTS: [&str; 14] = [
    "arxiv",
    "preprint",
    "published as",
    "under review",
    "accepted",
    "to appear",
    "proceedings of",
    "journal of",
    "vol.",
    "volume ",
    "copyright",
    "©",
    "doi:",
    "http",
];

/// Headings that open a page's body, not a work (in the languages of the theses and manuals
/// the guess was tried on).
const SECTION_HEADINGS: [&str; 23] = [
    "abstract",
    "introduction",
    "contents",
    "table of contents",
    "preface",
    "foreword",
    "acknowledgements",
    "references",
    "overview",
    "summary",
    "features",
    "inhaltsverzeichnis",
    "inhalt",
    "einleitung",
    "zusammenfassung",
    "table des matières",
    "sommaire",
    "résumé",
    "indice",
    "índice",
    "resumen",
    "resumo",
    "sommario",
];

/// Words that open the heading of a part of a work ("Chapter 1").
const DIVISIONS: [&str; 8] = [
    "chapter",
    "part",
    "section",
    "appendix",
    "kapitel",
    "teil",
    "chapitre",
    "capítulo",
];

/// The guessed title, tidied, where it can be one: not all digits and marks, not an address
/// or an e-mail, not a running head (`arXiv:…`, `Preprint…`), not a section heading
/// (`Abstract`, `1 Introduction`, `Chapter 1`), not a paper's number, and no longer than
/// [`MAX_GUESSED_TITLE_CHARS`].
fn acceptable_title(title: &str) -> Option<String> {
    let title = super::pdf::tidy_page_text(&title.replace('\t', " "));
    let title = super::metadata::tidy_value(&title);
    let lower = title.to_lowercase();
    let letters = title.chars().filter(|c| c.is_alphabetic()).count();
    let is_address = lower.contains("://")
        || lower.starts_with("www.")
        || lower.contains('@')
        || (!lower.contains(' ') && lower.contains('.'));
    let numbered_heading = lower.split_once(' ').is_some_and(|(number, rest)| {
        number
            .trim_end_matches('.')
            .chars()
            .all(|c| c.is_ascii_digit())
            && SECTION_HEADINGS.contains(&rest.trim())
    });
    // "Chapter 1", "Part II": a division's heading, not the work's title.
    let words: Vec<&str> = lower.split_whitespace().collect();
    let division = words.len() <= 2 && words.first().is_some_and(|w| DIVISIONS.contains(w));
    // One token with digits in it is a paper's or report's number (`AIECE2022-0003`).
    let number = words.len() == 1 && title.chars().filter(char::is_ascii_digit).count() >= 3;
    let rejected = letters < 2
        || division
        || number
        || title.chars().count() > MAX_GUESSED_TITLE_CHARS
        || is_address
        || NOT_TITLE_STARTS
            .iter()
            .any(|start| lower.starts_with(start))
        || SECTION_HEADINGS.contains(&lower.as_str())
        || numbered_heading;
    (!rejected).then_some(title)
}

/// Characters that mark a footnote after a name.
const MARKS: [char; 14] = [
    '*', '∗', '†', '‡', '§', '¶', '⋆', '♠', '♣', '♦', '♥', '✉', '#', '⁎',
];

/// Words that are never part of a person's name: affiliations, organisations, the words of a
/// subtitle or of a document's kind ("Final Project Report").
const NOT_NAME_WORDS: [&str; 79] = [
    "university",
    "universität",
    "université",
    "universidad",
    "università",
    "institute",
    "institut",
    "department",
    "dept",
    "laboratory",
    "laboratories",
    "lab",
    "college",
    "school",
    "faculty",
    "center",
    "centre",
    "inc",
    "ltd",
    "corporation",
    "research",
    "group",
    "abstract",
    "introduction",
    "journal",
    "proceedings",
    "conference",
    "press",
    "the",
    "of",
    "for",
    "on",
    "in",
    "with",
    "to",
    "from",
    "via",
    "an",
    "is",
    "are",
    "using",
    "towards",
    "survey",
    "keywords",
    "report",
    "project",
    "proposal",
    "thesis",
    "dissertation",
    "paper",
    "manual",
    "guide",
    "documentation",
    "chapter",
    "society",
    "association",
    "committee",
    "council",
    "organization",
    "organisation",
    "company",
    "foundation",
    "academy",
    "agency",
    "ministry",
    "office",
    "services",
    "team",
    "consortium",
    "collaboration",
    "network",
    "final",
    "draft",
    "version",
    "edition",
    "template",
    "sample",
    "class",
    "package",
];

/// Name particles written in lower case (`Ludwig van Beethoven`, `Maria de la Cruz`).
const PARTICLES: [&str; 14] = [
    "van", "von", "de", "der", "den", "da", "di", "du", "la", "le", "del", "della", "dos", "ter",
];

/// Whether one part of a line (between commas, `and`, tabs) is a person's name: two to five
/// words, each capitalised (or an initial, or a particle), letters and `.-'` only, none a word
/// that names an institution or a topic.
fn is_name(part: &str) -> bool {
    let words: Vec<&str> = part.split_whitespace().collect();
    (2..=5).contains(&words.len())
        && words.iter().enumerate().all(|(i, word)| {
            let lower = word.to_lowercase();
            let capitalised = word.chars().next().is_some_and(char::is_uppercase);
            let particle = i > 0 && i + 1 < words.len() && PARTICLES.contains(&lower.as_str());
            (capitalised || particle)
                && word
                    .chars()
                    .all(|c| c.is_alphabetic() || matches!(c, '.' | '-' | '\'' | '’'))
                && !NOT_NAME_WORDS.contains(&lower.trim_end_matches('.'))
                && !(i == 0 && word == &"A")
        })
}

/// The names on one line under a title, where every part of it is one (see [`is_name`]).
fn names_in_line(line: &str) -> Option<Vec<Author>> {
    // Footnote marks, and affiliation numbers set at the text's size right after a name
    // (`Marrow1,2`), left out.
    let chars: Vec<char> = line.chars().filter(|c| !MARKS.contains(c)).collect();
    let mut unmarked = String::with_capacity(line.len());
    let mut in_mark = false;
    for (i, &c) in chars.iter().enumerate() {
        let after_name = unmarked
            .chars()
            .next_back()
            .is_some_and(char::is_alphabetic);
        let digit_next = chars.get(i + 1).is_some_and(char::is_ascii_digit);
        in_mark =
            (c.is_ascii_digit() && (after_name || in_mark)) || (c == ',' && in_mark && digit_next);
        if !in_mark {
            unmarked.push(c);
        }
    }
    let line = unmarked.trim();
    let line = line
        .strip_prefix("by ")
        .or_else(|| line.strip_prefix("By "))
        .unwrap_or(line);
    let parts: Vec<&str> = line
        .split(['\t', ',', ';', '&', '·', '•', '|'])
        .flat_map(|part| part.split(" and "))
        .flat_map(|part| part.split(" AND "))
        .map(str::trim)
        .map(|part| part.strip_prefix("and ").unwrap_or(part))
        .filter(|part| !part.is_empty())
        .collect();
    (!parts.is_empty() && parts.iter().all(|part| is_name(part)))
        .then(|| parts.iter().filter_map(|p| Author::parse_name(p)).collect())
}

/// The authors on the lines right under a title whose last line is at `title_y` and whose
/// size is `title_size`: read from the first line, within a few title lines' distance, while
/// the lines are lists of names.
fn authors_under(lines: &[Line], title_y: f64, title_size: f64) -> Vec<Author> {
    let mut authors = Vec::new();
    let mut previous_y = title_y;
    for (i, line) in lines.iter().take(MAX_AUTHOR_LINES).enumerate() {
        let reach = if i == 0 {
            6.0 * title_size
        } else {
            3.0 * line.size
        };
        if previous_y - line.y > reach {
            break;
        }
        match names_in_line(&line.text()) {
            Some(names) => authors.extend(names),
            None => break,
        }
        previous_y = line.y;
    }
    authors
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A layout of `lines`, each (baseline, size, text) set as one run from x = 72 in a font
    /// whose characters are half as wide as they are high, on a US Letter page.
    fn layout(lines: &[(f64, f64, &str)]) -> FirstPageLayout {
        let mut layout = FirstPageLayout {
            glyphs: Vec::new(),
            bounds: Some((0.0, 792.0)),
        };
        for (y, size, text) in lines {
            let mut x = 72.0;
            for c in text.chars() {
                let end = x + 0.5 * size;
                layout.glyphs.push(Glyph {
                    x,
                    end,
                    y: *y,
                    size: *size,
                    text: c.to_string(),
                });
                x = end;
            }
        }
        layout
    }

    fn family_names(work: &Work) -> Vec<&str> {
        work.authors().iter().map(Author::family).collect()
    }

    #[test]
    fn the_largest_text_near_the_top_is_the_title_and_the_names_under_it_the_authors() {
        let work = layout(&[
            (760.0, 8.0, "Published as a conference paper at ICLR 2024"),
            (700.0, 17.0, "Self-RAG: Learning to Retrieve, Gener-"),
            (680.0, 17.0, "ate, and Critique through Self-Reflection"),
            (
                650.0,
                10.0,
                "Akari Asai*, Zeqiu Wu, Yizhong Wang and Hannaneh Hajishirzi",
            ),
            (638.0, 10.0, "University of Washington"),
            (600.0, 10.0, "Abstract"),
            (
                580.0,
                10.0,
                "Despite their remarkable capabilities, large language models",
            ),
            (
                568.0,
                10.0,
                "often produce responses containing factual inaccuracies due",
            ),
            (
                556.0,
                10.0,
                "to their sole reliance on the parametric knowledge they hold.",
            ),
        ])
        .guess();
        assert_eq!(
            work.title(),
            Some("Self-RAG: Learning to Retrieve, Generate, and Critique through Self-Reflection")
        );
        assert_eq!(
            work.title.as_ref().map(|t| t.source),
            Some(FieldSource::FirstPageGuess)
        );
        assert_eq!(family_names(&work), ["Asai", "Wu", "Wang", "Hajishirzi"]);
        assert_eq!(
            work.authors.as_ref().map(|a| a.source),
            Some(FieldSource::FirstPageGuess)
        );
    }

    #[test]
    fn a_running_head_or_a_number_in_large_type_is_passed_over_for_the_next_size() {
        let work = layout(&[
            (770.0, 24.0, "arXiv:2310.11511v1 [cs.CL]"),
            (740.0, 20.0, "2023"),
            (700.0, 15.0, "Otters and Their Hands"),
            (680.0, 11.0, "Ann Marrow\tBo Ødegård"),
            (
                600.0,
                10.0,
                "Otters hold hands while they sleep, so that they do not drift",
            ),
            (
                588.0,
                10.0,
                "apart on the water; this paper counts how often they let go.",
            ),
        ])
        .guess();
        assert_eq!(work.title(), Some("Otters and Their Hands"));
        assert_eq!(family_names(&work), ["Marrow", "Ødegård"]);
    }

    #[test]
    fn no_guess_from_a_page_of_body_text_or_from_large_text_low_on_the_page() {
        let body = layout(&[
            (700.0, 10.0, "Just a page of text in one size,"),
            (688.0, 10.0, "with nothing set larger than the rest."),
        ]);
        assert!(body.guess().is_empty());
        let low = layout(&[
            (700.0, 10.0, "A page of text in one size, with a large line"),
            (688.0, 10.0, "that is near its bottom and so not a title."),
            (200.0, 18.0, "Figure caption set large"),
        ]);
        assert!(low.guess().is_empty());
    }

    #[test]
    fn guessed_titles_that_cannot_be_titles_are_refused() {
        for junk in [
            "2023",
            "https://example.org/paper",
            "arXiv:2310.11511v1 [cs.CL] 17 Oct 2023",
            "1 Introduction",
            "Abstract",
            "Inhaltsverzeichnis",
            "Chapter 1",
            "Part II",
            "AIECE2022-0003",
            &"Long ".repeat(70),
        ] {
            assert_eq!(acceptable_title(junk), None, "{junk}");
        }
        assert_eq!(
            acceptable_title("Otters  and\tTheir Hands").as_deref(),
            Some("Otters and Their Hands")
        );
    }

    #[test]
    fn only_lines_of_names_are_authors() {
        let names = |line: &str| names_in_line(line).map(|n| n.len());
        assert_eq!(names("Ann Marrow1, Bo Ødegård2,3 and Cy Twombly†"), Some(3));
        assert_eq!(names("Ludwig van Beethoven\tJ. S. Bach"), Some(2));
        assert_eq!(names("University of Washington"), None);
        assert_eq!(names("Stanford University"), None);
        assert_eq!(names("ann@example.org"), None);
        assert_eq!(names("A Survey"), None);
        assert_eq!(names("American Physical Society"), None);
        assert_eq!(names("Final Project Report"), None);
        assert_eq!(names("October 17, 2023"), None);
    }
}
