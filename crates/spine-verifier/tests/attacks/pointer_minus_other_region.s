; subtracts the context pointer from the frame pointer
; expect: PointerPointerArith
mov %r2, %r10
sub %r2, %r1
mov %r0, 2
exit
