// The "Edit reference" form's logic: a work record as the form's text fields, what each field
// must look like, and the person's record a save sends (set_work). The engine keeps each
// source's record apart and replaces the person's whole record on every save, so a save sends
// the fields changed now together with the person's earlier edits; an emptied field that was
// their edit goes back to what the sources say.

import type { Author, Work, WorkDate, WorkType } from "./ipc/types";

/** The fields the form edits, in its order. */
export const WORK_FIELDS = [
  "kind",
  "title",
  "authors",
  "date",
  "container",
  "volume",
  "issue",
  "pages",
  "publisher",
  "doi",
  "arxiv",
  "isbn",
  "url",
  "citationKey",
] as const;

export type WorkField = (typeof WORK_FIELDS)[number];

/** The form's text for each field ("" where the record has none). */
export type WorkDraft = Record<WorkField, string>;

/** Each field's label and, where one helps, an example. */
export const FIELD_LABELS: Record<WorkField, { label: string; hint?: string }> = {
  kind: { label: "Type" },
  title: { label: "Title" },
  authors: { label: "Authors", hint: "One a line: Family, Given — or an organisation's name" },
  date: { label: "Date", hint: "YYYY, YYYY-MM or YYYY-MM-DD" },
  container: { label: "Journal, proceedings or book" },
  volume: { label: "Volume" },
  issue: { label: "Issue" },
  pages: { label: "Pages", hint: "117-129" },
  publisher: { label: "Publisher" },
  doi: { label: "DOI", hint: "10.1000/xyz" },
  arxiv: { label: "arXiv id", hint: "2310.11511" },
  isbn: { label: "ISBN" },
  url: { label: "URL" },
  citationKey: { label: "Citation key", hint: "marrow1998telemetry" },
};

/** One author a line: a person as "Family, Given" ("Family," without given names), an organisation as its name. */
export function formatAuthors(authors: Author[]): string {
  return authors
    .map((a) => (a.kind === "organisation" ? a.name : `${a.family}, ${a.given}`.trimEnd()))
    .join("\n");
}

/** The authors of the form's text; a line with a comma is a person, one without an organisation. */
export function parseAuthors(text: string): Author[] {
  return text
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line.length > 0)
    .map((line) => {
      const comma = line.indexOf(",");
      if (comma < 0) return { kind: "organisation", name: line };
      return {
        kind: "person",
        family: line.slice(0, comma).trim(),
        given: line.slice(comma + 1).trim(),
      };
    });
}

/** `1998`, `1998-03`, `1998-03-15` (selfrag-works' `WorkDate` display). */
export function formatDate(date: WorkDate): string {
  const pad = (n: number, width: number) => String(n).padStart(width, "0");
  let text = pad(date.year, 4);
  if (date.month !== undefined) {
    text += `-${pad(date.month, 2)}`;
    if (date.day !== undefined) text += `-${pad(date.day, 2)}`;
  }
  return text;
}

/** A date written YYYY, YYYY-MM or YYYY-MM-DD with a real month and day; null otherwise. */
export function parseDate(text: string): WorkDate | null {
  const m = /^(\d{4})(?:-(\d{2})(?:-(\d{2}))?)?$/.exec(text.trim());
  if (!m) return null;
  const date: WorkDate = { year: Number(m[1]) };
  if (m[2] !== undefined) {
    const month = Number(m[2]);
    if (month < 1 || month > 12) return null;
    date.month = month;
  }
  if (m[3] !== undefined) {
    const day = Number(m[3]);
    const last = new Date(Date.UTC(date.year, date.month ?? 1, 0)).getUTCDate();
    if (day < 1 || day > last) return null;
    date.day = day;
  }
  return date;
}

/** The form's text of a record. */
export function draftOf(work: Work): WorkDraft {
  const text = (field: { value: string } | undefined) => field?.value ?? "";
  return {
    kind: work.kind?.value ?? "",
    title: text(work.title),
    authors: formatAuthors(work.authors?.value ?? []),
    date: work.date ? formatDate(work.date.value) : "",
    container: text(work.container),
    volume: text(work.volume),
    issue: text(work.issue),
    pages: text(work.pages),
    publisher: text(work.publisher),
    doi: text(work.doi),
    arxiv: text(work.arxiv),
    isbn: text(work.isbn),
    url: text(work.url),
    citationKey: text(work.citationKey),
  };
}

/** What is wrong with a field's text, for each field that is wrong; empty when it can be saved. */
export function draftErrors(draft: WorkDraft): Partial<Record<WorkField, string>> {
  const errors: Partial<Record<WorkField, string>> = {};
  const date = draft.date.trim();
  if (date !== "" && parseDate(date) === null) {
    errors.date = "Write the date as YYYY, YYYY-MM or YYYY-MM-DD (for example 1998-03-15).";
  }
  const doi = draft.doi.trim();
  if (doi !== "" && !doi.startsWith("10.")) {
    errors.doi = "A DOI starts with 10. (for example 10.1000/xyz), without https://doi.org/.";
  }
  const nameless = parseAuthors(draft.authors).findIndex(
    (a) => a.kind === "person" && a.family === "",
  );
  if (nameless >= 0) {
    errors.authors = `Author ${nameless + 1} has no family name before the comma.`;
  }
  const key = draft.citationKey.trim();
  if (/[\s,{}"#%~\\']/.test(key)) {
    errors.citationKey = "A citation key has no spaces, commas, braces, quotes or # % ~ \\.";
  }
  return errors;
}

/** A field's value as the record holds it, from the form's text (not empty). */
function valueOf(field: WorkField, text: string): Work[WorkField] {
  const person = <T>(value: T) => ({ value, source: "person" as const });
  switch (field) {
    case "kind":
      return person(text as WorkType);
    case "authors":
      return person(parseAuthors(text));
    case "date": {
      const date = parseDate(text);
      return date === null ? undefined : person(date);
    }
    case "doi":
      return person(text.toLowerCase());
    case "isbn":
      return person(text.replace(/[\s-]/g, "").toUpperCase());
    default:
      return person(text);
  }
}

/**
 * The person's record a save sends: every field whose text changed from `work`'s (their edit
 * now) and every field that was already their edit and is still filled in. A field emptied in
 * the form is left out: where it was their edit, the sources' value shows again; where it came
 * from a source, that value stays.
 */
export function personRecord(work: Work, draft: WorkDraft): Work {
  const before = draftOf(work);
  const record: Work = {};
  for (const field of WORK_FIELDS) {
    const now = draft[field].trim();
    if (now === "") continue;
    const theirs = work[field]?.source === "person";
    if (now !== before[field].trim()) {
      // The value types of the fields differ; `valueOf` gives each its own.
      (record as Record<WorkField, unknown>)[field] = valueOf(field, now);
    } else if (theirs) {
      (record as Record<WorkField, unknown>)[field] = work[field];
    }
  }
  return record;
}

/** Whether the person's record of a work has fields (their edits win over every source). */
export function hasPersonEdits(sources: readonly string[]): boolean {
  return sources.includes("person");
}
