; reads past the end of .data through a direct value address
; expect: MapValueOutOfBounds
lddw %r1, map_value[7]+60
ldxdw %r0, [%r1+0]
exit
