; while (1) reads the first byte, checking data_end inside
; expect: accept
mov %r6, %r1
mov %r0, 0
loop: ldxw %r2, [%r6+0]
ldxw %r3, [%r6+4]
mov %r4, %r2
add %r4, 1
jgt %r4, %r3, loop
ldxb %r5, [%r2+0]
add %r0, %r5
ja loop
