//! `spine-router-host`: the host router over a running adapter's endpoints.
//!
//! ```text
//! spine run adapter.toml --socket /run/spine.sock
//! spine-router-host --socket /run/spine.sock examples/router-host.toml
//! ```

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Parser;
use spine_router_host::{PathKind, Router, RouterConfig};

#[derive(Debug, Parser)]
#[command(about = "The host router's copy, header-copy and in-place paths over spine endpoints")]
struct Args {
    /// The adapter's control socket (`spine run --socket`).
    #[arg(long)]
    socket: PathBuf,
    /// The router's configuration (see docs/CONFIG.md, "The host router").
    config: PathBuf,
    /// Overrides the configuration's `path`.
    #[arg(long)]
    path: Option<PathKind>,
    /// Sleep this long when a visit finds nothing (0: spin).
    #[arg(long, default_value_t = 50)]
    idle_sleep_us: u64,
    /// Print the counters every this many seconds (0: never).
    #[arg(long, default_value_t = 0)]
    report_s: u64,
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let text = match std::fs::read_to_string(&args.config) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("spine-router-host: {}: {e}", args.config.display());
            return std::process::ExitCode::FAILURE;
        }
    };
    let mut cfg = match RouterConfig::parse(&text) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("spine-router-host: {}: {e}", args.config.display());
            return std::process::ExitCode::FAILURE;
        }
    };
    if let Some(p) = args.path {
        cfg.path = p;
    }
    if cfg.path == PathKind::Offload {
        eprintln!(
            "spine-router-host: path 'offload': the router extension forwards (attach the bundled \
             'router' to the ports); the host has nothing to do"
        );
        return std::process::ExitCode::SUCCESS;
    }
    let mut router = match Router::open(&args.socket, &cfg) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("spine-router-host: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let mut last = Instant::now();
    loop {
        if router.poll() == 0 && args.idle_sleep_us > 0 {
            std::thread::sleep(Duration::from_micros(args.idle_sleep_us));
        }
        if args.report_s > 0 && last.elapsed() >= Duration::from_secs(args.report_s) {
            last = Instant::now();
            let s = router.stats;
            println!("forwarded {} not_routed {} no_room {}", s.forwarded, s.not_routed, s.no_room);
        }
    }
}
