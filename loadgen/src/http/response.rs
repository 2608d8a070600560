//! Minimal HTTP/1.1 response parsing: status and framing headers via `httparse`, then the body
//! by Content-Length, chunked encoding, or read-to-close. Bodies are counted, never stored.
//! When answers are recorded, the head also gives the backend that named itself
//! (`X-Netbench-Backend`), held inline.

use protocol::report::answers::BACKEND_HEADER;

use super::answers::Backend;

/// The response could not be parsed (counted in the `parse` error class).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ParseError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    None,
    Length(u64),
    Chunked,
    UntilClose,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Head {
    pub status: u16,
    /// The `X-Netbench-Backend` name (the first such header), only when asked for.
    pub backend: Backend,
    pub framing: Framing,
    /// The server will close the connection after this response.
    pub close: bool,
    /// Bytes of the head, including the blank line.
    pub len: usize,
}

const MAX_HEADERS: usize = 64;

/// What a response head is parsed for.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct HeadOptions {
    /// The request was HEAD (the response has no body whatever it announces).
    pub head_request: bool,
    /// Read the backend's name (answers are recorded).
    pub backend: bool,
}

/// Parses a response head at the start of `data`; `Ok(None)` means more bytes are needed.
/// Interim 1xx responses are skipped (their length is included in `len`).
pub(crate) fn parse_head(data: &[u8], opts: HeadOptions) -> Result<Option<Head>, ParseError> {
    let mut offset = 0;
    loop {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut headers);
        let len = match resp.parse(&data[offset..]).map_err(|_| ParseError)? {
            httparse::Status::Complete(n) => n,
            httparse::Status::Partial => return Ok(None),
        };
        let status = resp.code.ok_or(ParseError)?;
        if (100..200).contains(&status) && status != 101 {
            offset += len;
            continue;
        }
        let mut close = resp.version == Some(0);
        let mut length: Option<u64> = None;
        let mut chunked = false;
        let mut backend: Option<Backend> = None;
        for h in resp.headers.iter() {
            let name = h.name.as_bytes();
            if opts.backend
                && backend.is_none()
                && name.eq_ignore_ascii_case(BACKEND_HEADER.as_bytes())
            {
                backend = Some(Backend::from_value(h.value));
            } else if name.eq_ignore_ascii_case(b"content-length") {
                let v = parse_u64(h.value).ok_or(ParseError)?;
                if length.is_some_and(|l| l != v) {
                    return Err(ParseError);
                }
                length = Some(v);
            } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
                chunked = last_token_is(h.value, b"chunked");
            } else if name.eq_ignore_ascii_case(b"connection") {
                if has_token(h.value, b"close") {
                    close = true;
                } else if has_token(h.value, b"keep-alive") {
                    close = false;
                }
            }
        }
        let no_body = opts.head_request || status == 204 || status == 304 || status == 101;
        let framing = if no_body {
            Framing::None
        } else if chunked {
            Framing::Chunked
        } else if let Some(l) = length {
            if l == 0 {
                Framing::None
            } else {
                Framing::Length(l)
            }
        } else {
            close = true;
            Framing::UntilClose
        };
        return Ok(Some(Head {
            status,
            backend: backend.unwrap_or(Backend::NONE),
            framing,
            close,
            len: offset + len,
        }));
    }
}

fn parse_u64(v: &[u8]) -> Option<u64> {
    let v = trim(v);
    if v.is_empty() || v.len() > 19 {
        return None;
    }
    v.iter().try_fold(0u64, |acc, &b| {
        b.is_ascii_digit().then(|| acc * 10 + u64::from(b - b'0'))
    })
}

fn trim(v: &[u8]) -> &[u8] {
    let start = v
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(v.len());
    let end = v
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |e| e + 1);
    &v[start..end]
}

fn has_token(value: &[u8], token: &[u8]) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| trim(t).eq_ignore_ascii_case(token))
}

fn last_token_is(value: &[u8], token: &[u8]) -> bool {
    value
        .split(|&b| b == b',')
        .next_back()
        .is_some_and(|t| trim(t).eq_ignore_ascii_case(token))
}

/// Incremental body decoder state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Body {
    Done,
    Remaining(u64),
    ChunkSize,
    ChunkData(u64),
    ChunkCrlf,
    Trailers,
    UntilClose,
}

const MAX_LINE: usize = 4096;

impl Body {
    pub(crate) fn new(framing: Framing) -> Self {
        match framing {
            Framing::None => Body::Done,
            Framing::Length(n) => Body::Remaining(n),
            Framing::Chunked => Body::ChunkSize,
            Framing::UntilClose => Body::UntilClose,
        }
    }

    /// Consumes what it can of `data`; returns the bytes consumed. `Body::Done` afterwards means
    /// the response is complete. Consuming 0 bytes of non-empty data means a line is incomplete.
    pub(crate) fn feed(&mut self, data: &[u8]) -> Result<usize, ParseError> {
        let mut used = 0;
        loop {
            let rest = &data[used..];
            match *self {
                Body::Done => return Ok(used),
                Body::Remaining(n) => {
                    let take = n.min(rest.len() as u64);
                    used += take as usize;
                    *self = if take == n {
                        Body::Done
                    } else {
                        Body::Remaining(n - take)
                    };
                    return Ok(used);
                }
                Body::UntilClose => return Ok(data.len()),
                Body::ChunkSize => match httparse::parse_chunk_size(rest) {
                    Ok(httparse::Status::Complete((n, 0))) => {
                        used += n;
                        *self = Body::Trailers;
                    }
                    Ok(httparse::Status::Complete((n, size))) => {
                        used += n;
                        *self = Body::ChunkData(size);
                    }
                    Ok(httparse::Status::Partial) if rest.len() < MAX_LINE => return Ok(used),
                    _ => return Err(ParseError),
                },
                Body::ChunkData(n) => {
                    if rest.is_empty() {
                        return Ok(used);
                    }
                    let take = n.min(rest.len() as u64);
                    used += take as usize;
                    *self = if take == n {
                        Body::ChunkCrlf
                    } else {
                        Body::ChunkData(n - take)
                    };
                }
                Body::ChunkCrlf => {
                    if rest.len() < 2 {
                        return Ok(used);
                    }
                    if &rest[..2] != b"\r\n" {
                        return Err(ParseError);
                    }
                    used += 2;
                    *self = Body::ChunkSize;
                }
                Body::Trailers => match rest.iter().position(|&b| b == b'\n') {
                    Some(i) => {
                        let line = &rest[..i];
                        used += i + 1;
                        if line.is_empty() || line == b"\r" {
                            *self = Body::Done;
                        }
                    }
                    None if rest.len() < MAX_LINE => return Ok(used),
                    None => return Err(ParseError),
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAIN: HeadOptions = HeadOptions {
        head_request: false,
        backend: false,
    };
    const HEAD: HeadOptions = HeadOptions {
        head_request: true,
        backend: false,
    };
    const BACKEND: HeadOptions = HeadOptions {
        head_request: false,
        backend: true,
    };

    #[test]
    fn parses_content_length_response() {
        let r = b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nhello\n";
        let h = parse_head(r, PLAIN).unwrap().unwrap();
        assert_eq!(h.status, 200);
        assert_eq!(h.framing, Framing::Length(6));
        assert!(!h.close);
        let mut b = Body::new(h.framing);
        assert_eq!(b.feed(&r[h.len..]).unwrap(), 6);
        assert_eq!(b, Body::Done);
    }

    #[test]
    fn partial_head_needs_more() {
        assert_eq!(
            parse_head(b"HTTP/1.1 200 OK\r\nContent-Le", PLAIN).unwrap(),
            None
        );
        assert!(parse_head(b"garbage\r\n\r\n", PLAIN).is_err());
    }

    #[test]
    fn connection_close_and_http10() {
        let h = parse_head(
            b"HTTP/1.1 500 x\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
            PLAIN,
        )
        .unwrap()
        .unwrap();
        assert!(h.close);
        assert_eq!(h.framing, Framing::None);
        let h = parse_head(b"HTTP/1.0 200 OK\r\n\r\n", PLAIN)
            .unwrap()
            .unwrap();
        assert!(h.close);
        assert_eq!(h.framing, Framing::UntilClose);
    }

    #[test]
    fn skips_100_continue_and_head_has_no_body() {
        let r = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n";
        let h = parse_head(r, PLAIN).unwrap().unwrap();
        assert_eq!(h.status, 200);
        assert_eq!(h.len, r.len());
        let h = parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", HEAD)
            .unwrap()
            .unwrap();
        assert_eq!(h.framing, Framing::None);
    }

    #[test]
    fn chunked_body_byte_by_byte() {
        let body = b"5\r\nhello\r\n3;ext=1\r\nabc\r\n0\r\nX-Trailer: 1\r\n\r\n";
        let mut b = Body::new(Framing::Chunked);
        let mut pending: Vec<u8> = Vec::new();
        for &byte in body.iter() {
            assert_ne!(b, Body::Done);
            pending.push(byte);
            let n = b.feed(&pending).unwrap();
            pending.drain(..n);
        }
        assert_eq!(b, Body::Done);
        assert!(pending.is_empty());
    }

    #[test]
    fn chunked_body_in_one_piece_leaves_next_response() {
        let data = b"2\r\nhi\r\n0\r\n\r\nHTTP/1.1";
        let mut b = Body::new(Framing::Chunked);
        let n = b.feed(data).unwrap();
        assert_eq!(b, Body::Done);
        assert_eq!(&data[n..], b"HTTP/1.1");
        let mut b = Body::new(Framing::Chunked);
        assert!(b.feed(b"zz\r\n").is_err());
    }

    #[test]
    fn the_backend_is_read_only_when_asked_whatever_the_case_of_its_name() {
        let r = b"HTTP/1.1 200 OK\r\nx-NETBENCH-backend: web-a\r\nX-Netbench-Backend: web-b\r\n\
                  Content-Length: 0\r\n\r\n";
        let h = parse_head(r, BACKEND).unwrap().unwrap();
        assert_eq!(
            h.backend,
            Backend::from_value(b"web-a"),
            "the first header counts"
        );
        assert_eq!(h.framing, Framing::None);
        assert_eq!(
            parse_head(r, PLAIN).unwrap().unwrap().backend,
            Backend::NONE
        );
        let none = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(
            parse_head(none, BACKEND).unwrap().unwrap().backend,
            Backend::NONE
        );
    }

    #[test]
    fn a_hostile_backend_value_is_no_name_and_a_long_one_is_cut() {
        let mut r = b"HTTP/1.1 200 OK\r\nX-Netbench-Backend: ".to_vec();
        r.extend((0..8000).map(|i| 0x80 | (i % 128) as u8));
        r.extend_from_slice(b"\r\nContent-Length: 0\r\n\r\n");
        assert_eq!(
            parse_head(&r, BACKEND).unwrap().unwrap().backend,
            Backend::NONE
        );
        let long = format!(
            "HTTP/1.1 200 OK\r\nX-Netbench-Backend: {}\r\n\r\n",
            "b".repeat(8000)
        );
        let h = parse_head(long.as_bytes(), BACKEND).unwrap().unwrap();
        assert_eq!(h.backend, Backend::from_value("b".repeat(63).as_bytes()));
    }

    #[test]
    fn conflicting_lengths_are_parse_errors() {
        let r = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n";
        assert!(parse_head(r, PLAIN).is_err());
    }
}

/// Property tests: any bytes from a server parse without panicking, and well-formed responses
/// (any framing, split anywhere) parse to their status and exact length.
#[cfg(test)]
pub(crate) mod props {
    use super::*;
    use proptest::collection::vec;
    use proptest::prelude::*;

    /// A well-formed response: its bytes, status, head length and framed body length
    /// (`None`: delimited by the connection's close).
    #[derive(Debug, Clone)]
    pub(crate) struct Generated {
        pub bytes: Vec<u8>,
        pub status: u16,
        pub head_len: usize,
        pub body_len: Option<usize>,
    }

    fn extra_headers() -> impl Strategy<Value = Vec<(String, String)>> {
        vec(("X-[A-Za-z-]{1,12}", "[!-~][ -~]{0,20}[!-~]"), 0..4)
    }

    fn chunked(chunks: &[Vec<u8>], ext: bool, trailer: bool) -> Vec<u8> {
        let mut out = Vec::new();
        for c in chunks.iter().filter(|c| !c.is_empty()) {
            out.extend_from_slice(format!("{:x}", c.len()).as_bytes());
            if ext {
                out.extend_from_slice(b";x=1");
            }
            out.extend_from_slice(b"\r\n");
            out.extend_from_slice(c);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"0\r\n");
        if trailer {
            out.extend_from_slice(b"X-Trailer: 1\r\n");
        }
        out.extend_from_slice(b"\r\n");
        out
    }

    pub(crate) fn response() -> impl Strategy<Value = Generated> {
        let status = (200u16..600).prop_filter("has a body", |s| *s != 204 && *s != 304);
        let body = vec(vec(any::<u8>(), 0..64), 0..5);
        (
            status,
            0u8..3,
            body,
            extra_headers(),
            any::<(bool, bool, bool)>(),
        )
            .prop_map(|(status, framing, chunks, extra, (interim, ext, lower))| {
                let mut head = String::new();
                if interim {
                    head.push_str("HTTP/1.1 100 Continue\r\n\r\n");
                }
                let flat: Vec<u8> = chunks.concat();
                let (version, framing_header, body) = match framing {
                    0 => ("1.1", format!("Content-Length: {}", flat.len()), flat),
                    1 => (
                        "1.1",
                        "Transfer-Encoding: chunked".into(),
                        chunked(&chunks, ext, lower),
                    ),
                    _ => ("1.0", "Server: x".into(), flat),
                };
                let framing_header = if lower {
                    framing_header.to_lowercase()
                } else {
                    framing_header
                };
                head.push_str(&format!(
                    "HTTP/{version} {status} Whatever\r\n{framing_header}\r\n"
                ));
                for (k, v) in extra {
                    head.push_str(&format!("{k}: {v}\r\n"));
                }
                head.push_str("\r\n");
                let mut bytes = head.clone().into_bytes();
                bytes.extend_from_slice(&body);
                Generated {
                    bytes,
                    status,
                    head_len: head.len(),
                    body_len: (framing != 2).then_some(body.len()),
                }
            })
    }

    /// Feeds `data` in pieces cut at `cuts`, as a connection delivers it; returns the bytes
    /// consumed and the final state.
    fn feed_in_pieces(
        framing: Framing,
        data: &[u8],
        cuts: &[usize],
    ) -> Result<(usize, Body), ParseError> {
        let mut body = Body::new(framing);
        let (mut pending, mut used) = (Vec::new(), 0);
        let mut bounds: Vec<usize> = cuts.iter().map(|c| c % (data.len() + 1)).collect();
        bounds.push(data.len());
        bounds.sort_unstable();
        let mut start = 0;
        for end in bounds {
            pending.extend_from_slice(&data[start..end]);
            start = end;
            let n = body.feed(&pending)?;
            used += n;
            pending.drain(..n);
            if body == Body::Done {
                break;
            }
        }
        Ok((used, body))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn arbitrary_bytes_never_panic(data in vec(any::<u8>(), 0..1024), head in any::<bool>()) {
            let opts = HeadOptions { head_request: head, backend: true };
            if let Ok(Some(h)) = parse_head(&data, opts) {
                prop_assert!(h.len <= data.len());
                prop_assert!((100..=999).contains(&h.status));
            }
            for framing in [Framing::None, Framing::Length(700), Framing::Chunked, Framing::UntilClose] {
                let mut body = Body::new(framing);
                if let Ok(n) = body.feed(&data) {
                    prop_assert!(n <= data.len());
                }
            }
        }

        #[test]
        fn well_formed_responses_parse_exactly(
            r in response(),
            cuts in vec(any::<usize>(), 0..6),
            next in vec(any::<u8>(), 0..16),
        ) {
            let h = parse_head(&r.bytes, HeadOptions::default()).unwrap().unwrap();
            prop_assert_eq!(h.status, r.status);
            prop_assert_eq!(h.len, r.head_len);
            // Any proper prefix of the head needs more bytes.
            prop_assert_eq!(parse_head(&r.bytes[..r.head_len - 1], HeadOptions::default()), Ok(None));
            let mut data = r.bytes[h.len..].to_vec();
            data.extend_from_slice(&next);
            let (used, state) = feed_in_pieces(h.framing, &data, &cuts).unwrap();
            match r.body_len {
                Some(len) => {
                    prop_assert_eq!(state, Body::Done);
                    prop_assert_eq!(used, len, "the next response is left in place");
                }
                None => {
                    prop_assert!(h.close);
                    prop_assert_eq!(state, Body::UntilClose);
                    prop_assert_eq!(used, data.len());
                }
            }
        }
    }
}
