#!/usr/bin/env python3
"""Prints the shaping-form tables of crates/selfrag-index/src/extract/bidi.rs.

Each code point of Arabic Presentation Forms-A (U+FB50-U+FDFF) and -B (U+FE70-U+FEFF) becomes
one letter from its decomposition tag in the Unicode Character Database of this Python:
i <initial>, m <medial>, f <final>, s <isolated>, - anything else. Run with Python 3.11
(Unicode 14.0) to reproduce the committed tables; the forms have not changed since Unicode 6.
"""

import unicodedata

TAGS = {"<initial>": "i", "<medial>": "m", "<final>": "f", "<isolated>": "s"}


def forms(first, last):
    out = []
    for code in range(first, last + 1):
        decomposition = unicodedata.decomposition(chr(code))
        out.append(TAGS.get(decomposition.split(" ")[0] if decomposition else "", "-"))
    return "".join(out)


if __name__ == "__main__":
    print(f"Unicode {unicodedata.unidata_version}")
    print("FORMS_A", forms(0xFB50, 0xFDFF))
    print("FORMS_B", forms(0xFE70, 0xFEFF))
