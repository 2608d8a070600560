//! The HTTP/1.1 request, serialized once per run and written as-is for every request.

use super::config::HttpConfig;

/// Serializes the request line, headers and body into one buffer.
pub(crate) fn serialize_h1(cfg: &HttpConfig) -> Vec<u8> {
    serialize_h1_to(cfg, &cfg.authority())
}

/// The same request with Host `authority`.
pub(crate) fn serialize_h1_to(cfg: &HttpConfig, authority: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(256 + cfg.body.len());
    out.extend_from_slice(cfg.method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(cfg.path.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\nHost: ");
    out.extend_from_slice(authority.as_bytes());
    out.extend_from_slice(b"\r\n");
    for (name, value) in &cfg.headers {
        let skip = name.eq_ignore_ascii_case("host")
            || name.eq_ignore_ascii_case("content-length")
            || (!cfg.keepalive && name.eq_ignore_ascii_case("connection"));
        if skip {
            continue;
        }
        push_header(&mut out, name, value);
    }
    if !cfg.body.is_empty() || body_method(&cfg.method) {
        push_header(&mut out, "Content-Length", &cfg.body.len().to_string());
    }
    if !cfg.keepalive {
        // The server closes first, so TIME_WAIT sockets pile up on its side, not ours.
        push_header(&mut out, "Connection", "close");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(&cfg.body);
    out
}

fn push_header(out: &mut Vec<u8>, name: &str, value: &str) {
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(value.as_bytes());
    out.extend_from_slice(b"\r\n");
}

fn body_method(method: &str) -> bool {
    matches!(method, "POST" | "PUT" | "PATCH")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::config::HttpOptions;

    #[test]
    fn serializes_a_post_without_keepalive() {
        let mut o = HttpOptions::new("http://127.0.0.1:8080/x");
        o.method = "POST".into();
        o.body = Some("abc".into());
        o.no_keepalive = true;
        o.headers = vec!["X-A: b".into(), "Host: ignored.test".into()];
        o.host = Some("h.test".into());
        let cfg = HttpConfig::from_options(&o).unwrap();
        let req = String::from_utf8(serialize_h1(&cfg)).unwrap();
        assert_eq!(
            req,
            "POST /x HTTP/1.1\r\nHost: h.test\r\nX-A: b\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc"
        );
    }
}
