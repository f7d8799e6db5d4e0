; overwrites r10
; expect: Isa(WriteToFp)
mov %r10, 0
mov %r0, 0
exit
