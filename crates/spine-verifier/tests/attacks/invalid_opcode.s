; an opcode no class defines
; expect: Isa(UnknownOpcode)
.insn 0x00000000000000ff
exit
