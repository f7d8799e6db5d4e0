; fills a stack buffer in a counted loop, then reads it back
; expect: accept
stdw [%r10-8], 0
stdw [%r10-16], 0
mov %r1, 0
loop: mov %r2, %r10
add %r2, -16
add %r2, %r1
stb [%r2+0], 7
add %r1, 1
jlt %r1, 16, loop
ldxdw %r0, [%r10-16]
and %r0, 3
exit
