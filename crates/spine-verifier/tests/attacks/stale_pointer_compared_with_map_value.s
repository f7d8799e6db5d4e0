; compares a packet pointer kept across bpf_xdp_adjust_head with a map value pointer:
; only the moved packet's own pointers may be compared with it
; expect: PointerComparison
mov %r6, %r1
ldxw %r7, [%r6+0]
mov %r1, %r6
mov %r2, 4
call 44
stw [%r10-4], 0
mov %r2, %r10
add %r2, -4
lddw %r1, map[0]
call 1
jeq %r0, 0, out
jgt %r7, %r0, out
mov %r0, 1
exit
out: mov %r0, 2
exit
