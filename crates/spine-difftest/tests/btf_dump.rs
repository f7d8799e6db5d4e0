//! Map keys and values printed from the object's BTF (`spine_obj::BtfFormatter`, what
//! `spine map dump` shows) against `bpftool map dump -j`'s `formatted` output for the
//! same bytes in kernel maps created with the same BTF (`tests/fixtures/btf_dump.c`:
//! integers of every width and sign, bool, chars and char arrays, enums, bitfields,
//! nested and anonymous members, a per-CPU value). Needs root (bpf(2)) and bpftool;
//! without them the test says SKIP loudly and passes.

mod common;

use common::kernel_available;
use spine_obj::BtfFormatter;

/// Deterministic bytes for entry `i`, with printable and unprintable characters.
fn bytes(i: u32, len: usize, salt: u32) -> Vec<u8> {
    let mut x = i.wrapping_mul(2_654_435_761) ^ salt;
    (0..len)
        .map(|_| {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            (x >> 16) as u8
        })
        .collect()
}

/// Offset of `name` in `struct stats`.
const NAME: usize = 29;

/// A value whose `name` holds a C string for even `i` (garbage after its NUL for some).
fn stats_value(i: u32, len: usize) -> Vec<u8> {
    let mut v = bytes(i, len, 0x5eed);
    if i.is_multiple_of(2) {
        let name = format!("flow-{i}");
        if i.is_multiple_of(4) {
            v[NAME..NAME + 12].fill(0);
        }
        v[NAME..NAME + name.len()].copy_from_slice(name.as_bytes());
        v[NAME + name.len()] = 0;
    }
    v
}

fn bpftool_dump(id: u32) -> Option<serde_json::Value> {
    let out = std::process::Command::new("bpftool")
        .args(["-j", "map", "dump", "id", &id.to_string()])
        .output()
        .ok()?;
    assert!(out.status.success(), "bpftool: {}", String::from_utf8_lossy(&out.stderr));
    Some(serde_json::from_slice(&out.stdout).expect("bpftool prints JSON"))
}

fn hex_bytes(v: &serde_json::Value) -> Vec<u8> {
    v.as_array()
        .expect("bytes as a list")
        .iter()
        .map(|b| u8::from_str_radix(b.as_str().unwrap().trim_start_matches("0x"), 16).unwrap())
        .collect()
}

#[test]
fn keys_and_values_print_as_bpftool_prints_them() {
    if !kernel_available() {
        return;
    }
    let object = common::fixture("btf_dump", "btf_dump", &[]);
    let obj = spine_obj::parse(&object).expect("the fixture parses");
    let btf = obj.btf.as_deref().expect("the fixture has BTF");
    let fmt = BtfFormatter::new(btf).expect("the BTF formats");
    let ko = spine_sys::load_object_program(&obj, &obj.programs[0]).expect("the kernel loads it");
    let (flows, per_cpu) = (&obj.maps[0], &obj.maps[1]);
    assert_eq!((flows.name.as_str(), per_cpu.name.as_str()), ("flows", "per_cpu"));

    let (kflows, kper) = (&ko.maps[0], &ko.maps[1]);
    for i in 0..40u32 {
        let key = bytes(i, flows.key_size as usize, 0xf10);
        kflows.update(&key, &stats_value(i, flows.value_size as usize), 0).unwrap();
    }
    for i in 0..4u32 {
        let v = kper.value_for_all_cpus(&bytes(i, per_cpu.value_size as usize, 0xc9));
        kper.update(&i.to_le_bytes(), &v, 0).unwrap();
    }

    let Some(dump) = bpftool_dump(kflows.info().unwrap().id) else {
        eprintln!("SKIP: bpftool is not installed");
        return;
    };
    let entries = dump.as_array().expect("a list of entries");
    assert_eq!(entries.len(), 40);
    for e in entries {
        let (k, v) = (hex_bytes(&e["key"]), hex_bytes(&e["value"]));
        let ours_k: serde_json::Value =
            serde_json::from_str(&fmt.json(flows.btf_key_type_id, &k).unwrap()).unwrap();
        let ours_v: serde_json::Value =
            serde_json::from_str(&fmt.json(flows.btf_value_type_id, &v).unwrap()).unwrap();
        assert_eq!(ours_k, e["formatted"]["key"], "key {k:02x?}");
        assert_eq!(ours_v, e["formatted"]["value"], "value {v:02x?}");
    }
    // Strings and char arrays that hold none both occurred.
    let names: Vec<&serde_json::Value> =
        entries.iter().map(|e| &e["formatted"]["value"]["name"]).collect();
    assert_eq!(
        names.iter().filter(|n| n.as_str().is_some_and(|s| s.starts_with("flow-"))).count(),
        20
    );
    assert!(names.iter().any(|n| n.is_array()));

    let dump = bpftool_dump(kper.info().unwrap().id).expect("bpftool ran before");
    let entries = dump.as_array().expect("a list of entries");
    assert_eq!(entries.len(), 4);
    for e in entries {
        let k = hex_bytes(&e["key"]);
        let ours_k: serde_json::Value =
            serde_json::from_str(&fmt.json(per_cpu.btf_key_type_id, &k).unwrap()).unwrap();
        assert_eq!(ours_k, e["formatted"]["key"]);
        for (cpu, slot) in e["values"].as_array().expect("per-CPU values").iter().enumerate() {
            let v = hex_bytes(&slot["value"]);
            let ours: serde_json::Value =
                serde_json::from_str(&fmt.json(per_cpu.btf_value_type_id, &v).unwrap()).unwrap();
            assert_eq!(ours, e["formatted"]["values"][cpu]["value"], "cpu {cpu}");
        }
    }

    // Data shorter than the type is an error, not a read past it.
    let short = fmt.json(flows.btf_value_type_id, &[0u8; 8]).unwrap_err();
    assert!(short.to_string().contains("bytes, the data 8"), "{short}");
}
