; an atomic add into an XSKMAP entry's queue_id
; expect: XdpSockWrite
stw [%r10-4], 0
mov %r2, %r10
add %r2, -4
lddw %r1, map[16]
call 1
jeq %r0, 0, out
mov %r1, 1
lock add32 [%r0+0], %r1
out: mov %r0, 2
exit

