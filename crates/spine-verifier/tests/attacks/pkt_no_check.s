; reads the EtherType without comparing against data_end
; expect: PacketOutOfBounds
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]

ldxh %r0, [%r2+12]
exit
