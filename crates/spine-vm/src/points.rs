//! Which bpf-to-bpf calls are progress points. A call into a *leaf* subprogram (no calls
//! of its own, every jump forward and inside it) runs at most the leaf's length before
//! it returns, so counting it adds nothing to the bound on straight-line work between
//! points; every other call counts. Both engines use this one analysis, so their point
//! counts, and the watchdog's decisions, stay identical.

use spine_isa::{op, Insn};

/// `counted[pc]` is true for each bpf-to-bpf call at `pc` that is a progress point.
/// `insns` must have passed [`spine_isa::validate`] (call targets inside the program).
pub fn counted_calls(insns: &[Insn]) -> Vec<bool> {
    let is_local_call =
        |i: &Insn| i.class() == op::JMP && i.code & 0xf0 == op::CALL && i.src == op::PSEUDO_CALL;
    let target = |pc: usize, i: &Insn| i.branch_target(pc).map(|t| t as usize);
    // Subprograms start at 0, at every call target and at every callback; each runs to
    // the next start.
    let mut starts: Vec<usize> = std::iter::once(0)
        .chain(crate::callback_entries(insns))
        .chain(
            insns
                .iter()
                .enumerate()
                .filter(|(_, i)| is_local_call(i))
                .filter_map(|(pc, i)| target(pc, i)),
        )
        .collect();
    starts.sort_unstable();
    starts.dedup();
    let is_leaf = |start: usize| {
        let end = starts.iter().copied().find(|&s| s > start).unwrap_or(insns.len());
        let mut pc = start;
        while pc < end {
            let i = &insns[pc];
            let class = i.class();
            if class == op::JMP || class == op::JMP32 {
                match i.code & 0xf0 {
                    op::CALL if i.src == op::PSEUDO_CALL => return false,
                    op::CALL | op::EXIT => {}
                    _ => match target(pc, i) {
                        Some(t) if t > pc && t < end => {}
                        _ => return false,
                    },
                }
            }
            pc += if i.is_lddw() { 2 } else { 1 };
        }
        true
    };
    insns
        .iter()
        .enumerate()
        .map(|(pc, i)| is_local_call(i) && !target(pc, i).is_some_and(is_leaf))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::counted_calls;

    fn counted(src: &str) -> Vec<usize> {
        let insns = spine_isa::assemble(src).expect("assembles");
        counted_calls(&insns).iter().enumerate().filter(|(_, c)| **c).map(|(pc, _)| pc).collect()
    }

    #[test]
    fn calls_into_leaves_are_not_points() {
        // main calls a straight-line leaf (a forward branch only): not a point.
        let src = "call local f\nexit\nf: jeq %r1, 0, out\nmov %r0, 1\nout: exit";
        assert_eq!(counted(src), Vec::<usize>::new());
    }

    #[test]
    fn calls_into_loops_or_callers_are_points() {
        // The callee loops (a backward jump): the call counts.
        assert_eq!(counted("call local f\nexit\nf: add %r1, -1\njne %r1, 0, f\nexit"), vec![0]);
        // The callee calls a leaf: the outer call counts, the inner does not.
        assert_eq!(
            counted("call local f\nexit\nf: call local g\nexit\ng: mov %r0, 0\nexit"),
            vec![0]
        );
        // A jump to itself is a loop.
        assert_eq!(counted("call local f\nexit\nf: ja f\nexit"), vec![0]);
        // A jump out of the callee's range forfeits the exemption.
        assert_eq!(counted("main: call local f\nexit\nf: mov %r0, 1\nja main\nexit"), vec![0]);
    }
}
