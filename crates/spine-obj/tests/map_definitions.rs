//! BTF-defined map attributes as clang encodes them, one C snippet per rule of libbpf's
//! `parse_btf_map_def`: what is accepted and how, and the error each mistake gives.

mod common;

use spine_abi::map_type;
use spine_obj::{parse, MapErrorKind, MapSpec, ObjError, SlotTarget};

const PRELUDE: &str = "#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\n";
const PROGRAM: &str =
    "SEC(\"xdp\") int p(struct xdp_md *ctx) { return XDP_PASS; }\nchar _l[] SEC(\"license\") = \"GPL\";\n";

/// Compiles `decls` (map declarations) with a trivial program.
fn build(name: &str, decls: &str) -> Result<Vec<MapSpec>, ObjError> {
    let src = format!("{PRELUDE}{decls}\n{PROGRAM}");
    parse(&common::compile_source(name, &src)).map(|o| o.maps)
}

/// A one-map object: `struct { body } m SEC(".maps");`.
fn single(name: &str, body: &str) -> Result<Vec<MapSpec>, ObjError> {
    build(name, &format!("struct {{ {body} }} m SEC(\".maps\");"))
}

fn map_error(r: Result<Vec<MapSpec>, ObjError>) -> (String, MapErrorKind) {
    match r {
        Err(ObjError::Map { map, kind }) => (map, kind),
        other => panic!("expected a map error, got {other:?}"),
    }
}

const KV: &str = "__type(key, __u32); __type(value, __u32);";

#[test]
fn attribute_errors() {
    let cases: Vec<(&str, String, MapErrorKind)> = vec![
        ("unknown_type", format!("__uint(type, 99); __uint(max_entries, 1); {KV}"), MapErrorKind::UnknownType(99)),
        ("no_type", format!("__uint(max_entries, 1); {KV}"), MapErrorKind::MissingType),
        ("no_entries", format!("__uint(type, BPF_MAP_TYPE_HASH); {KV}"), MapErrorKind::ZeroMaxEntries),
        (
            "big_key",
            "__uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 1); __type(key, char[1024]); __type(value, int);"
                .into(),
            MapErrorKind::KeyTooLarge(1024),
        ),
        (
            "big_value",
            "__uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1); __type(key, int); __uint(value_size, 2 << 20);"
                .into(),
            MapErrorKind::ValueTooLarge(2 << 20),
        ),
        (
            "no_key",
            "__uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 1); __type(value, int);".into(),
            MapErrorKind::ZeroKeySize,
        ),
        (
            "conflict",
            format!("__uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 1); __uint(key_size, 8); {KV}"),
            MapErrorKind::ConflictingSize { field: "key_size", field_type: "key", declared: 8, computed: 4 },
        ),
        (
            "unknown_field",
            format!("__uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 1); {KV} __uint(colour, 3);"),
            MapErrorKind::UnknownField("colour".into()),
        ),
        (
            "pinning",
            format!("__uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 1); {KV} __uint(pinning, 2);"),
            MapErrorKind::BadPinning(2),
        ),
        (
            "values_on_hash",
            "__uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 1); __type(key, int); __array(values, int (void *));"
                .into(),
            MapErrorKind::ValuesNotAllowed,
        ),
    ];
    for (name, body, want) in cases {
        assert_eq!(map_error(single(name, &body)), ("m".to_string(), want), "{name}");
    }
}

#[test]
fn optional_attributes_are_read() {
    let maps = single(
        "optional",
        &format!(
            "__uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 7); {KV} __uint(numa_node, 1); \
             __uint(map_extra, 5); __uint(map_flags, BPF_F_NO_PREALLOC | BPF_F_ZERO_SEED); \
             __uint(pinning, LIBBPF_PIN_BY_NAME);"
        ),
    )
    .unwrap();
    let m = &maps[0];
    assert_eq!((m.numa_node, m.map_extra, m.flags, m.pinning, m.max_entries), (1, 5, 1 | 64, 1, 7));
    // Key and value sizes may come from *_size alone, or agree with the types.
    let maps = single(
        "sizes",
        "__uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 1); __uint(key_size, 4); __type(key, int); \
         __uint(value_size, 12);",
    )
    .unwrap();
    assert_eq!((maps[0].key_size, maps[0].value_size), (4, 12));
}

#[test]
fn ring_buffer_size_is_rounded_like_libbpf() {
    let maps = single("ringbuf", "__uint(type, BPF_MAP_TYPE_RINGBUF); __uint(max_entries, 5000);")
        .unwrap();
    assert_eq!((maps[0].map_type, maps[0].max_entries), (map_type::RINGBUF, 8192));
}

#[test]
fn a_perf_event_array_without_sizes_gets_the_only_ones_the_kernel_takes() {
    // As cilium/ebpf and goebpf create it: key (a CPU index) and value (a perf event fd)
    // of 4 bytes; max_entries 0 stays for the loader to size to the CPUs.
    let maps = single("perf_nosize", "__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);").unwrap();
    let m = &maps[0];
    assert_eq!((m.map_type, m.key_size, m.value_size, m.max_entries), (4, 4, 4, 0));
    // Sizes the object gives are kept.
    let maps = single(
        "perf_sized",
        "__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY); __uint(key_size, 4); __uint(value_size, 8);",
    )
    .unwrap();
    assert_eq!((maps[0].key_size, maps[0].value_size), (4, 8));
    // Only a perf event array: a hash map with no key is still refused.
    let no_key = single(
        "hash_nokey",
        "__uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 1); __uint(value_size, 4);",
    );
    assert_eq!(map_error(no_key).1, MapErrorKind::ZeroKeySize);
}

#[test]
fn static_maps_are_refused_like_libbpf() {
    let src = format!(
        "{PRELUDE}static struct {{ __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 2); {KV} }} \
         a SEC(\".maps\");\n\
         static struct {{ __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 3); {KV} }} b SEC(\".maps\");\n\
         SEC(\"xdp\") int p(struct xdp_md *ctx) {{ __u32 k = 0; \
         return bpf_map_lookup_elem(&b, &k) ? 1 : bpf_map_lookup_elem(&a, &k) ? 2 : 3; }}\n"
    );
    let (map, kind) =
        map_error(parse(&common::compile_source("static_maps", &src)).map(|o| o.maps));
    assert!(map == "a" || map == "b");
    assert!(matches!(kind, MapErrorKind::BadField { field, .. } if field == "linkage"));
}

const INNER: &str = "struct inner { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1); \
                     __type(key, __u32); __type(value, __u32); };\nstruct inner i1 SEC(\".maps\");\n";

#[test]
fn map_in_map_errors() {
    let outer = |name: &str, kind: &str, extra: &str, init: &str| {
        build(
            name,
            &format!(
                "{INNER}struct {{ __uint(type, {kind}); __uint(max_entries, 2); {extra} \
                 __array(values, struct inner); }} outer SEC(\".maps\") {init};"
            ),
        )
    };
    let ok = outer(
        "mim_ok",
        "BPF_MAP_TYPE_HASH_OF_MAPS",
        "__type(key, __u32);",
        "= { .values = { [1] = &i1 } }",
    );
    assert_eq!(ok.unwrap()[1].init_slots, vec![(1, SlotTarget::Map(0))]);
    let r = outer(
        "mim_slot",
        "BPF_MAP_TYPE_ARRAY_OF_MAPS",
        "__type(key, __u32);",
        "= { .values = { [3] = &i1 } }",
    );
    assert_eq!(
        map_error(r),
        ("outer".into(), MapErrorKind::SlotOutOfRange { slot: 3, max_entries: 2 })
    );
    let r = outer(
        "mim_key",
        "BPF_MAP_TYPE_HASH_OF_MAPS",
        "__type(key, __u64);",
        "= { .values = { [0] = &i1 } }",
    );
    assert!(
        matches!(map_error(r), (m, MapErrorKind::BadField { field, .. }) if m == "outer" && field == "key")
    );
    let r = outer(
        "mim_vsize",
        "BPF_MAP_TYPE_ARRAY_OF_MAPS",
        "__type(key, __u32); __uint(value_size, 8);",
        "",
    );
    assert_eq!(
        map_error(r),
        (
            "outer".into(),
            MapErrorKind::ConflictingSize {
                field: "value_size",
                field_type: "values",
                declared: 8,
                computed: 4
            }
        )
    );
    // An inner definition is reported under the inner map's name, and may not be pinned.
    let r = build(
        "mim_pinned",
        "struct pinned { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1); __type(key, __u32); \
         __type(value, __u32); __uint(pinning, LIBBPF_PIN_BY_NAME); };\n\
         struct { __uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS); __uint(max_entries, 1); __type(key, __u32); \
         __array(values, struct pinned); } outer SEC(\".maps\");",
    );
    assert!(
        matches!(map_error(r), (m, MapErrorKind::BadField { field, .. }) if m == "outer.inner" && field == "pinning")
    );
    let r = build(
        "mim_inner_type",
        "struct bad { __uint(type, 99); __uint(max_entries, 1); __type(key, __u32); __type(value, __u32); };\n\
         struct { __uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS); __uint(max_entries, 1); __type(key, __u32); \
         __array(values, struct bad); } outer SEC(\".maps\");",
    );
    assert_eq!(map_error(r), ("outer.inner".into(), MapErrorKind::UnknownType(99)));
}

#[test]
fn program_array_slots_must_be_entry_points() {
    let src = format!(
        "{PRELUDE}static __attribute__((noinline)) int sub(struct xdp_md *ctx) {{ return ctx->rx_queue_index; }}\n\
         SEC(\"xdp\") int entry(struct xdp_md *ctx) {{ return sub(ctx) & 1; }}\n\
         struct {{ __uint(type, BPF_MAP_TYPE_PROG_ARRAY); __uint(max_entries, 2); __type(key, __u32); \
         __array(values, int (struct xdp_md *)); }} jt SEC(\".maps\") = {{ .values = {{ [0] = &sub }} }};\n"
    );
    let r = parse(&common::compile_source("prog_array_sub", &src));
    assert!(
        matches!(
            &r,
            Err(ObjError::Map { map, kind: MapErrorKind::BadSlot { reason: "target is not an entry-point program", .. } })
                if map == "jt"
        ),
        "{r:?}"
    );
}

/// BTF-defined maps name their key and value types for `BPF_MAP_CREATE`, and the
/// object's BTF comes with its data sections sized and its variables placed (clang
/// leaves both 0, which the kernel refuses; the kernel test of this is
/// `spine-difftest/tests/spin_lock.rs`, whose maps the kernel creates with it).
#[test]
fn key_and_value_types_and_a_loadable_btf() {
    let src = format!(
        "{PRELUDE}struct v {{ __u64 n; struct bpf_spin_lock l; }};\n\
         struct {{ __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 4); __type(key, __u32); __type(value, struct v); }} a SEC(\".maps\");\n\
         struct {{ __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 4); __type(key, __u32); __type(value, __u64); }} b SEC(\".maps\");\n\
         int g = 3;\n{PROGRAM}"
    );
    let bytes = common::compile_source("btf_types", &src);
    let obj = parse(&bytes).unwrap();
    let (a, b) = (&obj.maps[0], &obj.maps[1]);
    assert_eq!((a.name.as_str(), b.name.as_str()), ("a", "b"));
    assert_eq!(a.spin_lock, Some(8));
    assert_ne!(a.btf_key_type_id, 0);
    assert_eq!(a.btf_key_type_id, b.btf_key_type_id, "both keys are __u32");
    assert_ne!(a.btf_value_type_id, 0);
    assert_ne!(a.btf_value_type_id, b.btf_value_type_id);
    let data = obj.maps.iter().find(|m| m.name == ".data").expect(".data");
    assert_eq!((data.btf_key_type_id, data.btf_value_type_id), (0, 0), "not BTF-defined");

    let fixed = obj.btf.as_deref().expect("the object has BTF");
    let raw = {
        use object::{Object as _, ObjectSection as _};
        let f = object::File::parse(&*bytes).unwrap();
        f.section_by_name(".BTF").unwrap().data().unwrap().to_vec()
    };
    assert_eq!(fixed.len(), raw.len(), "fixed in place");
    assert_ne!(fixed, &raw[..], "data sections were sized");
}
