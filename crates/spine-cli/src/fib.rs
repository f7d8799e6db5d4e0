//! `spine fib show|rules|lookup`: what a FIB holds and answers, built from route and
//! rule files, or from the host's own tables, neighbours and policy rules dumped over
//! netlink exactly as spine's mirror (`[fib] mirror = true`) reads them.

use std::net::IpAddr;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use serde_json::{json, Value};
use spine_fib::{
    table_id, FibOp, FibState, FibWriter, Flow, Resolved, RouteEntry, RouteType, RuleResult,
};

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
    /// The policy rules of both families, in the order lookups walk them.
    Rules {
        #[command(flatten)]
        src: Source,
        #[arg(long)]
        json: bool,
    },
    /// The route an address takes, as `bpf_fib_lookup` finds it: in one table
    /// (`--table`), or through the policy rules with the flow the options describe.
    Lookup {
        addr: IpAddr,
        #[command(flatten)]
        src: Source,
        #[arg(long)]
        table: Option<String>,
        #[command(flatten)]
        flow: FlowArgs,
        #[arg(long)]
        json: bool,
    },
}

/// Where the routes come from.
#[derive(Args)]
pub struct Source {
    /// Route files (`ip route`-like lines; see spine_fib::parse::routes). Without any,
    /// the host's own tables, neighbours and rules are dumped over netlink.
    #[arg(long = "routes")]
    routes: Vec<PathBuf>,
    /// Policy rule files (`ip rule`-like lines; see spine_fib::parse::rules), with
    /// `--routes`; without any, the kernel's default rules.
    #[arg(long = "rules", requires = "routes")]
    rules: Vec<PathBuf>,
}

/// What the policy rules see of the lookup (the fields of `struct bpf_fib_lookup`).
#[derive(Args)]
pub struct FlowArgs {
    /// Source address (default: the unspecified address of ADDR's family).
    #[arg(long)]
    from: Option<IpAddr>,
    /// Input interface index (default: 1, loopback, as for a locally sent packet).
    #[arg(long, default_value_t = 1)]
    iif: u32,
    /// Output interface index (`BPF_FIB_LOOKUP_OUTPUT`): only routes through it.
    #[arg(long, default_value_t = 0)]
    oif: u32,
    /// The packet's mark (`BPF_FIB_LOOKUP_MARK`); `0x` for hex.
    #[arg(long, default_value_t = 0, value_parser = number::<u32>)]
    mark: u32,
    /// IPv4 TOS byte or IPv6 traffic class; `0x` for hex.
    #[arg(long, default_value_t = 0, value_parser = number::<u8>)]
    tos: u8,
    /// L4 protocol number.
    #[arg(long, default_value_t = 0)]
    ipproto: u8,
    #[arg(long, default_value_t = 0)]
    sport: u16,
    #[arg(long, default_value_t = 0)]
    dport: u16,
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
        FibCmd::Rules { src, json } => {
            let mut w = build(&src)?;
            let st = w.view();
            if json {
                let fam = |v6: bool| -> Vec<Value> {
                    st.rules(v6).rules().iter().map(|r| json!(r.to_string())).collect()
                };
                let v = json!({"ipv4": fam(false), "ipv6": fam(true)});
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                for v6 in [false, true] {
                    for r in st.rules(v6).rules() {
                        println!("{}{r}", if v6 { "-6 " } else { "" });
                    }
                }
            }
        }
        FibCmd::Lookup { addr, src, table, flow, json } => {
            let mut w = build(&src)?;
            let st = w.view();
            let found = match table {
                Some(t) => Found::from(st.lookup(table_number(&t)?, addr, 0)),
                None => lookup(st, &flow.flow(addr)?),
            };
            let code = if let Found::Route(_) = found { 0 } else { 2 };
            match (found, json) {
                (Found::Route(r), true) => println!(
                    "{}",
                    serde_json::to_string_pretty(
                        &json!({"addr": addr.to_string(), "route": route_json(r)})
                    )?
                ),
                (Found::Route(r), false) => println!("{addr}: {}", route_text(r)),
                (Found::Refused(why), true) => {
                    println!("{}", json!({"addr": addr.to_string(), "route": null, "refused": why}))
                }
                (Found::Refused(why), false) => println!("{addr}: {why}"),
            }
            return Ok(std::process::ExitCode::from(code));
        }
    }
    Ok(std::process::ExitCode::SUCCESS)
}

/// A number in decimal or, after `0x`, in hex.
fn number<T: TryFrom<u64>>(s: &str) -> Result<T, String> {
    let v = match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    };
    v.ok().and_then(|v| T::try_from(v).ok()).ok_or_else(|| format!("`{s}`: not a number that fits"))
}

/// A lookup's answer: a route, or why there is none.
#[derive(Debug, PartialEq)]
enum Found<'a> {
    Route(&'a RouteEntry),
    /// `no route`, or the action of the rule that ended the walk.
    Refused(&'static str),
}

impl<'a> From<Option<Resolved<'a>>> for Found<'a> {
    fn from(r: Option<Resolved<'a>>) -> Self {
        r.map_or(Found::Refused("no route"), |r| Found::Route(r.route))
    }
}

impl FlowArgs {
    fn flow(&self, dst: IpAddr) -> Result<Flow> {
        let src = match (self.from, dst) {
            (Some(s), d) if s.is_ipv4() != d.is_ipv4() => {
                bail!("--from {s} and {d} are of different families")
            }
            (Some(s), _) => s,
            (None, IpAddr::V4(_)) => IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
            (None, IpAddr::V6(_)) => IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
        };
        Ok(Flow {
            iif: self.iif,
            oif: self.oif,
            mark: self.mark,
            // The bits the rules compare: IPv4 `tos & 0x1c`, IPv6 the DSCP bits.
            dscp: if dst.is_ipv4() { self.tos & 0x1c } else { self.tos & 0xfc },
            proto: self.ipproto,
            sport: self.sport,
            dport: self.dport,
            src,
            dst,
            has_saddr: self.from.is_some() || dst.is_ipv4(),
        })
    }
}

/// The lookup through the policy rules: the FIB's merged path while only the default
/// rules exist and no output interface is given, else the rules' walk.
fn lookup<'a>(st: &'a FibState, flow: &Flow) -> Found<'a> {
    if st.rules(flow.dst.is_ipv6()).is_default() && flow.oif == 0 {
        return Found::from(st.lookup_default_rules(flow.dst, 0));
    }
    match st.lookup_by_rules(flow, 0) {
        RuleResult::Table(r) => Found::Route(r.route),
        RuleResult::Blackhole => Found::Refused("blackhole (rule)"),
        RuleResult::Unreachable => Found::Refused("unreachable (rule)"),
        RuleResult::Prohibit => Found::Refused("prohibit (rule)"),
        RuleResult::None => Found::Refused("no route"),
    }
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
    if src.routes.is_empty() {
        let mut sock = spine_rtnl::RtnlSocket::open().context("netlink")?;
        let stats = spine_rtnl::MirrorStats::default();
        sock.dump(&mut w, &stats).context("dumping the host's tables over netlink")?;
        return Ok(w);
    }
    for op in file_ops(&src.routes, &src.rules)? {
        w.apply(op)?;
    }
    Ok(w)
}

fn file_ops(routes: &[PathBuf], rules: &[PathBuf]) -> Result<Vec<FibOp>> {
    let read = |f: &PathBuf| std::fs::read_to_string(f).with_context(|| f.display().to_string());
    let mut ops = Vec::new();
    for f in routes {
        for r in spine_fib::parse::routes::parse(&read(f)?) {
            ops.push(FibOp::Add(r.with_context(|| f.display().to_string())?));
        }
    }
    if !rules.is_empty() {
        let mut by_family = [Vec::new(), Vec::new()];
        for f in rules {
            for r in spine_fib::parse::rules::parse(&read(f)?) {
                let (v6, rule) = r.with_context(|| f.display().to_string())?;
                by_family[usize::from(v6)].push(rule);
            }
        }
        // A family without rules in the files keeps the kernel's defaults.
        for (v6, rules) in [false, true].into_iter().zip(by_family) {
            if !rules.is_empty() {
                ops.push(FibOp::SetRules { v6, rules });
            }
        }
    }
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

    struct Files(PathBuf);

    impl Files {
        fn new(tag: &str) -> Files {
            let d =
                std::env::temp_dir().join(format!("spine-fib-cli-{tag}-{}", std::process::id()));
            std::fs::create_dir_all(&d).unwrap();
            Files(d)
        }
        fn fib(&self, routes: &str, rules: Option<&str>) -> Result<FibWriter> {
            let r = self.0.join("routes");
            std::fs::write(&r, routes).unwrap();
            let rules = rules.map(|text| {
                let f = self.0.join("rules");
                std::fs::write(&f, text).unwrap();
                f
            });
            build(&Source { routes: vec![r], rules: rules.into_iter().collect() })
        }
    }

    impl Drop for Files {
        fn drop(&mut self) {
            std::fs::remove_dir_all(&self.0).ok();
        }
    }

    fn flow() -> FlowArgs {
        FlowArgs { from: None, iif: 1, oif: 0, mark: 0, tos: 0, ipproto: 0, sport: 0, dport: 0 }
    }

    fn at(st: &FibState, a: &str, f: &FlowArgs) -> String {
        let a: IpAddr = a.parse().unwrap();
        match lookup(st, &f.flow(a).unwrap()) {
            Found::Route(r) => route_text(r),
            Found::Refused(why) => why.to_string(),
        }
    }

    #[test]
    fn lookup_takes_the_longest_prefix_through_the_default_rules() {
        let files = Files::new("default");
        let mut w = files
            .fib(
                "10.0.0.0/8 via 192.0.2.1 dev 2\n\
                 10.1.0.0/16 nexthop via 192.0.2.1 dev 2 nexthop via 192.0.2.9 dev 3 weight 2\n\
                 blackhole 10.9.0.0/16\n\
                 10.0.0.0/8 via 198.51.100.1 dev 4 table 100 mtu lock 1400 src 198.51.100.7\n",
                None,
            )
            .unwrap();
        let st = w.view();
        let f = flow();
        assert_eq!(at(st, "10.2.3.4", &f), "10.0.0.0/8 via 192.0.2.1 dev 2 table main");
        assert_eq!(
            at(st, "10.1.3.4", &f),
            "10.1.0.0/16 nexthop via 192.0.2.1 dev 2 weight 1 nexthop via 192.0.2.9 dev 3 weight 2 table main"
        );
        assert_eq!(at(st, "10.9.0.1", &f), "blackhole 10.9.0.0/16 table main");
        let t100 = st.lookup(100, "10.9.0.1".parse().unwrap(), 0).map(|r| route_text(r.route));
        assert_eq!(
            t100.as_deref(),
            Some("10.0.0.0/8 via 198.51.100.1 dev 4 mtu lock 1400 src 198.51.100.7 table 100")
        );
        assert_eq!(at(st, "11.0.0.1", &f), "no route");
        let Found::Route(r) = lookup(st, &f.flow("10.1.0.1".parse().unwrap()).unwrap()) else {
            panic!("a route")
        };
        assert_eq!(route_json(r)["nexthops"][1]["weight"], 2);
        assert!(table_number("mian").is_err());
    }

    #[test]
    fn lookup_walks_the_rules_with_the_flow_given() {
        let files = Files::new("rules");
        let mut w = files
            .fib(
                "10.0.0.0/8 via 192.0.2.1 dev 2\n\
                 10.0.0.0/8 via 198.51.100.1 dev 4 table 100\n\
                 0.0.0.0/0 via 203.0.113.1 dev 5 table 200\n\
                 2001:db8::/32 via fe80::1 dev 2\n",
                Some(
                    "pref 0 lookup local\n\
                     from 172.16.0.0/12 pref 100 lookup 100\n\
                     fwmark 0x7 pref 110 lookup 200\n\
                     ipproto udp dport 53 pref 120 prohibit\n\
                     iif 9 pref 130 blackhole\n\
                     pref 140 lookup main suppress_prefixlength 0\n\
                     pref 150 lookup 200\n",
                ),
            )
            .unwrap();
        let st = w.view();
        let mut f = flow();
        assert_eq!(at(st, "10.1.1.1", &f), "10.0.0.0/8 via 192.0.2.1 dev 2 table main");
        f.from = Some("172.16.5.5".parse().unwrap());
        assert_eq!(at(st, "10.1.1.1", &f), "10.0.0.0/8 via 198.51.100.1 dev 4 table 100");
        f.from = None;
        f.mark = 7;
        assert_eq!(at(st, "10.1.1.1", &f), "0.0.0.0/0 via 203.0.113.1 dev 5 table 200");
        f.mark = 0;
        (f.ipproto, f.dport) = (17, 53);
        assert_eq!(at(st, "10.1.1.1", &f), "prohibit (rule)");
        (f.ipproto, f.dport, f.iif) = (0, 0, 9);
        assert_eq!(at(st, "10.1.1.1", &f), "blackhole (rule)");
        f.iif = 1;
        // Main's default route would be suppressed; main holds none, table 200 answers.
        assert_eq!(at(st, "11.1.1.1", &f), "0.0.0.0/0 via 203.0.113.1 dev 5 table 200");
        // No IPv6 rules in the file: the family keeps the default rules.
        assert_eq!(at(st, "2001:db8::1", &f), "2001:db8::/32 via fe80::1 dev 2 table main");
        assert_eq!(st.rules(false).rules().len(), 7);
        assert!(st.rules(true).is_default());
        f.from = Some("2001:db8::9".parse().unwrap());
        assert!(f.flow("10.0.0.1".parse().unwrap()).is_err(), "families differ");
    }

    #[test]
    fn bad_route_and_rule_files_name_the_line() {
        let files = Files::new("bad");
        let e = files.fib("10.0.0.0/8 via 192.0.2.1 dev 2\n10.0.0.0/88 dev 2\n", None);
        assert!(format!("{:#}", e.map(|_| ()).expect_err("an error")).contains("line 2"));
        let e = files.fib("10.0.0.0/8 dev 2\n", Some("pref 1 lookup 1\npref 2 lookup x\n"));
        let e = format!("{:#}", e.map(|_| ()).expect_err("an error"));
        assert!(e.contains("line 2") && e.contains("rules"), "{e}");
    }
}
