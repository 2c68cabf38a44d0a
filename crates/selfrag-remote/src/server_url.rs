//! A generator server's address as the app accepts, shows and remembers it.
//!
//! The address is parsed by the `url` crate (the WHATWG rules that ureq and browsers follow), so
//! what the person confirms is what the app connects to. Refused: any scheme but `http` and
//! `https`; no host; user-info (`http://127.0.0.1:8080@evil.example` reads as this computer and
//! connects to evil.example); a query or fragment (no server API takes one); and control,
//! format and bidirectional characters anywhere in the text (they hide or reorder what the
//! dialog shows, and WHATWG parsing silently drops tabs and newlines).
//!
//! [`ServerUrl::origin`] (scheme, host, port) is what a saved API key belongs to, and what the
//! confirmation dialogs show on a line of their own.

use crate::RemoteError;

/// A parsed, checked generator-server address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerUrl {
    parsed: url::Url,
}

impl ServerUrl {
    /// Parses `text` (surrounding whitespace ignored) and checks it as the module docs say.
    pub fn parse(text: &str) -> Result<Self, RemoteError> {
        let text = text.trim();
        let refuse = |why: &str| RemoteError::InvalidUrl {
            url: printable(text),
            why: why.to_owned(),
        };
        if let Some(c) = text.chars().find(|&c| hides_text(c)) {
            return Err(refuse(&format!(
                "it holds the invisible or control character U+{:04X}",
                u32::from(c)
            )));
        }
        let parsed = url::Url::parse(text).map_err(|e| refuse(&e.to_string()))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(refuse("it must start with http:// or https://"));
        }
        if parsed.host_str().is_none_or(str::is_empty) {
            return Err(refuse("it names no host"));
        }
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err(refuse(
                "it holds a user name or password before an @, which hides the real host",
            ));
        }
        if parsed.query().is_some() || parsed.fragment().is_some() {
            return Err(refuse("it holds a query (?) or fragment (#)"));
        }
        Ok(Self { parsed })
    }

    /// `scheme://host:port`, the port always written (`http://gpu-box:80`), the host in its
    /// ASCII form (a look-alike Unicode name shows as `xn--…`).
    pub fn origin(&self) -> String {
        let host = self.parsed.host_str().unwrap_or_default();
        match self.parsed.port_or_known_default() {
            Some(port) => format!("{}://{host}:{port}", self.parsed.scheme()),
            None => format!("{}://{host}", self.parsed.scheme()),
        }
    }

    /// The address as the app connects to it, without a trailing slash.
    pub fn as_str(&self) -> &str {
        self.parsed.as_str().trim_end_matches('/')
    }

    /// The path below the origin (`/v1`), empty for the server's root.
    pub fn path(&self) -> &str {
        self.parsed.path().trim_end_matches('/')
    }

    /// Whether the host is this computer (`localhost`, 127.0.0.0/8, `::1`).
    pub fn is_loopback(&self) -> bool {
        match self.parsed.host() {
            Some(url::Host::Domain(name)) => {
                name.eq_ignore_ascii_case("localhost") || name.ends_with(".localhost")
            }
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            None => false,
        }
    }

    /// Whether what is sent travels unencrypted over a network: plain `http` to a host that is
    /// not this computer.
    pub fn is_plain_http_off_this_computer(&self) -> bool {
        self.parsed.scheme() == "http" && !self.is_loopback()
    }
}

/// Whether `url` is an address the generator can use (see [`ServerUrl::parse`]).
pub fn check_url(url: &str) -> Result<(), RemoteError> {
    ServerUrl::parse(url).map(|_| ())
}

/// `text` (a name a server gave) as it may be shown: without control, format and
/// bidirectional characters, at most `limit` characters.
pub(crate) fn shown(text: &str, limit: usize) -> String {
    text.chars()
        .filter(|&c| !hides_text(c))
        .take(limit)
        .collect()
}

/// Control characters, and Unicode's format characters (general category Cf: bidirectional
/// overrides and isolates, zero-width joiners and spaces, the byte-order mark, invisible
/// operators, tag characters), which change how a string displays without showing.
fn hides_text(c: char) -> bool {
    c.is_control()
        || matches!(
            u32::from(c),
            0xAD | 0x600..=0x605
                | 0x61C
                | 0x6DD
                | 0x70F
                | 0x890..=0x891
                | 0x8E2
                | 0x180E
                | 0x200B..=0x200F
                | 0x202A..=0x202E
                | 0x2060..=0x2064
                | 0x2066..=0x206F
                | 0xFEFF
                | 0xFFF9..=0xFFFB
                | 0x110BD
                | 0x110CD
                | 0x13430..=0x1343F
                | 0x1BCA0..=0x1BCA3
                | 0x1D173..=0x1D17A
                | 0xE0001
                | 0xE0020..=0xE007F
        )
}

/// `text` for an error message: hidden characters written as `\u{…}`, at most 200 characters.
fn printable(text: &str) -> String {
    let mut shown = String::new();
    for c in text.chars().take(200) {
        if hides_text(c) {
            shown.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            shown.push(c);
        }
    }
    if text.chars().count() > 200 {
        shown.push('…');
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    fn why(text: &str) -> String {
        match ServerUrl::parse(text) {
            Err(RemoteError::InvalidUrl { why, .. }) => why,
            other => panic!("{text:?} should be refused, got {other:?}"),
        }
    }

    #[test]
    fn user_info_that_hides_the_real_host_is_refused() {
        // The check every caller makes (the old one let these through).
        assert!(check_url("http://127.0.0.1:8080@evil.example").is_err());
        assert!(check_url("http://127.0.0.1:8080/\u{202E}1v").is_err());
        assert!(why("http://127.0.0.1:8080@evil.example").contains("user name or password"));
        assert!(why("http://user:pw@gpu-box:8080/v1").contains("user name or password"));
        assert!(why("https://:secret@gpu-box").contains("user name or password"));
    }

    #[test]
    fn control_format_and_bidi_characters_are_refused_where_parsing_would_drop_or_show_them() {
        for text in [
            "http://127.0.0.1\n:8080",
            "http://gpu\tbox:8080",
            "http://gpu-box:8080/\u{202E}1v",
            "http://gpu\u{200B}-box:8080",
            "http://gpu-box\u{2066}:8080",
            "http://\u{FEFF}gpu-box",
            "http://gpu-box:8080/v1\u{7F}",
        ] {
            assert!(why(text).contains("character U+"), "{text:?}");
        }
        let Err(RemoteError::InvalidUrl { url, .. }) = ServerUrl::parse("http://a\u{202E}b") else {
            panic!("refused")
        };
        assert_eq!(
            url, "http://a\\u{202e}b",
            "the error shows the hidden character"
        );
    }

    #[test]
    fn only_http_and_https_with_a_host_and_no_query() {
        for text in [
            "file:///etc/passwd",
            "ftp://gpu-box",
            "gpu-box:8080",
            "http://",
            "",
            "javascript:alert(1)",
            "http://gpu-box:8080/v1?secret=passage",
            "http://gpu-box:8080/#frag",
            "http://gpu box:8080",
        ] {
            assert!(
                ServerUrl::parse(text).is_err(),
                "{text:?} should be refused"
            );
        }
    }

    #[test]
    fn the_origin_writes_scheme_host_and_port_and_punycodes_look_alike_hosts() {
        let url = ServerUrl::parse(" http://GPU-Box:8080/v1/ ").unwrap();
        assert_eq!(url.origin(), "http://gpu-box:8080");
        assert_eq!(url.path(), "/v1");
        assert_eq!(url.as_str(), "http://gpu-box:8080/v1");
        assert_eq!(
            ServerUrl::parse("https://gpu-box").unwrap().origin(),
            "https://gpu-box:443"
        );
        assert_eq!(
            ServerUrl::parse("http://gpu-box").unwrap().origin(),
            "http://gpu-box:80"
        );
        assert_eq!(
            ServerUrl::parse("http://gрu-box:8080").unwrap().origin(),
            "http://xn--gu-box-brf:8080",
            "a Cyrillic р shows as punycode"
        );
        assert_eq!(
            ServerUrl::parse("http://[::1]:9").unwrap().origin(),
            "http://[::1]:9"
        );
    }

    #[test]
    fn plain_http_is_flagged_only_off_this_computer() {
        for (text, flagged) in [
            ("http://127.0.0.1:8080", false),
            ("http://127.8.9.10:8080", false),
            ("http://localhost:8080/v1", false),
            ("http://[::1]:8080", false),
            ("https://gpu-box:8080", false),
            ("http://gpu-box:8080", true),
            ("http://10.0.0.5:8000/v1", true),
            ("http://localhost.evil.example", true),
        ] {
            assert_eq!(
                ServerUrl::parse(text)
                    .unwrap()
                    .is_plain_http_off_this_computer(),
                flagged,
                "{text}"
            );
        }
    }
}
