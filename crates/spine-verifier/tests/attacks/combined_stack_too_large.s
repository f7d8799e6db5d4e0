; a 304-byte frame calling a 304-byte frame
; expect: CombinedStackTooLarge
stdw [%r10-304], 0
call local f
mov %r0, 2
exit
f: stdw [%r10-304], 0
mov %r0, 0
exit
