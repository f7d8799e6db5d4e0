; walks from data_end back towards data
; expect: accept
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]
mov %r0, 0
loop: jge %r2, %r3, out
ldxb %r4, [%r2+0]
xor %r0, %r4
add %r2, 1
ja loop
out: mov %r0, 2
exit
