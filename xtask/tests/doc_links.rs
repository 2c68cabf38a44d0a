//! The documentation's links, checked: every relative link and image in README.md and
//! docs/**/*.md must lead to a file or folder of the repository, and every `#anchor` to a
//! heading of the Markdown file it names, under GitHub's rules for heading ids. A section moved
//! from one file to another, or a file renamed, fails here naming the file, line and link.
//! Links with a scheme (https:, mailto:, zotero:, …) are not followed; code blocks and code
//! spans are not links.

// Test code: a failed unwrap is a failed test, at the line that failed.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

/// Where the checker looks links up: the repository on disk, or a map of files in the
/// checker's own tests. Paths are relative to the repository root.
trait Tree {
    fn exists(&self, path: &Path) -> bool;
    fn read(&self, path: &Path) -> Option<String>;
}

struct Disk(PathBuf);

impl Tree for Disk {
    fn exists(&self, path: &Path) -> bool {
        self.0.join(path).exists()
    }
    fn read(&self, path: &Path) -> Option<String> {
        std::fs::read_to_string(self.0.join(path)).ok()
    }
}

impl Tree for HashMap<PathBuf, String> {
    fn exists(&self, path: &Path) -> bool {
        // A folder exists when a file lies under it.
        self.keys().any(|k| k.starts_with(path))
    }
    fn read(&self, path: &Path) -> Option<String> {
        self.get(path).cloned()
    }
}

/// A link or image target and the 1-based line it is written on.
#[derive(Debug, PartialEq)]
struct Link {
    line: usize,
    target: String,
}

/// Which lines are code fences or inside one (``` or ~~~, closed by a run at least as long).
fn fenced_lines(text: &str) -> Vec<bool> {
    let mut open: Option<(char, usize)> = None;
    text.lines()
        .map(|line| {
            let trimmed = line.trim_start();
            let marker = trimmed.chars().next().filter(|c| *c == '`' || *c == '~');
            let run = marker.map_or(0, |m| trimmed.chars().take_while(|c| *c == m).count());
            match (open, marker) {
                (None, Some(m)) if run >= 3 => open = Some((m, run)),
                (Some((m, n)), Some(c))
                    if c == m && run >= n && trimmed[run..].trim().is_empty() =>
                {
                    open = None;
                    return true;
                }
                (None, _) => return false,
                _ => {}
            }
            true
        })
        .collect()
}

/// `text` with its fenced code blocks and inline code spans blanked out (newlines kept, so
/// line numbers hold). A span runs from a run of n backticks to the next run of exactly n,
/// within a paragraph; a run without its match is plain text.
fn prose(text: &str) -> Vec<char> {
    let fenced = fenced_lines(text);
    let mut chars: Vec<char> = Vec::with_capacity(text.len());
    for (line, is_fenced) in text
        .split('\n')
        .zip(fenced.iter().chain(std::iter::repeat(&false)))
    {
        if *is_fenced {
            chars.extend(line.chars().map(|_| ' '));
        } else {
            chars.extend(line.chars());
        }
        chars.push('\n');
    }
    let run_at = |chars: &[char], i: usize| chars[i..].iter().take_while(|c| **c == '`').count();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' || (i > 0 && chars[i - 1] == '\\') {
            i += 1;
            continue;
        }
        let n = run_at(&chars, i);
        let mut j = i + n;
        let mut close = None;
        while j < chars.len() {
            if chars[j] == '\n'
                && chars[j + 1..]
                    .iter()
                    .take_while(|c| **c != '\n')
                    .all(|c| c.is_whitespace())
            {
                break; // a blank line ends the paragraph
            }
            if chars[j] == '`' {
                let m = run_at(&chars, j);
                if m == n {
                    close = Some(j + m);
                    break;
                }
                j += m;
            } else {
                j += 1;
            }
        }
        match close {
            Some(end) => {
                for c in &mut chars[i..end] {
                    if *c != '\n' {
                        *c = ' ';
                    }
                }
                i = end;
            }
            None => i += n,
        }
    }
    chars
}

/// The targets of the links `[text](target)` and images `![alt](target)` of `text`, outside
/// code. A target may be written `<…>` and may be followed by a title.
fn links(text: &str) -> Vec<Link> {
    let chars = prose(text);
    let mut found = Vec::new();
    let mut opened: Vec<usize> = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '\n' => line += 1,
            '\\' => i += 1, // an escaped character is text
            '[' => opened.push(i),
            ']' if opened.pop().is_some() && chars.get(i + 1) == Some(&'(') => {
                let mut j = i + 2;
                while chars.get(j).is_some_and(|c| *c == ' ' || *c == '\n') {
                    j += 1;
                }
                let mut target = String::new();
                if chars.get(j) == Some(&'<') {
                    j += 1;
                    while let Some(c) = chars.get(j).filter(|c| **c != '>' && **c != '\n') {
                        target.push(*c);
                        j += 1;
                    }
                } else {
                    let mut depth = 0;
                    while let Some(&c) = chars.get(j) {
                        if c.is_whitespace() || (c == ')' && depth == 0) {
                            break;
                        }
                        depth += i32::from(c == '(') - i32::from(c == ')');
                        target.push(c);
                        j += 1;
                    }
                }
                found.push(Link { line, target });
            }
            _ => {}
        }
        i += 1;
    }
    found
}

/// The id GitHub gives a heading: its text as rendered, lowercased, with every character but
/// letters, digits, `-` and `_` dropped and each space a `-`.
fn slug(heading: &str) -> String {
    // Rendered text: code spans lose their backticks, links keep only their text.
    let mut text = String::new();
    let mut rest = heading;
    while let Some(start) = rest.find('[') {
        let Some(mid) = rest[start..].find("](").map(|m| start + m) else {
            break;
        };
        let Some(end) = rest[mid..].find(')').map(|e| mid + e) else {
            break;
        };
        text.push_str(&rest[..start]);
        text.push_str(&rest[start + 1..mid]);
        rest = &rest[end + 1..];
    }
    text.push_str(rest);
    text.to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The ids of the headings of `text` in order; a repeated id gets `-1`, `-2`, … as on GitHub.
fn heading_ids(text: &str) -> Vec<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut ids = Vec::new();
    for (line, fenced) in text.lines().zip(fenced_lines(text)) {
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if fenced || !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let title = line[hashes..].trim().trim_end_matches('#').trim_end();
        let base = slug(title);
        let mut id = base.clone();
        while let Some(n) = seen.get(&id).copied() {
            seen.insert(id.clone(), n + 1);
            id = format!("{base}-{}", n + 1);
            if !seen.contains_key(&id) {
                break;
            }
        }
        seen.entry(id.clone()).or_insert(0);
        ids.push(id);
    }
    ids
}

/// `%20` and the like, as a browser reads a link.
fn percent_decoded(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
            Some(b) if bytes[i] == b'%' => {
                out.push(b);
                i += 3;
            }
            _ => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether a target names its own scheme (`https:`, `mailto:`, `zotero:`) or host (`//…`).
fn is_external(target: &str) -> bool {
    if target.starts_with("//") {
        return true;
    }
    let Some((scheme, _)) = target.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
}

/// `base/relative` with `.` and `..` resolved, or `None` where it climbs out of the root.
fn resolve(base: &Path, relative: &str) -> Option<PathBuf> {
    let joined = base.join(relative);
    let mut parts: Vec<Component> = Vec::new();
    for part in joined.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop()?;
            }
            other => parts.push(other),
        }
    }
    Some(parts.iter().collect())
}

/// Checks the relative links of `file` (a path from the root, its text `text`): how many were
/// checked, and one line per broken one naming the file, the line, the link and the fault.
fn check(tree: &impl Tree, file: &Path, text: &str) -> (usize, Vec<String>) {
    let folder = file.parent().unwrap_or(Path::new(""));
    let mut checked = 0;
    let mut broken = Vec::new();
    for Link { line, target } in links(text) {
        if is_external(&target) {
            continue;
        }
        checked += 1;
        let at = format!("{}:{line}: link `{target}`", file.display());
        let (path, fragment) = match target.split_once('#') {
            Some((path, fragment)) => (path, Some(fragment)),
            None => (target.as_str(), None),
        };
        let resolved = if path.is_empty() {
            file.to_path_buf()
        } else {
            match resolve(folder, &percent_decoded(path)) {
                Some(p) => p,
                None => {
                    broken.push(format!("{at}: leads outside the repository"));
                    continue;
                }
            }
        };
        if path.is_empty() && fragment.is_none() {
            broken.push(format!("{at}: empty target"));
            continue;
        }
        if !path.is_empty() && !tree.exists(&resolved) {
            broken.push(format!(
                "{at}: no such file or folder `{}`",
                resolved.display()
            ));
            continue;
        }
        let Some(fragment) = fragment else { continue };
        if resolved.extension().is_none_or(|e| e != "md") {
            continue; // GitHub's anchors into other files (#L10) are not headings
        }
        let target_text = if path.is_empty() {
            Some(text.to_string())
        } else {
            tree.read(&resolved)
        };
        let ids = heading_ids(&target_text.unwrap_or_default());
        if !ids.iter().any(|id| id == &percent_decoded(fragment)) {
            broken.push(format!(
                "{at}: `{}` has no heading with the id `{fragment}` (its ids: {})",
                resolved.display(),
                ids.join(", ")
            ));
        }
    }
    (checked, broken)
}

/// README.md and every Markdown file under docs/, from the repository root.
fn documentation(root: &Path) -> Vec<PathBuf> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(root.join(dir)).unwrap() {
            let path = dir.join(entry.unwrap().file_name());
            if root.join(&path).is_dir() {
                walk(root, &path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let mut files = vec![PathBuf::from("README.md")];
    walk(root, Path::new("docs"), &mut files);
    files.sort();
    files
}

#[test]
fn every_relative_link_in_the_readme_and_docs_resolves() {
    // Cargo sets CARGO_MANIFEST_DIR when it runs the test too; that one follows the checkout
    // even when the binary was built in another one sharing the target dir.
    let dir =
        std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").into());
    let root = Path::new(&dir).parent().unwrap().to_path_buf();
    let files = documentation(&root);
    let tree = Disk(root.clone());
    let mut checked = 0;
    let mut broken = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        let (n, mut faults) = check(&tree, file, &text);
        checked += n;
        broken.append(&mut faults);
    }
    assert!(
        broken.is_empty(),
        "{} broken links in README.md and docs/:\n{}",
        broken.len(),
        broken.join("\n")
    );
    assert!(
        checked > 20,
        "only {checked} relative links in {} files: the scan is not reading them",
        files.len()
    );
}

#[test]
fn the_checker_reports_a_missing_file_and_a_bad_anchor_and_skips_code() {
    let tree: HashMap<PathBuf, String> = [
        (
            "docs/guide.md",
            "# Guide\n\n## Set-up: two commands\n\n## Set-up: two commands\n",
        ),
        ("docs/screenshots/answer.png", ""),
        ("README.md", "# Top\n"),
    ]
    .into_iter()
    .map(|(p, t)| (PathBuf::from(p), t.to_string()))
    .collect();
    let text = "\
# Notes

See [the set-up](guide.md#set-up-two-commands), [again](guide.md#set-up-two-commands-1),
![an answer](screenshots/answer.png \"title\"), [up](../README.md), [here](#notes) and
[web](https://example.com/x.md) [mail](mailto:a@example.com) [ref](zotero://select/items/1).

[gone](missing.md) and [bad](guide.md#nowhere) and [out](../../etc/passwd).

```sh
[fenced](fenced-missing.md)
```

`[span](span-missing.md)` and a span over two lines: `one
[two](span-missing.md)` and ``double `[x](tick-missing.md)` ``.
";
    let (checked, broken) = check(&tree, Path::new("docs/b.md"), text);
    assert_eq!(checked, 8, "{broken:#?}");
    assert_eq!(broken.len(), 3, "{broken:#?}");
    assert!(
        broken[0].starts_with("docs/b.md:7: link `missing.md`: no such file"),
        "{}",
        broken[0]
    );
    assert!(
        broken[1]
            .starts_with("docs/b.md:7: link `guide.md#nowhere`: `docs/guide.md` has no heading"),
        "{}",
        broken[1]
    );
    assert!(
        broken[2].contains("leads outside the repository"),
        "{}",
        broken[2]
    );
}

#[test]
fn heading_ids_follow_githubs_rules() {
    let text = "\
# Self-RAG Desktop
## Where the code departs from `DESIGN.md`, and why
### Set-up: two commands
## A
## A
## A
```
# not a heading
```
#not a heading either
## [Linked](x.md) title_with_underscore
## SIGKILL during a download, an export, a settings or history save
";
    assert_eq!(
        heading_ids(text),
        [
            "self-rag-desktop",
            "where-the-code-departs-from-designmd-and-why",
            "set-up-two-commands",
            "a",
            "a-1",
            "a-2",
            "linked-title_with_underscore",
            "sigkill-during-a-download-an-export-a-settings-or-history-save",
        ]
    );
}
