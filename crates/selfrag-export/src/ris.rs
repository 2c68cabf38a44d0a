//! RIS export: the cited works as RIS records, the exchange format of EndNote, Mendeley and
//! Zotero's import. Each record is `TY  - JOUR` … `ER  - `, one `TAG  - value` a line, lines
//! ended by CR LF as the format's specification says. Every value is one line (a line break in
//! a title or a label is folded to a space), so no text can start a tag of its own. `ID` is the
//! work's citation key (as in the other exports) and `N1` the answer's use of it: its citation
//! numbers, the pages it cites and the provenance line.

use selfrag_core::Answer;
use selfrag_works::{Sourced, Work, WorkType};

use super::{ExportOptions, View, one_line};
use crate::cited::{CitedWork, CitedWorks};

/// The cited works as RIS.
pub fn ris(answer: &Answer, options: &ExportOptions) -> String {
    let view = View::new(answer, options);
    let cited = CitedWorks::new(answer, &view);
    let mut out = String::new();
    for work in &cited.works {
        record(&mut out, work, view.provenance.as_deref());
    }
    out
}

/// The RIS type of a kind of work.
fn ris_type(kind: WorkType) -> &'static str {
    match kind {
        WorkType::JournalArticle => "JOUR",
        WorkType::ConferencePaper => "CONF",
        WorkType::Book => "BOOK",
        WorkType::Chapter => "CHAP",
        WorkType::Thesis => "THES",
        WorkType::Report => "RPRT",
        WorkType::WebPage => "ELEC",
        WorkType::Other => "GEN",
    }
}

fn record(out: &mut String, cited: &CitedWork<'_>, provenance: Option<&str>) {
    let mut line = |tag: &str, value: &str| {
        out.push_str(&format!("{tag}  - {}\r\n", one_line(value)));
    };
    let w = &cited.work;
    let text = |f: &Option<Sourced<String>>| Work::text(f).map(one_line).filter(|t| !t.is_empty());
    line("TY", ris_type(w.kind()));
    line("ID", &cited.key);
    if let Some(title) = cited.title() {
        line("TI", title);
    }
    for author in w.authors() {
        line(
            "AU",
            &match author {
                selfrag_works::Author::Person { family, given } if !given.trim().is_empty() => {
                    format!("{}, {}", one_line(family), one_line(given))
                }
                other => other.family().to_string(),
            },
        );
    }
    if let Some(date) = &w.date {
        let d = date.value;
        line("PY", &format!("{:04}", d.year));
        if let Some(month) = d.month {
            let day = d.day.map(|d| format!("{d:02}")).unwrap_or_default();
            line("DA", &format!("{:04}/{month:02}/{day}/", d.year));
        }
    }
    if let Some(container) = text(&w.container) {
        line("T2", &container);
        if w.kind() == WorkType::JournalArticle {
            line("JO", &container);
        }
    }
    if let Some(volume) = text(&w.volume) {
        line("VL", &volume);
    }
    if let Some(issue) = text(&w.issue) {
        line("IS", &issue);
    }
    if let Some(pages) = text(&w.pages) {
        let pages = crate::tex::work_pages(&pages, "-");
        match pages.split_once('-') {
            Some((start, end)) => {
                line("SP", start);
                line("EP", end);
            }
            None => line("SP", &pages),
        }
    }
    if let Some(publisher) = text(&w.publisher) {
        line("PB", &publisher);
    }
    if let Some(doi) = text(&w.doi) {
        line("DO", &doi);
    }
    if let Some(isbn) = text(&w.isbn) {
        line("SN", &isbn);
    }
    let url =
        text(&w.url).or_else(|| text(&w.arxiv).map(|id| format!("https://arxiv.org/abs/{id}")));
    if let Some(url) = url {
        line("UR", &url);
    }
    line("L1", cited.path);
    line("N1", &cited.note(provenance, "–"));
    out.push_str("ER  - \r\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_answer::{self, answer_citing, article};

    #[test]
    fn a_work_is_a_record_with_its_tags_and_crlf_line_ends() {
        let ris = ris(&answer_citing(article()), &ExportOptions::default());
        let expected = "TY  - JOUR\r
ID  - marrowTelemetry98\r
TI  - Self-RAG and the Ålesund telemetry: 100% {sure} & more\r
AU  - Marrow, Ann\r
AU  - Ødegård, Bjørn\r
AU  - World Health Organization\r
PY  - 1998\r
DA  - 1998/03/15/\r
T2  - Journal of Telemetry & Control\r
JO  - Journal of Telemetry & Control\r
VL  - 12\r
IS  - 3\r
SP  - 117\r
EP  - 129\r
PB  - Nordic Press\r
DO  - 10.1000/xyz_1\r
UR  - https://example.org/a_b?c=1&d=2\r
L1  - /docs/paper.pdf\r
N1  - Cited as [2]; page 3\r
ER  - \r
";
        assert!(ris.contains(expected), "{ris}");
        assert!(
            ris.starts_with("TY  - GEN\r\nID  - notes\r\nTI  - Notes <script>"),
            "{ris}"
        );
        // Every line ends CR LF; none is bare.
        assert_eq!(ris.matches('\n').count(), ris.matches("\r\n").count());
    }

    #[test]
    fn a_line_break_in_a_value_cannot_start_a_tag() {
        let mut answer = test_answer::answer();
        answer.passages[1].title = "Paper\r\nER  - \r\nTY  - JOUR\nAU  - Evil".into();
        answer.passages[1].page_label = Some("3\nN1  - x".into());
        answer.passages[0].path = "/docs/notes\r\nTY  - JOUR.md".into();
        let ris = ris(&answer, &ExportOptions::default());
        let tags: Vec<&str> = ris
            .lines()
            .filter_map(|l| l.split_once("  - ").map(|(t, _)| t))
            .collect();
        assert_eq!(
            tags,
            [
                "TY", "ID", "TI", "L1", "N1", "ER", "TY", "ID", "TI", "L1", "N1", "ER"
            ],
            "{ris}"
        );
        for kind in WorkType::ALL {
            assert_eq!(
                ris_type(kind).len(),
                if kind == WorkType::Other { 3 } else { 4 }
            );
        }
    }
}
