; reads 8 bytes of xdp_md.data
; expect: CtxAccess
ldxdw %r0, [%r1+0]
exit
