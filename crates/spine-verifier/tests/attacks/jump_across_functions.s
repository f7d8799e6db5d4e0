; jumps from a callee into the entry function
; expect: JumpOutOfSubprog
call local f
back: mov %r0, 2
exit
f: ja back
