; writes at the frame pointer itself (the caller's memory)
; expect: StackOutOfBounds
stdw [%r10+0], 1
mov %r0, 2
exit
