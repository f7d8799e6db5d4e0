; compares a packet pointer kept across bpf_xdp_adjust_head with a number: unlike a
; comparison with the moved packet's bounds, this would learn its address bit by bit
; expect: PointerComparison
mov %r6, %r1
ldxw %r7, [%r6+0]
mov %r1, %r6
mov %r2, 4
call 44
lddw %r3, 0x7fff00000000
jgt %r7, %r3, out
mov %r0, 1
exit
out: mov %r0, 2
exit
