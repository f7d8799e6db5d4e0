; an unbounded loop calling bpf_map_lookup_elem each round
; expect: accept
mov %r6, 0
loop: stxw [%r10-4], %r6
mov %r2, %r10
add %r2, -4
lddw %r1, map[0]
call 1
jeq %r0, 0, next
ldxdw %r1, [%r0+0]
add %r1, 1
stxdw [%r0+0], %r1
next: add %r6, 1
ja loop
