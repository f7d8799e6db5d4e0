; reads 2 bytes of xdp_md.data
; expect: CtxAccess
ldxh %r0, [%r1+0]
exit
