; no arithmetic on an XSKMAP entry (the kernel: pointer arithmetic on xdp_sock prohibited)
; expect: PointerArithProhibited
stw [%r10-4], 0
mov %r2, %r10
add %r2, -4
lddw %r1, map[16]
call 1
jeq %r0, 0, out
add %r0, 4
ldxw %r0, [%r0-4]
out: mov %r0, 2
exit

