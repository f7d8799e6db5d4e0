; spills a pointer into the buffer bpf_map_update_elem copies into a map
; expect: PointerLeak
stdw [%r10-8], 0
stxdw [%r10-16], %r1
stdw [%r10-24], 0
lddw %r1, map[1]
mov %r2, %r10
add %r2, -8
mov %r3, %r10
add %r3, -24
mov %r4, 0
call 2
mov %r0, 2
exit
