; an ld_ind packet load
; expect: LegacyPacketLoad
mov %r6, %r1
mov %r2, 0
ldindw %r2, 12
exit
