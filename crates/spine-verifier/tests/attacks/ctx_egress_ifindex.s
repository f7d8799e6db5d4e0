; reads egress_ifindex outside a devmap program
; expect: CtxAccess
ldxw %r0, [%r1+20]
exit
