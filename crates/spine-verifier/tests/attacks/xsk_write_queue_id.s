; an XSKMAP lookup (the kernel's xdp_sock) is read-only: a store into queue_id
; expect: XdpSockWrite
stw [%r10-4], 0
mov %r2, %r10
add %r2, -4
lddw %r1, map[16]
call 1
jeq %r0, 0, out
stw [%r0+0], 7
out: mov %r0, 2
exit

