; while (p < data_end) sum += *p++
; expect: accept
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]
mov %r0, 0
loop: jge %r2, %r3, out
ldxb %r4, [%r2+0]
add %r0, %r4
add %r2, 1
ja loop
out: and %r0, 3
exit
