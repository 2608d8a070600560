//! ETHTOOL_MSG_FEATURES_GET / FEATURES_SET over the "ethtool" generic-netlink family, with
//! verbose (name-carrying) bitsets so no separate string-set query is needed.

use super::netlink::{attr_str, attr_u32, parse_attrs, Attrs, GenlSocket, NetlinkError};

const FAMILY: &str = "ethtool";
const VERSION: u8 = 1;
const MSG_FEATURES_GET: u8 = 11;
const MSG_FEATURES_SET: u8 = 12;

const A_HEADER_DEV_NAME: u16 = 2;
const A_HEADER_FLAGS: u16 = 3;
const FLAG_OMIT_REPLY: u32 = 2;

const A_FEATURES_HEADER: u16 = 1;
const A_FEATURES_HW: u16 = 2;
const A_FEATURES_WANTED: u16 = 3;
const A_FEATURES_ACTIVE: u16 = 4;
const A_FEATURES_NOCHANGE: u16 = 5;

const A_BITSET_NOMASK: u16 = 1;
const A_BITSET_BITS: u16 = 3;
const A_BITSET_BITS_BIT: u16 = 1;
const A_BITSET_BIT_INDEX: u16 = 1;
const A_BITSET_BIT_NAME: u16 = 2;
const A_BITSET_BIT_VALUE: u16 = 3;

/// A device's features as the kernel reports them, indexed by feature bit.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct RawFeatures {
    pub names: Vec<String>,
    /// Changeable by the driver (hw_features).
    pub hw: Vec<bool>,
    pub active: Vec<bool>,
    /// Never changeable (NETIF_F_NEVER_CHANGE).
    pub nochange: Vec<bool>,
}

pub(crate) struct Ethtool {
    sock: GenlSocket,
    family: u16,
}

impl Ethtool {
    pub fn open() -> Result<Self, NetlinkError> {
        let mut sock = GenlSocket::open()?;
        let family = sock.family_id(FAMILY)?;
        Ok(Ethtool { sock, family })
    }

    pub fn features(&mut self, ifname: &str) -> Result<RawFeatures, NetlinkError> {
        let mut attrs = Attrs::default();
        attrs.put_nested(A_FEATURES_HEADER, &header(ifname, 0));
        let replies = self
            .sock
            .request(self.family, MSG_FEATURES_GET, VERSION, &attrs)?;
        let reply = replies
            .iter()
            .find(|r| r.cmd == MSG_FEATURES_GET)
            .ok_or_else(|| NetlinkError {
                errno: libc::EPROTO,
                message: Some("no FEATURES_GET reply".into()),
            })?;
        parse_features(&reply.attrs)
    }

    /// Asks for each named feature bit to be on or off (the kernel applies what it can).
    pub fn set_features(
        &mut self,
        ifname: &str,
        wanted: &[(String, bool)],
    ) -> Result<(), NetlinkError> {
        let mut bits = Attrs::default();
        for (name, on) in wanted {
            let mut bit = Attrs::default();
            bit.put_str(A_BITSET_BIT_NAME, name);
            if *on {
                bit.put_flag(A_BITSET_BIT_VALUE);
            }
            bits.put_nested(A_BITSET_BITS_BIT, &bit);
        }
        // Without NOMASK the listed bits are the mask: only they change.
        let mut bitset = Attrs::default();
        bitset.put_nested(A_BITSET_BITS, &bits);
        let mut attrs = Attrs::default();
        attrs
            .put_nested(A_FEATURES_HEADER, &header(ifname, FLAG_OMIT_REPLY))
            .put_nested(A_FEATURES_WANTED, &bitset);
        self.sock
            .request(self.family, MSG_FEATURES_SET, VERSION, &attrs)?;
        Ok(())
    }
}

fn header(ifname: &str, flags: u32) -> Attrs {
    let mut h = Attrs::default();
    h.put_str(A_HEADER_DEV_NAME, ifname);
    if flags != 0 {
        h.put_u32(A_HEADER_FLAGS, flags);
    }
    h
}

/// One verbose bitset entry.
struct Bit {
    index: usize,
    name: Option<String>,
    set: bool,
}

/// More feature bits than any kernel has (netdev_features_t is 64 bits); a reply naming a
/// higher index is malformed (and would otherwise size the feature vectors).
pub(crate) const MAX_FEATURE_BITS: usize = 1024;

fn parse_bitset(payload: &[u8]) -> Vec<Bit> {
    let is_list = parse_attrs(payload).any(|(k, _)| k == A_BITSET_NOMASK);
    parse_attrs(payload)
        .filter(|(k, _)| *k == A_BITSET_BITS)
        .flat_map(|(_, bits)| parse_attrs(bits))
        .filter(|(k, _)| *k == A_BITSET_BITS_BIT)
        .filter_map(|(_, bit)| {
            let mut index = None;
            let mut name = None;
            let mut value = false;
            for (k, p) in parse_attrs(bit) {
                match k {
                    A_BITSET_BIT_INDEX => index = attr_u32(p),
                    A_BITSET_BIT_NAME => name = attr_str(p),
                    A_BITSET_BIT_VALUE => value = true,
                    _ => {}
                }
            }
            // In a list (no mask) every listed bit is set; otherwise VALUE says so.
            Some(Bit {
                index: usize::try_from(index?).ok()?,
                name,
                set: is_list || value,
            })
        })
        .collect()
}

/// HW comes with the mask of all known bits, so it names every feature; the others list set bits.
fn parse_features(attrs: &[u8]) -> Result<RawFeatures, NetlinkError> {
    let mut f = RawFeatures::default();
    let mut lists: Vec<(u16, Vec<Bit>)> = Vec::new();
    for (kind, payload) in parse_attrs(attrs) {
        if matches!(
            kind,
            A_FEATURES_HW | A_FEATURES_WANTED | A_FEATURES_ACTIVE | A_FEATURES_NOCHANGE
        ) {
            lists.push((kind, parse_bitset(payload)));
        }
    }
    let size = lists
        .iter()
        .flat_map(|(_, bits)| bits.iter().map(|b| b.index.saturating_add(1)))
        .max()
        .unwrap_or(0);
    if size > MAX_FEATURE_BITS {
        return Err(NetlinkError {
            errno: libc::EPROTO,
            message: Some(format!(
                "malformed netlink reply: feature bit {} (a device has fewer than {MAX_FEATURE_BITS})",
                size - 1
            )),
        });
    }
    // Unused bits have no name; they stay "" and are left out of every listing.
    f.names = vec![String::new(); size];
    f.hw = vec![false; size];
    f.active = vec![false; size];
    f.nochange = vec![false; size];
    for (kind, bits) in lists {
        for bit in bits {
            if let Some(name) = bit.name {
                f.names[bit.index] = name;
            }
            let target = match kind {
                A_FEATURES_HW => &mut f.hw,
                A_FEATURES_ACTIVE => &mut f.active,
                A_FEATURES_NOCHANGE => &mut f.nochange,
                _ => continue,
            };
            target[bit.index] = bit.set;
        }
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bit(index: u32, name: &str, value: bool) -> Attrs {
        let mut b = Attrs::default();
        b.put_u32(A_BITSET_BIT_INDEX, index)
            .put_str(A_BITSET_BIT_NAME, name);
        if value {
            b.put_flag(A_BITSET_BIT_VALUE);
        }
        b
    }

    fn bitset(list: bool, entries: &[(u32, &str, bool)]) -> Attrs {
        let mut bits = Attrs::default();
        for (i, n, v) in entries {
            bits.put_nested(A_BITSET_BITS_BIT, &bit(*i, n, *v));
        }
        let mut set = Attrs::default();
        if list {
            set.put_flag(A_BITSET_NOMASK);
        }
        set.put_u32(2, 64).put_nested(A_BITSET_BITS, &bits);
        set
    }

    #[test]
    fn a_features_reply_decodes_into_bit_vectors() {
        let mut reply = Attrs::default();
        reply
            .put_nested(
                A_FEATURES_HW,
                &bitset(
                    false,
                    &[
                        (0, "tx-scatter-gather", true),
                        (1, "tx-checksum-ipv4", false),
                        (3, "tx-checksum-ip-generic", true),
                    ],
                ),
            )
            .put_nested(
                A_FEATURES_ACTIVE,
                &bitset(
                    true,
                    &[
                        (0, "tx-scatter-gather", false),
                        (3, "tx-checksum-ip-generic", false),
                    ],
                ),
            )
            .put_nested(
                A_FEATURES_NOCHANGE,
                &bitset(true, &[(1, "tx-checksum-ipv4", false)]),
            );
        let f = parse_features(reply.bytes()).unwrap();
        assert_eq!(
            f.names,
            [
                "tx-scatter-gather",
                "tx-checksum-ipv4",
                "",
                "tx-checksum-ip-generic"
            ]
        );
        assert_eq!(f.hw, [true, false, false, true]);
        assert_eq!(f.active, [true, false, false, true]);
        assert_eq!(f.nochange, [false, true, false, false]);
    }

    #[test]
    fn a_bit_index_no_device_has_is_refused_before_sizing_anything() {
        let mut reply = Attrs::default();
        reply.put_nested(A_FEATURES_HW, &bitset(false, &[(u32::MAX, "huge", true)]));
        let err = parse_features(reply.bytes()).unwrap_err();
        assert_eq!(err.errno, libc::EPROTO);
        assert!(err.message.unwrap().contains("feature bit 4294967295"));
    }

    /// Property tests: any reply parses without panicking into vectors of one length, and a
    /// reply built from known bits parses back to exactly those bits.
    mod props {
        use super::*;
        use crate::offload::features::{not_applied, plan};
        use proptest::collection::{btree_map, vec};
        use proptest::prelude::*;

        fn consistent(f: &RawFeatures) -> bool {
            let n = f.names.len();
            n <= MAX_FEATURE_BITS && f.hw.len() == n && f.active.len() == n && f.nochange.len() == n
        }

        fn reply(hw: &[(u32, &str, bool)], active: &[(u32, &str, bool)]) -> Attrs {
            let mut r = Attrs::default();
            r.put_nested(A_FEATURES_HW, &bitset(false, hw))
                .put_nested(A_FEATURES_ACTIVE, &bitset(true, active));
            r
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]

            #[test]
            fn arbitrary_replies_never_panic(
                bytes in vec(any::<u8>(), 0..1024),
                requests in vec(("[a-z-]{1,24}", any::<bool>()), 0..4),
            ) {
                if let Ok(f) = parse_features(&bytes) {
                    prop_assert!(consistent(&f));
                    let _ = (f.values(), f.fixed(), plan(&f, &requests), not_applied(&f, &requests));
                }
            }

            #[test]
            fn built_replies_parse_back(
                bits in btree_map(0u32..1200, ("tx-[a-z]{1,12}", any::<bool>(), any::<bool>()), 0..24),
                flip in any::<(usize, u8)>(),
            ) {
                let hw: Vec<(u32, &str, bool)> =
                    bits.iter().map(|(i, (n, on, _))| (*i, n.as_str(), *on)).collect();
                let active: Vec<(u32, &str, bool)> = bits
                    .iter()
                    .filter(|(_, (_, _, a))| *a)
                    .map(|(i, (n, _, _))| (*i, n.as_str(), false))
                    .collect();
                let built = reply(&hw, &active);
                let top = bits.keys().next_back().map(|i| *i as usize);
                match parse_features(built.bytes()) {
                    Ok(f) => {
                        prop_assert!(top.is_none_or(|t| t < MAX_FEATURE_BITS));
                        prop_assert!(consistent(&f));
                        for (i, (name, on, active)) in &bits {
                            let i = *i as usize;
                            prop_assert_eq!(&f.names[i], name);
                            prop_assert_eq!(f.hw[i], *on);
                            prop_assert_eq!(f.active[i], *active);
                        }
                    }
                    Err(_) => prop_assert!(top.is_some_and(|t| t >= MAX_FEATURE_BITS)),
                }
                // One corrupted byte: refused or parsed, never a panic or a ragged snapshot.
                let mut bytes = built.bytes().to_vec();
                if !bytes.is_empty() {
                    let at = flip.0 % bytes.len();
                    bytes[at] ^= flip.1.max(1);
                    if let Ok(f) = parse_features(&bytes) {
                        prop_assert!(consistent(&f));
                    }
                }
            }
        }
    }
}
