; jumps into the second slot of lddw
; expect: Isa(JumpIntoLddw)
ja +1
lddw %r0, 0x1122334455667788
exit
