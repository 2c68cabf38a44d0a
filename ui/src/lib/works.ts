// How the UI names a work, in one place: the author–year label of a citation chip and of a
// library row ("Marrow & Ødegård 1998"), the printed page a chip cites, the full reference of
// the evidence panel and of a chip's hover, and the DOI's address. `authorYear`, `printedPage`
// and `doiUrl` say what selfrag-works' `cite::author_year`, selfrag-core's
// `Passage::printed_page` and `cite::doi_url` say (held equal by ui/src/tests/golden/works.json,
// which the Rust side writes); the exports cite with those.

import { FIELD_SOURCE_LABELS } from "./ipc/bindings";
import type { Author, CitationStyle, FieldSource, Passage, Work } from "./ipc/types";

/** The name a citation gives an author: the family name, or the organisation's. */
export function familyName(author: Author): string {
  return author.kind === "person" ? author.family : author.name;
}

/** "Given Family", or the organisation's name (selfrag-works' `Author::display`). */
export function displayName(author: Author): string {
  if (author.kind === "organisation") return author.name;
  return author.given === "" ? author.family : `${author.given} ${author.family}`;
}

/** Up to four words of a title, with an ellipsis where it was longer. */
export function shortTitle(title: string): string {
  const words = title.split(/\s+/).filter((w) => w.length > 0);
  return words.length <= 4 ? words.join(" ") : `${words.slice(0, 4).join(" ")}…`;
}

/**
 * "Marrow 1998", "Marrow & Ødegård 1998", "Marrow et al. 1998", with "n.d." for a work without
 * a year; without authors, the title's first words stand in for them. Null where the work has
 * neither authors nor a title.
 */
export function authorYear(work: Work | null | undefined): string | null {
  if (!work) return null;
  const authors = work.authors?.value ?? [];
  let names: string;
  if (authors.length === 0) {
    if (work.title === undefined) return null;
    names = shortTitle(work.title.value);
  } else if (authors.length === 1) {
    names = familyName(authors[0]);
  } else if (authors.length === 2) {
    names = `${familyName(authors[0])} & ${familyName(authors[1])}`;
  } else {
    names = `${familyName(authors[0])} et al.`;
  }
  return `${names} ${work.date?.value.year ?? "n.d."}`;
}

/** The number printed on a passage's page (its label where the PDF has one), else its page. */
export function printedPage(passage: Pick<Passage, "page" | "page_label">): string | null {
  return passage.page_label ?? (passage.page === null ? null : String(passage.page));
}

/** Whether a passage's record says anything. */
function hasWork(work: Work | null | undefined): work is Work {
  return work !== null && work !== undefined && Object.keys(work).length > 0;
}

/**
 * What a citation chip reads in author–year mode: "Marrow & Ødegård 1998, p. 2" (the printed
 * page); a passage whose document has no record is named by its title's first words.
 */
export function authorYearCitation(passage: Passage): string {
  const name = authorYear(passage.work) ?? shortTitle(passage.title);
  const page = printedPage(passage);
  return page === null ? name : `${name}, p. ${page}`;
}

/** Whether a chip shows author–year: pandoc citations read so on screen too. */
export function citesAuthorYear(style: CitationStyle): boolean {
  return style !== "numbers";
}

/**
 * The address that resolves a DOI: `https://doi.org/` and the DOI with every character a URL's
 * path cannot hold percent-encoded (UTF-8, upper-case hex), as selfrag-works' `doi_url`.
 */
export function doiUrl(doi: string): string {
  const keep = /[A-Za-z0-9\-._~/:;()@!$&'*+,=]/;
  let url = "https://doi.org/";
  const bytes = new TextEncoder();
  for (const c of doi.trim()) {
    if (keep.test(c)) {
      url += c;
    } else {
      for (const b of bytes.encode(c)) url += `%${b.toString(16).toUpperCase().padStart(2, "0")}`;
    }
  }
  return url;
}

/** The parts of a full reference, each null where the record lacks it. */
export interface ReferenceParts {
  /** "Ann Marrow, Bjørn Ødegård & Ludwig van Beethoven". */
  authors: string | null;
  year: string | null;
  title: string | null;
  container: string | null;
  /** "12(3), pp. 117–129": volume, issue and pages. */
  location: string | null;
  publisher: string | null;
  /** The DOI's address. */
  doi: string | null;
}

/** The full reference of a work, in parts (the evidence panel lays them out). */
export function referenceParts(work: Work): ReferenceParts {
  const authors = (work.authors?.value ?? []).map(displayName);
  const names =
    authors.length <= 1
      ? (authors[0] ?? null)
      : `${authors.slice(0, -1).join(", ")} & ${authors[authors.length - 1]}`;
  const volume = work.volume?.value;
  const issue = work.issue?.value;
  const volumeIssue =
    volume !== undefined
      ? `${volume}${issue !== undefined ? `(${issue})` : ""}`
      : issue !== undefined
        ? `no. ${issue}`
        : null;
  const pages = work.pages ? `pp. ${work.pages.value.replace(/\s*-+\s*/g, "–")}` : null;
  const location = [volumeIssue, pages].filter((p) => p !== null).join(", ");
  return {
    authors: names,
    year: work.date ? String(work.date.value.year) : null,
    title: work.title?.value ?? null,
    container: work.container?.value ?? null,
    location: location === "" ? null : location,
    publisher: work.publisher?.value ?? null,
    doi: work.doi ? doiUrl(work.doi.value) : null,
  };
}

/** A sentence that ends with its own punctuation, or a full stop. */
function sentence(text: string): string {
  return /[.?!]$/.test(text) ? text : `${text}.`;
}

/**
 * "Ann Marrow & Bjørn Ødegård (1998). Telemetry of the fjord. Journal of Telemetry, 12(3),
 * pp. 117–129. https://doi.org/10.1000/xyz": what a chip's hover and the evidence panel show.
 * Null where the record has none of it.
 */
export function fullReference(work: Work | null | undefined): string | null {
  if (!hasWork(work)) return null;
  const parts = referenceParts(work);
  const out: string[] = [];
  if (parts.authors !== null || parts.year !== null) {
    out.push(`${parts.authors ?? "Anonymous"} (${parts.year ?? "n.d."}).`);
  }
  if (parts.title !== null) out.push(sentence(parts.title));
  const where = [parts.container, parts.location].filter((p) => p !== null).join(", ");
  if (where !== "") out.push(sentence(where));
  if (parts.publisher !== null) out.push(sentence(parts.publisher));
  if (parts.doi !== null) out.push(parts.doi);
  return out.length > 0 ? out.join(" ") : null;
}

/** How the UI says where a field came from ("guessed from the first page", "Zotero"). */
export function sourceLabel(source: FieldSource): string {
  return FIELD_SOURCE_LABELS[source];
}

/**
 * Whether the work's Zotero item is in `collection` or in a collection inside it (as
 * selfrag-index's search filter decides: `Thesis` holds `Thesis/Chapter 2`, `Thes` holds nothing).
 */
export function inCollection(work: Work | null | undefined, collection: string): boolean {
  const name = collection.replace(/\/+$/, "");
  return (work?.zotero?.collections ?? []).some((c) => c === name || c.startsWith(`${name}/`));
}

/** Every collection the works are in, with the collections that hold them, sorted. */
export function collectionsOf(works: (Work | null | undefined)[]): string[] {
  const all = new Set<string>();
  for (const work of works) {
    for (const path of work?.zotero?.collections ?? []) {
      const parts = path.split("/");
      for (let i = 1; i <= parts.length; i++) all.add(parts.slice(0, i).join("/"));
    }
  }
  return [...all].sort((a, b) => a.localeCompare(b));
}
