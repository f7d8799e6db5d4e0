; writes below the 512-byte frame
; expect: StackOutOfBounds
stdw [%r10-520], 1
mov %r0, 2
exit
