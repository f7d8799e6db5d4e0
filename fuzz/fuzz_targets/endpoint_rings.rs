//! A hostile endpoint client: the input is a script of raw writes over the rings
//! (indices, descriptors and inline slots alike) interleaved with the adapter's receive and transmit
//! calls, multi-buffer deliveries (`deliver_pieces`, odd ops on a multi-buffer endpoint)
//! among them. The adapter side must never panic, never return a message longer than the
//! buffer it was given, and a second, honest endpoint must keep working throughout.
#![no_main]

use libfuzzer_sys::fuzz_target;
use spine_endpoint::{AdapterEnd, ClientEnd, Layout};

fn pair(layout: Layout) -> (AdapterEnd, ClientEnd) {
    let a = AdapterEnd::create(layout).unwrap();
    let fd = a.shm().fd().try_clone_to_owned().unwrap();
    (a, ClientEnd::open(fd).unwrap())
}

fuzz_target!(|data: &[u8]| {
    let layout = Layout::new(8, 256, 8).unwrap();
    let (mut bad_a, bad_c) = pair(layout);
    bad_a.set_multi_buffer(data.first().is_some_and(|b| b & 1 == 1));
    let (mut good_a, mut good_c) = pair(layout);
    let rings = 4096..layout.area_offset();
    let words = (rings.end - rings.start) / 8;
    let mut buf = [0u8; 128];
    for op in data.chunks_exact(10) {
        match op[0] % 4 {
            0 | 1 => {
                let word = u16::from_le_bytes([op[1], op[2]]) as usize % words;
                let v = u64::from_le_bytes(op[2..10].try_into().unwrap());
                if op[0] % 4 == 0 {
                    bad_c.poke_u64(rings.start + word * 8, v);
                } else {
                    bad_c.poke_u32(rings.start + word * 8 + 4 * (op[1] as usize & 1), v as u32);
                }
            }
            2 if op[4] & 1 == 0 => {
                bad_a.deliver(&vec![op[1]; op[2] as usize + op[3] as usize]);
            }
            2 => {
                // A chained frame of up to 5 pieces of up to 510 bytes.
                let frame = vec![op[1]; 5 * 510];
                let lens = [op[2], op[3], op[5], op[6], op[7]].map(|l| l as usize * 2);
                let pieces: Vec<&[u8]> = lens.iter().map(|&l| &frame[..l]).collect();
                bad_a.deliver_pieces(&pieces[..1 + op[8] as usize % 5]);
            }
            _ => {
                if let Some(n) = bad_a.take(&mut buf) {
                    assert!(n <= buf.len());
                }
            }
        }
        // Inline (40 bytes) and in a frame (100 bytes).
        for len in [40, 100] {
            assert!(good_c.send(&[7; 100][..len]));
            assert_eq!(good_a.take(&mut buf), Some(len));
            assert!(good_a.deliver(&[8; 100][..len]));
            assert_eq!(good_c.recv(8, |m| assert_eq!(m, &[8; 100][..len])), 1);
        }
    }
});
