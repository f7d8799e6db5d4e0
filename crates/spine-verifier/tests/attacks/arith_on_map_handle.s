; moves a map handle
; expect: PointerArithProhibited
lddw %r1, map[0]
add %r1, 8
mov %r0, 2
exit
