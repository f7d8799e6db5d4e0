//! A nullable map value compared with a checked value of the same map
//! (`tests/fixtures/same_value.c`): the kernel and spine both load the program that
//! writes through the second lookup where the two are equal, and agree on verdicts,
//! bytes and the map after every frame, on both engines. Needs root (bpf(2)); without
//! it the test says SKIP loudly and passes.

mod common;

use common::kernel_available;

#[test]
fn a_lookup_equal_to_a_checked_one_is_written_through_as_in_the_kernel() {
    if !kernel_available() {
        return;
    }
    let object = common::fixture("same_value", "diff", &[]);
    let pkts: Vec<Vec<u8>> = (0u8..16).map(|k| [vec![k], vec![0; 63]].concat()).collect();
    let (report, pair) = common::check(&object, "same_value", &pkts, |pair| {
        for k in 0u32..2 {
            pair.update("vals", &k.to_le_bytes(), &(u64::from(k) * 100).to_le_bytes())
                .expect("vals");
        }
    });
    // Keys 0 and 1 (half the frames) are found and counted; 2 and 3 pass.
    assert_eq!((report.verdicts[1], report.verdicts[2]), (8, 8), "{report}");
    assert_eq!(pair.spine_map_u64("vals").iter().sum::<u64>(), 100 + 8, "counted");
}
