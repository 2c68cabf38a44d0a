//! The pre-tokenizers of byte-level BPE vocabularies: the `tokenizer.ggml.pre` names llama.cpp
//! knows for Llama-architecture GGUFs, each mapped to llama.cpp's list of split regexes, and the
//! split itself.
//!
//! llama.cpp (`src/llama-vocab.cpp`, `llm_tokenizer_bpe`) gives each pre-tokenizer a list of
//! regexes and applies them one after another (`src/unicode.cpp`, `unicode_regex_split`): each
//! regex splits every piece the previous ones left into its matches *and* the unmatched stretches
//! between them, both kept as pieces, and looks only inside its piece (a piece's end is the
//! text's end to `(?!\S)`). It runs the GPT-2, Llama-3 and Qwen2 patterns through hand-written
//! splitters meant to equal the regexes, and the others through `std::regex` on a text whose
//! non-ASCII characters are collapsed to one byte per Unicode category. Here every pattern runs
//! through `fancy-regex` on the text itself; the parity test against the real llama.cpp
//! (crates/selfrag-remote/tests/tokenizer_parity.rs) pins that the two agree. Letters, numbers
//! and the rest are Unicode's categories as the `regex` crate's tables give them; llama.cpp's
//! own tables may be of an older Unicode version, which matters only for characters assigned
//! since.

use fancy_regex::Regex;

use crate::error::ModelError;

/// GPT-2's split (`'s`, letters, numbers, other runs each with one optional leading space,
/// whitespace runs but the last space before a word).
const GPT2: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)";

/// Llama-3's split: contractions in either case, a letter run with one leading non-letter,
/// numbers in groups of up to three digits, line breaks kept with what precedes them.
const LLAMA3: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Qwen2's split: Llama-3's with every digit on its own.
const QWEN2: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Mistral's Tekken split: words split before capitals (a letter run is any non-lowercase
/// letters, then any non-uppercase ones), single digits, `/` kept with line breaks.
const TEKKEN: &str = r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Poro's and Viking's split: runs of anything but whitespace and a few punctuation marks.
const PORO: &str = r" ?[^(\s|.,!?…。，、।۔،)]+";

/// DeepSeek LLM's letter runs: one optional whitespace, then Latin, Greek, Cyrillic and other
/// cased scripts' letters (llama.cpp's list).
const DEEPSEEK_LETTERS: &str = "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+";

/// DeepSeek LLM's punctuation runs (ASCII and full-width). llama.cpp's list starts its last
/// range at U+3000, the ideographic space; llama.cpp matches it against a text in which every
/// non-ASCII space is U+000B, so that space never matches the range: here the range starts
/// one later, at `、`.
const DEEPSEEK_PUNCTUATION: &str = "\\s?[!-/:-~！-／：-～‘-‟、-。]+";

/// DeepSeek's CJK and Hangul runs.
const DEEPSEEK_CJK: &str = "[一-龥ࠀ-一가-퟿]+";

/// How one family of pre-tokenizers splits and what it implies, as llama.cpp's vocabulary
/// loader sets it.
struct Rules {
    /// The regexes, applied in order.
    patterns: &'static [&'static str],
    /// A word that is a vocabulary entry as a whole is that entry, whatever the merges would
    /// make of it (llama.cpp's `ignore_merges`, Llama-3's and Tekken's rule).
    ignore_merges: bool,
    /// Whether prompts start with BOS when `tokenizer.ggml.add_bos_token` does not say.
    add_bos: bool,
}

const fn rules(patterns: &'static [&'static str]) -> Rules {
    Rules {
        patterns,
        ignore_merges: false,
        add_bos: false,
    }
}

/// The rules of the pre-tokenizer `name`, or `None` for a name this version does not run.
/// The names and their groups are llama.cpp's (`llama_vocab::impl::load`).
fn rules_of(name: &str) -> Option<Rules> {
    Some(match name {
        "default" => rules(&[r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", r"[0-9][0-9][0-9]"]),
        "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral" | "midm-2.0"
        | "lfm2" | "jina-v5-nano" => Rules {
            patterns: &[LLAMA3],
            ignore_merges: true,
            add_bos: true,
        },
        "dbrx" | "smaug-bpe" => rules(&[LLAMA3]),
        "falcon" => rules(&[r"[\p{P}\$\+<=>\^~\|`]+", GPT2, r"[0-9][0-9][0-9]"]),
        "starcoder" | "refact" | "command-r" | "smollm" | "codeshell" | "exaone" | "minerva-7b"
        | "mellum2" => rules(&[r"\p{N}", GPT2]),
        "gpt-2" | "phi-2" | "jina-es" | "jina-de" | "gigachat" | "jina-v2-es" | "jina-v2-de"
        | "a.x-4.0" | "mellum" | "modern-bert" | "exaone4" | "mpt" | "olmo" | "jais" => {
            rules(&[GPT2])
        }
        "qwen2" | "deepseek-r1-qwen" | "kormo" | "f2llmv2" | "megrez" | "stablelm2" => {
            rules(&[QWEN2])
        }
        "tekken" => Rules {
            patterns: &[TEKKEN],
            ignore_merges: true,
            add_bos: true,
        },
        "poro-chat" | "bloom" | "gpt3-finnish" => rules(&[PORO]),
        "viking" => rules(&[PORO, r"\p{N}"]),
        "deepseek-llm" => rules(&[
            "[\r\n]",
            DEEPSEEK_LETTERS,
            DEEPSEEK_PUNCTUATION,
            r"\s+$",
            DEEPSEEK_CJK,
            r"\p{N}+",
        ]),
        "deepseek-coder" => rules(&["[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", DEEPSEEK_CJK, r"\p{N}"]),
        _ => return None,
    })
}

/// A compiled pre-tokenizer.
#[derive(Debug, Clone)]
pub(super) struct PreTokenizer {
    /// The `tokenizer.ggml.pre` name it was built for.
    name: String,
    regexes: Vec<Regex>,
    ignore_merges: bool,
    add_bos: bool,
}

impl PreTokenizer {
    /// The pre-tokenizer llama.cpp names `name`; `None` when this version does not run it.
    pub(super) fn new(name: &str) -> Result<Option<Self>, ModelError> {
        let Some(rules) = rules_of(name) else {
            return Ok(None);
        };
        let regexes = rules
            .patterns
            .iter()
            .map(|pattern| {
                fancy_regex::RegexBuilder::new(pattern)
                    // The patterns backtrack at most over one run of whitespace or letters;
                    // a long document's run must not stop the split halfway.
                    .backtrack_limit(usize::MAX)
                    .build()
                    .map_err(|e| ModelError::InvalidTokenizer {
                        reason: format!("the `{name}` pre-tokenizer's regex does not compile: {e}"),
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(Self {
            name: name.to_owned(),
            regexes,
            ignore_merges: rules.ignore_merges,
            add_bos: rules.add_bos,
        }))
    }

    /// The `tokenizer.ggml.pre` name.
    pub(super) fn name(&self) -> &str {
        &self.name
    }

    /// Whether a word that is a vocabulary entry is taken whole, merges aside.
    pub(super) fn ignore_merges(&self) -> bool {
        self.ignore_merges
    }

    /// Whether prompts start with BOS unless the file says otherwise.
    pub(super) fn add_bos(&self) -> bool {
        self.add_bos
    }

    /// `text` cut into the words BPE merges within, in order; together they are `text`.
    pub(super) fn split<'t>(&self, text: &'t str) -> Vec<&'t str> {
        let mut pieces = vec![text];
        for regex in &self.regexes {
            let mut next = Vec::with_capacity(pieces.len() * 2);
            for piece in pieces {
                split_piece(regex, piece, &mut next);
            }
            pieces = next;
        }
        pieces
    }
}

/// Appends to `out` the matches of `regex` in `piece` and the stretches between them.
fn split_piece<'t>(regex: &Regex, piece: &'t str, out: &mut Vec<&'t str>) {
    let mut last = 0;
    for found in regex.find_iter(piece) {
        let found = match found {
            Ok(found) => found,
            Err(error) => {
                // Unreachable with an unlimited backtrack budget; should it happen, the rest
                // of the piece stays one word (still every byte of it, just merged less).
                tracing::warn!("pre-tokenizer regex failed, keeping a piece whole: {error}");
                break;
            }
        };
        if found.start() > last {
            out.push(&piece[last..found.start()]);
        }
        if found.end() > found.start() {
            out.push(found.as_str());
        }
        last = found.end();
    }
    if last < piece.len() {
        out.push(&piece[last..]);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn split(name: &str, text: &str) -> Vec<String> {
        PreTokenizer::new(name)
            .unwrap()
            .unwrap()
            .split(text)
            .into_iter()
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn llama3_groups_digits_in_threes_and_keeps_contractions() {
        assert_eq!(
            split("llama-bpe", "I'LL pay 1234567 now"),
            ["I", "'LL", " pay", " ", "123", "456", "7", " now"]
        );
    }

    #[test]
    fn gpt2_leaves_the_last_space_of_a_run_to_the_next_word() {
        assert_eq!(split("gpt-2", "a   b"), ["a", "  ", " b"]);
        assert_eq!(split("gpt-2", "a\t\tb"), ["a", "\t", "\t", "b"]);
    }

    #[test]
    fn smollm_splits_every_digit_before_gpt2() {
        assert_eq!(split("smollm", "x 2024"), ["x", " ", "2", "0", "2", "4"]);
    }

    #[test]
    fn tekken_splits_words_before_capitals() {
        assert_eq!(split("tekken", "HelloWorld"), ["Hello", "World"]);
    }

    #[test]
    fn every_split_gives_back_the_whole_text() {
        let text = "Ünïcödé 東京 🚀👩‍👩‍👧 e\u{301} 12,345.6\r\n\n\t  x's";
        for name in [
            "default",
            "llama-bpe",
            "dbrx",
            "falcon",
            "smollm",
            "gpt-2",
            "qwen2",
            "tekken",
            "poro-chat",
            "viking",
            "deepseek-llm",
            "deepseek-coder",
        ] {
            assert_eq!(split(name, text).concat(), text, "{name}");
        }
    }

    #[test]
    fn an_unknown_name_has_no_rules() {
        assert!(PreTokenizer::new("kimi-k2").unwrap().is_none());
    }
}
