// The clang flags of every BPF object, shared by the build script (which compiles the
// bundled programs) and the library (`cflags()`, for tests that compile their own C), so
// that both build exactly alike. Both `include!` this file; it must stay free of `use`
// items and inner attributes.

/// The flags for a BPF object with `include` (spine's header directory) on the include
/// path. `/usr/include/x86_64-linux-gnu` is where Debian keeps `asm/types.h`, which
/// `<linux/bpf.h>` needs.
fn bpf_cflags(include: &std::path::Path) -> Vec<String> {
    vec![
        "-O2".into(),
        "-g".into(),
        "-target".into(),
        "bpf".into(),
        "-mcpu=v3".into(),
        "-Wall".into(),
        "-Werror".into(),
        "-I/usr/include/x86_64-linux-gnu".into(),
        format!("-I{}", include.display()),
    ]
}
