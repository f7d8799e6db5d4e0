; writes through a read-only bpf_dynptr_slice
; expect: ReadOnlySlice
mov %r2, 0
mov %r3, %r10
add %r3, -16
call 1397752065
mov %r1, %r10
add %r1, -16
mov %r2, 0
mov %r3, 0
mov %r4, 8
call 1397752066
jeq %r0, 0, out
stb [%r0+0], 1
out: mov %r0, 2
exit
