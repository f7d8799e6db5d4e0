; an 8-byte store at fp-12
; expect: MisalignedStack
stdw [%r10-12], 1
mov %r0, 2
exit
