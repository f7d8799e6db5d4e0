; an ld_abs packet load
; expect: LegacyPacketLoad
mov %r6, %r1
ldabsh 12
exit
