; jumps past the last instruction
; expect: Isa(JumpOutOfRange)
mov %r0, 0
ja +5
exit
