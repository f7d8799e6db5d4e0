; writes xdp_md.data
; expect: ReadOnlyCtx
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]

stxw [%r1+0], %r3
mov %r0, 2
exit
