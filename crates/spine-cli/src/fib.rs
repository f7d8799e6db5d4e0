//! `spine fib show|lookup`: what a FIB built from route files, or from the host's own
//! tables (read with `ip -j`, as spine mirrors them), holds and answers.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use serde_json::{json, Value};
use spine_fib::parse::iproute;
use spine_fib::{table_id, FibOp, FibState, FibWriter, RouteEntry, RouteType};

#[derive(Subcommand)]
pub enum FibCmd {
    /// Every route, by table, prefix and metric.
    Show {
        #[command(flatten)]
        src: Source,
        /// Only this table (a number, main, local or default).
        #[arg(long)]
        table: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// The route an address takes: in one table, or through the default rules
    /// (local, main, default).
    Lookup {
        addr: IpAddr,
        #[command(flatten)]
        src: Source,
        #[arg(long)]
        table: Option<String>,
        #[arg(long)]
        json: bool,
    },
}

/// Where the routes come from.
#[derive(Args)]
pub struct Source {
    /// Route files (`ip route`-like lines; see spine_fib::parse::routes). Without any,
    /// the host's own tables and neighbours are read with `ip -j`.
    #[arg(long = "routes")]
    routes: Vec<PathBuf>,
}

pub fn main(cmd: FibCmd) -> Result<std::process::ExitCode> {
    match cmd {
        FibCmd::Show { src, table, json } => {
            let mut w = build(&src)?;
            let st = w.view();
            let tables = match table {
                Some(t) => vec![table_number(&t)?],
                None => st.table_ids(),
            };
            let routes: Vec<&RouteEntry> = tables.iter().flat_map(|&t| st.routes(t)).collect();
            if json {
                let v: Vec<Value> = routes.iter().map(|r| route_json(r)).collect();
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                for r in routes {
                    println!("{}", route_text(r));
                }
            }
        }
        FibCmd::Lookup { addr, src, table, json } => {
            let mut w = build(&src)?;
            let st = w.view();
            let found = lookup(st, addr, table.as_deref())?;
            match (found, json) {
                (Some(r), true) => {
                    println!(
                        "{}",
                        serde_json::to_string_pretty(
                            &json!({"addr": addr.to_string(), "route": route_json(r)})
                        )?
                    )
                }
                (Some(r), false) => println!("{addr}: {}", route_text(r)),
                (None, true) => println!("{}", json!({"addr": addr.to_string(), "route": null})),
                (None, false) => {
                    println!("{addr}: no route");
                    return Ok(std::process::ExitCode::from(2));
                }
            }
        }
    }
    Ok(std::process::ExitCode::SUCCESS)
}

fn lookup<'a>(
    st: &'a FibState,
    addr: IpAddr,
    table: Option<&str>,
) -> Result<Option<&'a RouteEntry>> {
    Ok(match table {
        Some(t) => st.lookup(table_number(t)?, addr, 0).map(|r| r.route),
        None => st.lookup_default_rules(addr, 0).map(|r| r.route),
    })
}

fn table_number(t: &str) -> Result<u32> {
    Ok(match t {
        "main" => table_id::MAIN,
        "local" => table_id::LOCAL,
        "default" => table_id::DEFAULT,
        n => n.parse().with_context(|| format!("table `{n}`: a number, main, local or default"))?,
    })
}

fn table_name(t: u32) -> String {
    match t {
        table_id::MAIN => "main".into(),
        table_id::LOCAL => "local".into(),
        table_id::DEFAULT => "default".into(),
        n => n.to_string(),
    }
}

fn build(src: &Source) -> Result<FibWriter> {
    let (mut w, _reader) = FibWriter::new();
    let ops = if src.routes.is_empty() { host_ops()? } else { file_ops(&src.routes)? };
    for op in ops {
        match w.apply(op) {
            Ok(()) => {}
            // The kernel keeps one link-local and one multicast route per interface
            // under one (prefix, metric); the FIB keeps one, which is all a lookup of
            // such an address can use.
            Err(spine_fib::FibError::Exists { prefix: spine_fib::IpPrefix::V6(p), .. })
                if p.addr() >> 118 == 0x3fa || p.addr() >> 120 == 0xff => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(w)
}

fn file_ops(files: &[PathBuf]) -> Result<Vec<FibOp>> {
    let mut ops = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(f).with_context(|| f.display().to_string())?;
        for r in spine_fib::parse::routes::parse(&text) {
            ops.push(FibOp::Add(r.with_context(|| f.display().to_string())?));
        }
    }
    Ok(ops)
}

fn ip(args: &[&str]) -> Result<String> {
    let out = Command::new("ip").args(args).output().context("running ip")?;
    if !out.status.success() {
        bail!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    String::from_utf8(out.stdout).context("ip printed something that is not UTF-8")
}

/// The host's routes and neighbours, as spine mirrors them.
fn host_ops() -> Result<Vec<FibOp>> {
    let links: Value = serde_json::from_str(&ip(&["-j", "link", "show"])?)?;
    let names: BTreeMap<String, u32> = links
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|l| Some((l["ifname"].as_str()?.to_string(), l["ifindex"].as_u64()? as u32)))
        .collect();
    let dev = |n: &str| names.get(n).copied();
    let mut ops = Vec::new();
    for (fam, v6) in [("-4", false), ("-6", true)] {
        let locked = iproute::locked_mtus(&ip(&[fam, "route", "show", "table", "all"])?, v6);
        let json = ip(&["-j", "-d", fam, "route", "show", "table", "all"])?;
        ops.extend(iproute::routes(&json, v6, &locked, dev)?.into_iter().map(FibOp::Add));
    }
    let neigh = iproute::neighbours(&ip(&["-j", "neigh", "show", "nud", "all"])?, dev)?;
    ops.extend(neigh.into_iter().map(|(ifindex, ip, neigh)| FibOp::SetNeigh {
        ifindex,
        ip,
        neigh,
    }));
    Ok(ops)
}

/// A route as `ip route` words it (interfaces by index).
fn route_text(r: &RouteEntry) -> String {
    let mut s = String::new();
    if r.kind != RouteType::Unicast {
        s.push_str(r.kind.name());
        s.push(' ');
    }
    s.push_str(&r.prefix.to_string());
    let hop = |s: &mut String, n: &spine_fib::NextHop| {
        if let Some(g) = n.gateway {
            s.push_str(&format!(" via {g}"));
        }
        s.push_str(&format!(" dev {}", n.ifindex));
    };
    match r.nexthops.as_slice() {
        [] => {}
        [n] => hop(&mut s, n),
        many => {
            for n in many {
                s.push_str(" nexthop");
                hop(&mut s, n);
                s.push_str(&format!(" weight {}", n.weight));
            }
        }
    }
    if r.metric != 0 {
        s.push_str(&format!(" metric {}", r.metric));
    }
    if r.mtu != 0 {
        s.push_str(&format!(" mtu lock {}", r.mtu));
    }
    if let Some(a) = r.prefsrc {
        s.push_str(&format!(" src {a}"));
    }
    s.push_str(&format!(" table {}", table_name(r.table)));
    s
}

fn route_json(r: &RouteEntry) -> Value {
    json!({
        "table": r.table,
        "prefix": r.prefix.to_string(),
        "type": r.kind.name(),
        "metric": r.metric,
        "mtu": r.mtu,
        "prefsrc": r.prefsrc.map(|a| a.to_string()),
        "nexthops": r.nexthops.iter().map(|n| json!({
            "gateway": n.gateway.map(|g| g.to_string()),
            "ifindex": n.ifindex,
            "weight": n.weight,
        })).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fib(text: &str) -> FibWriter {
        let dir = std::env::temp_dir().join(format!("spine-fib-cli-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join(format!("routes-{}", text.len()));
        std::fs::write(&f, text).unwrap();
        let w = build(&Source { routes: vec![f] }).unwrap();
        std::fs::remove_dir_all(&dir).ok();
        w
    }

    #[test]
    fn lookup_takes_the_longest_prefix_through_the_rules() {
        let mut w = fib("10.0.0.0/8 via 192.0.2.1 dev 2\n\
             10.1.0.0/16 nexthop via 192.0.2.1 dev 2 nexthop via 192.0.2.9 dev 3 weight 2\n\
             blackhole 10.9.0.0/16\n\
             10.0.0.0/8 via 198.51.100.1 dev 4 table 100 mtu lock 1400 src 198.51.100.7\n");
        let st = w.view();
        let at =
            |a: &str, t: Option<&str>| lookup(st, a.parse().unwrap(), t).unwrap().map(route_text);
        assert_eq!(at("10.2.3.4", None).unwrap(), "10.0.0.0/8 via 192.0.2.1 dev 2 table main");
        assert_eq!(
            at("10.1.3.4", None).unwrap(),
            "10.1.0.0/16 nexthop via 192.0.2.1 dev 2 weight 1 nexthop via 192.0.2.9 dev 3 weight 2 table main"
        );
        assert_eq!(at("10.9.0.1", None).unwrap(), "blackhole 10.9.0.0/16 table main");
        assert_eq!(
            at("10.9.0.1", Some("100")).unwrap(),
            "10.0.0.0/8 via 198.51.100.1 dev 4 mtu lock 1400 src 198.51.100.7 table 100"
        );
        assert_eq!(at("11.0.0.1", None), None);
        let j = route_json(lookup(st, "10.1.0.1".parse().unwrap(), None).unwrap().unwrap());
        assert_eq!(j["nexthops"][1]["weight"], 2);
        assert!(table_number("mian").is_err());
    }

    #[test]
    fn a_bad_route_file_names_the_line() {
        let dir = std::env::temp_dir().join(format!("spine-fib-cli-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("routes");
        std::fs::write(&f, "10.0.0.0/8 via 192.0.2.1 dev 2\n10.0.0.0/88 dev 2\n").unwrap();
        let e = build(&Source { routes: vec![f] }).expect_err("an error");
        std::fs::remove_dir_all(&dir).ok();
        assert!(format!("{e:#}").contains("line 2"), "{e:#}");
    }
}
