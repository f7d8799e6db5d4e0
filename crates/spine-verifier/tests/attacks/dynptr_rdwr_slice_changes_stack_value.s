; a number stored in a live bpf_dynptr_slice_rdwr slice's stack buffer, then changed
; through the slice (which may be that buffer) and used as a stack offset: the stored
; value must not be trusted
; expect: PointerOffsetUnbounded
stdw [%r10-64], 0
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
stdw [%r10-32], 0
stdw [%r0+0], 100000
ldxdw %r1, [%r10-32]
mov %r2, %r10
add %r2, -64
add %r2, %r1
ldxb %r0, [%r2+0]
out: mov %r0, 2
exit
