; spills a pointer into the buffer of a live bpf_dynptr_slice_rdwr slice, which may be
; that buffer: a write through the slice would forge the spilled pointer
; expect: SpillUnderSlice
mov %r6, %r1
mov %r2, 0
mov %r3, %r10
add %r3, -16
call 1397752065
mov %r1, %r10
add %r1, -16
mov %r2, 0
mov %r3, %r10
add %r3, -32
mov %r4, 8
call 1397752067
jeq %r0, 0, out
stxdw [%r10-32], %r6
stdw [%r0+0], 1000
ldxdw %r6, [%r10-32]
ldxw %r0, [%r6+0]
out: mov %r0, 2
exit
