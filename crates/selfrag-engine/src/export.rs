//! Renders an answer for people: Markdown with the citations as footnotes that quote their
//! passage, file and page.

use selfrag_core::Answer;

/// The formats an answer can be exported to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub enum ExportFormat {
    Md,
    Json,
}

impl ExportFormat {
    /// The file extension for a save dialog.
    pub fn extension(self) -> &'static str {
        match self {
            Self::Md => "md",
            Self::Json => "json",
        }
    }
}

impl std::str::FromStr for ExportFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "md" | "markdown" => Ok(Self::Md),
            "json" => Ok(Self::Json),
            other => Err(format!("unknown export format `{other}`: use md or json")),
        }
    }
}

/// The answer in `format`.
pub fn render(answer: &Answer, format: ExportFormat) -> String {
    match format {
        ExportFormat::Md => markdown(answer),
        // Serializing plain data with string keys cannot fail.
        ExportFormat::Json => serde_json::to_string_pretty(answer).unwrap_or_default(),
    }
}

/// Markdown: the question as the heading, each segment followed by its footnote marker, and
/// one footnote per cited passage with its title, file, page and the quoted passage.
pub fn markdown(answer: &Answer) -> String {
    let mut out = format!("# {}\n\n", one_line(&answer.question));
    let body: Vec<String> = answer
        .segments
        .iter()
        .map(|s| match s.citation {
            Some(n) => format!("{}[^{n}]", s.text.trim()),
            None => s.text.trim().to_string(),
        })
        .collect();
    out.push_str(&body.join(" "));
    out.push('\n');
    let mut cited: Vec<usize> = answer.segments.iter().filter_map(|s| s.citation).collect();
    cited.sort_unstable();
    cited.dedup();
    if !cited.is_empty() {
        out.push('\n');
    }
    for n in cited {
        let Some(p) = n.checked_sub(1).and_then(|i| answer.passages.get(i)) else {
            continue;
        };
        let page = p.page.map(|pg| format!(", p. {pg}")).unwrap_or_default();
        out.push_str(&format!(
            "[^{n}]: **{}**, `{}`{page}\n",
            one_line(&p.title),
            p.path
        ));
        for line in p.text.lines() {
            out.push_str(&format!("    > {line}\n"));
        }
    }
    out
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}
