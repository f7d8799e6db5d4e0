; queue_id is read whole (4 bytes), as the kernel's bpf_xdp_sock_is_valid_access wants
; expect: XdpSockAccess
stw [%r10-4], 0
mov %r2, %r10
add %r2, -4
lddw %r1, map[16]
call 1
jeq %r0, 0, out
ldxb %r0, [%r0+0]
out: mov %r0, 2
exit

