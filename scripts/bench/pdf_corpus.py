#!/usr/bin/env python3
"""How well the library reads real PDFs, page by page, against pdftotext (poppler).

Usage: pdf_corpus.py SELFRAG_BINARY CORPUS_DIR OUT_DIR [TWO_COLUMN_LIST]

Every PDF under CORPUS_DIR is read by both sides, one process per file (a file that hangs or
crashes costs itself only):
- ours: `selfrag debug extract --pages-to OUT_DIR/ours/N.json FILE`, the library's extractor
  and chunker exactly as indexing runs them, with its passages and the page each claims;
- pdftotext: `pdftotext -enc UTF-8 FILE -`, pages separated by form feeds, in its default
  reading-order mode (it finds columns).

Figures, over all pages pdftotext reads text from (corpus-wide sums, not means of ratios):
- word recall: the share of pdftotext's words (a multiset per page) that our page has;
- order: the share of pdftotext's consecutive word pairs that our page has consecutively
  (columns read across, or a running head in the middle of a sentence, break pairs);
- attribution (words): the share of our passages whose words are found (90% or more of them) on
  the pdftotext page of the page number the passage claims. Where the two sides split words
  differently (a space that one side sees between two glyphs and the other does not, as in
  letter-spaced code and dot leaders) a passage on the right page counts as not found;
- attribution (spacing aside): the same with the spacing left out: 90% or more of the passage's
  words of four or more letters (all its words if it has none) occur in the pdftotext page's
  letters and digits run together (NFKC, lower case), so a word either side wrote as two, or
  two as one, still counts where its letters are the same and in the same order;
- chance: each attribution test run against the page half the file away instead of the page
  claimed (files of three pages or more), to show how often it passes for a wrong page;
- on another page: passages whose words are not on the page they claim but are on another page
  (spacing aside), the mistakes of attribution proper;
- hyphens and ligatures left in our text: a word broken at a line end ("exam- ple") and the
  ligature characters U+FB00-FB06, per 1,000 words;
- work records: how many files got a title, authors, a date and a DOI, by the source each came
  from (the file's metadata, an identifier in its text, a first-page guess); every file's record
  is listed in OUT_DIR/works.tsv for checking titles by hand;
- refused: files pdftotext reads text from that we refuse, by name.

Words are NFKC-folded, lower-cased runs of letters and digits; a hyphen at a line end joins the
two halves on both sides before counting, so the figures do not depend on whether a side joins
them (which the hyphen count measures on its own).

The same figures for the two-column files alone, named by SHA-256 in TWO_COLUMN_LIST.

Prints one JSON object; OUT_DIR/files.tsv has the figures per file, OUT_DIR/details.md the
refused files and the ones read worst, for the benchmark's report.
"""

import collections
import hashlib
import json
import os
import re
import subprocess
import sys
import time
import unicodedata

WORD = re.compile(r"[^\W_]+")
LINE_END_HYPHEN = re.compile(r"([^\W\d_])-[ \t]*\n[ \t]*([^\W\d_])")
BROKEN_WORD = re.compile(r"[^\W\d_]{2,}- +[a-z]{2,}")
LIGATURES = re.compile("[\ufb00-\ufb06]")
TIMEOUT_S = 120


# The work record's fields the bench counts by source (`selfrag_works::Work`, camelCase).
WORK_FIELDS = ("title", "authors", "date", "doi")


def words(text):
    text = LINE_END_HYPHEN.sub(r"\1\2", text)
    return WORD.findall(unicodedata.normalize("NFKC", text).lower())


def run_together(text):
    """A page's letters and digits with nothing between them, NFKC and lower case."""
    return "".join(WORD.findall(unicodedata.normalize("NFKC", LINE_END_HYPHEN.sub(r"\1\2", text)).lower()))


def found_share(passage_words, letters):
    """The share of the passage's words that occur in a page's run-together letters."""
    return sum(1 for w in passage_words if w in letters) / max(len(passage_words), 1)


def bigrams(ws):
    return collections.Counter(zip(ws, ws[1:]))


def overlap(a, b):
    """Size of the multiset intersection of two Counters."""
    return sum(min(n, b[k]) for k, n in a.items())


def pdftotext_pages(path):
    try:
        run = subprocess.run(
            ["pdftotext", "-enc", "UTF-8", path, "-"],
            capture_output=True,
            timeout=TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return None
    if run.returncode != 0:
        return None
    pages = run.stdout.decode("utf-8", "replace").split("\f")
    if pages and pages[-1].strip() == "":
        pages = pages[:-1]
    return pages


def ours(binary, path, out):
    try:
        run = subprocess.run(
            [binary, "debug", "extract", "--pages-to", out, path],
            capture_output=True,
            timeout=TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {TIMEOUT_S} s"}
    if run.returncode != 0 or not os.path.exists(out):
        return {"error": run.stderr.decode("utf-8", "replace")[-300:] or f"exit {run.returncode}"}
    with open(out, encoding="utf-8") as f:
        return json.load(f)


def main():
    binary, corpus, out_dir = sys.argv[1:4]
    two_column = set()
    if len(sys.argv) > 4:
        with open(sys.argv[4], encoding="utf-8") as f:
            two_column = {line.split()[0] for line in f if line.strip() and not line.startswith("#")}
    two = collections.Counter()
    os.makedirs(os.path.join(out_dir, "ours"), exist_ok=True)
    files = sorted(
        os.path.join(root, name)
        for root, _, names in os.walk(corpus)
        for name in names
        if name.lower().endswith(".pdf")
    )
    totals = collections.Counter()
    # (field, source) -> files whose work record has that field from that source.
    works = collections.Counter()
    work_rows = []
    refused = []
    rows = []
    started = time.time()
    for i, path in enumerate(files):
        theirs = pdftotext_pages(path)
        their_words = [words(p) for p in theirs] if theirs else []
        if not theirs or sum(len(w) for w in their_words) == 0:
            totals["unread_by_pdftotext"] += 1
            continue
        totals["files"] += 1
        mine = ours(binary, path, os.path.join(out_dir, "ours", f"{i}.json"))
        if mine.get("error"):
            refused.append({"file": os.path.relpath(path, corpus), "error": mine["error"].strip()})
            totals["their_words"] += sum(len(w) for w in their_words)
            totals["pages"] += sum(1 for w in their_words if w)
            continue
        work = mine.get("work", {})
        for field in WORK_FIELDS:
            value = work.get(field)
            if value:
                works[(field, value["source"])] += 1
        authors = "; ".join(
            a.get("family") or a.get("name", "") for a in (work.get("authors") or {}).get("value", [])
        )
        work_rows.append(
            (
                os.path.relpath(path, corpus),
                (work.get("title") or {}).get("value", ""),
                (work.get("title") or {}).get("source", ""),
                authors,
                str(((work.get("date") or {}).get("value") or {}).get("year", "")),
                (work.get("doi") or {}).get("value", ""),
            )
        )
        by_number = {p["number"]: p["text"] for p in mine["pages"]}
        f = collections.Counter()
        for n, tw in enumerate(their_words, start=1):
            if not tw:
                continue
            text = by_number.get(n, "")
            ow = words(text)
            f["pages"] += 1
            f["their_words"] += len(tw)
            f["recalled"] += overlap(collections.Counter(tw), collections.Counter(ow))
            tb = bigrams(tw)
            f["their_pairs"] += sum(tb.values())
            f["ordered"] += overlap(tb, bigrams(ow))
            f["our_words"] += len(ow)
            f["broken_words"] += len(BROKEN_WORD.findall(text))
            f["ligatures"] += len(LIGATURES.findall(text))
        their_counts = [collections.Counter(w) for w in their_words]
        their_letters = [run_together(p) for p in theirs]
        for passage in mine["passages"]:
            pw = collections.Counter(words(passage["text"]))
            if not pw:
                continue
            f["passages"] += 1
            page = passage.get("page")
            if not (page and 1 <= page <= len(their_counts)):
                continue
            if overlap(pw, their_counts[page - 1]) >= 0.9 * sum(pw.values()):
                f["attributed"] += 1
            passage_words = [w for w in pw.elements() if len(w) >= 4] or list(pw.elements())
            if found_share(passage_words, their_letters[page - 1]) >= 0.9:
                f["attributed_text"] += 1
            elif any(found_share(passage_words, other) >= 0.9 for other in their_letters):
                f["on_another_page"] += 1
            if len(their_counts) >= 3:
                far = (page - 1 + len(their_counts) // 2) % len(their_counts)
                f["chance_tests"] += 1
                f["chance_words"] += overlap(pw, their_counts[far]) >= 0.9 * sum(pw.values())
                f["chance_text"] += found_share(passage_words, their_letters[far]) >= 0.9
        totals.update(f)
        with open(path, "rb") as pdf:
            if hashlib.sha256(pdf.read()).hexdigest() in two_column:
                two.update(f)
                two["files"] += 1
        rows.append(
            (
                os.path.relpath(path, corpus),
                f["pages"],
                f["recalled"] / max(f["their_words"], 1),
                f["ordered"] / max(f["their_pairs"], 1),
                f["attributed"] / max(f["passages"], 1),
                f["attributed_text"] / max(f["passages"], 1),
            )
        )
        print(f"{i + 1}/{len(files)} {rows[-1][0]}", file=sys.stderr)
    with open(os.path.join(out_dir, "files.tsv"), "w", encoding="utf-8") as f:
        f.write("file\tpages\tword_recall\torder\tattribution_words\tattribution_text\n")
        for r in sorted(rows, key=lambda r: r[2]):
            f.write(f"{r[0]}\t{r[1]}\t{r[2]:.4f}\t{r[3]:.4f}\t{r[4]:.4f}\t{r[5]:.4f}\n")
    with open(os.path.join(out_dir, "works.tsv"), "w", encoding="utf-8") as f:
        f.write("file\ttitle\ttitle_source\tauthors\tyear\tdoi\n")
        for r in work_rows:
            f.write("\t".join(c.replace("\t", " ").replace("\n", " ") for c in r) + "\n")
    our_words = max(totals["our_words"], 1)
    worst = sorted(rows, key=lambda r: r[2])[:8]
    with open(os.path.join(out_dir, "details.md"), "w", encoding="utf-8") as f:
        if refused:
            f.write("\nRefused (pdftotext reads them):\n\n")
            for r in refused:
                f.write(f"- `{r['file']}`: {r['error'].splitlines()[-1][:200]}\n")
        f.write("\nRead worst (word recall, order):\n\n")
        for r in worst:
            f.write(f"- `{r[0]}` ({r[1]} pages): {r[2]:.3f}, {r[3]:.3f}\n")
    print(
        json.dumps(
            {
                "files": totals["files"],
                "pages": totals["pages"],
                "unread_by_pdftotext": totals["unread_by_pdftotext"],
                "word_recall": totals["recalled"] / max(totals["their_words"], 1),
                "order": totals["ordered"] / max(totals["their_pairs"], 1),
                "attribution": totals["attributed"] / max(totals["passages"], 1),
                "attribution_text": totals["attributed_text"] / max(totals["passages"], 1),
                "on_another_page": totals["on_another_page"],
                "chance_words": totals["chance_words"] / max(totals["chance_tests"], 1),
                "chance_text": totals["chance_text"] / max(totals["chance_tests"], 1),
                "passages": totals["passages"],
                "broken_words_per_1000": 1000 * totals["broken_words"] / our_words,
                "ligatures_per_1000": 1000 * totals["ligatures"] / our_words,
                "refused_count": len(refused),
                "refused": refused,
                "two_column_files": two["files"],
                "two_column_word_recall": two["recalled"] / max(two["their_words"], 1),
                "two_column_order": two["ordered"] / max(two["their_pairs"], 1),
                "works": {f"{field}/{source}": n for (field, source), n in sorted(works.items())},
                "seconds": time.time() - started,
            }
        )
    )


if __name__ == "__main__":
    main()
