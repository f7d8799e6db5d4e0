; copies the low half of the context pointer
; expect: PointerOpProhibited
mov32 %r0, %r1
exit
