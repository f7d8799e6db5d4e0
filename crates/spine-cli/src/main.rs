//! `spine`: the command line of the spine adapter, shaped like `ip` and `bpftool`.

mod bench;
mod conformance;
mod control;
mod demo;
mod fib;
mod host;
mod mapargs;
mod output;
mod prog;
mod run;
mod verify;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// Heap bytes are counted so `spine bench lpm` can size structures that cannot.
#[global_allocator]
static ALLOC: bench::alloc_count::Counting = bench::alloc_count::Counting;

#[derive(Parser)]
#[command(
    name = "spine",
    version,
    about = "A safe, extensible operating system for a network adapter"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Inspect and run eBPF objects.
    Prog {
        #[command(subcommand)]
        cmd: prog::ProgCmd,
    },
    /// Run the eBPF ISA conformance suite (a directory of bpf_conformance `.data` files).
    Conformance {
        dir: PathBuf,
        #[arg(long, value_enum, default_value = "all")]
        engine: conformance::Engines,
    },
    /// The built-in default: a bundled XDP program over a bundled capture.
    Demo {
        #[arg(long)]
        json: bool,
    },
    /// Benchmarks, each against its reference in the same run.
    Bench {
        #[command(subcommand)]
        cmd: BenchCmd,
    },
    /// Run an adapter described by a configuration file (docs/CONFIG.md).
    Run(run::RunArgs),
    /// Extensions of a running adapter: list, load, attach, detach, replace, unload
    /// (through its control socket, `spine run … --socket`).
    Ext {
        #[command(subcommand)]
        cmd: control::ExtCmd,
        #[command(flatten)]
        conn: control::Conn,
    },
    /// Maps of a running adapter's extensions: list, dump, lookup, update, delete, pop (queues and stacks).
    Map {
        #[command(subcommand)]
        cmd: control::MapCmd,
        #[command(flatten)]
        conn: control::Conn,
    },
    /// A running adapter's event trace: start, stop, get.
    Trace {
        #[command(subcommand)]
        cmd: control::TraceCmd,
        #[command(flatten)]
        conn: control::Conn,
    },
    /// A running adapter's bpf_trace_printk lines and watchdog events (-f: follow).
    Log {
        #[command(flatten)]
        args: control::LogArgs,
        #[command(flatten)]
        conn: control::Conn,
    },
    /// A running adapter's counters (once, or every second with --watch).
    Stats {
        #[command(flatten)]
        args: control::StatsArgs,
        #[command(flatten)]
        conn: control::Conn,
    },
    /// Certificates for the remote control API (`spine run … --tls-listen`).
    Tls {
        #[command(subcommand)]
        cmd: control::TlsCmd,
    },
    /// What the FIB holds: routes by table, and the route an address takes.
    Fib {
        #[command(subcommand)]
        cmd: fib::FibCmd,
    },
    /// Write generated traffic (a realistic mix with malformed packets) to a pcap file.
    Gen {
        out: PathBuf,
        #[arg(long, default_value_t = 1000)]
        count: usize,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Longest frame generated.
        #[arg(long, default_value_t = 1514)]
        max_len: usize,
    },
}

#[derive(Subcommand)]
enum BenchCmd {
    /// ns per run of every bundled program: interpreter, JIT (with and without the
    /// watchdog) and the kernel's JIT; and load + verify + JIT time of 1,000 instructions.
    Exec {
        /// Runs per packet (on one buffer, as the kernel's test run repeats).
        #[arg(long, default_value_t = 20_000)]
        repeat: u32,
        /// Trials per figure; the median is reported, min/median/max beside.
        #[arg(long, alias = "repeat-trials", default_value_t = 5)]
        trials: usize,
        #[arg(long)]
        json: bool,
        /// Also write bench-exec.json and bench-exec.svg here.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Only this bundled program's row, or `load` for the load time alone.
        #[arg(long)]
        only: Option<String>,
    },
    /// Packets per second through the adapter (mem ports, 64-byte frames): XDP_DROP,
    /// XDP_TX and port-to-port XDP_REDIRECT on one and two workers, with the kernel's
    /// BPF_PROG_TEST_RUN cost of the same programs.
    Forward {
        /// Seconds each configuration runs.
        #[arg(long, default_value_t = 2.0)]
        seconds: f64,
        /// Only this scenario: drop, tx or redirect.
        #[arg(long)]
        only: Option<String>,
        /// Runs of each configuration; the table shows min/median/max.
        #[arg(long, default_value_t = 1)]
        repeat_trials: usize,
        #[arg(long)]
        json: bool,
        /// Also write bench-forward.json here.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// spine on veth (afxdp, afpacket) against kernel XDP, Linux IP forwarding and DPDK
    /// testpmd, driven by the same trafgen load: packets per second and CPU seconds per
    /// million packets (root; namespaces it creates and removes).
    Veth(bench::veth::VethArgs),
    /// Longest-prefix match on the real BGP tables: spine-fib (Poptrie, DIR-24-8), the
    /// prefix-trie crate and the LPM trie map, lookups/s, memory, updates/s (trace).
    Lpm(bench::lpm::LpmArgs),
    /// The bundled router forwarding 64-byte frames with the full IPv4 table in its FIB
    /// (mem ports, one worker), next to the kernel's test run of the same object
    /// in a namespace holding the same routes.
    Router(bench::router::RouterArgs),
    /// The host router's four data paths side by side (offload, header-copy, in-place,
    /// copy): throughput and the host application's CPU time per packet against frame
    /// size, with ratios to offload from the same run; JSON and an SVG.
    RouterPaths(bench::router_paths::RouterPathsArgs),
    /// The control API: map lookups per second through the client library and the CLI
    /// beside bpf(2) and bpftool on a kernel map of the same shape; replacement time
    /// under load (p50/p99) and the packets it affected.
    Control(bench::control::ControlArgs),
    /// 64-byte round trips through one adapter to an application's endpoint and back
    /// (median, p99), next to kernel UDP sockets on loopback in the same run.
    Endpoint(bench::endpoint::EndpointArgs),
}

fn main() -> std::process::ExitCode {
    spine_sys::default_sigpipe();
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Prog { cmd } => prog::main(cmd),
        Cmd::Conformance { dir, engine } => conformance::main(&dir, engine),
        Cmd::Demo { json } => demo::main(json),
        Cmd::Gen { out, count, seed, max_len } => demo::gen(&out, count, seed, max_len),
        Cmd::Run(args) => run::main(&args),
        Cmd::Ext { cmd, conn } => {
            control::ext(cmd, &conn).map(|()| std::process::ExitCode::SUCCESS)
        }
        Cmd::Map { cmd, conn } => {
            control::map(cmd, &conn).map(|()| std::process::ExitCode::SUCCESS)
        }
        Cmd::Trace { cmd, conn } => {
            control::trace(cmd, &conn).map(|()| std::process::ExitCode::SUCCESS)
        }
        Cmd::Log { args, conn } => {
            control::log(&args, &conn).map(|()| std::process::ExitCode::SUCCESS)
        }
        Cmd::Stats { args, conn } => {
            control::stats(&args, &conn).map(|()| std::process::ExitCode::SUCCESS)
        }
        Cmd::Tls { cmd } => control::tls(cmd).map(|()| std::process::ExitCode::SUCCESS),
        Cmd::Fib { cmd } => fib::main(cmd),
        Cmd::Bench { cmd: BenchCmd::Exec { repeat, trials, json, out, only } } => {
            let trials = trials.max(1);
            bench::exec::main(repeat.max(1), trials, only.as_deref(), json, out.as_deref())
                .map(|()| std::process::ExitCode::SUCCESS)
        }
        Cmd::Bench { cmd: BenchCmd::Forward { seconds, only, repeat_trials, json, out } } => {
            let trials = repeat_trials.max(1);
            bench::forward::main(seconds.max(0.1), trials, only.as_deref(), json, out.as_deref())
                .map(|()| std::process::ExitCode::SUCCESS)
        }
        Cmd::Bench { cmd: BenchCmd::Lpm(args) } => {
            bench::lpm::main(&args).map(|()| std::process::ExitCode::SUCCESS)
        }
        Cmd::Bench { cmd: BenchCmd::Control(args) } => {
            bench::control::main(&args).map(|()| std::process::ExitCode::SUCCESS)
        }
        Cmd::Bench { cmd: BenchCmd::Endpoint(args) } => {
            bench::endpoint::main(&args).map(|()| std::process::ExitCode::SUCCESS)
        }
        Cmd::Bench { cmd: BenchCmd::RouterPaths(args) } => {
            bench::router_paths::main(&args).map(|()| std::process::ExitCode::SUCCESS)
        }
        Cmd::Bench { cmd: BenchCmd::Router(args) } => {
            bench::router::main(&args).map(|()| std::process::ExitCode::SUCCESS)
        }
        Cmd::Bench { cmd: BenchCmd::Veth(args) } => {
            bench::veth::main(&args).map(|()| std::process::ExitCode::SUCCESS)
        }
    };
    match r {
        Ok(code) => code,
        Err(e) => {
            eprintln!("spine: {}", chain_text(&e));
            std::process::ExitCode::FAILURE
        }
    }
}

/// The error and its causes, `: `-separated, as `{:#}` prints them, less each cause whose
/// text is already in the message: an error type that writes its source into its own
/// message and also returns it from `source()` would otherwise say everything twice.
fn chain_text(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let part = cause.to_string();
        if text.contains(&part) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&part);
    }
    text
}

#[cfg(test)]
mod chain_tests {
    use super::chain_text;

    #[derive(Debug)]
    struct Inner;
    impl std::fmt::Display for Inner {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("port rva: busy")
        }
    }
    impl std::error::Error for Inner {}

    /// Writes its source into its message and returns it from `source()` too.
    #[derive(Debug)]
    struct Outer(Inner);
    impl std::fmt::Display for Outer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "port[0]: {}", self.0)
        }
    }
    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn a_cause_already_in_the_message_is_not_repeated() {
        let e = anyhow::Error::new(Outer(Inner));
        assert_eq!(format!("{e:#}"), "port[0]: port rva: busy: port rva: busy");
        assert_eq!(chain_text(&e), "port[0]: port rva: busy");
        let e = anyhow::Error::new(Inner).context("starting the adapter");
        assert_eq!(chain_text(&e), "starting the adapter: port rva: busy");
    }
}
