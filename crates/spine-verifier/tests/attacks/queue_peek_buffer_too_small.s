; peeks an 8-byte element into the last 4 bytes of the stack
; expect: StackOutOfBounds
mov %r2, %r10
add %r2, -4
lddw %r1, map[11]
call 89
mov %r0, 2
exit
