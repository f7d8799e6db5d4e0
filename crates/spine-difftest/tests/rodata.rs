//! A program configured by `const volatile` settings (`tests/fixtures/rodata.c`) against
//! the kernel: both verifiers read the frozen `.rodata` as known numbers (an index used
//! without a bounds check, a branch ruled out), and verdicts, bytes and maps agree on
//! both engines. Needs root (bpf(2)); without it the test says SKIP loudly and passes.

mod common;

use common::kernel_available;

#[test]
fn const_volatile_settings_are_known_numbers_as_in_the_kernel() {
    if !kernel_available() {
        return;
    }
    let object = common::fixture("rodata", "settings", &[]);
    // Ethernet-sized and longer (the kernel's test run takes no shorter frame).
    let pkts: Vec<Vec<u8>> = (14..40).map(|n| vec![0xab; n]).collect();
    let (report, pair) = common::check(&object, "by_setting", &pkts, |_| {});
    assert_eq!(report.verdicts[2], pkts.len(), "{report}");
    let counts = pair.spine_map("counts").expect("counts");
    let mut v = vec![0u8; 32];
    counts.lookup_user(&0u32.to_le_bytes(), &mut v).unwrap();
    let slot3 = u64::from_le_bytes(v[24..32].try_into().unwrap());
    assert_eq!(slot3, pkts.len() as u64, "slot 3 counted every packet: {v:?}");
}
