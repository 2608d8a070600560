//! A minimal generic-netlink client: message framing, attributes, family lookup, request/ack.
//! Just what the ethtool FEATURES_GET/SET exchange needs; sockets come from `netlink-sys`.

use std::io;

use netlink_sys::{protocols::NETLINK_GENERIC, Socket, SocketAddr};

const NLMSG_HDRLEN: usize = 16;
const GENL_HDRLEN: usize = 4;
const NLA_HDRLEN: usize = 4;

const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
/// In an error/ack: the original request's payload was left out (NETLINK_CAP_ACK).
const NLM_F_CAPPED: u16 = 0x100;
/// In an error/ack: extended-ack attributes follow.
const NLM_F_ACK_TLVS: u16 = 0x200;
const NLMSGERR_ATTR_MSG: u16 = 1;

const GENL_ID_CTRL: u16 = 0x10;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;

pub(crate) const NLA_F_NESTED: u16 = 1 << 15;
const NLA_TYPE_MASK: u16 = 0x3fff;

/// A failed request: the kernel's errno and its extended-ack message, if it gave one.
#[derive(Debug)]
pub(crate) struct NetlinkError {
    pub errno: i32,
    pub message: Option<String>,
}

impl NetlinkError {
    fn from_io(e: io::Error) -> Self {
        NetlinkError {
            errno: e.raw_os_error().unwrap_or(libc::EIO),
            message: Some(e.to_string()),
        }
    }

    fn malformed(what: &str) -> Self {
        NetlinkError {
            errno: libc::EPROTO,
            message: Some(format!("malformed netlink reply: {what}")),
        }
    }
}

/// Builds a flat or nested attribute list.
#[derive(Default)]
pub(crate) struct Attrs {
    buf: Vec<u8>,
}

impl Attrs {
    pub fn put(&mut self, kind: u16, payload: &[u8]) -> &mut Self {
        let len = NLA_HDRLEN + payload.len();
        self.buf.extend_from_slice(&(len as u16).to_ne_bytes());
        self.buf.extend_from_slice(&kind.to_ne_bytes());
        self.buf.extend_from_slice(payload);
        self.buf.resize(align4(self.buf.len()), 0);
        self
    }

    pub fn put_u32(&mut self, kind: u16, v: u32) -> &mut Self {
        self.put(kind, &v.to_ne_bytes())
    }

    pub fn put_str(&mut self, kind: u16, s: &str) -> &mut Self {
        let mut payload = s.as_bytes().to_vec();
        payload.push(0);
        self.put(kind, &payload)
    }

    pub fn put_flag(&mut self, kind: u16) -> &mut Self {
        self.put(kind, &[])
    }

    pub fn put_nested(&mut self, kind: u16, inner: &Attrs) -> &mut Self {
        self.put(kind | NLA_F_NESTED, &inner.buf)
    }

    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }
}

/// Iterates over the attributes in `buf` as (type without flags, payload).
pub(crate) fn parse_attrs(buf: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    let mut rest = buf;
    std::iter::from_fn(move || {
        if rest.len() < NLA_HDRLEN {
            return None;
        }
        let len = u16::from_ne_bytes([rest[0], rest[1]]) as usize;
        let kind = u16::from_ne_bytes([rest[2], rest[3]]) & NLA_TYPE_MASK;
        if len < NLA_HDRLEN || len > rest.len() {
            return None;
        }
        let payload = &rest[NLA_HDRLEN..len];
        rest = &rest[align4(len).min(rest.len())..];
        Some((kind, payload))
    })
}

pub(crate) fn attr_u32(payload: &[u8]) -> Option<u32> {
    Some(u32::from_ne_bytes(payload.get(..4)?.try_into().ok()?))
}

pub(crate) fn attr_str(payload: &[u8]) -> Option<String> {
    let end = payload
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(payload.len());
    std::str::from_utf8(&payload[..end])
        .ok()
        .map(str::to_string)
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// One generic-netlink reply: command and attributes.
pub(crate) struct Reply {
    pub cmd: u8,
    pub attrs: Vec<u8>,
}

pub(crate) struct GenlSocket {
    sock: Socket,
    seq: u32,
}

impl GenlSocket {
    /// Opens a socket in the caller's network namespace.
    pub fn open() -> Result<Self, NetlinkError> {
        let mut sock = Socket::new(NETLINK_GENERIC).map_err(NetlinkError::from_io)?;
        sock.bind_auto().map_err(NetlinkError::from_io)?;
        sock.connect(&SocketAddr::new(0, 0))
            .map_err(NetlinkError::from_io)?;
        // Error messages in acks, without an echo of our request: easier to parse.
        sock.set_ext_ack(true).map_err(NetlinkError::from_io)?;
        sock.set_cap_ack(true).map_err(NetlinkError::from_io)?;
        Ok(GenlSocket { sock, seq: 0 })
    }

    /// Looks up a generic-netlink family id by name ("ethtool").
    pub fn family_id(&mut self, name: &str) -> Result<u16, NetlinkError> {
        let mut attrs = Attrs::default();
        attrs.put_str(CTRL_ATTR_FAMILY_NAME, name);
        let replies = self.request(GENL_ID_CTRL, CTRL_CMD_GETFAMILY, 1, &attrs)?;
        let id = replies
            .iter()
            .flat_map(|r| parse_attrs(&r.attrs))
            .find(|(kind, _)| *kind == CTRL_ATTR_FAMILY_ID)
            .and_then(|(_, p)| p.get(..2).map(|b| u16::from_ne_bytes([b[0], b[1]])));
        id.ok_or_else(|| NetlinkError::malformed("family reply without an id"))
    }

    /// Sends one request and collects its replies until the kernel's ack.
    pub fn request(
        &mut self,
        family: u16,
        cmd: u8,
        version: u8,
        attrs: &Attrs,
    ) -> Result<Vec<Reply>, NetlinkError> {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let len = NLMSG_HDRLEN + GENL_HDRLEN + attrs.bytes().len();
        let mut msg = Vec::with_capacity(len);
        msg.extend_from_slice(&(len as u32).to_ne_bytes());
        msg.extend_from_slice(&family.to_ne_bytes());
        msg.extend_from_slice(&(NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
        msg.extend_from_slice(&seq.to_ne_bytes());
        msg.extend_from_slice(&0u32.to_ne_bytes());
        msg.extend_from_slice(&[cmd, version, 0, 0]);
        msg.extend_from_slice(attrs.bytes());
        self.sock.send(&msg, 0).map_err(NetlinkError::from_io)?;

        let mut replies = Vec::new();
        loop {
            let (buf, _) = self.sock.recv_from_full().map_err(NetlinkError::from_io)?;
            for (msg_type, flags, msg_seq, payload) in split_messages(&buf)? {
                if msg_seq != seq {
                    continue;
                }
                match msg_type {
                    NLMSG_ERROR => return parse_ack(flags, payload).map(|()| replies),
                    NLMSG_DONE => return Ok(replies),
                    _ if payload.len() >= GENL_HDRLEN => replies.push(Reply {
                        cmd: payload[0],
                        attrs: payload[GENL_HDRLEN..].to_vec(),
                    }),
                    _ => return Err(NetlinkError::malformed("short generic netlink message")),
                }
            }
        }
    }
}

type RawMessage<'a> = (u16, u16, u32, &'a [u8]);

/// Splits a datagram into (type, flags, seq, payload) messages.
fn split_messages(buf: &[u8]) -> Result<Vec<RawMessage<'_>>, NetlinkError> {
    let mut out = Vec::new();
    let mut rest = buf;
    while rest.len() >= NLMSG_HDRLEN {
        let len = u32::from_ne_bytes(rest[0..4].try_into().unwrap_or_default()) as usize;
        if len < NLMSG_HDRLEN || len > rest.len() {
            return Err(NetlinkError::malformed("bad message length"));
        }
        let msg_type = u16::from_ne_bytes([rest[4], rest[5]]);
        let flags = u16::from_ne_bytes([rest[6], rest[7]]);
        let seq = u32::from_ne_bytes(rest[8..12].try_into().unwrap_or_default());
        out.push((msg_type, flags, seq, &rest[NLMSG_HDRLEN..len]));
        rest = &rest[align4(len).min(rest.len())..];
    }
    Ok(out)
}

/// An NLMSG_ERROR payload: errno 0 is the ack, anything else the failure with its message.
fn parse_ack(flags: u16, payload: &[u8]) -> Result<(), NetlinkError> {
    let errno = payload
        .get(..4)
        .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
        .ok_or_else(|| NetlinkError::malformed("short error message"))?;
    if errno == 0 {
        return Ok(());
    }
    // After errno comes the request's header, plus its payload unless capped, then the TLVs.
    let echoed = payload
        .get(4..8)
        .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as usize)
        .unwrap_or(NLMSG_HDRLEN);
    let echo = if flags & NLM_F_CAPPED != 0 {
        NLMSG_HDRLEN
    } else {
        echoed.checked_add(3).map_or(usize::MAX, |n| n & !3)
    };
    let skip = echo.saturating_add(4);
    let message = (flags & NLM_F_ACK_TLVS != 0)
        .then(|| payload.get(skip..))
        .flatten()
        .and_then(|tlvs| parse_attrs(tlvs).find(|(k, _)| *k == NLMSGERR_ATTR_MSG))
        .and_then(|(_, p)| attr_str(p));
    Err(NetlinkError {
        // i32::MIN has no positive counterpart; no real errno is near it.
        errno: errno.checked_neg().unwrap_or(libc::EPROTO),
        message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_are_padded_and_parse_back() {
        let mut inner = Attrs::default();
        inner.put_str(2, "vx0").put_u32(3, 7);
        let mut outer = Attrs::default();
        outer.put_nested(1, &inner).put_flag(9);
        let parsed: Vec<_> = parse_attrs(outer.bytes()).collect();
        assert_eq!(parsed.len(), 2);
        assert_eq!(parsed[0].0, 1, "the nested flag is masked off");
        assert_eq!(parsed[1], (9, &[][..]));
        let inner_parsed: Vec<_> = parse_attrs(parsed[0].1).collect();
        assert_eq!(attr_str(inner_parsed[0].1).as_deref(), Some("vx0"));
        assert_eq!(attr_u32(inner_parsed[1].1), Some(7));
        assert_eq!(outer.bytes().len() % 4, 0);
    }

    #[test]
    fn error_acks_carry_errno_and_message() {
        // errno -19 (ENODEV), capped header echo, then NLMSGERR_ATTR_MSG.
        let mut payload = (-19i32).to_ne_bytes().to_vec();
        payload.extend_from_slice(&[0u8; NLMSG_HDRLEN]);
        let mut tlv = Attrs::default();
        tlv.put_str(NLMSGERR_ATTR_MSG, "no device matches name");
        payload.extend_from_slice(tlv.bytes());
        let err = parse_ack(NLM_F_CAPPED | NLM_F_ACK_TLVS, &payload).unwrap_err();
        assert_eq!(err.errno, libc::ENODEV);
        assert_eq!(err.message.as_deref(), Some("no device matches name"));
        assert!(parse_ack(0, &0i32.to_ne_bytes()).is_ok());
    }

    #[test]
    fn truncated_attributes_stop_the_iteration() {
        assert_eq!(parse_attrs(&[8, 0, 1, 0, 1]).count(), 0);
    }

    #[test]
    fn an_errno_without_a_positive_counterpart_is_a_protocol_error() {
        let err = parse_ack(0, &i32::MIN.to_ne_bytes()).unwrap_err();
        assert_eq!(err.errno, libc::EPROTO);
        // An echoed length near u32::MAX cannot push the skip past the payload.
        let mut payload = (-1i32).to_ne_bytes().to_vec();
        payload.extend_from_slice(&u32::MAX.to_ne_bytes());
        assert_eq!(
            parse_ack(NLM_F_ACK_TLVS, &payload).unwrap_err().message,
            None
        );
    }
}

/// Property tests: whatever the kernel (or anything posing as it) sends, the codec never panics,
/// and what we build parses back to what we put in.
#[cfg(test)]
mod props {
    use super::*;
    use proptest::collection::vec;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn arbitrary_bytes_never_panic(bytes in vec(any::<u8>(), 0..512), flags in any::<u16>()) {
            for (_, payload) in parse_attrs(&bytes) {
                prop_assert!(payload.len() <= bytes.len());
                let _ = (attr_u32(payload), attr_str(payload));
            }
            if let Ok(messages) = split_messages(&bytes) {
                for (_, f, _, payload) in messages {
                    let _ = parse_ack(f, payload);
                }
            }
            let _ = parse_ack(flags, &bytes);
        }

        #[test]
        fn built_attributes_parse_back(
            attrs in vec((0u16..NLA_TYPE_MASK, vec(any::<u8>(), 0..300)), 0..20),
            nested in any::<bool>(),
        ) {
            let mut built = Attrs::default();
            for (kind, payload) in &attrs {
                built.put(*kind, payload);
            }
            let mut outer = Attrs::default();
            outer.put_nested(7, &built);
            let list = if nested {
                let (kind, inner) = parse_attrs(outer.bytes()).next().unwrap();
                prop_assert_eq!(kind, 7);
                inner
            } else {
                built.bytes()
            };
            let parsed: Vec<(u16, Vec<u8>)> =
                parse_attrs(list).map(|(k, p)| (k, p.to_vec())).collect();
            prop_assert_eq!(parsed, attrs);
        }

        #[test]
        fn acks_carry_their_errno_and_message(
            errno in 1i32..4096,
            message in "[ -~]{0,80}",
            capped in any::<bool>(),
            echo in vec(any::<u8>(), 0..64),
        ) {
            let mut payload = (-errno).to_ne_bytes().to_vec();
            let echoed = NLMSG_HDRLEN + if capped { 0 } else { echo.len() };
            payload.extend_from_slice(&(echoed as u32).to_ne_bytes());
            payload.extend_from_slice(&[0u8; NLMSG_HDRLEN - 4]);
            let mut flags = NLM_F_ACK_TLVS;
            if capped {
                flags |= NLM_F_CAPPED;
            } else {
                payload.extend_from_slice(&echo);
                payload.resize(4 + align4(echoed), 0);
            }
            let mut tlv = Attrs::default();
            tlv.put_str(NLMSGERR_ATTR_MSG, &message);
            payload.extend_from_slice(tlv.bytes());
            let err = parse_ack(flags, &payload).unwrap_err();
            prop_assert_eq!(err.errno, errno);
            prop_assert_eq!(err.message, Some(message));
        }
    }
}
