; a 16-byte checksum over an 8-byte buffer at the top of the frame
; expect: StackOutOfBounds
stdw [%r10-8], 0
mov %r1, 0
mov %r2, 0
mov %r3, %r10
add %r3, -8
mov %r4, 16
mov %r5, 0
call 28
mov %r0, 2
exit
