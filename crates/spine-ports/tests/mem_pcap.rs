//! The in-memory and capture-file ports: exact replay order, limits, sinks that count
//! and free, drops when the pool is empty, and pcap files in and out.

#[path = "common/mod.rs"]
#[allow(dead_code, reason = "shared helpers; this file needs only TempFile")]
mod common;

use common::TempFile;
use spine_ports::gen::{GenConfig, Generator};
use spine_ports::{
    read_capture, Burst, MemPort, PcapSink, PcapSource, PcapWriter, Pool, PoolConfig, Port,
    PortErrorKind,
};

fn packets(n: usize) -> Vec<Vec<u8>> {
    (0..n).map(|i| vec![i as u8; 60 + i]).collect()
}

#[test]
fn mem_replays_round_robin_in_order() {
    let pool = Pool::new(PoolConfig::new(64)).unwrap();
    let mut cache = pool.cache();
    let pkts = packets(5);
    let mut port = MemPort::replay("mem0", &pkts).unwrap().with_port_id(9);
    let mut burst = Burst::with_capacity(3);
    let mut seen = Vec::new();
    for _ in 0..4 {
        assert_eq!(port.rx_burst(&mut cache, &mut burst).unwrap(), 3);
        for b in burst.iter_mut() {
            seen.push(pool.data(b).unwrap().to_vec());
            let m = pool.meta(b).unwrap();
            let len = pool.data(b).unwrap().len() as u32;
            assert_eq!(
                m,
                spine_pool::BufMeta { data_off: 256, len, meta_len: 0, port: 9, ts_ns: 0 }
            );
            // What a program leaves behind must not show in the next receive of the buffer.
            let left =
                spine_pool::BufMeta { data_off: 200, len: 3, meta_len: 8, port: 1, ts_ns: 4 };
            pool.set_meta(b, left).unwrap();
        }
        cache.free_burst(&mut burst).unwrap();
    }
    let expect: Vec<Vec<u8>> = (0..12).map(|i| pkts[i % 5].clone()).collect();
    assert_eq!(seen, expect);
    let st = port.stats();
    assert_eq!(st.rx_packets, 12);
    assert_eq!(st.rx_bytes, expect.iter().map(|p| p.len() as u64).sum::<u64>());
}

#[test]
fn mem_limit_stops_the_replay() {
    let pool = Pool::new(PoolConfig::new(64)).unwrap();
    let mut cache = pool.cache();
    let mut port = MemPort::replay("mem0", packets(2)).unwrap().with_limit(7);
    let mut burst = Burst::with_capacity(4);
    assert_eq!(port.rx_burst(&mut cache, &mut burst).unwrap(), 4);
    cache.free_burst(&mut burst).unwrap();
    assert_eq!(port.rx_burst(&mut cache, &mut burst).unwrap(), 3);
    cache.free_burst(&mut burst).unwrap();
    assert_eq!(port.rx_burst(&mut cache, &mut burst).unwrap(), 0);
    assert_eq!(port.remaining(), Some(0));
}

#[test]
fn mem_counts_drops_when_the_pool_is_empty_or_a_packet_too_big() {
    let pool = Pool::new(PoolConfig { cache_batch: 2, ..PoolConfig::new(4) }).unwrap();
    let mut cache = pool.cache();
    let mut port = MemPort::replay("mem0", packets(3)).unwrap();
    let mut burst = Burst::with_capacity(8);
    assert_eq!(port.rx_burst(&mut cache, &mut burst).unwrap(), 4);
    assert_eq!(port.stats().rx_drops.no_buffer, 1);
    cache.free_burst(&mut burst).unwrap();

    let mut big = MemPort::replay("mem1", [vec![0u8; 2000], vec![1u8; 64]]).unwrap().with_limit(2);
    assert_eq!(big.rx_burst(&mut cache, &mut burst).unwrap(), 1);
    assert_eq!(pool.data(burst.get(0).unwrap()).unwrap(), &[1u8; 64]);
    assert_eq!(big.stats().rx_drops.too_big, 1);
    cache.free_burst(&mut burst).unwrap();
    drop(cache);
    assert_eq!(pool.shared_free(), 4);
    assert!(matches!(
        MemPort::replay("mem2", Vec::<Vec<u8>>::new()).unwrap_err().kind,
        PortErrorKind::Config { .. }
    ));
}

#[test]
fn mem_sink_counts_and_frees() {
    let pool = Pool::new(PoolConfig::new(32)).unwrap();
    let mut cache = pool.cache();
    let mut src = MemPort::replay("src", packets(4)).unwrap();
    let mut sink = MemPort::sink("sink");
    let mut burst = Burst::with_capacity(10);
    src.rx_burst(&mut cache, &mut burst).unwrap();
    let shared = pool.share(burst.get(0).unwrap()).unwrap();
    assert_eq!(sink.tx_burst(&mut cache, &mut burst).unwrap(), 10);
    assert!(burst.is_empty());
    assert_eq!(sink.rx_burst(&mut cache, &mut burst).unwrap(), 0, "a sink receives nothing");
    let st = sink.stats();
    assert_eq!(st.tx_packets, 10);
    assert_eq!(st.tx_bytes, (60 + 61 + 62 + 63) * 2 + 60 + 61);
    // The extra reference keeps its buffer alive after the sink freed its own.
    assert_eq!(pool.data(&shared).unwrap(), &[0u8; 60]);
    cache.free(shared).unwrap();
    drop(cache);
    assert_eq!(pool.shared_free(), 32);
}

#[test]
fn pcap_in_replays_once_and_pcap_out_writes_what_it_is_sent() {
    let input = TempFile::new("in.pcap");
    let output = TempFile::new("out.pcap");
    let mut gen = Generator::new(GenConfig { seed: 5, ..GenConfig::default() }).unwrap();
    let mut w = PcapWriter::ethernet(std::fs::File::create(input.path()).unwrap()).unwrap();
    let mut frame = Vec::new();
    let mut written = Vec::new();
    for i in 0..100u64 {
        gen.next_into(&mut frame);
        w.write(1_700_000_000_000_000_000 + i * 1000, &frame).unwrap();
        written.push(frame.clone());
    }
    w.finish().unwrap();

    let pool = Pool::new(PoolConfig::new(64)).unwrap();
    let mut cache = pool.cache();
    let mut src = PcapSource::open(input.path(), 3).unwrap();
    let mut sink = PcapSink::create(output.path()).unwrap();
    let mut burst = Burst::with_capacity(16);
    let mut n = 0u64;
    while !src.is_done() || !burst.is_empty() {
        src.rx_burst(&mut cache, &mut burst).unwrap();
        for b in burst.iter() {
            let m = pool.meta(b).unwrap();
            assert_eq!(m.ts_ns, 1_700_000_000_000_000_000 + n * 1000, "capture time kept");
            assert_eq!(m.port, 3);
            n += 1;
        }
        sink.tx_burst(&mut cache, &mut burst).unwrap();
    }
    assert_eq!(n, 100);
    assert_eq!(src.rx_burst(&mut cache, &mut burst).unwrap(), 0, "replayed once");
    assert_eq!(src.stats().rx_packets, 100);
    assert_eq!(sink.stats().tx_packets, 100);
    assert_eq!(sink.finish().unwrap(), 100);
    let back = read_capture(&std::fs::read(output.path()).unwrap()).unwrap();
    let data: Vec<Vec<u8>> = back.packets.iter().map(|p| p.data.clone()).collect();
    assert_eq!(data, written);
    assert_eq!(back.packets[5].ts_ns, 1_700_000_000_000_005_000);
}

#[test]
fn pcap_errors_name_the_file() {
    let missing = TempFile::new("missing.pcap");
    let e = PcapSource::open(missing.path(), 0).unwrap_err();
    assert!(matches!(e.kind, PortErrorKind::Io { op: "open", .. }), "{e}");
    assert!(e.to_string().contains("missing.pcap"), "{e}");
    let junk = TempFile::new("junk.pcap");
    std::fs::write(junk.path(), b"not a capture").unwrap();
    let e = PcapSource::open(junk.path(), 0).unwrap_err();
    assert!(matches!(e.kind, PortErrorKind::Capture(_)), "{e}");

    let empty = TempFile::new("empty.pcap");
    PcapWriter::ethernet(std::fs::File::create(empty.path()).unwrap()).unwrap();
    let mut src = PcapSource::open(empty.path(), 0).unwrap();
    let pool = Pool::new(PoolConfig::new(4)).unwrap();
    let mut burst = Burst::with_capacity(1);
    let e = src.tx_burst(&mut pool.cache(), &mut burst).unwrap_err();
    assert!(matches!(e.kind, PortErrorKind::WrongDirection { .. }), "{e}");
}
