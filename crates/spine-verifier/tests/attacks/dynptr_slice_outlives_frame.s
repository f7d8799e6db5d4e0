; a callee slices the caller's dynptr into a buffer on its own stack and returns the
; slice, which may be that buffer: gone with the callee's frame
; expect: InvalidMemAccess
mov %r2, 0
mov %r3, %r10
add %r3, -16
call 1397752065
mov %r1, %r10
add %r1, -16
call local f
jeq %r0, 0, out
ldxb %r0, [%r0+0]
exit
out: mov %r0, 2
exit
f: mov %r2, 0
mov %r3, %r10
add %r3, -8
mov %r4, 8
call 1397752066
exit
