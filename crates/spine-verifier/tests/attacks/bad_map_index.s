; names a map the program does not have
; expect: BadMapIndex
lddw %r1, map[42]
mov %r0, 2
exit
