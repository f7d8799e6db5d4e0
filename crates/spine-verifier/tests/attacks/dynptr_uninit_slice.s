; slices a dynptr that was never made
; expect: DynptrUninit
stdw [%r10-16], 0
stdw [%r10-8], 0
mov %r1, %r10
add %r1, -16
mov %r2, 0
mov %r3, 0
mov %r4, 8
call 1397752066
mov %r0, 2
exit
