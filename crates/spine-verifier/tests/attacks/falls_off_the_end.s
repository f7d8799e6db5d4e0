; ends without exit
; expect: Isa(FallsOffEnd)
mov %r0, 0
