use crate::op;

/// Bytes in one instruction slot.
pub const INSN_SIZE: usize = 8;

/// One 64-bit instruction slot. `lddw` occupies two consecutive slots; the second
/// carries only the upper 32 bits of the immediate in `imm` (all other fields zero).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, Debug)]
pub struct Insn {
    pub code: u8,
    pub dst: u8,
    pub src: u8,
    pub off: i16,
    pub imm: i32,
}

impl Insn {
    pub const fn new(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Self {
        Insn { code, dst, src, off, imm }
    }

    /// Decodes a little-endian instruction slot.
    pub fn from_bytes(b: [u8; INSN_SIZE]) -> Self {
        Insn {
            code: b[0],
            dst: b[1] & 0x0f,
            src: b[1] >> 4,
            off: i16::from_le_bytes([b[2], b[3]]),
            imm: i32::from_le_bytes([b[4], b[5], b[6], b[7]]),
        }
    }

    /// Encodes as a little-endian instruction slot.
    pub fn to_bytes(self) -> [u8; INSN_SIZE] {
        let off = self.off.to_le_bytes();
        let imm = self.imm.to_le_bytes();
        [
            self.code,
            (self.dst & 0x0f) | (self.src << 4),
            off[0],
            off[1],
            imm[0],
            imm[1],
            imm[2],
            imm[3],
        ]
    }

    /// Decodes a byte stream whose length is a multiple of 8; returns `None` otherwise.
    pub fn decode_all(bytes: &[u8]) -> Option<Vec<Insn>> {
        if !bytes.len().is_multiple_of(INSN_SIZE) {
            return None;
        }
        Some(
            bytes
                .chunks_exact(INSN_SIZE)
                .map(|c| Insn::from_bytes(c.try_into().expect("chunk of 8")))
                .collect(),
        )
    }

    pub fn encode_all(insns: &[Insn]) -> Vec<u8> {
        insns.iter().flat_map(|i| i.to_bytes()).collect()
    }

    /// The instruction class (low three bits of the opcode).
    pub const fn class(self) -> u8 {
        self.code & 0x07
    }

    /// True for the first slot of a two-slot `lddw`.
    pub const fn is_lddw(self) -> bool {
        self.code == op::LD | op::IMM | op::DW
    }

    /// Builds the two slots of `lddw dst, imm64` with the given pseudo source.
    pub const fn lddw(dst: u8, src: u8, imm: u64) -> [Insn; 2] {
        [
            Insn::new(op::LD | op::IMM | op::DW, dst, src, 0, imm as u32 as i32),
            Insn::new(0, 0, 0, 0, (imm >> 32) as u32 as i32),
        ]
    }

    /// True for a bpf-to-bpf call (`call` with `src == PSEUDO_CALL`).
    pub const fn is_local_call(self) -> bool {
        self.code == op::JMP | op::CALL && self.src == op::PSEUDO_CALL
    }

    /// True for a helper call by static id.
    pub const fn is_helper_call(self) -> bool {
        self.code == op::JMP | op::CALL && self.src == 0
    }

    pub const fn is_exit(self) -> bool {
        self.code == op::JMP | op::EXIT
    }

    /// Target slot of a jump or local call at `pc`, if this instruction has one.
    /// `ja32` (JMP32|JA) takes its offset from `imm`; local calls are relative to `pc + 1`.
    pub fn branch_target(self, pc: usize) -> Option<i64> {
        let class = self.class();
        if class != op::JMP && class != op::JMP32 {
            return None;
        }
        let o = self.code & 0xf0;
        let rel = match o {
            op::CALL if self.src == op::PSEUDO_CALL && class == op::JMP => self.imm as i64,
            op::CALL | op::EXIT => return None,
            op::JA if class == op::JMP32 => self.imm as i64,
            _ => self.off as i64,
        };
        Some(pc as i64 + 1 + rel)
    }
}
