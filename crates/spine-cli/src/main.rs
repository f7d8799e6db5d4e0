//! `spine`: the command line of the spine adapter, shaped like `ip` and `bpftool`.

mod conformance;
mod demo;
mod host;
mod output;
mod prog;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

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

fn main() -> std::process::ExitCode {
    spine_sys::default_sigpipe();
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Prog { cmd } => prog::main(cmd),
        Cmd::Conformance { dir, engine } => conformance::main(&dir, engine),
        Cmd::Demo { json } => demo::main(json),
        Cmd::Gen { out, count, seed, max_len } => demo::gen(&out, count, seed, max_len),
    };
    match r {
        Ok(code) => code,
        Err(e) => {
            eprintln!("spine: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
