; reads data_meta without comparing it to data
; expect: PacketOutOfBounds
ldxw %r2, [%r1+8]
ldxw %r0, [%r2+0]
exit
