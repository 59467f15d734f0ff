//! What one metadata entry may be, signed into a per-call token or sent by the caller: the
//! bounds of its key and value, and the characters neither may hold. Sans-IO, no state.
//!
//! Metadata reaches backends, which log it, put it in prompts and show it to people. A value
//! with CR LF can forge a log line or a header downstream, a NUL truncates it in C code, and
//! a bidi override (U+202E) or a zero-width character makes text read differently from what
//! it is. So keys and values refuse control characters (C0, DEL, C1: Unicode's `Cc`), format
//! characters (`Cf`: bidi embeddings, overrides and isolates, zero-width spaces and joiners,
//! the byte-order mark, the soft hyphen) and the line and paragraph separators (`Zl`, `Zp`).
//! Other text, any script, passes.

use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};

/// Most metadata entries a session has, signed and caller-supplied together.
pub const MAX_META_ENTRIES: usize = 32;
/// Longest key, in bytes (at least one).
pub const MAX_META_KEY: usize = 64;
/// Longest value, in bytes.
pub const MAX_META_VALUE: usize = 1024;

/// Why an entry is refused; the message quotes the key, escaped and shortened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    #[error("metadata key {0} must be 1 to {MAX_META_KEY} bytes")]
    KeyLength(String),
    #[error("metadata value of {key} is {len} bytes; at most {MAX_META_VALUE}")]
    ValueLength { key: String, len: usize },
    #[error("metadata key {key} holds a control or format character (U+{code:04X})")]
    KeyCharacter { key: String, code: u32 },
    #[error("metadata value of {key} holds a control or format character (U+{code:04X})")]
    ValueCharacter { key: String, code: u32 },
}

impl EntryError {
    /// Whether the entry broke a length (rather than held a forbidden character).
    pub fn is_length(&self) -> bool {
        matches!(
            self,
            EntryError::KeyLength(_) | EntryError::ValueLength { .. }
        )
    }
}

/// Whether `c` may not appear in a metadata key or value.
pub fn is_forbidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c.general_category(),
            GeneralCategory::Format
                | GeneralCategory::LineSeparator
                | GeneralCategory::ParagraphSeparator
        )
}

/// Checks one entry against the bounds and the characters.
pub fn check_entry(key: &str, value: &str) -> Result<(), EntryError> {
    if let Some(c) = key.chars().find(|c| is_forbidden(*c)) {
        return Err(EntryError::KeyCharacter {
            key: shown(key),
            code: u32::from(c),
        });
    }
    if key.is_empty() || key.len() > MAX_META_KEY {
        return Err(EntryError::KeyLength(shown(key)));
    }
    if value.len() > MAX_META_VALUE {
        return Err(EntryError::ValueLength {
            key: shown(key),
            len: value.len(),
        });
    }
    if let Some(c) = value.chars().find(|c| is_forbidden(*c)) {
        return Err(EntryError::ValueCharacter {
            key: shown(key),
            code: u32::from(c),
        });
    }
    Ok(())
}

/// A key fit to quote back: quoted, escaped, at most 64 characters.
fn shown(key: &str) -> String {
    let short: String = key.chars().take(64).collect();
    format!("{short:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_format_and_separator_characters_are_refused() {
        for c in [
            '\0', '\t', '\r', '\n', '\u{1b}', '\u{7f}', '\u{85}', '\u{9f}', '\u{ad}', '\u{200b}',
            '\u{200d}', '\u{200e}', '\u{202a}', '\u{202e}', '\u{2066}', '\u{2069}', '\u{2028}',
            '\u{2029}', '\u{feff}',
        ] {
            assert!(is_forbidden(c), "U+{:04X}", u32::from(c));
            let v = format!("a{c}b");
            assert!(
                matches!(check_entry("k", &v), Err(EntryError::ValueCharacter { .. })),
                "U+{:04X}",
                u32::from(c)
            );
        }
        for ok in [
            "plain",
            "Jürgen",
            "東京",
            "emoji 🎤",
            "a b=c&d",
            "ŝ̂ combining",
        ] {
            assert_eq!(check_entry("name", ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn the_message_names_the_key_escaped() {
        let err = check_entry("note", "a\r\nb").unwrap_err();
        assert_eq!(
            err.to_string(),
            "metadata value of \"note\" holds a control or format character (U+000D)"
        );
        let err = check_entry("bad\nkey", "v").unwrap_err();
        assert!(err.to_string().contains("\"bad\\nkey\""), "{err}");
        assert!(!err.is_length());
    }

    #[test]
    fn lengths_are_bounded() {
        assert!(check_entry("", "v").unwrap_err().is_length());
        assert!(check_entry(&"k".repeat(65), "v").unwrap_err().is_length());
        assert_eq!(check_entry(&"k".repeat(64), &"v".repeat(1024)), Ok(()));
        let err = check_entry("k", &"v".repeat(1025)).unwrap_err();
        assert_eq!(
            err,
            EntryError::ValueLength {
                key: "\"k\"".into(),
                len: 1025
            }
        );
    }
}
