//! Fuzzes `selfrag_index::chunk_text` with any UTF-8 text: no panic, and every passage's span
//! (in characters) lies inside the text and holds the passage's text.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let chars: Vec<char> = text.chars().collect();
    for chunk in selfrag_index::chunk_text(text) {
        let (start, end) = chunk.span;
        assert!(
            start <= end && end <= chars.len(),
            "span {start}..{end} of {}",
            chars.len()
        );
        let spanned: String = chars[start..end].iter().collect();
        assert_eq!(spanned.trim(), chunk.text, "span {start}..{end}");
        assert!(!chunk.text.is_empty());
    }
});
