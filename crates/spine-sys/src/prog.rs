//! Program load (`BPF_PROG_LOAD`), with the verifier log fetched the way libbpf does:
//! load without a log first; on failure load again with a log buffer that grows on
//! `ENOSPC`, and hand the log back in the error.

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use spine_isa::Insn;

use crate::sys::{self, bpf_fd, BpfAttr, Cmd, ProgLoadAttr};
use crate::SysError;

/// First verifier-log buffer.
pub const LOG_BUF_START: usize = 1 << 20;
/// Largest verifier-log buffer; a longer log keeps its end (where the error is).
pub const LOG_BUF_MAX: usize = 16 << 20;

/// `BPF_F_XDP_HAS_FRAGS`: the program handles multi-buffer XDP (`SEC("xdp.frags")`).
pub const PROG_F_XDP_HAS_FRAGS: u32 = 1 << 5;
/// `BPF_XDP`: the expected attach type libbpf gives `SEC("xdp")` programs.
pub const ATTACH_XDP: u32 = 37;

/// How many times a load that fails with `EAGAIN` is retried (libbpf's count).
const EAGAIN_RETRIES: usize = 5;

/// A program handed to the kernel verifier.
#[derive(Debug, Clone, Copy)]
pub struct ProgLoad<'a> {
    /// `enum bpf_prog_type` (`spine_abi::prog_type`).
    pub prog_type: u32,
    pub insns: &'a [Insn],
    /// Up to the first NUL; GPL-only helpers need a GPL-compatible license.
    pub license: &'a str,
    /// Sanitised as [`crate::sanitize_name`] does.
    pub name: &'a str,
    /// `BPF_F_*` load flags, e.g. [`PROG_F_XDP_HAS_FRAGS`].
    pub prog_flags: u32,
    pub expected_attach_type: u32,
    /// Verifier log level (1, 2, 4 = stats). 0 asks for a log only when the load fails;
    /// otherwise the log is kept in [`KernelProg::log`] even on success, and a log longer
    /// than [`LOG_BUF_MAX`] fails the load with `ENOSPC` (the kernel's rule).
    pub log_level: u32,
}

/// A verified program living in the kernel, closed when dropped.
#[derive(Debug)]
pub struct KernelProg {
    fd: OwnedFd,
    prog_type: u32,
    name: String,
    insn_cnt: usize,
    log: Option<String>,
}

/// What the kernel reports about a loaded program (`struct bpf_prog_info`, first fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgInfo {
    pub prog_type: u32,
    pub id: u32,
    /// The kernel's hash of the original instructions.
    pub tag: [u8; 8],
    /// Bytes of JIT-compiled code (0 when the JIT is off).
    pub jited_len: u32,
    /// Bytes of instructions after the verifier's rewrites.
    pub xlated_len: u32,
    pub name: String,
}

/// Loads `insns` as a program of `prog_type` (see [`ProgLoad`] for the arguments).
pub fn load_program(
    prog_type: u32,
    insns: &[Insn],
    license: &str,
    name: &str,
    log_level: u32,
) -> Result<KernelProg, SysError> {
    ProgLoad { prog_type, insns, license, name, prog_flags: 0, expected_attach_type: 0, log_level }
        .load()
}

impl ProgLoad<'_> {
    /// Loads the program. On failure the error carries the kernel's errno (`EACCES` or
    /// `EINVAL` for a verifier refusal) and its verifier log.
    pub fn load(&self) -> Result<KernelProg, SysError> {
        let code = Insn::encode_all(self.insns);
        let insn_cnt = sys::len_u32(Cmd::ProgLoad, self.insns.len())?;
        let license_bytes = self.license.split('\0').next().unwrap_or_default();
        let license = CString::new(license_bytes).expect("cut at the first NUL");
        // Functions whose address the program takes must be described by BTF.
        let funcs = match crate::func_info::func_info(self.insns) {
            Some(fi) => Some((crate::func_info::load_btf(&fi.btf)?, fi)),
            None => None,
        };
        // One BPF_PROG_LOAD; on failure also the log size the kernel needed (6.4+, else 0).
        let attempt = |log_level: u32, log: &mut [u8]| -> Result<OwnedFd, (SysError, usize)> {
            let mut attr = BpfAttr::zeroed();
            let (btf_fd, func_info, func_info_cnt) = match &funcs {
                Some((fd, fi)) => (
                    fd.as_raw_fd() as u32,
                    fi.records.as_ptr() as u64,
                    sys::len_u32(Cmd::ProgLoad, fi.records.len()).map_err(|e| (e, 0))?,
                ),
                None => (0, 0, 0),
            };
            attr.prog_load = ProgLoadAttr {
                prog_btf_fd: btf_fd,
                func_info_rec_size: if func_info_cnt > 0 { 8 } else { 0 },
                func_info,
                func_info_cnt,
                prog_type: self.prog_type,
                insn_cnt,
                insns: sys::uptr(&code),
                license: license.as_ptr() as u64,
                log_level: if log.is_empty() { 0 } else { log_level },
                log_size: sys::len_u32(Cmd::ProgLoad, log.len()).map_err(|e| (e, 0))?,
                log_buf: sys::uptr_mut(log),
                prog_flags: self.prog_flags,
                prog_name: sys::name_field(self.name),
                expected_attach_type: self.expected_attach_type,
                ..ProgLoadAttr::default()
            };
            let mut tries = 0;
            loop {
                // SAFETY: the kernel reads insn_cnt * 8 bytes of `code` (its length), the
                // NUL-terminated `license`, and writes at most log_size bytes of `log`.
                match unsafe { bpf_fd(Cmd::ProgLoad, &mut attr) } {
                    Ok(fd) => return Ok(fd),
                    Err(e) if e.is(libc::EAGAIN) && tries < EAGAIN_RETRIES => tries += 1,
                    Err(mut e) => {
                        e.log = log_text(log);
                        return Err((e, attr.prog_load_out().log_true_size as usize));
                    }
                }
            }
        };
        let with_log = |log_level: u32| -> Result<(OwnedFd, Option<String>), SysError> {
            let mut size = LOG_BUF_START;
            loop {
                let mut log = vec![0u8; size];
                match attempt(log_level, &mut log) {
                    Ok(fd) => return Ok((fd, log_text(&log))),
                    // The log did not fit: grow it, to what the kernel said it needs if
                    // it said so.
                    Err((e, needed)) if e.is(libc::ENOSPC) && size < LOG_BUF_MAX => {
                        size = needed.max(size * 4).min(LOG_BUF_MAX);
                    }
                    Err((e, _)) => return Err(e),
                }
            }
        };

        let (fd, log) = if self.log_level == 0 {
            match attempt(0, &mut []) {
                Ok(fd) => (fd, None),
                Err((first, _)) => match with_log(1) {
                    // Loaded on the second try (a transient failure): no log was asked for.
                    Ok((fd, _)) => (fd, None),
                    // The first errno is the kernel's verdict; the retry only adds the log.
                    Err(retry) => return Err(SysError { log: retry.log, ..first }),
                },
            }
        } else {
            with_log(self.log_level)?
        };
        Ok(KernelProg {
            fd,
            prog_type: self.prog_type,
            name: sys::sanitize_name(self.name),
            insn_cnt: self.insns.len(),
            log,
        })
    }
}

impl KernelProg {
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    pub fn prog_type(&self) -> u32 {
        self.prog_type
    }

    /// The name as the kernel holds it (sanitised, at most 15 bytes).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Instruction slots handed to the kernel.
    pub fn insn_cnt(&self) -> usize {
        self.insn_cnt
    }

    /// The verifier log of a load with a non-zero `log_level`.
    pub fn log(&self) -> Option<&str> {
        self.log.as_deref()
    }

    /// What the kernel reports about the program.
    pub fn info(&self) -> Result<ProgInfo, SysError> {
        prog_info(self.fd.as_fd())
    }
}

/// What the kernel reports about the program `fd` names.
pub fn prog_info(fd: BorrowedFd<'_>) -> Result<ProgInfo, SysError> {
    // struct bpf_prog_info up to the end of `name`.
    let mut buf = [0u8; 80];
    sys::obj_info(fd.as_raw_fd(), &mut buf)?;
    let word = |at: usize| u32::from_ne_bytes(buf[at..at + 4].try_into().expect("4"));
    Ok(ProgInfo {
        prog_type: word(0),
        id: word(4),
        tag: buf[8..16].try_into().expect("8"),
        jited_len: word(16),
        xlated_len: word(20),
        name: sys::name_from_field(&buf[64..80]),
    })
}

/// The log text up to its NUL; `None` when the kernel wrote nothing.
fn log_text(log: &[u8]) -> Option<String> {
    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
    (end > 0).then(|| String::from_utf8_lossy(&log[..end]).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_text_stops_at_nul() {
        assert_eq!(log_text(b"abc\0def"), Some("abc".to_string()));
        assert_eq!(log_text(b"\0\0"), None);
        assert_eq!(log_text(b""), None);
        assert_eq!(log_text(b"no nul"), Some("no nul".to_string()));
    }
}
