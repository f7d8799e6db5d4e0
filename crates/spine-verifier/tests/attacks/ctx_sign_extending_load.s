; a sign-extending load of a context field
; expect: CtxAccess
ldxsw %r0, [%r1+12]
exit
