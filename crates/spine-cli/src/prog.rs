//! `spine prog dump|run|test`: bpftool's `prog` verbs for spine.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Subcommand;
use serde_json::json;
use spine_obj::{Object, ParseOptions, ProgType, Program};
use spine_runtime::{
    load_object, load_selected, select_program, Budget, EngineKind, Frame, Geometry, LoadOptions,
    LoadedObject, RxInfo, XdpRunner, MAX_FRAGS,
};

use crate::host::CliHost;
use crate::mapargs::{self, MapArg};
use crate::output::{hex, hexdump, verdict_name};

/// Which engine runs the program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EngineArg {
    /// Native code from the JIT (accesses the verifier proved run unchecked).
    Jit,
    /// The reference interpreter (every access checked).
    Interp,
}

impl From<EngineArg> for EngineKind {
    fn from(e: EngineArg) -> Self {
        match e {
            EngineArg::Jit => EngineKind::Jit,
            EngineArg::Interp => EngineKind::Interpreter,
        }
    }
}

/// A program type the user gives a section, as `bpftool prog load ... type xdp` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TypeArg {
    Xdp,
    /// XDP with multi-buffer frames (libbpf's `xdp.frags`).
    XdpFrags,
}

impl From<TypeArg> for ProgType {
    fn from(t: TypeArg) -> Self {
        match t {
            TypeArg::Xdp => ProgType::Xdp,
            TypeArg::XdpFrags => ProgType::XdpFrags,
        }
    }
}

/// What every verb that loads a program takes.
#[derive(Debug, clap::Args)]
pub struct LoadArgs {
    pub file: PathBuf,
    /// Program section (or function name); the first program by default.
    #[arg(long)]
    pub section: Option<String>,
    /// Load `--section` as this type whatever its name (`xdp_sock`, `xdp_vlan01`).
    #[arg(long = "type", value_enum, requires = "section")]
    pub prog_type: Option<TypeArg>,
    #[arg(long, value_enum, default_value = "jit")]
    pub engine: EngineArg,
    /// Watchdog budget per invocation in microseconds (default: the domain's, 10 µs).
    #[arg(long)]
    pub budget_us: Option<u64>,
    /// Write an entry into the object's map NAME before running, as `bpftool map update`
    /// does (repeatable). KEY and VALUE: a decimal integer (little-endian in the key's or
    /// value's size) or hex bytes in memory order (`0x0a000001`, `0a:00:00:01`).
    #[arg(long = "map", value_name = "NAME:KEY=VALUE")]
    pub maps: Vec<String>,
    /// Map entries from a file: one NAME:KEY=VALUE per line, `#` comments.
    #[arg(long = "maps", value_name = "FILE")]
    pub maps_file: Option<PathBuf>,
    /// Resolve CO-RE relocations against this BTF file (default: the running kernel's,
    /// /sys/kernel/btf/vmlinux).
    #[arg(long, value_name = "FILE")]
    pub btf: Option<PathBuf>,
    /// Size map NAME to N entries before loading, as the object's own loader would
    /// (`bpf_map__set_max_entries`; repeatable).
    #[arg(long = "max-entries", value_name = "NAME=N", value_parser = parse_size)]
    pub max_entries: Vec<(String, u32)>,
}

/// `NAME=N` with N at least 1.
fn parse_size(s: &str) -> Result<(String, u32), String> {
    let (name, n) = s.split_once('=').ok_or("expected NAME=N")?;
    let n: u32 = n.parse().map_err(|e| format!("'{n}': {e}"))?;
    if name.is_empty() || n == 0 {
        return Err("expected NAME=N with a map name and N at least 1".into());
    }
    Ok((name.to_string(), n))
}

#[derive(Subcommand)]
pub enum ProgCmd {
    /// Sections, maps and disassembly of an object.
    Dump {
        file: PathBuf,
        #[arg(long)]
        json: bool,
        /// Also verify and compile every XDP program and write its x86-64 code to
        /// DIR/<program>.bin (disassemble with `objdump -D -b binary -m i386:x86-64`).
        #[arg(long)]
        jit_out: Option<PathBuf>,
    },
    /// Verify a program without running it; exits non-zero if it is refused.
    Verify {
        file: PathBuf,
        #[arg(long)]
        section: Option<String>,
        /// Load `--section` as this type whatever its name.
        #[arg(long = "type", value_enum, requires = "section")]
        prog_type: Option<TypeArg>,
        /// Resolve CO-RE relocations against this BTF file (default: the kernel's).
        #[arg(long, value_name = "FILE")]
        btf: Option<PathBuf>,
        /// Size map NAME to N entries before loading, as the object's own loader would.
        #[arg(long = "max-entries", value_name = "NAME=N", value_parser = parse_size)]
        max_entries: Vec<(String, u32)>,
        /// 0: the verdict; 1: the error and the state at it; 2: every instruction.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(0..=2))]
        log_level: u8,
        #[arg(long)]
        json: bool,
    },
    /// Run a program on one packet: return value and average ns per run. A packet longer
    /// than 3,520 bytes runs as a multi-buffer frame, as in the kernel's test run (a
    /// 3,520-byte head, then up to 17 fragments of 4,096 bytes).
    Run {
        #[command(flatten)]
        load: LoadArgs,
        /// The packet (raw bytes, starting with the Ethernet header).
        #[arg(long)]
        data_in: PathBuf,
        /// Where to write the packet as the program left it (metadata included).
        #[arg(long)]
        data_out: Option<PathBuf>,
        /// Runs on the same buffer (changes pile up, as with bpftool).
        #[arg(long, default_value_t = 1)]
        repeat: u32,
        /// Also run the object in the kernel (BPF_PROG_TEST_RUN; needs root) and compare.
        #[arg(long)]
        kernel: bool,
        #[arg(long)]
        json: bool,
    },
    /// Replay a capture through a program: verdict counts, packets that leave written out
    /// (packets longer than 3,520 bytes run as multi-buffer frames, as with `run`).
    Test {
        #[command(flatten)]
        load: LoadArgs,
        #[arg(long)]
        pcap_in: PathBuf,
        /// Every packet that leaves (XDP_PASS, XDP_TX, XDP_REDIRECT), as pcap.
        #[arg(long, conflicts_with = "kernel")]
        pcap_out: Option<PathBuf>,
        /// Run every packet through the kernel too (BPF_PROG_TEST_RUN, one run each; needs
        /// root) and compare: the verdict and the bytes out after each packet, every map
        /// of up to 2^20 entries after the last. Exits 1 on a difference. The watchdog is
        /// off on spine's side, as the kernel has none.
        #[arg(long)]
        kernel: bool,
        #[arg(long)]
        json: bool,
    },
}

pub fn main(cmd: ProgCmd) -> Result<ExitCode> {
    match cmd {
        ProgCmd::Dump { file, json, jit_out } => {
            if let Some(dir) = jit_out {
                write_native(&file, &dir)?;
            }
            dump(&file, json)
        }
        ProgCmd::Verify { file, section, prog_type, btf, max_entries, log_level, json } => {
            let obj =
                read_object(&file, section.as_deref(), prog_type, btf.as_deref(), &max_entries)?;
            crate::verify::main(&obj, &file, section.as_deref(), log_level, json)
        }
        ProgCmd::Run { load, data_in, data_out, repeat, kernel, json } => {
            run(&load, &data_in, data_out.as_deref(), repeat.max(1), kernel, json)
        }
        ProgCmd::Test { load, pcap_in, kernel: true, json, .. } => {
            test_against_kernel(&load, &pcap_in, json)
        }
        ProgCmd::Test { load, pcap_in, pcap_out, json, .. } => {
            test(&load, &pcap_in, pcap_out.as_deref(), json)
        }
    }
}

fn write_native(file: &Path, dir: &Path) -> Result<()> {
    let obj = read_object(file, None, None, None, &[])?;
    let loaded = load_object(&obj, &LoadOptions::default())?;
    std::fs::create_dir_all(dir)?;
    for p in &loaded.programs {
        let code = p.native_code().context("not compiled")?;
        let path = dir.join(format!("{}.bin", p.name()));
        std::fs::write(&path, code).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("{}: {} bytes of x86-64 code in {}", p.name(), code.len(), path.display());
    }
    Ok(())
}

/// Parses `file`, with `section` read as `prog_type` when one is given, and CO-RE
/// relocations resolved against `btf` (a BTF file) or the running kernel's BTF.
pub fn read_object(
    file: &Path,
    section: Option<&str>,
    prog_type: Option<TypeArg>,
    btf: Option<&Path>,
    max_entries: &[(String, u32)],
) -> Result<Object> {
    let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let section_types = match (section, prog_type) {
        (Some(s), Some(t)) => vec![(s.to_string(), t.into())],
        _ => Vec::new(),
    };
    let target_btf = match btf {
        Some(p) => Some(std::sync::Arc::from(
            std::fs::read(p).with_context(|| format!("reading BTF {}", p.display()))?,
        )),
        None => spine_sys::kernel_btf(),
    };
    let max_entries = max_entries.to_vec();
    spine_obj::parse_with(&bytes, &ParseOptions { section_types, target_btf, max_entries })
        .with_context(|| format!("loading {}", file.display()))
}

/// The program the user asked for (the first XDP program by default), refusing by name
/// one of another type or one that was skipped.
pub fn chosen<'o>(obj: &'o Object, file: &Path, section: Option<&str>) -> Result<&'o Program> {
    select_program(obj, section).with_context(|| format!("{}", file.display()))
}

fn dump(file: &Path, json: bool) -> Result<ExitCode> {
    let obj = read_object(file, None, None, None, &[])?;
    if json {
        let progs: Vec<_> = obj
            .programs
            .iter()
            .map(|p| {
                json!({
                    "name": p.name, "section": p.section, "type": format!("{:?}", p.prog_type),
                    "insns": p.insns.len(),
                    "functions": p.functions.iter().map(|(pc, n)| json!({"pc": pc, "name": n})).collect::<Vec<_>>(),
                    "disasm": (0..p.insns.len()).filter(|&pc| pc == 0 || !p.insns[pc - 1].is_lddw())
                        .map(|pc| json!({"pc": pc, "insn": spine_isa::disassemble_one(&p.insns, pc)}))
                        .collect::<Vec<_>>(),
                })
            })
            .collect();
        let maps: Vec<_> = obj.maps.iter().map(map_json).collect();
        println!("{}", json!({"license": obj.license, "programs": progs, "maps": maps}));
        return Ok(ExitCode::SUCCESS);
    }
    println!("license: {}", if obj.license.is_empty() { "(none)" } else { &obj.license });
    println!("maps: {}", obj.maps.len());
    for (i, m) in obj.maps.iter().enumerate() {
        println!(
            "  [{i}] {:<20} {:<14} key {:>3}  value {:>5}  max_entries {:>8}  flags {:#x}{}",
            m.name,
            spine_abi::map_type::name(m.map_type),
            m.key_size,
            m.value_size,
            m.max_entries,
            m.flags,
            match &m.origin {
                spine_obj::MapOrigin::GlobalData { read_only: true, .. } => "  (read-only data)",
                spine_obj::MapOrigin::GlobalData { .. } => "  (global data)",
                _ => "",
            }
        );
    }
    for p in &obj.programs {
        println!(
            "\nprogram {} (section {}, {:?}, {} insns)",
            p.name,
            p.section,
            p.prog_type,
            p.insns.len()
        );
        let mut pc = 0;
        while pc < p.insns.len() {
            if let Some((_, name)) = p.functions.iter().find(|(f, _)| *f == pc) {
                println!("{name}:");
            }
            println!("  {pc:5}: {}", spine_isa::disassemble_one(&p.insns, pc));
            pc += if p.insns[pc].is_lddw() { 2 } else { 1 };
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn map_json(m: &spine_obj::MapSpec) -> serde_json::Value {
    json!({
        "name": m.name, "type": spine_abi::map_type::name(m.map_type), "type_id": m.map_type,
        "key_size": m.key_size, "value_size": m.value_size, "max_entries": m.max_entries,
        "flags": m.flags, "origin": format!("{:?}", m.origin),
    })
}

/// An object loaded into spine, with a runner for worker 0 on the chosen program.
pub struct Loaded {
    pub obj: Object,
    /// What `--map`/`--maps` wrote, for a kernel run to write the same.
    pub entries: Vec<MapArg>,
    /// The chosen program first, then its tail-call targets, kept loaded.
    pub loaded: LoadedObject,
    pub runner: XdpRunner,
}

pub fn load(args: &LoadArgs) -> Result<Loaded> {
    let obj = read_object(
        &args.file,
        args.section.as_deref(),
        args.prog_type,
        args.btf.as_deref(),
        &args.max_entries,
    )?;
    let opts = LoadOptions { engine: args.engine.into(), ..LoadOptions::default() };
    let (loaded, ext) = load_selected(&obj, args.section.as_deref(), &opts)
        .with_context(|| format!("loading {} into spine", args.file.display()))?;
    let entries = mapargs::collect(&args.maps, args.maps_file.as_deref())?;
    for a in &entries {
        let Some(m) = ext.map(&a.map) else {
            let names: Vec<&str> = obj.maps.iter().map(|m| m.name.as_str()).collect();
            bail!("{}: the program has no map '{}' (it has: {})", a.at, a.map, names.join(", "));
        };
        let (key, value) =
            mapargs::sized(a, m.def().key_size as usize, m.def().value_size as usize)?;
        m.update_user(&key, &m.user_value_for_all_cpus(&value), 0)
            .with_context(|| format!("{}: map '{}'", a.at, a.map))?;
    }
    let mut runner = XdpRunner::new(ext, 0)?;
    if let Some(us) = args.budget_us {
        runner = runner.with_budget(Budget { ns: us.saturating_mul(1000), ..Budget::default() });
    }
    Ok(Loaded { obj, entries, loaded, runner })
}

fn run(
    args: &LoadArgs,
    data_in: &Path,
    data_out: Option<&Path>,
    repeat: u32,
    kernel: bool,
    json: bool,
) -> Result<ExitCode> {
    let Loaded { obj, entries, loaded, mut runner } = load(args)?;
    let section = loaded.programs.first().map(|p| p.name().to_string());
    let section = section.as_deref();
    let packet =
        std::fs::read(data_in).with_context(|| format!("reading {}", data_in.display()))?;
    let mut frame = Frame::with_frags(Geometry::TEST_RUN, MAX_FRAGS);
    frame.load(&packet).with_context(|| format!("packet {}", data_in.display()))?;
    let mut host = CliHost::new();
    host.echo = repeat == 1;
    let start = Instant::now();
    let mut result = Ok(0);
    for _ in 0..repeat {
        result = runner.run(&mut frame, RxInfo::default(), &mut host);
        if result.is_err() {
            break;
        }
    }
    let ns = start.elapsed().as_nanos() as f64 / f64::from(repeat);
    let (retval, fault) = match &result {
        Ok(v) => (*v, None),
        Err(f) => (spine_abi::xdp_action::ABORTED, Some(f.to_string())),
    };
    let mut out = Vec::new();
    frame.copy_out(&mut out);
    if let Some(path) = data_out {
        std::fs::write(path, &out).with_context(|| format!("writing {}", path.display()))?;
    }
    let kernel_run =
        if kernel { Some(run_in_kernel(&obj, section, &entries, &packet, repeat)?) } else { None };
    if json {
        let mut v =
            json!({"retval": retval, "duration_ns": ns.round() as u64, "data_out": hex(&out)});
        if let Some(f) = &fault {
            v["fault"] = json!(f);
        }
        if let Some(k) = &kernel_run {
            v["kernel"] = json!({"retval": k.retval, "duration_ns": k.duration_ns, "data_out": hex(&k.data_out)});
            v["ratio_spine_to_kernel"] = json!(ns / f64::from(k.duration_ns.max(1)));
        }
        println!("{v}");
    } else {
        println!(
            "spine:  retval {} ({}), {:.1} ns/run over {} runs",
            retval,
            verdict_name(retval),
            ns,
            repeat
        );
        if let Some(f) = &fault {
            println!("        fault: {f}");
        }
        if data_out.is_none() && !out.is_empty() {
            print!("{}", hexdump(&out));
        }
        if let Some(k) = &kernel_run {
            println!(
                "kernel: retval {} ({}), {} ns/run over {} runs",
                k.retval,
                verdict_name(k.retval),
                k.duration_ns,
                repeat
            );
            println!(
                "spine/kernel time: {:.2}   output {}",
                ns / f64::from(k.duration_ns.max(1)),
                if k.data_out == out && k.retval == retval { "identical" } else { "DIFFERS" }
            );
        }
    }
    Ok(if fault.is_some() { ExitCode::from(2) } else { ExitCode::SUCCESS })
}

struct KernelRun {
    retval: u32,
    duration_ns: u32,
    data_out: Vec<u8>,
}

fn run_in_kernel(
    obj: &Object,
    section: Option<&str>,
    entries: &[MapArg],
    packet: &[u8],
    repeat: u32,
) -> Result<KernelRun> {
    spine_sys::probe().context("--kernel needs bpf(2) (run as root)")?;
    let found = obj.programs.iter().find(|p| Some(p.name.as_str()) == section);
    let Some(prog) = found.or_else(|| obj.program(section)) else { bail!("no such program") };
    let k = spine_sys::load_object_program(obj, prog).context("loading into the kernel")?;
    for a in entries {
        let i = obj.maps.iter().position(|m| m.name == a.map).expect("spine found it");
        let m = &k.maps[i];
        let (key, value) = mapargs::sized(a, m.key_size() as usize, m.value_size() as usize)?;
        m.update(&key, &m.value_for_all_cpus(&value), 0)
            .with_context(|| format!("{}: map '{}' in the kernel", a.at, a.map))?;
    }
    let out = k
        .prog
        .test_run(&spine_sys::TestRun { repeat, ..spine_sys::TestRun::new(packet) })
        .context("BPF_PROG_TEST_RUN")?;
    Ok(KernelRun { retval: out.retval, duration_ns: out.duration_ns, data_out: out.data_out })
}

fn test(args: &LoadArgs, pcap_in: &Path, pcap_out: Option<&Path>, json: bool) -> Result<ExitCode> {
    let Loaded { loaded: _loaded, mut runner, .. } = load(args)?;
    let bytes = std::fs::read(pcap_in).with_context(|| format!("reading {}", pcap_in.display()))?;
    let capture = spine_ports::read_capture(&bytes)
        .with_context(|| format!("reading {}", pcap_in.display()))?;
    let mut writer = match pcap_out {
        Some(p) => {
            let f =
                std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?;
            Some(spine_ports::PcapWriter::new(std::io::BufWriter::new(f), capture.linktype, 0)?)
        }
        None => None,
    };
    let mut host = CliHost::new();
    let mut counts = Counts::default();
    let mut frame = Frame::with_frags(Geometry::TEST_RUN, MAX_FRAGS);
    let mut busy = std::time::Duration::ZERO;
    let mut leaving = Vec::new();
    for pkt in &capture.packets {
        if frame.load(&pkt.data).is_err() {
            counts.unfit += 1;
            continue;
        }
        let t = Instant::now();
        let r = runner.run(&mut frame, RxInfo::default(), &mut host);
        busy += t.elapsed();
        let v = counts.add(&r);
        if matches!(
            v,
            spine_abi::xdp_action::PASS
                | spine_abi::xdp_action::TX
                | spine_abi::xdp_action::REDIRECT
        ) {
            if let Some(w) = writer.as_mut() {
                frame.copy_packet(&mut leaving);
                w.write(pkt.ts_ns, &leaving)?;
                counts.written += 1;
            }
        }
    }
    if let Some(w) = writer {
        w.finish()?;
    }
    let run = counts.runs();
    let ns = if run > 0 { busy.as_nanos() as f64 / run as f64 } else { 0.0 };
    counts.print(capture.packets.len(), ns, json);
    Ok(ExitCode::SUCCESS)
}

/// `prog test --kernel`: the capture through spine and the kernel side by side
/// (`spine_difftest::Pair`), compared after every packet.
fn test_against_kernel(args: &LoadArgs, pcap_in: &Path, json: bool) -> Result<ExitCode> {
    spine_sys::probe().context("--kernel needs bpf(2) (run as root)")?;
    // Per-CPU maps are compared slot by slot: the kernel runs the test on the calling
    // CPU, and spine runs as CPU 0.
    spine_sys::pin_current_thread(0).context("pinning to CPU 0")?;
    let obj = read_object(
        &args.file,
        args.section.as_deref(),
        args.prog_type,
        args.btf.as_deref(),
        &args.max_entries,
    )?;
    // Maps are compared once at the end, those of at most a million entries.
    let check = spine_difftest::MapCheck::AtEnd { max_entries: 1 << 20 };
    let mut pair =
        spine_difftest::Pair::load_parsed(&obj, args.section.as_deref(), 0, args.engine.into())
            .with_context(|| format!("loading {}", args.file.display()))?
            .with_map_check(check);
    for a in mapargs::collect(&args.maps, args.maps_file.as_deref())? {
        let Some(m) = pair.spine_map(&a.map) else {
            bail!("{}: the program has no map '{}' both sides can write", a.at, a.map);
        };
        let (key, value) =
            mapargs::sized(&a, m.def().key_size as usize, m.def().value_size as usize)?;
        pair.update(&a.map, &key, &value).with_context(|| format!("{}: map '{}'", a.at, a.map))?;
    }
    let bytes = std::fs::read(pcap_in).with_context(|| format!("reading {}", pcap_in.display()))?;
    let capture = spine_ports::read_capture(&bytes)
        .with_context(|| format!("reading {}", pcap_in.display()))?;
    let packets: Vec<Vec<u8>> = capture.packets.into_iter().map(|p| p.data).collect();
    const SHOWN: usize = 20;
    let report = pair.run(&packets, SHOWN)?;
    if json {
        let verdicts: serde_json::Map<String, serde_json::Value> = VERDICT_NAMES
            .iter()
            .zip(report.verdicts)
            .map(|(n, c)| (n.to_string(), json!(c)))
            .collect();
        let mismatches: Vec<String> = report.mismatches.iter().map(|m| m.to_string()).collect();
        println!(
            "{}",
            json!({"packets": report.packets, "verdicts": verdicts,
                   "multi_buffer": report.multi_buffer, "refused_by_both": report.refused,
                   "map_checks": report.map_checks, "maps_not_compared": report.skipped_maps,
                   "mismatches": mismatches})
        );
    } else {
        println!("spine and the kernel: {report}");
        if !report.skipped_maps.is_empty() {
            println!("  maps not compared (over 2^20 entries): {}", report.skipped_maps.join(", "));
        }
        for m in &report.mismatches {
            println!("  {m}");
        }
        if report.mismatches.len() >= SHOWN {
            println!("  (stopped after {SHOWN} mismatches)");
        }
    }
    Ok(if report.mismatches.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

const VERDICT_NAMES: [&str; 6] =
    ["XDP_ABORTED", "XDP_DROP", "XDP_PASS", "XDP_TX", "XDP_REDIRECT", "other"];

/// Verdict counts over a run of packets.
#[derive(Debug, Default)]
pub struct Counts {
    /// Index = verdict 0..=4; 5 = anything else.
    pub verdicts: [u64; 6],
    /// Invocations stopped by a fault (counted as XDP_ABORTED too).
    pub faults: u64,
    /// Packets that do not fit a frame (shorter than 14 bytes, longer than the frame).
    pub unfit: u64,
    pub written: u64,
}

impl Counts {
    /// Counts one invocation; returns the effective verdict.
    pub fn add(&mut self, r: &Result<u32, Box<spine_vm::Fault>>) -> u32 {
        let v = match r {
            Ok(v) => *v,
            Err(_) => {
                self.faults += 1;
                spine_abi::xdp_action::ABORTED
            }
        };
        self.verdicts[(v as usize).min(5)] += 1;
        v
    }

    pub fn runs(&self) -> u64 {
        self.verdicts.iter().sum()
    }

    pub fn to_json(&self, packets: usize, ns: f64) -> serde_json::Value {
        let verdicts: serde_json::Map<String, serde_json::Value> = VERDICT_NAMES
            .iter()
            .zip(self.verdicts)
            .map(|(n, c)| (n.to_string(), json!(c)))
            .collect();
        json!({"packets": packets, "verdicts": verdicts, "faults": self.faults,
               "unfit": self.unfit, "written": self.written, "ns_per_packet": ns})
    }

    pub fn print(&self, packets: usize, ns: f64, json: bool) {
        if json {
            println!("{}", self.to_json(packets, ns));
            return;
        }
        println!("packets: {packets}");
        for (n, c) in VERDICT_NAMES.iter().zip(self.verdicts) {
            if c > 0 {
                println!("  {n:<13} {c}");
            }
        }
        if self.faults > 0 {
            println!("  faults        {} (counted as XDP_ABORTED)", self.faults);
        }
        if self.unfit > 0 {
            println!(
                "  unfit         {} (shorter than 14 bytes or longer than a frame)",
                self.unfit
            );
        }
        if self.written > 0 {
            println!("  written       {}", self.written);
        }
        println!("cost: {ns:.1} ns/packet");
    }
}
