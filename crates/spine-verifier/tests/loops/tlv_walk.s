; walks type-length-value records of variable length to the end of the packet
; expect: accept
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]
mov %r0, 2
loop: mov %r4, %r2
add %r4, 2
jgt %r4, %r3, out
ldxb %r5, [%r2+1]
ldxb %r6, [%r2+0]
jeq %r6, 0, out
add %r5, 2
add %r2, %r5
ja loop
out: exit
