; subtracts a pointer from a number
; expect: PointerOpProhibited
mov %r0, 100
sub %r0, %r10
exit
