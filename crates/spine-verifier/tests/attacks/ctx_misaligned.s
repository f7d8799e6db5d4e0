; reads 4 bytes at offset 2 of xdp_md
; expect: CtxAccess
ldxw %r0, [%r1+2]
exit
