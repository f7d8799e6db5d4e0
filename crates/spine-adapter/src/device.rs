//! The ports an adapter drives, one enum over spine-ports' kinds (static dispatch, and
//! what only some kinds can do: say they have nothing left to receive, close with an
//! error that dropping would hide), plus the pcap port that reads one file and writes
//! another, and the opening of each kind from its configuration.

use std::path::Path;

use spine_pool::{Burst, PoolCache};
use spine_ports::craft::{udp4, Flow4};
use spine_ports::gen::{GenConfig, Generator};
use spine_ports::{
    read_capture, AfPacketConfig, AfPacketPort, AfXdpConfig, AfXdpPort, MemPort, PcapSink,
    PcapSource, Port, PortError, PortErrorKind, PortStats, TapPort, TunnelKey, UdpPort,
};

use crate::config::{MemPackets, PortKind};

/// A port the adapter owns. `Other` takes any [`Port`] (tests' fakes, new kinds).
pub enum Device {
    Mem { port: MemPort, sink: bool },
    Pcap(PcapPort),
    AfPacket(AfPacketPort),
    AfXdp(AfXdpPort),
    Tap(TapPort),
    Udp(UdpPort),
    Other(Box<dyn Port>),
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self {
            Device::Mem { port, .. } => port.name(),
            Device::Pcap(p) => p.name(),
            Device::AfPacket(p) => p.name(),
            Device::AfXdp(p) => p.name(),
            Device::Tap(p) => p.name(),
            Device::Udp(p) => p.name(),
            Device::Other(p) => p.name(),
        };
        write!(f, "Device({} {name})", self.kind())
    }
}

impl Device {
    /// The port, for receive and transmit bursts.
    #[inline]
    pub fn port(&mut self) -> &mut dyn Port {
        match self {
            Device::Mem { port, .. } => port,
            Device::Pcap(p) => p,
            Device::AfPacket(p) => p,
            Device::AfXdp(p) => p,
            Device::Tap(p) => p,
            Device::Udp(p) => p,
            Device::Other(p) => p.as_mut(),
        }
    }

    pub fn stats(&self) -> PortStats {
        match self {
            Device::Mem { port, .. } => port.stats(),
            Device::Pcap(p) => p.stats(),
            Device::AfPacket(p) => p.stats(),
            Device::AfXdp(p) => p.stats(),
            Device::Tap(p) => p.stats(),
            Device::Udp(p) => p.stats(),
            Device::Other(p) => p.stats(),
        }
    }

    /// Whether the port transmits chained (multi-buffer) frames ([`Port::takes_frags`]).
    pub fn takes_frags(&self) -> bool {
        match self {
            Device::Mem { port, .. } => port.takes_frags(),
            Device::Pcap(p) => p.takes_frags(),
            Device::AfPacket(p) => p.takes_frags(),
            Device::AfXdp(p) => p.takes_frags(),
            Device::Tap(p) => p.takes_frags(),
            Device::Udp(p) => p.takes_frags(),
            Device::Other(p) => p.takes_frags(),
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Device::Mem { .. } => "mem",
            Device::Pcap(_) => "pcap",
            Device::AfPacket(_) => "afpacket",
            Device::AfXdp(_) => "afxdp",
            Device::Tap(_) => "tap",
            Device::Udp(_) => "udp",
            Device::Other(_) => "other",
        }
    }

    /// True when the port will never receive again: a mem port past its limit or a sink,
    /// a pcap port at the end of its input (or without one). Interfaces never are.
    pub fn exhausted(&self) -> bool {
        match self {
            Device::Mem { port, sink } => *sink || port.remaining() == Some(0),
            Device::Pcap(p) => p.source.as_ref().is_none_or(PcapSource::is_done),
            _ => false,
        }
    }

    /// Closes the port; for a pcap port, flushes its output file, reporting what a drop
    /// would hide.
    pub fn close(self) -> Result<(), PortError> {
        match self {
            Device::Pcap(p) => p.close(),
            _ => Ok(()),
        }
    }
}

/// A capture-file port: `input` replayed once on receive, transmissions written to
/// `output`. Without an output, transmitted packets are counted as device drops.
#[derive(Debug)]
pub struct PcapPort {
    name: String,
    source: Option<PcapSource>,
    sink: Option<PcapSink>,
    no_output: u64,
}

impl PcapPort {
    pub fn open(
        name: &str,
        input: Option<&Path>,
        output: Option<&Path>,
        port_id: u32,
    ) -> Result<PcapPort, PortError> {
        let source = input.map(|p| PcapSource::open(p, port_id)).transpose()?;
        let sink = output.map(PcapSink::create).transpose()?;
        Ok(PcapPort { name: name.to_string(), source, sink, no_output: 0 })
    }

    fn close(mut self) -> Result<(), PortError> {
        match self.sink.take() {
            Some(s) => s.finish().map(drop),
            None => Ok(()),
        }
    }
}

impl Port for PcapPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, cache: &mut PoolCache, out: &mut Burst) -> Result<usize, PortError> {
        match &mut self.source {
            Some(s) => s.rx_burst(cache, out),
            None => Ok(0),
        }
    }

    fn tx_burst(&mut self, cache: &mut PoolCache, pkts: &mut Burst) -> Result<usize, PortError> {
        match &mut self.sink {
            Some(s) => s.tx_burst(cache, pkts),
            None => {
                let n = pkts.len();
                self.no_output += n as u64;
                cache.free_burst(pkts).map_err(|e| PortError::new(&self.name, e.into()))?;
                Ok(n)
            }
        }
    }

    fn stats(&self) -> PortStats {
        let rx = self.source.as_ref().map(Port::stats).unwrap_or_default();
        let tx = self.sink.as_ref().map(Port::stats).unwrap_or_default();
        let mut s = PortStats {
            rx_packets: rx.rx_packets,
            rx_bytes: rx.rx_bytes,
            rx_drops: rx.rx_drops,
            tx_packets: tx.tx_packets,
            tx_bytes: tx.tx_bytes,
            tx_drops: tx.tx_drops,
            tx_copied: 0,
        };
        s.tx_drops.device += self.no_output;
        s
    }

    fn takes_frags(&self) -> bool {
        true
    }
}

/// The packets a mem port replays.
pub fn mem_packets(name: &str, packets: &MemPackets) -> Result<Vec<Vec<u8>>, PortError> {
    let cfg_err = |reason| PortError::new(name, PortErrorKind::Config { reason });
    Ok(match packets {
        MemPackets::None => Vec::new(),
        MemPackets::Capture(path) => {
            let bytes = std::fs::read(path).map_err(|source| {
                PortError::new(name, PortErrorKind::Io { op: "read capture", source })
            })?;
            let cap = read_capture(&bytes)
                .map_err(|e| PortError::new(name, PortErrorKind::Capture(e)))?;
            cap.packets.into_iter().map(|p| p.data).collect()
        }
        MemPackets::Generate { count, seed, max_len } => {
            let cfg = GenConfig { seed: *seed, max_len: *max_len, ..GenConfig::default() };
            Generator::new(cfg).map_err(|_| cfg_err("generator settings refused"))?.take(*count)
        }
        MemPackets::Udp4 { flows, size } => (0..*flows)
            .map(|i| {
                let flow = Flow4 {
                    src_port: 1024 + (i % 60_000) as u16,
                    src: std::net::Ipv4Addr::from(0x0a00_0001 + (i >> 16)),
                    ..Flow4::default()
                };
                let mut f = Vec::new();
                udp4(&mut f, &flow, size.saturating_sub(42)).map(|()| f)
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| cfg_err("udp4 frame size"))?,
    })
}

/// Opens a port of `kind` as `name`. AF_XDP ports after the first share its UMEM
/// (`owner`): every port uses the one pool, so buffers move between ports uncopied.
pub fn open(
    name: &str,
    kind: &PortKind,
    port_id: u32,
    cache: &mut PoolCache,
    owner: Option<&AfXdpPort>,
) -> Result<Device, PortError> {
    Ok(match kind {
        PortKind::Mem { packets, limit } => {
            let list = mem_packets(name, packets)?;
            if list.is_empty() {
                Device::Mem { port: MemPort::sink(name).with_port_id(port_id), sink: true }
            } else {
                let mut port = MemPort::replay(name, &list)?.with_port_id(port_id);
                if let Some(l) = limit {
                    port = port.with_limit(*l);
                }
                Device::Mem { port, sink: false }
            }
        }
        PortKind::Pcap { input, output } => {
            Device::Pcap(PcapPort::open(name, input.as_deref(), output.as_deref(), port_id)?)
        }
        PortKind::AfPacket { interface, promiscuous } => {
            let cfg = AfPacketConfig {
                promiscuous: *promiscuous,
                port_id,
                ..AfPacketConfig::new(interface)
            };
            Device::AfPacket(AfPacketPort::open(cfg)?)
        }
        PortKind::AfXdp { interface, queue, bind, attach, ring_size, frags } => {
            let cfg = AfXdpConfig {
                frags: *frags,
                queue: *queue,
                bind: *bind,
                attach: *attach,
                rx_size: *ring_size,
                tx_size: *ring_size,
                fill_size: *ring_size,
                comp_size: *ring_size,
                port_id,
                ..AfXdpConfig::new(interface)
            };
            Device::AfXdp(match owner {
                None => AfXdpPort::open(cfg, cache)?,
                Some(o) => AfXdpPort::open_shared(cfg, cache, o)?,
            })
        }
        PortKind::Tap { interface, up, twin } => {
            let tap = TapPort::open(interface, port_id)?;
            // A twin comes up once it has its port's MAC (see `AdapterBuilder::set_twin`).
            if *up && twin.is_none() {
                tap.set_up(true)?;
            }
            Device::Tap(tap)
        }
        PortKind::Udp { local, peer, key_file } => {
            let key = key_file
                .as_deref()
                .map(TunnelKey::from_file)
                .transpose()
                .map_err(|e| PortError::new(name, e.into()))?;
            let port = UdpPort::open(name, *local, *peer, port_id)?;
            Device::Udp(match key {
                Some(k) => port.with_key(&k),
                None => port,
            })
        }
    })
}
