//! Glyph names to the text they stand for, read as the Adobe Glyph List specification reads
//! them: drop what follows the first `.` (`a.sc`, `one.taboldstyle`), split ligatures at `_`
//! (`f_f_i`), then each part is a name of the list, `uniXXXX…` or `uXXXX[XX]`, else nothing.
//!
//! Only the names that fonts in PDFs give their glyphs without a `/ToUnicode` map are here, not
//! the list's 4,500: the 228 names of the CFF standard strings that name characters (which
//! are the names of Adobe's Latin fonts), the Greek letters, and what Computer Modern and the
//! TeX fonts after it call their ligatures, math symbols and variants (`ff`, `dotlessj`,
//! `epsilon1`, `arrowdblright`). Families of names are read by rule rather than listed: a
//! letter and an accent (`Zdotaccent`, `ncaron`), the Cyrillic `afii100NN` names of the T2
//! encodings, small capitals and old-style figures (`Asmall`, `sevenoldstyle`), superiors and
//! inferiors, and a math delimiter in its larger sizes (`parenleftBig`, `summationdisplay`).
//! Where the list maps a name into the private use area (small capitals, old-style figures)
//! the letter or digit is given instead, which is what a search for it types.

/// The text of glyph name `name`, or `None` for a name that says nothing: `.notdef`, TeX's
/// `cwm` and `suppress`, or a name that is in no list and no form the specification reads
/// (`a1`, `g0003`; [`draws_no_character`] tells those apart).
pub(super) fn glyph_text(name: &str) -> Option<String> {
    let name = name.split('.').next().unwrap_or_default();
    let text: String = name.split('_').filter_map(component_text).collect();
    (!text.is_empty()).then_some(text)
}

/// Whether glyph name `name` is one that draws no character at all, as opposed to a symbol or
/// a piece of a picture the lists have no name for: `.notdef` (and names starting with a
/// period), TeX's compound word mark, and OT1's `suppress`, the stroke of `ł` drawn before
/// an `l` inside a word.
pub(super) fn draws_no_character(name: &str) -> bool {
    name.is_empty() || name.starts_with('.') || matches!(name, "suppress" | "cwm" | "compwordmark")
}

/// One `_`-separated part of a glyph name.
fn component_text(part: &str) -> Option<String> {
    if part.is_empty() {
        return None;
    }
    if let Some(c) = listed(part) {
        return Some(c.to_string());
    }
    if let Some(text) = part.strip_prefix("uni").and_then(uni_sequence) {
        return Some(text);
    }
    if let Some(c) = part.strip_prefix('u').and_then(unicode_scalar) {
        return Some(c.to_string());
    }
    if let Some(c) = afii_cyrillic(part) {
        return Some(c.to_string());
    }
    if let Some(text) = letter_with_accent(part) {
        return Some(text);
    }
    if let Some(letter) = part.strip_suffix("small") {
        // Small capitals stand for lower-case letters (`Aacutesmall`, `Acutesmall`).
        let text = listed(letter)
            .map(String::from)
            .or_else(|| letter_with_accent(letter))
            .or_else(|| listed(&lower_first(letter)).map(String::from))?;
        return Some(text.to_lowercase());
    }
    for variant in ["oldstyle", "superior", "inferior", "fitted"] {
        if let Some(plain) = part.strip_suffix(variant) {
            return listed(plain).map(String::from);
        }
    }
    // A delimiter or operator in one of TeX's larger sizes is the same character.
    for size in ["bigg", "Bigg", "big", "Big", "display", "text"] {
        if let Some(c) = part.strip_suffix(size).and_then(listed) {
            return Some(c.to_string());
        }
    }
    None
}

fn listed(name: &str) -> Option<char> {
    GLYPH_NAMES
        .binary_search_by_key(&name, |&(listed, _)| listed)
        .ok()
        .map(|at| GLYPH_NAMES[at].1)
}

fn lower_first(name: &str) -> String {
    let mut chars = name.chars();
    chars
        .next()
        .map(|first| first.to_lowercase().chain(chars).collect())
        .unwrap_or_default()
}

/// `uni` followed by groups of four upper-case hex digits, each a character of the Basic
/// Multilingual Plane other than a surrogate.
fn uni_sequence(hex: &str) -> Option<String> {
    if hex.is_empty() || !hex.len().is_multiple_of(4) {
        return None;
    }
    let mut text = String::new();
    for at in (0..hex.len()).step_by(4) {
        let group = hex.get(at..at + 4)?;
        if !group
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(&b))
        {
            return None;
        }
        text.push(char::from_u32(u32::from_str_radix(group, 16).ok()?)?);
    }
    Some(text)
}

/// `u` followed by four to six upper-case hex digits naming one character.
fn unicode_scalar(hex: &str) -> Option<char> {
    if !(4..=6).contains(&hex.len())
        || !hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(&b))
    {
        return None;
    }
    char::from_u32(u32::from_str_radix(hex, 16).ok()?)
}

/// The Adobe Glyph List's names of the Cyrillic letters (`afii10017` is А), which the T2A, T2B
/// and T2C encodings of Russian and other Cyrillic TeX fonts use.
fn afii_cyrillic(name: &str) -> Option<char> {
    let number: u32 = name.strip_prefix("afii")?.parse().ok()?;
    let code = match number {
        10017..=10022 => 0x0410 + number - 10017,
        10023 => 0x0401,
        10024..=10049 => 0x0416 + number - 10024,
        10050 => 0x0490,
        10051..=10061 => 0x0402 + number - 10051,
        10062 => 0x040E,
        10065..=10070 => 0x0430 + number - 10065,
        10071 => 0x0451,
        10072..=10097 => 0x0436 + number - 10072,
        10098 => 0x0491,
        10099..=10109 => 0x0452 + number - 10099,
        10110 => 0x045E,
        10145 => 0x040F,
        10146 => 0x0462,
        10147 => 0x0472,
        10148 => 0x0474,
        10193 => 0x045F,
        10194 => 0x0463,
        10195 => 0x0473,
        10196 => 0x0475,
        _ => return None,
    };
    char::from_u32(code)
}

/// A letter named with its accent (`Aogonek`, `ecaron`, `Scommaaccent`, `zdotaccent`), composed
/// where Unicode has the letter, else the letter and the combining accent.
fn letter_with_accent(name: &str) -> Option<String> {
    let (accent, mark) = ACCENTS
        .iter()
        .find(|(accent, _)| name.len() > accent.len() && name.ends_with(accent))?;
    let letter = &name[..name.len() - accent.len()];
    let base = match letter {
        "dotlessi" => 'i',
        "dotlessj" => 'j',
        _ => {
            let mut chars = letter.chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) if c.is_ascii_alphabetic() => c,
                _ => return None,
            }
        }
    };
    // Latvian's and Romanian's "comma" letters are encoded with a cedilla where Unicode has
    // no comma-below form (Ģ, Ķ, Ļ, Ņ, Ŗ).
    let composed = unicode_normalization::char::compose(base, *mark).or_else(|| {
        (*accent == "commaaccent")
            .then(|| unicode_normalization::char::compose(base, '\u{327}'))
            .flatten()
    });
    Some(match composed {
        Some(c) => c.to_string(),
        None => format!("{base}{mark}"),
    })
}

/// Accent names as glyph names spell them, with their combining marks.
const ACCENTS: &[(&str, char)] = &[
    ("acute", '\u{301}'),
    ("grave", '\u{300}'),
    ("circumflex", '\u{302}'),
    ("tilde", '\u{303}'),
    ("dieresis", '\u{308}'),
    ("ring", '\u{30a}'),
    ("cedilla", '\u{327}'),
    ("caron", '\u{30c}'),
    ("breve", '\u{306}'),
    ("macron", '\u{304}'),
    ("ogonek", '\u{328}'),
    ("dotaccent", '\u{307}'),
    ("hungarumlaut", '\u{30b}'),
    ("commaaccent", '\u{326}'),
    ("dotbelow", '\u{323}'),
    ("hookabove", '\u{309}'),
];

/// Glyph names and their characters, sorted by name (byte order) for a binary search. Values
/// are the Adobe Glyph List's, except where it has two (`Delta` is Greek here, not U+2206
/// INCREMENT; `Omega` and `mu` likewise) or a private-use one (`dotlessj`).
#[rustfmt::skip]
const GLYPH_NAMES: &[(&str, char)] = &[
    ("A", '\u{41}'), ("AE", '\u{c6}'), ("Aacute", '\u{c1}'), ("Acircumflex", '\u{c2}'),
    ("Adieresis", '\u{c4}'), ("Agrave", '\u{c0}'), ("Alpha", '\u{391}'), ("Aring", '\u{c5}'),
    ("Atilde", '\u{c3}'), ("B", '\u{42}'), ("Beta", '\u{392}'), ("C", '\u{43}'),
    ("Ccedilla", '\u{c7}'), ("Chi", '\u{3a7}'), ("D", '\u{44}'), ("Dcroat", '\u{110}'),
    ("Delta", '\u{394}'), ("E", '\u{45}'), ("Eacute", '\u{c9}'), ("Ecircumflex", '\u{ca}'),
    ("Edieresis", '\u{cb}'), ("Egrave", '\u{c8}'), ("Eng", '\u{14a}'), ("Epsilon", '\u{395}'),
    ("Eta", '\u{397}'), ("Eth", '\u{d0}'), ("Euro", '\u{20ac}'), ("F", '\u{46}'),
    ("Finv", '\u{2132}'), ("G", '\u{47}'), ("Gamma", '\u{393}'), ("Germandbls", '\u{1e9e}'),
    ("Gmir", '\u{2141}'), ("H", '\u{48}'), ("I", '\u{49}'), ("IJ", '\u{132}'),
    ("Iacute", '\u{cd}'), ("Icircumflex", '\u{ce}'), ("Idieresis", '\u{cf}'),
    ("Ifractur", '\u{2111}'), ("Igrave", '\u{cc}'), ("Iota", '\u{399}'), ("J", '\u{4a}'),
    ("K", '\u{4b}'), ("Kappa", '\u{39a}'), ("L", '\u{4c}'), ("Lambda", '\u{39b}'),
    ("Ldot", '\u{13f}'), ("Lslash", '\u{141}'), ("M", '\u{4d}'), ("Mu", '\u{39c}'),
    ("N", '\u{4e}'), ("Ntilde", '\u{d1}'), ("Nu", '\u{39d}'), ("O", '\u{4f}'), ("OE", '\u{152}'),
    ("Oacute", '\u{d3}'), ("Ocircumflex", '\u{d4}'), ("Odieresis", '\u{d6}'), ("Ograve", '\u{d2}'),
    ("Omega", '\u{3a9}'), ("Omegainv", '\u{2127}'), ("Omicron", '\u{39f}'), ("Oslash", '\u{d8}'),
    ("Otilde", '\u{d5}'), ("P", '\u{50}'), ("Phi", '\u{3a6}'), ("Pi", '\u{3a0}'),
    ("Psi", '\u{3a8}'), ("Q", '\u{51}'), ("R", '\u{52}'), ("Rfractur", '\u{211c}'),
    ("Rho", '\u{3a1}'), ("S", '\u{53}'), ("Scaron", '\u{160}'), ("Sigma", '\u{3a3}'),
    ("T", '\u{54}'), ("Tau", '\u{3a4}'), ("Theta", '\u{398}'), ("Thorn", '\u{de}'),
    ("U", '\u{55}'), ("Uacute", '\u{da}'), ("Ucircumflex", '\u{db}'), ("Udieresis", '\u{dc}'),
    ("Ugrave", '\u{d9}'), ("Upsilon", '\u{3a5}'), ("Upsilon1", '\u{3d2}'), ("V", '\u{56}'),
    ("W", '\u{57}'), ("X", '\u{58}'), ("Xi", '\u{39e}'), ("Y", '\u{59}'), ("Yacute", '\u{dd}'),
    ("Ydieresis", '\u{178}'), ("Z", '\u{5a}'), ("Zcaron", '\u{17d}'), ("Zeta", '\u{396}'),
    ("a", '\u{61}'), ("aacute", '\u{e1}'), ("acircumflex", '\u{e2}'), ("acute", '\u{b4}'),
    ("adieresis", '\u{e4}'), ("ae", '\u{e6}'), ("agrave", '\u{e0}'), ("aleph", '\u{2135}'),
    ("alpha", '\u{3b1}'), ("ampersand", '\u{26}'), ("angbracketleft", '\u{27e8}'),
    ("angbracketright", '\u{27e9}'), ("angle", '\u{2220}'), ("angleleft", '\u{2329}'),
    ("angleright", '\u{232a}'), ("approxequal", '\u{2248}'),
    ("aring", '\u{e5}'), ("arrowboth", '\u{2194}'), ("arrowbothv", '\u{2195}'),
    ("arrowdblboth", '\u{21d4}'), ("arrowdblbothv", '\u{21d5}'), ("arrowdbldown", '\u{21d3}'),
    ("arrowdblleft", '\u{21d0}'), ("arrowdblright", '\u{21d2}'), ("arrowdblup", '\u{21d1}'),
    ("arrowdown", '\u{2193}'), ("arrowhookleft", '\u{21a9}'), ("arrowhookright", '\u{21aa}'),
    ("arrowleft", '\u{2190}'), ("arrowleftbothalf", '\u{21bd}'), ("arrowlefttophalf", '\u{21bc}'),
    ("arrownortheast", '\u{2197}'), ("arrownorthwest", '\u{2196}'), ("arrowright", '\u{2192}'),
    ("arrowrightbothalf", '\u{21c1}'), ("arrowrighttophalf", '\u{21c0}'),
    ("arrowsoutheast", '\u{2198}'), ("arrowsouthwest", '\u{2199}'), ("arrowup", '\u{2191}'),
    ("asciicircum", '\u{5e}'), ("asciitilde", '\u{7e}'), ("asterisk", '\u{2a}'),
    ("asteriskmath", '\u{2217}'), ("at", '\u{40}'), ("atilde", '\u{e3}'), ("b", '\u{62}'),
    ("backslash", '\u{5c}'), ("bar", '\u{7c}'), ("bardbl", '\u{2225}'), ("because", '\u{2235}'),
    ("beta", '\u{3b2}'), ("beth", '\u{2136}'), ("braceleft", '\u{7b}'), ("braceright", '\u{7d}'),
    ("bracketleft", '\u{5b}'), ("bracketright", '\u{5d}'), ("breve", '\u{2d8}'),
    ("brokenbar", '\u{a6}'), ("bullet", '\u{2022}'), ("c", '\u{63}'), ("caron", '\u{2c7}'),
    ("ccedilla", '\u{e7}'), ("cedilla", '\u{b8}'), ("ceilingleft", '\u{2308}'),
    ("ceilingright", '\u{2309}'), ("cent", '\u{a2}'), ("chi", '\u{3c7}'),
    ("circlecopyrt", '\u{25ef}'), ("circledivide", '\u{2298}'), ("circledot", '\u{2299}'),
    ("circleminus", '\u{2296}'), ("circlemultiply", '\u{2297}'), ("circleplus", '\u{2295}'),
    ("circumflex", '\u{2c6}'), ("club", '\u{2663}'), ("colon", '\u{3a}'),
    ("colonmonetary", '\u{20a1}'), ("comma", '\u{2c}'), ("complement", '\u{2201}'),
    ("congruent", '\u{2245}'), ("contintegral", '\u{222e}'), ("coproduct", '\u{2210}'),
    ("copyright", '\u{a9}'), ("currency", '\u{a4}'), ("d", '\u{64}'), ("dagger", '\u{2020}'),
    ("daggerdbl", '\u{2021}'), ("daleth", '\u{2138}'), ("dcroat", '\u{111}'), ("degree", '\u{b0}'),
    ("delta", '\u{3b4}'), ("diamond", '\u{2662}'), ("diamondmath", '\u{22c4}'),
    ("dieresis", '\u{a8}'), ("divide", '\u{f7}'), ("dollar", '\u{24}'), ("dotaccent", '\u{2d9}'),
    ("dotlessi", '\u{131}'), ("dotlessj", '\u{237}'), ("dotplus", '\u{2214}'), ("e", '\u{65}'),
    ("eacute", '\u{e9}'), ("ecircumflex", '\u{ea}'), ("edieresis", '\u{eb}'), ("egrave", '\u{e8}'),
    ("eight", '\u{38}'), ("eightinferior", '\u{2088}'), ("eightsuperior", '\u{2078}'),
    ("element", '\u{2208}'), ("ellipsis", '\u{2026}'), ("emdash", '\u{2014}'),
    ("emptyset", '\u{2205}'), ("endash", '\u{2013}'), ("eng", '\u{14b}'), ("epsilon", '\u{3b5}'),
    ("epsilon1", '\u{3f5}'), ("epsiloninv", '\u{3f6}'), ("equal", '\u{3d}'),
    ("equivalence", '\u{2261}'), ("equivasymptotic", '\u{224d}'), ("estimated", '\u{212e}'),
    ("eta", '\u{3b7}'), ("eth", '\u{f0}'), ("exclam", '\u{21}'), ("exclamdown", '\u{a1}'),
    ("existential", '\u{2203}'), ("f", '\u{66}'), ("ff", '\u{fb00}'), ("ffi", '\u{fb03}'),
    ("ffl", '\u{fb04}'), ("fi", '\u{fb01}'), ("figuredash", '\u{2012}'), ("five", '\u{35}'),
    ("fiveeighths", '\u{215d}'), ("fiveinferior", '\u{2085}'), ("fivesuperior", '\u{2075}'),
    ("fl", '\u{fb02}'), ("flat", '\u{266d}'), ("floorleft", '\u{230a}'),
    ("floorright", '\u{230b}'), ("florin", '\u{192}'), ("follows", '\u{227b}'),
    ("followsequal", '\u{2ab0}'), ("forces", '\u{22a9}'), ("four", '\u{34}'),
    ("fourinferior", '\u{2084}'), ("foursuperior", '\u{2074}'), ("fraction", '\u{2044}'),
    ("g", '\u{67}'), ("gamma", '\u{3b3}'), ("germandbls", '\u{df}'), ("gimel", '\u{2137}'),
    ("gradient", '\u{2207}'), ("grave", '\u{60}'), ("greater", '\u{3e}'),
    ("greaterequal", '\u{2265}'), ("greatermuch", '\u{226b}'), ("guillemotleft", '\u{ab}'),
    ("guillemotright", '\u{bb}'), ("guilsinglleft", '\u{2039}'), ("guilsinglright", '\u{203a}'),
    ("h", '\u{68}'), ("heart", '\u{2661}'), ("hungarumlaut", '\u{2dd}'), ("hyphen", '\u{2d}'),
    ("hyphentwo", '\u{2010}'), ("i", '\u{69}'), ("iacute", '\u{ed}'), ("icircumflex", '\u{ee}'),
    ("idieresis", '\u{ef}'), ("igrave", '\u{ec}'), ("ij", '\u{133}'), ("infinity", '\u{221e}'),
    ("integral", '\u{222b}'), ("integraldisplay", '\u{222b}'), ("intersection", '\u{2229}'),
    ("intersectiondbl", '\u{22d2}'), ("intersectionsq", '\u{2293}'), ("iota", '\u{3b9}'),
    ("j", '\u{6a}'), ("k", '\u{6b}'), ("kappa", '\u{3ba}'), ("kgreenlandic", '\u{138}'),
    ("l", '\u{6c}'), ("lambda", '\u{3bb}'), ("latticetop", '\u{22a4}'), ("ldot", '\u{140}'),
    ("less", '\u{3c}'), ("lessequal", '\u{2264}'), ("lessmuch", '\u{226a}'),
    ("logicaland", '\u{2227}'), ("logicalnot", '\u{ac}'), ("logicalor", '\u{2228}'),
    ("longs", '\u{17f}'), ("lozenge", '\u{25ca}'), ("lscript", '\u{2113}'), ("lslash", '\u{142}'),
    ("m", '\u{6d}'), ("macron", '\u{af}'), ("mapsto", '\u{21a6}'), ("measuredangle", '\u{2221}'),
    ("minus", '\u{2212}'), ("minusplus", '\u{2213}'), ("mu", '\u{3bc}'), ("multiply", '\u{d7}'),
    ("n", '\u{6e}'), ("nabla", '\u{2207}'), ("napostrophe", '\u{149}'), ("natural", '\u{266e}'),
    ("negationslash", '\u{338}'), ("nine", '\u{39}'), ("nineinferior", '\u{2089}'),
    ("ninesuperior", '\u{2079}'), ("notelement", '\u{2209}'), ("notequal", '\u{2260}'),
    ("notsubset", '\u{2284}'), ("nsuperior", '\u{207f}'), ("ntilde", '\u{f1}'), ("nu", '\u{3bd}'),
    ("numbersign", '\u{23}'), ("o", '\u{6f}'), ("oacute", '\u{f3}'), ("ocircumflex", '\u{f4}'),
    ("odieresis", '\u{f6}'), ("oe", '\u{153}'), ("ogonek", '\u{2db}'), ("ograve", '\u{f2}'),
    ("omega", '\u{3c9}'), ("omega1", '\u{3d6}'), ("omicron", '\u{3bf}'), ("one", '\u{31}'),
    ("onedotenleader", '\u{2024}'), ("oneeighth", '\u{215b}'), ("onehalf", '\u{bd}'),
    ("oneinferior", '\u{2081}'), ("onequarter", '\u{bc}'), ("onesuperior", '\u{b9}'),
    ("onethird", '\u{2153}'), ("openbullet", '\u{25e6}'), ("ordfeminine", '\u{aa}'),
    ("ordmasculine", '\u{ba}'), ("oslash", '\u{f8}'), ("otilde", '\u{f5}'), ("owner", '\u{220b}'),
    ("p", '\u{70}'), ("paragraph", '\u{b6}'), ("parenleft", '\u{28}'),
    ("parenleftinferior", '\u{208d}'), ("parenleftsuperior", '\u{207d}'), ("parenright", '\u{29}'),
    ("parenrightinferior", '\u{208e}'), ("parenrightsuperior", '\u{207e}'),
    ("partialdiff", '\u{2202}'), ("percent", '\u{25}'), ("period", '\u{2e}'),
    ("periodcentered", '\u{b7}'), ("perpendicular", '\u{22a5}'), ("perthousand", '\u{2030}'),
    ("phi", '\u{3c6}'), ("phi1", '\u{3d5}'), ("pi", '\u{3c0}'), ("pi1", '\u{3d6}'),
    ("planckover2pi", '\u{210f}'), ("planckover2pi1", '\u{210f}'), ("plus", '\u{2b}'),
    ("plusminus", '\u{b1}'), ("precedes", '\u{227a}'), ("precedesequal", '\u{2aaf}'),
    ("prime", '\u{2032}'), ("product", '\u{220f}'), ("propersubset", '\u{2282}'),
    ("propersuperset", '\u{2283}'), ("proportional", '\u{221d}'), ("psi", '\u{3c8}'),
    ("q", '\u{71}'), ("question", '\u{3f}'), ("questiondown", '\u{bf}'), ("quotedbl", '\u{22}'),
    ("quotedblbase", '\u{201e}'), ("quotedblleft", '\u{201c}'), ("quotedblright", '\u{201d}'),
    ("quoteleft", '\u{2018}'), ("quoteright", '\u{2019}'), ("quotesinglbase", '\u{201a}'),
    ("quotesingle", '\u{27}'), ("r", '\u{72}'), ("radical", '\u{221a}'),
    ("reflexsubset", '\u{2286}'), ("reflexsuperset", '\u{2287}'), ("registered", '\u{ae}'),
    ("rho", '\u{3c1}'), ("rho1", '\u{3f1}'), ("ring", '\u{2da}'), ("s", '\u{73}'),
    ("satisfies", '\u{22a8}'), ("scaron", '\u{161}'), ("section", '\u{a7}'),
    ("semicolon", '\u{3b}'), ("seven", '\u{37}'), ("seveneighths", '\u{215e}'),
    ("seveninferior", '\u{2087}'), ("sevensuperior", '\u{2077}'), ("sharp", '\u{266f}'),
    ("sigma", '\u{3c3}'), ("sigma1", '\u{3c2}'), ("similar", '\u{223c}'),
    ("similarequal", '\u{2243}'), ("six", '\u{36}'), ("sixinferior", '\u{2086}'),
    ("sixsuperior", '\u{2076}'), ("slash", '\u{2f}'), ("slurabove", '\u{2322}'),
    ("slurbelow", '\u{2323}'), ("space", '\u{20}'), ("spade", '\u{2660}'), ("square", '\u{25a1}'),
    ("squaresolid", '\u{25a0}'), ("star", '\u{22c6}'), ("sterling", '\u{a3}'),
    ("subsetsqequal", '\u{2291}'), ("suchthat", '\u{220b}'), ("summation", '\u{2211}'),
    ("supersetsqequal", '\u{2292}'), ("t", '\u{74}'), ("tau", '\u{3c4}'),
    ("therefore", '\u{2234}'), ("theta", '\u{3b8}'), ("theta1", '\u{3d1}'), ("thorn", '\u{fe}'),
    ("three", '\u{33}'), ("threeeighths", '\u{215c}'), ("threeinferior", '\u{2083}'),
    ("threequarters", '\u{be}'), ("threesuperior", '\u{b3}'), ("tie", '\u{2040}'),
    ("tilde", '\u{2dc}'), ("trademark", '\u{2122}'), ("triangle", '\u{25b3}'),
    ("triangleinv", '\u{25bd}'), ("triangleleft", '\u{25c1}'), ("triangleright", '\u{25b7}'),
    ("trianglesolid", '\u{25b2}'), ("turnstileleft", '\u{22a2}'), ("turnstileright", '\u{22a3}'),
    ("two", '\u{32}'), ("twodotenleader", '\u{2025}'), ("twoinferior", '\u{2082}'),
    ("twosuperior", '\u{b2}'), ("twothirds", '\u{2154}'), ("u", '\u{75}'), ("uacute", '\u{fa}'),
    ("ucircumflex", '\u{fb}'), ("udieresis", '\u{fc}'), ("ugrave", '\u{f9}'),
    ("underscore", '\u{5f}'), ("union", '\u{222a}'), ("uniondbl", '\u{22d3}'),
    ("unionmulti", '\u{228e}'), ("unionsq", '\u{2294}'), ("universal", '\u{2200}'),
    ("upsilon", '\u{3c5}'), ("v", '\u{76}'), ("vector", '\u{20d7}'), ("visiblespace", '\u{2423}'),
    ("w", '\u{77}'), ("weierstrass", '\u{2118}'), ("wreathproduct", '\u{2240}'), ("x", '\u{78}'),
    ("xi", '\u{3be}'), ("y", '\u{79}'), ("yacute", '\u{fd}'), ("ydieresis", '\u{ff}'),
    ("yen", '\u{a5}'), ("z", '\u{7a}'), ("zcaron", '\u{17e}'), ("zero", '\u{30}'),
    ("zeroinferior", '\u{2080}'), ("zerosuperior", '\u{2070}'), ("zeta", '\u{3b6}'),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted_for_its_binary_search() {
        for pair in GLYPH_NAMES.windows(2) {
            assert!(pair[0].0 < pair[1].0, "{} before {}", pair[0].0, pair[1].0);
        }
    }

    #[test]
    fn glyph_names_read_as_the_adobe_glyph_list_reads_them() {
        let text = |name| glyph_text(name);
        // Listed names: the standard strings, TeX's ligatures and math, Greek.
        assert_eq!(text("A").as_deref(), Some("A"));
        assert_eq!(text("quoteright").as_deref(), Some("\u{2019}"));
        assert_eq!(text("ffi").as_deref(), Some("\u{fb03}"));
        assert_eq!(text("dotlessi").as_deref(), Some("\u{131}"));
        assert_eq!(text("endash").as_deref(), Some("\u{2013}"));
        assert_eq!(text("Delta").as_deref(), Some("\u{394}"));
        assert_eq!(text("epsilon1").as_deref(), Some("\u{3f5}"));
        assert_eq!(text("arrowdblright").as_deref(), Some("\u{21d2}"));
        // Fourier's and Utopia's brackets of `\meta{…}` (xkeyval's manual).
        assert_eq!(text("angleleft").as_deref(), Some("\u{2329}"));
        // Suffixes and ligatures of parts.
        assert_eq!(text("a.sc").as_deref(), Some("a"));
        assert_eq!(text("one.taboldstyle").as_deref(), Some("1"));
        assert_eq!(text("f_f_i").as_deref(), Some("ffi"));
        // uniXXXX (one or more) and uXXXX[XX].
        assert_eq!(text("uni2423").as_deref(), Some("\u{2423}"));
        assert_eq!(text("uni00660069").as_deref(), Some("fi"));
        assert_eq!(text("u1D461").as_deref(), Some("\u{1d461}"));
        assert_eq!(text("uniD800"), None, "a surrogate is no character");
        assert_eq!(text("uni00e9"), None, "lower-case hex is not the form");
        // Families read by rule.
        assert_eq!(text("Zdotaccent").as_deref(), Some("Ż"));
        assert_eq!(text("ncaron").as_deref(), Some("ň"));
        assert_eq!(text("Gcommaaccent").as_deref(), Some("Ģ"));
        assert_eq!(text("Scommaaccent").as_deref(), Some("Ș"));
        assert_eq!(text("afii10017").as_deref(), Some("А"));
        assert_eq!(text("afii10071").as_deref(), Some("ё"));
        assert_eq!(text("afii10097").as_deref(), Some("я"));
        assert_eq!(text("Asmall").as_deref(), Some("a"));
        assert_eq!(text("Eacutesmall").as_deref(), Some("é"));
        assert_eq!(text("sevenoldstyle").as_deref(), Some("7"));
        assert_eq!(text("parenleftBig").as_deref(), Some("("));
        assert_eq!(text("summationdisplay").as_deref(), Some("\u{2211}"));
        assert_eq!(text("unionmultitext").as_deref(), Some("\u{228e}"));
        // Names that say nothing: no character at all, or one no list names.
        assert!(draws_no_character(".notdef") && draws_no_character("suppress"));
        assert!(!draws_no_character("a1") && !draws_no_character("g0003"));
        assert_eq!(text(".notdef"), None);
        assert_eq!(text("a1"), None);
        assert_eq!(text("g0003"), None);
        assert_eq!(text("suppress"), None);
        assert_eq!(text(""), None);
    }
}
