; compares a packet pointer with a number
; expect: PointerComparison
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]

jgt %r2, 1000, out
out: mov %r0, 2
exit
