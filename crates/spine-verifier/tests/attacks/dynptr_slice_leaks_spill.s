; spills a pointer into the buffer of a live bpf_dynptr_slice slice, which may be that
; buffer: a read through the slice would leak the pointer
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
call 1397752066
jeq %r0, 0, out
stxdw [%r10-32], %r6
ldxdw %r0, [%r0+0]
exit
out: mov %r0, 2
exit
