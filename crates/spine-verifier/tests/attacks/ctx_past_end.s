; reads past the end of xdp_md
; expect: CtxAccess
ldxw %r0, [%r1+24]
exit
