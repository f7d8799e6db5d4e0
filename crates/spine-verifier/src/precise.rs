//! Precision marks, the kernel's scheme (`mark_chain_precision`, `backtrack_insn`):
//! a cached state's scalars are compared with a new state's only where a check of the
//! explored continuation depended on their values; elsewhere any scalar matches.
//!
//! A scalar becomes precise where its value decides something: it moves a pointer, it
//! is a helper's argument, a callback returns it, or a conditional jump on it had a side
//! that could not be taken. The need is then carried backwards through the
//! instructions the path executed ([`Hist`]), register to register and through stack
//! spills, to every cached state on the path, which records it in its [`Marks`]. A
//! cached state prunes only once every path below it has finished, so its marks name
//! everything its continuation ever depended on.

use crate::cfg::ARG_REGS;
use spine_isa::{op, Insn};

/// Call frames a mark can name (the ISA's limit); deeper frames make everything
/// precise.
pub const FRAMES: usize = spine_isa::MAX_CALL_FRAMES;

/// Registers and stack slots (per frame, slot `i` covering `fp - 8(i+1) .. fp - 8i`)
/// whose values matter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Marks {
    pub regs: [u16; FRAMES],
    pub stack: [u64; FRAMES],
    /// Everything is precise (a frame or slot beyond what the masks hold).
    pub all: bool,
}

impl Marks {
    pub fn is_empty(&self) -> bool {
        !self.all && self.regs.iter().all(|&r| r == 0) && self.stack.iter().all(|&s| s == 0)
    }

    pub fn reg(&self, frame: usize, r: usize) -> bool {
        self.all || frame >= FRAMES || self.regs[frame] & (1 << r) != 0
    }

    pub fn slot(&self, frame: usize, s: usize) -> bool {
        self.all || frame >= FRAMES || s >= 64 || self.stack[frame] & (1 << s) != 0
    }

    pub fn set_reg(&mut self, frame: usize, r: usize) {
        match self.regs.get_mut(frame) {
            Some(m) => *m |= 1 << r,
            None => self.all = true,
        }
    }

    pub fn set_slot(&mut self, frame: usize, s: usize) {
        match self.stack.get_mut(frame) {
            Some(m) if s < 64 => *m |= 1 << s,
            _ => self.all = true,
        }
    }

    /// The slots covering frame offsets `[lo, hi)` (negative).
    fn slots(lo: i32, hi: i32) -> std::ops::RangeInclusive<usize> {
        let slot = |o: i32| ((-o - 1) / 8).max(0) as usize;
        slot(hi - 1)..=slot(lo)
    }

    fn any_slot(&self, frame: usize, lo: i32, hi: i32) -> bool {
        Self::slots(lo, hi).any(|s| self.slot(frame, s))
    }

    fn set_slots(&mut self, frame: usize, lo: i32, hi: i32) {
        for s in Self::slots(lo, hi) {
            self.set_slot(frame, s);
        }
    }

    fn clear_slot_if_whole(&mut self, frame: usize, lo: i32, hi: i32) {
        if lo % 8 == 0 && hi - lo == 8 && frame < FRAMES {
            let s = ((-lo - 1) / 8) as usize;
            if s < 64 {
                self.stack[frame] &= !(1 << s);
            }
        }
    }

    /// The marks of `self` that `o` lacks.
    pub fn minus(&self, o: &Marks) -> Marks {
        if o.all {
            return Marks::default();
        }
        let mut m = Marks { all: self.all && !o.all, ..Marks::default() };
        for f in 0..FRAMES {
            m.regs[f] = self.regs[f] & !o.regs[f];
            m.stack[f] = self.stack[f] & !o.stack[f];
        }
        m
    }

    pub fn union(&mut self, o: &Marks) {
        self.all |= o.all;
        for f in 0..FRAMES {
            self.regs[f] |= o.regs[f];
            self.stack[f] |= o.stack[f];
        }
    }
}

/// Which kind of `exit` an [`Hist`] entry executed.
pub const EXIT_CALL: u8 = 1;
pub const EXIT_CALLBACK: u8 = 2;
/// No stack access.
const NO_FRAME: u8 = u8::MAX;

/// One executed instruction of a path: where, in which frame, and which stack bytes
/// it loaded or stored (the frame and offsets a pointer register held then, which the
/// instruction alone does not tell).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hist {
    pub pc: u32,
    pub depth: u8,
    pub exit: u8,
    sframe: u8,
    lo: i32,
    hi: i32,
}

impl Hist {
    pub fn new(pc: usize, depth: usize) -> Hist {
        Hist { pc: pc as u32, depth: depth as u8, exit: 0, sframe: NO_FRAME, lo: 0, hi: 0 }
    }

    pub fn stack_access(&mut self, frame: usize, lo: i64, hi: i64) {
        self.sframe = frame.min(usize::from(NO_FRAME - 1)) as u8;
        self.lo = lo.clamp(i64::from(i32::MIN / 2), 0) as i32;
        self.hi = hi.clamp(i64::from(i32::MIN / 2), 0) as i32;
    }

    fn stack(&self) -> Option<(usize, i32, i32)> {
        (self.sframe != NO_FRAME && self.hi > self.lo).then_some((
            usize::from(self.sframe),
            self.lo,
            self.hi,
        ))
    }
}

/// Carries the marks after `h`'s instruction to before it (the kernel's
/// `backtrack_insn`). Marking more than needed is always sound; every rule errs that way.
pub fn back(insns: &[Insn], h: &Hist, m: &mut Marks) {
    if m.all {
        return;
    }
    let d = usize::from(h.depth);
    if d >= FRAMES {
        m.all = true;
        return;
    }
    let i = insns[h.pc as usize];
    let dst = usize::from(i.dst);
    let src = usize::from(i.src);
    let x = i.code & op::X != 0;
    let has = |m: &Marks, r: usize| m.regs[d] & (1 << r) != 0;
    match i.class() {
        op::ALU | op::ALU64 => {
            let o = i.code & 0xf0;
            if !has(m, dst) {
                return;
            }
            if o == op::MOV {
                m.regs[d] &= !(1 << dst);
                if x {
                    m.regs[d] |= 1 << src;
                }
            } else if x && !matches!(o, op::NEG | op::END) {
                m.regs[d] |= 1 << src;
            }
        }
        op::LD => m.regs[d] &= !(1 << dst),
        op::LDX if has(m, dst) => {
            m.regs[d] &= !(1 << dst);
            if let Some((f, lo, hi)) = h.stack() {
                m.set_slots(f, lo, hi);
            }
        }
        op::ST => {
            if let Some((f, lo, hi)) = h.stack() {
                m.clear_slot_if_whole(f, lo, hi);
            }
        }
        op::STX => {
            let Some((f, lo, hi)) = h.stack() else {
                return;
            };
            if i.code & 0xe0 == op::ATOMIC {
                // The slot, the operand and (cmpxchg) r0 feed each other: all or none.
                let cmpxchg = i.imm == op::ATOMIC_CMPXCHG;
                if m.any_slot(f, lo, hi) || has(m, src) || (cmpxchg && has(m, 0)) {
                    m.set_slots(f, lo, hi);
                    m.regs[d] |= 1 << src;
                    if cmpxchg {
                        m.regs[d] |= 1;
                    }
                }
            } else if m.any_slot(f, lo, hi) {
                m.clear_slot_if_whole(f, lo, hi);
                m.regs[d] |= 1 << src;
            }
        }
        op::JMP | op::JMP32 => match i.code & 0xf0 {
            op::JA => {}
            op::CALL if i.is_local_call() => {
                // Back into the caller: the callee's arguments are the caller's r1-r5.
                if let Some(&callee) = m.regs.get(d + 1) {
                    m.regs[d] |= callee & ARG_REGS;
                    m.regs[d + 1] = 0;
                    m.stack[d + 1] = 0;
                }
            }
            op::CALL => {
                // r0 comes from the helper, r1-r5 were clobbered; the arguments were
                // marked where the call was checked. A callback's frame starts here.
                m.regs[d] &= !0b11_1111;
                if d + 1 < FRAMES {
                    m.regs[d + 1] = 0;
                    m.stack[d + 1] = 0;
                }
            }
            op::EXIT => {
                if d == 0 {
                    return;
                }
                let r0 = if h.exit == EXIT_CALL { m.regs[d - 1] & 1 } else { 0 };
                if h.exit == EXIT_CALL {
                    m.regs[d - 1] &= !0b11_1111;
                }
                m.regs[d] = r0;
                m.stack[d] = 0;
            }
            _ => {
                if x && (has(m, dst) || has(m, src)) {
                    m.regs[d] |= 1 << dst | 1 << src;
                }
            }
        },
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moves_and_arithmetic_carry_marks_to_their_sources() {
        let p = spine_isa::assemble(
            "mov %r2, %r3
             add %r2, %r4
             mov %r4, 7
             exit",
        )
        .expect("asm");
        let mut m = Marks::default();
        m.set_reg(0, 2);
        back(&p, &Hist::new(1, 0), &mut m);
        assert_eq!(m.regs[0], 1 << 2 | 1 << 4);
        back(&p, &Hist::new(0, 0), &mut m);
        assert_eq!(m.regs[0], 1 << 3 | 1 << 4);
        let mut k = Marks::default();
        k.set_reg(0, 4);
        back(&p, &Hist::new(2, 0), &mut k);
        assert!(k.is_empty(), "a constant needs nothing before it");
    }

    #[test]
    fn spills_and_fills_carry_marks_through_the_stack() {
        let p = spine_isa::assemble(
            "stxdw [%r10-8], %r6
             ldxdw %r7, [%r10-8]
             exit",
        )
        .expect("asm");
        let mut m = Marks::default();
        m.set_reg(0, 7);
        let mut fill = Hist::new(1, 0);
        fill.stack_access(0, -8, 0);
        back(&p, &fill, &mut m);
        assert!(m.slot(0, 0) && !m.reg(0, 7));
        let mut spill = Hist::new(0, 0);
        spill.stack_access(0, -8, 0);
        back(&p, &spill, &mut m);
        assert!(m.reg(0, 6) && !m.slot(0, 0));
    }

    #[test]
    fn calls_and_exits_move_marks_between_frames() {
        let p = spine_isa::assemble(
            "call local f
             exit
             f: mov %r0, %r1
             exit",
        )
        .expect("asm");
        let mut m = Marks::default();
        m.set_reg(0, 0);
        let mut ex = Hist::new(3, 1);
        ex.exit = EXIT_CALL;
        back(&p, &ex, &mut m);
        assert_eq!((m.regs[0], m.regs[1]), (0, 1));
        back(&p, &Hist::new(2, 1), &mut m);
        assert_eq!(m.regs[1], 1 << 1);
        back(&p, &Hist::new(0, 0), &mut m);
        assert_eq!((m.regs[0], m.regs[1]), (1 << 1, 0));
    }
}
