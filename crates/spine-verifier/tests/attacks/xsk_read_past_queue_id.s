; the only readable field of an XSKMAP entry is queue_id at offset 0: offset 4 holds
; spine's port or endpoint, which the program may not see
; expect: XdpSockAccess
stw [%r10-4], 0
mov %r2, %r10
add %r2, -4
lddw %r1, map[16]
call 1
jeq %r0, 0, out
ldxw %r0, [%r0+4]
out: mov %r0, 2
exit

