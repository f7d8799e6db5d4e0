; writes xdp_md.ingress_ifindex
; expect: ReadOnlyCtx
stw [%r1+12], 1
mov %r0, 2
exit
