//! A session's metadata for its backend, in two maps that say who set each entry: what the
//! application signed into the per-call token, and what the caller sent (the POST's query
//! parameters and `X-Voxgate-*` headers). Sans-IO: the signaling edge hands in the query
//! string and the headers.
//!
//! Merged into one map, a key the token did not set could be filled by the caller
//! (`?user=admin` beside the signed keys) and the backend could not tell. The maps stay apart
//! to the backend (`Dispatch.signed_metadata` / `caller_metadata`); the old merged map is
//! still built for backends written before (the signed value wins a shared key). Both maps
//! together hold at most [`MAX_META_ENTRIES`]: a token may use all of them, the caller what
//! the token leaves. Every entry meets [`check_entry`] (lengths, no control or format
//! characters), or the request is refused with 400 naming the key.

use std::collections::HashMap;

use crate::auth::metadata_entry::{check_entry, EntryError, MAX_META_ENTRIES};

/// Both maps of a session's metadata.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallMetadata {
    /// The per-call token's `meta` (empty for the static token or without auth).
    pub signed: HashMap<String, String>,
    /// The caller's query parameters and `X-Voxgate-*` headers.
    pub caller: HashMap<String, String>,
}

impl CallMetadata {
    /// One map for backends that know no other: the caller's entries with the signed ones
    /// over them.
    pub fn merged(&self) -> HashMap<String, String> {
        let mut all = self.caller.clone();
        all.extend(self.signed.iter().map(|(k, v)| (k.clone(), v.clone())));
        all
    }
}

/// Why the caller's metadata was refused (HTTP 400).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetadataError {
    #[error("{0}")]
    Entry(#[from] EntryError),
    #[error("the value of header {0} is not UTF-8")]
    NotUtf8(String),
    #[error(
        "at most {MAX_META_ENTRIES} metadata entries in all: the token holds {signed}, which \
         leaves {room} for query parameters and X-Voxgate-* headers"
    )]
    TooMany { signed: usize, room: usize },
}

impl MetadataError {
    /// The `reason` label of `voxgate_signaling_rejected_total`.
    pub fn reason(&self) -> &'static str {
        match self {
            MetadataError::Entry(e) if e.is_length() => "metadata_bounds",
            MetadataError::TooMany { .. } => "metadata_bounds",
            MetadataError::Entry(_) | MetadataError::NotUtf8(_) => "metadata_characters",
        }
    }
}

/// The caller's metadata: `query`'s parameters, then the `x-voxgate-*` headers among
/// `headers` (lower-case names, prefix removed; a header wins a key the query also set),
/// within what `signed` entries of the token leave.
pub fn caller_metadata<'a>(
    query: Option<&str>,
    headers: impl Iterator<Item = (&'a str, &'a [u8])>,
    signed: usize,
) -> Result<HashMap<String, String>, MetadataError> {
    let room = MAX_META_ENTRIES.saturating_sub(signed);
    let mut meta = HashMap::new();
    let mut add = |k: String, v: String| {
        check_entry(&k, &v)?;
        meta.insert(k, v);
        if meta.len() > room {
            return Err(MetadataError::TooMany { signed, room });
        }
        Ok(())
    };
    for (k, v) in query
        .into_iter()
        .flat_map(|q| form_urlencoded::parse(q.as_bytes()))
    {
        add(k.into_owned(), v.into_owned())?;
    }
    for (name, value) in headers {
        let Some(key) = name.strip_prefix("x-voxgate-") else {
            continue;
        };
        let value =
            std::str::from_utf8(value).map_err(|_| MetadataError::NotUtf8(name.to_string()))?;
        add(key.to_string(), value.to_string())?;
    }
    Ok(meta)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_headers() -> std::iter::Empty<(&'static str, &'static [u8])> {
        std::iter::empty()
    }

    #[test]
    fn query_and_headers_are_the_callers_and_signed_wins_only_the_merged_map() {
        let headers = [
            ("x-voxgate-lang", &b"en"[..]),
            ("content-type", b"application/sdp"),
            ("x-voxgate-room", b"red"),
        ];
        let caller = caller_metadata(Some("user=admin&room=blue"), headers.into_iter(), 1);
        let meta = CallMetadata {
            signed: [("user".to_string(), "alice".to_string())].into(),
            caller: caller.unwrap(),
        };
        assert_eq!(meta.caller["user"], "admin");
        assert_eq!(meta.caller["room"], "red", "a header wins the query");
        assert_eq!(meta.caller.len(), 3);
        assert_eq!(meta.merged()["user"], "alice");
        assert_eq!(meta.merged().len(), 3);
    }

    #[test]
    fn the_token_and_the_caller_share_one_bound() {
        let query: String = (0..12).map(|i| format!("q{i}=v&")).collect();
        assert!(caller_metadata(Some(&query), no_headers(), 20).is_ok());
        let err = caller_metadata(Some(&query), no_headers(), 21).unwrap_err();
        assert_eq!(
            err,
            MetadataError::TooMany {
                signed: 21,
                room: 11
            }
        );
        assert_eq!(err.reason(), "metadata_bounds");
        assert!(caller_metadata(Some("a=1"), no_headers(), 32).is_err());
    }

    #[test]
    fn control_characters_and_bad_header_bytes_are_refused_by_name() {
        let err = caller_metadata(Some("note=a%0D%0Ab"), no_headers(), 0).unwrap_err();
        assert_eq!(err.reason(), "metadata_characters");
        assert!(err.to_string().contains("\"note\""), "{err}");
        let bad = [("x-voxgate-name", &b"caf\xe9"[..])];
        let err = caller_metadata(None, bad.into_iter(), 0).unwrap_err();
        assert_eq!(err, MetadataError::NotUtf8("x-voxgate-name".into()));
        let long = format!("k={}", "v".repeat(1025));
        let err = caller_metadata(Some(&long), no_headers(), 0).unwrap_err();
        assert_eq!(err.reason(), "metadata_bounds");
    }
}
