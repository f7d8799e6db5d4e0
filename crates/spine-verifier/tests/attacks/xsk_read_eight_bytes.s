; an 8-byte read of an XSKMAP entry would see the port or endpoint behind queue_id
; expect: XdpSockAccess
stw [%r10-4], 0
mov %r2, %r10
add %r2, -4
lddw %r1, map[16]
call 1
jeq %r0, 0, out
ldxdw %r0, [%r0+0]
out: mov %r0, 2
exit

