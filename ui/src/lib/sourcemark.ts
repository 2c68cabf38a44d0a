// Where a cited passage is in its source, as the evidence viewer marks it.
//
// A PDF page's text comes from pdf.js as runs of text ("items"), one per text-layer span; the
// passage comes from the library's own PDF reader. The two agree on the letters and digits but
// not always on spaces, line breaks, hyphenation at line ends, ligatures or accents, so both are
// folded to their base letters and digits (NFKD without the marks, lower case) before the
// passage is looked for on the page.
// A text source (HTML, Markdown, plain text, DOCX) needs no search: the library gives the
// passage's span in the text, in characters, which is turned into JavaScript's UTF-16 indices.

/** Part of one text item to mark: `[start, end)` in UTF-16 units of the item's string. */
export interface ItemRange {
  item: number;
  start: number;
  end: number;
}

/** Where the passage was found on the page. */
export interface PageMark {
  ranges: ItemRange[];
  /**
   * `exact`: every letter and digit of the passage, in order, with nothing else between them;
   * `ends`: its beginning and its end were found and everything between them is marked (the
   * two readers differ somewhere inside).
   */
  match: "exact" | "ends";
}

/** A folded string and, for each of its UTF-16 units, the item and the item's units it came from. */
interface Folded {
  text: string;
  from: { item: number; start: number; end: number }[];
}

const LETTER_OR_DIGIT = /[\p{L}\p{N}]/u;

function fold(items: readonly string[]): Folded {
  let text = "";
  const from: Folded["from"] = [];
  items.forEach((item, i) => {
    let offset = 0;
    for (const ch of item) {
      const source = { item: i, start: offset, end: offset + ch.length };
      offset += ch.length;
      // Compatibility forms and accents folded away on both sides: a PDF may draw an accent
      // as a glyph of its own (TeX's `Conclus˜ao`) where the library composed it (`Conclusão`).
      for (const c of ch.normalize("NFKD").toLowerCase().replace(/ı/g, "i")) {
        if (!LETTER_OR_DIGIT.test(c)) continue;
        text += c;
        for (let u = 0; u < c.length; u++) from.push(source);
      }
    }
  });
  return { text, from };
}

/** The passage's letters and digits, folded as the page's are. */
export function foldText(text: string): string {
  return fold([text]).text;
}

/** Folded passage ends looked for when the whole passage is not on the page, longest first. */
const END_LENGTHS = [80, 48, 24];

/**
 * Where `passage` is among a page's text `items`, or `null` when neither it nor its two ends
 * are on the page.
 */
export function markOnPage(items: readonly string[], passage: string): PageMark | null {
  const page = fold(items);
  const wanted = foldText(passage);
  if (wanted.length === 0) return null;
  const at = page.text.indexOf(wanted);
  if (at >= 0) return { ranges: itemRanges(page, at, at + wanted.length), match: "exact" };
  for (const length of END_LENGTHS) {
    if (length * 2 > wanted.length) continue;
    const head = wanted.slice(0, length);
    const tail = wanted.slice(-length);
    const start = page.text.indexOf(head);
    if (start < 0) continue;
    const tailAt = page.text.indexOf(tail, start + length);
    // The ends must enclose about the passage's length, not two far places.
    if (tailAt < 0 || tailAt + length - start > wanted.length * 1.5) continue;
    return { ranges: itemRanges(page, start, tailAt + length), match: "ends" };
  }
  return null;
}

/** The item ranges behind folded units `[start, end)`, one per item, in page order. */
function itemRanges(page: Folded, start: number, end: number): ItemRange[] {
  const ranges: ItemRange[] = [];
  for (let u = start; u < end; u++) {
    const { item, start: s, end: e } = page.from[u];
    const last = ranges[ranges.length - 1];
    if (last && last.item === item) {
      last.start = Math.min(last.start, s);
      last.end = Math.max(last.end, e);
    } else {
      ranges.push({ item, start: s, end: e });
    }
  }
  return ranges;
}

/** The text the ranges cover, joined by spaces: what the viewer marks, as a reader sees it. */
export function markedText(items: readonly string[], ranges: readonly ItemRange[]): string {
  return ranges.map((r) => items[r.item].slice(r.start, r.end)).join(" ");
}

/**
 * `[start, end)` in characters (Unicode scalar values, as the library counts) turned into
 * UTF-16 indices of `text`; clamped to the text.
 */
export function utf16Span(text: string, start: number, end: number): [number, number] {
  let chars = 0;
  let units = 0;
  let from = text.length;
  for (const ch of text) {
    if (chars === start) from = units;
    if (chars === end) return [from, units];
    chars++;
    units += ch.length;
  }
  return [Math.min(from, units), units];
}
