; reads past the end of an 8-byte slice
; expect: MemOutOfBounds
mov %r2, 0
mov %r3, %r10
add %r3, -16
call 1397752065
mov %r1, %r10
add %r1, -16
mov %r2, 0
mov %r3, 0
mov %r4, 8
call 1397752066
jeq %r0, 0, out
ldxb %r0, [%r0+8]
out: mov %r0, 2
exit
