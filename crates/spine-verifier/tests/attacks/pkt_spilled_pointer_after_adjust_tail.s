; spills a checked packet pointer, resizes the packet, and fills it
; expect: InvalidMemAccess
mov %r6, %r1
ldxw %r7, [%r6+0]
ldxw %r8, [%r6+4]
mov %r4, %r7
add %r4, 14
jgt %r4, %r8, out
stxdw [%r10-8], %r7
mov %r1, %r6
mov %r2, -4
call 65
ldxdw %r7, [%r10-8]
ldxb %r0, [%r7+0]
out: mov %r0, 2
exit
