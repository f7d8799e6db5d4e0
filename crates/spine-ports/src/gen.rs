//! The deterministic packet generator: a realistic mix of Ethernet frames for
//! differential tests of XDP programs, plus a configurable share of malformed ones.
//!
//! A seed names the whole stream: the same [`GenConfig`] yields the same frames on every
//! run and platform, so a failing packet is reported as a seed and an index. Well-formed
//! frames carry correct lengths and checksums; each malformed [`Shape`] breaks one thing
//! on purpose and says so in its name.

mod inet;
mod malform;

use crate::rng::Rng;
use crate::wire::{put_u16, ETHERTYPE_QINQ, ETHERTYPE_VLAN, ETH_HLEN, ETH_ZLEN, VLAN_HLEN};

/// Largest frame the generator builds: IPv4 lengths are 16-bit.
pub const MAX_FRAME_LEN: usize = 65_535;
/// Smallest `max_len` at which a well-formed frame fits (untagged ARP, IPv4 UDP or ICMP).
pub const MIN_WELL_FORMED_LEN: usize = 42;

/// What to generate. Build one with `GenConfig { seed, ..Default::default() }`.
#[derive(Debug, Clone, PartialEq)]
pub struct GenConfig {
    pub seed: u64,
    /// Shortest frame, at least the 14-byte Ethernet header.
    pub min_len: usize,
    /// Longest frame. The kernel's `BPF_PROG_TEST_RUN` takes up to 3520 bytes for XDP.
    pub max_len: usize,
    /// Probability in `[0, 1]` that a frame is malformed on purpose.
    pub malformed_share: f64,
    /// Probability in `[0, 1]` that a frame carries VLAN tags (a third of them QinQ).
    pub vlan_share: f64,
}

impl Default for GenConfig {
    fn default() -> Self {
        GenConfig {
            seed: 0,
            min_len: ETH_HLEN,
            max_len: 1514,
            malformed_share: 0.2,
            vlan_share: 0.15,
        }
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    #[error("min_len {min_len} is below the 14-byte Ethernet header")]
    MinTooSmall { min_len: usize },
    #[error("max_len {max_len} is outside {min_len}..={MAX_FRAME_LEN}")]
    BadMax { min_len: usize, max_len: usize },
    #[error("max_len {max_len} leaves no room for a well-formed frame (needs {MIN_WELL_FORMED_LEN}); set malformed_share to 1")]
    NoRoomForWellFormed { max_len: usize },
    #[error("{name} = {value} is not a probability in [0, 1]")]
    BadShare { name: &'static str, value: f64 },
}

/// The structure of a generated frame, before VLAN tagging.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Shape {
    Ipv4Udp,
    /// TCP with a realistic option set (none, SYN options, timestamps, SACK).
    Ipv4Tcp,
    Ipv4IcmpEcho,
    /// IPv4 with header options (router alert, record route, timestamp), any L4.
    Ipv4WithOptions,
    /// A first, middle or last fragment of a larger UDP, TCP or ICMP datagram.
    Ipv4Fragment,
    Ipv6Udp,
    Ipv6Tcp,
    Ipv6IcmpEcho,
    /// Hop-by-hop, destination options and/or segment routing headers before the L4.
    Ipv6WithExtensions,
    /// A fragment (Fragment extension header) of a larger datagram.
    Ipv6Fragment,
    /// ARP request or reply.
    Arp,
    /// A well-formed frame cut exactly at the end of one of its headers.
    TruncatedAtBoundary,
    /// A well-formed frame cut inside one of its headers.
    TruncatedMidHeader,
    /// IPv4 header length field below 5 words.
    Ipv4IhlTooSmall,
    /// IPv4 header length field pointing past the end of the frame.
    Ipv4IhlBeyondPacket,
    /// IPv4 total length larger than the bytes present.
    Ipv4TotalLenTooLarge,
    /// IPv4 total length smaller than the bytes present (sometimes below the header).
    Ipv4TotalLenTooSmall,
    /// IPv6 payload length different from the bytes present.
    Ipv6PayloadLenWrong,
    /// IP version nibble not matching the ethertype.
    IpVersionMismatch,
    /// Exactly one wrong checksum (IPv4 header or L4) in an otherwise correct frame.
    BadChecksum,
    /// An ethertype no IP program handles (LLDP, MPLS, PPPoE, 802.3 lengths, random).
    UnknownEthertype,
    /// Uniformly random bytes; never tagged.
    RandomBytes,
}

impl Shape {
    pub const ALL: [Shape; 22] = [
        Shape::Ipv4Udp,
        Shape::Ipv4Tcp,
        Shape::Ipv4IcmpEcho,
        Shape::Ipv4WithOptions,
        Shape::Ipv4Fragment,
        Shape::Ipv6Udp,
        Shape::Ipv6Tcp,
        Shape::Ipv6IcmpEcho,
        Shape::Ipv6WithExtensions,
        Shape::Ipv6Fragment,
        Shape::Arp,
        Shape::TruncatedAtBoundary,
        Shape::TruncatedMidHeader,
        Shape::Ipv4IhlTooSmall,
        Shape::Ipv4IhlBeyondPacket,
        Shape::Ipv4TotalLenTooLarge,
        Shape::Ipv4TotalLenTooSmall,
        Shape::Ipv6PayloadLenWrong,
        Shape::IpVersionMismatch,
        Shape::BadChecksum,
        Shape::UnknownEthertype,
        Shape::RandomBytes,
    ];

    pub fn is_malformed(self) -> bool {
        self >= Shape::TruncatedAtBoundary
    }

    pub fn name(self) -> &'static str {
        match self {
            Shape::Ipv4Udp => "ipv4-udp",
            Shape::Ipv4Tcp => "ipv4-tcp",
            Shape::Ipv4IcmpEcho => "ipv4-icmp-echo",
            Shape::Ipv4WithOptions => "ipv4-options",
            Shape::Ipv4Fragment => "ipv4-fragment",
            Shape::Ipv6Udp => "ipv6-udp",
            Shape::Ipv6Tcp => "ipv6-tcp",
            Shape::Ipv6IcmpEcho => "ipv6-icmp-echo",
            Shape::Ipv6WithExtensions => "ipv6-ext-headers",
            Shape::Ipv6Fragment => "ipv6-fragment",
            Shape::Arp => "arp",
            Shape::TruncatedAtBoundary => "truncated-at-boundary",
            Shape::TruncatedMidHeader => "truncated-mid-header",
            Shape::Ipv4IhlTooSmall => "ipv4-ihl-too-small",
            Shape::Ipv4IhlBeyondPacket => "ipv4-ihl-beyond-packet",
            Shape::Ipv4TotalLenTooLarge => "ipv4-total-len-too-large",
            Shape::Ipv4TotalLenTooSmall => "ipv4-total-len-too-small",
            Shape::Ipv6PayloadLenWrong => "ipv6-payload-len-wrong",
            Shape::IpVersionMismatch => "ip-version-mismatch",
            Shape::BadChecksum => "bad-checksum",
            Shape::UnknownEthertype => "unknown-ethertype",
            Shape::RandomBytes => "random-bytes",
        }
    }
}

/// VLAN tags in front of the ethertype.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Tags {
    None,
    /// One 802.1Q tag (TPID 0x8100).
    Dot1Q,
    /// An outer service tag (TPID 0x88a8, sometimes the pre-standard 0x8100) and an inner
    /// 802.1Q tag.
    QinQ,
}

impl Tags {
    pub const ALL: [Tags; 3] = [Tags::None, Tags::Dot1Q, Tags::QinQ];

    pub fn count(self) -> usize {
        match self {
            Tags::None => 0,
            Tags::Dot1Q => 1,
            Tags::QinQ => 2,
        }
    }
}

/// What [`Generator::next_into`] produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Kind {
    pub shape: Shape,
    pub tags: Tags,
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.tags {
            Tags::None => f.write_str(self.shape.name()),
            Tags::Dot1Q => write!(f, "{}/vlan", self.shape.name()),
            Tags::QinQ => write!(f, "{}/qinq", self.shape.name()),
        }
    }
}

const WELL_FORMED: [Shape; 11] = [
    Shape::Ipv4Udp,
    Shape::Ipv4Tcp,
    Shape::Ipv4IcmpEcho,
    Shape::Ipv4WithOptions,
    Shape::Ipv4Fragment,
    Shape::Ipv6Udp,
    Shape::Ipv6Tcp,
    Shape::Ipv6IcmpEcho,
    Shape::Ipv6WithExtensions,
    Shape::Ipv6Fragment,
    Shape::Arp,
];
/// Roughly an edge network's mix: mostly TCP and UDP, IPv4 ahead of IPv6.
const WELL_FORMED_WEIGHTS: [u32; 11] = [22, 22, 6, 4, 5, 12, 12, 5, 5, 3, 4];

const MALFORMED: [Shape; 11] = [
    Shape::TruncatedAtBoundary,
    Shape::TruncatedMidHeader,
    Shape::Ipv4IhlTooSmall,
    Shape::Ipv4IhlBeyondPacket,
    Shape::Ipv4TotalLenTooLarge,
    Shape::Ipv4TotalLenTooSmall,
    Shape::Ipv6PayloadLenWrong,
    Shape::IpVersionMismatch,
    Shape::BadChecksum,
    Shape::UnknownEthertype,
    Shape::RandomBytes,
];
/// Truncations weigh most: they are what bounds checks in XDP programs get wrong.
const MALFORMED_WEIGHTS: [u32; 11] = [3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1];

/// Attempts at a drawn class (malformed or not) before falling back to a frame that
/// always fits; shapes can fail to fit tight `min_len`/`max_len` bounds.
const ATTEMPTS: usize = 16;

const POOL: usize = 16;
const MAX_SPANS: usize = 12;

/// Where a frame's headers lie, so that truncation can cut at or inside them.
#[derive(Debug, Clone, Copy, Default)]
struct Layout {
    spans: [(usize, usize); MAX_SPANS],
    n: usize,
    /// Offset of the L3 header.
    l3: usize,
    /// Offset of the L4 header when the frame holds a whole, unfragmented datagram.
    l4: Option<usize>,
}

impl Layout {
    fn push(&mut self, start: usize, end: usize) {
        if self.n < MAX_SPANS {
            self.spans[self.n] = (start, end);
            self.n += 1;
        }
    }

    fn spans(&self) -> &[(usize, usize)] {
        &self.spans[..self.n]
    }
}

/// The packet generator. Holds a small scratch buffer for fragmented datagrams; after
/// it has grown, generating a frame allocates only if the caller's buffer must grow.
#[derive(Debug, Clone)]
pub struct Generator {
    cfg: GenConfig,
    rng: Rng,
    scratch: Vec<u8>,
    macs: [[u8; 6]; POOL],
    ip4: [[u8; 4]; POOL],
    ip6: [[u8; 16]; POOL],
    ip_id: u16,
}

impl Generator {
    pub fn new(cfg: GenConfig) -> Result<Self, ConfigError> {
        if cfg.min_len < ETH_HLEN {
            return Err(ConfigError::MinTooSmall { min_len: cfg.min_len });
        }
        if cfg.max_len < cfg.min_len || cfg.max_len > MAX_FRAME_LEN {
            return Err(ConfigError::BadMax { min_len: cfg.min_len, max_len: cfg.max_len });
        }
        for (name, value) in
            [("malformed_share", cfg.malformed_share), ("vlan_share", cfg.vlan_share)]
        {
            if !(0.0..=1.0).contains(&value) {
                return Err(ConfigError::BadShare { name, value });
            }
        }
        if cfg.max_len < MIN_WELL_FORMED_LEN && cfg.malformed_share < 1.0 {
            return Err(ConfigError::NoRoomForWellFormed { max_len: cfg.max_len });
        }
        let mut rng = Rng::new(cfg.seed);
        let mut macs = [[0u8; 6]; POOL];
        for mac in &mut macs {
            rng.fill(mac);
            // Locally administered unicast, as test networks use.
            mac[0] = (mac[0] & 0xfc) | 0x02;
        }
        let mut ip4 = [[0u8; 4]; POOL];
        for (i, ip) in ip4.iter_mut().enumerate() {
            *ip = match i {
                0..=7 => [10, 0, rng.below(4) as u8, 1 + rng.below(254) as u8],
                8..=11 => [192, 168, rng.below(3) as u8, 1 + rng.below(254) as u8],
                _ => rng.next_u32().to_be_bytes(),
            };
        }
        let mut ip6 = [[0u8; 16]; POOL];
        for (i, ip) in ip6.iter_mut().enumerate() {
            rng.fill(ip);
            let prefix: &[u8] = match i {
                0..=7 => &[0xfd, 0x00, 0, 0, 0, 0, 0, 1],
                8..=11 => &[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0],
                12..=13 => &[0xfe, 0x80, 0, 0, 0, 0, 0, 0],
                _ => &[],
            };
            ip[..prefix.len()].copy_from_slice(prefix);
        }
        let ip_id = rng.next_u16();
        // Room for the largest datagram a fragment is cut from, so that generating never
        // grows it.
        let scratch = Vec::with_capacity(cfg.max_len.min(inet::MAX_FRAGMENT) + inet::MAX_EXTRA);
        Ok(Generator { cfg, rng, scratch, macs, ip4, ip6, ip_id })
    }

    pub fn config(&self) -> &GenConfig {
        &self.cfg
    }

    /// Replaces `buf`'s contents with the next frame and says what it is.
    pub fn next_into(&mut self, buf: &mut Vec<u8>) -> Kind {
        let malformed = self.rng.chance(self.cfg.malformed_share);
        for _ in 0..ATTEMPTS {
            buf.clear();
            let tags = self.pick_tags();
            let shape = if malformed {
                MALFORMED[self.rng.weighted(&MALFORMED_WEIGHTS)]
            } else {
                WELL_FORMED[self.rng.weighted(&WELL_FORMED_WEIGHTS)]
            };
            let tags = if shape == Shape::RandomBytes { Tags::None } else { tags };
            let built = if malformed {
                self.malformed(buf, shape, tags)
            } else {
                self.well_formed(buf, shape, tags, true, &mut Layout::default())
            };
            if built {
                return Kind { shape, tags };
            }
        }
        // Fallbacks that fit any valid configuration.
        buf.clear();
        if malformed {
            self.random_bytes(buf);
            Kind { shape: Shape::RandomBytes, tags: Tags::None }
        } else {
            let built = self.ipv4(
                buf,
                Tags::None,
                inet::L4::Udp,
                false,
                false,
                false,
                &mut Layout::default(),
            );
            debug_assert!(built, "max_len >= MIN_WELL_FORMED_LEN always fits IPv4 UDP");
            Kind { shape: Shape::Ipv4Udp, tags: Tags::None }
        }
    }

    /// The next `n` frames, each in its own vector: a convenience for tests.
    pub fn take(&mut self, n: usize) -> Vec<Vec<u8>> {
        (0..n)
            .map(|_| {
                let mut buf = Vec::new();
                self.next_into(&mut buf);
                buf
            })
            .collect()
    }

    fn pick_tags(&mut self) -> Tags {
        if !self.rng.chance(self.cfg.vlan_share) {
            Tags::None
        } else if self.rng.below(3) == 0 {
            Tags::QinQ
        } else {
            Tags::Dot1Q
        }
    }

    /// A frame length in `max(need, min_len)..=max_len`, biased towards the small and
    /// the largest frames that dominate real traffic; `None` if `need` does not fit.
    fn pick_frame_len(&mut self, need: usize) -> Option<usize> {
        let lo = need.max(self.cfg.min_len);
        let hi = self.cfg.max_len;
        if lo > hi {
            return None;
        }
        let len = match self.rng.below(20) {
            0..=7 => lo + self.rng.below(32) as usize,
            8..=14 => self.rng.range(lo, hi),
            15..=17 => hi.saturating_sub(self.rng.below(32) as usize),
            _ => hi,
        };
        Some(len.clamp(lo, hi))
    }

    fn pick_mac(&mut self) -> [u8; 6] {
        self.macs[self.rng.below(POOL as u64) as usize]
    }

    /// Mostly unicast; some broadcast and some multicast of the family's own kind.
    fn pick_dst_mac(&mut self, v6: bool) -> [u8; 6] {
        let low = self.rng.next_u8();
        match self.rng.below(100) {
            0..=6 if !v6 => [0xff; 6],
            7..=14 if v6 => [0x33, 0x33, 0xff, 0x00, 0x00, low],
            7..=11 => [0x01, 0x00, 0x5e, 0x00, 0x00, low],
            _ => self.pick_mac(),
        }
    }

    /// The frame length for a datagram of `need` header bytes: `bare` ones (TCP SYN,
    /// RST) carry no payload beyond what `min_len` forces.
    fn datagram_len(&mut self, need: usize, bare: bool) -> Option<usize> {
        if bare {
            let len = need.max(self.cfg.min_len);
            (len <= self.cfg.max_len).then_some(len)
        } else {
            self.pick_frame_len(need)
        }
    }

    fn pick_ip4(&mut self) -> [u8; 4] {
        if self.rng.chance(0.8) {
            self.ip4[self.rng.below(POOL as u64) as usize]
        } else {
            self.rng.next_u32().to_be_bytes()
        }
    }

    fn pick_ip6(&mut self) -> [u8; 16] {
        if self.rng.chance(0.8) {
            self.ip6[self.rng.below(POOL as u64) as usize]
        } else {
            let mut ip = [0u8; 16];
            self.rng.fill(&mut ip);
            ip
        }
    }

    fn l2_len(tags: Tags) -> usize {
        ETH_HLEN + VLAN_HLEN * tags.count()
    }

    /// Appends the Ethernet header with `tags` and returns the L3 offset.
    fn put_l2(
        &mut self,
        buf: &mut Vec<u8>,
        tags: Tags,
        ethertype: u16,
        dst: [u8; 6],
        src: [u8; 6],
        lay: &mut Layout,
    ) -> usize {
        buf.extend_from_slice(&dst);
        buf.extend_from_slice(&src);
        let tpids: &[u16] = match tags {
            Tags::None => &[],
            Tags::Dot1Q => &[ETHERTYPE_VLAN],
            Tags::QinQ if self.rng.chance(0.8) => &[ETHERTYPE_QINQ, ETHERTYPE_VLAN],
            Tags::QinQ => &[ETHERTYPE_VLAN, ETHERTYPE_VLAN],
        };
        for &tpid in tpids {
            let start = buf.len();
            put_u16(buf, tpid);
            let pcp = self.rng.pick(&[0u16, 0, 0, 3, 5, 7]);
            let vid = 1 + self.rng.below(4094) as u16;
            put_u16(buf, (pcp << 13) | vid);
            lay.push(start, buf.len());
        }
        put_u16(buf, ethertype);
        lay.push(0, buf.len());
        lay.l3 = buf.len();
        buf.len()
    }

    /// Pads a short frame to the 60-byte Ethernet minimum half the time, as a real
    /// sender would: the IP length then no longer reaches the end of the frame.
    fn maybe_pad(&mut self, buf: &mut Vec<u8>) {
        if buf.len() < ETH_ZLEN && ETH_ZLEN <= self.cfg.max_len && self.rng.chance(0.5) {
            buf.resize(ETH_ZLEN, 0);
        }
    }

    /// Builds a well-formed frame of `shape`; false if it cannot fit the length bounds.
    fn well_formed(
        &mut self,
        buf: &mut Vec<u8>,
        shape: Shape,
        tags: Tags,
        pad: bool,
        lay: &mut Layout,
    ) -> bool {
        use inet::L4;
        let any_l4 = |g: &mut Self| g.rng.pick(&[L4::Udp, L4::Tcp, L4::Icmp]);
        match shape {
            Shape::Ipv4Udp => self.ipv4(buf, tags, L4::Udp, false, false, pad, lay),
            Shape::Ipv4Tcp => self.ipv4(buf, tags, L4::Tcp, false, false, pad, lay),
            Shape::Ipv4IcmpEcho => self.ipv4(buf, tags, L4::Icmp, false, false, pad, lay),
            Shape::Ipv4WithOptions => {
                let l4 = any_l4(self);
                self.ipv4(buf, tags, l4, true, false, pad, lay)
            }
            Shape::Ipv4Fragment => {
                let l4 = any_l4(self);
                self.ipv4(buf, tags, l4, false, true, pad, lay)
            }
            Shape::Ipv6Udp => self.ipv6(buf, tags, L4::Udp, false, false, pad, lay),
            Shape::Ipv6Tcp => self.ipv6(buf, tags, L4::Tcp, false, false, pad, lay),
            Shape::Ipv6IcmpEcho => self.ipv6(buf, tags, L4::Icmp, false, false, pad, lay),
            Shape::Ipv6WithExtensions => {
                let l4 = any_l4(self);
                self.ipv6(buf, tags, l4, true, false, pad, lay)
            }
            Shape::Ipv6Fragment => {
                let l4 = any_l4(self);
                let exts = self.rng.chance(0.3);
                self.ipv6(buf, tags, l4, exts, true, pad, lay)
            }
            Shape::Arp => self.arp(buf, tags, pad, lay),
            _ => false,
        }
    }

    fn random_bytes(&mut self, buf: &mut Vec<u8>) {
        let len = self.pick_frame_len(self.cfg.min_len).unwrap_or(self.cfg.min_len);
        buf.resize(len, 0);
        self.rng.fill(buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_is_validated() {
        let bad = |c: GenConfig| Generator::new(c).err();
        let d = GenConfig::default();
        assert_eq!(
            bad(GenConfig { min_len: 13, ..d.clone() }),
            Some(ConfigError::MinTooSmall { min_len: 13 })
        );
        assert_eq!(
            bad(GenConfig { min_len: 100, max_len: 99, ..d.clone() }),
            Some(ConfigError::BadMax { min_len: 100, max_len: 99 })
        );
        assert_eq!(
            bad(GenConfig { max_len: 70_000, ..d.clone() }),
            Some(ConfigError::BadMax { min_len: 14, max_len: 70_000 })
        );
        assert!(matches!(
            bad(GenConfig { vlan_share: 1.5, ..d.clone() }),
            Some(ConfigError::BadShare { name: "vlan_share", .. })
        ));
        assert!(matches!(
            bad(GenConfig { malformed_share: f64::NAN, ..d.clone() }),
            Some(ConfigError::BadShare { name: "malformed_share", .. })
        ));
        assert_eq!(
            bad(GenConfig { max_len: 41, ..d.clone() }),
            Some(ConfigError::NoRoomForWellFormed { max_len: 41 })
        );
        assert!(Generator::new(GenConfig { max_len: 20, malformed_share: 1.0, ..d }).is_ok());
    }

    #[test]
    fn frame_len_respects_bounds_and_reaches_both_ends() {
        let mut g = Generator::new(GenConfig { min_len: 60, max_len: 200, ..Default::default() })
            .expect("valid config");
        let (mut lo, mut hi) = (false, false);
        for _ in 0..2000 {
            let len = g.pick_frame_len(42).expect("fits");
            assert!((60..=200).contains(&len));
            lo |= len == 60;
            hi |= len == 200;
        }
        assert!(lo && hi);
        assert_eq!(g.pick_frame_len(201), None);
    }

    #[test]
    fn shape_lists_agree() {
        for s in Shape::ALL {
            assert_eq!(s.is_malformed(), MALFORMED.contains(&s), "{s:?}");
            assert_eq!(!s.is_malformed(), WELL_FORMED.contains(&s), "{s:?}");
        }
        let mut names: Vec<_> = Shape::ALL.iter().map(|s| s.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Shape::ALL.len());
    }
}
