use super::*;

fn ldxw(dst: u8, src: u8, off: i16) -> Insn {
    Insn::new(op::LDX | op::MEM | op::W, dst, src, off, 0)
}
fn ldxdw(dst: u8, src: u8, off: i16) -> Insn {
    Insn::new(op::LDX | op::MEM | op::DW, dst, src, off, 0)
}
fn stxdw(dst: u8, src: u8, off: i16) -> Insn {
    Insn::new(op::STX | op::MEM | op::DW, dst, src, off, 0)
}
fn mov(dst: u8, src: u8) -> Insn {
    Insn::new(op::ALU64 | op::MOV | op::X, dst, src, 0, 0)
}
fn movk(dst: u8, imm: i32) -> Insn {
    Insn::new(op::ALU64 | op::MOV | op::K, dst, 0, 0, imm)
}
fn call_local(rel: i32) -> Insn {
    Insn::new(op::JMP | op::CALL, 0, op::PSEUDO_CALL, 0, rel)
}
fn exit() -> Insn {
    Insn::new(op::JMP | op::EXIT, 0, 0, 0, 0)
}

fn rewritten(mut p: Vec<Insn>, functions: &[usize]) -> Result<Vec<Insn>, CtxError> {
    rewrite(&mut p, functions).map(|()| p)
}

#[test]
fn loads_of_every_field_are_redirected() {
    let p = vec![
        ldxw(2, 1, xdp_md::DATA),
        ldxw(3, 1, xdp_md::DATA_END),
        ldxw(4, 1, xdp_md::DATA_META),
        ldxw(5, 1, xdp_md::INGRESS_IFINDEX),
        ldxw(0, 1, xdp_md::RX_QUEUE_INDEX),
        exit(),
    ];
    let out = rewritten(p, &[0]).unwrap();
    assert_eq!(out[0], ldxdw(2, 1, 0));
    assert_eq!(out[1], ldxdw(3, 1, 8));
    assert_eq!(out[2], ldxdw(4, 1, 16));
    assert_eq!(out[3], ldxw(5, 1, 24));
    assert_eq!(out[4], ldxw(0, 1, 28));
}

#[test]
fn context_followed_through_moves_spills_and_calls() {
    // main: r6 = r1; spill r6; r1 = 0; r7 = fill; call f(r7); r0 = *(r6 + data); exit
    // f:    r0 = *(r1 + data_end); exit
    let p = vec![
        mov(6, 1),
        stxdw(10, 6, -16),
        movk(1, 0),
        ldxdw(7, 10, -16),
        mov(1, 7),
        call_local(2),
        ldxw(0, 6, xdp_md::DATA),
        exit(),
        ldxw(0, 1, xdp_md::DATA_END),
        exit(),
    ];
    let out = rewritten(p, &[0, 8]).unwrap();
    assert_eq!(out[3], ldxdw(7, 10, -16), "stack fill is not a context access");
    assert_eq!(out[6], ldxdw(0, 6, 0));
    assert_eq!(out[8], ldxdw(0, 1, 8), "callee sees the context in r1");
}

#[test]
fn non_context_loads_are_left_alone() {
    // r2 = data (a packet pointer); r0 = *(u32 *)(r2 + 4) reads the packet.
    let p = vec![ldxw(2, 1, 0), ldxw(0, 2, 4), exit()];
    let out = rewritten(p, &[0]).unwrap();
    assert_eq!(out[1], ldxw(0, 2, 4));
}

#[test]
fn context_returned_by_a_callee_is_tracked() {
    // main: call f; r0 = *(r0 + data); exit.  f: r0 = r1; exit
    let p = vec![call_local(2), ldxw(0, 0, 0), exit(), mov(0, 1), exit()];
    let out = rewritten(p, &[0, 3]).unwrap();
    assert_eq!(out[1], ldxdw(0, 0, 0));
}

#[test]
fn refusals_match_the_kernel() {
    let kind = |p: Vec<Insn>| rewritten(p, &[0]).unwrap_err().kind;
    assert_eq!(
        kind(vec![Insn::new(op::ST | op::MEM | op::W, 1, 0, 0, 7), exit()]),
        CtxErrorKind::Write
    );
    assert_eq!(
        kind(vec![Insn::new(op::LDX | op::MEM | op::H, 0, 1, 0, 0), exit()]),
        CtxErrorKind::BadAccess { off: 0, size: 2 }
    );
    assert_eq!(kind(vec![ldxw(0, 1, 24), exit()]), CtxErrorKind::BadAccess { off: 24, size: 4 });
    assert_eq!(kind(vec![ldxw(0, 1, 2), exit()]), CtxErrorKind::BadAccess { off: 2, size: 4 });
    assert_eq!(kind(vec![ldxw(0, 1, xdp_md::EGRESS_IFINDEX), exit()]), CtxErrorKind::EgressIfindex);
    assert_eq!(
        kind(vec![Insn::new(op::ALU64 | op::ADD | op::K, 1, 0, 0, 4), ldxw(0, 1, 0), exit()]),
        CtxErrorKind::Arithmetic { reg: 1 }
    );
    // Storing the context pointer through a non-stack pointer would let it escape.
    assert_eq!(
        kind(vec![ldxw(2, 1, 0), stxdw(2, 1, 0), movk(0, 2), exit()]),
        CtxErrorKind::Escapes { reg: 1 }
    );
}

#[test]
fn a_register_that_is_the_context_on_one_path_only_is_refused() {
    // if r2 == 0 goto +1; r1 = 0; r0 = *(r1 + 0)
    let p = vec![
        movk(2, 0),
        Insn::new(op::JMP | op::JEQ | op::K, 2, 0, 1, 0),
        movk(1, 0),
        ldxw(0, 1, 0),
        exit(),
    ];
    assert_eq!(
        rewritten(p, &[0]).unwrap_err(),
        CtxError { pc: 3, kind: CtxErrorKind::Ambiguous { reg: 1 } }
    );
}

#[test]
fn loops_reach_a_fixpoint() {
    // r6 = r1; loop: r0 = *(r6 + data); r2 += 1; if r2 < 10 goto loop; exit
    let p = vec![
        mov(6, 1),
        movk(2, 0),
        ldxw(0, 6, 0),
        Insn::new(op::ALU64 | op::ADD | op::K, 2, 0, 0, 1),
        Insn::new(op::JMP | op::JLT | op::K, 2, 0, -3, 10),
        exit(),
    ];
    let out = rewritten(p, &[0]).unwrap();
    assert_eq!(out[2], ldxdw(0, 6, 0));
}
