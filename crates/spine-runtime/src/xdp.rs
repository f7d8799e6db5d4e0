//! Running an XDP extension on a frame: the per-worker state (registered map memory, the
//! stack, the context) and one call per packet. Nothing allocates per packet.

use std::sync::Arc;

use spine_vm::{BudgetVerdict, Env, Fault, Memory, Region, RunLimits, Stack, MAX_REGIONS};

use crate::ctx::{XdpCtx, XDP_CTX_SIZE};
use crate::ext::Extension;
use crate::frame::Frame;
use crate::helpers::XdpEnv;
use crate::Host;

/// Where a packet came from, as the program reads it in `struct xdp_md`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxInfo {
    pub ingress_ifindex: u32,
    pub rx_queue_index: u32,
}

impl Default for RxInfo {
    /// The loopback device's first queue: what the kernel's test run reports.
    fn default() -> Self {
        RxInfo { ingress_ifindex: 1, rx_queue_index: 0 }
    }
}

/// Per-invocation run-time budget, the watchdog's limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Wall time an invocation may take once it reaches its first clock check, in ns.
    pub ns: u64,
    /// Progress points (taken back-edges, calls) between clock checks.
    pub points: u32,
}

impl Default for Budget {
    /// 10 µs, SPINE's watchdog figure; the clock is checked every 64 progress points.
    fn default() -> Self {
        Budget { ns: 10_000, points: RunLimits::default().points }
    }
}

/// Why a runner cannot be set up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunnerError {
    #[error("the extension's maps need {needed} memory regions, more than the {MAX_REGIONS} an invocation can hold")]
    TooManyRegions { needed: usize },
    #[error("worker {cpu} is outside the {ncpus} CPUs the extension's maps were created for")]
    Cpu { cpu: usize, ncpus: usize },
}

/// One worker's instance of an extension.
#[derive(Debug)]
pub struct XdpRunner {
    ext: Arc<Extension>,
    cpu: usize,
    mem: Memory,
    /// Regions that stay registered between runs (map values).
    base: usize,
    stack: Stack,
    ctx: Box<XdpCtx>,
    budget: Budget,
}

/// Regions each invocation adds besides the map values: context, packet, stack.
const PER_RUN_REGIONS: usize = 3;

impl XdpRunner {
    pub fn new(ext: Arc<Extension>, cpu: usize, budget: Budget) -> Result<Self, RunnerError> {
        if let Some(m) = ext.maps().iter().find(|m| cpu >= m.ncpus()) {
            return Err(RunnerError::Cpu { cpu, ncpus: m.ncpus() });
        }
        let spans: usize = ext.maps().iter().map(|m| m.value_spans().len()).sum();
        if spans + PER_RUN_REGIONS > MAX_REGIONS {
            return Err(RunnerError::TooManyRegions { needed: spans + PER_RUN_REGIONS });
        }
        let mut mem = Memory::new();
        for span in ext.maps().iter().flat_map(|m| m.value_spans()) {
            let r = Region { start: span.start, len: span.len, writable: span.writable };
            // SAFETY: map value memory lives as long as the map, which `ext` (held by
            // this runner for its whole life) keeps alive; maps never move their storage.
            let pushed = unsafe { mem.push(r) };
            debug_assert!(pushed.is_some(), "counted above");
        }
        let base = mem.len();
        Ok(XdpRunner {
            ext,
            cpu,
            mem,
            base,
            stack: Stack::new(),
            ctx: Box::new(XdpCtx::default()),
            budget,
        })
    }

    pub fn extension(&self) -> &Arc<Extension> {
        &self.ext
    }

    /// Runs the extension on `frame` and returns its verdict (r0 truncated to 32 bits, as
    /// the kernel's `bpf_prog_run_xdp`). The frame's packet bounds follow whatever the
    /// program did with `xdp_adjust_*`. A fault leaves the frame as the program left it;
    /// the caller treats the packet as `XDP_ABORTED`.
    pub fn run(
        &mut self,
        frame: &mut Frame,
        rx: RxInfo,
        host: &mut dyn Host,
    ) -> Result<u32, Fault> {
        let buf = frame.base_addr();
        *self.ctx = XdpCtx {
            data: buf + frame.data as u64,
            data_end: buf + frame.end as u64,
            data_meta: buf + frame.meta as u64,
            ingress_ifindex: rx.ingress_ifindex,
            rx_queue_index: rx.rx_queue_index,
            egress_ifindex: 0,
            _pad: 0,
        };
        let ctx_ptr: *mut XdpCtx = &mut *self.ctx;
        self.mem.truncate(self.base);
        let ctx_region =
            Region { start: ctx_ptr as u64, len: XDP_CTX_SIZE as u64, writable: false };
        let pkt = Region {
            start: self.ctx.data_meta,
            len: self.ctx.data_end - self.ctx.data_meta,
            writable: true,
        };
        // SAFETY: the context box and the frame buffer outlive the call below (both are
        // borrowed for all of `run`) and nothing else references them while it runs; the
        // regions are removed before returning.
        let pkt_region = unsafe {
            self.mem.push(ctx_region);
            self.mem.push(pkt)
        }
        .expect("room reserved in new()");
        let mut env = RunEnv {
            xdp: XdpEnv {
                maps: self.ext.maps(),
                cpu: self.cpu,
                host,
                ctx: ctx_ptr,
                frame: buf as *mut u8,
                geometry: frame.geometry(),
                pkt_region,
            },
            budget: self.budget,
            deadline: None,
        };
        let limits = RunLimits { points: self.budget.points };
        let r = self.ext.interp().run(
            [ctx_ptr as u64, 0, 0, 0, 0],
            &mut self.mem,
            &mut self.stack,
            &mut env,
            limits,
        );
        self.mem.truncate(self.base);
        let c = *self.ctx;
        frame.meta = (c.data_meta - buf) as usize;
        frame.data = (c.data - buf) as usize;
        frame.end = (c.data_end - buf) as usize;
        r.map(|r0| r0 as u32)
    }
}

/// The helpers plus the watchdog's clock checks.
struct RunEnv<'a> {
    xdp: XdpEnv<'a>,
    budget: Budget,
    /// Set at the first clock check of the invocation, so invocations that never reach
    /// one (no loops, few calls: most packet programs) never read the clock.
    deadline: Option<u64>,
}

impl Env for RunEnv<'_> {
    fn call(
        &mut self,
        id: u32,
        args: [u64; 5],
        mem: &mut Memory,
    ) -> Result<u64, spine_vm::CallAbort> {
        self.xdp.call(id, args, mem)
    }

    fn budget_expired(&mut self) -> BudgetVerdict {
        let now = self.xdp.host.now_ns();
        let deadline = *self.deadline.get_or_insert(now.saturating_add(self.budget.ns));
        if now < deadline {
            BudgetVerdict::Continue(self.budget.points)
        } else {
            BudgetVerdict::Abort
        }
    }
}
