//! The machine a figure was taken on: CPU model, the instruction-set flags that change
//! generated code or copy speed, cache sizes and kernel, so that figures from two
//! machines can be told apart in a report.

/// CPU flags (from `/proc/cpuinfo`) that matter to the packet path: vector width for
/// copies and checksums, the bit-manipulation the JIT may use, and `hypervisor` (a VM's
/// timings move more).
const RELEVANT_FLAGS: &[&str] = &[
    "sse4_2",
    "avx",
    "avx2",
    "avx512f",
    "avx512bw",
    "bmi1",
    "bmi2",
    "popcnt",
    "lzcnt",
    "movbe",
    "erms",
    "fsrm",
    "clflushopt",
    "constant_tsc",
    "hypervisor",
];

/// The machine as JSON: `cpu`, `cpus`, `flags` (the relevant ones present), `l1d`, `l2`,
/// `l3` (as the kernel writes them, e.g. "1024K"; "" when unknown) and `kernel`.
pub fn machine() -> serde_json::Value {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    describe(
        &cpuinfo,
        &caches(),
        // The machine's CPUs, not this thread's affinity (benches pin before asking).
        cpuinfo
            .lines()
            .filter(|l| l.split(':').next().is_some_and(|k| k.trim() == "processor"))
            .count(),
        std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim(),
    )
}

/// One line for a text report: `model, N cpus, L2 …, L3 …, flags …, kernel …`.
pub fn line(m: &serde_json::Value) -> String {
    let flags: Vec<&str> = m["flags"]
        .as_array()
        .map(|a| a.iter().filter_map(|f| f.as_str()).collect())
        .unwrap_or_default();
    format!(
        "{}, {} cpus, L1d {}, L2 {}, L3 {}, flags [{}], kernel {}",
        m["cpu"].as_str().unwrap_or("unknown"),
        m["cpus"],
        m["l1d"].as_str().filter(|s| !s.is_empty()).unwrap_or("?"),
        m["l2"].as_str().filter(|s| !s.is_empty()).unwrap_or("?"),
        m["l3"].as_str().filter(|s| !s.is_empty()).unwrap_or("?"),
        flags.join(" "),
        m["kernel"].as_str().unwrap_or("?"),
    )
}

/// Cache sizes of CPU 0 as `(level, type, size)` from sysfs.
fn caches() -> Vec<(String, String, String)> {
    let dir = std::path::Path::new("/sys/devices/system/cpu/cpu0/cache");
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let read = |p: &std::path::Path, f: &str| {
        std::fs::read_to_string(p.join(f)).map(|s| s.trim().to_string()).unwrap_or_default()
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("index"))
        .map(|e| {
            let p = e.path();
            (read(&p, "level"), read(&p, "type"), read(&p, "size"))
        })
        .collect()
}

/// The JSON from the raw sources (separate from the reads, so it can be tested).
fn describe(
    cpuinfo: &str,
    caches: &[(String, String, String)],
    cpus: usize,
    kernel: &str,
) -> serde_json::Value {
    let field = |name: &str| {
        cpuinfo
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == name).then(|| v.trim())
            })
            .unwrap_or("")
    };
    let model = match field("model name") {
        "" => "unknown",
        m => m,
    };
    let present: Vec<&str> = field("flags").split_whitespace().collect();
    let flags: Vec<&str> = RELEVANT_FLAGS.iter().copied().filter(|f| present.contains(f)).collect();
    let cache = |level: &str, data: bool| {
        caches
            .iter()
            .find(|(l, t, _)| l == level && (if data { t == "Data" } else { t == "Unified" }))
            .map_or("", |(_, _, s)| s.as_str())
    };
    serde_json::json!({
        "cpu": model,
        "cpus": cpus,
        "flags": flags,
        "l1d": cache("1", true),
        "l2": cache("2", false),
        "l3": cache("3", false),
        "kernel": kernel,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(l: &str, t: &str, s: &str) -> (String, String, String) {
        (l.into(), t.into(), s.into())
    }

    #[test]
    fn picks_model_relevant_flags_and_caches() {
        let cpuinfo = "processor\t: 0\nmodel name\t: Example CPU @ 2.0GHz\n\
                       flags\t\t: fpu sse4_2 avx2 bmi2 hypervisor xsave\n";
        let caches = [
            c("1", "Instruction", "32K"),
            c("1", "Data", "48K"),
            c("2", "Unified", "1024K"),
            c("3", "Unified", "32768K"),
        ];
        let m = describe(cpuinfo, &caches, 2, "6.18.0");
        assert_eq!(m["cpu"], "Example CPU @ 2.0GHz");
        assert_eq!(m["flags"], serde_json::json!(["sse4_2", "avx2", "bmi2", "hypervisor"]));
        assert_eq!(
            (m["l1d"].as_str(), m["l2"].as_str(), m["l3"].as_str()),
            (Some("48K"), Some("1024K"), Some("32768K"))
        );
        let l = line(&m);
        assert!(l.starts_with("Example CPU @ 2.0GHz, 2 cpus, L1d 48K, L2 1024K, L3 32768K"), "{l}");
        assert!(l.contains("flags [sse4_2 avx2 bmi2 hypervisor]"), "{l}");
    }

    #[test]
    fn unknown_sources_give_unknowns_not_panics() {
        let m = describe("", &[], 0, "");
        assert_eq!(m["cpu"], "unknown");
        assert_eq!(m["flags"], serde_json::json!([]));
        assert!(line(&m).contains("L2 ?, L3 ?"));
    }
}
