; moves a packet pointer kept across bpf_xdp_adjust_head and stores it into a map
; value: moved or not, it is still an address
; expect: PointerLeak
mov %r6, %r1
ldxw %r7, [%r6+0]
mov %r1, %r6
mov %r2, 4
call 44
mov %r7, %r7
add %r7, 8
stw [%r10-4], 0
mov %r2, %r10
add %r2, -4
lddw %r1, map[0]
call 1
jeq %r0, 0, out
stxdw [%r0+0], %r7
out: mov %r0, 2
exit
