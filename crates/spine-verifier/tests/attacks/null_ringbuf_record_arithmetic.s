; moves a maybe-NULL ring buffer record
; expect: PointerArithProhibited
lddw %r1, map[5]
mov %r2, 16
mov %r3, 0
call 131
add %r0, 8
mov %r0, 2
exit
